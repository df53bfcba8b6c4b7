"""RTL learners under cocotb + Verilator equal the golden model bit for bit, with the latency and II they report.

Every preset in both schedules runs 10000 random samples (5 % of them at the
format limits); the predictions and the parameters read back through the
parameter port at the end must equal :class:`onchip.model.GoldenLearner`'s.
More shapes (k = 1, a hidden KAN layer) are in the slow set. At ``timing = "fast"``
kan-paper (sequential) and kan-readout (pipelined) run by default, the other
(preset x schedule) pairs in the slow set.
"""

import numpy as np
import pytest

from onchip.hw import sim
from onchip.hw.sim import cached_design
from onchip.spec import PRESETS, Formats, LearnerSpec

from hw_support import golden_final, preset_design, stimulus, variant

N_SAMPLES = 10000


def run_and_compare(spec, design, n, seed):
    x, y = stimulus(spec, n, seed)
    want_preds, want_theta = golden_final(spec, x, y)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}],
                      measure=True)
    seg = out["segments"][0]
    got = sim.unpack_predictions(design, seg["preds"])
    assert got.shape == want_preds.shape
    bad = np.nonzero((got != want_preds).any(axis=1))[0]
    assert bad.size == 0, f"sample {bad[0]}: RTL {got[bad[0]]}, golden {want_preds[bad[0]]} ({bad.size} differ)"
    theta = sim.unpack_coef(design, seg["responses"])
    np.testing.assert_array_equal(theta, want_theta)
    return seg


def check_timing(design, seg, n):
    info = design.info
    acc, pred = np.asarray(seg["accept_cycles"]), np.asarray(seg["pred_cycles"])
    assert len(acc) == len(pred) == n
    # prediction latency: every sample, no stalls on either side
    assert set((pred - acc).tolist()) == {info["latency_cycles_prediction"]}
    # initiation interval: the bench offers a sample every cycle
    assert set(np.diff(acc).tolist()) == {info["initiation_interval"]}
    # update latency: k-th commit strobe of a layer belongs to sample k
    d = info["staleness"]
    worst = 0
    for l, commits in enumerate(seg["commit_cycles"]):
        commits = np.asarray(commits)
        assert len(commits) == n
        if info["schedule"] == "sequential":
            lat = commits - acc
            expect = info["stages"]["update"][l]
        else:
            lat = commits[: n - d] - acc[: n - d]  # the last d wait for the final flush
            expect = d + info["stages"]["read"][l]
        assert set(lat.tolist()) == {expect}
        worst = max(worst, expect)
    assert worst == info["latency_cycles_update"]


@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_bit_exact(name, schedule):
    spec, design = preset_design(name, schedule)
    seg = run_and_compare(spec, design, N_SAMPLES, seed=11)
    check_timing(design, seg, N_SAMPLES)


#: (preset, schedule) at timing = "fast" in the default run (one Verilator build each, shared
#: with test_hw_protocol); the rest of the matrix is slow
FAST_DEFAULT = [("kan-paper", "sequential"), ("kan-readout", "pipelined")]
FAST_MATRIX = [pytest.param(n, s, marks=() if (n, s) in FAST_DEFAULT else pytest.mark.slow)
               for n in PRESETS for s in ("sequential", "pipelined")]


@pytest.mark.parametrize("name,schedule", FAST_MATRIX)
def test_fast_preset_bit_exact(name, schedule):
    spec, design = preset_design(name, schedule, "fast")
    from onchip.hw.learner import min_staleness

    # more stages: a longer sequential II and a larger pipelined staleness, the same predictions
    assert design.info["min_staleness"] > min_staleness(PRESETS[name])
    seg = run_and_compare(spec, design, N_SAMPLES, seed=12)
    check_timing(design, seg, N_SAMPLES)


