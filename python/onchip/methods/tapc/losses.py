"""DPO losses on implicit reward margins and the task-conditioned calibration map.

Notation (Rafailov et al. 2023, eq. 7): for a pair (x, y_w, y_l) the implicit reward margin is
``h = [log pi(y_w|x) - log pi_ref(y_w|x)] - [log pi(y_l|x) - log pi_ref(y_l|x)]`` (nats) and
``l(z) = -log sigmoid(z)``. All functions take tensors of shape ``(n,)`` and return the mean loss.
"""

from __future__ import annotations

from .._torch import import_torch


def margin(pol_w, pol_l, ref_w, ref_l):
    """Implicit reward margin ``h`` ``(n,)`` from summed answer log-probabilities ``(n,)`` of the policy and
    the reference for the chosen (w) and rejected (l) answers."""
    return (pol_w - ref_w) - (pol_l - ref_l)


def dpo_loss(h, beta: float):
    """DPO: ``mean l(beta h)`` (Rafailov et al. 2023, eq. 7)."""
    F = import_torch().nn.functional
    return -F.logsigmoid(beta * h).mean()


def soft_dpo_loss(h, c, beta: float):
    """Soft-label DPO: ``mean -[c log sigmoid(beta h) + (1 - c) log sigmoid(-beta h)]`` with the confidence
    ``c`` ``(n,)`` in [0, 1] that the chosen answer is really better; ``c = 1`` is :func:`dpo_loss`."""
    F = import_torch().nn.functional
    return -(c * F.logsigmoid(beta * h) + (1 - c) * F.logsigmoid(-beta * h)).mean()


def cdpo_loss(h, beta: float, eps):
    """Conservative DPO (label smoothing; Mitchell 2023): :func:`soft_dpo_loss` with ``c = 1 - eps``
    (``eps`` a number, or one per pair ``(n,)``: 0 for pairs known to be right)."""
    torch = import_torch()
    return soft_dpo_loss(h, 1.0 - torch.as_tensor(eps, dtype=h.dtype).expand_as(h), beta)


def rdpo_loss(h, beta: float, eps):
    """Robust DPO (Chowdhury et al. 2024, "Provably robust DPO", eq. 8): the unbiased loss under a
    known flip rate ``eps`` < 1/2, ``mean [(1 - eps) l(beta h) - eps l(-beta h)] / (1 - 2 eps)``;
    its expectation over random flips equals the clean :func:`dpo_loss`.

    Args:
        h: margins ``(n,)``.
        beta: DPO temperature.
        eps: the flip rate: a number, or one per pair ``(n,)`` (0 for pairs known to be right).

    Raises:
        ValueError: ``eps`` not in [0, 0.5).
    """
    torch = import_torch()
    e = torch.as_tensor(eps, dtype=h.dtype)
    if not (0 <= float(e.min()) and float(e.max()) < 0.5):
        raise ValueError(f"eps: must be in [0, 0.5), got {eps!r}")
    F = torch.nn.functional
    return ((-(1 - e) * F.logsigmoid(beta * h) + e * F.logsigmoid(-beta * h)) / (1 - 2 * e)).mean()


def calibrated_confidence(d, task_features, weight, bias):
    """TAPC's calibration map ``c = sigmoid(a(t) d + b(t))`` with ``[a(t), b(t)] = task_features @ weight + bias``.

    Args:
        d: perplexity differentials ``(n,)`` (nats per token, rejected minus chosen).
        task_features: task-encoder output per prompt ``(n, k)``; a column of ones for the uniform
            calibration (one slope and bias), one-hot task labels for the oracle.
        weight: ``(k, 2)``; bias: ``(2,)``.

    Returns:
        Confidences ``(n,)`` in (0, 1).
    """
    torch = import_torch()
    ab = task_features @ weight + bias
    return torch.sigmoid(ab[:, 0] * d + ab[:, 1])
