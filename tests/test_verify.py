"""``onchip verify``: a preset verifies (RTL under the cocotb bench + HLS C simulation), the JUnit
report parses back, an injected wrong output is named by its first sample, bad flags exit 2."""

from __future__ import annotations

import copy
import importlib
import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from onchip.cli import main
from onchip.spec import PRESETS
from onchip.verify import VerifyReport, assert_verified, random_stream, segment_bounds, verify

verify_mod = importlib.import_module("onchip.verify")  # the module (onchip.verify may be the function)
SPEC = "kan-regression"  # sequential preset: its Verilator build is shared with the RTL tests
N = 200


@pytest.fixture(scope="module")
def user_spec(tmp_path_factory):
    """A user's spec file: the preset under another name (same Verilog, so the build is shared)."""
    path = tmp_path_factory.mktemp("user") / "my_learner.toml"
    path.write_text(PRESETS[SPEC].replace(name="my_learner").to_toml())
    return path


@pytest.fixture(scope="module")
def bench_run(user_spec):
    """One real run (rtl + hls) of the user's spec file, recording the raw bench and HLS outputs
    so that the other tests replay them (the preset has the same Verilog and stream)."""
    recorded = {}
    mp = pytest.MonkeyPatch()
    run_bench, run_hls = verify_mod._run_bench, verify_mod._run_hls

    def record_bench(*args, **kw):
        recorded["bench"] = run_bench(*args, **kw)
        return copy.deepcopy(recorded["bench"])

    def record_hls(*args, **kw):
        recorded["hls"] = run_hls(*args, **kw)
        return tuple(a.copy() for a in recorded["hls"])

    mp.setattr(verify_mod, "_run_bench", record_bench)
    mp.setattr(verify_mod, "_run_hls", record_hls)
    try:
        report = verify(str(user_spec), samples=N, seed=3)
    finally:
        mp.undo()
    return report, recorded


def replay(monkeypatch, recorded, bench=None, hls=None):
    """Make verify() return recorded outputs (edited by ``bench`` / ``hls``) instead of simulating."""
    def fake_bench(*args, **kw):
        out = copy.deepcopy(recorded["bench"])
        if bench:
            bench(out)
        return out

    def fake_hls(*args, **kw):
        preds, theta = (a.copy() for a in recorded["hls"])
        if hls:
            hls(preds, theta)
        return preds, theta

    monkeypatch.setattr(verify_mod, "_run_bench", fake_bench)
    monkeypatch.setattr(verify_mod, "_run_hls", fake_hls)


def test_user_spec_file_verifies_on_every_check(bench_run):
    report, recorded = bench_run
    if "bench" not in recorded:
        pytest.skip("cocotb / Verilator not installed")
    assert report.ok, report.summary()
    assert report.spec.name == "my_learner"
    names = [c.name for c in report.cases]
    assert names == ["rtl.predictions", "rtl.reset_mid_stream", "rtl.readback_mid_stream", "rtl.checkpoint_restore",
                     "rtl.final_parameters", "rtl.no_stall_stream", "rtl.latency", "rtl.initiation_interval",
                     "hls.predictions", "hls.final_parameters"]
    assert all(c.status == "passed" for c in report.cases)
    lat = next(c for c in report.cases if c.name == "rtl.latency").measured
    assert lat["latency_cycles_prediction"]["measured"] == [lat["latency_cycles_prediction"]["reported"]]
    assert "OK" in report.summary().splitlines()[-1]


