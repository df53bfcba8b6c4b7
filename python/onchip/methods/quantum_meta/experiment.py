"""The full measurement of one gate: scaling law, in/out-of-distribution gains, baselines, protocol.

Source: arXiv 2601.18973, Secs. "Scaling law", "A few-shot protocol",
"Out-of-distribution devices" and "Beyond quantum control"; the settings
below are our documented defaults (small enough for a few minutes on 2 cores).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .._report import rng, seed_int
from .calibration import FloatCorrectionLearner, calibrate
from .lindblad import gate_problem
from .lqr import SpringFamily, lq_gain_curves
from .maml import (MetaConfig, adapt, average_policy, batch_params, fomaml, grape, infidelity,
                   policy_controls)
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


def run_experiment(gate: str, seed: int, settings: ExperimentSettings, progress: bool = True) -> dict:
    """Measure everything for gate "x" or "cz"; returns a JSON-ready dict (arrays as lists).

    Raises:
        ValueError: unknown gate or bad settings.
    """
    import torch
    from tqdm import tqdm

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
    for j, s in enumerate(tqdm(settings.sigmas, desc=f"{gate}: sigma grid", disable=not progress)):
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
        g = losses[0] - losses
        entry = {
            "shift": shift,
            "loss_curve_mean": losses.mean(axis=1),
            "gain_curve_mean": g.mean(axis=1),
            f"gain_K{kr}": float(g[kr].mean()),
            f"relative_gain_K{kr}": float(g[kr].mean() / losses[0].mean()),
            "baselines_mean_infidelity": {
                "analytic_pulse": float(ref.mean()),
                "average_policy": float(avg.mean()),
                "maml_K0": float(losses[0].mean()),
                f"maml_K{kr}": float(losses[kr].mean()),
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
    if settings.lqr:
        fam = SpringFamily()
        lq = lq_gain_curves(fam, settings.lqr_sigmas, settings.k_max, n_test=32, seed=seed)
        lq_s2 = np.square(settings.lqr_sigmas)
        out["lqr"] = {"sigma": list(settings.lqr_sigmas), "gain_mean": lq,
                      "fit": asdict(fit_scaling_law(ks, lq_s2, lq)),
                      "linearity": linearity_in_variance(lq_s2, lq[:, -1]), "family": asdict(fam)}
    return {"headline": headline_of(out), **out}


def headline_of(result: dict) -> dict:
    """The headline of :func:`run_experiment`'s result (without its headline): mean infidelity of the
    in-distribution test devices after ``k_report`` adaptation steps from the meta-initialisation,
    next to the analytic pulse, the average policy, the meta-initialisation itself (K = 0) and
    per-device GRAPE; one seed, so the standard deviations are 0."""
    from .._report import headline

    s = result["settings"]
    kr = s["k_report"]
    base = result["sets"]["in_distribution"]["baselines_mean_infidelity"]
    others = ["analytic_pulse", "average_policy", "maml_K0", f"grape_{s['grape_steps']}_steps"]
    return headline(
        f"mean infidelity 1 - F_avg of the {s['n_test']} in-distribution test devices ({result['gate']} gate, "
        f"sigma {s['sigma_train']:g})", f"maml_K{kr}", base[f"maml_K{kr}"], {k: base[k] for k in others},
        budget={"adaptation_steps": kr, "grape_steps": s["grape_steps"], "meta_iterations": s["meta_iters"]},
        seeds=[result["seed"]], direction="lower", std=0.0, baseline_std={k: 0.0 for k in others})


#: the gates: one-qubit X, two-qubit CZ
GATES = ("x", "cz")


@dataclass(frozen=True)
class QuantumMetaConfig:
    """One run of :func:`run`; validated on construction.

    Attributes:
        gate: ``"x"`` or ``"cz"``.
        seed: seed of every random draw (>= 0).
        settings: the measurement's settings.
        out: output folder (replaced whole on success).
        progress: progress bars.
        command: the command line recorded in metrics.json (None: not recorded).

    Raises:
        ValueError: a bad field, named in the message.
    """

    gate: str = "x"
    seed: int = 0
    settings: ExperimentSettings = field(default_factory=ExperimentSettings)
    out: str = "out/quantum-meta"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.gate not in GATES:
            raise ValueError(f"gate: expected 'x' or 'cz', got {self.gate!r}")
        if self.seed < 0:
            raise ValueError(f"seed: expected an integer >= 0, got {self.seed}")
        self.settings.validate()


def run(config: QuantumMetaConfig) -> dict:
    """Run :func:`run_experiment` and write metrics.json, law.json (fitted c, beta, R^2 and the
    linearity check), gain_vs_K.png and gain_vs_variance.png into ``config.out``.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir, write_json

    from .._report import write_metrics

    c, settings = config, config.settings
    check_output_dir(c.out)
    torch.set_num_threads(1)
    res = run_experiment(c.gate, c.seed, settings, progress=c.progress)
    with atomic_output_dir(c.out) as folder:
        write_metrics(folder, res, c.command)
        law = {"gate": c.gate, "law": "G_K = c * sigma^2 * (1 - exp(-beta * K))",
               **res["scaling"]["fit"],
               "linearity": res["scaling"][f"linearity_G{settings.k_max}_vs_sigma2"]}
        if "lqr" in res:
            law["lqr_fit"] = res["lqr"]["fit"]
        write_json(folder / "law.json", law)
        _plots(res, folder)
    kr = settings.k_report
    f = res["scaling"]["fit"]
    print(f"{c.gate}: c={f['c']:.4g} beta={f['beta']:.4g} R2={f['r2']:.4f}; "
          f"relative gain K={kr}: in {res['sets']['in_distribution'][f'relative_gain_K{kr}']:.1%}, "
          f"out {res['sets']['out_of_distribution'][f'relative_gain_K{kr}']:.1%} -> {c.out}")
    return res


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
