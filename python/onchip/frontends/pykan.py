"""pykan front end: a trained pykan KAN -> KAN LearnerSpec + raw parameters, by projection.

pykan's ``MultKAN`` (pykan 0.2.8) computes, for edge (i -> j) of layer l,
``phi(x) = mask * (scale_base * base_fun(x) + scale_sp * spline(x))`` with a B-spline on a grid that
``update_grid`` makes non-uniform (per input), and for node j
``x_j = node_scale * (subnode_scale * sum_i phi_ji(x_i) + subnode_bias) + node_bias``.
An onchip edge is a uniform B-spline of order k on G cells of power-of-two width h over one grid
range [lo, hi) shared by every layer, constant outside it (the input is clamped). So the
conversion is a projection:

1. **Reach**: each layer input covers its own pykan grid interval joined with the values pykan's
   forward gives it on the user's inputs ``x`` (or a probe over the input grid): a hidden node
   leaves its interval where pykan's grids are stale (after training, after ``prune_input``), and
   pykan's edge there is its base function plus the spline's tails (:func:`reach`).
2. **Grid**: from a ``template`` spec (G, k, grid range, formats), or from the model: the range
   covers the first layer's reach, h is the largest power of two not above
   (range / (refine * G)) for the largest G of the model's layers, and G the number of such cells
   from a multiple of h at or below the range's low end to its high end. A hidden node's reach
   is mapped affinely onto that range: the map scales and shifts the node's output (folded into
   its edges as below) and the next layer's edges are fitted in the mapped variable, so a narrow
   hidden range keeps every cell (:func:`hidden_maps`).
3. **Fit**: each edge's whole activation (base function included, masks applied), sampled densely
   over [lo, hi) (each input clamped to its reach; at least two samples per basis-table entry),
   with node j's affine terms folded in (its outputs scale by a_j = node_scale * subnode_scale and
   shift by b_j = node_scale * subnode_bias + node_bias, b_j / n_in on each of its edges: the
   basis sums to one on the grid; for a hidden node composed with the map of step 2), is fitted by
   least squares in float64, first onto the G + k B-splines (which sets the formats), then, by
   default, onto the basis as the hardware reads it (:func:`table_basis`: input rounded, the
   position truncated to T table bits), which removes the truncation's bias.
4. **Formats** from a template, or ``bits``-bit formats derived from the ranges: ``input`` holds
   the grid range, ``act`` the grid range (deeper networks) and the largest output the
   coefficients allow, ``coef`` the largest coefficient, each with ``headroom_bits`` integer bits
   to spare for on-chip training; ``acc`` keeps every product exact; T the most table bits the
   layer inputs resolve within :data:`TABLE_BITS` (a format short of the lower bound, or of a
   ``basis_table_bits`` given, is widened, and the import's ``warnings`` say so). Coefficients round
   into ``coef`` (RND_CONV); one a template's ``coef`` cannot hold is refused.

Where the error comes from (sweeps/pykan_import/README.md, measured by its script): with a cell
width no finer than the model's (refine 1) and T = 6, the 64-entry table's truncation of the
position dominates, then the projection of pykan's non-uniform SiLU edges onto the uniform grid;
coefficient and data rounding at 16 bits are small beside both. A deeper linear-spline KAN
([2, 4, 3, 1] G6 k1) is far from pykan's for the projection alone: its edges bend at knots placed
at the data's quantiles, and later layers multiply a hidden input's error (:func:`hidden_gain`);
above :data:`WARN_RMS_LSB` the import's warnings say so.

The report (:class:`PykanImport`) gives, per edge, the fit's max and RMS error (function units
and LSB of ``act``) against the exact B-splines and after quantization (coefficients rounded, the
basis read from onchip's table as the hardware does), the network's output error on the user's
data or the probe, and one-line warnings. A uniform pykan grid equal to onchip's (same G, k,
power-of-two cell width) with the base function off converts with zero error before quantization
when fitted to the exact B-splines: the spline space is the same.

Refused with a ValueError naming the layer or edge: symbolic edges (``fix_symbolic``),
multiplication nodes (``mult_arity``), pruned or reordered inputs (``input_id``), a spline order
onchip does not build (k other than 1, 2, 3; from the model without a template), a template
whose widths differ from the model's.

Sources: pykan (Liu et al., "KAN: Kolmogorov-Arnold Networks", arXiv:2404.19756, and
"KAN 2.0", arXiv:2408.10205; github.com/KindXiaoming/pykan v0.2.8); B-splines with the
grid extended by k cells on each side as there (:mod:`onchip.model.basis`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..fixed import Fmt, quantize
from ..model.basis import basis_table, bspline_basis
from ..spec import Formats, LearnerSpec

#: spline orders onchip builds (:class:`onchip.spec.LearnerSpec`)
ORDERS = (1, 2, 3)
#: the derived spec's basis table bits T (no template, none given): the most the layer-input
#: formats resolve, at least the first (a format is widened for it) and at most the second
#: (sweeps/pykan_import: the table's truncation of the position dominates the error at T = 6)
TABLE_BITS = (6, 8)
#: derived grid: onchip cells per cell of the model's finest layer, at least (sweeps/pykan_import:
#: halving the cell width cuts the projection error of a G5 k3 SiLU KAN about ninefold)
REFINE = 2
#: output error (RMS, LSB of act) above which the import's warnings say where it comes from (the
#: accuracy the docs give for a [2, 3, 1] G5 k3 KAN; sweeps/pykan_import)
WARN_RMS_LSB = 4.0
#: what the coefficients are fitted to (:func:`from_pykan` ``fit_to``)
FIT_TO = ("table", "spline")


@dataclass(frozen=True)
class PykanImport:
    """A pykan KAN as an onchip learner, and how exact the projection is.

    Attributes:
        spec: the KAN LearnerSpec.
        theta: raw initial parameters, int64 (P,), ``coef`` format, in
            :func:`onchip.model.golden.layout` order (coef[j, i, :] of each layer).
        coef: the fitted coefficients before quantization, float64 (P,), same order.
        grid: ``{"source": "model" | "template", "lo", "hi", "grid_size", "spline_order",
            "cell_width", "basis_table_bits", "model_grids": [per layer {"G", "k", "lo", "hi",
            "uniform"}], "reach": [per layer {"lo": [per input], "hi": [per input]}] (:func:`reach`),
            "reach_source": "data" | "probe", "hidden_maps": [per hidden layer {"scale",
            "shift"}]}`` (:func:`hidden_maps`).
        edges: per edge ``{"layer", "i", "j", "max_error", "rms_error", "max_error_lsb",
            "rms_error_lsb", "max_error_quantized", "rms_error_quantized",
            "max_error_quantized_lsb", "rms_error_quantized_lsb"}``: the fitted edge (after
            folding) against pykan's over the grid range, in function units and LSB of ``act``:
            its float coefficients on the exact B-splines, and its ``theta`` read through the
            basis table as the hardware does (``_quantized``).
        output: the network's outputs against pykan's (:func:`output_error`), or None when not
            measured.
        warnings: one line each, what a user should know: samples that leave pykan's grids (the
            edges extended over them), samples clamped to the learner's grid, formats widened for
            the basis table, an output error above :data:`WARN_RMS_LSB` (its worst edge and the
            hidden input the network amplifies most).
    """

    spec: LearnerSpec
    theta: np.ndarray
    coef: np.ndarray
    grid: dict
    edges: tuple[dict, ...]
    output: dict | None
    warnings: tuple[str, ...] = ()


def modules():
    """Import torch and pykan; returns ``(torch, kan)``.

    Raises:
        onchip.extras.MissingExtra: pykan or one of the packages it imports is missing
            (the ``pykan`` extra; torch comes with ``ml``).
    """
    from ..extras import need

    torch = need("torch", "the pykan front end")
    return torch, need("kan", "the pykan front end", extra="pykan")


def _check_model(model, kan) -> None:
    if not isinstance(model, kan.MultKAN):
        raise ValueError(f"model: a pykan KAN (kan.MultKAN) is needed, got {type(model).__name__}")
    for l, (n_sum, n_mult) in enumerate(model.width):
        if n_mult:
            raise ValueError(f"layer {l}: {n_mult} multiplication node(s) (mult_arity={model.mult_arity}); "
                             "onchip's KAN nodes only add")
    inputs = np.asarray(model.input_id).reshape(-1)
    if not np.array_equal(inputs, np.arange(model.width_in[0])):
        raise ValueError(f"model: input_id {inputs.tolist()} selects or reorders inputs (prune_input); feed the "
                         "selected columns to a model without it")
    if model.symbolic_enabled:
        for l, sym in enumerate(model.symbolic_fun):
            mask = np.asarray(sym.mask.detach().cpu())
            for j, i in zip(*np.nonzero(mask)):
                raise ValueError(f"edge (layer {l}, i={i}, j={j}) is symbolic (fix_symbolic "
                                 f"{sym.funs_name[j][i]!r}); onchip's edges are splines: unfix_symbolic it")


def _model_grids(model) -> list[dict]:
    out = []
    for layer in model.act_fun:
        g = np.asarray(layer.grid.detach().cpu(), dtype=np.float64)
        k = int(layer.k)
        inner = g[:, k : g.shape[1] - k]
        steps = np.diff(inner, axis=1)
        out.append({"G": int(layer.num), "k": k, "lo": float(inner[:, 0].min()), "hi": float(inner[:, -1].max()),
                    "uniform": bool(np.allclose(steps, steps[:, :1], rtol=1e-6, atol=0))})
    return out


def _grid_from_model(lo_src: float, hi_src: float, g_model: int, refine: int) -> tuple[float, float, int]:
    # the network inputs' range (hidden inputs are mapped onto it); the finest layer, refined,
    # sets the cell width
    h = 2.0 ** math.floor(math.log2((hi_src - lo_src) / (g_model * refine)))
    lo = math.floor(lo_src / h) * h
    size = max(1, math.ceil((hi_src - lo) / h - 1e-9))
    return lo, lo + size * h, size


def _int_bits(magnitude: float) -> int:
    """Integer bits (sign included) of a signed format holding [-magnitude, magnitude]."""
    return 1 + max(0, math.ceil(math.log2(magnitude))) if magnitude > 0 else 1


def _derived_formats(lo, hi, k, coef_max, out_max, depth, n_in_max, bits, headroom) -> Formats:
    grid_int = _int_bits(max(-lo, hi))
    data = lambda i: Fmt(bits, i, True, "RND_CONV", "SAT")  # noqa: E731
    act_int = max(grid_int if depth > 1 else 1, _int_bits(out_max) + headroom)
    coef = data(_int_bits(coef_max) + headroom)
    basis = Fmt(16, 2, True, "RND_CONV", "SAT")
    # products exact; the sum of n_in * (k+1) terms of |coef * basis| <= |coef| * n_in (partition of unity)
    acc_frac = coef.frac_bits + basis.frac_bits
    acc_int = coef.int_bits + max(1, math.ceil(math.log2(n_in_max * (k + 1)))) + 1
    return Formats(input=data(grid_int), coef=coef, basis=basis, act=data(act_int), grad=data(act_int + 1),
                   acc=Fmt(acc_int + acc_frac, acc_int, True, "TRN", "WRAP"))


def _layer_bounds(layer) -> tuple[np.ndarray, np.ndarray]:
    """Per input of a KANLayer, its own grid interval [grid[k], grid[-k-1]]: (lo (n_in,), hi (n_in,))."""
    g = np.asarray(layer.grid.detach().cpu(), dtype=np.float64)
    k = int(layer.k)
    return g[:, k], g[:, g.shape[1] - k - 1]


def _fit_table(formats: Formats, depth: int, cell_exp: int, table_bits: int | None) -> tuple[Formats, int, list[str]]:
    """Basis table bits T and the layer-input formats that resolve them (the spec's check: every
    layer input has at least T bits of position inside a cell of width 2**cell_exp).

    ``table_bits`` None: the most the formats resolve, within :data:`TABLE_BITS`. A format with too
    few fractional bits for T is widened (integer bits kept), and the returned notes say so."""
    names = ["input"] + (["act"] if depth > 1 else [])
    pos = {n: getattr(formats, n).frac_bits + cell_exp for n in names}
    t = table_bits if table_bits is not None else max(TABLE_BITS[0], min(TABLE_BITS[1], *pos.values()))
    notes = []
    for n in names:
        if pos[n] < t:
            f = getattr(formats, n)
            wide = dataclasses.replace(f, width=f.width + t - pos[n])
            if wide.width > 32:
                raise ValueError(f"basis_table_bits={t}: formats.{n} would need {wide.width} bits (more than 32) to "
                                 f"resolve it in cells of width {2.0 ** cell_exp:g}; give fewer table bits")
            formats = dataclasses.replace(formats, **{n: wide})
            notes.append(f"formats.{n} widened from {f} to {wide}: {f.frac_bits} fractional bits resolve {pos[n]} "
                         f"bits of position in a cell of width {2.0 ** cell_exp:g}, fewer than basis_table_bits={t}")
    return formats, t, notes


def _edge_values(layer, x: np.ndarray, bounds: tuple[np.ndarray, np.ndarray], torch) -> np.ndarray:
    """pykan's edge activations phi_ji of one KANLayer at inputs ``x`` (N, n_in), each clamped to its
    interval of ``bounds`` ((lo (n_in,), hi (n_in,))), in float64: (N, n_out, n_in)."""
    work = copy.deepcopy(layer).double()
    with torch.no_grad():
        _, _, postacts, _ = work(torch.as_tensor(np.clip(x, bounds[0][None, :], bounds[1][None, :]),
                                                 dtype=torch.float64))
    return postacts.cpu().numpy()


def _layer_forward(model, l: int, a: np.ndarray) -> np.ndarray:
    """pykan's layer ``l`` in float64 on its inputs ``a`` (N, n_in): KANLayer, then the node affine terms."""
    torch, _ = modules()
    work = copy.deepcopy(model.act_fun[l]).double()
    with torch.no_grad():
        y = work(torch.as_tensor(a))[0].cpu().numpy()
    scale, shift = _node_affine(model, l)
    return y * scale + shift


