"""The hardware rounding helpers (requant, requant_by_carry of timing = "fast", requant_beside of
timing = "predict-first") equal onchip.fixed.requant for every quantization and overflow mode."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from onchip.fixed import OVERFLOW_MODES, QUANT_MODES, Fmt, requant
from onchip.hw.fixedpoint import requant as hw_requant
from onchip.hw.fixedpoint import requant_beside, requant_by_carry

IN_BITS, IN_FRAC = 11, 6


def assert_equals_golden_on_every_input(build, targets, frac_from):
    """Drive every IN_BITS-bit input through ``build(m, x, fmt)`` for each target format and
    compare with the golden requant from ``frac_from`` fractional bits (the same F: overflow only)."""
    m = Module()
    x = Signal(signed(IN_BITS))
    outs = [build(m, x, fmt) for fmt in targets]
    values = np.arange(-(2 ** (IN_BITS - 1)), 2 ** (IN_BITS - 1))
    got = np.zeros((values.size, len(targets)), np.int64)

    async def bench(ctx):
        for n, v in enumerate(values):
            ctx.set(x, int(v))
            for t, o in enumerate(outs):
                got[n, t] = ctx.get(o)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for t, fmt in enumerate(targets):
        w, f, s, q, o = fmt.code
        want = np.array([requant(np.int64(v), frac_from(fmt), w, f, s, q, o) for v in values])
        bad = np.nonzero(got[:, t] != want)[0]
        assert bad.size == 0, f"{fmt}: input {values[bad[0]]} gives {got[bad[0], t]}, golden {want[bad[0]]}"


@pytest.mark.parametrize("build", [hw_requant, requant_by_carry, requant_beside],
                         ids=["requant", "requant_by_carry", "requant_beside"])
def test_requant_matches_golden_exhaustively(build):
    # every 11-bit input through shifts right (round), none, and left, into narrow
    # signed and unsigned formats that overflow
    targets = []
    for quant, ovf in itertools.product(QUANT_MODES, OVERFLOW_MODES):
        targets += [
            Fmt(6, 3, True, quant, ovf),  # drop 3 bits, may overflow
            Fmt(5, 5, True, quant, ovf),  # drop all 6 fractional bits
            Fmt(6, 2, False, quant, ovf),  # unsigned target
            Fmt(9, 2, True, quant, ovf),  # shift left by one bit
            Fmt(7, 2, True, quant, ovf),  # drop one bit: the tie is the only discarded bit
            Fmt(4, 8, True, quant, ovf),  # drop 10 of the 11 bits: the rounding carry reaches the sign
        ]
    assert_equals_golden_on_every_input(lambda m, x, fmt: build(m, x, IN_FRAC, fmt), targets, lambda fmt: IN_FRAC)


@pytest.mark.parametrize("mode", OVERFLOW_MODES)
def test_overflow_by_bits_matches_golden_exhaustively(mode):
    """overflow(by_bits=True) (timing = "fast": outside-the-range from the bits above the sign, no
    comparator) equals the golden conversion for every 11-bit input into narrower signed formats."""
    from onchip.hw.fixedpoint import overflow

    targets = [Fmt(w, 2, True, "TRN", mode) for w in (4, 6, 10, 11)]
    # the input read with the target's own fractional bits: the golden conversion only overflows
    assert_equals_golden_on_every_input(lambda m, x, fmt: overflow(m, x, fmt, by_bits=True), targets,
                                        lambda fmt: fmt.frac_bits)


def test_subtract_requant_matches_golden_on_every_input():
    """A parameter less its rounded update with the rounding in the subtraction's carry (the
    sequential fast plan's commit) equals overflow(theta - requant(raw)) for every 5-bit theta and
    8-bit raw, in every fused mode (saturating and wrapping) and a fallback (TRN_ZERO, SAT_ZERO),
    at shifts of 1 (the tie is the only discarded bit), 4, 6 and 10 (past the raw's sign)."""
    from onchip.fixed import overflow as golden_overflow
    from onchip.hw.fixedpoint import subtract_requant, subtract_requant_fuses

    raw_bits, w = 8, 5
    shapes = [(w, w - 1), (w, 3), (w, 5), (w, 9)]  # (width, int bits): F = 4, 2, 0, -4; raw F = 5
    modes = [(q, o) for q in QUANT_MODES for o in ("SAT", "WRAP") if q != "TRN_ZERO"]
    targets = [Fmt(wd, i, True, q, o) for wd, i in shapes for q, o in modes]
    targets += [Fmt(w, 3, True, "TRN_ZERO", "SAT"), Fmt(w, 3, True, "RND_CONV", "SAT_ZERO")]
    assert [subtract_requant_fuses(5, f) for f in targets[-2:]] == [False, False]
    assert all(subtract_requant_fuses(5, f) for f in targets[:-2])
    m = Module()
    theta, raw = Signal(signed(w)), Signal(signed(raw_bits))
    outs = [subtract_requant(m, theta, raw, 5, fmt) for fmt in targets]
    thetas = np.arange(-(2 ** (w - 1)), 2 ** (w - 1))
    raws = np.arange(-(2 ** (raw_bits - 1)), 2 ** (raw_bits - 1))
    got = np.zeros((thetas.size, raws.size, len(targets)), np.int64)

    async def bench(ctx):
        for a, t in enumerate(thetas):
            ctx.set(theta, int(t))
            for b, r in enumerate(raws):
                ctx.set(raw, int(r))
                for n, o in enumerate(outs):
                    got[a, b, n] = ctx.get(o)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for n, fmt in enumerate(targets):
        wd, f, s, q, o = fmt.code
        for b, r in enumerate(raws):
            d = requant(np.int64(r), 5, wd, f, s, q, o)
            want = np.array([golden_overflow(np.int64(t) - d, wd, s, o) for t in thetas])
            bad = np.nonzero(got[:, b, n] != want)[0]
            assert bad.size == 0, (f"{fmt}: theta {thetas[bad[0]]}, raw {r} gives {got[bad[0], b, n]}, "
                                   f"golden {want[bad[0]]}")


def test_requant_less_matches_golden_on_every_input():
    """The fused output error of the sequential fast plan, overflow(requant(raw -> fmt) - t -> out),
    equals the golden two conversions for every 5-bit t and 7-bit raw (F = 5), in every fused
    rounding mode, into a saturating and a wrapping, narrower and wider ``out``; formats that do
    not fuse are refused."""
    from onchip.fixed import overflow as golden_overflow
    from onchip.hw.fixedpoint import requant_less, requant_less_fuses

    raw_bits, w = 7, 5
    pairs = []
    for q in [q for q in QUANT_MODES if q != "TRN_ZERO"]:
        for i in (3, 8):  # fmt F = 2 (s = 3), -3 (s = 8: past the raw's sign)
            fmt = Fmt(w, i, True, q, "SAT")
            pairs += [(fmt, Fmt(w, i, True, "RND_CONV", "SAT")), (fmt, Fmt(w - 1, i - 1, True, "TRN", "WRAP")),
                      (fmt, Fmt(w + 2, i + 2, True, "TRN", "SAT"))]
    assert all(requant_less_fuses(5, f, o) for f, o in pairs)
    assert not requant_less_fuses(5, Fmt(w, 3, True, "RND", "WRAP"), Fmt(w, 3, True, "RND", "SAT"))
    with pytest.raises(ValueError, match="not one addition"):
        requant_less(None, Signal(signed(8)), 5, Fmt(w, 3, True, "RND", "SAT"), Fmt(w, 2, True, "RND", "SAT"),
                     Signal(signed(6)), Signal(signed(5)), Signal(signed(5)))
    m = Module()
    t, raw = Signal(signed(w)), Signal(signed(raw_bits))
    outs = []
    for fmt, out in pairs:
        at_max = Signal(signed(out.width))
        at_min = Signal(signed(out.width))
        outs.append((requant_less(m, raw, 5, fmt, out, -t, at_max, at_min), at_max, at_min, fmt, out))
    ts = np.arange(-(2 ** (w - 1)), 2 ** (w - 1))
    raws = np.arange(-(2 ** (raw_bits - 1)), 2 ** (raw_bits - 1))
    got = np.zeros((ts.size, raws.size, len(outs)), np.int64)

    async def bench(ctx):
        for a, tv in enumerate(ts):
            ctx.set(t, int(tv))
            for _, at_max, at_min, fmt, out in outs:
                wo, _, so, _, oo = out.code
                ctx.set(at_max, int(golden_overflow(np.int64(fmt.max_raw - tv), wo, so, oo)))
                ctx.set(at_min, int(golden_overflow(np.int64(fmt.min_raw - tv), wo, so, oo)))
            for b, r in enumerate(raws):
                ctx.set(raw, int(r))
                for n, (o, *_) in enumerate(outs):
                    got[a, b, n] = ctx.get(o)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for n, (_, _, _, fmt, out) in enumerate(outs):
        for b, r in enumerate(raws):
            pred = requant(np.int64(r), 5, *fmt.code)
            wo, _, so, _, oo = out.code
            want = np.array([golden_overflow(np.int64(pred - tv), wo, so, oo) for tv in ts])
            bad = np.nonzero(got[:, b, n] != want)[0]
            assert bad.size == 0, (f"{fmt} then {out}: t {ts[bad[0]]}, raw {r} gives {got[bad[0], b, n]}, "
                                   f"golden {want[bad[0]]}")
