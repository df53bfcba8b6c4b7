"""onchip.fixed against the ap_types headers themselves (the hls4ml copy), compiled with g++.

A small oracle library is generated and built once (cached under the onchip build
cache by a hash of its source, the headers' version and the compiler): for every
target format of a list (each shape in every quantization x overflow mode, signed
and unsigned) it converts

* doubles (``T t = x``): random doubles of every magnitude, every half-LSB tie of
  the format's range and the next double on either side, grid points, subnormals,
  signed zeros and the largest finite doubles;
* raw values of another format (``T t = src``, the source ``ap_fixed<240,120>``
  holding ``raw * 2**-frac_from`` exactly for frac_from in [-50, 100]): shifts from
  -58 to 106 bits, so right shifts of 64 and more and left shifts past int64;
* exact products (``T t = a * b``) of every pair of raw values of two small formats.

Each must equal :func:`onchip.fixed.quantize` / :func:`onchip.fixed.requantize`
bit for bit. A mutation check swaps two modes on the oracle side and asserts that
mismatches are then found, so the harness can fail. Learner steps (KAN and MLP)
compare the HLS backend (the same headers) with the golden one over narrow formats
that carry every mode combination. The default run takes a few tens of seconds
(once built); ``-m slow`` sweeps many more formats, values and learners.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import subprocess
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata

import numpy as np
import pytest

pytest.importorskip("hls4ml")  # ships the ap_types headers

from onchip.backends import get_backend  # noqa: E402
from onchip.cache import cached_build, digest  # noqa: E402
from onchip.fixed import OVERFLOW_MODES, QUANT_MODES, Fmt, quantize, requantize  # noqa: E402
from onchip.hls import ap_types_dir  # noqa: E402
from onchip.hls.build import compiler  # noqa: E402
from onchip.spec import Formats, LearnerSpec  # noqa: E402

try:
    CXX, CXX_VERSION = compiler()
except FileNotFoundError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

# -- formats --------------------------------------------------------------------------------------
#: (W, I) shapes, each taken in every quantization x overflow mode. Signed shapes include I < 0
#: (every value below one LSB of 1) and I > W (an LSB above 1); unsigned ones need I <= W.
SHAPES_SIGNED = {"default": [(1, -2), (4, 6), (3, 1)], "slow": [(1, -2), (4, 6), (3, 1), (2, 2), (5, -1), (6, 0), (7, 3)]}
SHAPES_UNSIGNED = {"default": [(1, -2), (3, 1), (4, 4)], "slow": [(1, -2), (3, 1), (4, 4), (2, 0), (5, -1), (6, 6), (7, 3)]}
#: Operand formats of the products: (A, B) pairs.
PRODUCT_OPERANDS = {
    "default": [(Fmt(4, 1), Fmt(5, 2)), (Fmt(3, 1, False), Fmt(4, -1))],
    "slow": [(Fmt(4, 1), Fmt(5, 2)), (Fmt(3, 1, False), Fmt(4, -1)), (Fmt(6, 6), Fmt(5, 1, False)),
             (Fmt(3, -2, False), Fmt(3, 3, False))],
}
SRC = "ap_fixed<240,120>"  # the wide source of the format-to-format conversions (not an onchip format)
FRAC_FROM = (-50, 100)  # range of frac_from it holds exactly for every int64 raw value


def targets(size: str) -> list[Fmt]:
    out = []
    for signed, shapes in ((True, SHAPES_SIGNED[size]), (False, SHAPES_UNSIGNED[size])):
        for (w, i), q, o in itertools.product(shapes, QUANT_MODES, OVERFLOW_MODES):
            out.append(Fmt(w, i, signed, q, o))
    return out


def _product_ok(a: Fmt, b: Fmt, t: Fmt) -> bool:
    """Whether ap_types can assign a*b to t without reading past the product's MSB: for a
    non-TRN mode it reads the bit below T's LSB, which must lie inside the product."""
    dropped = (a.frac_bits + b.frac_bits) - t.frac_bits
    return dropped <= a.width + b.width or t.quant == "TRN"