def _propagate(model, x) -> tuple[list[np.ndarray], np.ndarray]:
    """pykan's forward in float64: every layer's inputs ``[(N, n_in) per layer]`` and the outputs (N, n_out)."""
    a = np.asarray(x, dtype=np.float64)
    inputs = []
    for l in range(len(model.act_fun)):
        inputs.append(a)
        a = _layer_forward(model, l, a)
    return inputs, a


def hidden_gain(model, x, imported: PykanImport) -> list[dict]:
    """How far one LSB of ``act`` at each hidden input moves the network's output, on inputs ``x``.

    The learner holds a hidden input h as u = s h + t in ``act`` (:func:`hidden_maps`), so one LSB
    of u is 1/s of h, and the output (also in ``act``) moves by |d out / d h| / s of its LSB:
    central differences of pykan's own forward (float64, step 1e-6 of the input's reach), the
    largest over the outputs. An error the projection or the rounding leaves in a hidden input
    reaches the output multiplied so.

    Args:
        model: the pykan KAN.
        x: (N, n_in) inputs.
        imported: :func:`from_pykan`'s result for ``model``.

    Returns:
        per hidden layer (l >= 1) ``{"layer", "rms": [per input], "max": [per input]}``: output
        LSB per act LSB of that input, RMS and max over ``x``.
    """
    inputs, _ = _propagate(model, x)
    out = []
    for l, m in enumerate(imported.grid["hidden_maps"], start=1):
        a, r = inputs[l], imported.grid["reach"][l]
        rms, mx = [], []
        for i, s in enumerate(m["scale"]):
            eps = 1e-6 * max(r["hi"][i] - r["lo"][i], 1e-12)
            hi, lo = a.copy(), a.copy()
            hi[:, i] += eps
            lo[:, i] -= eps
            for L in range(l, len(model.act_fun)):
                hi, lo = _layer_forward(model, L, hi), _layer_forward(model, L, lo)
            g = np.abs(hi - lo).max(axis=1) / (2 * eps * s)
            rms.append(float(np.sqrt(np.mean(g**2))))
            mx.append(float(g.max()))
        out.append({"layer": l, "rms": rms, "max": mx})
    return out


