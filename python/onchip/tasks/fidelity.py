"""Readout metrics: assignment fidelity, confusion matrix, rolling fidelity, recovery after
drift, static baseline; for S >= 2 prepared states.

Assignment fidelity F = mean over the S states s of P(s|s) = 1 - mean_s P(not s|s), with
P(a|b) the fraction of shots prepared in |b> assigned to |a>; for two states
F = 1 - (P(1|0) + P(0|1)) / 2 (A. Walter et al., "Rapid High-Fidelity Single-Shot
Dispersive Readout of Superconducting Qubits", Phys. Rev. Applied 7, 054020 (2017)).
The assigned state is :func:`onchip.model.decision.decisions` of the learner's outputs
(sign of one output for two states, first argmax of S outputs); the prepared state is
the same rule applied to the +/-1 targets. States are indices into the stream's selection
(``stream.meta["states"]``).
"""

from __future__ import annotations

import numpy as np

from ..model.decision import decisions
from .readout import CALIBRATION_SHOTS, readout_targets
from .stream import Stream, check_predictions, check_window, trailing_sum

DEFAULT_WINDOW = 1000
LAST_SHOTS = 5000
RECOVERY_TOLERANCE = 0.01
# float slack so that a value exactly at the tolerance counts as recovered
_TIE = 1e-12


def _labels(targets, predictions) -> tuple[np.ndarray, np.ndarray, int]:
    """(prepared, assigned) state indices ((N,) int64 each) and the number of states S."""
    t = np.asarray(targets, dtype=np.float64)
    p = np.asarray(predictions)
    if t.ndim == 1:
        t = t[:, None]
    if p.ndim == 1:
        p = p[:, None]
    if len(t) != len(p):
        raise ValueError(f"predictions: {len(p)} rows for {len(t)} targets")
    return decisions(t), decisions(p), max(t.shape[1], 2)


def _fidelity_from_counts(n_prepared, n_wrong) -> np.ndarray:
    # 1 - mean_s (wrong_s / n_s), summed state by state in index order
    acc = n_wrong[..., 0] / n_prepared[..., 0]
    for s in range(1, n_prepared.shape[-1]):
        acc = acc + n_wrong[..., s] / n_prepared[..., s]
    return 1.0 - acc / n_prepared.shape[-1]


def confusion_counts(targets, predictions) -> np.ndarray:
    """Confusion matrix of counts: (S, S) int64, rows prepared, columns assigned.

    Args:
        targets: (N, 1) or (N,) +/-1 (two states) or (N, S) one-hot +/-1 targets.
        predictions: learner outputs of the same width (any real scores).
    """
    t, a, n_states = _labels(targets, predictions)
    counts = np.zeros((n_states, n_states), dtype=np.int64)
    np.add.at(counts, (t, a), 1)
    return counts


def assignment_fidelity(targets, predictions) -> float:
    """Assignment fidelity F = 1 - mean over states of P(assigned != s | prepared s).

    Args:
        targets: (N,) or (N, 1) prepared states, -1.0 for the first, +1.0 for the second
            state; or (N, S) one-hot +/-1.
        predictions: same length and width, any real scores (decided by
            :func:`onchip.model.decision.decisions`).

    Returns:
        F in [0, 1]; NaN if one of the states has no shot.
    """
    t, a, n_states = _labels(targets, predictions)
    n = np.bincount(t, minlength=n_states)
    if (n == 0).any():
        return float("nan")
    wrong = np.bincount(t[a != t], minlength=n_states)
    return float(_fidelity_from_counts(n, wrong))


def state_errors(targets, predictions) -> list[float]:
    """Per-state error P(assigned != s | prepared s) for each state s; NaN for a state
    without shots. For two states: [P(1|0), P(0|1)]."""
    t, a, n_states = _labels(targets, predictions)
    n = np.bincount(t, minlength=n_states)
    wrong = np.bincount(t[a != t], minlength=n_states)
    return [float(w / c) if c else float("nan") for w, c in zip(wrong, n)]


