"""The hardware rounding helpers (requant, and requant_by_carry of timing = "fast") equal onchip.fixed.requant
for every quantization and overflow mode."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from onchip.fixed import OVERFLOW_MODES, QUANT_MODES, Fmt, requant
from onchip.hw.fixedpoint import requant as hw_requant
from onchip.hw.fixedpoint import requant_by_carry

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


@pytest.mark.parametrize("build", [hw_requant, requant_by_carry], ids=["requant", "requant_by_carry"])
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
