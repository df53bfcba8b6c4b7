"""Sweeps: a grid of learner specs -> per-point resources, place-and-route, latency, accuracy -> table + plots.

A sweep definition is TOML::

    [sweep]
    name = "resources"
    compute = ["resources", "latency"]      # any of COMPUTE

    [base]                                  # spec fields every point starts from
    preset = "kan-regression"               # optional: start from a preset

    [[grid]]                                # sub-grids; their points are concatenated
    kind = "kan"                            # a scalar is one value,
    grid_size = [4, 8, 16, 32, 64]          # a list is an axis (cartesian product)

    [resources]  family = "xcup"
    [pnr]        board = "ulx3s-85f"
    [latency]    clock_mhz = 200.0, software_samples = 2000
    [accuracy]   task = "drift-regression", samples = 20000, seed = 0, backends = ["golden", "float"]

    [[plot]]  x = "param_count", y = ["lut", "ff"], series = ["kind"], file = "resources.png"

Grid axes are :class:`~onchip.spec.LearnerSpec` fields plus ``preset``,
``hidden`` (MLP: widths = [n_in, hidden, n_out]), ``format_width`` and
``format_int_bits`` (all formats :meth:`Formats.uniform`), ``task`` and ``data``
(accuracy stream). A KAN point whose ``basis_table_bits`` is not set takes
the largest the input formats allow (at most 6).

``latency`` gives the hardware step (``latency_cycles_update`` / clock, at ``clock_mhz``
and at the nextpnr fmax when ``pnr`` is computed) per point, and the float twin's
per-sample step time in PyTorch, measured on this CPU in every run (never cached),
with their ratio.

Every point is keyed by a SHA-256 of its spec, its computation settings and
:func:`onchip.flow.tools.tool_versions`; a finished point (its result or its
error) is stored under the cache folder and never recomputed, so an
interrupted sweep resumes where it stopped. Points run in local processes
(``jobs``) or on a Dask distributed scheduler (``scheduler``).
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import os
import time
import tomllib
import traceback
from pathlib import Path

import numpy as np

COMPUTE = ("resources", "pnr", "latency", "accuracy")
_SPECIAL_AXES = ("preset", "hidden", "format_width", "format_int_bits", "task", "data")


# -- definition ----------------------------------------------------------------------------------
def load_definition(path: str | os.PathLike) -> dict:
    """Read and validate a sweep TOML file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: bad TOML, unknown ``compute`` entries, no grid, or a grid point that is not a valid spec.
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
    """Check a parsed definition (see the module docstring); builds every point's spec.

    Raises:
        ValueError: naming the bad key and value.
    """
    sweep = d.get("sweep", {})
    compute = sweep.get("compute")
    if not isinstance(compute, list) or not compute or any(c not in COMPUTE for c in compute):
        raise ValueError(f"sweep.compute must be a non-empty list of {', '.join(COMPUTE)}; got {compute!r}")
    grids = d.get("grid")
    if not isinstance(grids, list) or not grids:
        raise ValueError("sweep definition needs at least one [[grid]] table")
    if "accuracy" in compute:
        backends = d.get("accuracy", {}).get("backends", ["golden", "float"])
        from .run import BACKENDS

        bad = [b for b in backends if b not in BACKENDS]
        if bad:
            raise ValueError(f"accuracy.backends: unknown backend(s) {bad}; choose from {', '.join(BACKENDS)}")
    if "pnr" in compute:
        from .flow.boards import get_board

        get_board(d.get("pnr", {}).get("board", "ulx3s-85f"), vendor="lattice")
    if "resources" in compute:
        from .flow.yosys import _check_family

        _check_family(d.get("resources", {}).get("family", "xcup"))
    expand(d)


def _axes(grid: dict) -> list[dict]:
    keys = list(grid)
    values = [v if isinstance(v, list) and not _is_widths_value(k, v) else [v] for k, v in
              ((k, grid[k]) for k in keys)]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _is_widths_value(key, value) -> bool:
    # widths = [2, 4, 1] is one value; widths = [[2, 4, 1], [2, 8, 1]] is an axis
    return key in ("widths", "grid_range") and value and not isinstance(value[0], list)


def max_basis_table_bits(spec_fields: dict) -> int:
    """Largest basis_table_bits (<= 6) the layer-input formats of a KAN spec allow: frac bits + log2(cell width)."""
    from .spec import Formats, LearnerSpec

    trial = LearnerSpec(**{**spec_fields, "kind": "mlp"})  # validates formats and widths only
    fmts: Formats = trial.formats
    lo, hi = spec_fields.get("grid_range", (-2.0, 2.0))
    g = spec_fields.get("grid_size", 8)
    e = math.log2((hi - lo) / g)
    inputs = [fmts.input] + [fmts.act] * (len(trial.widths) - 2)
    return max(1, min(6, min(f.frac_bits for f in inputs) + int(round(e))))


