"""pykan front end: a trained pykan KAN -> KAN LearnerSpec + raw parameters, by projection.

pykan's ``MultKAN`` (pykan 0.2.8) computes, for edge (i -> j) of layer l,
``phi(x) = mask * (scale_base * base_fun(x) + scale_sp * spline(x))`` with a B-spline on a grid that
``update_grid`` makes non-uniform (per input), and for node j
``x_j = node_scale * (subnode_scale * sum_i phi_ji(x_i) + subnode_bias) + node_bias``.
An onchip edge is a uniform B-spline of order k on G cells of power-of-two width h over one grid
range [lo, hi) shared by every layer, constant outside it (the input is clamped). So the
conversion is a projection:

1. **Grid**: from a ``template`` spec (G, k, grid range, formats), or from the model: the range
   covers the first layer's grids ``[grid[k], grid[-k-1]]`` (the network inputs), h is the largest
   power of two not above (range / G) for the largest G of the model's layers, and G the number of
   such cells from a multiple of h at or below the lowest grid point to the highest (so the cells
   are no wider than the model's average cell). A hidden node's values are mapped affinely from
   its pykan grid interval (of the layer it feeds) onto that range: the map scales and shifts the
   node's output (folded into its edges as below) and the next layer's edges are fitted in the
   mapped variable, so a narrow hidden range keeps every cell (:func:`hidden_maps`).
2. **Fit**: each edge's whole activation (base function included, masks applied), sampled densely
   (``samples_per_cell`` midpoints per cell) over [lo, hi), is fitted by least squares onto the
   G + k B-splines of onchip's grid, in float64. Each input is clamped to its own pykan grid
   interval: beyond it pykan's spline vanishes and leaves the base function alone, a region the
   model was not fitted on; the import continues the edge flat there, as onchip's edges are flat
   outside their grid (and the fit sees no jump).
3. **Fold** the node affine terms: node j's outputs scale by a_j = node_scale * subnode_scale, which
   multiplies every coefficient of its edges, and shift by b_j = node_scale * subnode_bias +
   node_bias, which adds b_j / n_in to every coefficient of each of its edges (the B-spline basis
   sums to one on the grid). For a hidden node the map of step 1 composes with these
   (s * (a_j y + b_j) + t).
4. **Formats** from a template, or ``bits``-bit formats derived from the ranges: ``input`` holds
   the grid range, ``act`` the grid range (deeper networks) and the largest output the
   coefficients allow, ``coef`` the largest coefficient, each with ``headroom_bits`` integer bits
   to spare for on-chip training; ``acc`` keeps every product exact. Coefficients round into
   ``coef`` (RND_CONV); one a template's ``coef`` cannot hold is refused.

The report (:class:`PykanImport`) gives, per edge, the fit's max and RMS error (function units
and LSB of ``act``) before quantization and after it (coefficients rounded, the basis read from
onchip's table as the hardware does), and the network's output error on the user's data or a
dense grid. A uniform pykan grid equal to onchip's (same G, k, power-of-two cell width) with the
base function off converts with zero error before quantization: the spline space is the same.

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


@dataclass(frozen=True)
class PykanImport:
    """A pykan KAN as an onchip learner, and how exact the projection is.

    Attributes:
        spec: the KAN LearnerSpec.
        theta: raw initial parameters, int64 (P,), ``coef`` format, in
            :func:`onchip.model.golden.layout` order (coef[j, i, :] of each layer).
        coef: the fitted coefficients before quantization, float64 (P,), same order.
        grid: ``{"source": "model" | "template", "lo", "hi", "grid_size", "spline_order",
            "cell_width", "model_grids": [per layer {"G", "k", "lo", "hi", "uniform"}],
            "hidden_maps": [per hidden layer {"scale", "shift"}]}`` (:func:`hidden_maps`).
        edges: per edge ``{"layer", "i", "j", "max_error", "rms_error", "max_error_lsb",
            "rms_error_lsb", "max_error_quantized", "rms_error_quantized",
            "max_error_quantized_lsb", "rms_error_quantized_lsb"}``: the fitted edge (after
            folding) against pykan's over the grid range, in function units and LSB of ``act``.
        output: the network's outputs against pykan's (:func:`output_error`), or None when not
            measured.
    """

    spec: LearnerSpec
    theta: np.ndarray
    coef: np.ndarray
    grid: dict
    edges: tuple[dict, ...]
    output: dict | None


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


def _grid_from_model(grids: list[dict]) -> tuple[float, float, int]:
    # the network inputs' grids set the range (hidden inputs are mapped onto it); the finest
    # layer sets the cell width
    lo_src, hi_src = grids[0]["lo"], grids[0]["hi"]
    g_model = max(g["G"] for g in grids)
    h = 2.0 ** math.floor(math.log2((hi_src - lo_src) / g_model))
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


def _edge_values(layer, x: np.ndarray, torch) -> np.ndarray:
    """pykan's edge activations phi_ji of one KANLayer at inputs ``x`` (N, n_in), each clamped to its
    own grid interval, in float64: (N, n_out, n_in)."""
    lo, hi = _layer_bounds(layer)
    work = copy.deepcopy(layer).double()
    with torch.no_grad():
        _, _, postacts, _ = work(torch.as_tensor(np.clip(x, lo[None, :], hi[None, :]), dtype=torch.float64))
    return postacts.cpu().numpy()


def hidden_maps(model, lo: float, hi: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer, the affine map u = s * x + t from pykan's values x of its inputs to the learner's
    (``[(s (n_in,), t (n_in,))]``): the identity for the network inputs; for a hidden layer, each
    input's own pykan grid interval onto the learner's grid range [lo, hi)."""
    maps = [(np.ones(model.width_in[0]), np.zeros(model.width_in[0]))]
    for layer in list(model.act_fun)[1:]:
        a, b = _layer_bounds(layer)
        s = np.where(b > a, (hi - lo) / np.where(b > a, b - a, 1.0), 1.0)
        t = np.where(b > a, lo - a * s, (lo + hi) / 2 - a)
        maps.append((s, t))
    return maps


