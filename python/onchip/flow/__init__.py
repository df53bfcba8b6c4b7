"""Implementation flows of a generated learner: Yosys resources, Lattice place and route and
bitstreams (nextpnr), Vivado project scripts, and the UART board top they share.

* :func:`onchip.flow.yosys.synthesize` -- LUT/FF/DSP/BRAM/LUTRAM of the core per family;
* :func:`onchip.flow.nextpnr.place_and_route` -- bitstream, fmax, utilisation on a Lattice board;
* :func:`onchip.flow.vivado.write_part_project` / :func:`~onchip.flow.vivado.write_board_project`;
* :data:`onchip.flow.boards.BOARDS` and :class:`~onchip.flow.boards.UartStreamTop`;
* :func:`onchip.flow.tools.tool_cache_dir` -- where the tools' compiled WebAssembly is kept.
"""

from .boards import BOARDS, UartStreamTop
from .tools import tool_cache_dir, tool_versions
from .yosys import FAMILIES, synthesize

__all__ = ["BOARDS", "FAMILIES", "UartStreamTop", "synthesize", "tool_cache_dir", "tool_versions"]
