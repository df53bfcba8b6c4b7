"""Local MAP sampling (LMAPS) with DPS/DAPS baselines: checks against cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from onchip.cli import main
from onchip.methods._data import load_digits_split
from onchip.methods.lmaps import metrics
from onchip.methods.lmaps.operators import OPERATORS, Blur, Inpaint, box_mask, make_operator, random_mask
from onchip.methods.lmaps.priors import CountingDenoiser, DigitsTraining, GaussianMixturePrior, train_digits_denoiser
from onchip.methods.lmaps.samplers import daps, dps, karras_sigmas, lmaps, local_map_solve, run_method


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors are tiny; one torch thread avoids thread hand-off stalls on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _random_gmm(d, k, seed, spread=2.0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=spread, size=(k, d))
    covs = []
    for _ in range(k):
        m = rng.normal(size=(d, d))
        covs.append(0.3 * m @ m.T / d + 0.2 * np.eye(d))
    w = rng.uniform(0.5, 1.5, size=k)
    return GaussianMixturePrior(w / w.sum(), means, np.array(covs))


def _scipy_log_noisy(prior, x, sigma):
    """Independent log p_sigma(x) from scipy densities."""
    dens = sum(
        prior.weights[k].item()
        * multivariate_normal(prior.means[k].numpy(), prior.covs[k].numpy() + sigma**2 * np.eye(prior.dim)).pdf(x)
        for k in range(prior.n_components)
    )
    return np.log(dens)


# ---------------------------------------------------------------- Gaussian-mixture prior


def test_gmm_denoiser_is_tweedie_of_scipy_density():
    """D(x, s) = x + s^2 grad log p_s(x) (Tweedie), with the score by finite differences of scipy's density."""
    prior = _random_gmm(3, 3, seed=1)
    rng = np.random.default_rng(2)
    h = 1e-5
    for sigma in (0.3, 1.0, 3.0):
        x = rng.normal(scale=2.0, size=3)
        score = np.array([(_scipy_log_noisy(prior, x + h * e, sigma) - _scipy_log_noisy(prior, x - h * e, sigma)) / (2 * h)
                          for e in np.eye(3)])
        expected = x + sigma**2 * score
        got = prior(torch.as_tensor(x)[None], sigma)[0].numpy()
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_gmm_denoiser_matches_monte_carlo_posterior_mean():
    """E[x0 | x_t] by self-normalised importance sampling from the prior, within 5 Monte Carlo standard errors."""
    prior = _random_gmm(2, 2, seed=3, spread=1.5)
    gen = torch.Generator().manual_seed(4)
    x0 = prior.sample(400_000, gen).numpy()
    sigma = 0.8
    for xt in (np.array([0.3, -0.2]), np.array([1.5, 1.0])):
        logw = -0.5 * ((x0 - xt) ** 2).sum(1) / sigma**2
        w = np.exp(logw - logw.max())
        w /= w.sum()
        mc = w @ x0
        se = np.sqrt((w[:, None] ** 2 * (x0 - mc) ** 2).sum(0))
        exact = prior(torch.as_tensor(xt)[None], sigma)[0].numpy()
        assert np.all(np.abs(exact - mc) < 5 * se + 1e-4), (exact, mc, se)


def test_gmm_sampler_moments():
    prior = _random_gmm(2, 3, seed=5)
    s = prior.sample(200_000, torch.Generator().manual_seed(6)).numpy()
    np.testing.assert_allclose(s.mean(0), prior.mean.numpy(), atol=0.03)
    assert abs(s.var(0).mean() - prior.data_var) < 0.03 * prior.data_var


