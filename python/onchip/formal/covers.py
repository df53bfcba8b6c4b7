"""Covers: the learner must do its work, not merely never break the protocol.

The protocol properties (:mod:`onchip.formal.properties`) are safety properties: a core that never
accepts a sample satisfies every one. :func:`cover_harness` writes cover statements that a
working core must reach from reset, with every input free but for the host's AXI4-Stream source
rules (the same assumptions as the protocol harness):

=========================  ==========================================================================
cover                      reached when
=========================  ==========================================================================
``sample_accepted``        a sample is taken on s
``prediction_delivered``   a prediction is taken on m
``update_committed``       every layer has committed an update since the last reset
``write_read_back``        a read of a parameter answers the word a write put there, which differs
                           from the parameter's reset value (the write took effect)
=========================  ==========================================================================

:func:`check_covers` runs them in SymbiYosys ``cover`` mode to :func:`cover_depth` cycles. A
cover is ``covered`` only when the solver returns a trace that reaches it (the trace's length in
cycles is the result's bound); one no input sequence reaches within the depth is ``failed``: the
depth allows the reload, a sample through its update and two commands with their responses, so a
working core reaches every cover inside it, and an unreached one means a dead or stuck core.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import sby
from .properties import _fire, _instance
from .protocol import PropertyResult, script, top_of

#: the cover statements of :func:`cover_harness`, in report order
COVER_PROPERTIES = ("sample_accepted", "prediction_delivered", "update_committed", "write_read_back")
#: solver seconds of one cover job
COVER_TIMEOUT = 600


def _commits(info: dict, level: str) -> dict[str, tuple[str, int]]:
    """Harness wire -> (flattened signal, width) of every layer's update commit strobe
    (``commit_l<l>``, named so by every datapath's generator)."""
    pre = "learner." if level == "axis" else ""
    return {f"commit{l}": (f"{pre}commit_l{l}", 1) for l in range(len(info["spec"]["widths"]) - 1)}


def cover_harness(info: dict, level: str, theta0) -> tuple[str, str]:
    """The cover module (``onchip_props``) of a design and the Yosys commands that read it.

    Args:
        info: the design's description (:attr:`onchip.hw.Design.info`).
        level: ``"core"`` or ``"axis"``.
        theta0: the raw initial parameters (P,), the design's reset values.

    Returns:
        ``(props_sv, expose_commands)`` as :func:`onchip.formal.properties.harness`.

    Raises:
        ValueError: an unknown level.
    """
    from .properties import LEVELS

    if level not in LEVELS:
        raise ValueError(f"level: must be one of {LEVELS}, got {level!r}")
    commits = _commits(info, level)
    decl, _ = _instance(info, level, commits)
    pc = info["payload"]["pc"]
    cw, aw = pc["data"]["width"], pc["addr"]["width"]
    a_lo, w_bit = pc["addr"]["offset"], pc["write"]["offset"]
    n = len(theta0)
    table = "\n".join(f"      {aw}'d{a}: reset_value = {cw}'h{int(v) & ((1 << cw) - 1):x};" for a, v in enumerate(theta0))
    every = " & ".join(f"(committed[{l}] | {w})" for l, w in enumerate(commits))
    lines = ["module onchip_props(input clk);", *decl, *_fire(),
             "  reg init = 1;",
             "  always @(posedge clk) init <= 0;",
             "  always @(posedge clk) if (!init && !$past(rst)) begin",
             "    if ($past(s_valid & !s_ready)) assume(s_valid && s_data == $past(s_data));",
             "    if ($past(pc_valid & !pc_ready)) assume(pc_valid && pc_data == $past(pc_data));",
             "  end",
             f"  reg [{len(commits) - 1}:0] committed = 0;  // layers that committed an update since reset",
             "  always @(posedge clk)",
             f"    if (rst) committed <= 0; else committed <= committed | {{{', '.join(reversed(list(commits)))}}};",
             f"  wire [{aw - 1}:0] cmd_addr = pc_data[{a_lo + aw - 1}:{a_lo}];",
             f"  wire cmd_write = pc_data[{w_bit}];",
             f"  wire [{cw - 1}:0] cmd_data = pc_data[{cw - 1}:0];",
             "  reg written = 0, want = 0;  // a write since reset; a read of its address owed",
             f"  reg [{aw - 1}:0] wa = 0;",
             f"  reg [{cw - 1}:0] wd = 0;",
             "  always @(posedge clk)",
             "    if (rst) begin written <= 0; want <= 0; end",
             "    else if (pc_fire) begin",
             "      if (cmd_write) begin written <= 1; wa <= cmd_addr; wd <= cmd_data; want <= 0; end",
             "      else want <= written && cmd_addr == wa;",
             "    end",
             f"  reg [{cw - 1}:0] reset_value;",
             "  always @(*) begin",
             f"    case (wa)\n{table}\n      default: reset_value = 0;\n    endcase",
             "  end",
             "  always @(*) if (!rst) begin",
             "    sample_accepted: cover(s_fire);",
             "    prediction_delivered: cover(m_fire);",
             f"    update_committed: cover({every});",
             f"    write_read_back: cover(pr_fire && want && wa < {n} && pr_data[{cw - 1}:0] == wd && wd != reset_value);",
             "  end",
             "endmodule", ""]
    expose = "expose " + " ".join(f"w:{name}" for name, _ in commits.values())
    return "\n".join(lines), expose


def cover_depth(info: dict) -> int:
    """Cycles the cover search spans from reset: the reload, a sample through its update
    (pipelined: with its pending update flushed by a command), and two commands (a write and a
    read) with their responses through the port's stages, with a margin of a few cycles."""
    port = info["stages"].get("port", 0)
    work = info["reset_cycles"] + info["latency_cycles_update"] + info["initiation_interval"] + port + 3
    talk = info["reset_cycles_command"] + 2 * (port + 3)
    return max(work, talk) + 4


_REACHED = re.compile(r"Reached cover statement in step (\d+) at [^:]+: (\S+)")
_UNREACHED = re.compile(r"Unreached cover statement at [^:]+: (\S+)")
_TRACE = re.compile(r"Writing trace to VCD file: (\S+\.vcd)")


def _label(name: str) -> str:
    """The cover's label from the name smtbmc prints (``onchip_props.<label>`` or the label)."""
    return name.rsplit(".", 1)[-1]


def check_covers(info: dict, verilog: str, level: str, theta0, folder, *, depth: int | None = None,
                 timeout: float = COVER_TIMEOUT, log=lambda text: None) -> list[PropertyResult]:
    """Reach every cover of :func:`cover_harness` from reset (SymbiYosys ``cover`` mode).

    Args:
        info: the design's description.
        verilog: the Verilog of ``level`` (or a modified copy of it).
        level: ``"core"`` or ``"axis"``.
        theta0: the raw initial parameters (P,).
        folder: where the job runs (its log and the traces stay there).
        depth: cycles searched from reset (default :func:`cover_depth`).
        timeout: solver seconds.
        log: called with one line for the run.

    Returns:
        One :class:`PropertyResult` per :data:`COVER_PROPERTIES`: ``covered`` (``bound``: the
        cycles of the trace that reaches it, ``trace``: its VCD), ``failed`` (no input sequence
        reaches it within ``bound`` = ``depth`` cycles of reset) or, when the solver ran out of
        time first, ``not_proved`` (``bound``: the cycles it searched).

    Raises:
        FileNotFoundError: the formal tools are not installed.
        ToolError: Yosys could not read the design or the harness.
    """
    depth = depth or cover_depth(info)
    text, expose = cover_harness(info, level, theta0)
    r = sby.run_job(Path(folder), f"{level}_cover", mode="cover", depth=depth,
                    # memories as registers: the write-and-read-back cover follows a word through the RAM
                    script=script(top_of(info, level), expose, map_memories=True),
                    files={"design.v": verilog, "onchip_props.sv": text},
                    timeout=timeout)
    reached, unreached, pending = {}, set(), []
    logs = "".join(p.read_text() for p in sorted(Path(r.folder).glob("engine_*/logfile.txt")))
    for line in logs.splitlines():
        if m := _REACHED.search(line):
            reached[_label(m.group(2))] = (int(m.group(1)) + 1, None)
            pending.append(_label(m.group(2)))
        elif m := _UNREACHED.search(line):
            unreached.add(_label(m.group(1)))
        elif (m := _TRACE.search(line)) and pending:
            for name in pending:
                reached[name] = (reached[name][0], str(Path(r.folder) / m.group(1)))
            pending = []
    searched = max((int(s) for s in re.findall(r"Checking cover reachability in step (\d+)", logs)), default=-1) + 1
    log(f"formal {level}: covers searched to {depth} cycles: {r.status} reached {' '.join(reached) or 'none'} "
        f"({r.seconds:.1f} s)")
    out = []
    for name in COVER_PROPERTIES:
        if name in reached:
            cycles, trace = reached[name]
            out.append(PropertyResult(name, level, "covered", bound=cycles, seconds=r.seconds, trace=trace,
                                      detail=f"covered: reached by a trace of {cycles} cycles from reset (trace: {trace})"))
        elif r.status in ("PASS", "FAIL"):
            out.append(PropertyResult(name, level, "failed", bound=depth, seconds=r.seconds,
                                      detail=f"unreachable: no input sequence reaches it within {depth} cycles of "
                                             f"reset, which span the reload, a sample's update and two commands"))
        else:  # out of time: not shown reachable, which fails the check too, but is no proof it is not
            out.append(PropertyResult(name, level, "not_proved", bound=searched, seconds=r.seconds,
                                      detail=f"not reached: the search stopped ({r.status}, {timeout:g} s) after "
                                             f"{searched} of {depth} cycles from reset"))
    return out