def test_fast_stage_plan_of_kan_paper():
    """Worked by hand from the rule (one multiplier, one carry chain or two adder-tree levels per
    stage) for the 1->1 KAN, k = 3 (4 products per output), acc = ap_fixed<40,14,TRN,WRAP>
    (products convert into it exactly), sequential:
    0 accept, the B-spline offset and clamp of the payload, 1 cell, basis table (registered in bank
    order) and RAM address, 2 read: the RAM words meet their multipliers, 3 raw product, 4 the two
    adder levels (two per stage) and 5 rounding to act (prediction), the output error made beside
    it from the sum (E = 5), 6 raw e x b, and its rounding inside the commit's subtraction (U = 6).
    Pipelined: the input registered first, the words registered after a by-basis multiplexer (one
    stage more each), the error a stage after the prediction, and delta rounded in a stage of its
    own before it enters the pending-update queue."""
    from onchip.hw.learner import min_staleness
    from onchip.hw.plan import stage_plan

    spec = KAN_PAPER.replace(timing="fast")
    plan = stage_plan(spec)
    assert (plan["prediction"], plan["read"], plan["update"], plan["error_fused"]) == (5, [2], [6], True)
    lay = plan["layers"][0]
    got = [lay[k] for k in ("in", "operands", "product", "terms", "out", "error", "delta", "rounds_in_commit")]
    assert got == [0, 2, 3, 3, 5, 5, 6, True]
    piped = stage_plan(spec.replace(schedule="pipelined", staleness=7))
    assert piped["layers"][0]["operands"] == 4 and piped["prediction"] == 7 and not piped["error_fused"]
    assert piped["update"] == [10] and not piped["layers"][0]["rounds_in_commit"]
    assert min_staleness(spec) == 7  # the pipelined plan's, whatever the schedule spec has
    # a rounding conversion into acc gets its own stage; compact keeps the 3-stage layer
    rnd = spec.replace(formats=Formats(**{**spec.formats.as_dict(), "acc": "ap_fixed<40,18,RND,WRAP>"}))
    assert stage_plan(rnd)["layers"][0]["terms"] == 4 and stage_plan(rnd)["prediction"] == 6
    # a hidden layer of 3 inputs, k = 2: 9 products per output, 4 adder levels in 2 stages
    wide = LearnerSpec(kind="kan", widths=(2, 3, 1), grid_size=4, spline_order=2, timing="fast")
    hid = stage_plan(wide)["layers"][1]
    assert hid["out"] - hid["terms"] == 3
    assert stage_plan(KAN_PAPER.replace(timing="compact"))["layers"][0] == {"in": 1, "read": 2, "operands": 2, "product": 3, "terms": 3, "out": 4,
                                                  "out_comb": False, "port": 0, "error": 5, "delta": 5, "update": 5,
                                                  "rounds_in_commit": False}
    # fast: the parameter port's decode (edge, q, bank and word) is registered, 4 stages
    assert plan["port"] == lay["port"] == 4


def test_fast_stage_plan_of_a_hidden_kan_layer():
    """Worked by hand for the 2->3->1 KAN, k = 2, sequential: layer 0 as kan-paper's layer up to its
    products (0 the payload's offset and clamp, 1 cell and basis table, 2 read, 3 raw products), its
    6 terms per output in 3 adder levels registered at 4 (one level) and 5 (two); its rounding into
    act leaves stage 5 unregistered and layer 1's B-spline unit registers its offset and clamp of it
    (in = 5: 6 cell and basis table, 7 read, 8 raw products, 9 terms in 4 levels registered at 9
    and 10, prediction 11 with the output error beside it). Backward: 12 layer 1's raw e x b (its
    update, rounded in the commit) and the raw e x dphi, 13 layer 0's error, 14 its raw e x b:
    14 cycles, a cycle less than with layer 0's outputs registered (at 6, then layer 1's offset and
    clamp). Pipelined keeps the register."""
    from onchip.hw.plan import stage_plan

    wide = LearnerSpec(kind="kan", widths=(2, 3, 1), grid_size=4, spline_order=2, timing="fast")
    plan = stage_plan(wide)
    assert (plan["prediction"], plan["read"], plan["update"]) == (11, [2, 7], [14, 12])
    l0, l1 = plan["layers"]
    assert (l0["out"], l0["out_comb"], l1["in"], l1["out_comb"], l1["prev"], l0["error"]) == (5, True, 5, False, 13, 13)
    piped = stage_plan(wide.replace(schedule="pipelined", staleness=20))
    assert [(ly["out"], ly["out_comb"]) for ly in piped["layers"]] == [(8, False), (15, False)]
    assert piped["layers"][1]["in"] == 8


