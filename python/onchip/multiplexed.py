"""The multiplexed readout job: N qubits, one learner spec with ``channels = N``, one datapath.

``onchip run --task qubit-readout --qubits N`` builds the N-qubit stream
(:func:`onchip.tasks.multiqubit.make_multiqubit_readout`: round robin, each qubit its own clouds
and drift), runs one backend over it with each sample's channel, and scores every qubit on its
own shots (:func:`onchip.tasks.multiqubit.evaluate_multiqubit`), beside each qubit's frozen LDA.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from .backends import JOB_BACKENDS
from .spec import LearnerSpec

#: qubits per panel of the rolling plot stays 1 up to this many qubits; beyond, qubits are grouped
#: so that the plot keeps at most this many panels
MAX_PANELS = 16


def multichannel_spec(spec: LearnerSpec, qubits: int) -> LearnerSpec:
    """``spec`` with ``channels = qubits``: a single-channel spec is given the qubits' channels,
    a spec that already has ``channels = qubits`` is kept.

    Raises:
        ValueError: naming ``qubits``, when the spec has another channel count.
    """
    if spec.channels == qubits:
        return spec
    if spec.channels != 1:
        raise ValueError(f"qubits: {qubits} qubits need a spec of channels = {qubits} (or 1), "
                         f"but {spec.name or 'the spec'} has channels = {spec.channels}")
    return spec.replace(channels=qubits)


def _panels(n: int) -> list[list[int]]:
    # one qubit a panel up to MAX_PANELS, else consecutive groups of equal size
    per = -(-n // MAX_PANELS)
    return [list(range(a, min(a + per, n))) for a in range(0, n, per)]


def plot_qubits(path: Path, title: str, ylabel: str, learner: np.ndarray, static: "np.ndarray | None",
                events: list, label: str) -> None:
    """One panel per qubit (per group of qubits beyond :data:`MAX_PANELS`): the rolling fidelity
    of the learner and of the static discriminator over the qubit's shots, its drift events
    dashed. A group panel shows the group's mean with its min-max band, events not marked.

    Args:
        learner: (N, S) rolling values of the learner; ``static`` the same of the static
            discriminator (NaN rows where it could not be calibrated), or None.
        events: per qubit, its :class:`~onchip.tasks.stream.DriftEvent` list.
    """
    from .plotting import pyplot

    plt = pyplot()
    groups = _panels(len(learner))
    cols = min(4, len(groups))
    rows = -(-len(groups) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols + 0.6, 2.3 * rows + 0.9), squeeze=False,
                             sharex=True, sharey=True)
    shots = np.arange(learner.shape[1])
    for ax, group in zip(axes.flat, groups):
        for values, name, colour in ((learner, label, "C0"), (static, "static LDA", "C1")):
            if values is None:
                continue
            part = values[group]
            if len(group) == 1:
                ax.plot(shots, part[0], lw=0.9, color=colour, label=name)
            else:
                with warnings.catch_warnings():  # an all-NaN column (windows not yet full) is expected
                    warnings.simplefilter("ignore", RuntimeWarning)
                    ax.plot(shots, np.nanmean(part, axis=0), lw=0.9, color=colour, label=f"{name}, mean")
                    ax.fill_between(shots, np.nanmin(part, axis=0), np.nanmax(part, axis=0), color=colour,
                                    alpha=0.2, lw=0)
        if len(group) == 1:
            for event in events[group[0]]:
                ax.axvline(event.index, color="0.4", ls="--", lw=0.7)
            ax.set_title(f"qubit {group[0]}", fontsize=9)
        else:
            ax.set_title(f"qubits {group[0]}-{group[-1]}", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("shot of the qubit", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    axes.flat[0].legend(fontsize=7, loc="lower left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _events_text(mean: dict) -> str:
    """``recovered from R of M drift events``, the events too short to measure counted apart."""
    short = mean.get("too_short_events", 0)
    measured = mean["drift_events"] - short
    text = f"recovered from {mean['recovered_events']} of {measured} measurable drift events"
    return text + (f" ({short} too short to measure)" if short else "")


def summary_lines(metrics: dict) -> list[str]:
    """The console summary of a multiplexed run: each qubit's fidelity (whole stream, its last
    5000 shots), its recovery per drift event and its static discriminator's, then the means."""
    from .run import _sig
    from .tasks import recovery_text
    from .tasks.fidelity import LAST_SHOTS, static_in_sample_note

    n = metrics["qubits"]
    head = (f"qubit-readout, {n} qubits / {metrics['spec']} (channels = {metrics['channels']}) / "
            f"{metrics['backend']}, {metrics['samples_per_qubit']} shots per qubit, round robin")
    lines = [head, f"  source: {metrics['stream']['source']}; drift: {metrics['stream']['drift']}"]
    for c, m in enumerate(metrics["per_qubit"]):
        sb = m.get("static_baseline")
        static = (f"static {_sig(sb['assignment_fidelity'])} / {_sig(sb['assignment_fidelity_last_5000'])}"
                  f"{static_in_sample_note(m['samples'])}" if sb else "static not calibrated")
        lines.append(f"  qubit {c}: fidelity {_sig(m['assignment_fidelity'])} (whole), "
                     f"{_sig(m['assignment_fidelity_last_5000'])} (last {min(LAST_SHOTS, m['samples'])}); "
                     f"recovery {recovery_text(m)}; {static}")
        if "iq_map" in metrics["per_qubit_stream"][c]["source"]:
            lines[-1] += f" [{metrics['stream']['per_qubit'][c]['source']}]"
    for who, mean in (("online learner", metrics["mean"]), ("static discriminator", metrics["static_baseline_mean"])):
        lines.append(f"  mean over {mean['qubits']} qubits, {who}: fidelity {_sig(mean['assignment_fidelity'])} "
                     f"(whole), {_sig(mean['assignment_fidelity_last_5000'])} "
                     f"(last {min(LAST_SHOTS, metrics['samples_per_qubit'])} of each qubit); "
                     + _events_text(mean))
    if "samples_per_second" in metrics:
        kernel = f"{metrics['kernel']} kernel, " if metrics.get("kernel") else ""
        lines.append(f"  {metrics['samples_per_second']:.3g} samples/s ({kernel}compilation excluded)")
    return lines


