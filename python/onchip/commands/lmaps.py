"""``onchip lmaps``: local MAP sampling (LMAPS) vs DPS and DAPS on 8x8 digit inverse problems.

Writes ``metrics.json`` (configuration and, per operator and method, PSNR, SSIM,
RMSE to the exact posterior MAP and mean where they exist, denoiser calls,
seconds), ``results.md`` (the same as a table), ``metrics.png`` and one
``recon_<operator>.png`` per operator. Method: "Local MAP Sampling for
Diffusion Models", arXiv 2510.07343 (see seeds/lmaps.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

PRIORS = ("gmm", "digits")


def add_parser(subparsers) -> None:
    """Register ``onchip lmaps``."""
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
    p.add_argument("--operator", default="all",
                   help="comma-separated subset of inpaint-random,inpaint-box,blur,downsample,quantize "
                   "or 'all' (default)")
    p.add_argument("--method", default="all", help="comma-separated subset of lmaps,dps,daps or 'all' (default)")
    p.add_argument("--steps", type=int, default=100, help="noise levels = denoiser calls per method (default 100)")
    p.add_argument("--n-images", type=int, default=32, help="held-out test images (1-200, default 32)")
    p.add_argument("--sigma-y", type=float, default=0.05, help="measurement noise std in [-1,1] units (default 0.05)")
    p.add_argument("--inner-steps", type=int, default=30, help="LMAPS gradient steps per level (default 30)")
    p.add_argument("--langevin-steps", type=int, default=30, help="DAPS Langevin steps per level (default 30)")
    p.add_argument("--zeta", type=float, default=1.0, help="DPS guidance step size (default 1.0)")
    p.add_argument("--train-steps", type=int, default=3000, help="digits denoiser training steps (default 3000)")
    p.add_argument("--cache-dir", default=None, help="folder to keep the trained digits denoiser (default: none)")
    p.add_argument("--seed", type=int, default=0, help="random seed: mask, noise, samplers, training (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", required=True, help="output folder (replaced on success)")
    p.set_defaults(func=run)


def _subset(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    if text == "all":
        return list(known)
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in known]
    if not names or bad:
        raise ValueError(f"{flag}: unknown value(s) {bad or text!r}; choose from {', '.join(known)} or 'all'")
    return names


def _validate(args) -> tuple[list[str], list[str]]:
    from onchip.methods.lmaps.operators import OPERATORS
    from onchip.methods.lmaps.samplers import METHODS

    operators = _subset(args.operator, OPERATORS, "--operator")
    methods = _subset(args.method, METHODS, "--method")
    if args.prior not in PRIORS:
        raise ValueError(f"--prior must be one of {', '.join(PRIORS)}, got {args.prior!r}")
    for flag, value, lo in (("--steps", args.steps, 1), ("--n-images", args.n_images, 1),
                            ("--inner-steps", args.inner_steps, 0), ("--langevin-steps", args.langevin_steps, 0),
                            ("--train-steps", args.train_steps, 1)):
        if value < lo:
            raise ValueError(f"{flag} must be >= {lo}, got {value!r}")
    if args.n_images > 200:
        raise ValueError(f"--n-images must be <= 200 (the held-out split), got {args.n_images!r}")
    if not (args.sigma_y >= 0 and args.sigma_y < 10):
        raise ValueError(f"--sigma-y must be in [0, 10), got {args.sigma_y!r}")
    if not args.zeta >= 0:
        raise ValueError(f"--zeta must be >= 0, got {args.zeta!r}")
    if "daps" in methods and args.sigma_y == 0 and any(op != "quantize" for op in operators):
        raise ValueError("--sigma-y 0 leaves DAPS's Langevin likelihood undefined; use --sigma-y > 0")
    return operators, methods


def _measurement_image(op, y):
    """A picture of the measurement in image space (adjoint, rescaled for down-sampling)."""
    if not op.linear:
        return y
    back = op.adjoint(y)
    return back * op.factor**2 if hasattr(op, "factor") else back


def run(args: argparse.Namespace) -> int:
    """Validate every argument, run the samplers, then write the output folder."""
    operators, methods = _validate(args)

    import torch

    from onchip.io import atomic_output_dir, write_json
    from onchip.methods.lmaps.metrics import psnr, rmse, ssim
    from onchip.methods.lmaps.operators import make_operator
    from onchip.methods.lmaps.priors import (CountingDenoiser, DigitsTraining, fit_digits_gmm, load_digits_split,
                                             train_digits_denoiser)
    from onchip.methods.lmaps.samplers import karras_sigmas, run_method
    from onchip.plotting import pyplot

    # the tensors are tiny (64 pixels): one thread avoids losing time to thread hand-offs on a busy machine
    torch.set_num_threads(1)
    progress = not args.quiet
    train, test = load_digits_split()
    truth = torch.as_tensor(test[: args.n_images])
    t0 = time.perf_counter()
    if args.prior == "gmm":
        prior = fit_digits_gmm(train, seed=args.seed)
    else:
        prior = train_digits_denoiser(train, seed=args.seed, config=DigitsTraining(steps=args.train_steps),
                                      cache_dir=args.cache_dir, progress=progress)
    prior_seconds = time.perf_counter() - t0
    sigmas = karras_sigmas(args.steps)
    options = {"lmaps": {"inner_steps": args.inner_steps}, "dps": {"zeta": args.zeta},
               "daps": {"langevin_steps": args.langevin_steps}}

    results, recon = {}, {}
    for k, name in enumerate(operators):
        op = make_operator(name, sigma_y=args.sigma_y, generator=torch.Generator().manual_seed(args.seed))
        y = op.measure(truth, torch.Generator().manual_seed(args.seed * 1000 + 10 + k))
        exact = {}
        if args.prior == "gmm" and op.linear:
            matrix = op.matrix()
            exact["map"] = prior.map_estimate(matrix, y.numpy(), op.noise_var)
            exact["posterior_mean"] = prior.posterior_mean(matrix, y.numpy(), op.noise_var)
        rows = {}
        recon[name] = {"truth": truth.numpy(), "measurement": _measurement_image(op, y).numpy()}
        for j, method in enumerate(methods):
            counted = CountingDenoiser(prior)
            t1 = time.perf_counter()
            out = run_method(method, counted, op, y, sigmas, data_var=prior.data_var,
                             generator=torch.Generator().manual_seed(args.seed * 1000 + 100 + 10 * k + j),
                             progress=progress, **options[method]).detach().numpy()
            rows[method] = _scores(out, test[: args.n_images], exact, psnr, ssim, rmse)
            rows[method].update(denoiser_calls=counted.calls, seconds=time.perf_counter() - t1)
            recon[name][method] = out
        for ref_name, ref in exact.items():
            rows[f"exact-{ref_name.replace('_', '-')}"] = _scores(ref, test[: args.n_images], exact, psnr, ssim, rmse)
            recon[name][f"exact-{ref_name.replace('_', '-')}"] = ref
        results[name] = rows

    config = {k: v for k, v in vars(args).items() if k not in ("func", "out", "quiet")}
    config.update(operators=operators, methods=methods, sigma_max=float(sigmas[0]), sigma_min=float(sigmas[-1]),
                  data_var=prior.data_var, prior_seconds=prior_seconds, image_range="[-1, 1]",
                  psnr_ssim_range="[0, 1] after clipping")
    with atomic_output_dir(args.out) as stage:
        write_json(stage / "metrics.json", {"config": config, "results": results})
        (stage / "results.md").write_text(results_table(results, args.prior))
        _plot_metrics(pyplot(), results, methods, stage / "metrics.png")
        for name, images in recon.items():
            _plot_recon(pyplot(), images, stage / f"recon_{name}.png", title=f"{args.prior} prior, {name}")
    if progress:
        print(results_table(results, args.prior))
    return 0


def _scores(out, truth, exact, psnr, ssim, rmse) -> dict:
    p, s = psnr(out, truth), ssim(out, truth)
    row = {"psnr": float(p.mean()), "psnr_std": float(p.std()), "ssim": float(s.mean()), "ssim_std": float(s.std())}
    row["rmse_to_map"] = float(rmse(out, exact["map"]).mean()) if "map" in exact else None
    row["rmse_to_posterior_mean"] = (float(rmse(out, exact["posterior_mean"]).mean())
                                     if "posterior_mean" in exact else None)
    return row


def results_table(results: dict, prior: str) -> str:
    """Markdown table: one row per operator and method (mean over images)."""

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    lines = [f"| prior | operator | method | PSNR dB | SSIM | RMSE to MAP | RMSE to post. mean | NFE |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        for method, r in rows.items():
            lines.append(f"| {prior} | {name} | {method} | {r['psnr']:.2f} | {r['ssim']:.3f} | "
                         f"{fmt(r['rmse_to_map'], '.3f')} | {fmt(r['rmse_to_posterior_mean'], '.3f')} | "
                         f"{r.get('denoiser_calls', '-')} |")
    return "\n".join(lines) + "\n"


def _plot_metrics(plt, results, methods, path):
    operators = list(results)
    panels = [("psnr", "PSNR (dB)"), ("ssim", "SSIM"), ("rmse_to_map", "RMSE to exact MAP")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    width = 0.8 / len(methods)
    for ax, (key, label) in zip(axes, panels):
        for j, m in enumerate(methods):
            vals = [results[o][m][key] if results[o][m][key] is not None else np.nan for o in operators]
            ax.bar(np.arange(len(operators)) + j * width, vals, width, label=m)
        ax.set_xticks(np.arange(len(operators)) + 0.4 - width / 2, operators, rotation=25, fontsize=8)
        ax.set_title(label)
        if key == "rmse_to_map" and all(results[o][m][key] is None for o in operators for m in methods):
            ax.text(0.5, 0.5, "no exact MAP\n(needs the gmm prior and a linear operator)", ha="center",
                    va="center", transform=ax.transAxes, fontsize=9)
            ax.set_yticks([])
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_recon(plt, images, path, title, n_show=6):
    rows = list(images)
    n = min(n_show, images["truth"].shape[0])
    fig, axes = plt.subplots(len(rows), n, figsize=(1.3 * n, 1.35 * len(rows)), squeeze=False)
    for i, key in enumerate(rows):
        for j in range(n):
            ax = axes[i, j]
            ax.imshow(images[key][j].reshape(8, 8), cmap="gray", vmin=-1, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[i, 0].set_ylabel(key, fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

