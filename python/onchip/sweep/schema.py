"""Reading and checking a sweep definition (the TOML format is in :mod:`onchip.sweep`)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from .computations import COMPUTATIONS
from .grid import expand


def load_definition(path: str | os.PathLike) -> dict:
    """Read and validate a sweep TOML file.

    Returns:
        The parsed definition, with ``_dir`` (the file's folder, for relative data paths).

    Raises:
        FileNotFoundError: no such file.
        ValueError: bad TOML, unknown ``compute`` entries, no grid, a bad computation
            setting, or a grid point that is not a valid spec.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sweep definition {str(path)!r} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"sweep definition {path}: not valid TOML: {exc}") from None
    data["_dir"] = str(path.resolve().parent)
    validate_definition(data)
    return data


def validate_definition(d: dict) -> None:
    """Check a parsed definition; builds every point's spec and settings.

    Raises:
        ValueError: naming the bad key and value (``sweep.compute``, ``[[grid]]``,
            ``<computation>.<setting>`` or the grid point).
    """
    sweep = d.get("sweep", {})
    compute = sweep.get("compute")
    if not isinstance(compute, list) or not compute or any(c not in tuple(COMPUTATIONS) for c in compute):
        raise ValueError(f"sweep.compute must be a non-empty list of {', '.join(COMPUTATIONS)}; got {compute!r}")
    grids = d.get("grid")
    if not isinstance(grids, list) or not grids:
        raise ValueError("sweep definition needs at least one [[grid]] table")
    expand(d)
