"""What a generated learner says about itself, from one source.

:func:`describe` builds ``Design.info``, the JSON description ``onchip generate`` writes as
``<top>.json``: every port with its direction, width and meaning, the payload of every stream
field by field (bit offset, width, signedness, fixed-point format, meaning) as the stream layouts
of :mod:`onchip.hw.interface` define them, the AXI4-Stream wrapper's byte-padded ``tdata``, the
handshake and reset rules, latency and II in cycles, the timing plan, the parameter layout, and
the onchip version and spec hash. :func:`verilog_header` renders the same facts, read from that
dict, as the comment at the top of every generated Verilog file; :func:`verilog_template` and
:func:`vhdl_component` write the instantiation templates from it. A host driver needs nothing but
the JSON (``tests/json_host_driver.py`` is one, written against it alone).
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap

import numpy as np

from .axis import AXIS_BUSES, tdata_width
from .dsp import dsp_mapping

#: What each stream carries.
STREAMS = {"s": "sample", "m": "prediction", "pc": "parameter command", "pr": "parameter response"}

#: What each stage plan (``spec.stage_timing``, :func:`onchip.hw.plan.stage_plan`) trades.
TIMING_PLANS = {"compact": "fewest cycles: a multiply, its rounding and an adder tree share a cycle",
                "fast": "a register after every multiplier and carry chain: more cycles, higher fmax",
                "predict-first": "the forward path in the fewest stages, the prediction out of them at once; "
                                 "the update registered as in fast behind it"}

#: The meaning of the description's scalar keys (``definitions`` in the JSON).
DEFINITIONS = {
    "latency_cycles_prediction": "rising clock edges from the edge that takes a sample to the first edge at "
                                 "which its prediction can be taken on m",
    "latency_cycles_update": "rising clock edges from the edge that takes a sample to the edge that commits its "
                             "update in every layer (pipelined: with a sample taken every cycle)",
    "initiation_interval": "cycles between samples taken at full rate (s__valid and m__ready held high)",
    "reset_cycles": "with rst low from rising edge 0 on, s__ready stays low until edge reset_cycles (the reload "
                    "of the parameters kept in RAM from a ROM, then its last word through the parameter port's "
                    "stages); 0: a sample can be taken at edge 0",
    "reset_cycles_command": "with rst low from rising edge 0 on, pc__ready stays low until edge "
                            "reset_cycles_command (the reload); 0: a parameter command can be taken at edge 0",
    "staleness": "D, pipelined schedule: a sample does not see the updates of the D samples before it; "
                 "0: sequential (every sample sees every earlier update)",
    "min_staleness": "the smallest D the pipeline allows at II = 1",
    "dsp": "the products' mapping the Verilog holds: generic (the synthesis tool maps '*'), ecp5 (MULT18X18D "
           "instances holding the product registers) or ice40 (factor registers kept out of SB_MAC16); "
           "dsp_note says which products, or why a choice mapped nothing",
    "schedule_note": "with channels: the schedule is sequential per channel (each channel a sequential learner), "
                     "and a pipelined schedule in the spec does not apply",
    "timing": "the stage plan: " + " or ".join(f"{k} ({v})" for k, v in TIMING_PLANS.items()),
    "stages": "stage of the prediction, of each layer's parameter read and update (stage 0: the cycle that "
              "takes the sample), and the parameter port's register stages",
    "spec_sha256": "SHA-256 of the 'spec' object of this description as Python's json.dumps(spec, "
                   "sort_keys=True, separators=(',', ':')) writes it",
    "clock": "constraint_mhz: the clock (MHz) the flow that wrote this folder constrains clk (aclk) to, with "
             "constraint saying where; freq_hz: the same as the FREQ_HZ of the IP's aclk interface in a block "
             "design; fmax_mhz: the highest clock of a placement in this folder (fmax saying which), else null",
    "lint": "Verilator -Wall warnings of the generated Verilog, waived for its own file by '// verilator lint_off' "
            "lines in its header, with why each is no defect",
    "initial_parameters_sha256": "SHA-256 of the reset values of the parameters (raw, flat index order) as "
                                 "little-endian int64",
}

#: The design choices behind a design's cycles, which every report of it carries beside its numbers
#: (keys of :func:`describe`'s dict; ``onchip synth`` and ``onchip pnr`` copy them into report.json).
PLAN_KEYS = ("datapath", "schedule", "staleness", "timing")

#: Verilator ``-Wall`` warnings the generated Verilog raises, waived for its own file by
#: ``// verilator lint_off`` lines in its header (a waiver ends with the file: a user's sources
#: keep every warning), each with why it is no defect. Amaranth writes every operand at its own
#: width and lets Verilog's sizing rules extend or truncate it (IEEE 1364-2005, 5.4); the tests
#: check the result bit for bit against the golden model.
LINT_WAIVERS = {
    "WIDTHEXPAND": "operands narrower than their expression, extended by Verilog's sizing rules as Amaranth means",
    "WIDTHTRUNC": "results wider than their target, truncated by the assignment as Amaranth means (the fixed-point "
                  "wrap)",
    "UNUSEDSIGNAL": "intermediate results of which a later slice keeps only some bits (the rounding drops the low "
                    "bits, saturation the high ones), and ports of submodules left open",
    "PROCASSINIT": "every register is declared with its reset value as initial value (its power-on value) and "
                   "assigned in an always block",
    "CASEINCOMPLETE": "case statements without a default: each process assigns its default before the case",
    "CMPCONST": "range checks against a constant that a field of this size always passes",
    "UNSIGNED": "comparisons of an unsigned value against 0, always true, from the same range checks",
    "DECLFILENAME": "every submodule <top>.<path> lives in the one file <top>.v",
}

#: The handshake rules every learner keeps (``handshake`` in the JSON).
HANDSHAKE = [
    "A word moves at a rising edge of the clock at which valid and ready are both high (AXI4-Stream, "
    "ARM IHI 0051).",
    "A source that raises valid keeps it high and the payload unchanged until the word moves: the learner "
    "does so on m and pr; the host must do so on s and pc.",
    "s__ready never depends on s__valid; pc__ready is high only while pc__valid is.",
    "Every sample taken gives one prediction on m, in order, made before the sample's own update; a "
    "prediction not taken holds the learner back (keep m__ready high for the stated II).",
    "A parameter command waits until no sample is in flight and every pending update is committed; while "
    "pc__valid is high no sample is taken (the predictions in flight must still be taken). Each command "
    "gives one response on pr: a write echoes the value written, a read gives theta[addr].",
]


def architecture(spec) -> str:
    """One line saying what the datapath of ``spec`` is (the ``architecture`` of the description)."""
    if spec.kind == "kan" and spec.datapath == "serial":
        return (f"serial KAN datapath: {spec.lanes} edge lane(s) per layer stepping over its edges, k+1 = "
                f"{spec.spline_order + 1} coefficients per edge and cycle read from RAM and written back")
    if spec.kind == "kan":
        return (f"KAN datapath: every edge of a layer at once (a B-spline unit per layer input, "
                f"k+1 = {spec.spline_order + 1} coefficients per edge read from RAM, an adder tree per output)")
    if spec.datapath == "serial":
        return "serial MLP datapath: one multiply-accumulate lane per neuron stepping over the inputs, weights in RAM"
    return "parallel MLP datapath: a multiplier per weight, every weight in a register"


def port_table(component, *, clock: bool) -> dict:
    """Port name -> {"dir", "width"} of an Amaranth component's signature, sorted by name;
    ``clock`` adds the ``clk`` and ``rst`` that Verilog conversion gives the ``sync`` domain."""
    from amaranth.hdl import Value
    from amaranth.lib import wiring

    ports = {}
    for path, member, value in component.signature.flatten(component):
        ports["__".join(map(str, path))] = {"dir": "in" if member.flow == wiring.In else "out",
                                            "width": len(Value.cast(value))}
    if clock:
        ports["clk"] = {"dir": "in", "width": 1}
        ports["rst"] = {"dir": "in", "width": 1}
    return dict(sorted(ports.items()))


def _field_meaning(stream: str, member: str, name: str) -> str:
    index = name[len(member):]
    return {
        ("s", "x"): f"input feature {index}",
        ("s", "y"): f"output {index}: its target (kind TARGET) or the error dL/dy_hat (kind ERROR, in the error "
                    f"format); ignored for PREDICT",
        ("s", "kind"): "what the sample asks for; 3 is reserved and acts as PREDICT",
        ("s", "channel"): "the channel (independent learner) the sample belongs to, 0 .. channels - 1",
        ("pc", "channel"): "the channel whose parameter theta[channel, addr] is read or written, 0 .. channels - 1",
        ("m", "pred"): f"prediction of output {index}, made before the sample's own update",
        ("m", "decision"): "index of the largest prediction, the lowest on a tie; one output: 1 when pred0 >= 0",
        ("pc", "data"): "the value to write (write = 1); ignored by a read",
        ("pc", "addr"): "flat parameter index 0 .. param_count - 1 (parameter_layout)",
        ("pc", "write"): "1: write data to theta[addr]; 0: read theta[addr]",
        ("pr", "data"): "the value read, or the value written",
    }[stream, member]


def y_encoding(formats, width: int) -> dict:
    """How a ``y`` field of ``width`` bits carries its value, per sample kind (``encoding`` of the
    field in the JSON): TARGET the raw integer of the output format (``formats.y``), ERROR that of ``grad``
    (value * 2**frac_bits, the format's own scale: the two are not aligned to one binary point),
    in the field's low ``bits`` bits and extended to ``width`` (``extend``: ``sign`` for a signed
    format, ``zero`` for an unsigned one); PREDICT ignores the field. A TARGET's field is read
    whole, as one signed number (:func:`onchip.hw.interface.y_field_shape`): a target not so
    extended is another target."""
    def one(fmt):
        return {"format": str(fmt), "bits": fmt.width, "frac_bits": fmt.frac_bits,
                "extend": "sign" if fmt.signed else "zero", "field_bits": width}

    return {"TARGET": one(formats.y), "ERROR": one(formats.grad), "PREDICT": "ignored (send 0)"}


def _encoding_line(name: str, enc: dict) -> str:
    def one(kind, e):
        ext = f", {e['extend']}-extended to {e['field_bits']}" if e["bits"] < e["field_bits"] else ""
        return f"{kind} {e['format']} raw (value * 2^{e['frac_bits']}) in its {e['bits']} low bits{ext}"

    return f"{name} by kind: " + "; ".join(one(k, enc[k]) for k in ("TARGET", "ERROR")) + "; PREDICT ignored"


def payload_table(learner) -> dict:
    """Stream -> field -> {"offset", "width", "signed", "format" and "error_format" where the field
    has them, "encoding" for ``y`` (:func:`y_encoding`), "meaning", "values" for ``kind``}, read from the learner's stream layouts
    (:func:`onchip.hw.interface.payload_leaves`)."""
    from amaranth.hdl import Shape

    from ..model import SampleKind
    from .interface import payload_leaves

    f = learner.spec.formats
    formats = {"s": {"x": f.input, "y": f.y}, "m": {"pred": f.y}, "pc": {"data": f.coef}, "pr": {"data": f.coef}}
    out = {}
    for stream, layout in learner.layouts.items():
        out[stream] = {}
        for member, name, fld in payload_leaves(layout):
            entry = {"offset": fld.offset, "width": fld.width, "signed": Shape.cast(fld.shape).signed}
            if member in formats[stream]:
                entry["format"] = str(formats[stream][member])
            if (stream, member) == ("s", "y"):
                entry["error_format"] = str(f.grad)
                entry["encoding"] = y_encoding(f, fld.width)
            entry["meaning"] = _field_meaning(stream, member, name)
            if (stream, member) == ("s", "kind"):
                entry["values"] = {k.name: int(k) for k in SampleKind}
            out[stream][name] = entry
    return out


def _port_meaning(what: str, sink: bool, part: str, payload: str, packet: int = 1) -> str:
    if part == "last" and sink:
        return f"{what} stream: end of a packet, taken and ignored (every word stands alone)"
    if part == "last":
        return (f"{what} stream: high on the last word of every packet of {packet} (the {packet}th, "
                f"{2 * packet}th, ... since reset)" if packet > 1 else f"{what} stream: always high (packets of 1)")
    if part == "keep":
        return f"{what} stream: all ones, every byte of every transfer is data"
    if part == "valid":
        return f"{what} stream: {'the host offers' if sink else 'the learner offers'} a word"
    if part == "ready":
        return f"{what} stream: {'the learner takes' if sink else 'the host takes'} the word"
    return f"{what} word: the fields of {payload}"


#: meaning of the sticky flag of a design of N channels, N not a power of two
CHANNEL_ERROR = ("high from the cycle a sample naming a channel >= channels was taken (and dropped: no "
                 "prediction, no update) or a parameter command naming one was taken (it reads and writes "
                 "no bank and is answered 0) until reset")


def core_ports(learner) -> dict:
    """:func:`port_table` of the core with each port's ``meaning``."""
    ports = port_table(learner, clock=True)
    for name, entry in ports.items():
        if name == "clk":
            entry["meaning"] = "clock; everything happens at its rising edge"
        elif name == "rst":
            entry["meaning"] = "reset: synchronous, active high"
        elif name == "channel_error":
            entry["meaning"] = CHANNEL_ERROR
        else:
            stream, part = name.split("__")
            sink = ports[f"{stream}__payload"]["dir"] == "in"
            entry["meaning"] = _port_meaning(STREAMS[stream], sink, part, f"payload.{stream}")
    return ports


