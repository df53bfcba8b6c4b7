"""The memorization experiment: geometry, regimes, training intensity and the intervention.

Computes the posterior concentration and Gaussian-shell coverage of the empirical optimal
denoiser on the 8x8 digits, locates the small / medium / large noise regimes, trains a small
EDM-preconditioned denoiser, counts memorized samples against training intensity (overall and
per regime) and applies the medium-regime targeted intervention. Writes ``metrics.json``,
``geometry.csv`` and ``geometry.png`` / ``memorization.png`` / ``samples.png``.
Method: arXiv 2602.17846 (see seeds/diffusion-memorization.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._data import N_DIGITS
from .._report import headline, need, rng, seed_int


@dataclass(frozen=True)
class MemorizationConfig:
    """One run (defaults = the committed default run); validated on construction.

    Attributes:
        n_train: training images, in [2, 1597] (200 digits stay held out).
        steps: strictly increasing training-step checkpoints of one run (>= 1).
        width: hidden width of the denoiser MLP.
        batch_size, lr: Adam batch size and learning rate (lr in (0, 1)).
        samples: generated samples per model (>= 10).
        sampler_steps: Heun sampler steps (>= 2).
        seed: random seed (>= 0).
        threads: torch CPU threads.
        out: output folder (replaced whole on success).
        progress: progress bars while training.
        command: the command line recorded in metrics.json (None: not recorded).

    Raises:
        ValueError: a field out of range, named in the message.
    """

    n_train: int = 100
    steps: tuple[int, ...] = (1000, 3000, 6000)
    width: int = 512
    batch_size: int = 64
    lr: float = 2e-3
    samples: int = 300
    sampler_steps: int = 18
    seed: int = 0
    threads: int = 2
    out: str = "out/memorization"
    progress: bool = True
    command: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))
        s = self.steps
        need(bool(s) and s[0] >= 1 and all(b > a for a, b in zip(s, s[1:])), "steps",
             ",".join(map(str, s)), "need positive strictly increasing integers")
        need(2 <= self.n_train <= N_DIGITS - 200, "n_train", self.n_train,
             f"must be in [2, {N_DIGITS - 200}] (200 digits stay held out)")
        for name, lo in (("width", 1), ("samples", 10), ("batch_size", 1), ("sampler_steps", 2), ("threads", 1),
                         ("seed", 0)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(0 < self.lr < 1, "lr", self.lr, "must be in (0, 1)")


def run(config: MemorizationConfig) -> dict:
    """Run the experiment and write the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``.
    """
    import copy

    import numpy as np
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._data import load_digits_split
    from .._scores import frechet_distance
    from . import (EDMDenoiser, edm_sample, empirical_optimal_denoiser, linear_gaussian_denoiser, linear_gaussian_gap,
                   locate_regimes, memorized_fraction, posterior_concentration, regime_switch, shell_coverage,
                   train_denoiser)
    from .denoiser import as_denoise

    c = config
    check_output_dir(c.out)
    steps = list(c.steps)
    torch.set_num_threads(c.threads)
    torch.manual_seed(seed_int(c.seed, "denoiser-init"))
    train, heldout = load_digits_split(c.n_train, c.seed)
    dim = train.shape[1]
    # one generator per named use: the split, the geometry, the sampler and each training leg draw
    # unrelated streams (the sampler's is the same for every row: common random numbers)
    geometry_rng = rng(c.seed, "geometry")

    # 1. Geometry of the empirical optimal denoiser.
    sigmas = np.geomspace(0.01, 80.0, 40)
    conc = posterior_concentration(train, heldout, sigmas, geometry_rng)
    cover = shell_coverage(train, heldout, sigmas, geometry_rng)
    gap = linear_gaussian_gap(train, heldout, sigmas, geometry_rng)
    lo, hi = locate_regimes(sigmas, conc, cover)
    bands = {"small": (0.002, lo), "medium": (lo, hi), "large": (hi, 80.0)}

    def evaluate(denoise, label):
        x = edm_sample(denoise, c.samples, dim, seed=seed_int(c.seed, "sampler"), steps=c.sampler_steps)
        row = {"model": label, "memorized": memorized_fraction(x, train), "fd_heldout": frechet_distance(x, heldout)}
        print(f"{label:34s} memorized={row['memorized']:.3f} FD={row['fd_heldout']:.2f}")
        return row, x

    mean, cov = train.mean(0), np.cov(train.T)
    reference = [evaluate(lambda x, s: empirical_optimal_denoiser(x, s, train), "empirical optimal")[0],
                 evaluate(lambda x, s: linear_gaussian_denoiser(x, s, mean, cov), "linear Gaussian")[0]]

    # 2. Memorization against overall training intensity (checkpoints of one run).
    model = EDMDenoiser(dim=dim, sigma_data=float(train.std()), width=c.width)
    checkpoints, intensity, done = {}, [], 0
    for n in steps:
        train_denoiser(model, train, n - done, seed=seed_int(c.seed, "training", n), batch_size=c.batch_size,
                       lr=c.lr, progress=c.progress)
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

    result = {
        "n_train": c.n_train, "n_heldout": len(heldout), "seed": c.seed, "width": c.width,
        "samples": c.samples, "memorization_threshold": 1 / 3, "steps": steps,
        "batch_size": c.batch_size, "lr": c.lr,
        "regimes": {"sigma_lo": lo, "sigma_hi": hi, "bands": bands},
        "reference_denoisers": reference, "training_intensity": intensity,
        "regime_intensity": {"elsewhere_steps": steps[0], "rows": per_regime},
        "intervention": {"model_steps": steps[-1], "weak_steps": steps[0], "rows": interventions},
        "fd_train_vs_heldout": frechet_distance(train, heldout),
    }
    result = {"headline": headline_of(result), **result}
    with atomic_output_dir(c.out) as out:
        _write(out, c, result, (sigmas, conc, cover, gap), x_last, x_fixed)
    print(f"regimes: small < {lo:.3g} <= medium < {hi:.3g} <= large")
    return result


def headline_of(result: dict) -> dict:
    """The headline of a run's ``metrics.json`` content (without its headline): the memorized fraction
    of the most-trained model's samples with its medium-band denoiser swapped for the least-trained
    checkpoint (the paper's targeted intervention), next to no swap, the medium band swapped for the
    linear Gaussian denoiser and the same swap in the small and large bands (controls); all with
    one sampler seed and ``samples`` samples; one seed, so the standard deviations are 0."""
    rows = {r["intervention"]: r["memorized"] for r in result["intervention"]["rows"]}
    main = "medium -> weak checkpoint"
    others = [k for k in rows if k != main]
    return headline(
        "memorized fraction of the samples (nearest / second-nearest training distance < 1/3) of the "
        f"{result['intervention']['model_steps']}-step model, by denoiser swap", main, rows[main],
        {k: rows[k] for k in others},
        budget={"training_steps": result["intervention"]["model_steps"], "samples": result["samples"],
                "training_images": result["n_train"]},
        seeds=[result["seed"]], direction="lower", std=0.0, baseline_std={k: 0.0 for k in others})


def _write(out, c: MemorizationConfig, result: dict, geometry, x_last, x_fixed) -> None:
    """metrics.json, geometry.csv and the three plots."""
    from onchip.plotting import pyplot

    from .._report import save, write_csv, write_metrics

    sigmas, conc, cover, gap = geometry
    lo, hi = result["regimes"]["sigma_lo"], result["regimes"]["sigma_hi"]
    steps, intensity = result["steps"], result["training_intensity"]
    per_regime, interventions = result["regime_intensity"]["rows"], result["intervention"]["rows"]
    write_csv(out / "geometry.csv", ["sigma", "posterior_concentration", "shell_coverage", "linear_gaussian_gap"],
              zip(sigmas, conc, cover, gap))
    write_metrics(out, result, c.command)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogx(sigmas, conc, label="posterior concentration")
    ax.semilogx(sigmas, cover, label="Gaussian-shell coverage")
    ax.semilogx(sigmas, gap, label="gap to linear Gaussian denoiser")
    for s in (lo, hi):
        ax.axvline(s, color="0.5", ls="--")
    ax.axvspan(lo, hi, color="C3", alpha=0.1, label="medium regime")
    ax.set(xlabel="sigma", title=f"8x8 digits, {c.n_train} training images")
    ax.legend(fontsize=8)
    save(fig, out / "geometry.png", dpi=80)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    axes[0].plot([r["steps"] for r in intensity], [r["memorized"] for r in intensity], marker="o")
    axes[0].set(xlabel="training steps", ylabel="memorized fraction", title="training intensity")
    for name in result["regimes"]["bands"]:
        rows = [r for r in per_regime if r["regime"] == name]
        axes[1].plot([steps[0]] + [r["steps"] for r in rows],
                     [intensity[0]["memorized"]] + [r["memorized"] for r in rows], marker="o", label=name)
    axes[1].set(xlabel="training steps inside the regime", title=f"{steps[0]} steps elsewhere")
    axes[1].legend()
    axes[2].barh([r["intervention"] for r in interventions], [r["memorized"] for r in interventions])
    axes[2].set(xlabel="memorized fraction", title=f"swaps in the {steps[-1]}-step model")
    save(fig, out / "memorization.png", dpi=80)
    fig, axes = plt.subplots(2, 8, figsize=(8, 2.4))
    for i, ax in enumerate(axes.flat):
        img = (x_last if i < 8 else x_fixed)[i % 8].reshape(8, 8)
        ax.imshow(img, cmap="gray_r", vmin=-1, vmax=1)
        ax.axis("off")
    fig.suptitle(f"top: {steps[-1]}-step model; bottom: with the medium-regime intervention", fontsize=8)
    save(fig, out / "samples.png", dpi=80, tight=False)
