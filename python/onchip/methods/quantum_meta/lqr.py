"""Classical check: the same scaling law on linear-quadratic control of a mass-spring-damper family.

Source: arXiv 2601.18973, Sec. "Beyond quantum control: linear-quadratic
regulation": tasks are mass-spring-damper plants m p'' + b p' + k p = u with a
random mass m = m0 (1 + sigma xi); the policy is a linear state feedback
u = -(g_p p + g_v v); adaptation is K policy-gradient steps on the task cost.
Here the gradient is the exact gradient of the deterministic finite-horizon
cost through the rollout (a model-based policy gradient; the paper's
estimator may be sampled), the meta-initialisation is trained with FOMAML
like the quantum policy.

Discretisation: explicit Euler with step dt over H steps (default 0.1 s x 60), initial states
(p, v) = (1, 0) and (0, 1), cost (1/2) sum_t (p^2 + 0.1 v^2 + r u^2) dt averaged
over the two initial states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SpringFamily:
    """Mass-spring-damper family and the LQ cost.

    Attributes:
        m0: nominal mass (kg); stiffness k (N/m); damping b (N s/m);
        r: control weight; dt: Euler step (s); horizon: number of steps.
    """

    m0: float = 1.0
    k: float = 1.0
    b: float = 0.2
    r: float = 0.1
    dt: float = 0.1
    horizon: int = 60

    def __post_init__(self):
        for name in ("m0", "dt", "r"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise ValueError(f"{name}: expected a finite value > 0, got {v!r}")
        if not isinstance(self.horizon, (int, np.integer)) or self.horizon < 1:
            raise ValueError(f"horizon: expected a positive integer, got {self.horizon!r}")


def sample_masses(family: SpringFamily, n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """(n,) masses m0 (1 + sigma xi), xi ~ N(0, 1) clipped to |xi| <= 3 so that m > 0 for sigma < 1/3.

    Raises:
        ValueError: sigma not in [0, 1/3).
    """
    if not 0 <= sigma < 1 / 3:
        raise ValueError(f"sigma: expected a value in [0, 1/3), got {sigma!r}")
    return family.m0 * (1 + sigma * np.clip(rng.standard_normal(n), -3, 3))


def lq_cost(family: SpringFamily, masses, gains):
    """Finite-horizon cost of feedback ``gains`` on plants of mass ``masses``.

    Args:
        masses: (B,) float64 tensor (kg).
        gains: (B, 2) float64 tensor (g_p, g_v); differentiable.
    Returns:
        (B,) float64 tensor of costs.
    """
    import torch

    b = masses.shape[0]
    p = torch.tensor([1.0, 0.0], dtype=torch.float64).repeat(b, 1)
    v = torch.tensor([0.0, 1.0], dtype=torch.float64).repeat(b, 1)
    m = masses[:, None]
    gp, gv = gains[:, :1], gains[:, 1:]
    cost = torch.zeros(b, dtype=torch.float64)
    for _ in range(family.horizon):
        u = -(gp * p + gv * v)
        cost = cost + 0.5 * family.dt * (p**2 + 0.1 * v**2 + family.r * u**2).mean(dim=1)
        p, v = p + family.dt * v, v + family.dt * (u - family.k * p - family.b * v) / m
    return cost


def lq_optimal_gains(family: SpringFamily, mass: float) -> np.ndarray:
    """Gains (2,) minimising the cost of one plant (L-BFGS-B on the exact torch gradient).

    Raises:
        ValueError: mass not > 0.
    """
    import torch
    from scipy.optimize import minimize

    if not np.isfinite(mass) or mass <= 0:
        raise ValueError(f"mass: expected a finite value > 0, got {mass!r}")
    m = torch.tensor([float(mass)], dtype=torch.float64)

    def fun(g):
        gt = torch.tensor(g[None], requires_grad=True)
        c = lq_cost(family, m, gt).sum()
        (grad,) = torch.autograd.grad(c, gt)
        return float(c.detach()), grad.numpy()[0]

    res = minimize(fun, np.array([1.0, 1.0]), jac=True, method="L-BFGS-B", options={"gtol": 1e-10})
    return res.x


def lq_adapt(family: SpringFamily, masses: np.ndarray, gains0: np.ndarray, k_steps: int, lr: float):
    """K gradient steps on each plant's cost from the shared gains ``gains0`` (2,).

    Returns:
        (K + 1, B) costs and the adapted (B, 2) gains.
    """
    import torch

    m = torch.as_tensor(masses, dtype=torch.float64)
    g = torch.tensor(np.repeat(np.asarray(gains0, float)[None], len(masses), 0), requires_grad=True)
    costs = []
    for k in range(k_steps + 1):
        c = lq_cost(family, m, g)
        costs.append(c.detach().numpy().copy())
        if k == k_steps:
            break
        (grad,) = torch.autograd.grad(c.sum(), g)
        g = (g - lr * grad).detach().requires_grad_(True)
    return np.array(costs), g.detach().numpy()


def lq_meta_init(family: SpringFamily, sigma: float, seed: int, iters: int = 40, tasks: int = 16,
                 inner_steps: int = 2, inner_lr: float = 2.0, outer_lr: float = 0.05) -> np.ndarray:
    """FOMAML meta-initialisation of the gains (2,) for masses of spread ``sigma``."""
    import torch

    rng = np.random.default_rng(seed)
    g0 = torch.tensor([1.0, 1.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([g0], lr=outer_lr)
    for _ in range(iters):
        masses = sample_masses(family, tasks, sigma, rng)
        _, adapted = lq_adapt(family, masses, g0.detach().numpy(), inner_steps, inner_lr)
        ga = torch.tensor(adapted, requires_grad=True)
        c = lq_cost(family, torch.as_tensor(masses), ga).mean()
        (grad,) = torch.autograd.grad(c, ga)
        opt.zero_grad()
        g0.grad = grad.sum(dim=0)
        opt.step()
    return g0.detach().numpy()


def lq_gain_curves(family: SpringFamily, sigmas, k_max: int, n_test: int, seed: int,
                   inner_lr: float = 2.0) -> np.ndarray:
    """Mean gains G_K (len(sigmas), k_max + 1) of FOMAML inits adapted on fresh plants.

    The test plants of every sigma share the same standard normals xi (common
    random numbers), so the variance dependence is not masked by sampling noise.
    """
    from .._report import rng, seed_int

    out = []
    for j, s in enumerate(sigmas):
        g0 = lq_meta_init(family, s, seed_int(seed, "lqr-init", j), inner_lr=inner_lr)
        masses = sample_masses(family, n_test, s, rng(seed, "lqr-plants"))
        costs, _ = lq_adapt(family, masses, g0, k_max, inner_lr)
        out.append((costs[0] - costs).mean(axis=1))
    return np.array(out)
