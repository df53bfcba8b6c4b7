"""The name of a generated learner: checked once, for every language it ends up in.

``top`` names the core module (``<top>``), the AXI4-Stream wrapper (``<top>_axis``), their
VHDL component declarations and, through ``onchip hls``, the HLS top function that Vitis turns
into a Verilog and VHDL module. Amaranth names every submodule after its place in the
hierarchy (``<top>.l0_bspline0``, escaped identifiers), so two learners of different ``top``
share no module name. A name must therefore be an identifier of Verilog, VHDL (a basic
identifier: letter first, no double or trailing underscore) and C++, and a reserved word of
none of them (IEEE 1364-2005 Annex B, IEEE 1800-2017 Annex B, IEEE 1076-2019 clause 15.10,
ISO C++20 [lex.key]; VHDL words in any case, as VHDL ignores case).

Nor may it be a name the tools or onchip already use for something else: ``TOP`` (Verilator's
own top scope), a module onchip writes beside the learner (:data:`ONCHIP_MODULES`), a primitive
of the ECP5, iCE40 or Xilinx cell libraries (:data:`onchip.hw.cell_names.CELLS`, in any case:
VHDL and Vivado's unisim library fold case), a name the HLS C++ already uses
(:data:`onchip.hw.cxx_names.TAKEN`, found by g++: :mod:`onchip.hls.taken_names`). And since the files and names derived from a top
append a suffix (:data:`DERIVED_SUFFIXES`: ``<top>_axis``, ``<top>_ns``, ``<top>_THETA_INIT``...),
a top may not end in one, so that two accepted tops never derive the same name.
"""

from __future__ import annotations

import functools
import re

#: Module name of the learner core when none is given.
DEFAULT_TOP = "onchip_learner"

_VERILOG = """always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config deassign
default defparam design disable edge else end endcase endconfig endfunction endgenerate endmodule
endprimitive endspecify endtable endtask event for force forever fork function generate genvar highz0
highz1 if ifnone incdir include initial inout input instance integer join large liblist library
localparam macromodule medium module nand negedge nmos nor noshowcancelled not notif0 notif1 or output
parameter pmos posedge primitive pull0 pull1 pulldown pullup pulsestyle_ondetect pulsestyle_onevent
rcmos real realtime reg release repeat rnmos rpmos rtran rtranif0 rtranif1 scalared showcancelled
signed small specify specparam strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1
tri tri0 tri1 triand trior trireg unsigned use uwire vectored wait wand weak0 weak1 while wire wor
xnor xor"""

_SYSTEMVERILOG = """accept_on alias always_comb always_ff always_latch assert assume before bind bins binsof
bit break byte chandle checker class clocking const constraint context continue cover covergroup
coverpoint cross dist do endchecker endclass endclocking endgroup endinterface endpackage endprogram
endproperty endsequence enum eventually expect export extends extern final first_match foreach
forkjoin global iff ignore_bins illegal_bins implements implies import inside int interconnect
interface intersect join_any join_none let local logic longint matches modport nettype new nexttime
null package packed priority program property protected pure rand randc randcase randsequence ref
reject_on restrict return s_always s_eventually s_nexttime s_until s_until_with sequence shortint
shortreal soft solve static string strong struct super sync_accept_on sync_reject_on tagged this
throughout timeprecision timeunit type typedef union unique unique0 until until_with untyped var
virtual void wait_order weak wildcard with within"""

_VHDL = """abs access after alias all and architecture array assert assume assume_guarantee attribute begin block body
buffer bus case component configuration constant context cover default disconnect downto else elsif
end entity exit fairness file for force function generate generic group guarded if impure in inertial
inout is label library linkage literal loop map mod nand new next nor not null of on open or others
out package parameter port postponed private procedure process property protected pure range record
register reject release rem report restrict restrict_guarantee return rol ror select sequence severity shared signal sla
sll sra srl strong subtype then to transport type unaffected units until use variable view vmode
vprop vunit wait when while with xnor xor"""

# C++ keywords, and main: the HLS test bench defines it
_CPP = """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return
co_yield decltype default delete do double dynamic_cast else enum explicit export extern false float
for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq
private protected public register reinterpret_cast requires return short signed sizeof static
static_assert static_cast struct switch template this thread_local throw true try typedef typeid
typename union unsigned using virtual void volatile wchar_t while xor xor_eq main"""

