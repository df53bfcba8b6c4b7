"""``onchip ink``: the first drop of ink - hard-distractor proportion in a fixed-length context.

Parses the flags into an :class:`~onchip.methods.ink.experiment.InkConfig` and runs
:func:`onchip.methods.ink.experiment.run`, which writes ``metrics.json`` (with the headline),
``results.md``, ``contexts.csv``, ``curves.png`` and ``filtering.png``. Method: arXiv 2605.10828;
see seeds/ink.md.
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip ink``."""
    from onchip.methods.ink import SUBJECTS

    p = subparsers.add_parser(
        "ink",
        help="accuracy, margin and attention vs the proportion of hard distractors at fixed context length",
        description="Contexts of fixed length about fictional entities: one relevant document, a proportion p "
        "of hard distractors (same relation, conflicting value, confusable name) among easy filler. Reports "
        "accuracy, p(gold), log p(gold) and answer margin against p with their first-drop shares (paired over "
        "seeds), a positive control through the tiny transformer (query surname erased) with its negative "
        "control, the attention shares of the answer position, "
        "filtering experiments on long contexts (shorten vs remove hard distractors at equal length) and an "
        "analogue on the readout learner (mislabelled shots in a window). Subjects: Gemma 3 270M, a tiny "
        "transformer trained here.",
    )
    p.add_argument("--subjects", type=_args.name_list(SUBJECTS), default=list(SUBJECTS),
                   help=f"comma-separated subset of {','.join(SUBJECTS)} or 'all' (default)")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1],
                   help="comma-separated seeds, at least 2 (default 0,1; the committed run 0,1,2)")
    p.add_argument("--docs", type=_args.int_range(2, 20), default=12, help="documents per context, 2..20 (default 12)")
    p.add_argument("--hard-counts", type=_args.int_list(0, increasing=True), default=[0, 1, 2, 4, 8, 11],
                   help="hard distractors among the other docs-1 slots, from 0 (default 0,1,2,4,8,11)")
    p.add_argument("--items", type=_args.positive_int, default=6,
                   help="contexts per proportion and seed (default 6; the committed run 10: 30 per proportion over "
                        "3 seeds)")
    p.add_argument("--control-items", type=_args.positive_int, default=40,
                   help="contexts per proportion and seed of the positive control, tiny model (default 40)")
    p.add_argument("--filter-hard", type=_args.nonneg_int, default=6,
                   help="hard distractors in the contexts the filtering arms start from (default 6)")
    p.add_argument("--filter-docs", type=_args.int_range(2, 160), default=48,
                   help="documents per context of Gemma's filtering arm (long contexts), docs..160 (default 48)")
    p.add_argument("--filter-items", type=_args.positive_int, default=4,
                   help="base contexts per seed of the filtering arm (default 4)")
    p.add_argument("--attention-items", type=_args.nonneg_int, default=1,
                   help="contexts per proportion and seed whose attention is read (default 1)")
    p.add_argument("--tiny-steps", type=_args.positive_int, default=400,
                   help="training steps of the tiny transformer (default 400)")
    p.add_argument("--window", type=_args.positive_int, default=256,
                   help="readout analogue: shots in the contaminated window (default 256)")
    p.add_argument("--quick", action="store_true",
                   help="a seconds-long check: tiny and learner only, 6 documents, 3 items, short training")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.ink.experiment import InkConfig, run as run_experiment

    values = dict(subjects=args.subjects, seeds=args.seeds, n_docs=args.docs, hard_counts=args.hard_counts,
                  items=args.items, control_items=args.control_items, filter_hard=args.filter_hard, filter_docs=args.filter_docs,
                  filter_items=args.filter_items, attention_items=args.attention_items,
                  tiny_steps=args.tiny_steps, window=args.window)
    if args.quick:
        values.update(subjects=[s for s in args.subjects if s != "gemma"] or ["tiny"], n_docs=6,
                      hard_counts=[0, 1, 5], items=3, control_items=min(args.control_items, 10), filter_hard=3, filter_docs=6, filter_items=2, tiny_steps=min(args.tiny_steps, 10),
                      window=min(args.window, 64))
    config = _args.build_config(InkConfig, flags={"n_docs": "--docs"}, out=args.out, progress=not args.quiet,
                                command=args.command_line, **values)
    run_experiment(config)
    return 0
