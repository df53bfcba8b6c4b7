"""``onchip token-search``: coarse-to-fine 1D ordered tokens vs a 2D grid under test-time search.

Parses the flags into a :class:`~onchip.methods.token_search.experiment.TokenSearchConfig` and
runs :func:`onchip.methods.token_search.experiment.run`, which writes ``metrics.json``,
``results.md``, ``accuracy.png``, ``prefix.png`` and ``samples.png``. Method: "Searching over
ordered tokens", arXiv 2604.15453 (see seeds/token-search.md).
"""

from __future__ import annotations

import argparse

from . import _args

QUICK = {"budgets": [10], "per_class": 1, "tokenizer_steps": 60, "prior_steps": 20, "classifier_steps": 40}


def add_parser(subparsers) -> None:
    """Register ``onchip token-search``."""
    from onchip.methods.token_search import SEARCHES, TOKENIZERS

    p = subparsers.add_parser(
        "token-search",
        help="1D ordered tokens vs a 2D grid under best-of-N, beam, lookahead and uniform-prior search",
        description="Generate 8x8 digits of a requested class with the same AR generator over two token "
                    "structures (coarse-to-fine 1D tokens, a raster grid), searched under a verifier at equal "
                    "decoder + verifier calls; judged by a different evaluator network and a Frechet distance.",
    )
    p.add_argument("--tokenizer", type=_args.name_list(TOKENIZERS), default="all",
                   help=f"comma-separated subset of {','.join(TOKENIZERS)} or 'all' (default)")
    p.add_argument("--search", type=_args.name_list(SEARCHES), default="all",
                   help=f"comma-separated subset of {','.join(SEARCHES)} or 'all' (default)")
    p.add_argument("--budgets", type=_args.int_list(1, increasing=True), default=None,
                   help="scored candidates (= decoder calls = verifier calls) per image, multiples of 5 "
                        "(default 10,20,80; --quick 10); a beam search refuses a budget under 10, which would give "
                        "each beam fewer than 2 candidates per step")
    p.add_argument("--candidates-per-beam", type=_args.positive_int, default=4,
                   help="proposals per beam and step, >= 2; beam width = candidates per step / this (default 4)")
    p.add_argument("--per-class", type=_args.positive_int, default=None,
                   help="images generated per class and arm (default 6; --quick 1)")
    p.add_argument("--seeds", type=_args.int_list(0), default=[0, 1, 2],
                   help="comma-separated seeds: split, training, search (default 0,1,2)")
    p.add_argument("--quick", action="store_true",
                   help="seconds-long smoke run: tiny training, budget 10, 1 image per class")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.token_search.experiment import TokenSearchConfig, run as run_experiment

    quick = QUICK if args.quick else {}
    config = _args.build_config(
        TokenSearchConfig, flags={"tokenizers": "--tokenizer", "searches": "--search"},
        tokenizers=args.tokenizer, searches=args.search,
        budgets=args.budgets or quick.get("budgets", [10, 20, 80]),
        candidates_per_beam=args.candidates_per_beam,
        per_class=args.per_class or quick.get("per_class", 6), seeds=args.seeds,
        **{k: v for k, v in quick.items() if k.endswith("_steps")},
        out=args.out, progress=not args.quiet, command=args.command_line)
    run_experiment(config)
    return 0
