"""Quantized MLP (brevitas) with power-of-two scales, its QAT training and integer export.

Every quantizer is a brevitas *fixed-point* quantizer: the scale of each tensor
is a power of two ``2**e`` (weights: ``Int8WeightPerTensorFixedPoint``, narrow
signed; input: ``Int8ActPerTensorFixedPoint``, signed; hidden activations:
``Uint8ActPerTensorFixedPoint`` after ReLU; biases: ``Int16Bias`` at the scale
of the accumulator, ``s_in * s_w``), with the bit width overridden to 8, 4 or 2.

Two activation layouts (``QuantMLP(act=...)``):

* ``"fixed"`` (default): every hidden ReLU has the same constant format,
  ``bits`` unsigned bits at scale ``act_range / 2**bits``, and an output
  QuantIdentity quantizes the logits to that format plus a sign bit. This is
  the layout :func:`onchip.frontends.brevitas.from_brevitas` accepts (the
  learner has one ``act`` format), so the network runs unchanged on the
  golden model, the HLS C simulation and the RTL
  (:mod:`onchip.methods.unlearning.hardware`).
* ``"learned"``: each hidden ReLU learns its own power-of-two scale
  (statistics, then a parameter) and the logits are the unquantized last
  accumulator; not importable by the front end.
The network therefore maps onto a fixed-point datapath: integer matrix-vector
products, integer bias adds and arithmetic shifts with round-half-to-even
(``torch.round``) and saturation between layers. :func:`export_layers` returns
exactly those integers and exponents, and :func:`integer_forward` recomputes
the logits from them alone.

Quantization-aware training (QAT) uses brevitas' straight-through estimator:
the forward pass uses quantized weights, the gradient reaches the latent float
weights unchanged (Courbariaux et al. 2015; the setting of OEU,
arXiv:2602.00567, Sec. 3).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

BIT_WIDTHS = (8, 4, 2)
ACTIVATIONS = ("fixed", "learned")
# Range [0, ACT_RANGE) of the fixed hidden activations, +-ACT_RANGE for the
# logits: the learned layout settles on hidden ranges of 8-16 at every bit
# width (measured, digits, 15 QAT epochs); see seeds/unlearning-oeu.md.
ACT_RANGE = {8: 16.0, 4: 16.0, 2: 8.0}
# Activation scales start from runtime statistics over this many training
# batches, then become learned parameters (brevitas PARAMETER_FROM_STATS).
COLLECT_STATS_STEPS = 30


def _quantizers(act_range: float | None):
    """(input, hidden, output, weight, bias) quantizers; ``act_range`` None: learned hidden scales."""
    from brevitas.inject.enum import ScalingImplType
    from brevitas.quant import (
        Int8ActPerTensorFixedPoint,
        Int8WeightPerTensorFixedPoint,
        Int16Bias,
        Uint8ActPerTensorFixedPoint,
    )

    class InputQuant(Int8ActPerTensorFixedPoint):
        collect_stats_steps = COLLECT_STATS_STEPS

    if act_range is None:
        class HiddenQuant(Uint8ActPerTensorFixedPoint):
            collect_stats_steps = COLLECT_STATS_STEPS

        return InputQuant, HiddenQuant, None, Int8WeightPerTensorFixedPoint, Int16Bias

    # Constant power-of-two scale act_range / 2**bits for the unsigned ReLU output
    # (bits) and for the signed logits (bits + 1): one ap_fixed format for both.
    class HiddenQuant(Uint8ActPerTensorFixedPoint):
        scaling_impl_type = ScalingImplType.CONST
        scaling_const = act_range
        max_val = act_range

    class OutputQuant(Int8ActPerTensorFixedPoint):
        scaling_impl_type = ScalingImplType.CONST
        scaling_const = act_range
        max_val = act_range
        min_val = -act_range

    return InputQuant, HiddenQuant, OutputQuant, Int8WeightPerTensorFixedPoint, Int16Bias


def check_act(act: str) -> str:
    """Return ``act`` if it is one of :data:`ACTIVATIONS`, else raise ValueError naming ``--act``."""
    if act not in ACTIVATIONS:
        raise ValueError(f"--act: unknown activation layout {act!r} (choose from {', '.join(ACTIVATIONS)})")
    return act


def check_bits(bits: int) -> int:
    """Return ``bits`` if it is one of :data:`BIT_WIDTHS`, else raise ValueError naming ``--bits``."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or int(bits) not in BIT_WIDTHS:
        raise ValueError(f"--bits: {bits!r} is out of range (choose from {', '.join(map(str, BIT_WIDTHS))})")
    return int(bits)


