"""``onchip dynaview``: a schema-guided mixture-of-experts world model in the spirit of DynaVieW (built
from the abstract; two mechanisms differ from the public code, see seeds/dynaview.md) against a dense model, no selective attention, no schema re-weighting and separate
single-task models.

Parses the flags into a :class:`~onchip.methods.dynaview.experiment.DynaviewConfig` and runs
:func:`onchip.methods.dynaview.experiment.run` (see seeds/dynaview.md).
"""

from __future__ import annotations

import argparse
import os

from . import _args

#: the default run's variants: the one comparison the committed run supports (joint training against
#: separate single-task models); the dense, no-selective and no-reweight ablations tie ``full`` there and
#: would make it 1.75x longer (the positive control still compares the re-weighting with its ablation)
DEFAULT_VARIANTS = ("full", "separate")
QUICK = {"episodes": 20, "train_steps": 4, "eval_items": 4, "rare_items": 3, "curve_points": 2, "d_model": 16,
         "seeds": [0, 1]}


def add_parser(subparsers) -> None:
    """Register ``onchip dynaview``."""
    from onchip.methods.dynaview import VARIANTS

    p = subparsers.add_parser(
        "dynaview",
        help="schema-guided MoE world model (in the spirit of DynaVieW): schema, next-state, rollout accuracy",
        description="A sprite world of keyframe token grids and schema transitions (event actor attribute "
        "change). One tiny decoder learns transition prediction and state simulation jointly, with experts "
        "routed by token type, selective attention across experts and re-weighted schema tokens; ablations: "
        "dense, no selective attention, no re-weighting, separate single-task models. Every arm trains for the "
        "same optimiser steps; a rare, identifiable 'wind' set is scored apart from the common events; the "
        "positive control plants 'wind' rarer and compares the re-weighting with its ablation.",
    )
    p.add_argument("--variants", type=_args.name_list(VARIANTS), default=",".join(DEFAULT_VARIANTS),
                   help=f"comma-separated subset of {','.join(VARIANTS)} or 'all' (default "
                        f"{','.join(DEFAULT_VARIANTS)}: joint training against separate models, to stay within 5 "
                        "minutes; the committed run: all)")
    p.add_argument("--episodes", type=_args.positive_int, default=600, help="training episodes (default 600)")
    p.add_argument("--steps", type=_args.int_range(1, 8), default=3,
                   help="transitions per episode = rollout length, 1-8 (default 3)")
    p.add_argument("--train-steps", type=_args.int_range(2), default=2000,
                   help="optimiser steps per variant (separate: half per task model; default 2000, the committed "
                        "run 5000)")
    p.add_argument("--batch", type=_args.positive_int, default=32, help="sequences per optimiser step (default 32)")
    p.add_argument("--lr", type=_args.float_range(0, 1, lo_open=True, hi_open=True), default=0.01,
                   help="peak AdamW learning rate (default 0.01)")
    p.add_argument("--eval-items", type=_args.int_range(4), default=200, help="held-out transitions (default 200)")
    p.add_argument("--rare-items", type=_args.positive_int, default=100,
                   help="held-out identifiable 'wind' transitions, scored apart (default 100)")
    p.add_argument("--wind-p", type=_args.float_range(0, 1, hi_open=True), default=0.05,
                   help="probability of the rare 'wind' event (default 0.05)")
    p.add_argument("--control-wind-p", type=_args.float_range(0, 1, lo_open=True, hi_open=True), default=0.015,
                   help="the positive control's planted 'wind' probability (default 0.015)")
    p.add_argument("--no-control", action="store_true",
                   help="skip the positive control (re-weighting vs none with 'wind' planted rarer)")
    p.add_argument("--curve-points", type=_args.int_range(0), default=12,
                   help="validation points per training run for the curves (0 = none; default 12)")
    p.add_argument("--d-model", type=_args.int_range(8, 256), default=32, help="model width (default 32)")
    p.add_argument("--cross-topk", type=_args.positive_int, default=4,
                   help="keys of the other expert each query may attend to (default 4)")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1],
                   help="comma-separated seeds (default 0,1, one per process at --jobs 2; the committed run 0-4); the "
                        "positive control needs at least 2")
    p.add_argument("--jobs", type=_args.positive_int, default=min(2, os.cpu_count() or 1),
                   help="processes that run the seeds in parallel (same numbers; default: 2, or 1 on one core)")
    _args.add_quick(p, {**QUICK, "variants": list(VARIANTS)})  # the test-size run still runs every arm
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked; ``--quick`` fills only the flags not given) and run the
    experiment; returns 0."""
    _args.apply_quick(args)
    from onchip.methods.dynaview.experiment import DynaviewConfig
    from onchip.methods.dynaview.experiment import run as run_experiment

    values = dict(variants=args.variants, episodes=args.episodes, steps=args.steps, train_steps=args.train_steps,
                  eval_items=args.eval_items, d_model=args.d_model, cross_topk=args.cross_topk, batch=args.batch,
                  lr=args.lr, seeds=args.seeds, rare_items=args.rare_items, wind_p=args.wind_p,
                  control_wind_p=args.control_wind_p, control=not args.no_control, curve_points=args.curve_points)
    config = _args.build_config(DynaviewConfig, **values, out=args.out, progress=not args.quiet,
                                command=args.command_line, jobs=args.jobs)
    run_experiment(config)
    return 0
