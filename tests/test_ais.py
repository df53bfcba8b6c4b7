"""Entropic mirror adaptive importance sampling (arXiv 2602.03165) against known answers."""

import numpy as np
import pytest
from onchip.cli import main
from onchip.methods.ais import (
    DefensiveMixture,
    GaussianMixtureDensity,
    GaussianMixtureTarget,
    SamplerConfig,
    make_target,
    run_sampler,
)
from scipy.stats import multivariate_normal


def _gaussian_kl(m_p, c_p, m_q, c_q):
    """Closed-form KL(N(m_p, c_p) || N(m_q, c_q))."""
    d = len(m_p)
    pq = np.linalg.solve(c_q, c_p)
    diff = m_q - m_p
    return 0.5 * (np.trace(pq) - d - np.log(np.linalg.det(pq)) + diff @ np.linalg.solve(c_q, diff))


@pytest.mark.parametrize("name,dim", [("gmm4", 3), ("grid25", 2), ("funnel", 3)])
def test_targets_normalising_constant_and_moments(name, dim):
    # Z = E_q[pi/q] with a broad independent proposal; moments from exact draws.
    target = make_target(name, dim)
    rng = np.random.default_rng(0)
    q = multivariate_normal(np.zeros(dim), 9.0 * np.eye(dim) if name != "funnel" else np.diag([9.0] + [25.0] * (dim - 1)))
    x = q.rvs(200_000, random_state=rng)
    w = np.exp(target.log_prob(x) - q.logpdf(x))
    assert abs(np.log(w.mean()) - target.log_z) < 5 * w.std() / w.mean() / np.sqrt(len(w)) + 0.02
    draws = target.sample(200_000, rng)
    np.testing.assert_allclose(draws.mean(0), target.mean, atol=0.05 if name != "funnel" else 0.5)
    if name != "funnel":
        np.testing.assert_allclose((draws**2).mean(0), target.second_moment, rtol=0.02)
    labels = target.region(draws)
    np.testing.assert_allclose(np.bincount(labels, minlength=len(target.region_mass)) / len(draws),
                               target.region_mass, atol=0.005)


def test_mixture_and_defensive_densities_normalised():
    rng = np.random.default_rng(1)
    mix = GaussianMixtureDensity([0.3, 0.7], [[0, 0], [3, 1]], [np.eye(2), [[2, 0.5], [0.5, 1]]])
    ref = 0.3 * multivariate_normal([0, 0], np.eye(2)).pdf(np.ones((1, 2))) + \
        0.7 * multivariate_normal([3, 1], [[2, 0.5], [0.5, 1]]).pdf(np.ones((1, 2)))
    assert np.exp(mix.log_prob(np.ones((1, 2))))[0] == pytest.approx(ref, rel=1e-10)
    q = DefensiveMixture(mix, 0.2, 3.0, 2.0)
    x = q.sample(100_000, rng)
    # E_q[f/q] = 1 for the standard normal density f checks log_prob and sample agree.
    r = multivariate_normal(np.zeros(2), np.eye(2)).pdf(x) / np.exp(q.log_prob(x))
    assert abs(r.mean() - 1) < 4 * r.std() / np.sqrt(len(r))


def _gaussian_target(dim=2):
    return GaussianMixtureTarget(np.full((1, dim), 3.0), [1.0], [1.0], log_z=1.5, name="gauss")


