"""What counts as a number in a spec, a drift file or a sweep definition.

TOML's ``true`` arrives in Python as ``True``, an ``int``; it is never taken for the integer 1.
NaN and the infinities (TOML ``nan``, ``inf``) are never taken for numbers either: every value
onchip reads is finite. Used by :mod:`onchip.spec`, :mod:`onchip.tasks.drift` and
:mod:`onchip.sweep`, each raising its own error that names the field.
"""

from __future__ import annotations

import math

import numpy as np


def is_integer(value) -> bool:
    """An ``int`` or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def as_float(value) -> float | None:
    """The float a finite number is exactly, or None: for a bool, a non-number, NaN, an infinity,
    or an integer no float holds exactly (beyond 2**53 where the floats are sparse)."""
    if not (is_integer(value) or isinstance(value, (float, np.floating))):
        return None
    try:
        out = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return out if math.isfinite(out) and out == value else None


def is_finite_number(value) -> bool:
    """A finite int or float (:func:`as_float` is not None)."""
    return as_float(value) is not None
