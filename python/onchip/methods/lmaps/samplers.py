"""LMAPS, DPS and DAPS on one variance-exploding noise schedule.

All three walk a decreasing schedule ``sigma_1 > ... > sigma_N`` and call the
denoiser ``D(x, sigma) ~ E[x_0 | x_t = x]`` once per level (DAPS: ``ode_steps``
times per level, so it runs ``NFE / ode_steps`` levels at an equal budget), so a
run costs the same number of denoiser calls (NFE) for every method. They differ
in how the measurement ``y ~ N(A(x_0), noise_var I)`` enters:

* LMAPS (Zhang, Brekelmans, Ver Steeg, ICML 2026, arXiv 2510.07343, sections 3-4):
  ``x0* = argmin_x 1/2 ||y - A(x)||^2 + lambda_t/2 ||x - D(x_t)||^2`` with
  ``lambda_t = noise_var / (kappa r_t^2)`` (``kappa = cov_scale``, 1 by default) -- the local MAP of ``p(x_0 | x_t, y)`` under
  ``p(x_0 | x_t) ~ N(D(x_t), r_t^2 I)``, multiplied through by ``noise_var`` so
  a small noise level does not blow up the step size. ``r_t^2 = v sigma_t^2 / (v + sigma_t^2)``
  is the posterior variance of ``x_0`` given ``x_t`` for a Gaussian prior of
  per-pixel variance ``v`` (the paper's Gaussian-prior covariance argument;
  it never exceeds ``sigma_t^2``). Then re-noise: ``x_{t-1} = x0* + sigma_{t-1} z``.
* DAPS (Zhang et al., CVPR 2025, "Improving diffusion inverse problem solving
  with decoupled noise annealing", arXiv 2407.01521, algorithm 1): the same
  decoupled loop, but ``x_0`` is *sampled* from ``p(x_0 | x_t, y)`` with
  Langevin dynamics, under DAPS's choice ``r_t = sigma_t``.
* DPS (Chung et al., ICLR 2023, arXiv 2209.14687, algorithm 1): ancestral step
  of the unconditional sampler plus the gradient step
  ``- zeta grad_{x_t} ||y - A(D(x_t))||``, which back-propagates through the denoiser.

Tensors are ``(B, d)`` float64; ``y`` is ``(B, m)``. The last level returns the
clean estimate (no re-noising), so every method returns ``(B, d)``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from onchip.progress import progress_bar

from . import METHODS  # defined in the package, free of torch
from .operators import Operator

Denoiser = Callable[[torch.Tensor, float], torch.Tensor]


def karras_sigmas(n: int, sigma_max: float = 10.0, sigma_min: float = 0.01, rho: float = 7.0) -> np.ndarray:
    """EDM noise levels (Karras et al. 2022, eq. 5): ``n`` values from ``sigma_max`` down to ``sigma_min``.

    Raises:
        ValueError: ``n < 1``, or not ``0 < sigma_min < sigma_max``, or ``rho <= 0``.
    """
    if n < 1:
        raise ValueError(f"number of steps must be >= 1, got {n!r}")
    if not 0 < sigma_min < sigma_max:
        raise ValueError(f"need 0 < sigma_min < sigma_max, got {sigma_min!r}, {sigma_max!r}")
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho!r}")
    if n == 1:
        return np.array([sigma_min])
    ramp = np.linspace(0, 1, n)
    return (sigma_max ** (1 / rho) + ramp * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho


def gaussian_prior_variance(sigma: float, data_var: float) -> float:
    """``Var[x_0 | x_t]`` per pixel for a Gaussian prior of variance ``data_var``: ``v s^2 / (v + s^2)``.

    The covariance approximation of LMAPS (arXiv 2510.07343, section 4.1).
    """
    return data_var * sigma**2 / (data_var + sigma**2)


def _misfit_grad(op: Operator, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``J^T (A(x) - y)`` with ``J`` the Jacobian of ``op.surrogate`` at ``x``."""
    if op.linear:
        return op.adjoint(op.forward(x) - y)
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        loss = 0.5 * ((op.surrogate(x) - y) ** 2).sum()
        (grad,) = torch.autograd.grad(loss, x)
    return grad


