"""The serial (edge-lane) KAN datapath under cocotb + Verilator equals the golden model bit for bit.

Shapes: the 3->4->2 KAN of the timing family (G = 16, k = 3, 14-bit formats, 2 lanes: the
parallel datapath needs 204 MULT18X18D, more than the ULX3S 85F has), a 3->3->2 KAN in narrow
8-bit formats (k = 2, so k+1 banks are not a power of two; predictions, errors and coefficients
saturate, the accumulator wraps) under random stalls, and (slow) the 8->8->1 KAN on one lane.
Predictions and the parameters read back through the parameter port must equal
:class:`onchip.model.GoldenLearner` (sequential schedule); the measured latency, initiation
interval and commit cycles must equal what the design reports, and those the closed forms of
:mod:`onchip.hw.kan_serial`, written out here from the schedule.
"""

import dataclasses
import gc
import math
import re

import numpy as np
import pytest
from hw_support import (
    check_checkpoint_and_restore,
    check_reset_mid_stream,
    run_stream,
    stimulus,
)
from onchip.hw import generate, sim
from onchip.hw.kan_serial import SerialKanLearner
from onchip.hw.sim import cached_design
from onchip.model.golden import initial_parameters
from onchip.spec import PRESETS, Formats, LearnerSpec

#: the 3->4->2 KAN of sweeps/timing/family, on 2 lanes: layer 0 has an idle lane in its second group
WIDE = LearnerSpec(
    name="kan-3-4-2-g16-k3-serial", kind="kan", widths=(3, 4, 2), grid_size=16, spline_order=3,
    grid_range=(-4.0, 4.0), basis_table_bits=6, learning_rate=0.125, init_scale=0.25, datapath="serial", lanes=2,
    formats=Formats(input="ap_fixed<14,5,RND_CONV,SAT>", coef="ap_fixed<14,5,RND_CONV,SAT>",
                    basis="ap_fixed<14,2,RND_CONV,SAT>", act="ap_fixed<14,5,RND_CONV,SAT>",
                    grad="ap_fixed<14,5,RND_CONV,SAT>", acc="ap_fixed<36,14,TRN,WRAP>"),
)

#: 8-bit data, a 12-bit accumulator (sums wrap), k = 2, a different rounding mode per format and
#: SAT_ZERO errors
NARROW = LearnerSpec(
    name="kan-3-3-2-narrow-serial", kind="kan", widths=(3, 3, 2), grid_size=6, spline_order=2,
    grid_range=(-3.0, 3.0), basis_table_bits=4, learning_rate=0.5, init_scale=3.5, datapath="serial", lanes=2,
    allow_acc_wrap=True,
    formats=Formats(input="ap_fixed<8,3,RND,SAT>", coef="ap_fixed<8,3,RND_CONV,SAT>",
                    basis="ap_fixed<8,2,RND_CONV,SAT>", act="ap_fixed<8,3,RND_ZERO,SAT>",
                    grad="ap_fixed<8,2,RND_INF,SAT_ZERO>", acc="ap_fixed<12,4,TRN,WRAP>"),
)

#: 8->8->1 on one lane: 72 edges, one at a time
EIGHT = WIDE.replace(name="kan-8-8-1-serial", widths=(8, 8, 1), grid_size=8, lanes=1)


def closed_forms(spec):
    """(P, II, update per layer) from the schedule: per layer S = n_out * ceil(n_in / c) steps.
    Compact: a forward pass takes S + 4 cycles, a backward pass S + 4 (layer 0: S + 2) with the
    commit in its cycle S + 1. Fast: with R (products' conversion into acc rounds or saturates),
    K = ceil(ceil(log2(k+1)) / 2) and C the same over the most lanes, a forward pass takes
    S + 7 + R + K + C, a backward pass S + 9 + R + K (layer 0: S + 4), the commit in its cycle
    S + 3. The accepting cycle comes first and the next sample follows layer 0's commit."""
    steps = [b * math.ceil(a / min(spec.lanes, a)) for a, b in zip(spec.widths[:-1], spec.widths[1:])]
    if spec.stage_timing == "fast":
        f = spec.formats
        rounds = f.acc.frac_bits < f.coef.frac_bits + f.basis.frac_bits and f.acc.quant != "TRN"
        r = int(rounds or f.acc.overflow != "WRAP")
        k = math.ceil(math.ceil(math.log2(spec.spline_order + 1)) / 2)
        c = math.ceil(math.ceil(math.log2(min(spec.lanes, max(spec.widths[:-1])))) / 2)
        fwd, bwd, bwd0, commit = 7 + r + k + c, 9 + r + k, 4, 3
    else:
        fwd, bwd, bwd0, commit = 4, 4, 2, 1
    p = 1 + sum(s + fwd for s in steps)
    update, start = [0] * len(steps), p
    for l in reversed(range(len(steps))):
        update[l] = start + steps[l] + commit
        start += steps[l] + (bwd if l else bwd0)
    return p, update[0] + 1, update


