"""The C++ names a top function may not take, found by compiling the emitted sources.

The top function ``void <top>(...)`` is declared at global scope after ``ap_fixed.h``,
``ap_int.h``, ``hls_stream.h``, the C library headers the benches include and the learner's
own header (whose names ``using namespace <top>_ns`` brings in), and the test benches call it
through ``ONCHIP_TOP`` from inside their ``main``. A top may therefore not be:

* a macro any of them defines (``EOF``, ``stdout``, ``AP_TRN``, ``ONCHIP_AXIS_WORD``...);
* a name the compiler rejects or finds ambiguous beside it: every identifier of the
  preprocessed sources is declared as a function at global scope and its address taken, one per line,
  in one g++ run over the KAN and the MLP project; a line g++ reports an error on names a taken
  name (``std``, ``hls``, ``size_t``, ``int64_t``, ``axis_word``, ``N_IN``...);
* an identifier of the benches themselves (a local of their ``main`` would hide the top).

``python -m onchip.hls.taken_names`` writes the list to ``onchip/hw/cxx_names.py`` (with the
compiler and hls4ml versions it came from); :func:`onchip.hw.names.check_top` refuses its names.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

_IDENT = re.compile(r"\b[A-Za-z][A-Za-z0-9_]*\b")
_ERROR = re.compile(r"^taken\.cpp:(\d+):\d+: error", re.MULTILINE)
_TOP = "onchip_learner"
_UNIT = (f'#include "{_TOP}.cpp"\n#define main onchip_csim_main\n#include "onchip_csim.cpp"\n#undef main\n'
         '#define main onchip_tb_main\n#include "onchip_tb.cpp"\n#undef main\n')
# a signature of no other name: a line that broke a name it uses (``axis_word``) would fail the lines after it
_DECL = "void {0}(int); static const void* const onchip_taken_{1} = (const void*)&{0};\n"


def _strip(text: str) -> str:
    """C++ source without comments and string literals (their words are no identifiers)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r'"(?:\\.|[^"\\])*"', " ", text)


def taken_names(spec) -> set[str]:
    """The names a top may not take in the project of ``spec`` (see the module docstring).

    Raises:
        FileNotFoundError: no compiler or no ap_types headers.
    """
    from ..hw.names import RESERVED
    from .build import ap_types_dir, compiler
    from .emit import emit

    cxx, _ = compiler()
    project = emit(spec, top=_TOP)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        for name, text in project.files.items():
            (folder / name).write_text(text)
        (folder / "unit.cpp").write_text(_UNIT)
        base = [cxx, "-std=c++17", "-w", f"-I{folder}", f"-I{ap_types_dir()}"]
        macros = subprocess.run([*base, "-E", "-dM", "unit.cpp"], cwd=folder, capture_output=True, text=True,
                                check=True).stdout
        defined = {line.split()[1].split("(")[0] for line in macros.splitlines() if line.startswith("#define ")}
        source = subprocess.run([*base, "-E", "-P", "unit.cpp"], cwd=folder, capture_output=True, text=True,
                                check=True).stdout
        words = set(_IDENT.findall(_strip(source))) - defined - RESERVED - {"main"}
        candidates = sorted(w for w in words if "__" not in w and not w.endswith("_"))
        body = "".join(_DECL.format(name, k) for k, name in enumerate(candidates))
        (folder / "taken.cpp").write_text(_UNIT + body)  # the candidates start on line _UNIT's count + 1
        errors = subprocess.run([*base, "-fsyntax-only", "-fmax-errors=0", "taken.cpp"], cwd=folder,
                                capture_output=True, text=True, check=False).stderr  # errors expected
    first = _UNIT.count("\n") + 1
    rejected = {candidates[int(line) - first] for line in _ERROR.findall(errors) if int(line) >= first}
    benches = set()
    for name in ("onchip_tb.cpp", "onchip_csim.cpp"):
        benches |= set(_IDENT.findall(_strip(project.files[name])))
    taken = {w for w in defined | rejected | benches if _IDENT.fullmatch(w)}
    return {w for w in taken if not w.startswith(_TOP)} - RESERVED - {"main"}


def render(names: set[str], versions: str) -> str:
    """The text of ``cxx_names.py``."""
    lines = ['"""C++ names a top function may not take (generated: do not edit).', "",
             f"Written by ``python -m onchip.hls.taken_names`` ({versions}).", '"""', "",
             "#: macros, global names and bench identifiers of the emitted HLS C++ (onchip.hls.taken_names)",
             "TAKEN = frozenset({"]
    row = "   "
    for name in sorted(names):
        item = f" {name!r},"
        if len(row) + len(item) > 100:
            lines.append(row)
            row = "   "
        row += item
    lines += [row, "})", ""]
    return "\n".join(lines)


def main() -> None:
    """Rewrite ``onchip/hw/cxx_names.py`` from the KAN and MLP presets' projects."""
    from ..spec import PRESETS
    from .build import compiler

    names = set()
    for preset in ("kan-regression", "mlp-regression"):
        names |= taken_names(PRESETS[preset].replace(schedule="pipelined"))
    versions = f"{compiler()[1]}; hls4ml {metadata.version('hls4ml')} ap_types"
    out = Path(__file__).parent.parent / "hw" / "cxx_names.py"
    out.write_text(render(names, versions))
    print(f"wrote {out}: {len(names)} names")


if __name__ == "__main__":
    main()
