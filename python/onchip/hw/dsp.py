"""Registered products, generic or as a device's DSP primitive with its own registers.

The ``fast`` stage plan registers every raw product: its factors are pipeline
registers (or a RAM's registered output) and the product goes into a register with
nothing between. Yosys maps such a product to a DSP block on Xilinx and iCE40 and
moves the registers on either side into the block; its ECP5 flow does not, so the
product pays the routing into and out of the DSP column twice per stage (the
critical path of most family members at ``fast``, ``sweeps/timing/README.md``).
With ``dsp="ecp5"`` each such product is a ``MULT18X18D`` instance that holds the
product register (``REG_OUTPUT``) itself, clocked by ``CLK0`` and enabled by the
pipeline's advance enable on ``CE0``: the same register, so the same product one
stage later. The factor registers stay in the fabric. Measured on the user's 2->3->1
KAN at ``fast`` (ULX3S 85F, seed 1): 83.9 MHz generic, 99.0 MHz with the product
register in the block, 77.9 MHz with the factor registers in it too (``REG_INPUTA/B``,
loaded from the factor registers' inputs): that moves the logic before a factor
register (the output error's subtraction, the coefficient bank multiplexer) onto the
route into the DSP column. Yosys ships only a black box of ``MULT18X18D``;
:func:`mult18x18d_model` is a simulation model of the subset instantiated here,
appended to the Verilog for Verilator. The layers use it on both schedules
(:class:`onchip.hw.layers._Layer`). Pipelined, it once placed slower (kan-readout 89.5 against
99.7-104.0 MHz generic), while the pending-update queue's multiplexers were the path; with the
queue in LUT RAM, mlp-readout pipelined placed at 98.8 MHz with it against 79.9 generic (seed 1).

On iCE40 (``dsp="ice40"``) the products stay generic: ``synth_ice40 -dsp`` (its ``ice40_dsp``
pass) already puts the product register into the SB_MAC16 (its output register,
``TOP/BOTOUTPUT_SELECT = 1``, the enable on ``OHOLDTOP/BOT``) and every factor register
into ``A_REG``/``B_REG`` (a coefficient read from block RAM stays outside, its register in
the SB_RAM40_4K). It also rewrites an instantiated SB_MAC16 as if it had found it
unregistered (Yosys 0.70: ``PIPELINE_16x16_MULT_REG2`` set to 0, ``CLK`` and ``CE`` tied
low), so an instance would lose its register. What helps, as on ECP5, is the factor
registers out of the block: with both factors within 16 bits they are marked ``keep``,
which ``ice40_dsp`` does not pack, and the logic before them (the output error's
subtraction) no longer ends on the DSP's input pins: on the iCEBreaker both 1->1 KANs
place faster at ``fast`` than with the factor registers in the block (``docs/results.md``,
iCE40; ``sweeps/timing/ice40.md``); ``tests/test_hw_dsp.py`` checks the netlist. The Verilog
is the generic one plus those attributes, so it simulates as the generic design.

Sources: Lattice FPGA-TN-02205 "ECP5 and ECP5-5G sysDSP Usage Guide", MULT18X18D
(input, pipeline and output registers, ``SIGNEDA``/``SIGNEDB``); Lattice "DSP Function Usage
Guide for iCE40 Devices" (TN1295), SB_MAC16 (16x16 signed mode, its A/B, pipeline and output
registers).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal, Value, signed

from .pipeline import Pipe, Staged

#: ``dsp`` choices: None (generic ``*``, the synthesis tool picks and maps) or a device family:
#: ``"ecp5"`` instantiates its multiplier with the product register, ``"ice40"`` keeps the
#: factor registers out of the block Yosys maps.
DSP_FAMILIES = (None, "ecp5", "ice40")

#: MULT18X18D factor width (bits, two's complement with ``SIGNEDA``/``SIGNEDB`` high).
ECP5_FACTOR_BITS = 18
#: MULT18X18D product width (bits).
ECP5_PRODUCT_BITS = 36
#: SB_MAC16 factor width in its 16x16 mode (bits, two's complement with ``A_SIGNED``/``B_SIGNED`` set).
ICE40_FACTOR_BITS = 16


def check_dsp(dsp) -> str | None:
    """Validate a ``dsp`` choice.

    Raises:
        ValueError: not one of :data:`DSP_FAMILIES` (the message names ``dsp`` and the value).
    """
    if dsp not in DSP_FAMILIES:
        raise ValueError(f"dsp must be one of {', '.join(map(repr, DSP_FAMILIES))}; got {dsp!r}")
    return dsp


def dsp_applies(spec) -> bool:
    """Whether a ``dsp`` choice can change the design of ``spec``: only a plan that registers raw
    products has any to map (:func:`onchip.hw.plan.fast_registers`: ``fast``, ``predict-first``);
    ``compact`` registers converted products, so its Verilog is the generic one."""
    from .plan import fast_registers

    return fast_registers(spec)


def dsp_mapping(spec, dsp: str | None) -> tuple[str, str]:
    """What the design of ``spec`` holds for the choice ``dsp``: ``("generic" | "ecp5" | "ice40",
    a sentence saying what that is)``, for the description (``dsp``, ``dsp_note``).

    Raises:
        ValueError: as :func:`check_dsp`.
    """
    check_dsp(dsp)
    if dsp is None:
        return "generic", "products as generic '*', mapped by the synthesis tool"
    if not dsp_applies(spec):
        return "generic", (f"{dsp} asked, nothing mapped: the {spec.stage_timing} plan registers no raw "
                           f"products (the fast plan does)")
    if dsp == "ecp5":
        return dsp, "each registered raw product whose factors fit 18 bits is a MULT18X18D holding its product register"
    return dsp, "registered raw products generic, their factor registers within 16 bits marked keep (out of SB_MAC16)"


def _as_factor(v: Value, bits: int) -> Value | None:
    """``v`` as a ``bits``-bit two's complement factor, or None when it does not fit."""
    shape = v.shape()
    if shape.width > bits - (0 if shape.signed else 1):
        return None
    return v.as_signed() if shape.signed else v.as_unsigned()


