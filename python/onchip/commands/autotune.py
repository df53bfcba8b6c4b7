"""``onchip autotune``: SPARK's factor-conditioned search for a learner spec within hardware budgets.

Parses the flags into an :class:`~onchip.methods.autotune.experiment.AutotuneConfig` and runs
:func:`onchip.methods.autotune.experiment.run`, which writes ``best_spec.toml`` (for ``onchip run
--spec`` / ``onchip generate --spec``), ``metrics.json``, ``results.md``, ``pareto.csv``,
``pareto.png``, ``curves.png`` and ``coupling.png``. Method: SPARK, arXiv 2605.04057 (see seeds/autotune.md).
"""

from __future__ import annotations

import argparse

from . import _args

DESCRIPTION = """Search the learner design space (BASIS: G, k, grid range, table bits; NUMERICS: the
fixed-point formats; TOPOLOGY: kind, widths, datapath; SCHEDULE: learning rate, schedule,
staleness, init scale) for the most accurate learner within LUT / DSP / II / latency budgets,
or with --target X for the smallest learner (fewest LUTs) whose stream accuracy holds X.
First measures which factors interact (a two-way factorial design per factor pair): the scope
guard refuses edits that reach into a factor entangled with the chosen one. Then a positive
control (a rewriter leaking across the most coupled pair, SPARK with and without the guard, scored by
the golden model alone) with its negative control (the leak across the least coupled pair), and the comparison of SPARK's
factor-conditioned edits with SPARK without its guard, free-form edits, two ablations, random
search and optuna TPE at the same number of golden-model evaluations; re-scores each arm's winner
on a drift the search never saw, and checks the finalists with Yosys."""


def add_parser(subparsers) -> None:
    """Register ``onchip autotune``."""
    from onchip.methods.autotune import ARMS, FAMILIES, SEARCH_TASKS

    p = subparsers.add_parser(
        "autotune", help="find the best (or smallest) learner spec within hardware budgets (SPARK search)",
        description=DESCRIPTION)
    p.add_argument("--task", default="drift-regression", choices=SEARCH_TASKS,
                   help="search stream: drift-regression (score R^2) or readout-drift (score assignment "
                        "fidelity) (default: %(default)s)")
    p.add_argument("--data", default=None, help="readout shots .npy (states, shots, 2) for readout-drift "
                   "(default: the built-in source)")
    p.add_argument("--samples", type=_args.int_range(300), default=None,
                   help="samples per stream (default 20000; --quick 2000)")
    p.add_argument("--budget", type=_args.int_range(2), default=None,
                   help="golden-model evaluations per arm and seed, the same for every arm (default 60; --quick 8)")
    p.add_argument("--arms", type=_args.name_list(ARMS), default="all",
                   help=f"comma-separated subset of {','.join(ARMS)} or 'all' (default); must include spark")
    p.add_argument("--seeds", type=_args.int_list(0), default=None,
                   help="comma-separated seeds (default 0,1,2; the committed runs 0-9)")
    p.add_argument("--lut-budget", type=_args.positive_float, default=600.0,
                   help="LUT budget of the learner core (Yosys LUTs; default %(default)s)")
    p.add_argument("--dsp-budget", type=_args.positive_float, default=None, help="DSP budget (default: none)")
    p.add_argument("--ii-max", type=_args.positive_int, default=None,
                   help="largest initiation interval in cycles (default: none)")
    p.add_argument("--latency-max-ns", type=_args.positive_float, default=None,
                   help="largest latency to the committed update in ns; needs --fmax-mhz (default: none)")
    p.add_argument("--fmax-mhz", type=_args.positive_float, default=None,
                   help="clock the latency is computed at, e.g. the fmax of onchip pnr (default: none)")
    p.add_argument("--target", type=_args.float_range(0.0, 1.0, lo_open=True), default=None,
                   help="smallest-learner mode: return the design with the fewest LUTs whose search-stream "
                        "accuracy (fidelity or R^2) is >= TARGET (default: the most accurate design)")
    p.add_argument("--verify-top", type=_args.nonneg_int, default=None,
                   help="finalists checked with Yosys, in order, until one is within the budgets "
                        "(default 2; --quick 0; cached)")
    p.add_argument("--control-seeds", type=_args.int_list(0), default=None,
                   help="seeds of the positive control, SPARK vs SPARK without its scope guard under a leaky "
                        "rewriter, and of its negative control (at least 2; default 0..9; --quick 0,1,2)")
    p.add_argument("--no-coupling", action="store_true",
                   help="skip the factor-coupling measurement: the guard then treats every factor pair as "
                        "entangled (the paper's guard)")
    p.add_argument("--family", default="xcup", choices=FAMILIES, help="Yosys family (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="a seconds-long run: 2000 samples, 8 evaluations, seeds 0,1,2, control seeds 0,1,2, no Yosys")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.autotune.experiment import AutotuneConfig, run as run_experiment

    quick = args.quick

    def pick(value, default, quick_default):
        return value if value is not None else (quick_default if quick else default)

    config = _args.build_config(
        AutotuneConfig, flags={"seeds": "--seeds", "verify_top": "--verify-top", "control_seeds": "--control-seeds"},
        task=args.task, data=args.data, samples=pick(args.samples, 20_000, 2000), budget=pick(args.budget, 60, 8),
        arms=args.arms, seeds=tuple(pick(args.seeds, [0, 1, 2], [0, 1, 2])), lut_budget=args.lut_budget,
        dsp_budget=args.dsp_budget, ii_max=args.ii_max, latency_max_ns=args.latency_max_ns,
        fmax_mhz=args.fmax_mhz, target=args.target, verify_top=pick(args.verify_top, 2, 0), family=args.family,
        control_seeds=tuple(pick(args.control_seeds, list(range(10)), [0, 1, 2])), coupling=not args.no_coupling,
        out=args.out, progress=not args.quiet, command=args.command_line)
    run_experiment(config)
    return 0
