"""FedSPA (federated semantic prototype alignment) and its baselines: checks against known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods._scores import accuracy
from onchip.methods.fedspa import CLASSES, data, federated as fd
from method_support import assert_refused


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors are tiny; one torch thread avoids thread hand-off stalls on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- the mechanism's computations


def test_info_nce_matches_hand_computation():
    """Two pairs in 2-D, tau = 0.5: logits = cos / tau, loss = mean over rows of -log softmax at the diagonal."""
    q = torch.tensor([[2.0, 0.0], [0.0, 3.0]])  # normalised: e1, e2
    k = torch.tensor([[1.0, 1.0], [0.0, -1.0]])  # normalised: (1, 1)/sqrt2, -e2
    c = 1 / math.sqrt(2)
    # row 0: logits (c, 0) / 0.5 -> (2c, 0); row 1: (c, -1) / 0.5 -> (2c, -2)
    l0 = -(2 * c - math.log(math.exp(2 * c) + 1.0))
    l1 = -(-2 - math.log(math.exp(2 * c) + math.exp(-2)))
    assert float(fd.info_nce(q, k, tau=0.5)) == pytest.approx((l0 + l1) / 2, rel=1e-6)


def test_tip_logits_formula():
    f = torch.tensor([[1.0, 0.0]])
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    out = fd.tip_logits(f, w, p, alpha=2.0, beta=3.0)
    # class 0: 100 * 1 + 2 exp(-3 (1 - 0)); class 1: 0 + 2 exp(0)
    assert out.tolist()[0] == pytest.approx([100 + 2 * math.exp(-3), 2.0])


def test_server_alignment_pulls_semantic_prototypes_to_uploads_and_lambda_holds_them_at_the_text():
    """With lam = 0 each semantic prototype turns toward the uploads of its own class and away from the
    others' (InfoNCE only needs it relatively closer: it stops once the softmax saturates); with a large
    lam the prototypes stay nearer the text features."""
    rng = np.random.default_rng(0)
    text = np.eye(3, 8, dtype=np.float32)
    target = np.eye(3, 8, k=3, dtype=np.float32)  # uploads point elsewhere, one per class
    uploads = np.repeat(target, 4, 0) + 0.01 * rng.normal(size=(12, 8)).astype(np.float32)
    labels = np.repeat(np.arange(3), 4)
    free = fd.server_align(text, text, uploads, labels, fd.ServerRecipe(epochs=60, lr=5e-2, lam=0.0, batch=12),
                           np.random.default_rng(1))
    held = fd.server_align(text, text, uploads, labels, fd.ServerRecipe(epochs=60, lr=5e-2, lam=50.0, batch=12),
                           np.random.default_rng(1))
    assert np.allclose(np.linalg.norm(free, axis=1), 1.0, atol=1e-5)
    cos = free @ target.T  # (class, upload class)
    assert (np.diag(cos) > 0.1).all() and (np.diag(cos)[:, None] > cos + 0.2 - np.eye(3)).all()
    assert (held * text).sum(1).min() > (free * text).sum(1).max()


def test_fallback_rule_on_a_planted_disagreement():
    """Client 1's prototypes point away from the global ones: only it falls back (mean cosine < 0.5)."""
    w = np.eye(6)
    agree = (w[[0, 2]] + 0.1, np.array([0, 2]))
    disagree = (np.stack([w[1] + w[3] * 2.0, -w[2]]), np.array([1, 2]))  # cosines 1/sqrt5 and -1 -> mean < 0.5
    borderline = (np.stack([w[0] + w[5] * 1.0]), np.array([0]))  # cosine 1/sqrt2 = 0.707 -> keeps W
    assert fd.disagreeing_clients([agree, disagree, borderline], w, 0.5) == {1}
    assert fd.disagreeing_clients([agree, disagree, borderline], w, 0.75) == {1, 2}


def test_client_cosines_and_quantile_threshold():
    """Cosines by hand; the quantile threshold sends back exactly the planted share of clients; quantile 0 is off."""
    w = np.eye(4)
    ups = [(np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 3.0]]), np.array([0, 1])),  # cosines 1 and 1/sqrt2
           (np.zeros((0, 4)), np.zeros(0, np.int64)),  # uploaded nothing
           (np.array([[0.0, 0.0, -2.0, 0.0]]), np.array([2]))]  # cosine -1
    cos = fd.client_cosines(ups, w)
    assert cos[0] == pytest.approx((1 + 1 / math.sqrt(2)) / 2) and math.isnan(cos[1]) and cos[2] == pytest.approx(-1)
    ten = np.linspace(0.1, 1.0, 10)
    # numpy's linear quantile at 0.2 of ten values lies between the 2nd and 3rd: exactly two fall below
    t = fd.fallback_threshold(ten, 0.2)
    assert 0.2 < t < 0.3 and (ten < t).sum() == 2
    assert fd.fallback_threshold(ten, 0.0) == -math.inf
    assert fd.fallback_threshold(np.array([np.nan, 0.3, 0.9]), 0.5) == pytest.approx(0.6)  # NaN ignored
    assert fd.disagreeing_clients(ups, w, fd.fallback_threshold(cos, 0.0)) == set()
    assert fd.disagreeing_clients(ups, w, fd.fallback_threshold(cos, 0.4)) == {2}  # the empty client never
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="fallback_quantile"):
            fd.fallback_threshold(ten, bad)


