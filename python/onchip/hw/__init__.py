"""Hardware generators: the fixed-point online learners as Amaranth 0.5 components.

:func:`generate` turns a :class:`~onchip.spec.LearnerSpec` into Verilog of
:class:`~onchip.hw.learner.OnchipLearner` (module ``onchip_learner``), the
AXI4-Stream wrapper (``onchip_learner_axis``) and a JSON-able description of
ports, payload fields, formats, latency and initiation interval. The design
is bit-exact with :class:`onchip.model.GoldenLearner` in the same schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..spec import LearnerSpec

__all__ = ["Design", "PARALLEL_MLP_MAX_PARAMS", "build_learner", "generate", "TOP"]

#: Module name of the learner core in the generated Verilog.
TOP = "onchip_learner"


@dataclass(frozen=True)
class Design:
    """A generated learner.

    Attributes:
        verilog: Verilog text of the core, top module :attr:`top`.
        top: the core's module name (``"onchip_learner"``).
        info: JSON-able dict: ``ports`` (name -> {"dir", "width"}), ``payload`` (stream ->
            field -> {"offset", "width", "format" where the field has one}, read from the
            stream layouts of :mod:`onchip.hw.interface`), ``formats``,
            ``latency_cycles_prediction``, ``latency_cycles_update``, ``initiation_interval``,
            ``staleness``, ``min_staleness``, ``param_count``,
            ``param_addr_width``, ``param_storage`` (``"memory"``: RAM, ``"registers"``:
            flip-flops), ``reset_cycles`` (after reset, before a sample is taken: the RAM
            reload, then its last word through the parameter port's stages),
            ``reset_cycles_command`` (after reset, before a parameter command is taken: the
            reload), ``datapath``, ``stages``, ``spec``.
        axis_verilog: Verilog of the AXI4-Stream wrapper (module ``<top>_axis``, core inside).
    """

    verilog: str
    top: str
    info: dict
    axis_verilog: str = field(default="", repr=False)


def _ports(component) -> dict:
    from amaranth.hdl import Value
    from amaranth.lib import wiring

    ports = {}
    for path, member, value in component.signature.flatten(component):
        ports["__".join(map(str, path))] = {
            "dir": "in" if member.flow == wiring.In else "out",
            "width": len(Value.cast(value)),
        }
    ports["clk"] = {"dir": "in", "width": 1}
    ports["rst"] = {"dir": "in", "width": 1}
    return dict(sorted(ports.items()))


def _payload_fields(learner) -> dict:
    """Offset and width of every payload field, read from the learner's stream layouts
    (:func:`onchip.hw.interface.payload_leaves`), with the fixed-point format of the fields that have one."""
    from .interface import payload_leaves

    f = learner.spec.formats
    formats = {"s": {"x": f.input, "y": f.act}, "m": {"pred": f.act}, "pc": {"data": f.coef}, "pr": {"data": f.coef}}
    out = {}
    for stream, layout in learner.layouts.items():
        out[stream] = {}
        for member, name, fld in payload_leaves(layout):
            entry = {"offset": fld.offset, "width": fld.width}
            if member in formats[stream]:
                entry["format"] = str(formats[stream][member])
            out[stream][name] = entry
    return out


#: Largest parallel MLP generated: every weight is a register with its own multiplier, and past
#: a few thousand of them Amaranth's Verilog conversion runs out of memory (a 64-64-32-10
#: network, 6570 parameters, does); the serial datapath has no such limit
PARALLEL_MLP_MAX_PARAMS = 2048


def build_learner(spec: LearnerSpec, theta=None):
    """The Amaranth component of ``spec``: :class:`~onchip.hw.learner.OnchipLearner`, or
    :class:`~onchip.hw.mlp_serial.SerialMlpLearner` for ``datapath = "serial"``. Both have
    the same ports and protocol.

    Raises:
        ValueError: as :func:`generate`.
    """
    from .learner import OnchipLearner

    n = spec.parameter_count()
    if spec.kind == "mlp" and spec.datapath == "parallel" and n > PARALLEL_MLP_MAX_PARAMS:
        raise ValueError(
            f"datapath='parallel' MLP {list(spec.widths)} has {n} parameters, more than the "
            f"{PARALLEL_MLP_MAX_PARAMS} a multiplier-per-weight datapath is generated for; "
            f"use datapath='serial' (weights in RAM, one MAC lane per neuron)"
        )
    if spec.datapath == "serial":
        from .mlp_serial import SerialMlpLearner

        return SerialMlpLearner(spec, theta)
    return OnchipLearner(spec, theta)


def generate(spec: LearnerSpec, *, axis: bool = True, theta=None) -> Design:
    """Generate the Verilog of a learner and describe it.

    Args:
        spec: the learner; ``spec.schedule`` and ``spec.staleness`` select the schedule (a
            pipelined staleness below the pipeline's minimum is refused), ``spec.datapath``
            the MLP datapath.
        axis: also convert the AXI4-Stream wrapper (``Design.axis_verilog``).
        theta: raw reset values of the parameters (P,) (default: the golden model's
            initial parameters), e.g. an imported network.

    Returns:
        :class:`Design`.

    Raises:
        ValueError: ``spec`` is not a LearnerSpec, a pipelined staleness the
            pipeline cannot meet (the message gives the minimum), a parallel MLP of more
            than :data:`PARALLEL_MLP_MAX_PARAMS` parameters, or a bad ``theta``.
    """
    if not isinstance(spec, LearnerSpec):
        raise ValueError(f"spec must be a LearnerSpec, got {type(spec).__name__}")
    from amaranth.back import verilog

    from .axis import AxisLearner

    learner = build_learner(spec, theta)
    info = {
        "top": TOP,
        "schedule": "pipelined" if learner.pipelined else "sequential",
        "staleness": learner.staleness,
        "min_staleness": learner.min_staleness,
        "latency_cycles_prediction": learner.latency_prediction,
        "latency_cycles_update": learner.latency_update,
        "initiation_interval": learner.initiation_interval,
        "stages": {"prediction": learner.stages["prediction"], "read": list(learner.stages["read"]),
                   "update": list(learner.stages["update"]), "port": learner.stages["port"]},
        "param_count": learner.n_params,
        "param_addr_width": learner.addr_width,
        "param_storage": learner.param_storage,
        "reset_cycles": learner.reset_cycles,
        "reset_cycles_command": learner.reset_cycles_command,
        "datapath": spec.datapath,
        "ports": _ports(learner),
        "payload": _payload_fields(learner),
        "formats": spec.formats.as_dict(),
        "spec": spec.to_dict(),
    }
    text = verilog.convert(learner, name=TOP, emit_src=False)
    axis_text = ""
    if axis:
        axis_text = verilog.convert(AxisLearner(build_learner(spec, theta)), name=f"{TOP}_axis", emit_src=False)
    return Design(verilog=text, top=TOP, info=info, axis_verilog=axis_text)
