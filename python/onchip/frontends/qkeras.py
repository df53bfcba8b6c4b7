"""QKeras front end: a trained QKeras MLP -> MLP LearnerSpec + raw parameters.

Accepted networks (``Sequential`` or a functional chain, one input, one output) run::

    [QActivation(quantized_bits)] -> [QDense -> quantized_relu | relu] * h -> QDense [-> quantized_bits]

where a QDense's activation is its own ``activation=`` argument or the layer after it; layers
that are the identity at inference (``Dropout``, ``Activation("linear")``, ...) are skipped.
Without an input quantizer the ``input`` format is given (``input_format``) or derived from
data, and the learner equals QKeras on inputs on its grid. The learner rounds every hidden layer
output into one ``act`` format: a hidden quantizer fixes it; an unquantized ReLU must be held
exactly in it (interval bounds of each sum over the inputs' ranges, on the sum's exact grid); with
no quantizer after any layer, ``act`` is the narrowest format holding them all (at most 32 bits).
The last layer's outputs go into the learner's output format (``formats.output``): the output
quantizer's, or for an unquantized output the exact format of the last layer's sum (no rounding:
the tutorial form, hidden quantized ReLUs and no output quantizer, is exact), or ``output_format``
when given, which rounds: not exact, and :func:`rounded_output_error` measures how far the learner
is from QKeras' own output (the import report states it first, as a warning).
Kernels and biases have ``quantized_bits`` quantizers whose scale is a power of two
(``alpha`` None, 1, another power of two, or ``"auto_po2"``, resolved per output channel from the
trained kernel); a QDense without bias has zero biases.

The mapping, read from QKeras 0.9.0's ``quantizers.py``:

* ``quantized_bits(b, i, keep_negative=True)`` computes ``clip(round(x * 2^F), -2^(b-1),
  2^(b-1) - 1) * 2^-F`` with ``F = b - 1 - i`` and ``round = tf.round`` (half to even): that is
  ``ap_fixed<b, i+1, RND_CONV, SAT>`` (QKeras' ``integer`` excludes the sign bit, ap_fixed's
  I includes it). It gives the ``input`` format and the output format.
* ``quantized_relu(b, i)`` computes ``clip(round(x * 2^F), 0, 2^b - 1) * 2^-F`` with
  ``F = b - i``: ReLU of ``ap_fixed<b+1, i+1, RND_CONV, SAT>``, which becomes ``act`` (the
  learner's ReLU clamps its hidden outputs at 0 after rounding into ``act``, and
  ReLU(round(z)) = round(ReLU(z))). Every hidden quantized_relu must have that one format.
* Kernel and bias values are taken as QKeras computes them (``quantizer(kernel)``): scale times
  a ``quantized_bits`` grid value, exact dyadic numbers; ``coef`` is the narrowest format
  holding every value each quantizer can produce (or the given ``coef``, checked to hold them
  exactly). ``acc`` keeps every product and sum exact.

Bit-exactness with QKeras' own forward pass: the learner's outputs equal the integers of the
model's output quantizer whenever QKeras' float32 arithmetic is exact, which holds when

1. every dot product plus bias, in units of its finest grid (2^-(F_in + F_coef)), stays below
   2^24 (float32's significand; the sum and every partial sum, in any order, are then exact:
   :func:`float32_exact` checks the worst case from the weights), and
2. every value entering a quantizer is below 2^(23 - F) in magnitude (QKeras' straight-through
   ``x + stop_gradient(xq - x)`` returns ``xq`` exactly then; beyond, a saturated value can be
   an ulp off).

Otherwise float32 rounding of a pre-activation lying within a few ulp of a rounding tie can
move it to the other side; see :func:`float32_exact` and the tests for the measured effect.

Refused with a ValueError naming the layer, the quantizer and the reason: a non-power-of-two
scale (``alpha`` a float other than a power of two, or ``"auto"``), a symmetric activation
quantizer (``symmetric=1``: ap_fixed SAT has no symmetric range), an ``alpha`` on an
activation quantizer, stochastic rounding, ``qnoise_factor`` other than 1, a quantized_relu
with a sigmoid, negative slope or separate upper bound, an unsigned input or output quantizer,
an unquantized kernel or bias, an unquantized activation other than ReLU, every other QKeras
quantizer (binary, ternary, po2, tanh, sigmoid, mu-law, hard-swish, bernoulli), batch
normalisation that is not folded into the kernel and bias, and any other layer (Dense, ...).
``quantized_bits(1, i)`` kernels and biases (QKeras' sign function, +/-scale) get two integer
bits; the returned theta always passes the spec's own check.

Sources: QKeras (Coelho et al., "Automatic heterogeneous quantization of deep neural networks
for low-latency inference on the edge for particle detectors", Nature Machine Intelligence
2021; github.com/google/qkeras v0.9.0); ap_fixed semantics from Xilinx UG1399.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..fixed import Fmt, quantize
from ..spec import LearnerSpec
from .exact_mlp import DenseLayer, exact_mlp_spec

#: float32 significand bits (with the hidden bit)
FLOAT32_BITS = 24
#: widest act format an unquantized ReLU or output may need (the spec's limit for a data format)
MAX_ACT_BITS = 32


def modules():
    """Import TensorFlow (legacy Keras, as QKeras 0.9 needs) and QKeras; returns ``(tf, qkeras)``.

    Sets ``TF_USE_LEGACY_KERAS=1`` when TensorFlow is not imported yet (``tf.keras`` is then
    tf-keras, the Keras 2 that QKeras' layers are built on).

    Raises:
        onchip.extras.MissingExtra: qkeras, tensorflow or tf-keras is missing (the ``qkeras`` extra).
        RuntimeError: TensorFlow was already imported with Keras 3 as ``tf.keras``.
    """
    from ..extras import need

    if "tensorflow" not in sys.modules:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    need("tf_keras", "the QKeras front end")
    tf = need("tensorflow", "the QKeras front end")
    if str(getattr(tf.keras, "__version__", "2")).startswith("3"):
        raise RuntimeError("TensorFlow was imported before TF_USE_LEGACY_KERAS=1 was set, so tf.keras is Keras 3; "
                           "QKeras 0.9 needs tf-keras: set the variable before importing TensorFlow")
    return tf, need("qkeras", "the QKeras front end")


@dataclass(frozen=True)
class QKerasImport:
    """A QKeras network as an onchip learner.

    Attributes:
        spec: the MLP LearnerSpec (formats derived from the quantizers).
        theta: raw initial parameters, int64 (P,), ``coef`` format, in
            :func:`onchip.model.golden.layout` order.
        layers: ``[{"layer", "kind", "quantizer", "format"}]`` in execution order: what each
            accepted layer became (its quantizers as QKeras prints them).
        float32_exact: per dense layer ``{"layer", "accumulator_bits", "exact"}``: the worst-case
            dot product plus bias in bits of its finest grid, and whether float32 holds it
            (:func:`float32_exact`).
        skipped: ``[{"layer", "kind"}]``: the layers that are the identity at inference.
        notes: one sentence per choice the import made (a given or derived input format, an
            unquantized ReLU or output held exactly, an output rounded into ``output_format``,
            skipped layers), for the report.
        input_quantized: whether the model has an input quantizer (else the learner equals QKeras
            on inputs on the ``input`` format's grid: :func:`reference_outputs`).
        output_rounded: whether an unquantized output is rounded into ``output_format``.
        folded: ``[{"layer", "into"}]``: batch normalisations folded into a QDense
            (``fold_batchnorm``); the import is then not exact.
    """

    spec: LearnerSpec
    theta: np.ndarray
    layers: tuple[dict, ...]
    float32_exact: tuple[dict, ...]
    skipped: tuple[dict, ...] = ()
    notes: tuple[str, ...] = ()
    input_quantized: bool = True
    output_rounded: bool = False
    folded: tuple[dict, ...] = ()


def _int(value) -> int:
    return int(np.asarray(value.numpy() if hasattr(value, "numpy") else value).reshape(-1)[0])


def _common_checks(name: str, q) -> None:
    if getattr(q, "use_stochastic_rounding", False):
        raise ValueError(f"layer {name!r}: quantizer {q} rounds stochastically; onchip rounds "
                         "deterministically (use_stochastic_rounding=False)")
    qnoise = float(np.asarray(getattr(q, "qnoise_factor", 1.0)))
    if qnoise != 1.0:
        raise ValueError(f"layer {name!r}: quantizer {q} has qnoise_factor={qnoise} (a float mix of quantized "
                         "and unquantized values); set it to 1")


#: why an activation quantizer other than the one a role needs cannot map onto the learner
_NOT_A_GRID = {
    "quantized_tanh": "a tanh curve, which the learner has no unit for",
    "quantized_sigmoid": "a sigmoid curve, which the learner has no unit for",
    "quantized_hswish": "a hard-swish curve, which the learner has no unit for",
    "quantized_ulaw": "a mu-law companding curve, not rounding to a fixed-point grid",
    "quantized_po2": "rounding to powers of two, not to a fixed-point grid",
    "quantized_relu_po2": "rounding to powers of two, not to a fixed-point grid",
    "binary": "a sign function, not rounding to a fixed-point grid",
    "stochastic_binary": "a random sign, not rounding to a fixed-point grid",
    "ternary": "a threshold function, not rounding to a fixed-point grid",
    "stochastic_ternary": "a random threshold function, not rounding to a fixed-point grid",
    "bernoulli": "a random 0/1 draw, not rounding to a fixed-point grid",
}


def show(q) -> str:
    """A quantizer as QKeras prints it (a plain function, e.g. Keras' relu, by its name)."""
    if type(q).__module__.startswith("qkeras"):
        try:
            return str(q)
        except Exception:  # noqa: BLE001 - a __str__ that needs attributes this instance lacks
            return type(q).__name__
    return getattr(q, "__name__", None) or type(q).__name__


def act_format(name: str, q, *, role: str) -> Fmt:
    """The ap_fixed format of an activation quantizer (``role`` "input", "relu" or "output").

    Raises:
        ValueError: naming the layer, the quantizer and the reason, for any quantizer that is not
            the role's (``quantized_bits`` for input and output, ``quantized_relu`` for a hidden
            ReLU) or that one with settings that have no ap_fixed equivalent.
    """
    kind = type(q).__name__
    want = "quantized_relu" if role == "relu" else "quantized_bits"
    if kind != want:
        why = _NOT_A_GRID.get(kind) or {
            "quantized_bits": "it keeps negative values, and a hidden layer of the learner ends in a ReLU",
            "quantized_relu": "a ReLU, and the learner's input and output are not rectified",
        }.get(kind, "not a QKeras fixed-point quantizer")
        raise ValueError(f"layer {name!r}: the {role} activation is {show(q)} ({kind}): {why}; expected {want}")
    _common_checks(name, q)
    bits, integer = _int(q.bits), _int(q.integer)
    if kind == "quantized_bits":
        if q.symmetric:
            raise ValueError(f"layer {name!r}: quantizer {q} is symmetric (symmetric=1): its range "
                             f"[-(2^{bits - 1} - 1), 2^{bits - 1} - 1] LSB has no ap_fixed SAT equivalent")
        if q.alpha is not None and not (isinstance(q.alpha, (int, float)) and float(q.alpha) == 1.0):
            raise ValueError(f"layer {name!r}: quantizer {q} scales its output by alpha={q.alpha!r} after "
                             "rounding; an activation quantizer must have alpha=None or 1")
        if not q.keep_negative:
            raise ValueError(f"layer {name!r}: quantizer {q} is unsigned (keep_negative=False); the {role} "
                             "quantizer must be signed")
        if bits < 2:
            raise ValueError(f"layer {name!r}: quantizer {q} has {bits} bit (a sign only)")
        return Fmt(bits, integer + 1, True, "RND_CONV", "SAT")
    if q.use_sigmoid or q.negative_slope:
        what = "a sigmoid" if q.use_sigmoid else f"negative slope {q.negative_slope}"
        raise ValueError(f"layer {name!r}: quantizer {q} has {what}; only the plain quantized ReLU maps "
                         "onto the learner")
    if q.relu_upper_bound is not None and not q.is_quantized_clip:
        raise ValueError(f"layer {name!r}: quantizer {q} clips at relu_upper_bound={q.relu_upper_bound}, "
                         "below its own range; leave relu_upper_bound unset")
    return Fmt(bits + 1, integer + 1, True, "RND_CONV", "SAT")  # b unsigned bits = non-negative half


def _scale_exponents(name: str, what: str, q) -> np.ndarray:
    scale = getattr(q, "scale", None)
    s = np.asarray(1.0 if scale is None else (scale.numpy() if hasattr(scale, "numpy") else scale),
                   dtype=np.float64).reshape(-1)
    e = np.log2(np.where(s > 0, s, np.nan))
    if not np.all(np.isfinite(e) & (e == np.round(e))):
        bad = float(s[~(np.isfinite(e) & (e == np.round(e)))][0])
        raise ValueError(f"layer {name!r}: {what} quantizer {q} has scale {bad!r}, not a power of two "
                         "(use alpha=1 or alpha='auto_po2')")
    return e.astype(np.int64)


def _tensor_values(name: str, what: str, q, variable) -> tuple[np.ndarray, Fmt]:
    """QKeras' quantized values of ``variable`` and the format holding every value ``q`` can produce."""
    kind = type(q).__name__
    if kind != "quantized_bits":
        why = _NOT_A_GRID.get(kind, "not a QKeras fixed-point quantizer")
        raise ValueError(f"layer {name!r}: {what} quantizer {show(q)} ({kind}) is {why.split(',')[0]}; only "
                         "quantized_bits kernels and biases are mapped (binary weights: quantized_bits(1, 0, "
                         "alpha=1))")
    _common_checks(name, q)
    if isinstance(q.alpha, str) and q.alpha != "auto_po2":
        raise ValueError(f"layer {name!r}: {what} quantizer {q} has alpha={q.alpha!r}, a float scale; use "
                         "alpha=1 or alpha='auto_po2'")
    values = np.asarray(q(variable).numpy(), dtype=np.float64)  # sets q.scale
    e = _scale_exponents(name, what, q)
    bits, integer = _int(q.bits), _int(q.integer)
    if bits - int(bool(q.keep_negative)) == 0:
        # QKeras' 1-bit signed quantized_bits is sign(x) with sign(0) = +1: {-scale, +scale},
        # which needs two integer bits (+1 is beyond a 1-integer-bit signed format's max)
        frac, int_bits = -int(e.min()), 2 + int(e.max())
    else:
        signed_bits = bits if q.keep_negative else bits + 1  # an unsigned grid as the non-negative half
        frac = signed_bits - 1 - integer - int(e.min())
        int_bits = integer + 1 + int(e.max())
    return values, Fmt(int_bits + frac, int_bits, True)


def _chain(model, tf) -> list:
    """The model's layers in execution order (input layers left out); refuses anything but a chain."""
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(f"model: {len(model.inputs)} inputs and {len(model.outputs)} outputs; one of each is "
                         "supported")
    layers = [l for l in model.layers if type(l).__name__ != "InputLayer"]
    previous = None
    for layer in layers:
        if hasattr(layer, "layers"):
            raise ValueError(f"layer {layer.name!r} ({type(layer).__name__}) is a nested model; flatten it "
                             "into one Sequential or functional chain")
        nodes = [n for n in layer._inbound_nodes]
        inbound = [l for n in nodes for l in tf.nest.flatten(n.inbound_layers)]
        source_ok = (type(inbound[0]).__name__ == "InputLayer") if previous is None and inbound else \
            (len(inbound) == 1 and inbound[0] is previous)
        if len(nodes) != 1 or len(inbound) != 1 or not source_ok:
            raise ValueError(f"layer {layer.name!r}: the model is not a chain of layers (this layer takes "
                             f"{[l.name for l in inbound]}); only Sequential-like models are supported")
        previous = layer
    return layers


#: Keras layers that are the identity at inference (``training=False``): skipped and listed
IDENTITY_LAYERS = ("Dropout", "AlphaDropout", "GaussianDropout", "GaussianNoise")


class _Step(NamedTuple):
    name: str  # the layer's name
    kind: str  # "dense" (obj: the QDense), "quant" (obj: a QKeras quantizer) or "relu" (unquantized)
    obj: object


def _function_step(name: str, owner: str, fn) -> _Step | None:
    """A plain (unquantized) activation function: ReLU, the identity (None), or refused."""
    fn_name = getattr(fn, "__name__", "") if fn is not None else "linear"
    if fn_name == "linear":
        return None
    if fn_name == "relu":
        return _Step(name, "relu", None)
    raise ValueError(f"layer {name!r} ({owner}): activation {fn_name or fn!r} is not quantized and not a ReLU; "
                     "use quantized_relu(bits, integer) or relu")


def _steps(layers, fold_batchnorm: bool = False) -> tuple[list[_Step], list[dict], dict]:
    """The layers as steps in execution order, the identity layers skipped (``{"layer", "kind"}``),
    and the batch normalisations to fold (``{QDense name: BatchNormalization layer}``)."""
    steps, skipped, folded = [], [], {}
    for layer in layers:
        kind = type(layer).__name__
        step = None
        if kind == "QDense":
            steps.append(_Step(layer.name, "dense", layer))
            act = layer.activation
            step = (_Step(layer.name, "quant", act) if type(act).__module__.startswith("qkeras")
                    else _function_step(layer.name, kind, act))
        elif kind == "QActivation":
            q = layer.quantizer
            step = (_Step(layer.name, "quant", q) if type(q).__module__.startswith("qkeras")
                    else _function_step(layer.name, kind, q))
            if step is None:
                skipped.append({"layer": layer.name, "kind": f"{kind}({show(q)})"})
        elif kind == "Activation":
            step = _function_step(layer.name, kind, layer.activation)
            if step is None:
                skipped.append({"layer": layer.name, "kind": f"{kind}({show(layer.activation)})"})
        elif kind == "ReLU":
            bounded = [f"{k}={float(np.asarray(getattr(layer, k))):g}" for k in ("max_value", "negative_slope",
                                                                                "threshold")
                       if getattr(layer, k, None) is not None and float(np.asarray(getattr(layer, k))) != 0.0]
            if bounded:
                raise ValueError(f"layer {layer.name!r} (ReLU): {', '.join(bounded)}; only the plain ReLU maps "
                                 "onto the learner")
            step = _Step(layer.name, "relu", None)
        elif kind in IDENTITY_LAYERS:
            skipped.append({"layer": layer.name, "kind": kind})
        elif "BatchNormalization" in kind and fold_batchnorm:
            before = steps[-1] if steps else None
            if before is None or before.kind != "dense" or before.name in folded:
                raise ValueError(f"layer {layer.name!r} ({kind}): folding needs a QDense right before it, got "
                                 f"{'nothing' if before is None else before.name!r}")
            axis = np.asarray(layer.axis).reshape(-1).tolist()
            if axis not in ([-1], [1]):
                raise ValueError(f"layer {layer.name!r} ({kind}): axis={layer.axis}; only the feature axis folds")
            folded[before.name] = layer
        elif "BatchNormalization" in kind:
            raise ValueError(f"layer {layer.name!r} ({kind}): batch normalisation that is not folded; fold its "
                             "scale and shift into the preceding QDense's kernel and bias (and quantize those) "
                             "before importing, or let the import fold it (fold_batchnorm, onchip import "
                             "--fold-batchnorm: not exact, the error is measured)")
        elif kind == "Dense":
            raise ValueError(f"layer {layer.name!r} (Dense) is not quantized; use QDense with quantized_bits "
                             "kernel and bias quantizers")
        else:
            raise ValueError(f"layer {layer.name!r} ({kind}) is an unsupported layer; accepted: QDense, "
                             "QActivation(quantized_bits | quantized_relu), ReLU, and the identity layers "
                             f"{', '.join(IDENTITY_LAYERS)}, Activation('linear')")
        if step is not None:
            steps.append(step)
    return steps, skipped, folded


def _folded(name: str, layer, bn) -> tuple[np.ndarray, np.ndarray]:
    """QDense ``layer``'s float kernel and bias with batch normalisation ``bn`` folded in (float64).

    ``bn(y) = (y - mean) gamma / sqrt(var + eps) + beta`` per output channel, so the kernel's
    columns scale by ``s = gamma / sqrt(var + eps)`` and the bias becomes ``(b - mean) s + beta``
    (the folding of QKeras' ``QDenseBatchnorm``). Not exact: the folded values are re-quantized.
    """
    if not layer.use_bias or layer.bias_quantizer_internal is None:
        raise ValueError(f"layer {name!r} (QDense): folding {bn.name!r} needs a bias with a bias_quantizer")
    gamma = np.asarray(bn.gamma.numpy() if bn.scale else 1.0, np.float64)
    beta = np.asarray(bn.beta.numpy() if bn.center else 0.0, np.float64)
    s = gamma / np.sqrt(np.asarray(bn.moving_variance.numpy(), np.float64) + float(bn.epsilon))
    kernel = np.asarray(layer.kernel.numpy(), np.float64) * s
    bias = (np.asarray(layer.bias.numpy(), np.float64) - np.asarray(bn.moving_mean.numpy(), np.float64)) * s + beta
    return kernel, bias


def _structure(steps: list[_Step]) -> tuple[_Step | None, list[tuple[_Step, _Step | None]]]:
    """``(input quantizer step or None, [(dense step, the rounding step after it or None)])``.

    Raises:
        ValueError: any other order, naming every layer as it runs.
    """
    first = steps[0] if steps and steps[0].kind == "quant" else None
    rest = steps[1:] if first else steps
    blocks, k, ok = [], 0, True
    while k < len(rest) and ok:
        ok = rest[k].kind == "dense"
        after = rest[k + 1] if k + 1 < len(rest) and rest[k + 1].kind != "dense" else None
        blocks.append((rest[k], after))
        k += 2 if after else 1
    hidden_ok = all(after is not None for _, after in blocks[:-1])
    if not (ok and blocks and hidden_ok):
        def what(s):
            return "QDense" if s.kind == "dense" else "relu" if s.kind == "relu" else show(s.obj)

        names = " -> ".join(f"{s.name} ({what(s)})" for s in steps)
        raise ValueError(f"model: layers run as {names}; expected [QActivation(quantized_bits)] -> [QDense -> "
                         "quantized_relu or relu]* -> QDense [-> quantized_bits]")
    last = blocks[-1][1]
    if last is not None and last.kind == "relu":
        raise ValueError(f"layer {last.name!r}: a ReLU after the last QDense; the learner's output layer is "
                         "linear (end in QActivation(quantized_bits(...)) or nothing)")
    return first, blocks


_POINT = {"output": "its unquantized output", "relu": "the unquantized ReLU"}


def _holding(name: str, what: str, lo: float, hi: float, frac: int) -> Fmt:
    """The narrowest signed RND_CONV/SAT format with ``frac`` fractional bits holding [lo, hi].

    Raises:
        ValueError: naming the layer, when that is wider than :data:`MAX_ACT_BITS`.
    """
    int_bits = 1 - frac  # a one-bit format
    while not (-(2.0 ** (int_bits - 1)) <= lo and hi <= 2.0 ** (int_bits - 1) - 2.0**-frac):
        int_bits += 1
    if int_bits + frac > MAX_ACT_BITS:
        raise ValueError(f"layer {name!r}: {_POINT[what]} needs ap_fixed<{int_bits + frac},{int_bits}> to be exact "
                         f"(values in [{lo:g}, {hi:g}] on a 2^-{frac} grid), {int_bits + frac} bits (more than "
                         f"{MAX_ACT_BITS}); quantize it with quantized_relu / quantized_bits"
                         + (", or give output_format (onchip import --output-format) to round it" if what == "output"
                            else ""))
    return Fmt(int_bits + frac, int_bits, True, "RND_CONV", "SAT")


def _parse_format(what: str, fmt) -> Fmt:
    try:
        return Fmt.parse(fmt) if isinstance(fmt, str) else fmt if isinstance(fmt, Fmt) else Fmt.parse(str(fmt))
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _act_plan(blocks, dense: list[DenseLayer], in_fmt: Fmt,
              output_format: Fmt | None) -> tuple[Fmt, Fmt | None, list[str], list[tuple[float, int]]]:
    """The learner's ``act`` format (the hidden layers' outputs), its ``output`` format (None: the
    last layer's outputs in ``act`` too), what they mean for each rounding point (report notes), and
    each layer's input bounds ``(largest |input|, fractional bits of its grid)``.

    A hidden quantizer fixes ``act`` (one format for every hidden quantized_relu); an unquantized
    ReLU must be held exactly in it: its values (interval bounds over the inputs' ranges, per
    neuron) on the grid of its exact sum. With no hidden quantizer, ``act`` is the output
    quantizer's (or ``output_format``'s) format when it holds every unquantized ReLU, else the
    narrowest format holding every unquantized point (at most 32 bits). The output takes the output
    quantizer's format, ``output_format``, or for an unquantized output the exact format of the last
    layer's sum (no rounding); it is written as a separate ``output`` format only where ``act`` does
    not already hold it.
    """
    hidden = []  # (layer, format, what forces it): the hidden quantized ReLUs
    out_fixed = None  # (layer, format, what forces it): the output quantizer or output_format
    for n, (d, after) in enumerate(blocks):
        if after is not None and after.kind == "quant":
            last = n == len(blocks) - 1
            entry = (after.name, act_format(after.name, after.obj, role="output" if last else "relu"),
                     f"quantizer {show(after.obj)}")
            if last:
                out_fixed = entry
            else:
                hidden.append(entry)
    out_step = blocks[-1][1]
    if output_format is not None:
        if out_step is None:
            out_fixed = (blocks[-1][0].name, output_format, "output_format")
        elif out_fixed[1] != output_format:
            raise ValueError(f"output_format: {output_format} differs from {out_fixed[1]}, the format of the output "
                             f"quantizer {show(out_step.obj)} of layer {out_step.name!r}; leave it unset")
    act = None
    if hidden:
        name0, act, what0 = hidden[-1]
        for name, fmt, what in hidden:
            if fmt != act:
                raise ValueError(
                    f"layer {name!r}: {what} gives the activation format {fmt}, which differs from {act} of the "
                    f"{what0} of layer {name0!r} (the learner has one act format for its hidden layers: give every "
                    "hidden quantized_relu(b, i) the same b and i)")
    lo, hi, frac = np.full(dense[0].weight.shape[1], in_fmt.min_value), np.full(dense[0].weight.shape[1],
                                                                                  in_fmt.max_value), in_fmt.frac_bits
    exact = []  # (layer, what, needed format): the unquantized ReLUs, then an unquantized output
    inputs = []  # per layer: (largest |input|, fractional bits of the inputs' grid), for float32_exact
    for n, ((d, after), layer) in enumerate(zip(blocks, dense)):
        w, b, last = layer.weight, layer.bias, n == len(blocks) - 1
        inputs.append((float(np.maximum(np.abs(lo), np.abs(hi)).max()), int(frac)))
        s_lo = b + np.minimum(w * lo, w * hi).sum(axis=1)
        s_hi = b + np.maximum(w * lo, w * hi).sum(axis=1)
        f_sum = max(frac + _frac_of(w), _frac_of(b))  # the grid every exact sum lies on
        if after is None and output_format is None:
            exact.append((d.name, "output", _holding(d.name, "output", float(s_lo.min()), float(s_hi.max()), f_sum)))
        elif after is not None and after.kind == "relu":
            top = max(float(s_hi.max()), 0.0)
            exact.append((after.name, "relu", _holding(after.name, "relu", 0.0, top, f_sum)))
            lo, hi, frac = np.maximum(s_lo, 0.0), np.maximum(s_hi, 0.0), f_sum
            continue
        if not last:  # a quantized ReLU: rounded and saturated into act
            lo, hi, frac = np.zeros_like(s_lo), np.clip(s_hi, 0.0, act.max_value), act.frac_bits

    def holds(fmt: Fmt, need: Fmt) -> bool:
        return fmt.frac_bits >= need.frac_bits and fmt.min_value <= need.min_value and need.max_value <= fmt.max_value

    relus = [e for e in exact if e[1] == "relu"]
    if act is None and out_fixed is not None and all(holds(out_fixed[1], fmt) for _, _, fmt in relus):
        act = out_fixed[1]  # one format for every layer, as the output quantizer gives it
    if act is None:
        points = exact if out_fixed is None else relus
        if points:
            frac = max(fmt.frac_bits for _, _, fmt in points)
            int_bits = max(fmt.int_bits for _, _, fmt in points)
            if int_bits + frac > MAX_ACT_BITS:
                name, what, fmt = max(points, key=lambda e: e[2].width)
                raise ValueError(f"layer {name!r}: {_POINT[what]} needs {fmt} to be exact, and act must hold every "
                                 f"unquantized point: ap_fixed<{int_bits + frac},{int_bits}>, {int_bits + frac} bits "
                                 f"(more than {MAX_ACT_BITS}); quantize it with quantized_relu / quantized_bits")
            act = Fmt(int_bits + frac, int_bits, True, "RND_CONV", "SAT")
        else:  # one layer and a fixed output: no hidden point
            act = out_fixed[1]
    notes = []
    for name, what, fmt in relus:
        if not holds(act, fmt):
            name0, _, what0 = hidden[-1]
            raise ValueError(
                f"layer {name!r}: the unquantized ReLU needs {fmt} to be exact, but the learner rounds every hidden "
                f"layer into one act format, here {act} (the {what0} of layer {name0!r}); use quantized_relu of that "
                "format instead")
        notes.append(f"layer {name!r}: {_POINT[what]} is exact in act {act} (its values need {fmt})")
    output = None
    for name, what, fmt in exact:
        if what != "output":
            continue
        if holds(act, fmt):
            notes.append(f"layer {name!r}: {_POINT[what]} is exact in act {act} (its values need {fmt})")
        else:
            output = fmt
            notes.append(f"layer {name!r}: {_POINT[what]} is exact in its own output format {fmt}, the exact format "
                         f"of its sum (no rounding), beside act {act} of the hidden layers")
    if out_fixed is not None and out_fixed[1] != act:
        output = out_fixed[1]
        notes.append(f"layer {out_fixed[0]!r}: the {out_fixed[2]} gives the output format {output}, beside act "
                     f"{act} of the hidden layers")
    return act, output, notes, inputs


def data_input_format(x, width: int = 16) -> Fmt:
    """The narrowest ``width``-bit signed format (fewest integer bits, at least 1) holding ``x``'s range.

    Raises:
        ValueError: ``data:`` values beyond the widest such format (``width`` integer bits).
    """
    x = np.asarray(x, dtype=np.float64)
    lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    for int_bits in range(1, width + 1):
        fmt = Fmt(width, int_bits, True, "RND_CONV", "SAT")
        if fmt.min_value <= lo and hi <= fmt.max_value:
            return fmt
    raise ValueError(f"data: values in [{lo:g}, {hi:g}] do not fit a {width}-bit format; give input_format")


def float32_exact(layers: list[DenseLayer], in_fmt: Fmt, act: Fmt, inputs=None) -> list[dict]:
    """Whether QKeras' float32 dot products are exact, per dense layer (condition 1 of the module doc).

    The worst case of ``|sum_i w_ji a_i| + |b_j|`` over the inputs' ranges, in units of the finest
    grid of the products and the bias; exact when that is below 2^24.

    Args:
        layers: the dense layers in execution order.
        in_fmt: the first layer's input format.
        act: the learner's act format (a later layer's input: the ReLU range ``[0, act.max]``
            on act's grid), unless ``inputs`` says more.
        inputs: per layer ``(largest |input|, fractional bits of the inputs' grid)``, e.g. the
            bounds of an unquantized ReLU held exactly (:func:`_act_plan`); None: from the formats.

    Returns:
        ``[{"layer", "accumulator_bits", "exact"}]``: ``accumulator_bits`` = bits of that worst case.
    """
    out = []
    for n, layer in enumerate(layers):
        if inputs is not None:
            a_max, a_frac = inputs[n]
        else:
            fmt = in_fmt if n == 0 else act
            a_max = max(-fmt.min_value, fmt.max_value) if n == 0 else fmt.max_value
            a_frac = fmt.frac_bits
        unit_frac = max(a_frac + _frac_of(layer.weight), _frac_of(layer.bias))
        worst = float((np.abs(layer.weight).sum(axis=1) * a_max + np.abs(layer.bias)).max())
        bits = math.ceil(math.log2(worst * 2.0**unit_frac + 1)) if worst > 0 else 0
        out.append({"layer": layer.name, "accumulator_bits": bits, "exact": bits <= FLOAT32_BITS})
    return out


def _frac_of(values: np.ndarray) -> int:
    # the fewest fractional bits that hold every one of ``values`` (dyadic numbers) exactly
    for frac in range(-64, 97):
        scaled = np.ldexp(values, frac)
        if np.array_equal(scaled, np.round(scaled)):
            return frac
    raise ValueError("values are not dyadic numbers of at most 96 fractional bits")


def from_qkeras(
    model,
    *,
    input_format: str | Fmt | None = None,
    output_format: str | Fmt | None = None,
    data=None,
    fold_batchnorm: bool = False,
    learning_rate: float = 2.0**-6,
    grad: str | Fmt = "ap_fixed<16,4,RND_CONV,SAT>",
    coef: str | Fmt | None = None,
    coef_extra_int_bits: int = 0,
    schedule: str = "sequential",
    staleness: int = 4,
    name: str = "qkeras",
) -> QKerasImport:
    """Convert a trained QKeras MLP (see the module docstring for what is accepted and how).

    Args:
        model: a built ``tf.keras`` Sequential or functional model of QDense and QActivation
            layers (ReLU and identity layers allowed, see the module docstring).
        input_format: the ``input`` format (e.g. ``"ap_fixed<16,6,RND_CONV,SAT>"``) of a model
            without an input quantizer: the learner rounds its inputs into it, and equals
            QKeras on inputs on its grid. With an input quantizer it must equal its format.
        output_format: the format the learner rounds an unquantized output into (not exact; see
            the module docstring). None: the exact format of the last layer's sum (no rounding).
        data: inputs (N, n_in) from which to derive ``input_format`` when the model has no input
            quantizer and none is given (:func:`data_input_format`: the narrowest 16-bit format
            holding their range).
        fold_batchnorm: fold each BatchNormalization into the QDense before it and re-quantize
            the folded kernel and bias with that layer's quantizers (as QKeras' QDenseBatchnorm
            does). Not exact: QKeras applies the normalisation in float; the import's check
            measures the difference. False: batch normalisation is refused.
        learning_rate: copied into the spec (on-chip training after import).
        grad: format of the errors for on-chip training (not used by inference).
        coef: the ``coef`` format, e.g. ``"ap_fixed<16,4,RND_CONV,SAT>"`` to give on-chip training
            fractional bits below the quantizers' grid; it must hold every weight and bias exactly.
            None: the narrowest format holding every value the quantizers can produce.
        coef_extra_int_bits: integer bits added to the derived ``coef`` as headroom for training.
        schedule: copied into the spec.
        staleness: copied into the spec.
        name: copied into the spec.

    Returns:
        :class:`QKerasImport`; its ``theta`` always passes the spec's own check
        (:func:`onchip.model.golden.check_parameters`).

    Raises:
        ValueError: a layer or quantizer that cannot be mapped exactly (the message names the
            layer, the quantizer and the reason); a model without an input quantizer given
            neither ``input_format`` nor ``data``; a bad ``input_format`` or ``output_format``.
        onchip.extras.MissingExtra: QKeras or TensorFlow is not installed (the ``qkeras`` extra).
    """
    tf, _ = modules()
    steps, skipped, folded = _steps(_chain(model, tf), fold_batchnorm)
    in_step, blocks = _structure(steps)
    given_in = None if input_format is None else _parse_format("input_format", input_format)
    out_fmt = None if output_format is None else _parse_format("output_format", output_format)
    notes = []
    if in_step is not None:
        in_fmt = act_format(in_step.name, in_step.obj, role="input")
        if given_in is not None and given_in != in_fmt:
            raise ValueError(f"input_format: {given_in} differs from {in_fmt}, the format of the input quantizer "
                             f"{show(in_step.obj)} of layer {in_step.name!r}; leave it unset")
        described = [{"layer": in_step.name, "kind": "input", "quantizer": show(in_step.obj), "format": str(in_fmt)}]
    else:
        if given_in is not None:
            in_fmt = given_in
            notes.append(f"input format {in_fmt}: given (the model has no input quantizer); the learner rounds its "
                         "inputs into it and equals QKeras on inputs on its grid")
        elif data is not None:
            in_fmt = data_input_format(data)
            x = np.asarray(data, dtype=np.float64)
            notes.append(f"input format {in_fmt}: derived, the narrowest 16-bit format holding the data's range "
                         f"[{x.min():g}, {x.max():g}] (the model has no input quantizer); the learner rounds its "
                         "inputs into it and equals QKeras on inputs on its grid")
        else:
            first = blocks[0][0].name
            raise ValueError(f"model: no input quantizer (its first layer is QDense {first!r}): give the input format "
                             "(input_format=, onchip import --input-format), e.g. 'ap_fixed<16,6,RND_CONV,SAT>', or "
                             "inputs to derive it from (data=, --data)")
        described = [{"layer": "(input)", "kind": "input", "quantizer": "none", "format": str(in_fmt)}]
    dense = []
    for d, _ in blocks:
        lname, layer = d.name, d.obj
        if layer.kernel_quantizer_internal is None:
            raise ValueError(f"layer {lname!r} (QDense): the kernel is not quantized; set kernel_quantizer="
                             "quantized_bits(...)")
        kernel, bias = layer.kernel, layer.bias
        if lname in folded:
            kernel, bias = (tf.constant(v.astype(np.float32)) for v in _folded(lname, layer, folded[lname]))
            notes.append(f"batch normalisation {folded[lname].name!r} folded into {lname!r} and re-quantized with its "
                         "quantizers (fold_batchnorm): not exact; the check measures the output error")
        w, w_range = _tensor_values(lname, "kernel", layer.kernel_quantizer_internal, kernel)
        if layer.use_bias:
            if layer.bias_quantizer_internal is None:
                raise ValueError(f"layer {lname!r} (QDense): the bias is not quantized; set bias_quantizer="
                                 "quantized_bits(...)")
            b, b_range = _tensor_values(lname, "bias", layer.bias_quantizer_internal, bias)
        else:
            b, b_range = np.zeros(w.shape[1]), w_range
        dense.append(DenseLayer(lname, w.T.copy(), b.reshape(-1), w_range, b_range))
    act, output, plan_notes, inputs = _act_plan(blocks, dense, in_fmt, out_fmt)
    y_fmt = act if output is None else output
    for n, ((d, after), layer) in enumerate(zip(blocks, dense)):
        q = d.obj
        described.append({"layer": d.name, "kind": "dense", "quantizer": f"kernel {show(q.kernel_quantizer_internal)}"
                          + (f", bias {show(q.bias_quantizer_internal)}" if q.use_bias else ", no bias"),
                          "format": f"weights within ap_fixed<{layer.weight_range.width},{layer.weight_range.int_bits}>,"
                                    f" biases within ap_fixed<{layer.bias_range.width},{layer.bias_range.int_bits}>"})
        last = n == len(blocks) - 1
        quantizer = ("none" if after is None else "relu (unquantized)" if after.kind == "relu" else show(after.obj))
        if last and after is None and out_fmt is not None:
            quantizer = "none: rounded into output_format"
        described.append({"layer": d.name if after is None else after.name, "kind": "output" if last else "relu",
                          "quantizer": quantizer, "format": str(y_fmt if last else act)})
    if out_fmt is not None and blocks[-1][1] is None:
        notes.append(f"unquantized output of {blocks[-1][0].name!r}: rounded into output_format {y_fmt}, not exact; "
                     "the learner equals QKeras' outputs rounded the same way (rounded_output_error measures the "
                     "difference from QKeras' own)")
    notes += plan_notes
    if skipped:
        notes.append("identity at inference, skipped: " + ", ".join(f"{s['layer']} ({s['kind']})" for s in skipped))
    spec, theta = exact_mlp_spec(dense, in_fmt, act, output=output, grad=grad, coef=coef, coef_extra_int_bits=coef_extra_int_bits,
                                 learning_rate=learning_rate, schedule=schedule, staleness=staleness, name=name)
    return QKerasImport(spec, theta, tuple(described), tuple(float32_exact(dense, in_fmt, act, inputs)),
                        skipped=tuple(skipped), notes=tuple(notes), input_quantized=in_step is not None,
                        folded=tuple({"layer": bn.name, "into": name} for name, bn in folded.items()),
                        output_rounded=out_fmt is not None and blocks[-1][1] is None)


def qkeras_outputs(model, x, act: Fmt, *, round_outputs: bool = False) -> np.ndarray:
    """QKeras' own outputs as raw integers of ``act``, int64 (N, n_out).

    Args:
        model: the network given to :func:`from_qkeras`.
        x: float inputs (N, n_in), used as float32 (QKeras' precision).
        act: the imported spec's output format ``formats.y`` (the output quantizer's, or the
            exact format of an unquantized output).
        round_outputs: round the outputs into ``act`` (:func:`onchip.fixed.quantize`), for an
            unquantized output imported with ``output_format``.

    Raises:
        ValueError: an output that is not on ``act``'s grid when not rounding.
    """
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(model(x, training=False).numpy(), dtype=np.float64)
    if round_outputs:
        return quantize(y, act)
    raw = np.ldexp(y, act.frac_bits)
    if not np.array_equal(raw, np.round(raw)):
        raise ValueError(f"model: its outputs are not on the grid of {act}")
    return raw.astype(np.int64)


def rounded_output_error(model, imported: QKerasImport, x, ours: np.ndarray) -> dict | None:
    """How far the learner's outputs are from QKeras' own where an unquantized output is rounded into
    ``output_format`` (``imported.output_rounded``); None for an exact import.

    Args:
        model: the network given to :func:`from_qkeras`.
        imported: its import.
        x: inputs as QKeras sees them (N, n_in) float (:func:`reference_outputs`).
        ours: the learner's raw outputs on them, int64 (N, n_out), output format (``formats.y``).

    Returns:
        ``{"samples", "rms_lsb", "max_lsb", "saturated"}``: the RMS and largest difference from
        QKeras' float output in LSB of the output format, and the share of outputs beyond its range
        (saturated). Without ``output_format`` the import is exact (the last sum's own format).
    """
    if not imported.output_rounded:
        return None
    act = imported.spec.formats.y
    y = np.asarray(model(np.asarray(x, dtype=np.float32), training=False).numpy(), dtype=np.float64)
    diff = np.asarray(ours, dtype=np.float64) - np.ldexp(y, act.frac_bits)
    return {"samples": int(len(y)), "rms_lsb": float(np.sqrt(np.mean(diff ** 2))),
            "max_lsb": float(np.abs(diff).max()),
            "saturated": float(np.mean((y < act.min_value) | (y > act.max_value)))}


def reference_outputs(model, imported: QKerasImport, x) -> tuple[np.ndarray, np.ndarray]:
    """What the learner must equal: ``(inputs as QKeras saw them (N, n_in) float64, QKeras' raw outputs)``.

    A model without an input quantizer sees the inputs rounded onto the input format's grid (as
    the learner does); with ``output_format``, its outputs are rounded into it (``formats.y``).
    """
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    if not imported.input_quantized:
        f = imported.spec.formats.input
        x = f.dequantize(quantize(x, f))
    return x, qkeras_outputs(model, x, imported.spec.formats.y, round_outputs=imported.output_rounded)


#: the HDF5 format signature; it stands at offset 0 or, after a user block, at 512, 1024, 2048, ...
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _check_container(path: Path) -> None:
    """Refuse a file that is not the container its suffix names: HDF5 for ``.h5``/``.hdf5``, a zip
    archive for ``.keras`` (ValueError naming the file); and an HDF5 file that holds no Keras model
    (no ``model_config`` attribute: a ``save_weights`` file, another tool's data), read with h5py."""
    if not path.is_file():
        return  # Keras names a missing file itself
    size = path.stat().st_size
    with open(path, "rb") as f:
        if path.suffix.lower() == ".keras":
            if f.read(4) != b"PK\x03\x04":
                raise ValueError(f"{path}: not a .keras file (a .keras model is a zip archive; this file is not one)")
            return
        offset = 0
        while offset + len(HDF5_SIGNATURE) <= size:
            f.seek(offset)
            if f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                return _check_keras_hdf5(path)
            offset = 512 if offset == 0 else 2 * offset
    raise ValueError(f"{path}: not an HDF5 file (no HDF5 signature); save the model with model.save('model.h5')")


def _check_keras_hdf5(path: Path) -> None:
    """Refuse an HDF5 file without the ``model_config`` attribute Keras' ``model.save`` writes at
    its root (Keras would say so only after TensorFlow has loaded, with a GFile repr)."""
    import h5py  # a requirement of hls4ml, which the core installs

    try:
        with h5py.File(path, "r") as h5:
            attrs = set(h5.attrs)
    except OSError as exc:
        raise ValueError(f"{path}: h5py cannot read this HDF5 file ({str(exc).splitlines()[0]})") from None
    if "model_config" in attrs:
        return
    what = ("a weights-only file (model.save_weights)" if "layer_names" in attrs
            else "an HDF5 file without a Keras model (no model_config attribute)")
    raise ValueError(f"{path}: {what}; save the model with model.save('model.h5')")


def load_qkeras(path: str | Path):
    """Load a saved QKeras model (``.h5`` or ``.keras``) with QKeras' custom objects.

    Raises:
        ValueError: naming the file when Keras cannot load it (a ``.keras`` file whose layers
            hold quantizer objects rather than strings does not reload in QKeras 0.9; ``.h5`` does).
        onchip.extras.MissingExtra: the ``qkeras`` extra is missing.
    """
    _check_container(Path(path))  # before TensorFlow loads (tens of seconds, and its log lines)
    modules()
    from qkeras.utils import load_qmodel

    try:
        return load_qmodel(str(path), compile=False)
    except (TypeError, ValueError, OSError, KeyError) as exc:
        hint = (" (QKeras 0.9 reloads .keras files only when quantizers are given as strings, e.g. "
                "QActivation('quantized_relu(4,0)'); save as .h5 otherwise)" if str(path).endswith(".keras") else "")
        raise ValueError(f"{path}: Keras could not load the model: {str(exc).splitlines()[0]}{hint}") from None
