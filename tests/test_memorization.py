"""Geometry of diffusion memorization (arXiv 2602.17846) against closed forms."""

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from onchip.cli import main
from onchip.methods._data import load_digits_split
from onchip.methods.memorization import (
    EDMDenoiser,
    band_grid,
    edm_sample,
    heun_sample,
    empirical_optimal_denoiser,
    linear_gaussian_denoiser,
    linear_gaussian_gap,
    locate_regimes,
    memorized_fraction,
    nearest_ratio,
    posterior_concentration,
    regime_switch,
    shell_coverage,
)


@pytest.fixture(scope="module")
def digits():
    return load_digits_split(200, 0)


@pytest.mark.parametrize("sigma", [0.1, 0.7, 3.0])
def test_empirical_denoiser_two_points_is_tanh(sigma):
    # Training set {+a e, -a e}: D*(x) = a tanh(a <x, e> / sigma^2) e.
    rng = np.random.default_rng(0)
    e = np.array([0.6, 0.8, 0.0])
    a = 1.3
    train = np.stack([a * e, -a * e])
    x = rng.normal(size=(50, 3))
    expected = a * np.tanh(a * (x @ e) / sigma**2)[:, None] * e
    np.testing.assert_allclose(empirical_optimal_denoiser(x, sigma, train), expected, atol=1e-12)


@pytest.mark.parametrize("sigma", [0.2, 1.0, 5.0])
def test_empirical_denoiser_matches_tweedie_of_smoothed_empirical_density(sigma):
    # D*(x) = x + sigma^2 grad log p_sigma(x), p_sigma = mean_i N(x; y_i, sigma^2 I); gradient by autograd.
    rng = np.random.default_rng(1)
    train = rng.normal(size=(30, 5))
    x = rng.normal(size=(20, 5)) * 1.5
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.tensor(train)
    log_p = torch.logsumexp(-((xt[:, None] - yt[None]) ** 2).sum(-1) / (2 * sigma**2), dim=1).sum()
    (grad,) = torch.autograd.grad(log_p, xt)
    tweedie = x + sigma**2 * grad.numpy()
    np.testing.assert_allclose(empirical_optimal_denoiser(x, sigma, train), tweedie, atol=1e-9)


def test_linear_gaussian_denoiser_is_gaussian_posterior_mean():
    # For y ~ N(m, C), x = y + sigma n: E[y | x] by the Gaussian conditioning formula on the joint.
    rng = np.random.default_rng(2)
    a = rng.normal(size=(4, 4))
    c, m, sigma = a @ a.T + 0.1 * np.eye(4), rng.normal(size=4), 0.8
    x = rng.normal(size=(10, 4))
    joint_cross, x_cov = c, c + sigma**2 * np.eye(4)
    expected = m + (x - m) @ np.linalg.inv(x_cov) @ joint_cross.T
    np.testing.assert_allclose(linear_gaussian_denoiser(x, sigma, m, c), expected, atol=1e-12)


def test_large_noise_regime_close_to_linear_gaussian_denoiser(digits):
    train, heldout = digits
    rng = np.random.default_rng(3)
    sigmas = np.array([0.05, 5.0, 10.0, 20.0, 40.0])
    gap = linear_gaussian_gap(train, heldout[:400], sigmas, rng)
    assert gap[0] > 0.5  # small noise: D* snaps to a training image, far from linear
    assert gap[3] < 0.1 and gap[4] < 0.05
    assert np.all(np.diff(gap[1:]) < 0)
    # Where D* is near linear the posterior is spread over many training points.
    conc = posterior_concentration(train, heldout[:400], [20.0], rng)
    assert conc[0] < 5 * 1 / len(train)


def test_regimes_order_and_limits(digits):
    train, heldout = digits
    rng = np.random.default_rng(4)
    sigmas = np.geomspace(0.01, 80, 30)
    conc = posterior_concentration(train, heldout[:400], sigmas, rng)
    cover = shell_coverage(train, heldout[:400], sigmas, rng)
    assert conc[0] > 0.99 and conc[-1] < 2.0 / len(train)  # one-hot posterior -> nearly uniform
    assert cover[0] == 0.0 and cover[-1] > 0.95  # shells miss held-out data -> cover it
    lo, hi = locate_regimes(sigmas, conc, cover)
    assert 0.01 < lo < hi < 80
    # Inside the medium regime held-out noisy points sit on training shells while the
    # posterior still concentrates on single images.
    mid = (sigmas >= lo) & (sigmas < hi)
    assert np.all(cover[mid] >= 0.5) and np.all(conc[mid] >= 0.5)


def test_empirical_optimal_sampler_memorizes_and_linear_does_not(digits):
    train, heldout = digits
    x = edm_sample(lambda z, s: empirical_optimal_denoiser(z, s, train), 100, 64, seed=0)
    assert memorized_fraction(x, train) == 1.0
    assert np.min(cdist(x, train), axis=1).max() < 1e-2  # samples are training images
    mean, cov = train.mean(0), np.cov(train.T)
    x_lin = edm_sample(lambda z, s: linear_gaussian_denoiser(z, s, mean, cov), 100, 64, seed=0)
    assert memorized_fraction(x_lin, train) == 0.0


