"""Geometry of the empirical optimal denoiser along the noise level sigma.

For a training set ``y_1..y_N`` the minimiser of the denoising loss at noise ``sigma`` is the
posterior mean under the empirical distribution (arXiv 2602.17846, Sec. 2):

    D*(x; sigma) = sum_i softmax_i(-||x - y_i||^2 / (2 sigma^2)) y_i.

Two objects partition the schedule (Sec. 3-4):

* posterior concentration - the expected largest softmax weight given a noisy *held-out*
  point ``x = z + sigma n``: near 1 the posterior collapses on one training image;
* Gaussian-shell coverage - the fraction of noisy held-out points lying on the shell (the
  typical set ``||x - y_i||^2 / sigma^2 ~ chi^2_d``) of some training point: at small sigma
  the shells miss held-out data, so fitting them cannot pull samples onto training images.

Small regime: coverage low. Large regime: concentration low, where D* is close to the linear
Gaussian denoiser ``mu + C (C + sigma^2 I)^-1 (x - mu)`` (Sec. 4.3). Medium ("danger zone"):
in between, noisy held-out points lie on training shells while the posterior is still
concentrated on single training images.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax
from scipy.stats import chi2


def _sq_dist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d = (x * x).sum(1)[:, None] - 2 * x @ y.T + (y * y).sum(1)[None]
    return np.maximum(d, 0.0)


def _check_sigma(sigma) -> np.ndarray:
    s = np.atleast_1d(np.asarray(sigma, float))
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"sigma: every noise level must be positive and finite, got {sigma!r}")
    return s


def posterior_weights(x: np.ndarray, sigma: float, train: np.ndarray) -> np.ndarray:
    """Softmax weights (n, N) of the training points given noisy points ``x`` (n, d)."""
    _check_sigma(sigma)
    return softmax(-_sq_dist(x, train) / (2 * sigma**2), axis=1)


def empirical_optimal_denoiser(x: np.ndarray, sigma: float, train: np.ndarray) -> np.ndarray:
    """``D*(x; sigma)`` of the empirical distribution of ``train`` (N, d) at points ``x`` (n, d).

    Raises:
        ValueError: ``sigma`` not positive.
    """
    return posterior_weights(x, sigma, train) @ train


def linear_gaussian_denoiser(x: np.ndarray, sigma: float, mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Optimal denoiser of ``N(mean, cov)``: ``mean + cov (cov + sigma^2 I)^-1 (x - mean)``, (n, d)."""
    _check_sigma(sigma)
    gain = np.linalg.solve(cov + sigma**2 * np.eye(len(mean)), cov)  # symmetric: (C+s2 I)^-1 C
    return mean + (x - mean) @ gain


def _noisy(heldout, sigma, rng):
    return heldout + sigma * rng.standard_normal(heldout.shape)


def posterior_concentration(train, heldout, sigmas, rng: np.random.Generator) -> np.ndarray:
    """Expected largest posterior weight ``E[max_i w_i(z + sigma n)]`` per sigma, shape (S,).

    One noise draw per held-out point ``z`` (rows of ``heldout``) and per sigma.
    """
    return np.array([posterior_weights(_noisy(heldout, s, rng), s, train).max(1).mean()
                     for s in _check_sigma(sigmas)])


def shell_coverage(train, heldout, sigmas, rng: np.random.Generator, level: float = 0.99) -> np.ndarray:
    """Fraction of noisy held-out points on some training point's Gaussian shell, per sigma (S,).

    A point ``x`` is on the shell of ``y_i`` when ``||x - y_i||^2 / sigma^2`` lies in the central
    ``level`` interval of the chi-square law with ``d`` degrees of freedom (where the noisy
    copies of ``y_i`` concentrate).

    Raises:
        ValueError: ``level`` outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level!r}")
    d = train.shape[1]
    lo, hi = chi2.ppf([(1 - level) / 2, (1 + level) / 2], d)
    out = []
    for s in _check_sigma(sigmas):
        r = _sq_dist(_noisy(heldout, s, rng), train) / s**2
        out.append(np.mean(((r >= lo) & (r <= hi)).any(1)))
    return np.array(out)


def linear_gaussian_gap(train, heldout, sigmas, rng: np.random.Generator) -> np.ndarray:
    """Relative distance ``E||D* - D_lin|| / E||D_lin - mu||`` on noisy held-out points, per sigma.

    ``D_lin`` is the linear Gaussian denoiser with the training mean and covariance; the ratio
    goes to 0 in the large-noise regime.
    """
    mean, cov = train.mean(0), np.cov(train.T)
    out = []
    for s in _check_sigma(sigmas):
        x = _noisy(heldout, s, rng)
        d_emp = empirical_optimal_denoiser(x, s, train)
        d_lin = linear_gaussian_denoiser(x, s, mean, cov)
        out.append(np.linalg.norm(d_emp - d_lin, axis=1).mean() / np.linalg.norm(d_lin - mean, axis=1).mean())
    return np.array(out)


def locate_regimes(sigmas, concentration, coverage, coverage_threshold=0.5, concentration_threshold=0.5):
    """Boundaries ``(sigma_lo, sigma_hi)`` of the medium regime on an increasing sigma grid.

    ``sigma_lo`` is the first sigma with coverage >= ``coverage_threshold`` (end of the small
    regime); ``sigma_hi`` the first sigma at or above ``sigma_lo`` with concentration <
    ``concentration_threshold`` (start of the large regime). Either is ``nan`` when the grid
    never crosses the threshold.

    Raises:
        ValueError: ``sigmas`` not strictly increasing or lengths differ.
    """
    sigmas = _check_sigma(sigmas)
    if np.any(np.diff(sigmas) <= 0) or not len(sigmas) == len(concentration) == len(coverage):
        raise ValueError("sigmas: must be strictly increasing and match concentration/coverage in length")
    covered = np.flatnonzero(np.asarray(coverage) >= coverage_threshold)
    lo = sigmas[covered[0]] if len(covered) else np.nan
    start = covered[0] if len(covered) else 0
    spread = np.flatnonzero(np.asarray(concentration)[start:] < concentration_threshold)
    hi = sigmas[start + spread[0]] if len(spread) else np.nan
    return float(lo), float(hi)
