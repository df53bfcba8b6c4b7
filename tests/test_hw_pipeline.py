"""Pipe bookkeeping: :meth:`Pipe.before` gives the expression a stage register is loaded from."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from onchip.hw.pipeline import Pipe


def test_before_is_the_value_one_stage_earlier():
    m = Module()
    en = Signal(init=1)
    x = Signal(8)
    pipe = Pipe(m, en)
    s1 = pipe.reg(x + 1, 0, "x_s1")
    s3 = pipe.at(s1, 3)  # through two delay registers
    early = pipe.before(s3)  # what stage 3's register is loaded from: the sample's value at stage 2
    pipe.finalize()
    seen = []

    async def bench(ctx):
        for n in range(6):
            ctx.set(x, 10 * n)
            seen.append((ctx.get(early), ctx.get(s3)))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # stage 3 shows the sample accepted 3 cycles ago; its input shows the one accepted 2 cycles ago
    for n in range(3, 6):
        assert seen[n][1] == 10 * (n - 3) + 1 and seen[n][0] == 10 * (n - 2) + 1


def test_before_refuses_a_value_that_is_no_stage_register():
    m = Module()
    pipe = Pipe(m, Signal())
    pipe.reg(Signal(4), 0, "r_s1")
    with pytest.raises(ValueError, match="not a register of this pipeline"):
        pipe.before(Signal(4, name="loose"))
    pipe.finalize()
    Simulator(m)  # elaborated: no unused-module warning
