"""FedSPA's client and server steps, its fallback rule, and the baselines' federated steps.

After the public code (eejiarong/FedSPA-main): ``Client.update_prototypes`` (a Tip-Adapter-F
cache classifier whose only trainable weights are the class prototypes),
``Server.update_global_text_features`` (InfoNCE with temperature 0.01 between the uploaded
prototypes and the global semantic prototype of their class, in-batch negatives as the
``info_nce`` package computes them, minus ``lam * <W, T> / C`` to stay near the text; rows
normalised afterwards) and the server's low-cosine rule (clients whose prototypes agree with
the global ones less than a threshold on average use the text features next round). The public
code hard-codes the threshold at 0.5 but never fills in the cosines it compares, so there the rule
never fires; here the threshold is a quantile of the round's observed client cosines
(:func:`fallback_threshold`), and quantile 0 switches the rule off as the public code runs.

Shapes: features ``f`` ``(n, d)`` unit rows; text features ``T``, semantic prototypes ``W`` and
visual prototypes ``P`` ``(C, d)``; labels int64 ``(n,)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

LOGIT_SCALE = 100.0


def tip_logits(f: torch.Tensor, semantic: torch.Tensor, prototypes: torch.Tensor, alpha: float,
               beta: float) -> torch.Tensor:
    """Tip-Adapter-F logits with one prototype per class (the cache labels are the identity):
    ``100 f W^T + alpha exp(-beta (1 - f P^T))`` -> ``(n, C)`` (FedSPA client, ``tip_logits``)."""
    return LOGIT_SCALE * f @ semantic.T + alpha * torch.exp(-beta * (1.0 - f @ prototypes.T))


def info_nce(query: torch.Tensor, positive: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    """InfoNCE with in-batch negatives (the ``info_nce`` package without explicit negatives):
    rows are L2-normalised, ``logits = q k^T / tau``, cross-entropy with row i's positive at column i.

    Args:
        query, positive: ``(m, d)`` paired rows.
        tau: temperature.

    Returns:
        The mean loss (scalar tensor).
    """
    q, k = F.normalize(query, dim=-1), F.normalize(positive, dim=-1)
    return F.cross_entropy(q @ k.T / tau, torch.arange(len(q)))


@dataclass(frozen=True)
class LocalRecipe:
    """Client-side adapter training (FedSPA ``update_prototypes``; defaults after the dtd config).

    Attributes:
        epochs: passes over the client's few-shot features per round.
        batch: mini-batch size.
        lr: AdamW learning rate (eps 1e-4, cosine decay over the round).
        alpha, beta: Tip-Adapter cache weight and sharpness.
    """

    epochs: int = 5
    batch: int = 8
    lr: float = 6e-4
    alpha: float = 6.0
    beta: float = 3.0


def class_means(f: np.ndarray, y: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Few-shot class means ``(C, d)`` of features ``f`` with labels ``y``; a class with no image keeps
    its ``fallback`` row (the text feature)."""
    out = np.array(fallback, dtype=np.float32, copy=True)
    for c in np.unique(y):
        out[c] = f[y == c].mean(0)
    return out


