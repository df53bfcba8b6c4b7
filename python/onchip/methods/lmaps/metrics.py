"""Image-quality metrics for flattened square images in ``[-1, 1]``.

PSNR and SSIM are computed on images mapped to ``[0, 1]`` (data range 1) after
clipping, per image; :func:`rmse` is in the raw ``[-1, 1]`` units.
"""

from __future__ import annotations

import numpy as np


def _to_unit(x: np.ndarray) -> np.ndarray:
    return np.clip((np.asarray(x, dtype=np.float64) + 1.0) / 2.0, 0.0, 1.0)


def _pair(x, ref) -> tuple[np.ndarray, np.ndarray]:
    x, ref = np.atleast_2d(np.asarray(x, dtype=np.float64)), np.atleast_2d(np.asarray(ref, dtype=np.float64))
    if x.shape != ref.shape:
        raise ValueError(f"estimate shape {x.shape} differs from reference shape {ref.shape}")
    return x, ref


def psnr(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Peak signal-to-noise ratio in dB, ``10 log10(1 / MSE)`` on ``[0, 1]`` images; (B, d) -> (B,).

    Identical images give ``inf``.

    Raises:
        ValueError: shapes differ.
    """
    x, ref = _pair(x, ref)
    mse = ((_to_unit(x) - _to_unit(ref)) ** 2).mean(1)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(1.0 / mse)


def rmse(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Root-mean-square difference per image in ``[-1, 1]`` units; (B, d) -> (B,)."""
    x, ref = _pair(x, ref)
    return np.sqrt(((x - ref) ** 2).mean(1))


def gaussian_window(size: int = 7, sigma: float = 1.5) -> np.ndarray:
    """Normalised ``size x size`` Gaussian weights (Wang et al. 2004 use sigma 1.5).

    Raises:
        ValueError: ``size`` not a positive odd integer or ``sigma <= 0``.
    """
    if size < 1 or size % 2 == 0:
        raise ValueError(f"size must be a positive odd integer, got {size!r}")
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    r = np.arange(size) - size // 2
    g = np.exp(-0.5 * (r / sigma) ** 2)
    w = np.outer(g, g)
    return w / w.sum()


def ssim(x: np.ndarray, ref: np.ndarray, side: int = 8, window: int = 7, sigma: float = 1.5,
         k1: float = 0.01, k2: float = 0.03) -> np.ndarray:
    """Structural similarity (Wang, Bovik, Sheikh, Simoncelli 2004, IEEE TIP 13(4), eqs. 13-15).

    For every window position fully inside the image, with Gaussian weights
    ``w``: weighted means ``mu_x, mu_y``, variances ``s_x^2, s_y^2`` and covariance
    ``s_xy``; ``SSIM = (2 mu_x mu_y + C1)(2 s_xy + C2) / ((mu_x^2 + mu_y^2 + C1)(s_x^2 + s_y^2 + C2))``
    with ``C1 = (k1 L)^2``, ``C2 = (k2 L)^2``, ``L = 1``; the image's SSIM is the
    mean over windows. The paper's 11x11 window is larger than an 8x8 image,
    hence the 7x7 default (the size scikit-image uses).

    Args:
        x, ref: ``(B, side * side)`` images in ``[-1, 1]``.

    Returns:
        ``(B,)`` SSIM values in ``[-1, 1]``.

    Raises:
        ValueError: shapes differ, ``side**2`` is not the image size, or ``window > side``.
    """
    x, ref = _pair(x, ref)
    if x.shape[1] != side * side:
        raise ValueError(f"images have {x.shape[1]} pixels, not side**2 = {side * side}")
    if window > side:
        raise ValueError(f"window {window!r} exceeds image side {side!r}")
    w = gaussian_window(window, sigma)
    a = _to_unit(x).reshape(-1, side, side)
    b = _to_unit(ref).reshape(-1, side, side)
    view = np.lib.stride_tricks.sliding_window_view

    def wmean(img):
        return np.einsum("bijkl,kl->bij", view(img, (window, window), axis=(1, 2)), w)

    mu_a, mu_b = wmean(a), wmean(b)
    var_a = wmean(a * a) - mu_a**2
    var_b = wmean(b * b) - mu_b**2
    cov = wmean(a * b) - mu_a * mu_b
    c1, c2 = k1**2, k2**2
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return s.reshape(s.shape[0], -1).mean(1)
