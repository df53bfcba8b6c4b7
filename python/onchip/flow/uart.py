"""A minimal 8N1 UART receiver and transmitter in Amaranth 0.5 (for the board tops).

Standard asynchronous serial framing (TIA-232 / "8N1"): an idle-high line, one
low start bit, 8 data bits least significant first, one high stop bit, each
bit ``divisor`` clock cycles long (divisor = clock frequency / baud rate).
"""


from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out


def _check_divisor(obj, divisor) -> int:
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 2:
        obj._MustUse__silence = True  # a rejected component is not an unused one
        raise ValueError(f"divisor (clock cycles per bit) must be an integer >= 2, got {divisor!r}")
    return divisor


class UARTRx(wiring.Component):
    """8N1 receiver.

    Ports:
        rx: In(1) serial line (idle high); synchronized by two flip-flops inside.
        data: Out(8) the last received byte.
        valid: Out(1) high for one cycle when ``data`` holds a new byte (stop bit seen high).

    Args:
        divisor: clock cycles per bit (>= 2). The line is sampled in the middle of each bit.

    Raises:
        ValueError: bad divisor.
    """

    rx: In(1, init=1)
    data: Out(8)
    valid: Out(1)

    def __init__(self, divisor: int):
        self.divisor = _check_divisor(self, divisor)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(self.divisor))
        bits = Signal(range(9))
        shreg = Signal(8)
        m.d.sync += self.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(self.divisor // 2)
                    m.next = "START"
            with m.State("START"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(self.divisor - 1), bits.eq(0)]
                    with m.If(rx):  # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(self.divisor - 1), shreg.eq((shreg >> 1) | (rx << 7)),
                                 bits.eq(bits + 1)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    with m.If(rx):
                        m.d.sync += [self.data.eq(shreg), self.valid.eq(1)]
                    m.next = "IDLE"
        return m


class UARTTx(wiring.Component):
    """8N1 transmitter.

    Ports:
        data: In(8) byte to send, taken when ``valid`` and ``ready`` are both high.
        valid: In(1) a byte is offered.
        ready: Out(1) the transmitter is idle and takes the byte this cycle.
        tx: Out(1) serial line (idle high).

    Args:
        divisor: clock cycles per bit (>= 2).

    Raises:
        ValueError: bad divisor.
    """

    data: In(8)
    valid: In(1)
    ready: Out(1)
    tx: Out(1, init=1)

    def __init__(self, divisor: int):
        self.divisor = _check_divisor(self, divisor)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        frame = Signal(10, init=0x3FF)  # stop, data[7:0], start, shifted out LSB first
        left = Signal(range(11))
        m.d.comb += [self.ready.eq(left == 0), self.tx.eq(frame[0])]
        with m.If(left == 0):
            with m.If(self.valid):
                m.d.sync += [frame.eq((1 << 9) | (self.data << 1)), left.eq(10),
                             timer.eq(self.divisor - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
            with m.If(timer == 0):
                m.d.sync += [frame.eq((frame >> 1) | (1 << 9)), left.eq(left - 1),
                             timer.eq(self.divisor - 1)]
        return m
