"""``onchip gats``: tool calls refined in a simulator (Gecko/GATS, arXiv 2602.19218) before they run for real.

Parses the flags into a :class:`~onchip.methods.gats.experiment.GatsConfig` and runs
:func:`onchip.methods.gats.experiment.run` (see seeds/gats.md).
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip gats``."""
    from onchip.methods.gats import ARMS

    p = subparsers.add_parser(
        "gats",
        help="tool-call refinement against a simulated tool environment (GATS) vs single shot, "
        "self-consistency and real-tool refinement",
        description="A tiny agent trained here turns help-desk requests into tool calls. GATS refines "
        "them against a simulator that sees only the tools' JSON schemas and the call history "
        "(validity, state-consistent responses, a checklist judge) before running them on a real "
        "backend with hidden state; every arm gets the same agent decodes per task.",
    )
    p.add_argument("--tasks", type=_args.positive_int, default=120, help="held-out tasks per seed (default 120)")
    p.add_argument("--samples", type=_args.positive_int, default=4,
                   help="agent decodes per task for every arm = 1 + max retries (default 4)")
    p.add_argument("--temperature", type=_args.positive_float, default=1.0, help="sampling temperature (default 1.0)")
    p.add_argument("--arms", type=_args.name_list(ARMS), default="all",
                   help=f"comma-separated subset of {','.join(ARMS)} or 'all' (default); must include gats")
    p.add_argument("--train-tasks", type=_args.positive_int, default=500, help="agent training pairs (default 500)")
    p.add_argument("--train-steps", type=_args.positive_int, default=250, help="agent training steps (default 250)")
    p.add_argument("--judge", choices=("actions", "literal"), default="actions",
                   help="the simulated judge's checklist: the requested actions only (default), or also every "
                   "literal value of the request (the stronger rule judge, which repairs values itself)")
    p.add_argument("--no-controls", action="store_true", help="skip the three positive controls")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1, 2, 3, 4],
                   help="comma-separated seeds, two or more (default 0,1,2,3,4)")
    p.add_argument("--quick", action="store_true",
                   help="seconds-long smoke run: 2 seeds, 12 tasks, a 30-step agent (what the tests run)")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.gats.experiment import GatsConfig, run as run_experiment

    quick = dict(tasks=12, seeds=args.seeds[:2], train_tasks=100, train_steps=30) if args.quick else {}
    values = dict(tasks=args.tasks, samples=args.samples, temperature=args.temperature, arms=args.arms,
                  seeds=args.seeds, train_tasks=args.train_tasks, train_steps=args.train_steps, judge=args.judge,
                  controls=not args.no_controls)
    values.update(quick)
    config = _args.build_config(GatsConfig, **values, out=args.out, progress=not args.quiet,
                                command=args.command_line)
    run_experiment(config)
    return 0
