"""What every seed method's tests check the same way: a bad flag is refused cleanly, and a
``--quick`` run writes its folder with the ``headline`` object of metrics.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

from onchip.cli import main
from onchip.methods._report import HEADLINE_KEYS, HEADLINE_PAIRED


def assert_refused(command: str, argv: list[str], flag: str, out: Path, capsys) -> str:
    """``onchip <command> <argv>`` exits 2 with one stderr line naming ``flag`` and writes no
    ``out`` folder; returns that line."""
    assert main([command, *argv, "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err
    assert not out.exists()
    return err[0]


def quick_run(command: str, out: Path, *argv: str, files: tuple[str, ...] = ("metrics.json", "results.md")) -> dict:
    """Run ``onchip <command> --quick``; check ``files``, the command line in results.md and the
    headline schema (keys, a known direction, seeds, finite values); return metrics.json."""
    assert main([command, "--quick", "--quiet", "--out", str(out), *argv]) == 0
    for name in files:
        assert (out / name).is_file(), name
    assert f"onchip {command} --quick" in (out / "results.md").read_text()
    metrics = json.loads((out / "metrics.json").read_text())
    h = metrics["headline"]
    assert tuple(h) in (HEADLINE_KEYS, (*HEADLINE_KEYS, HEADLINE_PAIRED)), list(h)
    for name, paired in h.get(HEADLINE_PAIRED, {}).items():
        assert name in h["baselines"] and len(paired["ci95"]) == 2, (name, paired)
    assert h["direction"] in ("higher", "lower")
    assert h["seeds"] and all(isinstance(s, int) for s in h["seeds"])
    assert all(math.isfinite(v) for v in [h["value"], *h["baselines"].values()])
    return metrics
