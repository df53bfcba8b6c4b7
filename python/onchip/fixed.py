"""Fixed-point numbers with the meaning of ``ap_fixed<W,I,Q,O>`` / ``ap_ufixed``.

A value is held as a raw two's-complement integer ``raw`` with ``F = W - I``
fractional bits: ``value = raw * 2**-F``. Every operation works on raw
integers (int64), so results are exact and identical to what the RTL and the
HLS C++ compute. Conversion into a format first quantizes (drops fractional
bits with the format's rounding mode) and then handles overflow (saturate or
wrap), in that order, exactly as ``ap_fixed`` assignment does (Xilinx UG1399,
"Arbitrary Precision Fixed-Point Data Types").

The scalar kernels (:func:`shift_round`, :func:`overflow`, :func:`requant`)
are numba-compiled so that the golden models can call them per sample at
native speed; :func:`requantize` applies them to whole arrays.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from . import jitcache

jitcache.configure()  # before the first cached njit below

#: Quantization (rounding) modes, in ``ap_fixed`` spelling. TRN floors,
#: TRN_ZERO truncates toward zero, the RND* modes round to nearest and differ
#: only on ties: RND toward +inf, RND_ZERO toward zero, RND_MIN_INF toward
#: -inf, RND_INF away from zero, RND_CONV to even.
QUANT_MODES = ("TRN", "TRN_ZERO", "RND", "RND_ZERO", "RND_MIN_INF", "RND_INF", "RND_CONV")
#: Overflow modes: SAT clamps to the range, SAT_ZERO sets overflowing values
#: to zero, WRAP keeps the low W bits (two's complement).
OVERFLOW_MODES = ("SAT", "SAT_ZERO", "WRAP")

TRN, TRN_ZERO, RND, RND_ZERO, RND_MIN_INF, RND_INF, RND_CONV = range(7)
SAT, SAT_ZERO, WRAP = range(3)

#: Widest format supported: raw values and exact products stay inside int64.
MAX_WIDTH = 48


class FmtCode(NamedTuple):
    """A format as plain integers, the form the numba kernels read by field name
    (``fmt.width``, ``fmt.frac``...); a tuple, so ``requant(raw, F_from, *code)`` also works."""

    width: int  # W
    frac: int  # F = W - I
    signed: int  # 1 for ap_fixed, 0 for ap_ufixed
    quant: int  # index into QUANT_MODES
    overflow: int  # index into OVERFLOW_MODES


@dataclass(frozen=True)
class Fmt:
    """A fixed-point format, ``ap_fixed<W,I,Q,O>`` (signed) or ``ap_ufixed<W,I,Q,O>``.

    Attributes:
        width: W, total bits (1 to 48).
        int_bits: I, integer bits including the sign bit for signed formats.
            May be negative or exceed W for signed formats, as in ``ap_fixed``.
        signed: two's complement (``ap_fixed``) or unsigned (``ap_ufixed``).
        quant: rounding mode, one of :data:`QUANT_MODES` (``ap_fixed`` default TRN).
        overflow: overflow mode, one of :data:`OVERFLOW_MODES` (default WRAP).

    Raises:
        ValueError: W or I not an integer (a bool is not one), ``signed`` not a bool, W < 1 or
            > 48, |F| > 96, I > W for an unsigned format, or an unknown mode (AP_SAT_SYM
            included); the message names the field and the bad value.
    """

    width: int
    int_bits: int
    signed: bool = True
    quant: str = "TRN"
    overflow: str = "WRAP"

    def __post_init__(self):
        if not isinstance(self.width, (int, np.integer)) or isinstance(self.width, bool):
            raise ValueError(f"width (W) must be an integer, got {self.width!r}")
        if not isinstance(self.int_bits, (int, np.integer)) or isinstance(self.int_bits, bool):
            raise ValueError(f"int_bits (I) must be an integer, got {self.int_bits!r}")
        if not isinstance(self.signed, (bool, np.bool_)):
            raise ValueError(f"signed must be True or False, got {self.signed!r}")
        object.__setattr__(self, "signed", bool(self.signed))
        if not 1 <= self.width <= MAX_WIDTH:
            raise ValueError(
                f"width (W) must be between 1 and {MAX_WIDTH}, got {self.width} (onchip holds raw "
                f"values and exact products in int64; ap_types allows wider formats)"
            )
        if not self.signed and self.int_bits > self.width:
            raise ValueError(
                f"int_bits (I) must not exceed width (W={self.width}) for an unsigned format, "
                f"got {self.int_bits}"
            )
        if self.frac_bits > 2 * MAX_WIDTH or self.frac_bits < -2 * MAX_WIDTH:
            raise ValueError(
                f"int_bits (I) is out of range for W={self.width}: {self.int_bits} (the fractional "
                f"bits F = W - I must be within +/-{2 * MAX_WIDTH})"
            )
        if self.quant not in QUANT_MODES:
            raise ValueError(f"quant must be one of {', '.join(QUANT_MODES)}; got {self.quant!r}")
        if self.overflow not in OVERFLOW_MODES:
            extra = " (AP_SAT_SYM is not supported)" if self.overflow == "SAT_SYM" else ""
            raise ValueError(
                f"overflow must be one of {', '.join(OVERFLOW_MODES)}; got {self.overflow!r}{extra}"
            )

    # -- derived properties -------------------------------------------------
    @property
    def frac_bits(self) -> int:
        """F = W - I, the number of fractional bits."""
        return self.width - self.int_bits

    @property
    def lsb(self) -> float:
        """Value of one raw step, 2**-F."""
        return float(2.0 ** -self.frac_bits)

    @property
    def min_raw(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max_raw(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def min_value(self) -> float:
        return self.min_raw * self.lsb

    @property
    def max_value(self) -> float:
        return self.max_raw * self.lsb

    @property
    def code(self) -> "FmtCode":
        """The format as the numba kernels take it: a :class:`FmtCode`."""
        return FmtCode(
            self.width,
            self.frac_bits,
            int(self.signed),
            QUANT_MODES.index(self.quant),
            OVERFLOW_MODES.index(self.overflow),
        )

    # -- text form ------------------------------------------------------------
    def __str__(self) -> str:
        name = "ap_fixed" if self.signed else "ap_ufixed"
        return f"{name}<{self.width},{self.int_bits},{self.quant},{self.overflow}>"

    def cpp(self) -> str:
        """The C++ type, e.g. ``ap_fixed<16,4,AP_RND_CONV,AP_SAT>``."""
        name = "ap_fixed" if self.signed else "ap_ufixed"
        return f"{name}<{self.width},{self.int_bits},AP_{self.quant},AP_{self.overflow}>"

    _PATTERN = re.compile(
        r"^\s*(ap_fixed|ap_ufixed)\s*<\s*(-?\d+)\s*,\s*(-?\d+)\s*"
        r"(?:,\s*(?:AP_)?([A-Z_]+)\s*)?(?:,\s*(?:AP_)?([A-Z_]+)\s*)?>\s*$"
    )

    @classmethod
    def parse(cls, text: str) -> "Fmt":
        """Parse ``ap_fixed<W,I[,Q[,O]]>`` or ``ap_ufixed<...>`` (``AP_`` prefixes optional).

        Raises:
            ValueError: the text is not of that form, or the format is invalid.
        """
        m = cls._PATTERN.match(str(text))
        if not m:
            raise ValueError(
                f"fixed-point format must look like 'ap_fixed<16,4,RND_CONV,SAT>', got {text!r}"
            )
        kind, w, i, q, o = m.groups()
        return cls(int(w), int(i), kind == "ap_fixed", q or "TRN", o or "WRAP")

    # -- conversions ----------------------------------------------------------
    def quantize(self, x) -> np.ndarray:
        """Float value(s) -> raw int64 array; see :func:`quantize`."""
        return quantize(x, self)

    def dequantize(self, raw) -> np.ndarray:
        """Raw integer(s) -> float64 values ``raw * 2**-F``."""
        return np.ldexp(np.asarray(raw, dtype=np.float64), -self.frac_bits)

    def contains(self, value: float) -> bool:
        """Whether ``value`` is exactly representable (on the grid and in range)."""
        scaled = np.ldexp(float(value), self.frac_bits)
        return bool(scaled == np.floor(scaled) and self.min_raw <= scaled <= self.max_raw)


# -- scalar kernels (numba) ---------------------------------------------------
@numba.njit(cache=True)
def shift_round(raw, shift, quant):
    """Divide ``raw`` by ``2**shift`` with rounding mode ``quant`` (index into QUANT_MODES).

    Exact for every int64 ``raw`` and every ``shift >= 0``, 64 and beyond included
    (the quotient is then 0 or -1, or a tie at -1/2 when ``shift == 64`` and
    ``raw == -2**63``). ``shift < 0`` multiplies, ``raw << -shift``: exact only while the
    product fits int64; :func:`requant` handles left shifts of any size together with
    overflow.
    """
    if shift <= 0:
        return raw << (-shift)
    if shift >= 64:
        # |raw| <= 2**63 <= 2**(shift-1): the quotient lies in [-1/2, 1/2)
        if raw >= 0:
            return np.int64(0)  # in [0, 1/2): every mode gives 0
        if quant == TRN:
            return np.int64(-1)
        if quant == TRN_ZERO:
            return np.int64(0)
        if shift == 64 and raw == (np.int64(1) << 63):  # exactly -1/2: a tie
            if quant == RND_MIN_INF or quant == RND_INF:
                return np.int64(-1)
        return np.int64(0)  # in (-1/2, 0) rounds to 0; RND, RND_ZERO, RND_CONV ties to 0
    return _shift_round_short(raw, shift, quant)


@numba.njit(cache=True, inline="always")
def _shift_round_short(raw, shift, quant):
    """:func:`shift_round` for 0 < shift < 64, the case of almost every call (inlined there)."""
    floor = raw >> shift
    rem = raw - (floor << shift)  # 0 <= rem < 2**shift (exact modulo 2**64)
    if quant == TRN:
        return floor
    if quant == TRN_ZERO:
        return floor + 1 if (raw < 0 and rem != 0) else floor
    # round to nearest; the modes differ only on an exact tie (branch-free: data-dependent
    # branches would mispredict on every other sample)
    half = np.int64(1) << (shift - 1)
    above = rem > half
    tie = rem == half
    if quant == RND:
        up = above | tie
    elif quant == RND_ZERO:
        up = above | (tie & (raw < 0))
    elif quant == RND_MIN_INF:
        up = above
    elif quant == RND_INF:
        up = above | (tie & (raw >= 0))
    else:  # RND_CONV, ties to even: rem > half, or rem == half and floor odd, is
        # rem + (floor & 1) > half (unsigned: rem + 1 <= 2**63 does not overflow)
        up = np.uint64(rem) + np.uint64(floor & 1) > np.uint64(half)
    return floor + np.int64(up)


@numba.njit(cache=True, inline="always")
def raw_bounds(width, signed):
    """(lo, hi): the smallest and largest raw value of a W-bit format, two's complement if ``signed``."""
    if signed:
        return -(np.int64(1) << (width - 1)), (np.int64(1) << (width - 1)) - 1
    return np.int64(0), (np.int64(1) << width) - 1


