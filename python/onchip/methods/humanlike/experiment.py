"""The human-likeness experiment: every generator answers held-out human scenarios; each metric's
distribution is compared with the reference humans' and normalised by the split-half human distance
(0 = the humans' histogram, ~1 = as far as another sample of humans, larger = less human-like).

Per seed the people of each domain are split at random into reference humans (half) and held-out
scenarios (the other half: all 105 travellers and all 472 respondents by default, so all 944 ANES
respondents are used). Statistical models and the utility maximiser's median are fitted to the
reference half; every generator (and the held-out humans themselves) answers the same held-out
scenarios once. A calibrated near-human generator (held-out humans with a share x of answers replaced
by uniform noise) is the positive control: the score must rise monotonically with x. Writes
``metrics.json``, ``results.md`` and ``scores.png`` / ``metrics.png`` / ``noise.png``.
Method: ICML 2026 poster 65092 (see seeds/humanlike.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, markdown_table, mean_std_dict, need, paired_difference, paired_line, positive_control,
    recorded_config, rng, save, write_metrics, write_results,
)
from . import AGENTS, DOMAINS, PRINCIPLES

AGENT_LABELS = {"lm": "lm-persona (Gemma 3 270M)", "statistical": "statistical (logit)", "utility": "utility maximiser",
                "random": "random", "humans": "held-out humans"}
#: noise level of the near-human generator used as the positive control (against x = 0)
CONTROL_NOISE = 0.25


@dataclass(frozen=True)
class HumanlikeConfig:
    """One run; validated on construction.

    Attributes:
        domains: subset of :data:`~onchip.methods.humanlike.DOMAINS`.
        agents: subset of :data:`~onchip.methods.humanlike.AGENTS` (``lm`` loads Gemma 3 270M).
        seeds: two or more seeds (>= 0); each draws a new reference / held-out split.
        n_opinion: held-out opinion respondents answered per seed by every agent (2-472; 472 = the whole
            held-out half).
        n_mobility: held-out travellers per seed (2-105; the reference half has 105).
        split_half_draws: random splits of all humans averaged into the split-half distance (>= 1).
        noise_levels: shares x of the near-human generator (each in [0, 1], increasing, starting at 0 and
            containing :data:`CONTROL_NOISE`).
        noise_draws: noise draws per seed and level, averaged (>= 1).
        lm_batch: prompts per language-model forward (>= 1).
        out: output folder; progress: progress bars and the table on stdout; command: recorded command line.

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    domains: tuple[str, ...] = DOMAINS
    agents: tuple[str, ...] = AGENTS
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_opinion: int = 472
    n_mobility: int = 105
    split_half_draws: int = 200
    noise_levels: tuple[float, ...] = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0)
    noise_draws: int = 20
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
        need(len(self.seeds) >= 2 and min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
             list(self.seeds), "two or more distinct integers >= 0 (paired intervals need two)")
        need(2 <= self.n_opinion <= 472, "n_opinion", self.n_opinion, "must be in [2, 472] (the held-out half)")
        need(2 <= self.n_mobility <= 105, "n_mobility", self.n_mobility, "must be in [2, 105] (the held-out half)")
        need(self.split_half_draws >= 1, "split_half_draws", self.split_half_draws, "must be >= 1")
        levels = tuple(float(x) for x in self.noise_levels)
        object.__setattr__(self, "noise_levels", levels)
        need(len(levels) >= 2 and levels[0] == 0.0 and all(0 <= x <= 1 for x in levels)
             and all(b > a for a, b in zip(levels, levels[1:])) and CONTROL_NOISE in levels, "noise_levels",
             list(levels), f"increasing shares in [0, 1] starting at 0 and containing {CONTROL_NOISE}")
        need(self.noise_draws >= 1, "noise_draws", self.noise_draws, "must be >= 1")
        need(self.lm_batch >= 1, "lm_batch", self.lm_batch, "must be >= 1")


def split(n: int, n_eval: int, seed: int, domain: str) -> tuple[np.ndarray, np.ndarray]:
    """Reference indices (the first half of a random permutation) and ``n_eval`` held-out indices
    (from the second half), for ``n`` people."""
    perm = rng(seed, "split", domain).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n - n // 2:][:n_eval])


