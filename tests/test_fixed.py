"""Fixed-point formats: hand-worked rounding/overflow cases and properties."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onchip.fixed import OVERFLOW_MODES, QUANT_MODES, Fmt, add, mul, quantize, requantize

# value in LSBs -> expected raw, per rounding mode (worked by hand from the mode definitions)
TIES = {
    2.5: dict(TRN=2, TRN_ZERO=2, RND=3, RND_ZERO=2, RND_MIN_INF=2, RND_INF=3, RND_CONV=2),
    -2.5: dict(TRN=-3, TRN_ZERO=-2, RND=-2, RND_ZERO=-2, RND_MIN_INF=-3, RND_INF=-3, RND_CONV=-2),
    3.5: dict(TRN=3, TRN_ZERO=3, RND=4, RND_ZERO=3, RND_MIN_INF=3, RND_INF=4, RND_CONV=4),
    -3.5: dict(TRN=-4, TRN_ZERO=-3, RND=-3, RND_ZERO=-3, RND_MIN_INF=-4, RND_INF=-4, RND_CONV=-4),
    2.75: dict(TRN=2, TRN_ZERO=2, RND=3, RND_ZERO=3, RND_MIN_INF=3, RND_INF=3, RND_CONV=3),
    -2.75: dict(TRN=-3, TRN_ZERO=-2, RND=-3, RND_ZERO=-3, RND_MIN_INF=-3, RND_INF=-3, RND_CONV=-3),
    -0.25: dict(TRN=-1, TRN_ZERO=0, RND=0, RND_ZERO=0, RND_MIN_INF=0, RND_INF=0, RND_CONV=0),
}


@pytest.mark.parametrize("lsbs", sorted(TIES))
@pytest.mark.parametrize("mode", QUANT_MODES)
def test_rounding_modes_by_hand(lsbs, mode):
    fmt = Fmt(8, 4, True, mode, "SAT")  # F = 4
    expected = TIES[lsbs][mode]
    assert quantize(lsbs / 16, fmt) == expected
    # the integer path: the same value held with 2 more fractional bits
    assert requantize(int(lsbs * 4), 6, fmt) == expected


@pytest.mark.parametrize(
    "value, mode, expected",
    [
        (8.0, "SAT", 127), (-9.0, "SAT", -128), (-8.0, "SAT", -128),
        (8.0, "SAT_ZERO", 0), (-8.0625, "SAT_ZERO", 0), (-8.0, "SAT_ZERO", -128),
        (8.0, "WRAP", -128), (8.5, "WRAP", -120), (-8.0625, "WRAP", 127), (-8.0, "WRAP", -128),
        (7.9375, "WRAP", 127), (24.0, "WRAP", -128),
    ],
)
def test_overflow_modes_by_hand(value, mode, expected):
    fmt = Fmt(8, 4, True, "TRN", mode)  # raw range [-128, 127], lsb 1/16
    assert quantize(value, fmt) == expected
    assert requantize(int(value * 16), 4, fmt) == expected


def test_unsigned_format():
    fmt = Fmt(8, 4, False, "TRN", "SAT")
    assert fmt.min_raw == 0 and fmt.max_raw == 255
    assert quantize([-0.0625, 15.9375, 16.0], fmt).tolist() == [0, 255, 255]
    wrap = Fmt(8, 4, False, "TRN", "WRAP")
    assert quantize([-0.0625, 16.0], wrap).tolist() == [255, 0]


def test_parse_and_text_round_trip():
    fmt = Fmt.parse("ap_fixed<16, 6, AP_RND_CONV, AP_SAT>")
    assert fmt == Fmt(16, 6, True, "RND_CONV", "SAT")
    assert Fmt.parse(str(fmt)) == fmt
    assert fmt.cpp() == "ap_fixed<16,6,AP_RND_CONV,AP_SAT>"
    assert Fmt.parse("ap_ufixed<8,2>") == Fmt(8, 2, False, "TRN", "WRAP")  # ap_fixed defaults


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(width=0, int_bits=0), "width"),
        (dict(width=49, int_bits=4), "width"),
        (dict(width=8, int_bits=9, signed=False), "int_bits"),
        (dict(width=8, int_bits=4, quant="ROUND"), "quant"),
        (dict(width=8, int_bits=4, overflow="CLIP"), "overflow"),
        (dict(width=True, int_bits=1), "width"),
        (dict(width=8, int_bits=True), "int_bits"),
        (dict(width=8, int_bits=4, signed=1), "signed"),
        (dict(width=8, int_bits=4, signed="no"), "signed"),
    ],
)
def test_bad_formats_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Fmt(**kwargs)


def test_bad_text_and_nan_are_refused():
    with pytest.raises(ValueError, match="ap_fixed"):
        Fmt.parse("fixed<8,4>")
    with pytest.raises(ValueError, match="NaN"):
        quantize([0.0, np.nan], Fmt(8, 4))


def test_exact_add_and_mul():
    fa, fb = Fmt(8, 4), Fmt(6, 1)
    a, b = np.array([-128, 127, 37]), np.array([-32, 31, -5])
    s, fs = add(a, fa, b, fb)
    p, fp = mul(a, fa, b, fb)
    assert (fs.width, fs.int_bits) == (10, 5) and (fp.width, fp.int_bits) == (14, 5)
    np.testing.assert_array_equal(fs.dequantize(s), fa.dequantize(a) + fb.dequantize(b))
    np.testing.assert_array_equal(fp.dequantize(p), fa.dequantize(a) * fb.dequantize(b))
    assert s.min() >= fs.min_raw and s.max() <= fs.max_raw
    assert p.min() >= fp.min_raw and p.max() <= fp.max_raw


formats = st.builds(
    Fmt,
    width=st.integers(2, 24),
    int_bits=st.integers(-2, 12),
    signed=st.just(True),
    quant=st.sampled_from(QUANT_MODES),
    overflow=st.just("SAT"),
)
floats = st.floats(-1e4, 1e4, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(formats, floats, floats)
def test_quantize_is_monotone(fmt, x1, x2):
    lo, hi = min(x1, x2), max(x1, x2)
    assert quantize(lo, fmt) <= quantize(hi, fmt)


@settings(max_examples=300, deadline=None)
@given(formats.map(lambda f: Fmt(f.width, f.int_bits, f.signed, f.quant, "WRAP")) | formats, floats)
def test_quantize_is_idempotent(fmt, x):
    raw = quantize(x, fmt)
    assert quantize(fmt.dequantize(raw), fmt) == raw


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**30), 2**30),
    st.integers(0, 20),
    st.sampled_from(QUANT_MODES),
    st.sampled_from(OVERFLOW_MODES),
    st.integers(2, 20),
    st.integers(-4, 10),
)
def test_integer_and_float_paths_agree(raw, frac_from, quant, overflow, width, int_bits):
    fmt = Fmt(width, int_bits, True, quant, overflow)
    assert requantize(raw, frac_from, fmt) == quantize(raw * 2.0**-frac_from, fmt)


# -- exactness: every finite double, every shift --------------------------------------------------
def _reference(value: Fraction, fmt: Fmt) -> int:
    """ap_fixed assignment of an exact rational, in Python integers (independent of onchip.fixed)."""
    v = value * Fraction(2) ** fmt.frac_bits
    floor = math.floor(v)
    rem = v - floor
    q = fmt.quant
    if q == "TRN":
        r = floor
    elif q == "TRN_ZERO":
        r = floor + (v < 0 and rem != 0)
    else:
        tie_up = dict(RND=True, RND_ZERO=v < 0, RND_MIN_INF=False, RND_INF=v > 0,
                      RND_CONV=floor % 2 == 1)[q]
        r = floor + (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and tie_up))
    lo, hi = fmt.min_raw, fmt.max_raw
    if lo <= r <= hi:
        return r
    if fmt.overflow == "SAT":
        return hi if r > hi else lo
    if fmt.overflow == "SAT_ZERO":
        return 0
    r %= 1 << fmt.width
    return r - (1 << fmt.width) if fmt.signed and r > hi else r


H = float.fromhex


@pytest.mark.parametrize(
    "x, fmt, expected",
    [
        # just inside the negative half LSB, not a tie: float64 arithmetic used to round it onto the tie
        (H("-0x1.fffffffffffffp-5"), Fmt(1, -2, True, "RND_MIN_INF", "SAT"), 0),
        (H("-0x1.fffffffffffffp-5"), Fmt(1, -2, True, "RND_INF", "SAT"), 0),
        (H("-0x1.fffffffffffffp-5"), Fmt(1, -2, False, "RND_INF", "WRAP"), 0),
        (H("0x1.fffffffffffffp-5"), Fmt(1, -2, False, "RND", "SAT"), 0),
        (H("-0x1.0000000000001p-4"), Fmt(1, -2, True, "RND_ZERO", "SAT"), -1),  # just outside
        # finite, but scaled beyond the float range: saturates, wraps to 0 (low bits are 0)
        (-8.98846567431158e307, Fmt(1, -2, True, "TRN", "SAT"), -1),
        (1.7976931348623157e308, Fmt(8, -60, True, "TRN", "SAT"), 127),
        (1.7976931348623157e308, Fmt(8, -60, True, "TRN", "WRAP"), 0),
        (-1e300, Fmt(8, -60, True, "TRN", "SAT_ZERO"), 0),
        # subnormals and signed zeros
        (5e-324, Fmt(8, 4, True, "RND_INF", "SAT"), 0),
        (-5e-324, Fmt(8, 4, True, "TRN", "SAT"), -1),
        (-5e-324, Fmt(8, 4, True, "TRN_ZERO", "SAT"), 0),
        (-5e-324, Fmt(8, 4, False, "TRN", "WRAP"), 255),
        (-0.0, Fmt(8, 4, True, "TRN", "SAT"), 0),
        (-0.0, Fmt(8, 4, False, "RND_MIN_INF", "WRAP"), 0),
    ],
)
def test_quantize_is_exact_at_the_edges(x, fmt, expected):
    assert quantize(x, fmt) == expected
    assert _reference(Fraction(x), fmt) == expected
    # the integer path gives the same: x = mantissa * 2**-frac
    num, den = x.as_integer_ratio()
    if den > 1 or num == 0:
        assert requantize(num, den.bit_length() - 1, fmt) == expected


@pytest.mark.parametrize(
    "raw, frac_from, fmt, expected",
    [
        # right shifts of 64 bits and more
        (0, 64, Fmt(8, 8, True, "RND", "SAT"), 0),  # raw 0 of ap_fixed<6,-58>
        (-1, 64, Fmt(8, 8, True, "TRN", "SAT"), -1),
        (-1, 64, Fmt(8, 8, True, "RND_MIN_INF", "SAT"), 0),
        (-(2**63), 64, Fmt(8, 8, True, "RND_MIN_INF", "SAT"), -1),  # exactly -1/2: a tie
        (-(2**63), 64, Fmt(8, 8, True, "RND_CONV", "SAT"), 0),
        (2**63 - 1, 63, Fmt(8, 8, True, "RND", "SAT"), 1),
        (2**62, 63, Fmt(8, 8, True, "RND_ZERO", "SAT"), 0),
        (5, 300, Fmt(8, 8, False, "RND_INF", "WRAP"), 0),
        (-5, 300, Fmt(8, 8, False, "TRN", "WRAP"), 255),
        # left shifts whose product exceeds int64
        (1, -70, Fmt(8, 8, True, "TRN", "SAT"), 127),
        (-3, -62, Fmt(8, 8, True, "TRN", "SAT"), -128),
        (1, -70, Fmt(8, 8, True, "TRN", "SAT_ZERO"), 0),
        (1, -70, Fmt(8, 8, True, "TRN", "WRAP"), 0),
        (2**40 + 3, -20, Fmt(24, 24, True, "TRN", "WRAP"), 3 << 20),
        (2**62 + 5, -3, Fmt(8, 8, False, "TRN", "WRAP"), 40),
    ],
)
def test_requantize_any_shift(raw, frac_from, fmt, expected):
    assert requantize(raw, frac_from, fmt) == expected
    assert _reference(Fraction(raw, 1) / Fraction(2) ** frac_from, fmt) == expected


@pytest.mark.parametrize("frac_from", [2.5, True, 10**6, -(10**6), "3"])
def test_requantize_refuses_bad_frac_from(frac_from):
    with pytest.raises(ValueError, match="frac_from"):
        requantize(1, frac_from, Fmt(8, 4))


def test_quantize_refuses_infinities_only():
    with pytest.raises(ValueError, match="NaN or infinite"):
        quantize([1.0, np.inf], Fmt(8, 4))
    quantize(np.finfo(np.float64).max, Fmt(8, 4))  # finite: saturates or wraps, never refused


all_formats = st.builds(
    lambda w, i, signed, q, o: Fmt(w, min(i, w) if not signed else i, signed, q, o),
    st.integers(1, 48), st.integers(-40, 60), st.booleans(),
    st.sampled_from(QUANT_MODES), st.sampled_from(OVERFLOW_MODES),
)


def _near_ties(fmt: Fmt, k: int) -> list[float]:
    """The half-LSB tie k + 1/2 (and k itself) and the next double on either side."""
    out = []
    for v in (math.ldexp(k + 0.5, -fmt.frac_bits), math.ldexp(k, -fmt.frac_bits)):
        out += [np.nextafter(v, -np.inf), v, np.nextafter(v, np.inf)]
    return out


@settings(max_examples=400, deadline=None)
@given(all_formats, st.integers(-(2**50), 2**50), st.floats(allow_nan=False, allow_infinity=False))
def test_quantize_matches_exact_reference(fmt, k, x):
    xs = np.array(_near_ties(fmt, k) + [x, -x, x * 2.0**-30, x * 2.0**30] , dtype=np.float64)
    xs = xs[np.isfinite(xs)]
    got = quantize(xs, fmt)
    assert got.tolist() == [_reference(Fraction(float(v)), fmt) for v in xs]


@settings(max_examples=400, deadline=None)
@given(all_formats, st.integers(-(2**63), 2**63 - 1), st.integers(-300, 300))
def test_requantize_matches_exact_reference(fmt, raw, frac_from):
    expected = _reference(Fraction(raw) / Fraction(2) ** frac_from, fmt)
    assert requantize(raw, frac_from, fmt) == expected


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Fmt(64, 32), "width .* int64"),
        (lambda: Fmt.parse("ap_fixed<8,4,AP_RND,AP_SAT_SYM>"), "AP_SAT_SYM is not supported"),
        (lambda: Fmt(8, -100), r"F = W - I must be within \+/-96"),
        (lambda: quantize(np.nan, Fmt(8, 4)), "NaN or infinite"),
    ],
)
def test_refusals_where_onchip_differs_from_ap_types(make, match):
    with pytest.raises(ValueError, match=match):
        make()
