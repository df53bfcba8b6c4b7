"""Memorization measures for generated images (the sample-quality score, the Fréchet distance, is
:func:`onchip.methods._scores.frechet_distance`)."""

from __future__ import annotations

import numpy as np


def nearest_ratio(samples: np.ndarray, train: np.ndarray) -> np.ndarray:
    """``d_1 / d_2`` per sample (n,): L2 distance to the nearest over the second-nearest training image.

    Raises:
        ValueError: fewer than two training images or mismatched widths.
    """
    if train.shape[0] < 2 or samples.shape[1] != train.shape[1]:
        raise ValueError(f"train: need >= 2 rows of width {samples.shape[1]}, got {train.shape}")
    d2 = (samples**2).sum(1)[:, None] - 2 * samples @ train.T + (train**2).sum(1)[None]
    two = np.sqrt(np.maximum(np.partition(d2, 1, axis=1)[:, :2], 0))
    return two[:, 0] / np.maximum(two[:, 1], 1e-12)


def memorized_fraction(samples: np.ndarray, train: np.ndarray, threshold: float = 1 / 3) -> float:
    """Fraction of samples whose nearest/second-nearest training distance ratio is below ``threshold``.

    The criterion of Yoon et al. 2023 and Gu et al. 2023 used in arXiv 2602.17846 (Sec. 6).
    """
    return float(np.mean(nearest_ratio(samples, train) < threshold))

