"""What every learner datapath shares: its ports, their payload fields, and the reload after reset.

Both :class:`~onchip.hw.learner.OnchipLearner` and
:class:`~onchip.hw.mlp_serial.SerialMlpLearner` derive from :class:`LearnerPorts`,
so the sample, prediction and parameter streams are packed the same way
(lowest field first) whatever the datapath behind them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Const, Module, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..fixed import Fmt
from ..model.golden import check_parameters, check_stream, initial_parameters
from ..spec import LearnerSpec
from .fixedpoint import fmt_shape
from .ram import rom_attrs


def param_addr_width(n_params: int) -> int:
    """Bits of the parameter port's address for ``n_params`` parameters (at least 1)."""
    return max(1, (n_params - 1).bit_length())


def stream_layouts(*, n_in: int, n_out: int, input_shape, act_shape, coef_shape,
                   addr_width: int) -> dict[str, data.StructLayout]:
    """Payload layouts of the four learner streams, members lowest bits first.

    Returns:
        ``{"s": {x: ArrayLayout(input_shape, n_in), y: ArrayLayout(act_shape, n_out)},
        "m": {pred: ArrayLayout(act_shape, n_out)},
        "pc": {data: coef_shape, addr: unsigned(addr_width), write: unsigned(1)},
        "pr": {data: coef_shape}}`` as :class:`amaranth.lib.data.StructLayout`.

    Raises:
        ValueError: a count or the address width below 1.
    """
    for name, value in (("n_in", n_in), ("n_out", n_out), ("addr_width", addr_width)):
        if value < 1:
            raise ValueError(f"stream_layouts {name} must be at least 1, got {value}")
    return {
        "s": data.StructLayout({"x": data.ArrayLayout(input_shape, n_in),
                                "y": data.ArrayLayout(act_shape, n_out)}),
        "m": data.StructLayout({"pred": data.ArrayLayout(act_shape, n_out)}),
        "pc": data.StructLayout({"data": coef_shape, "addr": unsigned(addr_width), "write": unsigned(1)}),
        "pr": data.StructLayout({"data": coef_shape}),
    }


def _spec_layouts(spec: LearnerSpec) -> dict[str, data.StructLayout]:
    f = spec.formats
    return stream_layouts(n_in=spec.n_in, n_out=spec.n_out, input_shape=fmt_shape(f.input),
                          act_shape=fmt_shape(f.act), coef_shape=fmt_shape(f.coef),
                          addr_width=param_addr_width(spec.parameter_count()))


def sample_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the sample stream ``s``: ``x`` (n_in values of the input format), then ``y``
    (n_out targets of the act format)."""
    return _spec_layouts(spec)["s"]


def prediction_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the prediction stream ``m``: ``pred`` (n_out values of the act format)."""
    return _spec_layouts(spec)["m"]


def command_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the parameter command stream ``pc``: ``data`` (coef format), ``addr`` (flat
    parameter index, :func:`param_addr_width` bits), ``write`` (1: write ``data``, 0: read)."""
    return _spec_layouts(spec)["pc"]


def response_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the parameter response stream ``pr``: ``data`` (coef format)."""
    return _spec_layouts(spec)["pr"]


def payload_leaves(layout: data.StructLayout):
    """Yield ``(member, field_name, Field)`` for every scalar field of a payload layout, lowest
    first, offsets from bit 0 of the payload: a member that is an array of n elements gives the
    fields ``<member>0 .. <member>{n-1}`` (``x0``, ``y0``, ``pred0``), a scalar member one field of
    its own name (``data``, ``addr``, ``write``).

    Raises:
        TypeError: a member that is neither a scalar nor an array of scalars.
    """
    for name, member in layout:
        if isinstance(member.shape, data.ArrayLayout) and not isinstance(member.shape.elem_shape, data.Layout):
            for n, elem in member.shape:
                yield name, f"{name}{n}", data.Field(elem.shape, member.offset + elem.offset)
        elif isinstance(member.shape, data.Layout):
            raise TypeError(f"payload member {name} must be a scalar or an array of scalars")
        else:
            yield name, name, member


def payload_fields(layout: data.StructLayout) -> dict[str, data.Field]:
    """Field name -> :class:`amaranth.lib.data.Field` (shape, offset from bit 0) of every scalar
    field of a payload layout (:func:`payload_leaves`): the field names of
    ``Design.info["payload"]`` and :class:`onchip.verilator.ports.PortLayout`."""
    return {leaf: fld for _, leaf, fld in payload_leaves(layout)}


