"""C-simulation throughput of the HLS learners beside the golden model's, with bit-exactness.

For every preset and schedule: the preset's task stream (drift regression for
1-input learners, modelled qubit-readout shots for 2-input ones) runs through
the golden model (numba) and through the C simulation of the emitted HLS C++
(g++ -O2, driven through the top function's AXI4-Stream ports); both times
exclude compilation. Writes sweeps/hls_speed.md and sweeps/hls_speed.png.

Usage: python sweeps/hls_speed.py [--samples 100000] [--seed 0] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from onchip.hls import HlsLearner, build
from onchip.model import GoldenLearner
from onchip.plotting import pyplot
from onchip.spec import PRESETS
from onchip.tasks import make_stream

HERE = Path(__file__).parent


def _best_rate(fn, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.samples < 1 or args.repeats < 1:
        raise ValueError(f"--samples and --repeats must be >= 1, got {args.samples}, {args.repeats}")

    rows = []
    jobs = [(name, s) for name in PRESETS for s in ("sequential", "pipelined")]
    for name, schedule in tqdm(jobs, desc="presets"):
        spec = PRESETS[name].replace(schedule=schedule)
        task = "drift-regression" if spec.n_in == 1 else "qubit-readout"
        stream = make_stream(task, samples=args.samples, seed=args.seed)
        golden = GoldenLearner(spec)
        x_raw, y_raw = golden.quantize_inputs(stream.x), golden.quantize_targets(stream.y)
        hls = HlsLearner(spec)
        golden.run(x_raw[:2], y_raw[:2])  # numba compile, untimed

        def run_golden():
            golden.reset()
            out = golden.run(x_raw, y_raw)
            golden.flush()
            return out

        g_rate = _best_rate(run_golden, len(x_raw), args.repeats)
        want = run_golden(), golden.theta.copy()
        h_rate = _best_rate(lambda: hls.run(x_raw, y_raw), len(x_raw), args.repeats)
        got = hls.run(x_raw, y_raw)
        exact = np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        rows.append((name, schedule, task, g_rate, h_rate, exact))

    _, cxx = build.compiler()
    lines = [
        "# HLS C simulation: throughput and bit-exactness",
        "",
        f"`python sweeps/hls_speed.py --samples {args.samples} --seed {args.seed} --repeats {args.repeats}`"
        f" on {platform.machine()} ({cxx}, flags `{' '.join(build.CXXFLAGS)}`); best of {args.repeats} runs,"
        " compile time excluded. The HLS column drives the emitted top function through its"
        " AXI4-Stream ports (hls::stream), word by word. Bit-exact: predictions and final"
        " parameters (after the flush) equal the golden model's.",
        "",
        "| preset | schedule | stream | golden (samples/s) | HLS csim (samples/s) | csim / golden | bit-exact |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name, schedule, task, g, h, exact in rows:
        lines.append(f"| {name} | {schedule} | {task} | {g:,.0f} | {h:,.0f} | {h / g:.2f} | {'yes' if exact else 'NO'} |")
    (HERE / "hls_speed.md").write_text("\n".join(lines) + "\n")

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    labels = [f"{n}\n{s[:3]}" for n, s, *_ in rows]
    pos = np.arange(len(rows))
    ax.bar(pos - 0.2, [r[3] for r in rows], 0.4, label="golden (numba)")
    ax.bar(pos + 0.2, [r[4] for r in rows], 0.4, label="HLS C simulation (g++)")
    ax.set_xticks(pos, labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("samples / s")
    ax.set_title("Test-then-train throughput (all runs bit-exact)" if all(r[5] for r in rows)
                 else "Test-then-train throughput")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "hls_speed.png", dpi=120)
    plt.close(fig)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
