"""Tiny transformers trained here, for the seed methods whose subject is a language model
and no packaged model qualifies (or as a second, fully controlled subject beside it).

One model serves all of them: :class:`TinyTransformer`, a pre-norm decoder (causal) or
encoder (bidirectional) with learned positions, optionally a top-1 mixture-of-experts FFN
(Switch Transformer, Fedus et al. 2022, sec. 2.1), sized ~0.1-1 M parameters so it trains
in seconds to minutes on 2 cores. A word-level :class:`Vocab` tokenises the synthetic
languages the methods generate; :func:`train` runs AdamW on (input, target, loss-mask)
batches; :func:`cached_model` keeps a trained state dict in the onchip cache, keyed by
everything it depends on.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ._torch import import_torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"


class Vocab:
    """A word-level vocabulary: index 0 is ``<pad>``, then ``<bos>``, ``<eos>``, ``<unk>``, then the
    words in first-seen order (deterministic for a deterministic corpus).

    Args:
        words: the words (whitespace tokens) to index, besides the four specials.
    """

    def __init__(self, words: Iterable[str]):
        self.itos: list[str] = [PAD, BOS, EOS, UNK]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}
        for w in words:
            if w not in self.stoi:
                self.stoi[w] = len(self.itos)
                self.itos.append(w)

    @classmethod
    def build(cls, texts: Iterable[str]) -> "Vocab":
        """A vocabulary of every whitespace token in ``texts``."""
        return cls(w for t in texts for w in t.split())

    def __len__(self) -> int:
        return len(self.itos)

    pad, bos, eos, unk = 0, 1, 2, 3

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        """Token ids of ``text`` (unknown words -> ``<unk>``), optionally framed by ``<bos>``/``<eos>``."""
        ids = [self.stoi.get(w, self.unk) for w in text.split()]
        return ([self.bos] if bos else []) + ids + ([self.eos] if eos else [])

    def decode(self, ids: Iterable[int]) -> str:
        """Words of ``ids``, stopping at ``<eos>`` and skipping ``<pad>``/``<bos>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos:
                break
            if i not in (self.pad, self.bos):
                out.append(self.itos[i])
        return " ".join(out)


def pad_batch(seqs: Sequence[Sequence[int]], length: int | None = None, value: int = 0) -> np.ndarray:
    """Right-pad integer sequences to ``length`` (default: the longest) -> ``(n, length)`` int64.

    Raises:
        ValueError: a sequence is longer than ``length``.
    """
    length = max((len(s) for s in seqs), default=0) if length is None else length
    out = np.full((len(seqs), length), value, np.int64)
    for i, s in enumerate(seqs):
        if len(s) > length:
            raise ValueError(f"sequence {i}: length {len(s)} exceeds {length}")
        out[i, :len(s)] = s
    return out