def point_spec(params: dict, base: dict):
    """The :class:`LearnerSpec` of one grid point (``base`` updated with ``params``).

    Raises:
        ValueError: an unknown field or an invalid spec, naming the point.
    """
    from .spec import PRESETS, Formats, LearnerSpec

    fields = dict(base)
    fields.update({k: v for k, v in params.items() if k not in ("task", "data")})
    preset = fields.pop("preset", None)
    start = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"grid point {params}: preset must be one of {', '.join(PRESETS)}; got {preset!r}")
        start = PRESETS[preset].to_dict()
        start["formats"] = PRESETS[preset].formats
    spec_fields = {**start, **fields}
    if "hidden" in spec_fields:
        w = list(spec_fields["widths"])
        spec_fields["widths"] = [w[0], int(spec_fields.pop("hidden")), w[-1]]
    width = spec_fields.pop("format_width", None)
    int_bits = spec_fields.pop("format_int_bits", 4)
    if width is not None:
        spec_fields["formats"] = Formats.uniform(int(width), int(int_bits))
    if spec_fields.get("kind") != "kan":
        for k in ("grid_size", "spline_order", "grid_range", "basis_table_bits"):
            spec_fields.pop(k, None)
    elif "basis_table_bits" not in params and "basis_table_bits" not in base:
        try:
            spec_fields["basis_table_bits"] = max_basis_table_bits(spec_fields)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"grid point {params}: {exc}") from None
    try:
        if isinstance(spec_fields.get("formats"), dict):
            spec_fields["formats"] = Formats(**spec_fields["formats"])
        return LearnerSpec(**spec_fields)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"grid point {params}: {exc}") from None


def expand(d: dict) -> list[dict]:
    """All points of a definition: ``[{"params", "spec", "settings", "key"}]`` in grid order.

    Raises:
        ValueError: an invalid point.
    """
    from .flow.tools import tool_versions

    base = dict(d.get("base", {}))
    versions = tool_versions()
    compute = list(d["sweep"]["compute"])
    points = []
    for grid in d["grid"]:
        for params in _axes(grid):
            spec = point_spec(params, base)
            settings = {c: dict(d.get(c, {})) for c in compute}
            if "accuracy" in compute:
                acc = settings["accuracy"]
                acc.setdefault("samples", 20_000)
                acc.setdefault("seed", 0)
                acc.setdefault("backends", ["golden", "float"])
                acc["task"] = params.get("task", acc.get("task", "drift-regression"))
                data = params.get("data", acc.get("data"))
                acc["data"] = _resolve_data(data, d.get("_dir", ".")) if data else None
            if "resources" in compute:
                settings["resources"].setdefault("family", "xcup")
            if "pnr" in compute:
                settings["pnr"].setdefault("board", "ulx3s-85f")
                settings["pnr"].setdefault("seed", 1)
            if "latency" in compute:
                settings["latency"].setdefault("clock_mhz", 200.0)
                settings["latency"].setdefault("software_samples", 2000)
            key_src = json.dumps({"spec": spec.to_dict(), "settings": settings, "tools": versions},
                                 sort_keys=True, default=str)
            key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
            points.append({"params": params, "spec": spec.to_dict(), "settings": settings, "key": key})
    return points


def _resolve_data(data: str, folder: str) -> str:
    text = os.path.expandvars(str(data))
    path = Path(text)
    if not path.is_absolute() and not path.exists():
        path = Path(folder) / path
    return str(path)


# -- one point -----------------------------------------------------------------------------------
def software_step_seconds(spec, x, y, samples: int) -> float:
    """Median per-sample wall time (s) of the float twin's online step (predict + SGD update) in PyTorch.

    Runs ``samples`` steps in 10 timed blocks after 50 untimed warm-up steps on one CPU
    thread (per-sample steps are too small to gain from more) and returns the median
    block time / block size.

    Raises:
        ValueError: fewer than 50 + samples rows in ``x``.
    """
    import torch

    from .model.float_twin import FloatTwin

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _step_seconds(FloatTwin, spec, x, y, samples)
    finally:
        torch.set_num_threads(threads)