@numba.njit(cache=True, inline="always")
def overflow(value, width, signed, mode):
    """Bring an integer into a W-bit raw range with overflow ``mode`` (index into OVERFLOW_MODES)."""
    if mode == WRAP:  # the low W bits, sign-extended when signed (W <= 48 < 64)
        if signed:
            return (value << (64 - width)) >> (64 - width)
        return value & ((np.int64(1) << width) - 1)
    lo, hi = raw_bounds(width, signed)
    if mode == SAT:
        return min(max(value, lo), hi)
    if lo <= value <= hi:
        return value
    return np.int64(0)  # SAT_ZERO


@numba.njit(cache=True, inline="always")
def shift_left_overflow(raw, k, width, signed, mode):
    """``overflow(raw * 2**k)`` exactly, for every int64 ``raw`` and every ``k >= 0``.

    The product may exceed int64: SAT and SAT_ZERO decide from ``raw`` against the
    range shifted right by ``k``; WRAP keeps the low W bits, which int64 arithmetic
    modulo 2**64 still holds for ``k < 64`` (and which are all zero for ``k >= W``).
    """
    lo, hi = raw_bounds(width, signed)
    if k >= width:  # W <= 48 < 64: only 0 fits, and the low W bits are 0
        if raw == 0 or mode != SAT:
            return np.int64(0)
        return hi if raw > 0 else lo
    # lo <= raw * 2**k <= hi  <=>  ceil(lo / 2**k) <= raw <= floor(hi / 2**k)
    if -((-lo) >> k) <= raw <= (hi >> k):
        return raw << k
    if mode == SAT:
        return hi if raw > 0 else lo
    if mode == SAT_ZERO:
        return np.int64(0)
    return overflow(raw << k, width, signed, mode)  # low 64 bits are exact; WRAP needs W of them