def test_preset_passes_on_the_cli_with_junit_and_report(tmp_path, monkeypatch, bench_run, user_spec, capsys):
    _, recorded = bench_run
    if "bench" not in recorded:
        pytest.skip("cocotb / Verilator not installed")
    from onchip.hw.description import strip_header
    from onchip.hw.sim import cached_design
    from onchip.spec import load_spec

    # the preset is the user's file under its own name: same hardware (the header names the spec), so the
    # recorded run replays
    assert strip_header(cached_design(PRESETS[SPEC]).verilog) == strip_header(
        cached_design(load_spec(str(user_spec))).verilog)
    replay(monkeypatch, recorded)
    junit, out = tmp_path / "verify.xml", tmp_path / "out"
    rc = main(["verify", "--spec", SPEC, "--samples", str(N), "--seed", "3", "--junit", str(junit),
               "--out", str(out), "--quiet"])
    assert rc == 0, capsys.readouterr()
    for path in (junit, out / "junit.xml"):
        root = ET.parse(path).getroot()
        suite = root.find("testsuite")
        cases = suite.findall("testcase")
        assert len(cases) == int(suite.get("tests")) == 10
        assert suite.get("failures") == suite.get("errors") == suite.get("skipped") == "0"
        assert not root.findall(".//failure") and not root.findall(".//skipped")
    data = json.loads((out / "report.json").read_text())
    assert data["ok"] and data["counts"]["passed"] == 10 and data["first_failure"] is None
    assert data["command"].startswith("onchip verify --spec")


