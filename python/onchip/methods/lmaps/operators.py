"""Measurement operators ``y = A(x) + n`` on flattened square images.

Each operator acts on a batch ``x`` of shape ``(B, side * side)`` and returns
``(B, m)``. Linear operators also provide the exact adjoint and a dense matrix
(used for the exact Gaussian-mixture posterior). Quantization is not
differentiable; samplers use :meth:`Operator.surrogate`, which for it is the
straight-through estimator (forward value ``Q(x)``, gradient of the identity),
the gradient approximation for non-differentiable operators of LMAPS
(Zhang et al. 2026, arXiv 2510.07343, section 4.3).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import OPERATORS  # defined in the package, free of torch


class Operator:
    """Base class: ``forward`` (B, d) -> (B, m); additive Gaussian noise of std ``sigma_y``.

    Attributes:
        side: image side in pixels (``d = side**2``).
        sigma_y: measurement noise standard deviation (same units as ``x``).
        linear: whether ``forward`` is linear (then ``adjoint`` and ``matrix`` exist).
        lipschitz: upper bound of ``||J||_2^2`` of the (surrogate) Jacobian, used for step sizes.
    """

    linear = True
    lipschitz = 1.0

    def __init__(self, side: int, sigma_y: float):
        if not isinstance(side, (int, np.integer)) or side < 2:
            raise ValueError(f"side must be an integer >= 2, got {side!r}")
        if not (math.isfinite(sigma_y) and sigma_y >= 0):
            raise ValueError(f"sigma_y must be finite and >= 0, got {sigma_y!r}")
        self.side = int(side)
        self.sigma_y = float(sigma_y)

    @property
    def dim(self) -> int:
        """Signal dimension ``d = side**2``."""
        return self.side**2

    @property
    def noise_var(self) -> float:
        """Variance of the measurement error model used in the likelihood ``N(y; A(x), noise_var I)``."""
        return self.sigma_y**2

    def _check(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (B, {self.dim}), got {tuple(x.shape)}")
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Noise-free measurement ``A(x)``."""
        raise NotImplementedError

    def adjoint(self, v: torch.Tensor) -> torch.Tensor:
        """Exact adjoint ``A^T v`` of a linear operator, (B, m) -> (B, d)."""
        raise NotImplementedError

    def surrogate(self, x: torch.Tensor) -> torch.Tensor:
        """Differentiable stand-in for ``forward`` used in gradients (``forward`` itself when linear)."""
        return self.forward(x)

    def measure(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Noisy measurement ``y = A(x) + sigma_y n``, ``n ~ N(0, I)`` drawn from ``generator``."""
        clean = self.forward(self._check(x))
        return clean + self.sigma_y * torch.randn(clean.shape, generator=generator, dtype=clean.dtype)

    def matrix(self) -> np.ndarray:
        """Dense ``(m, d)`` matrix of a linear operator (columns are ``A e_j``)."""
        if not self.linear:
            raise ValueError(f"{type(self).__name__} is not linear and has no matrix")
        eye = torch.eye(self.dim, dtype=torch.float64)
        return self.forward(eye).T.numpy().copy()


class Inpaint(Operator):
    """Keeps the pixels where ``mask`` is True: ``A x = x[mask]``, m = ``mask.sum()``.

    Args:
        mask: boolean ``(side, side)`` array of observed pixels (at least one).
    """

    def __init__(self, mask: np.ndarray, sigma_y: float):
        mask = np.asarray(mask)
        if mask.ndim != 2 or mask.shape[0] != mask.shape[1] or mask.dtype != bool:
            raise ValueError(f"mask must be a square boolean array, got dtype {mask.dtype} shape {mask.shape}")
        if not mask.any():
            raise ValueError("mask must observe at least one pixel")
        super().__init__(mask.shape[0], sigma_y)
        self.mask = mask
        self._index = torch.as_tensor(np.flatnonzero(mask.ravel()))

    def forward(self, x):
        return self._check(x)[:, self._index]

    def adjoint(self, v):
        out = torch.zeros(v.shape[0], self.dim, dtype=v.dtype)
        out[:, self._index] = v
        return out


def random_mask(side: int, keep: float, generator: torch.Generator) -> np.ndarray:
    """Boolean ``(side, side)`` mask keeping ``round(keep * side**2)`` pixels chosen uniformly.

    Raises:
        ValueError: ``keep`` not in ``(0, 1]``.
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], got {keep!r}")
    n_keep = max(1, round(keep * side * side))
    order = torch.randperm(side * side, generator=generator).numpy()
    mask = np.zeros(side * side, dtype=bool)
    mask[order[:n_keep]] = True
    return mask.reshape(side, side)


def box_mask(side: int, box: int) -> np.ndarray:
    """Boolean ``(side, side)`` mask hiding a centred ``box x box`` square.

    Raises:
        ValueError: ``box`` not in ``[1, side - 1]``.
    """
    if not 1 <= box < side:
        raise ValueError(f"box must be in [1, {side - 1}], got {box!r}")
    mask = np.ones((side, side), dtype=bool)
    lo = (side - box) // 2
    mask[lo : lo + box, lo : lo + box] = False
    return mask


