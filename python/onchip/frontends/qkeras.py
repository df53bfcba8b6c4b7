"""QKeras front end: a trained QKeras MLP -> MLP LearnerSpec + raw parameters.

Accepted networks (``Sequential`` or a functional chain, one input, one output) run::

    QActivation(quantized_bits) -> [QDense -> quantized_relu] * h -> QDense -> quantized_bits

where a QDense's activation is its own ``activation=`` argument or the QActivation after it.
Kernels and biases have ``quantized_bits`` quantizers whose scale is a power of two
(``alpha`` None, 1, another power of two, or ``"auto_po2"``, resolved per output channel from the
trained kernel); a QDense without bias has zero biases.

The mapping, read from QKeras 0.9.0's ``quantizers.py``:

* ``quantized_bits(b, i, keep_negative=True)`` computes ``clip(round(x * 2^F), -2^(b-1),
  2^(b-1) - 1) * 2^-F`` with ``F = b - 1 - i`` and ``round = tf.round`` (half to even): that is
  ``ap_fixed<b, i+1, RND_CONV, SAT>`` (QKeras' ``integer`` excludes the sign bit, ap_fixed's
  I includes it). It gives the ``input`` format and the output quantizer, which must equal
  ``act``.
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
an unquantized kernel, bias or activation, batch normalisation that is not folded into the
kernel and bias, and any other layer (Dense, Dropout, ...).

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

import numpy as np

from ..fixed import Fmt
from ..spec import LearnerSpec
from .exact_mlp import DenseLayer, exact_mlp_spec

#: float32 significand bits (with the hidden bit)
FLOAT32_BITS = 24


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
    """

    spec: LearnerSpec
    theta: np.ndarray
    layers: tuple[dict, ...]
    float32_exact: tuple[dict, ...]


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


def act_format(name: str, q, *, role: str) -> Fmt:
    """The ap_fixed format of an activation quantizer (``role`` "input", "relu" or "output")."""
    kind = type(q).__name__
    _common_checks(name, q)
    bits, integer = _int(q.bits), _int(q.integer)
    if kind == "quantized_bits" and role != "relu":
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
    if kind == "quantized_relu" and role == "relu":
        if q.use_sigmoid or q.negative_slope:
            what = "a sigmoid" if q.use_sigmoid else f"negative slope {q.negative_slope}"
            raise ValueError(f"layer {name!r}: quantizer {q} has {what}; only the plain quantized ReLU maps "
                             "onto the learner")
        if q.relu_upper_bound is not None and not q.is_quantized_clip:
            raise ValueError(f"layer {name!r}: quantizer {q} clips at relu_upper_bound={q.relu_upper_bound}, "
                             "below its own range; leave relu_upper_bound unset")
        return Fmt(bits + 1, integer + 1, True, "RND_CONV", "SAT")  # b unsigned bits = non-negative half
    want = "quantized_relu" if role == "relu" else "quantized_bits"
    raise ValueError(f"layer {name!r}: the {role} activation is {q} ({kind}); expected {want}")


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
        raise ValueError(f"layer {name!r}: {what} quantizer {q} ({kind}) is not quantized_bits")
    _common_checks(name, q)
    if isinstance(q.alpha, str) and q.alpha != "auto_po2":
        raise ValueError(f"layer {name!r}: {what} quantizer {q} has alpha={q.alpha!r}, a float scale; use "
                         "alpha=1 or alpha='auto_po2'")
    values = np.asarray(q(variable).numpy(), dtype=np.float64)  # sets q.scale
    e = _scale_exponents(name, what, q)
    bits, integer = _int(q.bits), _int(q.integer)
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


def _steps(layers) -> list[tuple[str, str, object]]:
    """``(layer name, kind, object)``: kind "dense" (object: the layer) or "act" (object: its quantizer)."""
    steps = []
    for layer in layers:
        kind = type(layer).__name__
        if kind == "QDense":
            steps.append((layer.name, "dense", layer))
            act = layer.activation
            act_name = getattr(act, "__name__", "")
            if type(act).__module__.startswith("qkeras"):
                steps.append((layer.name, "act", act))
            elif act is not None and act_name != "linear":
                raise ValueError(f"layer {layer.name!r} (QDense): activation {act_name or act!r} is not "
                                 "quantized; use quantized_relu(bits, integer)")
        elif kind == "QActivation":
            steps.append((layer.name, "act", layer.quantizer))
        elif "BatchNormalization" in kind:
            raise ValueError(f"layer {layer.name!r} ({kind}): batch normalisation that is not folded; fold its "
                             "scale and shift into the preceding QDense's kernel and bias (and quantize those) "
                             "before importing")
        elif kind == "Dense":
            raise ValueError(f"layer {layer.name!r} (Dense) is not quantized; use QDense with quantized_bits "
                             "kernel and bias quantizers")
        else:
            raise ValueError(f"layer {layer.name!r} ({kind}) is an unsupported layer; accepted: QDense, "
                             "QActivation(quantized_bits | quantized_relu)")
    return steps


