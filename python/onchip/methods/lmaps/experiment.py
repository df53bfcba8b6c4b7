"""The LMAPS experiment: LMAPS vs DPS and DAPS on 8x8 digit inverse problems at equal denoiser calls.

Writes ``metrics.json`` (configuration and, per operator and method, PSNR, SSIM,
RMSE to the exact posterior MAP and mean where they exist, denoiser calls,
seconds), ``results.md`` (the same as a table), ``metrics.png`` and one
``recon_<operator>.png`` per operator. Method: "Local MAP Sampling for
Diffusion Models", arXiv 2510.07343 (see seeds/lmaps.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._report import (grouped_bars, headline, markdown_table, need, recorded_config, save, seed_int, write_metrics,
                       write_results)
from . import METHODS, OPERATORS, PRIORS  # noqa: I001  (the package's names, free of torch)


@dataclass(frozen=True)
class LmapsConfig:
    """One run (defaults = the committed gmm run); validated on construction.

    Attributes:
        prior: ``gmm`` (Gaussian mixture fitted to the digits: exact denoiser, posterior, MAP) or
            ``digits`` (trained score network).
        operators: measurement operators, a subset of :data:`~.operators.OPERATORS`.
        methods: samplers, a subset of :data:`~.samplers.METHODS`.
        steps: noise levels = denoiser calls per method (>= 1).
        n_images: held-out test images, 1-200.
        sigma_y: measurement noise std in [-1, 1] pixel units, in [0, 10).
        inner_steps: LMAPS gradient steps per level (>= 0).
        langevin_steps: DAPS Langevin steps per level (>= 0).
        zeta: DPS guidance step size (>= 0).
        train_steps: digits denoiser training steps (>= 1).
        cache_dir: folder keeping the trained digits denoiser (None: none).
        seed: mask, noise, samplers and training (>= 0).
        out: output folder (replaced whole on success).
        progress: progress bars and the table on stdout.
        command: the command line recorded in metrics.json (None: not recorded).

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    prior: str = "gmm"
    operators: tuple[str, ...] = OPERATORS
    methods: tuple[str, ...] = METHODS
    steps: int = 100
    n_images: int = 32
    sigma_y: float = 0.05
    inner_steps: int = 30
    langevin_steps: int = 30
    zeta: float = 1.0
    train_steps: int = 3000
    cache_dir: str | None = None
    seed: int = 0
    out: str = "out/lmaps"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "operators", tuple(self.operators))
        object.__setattr__(self, "methods", tuple(self.methods))
        need(self.prior in PRIORS, "prior", self.prior, f"must be one of {', '.join(PRIORS)}")
        for name, known in (("operators", OPERATORS), ("methods", METHODS)):
            values = getattr(self, name)
            need(bool(values) and all(v in known for v in values), name, list(values),
                 f"choose from {', '.join(known)}")
        for name, lo in (("steps", 1), ("n_images", 1), ("inner_steps", 0), ("langevin_steps", 0),
                         ("train_steps", 1), ("seed", 0)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(self.n_images <= 200, "n_images", self.n_images, "must be <= 200 (the held-out split)")
        need(0 <= self.sigma_y < 10, "sigma_y", self.sigma_y, "must be in [0, 10)")
        need(self.zeta >= 0, "zeta", self.zeta, "must be >= 0")
        need(not ("daps" in self.methods and self.sigma_y == 0 and any(op != "quantize" for op in self.operators)),
             "sigma_y", self.sigma_y, "0 leaves DAPS's Langevin likelihood undefined; use a value > 0")


def _measurement_image(op, y):
    """A picture of the measurement in image space (adjoint, rescaled for down-sampling)."""
    if not op.linear:
        return y
    back = op.adjoint(y)
    return back * op.factor**2 if hasattr(op, "factor") else back


def run(config: LmapsConfig) -> dict:
    """Run every sampler on every operator and write the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``: ``{"config": ..., "results": {operator: {method: scores}}}``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .metrics import psnr, rmse, ssim
    from .operators import make_operator
    from .._data import load_digits_split
    from .priors import CountingDenoiser, DigitsTraining, fit_digits_gmm, train_digits_denoiser
    from .samplers import karras_sigmas, run_method

    c = config
    check_output_dir(c.out)
    # the tensors are tiny (64 pixels): one thread avoids losing time to thread hand-offs on a busy machine
    torch.set_num_threads(1)
    train, test = load_digits_split()
    truth = torch.as_tensor(test[: c.n_images])
    t0 = time.perf_counter()
    if c.prior == "gmm":
        prior = fit_digits_gmm(train, seed=c.seed)
    else:
        prior = train_digits_denoiser(train, seed=c.seed, config=DigitsTraining(steps=c.train_steps),
                                      cache_dir=c.cache_dir, progress=c.progress)
    prior_seconds = time.perf_counter() - t0
    sigmas = karras_sigmas(c.steps)
    options = {"lmaps": {"inner_steps": c.inner_steps}, "dps": {"zeta": c.zeta},
               "daps": {"langevin_steps": c.langevin_steps}}

    def scores(out, exact) -> dict:
        ref = test[: c.n_images]
        p, s = psnr(out, ref), ssim(out, ref)
        row = {"psnr": float(p.mean()), "psnr_std": float(p.std()), "ssim": float(s.mean()), "ssim_std": float(s.std())}
        row["rmse_to_map"] = float(rmse(out, exact["map"]).mean()) if "map" in exact else None
        row["rmse_to_posterior_mean"] = (float(rmse(out, exact["posterior_mean"]).mean())
                                         if "posterior_mean" in exact else None)
        return row

    results, recon = {}, {}
    for name in c.operators:
        # every draw named by its use (an operator's draws do not depend on which others run)
        mask_gen = torch.Generator().manual_seed(seed_int(c.seed, "mask", name))
        op = make_operator(name, sigma_y=c.sigma_y, generator=mask_gen)
        y = op.measure(truth, torch.Generator().manual_seed(seed_int(c.seed, "measurement", name)))
        exact = {}
        if c.prior == "gmm" and op.linear:
            matrix = op.matrix()
            exact["map"] = prior.map_estimate(matrix, y.numpy(), op.noise_var)
            exact["posterior_mean"] = prior.posterior_mean(matrix, y.numpy(), op.noise_var)
        rows = {}
        recon[name] = {"truth": truth.numpy(), "measurement": _measurement_image(op, y).numpy()}
        for method in c.methods:
            counted = CountingDenoiser(prior)
            t1 = time.perf_counter()
            out = run_method(method, counted, op, y, sigmas, data_var=prior.data_var,
                             generator=torch.Generator().manual_seed(seed_int(c.seed, "sampler", name, method)),
                             progress=c.progress, **options[method]).detach().numpy()
            rows[method] = scores(out, exact)
            rows[method].update(denoiser_calls=counted.calls, seconds=time.perf_counter() - t1)
            recon[name][method] = out
        for ref_name, ref in exact.items():
            rows[f"exact-{ref_name.replace('_', '-')}"] = scores(ref, exact)
            recon[name][f"exact-{ref_name.replace('_', '-')}"] = ref
        results[name] = rows

    settings = recorded_config(c)
    settings.update(operators=list(c.operators), methods=list(c.methods), sigma_max=float(sigmas[0]),
                    sigma_min=float(sigmas[-1]), data_var=prior.data_var, prior_seconds=prior_seconds,
                    image_range="[-1, 1]", psnr_ssim_range="[0, 1] after clipping")
    result = {"config": settings, "results": results}
    result = {"headline": headline_of(result), **result}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result, recon)
    if c.progress:
        print(results_table(results, c.prior))
    return result


def headline_of(result: dict) -> dict:
    """The headline of a run's ``metrics.json`` content (without its headline): PSNR (dB, mean over the
    test images and then over the operators) of LMAPS (or the first method run) next to the other
    samplers', all at the same denoiser calls; one seed, so the standard deviations are 0."""
    c, res = result["config"], result["results"]
    methods = list(c["methods"])
    main = "lmaps" if "lmaps" in methods else methods[0]
    others = [m for m in methods if m != main]

    def psnr(m):
        return sum(res[op][m]["psnr"] for op in res) / len(res)

    return headline(f"PSNR in dB, mean over {', '.join(res)} ({c['prior']} prior, {c['n_images']} held-out digits)",
                    main, psnr(main), {m: psnr(m) for m in others},
                    budget={"denoiser_calls_per_method": c["steps"], "sigma_y": c["sigma_y"]},
                    seeds=[c["seed"]], direction="higher", std=0.0, baseline_std={m: 0.0 for m in others})


