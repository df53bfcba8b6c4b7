"""What every learner datapath shares: its ports, their payload fields, and the reload after reset.

Both :class:`~onchip.hw.learner.OnchipLearner` and
:class:`~onchip.hw.mlp_serial.SerialMlpLearner` derive from :class:`LearnerPorts`,
so the sample, prediction and parameter streams are packed the same way
(lowest field first) whatever the datapath behind them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..fixed import Fmt
from ..model.golden import check_channel, check_parameters, check_stream, initial_parameters
from ..spec import LearnerSpec
from .fixedpoint import fmt_shape
from .ram import rom_attrs


def param_addr_width(n_params: int) -> int:
    """Bits of the parameter port's address for ``n_params`` parameters (at least 1)."""
    return max(1, (n_params - 1).bit_length())


#: Bits of the sample payload's ``kind`` field (:class:`onchip.model.SampleKind`).
KIND_WIDTH = 2


def channel_width(channels: int) -> int:
    """Bits of the ``channel`` field of the sample and command payloads for ``channels`` = N:
    ceil(log2 N); 0 (no field) for one channel."""
    return (int(channels) - 1).bit_length()


def single_channel(spec: LearnerSpec) -> LearnerSpec:
    """The learner one channel of ``spec`` is: ``channels = 1`` on the sequential schedule
    (each channel of a multi-channel learner is a sequential learner on its own sub-stream)."""
    return spec if spec.channels == 1 else spec.replace(channels=1, schedule="sequential")


def channel_parameters(spec: LearnerSpec, theta=None) -> np.ndarray:
    """Raw parameters of every channel of ``spec``, (N, P) int64 (N = 1 included): ``theta`` None
    (the golden initial parameters in every channel), (P,) (the same in every channel) or (N, P).

    Raises:
        ValueError: what :func:`onchip.model.golden.check_parameters` refuses (a wrong shape named
            with the shapes it takes, values outside ``formats.coef``).
    """
    theta = initial_parameters(spec) if theta is None else theta
    return np.broadcast_to(check_parameters(spec, theta), (spec.channels, spec.parameter_count())).copy()


def decision_width(n_out: int) -> int:
    """Bits of the prediction payload's ``decision`` field: an index 0 .. max(n_out, 2) - 1."""
    return max(1, (max(n_out, 2) - 1).bit_length())


def y_field_shape(out_shape, grad_shape) -> Shape:
    """Shape of one ``y`` field of the sample payload: it carries a target (the output format,
    ``formats.y``) or an error (``grad``), so it is the narrowest signed shape holding both (the
    wider of the two when both are signed, the output width when ``grad`` is no wider)."""
    a, g = Shape.cast(out_shape), Shape.cast(grad_shape)
    width = max(a.width + (not a.signed), g.width + (not g.signed))
    if not (a.signed or g.signed):
        return unsigned(max(a.width, g.width))
    return signed(width)


def stream_layouts(*, n_in: int, n_out: int, input_shape, out_shape, coef_shape,
                   addr_width: int, grad_shape=None, channels: int = 1) -> dict[str, data.StructLayout]:
    """Payload layouts of the four learner streams, members lowest bits first.

    Args:
        out_shape: shape of a prediction and a target (the output format, ``formats.y``).
        grad_shape: shape of a raw ``grad`` value (default ``out_shape``); the ``y`` fields take
            :func:`y_field_shape` of the two.
        channels: N; above 1 the sample and command payloads end with a ``channel`` field of
            :func:`channel_width` bits (the learner whose sample it is, whose parameter it addresses).

    Returns:
        ``{"s": {x: ArrayLayout(input_shape, n_in), y: ArrayLayout(y_field_shape, n_out),
        kind: unsigned(2)},
        "m": {pred: ArrayLayout(out_shape, n_out), decision: unsigned(decision_width(n_out))},
        "pc": {data: coef_shape, addr: unsigned(addr_width), write: unsigned(1)},
        "pr": {data: coef_shape}}`` as :class:`amaranth.lib.data.StructLayout`. ``kind`` and
        ``decision`` sit above the older fields, so a TARGET sample's payload is the integer an
        (x, y) sample had before, and the predictions sit where they did.

    Raises:
        ValueError: a count or the address width below 1.
    """
    for name, value in (("n_in", n_in), ("n_out", n_out), ("addr_width", addr_width)):
        if value < 1:
            raise ValueError(f"stream_layouts {name} must be at least 1, got {value}")
    y_shape = y_field_shape(out_shape, out_shape if grad_shape is None else grad_shape)
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise ValueError(f"stream_layouts channels must be an integer >= 1, got {channels!r}")
    extra = {"channel": unsigned(channel_width(channels))} if channels > 1 else {}
    return {
        "s": data.StructLayout({"x": data.ArrayLayout(input_shape, n_in),
                                "y": data.ArrayLayout(y_shape, n_out),
                                "kind": unsigned(KIND_WIDTH), **extra}),
        "m": data.StructLayout({"pred": data.ArrayLayout(out_shape, n_out),
                                "decision": unsigned(decision_width(n_out))}),
        "pc": data.StructLayout({"data": coef_shape, "addr": unsigned(addr_width), "write": unsigned(1), **extra}),
        "pr": data.StructLayout({"data": coef_shape}),
    }


