"""First-order MAML over a control policy, and the two baselines.

Source: arXiv 2601.18973, Sec. "Meta-learning setup": a small policy network
pi_theta maps task features to the piecewise-constant control sequence; the
meta-initialisation theta_0 is trained with first-order MAML (Finn et al.
2017; FOMAML: the outer gradient is the task gradient at the adapted
parameters); on a new device, K plain gradient steps on the task loss
L(theta) = 1 - F_avg adapt it. Baselines: one fixed control sequence trained
on the average loss (no features, no adaptation) and per-task GRAPE-style
gradient ascent on the raw control amplitudes (Khaneja et al. 2005).

The policy is written functionally with a leading task dimension on every
parameter, so that the K inner steps of B devices run as one batched
autograd computation (each device's loss only depends on its own copy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._torch import import_torch
from .lindblad import GateProblem, channel_torch, fidelity_torch
from .tasks import DeviceBatch, DeviceFamily, sample_devices


@dataclass(frozen=True)
class MetaConfig:
    """Meta-training and adaptation settings (defaults: the documented default run).

    Attributes:
        hidden: width of the policy's hidden layer.
        meta_iters: outer FOMAML iterations.
        tasks_per_iter: devices per outer iteration.
        inner_steps: inner gradient steps during meta-training.
        inner_lr: step size alpha of every adaptation step (training and test).
        outer_lr: Adam step size of the outer loop.
        output_scale: scale of the network's control correction, in 1/T.
    """

    hidden: int = 16
    meta_iters: int = 60
    tasks_per_iter: int = 8
    inner_steps: int = 2
    inner_lr: float = 1.0
    outer_lr: float = 3e-3
    output_scale: float = 1.0

    def __post_init__(self):
        for name in ("hidden", "meta_iters", "tasks_per_iter"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name}: expected a positive integer, got {v!r}")
        if not isinstance(self.inner_steps, (int, np.integer)) or self.inner_steps < 0:
            raise ValueError(f"inner_steps: expected an integer >= 0, got {self.inner_steps!r}")
        for name in ("inner_lr", "outer_lr", "output_scale"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise ValueError(f"{name}: expected a finite value > 0, got {v!r}")


def init_policy(problem: GateProblem, n_features: int, hidden: int, seed: int) -> dict:
    """Parameters of the policy MLP, unbatched (float64 tensors).

    u(x) = reference + output_scale * (W2 tanh(W1 x + b1) + b2), reshaped to
    (N, n_ctrl). W2 and b2 start at zero, so the initial policy is the analytic pulse.

    Returns:
        dict W1 (hidden, F), b1 (hidden,), W2 (N n_ctrl, hidden), b2 (N n_ctrl,).
    """
    torch = import_torch()
    g = torch.Generator().manual_seed(int(seed))
    out = problem.n_segments * problem.n_controls
    return {
        "W1": torch.randn(hidden, n_features, generator=g, dtype=torch.float64) / np.sqrt(max(n_features, 1)),
        "b1": torch.randn(hidden, generator=g, dtype=torch.float64) * 0.5,
        "W2": torch.zeros(out, hidden, dtype=torch.float64),
        "b2": torch.zeros(out, dtype=torch.float64),
    }


def batch_params(params: dict, b: int) -> dict:
    """Copy unbatched parameters into B independent (leaf, requires_grad) task copies."""
    return {k: v.detach().unsqueeze(0).expand(b, *v.shape).clone().requires_grad_(True)
            for k, v in params.items()}


def policy_controls(problem: GateProblem, params: dict, features, output_scale: float):
    """Controls of B devices from batched parameters.

    Args:
        params: batched policy parameters (leading dimension B).
        features: (B, F) float64 tensor.
    Returns:
        (B, N, n_ctrl) float64 tensor.
    """
    torch = import_torch()
    h = torch.tanh(torch.einsum("bhf,bf->bh", params["W1"], features) + params["b1"])
    out = torch.einsum("boh,bh->bo", params["W2"], h) + params["b2"]
    ref = torch.as_tensor(problem.reference, dtype=torch.float64)
    return ref + output_scale * out.view(-1, problem.n_segments, problem.n_controls)


def infidelity(problem: GateProblem, tensors, u):
    """(B,) loss 1 - F_avg of controls ``u`` (B, N, n_ctrl) on devices ``tensors`` = (l_drift, ctrl_scale)."""
    l_drift, scale = tensors
    return 1.0 - fidelity_torch(problem, channel_torch(problem, l_drift, scale, u))


def adapt(problem: GateProblem, devices: DeviceBatch, params: dict, k_steps: int,
          config: MetaConfig, tensors=None) -> tuple[np.ndarray, dict]:
    """K task-specific gradient steps from ``params`` on every device.

    theta_{k+1} = theta_k - alpha grad L_tau(theta_k), alpha = config.inner_lr.

    Args:
        params: unbatched meta-initialisation.
        k_steps: K >= 0.
        tensors: precomputed ``devices.torch_tensors(problem)`` (optional).
    Returns:
        losses (K + 1, B) float64 array, L_k per device; adapted batched parameters.
    Raises:
        ValueError: k_steps < 0.
    """
    torch = import_torch()
    if not isinstance(k_steps, (int, np.integer)) or k_steps < 0:
        raise ValueError(f"k_steps: expected an integer >= 0, got {k_steps!r}")
    tensors = devices.torch_tensors(problem) if tensors is None else tensors
    feats = torch.as_tensor(devices.features, dtype=torch.float64)
    theta = batch_params(params, len(devices))
    losses = []
    for k in range(k_steps + 1):
        loss = infidelity(problem, tensors, policy_controls(problem, theta, feats, config.output_scale))
        losses.append(loss.detach().numpy().copy())
        if k == k_steps:
            break
        grads = torch.autograd.grad(loss.sum(), list(theta.values()))
        with torch.no_grad():
            theta = {n: (v - config.inner_lr * g).requires_grad_(True)
                     for (n, v), g in zip(theta.items(), grads)}
    return np.array(losses), theta


def fomaml(problem: GateProblem, family: DeviceFamily, sigma: float, config: MetaConfig,
           seed: int, progress: bool = False) -> tuple[dict, np.ndarray]:
    """Meta-train the policy with first-order MAML on devices of spread ``sigma``.

    Each outer iteration draws ``tasks_per_iter`` devices, adapts a copy of the
    parameters with ``inner_steps`` steps, and moves the shared parameters
    along the mean gradient at the adapted parameters (Adam).

    Returns:
        unbatched meta-initialisation; (meta_iters,) mean post-adaptation loss per iteration.
    """
    torch = import_torch()
    from onchip.progress import progress_bar

    rng = np.random.default_rng(seed)
    params = {k: v.requires_grad_(True) for k, v in
              init_policy(problem, family.n_features, config.hidden, seed).items()}
    opt = torch.optim.Adam(list(params.values()), lr=config.outer_lr)
    hist = []
    for _ in progress_bar(range(config.meta_iters), desc=f"FOMAML {problem.name} sigma={sigma:g}",
                  disable=not progress, leave=False):
        dev = sample_devices(family, config.tasks_per_iter, sigma, rng)
        tensors = dev.torch_tensors(problem)
        feats = torch.as_tensor(dev.features, dtype=torch.float64)
        _, theta = adapt(problem, dev, {k: v.detach() for k, v in params.items()},
                         config.inner_steps, config, tensors)
        loss = infidelity(problem, tensors, policy_controls(problem, theta, feats, config.output_scale))
        grads = torch.autograd.grad(loss.mean(), list(theta.values()))
        opt.zero_grad()
        for p, g in zip(params.values(), grads):
            p.grad = g.sum(dim=0)  # mean over tasks already in the loss; sum the per-task copies
        opt.step()
        hist.append(float(loss.detach().mean()))
    return {k: v.detach() for k, v in params.items()}, np.array(hist)


def average_policy(problem: GateProblem, family: DeviceFamily, sigma: float, steps: int,
                   n_tasks: int, lr: float, seed: int) -> np.ndarray:
    """Fixed control sequence minimising the mean infidelity over ``n_tasks`` devices (Adam).

    Returns:
        (N, n_ctrl) controls, starting from (and regularised by nothing but) the reference pulse.
    """
    torch = import_torch()
    rng = np.random.default_rng(seed)
    dev = sample_devices(family, n_tasks, sigma, rng)
    tensors = dev.torch_tensors(problem)
    u = torch.tensor(problem.reference, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([u], lr=lr)
    for _ in range(steps):
        loss = infidelity(problem, tensors, u.unsqueeze(0).expand(n_tasks, -1, -1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return u.detach().numpy()


def grape(problem: GateProblem, devices: DeviceBatch, u0: np.ndarray, steps: int, lr: float,
          tensors=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-device gradient ascent on the fidelity over the raw control amplitudes (Adam).

    Args:
        u0: (N, n_ctrl) starting controls shared by all devices.
        steps: number of ascent steps (>= 1).
    Returns:
        (B,) final infidelities and (B, N, n_ctrl) optimised controls.
    Raises:
        ValueError: steps < 1 or u0 has the wrong shape.
    """
    torch = import_torch()
    if steps < 1:
        raise ValueError(f"steps: expected >= 1, got {steps!r}")
    u0 = np.asarray(u0, float)
    if u0.shape != (problem.n_segments, problem.n_controls):
        raise ValueError(f"u0: expected shape ({problem.n_segments}, {problem.n_controls}), got {u0.shape}")
    tensors = devices.torch_tensors(problem) if tensors is None else tensors
    u = torch.tensor(np.repeat(u0[None], len(devices), axis=0), requires_grad=True)
    opt = torch.optim.Adam([u], lr=lr)
    for _ in range(steps):
        loss = infidelity(problem, tensors, u)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
    with torch.no_grad():
        final = infidelity(problem, tensors, u)
    return final.numpy(), u.detach().numpy()
