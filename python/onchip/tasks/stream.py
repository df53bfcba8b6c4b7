"""The sample stream every learner consumes, and the windowed sums its metrics share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np


@dataclass(frozen=True)
class DriftEvent:
    """An abrupt change of a stream.

    Attributes:
        index: first sample index produced under the new regime (0 < index < N).
        label: short human-readable description of the change, for plots and tables.
    """

    index: int
    label: str


@dataclass(frozen=True, eq=False)
class Stream:
    """A finite, reproducible online-learning stream of ``(x_t, y_t)`` pairs.

    Samples are meant to be consumed in order, test-then-train: the learner
    predicts ``y_t`` from ``x_t`` with its current parameters, then updates.

    Attributes:
        task: task name, one of :data:`onchip.tasks.TASKS`.
        x: (N, n_in) float64 features, in the units the learner sees.
        y: (N, n_out) float64 targets; for ``qubit-readout`` with two states one
            column, -1.0 for the first and +1.0 for the second selected state; with
            S > 2 states S columns, one-hot +/-1.
        events: drift events in increasing index order.
        meta: JSON-able description (source, drift parameters, normalisation).

    Raises:
        ValueError: x or y is not a 2-D float64 array, their lengths differ,
            or an event index is outside (0, N) or out of order.
    """

    task: str
    x: np.ndarray
    y: np.ndarray
    events: tuple[DriftEvent, ...] = ()
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("x", "y"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.ndim != 2 or arr.dtype != np.float64:
                raise ValueError(
                    f"Stream.{name}: expected a 2-D float64 array, got "
                    f"{type(arr).__name__} {getattr(arr, 'shape', '')} {getattr(arr, 'dtype', '')}"
                )
        if len(self.x) != len(self.y):
            raise ValueError(f"Stream.y: {len(self.y)} rows for {len(self.x)} rows of x")
        previous = 0
        for event in self.events:
            if not previous < event.index < len(self.x):
                raise ValueError(
                    f"Stream.events: index {event.index} ({event.label!r}) is not inside "
                    f"({previous}, {len(self.x)})"
                )
            previous = event.index

    def __len__(self) -> int:
        return len(self.x)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(x_t, y_t)``: rows of shape (n_in,) and (n_out,), in stream order."""
        return zip(self.x, self.y)


def check_predictions(stream: Stream, predictions) -> np.ndarray:
    """Return ``predictions`` as a float64 (N, n_out) array.

    A 1-D array of length N is accepted when the stream has one output.

    Raises:
        ValueError: wrong shape, or a NaN/inf value (names the first bad index).
    """
    pred = np.asarray(predictions, dtype=np.float64)
    if pred.ndim == 1 and stream.y.shape[1] == 1:
        pred = pred[:, None]
    if pred.shape != stream.y.shape:
        raise ValueError(
            f"predictions: shape {np.shape(predictions)} does not match the stream's "
            f"targets {stream.y.shape}"
        )
    bad = ~np.isfinite(pred)
    if bad.any():
        first = int(np.argwhere(bad)[0][0])
        raise ValueError(f"predictions: {int(bad.sum())} NaN/inf values, first at sample {first}")
    return pred


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_window(window) -> int:
    """Validate a rolling-window length (a positive integer) and return it as int."""
    if not _is_int(window) or window < 1:
        raise ValueError(f"window: expected a positive integer, got {window!r}")
    return int(window)


def check_samples_seed(samples, seed, minimum: int = 1) -> tuple[int, int]:
    """Validate a stream length (integer >= ``minimum``) and a seed (integer >= 0).

    Raises:
        ValueError: naming ``samples`` or ``seed`` and the bad value.
    """
    if not _is_int(samples) or samples < 1:
        raise ValueError(f"samples: expected a positive integer, got {samples!r}")
    if samples < minimum:
        raise ValueError(f"samples: this task needs at least {minimum} samples, got {samples!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    return int(samples), int(seed)


def trailing_sum(values: np.ndarray, window: int) -> np.ndarray:
    """Sum of ``values`` over the trailing window ``(t - window, t]`` for each t.

    Args:
        values: (N,) or (N, k) array.
        window: window length in samples (>= 1).

    Returns:
        float64 array of ``values``' shape; NaN for t < window - 1 (window not yet full).
    """
    csum = np.cumsum(np.asarray(values, dtype=np.float64), axis=0)
    out = np.full(csum.shape, np.nan)
    if window <= len(csum):
        out[window - 1] = csum[window - 1]
        out[window:] = csum[window:] - csum[:-window]
    return out