def test_wrong_prediction_is_named_by_its_first_sample(monkeypatch, bench_run, tmp_path, capsys):
    _, recorded = bench_run
    if "bench" not in recorded:
        pytest.skip("cocotb / Verilator not installed")
    (b0, _), = segment_bounds(N)[1:2]
    k = 7  # the 8th prediction after the reset: a sample of part B

    def corrupt(out):  # segments: timing, A (reset), read, B, C (restore), D
        seg = out["segments"][3]
        seg["preds"][k] ^= 1
        seg["preds"][k + 5] ^= 4
        out["segments"][5]["responses"][2] ^= 1

    replay(monkeypatch, recorded, bench=corrupt, hls=lambda p, t: p.__setitem__((37, 0), p[37, 0] + 1))
    report = verify(SPEC, samples=N, seed=3)
    assert not report.ok
    bad = {c.name: c for c in report.cases if c.status == "failed"}
    assert set(bad) == {"rtl.predictions", "rtl.final_parameters", "hls.predictions"}
    m = bad["rtl.predictions"].mismatch
    x, y = random_stream(PRESETS[SPEC], N, 3)
    assert m["sample"] == b0 + k and m["x_raw"] == x[b0 + k].tolist() and m["y_raw"] == y[b0 + k].tolist()
    assert m["got"] != m["want"] and m["differing"] == 2
    assert m["cycle"] == recorded["bench"]["segments"][3]["pred_cycles"][k]
    assert f"sample {b0 + k}:" in bad["rtl.predictions"].detail
    assert bad["rtl.final_parameters"].mismatch["parameter"] == 2
    assert bad["hls.predictions"].mismatch["sample"] == 37
    assert report.first_failure.name == "rtl.predictions"
    # JUnit: the failures are there, with the sample in the message
    root = report.junit_tree().getroot()
    failures = root.findall(".//failure")
    assert len(failures) == 3 and f"sample {b0 + k}" in failures[0].get("message")
    # the command exits 1 and prints the first mismatch; --out still gets the report
    out = tmp_path / "out"
    rc = main(["verify", "--spec", SPEC, "--samples", str(N), "--seed", "3", "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert rc == 1
    assert re.search(rf"first failure: rtl\.predictions: sample {b0 + k}: x_raw", text)
    assert json.loads((out / "report.json").read_text())["first_failure"]["mismatch"]["sample"] == b0 + k
    with pytest.raises(AssertionError, match=rf"sample {b0 + k}"):
        assert_verified(SPEC, samples=N, seed=3)


def test_missing_tools_are_skipped_never_passed(monkeypatch, tmp_path):
    monkeypatch.setattr(verify_mod, "_available", lambda backend: "not installed here")
    report = verify(SPEC, samples=20)
    assert [(c.name, c.status) for c in report.cases] == [("rtl", "skipped"), ("hls", "skipped")]
    assert not report.ok and "nothing was verified" in report.summary()
    root = ET.parse(report.to_junit(tmp_path / "j.xml")).getroot()
    assert len(root.findall(".//skipped")) == 2
    with pytest.raises(pytest.skip.Exception):
        assert_verified(SPEC, samples=20)
    assert main(["verify", "--spec", SPEC, "--samples", "20", "--quiet"]) == 1


def test_random_stream_covers_the_corners():
    spec = PRESETS["kan-readout"]
    x, y = random_stream(spec, 4000, 0)
    fi, fa = spec.formats.input, spec.formats.act
    lo, hi = (int(fi.quantize(v)) for v in spec.grid_range)
    assert {fi.min_raw, fi.max_raw, lo, hi, lo - 1, hi + 1} <= set(x.ravel().tolist())
    assert np.mean((x < lo) | (x > hi)) > 0.1  # out of the grid
    assert np.mean((x >= lo) & (x <= hi)) > 0.5
    assert {fa.min_raw, fa.max_raw} <= set(y.ravel().tolist())
    np.testing.assert_array_equal(random_stream(spec, 4000, 0)[0], x)


@pytest.mark.parametrize("argv, flag", [
    (["--samples", "3"], "--samples"),
    (["--stream", "nope"], "--stream"),
    (["--stream", "qubit-readout"], "--stream"),  # 2 inputs, kan-regression has 1
    (["--data", "shots.npy"], "--data"),
    (["--backends", "rtl,vhdl"], "--backends"),
    (["--seed", "-1"], "--seed"),
    (["--staleness", "2"], "--staleness"),
    (["--timing", "slow"], "--timing"),
])
def test_bad_arguments_exit_2_without_output(tmp_path, capsys, argv, flag):
    out = tmp_path / "out"
    rc = main(["verify", "--spec", SPEC, "--out", str(out), "--quiet", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not out.exists()
    assert len(err.splitlines()) == 1 and flag in err, err


def test_fast_timing_verifies_through_the_registered_parameter_port(tmp_path, capsys):
    """--timing fast: 4 more register stages on the KAN parameter port (reload, read-back, restore
    all pass through them) and a longer pipeline; every RTL check still matches the golden model."""
    from onchip.hw.sim import cached_design

    spec = PRESETS["kan-paper"].replace(timing="fast")
    assert cached_design(spec).info["stages"]["port"] == 4
    out = tmp_path / "out"
    rc = main(["verify", "--spec", "kan-paper", "--timing", "fast", "--backends", "rtl", "--samples", "300",
               "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    data = json.loads((out / "report.json").read_text())
    if data["counts"]["skipped"]:
        pytest.skip("cocotb / Verilator not installed")
    assert rc == 0, text
    assert "timing fast" in data["spec_label"] and data["spec"]["timing"] == "fast"
    assert data["counts"]["passed"] == 8 and data["counts"]["failed"] == 0


def test_bad_spec_exits_2(tmp_path, capsys):
    assert main(["verify", "--spec", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "o")]) == 2
    assert "--spec" in capsys.readouterr().err and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_fault_injected_into_the_verilog_fails(monkeypatch):
    """A real RTL fault (the output error's sign flipped in the generated Verilog) is caught."""
    from onchip.hw import sim

    spec = PRESETS[SPEC]
    design = sim.cached_design(spec)
    faulty, n = re.subn(r"= \$signed\(m__payload\) - \$signed\(", "= $signed(m__payload) + $signed(", design.verilog)
    assert n == 1
    broken = sim.Design(verilog=faulty, top=design.top, info=design.info)
    monkeypatch.setattr(sim, "cached_design", lambda spec, top="onchip_learner": broken)
    report = verify(SPEC, samples=N, backends=("rtl",))
    assert not report.ok
    failed = {c.name: c for c in report.cases if c.status == "failed"}
    assert report.first_failure.name == "rtl.predictions" and "sample" in failed["rtl.predictions"].mismatch
    # from the initial parameters the first prediction is still right; the wrong update shows after it
    assert failed["rtl.no_stall_stream"].mismatch["sample"] >= 1
