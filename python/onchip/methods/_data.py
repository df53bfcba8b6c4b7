"""Data sets several seed methods share."""

from __future__ import annotations

import numpy as np

#: images in scikit-learn's 8x8 digits
N_DIGITS = 1797


def load_digits(*, signed: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 handwritten digits (shipped with the package, nothing is fetched).

    Args:
        signed: map the pixel intensities 0..16 linearly to [-1, 1] (``x / 8 - 1``, exact in
            float64); False keeps the intensities.

    Returns:
        ``(x, y)``: float64 pixels ``(1797, 64)`` (row-major 8x8) and int64 labels 0..9 ``(1797,)``.
    """
    from sklearn import datasets

    bunch = datasets.load_digits()
    x = bunch.data.astype(np.float64)
    return (x / 8.0 - 1.0 if signed else x), bunch.target.astype(np.int64)


def load_digits_split(n_train: int | None = None, seed: int = 0, *,
                      n_test: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The scikit-learn 8x8 digits, pixels 0..16 mapped linearly to [-1, 1], split by a seeded permutation.

    Give one of ``n_train`` or ``n_test`` (neither means ``n_test=200``). With ``n_train`` the
    first ``n_train`` images of the permutation train and the rest are held out (memorization);
    with ``n_test`` the first ``n_test`` are held out and the rest train (lmaps: the same
    held-out images whatever the training size).

    Args:
        n_train: training images, in [2, 1597] (at least 200 stay held out).
        seed: seed of the permutation.
        n_test: held-out images, in [1, 1796].

    Returns:
        ``(train, heldout)`` float64 arrays of shape ``(n, 64)``.

    Raises:
        ValueError: both counts given, or a count out of range (named in the message).
    """
    if n_train is not None and n_test is not None:
        raise ValueError(f"n_train, n_test: give one of them, got {n_train!r} and {n_test!r}")
    if n_train is not None and (not isinstance(n_train, (int, np.integer)) or not 2 <= n_train <= N_DIGITS - 200):
        raise ValueError(f"n_train: must be an integer in [2, {N_DIGITS - 200}], got {n_train!r}")
    if n_train is None:
        n_test = 200 if n_test is None else n_test
        if not isinstance(n_test, (int, np.integer)) or not 1 <= n_test < N_DIGITS:
            raise ValueError(f"n_test: must be an integer in [1, {N_DIGITS - 1}], got {n_test!r}")
    x, _ = load_digits()
    perm = np.random.default_rng(seed).permutation(len(x))
    if n_train is not None:
        return x[perm[:n_train]], x[perm[n_train:]]
    return x[perm[n_test:]], x[perm[:n_test]]
