"""onchip autotune (SPARK's factor-conditioned search): scope guard, rules, budgets, surrogate, CLI."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from onchip.cli import main
from onchip.methods.autotune import interaction, search, space
from onchip.methods.autotune.evaluate import DIAGNOSTICS, Budgets, Evaluation, diagnose, make_task_stream
from onchip.methods.autotune.resources import Surrogate, features, group_of
from onchip.methods.autotune.space import FACTOR_FIELDS, FACTORS, ScopeViolation, scope_check
from onchip.spec import PRESETS, LearnerSpec
from method_support import assert_refused, quick_run


def _ev(spec, **diag) -> Evaluation:
    """An evaluation with planted diagnostics (no golden run)."""
    d = {k: 0.0 for k in DIAGNOSTICS}
    d.update(diag)
    return Evaluation(spec, 0.5, True, 0.5, d, {"lut": 100.0, "ff": 50.0, "dsp": 1.0, "initiation_interval": 4,
                                                 "latency_cycles_update": 5})


def _random_specs(n, seed=0):
    rng = np.random.default_rng(seed)
    return [space.sample_spec(rng, int(rng.integers(1, 3))) for _ in range(n)] + [PRESETS["kan-readout"],
                                                                               PRESETS["mlp-regression"]]


# ------------------------------------------------------------------------------ factor regions
def test_factor_fields_partition_the_spec():
    """Every spec field belongs to exactly one factor, except the four no edit may touch."""
    owned = [f for fields in FACTOR_FIELDS.values() for f in fields]
    assert len(owned) == len(set(owned))
    assert set(owned) | set(space.FROZEN_FIELDS) == set(space.flat_fields(PRESETS["kan-readout"]))
    assert not set(owned) & set(space.FROZEN_FIELDS)


def test_every_move_changes_only_its_own_factor():
    """Exhaustive over the move table and 40 specs: a move's valid result differs only in its factor's fields."""
    checked = 0
    for spec in _random_specs(12):
        for factor in FACTORS:
            for move, changes in space.applicable(spec, factor):
                assert move.factor == factor
                try:
                    child = space.apply_changes(spec, changes)
                except ValueError:
                    continue
                touched = space.changed_fields(spec, child)
                assert touched and touched <= set(FACTOR_FIELDS[factor]), (move.name, touched)
                checked += 1
    assert checked > 150


@pytest.mark.parametrize("arm", ["spark", "rc-sar-only", "asr-only"])
def test_scoped_rewriter_never_leaves_its_factor(arm):
    """Property over 250 proposals with random diagnostics: every accepted edit changes fields of the
    routed factor only; proposals whose knowledge repairs reach into another factor are rejected."""
    rng = np.random.default_rng(1)
    specs = _random_specs(20, seed=2)
    accepted = rejected = 0
    for i in range(250):
        spec = specs[i % len(specs)]
        diag = {k: float(rng.uniform(0, 0.3)) for k in DIAGNOSTICS}
        parent = _ev(spec, **diag)
        child, status, factor = search.propose_edit(arm, parent, rng)
        if status == "ok":
            touched = space.changed_fields(spec, child)
            assert touched <= set(FACTOR_FIELDS[factor]), (arm, factor, touched)
            accepted += 1
        rejected += status == "scope"
    assert accepted > 120
    if arm == "asr-only":
        assert rejected == 0  # random in-factor moves carry no cross-factor repairs


def test_scope_guard_rejects_out_of_factor_edits():
    """Hand-made edits: in-scope passes, anything touching another factor (or a frozen field) is refused."""
    p = PRESETS["kan-readout"]
    scope_check(p, p.replace(grid_size=16, spline_order=2), "BASIS")
    scope_check(p, p, "SCHEDULE")  # no change is in scope
    with pytest.raises(ScopeViolation, match="learning_rate"):
        scope_check(p, p.replace(grid_size=16, learning_rate=2.0**-3), "BASIS")
    with pytest.raises(ScopeViolation, match="init_seed"):
        scope_check(p, p.replace(init_seed=3), "SCHEDULE")
    with pytest.raises(ScopeViolation, match="formats.coef"):
        scope_check(p, space.apply_changes(p, {"formats.coef": "ap_fixed<12,4,RND_CONV,SAT>"}), "TOPOLOGY")
    with pytest.raises(ValueError, match="factor must be one of"):
        scope_check(p, p, "LAYOUT")


def test_scope_guard_acts_on_the_entanglement_map():
    """With a measured map the guard refuses a change in an entangled factor, lets an additive one
    through (and names it), and always refuses a frozen field."""
    p = PRESETS["kan-readout"]
    child = p.replace(grid_size=16, learning_rate=2.0**-3)  # BASIS + SCHEDULE
    tangled = frozenset({frozenset(("BASIS", "SCHEDULE"))})
    with pytest.raises(ScopeViolation, match="learning_rate"):
        scope_check(p, child, "BASIS", tangled)
    assert scope_check(p, child, "BASIS", frozenset({frozenset(("BASIS", "NUMERICS"))})) == {"SCHEDULE"}
    assert scope_check(p, child, "BASIS", frozenset()) == {"SCHEDULE"}
    with pytest.raises(ScopeViolation, match="init_seed"):
        scope_check(p, p.replace(grid_size=16, init_seed=4), "BASIS", frozenset())


def test_coupled_followups_reach_into_the_partner_factor():
    """A new hidden layer gets non-zero initial parameters, a grid range sets the input integer bits,
    a smaller step under update underflow adds a coefficient fractional bit; nothing else changes."""
    p = PRESETS["kan-regression"]  # init 0, grid ±2, input ap_fixed<16,4>
    assert p.init_scale == 0.0 and p.formats.input.int_bits == 4
    out = search.coupled_followups(p, {"widths": (1, 2, 1)}, {})
    assert out["init_scale"] > 0 and set(out) == {"widths", "init_scale"}
    assert search.coupled_followups(p.replace(init_scale=0.25), {"widths": (1, 2, 1)}, {}) == {"widths": (1, 2, 1)}
    assert "formats.input" not in search.coupled_followups(p, {"grid_range": (-8.0, 8.0)}, {})  # ±8 needs 4
    fi = search.coupled_followups(p, {"grid_range": (-16.0, 16.0)}, {})["formats.input"]
    assert fi.int_bits == 5 and fi.frac_bits == p.formats.input.frac_bits
    out = search.coupled_followups(p, {"grid_range": (-1.0, 1.0)}, {})
    assert out["formats.input"].int_bits == 1 and out["formats.input"].frac_bits == p.formats.input.frac_bits
    lr = {"learning_rate": p.learning_rate / 2}
    assert search.coupled_followups(p, lr, {"zero_update": 0.0}) == lr
    out = search.coupled_followups(p, lr, {"zero_update": 0.3})
    assert out["formats.coef"].frac_bits == p.formats.coef.frac_bits + 1


def test_the_guard_refuses_followups_only_into_entangled_factors():
    """SPARK routed to BASIS with a grid-clamping symptom: its range moves carry an input-format
    follow-up (NUMERICS), refused when BASIS x NUMERICS is entangled, evaluated when additive, and
    always evaluated without the guard."""
    parent = _ev(PRESETS["kan-regression"], clamp_grid=0.5)
    counts = {}
    for name, arm, tangled in (("entangled", "spark", frozenset({frozenset(("BASIS", "NUMERICS"))})),
                               ("additive", "spark", frozenset()),
                               ("noguard", "spark-noguard", frozenset({frozenset(("BASIS", "NUMERICS"))}))):
        rng = np.random.default_rng(0)
        got = {"scope": 0, "cross": 0}
        for _ in range(200):
            child, status, factor = search.propose_edit(arm, parent, rng, tangled)
            got["scope"] += status == "scope"
            if status == "ok" and space.factors_touched(parent.spec, child) - {factor}:
                got["cross"] += 1
        counts[name] = got
    assert counts["entangled"]["scope"] > 20 and counts["entangled"]["cross"] == 0
    assert counts["additive"]["scope"] == 0 and counts["additive"]["cross"] > 20
    assert counts["noguard"]["scope"] == 0 and counts["noguard"]["cross"] > 20


def _table(rng, interaction: float, n: int = 4, noise: float = 0.05) -> np.ndarray:
    a, b = np.array([-1.0, 0.0, 1.0]), np.array([-1.0, 0.0, 1.0])
    mean = 0.3 * a[:, None] + 0.2 * b[None, :] + interaction * a[:, None] * b[None, :]
    return mean[:, :, None] + noise * rng.standard_normal((3, 3, n))


def test_two_way_anova_splits_the_sum_of_squares():
    """SS_A + SS_B + SS_AxB + SS_E is the total sum of squares; the degrees of freedom add up."""
    y = _table(np.random.default_rng(0), 0.2)
    t = interaction.two_way_anova(y, permutations=0)
    assert t["ss_a"] + t["ss_b"] + t["ss_ab"] + t["ss_error"] == pytest.approx(((y - y.mean()) ** 2).sum())
    assert t["df_a"] + t["df_b"] + t["df_ab"] + t["df_error"] == y.size - 1
    assert t["p_ab_perm"] is None
    with pytest.raises(ValueError, match="y"):
        interaction.two_way_anova(np.zeros((3, 1, 4)))


def test_interaction_test_flags_a_planted_interaction_and_not_an_additive_pair():
    """Planted tables (3 x 3 levels, 4 replicates, noise 0.05): an interaction of 0.15 per unit is
    flagged as entangled on every table; an additive pair (same main effects) is flagged on at most
    a few of 60 (the corrected level is 0.05/6 per pair)."""
    rng = np.random.default_rng(11)
    planted = [interaction.is_entangled(interaction.two_way_anova(_table(rng, 0.15), permutations=300, seed=i), 6)
               for i in range(20)]
    additive = [interaction.two_way_anova(_table(rng, 0.0), permutations=300, seed=i) for i in range(60)]
    assert all(planted)
    assert sum(interaction.is_entangled(t, 6) for t in additive) <= 2
    # the permutation p-values of additive tables are spread over (0, 1], not piled near 0
    ps = np.array([t["p_ab_perm"] for t in additive])
    assert 0.3 < np.median(ps) < 0.7 and np.mean(ps < 0.05) < 0.15


def test_measure_coupling_finds_the_planted_pair_through_the_probes():
    """A planted score over specs that couples grid range and learning rate (and adds the other probes)
    gives exactly that pair in the guard's map."""
    preset = interaction.coupling_base(PRESETS["kan-regression"])

    def score(spec, seed):
        a = np.log2(spec.grid_range[1])
        s = spec.lr_shift
        h = space.hidden_of(spec)
        noise = 0.01 * np.random.default_rng([seed, int(a + 5), s, h, spec.formats.coef.int_bits]).standard_normal()
        return 0.1 * a - 0.05 * s + 0.02 * h + 0.03 * spec.formats.coef.int_bits + 0.2 * a * s + noise

    m = interaction.measure_coupling(score, preset, [0, 1, 2], permutations=300)
    assert len(m["pairs"]) == 6 and m["evaluations"] == 6 * 9 * 3
    assert m["entangled"] == [["BASIS", "SCHEDULE"]]
    assert interaction.entangled_pairs(m) == frozenset({frozenset(("BASIS", "SCHEDULE"))})
    with pytest.raises(ValueError, match="seeds"):
        interaction.measure_coupling(score, preset, [0])


