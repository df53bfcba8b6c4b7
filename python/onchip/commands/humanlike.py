"""``onchip humanlike``: human-likeness of generated behaviour as a distribution distance.

Parses the flags into a :class:`~onchip.methods.humanlike.experiment.HumanlikeConfig` and runs
:func:`onchip.methods.humanlike.experiment.run`, which writes ``metrics.json``, ``results.md``,
``scores.png`` and ``metrics.png``. Method: "A Computational Framework for Evaluating
Human-likeness in LLMs' Open-ended Human Behaviors", ICML 2026 poster 65092 (see seeds/humanlike.md).
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip humanlike``."""
    from onchip.methods.humanlike import AGENTS, DOMAINS

    p = subparsers.add_parser(
        "humanlike",
        help="human-likeness of a persona LM, statistical models, a utility maximiser and a random agent "
             "against real human choices (distance in units of the split-half human distance)",
        description="Compare the distributions of human and generated behaviour (travel-mode choices, 1996 "
        "election survey answers, both shipped with statsmodels) on rationality, consistency and diversity "
        "metrics; each distance is divided by the bootstrap split-half distance between two samples of real "
        "people (0 = identical, ~1 = as far as other humans). A near-human generator (humans with a share x "
        "of answers replaced by noise) is the positive control.",
    )
    p.add_argument("--domains", type=_args.name_list(DOMAINS), default="all",
                   help=f"comma-separated subset of {','.join(DOMAINS)} or 'all' (default)")
    p.add_argument("--agents", type=_args.name_list(AGENTS), default=None,
                   help=f"comma-separated subset of {','.join(AGENTS)} or 'all' (default: all; "
                   "with --quick all but lm)")
    p.add_argument("--seeds", type=_args.int_list(0), default=None,
                   help="comma-separated seeds (two or more), each a new reference / held-out split "
                   "(default 0,1,2,3,4; --quick 0,1,2)")
    p.add_argument("--n-opinion", type=_args.int_range(2, 472), default=None,
                   help="held-out survey respondents answered by every agent per seed (default 472: all of the "
                   "held-out half, so all 944 are used; --quick 60)")
    p.add_argument("--n-mobility", type=_args.int_range(2, 105), default=105,
                   help="held-out travellers answered by every agent per seed (default 105)")
    p.add_argument("--split-half-draws", type=_args.positive_int, default=None,
                   help="random splits of all humans averaged into the split-half distance (default 200; --quick 20)")
    p.add_argument("--noise-draws", type=_args.positive_int, default=None,
                   help="noise draws per seed and level of the near-human generator (default 20; --quick 3)")
    p.add_argument("--quick", action="store_true", help="small run for tests: no LM unless --agents names it")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.humanlike import AGENTS
    from onchip.methods.humanlike.experiment import HumanlikeConfig, run as run_experiment

    agents = args.agents or ([a for a in AGENTS if a != "lm"] if args.quick else list(AGENTS))
    config = _args.build_config(
        HumanlikeConfig, domains=args.domains, agents=agents,
        seeds=args.seeds or ((0, 1, 2) if args.quick else (0, 1, 2, 3, 4)),
        n_opinion=args.n_opinion or (60 if args.quick else 472), n_mobility=args.n_mobility,
        split_half_draws=args.split_half_draws or (20 if args.quick else 200),
        noise_draws=args.noise_draws or (3 if args.quick else 20), out=args.out, progress=not args.quiet,
        command=args.command_line)
    run_experiment(config)
    return 0