def test_pure_mirror_step_tracks_exact_gaussian_iterates_and_contracts():
    # Gaussian target and one-component proposal: the exact mirror iterate stays Gaussian with
    # precision P_{n+1} = (1-eps) P_n + eps P_pi and h_{n+1} = (1-eps) h_n + eps h_pi (h = P m),
    # and KL(pi || mu_n) <= (1-eps)^n KL(pi || mu_0).
    dim, eps = 2, 0.5
    target = _gaussian_target(dim)
    cfg = SamplerConfig(n_samples=4000, iterations=7, eps=eps, n_components=1, defensive_weight=0.0,
                        init_scale=3.0, n_target_draws=20000)
    # seed 1 starts 2.3 nats away (seeds 1-6 all track within the tolerance; seed 0, 5.2 nats away,
    # misses it at the first step: 4000 draws from that far give too few useful weights)
    hist, _ = run_sampler(target, "em2c-nomove", cfg, seed=1)
    # Recover the same initial proposal the sampler drew (its named stream).
    from onchip.methods._report import rng

    m0 = 3.0 * rng(1, "ais", "initial-mixture").standard_normal((1, dim))[0]
    p_pi, h_pi = np.eye(dim), np.full(dim, 3.0)
    p, h = np.eye(dim) / 9.0, m0 / 9.0
    exact = []
    for _ in range(cfg.iterations):
        c = np.linalg.inv(p)
        exact.append(_gaussian_kl(np.full(dim, 3.0), np.eye(dim), c @ h, c))
        p, h = (1 - eps) * p + eps * p_pi, (1 - eps) * h + eps * h_pi
    kl = np.array([r.kl for r in hist])
    assert kl[0] == pytest.approx(exact[0], rel=0.05)
    np.testing.assert_allclose(kl, exact, rtol=0.35, atol=0.03)
    for n in range(1, len(kl)):
        assert kl[n] <= (1 - eps) ** n * kl[0] * 1.3 + 0.02


def test_full_scheme_kl_decreases_geometrically():
    # With the global move and delayed weighting the contraction is at least the mirror rate
    # (1 - eps) per iteration down to the Monte Carlo floor, and faster than without the move.
    target = _gaussian_target(2)
    cfg = SamplerConfig(n_samples=3000, iterations=6, eps=0.5, n_components=1, defensive_weight=0.0,
                        mcmc_steps=3, n_target_draws=20000)
    # seed 0 starts 5.2 nats away; from starts beyond about 6 nats (seeds 5 and 6 of the named
    # streams) one iteration of independence MH moves too few points to beat the no-move arm
    kl = np.array([r.kl for r in run_sampler(target, "em2c", cfg, seed=0)[0]])
    kl_nomove = np.array([r.kl for r in run_sampler(target, "em2c-nomove", cfg, seed=0)[0]])
    assert kl[0] > 1.0
    for n in range(1, len(kl)):
        assert kl[n] <= 0.5**n * kl[0] * 1.3 + 0.01
    assert kl[1] < kl_nomove[1]


@pytest.mark.parametrize("method", ["em2c", "pmc"])
def test_normalising_constant_unbiased_within_its_monte_carlo_error(method):
    # E[Z_hat] = Z for every iteration's fresh draws; pool 40 independent runs x 3 iterations.
    target = make_target("gmm2", 2)
    cfg = SamplerConfig(n_samples=200, iterations=3, n_target_draws=20)
    ratios = np.array([np.exp(r.log_z_hat - target.log_z)
                       for seed in range(40) for r in run_sampler(target, method, cfg, seed=seed)[0]])
    se = ratios.std(ddof=1) / np.sqrt(len(ratios))
    assert abs(ratios.mean() - 1.0) < 4 * se + 1e-3
    assert se < 0.2  # the check has power: the error bar is not huge


def test_global_move_finds_modes_the_ablation_misses():
    target = make_target("grid25", 2)
    cfg = SamplerConfig(n_samples=400, iterations=5, mcmc_steps=5, n_target_draws=2000)
    move = run_sampler(target, "em2c", cfg, seed=0)[0][-1]
    pmc = run_sampler(target, "pmc", cfg, seed=0)[0][-1]
    assert move.kl < pmc.kl
    assert move.mode_coverage >= pmc.mode_coverage


def test_runs_reproducible():
    target = make_target("funnel", 3)
    cfg = SamplerConfig(n_samples=200, iterations=3, n_target_draws=100)
    a = [r.as_dict() for r in run_sampler(target, "amis", cfg, seed=7)[0]]
    b = [r.as_dict() for r in run_sampler(target, "amis", cfg, seed=7)[0]]
    assert a == b


