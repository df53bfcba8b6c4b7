"""Orthogonal Entropy Unlearning (OEU) and the baselines it is compared with.

OEU (Zhang et al., "Forget by Uncertainty: Orthogonal Entropy Unlearning for
Quantized Neural Networks", ICML 2026, arXiv:2602.00567, Sec. 3-4) has two parts:

1. *Entropy-guided forgetting*: instead of training the forget set toward wrong
   labels, maximise the predictive entropy ``H(p) = -sum_c p_c log p_c`` of the
   model on it (loss ``L_f = -mean H``), so forgotten samples end up uncertain
   rather than confidently misclassified.
2. *Orthogonal projection*: the forget gradient ``g_f`` is projected onto the
   orthogonal complement of the retain gradient ``g_r``,
   ``g_f' = g_f - (g_f . g_r / |g_r|^2) g_r``, so that a step ``-lr g_f'``
   changes the retain loss by ``-lr g_r . g_f' = 0`` to first order.

The update acts on the latent float weights of the quantized network; the
quantizers pass the gradient through unchanged (straight-through estimator),
so the guarantee holds for the STE surrogate, not for the rounded network.

Choices the paper leaves open are fields of :class:`UnlearnConfig`:

- ``projection``: ``"global"`` (one projection over the concatenation of all
  weights and biases), ``"layer"`` (one projection per QuantLinear; each
  layer's dot product is zero, so the global one is zero too) or ``"none"``
  (the ``oeu-noproj`` ablation).
- ``project_when``: ``"always"``, or ``"conflict"`` (only when
  ``g_f . g_r < 0``, i.e. when the forget step would raise the retain loss;
  the PCGrad rule of Yu et al. 2020).
- ``retain_weight`` ``lambda``: the step direction is ``g_f' + lambda g_r``
  (``lambda = 0``: pure projected forgetting).

Plain SGD without momentum applies the direction, because any per-coordinate
rescaling (Adam, momentum) would break the orthogonality of the step.

Baselines (same harness, same optimizer, the same number of gradient evaluations,
:func:`gradient_budget`):
``retrain`` (QAT from scratch on the retain set: the gold standard),
``finetune`` (SGD on the retain set; Warnecke et al. 2023 / "FT"),
``gradascent`` (gradient ascent on the forget-set cross-entropy; Thudi et al. 2022 / "GA"),
``relabel`` (random wrong labels on the forget set plus ``lambda`` times the
retain loss; Golatkar et al. 2020 / Graves et al. 2021 / "RL"),
``oeu-noproj`` (OEU with ``projection="none"``).
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
from torch import nn

from .data import Split
from .models import QuantMLP, train_qat

METHODS = ("oeu", "oeu-noproj", "retrain", "finetune", "gradascent", "relabel")
PROJECTIONS = ("global", "layer", "none")
PROJECT_WHEN = ("always", "conflict")


@dataclass(frozen=True)
class UnlearnConfig:
    """Hyper-parameters shared by all methods.

    Attributes:
        epochs: passes over the forget set (batches of ``batch_size``); every
            unlearning arm spends the same number of gradient evaluations,
            :func:`gradient_budget` (fine-tuning and gradient ascent, one gradient
            per step, take twice the steps).
        lr: SGD learning rate on the latent weights.
        batch_size: forget-set batch size.
        retain_batch_size: retain batch drawn (with the run's generator) at
            every step for ``g_r``.
        retain_weight: ``lambda`` in ``g_f' + lambda g_r`` (OEU, OEU-noproj, relabel).
        projection: ``"global"``, ``"layer"`` or ``"none"`` (OEU only).
        project_when: ``"always"`` or ``"conflict"`` (OEU only).
        train_epochs, train_lr, train_batch_size: QAT recipe of the original
            and of the retrained model (Adam).

    Raises:
        ValueError: a field out of range (named in the message).
    """

    epochs: int = 10
    lr: float = 0.5
    batch_size: int = 32
    retain_batch_size: int = 128
    retain_weight: float = 1.0
    projection: str = "global"
    project_when: str = "always"
    train_epochs: int = 40
    train_lr: float = 1e-2
    train_batch_size: int = 64

    def __post_init__(self):
        for name in ("epochs", "batch_size", "retain_batch_size", "train_epochs", "train_batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)!r}")
        for name in ("lr", "train_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)!r}")
        if not self.retain_weight >= 0:
            raise ValueError(f"retain_weight: must be >= 0, got {self.retain_weight!r}")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection: {self.projection!r} not in {PROJECTIONS}")
        if self.project_when not in PROJECT_WHEN:
            raise ValueError(f"project_when: {self.project_when!r} not in {PROJECT_WHEN}")

    def as_dict(self) -> dict:
        """The fields as a plain dict (for metrics.json)."""
        return asdict(self)


def predictive_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Per-sample entropy ``-sum_c p_c log p_c`` in nats, ``(batch,)``, of ``softmax(logits)``."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def entropy_forget_loss(logits: torch.Tensor) -> torch.Tensor:
    """OEU forget loss ``-mean H(softmax(logits))`` (arXiv:2602.00567, Sec. 3.1); minimising it maximises entropy."""
    return -predictive_entropy(logits).mean()


def _dot(a: list[torch.Tensor], b: list[torch.Tensor]) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b))


def project_orthogonal(
    g_forget: list[torch.Tensor],
    g_retain: list[torch.Tensor],
    groups: list[list[int]] | None = None,
    when: str = "always",
    eps: float = 1e-20,
) -> list[torch.Tensor]:
    """Remove from ``g_forget`` its component along ``g_retain`` (arXiv:2602.00567, Sec. 3.2).

    ``g_forget`` and ``g_retain`` are lists of tensors with matching shapes
    (one per parameter). ``groups`` partitions the parameter indices; each
    group is projected on its own (``None``: one group with every parameter).
    With ``when="conflict"`` a group is projected only if its dot product is
    negative. A group whose retain gradient has squared norm below ``eps`` is
    left unchanged. Returns new tensors; the inputs are not modified.

    Raises:
        ValueError: mismatched lengths/shapes, ``groups`` not a partition, or bad ``when``.
    """
    if when not in PROJECT_WHEN:
        raise ValueError(f"project_when: {when!r} not in {PROJECT_WHEN}")
    if len(g_forget) != len(g_retain) or any(a.shape != b.shape for a, b in zip(g_forget, g_retain)):
        raise ValueError("project_orthogonal: forget and retain gradients must have matching shapes")
    if groups is None:
        groups = [list(range(len(g_forget)))]
    if sorted(i for g in groups for i in g) != list(range(len(g_forget))):
        raise ValueError(f"groups: {groups} is not a partition of 0..{len(g_forget) - 1}")
    out = [g.clone() for g in g_forget]
    for group in groups:
        gf = [g_forget[i] for i in group]
        gr = [g_retain[i] for i in group]
        dot = _dot(gf, gr)
        norm2 = _dot(gr, gr)
        if norm2 < eps or (when == "conflict" and dot >= 0):
            continue
        coef = dot / norm2
        for i in group:
            out[i] = g_forget[i] - coef * g_retain[i]
    return out


def _grads(loss: torch.Tensor, params: list[nn.Parameter]) -> list[torch.Tensor]:
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def _param_groups(model: nn.Module) -> tuple[list[nn.Parameter], list[list[int]]]:
    if isinstance(model, QuantMLP):
        layers = model.layer_groups()
    else:  # any torch MLP: one group per module owning parameters directly
        layers = [list(m.parameters(recurse=False)) for m in model.modules() if list(m.parameters(recurse=False))]
    params, groups = [], []
    for layer in layers:
        groups.append(list(range(len(params), len(params) + len(layer))))
        params.extend(layer)
    return params, groups


def oeu_direction(
    model: nn.Module,
    x_forget: torch.Tensor,
    x_retain: torch.Tensor,
    y_retain: torch.Tensor,
    config: UnlearnConfig,
    forget_loss=entropy_forget_loss,
) -> tuple[list[nn.Parameter], list[torch.Tensor], dict]:
    """One OEU descent direction ``d = P(g_f) + lambda g_r`` over the latent weights.

    ``x_forget`` ``(bf, n_in)``, ``x_retain`` ``(br, n_in)``, ``y_retain``
    ``(br,)``. ``g_f`` is the gradient of ``forget_loss(model(x_forget))``,
    ``g_r`` that of the retain cross-entropy, ``P`` the projection chosen by
    ``config.projection``/``config.project_when``. The step is ``theta -= lr d``.
    Returns ``(params, d, info)`` with ``info`` holding the cosine between
    ``g_f`` and ``g_r`` before projection.
    """
    params, groups = _param_groups(model)
    g_f = _grads(forget_loss(model(x_forget)), params)
    g_r = _grads(nn.functional.cross_entropy(model(x_retain), y_retain), params)
    dot, nf, nr = _dot(g_f, g_r), _dot(g_f, g_f).sqrt(), _dot(g_r, g_r).sqrt()
    cos = float(dot / (nf * nr)) if nf > 0 and nr > 0 else 0.0
    if config.projection == "global":
        g_f = project_orthogonal(g_f, g_r, None, config.project_when)
    elif config.projection == "layer":
        g_f = project_orthogonal(g_f, g_r, groups, config.project_when)
    d = [a + config.retain_weight * b for a, b in zip(g_f, g_r)]
    return params, d, {"cos_forget_retain": cos}


@torch.no_grad()
def _sgd_step(params: list[nn.Parameter], direction: list[torch.Tensor], lr: float) -> None:
    for p, d in zip(params, direction):
        p.sub_(lr * d)


def _forget_batches(n_forget: int, config: UnlearnConfig, gen: torch.Generator):
    for _ in range(config.epochs):
        perm = torch.randperm(n_forget, generator=gen)
        for s in range(0, n_forget, config.batch_size):
            yield perm[s : s + config.batch_size]


def _n_steps(n_forget: int, config: UnlearnConfig) -> int:
    return config.epochs * -(-n_forget // config.batch_size)


def gradient_budget(n_forget: int, config: UnlearnConfig) -> int:
    """Gradient evaluations (one forward and backward pass over one batch) every unlearning arm gets.

    The forget-descent arms (OEU, OEU-noproj, relabel) take ``config.epochs`` passes over the
    forget set in batches of ``config.batch_size`` and evaluate two gradients per step (forget
    batch and retain batch of ``config.retain_batch_size``): ``2 * epochs * ceil(n_forget /
    batch_size)``. Fine-tuning and gradient ascent evaluate one gradient per step, so they take
    twice as many steps and spend the same number (retrain, the reference, is full QAT and is not
    held to it).

    Args:
        n_forget: forget-set size (>= 1).
        config: the unlearning hyper-parameters.

    Returns:
        The number of gradient evaluations per arm.
    """
    return 2 * _n_steps(n_forget, config)


def model_fingerprint(model: nn.Module) -> str:
    """SHA-256 (hex, first 16 characters) of a model's parameters and buffers, in ``state_dict`` order:
    which model an arm started from (two arms of one seed must show the original's)."""
    import hashlib

    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _retain_batch(n_retain: int, config: UnlearnConfig, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(n_retain, (min(config.retain_batch_size, n_retain),), generator=gen)


def _tensors(split: Split):
    xf = torch.as_tensor(split.x_train[split.forget])
    yf = torch.as_tensor(split.y_train[split.forget])
    xr = torch.as_tensor(split.x_train[split.retain])
    yr = torch.as_tensor(split.y_train[split.retain])
    return xf, yf, xr, yr


def _forget_descent(model, split, config, seed, forget_loss, projection):
    """Shared loop of OEU, OEU-noproj and relabel: SGD on ``P(g_f) + lambda g_r``."""
    cfg = replace(config, projection=projection)
    xf, _, xr, yr = _tensors(split)
    gen = torch.Generator().manual_seed(seed)
    cosines = []
    model.train()
    for idx in _forget_batches(len(xf), cfg, gen):
        ridx = _retain_batch(len(xr), cfg, gen)
        params, d, info = oeu_direction(model, xf[idx], xr[ridx], yr[ridx], cfg, lambda lg, _i=idx: forget_loss(lg, _i))
        _sgd_step(params, d, cfg.lr)
        cosines.append(info["cos_forget_retain"])
    model.eval()
    return {"steps": len(cosines), "grad_evals": 2 * len(cosines),
            "mean_cos_forget_retain": float(np.mean(cosines)) if cosines else 0.0}


def _oeu(model, split, config, seed, projection):
    return _forget_descent(model, split, config, seed, lambda lg, _i: entropy_forget_loss(lg), projection)


def _relabel(model, split, config, seed):
    _, yf, _, _ = _tensors(split)
    rng = np.random.default_rng(seed)
    # a uniformly drawn wrong label per forget sample, fixed for the whole run
    shift = torch.as_tensor(rng.integers(1, split.n_classes, size=len(yf)))
    wrong = (yf + shift) % split.n_classes
    return _forget_descent(
        model, split, config, seed,
        lambda lg, idx: nn.functional.cross_entropy(lg, wrong[idx]), "none",
    )


def _gradascent(model, split, config, seed):
    xf, yf, _, _ = _tensors(split)
    params, _ = _param_groups(model)
    gen = torch.Generator().manual_seed(seed)
    steps = 0
    model.train()
    # one gradient per step: twice the passes of the forget-descent arms, the same gradient budget
    for idx in _forget_batches(len(xf), replace(config, epochs=2 * config.epochs), gen):
        g = _grads(-nn.functional.cross_entropy(model(xf[idx]), yf[idx]), params)
        _sgd_step(params, g, config.lr)
        steps += 1
    model.eval()
    return {"steps": steps, "grad_evals": steps}


def _finetune(model, split, config, seed):
    xf, _, xr, yr = _tensors(split)
    params, _ = _param_groups(model)
    gen = torch.Generator().manual_seed(seed)
    steps = gradient_budget(len(xf), config)  # one gradient per step: the same budget as OEU
    model.train()
    for _ in range(steps):
        ridx = _retain_batch(len(xr), config, gen)
        g = _grads(nn.functional.cross_entropy(model(xr[ridx]), yr[ridx]), params)
        _sgd_step(params, g, config.lr)
    model.eval()
    return {"steps": steps, "grad_evals": steps}


def build_model(split: Split, bits: int, hidden=(64, 32), seed: int = 0, act: str = "fixed") -> QuantMLP:
    """An untrained :class:`QuantMLP` sized for ``split`` (input features -> classes);
    ``act``: activation layout, ``"fixed"`` (front-end compatible) or ``"learned"``."""
    return QuantMLP(split.x_train.shape[1], split.n_classes, hidden=hidden, bits=bits, seed=seed, act=act)


def train_original(
    split: Split, bits: int, config: UnlearnConfig, hidden=(64, 32), seed: int = 0, act: str = "fixed"
) -> QuantMLP:
    """The model to unlearn from: QAT on the whole training set (forget and retain)."""
    model = build_model(split, bits, hidden, seed, act)
    return train_qat(
        model, split.x_train, split.y_train, epochs=config.train_epochs,
        lr=config.train_lr, batch_size=config.train_batch_size, seed=seed,
    )


def retrain(
    split: Split, bits: int, config: UnlearnConfig, hidden=(64, 32), seed: int = 0, act: str = "fixed"
) -> QuantMLP:
    """Gold standard: the same QAT recipe from scratch on the retain set only.

    Only ``split.x_train[split.retain]`` and its labels reach the training
    loop; the forget samples are never read.
    """
    model = build_model(split, bits, hidden, seed, act)
    return train_qat(
        model, split.x_train[split.retain], split.y_train[split.retain],
        epochs=config.train_epochs, lr=config.train_lr,
        batch_size=config.train_batch_size, seed=seed,
    )


def unlearn(
    method: str,
    original: nn.Module,
    split: Split,
    config: UnlearnConfig,
    *,
    bits: int | None = None,
    hidden=(64, 32),
    seed: int = 0,
) -> tuple[nn.Module, dict]:
    """Apply ``method`` to a copy of ``original``; returns ``(model, info)``.

    ``original`` is never modified. ``info`` holds ``wall_s`` (seconds of the
    unlearning itself; for ``retrain`` the whole training) and method details.
    ``bits``/``hidden`` are only used by ``retrain`` (default: those of
    ``original``, whose activation layout it also copies).

    Raises:
        ValueError: unknown ``method``.
    """
    if method not in METHODS:
        raise ValueError(f"--method: unknown method {method!r} (choose from {', '.join(METHODS)}, all)")
    t0 = time.perf_counter()
    if method == "retrain":
        bits = bits if bits is not None else original.bits
        hidden = tuple(original.widths[1:-1]) if isinstance(original, QuantMLP) else hidden
        act = original.act if isinstance(original, QuantMLP) else "fixed"
        model, info = retrain(split, bits, config, hidden, seed, act), {}
    else:
        model = copy.deepcopy(original)
        if method == "oeu":
            info = _oeu(model, split, config, seed, config.projection)
        elif method == "oeu-noproj":
            info = _oeu(model, split, config, seed, "none")
        elif method == "finetune":
            info = _finetune(model, split, config, seed)
        elif method == "gradascent":
            info = _gradascent(model, split, config, seed)
        else:
            info = _relabel(model, split, config, seed)
    info["wall_s"] = time.perf_counter() - t0
    return model, info