def test_freeform_edits_can_touch_several_factors():
    rng = np.random.default_rng(3)
    parent = _ev(PRESETS["kan-readout"], **{k: 0.2 for k in DIAGNOSTICS})
    multi = 0
    for _ in range(60):
        child, status, factor = search.propose_edit("freeform", parent, rng)
        assert factor is None
        if status == "ok":
            multi += len(space.factors_touched(parent.spec, child)) > 1
    assert multi > 10


# ------------------------------------------------------------------------------ router and conditioner
@pytest.mark.parametrize("diag,factor,move", [
    ({"sat_coef": 0.5}, "NUMERICS", "coef +int"),
    ({"sat_input": 0.5}, "NUMERICS", "input +int"),
    ({"zero_error": 0.8}, "NUMERICS", "grad +frac"),
    ({"clamp_grid": 0.4}, "BASIS", "range x2"),
    ({"recovery_excess": 0.5}, "SCHEDULE", "lr x2"),
    ({"ii_over": 1.0}, "SCHEDULE", "schedule swap"),
])
def test_router_and_conditioner_follow_planted_diagnostics(diag, factor, move):
    """One planted symptom: the router's highest-scoring factor and the conditioner's top move are the
    ones its rule names."""
    ev = _ev(PRESETS["kan-readout"], **diag)
    scores = search.factor_scores(ev)
    assert max(scores, key=scores.get) == factor
    options = search.directive(ev, factor)
    assert max(options, key=lambda o: o[2])[0].name == move


