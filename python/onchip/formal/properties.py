"""The stream-protocol properties of a generated learner, as a SystemVerilog harness for SymbiYosys.

:func:`harness` writes a module ``onchip_props`` that instantiates the learner's generated Verilog
(the core ``<top>``, or its AXI4-Stream wrapper ``<top>_axis``) with every input free
(``anyseq``: any value in every cycle, reset included) and checks, as named immediate assertions,
the rules the design's own description states (``Design.info["handshake"]`` and ``["reset"]``):

=============================  ==========================================================================
property                       what it says (m: predictions, pr: parameter responses)
=============================  ==========================================================================
``<bus>_valid_held``           once an output's valid is high it stays high until ready (m, pr)
``<bus>_data_stable``          the output's data does not change while valid and not ready (m, pr)
``<bus>_padding_zero``         (AXI) the tdata bits above the payload are 0 (m, pr)
``pred_only_after_sample``     no prediction is offered that no accepted sample is owed
``samples_in_flight_bounded``  accepted samples not yet answered <= the pipeline's bound
``in_flight_matches_stages``   that count equals the occupied pipeline stages (the invariant that makes
                               the two above inductive: a lost or duplicated beat breaks it)
``nothing_valid_after_reset``  no output is valid in a cycle that follows a reset cycle
``no_sample_during_reload``    sample ready is low for ``reset_cycles`` cycles after reset
``no_command_during_reload``   command ready is low for ``reset_cycles_command`` cycles after reset
``nothing_valid_during_reload`` no sample is in flight or predicted for ``reset_cycles`` cycles after
                               reset, no response offered for ``reset_cycles_command`` cycles
``reload_counts_cycles``       the reload counter equals the cycles since reset (the reload's invariant)
``one_response_per_command``   commands accepted and responses taken differ by 0 or 1, and a response
                               is offered only when one is owed
``responses_match_port``       that difference equals the response offered plus a read on its way (the
                               invariant that makes the one above inductive)
``command_ready_needs_valid``  command ready is high only while command valid is
``no_sample_while_command``    while a command is offered no sample is taken
``command_only_when_drained``  a command is taken only when every sample's prediction has been taken
``channel_hazard``             (N > 1 channels) no sample is taken while a sample of its channel is in
                               one of the first II - 1 stages (II: between two samples of one channel,
                               ``initiation_interval_channel``): its update is not yet committed
``channel_guard``              (N channels, N not a power of two) ``channel_error`` is high exactly when a
                               sample or a parameter command naming a channel >= N was taken since
                               the last reset; such a sample is owed no prediction (the in-flight
                               count leaves it out), such a command its one response
=============================  ==========================================================================

Bounded response (:data:`RESPONSE_PROPERTIES`, with ``harness(..., response=True)``): the safety
properties above hold on a core that never accepts a sample; these two say it does its work in
the cycles it reports:

=============================  ==========================================================================
``sample_ready_after_reload``  s ready is high ``reset_cycles`` cycles after reset (the cycle the reload
                               ends), unless a command was offered since the reset
``prediction_within_latency``  with m ready held high, a sample's prediction is taken within
                               ``latency_cycles_prediction`` cycles of its acceptance
=============================  ==========================================================================

The host's side (samples and commands) is constrained only by assumptions of the AXI4-Stream
source rules (ARM IHI 0051, 2.2.1): valid, once raised, stays high and the data stable until the
transfer, except across a reset. The learner is never constrained.

:func:`readback_harness` writes the bounded companion ``read_returns_last_write``: for an
arbitrary address A (``anyconst``), a read of A answers the last value written to A, or the
initial parameter after a reset (with the parameter port alone: no sample offered);
``write_echoes_value``: a write answers the value written. With N > 1 channels the address is
(channel, index), both ``anyconst``. With N not a power of two, ``no_channel_answers_zero``: a
command naming a channel >= N (read or write) is answered 0, and ``read_returns_last_write`` then
also says that it wrote no bank.

Internal signals (the stage valid bits, the reload counter) are read through Yosys ``expose``
after ``flatten``: :func:`observed` lists them by the names the generators give them
(:mod:`onchip.hw.learner`, :mod:`onchip.hw.mlp_serial`, :func:`onchip.hw.interface.reload_from_rom`).

The method is k-induction over a property set strengthened by invariants (Sheeran, Singh,
Stalmarck, "Checking safety properties using induction and a SAT-solver", FMCAD 2000), the way
formal AXI property sets bound the beats in flight with a counter.
"""