def score_population(domain: str, behaviour: np.ndarray, scenarios, reference: dict, d_split: dict) -> dict:
    """Per-metric distance to the reference humans and its normalised score.

    Args:
        behaviour: the agent's answers on ``scenarios``.
        reference: metric name -> human histogram; d_split: metric name -> split-half human distance
            (:func:`.metrics.split_half_distance`).

    Returns:
        ``{metric: {"distance", "split_half_distance", "score"}}`` (score = distance / split-half distance).
    """
    from .metrics import distance, histogram, metrics_of, normalised_distance

    out = {}
    for m in metrics_of(domain):
        d = distance(m, histogram(m.values(scenarios, behaviour), m.support), reference[m.name])
        out[m.name] = {"distance": d, "split_half_distance": d_split[m.name],
                       "score": normalised_distance(d, d_split[m.name])}
    return out


def aggregate(domains, rows_by_domain: dict) -> dict:
    """Principle scores (mean of their metrics), domain scores (mean of the principles) and the overall
    score (mean of the domains) of one agent on one seed, from ``{domain: score_population(...)}``."""
    from .metrics import metrics_of

    principle = {d: {p: float(np.mean([rows_by_domain[d][m.name]["score"] for m in metrics_of(d)
                                        if m.principle == p])) for p in PRINCIPLES} for d in domains}
    domain = {d: float(np.mean(list(principle[d].values()))) for d in domains}
    return {"principle": principle, "domain": domain, "overall": float(np.mean(list(domain.values())))}