def axis_description(learner, top: str, packet: int = 1) -> dict:
    """The ``axis`` entry: the AXI4-Stream wrapper (:class:`onchip.hw.axis.AxisLearner`) of ``learner``
    as the core ``top`` names it, with ``packet`` predictions per TLAST: its ports (with meaning),
    clock, reset, ``packet``, ``tlast`` (what TLAST means on each bus), ``tkeep`` and every bus's
    ``tdata``: the core payload from bit 0, zero-padded to whole bytes."""
    from .axis import AxisLearner

    wrapper = AxisLearner(learner, packet=packet)
    wrapper._MustUse__silence = True  # described, never elaborated
    ports = port_table(wrapper, clock=False)
    tdata = {}
    stream_of = {bus: (stream, sink) for stream, (bus, sink) in AXIS_BUSES.items()}
    for stream, (bus, sink) in AXIS_BUSES.items():
        width = learner.layouts[stream].size
        total = tdata_width(width)
        tdata[bus] = {"stream": stream, "width": total, "payload_width": width,
                      "padding": {"offset": width, "width": total - width,
                                  "value": "ignored by the learner (send 0)" if sink else "always 0"}}
    for name, entry in ports.items():
        if name == "aclk":
            entry["meaning"] = "clock; everything happens at its rising edge (the core's clk)"
        elif name == "aresetn":
            entry["meaning"] = "reset: synchronous, active low (the core's rst inverted)"
        elif name == "channel_error":
            entry["meaning"] = CHANNEL_ERROR
        else:
            bus, part = name.rsplit("_t", 1)
            stream, sink = stream_of[bus]
            pad = tdata[bus]["padding"]
            where = f"payload.{stream} from bit 0" + (f", then padding {_bits(pad['offset'], pad['width'])}"
                                                        if pad["width"] else "")
            entry["meaning"] = _port_meaning(STREAMS[stream], sink, part, where, packet)
    pred = AXIS_BUSES["m"][0]
    tlast = {bus: (_port_meaning(STREAMS[stream], sink, "last", "", packet) if f"{bus}_tlast" in ports
                   else "none (every response stands alone)") for stream, (bus, sink) in AXIS_BUSES.items()}
    return {
        "top": f"{top}_axis",
        "clock": "aclk",
        "reset": {"port": "aresetn", "synchronous": True, "active": "low", "assert_cycles": 1},
        "ports": ports,
        "packet": packet,
        "tlast": tlast,
        "tkeep": {pred: "all ones"},
        "tdata": tdata,
        "byte_order": "tdata bit 0 is payload bit 0; byte k of a transfer is tdata[8k+7:8k] (little-endian)",
    }


