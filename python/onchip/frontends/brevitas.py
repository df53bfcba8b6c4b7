"""brevitas front end: a trained fixed-point brevitas MLP -> MLP LearnerSpec + raw parameters.

Accepted networks run, in this order (any module nesting)::

    QuantIdentity -> [QuantLinear -> QuantReLU] * h -> QuantLinear -> QuantIdentity

with per-tensor power-of-two scales and zero zero-points everywhere (brevitas'
``*FixedPoint`` quantizers). The mapping onto :mod:`onchip.model.kernels` is exact:

* input QuantIdentity, signed b bits, scale 2^-f -> ``input`` = ap_fixed<b, b-f, Q, SAT>;
* hidden QuantReLU, unsigned b bits, scale 2^-f -> ``act`` = ap_fixed<b+1, b+1-f, Q, SAT>:
  its non-negative range is the ReLU quantizer's [0, 2^b - 1] and ReLU(round(z)) =
  round(ReLU(z)); all hidden ReLUs must share one format;
* the output QuantIdentity must have that same ``act`` format (signed, b+1 bits, same
  scale): the learner rounds every layer output into ``act``;
* weights (any bit width) and quantized biases become raw values of one ``coef``
  format with as many fractional bits as the finest of them; ``acc`` keeps every
  product exact, so the only rounding points are brevitas' own quantizers;
* Q is the quantizers' rounding: RoundSte (torch.round, half to even) -> RND_CONV,
  FloorSte -> TRN, RoundToZeroSte -> TRN_ZERO.

Anything else is refused with a ValueError naming the layer: a non-power-of-two or
per-channel scale, a non-zero zero-point, a narrow-range activation quantizer
(ap_fixed SAT has no symmetric range), an unquantized bias, another layer type, or an
activation without a fixed-point equivalent (Tanh, Sigmoid, ...).

Sources: brevitas (Pappalardo et al., Xilinx Research, github.com/Xilinx/brevitas,
v0.13) fixed-point quantizers; ap_fixed semantics from Xilinx UG1399.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..fixed import Fmt
from ..spec import LearnerSpec
from .exact_mlp import DenseLayer, exact_mlp_spec

_ROUNDING = {"RoundSte": "RND_CONV", "FloorSte": "TRN", "RoundToZeroSte": "TRN_ZERO"}


@dataclass(frozen=True)
class BrevitasImport:
    """A brevitas network as an onchip learner.

    Attributes:
        spec: the MLP LearnerSpec (formats derived from the quantizers).
        theta: raw initial parameters, int64 (P,), ``coef`` format, in
            :func:`onchip.model.golden.layout` order; ``GoldenLearner(spec, theta)`` accepts it.
        layer_names: module names of the accepted layers, in execution order.
    """

    spec: LearnerSpec
    theta: np.ndarray
    layer_names: tuple[str, ...]


def _exponent(name: str, scale) -> int:
    s = np.asarray(scale.detach().cpu().double()).reshape(-1)
    if s.size != 1:
        raise ValueError(f"layer {name!r}: per-channel scales ({s.size} of them) are not supported; "
                         "use a per-tensor quantizer")
    e = math.log2(float(s[0])) if s[0] > 0 else float("nan")
    if not (np.isfinite(e) and e == round(e)):
        raise ValueError(f"layer {name!r}: scale {float(s[0])!r} is not a power of two "
                         "(use a *FixedPoint quantizer)")
    return int(round(e))


def _check_zero_point(name: str, qt) -> None:
    if not bool((qt.zero_point == 0).all()):
        raise ValueError(f"layer {name!r}: non-zero zero-point is not supported (fixed point is symmetric)")


def _act_fmt(name: str, layer, qt) -> Fmt:
    """ap_fixed format of an activation quantizer output (QuantIdentity / QuantReLU)."""
    _check_zero_point(name, qt)
    e = _exponent(name, qt.scale)
    bits = int(round(float(qt.bit_width)))
    int_quant = None
    for sub_name, sub in layer.act_quant.named_modules():
        if sub_name.endswith("int_quant"):
            int_quant = sub
    if int_quant is None:
        raise ValueError(f"layer {name!r}: activation quantizer is not an integer quantizer")
    if getattr(int_quant, "narrow_range", False):
        raise ValueError(f"layer {name!r}: narrow-range activation quantizer has no ap_fixed equivalent "
                         "(SAT clamps to [-2^(b-1), 2^(b-1)-1]); use narrow_range=False")
    rounding = type(int_quant.float_to_int_impl).__name__
    if rounding not in _ROUNDING:
        raise ValueError(f"layer {name!r}: rounding {rounding} has no ap_fixed quantization mode "
                         f"(supported: {', '.join(_ROUNDING)})")
    q = _ROUNDING[rounding]
    if bool(qt.signed):
        return Fmt(bits, bits + e, True, q, "SAT")
    return Fmt(bits + 1, bits + 1 + e, True, q, "SAT")  # unsigned b bits = non-negative half of b+1


def _trace(model, n_in: int):
    """Run a probe through ``model``; return [(name, module, captured)] in execution order."""
    import torch
    from brevitas import nn as qnn

    layer_types = (qnn.QuantIdentity, qnn.QuantLinear, qnn.QuantReLU)
    calls, hooks = [], []

    def is_layer(mod) -> bool:
        return isinstance(mod, layer_types) or type(mod).__module__.startswith("brevitas.nn") \
            or not list(mod.children())

    def attach(prefix: str, mod) -> None:
        for child_name, child in mod.named_children():
            full = f"{prefix}.{child_name}" if prefix else child_name
            if not is_layer(child):
                attach(full, child)
                continue
            rec = {"name": full, "module": child}
            hooks.append(child.register_forward_hook(lambda m, i, o, rec=rec: calls.append(rec)))
            if isinstance(child, (qnn.QuantIdentity, qnn.QuantReLU)):
                hooks.append(child.act_quant.register_forward_hook(
                    lambda m, i, o, rec=rec: rec.__setitem__("act", o)))
            if isinstance(child, qnn.QuantLinear) and child.bias is not None:
                hooks.append(child.bias_quant.register_forward_hook(
                    lambda m, i, o, rec=rec: rec.__setitem__("bias", o)))

    attach("", model)
    was_training = model.training
    model.eval()
    error = None
    try:
        with torch.no_grad():
            model(torch.zeros(1, n_in))
    except Exception as exc:  # an unsupported layer can break brevitas' own forward pass
        error = exc
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    return calls, error


def from_brevitas(
    model,
    *,
    learning_rate: float = 2.0**-6,
    grad: str | Fmt = "ap_fixed<16,4,RND_CONV,SAT>",
    coef_extra_int_bits: int = 0,
    schedule: str = "sequential",
    staleness: int = 4,
    name: str = "brevitas",
) -> BrevitasImport:
    """Convert a trained brevitas MLP (see the module docstring for what is accepted).

    Args:
        model: a ``torch.nn.Module`` built from brevitas QuantIdentity / QuantLinear /
            QuantReLU layers (eval-mode quantizer state is used; the model is left in
            its original mode).
        learning_rate: copied into the spec (on-chip training after import).
        schedule: copied into the spec.
        staleness: copied into the spec.
        name: copied into the spec.
        grad: format of the errors for on-chip training (not used by inference).
        coef_extra_int_bits: integer bits added to ``coef`` as headroom for training.

    Returns:
        :class:`BrevitasImport`.

    Raises:
        ValueError: a layer that cannot be mapped exactly; the message names it.
        onchip.extras.MissingExtra: brevitas is not installed (the ``ml`` extra).
    """
    from ..extras import need

    qnn = need("brevitas.nn", "the brevitas front end")

    linears = [m for m in model.modules() if isinstance(m, qnn.QuantLinear)]
    if not linears:
        raise ValueError("model: no QuantLinear layer found")
    calls, error = _trace(model, linears[0].in_features)
    for rec in calls:
        if not isinstance(rec["module"], (qnn.QuantIdentity, qnn.QuantLinear, qnn.QuantReLU)):
            kind = type(rec["module"]).__name__
            what = ("an activation without a fixed-point equivalent" if any(
                k in kind for k in ("Tanh", "Sigmoid", "GELU", "SiLU", "Softmax", "ELU", "HardTanh", "Sin"))
                else "an unsupported layer")
            raise ValueError(f"layer {rec['name']!r} ({kind}) is {what}; accepted: QuantIdentity, "
                             "QuantLinear, QuantReLU")
    if error is not None:
        after = f" after layer {calls[-1]['name']!r}" if calls else ""
        raise ValueError(f"model: the forward pass failed{after}: {error}")
    kinds = ["I" if isinstance(r["module"], qnn.QuantIdentity) else
             "L" if isinstance(r["module"], qnn.QuantLinear) else "R" for r in calls]
    pattern = "".join(kinds)
    ok = len(pattern) >= 3 and pattern[0] == "I" and pattern[-2:] == "LI" and \
        all(pattern[k : k + 2] == "LR" for k in range(1, len(pattern) - 2, 2)) and len(pattern) % 2 == 1
    if not ok:
        names = " -> ".join(f"{r['name']} ({type(r['module']).__name__})" for r in calls)
        raise ValueError(f"model: layers run as {names}; expected QuantIdentity -> [QuantLinear -> "
                         "QuantReLU]* -> QuantLinear -> QuantIdentity")

    in_fmt = _act_fmt(calls[0]["name"], calls[0]["module"], calls[0]["act"])
    act_fmts = [(r["name"], _act_fmt(r["name"], r["module"], r["act"])) for r in calls[2:-1:2]]
    out_name = calls[-1]["name"]
    out_fmt = _act_fmt(out_name, calls[-1]["module"], calls[-1]["act"])
    if not bool(calls[0]["act"].signed):
        raise ValueError(f"layer {calls[0]['name']!r}: the input quantizer must be signed")
    act = out_fmt
    for act_name, fmt in act_fmts:
        if fmt != act:
            raise ValueError(
                f"layer {act_name!r}: activation format {fmt} differs from {act} of the output "
                f"quantizer {out_name!r} (the learner has one act format; give the hidden ReLUs one "
                "bit width and scale, and the output QuantIdentity one more bit at that scale)")

    # weights and biases: integers and exponents
    layers = []
    for rec in calls[1::2]:
        lin, lname = rec["module"], rec["name"]
        qw = lin.quant_weight()
        _check_zero_point(lname, qw)
        w_exp = _exponent(lname, qw.scale)
        w_int = qw.int().detach().cpu().numpy().astype(np.int64)
        w_bits = int(round(float(qw.bit_width)))
        if lin.bias is None:
            b_int, b_exp, b_bits = np.zeros(lin.out_features, np.int64), w_exp, w_bits
        else:
            qb = rec.get("bias")
            if qb is None or not hasattr(qb, "int"):
                raise ValueError(f"layer {lname!r}: the bias is not quantized (set bias_quant, e.g. Int16Bias)")
            _check_zero_point(lname, qb)
            b_exp = _exponent(lname, qb.scale)
            b_int = qb.int().detach().cpu().numpy().astype(np.int64).reshape(-1)
            b_bits = int(round(float(qb.bit_width)))
        layers.append((lname, w_int, w_exp, w_bits, b_int, b_exp, b_bits))

    dense = [DenseLayer(lname, np.ldexp(w_int.astype(np.float64), w_exp), np.ldexp(b_int.astype(np.float64), b_exp),
                        Fmt(w_bits, w_bits + w_exp), Fmt(b_bits, b_bits + b_exp))
             for lname, w_int, w_exp, w_bits, b_int, b_exp, b_bits in layers]
    spec, theta = exact_mlp_spec(dense, in_fmt, act, grad=grad, coef=None, coef_extra_int_bits=coef_extra_int_bits,
                                 learning_rate=learning_rate, schedule=schedule, staleness=staleness, name=name)
    names = tuple(r["name"] for r in calls)
    return BrevitasImport(spec, theta, names)


def brevitas_outputs(model, x) -> np.ndarray:
    """brevitas' own quantized outputs: the integers of the last QuantIdentity, int64 (N, n_out).

    Args:
        model: the network given to :func:`from_brevitas`.
        x: float inputs (N, n_in), used as float32 (brevitas' precision).
    """
    import torch

    x = np.asarray(x, dtype=np.float32)
    last = _trace(model, x.shape[1])[0][-1]["module"]
    captured = {}
    hook = last.act_quant.register_forward_hook(lambda m, i, o: captured.__setitem__("out", o))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.as_tensor(x))
    finally:
        model.train(was_training)
        hook.remove()
    return captured["out"].int().detach().cpu().numpy().astype(np.int64)
