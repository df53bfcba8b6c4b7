"""Human-likeness as a normalised distribution distance: metrics on hand-made cases, the
normalisation (random -> 0, identical -> 1), the fitted logit and the LM option scoring."""

from __future__ import annotations


import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from onchip.methods.humanlike import agents, metrics
from onchip.methods.humanlike.data import Mobility, Opinion, behaviour_of, load_mobility, load_opinion
from onchip.methods.humanlike.experiment import HumanlikeConfig, score_population
from method_support import assert_refused, quick_run


def _mobility(cost, time, wait=None, income=None, choice=None):
    cost = np.asarray(cost, float)
    n = len(cost)
    wait = np.zeros_like(cost) if wait is None else np.asarray(wait, float)
    time = np.asarray(time, float)
    return Mobility(cost=cost, time=time, wait=wait, gc=cost + 0.1 * (time + wait),
                    income=np.asarray(income if income is not None else [30.0] * n, float), party=np.ones(n),
                    choice=np.asarray(choice if choice is not None else [0] * n))


def _opinion(rows):
    b = np.asarray(rows)
    n = len(b)
    return Opinion(age=np.full(n, 40.0), educ=np.full(n, 3), income=np.arange(1, n + 1), popul=np.full(n, 10.0),
                   tvnews=np.full(n, 2), party=b[:, 0], ideology=b[:, 1], vote=b[:, 2]), b


# ---------------------------------------------------------------- metrics on hand-made cases


def test_mobility_metrics_by_hand():
    # traveller 0: air cheapest and fastest -> car is dominated; traveller 1: a genuine cost/time trade-off
    s = _mobility(cost=[[10, 20, 30, 40], [50, 30, 20, 10]], time=[[60, 120, 180, 240], [60, 120, 180, 240]],
                  income=[20.0, 50.0])
    choice = np.array([3, 2])
    # gc = cost + time/10: t0 [16, 32, 48, 64] -> car rank 3; t1 [56, 42, 38, 34] -> bus rank 1
    np.testing.assert_array_equal(metrics.gc_rank(s, choice), [3, 1])
    np.testing.assert_array_equal(metrics.dominated(s, choice), [1, 0])
    np.testing.assert_array_equal(metrics.dominated(s, np.array([0, 0])), [0, 0])
    np.testing.assert_array_equal(metrics.mode_by_income(s, choice), [0 * 4 + 3, 2 * 4 + 2])
    # equal cost and time is not dominance
    tie = _mobility(cost=[[10, 10, 30, 40]], time=[[60, 60, 180, 240]])
    np.testing.assert_array_equal(metrics.dominated(tie, np.array([1])), [0])


def test_neighbour_agreement_by_hand():
    # two pairs of near-identical travellers: 0~1 and 2~3
    base = np.array([[10, 20, 30, 40]], float)
    s = _mobility(cost=np.vstack([base, base + 0.1, base * 5, base * 5 + 0.1]), time=np.vstack([base * 6] * 2 + [base * 30] * 2),
                  income=[20.0, 20.1, 60.0, 60.1])
    np.testing.assert_array_equal(metrics.neighbour_agreement(s, np.array([0, 0, 1, 2])), [1, 1, 0, 0])


def test_opinion_metrics_by_hand():
    s, b = _opinion([[0, 0, 0],   # Democrat liberal Clinton: ideological and party vote
                     [2, 2, 0],   # Republican conservative Clinton: neither
                     [1, 1, 1],   # Independent moderate: neither metric applies
                     [2, 0, 1]])  # Republican liberal Dole: party yes, ideology no
    np.testing.assert_array_equal(metrics.ideological_vote(s, b), [1, 0, -1, 0])
    np.testing.assert_array_equal(metrics.party_vote(s, b), [1, 0, -1, 1])
    np.testing.assert_array_equal(metrics.party_ideology(s, b), [0, 8, 4, 6])
    np.testing.assert_array_equal(metrics.profile(s, b), [0, 16, 9, 13])
    np.testing.assert_allclose(metrics.histogram(metrics.party_vote(s, b), 2), [1 / 3, 2 / 3])


def test_distances_by_hand_and_against_scipy():
    p, q = np.array([0.5, 0.5, 0, 0]), np.array([0, 0.5, 0, 0.5])
    assert metrics.total_variation(p, q) == pytest.approx(0.5)
    assert metrics.wasserstein_ordinal(p, q) == pytest.approx(0.5 * 1 + 0.5 * 2)  # mass 0.5 moves 0->1... net 1.5
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        assert metrics.wasserstein_ordinal(a, b) == pytest.approx(wasserstein_distance(np.arange(6), np.arange(6), a, b))
    with pytest.raises(ValueError, match="outside the support"):
        metrics.histogram(np.array([0, 4]), 4)
    with pytest.raises(ValueError, match="no person"):
        metrics.histogram(np.array([-1, -1]), 2)