def test_gmm_posterior_mean_and_map_against_grid():
    """Posterior mean and MAP for y = A x + n against brute force on a dense 2-D grid."""
    prior = _random_gmm(2, 2, seed=7, spread=1.5)
    A = np.array([[1.0, 0.5]])
    noise_var = 0.3
    y = np.array([[0.7]])
    g = np.linspace(-7, 7, 1401)
    xx, yy = np.meshgrid(g, g, indexing="ij")
    pts = np.stack([xx.ravel(), yy.ravel()], 1)
    logpost = (np.log(sum(prior.weights[k].item() * multivariate_normal(prior.means[k].numpy(),
                                                                        prior.covs[k].numpy()).pdf(pts)
                          for k in range(2)))
               - 0.5 * ((pts @ A.T - y) ** 2).sum(1) / noise_var)
    post = np.exp(logpost - logpost.max())
    post /= post.sum()
    np.testing.assert_allclose(prior.posterior_mean(A, y, noise_var)[0], post @ pts, atol=2e-3)
    x_map = prior.map_estimate(A, y, noise_var)[0]
    assert np.abs(x_map - pts[np.argmax(logpost)]).max() <= (g[1] - g[0])
    # the grid cannot beat the optimiser
    def logp(x):
        return (np.log(sum(prior.weights[k].item() * multivariate_normal(prior.means[k].numpy(),
                                                                        prior.covs[k].numpy()).pdf(x)
                           for k in range(2))) - 0.5 * ((A @ x - y[0]) ** 2).sum() / noise_var)
    assert logp(x_map) >= logpost.max() - 1e-9