def parameter_layout(spec) -> list[dict]:
    """The flat parameter index (the parameter port's ``addr``) per layer and array, row-major:
    KAN ``coef[j][i][c]`` (edge from input i to output j, coefficient c of G + k), MLP
    ``weight[j][i]`` then ``bias[j]`` (:func:`onchip.model.golden.layout`)."""
    from ..model.golden import layout

    out = []
    for l, layer in enumerate(layout(spec)):
        if spec.kind == "kan":
            out.append({"layer": l, "name": "coef", "offset": layer.offset,
                        "shape": [layer.n_out, layer.n_in, spec.n_coef]})
        else:
            out.append({"layer": l, "name": "weight", "offset": layer.offset, "shape": [layer.n_out, layer.n_in]})
            out.append({"layer": l, "name": "bias", "offset": layer.offset + layer.n_in * layer.n_out,
                        "shape": [layer.n_out]})
    return out


def spec_dict(spec) -> dict:
    """``spec.to_dict()`` as the description holds it: without ``staleness`` for a sequential spec,
    where it means nothing (it still loads: :meth:`LearnerSpec.from_dict` takes the default)."""
    d = spec.to_dict()
    if spec.schedule != "pipelined":
        d.pop("staleness")
    return d


def sha256_of_spec(d: dict) -> str:
    """``spec_sha256`` of a spec dict (:data:`DEFINITIONS`)."""
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def clock_entry(*, mhz: float | None = None, source: str | None = None, freq_hz_param: bool = False,
                fmax_mhz: float | None = None, fmax_source: str | None = None) -> dict:
    """The ``clock`` entry of a description: the clock a flow constrains the learner to
    (``constraint_mhz``, and ``freq_hz`` where a block design reads it as the clock interface's
    FREQ_HZ) and where it is set; ``fmax_mhz`` of a placement in the same folder and where it was
    measured. Without arguments: no flow, no constraint, no placement (``onchip generate``)."""
    return {
        "constraint_mhz": mhz,
        "freq_hz": None if mhz is None or not freq_hz_param else round(mhz * 1e6),
        "constraint": source or "onchip generate sets none; the flow that builds the learner does: onchip "
                                "vivado, onchip pnr",
        "fmax_mhz": fmax_mhz,
        "fmax": fmax_source or "no placement in this folder",
    }


