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

With ``write_behind`` (:class:`EdgeBanks`, a LUT RAM bank) the RAM is written one
cycle after the write port is driven, from registers (:func:`write_behind_ports`), and
each read is answered as if written at once: the RAM's read, transparent to the
registered write, and a register of the write's word chosen after the read
register when the addresses matched. The same words every cycle; the commit's
new coefficient then ends at registers beside its carry chain, not at the RAM
and its read multiplexers.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal, Value
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


def write_behind_ports(m: Module, mem: Memory, reads: int,
                       name: str) -> tuple[SimpleNamespace, list[SimpleNamespace]]:
    """A write port and ``reads`` synchronous read ports of ``mem``, each read transparent to the write,
    with the RAM written one cycle late from registers: cycle for cycle the words that
    ``mem.write_port()`` and ``mem.read_port(transparent_for=(write,))`` give, enable and hold
    included, and the word being written reaches only registers in its cycle.

    A read at cycle t returns, at t + 1, the word the write of cycle t writes there (a register of
    the address match and one of the word, chosen after the read register), else the RAM's word
    read transparent to the RAM write of cycle t, which is the port's write of cycle t - 1. The
    registers added here are, like a read port's data register, not reset, so a write driven in
    the cycle of a reset still lands, as it does on a plain port.

    Args:
        m: module receiving the registers. mem: the memory (no other port on it). reads: read ports.
        name: prefix of the registers' names (``<name>_w{addr,data,en}``: the write one cycle late;
            ``<name>_r<n>_{fwd,word}``: read n's address match and the word then written).

    Returns:
        ``(write, reads)``: the write's ``addr``, ``data``, ``en`` and each read's ``addr``, ``en``
        (the caller drives them all) and ``data`` (the word read).
    """
    wp = mem.write_port()
    write = SimpleNamespace(addr=Signal.like(wp.addr, name=f"{name}_addr"),
                            data=Signal.like(wp.data, name=f"{name}_data"), en=Signal(name=f"{name}_en"))
    late = [Signal.like(getattr(wp, f), name=f"{name}_w{f}", reset_less=True) for f in ("addr", "data", "en")]
    m.d.sync += [late[0].eq(write.addr), late[1].eq(write.data), late[2].eq(write.en)]
    m.d.comb += [wp.addr.eq(late[0]), wp.data.eq(late[1]), wp.en.eq(late[2])]
    ports = []
    for n in range(reads):
        port = mem.read_port(transparent_for=(wp,))  # sees the write of the cycle before
        hit = Signal(name=f"{name}_r{n}_fwd", reset_less=True)
        word = Signal.like(write.data, name=f"{name}_r{n}_word", reset_less=True)
        with m.If(port.en):
            m.d.sync += [hit.eq(write.en & (write.addr == port.addr)), word.eq(write.data)]
        data = Signal.like(port.data, name=f"{name}_r{n}_data")
        m.d.comb += data.eq(Mux(hit, word, port.data))
        ports.append(SimpleNamespace(addr=port.addr, en=port.en, data=data))
    return write, ports


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
        write_behind: a LUT RAM bank written one cycle late from registers, its reads answered as
            if written at once (:func:`write_behind_ports`: the same words); a block RAM bank keeps the
            RAM's own ports.
    """

    def __init__(self, m: Module, coefs: list[int] | None, k1: int, fmt: Fmt, name: str,
                 channels: list[list[int]] | None = None, write_behind: bool = False):
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
            style = bank_style(depth, fmt.width, len(per))
            mem = Memory(shape=fmt_shape(fmt), depth=depth, init=init, attrs={"ram_style": style})
            m.submodules[f"{name}_bank{b}"] = mem
            if write_behind and style == "distributed":
                wp, (read, rmw) = write_behind_ports(m, mem, 2, f"{name}_bank{b}")
                self.write.append(wp), self.read.append(read), self.rmw.append(rmw)
                continue
            wp = mem.write_port()
            self.write.append(wp)
            self.read.append(mem.read_port(transparent_for=(wp,)))
            self.rmw.append(mem.read_port(transparent_for=(wp,)))
