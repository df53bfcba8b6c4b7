"""Readout metrics: assignment fidelity, its rolling value, recovery after drift, static baseline.

Assignment fidelity F = 1 - (P(1|0) + P(0|1)) / 2, with P(a|b) the fraction of
shots prepared in |b> assigned to |a> (A. Walter et al., "Rapid High-Fidelity
Single-Shot Dispersive Readout of Superconducting Qubits", Phys. Rev. Applied
7, 054020 (2017)). A prediction >= 0 assigns |1>, < 0 assigns |0>; targets
are -1.0 (|0>) and +1.0 (|1>).
"""

from __future__ import annotations

import numpy as np

from .readout import CALIBRATION_SHOTS
from .stream import Stream, check_predictions, check_window, trailing_sum

DEFAULT_WINDOW = 1000
LAST_SHOTS = 5000
RECOVERY_TOLERANCE = 0.01
# float slack so that a value exactly at the tolerance counts as recovered
_TIE = 1e-12


def assignment_fidelity(targets, predictions) -> float:
    """Assignment fidelity of decisions ``predictions >= 0`` against ±1 ``targets``.

    Args:
        targets: (N,) or (N, 1) prepared states, -1.0 for |0>, +1.0 for |1>.
        predictions: same length, any real score.

    Returns:
        F in [0, 1]; NaN if one of the states has no shot.
    """
    t = np.asarray(targets).reshape(-1) > 0
    a = np.asarray(predictions).reshape(-1) >= 0
    n1 = t.sum()
    n0 = t.size - n1
    if n0 == 0 or n1 == 0:
        return float("nan")
    p10 = np.count_nonzero(a & ~t) / n0
    p01 = np.count_nonzero(~a & t) / n1
    return float(1.0 - (p10 + p01) / 2.0)


def state_errors(targets, predictions) -> tuple[float, float]:
    """(P(1|0), P(0|1)) of decisions ``predictions >= 0``; NaN for a state without shots."""
    t = np.asarray(targets).reshape(-1) > 0
    a = np.asarray(predictions).reshape(-1) >= 0
    n1 = t.sum()
    n0 = t.size - n1
    p10 = np.count_nonzero(a & ~t) / n0 if n0 else float("nan")
    p01 = np.count_nonzero(~a & t) / n1 if n1 else float("nan")
    return float(p10), float(p01)


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
    t = np.asarray(targets).reshape(-1) > 0
    a = np.asarray(predictions).reshape(-1) >= 0
    counts = np.stack([~t, t, a & ~t, ~a & t], axis=1)
    n0, n1, e10, e01 = trailing_sum(counts, window).T
    with np.errstate(invalid="ignore", divide="ignore"):
        f = 1.0 - (e10 / n0 + e01 / n1) / 2.0
    f[(n0 == 0) | (n1 == 0)] = np.nan
    return f


def recovery_shots(rolling: np.ndarray, event_indices, window: int,
                   tolerance: float = RECOVERY_TOLERANCE) -> list[int | None]:
    """Shots after each drift event until the fidelity is back near its pre-event value.

    For an event at index e, the reference is the fidelity of the window of
    shots just before it, ``[e - window, e)``. The recovery is the smallest
    s >= 0 such that the window ``[e + s, e + s + window)``, lying wholly after
    the event and before the next event (or the end), has a fidelity of at
    least reference - ``tolerance``. A learner the drift does not disturb
    scores 0; one that needs k shots to relearn scores about k.

    Args:
        rolling: (N,) trailing-window fidelity from :func:`rolling_fidelity` with this ``window``.
        event_indices: increasing first-shot indices of the drift events.
        window: the window length ``rolling`` was computed with.
        tolerance: allowed shortfall (0.01 = one point of fidelity).

    Returns:
        One entry per event: the shot count, or None if there is no full window
        before the event or the fidelity never comes back in time.
    """
    rolling = np.asarray(rolling, dtype=np.float64)
    n = len(rolling)
    idx = [int(e) for e in event_indices]
    out: list[int | None] = []
    for k, e in enumerate(idx):
        stop = idx[k + 1] if k + 1 < len(idx) else n
        if e < window or np.isnan(rolling[e - 1]):
            out.append(None)
            continue
        reference = rolling[e - 1]
        after = rolling[e + window - 1 : stop]  # windows starting at e, e+1, ...
        hit = np.flatnonzero(after >= reference - tolerance - _TIE)
        out.append(int(hit[0]) if hit.size else None)
    return out