def _step_seconds(FloatTwin, spec, x, y, samples: int) -> float:
    block = max(1, samples // 10)
    if len(x) < 50 + 10 * block:
        raise ValueError(f"software step timing needs {50 + 10 * block} samples, got {len(x)}")
    twin = FloatTwin(spec)
    twin.run(x[:50], y[:50])
    times = []
    for b in range(10):
        lo = 50 + b * block
        start = time.perf_counter()
        twin.run(x[lo: lo + block], y[lo: lo + block])
        times.append((time.perf_counter() - start) / block)
    return float(np.median(times))


def _accuracy(spec, acc: dict) -> dict:
    from . import tasks
    from .run import run_backend

    stream = tasks.make_stream(acc["task"], samples=int(acc["samples"]), seed=int(acc["seed"]),
                               data=acc.get("data"))
    out = {"task": acc["task"]}
    for backend in acc["backends"]:
        try:
            run = run_backend(backend, spec, stream.x, stream.y, progress=False)
            metrics = tasks.evaluate(stream, run.predictions)
        except (ValueError, FloatingPointError, RuntimeError) as exc:
            out[f"{backend}_error"] = str(exc).splitlines()[0][:200]
            metrics = {}
        if acc["task"] == "drift-regression":
            out[f"{backend}_mse"] = metrics.get("mse", float("nan"))
            last = metrics.get("mse_last_window")
            out[f"{backend}_mse_last"] = float(np.mean(last)) if last else float("nan")
        else:
            out[f"{backend}_fidelity"] = metrics.get("assignment_fidelity", float("nan"))
            out[f"{backend}_fidelity_last"] = metrics.get("assignment_fidelity_last_5000", float("nan"))
    return out


def evaluate_point(point: dict, workdir: str | None = None) -> dict:
    """Compute one point; never raises: a failure is returned as ``{"status": "error", "error": ...}``.

    Returns:
        ``{"key", "params", "status", "error", "seconds", "results"}`` where ``results`` holds
        ``param_count`` and the figures of every computation in ``point["settings"]``.
    """
    from .spec import LearnerSpec

    start = time.perf_counter()
    results: dict = {}
    try:
        spec = LearnerSpec.from_dict(point["spec"])
        settings = point["settings"]
        results["param_count"] = spec.parameter_count()
        results["param_bits"] = spec.parameter_count() * spec.formats.coef.width
        design = None
        if any(c in settings for c in ("resources", "pnr", "latency")):
            from .hw import generate

            design = generate(spec, axis=False)
            for k in ("latency_cycles_prediction", "latency_cycles_update", "initiation_interval"):
                results[k] = design.info[k]
        if "resources" in settings:
            from .flow.yosys import synthesize

            res = synthesize(design.verilog, design.top, settings["resources"]["family"])
            results.update({k: res[k] for k in ("lut", "ff", "dsp", "bram", "lutram", "carry")})
            # separate parameter storage from the logic: RAM is counted as lutram/bram already,
            # parameters kept in registers are param_bits flip-flops
            in_regs = design.info["param_storage"] == "registers"
            results["ff_excl_params"] = res["ff"] - (results["param_bits"] if in_regs else 0)
            results["logic_excl_params"] = res["lut"] + results["ff_excl_params"]
        if "pnr" in settings:
            import tempfile

            from .flow.nextpnr import place_and_route

            with tempfile.TemporaryDirectory(prefix="onchip-pnr-", dir=workdir) as tmp:
                pnr = place_and_route(design, settings["pnr"]["board"], tmp, seed=int(settings["pnr"]["seed"]))
            util = pnr["utilisation"]
            logic = util.get("TRELLIS_COMB") or util.get("ICESTORM_LC") or {}
            results.update({"fmax_mhz": pnr["fmax_mhz"], "pnr_logic_cells": logic.get("used"),
                            "pnr_ff": util.get("TRELLIS_FF", {}).get("used"), "timing_met": pnr["timing_met"]})
        if "latency" in settings:
            clock = float(settings["latency"]["clock_mhz"])
            results["clock_mhz"] = clock
            results["hw_step_ns_at_clock"] = design.info["latency_cycles_update"] * 1e3 / clock
            results["hw_ii_ns_at_clock"] = design.info["initiation_interval"] * 1e3 / clock
            if "fmax_mhz" in results:
                results["hw_step_ns_fmax"] = design.info["latency_cycles_update"] * 1e3 / results["fmax_mhz"]
        if "accuracy" in settings:
            results.update(_accuracy(spec, settings["accuracy"]))
        status, error = "ok", ""
    except Exception as exc:  # a failed point is recorded, the sweep goes on
        status = "error"
        error = f"{type(exc).__name__}: {exc}"
        results["traceback"] = traceback.format_exc(limit=4)[-2000:]
    return {"key": point["key"], "params": point["params"], "status": status, "error": error,
            "seconds": time.perf_counter() - start, "results": results}


# -- the sweep -----------------------------------------------------------------------------------
def _cache_dir(cache: str | os.PathLike | None) -> Path:
    from .flow.tools import tool_cache_dir

    path = Path(cache) if cache is not None else tool_cache_dir() / "sweeps"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _submit_local(todo: list[dict], jobs: int):
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(evaluate_point, p) for p in todo]
        for fut in as_completed(futures):
            yield fut.result()


