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
    """(P, II, update per layer) from the schedule: per layer S = n_out * ceil(n_in / c) steps; a
    forward pass takes S + 4 cycles, a backward pass S + 4 (layer 0: S + 2) with the commit in
    its cycle S + 1; the accepting cycle comes first and the next sample follows layer 0's commit."""
    steps = [b * math.ceil(a / min(spec.lanes, a)) for a, b in zip(spec.widths[:-1], spec.widths[1:])]
    p = 1 + sum(s + 4 for s in steps)
    update, start = [0] * len(steps), p
    for l in reversed(range(len(steps))):
        update[l] = start + steps[l] + 1
        start += steps[l] + 4
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


def test_wide_kan_bit_exact_with_reported_timing():
    design, seg, theta = run_stream(WIDE, 3000, seed=11, measure=True)
    check_timing(WIDE, design, seg)
    assert np.any(theta != initial_parameters(WIDE))  # the stream did update the coefficients


def test_narrow_kan_saturates_bit_exact_under_stalls():
    design, seg, theta = run_stream(NARROW, 2000, 21, bench_seed=4, p_valid=0.6, p_ready=0.45, p_param_ready=0.5)
    want = sim.unpack_predictions(design, seg["preds"])  # the golden predictions (run_stream asserts it)
    f = NARROW.formats
    # the stream really saturates: predictions at the act limits, coefficients at the coef limits
    assert np.sum((want == f.act.min_raw) | (want == f.act.max_raw)) >= 10
    assert np.any((theta == f.coef.min_raw) | (theta == f.coef.max_raw))


def test_narrow_kan_timing():
    design, seg, _ = run_stream(NARROW, 200, seed=22, measure=True)
    check_timing(NARROW, design, seg)


def test_reset_mid_stream_reloads_initial_parameters():
    check_reset_mid_stream(NARROW, cached_design(NARROW))


def test_checkpoint_and_restore_mid_stream():
    design = cached_design(WIDE)
    xs = [stimulus(WIDE, n, seed=40 + k) for k, n in enumerate((300, 100, 200))]
    c = WIDE.formats.coef
    restore = np.random.default_rng(9).integers(c.min_raw, c.max_raw + 1, WIDE.parameter_count())
    check_checkpoint_and_restore(WIDE, design, xs, restore)


def multipliers(verilog: str) -> int:
    """Products of two signals in the Verilog (constant multiplies of the address decoders left out)."""
    return len(re.findall(r" \* (?!(?:\$signed\()?\d+'h)", verilog))


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
def test_eight_input_kan_on_one_lane_bit_exact():
    design, seg, _ = run_stream(EIGHT, 300, seed=31, measure=True)
    check_timing(EIGHT, design, seg)


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
    with pytest.raises(ValueError, match="timing='fast'"):
        NARROW.replace(timing="fast")
    gc.collect()


def test_spec_round_trips_through_toml():
    text = WIDE.to_toml()
    assert 'datapath = "serial"' in text and "lanes = 2" in text
    assert LearnerSpec.from_toml(text) == WIDE
    # a parallel KAN's text is unchanged (no datapath, no lanes): cache keys of existing specs stay
    assert "lanes" not in PRESETS["kan-paper"].to_toml() and "datapath" not in PRESETS["kan-paper"].to_toml()
