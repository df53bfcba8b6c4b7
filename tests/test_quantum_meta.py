"""Tests of the meta-learned gate calibration baseline (arXiv 2601.18973)."""

import json
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onchip.cli import main
from onchip.methods.quantum_meta.calibration import FloatCorrectionLearner, calibrate
from onchip.methods.quantum_meta.lindblad import (
    I2, SM, SZ, average_gate_fidelity, channel_expm, channel_torch, cz_gate_problem,
    evolve_ode, fidelity_torch, mub_states_2q, pauli_eigenstates_1q, state_average_fidelity,
    x_gate_problem,
)
from onchip.methods.quantum_meta.lqr import SpringFamily, lq_adapt, lq_cost, lq_optimal_gains, sample_masses
from onchip.methods.quantum_meta.maml import MetaConfig, adapt, init_policy
from onchip.methods.quantum_meta.protocol import budget_from_beta, evaluate_protocol, fit_probe, measured_budget
from onchip.methods.quantum_meta.scaling import fit_scaling_law, linearity_in_variance, saturating_law
from onchip.methods.quantum_meta.tasks import device_family, sample_devices


def _fidelity(problem, h0, c_ops, u, scale=None):
    return average_gate_fidelity(channel_expm(problem, h0, c_ops, u, scale), problem.target)


# ----------------------------------------------------------------- Lindblad simulation


@pytest.mark.parametrize("problem", [x_gate_problem(10), cz_gate_problem(8)], ids=["x", "cz"])
def test_analytic_pulse_without_noise_has_fidelity_one(problem):
    h0 = np.zeros((problem.dim, problem.dim))
    assert _fidelity(problem, h0, [], problem.reference) == pytest.approx(1.0, abs=1e-12)
    fam = device_family(problem.name, gamma1=0.0, gamma_phi=0.0)
    dev = sample_devices(fam, 2, 0.0, np.random.default_rng(0))
    u = torch.tensor(np.repeat(problem.reference[None], 2, 0))
    f = fidelity_torch(problem, channel_torch(problem, *dev.torch_tensors(problem), u))
    np.testing.assert_allclose(f.numpy(), 1.0, atol=1e-12)


@pytest.mark.parametrize("gamma", [0.05, 0.3, 2.0])
def test_pure_dephasing_idle_matches_closed_form(gamma):
    # coherences decay as exp(-gamma T): F_avg(identity) = (2 + exp(-gamma T)) / 3
    p = x_gate_problem(4)
    s = channel_expm(p, np.zeros((2, 2)), [np.sqrt(gamma / 2) * SZ], np.zeros((4, 2)))
    assert average_gate_fidelity(s, I2) == pytest.approx((2 + np.exp(-gamma)) / 3, abs=1e-12)


@pytest.mark.parametrize("gamma1", [0.1, 1.0])
def test_relaxation_idle_matches_amplitude_damping(gamma1):
    # amplitude damping with 1 - p = exp(-gamma1 T): F_avg = 1/2 + s/3 + s^2/6, s = sqrt(1 - p)
    p = x_gate_problem(3)
    s = np.exp(-gamma1 / 2)
    ch = channel_expm(p, np.zeros((2, 2)), [np.sqrt(gamma1) * SM], np.zeros((3, 2)))
    assert average_gate_fidelity(ch, I2) == pytest.approx(0.5 + s / 3 + s**2 / 6, abs=1e-12)


@pytest.mark.parametrize("gamma", [0.2, 1.0])
def test_dephasing_during_x_pi_pulse_matches_bloch_solution(gamma):
    # Bloch equations with H = (Omega/2) X and dephasing gamma: r_x decays as exp(-gamma T); (r_y, r_z)
    # rotate with eigenvalues -gamma/2 +- i w, w = sqrt(Omega^2 - gamma^2/4). The channel is unital, so
    # F_avg = 1/2 + tr(R_X^T M) / 6 = 1/2 + (exp(-gamma T) - 2 exp(-gamma T/2) cos(w T)) / 6.
    p = x_gate_problem(10)
    w = np.sqrt(np.pi**2 - gamma**2 / 4)
    expected = 0.5 + (np.exp(-gamma) - 2 * np.exp(-gamma / 2) * np.cos(w)) / 6
    f = _fidelity(p, np.zeros((2, 2)), [np.sqrt(gamma / 2) * SZ], p.reference)
    assert f == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("problem", [x_gate_problem(5), cz_gate_problem(4)], ids=["x", "cz"])
