"""Grid expansion: a definition's ``[[grid]]`` tables -> points (params, spec, settings, cache key)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math

from .computations import axis_names, get_computation

#: Grid keys that are not LearnerSpec fields but build one (see :mod:`onchip.sweep`).
SPECIAL_AXES = ("preset", "hidden", "format_width", "format_int_bits")


def _axes(grid: dict) -> list[dict]:
    keys = list(grid)
    values = [v if isinstance(v, list) and not _is_widths_value(k, v) else [v] for k, v in
              ((k, grid[k]) for k in keys)]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _is_widths_value(key, value) -> bool:
    # widths = [2, 4, 1] is one value; widths = [[2, 4, 1], [2, 8, 1]] is an axis
    return key in ("widths", "grid_range") and value and not isinstance(value[0], list)


def max_basis_table_bits(spec_fields: dict) -> int:
    """Largest basis_table_bits (<= 6) the layer-input formats of a KAN spec allow: frac bits + log2(cell width).

    Args:
        spec_fields: LearnerSpec keyword arguments (``formats``, ``widths``, ``grid_range``, ``grid_size``).

    Raises:
        ValueError / TypeError: the formats or widths do not make a valid spec.
    """
    from ..spec import Formats, LearnerSpec

    trial = LearnerSpec(**{**spec_fields, "kind": "mlp"})  # validates formats and widths only
    fmts: Formats = trial.formats
    lo, hi = spec_fields.get("grid_range", (-2.0, 2.0))
    g = spec_fields.get("grid_size", 8)
    e = math.log2((hi - lo) / g)
    inputs = [fmts.input] + [fmts.act] * (len(trial.widths) - 2)
    return max(1, min(6, min(f.frac_bits for f in inputs) + int(round(e))))


def point_spec(params: dict, base: dict):
    """The :class:`LearnerSpec` of one grid point (``base`` updated with ``params``).

    Computation axes (``task``, ``data``) in ``params`` are left out of the spec.

    Raises:
        ValueError: an unknown field (``unknown spec field(s): ...``, as for a spec file)
            or an invalid spec, naming the point.
    """
    from ..spec import PRESETS, Formats, LearnerSpec

    fields = dict(base)
    settings_axes = axis_names()
    known = {f.name for f in dataclasses.fields(LearnerSpec)} | set(SPECIAL_AXES) | settings_axes
    unknown = sorted(set(base) - known)
    if unknown:
        raise ValueError(f"[base]: unknown spec field(s): {', '.join(unknown)}")
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"grid point {params}: unknown spec field(s): {', '.join(unknown)}")
    fields.update({k: v for k, v in params.items() if k not in settings_axes})
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


def point_key(spec_dict: dict, settings: dict, versions: dict) -> str:
    """The cache key of a point: 20 hex digits of the SHA-256 of its spec, settings and tool versions.

    The simulation bench is not part of it (:func:`onchip.flow.tools.tool_versions` leaves it out).
    """
    source = json.dumps({"spec": spec_dict, "settings": settings, "tools": versions}, sort_keys=True, default=str)
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def expand(d: dict) -> list[dict]:
    """All points of a definition: ``[{"params", "spec", "settings", "key"}]`` in grid order.

    ``settings`` maps every computation of ``sweep.compute`` to the point's settings
    (:meth:`Computation.settings`: defaults, the definition's table, the point's axes).

    Raises:
        ValueError: an invalid point or setting.
    """
    from ..flow.tools import tool_versions

    base = dict(d.get("base", {}))
    versions = tool_versions()
    computations = [get_computation(name) for name in d["sweep"]["compute"]]
    folder = d.get("_dir", ".")
    points = []
    for grid in d["grid"]:
        for params in _axes(grid):
            spec = point_spec(params, base).to_dict()
            settings = {c.name: c.settings(d.get(c.name, {}), params, folder) for c in computations}
            points.append({"params": params, "spec": spec, "settings": settings,
                           "key": point_key(spec, settings, versions)})
    return points
