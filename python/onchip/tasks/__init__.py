"""Task streams for online learners, and their metrics.

``make_stream(task, samples=..., seed=...)`` builds a :class:`Stream` of
``(x_t, y_t)`` pairs with its drift events; ``evaluate`` and
``rolling_metric`` score test-then-train predictions on it.

Tasks:
    ``drift-regression``  1 -> 1 regression whose target switches twice
                          (:mod:`onchip.tasks.regression`).
    ``qubit-readout``     2 -> S state assignment (S >= 2 prepared states, one output
                          for S = 2) of drifting readout shots, real (``data=FILE``)
                          or modelled, under a drift scenario (:mod:`onchip.tasks.drift`)
                          (:mod:`onchip.tasks.readout`, :mod:`onchip.tasks.fidelity`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .fidelity import (
    confusion_counts,
    state_errors,
    DEFAULT_WINDOW,
    assignment_fidelity,
    evaluate_readout,
    recovery_shots,
    recovery_status,
    recovery_text,
    rolling_fidelity,
    static_baseline_predictions,
)
from .drift import PRESETS as DRIFT_PRESETS, DriftChange, DriftError, DriftScenario, load_drift
from .readout import DEFAULT_DRIFT, NO_DRIFT, DriftStep, ReadoutDrift, make_qubit_readout
from .regression import evaluate_regression, make_drift_regression, rolling_mse
from .shots import ReadoutModel, load_shots
from .stream import DriftEvent, Stream, check_predictions, check_samples_seed, check_window

TASKS = ("drift-regression", "qubit-readout")

__all__ = [
    "TASKS", "DriftEvent", "Stream", "make_stream", "evaluate", "rolling_metric",
    "load_shots", "ReadoutModel", "ReadoutDrift", "DriftStep", "DEFAULT_DRIFT", "NO_DRIFT",
    "make_drift_regression", "make_qubit_readout", "static_baseline_predictions",
    "assignment_fidelity", "rolling_fidelity", "recovery_shots", "recovery_status", "recovery_text", "DEFAULT_WINDOW",
    "evaluate_readout", "evaluate_regression", "rolling_mse", "check_predictions",
    "confusion_counts", "state_errors",
    "DriftScenario", "DriftChange", "DriftError", "load_drift", "DRIFT_PRESETS",
]


def _check_task(task) -> str:
    if task not in TASKS:
        raise ValueError(f"task: unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return task


def make_stream(task: str, *, samples: int, seed: int, data: str | Path | None = None,
                states=None, drift: "str | Path | DriftScenario | None" = None) -> Stream:
    """Build the stream of a task.

    Args:
        task: one of :data:`TASKS`.
        samples: stream length N (>= 1; >= 3 for drift-regression).
        seed: non-negative integer seeding a numpy Generator; equal arguments
            give an identical stream.
        data: readout shots file (layout (states, shots, 2)); None uses the
            built-in model. Not accepted by drift-regression.
        states: readout states to use (e.g. ``"0,1,2"``); default every state of the
            file, or |0> and |1> of the built-in source. Not accepted by drift-regression.
        drift: readout drift scenario, a preset name, TOML file or
            :class:`DriftScenario` (see :mod:`onchip.tasks.drift`); default the
            ``default`` preset. Not accepted by drift-regression (its drift is its task).

    Raises:
        ValueError: unknown task, bad samples or seed, data, states or drift given to
            drift-regression, a bad data file (see :func:`load_shots`), bad states or an
            invalid drift scenario.
        FileNotFoundError: ``data`` or the drift file does not exist.
    """
    _check_task(task)
    samples, seed = check_samples_seed(samples, seed)
    if task == "drift-regression":
        for name, value in (("data", data), ("states", states), ("drift", drift)):
            if value is not None:
                raise ValueError(f"{name}: the drift-regression task takes no {name} option, got {str(value)!r}")
        return make_drift_regression(samples, seed)
    return make_qubit_readout(samples, seed, data=data, states=states,
                              drift="default" if drift is None else drift)


def evaluate(stream: Stream, predictions: np.ndarray, window: int | None = None) -> dict:
    """Task metrics of test-then-train ``predictions`` ((N, n_out) float) on ``stream``.

    drift-regression: see :func:`onchip.tasks.regression.evaluate_regression`;
    qubit-readout: see :func:`onchip.tasks.fidelity.evaluate_readout`
    (``window`` sets its rolling-fidelity window).

    Raises:
        ValueError: unknown task, predictions of the wrong shape or not finite.
    """
    if _check_task(stream.task) == "drift-regression":
        return evaluate_regression(stream, predictions)
    return evaluate_readout(stream, predictions, window)


def rolling_metric(stream: Stream, predictions: np.ndarray, window: int | None = None) -> tuple[str, np.ndarray]:
    """Per-sample trailing-window metric for plots: ``(name, values)``.

    drift-regression: ``("mse", ...)``, window default ceil(10% of N//3);
    qubit-readout: ``("assignment_fidelity", ...)``, window default 1000 shots.
    Values are (N,) float64, NaN until the window fills.

    Raises:
        ValueError: unknown task, bad predictions or window.
    """
    if _check_task(stream.task) == "drift-regression":
        return "mse", rolling_mse(stream, predictions, window)
    pred = check_predictions(stream, predictions)
    window = check_window(DEFAULT_WINDOW if window is None else window)
    return "assignment_fidelity", rolling_fidelity(stream.y, pred, window)
