"""``onchip radar``: query-adaptive generated topologies vs fixed ones and a one-shot generator.

Per seed: train the agents; run fixed topologies with random roles on training queries and keep the
graphs that answered correctly; fit RADAR's generator (ordering + denoising networks) and the one-shot
baseline on them; fine-tune RADAR with the correctness + sparsity reward; generate one graph per test
query. Also per seed: the voters measurement (a fixed star of 1 / 3 / 5 generalists by difficulty: do more
agents help on hard queries?) and the positive control (the generator fitted on planted size-adaptive
graphs against a query-blind fixed size at equal tokens). See ``seeds/radar.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    headline, markdown_table, mean_std, mean_std_dict, need, paired_difference, paired_line, positive_control, recorded_config,
    rng, save, write_metrics, write_results,
)
from . import ARMS, ROLES

MAX_DIFFICULTY = 6


def fixed_topology(kind: str, rng: np.random.Generator, n: int | None = None, roles=None):
    """A fixed topology: (role ids, adjacency ``adj[u, v] = 1`` for u -> v).

    Default (test) forms: single = one generalist; chain of 3; star = 3 leaves -> a hub; complete DAG of
    4; random = 4 agents, random roles, each forward edge with probability 1/2; layered 2 -> 2 -> 1.
    ``n`` and ``roles`` override the size and roles (the collection of training graphs uses random ones).
    """
    g = ROLES.index("generalist")
    default = {"single": 1, "chain": 3, "star": 4, "complete": 4, "random": 4, "layered": 5}
    n = n or default[kind]
    if roles is None:
        roles = [0, 1, g, g, g][:n] if kind != "random" else list(rng.integers(0, len(ROLES), n))
        if kind == "single":
            roles = [g]
    adj = np.zeros((n, n), np.int64)
    if kind == "chain":
        for i in range(n - 1):
            adj[i, i + 1] = 1
    elif kind == "star":
        adj[:n - 1, n - 1] = 1
    elif kind == "complete":
        adj = np.triu(np.ones((n, n), np.int64), 1)
    elif kind == "random":
        adj = (rng.random((n, n)) < 0.5).astype(np.int64) * np.triu(np.ones((n, n), np.int64), 1)
    elif kind == "layered":
        layers = np.array_split(np.arange(n), 3 if n >= 3 else n)
        for a, b in zip(layers, layers[1:]):
            adj[np.ix_(a, b)] = 1
    return [int(r) for r in roles], adj


def sparsity(adj, max_nodes: int) -> float:
    """RADAR's sparsity reward ``1 - edges / max edges``, with max edges of the largest allowed graph."""
    return 1.0 - float(np.asarray(adj).sum()) / (max_nodes * (max_nodes - 1) / 2)


@dataclass(frozen=True)
class RadarConfig:
    """One run; validated on construction.

    Attributes:
        train_queries, test_queries: queries per seed (>= 1).
        max_nodes: most agents in a graph (2-6); epochs: generator training epochs (>= 1);
        rl_epochs: RL fine-tuning passes over the training queries (>= 0).
        max_graphs: most successful graphs the generators are fitted on (a random subset; >= 1).
        seeds; out; progress; command.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    train_queries: int = 200
    test_queries: int = 200
    max_nodes: int = 5
    epochs: int = 4
    rl_epochs: int = 8
    max_graphs: int = 240
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    out: str = "out/radar"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(self.seeds))
        for name in ("train_queries", "test_queries", "epochs", "max_graphs"):
            need(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        need(self.rl_epochs >= 0, "rl_epochs", self.rl_epochs, "must be >= 0")
        need(2 <= self.max_nodes <= 6, "max_nodes", self.max_nodes, "must be in [2, 6]")
        need(bool(self.seeds) and min(self.seeds) >= 0, "seeds", list(self.seeds), "need one or more seeds >= 0")
        need(len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds), "must be distinct")


def _queries(r, n):
    from .agents import make_query

    return [make_query(r, int(r.integers(1, MAX_DIFFICULTY + 1)), float(r.random())) for _ in range(n)]


#: sizes of the voters measurement (a star of that many generalists on every test query)
VOTER_SIZES = (1, 3, 5)
#: difficulty bands (operations) reported as easy and hard
EASY, HARD = (1, 2), (5, 6)


def generalist_star(n: int):
    """``n`` generalists in a star (leaves -> hub; one agent alone for ``n = 1``): (role ids, adjacency).

    Raises:
        ValueError: ``n`` < 1.
    """
    need(n >= 1, "n", n, "must be >= 1")
    g = ROLES.index("generalist")
    return fixed_topology("star", None, n, [g] * n) if n > 1 else ([g], np.zeros((1, 1), np.int64))


def planted_size(difficulty: int) -> int:
    """Agents of the positive control's planted graph for a query of ``difficulty`` operations: 1 for 1-2,
    3 for 3-4, 5 for 5-6 (a star of generalists; mean 3 agents over uniform difficulties)."""
    return 1 if difficulty <= 2 else 3 if difficulty <= 4 else 5


def planted_graph(difficulty: int):
    """The positive control's target graph: a star of :func:`planted_size` generalists (leaves -> hub)."""
    return generalist_star(planted_size(difficulty))