def run_multiplexed_job(*, qubits: int, out: "str | Path", model: str | None = None,
                        spec: "str | Path | LearnerSpec | None" = None, backend: str = "golden", data=None,
                        samples: int = 100_000, seed: int = 0, progress: bool = True, states=None, drift=None,
                        theta=None) -> dict:
    """The main job on N multiplexed qubits (``onchip run --task qubit-readout --qubits N``).

    Args:
        qubits: N >= 1.
        out: the output folder (written whole or not at all).
        model: the learner kind of the task's preset (None: ``"kan"``), as for :func:`onchip.run.run_job`.
        spec: a preset name, TOML file or spec; it gets ``channels = N`` (:func:`multichannel_spec`).
        backend: one of :data:`onchip.backends.JOB_BACKENDS`.
        data: None, one shots file reused by every qubit, or a list of N files
            (:func:`onchip.tasks.multiqubit.make_multiqubit_readout`).
        samples: shots per qubit (>= :data:`onchip.run.MIN_READOUT_SAMPLES`); the stream holds N
            times as many samples.
        seed: seed of the stream (>= 0).
        progress: show the backend's progress bar.
        states: prepared states to tell apart, the same for every qubit.
        drift: None / ``"independent"`` (each qubit its own), or a scenario for every qubit.
        theta: raw initial parameters, (P,) for every channel or (N, P).

    Writes to ``out`` (whole or not at all): ``metrics.json`` (per qubit and mean figures),
    ``predictions.npy`` (raw int64 outputs in stream order, float64 for ``float``),
    ``rolling.csv`` (per qubit, learner and static LDA, by the qubit's shot), ``rolling.png``
    (:func:`plot_qubits`), ``spec.toml`` and ``drift/qubit-<c>.toml`` (each qubit's scenario).

    Returns:
        The metrics dictionary.

    Raises:
        ValueError / FileNotFoundError: a bad qubit count, data list, spec, backend, samples,
            drift or theta, before anything is written.
    """
    from . import tasks
    from .environment import write_metrics
    from .io import atomic_output_dir, check_output_dir
    from .run import MIN_READOUT_SAMPLES, job_theta, resolve_spec, run_backend
    from .tasks.multiqubit import (check_qubits, evaluate_multiqubit, make_multiqubit_readout,
                                   rolling_per_qubit)

    qubits = check_qubits(qubits)
    check_output_dir(out)
    if backend not in JOB_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(JOB_BACKENDS)}; got {backend!r}")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < MIN_READOUT_SAMPLES:
        raise ValueError(f"samples: the qubit-readout job needs at least {MIN_READOUT_SAMPLES} shots per qubit "
                         f"(each qubit's static discriminator is calibrated on its first shots), got {samples!r}")
    stream = make_multiqubit_readout(qubits, int(samples), seed, data=data, states=states, drift=drift,
                                     progress=progress)
    resolved = multichannel_spec(resolve_spec("qubit-readout", model, spec, stream.x.shape[1], stream.y.shape[1]),
                                 qubits)
    model = resolved.kind
    theta = job_theta(resolved, theta)
    with atomic_output_dir(out) as stage:
        result = run_backend(backend, resolved, stream.x, stream.y, progress=progress, theta=theta,
                             channel=stream.channel)
        figures = evaluate_multiqubit(stream, result.predictions, progress=progress)
        metrics = {"task": "qubit-readout", "model": model, "backend": backend, "spec": resolved.name or "custom",
                   "channels": resolved.channels, "seed": seed, **figures,
                   "samples_per_second": len(stream) / max(result.seconds, 1e-9), "kernel": result.kernel,
                   "stream": stream.meta, "per_qubit_stream": [s.meta for s in stream.qubits]}
        learner = rolling_per_qubit(stream, result.predictions)
        static = np.full_like(learner, np.nan)
        for c, (s, m) in enumerate(zip(stream.qubits, figures["per_qubit"])):
            if m["static_baseline"] is not None:
                static[c] = tasks.rolling_metric(s, tasks.static_baseline_predictions(s))[1]
        write_metrics(stage, metrics)  # with what the run ran on
        np.save(stage / "predictions.npy", result.raw if result.raw is not None else result.predictions)
        label = f"{model} ({backend})"
        columns = [f"qubit {c} {who}" for c in range(qubits) for who in (label, "static discriminator")]
        table = np.column_stack([np.arange(stream.shots)] + [v for c in range(qubits) for v in (learner[c], static[c])])
        np.savetxt(stage / "rolling.csv", table, delimiter=",", header=",".join(["shot"] + columns), comments="",
                   fmt="%.6g")
        (stage / "spec.toml").write_text(resolved.to_toml())
        (stage / "drift").mkdir()
        for c, scenario in enumerate(stream.drifts):
            (stage / "drift" / f"qubit-{c:0{len(str(qubits - 1))}d}.toml").write_text(scenario.to_toml())
        plot_qubits(stage / "rolling.png",
                    f"qubit-readout, {qubits} qubits: {resolved.name or model} (channels = {qubits}) on {backend}",
                    f"rolling fidelity, {figures['per_qubit'][0]['window']} shots",
                    learner, static, [s.events for s in stream.qubits], label)
    return metrics
