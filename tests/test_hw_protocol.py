"""Stream and parameter-port protocol of the RTL learner, checked against the golden model.

Random valid/ready stalls on every stream lose or repeat no sample; a reset in
mid-stream returns to the initial parameters; parameters read and written in
mid-stream match the golden model's flush / load at that sample; samples at
the format limits saturate exactly as the golden model does.
"""

import numpy as np
import pytest

from onchip.fixed import requantize
from onchip.hw import sim
from onchip.model import GoldenLearner

from hw_support import check_checkpoint_and_restore, check_reset_mid_stream, golden_final, preset_design, stimulus

# designs shared with test_hw_learner (same Verilog: the Verilator build is reused)
DESIGNS = [("kan-readout", "pipelined"), ("mlp-regression", "sequential")]
#: timing = "fast" (registers after every multiplier and carry chain), also shared with test_hw_learner
FAST = [("kan-paper", "sequential", "fast"), ("kan-readout", "pipelined", "fast")]


def preds_of(design, seg):
    return sim.unpack_predictions(design, seg["preds"])


@pytest.mark.parametrize("name,schedule,timing", [(*d, "compact") for d in DESIGNS + [("mlp-readout", "pipelined")]]
                         + FAST)
def test_random_stalls_lose_no_sample(name, schedule, timing):
    spec, design = preset_design(name, schedule, timing)
    x, y = stimulus(spec, 2000, seed=21)
    want, theta = golden_final(spec, x, y)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}],
                      seed=4, p_valid=0.6, p_ready=0.45, p_param_ready=0.5)
    seg = out["segments"][0]
    np.testing.assert_array_equal(preds_of(design, seg), want)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg["responses"]), theta)


@pytest.mark.parametrize("name,schedule,timing", [(*d, "compact") for d in DESIGNS] + FAST)
def test_reset_mid_stream_restores_initial_parameters(name, schedule, timing):
    spec, design = preset_design(name, schedule, timing)
    check_reset_mid_stream(spec, design)


@pytest.mark.parametrize("name,schedule,timing", [(*d, "compact") for d in DESIGNS] + FAST
                         + [("kan-readout", "sequential", "fast")])
def test_reset_cycles_are_the_measured_ones(name, schedule, timing):
    """After the power-on reset and after a reset in mid-stream the first sample is taken
    ``reset_cycles`` cycles out of reset, the first parameter command ``reset_cycles_command``
    cycles out of it (KAN at timing fast: the command enters the port's stages behind the last
    reload word; a sample waits until that word has landed)."""
    spec, design = preset_design(name, schedule, timing)
    info = design.info
    x, y = stimulus(spec, 12, seed=8)
    segments = [{"payloads": sim.pack_samples(design, x[:4], y[:4]), "then": {"op": "reset", "after": 0}},
                {"payloads": sim.pack_samples(design, x[4:], y[4:]), "then": {"op": "reset", "after": 2}},
                {"payloads": [], "then": {"op": "read"}}]
    segs = sim.run_job(design, segments, measure=True)["segments"]
    for seg in segs[:2]:
        assert seg["accept_cycles"][0] - seg["start_cycle"] == info["reset_cycles"]
    assert segs[2]["command_cycles"][0] - segs[2]["start_cycle"] == info["reset_cycles_command"]
    np.testing.assert_array_equal(sim.unpack_coef(design, segs[2]["responses"]),
                                  GoldenLearner(spec).theta)  # the reload landed
    port = info["stages"]["port"]
    if spec.kind == "kan":
        assert info["reset_cycles_command"] == info["param_count"] + 1
        assert info["reset_cycles"] == info["reset_cycles_command"] + port
        assert port == (4 if timing == "fast" else 0)
    else:
        assert info["reset_cycles"] == info["reset_cycles_command"] == 0


@pytest.mark.parametrize("name,schedule,timing", [(*d, "compact") for d in DESIGNS] + FAST)
def test_checkpoint_and_restore_mid_stream(name, schedule, timing):
    spec, design = preset_design(name, schedule, timing)
    xs = [stimulus(spec, n, seed=40 + k) for k, n in enumerate((700, 300, 500))]
    rng = np.random.default_rng(9)
    c = spec.formats.coef
    restore = rng.integers(c.min_raw // 4, c.max_raw // 4, spec.parameter_count())

    check_checkpoint_and_restore(spec, design, xs, restore)


@pytest.mark.parametrize("name,schedule", DESIGNS)
def test_saturation_at_format_limits(name, schedule):
    spec, design = preset_design(name, schedule)
    x, y = stimulus(spec, 1500, seed=51, extreme=1.0)  # every sample at the limits
    want, theta = golden_final(spec, x, y)
    # the stream must really overflow: some output errors saturate in the grad format
    f = spec.formats
    exact_err = (want - y).astype(np.int64)
    err = requantize(exact_err, f.act.frac_bits, f.grad)
    exact = np.ldexp(exact_err.astype(float), -f.act.frac_bits)
    assert np.any(np.abs(f.grad.dequantize(err) - exact) > f.grad.lsb)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}])
    seg = out["segments"][0]
    np.testing.assert_array_equal(preds_of(design, seg), want)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg["responses"]), theta)
