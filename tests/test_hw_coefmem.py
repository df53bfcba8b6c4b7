"""The RAM address arithmetic (onchip.hw.ram, the KAN coefficient banks of onchip.hw.coefmem), evaluated by Amaranth's simulator
against plain integer arithmetic."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from onchip.hw.coefmem import bank_address, by_bank, by_basis, split_cell, write_behind_ports
from onchip.hw.ram import div_constants, div_const, ram_style


def evaluate(m, inputs, outputs, cases):
    """Values of ``outputs`` for each tuple of input values in ``cases`` (combinational)."""
    got = []

    async def bench(ctx):
        for case in cases:
            for sig, v in zip(inputs, case):
                ctx.set(sig, v)
            got.append(tuple(ctx.get(o) for o in outputs))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("d, x_max", [(3, 200), (5, 134), (7, 1000), (67, 2 * 67 - 1), (11, 4095), (4, 63)])
def test_div_const_is_floor_division(d, x_max):
    m = Module()
    x = Signal(range(x_max + 1))
    y = Signal(16)
    m.d.comb += y.eq(div_const(x, d, x_max))
    cases = [(v,) for v in range(x_max + 1)]
    assert [g[0] for g in evaluate(m, [x], [y], cases)] == [v // d for v in range(x_max + 1)]


@pytest.mark.parametrize("d, x_max", [(1, 7), (3, 3000), (64, 4095), (7, 2100), (10, 6 * 64 * 64)])
def test_div_constants_hold_over_the_range(d, x_max):
    mult, s = div_constants(d, x_max)
    x = np.arange(x_max + 1, dtype=np.int64)
    np.testing.assert_array_equal((x * mult) >> s, x // d)


def test_div_const_refuses_bad_divisor():
    with pytest.raises(ValueError, match="d=0"):
        div_const(Signal(4), 0, 15)


def test_ram_style_by_size():
    assert ram_style(17, 16) == "distributed" and ram_style(1024, 16) == "block"


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("grid_size", [4, 5, 8, 13])
def test_active_coefficients_fall_in_distinct_banks(k, grid_size):
    """For every cell c, coefficient c + mm is read from bank (c + mm) mod (k+1) at address
    (c + mm) div (k+1), and per-basis values land on the bank that holds their coefficient."""
    k1 = k + 1
    m = Module()
    cell = Signal(range(max(2, grid_size)))
    hi, lo = split_cell(m, cell, k1, grid_size, "t")
    # bank b's word is b * 100 + its address: by_basis must hand back the coefficient index's word
    addr = [Signal(8, name=f"a{b}") for b in range(k1)]
    for b in range(k1):
        m.d.comb += addr[b].eq(bank_address(hi, lo, b))
    words = [b * 100 + addr[b] for b in range(k1)]
    picked = [Signal(16, name=f"p{mm}") for mm in range(k1)]
    basis = [Signal(8, name=f"v{mm}") for mm in range(k1)]
    routed = [Signal(8, name=f"r{b}") for b in range(k1)]
    for mm, (p, r) in enumerate(zip(by_basis(words, lo), by_bank(basis, lo))):
        m.d.comb += [picked[mm].eq(p), routed[mm].eq(r)]
    cases = [(c, *range(50, 50 + k1)) for c in range(grid_size)]
    got = evaluate(m, [cell, *basis], [*addr, *picked, *routed], cases)
    for c, row in zip(range(grid_size), got):
        addrs, picks, routes = row[:k1], row[k1 : 2 * k1], row[2 * k1 :]
        for mm in range(k1):
            q = c + mm
            assert addrs[q % k1] == q // k1
            assert picks[mm] == (q % k1) * 100 + q // k1
            assert routes[q % k1] == 50 + mm


def test_a_bank_written_behind_reads_as_a_plain_transparent_bank_every_cycle():
    """write_behind_ports against Amaranth's own write port and transparent read ports on a copy of the
    memory, every cycle of a random drive: reads of the address written in the same cycle and in
    the cycle before, back-to-back writes of one address, read enables low (the word held while
    the RAM changes under it), write enable low with data on the port."""
    m = Module()
    plain, behind = (Memory(shape=8, depth=4, init=[11, 22, 33, 44]) for _ in range(2))
    m.submodules.plain, m.submodules.behind = plain, behind
    wp = plain.write_port()
    want = [plain.read_port(transparent_for=(wp,)) for _ in range(2)]
    write, got = write_behind_ports(m, behind, 2, "t")
    rng = np.random.default_rng(3)
    drive = rng.integers(0, 4, size=(4000, 7))  # 2 read addrs, write addr, data, write en, 2 read ens
    seen = []

    async def bench(ctx):
        for r0, r1, waddr, data, wen, e0, e1 in drive:
            for port in (wp, write):
                ctx.set(port.addr, int(waddr)), ctx.set(port.data, int(data) * 60 + int(waddr))
                ctx.set(port.en, int(wen < 2))
            for n, (addr, en) in enumerate(((r0, e0), (r1, e1))):
                for port in (want[n], got[n]):  # each read held one cycle in four
                    ctx.set(port.addr, int(addr)), ctx.set(port.en, int(en != 0))
            await ctx.tick()
            seen.append([(ctx.get(w.data), ctx.get(g.data)) for w, g in zip(want, got)])

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    bad = [(t, n) for t, pair in enumerate(seen) for n, (w, g) in enumerate(pair) if w != g]
    assert not bad, (f"cycle {bad[0][0]}, read {bad[0][1]}: transparent port {seen[bad[0][0]][bad[0][1]][0]}, "
                     f"written behind {seen[bad[0][0]][bad[0][1]][1]} ({len(bad)} differ)")
    # the drive exercises the cases: a read of the address written that cycle, and the cycle before
    now = sum(1 for r0, _, w, _, we, e0, _ in drive if r0 == w and we < 2 and e0)
    before = sum(1 for (r0, _, _, _, _, e0, _), (_, _, w, _, we, _, _) in zip(drive[1:], drive)
                 if r0 == w and we < 2 and e0)
    assert now > 200 and before > 200
