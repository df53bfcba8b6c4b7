"""Coefficient memory of a KAN layer: k+1 RAM banks per edge.

A B-spline edge of G + k coefficients reads, and on update writes back, the
k+1 consecutive coefficients c..c+k of the input's cell c (the sparse update;
Liu et al., "KAN: Kolmogorov-Arnold Networks", 2024, Sec. 2.2: only k+1 basis
functions are non-zero in a cell). Coefficient q lives in bank q mod (k+1) at
address q div (k+1), so those k+1 coefficients fall in k+1 different banks,
each at address ``c div (k+1) + (b < c mod (k+1))``: every bank is read once
per sample and written once per update, a plain RAM with no multiplexer over
the G + k coefficients. The RAM kind is chosen by size (:func:`ram_style`):
distributed RAM (LUTRAM) for banks below :data:`onchip.hw.ram.BLOCK_RAM_BITS`,
block RAM above, told to the synthesis tool by the ``ram_style`` attribute (Yosys and
Vivado both read it), so even the smallest banks are RAM, not flip-flops.

Reads are synchronous and transparent to the bank's write port: a read whose
address is presented in cycle t returns the word as written by the edge that
ends cycle t, which is what a register read in cycle t + 1 returns. So a
synchronous RAM keeps the pipeline's read-before-write timing unchanged.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Signal, Value
from amaranth.lib.memory import Memory

from ..fixed import Fmt
from .fixedpoint import fmt_shape
from .ram import bank_style


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


def channel_address(word: Value, channel: Value | None, span: int) -> Value:
    """RAM address of ``word`` (< ``span``, a power of two) in the range of ``channel``: the channel
    above the word's bits; ``word`` itself when there is one channel (``channel`` None)."""
    if channel is None:
        return word
    return Cat(word[: (span - 1).bit_length()], channel)


class EdgeBanks:
    """The k+1 banks of one edge, each a :class:`amaranth.lib.memory.Memory` of
    ceil((G + k) / (k+1)) words in the coefficient format.

    Ports per bank: ``read`` (the forward read and parameter read-back), ``rmw``
    (the commit's read of the current coefficients) and ``write``; both reads
    transparent to the write.

    With N channels (``channels``: one list of G + k coefficients per channel) a bank holds N
    such word ranges, each padded to a power of two, so an address is (channel, word) as bit
    fields: :func:`channel_address`.

    Args:
        m: module receiving the memories.
        coefs: the edge's G + k initial raw coefficients (memory contents at configuration).
        k1: k + 1. fmt: coefficient format. name: prefix of the memories' names.
        channels: the initial coefficients of every channel (N lists), instead of ``coefs``.
    """

    def __init__(self, m: Module, coefs: list[int] | None, k1: int, fmt: Fmt, name: str,
                 channels: list[list[int]] | None = None):
        per = [coefs] if channels is None else channels
        n = len(per[0])
        self.depth = -(-n // k1)
        # one channel: depth words; N channels: a power-of-two range each
        self.span = self.depth if channels is None else 1 << (self.depth - 1).bit_length()
        depth = self.span * len(per)
        self.read, self.rmw, self.write = [], [], []
        for b in range(k1):
            init = []
            for ch in per:
                words = [int(ch[q]) for q in range(b, n, k1)]
                init += words + [0] * (self.span - len(words))
            mem = Memory(shape=fmt_shape(fmt), depth=depth, init=init,
                         attrs={"ram_style": bank_style(depth, fmt.width, len(per))})
            m.submodules[f"{name}_bank{b}"] = mem
            wp = mem.write_port()
            self.write.append(wp)
            self.read.append(mem.read_port(transparent_for=(wp,)))
            self.rmw.append(mem.read_port(transparent_for=(wp,)))
