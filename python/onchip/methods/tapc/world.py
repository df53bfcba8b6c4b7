"""The synthetic world: a prompt mix where the reference model's perplexity is informative for one
type and misleading for the other, the reference model trained on it, and the preference pairs.

* factual: ``fact capital of e17 :`` -> the entity's city (``c4``). The reference corpus states
  the facts of 70 % of the entities (with a few wrong mentions): there the right answer has the
  lower perplexity; for the other entities the reference model can only guess.
* creative: ``poem about t12 :`` -> three words (adjective noun verb). Good answers are fresh
  combinations of the word pools. Bad ones are mostly (70 %) stock phrases - a handful of fixed
  triples that make up most of the corpus's poems, so the bad answer has the *lower* perplexity -
  and otherwise scrambled word order (noun verb adjective), which the reference model finds unlikely.

Preference pairs put the good answer first; :func:`flip` swaps a known fraction (the noisy labels).
Train pairs use entities / topics disjoint from the held-out evaluation pairs; every fact is in
the reference corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_ENTITIES, N_CITIES, N_TOPICS, POOL, N_CLICHES = 80, 20, 40, 12, 6
KNOWN_SHARE, CLICHE_SHARE = 0.7, 0.7
TRAIN_ENTITIES, TRAIN_TOPICS = 50, 28


@dataclass(frozen=True)
class World:
    """Facts and stock phrases of one seed.

    Attributes:
        capital: city index per entity ``(N_ENTITIES,)``.
        known: whether the reference corpus states the entity's fact ``(N_ENTITIES,)`` bool.
        cliches: the stock phrases ``(N_CLICHES, 3)`` of word indices (adjective, noun, verb).
    """

    capital: np.ndarray
    known: np.ndarray
    cliches: np.ndarray


def make_world(rng: np.random.Generator) -> World:
    """Random facts, which of them the reference corpus states, and stock phrases."""
    return World(capital=rng.integers(0, N_CITIES, N_ENTITIES), known=rng.random(N_ENTITIES) < KNOWN_SHARE,
                 cliches=np.column_stack([rng.integers(0, POOL, N_CLICHES) for _ in range(3)]))


def words() -> list[str]:
    """Every word of the language, for the :class:`onchip.methods._tiny.Vocab`."""
    return (["fact", "capital", "of", ":", "poem", "about"] + [f"e{i}" for i in range(N_ENTITIES)]
            + [f"c{i}" for i in range(N_CITIES)] + [f"t{i}" for i in range(N_TOPICS)]
            + [f"{k}{i}" for k in "anv" for i in range(POOL)])


def factual_prompt(e: int) -> str:
    return f"fact capital of e{e} :"


def creative_prompt(t: int) -> str:
    return f"poem about t{t} :"


def phrase(triple) -> str:
    a, n, v = triple
    return f"a{a} n{n} v{v}"


def scrambled_phrase(rng: np.random.Generator) -> str:
    """Three pool words in the wrong order (noun verb adjective)."""
    a, n, v = rng.integers(0, POOL, 3)
    return f"n{n} v{v} a{a}"


def novel_phrase(w: World, rng: np.random.Generator) -> str:
    """A fresh three-word combination that is not a stock phrase."""
    while True:
        t = rng.integers(0, POOL, 3)
        if not (w.cliches == t).all(1).any():
            return phrase(t)


def reference_corpus(w: World, rng: np.random.Generator, *, fact_repeats: int = 4, wrong_rate: float = 0.1,
                     n_poems: int = 800, cliche_rate: float = 0.75) -> list[str]:
    """Texts the reference model is trained on: every known fact ``fact_repeats`` times (a ``wrong_rate``
    share of mentions name a wrong city), and ``n_poems`` poems, a ``cliche_rate`` share of them stock phrases."""
    texts = []
    for e in np.flatnonzero(w.known):
        for _ in range(fact_repeats):
            city = w.capital[e] if rng.random() >= wrong_rate else (w.capital[e] + rng.integers(1, N_CITIES)) % N_CITIES
            texts.append(f"{factual_prompt(e)} c{city}")
    for _ in range(n_poems):
        t = rng.integers(0, N_TOPICS)
        ans = phrase(w.cliches[rng.integers(0, N_CLICHES)]) if rng.random() < cliche_rate else novel_phrase(w, rng)
        texts.append(f"{creative_prompt(t)} {ans}")
    return texts


@dataclass(frozen=True)
class Pairs:
    """Preference pairs; ``n`` of them.

    Attributes:
        prompt, chosen, rejected: texts (lists of str).
        task: task index per pair ``(n,)`` into :data:`onchip.methods.tapc.TASKS`.
        correct: 1 where ``chosen`` is really the better answer ``(n,)``.
    """

    prompt: list
    chosen: list
    rejected: list
    task: np.ndarray
    correct: np.ndarray

    @property
    def n(self) -> int:
        return len(self.prompt)

    def subset(self, idx) -> "Pairs":
        idx = np.asarray(idx)
        return Pairs([self.prompt[i] for i in idx], [self.chosen[i] for i in idx], [self.rejected[i] for i in idx],
                     self.task[idx], self.correct[idx])


def make_pairs(w: World, rng: np.random.Generator, n_per_task: int, *, held_out: bool) -> Pairs:
    """Clean pairs (good answer chosen), ``n_per_task`` of each type, shuffled; ``held_out`` draws the
    entities / topics that the training pairs never use."""
    prompts, chosen, rejected, task = [], [], [], []
    ents = np.arange(TRAIN_ENTITIES, N_ENTITIES) if held_out else np.arange(TRAIN_ENTITIES)
    tops = np.arange(TRAIN_TOPICS, N_TOPICS) if held_out else np.arange(TRAIN_TOPICS)
    for _ in range(n_per_task):
        e = rng.choice(ents)
        prompts.append(factual_prompt(e))
        chosen.append(f"c{w.capital[e]}")
        rejected.append(f"c{(w.capital[e] + rng.integers(1, N_CITIES)) % N_CITIES}")
        task.append(0)
    for _ in range(n_per_task):
        prompts.append(creative_prompt(rng.choice(tops)))
        chosen.append(novel_phrase(w, rng))
        rejected.append(phrase(w.cliches[rng.integers(0, N_CLICHES)]) if rng.random() < CLICHE_SHARE
                        else scrambled_phrase(rng))
        task.append(1)
    order = rng.permutation(len(prompts))
    return Pairs(prompts, chosen, rejected, np.asarray(task), np.ones(len(prompts), np.int64)).subset(order)


def flip(p: Pairs, rate: float, rng: np.random.Generator) -> Pairs:
    """Swap chosen and rejected on a random ``rate`` share of the pairs (exactly ``round(rate * n)``)."""
    k = int(round(rate * p.n))
    swap = np.zeros(p.n, bool)
    swap[rng.choice(p.n, k, replace=False)] = True
    ch = [r if s else c for c, r, s in zip(p.chosen, p.rejected, swap)]
    rj = [c if s else r for c, r, s in zip(p.chosen, p.rejected, swap)]
    return Pairs(p.prompt, ch, rj, p.task, np.where(swap, 1 - p.correct, p.correct))


def planted_flips(task: np.ndarray, d: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """The positive control's label noise, planted to depend on the prompt type: which pairs to swap.

    Factual pairs (task 0): a random ``round(rate * n)`` of them, as :func:`flip` (the reference
    perplexity stays informative). Creative pairs (task 1): ``round(rate * n)`` drawn only among the
    pairs whose perplexity differential ``d`` (of the clean pair) is negative, so that after the swap
    every wrong label is one the reference model agrees with (``d > 0``): on creative prompts ``d``
    then points the wrong way, and a calibration with one slope for both types cannot be right on
    both, while a task-aware one can (slope up on factual, down on creative).

    Args:
        task: task index per pair ``(n,)``; d: clean pairs' differentials ``(n,)``; rate: share flipped
            per type, in [0, 0.5); rng: the generator.

    Returns:
        bool ``(n,)``: the pairs to swap. Fewer creative ones when fewer than ``rate * n`` have ``d < 0``.

    Raises:
        ValueError: ``rate`` outside [0, 0.5) or shapes that differ.
    """
    task, d = np.asarray(task), np.asarray(d, dtype=float)
    if not 0 <= rate < 0.5:
        raise ValueError(f"rate: must be in [0, 0.5), got {rate!r}")
    if task.shape != d.shape:
        raise ValueError(f"d: expected one value per pair {task.shape}, got {d.shape}")
    swap = np.zeros(task.shape, bool)
    for k, pool in ((0, np.flatnonzero(task == 0)), (1, np.flatnonzero((task == 1) & (d < 0)))):
        want = int(round(rate * int((task == k).sum())))
        swap[rng.choice(pool, min(want, pool.size), replace=False)] = True
    return swap
