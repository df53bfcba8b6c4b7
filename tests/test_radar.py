"""RADAR: effective size against networkx, graph execution and token counts, generator log-probabilities, CLI."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
import torch

from onchip.methods.radar.agents import (
    SLIP_CAP, SLIP_FREE_STEPS, Query, execution_order, graph_tokens, make_query, run_graph, slip_probability, train_agents,
)
from onchip.methods.radar.experiment import execute_all, fixed_topology, generalist_star, sparsity, token_matched_mix
from onchip.methods.radar.generator import R, RadarGenerator, effective_size
from method_support import assert_refused, quick_run


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("seed", range(5))
def test_effective_size_is_burts_for_one_role_and_symmetric_edges(seed):
    """One role and a symmetric adjacency: the in and out parts both equal networkx.effective_size."""
    g = nx.gnp_random_graph(7, 0.45, seed=seed)
    adj = nx.to_numpy_array(g, nodelist=range(7), dtype=int)
    ours = effective_size(np.zeros(7, int), adj, alpha=0.7) * 6
    oracle = nx.effective_size(g)
    for v in range(7):
        want = 0.0 if math.isnan(oracle[v]) else oracle[v]
        assert ours[v] == pytest.approx(want), v


def test_effective_size_counts_only_same_role_ties_and_weights_directions():
    # 0 -> 2, 1 -> 2, 0 -> 1: node 2's in-neighbours {0, 1} are tied (0 -> 1)
    adj = np.zeros((3, 3), int)
    adj[0, 2] = adj[1, 2] = adj[0, 1] = 1
    same = effective_size([0, 0, 0], adj, alpha=0.7)
    diff = effective_size([0, 1, 0], adj, alpha=0.7)
    assert same[2] == pytest.approx(0.3 * (2 - 1 / 2) / 2)   # in-part only, one tie
    assert diff[2] == pytest.approx(0.3 * 2 / 2)             # different roles: no redundancy
    assert same[0] == pytest.approx(0.7 * (2 - 1 / 2) / 2)   # out-neighbours {1, 2}: 1 -> 2 is a tie
    assert effective_size([0], np.zeros((1, 1), int)).tolist() == [0.0]


def test_graph_execution_majority_and_token_count():
    q = Query(3, (("add", 4), ("times", 2)))   # 3 + 4 = 7, 7 * 2 = 14 -> 4
    assert q.values() == [7, 4] and q.answer == 4 and q.text == "start 3 add 4 times 2"
    roles = ["adder", "multiplier", "generalist"]
    star = np.array([[0, 0, 1], [0, 0, 1], [0, 0, 0]])
    outs = [(["7", "4"], 4), (["7", "4"], 4), (["7", "9"], 9)]  # the hub is wrong, both leaves right
    res = run_graph(q, roles, star, outs)
    assert res["answer"] == 4 and res["correct"] and res["edges"] == 2 and res["nodes"] == 3
    prompt = len(q.text.split()) + 2
    assert res["tokens"] == 3 * prompt + 3 * 3 + 2 * (2 + 2)  # 3 prompts + 3 completions + 2 messages
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    assert run_graph(q, roles, chain, outs)["answer"] == 4  # votes carry their count: 2 against 1
    assert run_graph(q, roles, np.zeros((3, 3), int), outs)["answer"] == 9  # no edges: the last agent alone


def test_graph_tokens_match_an_executed_graph():
    q = Query(3, (("add", 4), ("times", 2), ("add", 1)))
    roles = ["adder", "multiplier", "generalist", "generalist"]
    adj = np.array([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]])
    outs = [(["7", "4", "5"], 5), (["7", "4", "5"], 5), (["1", "2", "3"], 3), (["7", "4", "5"], 5)]
    assert graph_tokens(q, adj) == run_graph(q, roles, adj, outs)["tokens"]


def test_slip_probability_spares_the_first_steps_then_grows_to_its_cap():
    probs = [slip_probability(t, 0.08) for t in range(12)]
    assert probs[:SLIP_FREE_STEPS] == [0.0] * SLIP_FREE_STEPS
    assert probs[SLIP_FREE_STEPS] == pytest.approx(0.08) and probs[SLIP_FREE_STEPS + 1] == pytest.approx(0.16)
    assert all(a <= b for a, b in itertools.pairwise(probs)) and max(probs) == SLIP_CAP
    with pytest.raises(ValueError, match="slip"):
        slip_probability(3, 1.5)
    with pytest.raises(ValueError, match="step"):
        slip_probability(-1)


def test_more_voters_help_on_hard_queries_not_needed_on_easy_ones():
    """The agents' stand-in property the experiment relies on: a lone generalist is nearly always right
    on 1-2 operations but often wrong on 5-6, where a star of 5 generalists recovers much of it."""
    solvers = train_agents(3)
    r = np.random.default_rng(7)
    easy = [make_query(r, int(d), float(r.random())) for d in r.integers(1, 3, 200)]
    hard = [make_query(r, int(d), float(r.random())) for d in r.integers(5, 7, 200)]

    def accuracy(queries, n, stream):
        out = execute_all(solvers, queries, [generalist_star(n)] * len(queries), np.random.default_rng(stream))
        return float(np.mean([x["correct"] for x in out]))

    one_easy, one_hard = accuracy(easy, 1, 0), accuracy(hard, 1, 1)
    five_easy, five_hard = accuracy(easy, 5, 2), accuracy(hard, 5, 3)
    assert one_easy >= 0.9 and five_easy - one_easy <= 0.05, (one_easy, five_easy)
    assert one_hard <= 0.7 and five_hard - one_hard >= 0.15, (one_hard, five_hard)
    assert accuracy(hard, 3, 4) > one_hard


def test_token_matched_mix_interpolates_between_sizes():
    tokens = [16.0, 40.0, 58.0, 79.0, 100.0]
    k, w = token_matched_mix(tokens, 70.0)
    assert k == 3 and (1 - w) * tokens[2] + w * tokens[3] == pytest.approx(70.0)
    assert token_matched_mix(tokens, 58.0) == (3, 0.0)
    assert token_matched_mix(tokens, 5.0) == (1, 0.0) and token_matched_mix(tokens, 500.0) == (5, 0.0)
    with pytest.raises(ValueError, match="size_tokens"):
        token_matched_mix([10.0, 10.0], 10.0)


def test_execution_order_drops_cycle_edges():
    adj = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    order, kept = execution_order(3, adj)
    assert order == [0, 1, 2] and kept.tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]


def test_fixed_topologies_and_sparsity():
    rng = np.random.default_rng(0)
    assert fixed_topology("single", rng)[1].shape == (1, 1)
    assert fixed_topology("chain", rng)[1].sum() == 2
    assert fixed_topology("star", rng)[1][:, 3].tolist() == [1, 1, 1, 0]
    assert fixed_topology("complete", rng)[1].sum() == 6
    layered = fixed_topology("layered", rng)[1]
    assert layered.sum() == 2 * 2 + 2 * 1 and nx.is_directed_acyclic_graph(nx.DiGraph(layered))
    assert sparsity(np.zeros((1, 1)), 5) == 1.0 and sparsity(np.triu(np.ones((5, 5)), 1), 5) == 0.0


def test_generator_log_prob_is_a_distribution_over_graphs():
    """Summed over every graph of up to 2 nodes (roles x edge types), p(graph) in one order is 1."""
    gen = RadarGenerator(q_dim=8, max_nodes=2, seed=0)
    q = torch.rand(8)
    total = 0.0
    with torch.no_grad():
        for a in range(R):
            total += math.exp(float(gen.log_prob([a], np.zeros((1, 1), int), q, [0])))
            for b in range(R):
                for adj in ([[0, 0], [0, 0]], [[0, 1], [0, 0]], [[0, 0], [1, 0]]):
                    total += math.exp(float(gen.log_prob([a, b], np.array(adj), q, [0, 1])))
    assert total == pytest.approx(1.0, abs=1e-5)


def test_generator_learns_a_planted_query_to_graph_rule():
    """Two query types, two target graphs: after fitting, each query mostly generates its own graph."""
    gen = RadarGenerator(q_dim=2, max_nodes=2, seed=0)
    qa, qb = np.array([1, 0], np.float32), np.array([0, 1], np.float32)
    ga = ([0], np.zeros((1, 1), int))
    gb = ([2, 1], np.array([[0, 1], [0, 0]]))
    data = [(*ga, qa), (*gb, qb)] * 20
    gen.fit(data, epochs=2, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    a = [gen.generate(qa, rng)[0] for _ in range(30)]
    b = [gen.generate(qb, rng) for _ in range(30)]
    assert sum(r == [0] for r in a) >= 24
    assert sum(sorted(r) == [1, 2] and adj.sum() == 1 for r, adj in b) >= 20


@pytest.mark.parametrize("argv, flag", [
    (["--max-nodes", "9"], "--max-nodes"),
    (["--test-queries", "0"], "--test-queries"),
    (["--seeds", "0,0"], "--seeds"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("radar", argv, flag, tmp_path / "out", capsys)


def test_planted_graph_grows_with_difficulty():
    from onchip.methods.radar.experiment import planted_graph

    sizes = [len(planted_graph(d)[0]) for d in range(1, 7)]
    assert sizes == [1, 1, 3, 3, 5, 5]
    roles, adj = planted_graph(5)
    assert adj[:, 4].tolist() == [1, 1, 1, 1, 0] and adj.sum() == 4


def test_quick_run_writes_headline(tmp_path):
    out = tmp_path / "run"
    m = quick_run("radar", out)
    h = m["headline"]
    assert h["method"] == "radar" and h["direction"] == "higher" and h["seeds"] == [0, 1]
    assert set(h["baselines"]) == {"single", "chain", "star", "complete", "random", "layered", "one-shot"}
    assert set(h["paired"]) == set(h["baselines"])
    for a, p in h["paired"].items():
        lo, hi = p["ci95"]
        assert lo <= p["difference"] <= hi and p["n"] == 2, a
        assert set(m["paired_tokens"][a]) >= {"difference", "ci95"}
    pc = m["positive_control"]
    assert pc["method"] == "adaptive" and pc["ablation"] == "fixed-size" and len(pc["method_values"]) == 2
    assert isinstance(pc["sensitive"], bool) and set(pc["tokens"]) == {"adaptive", "fixed-size"}
    lo, hi = pc["tokens_paired"]["ci95"]
    assert lo <= pc["tokens_paired"]["difference"] <= hi
    for x in m["control_matching"]:  # the fixed size's mix matches the adaptive tokens on the training queries
        assert 1 <= x["size"] <= 5 and 0 <= x["p_size_plus_one"] < 1
        assert x["train_tokens_fixed"] == pytest.approx(x["train_tokens_adaptive"], rel=1e-6) or x["p_size_plus_one"] == 0
    v = m["voters"]
    assert v["sizes"] == [1, 3, 5] and set(v["by_difficulty"]) == {"1", "3", "5"}
    assert set(v["by_difficulty"]["5"]) == {str(d) for d in range(1, 7)}
    assert set(v["paired"]) == {"hard: 5 - 1 agents", "easy: 5 - 1 agents"}
    col = m["collected_graphs"]
    assert len(col["per_seed"]) == 2 and -1 <= col["spearman_difficulty_agents"] <= 1
    assert m["results"]["single"]["nodes"] == 1 and m["results"]["complete"]["edges"] == 6
    assert 1 <= m["results"]["radar"]["nodes"] <= 5
    assert -1 <= m["results"]["radar"]["spearman_difficulty_nodes"] <= 1
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "radar.png"}
