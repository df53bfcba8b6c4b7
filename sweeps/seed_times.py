"""Wall and CPU time of each seed method's default command, measured here with ``/usr/bin/time -v``.

A default run should finish in 5 minutes on 2 cores. On a shared machine the wall time depends on
the load, so every row records the CPU seconds (user + system, children included) beside the wall
seconds, the machine's load average before and after the run, its core count and the date. Reading:
a run whose CPU seconds stay under 300 fits on a quiet 2-core machine whatever its threading; over
600 it cannot fit; in between it fits only if it keeps both cores busy.

Each measured command is ``onchip <method> [required flags] --quiet --out <scratch>``, best not niced
(``nice`` would stretch its wall time on a shared machine; a row run under ``nice`` says so); the scratch folder is under the system's
temporary folder and is removed afterwards, after the row has read the threads the run used from the
``environment`` its ``metrics.json`` records (torch / BLAS / OpenMP). Cached models are kept, so these are warm times; a row
names the cache entries the run built (``onchip.cache.cache_root``), which make it a partly cold run.
``--cold`` runs the command with an empty cache of its own (``ONCHIP_CACHE``; downloaded files stay
where they are), the time of a first run on a fresh machine, kept beside the warm row. Rows are kept in
``sweeps/seed_times.json`` and the table ``sweeps/seed_times.md`` is rewritten from all rows: a method
that was not measured yet shows the wall seconds its committed run recorded in ``metrics.json``
(``seconds``), marked as such. Where a committed run is larger than the default run (more seeds or
steps), the table prints the committed command (``seed_verdicts.committed_command``).

Run: ``PYTHONPATH=python python sweeps/seed_times.py radar fedspa`` (the named methods; ``--all``
every method, hours; ``--cold`` from an empty cache; ``--table`` only rewrites the table).
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "sweeps" / "seed_times.json"
TABLE = ROOT / "sweeps" / "seed_times.md"

#: method -> (flags its command requires, committed metrics.json of its default run)
METHODS = {
    "quantum-meta": (["--gate", "x"], "quantum_meta/x"), "unlearn": ([], None), "ais": ([], "ais/gmm4-d10"),
    "memorization": ([], "memorization"), "lmaps": ([], "lmaps"), "autotune": ([], "autotune/regression"),
    "humanlike": ([], "humanlike"), "tapc": ([], "tapc"), "ips": ([], "ips"), "ink": ([], "ink"),
    "gats": ([], "gats"), "logicsage": ([], "logicsage"), "radar": ([], "radar"),
    "token-search": ([], "token-search"), "fedspa": ([], "fedspa"), "multi2": ([], "multi2"),
    "seg-research": ([], "seg-research"), "dynaview": ([], "dynaview"),
}
LIMIT_S = 300


def parse_time_v(text: str) -> dict:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) from GNU ``time -v`` output.

    Raises:
        ValueError: naming the field when ``text`` lacks one of them.
    """
    def field(name):
        m = re.search(rf"^\s*{re.escape(name)}: (.+)$", text, flags=re.MULTILINE)
        if not m:
            raise ValueError(f"time -v output: no '{name}' line")
        return m.group(1).strip()

    parts = [float(p) for p in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "max_rss_mib": round(int(field("Maximum resident set size (kbytes)")) / 1024)}


def load() -> str:
    """The 1/5/15-minute load averages."""
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _entries(root: Path) -> set[str]:
    """The cache's entries (lock files left out)."""
    return {p.name for p in root.iterdir() if not p.name.endswith(".lock")} if root.is_dir() else set()


def run_threads(path: Path) -> dict | None:
    """The threads a run used, as its ``metrics.json`` records them (``environment.threads``: torch's
    intra-op threads, the largest BLAS and OpenMP pools, each None when not known); None when the file or
    the record is missing (a run that failed, or a method that writes no environment)."""
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    threads = (metrics.get("environment") or {}).get("threads")
    return dict(threads) if isinstance(threads, dict) else None


def processes(argv: list[str]) -> int:
    """Worker processes ``onchip <argv>`` (no ``--out``) runs its seeds in: its config's ``jobs``, 1 for
    a method without one; read from the config the command builds, without running it."""
    sv = _seed_verdicts()
    return int(getattr(sv.config_of([*argv, "--out", str(sv.UNUSED)]), "jobs", 1))


