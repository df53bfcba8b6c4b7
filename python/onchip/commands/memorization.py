"""``onchip memorization``: where along the noise schedule a diffusion model memorizes.

Computes the posterior concentration and Gaussian-shell coverage of the empirical optimal
denoiser on the 8x8 digits, locates the small / medium / large noise regimes, trains a small
EDM-preconditioned denoiser, counts memorized samples against training intensity (overall and
per regime) and applies the medium-regime targeted intervention. Writes ``metrics.json``,
``geometry.csv`` and ``geometry.png`` / ``memorization.png`` / ``samples.png``.
Method: arXiv 2602.17846 (see seeds/diffusion-memorization.md).
"""

from __future__ import annotations

import argparse
import csv


def add_parser(subparsers) -> None:
    """Register ``onchip memorization``."""
    p = subparsers.add_parser(
        "memorization",
        help="diffusion memorization along the noise schedule (8x8 digits, EDM denoiser)",
        description="Geometry of the empirical optimal denoiser, regime detection, memorization vs "
        "training intensity and the medium-regime intervention.",
    )
    p.add_argument("--n-train", type=int, default=100, help="training images (default 100)")
    p.add_argument("--steps", default="1000,3000,6000",
                   help="comma-separated increasing training-step checkpoints (default 1000,3000,6000)")
    p.add_argument("--width", type=int, default=512, help="hidden width of the denoiser MLP (default 512)")
    p.add_argument("--batch-size", type=int, default=64, help="training batch size (default 64)")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (default 2e-3)")
    p.add_argument("--samples", type=int, default=300, help="generated samples per model (default 300)")
    p.add_argument("--sampler-steps", type=int, default=18, help="Heun sampler steps (default 18)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--out", required=True, help="output folder (replaced on success)")
    p.set_defaults(func=run)


def _parse_steps(text: str) -> list[int]:
    try:
        steps = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--steps: expected comma-separated integers, got {text!r}") from None
    if not steps or steps[0] < 1 or any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"--steps: need positive strictly increasing integers, got {text!r}")
    return steps


def _check(args) -> list[int]:
    steps = _parse_steps(args.steps)
    for name, value, lo in [("n-train", args.n_train, 2), ("width", args.width, 1), ("samples", args.samples, 10),
                            ("batch-size", args.batch_size, 1),
                            ("sampler-steps", args.sampler_steps, 2), ("threads", args.threads, 1)]:
        if value < lo:
            raise ValueError(f"--{name}: must be >= {lo}, got {value!r}")
    if not 0 < args.lr < 1:
        raise ValueError(f"--lr: must be in (0, 1), got {args.lr!r}")
    if args.n_train > 1597:
        raise ValueError(f"--n-train: must be <= 1597 (200 digits stay held out), got {args.n_train!r}")
    return steps


