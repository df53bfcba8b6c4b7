"""The 8x8 handwritten digits shipped with scikit-learn, scaled to [-1, 1] and split."""

from __future__ import annotations

import numpy as np


def load_digits_split(n_train: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(train, heldout)`` images as float64 arrays of shape (n, 64) in [-1, 1].

    Pixels 0..16 map linearly to [-1, 1]. ``n_train`` images are drawn at random (seeded);
    the remaining ones of the 1797 are held out.

    Raises:
        ValueError: ``n_train`` outside [2, 1597] (at least 200 images stay held out).
    """
    from sklearn.datasets import load_digits

    if not isinstance(n_train, (int, np.integer)) or not 2 <= n_train <= 1597:
        raise ValueError(f"n_train: must be an integer in [2, 1597], got {n_train!r}")
    x = load_digits().data / 8.0 - 1.0
    perm = np.random.default_rng(seed).permutation(len(x))
    return x[perm[:n_train]], x[perm[n_train:]]
