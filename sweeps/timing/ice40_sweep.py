"""The presets on the iCEBreaker (iCE40 UltraPlus UP5K), placed and routed, or the resource they lack.

For every preset at ``timing = "compact"`` and ``"fast"``, sequential: the core in the UART board
top built for the iCEBreaker by :func:`onchip.flow.nextpnr.place_and_route` (Yosys ``synth_ice40
-dsp``, memories in block RAM, nextpnr-ice40, a real bitstream), best fmax of placer seeds 1-3;
a design the UP5K cannot hold is refused before placement with the resource it lacks, needed
against available (:mod:`onchip.flow.fit`: SB_MAC16 counted after Yosys's coarse synthesis, the
rest by nextpnr's packer), and its row says so. Runs are kept in ``ice40_runs.json`` with a hash of
the core's Verilog (a rerun does only what is missing or stale); the rows of the current designs go
to ``ice40_results.json``, their table to ``ice40.md`` and to ``docs/results.md`` between its markers.

Usage::

    python sweeps/timing/ice40_sweep.py            # the missing runs, then the tables
    python sweeps/timing/ice40_sweep.py --report   # the tables only
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import timing_sweep as ts  # this folder's sweep: points, hashes, runs files, table writer

BOARD = "icebreaker"
RUNS = HERE / "ice40_runs.json"
RESULTS = HERE / "ice40_results.json"
PAGE = HERE / "ice40.md"
TIMINGS = ("compact", "fast")
SCHEDULE = "sequential"
SEEDS = (1, 2, 3)
BEGIN, END = "<!-- ice40 table: written by sweeps/timing/ice40_sweep.py -->", "<!-- end of ice40 table -->"


def presets() -> tuple[str, ...]:
    from onchip.spec import PRESETS

    return tuple(PRESETS)


def run_point(preset: str, timing: str, seed: int) -> dict:
    """One place-and-route run of the point on the iCEBreaker: fmax, LUT (ICESTORM_LC), FF, DSP
    (SB_MAC16), BRAM (SB_RAM40_4K) and the critical path; ``{"does_not_fit": message}`` for a design
    the UP5K cannot hold (refused before placement, naming each resource short)."""
    from onchip.errors import ToolError
    from onchip.flow.fit import DesignTooLarge
    from onchip.flow.nextpnr import place_and_route

    design = ts.point_design(preset, timing, SCHEDULE, placed=True, board=BOARD)
    with tempfile.TemporaryDirectory(prefix="onchip-ice40-") as tmp:
        try:
            rep = place_and_route(design, BOARD, tmp, seed=seed)
        except DesignTooLarge as exc:
            return {"does_not_fit": str(exc)}
        except ToolError as exc:
            return {"failed": str(exc).strip().splitlines()[-1][:300]}
    util, cp = rep["utilisation"], rep["critical_path"]
    used = {k: util.get(cell, {}).get("used") for k, cell in
            (("lut", "ICESTORM_LC"), ("dsp", "ICESTORM_DSP"), ("bram", "ICESTORM_RAM"))}
    return {"fmax_mhz": rep["fmax_mhz"], "clock_mhz": rep["clock_mhz"], **used,
            "critical_path": {"start": cp["start"]["signal"] or cp["start"]["cell"],
                              "end": cp["end"]["signal"] or cp["end"]["cell"], "total_ns": cp["total_ns"],
                              "logic_ns": cp["logic_ns"], "routing_ns": cp["routing_ns"]}}


def run() -> None:
    """The missing runs, seed by seed over every point (every point placed once before any twice)."""
    runs = ts.load_runs(RUNS)
    names = [f"{p}/{t}/{SCHEDULE}" for p in presets() for t in TIMINGS]
    digests = {n: ts.design_hash(*n.split("/"), placed=True, board=BOARD) for n in names}
    for seed in SEEDS:
        for name in names:
            digest, key = digests[name], f"{name}/pnr/{seed}"
            mine = [runs.get(f"{name}/pnr/{s}", {}) for s in SEEDS]
            if runs.get(key, {}).get("design") == digest or any(
                    "does_not_fit" in r and r["design"] == digest for r in mine):
                continue  # done, or refused (the fit does not depend on the seed)
            preset, timing, _ = name.split("/")
            value = {**run_point(preset, timing, seed), "design": digest, "date": datetime.date.today().isoformat()}
            ts.save_run(key, value, RUNS)
            runs[key] = value
            print(f"{key}: {value.get('fmax_mhz', '')} {value.get('does_not_fit', value.get('failed', ''))}",
                  flush=True)


def current_rows(runs: dict) -> list[dict]:
    """A row per preset and plan from the runs of its current design: ``{"preset", "timing",
    "latency_cycles_prediction", "latency_cycles_update", "runs": {seed: record}}``."""
    rows = []
    for preset in presets():
        for timing in TIMINGS:
            name = f"{preset}/{timing}/{SCHEDULE}"
            digest = ts.design_hash(preset, timing, SCHEDULE, placed=True, board=BOARD)
            info = ts.point_design(preset, timing, SCHEDULE).info
            rows.append({"preset": preset, "timing": timing,
                         **{k: info[k] for k in ("latency_cycles_prediction", "latency_cycles_update")},
                         "runs": {int(k.rsplit("/", 1)[1]): v for k, v in sorted(runs.items())
                                  if k.startswith(f"{name}/pnr/") and v.get("design") == digest}})
    return rows


def _row(row: dict) -> str:
    from onchip.flow.fit import shortfalls

    head = f"| {row['preset']} | `{row['timing']}` | {row['latency_cycles_prediction']} / {row['latency_cycles_update']} |"
    runs = {int(s): v for s, v in row["runs"].items()}
    if not runs:
        return f"{head} not run | - | - | - | - | - |"
    refused = next((v["does_not_fit"] for v in runs.values() if "does_not_fit" in v), None)
    if refused:
        over = "; ".join(f"{o['resource']} ({o['cell'] or '-'}): {'at least ' if o['at_least'] else ''}{o['needed']} "
                         f"needed of {o['available']}, {o['needed'] - o['available']} over"
                         for o in shortfalls(refused))
        date = next(v["date"] for v in runs.values() if "does_not_fit" in v)
        return f"{head} no fit: {over} | - | - | - | {date} | - |"
    placed = {s: v for s, v in runs.items() if "fmax_mhz" in v}
    if not placed:
        return f"{head} failed: {next(iter(runs.values())).get('failed', '?')} | - | - | - | - | - |"
    seed = max(placed, key=lambda s: placed[s]["fmax_mhz"])
    b, cp = placed[seed], placed[seed]["critical_path"]
    f = b["fmax_mhz"]
    seeds = ",".join(map(str, sorted(placed)))
    return (f"{head} {f:.1f} MHz (seeds {seeds}) | {row['latency_cycles_prediction'] * 1e3 / f:.1f} "
            f"| {row['latency_cycles_update'] * 1e3 / f:.1f} | {b['lut']} / {b['dsp']} / {b['bram']} | {b['date']} "
            f"| {cp['start']} -> {cp['end']}: {cp['total_ns']:.2f} ns (routing {cp['routing_ns']:.2f}) |")


#: the table's opening lines
INTRO = ("The presets on the iCEBreaker (iCE40UP5K: 5280 LUT, 8 SB_MAC16, 30 SB_RAM40_4K), sequential, in the UART "
         "board top; Yosys `synth_ice40 -dsp` (at `fast` it puts each product register into its SB_MAC16's "
         "output register; the factor registers are marked keep and stay in the fabric, `onchip.hw.dsp`), "
         "nextpnr-ice40, best of placer seeds 1-3. A design the UP5K cannot "
         "hold is refused before placement with the resource it lacks (SB_MAC16 counted after Yosys's coarse "
         "synthesis, the rest by nextpnr's packer). Written by `python sweeps/timing/ice40_sweep.py`.")


def table(rows: list[dict]) -> str:
    """The iCEBreaker table from the rows of :func:`current_rows` (``ice40_results.json``)."""
    lines = [INTRO, "",
             ("| preset | plan | cycles: prediction / update | fmax, or why it does not fit | prediction (ns) "
              "| update (ns) | LUT / DSP / BRAM | run on | critical path (best seed) |"),
             "|---|---|---|---|---:|---:|---|---|---|"]
    return "\n".join(lines + [_row(r) for r in rows])


def report() -> None:
    rows = current_rows(ts.load_runs(RUNS))
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    text = table(rows)
    PAGE.write_text("# The presets on the iCEBreaker (iCE40 UP5K)\n\n" + text + "\n")
    ts.write_family_table(text, ts.ANCHORS_PAGE, (BEGIN, END))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", action="store_true", help="only rewrite ice40.md and the table in docs/results.md")
    args = ap.parse_args()
    if not args.report:
        run()
    report()


if __name__ == "__main__":
    main()
