"""``onchip ips``: interaction-based prompt sensitivity (Harsanyi interactions) of Gemma 3 270M, tiny
transformers and the fixed-point learners.

Parses the flags into an :class:`~onchip.methods.ips.experiment.IpsConfig` and runs
:func:`onchip.methods.ips.experiment.run`, which writes ``metrics.json`` (with the headline),
``results.md``, ``pairs.csv``, ``ips_by_order.png`` and ``learners.png``. Method: Qin et al.,
ICML 2026 (openreview 6fHZR6uxNa); see seeds/ips.md.
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip ips``."""
    from onchip.methods.ips import SUBJECTS

    p = subparsers.add_parser(
        "ips",
        help="prompt sensitivity through Harsanyi interactions: Gemma 270M, tiny LMs, fixed-point learners",
        description="Compute every Harsanyi (AND) interaction of a model's output over 6 prompt variables "
        "(2**6 masked evaluations) for a prompt and a subtly changed one, and report how the interactions "
        "change by order, how many salient interactions change while the answer does not, and the "
        "output-level sensitivity as the baseline. Subjects: Gemma 3 270M (0/2-shot), tiny transformers "
        "(pre-trained vs fine-tuned, two widths, MoE vs dense) and the fixed-point learners (prompt "
        "change = number format).",
    )
    p.add_argument("--subjects", type=_args.name_list(SUBJECTS), default=list(SUBJECTS),
                   help=f"comma-separated subset of {','.join(SUBJECTS)} or 'all' (default)")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1],
                   help="comma-separated seeds (default 0,1; the committed run 0,1,2): reviews, shots, tiny training, "
                        "learner streams")
    p.add_argument("--reviews", type=_args.positive_int, default=6,
                   help="query reviews per seed; each gives 2 prompt pairs (default 6; the committed run 20: Gemma "
                        "scores a review in about 15 s)")
    p.add_argument("--shots", type=_args.int_list(0), default=[0],
                   help="comma-separated few-shot settings, each 0..3 (default 0; a 1-shot Gemma prompt costs "
                        "~1.8 times a 0-shot one)")
    p.add_argument("--tau", type=_args.float_range(0, 1, lo_open=True), default=0.1,
                   help="salience threshold relative to the largest interaction, in (0, 1] (default 0.1)")
    p.add_argument("--tiny-steps", type=_args.int_range(2), default=200,
                   help="tiny-model pre-training steps; fine-tuning takes half as many (default 200)")
    p.add_argument("--learner-samples", type=_args.int_range(100), default=20000,
                   help="stream samples each fixed-point learner trains on (default 20000)")
    p.add_argument("--learner-points", type=_args.positive_int, default=8,
                   help="input points per learner and seed (default 8)")
    p.add_argument("--quick", action="store_true",
                   help="a seconds-long check: tiny and learners only, 2 reviews, 0 shots, short training")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.ips.experiment import IpsConfig, run as run_experiment

    values = dict(subjects=args.subjects, seeds=args.seeds, reviews=args.reviews, shots=args.shots, tau=args.tau,
                  tiny_steps=args.tiny_steps, learner_samples=args.learner_samples,
                  learner_points=args.learner_points)
    if args.quick:
        values.update(subjects=[s for s in args.subjects if s != "gemma"] or ["tiny"], reviews=2, shots=[0],
                      tiny_steps=min(args.tiny_steps, 8), learner_samples=min(args.learner_samples, 2000),
                      learner_points=min(args.learner_points, 2))
    config = _args.build_config(IpsConfig, out=args.out, progress=not args.quiet, command=args.command_line,
                                **values)
    run_experiment(config)
    return 0
