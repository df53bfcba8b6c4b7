"""The hardware steps as functions: generate, synthesise, place and route, write Vivado projects.

Each takes a spec (a :class:`~onchip.spec.LearnerSpec`, a preset name or a TOML path), writes
its output folder whole or not at all (:func:`onchip.io.atomic_output_dir`), and returns its
report; the ``onchip generate | synth | pnr | vivado`` commands are these functions plus
argument parsing and one printed line.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..hw.names import DEFAULT_TOP, check_top
from ..io import atomic_output_dir, check_output_dir, write_json
from ..spec import LearnerSpec, load_spec


def family_dsp(family: str) -> str | None:
    """The ``dsp`` choice of :func:`onchip.hw.generate` for a device family: ``"ecp5"`` for ECP5
    (Yosys maps its multipliers without their registers; the primitive holds them), ``"ice40"`` for
    iCE40 (Yosys moves the product register into SB_MAC16; the factor registers are kept out of it),
    None elsewhere (Yosys moves the registers into DSP48 itself)."""
    from ..hw.dsp import DSP_FAMILIES

    return family if family in DSP_FAMILIES else None


def write_design(design, folder) -> None:
    """Write ``<top>.v``, ``<top>_axis.v`` and ``<top>.json`` of a :class:`onchip.hw.Design` into ``folder``."""
    folder = Path(folder)
    (folder / f"{design.top}.v").write_text(design.verilog)
    if design.axis_verilog:
        (folder / f"{design.top}_axis.v").write_text(design.axis_verilog)
    write_json(folder / f"{design.top}.json", design.info)


def write_templates(design, folder) -> list[str]:
    """Write the instantiation templates of a :class:`onchip.hw.Design` into ``folder``: for the core
    ``<top>_inst.v`` and ``<top>_component.vhd``, and with the AXI4-Stream wrapper
    ``<top>_axis_inst.v`` and ``<top>_axis_component.vhd``
    (:func:`onchip.hw.description.verilog_template`, :func:`~onchip.hw.description.vhdl_component`).

    Returns:
        the names of the files written.
    """
    from ..hw.description import verilog_template, vhdl_component

    folder = Path(folder)
    written = []
    for which, name in (("core", design.top), ("axis", f"{design.top}_axis")):
        if which == "axis" and not design.axis_verilog:
            continue
        (folder / f"{name}_inst.v").write_text(verilog_template(design.info, which))
        (folder / f"{name}_component.vhd").write_text(vhdl_component(design.info, which))
        written += [f"{name}_inst.v", f"{name}_component.vhd"]
    return written


def generate_to(spec: "LearnerSpec | str | os.PathLike", out: "str | os.PathLike", *, top: str = DEFAULT_TOP,
                theta=None, dsp: str | None = None, packet: int = 1):
    """Generate the learner's Verilog (core and AXI4-Stream wrapper), its JSON description and the
    instantiation templates (:func:`write_templates`) into ``out``, the parameters reset to ``theta``
    (raw (P,); default: the spec's initial parameters).

    Args:
        spec: the learner.
        out: the output folder.
        top: the core's module name (:func:`onchip.hw.names.check_top`); the wrapper is ``<top>_axis``.
        theta: raw reset values of the parameters (P,), or None.
        dsp: None, ``"ecp5"``: the ``fast`` plan's products as MULT18X18D instances with their
            registers (:mod:`onchip.hw.dsp`); the folder then also holds ``MULT18X18D_sim.v``, a
            simulation model of that primitive subset (synthesis uses the vendor's cell); or
            ``"ice40"``: the products generic, their factor registers marked ``keep``.
        packet: predictions per TLAST of the wrapper's prediction stream (:class:`onchip.hw.axis.AxisLearner`).

    Returns:
        the :class:`onchip.hw.Design` (``info``: ports, payload fields, formats, latency in
        cycles to prediction and to update, II in cycles).

    Raises:
        onchip.SpecError / ValueError: a bad spec, ``top``, ``out``, ``dsp`` or ``packet``.
    """
    from ..hw import generate
    from ..hw.axis import check_packet
    from ..hw.dsp import check_dsp, mult18x18d_model

    spec = load_spec(spec)
    check_top(top)
    check_dsp(dsp)
    check_packet(packet)
    check_output_dir(out)
    design = generate(spec, top=top, theta=theta, dsp=dsp, packet=packet)
    with atomic_output_dir(out) as stage:
        write_design(design, stage)
        write_templates(design, stage)
        if "MULT18X18D" in design.verilog:
            (stage / "MULT18X18D_sim.v").write_text(mult18x18d_model())
    return design


def synth(spec: "LearnerSpec | str | os.PathLike", *, family: str = "xcup",
          out: "str | os.PathLike | None" = None, top: str = DEFAULT_TOP, theta=None) -> dict:
    """Synthesise the learner core with Yosys (``synth_xilinx`` / ``synth_ecp5`` / ``synth_ice40``); on
    ECP5 the ``fast`` plan's products are MULT18X18D instances holding their registers (:func:`family_dsp`).

    Args:
        spec: the learner.
        family: a family of :mod:`onchip.flow.yosys` (``xcup``, ``xc7``, ``ecp5``, ``ice40``).
        out: folder for ``report.json``, ``spec.toml`` and Yosys' work files; None: a temporary
            folder, removed afterwards.
        top: the core's module name (:func:`onchip.hw.names.check_top`).
        theta: raw reset values of the parameters (P,) (default: the spec's initial parameters).

    Returns:
        ``{"spec", "top", "datapath", "schedule", "staleness", "timing" (the plan built:
        :data:`onchip.hw.description.PLAN_KEYS`), "family", "lut", "ff", "dsp", "bram", "bram_unit", "lutram", "carry", "latency_cycles",
        "latency_cycles_prediction", "latency_cycles_update", "initiation_interval" (cycles),
        "param_count", "cells", "yosys_version"}``.

    Raises:
        onchip.SpecError / ValueError: a bad spec, family, ``top`` or ``out``.
        onchip.ToolError: Yosys failed.
    """
    from ..hw import generate
    from ..hw.description import PLAN_KEYS
    from .yosys import _check_family, synthesize

    spec = load_spec(spec)
    _check_family(family)
    check_top(top)
    if out is not None:
        check_output_dir(out)
    design = generate(spec, axis=False, top=top, theta=theta, dsp=family_dsp(family))

    def report_of(workdir: Path) -> dict:
        res = synthesize(design.verilog, design.top, family, workdir=workdir)
        return {
            "spec": spec.name or "custom",
            "top": design.top,
            **{k: design.info[k] for k in PLAN_KEYS},
            **{k: res[k] for k in ("family", "lut", "ff", "dsp", "bram", "bram_unit", "lutram", "carry")},
            "latency_cycles": design.info["latency_cycles_update"],
            "latency_cycles_prediction": design.info["latency_cycles_prediction"],
            "latency_cycles_update": design.info["latency_cycles_update"],
            "initiation_interval": design.info["initiation_interval"],
            "param_count": spec.parameter_count(),
            "cells": res["cells"],
            "yosys_version": res["yosys_version"],
        }

    if out is None:
        with tempfile.TemporaryDirectory(prefix="onchip-synth-") as tmp:
            return report_of(Path(tmp))
    with atomic_output_dir(out) as stage:
        report = report_of(stage / "yosys")
        write_json(stage / "report.json", report)
        (stage / "spec.toml").write_text(spec.to_toml())
    return report


def pnr(spec: "LearnerSpec | str | os.PathLike", *, out: "str | os.PathLike", board: str = "ulx3s-85f",
        baud: int | None = None, seed: int = 1, top: str = DEFAULT_TOP, theta=None) -> dict:
    """Place and route the learner in a UART board top on a Lattice board (YoWASP yosys + nextpnr).

    Args:
        spec: the learner.
        out: folder for the bitstream, logs, ``report.json``, ``spec.toml``, and the core's
            ``<top>.v`` and ``<top>.json`` whose header and ``clock`` give the board clock and the
            placement's fmax.
        board: a Lattice board of :data:`onchip.flow.boards.BOARDS`.
        baud: UART rate (bit/s, >= 1200; default :data:`onchip.flow.boards.DEFAULT_BAUD`).
        seed: nextpnr placer seed.
        top: the core's module name (:func:`onchip.hw.names.check_top`; not ``top``, the board top's).
        theta: raw reset values of the parameters (P,) (default: the spec's initial parameters).

    Returns:
        the report of :func:`onchip.flow.nextpnr.place_and_route`: fmax (MHz) measured by
        nextpnr, utilisation, latency in cycles and in ns (cycles / fmax), the bitstream's name.

    Raises:
        onchip.SpecError / ValueError: a bad spec, board, baud, ``top`` or ``out``.
        onchip.ToolError: a tool failed.
    """
    from ..hw import clocked, generate
    from ..hw.description import clock_entry
    from .boards import DEFAULT_BAUD, check_board_top, get_board
    from .nextpnr import place_and_route

    spec = load_spec(spec)
    get_board(board, vendor="lattice")
    baud = DEFAULT_BAUD if baud is None else baud
    if baud < 1200:
        raise ValueError(f"--baud must be >= 1200, got {baud}")
    check_board_top(top)
    check_output_dir(out)
    from . import fit

    lattice = get_board(board)
    fit.check_lattice_bram(spec, lattice.platform().device, lattice.family)  # before generating N banks
    design = generate(spec, axis=False, top=top, theta=theta, dsp=family_dsp(lattice.family))
    with atomic_output_dir(out) as stage:
        report = place_and_route(design, board, stage, baud=baud, seed=seed)
        # the core as placed, its header and JSON now giving the board clock and the placement's fmax
        design = clocked(design, clock_entry(
            mhz=report["clock_mhz"], source=f"the {board} board clock, UART board top",
            fmax_mhz=report["fmax_mhz"], fmax_source=f"nextpnr, this folder's placement of the board top, seed {seed}"))
        write_design(design, stage)
        (stage / "spec.toml").write_text(spec.to_toml())
    return report


def vivado(spec: "LearnerSpec | str | os.PathLike", *, out: "str | os.PathLike", part: str | None = None,
           board: str | None = None, clock_mhz: float | None = None, ip: bool = False,
           top: str = DEFAULT_TOP, theta=None, fit_check: bool = True, packet: int = 1) -> dict:
    """Write a Vivado project (run with ``sh run.sh`` where Vivado is installed; not run here).

    Before anything is written, the core's Yosys count is compared with the target part's
    resources (:func:`onchip.flow.fit.check_xilinx_fit`): a design that cannot fit is refused
    here rather than after a Vivado run.

    Args:
        spec: the learner.
        out: the project folder.
        part: a Xilinx part for out-of-context synthesis and implementation of the core
            (default :data:`onchip.flow.vivado.DEFAULT_PART`), or
        board: a Xilinx board: the UART board top with its constraints, ending in a bitstream, or a
            board of :data:`onchip.flow.vivado.AXIS_BOARDS` (the AXI4-Stream learner, out of context).
        clock_mhz: the out-of-context clock constraint (MHz; default 200); for ``ip``, the FREQ_HZ of
            its ``aclk`` interface (default: none, the block design's).
        ip: package the AXI4-Stream learner as a Vivado IP instead (named ``<top>_axis``).
        packet: predictions per TLAST of the AXI4-Stream learner (:class:`onchip.hw.axis.AxisLearner`).
        top: the core's module name (:func:`onchip.hw.names.check_top`; not ``top`` for a UART board).
        theta: raw reset values of the parameters (P,) (default: the spec's initial parameters).
        fit_check: run the fit check (one Yosys synthesis, cached); False skips it.

    The folder also holds the learner's JSON description ``<top>.json`` and its instantiation
    templates (:func:`write_templates`: Verilog and VHDL component), each Verilog header and the
    JSON giving the clock the flow constrains (:func:`vivado_clock`).

    Returns:
        the project manifest (``part``, ``part_from``: ``"--part"``, ``"--board"`` or ``"default"``, files, ``latency_cycles_update``, ``initiation_interval``,
        ``fit``: the check's counts, ``{"checked": False, ...}`` when skipped or the part is not
        in :data:`onchip.flow.fit.XILINX_PARTS`).

    Raises:
        onchip.SpecError / ValueError: a bad spec, part, board, clock, ``top`` or ``out``.
        onchip.flow.fit.DesignTooLarge: (a ValueError) the core needs more DSP, BRAM, LUT or FF
            than the part has; nothing is written.
        onchip.ToolError: Yosys failed in the fit check.
    """
    from ..hw import clocked, generate
    from ..hw.axis import check_packet
    from .boards import check_board_top
    from .fit import check_xilinx_fit
    from .vivado import check_project, project_part, write_project

    spec = load_spec(spec)
    flow = check_project(part=part, board=board, clock_mhz=clock_mhz, ip=ip)
    (check_board_top if flow == "board" else check_top)(top)
    check_packet(packet)
    check_output_dir(out)
    design = generate(spec, axis=flow in ("ip", "board-axis"), top=top, theta=theta, packet=packet)
    target = project_part(part=part, board=board)
    fit = (check_xilinx_fit(design.verilog, design.top, target) if fit_check
           else {"part": target, "device": None, "checked": False, "reason": "skipped (fit_check=False)"})
    design = clocked(design, vivado_clock(flow, target, clock_mhz, board))
    with atomic_output_dir(out) as stage:
        manifest = write_project(design, stage, part=part, board=board, clock_mhz=clock_mhz, ip=ip)
        manifest["fit"] = fit
        manifest["part_from"] = "--board" if board is not None else "--part" if part is not None else "default"
        write_json(stage / f"{design.top}.json", design.info)
        manifest["files"] = sorted({*manifest["files"], f"{design.top}.json", *write_templates(design, stage)})
        write_json(stage / "manifest.json", manifest)
        (stage / "spec.toml").write_text(spec.to_toml())
    return manifest


def vivado_clock(flow: str, part: str, clock_mhz: float | None, board: str | None) -> dict:
    """The ``clock`` entry (:func:`onchip.hw.description.clock_entry`) of a Vivado flow of
    :func:`vivado`: the XDC constraint of the out-of-context flows, the board clock of a UART board,
    the ``FREQ_HZ`` of an IP's ``aclk`` (or none, left to the block design); no placement yet."""
    from ..hw.description import clock_entry
    from .boards import get_board
    from .vivado import DEFAULT_CLOCK_MHZ

    fmax = "no placement here yet: after sh run.sh, onchip vivado-report reads it into report.json"
    if flow == "ip":
        if clock_mhz is None:
            return clock_entry(source="set by the block design: the FREQ_HZ its clock propagates to aclk",
                               fmax_source=fmax)
        return clock_entry(mhz=clock_mhz, freq_hz_param=True, fmax_source=fmax,
                           source="FREQ_HZ of the IP's aclk interface (package_ip.tcl); a block design "
                                  "clocking aclk otherwise is flagged by its validation")
    if flow == "board":
        platform = get_board(board, vendor="xilinx").platform()
        mhz = platform.lookup(platform.default_clk).clock.frequency / 1e6
        return clock_entry(mhz=mhz, source=f"the {board} board clock (Amaranth's top.xdc), UART board top",
                           fmax_source=fmax)
    mhz = DEFAULT_CLOCK_MHZ if clock_mhz is None else clock_mhz
    port = "aclk" if flow == "board-axis" else "clk"
    return clock_entry(mhz=mhz, source=f"constraints.xdc: create_clock on {port}, out of context on {part}",
                       fmax_source=fmax)