def local_map_solve(op: Operator, y: torch.Tensor, center: torch.Tensor, lam: float, steps: int) -> torch.Tensor:
    """Minimise ``1/2 ||y - A(x)||^2 + lam/2 ||x - center||^2`` from ``x = center``.

    Nesterov's accelerated gradient (step ``1 / L``, ``L = op.lipschitz + lam``;
    momentum ``(sqrt(L) - sqrt(lam)) / (sqrt(L) + sqrt(lam))``, or ``k / (k + 3)``
    when ``lam = 0``). For a linear operator this converges to the closed form
    ``(A^T A + lam I)^{-1} (A^T y + lam center)``.

    Raises:
        ValueError: ``lam < 0`` or ``steps < 0``.
    """
    if not lam >= 0:
        raise ValueError(f"lam must be >= 0, got {lam!r}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps!r}")
    big_l = op.lipschitz + lam
    momentum = (math.sqrt(big_l) - math.sqrt(lam)) / (math.sqrt(big_l) + math.sqrt(lam)) if lam > 0 else None
    x = center.clone()
    z = x
    for k in range(steps):
        grad = _misfit_grad(op, y, z) + lam * (z - center)
        x_new = z - grad / big_l
        beta = momentum if momentum is not None else k / (k + 3)
        z = x_new + beta * (x_new - x)
        x = x_new
    return x


def _check_inputs(op: Operator, y: torch.Tensor, sigmas) -> np.ndarray:
    sigmas = np.asarray(sigmas, dtype=np.float64)
    if sigmas.ndim != 1 or len(sigmas) < 1 or np.any(sigmas <= 0) or np.any(np.diff(sigmas) >= 0):
        raise ValueError(f"sigmas must be a non-empty, positive, strictly decreasing 1-D array, got {sigmas!r}")
    m = op.forward(torch.zeros(1, op.dim, dtype=torch.float64)).shape[1]
    if y.ndim != 2 or y.shape[1] != m:
        raise ValueError(f"y must have shape (B, {m}) for this operator, got {tuple(y.shape)}")
    return sigmas


def surrogate_matrix(op: Operator) -> np.ndarray:
    """Dense ``(m, d)`` Jacobian of ``op.surrogate``: ``op.matrix()`` for a linear operator, the identity for
    the quantizer (its straight-through surrogate's Jacobian everywhere).

    Raises:
        ValueError: a non-linear operator whose surrogate Jacobian is not the identity.
    """
    if op.linear:
        return op.matrix()
    if type(op).__name__ == "Quantize":
        return np.eye(op.dim)
    raise ValueError(f"op: no constant surrogate Jacobian for {type(op).__name__}")


