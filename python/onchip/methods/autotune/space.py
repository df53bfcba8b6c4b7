"""The design space of ``onchip autotune``: a :class:`~onchip.spec.LearnerSpec` split into functional factors.

SPARK (arXiv 2605.04057) edits a program whose code is split into marked regions, one per
functional factor, and rejects an edit that reaches outside the region it was asked to change.
Here the "program" is the learner spec and the regions are groups of its fields:

==========  ==========================================================================
factor      spec fields
==========  ==========================================================================
BASIS       ``grid_size`` (G), ``spline_order`` (k), ``grid_range``, ``basis_table_bits`` (T)
NUMERICS    ``formats.input``, ``formats.coef``, ``formats.basis``, ``formats.act``,
            ``formats.grad``, ``formats.acc`` (the fixed-point formats)
TOPOLOGY    ``kind``, ``widths``, ``datapath``, ``lanes``
SCHEDULE    ``learning_rate``, ``schedule``, ``staleness``, ``init_scale``, ``timing`` (no move edits it)
==========  ==========================================================================

``init_seed``, ``loss`` and ``name`` belong to no factor and are never edited.

A *move* is one named local edit inside one factor (``G x2``, ``coef +1 frac bit``,
``pipelined``...); :func:`apply_changes` builds the edited spec, :func:`changed_fields` lists
which fields differ, and :func:`scope_check` is SPARK's rejection of edits that reach into a
factor entangled with the chosen one (the entanglement map is measured, :mod:`.interaction`). A spec
must also be buildable as hardware (:func:`hardware_check`): a pipelined staleness below the
pipeline's minimum and a parallel MLP past the generator's size are refused before evaluation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...fixed import Fmt
from ...spec import Formats, LearnerSpec

FACTORS = ("BASIS", "NUMERICS", "TOPOLOGY", "SCHEDULE")
_SPEC_FIELDS = {f.name for f in dataclasses.fields(LearnerSpec)}

#: spec field paths of each factor (``formats.<class>`` for a format)
FACTOR_FIELDS: dict[str, tuple[str, ...]] = {
    "BASIS": ("grid_size", "spline_order", "grid_range", "basis_table_bits"),
    "NUMERICS": ("formats.input", "formats.coef", "formats.basis", "formats.act", "formats.grad", "formats.acc")
    # whether the accumulator may wrap is a numerics choice (a spec field where the spec has it)
    + (("allow_acc_wrap",) if "allow_acc_wrap" in _SPEC_FIELDS else ()),
    "TOPOLOGY": ("kind", "widths", "datapath", "lanes"),
    # timing changes register stages only (cycles and fmax, never the golden numbers); no move edits it
    "SCHEDULE": ("learning_rate", "schedule", "staleness", "init_scale", "timing"),
}
FIELD_FACTOR = {f: factor for factor, fields in FACTOR_FIELDS.items() for f in fields}
#: fields no factor owns: an edit never changes them
FROZEN_FIELDS = ("loss", "init_seed", "name", "channels")  # channels: how many copies run, not the learner

# value grids of the space (the moves step along them)
GRID_SIZES = (2, 4, 8, 16, 32)
SPLINE_ORDERS = (1, 2, 3)
RANGE_EXPS = (0, 1, 2, 3)  # grid_range = (-2**a, 2**a)
TABLE_BITS = tuple(range(2, 9))
DATA_WIDTHS = tuple(range(5, 21))
DATA_INT_BITS = tuple(range(1, 7))
BASIS_WIDTHS = tuple(range(4, 19))  # basis: signed, I = 2 (holds -1 and 1)
ACC_WIDTHS = tuple(range(16, 49, 2))
ACC_INT_BITS = tuple(range(4, 17))
HIDDEN = (0, 1, 2, 4, 8, 16)  # 0: no hidden layer
LR_SHIFTS = tuple(range(0, 11))
STALENESS = tuple(range(0, 13))
INIT_SCALES = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0)
DATA_CLASSES = ("input", "coef", "act", "grad")
ROUNDINGS = ("RND_CONV", "TRN")


def flat_fields(spec: LearnerSpec) -> dict[str, object]:
    """Every editable field of ``spec`` as ``path -> value`` (formats as ``formats.<class>`` strings)."""
    out = {}
    for f in dataclasses.fields(LearnerSpec):
        value = getattr(spec, f.name)
        if f.name == "formats":
            out.update({f"formats.{k}": v for k, v in value.as_dict().items()})
        else:
            out[f.name] = value
    return out


def changed_fields(parent: LearnerSpec, child: LearnerSpec) -> set[str]:
    """Field paths whose value differs between two specs (KAN fields count for an MLP too)."""
    a, b = flat_fields(parent), flat_fields(child)
    return {k for k in a if a[k] != b[k]}


def factors_touched(parent: LearnerSpec, child: LearnerSpec) -> set[str]:
    """The factors an edit changed; ``"FROZEN"`` when it changed a field no factor owns."""
    return {FIELD_FACTOR.get(k, "FROZEN") for k in changed_fields(parent, child)}


class ScopeViolation(ValueError):
    """An edit changed fields outside the factor it was scoped to (SPARK rejects it before evaluation)."""


def scope_check(parent: LearnerSpec, child: LearnerSpec, factor: str,
                entangled: frozenset | None = None) -> set[str]:
    """SPARK's scoped-rewrite guard: the edit parent -> child may not reach into a factor entangled
    with ``factor``.

    Args:
        parent, child: the edit.
        factor: the factor the edit was scoped to (the router's choice).
        entangled: the entanglement map, a set of ``frozenset({A, B})`` factor pairs (measured by
            :func:`.interaction.measure_coupling`); a changed field of a factor entangled with
            ``factor`` is refused, one of a factor whose effect adds to ``factor``'s is let
            through. None: every pair is entangled (the paper's guard: nothing outside the scope).

    Returns:
        The other factors the edit changed and the guard let through (empty for a local edit).

    Raises:
        ValueError: ``factor`` is not one of :data:`FACTORS`.
        ScopeViolation: a changed field belongs to a factor entangled with ``factor`` (or to no
            factor: a frozen field), naming the fields.
    """
    if factor not in FACTORS:
        raise ValueError(f"factor must be one of {', '.join(FACTORS)}, got {factor!r}")
    outside = {k: FIELD_FACTOR.get(k, "FROZEN") for k in changed_fields(parent, child)
               if FIELD_FACTOR.get(k) != factor}
    refused = sorted(k for k, f in outside.items()
                     if f == "FROZEN" or entangled is None or frozenset((factor, f)) in entangled)
    if refused:
        raise ScopeViolation(f"edit scoped to {factor} changed {', '.join(refused)}")
    return set(outside.values())


def hardware_check(spec: LearnerSpec) -> None:
    """The checks ``onchip generate`` applies beyond the spec's own validation, without generating.

    Raises:
        ValueError: a spec the RTL generator does not build (:func:`onchip.hw.check_buildable`: a
            pipelined staleness below the pipeline's minimum, a parallel MLP too large), or (the
            space's own bound) a data format without a fractional bit.
    """
    from ...hw import check_buildable

    for cls in DATA_CLASSES:
        f = getattr(spec.formats, cls)
        if f.int_bits >= f.width:
            raise ValueError(f"formats.{cls} ({f}) has no fractional bit")
    check_buildable(spec)


def hidden_of(spec: LearnerSpec) -> int:
    """The hidden width (0: no hidden layer); the space holds 1 or 2 layers."""
    return spec.widths[1] if len(spec.widths) == 3 else 0


def with_hidden(spec: LearnerSpec, hidden: int) -> tuple[int, ...]:
    return (spec.n_in, spec.n_out) if hidden == 0 else (spec.n_in, hidden, spec.n_out)


# -------------------------------------------------------------------------- applying changes
def apply_changes(spec: LearnerSpec, changes: dict) -> LearnerSpec:
    """``spec`` with field paths changed (``formats.<class>`` takes an :class:`Fmt`); validated.

    Raises:
        onchip.SpecError / ValueError: the result is not a valid spec.
    """
    plain = {k: v for k, v in changes.items() if not k.startswith("formats.")}
    fmts = {k.split(".", 1)[1]: v for k, v in changes.items() if k.startswith("formats.")}
    if fmts:
        current = {f.name: getattr(spec.formats, f.name) for f in dataclasses.fields(Formats)}
        current.update(fmts)
        plain["formats"] = Formats(**current)
    return dataclasses.replace(spec, **plain)


def _step(values: tuple, current, delta: int):
    """The value ``delta`` grid steps from ``current`` (None past either end or off the grid)."""
    if current not in values:
        return None
    i = values.index(current) + delta
    return values[i] if 0 <= i < len(values) else None


def _fmt(f: Fmt, width: int | None = None, int_bits: int | None = None, quant: str | None = None) -> Fmt:
    return Fmt(f.width if width is None else width, f.int_bits if int_bits is None else int_bits,
               f.signed, f.quant if quant is None else quant, f.overflow)


@dataclass(frozen=True)
class Move:
    """One named local edit inside one factor.

    Attributes:
        name: e.g. ``"G x2"``, ``"coef +frac"``.
        factor: the factor whose fields it changes.
        tags: what the move does, read by the knowledge rules (``"more_capacity"``,
            ``"fewer_resources"``, ``"more_range:coef"``, ``"more_precision:grad"``, ...).
        changes: ``changes(spec) -> dict`` of field path -> new value, or None when the move
            does not apply (at the end of a grid, an MLP field on a KAN...).
    """

    name: str
    factor: str
    tags: tuple[str, ...]
    changes: Callable[[LearnerSpec], dict | None]


def _basis_moves() -> list[Move]:
    def kan(fn):
        return lambda s: fn(s) if s.kind == "kan" else None

    def g(delta):
        def ch(s):
            new = _step(GRID_SIZES, s.grid_size, delta)
            return None if new is None else {"grid_size": new}
        return ch

    def k(delta):
        def ch(s):
            new = _step(SPLINE_ORDERS, s.spline_order, delta)
            return None if new is None else {"spline_order": new}
        return ch

    def rng_(delta):
        def ch(s):
            a = int(round(np.log2(s.grid_range[1])))
            new = _step(RANGE_EXPS, a, delta)
            return None if new is None else {"grid_range": (-2.0**new, 2.0**new)}
        return ch

    def t(delta):
        def ch(s):
            new = _step(TABLE_BITS, s.basis_table_bits, delta)
            return None if new is None else {"basis_table_bits": new}
        return ch

    return [
        Move("G x2", "BASIS", ("more_capacity", "more_resources"), kan(g(+1))),
        Move("G /2", "BASIS", ("less_capacity", "fewer_resources", "smoother"), kan(g(-1))),
        Move("k +1", "BASIS", ("more_capacity", "more_resources", "smoother"), kan(k(+1))),
        Move("k -1", "BASIS", ("less_capacity", "fewer_resources"), kan(k(-1))),
        Move("range x2", "BASIS", ("wider_grid",), kan(rng_(+1))),
        Move("range /2", "BASIS", ("narrower_grid",), kan(rng_(-1))),
        Move("T +1", "BASIS", ("finer_table", "more_resources"), kan(t(+1))),
        Move("T -1", "BASIS", ("coarser_table", "fewer_resources"), kan(t(-1))),
    ]


def _numerics_moves() -> list[Move]:
    def width(cls, delta, values):
        def ch(s):
            f = getattr(s.formats, cls)
            new = _step(values, f.width, delta)
            return None if new is None else {f"formats.{cls}": _fmt(f, width=new)}
        return ch

    def int_bits(cls, delta, values):
        # keep the width: one more integer bit is one fewer fractional bit
        def ch(s):
            f = getattr(s.formats, cls)
            new = _step(values, f.int_bits, delta)
            return None if new is None else {f"formats.{cls}": _fmt(f, int_bits=new)}
        return ch

    def rounding(s):
        quant = "TRN" if s.formats.coef.quant == "RND_CONV" else "RND_CONV"
        return {f"formats.{c}": _fmt(getattr(s.formats, c), quant=quant) for c in DATA_CLASSES}

    moves = []
    for cls in DATA_CLASSES:
        moves += [
            Move(f"{cls} +frac", "NUMERICS", (f"more_precision:{cls}", "more_resources"),
                 width(cls, +1, DATA_WIDTHS)),
            Move(f"{cls} -frac", "NUMERICS", (f"less_precision:{cls}", "fewer_resources"),
                 width(cls, -1, DATA_WIDTHS)),
            Move(f"{cls} +int", "NUMERICS", (f"more_range:{cls}",), int_bits(cls, +1, DATA_INT_BITS)),
            Move(f"{cls} -int", "NUMERICS", (f"less_range:{cls}", f"more_precision:{cls}"),
                 int_bits(cls, -1, DATA_INT_BITS)),
        ]
    moves += [
        Move("basis +frac", "NUMERICS", ("more_precision:basis", "more_resources"), width("basis", +1, BASIS_WIDTHS)),
        Move("basis -frac", "NUMERICS", ("less_precision:basis", "fewer_resources"), width("basis", -1, BASIS_WIDTHS)),
        Move("acc +2 frac", "NUMERICS", ("more_precision:acc", "more_resources"), width("acc", +1, ACC_WIDTHS)),
        Move("acc -2 frac", "NUMERICS", ("less_precision:acc", "fewer_resources"), width("acc", -1, ACC_WIDTHS)),
        Move("acc +int", "NUMERICS", ("more_range:acc",), int_bits("acc", +1, ACC_INT_BITS)),
        Move("acc -int", "NUMERICS", ("less_range:acc",), int_bits("acc", -1, ACC_INT_BITS)),
        Move("rounding", "NUMERICS", ("rounding",), rounding),
    ]
    return moves


def _topology_moves() -> list[Move]:
    def hidden(delta):
        def ch(s):
            new = _step(HIDDEN, hidden_of(s), delta)
            return None if new is None else {"widths": with_hidden(s, new)}
        return ch

    def kind(s):
        return {"kind": "mlp" if s.kind == "kan" else "kan", "datapath": "parallel", "lanes": 1}

    def datapath(s):
        if s.kind != "mlp":
            return None
        return {"datapath": "serial" if s.datapath == "parallel" else "parallel"}

    return [
        Move("hidden up", "TOPOLOGY", ("more_capacity", "more_resources", "deeper"), hidden(+1)),
        Move("hidden down", "TOPOLOGY", ("less_capacity", "fewer_resources"), hidden(-1)),
        Move("kind swap", "TOPOLOGY", ("kind",), kind),
        Move("datapath swap", "TOPOLOGY", ("datapath", "fewer_dsp"), datapath),
    ]


def _schedule_moves() -> list[Move]:
    def lr(delta):  # delta in shift steps: +1 = halve the learning rate
        def ch(s):
            new = _step(LR_SHIFTS, s.lr_shift, delta)
            return None if new is None else {"learning_rate": 2.0**-new}
        return ch

    def stale(delta):
        def ch(s):
            if s.schedule != "pipelined":
                return None
            new = _step(STALENESS, s.staleness, delta)
            return None if new is None else {"staleness": new}
        return ch

    def schedule(s):
        return {"schedule": "sequential" if s.schedule == "pipelined" else "pipelined"}

    def init(delta):
        def ch(s):
            new = _step(INIT_SCALES, float(s.init_scale), delta)
            return None if new is None else {"init_scale": new}
        return ch

    return [
        Move("lr x2", "SCHEDULE", ("faster_learning",), lr(-1)),
        Move("lr /2", "SCHEDULE", ("slower_learning",), lr(+1)),
        Move("schedule swap", "SCHEDULE", ("schedule", "ii"), schedule),
        Move("staleness +1", "SCHEDULE", ("staleness_up",), stale(+1)),
        Move("staleness -1", "SCHEDULE", ("staleness_down",), stale(-1)),
        Move("init up", "SCHEDULE", ("init_up",), init(+1)),
        Move("init down", "SCHEDULE", ("init_down",), init(-1)),
    ]


#: every move of the space, per factor
MOVES: dict[str, tuple[Move, ...]] = {
    "BASIS": tuple(_basis_moves()),
    "NUMERICS": tuple(_numerics_moves()),
    "TOPOLOGY": tuple(_topology_moves()),
    "SCHEDULE": tuple(_schedule_moves()),
}


def applicable(spec: LearnerSpec, factor: str) -> list[tuple[Move, dict]]:
    """The moves of ``factor`` that apply to ``spec``, with their changes (not yet validated)."""
    out = []
    for move in MOVES[factor]:
        changes = move.changes(spec)
        if changes:
            out.append((move, changes))
    return out


# -------------------------------------------------------------------------- sampling the space
def sample_spec(rng: np.random.Generator, n_in: int, n_out: int = 1, tries: int = 200) -> LearnerSpec:
    """A uniform draw over the space's value grids, redrawn until the spec is valid and buildable.

    Random search's proposal and the calibration design of the resource surrogate.

    Raises:
        RuntimeError: no valid spec in ``tries`` draws (does not happen for this space).
    """
    for _ in range(tries):
        try:
            spec = spec_from_genes(random_genes(rng), n_in, n_out)
            hardware_check(spec)
            return spec
        except ValueError:
            continue
    raise RuntimeError(f"no valid spec in {tries} random draws")


def random_genes(rng: np.random.Generator) -> dict:
    """One value per gene of :func:`spec_from_genes`, uniform on each grid."""
    def pick(values):
        return values[int(rng.integers(len(values)))]

    genes = {"kind": pick(("kan", "mlp")), "hidden": pick(HIDDEN), "datapath": pick(("parallel", "serial")),
             "grid_size": pick(GRID_SIZES), "spline_order": pick(SPLINE_ORDERS), "range_exp": pick(RANGE_EXPS),
             "table_bits": pick(TABLE_BITS), "rounding": pick(ROUNDINGS),
             "basis_w": pick(BASIS_WIDTHS), "acc_w": pick(ACC_WIDTHS), "acc_i": pick(ACC_INT_BITS),
             "lr_shift": pick(LR_SHIFTS), "schedule": pick(("sequential", "pipelined")),
             "staleness": pick(STALENESS), "init_scale": pick(INIT_SCALES)}
    for cls in DATA_CLASSES:
        genes[f"{cls}_w"] = pick(DATA_WIDTHS)
        genes[f"{cls}_i"] = pick(DATA_INT_BITS)
    return genes


#: the genes and their grids (random search and TPE draw from these)
GENES: dict[str, tuple] = {
    "kind": ("kan", "mlp"), "hidden": HIDDEN, "datapath": ("parallel", "serial"),
    "grid_size": GRID_SIZES, "spline_order": SPLINE_ORDERS, "range_exp": RANGE_EXPS, "table_bits": TABLE_BITS,
    **{f"{c}_{p}": (DATA_WIDTHS if p == "w" else DATA_INT_BITS) for c in DATA_CLASSES for p in ("w", "i")},
    "basis_w": BASIS_WIDTHS, "acc_w": ACC_WIDTHS, "acc_i": ACC_INT_BITS, "rounding": ROUNDINGS,
    "lr_shift": LR_SHIFTS, "schedule": ("sequential", "pipelined"), "staleness": STALENESS,
    "init_scale": INIT_SCALES,
}


def spec_from_genes(genes: dict, n_in: int, n_out: int = 1) -> LearnerSpec:
    """Build a spec from one value per gene (:data:`GENES`).

    Raises:
        onchip.SpecError / ValueError: the combination is not a valid spec.
    """
    q = genes["rounding"]
    data = {c: Fmt(genes[f"{c}_w"], genes[f"{c}_i"], True, q, "SAT") for c in DATA_CLASSES}
    fmts = Formats(**data, basis=Fmt(genes["basis_w"], 2, True, "RND_CONV", "SAT"),
                   acc=Fmt(genes["acc_w"], genes["acc_i"], True, "TRN", "WRAP"))
    kind = genes["kind"]
    a = genes["range_exp"]
    return LearnerSpec(
        kind=kind, widths=(n_in, n_out) if genes["hidden"] == 0 else (n_in, genes["hidden"], n_out),
        grid_size=genes["grid_size"], spline_order=genes["spline_order"], grid_range=(-2.0**a, 2.0**a),
        basis_table_bits=genes["table_bits"], formats=fmts, learning_rate=2.0**-genes["lr_shift"],
        schedule=genes["schedule"], staleness=genes["staleness"], init_scale=genes["init_scale"],
        datapath=genes["datapath"] if kind == "mlp" else "parallel",
        timing="compact",  # the stage plan the resource surrogate's calibration table was synthesised at
        name="autotune",
    )
