"""Bounded equivalence checks: the two timing plans of a spec, and a synthesised netlist against its RTL.

Timing plans (:func:`plans_miter`): the cores of ``timing = "compact"`` and ``timing = "fast"`` of
one spec and schedule run side by side from their reset state on one input sequence. The host
side is free: in any cycle it may offer a new item, a sample (any x, any y, any kind but 3) or a
parameter command (any read or write), and each core takes it at its own pace (a core that has
taken the item waits for the other, so both see the same sequence, each at its own latency, II
and reload time). Each core's predictions and responses go into a one-word slot; a core whose
slot is full is held back (its ready low), and when both slots hold a word the two must be equal
(``predictions_equal``, ``responses_equal``: predictions and decisions, read-backs of any
parameter after any number of updates). The check is a bounded model check: every input
sequence of up to ``bound`` cycles; a cover run measures how many predictions the slower core
can have delivered within the bound (``samples``). It is never reported as a proof. A second
host sends reads only (``writes=False``): the parameters start at their reset values and change
only by learning, so the products have one free operand fewer and the solver gets deeper.

Netlist (:func:`netlist_miter`): the core synthesised by Yosys for a family (its primitives
mapped back through Yosys's own simulation models of them) against the Amaranth Verilog it came
from, cycle by cycle on the same free inputs from the reset state: every output equal
(``netlist_outputs_equal``), to a bound.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import sby
from .protocol import PropertyResult

#: the miter's properties
PLANS_PROPERTIES = ("predictions_equal", "responses_equal")
#: the two hosts of the plans check -> the level its results carry: any commands (the parameters
#: may be written before and between samples), reads only (the parameters start at their reset
#: values and change only by the learner's own updates)
PLANS_LEVELS = {True: "equivalence", False: "equivalence_reads_only"}
#: the solver of the plans check, per host (``writes``), measured on kan-paper, sequential: with
#: any commands Z3 decides the first prediction's comparison (cycle 21) in about 30 s, where Yices 2
#: had not after 8 minutes; with reads only Yices 2 reaches cycle 31 in 42 s, Z3 cycle 23 in 105 s
PLANS_SOLVER = {True: "z3", False: "yices"}
NETLIST_PROPERTIES = ("netlist_outputs_equal",)
#: predictions counted by the cover run (the bound in samples is the largest reached)
MAX_COVER_SAMPLES = 12


def _width(info: dict, port: str) -> int:
    return info["ports"][port]["width"]


def plans_miter(compact: dict, fast: dict, *, writes: bool = True, properties=PLANS_PROPERTIES) -> str:
    """The SystemVerilog miter of two cores of one spec (descriptions ``compact`` and ``fast``,
    modules ``compact["top"]`` and ``fast["top"]``): module ``onchip_props``, asserting
    ``properties`` (of :data:`PLANS_PROPERTIES`).

    Raises:
        ValueError: the two cores do not have the same stream ports (not the same spec), or an
            unknown property.
    """
    _check_properties(properties)
    for port in ("s__payload", "m__payload", "pc__payload", "pr__payload"):
        if _width(compact, port) != _width(fast, port):
            raise ValueError(f"the two cores differ in {port}: {_width(compact, port)} vs {_width(fast, port)} bits")
    sw, mw, cw, rw = (_width(compact, p) for p in ("s__payload", "m__payload", "pc__payload", "pr__payload"))
    k = compact["payload"]["s"]["kind"]["offset"]
    lines = [
        "module onchip_props(input clk);",
        "  (* anyseq *) reg go; (* anyseq *) reg cmd_next;",
        f"  (* anyseq *) reg [{sw - 1}:0] s_next; (* anyseq *) reg [{cw - 1}:0] pc_next;",
        f"  always @(*) assume(s_next[{k + 1}:{k}] != 2'd3);  // 3 is not a sample kind",
        *([] if writes else [f"  always @(*) assume(!pc_next[{compact['payload']['pc']['write']['offset']}]);"
                             "  // reads only"]),
        "  reg have = 0, is_cmd = 0;",
        f"  reg [{sw - 1}:0] s_item = 0; reg [{cw - 1}:0] pc_item = 0;",
        "  reg [7:0] n_pred = 0;",
    ]
    for x, info in (("c", compact), ("f", fast)):
        lines += [
            f"  reg {x}_took = 0;",
            f"  wire {x}_s_ready, {x}_m_valid, {x}_pc_ready, {x}_pr_valid;",
            f"  wire [{mw - 1}:0] {x}_m_data; wire [{rw - 1}:0] {x}_pr_data;",
            f"  wire {x}_s_valid = have & !is_cmd & !{x}_took;",
            f"  wire {x}_pc_valid = have & is_cmd & !{x}_took;",
            f"  reg {x}_m_full = 0, {x}_r_full = 0;",
            f"  reg [{mw - 1}:0] {x}_m_slot = 0; reg [{rw - 1}:0] {x}_r_slot = 0;",
            f"  wire {x}_fire = ({x}_s_valid & {x}_s_ready) | ({x}_pc_valid & {x}_pc_ready);",
            f"  {info['top']} {x}_dut(.clk(clk), .rst(1'b0),"
            f" .s__valid({x}_s_valid), .s__ready({x}_s_ready), .s__payload(s_item),"
            f" .m__valid({x}_m_valid), .m__ready(!{x}_m_full), .m__payload({x}_m_data),"
            f" .pc__valid({x}_pc_valid), .pc__ready({x}_pc_ready), .pc__payload(pc_item),"
            f" .pr__valid({x}_pr_valid), .pr__ready(!{x}_r_full), .pr__payload({x}_pr_data));",
        ]
    lines += [
        "  wire both_m = c_m_full & f_m_full, both_r = c_r_full & f_r_full;",
        "  always @(posedge clk) begin",
        "    if (have) begin",
        "      c_took <= c_took | c_fire; f_took <= f_took | f_fire;",
        "      if ((c_took | c_fire) & (f_took | f_fire)) have <= 0;",
        "    end else if (go) begin",
        "      have <= 1; is_cmd <= cmd_next; s_item <= s_next; pc_item <= pc_next; c_took <= 0; f_took <= 0;",
        "    end",
    ]
    for x in ("c", "f"):
        lines += [
            f"    if ({x}_m_valid & !{x}_m_full) begin {x}_m_slot <= {x}_m_data; {x}_m_full <= 1; end",
            f"    if ({x}_pr_valid & !{x}_r_full) begin {x}_r_slot <= {x}_pr_data; {x}_r_full <= 1; end",
        ]
    lines += [
        "    if (both_m) begin c_m_full <= 0; f_m_full <= 0; if (n_pred != 255) n_pred <= n_pred + 1; end",
        "    if (both_r) begin c_r_full <= 0; f_r_full <= 0; end",
        "  end",
        "  always @(*) begin",
        *(["    if (both_m) predictions_equal: assert(c_m_slot == f_m_slot);"] if "predictions_equal" in properties else []),
        *(["    if (both_r) responses_equal: assert(c_r_slot == f_r_slot);"] if "responses_equal" in properties else []),
        "  end",
    ]
    # the n-th comparison itself (both slots full), at the step the assertion checks it
    lines += [f"  always @(*) samples_{n}: cover(both_m && n_pred == {n - 1});" for n in range(1, MAX_COVER_SAMPLES + 1)]
    lines += ["endmodule", ""]
    return "\n".join(lines)


def _check_properties(properties) -> None:
    bad = [p for p in properties if p not in PLANS_PROPERTIES] if not isinstance(properties, str) else [properties]
    if bad or not properties:
        raise ValueError(f"properties: must be some of {', '.join(PLANS_PROPERTIES)}, got {properties!r}")


_COVER = re.compile(r"Reached cover statement in step (\d+) at [^:\s]+: samples_(\d+)")


def _cover_steps(folder: Path) -> dict[int, int]:
    """Cover label ``samples_<n>`` (the n-th comparison of predictions) -> the step SBY first reached
    it at, from a cover job's logs."""
    reached: dict[int, int] = {}
    for log in folder.glob("engine_*/logfile*.txt"):
        for step, n in _COVER.findall(log.read_text()):
            reached.setdefault(int(n), int(step))
    return reached


