"""World model in the spirit of DynaVieW: the sprite world's rules, schema re-weighting, the selective
cross-expert attention and type routing of the shared tiny transformer, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods._tiny import TinyConfig, TinyTransformer
from onchip.methods.dynaview.experiment import encode, schema_weights, vocab
from onchip.methods.dynaview.world import apply, episode, random_transition, state_tokens
from method_support import assert_refused


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_world_rules_on_hand_cases():
    s = {"red-ball": (0, 0), "blue-key": (0, 1), "green-box": (4, 4)}
    assert apply(s, ["E:move", "A:red-ball", "T:position", "C:down"])["red-ball"] == (1, 0)
    r = apply(s, ["E:recolour", "A:blue-key", "T:colour", "C:yellow"])
    assert "blue-key" not in r and r["yellow-key"] == (0, 1)
    assert apply(s, ["E:appear", "A:red-box", "T:presence", "C:cell7"])["red-box"] == (1, 2)
    assert "green-box" not in apply(s, ["E:disappear", "A:green-box", "T:presence", "C:off"])
    # wind: the row shifts together, the object at the right edge stays
    w = apply(s, ["E:wind", "A:all", "T:position", "C:right"])
    assert w == {"red-ball": (0, 1), "blue-key": (0, 2), "green-box": (4, 4)}
    g = np.random.default_rng(0)
    for _ in range(200):
        st = episode(g, 1)[0][0]
        t = random_transition(st, g)
        nxt = apply(st, t)
        assert len(set(nxt.values())) == len(nxt) and all(0 <= r < 5 and 0 <= c < 5 for r, c in nxt.values())
        assert nxt != st


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
    assert len(ids) == len(types) == 1 + 1 + 25 + 1 + 25 + 1 + 4 + 1
    assert [v.itos[i] for i in ids[start:start + 4]] == t and types[start:start + 4] == [1, 1, 1, 1]
    assert sum(types) == 4
    ids, types, start = encode(v, "SS", s0, s1, t)
    assert [v.itos[i] for i in ids[start:start + 25]] == s1 and sum(types) == 4


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
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("dynaview", argv, flag, tmp_path / "out", capsys)


def test_cli_quick_run_writes_the_headline(tmp_path):
    out = tmp_path / "run"
    assert main(["dynaview", "--quick", "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert h["method"] == "full" and h["direction"] == "higher"
    assert set(h["baselines"]) == {"dense", "no-selective", "no-reweight", "separate"}
    for r in m["results"].values():
        assert all(0 <= r[k] <= 1 for k in ("schema", "next_state", "rollout"))
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "metrics.png"}
