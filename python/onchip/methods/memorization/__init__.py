"""Where memorization happens along the noise schedule of a diffusion model.

Source: Dodson, Gao, Wang, Wang, Wan, "Two Calm Ends and the Wild Middle: A Geometric Picture
of Memorization in Diffusion Models", ICML 2026, arXiv 2602.17846. Holds the geometry of the
empirical optimal denoiser (:mod:`.geometry`), a small EDM-preconditioned denoiser with its
sampler (:mod:`.denoiser`, with a band-by-band sigma grid) and the memorization measures (:mod:`.evaluate`). The 8x8 digits come
from :func:`onchip.methods._data.load_digits_split`, the Fréchet distance from
:func:`onchip.methods._scores.frechet_distance`.
"""

from .denoiser import EDMDenoiser, band_grid, edm_sample, heun_sample, regime_switch, train_denoiser
from .evaluate import memorized_fraction, nearest_ratio
from .geometry import (
    empirical_optimal_denoiser,
    linear_gaussian_denoiser,
    linear_gaussian_gap,
    locate_regimes,
    posterior_concentration,
    shell_coverage,
)

__all__ = [
    "EDMDenoiser",
    "band_grid",
    "edm_sample",
    "empirical_optimal_denoiser",
    "heun_sample",
    "linear_gaussian_denoiser",
    "linear_gaussian_gap",
    "locate_regimes",
    "memorized_fraction",
    "nearest_ratio",
    "posterior_concentration",
    "regime_switch",
    "shell_coverage",
    "train_denoiser",
]