def results_table(results: dict, prior: str) -> str:
    """Markdown table: one row per operator and method (mean over images)."""

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    rows = [(prior, name, method, f"{r['psnr']:.2f}", f"{r['ssim']:.3f}", fmt(r["rmse_to_map"], ".3f"),
             fmt(r["rmse_to_posterior_mean"], ".3f"), r.get("denoiser_calls", "-"))
            for name, by_method in results.items() for method, r in by_method.items()]
    return markdown_table(["prior", "operator", "method", "PSNR dB", "SSIM", "RMSE to MAP", "RMSE to post. mean",
                           "NFE"], rows)


def _write(stage, c: LmapsConfig, result: dict, recon: dict) -> None:
    """metrics.json, results.md, metrics.png and the reconstructions."""
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    write_results(stage, "Latent MAP / posterior sampling for inverse problems", c.command or "onchip lmaps",
                  results_table(result["results"], c.prior))
    _plot_metrics(pyplot(), result["results"], list(c.methods), stage / "metrics.png")
    for name, images in recon.items():
        _plot_recon(pyplot(), images, stage / f"recon_{name}.png", title=f"{c.prior} prior, {name}")


def _plot_metrics(plt, results, methods, path):

    operators = list(results)
    panels = [("psnr", "PSNR (dB)"), ("ssim", "SSIM"), ("rmse_to_map", "RMSE to exact MAP")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (key, label) in zip(axes, panels):
        grouped_bars(ax, operators, {m: [results[o][m][key] for o in operators] for m in methods},
                     rotation=25, fontsize=8)
        ax.set_title(label)
        if key == "rmse_to_map" and all(results[o][m][key] is None for o in operators for m in methods):
            ax.text(0.5, 0.5, "no exact MAP\n(needs the gmm prior and a linear operator)", ha="center",
                    va="center", transform=ax.transAxes, fontsize=9)
            ax.set_yticks([])
    axes[0].legend(fontsize=8)
    save(fig, path, dpi=110)


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
    save(fig, path, dpi=100)