from __future__ import annotations

import math

#: the learner's streams: name -> (core port prefix, AXI bus, the learner is its sink)
STREAMS = {"s": ("s__", "s_axis_sample", True), "m": ("m__", "m_axis_pred", False),
           "pc": ("pc__", "s_axis_param", True), "pr": ("pr__", "m_axis_param", False)}
#: the designs checked: the core (``<top>``) and its AXI4-Stream wrapper (``<top>_axis``)
LEVELS = ("core", "axis")

#: every property the protocol harness checks, in report order (``<bus>`` is m or pr)
PROTOCOL_PROPERTIES = (
    "m_valid_held", "m_data_stable", "pr_valid_held", "pr_data_stable",
    "pred_only_after_sample", "samples_in_flight_bounded", "in_flight_matches_stages",
    "nothing_valid_after_reset", "no_sample_during_reload", "no_command_during_reload",
    "nothing_valid_during_reload", "reload_counts_cycles",
    "one_response_per_command", "responses_match_port", "command_ready_needs_valid", "no_sample_while_command",
    "command_only_when_drained",
)
#: properties of the AXI wrapper only
AXIS_PROPERTIES = ("m_padding_zero", "pr_padding_zero")
#: the bounded-response properties (:func:`harness` with ``response``), checked in their own job
RESPONSE_PROPERTIES = ("sample_ready_after_reload", "prediction_within_latency")
#: the bounded read-back properties (:func:`readback_harness`)
READBACK_PROPERTIES = ("read_returns_last_write", "write_echoes_value")
#: the read-back harness's property of a design of N channels, N not a power of two
READBACK_CHANNEL_PROPERTIES = ("no_channel_answers_zero",)


def readback_properties(info: dict) -> tuple[str, ...]:
    """The properties :func:`readback_harness` writes for a design (``info``):
    :data:`READBACK_PROPERTIES`, and :data:`READBACK_CHANNEL_PROPERTIES` where the design guards its
    channel field (N not a power of two)."""
    return READBACK_PROPERTIES + (READBACK_CHANNEL_PROPERTIES if _guards(info) else ())


def protocol_properties(info: dict, level: str) -> tuple[str, ...]:
    """The protocol properties :func:`harness` writes for a design (``info``) at ``level``: all of
    :data:`PROTOCOL_PROPERTIES` (the reload ones only where parameters reload from a ROM after
    reset), plus :data:`AXIS_PROPERTIES` for ``"axis"``."""
    out = [p for p in PROTOCOL_PROPERTIES if _reloads(info) or p not in _RELOAD_ONLY]
    out += list(CHANNEL_PROPERTIES if _channels(info) > 1 else ())
    out += ["channel_guard"] if _guards(info) else []
    return tuple(out + list(AXIS_PROPERTIES if level == "axis" else ()))


#: properties of a design of N > 1 channels
CHANNEL_PROPERTIES = ("channel_hazard",)


def _channels(info: dict) -> int:
    return int(info.get("channels", 1))


def _guards(info: dict) -> bool:
    """The design drops a sample naming a channel >= N and raises ``channel_error`` (N not a power of two)."""
    return "channel_error" in info["ports"]


_RELOAD_ONLY = ("no_sample_during_reload", "no_command_during_reload", "nothing_valid_during_reload",
                "reload_counts_cycles")


def _reloads(info: dict) -> bool:
    return info["param_storage"] == "memory" or info["datapath"] == "serial"


