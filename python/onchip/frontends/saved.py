"""Saved models on disk -> an import folder: ``spec.toml``, ``theta.npy``, ``report.json``, ``report.md``.

The one function :func:`import_model` behind ``onchip import``: it loads a saved QKeras model
(``.h5``, ``.keras``) or pykan model (a ``saveckpt`` checkpoint or a checkpoint folder), converts it (:func:`onchip.from_qkeras`, :func:`onchip.from_pykan`), checks the
conversion on the given inputs or a seeded probe, and writes the folder whole or not at all.
Every hardware command and ``onchip run`` take the pair as ``--spec DIR/spec.toml --theta
DIR/theta.npy``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

#: file endings read as QKeras (Keras) models; anything else is tried as pykan
KERAS_SUFFIXES = (".h5", ".hdf5", ".keras")
#: probe size of the QKeras check when no inputs are given
QKERAS_PROBE = 3000


def framework_of(path: str | os.PathLike) -> str:
    """``"qkeras"`` for a Keras file (:data:`KERAS_SUFFIXES`), else ``"pykan"``."""
    return "qkeras" if str(path).lower().endswith(KERAS_SUFFIXES) else "pykan"


def _load_inputs(data, n_in: int) -> np.ndarray | None:
    if data is None:
        return None
    from ..io import read_npy

    x = read_npy(data, "--data")
    if x.ndim != 2 or x.shape[1] != n_in or not np.issubdtype(x.dtype, np.number) or not np.isfinite(x).all():
        raise ValueError(f"--data {data}: need finite inputs of shape (N, {n_in}), got {x.dtype} {x.shape}")
    return x.astype(np.float64)


def qkeras_check(model, imported, x=None, seed: int = 0) -> dict:
    """The golden model against QKeras' own forward pass on ``x`` or a seeded probe.

    The probe: :data:`QKERAS_PROBE` inputs uniform over 1.25 times the input format's range
    (saturating inputs included). A model without an input quantizer is compared on the inputs
    rounded onto the input format's grid (:func:`onchip.frontends.qkeras.reference_outputs`).

    Returns:
        ``{"source": "data" | "probe", "samples", "outputs", "differing", "max_lsb",
        "float32_exact", "inputs_on_grid", "outputs_rounded", "output_error"}``: outputs compared,
        how many differ and by how many ``act`` LSB at most; ``output_error``: for an output
        rounded into ``output_format``, the learner against QKeras' own unrounded output
        (:func:`onchip.frontends.qkeras.rounded_output_error`), else None.
    """
    from ..model import GoldenLearner
    from .qkeras import reference_outputs, rounded_output_error

    spec = imported.spec
    source = "data" if x is not None else "probe"
    if x is None:
        f = spec.formats.input
        x = np.random.default_rng(seed).uniform(1.25 * f.min_value, 1.25 * f.max_value, (QKERAS_PROBE, spec.n_in))
    x, theirs = reference_outputs(model, imported, x)  # the values QKeras sees, and its outputs
    golden = GoldenLearner(spec, imported.theta)
    ours = golden.predict(golden.quantize_inputs(x))
    diff = np.abs(ours - theirs)
    return {"source": source, "samples": int(len(x)), "outputs": int(diff.size),
            "differing": int(np.count_nonzero(diff)), "max_lsb": int(diff.max()) if diff.size else 0,
            "float32_exact": all(d["exact"] for d in imported.float32_exact),
            "inputs_on_grid": not imported.input_quantized, "outputs_rounded": imported.output_rounded,
            "output_error": rounded_output_error(model, imported, x, ours)}


def rounded_output_warning(check: dict, layers: list[dict]) -> str | None:
    """The report's first line for an output rounded into ``output_format`` (None otherwise): not
    exact, and by how much against QKeras' own output (``check`` of :func:`qkeras_check`)."""
    e = check.get("output_error")
    if e is None:
        return None
    out = next(l for l in reversed(layers) if l["kind"] == "output")
    return (f"not exact: the unquantized output of {out['layer']!r} is rounded into {out['format']} (--output-format; "
            f"without it the output is exact in the last sum's own format): against QKeras' own output on "
            f"{e['samples']} {check['source']} inputs, RMS {e['rms_lsb']:.3f} LSB, max {e['max_lsb']:.3f} LSB"
            + (f", {e['saturated']:.1%} saturated" if e["saturated"] else "")
            + "; leave --output-format unset for an exact import")


