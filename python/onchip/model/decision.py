"""The decision a learner's outputs stand for: the class index a control system consumes.

One rule for every backend (golden, float, RTL, HLS) and every task:

* one output (S = 1): decision 1 when the output is >= 0, else 0 (the two-state readout's
  sign decision: |1> at >= 0);
* S >= 2 outputs (one-hot +/-1 targets): the index of the largest output, the lowest index
  on a tie.
"""

from __future__ import annotations

import numpy as np


def decisions(outputs) -> np.ndarray:
    """Decisions of a block of learner outputs.

    Args:
        outputs: (N, S) or (N,) outputs, raw integers or floats (the rule is scale-free, so raw
            ``act`` values and their dequantised values give the same decisions).

    Returns:
        (N,) int64 indices in 0 .. max(S, 2) - 1.

    Raises:
        ValueError: outputs not 1-D or 2-D, with no column, or not finite.
    """
    a = np.asarray(outputs)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[1] < 1:
        raise ValueError(f"outputs must have shape (N, S) or (N,) with S >= 1, got {np.shape(outputs)}")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ValueError("outputs must be finite, got NaN or infinity")
    if a.shape[1] == 1:
        return (a[:, 0] >= 0).astype(np.int64)
    return np.argmax(a, axis=1).astype(np.int64)  # numpy's argmax takes the first maximum
