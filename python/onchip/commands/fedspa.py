"""``onchip fedspa``: federated semantic-visual prototype alignment vs zero-shot, local, FedAvg and FedCoOp.

Parses the flags into a :class:`~onchip.methods.fedspa.experiment.FedSpaConfig` and runs
:func:`onchip.methods.fedspa.experiment.run`, which writes ``metrics.json``, ``results.md``,
``accuracy.png``, ``control.png`` and ``domains.png``. Method: FedSPA (public code eejiarong/FedSPA-main;
see seeds/fedspa.md).
"""

from __future__ import annotations

import argparse
import os

from . import _args

QUICK = {"clients": 3, "shots": 1, "rounds": 1, "local_epochs": 1, "server_epochs": 1,
         "test_per_client": 10, "clip_steps": 30}


def add_parser(subparsers) -> None:
    """Register ``onchip fedspa``."""
    from onchip.methods.fedspa import METHODS

    p = subparsers.add_parser(
        "fedspa",
        help="federated prototype adapters with server-side semantic alignment (FedSPA) and baselines",
        description="Clients with different fonts / handwriting and Dirichlet label skew adapt class prototypes "
                    "on frozen features of a tiny CLIP (CNN trained into the MiniLM text space); the server aligns "
                    "global semantic prototypes to them. Reports personalised and global accuracy, the fallback rate, "
                    "client seconds and uploaded floats per round against zero-shot, local-only, FedAvg and a "
                    "FedCoOp-like arm (equal rounds and local passes), paired over seeds, and a positive control.",
    )
    p.add_argument("--method", type=_args.name_list(METHODS), default="all",
                   help=f"comma-separated subset of {','.join(METHODS)} or 'all' (default)")
    p.add_argument("--clients", type=_args.int_range(2, 40), default=None, help="clients, 2-40 (default 10)")
    p.add_argument("--shots", type=_args.int_range(1, 64), default=None,
                   help="training images per available class on average (default 4)")
    p.add_argument("--dirichlet", type=_args.positive_float, default=0.1,
                   help="Dirichlet concentration of the label skew (default 0.1)")
    p.add_argument("--rounds", type=_args.int_range(1, 100), default=None, help="communication rounds (default 5)")
    p.add_argument("--local-epochs", type=_args.positive_int, default=None,
                   help="passes over each client's few-shot features per round, every trained arm (the budget: "
                        "adapter epochs, FedCoOp full-batch steps; default 5)")
    p.add_argument("--fallback-quantile", type=_args.float_range(0, 1, lo_open=True, hi_open=True), default=0.2,
                   help="fedspa_fallback arm: clients whose cosine to the global semantic prototypes is below this "
                        "quantile of the round's client cosines use the text features next round (default 0.2)")
    p.add_argument("--control-swap", type=_args.float_range(0, 1, lo_open=True), default=0.5,
                   help="positive control: share of classes whose text features are swapped in pairs (default 0.5)")
    p.add_argument("--no-control", action="store_true",
                   help="skip the positive control (FedSPA vs local-only with half the text features swapped)")
    p.add_argument("--seeds", type=_args.int_list(0), default=None,
                   help="comma-separated seeds: client data, skew, training order (default 0,1,2,3,4; --quick 0,1); "
                        "the positive control needs at least 2")
    p.add_argument("--jobs", type=_args.positive_int, default=min(2, os.cpu_count() or 1),
                   help="processes that run the seeds in parallel (same numbers; default: 2, or 1 on one core)")
    p.add_argument("--quick", action="store_true",
                   help="seconds-long smoke run: seeds 0,1, 3 clients, 1 round, tiny training")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.fedspa.experiment import FedSpaConfig, run as run_experiment

    values = dict(QUICK) if args.quick else {}
    for name in ("clients", "shots", "rounds", "local_epochs"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.seeds is not None:
        values["seeds"] = args.seeds
    elif args.quick:
        values["seeds"] = [0, 1]
    config = _args.build_config(FedSpaConfig, flags={"methods": "--method"}, methods=args.method,
                                dirichlet=args.dirichlet, fallback_quantile=args.fallback_quantile,
                                control=not args.no_control, control_swap=args.control_swap, out=args.out,
                                progress=not args.quiet, command=args.command_line, jobs=args.jobs,
                                **values)
    run_experiment(config)
    return 0
