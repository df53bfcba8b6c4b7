"""World model in the spirit of DynaVieW: the sprite world's rules, schema re-weighting, the selective
cross-expert attention and type routing of the shared tiny transformer, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from method_support import assert_refused
from onchip.cli import main
from onchip.commands.dynaview import QUICK
from onchip.methods._tiny import TinyConfig, TinyTransformer
from onchip.methods.dynaview import VARIANTS
from onchip.methods.dynaview.experiment import (
    DynaviewConfig,
    encode,
    make_data,
    positions,
    schema_weights,
    train_model,
    vocab,
)
from onchip.methods.dynaview.world import (
    EVENT_P,
    MAX_OBJECTS,
    SIZE,
    WIND,
    apply,
    episode,
    event_probabilities,
    moved,
    random_transition,
    state_tokens,
    wind_transitions,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_world_rules_on_hand_cases():
    s = {"red-ball": (0, 0), "blue-box": (0, 1), "blue-ball": (2, 2)}
    assert apply(s, ["E:move", "A:red-ball", "T:position", "C:down"])["red-ball"] == (1, 0)
    r = apply(s, ["E:recolour", "A:blue-box", "T:colour", "C:red"])
    assert "blue-box" not in r and r["red-box"] == (0, 1)
    assert apply({"red-ball": (0, 0)}, ["E:appear", "A:red-box", "T:presence", "C:cell7"])["red-box"] == (2, 1)
    assert "blue-ball" not in apply(s, ["E:disappear", "A:blue-ball", "T:presence", "C:off"])
    # wind: the row shifts together, the object at the right edge stays
    w = apply(s, ["E:wind", "A:all", "T:position", "C:right"])
    assert w == {"red-ball": (0, 1), "blue-box": (0, 2), "blue-ball": (2, 2)}
    g = np.random.default_rng(0)
    for _ in range(200):
        st = episode(g, 1)[0][0]
        t = random_transition(st, g)
        nxt = apply(st, t)
        assert len(set(nxt.values())) == len(nxt) <= MAX_OBJECTS
        assert all(0 <= r < SIZE and 0 <= c < SIZE for r, c in nxt.values())
        assert nxt != st


def test_wind_probability_and_identifiable_wind_set():
    assert event_probabilities(0.05) == pytest.approx(EVENT_P)
    p = event_probabilities(0.01)
    assert sum(p) == pytest.approx(1.0) and p[-1] == 0.01
    assert p[0] / p[1] == pytest.approx(EVENT_P[0] / EVENT_P[1])  # the common events keep their ratios
    with pytest.raises(ValueError, match="wind_p"):
        event_probabilities(1.0)
    g = np.random.default_rng(0)
    winds = sum(t[0] == "E:wind" for _ in range(300) for t in episode(g, 3, event_probabilities(0.3))[1])
    assert 150 < winds < 400  # ~0.3 of 900 (wind is re-drawn where it cannot move anything)
    assert all(t[0] != "E:wind" for _ in range(200) for t in episode(g, 3, event_probabilities(0.0))[1])
    pairs = wind_transitions(np.random.default_rng(1), 50)
    # identifiable: wind moves >= 2 objects (one mover would read as that object's 'move right')
    assert len(pairs) == 50 and all(moved(a, b) >= 2 and apply(a, WIND) == b for a, b in pairs)
    assert moved({"red-ball": (0, 0)}, {"red-ball": (0, 1)}) == 1


def test_train_model_records_the_curve_at_even_steps():
    v = vocab()
    _, items = make_data(v, 0, "train", 5, 2)
    c = DynaviewConfig(d_model=8, batch=4, curve_points=3, progress=False)
    seen = []
    train_model(v, items, ["TP", "SS"], c, 0, moe=True, selective=True, reweight=True, steps=9, desc="t",
                curve=lambda m, step: seen.append((step, m.training)))
    assert seen == [(0, False), (3, False), (6, False), (9, False)]  # every steps // curve_points, and the end


def test_curve_summary_reads_the_points_at_fractions_of_the_steps():
    from onchip.methods.dynaview.experiment import curve_summary

    a = {"step": [0, 5, 10, 15, 20], "schema": [0.0, 0.2, 0.4, 0.5, 0.6]}
    b = {"step": [0, 5, 10, 15, 20], "schema": [0.0, 0.4, 0.6, 0.7, 0.8]}
    assert curve_summary([a, b], "schema") == pytest.approx([0.5, 0.6, 0.7])
    # separate: the SS model's points only (steps 10-20 of the arm), None elsewhere
    sep = {"step": [0, 5, 10, 10, 15, 20], "next_state": [None, None, None, 0.1, 0.3, 0.9]}
    assert curve_summary([sep], "next_state") == pytest.approx([0.3, 0.3, 0.9])
    assert np.isnan(curve_summary([{"step": [0], "x": [None]}], "x")).all()


def test_schema_weights_upweight_rare_tokens_with_mean_one():
    v = vocab()
    trans = [["E:move", "A:red-ball", "T:position", "C:up"]] * 3 + [["E:wind", "A:all", "T:position", "C:right"]]
    w = schema_weights(v, trans)
    assert w[v.stoi["E:wind"]] == pytest.approx(np.sqrt(3) * w[v.stoi["E:move"]])
    toks = [t for tr in trans for t in tr]
    assert np.mean([w[v.stoi[t]] for t in toks]) == pytest.approx(1.0)
    assert w[v.stoi["red-ball"]] == 1.0


def test_encoding_types_and_target_start():
    v = vocab()
    s0 = state_tokens({"red-ball": (0, 0)})
    s1 = state_tokens({"red-ball": (1, 0)})
    t = ["E:move", "A:red-ball", "T:position", "C:down"]
    ids, types, start = encode(v, "TP", s0, s1, t)
    assert len(ids) == len(types) == 1 + 1 + 9 + 1 + 9 + 1 + 4 + 1
    assert [v.itos[i] for i in ids[start:start + 4]] == t and types[start:start + 4] == [1, 1, 1, 1]
    assert sum(types) == 4
    ids, types, start = encode(v, "SS", s0, s1, t)
    assert [v.itos[i] for i in ids[start:start + 9]] == s1 and sum(types) == 4


def test_positions_give_both_grids_the_same_spatial_ids():
    v = vocab()
    s0 = state_tokens({"red-ball": (0, 0)})
    s1 = state_tokens({"red-ball": (1, 0)})
    t = ["E:move", "A:red-ball", "T:position", "C:down"]
    n = SIZE * SIZE
    for task in ("TP", "SS"):
        ids, _, start = encode(v, task, s0, s1, t)
        pos = positions(task)
        assert len(pos) == len(ids) and max(pos) < 64
        assert pos[2:2 + n] == list(range(n))  # S_t: cell i at spatial id i
    tp = positions("TP")
    assert tp[3 + n:3 + 2 * n] == list(range(n))  # TP: S_t+1 cell i has the id of S_t cell i
    ids, _, start = encode(v, "SS", s0, s1, t)
    ss = positions("SS")
    # SS: the input that predicts target cell i (position start - 1 + i) has cell i's id
    assert [ss[start - 1 + i] for i in range(n)] == list(range(n))
    # the non-cell tokens never share an id with a cell except the prediction slots above
    assert len(set(ss[:start - 1]) - set(range(n))) == len(ss[:start - 1]) - n


def test_explicit_positions_replace_the_default_ones():
    torch.manual_seed(0)
    m = TinyTransformer(TinyConfig(vocab=12, d_model=16, n_layers=1, n_heads=2, max_len=8))
    ids = torch.randint(4, 12, (2, 5))
    base = m(ids)["logits"]
    assert torch.equal(m(ids, positions=torch.arange(5).repeat(2, 1))["logits"], base)
    assert not torch.allclose(m(ids, positions=torch.tensor([[4, 3, 2, 1, 0]] * 2))["logits"], base)


def test_selective_attention_keeps_topk_keys_of_the_other_type():
    torch.manual_seed(0)
    cfg = TinyConfig(vocab=20, d_model=16, n_layers=1, n_heads=2, max_len=16, n_experts=2, expert_by_type=True,
                     cross_topk=2, causal=False)
    m = TinyTransformer(cfg)
    ids = torch.randint(4, 20, (1, 10))
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1, 1]])
    att = m(ids, token_type=types, return_attention=True)["attention"][0][0]  # (heads, 10, 10)
    cross = (types[0][:, None] != types[0][None, :])
    assert ((att > 0) & cross).sum(-1).max() == 2  # at most k keys of the other type per query and head
    assert ((att > 0) & ~cross).sum(-1).min() >= 4  # every key of the own type
    # routing by type: changing a type-1 token's expert weights leaves type-0 positions unchanged
    base = m(ids, token_type=types)["logits"]
    with torch.no_grad():
        m.blocks[0].down[1].weight.add_(1.0)
    moved = m(ids, token_type=types)["logits"]
    # without cross-position mixing after the FFN (one layer), only type-1 positions change
    assert torch.allclose(base[0, :4], moved[0, :4]) and not torch.allclose(base[0, 4:], moved[0, 4:])
    with pytest.raises(ValueError, match="expert_by_type"):
        TinyConfig(vocab=5, expert_by_type=True)


@pytest.mark.parametrize("argv, flag", [
    (["--variants", "full,moe"], "--variants"),
    (["--steps", "0"], "--steps"),
    (["--d-model", "4"], "--d-model"),
    (["--d-model", "50"], "--d-model"),
    (["--seeds", "3"], "--seeds"),  # the positive control's paired comparison needs 2 seeds
    (["--wind-p", "1"], "--wind-p"),
    (["--control-wind-p", "0"], "--control-wind-p"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("dynaview", argv, flag, tmp_path / "out", capsys)


def test_cli_quick_run_writes_the_headline(tmp_path):
    out = tmp_path / "run"
    assert main(["dynaview", "--quick", "--quiet", "--jobs", "1", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert h["method"] == "full" and h["direction"] == "higher" and h["seeds"] == QUICK["seeds"]
    baselines = {"dense", "no-selective", "no-reweight", "separate"}
    assert set(h["baselines"]) == baselines and set(h["paired"]) == baselines
    assert set(m["paired_rare_schema"]) == baselines
    for p in [*h["paired"].values(), *m["paired_rare_schema"].values()]:
        lo, hi = p["ci95"]
        assert lo <= p["difference"] <= hi and p["n"] == 2
    for name, p in h["paired"].items():  # full - baseline, seed by seed
        per_seed = [m["per_seed"][str(s)]["full"]["schema"] - m["per_seed"][str(s)][name]["schema"] for s in h["seeds"]]
        assert p["per_seed"] == pytest.approx(per_seed) and p["difference"] == pytest.approx(h["value"] - h["baselines"][name])
    pc = m["positive_control"]
    assert (pc["method"], pc["ablation"]) == ("full", "no-reweight") and pc["seeds"] == QUICK["seeds"]
    assert len(pc["paired"]["ci95"]) == 2 and isinstance(pc["sensitive"], bool)
    assert pc["method_values"] == [m["control_per_seed"][str(s)]["full"]["rare_schema"] for s in pc["seeds"]]
    assert m["threads"] == {"torch_threads_per_process": 1, "processes": 1}
    for r in [*m["results"].values(), *m["control_results"].values()]:
        assert all(0 <= r[k] <= 1 for k in ("schema", "schema_common", "schema_token", "next_state", "cell",
                                             "rollout", "rare_schema", "rare_next_state"))
    curve = m["per_seed"]["0"]["full"]["curve"]
    assert curve["step"] == [0, 2, 4] and len(curve["rare_schema"]) == 3  # --quick: 4 steps, 2 curve points
    sep = m["per_seed"]["0"]["separate"]["curve"]  # TP model's schema, then the SS model's next state
    assert sep["step"] == [0, 1, 2, 2, 3, 4] and sep["schema"][3:] == [None] * 3 and sep["next_state"][:3] == [None] * 3
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "metrics.png", "curves.png"}


def test_cli_quick_keeps_the_flags_given(tmp_path, monkeypatch):
    import onchip.methods.dynaview.experiment as experiment

    seen = []
    monkeypatch.setattr(experiment, "run", seen.append)
    assert main(["dynaview", "--quick", "--seeds", "5,6", "--train-steps", "9", "--out", str(tmp_path / "o")]) == 0
    c = seen[0]
    assert c.seeds == (5, 6) and c.train_steps == 9  # given: kept
    assert c.episodes == QUICK["episodes"] and c.d_model == QUICK["d_model"]  # not given: --quick's
    assert main(["dynaview", "--out", str(tmp_path / "o")]) == 0
    assert seen[1].seeds == (0, 1) and seen[1].episodes == DynaviewConfig().episodes  # no --quick: defaults
    # the default run: smaller than the committed run's 5000 steps of every arm
    assert seen[1].train_steps == 2000 and seen[1].variants == ("full", "separate")
    assert c.variants == tuple(VARIANTS)  # --quick: every arm
