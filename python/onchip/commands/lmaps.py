"""``onchip lmaps``: local MAP sampling (LMAPS) vs DPS and DAPS on 8x8 digit inverse problems.

Parses the flags into a :class:`~onchip.methods.lmaps.experiment.LmapsConfig` and runs
:func:`onchip.methods.lmaps.experiment.run`, which writes ``metrics.json``, ``results.md``,
``metrics.png`` and one ``recon_<operator>.png`` per operator. Method: "Local MAP Sampling
for Diffusion Models", arXiv 2510.07343 (see seeds/lmaps.md).
"""

from __future__ import annotations

import argparse
import os

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
                   help="denoiser calls per reconstruction, every arm (even; default 100)")
    p.add_argument("--n-val", type=_args.int_range(1, 199), default=12,
                   help="validation digits per seed, on which every arm's grid is tuned (default 12)")
    p.add_argument("--n-test", type=_args.int_range(1, 199), default=32, help="test digits per seed (default 32)")
    p.add_argument("--sigma-y", type=_args.float_range(0, 10, hi_open=True), default=0.05,
                   help="measurement noise std in [-1,1] units (default 0.05)")
    p.add_argument("--inner-steps", type=_args.nonneg_int, default=30, help="LMAPS gradient steps per level (default 30)")
    p.add_argument("--langevin-steps", type=_args.nonneg_int, default=30,
                   help="DAPS Langevin steps per level (default 30)")
    p.add_argument("--train-steps", type=_args.positive_int, default=3000,
                   help="digits denoiser training steps (default 3000)")
    p.add_argument("--cache-dir", default=None, help="folder to keep the trained digits denoisers (default: none)")
    p.add_argument("--no-control", action="store_true", help="skip the positive control")
    p.add_argument("--control-operator", default="downsample", choices=OPERATORS,
                   help="the positive control's operator (default downsample)")
    p.add_argument("--control-sigma-y", type=_args.float_range(0, 10, lo_open=True, hi_open=True), default=0.2,
                   help="the positive control's measurement noise (default 0.2)")
    p.add_argument("--seed", type=_args.nonneg_int, nargs="+", default=[0, 1],
                   help="two or more random seeds (default: 0 1, one per process at --jobs 2; the committed run "
                        "0 1 2 3 4); each: prior fit, image split, masks, noise, samplers")
    p.add_argument("--jobs", type=_args.positive_int, default=min(2, os.cpu_count() or 1),
                   help="processes that run the seeds in parallel (same numbers; default: 2, or 1 on one core)")
    _args.add_quiet(p)
    _args.add_out(p)
    _args.add_quick(p, {"seed": [0, 1], "operator": ("inpaint-box", "quantize"), "steps": 12, "n_val": 3,
                        "n_test": 4})
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the config (every flag checked) and run the experiment; returns 0."""
    from onchip.methods.lmaps.experiment import LmapsConfig, run as run_experiment

    _args.apply_quick(args)
    config = _args.build_config(
        LmapsConfig, flags={"operators": "--operator", "methods": "--method", "seeds": "--seed"},
        prior=args.prior, operators=args.operator, methods=args.method, steps=args.steps, n_val=args.n_val,
        n_test=args.n_test, sigma_y=args.sigma_y, inner_steps=args.inner_steps, langevin_steps=args.langevin_steps,
        train_steps=args.train_steps, cache_dir=args.cache_dir, seeds=args.seed, jobs=args.jobs, control=not args.no_control,
        control_operator=args.control_operator, control_sigma_y=args.control_sigma_y, out=args.out,
        progress=not args.quiet, command=args.command_line)
    run_experiment(config)
    return 0
