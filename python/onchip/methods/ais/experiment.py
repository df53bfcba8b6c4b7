"""The AIS experiment: entropic mirror adaptive importance sampling against PMC, AMIS and an ablation.

Writes ``metrics.json`` (configuration, final and per-iteration diagnostics of every method),
``history.csv`` (one row per method and iteration) and ``metrics.png`` / ``samples.png``.
Method: "Entropic Mirror Monte Carlo", arXiv 2602.03165 (see seeds/ais-entropic-mirror.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._report import need
from .samplers import METHODS, SamplerConfig
from .targets import TARGETS

BUDGETS = ("equal-evaluations", "equal-iterations")


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
            of EM2C (its MH moves included); the others draw more samples per iteration,
            ``ceil(evals_em2c / iterations)``. ``equal-iterations``: every method draws
            ``samples`` per iteration, so EM2C spends about ``mcmc_steps + 2`` times more
            target evaluations than the others (the comparison the paper's plots make).
        seed: random seed (>= 0).
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
    seed: int = 0
    out: str = "out/ais"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        from .targets import make_target

        object.__setattr__(self, "methods", tuple(self.methods))
        need(self.target in TARGETS, "target", self.target, f"must be one of {', '.join(TARGETS)}")
        make_target(self.target, self.dim)  # checks dim ("dim: ...")
        need(bool(self.methods) and all(m in METHODS for m in self.methods), "methods", list(self.methods),
             f"choose from {', '.join(METHODS)}")
        need(self.seed >= 0, "seed", self.seed, "must be >= 0")
        need(self.budget in BUDGETS, "budget", self.budget, f"must be one of {', '.join(BUDGETS)}")
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
            evals = self.sampler_config("em2c").target_evals("em2c")
            n = -(-evals // self.iterations)
        return SamplerConfig(n_samples=n, iterations=self.iterations, eps=self.eps,
                             n_components=self.components, defensive_weight=self.defensive_weight,
                             mcmc_steps=self.mcmc_steps)


def run(config: AisConfig) -> dict:
    """Run every sampler on the target and write the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``.
    """
    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import write_dict_csv, write_metrics
    from .samplers import run_sampler
    from .targets import make_target

    c = config
    check_output_dir(c.out)
    target = make_target(c.target, c.dim)
    samplers = {m: c.sampler_config(m) for m in c.methods}
    results = {m: run_sampler(target, m, samplers[m], seed=c.seed, progress=c.progress) for m in c.methods}
    result = {
        "target": c.target, "dim": c.dim, "log_z": target.log_z, "seed": c.seed, "budget": c.budget,
        "config": c.sampler_config("em2c").as_dict(),
        "samples_per_iteration": {m: s.n_samples for m, s in samplers.items()},
        "target_evals": {m: s.target_evals(m) for m, s in samplers.items()},
        "final": {m: hist[-1].as_dict() for m, (hist, _) in results.items()},
        "history": {m: [r.as_dict() for r in hist] for m, (hist, _) in results.items()},
    }
    result = {"headline": headline_of(result), **result}
    with atomic_output_dir(c.out) as out:
        write_dict_csv(out / "history.csv", [dict(method=m, **r.as_dict()) for m, (hist, _) in results.items()
                                              for r in hist])
        write_metrics(out, result, c.command)
        _plots(out, c, target, results)
    for m, (hist, _) in results.items():
        r = hist[-1]
        print(f"{m:12s} KL={r.kl:.3f} logZerr={r.log_z_error:+.3f} ESS/N={r.ess_fraction:.3f} "
              f"coverage={r.mode_coverage:.2f} target evals={r.n_target_evals:,}")
    return result


def headline_of(result: dict) -> dict:
    """The headline of a run's ``metrics.json`` content (without its headline): the final proposal's
    KL(target || proposal) of EM2C (or the first sampler run) next to every other sampler's, at the
    run's target-evaluation budget; one seed, so the standard deviations are 0."""
    from .._report import headline

    final = result["final"]
    main = "em2c" if "em2c" in final else next(iter(final))
    others = [m for m in final if m != main]
    return headline(
        f"KL(target || final proposal) in nats, {result['target']} d={result['dim']}", main, final[main]["kl"],
        {m: final[m]["kl"] for m in others},
        budget={"rule": result["budget"], "iterations": result["config"]["iterations"],
                "target_evaluations": dict(result["target_evals"])},
        seeds=[result["seed"]], direction="lower", std=0.0, baseline_std={m: 0.0 for m in others})


def _plots(out, c: AisConfig, target, results: dict) -> None:
    """metrics.png (diagnostics per iteration) and samples.png (target vs final proposal)."""
    import numpy as np

    from onchip.plotting import pyplot

    from .._report import save

    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    panels = [("kl", "KL(target || proposal) [nats]", True), ("log_z_error", "|log Z error|", True),
              ("ess_fraction", "ESS / N", False), ("mode_coverage", "mode coverage", False)]
    for ax, (key, label, log) in zip(axes, panels):
        for m, (hist, _) in results.items():
            vals = [abs(getattr(r, key)) if key == "log_z_error" else getattr(r, key) for r in hist]
            ax.plot([r.iteration for r in hist], vals, marker=".", label=m)
        ax.set(xlabel="iteration", title=label, yscale="log" if log else "linear")
    axes[0].legend()
    fig.suptitle(f"{c.target}, d={c.dim}, seed {c.seed}")
    save(fig, out / "metrics.png", dpi=80)
    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 4), squeeze=False)
    # seeds kept as they were (the committed plots depend on them)
    truth = target.sample(2000, np.random.default_rng(c.seed))
    for ax, (m, (_, final)) in zip(axes[0], results.items()):
        draws = final["mixture"].sample(1000, np.random.default_rng(c.seed))
        ax.scatter(truth[:, 0], truth[:, 1], s=2, c="0.7", label="target")
        ax.scatter(draws[:, 0], draws[:, 1], s=2, c="C3", label="final proposal")
        ax.set(title=m, xlabel="x1" if c.target != "funnel" else "v", ylabel="x2")
    axes[0][0].legend(markerscale=4)
    save(fig, out / "samples.png", dpi=80)