def _spec_layouts(spec: LearnerSpec) -> dict[str, data.StructLayout]:
    f = spec.formats
    return stream_layouts(n_in=spec.n_in, n_out=spec.n_out, input_shape=fmt_shape(f.input),
                          out_shape=fmt_shape(f.y), coef_shape=fmt_shape(f.coef),
                          addr_width=param_addr_width(spec.parameter_count()), grad_shape=fmt_shape(f.grad),
                          channels=spec.channels)


def sample_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the sample stream ``s``: ``x`` (n_in values of the input format), then ``y``
    (n_out values: targets of the output format or errors of the grad format, :func:`y_field_shape`),
    then ``kind`` (2 bits, :class:`onchip.model.SampleKind`), then, for ``channels`` N > 1,
    ``channel`` (:func:`channel_width` bits)."""
    return _spec_layouts(spec)["s"]


def prediction_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the prediction stream ``m``: ``pred`` (n_out values of the output format ``formats.y``), then
    ``decision`` (:func:`decision_width` bits, :func:`onchip.model.decision.decisions`)."""
    return _spec_layouts(spec)["m"]


def command_layout(spec: LearnerSpec) -> data.StructLayout:
    """Payload of the parameter command stream ``pc``: ``data`` (coef format), ``addr`` (flat
    parameter index, :func:`param_addr_width` bits), ``write`` (1: write ``data``, 0: read), then,
    for ``channels`` N > 1, ``channel`` (whose parameter, :func:`channel_width` bits)."""
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


def pack_samples(spec: LearnerSpec, x_raw, y_raw, kind=None, channel=None) -> list[int]:
    """Raw samples (N, n_in) / (N, n_out) / kinds (N,) / channels (N,) -> ``s__payload`` integers
    of :func:`sample_layout` (each field two's complement in its width, x[0] from bit 0).

    Raises:
        ValueError: wrong shapes, bad kinds or raw values outside their formats
            (:func:`onchip.model.golden.check_stream`, the check every backend applies), a bad
            ``channel`` (:func:`onchip.model.golden.check_channel`).
    """
    x_raw, y_raw, kind = check_stream(spec, x_raw, y_raw, kind=kind)
    channel = check_channel(spec, channel, len(x_raw))
    fields = payload_fields(sample_layout(spec))
    total = np.zeros(len(x_raw), dtype=object)
    columns = [(f"x{i}", x_raw[:, i]) for i in range(spec.n_in)] + [(f"y{j}", y_raw[:, j]) for j in range(spec.n_out)]
    columns.append(("kind", kind))
    if spec.channels > 1:
        columns.append(("channel", channel))
    for name, col in columns:
        f = fields[name]
        total = total + ((col.astype(object) & ((1 << f.width) - 1)) << f.offset)
    return [int(v) for v in total]


def unpack_predictions(spec: LearnerSpec, payloads, *, decisions: bool = False):
    """``m__payload`` integers of :func:`prediction_layout` -> (N, n_out) int64 raw predictions,
    and with ``decisions`` also the (N,) int64 decision field: (predictions, decisions)."""
    fields = payload_fields(prediction_layout(spec))
    out = np.zeros((len(payloads), spec.n_out), np.int64)
    for j in range(spec.n_out):
        for n, p in enumerate(payloads):
            out[n, j] = field_value(p, fields[f"pred{j}"])
    if not decisions:
        return out
    return out, np.array([field_value(p, fields["decision"]) for p in payloads], np.int64)