# ---------------------------------------------------------------- normalisation


def test_normalisation_identical_zero_split_half_one():
    assert metrics.normalised_distance(0.0, 0.3) == 0.0
    assert metrics.normalised_distance(0.3, 0.3) == 1.0
    assert metrics.normalised_distance(0.6, 0.3) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="d_split"):
        metrics.normalised_distance(0.1, 0.0)
    # planted: the agent reproduces the reference humans exactly -> every metric scores exactly 0;
    # its distance equals the split-half distance -> exactly 1
    for domain, data in (("mobility", load_mobility().subset(np.arange(60))), ("opinion", load_opinion().subset(np.arange(80)))):
        b = behaviour_of(domain, data)
        reference = {m.name: metrics.histogram(m.values(data, b), m.support) for m in metrics.metrics_of(domain)}
        floor = {m.name: 0.1 for m in metrics.metrics_of(domain)}
        assert {r["score"] for r in score_population(domain, b, data, reference, floor).values()} == {0.0}
        fake = np.random.default_rng(2).integers(0, 2, size=b.shape)
        planted = {m.name: metrics.distance(m, metrics.histogram(m.values(data, fake), m.support), reference[m.name])
                   for m in metrics.metrics_of(domain) if m.name != "ideological_vote" or (fake[:, 1] != 1).any()}
        scores = score_population(domain, fake, data, reference, planted)
        assert all(r["score"] == pytest.approx(1.0) for r in scores.values())


def test_split_half_distance_is_the_sampling_floor():
    """Two halves of the same people differ only by sampling: the floor shrinks with the group size
    (about 1/sqrt(n)), and a population answering alike has no floor (refused as a normaliser)."""
    o = load_opinion()
    b = behaviour_of("opinion", o)
    small = metrics.split_half_distance("opinion", o, b, 60, 60, 100, np.random.default_rng(0))
    large = metrics.split_half_distance("opinion", o, b, 472, 472, 100, np.random.default_rng(0))
    for name in small:
        assert 0 < large[name] < 0.7 * small[name], name
    alike = metrics.split_half_distance("opinion", o, np.zeros_like(b), 100, 100, 5, np.random.default_rng(0))
    assert alike["party_share"] == 0.0
    with pytest.raises(ValueError, match="d_split"):
        metrics.normalised_distance(0.2, alike["party_share"])
    with pytest.raises(ValueError, match="n_reference"):
        metrics.split_half_distance("opinion", o, b, 600, 400, 1, np.random.default_rng(0))


def test_near_human_generator_nests_the_noise():
    g = np.random.default_rng(0)
    humans = g.integers(0, 3, (500, 3))
    u, repl = g.random(humans.shape), g.integers(0, 3, humans.shape)
    np.testing.assert_array_equal(agents.near_human_behaviour(humans, 0.0, u, repl), humans)
    np.testing.assert_array_equal(agents.near_human_behaviour(humans, 1.0, u, repl), repl)
    changed = [agents.near_human_behaviour(humans, x, u, repl) != humans for x in (0.1, 0.3, 0.6)]
    assert (changed[0] <= changed[1]).all() and (changed[1] <= changed[2]).all()
    # about x of the answers are redrawn, 2/3 of those land on another answer
    assert abs(changed[1].mean() - 0.3 * 2 / 3) < 0.03
    with pytest.raises(ValueError, match="^x:"):
        agents.near_human_behaviour(humans, 1.5, u, repl)


# ---------------------------------------------------------------- generators


def test_conditional_logit_recovers_planted_parameters():
    rng = np.random.default_rng(0)
    n = 4000
    s = _mobility(cost=rng.uniform(5, 150, (n, 4)), time=rng.uniform(60, 900, (n, 4)), wait=rng.uniform(0, 60, (n, 4)),
                  income=rng.uniform(5, 80, n))
    theta = np.array([0.5, -0.3, 0.2, -2.0, -0.4, -1.5, 1.0, 0.0, -1.0])
    choice = agents.ConditionalLogit(theta).sample(s, rng)
    fit = agents.ConditionalLogit().fit(Mobility(**{**s.__dict__, "choice": choice}))
    np.testing.assert_allclose(fit.theta, theta, atol=0.35)
    np.testing.assert_allclose(fit.probs(s).sum(1), 1.0)