def test_router_gives_no_weight_to_a_factor_without_moves():
    """An MLP has no BASIS move (the grid is a KAN field): the router never picks BASIS for it."""
    ev = _ev(PRESETS["mlp-readout"], clamp_grid=1.0)
    assert search.factor_scores(ev)["BASIS"] == 0.0
    rng = np.random.default_rng(0)
    assert all(search.route(ev, rng) != "BASIS" for _ in range(200))


def test_repair_raises_staleness_and_input_bits():
    """The knowledge's follow-up repairs give buildable specs (outside the move's factor)."""
    p = PRESETS["kan-readout"].replace(schedule="sequential", staleness=0)
    ch = search.repair(p, {"schedule": "pipelined"})
    from onchip.hw.learner import min_staleness
    assert ch["staleness"] == min_staleness(space.apply_changes(p, {"schedule": "pipelined", "staleness": 9}))
    p = space.apply_changes(p, {"formats.input": "ap_fixed<16,3,RND_CONV,SAT>"})  # holds [-4, 4)
    with pytest.raises(ValueError, match="too narrow"):
        space.apply_changes(p, {"grid_range": (-8.0, 8.0)})
    ch = search.repair(p, {"grid_range": (-8.0, 8.0)})
    child = space.apply_changes(p, ch)
    space.hardware_check(child)
    assert child.grid_range == (-8.0, 8.0) and child.formats.input.int_bits == 4
    assert child.formats.input.frac_bits == 13  # the fractional bits are kept