class Blur(Operator):
    """Gaussian blur with zero padding ('same' size): ``A x = k * x``, m = d.

    Args:
        kernel_sigma: Gaussian kernel standard deviation in pixels (> 0).
        kernel_size: odd kernel width; the kernel is normalised to sum 1.
    """

    def __init__(self, side: int, sigma_y: float, kernel_sigma: float = 1.0, kernel_size: int = 5):
        super().__init__(side, sigma_y)
        if not kernel_sigma > 0:
            raise ValueError(f"kernel_sigma must be > 0, got {kernel_sigma!r}")
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be a positive odd integer, got {kernel_size!r}")
        r = np.arange(kernel_size) - kernel_size // 2
        g = np.exp(-0.5 * (r / kernel_sigma) ** 2)
        k = np.outer(g, g)
        self.kernel = torch.as_tensor(k / k.sum())
        self._pad = kernel_size // 2

    def _conv(self, img: torch.Tensor, transpose: bool) -> torch.Tensor:
        k = self.kernel.to(img.dtype)[None, None]
        f = torch.nn.functional.conv_transpose2d if transpose else torch.nn.functional.conv2d
        return f(img, k, padding=self._pad)

    def forward(self, x):
        img = self._check(x).reshape(-1, 1, self.side, self.side)
        return self._conv(img, transpose=False).reshape(x.shape[0], -1)

    def adjoint(self, v):
        img = v.reshape(-1, 1, self.side, self.side)
        return self._conv(img, transpose=True).reshape(v.shape[0], -1)


class Downsample(Operator):
    """Average of each ``factor x factor`` block: m = d / factor^2; ``||A||_2^2 = 1 / factor^2``."""

    def __init__(self, side: int, sigma_y: float, factor: int = 2):
        super().__init__(side, sigma_y)
        if factor < 1 or side % factor:
            raise ValueError(f"factor must be >= 1 and divide side={side}, got {factor!r}")
        self.factor = int(factor)
        self.lipschitz = 1.0 / factor**2

    def forward(self, x):
        img = self._check(x).reshape(-1, 1, self.side, self.side)
        return torch.nn.functional.avg_pool2d(img, self.factor).reshape(x.shape[0], -1)

    def adjoint(self, v):
        small = self.side // self.factor
        img = v.reshape(-1, 1, small, small)
        up = img.repeat_interleave(self.factor, 2).repeat_interleave(self.factor, 3) / self.factor**2
        return up.reshape(v.shape[0], -1)


class Quantize(Operator):
    """Uniform quantizer to ``levels`` values spanning ``[lo, hi]`` (round to nearest, clip).

    Measurement ``y = Q(x + sigma_y n)`` (noise before quantization, as in a
    sensor followed by an ADC), so ``y`` takes only the quantizer's values.
    The likelihood treats the error as Gaussian with variance
    ``sigma_y^2 + step^2 / 12`` (uniform quantization error).
    """

    linear = False

    def __init__(self, side: int, sigma_y: float, levels: int = 4, lo: float = -1.0, hi: float = 1.0):
        super().__init__(side, sigma_y)
        if levels < 2:
            raise ValueError(f"levels must be >= 2, got {levels!r}")
        if not hi > lo:
            raise ValueError(f"hi must exceed lo, got lo={lo!r} hi={hi!r}")
        self.levels, self.lo, self.hi = int(levels), float(lo), float(hi)
        self.step = (hi - lo) / (levels - 1)

    @property
    def noise_var(self) -> float:
        return self.sigma_y**2 + self.step**2 / 12

    def forward(self, x):
        x = self._check(x)
        return torch.round((x.clamp(self.lo, self.hi) - self.lo) / self.step) * self.step + self.lo

    def surrogate(self, x):
        return x + (self.forward(x) - x).detach()

    def measure(self, x, generator):
        x = self._check(x)
        return self.forward(x + self.sigma_y * torch.randn(x.shape, generator=generator, dtype=x.dtype))


def make_operator(name: str, *, side: int = 8, sigma_y: float = 0.05, generator: torch.Generator | None = None,
                  keep: float = 0.3, box: int = 4, kernel_sigma: float = 1.0, levels: int = 4) -> Operator:
    """Build an operator by name (one of :data:`OPERATORS`).

    ``inpaint-random`` keeps a fraction ``keep`` of pixels (mask drawn from
    ``generator``); ``inpaint-box`` hides a centred ``box x box`` square;
    ``blur`` is a 5x5 Gaussian of std ``kernel_sigma``; ``downsample`` averages
    2x2 blocks; ``quantize`` has ``levels`` values in ``[-1, 1]``.

    Raises:
        ValueError: unknown ``name`` or a bad parameter (named in the message).
    """
    if name == "inpaint-random":
        return Inpaint(random_mask(side, keep, generator or torch.Generator().manual_seed(0)), sigma_y)
    if name == "inpaint-box":
        return Inpaint(box_mask(side, box), sigma_y)
    if name == "blur":
        return Blur(side, sigma_y, kernel_sigma=kernel_sigma)
    if name == "downsample":
        return Downsample(side, sigma_y, factor=2)
    if name == "quantize":
        return Quantize(side, sigma_y, levels=levels)
    raise ValueError(f"operator must be one of {', '.join(OPERATORS)}; got {name!r}")