def check_timing(spec, design, seg):
    """Measured cycles (no stalls) equal the reported ones and the closed forms."""
    info = design.info
    p, ii, update = closed_forms(spec)
    assert info["latency_cycles_prediction"] == p
    assert info["initiation_interval"] == ii
    assert info["stages"]["update"] == update
    assert info["latency_cycles_update"] == ii - 1
    acc, pred = np.asarray(seg["accept_cycles"]), np.asarray(seg["pred_cycles"])
    assert len(acc) == len(pred) > 1
    assert set((pred - acc).tolist()) == {p}
    assert set(np.diff(acc).tolist()) == {ii}
    for l, commits in enumerate(seg["commit_cycles"]):
        assert len(commits) == len(acc)  # one commit strobe per sample and layer
        assert set((np.asarray(commits) - acc).tolist()) == {update[l]}


@pytest.mark.parametrize("timing", [pytest.param("compact", marks=pytest.mark.slow), "fast"])  # fast: the default plan
def test_wide_kan_bit_exact_with_reported_timing(timing):
    spec = WIDE.replace(timing=timing)
    design, seg, theta = run_stream(spec, 3000, seed=11, measure=True)
    check_timing(spec, design, seg)
    assert np.any(theta != initial_parameters(spec))  # the stream did update the coefficients


@pytest.mark.parametrize("timing", ["compact", "fast"])
def test_narrow_kan_saturates_bit_exact_under_stalls(timing):
    spec = NARROW.replace(timing=timing)
    design, seg, theta = run_stream(spec, 2000, 21, bench_seed=4, p_valid=0.6, p_ready=0.45, p_param_ready=0.5)
    want = sim.unpack_predictions(design, seg["preds"])  # the golden predictions (run_stream asserts it)
    f = NARROW.formats
    # the stream really saturates: predictions at the act limits, coefficients at the coef limits
    assert np.sum((want == f.act.min_raw) | (want == f.act.max_raw)) >= 10
    assert np.any((theta == f.coef.min_raw) | (theta == f.coef.max_raw))


@pytest.mark.parametrize("timing", ["compact", "fast"])
def test_narrow_kan_timing(timing):
    spec = NARROW.replace(timing=timing)
    design, seg, _ = run_stream(spec, 200, seed=22, measure=True)
    check_timing(spec, design, seg)


@pytest.mark.parametrize("timing", ["compact", "fast"])
def test_reset_mid_stream_reloads_initial_parameters(timing):
    spec = NARROW.replace(timing=timing)
    check_reset_mid_stream(spec, cached_design(spec))


@pytest.mark.parametrize("timing", [pytest.param("compact", marks=pytest.mark.slow), "fast"])
def test_checkpoint_and_restore_mid_stream(timing):
    spec = WIDE.replace(timing=timing)
    design = cached_design(spec)
    xs = [stimulus(spec, n, seed=40 + k) for k, n in enumerate((300, 100, 200))]
    c = spec.formats.coef
    restore = np.random.default_rng(9).integers(c.min_raw, c.max_raw + 1, spec.parameter_count())
    check_checkpoint_and_restore(spec, design, xs, restore)


def test_fast_pass_lengths_from_the_formats_and_the_lanes():
    """The fast closed forms' R and C terms: a rounding conversion into acc (R) adds a cycle to
    every forward pass, and the lanes' adder tree (C: none on one lane, a stage for 2-4) is in
    the schedule the design reports, as the closed forms say."""
    fast = NARROW.replace(timing="fast")
    assert fast.formats.acc.quant == "TRN" and fast.formats.acc.overflow == "WRAP"  # R = 0
    rounding = fast.replace(formats=dataclasses.replace(fast.formats, acc="ap_fixed<12,4,RND,WRAP>"))
    assert closed_forms(rounding)[0] == closed_forms(fast)[0] + 2  # a cycle more in each of 2 forward passes
    for spec in (rounding, fast.replace(lanes=1), fast.replace(lanes=3)):
        d = generate(spec, axis=False)
        p, ii, update = closed_forms(spec)
        assert (d.info["latency_cycles_prediction"], d.info["initiation_interval"]) == (p, ii)
        assert d.info["stages"]["update"] == update


def test_fast_rounding_conversion_into_acc_bit_exact():
    """R = 1: the products' conversion into a rounding acc has its own stage (the other specs
    here convert by a shift), checked against the golden model with its schedule."""
    spec = NARROW.replace(timing="fast", formats=dataclasses.replace(NARROW.formats, acc="ap_fixed<12,4,RND,WRAP>"))
    design, seg, _ = run_stream(spec, 500, seed=23, measure=True)
    check_timing(spec, design, seg)


