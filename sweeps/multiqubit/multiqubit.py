"""Eight multiplexed qubits under independent drift: one online learner of channels = 8 against
eight frozen LDA discriminators, over several seeds.

Run:  python sweeps/multiqubit/multiqubit.py [--qubits 8] [--samples 100000] [--seeds 0 1 ... 9]
Writes sweeps/multiqubit/README.md, results.json and multiqubit.png.

Each seed builds the job's N-qubit stream (:func:`onchip.tasks.multiqubit.make_multiqubit_readout`:
built-in source, each qubit its own IQ clouds and drift, round robin), runs kan-readout with
``channels = N`` on the golden model over it with each sample's channel, and scores every qubit
on its own shots next to its static discriminator (scikit-learn's LinearDiscriminantAnalysis
fitted once on that qubit's first 2000 shots, then frozen). The unit of comparison is the seed:
the mean over the N qubits of the learner's fidelity minus that of the N LDAs, with a Student t
interval over the seeds (:func:`onchip.methods._report.paired_difference`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from onchip.methods._report import environment, paired_difference
from onchip.multiplexed import multichannel_spec
from onchip.plotting import pyplot
from onchip.run import run_backend
from onchip.spec import PRESETS
from onchip.tasks.multiqubit import evaluate_multiqubit, make_multiqubit_readout

HERE = Path(__file__).resolve().parent
FIGURES = ("assignment_fidelity", "assignment_fidelity_last_5000")


def exact_per_channel(spec, stream, raw) -> bool:
    """Whether the N-channel run's raw predictions equal N single-channel learners, each on its
    qubit's own shots (the channels semantics, checked once on the measured stream)."""
    one = spec.replace(channels=1)
    for c, (q, got) in enumerate(zip(stream.qubits, stream.split(raw))):
        if not np.array_equal(run_backend("golden", one, q.x, q.y, progress=False).raw, got):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qubits", type=int, default=8)
    parser.add_argument("--samples", type=int, default=100_000, help="shots per qubit")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--spec", default="kan-readout")
    args = parser.parse_args()

    started = datetime.now(timezone.utc)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    spec = multichannel_spec(PRESETS[args.spec], args.qubits)
    rows, exact, rolling0 = [], None, None
    t0 = time.perf_counter()
    for seed in args.seeds:
        stream = make_multiqubit_readout(args.qubits, args.samples, seed)
        run = run_backend("golden", spec, stream.x, stream.y, channel=stream.channel, progress=False)
        m = evaluate_multiqubit(stream, run.predictions)
        if exact is None:
            exact = exact_per_channel(spec, stream, run.raw)
            from onchip.tasks.multiqubit import rolling_per_qubit

            rolling0 = rolling_per_qubit(stream, run.predictions)
        rows.append({
            "seed": seed,
            "learner": {k: m["mean"][k] for k in FIGURES},
            "lda": {k: m["static_baseline_mean"][k] for k in FIGURES},
            "lda_calibrated_qubits": m["static_baseline_mean"]["qubits"],
            "drift_events": m["mean"]["drift_events"],
            "recovered": {"learner": m["mean"]["recovered_events"], "lda": m["static_baseline_mean"]["recovered_events"]},
            "per_qubit": [{"learner": {k: q[k] for k in FIGURES},
                           "lda": {k: q["static_baseline"][k] for k in FIGURES} if q["static_baseline"] else None,
                           "events": [e["label"] for e in q["events"]],
                           "recovery_shots": q["recovery_shots"]} for q in m["per_qubit"]],
        })
        print(f"seed {seed}: learner {rows[-1]['learner']['assignment_fidelity']:.4f}, "
              f"LDA {rows[-1]['lda']['assignment_fidelity']:.4f}", file=sys.stderr)
    seconds = time.perf_counter() - t0
    paired = {k: paired_difference([r["learner"][k] for r in rows], [r["lda"][k] for r in rows]) for k in FIGURES}

    command = "python sweeps/multiqubit/multiqubit.py " + shlex.join(
        ["--qubits", str(args.qubits), "--samples", str(args.samples), "--spec", args.spec, "--seeds",
         *map(str, args.seeds)])
    env = environment()
    result = {"command": command, "date_utc": started.isoformat(timespec="seconds"), "qubits": args.qubits,
              "samples_per_qubit": args.samples, "spec": spec.name, "channels": spec.channels,
              "seeds": args.seeds, "paired": paired, "per_channel_exact_seed0": exact,
              "seconds": seconds, "load_average_1min_at_start": load, "rows": rows, "environment": env}
    (HERE / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    _plot(HERE / "multiqubit.png", rows, paired, rolling0, args)
    _readme(HERE / "README.md", result)


def _plot(path, rows, paired, rolling0, args) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    seeds = [r["seed"] for r in rows]
    ax = axes[0]
    for r in rows:
        ax.plot([0, 1], [r["lda"]["assignment_fidelity"], r["learner"]["assignment_fidelity"]], color="0.6", lw=0.8)
    ax.scatter(np.zeros(len(rows)), [r["lda"]["assignment_fidelity"] for r in rows], color="C1")
    ax.scatter(np.ones(len(rows)), [r["learner"]["assignment_fidelity"] for r in rows], color="C0")
    ax.set_xticks([0, 1], [f"{args.qubits} frozen LDA", f"{args.spec}, channels = {args.qubits}"])
    ax.set_xlim(-0.4, 1.4)
    ax.set_ylabel(f"mean over {args.qubits} qubits of the assignment fidelity")
    ax.set_title("whole stream, one line per seed", fontsize=9)
    ax = axes[1]
    for k, (key, name) in enumerate(zip(FIGURES, ("whole stream", "last 5000 shots"))):
        p = paired[key]
        ax.scatter(np.full(len(rows), k) + np.linspace(-0.12, 0.12, len(rows)), p["per_seed"], color="0.5", s=12)
        lo, hi = p["ci95"]
        ax.errorbar([k + 0.3], [p["difference"]], yerr=[[p["difference"] - lo], [hi - p["difference"]]], fmt="o",
                    color="C3", capsize=4, label="mean, 95% t interval" if k == 0 else None)
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_xticks([0, 1], ["whole stream", "last 5000 shots"])
    ax.set_ylabel("learner - LDA, per seed")
    ax.set_title(f"paired difference over {len(seeds)} seeds", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[2]
    shots = np.arange(rolling0.shape[1])
    for c in range(len(rolling0)):
        ax.plot(shots, rolling0[c], lw=0.7, label=f"qubit {c}")
    ax.set_xlabel("shot of the qubit")
    ax.tick_params(labelsize=7)
    ax.set_ylabel("rolling fidelity, 1000 shots")
    ax.set_title(f"online learner, seed {seeds[0]}, each qubit", fontsize=9)
    ax.legend(fontsize=6, ncol=2, loc="lower left")
    fig.suptitle(f"{args.qubits} multiplexed qubits under independent drift, {args.samples} shots each", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _shows(r) -> str:
    # the sentence under the table, from the figures themselves
    whole = r["paired"]["assignment_fidelity"]
    ahead = sum(d > 0 for d in whole["per_seed"])
    learner = [row["learner"]["assignment_fidelity"] for row in r["rows"]]
    lda = [row["lda"]["assignment_fidelity"] for row in r["rows"]]
    events = sum(row["drift_events"] for row in r["rows"])
    rec = {who: sum(row["recovered"][who] for row in r["rows"]) for who in ("learner", "lda")}
    return (f"The learner's mean fidelity is above the frozen LDAs' on {ahead} of {len(r['rows'])} seeds "
            f"({min(learner):.4f}-{max(learner):.4f} against {min(lda):.4f}-{max(lda):.4f}); over all seeds it came "
            f"back from {rec['learner']} of the {events} drift events, the LDAs from {rec['lda']}.")


def _readme(path, r) -> None:
    def fmt(p):
        lo, hi = p["ci95"]
        return f"{p['difference']:+.4f} [{lo:+.4f}, {hi:+.4f}]"

    rows = r["rows"]
    n = r["qubits"]
    lines = [f"# {n} multiplexed qubits: one learner of channels = {n} against {n} frozen LDA discriminators", "",
             "<!-- --8<-- [start:table] -->",
             f"Mean over the {n} qubits of each qubit's assignment fidelity (built-in source, each qubit its own "
             f"IQ clouds and drift, {r['samples_per_qubit']} shots per qubit), per seed; the difference is "
             f"learner minus LDA with its 95% Student t interval over {len(rows)} seeds.", "",
             "| seed | learner, whole stream | LDA, whole stream | learner, last 5000 | LDA, last 5000 | "
             "drift events recovered from (learner / LDA) |",
             "|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {row['seed']} | {row['learner']['assignment_fidelity']:.4f} | "
                     f"{row['lda']['assignment_fidelity']:.4f} | {row['learner']['assignment_fidelity_last_5000']:.4f} | "
                     f"{row['lda']['assignment_fidelity_last_5000']:.4f} | {row['recovered']['learner']} / "
                     f"{row['recovered']['lda']} of {row['drift_events']} |")
    p = r["paired"]
    lines += ["",
              "| figure | learner - LDA, mean over seeds [95% t interval] | sign-flip p |",
              "|---|---|---:|",
              f"| whole stream | {fmt(p['assignment_fidelity'])} | {p['assignment_fidelity']['p_value']:.3g} |",
              f"| last 5000 shots | {fmt(p['assignment_fidelity_last_5000'])} | "
              f"{p['assignment_fidelity_last_5000']['p_value']:.3g} |",
              "", _shows(r),
              "<!-- --8<-- [end:table] -->", "",
              f"Command: `{r['command']}`", "",
              "![per seed, paired differences, and the learner's rolling fidelity on every qubit](multiqubit.png)", "",
              "## How it was measured", "",
              f"- Date (UTC): {r['date_utc']}; {r['seconds']:.0f} s for the {len(rows)} seeds; machine: "
              f"{r['environment']['cpu_count']} CPUs, load average {r['load_average_1min_at_start']:.1f} at the start; "
              f"Python {r['environment']['python']}, numpy {r['environment']['numpy']}, scikit-learn "
              f"{r['environment']['scikit-learn']}; onchip at {r['environment']['git_commit']}"
              f"{' with uncommitted changes' if r['environment']['git_dirty'] else ''}.",
              f"- Stream: `make_multiqubit_readout({n}, {r['samples_per_qubit']}, seed)`, the stream of "
              f"`onchip run --task qubit-readout --qubits {n} --samples {r['samples_per_qubit']} --seed SEED`: "
              "qubit c's shots, clouds (the built-in source rotated, its separation, noise and T1 scaled) and drift "
              "(a slow rotation of up to 30 deg, then one or two phase jumps of 45-120 deg or gain/offset changes at "
              "positions of its own) are drawn from (seed, c) alone; samples interleave round robin.",
              f"- Learner: `{r['spec']}` with `channels = {r['channels']}` on the golden model, test-then-train, one "
              "sample per qubit in turn; each channel is a sequential learner on its qubit's shots. On seed "
              f"{rows[0]['seed']} its raw predictions were compared with {n} single-channel learners, each run on "
              f"one qubit's shots: {'bit for bit equal' if r['per_channel_exact_seed0'] else 'NOT EQUAL'}.",
              "- LDA: scikit-learn's LinearDiscriminantAnalysis fitted on each qubit's first 2000 (drifted, "
              "calibrated) shots and frozen, the job's static discriminator "
              "(`onchip.tasks.static_baseline_predictions`), one per qubit.",
              "- Figures: each qubit's assignment fidelity over its whole stream and its last 5000 shots "
              "(`onchip.tasks.evaluate_readout`), averaged over the qubits; a drift event counts as recovered from "
              "when a 1000-shot window after it comes back within 0.01 of the window before it.",
              "- Statistics: the seed is the unit (its N qubits share nothing but the seed's number); "
              "`onchip.methods._report.paired_difference` gives the mean per-seed difference, its Student t "
              "interval and a sign-flip permutation p-value. Per-qubit figures of every seed are in results.json.",
              ""]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
