"""The result of a backend's run over a stream, shared by every backend (:mod:`onchip.backends`)."""

from __future__ import annotations

import numpy as np


class RunResult(tuple):
    """A backend run's result: unpacks as ``(predictions, theta)``; ``.decisions`` beside them.

    Attributes:
        predictions: (N, n_out) predictions, raw int64 (``act``) or float64 (``float``).
        theta: (P,) final parameters after every pending update has landed.
        decisions: (N,) int64 decisions (index of the largest output, ties to the lowest; sign
            for one output), as the backend computed or output them.
        kernel: what computed them where a backend has several ways, else None: the golden
            model's stream kernels in order of use (``"generic"``, ``"specialised"`` or
            ``"generic, then specialised"``; the same bits at different speeds).
    """

    def __new__(cls, predictions, theta, decisions, kernel: str | None = None):
        self = super().__new__(cls, (predictions, theta))
        self.decisions = np.asarray(decisions, np.int64)
        self.kernel = kernel
        return self

    @property
    def predictions(self) -> np.ndarray:
        return self[0]

    @property
    def theta(self) -> np.ndarray:
        return self[1]
