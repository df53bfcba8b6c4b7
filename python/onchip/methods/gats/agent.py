"""The tool-calling agent: a tiny decoder trained here on (request -> calls) pairs, and how it revises.

No packaged model follows a tool schema (methods-plan 0.1: SmolLM2/Gemma 270M ignore schemas), so the
agent is a :class:`onchip.methods._tiny.TinyTransformer` trained with a small budget on training
phrasings only; its mistakes on held-out phrasings and compositions are its own. It cannot read text
feedback, so a located validity/response error becomes *constrained re-decoding*: keep the output up to
the faulty token, forbid the refused value and allow only what the schema (or the simulated state)
accepts there, then let the model continue. A judge failure becomes a fresh sample (temperature).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _tiny
from .tools import ID_MAX, ID_MIN, PRIORITIES, SCHEMAS, TITLES, USERS, VERBS, calls_to_text, make_task

SEP = "=>"


def vocab() -> _tiny.Vocab:
    """The agent's words: training phrasings (held-out verbs are NOT in it: they read as ``<unk>``),
    values, ids, tool and argument names, ``$1``/``$2``, ``;`` and the separator."""
    words = ["please", "a", "ticket", "about", "the", "to", "and", "it", SEP, ";", "$1", "$2"]
    words += [w for ws in VERBS.values() for w in ws[:-1]]
    words += list(TITLES) + list(PRIORITIES) + list(USERS) + [str(i) for i in range(ID_MIN, ID_MAX + 1)]
    for name, s in SCHEMAS.items():
        words += [name, *s["parameters"]["properties"]]
    return _tiny.Vocab(words)


@dataclass(frozen=True)
class AgentTraining:
    """Training budget of the agent (kept small on purpose so that it makes mistakes)."""

    n_tasks: int = 500
    steps: int = 500
    batch: int = 32
    d_model: int = 64
    n_layers: int = 2
    lr: float = 3e-3


def train_agent(seed: int, cfg: AgentTraining = AgentTraining(), progress: bool = False):
    """The agent for ``seed`` (trained once, kept in the onchip cache): ``(model, vocab)``.

    Trained on ``cfg.n_tasks`` tasks of every kind with the training verbs only (:func:`.tools.make_task`).
    """
    import torch

    from .._report import rng as named_rng, seed_int

    v = vocab()
    tc = _tiny.TinyConfig(vocab=len(v), d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=4, max_len=64)
    r = named_rng(seed, "gats", "train-tasks")
    tasks = [make_task(r, held_out=False) for _ in range(cfg.n_tasks)]
    seqs, starts = [], []
    for t in tasks:
        prompt = v.encode(t.text + " " + SEP, bos=True)
        seqs.append(prompt + v.encode(calls_to_text(t.gold), eos=True))
        starts.append(len(prompt))

    def batches(g):
        idx = g.integers(0, len(seqs), cfg.batch)
        ids = _tiny.pad_batch([seqs[i] for i in idx])
        mask = np.zeros_like(ids)
        for j, i in enumerate(idx):
            mask[j, starts[i]:len(seqs[i])] = 1  # loss on the calls only
        return ids, mask

    def build(model):
        _tiny.train(model, batches, steps=cfg.steps, lr=cfg.lr, seed=seed_int(seed, "gats", "agent"),
                    progress=progress, desc="gats agent")

    # keyed by the task recipe (v2: every kind trained), the budget, the seed, torch's version and threads
    model = _tiny.cached_model("tiny_gats", tc, ["v2", repr(cfg), seed, torch.__version__, torch.get_num_threads()],
                               build)
    return model, v


@dataclass
class Request:
    """One decode: continue ``prefix`` (output tokens kept) of request ``text``; ``first`` restricts
    the first new token to these words (None = free); ``temperature`` 0 = greedy."""

    text: str
    prefix: list[str]
    first: list[str] | None = None
    temperature: float = 0.0


def decode(model, v: _tiny.Vocab, requests: list[Request], rng: np.random.Generator, max_new: int = 24) -> list[str]:
    """Run a batch of decodes; returns each output as text (prefix + continuation)."""
    out: list[str] = [""] * len(requests)
    for temp in sorted({r.temperature for r in requests}):
        rows = [i for i, r in enumerate(requests) if r.temperature == temp]
        prefixes = [v.encode(requests[i].text + " " + SEP, bos=True) + v.encode(" ".join(requests[i].prefix))
                    for i in rows]
        firsts = [None if requests[i].first is None else [v.stoi[w] for w in requests[i].first if w in v.stoi]
                  for i in rows]

        def allowed(row, gen):
            return firsts[row] if not gen and firsts[row] else None

        gen = _tiny.greedy_decode(model, prefixes, max_new=max_new, allowed=allowed, temperature=temp, rng=rng)
        for j, i in enumerate(rows):
            out[i] = " ".join(requests[i].prefix + v.decode(gen[j]).split())
    return out


def locate(tokens: list[str], where: tuple[int, str | None]) -> tuple[int, str]:
    """Token position of an error in an output: ``(position, what)`` with what = "name" (the tool name
    of call i), "value" (the value of argument a), "key" (the key a itself) or "missing" (a is absent:
    the position where call i ends)."""
    call, arg = where
    starts = [0] + [j + 1 for j, t in enumerate(tokens) if t == ";"]
    if call >= len(starts):
        return len(tokens), "missing"
    s = starts[call]
    e = starts[call + 1] - 1 if call + 1 < len(starts) else len(tokens)
    if arg is None:
        return s, "name"
    body = tokens[s + 1:e]
    for j in range(0, len(body) - 1, 2):
        if body[j] == arg:
            return s + 1 + j + 1, "value"
    if arg in body[::2]:  # a key with no value: treat as the key
        return s + 1 + body[::2].index(arg) * 2, "key"
    return e, "missing"


def candidates(tool: str | None, arg: str | None, what: str, known_ids: list[str]) -> list[str]:
    """Words the schema (and, for ids, the known state) accepts at an error position."""
    if what == "name" or tool not in SCHEMAS:
        return list(SCHEMAS)
    props = SCHEMAS[tool]["parameters"]["properties"]
    if what in ("missing", "key"):
        return list(props)
    p = props.get(arg, {})
    if "enum" in p:
        return list(p["enum"])
    return known_ids


def repair_request(text: str, output: str, where: tuple[int, str | None], *, state_ids: list[str]) -> Request | None:
    """A constrained re-decode for a located error (None if the error cannot be located).

    The output is kept up to the faulty token; the refused word is excluded from what the schema or the
    state allows there. ``state_ids`` are the ticket ids the feedback's state knows (``$k`` included).
    """
    tokens = output.split()
    pos, what = locate(tokens, where)
    starts = [0] + [j + 1 for j, t in enumerate(tokens) if t == ";"]
    call_start = starts[where[0]] if where[0] < len(starts) else None
    tool = tokens[call_start] if call_start is not None and call_start < len(tokens) else None
    if what == "missing":
        cur = set(tokens[call_start + 1:pos:2]) if call_start is not None else set()
        required = SCHEMAS.get(tool, {}).get("parameters", {}).get("required", [])
        need = [a for a in required if a not in cur] or [where[1]]
        return Request(text, tokens[:pos], [a for a in need if a])
    bad = tokens[pos] if pos < len(tokens) else None
    allowed = [w for w in candidates(tool, where[1], what, state_ids) if w != bad]
    return Request(text, tokens[:pos], allowed or None)