# ------------------------------------------------------------------------------ budgets and diagnostics
def test_budget_overshoot_and_objective_order():
    b = Budgets(lut=1000, dsp=10, ii_max=2, latency_max_ns=50, fmax_mhz=100)
    res = {"lut": 1500, "dsp": 5, "initiation_interval": 4, "latency_cycles_update": 4}
    over = b.overshoot(res)
    assert over == pytest.approx({"lut_over": 0.5, "dsp_over": 0.0, "ii_over": 1.0, "latency_over": 0.0})
    res["latency_cycles_update"] = 10  # 100 ns at 100 MHz
    assert b.overshoot(res)["latency_over"] == pytest.approx(1.0)
    assert Budgets().overshoot(res) == {"lut_over": 0.0, "dsp_over": 0.0, "ii_over": 0.0, "latency_over": 0.0}


class _LutByParams:
    """A stand-in surrogate: 100 LUTs per parameter."""

    def predict(self, spec):
        return {"lut": 100.0 * spec.parameter_count(), "ff": 0.0, "dsp": 0.0}


def test_target_mode_ranks_smaller_designs_that_hold_the_target_first():
    """Smallest-learner mode: holding the target outranks missing it, and fewer LUTs outrank more."""
    from onchip.methods.autotune.evaluate import Evaluator

    stream = make_task_stream("readout-drift", 2000, 0)
    small = PRESETS["mlp-readout"].replace(widths=(2, 1))  # 3 parameters: 300 LUTs
    big = PRESETS["mlp-readout"]  # 33 parameters: 3300 LUTs
    ev = Evaluator(stream, "readout", Budgets(lut=5000), _LutByParams(), target=0.5)
    a, b = ev(small), ev(big)
    assert a.accuracy >= 0.5 and b.accuracy >= 0.5
    assert a.objective == pytest.approx(2 - 300 / 5000) and b.objective == pytest.approx(2 - 3300 / 5000)
    assert a.diagnostics["above_target"] == 1.0
    strict = Evaluator(stream, "readout", Budgets(lut=5000), _LutByParams(), target=1.0)
    c = strict(small)
    assert c.objective == pytest.approx(c.accuracy) and c.diagnostics["above_target"] == 0.0
    assert ev.evaluations == 2 and ev(small) is a and ev.evaluations == 2  # a repeat is not counted
    res = search.ArmResult("spark", history=[a, b])
    assert res.best(0.5) is a and res.best(0.999) is None
    assert res.best() is max((a, b), key=lambda e: e.accuracy)


