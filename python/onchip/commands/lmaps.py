"""``onchip lmaps``: local MAP sampling (LMAPS) vs DPS and DAPS on 8x8 digit inverse problems.

Parses the flags into a :class:`~onchip.methods.lmaps.experiment.LmapsConfig` and runs
:func:`onchip.methods.lmaps.experiment.run`, which writes ``metrics.json``, ``results.md``,
``metrics.png`` and one ``recon_<operator>.png`` per operator. Method: "Local MAP Sampling
for Diffusion Models", arXiv 2510.07343 (see seeds/lmaps.md).
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    """Register ``onchip lmaps``."""
    from onchip.methods.lmaps import METHODS, OPERATORS, PRIORS

    p = subparsers.add_parser(
        "lmaps",
        help="inverse problems with a diffusion prior: LMAPS vs DPS and DAPS at equal denoiser calls",
        description="Reconstruct held-out 8x8 digits from noisy measurements (inpainting, blur, "
        "2x down-sampling, quantization) with a diffusion prior and report PSNR, SSIM and, for the "
        "Gaussian-mixture prior, the distance to the exact posterior MAP and mean.",
    )
    p.add_argument("--prior", default="gmm", choices=PRIORS,
                   help="gmm: Gaussian mixture fitted to the digits (exact denoiser, posterior, MAP); "
                   "digits: trained score network (default gmm)")
    p.add_argument("--operator", type=_args.name_list(OPERATORS), default="all",
                   help=f"comma-separated subset of {','.join(OPERATORS)} or 'all' (default)")
    p.add_argument("--method", type=_args.name_list(METHODS), default="all",
                   help=f"comma-separated subset of {','.join(METHODS)} or 'all' (default)")
    p.add_argument("--steps", type=_args.positive_int, default=100,
                   help="noise levels = denoiser calls per method (default 100)")
    p.add_argument("--n-images", type=_args.int_range(1, 200), default=32, help="held-out test images (1-200, default 32)")
    p.add_argument("--sigma-y", type=_args.float_range(0, 10, hi_open=True), default=0.05,
                   help="measurement noise std in [-1,1] units (default 0.05)")
    p.add_argument("--inner-steps", type=_args.nonneg_int, default=30, help="LMAPS gradient steps per level (default 30)")
    p.add_argument("--langevin-steps", type=_args.nonneg_int, default=30,
                   help="DAPS Langevin steps per level (default 30)")
    p.add_argument("--zeta", type=_args.nonneg_float, default=1.0, help="DPS guidance step size (default 1.0)")
    p.add_argument("--train-steps", type=_args.positive_int, default=3000,
                   help="digits denoiser training steps (default 3000)")
    p.add_argument("--cache-dir", default=None, help="folder to keep the trained digits denoiser (default: none)")
    _args.add_seed(p, what="mask, noise, samplers, training")
    _args.add_quiet(p)
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.lmaps.experiment import LmapsConfig, run as run_experiment

    config = _args.build_config(
        LmapsConfig, flags={"operators": "--operator", "methods": "--method"},
        prior=args.prior, operators=args.operator, methods=args.method, steps=args.steps, n_images=args.n_images,
        sigma_y=args.sigma_y, inner_steps=args.inner_steps, langevin_steps=args.langevin_steps, zeta=args.zeta,
        train_steps=args.train_steps, cache_dir=args.cache_dir, seed=args.seed, out=args.out,
        progress=not args.quiet, command=args.command_line)
    run_experiment(config)
    return 0
