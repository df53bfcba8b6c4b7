"""The two language subjects of ``onchip ink``: Gemma 3 270M (log-probabilities of the candidate
colours, attention from the answer position) and a tiny transformer trained here on the same task.

Scores per context: ``logp[c]`` for every colour ``c`` (next word after the question), accuracy =
gold colour ranked first among all colours, margin = ``logp[gold] - max_{c != gold} logp[c]``
(nats; > 0 iff correct). Attention share: the attention of the answer position (last token),
averaged over heads and layers, summed over the tokens of the gold, hard and easy documents.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .documents import COLOURS, FIRST, LAST, Context, make_context

KINDS = ("gold", "hard", "easy")


def _shares(att_row: np.ndarray, spans: list[tuple[int, int, str]]) -> dict[str, float]:
    out = {k: 0.0 for k in KINDS}
    for a, b, kind in spans:
        out[kind] += float(att_row[a:b].sum())
    return out


class GemmaSubject:
    """Gemma 3 270M base through :func:`onchip.methods._lm.causal_lm` (pinned prompt format:
    documents, then ``Question: ... Answer: The favourite colour of <name> is``)."""

    name = "gemma-270m"

    def __init__(self, lm):
        self.lm = lm
        tok = lm.tokenizer
        self.colour_ids = [tok(" " + c, add_special_tokens=False)["input_ids"][0] for c in COLOURS]

    def _ids(self, ctx: Context):
        tok = self.lm.tokenizer
        docs, question = ctx.text()
        ids = [tok.bos_token_id]
        spans = []
        for d, text in zip(ctx.docs, docs):
            piece = tok(text, add_special_tokens=False)["input_ids"]
            spans.append((len(ids), len(ids) + len(piece), d.kind))
            ids += piece
        ids += tok(question, add_special_tokens=False)["input_ids"]
        return ids, spans

    def score(self, contexts: Sequence[Context], *, attention: bool = False) -> list[dict]:
        """Per context: ``logp`` (colour -> nats), ``tokens``, and with ``attention`` the shares."""
        import torch

        model = self.lm.model
        out = []
        previous = getattr(model.config, "_attn_implementation", None)
        if attention and hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")   # attention weights need the eager path
        try:
            for ctx in contexts:
                ids, spans = self._ids(ctx)
                x = torch.as_tensor([ids])
                with torch.no_grad():
                    res = model(input_ids=x, logits_to_keep=1, output_attentions=attention)
                logp = torch.log_softmax(res.logits[0, -1].float(), -1)
                row = {"logp": {c: float(logp[i]) for c, i in zip(COLOURS, self.colour_ids)}, "tokens": len(ids)}
                if attention and res.attentions:
                    att = torch.stack([a[0, :, -1, :] for a in res.attentions]).mean((0, 1)).numpy()
                    row["attention"] = _shares(att, spans)
                out.append(row)
        finally:
            if attention and previous and hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation(previous)
        return out


# ------------------------------------------------------------------ tiny transformer


def tiny_vocabulary():
    from .._tiny import Vocab

    return Vocab(["likes", "owns", ";", "?", *FIRST, *LAST, *COLOURS,
                  "goats", "cats", "horses", "geese", "sheep", "dogs", "ducks", "pigs"])


class TinySubject:
    """A 2-layer decoder (d=64) trained here on the same retrieval task (word language, answer-only
    loss, batches of 32 contexts of ``n_docs`` documents with a uniformly drawn number of hard
    distractors), cached per seed and step count."""

    name = "tiny"

    def __init__(self, n_docs: int, *, seed: int, steps: int, progress: bool = False):
        from .._tiny import TinyConfig, cached_model, lm_loss, pad_batch
        from .._tiny import train as train_model

        self.vocab = vocab = tiny_vocabulary()
        self.n_docs = n_docs
        config = TinyConfig(vocab=len(vocab), d_model=64, n_layers=2, n_heads=4, max_len=5 * n_docs + 8)

        def batches(rng):
            ctxs = [make_context(rng, n_docs, int(rng.integers(0, n_docs))) for _ in range(32)]
            ids = pad_batch([vocab.encode(c.words(answer=True), bos=True) for c in ctxs])
            mask = np.zeros_like(ids)
            mask[np.arange(len(ids)), (ids != 0).sum(1) - 1] = 1
            return ids, mask

        def build(model):
            train_model(model, batches, steps=steps, seed=seed, progress=progress, desc="tiny ink",
                        loss_fn=lambda m, ids, mask: lm_loss(m, ids, mask))

        import torch

        # the weights depend on the torch build and the thread count (CPU reductions differ)
        self.model = cached_model("ink_tiny", config, ["ink-v2", n_docs, seed, steps, torch.__version__,
                                                       torch.get_num_threads()], build)
        self.colour_ids = [vocab.stoi[c] for c in COLOURS]

    def score(self, contexts: Sequence[Context], *, attention: bool = False) -> list[dict]:
        """Per context: ``logp`` (colour -> nats, over the whole vocabulary), ``tokens``, and with
        ``attention`` the attention shares of the answer position."""
        import torch

        from .._tiny import pad_batch

        v = self.vocab
        seqs = [v.encode(c.words(), bos=True) for c in contexts]
        with torch.no_grad():
            res = self.model(torch.as_tensor(pad_batch(seqs)), return_attention=attention)
        out = []
        for i, (c, s) in enumerate(zip(contexts, seqs)):
            logp = torch.log_softmax(res["logits"][i, len(s) - 1], -1)
            row = {"logp": {col: float(logp[j]) for col, j in zip(COLOURS, self.colour_ids)}, "tokens": len(s)}
            if attention:
                att = torch.stack([a[i, :, len(s) - 1, :] for a in res["attention"]]).mean((0, 1)).numpy()
                spans, pos = [], 1
                for d in c.docs:
                    n = len(d.words().split())
                    spans.append((pos, pos + n, d.kind))
                    pos += n
                row["attention"] = _shares(att, spans)
            out.append(row)
        return out


def accuracy_margin(ctx: Context, logp: dict[str, float]) -> tuple[bool, float]:
    """(gold ranked first among the colours, ``logp[gold] - max_{c != gold} logp[c]``)."""
    rival = max(v for c, v in logp.items() if c != ctx.answer)
    return logp[ctx.answer] > rival, logp[ctx.answer] - rival


def gold_scores(ctx: Context, logp: dict[str, float]) -> dict[str, float]:
    """The four readings of one answer: ``correct`` (gold ranked first among the colours, 0/1),
    ``gold_prob`` (p(gold), linear scale), ``gold_logp`` (log p(gold), nats) and ``margin``
    (``logp[gold] - max_{c != gold} logp[c]``, nats).

    The log readings bend a linear fall of probability: the margin's rival term is the log of a mass
    that starts near zero, so its first rise is large (a first drop by construction), and log p(gold)
    of a linearly falling p(gold) drops late. Accuracy and p(gold) carry no such bend.
    """
    ok, margin = accuracy_margin(ctx, logp)
    g = float(logp[ctx.answer])
    return {"correct": float(ok), "gold_prob": float(np.exp(g)), "gold_logp": g, "margin": float(margin)}