def test_on_edit_sees_each_evaluated_edit_with_its_parent_and_does_not_steer():
    """run_edit_arm's on_edit: one call per evaluated edit, in order, the child an edit of an earlier
    evaluation; the same search as without it."""
    from onchip.methods._report import rng

    class Counted:  # an evaluator without a golden run: fewer parameters score higher
        evaluations = 0

        def __call__(self, spec):
            self.evaluations += 1
            e = _ev(spec)
            return Evaluation(spec, e.accuracy, True, -float(spec.parameter_count()), e.diagnostics, e.resources)

    runs, seen = [], []
    for hook in (None, lambda parent, child: seen.append((parent, child))):
        ev = Counted()
        runs.append(search.run_edit_arm("spark-noguard", PRESETS["mlp-readout"], ev, 8, rng(0, "test-on-edit"),
                                        leak=0.5, leak_pairs=frozenset({frozenset(("NUMERICS", "TOPOLOGY"))}),
                                        on_edit=hook))
    plain, hooked = runs
    assert [e.spec for e in hooked.history] == [e.spec for e in plain.history]
    assert [child for _, child in seen] == hooked.history[1:] and len(seen) == 7
    for k, (parent, child) in enumerate(seen):
        assert any(parent is e for e in hooked.history[: k + 1])
        assert space.factors_touched(parent.spec, child.spec)


def test_diagnostics_on_planted_streams():
    """Inputs beyond the format saturate; a constant error sets the error level; zero predictions on a
    ±1 target round no update to zero; a post-drift burst of errors is the recovery excess."""
    from onchip.model import GoldenLearner
    from onchip.tasks import DriftEvent, Stream

    spec = PRESETS["kan-readout"]  # input ap_fixed<16,4>: [-8, 8)
    n = 1000
    x = np.zeros((n, 2))
    x[:100] = 20.0
    y = np.where(np.arange(n) % 2, 1.0, -1.0)[:, None]
    pred = np.where(np.arange(n) < 600, -y[:, 0], y[:, 0])[:, None]  # all wrong before 600
    pred[700:] = y[700:]
    stream = Stream("qubit-readout", x, y, (DriftEvent(500, "drift"),))
    g = GoldenLearner(spec)
    d = diagnose(spec, stream, "readout", g.quantize_inputs(x), g.quantize_targets(pred), g.theta)
    assert d["sat_input"] == pytest.approx(0.1)
    assert d["clamp_grid"] == pytest.approx(0.1)  # grid [-4, 4)
    assert d["sat_pred"] == 0.0 and d["sat_coef"] == 0.0 and d["zero_update"] == 0.0
    # segments [0, 500) and [500, 1000): last 10% error 1.0 and 0.0; first 10% after drift all wrong
    assert d["error_level"] == pytest.approx(0.5)
    assert d["recovery_excess"] == pytest.approx(1.0)


def test_heldout_streams_differ_from_search_streams():
    a = make_task_stream("readout-drift", 3000, 0)
    b = make_task_stream("readout-gain-decay", 3000, 0)
    assert [e.index for e in a.events] != [e.index for e in b.events]
    r = make_task_stream("regression-heldout", 300, 0)
    assert r.x.shape == (300, 1) and len(r.events) == 2
    with pytest.raises(ValueError, match="task"):
        make_task_stream("nope", 300, 0)


