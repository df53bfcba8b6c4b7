"""Adapt a 16-bit KAN readout learner to drifting qubit-readout shots, test-then-train.

    python examples/readout_adapt.py [--quick] [--data SHOTS.npy] [--backend golden] [--out DIR]

Without ``--data`` the built-in physically modelled source is used; ``--data`` takes an
``.npy`` of layout (states, shots, 2). Writes ``rolling_fidelity.png`` into ``--out`` and
prints the assignment fidelity over the stream and over its end.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import onchip  # noqa: E402


def rolling_fidelity(y, pred, window):
    """Assignment fidelity 1 - (P(1|0) + P(0|1))/2 over the trailing ``window`` shots."""
    t, a = y.reshape(-1) > 0, pred.reshape(-1) >= 0
    c = np.cumsum(np.stack([~t, t, a & ~t, ~a & t], axis=1), axis=0, dtype=np.float64)
    c[window:] -= c[:-window].copy()
    n0, n1, e10, e01 = c.T
    with np.errstate(invalid="ignore", divide="ignore"):
        f = 1.0 - (e10 / n0 + e01 / n1) / 2.0
    f[:window - 1] = np.nan
    return f


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short stream (20000 shots)")
    ap.add_argument("--data", help="shots .npy of layout (states, shots, 2); default: built-in source")
    ap.add_argument("--spec", default="kan-readout", help="preset name or TOML file")
    ap.add_argument("--backend", default="golden", help="golden, float, rtl, hls, ...")
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--window", type=int, default=1000, help="shots per rolling window")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("out/examples/readout_adapt"))
    args = ap.parse_args(argv)
    samples = 20_000 if args.quick else args.samples

    stream = onchip.make_stream("qubit-readout", samples=samples, seed=args.seed, data=args.data)
    learner = onchip.Learner(args.spec, args.backend)
    pred = learner.run(stream.x, stream.y)          # test-then-train: predict, then update
    metrics = onchip.evaluate(stream, pred)
    rolling = rolling_fidelity(stream.y, pred, args.window)

    args.out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(np.arange(1, len(rolling) + 1), rolling, lw=1, label=f"{args.spec} ({args.backend})")
    for event in stream.events:
        ax.axvline(event.index, color="grey", ls="--", lw=0.8)
    ax.set(xlabel="shot", ylabel=f"assignment fidelity (last {args.window})", ylim=(0.4, 1.0),
           title=f"{args.spec} on qubit-readout, {samples} shots")
    ax.legend(loc="lower left")
    fig.tight_layout()
    png = args.out / "rolling_fidelity.png"
    fig.savefig(png, dpi=100)

    print(f"shots: {samples}  source: {args.data or 'built-in'}  learner: {learner!r}")
    print(f"drift events: {', '.join(f'{e.index} ({e.label})' for e in stream.events)}")
    print(f"assignment fidelity, whole stream: {metrics['assignment_fidelity']:.4f}")
    print(f"final rolling fidelity (last {args.window} shots): {rolling[-1]:.4f}")
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