class LearnerPorts(wiring.Component):
    """Ports of a learner of ``spec`` (``amaranth.lib.stream`` interfaces whose payloads are the
    :mod:`amaranth.lib.data` layouts :func:`sample_layout`, :func:`prediction_layout`,
    :func:`command_layout` and :func:`response_layout`, members lowest bits first):

        s: In(stream), samples: x[0..n_in-1] (input format W_in bits each), then y[0..n_out-1]
            (target in the output format, or error in grad: :func:`y_field_shape`), then kind (2 bits:
            0 TARGET, 1 PREDICT, 2 ERROR; 3 is treated as PREDICT), then for N > 1 channels
            channel (:func:`channel_width` bits).
        m: Out(stream), predictions pred[0..n_out-1] (output format), then decision (index of the largest
            output, lowest on a tie; sign for one output), one per sample, in order.
        pc: In(stream), parameter commands: data (W_coef) | addr (param_addr_width) << W_coef | write
            (| channel above it, for N > 1 channels: the parameter is theta[channel, addr]).
        pr: Out(stream), one response per command: the value read, or the value written.
        channel_error: Out(1), only for N > 1 channels with N not a power of two (the only case in
            which the channel field can hold a value >= N): high from the cycle a sample or a
            parameter command naming a channel >= N is taken until reset. Such a sample is taken
            and dropped: no prediction, no update; such a command reads and writes no bank and is
            answered 0 (:attr:`guards_channel`).

    Attributes:
        spec; theta0: reset values of the parameters (raw, flat (N P,), channel by channel);
        theta_channels: the same as (N, P); channels: N; n_params: P (per channel);
        guards_channel: whether the design has ``channel_error`` (N > 1, not a power of two);
        layouts: the payload layout of each stream, by name (``s``, ``m``, ``pc``, ``pr``);
        addr_width, sample_width, pred_width, cmd_width: bits.

    Raises:
        ValueError: a bad ``theta``: (P,) or, for N > 1 channels, (N, P) (:func:`channel_parameters`).
    """

    def __init__(self, spec: LearnerSpec, theta=None):
        self.spec = spec
        self.channels = spec.channels
        if self.channels == 1:
            self.theta0 = initial_parameters(spec) if theta is None else check_parameters(spec, theta)
            self.theta_channels = self.theta0[None, :]
        else:
            self.theta_channels = channel_parameters(spec, theta)
            self.theta0 = self.theta_channels.reshape(-1)
        self.n_params = spec.parameter_count()
        self.addr_width = param_addr_width(self.n_params)
        self.layouts = _spec_layouts(spec)
        self.sample_width = self.layouts["s"].size
        self.pred_width = self.layouts["m"].size
        self.cmd_width = self.layouts["pc"].size
        self.guards_channel = self.channels > 1 and self.channels & (self.channels - 1) != 0
        super().__init__({
            "s": In(stream.Signature(self.layouts["s"])),
            "m": Out(stream.Signature(self.layouts["m"])),
            "pc": In(stream.Signature(self.layouts["pc"])),
            "pr": Out(stream.Signature(self.layouts["pr"])),
            **({"channel_error": Out(1)} if self.guards_channel else {}),
        })

    def sample_fields(self) -> tuple[list[Value], list[Value], Value]:
        """(x[0..n_in-1], y[0..n_out-1], kind) of the sample payload ``s.payload``."""
        pl = self.s.payload
        return [pl.x[i] for i in range(self.spec.n_in)], [pl.y[j] for j in range(self.spec.n_out)], pl.kind

    def sample_channel(self) -> Value | None:
        """The ``channel`` field of the sample payload (None for one channel)."""
        return self.s.payload.channel if self.channels > 1 else None

    def command_channel(self) -> Value | None:
        """The ``channel`` field of the parameter command (None for one channel)."""
        return self.pc.payload.channel if self.channels > 1 else None

    def output_error(self, m: Module, preds, ys, kind) -> list[Value]:
        """The output error of each output by the sample's kind (the golden model's
        ``output_error``): TARGET requant(pred - y -> ``grad``), ERROR y itself (already
        ``grad``), otherwise 0 (PREDICT: a zero update). Combinational, ``grad`` shaped."""
        from .fixedpoint import requant

        f = self.spec.formats
        out = []
        for p, y in zip(preds, ys):
            e = Signal(fmt_shape(f.grad))
            target = requant(m, p - y, f.y.frac_bits, f.grad)
            with m.Switch(kind):
                with m.Case(0):
                    m.d.comb += e.eq(target)
                with m.Case(2):
                    m.d.comb += e.eq(y)
                with m.Default():
                    m.d.comb += e.eq(0)
            out.append(e)
        return out

    def decision(self, m: Module, preds, *, parallel: bool = False) -> None:
        """Drive ``m.payload.decision`` from the prediction values ``preds`` (combinational):
        the index of the largest, the lowest on a tie (a later output wins only when strictly
        greater); one output: 1 when it is >= 0.

        Args:
            parallel: compare every pair at once (n (n-1) / 2 comparators, one comparator deep)
                instead of a running maximum (n - 1 comparators, n - 1 deep); the same index.
                ``timing = "fast"`` uses it: the chain was the prediction port's path.
        """
        dec = self.m.payload.decision
        if len(preds) == 1:
            m.d.comb += dec.eq(preds[0] >= 0)
            return
        if parallel:
            # output j wins when it is greater than every earlier output and not less than every
            # later one: exactly one wins, the lowest index of the maximum
            wins = [Cat(*[(p > q) if i < j else (p >= q) for i, q in enumerate(preds) if i != j]).all()
                    for j, p in enumerate(preds)]
            idx = Const(0, len(dec))
            for j, w in enumerate(wins[1:], start=1):
                idx = idx | Mux(w, j, 0)
            m.d.comb += dec.eq(idx)
            return
        best, idx = preds[0], Const(0, len(dec))
        for j, p in enumerate(preds[1:], start=1):
            take = p > best
            best = Mux(take, p, best)
            idx = Mux(take, j, idx)
        m.d.comb += dec.eq(idx)

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
    """The reload of parameters from ROM after reset: ``active`` while it runs (N P + 1 cycles), and in
    the cycles it writes, ``write`` with theta0[``channel``, ``addr``] = ``data`` (``channel`` None
    for one channel)."""

    active: Value
    write: Value
    addr: Value
    data: Value
    channel: Value | None = None