def measure(method: str, cold: bool = False) -> dict:
    """Run one method's default command under ``/usr/bin/time -v`` and return its row (``cold``: with an
    empty cache of its own)."""
    from onchip.cache import cache_root

    flags, _ = METHODS[method]
    scratch = Path(tempfile.mkdtemp(prefix=f"seed-times-{method}-"))
    out = scratch / "out"
    argv = ["onchip", method, *flags, "--quiet", "--out", str(out)]
    env = {**os.environ, "ONCHIP_CACHE": str(scratch / "cache")} if cold else None
    root = scratch / "cache" if cold else cache_root()
    cached, before, start = _entries(root), load(), datetime.datetime.now(datetime.timezone.utc)
    try:
        proc = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, env=env)
    finally:
        after = load()
        built = sorted({name.split("-")[0] for name in _entries(root) - cached})
        threads = run_threads(out / "metrics.json")
        shutil.rmtree(scratch, ignore_errors=True)
    row = {"method": method, "command": " ".join(argv[:-2]), "date": start.isoformat(timespec="minutes"),
           "cores": os.cpu_count(), "load_before": before, "load_after": after, "exit": proc.returncode,
           "cold": cold, "cache_built": built, "niced": os.nice(0) > 0, "threads": threads,
           "processes": processes(argv[1:-2])}
    row.update(parse_time_v(proc.stderr))
    if proc.returncode:
        own = proc.stderr.split("\tCommand being timed:")[0].strip().splitlines()
        row["error"] = own[-1][:200] if own else ""
    return row


def committed_seconds(method: str) -> str:
    """What the committed run of ``method`` recorded about its wall time ("-" when nothing; it may be larger
    than the default run: more seeds, or other settings)."""
    folder = METHODS[method][1]
    path = ROOT / "sweeps" / folder / "metrics.json" if folder else None
    if path is None or not path.exists():
        return "-"
    metrics = json.loads(path.read_text())
    s = metrics.get("seconds")
    return f"committed run recorded {s:.0f} s wall" if isinstance(s, (int, float)) else "-"


