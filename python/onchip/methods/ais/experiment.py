"""The AIS experiment: entropic mirror adaptive importance sampling against PMC, AMIS and an ablation.

Over several seeds, every sampler runs on one target under one budget rule; the headline is the
final proposal's KL(target || proposal) of EM2C next to every baseline's, with the paired difference
over seeds and its ci95. Two studies ride along: the *positive control* (EM2C against its no-move
ablation on the 4-mode mixture, whose modes the initial proposal misses, with the same fresh draws per
iteration: the setting where the global move must matter) and, under the equal-evaluations rule, the
*split sweep* (EM2C at the same total target evaluations with its budget split differently between
fresh draws per iteration and MH steps per adaptation).

Writes ``metrics.json`` (configuration, headline, per-seed and summary diagnostics, control, split),
``results.md``, ``history.csv`` (one row per seed, method and iteration), ``per_seed.csv`` and
``metrics.png`` / ``samples.png`` / ``split.png``.
Method: "Entropic Mirror Monte Carlo", arXiv 2602.03165 (see seeds/ais-entropic-mirror.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._report import need
from .samplers import METHODS, SamplerConfig
from .targets import TARGETS

BUDGETS = ("equal-evaluations", "equal-iterations")
#: MH steps per adaptation of the split sweep's arms (0 is the no-move ablation: every evaluation a fresh draw)
SPLIT_STEPS = (0, 2, 5, 10)
#: the positive control's planted setting: four modes at (+-5, +-5, 0, ...) that the initial proposal
#: (means ~ N(0, 3^2 I), covariances 3^2 I) mostly misses
CONTROL_TARGET, CONTROL_DIM = "gmm4", 10


@dataclass(frozen=True)
class AisConfig:
    """One run (defaults = the committed gmm4 run); validated on construction.

    Attributes:
        target: one of :data:`.targets.TARGETS`.
        dim: dimension (see :func:`.targets.make_target` for the range per target).
        methods: samplers, a subset of :data:`.samplers.METHODS`.
        iterations, samples, eps, components, defensive_weight, mcmc_steps: the
            :class:`.samplers.SamplerConfig` fields ``iterations``, ``n_samples``, ``eps``,
            ``n_components`` (None: the number of target modes / regions), ``defensive_weight``
            and ``mcmc_steps``.
        budget: ``equal-evaluations`` (default): every method spends the target evaluations
            of EM2C (its MH moves included, ``N (I + (I - 1) mcmc_steps)`` for I iterations);
            the others draw more samples per iteration, ``ceil(evals_em2c / I)``.
            ``equal-iterations``: every method draws ``samples`` per iteration, so EM2C spends
            about ``mcmc_steps + 1`` times more target evaluations than the others (the
            comparison the paper's plots make).
        seeds: one or more distinct seeds (>= 0); each seeds the initial mixture, every draw and
            the exact target draws of the KL estimate, the same for every method (paired runs).
        split: MH steps per adaptation of the split sweep's EM2C arms, each drawing
            :func:`split_samples` per iteration so that all spend EM2C's total evaluations
            (0: the no-move ablation). ``None``: :data:`SPLIT_STEPS` under equal evaluations,
            none under equal iterations; ``()`` skips the sweep. Only with ``equal-evaluations``.
        control: run the positive control (:data:`CONTROL_TARGET` in :data:`CONTROL_DIM`
            dimensions, EM2C against ``em2c-nomove`` with ``samples`` fresh draws per iteration
            each, over ``seeds``; needs at least 2 seeds).
        out: output folder (replaced whole on success).
        progress: progress bars.
        command: the command line recorded in metrics.json (None: not recorded).

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    target: str = "gmm4"
    dim: int = 10
    methods: tuple[str, ...] = METHODS
    iterations: int = 30
    samples: int = 1000
    eps: float = 0.5
    components: int | None = None
    defensive_weight: float = 0.2
    mcmc_steps: int = 10
    budget: str = "equal-evaluations"
    seeds: tuple[int, ...] = tuple(range(10))
    split: tuple[int, ...] | None = None
    control: bool = True
    out: str = "out/ais"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        from .targets import make_target

        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        need(self.target in TARGETS, "target", self.target, f"must be one of {', '.join(TARGETS)}")
        make_target(self.target, self.dim)  # checks dim ("dim: ...")
        need(bool(self.methods) and all(m in METHODS for m in self.methods), "methods", list(self.methods),
             f"choose from {', '.join(METHODS)}")
        need(len(self.seeds) >= 1 and min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
             list(self.seeds), "one or more distinct integers >= 0")
        need(self.budget in BUDGETS, "budget", self.budget, f"must be one of {', '.join(BUDGETS)}")
        if self.split is None:
            object.__setattr__(self, "split", SPLIT_STEPS if self.budget == "equal-evaluations" else ())
        object.__setattr__(self, "split", tuple(int(s) for s in self.split))
        need(all(s >= 0 for s in self.split) and len(set(self.split)) == len(self.split), "split", list(self.split),
             "distinct MH step counts >= 0")
        need(not self.split or self.budget == "equal-evaluations", "split", list(self.split),
             "the split sweep holds evaluations equal: only with budget equal-evaluations")
        need(not self.control or len(self.seeds) >= 2, "seeds", list(self.seeds),
             "the positive control's paired comparison needs at least 2 seeds")
        try:
            self.sampler_config().validate()
        except ValueError as exc:
            name, _, rest = str(exc).partition(":")
            raise ValueError({"n_samples": "samples", "n_components": "components"}.get(name, name) + ":" + rest) from None

    def sampler_config(self, method: str = "em2c") -> SamplerConfig:
        """The :class:`.samplers.SamplerConfig` of ``method`` in this run (its draws per
        iteration follow :attr:`budget`)."""
        n = self.samples
        if self.budget == "equal-evaluations" and method != "em2c":
            n = -(-self.em2c_evals() // self.iterations)
        return SamplerConfig(n_samples=n, iterations=self.iterations, eps=self.eps,
                             n_components=self.components, defensive_weight=self.defensive_weight,
                             mcmc_steps=self.mcmc_steps)

    def em2c_evals(self) -> int:
        """EM2C's target evaluations in this run: ``samples (I + (I - 1) mcmc_steps)``."""
        return SamplerConfig(n_samples=self.samples, iterations=self.iterations,
                             mcmc_steps=self.mcmc_steps).target_evals("em2c")

    def split_config(self, steps: int) -> tuple[str, SamplerConfig]:
        """The split sweep's arm with ``steps`` MH steps per adaptation: ``("em2c", config)`` drawing
        :func:`split_samples` per iteration (``("em2c-nomove", ...)`` for 0 steps)."""
        n = split_samples(self.em2c_evals(), self.iterations, steps)
        base = self.sampler_config("em2c")
        return ("em2c" if steps else "em2c-nomove",
                SamplerConfig(n_samples=n, iterations=self.iterations, eps=self.eps, n_components=self.components,
                              defensive_weight=self.defensive_weight, mcmc_steps=steps or base.mcmc_steps))

    def control_config(self) -> SamplerConfig:
        """The positive control's sampler settings (both arms): ``samples`` draws per iteration."""
        return SamplerConfig(n_samples=self.samples, iterations=self.iterations, eps=self.eps,
                             defensive_weight=self.defensive_weight, mcmc_steps=self.mcmc_steps)


def split_samples(total: int, iterations: int, steps: int) -> int:
    """Draws per iteration N of an EM2C arm with ``steps`` MH steps per adaptation that spends
    ``total`` target evaluations: ``ceil(total / (I + (I - 1) steps))`` for I ``iterations``
    (its spend ``N (I + (I - 1) steps)`` exceeds ``total`` by less than ``I + (I - 1) steps``).

    Raises:
        ValueError: ``iterations`` < 1, ``steps`` < 0 or ``total`` < 1.
    """
    need(iterations >= 1, "iterations", iterations, "must be >= 1")
    need(steps >= 0, "steps", steps, "must be >= 0")
    need(total >= 1, "total", total, "must be >= 1")
    return -(-total // (iterations + (iterations - 1) * steps))


class _Runs:
    """Sampler runs by (target, dim, method, settings, seed), each run once (the control and the split
    sweep share arms with the main comparison)."""

    def __init__(self, progress: bool):
        self.progress, self.cache, self.targets = progress, {}, {}

    def __call__(self, target: str, dim: int, method: str, config: SamplerConfig, seed: int):
        from .samplers import run_sampler
        from .targets import make_target

        key = (target, dim, method, tuple(sorted(config.as_dict().items())), seed)
        if key not in self.cache:
            if (target, dim) not in self.targets:
                self.targets[target, dim] = make_target(target, dim)
            self.cache[key] = run_sampler(self.targets[target, dim], method, config, seed=seed,
                                          progress=self.progress)
        return self.cache[key]


def run(config: AisConfig) -> dict:
    """Run every sampler on the target over the seeds (plus the control and the split sweep) and write
    the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``.
    """
    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import (
        mean_std_dict,
        paired_difference,
        positive_control,
        recorded_config,
        write_dict_csv,
        write_metrics,
        write_results,
    )
    from .targets import make_target

    c = config
    check_output_dir(c.out)
    target = make_target(c.target, c.dim)
    runs = _Runs(c.progress)
    samplers = {m: c.sampler_config(m) for m in c.methods}
    results = {m: {s: runs(c.target, c.dim, m, samplers[m], s) for s in c.seeds} for m in c.methods}
    per_seed = {m: {str(s): results[m][s][0][-1].as_dict() for s in c.seeds} for m in c.methods}
    keys = [k for k in next(iter(per_seed[c.methods[0]].values())) if k != "iteration"]
    result = {
        "target": c.target, "dim": c.dim, "log_z": target.log_z, "seeds": list(c.seeds), "budget": c.budget,
        "settings": recorded_config(c),
        "config": c.sampler_config("em2c").as_dict(),
        "samples_per_iteration": {m: s.n_samples for m, s in samplers.items()},
        "target_evals": {m: s.target_evals(m) for m, s in samplers.items()},
        "summary": {m: {k: mean_std_dict([per_seed[m][str(s)][k] for s in c.seeds]) for k in keys}
                    for m in c.methods},
        "per_seed": per_seed,
    }
    if c.control:
        cc = c.control_config()
        arms = {m: [runs(CONTROL_TARGET, CONTROL_DIM, m, cc, s)[0][-1] for s in c.seeds]
                for m in ("em2c", "em2c-nomove")}
        pc = positive_control(
            f"{CONTROL_TARGET} d={CONTROL_DIM} (four modes at (+-5, +-5, 0, ...) that the initial proposal, means "
            f"~ N(0, 3^2 I), mostly misses); both arms draw {cc.n_samples} fresh points per iteration for "
            f"{cc.iterations} iterations, EM2C also spends its {cc.mcmc_steps} MH steps per point and adaptation "
            "(the mechanism: equal draws, not equal evaluations)",
            "em2c", "em2c-nomove", [r.kl for r in arms["em2c"]], [r.kl for r in arms["em2c-nomove"]],
            seeds=c.seeds, metric="KL(target || final proposal) in nats")
        pc["mode_coverage"] = {m: [r.mode_coverage for r in v] for m, v in arms.items()}
        pc["target_evals"] = {m: cc.target_evals(m) for m in arms}
        result["positive_control"] = pc
    if c.split:
        arms = []
        for steps in c.split:
            method, sc = c.split_config(steps)
            finals = [runs(c.target, c.dim, method, sc, s)[0][-1] for s in c.seeds]
            arms.append({"mcmc_steps": steps, "method": method, "samples_per_iteration": sc.n_samples,
                         "target_evals": sc.target_evals(method),
                         "kl": [r.kl for r in finals], "mode_coverage": [r.mode_coverage for r in finals],
                         "log_z_error": [r.log_z_error for r in finals],
                         "kl_summary": mean_std_dict([r.kl for r in finals])})
        ref = min(arms, key=lambda a: a["mcmc_steps"])
        for a in arms:
            if a is not ref and len(c.seeds) >= 2:
                a["paired_vs_fewest_steps"] = paired_difference(a["kl"], ref["kl"])
        result["split"] = {"total_evaluations": c.em2c_evals(), "reference_steps": ref["mcmc_steps"], "arms": arms}
    result = {"headline": headline_of(result), **result}
    with atomic_output_dir(c.out) as out:
        write_dict_csv(out / "history.csv", [dict(seed=s, method=m, **r.as_dict()) for m in c.methods
                                              for s in c.seeds for r in results[m][s][0]])
        write_dict_csv(out / "per_seed.csv", [dict(seed=int(s), method=m, **v) for m in c.methods
                                               for s, v in per_seed[m].items()])
        write_metrics(out, result, c.command)
        write_results(out, f"AIS: {c.target}, d={c.dim}, {c.budget}", c.command or default_command(c),
                      results_table(result))
        _plots(out, c, target, results, result)
    for m in c.methods:
        r = result["summary"][m]
        print(f"{m:12s} KL={r['kl']['mean']:.3f}±{r['kl']['std']:.3f} logZerr={r['log_z_error']['mean']:+.3f} "
              f"ESS/N={r['ess_fraction']['mean']:.3f} coverage={r['mode_coverage']['mean']:.2f} "
              f"target evals={result['target_evals'][m]:,}")
    return result


def default_command(c: AisConfig) -> str:
    """The ``onchip ais`` line that makes ``c`` (for results.md when no command was recorded)."""
    return (f"onchip ais --target {c.target} --dim {c.dim} --iterations {c.iterations} --samples {c.samples} "
            f"--budget {c.budget} --seeds {','.join(map(str, c.seeds))} --out {c.out}")


def headline_of(result: dict) -> dict:
    """The headline of a run's ``metrics.json`` content (without its headline): the final proposal's
    KL(target || proposal) of EM2C (or the first sampler run), mean over seeds, next to every other
    sampler's at the run's target-evaluation budget, with the paired difference EM2C - baseline over the
    seeds and its ci95 (:func:`onchip.methods._report.paired_difference`) when there are 2 seeds or more."""
    from .._report import headline, paired_difference

    summary, seeds = result["summary"], result["seeds"]
    main = "em2c" if "em2c" in summary else next(iter(summary))
    others = [m for m in summary if m != main]
    kl = {m: [result["per_seed"][m][str(s)]["kl"] for s in seeds] for m in summary}
    paired = {m: paired_difference(kl[main], kl[m]) for m in others} if len(seeds) >= 2 else None
    return headline(
        f"KL(target || final proposal) in nats, {result['target']} d={result['dim']}", main,
        summary[main]["kl"]["mean"], {m: summary[m]["kl"]["mean"] for m in others},
        budget={"rule": result["budget"], "iterations": result["config"]["iterations"],
                "target_evaluations": dict(result["target_evals"])},
        seeds=seeds, direction="lower", std=summary[main]["kl"]["std"],
        baseline_std={m: summary[m]["kl"]["std"] for m in others}, paired=paired)


def results_table(result: dict) -> str:
    """Markdown of a run: the headline, a summary per method (mean ± std over seeds), the final KL and
    mode coverage per seed, the paired differences EM2C - baseline with ci95, the positive control and
    the split sweep. An interval that holds zero is reported as no difference."""
    from .._report import (
        excludes_zero,
        headline_line,
        markdown_table,
        mean_std_text,
        paired_line,
    )

    seeds, summ, h = result["seeds"], result["summary"], result["headline"]
    methods = list(summ)

    def ms(m, k, digits=3, sign=False):
        return mean_std_text(summ[m][k]["mean"], summ[m][k]["std"], digits, sign=sign, std_digits=3)

    parts = [headline_line(h) + f" Budget: {result['budget']}, {result['config']['iterations']} iterations."]
    parts.append(markdown_table(
        ["method", "draws/iteration", "target evals", "KL(pi‖q)", "log Z error", "ESS/N", "mode coverage", "mean RMSE"],
        [[m, result["samples_per_iteration"][m], result["target_evals"][m], ms(m, "kl"), ms(m, "log_z_error", sign=True),
          ms(m, "ess_fraction"), ms(m, "mode_coverage", 2), ms(m, "mean_rmse")] for m in methods],
        f"Final iteration, mean ± std over seeds {seeds}:"))
    parts.append(markdown_table(
        ["seed", *methods],
        [[s, *(f"{result['per_seed'][m][str(s)]['kl']:.3f} ({result['per_seed'][m][str(s)]['mode_coverage']:.2f})"
               for m in methods)] for s in seeds],
        "Per seed: final KL(pi‖q) (mode coverage):"))
    if h.get("paired"):
        lines = [f"- {paired_line(h['method'] + ' - ' + m, p)}"
                 + (" (interval holds zero: no difference)" if not excludes_zero(p) else "")
                 for m, p in h["paired"].items()]
        parts.append(f"Paired difference of final KL, {h['method']} - baseline, over seeds (mean [ci95], Student t; "
                     "negative = EM2C lower):\n\n" + "\n".join(lines))
    pc = result.get("positive_control")
    if pc:
        parts.append(markdown_table(
            ["seed", "em2c KL", "em2c-nomove KL", "em2c coverage", "em2c-nomove coverage"],
            [[s, f"{a:.3f}", f"{b:.3f}", f"{ca:.2f}", f"{cb:.2f}"] for s, a, b, ca, cb in
             zip(pc["seeds"], pc["method_values"], pc["ablation_values"], pc["mode_coverage"]["em2c"],
                 pc["mode_coverage"]["em2c-nomove"])],
            f"Positive control: {pc['setting']}. Target evaluations: {pc['target_evals']}.")
            + f"\n{paired_line('em2c - em2c-nomove', pc['paired'])}; sensitive (ci95 excludes zero): "
            f"{pc['sensitive']}.")
    sp = result.get("split")
    if sp:
        ref = sp["reference_steps"]
        rows = []
        for a in sp["arms"]:
            p = a.get("paired_vs_fewest_steps")
            rows.append([a["mcmc_steps"], a["samples_per_iteration"], a["target_evals"],
                         " / ".join(f"{v:.3f}" for v in a["kl"]),
                         f"{a['kl_summary']['mean']:.3f} ± {a['kl_summary']['std']:.3f}",
                         f"{sum(a['mode_coverage']) / len(a['mode_coverage']):.2f}",
                         paired_line(f"vs {ref} steps", p) if p else "reference"])
        parts.append(markdown_table(
            ["MH steps per adaptation", "draws/iteration", "target evals", "KL per seed", "KL mean ± std",
             "mean coverage", "paired KL difference [ci95]"], rows,
            f"Split sweep: EM2C at equal total target evaluations ({sp['total_evaluations']}), the budget split "
            f"between fresh draws per iteration and MH steps (0 steps = em2c-nomove); seeds {seeds}:"))
    return "\n\n".join(part.rstrip("\n") for part in parts)


def _plots(out, c: AisConfig, target, results: dict, result: dict) -> None:
    """metrics.png (diagnostics per iteration, mean over seeds), samples.png (target vs the first seed's
    final proposal) and split.png (final KL per seed against the MH steps of the split sweep)."""
    import numpy as np

    from onchip.plotting import pyplot

    from .._report import save

    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    panels = [("kl", "KL(target || proposal) [nats]", True), ("log_z_error", "|log Z error|", True),
              ("ess_fraction", "ESS / N", False), ("mode_coverage", "mode coverage", False)]
    for ax, (key, label, log) in zip(axes, panels):
        for m, by_seed in results.items():
            vals = np.mean([[abs(getattr(r, key)) if key == "log_z_error" else getattr(r, key) for r in hist]
                            for hist, _ in by_seed.values()], axis=0)
            ax.plot(np.arange(1, len(vals) + 1), vals, marker=".", label=m)
        ax.set(xlabel="iteration", title=label + " (mean over seeds)", yscale="log" if log else "linear")
    axes[0].legend()
    fig.suptitle(f"{c.target}, d={c.dim}, {c.budget}, seeds {list(c.seeds)}")
    save(fig, out / "metrics.png", dpi=80)
    seed = c.seeds[0]
    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 4), squeeze=False)
    truth = target.sample(2000, np.random.default_rng(seed))
    for ax, (m, by_seed) in zip(axes[0], results.items()):
        draws = by_seed[seed][1]["mixture"].sample(1000, np.random.default_rng(seed))
        ax.scatter(truth[:, 0], truth[:, 1], s=2, c="0.7", label="target")
        ax.scatter(draws[:, 0], draws[:, 1], s=2, c="C3", label="final proposal")
        ax.set(title=f"{m} (seed {seed})", xlabel="x1" if c.target != "funnel" else "v", ylabel="x2")
    axes[0][0].legend(markerscale=4)
    save(fig, out / "samples.png", dpi=80)
    sp = result.get("split")
    if sp:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for i, a in enumerate(sp["arms"]):
            ax.scatter([i] * len(a["kl"]), a["kl"], s=14, c="C0", alpha=0.6)
            ax.errorbar(i + 0.15, a["kl_summary"]["mean"], yerr=a["kl_summary"]["std"], fmt="o", c="C3", capsize=3)
        ax.set_xticks(range(len(sp["arms"])),
                      [f"{a['mcmc_steps']} steps\nN={a['samples_per_iteration']}" for a in sp["arms"]])
        ax.set(yscale="log", ylabel="final KL(target || q) [nats]",
               title=f"EM2C split at {sp['total_evaluations']:,} target evaluations")
        save(fig, out / "split.png", dpi=80)