def _table_edge(theta_edge: np.ndarray, xs: np.ndarray, spec: LearnerSpec, in_fmt: Fmt) -> np.ndarray:
    """One edge as the hardware evaluates it: input rounded into ``in_fmt``, clamped to the grid,
    k+1 coefficients times the basis table's entry of the position (before the sum rounds into act)."""
    f = spec.formats
    bval, _ = basis_table(spec.spline_order, spec.basis_table_bits, f.basis)
    pos_bits = in_fmt.frac_bits + spec.cell_exp
    span = spec.grid_size << pos_bits
    v = np.clip(quantize(xs, in_fmt) - int(in_fmt.quantize(spec.grid_range[0])), 0, span - 1)
    cell, addr = v >> pos_bits, (v >> (pos_bits - spec.basis_table_bits)) & ((1 << spec.basis_table_bits) - 1)
    terms = theta_edge[cell[:, None] + np.arange(spec.spline_order + 1)] * bval[addr]
    return np.ldexp(terms.sum(axis=1).astype(np.float64), -(f.coef.frac_bits + f.basis.frac_bits))


def _node_affine(model, l: int) -> tuple[np.ndarray, np.ndarray]:
    get = lambda p: np.asarray(p.detach().cpu(), dtype=np.float64)  # noqa: E731
    node_scale, node_bias = get(model.node_scale[l]), get(model.node_bias[l])
    sub_scale, sub_bias = get(model.subnode_scale[l]), get(model.subnode_bias[l])
    return node_scale * sub_scale, node_scale * sub_bias + node_bias


