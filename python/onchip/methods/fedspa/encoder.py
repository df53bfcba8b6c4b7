"""The tiny vision-language model: frozen MiniLM text features and a CNN trained into that space.

Text side: the packaged all-MiniLM-L6-v2 (:func:`onchip.methods._lm.sentence_encoder`) embeds a
few prompt templates per class ("the digit seven", "the letter A", ...); the class text feature
is their normalised mean (CLIP's prompt ensembling, Radford et al. 2021, sec. 3.1.4).
Vision side: a small CNN on 16x16 glyphs, ending in a 384-d unit vector, trained with CLIP's
image-to-text cross-entropy against the frozen class text features (logit scale 100) on the
pre-training fonts only. Clients later see other fonts and handwriting: the zero-shot gap the
adapters must close. The trained CNN is kept in the onchip cache (one pre-trained model for
every seed, like a released CLIP).
"""

from __future__ import annotations

import numpy as np

from . import CLASSES, PRETRAIN_DOMAINS

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
LOGIT_SCALE = 100.0


def class_names() -> list[str]:
    """The name each class is prompted with: ``digit seven``, ``letter A``."""
    return [f"digit {DIGIT_WORDS[int(c)]}" if c.isdigit() else f"letter {c}" for c in CLASSES]


def class_prompts() -> list[list[str]]:
    """The prompt templates of every class (3 per class)."""
    out = []
    for c in CLASSES:
        if c.isdigit():
            w = DIGIT_WORDS[int(c)]
            out.append([f"the digit {w}", f"the number {c}, {w}", f"a picture of the digit {c}"])
        else:
            out.append([f"the letter {c}", f"the capital letter {c}", f"a picture of the letter {c}"])
    return out


def text_features() -> np.ndarray:
    """Class text features ``(36, 384)`` float32, unit rows (mean of the templates' MiniLM embeddings;
    kept in the onchip cache, keyed by the prompts).

    Raises:
        onchip.methods._lm.ModelUnavailable: the MiniLM package is not installed.
    """
    from onchip.cache import cached_build, digest

    prompts = class_prompts()

    def fill(folder):
        from .._lm import sentence_encoder

        emb = sentence_encoder().encode([p for ps in prompts for p in ps]).reshape(len(prompts), len(prompts[0]), -1)
        t = emb.mean(1)
        np.save(folder / "text.npy", (t / np.linalg.norm(t, axis=1, keepdims=True)).astype(np.float32))

    entry, _ = cached_build("fedspa_text", digest("all-MiniLM-L6-v2", repr(prompts))[:32], fill)
    return np.load(entry / "text.npy")


def image_encoder():
    """A fresh CNN: 16x16 -> conv 16 -> conv 32 -> pool -> conv 32 -> pool -> 256 -> 384, L2-normalised."""
    import torch
    from torch import nn

    class ImageEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.GELU(), nn.Conv2d(16, 32, 3, padding=1),
                                      nn.GELU(), nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.GELU(),
                                      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 256), nn.GELU(),
                                      nn.Linear(256, 384))

        def forward(self, x):
            return nn.functional.normalize(self.body(x.view(-1, 1, 16, 16)), dim=-1)

    return ImageEncoder()


def pretrain_data(n_per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Renders of every class in the pre-training fonts: ``(n, 256)``, labels ``(n,)``."""
    from .. import _report
    from .data import render

    rng = _report.rng(seed, "fedspa", "pretrain")
    labels = np.repeat(np.arange(len(CLASSES)), n_per_class)
    xs = [render(font, labels, rng) for font in PRETRAIN_DOMAINS]
    return np.concatenate(xs), np.tile(labels, len(PRETRAIN_DOMAINS))


def pretrained_encoder(*, steps: int = 1000, n_per_class: int = 60, seed: int = 0, progress: bool = False):
    """The tiny CLIP image tower, trained once into the MiniLM text space (onchip cache).

    Returns:
        ``(encoder, text_features)``: the CNN in eval mode and the ``(36, 384)`` class text features.
    """
    import torch

    from onchip.cache import cached_build, digest

    text = text_features()
    key = digest("fedspa_clip_v2", str(steps), str(n_per_class), str(seed), text.tobytes())[:32]

    def fill(folder):
        from onchip.progress import progress_bar

        x, y = pretrain_data(n_per_class, seed)
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        net = image_encoder()
        xt, yt, tt = torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(text)
        opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
        net.train()
        for _ in progress_bar(range(steps), desc="tiny CLIP", disable=not progress, leave=False):
            i = torch.as_tensor(rng.integers(0, len(xt), 128))
            xb = xt[i] + 0.05 * torch.randn(128, xt.shape[1])
            loss = torch.nn.functional.cross_entropy(LOGIT_SCALE * net(xb) @ tt.T, yt[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        torch.save(net.state_dict(), folder / "encoder.pt")

    entry, _ = cached_build("fedspa_clip", key, fill)
    net = image_encoder()
    net.load_state_dict(torch.load(entry / "encoder.pt", weights_only=True))
    net.eval()
    return net, text


def encode(net, x: np.ndarray) -> np.ndarray:
    """Frozen image features ``(n, 384)`` (unit rows) of images ``(n, 256)``."""
    import torch

    with torch.no_grad():
        return net(torch.as_tensor(x)).numpy()