def test_band_grid_gives_every_band_the_same_steps_and_calls():
    bands = [(1.26, 80.0), (0.5, 1.26), (0.002, 0.5)]
    sigmas, band_of_step = band_grid(bands, 5)
    assert len(sigmas) == 16 and sigmas[0] == 80.0 and sigmas[-1] == pytest.approx(0.002)
    assert np.all(np.diff(sigmas) < 0)
    assert np.bincount(band_of_step).tolist() == [5, 5, 5]
    for k, (lo, hi) in enumerate(bands):  # each band's steps lie inside it and end on its edges
        inside = sigmas[np.r_[np.flatnonzero(band_of_step == k), np.flatnonzero(band_of_step == k)[-1] + 1]]
        assert inside[0] == pytest.approx(hi) and inside[-1] == pytest.approx(lo)
    # the 18-step EDM grid, by contrast, puts 2 levels in the medium band and many in the small one
    from onchip.methods.memorization.denoiser import edm_sigmas
    edm = edm_sigmas(18)[:-1]
    assert ((edm >= 0.5) & (edm < 1.26)).sum() == 2 and (edm < 0.5).sum() == 6
    seen = []
    _, calls = heun_sample([lambda z, s, k=k: seen.append(k) or z * 0 for k in band_of_step], sigmas, 3, 2, seed=0)
    assert calls.tolist() == [2] * 15 and seen == sorted(seen) and np.bincount(seen).tolist() == [10, 10, 10]
    # a denoiser that runs off (an MLP far from the data) stays in the data range once clipped
    wild = [lambda z, s: 1e3 * z] * len(band_of_step)
    assert np.abs(heun_sample(wild, sigmas, 5, 3, seed=0)[0]).max() > 1e6
    assert np.abs(heun_sample(wild, sigmas, 5, 3, seed=0, clip=(-1, 1))[0]).max() < 5.0
    with pytest.raises(ValueError, match="steps_per_band"):
        band_grid(bands, 0)
    with pytest.raises(ValueError, match="bands\\[1\\]"):
        band_grid([(1.0, 80.0), (0.1, 0.9)], 2)
    with pytest.raises(ValueError, match="step_denoisers"):
        heun_sample([lambda z, s: z], sigmas, 3, 2, seed=0)


def test_band_sampler_with_the_empirical_denoiser_in_the_small_band_only_returns_training_images(digits):
    # D* over the last band ends on a training image whatever state it enters with; the linear
    # Gaussian denoiser everywhere returns none.
    train, _ = digits
    mean, cov = train.mean(0), np.cov(train.T)
    lin = lambda z, s: linear_gaussian_denoiser(z, s, mean, cov)  # noqa: E731
    emp = lambda z, s: empirical_optimal_denoiser(z, s, train)  # noqa: E731
    sigmas, band_of_step = band_grid([(1.3, 80.0), (0.5, 1.3), (0.002, 0.5)], 6)
    x, _ = heun_sample([emp if k == 2 else lin for k in band_of_step], sigmas, 60, 64, seed=1)
    assert memorized_fraction(x, train) == 1.0
    x, _ = heun_sample([lin] * len(band_of_step), sigmas, 60, 64, seed=1)
    assert memorized_fraction(x, train) == 0.0


def test_nearest_ratio_against_cdist():
    rng = np.random.default_rng(5)
    train, samples = rng.normal(size=(40, 6)), rng.normal(size=(25, 6))
    d = np.sort(cdist(samples, train), axis=1)
    np.testing.assert_allclose(nearest_ratio(samples, train), d[:, 0] / d[:, 1], rtol=1e-9)
    samples[0] = train[3] + 1e-4
    assert memorized_fraction(samples[:1], train) == 1.0


def test_edm_preconditioning_skip_path():
    # With the last layer zeroed, D(x; sigma) = c_skip x = sigma_d^2 / (sigma^2 + sigma_d^2) x.
    model = EDMDenoiser(dim=4, sigma_data=0.5, width=8)
    torch.nn.init.zeros_(model.net[-1].weight)
    torch.nn.init.zeros_(model.net[-1].bias)
    x, sigma = torch.randn(5, 4), torch.tensor([0.1, 0.5, 1.0, 2.0, 10.0])
    expected = (0.25 / (sigma**2 + 0.25))[:, None] * x
    torch.testing.assert_close(model(x, sigma), expected)


def test_regime_switch_only_inside_band():
    f = regime_switch(lambda x, s: x * 0, lambda x, s: x * 0 + 1, (0.5, 2.0))
    z = np.zeros((1, 2))
    assert f(z, 0.1).sum() == 0 and f(z, 1.0).sum() == 2 and f(z, 3.0).sum() == 0


