"""Synthetic contexts about fictional entities: one relevant document, hard distractors, easy filler.

A context has ``n_docs`` documents: the gold one states the queried relation (favourite colour) of
the queried entity; ``h`` hard distractors state the *same relation* with a *conflicting value*
for confusable entities (same first name, other surname); the rest is easy filler about other
entities and another relation. The proportion of hard distractors among the non-gold slots is
``p = h / (n_docs - 1)``; the length stays fixed as p varies (every document has the same shape).
Names are invented, so no answer can be memorised. The gold position is drawn uniformly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

FIRST = ("Vorlan", "Teskid", "Maribo", "Quenlo", "Darsim", "Olvetha", "Brinzo", "Kaspel", "Yorrin", "Selbeth",
         "Ulmaro", "Fendrik", "Zavrel", "Imbrek", "Castol", "Nerith")
LAST = ("Quillrane", "Habbersol", "Tovanek", "Morrivan", "Pellgast", "Shandrow", "Kelvimar", "Ostrebin",
        "Varnholt", "Lisquet", "Drummeck", "Fallowin", "Greskov", "Amberlit", "Tursiven", "Wemblow",
        "Corbesk", "Yallomir", "Ristavel", "Brackhund")
#: surnames for long contexts (more hard distractors than :data:`LAST` holds): every pair of the syllables
#: below, none of them in :data:`LAST`; only :func:`make_context` with ``surnames=LONG_LAST`` uses them
LONG_LAST = LAST + tuple(a + b for a in ("Brem", "Dask", "Fol", "Grin", "Hask", "Jor", "Lund", "Mav", "Norb", "Pret")
                         for b in ("ellow", "amir", "ostik", "urden", "aswell", "ington"))
COLOURS = ("red", "blue", "green", "yellow", "purple", "orange", "black", "white", "brown", "pink", "grey", "silver")
JOBS = ("baker", "pilot", "tailor", "farmer", "painter", "doctor", "miner", "sailor")
TOWNS = ("Ostmere", "Kelbridge", "Vantor", "Prilholm", "Durnsby", "Elvaston", "Quarrow", "Feldmoor")
ANIMALS = ("goats", "cats", "horses", "geese", "sheep", "dogs", "ducks", "pigs")


@dataclass(frozen=True)
class Doc:
    """One document. ``kind``: ``gold`` | ``hard`` | ``easy``; ``value``: the colour (None for easy)."""

    kind: str
    first: str
    last: str
    job: str
    town: str
    value: str | None
    count: int = 0
    animal: str = ""

    def text(self) -> str:
        """The document as English (Gemma)."""
        who = f"{self.first} {self.last}"
        head = f"{who} is a {self.job} from {self.town}."
        if self.value is None:
            return f"{head} {who} keeps {self.count} {self.animal} on a small farm."
        return f"{head} The favourite colour of {who} is {self.value}."

    def words(self) -> str:
        """The document in the tiny model's word language."""
        if self.value is None:
            return f"{self.first} {self.last} owns {self.animal} ;"
        return f"{self.first} {self.last} likes {self.value} ;"


@dataclass(frozen=True)
class Context:
    """A query with its documents (in order). ``answer`` is the gold colour."""

    docs: tuple[Doc, ...]
    first: str
    last: str
    answer: str

    @property
    def p(self) -> float:
        """Proportion of hard distractors among the non-gold documents."""
        n = len(self.docs) - 1
        return sum(d.kind == "hard" for d in self.docs) / n if n else 0.0

    @property
    def distractor_values(self) -> list[str]:
        return [d.value for d in self.docs if d.kind == "hard"]

    def text(self) -> tuple[list[str], str]:
        """(document texts, question text) for Gemma; the answer is the next word after the question."""
        q = (f"\nQuestion: What is the favourite colour of {self.first} {self.last}?\n"
             f"Answer: The favourite colour of {self.first} {self.last} is")
        return [d.text() + "\n" for d in self.docs], q

    def words(self, answer: bool = False) -> str:
        """The context in the tiny model's words (question ``? first last likes``, then the answer)."""
        body = " ".join(d.words() for d in self.docs)
        return f"{body} ? {self.first} {self.last} likes" + (f" {self.answer}" if answer else "")


