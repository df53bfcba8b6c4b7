"""Running a sweep: finished points from the cache, the rest on an executor, then the report."""

from __future__ import annotations

import functools
import os

from ..numbers import is_integer
from .computations import COMPUTATIONS, evaluate_point
from .executors import make_executor
from .grid import expand
from .report import plot_table, write_table
from .schema import load_definition, validate_definition
from .store import load_record, save_record


def lost_point_record(point: dict, exc: BaseException) -> dict:
    """The record of a point whose worker was lost (killed, out of memory, ``KilledWorker``), or
    that its executor could not run (e.g. its function could not be sent to the worker).

    It has status ``"error"`` and ``"lost": True``, and is not stored in the cache: the next
    run of the sweep computes the point again (no ``retry_failed`` needed).
    """
    reason = str(exc).splitlines()[0] if str(exc) else ""
    what = "worker lost" if type(exc).__name__ in ("KilledWorker", "BrokenProcessPool") else "could not run"
    return {"key": point["key"], "params": point["params"], "status": "error",
            "error": f"{what}: {type(exc).__name__}: {reason}".rstrip(": "), "seconds": 0.0,
            "results": {}, "lost": True}


def run_sweep(definition: str | os.PathLike | dict, out: str | os.PathLike, *, jobs: int = 1,
              scheduler: str | None = None, cache: str | os.PathLike | None = None,
              retry_failed: bool = False, progress: bool = True, limit: int | None = None) -> list[dict]:
    """Run a sweep, resuming from the cache, and write ``out/results.csv``, plots and ``points.json``.

    Args:
        definition: a TOML file or a parsed definition.
        out: output folder (replaced whole on success).
        jobs: local worker processes (ignored with ``scheduler``).
        scheduler: address of a running Dask distributed scheduler, e.g. ``tcp://host:8786``.
        cache: folder of finished points (default ``<onchip cache>/sweeps``).
        retry_failed: recompute points whose cached record is an error (a point whose worker
            was lost is never cached, so it is computed again by any later run).
        progress: show a tqdm bar.
        limit: compute at most this many new points (the rest stay pending for a later run).

    Returns:
        The point records in grid order (pending ones have status ``"pending"``).

    Raises:
        ValueError / FileNotFoundError: a bad definition or argument, before anything is written.
    """
    from ..progress import progress_bar

    from ..io import atomic_output_dir, write_json

    if isinstance(definition, dict):
        d = definition
        validate_definition(d)
    else:
        d = load_definition(definition)
    executor = make_executor(jobs, scheduler)
    if limit is not None and not (is_integer(limit) and limit >= 0):
        raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
    points = expand(d)
    records: dict[str, dict] = {}
    todo: dict[str, dict] = {}  # by key: equal points are computed once
    for p in points:
        rec = load_record(cache, p["key"])
        if rec is not None and (rec["status"] == "ok" or not retry_failed):
            records[p["key"]] = rec
        else:
            todo.setdefault(p["key"], p)
    pending = list(todo.values())[:limit]
    chosen = tuple(c for name, c in COMPUTATIONS.items() if name in d["sweep"]["compute"])
    evaluate = functools.partial(evaluate_point, computations=chosen)
    with progress_bar(total=len(pending), desc=d["sweep"].get("name", "sweep"), unit="point", disable=not progress) as bar:
        for rec in executor.map(evaluate, pending, on_error=lost_point_record):
            if not rec.get("lost"):
                save_record(cache, rec)  # finished work survives an interruption
            records[rec["key"]] = rec
            bar.set_postfix_str(f"{rec['status']} {rec['seconds']:.0f}s")
            bar.update(1)
    ordered = [records.get(p["key"], {"key": p["key"], "params": p["params"], "status": "pending",
                                       "error": "", "seconds": 0.0, "results": {}}) for p in points]
    for name, computation in COMPUTATIONS.items():
        if name in d["sweep"]["compute"] and computation.finish is not None:
            ordered = computation.finish(ordered, points, progress)
    with atomic_output_dir(out) as stage:
        write_table(stage / "results.csv", ordered)
        write_json(stage / "points.json", ordered)
        for plot in d.get("plot", []):
            plot_table(stage / plot.get("file", "plot.png"), ordered, plot)
    return ordered