@pytest.mark.parametrize("argv,needle", [
    (["--steps", "100,50"], "--steps"),
    (["--steps", "a,b"], "--steps"),
    (["--n-train", "1"], "--n-train"),
    (["--n-train", "5000"], "--n-train"),
    (["--samples", "0"], "--samples"),
    (["--width", "0"], "--width"),
    (["--steps", "100"], "--steps"),
    (["--seeds", "3"], "--seeds"),
    (["--seeds", "1,1"], "--seeds"),
    (["--steps-per-band", "0"], "--steps-per-band"),
])
def test_cli_bad_arguments(tmp_path, capsys, argv, needle):
    out = tmp_path / "out"
    assert main(["memorization", *argv, "--out", str(out)]) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists()


def test_cli_quick_run_headline_control_and_equal_calls_per_band(tmp_path):
    import json

    from onchip.methods.memorization.experiment import BANDS, CONTROL_BAND, DECOY, MAIN, SWAPS

    out = tmp_path / "run"
    assert main(["memorization", "--quick", "--threads", "1", "--quiet", "--out", str(out)]) == 0
    data = json.loads((out / "metrics.json").read_text())
    seeds = data["config"]["seeds"]
    assert len(seeds) >= 2 and data["threads"] == 1 and data["config"]["threads"] == 1
    assert data["regimes"]["sigma_lo"] < data["regimes"]["sigma_hi"]
    # every band holds the same denoiser calls, recorded in the headline's budget and the sampler
    calls = data["sampler"]["calls_per_band"]
    assert set(calls) == set(BANDS) and len(set(calls.values())) == 1
    assert calls["medium"] == 2 * data["config"]["steps_per_band"]
    assert data["headline"]["budget"]["calls_per_band"] == calls
    assert data["headline"]["budget"]["denoiser_calls_per_sample"] == sum(calls.values())
    assert sorted(data["sampler"]["band_of_step"]) == sorted(b for b in BANDS for _ in range(calls[b] // 2))
    s = data["summary"]
    assert s["empirical optimal"]["memorized_per_seed"] == [1.0] * len(seeds)
    # the headline: the medium-band swap against every other swap, paired over the seeds
    h = data["headline"]
    assert (h["method"], h["direction"], h["seeds"]) == (MAIN, "lower", seeds)
    assert h["value"] == pytest.approx(np.mean(s[MAIN]["memorized_per_seed"]))
    assert set(h["baselines"]) == set(SWAPS) - {MAIN} == set(h["paired"])
    for name, p in h["paired"].items():
        assert len(p["ci95"]) == 2 and p["ci95"][0] <= p["difference"] <= p["ci95"][1] and p["n"] == len(seeds)
        want = np.subtract(s[MAIN]["memorized_per_seed"], s[name]["memorized_per_seed"])
        assert p["per_seed"] == pytest.approx(want.tolist())
    # the positive control: D* in the medium band of the weak checkpoint, whose trained small band decides the
    # outcome. At quick scale the 20-step checkpoint pulls every sample off the training images, so the
    # control fails here (it is not fixed by D*), while D* in the small band ends on them by construction
    pc = data["positive_control"]
    assert CONTROL_BAND == "medium" and pc["method"] == f"weak checkpoint, D* in {CONTROL_BAND}"
    assert len(pc["paired"]["ci95"]) == 2 and pc["seeds"] == seeds and set(pc["by_band"]) == set(BANDS)
    assert pc["method_values"] == s[pc["method"]]["memorized_per_seed"]
    assert pc["ablation_values"] == s[pc["ablation"]]["memorized_per_seed"]
    assert max(pc["method_values"]) < 1.0 and not pc["sensitive"]
    assert pc["by_band"]["small"]["per_seed"] == [1.0] * len(seeds)
    # the negative control: D* of other digits in the same band; its interval holds zero
    nc = data["negative_control"]
    assert nc["method"] == f"weak checkpoint, {DECOY} in {CONTROL_BAND}" and nc["ablation"] == pc["ablation"]
    assert nc["method_values"] == s[nc["method"]]["memorized_per_seed"] and nc["holds_zero"]
    assert nc["paired"]["ci95"][0] <= 0 <= nc["paired"]["ci95"][1]
    assert "Positive control" in (out / "results.md").read_text()
    for name in ("geometry.png", "memorization.png", "samples.png"):
        assert (out / name).stat().st_size > 0


def test_trained_checkpoints_are_cached_by_config_and_threads(tmp_path, monkeypatch, digits):
    import dataclasses

    import torch

    from onchip.methods.memorization.experiment import MemorizationConfig, trained_checkpoints

    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    train = digits[0][:20]
    c = MemorizationConfig(n_train=20, steps=(3, 5), width=8, batch_size=4, seeds=(0, 1), threads=1)
    entries = lambda: [p for p in (tmp_path / "cache").glob("memorization_denoiser-*") if p.is_dir()]  # noqa: E731
    a, b = trained_checkpoints(c, train, 0), trained_checkpoints(c, train, 0)
    assert len(entries()) == 1
    for n in c.steps:
        for (ka, va), (kb, vb) in zip(a[n].state_dict().items(), b[n].state_dict().items()):
            assert ka == kb and torch.equal(va, vb)
    trained_checkpoints(dataclasses.replace(c, threads=2), train, 0)
    trained_checkpoints(c, train, 1)
    assert len(entries()) == 3