def make_context(rng: np.random.Generator, n_docs: int, n_hard: int, surnames: tuple[str, ...] = LAST) -> Context:
    """A context of ``n_docs`` documents with ``n_hard`` hard distractors (the rest easy filler).

    ``surnames`` is the pool of family names (the gold and every hard distractor need distinct ones):
    :data:`LAST` (the tiny model's vocabulary) or :data:`LONG_LAST` for long contexts (Gemma only).

    Raises:
        ValueError: ``n_docs`` < 1 or ``n_hard`` outside 0..n_docs-1, or more hard distractors than
            surnames allow.
    """
    if n_docs < 1 or not 0 <= n_hard <= n_docs - 1:
        raise ValueError(f"n_hard: must be in 0..{n_docs - 1} for {n_docs} documents, got {n_hard}")
    if n_hard + 1 > len(surnames):
        raise ValueError(f"n_hard: at most {len(surnames) - 1} hard distractors (surnames), got {n_hard}")
    first = str(rng.choice(FIRST))
    lasts = [str(s) for s in rng.choice(surnames, n_hard + 1, replace=False)]
    answer = str(rng.choice(COLOURS))
    others = [c for c in COLOURS if c != answer]

    def pick(seq):
        return str(rng.choice(seq))

    gold = Doc("gold", first, lasts[0], pick(JOBS), pick(TOWNS), answer)
    hard = [Doc("hard", first, lasts[i + 1], pick(JOBS), pick(TOWNS), pick(others)) for i in range(n_hard)]
    other_first = [f for f in FIRST if f != first]
    easy = [Doc("easy", pick(other_first), pick(surnames), pick(JOBS), pick(TOWNS), None, int(rng.integers(2, 10)),
                pick(ANIMALS)) for _ in range(n_docs - 1 - n_hard)]
    rest = hard + easy
    order = rng.permutation(len(rest))
    rest = [rest[i] for i in order]
    pos = int(rng.integers(0, n_docs))
    docs = rest[:pos] + [gold] + rest[pos:]
    return Context(tuple(docs), first, lasts[0], answer)


def without_surname(ctx: Context, rng: np.random.Generator, surnames: tuple[str, ...] = LAST) -> Context:
    """``ctx`` asked about a surname that no document holds (the positive control's plant): the gold
    document and every hard distractor then match the query only by first name, so no reader can tell
    them apart from the context; the answer stays the gold colour.

    Raises:
        ValueError: every surname of ``surnames`` is used by a document of ``ctx``.
    """
    free = [s for s in surnames if s not in {d.last for d in ctx.docs}]
    if not free:
        raise ValueError(f"surnames: every one of the {len(surnames)} surnames is used by a document")
    return replace(ctx, last=str(rng.choice(free)))


def filtered(ctx: Context, how: str, rng: np.random.Generator) -> Context:
    """A filtered version of ``ctx`` (the paper's filtering experiments, separated):

    * ``none``: unchanged;
    * ``shorten``: drop half of the non-gold documents at random, keeping the proportion p (shorter,
      equally contaminated);
    * ``swap-hard-to-easy``: replace every hard distractor by easy filler in place (equal length,
      clean);
    * ``drop-hard``: remove the hard distractors (what a relevance filter does: shorter *and* clean).

    Raises:
        ValueError: unknown ``how``.
    """
    docs = list(ctx.docs)
    if how == "none":
        return ctx
    if how == "shorten":
        hard = [i for i, d in enumerate(docs) if d.kind == "hard"]
        easy = [i for i, d in enumerate(docs) if d.kind == "easy"]
        drop = set(rng.permutation(hard)[: len(hard) // 2].tolist()) | set(rng.permutation(easy)[: len(easy) // 2].tolist())
        return replace(ctx, docs=tuple(d for i, d in enumerate(docs) if i not in drop))
    if how == "swap-hard-to-easy":
        other_first = [f for f in FIRST if f != ctx.first]
        return replace(ctx, docs=tuple(
            Doc("easy", str(rng.choice(other_first)), d.last, d.job, d.town, None, int(rng.integers(2, 10)),
                str(rng.choice(ANIMALS))) if d.kind == "hard" else d for d in docs))
    if how == "drop-hard":
        return replace(ctx, docs=tuple(d for d in docs if d.kind != "hard"))
    raise ValueError(f"filter: unknown filter {how!r}")
