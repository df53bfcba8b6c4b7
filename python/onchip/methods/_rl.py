"""Reinforcement-learning pieces shared by the seed methods: IQL (offline RL with an expectile value
and an advantage-weighted actor) and GRPO (group-relative policy optimisation).

- IQL: Kostrikov, Nair, Levine, "Offline Reinforcement Learning with Implicit Q-Learning",
  ICLR 2022 (arXiv 2110.06169), eqs. 5-7; used by ``onchip multi2`` (Multi^2 trains its
  low-level agent with it, offline and then online).
- GRPO: Shao et al., "DeepSeekMath", arXiv 2402.03300, sec. 4.1 (group-normalised outcome
  advantages, PPO clipped ratio); used by ``onchip seg-research``.

Discrete actions only (every method here has a finite action set). Functions import torch lazily.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._torch import import_torch

# ------------------------------------------------------------------ IQL


def expectile_loss(diff, tau: float):
    """Asymmetric squared loss of IQL (Kostrikov et al. 2022, eq. 5): ``mean(|tau - 1[u < 0]| u^2)``.

    Minimising ``E[L(q - v)]`` over ``v`` gives the ``tau``-expectile of ``q``; ``tau = 0.5`` is the
    mean, ``tau -> 1`` the maximum over the data's support.

    Args:
        diff: tensor ``u = Q(s, a) - V(s)`` (any shape).
        tau: expectile in (0, 1).

    Returns:
        Scalar tensor.

    Raises:
        ValueError: ``tau`` outside (0, 1).
    """
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau: must be in (0, 1), got {tau!r}")
    torch = import_torch()
    weight = torch.where(diff < 0, 1.0 - tau, tau)
    return (weight * diff.pow(2)).mean()


def expectile(values, tau: float, weights=None, *, iters: int = 200) -> float:
    """The ``tau``-expectile of a discrete distribution (bisection on the first-order condition
    ``tau * E[(x - m)+] = (1 - tau) * E[(m - x)+]``): the exact answer IQL's value regresses to.

    Args:
        values: the support (1-D).
        tau: expectile in (0, 1).
        weights: probabilities (default uniform).
    """
    x = np.asarray(values, float)
    w = np.full(x.size, 1.0 / x.size) if weights is None else np.asarray(weights, float) / np.sum(weights)
    lo, hi = float(x.min()), float(x.max())
    for _ in range(iters):
        m = 0.5 * (lo + hi)
        g = tau * np.sum(w * np.maximum(x - m, 0)) - (1 - tau) * np.sum(w * np.maximum(m - x, 0))
        lo, hi = (m, hi) if g > 0 else (lo, m)
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class IQLConfig:
    """IQL hyper-parameters (defaults: Multi^2's public code: tau 0.7, beta 5, soft target 0.01).

    Attributes:
        gamma: discount.
        tau: expectile of the value regression.
        beta: inverse temperature of the advantage-weighted actor, ``w = exp(beta * A)``.
        max_weight: clip of ``w`` (IQL's 100).
        target_rate: Polyak rate of the target Q network.
        lr: Adam learning rate of all three networks.
    """

    gamma: float = 0.95
    tau: float = 0.7
    beta: float = 5.0
    max_weight: float = 100.0
    target_rate: float = 0.01
    lr: float = 1e-3

    def __post_init__(self):
        for name, ok in (("gamma", 0 <= self.gamma <= 1), ("tau", 0 < self.tau < 1), ("beta", self.beta >= 0),
                         ("max_weight", self.max_weight > 0), ("target_rate", 0 < self.target_rate <= 1),
                         ("lr", self.lr > 0)):
            if not ok:
                raise ValueError(f"{name}: out of range, got {getattr(self, name)!r}")


class IQL:
    """Implicit Q-learning for discrete actions (Kostrikov et al. 2022, Algorithm 1).

    Three networks over the same state features: ``q(s) -> (n, A)`` Q-values (with a Polyak
    target copy), ``v(s) -> (n, 1)`` state value, ``actor(s) -> (n, A)`` logits. One
    :meth:`update` on a batch ``(s, a, r, s2, done)``:

    - value: ``L_V = expectile_loss(Q_target(s, a) - V(s), tau)`` (eq. 5);
    - Q: ``L_Q = (r + gamma (1 - done) V(s2) - Q(s, a))^2`` (eq. 6);
    - actor: ``L_pi = -min(exp(beta (Q_target(s, a) - V(s))), max_weight) log pi(a | s)`` (eq. 7).

    Args:
        q, v, actor: torch modules as above (the actor may come pre-trained, e.g. from a BC warm-up).
        config: :class:`IQLConfig`.
    """

    def __init__(self, q, v, actor, config: IQLConfig = IQLConfig()):
        torch = import_torch()
        self.q, self.v, self.actor, self.config = q, v, actor, config
        self.q_target = copy.deepcopy(q).requires_grad_(False)
        self.opt_q = torch.optim.Adam(q.parameters(), lr=config.lr, foreach=True)
        self.opt_v = torch.optim.Adam(v.parameters(), lr=config.lr, foreach=True)
        self.opt_pi = torch.optim.Adam(actor.parameters(), lr=config.lr, foreach=True)

    def update(self, s, a, r, s2, done, *, train_actor: bool = True) -> dict:
        """One gradient step of V, Q (and the actor); returns the three losses as floats.

        Args:
            s, s2: float tensors ``(n, ...)`` (whatever the networks take).
            a: int64 ``(n,)`` actions; r, done: float ``(n,)``.
            train_actor: False updates only the critics.
        """
        torch = import_torch()
        c = self.config
        with torch.no_grad():
            q_t = self.q_target(s).gather(1, a[:, None]).squeeze(1)
        v = self.v(s).squeeze(-1)
        loss_v = expectile_loss(q_t - v, c.tau)
        self.opt_v.zero_grad()
        loss_v.backward()
        self.opt_v.step()

        with torch.no_grad():
            target = r + c.gamma * (1.0 - done) * self.v(s2).squeeze(-1)
        q = self.q(s).gather(1, a[:, None]).squeeze(1)
        loss_q = (q - target).pow(2).mean()
        self.opt_q.zero_grad()
        loss_q.backward()
        self.opt_q.step()
        with torch.no_grad():
            for p, pt in zip(self.q.parameters(), self.q_target.parameters()):
                pt.mul_(1 - c.target_rate).add_(c.target_rate * p)

        loss_pi = torch.zeros(())
        if train_actor:
            with torch.no_grad():
                adv = q_t - self.v(s).squeeze(-1)
                w = awr_weights(adv, c.beta, c.max_weight)
            logp = torch.log_softmax(self.actor(s), -1).gather(1, a[:, None]).squeeze(1)
            loss_pi = -(w * logp).mean()
            self.opt_pi.zero_grad()
            loss_pi.backward()
            self.opt_pi.step()
        return {"value": float(loss_v.detach()), "q": float(loss_q.detach()), "actor": float(loss_pi.detach())}


def awr_weights(advantage, beta: float, max_weight: float = 100.0):
    """Advantage weights ``min(exp(beta * A), max_weight)`` of the IQL / AWR actor (eq. 7)."""
    torch = import_torch()
    return torch.exp(beta * advantage).clamp(max=max_weight)


#: activations :func:`mlp` accepts, by name (the ``torch.nn`` module classes)
ACTIVATIONS = {"relu": "ReLU", "tanh": "Tanh", "gelu": "GELU", "silu": "SiLU"}


def mlp(n_in: int, n_out: int, hidden: int = 128, layers: int = 2, *, activation: str = "relu",
        out_activation: str | None = None):
    """A multilayer perceptron ``(n, n_in) -> (n, n_out)``: ``layers`` hidden ``Linear`` layers of width
    ``hidden``, each followed by ``activation``, then a ``Linear`` output layer (followed by
    ``out_activation`` when given), as one ``torch.nn.Sequential`` (layers in that order, so a given
    torch seed gives the same weights as the same layers written out by hand).

    Args:
        n_in, n_out: input and output widths (>= 1).
        hidden: width of every hidden layer (>= 1).
        layers: number of hidden layers (>= 0; 0 is one ``Linear`` layer).
        activation, out_activation: names from :data:`ACTIVATIONS`.

    Raises:
        ValueError: a width or count out of range, or an unknown activation (named in the message).
    """
    for name, value, lo in (("n_in", n_in, 1), ("n_out", n_out, 1), ("hidden", hidden, 1), ("layers", layers, 0)):
        if int(value) < lo:
            raise ValueError(f"{name}: must be >= {lo}, got {value!r}")
    for name, value in (("activation", activation), ("out_activation", out_activation)):
        if value is not None and value not in ACTIVATIONS:
            raise ValueError(f"{name}: must be one of {', '.join(ACTIVATIONS)}, got {value!r}")
    nn = import_torch().nn
    mods, d = [], n_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), getattr(nn, ACTIVATIONS[activation])()]
        d = hidden
    mods.append(nn.Linear(d, n_out))
    if out_activation is not None:
        mods.append(getattr(nn, ACTIVATIONS[out_activation])())
    return nn.Sequential(*mods)


# ------------------------------------------------------------------ GRPO


def group_advantages(rewards, eps: float = 1e-6):
    """GRPO's outcome advantages (Shao et al. 2024, sec. 4.1.2): each reward normalised within its
    group, ``(r - mean(group)) / (std(group) + eps)`` (population std); a group of equal rewards
    gets zeros.

    Args:
        rewards: array ``(n_groups, group_size)``.

    Returns:
        numpy array of the same shape.

    Raises:
        ValueError: not a 2-D array or a group of size < 2.
    """
    r = np.asarray(rewards, float)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError(f"rewards: need shape (n_groups, group_size >= 2), got {r.shape}")
    return (r - r.mean(1, keepdims=True)) / (r.std(1, keepdims=True) + eps)


def grpo_loss(logp_new, logp_old, advantages, *, clip: float = 0.2):
    """PPO-clipped surrogate with group-relative advantages (no KL term, as in DAPO):
    ``-mean(min(rho A, clip(rho, 1 - clip, 1 + clip) A))``, ``rho = exp(logp_new - logp_old)``.

    Args:
        logp_new: tensor ``(n,)`` log-probabilities of each rollout's decisions under the current policy.
        logp_old: tensor ``(n,)`` the same under the policy that sampled them (no gradient).
        advantages: tensor ``(n,)`` from :func:`group_advantages`.
        clip: the ratio's clip range.
    """
    torch = import_torch()
    rho = torch.exp(logp_new - logp_old.detach())
    return -torch.min(rho * advantages, rho.clamp(1 - clip, 1 + clip) * advantages).mean()


def batches_from(arrays: dict, batch: int) -> Callable[[np.random.Generator], dict]:
    """Uniform mini-batches (with replacement) of a dict of equal-length arrays."""
    n = len(next(iter(arrays.values())))

    def draw(rng: np.random.Generator) -> dict:
        idx = rng.integers(0, n, batch)
        return {k: v[idx] for k, v in arrays.items()}

    return draw