# ------------------------------------------------------------------------------ surrogate and genes
def test_surrogate_features_count_multipliers():
    """KAN 2->1, k=3: 8 forward (coef x basis) + 8 update (grad x basis) products, one DSP tile each at 16 bits."""
    f = features(PRESETS["kan-readout"])
    assert f[1] == 16  # tiles
    assert f[2] == 16 * 40  # products x accumulator width
    assert f[4] == PRESETS["kan-readout"].parameter_count() * 16
    # MLP 2-8-1: 16+8 forward, 16+8 update, 8 back-propagation products
    assert features(PRESETS["mlp-readout"])[2] == (24 + 24 + 8) * 40


def test_surrogate_recovers_a_planted_linear_model():
    """NNLS on points generated by a non-negative linear model of the features predicts it exactly."""
    specs = _random_specs(40, seed=5)
    coef = np.array([50.0, 3.0, 0.1, 0.2, 0.5, 0.01, 0.0, 2.0])
    pts = [{"spec": s, "lut": float(features(s) @ coef), "ff": float(features(s) @ coef) / 2,
            "dsp": float(features(s)[1])} for s in specs]
    sur = Surrogate(pts)
    for s in _random_specs(5, seed=9):
        p = sur.predict(s)
        if group_of(s) in sur._fits:
            assert p["lut"] == pytest.approx(float(features(s) @ coef), rel=1e-6)
            assert p["dsp"] == pytest.approx(float(features(s)[1]), rel=1e-6)
    with pytest.raises(ValueError, match="at least 3"):
        Surrogate(pts[:2])


def test_genes_round_trip_and_toml_round_trip():
    for name in ("kan-readout", "kan-regression"):
        p = PRESETS[name]
        back = space.spec_from_genes(search.genes_of(p), p.n_in, p.n_out).replace(name=p.name, timing=p.timing)
        assert back == p
    for s in _random_specs(20, seed=4):
        back = LearnerSpec.from_toml(s.to_toml())  # an MLP's TOML leaves out the KAN fields
        assert back.to_toml() == s.to_toml() and (s.kind == "mlp" or back == s)


def test_evals_to_reach():
    best = np.array([np.nan, 0.5, 0.7, 0.7, 0.9])
    assert search.evals_to_reach(best, 0.7) == 3
    assert search.evals_to_reach(best, 0.95) is None