def test_swap_text_rows_swaps_pairs_and_keeps_the_rest():
    from onchip.methods.fedspa.experiment import swap_text_rows

    text = np.arange(36 * 3, dtype=np.float32).reshape(36, 3)
    out, idx = swap_text_rows(text, 0.5, np.random.default_rng(0))
    assert len(idx) == 18 == len(set(idx))
    for a, b in zip(idx[0::2], idx[1::2]):
        assert (out[a] == text[b]).all() and (out[b] == text[a]).all()
    rest = sorted(set(range(36)) - set(idx))
    assert (out[rest] == text[rest]).all() and (text == np.arange(36 * 3).reshape(36, 3)).all()
    assert len(swap_text_rows(text, 0.01, np.random.default_rng(0))[1]) == 2
    with pytest.raises(ValueError, match="control_swap"):
        swap_text_rows(text, 0.0, np.random.default_rng(0))


def test_fedavg_weights_by_counts_and_keeps_unseen_classes():
    prev = np.full((3, 2), 7.0, np.float32)
    ups = [(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 1]), np.array([1, 3])),
           (np.array([[3.0, 0.0]]), np.array([0]), np.array([3]))]
    out = fd.fedavg_prototypes(ups, prev)
    assert out.tolist() == [[2.5, 0.0], [0.0, 1.0], [7.0, 7.0]]


def test_class_means_fall_back_to_text_rows():
    f = np.array([[1.0, 0.0], [3.0, 2.0], [0.0, 5.0]], np.float32)
    out = fd.class_means(f, np.array([0, 0, 2]), np.full((3, 2), -1.0, np.float32))
    assert out.tolist() == [[2.0, 1.0], [-1.0, -1.0], [0.0, 5.0]]


def test_local_training_only_changes_prototypes_and_fits_planted_classes():
    """Features at two orthogonal directions, semantic weights useless (zeros): training the prototypes
    alone must separate the classes."""
    rng = np.random.default_rng(0)
    f = np.repeat(np.eye(2, 4, dtype=np.float32), 8, 0)
    y = np.repeat([0, 1], 8)
    sem = np.zeros((2, 4), np.float32)
    start = np.full((2, 4), 0.5, np.float32)
    p, seconds = fd.train_prototypes(start, sem, f, y, fd.LocalRecipe(epochs=40, lr=5e-2), rng)
    acc = accuracy(fd.tip_logits(torch.as_tensor(f), torch.as_tensor(sem), torch.as_tensor(p), 6.0, 3.0), y)
    assert acc == 1.0 and seconds > 0 and np.array_equal(start, np.full((2, 4), 0.5))


# ---------------------------------------------------------------- data


def test_dirichlet_skew_sizes_and_concentration():
    rng = np.random.default_rng(0)
    avail = np.arange(10)
    for alpha in (0.01, 1.0, 1e4):
        q = data.dirichlet_proportions(avail, alpha, rng)
        assert q.shape == (len(CLASSES),) and q[10:].sum() == 0 and q.sum() == pytest.approx(1.0)
        y = data.skewed_labels(40, q, rng)
        assert len(y) == 40 and set(y) <= set(avail)
    # concentration: tiny alpha -> one class takes nearly all; huge alpha -> near uniform
    tops_small = [data.dirichlet_proportions(avail, 0.01, rng).max() for _ in range(50)]
    tops_large = [data.dirichlet_proportions(avail, 1e4, rng).max() for _ in range(50)]
    assert np.median(tops_small) > 0.9 and max(tops_large) < 0.12
    with pytest.raises(ValueError, match="alpha"):
        data.dirichlet_proportions(avail, 0.0, rng)


def test_skewed_labels_never_leave_a_client_empty_of_its_main_class():
    q = np.zeros(36)
    q[[3, 5]] = [0.99, 0.01]
    rng = np.random.default_rng(1)
    for n in (1, 2, 5):
        y = data.skewed_labels(n, q, rng)
        assert len(y) == n and 3 in y


