"""``onchip multi2``: a hierarchical agent (high level SFT -> sub-goals as text; low level warm-up BC ->
offline IQL -> online IQL) against flat BC, flat IQL and its own ablations, by horizon.

Parses the flags into a :class:`~onchip.methods.multi2.experiment.Multi2Config` and runs
:func:`onchip.methods.multi2.experiment.run`. Method: Multi^2, arXiv 2606.03698 (see seeds/multi2.md).
"""

from __future__ import annotations

import argparse
import os

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip multi2``."""
    from onchip.methods.multi2 import ARMS

    p = subparsers.add_parser(
        "multi2",
        help="hierarchical agents against objective drift (Multi^2): success by horizon, drift rate",
        description="Grid-world missions of 1-4 sub-instructions (slipping moves, limited view, demonstrations "
        "from a noisy demonstrator only): a high-level agent fine-tuned to write "
        "sub-goals and a low-level agent trained by warm-up BC, offline IQL and online IQL, against flat BC, "
        "flat offline IQL, hierarchical BC and hierarchical offline RL. Reports success rate by horizon and "
        "the objective-drift rate (failed episodes that completed a sub-instruction out of order).",
    )
    p.add_argument("--arms", type=_args.name_list(ARMS), default="all",
                   help=f"comma-separated subset of {','.join(ARMS)} or 'all' (default)")
    p.add_argument("--horizons", type=_args.int_list(1, increasing=True), default=[1, 2, 3, 4],
                   help="numbers of sub-instructions evaluated, 1..6 (default 1,2,3,4)")
    p.add_argument("--demos", type=_args.int_range(4), default=300,
                   help="demonstration episodes, all by the noisy demonstrator (default 300)")
    p.add_argument("--bc-steps", type=_args.positive_int, default=3000, help="BC / warm-up steps (default 3000)")
    p.add_argument("--iql-steps", type=_args.positive_int, default=800, help="offline IQL updates (default 800)")
    p.add_argument("--critic-steps", type=_args.nonneg_int, default=2000,
                   help="offline IQL updates of the critics alone, before --iql-steps (default 2000)")
    p.add_argument("--online-episodes", type=_args.nonneg_int, default=100,
                   help="episodes of multi2's online phase (default 100)")
    p.add_argument("--online-updates", type=_args.nonneg_int, default=4,
                   help="IQL updates per online episode (default 4)")
    p.add_argument("--high-steps", type=_args.positive_int, default=1500, help="high-level SFT steps (default 1500)")
    p.add_argument("--eval-episodes", type=_args.positive_int, default=50,
                   help="held-out episodes per horizon and arm (default 50)")
    p.add_argument("--grid", type=_args.int_range(5, 12), default=7, help="grid side, 5-12 (default 7)")
    p.add_argument("--slip", type=float, default=0.1, help="probability a move goes in a random direction, [0, 1) "
                   "(default 0.1)")
    p.add_argument("--view", type=_args.nonneg_int, default=2,
                   help="observation radius in cells; farther objects show their direction only (0 = full; default 2)")
    p.add_argument("--demo-eps", type=float, default=0.2,
                   help="the demonstrator's random-action probability per step, [0, 1] (default 0.2)")
    p.add_argument("--p-early", type=float, default=0.6,
                   help="the demonstrator's probability of declaring a sub-goal done one move early, [0, 1] "
                   "(default 0.6)")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1, 2],
                   help="comma-separated seeds (default 0,1,2; the committed run 0-4)")
    p.add_argument("--jobs", type=_args.positive_int, default=min(2, os.cpu_count() or 1),
                   help="processes that run the seeds in parallel (same numbers; default: 2, or 1 on one core)")
    _args.add_quick(p, QUICK)
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


QUICK = {"horizons": [1, 2], "demos": 30, "bc_steps": 40, "iql_steps": 30, "critic_steps": 20, "online_episodes": 6,
         "online_updates": 2, "high_steps": 20, "eval_episodes": 6, "seeds": [0, 1]}


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked; ``--quick`` fills only the flags not given) and run the
    experiment; returns 0."""
    _args.apply_quick(args)
    from onchip.methods.multi2.experiment import Multi2Config, run as run_experiment

    values = dict(arms=args.arms, horizons=args.horizons, demos=args.demos, bc_steps=args.bc_steps,
                  iql_steps=args.iql_steps, critic_steps=args.critic_steps,
                  online_episodes=args.online_episodes, online_updates=args.online_updates,
                  high_steps=args.high_steps, eval_episodes=args.eval_episodes, grid=args.grid, slip=args.slip,
                  view=args.view, demo_eps=args.demo_eps, p_early=args.p_early, seeds=args.seeds)
    config = _args.build_config(Multi2Config, **values, out=args.out, progress=not args.quiet,
                                command=args.command_line, jobs=args.jobs)
    run_experiment(config)
    return 0