def lmaps(denoiser: Denoiser, op: Operator, y: torch.Tensor, sigmas, *, data_var: float,
          generator: torch.Generator, inner_steps: int = 30, cov_scale: float = 1.0, local: str = "map",
          progress: bool = False) -> torch.Tensor:
    """Local MAP sampling (arXiv 2510.07343, algorithm "LMAPS"); one denoiser call per level.

    Args:
        denoiser: ``D(x (B, d), sigma) -> (B, d)``.
        op: measurement operator; ``op.noise_var`` is the likelihood variance.
        y: ``(B, m)`` measurements.
        sigmas: decreasing noise levels (see :func:`karras_sigmas`).
        data_var: per-pixel prior variance ``v`` of the Gaussian-prior covariance ``r_t^2``.
        generator: source of the initial and re-noising draws.
        inner_steps: gradient steps of the local MAP solve per level.
        cov_scale: factor on the covariance ``r_t^2`` (1: the paper's Gaussian-prior value; the one
            hyperparameter tuned on validation images, like DPS's ``zeta``).
        local: ``"map"`` (LMAPS: the local MAP) or ``"sample"`` (the ablation: an exact draw from the same
            local Gaussian posterior ``N(x0*, noise_var (J^T J + lambda_t I)^-1)``, ``J`` the operator's
            surrogate Jacobian, instead of its mode; nothing else changes).

    Returns:
        ``(B, d)`` reconstruction: the local MAP (or sample) at the last level.

    Raises:
        ValueError: bad ``sigmas``, ``y``, ``data_var <= 0``, ``inner_steps < 0``, ``cov_scale <= 0`` or an
            unknown ``local``.
    """
    sigmas = _check_inputs(op, y, sigmas)
    if not data_var > 0:
        raise ValueError(f"data_var must be > 0, got {data_var!r}")
    if not cov_scale > 0:
        raise ValueError(f"cov_scale must be > 0, got {cov_scale!r}")
    if local not in ("map", "sample"):
        raise ValueError(f"local must be 'map' or 'sample', got {local!r}")
    jtj = None
    if local == "sample":
        jac = torch.as_tensor(surrogate_matrix(op), dtype=torch.float64)
        jtj = jac.T @ jac
    x = sigmas[0] * torch.randn(y.shape[0], op.dim, generator=generator, dtype=torch.float64)
    for i in progress_bar(range(len(sigmas)), desc="lmaps", disable=not progress):
        with torch.no_grad():
            center = denoiser(x, float(sigmas[i])).double()
        lam = op.noise_var / (cov_scale * gaussian_prior_variance(float(sigmas[i]), data_var))
        x0 = local_map_solve(op, y, center, lam, inner_steps)
        if jtj is not None:
            cov = op.noise_var * torch.linalg.inv(jtj + lam * torch.eye(op.dim, dtype=torch.float64))
            chol = torch.linalg.cholesky(0.5 * (cov + cov.T))
            x0 = x0 + torch.randn(x0.shape, generator=generator, dtype=torch.float64) @ chol.T
        if i == len(sigmas) - 1:
            return x0
        x = x0 + sigmas[i + 1] * torch.randn(x0.shape, generator=generator, dtype=torch.float64)
    raise AssertionError("unreachable")


def daps(denoiser: Denoiser, op: Operator, y: torch.Tensor, sigmas, *, generator: torch.Generator,
         langevin_steps: int = 30, step_scale: float = 0.5, ode_steps: int = 1, progress: bool = False) -> torch.Tensor:
    """Decoupled annealing posterior sampling (DAPS, arXiv 2407.01521, algorithm 1).

    At each level: ``x0hat`` from ``ode_steps`` denoiser calls (the paper's few-step probability-flow
    ODE from ``sigma_t`` down to the last level ``sigma_N``: Euler steps
    ``x <- x + (s' - s)(x - D(x, s)) / s`` on geometric sub-levels, then ``x0hat = D(x, sigma_N)``;
    ``ode_steps = 1`` is the one-call Tweedie estimate ``D(x_t, sigma_t)``), so a run costs
    ``len(sigmas) * ode_steps`` calls; then ``langevin_steps`` unadjusted Langevin steps on
    ``log N(y; A(x0), noise_var) + log N(x0; x0hat, sigma_t^2 I)`` with step
    ``step_scale / L`` (``L`` the log-density's gradient Lipschitz constant),
    then ``x_{t-1} = x0 + sigma_{t-1} z``.

    Returns:
        ``(B, d)``: the Langevin sample at the last level.

    Raises:
        ValueError: bad ``sigmas``/``y``, ``langevin_steps < 0``, ``ode_steps < 1`` or ``step_scale`` not in
            ``(0, 1]``.
    """
    sigmas = _check_inputs(op, y, sigmas)
    if ode_steps < 1:
        raise ValueError(f"ode_steps must be >= 1, got {ode_steps!r}")
    if langevin_steps < 0:
        raise ValueError(f"langevin_steps must be >= 0, got {langevin_steps!r}")
    if not 0 < step_scale <= 1:
        raise ValueError(f"step_scale must be in (0, 1], got {step_scale!r}")
    if not op.noise_var > 0:
        raise ValueError("DAPS needs a positive measurement noise variance (sigma_y > 0)")
    x = sigmas[0] * torch.randn(y.shape[0], op.dim, generator=generator, dtype=torch.float64)
    for i in progress_bar(range(len(sigmas)), desc="daps", disable=not progress):
        sub = np.geomspace(float(sigmas[i]), float(sigmas[-1]), ode_steps) if ode_steps > 1 else [float(sigmas[i])]
        with torch.no_grad():
            xo = x
            for j, s in enumerate(sub):
                center = denoiser(xo, float(s)).double()
                if j + 1 < len(sub):
                    xo = xo + (float(sub[j + 1]) - float(s)) * (xo - center) / float(s)
        r2 = float(sigmas[i]) ** 2
        eta = step_scale / (op.lipschitz / op.noise_var + 1.0 / r2)
        x0 = center.clone()
        for _ in range(langevin_steps):
            grad = -_misfit_grad(op, y, x0) / op.noise_var - (x0 - center) / r2
            x0 = x0 + eta * grad + math.sqrt(2 * eta) * torch.randn(x0.shape, generator=generator, dtype=torch.float64)
        if i == len(sigmas) - 1:
            return x0
        x = x0 + sigmas[i + 1] * torch.randn(x0.shape, generator=generator, dtype=torch.float64)
    raise AssertionError("unreachable")


