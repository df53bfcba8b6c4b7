"""Diffusion priors for the inverse-problem samplers.

Two priors share one interface, a denoiser ``D(x_t, sigma) -> E[x_0 | x_t]`` for
the variance-exploding corruption ``x_t = x_0 + sigma * z`` (Karras et al. 2022,
"Elucidating the design space of diffusion models", EDM, section 2):

* :class:`GaussianMixturePrior` -- a Gaussian mixture whose denoiser, posterior
  under linear-Gaussian measurements and MAP are computed exactly, so samplers
  can be checked against known answers;
* :class:`DigitsDenoiser` -- a small EDM-preconditioned network trained on the
  8x8 digits that ship with scikit-learn (:func:`train_digits_denoiser`).

Images are flattened vectors of ``side * side`` pixels scaled to ``[-1, 1]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._torch import seeded_init

DIGITS_SIDE = 8


class GaussianMixturePrior:
    """Gaussian mixture prior ``p(x) = sum_k w_k N(x; mu_k, Sigma_k)`` with exact inference.

    Everything is computed in float64 torch so that the denoiser is
    differentiable (DPS back-propagates through it).

    Args:
        weights: ``(K,)`` positive mixture weights summing to 1.
        means: ``(K, d)`` component means.
        covs: ``(K, d, d)`` symmetric positive-definite component covariances.

    Raises:
        ValueError: shapes disagree, weights are not a probability vector, or a
            covariance is not symmetric positive definite.
    """

    def __init__(self, weights, means, covs):
        w = torch.as_tensor(np.asarray(weights, dtype=np.float64))
        mu = torch.as_tensor(np.asarray(means, dtype=np.float64))
        cov = torch.as_tensor(np.asarray(covs, dtype=np.float64))
        if w.ndim != 1 or mu.ndim != 2 or cov.ndim != 3:
            raise ValueError(
                f"weights (K,), means (K, d), covs (K, d, d) expected; got shapes "
                f"{tuple(w.shape)}, {tuple(mu.shape)}, {tuple(cov.shape)}"
            )
        k, d = mu.shape
        if w.shape[0] != k or cov.shape != (k, d, d):
            raise ValueError(
                f"weights {tuple(w.shape)}, means {tuple(mu.shape)} and covs {tuple(cov.shape)} disagree"
            )
        if torch.any(w <= 0) or abs(float(w.sum()) - 1.0) > 1e-8:
            raise ValueError(f"weights must be positive and sum to 1, got sum {float(w.sum())!r}")
        if not torch.allclose(cov, cov.transpose(1, 2), atol=1e-10):
            raise ValueError("covs must be symmetric")
        evals, evecs = torch.linalg.eigh(cov)
        if torch.any(evals <= 0):
            raise ValueError(f"covs must be positive definite, smallest eigenvalue {float(evals.min())!r}")
        self.weights, self.means, self.covs = w, mu, cov
        self._evals, self._evecs = evals, evecs
        self.dim = d

    @property
    def n_components(self) -> int:
        """Number of mixture components K."""
        return self.weights.shape[0]

    @property
    def mean(self) -> torch.Tensor:
        """Prior mean, shape ``(d,)``."""
        return self.weights @ self.means

    @property
    def data_var(self) -> float:
        """Average per-coordinate prior variance ``tr Cov[x] / d`` (used by the LMAPS covariance)."""
        centred = self.means - self.mean
        total = (self.weights[:, None, None] * (self.covs + centred[:, :, None] * centred[:, None, :])).sum(0)
        return float(torch.trace(total)) / self.dim

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Draw ``n`` samples, shape ``(n, d)``, reproducibly from ``generator``."""
        comp = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        z = torch.randn(n, self.dim, generator=generator, dtype=torch.float64)
        scale = self._evecs[comp] * self._evals[comp].sqrt()[:, None, :]
        return self.means[comp] + (scale @ z[:, :, None])[:, :, 0]

    def _component_terms(self, x: torch.Tensor, sigma):
        """Per-component log N(x; mu_k, Sigma_k + sigma^2 I) and projections onto eigenvectors."""
        x = torch.as_tensor(x, dtype=torch.float64)
        var = self._evals[None] + torch.as_tensor(sigma, dtype=torch.float64).reshape(-1, 1, 1) ** 2  # (B|1,K,d)
        proj = torch.einsum("kde,bkd->bke", self._evecs, x[:, None, :] - self.means[None])  # (B,K,d)
        logn = -0.5 * ((proj**2 / var).sum(-1) + torch.log(var).sum(-1) + self.dim * math.log(2 * math.pi))
        return logn + torch.log(self.weights)[None], proj, var

    def log_prob_noisy(self, x: torch.Tensor, sigma) -> torch.Tensor:
        """``log p_sigma(x)`` of the prior convolved with ``N(0, sigma^2 I)``; ``x`` (B, d) -> (B,)."""
        logw, _, _ = self._component_terms(x, sigma)
        return torch.logsumexp(logw, dim=1)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Prior log density ``log p(x)``; ``x`` (B, d) -> (B,)."""
        return self.log_prob_noisy(x, 0.0)

    def __call__(self, x: torch.Tensor, sigma) -> torch.Tensor:
        """Exact denoiser ``E[x_0 | x_0 + sigma z = x]``; ``x`` (B, d), ``sigma`` scalar or (B,) -> (B, d)."""
        logw, proj, var = self._component_terms(x, sigma)
        resp = torch.softmax(logw, dim=1)  # (B,K)
        shrunk = proj * (self._evals[None] / var)  # Sigma_k (Sigma_k + s^2 I)^-1 (x - mu_k) in eigenbasis
        comp_means = self.means[None] + torch.einsum("kde,bke->bkd", self._evecs, shrunk)
        return (resp[:, :, None] * comp_means).sum(1)

    def posterior(self, A: np.ndarray, y: np.ndarray, noise_var: float):
        """Exact posterior of ``x`` given ``y = A x + n``, ``n ~ N(0, noise_var I)``.

        The posterior is again a Gaussian mixture (Bishop 2006, PRML section 2.3.3,
        applied per component).

        Args:
            A: ``(m, d)`` measurement matrix.
            y: ``(B, m)`` measurements.
            noise_var: measurement noise variance, > 0.

        Returns:
            ``(weights (B, K), means (B, K, d), covs (K, d, d))`` as float64 numpy arrays.

        Raises:
            ValueError: shapes disagree or ``noise_var <= 0``.
        """
        A = np.asarray(A, dtype=np.float64)
        y = np.atleast_2d(np.asarray(y, dtype=np.float64))
        if A.ndim != 2 or A.shape[1] != self.dim or y.shape[1] != A.shape[0]:
            raise ValueError(f"A must be (m, {self.dim}) and y (B, m); got {A.shape} and {y.shape}")
        if not noise_var > 0:
            raise ValueError(f"noise_var must be > 0, got {noise_var!r}")
        mus, covs = self.means.numpy(), self.covs.numpy()
        m = A.shape[0]
        logw = np.empty((y.shape[0], self.n_components))
        post_means = np.empty((y.shape[0], self.n_components, self.dim))
        post_covs = np.empty_like(covs)
        for k in range(self.n_components):
            s_yy = A @ covs[k] @ A.T + noise_var * np.eye(m)
            gain = np.linalg.solve(s_yy, A @ covs[k]).T  # Sigma A^T S^-1, (d, m)
            resid = y - mus[k] @ A.T
            chol = np.linalg.cholesky(s_yy)
            white = np.linalg.solve(chol, resid.T)
            logw[:, k] = (
                np.log(self.weights[k].item())
                - 0.5 * (white**2).sum(0)
                - np.log(np.diag(chol)).sum()
                - 0.5 * m * math.log(2 * math.pi)
            )
            post_means[:, k] = mus[k] + resid @ gain.T
            post_covs[k] = covs[k] - gain @ A @ covs[k]
        weights = np.exp(logw - logw.max(1, keepdims=True))
        weights /= weights.sum(1, keepdims=True)
        return weights, post_means, 0.5 * (post_covs + post_covs.transpose(0, 2, 1))

    def posterior_mean(self, A: np.ndarray, y: np.ndarray, noise_var: float) -> np.ndarray:
        """Exact ``E[x | y]``, shape ``(B, d)`` (see :meth:`posterior`)."""
        weights, means, _ = self.posterior(A, y, noise_var)
        return (weights[:, :, None] * means).sum(1)

    def map_estimate(self, A: np.ndarray, y: np.ndarray, noise_var: float, *, gtol: float = 1e-9) -> np.ndarray:
        """Global mode of the posterior ``p(x | y)``, shape ``(B, d)``.

        The posterior is a Gaussian mixture; its mode has no closed form, so it is
        found by L-BFGS (scipy) on ``-log p(x | y)`` started from every component's
        posterior mean, keeping the best. A mixture's modes lie in the convex hull
        of the component means and are attracted from them, so this is exact up
        to the optimiser tolerance ``gtol`` for mixtures whose components are
        not strongly overlapping.
        """
        from scipy.optimize import minimize

        A_t = torch.as_tensor(np.asarray(A, dtype=np.float64))
        _, means, _ = self.posterior(A, y, noise_var)
        y = np.atleast_2d(np.asarray(y, dtype=np.float64))
        out = np.empty((y.shape[0], self.dim))
        for b in range(y.shape[0]):
            y_b = torch.as_tensor(y[b])

            def objective(v):
                x = torch.as_tensor(v).requires_grad_(True)
                val = -self.log_prob(x[None])[0] + 0.5 * ((A_t @ x - y_b) ** 2).sum() / noise_var
                (grad,) = torch.autograd.grad(val, x)
                return float(val.detach()), grad.numpy()

            best = None
            for start in means[b]:
                res = minimize(objective, start, jac=True, method="L-BFGS-B", options={"gtol": gtol, "maxiter": 2000})
                if best is None or res.fun < best.fun:
                    best = res
            out[b] = best.x
        return out


def fit_digits_gmm(train: np.ndarray, n_components: int = 10, reg_covar: float = 1e-2, seed: int = 0):
    """Fit a full-covariance :class:`GaussianMixturePrior` to digit images with scikit-learn.

    ``sklearn.mixture.GaussianMixture`` (EM, k-means initialisation);
    ``reg_covar`` is added to every covariance diagonal (pixels that are
    always background would otherwise have zero variance).

    Raises:
        ValueError: ``n_components < 1`` or ``reg_covar <= 0``.
    """
    from sklearn.mixture import GaussianMixture

    if n_components < 1:
        raise ValueError(f"n_components must be >= 1, got {n_components!r}")
    if not reg_covar > 0:
        raise ValueError(f"reg_covar must be > 0, got {reg_covar!r}")
    gm = GaussianMixture(n_components, covariance_type="full", reg_covar=reg_covar, random_state=seed, max_iter=200)
    gm.fit(train)
    return GaussianMixturePrior(gm.weights_ / gm.weights_.sum(), gm.means_, gm.covariances_)


class _NoiseConditionedMLP(torch.nn.Module):
    """Residual MLP ``F(x, c_noise)``; ``c_noise`` enters through Fourier features."""

    def __init__(self, dim: int, hidden: int, n_blocks: int, n_freq: int = 16):
        super().__init__()
        self.register_buffer("freqs", torch.randn(n_freq, generator=torch.Generator().manual_seed(0)) * 4.0)
        self.inp = torch.nn.Linear(dim + 2 * n_freq, hidden)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(hidden), torch.nn.Linear(hidden, hidden), torch.nn.SiLU(),
                                torch.nn.Linear(hidden, hidden))
            for _ in range(n_blocks)
        )
        self.out = torch.nn.Sequential(torch.nn.LayerNorm(hidden), torch.nn.Linear(hidden, dim))

    def forward(self, x, c_noise):
        phase = c_noise[:, None] * self.freqs[None] * 2 * math.pi
        h = self.inp(torch.cat([x, torch.sin(phase), torch.cos(phase)], dim=1))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


class DigitsDenoiser(torch.nn.Module):
    """EDM-preconditioned denoiser (Karras et al. 2022, section 5 and table 1).

    ``D(x, sigma) = c_skip x + c_out F(c_in x, log(sigma) / 4)`` with
    ``c_skip = s_d^2 / (sigma^2 + s_d^2)``, ``c_out = sigma s_d / sqrt(sigma^2 + s_d^2)``,
    ``c_in = 1 / sqrt(sigma^2 + s_d^2)``; ``s_d`` is the data standard deviation.
    Inputs ``x`` (B, d) float; ``sigma`` scalar or (B,); output (B, d) in input dtype.
    """

    def __init__(self, dim: int = DIGITS_SIDE**2, sigma_data: float = 0.75, hidden: int = 256, n_blocks: int = 3,
                 data_var: float | None = None):
        super().__init__()
        self.dim = dim
        self.sigma_data = float(sigma_data)
        self.data_var = float(data_var if data_var is not None else sigma_data**2)
        self.net = _NoiseConditionedMLP(dim, hidden, n_blocks)

    def forward(self, x: torch.Tensor, sigma) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        sigma = torch.as_tensor(sigma, dtype=torch.float32).reshape(-1).expand(x.shape[0])
        sd2 = self.sigma_data**2
        c_skip = (sd2 / (sigma**2 + sd2))[:, None]
        c_out = (sigma * self.sigma_data / torch.sqrt(sigma**2 + sd2))[:, None]
        c_in = (1.0 / torch.sqrt(sigma**2 + sd2))[:, None]
        return (c_skip * x + c_out * self.net(c_in * x, torch.log(sigma) / 4)).to(dtype)


@dataclass(frozen=True)
class DigitsTraining:
    """Training settings of :func:`train_digits_denoiser` (EDM loss, Karras et al. 2022, section 5).

    ``p_mean``/``p_std``: log-normal training noise distribution of sigma.
    """

    steps: int = 3000
    batch: int = 128
    lr: float = 2e-3
    hidden: int = 128
    n_blocks: int = 2
    p_mean: float = -1.0
    p_std: float = 1.4

    def __post_init__(self):
        for name in ("steps", "batch", "hidden", "n_blocks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if not self.lr > 0 or not self.p_std > 0:
            raise ValueError(f"lr and p_std must be > 0, got {self.lr!r}, {self.p_std!r}")


_MEMORY_CACHE: dict[tuple, DigitsDenoiser] = {}


def train_digits_denoiser(train: np.ndarray, *, seed: int = 0, config: DigitsTraining = DigitsTraining(),
                          cache_dir: str | Path | None = None, progress: bool = False) -> DigitsDenoiser:
    """Train (or fetch from cache) a :class:`DigitsDenoiser` on ``train`` (n, 64) in ``[-1, 1]``.

    Denoising score matching with the EDM loss weight ``(sigma^2 + s_d^2) / (sigma s_d)^2``
    (Karras et al. 2022, eq. 8 and table 1). Deterministic for a given ``seed``
    (torch CPU). The trained model is kept in memory for the process; with
    ``cache_dir`` it is also saved there as a state dict and reused, keyed by the seed, the training
    configuration, the torch version and the torch thread count.

    Raises:
        ValueError: ``train`` is not a 2-D array, or ``seed`` is negative.
    """
    train = np.asarray(train, dtype=np.float32)
    if train.ndim != 2:
        raise ValueError(f"train must be (n, d), got shape {train.shape}")
    key = (seed, config, train.shape, float(train.sum()))
    if key in _MEMORY_CACHE:
        return _MEMORY_CACHE[key]
    sd = float(train.std())
    model = seeded_init(seed, lambda: DigitsDenoiser(train.shape[1], sigma_data=sd, hidden=config.hidden,
                                                     n_blocks=config.n_blocks, data_var=float(train.var(0).mean())))
    path = None
    if cache_dir is not None:
        tag = (f"digits_denoiser_seed{seed}_n{train.shape[0]}_steps{config.steps}_batch{config.batch}"
               f"_lr{config.lr:g}_h{config.hidden}x{config.n_blocks}_p{config.p_mean:g}_{config.p_std:g}"
               f"_torch{torch.__version__}_threads{torch.get_num_threads()}.pt")
        path = Path(cache_dir) / tag
        if path.exists():
            model.load_state_dict(torch.load(path, weights_only=True))
            return _frozen(model, key)
    from onchip.progress import progress_bar

    gen = torch.Generator().manual_seed(seed)
    data = torch.as_tensor(train)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, config.steps)
    for _ in progress_bar(range(config.steps), desc="train digits denoiser", disable=not progress):
        idx = torch.randint(0, len(data), (config.batch,), generator=gen)
        x0 = data[idx]
        sigma = torch.exp(config.p_mean + config.p_std * torch.randn(config.batch, generator=gen))
        noisy = x0 + sigma[:, None] * torch.randn(x0.shape, generator=gen)
        weight = (sigma**2 + sd**2) / (sigma * sd) ** 2
        loss = (weight[:, None] * (model(noisy, sigma) - x0) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    _frozen(model, key)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), path)
    return model


def _frozen(model: DigitsDenoiser, key: tuple) -> DigitsDenoiser:
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    _MEMORY_CACHE[key] = model
    return model


class CountingDenoiser:
    """Wraps a denoiser ``D(x, sigma)`` and counts calls (one call = one NFE for the whole batch)."""

    def __init__(self, denoiser):
        self.denoiser = denoiser
        self.calls = 0

    def __call__(self, x: torch.Tensor, sigma) -> torch.Tensor:
        self.calls += 1
        return self.denoiser(x, sigma)
