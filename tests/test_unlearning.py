"""Orthogonal Entropy Unlearning (arXiv:2602.00567) on brevitas quantized MLPs, and its baselines."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from onchip.cli import main
from onchip.methods._scores import accuracy
from onchip.methods.unlearning import data, methods, metrics, models
from torch import nn

torch.set_num_threads(1)

FAST = methods.UnlearnConfig(train_epochs=3, epochs=2)


@pytest.fixture(scope="module")
def digits_split():
    return data.make_split("digits", "class:3", seed=0)


@pytest.fixture(scope="module")
def digits_model(digits_split):
    """An 8-bit QuantMLP trained briefly on all digits training data (shared, never modified)."""
    return methods.train_original(digits_split, 8, FAST, hidden=(32,), seed=0)


# ---------------------------------------------------------------- projection


def _random_grads(seed, shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]


SHAPES = [(5, 4), (5,), (3, 5), (3,)]


def test_projection_matches_flat_formula_and_is_orthogonal():
    gf, gr = _random_grads(1, SHAPES), _random_grads(2, SHAPES)
    out = methods.project_orthogonal(gf, gr)
    f = np.concatenate([t.numpy().ravel() for t in gf])
    r = np.concatenate([t.numpy().ravel() for t in gr])
    expected = f - (f @ r) / (r @ r) * r
    got = np.concatenate([t.numpy().ravel() for t in out])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert abs(got @ r) < 1e-10 * np.linalg.norm(f) * np.linalg.norm(r)


def test_layerwise_projection_is_orthogonal_per_layer_and_globally():
    gf, gr = _random_grads(3, SHAPES), _random_grads(4, SHAPES)
    groups = [[0, 1], [2, 3]]
    out = methods.project_orthogonal(gf, gr, groups)
    for grp in groups:
        dot = sum(float((out[i] * gr[i]).sum()) for i in grp)
        assert abs(dot) < 1e-10
    assert abs(sum(float((o * r).sum()) for o, r in zip(out, gr))) < 1e-10
    # a per-layer projection generally differs from the global one
    glob = methods.project_orthogonal(gf, gr)
    assert max(float((a - b).abs().max()) for a, b in zip(out, glob)) > 1e-3


def test_conflict_rule_leaves_agreeing_gradients_alone():
    gr = _random_grads(5, SHAPES)
    agree = [2.0 * t + 0.1 * n for t, n in zip(gr, _random_grads(6, SHAPES))]
    out = methods.project_orthogonal(agree, gr, when="conflict")
    for a, o in zip(agree, out):
        assert torch.equal(a, o)
    oppose = [-t for t in agree]
    out = methods.project_orthogonal(oppose, gr, when="conflict")
    assert abs(sum(float((o * r).sum()) for o, r in zip(out, gr))) < 1e-10


def test_projection_rejects_mismatched_shapes_and_bad_groups():
    with pytest.raises(ValueError, match="matching shapes"):
        methods.project_orthogonal(_random_grads(0, [(2,)]), _random_grads(0, [(3,)]))
    with pytest.raises(ValueError, match="groups"):
        methods.project_orthogonal(_random_grads(0, SHAPES), _random_grads(1, SHAPES), [[0, 1], [2]])
    with pytest.raises(ValueError, match="project_when"):
        methods.project_orthogonal(_random_grads(0, SHAPES), _random_grads(1, SHAPES), when="sometimes")


@pytest.mark.parametrize("projection", ["global", "layer"])
def test_projected_step_leaves_retain_loss_unchanged_to_first_order(projection):
    """Finite differences on a float64 MLP: retain-loss change is O(eps^2) with projection, O(eps) without."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    g = torch.Generator().manual_seed(1)
    xf = torch.randn(16, 6, generator=g, dtype=torch.float64)
    xr = torch.randn(32, 6, generator=g, dtype=torch.float64)
    yr = torch.randint(3, (32,), generator=g)

    def retain_loss_after(params, d, eps):
        with torch.no_grad():
            saved = [p.clone() for p in params]
            for p, v in zip(params, d):
                p.sub_(eps * v)
            loss = float(nn.functional.cross_entropy(net(xr), yr))
            for p, s in zip(params, saved):
                p.copy_(s)
        return loss

    base = retain_loss_after(list(net.parameters()), [torch.zeros_like(p) for p in net.parameters()], 0.0)
    cfg = methods.UnlearnConfig(projection=projection, retain_weight=0.0)
    params, d, _ = methods.oeu_direction(net, xf, xr, yr, cfg)
    params0, d0, _ = methods.oeu_direction(net, xf, xr, yr, dataclasses.replace(cfg, projection="none"))
    for eps in (1e-3, 1e-4):
        slope_proj = (retain_loss_after(params, d, eps) - base) / eps
        slope_free = (retain_loss_after(params0, d0, eps) - base) / eps
        assert abs(slope_free) > 1e-3  # the unprojected step does move the retain loss
        assert abs(slope_proj) < 1e-2 * abs(slope_free)
    # second order: a tenfold smaller step shrinks the projected change about a hundredfold
    r3 = retain_loss_after(params, d, 1e-3) - base
    r4 = retain_loss_after(params, d, 1e-4) - base
    assert abs(r4) < abs(r3) / 30


