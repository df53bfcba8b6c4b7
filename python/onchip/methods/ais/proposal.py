"""Proposal densities: a Gaussian mixture refitted with scikit-learn, and its defensive mixture.

The entropic mirror scheme of "Entropic Mirror Monte Carlo" (arXiv 2602.03165, Sec. 3-4) draws
from a *defensive* proposal: the current mixture fit blended with a heavy-tailed Student-t
component, so importance weights ``pi / q`` stay bounded wherever the target has Gaussian
tails (Hesterberg 1995, "Weighted average importance sampling and defensive mixture
distributions").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import logsumexp
from scipy.stats import multivariate_t

COVARIANCE_TYPES = ("full", "diag", "spherical")


@dataclass
class GaussianMixtureDensity:
    """Gaussian mixture ``sum_k w_k N(m_k, C_k)`` with full covariance matrices.

    Attributes:
        weights: (K,) mixture weights summing to one.
        means: (K, d) component means.
        covariances: (K, d, d) symmetric positive-definite covariances.
    """

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, float) / np.sum(self.weights)
        self.means = np.atleast_2d(np.asarray(self.means, float))
        self.covariances = np.asarray(self.covariances, float)
        self._chol = np.linalg.cholesky(self.covariances)
        eye = np.eye(self.means.shape[1])
        self._inv_chol = np.stack([solve_triangular(c, eye, lower=True) for c in self._chol])
        self._log_det = 2 * np.log(np.diagonal(self._chol, axis1=1, axis2=2)).sum(1)

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """Log density of points ``x`` (n, d); returns (n,)."""
        x = np.asarray(x, float)
        out = np.empty((x.shape[0], len(self.weights)))
        for k in range(len(self.weights)):
            z = (x - self.means[k]) @ self._inv_chol[k].T
            out[:, k] = -0.5 * (z**2).sum(1) - 0.5 * (self.dim * np.log(2 * np.pi) + self._log_det[k])
        return logsumexp(out + np.log(self.weights), axis=1)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` points, shape (n, d)."""
        k = rng.choice(len(self.weights), size=n, p=self.weights)
        z = rng.standard_normal((n, self.dim))
        return self.means[k] + np.einsum("nij,nj->ni", self._chol[k], z)

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Overall mean (d,) and covariance (d, d) of the mixture."""
        m = self.weights @ self.means
        diff = self.means - m
        cov = np.einsum("k,kij->ij", self.weights, self.covariances) + (self.weights[:, None] * diff).T @ diff
        return m, cov

    @classmethod
    def isotropic(cls, means: np.ndarray, scale: float) -> "GaussianMixtureDensity":
        """Equal-weight mixture with covariance ``scale^2 I`` for every component."""
        means = np.atleast_2d(means)
        k, d = means.shape
        return cls(np.full(k, 1.0 / k), means, np.repeat(np.eye(d)[None] * scale**2, k, axis=0))

    @classmethod
    def fit(
        cls,
        points: np.ndarray,
        n_components: int,
        covariance_type: str,
        reg_covar: float,
        seed: int,
    ) -> "GaussianMixtureDensity":
        """Fit by EM with :class:`sklearn.mixture.GaussianMixture` (k-means++ init, 100 EM steps).

        Resampled points carry the importance weights as multiplicities, so an unweighted fit
        of them is a weighted fit of the importance sample. ``n_components`` is lowered to the
        number of distinct points when there are fewer.

        Raises:
            ValueError: unknown ``covariance_type``.
        """
        from sklearn.mixture import GaussianMixture

        if covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type: must be one of {COVARIANCE_TYPES}, got {covariance_type!r}")
        n_distinct = len(np.unique(points, axis=0))
        k = max(1, min(n_components, n_distinct))
        gm = GaussianMixture(
            n_components=k,
            covariance_type=covariance_type,
            reg_covar=reg_covar,
            max_iter=100,
            init_params="k-means++",
            random_state=seed,
        ).fit(points)
        d = points.shape[1]
        if covariance_type == "full":
            covs = gm.covariances_
        elif covariance_type == "diag":
            covs = np.stack([np.diag(c) for c in gm.covariances_])
        else:
            covs = gm.covariances_[:, None, None] * np.eye(d)[None]
        return cls(gm.weights_, gm.means_, covs)


class DefensiveMixture:
    """``(1 - alpha) * mixture + alpha * t_df(m, scale^2 C)``, the sampling proposal.

    The Student-t component is centred on the mixture's overall mean ``m`` with shape matrix
    ``scale^2`` times its overall covariance ``C``, so it spans every region the mixture
    spans and its polynomial tails dominate Gaussian tails of the target.

    Args:
        mixture: the current Gaussian-mixture fit.
        alpha: weight of the heavy-tailed component, in [0, 1).
        df: degrees of freedom of the Student-t (> 0).
        scale: inflation of the t shape matrix (> 0).

    Raises:
        ValueError: ``alpha``, ``df`` or ``scale`` out of range.
    """

    def __init__(self, mixture: GaussianMixtureDensity, alpha: float, df: float, scale: float):
        if not 0 <= alpha < 1:
            raise ValueError(f"defensive_weight: must be in [0, 1), got {alpha!r}")
        if not df > 0 or not scale > 0:
            raise ValueError(f"defensive_df/defensive_scale: must be positive, got {df!r}, {scale!r}")
        self.mixture = mixture
        self.alpha = float(alpha)
        mean, cov = mixture.moments()
        cov = 0.5 * (cov + cov.T) + 1e-9 * np.eye(mixture.dim)
        self.heavy = multivariate_t(loc=mean, shape=scale**2 * cov, df=df)

    @property
    def dim(self) -> int:
        return self.mixture.dim

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """Log density of points ``x`` (n, d); returns (n,)."""
        lm = self.mixture.log_prob(x)
        if self.alpha == 0:
            return lm
        lt = np.atleast_1d(self.heavy.logpdf(x))
        return np.logaddexp(np.log1p(-self.alpha) + lm, np.log(self.alpha) + lt)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` points, shape (n, d); the heavy component is chosen with probability alpha."""
        heavy = rng.random(n) < self.alpha
        out = self.mixture.sample(n, rng)
        m = int(heavy.sum())
        if m:
            out[heavy] = np.atleast_2d(self.heavy.rvs(size=m, random_state=rng)).reshape(m, -1)
        return out
