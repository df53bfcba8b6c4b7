"""``onchip memorization``: where along the noise schedule a diffusion model memorizes.

Parses the flags into a :class:`~onchip.methods.memorization.experiment.MemorizationConfig`
and runs :func:`onchip.methods.memorization.experiment.run`, which writes ``metrics.json``,
``results.md``, ``geometry.csv`` and ``geometry.png`` / ``memorization.png`` / ``samples.png``.
Method: arXiv 2602.17846 (see seeds/diffusion-memorization.md).
"""

from __future__ import annotations

import argparse

from . import _args


QUICK = {"n_train": 40, "steps": [20, 40], "width": 16, "samples": 30, "steps_per_band": 2, "seeds": [0, 1]}


def add_parser(subparsers) -> None:
    """Register ``onchip memorization``."""
    p = subparsers.add_parser(
        "memorization",
        help="diffusion memorization along the noise schedule (8x8 digits, EDM denoiser)",
        description="Geometry of the empirical optimal denoiser, regime detection, memorization vs "
        "training intensity, the medium-regime intervention against the same swap in the other bands "
        "(equal denoiser calls per band, paired over seeds) and a positive control (the empirical "
        "optimal denoiser in one band).",
    )
    p.add_argument("--n-train", type=_args.int_range(2, 1597), default=100,
                   help="training images, 2-1597 (200 digits stay held out; default 100)")
    p.add_argument("--steps", type=_args.int_list(1, increasing=True), default="1000,3000,6000",
                   help="comma-separated increasing training-step checkpoints, at least 2 (default 1000,3000,6000)")
    p.add_argument("--width", type=_args.positive_int, default=512, help="hidden width of the denoiser MLP (default 512)")
    p.add_argument("--batch-size", type=_args.positive_int, default=64, help="training batch size (default 64)")
    p.add_argument("--lr", type=_args.float_range(0, 1, lo_open=True, hi_open=True), default=2e-3,
                   help="Adam learning rate (default 2e-3)")
    p.add_argument("--samples", type=_args.int_range(10), default=1000,
                   help="generated samples per arm and seed (default 1000)")
    p.add_argument("--steps-per-band", type=_args.int_range(1), default=16,
                   help="Heun steps in each noise band, 2 denoiser calls each (default 16)")
    p.add_argument("--seeds", type=_args.int_list(0), default="0,1,2,3,4",
                   help="comma-separated seeds, one independently trained denoiser each, at least 2 "
                        "(default 0,1,2,3,4)")
    p.add_argument("--data-seed", type=_args.int_range(0), default=0,
                   help="seed of the train / held-out split (default 0)")
    p.add_argument("--threads", type=_args.positive_int, default=1,
                   help="torch CPU threads (default 1, as the committed run; recorded, and part of the "
                        "checkpoint cache key)")
    _args.add_quick(p, QUICK)
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.memorization.experiment import MemorizationConfig, run as run_experiment

    _args.apply_quick(args)
    config = _args.build_config(
        MemorizationConfig, n_train=args.n_train, steps=args.steps, width=args.width, batch_size=args.batch_size,
        lr=args.lr, samples=args.samples, steps_per_band=args.steps_per_band, seeds=args.seeds,
        data_seed=args.data_seed, threads=args.threads, out=args.out, progress=not args.quiet,
        command=args.command_line)
    run_experiment(config)
    return 0