def plans_depth(fast: dict) -> int:
    """The bound :func:`check_plans` asks for, in cycles: four times the fast core's reload and
    update latency (``fast``: its description), so that several samples could be compared; the
    bound reached within the solver's time is what is reported."""
    return 4 * (fast["reset_cycles"] + fast["latency_cycles_update"]) + 16


def check_plans(compact, fast, folder, *, depth: int | None = None, timeout: float, compact_verilog: str | None = None,
                fast_verilog: str | None = None, writes: bool = True, solver: str | None = None,
                properties=PLANS_PROPERTIES, log=lambda text: None) -> list[PropertyResult]:
    """Bounded equivalence of the two timing plans of one spec and schedule (:func:`plans_miter`).

    Args:
        compact: the :class:`onchip.hw.Design` of ``timing = "compact"`` (:func:`onchip.formal.plan_designs`).
        fast: the design of ``timing = "fast"``, under another ``top`` name.
        folder: where the SBY jobs run.
        depth: the bound asked for, in cycles from reset (default :func:`plans_depth`).
        timeout: seconds the solver may spend; at a timeout the bound is the last cycle fully
            checked.
        compact_verilog: Verilog to check instead of the compact design's own (a modified copy).
        fast_verilog: the same for the fast design (e.g. with an injected bug).
        writes: the host may send write commands (False: reads only; the results' ``level`` says
            which host, :data:`PLANS_LEVELS`).
        solver: the SMT solver (:data:`onchip.formal.sby.SOLVER_BINARIES`; default: the host's in
            :data:`PLANS_SOLVER`).
        properties: the properties checked, of :data:`PLANS_PROPERTIES` (the search ends once each
            has a counterexample: checking one alone ends on its first).
        log: called with one line per solver run.

    Returns:
        One :class:`PropertyResult` per property of ``properties``: ``bounded`` with
        ``bound`` (cycles) and ``samples`` (predictions whose comparison falls within it), or
        ``failed`` with the counterexample trace (also when the solver ran out of time after
        finding it).

    Raises:
        ValueError: an unknown property.
    """
    _check_properties(properties)
    folder = Path(folder)
    depth = plans_depth(fast.info) if depth is None else depth
    files = {"compact.v": compact_verilog or compact.verilog, "fast.v": fast_verilog or fast.verilog,
             "onchip_props.sv": plans_miter(compact.info, fast.info, writes=writes, properties=properties)}
    script = "read_verilog compact.v\nread_verilog fast.v\nread_verilog -formal -sv onchip_props.sv\n" \
             "prep -top onchip_props\nflatten\nmemory_map\nopt -fast"
    level, host = PLANS_LEVELS[bool(writes)], "any commands" if writes else "reads only"
    solver = solver or PLANS_SOLVER[bool(writes)]
    r = sby.run_job(folder, "plans_bmc", mode="bmc", depth=depth, script=script, files=files, timeout=timeout,
                    solver=solver)
    log(f"formal plans ({host}): bounded check to {depth} cycles: {r.status} {' '.join(r.failed)} "
        f"(checked {r.steps_checked}, {r.seconds:.1f} s, {solver})")
    results = []
    if r.status == "FAIL":
        for name in properties:
            bad = name in r.failed
            results.append(PropertyResult(
                name, level, "failed" if bad else "bounded", bound=r.steps_checked, seconds=r.seconds,
                trace=r.traces.get(name) if bad else None,
                detail=(f"compact and fast differ within {r.steps_checked} cycles of reset (trace: {r.traces.get(name)})" if bad else
                        f"no difference within {r.steps_checked} cycles, where the other property has a counterexample")))
        return results
    bound = max(0, r.steps_checked if r.steps_checked is not None else depth)
    c = sby.run_job(folder, "plans_cover", mode="cover", depth=max(bound, 1), script=script, files=files,
                    timeout=timeout)
    reached = _cover_steps(Path(c.folder))
    # the BMC checked steps 0 .. bound - 1: a comparison made at one of them was checked
    samples = max((n for n, step in reached.items() if step < bound), default=0)
    log(f"formal plans ({host}): cover run: {samples} predictions compared within {bound} cycles ({c.seconds:.1f} s)")
    for name in properties:
        results.append(PropertyResult(
            name, level, "bounded", bound=bound, samples=samples, seconds=r.seconds + c.seconds,
            detail=(f"bounded, not a proof: equal for every input sequence ({host}) of up to {bound} cycles "
                    f"from reset (up to {samples} predictions compared)")))
    return results


