"""Progress: a bar on a terminal, whole lines elsewhere (no carriage return before a summary)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from onchip import progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("leave", [False, True])
def test_lines_off_a_terminal_bar_on_one(monkeypatch, leave):
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    lines = io.StringIO()
    with progress.progress_bar(total=4, desc="work", unit="sample", file=lines, leave=leave) as bar:
        for _ in range(4):
            bar.update(1)
    text = lines.getvalue()
    assert "\r" not in text and text.endswith("\n")
    assert all(line.startswith("work:") for line in text.splitlines())
    if leave:  # the final count stays, once
        assert text.count("4/4") == 1 and "4/4" in text.splitlines()[-1]
    terminal = _Terminal()
    with progress.progress_bar(total=4, desc="work", file=terminal, leave=False) as bar:
        bar.update(4)
    assert "\r" in terminal.getvalue()


def test_a_redirected_run_prints_no_bar_remnant(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "onchip.cli", "run", "--samples", "3000", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stdout + proc.stderr and "0%|" not in proc.stderr
    assert proc.stdout.startswith("qubit-readout / kan-readout / golden, 3000 samples\n")