def test_quantized_direction_is_orthogonal_to_ste_retain_gradient(digits_split, digits_model):
    """On the brevitas model the guarantee holds for the STE gradient of the latent weights."""
    s = digits_split
    xf = torch.as_tensor(s.x_train[s.forget][:32])
    xr = torch.as_tensor(s.x_train[s.retain][:128])
    yr = torch.as_tensor(s.y_train[s.retain][:128])
    model = methods.copy.deepcopy(digits_model).train()
    for projection in ("global", "layer"):
        cfg = methods.UnlearnConfig(projection=projection, retain_weight=0.0)
        params, d, _ = methods.oeu_direction(model, xf, xr, yr, cfg)
        g_r = torch.autograd.grad(nn.functional.cross_entropy(model(xr), yr), params)
        dot = sum(float((a * b).sum()) for a, b in zip(d, g_r))
        norm = math.sqrt(sum(float((a * a).sum()) for a in d) * sum(float((b * b).sum()) for b in g_r))
        assert norm > 0
        assert abs(dot) < 1e-4 * norm


# ---------------------------------------------------------------- entropy objective


def test_entropy_loss_closed_forms():
    uniform = torch.zeros(4, 10, requires_grad=True)
    loss = methods.entropy_forget_loss(uniform)
    assert float(loss.detach()) == pytest.approx(-math.log(10))
    (grad,) = torch.autograd.grad(loss, uniform)
    assert float(grad.abs().max()) < 1e-7  # maximum entropy is a stationary point
    onehot = torch.tensor([[50.0, 0.0, 0.0]])
    assert float(methods.predictive_entropy(onehot)) == pytest.approx(0.0, abs=1e-12)
    p = torch.tensor([0.5, 0.25, 0.25])
    assert float(methods.predictive_entropy(p.log()[None])) == pytest.approx(1.5 * math.log(2))


def test_oeu_raises_forget_entropy_and_keeps_original(digits_split, digits_model):
    s = digits_split
    before = metrics.evaluate(digits_model, s)
    state = {k: v.clone() for k, v in digits_model.state_dict().items()}
    cfg = methods.UnlearnConfig(epochs=5, lr=0.5, train_epochs=3)
    model, info = methods.unlearn("oeu", digits_model, s, cfg, seed=0)
    after = metrics.evaluate(model, s)
    assert after["forget_entropy"] > before["forget_entropy"] + 0.1
    assert after["forget_acc"] < before["forget_acc"]
    assert info["steps"] == 5 * math.ceil(s.forget.sum() / cfg.batch_size)
    for k, v in digits_model.state_dict().items():  # the original model is untouched
        assert torch.equal(v, state[k])


# ---------------------------------------------------------------- retrain baseline


