"""Data, the class-conditional AR prior and the three judging networks (the Frechet distance itself:
:func:`onchip.methods._scores.frechet_distance`).

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
from .tokenizers import N_TOKENS, SIDE

N_CLASSES = 10


@dataclass(frozen=True)
class DigitSplits:
    """The 1797 sklearn digits (pixels in [-1, 1], shape ``(n, 64)``) in three disjoint parts.

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


def digit_splits(seed: int, n_ref: int = 200) -> DigitSplits:
    """Seeded split of sklearn's digits: 55 % A, the rest B minus ``n_ref`` reference images."""
    x, y = load_digits()
    x = x.astype(np.float32)
    perm = _report.rng(seed, "token-search", "split").permutation(len(x))
    n_a = int(0.55 * len(x))
    a, ref, b = perm[:n_a], perm[n_a:n_a + n_ref], perm[n_a + n_ref:]
    return DigitSplits(x[a], y[a], x[b], y[b], x[ref], y[ref])


# ------------------------------------------------------------------ judging networks


def verifier_net() -> nn.Module:
    """The verifier: an MLP 64-128-128-10 (split A)."""
    return mlp(64, N_CLASSES, hidden=128, layers=2)


class EvaluatorNet(nn.Module):
    """The evaluator: a small CNN (two 3x3 convolutions, max-pool, two linear layers), split B."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.fc = mlp(32 * 16, N_CLASSES, hidden=64, layers=1)

    def forward(self, x):
        return self.fc(self.conv(x.view(-1, 1, SIDE, SIDE)).flatten(1))


class FeatureNet(nn.Module):
    """The Frechet-distance network: an MLP 64-96-32-10 (split B); ``features`` = the 32-d layer."""

    def __init__(self):
        super().__init__()
        self.body = mlp(64, 32, hidden=96, layers=1, activation="tanh", out_activation="tanh")
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
    """Training sequences ``(n, 17)``: the class token then the 16 code tokens."""
    return np.concatenate([1 + np.asarray(classes)[:, None], np.asarray(ids) + CODE0], 1).astype(np.int64)


class ARPrior:
    """Class-conditional autoregressive prior over token ids (a causal :class:`~onchip.methods._tiny.TinyTransformer`).

    ``extend(classes, prefix, n_new, gen)`` samples ``n_new`` more tokens after each prefix
    (temperature 1, only code tokens allowed). ``forwards`` counts transformer passes and
    ``sequences`` the rows they carried (the prior's compute, reported beside the budget).
    """

    def __init__(self, model, n_codes: int):
        self.model, self.n_codes = model, n_codes
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
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
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
    """Train the prior on sequences ``(n, 17)`` by next-token cross-entropy (shared :func:`_tiny.train`)."""
    from .. import _tiny

    def batches(rng):
        return (seqs[rng.integers(0, len(seqs), 64)],)

    _tiny.train(model, batches, steps=steps, lr=3e-3, seed=seed, progress=progress, desc="AR prior")


def tiny_prior_config(n_codes: int):
    """Shape of the prior (the same for both token structures)."""
    from .._tiny import TinyConfig

    return TinyConfig(vocab=prior_vocab(n_codes), d_model=64, n_layers=2, n_heads=4, max_len=N_TOKENS + 1)