def registered_product(m: Module, pipe: Pipe, x: Value, y: Value, stage: int, name: str,
                       dsp: str | None = None) -> Staged:
    """``x * y`` (factors valid at ``stage``) registered into ``stage + 1``.

    Args:
        m: the module. pipe: the learner's pipeline (its enable advances every register).
        x, y: the factors (any signedness; the product has Amaranth's ``x * y`` shape).
        stage: the factors' stage. name: the product register's name (``<name>`` for the
            fabric register, ``<name>_mult`` for a DSP instance).
        dsp: None (a fabric register on ``x * y``); ``"ecp5"``: a MULT18X18D with the product
            register in the block (``REG_OUTPUT``) when both factors fit 18 bits, else the fabric
            register; ``"ice40"``: the fabric register on ``x * y`` (Yosys moves it into the SB_MAC16's
            output register), its factor registers marked ``keep`` when both factors fit 16 bits, so
            that Yosys leaves them in the fabric (``A_REG = B_REG = 0``).

    Returns:
        the product, :class:`~onchip.hw.pipeline.Staged` at ``stage + 1``.

    Raises:
        ValueError: ``dsp`` not one of :data:`DSP_FAMILIES`.
    """
    check_dsp(dsp)
    x, y = Value.cast(x), Value.cast(y)
    product = x * y
    if dsp == "ice40":
        if _as_factor(x, ICE40_FACTOR_BITS) is not None and _as_factor(y, ICE40_FACTOR_BITS) is not None:
            for factor in (x, y):  # a factor register Yosys's ice40_dsp must leave in the fabric
                if isinstance(factor, Signal) and pipe.is_register(factor):
                    factor.attrs["keep"] = 1
        return pipe.reg(product, stage, name)
    fx, fy = _as_factor(x, ECP5_FACTOR_BITS), _as_factor(y, ECP5_FACTOR_BITS)
    if dsp is None or fx is None or fy is None:
        return pipe.reg(product, stage, name)
    ports = {}
    for port, factor in (("A", fx), ("B", fy)):
        wide = Signal(signed(ECP5_FACTOR_BITS), name=f"{name}_{port.lower()}")
        m.d.comb += wide.eq(factor)
        ports.update({f"i_{port}{b}": wide[b] for b in range(ECP5_FACTOR_BITS)})
    p = Signal(signed(ECP5_PRODUCT_BITS), name=f"{name}_p")
    ports.update({f"o_P{b}": p[b] for b in range(ECP5_PRODUCT_BITS)})
    ports.update({f"i_C{b}": Const(0, 1) for b in range(ECP5_FACTOR_BITS)})
    ports.update(i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=Const(0, 1), i_SOURCEB=Const(0, 1),
                 i_CLK0=ClockSignal("sync"), i_CE0=pipe.en, i_RST0=Const(0, 1))
    m.submodules[f"{name}_mult"] = Instance("MULT18X18D", p_GSR="DISABLED", p_REG_OUTPUT_CLK="CLK0",
                                            p_REG_OUTPUT_CE="CE0", **ports)
    out = Signal(product.shape(), name=name)
    m.d.comb += out.eq(p[: product.shape().width])
    pipe.last_stage = max(pipe.last_stage, stage + 1)
    return Staged(out, stage + 1)


def mult18x18d_model() -> str:
    """Verilog simulation model of the MULT18X18D subset :func:`registered_product` instantiates:
    ``SIGNEDA = SIGNEDB = 1``, A and B unregistered, P registered on ``CLK0`` enabled by ``CE0`` when
    ``REG_OUTPUT_CLK = "CLK0"`` (else combinational), ``C`` and the cascade unused, no pipeline
    register, ``RST0`` low.
    """
    a = ", ".join(f"A{b}" for b in range(ECP5_FACTOR_BITS))
    b_ = ", ".join(f"B{b}" for b in range(ECP5_FACTOR_BITS))
    c = ", ".join(f"C{b}" for b in range(ECP5_FACTOR_BITS))
    p = ", ".join(f"P{b}" for b in range(ECP5_PRODUCT_BITS))
    cat = lambda s, n: "{" + ", ".join(f"{s}{b}" for b in reversed(range(n))) + "}"  # noqa: E731
    return f"""
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off DECLFILENAME */ // the module bears the vendor cell's name, the file says it is a model
// MULT18X18D, the subset instantiated by onchip (simulation only; onchip.hw.dsp)
module MULT18X18D ({a}, {b_}, {c}, SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0, {p});
  input {a};
  input {b_};
  input {c};
  input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0;
  output {p};
  parameter REG_OUTPUT_CLK = "NONE";
  parameter REG_OUTPUT_CE = "CE0";
  parameter GSR = "ENABLED";
  wire signed [17:0] a_in = {cat("A", ECP5_FACTOR_BITS)};
  wire signed [17:0] b_in = {cat("B", ECP5_FACTOR_BITS)};
  reg signed [35:0] p_reg;
  wire signed [35:0] p_now = a_in * b_in;
  always @(posedge CLK0) if (CE0) p_reg <= p_now;
  assign {cat("P", ECP5_PRODUCT_BITS)} = (REG_OUTPUT_CLK == "CLK0") ? p_reg : p_now;
endmodule
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */
"""