def _lm_tables(c: HumanlikeConfig, data: dict) -> tuple[dict, dict]:
    """Option probabilities of the language model for *every* person of each domain (all 210 travellers,
    all 944 respondents), cached on disk per domain and question, so any seed's split reads them; and the
    prompt tokens of each person.

    Returns:
        ``(tables, tokens)``: ``tables[domain][i]`` is a list of option-probability vectors (one per
        question) for person ``i``; ``tokens[domain][i]`` the prompt tokens spent on that person.
    """
    from onchip.cache import cached_build, digest
    from .._lm import _gemma_key, causal_lm
    from .agents import MOBILITY_OPTIONS, OPINION_QUESTIONS, lm_option_probs, mobility_prompt, opinion_prompts

    lm = causal_lm()
    tables, tokens = {}, {}
    for domain in c.domains:
        s = data[domain]
        ids = list(range(s.n))
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
    """Score every agent and the near-human ladder on every domain and seed and write the output folder.

    Returns:
        The content of ``metrics.json``.
    """
    from onchip.io import atomic_output_dir, check_output_dir
    from onchip.progress import progress_bar

    from threadpoolctl import threadpool_limits

    from .data import load_mobility, load_opinion

    c = config
    check_output_dir(c.out)
    t0 = time.perf_counter()
    data = {"mobility": load_mobility(), "opinion": load_opinion()}
    n_eval = {"mobility": c.n_mobility, "opinion": c.n_opinion}
    splits = {seed: {d: split(data[d].n, n_eval[d], seed, d) for d in c.domains} for seed in c.seeds}
    if "lm" in c.agents:
        import torch

        torch.set_num_threads(1)
        lm_tables, lm_tokens = _lm_tables(c, data)
    else:
        lm_tables, lm_tokens = {}, {}
    lm_seconds = time.perf_counter() - t0

    per_seed, ladder = {}, {}  # seed -> domain -> agent -> metric -> row; seed -> x -> aggregate
    # small fits: BLAS threads only add hand-off stalls on a busy machine
    with threadpool_limits(1):
        for seed in progress_bar(c.seeds, desc="seeds", disable=not c.progress, leave=False):
            per_seed[seed], ladder[seed] = _run_seed(c, seed, data, splits, lm_tables)

    summary = _summarise(c, per_seed)
    noise = _noise_summary(c, ladder)
    budget = {"unit": "one answer per held-out scenario per agent",
              "scenarios_per_seed": {d: n_eval[d] for d in c.domains}}
    if lm_tokens:
        budget["lm_prompt_tokens_per_seed_mean"] = float(np.mean(
            [sum(lm_tokens[d][int(i)] for d in c.domains for i in splits[s][d][1]) for s in c.seeds]))
    method = "lm" if "lm" in c.agents else c.agents[0]
    others = [a for a in c.agents if a != method]
    overall = {a: summary["overall"][a] for a in c.agents}
    values = {a: [per_seed_overall(per_seed, s, a, c.domains) for s in c.seeds] for a in c.agents}
    paired = {AGENT_LABELS[a]: paired_difference(values[method], values[a]) for a in others}
    head = headline("human-likeness distance: mean over domains of the mean over rationality, consistency and "
                    "diversity of each metric's distance to the reference humans divided by the bootstrap "
                    "split-half human distance (0 = identical, ~1 = as far as other humans; lower is more "
                    "human-like)", AGENT_LABELS[method], overall[method]["mean"],
                    {AGENT_LABELS[a]: overall[a]["mean"] for a in others}, budget=budget, seeds=c.seeds,
                    direction="lower", std=overall[method]["std"],
                    baseline_std={AGENT_LABELS[a]: overall[a]["std"] for a in others}, paired=paired)
    x0, xc = c.noise_levels[0], CONTROL_NOISE
    control = positive_control(
        f"near-human generator: the held-out humans' answers with a share x of them replaced by uniform random "
        f"answers (nested draws, mean of {c.noise_draws} noise draws per seed); the metric must score "
        f"x = {xc:g} farther from the humans than x = 0", f"humans + {xc:.0%} noise", "held-out humans (0% noise)",
        [noise["per_seed"][str(xc)][i] for i in range(len(c.seeds))],
        [noise["per_seed"][str(x0)][i] for i in range(len(c.seeds))], seeds=c.seeds,
        metric="overall human-likeness distance (lower is more human-like)")
    settings = recorded_config(c)
    settings.update(domains=list(c.domains), agents=list(c.agents), seeds=list(c.seeds),
                    noise_levels=list(c.noise_levels))
    result = {"headline": head, "positive_control": control, "noise_ladder": noise, "config": settings,
              "summary": summary, "per_seed_overall": {AGENT_LABELS[a]: values[a] for a in c.agents},
              "per_seed": {str(s): v for s, v in per_seed.items()},
              "seconds": {"lm_scoring": lm_seconds, "total": time.perf_counter() - t0}}
    if lm_tables:
        result["lm_option_probs"] = _lm_persona_spread(c, lm_tables)
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def per_seed_overall(per_seed: dict, seed: int, agent: str, domains) -> float:
    """The overall score of ``agent`` on ``seed`` (:func:`aggregate` of its metric rows)."""
    return aggregate(domains, {d: per_seed[seed][d][agent] for d in domains})["overall"]


def _lm_persona_spread(c: HumanlikeConfig, tables: dict) -> dict:
    """How much the LM's option probabilities move with the persona: per domain and question the mean
    probability of each option over all people and its standard deviation across people."""
    from .agents import MOBILITY_OPTIONS, OPINION_QUESTIONS

    out = {}
    for d in c.domains:
        ids = sorted(tables[d])
        opts = [MOBILITY_OPTIONS] if d == "mobility" else [o for _, o in OPINION_QUESTIONS]
        for q, options in enumerate(opts):
            p = np.array([tables[d][i][q] for i in ids])
            out[f"{d} q{q}"] = {o.strip(): {"mean": float(p[:, k].mean()), "std_across_people": float(p[:, k].std())}
                                for k, o in enumerate(options)}
    return out