def test_superoperator_product_matches_ode_integration(problem):
    rng = np.random.default_rng(1)
    fam = device_family(problem.name, gamma1=0.3, gamma_phi=0.5)
    dev = sample_devices(fam, 1, 0.2, rng)
    u = problem.reference + rng.normal(0, 1.0, problem.reference.shape)
    psi = rng.normal(size=problem.dim) + 1j * rng.normal(size=problem.dim)
    psi /= np.linalg.norm(psi)
    rho0 = np.outer(psi, psi.conj())
    s = channel_expm(problem, dev.drift_hamiltonian(0), dev.collapse_operators(0), u, dev.control_scale(0))
    rho_expm = (s @ rho0.reshape(-1)).reshape(problem.dim, problem.dim)
    rho_ode = evolve_ode(problem, dev.drift_hamiltonian(0), dev.collapse_operators(0), u, rho0, dev.control_scale(0))
    np.testing.assert_allclose(rho_expm, rho_ode, atol=1e-8)
    assert np.trace(rho_expm).real == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("problem", [x_gate_problem(6), cz_gate_problem(4)], ids=["x", "cz"])
def test_torch_channel_matches_scipy_and_state_average_is_average_fidelity(problem):
    rng = np.random.default_rng(2)
    dev = sample_devices(device_family(problem.name), 3, 0.3, rng, shift=5.0)
    u = problem.reference + rng.normal(0, 0.5, (3, *problem.reference.shape))
    s_t = channel_torch(problem, *dev.torch_tensors(problem), torch.tensor(u)).numpy()
    f_t = fidelity_torch(problem, torch.tensor(s_t)).numpy()
    for i in range(3):
        s = channel_expm(problem, dev.drift_hamiltonian(i), dev.collapse_operators(i), u[i], dev.control_scale(i))
        np.testing.assert_allclose(s_t[i], s, atol=1e-10)
        # mean over the 2-design states == Nielsen's formula
        assert f_t[i] == pytest.approx(average_gate_fidelity(s, problem.target), abs=1e-10)
        assert state_average_fidelity(s, problem.target, problem.fidelity_states) == pytest.approx(f_t[i], abs=1e-10)


def test_mub_states_are_mutually_unbiased():
    st = mub_states_2q()
    gram = np.abs(st.conj() @ st.T) ** 2
    for a in range(5):
        for b in range(5):
            block = gram[4 * a:4 * a + 4, 4 * b:4 * b + 4]
            np.testing.assert_allclose(block, np.eye(4) if a == b else np.full((4, 4), 0.25), atol=1e-12)
    assert pauli_eigenstates_1q().shape == (6, 2)


def test_torch_gradient_matches_finite_difference():
    p = x_gate_problem(4)
    dev = sample_devices(device_family("x"), 1, 0.3, np.random.default_rng(3))
    tensors = dev.torch_tensors(p)
    u = torch.tensor(p.reference[None] + 0.1, requires_grad=True)
    f = fidelity_torch(p, channel_torch(p, *tensors, u)).sum()
    (g,) = torch.autograd.grad(f, u)
    h = 1e-6
    e = torch.zeros_like(u)
    e[0, 1, 0] = h
    with torch.no_grad():
        fd = (fidelity_torch(p, channel_torch(p, *tensors, u + e)) - fidelity_torch(p, channel_torch(p, *tensors, u - e))) / (2 * h)
    assert g[0, 1, 0].item() == pytest.approx(fd.item(), rel=1e-5)


# ----------------------------------------------------------------- tasks and adaptation


def test_device_sampling_shift_and_bad_arguments():
    fam = device_family("cz")
    dev = sample_devices(fam, 4, 0.0, np.random.default_rng(0), shift=10.0)
    np.testing.assert_allclose(dev.gamma1, 10 * fam.gamma1)
    np.testing.assert_allclose(dev.features, np.log(10.0))
    np.testing.assert_allclose(dev.coherent, 0.0)
    with pytest.raises(ValueError, match="sigma"):
        sample_devices(fam, 4, -0.1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="shift"):
        sample_devices(fam, 4, 0.1, np.random.default_rng(0), shift=0.5)
    with pytest.raises(ValueError, match="gate"):
        device_family("swap")


