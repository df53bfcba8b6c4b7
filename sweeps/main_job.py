"""The main job's figures: 16-bit KAN and MLP, their float twins, and the static baseline.

Run:  python sweeps/main_job.py [--data SHOTS.npy] [--samples N]
Writes sweeps/main_job.md and sweeps/main_job.png: qubit readout with the default
drift scenario (real shots when --data is given), three-state readout (|0>, |1>, |2>) of
the built-in source with the default drift scenario, and drifting regression.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from onchip import tasks
from onchip.plotting import pyplot
from onchip.run import DEFAULT_PRESETS, resolve_spec, run_backend
from onchip.spec import PRESETS

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    lines = ["# Main job: online learners on drifting streams", ""]
    cmd = f"python sweeps/main_job.py --samples {args.samples} --seed {args.seed}"
    lines.append(f"Command: `{cmd}" + (f" --data {args.data}`" if args.data else "`"))
    lines.append("")
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(9, 10.5))

    readout = tasks.make_stream("qubit-readout", samples=args.samples, seed=args.seed, data=args.data)
    src = "real transmon shots" if args.data else "built-in source"
    lines += [f"## Qubit readout ({src}, {args.samples} shots, default drift scenario)", "",
              "| learner | assignment fidelity (whole stream) | last 5000 shots | recovery shots per drift event |",
              "|---|---:|---:|---|"]
    for model in ("kan", "mlp"):
        spec = PRESETS[DEFAULT_PRESETS[("qubit-readout", model)]]
        for backend in ("golden", "float"):
            res = run_backend(backend, spec, readout.x, readout.y)
            m = tasks.evaluate(readout, res.predictions)
            label = f"{model.upper()} {'16-bit' if backend == 'golden' else 'float twin'}"
            lines.append(f"| {label} ({spec.name}) | {m['assignment_fidelity']:.4f} | "
                         f"{m['assignment_fidelity_last_5000']:.4f} | {tasks.recovery_text(m)} |")
            axes[0].plot(tasks.rolling_metric(readout, res.predictions)[1], label=label, lw=1)
    sb = tasks.evaluate(readout, tasks.static_baseline_predictions(readout))["static_baseline"]
    lines.append(f"| static LDA (first 2000 shots, frozen) | {sb['assignment_fidelity']:.4f} | "
                 f"{sb['assignment_fidelity_last_5000']:.4f} | {tasks.recovery_text(sb)} |")
    axes[0].plot(tasks.rolling_metric(readout, tasks.static_baseline_predictions(readout))[1],
                 label="static LDA", lw=1)
    for e in readout.events:
        axes[0].axvline(e.index, color="0.4", ls="--", lw=0.8)
    axes[0].set_ylabel("rolling assignment fidelity")
    axes[0].set_title(f"qubit readout, {src}")
    axes[0].legend(fontsize=8, loc="lower left")

    three = tasks.make_stream("qubit-readout", samples=args.samples, seed=args.seed, states="0,1,2")
    lines += ["", f"## Three-state readout (built-in source, |0> |1> |2>, {args.samples} shots, "
              "default drift scenario)", "",
              "| learner | assignment fidelity (whole stream) | last 5000 shots | error per state "
              "(whole stream) | recovery shots per drift event | confusion, last 5000 shots "
              "(rows prepared, columns assigned) |",
              "|---|---:|---:|---|---|---|"]

    def three_row(label, m):
        errors = " / ".join(f"{v:.4f}" for v in m["error_per_state"])
        c = np.asarray(m["confusion_counts_last_5000"], dtype=float)
        conf = " ; ".join(" ".join(f"{v:.3f}" for v in row) for row in c / c.sum(axis=1, keepdims=True))
        return (f"| {label} | {m['assignment_fidelity']:.4f} | {m['assignment_fidelity_last_5000']:.4f} | "
                f"{errors} | {tasks.recovery_text(m)} | {conf} |")

    for model in ("kan", "mlp"):
        spec = resolve_spec("qubit-readout", model, None, three.x.shape[1], three.y.shape[1])
        res = run_backend("golden", spec, three.x, three.y)
        label = f"{model.upper()} 16-bit ({spec.name}, widths {list(spec.widths)})"
        lines.append(three_row(label, tasks.evaluate(three, res.predictions)))
        axes[1].plot(tasks.rolling_metric(three, res.predictions)[1], label=f"{model.upper()} 16-bit", lw=1)
    base3 = tasks.static_baseline_predictions(three)
    lines.append(three_row("static LDA, 3 classes (first 2000 shots, frozen)",
                           tasks.evaluate(three, base3)["static_baseline"]))
    axes[1].plot(tasks.rolling_metric(three, base3)[1], label="static LDA", lw=1)
    for e in three.events:
        axes[1].axvline(e.index, color="0.4", ls="--", lw=0.8)
    axes[1].set_ylabel("rolling assignment fidelity")
    axes[1].set_title("three-state readout (|0>, |1>, |2>), built-in source")
    axes[1].legend(fontsize=8, loc="lower left")

    reg = tasks.make_stream("drift-regression", samples=args.samples, seed=args.seed)
    lines += ["", f"## Drifting regression ({args.samples} samples)", "",
              "| learner | MSE per segment | MSE over the last 10% of each segment |", "|---|---|---|"]
    for model in ("kan", "mlp"):
        spec = PRESETS[DEFAULT_PRESETS[("drift-regression", model)]]
        for backend in ("golden", "float"):
            res = run_backend(backend, spec, reg.x, reg.y)
            m = tasks.evaluate(reg, res.predictions)
            label = f"{model.upper()} {'16-bit' if backend == 'golden' else 'float twin'}"
            fmt = lambda v: " / ".join(f"{x:.2e}" for x in v)  # noqa: E731
            lines.append(f"| {label} ({spec.name}) | {fmt(m['mse_per_segment'])} | {fmt(m['mse_last_window'])} |")
            axes[2].plot(tasks.rolling_metric(reg, res.predictions)[1], label=label, lw=1)
    for e in reg.events:
        axes[2].axvline(e.index, color="0.4", ls="--", lw=0.8)
    axes[2].set_yscale("log")
    axes[2].set_xlabel("sample")
    axes[2].set_ylabel("rolling MSE")
    axes[2].set_title("drifting regression")
    axes[2].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(HERE / "main_job.png", dpi=110)
    lines.append("")
    text = "\n".join(lines)
    (HERE / "main_job.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
