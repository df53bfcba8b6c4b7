"""Harsanyi (AND) interactions of a set function and the prompt-sensitivity scores built on them.

A model's output score ``v`` is evaluated on every masked version ``x_T`` of an input with
``n`` variables (the variables outside ``T`` replaced by a fixed baseline): ``2**n`` values,
indexed by the bit mask of ``T`` (bit ``i`` set = variable ``i`` kept). The Harsanyi dividend
(AND interaction) of a subset ``S`` is

    I(S) = sum_{T subset of S} (-1)**(|S| - |T|) v(x_T)

(the Moebius transform of ``v``; Harsanyi 1963; used for prompt sensitivity by Qin et al.,
"interaction-based prompt sensitivity", ICML 2026, openreview 6fHZR6uxNa). The dividends
are *efficient*: ``sum_{S subset of T} I(S) = v(x_T)`` for every ``T``, in particular
``sum_S I(S) = v(x_N)`` and ``I(empty) = v(x_empty)``.

The paper's exact sensitivity formula is not public; :func:`compare` implements the
reconstruction described in ``seeds/ips.md`` (salient set, relative change, unstable share).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def popcount(masks: np.ndarray) -> np.ndarray:
    """Number of set bits of each non-negative integer mask (the order |S|)."""
    masks = np.asarray(masks, dtype=np.int64)
    out = np.zeros(masks.shape, np.int64)
    m = masks.copy()
    while np.any(m):
        out += m & 1
        m >>= 1
    return out


def subset_masks(n: int) -> np.ndarray:
    """``(2**n, n)`` bool: row ``t`` says which variables the masked input ``x_T`` keeps
    (``T`` = the bits of ``t``; bit ``i`` <-> variable ``i``).

    Raises:
        ValueError: ``n`` outside 1..16.
    """
    if not 1 <= int(n) <= 16:
        raise ValueError(f"n: the number of variables must be in 1..16 (2**n evaluations), got {n!r}")
    t = np.arange(2 ** n, dtype=np.int64)
    return ((t[:, None] >> np.arange(n)) & 1).astype(bool)


def harsanyi(values) -> np.ndarray:
    """Harsanyi dividends of a set function given on all ``2**n`` subsets.

    Args:
        values: ``(2**n,)`` or ``(..., 2**n)``: ``v(x_T)`` at index ``T`` (bit mask). Integer
            input stays integer (exact); float input is transformed in float64.

    Returns:
        Same shape: ``I(S)`` at index ``S``. The fast Moebius transform (``n 2**(n-1)``
        subtractions), equal to the defining sum over subsets.

    Raises:
        ValueError: the last axis is not a power of two >= 2.
    """
    v = np.array(values, dtype=np.int64 if np.issubdtype(np.asarray(values).dtype, np.integer) else np.float64)
    size = v.shape[-1]
    n = size.bit_length() - 1
    if size < 2 or 2 ** n != size:
        raise ValueError(f"values: the last axis must hold 2**n >= 2 entries (one per subset), got {size}")
    for i in range(n):
        step = 1 << i
        view = v.reshape(*v.shape[:-1], -1, 2, step)
        view[..., 1, :] -= view[..., 0, :]   # subsets with bit i minus the same subset without it
    return v


def harsanyi_brute_force(values) -> np.ndarray:
    """The defining sum ``I(S) = sum_{T subset S} (-1)**(|S|-|T|) v(T)`` term by term (``3**n``
    work): the reference :func:`harsanyi` is tested against."""
    v = np.asarray(values)
    size = v.shape[-1]
    out = np.zeros(v.shape, np.result_type(v.dtype, np.int64))
    for s in range(size):
        t = s
        while True:   # every submask t of s, s itself first, the empty set last
            sign = -1 if (bin(s).count("1") - bin(t).count("1")) % 2 else 1
            out[..., s] += sign * v[..., t]
            if t == 0:
                break
            t = (t - 1) & s
    return out


def reconstruct(dividends) -> np.ndarray:
    """Inverse transform: ``v(T) = sum_{S subset T} I(S)`` (efficiency), same layout as :func:`harsanyi`."""
    v = np.array(dividends, dtype=np.int64 if np.issubdtype(np.asarray(dividends).dtype, np.integer)
                 else np.float64)
    n = v.shape[-1].bit_length() - 1
    for i in range(n):
        step = 1 << i
        view = v.reshape(*v.shape[:-1], -1, 2, step)
        view[..., 1, :] += view[..., 0, :]
    return v


@dataclass(frozen=True)
class Comparison:
    """How the interactions of one prompt (A) and a changed prompt (B) differ.

    Attributes:
        ips: relative change of the salient interactions,
            ``sum_{S in Omega} |I_A(S) - I_B(S)| / sum_{S in Omega} (|I_A(S)| + |I_B(S)|)``
            in [0, 1] (0 = identical, 1 = nothing in common); NaN when Omega is empty.
        ips_by_order: the same restricted to ``|S| = k``, for k = 1..n (NaN where no salient S).
        num_by_order, den_by_order: numerator and denominator of ``ips_by_order`` (to pool orders).
        n_salient: ``|Omega|``: subsets salient in A or in B.
        n_unstable: salient subsets that are salient in only one prompt or change sign.
        unstable_by_order: unstable / salient per order k = 1..n (NaN where none salient).
        output_change: output-level baseline ``|v_A(N) - v_B(N)| / (|v_A(N)| + |v_B(N)|)``, with
            ``v`` measured from the all-masked output ``v(empty)`` of each prompt.
    """

    ips: float
    ips_by_order: tuple[float, ...]
    num_by_order: tuple[float, ...]
    den_by_order: tuple[float, ...]
    n_salient: int
    n_unstable: int
    unstable_by_order: tuple[float, ...]
    output_change: float

    @property
    def unstable_share(self) -> float:
        """Unstable salient interactions / salient ones (NaN when none is salient)."""
        return self.n_unstable / self.n_salient if self.n_salient else float("nan")


def salient(dividends, tau: float) -> np.ndarray:
    """Bool mask of salient subsets: ``S != empty`` and ``|I(S)| >= tau * max_{S' != empty} |I(S')|``
    (all False when every dividend is 0).

    Raises:
        ValueError: ``tau`` outside (0, 1].
    """
    if not 0 < tau <= 1:
        raise ValueError(f"tau: the salience threshold must be in (0, 1], got {tau!r}")
    a = np.abs(np.asarray(dividends, dtype=np.float64))
    a[0] = 0.0
    top = a.max()
    return (a >= tau * top) & (a > 0) if top > 0 else np.zeros(a.shape, bool)


def compare(div_a, div_b, *, tau: float = 0.1) -> Comparison:
    """Compare the Harsanyi dividends of a prompt (A) and a changed prompt (B) over the same variables.

    Args:
        div_a, div_b: ``(2**n,)`` dividends (:func:`harsanyi`) of the two prompts.
        tau: salience threshold relative to each prompt's largest non-empty dividend.

    Returns:
        A :class:`Comparison` (the reconstruction of the paper's score: see the module docstring).

    Raises:
        ValueError: different lengths, or ``tau`` outside (0, 1].
    """
    a = np.asarray(div_a, dtype=np.float64)
    b = np.asarray(div_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"div_b: expected the shape of div_a {a.shape}, got {b.shape}")
    n = a.size.bit_length() - 1
    sa, sb = salient(a, tau), salient(b, tau)
    omega = sa | sb
    unstable = omega & ((sa != sb) | (np.sign(a) != np.sign(b)))
    order = popcount(np.arange(a.size))

    def ratio(sel):
        den = (np.abs(a[sel]) + np.abs(b[sel])).sum()
        return float(np.abs(a[sel] - b[sel]).sum() / den) if sel.any() and den > 0 else float("nan")

    by_order = tuple(ratio(omega & (order == k)) for k in range(1, n + 1))
    num = tuple(float(np.abs(a - b)[omega & (order == k)].sum()) for k in range(1, n + 1))
    den = tuple(float((np.abs(a) + np.abs(b))[omega & (order == k)].sum()) for k in range(1, n + 1))
    unstable_k = tuple(float(unstable[omega & (order == k)].mean()) if (omega & (order == k)).any()
                       else float("nan") for k in range(1, n + 1))
    out_a, out_b = a[1:].sum(), b[1:].sum()   # v(N) - v(empty) by efficiency
    scale = abs(out_a) + abs(out_b)
    return Comparison(ratio(omega), by_order, num, den, int(omega.sum()), int(unstable.sum()), unstable_k,
                      float(abs(out_a - out_b) / scale) if scale > 0 else 0.0)