def _submit_dask(todo: list[dict], address: str):
    from distributed import Client, as_completed

    with Client(address) as client:
        futures = client.map(evaluate_point, todo, pure=False)
        for fut in as_completed(futures):
            yield fut.result()


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
        retry_failed: recompute points whose cached record is an error.
        progress: show a tqdm bar.
        limit: compute at most this many new points (the rest stay pending for a later run).

    Returns:
        The point records in grid order (pending ones have status ``"pending"``).

    Raises:
        ValueError / FileNotFoundError: a bad definition or argument, before anything is written.
    """
    from tqdm import tqdm

    from .io import atomic_output_dir, write_json

    if isinstance(definition, dict):
        d = definition
        validate_definition(d)
    else:
        d = load_definition(definition)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
    points = expand(d)
    store = _cache_dir(cache)
    records: dict[str, dict] = {}
    todo = []
    for p in points:
        f = store / f"{p['key']}.json"
        if f.exists():
            rec = json.loads(f.read_text())
            if rec["status"] == "ok" or not retry_failed:
                records[p["key"]] = rec
                continue
        if p["key"] not in [t["key"] for t in todo]:
            todo.append(p)
    if limit is not None:
        todo = todo[:limit]
    results = _submit_dask(todo, scheduler) if scheduler else _submit_local(todo, jobs)
    with tqdm(total=len(todo), desc=d["sweep"].get("name", "sweep"), unit="point", disable=not progress) as bar:
        for rec in results:
            write_json(store / f"{rec['key']}.json", rec)  # finished work survives an interruption
            records[rec["key"]] = rec
            bar.set_postfix_str(f"{rec['status']} {rec['seconds']:.0f}s")
            bar.update(1)
    ordered = [records.get(p["key"], {"key": p["key"], "params": p["params"], "status": "pending",
                                       "error": "", "seconds": 0.0, "results": {}}) for p in points]
    if "latency" in d["sweep"]["compute"]:
        ordered = add_software_latency(ordered, points, progress)
    with atomic_output_dir(out) as stage:
        write_table(stage / "results.csv", ordered)
        write_json(stage / "points.json", ordered)
        for plot in d.get("plot", []):
            plot_table(stage / plot.get("file", "plot.png"), ordered, plot)
    return ordered


def add_software_latency(records: list[dict], points: list[dict], progress: bool = False) -> list[dict]:
    """Measure the float twin's per-sample step on this CPU for every finished point, now.

    Software timing is never cached: it belongs to the run's machine, and it is measured
    here in the driver, one point after another, so measurements do not compete with
    each other for cores. Adds ``sw_step_ns`` and the ratios ``sw_over_hw_at_clock``
    (and ``sw_over_hw_fmax`` where place and route gave an fmax) to copies of the records.
    """
    from tqdm import tqdm

    from . import tasks
    from .spec import LearnerSpec

    out = []
    by_key = {p["key"]: p for p in points}
    for rec in tqdm(records, desc="software step", unit="point", disable=not progress, leave=False):
        rec = json.loads(json.dumps(rec))
        res = rec["results"]
        if rec["status"] == "ok" and "hw_step_ns_at_clock" in res:
            point = by_key[rec["key"]]
            spec = LearnerSpec.from_dict(point["spec"])
            samples = int(point["settings"]["latency"]["software_samples"])
            task = "drift-regression" if spec.n_in == 1 else "qubit-readout"
            stream = tasks.make_stream(task, samples=samples + 60, seed=0)
            res["sw_step_ns"] = software_step_seconds(spec, stream.x, stream.y, samples) * 1e9
            res["sw_over_hw_at_clock"] = res["sw_step_ns"] / res["hw_step_ns_at_clock"]
            if "hw_step_ns_fmax" in res:
                res["sw_over_hw_fmax"] = res["sw_step_ns"] / res["hw_step_ns_fmax"]
        out.append(rec)
    return out


def table_rows(records: list[dict]) -> list[dict]:
    """Flatten point records to table rows: key, status, error, seconds, params..., results..."""
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

    Optional keys: ``logx``, ``logy`` (bool), ``title``, ``where`` (column -> value filter).
    """
    from .plotting import pyplot

    plt = pyplot()
    rows = [r for r in table_rows(records) if r["status"] == "ok"]
    for col, value in plot.get("where", {}).items():
        rows = [r for r in rows if r.get(col) == value]
    ys = plot["y"] if isinstance(plot["y"], list) else [plot["y"]]
    series = plot.get("series", [])
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