def rolling_fidelity(targets, predictions, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Assignment fidelity over the trailing window of shots ``(t - window, t]``.

    Args:
        targets, predictions: as for :func:`assignment_fidelity`, length N.
        window: shots per window (>= 1).

    Returns:
        (N,) float64; NaN until the window fills and where a window holds
        no shot of one of the states.
    """
    window = check_window(window)
    t, a, n_states = _labels(targets, predictions)
    prepared = t[:, None] == np.arange(n_states)[None, :]
    wrong = prepared & (a != t)[:, None]
    sums = trailing_sum(np.concatenate([prepared, wrong], axis=1), window)
    n, e = sums[:, :n_states], sums[:, n_states:]
    with np.errstate(invalid="ignore", divide="ignore"):
        f = _fidelity_from_counts(n, e)
    f[(n == 0).any(axis=1)] = np.nan
    return f


#: :func:`recovery_status` of an event: the fidelity came back (``recovery_shots`` holds the count)
RECOVERED = "recovered"
#: ... it did not come back before the next event or the end, with a full window after the event
NOT_RECOVERED = "not recovered"
#: ... there is no full window before the event to compare with, or none after it to measure
TOO_SHORT = "too short to measure"


def recovery_shots(rolling: np.ndarray, event_indices, window: int,
                   tolerance: float = RECOVERY_TOLERANCE) -> list[int | None]:
    """Shots after each drift event until the fidelity is back near its level before the drift.

    For an event at index e, the reference is the fidelity of the window of
    shots just before it, ``[e - window, e)``, unless an earlier event was not
    recovered from: then the reference stays that of the first such event (the
    level before the drift the learner never came back from), so a learner
    that stays degraded scores None for every later event instead of 0. The
    recovery is the smallest s >= 0 such that the window ``[e + s, e + s +
    window)``, lying wholly after the event and before the next event (or the
    end), has a fidelity of at least reference - ``tolerance``. A learner the
    drift does not disturb scores 0; one that needs k shots to relearn scores
    about k.

    Args:
        rolling: (N,) trailing-window fidelity from :func:`rolling_fidelity` with this ``window``.
        event_indices: increasing first-shot indices of the drift events.
        window: the window length ``rolling`` was computed with.
        tolerance: allowed shortfall (0.01 = one point of fidelity).

    Returns:
        One entry per event: the shot count, or None if there is no full window
        before the event (and no unrecovered earlier reference) or the fidelity never
        comes back in time; :func:`recovery_status` says which.
    """
    return [shots for shots, _ in _recovery(rolling, event_indices, window, tolerance)]


def recovery_status(rolling: np.ndarray, event_indices, window: int,
                    tolerance: float = RECOVERY_TOLERANCE) -> list[str]:
    """Why each entry of :func:`recovery_shots` (same arguments) is what it is: :data:`RECOVERED`
    (a count), :data:`NOT_RECOVERED` (None: full windows after the event, none back at the
    reference) or :data:`TOO_SHORT` (None: no full window before the event and no earlier
    reference, or no full window between it and the next event or the end)."""
    return [status for _, status in _recovery(rolling, event_indices, window, tolerance)]


def _recovery(rolling, event_indices, window, tolerance) -> list[tuple[int | None, str]]:
    rolling = np.asarray(rolling, dtype=np.float64)
    n = len(rolling)
    idx = [int(e) for e in event_indices]
    out: list[tuple[int | None, str]] = []
    carried = None  # reference of the first event not recovered from
    for k, e in enumerate(idx):
        stop = idx[k + 1] if k + 1 < len(idx) else n
        if carried is not None:
            reference = carried
        elif e < window or np.isnan(rolling[e - 1]):
            out.append((None, TOO_SHORT))
            continue
        else:
            reference = rolling[e - 1]
        after = rolling[e + window - 1 : stop]  # windows starting at e, e+1, ...
        hit = np.flatnonzero(after >= reference - tolerance - _TIE)
        if hit.size:
            out.append((int(hit[0]), RECOVERED))
            carried = None
        else:
            out.append((None, NOT_RECOVERED if after.size else TOO_SHORT))
            carried = reference
    return out


def static_baseline_predictions(stream: Stream, calibration_shots: int = CALIBRATION_SHOTS) -> np.ndarray:
    """Decisions of a linear discriminant calibrated at the start of the stream, then frozen.

    scikit-learn's LinearDiscriminantAnalysis (shared-covariance Gaussian
    classes, the standard static readout discriminator; multi-class for S > 2)
    is fitted on the first ``calibration_shots`` shots and applied unchanged to
    every shot, including the calibration shots themselves.

    Returns:
        Outputs in the stream's target format: (N, 1) of +1.0 / -1.0 for two states,
        (N, S) one-hot +/-1 for S > 2 (the assigned state at +1.0).

    Raises:
        ValueError: the stream is not a readout stream, or its calibration
            shots do not hold every state.
    """
    if stream.task != "qubit-readout":
        raise ValueError(f"stream: the static baseline applies to qubit-readout, not {stream.task!r}")
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    n = min(calibration_shots, len(stream))
    labels = decisions(stream.y)
    n_states = max(stream.y.shape[1], 2)
    missing = sorted(set(range(n_states)) - set(labels[:n].tolist()))
    if missing:
        raise ValueError(
            f"stream: the first {n} shots hold no shot of state index {missing}; the static baseline "
            "cannot be calibrated"
        )
    lda = LinearDiscriminantAnalysis().fit(stream.x[:n], labels[:n])
    if n_states == 2:
        # the two-class discriminant's sign: the same decisions as predict, without its tie rule
        return np.where(lda.decision_function(stream.x) >= 0, 1.0, -1.0)[:, None]
    return readout_targets(lda.predict(stream.x), n_states)


def static_in_sample_note(samples: int, calibration_shots: int = CALIBRATION_SHOTS) -> str:
    """What a summary says beside the static discriminator's fidelity when its calibration shots,
    which it also scores (:func:`static_baseline_predictions`), are a tenth of the stream or more:
    its figure is then partly in-sample, the online learner's never (test, then train)."""
    n = min(calibration_shots, samples)
    return "" if 10 * n < samples else f" [in-sample: fitted on the first {n} of the {samples} shots it scores]"


