"""Entropic mirror adaptive importance sampling and its baselines in one harness.

Methods (all refit a Gaussian mixture with scikit-learn and draw from a defensive mixture):

* ``em2c`` - Entropic Mirror Monte Carlo ("Entropic Mirror Monte Carlo", arXiv 2602.03165,
  Sec. 4). One iteration with proposal ``q_n``:

  1. draw ``x_1..x_N ~ q_n`` (defensive mixture, :class:`DefensiveMixture`);
  2. weight them by ``(pi / q_n)^eps`` - a weighted sample of the entropic mirror step
     ``mu_{n+1} ∝ q_n^(1-eps) pi^eps``;
  3. resample N points by these weights and move each with ``mcmc_steps`` steps of a global
     MCMC kernel invariant for pi (independence Metropolis-Hastings proposing from ``q_n``,
     whose heavy-tailed component reaches modes the mixture misses);
  4. weight the moved points *after* the move by ``(pi / q_n)^eps`` (delayed weighting):
     points that jumped to where ``q_n`` under-covers pi get large weights;
  5. resample N points from the union of both weighted sets (weights pooled) and refit the
     mixture to them (EM, :meth:`GaussianMixtureDensity.fit`).

* ``em2c-nomove`` - the same scheme without steps 3-4 (ablation of the global move).
* ``pmc`` - population Monte Carlo (Cappé et al. 2004, "Population Monte Carlo"; mixture
  refit as in Cappé et al. 2008): weights ``pi / q_n``, resample, refit (``eps = 1``).
* ``amis`` - adaptive multiple importance sampling (Cornuet et al. 2012, "Adaptive multiple
  importance sampling", Sec. 2): all past draws are re-weighted by the deterministic mixture
  ``pi / ((1/n) sum_k q_k)``; the refit and the Z estimate use the whole pool.

The per-iteration Z estimate of em2c, em2c-nomove and pmc is ``mean(pi(x_i)/q_n(x_i))`` over the
fresh draws of step 1; it is unbiased for Z because ``q_n`` depends only on earlier draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import logsumexp
from onchip.progress import progress_bar

from .metrics import IterationMetrics, ess_fraction, kl_target_to_proposal, log_z_estimate, mean_rmse, mode_coverage
from .proposal import COVARIANCE_TYPES, DefensiveMixture, GaussianMixtureDensity

from . import METHODS  # noqa: E402  (defined once, in the package)


@dataclass
class SamplerConfig:
    """Parameters of every method, with the defaults used by ``onchip ais``.

    Attributes:
        n_samples: draws per iteration N (>= 10).
        iterations: number of iterations (>= 1).
        eps: mirror step size in (0, 1]; the weights are ``(pi/q)^eps`` (em2c only).
        n_components: mixture components; ``None`` means the number of target regions
            (the number of modes for mixtures, 4 for the funnel), the same for all methods.
        covariance_type: ``full``, ``diag`` or ``spherical`` (scikit-learn's names).
        reg_covar: ridge added to covariance diagonals by the EM fit.
        defensive_weight: weight alpha of the heavy-tailed component, in [0, 1).
        defensive_df: Student-t degrees of freedom of that component.
        defensive_scale: inflation of its shape matrix relative to the mixture's covariance.
        mcmc_steps: independence-MH steps per moved point (em2c only, >= 1).
        init_scale: the initial mixture has means drawn from ``N(0, init_scale^2 I)`` and
            covariances ``init_scale^2 I``.
        n_target_draws: exact target draws for the KL estimate.
    """

    n_samples: int = 1000
    iterations: int = 20
    eps: float = 0.5
    n_components: int | None = None
    covariance_type: str = "full"
    reg_covar: float = 1e-3
    defensive_weight: float = 0.2
    defensive_df: float = 3.0
    defensive_scale: float = 2.0
    mcmc_steps: int = 10
    init_scale: float = 3.0
    n_target_draws: int = 2000

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first out-of-range field."""
        checks = [
            ("n_samples", self.n_samples, isinstance(self.n_samples, int) and self.n_samples >= 10),
            ("iterations", self.iterations, isinstance(self.iterations, int) and 1 <= self.iterations <= 10000),
            ("eps", self.eps, 0 < self.eps <= 1),
            ("n_components", self.n_components,
             self.n_components is None or (isinstance(self.n_components, int) and self.n_components >= 1)),
            ("covariance_type", self.covariance_type, self.covariance_type in COVARIANCE_TYPES),
            ("reg_covar", self.reg_covar, self.reg_covar > 0),
            ("defensive_weight", self.defensive_weight, 0 <= self.defensive_weight < 1),
            ("defensive_df", self.defensive_df, self.defensive_df > 0),
            ("defensive_scale", self.defensive_scale, self.defensive_scale > 0),
            ("mcmc_steps", self.mcmc_steps, isinstance(self.mcmc_steps, int) and self.mcmc_steps >= 1),
            ("init_scale", self.init_scale, self.init_scale > 0),
            ("n_target_draws", self.n_target_draws, isinstance(self.n_target_draws, int) and self.n_target_draws >= 10),
        ]
        for name, value, ok in checks:
            if not ok:
                raise ValueError(f"{name}: out of range, got {value!r}")

    def target_evals(self, method: str) -> int:
        """Target evaluations ``method`` spends in a run: N per iteration, plus, for em2c,
        N mcmc_steps per adaptation (every MH proposal; the start points' log pi are the
        iteration's own, already evaluated)."""
        evals = self.iterations * self.n_samples
        if method == "em2c":
            evals += (self.iterations - 1) * self.n_samples * self.mcmc_steps
        return evals

    def as_dict(self) -> dict:
        return asdict(self)


def systematic_resample(log_w: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices (n,) drawn by systematic resampling with probabilities ``softmax(log_w)``."""
    w = np.exp(log_w - logsumexp(log_w))
    cdf = np.cumsum(w)
    cdf[-1] = 1.0
    return np.searchsorted(cdf, (rng.random() + np.arange(n)) / n)


def independence_mh(x, log_pi_x, proposal, target, steps, rng):
    """``steps`` independence Metropolis-Hastings moves of every row of ``x`` (n, d).

    Proposals come from ``proposal`` (the defensive mixture, so moves can jump between
    modes); the kernel leaves the target pi invariant. Returns the moved points, their
    ``log pi`` and the acceptance rate.
    """
    log_q_x = proposal.log_prob(x)
    accepted = 0
    for _ in range(steps):
        y = proposal.sample(len(x), rng)
        log_pi_y, log_q_y = target.log_prob(y), proposal.log_prob(y)
        accept = np.log(rng.random(len(x))) < (log_pi_y - log_q_y) - (log_pi_x - log_q_x)
        x, log_pi_x, log_q_x = (np.where(accept[:, None], y, x), np.where(accept, log_pi_y, log_pi_x),
                                np.where(accept, log_q_y, log_q_x))
        accepted += int(accept.sum())
    return x, log_pi_x, accepted / (steps * len(x))


def _initial_mixture(dim, k, scale, rng):
    return GaussianMixtureDensity.isotropic(scale * rng.standard_normal((k, dim)), scale)


def run_sampler(target, method: str, config: SamplerConfig, seed: int, progress: bool = False):
    """Run one adaptive importance sampler and record diagnostics after every iteration.

    Args:
        target: a target from :mod:`.targets` (``log_prob``, ``sample``, ``region``, ``log_z``...).
        method: one of :data:`METHODS`.
        config: sampler parameters (validated here).
        seed: seed of every random choice; equal seeds give identical runs.
        progress: show a tqdm bar.

    Returns:
        ``(history, final)``: a list of :class:`IterationMetrics` (one per iteration) and a
        dict with the last proposal, the last weighted sample and acceptance rates.

    Raises:
        ValueError: unknown ``method`` or a config field out of range.
    """
    if method not in METHODS:
        raise ValueError(f"method: must be one of {', '.join(METHODS)}, got {method!r}")
    config.validate()
    from threadpoolctl import threadpool_limits

    # Many tiny LAPACK calls: multi-threaded BLAS only adds spin-wait overhead here.
    with threadpool_limits(limits=1):
        return _run(target, method, config, seed, progress)


def _run(target, method, config, seed, progress):
    from .._report import rng as named

    # named streams (every method of a seed draws the same initial mixture, the same reference
    # draws of the KL and, with one stream for the run, common random numbers as far as they go)
    rng = named(seed, "ais", "sampler")
    draws = target.sample(config.n_target_draws, named(seed, "ais", "kl-reference"))
    k = config.n_components or max(1, len(target.region_mass))
    mixture = _initial_mixture(target.dim, k, config.init_scale, named(seed, "ais", "initial-mixture"))
    n = config.n_samples
    eps = {"pmc": 1.0, "amis": 1.0}.get(method, config.eps)
    history, acceptance = [], []
    evals = 0
    pool_x, pool_lp, pool_lq, proposals = [], [], [], []  # AMIS: every draw and proposal so far
    for it in progress_bar(range(1, config.iterations + 1), desc=f"ais {method}", disable=not progress):
        q = DefensiveMixture(mixture, config.defensive_weight, config.defensive_df, config.defensive_scale)
        x = q.sample(n, rng)
        log_pi = target.log_prob(x)
        evals += n
        log_w = log_pi - q.log_prob(x)
        if method == "amis":
            # Deterministic-mixture weights over the whole pool (Cornuet et al. 2012, eq. 3):
            # log q_k of every pooled draw under every proposal so far, one column per k.
            pool_lq = [np.column_stack([lq, q.log_prob(px)]) for lq, px in zip(pool_lq, pool_x)]
            proposals.append(q)
            pool_lq.append(np.column_stack([p.log_prob(x) for p in proposals]))
            pool_x.append(x)
            pool_lp.append(log_pi)
            x_est = np.concatenate(pool_x)
            log_w_est = np.concatenate(pool_lp) - (logsumexp(np.concatenate(pool_lq), axis=1) - np.log(it))
        else:
            log_w_est, x_est = log_w, x
        history.append(
            IterationMetrics(
                iteration=it,
                log_z_hat=log_z_estimate(log_w_est),
                log_z_error=log_z_estimate(log_w_est) - target.log_z,
                ess_fraction=ess_fraction(log_w_est),
                kl=kl_target_to_proposal(target, q.log_prob, draws),
                mode_coverage=mode_coverage(target, x_est, log_w_est),
                mean_rmse=mean_rmse(target, x_est, log_w_est),
                n_target_evals=evals,
            )
        )
        if it == config.iterations:  # no adaptation after the last iteration (the bar still ends at N/N)
            continue
        if method == "em2c":
            picked = systematic_resample(eps * log_w, n, rng)
            # the start points' log pi are known from this iteration's draws: not evaluated again
            moved, log_pi_moved, rate = independence_mh(x[picked], log_pi[picked], q, target,
                                                        config.mcmc_steps, rng)
            evals += n * config.mcmc_steps
            acceptance.append(rate)
            delayed = eps * (log_pi_moved - q.log_prob(moved))  # weight computed after the move
            fit_x = np.concatenate([x, moved])[systematic_resample(np.concatenate([eps * log_w, delayed]), n, rng)]
        else:
            fit_x = x_est[systematic_resample(eps * log_w_est, n, rng)]
        mixture = GaussianMixtureDensity.fit(fit_x, k, config.covariance_type, config.reg_covar,
                                             int(rng.integers(2**31 - 1)))
    final = {"mixture": mixture, "x": x_est, "log_w": log_w_est, "acceptance": acceptance}
    return history, final
