"""Coefficient memory of a KAN layer: k+1 RAM banks per edge.

A B-spline edge of G + k coefficients reads, and on update writes back, the
k+1 consecutive coefficients c..c+k of the input's cell c (the sparse update;
Liu et al., "KAN: Kolmogorov-Arnold Networks", 2024, Sec. 2.2: only k+1 basis
functions are non-zero in a cell). Coefficient q lives in bank q mod (k+1) at
address q div (k+1), so those k+1 coefficients fall in k+1 different banks,
each at address ``c div (k+1) + (b < c mod (k+1))``: every bank is read once
per sample and written once per update, a plain RAM with no multiplexer over
the G + k coefficients. The RAM kind is chosen by size (:func:`ram_style`):
distributed RAM (LUTRAM) for banks below :data:`BLOCK_RAM_BITS`, block RAM
above, told to the synthesis tool by the ``ram_style`` attribute (Yosys and
Vivado both read it), so even the smallest banks are RAM, not flip-flops.

Reads are synchronous and transparent to the bank's write port: a read whose
address is presented in cycle t returns the word as written by the edge that
ends cycle t, which is what a register read in cycle t + 1 returns. So a
synchronous RAM keeps the pipeline's read-before-write timing unchanged.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Signal, Value
from amaranth.lib.memory import Memory

from ..fixed import Fmt
from .fixedpoint import fmt_shape


#: bank size (bits) from which a bank goes to block RAM: half a RAMB18 (UltraScale+) / one
#: EBR (ECP5, 18 Kbit); below it a block would sit mostly empty
BLOCK_RAM_BITS = 9 * 1024


def ram_style(depth: int, width: int) -> str:
    """``"block"`` for memories of at least :data:`BLOCK_RAM_BITS` bits, else ``"distributed"``."""
    return "block" if depth * width >= BLOCK_RAM_BITS else "distributed"


def div_const(x: Value, d: int, x_max: int) -> Value:
    """floor(x / d) for 0 <= x <= x_max by a constant d >= 1, without a divider.

    Powers of two are a shift; otherwise x * ceil(2**s / d) >> s with s = bits(x_max) +
    bits(d), which is exact on that range (Granlund & Montgomery, "Division by invariant
    integers using multiplication", PLDI 1994, Sec. 4); checked here over the whole range.

    Raises:
        ValueError: d < 1 or x_max < 0.
    """
    if d < 1 or x_max < 0:
        raise ValueError(f"div_const needs d >= 1 and x_max >= 0, got d={d}, x_max={x_max}")
    if d & (d - 1) == 0:
        return x >> (d.bit_length() - 1)
    s = x_max.bit_length() + d.bit_length()
    mult = -(-(1 << s) // d)
    bad = [v for v in range(x_max + 1) if (v * mult) >> s != v // d]
    assert not bad, f"div_const({d}): multiplier {mult} >> {s} wrong at {bad[:3]}"
    return (x * mult) >> s


def split_cell(m: Module, cell: Value, k1: int, grid_size: int, name: str) -> tuple[Value, Value]:
    """(c div k1, c mod k1) of a cell index 0 <= c < G: bit fields when k1 is a power of two,
    else a G-entry table (k = 2)."""
    if k1 & (k1 - 1) == 0:
        s = k1.bit_length() - 1
        return cell >> s, cell[:s]
    hi = Signal(range(max(2, (grid_size - 1) // k1 + 1)), name=f"{name}_hi")
    lo = Signal(range(k1), name=f"{name}_lo")
    with m.Switch(cell):
        for c in range(grid_size):
            with m.Case(c):
                m.d.comb += [hi.eq(c // k1), lo.eq(c % k1)]
    return hi, lo


def bank_address(hi: Value, lo: Value, b: int) -> Value:
    """Address in bank b of the coefficient of cell (hi, lo) that lives there."""
    return hi + (lo > b)


def by_basis(values: list[Value], lo: Value) -> list[Value]:
    """Bank words reordered by basis index: element mm is bank (lo + mm) mod k1."""
    k1 = len(values)
    return [Array([values[(v + mm) % k1] for v in range(k1)])[lo] for mm in range(k1)]


def by_bank(values: list[Value], lo: Value) -> list[Value]:
    """Per-basis values reordered by bank: element b is basis index (b - lo) mod k1."""
    k1 = len(values)
    return [Array([values[(b - v) % k1] for v in range(k1)])[lo] for b in range(k1)]


class EdgeBanks:
    """The k+1 banks of one edge, each a :class:`amaranth.lib.memory.Memory` of
    ceil((G + k) / (k+1)) words in the coefficient format.

    Ports per bank: ``read`` (the forward read and parameter read-back), ``rmw``
    (the commit's read of the current coefficients) and ``write``; both reads
    transparent to the write.

    Args:
        m: module receiving the memories.
        coefs: the edge's G + k initial raw coefficients (memory contents at configuration).
        k1: k + 1. fmt: coefficient format. name: prefix of the memories' names.
    """

    def __init__(self, m: Module, coefs: list[int], k1: int, fmt: Fmt, name: str):
        n = len(coefs)
        self.depth = -(-n // k1)
        self.read, self.rmw, self.write = [], [], []
        for b in range(k1):
            init = [int(coefs[q]) for q in range(b, n, k1)]
            init += [0] * (self.depth - len(init))
            mem = Memory(shape=fmt_shape(fmt), depth=self.depth, init=init,
                         attrs={"ram_style": ram_style(self.depth, fmt.width)})
            m.submodules[f"{name}_bank{b}"] = mem
            wp = mem.write_port()
            self.write.append(wp)
            self.read.append(mem.read_port(transparent_for=(wp,)))
            self.rmw.append(mem.read_port(transparent_for=(wp,)))