def _markdown(report: dict) -> str:
    spec = report["spec"]
    lines = [f"# Import of {report['model']}", ""]
    lines += [f"**Warning:** {w}" for w in report.get("warnings", ())] + [""] * bool(report.get("warnings"))
    lines += [
             f"{report['framework']} model -> {spec['kind']} learner {spec['widths']}, "
             f"{report['parameters']} parameters (spec.toml, theta.npy).", "",
             "Formats: " + ", ".join(f"{k} `{v}`" for k, v in spec["formats"].items()), ""]
    if report["framework"] == "qkeras":
        lines += ["| layer | kind | quantizer | format |", "|---|---|---|---|"]
        lines += [f"| {l['layer']} | {l['kind']} | `{l['quantizer']}` | `{l['format']}` |" for l in report["layers"]]
        c = report["check"]
        lines += [f"- {note}" for note in report["notes"]] + ([""] if report["notes"] else [])
        exact = "exact" if c["float32_exact"] else "not exact for every input (wide accumulators)"
        lines += ["", "QKeras' float32 dot products: " + exact + "; per dense layer: " + ", ".join(
            f"{d['layer']} {d['accumulator_bits']} bits" for d in report["float32_exact"]) + ".", "",
            f"Check on {c['samples']} inputs ({c['source']}"
            + (", rounded onto the input format's grid" if c.get("inputs_on_grid") else "")
            + f"): {c['outputs'] - c['differing']} of {c['outputs']} outputs equal QKeras' own outputs"
            + (" rounded into output_format" if c.get("outputs_rounded") else "")
            + (f", the others differ by at most {c['max_lsb']} LSB." if c["differing"] else
               "." if report.get("folded") else " (bit-exact).")
            + (" Batch normalisation is folded: the import is not exact, this is its measured error."
               if report.get("folded") else "")]
    else:
        g = report["grid"]
        lines += [f"Grid: [{g['lo']}, {g['hi']}), G = {g['grid_size']}, k = {g['spline_order']}, cell width "
                  f"{g['cell_width']}, basis table of 2^{g['basis_table_bits']} entries (from the {g['source']}); "
                  "the model's grids: " + "; ".join(
                      f"layer {n}: G {m['G']}, k {m['k']}, [{m['lo']:.4g}, {m['hi']:.4g}]"
                      + ("" if m["uniform"] else " non-uniform") for n, m in enumerate(g["model_grids"])) + ".",
                  "", "Per edge, fitted spline against pykan over the grid range (max / RMS; LSB of act):", "",
                  "| layer | i | j | max | RMS | max, quantized | RMS, quantized |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {e['layer']} | {e['i']} | {e['j']} | {e['max_error']:.3g} ({e['max_error_lsb']:.3g}) | "
                  f"{e['rms_error']:.3g} ({e['rms_error_lsb']:.3g}) | {e['max_error_quantized']:.3g} "
                  f"({e['max_error_quantized_lsb']:.3g}) | {e['rms_error_quantized']:.3g} "
                  f"({e['rms_error_quantized_lsb']:.3g}) |" for e in report["edges"]]
        o = report["output"]
        lines += ["", f"Network output against pykan on {o['samples']} inputs ({o['source']}): max "
                  f"{o['max_error']:.4g} ({o['max_error_lsb']:.3g} LSB), RMS {o['rms_error']:.4g} "
                  f"({o['rms_error_lsb']:.3g} LSB); the float projection alone: max {o['float_max_error']:.4g}, "
                  f"RMS {o['float_rms_error']:.4g}; inputs outside the grid {o['clamped_fraction']:.3g}, samples "
                  f"leaving a pykan grid interval {o['outside_model_grid_fraction']:.3g} (the edges follow pykan over the range "
                  "the inputs reach)."]
    return "\n".join(lines) + "\n"


