"""What the leaked edits of autotune's guard controls do, edit by edit, in the committed runs.

The controls (``methods/autotune/experiment.py`` ``_controls``) score SPARK and SPARK without its guard
by the anytime objective only. This script repeats both arms of each committed control with the same
seeds, streams and random streams (it stops when an arm's anytime objective differs from the committed
one) and follows every evaluated edit (``run_edit_arm(on_edit=...)``): leaked (it changed both factors
of the control's leak pair) or not, whether its objective is below its parent's, whether it left the
target its parent held (smallest-learner mode), its LUT change (the search's surrogate), and whether it
set a new best so far (what the anytime objective counts) with the gain when it did.

Writes ``sweeps/autotune/control_edits.md`` (the table, with date, command and commit) and
``control_edits.json`` (the same rows, the environment). Run: ``PYTHONPATH=python python sweeps/autotune_control_edits.py``
(golden model only, no Yosys; about 5 minutes on 2 cores).
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "sweeps" / "autotune"
RUNS = ("regression", "readout-target")
COMMAND = "PYTHONPATH=python python sweeps/autotune_control_edits.py"
COLUMNS = ["run", "control (leak pair)", "arm", "edits", "n", "worse", "left the target", "median LUT change",
           "new best", "mean gain of a new best"]


def follow(metrics: dict, which: str) -> list[dict]:
    """Per seed and arm of the committed ``{which}_control`` of ``metrics``: the evaluated edits.

    Returns:
        rows ``{"seed", "arm", "leaked", "worse", "left_target", "d_lut", "new_best", "gain"}``
        (``left_target`` None without a target).

    Raises:
        SystemExit: an arm's anytime objective differs from the committed value (a different run).
    """
    from onchip.methods._report import rng
    from onchip.methods.autotune.evaluate import (
        PRESET_OF,
        TASK_KIND,
        Budgets,
        Evaluator,
        make_task_stream,
    )
    from onchip.methods.autotune.experiment import CONTROL_LEAK
    from onchip.methods.autotune.resources import Surrogate, load_calibration
    from onchip.methods.autotune.search import anytime_objective, run_edit_arm
    from onchip.methods.autotune.space import factors_touched
    from onchip.spec import PRESETS

    c, ctl = metrics["config"], metrics[f"{which}_control"]
    pair = frozenset(ctl["leak_pair"])
    entangled = frozenset(frozenset(p) for p in ctl["entangled_pairs"])
    budgets = Budgets(c["lut_budget"], c["dsp_budget"], c["ii_max"], c["latency_max_ns"], c["fmax_mhz"])
    surrogate, target = Surrogate(load_calibration()), c["target"]
    rows = []
    for k, seed in enumerate(ctl["seeds"]):
        stream = make_task_stream(c["task"], c["samples"], seed, c["data"])
        for arm, committed in (("spark", ctl["method_values"][k]), ("spark-noguard", ctl["ablation_values"][k])):
            best = [None]

            def seen(parent, child, arm=arm, seed=seed, best=best):
                if best[0] is None:
                    best[0] = parent.objective  # the start, the first evaluation
                gain = child.objective - best[0]
                best[0] = max(best[0], child.objective)
                holds = None if target is None else (parent.accuracy >= target, child.accuracy >= target)
                rows.append({"seed": seed, "arm": arm, "leaked": pair <= factors_touched(parent.spec, child.spec),
                             "worse": child.objective < parent.objective,
                             "left_target": None if holds is None else bool(holds[0] and not holds[1]),
                             "d_lut": child.resources["lut"] - parent.resources["lut"],
                             "new_best": gain > 0, "gain": max(gain, 0.0)})

            ev = Evaluator(stream, TASK_KIND[c["task"]], budgets, surrogate, target)
            res = run_edit_arm(arm, PRESETS[PRESET_OF[c["task"]]], ev, c["budget"],
                               rng(seed, "autotune-control", which, arm), entangled=entangled, leak=CONTROL_LEAK,
                               leak_pairs=frozenset({pair}), on_edit=seen)
            got = anytime_objective(res, c["budget"])
            if not np.isclose(got, committed, rtol=0, atol=1e-9):
                sys.exit(f"{c['task']} {which} control, seed {seed}, {arm}: anytime objective {got!r}, committed "
                         f"{committed!r}: not the committed run")
    return rows


def summary(rows: list[dict], leaked: bool | None, arm: str) -> list:
    """One table row of ``arm``'s leaked edits, its others, or all (``leaked`` None): edits, share worse
    than the parent, share leaving the target, median LUT change, share setting a new best so far,
    mean gain of those."""
    r = [x for x in rows if x["arm"] == arm and leaked in (None, x["leaked"])]
    if not r:
        return [0, "-", "-", "-", "-", "-"]
    left = [x["left_target"] for x in r if x["left_target"] is not None]
    gains = [x["gain"] for x in r if x["new_best"]]
    return [len(r), f"{np.mean([x['worse'] for x in r]):.2f}", f"{np.mean(left):.2f}" if left else "-",
            f"{np.median([x['d_lut'] for x in r]):+.0f}", f"{np.mean([x['new_best'] for x in r]):.2f}",
            f"{np.mean(gains):.4f}" if gains else "-"]


def main() -> None:
    from onchip.methods._report import environment, markdown_table

    t0 = time.perf_counter()
    table = []
    for run in RUNS:
        metrics = json.loads((OUT / run / "metrics.json").read_text())
        for which in ("positive", "negative"):
            rows = follow(metrics, which)
            pair = " x ".join(metrics[f"{which}_control"]["leak_pair"])
            for arm in ("spark", "spark-noguard"):
                for leaked in (True, False, None):
                    table.append([run, f"{which} ({pair})", arm, {True: "leaked", False: "other", None: "all"}[leaked],
                                  *summary(rows, leaked, arm)])
            print(f"{run} {which}: {len(rows)} edits", flush=True)
    env = environment()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    (OUT / "control_edits.json").write_text(json.dumps({"command": COMMAND, "date": when, "columns": COLUMNS,
                                                        "rows": table, "environment": env}, indent=1) + "\n")
    text = [
        "# autotune's guard controls, edit by edit",
        "",
        (f"Command: `{COMMAND}` ({when}, {time.perf_counter() - t0:.0f} s; onchip {env['onchip']}, commit "
         f"{(env['git_commit'] or 'none')[:7]}). The committed controls of `sweeps/autotune/*/metrics.json` "
         "repeated (every arm's anytime objective equal to the committed one), each evaluated edit followed. "
         "Leaked: the edit changed both factors of the control's leak pair (the planted rewrite; the guard "
         "refuses it in the positive control). Worse: objective below its parent's. Left the target: its "
         "parent held the target fidelity, it does not (smallest-learner mode only). LUT: the search's "
         "surrogate. New best: the edit raised the best objective so far (all the anytime objective counts)."),
        "",
        markdown_table(COLUMNS, table),
    ]
    (OUT / "control_edits.md").write_text("\n".join(text))
    print(f"wrote {OUT / 'control_edits.md'}")


if __name__ == "__main__":
    main()
