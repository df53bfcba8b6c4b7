"""The human-likeness experiment: every generator answers held-out human scenarios; each metric's
distribution is compared with the reference humans' and normalised (random agent = 0, identical = 1).

Per seed the people of each domain are split at random into reference humans and held-out
scenarios. Statistical models and the utility maximiser's median are fitted to the reference half;
every generator (and the held-out humans themselves, the ceiling) answers the same held-out
scenarios once. Writes ``metrics.json``, ``results.md`` and ``scores.png`` / ``metrics.png``.
Method: ICML 2026 poster 65092 (see seeds/humanlike.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, markdown_table, mean_std_dict, need, recorded_config, rng, save, write_metrics,
    write_results,
)
from . import AGENTS, DOMAINS, PRINCIPLES

AGENT_LABELS = {"lm": "lm-persona (Gemma 3 270M)", "statistical": "statistical (logit)", "utility": "utility maximiser",
                "random": "random", "humans": "held-out humans"}


@dataclass(frozen=True)
class HumanlikeConfig:
    """One run; validated on construction.

    Attributes:
        domains: subset of :data:`~onchip.methods.humanlike.DOMAINS`.
        agents: subset of :data:`~onchip.methods.humanlike.AGENTS` (``lm`` loads Gemma 3 270M).
        seeds: one or more seeds (>= 0); each draws a new reference / held-out split.
        n_opinion: held-out opinion respondents answered per seed by every agent (1-472).
        n_mobility: held-out travellers per seed (1-105; the reference half has 105).
        random_draws: Monte Carlo draws of the random agent for its expected distribution (>= 1).
        lm_batch: prompts per language-model forward (>= 1).
        out: output folder; progress: progress bars and the table on stdout; command: recorded command line.

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    domains: tuple[str, ...] = DOMAINS
    agents: tuple[str, ...] = AGENTS
    seeds: tuple[int, ...] = (0, 1, 2)
    n_opinion: int = 40
    n_mobility: int = 105
    random_draws: int = 50
    lm_batch: int = 16
    out: str = "out/humanlike"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name, known in (("domains", DOMAINS), ("agents", AGENTS)):
            values = tuple(getattr(self, name))
            object.__setattr__(self, name, values)
            need(bool(values) and all(v in known for v in values) and len(set(values)) == len(values), name,
                 list(values), f"distinct names from {', '.join(known)}")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        need(len(self.seeds) >= 1 and min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
             list(self.seeds), "one or more distinct integers >= 0")
        need(1 <= self.n_opinion <= 472, "n_opinion", self.n_opinion, "must be in [1, 472] (the held-out half)")
        need(2 <= self.n_mobility <= 105, "n_mobility", self.n_mobility, "must be in [2, 105] (the held-out half)")
        need(self.random_draws >= 1, "random_draws", self.random_draws, "must be >= 1")
        need(self.lm_batch >= 1, "lm_batch", self.lm_batch, "must be >= 1")


def split(n: int, n_eval: int, seed: int, domain: str) -> tuple[np.ndarray, np.ndarray]:
    """Reference indices (the first half of a random permutation) and ``n_eval`` held-out indices
    (from the second half), for ``n`` people."""
    perm = rng(seed, "split", domain).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n - n // 2:][:n_eval])


def score_population(domain: str, behaviour: np.ndarray, scenarios, reference: dict, random_ref: dict) -> dict:
    """Per-metric distance to the reference humans and normalised score.

    Args:
        behaviour: the agent's answers on ``scenarios``.
        reference: metric name -> human histogram; random_ref: metric name -> random agent's expected histogram.

    Returns:
        ``{metric: {"distance", "random_distance", "score"}}``.
    """
    from .metrics import distance, histogram, humanlikeness, metrics_of

    out = {}
    for m in metrics_of(domain):
        d = distance(m, histogram(m.values(scenarios, behaviour), m.support), reference[m.name])
        d_rand = distance(m, random_ref[m.name], reference[m.name])
        out[m.name] = {"distance": d, "random_distance": d_rand, "score": humanlikeness(d, d_rand)}
    return out


def random_reference(domain: str, scenarios, draws: int, generator: np.random.Generator) -> dict:
    """Expected histogram of every metric under the uniform random agent on ``scenarios``: the mean of
    ``draws`` Monte Carlo histograms."""
    from .agents import random_behaviour
    from .metrics import histogram, metrics_of

    acc = {m.name: np.zeros(m.support) for m in metrics_of(domain)}
    for _ in range(draws):
        b = random_behaviour(domain, scenarios, generator)
        for m in metrics_of(domain):
            acc[m.name] += histogram(m.values(scenarios, b), m.support) / draws
    return acc


