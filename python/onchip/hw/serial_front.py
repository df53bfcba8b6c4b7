"""What the serial datapaths share: a sequencer that takes one sample or one command at a time.

:class:`~onchip.hw.mlp_serial.SerialMlpLearner` and :class:`~onchip.hw.kan_serial.SerialKanLearner`
step through a sample's passes one layer at a time and are idle in between. Both take a sample
only when idle and no command waits, a command only when idle with the last prediction taken
(as the parallel datapath does), and write their RAMs through one parameter bus that carries
the reload from ROM after reset or a command's write.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, Value, unsigned

from ..spec import LearnerSpec
from .fixedpoint import fmt_shape
from .interface import LearnerPorts, Reload, reload_from_rom


class SerialLearner(LearnerPorts):
    """What :class:`~onchip.hw.mlp_serial.SerialMlpLearner` and
    :class:`~onchip.hw.kan_serial.SerialKanLearner` share: a sequential schedule of one sample at
    a time, parameters in RAM reloaded after reset, and the schedule's attributes.

    Args:
        spec: the learner; its ``kind`` must be ``kind`` and its schedule sequential.
        theta: raw reset values of the parameters (P,) (default: the golden initial parameters).
        kind: the kind the datapath implements (``"mlp"`` or ``"kan"``).
        plan_of: the datapath's schedule of a spec, ``{"prediction", "read", "update", "ii"}``
            (cycles; :func:`~onchip.hw.mlp_serial.serial_plan`, :func:`~onchip.hw.kan_serial.serial_kan_plan`).
        port_stages: registered steps of the parameter port's decode.

    Raises:
        ValueError: ``spec`` is not a LearnerSpec, of another kind or pipelined, or a bad ``theta``.
    """

    def __init__(self, spec: LearnerSpec, theta, *, kind: str, plan_of, port_stages: int = 0):
        if not isinstance(spec, LearnerSpec):
            raise ValueError(f"spec must be a LearnerSpec, got {type(spec).__name__}")
        if spec.kind != kind or spec.effective_staleness != 0:
            raise ValueError(f"the serial {kind.upper()} datapath implements {kind.upper()}s in the sequential "
                             f"schedule; got kind={spec.kind!r}, schedule={spec.schedule!r}")
        plan = plan_of(spec)
        self.stages = {**{key: plan[key] for key in ("prediction", "read", "update")}, "port": port_stages}
        self.initiation_interval = plan["ii"]
        self.min_staleness = self.initiation_interval - 1
        self.staleness = 0
        self.pipelined = False
        super().__init__(spec, theta)
        #: where the parameters live: RAM banks (the serial MLP's biases, one per neuron, in registers)
        self.param_storage = "memory"
        #: cycles after reset before a sample or command is taken: the RAM reload from the ROM, and
        #: its last word through the port's stages
        self.reset_cycles = self.reset_cycles_command = self.n_params + 1 + port_stages

    @property
    def latency_update(self) -> int:
        """Clock edges from accepting a sample to committing its update in every layer."""
        return max(self.stages["update"])

    def prediction_out(self, m: Module, preds, z_last, out_err, first_backward: Value, advance_last: Value,
                       ys, kind) -> None:
        """The prediction register and the output error: ``preds`` take the last layer's outputs
        ``z_last`` when its forward pass ends (``advance_last``; ``m.valid`` until taken), and the
        output layer's error registers ``out_err`` the output error by the sample's kind in the
        first cycle of the backward pass (``first_backward``)."""
        with m.If(first_backward):
            m.d.sync += [e.eq(v) for e, v in zip(out_err, self.output_error(m, preds, ys, kind))]
        with m.If(self.m.ready):
            m.d.sync += self.m.valid.eq(0)
        with m.If(advance_last):
            m.d.sync += [p.eq(z) for p, z in zip(preds, z_last)]
            m.d.sync += self.m.valid.eq(1)


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


def serial_front(m: Module, learner: LearnerPorts, idle: Value, registered_reload: bool = False) -> SerialFront:
    """Build the sample and command handshakes and the parameter bus of a serial learner into
    ``m``; ``idle``: the sequencer is idle (and the reload done); ``registered_reload``: the
    reload's ``active`` a register (:func:`~onchip.hw.interface.reload_from_rom`)."""
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
    reload = reload_from_rom(m, learner.theta0, f.coef, registered=registered_reload)
    bus_addr = Signal(unsigned(learner.addr_width), name="bus_addr")
    bus_data = Signal(fmt_shape(f.coef), name="bus_data")
    bus_we = Signal(name="bus_we")
    m.d.comb += [
        bus_addr.eq(Mux(reload.write, reload.addr, cmd_addr)),
        bus_data.eq(Mux(reload.write, reload.data, cmd_data)),
        bus_we.eq(reload.write | (execute & cmd_write)),
    ]
    return SerialFront(xs, ys, kind, accept, execute, cmd_data, cmd_write, reload, bus_addr, bus_data, bus_we)