def dps(denoiser: Denoiser, op: Operator, y: torch.Tensor, sigmas, *, generator: torch.Generator,
        zeta: float = 1.0, progress: bool = False) -> torch.Tensor:
    """Diffusion posterior sampling (DPS, arXiv 2209.14687, algorithm 1), variance-exploding form.

    Each level: ``x0hat = D(x_t)`` with gradient, the ancestral step
    ``x' = x0hat + (s'^2/s^2)(x_t - x0hat) + s' sqrt(1 - s'^2/s^2) z`` to the next
    level ``s'`` (0 after the last), then ``x_{t-1} = x' - zeta grad_{x_t} ||y - A(x0hat)||``
    (the norm itself, per image, as in the paper's step size ``zeta_i = zeta / ||y - A(x0hat)||``
    applied to the squared norm).

    Returns:
        ``(B, d)`` final iterate.

    Raises:
        ValueError: bad ``sigmas``/``y`` or ``zeta < 0``.
    """
    sigmas = _check_inputs(op, y, sigmas)
    if not zeta >= 0:
        raise ValueError(f"zeta must be >= 0, got {zeta!r}")
    x = sigmas[0] * torch.randn(y.shape[0], op.dim, generator=generator, dtype=torch.float64)
    for i in progress_bar(range(len(sigmas)), desc="dps", disable=not progress):
        s = float(sigmas[i])
        s_next = float(sigmas[i + 1]) if i + 1 < len(sigmas) else 0.0
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            center = denoiser(xg, s).double()
            norm = torch.linalg.vector_norm(y - op.surrogate(center), dim=1)
            (grad,) = torch.autograd.grad(norm.sum(), xg)
        center = center.detach()
        ratio = (s_next / s) ** 2
        x = center + ratio * (x - center)
        if s_next > 0:
            x = x + s_next * math.sqrt(1 - ratio) * torch.randn(x.shape, generator=generator, dtype=torch.float64)
        x = x - zeta * grad
    return x


def run_method(method: str, denoiser: Denoiser, op: Operator, y: torch.Tensor, sigmas, *, data_var: float,
               generator: torch.Generator, progress: bool = False, **options) -> torch.Tensor:
    """Dispatch to :func:`lmaps`, :func:`dps` or :func:`daps` by name (see :data:`METHODS`);
    ``lmaps-sample`` is :func:`lmaps` with ``local="sample"`` (the ablation of the local MAP).

    ``options`` are passed to the method (``inner_steps``, ``cov_scale``, ``zeta``, ``langevin_steps``,
    ``step_scale``, ``ode_steps``).

    Raises:
        ValueError: unknown ``method``.
    """
    if method == "lmaps":
        return lmaps(denoiser, op, y, sigmas, data_var=data_var, generator=generator, progress=progress, **options)
    if method == "lmaps-sample":
        return lmaps(denoiser, op, y, sigmas, data_var=data_var, generator=generator, progress=progress,
                     local="sample", **options)
    if method == "dps":
        return dps(denoiser, op, y, sigmas, generator=generator, progress=progress, **options)
    if method == "daps":
        return daps(denoiser, op, y, sigmas, generator=generator, progress=progress, **options)
    raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
