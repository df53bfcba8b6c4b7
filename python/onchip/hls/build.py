"""Compile an emitted HLS project into a C-simulation program, cached.

The compiler is the system ``g++`` (or ``$CXX``); the ``ap_types`` headers
(``ap_fixed.h``, ``ap_int.h``, ``hls_stream.h``) are the ones hls4ml ships
(``hls4ml/templates/vivado/ap_types``), located from the installed package.
The program (``onchip_csim``: the top function and the stream protocol of
:file:`onchip_csim.cpp`) runs as a child process of :mod:`onchip.hls.backend`. It is cached under :func:`onchip.cache.cache_root` (``$ONCHIP_CACHE``,
else ``$XDG_CACHE_HOME/onchip``, else ``~/.cache/onchip``) by a hash of the sources,
the headers' package version, the compiler's version and the flags; an entry is
built in a temporary folder and renamed into place only when the build succeeded.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
from importlib import metadata
from pathlib import Path

from .. import processes
from ..cache import cached_build, digest
from ..errors import ToolError
from .emit import HlsProject

#: g++ flags of the C-simulation program (assertions of the ap_types headers stay on).
CXXFLAGS = ("-O2", "-std=c++17", "-w")
#: File name of the C-simulation program inside its cache entry.
PROGRAM = "onchip_csim"


class HlsBuildError(ToolError):
    """g++ rejected the emitted HLS C++; the message ends with the compiler's last lines."""


def ap_types_dir() -> Path:
    """The folder of the ``ap_types`` headers shipped by the installed hls4ml.

    Raises:
        FileNotFoundError: hls4ml is not installed or ships no ``ap_fixed.h``.
    """
    # located, not imported: importing hls4ml probes for TensorFlow and PyTorch
    found = importlib.util.find_spec("hls4ml")
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            "the HLS backend needs the ap_types headers of hls4ml: pip install hls4ml==1.3.0")
    folder = Path(found.submodule_search_locations[0]) / "templates" / "vivado" / "ap_types"
    if not (folder / "ap_fixed.h").is_file():
        raise FileNotFoundError(f"no ap_fixed.h in {folder} (hls4ml {_version('hls4ml')})")
    return folder


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def compiler() -> tuple[str, str]:
    """(path, first line of ``--version``) of the C++ compiler (:func:`onchip.processes.cxx_compiler`).

    Raises:
        FileNotFoundError: no compiler found.
    """
    path = processes.cxx_compiler()
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    return path, version.stdout.splitlines()[0].strip()


def missing() -> str | None:
    """None when the C simulation can be built here, else one line naming what is missing: the
    C++ compiler (``$CXX`` or g++) or the ap_types headers of hls4ml."""
    try:
        compiler()
        ap_types_dir()
    except (FileNotFoundError, OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None


#: Optimization levels a C-simulation program may be built with: ``O2`` (the default, fast
#: long streams) or ``O0`` (builds faster: short streams, e.g. the differential fuzz test).
OPT_LEVELS = ("O2", "O1", "O0")
#: The headers every program includes, precompiled once per compiler, flags and hls4ml version.
_PCH_TEXT = '#include "ap_fixed.h"\n#include "ap_int.h"\n#include "hls_stream.h"\n'
_PCH = "onchip_pch.h"


def _flags(opt: str) -> list[str]:
    if opt not in OPT_LEVELS:
        raise ValueError(f"opt must be one of {', '.join(OPT_LEVELS)}; got {opt!r}")
    return [f"-{opt}", *CXXFLAGS[1:]]


def cache_key(project: HlsProject, opt: str = "O2", testbench: bool = False) -> str:
    """Hash of everything the program depends on: sources, headers' version, compiler, flags
    (and whether the test bench was compiled too)."""
    _, version = compiler()
    parts = [version, " ".join(_flags(opt)), f"hls4ml-ap_types {_version('hls4ml')}", PROGRAM,
             *(["onchip_tb.cpp checked"] if testbench else [])]
    for name in sorted(project.files):
        parts += [name, project.files[name]]
    return digest(*parts)


def _precompiled_headers(opt: str, root) -> Path | None:
    """Folder holding ``onchip_pch.h`` and its ``.gch`` for ``opt`` (cached), or None if g++
    cannot precompile it (the programs then parse the headers themselves: same result)."""
    cxx, version = compiler()
    include = ap_types_dir()
    flags = _flags(opt)

    def build(folder: Path) -> None:
        (folder / _PCH).write_text(_PCH_TEXT)
        cmd = [cxx, *flags, f"-I{include}", "-x", "c++-header", _PCH, "-o", f"{_PCH}.gch"]
        proc = processes.run(cmd, cwd=folder, capture_output=True, text=True)
        if proc.returncode != 0:
            raise HlsBuildError(f"g++ could not precompile the ap_types headers:\n{proc.stderr[-2000:]}")

    key = digest(version, " ".join(flags), f"hls4ml-ap_types {_version('hls4ml')}", str(include), _PCH_TEXT)
    try:
        return cached_build("hls_pch", key, build, root=root)[0]
    except HlsBuildError:
        return None


def build_simulator(project: HlsProject, *, root=None, opt: str = "O2", testbench: bool = False) -> tuple[Path, bool]:
    """The compiled C-simulation program of ``project`` (built on a cache miss).

    The ap_types headers are precompiled once (a cache entry of their own), which halves
    the build time of a program.

    Args:
        project: from :func:`onchip.hls.emit.emit`.
        root: cache folder (default ``cache_root()``).
        opt: optimization level, one of :data:`OPT_LEVELS` (``O0`` builds about twice as fast
            and runs several times slower).
        testbench: also compile the project's Vitis test bench (``onchip_tb.cpp``, syntax only),
            so that every C++ file the project holds is known to compile under its top.

    Returns:
        (path of the executable, True if this call compiled it).

    Raises:
        ValueError: an unknown ``opt``.
        FileNotFoundError: no compiler or no ap_types headers.
        HlsBuildError: the compiler failed (its message is included); no cache entry is left.
    """
    flags = _flags(opt)
    cxx, _ = compiler()
    include = ap_types_dir()

    def build(folder: Path) -> None:
        for name, text in project.files.items():
            (folder / name).write_text(text)
        (folder / "onchip_csim_main.cpp").write_text(project.csim_unit)
        pch = _precompiled_headers(opt, root)
        pre = [f"-I{pch}", "-include", _PCH] if pch is not None else []
        cmd = [cxx, *flags, *pre, f"-I{folder}", f"-I{include}", "onchip_csim_main.cpp", "-o", PROGRAM]
        proc = processes.run(cmd, cwd=folder, capture_output=True, text=True)
        if proc.returncode == 0 and testbench:
            tb = [cxx, *flags, *pre, f"-I{folder}", f"-I{include}", "-fsyntax-only", "onchip_tb.cpp"]
            proc = processes.run(tb, cwd=folder, capture_output=True, text=True)
        if proc.returncode != 0:
            raise HlsBuildError(f"g++ failed on the HLS C++ of {project.top}:\n{proc.stderr[-4000:]}")

    entry, built = cached_build("hls", cache_key(project, opt, testbench), build, root=root)
    return entry / PROGRAM, built
