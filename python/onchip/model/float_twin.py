"""Float twins: the same learners in float64 PyTorch, to measure what quantization costs.

Same architecture, initial parameters (the golden model's, dequantized),
learning rate, test-then-train protocol and schedule (the pipelined twin
delays its updates by the same D samples); no rounding anywhere, the exact
B-spline basis instead of the table, and gradients from autograd. On the
KAN the gradient of an inactive coefficient is exactly zero, so the float
update is sparse too; an input outside the grid is clamped, so its edge is
flat there (zero derivative), as in the golden model.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..extras import need
from ..fixed import dequantize
from ..spec import LearnerSpec
from .basis import bspline_basis
from .golden import initial_parameters, layout


class FloatTwin:
    """Float64 online learner matching :class:`onchip.model.GoldenLearner` without quantization.

    Args:
        spec: the learner (formats are ignored except to dequantize the initial parameters).
        theta: initial float parameters, flat (P,); default: the golden initial parameters.

    Method: per-sample SGD on L = 1/2 |y_hat - y|^2 with PyTorch autograd.
    """

    def __init__(self, spec: LearnerSpec, theta: np.ndarray | None = None):
        torch = need("torch", "the float twin")

        self._torch = torch
        self.spec = spec
        if theta is None:
            theta = dequantize(initial_parameters(spec), spec.formats.coef)
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (spec.parameter_count(),):
            raise ValueError(f"theta must have shape ({spec.parameter_count()},), got {theta.shape}")
        self.theta = torch.tensor(theta, dtype=torch.float64)
        self._pending: deque = deque()
        if spec.kind == "kan":
            lo, hi = spec.grid_range
            h = (hi - lo) / spec.grid_size
            k = spec.spline_order
            self._grid = torch.tensor(lo + h * np.arange(-k, spec.grid_size + k + 1), dtype=torch.float64)
            self._clamp = (lo, hi - h * 1e-9)

    def _forward(self, theta, x):
        torch = self._torch
        a = x
        layers = layout(self.spec)
        for n, layer in enumerate(layers):
            chunk = theta[layer.offset : layer.offset + layer.size]
            if self.spec.kind == "kan":
                coef = chunk.reshape(layer.n_out, layer.n_in, self.spec.n_coef)
                basis = bspline_basis(torch.clamp(a, *self._clamp), self._grid, self.spec.spline_order)
                a = (coef * basis[None, :, :]).sum(dim=(1, 2))
            else:
                w = layer.n_in * layer.n_out
                a = chunk[:w].reshape(layer.n_out, layer.n_in) @ a + chunk[w:]
                if n < len(layers) - 1:
                    a = torch.relu(a)
        return a

    def predict(self, x) -> np.ndarray:
        """Inference: (N, n_in) float -> (N, n_out) float predictions, no update."""
        torch = self._torch
        with torch.no_grad():
            xs = torch.as_tensor(np.asarray(x, dtype=np.float64))
            return np.stack([self._forward(self.theta, xi).numpy() for xi in xs])

    def run(self, x, y, progress=None, *, kind=None) -> np.ndarray:
        """Test-then-train over (N, n_in) inputs and (N, n_out) targets -> (N, n_out) predictions.

        ``kind`` (N,) :class:`~onchip.model.stream.SampleKind` values (None: all TARGET), as in
        the golden model: a TARGET row of ``y`` is a target (loss 1/2 |y_hat - y|^2), an ERROR
        row is dL/dy_hat itself (the gradient is that vector times the Jacobian of y_hat), a
        PREDICT row is ignored and its zero update still takes its slot of the D-sample window.
        ``progress``, if given, is called with the number of samples done every 1000 samples.

        Raises:
            ValueError: ``kind`` of the wrong shape or with a value that is not a sample kind.
        """
        from .golden import check_kind
        from .stream import SampleKind

        torch = self._torch
        xs = torch.as_tensor(np.asarray(x, dtype=np.float64))
        ys = torch.as_tensor(np.asarray(y, dtype=np.float64))
        # Python ints: numpy integers compared with SampleKind look __array_ufunc__ up on the enum
        # three times a sample (and swallow an interrupt raised there: onchip.interrupts)
        kinds = check_kind(kind, len(xs)).tolist()
        preds = np.zeros((len(xs), self.spec.n_out))
        lr = self.spec.learning_rate
        depth = self.spec.effective_staleness
        for n in range(len(xs)):
            if depth and len(self._pending) == depth:
                self.theta -= self._pending.popleft()
            theta = self.theta.clone().requires_grad_(True)
            out = self._forward(theta, xs[n])
            if kinds[n] == SampleKind.PREDICT:
                grad = torch.zeros_like(self.theta)
            else:
                err = out.detach() - ys[n] if kinds[n] == SampleKind.TARGET else ys[n]
                (grad,) = torch.autograd.grad((out * err).sum(), theta)  # err^T dy_hat/dtheta
            preds[n] = out.detach().numpy()
            if depth:
                self._pending.append(lr * grad)
            else:
                self.theta -= lr * grad
            if progress is not None and (n + 1) % 1000 == 0:
                progress(1000)
        return preds

    def flush(self) -> None:
        """Commit pending (delayed) updates."""
        while self._pending:
            self.theta -= self._pending.popleft()
