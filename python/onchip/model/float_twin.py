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
        theta: initial float parameters, flat (P,); with ``spec.channels`` = N > 1, (N, P) (a
            bank per channel) or (P,) (every channel); default: the golden initial parameters.

    Channels: as in the golden model, channel c learns only from its own samples, sequentially,
    on its own bank (``theta`` is then (N, P)).

    Method: per-sample SGD on L = 1/2 |y_hat - y|^2 with PyTorch autograd.

    Raises:
        ValueError: ``theta`` of the wrong shape (naming the shapes it takes).
    """

    def __init__(self, spec: LearnerSpec, theta: np.ndarray | None = None):
        torch = need("torch", "the float twin")

        self._torch = torch
        self.spec = spec
        self.theta = torch.tensor(check_float_parameters(spec, theta), dtype=torch.float64)
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

    def _bank(self, c: int):
        # channel c's parameters: a view, so an in-place update lands in self.theta
        return self.theta[c] if self.spec.channels > 1 else self.theta

    def predict(self, x, channel=None) -> np.ndarray:
        """Inference: (N, n_in) float (and (N,) ``channel``, required with channels > 1) -> (N, n_out)
        float predictions, no update.

        Raises:
            ValueError: a bad or missing ``channel`` (:func:`onchip.model.golden.check_channel`).
        """
        from .golden import check_channel

        torch = self._torch
        xs = torch.as_tensor(np.asarray(x, dtype=np.float64))
        chs = check_channel(self.spec, channel, len(xs)).tolist()
        if not len(xs):
            return np.zeros((0, self.spec.n_out))
        with torch.no_grad():
            return np.stack([self._forward(self._bank(c), xi).numpy() for c, xi in zip(chs, xs)])

    def run(self, x, y, progress=None, *, kind=None, channel=None) -> np.ndarray:
        """Test-then-train over (N, n_in) inputs and (N, n_out) targets -> (N, n_out) predictions.

        ``kind`` (N,) :class:`~onchip.model.stream.SampleKind` values (None: all TARGET), as in
        the golden model: a TARGET row of ``y`` is a target (loss 1/2 |y_hat - y|^2), an ERROR
        row is dL/dy_hat itself (the gradient is that vector times the Jacobian of y_hat), a
        PREDICT row is ignored and its zero update still takes its slot of the D-sample window.
        ``progress``, if given, is called with the number of samples done every 1000 samples.
        ``channel`` (N,) integers in [0, channels), required with channels > 1: the bank each
        sample is predicted and learned with.

        Raises:
            ValueError: ``kind`` of the wrong shape or with a value that is not a sample kind; a
                bad or missing ``channel``.
        """
        from .golden import check_channel, check_kind
        from .stream import SampleKind

        torch = self._torch
        xs = torch.as_tensor(np.asarray(x, dtype=np.float64))
        ys = torch.as_tensor(np.asarray(y, dtype=np.float64))
        # Python ints: numpy integers compared with SampleKind look __array_ufunc__ up on the enum
        # three times a sample (and swallow an interrupt raised there: onchip.interrupts)
        kinds = check_kind(kind, len(xs)).tolist()
        chs = check_channel(self.spec, channel, len(xs)).tolist()
        preds = np.zeros((len(xs), self.spec.n_out))
        lr = self.spec.learning_rate
        depth = self.spec.effective_staleness
        for n in range(len(xs)):
            if depth and len(self._pending) == depth:  # depth is 0 with channels > 1
                self.theta -= self._pending.popleft()
            bank = self._bank(chs[n])
            theta = bank.clone().requires_grad_(True)
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
                bank -= lr * grad
            if progress is not None and (n + 1) % 1000 == 0:
                progress(1000)
        return preds

    def flush(self) -> None:
        """Commit pending (delayed) updates."""
        while self._pending:
            self.theta -= self._pending.popleft()


def check_float_parameters(spec: LearnerSpec, theta) -> np.ndarray:
    """Float parameters of ``spec`` as float64: (P,) with one channel, (N, P) with N > 1 (a (P,)
    ``theta`` is every channel's); None: the golden initial parameters, dequantized.

    Raises:
        ValueError: naming ``theta``: the wrong shape (and the shapes it takes).
    """
    if theta is None:
        theta = dequantize(initial_parameters(spec), spec.formats.coef)
    theta = np.asarray(theta, dtype=np.float64)
    p, n = spec.parameter_count(), spec.channels
    if n == 1 and theta.shape != (p,):
        raise ValueError(f"theta must have shape ({p},), got {theta.shape}")
    if n > 1:
        if theta.shape not in ((n, p), (p,)):
            raise ValueError(f"theta must have shape ({n}, {p}) (one row per channel) or ({p},) (every channel), "
                             f"got {theta.shape}")
        theta = np.broadcast_to(theta, (n, p))
    return np.array(theta, dtype=np.float64)
