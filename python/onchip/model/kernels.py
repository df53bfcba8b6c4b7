"""Per-sample integer kernels of the golden models (numba-compiled).

These functions *define* what every backend computes. All values are raw
integers; a format is a :class:`onchip.fixed.FmtCode` (``Fmt.code``, read by
field name), and ``requant(raw, F_from, *fmt)`` rounds and then saturates or
wraps into it, exactly for every shift ``F_from - F`` (right
shifts of 64 bits and more, left shifts past int64: formats with |F| up to 96
reach both, e.g. act -> grad or a product -> acc). Rounding points, in order:

Forward, per layer (input u in the input format for layer 0, else ``act``):

* KAN, in three named steps (:func:`locate`, :func:`edge_base`, :func:`spline_dot`):
  *locate*: u is clamped to the grid [lo, hi - lsb]; the offset v = u - lo has
  ``P = F_u + e`` position bits (cell width h = 2**e): cell c = v >> P,
  table address a = top T bits of the position. b = BVAL[a], d = BDER[a]
  (``basis`` format). *Edge base*: the flat index of coef[j, i, c], the first
  of the k+1 coefficients the edge reads. *Spline dot*: each product
  coef[j, i, c+m] * b[m] is converted into ``acc``; the sum over i, m wraps in
  ``acc`` (order-free because ``acc`` overflow is WRAP); out[j] = requant(sum -> ``act``).
* MLP: z[j] = requant(acc(bias[j]) + sum_i acc(W[j, i] * a[i]) -> ``act``);
  hidden layers apply ReLU, the output layer is linear.
* The last layer's sum is converted into the output format ``y`` (``formats.output``, or
  ``act`` when it is not set) instead of ``act``: the predictions y_hat are in ``y``.

Output error, by the sample's kind (:class:`onchip.model.stream.SampleKind`, one int per sample):

* TARGET (0): e = requant(y_hat - y -> ``grad``) (gradient of 1/2 (y_hat - y)^2), y and y_hat
  in ``y``, their difference exact before its one rounding;
* ERROR (2): e = y, the host's dL/dy_hat already raw in ``grad`` (no rounding);
* PREDICT (1): e = 0, so every delta and every back-propagated error is 0 (requant(0) = 0).

Backward, last layer first, with the parameters the forward pass read:

* update terms, learning rate eta = 2**-s as a shift:
  KAN delta[j, i, m] = requant(e[j] * b[i, m] * 2**-s -> ``coef``) for the
  k+1 active coefficients only (the sparse update);
  MLP delta W[j, i] = requant(e[j] * a[i] * 2**-s -> ``coef``),
  delta bias[j] = requant(e[j] * 2**-s -> ``coef``).
* error to the previous layer:
  KAN dphi[j, i] = requant(sum_m acc(coef * d[m]) * 2**-e -> ``grad``),
  e_prev[i] = requant(sum_j acc(e[j] * dphi[j, i]) -> ``grad``), and 0 when
  u[i] was clamped (the edge is flat outside the grid);
  MLP e_prev[i] = requant(sum_j acc(W[j, i] * e[j]) -> ``grad``), and 0 when
  the ReLU output a[i] <= 0.

A step does not change the parameters: it returns the prediction and the
update as (address, delta) pairs into the flat parameter vector; the stream
driver commits theta[a] = overflow(theta[a] - delta -> ``coef``) (see
:mod:`onchip.model.stream`).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ..fixed import FmtCode, overflow, requant


class KanConfig(NamedTuple):
    """Everything a KAN step needs besides the parameters (built by :mod:`onchip.model.golden`)."""

    widths: np.ndarray  # (L+1,) int64
    max_width: int  # max(widths): the scratch rows' length
    update_size: int  # entries of one sample's update: sum of n_out*n_in*(k+1)
    offsets: np.ndarray  # (L,) start of each layer's coefficients in theta
    lo_raw: np.ndarray  # (L,) grid start in the raw units of each layer's input
    pos_bits: np.ndarray  # (L,) P: bits of position inside a cell, per layer input
    in_frac: np.ndarray  # (L,) fractional bits of each layer's input
    grid_size: int
    n_coef: int
    table_bits: int
    cell_exp: int
    lr_shift: int
    bval: np.ndarray  # (2**T, k+1) basis values, raw
    bder: np.ndarray  # (2**T, k+1) basis derivatives d/dt, raw
    f_coef: FmtCode
    f_basis: FmtCode
    f_act: FmtCode
    f_grad: FmtCode
    f_acc: FmtCode
    f_out: FmtCode  # the last layer's outputs and the targets: formats.y


class MlpConfig(NamedTuple):
    """Everything an MLP step needs besides the parameters."""

    widths: np.ndarray  # (L+1,)
    max_width: int  # max(widths)
    update_size: int  # entries of one sample's update: every parameter
    offsets: np.ndarray  # (L,) start of layer l: W (n_out*n_in, row-major) then bias (n_out)
    in_frac: np.ndarray  # (L,)
    lr_shift: int
    f_coef: FmtCode
    f_act: FmtCode
    f_grad: FmtCode
    f_acc: FmtCode
    f_out: FmtCode  # the last layer's outputs and the targets: formats.y


# Inlining: the helpers that loop or index arrays are inlined at numba's IR level
# (inline="always"), so that the compile-time constants of a specialised runner
# (onchip.model.specialise) reach them; the small scalar ones are plain calls that LLVM inlines and
# folds. Inlining those at the IR level too made every runner's compile take twice as long.
@numba.njit(cache=True, inline="always")
def _to(raw, frac, fmt):
    """Round and overflow ``raw`` (``frac`` fractional bits) into ``fmt`` (a FmtCode)."""
    return requant(raw, frac, fmt.width, fmt.frac, fmt.signed, fmt.quant, fmt.overflow)


@numba.njit(cache=True)
def _wrap(raw, fmt):
    """Overflow ``raw`` into ``fmt``'s width with its overflow mode (no rounding)."""
    return overflow(raw, fmt.width, fmt.signed, fmt.overflow)