class QuantMLP(nn.Module):
    """Fixed-point MLP: QuantIdentity -> [QuantLinear -> QuantReLU]* -> QuantLinear [-> QuantIdentity].

    Args:
        n_in: input features. n_out: classes (logits).
        hidden: widths of the hidden layers, e.g. ``(64, 32)``.
        bits: bit width of the weights and of every hidden activation (8, 4
            or 2); biases are 16-bit at the accumulator scale.
        input_bits: bit width of the input quantizer (8 by default: at 2 bits
            the standardised inputs, whose range is set by rare outliers,
            collapse to a few levels and no class is learnable).
        seed: seeds ``torch.manual_seed`` for the weight initialisation.
        act: ``"fixed"`` (shared constant hidden format ``[0, act_range)`` in
            ``bits`` unsigned bits, logits quantized to ``bits + 1`` signed bits
            at the same scale: importable by :mod:`onchip.frontends.brevitas`)
            or ``"learned"`` (per-layer learned hidden scales, float logits).
        act_range: power of two, range of the fixed layout (default
            :data:`ACT_RANGE` of ``bits``); ignored for ``"learned"``.

    Input ``(batch, n_in)`` float32 (standardised features); output
    ``(batch, n_out)`` float32 logits (``"fixed"``: the output quantizer's
    values; ``"learned"``: the last accumulator times its scale).

    Raises:
        ValueError: ``bits`` not in (8, 4, 2), a width below 1, an unknown
            ``act``, or an ``act_range`` that is not a positive power of two.
    """

    def __init__(
        self, n_in: int, n_out: int, hidden=(64, 32), bits: int = 8, input_bits: int = 8, seed: int = 0,
        act: str = "fixed", act_range: float | None = None,
    ):
        super().__init__()
        import brevitas.nn as qnn

        self.bits = check_bits(bits)
        self.input_bits = check_bits(input_bits)
        self.act = check_act(act)
        widths = [int(n_in), *[int(h) for h in hidden], int(n_out)]
        if min(widths) < 1:
            raise ValueError(f"hidden: every width must be >= 1, got {widths}")
        self.widths = tuple(widths)
        self.act_range = None
        if act == "fixed":
            r = float(ACT_RANGE[self.bits] if act_range is None else act_range)
            if not (r > 0 and math.log2(r) == round(math.log2(r))):
                raise ValueError(f"act_range: must be a positive power of two, got {act_range!r}")
            self.act_range = r
        in_q, hid_q, out_q, w_q, b_q = _quantizers(self.act_range)
        torch.manual_seed(seed)
        self.input_quant = qnn.QuantIdentity(act_quant=in_q, bit_width=self.input_bits, return_quant_tensor=True)
        self.linears = nn.ModuleList()
        self.acts = nn.ModuleList()
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            self.linears.append(
                qnn.QuantLinear(
                    a, b, bias=True, weight_quant=w_q, weight_bit_width=bits,
                    bias_quant=b_q, return_quant_tensor=False,
                )
            )
            if i < len(widths) - 2:
                self.acts.append(qnn.QuantReLU(act_quant=hid_q, bit_width=bits, return_quant_tensor=True))
        self.output_quant = None
        if out_q is not None:
            self.output_quant = qnn.QuantIdentity(act_quant=out_q, bit_width=bits + 1, return_quant_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.input_quant(x)
        for i, lin in enumerate(self.linears):
            h = lin(h)
            if i < len(self.acts):
                h = self.acts[i](h)
        if self.output_quant is not None:
            h = self.output_quant(h)
        return h

    def latent_parameters(self) -> list[nn.Parameter]:
        """The latent float weights and biases of the QuantLinear layers (what unlearning updates).

        Quantizer scale parameters are excluded, so the fixed-point formats of
        a deployed network do not change when it unlearns.
        """
        return [p for lin in self.linears for p in (lin.weight, lin.bias)]

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """:meth:`latent_parameters` grouped per QuantLinear (``[[W0, b0], [W1, b1], ...]``)."""
        return [[lin.weight, lin.bias] for lin in self.linears]

    def stats_ready(self) -> bool:
        """True once every activation quantizer has finished collecting its runtime statistics."""
        for m in self.modules():
            if hasattr(m, "collect_stats_steps") and hasattr(m, "counter"):
                if m.counter <= m.collect_stats_steps:
                    return False
        return True


def train_qat(
    model: nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 40,
    lr: float = 1e-2,
    batch_size: int = 64,
    seed: int = 0,
    progress: bool = False,
) -> nn.Module:
    """Quantization-aware training with Adam on cross-entropy; returns ``model`` (trained in place).

    ``x`` float32 ``(n, n_features)``, ``y`` int ``(n,)``. Mini-batches are
    shuffled by ``torch.Generator().manual_seed(seed)``. The number of steps is
    raised if needed so that every activation quantizer finishes its
    statistics phase (:data:`COLLECT_STATS_STEPS`).

    Raises:
        ValueError: empty data, mismatched lengths, or non-positive epochs/lr/batch size.
    """
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"train_qat: need as many labels as samples (>0), got {len(x)} and {len(y)}")
    if epochs < 1 or lr <= 0 or batch_size < 1:
        raise ValueError(f"train_qat: epochs={epochs}, lr={lr}, batch_size={batch_size} must be positive")
    from onchip.progress import progress_bar

    xt = torch.as_tensor(x, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    steps_per_epoch = math.ceil(len(xt) / batch_size)
    epochs = max(epochs, math.ceil((COLLECT_STATS_STEPS + 2) / steps_per_epoch))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in progress_bar(range(epochs), desc="QAT", disable=not progress, leave=False):
        perm = torch.randperm(len(xt), generator=gen)
        for s in range(0, len(xt), batch_size):
            idx = perm[s : s + batch_size]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    model.eval()
    return model


@torch.no_grad()
def predict_logits(model: nn.Module, x: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """Logits ``(n, n_classes)`` float64 of ``model`` in eval mode (the model's mode is restored)."""
    was_training = model.training
    model.eval()
    xt = torch.as_tensor(x, dtype=torch.float32)
    out = torch.cat([model(xt[s : s + batch_size]) for s in range(0, len(xt), batch_size)]) if len(xt) else torch.zeros(0)
    model.train(was_training)
    return out.double().numpy()


def _exponent(scale: torch.Tensor) -> int:
    s = float(scale.detach().reshape(-1)[0])
    e = math.log2(s)
    if abs(e - round(e)) > 1e-6:
        raise ValueError(f"scale {s} is not a power of two")
    return int(round(e))


def _act_format(qt) -> dict:
    bits = int(qt.bit_width)
    signed = bool(qt.signed)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return {"bits": bits, "signed": signed, "scale_exp": _exponent(qt.scale), "min": lo, "max": hi}


@torch.no_grad()
def export_layers(model: QuantMLP) -> dict:
    """The trained network as plain integers and power-of-two exponents.

    Returns ``{"input": fmt, "layers": [layer, ...]}`` where ``fmt`` describes
    the input quantizer and each ``layer`` is a dict:

    - ``weight``: int64 ``(out, in)``, weight value = ``weight * 2**weight_exp``;
      ``weight_bits``; narrow signed range ``|w| <= 2**(bits-1)-1``.
    - ``bias``: int64 ``(out,)`` at the accumulator scale
      ``2**acc_exp = 2**(in_exp + weight_exp)``, 16-bit signed.
    - ``acc_exp``: exponent of the accumulator ``W_int @ x_int + b_int``.
    - ``act``: the quantizer after the layer: ``bits``, ``signed``,
      ``scale_exp``, ``min``/``max`` integer range; its integers are (ReLU for
      hidden layers, then) ``clip(round_half_even(acc * 2**(acc_exp -
      scale_exp)), min, max)``. For the output layer it is the output
      QuantIdentity (``act="fixed"``; logits = int * 2**scale_exp) or None
      (``act="learned"``; logits = ``acc * 2**acc_exp``).

    ``fmt`` has the same keys as ``act``: ``x_int = clip(round_half_even(x *
    2**-scale_exp), min, max)``.

    Raises:
        ValueError: a scale is not a power of two.
    """
    was_training = model.training
    model.eval()
    probe = torch.zeros(1, model.widths[0])
    qt = model.input_quant(probe)
    in_fmt = _act_format(qt)
    in_exp = in_fmt["scale_exp"]
    layers = []
    h = qt
    for i, lin in enumerate(model.linears):
        qw = lin.quant_weight()
        w_exp = _exponent(qw.scale)
        acc_exp = in_exp + w_exp
        bias_bits = 16
        b_int = torch.round(lin.bias.detach() / 2.0**acc_exp)
        b_int = torch.clamp(b_int, -(2 ** (bias_bits - 1)), 2 ** (bias_bits - 1) - 1)
        layer = {
            "in_features": lin.in_features,
            "out_features": lin.out_features,
            "weight": qw.int().to(torch.int64).numpy(),
            "weight_bits": int(qw.bit_width),
            "weight_exp": w_exp,
            "bias": b_int.to(torch.int64).numpy(),
            "bias_bits": bias_bits,
            "acc_exp": acc_exp,
            "relu": i < len(model.acts),
            "act": None,
        }
        h = lin(h)
        if i < len(model.acts):
            h = model.acts[i](h)
            layer["act"] = _act_format(h)
            in_exp = layer["act"]["scale_exp"]
        elif model.output_quant is not None:
            layer["act"] = _act_format(model.output_quant.act_quant(h))
        layers.append(layer)
    model.train(was_training)
    return {"input": in_fmt, "layers": layers}


def quantize_input(exported: dict, x: np.ndarray) -> np.ndarray:
    """Integer inputs ``(n, n_in)`` int64 of the exported input quantizer:
    ``clip(round_half_even(x * 2**-scale_exp), min, max)``; ``x`` are standardised features."""
    fmt = exported["input"]
    scaled = np.asarray(x, np.float64) * 2.0 ** -fmt["scale_exp"]
    return np.clip(np.round(scaled), fmt["min"], fmt["max"]).astype(np.int64)


def integer_forward(exported: dict, x: np.ndarray) -> np.ndarray:
    """Logits ``(n, n_out)`` float64 computed from :func:`export_layers` integers only.

    Integer arithmetic in int64 (exact); a rescale by ``2**k`` followed by
    round-half-to-even is the fixed-point shift. This is an independent
    reference for the brevitas forward pass.
    """
    h = quantize_input(exported, x)
    if not exported["layers"]:
        raise ValueError("exported network has no output layer")
    for layer in exported["layers"]:
        acc = h @ layer["weight"].T + layer["bias"]
        act = layer["act"]
        if act is None:
            return acc.astype(np.float64) * 2.0 ** layer["acc_exp"]
        if layer["relu"]:
            acc = np.maximum(acc, 0)
        shifted = acc.astype(np.float64) * 2.0 ** (layer["acc_exp"] - act["scale_exp"])
        h = np.clip(np.round(shifted), act["min"], act["max"]).astype(np.int64)
    return h.astype(np.float64) * 2.0 ** exported["layers"][-1]["act"]["scale_exp"]