def in_flight_bound(info: dict) -> int:
    """Most samples accepted and not yet answered on m: the prediction latency P pipelined (one
    per stage), ceil(P / II) sequential (a sample enters only II stages behind the last), 2 on
    the serial MLP (one in the output register, one in its forward pass)."""
    p, ii = info["latency_cycles_prediction"], info["initiation_interval"]
    if info["datapath"] == "serial":
        return 2
    if _channels(info) > 1:  # round-robin channels fill every stage
        return p
    return p if info["schedule"] == "pipelined" else math.ceil(p / ii)


def observed(info: dict, level: str) -> dict[str, str]:
    """Internal signals the harness reads: harness wire name -> the generated design's signal
    name after ``flatten`` (``learner.`` prefixed inside the AXI wrapper).

    * parallel datapath: ``v<s>`` = ``valid_s<s>`` for s = 1..P (the stage valid bits up to the
      prediction, :class:`onchip.hw.learner.OnchipLearner`);
      and ``rw<n>`` = ``read_wait<n>`` (a read on its way through the port's stages, n = 0 .. port);
    * serial MLP: ``fwd<l>`` = ``fwd_l<l>`` (layer l's forward pass), ``responding`` (the
      sequencer's RESPOND state) and ``out_valid`` = ``m__valid``;
    * where parameters reload: ``reload_count``;
    * N > 1 channels: ``c<s>`` = ``channel_s<s>`` (the channel of the sample at stage s) for
      s = 1 .. II - 1 (``initiation_interval_channel``), and their ``v<s>``.
    """
    pre = "learner." if level == "axis" else ""
    names = {}
    if info["datapath"] == "serial":
        for l in range(len(info["spec"]["widths"]) - 1):
            names[f"fwd{l}"] = f"{pre}fwd_l{l}"
        names["responding"] = f"{pre}responding"
        if level == "axis":
            names["out_valid"] = f"{pre}m__valid"
    else:
        for s in range(1, info["latency_cycles_prediction"] + 1):
            names[f"v{s}"] = f"{pre}valid_s{s}"
        for n in range(info["stages"].get("port", 0) + 1):
            names[f"rw{n}"] = f"{pre}read_wait{n or ''}"
        if _channels(info) > 1:
            for s in range(1, info["initiation_interval_channel"]):
                names[f"c{s}"] = f"{pre}channel_s{s}"
                names[f"v{s}"] = f"{pre}valid_s{s}"
    if _reloads(info):
        names["reload_count"] = f"{pre}reload_count"
    return names


def _ports(info: dict, level: str) -> dict:
    """Port names and widths of ``level``: clock, reset (name, active level) and per stream
    (valid, ready, data, data width, payload width)."""
    if level == "core":
        ports = info["ports"]
        out = {"top": info["top"], "clk": "clk", "rst": ("rst", 1)}
        for key, (pre, _, _) in STREAMS.items():
            w = ports[f"{pre}payload"]["width"]
            out[key] = (f"{pre}valid", f"{pre}ready", f"{pre}payload", w, w)
        return out
    axis = info["axis"]
    out = {"top": axis["top"], "clk": axis["clock"], "rst": (axis["reset"]["port"], 0)}
    for key, (_, bus, _) in STREAMS.items():
        t = axis["tdata"][bus]
        out[key] = (f"{bus}_tvalid", f"{bus}_tready", f"{bus}_tdata", t["width"], t["payload_width"])
    return out


