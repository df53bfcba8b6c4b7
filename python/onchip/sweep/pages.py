"""A sweep's results pages: markdown tables rendered from its ``results.csv``, written between marker lines.

A definition's ``[[table]]`` entries each describe one table::

    [[table]]
    name = "steps"                       # its marker lines in the page (MARKERS)
    page = "README.md"                   # relative to the definition's folder
    where = { task = "drift-regression" }  # optional: only the rows with these values
    rows = ["format_width"]              # optional: a table row per distinct value of these columns
                                         # (in the CSV's order); default: a table row per CSV row
    columns = [
      { head = "W", value = "{format_width}" },
      { head = "KAN", value = "{golden_mse:.3g}", where = { preset = "kan-regression" } },
      { head = "G / H", value = ["G={grid_size}", "H={hidden}"] },
      { head = "DSP", range = "dsp" },
      { head = "logic", change = "logic_excl_params", from = { grid_size = 4 }, to = { grid_size = 64 } },
      { head = "vs twin", compare = ["golden_mse", "float_mse"], where = { preset = "kan-regression" } },
    ]

A column is one of:

* ``value``: a ``str.format`` template over the CSV rows of the group that match the column's
  ``where`` (numbers parsed, empty cells absent), which must all give the same text (a group key,
  or one row); a list of templates takes the first whose fields are all present; no matching row
  or no template that fits: ``-``;
* ``range``: the column's smallest and largest value over the group's rows, ``"16-17"`` (one value
  when they agree), each written with ``format`` (a format spec, default ``"g"``);
* ``change``: the column's value at the row matching ``to`` against the row matching ``from``,
  written with ``format`` over ``change`` (to / from - 1), ``ratio`` (to / from), ``from`` and
  ``to``; default ``"{change:+.1%} ({from} -> {to})"``;
* ``compare``: two columns ``[a, b]`` of one row (every matching row must give the same text),
  written with ``format`` over ``ratio`` (a / b), ``difference`` (a - b), ``a`` and ``b``;
  default ``"{ratio:#.3g}x"``.

Only rows whose ``status`` is ``ok`` are read. ``onchip sweep DEF --out DIR --report`` writes every
table from ``DIR/results.csv`` into its page; :func:`stale_tables` says which page no longer holds
what the CSV gives.
"""

from __future__ import annotations

import csv
import os
import string
from pathlib import Path

#: the keys of a ``[[table]]`` entry and of one of its columns
TABLE_KEYS = ("name", "page", "where", "rows", "columns")
COLUMN_KEYS = ("head", "value", "range", "change", "compare", "where", "from", "to", "format")
KINDS = ("value", "range", "change", "compare")


def markers(name: str) -> tuple[str, str]:
    """The two lines of a page between which the table ``name`` is written."""
    return (f"<!-- table {name}: written from results/results.csv by `onchip sweep ... --report` -->",
            f"<!-- end of table {name} -->")


def check_tables(tables) -> None:
    """Check a definition's ``[[table]]`` entries.

    Raises:
        ValueError: naming the table (its position or name) and the bad key or value.
    """
    if not isinstance(tables, list):
        raise ValueError(f"[[table]] must be an array of tables; got {tables!r}")
    names = []
    for i, table in enumerate(tables):
        where = f"[[table]] {table.get('name', i + 1) if isinstance(table, dict) else i + 1}"
        _check_keys(table, TABLE_KEYS, where)
        for key in ("name", "page", "columns"):
            if key not in table:
                raise ValueError(f"{where}: needs {key}")
        if not isinstance(table["name"], str) or not table["name"] or table["name"] in names:
            raise ValueError(f"{where}: name must be a non-empty string used once; got {table['name']!r}")
        names.append(table["name"])
        if not isinstance(table.get("rows", []), list):
            raise ValueError(f"{where}: rows must be a list of column names; got {table['rows']!r}")
        if not isinstance(table["columns"], list) or not table["columns"]:
            raise ValueError(f"{where}: columns must be a non-empty array of tables; got {table['columns']!r}")
        for j, col in enumerate(table["columns"]):
            at = f"{where} column {j + 1}"
            _check_keys(col, COLUMN_KEYS, at)
            kinds = [k for k in KINDS if k in col]
            if "head" not in col or len(kinds) != 1:
                raise ValueError(f"{at}: needs head and exactly one of {', '.join(KINDS)}; got {sorted(col)}")
            if kinds == ["change"] and not ("from" in col and "to" in col):
                raise ValueError(f"{at}: change needs from and to (the rows compared)")
            if kinds == ["compare"] and not (isinstance(col["compare"], list) and len(col["compare"]) == 2
                                             and all(isinstance(c, str) for c in col["compare"])):
                raise ValueError(f"{at}: compare needs two column names [a, b]; got {col['compare']!r}")


def _check_keys(entry, keys, where: str) -> None:
    """``entry`` is a TOML table whose keys are all in ``keys`` (ValueError naming ``where``)."""
    from ..spec import unknown_fields

    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a table; got {entry!r}")
    unknown = set(entry) - set(keys)
    if unknown:
        raise ValueError(unknown_fields(unknown, keys, f"{where}: unknown key(s)"))


def read_rows(csv_path: str | os.PathLike) -> list[dict]:
    """The ``ok`` rows of a sweep's ``results.csv``, numbers parsed (int, else float), empty cells dropped.

    Raises:
        FileNotFoundError: no such file.
    """
    with open(csv_path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("status") == "ok"]
    return [{k: _parse(v) for k, v in r.items() if v != ""} for r in rows]


