"""``onchip import``: a saved QKeras or pykan model -> spec.toml + theta.npy (+ what the conversion did)."""

from __future__ import annotations

from . import _args

DESCRIPTION = """Convert a saved model into an onchip learner: a QKeras MLP (.h5 or .keras; QDense +
QActivation with power-of-two quantizers, mapped exactly) or a pykan KAN (a checkpoint written by
model.saveckpt(prefix), or its folder; projected onto onchip's uniform power-of-two grid). Writes
spec.toml, theta.npy (raw initial parameters) and report.json / report.md (the layer mapping and
the bit-exactness check against QKeras, or the per-edge and output errors of the projection) into
--out. Then: onchip verify|generate|synth|run --spec OUT/spec.toml --theta OUT/theta.npy."""


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="convert a saved QKeras or pykan model into a spec and parameters",
                       description=DESCRIPTION)
    p.add_argument("model", metavar="MODEL", help="a QKeras .h5/.keras file, or a pykan checkpoint (the prefix given to model.saveckpt, its _config.yml, "
                        "or its folder)")
    p.add_argument("--template", default=None,
                   help="pykan: a KAN spec (preset or TOML) whose grid and formats to take (default: derived)")
    p.add_argument("--coef", default=None,
                   help="QKeras: the coef format, e.g. 'ap_fixed<16,4,RND_CONV,SAT>' (default: the narrowest "
                        "holding every quantizer's values)")
    p.add_argument("--input-format", default=None,
                   help="QKeras: the input format of a model without an input quantizer, e.g. "
                        "'ap_fixed<16,6,RND_CONV,SAT>' (default: the narrowest 16-bit format holding --data's range)")
    p.add_argument("--output-format", default=None,
                   help="QKeras: the format a model without an output quantizer rounds its outputs into "
                        "(default: the exact format of the last layer's sum)")
    p.add_argument("--fold-batchnorm", action="store_true",
                   help="QKeras: fold each BatchNormalization into the QDense before it and re-quantize (not exact: "
                        "the report gives the measured output error)")
    p.add_argument("--data", default=None,
                   help="a .npy of inputs (N, n_in) to check the conversion on (default: a seeded probe); pykan: the "
                        "edges also cover the range these inputs reach")
    p.add_argument("--name", default=None, help="the spec's name (default: the model file's name)")
    _args.add_out(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def run(args) -> int:
    from ..frontends.saved import import_model

    report = import_model(args.model, args.out, template=args.template, data=args.data, coef=args.coef,
                          name=args.name, input_format=args.input_format, output_format=args.output_format,
                          fold_batchnorm=args.fold_batchnorm)
    spec = report["spec"]
    for warning in report.get("warnings", ()):  # first: what the user must know
        print(f"warning: {warning}")
    if report["framework"] == "qkeras":
        c = report["check"]
        theirs = "QKeras' rounded into --output-format" if c.get("outputs_rounded") else "QKeras'"
        check = (f"{c['outputs'] - c['differing']} of {c['outputs']} outputs equal {theirs} on {c['samples']} inputs"
                 + (f" (others within {c['max_lsb']} LSB)" if c["differing"] else ""))
    else:
        o = report["output"]
        check = (f"output error against pykan on {o['samples']} inputs: max {o['max_error']:.3g}, "
                 f"RMS {o['rms_error']:.3g} ({o['rms_error_lsb']:.3g} LSB)")
    print(f"{report['framework']} -> {spec['kind']} {spec['widths']}, {report['parameters']} parameters; {check}")
    for note in report.get("notes", ()):
        print(f"  {note}")
    print(f"wrote {args.out}/ (spec.toml, theta.npy, report.json, report.md)")
    return 0
