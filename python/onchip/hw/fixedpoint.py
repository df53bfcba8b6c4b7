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

__all__ = ["as_signed", "sext", "shift_round", "overflow", "requant", "requant_by_carry", "requant_beside",
           "requant_has_logic", "fmt_shape", "node"]


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


def requant_beside(m, x, frac_from: int, fmt: Fmt, name: str | None = None) -> Value:
    """:func:`requant` (the same value for every input) as :func:`requant_by_carry`'s one addition, with the
    saturation decided beside it instead of after it: whether the rounded value lies above or below
    ``fmt`` is read from the bits of ``x`` and the rounding carry (reductions that run while the carry
    ripples, as :func:`subtract_requant` does), and selects max or min over the sum's low W bits. Used by
    ``timing = "predict-first"`` for the prediction, whose path ends at the sink (measured with
    nextpnr-ecp5: the comparison after the rounding's chain was on kan-readout's critical path).
    A format the fused rounding does not cover (:func:`subtract_requant_fuses`) is
    :func:`requant_by_carry`.

    Returns:
        An expression of shape :func:`fmt_shape` (a named signal when ``name`` is given).
    """
    if not subtract_requant_fuses(frac_from, fmt):
        return requant_by_carry(m, x, frac_from, fmt, name)
    s, w = frac_from - fmt.frac_bits, fmt.width
    x = as_signed(node(m, x))
    raw = sext(x, max(len(x), s + w) + 1)
    k, c = _rounding_terms(raw, s, fmt.quant)
    total = node(m, (Cat(c, raw) + Cat(c, Const(k, s)))[s + 1 : s + 1 + w].as_signed(), "rounded")
    if fmt.overflow == "WRAP":
        return node(m, total, name)
    above, below = _rounded_outside(m, raw, s, fmt, c)
    shape = fmt_shape(fmt)
    return node(m, Mux(above, Const(fmt.max_raw, shape), Mux(below, Const(fmt.min_raw, shape), total)), name)


#: round-to-nearest tie-breaks (the carry-in of :func:`requant_by_carry`) and truncation: the
#: quantization modes :func:`subtract_requant` folds into one subtraction
_FUSED_QUANTS = ("TRN", "RND", "RND_ZERO", "RND_MIN_INF", "RND_INF", "RND_CONV")


def subtract_requant_fuses(frac_from: int, fmt: Fmt) -> bool:
    """Whether :func:`subtract_requant` builds ``overflow(theta - requant(raw))`` as one subtraction
    (a signed ``fmt`` that saturates or wraps, a rounding or truncating quantization, ``frac_from``
    above ``fmt``'s fractional bits); otherwise it is the rounding's chain, then the subtraction's."""
    return (fmt.signed and fmt.overflow in ("SAT", "WRAP") and fmt.quant in _FUSED_QUANTS
            and frac_from > fmt.frac_bits)


def subtract_requant(m, theta, raw, frac_from: int, fmt: Fmt) -> Value:
    """``overflow(theta - requant(raw, frac_from, fmt), fmt)`` (``theta`` raw in ``fmt``): a parameter
    less its rounded update, the same value for every input, with the rounding inside the
    subtraction's carry chain (when :func:`subtract_requant_fuses`; otherwise the two conversions).

    With ``s = frac_from - F``, ``requant`` rounds ``q = floor((raw + K + c) / 2**s)`` (K = 2**(s-1) - 1
    and the tie-break ``c`` of :func:`requant_by_carry`; truncation K = c = 0), and since
    ``-floor(a / 2**s) = floor((2**s - 1 - a) / 2**s)``, ``theta - q = floor((theta * 2**s + 2**s - 1 - K
    - raw - c) / 2**s)``: one subtraction, the carry-in ``c`` entering as the LSB of both operands.
    ``requant`` saturates ``q`` before the subtraction: whether ``q`` lies above or below ``fmt`` is
    read from the bits of ``floor(raw / 2**s)`` and the rounding bit (reductions beside the chain),
    and selects ``theta - max`` or ``theta - min`` instead. Used by the sequential ``fast`` plan's
    commit (:func:`onchip.hw.plan.stage_plan`), which then needs no stage for the rounding.

    Returns:
        An expression of shape :func:`fmt_shape`.
    """
    if not subtract_requant_fuses(frac_from, fmt):
        return overflow(m, as_signed(theta) - requant(m, raw, frac_from, fmt), fmt)
    s, w = frac_from - fmt.frac_bits, fmt.width
    raw = sext(as_signed(node(m, raw)), s + w + 2)
    k, c = _rounding_terms(raw, s, fmt.quant)
    n = s + w + 2  # theta - q fits W + 1 bits whenever q does not saturate: W + 2 kept
    top = Cat(Const((1 << s) - 1 - k, s), sext(as_signed(theta), w + 2))
    diff = node(m, (Cat(Const(0, 1), top) - Cat(c, raw[:n]))[: n + 1], "theta_less_q")
    main = overflow(m, diff[s + 1 :].as_signed(), fmt, by_bits=True)
    if fmt.overflow == "WRAP":
        return main
    over, under = _rounded_outside(m, raw, s, fmt, c)
    theta = as_signed(theta)
    less_max = overflow(m, theta - fmt.max_raw, fmt, by_bits=True)
    less_min = overflow(m, theta - fmt.min_raw, fmt, by_bits=True)
    return Mux(over, less_max, Mux(under, less_min, main))