@pytest.mark.parametrize("kwargs, field", [
    ({"weights": [0.5, 0.6]}, "weights"),
    ({"covs": np.stack([np.eye(2), -np.eye(2)])}, "positive definite"),
    ({"means": np.zeros((3, 2))}, "disagree"),
])
def test_gmm_rejects_bad_parameters(kwargs, field):
    args = {"weights": [0.5, 0.5], "means": np.zeros((2, 2)), "covs": np.stack([np.eye(2)] * 2)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        GaussianMixturePrior(**args)


# ---------------------------------------------------------------- operators


@pytest.mark.parametrize("name", [n for n in OPERATORS if n != "quantize"])
def test_linear_operator_adjoint_matrix_and_norm(name):
    op = make_operator(name, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 64, generator=gen, dtype=torch.float64)
    ax = op.forward(x)
    v = torch.randn(ax.shape, generator=gen, dtype=torch.float64)
    np.testing.assert_allclose((ax * v).sum(1), (x * op.adjoint(v)).sum(1), rtol=1e-12, atol=1e-12)
    mat = op.matrix()
    np.testing.assert_allclose(x.numpy() @ mat.T, ax.numpy(), atol=1e-12)
    assert np.linalg.norm(mat, 2) ** 2 <= op.lipschitz + 1e-12


def test_operator_shapes_and_known_values():
    shapes = {"inpaint-random": round(0.3 * 64), "inpaint-box": 64 - 16, "blur": 64, "downsample": 16,
              "quantize": 64}
    x = torch.zeros(3, 64, dtype=torch.float64)
    for name, m in shapes.items():
        assert make_operator(name).forward(x).shape == (3, m)
    # down-sampling a 2x2-block-constant image returns the block values
    blocks = torch.arange(16, dtype=torch.float64).reshape(4, 4)
    img = blocks.repeat_interleave(2, 0).repeat_interleave(2, 1).reshape(1, 64)
    np.testing.assert_allclose(make_operator("downsample").forward(img)[0].numpy(), blocks.ravel().numpy())
    assert np.isclose(np.linalg.norm(make_operator("downsample").matrix(), 2) ** 2, 0.25)
    # the blur kernel sums to one: a constant image is unchanged away from the zero-padded border
    blurred = Blur(8, 0.0).forward(torch.ones(1, 64, dtype=torch.float64)).reshape(8, 8)
    np.testing.assert_allclose(blurred[2:6, 2:6].numpy(), 1.0, atol=1e-12)
    assert box_mask(8, 4).sum() == 48 and not box_mask(8, 4)[2:6, 2:6].any()
    assert random_mask(8, 0.5, torch.Generator().manual_seed(0)).sum() == 32


def test_quantize_values_and_identity_gradient():
    op = make_operator("quantize", levels=4)
    x = torch.linspace(-1.5, 1.5, 64, dtype=torch.float64)[None].requires_grad_(True)
    q = op.forward(x)
    levels = np.array([-1.0, -1 / 3, 1 / 3, 1.0])
    assert np.abs(q.detach().numpy()[..., None] - levels).min(-1).max() < 1e-12
    np.testing.assert_allclose(op.forward(q).detach().numpy(), q.detach().numpy())  # idempotent
    (grad,) = torch.autograd.grad(op.surrogate(x).sum(), x)
    np.testing.assert_allclose(grad.numpy(), 1.0)
    np.testing.assert_allclose(op.surrogate(x).detach().numpy(), q.detach().numpy())
    assert math.isclose(op.noise_var, 0.05**2 + (2 / 3) ** 2 / 12)


def test_measurement_noise_level_and_reproducibility():
    op = make_operator("blur", sigma_y=0.1)
    x = torch.zeros(500, 64, dtype=torch.float64)
    y = op.measure(x, torch.Generator().manual_seed(3))
    assert abs(float(y.std()) - 0.1) < 0.003
    np.testing.assert_array_equal(y.numpy(), op.measure(x, torch.Generator().manual_seed(3)).numpy())


@pytest.mark.parametrize("call, field", [
    (lambda: make_operator("nope"), "operator"),
    (lambda: make_operator("blur", sigma_y=-1.0), "sigma_y"),
    (lambda: make_operator("inpaint-box", box=8), "box"),
    (lambda: make_operator("inpaint-random", keep=0.0), "keep"),
    (lambda: make_operator("quantize", levels=1), "levels"),
    (lambda: Inpaint(np.zeros((8, 8), dtype=bool), 0.1), "mask"),
    (lambda: karras_sigmas(0), "steps"),
    (lambda: local_map_solve(make_operator("blur"), torch.zeros(1, 64), torch.zeros(1, 64), -1.0, 3), "lam"),
])
def test_bad_arguments_are_refused(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_samplers_refuse_bad_arguments():
    op = make_operator("blur")
    prior = GaussianMixturePrior([1.0], np.zeros((1, 64)), np.eye(64)[None] * 0.3)
    y = torch.zeros(2, 64, dtype=torch.float64)
    gen = torch.Generator()
    with pytest.raises(ValueError, match="data_var"):
        lmaps(prior, op, y, karras_sigmas(5), data_var=0.0, generator=gen)
    with pytest.raises(ValueError, match="sigmas"):
        dps(prior, op, y, [1.0, 2.0], generator=gen)
    with pytest.raises(ValueError, match="step_scale"):
        daps(prior, op, y, karras_sigmas(5), generator=gen, step_scale=2.0)
    with pytest.raises(ValueError, match="y must have shape"):
        lmaps(prior, make_operator("downsample"), y, karras_sigmas(5), data_var=0.3, generator=gen)
    with pytest.raises(ValueError, match="method"):
        run_method("mcmc", prior, op, y, karras_sigmas(5), data_var=0.3, generator=gen)


# ---------------------------------------------------------------- samplers


def test_local_map_solve_matches_closed_form():
    """The inner solve converges to (A^T A + lam I)^-1 (A^T y + lam c) for blur and inpainting."""
    gen = torch.Generator().manual_seed(8)
    for name, steps in (("blur", 200), ("inpaint-random", 20)):
        op = make_operator(name, generator=gen)
        mat = op.matrix()
        y = torch.randn(2, mat.shape[0], generator=gen, dtype=torch.float64)
        c = torch.randn(2, 64, generator=gen, dtype=torch.float64)
        lam = 0.05
        exact = np.linalg.solve(mat.T @ mat + lam * np.eye(64), (y.numpy() @ mat + lam * c.numpy()).T).T
        np.testing.assert_allclose(local_map_solve(op, y, c, lam, steps).numpy(), exact, atol=1e-6)


def test_all_methods_use_equal_denoiser_calls():
    op = make_operator("inpaint-box")
    prior = GaussianMixturePrior([1.0], np.zeros((1, 64)), np.eye(64)[None] * 0.3)
    y = op.measure(torch.zeros(2, 64, dtype=torch.float64), torch.Generator().manual_seed(0))
    for method in ("lmaps", "dps", "daps"):
        counted = CountingDenoiser(prior)
        out = run_method(method, counted, op, y, karras_sigmas(17), data_var=0.3,
                         generator=torch.Generator().manual_seed(1))
        assert counted.calls == 17 and out.shape == (2, 64)


def test_lmaps_mean_is_exact_posterior_mean_for_gaussian_prior():
    """Gaussian prior N(mu, s^2 I): with the exact denoiser and r_t^2 = s^2 sigma^2/(s^2+sigma^2) each local
    MAP is E[x0 | x_t, y], and the posterior mean (= MAP) is the fixed point of the expected LMAPS iterate, so
    the average LMAPS output equals the closed-form posterior mean; a single output spreads less than an
    exact posterior sample (it is a local mode, not a sample)."""
    s2, d = 0.2, 64
    mu = np.linspace(-0.5, 0.5, d)
    prior = GaussianMixturePrior([1.0], mu[None], s2 * np.eye(d)[None])
    op = make_operator("inpaint-random", sigma_y=0.1, keep=0.5, generator=torch.Generator().manual_seed(0))
    truth = prior.sample(1, torch.Generator().manual_seed(1))
    n = 400
    y = op.measure(truth, torch.Generator().manual_seed(2)).repeat(n, 1)
    out = lmaps(prior, op, y, karras_sigmas(40), data_var=prior.data_var, inner_steps=5,
                generator=torch.Generator().manual_seed(3)).numpy()
    _, means, covs = prior.posterior(op.matrix(), y[:1].numpy(), op.noise_var)
    post_mean, post_cov = means[0, 0], covs[0]
    np.testing.assert_allclose(prior.map_estimate(op.matrix(), y[:1].numpy(), op.noise_var)[0], post_mean, atol=1e-6)
    se = out.std(0) / math.sqrt(n)
    z = (out.mean(0) - post_mean) / se
    assert np.abs(z).max() < 4.5, np.abs(z).max()  # 64 coordinates, Bonferroni-style bound
    assert out.var(0).sum() < np.trace(post_cov)


def _two_mode_prior(d=64, s2=0.05):
    pattern = np.where(np.arange(d) % 2 == 0, 0.5, -0.5)
    return GaussianMixturePrior([0.4, 0.6], np.stack([pattern, -pattern]), np.stack([s2 * np.eye(d)] * 2))


def test_lmaps_on_mixture_prior_against_exact_posterior_and_map():
    """Two well-separated modes, informative inpainting: LMAPS averages to the exact posterior mean within 10%
    of the prior's within-mode std, and each output is closer to the exact MAP than exact posterior samples."""
    prior = _two_mode_prior()
    op = make_operator("inpaint-random", sigma_y=0.05, keep=0.5, generator=torch.Generator().manual_seed(0))
    truth = prior.sample(1, torch.Generator().manual_seed(5))
    n = 200
    y = op.measure(truth, torch.Generator().manual_seed(6)).repeat(n, 1)
    weights, means, covs = prior.posterior(op.matrix(), y[:1].numpy(), op.noise_var)
    assert weights.max() > 0.999  # the measurement identifies the mode
    post_mean = prior.posterior_mean(op.matrix(), y[:1].numpy(), op.noise_var)[0]
    x_map = prior.map_estimate(op.matrix(), y[:1].numpy(), op.noise_var)[0]
    out = lmaps(prior, op, y, karras_sigmas(50), data_var=prior.data_var, inner_steps=10,
                generator=torch.Generator().manual_seed(7)).numpy()
    rms = lambda a: float(np.sqrt((a**2).mean()))  # noqa: E731
    assert rms(out.mean(0) - post_mean) < 0.1 * math.sqrt(0.05)
    k = int(weights[0].argmax())
    samples = np.random.default_rng(8).multivariate_normal(means[0, k], covs[k], size=n)
    lmaps_dist = np.sqrt(((out - x_map) ** 2).mean(1)).mean()
    sample_dist = np.sqrt(((samples - x_map) ** 2).mean(1)).mean()
    assert lmaps_dist < 0.9 * sample_dist, (lmaps_dist, sample_dist)


# ---------------------------------------------------------------- metrics


def test_psnr_known_value():
    ref = np.zeros((1, 64))
    assert math.isclose(metrics.psnr(ref + 0.1, ref)[0], 10 * math.log10(1 / 0.05**2), rel_tol=1e-12)
    assert metrics.psnr(ref, ref)[0] == math.inf


def _ssim_loop(a, b, win=7, sigma=1.5):
    """Direct per-window evaluation of Wang et al. (2004) eqs. 13-15 on [0, 1] images (8x8)."""
    w = metrics.gaussian_window(win, sigma)
    vals = []
    for i in range(8 - win + 1):
        for j in range(8 - win + 1):
            pa, pb = a[i:i + win, j:j + win], b[i:i + win, j:j + win]
            ma, mb = (w * pa).sum(), (w * pb).sum()
            va, vb = (w * (pa - ma) ** 2).sum(), (w * (pb - mb) ** 2).sum()
            cab = (w * (pa - ma) * (pb - mb)).sum()
            c1, c2 = 0.01**2, 0.03**2
            vals.append((2 * ma * mb + c1) * (2 * cab + c2) / ((ma**2 + mb**2 + c1) * (va + vb + c2)))
    return float(np.mean(vals))


def test_ssim_known_cases():
    rng = np.random.default_rng(9)
    a = rng.uniform(-0.8, 0.6, size=(3, 64))
    np.testing.assert_allclose(metrics.ssim(a, a), 1.0)
    # a brightness shift leaves contrast and structure intact: SSIM = mean luminance term only
    b = a + 0.2
    ua, ub = (a[0] + 1) / 2, (b[0] + 1) / 2
    w = metrics.gaussian_window()
    view = np.lib.stride_tricks.sliding_window_view
    mua = (view(ua.reshape(8, 8), (7, 7)) * w).sum((-1, -2))
    mub = (view(ub.reshape(8, 8), (7, 7)) * w).sum((-1, -2))
    lum = ((2 * mua * mub + 1e-4) / (mua**2 + mub**2 + 1e-4)).mean()
    assert math.isclose(metrics.ssim(b[:1], a[:1])[0], lum, rel_tol=1e-10)
    c = rng.uniform(-1, 1, size=(2, 64))
    for i in range(2):
        assert math.isclose(metrics.ssim(c[i:i + 1], a[i:i + 1])[0],
                            _ssim_loop((c[i].reshape(8, 8) + 1) / 2, (a[i].reshape(8, 8) + 1) / 2), rel_tol=1e-10)
    assert metrics.ssim(-a[:1], a[:1])[0] < 0  # inverted contrast


# ---------------------------------------------------------------- digits denoiser


def test_digits_denoiser_learns_and_caches(tmp_path):
    """A short training run approaches the best linear (Wiener) denoiser, computed in closed form from the
    training covariance, and the cached weights reproduce the model exactly."""
    train, test = load_digits_split()
    cfg = DigitsTraining(steps=600, hidden=128, n_blocks=1)
    model = train_digits_denoiser(train, seed=0, config=cfg, cache_dir=tmp_path)
    x = torch.as_tensor(test, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    noisy = x + 0.3 * torch.randn(x.shape, generator=gen)
    mse = float(((model(noisy, 0.3) - x) ** 2).mean())
    mu, cov = train.mean(0), np.cov(train.T)
    wiener = mu + (noisy.numpy() - mu) @ (cov @ np.linalg.inv(cov + 0.09 * np.eye(64))).T
    wiener_mse = float(((wiener - test) ** 2).mean())
    mean_mse = float(((torch.as_tensor(mu, dtype=torch.float32) - x) ** 2).mean())
    assert mse < 0.09 and mse < 1.1 * wiener_mse, (mse, wiener_mse)
    # at a noise level far above the data spread the optimal denoiser is close to the data mean
    far = model(x + 5.0 * torch.randn(x.shape, generator=gen), 5.0)
    assert float(((far - torch.as_tensor(mu, dtype=torch.float32)) ** 2).mean()) < 0.1 * mean_mse
    files = list(tmp_path.iterdir())
    assert len(files) == 1
    from onchip.methods.lmaps import priors

    priors._MEMORY_CACHE.clear()
    again = train_digits_denoiser(train, seed=0, config=cfg, cache_dir=tmp_path)
    np.testing.assert_array_equal(again(noisy, 0.3).numpy(), model(noisy, 0.3).numpy())


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize("argv, field", [
    (["--steps", "0"], "--steps"),
    (["--operator", "deblur"], "--operator"),
    (["--method", "dps,ddrm"], "--method"),
    (["--n-images", "500"], "--n-images"),
    (["--sigma-y", "-0.1"], "--sigma-y"),
    (["--steps", "7"], "--steps"),
    (["--seed", "3"], "--seed"),
    (["--method", "dps,daps"], "--method"),
    (["--n-val", "150", "--n-test", "60"], "--n-test"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, field):
    out = tmp_path / "out"
    assert main(["lmaps", *argv, "--out", str(out)]) == 2
    assert field in capsys.readouterr().err
    assert not out.exists()


def test_quick_run_tunes_every_arm_at_equal_calls_and_has_the_control(tmp_path):
    """``--quick``: every arm at the same denoiser calls per reconstruction and the same tuning calls, the
    chosen setting is the validation argmax of its own grid, the headline carries a paired ci95 per arm,
    and the positive control object is present."""
    from method_support import quick_run

    from onchip.methods.lmaps.experiment import GRIDS, GRID_SIZE

    data = quick_run("lmaps", tmp_path / "run", files=("metrics.json", "results.md", "metrics.png",
                                                       "recon_inpaint-box.png", "recon_quantize.png"))
    h = data["headline"]
    assert h["method"] == "lmaps" and set(h["baselines"]) == {"lmaps-sample", "dps", "daps"}
    assert set(h["paired"]) == set(h["baselines"]) and h["seeds"] == [0, 1]
    assert set(h["budget"]["denoiser_calls_per_reconstruction"].values()) == {12}
    assert set(h["budget"]["tuning_calls_per_operator_and_seed"].values()) == {12 * GRID_SIZE}
    per_seed = data["per_seed"]
    for seed in ("0", "1"):
        for name in ("inpaint-box", "quantize"):
            for arm, row in per_seed[seed][name].items():
                if arm == "exact-map":
                    continue
                assert row["setting"] == GRIDS[arm][int(np.argmax(row["val_psnr"]))]
                assert -1 <= row["ssim"] <= 1
    assert per_seed["0"]["quantize"]["lmaps"]["rmse_to_map"] is None  # no exact MAP for a non-linear operator
    mean = np.mean([np.mean([per_seed[s][o]["lmaps"]["psnr"] for o in ("inpaint-box", "quantize")]) for s in ("0", "1")])
    assert h["value"] == pytest.approx(mean)
    pc = data["positive_control"]
    assert pc["method"] == "lmaps" and pc["ablation"] == "lmaps-sample" and len(pc["paired"]["ci95"]) == 2
    assert pc["paired"]["difference"] == pytest.approx(np.mean(pc["method_values"]) - np.mean(pc["ablation_values"]))


def test_daps_ode_steps_spend_their_calls_and_one_step_is_tweedie():
    """DAPS with k ODE calls per level spends levels x k calls; k = 1 at a level equals the Tweedie estimate."""
    op = make_operator("blur")
    prior = GaussianMixturePrior([1.0], np.zeros((1, 64)), np.eye(64)[None] * 0.3)
    y = op.measure(torch.zeros(2, 64, dtype=torch.float64), torch.Generator().manual_seed(0))
    counted = CountingDenoiser(prior)
    daps(counted, op, y, karras_sigmas(10), generator=torch.Generator().manual_seed(1), ode_steps=3)
    assert counted.calls == 30
    with pytest.raises(ValueError, match="ode_steps"):
        daps(prior, op, y, karras_sigmas(5), generator=torch.Generator(), ode_steps=0)


def test_local_sample_ablation_spreads_like_the_local_posterior():
    """lmaps-sample differs from LMAPS only by a draw from the local Gaussian posterior: with one level and a
    Gaussian prior, its outputs' covariance matches noise_var (A^T A + lam I)^-1 and its mean the local MAP."""
    s2 = 0.2
    prior = GaussianMixturePrior([1.0], np.zeros((1, 64)), s2 * np.eye(64)[None])
    op = make_operator("downsample", sigma_y=0.3)
    n = 4000
    y = op.measure(torch.zeros(1, 64, dtype=torch.float64), torch.Generator().manual_seed(0)).repeat(n, 1)
    sig = np.array([0.5])
    a = lmaps(prior, op, y, sig, data_var=s2, inner_steps=200, generator=torch.Generator().manual_seed(1)).numpy()
    b = run_method("lmaps-sample", prior, op, y, sig, data_var=s2, inner_steps=200,
                   generator=torch.Generator().manual_seed(1)).numpy()
    mat = op.matrix()
    lam = op.noise_var / (s2 * 0.25 / (s2 + 0.25))
    cov = op.noise_var * np.linalg.inv(mat.T @ mat + lam * np.eye(64))
    diff = b - a  # the same starting draw and local MAP: the difference is the added draw alone
    np.testing.assert_allclose(np.cov(diff.T), cov, atol=0.1 * cov.diagonal().max())
    assert abs(diff.mean(0)).max() < 4 * np.sqrt(cov.diagonal().max() / n)


