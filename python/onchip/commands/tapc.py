"""``onchip tapc``: task-aware preference calibration (TAPC) for DPO against DPO, cDPO, rDPO, a uniform
calibration, TAPC with oracle task labels and clean-label DPO, on a tiny LM trained here.

Parses the flags into a :class:`~onchip.methods.tapc.experiment.TapcConfig` and runs
:func:`onchip.methods.tapc.experiment.run`, which writes ``metrics.json``, ``results.md``,
``accuracy.png`` and ``calibration.png``. Method: ICML 2026 poster 65082 (see seeds/tapc.md).
"""

from __future__ import annotations

import argparse

from . import _args

QUICK = {"n_train": 40, "meta_size": 8, "n_eval": 20, "steps": 6, "batch": 8, "ref_steps": 30}


def add_parser(subparsers) -> None:
    """Register ``onchip tapc``."""
    from onchip.methods.tapc import ARMS

    p = subparsers.add_parser(
        "tapc",
        help="task-aware preference calibration for DPO under label noise vs DPO, cDPO, rDPO (equal DPO steps)",
        description="Train a tiny reference LM on factual and creative prompts, flip a known share of the "
        "preference labels, and train the policy with DPO variants for the same number of steps; report clean "
        "held-out preference accuracy per prompt type and how well the reference perplexity differential "
        "predicts label quality.",
    )
    p.add_argument("--arms", type=_args.name_list(ARMS), default="all",
                   help=f"comma-separated subset of {','.join(ARMS)} or 'all' (default)")
    p.add_argument("--seeds", type=_args.int_list(0), default=None,
                   help="comma-separated seeds (default 0,1,2; the committed run 0-9; --quick 0,1); the positive control needs at "
                        "least 2")
    p.add_argument("--noise", type=_args.float_range(0, 0.5, hi_open=True), default=0.3,
                   help="flip rate of the preference labels, in [0, 0.5) (default 0.3)")
    p.add_argument("--n-train", type=_args.int_range(8), default=None, help="noisy training pairs per prompt type (default 300)")
    p.add_argument("--meta-size", type=_args.int_range(2), default=None,
                   help="clean reference pairs per prompt type for the calibration (default 32)")
    p.add_argument("--n-eval", type=_args.int_range(4), default=None, help="clean held-out pairs per prompt type (default 100)")
    p.add_argument("--steps", type=_args.positive_int, default=None, help="DPO steps per arm (default 100)")
    p.add_argument("--batch", type=_args.int_range(2), default=None, help="pairs per DPO step (default 32)")
    p.add_argument("--ref-steps", type=_args.positive_int, default=None,
                   help="reference LM training steps (default 500; cached)")
    p.add_argument("--beta", type=_args.positive_float, default=0.5, help="DPO temperature beta (default 0.5)")
    p.add_argument("--alpha", type=_args.positive_float, default=0.01,
                   help="step size of the calibration's one-step look-ahead (default 0.01)")
    p.add_argument("--meta-steps", type=_args.positive_int, default=1,
                   help="look-ahead meta-steps per DPO step for the calibrated arms (default 1)")
    p.add_argument("--no-control", action="store_true",
                   help="skip the positive control (the calibrated arms under planted, type-dependent noise)")
    p.add_argument("--quick", action="store_true", help="seconds-long run for tests: seeds 0,1, " +
                   ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.tapc.experiment import TapcConfig, run as run_experiment

    sizes = {}
    for name in QUICK:
        value = getattr(args, name)
        if value is not None:
            sizes[name] = value
        elif args.quick:
            sizes[name] = QUICK[name]
    seeds = args.seeds or ([0, 1] if args.quick else [0, 1, 2])
    config = _args.build_config(TapcConfig, arms=args.arms, seeds=seeds, noise=args.noise, beta=args.beta,
                                alpha=args.alpha, meta_steps=args.meta_steps, control=not args.no_control, out=args.out, progress=not args.quiet, command=args.command_line, **sizes)
    run_experiment(config)
    return 0
