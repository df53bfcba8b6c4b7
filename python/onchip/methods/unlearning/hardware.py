"""The unlearned network on the simulated hardware: golden model, HLS C simulation and RTL.

"Unlearning on the deployed device" (OEU, Zhang et al., ICML 2026,
arXiv:2602.00567, run on our fixed-point learner): a brevitas
:class:`~onchip.methods.unlearning.models.QuantMLP` with the ``"fixed"``
activation layout is imported by :func:`onchip.frontends.brevitas.from_brevitas`
into an MLP :class:`~onchip.spec.LearnerSpec` plus raw parameters, and the
forget, retain and test inputs run through

* ``golden``: the golden model, inference only (``learn=False`` of :mod:`onchip.backends`);
* ``hls``: the C simulation of the emitted HLS C++, inference only;
* ``rtl``: the Verilated learner of :func:`onchip.hw.generate`, serial MLP
  datapath (:class:`onchip.hw.mlp_serial.SerialMlpLearner`: one MAC lane per
  neuron, weights in RAM), which converts and builds for the 64-64-32-10
  networks where a multiplier and a register per weight does not.

The RTL always learns test-then-train (the backend's inference-only mode rewrites
every parameter before each sample, 6.6k writes per sample for 64-64-32-10). Instead,
without the golden model providing any of the RTL's inputs:

* the imported parameters are written through the learner's parameter port before
  the stream (the ``theta`` of the ``rtl`` backend);
* the spec's learning rate is :func:`frozen_learning_rate`: so small that every
  update term ``requant(e * a * 2**-s -> coef)`` rounds to exactly zero for any
  error and activation the formats can hold. The stream then never changes the
  parameters, every prediction is pure inference, and the targets (zeros) do not
  matter. The parameters read back after the stream must equal the imported
  ones, which checks both points on the RTL itself.

Every backend's raw outputs are compared with brevitas' own output integers
(the output QuantIdentity), and its class decisions (argmax, first maximum on
ties, the same rule as the brevitas accuracy) with brevitas' predictions,
sample for sample.
"""

from __future__ import annotations


import numpy as np

BACKENDS = ("golden", "hls", "rtl")
_ROUND_TO_NEAREST = ("RND", "RND_ZERO", "RND_MIN_INF", "RND_INF", "RND_CONV")


def frozen_learning_rate(spec) -> float:
    """Largest power-of-two learning rate at which every SGD update of ``spec`` rounds to zero.

    MLP update terms (:mod:`onchip.model.kernels`): ``dW = requant(e * a * 2**-s -> coef)``,
    ``db = requant(e * 2**-s -> coef)`` with ``e`` in ``grad`` and ``a`` in ``input``
    or ``act``. A round-to-nearest conversion that drops ``k`` fractional bits
    returns 0 when ``|v| < 2**(k-1)``; ``|e| <= 2**(W_grad-1)`` and
    ``|a| <= 2**(W_a-1)`` give the smallest ``s`` for which this holds for every
    possible ``e`` and ``a``.

    Args:
        spec: an MLP :class:`~onchip.spec.LearnerSpec`.

    Returns:
        ``2**-s`` (a valid ``learning_rate``).

    Raises:
        ValueError: not an MLP, or a ``coef`` quantization mode that does not round
            to nearest (truncation would turn small negative updates into -1 LSB).
    """
    if spec.kind != "mlp":
        raise ValueError(f"spec.kind: frozen learning rate is defined for MLPs, got {spec.kind!r}")
    f = spec.formats
    if f.coef.quant not in _ROUND_TO_NEAREST:
        raise ValueError(f"formats.coef: quantization {f.coef.quant} does not round small updates to zero "
                         f"(need one of {', '.join(_ROUND_TO_NEAREST)})")
    w_grad = f.grad.width
    need = w_grad + 1 - f.grad.frac_bits + f.coef.frac_bits  # bias terms
    for a in (f.input, f.act):  # layer inputs: |e * a| <= 2**(W_grad + W_a - 2)
        need = max(need, w_grad + a.width - f.grad.frac_bits - a.frac_bits + f.coef.frac_bits)
    return 2.0 ** -max(need, 0)


def frozen_spec(spec):
    """``spec`` with :func:`frozen_learning_rate` and the sequential schedule: a learner that
    predicts exactly like ``spec`` and never changes its parameters (raises as that function)."""
    return spec.replace(learning_rate=frozen_learning_rate(spec), schedule="sequential")


def rtl_available() -> bool:
    """True when the ``rtl`` backend runs here (the generator and the Verilator toolchain are installed)."""
    from ...backends import get_backend

    return get_backend("rtl").available()


