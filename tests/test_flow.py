"""Implementation flows: Yosys resources, Lattice place and route, Vivado scripts, the UART board top.

The tools' compiled WebAssembly is kept in the user's onchip cache (~/.cache/onchip/yowasp,
via $ONCHIP_TOOL_CACHE) on purpose, so the one-time compile (about a minute per tool) is not
paid by every test run; each expensive tool call runs once per session on one small design.
"""

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("ONCHIP_TOOL_CACHE", str(Path.home() / ".cache" / "onchip" / "yowasp"))

from amaranth.hdl import Elaboratable, Module  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from onchip.flow import boards, nextpnr, vivado, yosys  # noqa: E402
from onchip.flow.uart import UARTRx, UARTTx  # noqa: E402

# A stand-in learner core with the RTL contract's ports: pred = x0 * y0 (low 16 bits), one cycle later.
CORE_V = """module onchip_learner(input clk, input rst, input s__valid, output s__ready, input [31:0] s__payload,
  output reg m__valid, input m__ready, output reg [15:0] m__payload,
  input pc__valid, output pc__ready, input [20:0] pc__payload,
  output pr__valid, input pr__ready, output [15:0] pr__payload);
  assign s__ready = ~m__valid | m__ready;
  assign pc__ready = 1'b1;
  assign pr__valid = pc__valid;
  assign pr__payload = pc__payload[15:0];
  always @(posedge clk)
    if (rst) m__valid <= 1'b0;
    else if (s__ready) begin m__valid <= s__valid; m__payload <= s__payload[15:0] * s__payload[31:16]; end
endmodule
"""
_W = {"s__payload": 32, "m__payload": 16, "pc__payload": 21, "pr__payload": 16}
_IN = ("clk", "rst", "s__valid", "s__payload", "m__ready", "pc__valid", "pc__payload", "pr__ready")
PORTS = {n: {"dir": "in" if n in _IN else "out", "width": _W.get(n, 1)}
         for n in ("clk", "rst", "s__valid", "s__ready", "s__payload", "m__valid", "m__ready", "m__payload",
                   "pc__valid", "pc__ready", "pc__payload", "pr__valid", "pr__ready", "pr__payload")}
DESIGN = SimpleNamespace(verilog=CORE_V, top="onchip_learner",
                         info={"ports": PORTS, "latency_cycles_prediction": 1, "latency_cycles_update": 2,
                               "initiation_interval": 1})

# 8 plain register bits and one 16x16 multiply: known resource counts on every family
COUNT_V = """module regs_mul(input clk, input [7:0] d, output reg [7:0] q, input [15:0] a, input [15:0] b,
  output [31:0] p);
  always @(posedge clk) q <= d;
  assign p = a * b;
endmodule
"""


# -- resources ------------------------------------------------------------------------------------
def test_resources_from_cells_folds_primitives():
    cells = {"LUT2": 3, "LUT6": 2, "LUT6_2": 1, "FDRE": 5, "FDSE": 1, "DSP48E2": 2, "RAMB36E2": 1,
             "RAMB18E2": 3, "RAM32M": 2, "SRL16E": 3, "CARRY8": 4, "BUFG": 1}
    r = yosys.resources_from_cells(cells, "xcup")
    assert (r["lut"], r["ff"], r["dsp"], r["carry"]) == (6, 6, 2, 4)
    assert r["bram"] == 1 + 3 * 0.5  # a RAMB18 is half a RAMB36
    assert r["lutram"] == 2 * 4 + 3  # RAM32M = 4 LUTs, SRL16E = 1
    e = yosys.resources_from_cells({"LUT4": 10, "CCU2C": 3, "TRELLIS_FF": 7, "MULT18X18D": 1, "DP16KD": 2}, "ecp5")
    assert (e["lut"], e["ff"], e["dsp"], e["bram"]) == (16, 7, 1, 2)
    i = yosys.resources_from_cells({"SB_LUT4": 4, "SB_DFFE": 2, "SB_DFFSR": 1, "SB_RAM40_4K": 1}, "ice40")
    assert (i["lut"], i["ff"], i["bram"], i["lutram"]) == (4, 3, 1, None)