@numba.njit(cache=True)
def locate(u, lo, pos_bits, grid_size, table_bits):
    """Locate: clamp input ``u`` to the grid and split its offset into cell and table address.

    Returns ``(clamped, cell, table_addr)``: whether ``u`` lay outside [lo, hi), the cell
    index c in [0, G), and the top ``table_bits`` bits of the position inside the cell.
    """
    span = np.int64(grid_size) << pos_bits
    v = u - lo
    clamped = (v < 0) | (v >= span)
    v = min(max(v, 0), span - 1)
    return clamped, v >> pos_bits, (v >> (pos_bits - table_bits)) & ((np.int64(1) << table_bits) - 1)


@numba.njit(cache=True)
def edge_base(cfg, layer, j, i, cell):
    """Edge base: flat index in theta of the first of the k+1 coefficients edge (j, i) of
    ``layer`` reads when its input lies in ``cell``."""
    n_in = cfg.widths[layer]
    return cfg.offsets[layer] + (j * n_in + i) * cfg.n_coef + cell


@numba.njit(cache=True, inline="always")
def spline_dot(theta, base, table, row, cfg):
    """Spline dot: sum over m of acc(coef[base + m] * table[row, m]), wrapping in ``acc``
    (not yet overflowed: the caller wraps the whole sum once, order-free)."""
    f_prod = cfg.f_coef.frac + cfg.f_basis.frac
    s = np.int64(0)
    for m in range(table.shape[1]):
        s += _to(theta[base + m] * table[row, m], f_prod, cfg.f_acc)
    return s


@numba.njit(cache=True, inline="always")
def output_error(err, act_out, ys, kinds, n_sample, f_out, f_grad):
    """The output error ``err`` (n_out,) of sample ``n_sample`` by its kind (see the module doc)."""
    kind = kinds[n_sample]
    for j in range(len(act_out)):
        if kind == 0:
            err[j] = _to(act_out[j] - ys[n_sample, j], f_out.frac, f_grad)
        elif kind == 2:
            err[j] = ys[n_sample, j]
        else:
            err[j] = 0


