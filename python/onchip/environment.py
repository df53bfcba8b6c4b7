"""What a run ran on: the record every ``metrics.json`` carries under ``"environment"`` (the seed
methods', ``onchip run``'s), so that a result can be told apart from one made elsewhere."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: the packages whose versions every ``metrics.json`` records (distribution names)
RECORDED_PACKAGES = ("numpy", "scipy", "torch", "scikit-learn")


def environment() -> dict:
    """What a run ran on, as ``metrics.json`` records it under ``"environment"``.

    Returns:
        ``{"python", "numpy", "scipy", "torch", "scikit-learn"`` (versions; None when not
        installed), ``"onchip"`` (its version), ``"git_commit"`` and ``"git_dirty"`` (the checkout
        onchip was imported from, with uncommitted changes to tracked files or not; None outside
        a git checkout), ``"threads": {"torch", "blas", "openmp"}`` (torch's intra-op threads when
        torch is loaded, and the largest BLAS / OpenMP pool threadpoolctl sees; None when not
        known) and ``"cpu_count"``}``.
    """
    import platform
    import subprocess
    import sys
    from importlib import metadata

    import onchip

    def version(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    def git(*args):
        try:
            out = subprocess.run(["git", *args], cwd=Path(onchip.__file__).parent, capture_output=True, text=True,
                                 timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    threads = {"torch": sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None,
               "blas": None, "openmp": None}
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            api = pool.get("user_api")
            if api in threads:
                threads[api] = max(threads[api] or 0, int(pool["num_threads"]))
    except ImportError:
        pass
    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"python": platform.python_version(), **{name: version(name) for name in RECORDED_PACKAGES},
            "onchip": onchip.__version__, "git_commit": commit or None,
            "git_dirty": None if commit is None or dirty is None else bool(dirty),
            "threads": threads, "cpu_count": os.cpu_count()}


def write_metrics(folder: str | os.PathLike, result: Mapping, command: str | None = None) -> None:
    """Write ``metrics.json``: ``{"command": command, **result, "environment": environment()}``
    (the command first, when given; what the run ran on last, :func:`environment`).

    Args:
        folder: the (staging) output folder.
        result: the experiment's result; numpy values become plain JSON.
        command: the command line that made it (:func:`onchip.commands._args.command_line`); None
            for a job whose result records its settings itself (``onchip run``).
    """
    from .io import write_json

    write_json(Path(folder) / "metrics.json",
               {**({"command": command} if command else {}), **result, "environment": environment()})
