"""``onchip seg-research``: a search-then-segment policy trained by GRPO with Seg-ReSearch's
hierarchical reward against outcome-only, rigid step-wise and no-search arms, at equal rollouts.

Parses the flags into a :class:`~onchip.methods.seg_research.experiment.SegResearchConfig` and runs
:func:`onchip.methods.seg_research.experiment.run`. Method: Seg-ReSearch, arXiv 2602.04454
(see seeds/seg-research.md).
"""

from __future__ import annotations

import argparse

from . import _args

QUICK = {"train_clubs": 6, "test_clubs": 2, "iters": 3, "batch": 2, "group": 4, "seeds": [0, 1], "eval_every": 1}


def add_parser(subparsers) -> None:
    """Register ``onchip seg-research``."""
    from onchip.methods.seg_research import ARMS

    p = subparsers.add_parser(
        "seg-research",
        help="segmentation with search and a hierarchical reward (Seg-ReSearch): J&F on unseen facts by hops",
        description="Questions about invented clubs ('segment the emblem of the club founded by Kelmi') over "
        "rendered scenes: a policy searches a BM25-indexed knowledge base, then answers with a box and point "
        "turned into a mask. GRPO with the hierarchical reward (outcome + initial guidance + bounded search "
        "incentive) against outcome-only reward, a rigid step-wise reward and no search; J&F on held-out facts.",
    )
    p.add_argument("--arms", type=_args.name_list(ARMS), default="all",
                   help=f"comma-separated subset of {','.join(ARMS)} or 'all' (default)")
    p.add_argument("--train-clubs", type=_args.int_range(2), default=40, help="clubs in the training KB (default 40)")
    p.add_argument("--test-clubs", type=_args.positive_int, default=15, help="clubs in the held-out KB (default 15)")
    p.add_argument("--iters", type=_args.positive_int, default=40, help="GRPO iterations (default 40)")
    p.add_argument("--batch", type=_args.positive_int, default=4, help="questions per iteration (default 4)")
    p.add_argument("--group", type=_args.int_range(2), default=8, help="rollouts per question, >= 2 (default 8)")
    p.add_argument("--max-turns", type=_args.int_range(1, 6), default=3,
                   help="turns per rollout, searches + answer, 1-6 (default 3)")
    p.add_argument("--lr", type=_args.float_range(0, 1, lo_open=True, hi_open=True), default=0.01,
                   help="Adam learning rate (default 0.01)")
    p.add_argument("--seeds", type=_args.int_list(0), default=list(range(5)),
                   help="comma-separated seeds, at least 2 (default 0-4; the committed run 0-9: its paired intervals "
                        "need them)")
    p.add_argument("--objects", type=_args.int_range(2, 6), default=4, help="objects per scene, 2-6 (default 4)")
    p.add_argument("--eval-every", type=_args.positive_int, default=10,
                   help="held-out evaluation every this many iterations, for the learning-curve area (default 10)")
    p.add_argument("--single-route", action="store_true",
                   help="no aliases: one valid search route per question, the annotated one (the earlier world)")
    p.add_argument("--no-control", action="store_true", help="skip the positive control")
    p.add_argument("--control-objects", type=_args.int_range(2, 6), default=6,
                   help="objects per scene in the positive control, 2-6 (default 6)")
    _args.add_quick(p, QUICK)
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked; ``--quick`` fills only the flags not given) and run the
    experiment; returns 0."""
    _args.apply_quick(args)
    from onchip.methods.seg_research.experiment import SegResearchConfig, run as run_experiment

    values = dict(arms=args.arms, train_clubs=args.train_clubs, test_clubs=args.test_clubs, iters=args.iters,
                  batch=args.batch, group=args.group, max_turns=args.max_turns, lr=args.lr, seeds=args.seeds,
                  n_objects=args.objects, eval_every=args.eval_every, aliases=not args.single_route,
                  control=not args.no_control, control_objects=args.control_objects)
    config = _args.build_config(SegResearchConfig, **values, out=args.out, progress=not args.quiet,
                                command=args.command_line)
    run_experiment(config)
    return 0
