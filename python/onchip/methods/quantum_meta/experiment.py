"""The full measurement of one gate: scaling law, in/out-of-distribution gains, baselines, protocol.

Source: arXiv 2601.18973, Secs. "Scaling law", "A few-shot protocol",
"Out-of-distribution devices" and "Beyond quantum control"; the settings
below are our documented defaults (small enough for a few minutes on 2 cores).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from typing import Sequence

from .._report import need, rng, seed_int
from .calibration import FloatCorrectionLearner, calibrate
from .lindblad import gate_problem
from .lqr import SpringFamily, lq_gain_curves
from .maml import (MetaConfig, adapt, average_policy, batch_params, fomaml, grape, infidelity,
                   init_policy, policy_controls)
from .protocol import evaluate_protocol
from .scaling import fit_scaling_law, linearity_in_variance
from .tasks import device_family, sample_devices

#: adaptation step size per gate (chosen so that the gain saturates within ~10 steps)
DEFAULT_INNER_LR = {"x": 2.0, "cz": 1.0}


@dataclass(frozen=True)
class ExperimentSettings:
    """Settings of one run (defaults = the committed default run).

    Attributes:
        sigmas: task spreads sigma whose variances sigma^2 the law is fitted over.
        sigma_train: spread of the in-distribution devices for gains, baselines, protocol.
        ood_shift: shift s of the out-of-distribution devices (rates and coherent spread x s).
        k_max: largest K of the scaling-law grid.
        k_report: K at which gains are reported.
        k_long: adaptation steps of the saturation reference for the protocol.
        n_test: test devices per set.
        probe_steps: N values of the few-shot protocol.
        fraction: f defining the budget K*.
        grape_steps, grape_lr: per-device GRAPE baseline (Adam on raw controls).
        meta: FOMAML settings (inner_lr None = the per-gate default).
        lqr: run the mass-spring-damper check.
        calib_devices, calib_steps: float calibration loop demo (hardware-in-the-loop boundary).
        control_offset: systematic coherent miscalibration of the positive control's devices, in units
            of the family's coherent scales (0.3: X detuning 0.3 pi and drive error +30%; CZ detunings and
            ZZ drift 0.15 pi, drive errors +30%); 0 skips the control.
    """

    sigmas: tuple[float, ...] = (0.02, 0.04, 0.06, 0.08, 0.10)
    sigma_train: float = 0.06
    ood_shift: float = 10.0
    k_max: int = 10
    k_report: int = 8
    k_long: int = 30
    n_test: int = 16
    probe_steps: tuple[int, ...] = (3, 5)
    fraction: float = 0.9
    grape_steps: int = 60
    grape_lr: float = 0.05
    meta_iters: int = 60
    inner_lr: float | None = None
    lqr: bool = True
    lqr_sigmas: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25)
    calib_devices: int = 2
    calib_steps: int = 8
    control_offset: float = 0.3

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if len(self.sigmas) < 3 or any((not np.isfinite(s)) or s <= 0 for s in self.sigmas):
            raise ValueError(f"sigmas: expected at least 3 finite values > 0, got {list(self.sigmas)}")
        if not np.isfinite(self.sigma_train) or self.sigma_train <= 0:
            raise ValueError(f"sigma_train: expected a finite value > 0, got {self.sigma_train!r}")
        if not np.isfinite(self.ood_shift) or self.ood_shift < 1:
            raise ValueError(f"ood_shift: expected a finite value >= 1, got {self.ood_shift!r}")
        if self.k_max < 2:
            raise ValueError(f"k_max: expected >= 2, got {self.k_max!r}")
        if not 0 <= self.k_report <= self.k_long:
            raise ValueError(f"k_report: expected 0 <= k_report <= k_long={self.k_long}, got {self.k_report!r}")
        if self.n_test < 1:
            raise ValueError(f"n_test: expected >= 1, got {self.n_test!r}")
        for n in self.probe_steps:
            if not 2 <= n < self.k_long - 1:
                raise ValueError(f"probe_steps: each N must be in [2, {self.k_long - 2}], got {n!r}")
        if not 0 < self.fraction < 1:
            raise ValueError(f"fraction: expected a value in (0, 1), got {self.fraction!r}")
        if self.meta_iters < 1:
            raise ValueError(f"meta_iters: expected >= 1, got {self.meta_iters!r}")
        if self.inner_lr is not None and not (np.isfinite(self.inner_lr) and self.inner_lr > 0):
            raise ValueError(f"inner_lr: expected a finite value > 0, got {self.inner_lr!r}")
        if not (np.isfinite(self.control_offset) and self.control_offset >= 0):
            raise ValueError(f"control_offset: expected a finite value >= 0, got {self.control_offset!r}")


#: the settings of ``onchip quantum-meta --quick`` (what the tests run): a small grid, short curves, no LQ check
QUICK_SETTINGS = ExperimentSettings(sigmas=(0.03, 0.06, 0.09), k_max=4, k_report=4, k_long=8, n_test=4,
                                    probe_steps=(2, 3), grape_steps=10, meta_iters=4, lqr=False,
                                    calib_devices=1, calib_steps=2)


def run_experiment(gate: str, seed: int, settings: ExperimentSettings, progress: bool = True) -> dict:
    """Measure everything for gate "x" or "cz" on one seed; returns a JSON-ready dict.

    Paper: arXiv 2601.18973, Secs. "Scaling law", "A few-shot protocol", "Out-of-distribution devices".
    Every arm on a test set sees the same devices. Arms with online steps per device: MAML (K =
    ``k_report`` gradient steps from the meta-initialisation), the same K steps from the untrained policy
    (= the analytic pulse; the ablation of meta-learning, same network and same initial weights) and
    GRAPE with K Adam steps from the average policy; zero-step references: the analytic pulse, the average
    policy, the meta-initialisation (K = 0); GRAPE with ``grape_steps`` steps is kept as a larger-budget
    reference. With ``control_offset > 0`` the positive control repeats MAML and its ablation on devices
    with a systematic coherent miscalibration (``DeviceFamily.coherent_offset``).

    Returns:
        ``{"gate", "seed", "settings", "meta_config", "n_segments", "scaling", "meta_training_loss",
        "sets": {"in_distribution", "out_of_distribution"}, "float_calibration"[, "positive_control"][, "lqr"]}``;
        infidelities are 1 - F_avg (dimensionless), gains absolute infidelity reductions.

    Raises:
        ValueError: unknown gate or bad settings.
    """
    import torch
    from onchip.progress import progress_bar

    settings.validate()
    problem = gate_problem(gate)
    family = device_family(gate)
    torch.manual_seed(seed)
    cfg = MetaConfig(meta_iters=settings.meta_iters,
                     inner_lr=settings.inner_lr or DEFAULT_INNER_LR[gate])
    ks = np.arange(settings.k_max + 1)
    sigma2 = np.square(settings.sigmas)

    # 1. scaling-law grid: one meta-initialisation per spread; the test devices of every
    #    spread share the same standard normals (common random numbers)
    gains, gains_se, l0 = [], [], []
    inits = {}
    for j, s in enumerate(progress_bar(settings.sigmas, desc=f"{gate}: sigma grid", disable=not progress)):
        params, _ = fomaml(problem, family, s, cfg, seed_int(seed, "meta-init", "sigma-grid", j), progress=False)
        inits[s] = params
        dev = sample_devices(family, settings.n_test, s, rng(seed, "test-devices", "sigma-grid"))
        losses, _ = adapt(problem, dev, params, settings.k_max, cfg)
        g = losses[0] - losses
        gains.append(g.mean(axis=1))
        gains_se.append(g.std(axis=1, ddof=1) / np.sqrt(g.shape[1]) if g.shape[1] > 1 else np.zeros(len(ks)))
        l0.append(losses[0].mean())
    gains = np.array(gains)
    fit = fit_scaling_law(ks, sigma2, gains)
    lin = linearity_in_variance(sigma2, gains[:, -1])
    per_sigma = [asdict(fit_scaling_law(ks, [s2], g[None])) for s2, g in zip(sigma2, gains)]

    # 2. in / out of distribution at sigma_train: gains, baselines, protocol
    params, meta_hist = fomaml(problem, family, settings.sigma_train, cfg, seed_int(seed, "meta-init", "sigma-train"),
                               progress=progress)
    # the ablation of meta-learning: the same network and initial weights, not meta-trained (= analytic pulse)
    untrained = init_policy(problem, family.n_features, cfg.hidden, seed_int(seed, "meta-init", "sigma-train"))
    u_avg = average_policy(problem, family, settings.sigma_train, steps=80, n_tasks=16, lr=0.02,
                           seed=seed_int(seed, "average-policy"))
    sets = {}
    for name, shift in (("in_distribution", 1.0), ("out_of_distribution", settings.ood_shift)):
        dev = sample_devices(family, settings.n_test, settings.sigma_train, rng(seed, "test-devices", name),
                             shift=shift)
        tensors = dev.torch_tensors(problem)
        losses, _ = adapt(problem, dev, params, settings.k_long, cfg, tensors)
        with torch.no_grad():
            ref = infidelity(problem, tensors, torch.tensor(np.repeat(problem.reference[None], len(dev), 0))).numpy()
            avg = infidelity(problem, tensors, torch.tensor(np.repeat(u_avg[None], len(dev), 0))).numpy()
        grape_loss, _ = grape(problem, dev, u_avg, settings.grape_steps, settings.grape_lr, tensors)
        kr = settings.k_report
        analytic_k, _ = adapt(problem, dev, untrained, kr, cfg, tensors)
        grape_k = grape(problem, dev, u_avg, kr, settings.grape_lr, tensors)[0] if kr >= 1 else avg
        g = losses[0] - losses
        entry = {
            "shift": shift,
            "loss_curve_mean": losses.mean(axis=1),
            "gain_curve_mean": g.mean(axis=1),
            f"gain_K{kr}": float(g[kr].mean()),
            f"relative_gain_K{kr}": float(g[kr].mean() / losses[0].mean()),
            f"gain_vs_analytic_K{kr}": float((ref - losses[kr]).mean()),
            f"relative_gain_vs_analytic_K{kr}": float((ref - losses[kr]).mean() / ref.mean()),
            "baselines_mean_infidelity": {
                "analytic_pulse": float(ref.mean()),
                "average_policy": float(avg.mean()),
                "maml_K0": float(losses[0].mean()),
                f"maml_K{kr}": float(losses[kr].mean()),
                f"analytic_start_K{kr}": float(analytic_k[kr].mean()),
                f"grape_K{kr}": float(grape_k.mean()),
                f"maml_K{settings.k_long}": float(losses[-1].mean()),
                f"grape_{settings.grape_steps}_steps": float(grape_loss.mean()),
            },
            "protocol": {},
        }
        for n in settings.probe_steps:
            ev = evaluate_protocol(losses, n, settings.fraction)
            entry["protocol"][f"N{n}"] = {k: v for k, v in ev.items()}
        sets[name] = entry

    # 3. float calibration loop through the learner interface (hardware-in-the-loop boundary)
    dev = sample_devices(family, settings.calib_devices, settings.sigma_train, rng(seed, "calibration-devices"))
    feats = torch.as_tensor(dev.features)
    with torch.no_grad():
        base = policy_controls(problem, batch_params(params, len(dev)), feats, cfg.output_scale).numpy()
    calib = []
    for i in range(len(dev)):
        learner = FloatCorrectionLearner(dev.features.shape[1], problem.n_controls)
        calib.append(calibrate(problem, dev, i, base[i], learner, settings.calib_steps))
    calib = np.array(calib)

    out = {
        "gate": gate,
        "seed": seed,
        "settings": asdict(settings),
        "meta_config": asdict(cfg),
        "n_segments": problem.n_segments,
        "scaling": {
            "K": ks, "sigma": list(settings.sigmas), "sigma2": sigma2,
            "gain_mean": gains, "gain_stderr": np.array(gains_se), "loss_K0_mean": l0,
            "fit": asdict(fit), "per_sigma_fit": per_sigma,
            f"linearity_G{settings.k_max}_vs_sigma2": lin,
        },
        "meta_training_loss": meta_hist,
        "sets": sets,
        "float_calibration": {"fidelity_curves": calib, "mean_fidelity_gain": float((calib[:, -1] - calib[:, 0]).mean())},
    }
    if settings.control_offset > 0:
        out["positive_control"] = _control_run(problem, family, cfg, seed, settings)
    if settings.lqr:
        fam = SpringFamily()
        lq = lq_gain_curves(fam, settings.lqr_sigmas, settings.k_max, n_test=32, seed=seed)
        lq_s2 = np.square(settings.lqr_sigmas)
        out["lqr"] = {"sigma": list(settings.lqr_sigmas), "gain_mean": lq,
                      "fit": asdict(fit_scaling_law(ks, lq_s2, lq)),
                      "linearity": linearity_in_variance(lq_s2, lq[:, -1]), "family": asdict(fam)}
    return out


def _control_run(problem, family, cfg: MetaConfig, seed: int, settings: ExperimentSettings) -> dict:
    """One seed of the positive control: devices with a systematic coherent miscalibration
    (``settings.control_offset``), far from the analytic pulse's calibrated-device assumption; MAML
    meta-trained on that family and its ablation (the same untrained network = analytic pulse), each
    adapted ``k_report`` steps on the same test devices. Returns mean infidelities (K = 0 and K = k_report)."""
    fam = replace(family, coherent_offset=settings.control_offset)
    init_seed = seed_int(seed, "meta-init", "control")
    params, _ = fomaml(problem, fam, settings.sigma_train, cfg, init_seed)
    dev = sample_devices(fam, settings.n_test, settings.sigma_train, rng(seed, "test-devices", "control"))
    tensors = dev.torch_tensors(problem)
    kr = settings.k_report
    lm, _ = adapt(problem, dev, params, kr, cfg, tensors)
    la, _ = adapt(problem, dev, init_policy(problem, fam.n_features, cfg.hidden, init_seed), kr, cfg, tensors)
    return {"offset": settings.control_offset, "maml_K0": float(lm[0].mean()), f"maml_K{kr}": float(lm[kr].mean()),
            "analytic_start_K0": float(la[0].mean()), f"analytic_start_K{kr}": float(la[kr].mean())}


#: the headline's arms besides the method: online steps per device on the test devices (same K as the method)
#: and the zero-step references the gain is measured from
def headline_arms(k_report: int) -> list[str]:
    """Names of the headline's baselines for ``k_report`` adaptation steps: the K-step arms
    (``analytic_start_K<k>``: the ablation of meta-learning, ``grape_K<k>``) and the zero-step
    references (``analytic_pulse``, ``maml_K0``, ``average_policy``)."""
    return [f"analytic_start_K{k_report}", f"grape_K{k_report}", "analytic_pulse", "maml_K0", "average_policy"]


def summarise(gate: str, runs: Sequence[dict]) -> dict:
    """Combine per-seed :func:`run_experiment` results (same gate and settings) into the report.

    Args:
        gate: "x" or "cz".
        runs: one result per seed, in seed order; at least 2 for the paired comparisons.

    Returns:
        ``{"headline", "positive_control" (when the runs carry one), "seeds", "per_seed", "summary", "runs"}``:
        the headline (mean in-distribution infidelity after K = ``k_report`` steps, MAML against every arm
        of :func:`headline_arms` with the paired difference over seeds and its ci95), per-seed figures
        (infidelities per arm in and out of distribution, gains against the MAML start and against the
        analytic pulse, protocol errors as mean and median over devices, scaling-law fit), their mean,
        median and std over seeds, and the full per-seed results.

    Raises:
        ValueError: fewer than 2 runs, or runs of different settings.
    """
    from .._report import headline, mean_std, paired_difference, positive_control

    need(len(runs) >= 2, "seeds", [r["seed"] for r in runs], "at least 2 seeds for the paired comparisons")
    need(all(r["settings"] == runs[0]["settings"] for r in runs), "runs", len(runs), "runs of the same settings")
    s = runs[0]["settings"]
    kr = s["k_report"]
    seeds = [int(r["seed"]) for r in runs]
    per_seed = {}
    for r in runs:
        row = {}
        for name, entry in r["sets"].items():
            tag = "in" if name == "in_distribution" else "ood"
            for arm, v in entry["baselines_mean_infidelity"].items():
                row[f"{tag}.{arm}"] = v
            row[f"{tag}.gain_vs_maml_K0"] = entry[f"gain_K{kr}"]
            row[f"{tag}.relative_gain_vs_maml_K0"] = entry[f"relative_gain_K{kr}"]
            row[f"{tag}.gain_vs_analytic"] = entry[f"gain_vs_analytic_K{kr}"]
            row[f"{tag}.relative_gain_vs_analytic"] = entry[f"relative_gain_vs_analytic_K{kr}"]
            for n, ev in entry["protocol"].items():
                for q in ("g_sat", "k_star"):
                    row[f"{tag}.protocol_{n}.{q}_err_mean"] = ev[f"rel_err_{q}_mean"]
                    row[f"{tag}.protocol_{n}.{q}_err_median"] = ev[f"rel_err_{q}_median"]
        for q in ("c", "beta", "r2"):
            row[f"fit.{q}"] = r["scaling"]["fit"][q]
        if "positive_control" in r:
            for arm, v in r["positive_control"].items():
                if arm != "offset":
                    row[f"control.{arm}"] = v
        per_seed[str(r["seed"])] = row
    keys = list(per_seed[str(seeds[0])])
    summary = {}
    for k in keys:
        v = [per_seed[str(sd)][k] for sd in seeds]
        m, sd_ = mean_std(v)
        summary[k] = {"mean": m, "median": float(np.median(v)), "std": sd_, "min": float(np.min(v)),
                      "max": float(np.max(v))}
    method = f"maml_K{kr}"
    arms = headline_arms(kr)
    vals = {a: [per_seed[str(sd)][f"in.{a}"] for sd in seeds] for a in [method, *arms]}
    head = headline(
        f"mean infidelity 1 - F_avg of the {s['n_test']} in-distribution test devices ({gate} gate, "
        f"sigma {s['sigma_train']:g}), mean over seeds", method, summary[f"in.{method}"]["mean"],
        {a: summary[f"in.{a}"]["mean"] for a in arms},
        budget={"online_gradient_steps_per_device": {method: kr, arms[0]: kr, arms[1]: kr, "analytic_pulse": 0,
                                                     "maml_K0": 0, "average_policy": 0},
                "offline_meta_iterations": {method: s["meta_iters"], "average_policy": 80}},
        seeds=seeds, direction="lower", std=summary[f"in.{method}"]["std"],
        baseline_std={a: summary[f"in.{a}"]["std"] for a in arms},
        paired={a: paired_difference(vals[method], vals[a]) for a in arms})
    out = {"headline": head}
    if all("positive_control" in r for r in runs):
        off = runs[0]["positive_control"]["offset"]
        out["positive_control"] = positive_control(
            f"devices with a systematic coherent miscalibration of {off:g} x the family's coherent scales (plus the "
            f"usual spread sigma {s['sigma_train']:g}): the analytic pulse assumes a calibrated device, so the start "
            f"of adaptation matters", method, f"analytic_start_K{kr} (same network, not meta-trained)",
            [per_seed[str(sd)][f"control.{method}"] for sd in seeds],
            [per_seed[str(sd)][f"control.analytic_start_K{kr}"] for sd in seeds], seeds=seeds,
            metric=f"mean infidelity 1 - F_avg of {s['n_test']} control test devices after {kr} adaptation steps")
    out.update({"seeds": seeds, "per_seed": per_seed, "summary": summary,
                "paired_out_of_distribution": {a: paired_difference([per_seed[str(sd)][f"ood.{method}"] for sd in seeds],
                                                                    [per_seed[str(sd)][f"ood.{a}"] for sd in seeds])
                                               for a in arms},
                "runs": {str(r["seed"]): r for r in runs}})
    return out


def results_markdown(gate: str, result: dict) -> list[str]:
    """The sections of ``results.md`` for one gate's :func:`summarise` result: headline with paired
    differences, positive control, per-seed tables (infidelities, gains, protocol errors, fit)."""
    from .._report import headline_line, markdown_table, paired_line

    h, seeds, ps, sm = result["headline"], result["seeds"], result["per_seed"], result["summary"]
    kr = result["runs"][str(seeds[0])]["settings"]["k_report"]
    method = h["method"]
    secs = [headline_line(h),
            "Paired differences MAML - arm over seeds (mean and Student t ci95; negative = MAML lower "
            "infidelity; a 'win' only where the interval excludes zero):\n\n"
            + "\n".join(f"- in distribution, {paired_line(a, p, 4)}" for a, p in h["paired"].items())
            + "\n" + "\n".join(f"- out of distribution, {paired_line(a, p, 4)}"
                                for a, p in result["paired_out_of_distribution"].items())]
    if "positive_control" in result:
        pc = result["positive_control"]
        secs.append(f"Positive control ({pc['setting']}): {pc['metric']}; {pc['method']} "
                    + ", ".join(f"{v:.4f}" for v in pc["method_values"]) + f" vs {pc['ablation']} "
                    + ", ".join(f"{v:.4f}" for v in pc["ablation_values"]) + f" (seeds {pc['seeds']}); "
                    + paired_line("difference", pc["paired"], 4) + f"; sensitive: {pc['sensitive']}.")
    arms = [method, *h["baselines"], f"grape_{result['runs'][str(seeds[0])]['settings']['grape_steps']}_steps"]
    for tag, title in (("in", "in distribution"), ("ood", "out of distribution")):
        rows = [[sd, *(f"{ps[str(sd)][f'{tag}.{a}']:.4f}" for a in arms)] for sd in seeds]
        rows += [[stat, *(f"{sm[f'{tag}.{a}'][stat]:.4f}" for a in arms)] for stat in ("mean", "median", "std")]
        secs.append(markdown_table(["seed", *arms], rows, f"Mean infidelity per seed, {title} "
                                   f"(grape_N_steps: larger budget, reference only)"))
    gk = ["gain_vs_maml_K0", "relative_gain_vs_maml_K0", "gain_vs_analytic", "relative_gain_vs_analytic"]
    cols = [f"{t}.{g}" for t in ("in", "ood") for g in gk]
    rows = [[sd, *(f"{ps[str(sd)][c]:.4f}" for c in cols)] for sd in seeds]
    rows += [[stat, *(f"{sm[c][stat]:.4f}" for c in cols)] for stat in ("mean", "median", "std")]
    secs.append(markdown_table(["seed", *cols], rows, f"Gain after K = {kr} steps, from the MAML start (L_0 - L_K) "
                               "and from the analytic pulse (L_analytic - L_K); relative = divided by the start's loss"))
    pcols = [c for c in ps[str(seeds[0])] if ".protocol_" in c]
    rows = [[c, *(f"{ps[str(sd)][c]:.3f}" for sd in seeds), f"{sm[c]['mean']:.3f}", f"{sm[c]['median']:.3f}"]
            for c in pcols]
    secs.append(markdown_table(["protocol relative error", *map(str, seeds), "mean over seeds", "median over seeds"],
                               rows, "Few-shot protocol: per seed the mean and the median over test devices of the "
                               "relative error of G_sat and K*"))
    fcols = [c for c in ps[str(seeds[0])] if c.startswith("fit.")]
    rows = [[c, *(f"{ps[str(sd)][c]:.4f}" for sd in seeds), f"{sm[c]['mean']:.4f}", f"{sm[c]['std']:.4f}"]
            for c in fcols]
    secs.append(markdown_table(["scaling-law fit", *map(str, seeds), "mean", "std"], rows))
    return secs


#: the gates: one-qubit X, two-qubit CZ
GATES = ("x", "cz")


@dataclass(frozen=True)
class QuantumMetaConfig:
    """One run of :func:`run`; validated on construction.

    Attributes:
        gate: ``"x"`` or ``"cz"``.
        seeds: distinct seeds (>= 0), at least 2 (the paired comparisons); each seeds every random draw of
            one :func:`run_experiment`.
        settings: the measurement's settings.
        out: output folder (replaced whole on success).
        progress: progress bars.
        command: the command line recorded in metrics.json (None: not recorded).

    Raises:
        ValueError: a bad field, named in the message.
    """

    gate: str = "x"
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    settings: ExperimentSettings = field(default_factory=ExperimentSettings)
    out: str = "out/quantum-meta"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.gate not in GATES:
            raise ValueError(f"gate: expected 'x' or 'cz', got {self.gate!r}")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        need(len(self.seeds) >= 2 and min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
             list(self.seeds), "two or more distinct integers >= 0 (paired comparisons over seeds)")
        self.settings.validate()


def run(config: QuantumMetaConfig) -> dict:
    """Run :func:`run_experiment` for every seed, combine them (:func:`summarise`) and write metrics.json
    (headline, positive_control, per-seed figures, summary, full per-seed results), results.md, law.json
    (fitted c, beta, R^2 and the linearity check per seed), gain_vs_K.png and gain_vs_variance.png (first
    seed) and per_seed.png (each arm's in-distribution infidelity per seed, and the control) into ``config.out``.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir, write_json

    from .._report import write_metrics, write_results

    c, settings = config, config.settings
    check_output_dir(c.out)
    torch.set_num_threads(1)
    runs = [run_experiment(c.gate, sd, settings, progress=c.progress) for sd in c.seeds]
    res = summarise(c.gate, runs)
    with atomic_output_dir(c.out) as folder:
        write_metrics(folder, res, c.command)
        law = {"gate": c.gate, "law": "G_K = c * sigma^2 * (1 - exp(-beta * K))",
               "per_seed": {str(r["seed"]): {**r["scaling"]["fit"],
                                             "linearity": r["scaling"][f"linearity_G{settings.k_max}_vs_sigma2"],
                                             **({"lqr_fit": r["lqr"]["fit"]} if "lqr" in r else {})}
                            for r in runs}}
        write_json(folder / "law.json", law)
        write_results(folder, f"quantum-meta, {c.gate.upper()} gate, seeds {list(c.seeds)}",
                      c.command or f"onchip quantum-meta --gate {c.gate} --seed {' '.join(map(str, c.seeds))} "
                                    f"--out {c.out}", *results_markdown(c.gate, res))
        _plots(runs[0], folder)
        _seed_plot(res, folder)
    h = res["headline"]
    print(f"{c.gate}: {h['method']} {h['value']:.4f} +- {h['std']:.4f}; "
          + ", ".join(f"{a} {p['difference']:+.4f} {p['ci95']}" for a, p in h["paired"].items()) + f" -> {c.out}")
    return res


def _seed_plot(res: dict, folder) -> None:
    """per_seed.png: in-distribution infidelity of every headline arm per seed, and the positive control."""
    from onchip.plotting import pyplot

    from .._report import save

    plt = pyplot()
    h, seeds = res["headline"], res["seeds"]
    arms = [h["method"], *h["baselines"]]
    ncol = 2 if "positive_control" in res else 1
    fig, axes = plt.subplots(1, ncol, figsize=(5.5 * ncol, 4), squeeze=False)
    ax = axes[0, 0]
    for i, a in enumerate(arms):
        v = [res["per_seed"][str(sd)][f"in.{a}"] for sd in seeds]
        ax.plot(np.full(len(v), i) + np.linspace(-0.15, 0.15, len(v)), v, "o", ms=4)
    ax.set_xticks(range(len(arms)), arms, rotation=25, fontsize=8)
    ax.set_ylabel("mean infidelity, in distribution")
    ax.set_title(f"per seed ({len(seeds)} seeds)")
    if "positive_control" in res:
        pc = res["positive_control"]
        ax = axes[0, 1]
        for sd, m, a in zip(pc["seeds"], pc["method_values"], pc["ablation_values"]):
            ax.plot([0, 1], [m, a], "o-", ms=4, label=f"seed {sd}")
        ax.set_xticks([0, 1], ["MAML", "analytic start"])
        ax.set_ylabel("mean infidelity after K steps")
        ax.set_title(f"positive control (offset {res['runs'][str(seeds[0])]['positive_control']['offset']:g})")
        ax.legend(fontsize=7)
    save(fig, folder / "per_seed.png", dpi=110)


def _plots(res: dict, folder) -> None:
    """gain_vs_K.png (measured G_K with the fitted law) and gain_vs_variance.png (G at the largest K)."""
    from onchip.plotting import pyplot

    from .._report import save
    from .scaling import saturating_law

    plt = pyplot()
    sc = res["scaling"]
    ks = np.asarray(sc["K"])
    kf = np.linspace(0, ks[-1], 200)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for s, s2, g, se in zip(sc["sigma"], sc["sigma2"], sc["gain_mean"], sc["gain_stderr"]):
        line = ax.errorbar(ks, g, yerr=se, fmt="o", ms=4, label=f"sigma={s:g}")
        ax.plot(kf, saturating_law(kf, s2, sc["fit"]["c"], sc["fit"]["beta"]), color=line[0].get_color())
    ax.set_xlabel("adaptation steps K")
    ax.set_ylabel("gain G_K = E[L_0 - L_K] (infidelity)")
    f = sc["fit"]
    ax.set_title(f"{res['gate'].upper()}: c={f['c']:.3g}, beta={f['beta']:.3g}, R2={f['r2']:.4f}")
    ax.legend(fontsize=8)
    save(fig, folder / "gain_vs_K.png", dpi=120)

    fig, ax = plt.subplots(figsize=(5.5, 4))
    s2 = np.asarray(sc["sigma2"])
    gk = np.asarray(sc["gain_mean"])[:, -1]
    lin = sc[f"linearity_G{ks[-1]}_vs_sigma2"]
    ax.plot(s2, gk, "o", label=f"measured G_{ks[-1]}")
    xx = np.linspace(0, s2.max(), 50)
    ax.plot(xx, lin["slope"] * xx + lin["intercept"], "-", label=f"linear fit, R2={lin['r2']:.4f}")
    ax.plot(xx, saturating_law(ks[-1], xx, f["c"], f["beta"]), "--", label="scaling law")
    ax.set_xlabel("task variance sigma^2")
    ax.set_ylabel(f"G_{ks[-1]}")
    ax.legend(fontsize=8)
    save(fig, folder / "gain_vs_variance.png", dpi=120)