def _rounding_terms(raw: Value, s: int, quant: str):
    """(K, c) of ``requant``'s rounding ``floor((raw + K + c) / 2**s)`` (``quant`` in _FUSED_QUANTS)."""
    if quant == "TRN":
        return 0, Const(0, 1)
    neg = raw[-1]
    return (1 << (s - 1)) - 1, {"RND": Const(1, 1), "RND_ZERO": neg, "RND_MIN_INF": Const(0, 1), "RND_INF": ~neg,
                                "RND_CONV": raw[s]}[quant]


def _rounded_outside(m, raw: Value, s: int, fmt: Fmt, c: Value):
    """(above, below): whether ``q = floor((raw + K + c) / 2**s)`` lies above ``fmt``'s max or below its
    min, from the bits of ``floor(raw / 2**s)`` and the rounding carry (reductions, no carry chain);
    ``raw`` signed, at least ``s + W + 1`` bits."""
    w, neg = fmt.width, raw[-1]
    # q = floor(raw / 2**s) + r, r the rounding carry into bit s: r = 1 iff rem >= 2**(s-1) + 1 - c
    fl = raw[s:]
    r = Const(0, 1) if fmt.quant == "TRN" else raw[s - 1] & (c | (raw[: s - 1].any() if s > 1 else Const(0, 1)))
    hi, low_ones = fl[w - 1 :], fl[: w - 1].all()
    above = node(m, (~neg & hi.any()) | (~hi.any() & low_ones & r), "q_above")
    # below min: the floor below min, unless it is min - 1 and rounds up
    below = node(m, (neg & ~hi.all()) & ~(low_ones & ~fl[w - 1] & fl[w:].all() & r), "q_below")
    return above, below


def requant_less_fuses(frac_from: int, fmt: Fmt, out: Fmt) -> bool:
    """Whether :func:`requant_less` is one addition: :func:`subtract_requant_fuses` for ``fmt``, ``fmt``
    saturating, ``out`` signed and saturating or wrapping with ``fmt``'s fractional bits."""
    return (subtract_requant_fuses(frac_from, fmt) and fmt.overflow == "SAT" and out.signed
            and out.overflow in ("SAT", "WRAP") and out.frac_bits == fmt.frac_bits)


def requant_less(m, raw, frac_from: int, fmt: Fmt, out: Fmt, neg_t, at_max, at_min) -> Value:
    """``overflow(requant(raw, frac_from, fmt) - t, out)`` (``t`` raw in ``fmt``'s fractional bits) as one
    addition, when :func:`requant_less_fuses`: ``floor((raw + K + c) / 2**s) - t = floor((raw + K + c -
    t * 2**s) / 2**s)``, the carry-in ``c`` as the LSB of both operands (:func:`requant_by_carry`). The
    caller gives ``neg_t = -t`` (W + 1 bits) and ``at_max``, ``at_min``: ``overflow(max - t, out)`` and
    ``overflow(min - t, out)`` for ``fmt``'s max and min, used when the rounded value saturates
    (registers made before this stage: the output error of the sequential ``fast`` plan, from the
    sum before the prediction's rounding, in the prediction's stage; :func:`onchip.hw.plan.stage_plan`).

    Returns:
        An expression of shape ``fmt_shape(out)``.

    Raises:
        ValueError: the formats do not fuse.
    """
    if not requant_less_fuses(frac_from, fmt, out):
        raise ValueError(f"requant_less: {fmt} from {frac_from} fractional bits, then into {out}, is not one addition")
    s, w = frac_from - fmt.frac_bits, fmt.width
    n = s + max(w, len(neg_t)) + 2
    raw = sext(as_signed(node(m, raw)), n)
    k, c = _rounding_terms(raw, s, fmt.quant)
    top = Cat(Const(k, s), sext(as_signed(neg_t), n - s))
    total = node(m, (Cat(c, raw[:n]) + Cat(c, top[:n]))[: n + 1], "q_less_t")
    main = overflow(m, total[s + 1 :].as_signed(), out, by_bits=True)
    above, below = _rounded_outside(m, raw, s, fmt, c)
    return Mux(above, at_max, Mux(below, at_min, main))
