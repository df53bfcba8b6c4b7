"""The RAM address arithmetic (onchip.hw.ram, the KAN coefficient banks of onchip.hw.coefmem), evaluated by Amaranth's simulator
against plain integer arithmetic."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from onchip.hw.coefmem import bank_address, by_bank, by_basis, split_cell
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
