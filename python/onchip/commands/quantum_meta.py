"""``onchip quantum-meta``: adaptation-gain scaling law and few-shot budget protocol for one gate.

Method: arXiv 2601.18973 (see onchip.methods.quantum_meta). Parses the flags into a
:class:`~onchip.methods.quantum_meta.experiment.QuantumMetaConfig` and runs
:func:`onchip.methods.quantum_meta.experiment.run` over the seeds, which writes into --out:
metrics.json (headline with paired differences over seeds, positive control, per-seed figures,
everything measured), results.md, law.json (fitted c, beta, R^2 and the linearity check per seed),
gain_vs_K.png and gain_vs_variance.png (first seed) and per_seed.png.
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register the ``quantum-meta`` sub-command."""
    p = subparsers.add_parser(
        "quantum-meta",
        help="meta-learned gate calibration: adaptation-gain scaling law and budget protocol",
        description="Measure G_K ~ c sigma^2 (1 - exp(-beta K)) for a one-qubit X or a CZ gate "
                    "(FOMAML policy, Lindblad simulation), the few-shot budget protocol in and "
                    "out of distribution, and the linear-quadratic check.",
    )
    p.add_argument("--gate", required=True, choices=("x", "cz"), help="x (one qubit) or cz (two qubits)")
    p.add_argument("--seed", type=_args.nonneg_int, nargs="+", default=[0, 1, 2, 3, 4],
                   help="two or more distinct seeds (default: 0 1 2 3 4); each seeds every random draw of one run")
    _args.add_out(p)
    p.add_argument("--n-test", type=_args.int_range(2), default=16, help="test devices per set (default 16)")
    p.add_argument("--meta-iters", type=_args.positive_int, default=60, help="FOMAML outer iterations (default 60)")
    p.add_argument("--ood-shift", type=_args.float_range(1), default=10.0,
                   help="out-of-distribution shift of rates and miscalibrations (default 10)")
    p.add_argument("--fraction", type=_args.float_range(0, 1, lo_open=True, hi_open=True), default=0.9,
                   help="fraction f defining K* (default 0.9)")
    p.add_argument("--no-lqr", action="store_true", help="skip the mass-spring-damper check")
    _args.add_quiet(p)
    _args.add_quick(p, {"seed": [0, 1], "n_test": 4, "meta_iters": 4},
                    help="a seconds-long run (what the tests run): seeds 0 1, 4 test devices, 4 meta-iterations, "
                         "a 3-spread grid, K = 4, no LQ check; flags given win")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked, nothing written on a bad one) and run the measurement; returns 0.
    With ``--quick`` the settings start from ``QUICK_SETTINGS`` and take only the flags given."""
    from dataclasses import fields

    from onchip.methods.quantum_meta.experiment import (QUICK_SETTINGS, ExperimentSettings, QuantumMetaConfig,
                                                        run as run_experiment)

    _args.apply_quick(args)
    flags = dict(n_test=args.n_test, meta_iters=args.meta_iters, ood_shift=args.ood_shift, fraction=args.fraction)
    if args.quick:
        base = {f.name: getattr(QUICK_SETTINGS, f.name) for f in fields(QUICK_SETTINGS)}
        settings = _args.build_config(ExperimentSettings, **{**base, **flags})
    else:
        settings = _args.build_config(ExperimentSettings, **flags, lqr=not args.no_lqr)
    config = _args.build_config(QuantumMetaConfig, gate=args.gate, seeds=tuple(args.seed), settings=settings,
                                out=args.out, progress=not args.quiet, command=args.command_line,
                                flags={"seeds": "--seed"})
    run_experiment(config)
    return 0