def test_coherent_offset_shifts_the_mean_miscalibration_and_scales_with_the_shift():
    fam = replace(device_family("x"), coherent_offset=0.3)
    dev = sample_devices(fam, 3, 0.0, np.random.default_rng(0))
    np.testing.assert_allclose(dev.coherent, np.tile([0.3 * np.pi, 0.3], (3, 1)))
    far = sample_devices(fam, 3, 0.0, np.random.default_rng(0), shift=2.0)
    np.testing.assert_allclose(far.coherent, 2 * dev.coherent)
    # the spread still draws around the offset: zero offset gives the default family's devices
    a = sample_devices(device_family("cz"), 5, 0.1, np.random.default_rng(3))
    b = sample_devices(replace(device_family("cz"), coherent_offset=0.5), 5, 0.1, np.random.default_rng(3))
    np.testing.assert_allclose(b.coherent - a.coherent, 0.5 * np.asarray(device_family("cz").coherent_scales)[None].repeat(5, 0))


def test_adaptation_is_per_device_and_starts_at_the_analytic_pulse():
    p = x_gate_problem(6)
    fam = device_family("x")
    dev = sample_devices(fam, 3, 0.1, np.random.default_rng(4))
    cfg = MetaConfig(inner_lr=2.0)
    params = init_policy(p, fam.n_features, 8, seed=0)
    losses, _ = adapt(p, dev, params, 4, cfg)
    for i in range(3):
        # K = 0: the zero-initialised output layer gives the analytic pulse
        f_ref = _fidelity(p, dev.drift_hamiltonian(i), dev.collapse_operators(i), p.reference, dev.control_scale(i))
        assert losses[0, i] == pytest.approx(1 - f_ref, abs=1e-12)
        alone, _ = adapt(p, dev.subset([i]), params, 4, cfg)
        np.testing.assert_allclose(alone[:, 0], losses[:, i], atol=1e-12)
    assert np.all(losses[-1] < losses[0])


def test_float_calibration_loop_improves_fidelity_and_learner_reaches_target():
    learner = FloatCorrectionLearner(2, 3, lr=1.0)
    x, y = np.zeros(2), np.array([0.1, -0.2, 0.3])
    learner.step(x, y)
    np.testing.assert_allclose(learner.predict(x), y)
    p = x_gate_problem(6)
    dev = sample_devices(device_family("x"), 1, 0.1, np.random.default_rng(5))
    fids = calibrate(p, dev, 0, p.reference, FloatCorrectionLearner(2, 2), k_steps=5)
    assert fids.shape == (6,) and fids[-1] > fids[0]
    with pytest.raises(ValueError, match="k_steps"):
        calibrate(p, dev, 0, p.reference, FloatCorrectionLearner(2, 2), k_steps=-1)


# ----------------------------------------------------------------- scaling law and protocol