def token_matched_mix(size_tokens, target: float) -> tuple[int, float]:
    """A query-blind graph size whose expected tokens equal ``target``: ``k`` agents, or ``k + 1`` with
    probability ``w``, interpolating between the two neighbouring sizes.

    Args:
        size_tokens: mean tokens per query of a star of 1, 2, ... generalists (increasing), ``(N,)``.
        target: tokens per query to match; clipped to ``[size_tokens[0], size_tokens[-1]]``.

    Returns:
        ``(k, w)`` with ``(1 - w) * size_tokens[k - 1] + w * size_tokens[k] == target`` (``w = 0`` at the
        ends of the range).

    Raises:
        ValueError: ``size_tokens`` empty or not strictly increasing.
    """
    t = np.asarray(size_tokens, dtype=float)
    need(t.ndim == 1 and t.size >= 1, "size_tokens", t.tolist(), "one mean per size, at least one")
    need(bool(np.all(np.diff(t) > 0)), "size_tokens", t.tolist(), "must increase with the size")
    if target <= t[0]:
        return 1, 0.0
    if target >= t[-1]:
        return len(t), 0.0
    k = int(np.searchsorted(t, target, side="right"))  # t[k - 1] <= target < t[k]
    return k, float((target - t[k - 1]) / (t[k] - t[k - 1]))


def _band(out, queries, band) -> float:
    hits = [x["correct"] for x, q in zip(out, queries) if band[0] <= q.difficulty <= band[1]]
    return float(np.mean(hits)) if hits else float("nan")


def execute_all(solvers, queries, graphs, rng) -> list[dict]:
    """Run every (query, graph) pair: one batch of agent samples, then each graph's message passing."""
    from .agents import run_agents, run_graph

    reqs = [(q, ROLES[r]) for q, (roles, _) in zip(queries, graphs) for r in roles]
    outs = run_agents(solvers, reqs, rng)
    res, at = [], 0
    for q, (roles, adj) in zip(queries, graphs):
        res.append(run_graph(q, [ROLES[r] for r in roles], adj, outs[at:at + len(roles)]))
        at += len(roles)
    return res


