"""AXI4-Stream wrapper of the learner for Vivado block designs.

Renames the learner's streams to the AXI4-Stream signal names Vivado infers
interfaces from (``<bus>_tdata``, ``_tvalid``, ``_tready``, ``_tlast``, ``_tkeep``;
ARM IHI 0051, "AMBA AXI4-Stream Protocol Specification"), pads every ``tdata`` to
whole bytes (upper bits zero on outputs, ignored on inputs) and uses ``aclk`` with
the active-low ``aresetn``. The prediction stream closes a packet every ``packet``
predictions with ``TLAST`` and marks every byte valid with an all-ones ``TKEEP``, so
an AXI DMA (PG021, S2MM) writes it to memory without an adapter; the input streams
take the ``TLAST`` a DMA's MM2S channel sends and ignore it.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .learner import OnchipLearner


#: AXI4-Stream bus of each learner stream, and whether the learner is its sink (an input).
AXIS_BUSES = {"s": ("s_axis_sample", True), "m": ("m_axis_pred", False),
              "pc": ("s_axis_param", True), "pr": ("m_axis_param", False)}


#: Largest ``packet`` (predictions per TLAST) of :class:`AxisLearner`: an AXI DMA's transfer
#: length register holds at most 2**26 - 1 bytes (PG021), more than any packet of this size.
MAX_PACKET = 1 << 24


def tdata_width(width: int) -> int:
    """Bits of a ``tdata`` carrying a payload of ``width`` bits: the next multiple of 8."""
    return 8 * ((width + 7) // 8)


def check_packet(packet) -> int:
    """``packet``, the predictions per TLAST of the prediction stream: an int in 1 .. :data:`MAX_PACKET`.

    Raises:
        ValueError: anything else (the message names ``--packet``).
    """
    if isinstance(packet, bool) or not isinstance(packet, int) or not 1 <= packet <= MAX_PACKET:
        raise ValueError(f"--packet must be a whole number of predictions in 1..{MAX_PACKET}, got {packet!r}")
    return packet


class AxisLearner(wiring.Component):
    """:class:`OnchipLearner` with AXI4-Stream port names.

    Ports:
        aclk, aresetn: In(1), clock and active-low synchronous reset.
        s_axis_sample_{tdata,tvalid,tready}: the sample stream (learner ``s``).
        s_axis_sample_tlast: In(1), taken and ignored (a DMA's packet boundary means nothing to
            the learner: every sample stands alone).
        m_axis_pred_{tdata,tvalid,tready}: the prediction stream (``m``).
        m_axis_pred_tlast: Out(1), high on the last prediction of every packet of ``packet``
            predictions (the ``packet``-th, 2 ``packet``-th, ... since reset; always high for 1).
        m_axis_pred_tkeep: Out(tdata bits / 8), all ones: every byte of every transfer is data.
        s_axis_param_{tdata,tvalid,tready}: parameter commands (``pc``).
        s_axis_param_tlast: In(1), taken and ignored.
        m_axis_param_{tdata,tvalid,tready}: parameter responses (``pr``).
        channel_error: Out(1), the core's (N channels, N not a power of two).
    Each ``tdata`` is the learner payload zero-padded to a multiple of 8 bits
    (:func:`onchip.hw.interface.stream_layouts`): a sample is x[0..n_in-1], y[0..n_out-1]
    (a target in ``act`` or an error dL/dy_hat in ``grad``), then the 2-bit ``kind``
    (0 TARGET, 1 PREDICT, 2 ERROR; :class:`onchip.model.SampleKind`), then for N > 1 channels
    the ``channel`` (a parameter command ends with it too); a prediction is
    pred[0..n_out-1] (``act``), then ``decision`` (index of the largest output, lowest on
    a tie; sign for one output). See hw/README.md, "The stream protocol".

    Args:
        learner: the core to wrap.
        packet: predictions per packet on ``m_axis_pred`` (TLAST on the last of each).

    Raises:
        ValueError: a bad ``packet`` (:func:`check_packet`).
    """

    def __init__(self, learner: OnchipLearner, *, packet: int = 1):
        self.learner = learner
        self.packet = check_packet(packet)
        ports = {"aclk": In(1), "aresetn": In(1)}
        self._map = [(bus, getattr(learner, stream), learner.layouts[stream].size, sink)
                     for stream, (bus, sink) in AXIS_BUSES.items()]
        for name, _, width, sink in self._map:
            ports[f"{name}_tdata"] = (In if sink else Out)(tdata_width(width))
            ports[f"{name}_tvalid"] = (In if sink else Out)(1)
            ports[f"{name}_tready"] = (Out if sink else In)(1)
            if sink:
                ports[f"{name}_tlast"] = In(1)
        ports[f"{AXIS_BUSES['m'][0]}_tlast"] = Out(1)
        ports[f"{AXIS_BUSES['m'][0]}_tkeep"] = Out(tdata_width(learner.layouts["m"].size) // 8)
        if learner.guards_channel:
            ports["channel_error"] = Out(1)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += [ClockSignal("sync").eq(self.aclk), ResetSignal("sync").eq(~self.aresetn)]
        m.submodules.learner = core = self.learner
        for name, port, width, sink in self._map:
            tdata = getattr(self, f"{name}_tdata")
            tvalid = getattr(self, f"{name}_tvalid")
            tready = getattr(self, f"{name}_tready")
            if sink:
                m.d.comb += [port.payload.eq(tdata[:width]), port.valid.eq(tvalid), tready.eq(port.ready)]
            else:
                m.d.comb += [tdata.eq(port.payload), tvalid.eq(port.valid), port.ready.eq(tready)]
        if self.learner.guards_channel:
            m.d.comb += self.channel_error.eq(core.channel_error)
        pred = AXIS_BUSES["m"][0]
        tlast, tkeep = getattr(self, f"{pred}_tlast"), getattr(self, f"{pred}_tkeep")
        m.d.comb += tkeep.eq((1 << len(tkeep)) - 1)
        if self.packet == 1:
            m.d.comb += tlast.eq(1)
        else:  # predictions taken since the packet began
            count = Signal(range(self.packet), name="pred_in_packet")
            m.d.comb += tlast.eq(count == self.packet - 1)
            with m.If(core.m.valid & core.m.ready):
                m.d.sync += count.eq(Mux(tlast, 0, count + 1))
        return m