def readout_figures(stream: Stream, pred: np.ndarray, window: int) -> dict:
    """Fidelity figures of one set of (N, n_out) predictions (no static baseline).

    ``confusion_matrix``: rows prepared state, columns assigned state, fractions of each
    row (whole stream); ``confusion_counts`` the counts behind it;
    ``confusion_counts_last_5000`` the counts over the last min(5000, N) shots.
    ``error_0_as_1`` / ``error_1_as_0`` (two states only) equal ``error_per_state``.
    """
    y, p = stream.y, pred
    last = min(LAST_SHOTS, len(stream))
    errors = state_errors(y, p)
    rolling = rolling_fidelity(y, p, window)
    counts = confusion_counts(y, p)
    with np.errstate(invalid="ignore", divide="ignore"):
        fractions = counts / counts.sum(axis=1, keepdims=True)
    out = {
        "samples": len(stream),
        "assignment_fidelity": assignment_fidelity(y, p),
        "assignment_fidelity_last_5000": assignment_fidelity(y[-last:], p[-last:]),
        "error_per_state": errors,
        "confusion_matrix": [[float(v) for v in row] for row in fractions],
        "confusion_counts": counts.tolist(),
        "confusion_counts_last_5000": confusion_counts(y[-last:], p[-last:]).tolist(),
        "recovery_shots": recovery_shots(rolling, [e.index for e in stream.events], window),
        "recovery_status": recovery_status(rolling, [e.index for e in stream.events], window),
    }
    if len(errors) == 2:
        out["error_0_as_1"], out["error_1_as_0"] = errors
    return out


def recovery_text(metrics: dict) -> str:
    """``recovery_shots`` of a metrics dict as printed and tabled: ``"[7, 0]"``, with the reason in
    place of each None (:data:`NOT_RECOVERED`, :data:`TOO_SHORT`); metrics without
    ``recovery_status`` (older runs) print their list as it is."""
    shots, status = metrics.get("recovery_shots"), metrics.get("recovery_status")
    if shots is None or status is None:
        return str(shots)
    return "[" + ", ".join(str(n) if n is not None else why for n, why in zip(shots, status)) + "]"


def evaluate_readout(stream: Stream, predictions, window: int | None = None) -> dict:
    """All readout metrics of test-then-train predictions, with the static baseline's.

    Args:
        stream: a qubit-readout stream of N shots.
        predictions: (N, n_out) learner outputs (decided by
            :func:`onchip.model.decision.decisions`).
        window: rolling-fidelity window in shots (default 1000) for recovery_shots.

    Returns:
        dict with ``samples``, ``assignment_fidelity`` (whole stream),
        ``assignment_fidelity_last_5000`` (last min(5000, N) shots),
        ``error_per_state``, ``confusion_matrix``, ``confusion_counts``,
        ``confusion_counts_last_5000``, ``error_0_as_1`` and ``error_1_as_0`` (two
        states), ``states`` (the prepared state of each index), ``recovery_shots`` (one per drift
        event, see :func:`recovery_shots`), ``recovery_status`` (why each is what it is, see
        :func:`recovery_status`), ``window``, ``events`` and
        ``static_baseline`` (the same figures for
        :func:`static_baseline_predictions`; None if it cannot be calibrated).

    Raises:
        ValueError: predictions of the wrong shape or not finite; bad window.
    """
    pred = check_predictions(stream, predictions)
    window = check_window(DEFAULT_WINDOW if window is None else window)
    out = {"task": stream.task, **readout_figures(stream, pred, window)}
    out["states"] = stream.meta.get("states", list(range(max(stream.y.shape[1], 2))))
    out["window"] = window
    out["events"] = [{"index": e.index, "label": e.label} for e in stream.events]
    try:
        baseline = static_baseline_predictions(stream)
    except ValueError:
        out["static_baseline"] = None
    else:
        out["static_baseline"] = readout_figures(stream, baseline, window)
    return out