# -- the oracle library ---------------------------------------------------------------------------
_PRELUDE = """\
#include <ap_fixed.h>
#include <ap_int.h>
#include <stdint.h>
typedef %(src)s Src;
template <int W, int I, ap_q_mode Q, ap_o_mode O, int N>
static int64_t raw_of(const ap_fixed<W, I, Q, O, N>& t) { ap_int<W> r; r.range(W - 1, 0) = t.range(W - 1, 0); return r.to_int64(); }
template <int W, int I, ap_q_mode Q, ap_o_mode O, int N>
static int64_t raw_of(const ap_ufixed<W, I, Q, O, N>& t) { ap_uint<W> r; r.range(W - 1, 0) = t.range(W - 1, 0); return (int64_t)r.to_uint64(); }
template <class T> static void from_double(const double* x, int64_t* out, long n) {
    for (long i = 0; i < n; i++) { T t = x[i]; out[i] = raw_of(t); } }
template <class T> static void from_raw(const int64_t* r, const int64_t* f, int64_t* out, long n) {
    for (long i = 0; i < n; i++) {
        Src v = ap_int<64>(r[i]);  // exact: Src has 120 integer bits
        if (f[i] >= 0) v = v >> (int)f[i]; else v = v << (int)(-f[i]);  // exact: 120 fraction bits
        T t = v; out[i] = raw_of(t); } }
template <class A, class B, class T> static void from_product(const int64_t* a, const int64_t* b, int64_t* out, long n) {
    for (long i = 0; i < n; i++) {
        A x; x.range() = ap_int<64>(a[i]).range(A::width - 1, 0);
        B y; y.range() = ap_int<64>(b[i]).range(B::width - 1, 0);
        T t = x * y; out[i] = raw_of(t); } }
"""


def _sources(size: str, chunks: int) -> list[str]:
    """The oracle's C++, split into ``chunks`` translation units (compiled in parallel)."""
    tg = targets(size)
    units = [[_PRELUDE % {"src": SRC}] for _ in range(chunks)]
    for k, t in enumerate(tg):
        u = units[k % chunks]
        u.append(f'extern "C" void d{k}(const double* x, int64_t* o, long n) {{ from_double<{t.cpp()} >(x, o, n); }}')
        u.append(
            f'extern "C" void r{k}(const int64_t* r, const int64_t* f, int64_t* o, long n) '
            f"{{ from_raw<{t.cpp()} >(r, f, o, n); }}"
        )
        for p, (a, b) in enumerate(PRODUCT_OPERANDS[size]):
            if _product_ok(a, b, t):
                u.append(
                    f'extern "C" void p{k}_{p}(const int64_t* a, const int64_t* b, int64_t* o, long n) '
                    f"{{ from_product<{a.cpp()}, {b.cpp()}, {t.cpp()} >(a, b, o, n); }}"
                )
    return ["\n".join(u) + "\n" for u in units]


CXXFLAGS = ("-O1", "-std=c++17", "-w", "-fPIC")


class Oracle:
    """ctypes front of the compiled ap_types conversions, indexed by target format."""

    def __init__(self, path, size: str):
        self.lib = ctypes.CDLL(str(path))
        self.index = {t: k for k, t in enumerate(targets(size))}
        self.operands = PRODUCT_OPERANDS[size]

    @staticmethod
    def _ptr(a: np.ndarray):
        return a.ctypes.data_as(ctypes.c_void_p)

    def from_double(self, x, fmt: Fmt) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        out = np.empty(len(x), np.int64)
        getattr(self.lib, f"d{self.index[fmt]}")(self._ptr(x), self._ptr(out), ctypes.c_long(len(x)))
        return out

    def from_raw(self, raw, frac_from, fmt: Fmt) -> np.ndarray:
        raw = np.ascontiguousarray(raw, dtype=np.int64)
        f = np.ascontiguousarray(np.broadcast_to(frac_from, raw.shape), dtype=np.int64)
        assert FRAC_FROM[0] <= f.min() and f.max() <= FRAC_FROM[1]
        out = np.empty(len(raw), np.int64)
        getattr(self.lib, f"r{self.index[fmt]}")(self._ptr(raw), self._ptr(f), self._ptr(out), ctypes.c_long(len(raw)))
        return out

    def from_product(self, a, b, pair: int, fmt: Fmt) -> np.ndarray:
        a, b = np.ascontiguousarray(a, dtype=np.int64), np.ascontiguousarray(b, dtype=np.int64)
        out = np.empty(len(a), np.int64)
        fn = getattr(self.lib, f"p{self.index[fmt]}_{pair}")
        fn(self._ptr(a), self._ptr(b), self._ptr(out), ctypes.c_long(len(a)))
        return out