def verdict(cpu: float, processes: int = 1, seeds: int = 1) -> str:
    """Whether ``cpu`` seconds fit the 5-minute limit on 2 cores. A run whose ``seeds`` (of equal cost) run
    in ``processes`` worker processes keeps both cores busy by itself: it fits when its busiest core's
    share, cpu x ceil(seeds / min(processes, 2)) / seeds, stays within the limit."""
    if cpu <= LIMIT_S:
        return "fits"
    if processes > 1 and cpu * -(-seeds // min(processes, 2)) / seeds <= LIMIT_S:
        return f"fits (its {seeds} seeds in {min(processes, seeds)} processes)"
    if cpu <= 2 * LIMIT_S:
        return "fits only with both cores busy"
    return "over"


def seed_count(argv: list[str]) -> int:
    """Seeds ``onchip <argv>`` (no ``--out``) runs, read from the config the command builds."""
    sv = _seed_verdicts()
    config = sv.config_of([*argv, "--out", str(sv.UNUSED)])
    return len(getattr(config, "seeds", None) or [getattr(config, "seed", 0)])


@functools.lru_cache(maxsize=1)
def _seed_verdicts():
    import importlib.util

    spec = importlib.util.spec_from_file_location("seed_verdicts", ROOT / "sweeps" / "seed_verdicts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed(method: str) -> str:
    """The committed run's command where it is larger than the default run, else "= default"."""
    folder = METHODS[method][1]
    path = ROOT / "sweeps" / folder / "metrics.json" if folder else None
    if path is None or not path.exists():
        return "-"
    sv = _seed_verdicts()
    scale = [k for k in sv.run_differences(path) if k in sv.SCALE_FIELDS]
    return f"`{sv.committed_command(path)}` ({', '.join(scale)})" if scale else "= default"


def _verdict(r: dict) -> str:
    argv = r["command"].split()[1:]
    n = r["processes"] if "processes" in r else processes(argv)
    return verdict(r["cpu_s"], n, seed_count(argv) if n > 1 else 1)


def _threads(r: dict) -> str:
    """``torch / BLAS / OpenMP`` threads of a row (``-`` where unknown), and its worker processes."""
    t = r.get("threads")
    if t is None:
        return "not recorded"
    text = " / ".join("-" if t.get(k) is None else str(t[k]) for k in ("torch", "blas", "openmp"))
    n = r["processes"] if "processes" in r else processes(r["command"].split()[1:])
    return text + (f" in {n} processes" if n > 1 else "")


def _run(r: dict | None) -> str:
    if not r:
        return "-"
    return f"{r['wall_s']} / {r['cpu_s']}" + (f" (exit {r['exit']})" if r["exit"] else "")


def own_entries(method: str, built: list[str]) -> list[str]:
    """The cache entries among ``built`` that are the method's own: names holding the method's name
    (``memorization_denoiser``, ``tiny_logicsage_tr``) and the shared language model (``lm_*``). Other
    processes on the machine build entries too (hardware flows), so the rest says nothing of the run."""
    key = method.replace("-", "_")
    return [n for n in built if key in n or n.startswith("lm_")]


def table(rows: dict) -> str:
    from onchip.methods._report import markdown_table

    lines = []
    for method in METHODS:
        r, cold = rows.get(method), rows.get(f"{method} (cold)")
        big = committed(method)
        if r:
            own = own_entries(method, r.get("cache_built", []))
            built = f"built {', '.join(own)}" if own else ("warm" if "cache_built" in r else "not recorded")
            lines.append([method, f"`{r['command']}`", big, r["date"] + (" (niced)" if r.get("niced", True) else ""),
                          r["wall_s"], r["cpu_s"], _threads(r), r["max_rss_mib"],
                          f"{r['load_before']} -> {r['load_after']}", built, _run(cold),
                          _verdict(r) if not r["exit"] else f"failed (exit {r['exit']})"])
        else:
            lines.append([method, f"`onchip {method}`", big, "not measured", "-", "-", "-", "-", "-", "-", _run(cold),
                          committed_seconds(method)])
    stamp = max((r["date"] for r in rows.values()), default="-")
    intro = (f"Written by `sweeps/seed_times.py` (last row added {stamp}). Each row is one run of the method's "
             "default command under `/usr/bin/time -v` on this shared machine (2 cores; rows marked `niced` ran "
             "under `nice -n 10`, which stretches their wall time further); CPU = user + "
             "system seconds of the command and its children; threads = torch / BLAS / OpenMP threads the run's "
             "`metrics.json` records, and the worker processes its seeds ran in; "
             "load = the 1 / 5 / 15-minute load averages before "
             "-> after the run (above 2 the run shared its cores, and its wall time says more about the load than "
             "about the run). Limit: 5 minutes on 2 cores; CPU <= 300 s fits on a quiet 2-core machine, over 600 s "
             "cannot fit, in between only if the run keeps both cores busy. Cached models were kept between runs "
             "(warm); `cache` names the method's own cache entries a run had to build (then it was partly cold); `cold` is a run with an "
             "empty cache of its own (`--cold`). `committed run` is the command of the committed results where "
             "they are larger than the default run (the fields that differ), else `= default`.")
    return "# Seed methods: default run time\n\n" + intro + "\n\n" + markdown_table(
        ["method", "default command", "committed run", "date (UTC)", "wall s", "CPU s", "threads", "peak RSS MiB",
         "load before -> after", "cache", "cold: wall / CPU s", "5 min on 2 cores"], lines)


def main(argv: list[str]) -> int:
    rows = json.loads(ROWS.read_text()) if ROWS.exists() else {}
    names = list(METHODS) if "--all" in argv else [a for a in argv if not a.startswith("--")]
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        print(f"methods: unknown {unknown}; known: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    cold = "--cold" in argv
    for name in names:
        row = measure(name, cold=cold)
        print(json.dumps(row), flush=True)
        # read again: another invocation may have added rows while this one ran
        rows = json.loads(ROWS.read_text()) if ROWS.exists() else {}
        rows[f"{name} (cold)" if cold else name] = row
        ROWS.write_text(json.dumps(rows, indent=2) + "\n")
        TABLE.write_text(table(rows))
    TABLE.write_text(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