def run(args: argparse.Namespace) -> int:
    """Validate every argument, run the experiment, then write the output folder."""
    steps = _check(args)
    import copy

    import numpy as np
    import torch

    from onchip.io import atomic_output_dir, write_json
    from onchip.methods.memorization import (
        EDMDenoiser, edm_sample, empirical_optimal_denoiser, frechet_distance, linear_gaussian_denoiser,
        linear_gaussian_gap, load_digits_split, locate_regimes, memorized_fraction, posterior_concentration,
        regime_switch, shell_coverage, train_denoiser,
    )
    from onchip.methods.memorization.denoiser import as_denoise
    from onchip.plotting import pyplot

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, heldout = load_digits_split(args.n_train, args.seed)
    dim = train.shape[1]
    rng = np.random.default_rng(args.seed)

    # 1. Geometry of the empirical optimal denoiser.
    sigmas = np.geomspace(0.01, 80.0, 40)
    conc = posterior_concentration(train, heldout, sigmas, rng)
    cover = shell_coverage(train, heldout, sigmas, rng)
    gap = linear_gaussian_gap(train, heldout, sigmas, rng)
    lo, hi = locate_regimes(sigmas, conc, cover)
    bands = {"small": (0.002, lo), "medium": (lo, hi), "large": (hi, 80.0)}

    def evaluate(denoise, label):
        x = edm_sample(denoise, args.samples, dim, seed=args.seed + 1, steps=args.sampler_steps)
        row = {"model": label, "memorized": memorized_fraction(x, train), "fd_heldout": frechet_distance(x, heldout)}
        print(f"{label:34s} memorized={row['memorized']:.3f} FD={row['fd_heldout']:.2f}")
        return row, x

    mean, cov = train.mean(0), np.cov(train.T)
    reference = [evaluate(lambda x, s: empirical_optimal_denoiser(x, s, train), "empirical optimal")[0],
                 evaluate(lambda x, s: linear_gaussian_denoiser(x, s, mean, cov), "linear Gaussian")[0]]

    # 2. Memorization against overall training intensity (checkpoints of one run).
    model = EDMDenoiser(dim=dim, sigma_data=float(train.std()), width=args.width)
    checkpoints, intensity, done = {}, [], 0
    for n in steps:
        train_denoiser(model, train, n - done, seed=args.seed * 1000 + n, batch_size=args.batch_size,
                       lr=args.lr, progress=True)
        done = n
        checkpoints[n] = copy.deepcopy(model)
        row, x_last = evaluate(as_denoise(model), f"trained {n} steps")
        intensity.append({"steps": n, **row})

    # 3. Training intensity inside one regime only: checkpoint n within the regime, the
    #    least-trained checkpoint everywhere else along the sampling schedule.
    per_regime = []
    weak = as_denoise(checkpoints[steps[0]])
    for name, band in bands.items():
        for n in steps[1:]:
            row, _ = evaluate(regime_switch(weak, as_denoise(checkpoints[n]), band), f"{n} steps in {name} only")
            per_regime.append({"regime": name, "band": band, "steps": n, **row})

    # 4. Targeted intervention on the most trained model.
    strong = as_denoise(checkpoints[steps[-1]])
    lin = lambda x, s: linear_gaussian_denoiser(x, s, mean, cov)  # noqa: E731
    interventions = []
    for label, other, band in [("none", None, None),
                               ("medium -> weak checkpoint", weak, bands["medium"]),
                               ("medium -> linear Gaussian", lin, bands["medium"]),
                               ("small -> weak checkpoint", weak, bands["small"]),
                               ("large -> weak checkpoint", weak, bands["large"])]:
        den = strong if other is None else regime_switch(strong, other, band)
        row, x = evaluate(den, f"intervention: {label}")
        interventions.append({"intervention": label, **row})
        if other is not None and label.startswith("medium -> weak"):
            x_fixed = x

    with atomic_output_dir(args.out) as out:
        with open(out / "geometry.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["sigma", "posterior_concentration", "shell_coverage", "linear_gaussian_gap"])
            w.writerows(zip(sigmas, conc, cover, gap))
        write_json(out / "metrics.json", {
            "n_train": args.n_train, "n_heldout": len(heldout), "seed": args.seed, "width": args.width,
            "samples": args.samples, "memorization_threshold": 1 / 3, "steps": steps,
            "batch_size": args.batch_size, "lr": args.lr,
            "regimes": {"sigma_lo": lo, "sigma_hi": hi, "bands": bands},
            "reference_denoisers": reference, "training_intensity": intensity,
            "regime_intensity": {"elsewhere_steps": steps[0], "rows": per_regime},
            "intervention": {"model_steps": steps[-1], "weak_steps": steps[0], "rows": interventions},
            "fd_train_vs_heldout": frechet_distance(train, heldout),
        })
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.semilogx(sigmas, conc, label="posterior concentration")
        ax.semilogx(sigmas, cover, label="Gaussian-shell coverage")
        ax.semilogx(sigmas, gap, label="gap to linear Gaussian denoiser")
        for s in (lo, hi):
            ax.axvline(s, color="0.5", ls="--")
        ax.axvspan(lo, hi, color="C3", alpha=0.1, label="medium regime")
        ax.set(xlabel="sigma", title=f"8x8 digits, {args.n_train} training images")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "geometry.png", dpi=80)
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
        axes[0].plot([r["steps"] for r in intensity], [r["memorized"] for r in intensity], marker="o")
        axes[0].set(xlabel="training steps", ylabel="memorized fraction", title="training intensity")
        for j, name in enumerate(bands):
            rows = [r for r in per_regime if r["regime"] == name]
            axes[1].plot([steps[0]] + [r["steps"] for r in rows],
                         [intensity[0]["memorized"]] + [r["memorized"] for r in rows], marker="o", label=name)
        axes[1].set(xlabel="training steps inside the regime", title=f"{steps[0]} steps elsewhere")
        axes[1].legend()
        axes[2].barh([r["intervention"] for r in interventions], [r["memorized"] for r in interventions])
        axes[2].set(xlabel="memorized fraction", title=f"swaps in the {steps[-1]}-step model")
        fig.tight_layout()
        fig.savefig(out / "memorization.png", dpi=80)
        fig, axes = plt.subplots(2, 8, figsize=(8, 2.4))
        for i, ax in enumerate(axes.flat):
            img = (x_last if i < 8 else x_fixed)[i % 8].reshape(8, 8)
            ax.imshow(img, cmap="gray_r", vmin=-1, vmax=1)
            ax.axis("off")
        fig.suptitle(f"top: {steps[-1]}-step model; bottom: with the medium-regime intervention", fontsize=8)
        fig.savefig(out / "samples.png", dpi=80)
        plt.close("all")
    print(f"regimes: small < {lo:.3g} <= medium < {hi:.3g} <= large")
    return 0
