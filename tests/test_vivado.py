"""Vivado flows for the Xilinx boards of quantum-control labs, the IP packaging script, the parser of
Vivado's reports (onchip vivado-report) and the critical path of nextpnr's report.

Vivado does not run here: the tests check what the scripts say (part, files, constraints, interface
names, packaging commands) and parse report text written in Vivado's own format.
"""

import json
import re
from pathlib import Path

import pytest

from onchip.flow import nextpnr, vivado
from onchip.flow.vivado_report import parse_timing_summary, parse_utilization, signal_of, vivado_report

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def design():
    """kan-regression with its AXI4-Stream wrapper (the real port names the IP inference needs)."""
    from onchip.hw import generate
    from onchip.spec import PRESETS

    return generate(PRESETS["kan-regression"])


# -- fit check before any Vivado run -------------------------------------------------------------------
def test_xilinx_parts_map_to_their_device_and_unknown_ones_are_not_checked():
    from onchip.flow import fit

    assert fit.xilinx_device("xc7a35ticsg324-1L") == "xc7a35t"
    assert fit.xilinx_device("xc7a100tcsg324-1") == "xc7a100t"
    assert fit.xilinx_device("XCKU040-FFVA1156-2-E") == "xcku040"
    assert fit.xilinx_device("xc7k325tffg900-2") is None
    # every board onchip offers, and the default part, has its resources in the table
    for board in [None, *vivado.xilinx_boards()]:
        assert fit.xilinx_device(vivado.project_part(board=board)) in fit.XILINX_PARTS, board
    out = fit.check_xilinx_fit("module m; endmodule", "m", "xc7k325tffg900-2")
    assert out["checked"] is False and "xc7k325tffg900-2" in out["reason"]


def _fake_counts(monkeypatch, tmp_path, **counts):
    """Yosys replaced by fixed counts (the real one is below and in the slow set); its cache in tmp."""
    from onchip.flow import yosys

    calls = []

    def fake(verilog, top, family, workdir=None):
        calls.append(family)
        return {"lut": 100, "ff": 100, "dsp": 1, "bram": 0.0, **counts}

    monkeypatch.setattr(yosys, "synthesize", fake)
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    return calls


