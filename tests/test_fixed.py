"""Fixed-point formats: hand-worked rounding/overflow cases and properties."""

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
