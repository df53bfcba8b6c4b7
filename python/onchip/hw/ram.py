"""What the learners' RAMs share: the RAM kind chosen by size, and address arithmetic.

The parameter port addresses parameters by their flat index (:func:`onchip.model.golden.layout`);
a RAM-based layer splits that index into a bank and an address by a constant division, done
with one constant multiply instead of a divider.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Const, Module, Signal, Value

#: memory size (bits) from which a RAM goes to block RAM: half a RAMB18 (UltraScale+) / half an
#: EBR (ECP5, 18 Kbit); below it a block would sit mostly empty
BLOCK_RAM_BITS = 9 * 1024


def ram_style(depth: int, width: int) -> str:
    """``ram_style`` attribute (read by Yosys and Vivado) for a depth x width memory:
    ``"block"`` from :data:`BLOCK_RAM_BITS` bits on, else ``"distributed"`` (LUTRAM)."""
    return "block" if depth * width >= BLOCK_RAM_BITS else "distributed"


#: depth from which a memory of channel banks goes to block RAM whatever its size: LUT RAM is 16 words
#: deep (ECP5 DPR16X4), so a deeper one is read through a multiplexer tree per read port (measured,
#: kan-readout at 64 channels: 3.1x one channel's LUTs with its 256-word banks in LUT RAM)
CHANNEL_BLOCK_DEPTH = 64


def bank_style(depth: int, width: int, channels: int = 1) -> str:
    """``ram_style`` of a parameter bank: :func:`ram_style`, and ``"block"`` for the banks of N > 1
    channels from :data:`CHANNEL_BLOCK_DEPTH` words on."""
    if channels > 1 and depth >= CHANNEL_BLOCK_DEPTH:
        return "block"
    return ram_style(depth, width)


def rom_attrs(depth: int, width: int) -> dict:
    """Attributes of a read-only memory: block RAM from :data:`BLOCK_RAM_BITS` bits on; smaller
    ROMs get none and become logic (Yosys has no distributed-RAM mapping for a ROM: asking for
    one fails the synthesis)."""
    if depth * width >= BLOCK_RAM_BITS:
        return {"ram_style": "block", "rom_style": "block"}
    return {}


def div_constants(d: int, x_max: int) -> tuple[int, int]:
    """(M, s), s smallest, with ``(x * M) >> s == x // d`` for every 0 <= x <= x_max
    (Granlund & Montgomery, "Division by invariant integers using multiplication",
    PLDI 1994, Sec. 4), checked over the whole range.

    Raises:
        ValueError: d < 1 or x_max < 0.
    """
    if d < 1 or x_max < 0:
        raise ValueError(f"division by a constant needs d >= 1 and x_max >= 0, got d={d}, x_max={x_max}")
    x = np.arange(x_max + 1, dtype=object)
    s = (d - 1).bit_length()
    while True:
        mult = -(-(1 << s) // d)
        if all((x * mult) >> s == x // d):
            return mult, s
        s += 1


def div_const(x: Value, d: int, x_max: int, in_logic: bool = False) -> Value:
    """floor(x / d) for 0 <= x <= x_max: a shift for powers of two, else one constant multiply
    (:func:`div_constants`; ``in_logic``: as shifts and adds, :func:`mul_const`). Raises
    ValueError as that function."""
    mult, s = div_constants(d, x_max)
    if mult == 1:
        return x >> s
    return mul_const(x, mult, in_logic) >> s


def mul_const(x: Value, c: int, in_logic: bool = False) -> Value:
    """x * c for a constant c >= 0: the generic product ``x * c`` (the ``compact`` plans) or, with
    ``in_logic`` (as :func:`div_const`'s flag), a sum of shifted copies of ``x``, one per set bit of
    c, kept in logic (Yosys maps even a small constant multiply to an ECP5 MULT18X18D, whose
    routing in and out of the DSP column was the routed critical path of the serial KAN's port)."""
    if not in_logic:
        return x * c
    terms = [x << b for b in range(c.bit_length()) if c >> b & 1]
    return sum(terms[1:], terms[0]) if terms else Const(0, 1)


def port_step(m: Module, n: int, prefix: str, *, reset_less: bool = False, **values) -> list[Signal]:
    """Register step ``n`` of a parameter-port decode: each of ``values`` (name -> expression) into a
    register ``<prefix>_<name>_p<n>`` of its shape, in the order given (the port's stages split one
    flat address over several cycles, one constant division or table per step); ``reset_less``:
    registers without a reset (data whose value matters only with a write strobe)."""
    regs = []
    for name, value in values.items():
        reg = Signal(Value.cast(value).shape(), name=f"{prefix}_{name}_p{n}", reset_less=reset_less)
        m.d.sync += reg.eq(value)
        regs.append(reg)
    return regs