#: Yosys synthesis of the netlist checked by :func:`check_netlist`, per family: the flow's own
#: script (:data:`onchip.flow.yosys.FAMILIES`) without block RAM, whose primitive (DP16KD) Yosys
#: has no simulation model for
NETLIST_SYNTH = {"ecp5": "synth_ecp5 -flatten -nobram"}


def mult18x18d_model() -> str:
    """A behavioural model of the ECP5 MULT18X18D in the configuration Yosys maps ``$mul`` to
    (every register bypassed, the default of each ``REG_*`` parameter: "NONE"): P = A * B, each
    operand signed when its SIGNED pin is high (Lattice FPGA-TN-02205, "ECP5 and ECP5-5G sysDSP
    Usage Guide", MULT18X18D). Yosys ships the primitive as a blackbox only."""
    ins = [f"A{i}" for i in range(18)] + [f"B{i}" for i in range(18)] + [f"C{i}" for i in range(18)]
    ins += ["SIGNEDA", "SIGNEDB", "SOURCEA", "SOURCEB"] + [f"{p}{i}" for p in ("CLK", "CE", "RST") for i in range(4)]
    outs = [f"P{i}" for i in range(36)]
    a = "{" + ", ".join(f"A{i}" for i in reversed(range(18))) + "}"
    b = "{" + ", ".join(f"B{i}" for i in reversed(range(18))) + "}"
    lines = ["module MULT18X18D(" + ", ".join(ins + outs) + ");",
             *(f"  input {p};" for p in ins), *(f"  output {p};" for p in outs),
             f"  wire [17:0] a = {a}; wire [17:0] b = {b};",
             "  wire signed [18:0] sa = {SIGNEDA & a[17], a};",
             "  wire signed [18:0] sb = {SIGNEDB & b[17], b};",
             "  wire signed [37:0] p = sa * sb;",
             "  assign {" + ", ".join(reversed(outs)) + "} = p[35:0];",
             "endmodule", ""]
    return "\n".join(lines)


