"""Runner: any backend over any task stream -> predictions, metrics, rolling metric, plot.

Backends (:data:`onchip.backends.JOB_BACKENDS`): ``golden`` (the integer reference),
``float`` (the PyTorch float twin), ``rtl`` (the Verilated Amaranth design, driven by a C++
harness) and ``hls`` (the HLS C++ compiled for C simulation). The fixed-point backends take
the stream quantized to the spec's formats and return raw integer predictions, which must be
identical across them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .backends import JOB_BACKENDS, get_backend
from .spec import LearnerSpec, load_spec

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
        kernel: the golden model's stream kernel(s) that ran (:class:`onchip.result.RunResult`), or None.
    """

    predictions: np.ndarray
    raw: np.ndarray | None
    theta: np.ndarray
    seconds: float
    kernel: str | None = None


def run_backend(backend: str, spec: LearnerSpec, x, y, *, progress: bool = True, theta=None,
                channel=None) -> BackendRun:
    """Run ``spec`` on the float stream ``x`` (N, n_in), ``y`` (N, n_out) with one backend
    of :mod:`onchip.backends`: fixed-point backends get the stream quantized to the spec's
    formats, and their raw predictions are dequantized. ``theta``: raw initial parameters (P,),
    or (N, P) / (P,) for every channel with channels > 1 (default: the spec's), dequantized for
    the float backend. ``channel``: (N,) integers in [0, channels), each sample's channel
    (required with channels > 1); ``theta`` of the result is then (N, P).

    Raises:
        ValueError: unknown backend, data of the wrong shape, a bad or missing ``channel``, or a
            multi-channel spec on a backend without channel support.
    """
    from .model import GoldenLearner

    if backend not in JOB_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(JOB_BACKENDS)}; got {backend!r}")
    impl = get_backend(backend)
    if not impl.raw:
        start = time.perf_counter()
        start_theta = None if theta is None else spec.formats.coef.dequantize(theta)
        preds, final = impl.run(spec, x, y, progress=progress, theta=start_theta, channel=channel)
        return BackendRun(preds, None, final, time.perf_counter() - start)
    golden = GoldenLearner(spec)
    x_raw, y_raw = golden.quantize_inputs(x), golden.quantize_targets(y)
    if channel is not None or spec.channels > 1:
        from .model.golden import check_channel

        channel = check_channel(spec, channel, len(x_raw))
    # compile the kernels or build the model (or find them cached) outside the timing
    impl.run(spec, x_raw[:1], y_raw[:1], theta=theta, channel=None if channel is None else channel[:1])
    start = time.perf_counter()
    result = impl.run(spec, x_raw, y_raw, progress=progress, theta=theta, channel=channel)
    seconds = time.perf_counter() - start
    raw, final = result
    return BackendRun(golden.dequantize_outputs(raw), raw, final, seconds, getattr(result, "kernel", None))


def resolve_spec(task: str, model: str | None, spec: "str | Path | LearnerSpec | None", n_in: int,
                 n_out: int) -> LearnerSpec:
    """The spec of a run: the given file/preset, or the default preset of (task, model); a
    preset whose output width differs from the task's ``n_out`` is widened to (n_in, ..., n_out)
    and named ``<preset>-<n_out>out``.

    Args:
        model: the learner kind of the task's preset (None: ``"kan"``); with ``spec`` the
            spec's own kind is taken, and ``model``, if given, must agree with it.

    Raises:
        ValueError: unknown model, a spec of another kind than a given ``model``, or widths that
            do not fit the task.
    """
    if model is not None and model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    resolved = load_spec(spec if spec is not None else DEFAULT_PRESETS[(task, model or "kan")])
    model = model or resolved.kind
    if spec is None and resolved.n_out != n_out:
        # the task's preset with one output per class (e.g. S readout states): widths (n_in, ..., S)
        resolved = resolved.replace(widths=resolved.widths[:-1] + (n_out,), name=f"{resolved.name}-{n_out}out")
    if resolved.kind != model:
        raise ValueError(f"--spec describes a {resolved.kind!r} learner but --model is {model!r}")
    if resolved.n_in != n_in or resolved.n_out != n_out:
        raise ValueError(
            f"spec widths {list(resolved.widths)} do not fit task {task!r}, which has {n_in} "
            f"input(s) and {n_out} output(s)"
        )
    return resolved