def check_on_hardware(model, sets: dict, *, backends=BACKENDS, progress: bool = False) -> dict:
    """Run a brevitas QuantMLP's inputs through the fixed-point backends and compare with brevitas.

    Args:
        model: a trained :class:`~onchip.methods.unlearning.models.QuantMLP` with
            ``act="fixed"`` (any brevitas network the front end accepts).
        sets: ``{name: (x, y)}``: float features ``(n, n_in)`` (standardised, as
            given to the model) and integer labels ``(n,)``.
        backends: any of :data:`BACKENDS`.
        progress: tqdm bars of the HLS and RTL runs.

    Returns:
        ``{"spec": spec dict (golden, hls), "rtl_learning_rate": float, "sets": {name: {"n", "brevitas_acc",
        backend: {"acc", "argmax_mismatches", "output_mismatches"}}}, "rtl_parameters_unchanged":
        bool (rtl only), "all_equal": bool}``. ``argmax_mismatches`` counts samples whose class
        decision differs from brevitas'; ``output_mismatches`` samples whose raw output
        vector differs from brevitas' output integers.

    Raises:
        ValueError: unknown backend, empty ``sets``, mismatched lengths, or a network the
            front end refuses (message names the layer).
        RuntimeError: a learner changed its parameters in inference mode.
        onchip.verilator.ToolchainError / BuildError / SimulationError: the ``rtl`` backend's
            (:func:`onchip.verilator.backend.simulate`).
    """
    from ...frontends.brevitas import brevitas_outputs
    from .models import export_layers, predict_logits, quantize_input

    unknown = [b for b in backends if b not in BACKENDS]
    if unknown or not backends:
        raise ValueError(f"backends: {unknown or backends!r} (choose from {', '.join(BACKENDS)})")
    if not sets:
        raise ValueError("sets: no data set to check")
    for name, (x, y) in sets.items():
        if len(x) != len(y) or len(x) == 0:
            raise ValueError(f"sets[{name!r}]: need as many labels as samples (>0), got {len(x)} and {len(y)}")
    from ...frontends.brevitas import from_brevitas

    imp = from_brevitas(model, name="unlearned")
    spec, theta = imp.spec, imp.theta
    exported = export_layers(model)
    names = list(sets)
    bounds = np.cumsum([0] + [len(sets[n][0]) for n in names])
    x_all = np.concatenate([np.asarray(sets[n][0], np.float32) for n in names])
    # the device's input integers come from brevitas' input quantizer, not from a backend
    x_raw = quantize_input(exported, x_all)
    want_raw = brevitas_outputs(model, x_all)
    want_cls = predict_logits(model, x_all).argmax(axis=1)

    from ...backends import get_backend

    result = {"spec": spec.to_dict(), "sets": {}}
    raw = {}
    for name in backends:
        if name == "rtl":
            # the serial datapath keeps the weights in RAM: a wide network converts and builds
            rtl_spec = frozen_spec(spec).replace(datapath="serial")
            result["rtl_learning_rate"] = rtl_spec.learning_rate
            zeros = np.zeros((len(x_raw), spec.n_out), np.int64)
            raw["rtl"], after = get_backend("rtl").run(rtl_spec, x_raw, zeros, theta=theta, progress=progress)
            result["rtl_parameters_unchanged"] = bool(np.array_equal(after, theta))
        else:
            raw[name], after = get_backend(name).run(spec, x_raw, None, theta=theta, learn=False, progress=progress)
            if not np.array_equal(after, theta):
                raise RuntimeError(f"the {name} learner changed its parameters in inference mode")
    all_equal = result.get("rtl_parameters_unchanged", True)
    for k, name in enumerate(names):
        sl = slice(bounds[k], bounds[k + 1])
        y = np.asarray(sets[name][1])
        row = {"n": int(len(y)), "brevitas_acc": float((want_cls[sl] == y).mean())}
        for b, out in raw.items():
            cls = out[sl].argmax(axis=1)
            row[b] = {
                "acc": float((cls == y).mean()),
                "argmax_mismatches": int((cls != want_cls[sl]).sum()),
                "output_mismatches": int((out[sl] != want_raw[sl]).any(axis=1).sum()),
            }
            all_equal &= row[b]["argmax_mismatches"] == 0 and row[b]["output_mismatches"] == 0
        result["sets"][name] = row
    result["all_equal"] = bool(all_equal)
    return result


def split_sets(split) -> dict:
    """``{"forget", "retain", "test"}`` -> ``(x, y)`` of an unlearning :class:`~.data.Split`."""
    return {
        "forget": (split.x_train[split.forget], split.y_train[split.forget]),
        "retain": (split.x_train[split.retain], split.y_train[split.retain]),
        "test": (split.x_test, split.y_test),
    }
