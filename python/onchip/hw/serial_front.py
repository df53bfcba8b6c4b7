"""What the serial datapaths share: the front of a sequencer that takes one sample or one command at a time.

:class:`~onchip.hw.mlp_serial.SerialMlpLearner` and :class:`~onchip.hw.kan_serial.SerialKanLearner`
step through a sample's passes one layer at a time and are idle in between. Both take a sample
only when idle and no command waits, a command only when idle with the last prediction taken
(as the parallel datapath does), and write their RAMs through one parameter bus that carries
the reload from ROM after reset or a command's write.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, Value, unsigned

from .fixedpoint import fmt_shape
from .interface import LearnerPorts, Reload, reload_from_rom


@dataclass(frozen=True)
class SerialFront:
    """The signals :func:`serial_front` builds.

    Attributes:
        xs: the sample's inputs as offered (n_in payload fields; the caller registers them).
        ys, kind: the sample's targets and kind, registered when it is accepted.
        accept: a sample is accepted this cycle.
        execute: a parameter command is taken this cycle.
        cmd_data, cmd_write: the command's word and write flag.
        reload: the reload from ROM after reset (:func:`~onchip.hw.interface.reload_from_rom`).
        bus_addr, bus_data, bus_we: the parameter write bus (flat address of
            :func:`onchip.model.golden.layout`, coefficient word, write enable): a reload word
            or a command's write.
    """

    xs: list
    ys: list
    kind: Value
    accept: Value
    execute: Value
    cmd_data: Value
    cmd_write: Value
    reload: Reload
    bus_addr: Value
    bus_data: Value
    bus_we: Value


def serial_front(m: Module, learner: LearnerPorts, idle: Value) -> SerialFront:
    """Build the sample and command handshakes and the parameter bus of a serial learner into
    ``m``; ``idle``: the sequencer is idle (and the reload done)."""
    f = learner.spec.formats
    xs, ys_in, kind_in = learner.sample_fields()
    ys = [Signal(v.shape(), name=f"y{j}", reset_less=True) for j, v in enumerate(ys_in)]
    kind = Signal.like(kind_in, name="kind", reset_less=True)
    accept = Signal(name="accept")
    m.d.comb += [
        learner.s.ready.eq(idle & ~learner.pc.valid),
        accept.eq(learner.s.valid & learner.s.ready),
    ]
    with m.If(accept):
        m.d.sync += [y.eq(v) for y, v in zip(ys, ys_in)] + [kind.eq(kind_in)]

    cmd_data, cmd_addr, cmd_write = learner.command_fields()
    execute = Signal(name="execute")
    m.d.comb += [
        # a command waits for the last prediction to be taken, as on the parallel datapath
        execute.eq(idle & ~learner.m.valid & learner.pc.valid & (~learner.pr.valid | learner.pr.ready)),
        learner.pc.ready.eq(execute),
    ]
    reload = reload_from_rom(m, learner.theta0, f.coef)
    bus_addr = Signal(unsigned(learner.addr_width), name="bus_addr")
    bus_data = Signal(fmt_shape(f.coef), name="bus_data")
    bus_we = Signal(name="bus_we")
    m.d.comb += [
        bus_addr.eq(Mux(reload.write, reload.addr, cmd_addr)),
        bus_data.eq(Mux(reload.write, reload.data, cmd_data)),
        bus_we.eq(reload.write | (execute & cmd_write)),
    ]
    return SerialFront(xs, ys, kind, accept, execute, cmd_data, cmd_write, reload, bus_addr, bus_data, bus_we)