@numba.njit(cache=True, inline="always")
def kan_step(theta, xs, ys, kinds, n_sample, cfg, preds, addr, delta, work):
    """Sample ``n_sample`` of ``xs``/``ys`` (kind ``kinds[n_sample]``) through a KAN: fills ``preds[n_sample]`` and the update ``addr``/``delta``
    (sum over layers of n_out*n_in*(k+1) entries). ``theta`` is not modified;
    ``work`` is int64 scratch of shape (4L+3, max width)."""
    widths = cfg.widths
    n_layers = len(widths) - 1
    k1 = cfg.bval.shape[1]
    f_acc, f_grad = cfg.f_acc, cfg.f_grad
    act = work[: n_layers + 1]
    cell = work[n_layers + 1 : 2 * n_layers + 1]
    table_addr = work[2 * n_layers + 1 : 3 * n_layers + 1]
    clamped = work[3 * n_layers + 1 : 4 * n_layers + 1]
    err = work[4 * n_layers + 1]
    prev = work[4 * n_layers + 2]
    for i in range(widths[0]):
        act[0, i] = xs[n_sample, i]
    # forward: locate every input, then each output is the wrapped sum of its edges' spline dots
    for layer in range(n_layers):
        n_in, n_out = widths[layer], widths[layer + 1]
        for i in range(n_in):
            clamped[layer, i], cell[layer, i], table_addr[layer, i] = locate(
                act[layer, i], cfg.lo_raw[layer], cfg.pos_bits[layer], cfg.grid_size, cfg.table_bits)
        f_z = cfg.f_out if layer == n_layers - 1 else cfg.f_act
        for j in range(n_out):
            s = np.int64(0)
            for i in range(n_in):
                s += spline_dot(theta, edge_base(cfg, layer, j, i, cell[layer, i]), cfg.bval, table_addr[layer, i], cfg)
            act[layer + 1, j] = _to(_wrap(s, f_acc), f_acc.frac, f_z)

    # output error
    n_out = widths[n_layers]
    for j in range(n_out):
        preds[n_sample, j] = act[n_layers, j]
    output_error(err[:n_out], act[n_layers, :n_out], ys, kinds, n_sample, cfg.f_out, f_grad)

    # backward, last layer first: the sparse update (k+1 deltas per edge), then the error
    # to the previous layer through the spline derivatives
    n = 0
    f_update = f_grad.frac + cfg.f_basis.frac + cfg.lr_shift
    for layer in range(n_layers - 1, -1, -1):
        n_in, n_out = widths[layer], widths[layer + 1]
        for j in range(n_out):
            for i in range(n_in):
                base = edge_base(cfg, layer, j, i, cell[layer, i])
                a = table_addr[layer, i]
                for m in range(k1):
                    addr[n] = base + m
                    delta[n] = _to(err[j] * cfg.bval[a, m], f_update, cfg.f_coef)
                    n += 1
        if layer == 0:
            break
        for i in range(n_in):
            prev[i] = 0
            if clamped[layer, i] != 0:
                continue  # the edge is flat outside the grid
            s = np.int64(0)
            for j in range(n_out):
                sd = spline_dot(theta, edge_base(cfg, layer, j, i, cell[layer, i]), cfg.bder, table_addr[layer, i], cfg)
                dphi = _to(_wrap(sd, f_acc), f_acc.frac + cfg.cell_exp, f_grad)
                s += _to(err[j] * dphi, 2 * f_grad.frac, f_acc)
            prev[i] = _to(_wrap(s, f_acc), f_acc.frac, f_grad)
        for i in range(n_in):
            err[i] = prev[i]


@numba.njit(cache=True, inline="always")
def mlp_step(theta, xs, ys, kinds, n_sample, cfg, preds, addr, delta, work):
    """Sample ``n_sample`` of ``xs``/``ys`` (kind ``kinds[n_sample]``) through an MLP: fills ``preds[n_sample]`` and the dense update ``addr``/``delta``
    (one entry per parameter). ``theta`` is not modified; ``work`` is int64
    scratch of shape (at least L+3, max width)."""
    widths = cfg.widths
    n_layers = len(widths) - 1
    f_acc, f_coef, f_grad = cfg.f_acc, cfg.f_coef, cfg.f_grad
    act = work[: n_layers + 1]
    err = work[n_layers + 1]
    prev = work[n_layers + 2]
    for i in range(widths[0]):
        act[0, i] = xs[n_sample, i]
    for layer in range(n_layers):
        n_in, n_out = widths[layer], widths[layer + 1]
        w0 = cfg.offsets[layer]
        b0 = w0 + n_in * n_out
        f_prod = f_coef.frac + cfg.in_frac[layer]
        f_z = cfg.f_out if layer == n_layers - 1 else cfg.f_act
        for j in range(n_out):
            s = _to(theta[b0 + j], f_coef.frac, f_acc)
            for i in range(n_in):
                s += _to(theta[w0 + j * n_in + i] * act[layer, i], f_prod, f_acc)
            z = _to(_wrap(s, f_acc), f_acc.frac, f_z)
            act[layer + 1, j] = max(z, 0) if layer < n_layers - 1 else z

    n_out = widths[n_layers]
    for j in range(n_out):
        preds[n_sample, j] = act[n_layers, j]
    output_error(err[:n_out], act[n_layers, :n_out], ys, kinds, n_sample, cfg.f_out, f_grad)

    f_back = f_coef.frac + f_grad.frac
    for layer in range(n_layers - 1, -1, -1):
        n_in, n_out = widths[layer], widths[layer + 1]
        w0 = cfg.offsets[layer]
        b0 = w0 + n_in * n_out
        f_update = f_grad.frac + cfg.in_frac[layer] + cfg.lr_shift
        for j in range(n_out):
            for i in range(n_in):
                addr[w0 + j * n_in + i] = w0 + j * n_in + i
                delta[w0 + j * n_in + i] = _to(err[j] * act[layer, i], f_update, f_coef)
            addr[b0 + j] = b0 + j
            delta[b0 + j] = _to(err[j], f_grad.frac + cfg.lr_shift, f_coef)
        if layer == 0:
            break
        for i in range(n_in):
            prev[i] = 0
            if act[layer, i] <= 0:
                continue
            s = np.int64(0)
            for j in range(n_out):
                s += _to(theta[w0 + j * n_in + i] * err[j], f_back, f_acc)
            prev[i] = _to(_wrap(s, f_acc), f_acc.frac, f_grad)
        for i in range(n_in):
            err[i] = prev[i]
