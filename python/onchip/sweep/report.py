"""The sweep's outputs: a CSV table of the point records and line plots of its columns."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path


def table_rows(records: list[dict]) -> list[dict]:
    """Flatten point records to table rows: key, status, error, seconds, params..., results...

    List-valued params are written as JSON; a record's traceback is left out.
    """
    rows = []
    for rec in records:
        row = {"key": rec["key"], "status": rec["status"], "error": rec["error"],
               "seconds": round(rec["seconds"], 2)}
        for k, v in rec["params"].items():
            row[k] = json.dumps(v) if isinstance(v, list) else v
        row.update({k: v for k, v in rec["results"].items() if k != "traceback"})
        rows.append(row)
    return rows


def write_table(path: Path, records: list[dict]) -> None:
    """Write the CSV table of :func:`table_rows` (columns: the union, in first-seen order)."""
    rows = table_rows(records)
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in columns})


def plot_table(path: Path, records: list[dict], plot: dict) -> None:
    """One PNG: a panel per ``plot["y"]`` column against ``plot["x"]``, a line per ``plot["series"]`` group.

    Only points with status ``ok`` are drawn. Optional keys: ``logx``, ``logy`` (bool),
    ``title``, ``where`` (column -> value filter).

    Raises:
        ValueError: a column the plot names (``x``, ``y``, ``series``, ``where``) is in no row while
            some point is ``ok`` (a misspelt column would draw an empty plot), naming it and the
            table's columns.
    """
    from ..plotting import pyplot

    rows = [r for r in table_rows(records) if r["status"] == "ok"]
    ys = plot["y"] if isinstance(plot["y"], list) else [plot["y"]]
    series = plot.get("series", [])
    named = [plot["x"], *ys, *series, *plot.get("where", {})]
    have = {column for r in rows for column in r}
    missing = [column for column in named if column not in have]
    if rows and missing:
        raise ValueError(f"[[plot]] {plot.get('file', 'plot.png')}: no column {', '.join(map(repr, missing))} in the "
                         f"table; its columns: {', '.join(sorted(have))} (the points computed are cached)")
    plt = pyplot()
    for col, value in plot.get("where", {}).items():
        rows = [r for r in rows if r.get(col) == value]
    ncols = min(3, len(ys))
    nrows = math.ceil(len(ys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[len(ys):]:
        ax.set_visible(False)
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r.get(s) for s in series), []).append(r)
    for ax, ycol in zip(axes.flat, ys):
        for label, members in sorted(groups.items(), key=lambda kv: str(kv[0])):
            pts = sorted((float(r[plot["x"]]), _num(r.get(ycol))) for r in members if plot["x"] in r)
            if not pts:
                continue
            xs, vs = zip(*pts)
            ax.plot(xs, vs, "o-", label=" ".join(str(v) for v in label) or ycol)
        ax.set_xlabel(plot["x"])
        ax.set_ylabel(ycol)
        if plot.get("logx"):
            ax.set_xscale("log", base=2)
        if plot.get("logy"):
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if plot.get("title"):
        fig.suptitle(plot["title"])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")