#: The 1->1 KAN of the latency goal: G = 5, k = 3, ap_fixed<16,6> (bit-exactness: test_preset_bit_exact).
KAN_PAPER = PRESETS["kan-paper"]


def test_kan_paper_reports_latency_goal():
    # compact: at most 6 cycles from sample accepted to update committed (sequential), II = 1
    # pipelined; the default (timing = "auto") builds the sequential KAN at fast: the 6 cycles
    # worked by hand above (placed: sweeps/timing)
    seq = cached_design(variant(KAN_PAPER.replace(timing="compact"), "sequential")).info
    pip = cached_design(variant(KAN_PAPER, "pipelined")).info
    auto = cached_design(variant(KAN_PAPER, "sequential")).info
    assert seq["latency_cycles_update"] <= 6
    assert pip["initiation_interval"] == 1 and pip["timing"] == "compact"
    assert auto["timing"] == "fast" and auto["latency_cycles_update"] == 6


EXTRA_SHAPES = {
    "kan-1-1-k1": dict(kind="kan", widths=(1, 1), grid_size=8, spline_order=1, learning_rate=2.0**-3),
    "kan-2-1-k1": dict(kind="kan", widths=(2, 1), grid_size=8, spline_order=1, learning_rate=2.0**-4),
    "kan-2-4-1-k1": dict(kind="kan", widths=(2, 4, 1), grid_size=8, spline_order=1, init_scale=0.1,
                         learning_rate=2.0**-5),
    "kan-2-4-1-k3": dict(kind="kan", widths=(2, 4, 1), grid_size=8, spline_order=3, init_scale=0.1,
                         learning_rate=2.0**-5),
    "kan-2-3-1-k2": dict(kind="kan", widths=(2, 3, 1), grid_size=8, spline_order=2, init_scale=0.1,
                         learning_rate=2.0**-5),
    # two hidden layers, each output into the next B-spline unit unregistered at fast (out_comb), on a
    # grid narrower than the hidden outputs' range: hidden inputs are clamped and their errors masked
    "kan-2-2-2-1-k1": dict(kind="kan", widths=(2, 2, 2, 1), grid_size=4, spline_order=1, grid_range=(-1.0, 1.0),
                           init_scale=1.0, learning_rate=2.0**-5),
}

#: k = 2: three RAM banks per edge (not a power of two: the cell is split by a table and the
#: parameter port divides by G + k and by 3), and G + k = 10 leaves the last bank row part-filled
QUADRATIC = dict(kind="kan", widths=(1, 1), grid_size=8, spline_order=2, init_scale=0.2,
                 learning_rate=2.0**-3, name="kan-1-1-k2")


