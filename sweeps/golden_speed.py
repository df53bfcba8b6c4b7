"""Benchmark: golden readout learners (specialised and generic kernels) vs PyTorch per-sample SGD and river.

Run:  python sweeps/golden_speed.py [--samples N] [--data SHOTS.npy]
Writes sweeps/golden_speed.md and sweeps/golden_speed.png. Every learner runs test-then-train
(predict, then learn) on the same qubit-readout stream in this one process, on one thread; rates
are samples per second of the process's CPU time (best of 5 runs; PyTorch: 1), so that other work on a
shared machine does not count, though it still slows the core; the ratios are what to read. The
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


def _rate(fn, n: int, repeats: int) -> float:
    """Best of ``repeats`` runs, in samples per second of this process's CPU time."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return n / best


def _compile_seconds(spec, specialise: bool, x, y) -> float:
    """Seconds of the first call of a learner's run: the compile (nothing of it cached yet)."""
    start = time.perf_counter()
    GoldenLearner(spec, specialise=specialise).run(x[:10], y[:10])
    return time.perf_counter() - start


def _golden_rows(name: str, spec, x, y, repeats: int, bar) -> tuple[list, dict]:
    """Rates of the default (specialised once compiled) and the generic path, their compile
    times, and whether both give the same predictions and parameters."""
    compile_s = {"generic": _compile_seconds(spec, False, x, y), "specialised": _compile_seconds(spec, True, x, y)}
    bar.update()
    results = {}

    def run(specialise):
        g = GoldenLearner(spec, specialise=specialise)
        preds = g.run(x, y)
        g.flush()
        results[specialise] = (preds, g.theta)

    default = _rate(lambda: run(None), len(x), repeats)
    bar.update()
    generic = _rate(lambda: run(False), len(x), repeats)
    bar.update()
    exact = all(np.array_equal(a, b) for a, b in zip(results[None], results[False]))
    rows = [
        (f"golden {name}, specialised kernels (the default once compiled)", default),
        (f"golden {name}, generic kernels (`specialise=False`)", generic),
    ]
    return rows, {"name": name, "compile": compile_s, "exact": exact, "speedup": default / generic}


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

    n_slow = min(5_000, args.samples)

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
    with tqdm(total=8, desc="golden speed", unit="run") as bar:
        kan_rows, kan_info = _golden_rows("2->1 KAN (kan-readout)", kan, x_raw, y_raw, 5, bar)
        mlp_rows, mlp_info = _golden_rows("2-8-1 MLP (mlp-readout)", mlp, xm, ym, 5, bar)
        torch_rate = _rate(torch_sgd, n_slow, repeats=1)
        bar.update()
        river_rate = _rate(river_lr, len(rows), repeats=5)
        bar.update()
    rates = dict(kan_rows + mlp_rows)
    rates["float twin, PyTorch per-sample SGD step (2->1 KAN)"] = torch_rate
    rates["river LogisticRegression (predict_one + learn_one)"] = river_rate
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
    for info in (kan_info, mlp_info):
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
    ax.set_title("Golden model vs PyTorch per-sample SGD and river (one run)")
    fig.tight_layout()
    fig.savefig(HERE / "golden_speed.png", dpi=120)
    plt.close(fig)
    print(text)


if __name__ == "__main__":
    main()
