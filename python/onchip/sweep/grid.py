"""Grid expansion: a definition's ``[[grid]]`` tables -> points (params, spec, settings, cache key)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path

from ..errors import SpecError
from ..numbers import is_integer
from ..spec import toml_text
from .computations import axis_names, get_computation

#: Grid keys that are not LearnerSpec fields but build one (see :mod:`onchip.sweep`).
SPECIAL_AXES = ("preset", "hidden", "format_width", "format_int_bits")


def _axes(grid: dict, where: str = "[[grid]]") -> list[dict]:
    empty = [k for k, v in grid.items() if isinstance(v, list) and not v]
    if empty:  # the product would have no point: the whole table silently skipped
        raise ValueError(f"{where}: axis {', '.join(empty)} is empty (give it at least one value)")
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
        ValueError / TypeError: the fields do not make a valid KAN spec with one table bit (the
            spec's own message).
    """
    from ..spec import LearnerSpec

    # the smallest table validates every field, the grid included; the acc check depends on the table
    trial = LearnerSpec(**{**spec_fields, "kind": "kan", "basis_table_bits": 1, "allow_acc_wrap": True})
    fmts = trial.formats
    inputs = [fmts.input] + [fmts.act] * (len(trial.widths) - 2)
    return min(6, min(f.frac_bits for f in inputs) + trial.cell_exp)


def _axis_integer(name: str, value) -> int:
    """A special axis that takes an integer (``hidden``, ``format_width``, ``format_int_bits``); a
    bool is not one."""
    if not is_integer(value):
        raise SpecError(f"{name} must be an integer, got {toml_text(value)}")
    return int(value)


def point_spec(params: dict, base: dict):
    """The :class:`LearnerSpec` of one grid point (``base`` updated with ``params``).

    Computation axes (``task``, ``data``) in ``params`` are left out of the spec.

    Raises:
        ValueError: an unknown field (``unknown spec field(s): ...``, as for a spec file)
            or an invalid spec, naming the point.
    """
    from ..spec import PRESETS, LearnerSpec, unknown_fields

    fields = dict(base)
    settings_axes = axis_names()
    known = {f.name for f in dataclasses.fields(LearnerSpec)} | set(SPECIAL_AXES) | settings_axes
    unknown = sorted(set(base) - known)
    if unknown:
        raise ValueError(f"[base]: {unknown_fields(unknown, known)}")
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"grid point {params}: {unknown_fields(unknown, known)}")
    fields.update({k: v for k, v in params.items() if k not in settings_axes})
    preset = fields.pop("preset", None)
    start = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"grid point {params}: preset must be one of {', '.join(PRESETS)}; got {preset!r}")
        start = PRESETS[preset].to_dict()
        start["formats"] = PRESETS[preset].formats
    elif not {"kind", "widths"} <= set(fields):
        raise ValueError(f"grid point {params}: names no learner: give it (or [base]) a preset, or kind and widths")
    try:
        return _build_spec({**start, **fields}, tuned_table="basis_table_bits" not in params
                           and "basis_table_bits" not in base)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"grid point {params}: {exc}") from None


def _build_spec(spec_fields: dict, tuned_table: bool):
    """The spec of a point's fields: the special axes applied; ``tuned_table``: a KAN takes
    :func:`max_basis_table_bits`. Grid fields of an MLP point reach the spec too (it checks their
    types and ignores them)."""
    from ..spec import Formats, LearnerSpec

    if "hidden" in spec_fields:  # widths are there: point_spec refuses a point without a learner
        w = list(spec_fields["widths"])
        spec_fields["widths"] = [w[0], _axis_integer("hidden", spec_fields.pop("hidden")), w[-1]]
    width = spec_fields.pop("format_width", None)
    int_bits = _axis_integer("format_int_bits", spec_fields.pop("format_int_bits", 4))
    if width is not None:
        width = _axis_integer("format_width", width)
        try:
            spec_fields["formats"] = Formats.uniform(width, int_bits)
        except ValueError as exc:  # name the axes the formats came from
            raise SpecError(f"format_width = {width}, format_int_bits = {int_bits}: {exc}") from None
    if isinstance(spec_fields.get("formats"), dict):
        spec_fields["formats"] = Formats(**spec_fields["formats"])
    if spec_fields.get("kind") == "kan" and tuned_table:
        spec_fields["basis_table_bits"] = max_basis_table_bits(spec_fields)
    return LearnerSpec(**spec_fields)


def point_key(spec_dict: dict, settings: dict, versions: dict) -> str:
    """The cache key of a point: 20 hex digits of the SHA-256 of its spec, settings and tool versions.

    The simulation bench is not part of it (:func:`onchip.flow.tools.tool_versions` leaves it out);
    :func:`expand` adds the computations' own source (:func:`computations_digest`).
    """
    source = json.dumps({"spec": spec_dict, "settings": settings, "tools": versions}, sort_keys=True, default=str)
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def computations_digest() -> str:
    """16 hex digits of the SHA-256 of ``sweep/computations.py``: what a point's record holds (its
    columns, which of them mark a failed backend) is decided there, so a record cached before an
    edit of it is computed again rather than read under the new meaning."""
    return hashlib.sha256(Path(__file__).with_name("computations.py").read_bytes()).hexdigest()[:16]


def expand(d: dict) -> list[dict]:
    """All points of a definition: ``[{"params", "spec", "settings", "key"}]`` in grid order.

    ``settings`` maps every computation of ``sweep.compute`` to the point's settings
    (:meth:`Computation.settings`: defaults, the definition's table, the point's axes).

    Raises:
        ValueError: an invalid point or setting, an empty axis, or a point a computation cannot
            run (its ``check_spec``).
    """
    from ..flow.tools import tool_versions

    base = dict(d.get("base", {}))
    versions = {**tool_versions(), "computations": computations_digest()}
    computations = [get_computation(name) for name in d["sweep"]["compute"]]
    folder = d.get("_dir", ".")
    points = []
    for i, grid in enumerate(d["grid"]):
        for params in _axes(grid, f"[[grid]] {i + 1}"):
            learner = point_spec(params, base)
            spec = learner.to_dict()
            settings = {c.name: c.settings(d.get(c.name, {}), params, folder) for c in computations}
            for c in computations:
                if c.check_spec is not None:
                    try:
                        c.check_spec(learner, settings[c.name])
                    except ValueError as exc:
                        raise ValueError(f"grid point {params}: {c.name}: {exc}") from None
            points.append({"params": params, "spec": spec, "settings": settings,
                           "key": point_key(spec, settings, versions)})
    return points
