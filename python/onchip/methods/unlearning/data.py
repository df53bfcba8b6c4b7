"""Data sets shipped with scikit-learn, splits and forget requests.

A forget request names the training samples to be unlearned:

- ``class:N``   every training sample of class ``N`` (class-wise forgetting);
- ``random:F``  a uniformly drawn fraction ``F`` of the training set
  (random-sample forgetting), drawn with the split's seed.

Both settings are those of the unlearning literature the OEU paper
(arXiv:2602.00567, Sec. 5 "Experiments") follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DATASETS = ("digits", "breast-cancer")


@dataclass(frozen=True)
class Split:
    """A standardised train/test split with a forget mask over the training set.

    Attributes:
        x_train: float32 ``(n_train, n_features)``, standardised with the
            training mean/std (unit: standard deviations).
        y_train: int64 ``(n_train,)`` class labels.
        x_test, y_test: the same for the held-out test set.
        forget: bool ``(n_train,)``, True for samples in the forget set.
        n_classes: number of classes of the data set.
        request: the forget request string this split was built for.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    forget: np.ndarray
    n_classes: int
    request: str

    @property
    def retain(self) -> np.ndarray:
        """bool ``(n_train,)``: the complement of :attr:`forget`."""
        return ~self.forget

    @property
    def forget_class(self) -> int | None:
        """The forgotten class for a ``class:N`` request, else None."""
        kind, _, value = self.request.partition(":")
        return int(value) if kind == "class" else None


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x, y)`` of a scikit-learn toy data set.

    ``digits``: 1797 8x8 images, 64 features (pixel intensity 0..16), 10 classes.
    ``breast-cancer``: 569 samples, 30 features, 2 classes.

    Raises:
        ValueError: ``name`` is not one of :data:`DATASETS`.
    """
    from sklearn import datasets

    from .._data import load_digits

    if name == "digits":
        return load_digits(signed=False)
    if name != "breast-cancer":
        raise ValueError(f"--dataset: unknown data set {name!r} (choose from {', '.join(DATASETS)})")
    bunch = datasets.load_breast_cancer()
    return bunch.data.astype(np.float64), bunch.target.astype(np.int64)


def parse_forget(request: str, n_classes: int) -> tuple[str, float]:
    """Validate a forget request and return ``(kind, value)``.

    ``class:N`` needs an integer ``0 <= N < n_classes``; ``random:F`` needs
    ``0 < F < 1``.

    Raises:
        ValueError: malformed request, unknown class, or fraction out of (0, 1).
    """
    kind, sep, value = request.partition(":")
    if not sep or kind not in ("class", "random"):
        raise ValueError(f"--forget: {request!r} is not 'class:N' or 'random:F'")
    if kind == "class":
        try:
            cls = int(value)
        except ValueError:
            raise ValueError(f"--forget: class {value!r} is not an integer") from None
        if not 0 <= cls < n_classes:
            raise ValueError(
                f"--forget: unknown class {cls} (this data set has classes 0..{n_classes - 1})"
            )
        return kind, float(cls)
    try:
        frac = float(value)
    except ValueError:
        raise ValueError(f"--forget: fraction {value!r} is not a number") from None
    if not 0.0 < frac < 1.0:
        raise ValueError(f"--forget: fraction {frac} must lie strictly between 0 and 1")
    return kind, frac


def make_split(name: str, request: str, seed: int, test_size: float = 0.3) -> Split:
    """Stratified train/test split of data set ``name`` plus the forget mask.

    Features are standardised with the training-set mean and standard deviation
    (constant features get std 1). ``random:F`` draws ``round(F * n_train)``
    training samples with ``numpy.random.default_rng(seed)``.

    Raises:
        ValueError: bad data set name or forget request, or an empty forget set
            or empty retain set.
    """
    from sklearn.model_selection import train_test_split

    x, y = load_dataset(name)
    n_classes = int(y.max()) + 1
    kind, value = parse_forget(request, n_classes)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_size, random_state=seed, stratify=y
    )
    mean = x_tr.mean(axis=0)
    std = x_tr.std(axis=0)
    std[std == 0] = 1.0
    x_tr = ((x_tr - mean) / std).astype(np.float32)
    x_te = ((x_te - mean) / std).astype(np.float32)
    if kind == "class":
        forget = y_tr == int(value)
    else:
        n_forget = int(round(value * len(y_tr)))
        forget = np.zeros(len(y_tr), dtype=bool)
        idx = np.random.default_rng(seed).choice(len(y_tr), size=n_forget, replace=False)
        forget[idx] = True
    if not forget.any():
        raise ValueError(f"--forget: {request!r} selects no training sample (empty forget set)")
    if forget.all():
        raise ValueError(f"--forget: {request!r} selects the whole training set (empty retain set)")
    return Split(x_tr, y_tr, x_te, y_te, forget, n_classes, request)
