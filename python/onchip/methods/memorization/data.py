"""The 8x8 handwritten digits shipped with scikit-learn, scaled to [-1, 1] and split.

The loader is shared with the other digit methods (:mod:`onchip.methods._data`); here
``load_digits_split(n_train, seed)`` draws ``n_train`` training images and holds out the rest.
"""

from __future__ import annotations

from .._data import load_digits_split

__all__ = ["load_digits_split"]
