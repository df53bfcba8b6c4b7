"""Target densities with known normalising constants, moments and modes.

Every target exposes an *unnormalised* log density ``log_prob(x) = log Z + log p(x)`` with a
known ``log_z``, exact sampling (used to estimate KL(target || proposal) and in tests), the
exact mean and diagonal second moment, and a partition of space into regions of known mass
(the modes of a mixture, the neck-to-mouth bands of the funnel) for the mode-coverage metric.

Targets follow the experiments of "Entropic Mirror Monte Carlo" (arXiv 2602.03165, Sec. 5):
well-separated Gaussian mixtures (2 and 4 modes, a 25-mode grid) and Neal's funnel
(Neal 2003, "Slice sampling", Sec. 8).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm

from . import TARGETS  # noqa: E402  (defined once, in the package)
DEFAULT_LOG_Z = 3.0


def _check_dim(dim: int, minimum: int) -> None:
    if not isinstance(dim, (int, np.integer)) or dim < minimum or dim > 1000:
        raise ValueError(f"dim: must be an integer in [{minimum}, 1000], got {dim!r}")


def _as_points(x: np.ndarray, dim: int) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"x: expected shape (n, {dim}), got {x.shape}")
    return x


class GaussianMixtureTarget:
    """Unnormalised mixture of isotropic Gaussians ``Z * sum_k w_k N(x; m_k, s_k^2 I)``.

    Args:
        means: (K, d) component means.
        stds: (K,) component standard deviations (> 0).
        weights: (K,) mixture weights (> 0, normalised here).
        log_z: log of the normalising constant Z that the unnormalised density carries.

    Regions are the components (a point belongs to the component of largest
    responsibility); with well-separated modes their masses equal the weights up to a
    negligible overlap, which :func:`make_target` keeps below 1e-6 per mode.

    Raises:
        ValueError: shapes disagree or a std/weight is not positive.
    """

    def __init__(self, means, stds, weights, log_z: float = DEFAULT_LOG_Z, name: str = "gmm"):
        self.means = np.atleast_2d(np.asarray(means, dtype=float))
        self.stds = np.asarray(stds, dtype=float).reshape(-1)
        w = np.asarray(weights, dtype=float).reshape(-1)
        k, d = self.means.shape
        if self.stds.shape != (k,) or w.shape != (k,):
            raise ValueError(f"stds/weights: expected {k} entries, got {self.stds.shape}, {w.shape}")
        if np.any(self.stds <= 0) or np.any(w <= 0):
            raise ValueError("stds/weights: every entry must be positive")
        self.weights = w / w.sum()
        self.dim = d
        self.log_z = float(log_z)
        self.name = name
        self.region_mass = self.weights.copy()

    def _component_log_pdf(self, x: np.ndarray) -> np.ndarray:
        sq = ((x[:, None, :] - self.means[None]) ** 2).sum(-1)
        s2 = self.stds**2
        return -0.5 * sq / s2 - 0.5 * self.dim * np.log(2 * np.pi * s2)

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """Unnormalised log density, shape (n,), for points ``x`` of shape (n, d)."""
        x = _as_points(x, self.dim)
        return self.log_z + logsumexp(self._component_log_pdf(x) + np.log(self.weights), axis=1)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Exact draws, shape (n, d)."""
        k = rng.choice(len(self.weights), size=n, p=self.weights)
        return self.means[k] + self.stds[k, None] * rng.standard_normal((n, self.dim))

    def region(self, x: np.ndarray) -> np.ndarray:
        """Mode label in ``0..K-1`` of each point, shape (n,)."""
        x = _as_points(x, self.dim)
        return np.argmax(self._component_log_pdf(x) + np.log(self.weights), axis=1)

    @property
    def mean(self) -> np.ndarray:
        """Exact mean, shape (d,)."""
        return self.weights @ self.means

    @property
    def second_moment(self) -> np.ndarray:
        """Exact E[x_j^2] per coordinate, shape (d,)."""
        return self.weights @ (self.means**2 + (self.stds**2)[:, None])


