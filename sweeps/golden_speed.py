"""Benchmark: golden 2->1 KAN readout learner vs PyTorch per-sample SGD and river, same stream.

Run:  python sweeps/golden_speed.py [--samples N] [--data SHOTS.npy]
Writes sweeps/golden_speed.md. All three learners run test-then-train (predict,
then learn) on the same qubit-readout stream in this one process; the ratios are
what to read (the machine is shared and noisy, absolute rates drift).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from onchip import tasks
from onchip.model import GoldenLearner
from onchip.model.float_twin import FloatTwin
from onchip.spec import PRESETS

HERE = Path(__file__).resolve().parent


def _rate(fn, n: int, repeats: int = 3) -> float:
    """Best of ``repeats`` runs, in samples per second."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    stream = tasks.make_stream("qubit-readout", samples=args.samples, seed=0, data=args.data)
    spec = PRESETS["kan-readout"]

    g = GoldenLearner(spec)
    x_raw, y_raw = g.quantize_inputs(stream.x), g.quantize_targets(stream.y)
    g.run(x_raw[:10], y_raw[:10])  # compile outside the timing

    def golden():
        GoldenLearner(spec).run(x_raw, y_raw)

    n_slow = min(5_000, args.samples)

    def torch_sgd():
        FloatTwin(spec).run(stream.x[:n_slow], stream.y[:n_slow])

    from river import linear_model, optim

    rows = [{"i": float(a), "q": float(b)} for a, b in stream.x[:50_000]]
    labels = [bool(v > 0) for v in stream.y[:50_000, 0]]

    def river_lr():
        model = linear_model.LogisticRegression(optimizer=optim.SGD(2**-4))
        for xi, yi in zip(rows, labels):
            model.predict_one(xi)
            model.learn_one(xi, yi)

    import torch

    torch.set_num_threads(1)
    rates = {
        "golden 2->1 KAN (onchip, fixed point)": _rate(golden, len(x_raw)),
        "float twin, PyTorch per-sample SGD step": _rate(torch_sgd, n_slow, repeats=1),
        "river LogisticRegression (predict_one + learn_one)": _rate(river_lr, len(rows), repeats=3),
    }
    ref = rates["golden 2->1 KAN (onchip, fixed point)"]
    lines = [
        "# Golden model speed (samples per second, test-then-train, one core)",
        "",
        f"Command: `python sweeps/golden_speed.py --samples {args.samples}`"
        + (f" --data {args.data}" if args.data else "") + "  ",
        f"Stream: qubit-readout ({'real shots' if args.data else 'built-in source'}), preset kan-readout; "
        f"Python {platform.python_version()}, {platform.machine()}.",
        "",
        "| learner | samples/s | golden is faster by |",
        "|---|---:|---:|",
    ]
    for name, rate in rates.items():
        lines.append(f"| {name} | {rate:,.0f} | {ref / rate:,.1f}x |")
    lines.append("")
    text = "\n".join(lines)
    (HERE / "golden_speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
