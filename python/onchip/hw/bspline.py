"""B-spline unit: cell index, clamp flag and the k+1 basis values and derivatives of one KAN input.

Uniform B-splines of order k on G cells of width h = 2**e (Liu et al.,
"KAN: Kolmogorov-Arnold Networks", 2024, Sec. 2.2): the cell index and the
position inside the cell are bit fields of the input offset, and the k+1
non-zero basis values and their derivatives come from one ROM addressed by
the top T bits of the position (:func:`onchip.model.basis.basis_table`).
Same arithmetic as the forward part of :func:`onchip.model.kernels.kan_step`.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from ..fixed import Fmt
from .fixedpoint import as_signed, fmt_shape


class BSplineUnit(wiring.Component):
    """Cell lookup and basis table of one KAN edge input (combinational).

    Ports:
        u: In(input format), the raw input.
        cell: Out(unsigned(ceil(log2 G))), cell index c of the clamped input.
        clamped: Out(1), the input lay outside [lo, hi - lsb] and was clamped.
        bval: Out(ArrayLayout(basis shape, k+1)), ``bval[m]`` the basis value of coefficient c+m.
        bder: Out(ArrayLayout(basis shape, k+1)), ``bder[m]`` its derivative d/dt (cell units).

    With ``split`` the unit is cut in two stages: ``pos`` (the clamped offset of ``u`` from the grid
    start) is an output, and the cell index and the table lookup take ``pos_in`` (the caller's
    register of ``pos``) instead; ``clamped`` stays with ``pos``.

    With ``logic_rom`` the basis table is built from logic, never a block RAM (``rom_style``
    ``"logic"``, read by Yosys and Vivado): a block RAM's clock-to-output delay (ECP5 DP16KD, no
    output register) before the bank-order multiplexer limited fmax at ``timing = "fast"``
    (measured with nextpnr-ecp5, sweeps/timing).

    Args:
        in_fmt: format of ``u``.
        lo_raw: grid start in raw units of ``in_fmt``.
        pos_bits: P, bits of position inside a cell (F_in + e).
        grid_size: G. table_bits: T.
        bval, bder: (2**T, k+1) raw tables in ``basis_fmt``.
        split: cut after the clamp (ports ``pos`` and ``pos_in``), for ``timing = "fast"``.
        logic_rom: the basis table in logic, for ``timing = "fast"``.

    Raises:
        ValueError: table shapes that do not match ``table_bits``.
    """

    def __init__(self, in_fmt: Fmt, lo_raw: int, pos_bits: int, grid_size: int, table_bits: int,
                 bval, bder, basis_fmt: Fmt, split: bool = False, logic_rom: bool = False):
        if bval.shape != bder.shape or bval.shape[0] != 2**table_bits:
            raise ValueError(
                f"bval/bder must both have shape ({2**table_bits}, k+1), got {bval.shape} and {bder.shape}"
            )
        self.in_fmt, self.lo_raw, self.pos_bits = in_fmt, int(lo_raw), int(pos_bits)
        self.grid_size, self.table_bits = int(grid_size), int(table_bits)
        self.k1 = bval.shape[1]
        self.basis_fmt = basis_fmt
        self.bval_table, self.bder_table = bval, bder
        self.cell_bits = max(1, (self.grid_size - 1).bit_length())
        wb = fmt_shape(basis_fmt)
        self.split, self.logic_rom = split, logic_rom
        pos = unsigned(((self.grid_size << self.pos_bits) - 1).bit_length())
        super().__init__({
            "u": In(fmt_shape(in_fmt)),
            **({"pos": Out(pos), "pos_in": In(pos)} if split else {}),
            "cell": Out(unsigned(self.cell_bits)),
            "clamped": Out(1),
            "bval": Out(data.ArrayLayout(wb, self.k1)),
            "bder": Out(data.ArrayLayout(wb, self.k1)),
        })

    def elaborate(self, platform):
        m = Module()
        p, t, g = self.pos_bits, self.table_bits, self.grid_size
        span = g << p
        v = Signal(signed(max(self.in_fmt.width, (span - 1).bit_length()) + 2))
        m.d.comb += v.eq(as_signed(self.u) - self.lo_raw)
        vc = Signal(unsigned((span - 1).bit_length()))
        m.d.comb += [
            self.clamped.eq((v < 0) | (v >= span)),
            vc.eq(Mux(v < 0, 0, Mux(v >= span, span - 1, v))),
        ]
        if self.split:
            m.d.comb += self.pos.eq(vc)
            vc = self.pos_in
        m.d.comb += self.cell.eq(vc >> p)
        # ROM entry a: bval[a, 0..k] then bder[a, 0..k], lowest first
        entry = data.StructLayout({"bval": self.bval.shape(), "bder": self.bder.shape()})
        init = [entry.const({"bval": [int(v) for v in self.bval_table[a]],
                             "bder": [int(v) for v in self.bder_table[a]]}).as_bits() for a in range(2**t)]
        attrs = {"rom_style": "logic", "ram_style": "logic"} if self.logic_rom else None
        m.submodules.rom = rom = memory.Memory(shape=unsigned(entry.size), depth=2**t, init=init, attrs=attrs)
        rd = rom.read_port(domain="comb")
        m.d.comb += rd.addr.eq(vc[p - t : p])
        word = entry(rd.data)
        m.d.comb += [self.bval.eq(word.bval), self.bder.eq(word.bder)]
        return m