def static_baseline_predictions(stream: Stream, calibration_shots: int = CALIBRATION_SHOTS) -> np.ndarray:
    """Decisions of a linear discriminant calibrated at the start of the stream, then frozen.

    scikit-learn's LinearDiscriminantAnalysis (shared-covariance Gaussian
    classes, the standard static readout discriminator) is fitted on the first
    ``calibration_shots`` shots and applied unchanged to every shot,
    including the calibration shots themselves.

    Returns:
        (N, 1) float64 of +1.0 (assigned |1>) and -1.0 (assigned |0>).

    Raises:
        ValueError: the stream is not a readout stream, or its calibration
            shots do not hold both states.
    """
    if stream.task != "qubit-readout":
        raise ValueError(f"stream: the static baseline applies to qubit-readout, not {stream.task!r}")
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    n = min(calibration_shots, len(stream))
    labels = stream.y[:n, 0] > 0
    if labels.all() or not labels.any():
        raise ValueError(
            f"stream: the first {n} shots hold only one prepared state; the static baseline cannot be calibrated"
        )
    lda = LinearDiscriminantAnalysis().fit(stream.x[:n], labels)
    return np.where(lda.decision_function(stream.x) >= 0, 1.0, -1.0)[:, None]


def readout_figures(stream: Stream, pred: np.ndarray, window: int) -> dict:
    """Fidelity figures of one set of (N, 1) predictions (no static baseline)."""
    y = stream.y[:, 0]
    p = pred[:, 0]
    last = min(LAST_SHOTS, len(stream))
    p10, p01 = state_errors(y, p)
    rolling = rolling_fidelity(y, p, window)
    return {
        "samples": len(stream),
        "assignment_fidelity": assignment_fidelity(y, p),
        "assignment_fidelity_last_5000": assignment_fidelity(y[-last:], p[-last:]),
        "error_0_as_1": p10,
        "error_1_as_0": p01,
        "recovery_shots": recovery_shots(rolling, [e.index for e in stream.events], window),
    }


def evaluate_readout(stream: Stream, predictions, window: int | None = None) -> dict:
    """All readout metrics of test-then-train predictions, with the static baseline's.

    Args:
        stream: a qubit-readout stream of N shots.
        predictions: (N, 1) or (N,) scores; >= 0 assigns |1>.
        window: rolling-fidelity window in shots (default 1000) for recovery_shots.

    Returns:
        dict with ``samples``, ``assignment_fidelity`` (whole stream),
        ``assignment_fidelity_last_5000`` (last min(5000, N) shots),
        ``error_0_as_1``, ``error_1_as_0``, ``recovery_shots`` (one per drift
        event, see :func:`recovery_shots`), ``window``, ``events`` and
        ``static_baseline`` (the same figures for
        :func:`static_baseline_predictions`; None if it cannot be calibrated).

    Raises:
        ValueError: predictions of the wrong shape or not finite; bad window.
    """
    pred = check_predictions(stream, predictions)
    window = check_window(DEFAULT_WINDOW if window is None else window)
    out = {"task": stream.task, **readout_figures(stream, pred, window)}
    out["window"] = window
    out["events"] = [{"index": e.index, "label": e.label} for e in stream.events]
    try:
        baseline = static_baseline_predictions(stream)
    except ValueError:
        out["static_baseline"] = None
    else:
        out["static_baseline"] = readout_figures(stream, baseline, window)
    return out
