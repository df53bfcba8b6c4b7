"""Compile an emitted HLS project into a C-simulation shared library, cached.

The compiler is the system ``g++`` (or ``$CXX``); the ``ap_types`` headers
(``ap_fixed.h``, ``ap_int.h``, ``hls_stream.h``) are the ones hls4ml ships
(``hls4ml/templates/vivado/ap_types``), located from the installed package.
A library is cached under :func:`onchip.cache.cache_root` (``$ONCHIP_CACHE``,
else ``$XDG_CACHE_HOME/onchip``, else ``~/.cache/onchip``) by a hash of the sources,
the headers' package version, the compiler's version and the flags; an entry is
built in a temporary folder and renamed into place only when the build succeeded.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from ..cache import cached_build, digest
from .emit import HlsProject

#: g++ flags of the C-simulation library.
CXXFLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-w")
LIBRARY = "libonchip_hls.so"


def ap_types_dir() -> Path:
    """The folder of the ``ap_types`` headers shipped by the installed hls4ml.

    Raises:
        FileNotFoundError: hls4ml is not installed or ships no ``ap_fixed.h``.
    """
    try:
        import hls4ml
    except ImportError:
        raise FileNotFoundError(
            "the HLS backend needs the ap_types headers of hls4ml: pip install hls4ml==1.3.0"
        ) from None
    folder = Path(hls4ml.__file__).parent / "templates" / "vivado" / "ap_types"
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
    """(path, first line of ``--version``) of the C++ compiler (``$CXX`` or g++).

    Raises:
        FileNotFoundError: no compiler found.
    """
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"C++ compiler {name!r} not found (set CXX or install g++)")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    return path, version.stdout.splitlines()[0].strip()


def cache_key(project: HlsProject) -> str:
    """Hash of everything the library depends on: sources, headers' version, compiler, flags."""
    _, version = compiler()
    parts = [version, " ".join(CXXFLAGS), f"hls4ml-ap_types {_version('hls4ml')}"]
    for name in sorted(project.files):
        parts += [name, project.files[name]]
    return digest(*parts)


def build_library(project: HlsProject, *, root=None) -> tuple[Path, bool]:
    """The compiled C-simulation library of ``project`` (built on a cache miss).

    Args:
        project: from :func:`onchip.hls.emit.emit`.
        root: cache folder (default ``cache_root()``).

    Returns:
        (path of the ``.so``, True if this call compiled it).

    Raises:
        FileNotFoundError: no compiler or no ap_types headers.
        RuntimeError: the compiler failed (its message is included); no cache entry is left.
    """
    cxx, _ = compiler()
    include = ap_types_dir()

    def build(folder: Path) -> None:
        for name, text in project.files.items():
            (folder / name).write_text(text)
        (folder / "onchip_library.cpp").write_text(project.library_unit)
        cmd = [cxx, *CXXFLAGS, f"-I{folder}", f"-I{include}", "onchip_library.cpp", "-o", LIBRARY]
        proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"g++ failed on the HLS C++ of {project.top}:\n{proc.stderr[-4000:]}")

    entry, built = cached_build("hls", cache_key(project), build, root=root)
    return entry / LIBRARY, built