def test_fast_products_are_dsp_instances_with_their_registers():
    """Fast: per lane, the k+1 spline products, the k+1 delta products and (hidden inputs) the
    error product are registered raw; for ECP5 each is a MULT18X18D holding that register."""
    spec = WIDE.replace(timing="fast")
    k1 = spec.spline_order + 1
    v = generate(spec, axis=False, dsp="ecp5").verilog
    lanes = [min(spec.lanes, n) for n in spec.widths[:-1]]
    want = lanes[0] * 2 * k1 + lanes[1] * (2 * k1 + 1)
    assert len(re.findall(r"^\s*MULT18X18D #\(", v, re.M)) == want == 34
    assert multipliers(v) == 0  # every product of two signals is in a block
    assert "MULT18X18D" not in generate(spec, axis=False).verilog


@pytest.mark.slow
def test_fast_ecp5_products_equal_golden_under_stalls():
    from onchip.hw.dsp import mult18x18d_model
    from support import golden_final
    from hw_support import assert_same

    spec = WIDE.replace(timing="fast")
    design = generate(spec, axis=False, dsp="ecp5")
    design = dataclasses.replace(design, verilog=design.verilog + mult18x18d_model())
    x, y = stimulus(spec, 300, 3)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}],
                      seed=2, p_valid=0.8, p_ready=0.5)
    assert_same(design, out["segments"][0], *golden_final(spec, x, y))


def multipliers(verilog: str) -> int:
    """Products of two signals in the Verilog (constant multiplies of the address decoders left out;
    comments, such as the header's "value * 2^8" of a payload field, are not Verilog)."""
    code = "\n".join(line.split("//", 1)[0] for line in verilog.splitlines())
    return len(re.findall(r" \* (?!(?:\$signed\()?\d+'h)", code))


def test_multipliers_grow_with_lanes_not_edges():
    """Per lane: k+1 spline-dot products, k+1 update deltas and (hidden inputs) one error product:
    the same count for 3->4->2 and 8->8->1 on one lane, though the second has 72 edges against
    20, and one lane more adds one lane's."""
    k1 = WIDE.spline_order + 1
    one = multipliers(generate(WIDE.replace(lanes=1), axis=False).verilog)
    eight = multipliers(generate(EIGHT, axis=False).verilog)
    two = multipliers(generate(WIDE, axis=False).verilog)
    assert one == eight == 2 * k1 + (2 * k1 + 1)
    # layer 0 (3 inputs) and layer 1 (4 inputs) each gain a lane: 2 (k+1) + 2 (k+1) + 1 products
    assert two - one == 4 * k1 + 1
    # against the parallel datapath: products per edge (the whole network's k+1 per edge and more)
    assert one < (3 * 4 + 4 * 2) * k1


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["compact", "fast"])
def test_eight_input_kan_on_one_lane_bit_exact(timing):
    spec = EIGHT.replace(timing=timing)
    design, seg, _ = run_stream(spec, 300, seed=31, measure=True)
    check_timing(spec, design, seg)


def test_grid_size_does_not_change_the_multipliers():
    """Resources flat in G: the lanes' arithmetic is the same for G = 4 and G = 64 (only the RAM
    depth and the B-spline tables change)."""
    small = generate(WIDE.replace(grid_size=4, grid_range=(-4.0, 4.0), lanes=1), axis=False).verilog
    large = generate(WIDE.replace(grid_size=64, grid_range=(-4.0, 4.0), lanes=1), axis=False).verilog
    assert multipliers(small) == multipliers(large)


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="kind='mlp'"):
        SerialKanLearner(PRESETS["mlp-readout"].replace(datapath="serial"))
    with pytest.raises(ValueError, match="theta"):
        SerialKanLearner(NARROW, theta=np.zeros(3))
    with pytest.raises(ValueError, match="schedule='pipelined'"):
        NARROW.replace(schedule="pipelined")
    with pytest.raises(ValueError, match="lanes=2 applies to the serial KAN datapath only"):
        NARROW.replace(datapath="parallel")
    with pytest.raises(ValueError, match="lanes=4 is more than the widest layer's 3 inputs"):
        NARROW.replace(lanes=4)
    with pytest.raises(ValueError, match="lanes must be an integer >= 1, got 0"):
        NARROW.replace(lanes=0)
    gc.collect()


def test_spec_round_trips_through_toml():
    text = WIDE.to_toml()
    assert 'datapath = "serial"' in text and "lanes = 2" in text
    assert LearnerSpec.from_toml(text) == WIDE
    # a parallel KAN's text is unchanged (no datapath, no lanes): cache keys of existing specs stay
    assert "lanes" not in PRESETS["kan-paper"].to_toml() and "datapath" not in PRESETS["kan-paper"].to_toml()