def test_retrain_never_reads_forget_samples():
    """Poison the forget features with NaN: any read would turn the retrained model's outputs NaN."""
    s = data.make_split("breast-cancer", "random:0.2", seed=1)
    x = s.x_train.copy()
    x[s.forget] = np.nan
    poisoned = dataclasses.replace(s, x_train=x)
    model, _ = methods.unlearn("retrain", models.QuantMLP(30, 2, hidden=(8,), bits=8), poisoned, FAST, seed=0)
    logits = models.predict_logits(model, s.x_test)
    assert np.isfinite(logits).all()
    assert accuracy(logits, s.y_test) > 0.85
    # control: training on the whole poisoned set does produce NaN
    control = methods.train_original(poisoned, 8, FAST, hidden=(8,), seed=0)
    assert not np.isfinite(models.predict_logits(control, s.x_test)).all()


# ---------------------------------------------------------------- metrics


def test_mia_on_trivially_separable_outputs():
    rng = np.random.default_rng(0)
    n, c = 200, 10
    y = rng.integers(c, size=n)
    confident = np.zeros((n, c))
    confident[np.arange(n), y] = 30.0  # members: one-hot, entropy ~0
    unsure = rng.normal(0, 0.01, size=(n, c))  # non-members: near uniform
    fm, fn = metrics.attack_features(confident, y), metrics.attack_features(unsure, y)
    assert fm[:, 0].min() > 0.999 and fn[:, 1].min() > 0.99 * math.log(c)
    assert metrics.mia_attack_rate(fm, fn, fm, seed=0) == 1.0
    assert metrics.mia_attack_rate(fm, fn, fn, seed=0) == 0.0
    with pytest.raises(ValueError, match="target"):
        metrics.mia_attack_rate(fm, fn, fm[:0])


def test_average_gap_closed_form():
    a = {"forget_acc": 0.5, "retain_acc": 0.9, "test_acc": 0.8, "mia_forget": 0.1}
    b = {"forget_acc": 0.0, "retain_acc": 1.0, "test_acc": 0.8, "mia_forget": 0.3}
    assert metrics.average_gap(a, b) == pytest.approx((50 + 10 + 0 + 20) / 4)
    assert metrics.average_gap(b, b) == 0.0


# ---------------------------------------------------------------- data and model


def test_forget_requests():
    s = data.make_split("digits", "class:7", seed=3)
    np.testing.assert_array_equal(s.forget, s.y_train == 7)
    r = data.make_split("digits", "random:0.1", seed=3)
    assert r.forget.sum() == round(0.1 * len(r.y_train))
    np.testing.assert_array_equal(r.forget, data.make_split("digits", "random:0.1", seed=3).forget)
    assert not np.array_equal(r.forget, data.make_split("digits", "random:0.1", seed=4).forget)
    for bad, msg in [("class:10", "unknown class 10"), ("class:x", "not an integer"),
                     ("random:1.5", "between 0 and 1"), ("everything", "class:N"),
                     ("random:0.0001", "empty forget set")]:
        with pytest.raises(ValueError, match=msg):
            data.make_split("digits", bad, seed=0)


@pytest.mark.parametrize("bits, act", [(4, "fixed"), (2, "fixed"), (2, "learned")])
def test_export_is_power_of_two_fixed_point_and_reproduces_brevitas(bits, act):
    s = data.make_split("breast-cancer", "random:0.1", seed=0)
    model = methods.train_original(s, bits, FAST, hidden=(16, 8), seed=0, act=act)
    ex = models.export_layers(model)
    for layer in ex["layers"]:
        q = 2 ** (bits - 1) - 1
        assert np.abs(layer["weight"]).max() <= q  # narrow signed range
        assert np.abs(layer["bias"]).max() < 2**15
    for layer in ex["layers"][:-1]:
        assert layer["act"]["bits"] == bits and not layer["act"]["signed"]
    out = ex["layers"][-1]["act"]
    if act == "learned":
        assert out is None
    else:  # one shared constant format: hidden ReLUs at one scale, logits one bit wider at that scale
        hidden = {layer["act"]["scale_exp"] for layer in ex["layers"][:-1]}
        assert hidden == {out["scale_exp"]} and out["signed"] and out["bits"] == bits + 1
        assert 2.0 ** (out["scale_exp"] + bits) == models.ACT_RANGE[bits]
    ref = models.predict_logits(model, s.x_test)
    np.testing.assert_array_equal(models.integer_forward(ex, s.x_test), ref)


