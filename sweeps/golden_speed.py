"""Benchmark: golden readout learners (specialised and generic kernels) vs PyTorch per-sample SGD and river.

Run:  python sweeps/golden_speed.py [--samples N] [--data SHOTS.npy]
Writes sweeps/golden_speed.md and sweeps/golden_speed.png. Every learner runs test-then-train
(predict, then learn) on the same qubit-readout stream in this one process, on one thread; rates
are samples per second of the process's CPU time, the best of 5 rounds that run every learner
once in turn (so that a change of load reaches all of them alike); other work on a shared machine
does not count, though it still slows the core; the ratios are what to read. The
golden rows time ``GoldenLearner.run`` (input checks included); the specialised runner is the
default path once it is compiled, and the two paths are checked bit for bit on the timed stream.
Compile times (wall clock) are measured from an empty numba cache (a temporary folder), as a
fresh machine pays them once per spec (generic kernels: once per learner kind).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="golden-speed-numba-")  # before numba loads
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one thread: CPU time = one core
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from onchip import tasks  # noqa: E402
from onchip.model import GoldenLearner  # noqa: E402
from onchip.model.float_twin import FloatTwin  # noqa: E402
from onchip.model.specialise import SPECIALISE_AFTER  # noqa: E402
from onchip.plotting import pyplot  # noqa: E402
from onchip.spec import PRESETS  # noqa: E402

HERE = Path(__file__).resolve().parent


def _rates(jobs: dict, rounds: int, bar) -> dict:
    """Samples per second of this process's CPU time of each job ``name: (fn, samples)``: the
    best of ``rounds`` rounds, each running every job once in turn, so that a change of the
    machine's load during the run reaches every learner alike."""
    best = {name: float("inf") for name in jobs}
    for _ in range(rounds):
        for name, (fn, _n) in jobs.items():
            start = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - start)
        bar.update()
    return {name: n / best[name] for name, (_fn, n) in jobs.items()}


def _compile_seconds(spec, specialise: bool, x, y) -> float:
    """Seconds of the first call of a learner's run: the compile (nothing of it cached yet)."""
    start = time.perf_counter()
    GoldenLearner(spec, specialise=specialise).run(x[:10], y[:10])
    return time.perf_counter() - start