def clock_line(clock: dict) -> str:
    """One header line of a ``clock`` entry (:func:`clock_entry`)."""
    mhz = "none" if clock["constraint_mhz"] is None else f"{clock['constraint_mhz']:g} MHz"
    if clock["freq_hz"] is not None:
        mhz += f", FREQ_HZ {clock['freq_hz']}"
    fmax = clock["fmax"] if clock["fmax_mhz"] is None else f"{clock['fmax_mhz']:.2f} MHz ({clock['fmax']})"
    return f"Clock constraint: {mhz} ({clock['constraint']}). fmax: {fmax}."


def _channel_entries(learner) -> dict:
    """``channels``, and for N > 1 the intervals the channel order sets: ``initiation_interval_channel``
    (between two samples of one channel: a burst of one channel), ``initiation_interval_round_robin``
    (mean, round-robin channels; 1 once N >= the former)."""
    n = getattr(learner, "channels", 1)
    if n == 1:
        return {}
    return {"channels": n, "initiation_interval_channel": learner.sequential_ii,
            "initiation_interval_round_robin": learner.round_robin_interval,
            "schedule_note": schedule_note(learner.spec)}


def schedule_note(spec) -> str:
    """What ``schedule`` means for a spec of N > 1 channels: each channel a sequential learner, and
    where the spec asks for the pipelined schedule, that it does not apply (``spec.built_schedule``)."""
    note = f"{spec.schedule_words}: each of the {spec.channels} channels is a sequential learner on its own sub-stream"
    return note + (f"; {spec.schedule_not_applied}" if spec.schedule_not_applied else "")