# ---------------------------------------------------------------- CLI


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--forget", "class:10"], "unknown class 10"),
        (["--dataset", "breast-cancer", "--forget", "class:2"], "unknown class 2"),
        (["--bits", "3"], "--bits: 3 is out of range"),
        (["--bits", "16"], "--bits: 16 is out of range"),
        (["--forget", "random:0.0001"], "empty forget set"),
        (["--method", "forget-it"], "--method: unknown method"),
        (["--dataset", "iris"], "--dataset: unknown data set"),
        (["--projection", "diagonal"], "projection"),
    ],
)
def test_cli_refuses_bad_arguments_before_writing(tmp_path, capsys, argv, needle):
    out = tmp_path / "out"
    assert main(["unlearn", "--out", str(out), "--no-progress", *argv]) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_consistent_tables(tmp_path):
    out = tmp_path / "run"
    rc = main(["unlearn", "--dataset", "breast-cancer", "--bits", "8", "--forget", "random:0.1",
               "--method", "oeu", "--seed", "0", "--train-epochs", "3", "--epochs", "2",
               "--hidden", "8", "--no-progress", "--export", "--out", str(out)])
    assert rc == 0
    result = json.loads((out / "metrics.json").read_text())
    rows = result["runs"]["0"]
    assert set(rows) == {"original", "retrain", "oeu"}
    assert rows["retrain"]["avg_gap"] == 0.0
    expected_gap = metrics.average_gap(rows["oeu"], rows["retrain"])
    assert rows["oeu"]["avg_gap"] == pytest.approx(expected_gap)
    h = result["headline"]
    assert (h["method"], h["value"], h["baselines"]) == ("oeu", rows["oeu"]["avg_gap"],
                                                         {"original": rows["original"]["avg_gap"]})
    assert h["direction"] == "lower" and h["seeds"] == [0] and h["std"] == 0.0
    csv_rows = (out / "comparison.csv").read_text().splitlines()
    assert csv_rows[0].startswith("method,forget_acc_mean")
    assert [r.split(",")[0] for r in csv_rows[1:]] == ["original", "retrain", "oeu"]
    assert "| oeu |" in (out / "comparison.md").read_text()
    assert (out / "comparison.png").stat().st_size > 1000
    # the exported integers alone reproduce the brevitas predictions, sample for sample
    exported = json.loads((out / "export" / "oeu-seed0.json").read_text())
    for name in ("forget", "retain", "test"):
        h = np.asarray(exported["sets"][name]["x_int"], dtype=np.int64)
        for layer in exported["layers"]:
            acc = h @ np.asarray(layer["weight"], dtype=np.int64).T + np.asarray(layer["bias"], dtype=np.int64)
            act = layer["act"]
            if act is None:
                h = acc
                break
            if layer["relu"]:
                acc = np.maximum(acc, 0)
            h = np.clip(np.round(acc * 2.0 ** (layer["acc_exp"] - act["scale_exp"])), act["min"], act["max"]).astype(np.int64)
        np.testing.assert_array_equal(h.argmax(axis=1), exported["sets"][name]["pred"])