def reload_from_rom(m: Module, theta0, fmt: Fmt, enabled: bool = True, registered: bool = False,
                    channels: int = 1) -> Reload:
    """A counter walking a ROM of ``theta0`` after reset, for parameters kept in RAM (``rst`` does
    not reset a RAM): word n is written in cycle n + 1, so the reload takes P + 1 cycles.
    ``enabled=False`` (every parameter a register): a reload that never runs. ``registered``:
    ``active`` is a register (cleared as the count reaches its end) rather than a compare of the
    count, the same value each cycle; for ``timing = "fast"``, where that compare into the
    sequencer's sample handshake was the routed critical path. ``channels`` N > 1: ``theta0`` holds
    N banks of P words one after the other, written as (channel, index) by two counters (no division);
    when every channel starts from the same P words the ROM holds them once, walked N times."""
    n = len(theta0)
    shared = channels > 1 and len({tuple(int(v) for v in row) for row in np.reshape(theta0, (channels, -1))}) == 1
    if shared:
        theta0 = theta0[: n // channels]
    if not enabled:
        zero = Const(0, 1)
        return Reload(zero, zero, Const(0, max(1, (n - 1).bit_length())), Const(0, fmt_shape(fmt)))
    m.submodules.theta0_rom = rom = Memory(shape=fmt_shape(fmt), depth=len(theta0), init=[int(v) for v in theta0],
                                           attrs=rom_attrs(len(theta0), fmt.width))
    rom_rd = rom.read_port()
    count = Signal(range(n + 2), name="reload_count")
    active = Signal(init=int(registered), name="reloading")
    if registered:  # cleared as the count reaches n (it stops at n + 1)
        with m.If(count == n):
            m.d.sync += active.eq(0)
    else:
        m.d.comb += active.eq(count != n + 1)
    write = Signal(name="reload_write")
    addr = Signal(range(max(2, n)), name="reload_addr")
    if not shared:
        m.d.comb += rom_rd.addr.eq(count)
    m.d.comb += [
        write.eq(active & (count != 0)),
        addr.eq(count - 1),
    ]
    with m.If(active):
        m.d.sync += count.eq(count + 1)
    if channels == 1:
        return Reload(active, write, addr, rom_rd.data)
    p = n // channels
    index = Signal(range(max(2, p)), name="reload_index")
    channel = Signal(range(max(2, channels)), name="reload_channel")
    with m.If(write):
        with m.If(index == p - 1):
            m.d.sync += [index.eq(0), channel.eq(channel + 1)]
        with m.Else():
            m.d.sync += index.eq(index + 1)
    if shared:  # the word written next cycle: the index after this cycle's
        m.d.comb += rom_rd.addr.eq(Mux(write, Mux(index == p - 1, 0, index + 1), 0))
    return Reload(active, write, index, rom_rd.data, channel[: channel_width(channels)])