# ------------------------------------------------------------------------------ command line
@pytest.mark.parametrize("argv,flag", [
    (["--lut-budget", "-5"], "--lut-budget"),
    (["--arms", "random,tpe"], "--arms"),
    (["--latency-max-ns", "100"], "--latency-max-ns"),
    (["--samples", "10"], "--samples"),
    (["--target", "1.5"], "--target"),
    (["--arms", "spark,bogus"], "--arms"),
    (["--data", "shots.npy"], "--data"),
    (["--control-seeds", "3"], "--control-seeds"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("autotune", ["--quick", *argv], flag, tmp_path / "o", capsys)


def test_quick_run_writes_results_and_a_spec_run_accepts(tmp_path):
    out = tmp_path / "autotune"
    m = quick_run("autotune", out, files=("metrics.json", "results.md", "best_spec.toml", "pareto.csv",
                                          "pareto.png", "curves.png", "coupling.png"))
    h = m["headline"]
    assert "std" in h
    assert h["method"] == "spark" and h["direction"] == "higher" and h["seeds"] == [0, 1, 2]
    assert set(h["baselines"]) == {"spark-noguard", "freeform", "asr-only", "rc-sar-only", "random", "tpe",
                                   "preset"}
    assert set(h["paired"]) == set(h["baselines"]) - {"preset"}
    assert h["budget"]["evaluations_per_arm"] == 8
    for arm, r in m["arms"].items():
        assert r["evaluations"] == [8, 8, 8], arm  # equal budget, every seed
        assert len(r["scope_rejected_per_seed"]) == 3 and sum(r["scope_rejected_per_seed"]) == r["scope_rejected"]
    # the coupling measured before the search, and the guard's map made of it
    cp = m["coupling"]
    assert len(cp["pairs"]) == 6 and all(0 <= r["p_ab_perm"] <= 1 and 0 <= r["interaction_share"] <= 1
                                         for r in cp["pairs"])
    assert cp["entangled"] == [[r["a"], r["b"]] for r in cp["pairs"] if r["entangled"]]
    assert m["guard"]["entangled_pairs"] == cp["entangled"]
    # SPARK never evaluated an edit joining its routed factor with an entangled one
    tangled = {search.pair_name(a, b) for a, b in cp["entangled"]}
    assert not tangled & set(m["arms"]["spark"]["cross_factor_pairs_evaluated"])
    # the controls: a leak across the most coupled pair (the guard refuses it) and across the least coupled
    # one (the guard lets the leaks through, refusing only its ordinary cases; the interval holds zero)
    pc, nc = m["positive_control"], m["negative_control"]
    assert (pc["method"], pc["ablation"]) == ("spark", "spark-noguard") and len(pc["seeds"]) >= 2
    assert len(pc["paired"]["ci95"]) == 2 and isinstance(pc["sensitive"], bool)
    shares = {(r["a"], r["b"]): r["interaction_share"] for r in cp["pairs"]}
    assert shares[tuple(pc["leak_pair"])] == max(s for p, s in shares.items() if list(p) in cp["entangled"])
    assert list(nc["leak_pair"]) not in cp["entangled"]
    refused = [sum(d["scope_rejected"] for d in x["per_seed"]["spark"]) for x in (pc, nc)]
    assert refused[0] > refused[1] and nc["holds_zero"]
    # the returned spec: within the LUT budget (surrogate: no Yosys in --quick), accepted by run / generate
    spec = LearnerSpec.from_toml((out / "best_spec.toml").read_text())
    assert tomllib.loads((out / "best_spec.toml").read_text())["kind"] == spec.kind
    assert m["best"]["surrogate"]["lut"] <= 600
    from onchip.commands.generate import resolve_spec
    from onchip.hw import build_learner

    build_learner(resolve_spec(str(out / "best_spec.toml")))  # generate's checks without the Verilog
    run_out = tmp_path / "run"
    assert main(["run", "--task", "drift-regression", "--model", spec.kind, "--spec", str(out / "best_spec.toml"),
                 "--samples", "300", "--quiet", "--out", str(run_out)]) == 0
    assert (run_out / "metrics.json").is_file()


@pytest.mark.slow
def test_best_spec_generates_verilog(tmp_path):
    """The returned spec through ``onchip generate`` (Verilog conversion: ~10 s)."""
    out = tmp_path / "autotune"
    assert main(["autotune", "--quick", "--quiet", "--seeds", "0", "--out", str(out)]) == 0
    assert main(["generate", "--spec", str(out / "best_spec.toml"), "--out", str(tmp_path / "gen")]) == 0
    assert (tmp_path / "gen" / "onchip_learner.v").is_file()


def test_the_surrogate_is_fitted_to_package_data_alone(tmp_path, monkeypatch):
    """The calibration table ships in the package with the resources sweep's rows folded in, so an
    installed onchip (no checkout, another working folder) fits the same surrogate."""
    from onchip.methods.autotune import resources

    table = tomllib.loads(resources.CALIBRATION.read_text())["point"]
    swept = [p for p in table if p.get("source", "").endswith("sweeps/resources/results/results.csv")]
    assert len(swept) >= 10  # the sweep's grid-size and hidden-width rows
    monkeypatch.chdir(tmp_path)
    points = resources.load_calibration()
    assert len(points) == len(table)
    # the sweep's kan-readout grid sizes are among the points
    grids = sorted({p["spec"].grid_size for p in points if p["spec"].kind == "kan" and p["spec"].name == "kan-readout"})
    assert grids[0] <= 4 and grids[-1] >= 32
