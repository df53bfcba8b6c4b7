"""What every learner datapath shares: its ports, their payload fields, and the reload after reset.

Both :class:`~onchip.hw.learner.OnchipLearner` and
:class:`~onchip.hw.mlp_serial.SerialMlpLearner` derive from :class:`LearnerPorts`,
so the sample, prediction and parameter streams are packed the same way
(lowest field first) whatever the datapath behind them.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Const, Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..fixed import Fmt
from ..model.golden import check_parameters, initial_parameters
from ..spec import LearnerSpec
from .fixedpoint import fmt_shape
from .ram import rom_attrs


def _field(raw: Value, fmt: Fmt) -> Value:
    return raw.as_signed() if fmt.signed else raw


class LearnerPorts(wiring.Component):
    """Ports of a learner of ``spec`` (``amaranth.lib.stream`` interfaces; payloads packed lowest field first):

        s: In(stream), samples: x[0..n_in-1] (input format W_in bits each), then y[0..n_out-1] (act).
        m: Out(stream), predictions pred[0..n_out-1] (act), one per sample, in order.
        pc: In(stream), parameter commands: data (W_coef) | addr (param_addr_width) << W_coef | write << top.
        pr: Out(stream), one response per command: the value read, or the value written.

    Attributes:
        spec; theta0: reset values of the parameters (raw, flat (P,)); n_params: P;
        addr_width, sample_width, pred_width, cmd_width: bits.

    Raises:
        ValueError: a bad ``theta`` (:func:`onchip.model.golden.check_parameters`).
    """

    def __init__(self, spec: LearnerSpec, theta=None):
        f = spec.formats
        self.spec = spec
        self.theta0 = initial_parameters(spec) if theta is None else check_parameters(spec, theta)
        self.n_params = spec.parameter_count()
        self.addr_width = max(1, (self.n_params - 1).bit_length())
        self.sample_width = spec.n_in * f.input.width + spec.n_out * f.act.width
        self.pred_width = spec.n_out * f.act.width
        self.cmd_width = f.coef.width + self.addr_width + 1
        super().__init__({
            "s": In(stream.Signature(self.sample_width)),
            "m": Out(stream.Signature(self.pred_width)),
            "pc": In(stream.Signature(self.cmd_width)),
            "pr": Out(stream.Signature(f.coef.width)),
        })

    def sample_fields(self) -> tuple[list[Value], list[Value]]:
        """(x[0..n_in-1], y[0..n_out-1]) of the sample payload ``s.payload``, typed by their formats."""
        f, pl = self.spec.formats, self.s.payload
        wi, wa = f.input.width, f.act.width
        base = self.spec.n_in * wi
        xs = [_field(pl[i * wi : (i + 1) * wi], f.input) for i in range(self.spec.n_in)]
        ys = [_field(pl[base + j * wa : base + (j + 1) * wa], f.act) for j in range(self.spec.n_out)]
        return xs, ys

    def command_fields(self) -> tuple[Value, Value, Value]:
        """(data, addr, write) of the parameter command ``pc.payload``."""
        wc, aw, cmd = self.spec.formats.coef.width, self.addr_width, self.pc.payload
        return _field(cmd[:wc], self.spec.formats.coef), cmd[wc : wc + aw], cmd[wc + aw]

    @property
    def latency_prediction(self) -> int:
        """Clock edges from the edge accepting a sample to the first edge its prediction can be taken."""
        return self.stages["prediction"]


@dataclass(frozen=True)
class Reload:
    """The reload of parameters from ROM after reset: ``active`` while it runs (P + 1 cycles), and in
    the cycles it writes, ``write`` with theta0[``addr``] = ``data``."""

    active: Value
    write: Value
    addr: Value
    data: Value


def reload_from_rom(m: Module, theta0, fmt: Fmt, enabled: bool = True) -> Reload:
    """A counter walking a ROM of ``theta0`` after reset, for parameters kept in RAM (``rst`` does
    not reset a RAM): word n is written in cycle n + 1, so the reload takes P + 1 cycles.
    ``enabled=False`` (every parameter a register): a reload that never runs."""
    n = len(theta0)
    if not enabled:
        zero = Const(0, 1)
        return Reload(zero, zero, Const(0, max(1, (n - 1).bit_length())), Const(0, fmt_shape(fmt)))
    m.submodules.theta0_rom = rom = Memory(shape=fmt_shape(fmt), depth=n, init=[int(v) for v in theta0],
                                           attrs=rom_attrs(n, fmt.width))
    rom_rd = rom.read_port()
    count = Signal(range(n + 2), name="reload_count")
    active = Signal(name="reloading")
    write = Signal(name="reload_write")
    addr = Signal(range(max(2, n)), name="reload_addr")
    m.d.comb += [
        active.eq(count != n + 1),
        rom_rd.addr.eq(count),
        write.eq(active & (count != 0)),
        addr.eq(count - 1),
    ]
    with m.If(active):
        m.d.sync += count.eq(count + 1)
    return Reload(active, write, addr, rom_rd.data)