def build_oracle(size: str) -> Oracle:
    chunks = 2
    sources = _sources(size, chunks)
    include = ap_types_dir()
    key = digest(CXX_VERSION, " ".join(CXXFLAGS), f"hls4ml {metadata.version('hls4ml')}", *sources)

    def build(folder):
        for n, text in enumerate(sources):
            (folder / f"oracle{n}.cpp").write_text(text)

        def compile_one(n):
            cmd = [CXX, *CXXFLAGS, f"-I{include}", "-c", f"oracle{n}.cpp", "-o", f"oracle{n}.o"]
            return subprocess.run(cmd, cwd=folder, capture_output=True, text=True)

        with ThreadPoolExecutor(max_workers=chunks) as pool:
            procs = list(pool.map(compile_one, range(chunks)))
        procs.append(subprocess.run(
            [CXX, "-shared", *[f"oracle{n}.o" for n in range(chunks)], "-o", "oracle.so"],
            cwd=folder, capture_output=True, text=True,
        ))
        for proc in procs:
            if proc.returncode != 0:
                raise RuntimeError(f"g++ failed on the ap_types oracle:\n{proc.stderr[-3000:]}")

    entry, _ = cached_build("aptypes_oracle", key, build)
    return Oracle(entry / "oracle.so", size)


_ORACLES: dict[str, Oracle] = {}


def oracle_of(size: str) -> Oracle:
    if size not in _ORACLES:
        _ORACLES[size] = build_oracle(size)
    return _ORACLES[size]


SIZES = ["default", pytest.param("slow", marks=pytest.mark.slow)]


def _mismatches(what: str, fmt: Fmt, inputs, got, want) -> list[str]:
    bad = np.flatnonzero(np.asarray(got) != np.asarray(want))
    return [f"{what} {fmt}: input {inputs[i]!r}: onchip {got[i]}, ap_types {want[i]}" for i in bad[:3]] + (
        [f"{what} {fmt}: {len(bad)} mismatches in all"] if len(bad) else []
    )


def _report(problems: list[str], checked: int) -> None:
    assert not problems, f"{len(problems)} lines of mismatches over {checked} values:\n" + "\n".join(problems[:30])


# -- inputs ---------------------------------------------------------------------------------------
def doubles_for(fmt: Fmt, rng: np.random.Generator, n_random: int) -> np.ndarray:
    """Ties of the whole range (and one LSB beyond), grid points, their neighbouring doubles,
    random doubles of every magnitude, subnormals, signed zeros and the extremes."""
    k = np.arange(fmt.min_raw - 2, fmt.max_raw + 3, dtype=np.float64)
    centres = np.concatenate([np.ldexp(k + 0.5, -fmt.frac_bits), np.ldexp(k, -fmt.frac_bits)])
    near = np.concatenate([np.nextafter(centres, -np.inf), centres, np.nextafter(centres, np.inf)])
    bits = rng.integers(0, 2**63, n_random, dtype=np.int64) * rng.choice([-1, 1], n_random)
    random_all = bits.view(np.float64)
    random_all = random_all[np.isfinite(random_all)]
    scale = np.ldexp(rng.uniform(-1, 1, n_random), rng.integers(-fmt.frac_bits - 60, fmt.width - fmt.frac_bits + 60, n_random))
    tiny = np.array([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, -2.225073858507201e-308,
                     1.7976931348623157e308, -1.7976931348623157e308, -8.98846567431158e307, 1.0, -1.0])
    return np.concatenate([near, random_all, scale, tiny])