def test_rendering_domains_and_handwriting_pool():
    rng = np.random.default_rng(0)
    x = data.draw("cmr10", [0, 10, 35], rng)
    assert x.shape == (3, 256) and 0 <= x.min() and x.max() <= 1 and (x.sum(1) > 5).all()
    # the same class in two fonts differs, two draws of one font differ (jitter)
    a, b = data.draw("DejaVuSans", [12], rng), data.draw("cmtt10", [12], rng)
    assert np.abs(a - b).sum() > 1
    with pytest.raises(ValueError, match="mnist shows digits only"):
        data.draw("mnist", [11], rng)
    with pytest.raises(ValueError, match="font"):
        data.draw("NoSuchFont", [1], rng)


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize("argv, field", [
    (["--method", "fedprox"], "--method"),
    (["--clients", "1"], "--clients"),
    (["--dirichlet", "0"], "--dirichlet"),
    (["--seeds", "1,1"], "--seeds"),
    (["--rounds", "0"], "--rounds"),
    (["--fallback-quantile", "1"], "--fallback-quantile"),
    (["--control-swap", "0"], "--control-swap"),
    (["--seeds", "3"], "--seeds"),  # the positive control's paired comparison needs two seeds
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, field):
    assert_refused("fedspa", ["--quick", *argv], field, tmp_path / "out", capsys)


def test_cli_quick_run_writes_metrics_and_plots(tmp_path):
    """The --quick run (seeds 0, 1): the headline carries a paired difference with ci95 for every baseline,
    the positive control object, the fallback rate, the equal budget and the upload counts."""
    from onchip.methods._report import HEADLINE_KEYS, HEADLINE_PAIRED, excludes_zero

    out = tmp_path / "run"
    assert main(["fedspa", "--quick", "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert tuple(h) == (*HEADLINE_KEYS, HEADLINE_PAIRED)
    baselines = {"fedspa_fallback", "zeroshot", "local", "fedavg", "fedcoop"}
    assert h["method"] == "fedspa" and set(h["baselines"]) == baselines == set(h["paired"])
    assert h["budget"]["rounds"] == 1 and h["seeds"] == [0, 1] and h["direction"] == "higher"
    per = m["per_seed"]
    for name, p in h["paired"].items():
        lo, hi = p["ci95"]
        assert p["n"] == 2 and lo <= p["difference"] <= hi
        assert p["per_seed"] == pytest.approx([per[s]["fedspa"]["personalised"] - per[s][name]["personalised"]
                                               for s in ("0", "1")])
    assert h["value"] == pytest.approx(np.mean([per[s]["fedspa"]["personalised"] for s in ("0", "1")]))
    # equal budget: every trained arm makes the same passes per round, zero-shot none
    assert h["budget"]["client_passes_per_round"] == {"fedspa": 1, "fedspa_fallback": 1, "zeroshot": 0, "local": 1,
                                                      "fedavg": 1, "fedcoop": 1}
    pc = m["positive_control"]
    assert set(pc) >= {"setting", "metric", "method", "ablation", "seeds", "method_values", "ablation_values",
                       "paired", "sensitive"}
    assert pc["method"] == "fedspa" and pc["ablation"].startswith("local") and pc["seeds"] == [0, 1]
    assert len(pc["paired"]["ci95"]) == 2 and pc["sensitive"] == excludes_zero(pc["paired"])
    assert pc["method_values"] == [m["control_per_seed"][s]["fedspa"]["personalised"] for s in ("0", "1")]
    assert len(m["control_per_seed"]["0"]["_swapped_classes"]) == 18
    # fallback: off for fedspa; the 0.2 quantile of 3 clients' cosines sends back exactly the lowest one
    s = m["summary"]
    assert s["fedspa"]["fallback_rate"] == 0 and per["0"]["fedspa"]["fallback"]["threshold_per_round"] == [None]
    fb = per["0"]["fedspa_fallback"]["fallback"]
    assert fb["clients_per_round"] == [1] and s["fedspa_fallback"]["fallback_rate"] == pytest.approx(1 / 3)
    assert sum(c < fb["threshold_per_round"][0] for c in fb["client_cosines_per_round"][0]) == 1
    assert s["zeroshot"]["uploaded_floats_per_round"] == 0 and s["local"]["uploaded_floats_per_round"] == 0
    assert s["fedcoop"]["uploaded_floats_per_round"] == 4 * 384
    present = [per[sd]["_data"]["classes_present"] for sd in ("0", "1")]
    assert s["fedspa"]["uploaded_floats_per_round"] == pytest.approx(np.mean([np.mean(p) for p in present]) * 385)
    assert all(0 <= s[a]["personalised"] <= 1 and 0 <= s[a]["global"] <= 1 for a in s)
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "accuracy.png", "control.png",
                                               "domains.png"}
    text = (out / "results.md").read_text()
    assert "## Positive control" in text and "fedcoop: " in text and "Personalised accuracy per seed" in text