def run(config: RadarConfig) -> dict:
    """Run every arm for every seed; write ``metrics.json``, ``results.md`` and ``radar.png``.

    Returns:
        The content of ``metrics.json``.
    """
    import torch
    from scipy.stats import spearmanr
    from onchip.progress import progress_bar

    from onchip.io import atomic_output_dir, check_output_dir

    from .agents import graph_tokens, make_query, query_features, train_agents
    from .generator import OneShotGenerator, RadarGenerator

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed = {a: [] for a in ARMS}
    by_diff = {a: {} for a in ARMS}
    corr = {"radar": [], "one-shot": []}
    collected = []
    control = {"adaptive": [], "fixed-size": []}
    control_by_diff = {a: {} for a in control}
    matched = []
    voters = {n: [] for n in VOTER_SIZES}
    voters_by_diff = {n: {} for n in VOTER_SIZES}
    bar = progress_bar(total=len(c.seeds) * 6, desc="radar", disable=not c.progress)
    for seed in c.seeds:
        solvers = train_agents(seed)
        r = rng(seed, "radar", "data")
        train_q = _queries(r, c.train_queries)
        feats = [query_features(q, MAX_DIFFICULTY) for q in train_q]
        # 1. successful graphs from fixed topologies with random sizes and roles
        kinds = ("single", "chain", "star", "complete", "random", "layered")
        cand, cq = [], []
        for q in train_q:
            for kind in kinds:
                n = 1 if kind == "single" else int(r.integers(2, c.max_nodes + 1))
                roles = list(r.integers(0, len(ROLES), n))
                cand.append(fixed_topology(kind, r, n, roles))
                cq.append(q)
        res = execute_all(solvers, cq, cand, rng(seed, "radar", "collect"))
        rewards = np.array([0.8 * x["correct"] + 0.2 * sparsity(g[1], c.max_nodes) for x, g in zip(res, cand)])
        base_reward = rewards.reshape(len(train_q), len(kinds)).mean(1)
        ok = [(g[0], g[1], feats[i // len(kinds)]) for i, (x, g) in enumerate(zip(res, cand)) if x["correct"]]
        ok_diff = [cq[i].difficulty for i, x in enumerate(res) if x["correct"]]
        ok_size = [len(g[0]) for g, x in zip(cand, res) if x["correct"]]
        rho = spearmanr(ok_diff, ok_size).statistic if len(set(ok_size)) > 1 and len(set(ok_diff)) > 1 else np.nan
        collected.append({"successful": len(ok), "candidates": len(cand),
                          "spearman_difficulty_agents": 0.0 if np.isnan(rho) else float(rho),
                          "agents_by_difficulty": {str(d): float(np.mean([n for dd, n in zip(ok_diff, ok_size)
                                                                          if dd == d]))
                                                   for d in sorted(set(ok_diff))}})
        if len(ok) > c.max_graphs:
            ok = [ok[i] for i in sorted(r.choice(len(ok), c.max_graphs, replace=False))]
        bar.update()
        # 2. RADAR generator and the one-shot baseline on the successful graphs
        gen = RadarGenerator(len(feats[0]), c.max_nodes, seed)
        gen.fit(ok, c.epochs, rng(seed, "radar", "fit"))
        one = OneShotGenerator(len(feats[0]), c.max_nodes, seed)
        one.fit(ok, c.epochs, rng(seed, "radar", "fit-oneshot"))
        bar.update()
        # 3. RL fine-tuning: reward 0.8 correct + 0.2 sparsity, advantage over the fixed topologies' mean
        g_rng = rng(seed, "radar", "rl")
        for _ in range(c.rl_epochs):
            for b in range(0, len(train_q), 32):
                idx = list(range(b, min(b + 32, len(train_q))))
                sampled = [gen.generate(feats[i], g_rng, with_log_prob=True) for i in idx]
                out = execute_all(solvers, [train_q[i] for i in idx], [(s[0], s[1]) for s in sampled], g_rng)
                loss = 0.0
                for i, s, x in zip(idx, sampled, out):
                    reward = 0.8 * x["correct"] + 0.2 * sparsity(s[1], c.max_nodes)
                    loss = loss - (reward - base_reward[i]) * s[2]
                gen.opt_den.zero_grad()
                (loss / len(idx)).backward()
                gen.opt_den.step()
        bar.update()
        # 4. test: one graph per query
        t_rng = rng(seed, "radar", "test")
        test_q = _queries(t_rng, c.test_queries)
        for arm in ARMS:
            a_rng = rng(seed, "radar", "arm", arm)
            if arm == "radar":
                graphs = [gen.generate(query_features(q, MAX_DIFFICULTY), a_rng) for q in test_q]
            elif arm == "one-shot":
                graphs = [one.generate(query_features(q, MAX_DIFFICULTY), a_rng) for q in test_q]
            else:
                graphs = [fixed_topology(arm, a_rng) for _ in test_q]
            out = execute_all(solvers, test_q, graphs, a_rng)
            per_seed[arm].append({k: float(np.mean([x[k] for x in out])) for k in ("correct", "tokens", "nodes", "edges")})
            for q, x in zip(test_q, out):
                by_diff[arm].setdefault(q.difficulty, []).append((float(x["correct"]), x["nodes"], x["tokens"]))
            if arm in corr:
                rho = spearmanr([q.difficulty for q in test_q], [x["nodes"] for x in out]).statistic
                corr[arm].append(0.0 if np.isnan(rho) else float(rho))
        bar.update()
        # 5. voters: a star of 1 / 3 / 5 generalists on queries balanced over difficulties
        v_rng = rng(seed, "radar", "voters")
        per_d = max(1, -(-c.test_queries // MAX_DIFFICULTY))
        voter_q = [make_query(v_rng, d, float(v_rng.random())) for d in range(1, MAX_DIFFICULTY + 1)
                   for _ in range(per_d)]
        for n in VOTER_SIZES:
            out = execute_all(solvers, voter_q, [generalist_star(n)] * len(voter_q), rng(seed, "radar", "voters", n))
            voters[n].append({"easy": _band(out, voter_q, EASY), "hard": _band(out, voter_q, HARD),
                              "correct": float(np.mean([x["correct"] for x in out])),
                              "tokens": float(np.mean([x["tokens"] for x in out]))})
            for q, x in zip(voter_q, out):
                voters_by_diff[n].setdefault(q.difficulty, []).append(float(x["correct"]))
        bar.update()
        # 6. positive control: the same generator fitted on planted size-adaptive graphs (a star of
        #    1 / 3 / 5 generalists by difficulty) vs a query-blind size (k or k + 1 generalists in a star)
        #    mixed so that its mean tokens on the training queries equal the adaptive generator's there
        planted = [(*planted_graph(q.difficulty), f) for q, f in zip(train_q, feats)]
        pg = RadarGenerator(len(feats[0]), c.max_nodes, seed)
        pg.fit(planted, c.epochs, rng(seed, "radar", "control-fit", "adaptive"))
        m_rng = rng(seed, "radar", "control-match")
        target = float(np.mean([graph_tokens(q, pg.generate(f, m_rng)[1]) for q, f in zip(train_q, feats)]))
        size_tokens = [float(np.mean([graph_tokens(q, generalist_star(n)[1]) for q in train_q]))
                       for n in range(1, c.max_nodes + 1)]
        k, w = token_matched_mix(size_tokens, target)
        matched.append({"train_tokens_adaptive": target, "size": k, "p_size_plus_one": w,
                        "train_tokens_fixed": (1 - w) * size_tokens[k - 1] + w * size_tokens[min(k, c.max_nodes - 1)]})
        for arm in ("adaptive", "fixed-size"):
            p_rng = rng(seed, "radar", "control", arm)
            if arm == "adaptive":
                graphs = [pg.generate(query_features(q, MAX_DIFFICULTY), p_rng) for q in test_q]
            else:
                graphs = [generalist_star(k + int(p_rng.random() < w)) for _ in test_q]
            out = execute_all(solvers, test_q, graphs, p_rng)
            for q, x in zip(test_q, out):
                control_by_diff[arm].setdefault(q.difficulty, []).append((float(x["correct"]), x["nodes"]))
            control[arm].append({**{k_: float(np.mean([x[k_] for x in out])) for k_ in ("correct", "tokens", "nodes")},
                                 "easy": _band(out, test_q, EASY), "hard": _band(out, test_q, HARD)})
        bar.update()
    bar.close()
    summary = {}
    for arm in ARMS:
        row = {}
        for key in ("correct", "tokens", "nodes", "edges"):
            m, s = mean_std(x[key] for x in per_seed[arm])
            row[key], row[key + "_std"] = m, s
        row["by_difficulty"] = {str(d): {"accuracy": float(np.mean([v[0] for v in vals])),
                                         "nodes": float(np.mean([v[1] for v in vals])),
                                         "tokens": float(np.mean([v[2] for v in vals]))}
                                for d, vals in sorted(by_diff[arm].items())}
        if arm in corr:
            row["spearman_difficulty_nodes"], row["spearman_difficulty_nodes_std"] = mean_std(corr[arm])
        summary[arm] = row
    base = [a for a in ARMS if a != "radar"]
    many = len(c.seeds) >= 2
    paired = ({a: paired_difference([x["correct"] for x in per_seed["radar"]], [x["correct"] for x in per_seed[a]])
               for a in base} if many else None)
    paired_tokens = ({a: paired_difference([x["tokens"] for x in per_seed["radar"]],
                                           [x["tokens"] for x in per_seed[a]]) for a in base} if many else None)
    result = {
        "config": recorded_config(c),
        "headline": headline(
            "accuracy on held-out queries (one graph per query)", "radar", summary["radar"]["correct"],
            {a: summary[a]["correct"] for a in base},
            budget={"graphs per query": 1, "agents per graph (at most)": c.max_nodes,
                    "tokens per query (measured)": {a: round(summary[a]["tokens"], 1) for a in ARMS}},
            seeds=c.seeds, direction="higher", std=summary["radar"]["correct_std"],
            baseline_std={a: summary[a]["correct_std"] for a in base}, paired=paired),
        "paired_tokens": paired_tokens,
        "collected_graphs": {"per_seed": collected,
                             "spearman_difficulty_agents": mean_std(x["spearman_difficulty_agents"]
                                                                   for x in collected)[0]},
        "control_per_seed": control,
        "results": summary,
        "per_seed": per_seed,
        "seconds": time.perf_counter() - t0,
    }
    voter_summary = {
        "setting": "a star of n generalists (n = 1 alone) on every query; per seed "
                   f"{max(1, -(-c.test_queries // MAX_DIFFICULTY))} queries of each difficulty 1-{MAX_DIFFICULTY}",
        "sizes": list(VOTER_SIZES), "easy": list(EASY), "hard": list(HARD),
        "by_difficulty": {str(n): {str(d): float(np.mean(v)) for d, v in sorted(voters_by_diff[n].items())}
                          for n in VOTER_SIZES},
        "summary": {str(n): {k: mean_std_dict(x[k] for x in voters[n]) for k in ("easy", "hard", "correct", "tokens")}
                    for n in VOTER_SIZES},
        "per_seed": {str(n): voters[n] for n in VOTER_SIZES},
    }
    if many:
        lo, hi = VOTER_SIZES[0], VOTER_SIZES[-1]
        voter_summary["paired"] = {f"{band}: {hi} - {lo} agents": paired_difference(
            [x[band] for x in voters[hi]], [x[band] for x in voters[lo]]) for band in ("hard", "easy")}
    result["voters"] = voter_summary
    result["control_matching"] = matched
    if many:
        result["positive_control"] = positive_control(
            "the same generator (ordering + denoising networks, same epochs) fitted on planted size-adaptive "
            "graphs: for each training query a star of 1 / 3 / 5 generalists for 1-2 / 3-4 / 5-6 operations; "
            "ablation: a fixed, query-blind size at equal tokens: a star of k or k + 1 generalists, drawn "
            "independently of the query, mixed so that its mean tokens on the training queries equal those of "
            "the adaptive generator's graphs there; accuracy on the same held-out queries",
            "adaptive", "fixed-size", [x["correct"] for x in control["adaptive"]],
            [x["correct"] for x in control["fixed-size"]], seeds=c.seeds,
            metric="accuracy on held-out queries (one graph per query)")
        pc = result["positive_control"]
        pc["tokens"] = {a: mean_std(x["tokens"] for x in control[a])[0] for a in control}
        pc["agents"] = {a: mean_std(x["nodes"] for x in control[a])[0] for a in control}
        pc["tokens_paired"] = paired_difference(
            [x["tokens"] for x in control["adaptive"]], [x["tokens"] for x in control["fixed-size"]])
        pc["by_difficulty"] = {a: {str(d): {"accuracy": float(np.mean([v[0] for v in vals])),
                                            "nodes": float(np.mean([v[1] for v in vals]))}
                                   for d, vals in sorted(control_by_diff[a].items())} for a in control}
        pc["by_band"] = {band: {a: float(np.nanmean([x[band] for x in control[a]])) for a in control}
                         for band in ("easy", "hard")}
        pc["paired_by_band"] = {band: paired_difference([x[band] for x in control["adaptive"]],
                                                        [x[band] for x in control["fixed-size"]])
                                for band in ("easy", "hard")
                                if all(np.isfinite(x[band]) for a in control for x in control[a])}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def results_table(result: dict) -> str:
    """Markdown table: one row per arm (mean ± std over seeds)."""

    def rho(r):
        return f"{r['spearman_difficulty_nodes']:.2f} ± {r['spearman_difficulty_nodes_std']:.2f}" \
            if "spearman_difficulty_nodes" in r else "-"

    rows = [(a, f"{r['correct']:.3f} ± {r['correct_std']:.3f}", f"{r['tokens']:.1f} ± {r['tokens_std']:.1f}",
             f"{r['nodes']:.2f}", f"{r['edges']:.2f}", rho(r)) for a, r in result["results"].items()]
    return markdown_table(["arm", "accuracy", "tokens / query", "agents", "edges", "Spearman(difficulty, agents)"], rows)


def results_sections(result: dict) -> list[str]:
    """The sections of ``results.md`` (after its title and command) for a :func:`run` result."""
    diffs = list(next(iter(result["results"].values()))["by_difficulty"])
    res = result["results"]
    accuracy = markdown_table(["arm", *diffs], [[a, *(f"{r['by_difficulty'][d]['accuracy']:.2f}" for d in diffs)]
                                                for a, r in res.items()],
                              caption="Accuracy by query difficulty (operations; pooled over seeds):")
    rows = [[a, *(f"{res[a]['by_difficulty'][d]['nodes']:.2f}" for d in diffs)] for a in ("one-shot", "radar")]
    if "positive_control" in result:
        bd = result["positive_control"]["by_difficulty"]["adaptive"]
        rows.append(["positive control: adaptive", *(f"{bd[d]['nodes']:.2f}" if d in bd else "-" for d in diffs)])
    agents = markdown_table(["arm", *diffs], rows, caption="Agents per generated graph by difficulty:")
    col = result["collected_graphs"]
    sections = [results_table(result), accuracy, agents,
                "Successful training graphs (what both generators imitate): Spearman(difficulty, agents) per seed "
                + ", ".join(f"{x['spearman_difficulty_agents']:+.3f}" for x in col["per_seed"])
                + f" (mean {col['spearman_difficulty_agents']:+.3f}); agents by difficulty "
                + f"(seed {result['config']['seeds'][0]}): "
                + ", ".join(f"{d}: {v:.2f}" for d, v in col["per_seed"][0]["agents_by_difficulty"].items()) + "."]
    if result["headline"].get("paired"):
        sections.append("Paired differences over seeds, radar - arm (mean [ci95]), accuracy and tokens per query:\n\n"
                        + "\n".join(f"- {paired_line(a, p)}; tokens {paired_line('', result['paired_tokens'][a], 1)[2:]}"
                                     for a, p in result["headline"]["paired"].items()))
    v = result["voters"]
    sizes = [str(n) for n in v["sizes"]]
    vd = list(v["by_difficulty"][sizes[0]])
    voter_lines = markdown_table(
        ["agents (star of generalists)", *vd, f"easy {v['easy'][0]}-{v['easy'][1]}", f"hard {v['hard'][0]}-{v['hard'][1]}",
         "tokens / query"],
        [[n, *(f"{v['by_difficulty'][n][d]:.2f}" for d in vd),
          *(f"{v['summary'][n][b]['mean']:.3f} ± {v['summary'][n][b]['std']:.3f}" for b in ("easy", "hard")),
          f"{v['summary'][n]['tokens']['mean']:.1f}"] for n in sizes],
        caption="## Voters: accuracy by difficulty of a fixed star of n generalists\n\nSetting: " + v["setting"]
        + " (by difficulty: pooled over seeds; easy / hard: mean ± std over seeds):")
    if v.get("paired"):
        voter_lines += "\n\n" + "\n".join(f"- {paired_line(name, p)}" for name, p in v["paired"].items())
    sections.append(voter_lines)
    pc = result.get("positive_control")
    if pc:
        m = result["control_matching"]
        text = ("## Positive control\n\nSetting: " + pc["setting"] + ".\n\n"
                + "Token matching per seed (fixed size k, probability of k + 1; training-query tokens adaptive / "
                + "fixed): " + "; ".join(f"k={x['size']}, {x['p_size_plus_one']:.2f}, {x['train_tokens_adaptive']:.1f} / "
                                         f"{x['train_tokens_fixed']:.1f}" for x in m) + ".\n\n"
                + f"Per seed: adaptive {', '.join(f'{x:.3f}' for x in pc['method_values'])}; fixed-size "
                + f"{', '.join(f'{x:.3f}' for x in pc['ablation_values'])}.\n\n"
                + "- " + paired_line("accuracy, adaptive - fixed-size", pc["paired"]) + "\n"
                + "- " + paired_line("tokens / query, adaptive - fixed-size", pc["tokens_paired"], 1)
                + f" (adaptive {pc['tokens']['adaptive']:.1f}, fixed-size {pc['tokens']['fixed-size']:.1f}; agents "
                + f"{pc['agents']['adaptive']:.2f} vs {pc['agents']['fixed-size']:.2f})")
        for band, p in pc.get("paired_by_band", {}).items():
            text += "\n- " + paired_line(f"{band} queries, accuracy adaptive - fixed-size", p) \
                + f" ({pc['by_band'][band]['adaptive']:.3f} vs {pc['by_band'][band]['fixed-size']:.3f})"
        sections.append(text)
    return sections


def _write(stage, c: RadarConfig, result: dict) -> None:
    from onchip.plotting import pyplot

    write_metrics(stage, result, c.command)
    write_results(stage, "RADAR: generated agent topologies", c.command or "onchip radar", *results_sections(result))
    v, pc = result["voters"], result.get("positive_control")
    sizes = [str(n) for n in v["sizes"]]
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(17, 4))
    for a, r in result["results"].items():
        axes[0].errorbar(r["tokens"], r["correct"], xerr=r["tokens_std"], yerr=r["correct_std"], fmt="o", capsize=3)
        axes[0].annotate(a, (r["tokens"], r["correct"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    axes[0].set_xlabel("tokens per query")
    axes[0].set_ylabel("accuracy")
    axes[0].set_title(f"one graph per query, <= {c.max_nodes} agents, {len(c.seeds)} seeds")
    for n in sizes:
        bd = v["by_difficulty"][n]
        axes[1].plot([int(d) for d in bd], list(bd.values()), "o-", label=f"{n} generalist{'s' if n != '1' else ''}")
    axes[1].set_xlabel("query difficulty (operations)")
    axes[1].set_ylabel("accuracy (pooled over seeds)")
    axes[1].set_title("voters: a fixed star of n agents")
    axes[1].legend()
    for a in ("one-shot", "radar"):
        bd = result["results"][a]["by_difficulty"]
        axes[2].plot([int(d) for d in bd], [bd[d]["nodes"] for d in bd], "o-", label=a)
    if pc:
        bd = pc["by_difficulty"]["adaptive"]
        axes[2].plot([int(d) for d in bd], [bd[d]["nodes"] for d in bd], "s--",
                     label="positive control (fitted on planted graphs)")
        axes[2].plot([int(d) for d in bd], [planted_size(int(d)) for d in bd], "k:", label="planted size")
    axes[2].set_ylim(0.5, c.max_nodes + 0.5)
    axes[2].set_xlabel("query difficulty (operations)")
    axes[2].set_ylabel("agents in the generated graph")
    axes[2].legend()
    save(fig, stage / "radar.png")
