"""Does the synthesised design fit the device? Asked of nextpnr itself before placement.

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


def verdict_message(verdict: dict) -> str:
    """The one-line refusal for a :data:`VERDICT` file's contents."""
    return f"the design does not fit the {verdict['device']}: " + "; ".join(verdict["over_budget"])


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