def _plot(path: Path, title: str, ylabel: str, series: dict[str, np.ndarray], events, *, logy: bool = False) -> None:
    # drift events: a numbered dashed line each, described in the legend below the axes (a label
    # written along the line would cross the curves and run past the top for long descriptions)
    from .plotting import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.6))
    for label, values in series.items():
        ax.plot(np.arange(len(values)), values, label=label, lw=1.2)
    for n, event in enumerate(events, start=1):
        ax.axvline(event.index, color="0.4", ls="--", lw=0.8,
                   label=f"drift event {n} (sample {event.index}): {event.label}")
        ax.annotate(str(n), (event.index, 0.97), xycoords=("data", "axes fraction"), xytext=(3, 0),
                    textcoords="offset points", va="top", ha="left", fontsize=8, color="0.3",
                    bbox={"fc": "white", "ec": "none", "pad": 0.5})
    ax.set_xlabel("sample")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), fontsize=8, frameon=False, ncol=1)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_confusion(path: Path, title: str, matrices: dict[str, list[list[int]]], states: list[int]) -> None:
    # one panel per discriminator: row-normalised counts (rows prepared, columns assigned), the
    # fraction written in each cell
    from .plotting import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, len(matrices), figsize=(3.6 * len(matrices) + 0.6, 3.8), squeeze=False)
    names = [f"|{s}>" for s in states]
    for ax, (label, counts) in zip(axes[0], matrices.items()):
        c = np.asarray(counts, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = c / c.sum(axis=1, keepdims=True)
        ax.imshow(np.nan_to_num(frac), vmin=0.0, vmax=1.0, cmap="Blues")
        for i in range(frac.shape[0]):
            for j in range(frac.shape[1]):
                ax.text(j, i, f"{frac[i, j]:.3f}", ha="center", va="center", fontsize=9,
                        color="white" if frac[i, j] > 0.6 else "black")
        ax.set_xticks(range(len(names)), names)
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel("assigned")
        ax.set_ylabel("prepared")
        ax.set_title(label, fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def rolling_label(task: str, metric: str, samples: int, window: int | None) -> str:
    """The y label of the rolling plot: what is plotted and over which window."""
    if task == "drift-regression":
        from .tasks.regression import last_window_length

        return f"rolling MSE, window {last_window_length(samples // 3)} samples"
    return f"rolling assignment fidelity, window {window or 1000} shots" if "fidelity" in metric else metric


#: the shortest qubit-readout job: fewer shots cannot calibrate the static discriminator
#: reliably (it needs every state among its calibration shots, and more shots than states)
MIN_READOUT_SAMPLES = 100


def _sig(value) -> str:
    # 4 significant digits (None / NaN as written by metrics.json)
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_sig(v) for v in value) + "]"
    if isinstance(value, (float, np.floating)):  # '#' keeps trailing zeros: 0.9830, not 0.983
        return "nan" if not np.isfinite(value) else f"{value:#.4g}".rstrip(".")
    return str(value)


def _sci(value) -> str:
    # 4 significant digits in scientific notation (MSE spans decades)
    return "None" if value is None else f"{value:.3e}"


def source_line(meta: dict) -> str:
    """Which readout states a stream uses and how its shots were drawn, for the console."""
    source = meta.get("source", {})
    states = ", ".join(str(v) for v in meta.get("states", source.get("states_used", [])))
    draws = source.get("draws")
    if source.get("kind") == "file":
        total = source["file_shape"][0]
        replaced = [s for s, r in zip(meta["states"], source["with_replacement"]) if r]
        how = (f"with replacement for state(s) {', '.join(map(str, replaced))}" if replaced
               else "without replacement")
        return (f"states {states} of {total} in {source['path']}; shots drawn {how} "
                f"({source['distinct_shots'][0]} distinct shots per state, draws per state {draws})")
    if source.get("kind") == "model":
        return f"states {states} of the built-in source (fresh model shots, per state {draws})"
    return ""


def summary_lines(metrics: dict) -> list[str]:
    """The console summary of a main-job run: the README's figures, 4 significant digits
    (MSE in scientific notation).

    qubit-readout: the states used and how shots were drawn, assignment fidelity over the
    whole stream and the last 5000 shots, recovery shots per drift event, the same for the
    static discriminator, and for more than two states the confusion counts of the last
    5000 shots;
    drift-regression: MSE per segment, over the last 10% of each segment, and overall.
    """
    from .tasks import recovery_text

    if metrics["task"] == "acrobot":
        from .control import summary_lines as control_summary

        return control_summary(metrics)
    head = f"{metrics['task']} / {metrics['spec']} / {metrics['backend']}, {metrics.get('samples', '?')} samples"
    lines = [head]
    if metrics["task"] == "drift-regression":
        per = " / ".join(_sci(v) for v in metrics["mse_per_segment"])
        last = " / ".join(_sci(v) for v in metrics["mse_last_window"])
        lines += [f"  MSE per segment:                         {per}",
                  f"  MSE over the last 10% of each segment:   {last}",
                  f"  MSE over the whole stream:               {_sci(metrics['mse'])}"]
    else:
        from .tasks.fidelity import LAST_SHOTS

        last = f"last {min(LAST_SHOTS, metrics['samples'])} shots" if "samples" in metrics else "last shots"

        def fidelity(m):
            if m is None:
                return "not calibrated (its calibration shots lack a state)"
            return (f"fidelity {_sig(m.get('assignment_fidelity'))} (whole stream), "
                    f"{_sig(m.get('assignment_fidelity_last_5000'))} ({last}); "
                    f"recovery shots per drift event {recovery_text(m)}")

        lines.append(f"  {source_line(metrics.get('stream', {}))}")
        lines.append(f"  online learner:       {fidelity(metrics)}")
        if "static_baseline" in metrics:
            from .tasks.fidelity import static_in_sample_note

            sb = metrics["static_baseline"]
            note = static_in_sample_note(metrics["samples"]) if sb and "samples" in metrics else ""
            lines.append(f"  static discriminator: {fidelity(metrics['static_baseline'])}{note}")
        if len(metrics.get("states", ())) > 2:
            for who, m in (("online learner", metrics), ("static discriminator", metrics.get("static_baseline"))):
                if m:
                    rows = " / ".join(" ".join(str(v) for v in row) for row in m["confusion_counts_last_5000"])
                    lines.append(f"  {who}, {last}, counts (rows prepared, columns assigned): {rows}")
    if "samples_per_second" in metrics:
        kernel = f"{metrics['kernel']} kernel, " if metrics.get("kernel") else ""
        lines.append(f"  {metrics['samples_per_second']:.3g} samples/s ({kernel}compilation excluded)")
    return lines


def job_theta(spec: LearnerSpec, theta):
    """A job's ``theta`` checked for ``spec`` before anything is written (None: the spec's own).

    Raises:
        ValueError: starting ``theta:``, what :func:`onchip.model.golden.check_parameters` refuses.
    """
    if theta is None:
        return None
    from .model.golden import check_parameters

    try:
        return check_parameters(spec, theta)
    except ValueError as exc:
        raise ValueError(f"theta: {exc} (spec {spec.name})") from None


def run_job(
    *,
    task: str,
    model: str | None = None,
    out: str | Path,
    spec: "str | Path | LearnerSpec | None" = None,
    backend: str = "golden",
    data: str | Path | None = None,
    samples: int = 100_000,
    seed: int = 0,
    progress: bool = True,
    states=None,
    drift=None,
    episodes: int | None = None,
    theta=None,
) -> dict:
    """The main job: build the task stream, run one learner on it, write everything to ``out``.

    ``task="acrobot"`` is a closed control loop instead of a stream: see
    :func:`onchip.control.run_acrobot_job` (it takes ``episodes``, default 200, and ``drift``;
    ``samples``, ``data`` and ``states`` do not apply).

    Writes ``metrics.json``, ``predictions.npy`` (raw int64 in sample order for
    fixed-point backends, float64 for ``float``), ``rolling.csv``, ``rolling.png``
    (with drift events marked) and ``spec.toml``; for qubit-readout also ``drift.toml``
    (the drift scenario, readable by ``--drift``) and ``confusion.png`` (confusion
    matrices of the last 5000 shots, learner and static discriminator). Nothing is left
    in ``out`` if anything fails (the folder appears whole or not at all).

    ``states`` (e.g. ``"0,1,2"``) and ``drift`` (preset name, TOML file or
    :class:`~onchip.tasks.drift.DriftScenario`; default preset ``default``) apply to
    qubit-readout, see :func:`onchip.tasks.make_stream`. ``theta``: raw initial parameters (P,) in the
    spec's ``coef`` format (e.g. an imported network; default: the spec's seeded ones).

    N multiplexed qubits on one learner of ``channels = N``: :func:`onchip.multiplexed.run_multiplexed_job`
    (it builds on this module).

    Returns:
        The metrics dictionary.

    Raises:
        ValueError / FileNotFoundError: bad task, model, spec, backend, data or samples,
            before anything is written.
    """
    from . import tasks
    from .environment import write_metrics
    from .io import atomic_output_dir, check_output_dir

    if data is not None and not isinstance(data, (str, Path)):
        files = list(data)
        if len(files) != 1:
            raise ValueError(f"data: {len(files)} files given; several files need --qubits (one file per qubit)")
        data = files[0]
    if task == "acrobot":
        from .control import run_acrobot_job

        for name, value in (("data", data), ("states", states), ("theta", theta)):
            if value is not None:
                raise ValueError(f"{name}: the acrobot task takes no {name} option, got {str(value)!r}")
        return run_acrobot_job(model=model, out=out, spec=spec, backend=backend, episodes=episodes,
                               seed=seed, drift=drift, progress=progress)
    if episodes is not None:
        raise ValueError(f"episodes: only the acrobot task takes episodes, got {episodes!r} for {task}")
    check_output_dir(out)
    if backend not in JOB_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(JOB_BACKENDS)}; got {backend!r}")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    if task == "qubit-readout" and samples < MIN_READOUT_SAMPLES:
        raise ValueError(f"samples: the qubit-readout job needs at least {MIN_READOUT_SAMPLES} shots (its static "
                         f"discriminator is calibrated on the first of them), got {samples}")
    scenario = None
    if task == "qubit-readout":
        scenario = tasks.load_drift("default" if drift is None else drift, task=task)
    elif drift is not None:
        raise ValueError(f"drift: the {task} task takes no drift option, got {str(drift)!r}")
    stream = tasks.make_stream(task, samples=int(samples), seed=seed, data=data, states=states, drift=scenario)
    resolved = resolve_spec(task, model, spec, stream.x.shape[1], stream.y.shape[1])
    model = resolved.kind
    theta = job_theta(resolved, theta)
    # the staging folder exists for the whole run, so an interrupted run is cleaned up too
    with atomic_output_dir(out) as stage:
        result = run_backend(backend, resolved, stream.x, stream.y, progress=progress, theta=theta)

        metrics = {
            "task": task,
            "model": model,
            "backend": backend,
            "spec": resolved.name or "custom",
            "seed": seed,
            **tasks.evaluate(stream, result.predictions),
            "samples_per_second": len(stream) / max(result.seconds, 1e-9),
            "kernel": result.kernel,
            "stream": stream.meta,
        }
        if scenario is not None:
            metrics["drift"] = stream.meta["drift"]
        metric_name, rolling = tasks.rolling_metric(stream, result.predictions)
        series = {f"{model} ({backend})": rolling}
        if task == "qubit-readout" and metrics.get("static_baseline") is not None:
            _, static = tasks.rolling_metric(stream, tasks.static_baseline_predictions(stream))
            series["static discriminator"] = static
        write_metrics(stage, metrics)  # with what the run ran on
        np.save(stage / "predictions.npy", result.raw if result.raw is not None else result.predictions)
        header = ",".join(["sample"] + [name.replace(",", ";") for name in series])
        table = np.column_stack([np.arange(len(stream))] + list(series.values()))
        np.savetxt(stage / "rolling.csv", table, delimiter=",", header=header, comments="", fmt="%.6g")
        (stage / "spec.toml").write_text(resolved.to_toml())
        if scenario is not None:
            (stage / "drift.toml").write_text(scenario.to_toml())
            matrices = {f"{model} ({backend})": metrics["confusion_counts_last_5000"]}
            if metrics.get("static_baseline"):
                matrices["static discriminator"] = metrics["static_baseline"]["confusion_counts_last_5000"]
            _plot_confusion(stage / "confusion.png",
                            f"{task}: confusion over the last {min(5000, len(stream))} shots",
                            matrices, metrics["states"])
        _plot(stage / "rolling.png", f"{task}: {resolved.name or model} on {backend}",
              rolling_label(task, metric_name, len(stream), metrics.get("window")), series, stream.events,
              logy="mse" in metric_name.lower())
    return metrics
