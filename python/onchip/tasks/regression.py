"""Drifting regression: a 1-D target that switches between three smooth functions.

The setting follows the drifting-regression experiment of D. Hoang, A. Gupta,
P. Harris, "Ultrafast On-Chip Online Learning via Spline Locality in
Kolmogorov-Arnold Networks", arXiv:2602.02056 (2026): an online learner sees
x uniform on [-2, 2] and must track a target function that changes abruptly
twice. The three functions below are this package's choice; they are smooth,
differ in symmetry and curvature, and stay within |y| <= 1.13, so 16-bit
formats with 4 integer bits (range [-8, 8)) hold targets and errors alike.

    segment 0, t in [0, N//3):       f0(x) = sin(pi x / 2)
    segment 1, t in [N//3, 2N//3):   f1(x) = x^2 / 2 - 1
    segment 2, t in [2N//3, N):      f2(x) = 0.75 sin(pi x) - 0.25 x
"""

from __future__ import annotations

import math

import numpy as np

from .stream import DriftEvent, Stream, check_predictions, check_samples_seed, check_window, trailing_sum

X_RANGE = (-2.0, 2.0)
LAST_WINDOW_FRACTION = 0.1


def _f0(x):
    return np.sin(np.pi * x / 2.0)


def _f1(x):
    return 0.5 * x * x - 1.0


def _f2(x):
    return 0.75 * np.sin(np.pi * x) - 0.25 * x


TARGETS = (
    ("sin(pi x / 2)", _f0),
    ("x^2 / 2 - 1", _f1),
    ("0.75 sin(pi x) - 0.25 x", _f2),
)


def segment_bounds(n: int) -> list[tuple[int, int]]:
    """Sample ranges ``[start, stop)`` of the three target segments of an n-sample stream."""
    cuts = [0, n // 3, (2 * n) // 3, n]
    return [(cuts[i], cuts[i + 1]) for i in range(3)]


def last_window_length(segment_length: int) -> int:
    """Samples in the "last window" of a segment: ceil(10% of its length), at least 1."""
    return max(1, math.ceil(LAST_WINDOW_FRACTION * segment_length - 1e-9))


def make_drift_regression(samples: int, seed: int, *, noise_std: float = 0.0) -> Stream:
    """Build the drifting-regression stream.

    Args:
        samples: stream length N (>= 3, so that each of the three segments is non-empty).
        seed: seed of the numpy Generator that draws x (and the noise).
        noise_std: standard deviation of Gaussian noise added to the target (0: none).

    Returns:
        Stream with x (N, 1) uniform on [-2, 2], y (N, 1) = f_k(x) (+ noise) and
        events at N//3 and 2N//3.

    Raises:
        ValueError: samples not an integer >= 3, seed not an integer >= 0, or
            noise_std negative or not finite.
    """
    samples, seed = check_samples_seed(samples, seed, minimum=3)
    if not (np.isfinite(noise_std) and noise_std >= 0):
        raise ValueError(f"noise_std: expected a finite value >= 0, got {noise_std!r}")
    rng = np.random.default_rng(seed)
    x = rng.uniform(X_RANGE[0], X_RANGE[1], size=(samples, 1))
    y = np.empty_like(x)
    for (start, stop), (_, f) in zip(segment_bounds(samples), TARGETS):
        y[start:stop] = f(x[start:stop])
    if noise_std > 0:
        y += rng.normal(0.0, noise_std, size=y.shape)
    bounds = segment_bounds(samples)
    events = tuple(
        DriftEvent(bounds[k][0], f"target {TARGETS[k - 1][0]} -> {TARGETS[k][0]}") for k in (1, 2)
    )
    meta = {
        "task": "drift-regression",
        "samples": samples,
        "seed": seed,
        "x_range": list(X_RANGE),
        "targets": [name for name, _ in TARGETS],
        "segments": [list(b) for b in bounds],
        "noise_std": float(noise_std),
        "last_window_fraction": LAST_WINDOW_FRACTION,
    }
    return Stream("drift-regression", x, y, events, meta)


def evaluate_regression(stream: Stream, predictions) -> dict:
    """Mean squared error overall, per target segment and over each segment's last window.

    The last window of a segment is its final ceil(10%) samples: how well the
    learner has converged on that target just before the next switch.

    Args:
        stream: a drift-regression stream of N samples.
        predictions: (N, 1) or (N,) test-then-train predictions, in target units.

    Returns:
        dict with ``samples``, ``mse``, ``mse_per_segment`` (3 floats),
        ``mse_last_window`` (3 floats) and ``segments`` (start, stop, window, target per segment).

    Raises:
        ValueError: predictions of the wrong shape or not finite.
    """
    pred = check_predictions(stream, predictions)
    sq = np.mean((pred - stream.y) ** 2, axis=1)
    segments, per_seg, last = [], [], []
    for (start, stop), (name, _) in zip(segment_bounds(len(stream)), TARGETS):
        window = last_window_length(stop - start)
        per_seg.append(float(sq[start:stop].mean()))
        last.append(float(sq[stop - window : stop].mean()))
        segments.append({"target": name, "start": start, "stop": stop, "window": window})
    return {
        "task": stream.task,
        "samples": len(stream),
        "mse": float(sq.mean()),
        "mse_per_segment": per_seg,
        "mse_last_window": last,
        "segments": segments,
    }


def rolling_mse(stream: Stream, predictions, window: int | None = None) -> np.ndarray:
    """Trailing-window mean squared error per sample (NaN until the window fills).

    Args:
        window: samples per window; default the segment's last-window length
            (ceil of 10% of N//3).
    """
    pred = check_predictions(stream, predictions)
    if window is None:
        window = last_window_length(len(stream) // 3)
    window = check_window(window)
    sq = np.mean((pred - stream.y) ** 2, axis=1)
    return trailing_sum(sq, window) / window
