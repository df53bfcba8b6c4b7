"""The memorization experiment: geometry, regimes, training intensity, band swaps and a positive control.

Computes the posterior concentration and Gaussian-shell coverage of the empirical optimal
denoiser on the 8x8 digits, locates the small / medium / large noise regimes (arXiv 2602.17846,
Sec. 3-4), and samples with a Heun sampler whose sigma grid is built band by band
(:func:`~onchip.methods.memorization.denoiser.band_grid`): every band holds the same number of
denoiser calls, so swapping the denoiser in one band changes as much computation as in any
other. Per seed it trains one EDM-preconditioned denoiser (checkpoints cached), counts memorized
samples against training intensity (overall and inside one band), applies the targeted
intervention of Sec. 5 (the medium-band denoiser of the most-trained model swapped for the
least-trained checkpoint or the linear Gaussian denoiser) next to the same swap in the other
bands, and runs a positive control: the empirical optimal denoiser ``D*`` swapped into the
medium band of the least-trained checkpoint, against that checkpoint alone (the trained small
band decides whether the samples stay on training images), with its negative control: D* of as
many held-out digits in the same band (nothing of the training set planted; must show nothing).
Writes ``metrics.json`` (with ``headline``, ``positive_control`` and ``negative_control``), ``results.md``,
``geometry.csv`` and ``geometry.png`` / ``memorization.png`` / ``samples.png``.
Method: arXiv 2602.17846 (see seeds/diffusion-memorization.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._controls import negative_control
from .._data import N_DIGITS
from .._report import (
    headline,
    markdown_table,
    mean_std,
    need,
    paired_difference,
    paired_line,
    positive_control,
    recorded_config,
    save,
    seed_int,
    write_csv,
    write_metrics,
    write_results,
)

#: the bands, from the largest noise down (the sampler's order)
BANDS = ("large", "medium", "small")
#: the sampler's noise range (EDM defaults)
SIGMA_MIN, SIGMA_MAX = 0.002, 80.0
#: pixel range of the digits; the sampler clips every denoised estimate to it (every arm)
DATA_RANGE = (-1.0, 1.0)
#: the headline arm: the paper's targeted intervention (Sec. 5)
MAIN = "medium -> weak checkpoint"
#: the headline's baselines: no swap, the other generalising denoiser and the same swap in the other bands
SWAPS = (MAIN, "none", "medium -> linear Gaussian", "small -> weak checkpoint", "large -> weak checkpoint")
#: the positive control's band. D* (the empirical optimal denoiser: it returns a softmax-weighted mix of
#: the training images) is swapped into the medium band only; the weak checkpoint runs the large band
#: before it and the small band after it. Whether the samples still end on a training image is decided by
#: the trained denoiser in the small band (32 of 96 calls at the committed scale): a denoiser that
#: generalises pulls a sample off the training image it was steered to, one that memorizes keeps it. D* in
#: the small band would decide by construction (it ends on the nearest training image whatever state it
#: enters with); it stays in ``by_band`` as a check of the sampler, not as the control.
CONTROL_BAND = "medium"
#: the negative control's plant: D* of as many other digits (held-out images, never trained on) in the same
#: band. Same denoiser, same band, same calls; only the memorized images are not the training images, so
#: the memorized fraction (measured against the training images) must not move.
DECOY = "D* (other digits)"


@dataclass(frozen=True)
class MemorizationConfig:
    """One run (defaults = the committed run); validated on construction.

    Attributes:
        n_train: training images, in [2, 1597] (200 digits stay held out).
        steps: strictly increasing training-step checkpoints of one training run (at least 2: the
            first is the "weak" checkpoint, the last the "strong" model).
        width: hidden width of the denoiser MLP.
        batch_size, lr: Adam batch size and learning rate (lr in (0, 1)).
        samples: generated samples per arm and seed (>= 10).
        steps_per_band: Heun steps in each noise band (2 denoiser calls per step, >= 1).
        seeds: one independently trained denoiser per seed (initialisation, training batches and
            noise, sampler noise); at least 2 for the paired comparisons.
        data_seed: the train / held-out split (one split, one set of bands for every seed).
        threads: torch CPU threads (part of the cache key of the trained checkpoints).
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
    samples: int = 1000
    steps_per_band: int = 16
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    data_seed: int = 0
    threads: int = 1
    out: str = "out/memorization"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        s = self.steps
        need(len(s) >= 2 and s[0] >= 1 and all(b > a for a, b in zip(s, s[1:])), "steps",
             ",".join(map(str, s)), "need at least 2 positive strictly increasing integers")
        need(len(self.seeds) >= 2 and all(x >= 0 for x in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", ",".join(map(str, self.seeds)), "need at least 2 distinct integers >= 0 (paired comparisons)")
        need(2 <= self.n_train <= N_DIGITS - 200, "n_train", self.n_train,
             f"must be in [2, {N_DIGITS - 200}] (200 digits stay held out)")
        for name, lo in (("width", 1), ("samples", 10), ("batch_size", 1), ("steps_per_band", 1), ("threads", 1),
                         ("data_seed", 0)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(0 < self.lr < 1, "lr", self.lr, "must be in (0, 1)")


def trained_checkpoints(c: MemorizationConfig, train, seed: int) -> dict:
    """The denoiser of ``seed`` at every checkpoint of ``c.steps``, trained once and kept in the onchip cache.

    One training run per seed: initialisation from ``seed_int(seed, "denoiser-init")``, then one
    Adam leg per checkpoint (``seed_int(seed, "training", n)``). The cache key holds the torch
    version, ``c.threads`` (float reductions differ with the thread count), the training images
    and every training setting, so a changed setting retrains.

    Args:
        c: the run (its training settings and threads).
        train: training images (N, 64) in [-1, 1].
        seed: the denoiser's seed.

    Returns:
        ``{steps: EDMDenoiser}`` in eval mode.
    """
    import json

    import torch

    from onchip.cache import cached_build, digest

    from .denoiser import EDMDenoiser, train_denoiser

    settings = {"n_train": c.n_train, "data_seed": c.data_seed, "width": c.width, "batch_size": c.batch_size,
                "lr": c.lr, "steps": list(c.steps), "seed": seed, "threads": c.threads}
    key = digest("memorization-denoiser-v1", torch.__version__, json.dumps(settings, sort_keys=True),
                 train.astype("float64").tobytes())[:32]
    dim, sigma_data = train.shape[1], float(train.std())

    def fill(folder):
        torch.manual_seed(seed_int(seed, "denoiser-init"))
        model = EDMDenoiser(dim=dim, sigma_data=sigma_data, width=c.width)
        done = 0
        for n in c.steps:
            train_denoiser(model, train, n - done, seed=seed_int(seed, "training", n), batch_size=c.batch_size,
                           lr=c.lr, progress=c.progress)
            done = n
            torch.save(model.state_dict(), folder / f"steps-{n}.pt")

    entry, _ = cached_build("memorization_denoiser", key, fill)
    out = {}
    for n in c.steps:
        model = EDMDenoiser(dim=dim, sigma_data=sigma_data, width=c.width)
        model.load_state_dict(torch.load(entry / f"steps-{n}.pt", weights_only=True))
        out[n] = model.eval()
    return out


def arms(steps: tuple[int, ...]) -> dict[str, dict[str, str]]:
    """Every arm of one seed: name -> the denoiser used in each band (``"D*"``, ``"linear"`` or the
    checkpoint's training steps as text), keys :data:`BANDS`.

    Groups (the ``group`` entry): ``reference`` (``D*``, linear Gaussian), ``intensity`` (one
    checkpoint everywhere), ``band intensity`` (checkpoint n in one band, the weak one elsewhere),
    ``swap`` (:data:`SWAPS`, on the strongest model) and ``control`` (``D*`` in one band of the weak
    checkpoint).
    """
    weak, strong = str(steps[0]), str(steps[-1])
    every = lambda d: {b: d for b in BANDS}  # noqa: E731
    out = {"empirical optimal": {"group": "reference", **every("D*")},
           "linear Gaussian": {"group": "reference", **every("linear")}}
    for n in steps:
        out[f"trained {n} steps"] = {"group": "intensity", **every(str(n))}
    for band in BANDS:
        for n in steps[1:]:
            out[f"{n} steps in {band} only"] = {"group": "band intensity", **every(weak), band: str(n)}
    out["none"] = {"group": "swap", **every(strong)}
    out[MAIN] = {"group": "swap", **every(strong), "medium": weak}
    out["medium -> linear Gaussian"] = {"group": "swap", **every(strong), "medium": "linear"}
    out["small -> weak checkpoint"] = {"group": "swap", **every(strong), "small": weak}
    out["large -> weak checkpoint"] = {"group": "swap", **every(strong), "large": weak}
    for band in BANDS:
        out[f"weak checkpoint, D* in {band}"] = {"group": "control", **every(weak), band: "D*"}
    out[f"weak checkpoint, {DECOY} in {CONTROL_BAND}"] = {"group": "control", **every(weak), CONTROL_BAND: DECOY}
    return out


def run(config: MemorizationConfig) -> dict:
    """Run the experiment and write the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``.

    Raises:
        ValueError: the located regimes do not split the sampler's range into three bands
            (a threshold never crossed on the geometry grid).
    """
    import numpy as np
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._data import load_digits_split
    from .._report import rng
    from .._scores import frechet_distance
    from .denoiser import as_denoise, band_grid, heun_sample
    from .evaluate import memorized_fraction
    from .geometry import (empirical_optimal_denoiser, linear_gaussian_denoiser, linear_gaussian_gap,
                           locate_regimes, posterior_concentration, shell_coverage)

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(c.threads)
    train, heldout = load_digits_split(c.n_train, c.data_seed)
    dim = train.shape[1]

    # 1. Geometry of the empirical optimal denoiser and the three bands (one split for every seed).
    geometry_rng = rng(c.data_seed, "geometry")
    sigmas = np.geomspace(0.01, 80.0, 40)
    conc = posterior_concentration(train, heldout, sigmas, geometry_rng)
    cover = shell_coverage(train, heldout, sigmas, geometry_rng)
    gap = linear_gaussian_gap(train, heldout, sigmas, geometry_rng)
    lo, hi = locate_regimes(sigmas, conc, cover)
    need(bool(SIGMA_MIN < lo < hi < SIGMA_MAX), "regimes", (lo, hi),
         f"need {SIGMA_MIN} < sigma_lo < sigma_hi < {SIGMA_MAX} to split the sampler into three bands")
    bands = {"large": (hi, SIGMA_MAX), "medium": (lo, hi), "small": (SIGMA_MIN, lo)}
    grid, band_of_step = band_grid([bands[b] for b in BANDS], c.steps_per_band)
    print(f"regimes: small < {lo:.3g} <= medium < {hi:.3g} <= large; {c.steps_per_band} Heun steps per band")

    mean, cov = train.mean(0), np.cov(train.T)
    decoy = heldout[-c.n_train:]   # as many digits as the training set (all held-out ones when fewer)
    fixed = {"D*": lambda x, s: empirical_optimal_denoiser(x, s, train),
             DECOY: lambda x, s: empirical_optimal_denoiser(x, s, decoy),
             "linear": lambda x, s: linear_gaussian_denoiser(x, s, mean, cov)}
    table = arms(c.steps)
    per_seed, calls_per_band, shown = {}, None, {}
    for seed in c.seeds:
        checkpoints = trained_checkpoints(c, train, seed)
        den = {**fixed, **{str(n): as_denoise(m) for n, m in checkpoints.items()}}
        sampler_seed = seed_int(seed, "sampler")  # common random numbers: every arm of a seed starts alike
        rows, done = {}, {}  # done: band denoisers -> samples (an arm listed twice, e.g. "none", is sampled once)
        for name, spec in table.items():
            which = tuple(spec[b] for b in BANDS)
            if which not in done:
                done[which] = heun_sample([den[which[b]] for b in band_of_step], grid, c.samples, dim, sampler_seed,
                                          clip=DATA_RANGE)
            x, calls = done[which]
            counted = {b: int(calls[band_of_step == k].sum()) for k, b in enumerate(BANDS)}
            need(calls_per_band in (None, counted), "calls_per_band", counted, f"the same for every arm ({calls_per_band})")
            calls_per_band = counted
            rows[name] = {"memorized": memorized_fraction(x, train), "fd_heldout": frechet_distance(x, heldout)}
            if seed == c.seeds[0] and name in ("none", MAIN):
                shown[name] = x[:8]
            print(f"seed {seed} {name:34s} memorized={rows[name]['memorized']:.3f} FD={rows[name]['fd_heldout']:.2f}")
        per_seed[seed] = rows

    summary = {}
    for name, spec in table.items():
        mem = [per_seed[s][name]["memorized"] for s in c.seeds]
        fd = [per_seed[s][name]["fd_heldout"] for s in c.seeds]
        (m_mean, m_std), (f_mean, f_std) = mean_std(mem), mean_std(fd)
        summary[name] = {**spec, "memorized": m_mean, "memorized_std": m_std, "memorized_per_seed": mem,
                         "fd_heldout": f_mean, "fd_heldout_std": f_std, "fd_heldout_per_seed": fd}

    def values(name, key="memorized"):
        return summary[name][f"{key}_per_seed"]

    others = [a for a in SWAPS if a != MAIN]
    paired = {a: paired_difference(values(MAIN), values(a)) for a in others}
    paired_fd = {a: paired_difference(values(MAIN, "fd_heldout"), values(a, "fd_heldout")) for a in others}
    weak = f"trained {c.steps[0]} steps"
    planted, unplanted = f"weak checkpoint, D* in {CONTROL_BAND}", f"weak checkpoint, {DECOY} in {CONTROL_BAND}"
    control = positive_control(
        f"the empirical optimal denoiser D* of the {c.n_train} training images (D* everywhere gives memorized "
        f"fraction {summary['empirical optimal']['memorized']:.3f}) swapped into the {CONTROL_BAND} band "
        f"({calls_per_band[CONTROL_BAND]} of {sum(calls_per_band.values())} denoiser calls) of the "
        f"{c.steps[0]}-step checkpoint, which runs the large band before it and the small band after it "
        f"({calls_per_band['small']} calls): whether the samples end on training images is decided by the trained "
        "denoiser in the small band", planted, weak, values(planted), values(weak), seeds=c.seeds,
        metric="memorized fraction")
    spread = max(summary[control["method"]]["memorized_std"], summary[weak]["memorized_std"])
    control["seed_spread"] = spread
    control["exceeds_seed_spread"] = bool(abs(control["paired"]["difference"]) > spread)
    negative = negative_control(
        f"the same swap with D* of {len(decoy)} held-out digits (never trained on) in place of the training "
        f"images' D*: same denoiser, band and calls, nothing of the training set planted", unplanted, weak,
        values(unplanted), values(weak), seeds=c.seeds, metric="memorized fraction")
    control["by_band"] = {b: paired_difference(values(f"weak checkpoint, D* in {b}"), values(weak)) for b in BANDS}

    result = {
        "headline": headline(
            f"memorized fraction of the samples (nearest / second-nearest training distance < 1/3) of the "
            f"{c.steps[-1]}-step denoiser, by denoiser swap; mean over seeds", MAIN, summary[MAIN]["memorized"],
            {a: summary[a]["memorized"] for a in others},
            budget={"denoiser_calls_per_sample": sum(calls_per_band.values()), "calls_per_band": calls_per_band,
                    "training_steps": c.steps[-1], "samples_per_seed": c.samples, "training_images": c.n_train,
                    "note": "every arm samples on the same band-by-band grid from the same initial noise of a seed; "
                            "the swapped-in checkpoint is an earlier checkpoint of the same training run"},
            seeds=list(c.seeds), direction="lower", std=summary[MAIN]["memorized_std"],
            baseline_std={a: summary[a]["memorized_std"] for a in others}, paired=paired),
        "positive_control": control,
        "negative_control": negative,
        "config": recorded_config(c),
        "threads": c.threads,
        "torch_version": torch.__version__,
        "n_heldout": len(heldout),
        "memorization_threshold": 1 / 3,
        "regimes": {"sigma_lo": lo, "sigma_hi": hi, "bands": bands},
        "sampler": {"kind": "Heun (EDM Algorithm 1), deterministic, no final jump to sigma = 0",
                    "clip_denoised": list(DATA_RANGE),
                    "steps_per_band": c.steps_per_band, "calls_per_band": calls_per_band,
                    "sigmas": [float(s) for s in grid], "band_of_step": [BANDS[k] for k in band_of_step]},
        "paired_fd_heldout": paired_fd,
        "summary": summary,
        "per_seed": {str(s): per_seed[s] for s in c.seeds},
        "fd_train_vs_heldout": frechet_distance(train, heldout),
    }
    with atomic_output_dir(c.out) as out:
        _write(out, c, result, (sigmas, conc, cover, gap), shown)
    return result


def _f(mean, std, digits=3):
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def results_table(result: dict) -> str:
    """Markdown for ``results.md``: the set-up, every arm (mean ± std over seeds and per seed), the
    paired differences of the headline and the positive control."""
    h, s, cfg = result["headline"], result["summary"], result["config"]
    seeds, cpb = h["seeds"], result["sampler"]["calls_per_band"]
    reg = result["regimes"]
    text = (f"Bands: small sigma < {reg['sigma_lo']:.3f} <= medium < {reg['sigma_hi']:.3f} <= large (located once "
            f"on the split of data seed {cfg['data_seed']}). Sampler: {cfg['steps_per_band']} Heun steps per band, "
            f"denoiser calls per band " + ", ".join(f"{b} {n}" for b, n in cpb.items())
            + f" ({sum(cpb.values())} per sample, every arm), every denoised estimate clipped to "
            f"{result['sampler']['clip_denoised']}. {cfg['n_train']} training images, "
            f"{result['n_heldout']} held out, {cfg['samples']} samples per arm and seed, seeds {seeds} (one "
            f"independently trained denoiser each), threads {result['threads']}, torch {result['torch_version']}. "
            f"FD(train, held-out) = {result['fd_train_vs_heldout']:.3f}.\n")
    rows = [(name, r["group"], " / ".join(r[b] for b in BANDS), _f(r["memorized"], r["memorized_std"]),
             " ".join(f"{v:.3f}" for v in r["memorized_per_seed"]), _f(r["fd_heldout"], r["fd_heldout_std"], 2))
            for name, r in s.items()]
    text += "\n" + markdown_table(
        ["arm", "group", "denoiser large / medium / small", "memorized (mean ± std)", "memorized per seed",
         "FD to held-out"], rows,
        caption="Every arm: the denoiser in each band (D* = empirical optimal, linear = linear Gaussian, a number = "
                "that checkpoint of the seed's training run), memorized fraction (ratio < 1/3) and Fréchet distance "
                "to the held-out digits, mean ± std over seeds.")
    text += (f"\nHeadline: {h['method']} {_f(h['value'], h['std'])}. Paired difference {h['method']} - arm over the "
             "seeds (mean [ci95], Student t; an interval that holds zero is no difference):\n\n"
             "- memorized fraction: " + "; ".join(paired_line(n, p) for n, p in h["paired"].items())
             + "\n- FD to held-out: " + "; ".join(paired_line(n, p, 2) for n, p in result["paired_fd_heldout"].items())
             + "\n")
    pc = result["positive_control"]
    text += ("\n## Positive control\n\nSetting: " + pc["setting"] + ".\n\n"
             + markdown_table(["seed", pc["method"], pc["ablation"]],
                              [(sd, f"{a:.3f}", f"{b:.3f}") for sd, a, b in
                               zip(pc["seeds"], pc["method_values"], pc["ablation_values"])],
                              caption="Memorized fraction per seed")
             + "\n" + paired_line(f"{pc['method']} - {pc['ablation']}", pc["paired"])
             + f"; seed spread (largest std of the two arms) {pc['seed_spread']:.3f}. "
             + ("The difference excludes zero and exceeds the seed spread: the experiment sees a memorizing "
                "denoiser confined to one band." if pc["sensitive"] and pc["exceeds_seed_spread"] else
                "The difference does not clear zero and the seed spread: the experiment does not see the "
                "planted memorizing denoiser.")
             + "\n\n" + _negative_line(result["negative_control"])
             + "\n\nD* in each band of the weak checkpoint, minus the weak checkpoint alone (D* in the small band "
             "ends on a training image by construction: a check of the sampler, not a control): "
             + "; ".join(paired_line(b, p) for b, p in pc["by_band"].items()) + ".\n")
    return text


def _negative_line(nc: dict) -> str:
    return (f"Negative control ({nc['setting']}): " + paired_line(f"{nc['method']} - {nc['ablation']}", nc["paired"])
            + (". The interval holds zero: with nothing of the training set planted the experiment sees nothing."
               if nc["holds_zero"] else ". The interval excludes zero: the experiment reports memorization with "
               "nothing of the training set planted, so the positive control does not show what it should."))


def _write(out, c: MemorizationConfig, result: dict, geometry, shown) -> None:
    """metrics.json, results.md, geometry.csv and the three plots."""
    import numpy as np

    from onchip.plotting import pyplot

    sigmas, conc, cover, gap = geometry
    lo, hi = result["regimes"]["sigma_lo"], result["regimes"]["sigma_hi"]
    steps, s, seeds = list(c.steps), result["summary"], list(c.seeds)
    write_csv(out / "geometry.csv", ["sigma", "posterior_concentration", "shell_coverage", "linear_gaussian_gap"],
              zip(sigmas, conc, cover, gap))
    write_metrics(out, result, c.command)
    write_results(out, "Where a diffusion model memorizes along the noise schedule (arXiv 2602.17846)",
                  c.command or "onchip memorization", results_table(result))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogx(sigmas, conc, label="posterior concentration")
    ax.semilogx(sigmas, cover, label="Gaussian-shell coverage")
    ax.semilogx(sigmas, gap, label="gap to linear Gaussian denoiser")
    for v in (lo, hi):
        ax.axvline(v, color="0.5", ls="--")
    ax.axvspan(lo, hi, color="C3", alpha=0.1, label="medium regime")
    grid = np.asarray(result["sampler"]["sigmas"])
    ax.plot(grid, np.full(len(grid), -0.05), "|", color="k", label="sampler grid")
    ax.set(xlabel="sigma", title=f"8x8 digits, {c.n_train} training images")
    ax.legend(fontsize=8)
    save(fig, out / "geometry.png", dpi=80)

    def points(ax, names, y0=0):
        for i, name in enumerate(names):
            r = s[name]
            ax.scatter([i + y0] * len(seeds), r["memorized_per_seed"], s=10, color="0.5", zorder=3)
            ax.errorbar([i + y0], [r["memorized"]], yerr=[r["memorized_std"]], fmt="o", color="C0", capsize=3)

    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    points(axes[0], [f"trained {n} steps" for n in steps])
    axes[0].set_xticks(range(len(steps)), steps)
    axes[0].set(xlabel="training steps", ylabel="memorized fraction", title="training intensity (dots: seeds)")
    for k, band in enumerate(BANDS):
        names = [f"trained {steps[0]} steps"] + [f"{n} steps in {band} only" for n in steps[1:]]
        axes[1].errorbar(np.arange(len(steps)) + 0.08 * (k - 1), [s[n]["memorized"] for n in names],
                         yerr=[s[n]["memorized_std"] for n in names], marker="o", capsize=3, label=band)
    axes[1].set_xticks(range(len(steps)), steps)
    axes[1].set(xlabel="training steps inside the band", title=f"{steps[0]} steps elsewhere")
    axes[1].legend()
    points(axes[2], list(SWAPS))
    axes[2].set_xticks(range(len(SWAPS)), SWAPS, rotation=25, ha="right", fontsize=7)
    axes[2].set_title(f"swaps in the {steps[-1]}-step model", fontsize=9)
    ctrl = ([f"trained {steps[0]} steps"] + [f"weak checkpoint, D* in {b}" for b in BANDS]
            + [f"weak checkpoint, {DECOY} in {CONTROL_BAND}"])
    points(axes[3], ctrl)
    axes[3].set_xticks(range(len(ctrl)), ["weak alone"] + [f"D* in {b}" for b in BANDS]
                       + [f"other digits' D* in {CONTROL_BAND}"], rotation=25, fontsize=8)
    axes[3].set_title(f"control: D* in the {CONTROL_BAND} band of the weak checkpoint", fontsize=9)
    save(fig, out / "memorization.png", dpi=80)
    fig, axes = plt.subplots(2, 8, figsize=(8, 2.4))
    for i, ax in enumerate(axes.flat):
        img = shown["none" if i < 8 else MAIN][i % 8].reshape(8, 8)
        ax.imshow(img, cmap="gray_r", vmin=-1, vmax=1)
        ax.axis("off")
    fig.suptitle(f"seed {seeds[0]}; top: {steps[-1]}-step model; bottom: {MAIN} (same initial noise)", fontsize=8)
    save(fig, out / "samples.png", dpi=80, tight=False)