def test_utility_maximiser_and_random_agent():
    s = _mobility(cost=[[10, 20, 30, 40], [50, 30, 20, 10]], time=[[60, 120, 180, 240]] * 2)
    np.testing.assert_array_equal(agents.utility_behaviour("mobility", s, s), [0, 3])
    o, _ = _opinion([[0, 0, 0]] * 4)  # incomes 1..4, median 2.5
    np.testing.assert_array_equal(agents.utility_behaviour("opinion", o, o), [[0, 0, 0], [0, 0, 0], [2, 2, 1], [2, 2, 1]])
    b = agents.random_behaviour("opinion", o, np.random.default_rng(0))
    assert b.shape == (4, 3) and b[:, 2].max() <= 1 and b.max() <= 2


class _FakeLM:
    """next_token_logprobs returns planted log-probabilities; the tokenizer maps words to fixed ids."""

    class _Tok:
        ids = {" air": [5], " train": [6], " two words": [7, 8]}

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": self.ids[text]}

    tokenizer = _Tok()

    def next_token_logprobs(self, prompts):
        out = np.full((len(prompts), 10), -50.0)
        for i, p in enumerate(prompts):
            out[i, 5], out[i, 6] = np.log(0.2), np.log(0.6 if p == "a" else 0.05)
        return out


def test_lm_option_probs_renormalise_over_the_options():
    p = agents.lm_option_probs(_FakeLM(), ["a", "b"], [" air", " train"], batch_size=1)
    np.testing.assert_allclose(p, [[0.25, 0.75], [0.8, 0.2]])
    with pytest.raises(ValueError, match="one distinct token"):
        agents.lm_option_probs(_FakeLM(), ["a"], [" air", " two words"])


def test_prompts_carry_the_persona_and_options():
    m, o = load_mobility(), load_opinion()
    p = agents.mobility_prompt(m, 0)
    assert "income 35k AUD" in p and "air 59 AUD 169 min" in p and p.endswith("went by")
    q = agents.opinion_prompts(o, 0)
    assert len(q) == 3 and all("age 36" in x and "income under $3k" in x for x in q)


# ---------------------------------------------------------------- configuration and command line


@pytest.mark.parametrize("kwargs, field", [({"agents": ("humans", "nobody")}, "agents"), ({"seeds": ()}, "seeds"),
                                           ({"n_opinion": 0}, "n_opinion"), ({"n_mobility": 106}, "n_mobility"),
                                           ({"split_half_draws": 0}, "split_half_draws"),
                                           ({"seeds": (0,)}, "seeds"), ({"noise_levels": (0.1, 0.25)}, "noise_levels"),
                                           ({"noise_levels": (0.0, 0.5, 0.25)}, "noise_levels")])
def test_config_refuses_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        HumanlikeConfig(**kwargs)


@pytest.mark.parametrize("flags, name", [(["--n-opinion", "0"], "--n-opinion"), (["--agents", "lm,oracle"], "--agents"),
                                         (["--seeds", "-1"], "--seeds"), (["--n-mobility", "1"], "--n-mobility")])
def test_cli_refuses_bad_arguments(tmp_path, capsys, flags, name):
    assert_refused("humanlike", ["--quick", *flags], name, tmp_path / "hl", capsys)


def test_cli_quick_writes_metrics_and_headline(tmp_path):
    out = tmp_path / "hl"
    m = quick_run("humanlike", out)
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "scores.png", "metrics.png", "noise.png"}
    h = m["headline"]
    assert h["direction"] == "lower" and h["seeds"] == [0, 1, 2] and "held-out humans" in h["baselines"]
    assert h["budget"]["scenarios_per_seed"] == {"mobility": 105, "opinion": 60}
    assert "lm" not in m["config"]["agents"]
    assert set(h["paired"]) == set(h["baselines"]) and all(len(p["ci95"]) == 2 for p in h["paired"].values())
    pc = m["positive_control"]
    assert pc["ablation"] == "held-out humans (0% noise)" and len(pc["method_values"]) == 3
    # the near-human ladder: full noise is farther from the humans than none on every seed,
    # and the held-out humans sit near the split-half floor, far below the random agent
    per = m["noise_ladder"]["per_seed"]
    assert all(hi > lo for hi, lo in zip(per["1.0"], per["0.0"]))
    s = m["summary"]["overall"]
    assert s["humans"]["mean"] < 2.0 < s["random"]["mean"]
