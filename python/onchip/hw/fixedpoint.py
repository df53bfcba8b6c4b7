"""Fixed-point conversion in hardware: the Amaranth twin of :func:`onchip.fixed.requant`.

Every rounding point of the golden models (:mod:`onchip.model.kernels`) is
built from :func:`requant`: divide by ``2**shift`` with one of the seven
``ap_fixed`` quantization modes, then bring the result into W bits with one
of the three overflow modes, in that order (Xilinx UG1399, "Arbitrary
Precision Fixed-Point Data Types"). The functions return combinational
Amaranth expressions; they add no registers.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Shape, Signal, Value, signed, unsigned

from ..fixed import Fmt

__all__ = ["as_signed", "sext", "shift_round", "overflow", "requant", "requant_by_carry", "requant_has_logic",
           "fmt_shape", "node"]


def node(m, value, name: str | None = None) -> Value:
    """``value`` as a named combinational signal of ``m``, so that expressions used more
    than once are built once (Amaranth does not share common subexpressions)."""
    value = Value.cast(value)
    if isinstance(value, (Signal, Const)):
        return value
    sig = Signal(value.shape(), name=name or "t")
    m.d.comb += sig.eq(value)
    return sig


def fmt_shape(fmt: Fmt) -> Shape:
    """The Amaranth shape of a raw value in ``fmt``: ``signed(W)`` or ``unsigned(W)``."""
    return signed(fmt.width) if fmt.signed else unsigned(fmt.width)


def as_signed(x) -> Value:
    """``x`` as a signed value of the same numeric value (unsigned gains a 0 sign bit)."""
    x = Value.cast(x)
    if x.shape().signed:
        return x
    return Cat(x, Const(0, 1)).as_signed()


def sext(x, width: int) -> Value:
    """Signed ``x`` extended to at least ``width`` bits (same numeric value)."""
    x = as_signed(x)
    n = len(x)
    if n >= width:
        return x
    return Cat(x, x[-1].replicate(width - n)).as_signed()


def shift_round(m, x, shift: int, quant: str) -> Value:
    """``x / 2**shift`` rounded with ``quant`` (a name in :data:`onchip.fixed.QUANT_MODES`).

    ``m`` receives intermediate signals. Mirrors :func:`onchip.fixed.shift_round`: ``shift <= 0`` multiplies
    exactly; otherwise floor, plus one when the discarded bits call for it.

    Returns:
        A signed expression wide enough for the exact result.
    """
    parts = _floor_and_increment(m, x, shift, quant)
    return parts if not isinstance(parts, tuple) else parts[0] + parts[1]


def _floor_and_increment(m, x, shift: int, quant: str):
    """:func:`shift_round` in parts: ``(floor, increment)`` (a 1-bit value) when it rounds, else the result."""
    x = as_signed(node(m, x))
    if shift <= 0:
        return x << (-shift)
    x = sext(x, shift + 2)
    floor = node(m, x >> shift, "floor")
    if quant == "TRN":
        return floor
    rem = x[:shift]
    neg = x[-1]
    if quant == "TRN_ZERO":
        return floor, (neg & (rem != 0))
    half = x[shift - 1]
    low_zero = (x[: shift - 1] == 0) if shift > 1 else Const(1, 1)
    above = half & ~low_zero
    tie = half & low_zero
    tie_up = {
        "RND": Const(1, 1),
        "RND_ZERO": neg,
        "RND_MIN_INF": Const(0, 1),
        "RND_INF": ~neg,
        "RND_CONV": floor[0],
    }[quant]
    return floor, (above | (tie & tie_up))


def overflow(m, x, fmt: Fmt, mode: str | None = None, by_bits: bool = False) -> Value:
    """Bring ``x`` into ``fmt``'s W bits with its overflow mode (or ``mode``).

    Mirrors :func:`onchip.fixed.overflow`: values inside the range pass;
    outside it SAT clamps, SAT_ZERO gives 0 and WRAP keeps the low W bits.
    ``by_bits`` (signed formats): decide "outside" from the bits above the sign instead of two
    comparisons, the same values with no carry chain (``timing = "fast"``: measured with
    nextpnr-ecp5, the comparators after the commit's subtraction limited fmax).

    Returns:
        An expression of shape :func:`fmt_shape`.
    """
    mode = mode or fmt.overflow
    x = sext(as_signed(node(m, x)), fmt.width + 1)
    low = x[: fmt.width]
    low = low.as_signed() if fmt.signed else low
    xs = x.shape()
    x_min, x_max = -(1 << (xs.width - 1)), (1 << (xs.width - 1)) - 1
    if (x_min >= fmt.min_raw and x_max <= fmt.max_raw) or mode == "WRAP":
        return low
    if by_bits and fmt.signed:
        # x is outside the W-bit range iff its bits W-1 .. top are not all equal (all copies of the
        # sign): a reduction, no comparator carry chain (fmt's range is the full two's complement one)
        assert (fmt.min_raw, fmt.max_raw) == (-(1 << (fmt.width - 1)), (1 << (fmt.width - 1)) - 1)
        top = x[fmt.width - 1 :]
        below = x[-1] & ~top.all()
        above = ~x[-1] & top.any()
    else:
        below = x < fmt.min_raw
        above = x > fmt.max_raw
    if mode == "SAT":
        return Mux(below, Const(fmt.min_raw, fmt_shape(fmt)), Mux(above, Const(fmt.max_raw, fmt_shape(fmt)), low))
    return Mux(below | above, Const(0, fmt_shape(fmt)), low)


def requant(m, x, frac_from: int, fmt: Fmt, name: str | None = None) -> Value:
    """Convert raw ``x`` with ``frac_from`` fractional bits into ``fmt``: round, then overflow.

    ``m`` receives the intermediate signals. The hardware form of ``onchip.fixed.requant(raw, frac_from, *fmt.code)``,
    equal to it for every input value.
    """
    return node(m, overflow(m, shift_round(m, x, frac_from - fmt.frac_bits, fmt.quant), fmt), name)


def requant_has_logic(frac_from: int, fmt: Fmt) -> bool:
    """Whether :func:`requant` from ``frac_from`` fractional bits into ``fmt`` builds a carry chain
    (a rounding increment or a saturation compare), rather than only a shift and a bit slice.
    The stage plan (:func:`onchip.hw.plan.stage_plan`) gives such a conversion its own stage
    under ``timing = "fast"``."""
    rounds = frac_from - fmt.frac_bits > 0 and fmt.quant != "TRN"
    return rounds or fmt.overflow != "WRAP"


def requant_by_carry(m, x, frac_from: int, fmt: Fmt, name: str | None = None) -> Value:
    """:func:`requant` (the same value for every input) built as one addition whose carry into bit
    ``shift`` does the rounding, then the saturation decided from the bits above the sign
    (``overflow(by_bits=True)``). Used by ``timing = "fast"``.

    With ``x = q * 2**shift + rem``, ``floor((x + 2**(shift-1) - 1 + c) / 2**shift)`` is ``q + 1``
    iff ``rem > 2**(shift-1) - c``: every round-to-nearest mode is this sum with its tie-break as
    the carry-in ``c`` (RND 1, RND_ZERO and RND_INF the sign or its complement, RND_MIN_INF 0,
    RND_CONV the floor's LSB ``x[shift]``), and TRN_ZERO adds ``2**shift - 1`` when negative. The
    carry-in enters as the LSB of both operands, so the sum stays one carry chain. It replaces the
    OR over the discarded bits and the increment after it (a reduction, then a second chain):
    measured with nextpnr-ecp5, kan-paper sequential placed at 117.1 / 124.4 / 118.4 MHz (seeds
    1-3) with those, 127.2 / 127.8 / 130.4 with this sum.

    Returns:
        An expression of shape :func:`fmt_shape` (a named signal when ``name`` is given).
    """
    shift = frac_from - fmt.frac_bits
    x = as_signed(node(m, x))
    if shift <= 0 or fmt.quant == "TRN":
        return requant(m, x, frac_from, fmt, name)
    x = sext(x, max(len(x), shift + 1) + 1)  # room for the sum's carry out of the top bit
    neg = x[-1]
    if fmt.quant == "TRN_ZERO":
        total = x + neg.replicate(shift)
        r = total[shift:].as_signed()
    else:
        c = {"RND": Const(1, 1), "RND_ZERO": neg, "RND_MIN_INF": Const(0, 1), "RND_INF": ~neg,
             "RND_CONV": x[shift]}[fmt.quant]
        total = Cat(c, x).as_signed() + Cat(c, Const((1 << (shift - 1)) - 1, shift))
        r = total[shift + 1 :].as_signed()
    return node(m, overflow(m, node(m, r, "rounded"), fmt, by_bits=fmt.signed), name)
