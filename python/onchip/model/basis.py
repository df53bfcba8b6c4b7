"""Uniform B-spline basis: the float definition and the fixed-point basis table.

A KAN edge on G cells of width h over [lo, hi) has G + k coefficients; on
cell c only the k + 1 basis functions c .. c+k are non-zero. In cell units
their values depend only on the position t in [0, 1) inside the cell (the
grid is uniform), so hardware reads them from one small table indexed by the
top T bits of t (Liu et al., "KAN: Kolmogorov-Arnold Networks", 2024, Sec. 2.2,
with the grid extended by k cells on each side as in pykan / efficient-kan).
"""

from __future__ import annotations

import numpy as np

from ..fixed import Fmt, quantize


def bspline_basis(x, grid, k: int):
    """All B-spline basis functions of order k on ``grid`` at ``x`` (Cox-de Boor).

    Works on numpy arrays and torch tensors alike.

    Args:
        x: array of any shape (...,).
        grid: 1-D knot vector of length G + 2k + 1 (the extended grid).
        k: spline order (degree), >= 0.

    Returns:
        Array (..., G + k): basis values; each row sums to 1 inside [grid[k], grid[-k-1]).
    """
    x = x[..., None]
    b = ((x >= grid[:-1]) & (x < grid[1:])) * 1.0
    for p in range(1, k + 1):
        left = (x - grid[: -(p + 1)]) / (grid[p:-1] - grid[: -(p + 1)]) * b[..., :-1]
        right = (grid[p + 1 :] - x) / (grid[p + 1 :] - grid[1:-p]) * b[..., 1:]
        b = left + right
    return b


def local_basis(t: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k+1 active basis values and their derivatives d/dt at cell positions ``t``.

    Args:
        t: positions in [0, 1), shape (n,).
        k: spline order 1..3.

    Returns:
        (values, derivatives), each (n, k+1): column m belongs to coefficient c + m.
        Derivatives use B'_{j,k} = B_{j,k-1} - B_{j+1,k-1} (unit knot spacing).
    """
    t = np.asarray(t, dtype=np.float64)
    grid = np.arange(-k, k + 2, dtype=np.float64)  # cell 0 plus k cells each side
    full = bspline_basis(t, grid, k)  # (n, 1 + 2k - ... ) -> functions 0..2k
    values = full[:, : k + 1]
    lower = bspline_basis(t, grid[1:-1], k - 1)  # order k-1 on the inner knots
    lower = np.concatenate([np.zeros((len(t), 1)), lower, np.zeros((len(t), 1))], axis=1)
    derivs = lower[:, : k + 1] - lower[:, 1 : k + 2]
    return values, derivs


def basis_table(k: int, table_bits: int, fmt: Fmt) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-point basis table: entry a holds the basis at t = a / 2**T (left edge of the bin).

    Args:
        k: spline order 1..3.
        table_bits: T, address bits.
        fmt: format of the entries (quantized with its rounding mode).

    Returns:
        (values, derivatives): int64 raw arrays of shape (2**T, k+1).
    """
    t = np.arange(2**table_bits, dtype=np.float64) / 2**table_bits
    values, derivs = local_basis(t, k)
    return quantize(values, fmt), quantize(derivs, fmt)