def test_fit_recovers_known_constants_from_synthetic_gains():
    rng = np.random.default_rng(6)
    k = np.arange(11)
    s2 = np.array([0.01, 0.02, 0.04, 0.08])
    c, beta = 2.5, 0.35
    clean = saturating_law(k[None], s2[:, None], c, beta)
    fit = fit_scaling_law(k, s2, clean)
    assert fit.c == pytest.approx(c, rel=1e-6) and fit.beta == pytest.approx(beta, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    noisy = clean + rng.normal(0, 0.002, clean.shape)
    fit = fit_scaling_law(k, s2, noisy)
    assert abs(fit.c - c) < 3 * fit.c_err + 0.05 and abs(fit.beta - beta) < 3 * fit.beta_err + 0.02
    assert 0.95 < fit.r2 < 1.0
    lin = linearity_in_variance(s2, 3.0 * s2)
    assert lin["slope"] == pytest.approx(3.0) and lin["r2"] == pytest.approx(1.0) and abs(lin["intercept"]) < 1e-12
    with pytest.raises(ValueError, match="sigma2"):
        fit_scaling_law(k, [0.0, 0.01, 0.02, 0.03], clean)


@pytest.mark.parametrize("beta", [0.2, 0.5, 1.2])
def test_protocol_on_exact_exponential_curves(beta):
    k = np.arange(121)  # long enough that the last step is saturated to < 1e-10
    a = np.array([0.01, 0.03, 0.2])
    losses = 0.3 - a[None] * (1 - np.exp(-beta * k[:, None]))
    for n in (3, 5):
        g, b = fit_probe(losses[: n + 1, 0])
        assert g == pytest.approx(a[0], rel=1e-5) and b == pytest.approx(beta, rel=1e-5)
        ev = evaluate_protocol(losses, n, 0.9)
        np.testing.assert_allclose(ev["g_sat_pred"], a, rtol=1e-5)
        # K* = ceil(ln 10 / beta), and the measured curve reaches 90% at that step
        expected = int(np.ceil(np.log(10) / beta))
        np.testing.assert_array_equal(ev["k_star_pred"], expected)
        assert ev["rel_err_g_sat_median"] < 1e-4 and ev["rel_err_k_star_median"] == 0.0
    assert measured_budget(1 - np.exp(-beta * k), 1.0, 0.9) == int(np.ceil(np.log(10) / beta))
    with pytest.raises(ValueError, match="fraction"):
        budget_from_beta(beta, 1.0)
    with pytest.raises(ValueError, match="n_probe"):
        evaluate_protocol(losses, 1, 0.9)


def test_probe_with_no_gain_and_linear_probe_are_bounded():
    assert fit_probe([0.1, 0.1, 0.1])[0] == 0.0
    g, _ = fit_probe([0.1, 0.09, 0.08, 0.07])  # no curvature: the gain cannot exceed L_0
    assert 0.03 <= g <= 0.1


# ----------------------------------------------------------------- linear-quadratic check


def test_lq_cost_matches_discrete_lyapunov_reference():
    from scipy.linalg import solve_discrete_lyapunov

    fam = SpringFamily()
    m, gains = 1.3, np.array([0.8, 0.6])
    a = np.array([[0, 1], [-(fam.k + gains[0]) / m, -(fam.b + gains[1]) / m]])
    ad = np.eye(2) + fam.dt * a
    q = np.diag([1.0, 0.1]) + fam.r * np.outer(gains, gains)
    p = solve_discrete_lyapunov(ad.T, q)
    adh = np.linalg.matrix_power(ad, fam.horizon)
    ref = 0.5 * fam.dt * 0.5 * np.trace(p - adh.T @ p @ adh)
    got = lq_cost(fam, torch.tensor([m]), torch.tensor(gains[None])).item()
    assert got == pytest.approx(ref, rel=1e-6)  # the Lyapunov solve is the less accurate side


def test_lq_gain_scales_with_variance_and_saturates():
    # from the nominal plant's optimum the excess cost of a plant with mass m0 (1 + sigma xi) is
    # quadratic in sigma for small sigma, so the adaptation gain must scale as sigma^2
    fam = SpringFamily()
    g0 = lq_optimal_gains(fam, fam.m0)
    gains = []
    for s in (0.05, 0.1):
        masses = sample_masses(fam, 8, s, np.random.default_rng(7))  # same xi for both spreads
        costs, _ = lq_adapt(fam, masses, g0, 8, lr=2.0)
        gains.append((costs[0] - costs).mean(axis=1))
    gains = np.array(gains)
    assert np.all(np.diff(gains, axis=1) > 0)  # every step helps on average
    assert np.all(np.diff(gains, 2, axis=1) < 0)  # with shrinking increments (saturation)
    assert 3.0 < gains[1, -1] / gains[0, -1] < 5.0  # sigma^2 ratio 4


# ----------------------------------------------------------------- CLI


@pytest.mark.parametrize("bad, field", [
    (["--gate", "swap"], "--gate"),
    (["--gate", "x", "--fraction", "1.5"], "--fraction"),
    (["--gate", "x", "--n-test", "1"], "--n-test"),
    (["--gate", "cz", "--ood-shift", "0.5"], "--ood-shift"),
    (["--gate", "x", "--seed", "-1"], "--seed"),
    (["--gate", "x", "--seed", "3"], "--seed"),  # one seed: no paired comparison
    (["--gate", "x", "--seed", "2", "2"], "--seed"),
])
def test_cli_refuses_bad_arguments_before_writing(tmp_path, capsys, bad, field):
    out = tmp_path / "res"
    assert main(["quantum-meta", *bad, "--out", str(out)]) == 2
    assert field in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_quick_run_reports_paired_headline_positive_control_and_mean_and_median(tmp_path):
    from onchip.methods import _report

    out = tmp_path / "x"
    assert main(["quantum-meta", "--gate", "x", "--quick", "--quiet", "--out", str(out)]) == 0
    for name in ("metrics.json", "results.md", "law.json", "gain_vs_K.png", "gain_vs_variance.png", "per_seed.png"):
        assert (out / name).is_file(), name
    m = json.loads((out / "metrics.json").read_text())
    seeds, ps = m["seeds"], m["per_seed"]
    assert seeds == [0, 1] and sorted(ps) == ["0", "1"] and sorted(m["runs"]) == ["0", "1"]
    h = m["headline"]
    assert tuple(h) == (*_report.HEADLINE_KEYS, _report.HEADLINE_PAIRED)
    kr = m["runs"]["0"]["settings"]["k_report"]
    method = f"maml_K{kr}"
    assert h["method"] == method and h["seeds"] == seeds and h["direction"] == "lower"
    assert set(h["paired"]) == set(h["baselines"]) >= {f"analytic_start_K{kr}", f"grape_K{kr}", "analytic_pulse",
                                                         "maml_K0"}
    # every K-step arm gets the method's budget of online steps per device
    steps = h["budget"]["online_gradient_steps_per_device"]
    assert steps[method] == steps[f"analytic_start_K{kr}"] == steps[f"grape_K{kr}"] == kr
    assert h["value"] == pytest.approx(np.mean([ps[s][f"in.{method}"] for s in map(str, seeds)]))
    for arm, pair in h["paired"].items():
        lo, hi = pair["ci95"]
        d = [ps[str(s)][f"in.{method}"] - ps[str(s)][f"in.{arm}"] for s in seeds]
        assert pair["n"] == 2 and pair["per_seed"] == pytest.approx(d)
        assert lo <= pair["difference"] <= hi and pair["difference"] == pytest.approx(np.mean(d))
        assert h["baselines"][arm] == pytest.approx(np.mean([ps[str(s)][f"in.{arm}"] for s in seeds]))
    # the gain is reported from the MAML start and from the analytic pulse, and they are what they say
    for s in map(str, seeds):
        row = ps[s]
        assert row["in.gain_vs_analytic"] == pytest.approx(row["in.analytic_pulse"] - row[f"in.{method}"])
        assert row["ood.gain_vs_maml_K0"] == pytest.approx(row["ood.maml_K0"] - row[f"ood.{method}"])
    # mean and median, per seed over devices (protocol) and over seeds (summary)
    for tag in ("in", "ood"):
        for n in m["runs"]["0"]["settings"]["probe_steps"]:
            for q in ("g_sat", "k_star"):
                for stat in ("mean", "median"):
                    key = f"{tag}.protocol_N{n}.{q}_err_{stat}"
                    v = [ps[str(s)][key] for s in seeds]
                    assert np.all(np.isfinite(v)) and min(v) >= 0, key
                    assert m["summary"][key]["median"] == pytest.approx(np.median(v))
                    assert m["summary"][key]["mean"] == pytest.approx(np.mean(v))
                ev = m["runs"]["0"]["sets"][f"{tag}_distribution" if tag == "in" else "out_of_distribution"][
                    "protocol"][f"N{n}"]
                rel = np.abs(np.array(ev["g_sat_pred"]) - ev["g_sat_meas"]) / np.abs(ev["g_sat_meas"])
                assert ps["0"][f"{tag}.protocol_N{n}.g_sat_err_mean"] == pytest.approx(np.nanmean(rel))
                assert ps["0"][f"{tag}.protocol_N{n}.g_sat_err_median"] == pytest.approx(np.nanmedian(rel))
    pc = m["positive_control"]
    assert pc["method"] == method and pc["seeds"] == seeds and isinstance(pc["sensitive"], bool)
    assert pc["method_values"] == pytest.approx([ps[str(s)][f"control.{method}"] for s in seeds])
    assert pc["ablation_values"] == pytest.approx([ps[str(s)][f"control.analytic_start_K{kr}"] for s in seeds])
    lo, hi = pc["paired"]["ci95"]
    assert lo <= pc["paired"]["difference"] <= hi and pc["sensitive"] == (lo > 0 or hi < 0)
    text = (out / "results.md").read_text()
    assert "Positive control" in text and "| median |" in text and "ci95" in text
    assert set(m["paired_out_of_distribution"]) == set(h["baselines"])