def netlist_miter(info: dict, gold: str, gate: str) -> str:
    """The miter of two modules with the learner's ports (``gold``, ``gate``): the same free inputs
    (reset included) every cycle, ``netlist_outputs_equal`` every cycle."""
    ports = info["ports"]
    ins = [n for n, p in ports.items() if p["dir"] == "in" and n != "clk"]
    outs = [n for n, p in ports.items() if p["dir"] == "out"]

    def vec(n):
        w = ports[n]["width"]
        return f"[{w - 1}:0] " if w > 1 else ""

    lines = ["module onchip_props(input clk);"]
    lines += [f"  (* anyseq *) reg {vec(n)}i_{n};" for n in ins]
    for side in ("g", "n"):
        lines += [f"  wire {vec(n)}{side}_{n};" for n in outs]
    for side, mod in (("g", gold), ("n", gate)):
        conns = [".clk(clk)"] + [f".{n}(i_{n})" for n in ins] + [f".{n}({side}_{n})" for n in outs]
        lines.append(f"  {mod} {side}_dut(" + ", ".join(conns) + ");")
    left = ", ".join(f"g_{n}" for n in outs)
    right = ", ".join(f"n_{n}" for n in outs)
    lines += [f"  always @(*) netlist_outputs_equal: assert({{{left}}} == {{{right}}});", "endmodule", ""]
    return "\n".join(lines)