def train_prototypes(prototypes: np.ndarray, semantic: np.ndarray, f: np.ndarray, y: np.ndarray,
                     recipe: LocalRecipe, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """One client's local round: train only the prototypes by cross-entropy of :func:`tip_logits`.

    Returns:
        (the new prototypes ``(C, d)``, seconds spent).
    """
    t0 = time.perf_counter()
    p = torch.nn.Parameter(torch.as_tensor(prototypes, dtype=torch.float32).clone())
    sem = torch.as_tensor(semantic)
    ft, yt = torch.as_tensor(f), torch.as_tensor(y)
    batch = min(recipe.batch, len(ft))
    per_epoch = -(-len(ft) // batch)
    opt = torch.optim.AdamW([p], lr=recipe.lr, eps=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, recipe.epochs * per_epoch)
    for _ in range(recipe.epochs):
        order = torch.as_tensor(rng.permutation(len(ft)))
        for i in range(per_epoch):
            idx = order[i * batch:(i + 1) * batch]
            loss = F.cross_entropy(tip_logits(ft[idx], sem, p, recipe.alpha, recipe.beta), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return p.detach().numpy(), time.perf_counter() - t0


@dataclass(frozen=True)
class ServerRecipe:
    """Server-side alignment of the global semantic prototypes (FedSPA ``update_global_text_features``).

    Attributes:
        epochs: passes over the uploaded prototypes per round.
        batch: mini-batch size (in-batch negatives).
        lr: AdamW learning rate (eps 1e-4, cosine decay).
        lam: weight of the stay-near-the-text term.
        tau: InfoNCE temperature.
        fallback_quantile: the fallback rule's threshold, as a quantile in [0, 1) of the round's client
            cosines (:func:`fallback_threshold`); 0 switches the rule off (as the public code runs).
    """

    epochs: int = 20
    batch: int = 8
    lr: float = 6e-4
    lam: float = 0.299
    tau: float = 0.01
    fallback_quantile: float = 0.0


def server_align(semantic: np.ndarray, text: np.ndarray, uploads: np.ndarray, labels: np.ndarray,
                 recipe: ServerRecipe, rng: np.random.Generator) -> np.ndarray:
    """Update the global semantic prototypes from the uploaded prototype rows.

    Loss per batch: ``info_nce(uploads, W[labels], tau) - lam * sum(W * T) / C``; AdamW; rows of
    ``W`` normalised at the end.

    Args:
        semantic: current ``W`` ``(C, d)``.
        text: ``T`` ``(C, d)``.
        uploads: ``(m, d)`` prototype rows from all clients; labels ``(m,)`` their classes.

    Returns:
        The new ``W`` ``(C, d)``, unit rows.
    """
    w = torch.nn.Parameter(torch.as_tensor(semantic, dtype=torch.float32).clone())
    t = torch.as_tensor(text)
    q, lab = torch.as_tensor(uploads, dtype=torch.float32), torch.as_tensor(labels)
    per_epoch = -(-len(q) // recipe.batch)
    opt = torch.optim.AdamW([w], lr=recipe.lr, eps=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, recipe.epochs * per_epoch))
    for _ in range(recipe.epochs):
        order = torch.as_tensor(rng.permutation(len(q)))
        for i in range(per_epoch):
            idx = order[i * recipe.batch:(i + 1) * recipe.batch]
            loss = info_nce(q[idx], w[lab[idx]], recipe.tau) - recipe.lam * (w * t).sum() / w.shape[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return F.normalize(w.detach(), dim=1).numpy()


def client_cosines(uploads: list[tuple[np.ndarray, np.ndarray]], semantic: np.ndarray) -> np.ndarray:
    """Each client's agreement with the global semantic prototypes: the mean over its uploaded rows of
    the cosine between the row and the global semantic prototype of the same class (the quantity the
    public code's ``cosine_compute`` option names; FedSPA server, fallback rule).

    Args:
        uploads: per client ``(rows (m_k, d), labels (m_k,))``.
        semantic: ``W`` ``(C, d)``.

    Returns:
        ``(K,)`` float64 mean cosines in [-1, 1]; NaN for a client that uploaded no row.
    """
    w = semantic / np.linalg.norm(semantic, axis=1, keepdims=True)
    out = np.full(len(uploads), np.nan)
    for k, (rows, labels) in enumerate(uploads):
        if len(rows):
            r = rows / np.linalg.norm(rows, axis=1, keepdims=True)
            out[k] = float((r * w[labels]).sum(1).mean())
    return out


def fallback_threshold(cosines: np.ndarray, quantile: float) -> float:
    """The fallback threshold set from the observed cosines: their ``quantile`` (numpy's linear
    interpolation over the finite values), so that about that share of the clients falls below it.

    With ``quantile = 0`` the threshold is ``-inf``: no client falls back (the rule is off, as in the
    public code, where the cosines are never filled in). A fixed threshold (the code's 0.5) is not
    used: how close image prototypes come to text-initialised prototypes depends on the encoder's
    modality gap, not on how far a client is from the others.

    Args:
        cosines: ``(K,)`` client cosines (:func:`client_cosines`; NaN entries are ignored).
        quantile: in [0, 1).

    Returns:
        The threshold; clients with a cosine strictly below it fall back.

    Raises:
        ValueError: ``quantile`` outside [0, 1).
    """
    if not 0.0 <= quantile < 1.0:
        raise ValueError(f"fallback_quantile: must be in [0, 1), got {quantile!r}")
    finite = np.asarray(cosines, dtype=float)
    finite = finite[np.isfinite(finite)]
    if quantile == 0.0 or finite.size == 0:
        return float("-inf")
    return float(np.quantile(finite, quantile))


def disagreeing_clients(uploads: list[tuple[np.ndarray, np.ndarray]], semantic: np.ndarray,
                        epsilon: float) -> set[int]:
    """The fallback rule: clients whose uploaded prototypes have a mean cosine to the global
    semantic prototype of the same class (:func:`client_cosines`) below ``epsilon``; they use the
    text features next round. ``epsilon`` comes from :func:`fallback_threshold`.

    Args:
        uploads: per client ``(rows (m_k, d), labels (m_k,))``.
        semantic: ``W`` ``(C, d)``.
        epsilon: the threshold (``-inf``: nobody falls back).

    Returns:
        The indices of the disagreeing clients (a client without uploads never falls back).
    """
    cos = client_cosines(uploads, semantic)
    return {k for k, v in enumerate(cos) if np.isfinite(v) and v < epsilon}


def fedavg_prototypes(uploads: list[tuple[np.ndarray, np.ndarray, np.ndarray]], previous: np.ndarray) -> np.ndarray:
    """FedAvg of prototypes: per class, the mean of the uploaded rows weighted by the clients' image
    counts of that class; a class nobody uploaded keeps its ``previous`` row.

    Args:
        uploads: per client ``(rows (m_k, d), labels (m_k,), counts (m_k,))``.
        previous: ``(C, d)``.
    """
    num = np.zeros_like(previous, dtype=np.float64)
    den = np.zeros(len(previous))
    for rows, labels, counts in uploads:
        np.add.at(num, labels, rows * counts[:, None])
        np.add.at(den, labels, counts)
    out = np.array(previous, dtype=np.float32, copy=True)
    seen = den > 0
    out[seen] = (num[seen] / den[seen, None]).astype(np.float32)
    return out


# ------------------------------------------------------------------ FedCoOp-like prompt learning


class PromptText:
    """CoOp-style learnable context in MiniLM's input-embedding space (a FedCoOp / PromptFL analogue).

    The text of class c is ``[CLS] v_1 ... v_n <class name tokens> [SEP]`` where ``v_i`` are learned
    384-d vectors shared by all classes (initialised from the embeddings of "a picture of the");
    ``features(ctx)`` runs the frozen MiniLM and mean-pools -> ``(C, 384)`` unit rows, with gradient to ``ctx``.
    """

    def __init__(self, names: list[str], n_ctx: int = 4):
        from .._lm import sentence_encoder

        enc = sentence_encoder()
        self.tok, self.model = enc.tokenizer, enc.model
        for prm in self.model.parameters():
            prm.requires_grad_(False)
        emb = self.model.embeddings.word_embeddings
        init_ids = self.tok("a picture of the", add_special_tokens=False)["input_ids"][:n_ctx]
        while len(init_ids) < n_ctx:
            init_ids.append(init_ids[-1])
        self.init_ctx = emb(torch.as_tensor(init_ids)).detach().clone()
        name_ids = [self.tok(n, add_special_tokens=False)["input_ids"] for n in names]
        length = 2 + n_ctx + max(len(i) for i in name_ids)
        cls, sep, pad = self.tok.cls_token_id, self.tok.sep_token_id, self.tok.pad_token_id
        self.n_ctx = n_ctx
        self.ids = torch.full((len(names), length), pad, dtype=torch.long)
        self.mask = torch.zeros(len(names), length, dtype=torch.long)
        for c, ids in enumerate(name_ids):
            row = [cls] + [pad] * n_ctx + ids + [sep]
            self.ids[c, :len(row)] = torch.as_tensor(row)
            self.mask[c, :len(row)] = 1
        with torch.no_grad():
            self.base = emb(self.ids)

    def features(self, ctx: torch.Tensor) -> torch.Tensor:
        """Class text features ``(C, 384)`` for context vectors ``ctx`` ``(n_ctx, 384)``."""
        x = self.base.clone()
        x[:, 1:1 + self.n_ctx] = ctx
        hidden = self.model(inputs_embeds=x, attention_mask=self.mask).last_hidden_state
        m = self.mask.unsqueeze(-1).float()
        return F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)


def train_context(prompt: PromptText, ctx: np.ndarray, f: np.ndarray, y: np.ndarray, *, steps: int, lr: float
                  ) -> tuple[np.ndarray, float]:
    """One client's FedCoOp round: ``steps`` full-batch Adam steps on the context vectors by
    cross-entropy of ``100 f T(ctx)^T`` (back-propagating through the frozen MiniLM).

    Returns:
        (the new context ``(n_ctx, 384)``, seconds spent).
    """
    t0 = time.perf_counter()
    p = torch.nn.Parameter(torch.as_tensor(ctx).clone())
    opt = torch.optim.Adam([p], lr=lr)
    ft, yt = torch.as_tensor(f), torch.as_tensor(y)
    for _ in range(steps):
        loss = F.cross_entropy(LOGIT_SCALE * ft @ prompt.features(p).T, yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return p.detach().numpy(), time.perf_counter() - t0
