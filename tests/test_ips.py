"""Interaction-based prompt sensitivity: the Harsanyi transform against brute force and planted
functions, the additive one-layer KAN oracle, the comparison scores, refusals, one --quick run."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods.ips.harsanyi import (compare, harsanyi, harsanyi_brute_force, popcount, reconstruct, salient,
                                         subset_masks)
from onchip.methods.ips.language import BASELINE, Review, polarity, sample_reviews, tiny_words
from onchip.methods.ips.learners import learner_spec, masked_outputs_raw, train_learner, with_formats


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _set_function(n, f):
    """v(T) = f(x_T) with x_T the 0/1 indicator of T (baseline 0, kept value 1)."""
    return np.array([f(row.astype(int)) for row in subset_masks(n)])


def test_harsanyi_equals_the_defining_sum_and_inverts():
    rng = np.random.default_rng(0)
    for n in (1, 3, 6):
        v = rng.normal(size=2 ** n)
        np.testing.assert_allclose(harsanyi(v), harsanyi_brute_force(v), atol=1e-12)
        np.testing.assert_allclose(reconstruct(harsanyi(v)), v, atol=1e-12)
    ints = rng.integers(-1000, 1000, size=(3, 2 ** 5))
    assert np.array_equal(harsanyi(ints), harsanyi_brute_force(ints))   # integers stay exact, batched


def test_efficiency_identity():
    """sum over all S of I(S) = v(N); I(empty) = v(empty); sum over S subset T of I(S) = v(T) for every T."""
    v = np.random.default_rng(1).normal(size=64)
    i = harsanyi(v)
    assert i.sum() == pytest.approx(v[63])
    assert i[0] == v[0]
    assert i[1:].sum() == pytest.approx(v[63] - v[0])
    for t in range(64):
        assert sum(i[s] for s in range(64) if s & t == s) == pytest.approx(v[t])


def test_planted_polynomials_give_exactly_their_monomials():
    # v = x1 * x2: exactly one interaction, of order 2, worth 1
    i = harsanyi(_set_function(4, lambda x: x[0] * x[1]))
    assert np.flatnonzero(i).tolist() == [0b0011] and i[0b0011] == 1
    # v = 2 x1 x2 + 3 x3 - x2 x3 x4 + 5: {1,2}: 2, {3}: 3, {2,3,4}: -1, empty: 5
    i = harsanyi(_set_function(4, lambda x: 2 * x[0] * x[1] + 3 * x[2] - x[1] * x[2] * x[3] + 5))
    assert {int(s): int(i[s]) for s in np.flatnonzero(i)} == {0: 5, 0b0011: 2, 0b0100: 3, 0b1110: -1}
    # an additive function has no interaction of order >= 2
    i = harsanyi(_set_function(6, lambda x: float(np.dot(x, [1, -2, 3, 0.5, 4, -1]))))
    assert np.all(i[popcount(np.arange(64)) >= 2] == 0)


def test_popcount_and_masks():
    assert popcount(np.array([0, 1, 3, 7, 0b101010])).tolist() == [0, 1, 2, 3, 3]
    m = subset_masks(3)
    assert m.shape == (8, 3) and m[0b101].tolist() == [True, False, True]
    with pytest.raises(ValueError, match="n:"):
        subset_masks(0)
    with pytest.raises(ValueError, match="values"):
        harsanyi(np.zeros(6))


def test_compare_hand_cases():
    a = np.zeros(8)
    a[[1, 2, 3]] = [1.0, 1.0, 1.0]
    same = compare(a, a)
    assert same.ips == 0 and same.n_unstable == 0 and same.n_salient == 3 and same.output_change == 0
    b = a.copy()
    b[3] = -1.0                       # the pair interaction changes sign; v(N) - v(empty) goes 3 -> 1
    c = compare(a, b)
    assert c.n_salient == 3 and c.n_unstable == 1 and c.unstable_share == pytest.approx(1 / 3)
    assert c.ips == pytest.approx(2 / 6) and c.ips_by_order[0] == 0 and c.ips_by_order[1] == 1
    assert c.output_change == pytest.approx(2 / 4)
    d = a.copy()
    d[3] = 0.05                       # below tau = 0.1 of the largest: salient in A only
    assert compare(a, d).n_unstable == 1
    assert salient(np.zeros(8), 0.1).sum() == 0
    with pytest.raises(ValueError, match="tau"):
        compare(a, b, tau=0)
    with pytest.raises(ValueError, match="div_b"):
        compare(a, b[:4])


# ------------------------------------------------------------------ the fixed-point learner oracle

EXACT = {"act": "ap_fixed<32,6,RND_CONV,SAT>"}        # 26 fractional bits = coef x basis products: no rounding
SATURATING = {"act": "ap_fixed<32,1,RND_CONV,SAT>"}   # output range [-1, 1): the sum saturates


@pytest.fixture(scope="module")
def kan1():
    spec = learner_spec("kan-1layer", 6)
    return spec, train_learner(spec, samples=3000, seed=0)


def test_one_layer_kan_has_no_interactions_of_order_two_or_more(kan1):
    spec, theta = kan1
    s, t = with_formats(spec, theta, EXACT)
    x = np.random.default_rng(3).uniform(-1.5, 1.5, size=(5, 6))
    raw = masked_outputs_raw(s, t, x)
    div = harsanyi(raw)
    order = popcount(np.arange(64))
    assert np.all(div[:, order >= 2] == 0), "an additive learner must have exactly zero higher-order interactions"
    assert np.any(div[:, order == 1] != 0)
    # efficiency on the learner: the dividends add up to the prediction
    assert np.array_equal(div.sum(1), raw[:, -1])


def test_one_layer_kan_rounding_bounds_and_saturation_creates_interactions(kan1):
    spec, theta = kan1
    x = np.random.default_rng(4).uniform(-1.5, 1.5, size=(5, 6))
    order = popcount(np.arange(64))
    div = harsanyi(masked_outputs_raw(spec, theta, x))    # base format: one rounding of the sum into act
    # order >= 2: only the rounding of the sum, |I(S)| <= 2**(|S|-1) LSB (2**|S| terms of at most 1/2 LSB)
    assert np.all(np.abs(div[:, order >= 2]) <= 2.0 ** (order[order >= 2] - 1))
    s, t = with_formats(spec, theta, SATURATING)
    sat = harsanyi(masked_outputs_raw(s, t, x))
    assert np.abs(sat[:, order >= 2]).max() * s.formats.act.lsb > 0.05   # real interactions, many LSB


def test_mlp_has_interactions_and_format_change_requantizes(kan1):
    spec = learner_spec("mlp", 6)
    theta = train_learner(spec, samples=2000, seed=1)
    s, t = with_formats(spec, theta, {"coef": "ap_fixed<12,4,RND_CONV,SAT>"})
    assert np.all(t % 1 == 0) and np.abs(t * s.formats.coef.lsb - theta * spec.formats.coef.lsb).max() <= 2 ** -9
    div = harsanyi(masked_outputs_raw(spec, theta, np.full((1, 6), 1.0)))
    assert np.abs(div[0, popcount(np.arange(64)) >= 2]).max() > 0


# ------------------------------------------------------------------ the sentiment language


def test_planted_rule_changes_masked_labels_only():
    from onchip.methods.ips.language import CONTROL_TEMPLATES, _training_text

    rng = np.random.default_rng(0)
    for r in sample_reviews(rng, 20):
        assert polarity(r.variables, 1) == polarity(r.variables)   # unmasked: the same label under the plant
    r = Review(("food", "staff", "room"), ("very", "not", "quite"), ("bad", "nice", "good"))
    masked = [w if k else BASELINE for w, k in zip(r.variables, [True, True, True, True, True, False])]
    assert polarity(masked) == -2 and polarity(masked, 1) == -1
    # the training text of the planted template follows the planted rule, the twin the language's
    labels = {"planted": [], "twin": []}
    for t, found in labels.items():
        g = np.random.default_rng(1)
        for _ in range(300):
            words = _training_text(g, [t], [1], 1.0, ("planted",)).split()
            assert " ".join(words[:2]) == CONTROL_TEMPLATES[t].split()[0] + " :"
            variables = [words[k + 1 + d] for k, w in enumerate(words) if w == "was" for d in (0, 1)]
            found.append((polarity(variables), polarity(variables, 1), words[-1]))
    assert all(("positive" if b > 0 else "negative") == w for a, b, w in labels["planted"])
    assert all(("positive" if a > 0 else "negative") == w for a, b, w in labels["twin"])
    assert any(a != b for a, b, w in labels["planted"])   # masked adjectives did occur


class _RuleModel:
    """A stand-in for the control's tiny model: its score is the rule's polarity, the planted rule on the
    ``planted`` template when ``planted``."""

    def __init__(self, planted):
        self.planted = planted


def _rule_scores(model, vocab, texts):
    out = []
    for text in texts:
        words = text.split()
        variables = [words[k + 1 + d] for k, w in enumerate(words) if w == "was" for d in (0, 1)]
        out.append(float(polarity(variables, int(model.planted and words[0] == "label"))))
    return np.array(out)


def test_control_is_decided_by_the_model_and_its_negative_holds_zero(monkeypatch):
    """Through the control's own code: a model that follows the planted rule is seen (positive control
    sensitive), one trained without it gives exactly the twin's IPS (negative control holds zero)."""
    from onchip.methods.ips import experiment, language

    monkeypatch.setattr(language, "train_control_tiny", lambda planted, **k: (_RuleModel(planted), None))
    monkeypatch.setattr(language, "tiny_scores", _rule_scores)
    c = experiment.IpsConfig(subjects=("tiny",), seeds=(0, 1, 2), reviews=6)
    rows = [r for s in c.seeds for r in experiment._control_pairs(c, s, sample_reviews(np.random.default_rng(s), 6))]
    pc, nc = experiment._controls(rows, c)
    assert pc["sensitive"] and pc["paired"]["difference"] > 0 and min(pc["method_values"]) > 0
    assert pc["ablation_values"] == [0.0] * 3   # the twin follows the language's rule: nothing changes
    assert nc["holds_zero"] and nc["method_values"] == nc["ablation_values"] == [0.0] * 3