@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
def test_quadratic_spline_banks_bit_exact(schedule):
    spec = variant(LearnerSpec(**QUADRATIC), schedule)
    design = cached_design(spec)
    seg = run_and_compare(spec, design, N_SAMPLES, seed=9)
    check_timing(design, seg, N_SAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
@pytest.mark.parametrize("shape", list(EXTRA_SHAPES))
def test_extra_shapes_bit_exact(shape, schedule):
    spec = variant(LearnerSpec(name=shape, **EXTRA_SHAPES[shape]), schedule)
    design = cached_design(spec)
    seg = run_and_compare(spec, design, N_SAMPLES, seed=5)
    check_timing(design, seg, N_SAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
def test_fast_hidden_kan_layer_bit_exact(schedule):
    """timing = "fast" through a hidden KAN layer (back-propagated error, dphi, clamp mask) with
    k = 2 (three banks: cell split by a table, bank-ordered update deltas)."""
    spec = variant(LearnerSpec(name="kan-2-3-1-k2", timing="fast", **EXTRA_SHAPES["kan-2-3-1-k2"]), schedule)
    design = cached_design(spec)
    seg = run_and_compare(spec, design, N_SAMPLES, seed=7)
    check_timing(design, seg, N_SAMPLES)


def test_layers_share_one_keyword_only_constructor():
    from onchip.hw.layers import KanLayer, MlpLayer, layer_class
    from onchip.model.golden import initial_parameters, kernel_config, layout

    for name in ("kan-readout", "mlp-regression"):
        spec = PRESETS[name]
        cfg, theta0 = kernel_config(spec), initial_parameters(spec)
        make = layer_class(spec.kind)
        for l, lay in enumerate(layout(spec)):
            layer = make(spec=spec, config=cfg, theta0=theta0, index=l, live_backprop=True)
            assert (layer.offset, layer.n_in, layer.n_out, layer.size) == (lay.offset, lay.n_in, lay.n_out, lay.size)
            assert layer.last == (l == len(spec.widths) - 2)
        with pytest.raises(TypeError):
            make(spec, cfg, theta0, 0, True)  # keyword-only
        with pytest.raises(ValueError, match="index must be a layer number"):
            make(spec=spec, config=cfg, theta0=theta0, index=len(spec.widths) - 1, live_backprop=True)
        with pytest.raises(ValueError, match="theta0 must hold"):
            make(spec=spec, config=cfg, theta0=theta0[:-1], index=0, live_backprop=True)
    kan = PRESETS["kan-readout"]
    with pytest.raises(ValueError, match="MlpLayer builds a mlp layer"):
        MlpLayer(spec=kan, config=kernel_config(kan), theta0=initial_parameters(kan), index=0, live_backprop=True)
    assert layer_class("kan") is KanLayer
    with pytest.raises(ValueError, match="kind must be one of kan, mlp"):
        layer_class("cnn")


@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
def test_predict_first_bit_exact(schedule):
    """timing = "predict-first": the prediction out of the forward path's stages at once, the update
    behind it; the same predictions and parameters as the golden model, the latency and II reported."""
    spec, design = preset_design("kan-readout", schedule, "predict-first")
    seg = run_and_compare(spec, design, N_SAMPLES, seed=13)
    check_timing(design, seg, N_SAMPLES)


def test_predict_first_stage_plan_of_kan_readout():
    """Worked by hand for the 2->1 KAN, k = 3 (8 products), acc = ap_fixed<40,14,TRN,WRAP>:
    0 accept (the input register), 1 the B-spline unit whole and the RAM read address, 2 read: the
    RAM words times the basis values and one adder level, registered, 3 two levels and the rounding
    to act: the prediction (3 cycles, against fast's 6); 4 the prediction registered, 5 the output
    error, 6 raw e x b, 7 its rounding and the commit (fast: 7). Sequential II = 7 - 2 + 1 = 6,
    pipelined minimum staleness 7 - 2 = 5."""
    from onchip.hw.learner import min_staleness
    from onchip.hw.plan import stage_plan

    spec = PRESETS["kan-readout"].replace(timing="predict-first")
    plan = stage_plan(spec)
    assert (plan["prediction"], plan["read"], plan["update"], plan["port"]) == (3, [2], [7], 4)
    lay = plan["layers"][0]
    assert [lay[k] for k in ("in", "operands", "levels", "out", "error", "delta")] == [1, 2, 1, 3, 5, 6]
    assert min_staleness(spec) == 5
    info = cached_design(variant(spec, "sequential")).info
    assert (info["latency_cycles_prediction"], info["latency_cycles_update"], info["initiation_interval"]) == (3, 7, 6)
    fast = cached_design(variant(spec.replace(timing="fast"), "sequential")).info
    assert fast["latency_cycles_prediction"] == 6