def test_cli_quick_headline_is_paired_with_a_positive_control(tmp_path):
    """--quick (seeds 0, 1, 2): every baseline has a paired OEU - baseline difference with ci95 built
    from the per-seed gaps; every arm of a seed starts from that seed's one original model (and the
    seeds' originals differ); every unlearning arm spends the same gradient budget; the positive
    control compares OEU with OEU-noproj from the same original on the same seeds."""
    out = tmp_path / "quick"
    # the control at the run's bits (the default control is 2 bits): it starts from the run's original
    assert main(["unlearn", "--quick", "--bits", "4", "--control-bits", "4", "--no-progress", "--out",
                 str(out)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    runs, h = result["runs"], result["headline"]
    seeds = ["0", "1", "2"]
    assert list(runs) == seeds and h["seeds"] == [0, 1, 2]
    assert set(h["paired"]) == set(h["baselines"]) == {"original", "oeu-noproj", "finetune", "gradascent", "relabel"}
    for name, pair in h["paired"].items():
        diffs = [runs[s]["oeu"]["avg_gap"] - runs[s][name]["avg_gap"] for s in seeds]
        assert pair["per_seed"] == pytest.approx(diffs) and pair["n"] == 3
        lo, hi = pair["ci95"]
        assert lo <= pair["difference"] <= hi and pair["difference"] == pytest.approx(np.mean(diffs))
    originals = [runs[s]["original"]["model"] for s in seeds]
    assert len(set(originals)) == 3
    for s, sha in zip(seeds, originals):
        arms = [n for n in runs[s] if n not in ("original", "retrain")]
        assert {runs[s][n]["from_original"] for n in arms} == {sha}
        assert len({runs[s][n]["grad_evals"] for n in arms}) == 1 and runs[s]["oeu"]["grad_evals"] > 0
        assert runs[s]["finetune"]["steps"] == 2 * runs[s]["oeu"]["steps"]
    assert h["budget"]["gradient_evaluations_per_arm"] == runs["0"]["oeu"]["grad_evals"]
    pc = result["positive_control"]
    assert (pc["method"], pc["ablation"], pc["seeds"]) == ("oeu", "oeu-noproj", [0, 1, 2])
    assert len(pc["paired"]["ci95"]) == 2 and isinstance(pc["sensitive"], bool)
    assert pc["config"]["retain_weight"] == 0.0
    for s, a, b in zip(seeds, pc["method_values"], pc["ablation_values"]):
        rows = pc["runs"][s]
        assert rows["oeu"]["from_original"] == rows["oeu-noproj"]["from_original"] == runs[s]["original"]["model"]
        assert (a, b) == pytest.approx((100 * rows["oeu"]["retain_acc"], 100 * rows["oeu-noproj"]["retain_acc"]))
    text = (out / "results.md").read_text()
    assert "Positive control" in text and "oeu-noproj: " in text and "seed 2" in text
    assert (out / "per_seed.png").stat().st_size > 1000


def test_each_use_of_a_run_seed_draws_its_own_integer_seed():
    from onchip.methods.unlearning.experiment import _named_seeds

    named = [_named_seeds(s) for s in range(10)]
    values = [v for d in named for v in d.values()]
    # split, original, retrain, unlearning and evaluation of ten seeds: no two the same, none a raw seed
    assert len(set(values)) == len(values) == 50 and not set(values) & set(range(10))
    assert named[0] == _named_seeds(0)


def test_the_cards_measured_tables_are_what_make_readme_writes_from_the_committed_runs():
    # the card's tables (per-seed gaps, paired intervals, the positive control) come from the committed
    # metrics.json of each configuration through one script, never copied by hand
    import json

    from support import load_script

    mr = load_script("sweeps/unlearning/make_readme.py")
    results = {c: json.loads((mr.folder(*c) / "metrics.json").read_text()) for c in mr.CONFIGS}
    card = mr.CARD.read_text()
    assert mr.card_text(card, results) == card
    # a changed stored interval changes the card
    results[(8, "class:3")]["headline"]["paired"]["oeu-noproj"]["ci95"][1] += 1.0
    assert mr.card_text(card, results) != card


def test_the_hardware_tables_are_what_make_readme_writes_from_the_committed_hardware_runs(monkeypatch):
    # the README's section and the card's table on the simulated hardware come from the hardware-digits-*
    # folders (their commands from metrics.json, their tables from hardware.md/.json), never kept by hand
    import json

    from support import load_script

    mr = load_script("sweeps/unlearning/make_readme.py")
    readme = (mr.HERE / "README.md").read_text()
    assert readme.endswith(mr.hardware_section() + "\n")
    assert mr.hardware_block() in mr.CARD.read_text()
    for b in mr.HARDWARE_BITS:
        metrics = json.loads((mr.hardware_folder(b) / "metrics.json").read_text())
        assert f"--out sweeps/unlearning/{mr.hardware_folder(b).name}" in metrics["command"]
    # another sample count on one run is named with its bits
    runs = mr._hardware_runs()
    runs[2][1]["sets"]["test"]["n"] += 1
    monkeypatch.setattr(mr, "_hardware_runs", lambda: runs)
    assert f"{sum(s['n'] for s in runs[2][1]['sets'].values())} at 2 bits" in mr.hardware_section()