def from_pykan(
    model,
    template: "LearnerSpec | str | None" = None,
    *,
    x=None,
    bits: int = 16,
    basis_table_bits: int = 6,
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
        x: inputs (N, n_in) on which to measure the network's output error; None: 4096 seeded
            uniform draws over the model's input grid (:func:`probe_inputs`).
        bits: width of the derived data formats (no template).
        basis_table_bits: address bits T of the derived spec's basis table (no template).
        headroom_bits: integer bits the derived ``coef`` and ``act`` keep to spare for training.
        samples_per_cell: fit samples per grid cell.
        learning_rate: copied into the derived spec (no template).
        schedule: copied into the derived spec (no template).
        staleness: copied into the derived spec (no template).
        name: copied into the derived spec (no template).

    Returns:
        :class:`PykanImport` (its ``output`` measured on ``x`` or the dense grid).

    Raises:
        ValueError: a model or template the conversion refuses (see the module docstring),
            naming the layer or edge, or ``x`` of the wrong shape.
        onchip.extras.MissingExtra: torch or pykan is missing.
    """
    from ..spec import load_spec

    torch, kan = modules()
    _check_model(model, kan)
    widths = tuple(int(n) for n, _ in model.width)
    grids = _model_grids(model)
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
        lo, hi, size = _grid_from_model(grids)
    h = (hi - lo) / size
    knots = lo + h * np.arange(-k, size + k + 1)
    n_samples = size * int(samples_per_cell)
    xs = lo + (np.arange(n_samples) + 0.5) * (hi - lo) / n_samples
    basis = bspline_basis(xs, knots, k)  # (N, G+k)

    maps = hidden_maps(model, lo, hi)
    fitted, targets = [], []
    for l, layer in enumerate(model.act_fun):
        s_in, t_in = maps[l]
        phi = _edge_values(layer, (xs[:, None] - t_in[None, :]) / s_in[None, :], torch)  # (N, n_out, n_in)
        scale, shift = _node_affine(model, l)
        if l + 1 < len(maps):  # a hidden node's output goes through the next layer's input map
            s_out, t_out = maps[l + 1]
            scale, shift = s_out * scale, s_out * shift + t_out
        n_out, n_in = phi.shape[1], phi.shape[2]
        target = phi * scale[None, :, None] + (shift / n_in)[None, :, None]
        coef, *_ = np.linalg.lstsq(basis, phi.reshape(n_samples, -1), rcond=None)
        coef = coef.reshape(size + k, n_out, n_in).transpose(1, 2, 0)  # (n_out, n_in, G+k)
        coef = coef * scale[:, None, None] + (shift / n_in)[:, None, None]  # fold the node affine terms
        fitted.append(coef)
        targets.append(target)
    flat = np.concatenate([c.reshape(-1) for c in fitted])

    if template is None:
        out_max = max(float(np.abs(c).max(axis=2).sum(axis=1).max()) for c in fitted)
        formats = _derived_formats(lo, hi, k, float(np.abs(flat).max()), out_max, len(fitted), max(widths[:-1]),
                                   bits, headroom_bits)
        spec = LearnerSpec(kind="kan", widths=widths, grid_size=size, spline_order=k, grid_range=(lo, hi),
                           basis_table_bits=basis_table_bits,
                           formats=formats, learning_rate=learning_rate, schedule=schedule,
                           staleness=staleness, init_scale=0.0, name=name)
    c = spec.formats.coef
    if flat.size and (flat.min() < c.min_value or flat.max() > c.max_value):
        where = int(np.argmax(np.abs(flat)))
        raise ValueError(f"template: formats.coef ({c}) holds [{c.min_value}, {c.max_value}], not the fitted "
                         f"coefficient {flat[where]:.6g}")
    theta = quantize(flat, c)

    act_lsb = spec.formats.act.lsb
    in_fmts = [spec.formats.input] + [spec.formats.act] * (len(fitted) - 1)
    edges, offset = [], 0
    for l, (coef, target) in enumerate(zip(fitted, targets)):
        n_out, n_in = coef.shape[:2]
        for j in range(n_out):
            for i in range(n_in):
                err = basis @ coef[j, i] - target[:, j, i]
                q = _table_edge(theta[offset : offset + size + k], xs, spec, in_fmts[l]) - target[:, j, i]
                offset += size + k
                mx, rms = float(np.abs(err).max()), float(np.sqrt(np.mean(err**2)))
                qmx, qrms = float(np.abs(q).max()), float(np.sqrt(np.mean(q**2)))
                edges.append({"layer": l, "i": i, "j": j, "max_error": mx, "rms_error": rms,
                              "max_error_lsb": mx / act_lsb, "rms_error_lsb": rms / act_lsb,
                              "max_error_quantized": qmx, "rms_error_quantized": qrms,
                              "max_error_quantized_lsb": qmx / act_lsb, "rms_error_quantized_lsb": qrms / act_lsb})
    grid = {"source": "template" if template is not None else "model", "lo": lo, "hi": hi, "grid_size": size,
            "spline_order": k, "cell_width": h, "model_grids": grids,
            "hidden_maps": [{"scale": sc.tolist(), "shift": sh.tolist()} for sc, sh in maps[1:]]}
    imported = PykanImport(spec, theta, flat, grid, tuple(edges), None)
    return dataclasses.replace(imported, output=output_error(model, imported, x))


def probe_inputs(model, n: int = 4096, seed: int = 0) -> np.ndarray:
    """``n`` seeded uniform draws over the model's input grid (each input within its own grid
    interval of the first layer), (n, n_in) float64. Uniform draws rather than a regular grid, whose
    points could fall on the basis table's entries only."""
    lo, hi = _layer_bounds(model.act_fun[0])
    return np.random.default_rng(seed).uniform(lo, hi, (n, len(lo)))


