"""``onchip unlearn``: Orthogonal Entropy Unlearning and baselines on a quantized MLP.

Trains a brevitas MLP (power-of-two scales, weights and activations at
``--bits``) with QAT on a scikit-learn data set, unlearns a forget request
with each method, and writes ``metrics.json``, ``comparison.csv``,
``comparison.md`` and ``comparison.png`` (plus ``ablation.*`` with
``--ablation``) into ``--out``. ``--hardware`` also runs every unlearned
model through the fixed-point golden model, the HLS C simulation and the RTL
(``--act fixed`` only) and writes ``hardware.json``/``.md``/``.png``.
The experiment is :func:`onchip.methods.unlearning.experiment.run`.
"""

from __future__ import annotations

import argparse
import sys

from . import _args


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``onchip unlearn``."""
    from onchip.methods.unlearning.experiment import METHOD_CHOICES

    p = subparsers.add_parser(
        "unlearn",
        help="unlearn a forget set from a quantized MLP (OEU, arXiv:2602.00567) and compare baselines",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", default="digits", help="digits | breast-cancer (default digits)")
    p.add_argument("--bits", type=int, default=4, help="weight/activation bit width: 8, 4 or 2 (default 4)")
    p.add_argument("--forget", default="class:3", help="forget request: class:N or random:F (default class:3)")
    p.add_argument("--method", default="all", help=f"one of {', '.join(METHOD_CHOICES)} (default all)")
    _args.add_seed(p, many=True, default=range(10), what="the tables give mean and std over them")
    _args.add_out(p)
    g = p.add_argument_group("unlearning")
    g.add_argument("--epochs", type=_args.positive_int, default=10, help="passes over the forget set (default 10)")
    g.add_argument("--lr", type=_args.positive_float, default=0.5,
                   help="SGD learning rate on latent weights (default 0.5, the rate sweeps/unlearning chose by "
                        "its rule on calibration seeds)")
    g.add_argument("--retain-weight", type=_args.nonneg_float, default=1.0,
                   help="lambda of the retain term (default 1)")
    g.add_argument("--projection", default="global", help="OEU projection: global | layer | none (default global)")
    g.add_argument("--project-when", default="always", help="OEU projection rule: always | conflict (default always)")
    g.add_argument("--ablation", action="store_true", help="also run the OEU variant grid (projection x rule x lambda)")
    g.add_argument("--export", action="store_true",
                   help="also write export/<method>-seed<S>.json: integer weights, biases, power-of-two "
                        "exponents and the integer inputs, labels and predictions of the forget/retain/test sets")
    g.add_argument("--hardware", action="store_true",
                   help="also run each unlearned model's forget/retain/test inputs through the fixed-point "
                        "backends (brevitas front end; needs --act fixed) and write hardware.json")
    g.add_argument("--hardware-backends", default="golden,hls,rtl",
                   help="backends of --hardware, comma separated from golden, hls, rtl (default all three; "
                        "rtl compiles one Verilator model per network: minutes each)")
    g = p.add_argument_group("positive control (needs two or more seeds)")
    g.add_argument("--control", default="random:0.5",
                   help="forget request of the positive control: OEU against OEU-noproj with no retain term "
                        "(lambda 0), where only the projection keeps the retain set; none: no control "
                        "(default random:0.5)")
    g.add_argument("--control-lr", type=_args.positive_float, default=0.05,
                   help="the control's SGD learning rate (default 0.05, as the committed runs)")
    g.add_argument("--control-epochs", type=_args.positive_int, default=None,
                   help="the control's passes over its forget set (default: --epochs)")
    g.add_argument("--control-bits", type=int, default=2,
                   help="the control's bit width (default 2, as the committed runs; when it differs from "
                        "--bits, one more original per seed at these bits)")
    g = p.add_argument_group("model")
    g.add_argument("--hidden", type=_args.int_list(1), default="64,32",
                   help="hidden widths, comma separated (default 64,32)")
    g.add_argument("--act", default="fixed",
                   help="activation layout: fixed (one constant power-of-two format for every hidden ReLU "
                        "and quantized logits: runs on the hardware) | learned (per-layer learned scales, "
                        "float logits) (default fixed)")
    g.add_argument("--train-epochs", type=_args.positive_int, default=40,
                   help="QAT epochs of original and retrained model (default 40)")
    g.add_argument("--threads", type=_args.positive_int, default=1, help="torch CPU threads (default 1)")
    _args.add_quiet(g, "--no-progress")
    _args.add_quick(p, {"seed": [0, 1, 2], "train_epochs": 3, "epochs": 2, "hidden": [16]})
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line
    return p


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked, nothing written on a bad one) and run the comparison.

    Returns 0, or 1 when ``--hardware`` found a fixed-point backend disagreeing with brevitas.
    """
    from onchip.methods.unlearning.experiment import UnlearningExperiment, run as run_experiment
    from onchip.methods.unlearning.methods import UnlearnConfig

    _args.apply_quick(args)
    config = _args.build_config(
        UnlearningExperiment, flags={"seeds": "--seed"},
        dataset=args.dataset, bits=args.bits, forget=args.forget, method=args.method, seeds=args.seed,
        hidden=args.hidden, act=args.act, threads=args.threads,
        unlearn=_args.build_config(UnlearnConfig, epochs=args.epochs, lr=args.lr, retain_weight=args.retain_weight,
                                   projection=args.projection, project_when=args.project_when,
                                   train_epochs=args.train_epochs),
        ablation=args.ablation, export=args.export, hardware=args.hardware,
        hardware_backends=[b for b in args.hardware_backends.split(",") if b], control=args.control,
        control_lr=args.control_lr, control_epochs=args.control_epochs, control_bits=args.control_bits, out=args.out,
        progress=not args.quiet, command=args.command_line)
    result = run_experiment(config)
    if "hardware" in result and not all(row["all_equal"] for row in result["hardware"]["summary"].values()):
        print("hardware check: MISMATCH between brevitas and a fixed-point backend", file=sys.stderr)
        return 1
    return 0