def reach(model, x) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer, the interval each input covers: its own pykan grid interval joined with the
    values pykan's forward gives it on ``x`` (N, n_in): ``[(lo (n_in,), hi (n_in,))]``.

    A hidden node's values leave its grid interval where pykan's grids are stale (after training
    without ``update_grid``, after ``prune_input``); pykan's edge there is its base function plus
    the spline's tails, which the import follows over this interval."""
    out = []
    for layer, a in zip(model.act_fun, _propagate(model, x)[0]):
        lo, hi = _layer_bounds(layer)
        out.append((np.minimum(lo, a.min(axis=0)), np.maximum(hi, a.max(axis=0))))
    return out


def hidden_maps(model, lo: float, hi: float, bounds=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer, the affine map u = s * x + t from pykan's values x of its inputs to the learner's
    (``[(s (n_in,), t (n_in,))]``): the identity for the network inputs; for a hidden layer, each
    input's interval onto the learner's grid range [lo, hi): its interval of ``bounds`` (as
    :func:`reach` gives them), by default its own pykan grid interval."""
    maps = [(np.ones(model.width_in[0]), np.zeros(model.width_in[0]))]
    for l, layer in enumerate(list(model.act_fun)[1:], start=1):
        a, b = _layer_bounds(layer) if bounds is None else bounds[l]
        s = np.where(b > a, (hi - lo) / np.where(b > a, b - a, 1.0), 1.0)
        t = np.where(b > a, lo - a * s, (lo + hi) / 2 - a)
        maps.append((s, t))
    return maps


def table_basis(xs: np.ndarray, spec: LearnerSpec, in_fmt: Fmt) -> np.ndarray:
    """The B-spline basis as the hardware reads it, at inputs ``xs`` (N,) of a layer whose input
    format is ``in_fmt``: each input rounded into ``in_fmt`` and clamped to the grid, its position
    in the cell truncated to ``basis_table_bits``, the k+1 active functions read from the basis
    table (:func:`onchip.model.basis.basis_table`; :mod:`onchip.model.kernels`, *locate*).

    Returns:
        (N, G + k) float64, the table's values (each exact in float64).
    """
    bval, _ = basis_table(spec.spline_order, spec.basis_table_bits, spec.formats.basis)
    pos_bits = in_fmt.frac_bits + spec.cell_exp
    span = spec.grid_size << pos_bits
    v = np.clip(quantize(xs, in_fmt) - int(in_fmt.quantize(spec.grid_range[0])), 0, span - 1)
    cell, addr = v >> pos_bits, (v >> (pos_bits - spec.basis_table_bits)) & ((1 << spec.basis_table_bits) - 1)
    out = np.zeros((len(xs), spec.grid_size + spec.spline_order))
    rows = np.arange(len(xs))[:, None]
    out[rows, cell[:, None] + np.arange(spec.spline_order + 1)] = bval[addr] * spec.formats.basis.lsb
    return out


def _node_affine(model, l: int) -> tuple[np.ndarray, np.ndarray]:
    get = lambda p: np.asarray(p.detach().cpu(), dtype=np.float64)  # noqa: E731
    node_scale, node_bias = get(model.node_scale[l]), get(model.node_bias[l])
    sub_scale, sub_bias = get(model.subnode_scale[l]), get(model.subnode_bias[l])
    return node_scale * sub_scale, node_scale * sub_bias + node_bias


def _check_inputs(x, n_in: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != n_in or len(x) == 0:
        raise ValueError(f"x must have shape (N, {n_in}) with N >= 1, got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x holds a NaN or an infinity")
    return x


def from_pykan(
    model,
    template: "LearnerSpec | str | None" = None,
    *,
    x=None,
    bits: int = 16,
    basis_table_bits: int | None = None,
    refine: int = REFINE,
    fit_to: str = "table",
    headroom_bits: int = 1,
    samples_per_cell: int = 64,
    learning_rate: float = 2.0**-4,
    schedule: str = "sequential",
    staleness: int = 4,
    name: str = "pykan",
) -> PykanImport:
    """Project a trained pykan KAN onto an onchip KAN (see the module docstring for the method).

    Args:
        model: a ``kan.MultKAN`` (``kan.KAN``).
        template: a KAN spec (object, preset name or TOML file) whose grid size, spline order, grid
            range and formats the learner takes (its widths must be the model's); None: derived
            from the model.
        x: the inputs the learner will see (N, n_in): every edge covers the range they reach
            (:func:`reach`), and the network's output error is measured on them; None: 4096 seeded
            uniform draws over the model's input grid (:func:`probe_inputs`).
        bits: width of the derived data formats (no template).
        basis_table_bits: address bits T of the derived spec's basis table (no template); None:
            the most the derived formats resolve, within :data:`TABLE_BITS`. A derived format
            that resolves fewer position bits than T is widened (``warnings`` says so).
        refine: derived grid: onchip cells per cell of the model's finest layer, at least.
        fit_to: ``"table"``: the coefficients are fitted to the basis as the hardware reads it
            (inputs rounded, the position truncated to the table's bits: :func:`table_basis`),
            which removes the truncation's bias; ``"spline"``: to the exact B-splines.
        headroom_bits: integer bits the derived ``coef`` and ``act`` keep to spare for training.
        samples_per_cell: fit samples per grid cell.
        learning_rate: copied into the derived spec (no template).
        schedule: copied into the derived spec (no template).
        staleness: copied into the derived spec (no template).
        name: copied into the derived spec (no template).

    Returns:
        :class:`PykanImport` (its ``output`` measured on ``x`` or the probe).

    Raises:
        ValueError: a model or template the conversion refuses (see the module docstring),
            naming the layer or edge; ``x`` of the wrong shape or not finite; ``refine`` below 1;
            a ``basis_table_bits`` the formats cannot resolve within 32 bits.
        onchip.extras.MissingExtra: torch or pykan is missing.
    """
    from ..spec import load_spec

    torch, kan = modules()
    _check_model(model, kan)
    if not (isinstance(refine, int) and refine >= 1):
        raise ValueError(f"refine must be an integer >= 1, got {refine!r}")
    if fit_to not in FIT_TO:
        raise ValueError(f"fit_to must be one of {', '.join(FIT_TO)}, got {fit_to!r}")
    widths = tuple(int(n) for n, _ in model.width)
    grids = _model_grids(model)
    seen = probe_inputs(model) if x is None else _check_inputs(x, widths[0])
    bounds = reach(model, seen)
    notes = []
    if template is not None:
        spec = load_spec(template)
        if spec.kind != "kan" or spec.widths != widths:
            raise ValueError(f"template: a KAN spec of widths {list(widths)} (the model's) is needed, got a "
                             f"{spec.kind} of widths {list(spec.widths)}")
        lo, hi = spec.grid_range
        size, k = spec.grid_size, spec.spline_order
    else:
        ks = {g["k"] for g in grids}
        k = ks.pop() if len(ks) == 1 else None
        if k not in ORDERS:
            raise ValueError(f"model: spline order k={[g['k'] for g in grids]}; onchip builds one k of "
                             f"{', '.join(map(str, ORDERS))} for every layer (give a template spec to project "
                             "onto one)")
        lo, hi, size = _grid_from_model(float(bounds[0][0].min()), float(bounds[0][1].max()),
                                        max(g["G"] for g in grids), refine)
    h = (hi - lo) / size
    knots = lo + h * np.arange(-k, size + k + 1)
    # two samples per table entry at least, so that a fit to the table sees every entry
    t_max = spec.basis_table_bits if template is not None else basis_table_bits or TABLE_BITS[1]
    n_samples = size * max(int(samples_per_cell), 2 ** (t_max + 1))
    xs = lo + (np.arange(n_samples) + 0.5) * (hi - lo) / n_samples
    basis = bspline_basis(xs, knots, k)  # (N, G+k)

    maps = hidden_maps(model, lo, hi, bounds)
    targets = []  # per layer (N, n_out, n_in): pykan's edges at xs, node affine terms folded in
    for l, layer in enumerate(model.act_fun):
        s_in, t_in = maps[l]
        phi = _edge_values(layer, (xs[:, None] - t_in[None, :]) / s_in[None, :], bounds[l], torch)
        scale, shift = _node_affine(model, l)
        if l + 1 < len(maps):  # a hidden node's output goes through the next layer's input map
            s_out, t_out = maps[l + 1]
            scale, shift = s_out * scale, s_out * shift + t_out
        targets.append(phi * scale[None, :, None] + (shift / phi.shape[2])[None, :, None])

    def fit(bases):  # least squares per edge: [(n_out, n_in, G+k)]
        out = []
        for b, target in zip(bases, targets):
            n_out, n_in = target.shape[1:]
            coef, *_ = np.linalg.lstsq(b, target.reshape(n_samples, -1), rcond=None)
            out.append(coef.reshape(size + k, n_out, n_in).transpose(1, 2, 0))
        return out

    fitted = fit([basis] * len(targets))
    flat = np.concatenate([c.reshape(-1) for c in fitted])
    if template is None:
        out_max = max(float(np.abs(c).max(axis=2).sum(axis=1).max()) for c in fitted)
        formats = _derived_formats(lo, hi, k, float(np.abs(flat).max()), out_max, len(fitted), max(widths[:-1]),
                                   bits, headroom_bits)
        formats, table_bits, widened = _fit_table(formats, len(fitted), int(round(math.log2(h))), basis_table_bits)
        notes += widened
        spec = LearnerSpec(kind="kan", widths=widths, grid_size=size, spline_order=k, grid_range=(lo, hi),
                           basis_table_bits=table_bits,
                           formats=formats, learning_rate=learning_rate, schedule=schedule,
                           staleness=staleness, init_scale=0.0, name=name)
    in_fmts = [spec.formats.input] + [spec.formats.act] * (len(fitted) - 1)
    if fit_to == "table":  # refit to the basis as the hardware reads it (its truncation included)
        fitted = fit([table_basis(xs, spec, f) for f in in_fmts])
        flat = np.concatenate([c.reshape(-1) for c in fitted])
    c = spec.formats.coef
    if flat.size and (flat.min() < c.min_value or flat.max() > c.max_value):
        where = int(np.argmax(np.abs(flat)))
        raise ValueError(f"{'template: ' if template is not None else ''}formats.coef ({c}) holds "
                         f"[{c.min_value}, {c.max_value}], not the fitted coefficient {flat[where]:.6g}")
    theta = quantize(flat, c)

    act_lsb = spec.formats.act.lsb
    edges, offset = [], 0
    for l, (coef, target) in enumerate(zip(fitted, targets)):
        n_out, n_in = coef.shape[:2]
        table = table_basis(xs, spec, in_fmts[l])
        for j in range(n_out):
            for i in range(n_in):
                err = basis @ coef[j, i] - target[:, j, i]
                q = table @ (theta[offset : offset + size + k] * c.lsb) - target[:, j, i]
                offset += size + k
                mx, rms = float(np.abs(err).max()), float(np.sqrt(np.mean(err**2)))
                qmx, qrms = float(np.abs(q).max()), float(np.sqrt(np.mean(q**2)))
                edges.append({"layer": l, "i": i, "j": j, "max_error": mx, "rms_error": rms,
                              "max_error_lsb": mx / act_lsb, "rms_error_lsb": rms / act_lsb,
                              "max_error_quantized": qmx, "rms_error_quantized": qrms,
                              "max_error_quantized_lsb": qmx / act_lsb, "rms_error_quantized_lsb": qrms / act_lsb})
    grid = {"source": "template" if template is not None else "model", "lo": lo, "hi": hi, "grid_size": size,
            "spline_order": k, "cell_width": h, "basis_table_bits": spec.basis_table_bits, "model_grids": grids,
            "reach": [{"lo": a.tolist(), "hi": b.tolist()} for a, b in bounds],
            "reach_source": "probe" if x is None else "data",
            "hidden_maps": [{"scale": sc.tolist(), "shift": sh.tolist()} for sc, sh in maps[1:]]}
    imported = PykanImport(spec, theta, flat, grid, tuple(edges), None, ())
    output = output_error(model, imported, seen)
    output["source"] = "grid" if x is None else "data"
    imported = dataclasses.replace(imported, output=output)
    return dataclasses.replace(imported, warnings=tuple(_reach_notes(model, grid, output) + notes
                                                        + _accuracy_notes(model, imported, seen)))


def _accuracy_notes(model, imported: PykanImport, seen: np.ndarray) -> list[str]:
    """One line when the output error exceeds :data:`WARN_RMS_LSB`: the edge the projection fits
    worst, and the hidden input whose act LSB the network multiplies most (:func:`hidden_gain`)."""
    o, spec = imported.output, imported.spec
    if o["rms_error_lsb"] <= WARN_RMS_LSB:
        return []
    worst = max(imported.edges, key=lambda e: e["rms_error_quantized_lsb"])
    line = (f"output {o['rms_error_lsb']:.3g} LSB RMS (max {o['max_error_lsb']:.3g}) of act from pykan's on the "
            f"{o['samples']} {'data' if imported.grid['reach_source'] == 'data' else 'probe'} samples, more than "
            f"{WARN_RMS_LSB:g}: edge (layer {worst['layer']}, i={worst['i']}, j={worst['j']}) is "
            f"{worst['rms_error_quantized_lsb']:.3g} LSB RMS from pykan's over its range (pykan's spline bends at "
            f"its own knots, which onchip's G = {spec.grid_size} uniform cells do not hold)")
    gains = [(mx, g["layer"], i) for g in hidden_gain(model, seen, imported) for i, mx in enumerate(g["max"])]
    if gains:
        mx, l, i = max(gains)
        line += f"; one act LSB at layer {l} input {i} moves the output by up to {mx:.3g} LSB"
    finer = "a larger refine (finer cells)" if imported.grid["source"] == "model" else "a template of finer cells"
    return [line + f"; {finer} lowers the projection's part (sweeps/pykan_import/README.md)"]


def _reach_notes(model, grid: dict, output: dict) -> list[str]:
    """One line each: samples that leave a pykan grid interval (the edges extended over them), and
    samples outside the learner's grid range (clamped)."""
    notes = []
    n, source = output["samples"], "data" if grid["reach_source"] == "data" else "probe"
    if output["outside_model_grid_fraction"] > 0:
        # the input whose reach exceeds its pykan grid interval most, relative to the interval
        worst, where = -1.0, None
        for l, (layer, r) in enumerate(zip(model.act_fun, grid["reach"])):
            a, b = _layer_bounds(layer)
            for i in range(len(a)):
                over = (max(0.0, a[i] - r["lo"][i]) + max(0.0, r["hi"][i] - b[i])) / max(b[i] - a[i], 1e-12)
                if over > worst:
                    worst, where = over, (l, i, r["lo"][i], r["hi"][i], a[i], b[i])
        l, i, rlo, rhi, a, b = where
        notes.append(f"{output['outside_model_grid_fraction']:.1%} of the {n} {source} samples leave a pykan grid "
                     f"interval (most: layer {l} input {i} reaches [{rlo:.4g}, {rhi:.4g}], its grid [{a:.4g}, "
                     f"{b:.4g}]); the edges follow pykan's function over the range reached"
                     + ("" if source == "data" else "; give the inputs (x, --data) to cover their range"))
    if output["clamped_fraction"] > 0:
        notes.append(f"{output['clamped_fraction']:.1%} of the {n} {source} samples lie outside the learner's grid "
                     f"[{grid['lo']:g}, {grid['hi']:g}) and are clamped to it")
    return notes


def probe_inputs(model, n: int = 4096, seed: int = 0) -> np.ndarray:
    """``n`` seeded uniform draws over the model's input grid (each input within its own grid
    interval of the first layer), (n, n_in) float64. Uniform draws rather than a regular grid, whose
    points could fall on the basis table's entries only."""
    lo, hi = _layer_bounds(model.act_fun[0])
    return np.random.default_rng(seed).uniform(lo, hi, (n, len(lo)))


def _forward(model, x) -> tuple[np.ndarray, np.ndarray]:
    # pykan's outputs, and per sample whether a layer's input left its own grid interval
    inputs, out = _propagate(model, x)
    outside = np.zeros(len(out), bool)
    for layer, a in zip(model.act_fun, inputs):
        lo, hi = _layer_bounds(layer)
        outside |= np.any((a < lo) | (a > hi), axis=1)
    return out, outside


def pykan_outputs(model, x) -> np.ndarray:
    """pykan's outputs of ``model`` on ``x`` (N, n_in), in float64: each layer's KANLayer forward
    (on a float64 copy), then the subnode and node affine terms, as ``MultKAN.forward`` computes
    them for the models :func:`from_pykan` accepts (no symbolic edges, no multiplication nodes).

    Returns:
        (N, n_out) float64.
    """
    return _forward(model, x)[0]


def output_error(model, imported: PykanImport, x=None) -> dict:
    """The imported learner's outputs against pykan's, on ``x`` or :func:`probe_inputs`.

    Returns:
        ``{"source": "data" | "grid", "samples", "max_error", "rms_error", "max_error_lsb",
        "rms_error_lsb"`` (the golden model; LSB of ``act``), ``"float_max_error",
        "float_rms_error"`` (the fitted spline in float: the projection alone),
        ``"clamped_fraction"`` (samples with an input outside the learner's grid range),
        ``"outside_model_grid_fraction"`` (samples where some layer's input leaves its own pykan
        grid interval; :func:`from_pykan` extends the edges over the range its ``x`` reaches)``}``.

    Raises:
        ValueError: ``x`` not of shape (N, n_in).
    """
    from ..model import GoldenLearner
    from ..model.float_twin import FloatTwin

    spec = imported.spec
    source = "grid" if x is None else "data"
    x = probe_inputs(model) if x is None else np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != spec.n_in:
        raise ValueError(f"x must have shape (N, {spec.n_in}), got {x.shape}")
    want, outside = _forward(model, x)
    golden = GoldenLearner(spec, imported.theta)
    got = golden.dequantize_outputs(golden.predict(golden.quantize_inputs(x)))
    fl = FloatTwin(spec, imported.coef).predict(x)
    lo, hi = spec.grid_range
    lsb = spec.formats.act.lsb
    err, ferr = got - want, fl - want
    return {"source": source, "samples": int(len(x)),
            "max_error": float(np.abs(err).max()), "rms_error": float(np.sqrt(np.mean(err**2))),
            "max_error_lsb": float(np.abs(err).max() / lsb), "rms_error_lsb": float(np.sqrt(np.mean(err**2)) / lsb),
            "float_max_error": float(np.abs(ferr).max()), "float_rms_error": float(np.sqrt(np.mean(ferr**2))),
            "clamped_fraction": float(np.mean(np.any((x < lo) | (x >= hi), axis=1))),
            "outside_model_grid_fraction": float(np.mean(outside))}


def _check_checkpoint_files(prefix: str) -> None:
    """Read the two files pykan's ``loadckpt`` reads as it does (``yaml.safe_load``, ``torch.load``),
    so that a failure names the file and its cause: ValueError."""
    import torch
    import yaml

    config, state = f"{prefix}_config.yml", f"{prefix}_state"
    if not Path(config).is_file():
        raise ValueError(f"{config}: no such file (a pykan checkpoint is <prefix>_config.yml beside <prefix>_state)")
    text = Path(config).read_text(errors="replace")
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = (getattr(exc, "problem", None) or str(exc)).splitlines()[0]
        if not (isinstance(exc, yaml.constructor.ConstructorError) and "python/" in problem):
            where = f"line {mark.line + 1}: " if mark is not None else ""
            raise ValueError(f"{config}: not valid YAML ({where}{problem})") from None
        lines = text.splitlines()
        key = lines[mark.line].split(":")[0].strip() if mark is not None and mark.line < len(lines) else "?"
        # saveckpt after prune_input writes the base function as an object: the one cause we know
        hint = ("; pykan's prune_input leaves base_fun_name so. Save again after `del model.base_fun_name; "
                "model.base_fun_name = 'silu'` (the base function's name)" if key == "base_fun_name" else "")
        raise ValueError(f"{config}: pykan's own loadckpt cannot read it: {key!r} holds a Python object, not a "
                         f"name ({problem}){hint}") from None
    if not Path(state).is_file():
        raise ValueError(f"{state}: missing (a pykan checkpoint is <prefix>_config.yml beside <prefix>_state, "
                         "both written by model.saveckpt(prefix))")
    try:
        torch.load(state, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, KeyError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise ValueError(f"{state}: not a torch checkpoint (the parameters saveckpt writes with torch.save; "
                         f"torch.load: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                         ) from None


def load_pykan(path: str | Path):
    """Load a pykan model saved with ``model.saveckpt(prefix)``.

    ``path`` is the checkpoint's prefix, its ``<prefix>_config.yml``, or a folder of such
    checkpoints (pykan's ``ckpt_path``; the one saved last is taken). ``saveckpt`` is the one way
    pykan 0.2.8 saves a model: ``torch.save`` of a KAN fails inside pykan (its symbolic layers
    hold lambdas, which pickle cannot save), and a ``state_dict`` lacks the architecture.

    Raises:
        ValueError: naming the path: no checkpoint there, or one that pykan's own ``loadckpt``
            cannot load, and why: the file at fault (a config that is not valid YAML, or that holds a
            Python object where pykan writes a name, as ``saveckpt`` after ``prune_input`` writes its
            base function; a ``_state`` that is missing or not a torch file).
        onchip.extras.MissingExtra: torch or pykan is missing.
    """
    _, kan = modules()
    p = Path(path)
    prefix = None
    if p.is_dir():
        configs = sorted(p.glob("*_config.yml"), key=lambda c: c.stat().st_mtime)
        if not configs:
            raise ValueError(f"{path}: a folder without pykan checkpoints (*_config.yml)")
        prefix = str(configs[-1])[: -len("_config.yml")]
    elif p.name.endswith("_config.yml"):
        prefix = str(p)[: -len("_config.yml")]
    elif Path(f"{p}_config.yml").is_file():
        prefix = str(p)
    if prefix is None:
        raise ValueError(f"{path}: not a pykan checkpoint (<prefix>_config.yml beside <prefix>_state); save the "
                         "model with model.saveckpt(prefix) (pykan cannot torch.save a KAN)")
    config = f"{prefix}_config.yml"
    _check_checkpoint_files(prefix)
    try:
        model = kan.MultKAN.loadckpt(prefix)
    except (OSError, RuntimeError, KeyError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        what = f"missing {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise ValueError(f"{config}: pykan's own loadckpt cannot load this checkpoint ({type(exc).__name__}: "
                         f"{what})") from None
    if not isinstance(model, kan.MultKAN):
        raise ValueError(f"{config}: holds a {type(model).__name__}, not a pykan KAN (kan.MultKAN)")
    return model
