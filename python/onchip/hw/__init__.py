"""Hardware generators: the fixed-point online learners as Amaranth 0.5 components.

:func:`generate` turns a :class:`~onchip.spec.LearnerSpec` into Verilog of
:class:`~onchip.hw.learner.OnchipLearner` (module ``<top>``, default ``onchip_learner``; every
submodule named ``<top>.<path>``, so learners of different names share no module), the
AXI4-Stream wrapper (``<top>_axis``) and a JSON-able description (:mod:`onchip.hw.description`:
ports, payload fields, handshake, reset, formats, latency and initiation interval), which is also
the comment at the top of each Verilog file. The design is bit-exact with
:class:`onchip.model.GoldenLearner` in the same schedule.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..spec import LearnerSpec, load_spec
from .names import DEFAULT_TOP, check_top

__all__ = ["Design", "PARALLEL_MLP_MAX_PARAMS", "build_learner", "check_buildable", "check_top", "clocked", "generate", "TOP"]

#: Module name of the learner core in the generated Verilog when no ``top`` is given.
TOP = DEFAULT_TOP


@dataclass(frozen=True)
class Design:
    """A generated learner.

    Attributes:
        verilog: Verilog text of the core, top module :attr:`top`, headed by the comment of
            :func:`onchip.hw.description.verilog_header`.
        top: the core's module name (default ``"onchip_learner"``).
        info: JSON-able dict of :func:`onchip.hw.description.describe`: ``ports`` (name ->
            {"dir", "width", "meaning"}), ``payload`` (stream -> field -> {"offset", "width",
            "signed", "format" where the field has one, "meaning"}, read from the stream layouts of
            :mod:`onchip.hw.interface`), ``axis`` (the wrapper's ports and byte-padded ``tdata``),
            ``handshake``, ``reset``, ``formats``, ``latency_cycles_prediction``,
            ``latency_cycles_update``, ``initiation_interval``, ``timing``, ``stages``,
            ``staleness``, ``min_staleness``, ``param_count``, ``param_addr_width``,
            ``param_storage`` (``"memory"``: RAM, ``"registers"``: flip-flops),
            ``parameter_layout``, ``reset_cycles`` (after reset, before a sample is taken: the RAM
            reload, then its last word through the parameter port's stages),
            ``reset_cycles_command`` (after reset, before a parameter command is taken: the
            reload), ``architecture``, ``datapath``, ``spec`` (no ``staleness`` when sequential),
            ``onchip_version``, ``spec_sha256``, ``definitions``.
        axis_verilog: Verilog of the AXI4-Stream wrapper (module ``<top>_axis``, core inside).
    """

    verilog: str
    top: str
    info: dict
    axis_verilog: str = field(default="", repr=False)


#: Largest parallel MLP generated: every weight is a register with its own multiplier, and past
#: a few thousand of them Amaranth's Verilog conversion runs out of memory (a 64-64-32-10
#: network, 6570 parameters, does); the serial datapath has no such limit
PARALLEL_MLP_MAX_PARAMS = 2048


def check_buildable(spec: LearnerSpec) -> None:
    """The RTL generator's limits beyond the spec's own validation (the golden model, the float twin
    and the HLS C++ take such specs), checked without building anything.

    Raises:
        ValueError: naming the field, as the spec file spells it: ``datapath = "parallel"`` for an MLP
            of more than :data:`PARALLEL_MLP_MAX_PARAMS` parameters (a multiplier per weight),
            ``channels = N`` (N > 1) on the serial datapath, or ``staleness = D`` below the pipeline's
            minimum (:func:`onchip.hw.learner.check_staleness`).
    """
    n = spec.parameter_count()
    if spec.kind == "mlp" and spec.datapath == "parallel" and n > PARALLEL_MLP_MAX_PARAMS:
        raise ValueError(
            f'datapath = "parallel": the MLP {list(spec.widths)} has {n} parameters, more than the '
            f"{PARALLEL_MLP_MAX_PARAMS} a multiplier-per-weight datapath is generated for; "
            f'use datapath = "serial" (weights in RAM, one MAC lane per neuron)'
        )
    if spec.channels > 1 and spec.datapath == "serial":
        raise ValueError(f'channels = {spec.channels}: many channels are built on the parallel datapath; '
                         f'datapath = "serial" has one channel')
    if spec.datapath == "parallel":
        from .learner import check_staleness
        from .interface import single_channel

        check_staleness(single_channel(spec))


def build_learner(spec: LearnerSpec, theta=None, dsp: str | None = None):
    """The Amaranth component of ``spec``: :class:`~onchip.hw.learner.OnchipLearner`, or for
    ``datapath = "serial"`` :class:`~onchip.hw.mlp_serial.SerialMlpLearner` (MLP) or
    :class:`~onchip.hw.kan_serial.SerialKanLearner` (KAN). All have the same ports and protocol.
    ``dsp``: as :func:`generate`.

    Raises:
        ValueError: as :func:`generate`.
    """
    from .dsp import check_dsp
    from .learner import OnchipLearner

    check_dsp(dsp)
    check_buildable(spec)
    if spec.datapath == "serial" and spec.kind == "kan":
        from .kan_serial import SerialKanLearner as component
    elif spec.datapath == "serial":
        from .mlp_serial import SerialMlpLearner as component
    else:
        component = OnchipLearner
    learner = component.__new__(component)
    try:
        learner.__init__(spec, theta, dsp=dsp)
    except BaseException:
        # refused while being built (a staleness, a theta): Amaranth would report it "created but never used"
        learner._MustUse__silence = True
        raise
    return learner


def generate(spec: "LearnerSpec | str | os.PathLike", *, axis: bool = True, theta=None, top: str = TOP,
             dsp: str | None = None, packet: int = 1) -> Design:
    """Generate the Verilog of a learner and describe it.

    Args:
        spec: the learner (a spec, a preset name or a spec TOML file, as
            :func:`onchip.spec.load_spec`); ``spec.schedule`` and ``spec.staleness`` select the schedule (a
            pipelined staleness below the pipeline's minimum is refused), ``spec.datapath``
            the MLP datapath.
        axis: also convert the AXI4-Stream wrapper (``Design.axis_verilog``).
        theta: raw reset values of the parameters (P,) (default: the golden model's
            initial parameters), e.g. an imported network.
        top: name of the core module (:func:`onchip.hw.names.check_top`); the wrapper is
            ``<top>_axis`` and every submodule ``<top>.<path>`` (``<top>_axis.learner.<path>``).
        dsp: None (products as ``*``, mapped by the synthesis tool), ``"ecp5"``: the ``fast``
            plan's registered products as MULT18X18D instances holding their product registers
            (:mod:`onchip.hw.dsp`; simulate with :func:`onchip.hw.dsp.mult18x18d_model`), or
            ``"ice40"``: those products generic with their factor registers marked ``keep``, out of SB_MAC16.
        packet: predictions per packet of the wrapper's prediction stream: ``m_axis_pred_tlast`` is
            high on the last of each (:class:`onchip.hw.axis.AxisLearner`).

    Returns:
        :class:`Design`.

    Raises:
        ValueError: ``spec`` is neither a LearnerSpec, a preset nor a spec file, a bad ``top`` (the message names ``--top``), a
            pipelined staleness the pipeline cannot meet (the message gives the minimum), a
            parallel MLP of more than :data:`PARALLEL_MLP_MAX_PARAMS` parameters, a bad ``theta``
            or ``dsp``, a bad ``packet`` (the message names ``--packet``).
    """
    spec = load_spec(spec)
    check_top(top)
    from .axis import check_packet

    check_packet(packet)
    from amaranth.back import verilog

    from .axis import AxisLearner
    from .description import describe, verilog_header

    learner = build_learner(spec, theta, dsp)
    info = describe(learner, top=top, packet=packet)
    text = verilog_header(info, "core") + verilog.convert(learner, name=top, emit_src=False)
    axis_text = ""
    if axis:
        axis_text = verilog_header(info, "axis") + verilog.convert(
            AxisLearner(build_learner(spec, theta, dsp), packet=packet), name=info["axis"]["top"], emit_src=False)
    return Design(verilog=text, top=top, info=info, axis_verilog=axis_text)


def clocked(design: Design, clock: dict) -> Design:
    """``design`` with ``info["clock"]`` replaced by ``clock`` (:func:`onchip.hw.description.clock_entry`)
    and the header of each Verilog file rendered again from it: what a flow writes beside the clock
    it constrains or the placement it measured."""
    from .description import strip_header, verilog_header

    info = {**design.info, "clock": dict(clock)}
    axis = verilog_header(info, "axis") + strip_header(design.axis_verilog) if design.axis_verilog else ""
    return Design(verilog=verilog_header(info, "core") + strip_header(design.verilog), top=design.top, info=info,
                  axis_verilog=axis)
