"""TAPC (task-aware preference calibration for DPO): the losses against hand computation, the
calibration map, the look-ahead hypergradient against brute force, the synthetic world, the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from onchip.methods._tiny import TinyConfig, TinyTransformer, Vocab, sequence_logprob
from onchip.methods.tapc import losses, world
from onchip.methods.tapc.experiment import TapcConfig
from onchip.methods.tapc.train import (answer_logprob, auc, lookahead_hypergradient, margins,
                                       tensorise)
from method_support import assert_refused, quick_run


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors are tiny; one torch thread avoids thread hand-off stalls on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _sp(z):  # -log sigmoid(z)
    return math.log1p(math.exp(-z))


# ---------------------------------------------------------------- losses


def test_margin_and_dpo_loss_by_hand():
    h = losses.margin(torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -1.0]), torch.tensor([-1.5, -2.0]),
                      torch.tensor([-1.5, -2.0]))
    torch.testing.assert_close(h, torch.tensor([1.0, -2.0]))  # (-1+1.5)-(-2+1.5) = 1; (-3+2)-(-1+2) = -2
    expected = (_sp(0.5 * 1.0) + _sp(0.5 * -2.0)) / 2
    assert float(losses.dpo_loss(h, 0.5)) == pytest.approx(expected, rel=1e-6)


def test_soft_label_dpo_reduces_to_dpo():
    h = torch.tensor([0.7, -1.3, 2.0, 0.0])
    torch.testing.assert_close(losses.soft_dpo_loss(h, torch.ones(4), 0.8), losses.dpo_loss(h, 0.8))
    torch.testing.assert_close(losses.soft_dpo_loss(h, torch.zeros(4), 0.8), losses.dpo_loss(-h, 0.8))
    c = torch.tensor([0.9, 0.2, 0.5, 0.7])
    expected = np.mean([ci * _sp(0.8 * hi) + (1 - ci) * _sp(-0.8 * hi) for ci, hi in zip(c.tolist(), h.tolist())])
    assert float(losses.soft_dpo_loss(h, c, 0.8)) == pytest.approx(expected, rel=1e-6)
    torch.testing.assert_close(losses.cdpo_loss(h, 0.8, 0.1), losses.soft_dpo_loss(h, torch.full((4,), 0.9), 0.8))


def test_rdpo_formula_and_unbiasedness():
    h, beta, eps = torch.tensor([1.0, -0.5]), 1.0, 0.2
    expected = np.mean([((1 - eps) * _sp(beta * x) - eps * _sp(-beta * x)) / (1 - 2 * eps) for x in h.tolist()])
    assert float(losses.rdpo_loss(h, beta, eps)) == pytest.approx(expected, rel=1e-6)
    # Chowdhury et al. 2024, Lemma 3.1: averaged over a flip with probability eps it is the clean loss
    for x in (torch.tensor([0.3]), torch.tensor([-2.0]), torch.tensor([5.0])):
        mixed = (1 - eps) * losses.rdpo_loss(x, beta, eps) + eps * losses.rdpo_loss(-x, beta, eps)
        torch.testing.assert_close(mixed, losses.dpo_loss(x, beta))
    torch.testing.assert_close(losses.rdpo_loss(h, beta, 0.0), losses.dpo_loss(h, beta))
    with pytest.raises(ValueError, match="eps"):
        losses.rdpo_loss(h, beta, 0.5)


def test_calibration_map_by_hand():
    feats = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    weight = torch.tensor([[2.0, 0.5], [-1.0, 0.1]])
    bias = torch.tensor([0.0, 0.2])
    d = torch.tensor([1.0, 2.0])
    c = losses.calibrated_confidence(d, feats, weight, bias)
    # task 0: a = 2, b = 0.7 -> sigmoid(2.7); task 1: a = -1, b = 0.3 -> sigmoid(-1.7)
    torch.testing.assert_close(c, torch.sigmoid(torch.tensor([2.7, -1.7])))
    # uniform calibration: a ones column, one slope and bias for every prompt
    cu = losses.calibrated_confidence(d, torch.ones(2, 1), torch.tensor([[1.5, -0.5]]), torch.zeros(2))
    torch.testing.assert_close(cu, torch.sigmoid(1.5 * d - 0.5))


def test_planted_flips_make_d_misleading_on_creative_pairs_only():
    from onchip.methods.tapc.world import planted_flips

    r = np.random.default_rng(0)
    task = np.repeat([0, 1], 200)
    d = r.normal(size=400)
    swap = planted_flips(task, d, 0.3, np.random.default_rng(1))
    assert swap[task == 0].sum() == 60 and swap[task == 1].sum() == 60
    assert (d[swap & (task == 1)] < 0).all()  # creative flips only where the swap makes the reference agree
    with pytest.raises(ValueError, match="rate"):
        planted_flips(task, d, 0.5, r)


def test_normalise_scales_d_and_whitens_the_encoding():
    from onchip.methods.tapc import train as tr

    g = torch.Generator().manual_seed(0)
    n = 50
    pt = tr.PairTensors(*(torch.zeros(n, 4, dtype=torch.long) for _ in range(2)), *(torch.zeros(n) for _ in range(4)),
                        3.0 * torch.randn(n, generator=g), 5.0 * torch.randn(n, 64, generator=g) + 2.0,
                        np.zeros(n, int), np.ones(n, int))
    (out,) = tr.normalise(pt)
    assert float(out.d.std()) == pytest.approx(1.0, abs=1e-5) and out.feats.shape == (n, tr.ENCODING_DIMS)
    cov = torch.cov(out.feats.T)
    assert torch.allclose(cov, torch.eye(tr.ENCODING_DIMS), atol=1e-4)
    assert torch.equal(pt.d, pt.d)  # the input is untouched
    passes = tr.policy_passes("tapc", tr.ArmSettings(steps=10, batch=8, meta_batch=4), 100)
    assert passes == {"forward": 10 * (16 + 16 + 8 + 32), "backward": 10 * (16 + 16 + 8), "meta_forward": 10 * 56}
    assert tr.policy_passes("dpo", tr.ArmSettings(steps=10, batch=8), 100)["meta_forward"] == 0
    assert tr.compute_ratio(tr.ArmSettings(), 64) == 5  # (64 + 64 + 64 + 128) / 64 at the defaults


def test_auc_by_hand():
    assert auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert auc([1, 1], [1, 0]) == 0.5
    assert math.isnan(auc([1, 2], [1, 1]))


# ---------------------------------------------------------------- world and tensors


def test_world_pairs_and_flips():
    rng = np.random.default_rng(0)
    w = world.make_world(rng)
    train = world.make_pairs(w, rng, 50, held_out=False)
    held = world.make_pairs(w, rng, 30, held_out=True)
    assert train.n == 100 and (train.task == 0).sum() == 50 and train.correct.all()
    ents = {p for p, t in zip(train.prompt, train.task) if t == 0}
    assert not ents & {p for p, t in zip(held.prompt, held.task) if t == 0}
    cliches = {world.phrase(c) for c in w.cliches}
    for p, ch, rj, t in zip(train.prompt, train.chosen, train.rejected, train.task):
        if t == 0:
            assert ch == f"c{w.capital[int(p.split()[3][1:])]}" and rj != ch
        else:
            assert ch not in cliches and (rj in cliches or rj.startswith("n"))
    noisy = world.flip(train, 0.3, rng)
    assert (noisy.correct == 0).sum() == 30
    for i in range(noisy.n):
        assert (noisy.chosen[i], noisy.rejected[i]) == ((train.chosen[i], train.rejected[i]) if noisy.correct[i]
                                                        else (train.rejected[i], train.chosen[i]))


def _tiny_setup(seed=0, n=6, dtype=torch.float32):
    rng = np.random.default_rng(seed)
    w = world.make_world(rng)
    vocab = Vocab(world.words())
    torch.manual_seed(seed)
    model = TinyTransformer(TinyConfig(vocab=len(vocab), d_model=16, n_layers=1, n_heads=2, max_len=10)).to(dtype)
    model.eval()
    pairs = world.flip(world.make_pairs(w, rng, n // 2, held_out=False), 0.34, rng)
    return model, vocab, pairs


def test_perplexity_differential_and_logprobs_by_hand():
    model, vocab, pairs = _tiny_setup()
    t = tensorise(pairs, vocab, model, 10)
    for i in range(pairs.n):
        lp = []
        for ans in (pairs.chosen[i], pairs.rejected[i]):
            ids = torch.tensor([vocab.encode(f"{pairs.prompt[i]} {ans}", bos=True, eos=True)])
            start = len(pairs.prompt[i].split()) + 1
            with torch.no_grad():
                lp.append((float(sequence_logprob(model, ids, [start])[0]), len(ans.split()) + 1))  # answer + <eos>
        assert float(t.ref_w[i]) == pytest.approx(lp[0][0], abs=1e-5)
        assert float(t.d[i]) == pytest.approx(-lp[1][0] / lp[1][1] + lp[0][0] / lp[0][1], abs=1e-5)
    # the policy equal to the reference has zero margins; swapping twice is the identity
    assert torch.count_nonzero(margins(model, t)) == 0
    back = t.swapped(np.ones(len(t), bool)).swapped(np.ones(len(t), bool))
    assert torch.equal(back.ids_w, t.ids_w) and torch.equal(back.d, t.d)
    clean = t.swapped(t.correct == 0)
    assert clean.correct.all()


def test_lookahead_hypergradient_against_brute_force():
    """dL_clean(theta - alpha grad L_soft(theta; c)) / dc_i by central differences in c (float64)."""
    model, vocab, pairs = _tiny_setup(seed=1, n=6, dtype=torch.float64)
    _, _, meta_pairs = _tiny_setup(seed=2, n=4, dtype=torch.float64)
    ref = TinyTransformer(model.config).to(torch.float64)
    ref.eval()
    b, meta = tensorise(pairs, vocab, ref, 10), tensorise(meta_pairs, vocab, ref, 10)
    c = torch.tensor([0.9, 0.2, 0.6, 0.5, 0.3, 0.8], dtype=torch.float64)
    alpha, beta = 0.5, 0.7
    got = lookahead_hypergradient(model, b, meta, c, alpha=alpha, beta=beta, fd_step=1e-5)
    names = [n for n, _ in model.named_parameters()]
    theta = {n: p.detach() for n, p in model.named_parameters()}

    def clean_after_step(cv):
        live = {n: p.clone().requires_grad_(True) for n, p in theta.items()}
        g = torch.autograd.grad(losses.soft_dpo_loss(margins(model, b, live), cv, beta), [live[n] for n in names])
        ahead = {n: theta[n] - alpha * gi for n, gi in zip(names, g)}
        return float(losses.dpo_loss(margins(model, meta, ahead), beta))

    for i in range(len(c)):
        e = torch.zeros_like(c)
        e[i] = 1e-4
        brute = (clean_after_step(c + e) - clean_after_step(c - e)) / 2e-4
        assert float(got[i]) == pytest.approx(brute, rel=1e-3, abs=1e-9)


def test_answer_logprob_with_substituted_parameters():
    model, vocab, pairs = _tiny_setup()
    t = tensorise(pairs, vocab, model, 10)
    params = {n: p.detach() * 1.0 for n, p in model.named_parameters()}
    torch.testing.assert_close(answer_logprob(model, t.ids_w, t.start_w, params), answer_logprob(model, t.ids_w, t.start_w))


# ---------------------------------------------------------------- configuration and command line


@pytest.mark.parametrize("kwargs, field", [({"arms": ("dpo", "ppo")}, "arms"), ({"noise": 0.5}, "noise"),
                                           ({"seeds": ()}, "seeds"), ({"steps": 0}, "steps"), ({"beta": 0.0}, "beta"),
                                           ({"batch": 1000, "n_train": 8}, "batch"), ({"alpha": 0.0}, "alpha"),
                                           ({"meta_steps": 0}, "meta_steps"),
                                           ({"seeds": (0,), "control": True}, "seeds")])
def test_config_refuses_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        TapcConfig(**kwargs)


@pytest.mark.parametrize("flags, name", [(["--noise", "0.5"], "--noise"), (["--arms", "dpo,ppo"], "--arms"),
                                         (["--steps", "0"], "--steps"), (["--seeds", "x"], "--seeds")])
def test_cli_refuses_bad_arguments(tmp_path, capsys, flags, name):
    assert_refused("tapc", ["--quick", *flags], name, tmp_path / "tapc", capsys)


def test_cli_quick_writes_metrics_and_headline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "tapc"
    m = quick_run("tapc", out)
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "accuracy.png", "calibration.png"}
    h = m["headline"]
    assert "std" in h
    assert h["method"] == "TAPC" and h["direction"] == "higher" and len(h["baselines"]) == 8
    assert set(m["summary"]["d_auc"]) == {"factual", "creative"}
    for arm in m["config"]["arms"]:
        assert 0 <= m["summary"]["accuracy"][arm]["creative"]["mean"] <= 1
    assert h["seeds"] == [0, 1] and set(h["paired"]) == set(h["baselines"])
    assert all(len(p["ci95"]) == 2 and p["n"] == 2 for p in h["paired"].values())
    pc = m["positive_control"]
    assert pc["method"] == "TAPC" and pc["ablation"] == "uniform calibration" and len(pc["paired"]["ci95"]) == 2
    assert len(pc["method_values"]) == len(pc["ablation_values"]) == 2 and "oracle" in pc
    forwards = h["budget"]["policy_sequence_forwards"]
    assert forwards["TAPC"] > forwards["DPO"]  # the look-ahead meta-steps are counted
    assert forwards["DPO, equal forwards"] >= forwards["TAPC"] and forwards["rDPO, equal forwards"] >= forwards["TAPC"]
    assert "Positive control" in (out / "results.md").read_text()
