"""Resource surrogate of ``onchip autotune``: LUT / FF / DSP of a spec without running Yosys.

SPARK evaluates every candidate in full; here a Yosys run of one learner core costs 10-100 s
on 2 cores, so the search ranks candidates with a surrogate and Yosys checks the finalists
(:func:`yosys_resources`, cached). The surrogate is a non-negative least-squares fit, one per
hardware group (KAN, parallel MLP, serial MLP), of the Yosys figures of a calibration table to
structural features of the spec (:func:`features`):

* ``mults``: multipliers the datapath has (forward products, update products, back-propagation
  products), each split into DSP tiles of 27 x 18 bits (Xilinx DSP48E2, UG579);
* ``adders``: multipliers x accumulator width (the sums the products go into);
* ``rounding``: multipliers x (coef + grad + act widths) (requantisation and saturation logic);
* ``params``: parameters x coef width (registers or RAM of the learned values);
* ``table``: KAN basis-table bits (values and derivatives, per layer input);
* ``pending``: pipelined staleness x update entries x coef width (the FIFO of delayed updates);
* ``neurons`` (serial MLP lanes) and a constant.

Calibration data: ``calibration.toml`` beside this file, package data (Yosys ``synth_xilinx
-family xcup`` of specs drawn uniformly from the space and of the rows of the committed
``sweeps/resources`` table, made by :mod:`.calibrate`). :meth:`Surrogate.loo_error`
reports the leave-one-out relative error.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np

from ...spec import LearnerSpec

FEATURES = ("const", "mults", "adders", "rounding", "params", "table", "pending", "neurons")
TARGETS = ("lut", "ff", "dsp")
CALIBRATION = Path(__file__).with_name("calibration.toml")


def group_of(spec: LearnerSpec) -> str:
    """``kan``, ``mlp-parallel`` or ``mlp-serial``: the hardware family a spec is built as."""
    return "kan" if spec.kind == "kan" else f"mlp-{spec.datapath}"


def _tiles(a: int, b: int) -> int:
    a, b = max(a, b), min(a, b)
    return math.ceil(max(a - 1, 1) / 26) * math.ceil(max(b - 1, 1) / 17)


def features(spec: LearnerSpec) -> np.ndarray:
    """The surrogate's features of ``spec`` (order :data:`FEATURES`), float64 (8,)."""
    f = spec.formats
    cw, gw, aw, bw, acw = f.coef.width, f.grad.width, f.act.width, f.basis.width, f.acc.width
    mults = tiles = table = 0
    layers = list(zip(spec.widths[:-1], spec.widths[1:]))
    in_widths = [f.input.width] + [aw] * (len(layers) - 1)
    for li, ((n_in, n_out), uw) in enumerate(zip(layers, in_widths)):
        edges = n_in * n_out
        if spec.kind == "kan":
            k1 = spec.spline_order + 1
            n_fwd, n_upd = edges * k1, edges * k1
            t = n_fwd * _tiles(cw, bw) + n_upd * _tiles(gw, bw)
            n_bwd = edges * (k1 + 1) if li > 0 else 0
            t += (edges * k1 * _tiles(cw, bw) + edges * _tiles(gw, gw)) if li > 0 else 0
            table += n_in * (2**spec.basis_table_bits) * k1 * bw * 2
        else:
            n_fwd, n_upd = edges, edges
            t = n_fwd * _tiles(cw, uw) + n_upd * _tiles(gw, uw)
            n_bwd = edges if li > 0 else 0
            t += edges * _tiles(cw, gw) if li > 0 else 0
        mults += n_fwd + n_upd + n_bwd
        tiles += t
    from ...model.golden import update_size

    pending = spec.effective_staleness * update_size(spec) * cw
    neurons = sum(spec.widths[1:]) if group_of(spec) == "mlp-serial" else 0
    return np.array([1.0, tiles, mults * acw, mults * (cw + gw + aw), spec.parameter_count() * cw, table,
                     pending, neurons], dtype=float)


