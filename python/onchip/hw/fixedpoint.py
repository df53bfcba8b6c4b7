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

__all__ = ["as_signed", "sext", "shift_round", "overflow", "requant", "requant_parallel", "requant_has_logic",
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


def requant_parallel(m, x, frac_from: int, fmt: Fmt, name: str | None = None) -> Value:
    """:func:`requant` (the same value for every input) with the saturation decided from the floor
    and the rounding increment, in parallel with the increment's carry chain instead of after it:
    ``floor + inc > max`` iff ``floor > max`` or ``floor == max`` and ``inc``; ``floor + inc < min`` iff
    ``floor < min - 1`` or ``floor == min - 1`` and not ``inc``. Used by ``timing = "fast"``, where the
    round-then-saturate chain was nextpnr's critical path."""
    mode = fmt.overflow
    parts = _floor_and_increment(m, x, frac_from - fmt.frac_bits, fmt.quant)
    if mode == "WRAP" or not isinstance(parts, tuple):
        return requant(m, x, frac_from, fmt, name)
    floor, inc = parts
    r = sext(floor + inc, fmt.width + 1)
    rs = r.shape()
    low = r[: fmt.width]
    low = low.as_signed() if fmt.signed else low
    if -(1 << (rs.width - 1)) >= fmt.min_raw and (1 << (rs.width - 1)) - 1 <= fmt.max_raw:
        return node(m, low, name)
    inc = node(m, inc, "inc")
    above = node(m, (floor > fmt.max_raw) | ((floor == fmt.max_raw) & inc), "above")
    below = node(m, (floor < fmt.min_raw - 1) | ((floor == fmt.min_raw - 1) & ~inc), "below")
    if mode == "SAT":
        out = Mux(below, Const(fmt.min_raw, fmt_shape(fmt)), Mux(above, Const(fmt.max_raw, fmt_shape(fmt)), low))
    else:
        out = Mux(below | above, Const(0, fmt_shape(fmt)), low)
    return node(m, out, name)