def test_bram_is_counted_in_one_named_unit_per_family(monkeypatch):
    from onchip.flow import steps

    units = {f: yosys.resources_from_cells({}, f)["bram_unit"] for f in yosys.FAMILIES}
    assert units == {"xcup": "RAMB36", "xc7": "RAMB36", "ecp5": "DP16KD", "ice40": "SB_RAM40_4K"}

    def fake_synthesize(verilog, top, family, workdir=None):  # Yosys itself is tested elsewhere
        return {"family": family, **yosys.resources_from_cells({"DP16KD": 2}, family), "cells": {"DP16KD": 2},
                "yosys_version": "fake"}

    monkeypatch.setattr(yosys, "synthesize", fake_synthesize)
    report = steps.synth("kan-regression", family="ecp5")
    assert (report["bram"], report["bram_unit"]) == (2, "DP16KD")


def test_help_texts_point_at_what_exists():
    import re

    from onchip.cli import build_parser

    root = Path(__file__).resolve().parents[1]
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in ("pnr", "vivado", "vivado-report"):
        text = " ".join(sub.choices[command].description.split())
        doc, section = re.search(r"(\S+README\.md) \(section \"([^\"]+)\"\)", text).groups()
        assert f"## {section}" in (root / doc).read_text(), command
    synth_help = " ".join(sub.choices["synth"].description.split())
    assert "DP16KD" in synth_help and "bram_unit" in synth_help


def test_synthesize_rejects_bad_input():
    with pytest.raises(ValueError, match="family"):
        yosys.synthesize(COUNT_V, "regs_mul", "virtex2")
    with pytest.raises(ValueError, match="no module named 'nope'"):
        yosys.synthesize(COUNT_V, "nope")
    with pytest.raises(ValueError, match="empty"):
        yosys.synthesize("  ", "regs_mul")


@pytest.fixture(scope="session")
def synth_xcup():
    return yosys.synthesize(COUNT_V, "regs_mul", "xcup")


@pytest.fixture(scope="session")
def synth_ecp5():
    return yosys.synthesize(COUNT_V, "regs_mul", "ecp5")


def test_yosys_counts_registers_and_multiplier_xcup(synth_xcup):
    assert synth_xcup["ff"] == 8
    assert synth_xcup["dsp"] == 1 and synth_xcup["cells"]["DSP48E2"] == 1
    assert synth_xcup["bram"] == 0 and synth_xcup["lut"] == 0  # no logic beyond the DSP
    assert "IBUF" not in synth_xcup["cells"]  # out of context: no I/O buffers
    assert synth_xcup["yosys_version"].startswith("Yosys 0.")


def test_yosys_counts_registers_and_multiplier_ecp5(synth_ecp5):
    assert synth_ecp5["ff"] == 8
    assert synth_ecp5["dsp"] == 1 and synth_ecp5["cells"]["MULT18X18D"] == 1


# -- UART and the board top -------------------------------------------------------------------------
def _serial_bits(byte: int) -> list[int]:
    return [0] + [(byte >> i) & 1 for i in range(8)] + [1]


class _MulCore(Elaboratable):
    """Amaranth twin of CORE_V for simulation."""

    def __init__(self, sig):
        self.s = sig

    def elaborate(self, platform):
        m, s = Module(), self.s
        m.d.comb += s["s__ready"].eq(~s["m__valid"] | s["m__ready"])
        with m.If(s["s__ready"]):
            m.d.sync += [s["m__valid"].eq(s["s__valid"]),
                         s["m__payload"].eq(s["s__payload"][:16] * s["s__payload"][16:32])]
        return m


