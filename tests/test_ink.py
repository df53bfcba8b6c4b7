"""The first drop of ink: context construction (fixed length, exact proportion, conflicting values),
the filtering arms, the first-drop statistic, the four readings of an answer, the positive control
through a reader and its negative control, the readout analogue, refusals, one --quick run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from method_support import quick_run
from onchip.cli import main
from onchip.methods.ink.documents import COLOURS, LAST, LONG_LAST, filtered, make_context, without_surname
from onchip.methods.ink.experiment import LINEAR, InkConfig, excess_first_drop, first_drop_share
from onchip.methods.ink.stream import readout_fidelity
from onchip.methods.ink.subjects import (
    _shares,
    accuracy_margin,
    gold_scores,
    tiny_vocabulary,
)


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


def test_gold_scores_and_long_contexts():
    ctx = make_context(np.random.default_rng(4), 5, 2)
    logp = {c: np.log(0.01) for c in COLOURS}
    logp[ctx.answer] = np.log(0.5)
    logp[ctx.distractor_values[0]] = np.log(0.3)
    g = gold_scores(ctx, logp)
    assert g["correct"] == 1.0 and g["gold_prob"] == pytest.approx(0.5)
    assert g["gold_logp"] == pytest.approx(np.log(0.5)) and g["margin"] == pytest.approx(np.log(0.5 / 0.3))
    long = make_context(np.random.default_rng(5), 48, 26, LONG_LAST)   # more hard distractors than LAST holds
    assert len(long.docs) == 48 and len({(d.first, d.last) for d in long.docs if d.kind != "easy"}) == 27
    with pytest.raises(ValueError, match="n_hard"):
        make_context(np.random.default_rng(5), 48, 26)


def test_without_surname_asks_about_a_surname_no_document_holds():
    for h in (0, 4, 11):
        ctx = make_context(np.random.default_rng(h), 12, h)
        q = without_surname(ctx, np.random.default_rng(1))
        assert q.last in LAST and q.last not in {d.last for d in ctx.docs}
        assert (q.docs, q.first, q.answer) == (ctx.docs, ctx.first, ctx.answer)
        # gold and hard distractors now match the query by first name only
        assert sum(d.first == q.first for d in q.docs if d.value is not None) == h + 1
    with pytest.raises(ValueError, match="surnames"):
        without_surname(ctx, np.random.default_rng(1), surnames=tuple(d.last for d in ctx.docs))


def test_excess_first_drop_is_zero_for_lines_and_flat_curves():
    assert excess_first_drop({0.0: 0.9, 0.5: 0.6, 1.0: 0.3}) == pytest.approx(0.0)
    assert excess_first_drop({0.0: 0.9, 0.5: 0.9, 1.0: 0.9}) == pytest.approx(0.0)
    # concave: half the drop at the first step of a quarter of the range
    assert excess_first_drop({0.0: 1.0, 0.25: 0.5, 1.0: 0.0}) == pytest.approx(0.25)


class _RuleReader:
    """A reader by rule: ``partial`` answers the colour of the last document whose first name matches the
    query (it answers from documents it cannot tell apart), else the one matching first and last name;
    without a match it answers red."""

    def __init__(self, partial: bool):
        self.partial = partial

    def score(self, contexts):
        out = []
        for ctx in contexts:
            match = [d for d in ctx.docs if d.value is not None and d.first == ctx.first
                     and (self.partial or d.last == ctx.last)]
            pick = match[-1].value if match else "red"
            out.append({"logp": {c: 0.0 if c == pick else -5.0 for c in COLOURS}, "tokens": len(ctx.docs)})
        return out


def test_positive_control_is_decided_by_the_reader_and_its_negative_control_holds_zero():
    from onchip.methods.ink.experiment import _control_rows, _positive_control

    c = InkConfig(seeds=(0, 1, 2), hard_counts=(0, 1, 2, 4, 8, 11), control_items=40)
    ps = [h / (c.n_docs - 1) for h in c.hard_counts]

    def controls(reader):
        rows = [r for seed in c.seeds for r in _control_rows(reader, c, seed)]
        return _positive_control(rows, c, ps)

    # a reader that answers from the documents matching the first name: about 1/(h+1) right, a first drop
    pc, nc = controls(_RuleReader(partial=True))
    assert pc["sensitive"] and pc["paired"]["difference"] > 0.2 and nc["holds_zero"]
    assert nc["method_values"] == pc["ablation_values"]
    # a reader that needs the full name finds nothing in either arm: the control fails, the negative holds
    pc, nc = controls(_RuleReader(partial=False))
    assert not pc["sensitive"] and pc["paired"]["difference"] == pytest.approx(0.0) and nc["holds_zero"]


def test_readout_analogue_clean_window_and_all_flipped():
    clean = readout_fidelity(0.0, seed=0, window=64, warmup=1500, test=800)
    flipped = readout_fidelity(1.0, seed=0, window=512, warmup=1500, test=800)
    assert clean > 0.9 and flipped < clean - 0.2
    with pytest.raises(ValueError, match="p:"):
        readout_fidelity(1.5, seed=0)


@pytest.mark.parametrize("argv, flag", [
    (["--docs", "1"], "--docs"), (["--hard-counts", "0,2,1"], "--hard-counts"), (["--hard-counts", "1,2"], "--hard-counts"),
    (["--subjects", "gpt"], "--subjects"), (["--filter-hard", "30"], "--filter-hard"),
    (["--seeds", "0"], "--seeds"), (["--filter-docs", "4"], "--filter-docs"), (["--filter-docs", "161"], "--filter-docs"),
    (["--docs", "20", "--hard-counts", "0,19"], "--hard-counts"),   # the control needs a free surname
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    out = tmp_path / "o"
    assert main(["ink", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert not out.exists()


def test_cli_quick_run(tmp_path):
    out = tmp_path / "ink"
    m = quick_run("ink", out, files=("metrics.json", "results.md", "contexts.csv", "curves.png", "filtering.png"))
    h = m["headline"]
    assert h["seeds"] == [0, 1] and LINEAR in h["baselines"]
    assert set(h["paired"]) == set(h["baselines"])   # every baseline has its paired difference over seeds
    for name, pair in h["paired"].items():
        assert pair["n"] >= 2 and pair["ci95"][0] <= pair["difference"] <= pair["ci95"][1], name
    # the quick run has no Gemma and an untrained tiny model: the headline falls back along the chain
    assert h["method"] in ("tiny: accuracy", "KAN readout learner (analogue): fidelity")
    # the positive control reads the tiny model, untrained at quick scale: it sees no first drop (the control
    # can fail). Its negative control is the positive control's ablation against no drop; whether that holds
    # zero here is the untrained model's (its key-seeded weights give the same small curvature on both seeds,
    # a zero-width interval), so what is checked is that the verdict is its interval's
    pc, nc = m["positive_control"], m["negative_control"]
    assert pc["method"] == "confusable" and pc["ablation"] == "filler" and len(pc["paired"]["ci95"]) == 2
    assert not pc["sensitive"] and nc["method_values"] == pc["ablation_values"]
    lo, hi = nc["paired"]["ci95"]
    assert nc["holds_zero"] == (lo <= 0 <= hi)
    assert set(m["first_drop"]["per_seed"]) >= {"tiny: accuracy", "tiny: p(gold)", "tiny: log p(gold)",
                                                "tiny: answer margin"}
    assert set(m["curves"]) == {"tiny", "learner"} and set(m["filtering"]["tiny"]) == {
        "none", "shorten", "swap-hard-to-easy", "drop-hard"}
    assert "paired_vs_none" in m["filtering"]["tiny"]["drop-hard"]
    assert m["attention"]["tiny"]   # attention shares were read
    shares = next(iter(m["attention"]["tiny"].values()))
    assert 0 <= shares["gold_total"] + shares["hard_total"] + shares["easy_total"] <= 1 + 1e-6