class NealFunnel:
    """Neal's funnel: ``v ~ N(0, scale^2)``, ``x_i | v ~ N(0, exp(v))`` for i = 1..d-1.

    Coordinates are ``(v, x_1, ..., x_{d-1})``; the unnormalised density is ``Z`` times the
    normalised one. Regions are the bands of ``v`` cut at ``-scale, 0, scale`` (neck to mouth)
    with exact masses from the normal CDF. Exact moments: mean 0, ``E[v^2] = scale^2``,
    ``E[x_i^2] = exp(scale^2 / 2)``.

    Raises:
        ValueError: ``dim < 2`` or ``scale <= 0``.
    """

    def __init__(self, dim: int, scale: float = 3.0, log_z: float = DEFAULT_LOG_Z):
        _check_dim(dim, 2)
        if not scale > 0:
            raise ValueError(f"scale: must be positive, got {scale!r}")
        self.dim = int(dim)
        self.scale = float(scale)
        self.log_z = float(log_z)
        self.name = "funnel"
        self.edges = np.array([-self.scale, 0.0, self.scale])
        cdf = norm.cdf(self.edges / self.scale)
        self.region_mass = np.diff(np.concatenate([[0.0], cdf, [1.0]]))

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """Unnormalised log density, shape (n,), for points ``x`` of shape (n, d)."""
        x = _as_points(x, self.dim)
        v, rest = x[:, 0], x[:, 1:]
        lp_v = norm.logpdf(v, scale=self.scale)
        lp_x = -0.5 * (rest**2).sum(1) * np.exp(-v) - 0.5 * (self.dim - 1) * (np.log(2 * np.pi) + v)
        return self.log_z + lp_v + lp_x

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Exact draws, shape (n, d)."""
        v = self.scale * rng.standard_normal(n)
        rest = np.exp(v / 2)[:, None] * rng.standard_normal((n, self.dim - 1))
        return np.column_stack([v, rest])

    def region(self, x: np.ndarray) -> np.ndarray:
        """Band label in ``0..3`` of ``v`` for each point, shape (n,)."""
        x = _as_points(x, self.dim)
        return np.searchsorted(self.edges, x[:, 0])

    @property
    def mean(self) -> np.ndarray:
        """Exact mean, shape (d,)."""
        return np.zeros(self.dim)

    @property
    def second_moment(self) -> np.ndarray:
        """Exact E[x_j^2] per coordinate, shape (d,)."""
        out = np.full(self.dim, np.exp(self.scale**2 / 2))
        out[0] = self.scale**2
        return out


def make_target(name: str, dim: int, log_z: float = DEFAULT_LOG_Z):
    """Build a named target in ``dim`` dimensions.

    * ``gmm2``: two unit-variance modes at ``+-5 e_1`` with weights 0.3 / 0.7.
    * ``gmm4``: four unit-variance modes at ``(+-5, +-5, 0, ...)`` with weights 0.1..0.4.
    * ``grid25``: 25 equal-weight modes of std 0.5 on the grid ``{-8,-4,0,4,8}^2`` of the
      first two coordinates (other coordinates centred, same std).
    * ``funnel``: Neal's funnel with ``v`` scale 3.

    Args:
        name: one of :data:`TARGETS`.
        dim: dimension, 2..1000 (1..1000 for gmm2).
        log_z: log normalising constant carried by the unnormalised density.

    Raises:
        ValueError: unknown ``name`` or bad ``dim``.
    """
    if name not in TARGETS:
        raise ValueError(f"target: must be one of {', '.join(TARGETS)}, got {name!r}")
    if name == "funnel":
        return NealFunnel(dim, log_z=log_z)
    _check_dim(dim, 1 if name == "gmm2" else 2)
    if name == "gmm2":
        means = np.zeros((2, dim))
        means[:, 0] = [-5.0, 5.0]
        return GaussianMixtureTarget(means, [1.0, 1.0], [0.3, 0.7], log_z, name)
    if name == "gmm4":
        means = np.zeros((4, dim))
        means[:, :2] = [[-5, -5], [-5, 5], [5, -5], [5, 5]]
        return GaussianMixtureTarget(means, np.ones(4), [0.1, 0.2, 0.3, 0.4], log_z, name)
    grid = np.array([(a, b) for a in (-8, -4, 0, 4, 8) for b in (-8, -4, 0, 4, 8)], float)
    means = np.zeros((25, dim))
    means[:, :2] = grid
    return GaussianMixtureTarget(means, np.full(25, 0.5), np.ones(25), log_z, name)