def _run_top(frames: list[bytes], gap_bits: int = 0, divisor: int = 4, n_out: int | None = None):
    top = boards.UartStreamTop(PORTS, "onchip_learner", clk_freq=divisor * 1e6, baud=1_000_000, core=_MulCore)
    sim = Simulator(top)
    sim.add_clock(1e-6)
    received = []
    n_out = len(frames) * 2 if n_out is None else n_out

    async def send(ctx):
        for frame in frames:
            for byte in frame:
                for bit in _serial_bits(byte):
                    ctx.set(top.rx, bit)
                    await ctx.tick().repeat(divisor)
            ctx.set(top.rx, 1)
            if gap_bits:
                await ctx.tick().repeat(divisor * gap_bits)

    async def receive(ctx):
        for _ in range(n_out):
            while ctx.get(top.tx) == 1:
                await ctx.tick()
            await ctx.tick().repeat(divisor // 2)  # middle of the start bit
            value = 0
            for i in range(8):
                await ctx.tick().repeat(divisor)
                value |= ctx.get(top.tx) << i
            await ctx.tick().repeat(divisor)
            assert ctx.get(top.tx) == 1, "stop bit"
            received.append(value)

    sim.add_testbench(send)
    sim.add_testbench(receive, background=True)
    total_bits = sum(10 * len(f) + gap_bits for f in frames) + 10 * n_out + 40
    sim.run_until(total_bits * divisor * 1e-6 + 2e-4)
    return top, received


def test_board_top_streams_predictions_in_order():
    samples = [(3, 5), (1000, 20), (65535, 2), (300, 300)]
    frames = [(x | (y << 16)).to_bytes(4, "little") for x, y in samples]
    top, got = _run_top(frames)
    assert (top.s_bytes, top.m_bytes) == (4, 2)
    preds = [got[i] | (got[i + 1] << 8) for i in range(0, len(got), 2)]
    assert preds == [(x * y) % 65536 for x, y in samples]


def test_board_top_drops_an_incomplete_frame_after_a_pause():
    good = (7 | (9 << 16)).to_bytes(4, "little")
    # two stray bytes, a pause longer than the timeout (4 byte times = 40 bits), then a whole frame
    top, got = _run_top([b"\xff\xff", good], gap_bits=60, n_out=2)
    assert got[0] | (got[1] << 8) == 63


def test_uart_rejects_bad_divisor_and_top_checks_ports():
    with pytest.raises(ValueError, match="divisor"):
        UARTRx(1)
    with pytest.raises(ValueError, match="divisor"):
        UARTTx(2.5)
    with pytest.raises(ValueError, match="pc__valid"):
        boards.UartStreamTop({k: v for k, v in PORTS.items() if k != "pc__valid"}, "x", 25e6)
    with pytest.raises(ValueError, match="too slow"):
        boards.UartStreamTop(PORTS, "x", 200e3)
    with pytest.raises(ValueError, match="board must be one of"):
        boards.get_board("arty-a7-35", vendor="lattice")


# -- Lattice place and route ------------------------------------------------------------------------
def test_parse_report_takes_the_slowest_clock():
    rep = {"fmax": {"a": {"achieved": 80.0, "constraint": 25.0}, "b": {"achieved": 55.5, "constraint": 12.0}},
           "utilization": {"ICESTORM_LC": {"used": 10, "available": 5280}, "SB_IO": {"used": 0, "available": 39}}}
    r = nextpnr.parse_report(rep)
    assert r["fmax_mhz"] == 55.5 and r["constraint_mhz"] == 12.0
    assert r["utilisation"] == {"ICESTORM_LC": {"used": 10, "available": 5280}}
    with pytest.raises(ValueError, match="no clock"):
        nextpnr.parse_report({"fmax": {}})


@pytest.fixture(scope="session")
def ice40_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("pnr-ice40")
    return out, nextpnr.place_and_route(DESIGN, "icebreaker", out)


def test_ice40_bitstream_fmax_and_latency(ice40_build):
    out, rep = ice40_build
    bit = out / rep["bitstream"]
    assert bit.stat().st_size > 100_000  # a whole UP5K configuration image (~104 kB)
    assert rep["device"] == "iCE40UP5K" and rep["clock_mhz"] == 12.0
    assert rep["fmax_mhz"] > 0
    assert rep["timing_met"] == (rep["fmax_mhz"] >= 12.0)
    assert rep["latency_ns_update"] == pytest.approx(2 * 1e3 / rep["fmax_mhz"])
    assert rep["utilisation"]["ICESTORM_LC"]["used"] > 16  # the multiplier alone needs more
    assert json.loads((out / "report.json").read_text()) == rep
    # the critical path is the one nextpnr's fmax comes from, split into cell and wire delays
    cp = rep["critical_path"]
    assert cp["total_ns"] == pytest.approx(1e3 / rep["fmax_mhz"], abs=2e-3)
    assert cp["logic_ns"] + cp["routing_ns"] == pytest.approx(cp["total_ns"], abs=2e-3)
    assert cp["logic_ns"] > 0 and cp["routing_ns"] > 0
    named = [end for end in (cp["start"], cp["end"]) if end["role"] != "board top"]
    assert all(end["cell"].startswith("core.") and end["signal"] in ("m__payload", "m__valid") for end in named)
    # the core Verilog went into the build and the UART pins are constrained
    assert "module onchip_learner" in (out / "onchip_learner.v").read_text()
    pcf = (out / "top.pcf").read_text()
    assert "uart_0__rx" in pcf and "uart_0__tx" in pcf


@pytest.mark.slow  # the default run places the iCE40 board top above; the presets' iCE40 rows: sweeps/timing/ice40_sweep.py
def test_kan_learner_with_random_initial_coefficients_builds_for_icebreaker(tmp_path):
    """A whole learner on the iCE40: coefficient banks and reset ROM in SB_RAM40_4K, the
    multipliers in SB_MAC16 (in LUTs the UP5K overflows)."""
    from onchip.hw import generate
    from onchip.spec import load_spec

    design = generate(load_spec("kan-regression").replace(init_scale=0.5, timing="compact"), axis=False)
    rep = nextpnr.place_and_route(design, "icebreaker", tmp_path)
    assert (tmp_path / rep["bitstream"]).stat().st_size > 100_000
    util = rep["utilisation"]
    assert util["ICESTORM_RAM"]["used"] >= 5  # 4 coefficient banks (one edge, k = 3) and the ROM
    assert util["ICESTORM_DSP"]["used"] > 0 and util["ICESTORM_LC"]["used"] < util["ICESTORM_LC"]["available"]
    assert rep["latency_ns_update"] == pytest.approx(5 * 1e3 / rep["fmax_mhz"])
    # the plan the cycles come from travels with the numbers
    assert (rep["datapath"], rep["schedule"], rep["staleness"], rep["timing"]) == ("parallel", "sequential", 0, "compact")
    # the slowest path lies in the learner, and both its ends map back to the learner's signals
    cp = rep["critical_path"]
    assert cp["total_ns"] == pytest.approx(1e3 / rep["fmax_mhz"], abs=2e-3)
    for end in (cp["start"], cp["end"]):
        assert end["cell"].startswith("core.") and end["signal"], cp


def test_pnr_rejects_xilinx_board_and_bad_seed(tmp_path):
    with pytest.raises(ValueError, match="board must be one of"):
        nextpnr.place_and_route(DESIGN, "arty-a7-35", tmp_path)
    with pytest.raises(ValueError, match="seed"):
        nextpnr.place_and_route(DESIGN, "icebreaker", tmp_path, seed=-1)
    # options go into the build's shell script: nothing but option characters
    with pytest.raises(ValueError, match=r"synth_opts must be tool options.*'-dff; rm -rf x'"):
        nextpnr.place_and_route(DESIGN, "icebreaker", tmp_path, synth_opts="-dff; rm -rf x")
    with pytest.raises(ValueError, match="nextpnr_opts must be tool options"):
        nextpnr.place_and_route(DESIGN, "icebreaker", tmp_path, nextpnr_opts=["--placer", "sa"])
    assert not any(tmp_path.iterdir())


def _cells(build: Path, kind: str) -> int:
    netlist = json.loads((build / "top.json").read_text())
    return sum(c["type"] == kind for mod in netlist["modules"].values() for c in mod["cells"].values())


def test_pnr_passes_synthesis_and_nextpnr_options(ice40_build, tmp_path):
    """The extra options reach Yosys (``-nocarry``: no carry cells where the default flow has some)
    and nextpnr's command line."""
    nextpnr.place_and_route(DESIGN, "icebreaker", tmp_path, synth_opts="-nocarry", nextpnr_opts="--placer sa")
    assert _cells(ice40_build[0], "SB_CARRY") > 0 and _cells(tmp_path, "SB_CARRY") == 0
    assert "--seed 1 --placer sa" in (tmp_path / "build_top.sh").read_text()


@pytest.mark.slow
def test_ecp5_bitstream(tmp_path):
    rep = nextpnr.place_and_route(DESIGN, "ulx3s-85f", tmp_path)
    assert (tmp_path / "top.bit").stat().st_size > 100_000
    assert rep["device"] == "LFE5U-85F" and rep["fmax_mhz"] > 0


# -- Vivado scripts ---------------------------------------------------------------------------------
def test_vivado_part_project_references_part_files_and_clock(tmp_path):
    m = vivado.write_part_project(DESIGN, tmp_path / "a", clock_mhz=250.0)
    tcl = (tmp_path / "a" / "build.tcl").read_text()
    assert m["part"] == "xcvu13p-flga2577-2-e"
    assert "set part xcvu13p-flga2577-2-e" in tcl and "-mode out_of_context" in tcl
    for needed in ("read_verilog onchip_learner.v", "read_xdc -mode out_of_context constraints.xdc",
                   "route_design", "reports/utilization_impl.rpt", "reports/timing_impl.rpt"):
        assert needed in tcl
    assert (tmp_path / "a" / "onchip_learner.v").read_text() == CORE_V
    assert "-period 4.000 [get_ports clk]" in (tmp_path / "a" / "constraints.xdc").read_text()
    assert "-source build.tcl" in (tmp_path / "a" / "run.sh").read_text()
    # stable: the same input writes the same bytes
    vivado.write_part_project(DESIGN, tmp_path / "b", clock_mhz=250.0)
    for f in m["files"]:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_vivado_board_project_has_constraints_core_and_bitstream(tmp_path):
    m = vivado.write_board_project(DESIGN, "arty-a7-35", tmp_path / "a")
    tcl = (tmp_path / "a" / "top.tcl").read_text()
    assert m["part"] == "xc7a35ticsg324-1L"
    assert "-part xc7a35ticsg324-1L" in tcl and 'add_files "onchip_learner.v"' in tcl
    assert "write_bitstream" in tcl and "read_xdc top.xdc" in tcl
    xdc = (tmp_path / "a" / "top.xdc").read_text()
    assert "LOC A9" in xdc and "LOC D10" in xdc  # Arty A7 USB-UART rx / tx pins
    assert "onchip_learner" in (tmp_path / "a" / "top.v").read_text()  # instantiated as a black box
    vivado.write_board_project(DESIGN, "arty-a7-35", tmp_path / "b")
    for f in ("top.tcl", "top.xdc", "top.v", "run.sh"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_vivado_rejects_bad_part_and_board(tmp_path):
    with pytest.raises(ValueError, match="not a Xilinx part"):
        vivado.write_part_project(DESIGN, tmp_path, part="LFE5U-85F")
    with pytest.raises(ValueError, match="clock_mhz"):
        vivado.write_part_project(DESIGN, tmp_path, clock_mhz=0)
    with pytest.raises(ValueError, match="board must be one of"):
        vivado.write_board_project(DESIGN, "ulx3s-85f", tmp_path)


# -- tool cache -------------------------------------------------------------------------------------
def test_tool_cache_dir_follows_onchip_cache_then_xdg(tmp_path, monkeypatch):
    from onchip.flow import tools

    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "a"))
    assert tools.tool_cache_dir() == tmp_path / "a"
    monkeypatch.delenv("ONCHIP_TOOL_CACHE")
    assert tools.tool_env()["YOWASP_CACHE_DIR"] == str(tmp_path / "a" / "yowasp")
    monkeypatch.setenv("ONCHIP_TOOL_CACHE", str(tmp_path / "w"))
    assert tools.tool_env()["YOWASP_CACHE_DIR"] == str(tmp_path / "w")
    monkeypatch.delenv("ONCHIP_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert tools.tool_cache_dir() == tmp_path / "x" / "onchip"
    with pytest.raises(ValueError, match="tool must be one of"):
        tools.tool_command("vivado")


# -- commands ---------------------------------------------------------------------------------------
def test_vivado_command_writes_the_generated_core(tmp_path, capsys):
    from onchip.cli import main
    from onchip.hw import generate
    from onchip.spec import PRESETS

    assert main(["vivado", "--spec", "kan-regression", "--out", str(tmp_path / "v")]) == 0
    from onchip.hw.description import strip_header

    design = generate(PRESETS["kan-regression"], axis=False)
    written = (tmp_path / "v" / "onchip_learner.v").read_text()
    # the generated core, its header naming the clock the Vivado project constrains
    assert strip_header(written) == strip_header(design.verilog)
    assert "// Clock constraint: 200 MHz (constraints.xdc: create_clock on clk" in written
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert manifest["part"] == "xcvu13p-flga2577-2-e"
    assert manifest["latency_cycles_update"] == design.info["latency_cycles_update"]


def test_synth_names_both_latencies_as_generate_does(tmp_path, capsys, monkeypatch):
    """`onchip synth` once printed one unlabeled `latency=` (the update's); it now says which is which."""
    from onchip.cli import main
    from onchip.hw import generate
    from onchip.spec import PRESETS

    monkeypatch.setattr(yosys, "synthesize", lambda verilog, top, family, workdir=None: {
        "family": family, **yosys.resources_from_cells({}, family), "cells": {}, "yosys_version": "fake"})
    assert main(["synth", "--spec", "kan-readout", "--out", str(tmp_path / "s")]) == 0
    info = generate(PRESETS["kan-readout"], axis=False).info
    assert info["latency_cycles_prediction"] != info["latency_cycles_update"]  # else the line could not tell
    assert (f"latency to prediction {info['latency_cycles_prediction']} cycles, to update "
            f"{info['latency_cycles_update']} cycles, II {info['initiation_interval']}") in capsys.readouterr().out


def test_commands_reject_bad_input_before_writing(tmp_path, capsys):
    from onchip.cli import main

    assert main(["vivado", "--spec", "kan-regression", "--part", "LFE5U-85F", "--out", str(tmp_path / "a")]) == 2
    assert main(["synth", "--spec", "no-such-preset", "--out", str(tmp_path / "b")]) == 2
    assert main(["sweep", str(tmp_path / "none.toml"), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "not a Xilinx part" in err and "no-such-preset" in err and "does not exist" in err
    assert not any(tmp_path.iterdir())


def test_a_failing_tool_ends_the_command_in_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from onchip.cli import main
    from onchip.flow import tools

    def broken(tool, args, cwd, **kw):
        raise tools.ToolError(f"{tool} failed with status 3:\nERROR: out of memory")

    monkeypatch.setattr(yosys, "run_tool", broken)
    out = tmp_path / "synth"
    assert main(["synth", "--spec", "kan-regression", "--family", "xcup", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "onchip synth: tool failed: yosys failed with status 3" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("family, preset, changes, ram_cells", [
    # non-zero initial coefficients: the reset ROM is not constant-folded away
    ("xcup", "kan-regression", dict(init_scale=0.5), ("RAM32M", "RAM32M16", "RAM64M", "RAM64M8")),
    ("ice40", "kan-regression", dict(init_scale=0.5), ("SB_RAM40_4K",)),  # no LUTRAM on the iCE40
    ("ecp5", "mlp-readout", dict(datapath="serial"), ("TRELLIS_DPR16X4", "DP16KD")),
])
def test_generated_learners_with_initial_parameters_synthesize(family, preset, changes, ram_cells):
    from onchip.hw import generate
    from onchip.spec import load_spec

    design = generate(load_spec(preset).replace(**changes), axis=False)
    assert "theta0_rom" in design.verilog and "ram_style" in design.verilog
    res = yosys.synthesize(design.verilog, design.top, family)
    assert res["lut"] > 0 and res["ff"] > 0
    if ram_cells:  # the parameter banks are RAM, not flip-flops
        assert any(res["cells"].get(c, 0) for c in ram_cells), res["cells"]


def test_host_frames_follow_the_sample_and_prediction_layouts():
    """What hw/README.md's pyserial example sends and reads: kan-readout samples are x0 | x1 << 16 |
    y << 32 | kind << 48 in 7 bytes, predictions pred | decision << 16 in 3 bytes, little-endian,
    two's complement."""
    import numpy as np

    from onchip.flow.boards import prediction_frame_bytes, read_predictions, sample_frames
    from onchip.spec import PRESETS

    spec = PRESETS["kan-readout"]
    frames = sample_frames(spec, np.array([[1, -1], [256, 0]]), np.array([[-2], [3]]))
    assert frames == [bytes([0x01, 0x00, 0xFF, 0xFF, 0xFE, 0xFF, 0]), bytes([0x00, 0x01, 0, 0, 0x03, 0x00, 0])]
    assert prediction_frame_bytes(spec) == 3
    np.testing.assert_array_equal(read_predictions(spec, b"\xfe\xff\x00\x05\x00\x01"), [[-2], [5]])
    with pytest.raises(ValueError, match="4 bytes is not a whole number of 3-byte prediction frames"):
        read_predictions(spec, b"\x00\x00\x00\x00")
    with pytest.raises(ValueError, match="x_raw holds raw values"):
        sample_frames(spec, np.array([[-32769, 0]]), np.array([[0]]))


def test_over_budget_names_each_resource_needed_and_available():
    from onchip.flow import fit

    util = {"MULT18X18D": {"used": 204, "available": 156}, "TRELLIS_COMB": {"used": 100, "available": 83640},
            "DP16KD": {"used": 209, "available": 208}, "TRELLIS_IO": {"used": 3, "available": 365}}
    assert fit.over_budget(util) == ["BRAM (DP16KD): 209 needed, 208 available",
                                     "DSP (MULT18X18D): 204 needed, 156 available"]
    assert fit.over_budget({"TRELLIS_FF": {"used": 10, "available": 10}}) == []
    # read back, as tables of refusals do; Xilinx's LUT and FF name no primitive
    xilinx = fit.over_budget({"LUT": {"used": 30000, "available": 20800}, "DSP (DSP48)": {"used": 91, "available": 90}})
    assert [(s["resource"], s["cell"], s["needed"], s["available"])
            for s in fit.shortfalls("; ".join(fit.over_budget(util) + xilinx))] == [
        ("BRAM", "DP16KD", 209, 208), ("DSP", "MULT18X18D", 204, 156), ("DSP", "DSP48", 91, 90), ("LUT", None, 30000, 20800)]
    assert fit.shortfalls("nextpnr failed") == []
    # the pack-only run writes its own report and log, and no configuration
    args = ["--quiet", "--report", "pnr_report.json", "--seed", "1", "--log", "top.tim", "--85k",
            "--json", "top.json", "--textcfg", "top.config"]
    assert fit._pack_only_args(args) == ["--quiet", "--seed", "1", "--85k", "--json", "top.json",
                                         "--pack-only", "--report", "fit_report.json", "--log", "fit.log"]


def test_a_design_too_large_for_the_device_is_refused_before_placement(tmp_path, capsys, monkeypatch):
    """mlp-readout on the iCE40 UP5K needs 56 multipliers (8 SB_MAC16) and more logic cells than
    it has. With the DSP count after coarse synthesis passed over (it stops at the DSPs alone), the
    pack names each resource over budget: `onchip pnr` stops after packing, one line, exit 2, no
    output folder."""
    from onchip.cli import main

    monkeypatch.setattr(nextpnr.fit, "check_lattice_dsp", lambda *a: 0)
    out = tmp_path / "pnr"
    assert main(["pnr", "--spec", "mlp-readout", "--board", "icebreaker", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "does not fit the iCE40UP5K" in err
    assert "DSP (ICESTORM_DSP): 56 needed, 8 available" in err and "LUT (ICESTORM_LC): " in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("timing, board, device, needed, available", [
    # fast on ECP5: its 56 products (forward 2 x 8 + 8, back-propagated 8, updates 2 x 8 + 8) are
    # MULT18X18D instances; compact on iCE40: generic products, mapped to SB_MAC16 by coarse synthesis
    # (at once: the instances alone are over the budget, no Yosys run)
    ("fast", "ulx3s-25f", "LFE5U-25F", "MULT18X18D): at least 56", 28),
    ("compact", "icebreaker", "iCE40UP5K", "SB_MAC16): 56", 8),
])
def test_a_design_taking_more_dsps_than_the_device_has_is_refused_before_the_build(
        tmp_path, capsys, monkeypatch, timing, board, device, needed, available):
    """mlp-readout (2->8->1) takes 56 DSP blocks; `onchip pnr` counts them where Yosys's coarse
    synthesis ends and refuses the design before any build plan: one line naming the DSPs needed
    and available, exit 2, no output folder."""
    from onchip.cli import main

    def no_build(*a, **kw):
        raise AssertionError("the build was prepared for a design over the DSP budget")

    monkeypatch.setattr(nextpnr.fit, "wrapper", no_build)
    if timing == "fast":
        monkeypatch.setattr(yosys, "dsp_blocks", no_build)
    out = tmp_path / "pnr"
    assert main(["pnr", "--spec", "mlp-readout", "--timing", timing, "--board", board, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"does not fit the {device}: DSP ({needed} needed, {available} available" in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_dsp_blocks_are_counted_after_coarse_synthesis_as_full_synthesis_counts_them():
    """Two MULT18X18D instances, a product of two signals and two products never used in the same
    cycle (Yosys share merges them into one): 4 DSP blocks after coarse synthesis, as many as the full
    synth_ecp5 takes; on iCE40 the three products are 2 SB_MAC16, as synth_ice40 -dsp takes.
    kan-paper's `fast` plan on ECP5 takes its 4 coefficient and 4 update products (1 edge, k = 3): 8,
    within the 85F's 156."""
    from onchip.flow import fit
    from onchip.hw import generate
    from onchip.spec import PRESETS

    products = """
module top(input clk, input sel, input signed [11:0] a, input signed [11:0] b, input signed [11:0] c,
           output reg signed [23:0] p, output reg signed [23:0] q, output [35:0] t, output [35:0] u);
  always @(posedge clk) begin
    p <= a * b;
    q <= sel ? a * c : b * c;
  end
"""
    instances = """
  MULT18X18D m0 (.A0(a[0]), .B0(b[0]), .P0(t[0]));
  MULT18X18D m1 (.A0(a[1]), .B0(b[1]), .P0(u[0]));
  assign t[35:1] = 0;
  assign u[35:1] = 0;
"""
    ecp5 = products + instances + "endmodule\n"
    ice40 = products + "  assign t = 0;\n  assign u = 0;\nendmodule\n"
    assert yosys.dsp_blocks(ecp5, "top", "ecp5") == 4 == yosys.synthesize(ecp5, "top", "ecp5")["dsp"]
    assert fit.instantiated_dsp_blocks(ecp5, "ecp5") == 2  # the instances alone: a lower bound
    assert yosys.dsp_blocks(ice40, "top", "ice40") == 2 == yosys.synthesize(ice40, "top", "ice40")["dsp"]
    kan_paper = generate(PRESETS["kan-paper"], axis=False, dsp="ecp5")
    assert fit.check_lattice_dsp(kan_paper.verilog, kan_paper.top, "LFE5U-85F", "ecp5") == 8
    assert fit.instantiated_dsp_blocks(kan_paper.verilog, "ecp5") == 8
    assert fit.check_lattice_dsp(kan_paper.verilog, kan_paper.top, "LFE5U-99F", "ecp5") is None
    with pytest.raises(ValueError, match="family must be one of"):
        yosys.dsp_blocks(ecp5, "top", "xcup")


def test_a_failing_yosys_names_its_error_from_its_log(tmp_path, monkeypatch):
    """Yosys runs quiet in the board build: its ERROR line is in top.rpt, and the ToolError carries it
    (a Yosys assertion once ended a placement with an empty message). The abc9 assertion of Yosys 0.70
    gets one more build with ``-dff``; any other Yosys error ends the build at once."""
    import subprocess

    from onchip.flow.tools import ToolError
    from onchip.hw import generate
    from onchip.spec import PRESETS

    scripts = []

    def failing_build(cmd, cwd, **kw):
        scripts.append(Path(cwd, "top.ys").read_text())
        step = "3.46.30.7. Executing ABC_OPS_REINTEGRATE pass." if "abc9" in cwd.name else "2.1. Executing PROC pass."
        Path(cwd, "top.rpt").write_text(f"{step}\nERROR: Assert `GetSize(conn.first) == GetSize(conn.second)' failed.\n")
        return subprocess.CompletedProcess(cmd, 1, stdout="")

    monkeypatch.setattr(nextpnr.processes, "run", failing_build)
    monkeypatch.setattr(nextpnr.fit, "check_lattice_dsp", lambda *a: 0)  # its Yosys read is not the build's
    design = generate(PRESETS["kan-paper"], axis=False)
    with pytest.raises(ToolError, match=r"Yosys \(top.rpt\): ERROR: Assert `GetSize"):
        nextpnr.place_and_route(design, "ulx3s-85f", tmp_path / "abc9")
    assert len(scripts) == 2 and "-dff" not in scripts[0] and "synth_ecp5 -dff" in scripts[1]
    scripts.clear()
    with pytest.raises(ToolError, match=r"Yosys \(top.rpt\): ERROR: Assert `GetSize"):
        nextpnr.place_and_route(design, "ulx3s-85f", tmp_path / "other")
    assert len(scripts) == 1  # not the abc9 pass: no second build


def test_pnr_folder_holds_the_core_with_its_board_clock_and_placed_fmax(tmp_path, monkeypatch):
    """onchip pnr writes the core's Verilog and JSON beside the placement, their clock the board's and
    their fmax the placement's (the place and route itself stubbed: its report is what is copied)."""
    from onchip.flow import steps

    def placed(design, board, out, **kw):
        return {"clock_mhz": 12.0, "fmax_mhz": 57.25}

    monkeypatch.setattr(nextpnr, "place_and_route", placed)
    steps.pnr("kan-paper", out=tmp_path / "p", board="icebreaker", seed=3)
    info = json.loads((tmp_path / "p" / "onchip_learner.json").read_text())
    assert (info["clock"]["constraint_mhz"], info["clock"]["fmax_mhz"]) == (12.0, 57.25)
    assert "icebreaker" in info["clock"]["constraint"] and "seed 3" in info["clock"]["fmax"]
    assert "// Clock constraint: 12 MHz (the icebreaker board clock" in (tmp_path / "p" / "onchip_learner.v").read_text()
    assert "fmax: 57.25 MHz (nextpnr" in (tmp_path / "p" / "onchip_learner.v").read_text()
