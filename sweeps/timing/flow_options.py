"""Yosys and nextpnr options against the default flow, placed on the ULX3S 85F, paired by design and seed.

Each pair is one point of the timing sweep (``timing_sweep.py``: learner, ``timing``, schedule) and one
placer seed, placed twice: with the default flow (its run in ``runs.json``, made on the same
Verilog) and with an option set (:func:`onchip.flow.nextpnr.place_and_route` ``synth_opts`` /
``nextpnr_opts``). nextpnr is deterministic for a design, a flow and a seed, so the difference
within a pair is the option's, and the spread across pairs is the placer's. Reported per option:
the pairs, and the mean relative change of fmax with its 95% t-interval (paired).

    python sweeps/timing/flow_options.py              # run what is missing, write flow_options.md
    python sweeps/timing/flow_options.py --report     # only rewrite flow_options.md

Runs are kept in ``flow_options.json`` (with the design hash, as ``runs.json``); a pair whose
default run is not in ``runs.json`` for the current design is left out of the report until
``timing_sweep.py`` places it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import timing_sweep as ts
from scipy import stats

HERE = Path(__file__).resolve().parent
RUNS = HERE / "flow_options.json"

#: option set -> place_and_route keywords
OPTIONS = {
    "synth -dff": {"synth_opts": "-dff"},  # abc9 also maps through the flip-flops
    "synth -nowidelut": {"synth_opts": "-nowidelut"},  # LUT4 only, no PFU multiplexers
    "nextpnr --router router2": {"nextpnr_opts": "--router router2"},
}

#: option set -> pairs (point, seed)
PAIRS = {
    "synth -dff": [("kan-paper/fast/sequential", s) for s in (1, 2, 3)] + [
        (p, 1) for p in ("kan-readout/fast/sequential", "kan-1-1-g32-k3/fast/sequential",
                         "kan-2-2-g8-k1-8b/fast/sequential", "kan-2-4-g32-k1/fast/sequential",
                         "mlp-readout/fast/sequential", "mlp-2-4-4-1-10b/fast/sequential",
                         "mlp-4-8-1-12b/fast/sequential", "kan-paper/compact/sequential",
                         "kan-readout/fast/pipelined", "user-kan-2-3-1-serial/compact/sequential")],
    "synth -nowidelut": [("kan-paper/fast/sequential", s) for s in (1, 2, 3)] + [
        (p, 1) for p in ("kan-2-2-g8-k1-8b/fast/sequential", "kan-1-1-g32-k3/fast/sequential",
                         "kan-readout/fast/sequential", "mlp-readout/fast/sequential", "kan-2-4-g32-k1/fast/sequential")],
    "nextpnr --router router2": [("kan-paper/fast/sequential", s) for s in (1, 2, 3)],
}


def run() -> None:
    from tqdm import tqdm

    runs = ts.load_runs(RUNS)
    todo = []
    for opt, pairs in PAIRS.items():
        for point, seed in pairs:
            key, design = f"{point}/{seed}/{opt}", ts.design_hash(*point.split("/"), placed=True)
            if runs.get(key, {}).get("design") != design:
                todo.append((key, point, seed, opt, design))
    for key, point, seed, opt, design in tqdm(todo, desc="flow options"):
        ts.save_run(key, {**ts.run_pnr(*point.split("/"), seed, **OPTIONS[opt]), "design": design}, RUNS)


def report() -> None:
    runs = ts.load_runs(RUNS)
    base = ts.current(ts.load_runs(), sorted({point for pairs in PAIRS.values() for point, _ in pairs}))
    lines = ["# Yosys and nextpnr options against the default flow (ULX3S 85F, paired by design and seed)", "",
             "Written by `python sweeps/timing/flow_options.py` (see its docstring and README.md). fmax in MHz;",
             "the default flow's run is the timing sweep's (`runs.json`) on the same Verilog.", ""]
    summary = ["| option | pairs | mean change of fmax | 95% interval (paired t) | range |", "|---|---|---|---|---|"]
    for opt, pairs in PAIRS.items():
        rows, rel = [], []
        for point, seed in pairs:
            run_ = runs.get(f"{point}/{seed}/{opt}")
            ref = base.get(f"{point}/pnr/{seed}")
            if run_ is None or ref is None or run_.get("design") != ref.get("design"):
                continue
            r = run_["fmax_mhz"] / ref["fmax_mhz"] - 1
            rel.append(r)
            cp = run_["critical_path"]
            rows.append(f"| {point} | {seed} | {ref['fmax_mhz']:.1f} | {run_['fmax_mhz']:.1f} | {100 * r:+.1f}% "
                        f"| {ref['lut']} -> {run_['lut']} | {cp['start']} -> {cp['end']} ({cp['total_ns']:.2f} ns) |")
        if not rel:
            continue
        x = np.array(rel)
        half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
        summary.append(f"| {opt} | {len(x)} | {100 * x.mean():+.1f}% | {100 * (x.mean() - half):+.1f}% .. "
                       f"{100 * (x.mean() + half):+.1f}% | {100 * x.min():+.1f}% .. {100 * x.max():+.1f}% |")
        lines += [f"## `{opt}`", "", "| point | seed | default | with the option | change | ECP5 LUT | critical path |",
                  "|---|---|---|---|---|---|---|", *rows, ""]
    (HERE / "flow_options.md").write_text("\n".join(lines[:5] + summary + [""] + lines[5:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", action="store_true", help="only rewrite flow_options.md")
    if not ap.parse_args().report:
        run()
    report()


if __name__ == "__main__":
    main()