def _forward(model, x) -> tuple[np.ndarray, np.ndarray]:
    # pykan's forward in float64, and per sample whether a layer's input left its own grid interval
    torch, _ = modules()
    a = np.asarray(x, dtype=np.float64)
    outside = np.zeros(len(a), bool)
    for l, layer in enumerate(model.act_fun):
        lo, hi = _layer_bounds(layer)
        outside |= np.any((a < lo) | (a > hi), axis=1)
        work = copy.deepcopy(layer).double()
        with torch.no_grad():
            y = work(torch.as_tensor(a))[0].cpu().numpy()
        scale, shift = _node_affine(model, l)
        a = y * scale + shift
    return a, outside


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
        grid interval, where the import continues the edge flat)``}``.

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


def load_pykan(path: str | Path):
    """Load a saved pykan model.

    ``path`` is a checkpoint written by ``model.saveckpt(prefix)`` (the prefix, or its
    ``<prefix>_config.yml``), a folder of such checkpoints (pykan's ``ckpt_path``; the one saved
    last is taken), or a file written by ``torch.save(model, path)`` (unpickled: load only files
    you trust). pykan 0.2.8's symbolic layers hold lambdas that the standard pickle cannot save, so
    ``torch.save`` of a whole model needs ``pickle_module=dill``; ``saveckpt`` always works.

    Raises:
        ValueError: naming the path: no checkpoint there, or not a pykan model.
        onchip.extras.MissingExtra: torch or pykan is missing.
    """
    torch, kan = modules()
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
    if prefix is not None:
        model = kan.MultKAN.loadckpt(prefix)
    elif p.is_file():
        try:
            model = torch.load(p, weights_only=False, map_location="cpu")
        except (RuntimeError, ValueError, OSError, EOFError, AttributeError, ImportError, pickle.UnpicklingError) as exc:
            raise ValueError(f"{path}: not a torch.save'd model ({str(exc).splitlines()[0]}); save a pykan model "
                             "with model.saveckpt(prefix)") from None
    else:
        raise ValueError(f"{path}: neither a pykan checkpoint (<prefix>_config.yml) nor a saved file")
    if not isinstance(model, kan.MultKAN):
        what = "a state_dict, which lacks the architecture" if isinstance(model, dict) else f"a {type(model).__name__}"
        raise ValueError(f"{path}: holds {what}, not a pykan KAN (kan.MultKAN); save it with model.saveckpt(prefix)")
    return model
