"""Runner: any backend over any task stream -> predictions, metrics, rolling metric, plot.

Backends (:data:`BACKENDS`, implemented in :mod:`onchip.backends`): ``golden`` (the
integer reference), ``float`` (the PyTorch float twin), ``rtl`` (the Verilated Amaranth
design, driven by a C++ harness) and ``hls`` (the HLS C++ compiled for C simulation). The
fixed-point backends take the stream quantized to the spec's formats and
return raw integer predictions, which must be identical across them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .backends import backend_names
from .spec import LearnerSpec, load_spec

#: Backends of the main job: every registered one but the cocotb bench (a protocol checker,
#: three orders of magnitude slower than the stream harness on the same design).
BACKENDS = tuple(name for name in backend_names() if name != "cocotb")
MODELS = ("kan", "mlp")
#: Preset used for (task, model) when no spec is given.
DEFAULT_PRESETS = {
    ("drift-regression", "kan"): "kan-regression",
    ("drift-regression", "mlp"): "mlp-regression",
    ("qubit-readout", "kan"): "kan-readout",
    ("qubit-readout", "mlp"): "mlp-readout",
}


@dataclass
class BackendRun:
    """What a backend returns for a stream.

    Attributes:
        predictions: (N, n_out) float64 predictions (dequantized for fixed-point backends).
        raw: (N, n_out) int64 raw predictions in the ``act`` format, or None (float backend).
        theta: final parameters after all updates (raw int64, or float64 for ``float``).
        seconds: wall time of the stream run.
    """

    predictions: np.ndarray
    raw: np.ndarray | None
    theta: np.ndarray
    seconds: float


def run_backend(backend: str, spec: LearnerSpec, x, y, *, progress: bool = True) -> BackendRun:
    """Run ``spec`` on the float stream ``x`` (N, n_in), ``y`` (N, n_out) with one backend
    of :mod:`onchip.backends`: fixed-point backends get the stream quantized to the spec's
    formats, and their raw predictions are dequantized.

    Raises:
        ValueError: unknown backend, or data of the wrong shape.
    """
    from .backends import get_backend
    from .model import GoldenLearner

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    impl = get_backend(backend)
    if not impl.raw:
        start = time.perf_counter()
        preds, theta = impl.run(spec, x, y, progress=progress)
        return BackendRun(preds, None, theta, time.perf_counter() - start)
    golden = GoldenLearner(spec)
    x_raw, y_raw = golden.quantize_inputs(x), golden.quantize_targets(y)
    # compile the kernels or build the model (or find them cached) outside the timing
    impl.run(spec, x_raw[:1], y_raw[:1])
    start = time.perf_counter()
    raw, theta = impl.run(spec, x_raw, y_raw, progress=progress)
    seconds = time.perf_counter() - start
    return BackendRun(golden.dequantize_outputs(raw), raw, theta, seconds)


def resolve_spec(task: str, model: str, spec: "str | Path | LearnerSpec | None", n_in: int, n_out: int) -> LearnerSpec:
    """The spec of a run: the given file/preset, or the default preset of (task, model).

    Raises:
        ValueError: unknown model, a spec of another kind, or widths that do not fit the task.
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    resolved = load_spec(spec if spec is not None else DEFAULT_PRESETS[(task, model)])
    if resolved.kind != model:
        raise ValueError(f"--spec describes a {resolved.kind!r} learner but --model is {model!r}")
    if resolved.n_in != n_in or resolved.n_out != n_out:
        raise ValueError(
            f"spec widths {list(resolved.widths)} do not fit task {task!r}, which has {n_in} "
            f"input(s) and {n_out} output(s)"
        )
    return resolved


def _plot(path: Path, title: str, metric: str, series: dict[str, np.ndarray], events) -> None:
    from .plotting import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for label, values in series.items():
        ax.plot(np.arange(len(values)), values, label=label, lw=1.2)
    for n, event in enumerate(events):
        ax.axvline(event.index, color="0.4", ls="--", lw=0.8, label="drift event" if n == 0 else None)
        ax.annotate(event.label, (event.index, 1.0), xycoords=("data", "axes fraction"),
                    rotation=90, va="top", ha="right", fontsize=7, color="0.3")
    ax.set_xlabel("sample")
    ax.set_ylabel(metric)
    if "mse" in metric.lower():
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_job(
    *,
    task: str,
    model: str,
    out: str | Path,
    spec: "str | Path | LearnerSpec | None" = None,
    backend: str = "golden",
    data: str | Path | None = None,
    samples: int = 100_000,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """The main job: build the task stream, run one learner on it, write everything to ``out``.

    Writes ``metrics.json``, ``predictions.npy`` (raw int64 in sample order for
    fixed-point backends, float64 for ``float``), ``rolling.csv``, ``rolling.png``
    (with drift events marked) and ``spec.toml``. Nothing is left in ``out`` if
    anything fails (the folder appears whole or not at all).

    Returns:
        The metrics dictionary.

    Raises:
        ValueError / FileNotFoundError: bad task, model, spec, backend, data or samples,
            before anything is written.
    """
    from . import tasks
    from .io import atomic_output_dir, check_output_dir, write_json

    check_output_dir(out)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    stream = tasks.make_stream(task, samples=int(samples), seed=seed, data=data)
    resolved = resolve_spec(task, model, spec, stream.x.shape[1], stream.y.shape[1])
    # the staging folder exists for the whole run, so an interrupted run is cleaned up too
    with atomic_output_dir(out) as stage:
        result = run_backend(backend, resolved, stream.x, stream.y, progress=progress)

        metrics = {
            "task": task,
            "model": model,
            "backend": backend,
            "spec": resolved.name or "custom",
            "seed": seed,
            **tasks.evaluate(stream, result.predictions),
            "samples_per_second": len(stream) / max(result.seconds, 1e-9),
            "stream": stream.meta,
        }
        metric_name, rolling = tasks.rolling_metric(stream, result.predictions)
        series = {f"{model} ({backend})": rolling}
        if task == "qubit-readout":
            _, static = tasks.rolling_metric(stream, tasks.static_baseline_predictions(stream))
            series["static discriminator"] = static
        write_json(stage / "metrics.json", metrics)
        np.save(stage / "predictions.npy", result.raw if result.raw is not None else result.predictions)
        header = ",".join(["sample"] + [name.replace(",", ";") for name in series])
        table = np.column_stack([np.arange(len(stream))] + list(series.values()))
        np.savetxt(stage / "rolling.csv", table, delimiter=",", header=header, comments="", fmt="%.6g")
        (stage / "spec.toml").write_text(resolved.to_toml())
        _plot(stage / "rolling.png", f"{task}: {resolved.name or model} on {backend}", metric_name,
              series, stream.events)
    return metrics