def test_a_design_too_large_for_the_part_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    from onchip.cli import main

    calls = _fake_counts(monkeypatch, tmp_path, dsp=81, bram=60.5, lut=17_600)
    out = tmp_path / "rp"
    assert main(["vivado", "--spec", "kan-regression", "--board", "redpitaya-125-14", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "does not fit the xc7z010 (xc7z010clg400-1; Yosys xc7 count)" in err
    assert "DSP (DSP48): 81 needed, 80 available" in err and "BRAM (RAMB36): 60.5 needed, 60 available" in err
    assert "LUT" not in err.split("available")[-1] and "LUT:" not in err  # 17600 of 17600 fits
    assert calls == ["xc7"] and not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    # the same counts fit the default UltraScale+ part (counted for xcup); --no-fit-check runs no Yosys
    assert main(["vivado", "--spec", "kan-regression", "--out", str(tmp_path / "vu")]) == 0
    assert calls == ["xc7", "xcup"] and "fits the xcvu13p" in capsys.readouterr().out
    assert main(["vivado", "--spec", "kan-regression", "--board", "redpitaya-125-14", "--no-fit-check",
                 "--out", str(out)]) == 0
    assert calls == ["xc7", "xcup"] and "fit check not run: skipped" in capsys.readouterr().out
    assert json.loads((out / "manifest.json").read_text())["fit"]["checked"] is False


def test_learners_that_differ_only_in_name_share_one_fit_synthesis(tmp_path, monkeypatch):
    """Two IP cores of one spec under two top names (docs/integrate.md's qubit0 and qubit1) cost one Yosys
    run, of a design that names neither; another spec, or another family, costs its own."""
    import onchip
    from onchip.flow import fit, yosys

    calls = _fake_counts(monkeypatch, tmp_path)
    counted = yosys.synthesize
    seen = []

    def synthesize(verilog, top, family, workdir=None):
        seen.append((top, "qubit" in verilog))
        return counted(verilog, top, family)

    monkeypatch.setattr(yosys, "synthesize", synthesize)
    for top in ("qubit0_learner", "qubit1_learner"):
        design = onchip.generate("kan-readout", top=top)
        assert f"\\{top}." in design.verilog  # its submodules are named after it
        fit.check_xilinx_fit(design.verilog, design.top, "xcvu13p-fhga2104-2-e")
    assert calls == ["xcup"] and seen == [(fit.FIT_TOP, False)]
    other = onchip.generate("kan-regression", top="qubit0_learner")
    fit.check_xilinx_fit(other.verilog, other.top, "xcvu13p-fhga2104-2-e")
    fit.check_xilinx_fit(design.verilog, design.top, "xc7a100tcsg324-1")
    assert calls == ["xcup", "xcup", "xc7"]


@pytest.mark.slow
def test_the_wide_kan_is_refused_for_the_zynq_7010_with_real_yosys(tmp_path, capsys):
    """A 3->4->2 KAN (G=16, k=3) at fast needs about 200 DSP48 (Yosys, xc7); the Zynq-7010 has 80."""
    from onchip.cli import main

    spec = tmp_path / "wide.toml"
    spec.write_text('kind = "kan"\nwidths = [3, 4, 2]\ngrid_size = 16\nspline_order = 3\ntiming = "fast"\n')
    out = tmp_path / "rp"
    assert main(["vivado", "--spec", str(spec), "--board", "redpitaya-125-14", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not fit the xc7z010" in err and "80 available" in err and not out.exists()


# -- boards ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, module, cls", [
    ("rfsoc4x2", "rfsoc4x2", "RFSoC4x2Platform"),
    ("redpitaya-125-14", "redpitaya_125_14", "RedPitaya14Platform"),
    ("kcu105", "kcu105", "KCU105Platform"),
])
def test_axis_boards_agree_with_amaranth_boards(name, module, cls):
    """The table's part and reference clock are amaranth-boards' (part as Amaranth writes it for Vivado)."""
    import importlib

    platform = getattr(importlib.import_module(f"amaranth_boards.{module}"), cls)()
    board = vivado.AXIS_BOARDS[name]
    assert board.part == vivado._board_part(platform)
    vivado.check_part(board.part)
    clk = platform.lookup(platform.default_clk)
    assert f"{clk.clock.frequency / 1e6:g} MHz" in board.clock
    assert f"{clk.ios[0].p.names[0]}/{clk.ios[0].n.names[0]}" in board.clock  # the differential pins
    assert clk.attrs["IOSTANDARD"] in board.clock
    assert not any(r.name == "uart" for r in platform.resources.values())  # hence the AXI4-Stream top


def test_parts_of_every_family_are_accepted_and_others_refused():
    for part in ("xc7a35ticsg324-1L", "xc7z010clg400-1", "xczu48dr-ffvg1517-2-e", "xcvu13p-flga2577-2-e",
                 "xczu9eg-ffvb1156-2-e"):
        assert vivado.check_part(part) == part
    for bad in ("LFE5U-85F", "xczu9eg", "iCE40UP5K-SG48"):
        with pytest.raises(ValueError, match="not a Xilinx part"):
            vivado.check_part(bad)


@pytest.mark.parametrize("board", list(vivado.AXIS_BOARDS))
def test_axis_board_project_implements_the_axis_learner_out_of_context(design, board, tmp_path):
    m = vivado.write_project(design, tmp_path, board=board, clock_mhz=250.0)
    part = vivado.AXIS_BOARDS[board].part
    tcl = (tmp_path / "build.tcl").read_text()
    assert (m["flow"], m["board"], m["part"], m["top"], m["clock_port"]) == (
        "board-axis", board, part, "onchip_learner_axis", "aclk")
    assert f"set part {part}\n" in tcl and "set top onchip_learner_axis\n" in tcl
    assert "read_verilog onchip_learner_axis.v" in tcl and "read_xdc -mode out_of_context constraints.xdc" in tcl
    assert "synth_design -top $top -part $part -mode out_of_context" in tcl
    assert tcl.index("route_design") < tcl.index("report_timing_summary -max_paths 10 -report_unconstrained "
                                                  "-file reports/timing_impl.rpt")
    assert "report_utilization -file reports/utilization_impl.rpt" in tcl
    assert m["reports"] == {"timing": "reports/timing_impl.rpt", "utilization": "reports/utilization_impl.rpt"}
    header = tcl.split("set part")[0]
    assert "AXI4-Stream learner, not the UART board top" in header and f"onchip vivado --ip --board {board}" in header
    assert "create_clock -name aclk -period 4.000 [get_ports aclk]" in (tmp_path / "constraints.xdc").read_text()
    assert (tmp_path / "onchip_learner_axis.v").read_text() == design.axis_verilog
    assert m["latency_cycles_update"] == design.info["latency_cycles_update"]


def test_the_reports_vivado_report_reads_are_the_ones_each_flow_writes(design, tmp_path):
    for flow, kw, script in (("part", {}, "build.tcl"), ("board-axis", {"board": "kcu105"}, "build.tcl"),
                             ("board", {"board": "arty-a7-35"}, "top.tcl")):
        m = vivado.write_project(design, tmp_path / flow, **kw)
        tcl = (tmp_path / flow / script).read_text()
        assert m["flow"] == flow
        for kind, command in (("timing", "report_timing_summary"), ("utilization", "report_utilization")):
            line = next(x for x in tcl.splitlines() if x.endswith(f"-file {m['reports'][kind]}"))
            assert line.startswith(command) and tcl.index(line) > tcl.index("route_design")


def test_ip_project_packages_the_axis_learner_with_inferred_interfaces(design, tmp_path):
    m = vivado.write_project(design, tmp_path, board="rfsoc4x2", ip=True)
    tcl = (tmp_path / "package_ip.tcl").read_text()
    assert (m["flow"], m["part"]) == ("ip", "xczu48dr-ffvg1517-2-e")
    assert m["vlnv"] == "onchip.dev:onchip:onchip_learner_axis:1.0"
    assert "create_project -force onchip_ip ip_project -part $part" in tcl and "set part xczu48dr-ffvg1517-2-e" in tcl
    assert "add_files -norecurse onchip_learner_axis.v" in tcl and "set_property top $top [current_fileset]" in tcl
    assert "ipx::package_project -root_dir ip -vendor onchip.dev -library onchip" in tcl
    for prop, value in (("vendor", "onchip.dev"), ("library", "onchip"), ("name", "onchip_learner_axis"),
                        ("version", "1.0")):
        assert f"set_property {prop} {value} $core" in tcl
    assert "ipx::infer_bus_interfaces xilinx.com:interface:axis_rtl:1.0 $core" in tcl
    assert "foreach busif {s_axis_sample m_axis_pred s_axis_param m_axis_param}" in tcl
    assert "ipx::associate_bus_interfaces -busif $busif -clock aclk $core" in tcl
    assert "ipx::associate_bus_interfaces -clock aclk -reset aresetn $core" in tcl
    assert "set_property value ACTIVE_LOW $polarity" in tcl
    assert tcl.index("ipx::check_integrity") < tcl.index("ipx::save_core")
    # inference works from the names: every bus has <bus>_tdata/_tvalid/_tready ports in the Verilog
    ports = {line.split()[-1].rstrip(";") for line in design.axis_verilog.split("module onchip_learner_axis")[1]
             .split("endmodule")[0].splitlines() if line.strip().startswith(("input", "output"))}
    assert {f"{b}_{s}" for b in vivado.AXIS_BUSES for s in ("tdata", "tvalid", "tready")} | {"aclk", "aresetn"} <= ports
    assert (tmp_path / "onchip_learner_axis.v").read_text() == design.axis_verilog


def test_ip_project_refuses_a_learner_without_an_axis_port(design, tmp_path):
    from dataclasses import replace

    broken = replace(design, axis_verilog=design.axis_verilog.replace("m_axis_pred_tready", "m_axis_pred_ready"))
    with pytest.raises(ValueError, match="has no port m_axis_pred_tready"):
        vivado.write_ip_project(broken, tmp_path)
    with pytest.raises(ValueError, match="AXI4-Stream wrapper"):
        vivado.write_ip_project(replace(design, axis_verilog=""), tmp_path)


def test_vivado_ip_folder_holds_the_json_and_vhdl_component_and_names_its_part_and_clock(tmp_path, capsys):
    """What an integrator takes from an IP folder: the JSON and the VHDL component of <top>_axis beside
    the script; the part from --board, or the default named on the console; the clock: none (the
    block design's) or, with --clock-mhz, the FREQ_HZ the script gives aclk, the same in JSON and headers."""
    from onchip.cli import main

    assert main(["vivado", "--ip", "--spec", "kan-regression", "--top", "q0", "--no-fit-check",
                 "--out", str(tmp_path / "default")]) == 0
    assert f"(part {vivado.DEFAULT_PART}: the default part, as neither --part nor --board was given)" \
        in capsys.readouterr().out
    assert main(["vivado", "--ip", "--spec", "kan-regression", "--top", "q0", "--no-fit-check", "--board",
                 "redpitaya-125-14", "--clock-mhz", "125", "--packet", "16", "--out", str(tmp_path / "rp")]) == 0
    assert "(part xc7z010clg400-1)" in capsys.readouterr().out
    for folder in ("default", "rp"):
        files = {p.name for p in (tmp_path / folder).iterdir()}
        assert {"q0.json", "q0_axis.v", "q0_axis_component.vhd", "q0_axis_inst.v", "package_ip.tcl"} <= files
    rp = tmp_path / "rp"
    m = json.loads((rp / "manifest.json").read_text())
    assert (m["part"], m["part_from"], m["freq_hz"]) == ("xc7z010clg400-1", "--board", 125_000_000)
    assert "set part xc7z010clg400-1" in (rp / "package_ip.tcl").read_text()
    assert "set_property value 125000000 $freq" in (rp / "package_ip.tcl").read_text()
    info = json.loads((rp / "q0.json").read_text())
    assert (info["clock"]["constraint_mhz"], info["clock"]["freq_hz"], info["clock"]["fmax_mhz"]) == (125.0, 125_000_000, None)
    assert info["axis"]["packet"] == 16 and "m_axis_pred_tlast" in (rp / "q0_axis.v").read_text()
    assert "Clock constraint: 125 MHz, FREQ_HZ 125000000 (" in (rp / "q0_axis.v").read_text()
    assert "component q0_axis is" in (rp / "q0_axis_component.vhd").read_text()
    assert re.search(r"m_axis_pred_tlast +: out std_logic;", (rp / "q0_axis_component.vhd").read_text())
    plain = json.loads((tmp_path / "default" / "q0.json").read_text())["clock"]
    assert (plain["constraint_mhz"], plain["freq_hz"]) == (None, None) and "block design" in plain["constraint"]
    assert "FREQ_HZ" not in (tmp_path / "default" / "package_ip.tcl").read_text()


def test_vivado_command_boards_ip_and_refusals(tmp_path, capsys):
    from onchip.cli import main

    assert main(["vivado", "--spec", "kan-regression", "--board", "redpitaya-125-14", "--clock-mhz", "125",
                 "--out", str(tmp_path / "rp")]) == 0
    m = json.loads((tmp_path / "rp" / "manifest.json").read_text())
    assert (m["part"], m["clock_mhz"]) == ("xc7z010clg400-1", 125.0)
    # the fit check ran Yosys for the xc7 family and compared with the Zynq-7010's datasheet totals
    fit = m["fit"]
    assert (fit["checked"], fit["device"], fit["family"]) == (True, "xc7z010", "xc7")
    assert fit["available"] == {"lut": 17_600, "ff": 35_200, "dsp": 80, "bram": 60}
    assert 0 < fit["used"]["dsp"] <= 80 and 0 < fit["used"]["lut"] <= 17_600
    assert "fits the xc7z010" in capsys.readouterr().out
    assert "-period 8.000 [get_ports aclk]" in (tmp_path / "rp" / "constraints.xdc").read_text()
    assert main(["vivado", "--spec", "kan-regression", "--ip", "--out", str(tmp_path / "ip")]) == 0
    assert json.loads((tmp_path / "ip" / "manifest.json").read_text())["part"] == vivado.DEFAULT_PART
    capsys.readouterr()
    bad = [["--board", "arty-a7-35", "--clock-mhz", "100"], ["--board", "kcu105", "--part", "xc7z010clg400-1"],
           ["--ip", "--packet", "0"], ["--board", "zcu102", "--clock-mhz", "0"]]
    for i, flags in enumerate(bad):
        assert main(["vivado", "--spec", "kan-regression", *flags, "--out", str(tmp_path / f"bad{i}")]) == 2
    err = capsys.readouterr().err
    assert "--clock-mhz: board arty-a7-35 runs the UART top at its own clock" in err
    assert "--part: give --part or --board, not both" in err and "--packet: must be an integer in [1, " in err
    assert "argument --clock-mhz" in err or "--clock-mhz: must be" in err
    assert not any((tmp_path / f"bad{i}").exists() for i in range(len(bad)))


# -- Vivado's reports ----------------------------------------------------------------------------------
# report_timing_summary of an out-of-context run, in Vivado 2022.2's layout (sections trimmed to
# those the parser reads plus neighbours; numbers made up but consistent: slack = required - arrival).
TIMING_RPT = """\
Copyright 1986-2022 Xilinx, Inc. All Rights Reserved. Copyright 2022-2023 Advanced Micro Devices, Inc. All Rights Reserved.
---------------------------------------------------------------------------------------------------------------------------------------------
| Tool Version      : Vivado v.2022.2 (lin64) Build 3671981 Fri Oct 14 04:59:54 MDT 2022
| Date              : Mon Nov 30 12:00:00 2026
| Host              : lab running 64-bit Ubuntu 22.04.3 LTS
| Command           : report_timing_summary -max_paths 10 -report_unconstrained -file reports/timing_impl.rpt
| Design            : onchip_learner_axis
| Device            : xczu48dr-ffvg1517
| Speed File        : -2  PRODUCTION 1.30 05-15-2022
| Design State      : Routed
| Temperature Grade : E
---------------------------------------------------------------------------------------------------------------------------------------------

Timing Summary Report

------------------------------------------------------------------------------------------------
| Timer Settings
| --------------
------------------------------------------------------------------------------------------------

  Enable Multi Corner Analysis               :  Yes
  Enable Pessimism Removal                   :  Yes

------------------------------------------------------------------------------------------------
| Design Timing Summary
| ---------------------
------------------------------------------------------------------------------------------------

    WNS(ns)      TNS(ns)  TNS Failing Endpoints  TNS Total Endpoints      WHS(ns)      THS(ns)  THS Failing Endpoints  THS Total Endpoints     WPWS(ns)     TPWS(ns)  TPWS Failing Endpoints  TPWS Total Endpoints  
    -------      -------  ---------------------  -------------------      -------      -------  ---------------------  -------------------     --------     --------  ----------------------  --------------------  
     -0.412       -5.108                     23                 1436        0.012        0.000                      0                 1436        1.725        0.000                       0                   655  


Timing constraints are not met.


------------------------------------------------------------------------------------------------
| Clock Summary
| -------------
------------------------------------------------------------------------------------------------

Clock  Waveform(ns)         Period(ns)      Frequency(MHz)
-----  ------------         ----------      --------------
aclk   {0.000 2.000}        4.000           250.000         


------------------------------------------------------------------------------------------------
| Intra Clock Table
| -----------------
------------------------------------------------------------------------------------------------

Clock             WNS(ns)      TNS(ns)  TNS Failing Endpoints  TNS Total Endpoints      WHS(ns)      THS(ns)  THS Failing Endpoints  THS Total Endpoints     WPWS(ns)     TPWS(ns)  TPWS Failing Endpoints  TPWS Total Endpoints  
-----             -------      -------  ---------------------  -------------------      -------      -------  ---------------------  -------------------     --------     --------  ----------------------  --------------------  
aclk               -0.412       -5.108                     23                 1436        0.012        0.000                      0                 1436        1.725        0.000                       0                   655  


------------------------------------------------------------------------------------------------
| Inter Clock Table
| -----------------
------------------------------------------------------------------------------------------------

From Clock    To Clock          WNS(ns)      TNS(ns)  TNS Failing Endpoints  TNS Total Endpoints      WHS(ns)      THS(ns)  THS Failing Endpoints  THS Total Endpoints  
----------    --------          -------      -------  ---------------------  -------------------      -------      -------  ---------------------  -------------------  


------------------------------------------------------------------------------------------------
| Timing Details
| --------------
------------------------------------------------------------------------------------------------


---------------------------------------------------------------------------------------------------
From Clock:  aclk
  To Clock:  aclk

Setup :           23  Failing Endpoints,  Worst Slack       -0.412ns,  Total Violation       -5.108ns
Hold  :            0  Failing Endpoints,  Worst Slack        0.012ns,  Total Violation        0.000ns
PW    :            0  Failing Endpoints,  Worst Slack        1.725ns,  Total Violation        0.000ns
---------------------------------------------------------------------------------------------------


Max Delay Paths
--------------------------------------------------------------------------------------
Slack (VIOLATED) :        -0.412ns  (required time - arrival time)
  Source:                 learner/err0_s5_reg[3]/C
                            (rising edge-triggered cell FDRE clocked by aclk  {rise@0.000ns fall@2.000ns period=4.000ns})
  Destination:            learner/l0_coef_0_0_bank1_reg_0_1_0_13/RAMA/I
                            (rising edge-triggered cell RAMD32 clocked by aclk  {rise@0.000ns fall@2.000ns period=4.000ns})
  Path Group:             aclk
  Path Type:              Setup (Max at Slow Process Corner)
  Requirement:            4.000ns  (aclk rise@4.000ns - aclk rise@0.000ns)
  Data Path Delay:        4.310ns  (logic 2.538ns (58.886%)  route 1.772ns (41.114%))
  Logic Levels:           11  (CARRY8=4 DSP_A_B_DATA=1 DSP_ALU=1 DSP_M_DATA=1 DSP_MULTIPLIER=1 DSP_OUTPUT=1 DSP_PREADD_DATA=1 LUT3=1)
  Clock Path Skew:        -0.010ns (DCD - SCD + CPR)
  Clock Uncertainty:      0.035ns  ((TSJ^2 + TIJ^2)^1/2 + DJ) / 2 + PE

    Location             Delay type                Incr(ns)  Path(ns)    Netlist Resource(s)
  -------------------------------------------------------------------    -------------------
                         (clock aclk rise edge)       0.000     0.000 r  
                         FDRE                                         r  learner/err0_s5_reg[3]/C
  -------------------------------------------------------------------
                         slack                                 -0.412    

Slack (VIOLATED) :        -0.388ns  (required time - arrival time)
  Source:                 learner/err0_s5_reg[5]/C
                            (rising edge-triggered cell FDRE clocked by aclk  {rise@0.000ns fall@2.000ns period=4.000ns})
  Destination:            learner/l0_coef_0_0_bank0_reg_0_1_0_13/RAMA/I
  Path Group:             aclk
  Path Type:              Setup (Max at Slow Process Corner)
  Requirement:            4.000ns  (aclk rise@4.000ns - aclk rise@0.000ns)
  Data Path Delay:        4.286ns  (logic 2.538ns (59.216%)  route 1.748ns (40.784%))
  Logic Levels:           11  (CARRY8=4 DSP_A_B_DATA=1 DSP_ALU=1 DSP_M_DATA=1 DSP_MULTIPLIER=1 DSP_OUTPUT=1 DSP_PREADD_DATA=1 LUT3=1)


Min Delay Paths
--------------------------------------------------------------------------------------
Slack (MET) :             0.012ns  (arrival time - required time)
  Source:                 learner/x0_s1_reg[0]/C
  Destination:            learner/x0_s2_reg[0]/D
  Path Group:             aclk
  Path Type:              Hold (Min at Fast Process Corner)
  Requirement:            0.000ns  (aclk rise@0.000ns - aclk rise@0.000ns)
  Data Path Delay:        0.061ns  (logic 0.039ns (63.934%)  route 0.022ns (36.066%))
  Logic Levels:           0  


---------------------------------------------------------------------------------------------------
Path Group:  (none)
From Clock:  
  To Clock:  aclk

Max Delay Paths
--------------------------------------------------------------------------------------
Slack:                    inf
  Source:                 s_axis_sample_tdata[0]
  Destination:            learner/x0_s1_reg[0]/D
  Path Group:             (none)
  Path Type:              Setup (Max at Slow Process Corner)
  Data Path Delay:        0.950ns  (logic 0.000ns (0.000%)  route 0.950ns (100.000%))
"""

# report_utilization of the same run (UltraScale+ layout with the Prohibited column, trimmed)
UTIL_US_RPT = """\
Copyright 1986-2022 Xilinx, Inc. All Rights Reserved. Copyright 2022-2023 Advanced Micro Devices, Inc. All Rights Reserved.
---------------------------------------------------------------------------------------------------------------------------------------------
| Tool Version : Vivado v.2022.2 (lin64) Build 3671981 Fri Oct 14 04:59:54 MDT 2022
| Design       : onchip_learner_axis
| Device       : xczu48dr-ffvg1517-2-e
| Speed File   : -2
| Design State : Routed
---------------------------------------------------------------------------------------------------------------------------------------------

Utilization Design Information

1. CLB Logic
------------

+----------------------------+------+-------+------------+-----------+-------+
|          Site Type         | Used | Fixed | Prohibited | Available | Util% |
+----------------------------+------+-------+------------+-----------+-------+
| CLB LUTs*                  |  812 |     0 |          0 |    425280 |  0.19 |
|   LUT as Logic             |  748 |     0 |          0 |    425280 |  0.18 |
|   LUT as Memory            |   64 |     0 |          0 |    213600 |  0.03 |
|     LUT as Distributed RAM |   64 |     0 |            |           |       |
|     LUT as Shift Register  |    0 |     0 |            |           |       |
| CLB Registers              |  655 |     0 |          0 |    850560 |  0.08 |
|   Register as Flip Flop    |  655 |     0 |          0 |    850560 |  0.08 |
|   Register as Latch        |    0 |     0 |          0 |    850560 |  0.00 |
| CARRY8                     |   38 |     0 |          0 |     53160 |  0.07 |
+----------------------------+------+-------+------------+-----------+-------+
* Warning! LUT value is adjusted to account for LUT combining.


3. BLOCKRAM
-----------

+-------------------+------+-------+------------+-----------+-------+
|     Site Type     | Used | Fixed | Prohibited | Available | Util% |
+-------------------+------+-------+------------+-----------+-------+
| Block RAM Tile    |  1.5 |     0 |          0 |      1080 |  0.14 |
|   RAMB36/FIFO*    |    1 |     0 |          0 |      1080 |  0.09 |
|     RAMB36E2 only |    1 |       |            |           |       |
|   RAMB18          |    1 |     0 |          0 |      2160 |  0.05 |
|     RAMB18E2 only |    1 |       |            |           |       |
| URAM              |    0 |     0 |          0 |        80 |  0.00 |
+-------------------+------+-------+------------+-----------+-------+


4. ARITHMETIC
-------------

+----------------+------+-------+------------+-----------+-------+
|    Site Type   | Used | Fixed | Prohibited | Available | Util% |
+----------------+------+-------+------------+-----------+-------+
| DSPs           |    5 |     0 |          0 |      4272 |  0.12 |
|   DSP48E2 only |    5 |       |            |           |       |
+----------------+------+-------+------------+-----------+-------+
"""

# report_utilization of a 7-series run (Red Pitaya's xc7z010; older layout without Prohibited)
UTIL_7_RPT = """\
1. Slice Logic
--------------

+----------------------------+------+-------+-----------+-------+
|          Site Type         | Used | Fixed | Available | Util% |
+----------------------------+------+-------+-----------+-------+
| Slice LUTs                 | 1021 |     0 |     17600 |  5.80 |
|   LUT as Logic             |  957 |     0 |     17600 |  5.44 |
|   LUT as Memory            |   64 |     0 |      6000 |  1.07 |
| Slice Registers            |  702 |     0 |     35200 |  1.99 |
+----------------------------+------+-------+-----------+-------+

3. Memory
---------

+-------------------+------+-------+-----------+-------+
|     Site Type     | Used | Fixed | Available | Util% |
+-------------------+------+-------+-----------+-------+
| Block RAM Tile    |    0 |     0 |        60 |  0.00 |
|   RAMB36/FIFO*    |    0 |     0 |        60 |  0.00 |
|   RAMB18          |    0 |     0 |       120 |  0.00 |
+-------------------+------+-------+-----------+-------+

4. DSP
------

+----------------+------+-------+-----------+-------+
|    Site Type   | Used | Fixed | Available | Util% |
+----------------+------+-------+-----------+-------+
| DSPs           |    5 |     0 |        80 |  6.25 |
|   DSP48E1 only |    5 |       |           |       |
+----------------+------+-------+-----------+-------+
"""


def test_timing_summary_gives_wns_fmax_and_the_worst_setup_path():
    t = parse_timing_summary(TIMING_RPT)
    assert (t["wns_ns"], t["tns_ns"], t["failing_endpoints"], t["whs_ns"]) == (-0.412, -5.108, 23, 0.012)
    assert (t["clock"], t["period_ns"]) == ("aclk", 4.0)
    assert t["fmax_mhz"] == pytest.approx(1000 / 4.412)
    p = t["worst_path"]  # the least slack of the Max Delay Paths, not the hold path nor the unconstrained one
    assert p["slack_ns"] == -0.412 and p["requirement_ns"] == 4.0
    assert (p["data_path_ns"], p["logic_ns"], p["route_ns"]) == (4.310, 2.538, 1.772)
    assert p["start"] == {"cell": "learner/err0_s5_reg[3]", "signal": "err0_s5", "stage": 5}
    assert p["end"] == {"cell": "learner/l0_coef_0_0_bank1_reg_0_1_0_13", "signal": "l0_coef_0_0_bank1", "stage": None}
    assert p["logic_levels"] == 11 and p["levels_by_type"]["CARRY8"] == 4 and p["levels_by_type"]["LUT3"] == 1


def test_signal_names_of_vivado_cells():
    assert signal_of("learner/y0_s12_reg[0]/D") == {"cell": "learner/y0_s12_reg[0]", "signal": "y0_s12", "stage": 12}
    assert signal_of("learner/pending_reg/C")["signal"] == "pending"
    assert signal_of("s_axis_sample_tdata[7]") == {"cell": "s_axis_sample_tdata[7]", "signal": "s_axis_sample_tdata",
                                                   "stage": None}


def test_utilization_of_ultrascale_and_7_series_reports():
    u = parse_utilization(UTIL_US_RPT)
    assert u == {"lut": 812, "ff": 655, "lutram": 64, "dsp": 5, "bram": 1.5, "ramb36": 1, "ramb18": 1, "uram": 0,
                 "bram_unit": "RAMB36"}
    s = parse_utilization(UTIL_7_RPT)
    assert (s["lut"], s["ff"], s["lutram"], s["dsp"], s["bram"], s["uram"]) == (1021, 702, 64, 5, 0, None)


def test_malformed_reports_are_refused_naming_the_file():
    with pytest.raises(ValueError, match="t.rpt: no 'Design Timing Summary'"):
        parse_timing_summary(UTIL_US_RPT, "t.rpt")
    no_clock = TIMING_RPT.replace("aclk   {0.000 2.000}        4.000           250.000", "")
    with pytest.raises(ValueError, match="t.rpt: no 'Clock Summary'"):
        parse_timing_summary(no_clock, "t.rpt")
    unconstrained = TIMING_RPT.replace("     -0.412       -5.108                     23",
                                       "        inf        0.000                      0")
    with pytest.raises(ValueError, match="t.rpt: WNS is 'inf': no timed path"):
        parse_timing_summary(unconstrained, "t.rpt")
    with pytest.raises(ValueError, match=r"u.rpt: no 'DSPs' row"):
        parse_utilization(UTIL_US_RPT.split("4. ARITHMETIC")[0], "u.rpt")
    with pytest.raises(ValueError, match=r"u.rpt: no 'CLB LUTs', 'CLB Registers', 'DSPs', 'Block RAM Tile'"):
        parse_utilization(TIMING_RPT, "u.rpt")


def _ran(design, folder: Path) -> dict:
    """An rfsoc4x2 folder as onchip vivado writes it, with the reports a Vivado run leaves."""
    from onchip.io import write_json

    manifest = vivado.write_project(design, folder, board="rfsoc4x2", clock_mhz=250.0)
    write_json(folder / "manifest.json", manifest)
    (folder / "reports").mkdir()
    (folder / "reports" / "timing_impl.rpt").write_text(TIMING_RPT)
    (folder / "reports" / "utilization_impl.rpt").write_text(UTIL_US_RPT)
    return manifest


def test_vivado_report_command_writes_report_json(design, tmp_path, capsys):
    from onchip.cli import main

    _ran(design, tmp_path)
    assert main(["vivado-report", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "report.json").read_text())
    fmax = 1000 / 4.412
    assert (r["board"], r["part"], r["device"]) == ("rfsoc4x2", "xczu48dr-ffvg1517-2-e", "xczu48dr-ffvg1517")
    assert r["vivado_version"].startswith("Vivado v.2022.2")
    assert r["clock_mhz"] == pytest.approx(250.0) and r["timing_met"] is False
    assert r["fmax_mhz"] == pytest.approx(fmax)
    cycles = design.info["latency_cycles_update"]
    assert r["latency_cycles_update"] == cycles and r["latency_ns_update"] == pytest.approx(cycles * 4.412)
    assert r["latency_ns_prediction"] == pytest.approx(design.info["latency_cycles_prediction"] * 4.412)
    assert (r["lut"], r["ff"], r["dsp"], r["bram"], r["lutram"]) == (812, 655, 5, 1.5, 64)
    assert r["worst_path"]["start"]["signal"] == "err0_s5"
    out = capsys.readouterr().out
    assert "fmax 226.7 MHz" in out and "err0_s5 -> l0_coef_0_0_bank1: logic 2.538 ns, route 1.772 ns" in out


def test_vivado_report_of_a_7_series_board(design, tmp_path):
    """Red Pitaya: Vivado names a 7-series device without its "xc" (7z010-clg400)."""
    from onchip.io import write_json

    write_json(tmp_path / "manifest.json", vivado.write_project(design, tmp_path, board="redpitaya-125-14"))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "timing_impl.rpt").write_text(TIMING_RPT.replace("xczu48dr-ffvg1517", "7z010-clg400"))
    (tmp_path / "reports" / "utilization_impl.rpt").write_text(UTIL_7_RPT)
    r = vivado_report(tmp_path)
    assert (r["part"], r["device"], r["lut"], r["ff"], r["uram"]) == ("xc7z010clg400-1", "7z010-clg400", 1021, 702, None)


def test_vivado_report_names_the_missing_or_bad_file(design, tmp_path, capsys):
    from onchip.cli import main

    _ran(design, tmp_path)
    (tmp_path / "reports" / "utilization_impl.rpt").unlink()
    assert main(["vivado-report", str(tmp_path)]) == 2
    assert "reports/utilization_impl.rpt: no report_utilization output" in capsys.readouterr().err
    (tmp_path / "reports" / "utilization_impl.rpt").write_text("ERROR: [Common 17-69] Command failed\n")
    assert main(["vivado-report", str(tmp_path)]) == 2
    assert "utilization_impl.rpt: no 'CLB LUTs'" in capsys.readouterr().err
    assert not (tmp_path / "report.json").exists()
    (tmp_path / "reports" / "utilization_impl.rpt").write_text(UTIL_US_RPT)
    (tmp_path / "reports" / "timing_impl.rpt").write_text(TIMING_RPT.replace("xczu48dr-ffvg1517", "xczu9eg-ffvb1156"))
    assert main(["vivado-report", str(tmp_path)]) == 2
    assert ("timing_impl.rpt: a report for device xczu9eg-ffvb1156, but the folder's part is xczu48dr-ffvg1517-2-e"
            in capsys.readouterr().err)
    assert main(["vivado-report", str(tmp_path / "reports")]) == 2
    assert "manifest.json: no manifest.json (is it a folder written by onchip vivado?)" in capsys.readouterr().err


# -- nextpnr's critical path ---------------------------------------------------------------------------
def test_nextpnr_critical_path_of_kan_paper_on_ecp5():
    """A real report (onchip pnr --spec kan-paper --board ulx3s-85f, seed 1): the update path from the
    output error of stage 5 through the e x b product (MULT18X18D) into the coefficient RAM."""
    data = json.loads((DATA / "nextpnr_kan_paper_ecp5.json").read_text())
    c = nextpnr.critical_path(data["report"], data["verilog"])
    fmax = data["report"]["fmax"]["$glbnet$cd_sync.clk"]["achieved"]
    assert c["clock"] == "$glbnet$cd_sync.clk"
    assert c["total_ns"] == pytest.approx(1000 / fmax, abs=1e-3)  # nextpnr's fmax is this path's delay
    assert c["logic_ns"] + c["routing_ns"] == pytest.approx(c["total_ns"], abs=2e-3)
    assert c["routing_ns"] > c["logic_ns"] > 3.927  # more than the multiplier alone
    assert c["start"] == {"cell": "core.err0_s5_TRELLIS_FF_Q_8", "signal": "err0_s5", "stage": 5, "role": "register"}
    assert c["end"]["signal"] == "l0_coef_0_0_bank0" and c["end"]["role"] == "memory read register"
    assert c["hard_blocks"] == ["MULT18X18D"]
    assert c["through"][0] == "t$78 = err0_s5 * l0_bval0_2_s5"


def test_nextpnr_critical_path_sums_segments_and_refuses_a_report_without_one():
    def seg(kind, delay, a, b):
        return {"type": kind, "delay": delay, "from": {"cell": a, "port": "Q"}, "to": {"cell": b, "port": "D"}}

    rep = {"fmax": {"clk": {"achieved": 100.0, "constraint": 25.0}},
           "critical_paths": [{"from": "posedge clk", "to": "posedge clk", "path": [
               seg("clk-to-q", 0.5, "core.a_s1_TRELLIS_FF_Q", "core.a_s1_TRELLIS_FF_Q"),
               seg("routing", 2.0, "core.a_s1_TRELLIS_FF_Q", "core.sum_LUT4_Z"),
               seg("logic", 1.25, "core.sum_LUT4_Z", "core.sum_LUT4_Z"),
               seg("routing", 3.0, "core.sum_LUT4_Z", "core.b_s2_TRELLIS_FF_Q_3"),
               seg("setup", 0.25, "core.b_s2_TRELLIS_FF_Q_3", "core.b_s2_TRELLIS_FF_Q_3")]}]}
    verilog = "module m(clk);\n  reg [3:0] a_s1 = 4'h0;\n  reg [3:0] b_s2 = 4'h0;\n  wire [3:0] sum;\nendmodule\n"
    c = nextpnr.critical_path(rep, verilog)
    assert (c["logic_ns"], c["routing_ns"], c["total_ns"], c["logic_levels"]) == (2.0, 5.0, 7.0, 1)
    assert (c["clk_to_q_ns"], c["setup_ns"]) == (0.5, 0.25)
    assert (c["start"]["signal"], c["start"]["stage"], c["end"]["signal"], c["end"]["stage"]) == ("a_s1", 1, "b_s2", 2)
    assert c["through"] == ["sum"] and c["hard_blocks"] == []
    assert nextpnr.critical_path(rep)["start"]["signal"] is None  # no Verilog: cells only
    rep["critical_paths"][0]["to"] = "<async>"
    with pytest.raises(ValueError, match="no register-to-register critical path of clock 'clk'"):
        nextpnr.critical_path(rep)