def _run_seed(c: HumanlikeConfig, seed: int, data: dict, splits: dict, lm_tables: dict) -> tuple[dict, dict]:
    """Every agent and every near-human noise level on every domain for one seed's split.

    Returns:
        ``(rows, ladder)``: ``rows[domain][agent]`` = :func:`score_population`; ``ladder[x]`` = the
        overall score of the near-human generator at share ``x``, averaged over ``noise_draws``.
    """
    from .agents import (ConditionalLogit, OpinionChain, near_human_behaviour, random_behaviour, sample_rows,
                         utility_behaviour)
    from .data import behaviour_of
    from .metrics import histogram, metrics_of, split_half_distance

    rows, noisy = {}, {x: [] for x in c.noise_levels}
    noisy_rows = {x: [{} for _ in range(c.noise_draws)] for x in c.noise_levels}
    for domain in c.domains:
        ref_idx, ev_idx = splits[seed][domain]
        everyone = data[domain]
        ref, ev = everyone.subset(ref_idx), everyone.subset(ev_idx)
        humans, ref_b = behaviour_of(domain, ev), behaviour_of(domain, ref)
        reference = {m.name: histogram(m.values(ref, ref_b), m.support) for m in metrics_of(domain)}
        d_split = split_half_distance(domain, everyone, behaviour_of(domain, everyone), len(ref_idx), len(ev_idx),
                                      c.split_half_draws, rng(seed, "split-half", domain))
        rows[domain] = {}
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
            rows[domain][agent] = score_population(domain, b, ev, reference, d_split)
        for r in range(c.noise_draws):
            g = rng(seed, "near-human", domain, r)
            u, repl = g.random(humans.shape), random_behaviour(domain, ev, g).reshape(humans.shape)
            for x in c.noise_levels:
                noisy_rows[x][r][domain] = score_population(domain, near_human_behaviour(humans, x, u, repl), ev,
                                                            reference, d_split)
    ladder = {x: float(np.mean([aggregate(c.domains, noisy_rows[x][r])["overall"] for r in range(c.noise_draws)]))
              for x in c.noise_levels}
    return rows, ladder


def _noise_summary(c: HumanlikeConfig, ladder: dict) -> dict:
    """The near-human ladder: per level the per-seed overall score, mean ± std, and the paired difference
    with the previous level (monotone sensitivity needs every step's ci95 above zero)."""
    per = {str(x): [ladder[s][x] for s in c.seeds] for x in c.noise_levels}
    steps = {f"{b:g} - {a:g}": paired_difference(per[str(b)], per[str(a)])
             for a, b in zip(c.noise_levels, c.noise_levels[1:])}
    monotone = all(p["ci95"][0] > 0 for p in steps.values())
    return {"levels": list(c.noise_levels), "per_seed": per,
            "summary": {k: mean_std_dict(v) for k, v in per.items()}, "steps": steps, "monotone": monotone}


def _summarise(c: HumanlikeConfig, per_seed: dict) -> dict:
    """Mean and std over seeds of every metric score, principle score (mean of its metrics), domain
    score (mean of its principles) and the overall score (mean of the domains)."""
    from .metrics import metrics_of

    metric, principle, domain_s, overall = {}, {}, {}, {}
    for agent in c.agents:
        agg = [aggregate(c.domains, {d: per_seed[s][d][agent] for d in c.domains}) for s in c.seeds]
        for d in c.domains:
            for m in metrics_of(d):
                metric.setdefault(d, {}).setdefault(m.name, {})[agent] = mean_std_dict(
                    [per_seed[s][d][agent][m.name]["score"] for s in c.seeds])
            for p in PRINCIPLES:
                principle.setdefault(d, {}).setdefault(p, {})[agent] = mean_std_dict([a["principle"][d][p] for a in agg])
            domain_s.setdefault(d, {})[agent] = mean_std_dict([a["domain"][d] for a in agg])
        overall[agent] = mean_std_dict([a["overall"] for a in agg])
    return {"overall": overall, "domain": domain_s, "principle": principle, "metric": metric}