@numba.njit(cache=True)
def _requant_far(raw, shift, width, signed, quant, mode):
    """:func:`requant` for shifts outside [1, 64): rare, so compiled once and called."""
    if shift < 0:
        return shift_left_overflow(raw, -shift, width, signed, mode)
    return overflow(shift_round(raw, shift, quant), width, signed, mode)


@numba.njit(cache=True)
def requant(raw, frac_from, width, frac_to, signed, quant, mode):
    """Convert a raw value with ``frac_from`` fractional bits into a format given by its code.

    Rounds first (``quant``), then handles overflow (``mode``): the ``ap_fixed``
    assignment order. Exact for every int64 ``raw`` and every shift
    ``frac_from - frac_to`` (right shifts of 64 bits and more, left shifts whose
    product exceeds int64). The common shifts (0 to 63) take a short path that LLVM can
    inline into the kernels; the others one out-of-line call. (Inlining every case at
    numba's IR level made the golden kernels take minutes to compile.)
    """
    shift = frac_from - frac_to
    if shift == 0:
        return overflow(raw, width, signed, mode)
    if 0 < shift < 64:
        return overflow(_shift_round_short(raw, shift, quant), width, signed, mode)
    return _requant_far(raw, shift, width, signed, quant, mode)


@numba.vectorize(["int64(int64, int64, int64, int64, int64, int64, int64)"], cache=True)
def _requant_array(raw, frac_from, width, frac_to, signed, quant, mode):
    return requant(raw, frac_from, width, frac_to, signed, quant, mode)