@pytest.mark.parametrize("argv,needle", [
    (["--target", "banana"], "--target"),
    (["--dim", "0"], "--dim"),
    (["--method", "em2c,nuts"], "--method"),
    (["--eps", "1.5"], "--eps"),
    (["--samples", "3"], "--samples"),
    (["--defensive-weight", "1.0"], "--defensive-weight"),
    (["--budget", "equal-time"], "--budget"),
    (["--seeds", "-1"], "--seeds"),
    (["--split", "5,2"], "--split"),
    (["--budget", "equal-iterations", "--split", "2"], "--split"),
    (["--seeds", "3"], "--seeds"),
])
def test_cli_bad_arguments(tmp_path, capsys, argv, needle):
    out = tmp_path / "out"
    assert main(["ais", *argv, "--out", str(out)]) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists()


def test_cli_writes_outputs(tmp_path, capsys):
    import json

    out = tmp_path / "run"
    assert main(["ais", "--target", "gmm2", "--dim", "2", "--iterations", "2", "--samples", "200",
                 "--method", "em2c,amis", "--seeds", "0", "--no-control", "--no-split", "--quiet",
                 "--out", str(out)]) == 0
    # --quiet silences progress, not where the results went
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"wrote {out}/"
    data = json.loads((out / "metrics.json").read_text())
    assert set(data["per_seed"]) == {"em2c", "amis"} and data["seeds"] == [0]
    assert len((out / "history.csv").read_text().strip().splitlines()) == 1 + 2 * 2
    assert (out / "metrics.png").stat().st_size > 0 and (out / "results.md").exists()
    # equal target evaluations by default. EM2C: I N fresh draws + (I - 1) adaptations x N x mcmc_steps
    # MH proposals (the start points' log pi come from the iteration's draws, not evaluated again);
    # AMIS draws ceil(total / I) per iteration, and each method's last history row says so
    n, iters, steps = 200, 2, 10
    em2c = iters * n + (iters - 1) * n * steps
    amis_n = -(-em2c // iters)
    assert data["budget"] == "equal-evaluations"
    assert data["samples_per_iteration"] == {"em2c": n, "amis": amis_n}
    assert data["target_evals"] == {"em2c": em2c, "amis": iters * amis_n}
    assert {m: data["per_seed"][m]["0"]["n_target_evals"] for m in ("em2c", "amis")} == data["target_evals"]
    h = data["headline"]
    assert (h["method"], h["value"], h["baselines"]) == ("em2c", data["per_seed"]["em2c"]["0"]["kl"],
                                                         {"amis": data["per_seed"]["amis"]["0"]["kl"]})
    assert h["direction"] == "lower" and h["budget"]["target_evaluations"] == data["target_evals"]
    assert "paired" not in h and "positive_control" not in data and "split" not in data  # one seed, both off


def test_em2c_evaluates_the_target_only_for_fresh_draws_and_mh_proposals():
    # count every row passed to log_prob: the fresh draws, the MH proposals and the KL estimate's exact
    # draws; the MH start points (resampled from the fresh draws) must not be evaluated again
    class Counting:
        def __init__(self, inner):
            self.inner, self.rows = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def log_prob(self, x):
            self.rows += len(x)
            return self.inner.log_prob(x)

    target = Counting(make_target("gmm2", 2))
    cfg = SamplerConfig(n_samples=50, iterations=4, mcmc_steps=3, n_target_draws=20)
    hist, _ = run_sampler(target, "em2c", cfg, seed=0)
    assert cfg.target_evals("em2c") == 4 * 50 + 3 * 50 * 3 == hist[-1].n_target_evals
    assert target.rows == cfg.target_evals("em2c") + cfg.iterations * cfg.n_target_draws


def test_split_arms_spend_the_same_evaluations_and_configs_are_checked():
    from onchip.methods.ais.experiment import AisConfig, split_samples

    c = AisConfig(iterations=30, samples=1000, mcmc_steps=10)
    total = 30 * 1000 + 29 * 1000 * 10
    assert c.em2c_evals() == total
    for steps in (0, 1, 2, 5, 10):
        method, sc = c.split_config(steps)
        per_draw = 30 + 29 * steps
        assert sc.n_samples == split_samples(total, 30, steps) == -(-total // per_draw)
        assert method == ("em2c-nomove" if steps == 0 else "em2c")
        assert 0 <= sc.target_evals(method) - total < per_draw
    assert c.split_config(10)[1] == c.sampler_config("em2c")  # the default arm is the main EM2C run
    assert c.split_config(0)[1].n_samples == c.sampler_config("pmc").n_samples  # and 0 steps the ablation's
    assert AisConfig(budget="equal-iterations").split == ()
    with pytest.raises(ValueError, match="^split: "):
        AisConfig(budget="equal-iterations", split=(0, 2))
    with pytest.raises(ValueError, match="^seeds: .*positive control"):
        AisConfig(seeds=(0,))
    with pytest.raises(ValueError, match="^steps: "):
        split_samples(100, 3, -1)


def test_quick_run_headline_is_paired_with_a_positive_control(tmp_path):
    import json

    from onchip.methods._report import HEADLINE_KEYS, HEADLINE_PAIRED

    out = tmp_path / "quick"
    assert main(["ais", "--quick", "--quiet", "--out", str(out)]) == 0
    data = json.loads((out / "metrics.json").read_text())
    h = data["headline"]
    assert tuple(h) == (*HEADLINE_KEYS, HEADLINE_PAIRED) and h["seeds"] == [0, 1]
    assert set(h["paired"]) == set(h["baselines"]) == {"em2c-nomove", "pmc", "amis"}
    for name, p in h["paired"].items():
        assert len(p["ci95"]) == 2 and p["n"] == 2 and len(p["per_seed"]) == 2
        want = [data["per_seed"]["em2c"][str(s)]["kl"] - data["per_seed"][name][str(s)]["kl"] for s in (0, 1)]
        assert p["per_seed"] == pytest.approx(want)
    # every arm spends EM2C's target evaluations, up to the rounding of ceil(total / iterations)
    evals, iters = data["target_evals"], data["config"]["iterations"]
    assert all(0 <= e - evals["em2c"] < iters for e in evals.values())
    pc = data["positive_control"]
    assert (pc["method"], pc["ablation"], pc["seeds"]) == ("em2c", "em2c-nomove", [0, 1])
    assert len(pc["paired"]["ci95"]) == 2 and isinstance(pc["sensitive"], bool)
    assert len(pc["method_values"]) == len(pc["ablation_values"]) == 2
    split = data["split"]
    assert [a["mcmc_steps"] for a in split["arms"]] == [0, 2, 5, 10]
    for a in split["arms"]:
        assert 0 <= a["target_evals"] - split["total_evaluations"] < iters + (iters - 1) * a["mcmc_steps"]
        assert len(a["kl"]) == 2
    assert {"results.md", "split.png", "per_seed.csv"} <= {p.name for p in out.iterdir()}


def test_progress_bar_reaches_the_last_iteration(capsys):
    from onchip.methods.ais.samplers import SamplerConfig

    target = make_target("gmm2", 2)
    run_sampler(target, "em2c", SamplerConfig(n_samples=50, iterations=3, n_target_draws=50), seed=0, progress=True)
    assert "3/3" in capsys.readouterr().err


def test_the_cards_measured_tables_are_what_card_tables_writes_from_the_committed_runs():
    # every figure of the card's measured block comes from sweeps/ais/*/metrics.json through one script
    from support import load_script

    ct = load_script("sweeps/ais/card_tables.py")
    card = ct.CARD.read_text()
    assert ct.card_text(card) == card
    # an edited figure inside the block is found
    a, b = card.index(ct.START), card.index(ct.END)
    block = card[a:b]
    edited = block.replace("| em2c | equal-evaluations |", "| em2c | equal-evaluations |x", 1)
    assert edited != block and ct.card_text(card[:a] + edited + card[b:]) == card
