"""The serial (time-multiplexed) MLP datapath under cocotb + Verilator equals the golden model bit for bit.

Shapes: the mlp-readout preset (2->8->1, 16-bit formats, 10000 samples), a
4->6->5->3 MLP in narrow 8-bit formats whose predictions and weights
saturate (with random stalls on every stream), and the 64->64->32->10 MLP
the fully parallel datapath cannot build. Predictions and the parameters
read back through the parameter port must equal
:class:`onchip.model.GoldenLearner` (sequential schedule); the measured
latency, initiation interval and commit cycles must equal what the design
reports, and those the closed forms of :mod:`onchip.hw.mlp_serial`.
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
from onchip.hw import sim
from onchip.hw.mlp_serial import SerialMlpLearner
from onchip.hw.sim import cached_design
from onchip.spec import PRESETS, Formats, LearnerSpec

READOUT = PRESETS["mlp-readout"].replace(datapath="serial", schedule="sequential")

#: 8-bit data, a 12-bit accumulator of range +/-4 (sums wrap), an unsigned input, a
#: different rounding mode per format and SAT_ZERO errors.
NARROW = LearnerSpec(
    name="mlp-4-6-5-3-narrow", kind="mlp", widths=(4, 6, 5, 3), learning_rate=2.0**-1, init_scale=1.0,
    datapath="serial", allow_acc_wrap=True,  # a narrow acc whose wrap is compared too
    formats=Formats(input="ap_ufixed<8,3,RND,SAT>", coef="ap_fixed<8,2,RND_CONV,SAT>",
                    act="ap_fixed<8,2,RND_ZERO,SAT>", grad="ap_fixed<8,2,RND_INF,SAT_ZERO>",
                    acc="ap_fixed<12,3,TRN,WRAP>"),
)

#: 6570 parameters: the parallel datapath runs out of memory converting it.
WIDE = LearnerSpec(name="mlp-64-64-32-10", kind="mlp", widths=(64, 64, 32, 10), learning_rate=2.0**-6,
                   init_scale=1.0, datapath="serial")


def check_timing(spec, design, seg):
    """Measured cycles (no stalls) equal the reported ones and the closed forms of the schedule."""
    info = design.info
    n_in = list(spec.widths[:-1])
    n_layers = len(n_in)
    # closed forms: forward N_l + 2 + x per layer plus the accepting cycle; backward N_l + 1 + x + T_l
    # per layer plus the output-error cycle; the next sample the cycle after layer 0 commits. Fast
    # (x = 1): a raw product's register; T_l: registered stages of layer l's back-propagation sum over
    # its n outputs, ceil(ceil(log2 n) / 2), none for layer 0
    x = int(spec.stage_timing == "fast")
    t = [0] + [x * -(-math.ceil(math.log2(n)) // 2) for n in spec.widths[2:]]
    assert info["latency_cycles_prediction"] == 1 + sum(n + 2 + x for n in n_in)
    assert info["initiation_interval"] == 2 * sum(n_in) + (3 + 2 * x) * n_layers + 2 + sum(t)
    assert info["latency_cycles_update"] == info["initiation_interval"] - 1
    acc, pred = np.asarray(seg["accept_cycles"]), np.asarray(seg["pred_cycles"])
    assert len(acc) == len(pred) > 1
    assert set((pred - acc).tolist()) == {info["latency_cycles_prediction"]}
    assert set(np.diff(acc).tolist()) == {info["initiation_interval"]}
    worst = 0
    for l, commits in enumerate(seg["commit_cycles"]):
        commits = np.asarray(commits)
        assert len(commits) == len(acc)  # one commit strobe per sample and layer
        assert set((commits - acc).tolist()) == {info["stages"]["update"][l]}
        worst = max(worst, info["stages"]["update"][l])
    assert worst == info["latency_cycles_update"]
    # layers commit last to first, each after the prediction
    assert info["stages"]["update"] == sorted(info["stages"]["update"], reverse=True)
    assert min(info["stages"]["update"]) > info["latency_cycles_prediction"]


def test_readout_bit_exact_with_reported_timing():
    design, seg, _ = run_stream(READOUT, 10000, seed=11, measure=True)
    check_timing(READOUT, design, seg)


# slow: the narrow serial MLP under stalls is also run with mixed sample kinds by default (test_hw_kinds.py)
@pytest.mark.slow
def test_narrow_three_layer_saturates_bit_exact_under_stalls():
    design, seg, theta = run_stream(NARROW, 2000, 21, bench_seed=4, p_valid=0.6, p_ready=0.45, p_param_ready=0.5)
    want = sim.unpack_predictions(design, seg["preds"])  # the golden predictions (run_stream asserts it)
    f = NARROW.formats
    # the stream really saturates: predictions at the act limits, weights at the coef limits
    assert np.mean((want == f.act.min_raw) | (want == f.act.max_raw)) > 0.01
    assert np.any((theta == f.coef.min_raw) | (theta == f.coef.max_raw))


def test_narrow_three_layer_timing():
    # fast: the back-propagation sums over 5 and 3 outputs take 2 and 1 registered stages
    assert NARROW.stage_timing == "fast"
    design, seg, _ = run_stream(NARROW, 200, seed=22, measure=True)
    check_timing(NARROW, design, seg)


def test_readout_is_fast_by_default_and_one_cycle_longer_per_pass():
    # auto builds fast on the serial MLP: 2 * 10 + 5 * 2 + 2 cycles between samples, compact 28
    assert READOUT.stage_timing == "fast" and cached_design(READOUT).info["initiation_interval"] == 32
    assert cached_design(READOUT.replace(timing="compact")).info["initiation_interval"] == 28


def test_compact_readout_bit_exact_with_reported_timing():
    spec = READOUT.replace(timing="compact")
    design, seg, _ = run_stream(spec, 3000, seed=12, measure=True)
    check_timing(spec, design, seg)


# slow: the compact narrow MLP (the default before fast) under stalls; compact's timing is checked by default on the readout
@pytest.mark.slow
def test_compact_narrow_three_layer_bit_exact_under_stalls_and_timing():
    spec = NARROW.replace(timing="compact")
    design, seg, _ = run_stream(spec, 300, seed=23, measure=True)
    check_timing(spec, design, seg)
    run_stream(spec, 600, 24, bench_seed=5, p_valid=0.6, p_ready=0.45, p_param_ready=0.5)


def test_fast_products_are_dsp_instances_with_their_registers():
    """Fast, each lane's products (forward, weight delta and, past layer 0, the back-propagated
    error) are registered raw; for ECP5 each is a MULT18X18D holding that register."""
    from onchip.hw import generate

    spec = READOUT
    v = generate(spec, axis=False, dsp="ecp5").verilog
    lanes = spec.widths[1:]
    want = sum(n * (2 + (l > 0)) for l, n in enumerate(lanes))
    assert len(re.findall(r"^\s*MULT18X18D #\(", v, re.M)) == want == 19
    assert 'REG_OUTPUT_CLK("CLK0")' in v
    assert "MULT18X18D" not in generate(spec, axis=False).verilog


# fast: the reload and the commands' writes pass one more register (the reset takes a cycle more)
@pytest.mark.parametrize("timing", ["compact", "fast"])
def test_reset_mid_stream_reloads_initial_parameters(timing):
    spec = READOUT.replace(timing=timing)
    design = cached_design(spec)
    assert design.info["reset_cycles"] == spec.parameter_count() + 1 + (timing == "fast")
    check_reset_mid_stream(spec, design)


@pytest.mark.parametrize("timing", [pytest.param("compact", marks=pytest.mark.slow), "fast"])
def test_checkpoint_and_restore_mid_stream(timing):
    spec = NARROW.replace(timing=timing)
    design = cached_design(spec)
    xs = [stimulus(spec, n, seed=40 + k) for k, n in enumerate((500, 200, 400))]
    rng = np.random.default_rng(9)
    c = spec.formats.coef
    restore = rng.integers(c.min_raw, c.max_raw + 1, spec.parameter_count())

    check_checkpoint_and_restore(spec, design, xs, restore)


@pytest.mark.slow
def test_wide_network_converts_with_neuron_sized_logic():
    design = cached_design(WIDE)
    v = design.verilog
    n_out = WIDE.widths[1:]
    n_neurons, n_layers = sum(n_out), len(n_out)
    n_weights = sum(a * b for a, b in zip(WIDE.widths[:-1], WIDE.widths[1:]))
    # one RAM bank per neuron, as deep as its layer's input count
    for l, (n_in, n) in enumerate(zip(WIDE.widths[:-1], n_out)):
        banks = re.findall(rf"^\s*reg \[15:0\] l{l}_bank\d+ \[{n_in - 1}:0\];", v, re.M)
        assert len(banks) == n
    # multipliers: 3 per neuron (forward, weight delta, back-propagated error) and 2 per
    # layer in the parameter address decoder, not one per weight
    n_mult = len(re.findall(r" \* ", v))
    assert n_mult <= 3 * n_neurons + 2 * n_layers < n_weights // 10
    assert design.info["param_count"] == WIDE.parameter_count() == 6570
    # fast (the default): two more cycles per layer, and the sums over 32 and 10 outputs 3 and 2 stages
    assert design.info["initiation_interval"] == 2 * sum(WIDE.widths[:-1]) + 5 * n_layers + 2 + 3 + 2


@pytest.mark.slow
def test_wide_network_bit_exact():
    design, seg, _ = run_stream(WIDE, 12, seed=61, measure=True)
    check_timing(WIDE, design, seg)


@pytest.mark.slow
def test_single_input_layer_bit_exact():
    # layer 0 has one input: RAM banks of depth 1
    spec = PRESETS["mlp-regression"].replace(datapath="serial", schedule="sequential")
    design, seg, _ = run_stream(spec, 3000, seed=71, measure=True)
    check_timing(spec, design, seg)


# a component refused in its constructor is never elaborated; Amaranth warns about that
@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="kind='kan'"):
        SerialMlpLearner(PRESETS["kan-readout"])
    with pytest.raises(ValueError, match="schedule='pipelined'"):
        SerialMlpLearner(PRESETS["mlp-readout"].replace(schedule="pipelined"))
    with pytest.raises(ValueError, match="theta"):
        SerialMlpLearner(READOUT, theta=np.zeros(3))
    gc.collect()  # the refused components warn when collected: here, under the filter