@numba.vectorize(["int64(float64, int64, int64, int64, int64, int64)"], cache=True)
def _quantize_array(x, width, frac_to, signed, quant, mode):
    # x = mant * 2**(e - 53) exactly, |mant| < 2**53 (subnormals and zeros included)
    m, e = math.frexp(x)
    return requant(np.int64(math.ldexp(m, 53)), 53 - e, width, frac_to, signed, quant, mode)


# -- array API ------------------------------------------------------------------
#: Largest |frac_from| :func:`requantize` accepts. Exact for every int64 raw value at
#: any such shift; this covers every product of supported formats (|F| <= 2 * 96 plus a
#: learning-rate or cell shift) and the exponent range of float64 (2**-1074 .. 2**1023).
MAX_FRAC_FROM = 2048


def requantize(raw, frac_from: int, fmt: Fmt) -> np.ndarray:
    """Convert raw integers with ``frac_from`` fractional bits into ``fmt`` (round, then overflow).

    Exact for every int64 raw value and every shift ``frac_from - F``, as ``ap_fixed``
    assignment from a format wide enough to hold ``raw * 2**-frac_from``.

    Args:
        raw: integer array-like of any shape (values held as int64).
        frac_from: fractional bits of ``raw``, an integer in
            [-:data:`MAX_FRAC_FROM`, :data:`MAX_FRAC_FROM`] (negative: ``raw`` counts
            multiples of ``2**-frac_from``).
        fmt: target format; its ``quant`` and ``overflow`` modes apply.

    Returns:
        int64 array of the same shape, raw values in ``fmt``.

    Raises:
        ValueError: ``frac_from`` is not an integer or outside that range.
    """
    if (
        not isinstance(frac_from, (int, np.integer))
        or isinstance(frac_from, (bool, np.bool_))
        or not -MAX_FRAC_FROM <= frac_from <= MAX_FRAC_FROM
    ):
        raise ValueError(
            f"frac_from (fractional bits of the raw input) must be an integer in "
            f"[-{MAX_FRAC_FROM}, {MAX_FRAC_FROM}], got {frac_from!r}"
        )
    w, f, s, q, o = fmt.code
    return _requant_array(np.asarray(raw, dtype=np.int64), int(frac_from), w, f, s, q, o)


