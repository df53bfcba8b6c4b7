"""AXI4-Stream wrapper of the learner for Vivado block designs.

Renames the learner's streams to the AXI4-Stream signal names Vivado infers
interfaces from (``<bus>_tdata``, ``_tvalid``, ``_tready``; ARM IHI 0051,
"AMBA AXI4-Stream Protocol Specification"), pads every ``tdata`` to whole
bytes (upper bits zero on outputs, ignored on inputs) and uses ``aclk`` with
the active-low ``aresetn``.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .learner import OnchipLearner


#: AXI4-Stream bus of each learner stream, and whether the learner is its sink (an input).
AXIS_BUSES = {"s": ("s_axis_sample", True), "m": ("m_axis_pred", False),
              "pc": ("s_axis_param", True), "pr": ("m_axis_param", False)}


def tdata_width(width: int) -> int:
    """Bits of a ``tdata`` carrying a payload of ``width`` bits: the next multiple of 8."""
    return 8 * ((width + 7) // 8)


class AxisLearner(wiring.Component):
    """:class:`OnchipLearner` with AXI4-Stream port names.

    Ports:
        aclk, aresetn: In(1), clock and active-low synchronous reset.
        s_axis_sample_{tdata,tvalid,tready}: the sample stream (learner ``s``).
        m_axis_pred_{tdata,tvalid,tready}: the prediction stream (``m``).
        s_axis_param_{tdata,tvalid,tready}: parameter commands (``pc``).
        m_axis_param_{tdata,tvalid,tready}: parameter responses (``pr``).
    Each ``tdata`` is the learner payload zero-padded to a multiple of 8 bits
    (:func:`onchip.hw.interface.stream_layouts`): a sample is x[0..n_in-1], y[0..n_out-1]
    (a target in ``act`` or an error dL/dy_hat in ``grad``), then the 2-bit ``kind``
    (0 TARGET, 1 PREDICT, 2 ERROR; :class:`onchip.model.SampleKind`); a prediction is
    pred[0..n_out-1] (``act``), then ``decision`` (index of the largest output, lowest on
    a tie; sign for one output). See hw/README.md, "The stream protocol".

    Args:
        learner: the core to wrap.
    """

    def __init__(self, learner: OnchipLearner):
        self.learner = learner
        ports = {"aclk": In(1), "aresetn": In(1)}
        self._map = [(bus, getattr(learner, stream), learner.layouts[stream].size, sink)
                     for stream, (bus, sink) in AXIS_BUSES.items()]
        for name, _, width, sink in self._map:
            ports[f"{name}_tdata"] = (In if sink else Out)(tdata_width(width))
            ports[f"{name}_tvalid"] = (In if sink else Out)(1)
            ports[f"{name}_tready"] = (Out if sink else In)(1)
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
        return m
