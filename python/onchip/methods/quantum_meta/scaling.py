"""The adaptation-gain scaling law G_K ~ c sigma^2 (1 - exp(-beta K)).

Source: arXiv 2601.18973, Sec. "Scaling law": the adaptation gain
G_K = E_tau[L_tau(theta_0) - L_tau(theta_K)] saturates exponentially in the
number of adaptation steps K and grows linearly with the task variance
sigma^2. For a loss that is quadratic near each task optimum with a shared
curvature lambda and step size alpha, gradient descent gives exactly this
form with beta = -2 ln|1 - alpha lambda| and c sigma^2 the mean excess loss
of the meta-initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def saturating_law(k, sigma2, c: float, beta: float):
    """c * sigma2 * (1 - exp(-beta k)); broadcasts over ``k`` and ``sigma2``."""
    return c * np.asarray(sigma2) * (1.0 - np.exp(-beta * np.asarray(k, dtype=float)))


@dataclass(frozen=True)
class ScalingFit:
    """Least-squares fit of the scaling law.

    Attributes:
        c, beta: fitted constants (c in loss units per unit variance, beta per step).
        c_err, beta_err: one-standard-error estimates from the fit covariance.
        r2: coefficient of determination over all (sigma, K) points.
    """

    c: float
    beta: float
    c_err: float
    beta_err: float
    r2: float

    def predict(self, k, sigma2):
        """Fitted G_K at steps ``k`` and variances ``sigma2`` (broadcasting)."""
        return saturating_law(k, sigma2, self.c, self.beta)


def _r2(y, yhat) -> float:
    ss_res = float(np.sum((y - yhat) ** 2))
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


def fit_scaling_law(k, sigma2, gains) -> ScalingFit:
    """Fit c and beta jointly to a grid of measured gains (scipy ``curve_fit``).

    Args:
        k: (n_k,) adaptation steps.
        sigma2: (n_s,) task variances, > 0.
        gains: (n_s, n_k) mean gains G_K for each variance and step.
    Returns:
        ScalingFit.
    Raises:
        ValueError: shapes disagree, a variance is not positive, or fewer than 3 points.
    """
    from scipy.optimize import curve_fit

    k = np.asarray(k, float)
    sigma2 = np.asarray(sigma2, float)
    gains = np.asarray(gains, float)
    if k.ndim != 1 or sigma2.ndim != 1 or gains.shape != (sigma2.size, k.size):
        raise ValueError(f"gains: expected shape ({sigma2.size}, {k.size}), got {gains.shape}")
    if np.any(sigma2 <= 0) or not np.all(np.isfinite(sigma2)):
        raise ValueError(f"sigma2: expected finite values > 0, got {sigma2.tolist()}")
    if gains.size < 3 or not np.all(np.isfinite(gains)):
        raise ValueError("gains: need at least 3 finite points")
    kk, ss = np.meshgrid(k, sigma2)
    x = np.vstack([kk.ravel(), ss.ravel()])
    y = gains.ravel()
    # start: c from the largest measured gain per variance, beta = 1 / (steps to ~63% of it)
    c0 = max(float(np.max(gains[:, -1] / sigma2)), 1e-12)
    popt, pcov = curve_fit(lambda xx, c, b: saturating_law(xx[0], xx[1], c, b), x, y,
                           p0=[c0, 0.5], bounds=([0.0, 0.0], [np.inf, 50.0]), maxfev=20000)
    err = np.sqrt(np.clip(np.diag(pcov), 0, None))
    return ScalingFit(float(popt[0]), float(popt[1]), float(err[0]), float(err[1]),
                      _r2(y, saturating_law(x[0], x[1], *popt)))


def linearity_in_variance(sigma2, gain) -> dict:
    """Linear regression of a gain on the variance (is G linear in sigma^2?).

    Args:
        sigma2: (n,) variances; gain: (n,) gains at one K.
    Returns:
        dict slope, intercept, r2, and intercept_rel = intercept / max gain
        (near 0 when the line passes through the origin, as the law says).
    Raises:
        ValueError: fewer than 3 points or shapes disagree.
    """
    from scipy.stats import linregress

    sigma2 = np.asarray(sigma2, float)
    gain = np.asarray(gain, float)
    if sigma2.shape != gain.shape or sigma2.ndim != 1 or sigma2.size < 3:
        raise ValueError(f"sigma2, gain: need two 1-D arrays of equal length >= 3, got {sigma2.shape}, {gain.shape}")
    res = linregress(sigma2, gain)
    return {"slope": float(res.slope), "intercept": float(res.intercept), "r2": float(res.rvalue**2),
            "intercept_rel": float(res.intercept / np.max(np.abs(gain)))}
