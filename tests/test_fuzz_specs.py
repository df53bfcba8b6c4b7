"""Differential fuzzing over the spec space: golden, HLS C simulation and RTL agree bit for bit.

Hypothesis draws specs across everything :class:`~onchip.spec.LearnerSpec` accepts (kind,
widths with several layers and outputs, KAN grid size, order, grid range and basis table
bits, every format field narrow and wide with every quantization and overflow mode, unsigned
formats, learning-rate shifts up to the largest a float64 power of two allows, init scale,
schedule and staleness, the stage plan (``timing``, both plans on every datapath), the serial MLP and KAN datapaths and the KAN's lanes) and a short raw stream (inputs on, at and
beyond the grid edges and the format limits, targets at full scale). A drawn spec goes
through the spec's own validation; one it refuses is rejected with ``assume`` and counted
(:data:`COUNTS`, printed at the end of the module and shown by
``--hypothesis-show-statistics``).

* default run (deterministic, ``derandomize=True``): many specs golden vs float twin (cheap),
  golden vs HLS C simulation (a g++ build of a few seconds each, ``-O0``), a handful on the RTL,
  and on the cocotb bench specs with one-bit formats (a one-bit port is a scalar in Verilog:
  cocotb reads it as a ``Logic``);
* ``pytest -m slow``: hundreds, drawn afresh.

Examples the fuzzer found are kept below as explicit regression specs.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

from onchip.backends import available_backends, get_backend
from onchip.fixed import OVERFLOW_MODES, QUANT_MODES
from onchip.spec import LearnerSpec
from support import golden_final

#: Outcomes of every drawn spec: "checked <test>", "refused: <reason>" (validation).
COUNTS: collections.Counter = collections.Counter()

#: Examples per test: (default run, ``-m slow``).
N_FLOAT = (150, 1500)
N_HLS = (8, 300)
N_RTL = (1, 40)
N_COCOTB = (2, 20)

_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    database=None,
    print_blob=True,  # a failure prints the @reproduce_failure line that replays it (no database is kept)
)


def _fmt_text(width: int, int_bits: int, signed: bool, quant: str, overflow: str) -> str:
    return f"{'ap_fixed' if signed else 'ap_ufixed'}<{width},{int_bits},{quant},{overflow}>"


@st.composite
def formats_field(draw, *, name: str, frac: int | None = None, int_min: int | None = None):
    """One ap_fixed string: narrow (1-8 bits) or wide (up to 32, 48 for acc), any modes.

    ``frac``/``int_min``: fractional bits and least integer bits the spec needs (a KAN
    layer input holding the grid); drawn freely one time in five.
    """
    max_width = 48 if name == "acc" else 32
    free = draw(st.integers(0, 4)) == 0
    quant = draw(st.sampled_from(QUANT_MODES))
    overflow = draw(st.sampled_from(OVERFLOW_MODES))
    signed = True
    if name == "acc" and not free:
        overflow = "WRAP"
    elif name not in ("acc", "basis") or free:
        signed = draw(st.integers(0, 9)) > 0  # unsigned one time in ten
    if frac is not None and not free:
        int_bits = max(int_min or 1, 1) + draw(st.integers(0, 3))
        width = int_bits + frac + draw(st.integers(0, 2))
    elif name == "basis" and not free:
        width = draw(st.integers(3, 20))
        int_bits = draw(st.integers(2, 4))
    else:
        wide = draw(st.booleans())
        width = draw(st.integers(9, max_width) if wide else st.integers(1, 8))
        int_bits = draw(st.integers(-4, width + 4))
    if not signed:
        int_bits = min(int_bits, width)
    return _fmt_text(width, int_bits, signed, quant, overflow)


@st.composite
def spec_fields(draw, *, max_width: int = 4, rtl: bool = False) -> dict:
    """Keyword arguments of a LearnerSpec (not yet validated)."""
    kind = draw(st.sampled_from(["kan", "mlp"]))
    n_layers = draw(st.integers(1, 3))
    widths = [draw(st.integers(1, max_width)) for _ in range(n_layers + 1)]
    shift = draw(st.one_of(st.integers(0, 24), st.integers(0, 1074)))
    fields = dict(
        kind=kind, widths=tuple(widths), learning_rate=2.0**-shift,
        init_scale=draw(st.one_of(st.sampled_from([0.0, 0.1, 0.5, 1.0, 4.0]),
                                  st.floats(0, 8, allow_nan=False))),
        init_seed=draw(st.integers(0, 2**16)),
        schedule=draw(st.sampled_from(["sequential", "pipelined"])),
        staleness=draw(st.integers(0, 6)),
        # mostly allowed, so that narrow accumulators that do wrap stay covered
        allow_acc_wrap=draw(st.integers(0, 4)) > 0,
    )
    formats = {}
    if kind == "kan":
        g = draw(st.integers(1, 12))
        k = draw(st.integers(1, 3))
        e = draw(st.integers(-3, 2))  # cell width h = 2^e
        h = 2.0**e
        lo = h * draw(st.integers(-g - 1, 1))
        t = draw(st.integers(1, 12 if draw(st.booleans()) else 5))
        fields.update(grid_size=g, spline_order=k, grid_range=(lo, lo + g * h), basis_table_bits=t)
        reach = max(abs(lo), abs(lo + g * h), 1.0)
        int_min = int(math.ceil(math.log2(reach))) + 1
        for name in ("input", "act"):
            formats[name] = draw(formats_field(name=name, frac=max(t - e, 0) + draw(st.integers(0, 3)),
                                               int_min=int_min))
        fields["datapath"] = draw(st.sampled_from(["parallel", "serial"]))
        if fields["datapath"] == "serial":
            fields["lanes"] = draw(st.integers(1, max(widths[:-1])))
            if draw(st.integers(0, 4)):
                fields["schedule"] = "sequential"
    else:
        fields["datapath"] = draw(st.sampled_from(["parallel", "serial"]))
        if fields["datapath"] == "serial" and draw(st.integers(0, 4)):
            fields["schedule"] = "sequential"
    for name in ("input", "coef", "basis", "act", "grad", "acc"):
        if name not in formats:
            formats[name] = draw(formats_field(name=name))
    fields["formats"] = formats
    # the stage plan: both plans on every datapath, and predict-first where it applies (one-layer
    # parallel KANs)
    plans = ["auto", "compact", "fast"]
    if kind == "kan" and len(widths) == 2 and fields["datapath"] == "parallel":
        plans.append("predict-first")
    fields["timing"] = draw(st.sampled_from(plans))
    if rtl and fields["schedule"] == "pipelined":
        fields["staleness"] = None  # the RTL's smallest, set once the spec is valid
    return fields


@st.composite
def one_bit_fields(draw) -> dict:
    """:func:`spec_fields` for the RTL with coef one bit wide (the parameter response port is then
    a scalar) and up to two of act, grad and input too (any signedness and modes); a one-bit coef
    holds no non-zero initial value, so init_scale is 0."""
    fields = draw(spec_fields(max_width=3, rtl=True))
    names = ["coef"] + draw(st.lists(st.sampled_from(["act", "grad", "input"]), max_size=2, unique=True))
    for name in names:
        signed = draw(st.booleans())
        int_bits = draw(st.integers(-3, 4)) if signed else draw(st.integers(-3, 1))
        fields["formats"][name] = _fmt_text(1, int_bits, signed, draw(st.sampled_from(QUANT_MODES)),
                                            draw(st.sampled_from(OVERFLOW_MODES)))
    fields["init_scale"] = 0.0
    return fields


def _valid_spec(fields: dict) -> LearnerSpec:
    """The LearnerSpec of ``fields``, or ``assume(False)`` (counted) where validation refuses it."""
    stale = fields.get("staleness")
    try:
        spec = LearnerSpec(**{**fields, "staleness": 0 if stale is None else stale})
    except ValueError as exc:
        reason = str(exc).split(":")[0].split(" (")[0][:60]
        COUNTS[f"refused: {reason}"] += 1
        event(f"refused: {reason}")
        assume(False)
    if stale is None:  # pipelined on the RTL: at its smallest staleness, plus a little
        from onchip.hw.learner import min_staleness

        spec = spec.replace(staleness=min_staleness(spec) + (spec.init_seed % 2))
    note(spec.to_toml())
    return spec


@st.composite
def streams(draw, spec: LearnerSpec, max_samples: int = 40):
    """Raw (x, y): inputs over the whole input range, on and around the grid edges and at the
    format limits; targets uniform or at full scale (saturating errors)."""
    n = draw(st.integers(1, max_samples))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fi, fa = spec.formats.input, spec.formats.act
    edges = [fi.min_raw, fi.max_raw, 0, 1, -1]
    if spec.kind == "kan":
        for v in spec.grid_range:
            raw = int(fi.quantize(v))
            edges += [raw - 1, raw, raw + 1]
    edges = np.clip(edges, fi.min_raw, fi.max_raw)
    x = rng.integers(fi.min_raw, fi.max_raw + 1, (n, spec.n_in))
    pick = rng.random((n, spec.n_in)) < 0.3
    x[pick] = rng.choice(edges, pick.sum())
    y = rng.integers(fa.min_raw, fa.max_raw + 1, (n, spec.n_out))
    pick = rng.random((n, spec.n_out)) < 0.3
    y[pick] = rng.choice([fa.min_raw, fa.max_raw], pick.sum())
    return x.astype(np.int64), y.astype(np.int64)


def _float_runs(spec: LearnerSpec, x, y) -> None:
    f = spec.formats
    from onchip.backends import FloatDivergence

    try:
        preds, theta = get_backend("float").run(spec, f.input.dequantize(x), f.act.dequantize(y))
    except FloatDivergence:  # unsaturated float SGD may run away where the fixed-point one saturates
        COUNTS["float twin diverged"] += 1
        return
    assert preds.shape == (len(x), spec.n_out) and theta.shape == (spec.parameter_count(),)
    assert np.isfinite(preds).all() and np.isfinite(theta).all()


def _hls_equals_golden(spec: LearnerSpec, x, y) -> None:
    from onchip.hls import HlsLearner

    want_preds, want_theta = golden_final(spec, x, y)
    got_preds, got_theta = HlsLearner(spec, opt="O0").run(x, y)
    np.testing.assert_array_equal(got_preds, want_preds, err_msg="HLS predictions differ from golden")
    np.testing.assert_array_equal(got_theta, want_theta, err_msg="HLS parameters differ from golden")


def _rtl_equals_golden(spec: LearnerSpec, x, y) -> None:
    want_preds, want_theta = golden_final(spec, x, y)
    got_preds, got_theta = get_backend("rtl").run(spec, x, y)
    np.testing.assert_array_equal(got_preds, want_preds, err_msg="RTL predictions differ from golden")
    np.testing.assert_array_equal(got_theta, want_theta, err_msg="RTL parameters differ from golden")


def _cocotb_equals_golden(spec: LearnerSpec, x, y) -> None:
    want_preds, want_theta = golden_final(spec, x, y)
    got_preds, got_theta = get_backend("cocotb").run(spec, x, y)
    np.testing.assert_array_equal(got_preds, want_preds, err_msg="cocotb predictions differ from golden")
    np.testing.assert_array_equal(got_theta, want_theta, err_msg="cocotb parameters differ from golden")


def _need(backend: str) -> None:
    if backend not in available_backends():
        pytest.skip(f"the {backend} backend is not available here")


# -- the fuzz tests --------------------------------------------------------------------------
def _float_case(data) -> None:
    spec = _valid_spec(data.draw(spec_fields(max_width=6)))
    x, y = data.draw(streams(spec))
    _float_runs(spec, x, y)
    golden_final(spec, x, y)
    COUNTS["checked golden+float"] += 1


def _hls_case(data) -> None:
    spec = _valid_spec(data.draw(spec_fields()))
    x, y = data.draw(streams(spec))
    _hls_equals_golden(spec, x, y)
    COUNTS["checked golden=hls"] += 1


def _rtl_case(data) -> None:
    spec = _valid_spec(data.draw(spec_fields(max_width=3, rtl=True)))
    x, y = data.draw(streams(spec, max_samples=24))
    _rtl_equals_golden(spec, x, y)
    _hls_equals_golden(spec, x, y)
    COUNTS["checked golden=hls=rtl"] += 1


def _cocotb_case(data) -> None:
    spec = _valid_spec(data.draw(one_bit_fields()))
    x, y = data.draw(streams(spec, max_samples=24))
    _cocotb_equals_golden(spec, x, y)
    COUNTS["checked golden=cocotb (one-bit formats)"] += 1


@settings(max_examples=N_FLOAT[0], derandomize=True, **_SETTINGS)
@given(st.data())
def test_fuzz_golden_and_float_twin_run(data):
    _need("float")
    _float_case(data)


@settings(max_examples=N_HLS[0], derandomize=True, **_SETTINGS)
@given(st.data())
def test_fuzz_hls_equals_golden(data):
    _need("hls")
    _hls_case(data)


@settings(max_examples=N_RTL[0], derandomize=True, **_SETTINGS)
@given(st.data())
def test_fuzz_rtl_and_hls_equal_golden(data):
    _need("rtl")
    _need("hls")
    _rtl_case(data)


@settings(max_examples=N_COCOTB[0], derandomize=True, **_SETTINGS)
@given(st.data())
def test_fuzz_cocotb_with_one_bit_formats_equals_golden(data):
    _need("cocotb")
    _cocotb_case(data)


@pytest.mark.slow
@settings(max_examples=N_FLOAT[1], **_SETTINGS)
@given(st.data())
def test_fuzz_golden_and_float_twin_run_slow(data):
    _need("float")
    _float_case(data)


@pytest.mark.slow
@settings(max_examples=N_HLS[1], **_SETTINGS)
@given(st.data())
def test_fuzz_hls_equals_golden_slow(data):
    _need("hls")
    _hls_case(data)


@pytest.mark.slow
@settings(max_examples=N_RTL[1], **_SETTINGS)
@given(st.data())
def test_fuzz_rtl_and_hls_equal_golden_slow(data):
    _need("rtl")
    _need("hls")
    _rtl_case(data)


@pytest.mark.slow
@settings(max_examples=N_COCOTB[1], **_SETTINGS)
@given(st.data())
def test_fuzz_cocotb_with_one_bit_formats_equals_golden_slow(data):
    _need("cocotb")
    _cocotb_case(data)


def teardown_module(module):
    """Print how many specs each test checked and how many validation refused, by reason."""
    if COUNTS:
        print("\nspec fuzz: " + ", ".join(f"{k}: {v}" for k, v in sorted(COUNTS.items())))
