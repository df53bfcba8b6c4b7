"""Scores several seed methods compute the same way: top-1 accuracy and the Fréchet distance."""

from __future__ import annotations

import warnings

import numpy as np


def accuracy(logits, y) -> float:
    """Fraction of rows of ``logits`` ``(n, C)`` whose argmax equals the label ``y`` ``(n,)``
    (first maximum on ties); NaN for an empty set.

    Args:
        logits: a numpy array or a torch tensor (detached here).
        y: integer labels (array or tensor).
    """
    scores = logits.detach().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits)
    labels = y.detach().cpu().numpy() if hasattr(y, "detach") else np.asarray(y)
    if len(labels) == 0:
        return float("nan")
    return float((scores.argmax(axis=-1) == labels).mean())


def frechet_distance(a: np.ndarray, b: np.ndarray, eps: float = 1e-6) -> float:
    """Fréchet distance between Gaussians fitted to the rows of ``a`` ``(n_a, d)`` and ``b`` ``(n_b, d)``.

    ``||mu_a - mu_b||^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))`` (Heusel et al. 2017, eq. 6; covariances
    with ddof=1), computed as the reference pytorch-fid does: the matrix square root by
    :func:`scipy.linalg.sqrtm`; only when it is not finite (a singular product) is ``eps * I`` added
    to both covariances inside the root; the negligible imaginary part numerical error leaves is dropped.

    Raises:
        ValueError: not two 2-D arrays of the same width with >= 2 rows each, or an imaginary
            part of the root's diagonal above 1e-3 (the covariances are not positive semi-definite).
    """
    from scipy import linalg

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"features: need two (n >= 2, d) arrays of the same d, got {a.shape} and {b.shape}")
    d = a.shape[1]
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False).reshape(d, d), np.cov(b, rowvar=False).reshape(d, d)
    with warnings.catch_warnings():
        # scipy warns on any singular product (e.g. a constant pixel); finiteness decides, as in pytorch-fid
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        root = linalg.sqrtm(s_a @ s_b)
    if not np.isfinite(root).all():
        offset = eps * np.eye(d)
        root = linalg.sqrtm((s_a + offset) @ (s_b + offset))
    if np.iscomplexobj(root):
        if not np.allclose(np.diagonal(root).imag, 0, atol=1e-3):
            raise ValueError(f"frechet_distance: imaginary component {np.abs(root.imag).max():.3g} in the "
                             "covariance product's square root")
        root = root.real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2 * np.trace(root))