def results_table(result: dict) -> str:
    """Markdown: the headline with paired differences, per-seed values, the near-human ladder, principle
    scores per domain and agent, then every metric."""

    c, s, h = result["config"], result["summary"], result["headline"]

    def f(x):
        return f"{x['mean']:.2f} ± {x['std']:.2f}"

    labels = [AGENT_LABELS[a] for a in c["agents"]]
    text = markdown_table(
        ["agent", "overall distance (mean ± std)", *[f"seed {x}" for x in c["seeds"]],
         f"paired {h['method']} - agent [ci95]"],
        [[lab, f(s["overall"][a]), *[f"{v:.2f}" for v in result["per_seed_overall"][lab]],
          "-" if lab == h["method"] else paired_line(lab, h["paired"][lab], 2).split(": ", 1)[1]]
         for a, lab in zip(c["agents"], labels)],
        caption=f"Human-likeness distance (each metric's distance to the reference humans / the bootstrap "
                f"split-half human distance; 0 = identical, ~1 = as far as other humans; lower is more human-like), "
                f"seeds {c['seeds']}; held-out scenarios per seed: {h['budget']['scenarios_per_seed']}")
    nl, pc = result["noise_ladder"], result["positive_control"]
    text += "\n" + markdown_table(
        ["noise share x", "overall distance", *[f"seed {x}" for x in c["seeds"]], "paired vs previous level [ci95]"],
        [[f"{x:g}", f(nl["summary"][str(x)]), *[f"{v:.2f}" for v in nl["per_seed"][str(x)]],
          "-" if i == 0 else paired_line("", nl["steps"][f"{x:g} - {nl['levels'][i - 1]:g}"], 2).split(": ", 1)[1]]
         for i, x in enumerate(nl["levels"])],
        caption=f"Positive control: near-human generator (held-out humans, a share x of answers replaced by uniform "
                f"noise, mean of {c['noise_draws']} draws per seed). Every step monotone (ci95 above 0): "
                f"{nl['monotone']}. Control {paired_line(pc['method'] + ' - ' + pc['ablation'], pc['paired'], 3)}; "
                f"sensitive: {pc['sensitive']}")
    cols = [(d, p) for d in c["domains"] for p in PRINCIPLES]
    head = ["agent", *[f"{d} {p}" for d, p in cols], *[f"{d} (mean)" for d in c["domains"]], "overall"]
    rows = [[AGENT_LABELS[a], *[f(s["principle"][d][p][a]) for d, p in cols], *[f(s["domain"][d][a]) for d in c["domains"]],
             f(s["overall"][a])] for a in c["agents"]]
    text += "\n" + markdown_table(head, rows, caption="By principle (mean ± std over seeds; lower is more human-like)")
    mrows = [[d, name, *[f(by_agent[a]) for a in c["agents"]]] for d in c["domains"]
             for name, by_agent in s["metric"][d].items()]
    text += "\n" + markdown_table(["domain", "metric", *labels], mrows, caption="Per metric")
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
        ax.axhline(1, color="k", lw=0.6, ls=":")
        ax.set_title(d)
        ax.set_ylabel("distance / split-half human distance")
    axes[0][-1].legend(fontsize=7)
    save(fig, stage / "scores.png")
    metrics = [(d, m) for d in c.domains for m in s["metric"][d]]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(metrics)), 3.8))
    grouped_bars(ax, [m for _, m in metrics], {AGENT_LABELS[a]: [s["metric"][d][m][a]["mean"] for d, m in metrics]
                                               for a in c.agents}, rotation=30, fontsize=7)
    ax.axhline(1, color="k", lw=0.6, ls=":")
    ax.set_ylabel("distance / split-half distance, per metric")
    ax.legend(fontsize=7)
    save(fig, stage / "metrics.png")
    nl = result["noise_ladder"]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    xs = nl["levels"]
    for i, seed in enumerate(c.seeds):
        ax.plot(xs, [nl["per_seed"][str(x)][i] for x in xs], color="0.7", lw=0.8, marker=".")
    ax.plot(xs, [nl["summary"][str(x)]["mean"] for x in xs], color="C0", lw=2, marker="o", label="near-human (mean)")
    for k, a in enumerate(c.agents):
        if a != "humans":
            ax.axhline(s["overall"][a]["mean"], color=f"C{k + 1}", ls="--", lw=1, label=AGENT_LABELS[a])
    ax.set_xlabel("noise share x (answers replaced by uniform noise)")
    ax.set_ylabel("overall distance / split-half")
    ax.legend(fontsize=7)
    save(fig, stage / "noise.png")
