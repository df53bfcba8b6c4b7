"""The computations a sweep point can run, registered by name, and one point's evaluation.

A :class:`Computation` owns its ``[name]`` table of the definition: its defaults
(written only here), a check of its settings and the function that turns a spec
into figures. A point runs its computations in registration order, so a later one
may read an earlier one's figures (``latency`` reads ``pnr``'s fmax).
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..numbers import is_finite_number, is_integer
from ..spec import toml_text
from .timing import add_software_latency


@dataclass
class PointState:
    """What the computations of one point share.

    Attributes:
        spec: the point's :class:`~onchip.spec.LearnerSpec`.
        results: figures so far (``param_count``, ``param_bits``, earlier computations').
        design: the generated :class:`~onchip.hw.Design` (``axis=False``) when a
            computation with ``needs_design`` is run, else None.
        workdir: parent folder of temporary build folders (None: the system's).
    """

    spec: Any
    results: dict
    design: Any = None
    workdir: str | None = None


@dataclass(frozen=True)
class Computation:
    """One kind of figure a sweep point can compute.

    Attributes:
        name: the ``sweep.compute`` entry and the definition table of its settings.
        defaults: settings used where the definition leaves them out.
        check: ``check(config)`` raises ValueError whose message starts with the bad
            setting's name and gives its value (the caller prefixes ``name.``).
        evaluate: ``evaluate(state, config) -> dict`` of figures (a :class:`PointState`).
        needs_design: the point's RTL design is generated before it runs.
        axes: settings a grid may vary per point (grid keys that are not spec fields).
        prepare: ``prepare(config, folder) -> config`` completes one point's settings
            (``folder``: the definition's folder, for relative paths).
        finish: ``finish(records, points, progress) -> records`` runs in the driver on
            every record after the points finished; its figures are never cached.
        check_spec: ``check_spec(spec, config)`` raises ValueError for a point's spec the
            computation cannot run (checked when the grid is expanded, before any work).
        columns: ``columns(config) -> tuple`` of the table columns its figures (and ``finish``'s)
            fill for one point's settings; None: undeclared, so a ``[[plot]]`` column is checked
            only after the points are computed.
    """

    name: str
    defaults: Mapping[str, Any]
    check: Callable[[dict], None]
    evaluate: Callable[[PointState, dict], dict]
    needs_design: bool = False
    axes: tuple[str, ...] = ()
    prepare: Callable[[dict, str], dict] | None = None
    finish: Callable[[list, list, bool], list] | None = None
    check_spec: Callable[[Any, dict], None] | None = None
    columns: Callable[[dict], tuple[str, ...]] | None = None

    def settings(self, section: Mapping, params: Mapping, folder: str = ".") -> dict:
        """One point's settings: defaults, then the definition's table, then the point's axes.

        Args:
            section: the definition's ``[name]`` table (may be empty).
            params: the grid point.
            folder: the definition's folder.

        Raises:
            ValueError: a bad setting, as ``"<name>.<setting> ..."``.
        """
        config = {**copy.deepcopy(dict(self.defaults)), **copy.deepcopy(dict(section))}
        config.update({k: params[k] for k in self.axes if k in params})
        if self.prepare is not None:
            config = self.prepare(config, folder)
        try:
            self.check(config)
        except ValueError as exc:
            raise ValueError(f"{self.name}.{exc}") from None
        return config


class PartialFailure(Exception):
    """A computation that failed in part (e.g. one backend of ``accuracy``): the point is failed,
    and the figures it did compute are kept in its record.

    Args:
        message: what failed (the point's error).
        figures: the computation's figures, those that failed as NaN.
    """

    def __init__(self, message: str, figures: dict):
        super().__init__(message)
        self.figures = figures


#: Columns of every point: its record's fields and the spec's size.
POINT_COLUMNS = ("key", "status", "error", "seconds", "param_count", "param_bits")
#: Columns of a point whose computations need the generated design (from its report).
DESIGN_COLUMNS = ("latency_cycles_prediction", "latency_cycles_update", "initiation_interval")

#: The registered computations by name, in the order a point runs them.
COMPUTATIONS: dict[str, Computation] = {}


def register_computation(computation: Computation) -> Computation:
    """Add a computation to :data:`COMPUTATIONS` (it runs after those registered before it).

    Raises:
        ValueError: the name is taken.
    """
    if computation.name in COMPUTATIONS:
        raise ValueError(f"computation {computation.name!r} is already registered")
    COMPUTATIONS[computation.name] = computation
    return computation


def get_computation(name: str) -> Computation:
    """The registered computation ``name``.

    Raises:
        ValueError: no such computation, naming the registered ones.
    """
    if name not in COMPUTATIONS:
        raise ValueError(f"computation must be one of {', '.join(COMPUTATIONS)}; got {name!r}")
    return COMPUTATIONS[name]


def axis_names() -> set[str]:
    """Grid keys that set a computation's settings rather than a spec field."""
    return {axis for c in COMPUTATIONS.values() for axis in c.axes}


def _need(ok: bool, name: str, value, what: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {what}, got {toml_text(value)}")  # as the definition spells it


# -- resources: Yosys -------------------------------------------------------------------------
def _check_resources(config: dict) -> None:
    from ..flow.yosys import _check_family

    _check_family(config["family"])


def _resources(state: PointState, config: dict) -> dict:
    from ..flow.yosys import synthesize

    res = synthesize(state.design.verilog, state.design.top, config["family"])
    out = {k: res[k] for k in ("lut", "ff", "dsp", "bram", "bram_unit", "lutram", "carry")}
    # separate parameter storage from the logic: RAM is counted as lutram/bram already,
    # parameters kept in registers are param_bits flip-flops
    in_regs = state.design.info["param_storage"] == "registers"
    out["ff_excl_params"] = res["ff"] - (state.results["param_bits"] if in_regs else 0)
    out["logic_excl_params"] = res["lut"] + out["ff_excl_params"]
    return out


# -- pnr: nextpnr -----------------------------------------------------------------------------
def _check_pnr(config: dict) -> None:
    from ..flow.boards import get_board

    get_board(config["board"], vendor="lattice")
    _need(is_integer(config["seed"]) and config["seed"] >= 0, "seed", config["seed"], "a non-negative integer")


def _pnr(state: PointState, config: dict) -> dict:
    from ..flow.nextpnr import place_and_route

    with tempfile.TemporaryDirectory(prefix="onchip-pnr-", dir=state.workdir) as tmp:
        pnr = place_and_route(state.design, config["board"], tmp, seed=int(config["seed"]))
    util = pnr["utilisation"]
    logic = util.get("TRELLIS_COMB") or util.get("ICESTORM_LC") or {}
    return {"fmax_mhz": pnr["fmax_mhz"], "pnr_logic_cells": logic.get("used"),
            "pnr_ff": util.get("TRELLIS_FF", {}).get("used"), "timing_met": pnr["timing_met"]}


# -- latency: hardware step at a clock; the software step is measured in the driver ------------
def _check_latency(config: dict) -> None:
    clock = config["clock_mhz"]
    _need(is_finite_number(clock) and clock > 0, "clock_mhz", clock, "a finite positive number (MHz)")
    samples = config["software_samples"]
    _need(is_integer(samples) and samples >= 1, "software_samples", samples, "a positive integer")


def _latency(state: PointState, config: dict) -> dict:
    info = state.design.info
    clock = float(config["clock_mhz"])
    out = {"clock_mhz": clock,
           "hw_step_ns_at_clock": info["latency_cycles_update"] * 1e3 / clock,
           "hw_ii_ns_at_clock": info["initiation_interval"] * 1e3 / clock}
    if "fmax_mhz" in state.results:
        out["hw_step_ns_fmax"] = info["latency_cycles_update"] * 1e3 / state.results["fmax_mhz"]
    return out


# -- accuracy: backends over a task stream --------------------------------------------------------
#: Columns ``<backend>_<column>`` the accuracy computation writes, per task: column -> the
#: :func:`onchip.tasks.evaluate` metric it holds (a per-window list is averaged).
TASK_METRICS = {
    "drift-regression": {"mse": "mse", "mse_last": "mse_last_window"},
    "qubit-readout": {"fidelity": "assignment_fidelity", "fidelity_last": "assignment_fidelity_last_5000"},
}


def _check_accuracy(config: dict) -> None:
    from ..backends import JOB_BACKENDS

    backends = config["backends"]
    _need(isinstance(backends, list) and bool(backends), "backends", backends, "a non-empty list")
    bad = [b for b in backends if b not in JOB_BACKENDS]
    if bad:
        raise ValueError(f"backends: unknown backend(s) {bad}; choose from {', '.join(JOB_BACKENDS)}")
    _need(isinstance(config["task"], str) and config["task"] in TASK_METRICS, "task", config["task"],
          f"one of {', '.join(TASK_METRICS)}")
    _need(is_integer(config["samples"]) and config["samples"] >= 1, "samples", config["samples"],
          "a positive integer")
    _need(is_integer(config["seed"]) and config["seed"] >= 0, "seed", config["seed"], "a non-negative integer")


def _check_accuracy_spec(spec, config: dict) -> None:
    # a task stream is one learner's: a channels = N learner would need N streams (onchip run --qubits N)
    if spec.channels > 1:
        raise ValueError(f"channels = {spec.channels}: accuracy runs one task stream through one learner; "
                         "sweep channels with resources, pnr or latency (onchip run --qubits N runs a stream "
                         "per channel)")


def expand_path_vars(value: str, field: str) -> str:
    """``value`` with its environment variables (``$NAME``, ``${NAME}``) filled in.

    Raises:
        ValueError: a variable is not set, naming it and ``field``.
    """
    names = [a or b for a, b in re.findall(r"\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", value)]
    unset = [n for n in dict.fromkeys(names) if n not in os.environ]
    if unset:
        raise ValueError(f"{field}: environment variable(s) {', '.join(unset)} not set "
                         f"(in {value!r}); set them or write the path out")
    return os.path.expandvars(value)


def _resolve_data(config: dict, folder: str) -> dict:
    # environment variables are filled in (an unset one is refused); a relative data path that
    # does not exist from here is read from the definition's folder
    data = config["data"]
    if data:
        path = Path(expand_path_vars(str(data), "accuracy.data"))
        if not path.is_absolute() and not path.exists():
            path = Path(folder) / path
        data = str(path)
    return {**config, "data": data or None}


def _summary(value) -> float:
    if value is None:
        return float("nan")
    if isinstance(value, (list, tuple, np.ndarray)):
        return float(np.mean(value)) if len(value) else float("nan")
    return value


def _accuracy(state: PointState, config: dict) -> dict:
    from .. import tasks
    from ..run import run_backend

    stream = tasks.make_stream(config["task"], samples=int(config["samples"]), seed=int(config["seed"]),
                               data=config.get("data"))
    columns = TASK_METRICS[config["task"]]
    out = {"task": config["task"]}
    failed = []
    for backend in config["backends"]:
        try:
            run = run_backend(backend, state.spec, stream.x, stream.y, progress=False)
            metrics = tasks.evaluate(stream, run.predictions)
        except (ValueError, FloatingPointError, RuntimeError) as exc:  # one backend failing keeps the others
            out[f"{backend}_error"] = str(exc).splitlines()[0][:200]
            failed.append(f"{backend}: {type(exc).__name__}: {out[f'{backend}_error']}")
            metrics = {}
        out.update({f"{backend}_{column}": _summary(metrics.get(metric)) for column, metric in columns.items()})
    if failed:  # the point is failed, never ok with NaN figures
        raise PartialFailure("; ".join(failed), out)
    return out


def _accuracy_columns(config: dict) -> tuple[str, ...]:
    return ("task", *(f"{backend}_{column}" for backend in config["backends"]
                      for column in (*TASK_METRICS[config["task"]], "error")))


register_computation(Computation(
    "resources", {"family": "xcup"}, _check_resources, _resources, needs_design=True,
    columns=lambda config: ("lut", "ff", "dsp", "bram", "bram_unit", "lutram", "carry", "ff_excl_params",
                            "logic_excl_params")))
register_computation(Computation(
    "pnr", {"board": "ulx3s-85f", "seed": 1}, _check_pnr, _pnr, needs_design=True,
    columns=lambda config: ("fmax_mhz", "pnr_logic_cells", "pnr_ff", "timing_met")))
register_computation(Computation(
    "latency", {"clock_mhz": 200.0, "software_samples": 2000}, _check_latency, _latency, needs_design=True,
    finish=add_software_latency,
    columns=lambda config: ("clock_mhz", "hw_step_ns_at_clock", "hw_ii_ns_at_clock", "hw_step_ns_fmax",
                            "sw_step_ns", "sw_over_hw_at_clock", "sw_over_hw_fmax")))
register_computation(Computation(
    "accuracy", {"task": "drift-regression", "data": None, "samples": 20_000, "seed": 0,
                 "backends": ["golden", "float"]},
    _check_accuracy, _accuracy, axes=("task", "data"), prepare=_resolve_data, check_spec=_check_accuracy_spec,
    columns=_accuracy_columns))


# -- one point ----------------------------------------------------------------------------------
def evaluate_point(point: dict, workdir: str | None = None,
                   computations: "tuple[Computation, ...] | None" = None) -> dict:
    """Compute one point; never raises: a failure is returned as ``{"status": "error", "error": ...}``.

    A computation that fails in part (:class:`PartialFailure`, e.g. one backend of ``accuracy``)
    fails the point and keeps the figures it computed.

    Args:
        point: one entry of :func:`onchip.sweep.expand`.
        workdir: parent folder of temporary build folders.
        computations: the computations to run, in order (the driver passes them, so a
            worker process need not have registered them); default: the registered ones
            named in ``point["settings"]``.

    Returns:
        ``{"key", "params", "status", "error", "seconds", "results"}`` where ``results`` holds
        ``param_count``, ``param_bits`` (coefficient bits) and the figures of every computation in
        ``point["settings"]``; ``seconds`` is the wall time of the point.
    """
    from ..spec import LearnerSpec

    start = time.perf_counter()
    results: dict = {}
    try:
        spec = LearnerSpec.from_dict(point["spec"])
        settings = point["settings"]
        state = PointState(spec, results, workdir=workdir)
        results["param_count"] = spec.parameter_count()
        results["param_bits"] = spec.parameter_count() * spec.formats.coef.width
        if computations is None:
            computations = tuple(c for name, c in COMPUTATIONS.items() if name in settings)
        chosen = [c for c in computations if c.name in settings]
        missing = sorted(set(settings) - {c.name for c in chosen})
        if missing:
            raise ValueError(f"computation(s) {', '.join(missing)} not registered in this process")
        if any(c.needs_design for c in chosen):
            from ..hw import generate

            state.design = generate(spec, axis=False)
            for k in DESIGN_COLUMNS:
                results[k] = state.design.info[k]
        failures = []
        for c in chosen:
            try:
                results.update(c.evaluate(state, settings[c.name]))
            except PartialFailure as exc:  # its figures are kept; the later computations still run
                results.update(exc.figures)
                failures.append(f"{c.name}: {exc}")
        if failures:
            raise PartialFailure("; ".join(failures), {})
        status, error = "ok", ""
    except PartialFailure as exc:
        status, error = "error", str(exc)
    except Exception as exc:  # a failed point is recorded, the sweep goes on
        status = "error"
        error = f"{type(exc).__name__}: {exc}"
        results["traceback"] = traceback.format_exc(limit=4)[-2000:]
    return {"key": point["key"], "params": point["params"], "status": status, "error": error,
            "seconds": time.perf_counter() - start, "results": results}