def float32_exact(layers: list[DenseLayer], in_fmt: Fmt, act: Fmt) -> list[dict]:
    """Whether QKeras' float32 dot products are exact, per dense layer (condition 1 of the module doc).

    The worst case of ``|sum_i w_ji a_i| + |b_j|`` over the inputs' formats (``input`` for the first
    layer, the ReLU range ``[0, act.max]`` after it), in units of the finest grid of the products
    and the bias; exact when that is below 2^24.

    Returns:
        ``[{"layer", "accumulator_bits", "exact"}]``: ``accumulator_bits`` = bits of that worst case.
    """
    out = []
    for n, layer in enumerate(layers):
        fmt = in_fmt if n == 0 else act
        a_max = max(-fmt.min_value, fmt.max_value) if n == 0 else fmt.max_value
        unit_frac = max(fmt.frac_bits + _frac_of(layer.weight), _frac_of(layer.bias))
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
        model: a built ``tf.keras`` Sequential or functional model of QActivation and QDense layers.
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
        :class:`QKerasImport`.

    Raises:
        ValueError: a layer or quantizer that cannot be mapped exactly; the message names the
            layer, the quantizer and the reason.
        onchip.extras.MissingExtra: QKeras or TensorFlow is not installed (the ``qkeras`` extra).
    """
    tf, _ = modules()
    steps = _steps(_chain(model, tf))
    kinds = "".join("L" if kind == "dense" else "A" for _, kind, _ in steps)
    ok = len(kinds) >= 3 and kinds[0] == "A" and kinds[-2:] == "LA" and len(kinds) % 2 == 1 and \
        all(kinds[k : k + 2] == "LA" for k in range(1, len(kinds), 2))
    if not ok:
        names = " -> ".join(f"{n} ({'QDense' if k == 'dense' else str(o)})" for n, k, o in steps)
        raise ValueError(f"model: layers run as {names}; expected QActivation(quantized_bits) -> [QDense -> "
                         "quantized_relu]* -> QDense -> quantized_bits")
    in_name, _, in_q = steps[0]
    in_fmt = act_format(in_name, in_q, role="input")
    out_name, _, out_q = steps[-1]
    act = act_format(out_name, out_q, role="output")
    described = [{"layer": in_name, "kind": "input", "quantizer": str(in_q), "format": str(in_fmt)}]
    dense = []
    for k in range(1, len(steps), 2):
        lname, _, layer = steps[k]
        q_name, _, q = steps[k + 1]
        if k + 2 < len(steps):
            fmt = act_format(q_name, q, role="relu")
            if fmt != act:
                raise ValueError(
                    f"layer {q_name!r}: quantizer {q} gives the activation format {fmt}, which differs from "
                    f"{act} of the output quantizer {out_q} of layer {out_name!r} (the learner has one act "
                    "format: give every quantized_relu(b, i) and the output quantized_bits(b+1, i))")
        if layer.kernel_quantizer_internal is None:
            raise ValueError(f"layer {lname!r} (QDense): the kernel is not quantized; set kernel_quantizer="
                             "quantized_bits(...)")
        w, w_range = _tensor_values(lname, "kernel", layer.kernel_quantizer_internal, layer.kernel)
        if layer.use_bias:
            if layer.bias_quantizer_internal is None:
                raise ValueError(f"layer {lname!r} (QDense): the bias is not quantized; set bias_quantizer="
                                 "quantized_bits(...)")
            b, b_range = _tensor_values(lname, "bias", layer.bias_quantizer_internal, layer.bias)
        else:
            b, b_range = np.zeros(w.shape[1]), w_range
        dense.append(DenseLayer(lname, w.T.copy(), b.reshape(-1), w_range, b_range))
        described.append({"layer": lname, "kind": "dense", "quantizer": f"kernel {layer.kernel_quantizer_internal}"
                          + (f", bias {layer.bias_quantizer_internal}" if layer.use_bias else ", no bias"),
                          "format": f"weights within ap_fixed<{w_range.width},{w_range.int_bits}>, biases within "
                                    f"ap_fixed<{b_range.width},{b_range.int_bits}>"})
        described.append({"layer": q_name, "kind": "relu" if k + 2 < len(steps) else "output",
                          "quantizer": str(q), "format": str(act)})
    spec, theta = exact_mlp_spec(dense, in_fmt, act, grad=grad, coef=coef, coef_extra_int_bits=coef_extra_int_bits,
                                 learning_rate=learning_rate, schedule=schedule, staleness=staleness, name=name)
    return QKerasImport(spec, theta, tuple(described), tuple(float32_exact(dense, in_fmt, act)))


def qkeras_outputs(model, x, act: Fmt) -> np.ndarray:
    """QKeras' own quantized outputs as raw integers of ``act``, int64 (N, n_out).

    Args:
        model: the network given to :func:`from_qkeras`.
        x: float inputs (N, n_in), used as float32 (QKeras' precision).
        act: the imported spec's ``act`` format (the output quantizer's).

    Raises:
        ValueError: an output that is not on ``act``'s grid (not the output quantizer's).
    """
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(model(x, training=False).numpy(), dtype=np.float64)
    raw = np.ldexp(y, act.frac_bits)
    if not np.array_equal(raw, np.round(raw)):
        raise ValueError(f"model: its outputs are not on the grid of {act}")
    return raw.astype(np.int64)


def load_qkeras(path: str | Path):
    """Load a saved QKeras model (``.h5`` or ``.keras``) with QKeras' custom objects.

    Raises:
        ValueError: naming the file when Keras cannot load it (a ``.keras`` file whose layers
            hold quantizer objects rather than strings does not reload in QKeras 0.9; ``.h5`` does).
        onchip.extras.MissingExtra: the ``qkeras`` extra is missing.
    """
    modules()
    from qkeras.utils import load_qmodel

    try:
        return load_qmodel(str(path), compile=False)
    except (TypeError, ValueError, OSError, KeyError) as exc:
        hint = (" (QKeras 0.9 reloads .keras files only when quantizers are given as strings, e.g. "
                "QActivation('quantized_relu(4,0)'); save as .h5 otherwise)" if str(path).endswith(".keras") else "")
        raise ValueError(f"{path}: Keras could not load the model: {str(exc).splitlines()[0]}{hint}") from None