def _parse(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _matches(row: dict, where: dict | None) -> bool:
    return all(row.get(k) == v for k, v in (where or {}).items())


def _fill(template: str, row: dict) -> str | None:
    """``template`` filled from ``row``; None when it names a field the row lacks."""
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    if any(f not in row for f in fields):
        return None
    return template.format_map(row)


def _one(cells: set[str], n_rows: int, col: dict, table: str) -> str:
    """The one text the rows of a table row give for a column ("-" for none)."""
    if len(cells) > 1:
        raise ValueError(f"[[table]] {table} column {col['head']!r}: {n_rows} rows in one table row give "
                         f"{sorted(cells)}; narrow it with the column's where or the table's rows")
    return cells.pop() if cells else "-"


def _compared(col: dict, row: dict) -> str | None:
    a, b = col["compare"]
    if a not in row or b not in row:
        return None
    x, y = row[a], row[b]
    return col.get("format", "{ratio:#.3g}x").format_map(
        {"ratio": x / y if y else float("nan"), "difference": x - y, "a": x, "b": y})


def _cell(col: dict, group: list[dict], table: str) -> str:
    rows = [r for r in group if _matches(r, col.get("where"))]
    if "value" in col:
        templates = col["value"] if isinstance(col["value"], list) else [col["value"]]
        cells = {next((f for f in (_fill(t, r) for t in templates) if f is not None), "-") for r in rows}
        return _one(cells, len(rows), col, table)
    if "compare" in col:
        cells = {c for c in (_compared(col, r) for r in rows) if c is not None}
        return _one(cells, len(rows), col, table)
    if "range" in col:
        values = [r[col["range"]] for r in rows if col["range"] in r]
        if not values:
            return "-"
        spec = col.get("format", "g")
        lo, hi = format(min(values), spec), format(max(values), spec)
        return lo if lo == hi else f"{lo}-{hi}"
    name = col["change"]
    ends = []
    for end in ("from", "to"):
        hit = [r[name] for r in rows if _matches(r, col[end]) and name in r]
        if len(hit) != 1:
            return "-"
        ends.append(hit[0])
    a, b = ends
    return col.get("format", "{change:+.1%} ({from} -> {to})").format_map(
        {"change": b / a - 1, "ratio": b / a, "from": a, "to": b})


def render_table(table: dict, rows: list[dict]) -> str:
    """The markdown of one ``[[table]]`` entry over the CSV rows ``rows`` (:func:`read_rows`)."""
    rows = [r for r in rows if _matches(r, table.get("where"))]
    keys = table.get("rows")
    groups: dict = {}
    for i, r in enumerate(rows):
        groups.setdefault(tuple(r.get(k) for k in keys) if keys else i, []).append(r)
    cols = table["columns"]
    lines = ["| " + " | ".join(c["head"] for c in cols) + " |", "|" + "---|" * len(cols)]
    for group in groups.values():
        lines.append("| " + " | ".join(_cell(c, group, table["name"]) for c in cols) + " |")
    return "\n".join(lines)


def render_tables(definition: dict, csv_path: str | os.PathLike) -> dict[str, str]:
    """Every ``[[table]]`` of a loaded definition rendered from ``csv_path``: name -> markdown."""
    rows = read_rows(csv_path)
    return {t["name"]: render_table(t, rows) for t in definition.get("table", [])}


def page_path(definition: dict, table: dict) -> Path:
    """The page a ``[[table]]`` entry is written into (relative to the definition's folder)."""
    return Path(definition.get("_dir", ".")) / table["page"]


def _block(lines: list[str], name: str, page: Path) -> tuple[int, int]:
    first, last = markers(name)
    if first not in lines or last not in lines or lines.index(first) > lines.index(last):
        raise ValueError(f"{page}: no marker lines for table {name!r} ({first!r} ... {last!r})")
    return lines.index(first), lines.index(last)


def page_table(definition: dict, table: dict) -> str:
    """The text between a table's marker lines in its page, as written (blank lines around stripped).

    Raises:
        ValueError: the page lacks the marker lines.
    """
    page = page_path(definition, table)
    lines = page.read_text().split("\n")
    begin, end = _block(lines, table["name"], page)
    return "\n".join(lines[begin + 1:end]).strip("\n")


def write_pages(definition: dict, csv_path: str | os.PathLike) -> list[Path]:
    """Write every ``[[table]]`` rendered from ``csv_path`` between its marker lines in its page.

    Every table is rendered and every page checked before any page is written.

    Returns:
        The pages written.

    Raises:
        ValueError: a page lacks a table's marker lines (nothing is written).
        FileNotFoundError: no ``csv_path`` or no page.
    """
    rendered = render_tables(definition, csv_path)
    texts: dict[Path, list[str]] = {}
    for table in definition.get("table", []):
        page = page_path(definition, table)
        texts.setdefault(page, page.read_text().split("\n"))
        _block(texts[page], table["name"], page)
    for table in definition.get("table", []):
        page = page_path(definition, table)
        lines = texts[page]
        begin, end = _block(lines, table["name"], page)
        texts[page] = [*lines[:begin + 1], "", rendered[table["name"]], "", *lines[end:]]
    for page, lines in texts.items():
        page.write_text("\n".join(lines))
    return list(texts)


def stale_tables(definition: dict, csv_path: str | os.PathLike) -> list[str]:
    """The tables whose page does not hold what ``csv_path`` gives: ``"<page>: table <name>"`` each."""
    rendered = render_tables(definition, csv_path)
    return [f"{page_path(definition, t)}: table {t['name']}" for t in definition.get("table", [])
            if page_table(definition, t) != rendered[t["name"]]]
