"""How long the test suite takes: the full default run (``python -m pytest``, the README's test
command and CI's) and the first check (``python -m pytest -m quick``), each timed once, wall clock.

Writes ``sweeps/suite_time.md`` beside this script with the date, the machine (cores, memory, load
average before and after each run) and pytest's own closing line, so the README can link the figure
instead of copying it, and the full run's slowest tests (pytest's ``--durations``), so the 20-minute
budget of the default run is managed from measurements. A run that fails is written down as failed, with its closing line, and the
script exits non-zero.

Usage (from the repository root, in the environment the README sets up)::

    python sweeps/suite_time.py            # both runs (about 15-25 minutes on 2 cores)
    python sweeps/suite_time.py --quick    # the quick subset only (keeps the full run's row)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "suite_time.md"
RUNS = {"full": ["-m", "pytest", "-q"], "quick": ["-m", "pytest", "-q", "-m", "quick"]}
#: how many of the full run's slowest test phases are listed
SLOWEST = 25


def _memory_gib() -> float:
    with open("/proc/meminfo") as f:
        kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    return kib / 2**20


def time_run(name: str) -> dict:
    """Run one of :data:`RUNS` in a child interpreter from the repository root.

    Returns:
        ``{"run", "command", "seconds" (wall clock), "closing" (pytest's last line), "ok", "load_before",
        "load_after" (1-minute load averages), "failed" (pytest's FAILED lines), "slowest" (pytest's
        ``--durations`` lines: seconds, phase, test id; the full run only)}``.
    """
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    extra = [f"--durations={SLOWEST}", "--durations-min=1"] if name == "full" else []
    done = subprocess.run([sys.executable, *RUNS[name], *extra], cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - start
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    closing = next((line.strip("= ") for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)),
                   f"no closing line (exit {done.returncode})")
    return {"run": name, "command": "python " + " ".join(RUNS[name]).replace(" -q", ""), "seconds": seconds,
            "closing": closing, "ok": done.returncode == 0, "load_before": load_before,
            "load_after": os.getloadavg()[0], "failed": [line for line in lines if line.startswith("FAILED ")],
            "slowest": [line.strip() for line in lines if re.match(r"\s*\d+\.\d+s (call|setup|teardown) ", line)]}


def previous_rows() -> dict[str, str]:
    """The table rows of the last report, by run name (to keep a row this invocation does not redo)."""
    if not OUT.exists():
        return {}
    rows = {}
    for line in OUT.read_text().splitlines():
        m = re.match(r"\| `python -m pytest( -m quick)?` \|", line)
        if m:
            rows["quick" if m.group(1) else "full"] = line
    return rows


def previous_slowest() -> list[str]:
    """The slowest-tests section of the last report (kept when this invocation does not redo the full run)."""
    if not OUT.exists():
        return []
    text = OUT.read_text()
    return text[text.index("## Slowest"):].splitlines() if "## Slowest" in text else []


def write(results: list[dict]) -> None:
    rows = previous_rows()
    slowest = previous_slowest()
    today = dt.date.today().isoformat()
    for r in results:
        rows[r["run"]] = (f"| `{r['command']}` | {r['seconds'] / 60:.1f} | {r['closing']} | {today} "
                          f"| {r['load_before']:.1f} / {r['load_after']:.1f} |")
        if r["slowest"]:
            slowest = [f"## Slowest test phases of the full run ({today}, pytest --durations={SLOWEST}; with "
                       "xdist's two workers, a shared build's cost lands on the first test that needs it)", "",
                       "| seconds | phase | test |", "|---:|---|---|",
                       *(f"| {d.split()[0][:-1]} | {d.split()[1]} | `{' '.join(d.split()[2:])}` |" for d in r["slowest"]),
                       ""]
    text = [
        "# How long the tests take",
        "",
        "Written by `python sweeps/suite_time.py` (each run once, wall clock, on the machine below; the",
        "load average is the machine's 1-minute figure before and after the run, other work included).",
        f"Machine: {os.cpu_count()} cores, {_memory_gib():.0f} GiB, {platform.machine()}, Python "
        f"{platform.python_version()}.",
        "",
        "| command | minutes | pytest's closing line | date | load before / after |",
        "|---|---:|---|---|---|",
        *(rows[k] for k in ("full", "quick") if k in rows),
        "",
        *slowest,
    ]
    OUT.write_text("\n".join(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="time only the quick subset")
    args = ap.parse_args()
    results = []
    for name in (["quick"] if args.quick else ["full", "quick"]):
        print(f"timing {name} run ...", flush=True)
        results.append(time_run(name))
        print(f"  {results[-1]['seconds'] / 60:.1f} min: {results[-1]['closing']}", flush=True)
        for line in results[-1]["failed"]:  # which tests, so a failed timing run says what to look at
            print(f"  {line}", flush=True)
    write(results)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
