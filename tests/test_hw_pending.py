"""The pending-update FIFO (:class:`onchip.hw.pending.PendingUpdates`) against a Python model.

Random push/pop sequences (every legal combination, including a push and a
pop in the same cycle on a full queue); in every cycle the outputs must equal
the model's: the head with fall-through, the level, and the head and level
after the coming edge.
"""

import gc
import random
from collections import deque

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from onchip.hw.pending import PendingUpdates


class PendingModel:
    """What :class:`PendingUpdates` promises, in Python."""

    def __init__(self, depth: int):
        self.depth = depth
        self.words = deque()

    def outputs(self, w_en: bool, w_data: int, r_en: bool) -> dict:
        after = deque(self.words)
        if r_en:
            after.popleft()
        if w_en:
            after.append(w_data)
        return {
            "r_data": self.words[0] if self.words else w_data,
            "level": len(self.words),
            "next_level": len(after),
            "next_data": after[0] if after else None,  # unspecified when the queue will be empty
        }

    def step(self, w_en: bool, w_data: int, r_en: bool) -> None:
        if r_en:
            assert self.words, "model: pop of an empty queue"
            self.words.popleft()
        if w_en:
            self.words.append(w_data)
            assert len(self.words) <= self.depth, "model: push into a full queue"


def random_ops(depth: int, width: int, n: int, seed: int):
    """(w_en, w_data, r_en) per cycle, legal for a queue of ``depth``: no pop when empty, no push
    when full unless the same cycle pops; biased so the queue runs empty and full often."""
    rng = random.Random(seed)
    level, ops = 0, []
    for _ in range(n):
        r_en = level > 0 and rng.random() < 0.5
        w_en = (level < depth or r_en) and rng.random() < 0.55
        ops.append((w_en, rng.getrandbits(width), r_en))
        level += w_en - r_en
    return ops


def with_stalls(ops, seed: int):
    """``ops`` as (en, w_en, w_data, r_en) cycles with random stalls (en low) before them: in a
    stall w_data holds (the next op's word, as the pipeline's stage-U registers hold) while w_en
    and r_en are random (they take no effect)."""
    rng = random.Random(seed)
    cycles = []
    for w_en, w_data, r_en in ops:
        while rng.random() < 0.4:
            cycles.append((False, rng.random() < 0.5, w_data, rng.random() < 0.5))
        cycles.append((True, w_en, w_data, r_en))
    return cycles


def simulate(depth: int, width: int, ops, registered: bool = False, stall_seed: int = 0, lookahead_bits: int = 0):
    """Run ``ops`` on the hardware and the model (registered: with random stalls,
    :func:`with_stalls`); returns the first mismatch (cycle, got, want), if any."""
    dut = PendingUpdates(width=width, depth=depth, registered=registered, lookahead_bits=lookahead_bits)
    model = PendingModel(depth)
    cycles = with_stalls(ops, stall_seed) if registered else [(True, *op) for op in ops]
    words = [w_data for _, w_data, _ in ops]
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    mismatches = []  # the first one stops the run

    async def testbench(ctx):
        n = 0  # advancing edges so far
        for cycle, (en, w_en, w_data, r_en) in enumerate(cycles):
            ctx.set(dut.w_en, w_en)
            ctx.set(dut.w_data, w_data)
            ctx.set(dut.r_en, r_en)
            if registered:  # the advance, and w_data as it will be after an advancing edge
                ctx.set(dut.en, en)
                ctx.set(dut.w_next, words[n + 1] if n + 1 < len(words) else 0)
            want = model.outputs(w_en and en, w_data, r_en and en)
            got = {name: ctx.get(getattr(dut, name)) for name in want}
            if want["next_data"] is None:
                got["next_data"] = None
            if registered and n == 0:  # a register: loaded from the first advancing edge on
                got["r_data"] = want["r_data"]
            if got != want:
                mismatches.append((cycle, got, want))
                return
            await ctx.tick()
            model.step(w_en and en, w_data, r_en and en)
            n += en

    sim.add_testbench(testbench)
    sim.run()
    return mismatches


@pytest.mark.parametrize("registered, lookahead_bits", [(False, 0), (True, 0), (True, 4)])
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 8])
def test_random_push_pop_matches_model(depth, registered, lookahead_bits):
    for seed in range(4):
        ops = random_ops(depth, width=9, n=400, seed=1000 * depth + seed)
        bad = simulate(depth, 9, ops, registered, stall_seed=seed, lookahead_bits=lookahead_bits)
        assert not bad, f"depth {depth}, seed {seed}: cycle {bad[0][0]}: hardware {bad[0][1]}, model {bad[0][2]}"


@pytest.mark.parametrize("registered", [False, True])
def test_fills_to_depth_and_drains_in_order(registered):
    depth = 4
    ops = [(True, 10 + n, False) for n in range(depth)]  # fill
    ops += [(True, 20 + n, True) for n in range(6)]      # full: push and pop together
    ops += [(False, 0, True) for _ in range(depth)]      # drain
    ops += [(True, 30, False), (False, 0, True)]           # one word through an empty queue
    assert not simulate(depth, 8, ops, registered)


@pytest.mark.parametrize("registered", [False, True])
def test_reset_empties_the_queue(registered):
    dut = PendingUpdates(width=4, depth=3, registered=registered)
    m = Module()
    m.domains.sync = cd = ClockDomain()
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(1e-6)

    async def testbench(ctx):
        if registered:  # every edge advances
            ctx.set(dut.en, 1)
        ctx.set(dut.w_en, 1)
        for v in (1, 2):
            ctx.set(dut.w_data, v)
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        assert ctx.get(dut.level) == 2 and ctx.get(dut.r_data) == 1
        ctx.set(dut.w_data, 7)
        # a synchronous reset of the domain: the queue is empty, r_data falls through
        ctx.set(cd.rst, 1)
        if registered:  # r_data is loaded at an edge: w_next, once the queue will be empty
            ctx.set(dut.w_next, 7)
            await ctx.tick()
        await ctx.tick()
        ctx.set(cd.rst, 0)
        assert ctx.get(dut.level) == 0 and ctx.get(dut.r_data) == 7

    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # the refused objects
@pytest.mark.parametrize("kwargs, error", [
    (dict(width=0, depth=2), ValueError),
    (dict(width=8, depth=0), ValueError),
    (dict(width=8, depth=2.0), TypeError),
    (dict(width=True, depth=2), TypeError),
    (dict(width=8, depth=2, registered=True, lookahead_bits=9), ValueError),
    (dict(width=8, depth=2, lookahead_bits=3), ValueError),  # a plain queue has no copy
])
def test_bad_arguments_are_refused_by_name(kwargs, error):
    name = "lookahead_bits" if "lookahead_bits" in kwargs else next(
        k for k, v in kwargs.items() if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1))
    with pytest.raises(error, match=f"PendingUpdates {name}") as refused:
        PendingUpdates(**kwargs)
    with pytest.raises(TypeError) as positional:
        PendingUpdates(8, 2)  # keyword-only
    del refused, positional  # the half-built objects go now, inside the warning filter
    gc.collect()
