"""``onchip ais``: entropic mirror adaptive importance sampling against PMC, AMIS and an ablation.

Parses the flags into an :class:`~onchip.methods.ais.experiment.AisConfig` and runs
:func:`onchip.methods.ais.experiment.run`, which writes ``metrics.json``, ``results.md``,
``history.csv``, ``per_seed.csv`` and ``metrics.png`` / ``samples.png`` / ``split.png``.
Method: "Entropic Mirror Monte Carlo", arXiv 2602.03165 (see seeds/ais-entropic-mirror.md).
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip ais``."""
    from onchip.methods.ais import METHODS, TARGETS

    p = subparsers.add_parser(
        "ais",
        help="adaptive importance sampling: entropic mirror (EM2C) vs PMC, AMIS, no-move ablation",
        description="Run adaptive importance samplers on a target with known log Z and write "
        "per-iteration log Z error, ESS, KL(target||proposal) and mode coverage.",
    )
    p.add_argument("--target", default="gmm4", help=f"{' | '.join(TARGETS)} (default gmm4)")
    p.add_argument("--dim", type=_args.positive_int, default=10, help="dimension (default 10)")
    p.add_argument("--method", type=_args.name_list(METHODS), default="all",
                   help=f"comma-separated subset of {','.join(METHODS)} or 'all' (default)")
    p.add_argument("--iterations", type=_args.int_range(1, 10000), default=30, help="iterations per method (default 30)")
    p.add_argument("--samples", type=_args.int_range(10), default=1000, help="draws per iteration (default 1000)")
    p.add_argument("--eps", type=_args.float_range(0, 1, lo_open=True), default=0.5,
                   help="mirror step size in (0, 1] (default 0.5)")
    p.add_argument("--components", type=_args.positive_int, default=None,
                   help="mixture components (default: number of target modes/regions)")
    p.add_argument("--defensive-weight", type=_args.float_range(0, 1, hi_open=True), default=0.2,
                   help="heavy-tailed weight in [0, 1) (default 0.2)")
    p.add_argument("--mcmc-steps", type=_args.positive_int, default=10, help="global-move MH steps (default 10)")
    p.add_argument("--budget", default="equal-evaluations", choices=("equal-evaluations", "equal-iterations"),
                   help="equal-evaluations (default): every method spends EM2C's target evaluations (the "
                   "others draw more per iteration); equal-iterations: the same draws per iteration, so "
                   "EM2C spends about mcmc-steps + 1 times more")
    p.add_argument("--seeds", type=_args.int_list(0), default=list(range(10)),
                   help="comma-separated seeds, the same for every method (default 0-9); the paired "
                   "differences and the positive control need at least 2")
    p.add_argument("--split", type=_args.int_list(0, increasing=True), default=None,
                   help="MH steps per adaptation of the split sweep's EM2C arms, each at EM2C's total target "
                   "evaluations (0 = em2c-nomove; default 0,2,5,10 under equal-evaluations, none under "
                   "equal-iterations, where it is refused)")
    p.add_argument("--no-split", action="store_true", help="skip the split sweep")
    p.add_argument("--no-control", action="store_true",
                   help="skip the positive control (gmm4 d=10, em2c vs em2c-nomove at equal draws per iteration)")
    _args.add_quick(p, {"seeds": [0, 1], "iterations": 3, "samples": 100},
                    help="a seconds-long run (what the tests run): seeds 0,1, 3 iterations, 100 draws per "
                    "iteration (the control too); flags given win")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the samplers; returns 0."""
    from onchip.methods.ais.experiment import AisConfig, run as run_experiment

    _args.apply_quick(args)
    config = _args.build_config(
        AisConfig, flags={"methods": "--method"},
        target=args.target, dim=args.dim, methods=args.method, iterations=args.iterations, samples=args.samples,
        eps=args.eps, components=args.components, defensive_weight=args.defensive_weight,
        mcmc_steps=args.mcmc_steps, budget=args.budget, seeds=args.seeds,
        split=() if args.no_split else args.split, control=not args.no_control, out=args.out,
        progress=not args.quiet,
        command=args.command_line)
    run_experiment(config)
    return 0