def quantize(x, fmt: Fmt) -> np.ndarray:
    """Float value(s) -> raw int64 in ``fmt``: round with ``fmt.quant``, then ``fmt.overflow``.

    Exact for every finite float64 (subnormals, signed zeros and values whose scaled
    magnitude exceeds the float range included): each input is split into its integer
    mantissa and exponent and goes through the integer path, so
    ``quantize(raw * 2.0**-f, fmt) == requantize(raw, f, fmt)`` whenever the float is exact.
    ``-0.0`` quantizes to 0.

    Args:
        x: float value(s), any shape (converted to float64).
        fmt: target format.

    Returns:
        int64 array of the shape of ``x``, raw values in ``fmt``.

    Raises:
        ValueError: an input is NaN or infinite (``ap_fixed`` gives no defined value for them).
    """
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ValueError(f"cannot quantize NaN or infinite values into {fmt}")
    w, f, s, q, o = fmt.code
    return _quantize_array(x, w, f, s, q, o)


def dequantize(raw, fmt: Fmt) -> np.ndarray:
    """Raw integer(s) in ``fmt`` -> float64 values."""
    return fmt.dequantize(raw)


def _exact(int_bits: int, frac_bits: int, signed: bool) -> Fmt:
    width = int_bits + frac_bits
    if width > MAX_WIDTH:
        raise ValueError(f"exact result needs {width} bits, more than the supported {MAX_WIDTH}")
    return Fmt(width, int_bits, signed)


def add_format(a: Fmt, b: Fmt) -> Fmt:
    """Exact format of ``a + b``: F = max(Fa, Fb), one integer bit more than the wider operand."""
    signed = a.signed or b.signed
    ia = a.int_bits + (1 if signed and not a.signed else 0)
    ib = b.int_bits + (1 if signed and not b.signed else 0)
    return _exact(max(ia, ib) + 1, max(a.frac_bits, b.frac_bits), signed)


def mul_format(a: Fmt, b: Fmt) -> Fmt:
    """Exact format of ``a * b``: W = Wa + Wb, I = Ia + Ib, F = Fa + Fb (as ``ap_fixed``)."""
    return _exact(a.int_bits + b.int_bits, a.frac_bits + b.frac_bits, a.signed or b.signed)


def add(a, fa: Fmt, b, fb: Fmt) -> tuple[np.ndarray, Fmt]:
    """Exact sum of raw arrays ``a`` (in ``fa``) and ``b`` (in ``fb``); returns (raw, format)."""
    out = add_format(fa, fb)
    f = out.frac_bits
    a = np.asarray(a, dtype=np.int64) << (f - fa.frac_bits)
    b = np.asarray(b, dtype=np.int64) << (f - fb.frac_bits)
    return a + b, out


def mul(a, fa: Fmt, b, fb: Fmt) -> tuple[np.ndarray, Fmt]:
    """Exact product of raw arrays ``a`` (in ``fa``) and ``b`` (in ``fb``); returns (raw, format)."""
    out = mul_format(fa, fb)
    return np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64), out