def test_sentiment_rule_and_masking():
    r = Review(("food", "staff", "room"), ("not", "very", "quite"), ("good", "rude", "nice"))
    assert r.variables == ("not", "good", "very", "rude", "quite", "nice")
    assert polarity(r.variables) == -1 and r.label == 0
    assert polarity(("not", "bad", "very", "rude", "quite", "nice")) == 1
    masked = r.words([True, False] * 3)
    assert masked.count(BASELINE) == 3 and "good" not in masked
    # "not" masked: good no longer flipped (+1), rude (-1), nice (+1)
    assert polarity([w if k else BASELINE for w, k in zip(r.variables, [False, True] * 3)]) == 1
    text = tiny_words(r, "paraphrase", shots=[r])
    assert text.startswith("text : the food") and text.count("|") == 1 and text.endswith("label :")


# ------------------------------------------------------------------ command line


@pytest.mark.parametrize("argv, flag", [
    (["--tau", "0"], "--tau"), (["--shots", "0,5"], "--shots"), (["--subjects", "gpt"], "--subjects"),
    (["--seeds", "1,1"], "--seeds"), (["--reviews", "0"], "--reviews"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    out = tmp_path / "o"
    assert main(["ips", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert not out.exists()


def test_cli_quick_run(tmp_path):
    out = tmp_path / "ips"
    assert main(["ips", "--quick", "--seeds", "0,1", "--quiet", "--out", str(out)]) == 0
    for name in ("metrics.json", "results.md", "pairs.csv", "ips_by_order.png", "learners.png"):
        assert (out / name).is_file(), name
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert set(h) >= {"metric", "method", "value", "baselines", "budget", "seeds", "direction"}
    assert h["direction"] == "higher" and h["seeds"] == [0, 1] and 0 <= h["value"] <= 1
    assert {r["subject"] for r in m["summary"]} == {"tiny", "learners"}
    assert set(h["paired"]) == set(h["baselines"]) and all(len(p["ci95"]) == 2 for p in h["paired"].values())
    # the controls read tiny models trained for 16 steps: the planted rule is not learned, the positive control
    # sees nothing (it can fail) and the negative control holds zero
    pc, nc = m["positive_control"], m["negative_control"]
    assert pc["seeds"] == [0, 1] and len(pc["method_values"]) == 2 and len(pc["paired"]["ci95"]) == 2
    assert not pc["sensitive"] and nc["holds_zero"]
    assert "unstable_share_minus_answer_flip" in m["over_prompt_pairs"]
    text = (out / "results.md").read_text()
    assert "Positive control" in text and "Negative control" in text and "Paired difference" in text
    # the additive KAN: only rounding-sized interactions of order >= 2 in the base format
    assert m["kan_oracle"]["0"]["base"]["max_abs_order2plus_lsb"] <= 32
    assert m["command"].startswith("onchip ips --quick")
