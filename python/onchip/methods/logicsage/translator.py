"""System 1: a tiny sentence -> DSL translator and a tiny neural answerer, both trained here.

No packaged model writes logic programs (methods-plan 0.1), so both are
:class:`onchip.methods._tiny.TinyTransformer` models trained with a small budget on training phrasings
only: the translator's mistakes on held-out phrasings (a dropped "no", a swapped "right of", a mangled
declaration list) are its own, not injected. The translator also *answers the repair questions*: every
candidate edit the solver feedback proposes is scored by its log-probability given the sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _tiny
from . import ANSWERS
from .problems import COLORS, CONCEPTS, DEPTHS, ENTITIES, ORDINALS, PROPERTIES, TEMPLATES, make_problem
from .solver import DECLS, FORMS

SEP = "=>"


def vocab() -> _tiny.Vocab:
    """Every word of every phrasing (held-out ones included: they are real words, just never trained
    on), the symbols and the DSL keywords."""
    words = [SEP, "not", *DECLS, *FORMS, *CONCEPTS, *PROPERTIES, *ENTITIES, *COLORS, *ORDINALS, "."]
    for phr in TEMPLATES.values():
        for p in phr:
            words += [w for w in p.split() if not w.startswith("{")]
    return _tiny.Vocab(words)


@dataclass(frozen=True)
class SystemOneTraining:
    """Training budgets (small on purpose). Problems are drawn uniformly over datasets and depths."""

    problems: int = 300
    translator_steps: int = 600
    answerer_problems: int = 1200
    answerer_steps: int = 400
    batch: int = 32
    d_model: int = 64


def _training_problems(seed: int, n: int, label: str):
    from .._report import rng as named_rng

    r = named_rng(seed, "logicsage", label)
    cells = [(ds, d) for ds, ds_depths in DEPTHS.items() for d in ds_depths]
    return [make_problem(r, *cells[int(r.integers(len(cells)))], held_out=False) for _ in range(n)]


def train_system_one(seed: int, cfg: SystemOneTraining = SystemOneTraining(), progress: bool = False):
    """(translator, answerer, vocab) for ``seed``, trained once and kept in the onchip cache."""
    import torch

    v = vocab()
    probs = _training_problems(seed, cfg.problems, "translator")
    pairs = [(s, line) for p in probs for s, line in zip(p.sentences, p.program)]
    seqs, starts = [], []
    for s, line in pairs:
        prompt = v.encode(s + " " + SEP, bos=True)
        seqs.append(prompt + v.encode(line, eos=True))
        starts.append(len(prompt))

    def tbatches(g):
        idx = g.integers(0, len(seqs), cfg.batch)
        ids = _tiny.pad_batch([seqs[i] for i in idx])
        mask = np.zeros_like(ids)
        for j, i in enumerate(idx):
            mask[j, starts[i]:len(seqs[i])] = 1
        return ids, mask

    tc = _tiny.TinyConfig(vocab=len(v), d_model=cfg.d_model, n_layers=2, n_heads=4, max_len=40)
    translator = _tiny.cached_model(
        "tiny_logicsage_tr", tc, ["v1", repr(cfg), seed, f"torch{torch.__version__}", f"threads{torch.get_num_threads()}"],
        lambda m: _tiny.train(m, tbatches, steps=cfg.translator_steps, seed=seed, progress=progress,
                              desc="translator"))

    aprobs = _training_problems(seed, cfg.answerer_problems, "answerer")
    atexts = [v.encode(p.text) for p in aprobs]
    alabels = np.array([ANSWERS.index(p.answer) for p in aprobs])
    ac = _tiny.TinyConfig(vocab=len(v), d_model=cfg.d_model, n_layers=2, n_heads=4, max_len=128, causal=False,
                          n_classes=len(ANSWERS))

    def abatches(g):
        idx = g.integers(0, len(atexts), cfg.batch)
        return _tiny.pad_batch([atexts[i] for i in idx]), alabels[idx]

    def aloss(m, ids, y):
        return torch.nn.functional.cross_entropy(m(ids)["class_logits"], y)

    answerer = _tiny.cached_model(
        "tiny_logicsage_ans", ac, ["v1", repr(cfg), seed, f"torch{torch.__version__}",
                                   f"threads{torch.get_num_threads()}"],
        lambda m: _tiny.train(m, abatches, steps=cfg.answerer_steps, seed=seed, loss_fn=aloss, progress=progress,
                              desc="answerer"))
    return translator, answerer, v


def neural_answers(answerer, v: _tiny.Vocab, texts: list[str], dataset: list[str]) -> list[tuple[str, float]]:
    """System 1's direct answers: (answer, probability) per problem; "Unknown" is excluded for the
    datasets that never have it (ProntoQA, deduction)."""
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 64):
            ids = torch.as_tensor(_tiny.pad_batch([v.encode(t)[:128] for t in texts[i:i + 64]]))
            p = torch.softmax(answerer(ids)["class_logits"], -1).numpy()
            for j, row in enumerate(p):
                if dataset[i + j] != "proofwriter":
                    row = row.copy()
                    row[2] = 0
                    row /= row.sum()
                k = int(row.argmax())
                out.append((ANSWERS[k], float(row[k])))
    return out


def translate(model, v: _tiny.Vocab, sentences: list[str], *, temperature: float = 0.0,
              rng: np.random.Generator | None = None, passes: bool = False):
    """One DSL line per sentence (greedy, or sampled at ``temperature``), in one batch.

    Args:
        passes: also return the translator forward passes spent per sentence (one per generated token,
            the end token included: each token needs one forward over the sentence and the tokens so far).

    Returns:
        The lines ``list[str]``; with ``passes``, ``(lines, forwards)`` where ``forwards`` is an int array
        ``(len(sentences),)``.
    """
    prefixes = [v.encode(s + " " + SEP, bos=True) for s in sentences]
    gen = _tiny.greedy_decode(model, prefixes, max_new=12, temperature=temperature, rng=rng)
    lines = [v.decode(g) for g in gen]
    return (lines, np.array([len(g) for g in gen], np.int64)) if passes else lines


def line_logprob(model, v: _tiny.Vocab, pairs: list[tuple[str, str]]) -> np.ndarray:
    """log p(line | sentence) under the translator for each (sentence, line), in nats; ``(n,)``.

    Costs one translator forward pass per pair (teacher-forced over sentence and line)."""
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(pairs), 256):
            chunk = pairs[i:i + 256]
            prompts = [v.encode(s + " " + SEP, bos=True) for s, _ in chunk]
            ids = _tiny.pad_batch([p + v.encode(line, eos=True) for p, (_, line) in zip(prompts, chunk)])
            out.append(_tiny.sequence_logprob(model, ids, [len(p) for p in prompts]).numpy())
    return np.concatenate(out) if out else np.zeros(0)