def _vec(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def _instance(info: dict, level: str, extra: dict[str, str]) -> tuple[list[str], dict]:
    """Declarations of the free inputs, the DUT instance and the stream wires ``<key>_valid``,
    ``<key>_ready``, ``<key>_data``, ``rst`` (active high), ``clk``."""
    p = _ports(info, level)
    lines = ["  (* anyseq *) reg rst_in;"]
    rst_port, active = p["rst"]
    lines.append(f"  wire rst = {'rst_in' if active else '!rst_in'};")
    conns = [f".{p['clk']}(clk)", f".{rst_port}(rst_in)"]
    for key, (_, _, sink) in STREAMS.items():
        valid, ready, data, width, _ = p[key]
        if sink:
            lines += [f"  (* anyseq *) reg {key}_valid;", f"  (* anyseq *) reg {_vec(width)}{key}_data;",
                      f"  wire {key}_ready;"]
        else:
            lines += [f"  wire {key}_valid;", f"  wire {_vec(width)}{key}_data;", f"  (* anyseq *) reg {key}_ready;"]
        conns += [f".{valid}({key}_valid)", f".{ready}({key}_ready)", f".{data}({key}_data)"]
    if _guards(info):  # the core and the wrapper name the flag alike
        lines.append("  wire channel_error;")
        conns.append(".channel_error(channel_error)")
    for wire, (name, width) in extra.items():
        lines.append(f"  wire {_vec(width)}{wire};")
        conns.append(f".\\{name} ({wire})")
    lines.append(f"  {p['top']} dut(" + ", ".join(conns) + ");")
    return lines, p


def _widths(info: dict, level: str) -> dict[str, tuple[str, int]]:
    """:func:`observed` with each signal's width."""
    n = info["param_count"] * _channels(info)
    out = {}
    for wire, name in observed(info, level).items():
        width = max(1, (n + 1).bit_length()) if wire == "reload_count" else 1
        if wire.startswith("c") and wire[1:].isdigit():  # a stage's channel
            width = info["payload"]["s"]["channel"]["width"]
        out[wire] = (name, width)
    return out


def _fire(keys=STREAMS) -> list[str]:
    return [f"  wire {k}_fire = {k}_valid & {k}_ready;" for k in keys]


def _counter_width(limit: int) -> int:
    return max(2, (limit + 1).bit_length())


def _since_logic(info: dict) -> tuple[list[str], int]:
    """A saturating count of the cycles since the last reset cycle (0 in the first cycle out of
    reset, and in the initial state, which is the reset state)."""
    # one past the reload's end: the cycle ``since == reset_cycles`` comes once per reset
    cap = max(info["reset_cycles"], info["param_count"] + 1, 1) + 1
    w = _counter_width(cap)
    return [f"  reg [{w - 1}:0] since = 0;",
            "  always @(posedge clk)",
            f"    if (rst) since <= 0; else if (since < {cap}) since <= since + 1;"], cap


def _response_logic(info: dict) -> tuple[list[str], list[str]]:
    """Monitors and assertions of :data:`RESPONSE_PROPERTIES` (over the wires of :func:`harness`):
    ``(module lines, checks inside its !rst block)``.

    * ``sample_ready_after_reload``: in the cycle ``since == reset_cycles`` (the first after the
      reload; the first after reset when nothing reloads) s ready is high, unless a command was
      offered since reset (a command has precedence over samples).
    * ``prediction_within_latency``: with m ready high in each of the last P =
      ``latency_cycles_prediction`` cycles, no sample accepted more than P cycles ago is still
      in flight. Samples leave in order, so that is ``inflight`` <= the samples accepted in
      those P cycles: a sample taken at edge a is offered on m at edge a + P (the reported
      latency) and, m ready high, taken then; the only stall is a prediction m does not take.
    """
    p = info["latency_cycles_prediction"]
    shift = (lambda reg, bit: f"{reg} <= {bit};") if p == 1 else (lambda reg, bit: f"{reg} <= {{{reg}[{p - 2}:0], {bit}}};")
    lines = ["  reg cmd_seen = 0;  // a command offered since the last reset",
             f"  reg {_vec(p)}took = 0;  // bit i: a sample accepted i + 1 cycles ago",
             f"  reg {_vec(p)}m_ready_held = 0;  // bit i: m ready high i + 1 cycles ago",
             "  always @(posedge clk) begin",
             "    if (rst) cmd_seen <= 0; else if (pc_valid) cmd_seen <= 1;",
             f"    {shift('took', 's_take & !rst')}",
             f"    {shift('m_ready_held', 'm_ready')}",
             "  end"]
    recent = " + ".join(f"took[{i}]" for i in range(p)) if p > 1 else "took"
    checks = [f"    sample_ready_after_reload: assert(since != {info['reset_cycles']} || cmd_seen || pc_valid || s_ready);",
              f"    prediction_within_latency: assert(m_ready_held != {p}'b{'1' * p} || inflight <= {recent});"]
    return lines, checks


def harness(info: dict, level: str, *, response: bool = False) -> tuple[str, str]:
    """The protocol property module of a design and the Yosys commands that read it.

    Args:
        info: the design's description (:attr:`onchip.hw.Design.info`).
        level: ``"core"`` (module ``info["top"]``) or ``"axis"`` (its AXI4-Stream wrapper).
        response: also check :data:`RESPONSE_PROPERTIES` (:func:`_response_logic`).

    Returns:
        ``(props_sv, expose_commands)``: the text of ``onchip_props.sv`` (top module
        ``onchip_props``) and the Yosys commands to run on the flattened design before reading
        it (``expose`` of the :func:`observed` signals).

    Raises:
        ValueError: an unknown level.
    """
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {LEVELS}, got {level!r}")
    obs = _widths(info, level)
    decl, p = _instance(info, level, obs)
    bound = in_flight_bound(info)
    # wide enough for every stage bit at once: the sum of the stage bits must not wrap
    wf = _counter_width(info["latency_cycles_prediction"] + 2)
    since, cap = _since_logic(info)
    reloads = _reloads(info)
    n = info["param_count"] * _channels(info)  # the reload writes N P words
    take = []  # a sample owed a prediction: one naming a channel of the design
    if _guards(info):
        ch, pch = info["payload"]["s"]["channel"], info["payload"]["pc"]["channel"]
        take = [f"  wire s_bad = s_data[{ch['offset'] + ch['width'] - 1}:{ch['offset']}] >= {_channels(info)};",
                f"  wire pc_bad = pc_data[{pch['offset'] + pch['width'] - 1}:{pch['offset']}] >= {_channels(info)};",
                "  wire s_take = s_fire & !s_bad;",
                "  reg dropped = 0;  // a sample or a command of no channel taken since the last reset",
                "  always @(posedge clk) if (rst) dropped <= 0; else if ((s_fire & s_bad) | (pc_fire & pc_bad)) dropped <= 1;"]
    else:
        take = ["  wire s_take = s_fire;"]
    lines = ["module onchip_props(input clk);", *decl, *_fire(), *take, *since,
             "  reg init = 1;",
             f"  reg [{wf - 1}:0] inflight = 0;  // samples accepted, predictions not yet taken",
             "  reg [1:0] owed = 0;  // commands accepted, responses not yet taken",
             "  always @(posedge clk) begin",
             "    init <= 0;",
             "    if (rst) begin inflight <= 0; owed <= 0; end",
             "    else begin",
             "      inflight <= inflight + s_take - m_fire;",
             "      owed <= owed + pc_fire - pr_fire;",
             "    end",
             "  end"]
    if info["datapath"] == "serial":
        fwd = " | ".join(w for w in obs if w.startswith("fwd"))
        out_valid = "out_valid" if level == "axis" else "m_valid"
        stages = f"{out_valid} + ({fwd})"
        owed = "pr_valid + responding"
    else:
        stages = " + ".join(f"v{s}" for s in range(1, info["latency_cycles_prediction"] + 1))
        owed = "pr_valid + (" + " | ".join(w for w in obs if w.startswith("rw")) + ")"
    r, rc = info["reset_cycles"], info["reset_cycles_command"]
    # the AXI4-Stream source rules for the host, as assumptions
    lines += ["  always @(posedge clk) if (!init && !$past(rst)) begin",
              "    if ($past(s_valid & !s_ready)) assume(s_valid && s_data == $past(s_data));",
              "    if ($past(pc_valid & !pc_ready)) assume(pc_valid && pc_data == $past(pc_data));",
              "  end"]
    checks = [
        f"    pred_only_after_sample: assert(!m_valid || inflight != 0);",
        f"    samples_in_flight_bounded: assert(inflight <= {bound});",
        f"    in_flight_matches_stages: assert(inflight == {stages});",
        "    one_response_per_command: assert(owed <= 1 && (!pr_valid || owed == 1));",
        f"    responses_match_port: assert(owed == {owed});",
        "    command_ready_needs_valid: assert(!pc_ready || pc_valid);",
        "    no_sample_while_command: assert(!pc_valid || !s_ready);",
        "    command_only_when_drained: assert(!pc_fire || inflight == 0);",
    ]
    if _channels(info) > 1:
        ch = info["payload"]["s"]["channel"]
        lo, cw = ch["offset"], ch["width"]
        same = " || ".join(f"(v{s} && c{s} == s_data[{lo + cw - 1}:{lo}])" for s in range(1, info["initiation_interval_channel"]))
        checks.append(f"    channel_hazard: assert(!s_fire || !({same or '0'}));")
    if _guards(info):
        checks.append("    channel_guard: assert(channel_error == dropped);")
    if reloads:
        checks += [
            f"    no_sample_during_reload: assert(since >= {r} || !s_ready);",
            f"    no_command_during_reload: assert(since >= {rc} || !pc_ready);",
            f"    nothing_valid_during_reload: assert((since >= {r} || (inflight == 0 && !m_valid))"
            f" && (since >= {rc} || !pr_valid));",
            f"    reload_counts_cycles: assert(reload_count == (since < {n + 1} ? since : {n + 1}));",
        ]
    if response:
        monitors, more = _response_logic(info)
        lines += monitors
        checks += more
    if level == "axis":
        for key in ("m", "pr"):
            width, payload = p[key][3], p[key][4]
            if width > payload:
                checks.append(f"    {key}_padding_zero: assert({key}_data[{width - 1}:{payload}] == 0);")
            else:
                checks.append(f"    {key}_padding_zero: assert(1);")
    lines += ["  always @(*) if (!rst) begin", *checks, "  end",
              "  always @(posedge clk) if (!init) begin",
              "    if ($past(rst)) begin",
              "      nothing_valid_after_reset: assert(!m_valid && !pr_valid);",
              "    end else begin"]
    for key in ("m", "pr"):
        lines += [f"      if ($past({key}_valid & !{key}_ready)) begin",
                  f"        {key}_valid_held: assert({key}_valid);",
                  f"        {key}_data_stable: assert({key}_data == $past({key}_data));",
                  "      end"]
    lines += ["    end", "  end", "endmodule", ""]
    expose = "expose " + " ".join(f"w:{name}" for name, _ in obs.values()) if obs else ""
    return "\n".join(lines), expose


def readback_harness(info: dict, level: str, theta0) -> tuple[str, str]:
    """The bounded read-back property module (:data:`READBACK_PROPERTIES`) and its Yosys commands.

    A is ``anyconst``: the solver picks the address (one of the P parameters'; what a read above
    them answers is not specified), so one run covers every address. The shadow
    copy of theta[A] is theta0[A] after reset (the reset state is the initial state) and the data
    of the last write command to A. While a read of A is owed, the response must equal it. The
    host offers no sample here (an assumption): the check is of the parameter port, its address
    decode, the banks and the reload, with any reset, reads and writes in any order; how samples
    and commands interleave is the protocol's (:func:`harness`) and the simulation's.

    Args:
        info: the design's description.
        level: ``"core"`` or ``"axis"``.
        theta0: the raw initial parameters (P,), the design's reset values; (N, P) for N > 1 channels.

    Returns:
        ``(props_sv, expose_commands)`` as :func:`harness`.
    """
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {LEVELS}, got {level!r}")
    decl, p = _instance(info, level, {})
    pc = info["payload"]["pc"]
    coef_w = pc["data"]["width"]
    aw = pc["addr"]["width"]
    a_lo = pc["addr"]["offset"]
    w_bit = pc["write"]["offset"]
    rows = [list(r) for r in (theta0 if getattr(theta0[0], "__len__", None) else [theta0])]  # (N, P)
    nch, n_p = len(rows), len(rows[0])
    # N > 1 channels: the address is (channel, index), the channel field in the key's top bits
    cw = pc["channel"]["width"] if nch > 1 else 0
    kw = aw + cw
    table = "\n".join(f"      {kw}'d{(c << aw) | a}: theta0_a = {coef_w}'h{int(v) & ((1 << coef_w) - 1):x};"
                      for c, row in enumerate(rows) for a, v in enumerate(row))
    if nch > 1:
        c_lo = pc["channel"]["offset"]
        chan = [f"  (* anyconst *) reg [{cw - 1}:0] CA;",
                f"  always @(*) assume(CA < {nch});  // a channel of the design",
                f"  wire [{cw - 1}:0] cmd_chan = pc_data[{c_lo + cw - 1}:{c_lo}];"]
        key, hit = "{CA, A}", "cmd_addr == A && cmd_chan == CA"
    else:
        chan, key, hit = [], "A", "cmd_addr == A"
    # N not a power of two: a command naming a channel >= N is answered 0 (and writes no bank)
    guard = _guards(info)
    good = f" && cmd_chan < {nch}" if guard else ""
    zero = (["  reg want_zero = 0;",
             "  always @(posedge clk)",
             "    if (rst) want_zero <= 0;",
             f"    else if (pc_fire) want_zero <= cmd_chan >= {nch};",
             "    else if (pr_fire) want_zero <= 0;"] if guard else [])
    zero_check = ([f"    if (want_zero) no_channel_answers_zero: assert(pr_data[{coef_w - 1}:0] == 0);"]
                  if guard else [])
    lines = ["module onchip_props(input clk);", *decl, *_fire(),
             f"  (* anyconst *) reg [{aw - 1}:0] A;",
             f"  always @(*) assume(A < {n_p});  // a parameter's address (theta has P words)",
             *chan,
             f"  reg [{coef_w - 1}:0] theta0_a;",
             "  always @(*) begin",
             f"    case ({key})\n{table}\n      default: theta0_a = 0;\n    endcase",
             "  end",
             f"  wire [{aw - 1}:0] cmd_addr = pc_data[{a_lo + aw - 1}:{a_lo}];",
             f"  wire cmd_write = pc_data[{w_bit}];",
             f"  wire [{coef_w - 1}:0] cmd_data = pc_data[{coef_w - 1}:0];",
             "  reg init = 1;",
             f"  reg [{coef_w - 1}:0] shadow = 0;",
             f"  wire [{coef_w - 1}:0] cur = init ? theta0_a : shadow;  // theta[A] as the port must answer it",
             "  reg want_read = 0, want_echo = 0;",
             f"  reg [{coef_w - 1}:0] echo = 0;",
             "  always @(posedge clk) begin",
             "    init <= 0;",
             "    if (rst) shadow <= theta0_a;",
             f"    else if (pc_fire && cmd_write && {hit}) shadow <= cmd_data;",
             "    else shadow <= cur;",
             "    if (rst) begin want_read <= 0; want_echo <= 0; end",
             "    else if (pc_fire) begin",
             f"      want_read <= !cmd_write && {hit}; want_echo <= cmd_write{good}; echo <= cmd_data;",
             "    end else if (pr_fire) begin want_read <= 0; want_echo <= 0; end",
             "  end",
             *zero,
             "  always @(posedge clk) if (!init && !$past(rst)) begin",
             "    if ($past(s_valid & !s_ready)) assume(s_valid && s_data == $past(s_data));",
             "    if ($past(pc_valid & !pc_ready)) assume(pc_valid && pc_data == $past(pc_data));",
             "  end",
             "  always @(*) assume(!s_valid);  // the parameter port alone: no sample is offered",
             "  always @(*) if (!rst && !init && pr_valid) begin",
             f"    if (want_read) read_returns_last_write: assert(pr_data[{coef_w - 1}:0] == cur);",
             f"    if (want_echo) write_echoes_value: assert(pr_data[{coef_w - 1}:0] == echo);",
             *zero_check,
             "  end",
             "endmodule", ""]
    return "\n".join(lines), ""


def readback_depth(info: dict) -> int:
    """BMC bound of :func:`readback_harness`, in cycles: the reload after reset, then three
    commands (a write, a read and one more) with their responses through the port's stages."""
    port = info["stages"].get("port", 0)
    return info["reset_cycles_command"] + 3 * (port + 3) + 2