def _golden_jobs(label: str, spec, x, y, results: dict) -> dict:
    """The default (specialised once compiled) and the generic path of ``spec`` as timed jobs;
    each run leaves its predictions and flushed parameters in ``results[(label, path)]``."""

    def job(specialise):
        def run():
            g = GoldenLearner(spec, specialise=specialise)
            preds = g.run(x, y)
            g.flush()
            results[(label, specialise)] = (preds, g.theta)

        return run, len(x)

    return {
        f"golden {label}, specialised kernels (the default once compiled)": job(None),
        f"golden {label}, generic kernels (`specialise=False`)": job(False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    stream = tasks.make_stream("qubit-readout", samples=args.samples, seed=0, data=args.data)
    kan, mlp = PRESETS["kan-readout"], PRESETS["mlp-readout"]
    g = GoldenLearner(kan)
    x_raw, y_raw = g.quantize_inputs(stream.x), g.quantize_targets(stream.y)
    n_mlp = min(200_000, args.samples)
    gm = GoldenLearner(mlp)
    xm, ym = gm.quantize_inputs(stream.x[:n_mlp]), gm.quantize_targets(stream.y[:n_mlp])

    n_slow = min(2_000, args.samples)

    def torch_sgd():
        FloatTwin(kan).run(stream.x[:n_slow], stream.y[:n_slow])

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
    label_of = {"kan": "2->1 KAN (kan-readout)", "mlp": "2-8-1 MLP (mlp-readout)"}
    data = {"kan": (kan, x_raw, y_raw), "mlp": (mlp, xm, ym)}
    rounds = 5
    results, infos, jobs = {}, [], {}
    with tqdm(total=2 + rounds, desc="golden speed", unit="step") as bar:
        for key, (spec, x, y) in data.items():
            compile_s = {"generic": _compile_seconds(spec, False, x, y),
                         "specialised": _compile_seconds(spec, True, x, y)}
            infos.append({"key": key, "name": label_of[key], "compile": compile_s})
            jobs.update(_golden_jobs(label_of[key], spec, x, y, results))
            bar.update()
        jobs["float twin, PyTorch per-sample SGD step (2->1 KAN)"] = (torch_sgd, n_slow)
        jobs["river LogisticRegression (predict_one + learn_one)"] = (river_lr, len(rows))
        rates = _rates(jobs, rounds, bar)
    names = list(jobs)
    for info in infos:
        label = label_of[info["key"]]
        info["exact"] = all(np.array_equal(a, b) for a, b in zip(results[(label, None)], results[(label, False)]))
        spec_rate, gen_rate = (rates[n] for n in names if n.startswith(f"golden {label},"))
        info["speedup"] = spec_rate / gen_rate
    kan_rows = [(n, rates[n]) for n in names if n.startswith(f"golden {label_of['kan']},")]
    ref_name = kan_rows[0][0]
    ref = rates[ref_name]
    lines = [
        "# Golden model speed (samples per second of CPU time, test-then-train, one core)",
        "",
        f"Command: `python sweeps/golden_speed.py --samples {args.samples}`"
        + (f" --data {args.data}" if args.data else "") + "  ",
        f"Stream: qubit-readout ({'real shots' if args.data else 'built-in source'}), {args.samples:,} samples "
        f"(MLP rows: the first {n_mlp:,}); Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work (load average {load:.1f} at the start; "
        "rates drift with load, the ratios come from one run).",
        "",
        "| learner | samples/s | specialised golden KAN is faster by |",
        "|---|---:|---:|",
    ]
    for name, rate in rates.items():
        lines.append(f"| {name} | {rate:,.0f} | {ref / rate:,.1f}x |")
    lines += [
        "",
        "Compile time of the first run from an empty numba cache (seconds; once per machine and spec, "
        "the generic kernels once per learner kind), the specialised path's gain, and whether both "
        "paths gave the same predictions and parameters on the timed stream:",
        "",
        "| learner | generic compile (s) | specialised compile (s) | specialised / generic speed | bit-exact |",
        "|---|---:|---:|---:|---|",
    ]
    for info in infos:
        c = info["compile"]
        lines.append(f"| {info['name']} | {c['generic']:.1f} | {c['specialised']:.1f} | {info['speedup']:.1f}x | "
                     f"{'yes' if info['exact'] else 'NO'} |")
    generic_kan = rates[kan_rows[1][0]]
    lines += [
        "",
        f"At these rates a stream of 10^8 kan-readout shots takes {1e8 / ref:,.0f} s of CPU time "
        f"({1e8 / generic_kan:,.0f} s on the generic kernels).",
        "",
        f"`GoldenLearner(spec)` takes the specialised runner when it is compiled (this process or the "
        f"on-disk cache) or once the learner has run {SPECIALISE_AFTER:,} samples; `specialise=True` / "
        "`False` or `ONCHIP_SPECIALISE=1` / `0` choose explicitly.",
        "",
    ]
    text = "\n".join(lines)
    (HERE / "golden_speed.md").write_text(text)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    names = list(rates)
    ax.barh(np.arange(len(names)), [rates[n] for n in names], color=["C0", "C0", "C1", "C1", "C2", "C3"])
    ax.set_yticks(np.arange(len(names)), [n.replace(" (", "\n(", 1) for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("samples per CPU second (test-then-train, one core)")
    ax.axvline(2e7, color="grey", linestyle="--", linewidth=1)
    ax.text(2e7, len(names) - 0.5, " 20 M/s", color="grey", fontsize=7, va="bottom")
    ax.set_title("Golden model vs PyTorch and river (one run)", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "golden_speed.png", dpi=120)
    plt.close(fig)
    print(text)


if __name__ == "__main__":
    main()