def load_calibration(path: str | Path | None = None) -> list[dict]:
    """Calibration points: ``{"spec", "lut", "ff", "dsp"}`` from the table.

    Args:
        path: a calibration TOML (default :data:`CALIBRATION`, shipped with the package).
    """
    table = Path(path or CALIBRATION)
    data = tomllib.loads(table.read_text()) if table.is_file() else {"point": []}
    points = []
    for p in data["point"]:
        spec = _load_point_spec(p["spec"])
        if spec is not None:
            points.append({"spec": spec, **{k: float(p[k]) for k in TARGETS}})
    return points


def _load_point_spec(text: str) -> LearnerSpec | None:
    """A calibration point's spec; one that a stricter spec check refuses is read with the accumulator
    allowed to wrap where the spec has that field (the hardware does not depend on it), else skipped."""
    import tomllib as _toml

    try:
        return LearnerSpec.from_toml(text)
    except ValueError:
        pass
    try:
        return LearnerSpec.from_dict({**_toml.loads(text), "allow_acc_wrap": True})
    except (ValueError, TypeError):
        return None


class Surrogate:
    """Non-negative least-squares LUT / FF / DSP model per hardware group (see the module docstring).

    Args:
        points: calibration points of :func:`load_calibration`.

    Raises:
        ValueError: fewer than 3 points.
    """

    def __init__(self, points: list[dict]):
        if len(points) < 3:
            raise ValueError(f"points: the surrogate needs at least 3 calibration points, got {len(points)}")
        self.points = points
        self._fits = self._fit(points)

    @staticmethod
    def _fit(points: list[dict]) -> dict:
        from scipy.optimize import nnls

        fits = {}
        groups = {group_of(p["spec"]) for p in points} | {"all"}
        for g in groups:
            sel = [p for p in points if g == "all" or group_of(p["spec"]) == g]
            if len(sel) < 5 and g != "all":
                continue
            x = np.array([features(p["spec"]) for p in sel])
            scale = np.maximum(np.abs(x).max(axis=0), 1e-9)
            fits[g] = {t: nnls(x / scale, np.array([p[t] for p in sel]))[0] / scale for t in TARGETS}
        return fits

    def predict(self, spec: LearnerSpec) -> dict:
        """``{"lut", "ff", "dsp"}`` estimated for ``spec`` (floats >= 0)."""
        fit = self._fits.get(group_of(spec), self._fits["all"])
        x = features(spec)
        return {t: float(max(0.0, x @ fit[t])) for t in TARGETS}

    def loo_error(self) -> dict:
        """Leave-one-out median and max relative error per target (|pred - yosys| / yosys)."""
        errs = {t: [] for t in TARGETS}
        for i, p in enumerate(self.points):
            rest = Surrogate(self.points[:i] + self.points[i + 1:])
            pred = rest.predict(p["spec"])
            for t in TARGETS:
                errs[t].append(abs(pred[t] - p[t]) / max(p[t], 1.0))
        return {t: {"median": float(np.median(v)), "max": float(np.max(v))} for t, v in errs.items()}


def yosys_resources(spec: LearnerSpec, family: str = "xcup") -> dict:
    """Yosys LUT / FF / DSP of the learner core, cached in the onchip cache (``autotune_yosys``).

    The key is the spec's TOML, the family and :func:`onchip.flow.tools.tool_versions`.

    Raises:
        onchip.ToolError: Yosys failed; ValueError: the spec cannot be generated.
    """
    import json

    from ...cache import cached_build, digest
    from ...flow.tools import tool_versions

    key = digest(spec.to_toml(), family, json.dumps(tool_versions(), sort_keys=True))[:32]

    def build(folder: Path) -> None:
        from ...flow.steps import synth

        report = synth(spec, family=family)
        keep = {k: report[k] for k in ("lut", "ff", "dsp", "bram", "lutram", "initiation_interval",
                                       "latency_cycles_update")}
        (folder / "report.json").write_text(json.dumps(keep))

    entry, _ = cached_build("autotune_yosys", key, build)
    return json.loads((entry / "report.json").read_text())