def describe(learner, *, top: str, packet: int = 1) -> dict:
    """``Design.info`` of ``learner`` (an :class:`~onchip.hw.learner.OnchipLearner` or
    :class:`~onchip.hw.mlp_serial.SerialMlpLearner`) generated as module ``top``; JSON-able.

    Returns:
        ``top``, ``onchip_version``, ``spec_sha256``, ``initial_parameters_sha256``,
        ``architecture``, ``schedule``, ``staleness``, ``min_staleness``, (N > 1 channels) ``channels``,
        ``initiation_interval_channel``, ``initiation_interval_round_robin``, ``schedule_note``,
        ``latency_cycles_prediction``, ``latency_cycles_update``, ``initiation_interval`` (cycles),
        ``timing`` (the stage plan: compact or fast), ``dsp``, ``dsp_note``, ``stages``, ``param_count``,
        ``param_addr_width``, ``param_storage`` (``"memory"``: RAM, ``"registers"``), ``parameter_layout``,
        ``reset_cycles``, ``reset``, ``clock`` (:func:`clock_entry`: none until a flow sets one), ``handshake``, ``datapath``, ``ports``, ``payload``, ``axis``,
        ``formats`` (``ap_fixed`` strings), ``lint`` (the Verilator warnings waived in the Verilog files,
        :data:`LINT_WAIVERS`), ``spec`` (:func:`spec_dict`), ``definitions``.
    """
    from .. import __version__

    spec = learner.spec
    d = spec_dict(spec)
    stages = learner.stages
    return {
        "top": top,
        "onchip_version": __version__,
        "spec_sha256": sha256_of_spec(d),
        "initial_parameters_sha256": hashlib.sha256(np.asarray(learner.theta0, "<i8").tobytes()).hexdigest(),
        "architecture": architecture(spec),
        "schedule": "pipelined" if learner.pipelined else "sequential",
        "staleness": learner.staleness,
        "min_staleness": learner.min_staleness,
        "latency_cycles_prediction": learner.latency_prediction,
        "latency_cycles_update": learner.latency_update,
        "initiation_interval": learner.initiation_interval,
        **_channel_entries(learner),
        "timing": spec.stage_timing,
        **dict(zip(("dsp", "dsp_note"), dsp_mapping(spec, getattr(learner, "dsp", None)))),
        "stages": {"prediction": stages["prediction"], "read": list(stages["read"]),
                   "update": list(stages["update"]), "port": stages["port"]},
        "param_count": learner.n_params,
        "param_addr_width": learner.addr_width,
        "param_storage": learner.param_storage,
        "parameter_layout": parameter_layout(spec),
        "reset_cycles": learner.reset_cycles,
        "reset_cycles_command": learner.reset_cycles_command,
        "reset": {"port": "rst", "synchronous": True, "active": "high", "assert_cycles": 1},
        "clock": clock_entry(),
        "handshake": list(HANDSHAKE),
        "datapath": spec.datapath,
        "ports": core_ports(learner),
        "payload": payload_table(learner),
        "axis": axis_description(learner, top, packet),
        "formats": spec.formats.as_dict(),
        "lint": {"verilator_waived": dict(LINT_WAIVERS)},
        "spec": d,
        "definitions": dict(DEFINITIONS),
    }


