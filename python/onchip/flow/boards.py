"""Board tops: a generated learner core fed and read through a UART, and the supported boards.

Stream protocol (8N1, :data:`DEFAULT_BAUD` baud, little-endian bytes):

* host -> board: one sample frame of ``ceil(S/8)`` bytes per sample, where S is
  the width of the core's ``s__payload`` (x[0], x[1], ..., y[0], ... raw
  two's complement, packed from bit 0, see ``Design.info["payload"]["s"]``);
  the top bits of the last byte above S are ignored;
* board -> host: one prediction frame of ``ceil(M/8)`` bytes per sample
  (``m__payload``: pred[0], ... from bit 0), in sample order, made before that
  sample's update (test-then-train).

A frame left incomplete for :attr:`UartStreamTop.timeout_bytes` byte times is
dropped, so a host that lost a byte resynchronizes by pausing. The parameter
port of the core is held idle (no commands; responses accepted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Elaboratable, Instance, Module, ResetSignal, Signal
from amaranth.lib import io

from .uart import UARTRx, UARTTx

#: Baud rate of the board tops (an FTDI or CH340 bridge handles it on every listed board).
DEFAULT_BAUD = 115_200


@dataclass(frozen=True)
class Board:
    """A supported board.

    Attributes:
        name: the ``--board`` name.
        module, cls: the ``amaranth_boards`` platform class.
        vendor: ``lattice`` (open flow here: Yosys + nextpnr) or ``xilinx`` (Vivado scripts).
        family: resource family (:data:`onchip.flow.yosys.FAMILIES`).
    """

    name: str
    module: str
    cls: str
    vendor: str
    family: str

    def platform(self):
        """A fresh platform instance."""
        import importlib

        return getattr(importlib.import_module(f"amaranth_boards.{self.module}"), self.cls)()


#: Boards with a UART resource in amaranth-boards (the OrangeCrab has none, so it is not listed).
BOARDS = {
    b.name: b
    for b in (
        Board("ulx3s-85f", "ulx3s", "ULX3S_85F_Platform", "lattice", "ecp5"),
        Board("ulx3s-45f", "ulx3s", "ULX3S_45F_Platform", "lattice", "ecp5"),
        Board("ulx3s-25f", "ulx3s", "ULX3S_25F_Platform", "lattice", "ecp5"),
        Board("icebreaker", "icebreaker", "ICEBreakerPlatform", "lattice", "ice40"),
        Board("arty-a7-35", "arty_a7", "ArtyA7_35Platform", "xilinx", "xc7"),
        Board("arty-a7-100", "arty_a7", "ArtyA7_100Platform", "xilinx", "xc7"),
    )
}


def get_board(name: str, vendor: str | None = None) -> Board:
    """The board called ``name``.

    Raises:
        ValueError: unknown name, or a board of another vendor than ``vendor``.
    """
    names = [n for n, b in BOARDS.items() if vendor is None or b.vendor == vendor]
    if name not in names:
        raise ValueError(f"board must be one of {', '.join(names)}; got {name!r}")
    return BOARDS[name]


def frame_bytes(width: int) -> int:
    """Bytes that carry a ``width``-bit payload."""
    return max(1, math.ceil(width / 8))


def sample_frames(spec, x_raw, y_raw, channel=None) -> list[bytes]:
    """What a host sends a board: one little-endian frame of ``ceil(S/8)`` bytes per sample.

    Args:
        spec: the learner's :class:`~onchip.spec.LearnerSpec`.
        x_raw, y_raw: (N, n_in) / (N, n_out) raw integers (``input`` / ``act`` formats).
        channel: (N,) channels 0 .. channels - 1 (a spec of N > 1 channels; the frame's ``channel`` field).

    Raises:
        ValueError: wrong shapes, raw values outside their formats, a bad channel.
    """
    from ..hw.interface import pack_samples, sample_layout

    n = frame_bytes(sample_layout(spec).size)
    return [word.to_bytes(n, "little") for word in pack_samples(spec, x_raw, y_raw, channel=channel)]


def prediction_frame_bytes(spec) -> int:
    """Bytes of one prediction frame the board sends back, ``ceil(M/8)``."""
    from ..hw.interface import prediction_layout

    return frame_bytes(prediction_layout(spec).size)


def read_predictions(spec, data: bytes) -> "np.ndarray":
    """Prediction frames received from a board -> (N, n_out) int64 raw predictions (``act``).

    Raises:
        ValueError: ``data`` is not a whole number of frames.
    """
    from ..hw.interface import unpack_predictions

    n = prediction_frame_bytes(spec)
    if len(data) % n:
        raise ValueError(f"data: {len(data)} bytes is not a whole number of {n}-byte prediction frames")
    words = [int.from_bytes(data[i : i + n], "little") for i in range(0, len(data), n)]
    return unpack_predictions(spec, words)


class UartStreamTop(Elaboratable):
    """Board top: UART bytes -> sample frames -> learner core -> prediction frames -> UART bytes.

    Args:
        ports: the core's ports, ``Design.info["ports"]`` (name -> {"dir", "width"}), with the
            stream ports ``s__*``, ``m__*``, ``pc__*``, ``pr__*`` of the RTL contract.
        module: the core's Verilog module name, instantiated as a black box.
        clk_freq: clock frequency in Hz.
        baud: UART baud rate.
        core: for simulation, a callable ``core(signals) -> Elaboratable`` that drives the
            core's outputs in ``signals`` (name -> Signal); default: a black-box
            :class:`~amaranth.hdl.Instance` of ``module``.
        timeout_bytes: idle byte times after which an incomplete frame is dropped.

    Attributes:
        rx, tx: the serial lines when no platform is given (simulation).

    Raises:
        ValueError: missing contract ports, or a clock too slow for the baud rate.
    """

    def __init__(self, ports: dict, module: str, clk_freq: float, baud: int = DEFAULT_BAUD, *,
                 core=None, timeout_bytes: int = 4):
        needed = ["s__valid", "s__ready", "s__payload", "m__valid", "m__ready", "m__payload",
                  "pc__valid", "pc__ready", "pc__payload", "pr__valid", "pr__ready", "pr__payload"]
        missing = [n for n in needed if n not in ports]
        self._MustUse__silence = True  # until validated: a rejected top is not an unused one
        if missing:
            raise ValueError(f"ports: the core lacks the contract port(s) {', '.join(missing)}")
        self.divisor = int(round(clk_freq / baud))
        if self.divisor < 4:
            raise ValueError(f"clk_freq {clk_freq} Hz is too slow for {baud} baud (need >= 4 clocks per bit)")
        self._MustUse__silence = False
        self.ports, self.module, self.core = ports, module, core
        self.timeout_bytes = timeout_bytes
        self.s_bytes = frame_bytes(ports["s__payload"]["width"])
        self.m_bytes = frame_bytes(ports["m__payload"]["width"])
        self.rx = Signal(init=1)
        self.tx = Signal(init=1)

    def elaborate(self, platform):
        m = Module()
        sig = {name: Signal(p["width"], name=f"core_{name}")
               for name, p in self.ports.items() if name not in ("clk", "rst")}
        # power-on reset of the core (some boards' clock domains have no reset), or the board's reset
        por = Signal(4, init=15)
        with m.If(por != 0):
            m.d.sync += por.eq(por - 1)
        core_rst = (por != 0) | ResetSignal(allow_reset_less=True)
        if self.core is None:
            kw = {("i_" if p["dir"] == "in" else "o_") + name: sig[name]
                  for name, p in self.ports.items() if name not in ("clk", "rst")}
            m.submodules.core = Instance(self.module, i_clk=ClockSignal(), i_rst=core_rst, **kw)
        else:
            m.submodules.core = self.core(sig)

        rx_line, tx_line = self.rx, self.tx
        if platform is not None:
            uart = platform.request("uart", 0, dir="-")
            m.submodules.rx_buffer = rx_buffer = io.Buffer("i", uart.rx)
            m.submodules.tx_buffer = tx_buffer = io.Buffer("o", uart.tx)
            rx_line, tx_line = rx_buffer.i, tx_buffer.o
        m.submodules.urx = urx = UARTRx(self.divisor)
        m.submodules.utx = utx = UARTTx(self.divisor)
        m.d.comb += [urx.rx.eq(rx_line), tx_line.eq(utx.tx)]
        # parameter port idle
        m.d.comb += [sig["pc__valid"].eq(0), sig["pc__payload"].eq(0), sig["pr__ready"].eq(1)]

        # sample frames: bytes shift in from the top, so the first byte ends at bits [7:0]
        sb = self.s_bytes
        shreg = Signal(8 * sb)
        count = Signal(range(sb + 1))
        idle = Signal(range(self.timeout_bytes * 10 * self.divisor + 1))
        payload = Signal(self.ports["s__payload"]["width"])
        pending = Signal()
        m.d.comb += [sig["s__valid"].eq(pending), sig["s__payload"].eq(payload)]
        with m.If(pending & sig["s__ready"]):
            m.d.sync += pending.eq(0)
        with m.If(urx.valid):
            word = (urx.data << (8 * (sb - 1))) | (shreg >> 8) if sb > 1 else urx.data
            m.d.sync += [shreg.eq(word), idle.eq(0)]
            with m.If(count == sb - 1):
                m.d.sync += [payload.eq(word), pending.eq(1), count.eq(0)]
            with m.Else():
                m.d.sync += count.eq(count + 1)
        with m.Elif(count != 0):
            m.d.sync += idle.eq(idle + 1)
            with m.If(idle == self.timeout_bytes * 10 * self.divisor):
                m.d.sync += [count.eq(0), idle.eq(0)]

        # prediction frames out, low byte first
        mb = self.m_bytes
        obuf = Signal(8 * mb)
        left = Signal(range(mb + 1))
        m.d.comb += [sig["m__ready"].eq(left == 0), utx.valid.eq(left != 0), utx.data.eq(obuf[:8])]
        with m.If((left == 0) & sig["m__valid"]):
            m.d.sync += [obuf.eq(sig["m__payload"]), left.eq(mb)]
        with m.Elif(utx.valid & utx.ready):
            m.d.sync += [obuf.eq(obuf >> 8), left.eq(left - 1)]
        return m


#: Module name of the board top in the build plans (``platform.build(top, name="top")``).
BOARD_TOP = "top"


def check_board_top(top: str) -> str:
    """``top`` if it can name a core inside the board top (:func:`onchip.hw.names.check_top`, and not
    :data:`BOARD_TOP`, which would name two modules alike).

    Raises:
        ValueError: a bad name; the message starts with ``--top`` and the value.
    """
    from ..hw.names import check_top

    if check_top(top) == BOARD_TOP:
        raise ValueError(f"--top {top!r}: the board flow names its own top module {BOARD_TOP}; choose another name")
    return top


def board_top(design, board: Board, baud: int = DEFAULT_BAUD):
    """(platform, top) for ``design`` on ``board``; the core's Verilog is added to the platform.

    Raises:
        ValueError: see :class:`UartStreamTop`; a core named :data:`BOARD_TOP`.
    """
    check_board_top(design.top)
    platform = board.platform()
    clk = platform.lookup(platform.default_clk).clock.frequency
    platform.add_file(f"{design.top}.v", design.verilog)
    return platform, UartStreamTop(design.info["ports"], design.top, clk, baud)