def field_value(word: int, fld: data.Field) -> int:
    """The value of field ``fld`` in payload integer ``word`` (two's complement for a signed shape)."""
    v = (int(word) >> fld.offset) & ((1 << fld.width) - 1)
    return v - (1 << fld.width) if Shape.cast(fld.shape).signed and v >> (fld.width - 1) else v


def pack_samples(spec: LearnerSpec, x_raw, y_raw) -> list[int]:
    """Raw samples (N, n_in) / (N, n_out) -> ``s__payload`` integers of :func:`sample_layout`
    (each field two's complement in its width, x[0] from bit 0).

    Raises:
        ValueError: wrong shapes or raw values outside their formats
            (:func:`onchip.model.golden.check_stream`, the check every backend applies).
    """
    x_raw, y_raw, _ = check_stream(spec, x_raw, y_raw)
    fields = payload_fields(sample_layout(spec))
    total = np.zeros(len(x_raw), dtype=object)
    columns = [(f"x{i}", x_raw[:, i]) for i in range(spec.n_in)] + [(f"y{j}", y_raw[:, j]) for j in range(spec.n_out)]
    for name, col in columns:
        f = fields[name]
        total = total + ((col.astype(object) & ((1 << f.width) - 1)) << f.offset)
    return [int(v) for v in total]


def unpack_predictions(spec: LearnerSpec, payloads) -> np.ndarray:
    """``m__payload`` integers of :func:`prediction_layout` -> (N, n_out) int64 raw predictions."""
    fields = payload_fields(prediction_layout(spec))
    out = np.zeros((len(payloads), spec.n_out), np.int64)
    for j in range(spec.n_out):
        for n, p in enumerate(payloads):
            out[n, j] = field_value(p, fields[f"pred{j}"])
    return out


class LearnerPorts(wiring.Component):
    """Ports of a learner of ``spec`` (``amaranth.lib.stream`` interfaces whose payloads are the
    :mod:`amaranth.lib.data` layouts :func:`sample_layout`, :func:`prediction_layout`,
    :func:`command_layout` and :func:`response_layout`, members lowest bits first):

        s: In(stream), samples: x[0..n_in-1] (input format W_in bits each), then y[0..n_out-1] (act).
        m: Out(stream), predictions pred[0..n_out-1] (act), one per sample, in order.
        pc: In(stream), parameter commands: data (W_coef) | addr (param_addr_width) << W_coef | write << top.
        pr: Out(stream), one response per command: the value read, or the value written.

    Attributes:
        spec; theta0: reset values of the parameters (raw, flat (P,)); n_params: P;
        layouts: the payload layout of each stream, by name (``s``, ``m``, ``pc``, ``pr``);
        addr_width, sample_width, pred_width, cmd_width: bits.

    Raises:
        ValueError: a bad ``theta`` (:func:`onchip.model.golden.check_parameters`).
    """

    def __init__(self, spec: LearnerSpec, theta=None):
        self.spec = spec
        self.theta0 = initial_parameters(spec) if theta is None else check_parameters(spec, theta)
        self.n_params = spec.parameter_count()
        self.addr_width = param_addr_width(self.n_params)
        self.layouts = _spec_layouts(spec)
        self.sample_width = self.layouts["s"].size
        self.pred_width = self.layouts["m"].size
        self.cmd_width = self.layouts["pc"].size
        super().__init__({
            "s": In(stream.Signature(self.layouts["s"])),
            "m": Out(stream.Signature(self.layouts["m"])),
            "pc": In(stream.Signature(self.layouts["pc"])),
            "pr": Out(stream.Signature(self.layouts["pr"])),
        })

    def sample_fields(self) -> tuple[list[Value], list[Value]]:
        """(x[0..n_in-1], y[0..n_out-1]) of the sample payload ``s.payload``, typed by their formats."""
        pl = self.s.payload
        return [pl.x[i] for i in range(self.spec.n_in)], [pl.y[j] for j in range(self.spec.n_out)]

    def command_fields(self) -> tuple[Value, Value, Value]:
        """(data, addr, write) of the parameter command ``pc.payload``."""
        cmd = self.pc.payload
        return cmd.data, cmd.addr, cmd.write

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
