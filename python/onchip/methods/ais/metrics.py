"""Per-iteration diagnostics of an importance sample against a target with known answers.

Quantities follow the evaluation of "Entropic Mirror Monte Carlo" (arXiv 2602.03165, Sec. 5):
error of the log normalising constant, effective sample size, KL(target || proposal)
estimated with exact target draws, and mode coverage (fraction of regions whose estimated
mass lies within 20 % of the true mass).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import logsumexp, softmax


@dataclass
class IterationMetrics:
    """Diagnostics of one iteration (one row of the per-iteration table).

    Attributes:
        iteration: 1-based iteration number.
        log_z_hat: log of the importance-sampling estimate of Z.
        log_z_error: ``log_z_hat - log Z`` (nats).
        ess_fraction: Kish effective sample size divided by the number of weighted points.
        kl: KL(target || proposal) in nats, Monte Carlo estimate with exact target draws.
        mode_coverage: fraction of target regions whose weighted mass is within 20 % of the truth.
        mean_rmse: root-mean-square error of the weighted mean over coordinates.
        n_target_evals: cumulative number of target density evaluations.
    """

    iteration: int
    log_z_hat: float
    log_z_error: float
    ess_fraction: float
    kl: float
    mode_coverage: float
    mean_rmse: float
    n_target_evals: int

    def as_dict(self) -> dict:
        return asdict(self)


def log_z_estimate(log_w: np.ndarray) -> float:
    """``log(mean(exp(log_w)))`` for unnormalised log weights ``log pi - log q``, shape (n,)."""
    return float(logsumexp(log_w) - np.log(len(log_w)))


def ess_fraction(log_w: np.ndarray) -> float:
    """Kish ESS ``(sum w)^2 / sum w^2`` divided by ``n``; in (0, 1]."""
    w = softmax(log_w)
    return float(1.0 / np.sum(w**2) / len(w))


def kl_target_to_proposal(target, proposal_log_prob, target_draws: np.ndarray) -> float:
    """``KL(pi || q) = E_pi[log pi(x) - log q(x)]`` estimated with exact draws ``(M, d)`` of pi.

    ``log pi`` is the normalised log density ``target.log_prob - target.log_z``.
    """
    lp = target.log_prob(target_draws) - target.log_z
    return float(np.mean(lp - proposal_log_prob(target_draws)))


def mode_coverage(target, x: np.ndarray, log_w: np.ndarray, tolerance: float = 0.2) -> float:
    """Fraction of target regions with estimated mass within ``tolerance`` (relative) of the truth.

    The estimated mass of region k is the sum of self-normalised weights of points ``x``
    (n, d) that :meth:`target.region` assigns to k.
    """
    w = softmax(log_w)
    labels = target.region(x)
    mass = np.bincount(labels, weights=w, minlength=len(target.region_mass))
    return float(np.mean(np.abs(mass - target.region_mass) <= tolerance * target.region_mass))


def mean_rmse(target, x: np.ndarray, log_w: np.ndarray) -> float:
    """RMS over coordinates of the self-normalised estimate of the mean minus the exact mean."""
    w = softmax(log_w)
    return float(np.sqrt(np.mean((w @ x - target.mean) ** 2)))