#: Reserved words a top name may not be: Verilog and SystemVerilog and C++ as written, VHDL in any case.
RESERVED = frozenset((_VERILOG + " " + _SYSTEMVERILOG + " " + _CPP).split())
VHDL_RESERVED = frozenset(_VHDL.split())

#: Module names the tools reserve, compared as written: Verilator's top scope.
TOOL_RESERVED = frozenset({"TOP"})
#: Modules onchip writes beside a learner: the formal harness's property module.
ONCHIP_MODULES = frozenset({"onchip_props"})
#: Suffixes onchip appends to a top (compared in any case: VHDL and some file systems fold it):
#: the AXI4-Stream wrapper ``<top>_axis``, the templates ``<top>_inst.v`` / ``<top>_component.vhd``,
#: the HLS namespace ``<top>_ns``, reset-state macro ``<top>_THETA_INIT`` and include guard
#: ``<top>_H``, the Vitis project ``<top>_prj`` and Vivado checkpoint ``<top>_routed.dcp``.
DERIVED_SUFFIXES = ("_axis", "_inst", "_component", "_ns", "_theta_init", "_h", "_prj", "_routed")

#: Longest top name: it prefixes every file written (``<top>_axis.vhd``, ``<top>_inst.vho``) and every
#: submodule, within the 255 bytes a file name may have and the name lengths tools print in reports.
MAX_TOP_LENGTH = 64

# a letter, then letters and digits each preceded by at most one underscore
_IDENTIFIER = re.compile(r"[A-Za-z](?:_?[A-Za-z0-9])*")


def check_top(name) -> str:
    """``name`` if it can name a generated learner (see the module docstring), else raise.

    Returns:
        ``name``.

    Raises:
        ValueError: not a string, not an identifier of Verilog, VHDL and C++ (a letter first, then
            letters, digits and single underscores, not ending in one), longer than
            :data:`MAX_TOP_LENGTH` characters, a reserved word, a name of the tools
            (:data:`TOOL_RESERVED`), of onchip (:data:`ONCHIP_MODULES`), of a primitive cell or of
            the HLS C++ (:data:`onchip.hw.cxx_names.TAKEN`), or
            ending in one of :data:`DERIVED_SUFFIXES`; the message starts with ``--top`` and the value.
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"--top {name!r}: a module name must start with a letter and hold only letters, digits "
                         f"and single underscores, not ending in one (an identifier of Verilog, VHDL and C++)")
    if len(name) > MAX_TOP_LENGTH:
        raise ValueError(f"--top {name[:20]!r}... ({len(name)} characters): a module name of at most "
                         f"{MAX_TOP_LENGTH} characters")
    if name in RESERVED or name.lower() in VHDL_RESERVED:
        raise ValueError(f"--top {name!r}: a reserved word of Verilog, SystemVerilog, VHDL or C++")
    if name in TOOL_RESERVED:
        raise ValueError(f"--top {name!r}: Verilator names its own top scope {name}; choose another name")
    if name in ONCHIP_MODULES:
        raise ValueError(f"--top {name!r}: onchip writes a module of that name itself; choose another name")
    cell = _cells().get(name.upper())
    if cell is not None:
        family, spelled = cell
        raise ValueError(f"--top {name!r}: the {family} primitive {spelled} has that name (its cell library "
                         f"would define or instantiate it); choose another name")
    if name in _cxx_taken():
        raise ValueError(f"--top {name!r}: a name the HLS C++ already uses (a macro or global name of the C/C++ "
                         f"library or ap_types, or of onchip's test benches); choose another name")
    suffix = next((s for s in DERIVED_SUFFIXES if name.lower().endswith(s)), None)
    if suffix is not None:
        raise ValueError(f"--top {name!r}: ends in {suffix}, a suffix onchip appends to a top (the names "
                         f"derived from '{name[:-len(suffix)]}'); choose another name")
    return name


@functools.cache
def _cxx_taken() -> frozenset[str]:
    from .cxx_names import TAKEN

    return TAKEN


#: family key of :data:`onchip.hw.cell_names.CELLS` -> the family's name in messages
_FAMILIES = {"ecp5": "ECP5", "ice40": "iCE40", "xilinx": "Xilinx"}


@functools.cache
def _cells() -> dict[str, tuple[str, str]]:
    """Upper-cased primitive name -> (family, the name as its library spells it)."""
    from .cell_names import CELLS

    return {cell.upper(): (_FAMILIES[family], cell) for family, cells in CELLS.items() for cell in cells}