# -- the same facts as text ---------------------------------------------------------------------
def _bits(offset: int, width: int) -> str:
    return f"[{offset}]" if width == 1 else f"[{offset + width - 1}:{offset}]"


def _field_line(name: str, e: dict) -> str:
    fmt = e.get("format") or ("signed" if e["signed"] else "unsigned")
    if "error_format" in e:
        fmt = f"target {fmt}, error {e['error_format']}"
    if "values" in e:
        fmt += " " + ", ".join(f"{v} {k}" for k, v in e["values"].items())
    return f"{name:<9} {_bits(e['offset'], e['width']):<8} {fmt}: {e['meaning']}"


def _port_lines(ports: dict) -> list[str]:
    width = max(len(n) for n in ports)
    return [f"  {e['dir']:<3} {e['width']:>3}  {n:<{width}}  {e['meaning']}" for n, e in ports.items()]


def description_lines(info: dict, which: str = "core") -> list[str]:
    """The facts of :func:`describe`'s ``info`` as lines of text, for the file of the core
    (``which="core"``) or of the AXI4-Stream wrapper (``"axis"``).

    Raises:
        ValueError: ``which`` is neither.
    """
    if which not in ("core", "axis"):
        raise ValueError(f"which must be 'core' or 'axis', got {which!r}")
    axis = info["axis"]
    name = info["top"] if which == "core" else axis["top"]
    spec = info["spec"]
    sched = info["schedule"] + (f", staleness D = {info['staleness']}" if info["staleness"] else "")
    if "schedule_note" in info:
        sched = info["schedule_note"]
    lines = [
        f"{name}: a fixed-point online learner (predict, then learn, on every sample), generated by onchip "
        f"{info['onchip_version']}.",
        f"Spec {spec.get('name') or 'custom'}: {spec['kind']} {spec['widths']}.",
        f"spec_sha256 {info['spec_sha256']}",
        f"initial_parameters_sha256 {info['initial_parameters_sha256']}",
        f"The same facts for programs: {info['top']}.json.",
        f"{info['architecture'][0].upper()}{info['architecture'][1:]}.",
        f"Schedule: {sched}. {info['param_count']} parameters, in "
        f"{'RAM (reloaded from a ROM after reset)' if info['param_storage'] == 'memory' else 'registers'}.",
        "",
    ]
    if which == "core":
        reset = (f"Clock clk (rising edge). Reset rst: synchronous, active high, at least one edge; with rst "
                 f"low from edge 0 on, the first sample can be taken at edge {info['reset_cycles']}, the first "
                 f"parameter command at edge {info['reset_cycles_command']}.")
        ports, pad = info["ports"], None
    else:
        reset = (f"Clock aclk (rising edge). Reset aresetn: synchronous, active low, at least one edge; with "
                 f"aresetn high from edge 0 on, the first sample can be taken at edge {info['reset_cycles']}.")
        ports, pad = axis["ports"], axis["tdata"]
    lines += [reset, clock_line(info["clock"]), "", "Ports (dir, bits, name, meaning):", *_port_lines(ports), ""]
    lines.append("Payloads: raw two's complement fields, lowest first (bits, format, meaning):")
    for stream, fields in info["payload"].items():
        what = STREAMS[stream]
        width = sum(e["width"] for e in fields.values())
        if pad is None:
            lines.append(f"  {stream}__payload, {what} ({width} bits):")
        else:
            bus = AXIS_BUSES[stream][0]
            t = pad[bus]
            tail = (f"; bits {_bits(t['padding']['offset'], t['padding']['width'])} padding, "
                    f"{t['padding']['value']}" if t["padding"]["width"] else "")
            lines.append(f"  {bus}_tdata, {what} ({t['width']} bits = {width} payload{tail}):")
        lines += [f"    {_field_line(n, e)}" for n, e in fields.items()]
        lines += [f"    {_encoding_line(n, e['encoding'])}" for n, e in fields.items() if "encoding" in e]
    if pad is not None:
        lines.append(f"  Byte order: {axis['byte_order']}.")
        lines += [f"  {bus}_tlast: {what}." for bus, what in axis["tlast"].items()]
        lines += [f"  {bus}_tkeep: {what}." for bus, what in axis["tkeep"].items()]
    rules = info["handshake"] if pad is None else [_axis_names(rule) for rule in info["handshake"]]
    lines += ["", "Handshake:", *[f"  - {rule}" for rule in rules], ""]
    st = info["stages"]
    lines += [
        f"Latency: prediction {info['latency_cycles_prediction']} cycles after the edge that takes the sample, "
        f"update committed after {info['latency_cycles_update']}; II {info['initiation_interval']} "
        f"cycle{'s' if info['initiation_interval'] != 1 else ''}.",
        f"Timing plan: {info['timing']} ({TIMING_PLANS[info['timing']]}); stages (0: the cycle that takes the sample): prediction {st['prediction']}, "
        f"parameter read per layer {st['read']}, update per layer {st['update']}, parameter port {st['port']}.",
        *([f"DSP mapping: {info['dsp']} ({info['dsp_note']})."] if "dsp" in info else []),
        "Formats: " + ", ".join(f"{k} {v}" for k, v in info["formats"].items()) + ".",
        "",
        "Lint: under Verilator -Wall these warnings are waived for this file alone (the lint_off lines below), none a "
        "defect:",
        *[f"  {name}: {why}" for name, why in info["lint"]["verilator_waived"].items()],
    ]
    return lines


