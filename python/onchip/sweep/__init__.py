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

    [[table]] name = "main", page = "README.md", columns = [{ head = "LUT", value = "{lut}" }]

Grid axes are :class:`~onchip.spec.LearnerSpec` fields plus ``preset``,
``hidden`` (MLP: widths = [n_in, hidden, n_out]), ``format_width`` and
``format_int_bits`` (all formats :meth:`Formats.uniform`), and the settings a
computation takes per point (``task`` and ``data`` of ``accuracy``). A KAN
point whose ``basis_table_bits`` is not set takes the largest the input
formats allow (at most 6).

``latency`` gives the hardware step (``latency_cycles_update`` / clock, at ``clock_mhz``
and at the nextpnr fmax when ``pnr`` is computed) per point, and the float twin's
per-sample step time in PyTorch, measured on this CPU in every run (never cached),
with their ratio.

A grid key that is neither a spec field nor one of these is refused as an
``unknown spec field(s)``, as for a spec file; so is a table, a ``[sweep]`` or ``[[plot]]``
key or a computation's setting the reader does not know, with the closest known name
(a misspelt one would be skipped: a default used in its place, a plot never drawn); so are an empty
axis, a ``[[plot]]`` column no point computes and a ``channels > 1`` point with ``accuracy`` (a task
stream feeds one learner), all before any work. A backend of ``accuracy`` that fails fails its
point. Environment variables in ``data``
(``$NAME``, ``${NAME}``) are filled in; an unset one is refused by name.

Every point is keyed by a SHA-256 of its spec, its computation settings and
:func:`onchip.flow.tools.tool_versions`; a finished point (its result or its
error) is stored in :mod:`onchip.cache` and never recomputed (a failed one with
``retry_failed``), so an interrupted sweep resumes where it stopped. Points run
in local processes (``jobs``) or on a Dask distributed scheduler (``scheduler``).
A point whose worker is lost (killed; Dask's ``KilledWorker``) is recorded as
failed for this run but not stored, so the next run computes it again; the other
points finish.

Modules: ``schema`` (reading and checking a definition), ``grid`` (points and
their keys), ``computations`` (the :class:`Computation` registry and one point's
evaluation), ``timing`` (software step time), ``store`` (finished points in the
cache), ``executors`` (local and Dask), ``report`` (table and plots), ``pages`` (the
``[[table]]`` entries: markdown tables from ``results.csv`` written into results pages), ``runner``
(:func:`run_sweep`).
"""

from __future__ import annotations

from .computations import (
    COMPUTATIONS,
    Computation,
    PointState,
    evaluate_point,
    get_computation,
    register_computation,
)
from .executors import DaskExecutor, Executor, LocalExecutor, make_executor
from .grid import expand, max_basis_table_bits, point_spec
from .pages import render_tables, stale_tables, write_pages
from .report import plot_table, table_rows, write_table
from .runner import run_sweep
from .schema import load_definition, validate_definition
from .store import record_path
from .timing import add_software_latency, software_step_seconds

#: Names of the built-in computations, in the order a point computes them.
COMPUTE = tuple(COMPUTATIONS)

__all__ = [
    "COMPUTE", "COMPUTATIONS", "Computation", "PointState", "register_computation", "get_computation",
    "load_definition", "validate_definition", "expand", "point_spec", "max_basis_table_bits",
    "evaluate_point", "software_step_seconds", "add_software_latency", "run_sweep",
    "Executor", "LocalExecutor", "DaskExecutor", "make_executor", "record_path",
    "table_rows", "write_table", "plot_table", "render_tables", "write_pages", "stale_tables",
]
