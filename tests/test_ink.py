"""The first drop of ink: context construction (fixed length, exact proportion, conflicting values),
the filtering arms, the first-drop statistic, the readout analogue, refusals, one --quick run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods.ink.documents import COLOURS, filtered, make_context
from onchip.methods.ink.experiment import first_drop_share
from onchip.methods.ink.stream import readout_fidelity
from onchip.methods.ink.subjects import _shares, accuracy_margin, tiny_vocabulary


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("hard", [0, 1, 7, 15])
def test_context_has_one_gold_exact_proportion_and_fixed_length(hard):
    ctx = make_context(np.random.default_rng(hard), 16, hard)
    kinds = [d.kind for d in ctx.docs]
    assert len(ctx.docs) == 16 and kinds.count("gold") == 1 and kinds.count("hard") == hard
    assert ctx.p == pytest.approx(hard / 15)
    gold = ctx.docs[kinds.index("gold")]
    assert (gold.first, gold.last, gold.value) == (ctx.first, ctx.last, ctx.answer)
    for d in ctx.docs:
        if d.kind == "hard":   # same relation, confusable entity, conflicting value
            assert d.first == ctx.first and d.last != ctx.last and d.value != ctx.answer and d.value in COLOURS
        if d.kind == "easy":
            assert d.first != ctx.first and d.value is None and "colour" not in d.text()
    # the queried name appears only in the gold document (twice)
    assert sum(d.text().count(f"{ctx.first} {ctx.last}") for d in ctx.docs) == 2
    # every document has one shape: the word form has 5 words whatever its kind
    assert {len(d.words().split()) for d in ctx.docs} == {5}


def test_gold_position_is_spread():
    pos = [[d.kind for d in make_context(np.random.default_rng(s), 8, 3).docs].index("gold") for s in range(200)]
    assert set(pos) == set(range(8))


def test_filters_separate_length_from_distractor_removal():
    ctx = make_context(np.random.default_rng(1), 16, 8)
    rng = np.random.default_rng(2)
    assert filtered(ctx, "none", rng) is ctx
    swap = filtered(ctx, "swap-hard-to-easy", rng)
    assert len(swap.docs) == 16 and swap.p == 0 and swap.answer == ctx.answer
    short = filtered(ctx, "shorten", rng)
    # half of each kind dropped (8 hard -> 4, 7 easy -> 4): shorter, p about the same
    assert len(short.docs) == 1 + 4 + 4 and sum(d.kind == "hard" for d in short.docs) == 4
    drop = filtered(ctx, "drop-hard", rng)
    assert len(drop.docs) == 8 and drop.p == 0
    with pytest.raises(ValueError, match="filter"):
        filtered(ctx, "rerank", rng)
    with pytest.raises(ValueError, match="n_hard"):
        make_context(rng, 4, 4)


def test_first_drop_share_hand_cases():
    assert first_drop_share({0.0: 1.0, 0.25: 0.75, 1.0: 0.0}) == pytest.approx(0.25)     # linear
    assert first_drop_share({0.0: 1.0, 0.1: 0.4, 0.5: 0.2, 1.0: 0.0}) == pytest.approx(0.6)  # concave
    assert np.isnan(first_drop_share({0.0: 0.5, 0.5: 0.6, 1.0: 0.5}))                       # no drop


def test_accuracy_margin_and_attention_shares():
    ctx = make_context(np.random.default_rng(3), 4, 1)
    logp = {c: -5.0 for c in COLOURS}
    logp[ctx.answer] = -1.0
    logp[ctx.distractor_values[0]] = -2.0
    assert accuracy_margin(ctx, logp) == (True, pytest.approx(1.0))
    logp[ctx.distractor_values[0]] = -0.5
    assert accuracy_margin(ctx, logp) == (False, pytest.approx(-0.5))
    att = np.array([0.1, 0.2, 0.3, 0.4])
    assert _shares(att, [(0, 1, "gold"), (1, 3, "hard"), (3, 4, "easy")]) == pytest.approx(
        {"gold": 0.1, "hard": 0.5, "easy": 0.4})
    v = tiny_vocabulary()
    assert v.unk not in v.encode(ctx.words(answer=True))


def test_readout_analogue_clean_window_and_all_flipped():
    clean = readout_fidelity(0.0, seed=0, window=64, warmup=1500, test=800)
    flipped = readout_fidelity(1.0, seed=0, window=512, warmup=1500, test=800)
    assert clean > 0.9 and flipped < clean - 0.2
    with pytest.raises(ValueError, match="p:"):
        readout_fidelity(1.5, seed=0)


@pytest.mark.parametrize("argv, flag", [
    (["--docs", "1"], "--docs"), (["--hard-counts", "0,2,1"], "--hard-counts"), (["--hard-counts", "1,2"], "--hard-counts"),
    (["--subjects", "gpt"], "--subjects"), (["--filter-hard", "30"], "--filter-hard"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    out = tmp_path / "o"
    assert main(["ink", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert not out.exists()


def test_cli_quick_run(tmp_path):
    out = tmp_path / "ink"
    assert main(["ink", "--quick", "--seeds", "0", "--quiet", "--out", str(out)]) == 0
    for name in ("metrics.json", "results.md", "contexts.csv", "curves.png", "filtering.png"):
        assert (out / name).is_file(), name
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert set(h) >= {"metric", "method", "value", "baselines", "budget", "seeds", "direction"}
    assert h["seeds"] == [0] and "linear in p (no first-drop effect)" in h["baselines"]
    assert set(m["curves"]) == {"tiny", "learner"} and set(m["filtering"]["tiny"]) == {
        "none", "shorten", "swap-hard-to-easy", "drop-hard"}
    assert m["attention"]["tiny"]   # attention shares were read
    shares = next(iter(m["attention"]["tiny"].values()))
    assert 0 <= shares["gold_total"] + shares["hard_total"] + shares["easy_total"] <= 1 + 1e-6
