"""Reading and checking a sweep definition (the TOML format is in :mod:`onchip.sweep`)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from .computations import COMPUTATIONS, DESIGN_COLUMNS, POINT_COLUMNS
from .grid import expand
from .pages import check_tables


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
            ``<computation>.<setting>`` or the grid point); a ``[[plot]]`` column no point computes; an unknown table, ``[sweep]`` key,
            computation setting, ``[[plot]]`` or ``[[table]]`` key, with the closest known name (a misspelt one
            would otherwise be ignored: a default used, a plot not drawn).
    """
    _check_names(d)
    sweep = d.get("sweep", {})
    compute = sweep.get("compute")
    if not isinstance(compute, list) or not compute or any(c not in tuple(COMPUTATIONS) for c in compute):
        raise ValueError(f"sweep.compute must be a non-empty list of {', '.join(COMPUTATIONS)}; got {compute!r}")
    grids = d.get("grid")
    if not isinstance(grids, list) or not grids:
        raise ValueError("sweep definition needs at least one [[grid]] table")
    _check_plot_columns(d, expand(d))


def table_columns(d: dict, points: list[dict]) -> set[str] | None:
    """The columns ``results.csv`` can hold for these points (:func:`onchip.sweep.expand`), or None
    when a computation of the definition does not declare its columns."""
    chosen = [COMPUTATIONS[name] for name in d["sweep"]["compute"]]
    if any(c.columns is None for c in chosen):
        return None
    columns = set(POINT_COLUMNS) | {k for p in points for k in p["params"]}
    if any(c.needs_design for c in chosen):
        columns |= set(DESIGN_COLUMNS)
    return columns | {col for p in points for c in chosen for col in c.columns(p["settings"][c.name])}


def _check_plot_columns(d: dict, points: list[dict]) -> None:
    """Refuse a ``[[plot]]`` column no point computes before any point is (a misspelt one would
    otherwise be found after the whole sweep)."""
    columns = table_columns(d, points)
    if columns is None:
        return
    for plot in d.get("plot", []):
        ys = plot["y"] if isinstance(plot["y"], list) else [plot["y"]]
        named = [plot["x"], *ys, *plot.get("series", []), *plot.get("where", {})]
        missing = [column for column in named if column not in columns]
        if missing:
            raise ValueError(f"[[plot]] {plot.get('file', 'plot.png')}: no column {', '.join(map(repr, missing))} "
                             f"in the table; its columns: {', '.join(sorted(columns))}")


#: the keys of ``[sweep]`` and of a ``[[plot]]`` table (:func:`onchip.sweep.report.plot_table`)
SWEEP_KEYS = ("name", "compute")
PLOT_KEYS = ("x", "y", "series", "where", "logx", "logy", "title", "file")


def _check_names(d: dict) -> None:
    """Refuse a name the definition's reader would ignore: a table, a ``[sweep]`` key, a setting of a
    computation's table (its defaults and grid axes are its settings) or a ``[[plot]]`` key."""
    from ..spec import unknown_fields

    def refuse(where: str, table, known) -> None:
        if not isinstance(table, dict):
            raise ValueError(f"{where} must be a table; got {table!r}")
        unknown = set(table) - set(known)
        if unknown:
            raise ValueError(unknown_fields(unknown, known, f"{where}: unknown key(s)"))

    tables = ("sweep", "base", "grid", "plot", "table", *COMPUTATIONS)
    refuse("sweep definition", {k: v for k, v in d.items() if k != "_dir"}, tables)
    refuse("[sweep]", d.get("sweep", {}), SWEEP_KEYS)
    for name, computation in COMPUTATIONS.items():
        if name in d:
            refuse(f"[{name}]", d[name], (*computation.defaults, *computation.axes))
    plots = d.get("plot", [])
    if not isinstance(plots, list):
        raise ValueError(f"[[plot]] must be an array of tables; got {plots!r}")
    for i, plot in enumerate(plots):
        refuse(f"[[plot]] {i + 1}", plot, PLOT_KEYS)
        missing = [key for key in ("x", "y") if key not in plot]
        if missing:
            raise ValueError(f"[[plot]] {i + 1}: needs {' and '.join(missing)} (the columns it draws)")
    check_tables(d.get("table", []))