def _axis_names(text: str) -> str:
    """``text`` with the core's stream port names (``s__ready``) as the wrapper's (``s_axis_sample_tready``)."""
    def bus(match):
        return f"{AXIS_BUSES[match[1]][0]}_t{'data' if match[2] == 'payload' else match[2]}"

    return re.sub(r"\b(s|m|pc|pr)__(valid|ready|payload)\b", bus, text)


def verilog_header(info: dict, which: str = "core") -> str:
    """:func:`description_lines` as a Verilog ``//`` comment block (lines wrapped at 110
    characters, continuations indented by 4), ending in a blank line."""
    out = []
    for line in description_lines(info, which):
        lead = len(line) - len(line.lstrip(" "))
        body = line.strip(" ")
        wrapped = textwrap.wrap(body, width=107 - lead, subsequent_indent="    ", break_on_hyphens=False,
                                break_long_words=False) or [""]
        out += [(" " * lead + w).rstrip() for w in wrapped]
    text = "".join(f"// {line}".rstrip() + "\n" for line in out)
    return text + "".join(f"// verilator lint_off {name}\n" for name in info["lint"]["verilator_waived"]) + "\n"


def strip_header(verilog: str) -> str:
    """Verilog text without the :func:`verilog_header` block at its top (the converter's own text)."""
    lines = verilog.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith("//"):
        n += 1
    if n and n < len(lines) and lines[n] == "\n":
        n += 1
    return "".join(lines[n:])


