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


def test_every_bar_goes_through_onchip_progress():
    """No module but onchip.progress makes a tqdm bar: a direct one writes a carriage-return
    update per refresh into a redirected stderr (hundreds of lines in a log)."""
    import ast
    from pathlib import Path

    import onchip

    root = Path(onchip.__file__).parent
    direct = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "progress.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "tqdm" or n.startswith("tqdm.") for n in names):
                direct.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not direct, f"tqdm imported outside onchip.progress: {direct}"


def test_a_method_bar_off_a_terminal_is_a_few_whole_lines(capsys):
    from onchip.methods.ais.samplers import SamplerConfig, run_sampler
    from onchip.methods.ais.targets import make_target

    run_sampler(make_target("gmm2", 2), "em2c", SamplerConfig(n_samples=50, iterations=30, n_target_draws=50),
                seed=0, progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and len(err.splitlines()) <= 3, err[:500]