def check_netlist(design, folder, *, family: str = "ecp5", depth: int, timeout: float,
                  log=lambda text: None) -> list[PropertyResult]:
    """Bounded equivalence of the core of ``design`` (an :class:`onchip.hw.Design`) and the netlist
    Yosys synthesises from it for ``family`` (:data:`NETLIST_SYNTH`), its primitives mapped back
    through Yosys's simulation models (``techmap -map +/ecp5/cells_sim.v``, as ``equiv_opt``
    does) and :func:`mult18x18d_model`.

    Returns:
        One :class:`PropertyResult` (``netlist_outputs_equal``): ``bounded`` to the cycles
        checked, or ``failed`` with the trace.

    Raises:
        ValueError: an unsupported family.
        ToolError: Yosys failed, or the netlist holds a primitive without a model.
    """
    from ..errors import ToolError
    from ..flow.tools import run_tool

    if family not in NETLIST_SYNTH:
        raise ValueError(f"family: the netlist check supports {', '.join(NETLIST_SYNTH)}, got {family!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "design.v").write_text(design.verilog)
    run_tool("yosys", ["-q", "-p", f"read_verilog design.v; {NETLIST_SYNTH[family]} -top {design.top}; "
                                   f"rename {design.top} onchip_gate; write_rtlil gate.il; "
                                   "tee -q -o cells.txt stat"], folder)
    text = (folder / "gate.il").read_text()
    import re

    clocks = set(re.findall(r'parameter \\REG_\w+_CLK "(\w+)"', text))
    if "cell \\DP16KD" in text or clocks - {"NONE"}:
        raise ToolError(f"the {family} netlist in {folder} holds a primitive configuration without a model")
    files = {"design.v": design.verilog, "gate.il": text, "mult18x18d.v": mult18x18d_model(),
             "onchip_props.sv": netlist_miter(design.info, design.top, "onchip_gate")}
    script = (f"read_rtlil gate.il\ntechmap -wb -D EQUIV -autoproc -map +/{family}/cells_sim.v\ndelete =A:blackbox\n"
              "read_verilog mult18x18d.v\nread_verilog design.v\nread_verilog -formal -sv onchip_props.sv\n"
              "prep -top onchip_props\nflatten\nmemory_map\nopt -fast")
    r = sby.run_job(folder, "netlist_bmc", mode="bmc", depth=depth, script=script, files=files, timeout=timeout)
    log(f"formal netlist ({family}): bounded check to {depth} cycles: {r.status} (checked {r.steps_checked}, "
        f"{r.seconds:.1f} s)")
    if r.status == "FAIL":
        return [PropertyResult("netlist_outputs_equal", "netlist", "failed", bound=r.steps_checked, seconds=r.seconds,
                               trace=r.trace, detail=f"the {family} netlist differs from the RTL at cycle "
                                                     f"{r.steps_checked} (trace: {r.trace})")]
    return [PropertyResult("netlist_outputs_equal", "netlist", "bounded", bound=r.steps_checked, seconds=r.seconds,
                           detail=f"bounded, not a proof: the {family} netlist equals the RTL on every output for "
                                  f"every input sequence of up to {r.steps_checked} cycles from reset")]