def _lm_tables(c: HumanlikeConfig, data: dict, evals: dict) -> tuple[dict, dict]:
    """Option probabilities of the language model for every held-out person of every seed (cached on disk
    per domain and prompt set), and the prompt tokens spent per domain."""
    from onchip.cache import cached_build, digest
    from .._lm import _gemma_key, causal_lm
    from .agents import MOBILITY_OPTIONS, OPINION_QUESTIONS, lm_option_probs, mobility_prompt, opinion_prompts

    lm = causal_lm()
    tables, tokens = {}, {}
    for domain in c.domains:
        ids = sorted({int(i) for seed in c.seeds for i in evals[seed][domain]})
        s = data[domain]
        if domain == "mobility":
            groups = [([mobility_prompt(s, i) for i in ids], MOBILITY_OPTIONS)]
        else:
            per = [opinion_prompts(s, i) for i in ids]
            groups = [([p[q] for p in per], opts) for q, (_, opts) in enumerate(OPINION_QUESTIONS)]
        probs = []
        for q, (prompts, options) in enumerate(groups):
            key = digest("humanlike-lm", _gemma_key(), repr(options), *prompts)[:32]

            def build(folder, prompts=prompts, options=options, q=q):
                np.save(folder / "probs.npy", lm_option_probs(lm, prompts, options, batch_size=c.lm_batch,
                                                              progress=c.progress, desc=f"gemma {domain} q{q}"))

            entry, _ = cached_build("humanlike_lm", key, build)
            probs.append(np.load(entry / "probs.npy"))
        tables[domain] = {i: [p[k] for p in probs] for k, i in enumerate(ids)}
        tokens[domain] = {i: sum(lm.count_tokens(g[0][k]) for g in groups) for k, i in enumerate(ids)}
    return tables, tokens


def run(config: HumanlikeConfig) -> dict:
    """Score every agent on every domain and seed and write the output folder.

    Returns:
        The content of ``metrics.json``.
    """
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, check_output_dir

    from threadpoolctl import threadpool_limits

    from .data import load_mobility, load_opinion

    c = config
    check_output_dir(c.out)
    t0 = time.perf_counter()
    data = {"mobility": load_mobility(), "opinion": load_opinion()}
    n_eval = {"mobility": c.n_mobility, "opinion": c.n_opinion}
    splits = {seed: {d: split(data[d].n, n_eval[d], seed, d) for d in c.domains} for seed in c.seeds}
    evals = {seed: {d: splits[seed][d][1] for d in c.domains} for seed in c.seeds}
    lm_tables, lm_tokens = _lm_tables(c, data, evals) if "lm" in c.agents else ({}, {})
    lm_seconds = time.perf_counter() - t0

    per_seed = {}  # seed -> domain -> agent -> metric -> row
    # small fits: BLAS threads only add hand-off stalls on a busy machine
    with threadpool_limits(1):
        for seed in tqdm(c.seeds, desc="seeds", disable=not c.progress, leave=False):
            _run_seed(c, seed, data, splits, lm_tables, per_seed)

    summary = _summarise(c, per_seed)
    budget = {"unit": "one answer per held-out scenario per agent",
              "scenarios_per_seed": {d: n_eval[d] for d in c.domains}}
    if lm_tokens:
        budget["lm_prompt_tokens_per_seed_mean"] = float(np.mean(
            [sum(lm_tokens[d][int(i)] for d in c.domains for i in evals[s][d]) for s in c.seeds]))
    method = "lm" if "lm" in c.agents else c.agents[0]
    others = [a for a in c.agents if a != method]
    overall = {a: summary["overall"][a] for a in c.agents}
    head = headline("human-likeness: mean over domains of the mean over rationality, consistency and diversity "
                    "(random agent = 0, identical to the reference humans = 1)", AGENT_LABELS[method],
                    overall[method]["mean"], {AGENT_LABELS[a]: overall[a]["mean"] for a in others}, budget=budget,
                    seeds=c.seeds, direction="higher", std=overall[method]["std"],
                    baseline_std={AGENT_LABELS[a]: overall[a]["std"] for a in others})
    settings = recorded_config(c)
    settings.update(domains=list(c.domains), agents=list(c.agents), seeds=list(c.seeds))
    result = {"headline": head, "config": settings, "summary": summary,
              "per_seed": {str(s): v for s, v in per_seed.items()},
              "seconds": {"lm_scoring": lm_seconds, "total": time.perf_counter() - t0}}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def _run_seed(c: HumanlikeConfig, seed: int, data: dict, splits: dict, lm_tables: dict, per_seed: dict) -> None:
    """Every agent on every domain for one seed's split; fills ``per_seed[seed]``."""
    from .agents import ConditionalLogit, OpinionChain, random_behaviour, sample_rows, utility_behaviour
    from .metrics import histogram, metrics_of

    per_seed[seed] = {}
    for domain in c.domains:
        ref_idx, ev_idx = splits[seed][domain]
        ref, ev = data[domain].subset(ref_idx), data[domain].subset(ev_idx)
        humans = ev.choice if domain == "mobility" else np.column_stack([ev.party, ev.ideology, ev.vote])
        ref_b = ref.choice if domain == "mobility" else np.column_stack([ref.party, ref.ideology, ref.vote])
        reference = {m.name: histogram(m.values(ref, ref_b), m.support) for m in metrics_of(domain)}
        rand_ref = random_reference(domain, ev, c.random_draws, rng(seed, "random-reference", domain))
        rows = {}
        for agent in c.agents:
            g = rng(seed, "agent", agent, domain)
            if agent == "random":
                b = random_behaviour(domain, ev, g)
            elif agent == "utility":
                b = utility_behaviour(domain, ev, ref)
            elif agent == "statistical":
                b = (ConditionalLogit().fit(ref) if domain == "mobility" else OpinionChain().fit(ref)).sample(ev, g)
            elif agent == "humans":
                b = humans
            else:
                cols = [sample_rows(np.array([lm_tables[domain][int(i)][q] for i in ev_idx]), g)
                        for q in range(len(lm_tables[domain][int(ev_idx[0])]))]
                b = cols[0] if domain == "mobility" else np.column_stack(cols)
            rows[agent] = score_population(domain, b, ev, reference, rand_ref)
        per_seed[seed][domain] = rows


