"""The LMAPS experiment: LMAPS vs DPS, DAPS and its own ablation on 8x8 digit inverse problems.

Every arm gets the same budget: ``steps`` denoiser calls (NFE) per reconstruction, and the same
tuning: one grid of :data:`GRID_SIZE` settings per arm, scored on validation images disjoint from
the test images, the best setting (mean PSNR) run on the test images. Several seeds (each its own
prior fit or network, image split, masks, noise and sampler draws), paired Student t ci95 of LMAPS
against every arm, and a positive control (a high-noise setting where LMAPS's local MAP must beat
a draw from the same local posterior). Method: "Local MAP Sampling for Diffusion Models", arXiv
2510.07343 (see seeds/lmaps.md).

Writes ``metrics.json``, ``results.md``, ``metrics.png`` and one ``recon_<operator>.png`` per operator
(first seed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._report import (grouped_bars, headline, headline_line, markdown_table, mean_std, need, paired_difference,
                       paired_line, positive_control, recorded_config, rng, save, seed_int, write_metrics,
                       write_results)
from . import METHODS, OPERATORS, PRIORS  # noqa: I001  (the package's names, free of torch)

#: the tuning grid of every arm: the same number of settings each (:data:`GRID_SIZE`), each scored on the
#: same validation images at the same denoiser calls. LMAPS and its ablation: the factor on the covariance
#: r_t^2; DPS: its guidance step zeta; DAPS: ODE calls per level (the levels shrink so that levels x calls
#: = steps) x the Langevin step (fraction of 1/L).
_LOG_GRID = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
GRIDS = {
    "lmaps": tuple({"cov_scale": v} for v in _LOG_GRID),
    "lmaps-sample": tuple({"cov_scale": v} for v in _LOG_GRID),
    "dps": tuple({"zeta": v} for v in _LOG_GRID),
    "daps": tuple({"ode_steps": k, "step_scale": v} for k in (1, 2) for v in (0.03, 0.1, 0.3, 1.0)),
}
GRID_SIZE = 8
assert all(len(g) == GRID_SIZE for g in GRIDS.values())


@dataclass(frozen=True)
class LmapsConfig:
    """One run (defaults = the committed run); validated on construction.

    Attributes:
        prior: ``gmm`` (Gaussian mixture fitted to the digits: exact denoiser, posterior, MAP) or
            ``digits`` (trained score network).
        operators: measurement operators, a subset of :data:`~.operators.OPERATORS`.
        methods: arms, a subset of :data:`~.samplers.METHODS` containing ``lmaps``.
        steps: denoiser calls per reconstruction, every arm (>= 2, even: DAPS's grid has 2 calls per level).
        n_val: validation images per seed (tuning), >= 1.
        n_test: test images per seed, >= 1; ``n_val + n_test <= 200`` (the held-out split).
        sigma_y: measurement noise std in [-1, 1] pixel units, in [0, 10).
        inner_steps: LMAPS gradient steps per level (>= 0).
        langevin_steps: DAPS Langevin steps per level (>= 0).
        train_steps: digits denoiser training steps (>= 1).
        cache_dir: folder keeping the trained digits denoisers (None: none).
        seeds: seeds (>= 2 of them, each >= 0): prior fit, split, masks, noise, samplers.
        jobs: processes that run the seeds (1 = in this process; the results do not depend on it).
        control: run the positive control.
        control_operator: the control's operator.
        control_sigma_y: the control's measurement noise (high: the local posterior is wide).
        out: output folder (replaced whole on success).
        progress: progress lines on stdout.
        command: the command line recorded in metrics.json (None: not recorded).

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    prior: str = "gmm"
    operators: tuple[str, ...] = OPERATORS
    methods: tuple[str, ...] = METHODS
    steps: int = 100
    n_val: int = 12
    n_test: int = 32
    sigma_y: float = 0.05
    inner_steps: int = 30
    langevin_steps: int = 30
    train_steps: int = 3000
    cache_dir: str | None = None
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    jobs: int = field(default=1, compare=False)
    control: bool = True
    control_operator: str = "downsample"
    control_sigma_y: float = 0.2
    out: str = "out/lmaps"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("operators", "methods", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(self.prior in PRIORS, "prior", self.prior, f"must be one of {', '.join(PRIORS)}")
        for name, known in (("operators", OPERATORS), ("methods", METHODS)):
            values = getattr(self, name)
            need(bool(values) and all(v in known for v in values), name, list(values),
                 f"choose from {', '.join(known)}")
        need("lmaps" in self.methods, "methods", list(self.methods), "must contain lmaps (the method compared)")
        need(self.control_operator in OPERATORS, "control_operator", self.control_operator,
             f"must be one of {', '.join(OPERATORS)}")
        need(self.steps >= 2 and self.steps % 2 == 0, "steps", self.steps, "must be an even number >= 2")
        for name, lo in (("n_val", 1), ("n_test", 1), ("inner_steps", 0), ("langevin_steps", 0),
                         ("train_steps", 1)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(self.n_val + self.n_test <= 200, "n_test", self.n_test, f"n_val + n_test must be <= 200 (n_val {self.n_val})")
        need(len(self.seeds) >= 2 and len(set(self.seeds)) == len(self.seeds) and min(self.seeds) >= 0, "seeds",
             list(self.seeds), "two or more distinct seeds >= 0 (paired intervals)")
        need(self.jobs >= 1, "jobs", self.jobs, "must be >= 1")
        need(0 <= self.sigma_y < 10, "sigma_y", self.sigma_y, "must be in [0, 10)")
        need(0 < self.control_sigma_y < 10, "control_sigma_y", self.control_sigma_y, "must be in (0, 10)")
        need(not ("daps" in self.methods and self.sigma_y == 0 and any(op != "quantize" for op in self.operators)),
             "sigma_y", self.sigma_y, "0 leaves DAPS's Langevin likelihood undefined; use a value > 0")


def _measurement_image(op, y):
    """A picture of the measurement in image space (adjoint, rescaled for down-sampling)."""
    if not op.linear:
        return y
    back = op.adjoint(y)
    return back * op.factor**2 if hasattr(op, "factor") else back


def _reconstruct(arm, setting, prior, op, y, c, generator):
    """One arm at one setting on measurements ``y``; returns ``(x (B, d) numpy, denoiser calls)``."""
    from .priors import CountingDenoiser
    from .samplers import karras_sigmas, run_method

    options = dict(setting)
    calls_per_level = options.get("ode_steps", 1)
    if arm in ("lmaps", "lmaps-sample"):
        options["inner_steps"] = c.inner_steps
    if arm == "daps":
        options["langevin_steps"] = c.langevin_steps
    counted = CountingDenoiser(prior)
    out = run_method(arm, counted, op, y, karras_sigmas(c.steps // calls_per_level), data_var=prior.data_var,
                     generator=generator, **options)
    return out.detach().numpy(), counted.calls


def _tune_and_test(c, seed, prior, name, sigma_y, arms, val, test, tag):
    """Tune every arm on ``val`` (best mean PSNR over its grid) and run the chosen setting on ``test``.

    Returns ``{arm: {"setting", "val_psnr" (per grid point), "psnr", "ssim", "rmse_to_map", "denoiser_calls",
    "tuning_calls", "seconds"}}``, the reconstructions and the exact references (gmm prior, linear operator)."""
    import numpy as np
    import torch

    from .metrics import psnr, rmse, ssim
    from .operators import make_operator

    op = make_operator(name, sigma_y=sigma_y, generator=torch.Generator().manual_seed(seed_int(seed, "mask", tag)))
    y_val = op.measure(torch.as_tensor(val), torch.Generator().manual_seed(seed_int(seed, "measurement", tag, "val")))
    y_test = op.measure(torch.as_tensor(test), torch.Generator().manual_seed(seed_int(seed, "measurement", tag, "test")))
    exact = {}
    if c.prior == "gmm" and op.linear:
        exact["map"] = prior.map_estimate(op.matrix(), y_test.numpy(), op.noise_var)
    rows, recon = {}, {"truth": test, "measurement": _measurement_image(op, y_test).numpy()}
    for arm in arms:
        t0 = time.perf_counter()
        val_psnr, tuning_calls = [], 0
        for k, setting in enumerate(GRIDS[arm]):
            gen = torch.Generator().manual_seed(seed_int(seed, "sampler", tag, arm, "val", k))
            out, calls = _reconstruct(arm, setting, prior, op, y_val, c, gen)
            val_psnr.append(float(psnr(out, val).mean()))
            tuning_calls += calls
        best = int(np.argmax(val_psnr))
        gen = torch.Generator().manual_seed(seed_int(seed, "sampler", tag, arm, "test"))
        out, calls = _reconstruct(arm, GRIDS[arm][best], prior, op, y_test, c, gen)
        rows[arm] = {"setting": dict(GRIDS[arm][best]), "val_psnr": val_psnr, "psnr": float(psnr(out, test).mean()),
                     "ssim": float(ssim(out, test).mean()),
                     "rmse_to_map": float(rmse(out, exact["map"]).mean()) if exact else None,
                     "denoiser_calls": calls, "tuning_calls": tuning_calls, "seconds": time.perf_counter() - t0}
        recon[arm] = out
    if exact:
        recon["exact-map"] = exact["map"]
        rows["exact-map"] = {"psnr": float(psnr(exact["map"], test).mean()), "ssim": float(ssim(exact["map"], test).mean())}
    return rows, recon


def _run_seed(c: LmapsConfig, seed: int) -> dict:
    """One seed: the prior fitted, the split drawn, every operator's arms tuned and tested, the control
    (module level: :func:`onchip.methods._seeds.run_seeds` may run it in another process). Returns
    ``{"rows": {operator: {arm: scores}}, "control": {arm: scores} or None, "recon": {operator:
    reconstructions}, "prior_seconds": float}``."""
    import torch

    from .._data import load_digits_split
    from .priors import DigitsTraining, fit_digits_gmm, train_digits_denoiser

    # the tensors are tiny (64 pixels): one thread avoids losing time to thread hand-offs on a busy machine
    torch.set_num_threads(1)
    train, heldout = load_digits_split()
    arms = list(c.methods)
    t0 = time.perf_counter()
    if c.prior == "gmm":
        prior = fit_digits_gmm(train, seed=seed_int(seed, "prior"))
    else:
        prior = train_digits_denoiser(train, seed=seed_int(seed, "prior"), config=DigitsTraining(steps=c.train_steps),
                                      cache_dir=c.cache_dir, progress=c.progress)
    out = {"prior_seconds": time.perf_counter() - t0, "rows": {}, "recon": {}, "control": None}
    order = rng(seed, "split").permutation(len(heldout))
    val, test = heldout[order[:c.n_val]], heldout[order[c.n_val:c.n_val + c.n_test]]
    for name in c.operators:
        out["rows"][name], out["recon"][name] = _tune_and_test(c, seed, prior, name, c.sigma_y, arms, val, test, name)
        if c.progress:
            print(f"seed {seed} {name}: " + ", ".join(f"{a} {out['rows'][name][a]['psnr']:.2f}" for a in arms)
                  + f" dB  ({time.perf_counter() - t0:.0f} s)", flush=True)
    if c.control:
        out["control"], _ = _tune_and_test(c, seed, prior, c.control_operator, c.control_sigma_y,
                                           ["lmaps", "lmaps-sample"], val, test, "control")
        if c.progress:
            print(f"seed {seed} control ({c.control_operator}, sigma_y {c.control_sigma_y}): lmaps "
                  f"{out['control']['lmaps']['psnr']:.2f}, lmaps-sample {out['control']['lmaps-sample']['psnr']:.2f} dB",
                  flush=True)
    return out


def run(config: LmapsConfig) -> dict:
    """Run every arm on every operator for every seed (tuned on validation images), the positive
    control, and write the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``: ``{"headline", "positive_control", "config", "per_seed":
        {seed: {operator: {arm: scores}}}, "summary": {operator: {arm: mean/std and paired}}}``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._seeds import run_seeds

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)  # as in every seed's process (:func:`_run_seed`)
    arms = list(c.methods)
    per_seed, control, prior_seconds = {}, {}, {}
    t_start = time.perf_counter()
    runs = run_seeds(_run_seed, c, c.seeds, c.jobs)
    for seed, run_ in runs.items():
        per_seed[seed], prior_seconds[seed] = run_["rows"], run_["prior_seconds"]
        if c.control:
            control[seed] = run_["control"]
    recon_first = runs[c.seeds[0]]["recon"]

    settings = recorded_config(c)
    settings.update(operators=list(c.operators), methods=list(c.methods), seeds=list(c.seeds),
                    grids={a: [dict(g) for g in GRIDS[a]] for a in arms}, prior_seconds=prior_seconds,
                    image_range="[-1, 1]", psnr_ssim_range="[0, 1] after clipping",
                    torch_threads=torch.get_num_threads(), torch_version=torch.__version__,
                    seconds=time.perf_counter() - t_start)
    result = {"config": settings, "per_seed": per_seed}
    result["summary"] = summarize(per_seed, arms)
    result["headline"] = headline_of(result)
    if c.control:
        result["positive_control"] = positive_control(
            f"{c.control_operator}, sigma_y {c.control_sigma_y} (a wide local posterior: its mode must beat a "
            f"draw from it); both arms tuned on the same grid", "lmaps", "lmaps-sample",
            [control[s]["lmaps"]["psnr"] for s in c.seeds], [control[s]["lmaps-sample"]["psnr"] for s in c.seeds],
            seeds=c.seeds, metric="test PSNR (dB)")
        result["control_runs"] = control
    result = {"headline": result.pop("headline"), **({"positive_control": result.pop("positive_control")}
                                                     if c.control else {}), **result}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result, recon_first)
    if c.progress:
        print(headline_line(result["headline"]))
    return result


def _seed_value(per_seed: dict, seed, arm: str, key: str = "psnr") -> float:
    ops = per_seed[seed]
    return sum(ops[o][arm][key] for o in ops) / len(ops)


def summarize(per_seed: dict, arms: list[str]) -> dict:
    """Per operator and arm: mean and std over seeds of PSNR, SSIM and RMSE to the exact MAP, the
    chosen settings, and the paired difference LMAPS - arm of the PSNR (ci95)."""
    seeds = list(per_seed)
    out = {}
    for name in per_seed[seeds[0]]:
        out[name] = {}
        for arm in arms:
            vals = [per_seed[s][name][arm]["psnr"] for s in seeds]
            row = {"psnr": mean_std(vals), "ssim": mean_std([per_seed[s][name][arm]["ssim"] for s in seeds]),
                   "rmse_to_map": (mean_std([per_seed[s][name][arm]["rmse_to_map"] for s in seeds])
                                   if per_seed[seeds[0]][name][arm]["rmse_to_map"] is not None else None),
                   "settings": [per_seed[s][name][arm]["setting"] for s in seeds],
                   "denoiser_calls": per_seed[seeds[0]][name][arm]["denoiser_calls"],
                   "tuning_calls": per_seed[seeds[0]][name][arm]["tuning_calls"]}
            if arm != "lmaps":
                row["paired_psnr"] = paired_difference([per_seed[s][name]["lmaps"]["psnr"] for s in seeds], vals)
            out[name][arm] = row
    return out


def headline_of(result: dict) -> dict:
    """The headline of a run's ``metrics.json`` content: test PSNR (dB, mean over the test images and then
    over the operators) of LMAPS next to every other arm's, mean over seeds, each with the paired
    difference LMAPS - arm and its ci95; every arm at the same denoiser calls and the same tuning grid size."""
    c, per_seed = result["config"], result["per_seed"]
    seeds = list(per_seed)
    arms = list(c["methods"])
    others = [m for m in arms if m != "lmaps"]
    values = {a: [_seed_value(per_seed, s, a) for s in seeds] for a in arms}
    first = per_seed[seeds[0]]
    calls = {a: first[next(iter(first))][a]["denoiser_calls"] for a in arms}
    tuning = {a: first[next(iter(first))][a]["tuning_calls"] for a in arms}
    return headline(f"test PSNR in dB, mean over {', '.join(first)} ({c['prior']} prior, {c['n_test']} test digits "
                    f"per seed; settings tuned on {c['n_val']} validation digits)", "lmaps", mean_std(values["lmaps"])[0],
                    {m: mean_std(values[m])[0] for m in others},
                    budget={"denoiser_calls_per_reconstruction": calls, "tuning_calls_per_operator_and_seed": tuning,
                            "grid_size": GRID_SIZE, "sigma_y": c["sigma_y"]},
                    seeds=[int(s) for s in seeds], direction="higher", std=mean_std(values["lmaps"])[1],
                    baseline_std={m: mean_std(values[m])[1] for m in others},
                    paired={m: paired_difference(values["lmaps"], values[m]) for m in others})


def _fmt_setting(setting: dict) -> str:
    return ",".join(f"{k}={v:g}" for k, v in setting.items())


def _tables(result: dict) -> list[str]:
    h, per_seed, summary = result["headline"], result["per_seed"], result["summary"]
    arms = [h["method"], *h["baselines"]]
    seeds = list(per_seed)
    parts = [headline_line(h),
             "Paired difference LMAPS - arm (test PSNR dB, mean over operators, ci95 over seeds): "
             + "; ".join(paired_line(m, p, 2) for m, p in h["paired"].items()) + "."]
    pc = result.get("positive_control")
    if pc:
        parts.append(f"Positive control ({pc['setting']}): " + paired_line(f"{pc['method']} - {pc['ablation']}",
                                                                           pc["paired"], 2)
                     + (" (sensitive: the interval excludes zero)." if pc["sensitive"]
                        else " (not sensitive: the interval holds zero).")
                     + " Per seed: " + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(pc["method_values"],
                                                                                      pc["ablation_values"])) + " dB.")
    parts.append(markdown_table(["seed", *arms], [(s, *(f"{_seed_value(per_seed, s, a):.2f}" for a in arms))
                                                  for s in seeds],
                                "Per seed: test PSNR (dB), mean over operators."))
    rows = []
    for name, by_arm in summary.items():
        for arm in arms:
            r = by_arm[arm]
            rm = "n/a" if r["rmse_to_map"] is None else f"{r['rmse_to_map'][0]:.3f}"
            pair = "-" if arm == "lmaps" else paired_line("", r["paired_psnr"], 2).lstrip(": ")
            rows.append((name, arm, f"{r['psnr'][0]:.2f} ± {r['psnr'][1]:.2f}", f"{r['ssim'][0]:.3f}", rm, pair,
                         r["denoiser_calls"], r["tuning_calls"],
                         " / ".join(_fmt_setting(s) for s in r["settings"])))
    parts.append(markdown_table(["operator", "arm", "PSNR dB (mean ± std over seeds)", "SSIM", "RMSE to exact MAP",
                                 "LMAPS - arm, dB [ci95]", "NFE per reconstruction", "NFE tuning", "chosen setting per seed"],
                                rows, "Per operator (mean over seeds; NFE = denoiser calls; tuning NFE per operator and "
                                "seed = grid size x validation images' batch runs)."))
    return parts


def _write(stage, c: LmapsConfig, result: dict, recon: dict) -> None:
    """metrics.json, results.md, metrics.png and the reconstructions of the first seed."""
    from onchip.plotting import pyplot

    write_metrics(stage, result, c.command)
    write_results(stage, "Latent MAP / posterior sampling for inverse problems: LMAPS vs tuned DPS, DAPS and the "
                  "local-sample ablation", c.command or "onchip lmaps", *_tables(result))
    _plot_metrics(pyplot(), result, stage / "metrics.png")
    for name, images in recon.items():
        _plot_recon(pyplot(), images, stage / f"recon_{name}.png", title=f"{c.prior} prior, {name}, seed {c.seeds[0]}")


def _plot_metrics(plt, result, path):
    h, per_seed, summary = result["headline"], result["per_seed"], result["summary"]
    arms = [h["method"], *h["baselines"]]
    operators = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    grouped_bars(axes[0], operators, {a: [summary[o][a]["psnr"][0] for o in operators] for a in arms},
                 errors={a: [summary[o][a]["psnr"][1] for o in operators] for a in arms}, rotation=20, fontsize=8)
    axes[0].set_ylabel("test PSNR (dB), mean ± std over seeds")
    axes[0].legend(fontsize=8)
    seeds = list(per_seed)
    for a in arms:
        axes[1].plot(range(len(seeds)), [_seed_value(per_seed, s, a) for s in seeds], "o-", label=a)
    axes[1].set_xticks(range(len(seeds)), [str(s) for s in seeds])
    axes[1].set_xlabel("seed")
    axes[1].set_ylabel("PSNR (dB), mean over operators")
    axes[1].set_title("per seed (same NFE, same tuning grid size)", fontsize=9)
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