# -- instantiation templates --------------------------------------------------------------------
def _ports_of(info: dict, which: str) -> tuple[str, dict]:
    if which == "core":
        return info["top"], info["ports"]
    if which == "axis":
        return info["axis"]["top"], info["axis"]["ports"]
    raise ValueError(f"which must be 'core' or 'axis', got {which!r}")


def _range(width: int) -> str:
    return "" if width == 1 else f"[{width - 1}:0]"


def verilog_template(info: dict, which: str = "core") -> str:
    """``<module>_inst.v``: a wire per port (named ``<module>_<port>``) and an instance ``u_<module>``
    of the core (``which="core"``) or of the AXI4-Stream wrapper (``"axis"``); paste it into a module
    or ``include`` it, then drive the inputs and read the outputs."""
    name, ports = _ports_of(info, which)
    decl = [f"wire {_range(e['width']):<8} {name}_{p};" for p, e in ports.items()]
    width = max(len(d) for d in decl)
    lines = [f"// Instantiation template of {name} (onchip {info['onchip_version']}, spec_sha256 "
             f"{info['spec_sha256'][:16]}...): ports and payloads are described at the top of {name}.v and in "
             f"{info['top']}.json.",
             f"// Wires named {name}_<port>; drive the inputs, read the outputs.",
             *[f"{d:<{width}}  // {e['dir']}: {e['meaning']}" for d, (p, e) in zip(decl, ports.items())],
             f"{name} u_{name} ("]
    pw = max(len(p) for p in ports)
    items = [f"    .{p:<{pw}} ({name}_{p})" for p in ports]
    lines += [item + ("," if k < len(items) - 1 else "") for k, item in enumerate(items)]
    lines.append(");")
    return "\n".join(lines) + "\n"


def _vhdl_name(port: str) -> str:
    # a port name with a double underscore (s__payload) is no VHDL basic identifier: an extended one
    return f"\\{port}\\" if "__" in port else port


def vhdl_component(info: dict, which: str = "core") -> str:
    """``<module>_component.vhd``: a VHDL package ``<module>_pkg`` holding the component declaration
    of the core (``which="core"``) or of the AXI4-Stream wrapper (``"axis"``), for instantiating the
    Verilog module from VHDL (``use work.<module>_pkg.all;``), with an instance template in a comment.
    The core's ``<stream>__<part>`` ports are VHDL extended identifiers (``\\s__payload\\``), which keep
    the Verilog name as written."""
    name, ports = _ports_of(info, which)
    pw = max(len(_vhdl_name(p)) for p in ports)

    def vtype(e):
        return "std_logic" if e["width"] == 1 else f"std_logic_vector({e['width'] - 1} downto 0)"

    decl = [f"      {_vhdl_name(p):<{pw}} : {'in ' if e['dir'] == 'in' else 'out'} {vtype(e)}" for p, e in ports.items()]
    decl = [d + (";" if k < len(decl) - 1 else "") + f"  -- {e['meaning']}"
            for k, (d, e) in enumerate(zip(decl, ports.values()))]
    inst = [f"--     {_vhdl_name(p):<{pw}} => {name}_{p.replace('__', '_')}" + ("," if k < len(ports) - 1 else "")
            for k, p in enumerate(ports)]
    lines = [
        f"-- Component declaration of the Verilog module {name} (onchip {info['onchip_version']}, spec_sha256 "
        f"{info['spec_sha256'][:16]}...);",
        f"-- ports and payloads are described at the top of {name}.v and in {info['top']}.json.",
        "library ieee;",
        "use ieee.std_logic_1164.all;",
        "",
        f"package {name}_pkg is",
        f"  component {name} is",
        "    port (",
        *decl,
        "    );",
        "  end component;",
        f"end package {name}_pkg;",
        "",
        f"-- Instance (in an architecture that has 'use work.{name}_pkg.all;' and a signal per port):",
        f"--   u_{name} : {name}",
        "--   port map (",
        *inst,
        "--   );",
    ]
    return "\n".join(lines) + "\n"
