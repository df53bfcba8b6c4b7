"""An MLP learner whose forward pass reproduces a quantized network exactly.

The front ends of fixed-point MLPs (:mod:`~onchip.frontends.brevitas`,
:mod:`~onchip.frontends.qkeras`) read a network's quantizers into an input and an ``act``
format and its weights and biases into exact dyadic values; :func:`exact_mlp_spec` turns those
into a :class:`~onchip.spec.LearnerSpec` and raw parameters: one ``coef`` format that holds every
weight and bias exactly (and the whole range each tensor's quantizer declares), and an ``acc``
that keeps every product and sum exact, so that the only rounding points of the learner's
forward pass are the network's own activation quantizers (:mod:`onchip.model.kernels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fixed import Fmt
from ..spec import Formats, LearnerSpec

#: widest coef format an import produces (the spec's limit for a data format)
MAX_COEF_BITS = 32
#: widest exact accumulator
MAX_ACC_BITS = 48


@dataclass(frozen=True)
class DenseLayer:
    """One dense layer of an imported network, as exact values.

    Attributes:
        name: the layer's name in the source model (named in errors).
        weight: (n_out, n_in) float64, each value exactly representable in ``weight_range``.
        bias: (n_out,) float64, exactly representable in ``bias_range``.
        weight_range: the format the weight quantizer declares (every value it can produce).
        bias_range: likewise for the bias quantizer.
    """

    name: str
    weight: np.ndarray
    bias: np.ndarray
    weight_range: Fmt
    bias_range: Fmt


def exact_mlp_spec(
    layers: list[DenseLayer],
    in_fmt: Fmt,
    act: Fmt,
    *,
    output: Fmt | None = None,
    grad: str | Fmt,
    coef: str | Fmt | None,
    coef_extra_int_bits: int,
    learning_rate: float,
    schedule: str,
    staleness: int,
    name: str,
) -> tuple[LearnerSpec, np.ndarray]:
    """The MLP spec and raw parameters that compute ``layers`` exactly.

    Args:
        layers: the dense layers in execution order; hidden layers are followed by a ReLU
            whose output format is ``act``, the last by a quantizer to ``output`` (or ``act``).
        in_fmt: the input quantizer's format.
        act: the format every hidden layer output is rounded into (and the last layer's, unless
            ``output`` is given).
        output: the format the last layer's outputs are rounded into (``formats.output``), or None:
            ``act``.
        grad: format of the errors for on-chip training.
        coef: the ``coef`` format to use (e.g. with fractional bits to spare for training);
            None: the narrowest that holds every quantizer's range, plus ``coef_extra_int_bits``.
        coef_extra_int_bits: integer bits added to the derived ``coef`` as headroom for training.
        learning_rate: copied into the spec.
        schedule: copied into the spec.
        staleness: copied into the spec.
        name: copied into the spec.

    Returns:
        ``(spec, theta)``: theta int64 (P,) in :func:`onchip.model.golden.layout` order.

    Raises:
        ValueError: a ``coef`` that cannot hold a value exactly (names the layer and the value),
            a value outside its layer's declared range (so that the returned theta always passes
            :func:`onchip.model.golden.check_parameters`), a derived ``coef`` wider than 32 bits
            or an exact accumulator wider than 48 bits.
    """
    if coef is None:
        frac = max(max(l.weight_range.frac_bits, l.bias_range.frac_bits) for l in layers)
        int_bits = max(max(l.weight_range.int_bits, l.bias_range.int_bits) for l in layers) + int(coef_extra_int_bits)
        width = int_bits + frac
        if width > MAX_COEF_BITS:
            raise ValueError(f"layer {layers[0].name!r}..{layers[-1].name!r}: weights and biases need a "
                             f"{width}-bit coef format (ap_fixed<{width},{int_bits}>), more than {MAX_COEF_BITS} bits")
        coef_fmt = Fmt(width, int_bits, True, "RND_CONV", "SAT")
    else:
        coef_fmt = Fmt.parse(coef) if isinstance(coef, str) else coef
    # every value on coef's grid and inside its range: never a theta the spec refuses
    for layer in layers:
        for what, values in (("weight", layer.weight), ("bias", layer.bias)):
            bad = [float(v) for v in values.reshape(-1) if not coef_fmt.contains(v)]
            if bad and coef is not None:
                raise ValueError(f"coef: {coef_fmt} cannot hold the {what} {bad[0]!r} of layer "
                                 f"{layer.name!r} exactly")
            if bad:  # a quantizer that produced a value outside the range its parameters declare
                rng = layer.weight_range if what == "weight" else layer.bias_range
                raise ValueError(f"layer {layer.name!r}: {what} {bad[0]!r} is not representable in {rng}, the "
                                 f"format its quantizer declares, so the derived coef {coef_fmt} cannot hold it")
    grad_fmt = Fmt.parse(grad) if isinstance(grad, str) else grad
    widths = (layers[0].weight.shape[1], *[l.weight.shape[0] for l in layers])
    fan_in = max(widths[:-1]) + 1
    data_frac = max(in_fmt.frac_bits, act.frac_bits, grad_fmt.frac_bits)
    acc_frac = coef_fmt.frac_bits + data_frac
    acc_int = coef_fmt.int_bits + max(in_fmt.int_bits, act.int_bits, grad_fmt.int_bits) + fan_in.bit_length()
    if acc_int + acc_frac > MAX_ACC_BITS:
        raise ValueError(f"model: an exact accumulator needs {acc_int + acc_frac} bits (at most {MAX_ACC_BITS})")
    formats = Formats(input=in_fmt, coef=coef_fmt, act=act, grad=grad_fmt,
                      acc=Fmt(acc_int + acc_frac, acc_int, True, "TRN", "WRAP"), output=output)
    # init_scale 0: the parameters are the network's (theta), never a random draw
    spec = LearnerSpec(kind="mlp", widths=widths, formats=formats, learning_rate=learning_rate,
                       schedule=schedule, staleness=staleness, init_scale=0.0, name=name)
    parts = []
    for layer in layers:
        parts += [layer.weight.reshape(-1), layer.bias.reshape(-1)]
    values = np.concatenate(parts)
    theta = np.round(np.ldexp(values, coef_fmt.frac_bits)).astype(np.int64)
    return spec, theta
