"""The same bench on other targets: the AXI4-Stream wrapper, Icarus as a second simulator,
and FST waveforms on request."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from onchip.hw import sim
from onchip.model import GoldenLearner
from onchip.spec import PRESETS

from hw_support import preset_design, stimulus


def golden_segments(spec, segments):
    """Golden predictions per segment and the parameters after the last; a reset between
    segments restarts from the initial parameters."""
    g = GoldenLearner(spec)
    preds = []
    for x, y, reset in segments:
        preds.append(g.run(x, y))
        if reset:
            g = GoldenLearner(spec)
    g.flush()
    return preds, g.theta.copy()


def check_against_golden(spec, design, out, segments):
    want_preds, want_theta = golden_segments(spec, segments)
    for seg, want in zip(out["segments"], want_preds):
        np.testing.assert_array_equal(sim.unpack_predictions(design, seg["preds"]), want)
    np.testing.assert_array_equal(sim.unpack_coef(design, out["segments"][-1]["responses"]), want_theta)


def test_axis_wrapper_matches_golden_with_stalls_and_aresetn():
    spec, design = preset_design("kan-readout", "pipelined")
    axis = sim.axis_design(design)
    assert axis.top == "onchip_learner_axis"
    (x1, y1), (x2, y2) = stimulus(spec, 1500, seed=21), stimulus(spec, 1500, seed=22)
    jobs = [{"payloads": sim.pack_samples(design, x1, y1), "then": {"op": "reset", "after": 3}},
            {"payloads": sim.pack_samples(design, x2, y2), "then": {"op": "read"}}]
    out = sim.run_job(axis, jobs, seed=4, p_valid=0.7, p_ready=0.6, p_param_ready=0.5)
    # samples in flight when aresetn falls are lost: compare the first segment up to them
    first = out["segments"][0]
    got = sim.unpack_predictions(design, first["preds"])
    want, _ = golden_segments(spec, [(x1, y1, True)])
    assert len(got) >= len(x1) - 10
    np.testing.assert_array_equal(got, want[0][: len(got)])
    check_against_golden(spec, design, {"segments": out["segments"][1:]}, [(x2, y2, False)])


def test_axis_tlast_closes_every_packet_and_input_tlast_is_ignored():
    """--packet 5: m_axis_pred_tlast is high on every 5th prediction, counted again from aresetn;
    the bench drives random TLAST on both input streams and the predictions stay the golden model's."""
    spec = PRESETS["kan-paper"].replace(schedule="sequential")
    design = sim.cached_design(spec, "packets", packet=5)
    axis = sim.axis_design(design)
    assert design.info["axis"]["packet"] == 5
    (x1, y1), (x2, y2) = stimulus(spec, 13, seed=31), stimulus(spec, 22, seed=32)
    # the first segment's predictions are all out long before aresetn falls (II 7, latency 6)
    jobs = [{"payloads": sim.pack_samples(design, x1, y1), "then": {"op": "reset", "after": 200}},
            {"payloads": sim.pack_samples(design, x2, y2), "then": {"op": "none"}}]
    out = sim.run_job(axis, jobs, seed=5, p_valid=0.7, p_ready=0.5)
    for (x, y), seg in zip(((x1, y1), (x2, y2)), out["segments"]):
        np.testing.assert_array_equal(sim.unpack_predictions(design, seg["preds"]), GoldenLearner(spec).run(x, y))
        assert seg["lasts"] == [int(k % 5 == 4) for k in range(len(x))]


def test_axis_tlast_is_high_on_every_prediction_by_default():
    spec, design = preset_design("kan-regression", "sequential")
    x, y = stimulus(spec, 7, seed=33)
    out = sim.run_job(sim.axis_design(design), [{"payloads": sim.pack_samples(design, x, y)}], p_ready=0.5)
    assert out["segments"][0]["lasts"] == [1] * 7


def test_axis_design_needs_the_wrapper():
    spec, design = preset_design("kan-regression", "sequential")
    bare = sim.Design(verilog=design.verilog, top=design.top, info=design.info)
    with pytest.raises(ValueError, match="axis=True"):
        sim.axis_design(bare)


def test_bad_bench_segments_are_refused():
    spec, design = preset_design("kan-regression", "sequential")
    with pytest.raises(ValueError, match=r"segments\[0\]\.then\.op"):
        sim.run_job(design, [{"payloads": [], "then": {"op": "bogus"}}])
    with pytest.raises(ValueError, match=r"segments\[1\]\.then\.values must be 11"):
        sim.run_job(design, [{"payloads": []}, {"payloads": [], "then": {"op": "write", "values": [0, 1, 2]}}])
    with pytest.raises(ValueError, match="values must be"):
        sim.run_job(design, [{"payloads": [], "then": {"op": "write", "values": [10**6] * 11}}])


def test_a_job_leaves_nothing_in_the_build_cache_and_a_stuck_job_says_why():
    spec, design = preset_design("kan-regression", "sequential")
    folder = sim.build(design)
    before = set(folder.glob("job-*"))
    x, y = stimulus(spec, 30, seed=3)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y)}], waves=False)
    assert len(out["segments"][0]["preds"]) == 30 and out["folder"] is None
    assert set(folder.glob("job-*")) == before
    with pytest.raises(RuntimeError, match="max_cycles=10 reached"):
        sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y)}], waves=False, max_cycles=10)


def test_unknown_simulator_is_refused():
    spec, design = preset_design("kan-regression", "sequential")
    with pytest.raises(ValueError, match="simulator must be one of"):
        sim.run_job(design, [], simulator="modelsim")


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not installed")
@pytest.mark.parametrize("name, schedule", [("kan-regression", "pipelined"), ("mlp-regression", "sequential")])
def test_icarus_agrees_with_golden(name, schedule):
    spec, design = preset_design(name, schedule)
    x, y = stimulus(spec, 1000, seed=31)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}],
                      seed=2, p_valid=0.8, p_ready=0.7, simulator="icarus")
    check_against_golden(spec, design, out, [(x, y, False)])


def has_lz4() -> bool:
    try:
        sim.wave_format("fst")
    except FileNotFoundError:
        return False
    return True


@pytest.mark.parametrize("fmt, magic", [
    ("vcd", b"$"),  # VCD: text, opens with a $date / $version / $timescale section
    pytest.param("fst", b"\x00", marks=pytest.mark.skipif(not has_lz4(), reason="FST needs liblz4-dev")),
])
def test_waves_on_request(monkeypatch, fmt, magic):
    spec, design = preset_design("kan-regression", "sequential")
    x, y = stimulus(spec, 40, seed=41)
    monkeypatch.setenv("ONCHIP_WAVES", fmt)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "none"}}])
    np.testing.assert_array_equal(sim.unpack_predictions(design, out["segments"][0]["preds"]),
                                  GoldenLearner(spec).run(x, y))
    dumps = sorted(Path(out["folder"]).rglob(f"*.{fmt}"))
    assert dumps, f"no .{fmt} file in {out['folder']}"
    # FST opens with its header block (block type 0); both hold the traced cycles
    assert dumps[0].read_bytes()[:1] == magic and dumps[0].stat().st_size > 1000


def test_unknown_wave_format_is_refused(monkeypatch):
    monkeypatch.setenv("ONCHIP_WAVES", "ghw")
    with pytest.raises(ValueError, match="ONCHIP_WAVES"):
        sim.wave_format()