def _summarise(c: HumanlikeConfig, per_seed: dict) -> dict:
    """Mean and std over seeds of every metric score, principle score (mean of its metrics), domain
    score (mean of its principles) and the overall score (mean of the domains)."""
    from .metrics import metrics_of

    metric, principle, domain_s, overall = {}, {}, {}, {}
    for agent in c.agents:
        seed_overall = []
        for d in c.domains:
            seed_domain = []
            for seed in c.seeds:
                rows = per_seed[seed][d][agent]
                by_p = {p: np.mean([rows[m.name]["score"] for m in metrics_of(d) if m.principle == p]) for p in PRINCIPLES}
                seed_domain.append(by_p)
            for m in metrics_of(d):
                metric.setdefault(d, {}).setdefault(m.name, {})[agent] = mean_std_dict(
                    [per_seed[s][d][agent][m.name]["score"] for s in c.seeds])
            for p in PRINCIPLES:
                principle.setdefault(d, {}).setdefault(p, {})[agent] = mean_std_dict([x[p] for x in seed_domain])
            domain_s.setdefault(d, {})[agent] = mean_std_dict([np.mean(list(x.values())) for x in seed_domain])
            seed_overall.append([np.mean(list(x.values())) for x in seed_domain])
        overall[agent] = mean_std_dict(np.mean(seed_overall, 0))
    return {"overall": overall, "domain": domain_s, "principle": principle, "metric": metric}


def results_table(result: dict) -> str:
    """Markdown: principle scores per domain and agent, then every metric."""

    c, s = result["config"], result["summary"]

    def f(x):
        return f"{x['mean']:.2f} ± {x['std']:.2f}"

    cols = [(d, p) for d in c["domains"] for p in PRINCIPLES]
    head = ["agent", *[f"{d} {p}" for d, p in cols], *[f"{d} (mean)" for d in c["domains"]], "overall"]
    rows = [[AGENT_LABELS[a], *[f(s["principle"][d][p][a]) for d, p in cols], *[f(s["domain"][d][a]) for d in c["domains"]],
             f(s["overall"][a])] for a in c["agents"]]
    text = markdown_table(head, rows, caption=f"Human-likeness (random = 0, identical distribution = 1), mean ± std "
                          f"over seeds {c['seeds']}; held-out scenarios per seed: "
                          f"{result['headline']['budget']['scenarios_per_seed']}")
    mrows = [[d, name, *[f(by_agent[a]) for a in c["agents"]]] for d in c["domains"]
             for name, by_agent in s["metric"][d].items()]
    text += "\n" + markdown_table(["domain", "metric", *[AGENT_LABELS[a] for a in c["agents"]]], mrows,
                                  caption="Per metric")
    return text


def _write(stage, c: HumanlikeConfig, result: dict) -> None:
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    write_results(stage, "Human-like agent evaluation", c.command or "onchip humanlike", results_table(result))
    s = result["summary"]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(c.domains), figsize=(5.5 * len(c.domains), 3.8), squeeze=False)
    for ax, d in zip(axes[0], c.domains):
        grouped_bars(ax, list(PRINCIPLES), {AGENT_LABELS[a]: [s["principle"][d][p][a]["mean"] for p in PRINCIPLES]
                                            for a in c.agents},
                     errors={AGENT_LABELS[a]: [s["principle"][d][p][a]["std"] for p in PRINCIPLES] for a in c.agents},
                     rotation=0)
        ax.axhline(0, color="k", lw=0.6)
        ax.axhline(1, color="k", lw=0.6, ls=":")
        ax.set_title(d)
        ax.set_ylabel("human-likeness (random 0, humans 1)")
    axes[0][-1].legend(fontsize=7)
    save(fig, stage / "scores.png")
    metrics = [(d, m) for d in c.domains for m in s["metric"][d]]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(metrics)), 3.8))
    grouped_bars(ax, [m for _, m in metrics], {AGENT_LABELS[a]: [s["metric"][d][m][a]["mean"] for d, m in metrics]
                                               for a in c.agents}, rotation=30, fontsize=7)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylabel("score per metric")
    ax.legend(fontsize=7)
    save(fig, stage / "metrics.png")