def raws_for(fmt: Fmt, rng: np.random.Generator, n_random: int) -> tuple[np.ndarray, np.ndarray]:
    """(raw, frac_from) pairs: random magnitudes (every bit length) at every shift of the oracle's
    range, the ties of each shift and their neighbours, and int64's extremes."""
    f = rng.integers(FRAC_FROM[0], FRAC_FROM[1] + 1, n_random)
    bits = rng.integers(0, 64, n_random)
    raw = (rng.integers(0, 2**62, n_random) >> (62 - np.minimum(bits, 62))) * rng.choice([-1, 1], n_random)
    raws, fracs = [raw], [f]
    for s in range(1, 63):  # ties at a right shift of s bits, +/- 1
        frac = fmt.frac_bits + s
        if not FRAC_FROM[0] <= frac <= FRAC_FROM[1]:
            continue
        k = np.arange(-3, 4)
        tie = (2 * k + 1) * (1 << (s - 1))
        for d in (-1, 0, 1):
            raws.append(tie + d)
            fracs.append(np.full(len(k), frac))
    ext = np.array([0, 1, -1, 2**63 - 1, -(2**63), 2**62, -(2**62)], dtype=np.int64)
    for frac in range(FRAC_FROM[0], FRAC_FROM[1] + 1, 3):
        raws.append(ext)
        fracs.append(np.full(len(ext), frac))
    return np.concatenate(raws).astype(np.int64), np.concatenate(fracs).astype(np.int64)


# -- conversions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
def test_conversion_from_double(size):
    oracle, rng = oracle_of(size), np.random.default_rng(1)
    n_random = 20_000 if size == "default" else 200_000
    problems, checked = [], 0
    for fmt in targets(size):
        x = doubles_for(fmt, rng, n_random)
        problems += _mismatches("double ->", fmt, x, quantize(x, fmt), oracle.from_double(x, fmt))
        checked += len(x)
    _report(problems, checked)


@pytest.mark.parametrize("size", SIZES)
def test_conversion_between_formats(size):
    oracle, rng = oracle_of(size), np.random.default_rng(2)
    n_random = 10_000 if size == "default" else 200_000
    problems, checked = [], 0
    for fmt in targets(size):
        raw, frac = raws_for(fmt, rng, n_random)
        got = np.array([requantize(raw[frac == f], int(f), fmt) for f in np.unique(frac)], dtype=object)
        got = np.concatenate(list(got))
        order = np.concatenate([np.flatnonzero(frac == f) for f in np.unique(frac)])
        want = oracle.from_raw(raw[order], frac[order], fmt)
        inputs = list(zip(raw[order].tolist(), frac[order].tolist()))
        problems += _mismatches("raw ->", fmt, inputs, got, want)
        checked += len(raw)
    _report(problems, checked)


def _product_mismatches(oracle: Oracle, size: str, swap: dict[str, str] | None = None) -> tuple[list[str], int]:
    """Every product of two operand formats' raw values into every target. ``swap`` maps a mode
    to another one on the oracle side only (the mutation check)."""
    problems, checked = [], 0
    for p, (fa, fb) in enumerate(oracle.operands):
        a, b = np.meshgrid(np.arange(fa.min_raw, fa.max_raw + 1), np.arange(fb.min_raw, fb.max_raw + 1))
        a, b = a.ravel(), b.ravel()
        for fmt in targets(size):
            twin = fmt
            if swap:
                twin = Fmt(fmt.width, fmt.int_bits, fmt.signed, swap.get(fmt.quant, fmt.quant),
                           swap.get(fmt.overflow, fmt.overflow))
            if not (_product_ok(fa, fb, fmt) and _product_ok(fa, fb, twin)):
                continue
            got = requantize(a * b, fa.frac_bits + fb.frac_bits, fmt)
            want = oracle.from_product(a, b, p, twin)
            problems += _mismatches(f"{fa} * {fb} ->", fmt, list(zip(a.tolist(), b.tolist())), got, want)
            checked += len(a)
    return problems, checked


@pytest.mark.parametrize("size", SIZES)
def test_products(size):
    _report(*_product_mismatches(oracle_of(size), size))


@pytest.mark.parametrize("swap", [("RND", "RND_CONV"), ("TRN", "TRN_ZERO"), ("SAT", "WRAP"), ("SAT", "SAT_ZERO")])
def test_mutated_oracle_is_caught(swap):
    """Two modes swapped on the oracle side: the product check must then find mismatches."""
    a, b = swap
    problems, _ = _product_mismatches(oracle_of("default"), "default", {a: b, b: a})
    assert problems, f"swapping {a} and {b} in the oracle went unnoticed"


