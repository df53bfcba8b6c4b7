"""The acrobot control job: a host learns the swing-up's Q-function on the chip under a
dynamics change (:mod:`onchip.qlearning`: the host loop over the error-input interface), the
frozen policy as the static baseline, the recovery metrics, and the replay of the recorded
closed loop through the ``rtl`` and ``hls`` backends.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from .backends import JOB_BACKENDS, get_backend
from .model import SampleKind
from .qlearning import CLOSED_LOOP_BACKENDS, QConfig
from .spec import LearnerSpec, load_spec
from .tasks.acrobot import DEFAULT_SPECS, MAX_STEPS, N_FEATURES, SPECS, TORQUES, load_acrobot_drift, run_episodes

# ---- metrics -------------------------------------------------------------------------------
#: Episodes of the windows the before/after means and the recovery test use.
WINDOW = 20
#: Recovered: the mean over a window of episodes is back within this factor of the window
#: before the change.
RECOVERY_FACTOR = 1.1
#: A policy whose mean steps before a change are at least this fraction of the step cap has not
#: learned the task; its recovery is undefined (None).
UNLEARNED = 0.9


def recovery_episodes(steps, change: int, before: float, window: int = WINDOW,
                      factor: float = RECOVERY_FACTOR, cap: int | None = None) -> int | None:
    """Episodes after a change until the policy is back: the smallest k >= ``window`` such
    that the mean steps of episodes change + k - window .. change + k - 1 (all after the
    change) is <= ``factor`` * ``before``; None when no such window ends inside the run, and
    when ``before`` is at least :data:`UNLEARNED` times the step cap ``cap`` (a policy that
    hardly ever reached the goal before the change has nothing to recover). k = ``window`` means the first full window after the
    change is already back."""
    if cap is not None and before >= UNLEARNED * cap:
        return None
    steps = np.asarray(steps, np.float64)
    for k in range(window, len(steps) - change + 1):
        if steps[change + k - window:change + k].mean() <= factor * before:
            return k
    return None


def change_metrics(steps, change: int, end: int | None = None, window: int = WINDOW, cap: int = 500) -> dict:
    """Metrics around one change at episode ``change`` (the segment runs to ``end``, default the
    run's end): mean steps of the ``window`` episodes before it, of the first and the last
    ``window`` after it (in the segment), and :func:`recovery_episodes` (None when the segment
    is shorter than a window, or ``before`` >= :data:`UNLEARNED` * ``cap``; means over fewer episodes
    when a side is shorter)."""
    steps = np.asarray(steps, np.float64)
    end = len(steps) if end is None else end
    before = float(steps[max(0, change - window):change].mean())
    seg = steps[:end]
    return {
        "episode": int(change),
        "steps_before": before,
        "steps_after_first": float(seg[change:change + window].mean()),
        "steps_after": float(seg[max(change, end - window):end].mean()),
        "recovery_episodes": recovery_episodes(seg, change, before, window, cap=cap),
        # the episodes those means are over (fewer than window when a side is shorter)
        "episodes_before": int(min(window, change)),
        "episodes_after": int(min(window, end - change)),
    }


# ---- replay through a backend that is not driven sample by sample -------------------------------
def replay(backend: str, spec: LearnerSpec, stream) -> int:
    """Check a recorded closed-loop stream on another fixed-point backend: run ``backend`` over
    the same samples (x, y, kind) from the same initial parameters and compare every raw
    prediction with the recorded one.

    Equal predictions make the closed loop on ``backend`` identical: the host is a deterministic
    function of the seed and of the predictions it receives, and a learner's prediction of
    sample n depends only on samples 0..n, so by induction the host fed by ``backend`` sends
    the same samples and takes the same actions, and every episode has the same return.

    Args:
        backend: a registered fixed-point backend (``rtl``, ``hls``, ``golden``).
        spec: the learner.
        stream: (x, y, kind, predictions, theta0) as recorded by :func:`onchip.tasks.acrobot.run_episodes`.

    Returns:
        The number of samples compared.

    Raises:
        RuntimeError: a prediction differs (names the first sample, its kind and both values).
    """
    x, y, kind, preds, theta0 = stream
    got, _ = get_backend(backend).run(spec, x, y, kind=kind, theta=theta0)
    bad = np.flatnonzero((np.asarray(got) != preds).any(axis=1))
    if len(bad):
        n = int(bad[0])
        raise RuntimeError(
            f"{backend} differs from the golden model at sample {n} of {len(x)} "
            f"({SampleKind(int(kind[n])).name}): {np.asarray(got)[n].tolist()} != {preds[n].tolist()}"
        )
    return len(x)


# ---- the acrobot job -----------------------------------------------------------------------------
def _plot_steps(path, title: str, steps, frozen, changes, window: int = WINDOW) -> None:
    from .plotting import pyplot

    fig = steps_figure(title, steps, frozen, changes, window)
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


def steps_figure(title: str, steps, frozen, changes, window: int = WINDOW):
    """The acrobot run's ``steps.png``: steps per episode and their trailing mean (up to
    ``window`` episodes), the frozen policy's from the first change, and the changes.

    Args:
        title: the figure's title.
        steps: (E,) steps to swing up per episode, learning.
        frozen: (E,) steps of the policy frozen at the first change, or None.
        changes: ``[(episode, {parameter: value}), ...]`` of the changes inside the run.

    Returns:
        The matplotlib figure (the caller saves and closes it).
    """
    from matplotlib.ticker import MaxNLocator

    from .plotting import pyplot
    from .tasks.stream import trailing_sum

    fig, ax = pyplot().subplots(figsize=(9, 4.6))
    ep = np.arange(len(steps))

    def rolling(v):
        # trailing mean over up to `window` episodes, so a run shorter than a window is drawn too
        v = np.asarray(v, np.float64)
        full = trailing_sum(v, window) / window
        start = np.cumsum(v)[:window - 1] / np.arange(1, min(window, len(v) + 1))[:window - 1]
        full[:len(start)] = start
        return full

    ax.plot(ep, steps, color="C0", lw=0.6, alpha=0.35)
    ax.plot(ep, rolling(steps), color="C0", lw=1.6, label=f"learning (trailing mean of up to {window} episodes)")
    if frozen is not None and changes:
        first = changes[0][0]
        ax.plot(ep[first:], np.asarray(frozen)[first:], color="C1", lw=0.6, alpha=0.35)
        ax.plot(ep[first:], rolling(np.asarray(frozen)[first:]), color="C1", lw=1.6,
                label=f"frozen at the change (trailing mean of up to {window} episodes)")
    for n, (episode, values) in enumerate(changes, start=1):
        ax.axvline(episode, color="0.4", ls="--", lw=0.8,
                   label=f"change {n} (episode {episode}): " + ", ".join(f"{k} = {v:g}" for k, v in values.items()))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # episodes are whole
    ax.set_xlabel("episode")
    ax.set_ylabel("steps to swing up (cap 500)")
    ax.set_ylim(0, 520)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), fontsize=8, frameon=False, ncol=1)
    fig.tight_layout()
    return fig


def resolve_acrobot_spec(model: str | None, spec=None) -> LearnerSpec:
    """The Q-function spec: a name of :data:`onchip.tasks.acrobot.SPECS`, any spec file or preset
    (:func:`onchip.spec.load_spec`), or the default of ``model`` (None: ``"kan"``); it must have
    6 inputs and 3 outputs, and be of kind ``model`` where both are given.

    Raises:
        ValueError: unknown model, a spec of another kind or widths; FileNotFoundError as load_spec.
    """
    if model is not None and model not in DEFAULT_SPECS:
        raise ValueError(f"model must be one of {', '.join(DEFAULT_SPECS)}; got {model!r}")
    name = DEFAULT_SPECS[model or "kan"] if spec is None else spec
    resolved = SPECS[name] if isinstance(name, str) and name in SPECS else load_spec(name)
    if model is not None and resolved.kind != model:
        raise ValueError(f"--spec describes a {resolved.kind!r} learner but --model is {model!r}")
    if resolved.n_in != N_FEATURES or resolved.n_out != len(TORQUES):
        raise ValueError(f"spec widths {list(resolved.widths)} do not fit task 'acrobot', which has "
                         f"{N_FEATURES} inputs and {len(TORQUES)} outputs")
    return resolved


def run_acrobot_job(*, model: str | None = None, out, spec=None, backend: str = "golden", episodes: int | None = None,
                    seed: int = 0, drift=None, progress: bool = True, config: QConfig | None = None) -> dict:
    """``onchip run --task acrobot``: learn the swing-up online under a dynamics change, with the
    frozen policy as the static baseline, and write ``metrics.json``, ``episodes.csv`` (steps and
    return per episode, learning and frozen), ``steps.png``, ``spec.toml`` and ``drift.toml`` to
    ``out`` (whole or not at all).

    Backends: ``golden`` and ``float`` close the loop sample by sample; ``rtl`` and ``hls`` run
    the golden closed loop, then replay its recorded streams (learning and frozen) through the
    backend and require every prediction to be equal (:func:`replay`), so their episodes,
    actions and returns are the golden ones.

    Raises:
        ValueError: bad model, spec, backend, episodes or seed; DriftError: a bad scenario;
            RuntimeError: a replayed backend that differs from the golden model. Nothing is
            written then.
    """
    from .environment import write_metrics
    from .io import atomic_output_dir, check_output_dir

    check_output_dir(out)
    if backend not in JOB_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(JOB_BACKENDS)}; got {backend!r}")
    resolved = resolve_acrobot_spec(model, spec)
    model = resolved.kind
    cfg = config or QConfig()
    if episodes is not None:
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
        cfg = QConfig(**{**asdict(cfg), "episodes": int(episodes)})
    scenario = load_acrobot_drift(drift)
    closed = backend if backend in CLOSED_LOOP_BACKENDS else "golden"
    with atomic_output_dir(out) as stage:
        import time

        start = time.perf_counter()
        run = run_episodes(resolved, cfg, seed=seed, drift=scenario, backend=closed,
                           record=closed != backend, progress=progress)
        seconds = time.perf_counter() - start
        metrics = {
            "task": "acrobot", "model": model, "backend": backend, "spec": resolved.name or "custom",
            "seed": seed, "episodes": cfg.episodes, "max_steps": MAX_STEPS, "config": asdict(cfg),
            "steps_last_window": float(np.mean(run.steps[-WINDOW:])),
            "steps_per_episode": run.steps.tolist(),
            "goal_reached": int((run.steps < MAX_STEPS).sum()),
            "drift": scenario.describe(cfg.episodes),
            "seconds": seconds,
        }
        starts = [episode for episode, _ in run.changes if 0 < episode < cfg.episodes]
        ends = starts[1:] + [cfg.episodes]
        metrics["changes"] = [change_metrics(run.steps, c, e, cap=MAX_STEPS) for c, e in zip(starts, ends)]
        if run.frozen_steps is not None and starts:
            metrics["frozen_baseline"] = change_metrics(run.frozen_steps, starts[0], ends[0], cap=MAX_STEPS)
            metrics["frozen_steps_per_episode"] = run.frozen_steps.tolist()
        if closed != backend:
            compared = {name: replay(backend, resolved, s) for name, s in run.streams.items()}
            metrics["replay"] = {"closed_loop": closed, "backend": backend, "samples_compared": compared,
                                 "predictions_equal": True}
        write_metrics(stage, metrics)  # with what the run ran on
        frozen = run.frozen_steps if run.frozen_steps is not None else np.full(cfg.episodes, -1)
        table = np.column_stack([np.arange(cfg.episodes), run.steps, run.returns, frozen])
        np.savetxt(stage / "episodes.csv", table, delimiter=",", fmt="%d",
                   header="episode,steps,return,frozen_steps", comments="")
        (stage / "spec.toml").write_text(resolved.to_toml())
        (stage / "drift.toml").write_text(scenario.to_toml())
        _plot_steps(stage / "steps.png", f"acrobot: {resolved.name or model} on {backend}, seed {seed}",
                    run.steps, run.frozen_steps, [(e, v) for e, v in run.changes if 0 < e < cfg.episodes])
    return metrics


def summary_lines(metrics: dict) -> list[str]:
    """Console summary of an acrobot run: steps before/after each change, recovery, the frozen
    policy's, and the replay check."""
    lines = [f"acrobot / {metrics['spec']} / {metrics['backend']}, {metrics['episodes']} episodes, "
             f"seed {metrics['seed']}",
             f"  mean steps over the last {min(WINDOW, metrics['episodes'])} episodes: "
             f"{metrics['steps_last_window']:.1f}; "
             f"goal reached in {metrics['goal_reached']} episodes"]

    def fmt(m):
        rec = (f"{m['recovery_episodes']} episodes" if m["recovery_episodes"] is not None
               else "n/a (not learned before the change)" if m["steps_before"] >= UNLEARNED * metrics["max_steps"]
               else "never")
        before, after = m.get("episodes_before", WINDOW), m.get("episodes_after", WINDOW)
        return (f"steps {m['steps_before']:.1f} over {before} before, {m['steps_after_first']:.1f} first {after} "
                f"after, {m['steps_after']:.1f} last {after}; recovered: {rec}")

    for n, m in enumerate(metrics["changes"], start=1):
        lines.append(f"  change {n} at episode {m['episode']}, learning: {fmt(m)}")
    if "frozen_baseline" in metrics:
        lines.append(f"  frozen policy (learning off at change 1):      {fmt(metrics['frozen_baseline'])}")
    if "replay" in metrics:
        r = metrics["replay"]
        lines.append(f"  {r['backend']}: every prediction equal to the golden closed loop's "
                     f"({', '.join(f'{k} {v} samples' for k, v in r['samples_compared'].items())})")
    return lines