@dataclass(frozen=True)
class TinyConfig:
    """Shape of a :class:`TinyTransformer`.

    Attributes:
        vocab: vocabulary size.
        d_model: width; ``n_heads`` must divide it.
        n_layers, n_heads: depth and attention heads.
        max_len: longest sequence (learned positions).
        d_ff: FFN hidden width (default 4 * d_model).
        n_experts: 0 = dense FFN; >= 2 = top-1 routed experts of width ``d_ff`` each.
        causal: decoder (True) or bidirectional encoder (False).
        n_classes: > 0 adds a classification head on the mean-pooled final states.
        expert_by_type: route each token to the expert of its ``token_type`` (given to ``forward``)
            instead of the learned router (modality-routed experts); needs ``n_experts >= 2``.
        cross_topk: > 0 makes attention *selective across types*: a query attends to every key of its
            own ``token_type`` but only to its ``cross_topk`` best-scoring keys of other types (per head).
    """

    vocab: int
    d_model: int = 96
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 128
    d_ff: int = 0
    n_experts: int = 0
    causal: bool = True
    n_classes: int = 0
    expert_by_type: bool = False
    cross_topk: int = 0

    def __post_init__(self):
        for name in ("vocab", "d_model", "n_layers", "n_heads", "max_len"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads: must divide d_model={self.d_model}, got {self.n_heads}")
        if self.n_experts == 1 or self.n_experts < 0:
            raise ValueError(f"n_experts: 0 (dense) or >= 2, got {self.n_experts}")
        if self.expert_by_type and self.n_experts < 2:
            raise ValueError(f"expert_by_type: needs n_experts >= 2, got {self.n_experts}")
        if self.cross_topk < 0:
            raise ValueError(f"cross_topk: must be >= 0, got {self.cross_topk}")


def _modules():
    """The torch modules, defined on first use so importing this file does not import torch."""
    torch = import_torch()
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self, c: TinyConfig):
            super().__init__()
            self.c = c
            d_ff = c.d_ff or 4 * c.d_model
            self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
            self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
            self.proj = nn.Linear(c.d_model, c.d_model)
            n = max(c.n_experts, 1)
            self.up = nn.ModuleList(nn.Linear(c.d_model, d_ff) for _ in range(n))
            self.down = nn.ModuleList(nn.Linear(d_ff, c.d_model) for _ in range(n))
            self.router = nn.Linear(c.d_model, n) if c.n_experts else None

        def forward(self, x, key_pad, token_type=None):
            b, t, d = x.shape
            h = self.c.n_heads
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-1, -2) / math.sqrt(d // h)
            mask = key_pad[:, None, None, :]
            if self.c.causal:
                mask = mask | torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            if self.c.cross_topk and token_type is not None:
                # selective attention across types: of the other types' keys keep the top-k scores only
                cross = (token_type[:, :, None] != token_type[:, None, :])[:, None]
                # (the choice of keys is a mask: no gradient through the top-k, which also saves its backward)
                allowed = scores.detach().masked_fill(mask | ~cross, float("-inf"))
                kth = allowed.topk(min(self.c.cross_topk, t), -1).values[..., -1:]
                mask = mask | (cross & (allowed < kth))
            scores = scores.masked_fill(mask, float("-inf"))
            att = torch.softmax(scores, -1).nan_to_num(0.0)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            y = self.ln2(x)
            if self.router is None:
                return x + self.down[0](F.gelu(self.up[0](y))), att, None
            gate = torch.softmax(self.router(y), -1)
            top = gate.argmax(-1)
            if self.c.expert_by_type and token_type is not None:
                top = token_type.clamp(max=len(self.up) - 1)
                gate = torch.ones_like(gate)
            out = torch.zeros_like(y)
            for e in range(len(self.up)):
                sel = top == e
                if sel.any():
                    out[sel] = self.down[e](F.gelu(self.up[e](y[sel]))) * gate[sel][:, e:e + 1]
            return x + out, att, (gate, top)

    class TinyTransformer(nn.Module):
        def __init__(self, c: TinyConfig):
            super().__init__()
            self.config = c
            self.tok = nn.Embedding(c.vocab, c.d_model)
            self.pos = nn.Embedding(c.max_len, c.d_model)
            self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
            self.ln = nn.LayerNorm(c.d_model)
            self.head = nn.Linear(c.d_model, c.vocab, bias=False)
            self.cls = nn.Linear(c.d_model, c.n_classes) if c.n_classes else None

        def forward(self, ids, *, return_attention: bool = False, return_hidden: bool = False, token_type=None,
                    positions=None):
            b, t = ids.shape
            if t > self.config.max_len:
                raise ValueError(f"sequence length {t} exceeds max_len={self.config.max_len}")
            key_pad = ids == 0
            pos = torch.arange(t, device=ids.device)[None] if positions is None else positions
            x = self.tok(ids) + self.pos(pos)
            atts, routes = [], []
            for blk in self.blocks:
                x, att, route = blk(x, key_pad, token_type)
                atts.append(att)
                routes.append(route)
            x = self.ln(x)
            out = {"logits": self.head(x)}
            if self.cls is not None:
                keep = (~key_pad).unsqueeze(-1).to(x.dtype)
                out["class_logits"] = self.cls((x * keep).sum(1) / keep.sum(1).clamp(min=1))
            if return_attention:
                out["attention"] = atts
            if return_hidden:
                out["hidden"] = x
            if self.config.n_experts and not (self.config.expert_by_type and token_type is not None):
                out["routes"] = routes
                # Switch load-balancing loss: n * sum_e (token share_e * mean gate_e)
                aux = 0.0
                for gate, top in routes:
                    keep = ~key_pad
                    share = torch.stack([(top[keep] == e).float().mean() for e in range(gate.shape[-1])])
                    aux = aux + gate.shape[-1] * (share * gate[keep].mean(0)).sum()
                out["aux_loss"] = aux / len(routes)
            return out

    return TinyTransformer


def TinyTransformer(config: TinyConfig):
    """A new :class:`TinyTransformer` (a ``torch.nn.Module``) for ``config``.

    ``model(ids)`` with ``ids`` int64 ``(batch, time)`` (0 = padding, never attended to) returns
    a dict: ``logits`` ``(batch, time, vocab)``; ``class_logits`` ``(batch, n_classes)`` when the
    config has classes; ``attention`` (list per layer of ``(batch, heads, time, time)``) with
    ``return_attention=True``; ``hidden`` with ``return_hidden=True``; ``routes`` and the Switch
    ``aux_loss`` when ``n_experts >= 2`` (no ``aux_loss`` when the experts are routed by type).
    ``token_type`` int64 ``(batch, time)`` drives ``expert_by_type`` and ``cross_topk`` (both off when
    it is None, so callers without types get the plain model). ``positions`` int64 ``(batch, time)``
    (values < ``max_len``) replaces the default positions ``0..time-1``, e.g. to give the cells of two
    grids the same spatial positions.

    Raises:
        ValueError: (at call) a sequence longer than ``max_len``.
    """
    return _modules()(config)


def n_params(model) -> int:
    """Number of trainable parameters of a torch module."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def lm_loss(model, ids, loss_mask=None):
    """Next-token cross-entropy of a causal model on ``ids`` ``(batch, time)``: position t predicts
    t+1; ``loss_mask`` ``(batch, time)`` (bool/0-1, on the *target* positions 1..T-1 aligned to
    ``ids``) selects which targets count (default: every non-pad target)."""
    torch = import_torch()
    out = model(ids[:, :-1])
    target = ids[:, 1:]
    mask = (target != 0) if loss_mask is None else loss_mask[:, 1:].bool() & (target != 0)
    logp = torch.log_softmax(out["logits"], -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = -(logp * mask).sum() / mask.sum().clamp(min=1)
    return loss + 0.01 * out["aux_loss"] if "aux_loss" in out else loss


def sequence_logprob(model, ids, start: Sequence[int] | np.ndarray):
    """Summed log-probability of each row's tokens from position ``start[i]`` on (non-pad) under a
    causal model: ``(batch,)`` float tensor (nats). ``ids`` int64 ``(batch, time)``."""
    torch = import_torch()
    ids = torch.as_tensor(ids)
    logits = model(ids[:, :-1])["logits"]
    target = ids[:, 1:]
    logp = torch.log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    pos = torch.arange(1, ids.shape[1])[None]
    keep = (pos >= torch.as_tensor(np.asarray(start))[:, None]) & (target != 0)
    return (logp * keep).sum(-1)


def train(model, batches: Callable[[np.random.Generator], tuple], *, steps: int, lr: float = 3e-3,
          seed: int = 0, loss_fn: Callable | None = None, progress: bool = False, desc: str = "train",
          weight_decay: float = 0.01) -> list[float]:
    """Train ``model`` with AdamW (cosine decay, 5 % warm-up) for ``steps`` steps.

    Args:
        model: a torch module (e.g. :func:`TinyTransformer`).
        batches: ``batches(rng) -> tuple`` of arrays/tensors, one batch per call.
        steps: optimiser steps (>= 1).
        lr: peak learning rate.
        seed: seeds torch and the batch generator.
        loss_fn: ``loss_fn(model, *batch) -> scalar tensor`` (default :func:`lm_loss` on ``batch[0]``
            with the optional ``batch[1]`` as loss mask).
        progress: show a tqdm bar.

    Returns:
        The loss of every step.

    Raises:
        ValueError: ``steps`` < 1.
    """
    torch = import_torch()
    from onchip.progress import progress_bar

    if steps < 1:
        raise ValueError(f"steps: must be >= 1, got {steps}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    loss_fn = loss_fn or (lambda m, ids, mask=None: lm_loss(m, ids, mask))
    model.train()
    losses = []
    for _ in progress_bar(range(steps), desc=desc, disable=not progress, leave=False):
        batch = [torch.as_tensor(b) if isinstance(b, np.ndarray) else b for b in batches(rng)]
        loss = loss_fn(model, *batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def greedy_decode(model, prefix: Sequence[Sequence[int]], *, max_new: int, eos: int = 2,
                  allowed: Callable[[int, list[int]], Sequence[int] | None] | None = None,
                  temperature: float = 0.0, rng: np.random.Generator | None = None) -> list[list[int]]:
    """Continue each prefix of a causal model up to ``max_new`` tokens or ``eos``.

    Args:
        prefix: token ids per row (no padding).
        allowed: optional constraint ``allowed(row, generated_so_far) -> token ids`` (None = any):
            the constrained decoding that keeps a small model inside a grammar.
        temperature: 0 = greedy (argmax); > 0 samples with ``rng``.

    Returns:
        The generated ids per row (without the prefix, ending at ``eos`` when it was produced).
    """
    torch = import_torch()
    rows = [list(p) for p in prefix]
    gen: list[list[int]] = [[] for _ in rows]
    done = [False] * len(rows)
    with torch.no_grad():
        for _ in range(max_new):
            ids = torch.as_tensor(pad_batch([r + g for r, g in zip(rows, gen)]))
            logits = model(ids)["logits"]
            lengths = [len(r) + len(g) for r, g in zip(rows, gen)]
            for i in range(len(rows)):
                if done[i]:
                    continue
                step = logits[i, lengths[i] - 1].clone()
                ok = allowed(i, gen[i]) if allowed else None
                if ok is not None:
                    masked = torch.full_like(step, float("-inf"))
                    masked[list(ok)] = step[list(ok)]
                    step = masked
                if temperature > 0:
                    p = torch.softmax(step / temperature, -1).numpy().astype(np.float64)
                    tok = int((rng or np.random.default_rng()).choice(len(p), p=p / p.sum()))
                else:
                    tok = int(step.argmax())
                gen[i].append(tok)
                done[i] = tok == eos
            if all(done):
                break
    return gen


def cached_model(name: str, config: TinyConfig, key_parts: Sequence[str], build: Callable[[object], None], *,
                 init_seed: int | None = None):
    """A :func:`TinyTransformer` trained once and kept in the onchip cache.

    The model's initial weights are drawn from torch's generator seeded with ``init_seed`` (default: a
    number derived from ``name``, ``config`` and ``key_parts``), inside a fork of the generator: an entry
    is a function of its key alone, whichever process builds it and whatever ran there before (torch
    seeds its global generator differently in every process), and the caller's generator is left as it
    was, whether the entry was built or loaded.

    Args:
        name: entry family (lower-case letters, digits, ``_``), e.g. ``"tiny_ink"``.
        config: the model's shape (part of the key).
        key_parts: everything else the trained weights depend on (data recipe, steps, seed); the key
            also holds the torch version and thread count.
        build: ``build(model)`` trains the fresh model in place.
        init_seed: seed of the initial weights (an integer >= 0, part of the key), e.g. a named stream
            of the run's seed (:func:`onchip.methods._report.seed_int`); None derives it from the key.

    Returns:
        The trained model in eval mode (loaded from the cache when present).

    Raises:
        ValueError: ``init_seed`` is negative.
    """
    torch = import_torch()
    from onchip.cache import cached_build, digest

    shape = repr(sorted(asdict(config).items()))
    if init_seed is None:
        init_seed = int(digest(name, shape, *map(str, key_parts))[:15], 16)
    if init_seed < 0:
        raise ValueError(f"init_seed: must be >= 0, got {init_seed}")
    # the torch version and thread count change float reductions, hence the trained weights
    key = digest(name, shape, *map(str, key_parts), f"init {init_seed}", torch.__version__,
                 str(torch.get_num_threads()))[:32]

    def fill(folder: Path) -> None:
        torch.manual_seed(init_seed)
        model = TinyTransformer(config)
        build(model)
        torch.save(model.state_dict(), folder / "model.pt")

    with torch.random.fork_rng(devices=[]):
        entry, _ = cached_build(name, key, fill)
        model = TinyTransformer(config)
    model.load_state_dict(torch.load(entry / "model.pt", weights_only=True))
    model.eval()
    return model
