"""Per-sample integer kernels of the golden models (numba-compiled).

These functions *define* what every backend computes. All values are raw
integers; a format is a code tuple ``(W, F, signed, quant, overflow)`` from
:attr:`onchip.fixed.Fmt.code`, and ``requant(raw, F_from, *fmt)`` rounds and
then saturates or wraps into it, exactly for every shift ``F_from - F`` (right
shifts of 64 bits and more, left shifts past int64: formats with |F| up to 96
reach both, e.g. act -> grad or a product -> acc). Rounding points, in order:

Forward, per layer (input u in the input format for layer 0, else ``act``):

* KAN: u is clamped to the grid [lo, hi - lsb]; the offset v = u - lo has
  ``P = F_u + e`` position bits (cell width h = 2**e): cell c = v >> P,
  table address a = top T bits of the position. b = BVAL[a], d = BDER[a]
  (``basis`` format). Each product coef[j, i, c+m] * b[m] is converted into
  ``acc``; the sum over i, m wraps in ``acc`` (order-free because ``acc``
  overflow is WRAP); out[j] = requant(sum -> ``act``).
* MLP: z[j] = requant(acc(bias[j]) + sum_i acc(W[j, i] * a[i]) -> ``act``);
  hidden layers apply ReLU, the output layer is linear.

Output error: e = requant(y_hat - y -> ``grad``) (gradient of 1/2 (y_hat - y)^2).

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

from ..fixed import overflow, requant


class KanConfig(NamedTuple):
    """Everything a KAN step needs besides the parameters (built by :mod:`onchip.model.golden`)."""

    widths: np.ndarray  # (L+1,) int64
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
    f_coef: tuple
    f_basis: tuple
    f_act: tuple
    f_grad: tuple
    f_acc: tuple


class MlpConfig(NamedTuple):
    """Everything an MLP step needs besides the parameters."""

    widths: np.ndarray  # (L+1,)
    offsets: np.ndarray  # (L,) start of layer l: W (n_out*n_in, row-major) then bias (n_out)
    in_frac: np.ndarray  # (L,)
    lr_shift: int
    f_coef: tuple
    f_act: tuple
    f_grad: tuple
    f_acc: tuple


@numba.njit(cache=True, inline="always")
def _acc(raw, frac, f_acc):
    """Convert a product (or a coefficient) into the accumulator format."""
    return requant(raw, frac, f_acc[0], f_acc[1], f_acc[2], f_acc[3], f_acc[4])


@numba.njit(cache=True, inline="always")
def _to(raw, frac, fmt):
    return requant(raw, frac, fmt[0], fmt[1], fmt[2], fmt[3], fmt[4])


@numba.njit(cache=True, inline="always")
def _wrap(raw, fmt):
    return overflow(raw, fmt[0], fmt[2], fmt[4])


@numba.njit(cache=True, inline="always")
def kan_step(theta, xs, ys, n_sample, cfg, preds, addr, delta, work):
    """Sample ``n_sample`` of ``xs``/``ys`` through a KAN: fills ``preds[n_sample]`` and the update ``addr``/``delta``
    (sum over layers of n_out*n_in*(k+1) entries). ``theta`` is not modified;
    ``work`` is int64 scratch of shape (4L+3, max width)."""
    widths = cfg.widths
    n_layers = len(widths) - 1
    wmax = widths.max()
    k1 = cfg.bval.shape[1]
    t_bits = cfg.table_bits
    f_acc, f_coef, f_basis, f_grad = cfg.f_acc, cfg.f_coef, cfg.f_basis, cfg.f_grad
    act = work[: n_layers + 1]
    cell = work[n_layers + 1 : 2 * n_layers + 1]
    table_addr = work[2 * n_layers + 1 : 3 * n_layers + 1]
    clamped = work[3 * n_layers + 1 : 4 * n_layers + 1]
    err = work[4 * n_layers + 1]
    prev = work[4 * n_layers + 2]
    f_prod = f_coef[1] + f_basis[1]
    for i in range(widths[0]):
        act[0, i] = xs[n_sample, i]
    for layer in range(n_layers):
        n_in, n_out = widths[layer], widths[layer + 1]
        p = cfg.pos_bits[layer]
        span = np.int64(cfg.grid_size) << p
        for i in range(n_in):
            v = act[layer, i] - cfg.lo_raw[layer]
            clamped[layer, i] = (v < 0) | (v >= span)
            v = min(max(v, 0), span - 1)
            cell[layer, i] = v >> p
            table_addr[layer, i] = (v >> (p - t_bits)) & ((np.int64(1) << t_bits) - 1)
        for j in range(n_out):
            s = np.int64(0)
            for i in range(n_in):
                base = cfg.offsets[layer] + (j * n_in + i) * cfg.n_coef + cell[layer, i]
                a = table_addr[layer, i]
                for m in range(k1):
                    s += _acc(theta[base + m] * cfg.bval[a, m], f_prod, f_acc)
            act[layer + 1, j] = _to(_wrap(s, f_acc), f_acc[1], cfg.f_act)

    n_out = widths[n_layers]
    for j in range(n_out):
        preds[n_sample, j] = act[n_layers, j]
        err[j] = _to(act[n_layers, j] - ys[n_sample, j], cfg.f_act[1], f_grad)

    n = 0
    f_update = f_grad[1] + f_basis[1] + cfg.lr_shift
    for layer in range(n_layers - 1, -1, -1):
        n_in, n_out = widths[layer], widths[layer + 1]
        for j in range(n_out):
            for i in range(n_in):
                base = cfg.offsets[layer] + (j * n_in + i) * cfg.n_coef + cell[layer, i]
                a = table_addr[layer, i]
                for m in range(k1):
                    addr[n] = base + m
                    delta[n] = _to(err[j] * cfg.bval[a, m], f_update, f_coef)
                    n += 1
        if layer == 0:
            break
        for i in range(n_in):
            prev[i] = 0
            if clamped[layer, i] != 0:
                continue
            a = table_addr[layer, i]
            s = np.int64(0)
            for j in range(n_out):
                base = cfg.offsets[layer] + (j * n_in + i) * cfg.n_coef + cell[layer, i]
                sd = np.int64(0)
                for m in range(k1):
                    sd += _acc(theta[base + m] * cfg.bder[a, m], f_prod, f_acc)
                dphi = _to(_wrap(sd, f_acc), f_acc[1] + cfg.cell_exp, f_grad)
                s += _acc(err[j] * dphi, 2 * f_grad[1], f_acc)
            prev[i] = _to(_wrap(s, f_acc), f_acc[1], f_grad)
        for i in range(n_in):
            err[i] = prev[i]


@numba.njit(cache=True, inline="always")
def mlp_step(theta, xs, ys, n_sample, cfg, preds, addr, delta, work):
    """Sample ``n_sample`` of ``xs``/``ys`` through an MLP: fills ``preds[n_sample]`` and the dense update ``addr``/``delta``
    (one entry per parameter). ``theta`` is not modified; ``work`` is int64
    scratch of shape (at least L+3, max width)."""
    widths = cfg.widths
    n_layers = len(widths) - 1
    wmax = widths.max()
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
        f_prod = f_coef[1] + cfg.in_frac[layer]
        for j in range(n_out):
            s = _acc(theta[b0 + j], f_coef[1], f_acc)
            for i in range(n_in):
                s += _acc(theta[w0 + j * n_in + i] * act[layer, i], f_prod, f_acc)
            z = _to(_wrap(s, f_acc), f_acc[1], cfg.f_act)
            act[layer + 1, j] = max(z, 0) if layer < n_layers - 1 else z

    n_out = widths[n_layers]
    for j in range(n_out):
        preds[n_sample, j] = act[n_layers, j]
        err[j] = _to(act[n_layers, j] - ys[n_sample, j], cfg.f_act[1], f_grad)

    f_back = f_coef[1] + f_grad[1]
    for layer in range(n_layers - 1, -1, -1):
        n_in, n_out = widths[layer], widths[layer + 1]
        w0 = cfg.offsets[layer]
        b0 = w0 + n_in * n_out
        f_update = f_grad[1] + cfg.in_frac[layer] + cfg.lr_shift
        for j in range(n_out):
            for i in range(n_in):
                addr[w0 + j * n_in + i] = w0 + j * n_in + i
                delta[w0 + j * n_in + i] = _to(err[j] * act[layer, i], f_update, f_coef)
            addr[b0 + j] = b0 + j
            delta[b0 + j] = _to(err[j], f_grad[1] + cfg.lr_shift, f_coef)
        if layer == 0:
            break
        for i in range(n_in):
            prev[i] = 0
            if act[layer, i] <= 0:
                continue
            s = np.int64(0)
            for j in range(n_out):
                s += _acc(theta[w0 + j * n_in + i] * err[j], f_back, f_acc)
            prev[i] = _to(_wrap(s, f_acc), f_acc[1], f_grad)
        for i in range(n_in):
            err[i] = prev[i]