# -- learner steps ----------------------------------------------------------------------------------
MODE_PAIRS = list(itertools.product(QUANT_MODES, OVERFLOW_MODES))  # 21 (quantization, overflow) pairs
#: The default run: one KAN and one MLP, together every quantization and every overflow mode.
DEFAULT_PAIRS = {
    "kan": [("TRN", "SAT"), ("TRN_ZERO", "WRAP"), ("RND", "SAT_ZERO"), ("RND_ZERO", "SAT"), ("RND_MIN_INF", "WRAP")],
    "mlp": [("RND_INF", "SAT"), ("RND_CONV", "SAT_ZERO"), ("RND", "WRAP"), ("TRN", "SAT_ZERO")],
}


def _learner_specs(kind: str, size: str) -> list[LearnerSpec]:
    """Narrow learners whose formats (input, coef, basis, act, grad) carry the mode pairs: all 21
    across the list in the slow run, :data:`DEFAULT_PAIRS` by default."""
    names = ("input", "coef", "basis", "act", "grad") if kind == "kan" else ("input", "coef", "act", "grad")
    shapes = {"input": (8, 3), "coef": (8, 2), "basis": (7, 2), "act": (7, 3), "grad": (6, 2)}
    pairs = MODE_PAIRS if size == "slow" else DEFAULT_PAIRS[kind]
    specs = []
    for n, start in enumerate(range(0, len(pairs), len(names))):
        chunk = pairs[start : start + len(names)]
        chunk += MODE_PAIRS[: len(names) - len(chunk)]
        fm = {nm: f"ap_fixed<{shapes[nm][0]},{shapes[nm][1]},{q},{o}>" for nm, (q, o) in zip(names, chunk)}
        acc = "ap_fixed<20,5,TRN,WRAP>" if n % 2 == 0 else "ap_fixed<20,5,RND_CONV,WRAP>"
        common = dict(learning_rate=2.0**-1, init_scale=0.7, init_seed=n, schedule="sequential",
                      allow_acc_wrap=True)  # narrow acc on purpose: its wrap is part of what is compared
        if kind == "kan":
            specs.append(LearnerSpec(
                kind="kan", widths=(2, 2, 1), grid_size=4, spline_order=2, grid_range=(-1.0, 1.0),
                basis_table_bits=3, formats=Formats(**fm, acc=acc), **common,
            ))
        else:
            specs.append(LearnerSpec(kind="mlp", widths=(2, 3, 1), formats=Formats(**fm, acc=acc), **common))
    return specs


def _learner_cases():
    cases = []
    for size in ("default", "slow"):
        for kind in ("kan", "mlp"):
            for n, spec in enumerate(_learner_specs(kind, size)):
                marks = [pytest.mark.slow] if size == "slow" else []
                cases.append(pytest.param(spec, id=f"{size}-{kind}-{n}", marks=marks))
    return cases


@pytest.fixture(scope="module")
def hls_built(request):
    """Compile the HLS programs of the selected learner cases two at a time (cached), up front."""
    from onchip.hls import HlsLearner

    if not get_backend("hls").available():
        pytest.skip("HLS backend unavailable")
    specs = [
        item.callspec.params["spec"]
        for item in request.session.items
        if item.module is request.module and "spec" in getattr(getattr(item, "callspec", None), "params", {})
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(HlsLearner, specs))


@pytest.mark.parametrize("spec", _learner_cases())
def test_learner_steps_match_golden(spec, hls_built):
    hls, golden = get_backend("hls"), get_backend("golden")
    rng = np.random.default_rng(spec.init_seed + 100)
    n = 600
    fi, fa, fc = spec.formats.input, spec.formats.act, spec.formats.coef
    x = rng.integers(fi.min_raw, fi.max_raw + 1, (n, spec.n_in))
    y = rng.integers(fa.min_raw, fa.max_raw + 1, (n, spec.n_out))
    theta = rng.integers(fc.min_raw, fc.max_raw + 1, spec.parameter_count())
    want_preds, want_theta = golden.run(spec, x, y, theta=theta)
    got_preds, got_theta = hls.run(spec, x, y, theta=theta)
    np.testing.assert_array_equal(got_preds, want_preds)
    np.testing.assert_array_equal(got_theta, want_theta)
    assert not np.array_equal(want_theta, theta)  # the learner did learn
