"""``onchip radar``: query-adaptive agent topologies by autoregressive graph diffusion (RADAR, arXiv 2605.09907).

Parses the flags into a :class:`~onchip.methods.radar.experiment.RadarConfig` and runs
:func:`onchip.methods.radar.experiment.run` (see seeds/radar.md).
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip radar``."""
    p = subparsers.add_parser(
        "radar",
        help="generated multi-agent communication graphs (RADAR) vs single, chain, star, complete, random, "
        "layered and a one-shot generator",
        description="Small learned solver agents with roles answer multi-step arithmetic queries and pass "
        "answers and rationales along a communication graph. RADAR learns to generate one graph per query "
        "from the successful graphs of fixed topologies, then is fine-tuned for correctness and sparsity; "
        "accuracy and tokens per query are compared.",
    )
    p.add_argument("--train-queries", type=_args.positive_int, default=200, help="default 200")
    p.add_argument("--test-queries", type=_args.positive_int, default=200, help="default 200")
    p.add_argument("--max-nodes", type=_args.int_range(2, 6), default=5, help="most agents per graph, 2-6 (default 5)")
    p.add_argument("--epochs", type=_args.positive_int, default=4, help="generator training epochs (default 4)")
    p.add_argument("--rl-epochs", type=_args.nonneg_int, default=8, help="RL fine-tuning passes (default 8)")
    p.add_argument("--max-graphs", type=_args.positive_int, default=240,
                   help="most successful graphs the generators are fitted on (default 240)")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1, 2, 3, 4], help="comma-separated seeds (default 0-4)")
    p.add_argument("--quick", action="store_true",
                   help="seconds-long smoke run: the first 2 seeds, 8 training and 8 test queries (what the tests run)")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.radar.experiment import RadarConfig, run as run_experiment

    values = dict(train_queries=args.train_queries, test_queries=args.test_queries, max_nodes=args.max_nodes,
                  epochs=args.epochs, rl_epochs=args.rl_epochs, max_graphs=args.max_graphs, seeds=args.seeds)
    if args.quick:
        values.update(train_queries=8, test_queries=8, epochs=1, rl_epochs=1, seeds=args.seeds[:2])
    config = _args.build_config(RadarConfig, **values, out=args.out, progress=not args.quiet,
                                command=args.command_line)
    run_experiment(config)
    return 0