def import_model(path: str | os.PathLike, out: str | os.PathLike, *, template=None, data=None,
                 coef: str | None = None, name: str | None = None, input_format: str | None = None,
                 output_format: str | None = None, fold_batchnorm: bool = False) -> dict:
    """Convert a saved model and write the import folder ``out``.

    Args:
        path: a QKeras ``.h5``/``.keras`` file, or a pykan ``saveckpt`` checkpoint (prefix,
            ``*_config.yml``, folder; see :func:`onchip.frontends.pykan.load_pykan`).
        out: the folder (replaced whole; see :func:`onchip.io.atomic_output_dir`).
        template: pykan only: a KAN spec whose grid and formats to take.
        data: a ``.npy`` of inputs (N, n_in) to check the conversion on (default: a seeded probe).
        coef: QKeras only: the ``coef`` format (see :func:`onchip.from_qkeras`).
        input_format: QKeras only: the input format of a model without an input quantizer
            (default: derived from ``data``, see :func:`onchip.from_qkeras`).
        output_format: QKeras only: the format an unquantized output is rounded into.
        fold_batchnorm: QKeras only: fold batch normalisation into the QDense before it (not
            exact; the check measures the error).
        name: the spec's name (default: the model file's stem).

    Returns:
        the report (also ``report.json``): ``model``, ``framework``, ``spec`` (its dict),
        ``parameters``, and for QKeras ``layers``, ``notes``, ``skipped``, ``float32_exact`` and ``check``
        (:func:`qkeras_check`), for pykan ``grid``, ``edges``, ``output`` and ``warnings`` (one
        line each; :class:`onchip.frontends.pykan.PykanImport`).

    Raises:
        ValueError: the model cannot be loaded or converted, an option that does not apply to its
            framework, or bad ``data``; the message names the model, layer or flag.
        FileNotFoundError: ``path`` does not exist.
        onchip.extras.MissingExtra: the framework's extra is missing.
    """
    from ..io import atomic_output_dir, check_output_dir, write_json

    check_output_dir(out)
    if not Path(path).exists() and not Path(f"{path}_config.yml").is_file():
        raise FileNotFoundError(f"MODEL: {str(path)!r} does not exist")
    framework = framework_of(path)
    stem = Path(str(path).rstrip("/")).name.removesuffix("_config.yml")
    for suffix in KERAS_SUFFIXES:
        stem = stem.removesuffix(suffix)
    name = name or stem or framework
    report = {"model": str(path), "framework": framework}
    if framework == "qkeras":
        if template is not None:
            raise ValueError("--template applies to pykan models (a QKeras model's formats are its quantizers')")
        from .qkeras import from_qkeras, load_qkeras

        model = load_qkeras(path)
        x = _load_inputs(data, int(model.inputs[0].shape[-1]))
        try:
            imported = from_qkeras(model, coef=coef, name=name, input_format=input_format,
                                   output_format=output_format, data=x, fold_batchnorm=fold_batchnorm)
        except ValueError as exc:  # the API's argument names as the command's flags
            text = str(exc)
            for arg, flag in (("input_format", "--input-format"), ("output_format", "--output-format")):
                text = text.replace(f"{arg}: ", f"{flag}: ")
            raise ValueError(text) from None
        check = qkeras_check(model, imported, x)
        warning = rounded_output_warning(check, list(imported.layers))
        report.update(layers=list(imported.layers), notes=list(imported.notes), skipped=list(imported.skipped),
                      folded=list(imported.folded), warnings=[warning] if warning else [],
                      float32_exact=list(imported.float32_exact), check=check)
    else:
        if coef is not None:
            raise ValueError("--coef applies to QKeras models (give a pykan import's formats with --template)")
        for flag, value in (("--input-format", input_format), ("--output-format", output_format),
                            ("--fold-batchnorm", fold_batchnorm or None)):
            if value is not None:
                raise ValueError(f"{flag} applies to QKeras models (give a pykan import's formats with --template)")
        from .pykan import from_pykan, load_pykan

        model = load_pykan(path)
        n_in = int(model.width_in[0])
        imported = from_pykan(model, template, x=_load_inputs(data, n_in), name=name)
        report.update(warnings=list(imported.warnings), grid=imported.grid, edges=list(imported.edges),
                      output=imported.output)
    spec = imported.spec
    report = {**report, "spec": spec.to_dict(), "parameters": spec.parameter_count()}
    with atomic_output_dir(out) as stage:
        (stage / "spec.toml").write_text(spec.to_toml())
        np.save(stage / "theta.npy", imported.theta.astype(np.int64))
        write_json(stage / "report.json", report)
        (stage / "report.md").write_text(_markdown(report))
    return report
