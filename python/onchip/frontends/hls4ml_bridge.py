"""hls4ml bridge: the same brevitas or QKeras network through hls4ml (inference only).

brevitas -> QONNX (``brevitas.export.export_qonnx``) -> qonnx cleanup and
Gemm -> MatMul -> ``hls4ml.converters.convert_from_onnx_model`` (Vivado
backend) -> ``compile()`` (g++ C simulation, no Vivado needed). The hls4ml
PyTorch front end of hls4ml 1.3 does not parse brevitas layers; QONNX is the
route hls4ml documents for quantized PyTorch models.

hls4ml maps each QONNX ``Quant`` node onto an ``ap_fixed`` type with the node's
bit width, scale and rounding (ROUND -> AP_RND_CONV, as brevitas' torch.round)
and saturation; the precision of the other results (MatMul, the bias Add) is
inferred or falls back to ``default_precision`` (AP_TRN, AP_WRAP), which is
where its rounding can differ from brevitas' and ours: see :func:`compare`.

QKeras networks go through hls4ml's own Keras 2 converter (:func:`convert_qkeras`); its two
differences from QKeras' arithmetic are described there.

Source: hls4ml (Fahim et al., "hls4ml: An Open-Source Codesign Workflow to
Empower Scientific Low-Power Machine Learning Devices", arXiv:2103.05579) and
QONNX (Pappalardo et al., arXiv:2206.07527).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def to_qonnx(model, n_in: int, path: str | Path):
    """Export ``model`` to QONNX at ``path`` and return the cleaned qonnx ModelWrapper.

    Raises:
        onchip.extras.MissingExtra: brevitas, onnx, onnxoptimizer, onnxscript or qonnx missing
            (the ``ml`` extra).
    """
    from ..extras import need

    for package in ("torch", "brevitas", "onnx", "onnxscript", "onnxoptimizer", "qonnx"):
        need(package, "the QONNX export of the hls4ml bridge")
    import torch
    from brevitas.export import export_qonnx
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    was_training = model.training
    model.eval()
    try:
        export_qonnx(model, input_t=torch.zeros(1, n_in), export_path=str(path))
    finally:
        model.train(was_training)
    wrapper = cleanup_model(ModelWrapper(str(path)))
    return cleanup_model(wrapper.transform(GemmToMatMul()))


def convert(model, n_in: int, output_dir: str | Path, *, default_precision: str = "fixed<16,6>"):
    """Convert ``model`` with hls4ml and compile it for C simulation.

    Args:
        model: a brevitas network (as for :func:`onchip.frontends.brevitas.from_brevitas`).
        n_in: input features.
        output_dir: hls4ml project folder (created).
        default_precision: hls4ml's precision for results no quantizer fixes.

    Returns:
        The compiled ``hls4ml`` model (``.predict(x)`` runs the C simulation).
    """
    import hls4ml

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    qonnx_model = to_qonnx(model, n_in, output_dir / "model.qonnx.onnx")
    config = hls4ml.utils.config.config_from_onnx_model(
        qonnx_model, granularity="name", backend="Vivado", default_precision=default_precision
    )
    hls_model = hls4ml.converters.convert_from_onnx_model(
        qonnx_model, hls_config=config, output_dir=str(output_dir / "hls4ml_prj"), backend="Vivado"
    )
    hls_model.compile()
    return hls_model


def convert_qkeras(model, output_dir: str | Path, *, precision: dict[str, str] | None = None,
                   default_precision: str = "fixed<16,6>"):
    """Convert a QKeras model with hls4ml's Keras converter and compile it for C simulation.

    hls4ml 1.3 chooses its Keras 3 front end whenever the ``keras`` package is Keras 3, which it is
    beside tf-keras; QKeras models are Keras 2 models, so ``keras`` names tf-keras during the
    conversion. With the defaults hls4ml differs from QKeras (and onchip) in two places: the
    input layer's type is ``default_precision`` (TRN, WRAP), so inputs are truncated before the
    input quantizer rounds them; and a QActivation(quantized_bits) right after a QDense is merged
    into it (MergeLinearActivation) without its precision, so the output is the QDense's exact,
    unrounded sum. ``precision`` sets result types to undo both (``{input layer: input format,
    last QDense: output format}``).

    Args:
        model: a QKeras model (as for :func:`onchip.frontends.qkeras.from_qkeras`).
        output_dir: hls4ml project folder (created).
        precision: layer name -> hls4ml result precision (``"fixed<8,3,RND_CONV,SAT>"``).
        default_precision: hls4ml's precision for results nothing else fixes.

    Returns:
        The compiled ``hls4ml`` model.

    Raises:
        ValueError: a ``precision`` key that names no layer of hls4ml's configuration.
    """
    import sys

    import hls4ml

    from .qkeras import modules

    modules()
    import tf_keras

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    saved = sys.modules.get("keras")
    sys.modules["keras"] = tf_keras
    try:
        config = hls4ml.utils.config_from_keras_model(model, granularity="name", backend="Vivado",
                                                      default_precision=default_precision)
        for name, value in (precision or {}).items():
            if name not in config["LayerName"]:
                raise ValueError(f"precision: no layer {name!r} (hls4ml's layers: {', '.join(config['LayerName'])})")
            config["LayerName"][name]["Precision"]["result"] = value
        hls_model = hls4ml.converters.convert_from_keras_model(
            model, hls_config=config, output_dir=str(output_dir / "hls4ml_prj"), backend="Vivado")
    finally:
        if saved is None:
            sys.modules.pop("keras", None)
        else:
            sys.modules["keras"] = saved
    hls_model.compile()
    return hls_model


def result_types(hls_model) -> dict[str, str]:
    """Layer name -> the ap_fixed type hls4ml gave its result."""
    return {layer.name: str(layer.get_output_variable().type.precision) for layer in hls_model.get_layers()}


def compare(hls_model, x, reference_raw: np.ndarray, lsb: float) -> dict:
    """hls4ml's outputs against raw reference outputs (ours, equal to brevitas').

    Args:
        hls_model: from :func:`convert`.
        x: float inputs (N, n_in), used as float32.
        reference_raw: (N, n_out) raw outputs in the output format.
        lsb: value of one raw step of the output format.

    Returns:
        ``{"samples", "outputs", "differing", "differing_fraction", "max_lsb",
        "mean_lsb", "histogram": {lsb difference: count}}``; differences are
        hls4ml minus reference, in output LSBs (exact integers: hls4ml's outputs are
        on the output grid).
    """
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    got = np.asarray(hls_model.predict(x), dtype=np.float64).reshape(reference_raw.shape)
    diff_lsb = got / lsb - reference_raw
    if not np.allclose(diff_lsb, np.round(diff_lsb)):
        raise ValueError("hls4ml outputs are not on the output grid: check the output quantizer")
    diff = np.round(diff_lsb).astype(np.int64)
    values, counts = np.unique(diff, return_counts=True)
    return {
        "samples": int(reference_raw.shape[0]),
        "outputs": int(diff.size),
        "differing": int(np.count_nonzero(diff)),
        "differing_fraction": float(np.count_nonzero(diff) / max(diff.size, 1)),
        "max_lsb": int(np.abs(diff).max()) if diff.size else 0,
        "mean_lsb": float(diff.mean()) if diff.size else 0.0,
        "histogram": {int(v): int(c) for v, c in zip(values, counts)},
    }
