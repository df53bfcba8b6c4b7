"""Generated reasoning problems in the styles of ProntoQA, ProofWriter and LogicalDeduction.

A problem is a list of sentences (the last one is the question), the gold logic program (one DSL line
per sentence, see :mod:`.solver`), the answer and a depth. Every sentence form has several phrasings;
the last phrasing of each form is held out of the translator's training (``held_out`` problems use it
with probability ``p_held``), so the translator meets wordings it never saw.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

CONCEPTS = ("wumpus", "yumpus", "zumpus", "dumpus", "rompus", "numpus", "tumpus", "vumpus", "impus", "jompus",
            "gorpus", "lempus", "sterpus", "brimpus")
PROPERTIES = ("bright", "cold", "sour", "loud", "shy", "wooden", "happy", "small")
ENTITIES = ("max", "sam", "alex", "rex", "fae", "polly", "wren", "stella")
COLORS = ("red", "blue", "green", "white", "black", "gray", "orange")
ORDINALS = ("1", "2", "3", "4", "5")

# form -> phrasings; "{A} {B}" symbols, "{e}" entity; the last phrasing is held out of training
TEMPLATES = {
    "ent": ["the things are {L}", "we talk about {L}"],
    "pred": ["the properties are {L}", "words used : {L}"],
    "all": ["every {A} is a {B}", "each {A} is a {B}", "anything that is a {A} is a {B}"],
    "allnot": ["every {A} is not a {B}", "each {A} is not a {B}", "no {A} is a {B}"],
    "is": ["{e} is a {A}", "{e} is one {A}", "{e} counts as a {A}"],
    "isnot": ["{e} is not a {A}", "{e} is not one {A}", "it is false that {e} is a {A}"],
    "ask": ["is {e} a {A} ?", "question : is {e} a {A} ?", "true or false : {e} is a {A}"],
    "obj": ["there are books : {L}", "the books are {L}", "on the shelf stand {L}"],
    "left": ["the {a} book is left of the {b} book", "the {a} book is to the left of the {b} book",
             "the {b} book is right of the {a} book"],
    "pos": ["the {a} book is number {k} from the left", "the {a} book is at place {k} from the left",
            "the {a} book is in position {k}"],
    "last": ["the {a} book is the rightmost", "the {a} book is at the right end", "the {a} book is last"],
    "askpos": ["is the {a} book number {k} from the left ?", "question : is the {a} book at place {k} ?",
               "is the {a} book in position {k} ?"],
}


@dataclass(frozen=True)
class Problem:
    """One problem: ``sentences`` (question last), ``program`` (gold DSL line per sentence), ``answer``
    ("True"/"False"/"Unknown"), ``dataset`` and ``depth`` (rule applications; objects for deduction)."""

    dataset: str
    depth: int
    sentences: tuple[str, ...]
    program: tuple[str, ...]
    answer: str

    @property
    def text(self) -> str:
        """The whole problem as one string (sentences joined by ``.``)."""
        return " . ".join(self.sentences)


def _say(rng, form: str, held_out: bool, p_held: float, **slots) -> str:
    phr = TEMPLATES[form]
    i = len(phr) - 1 if held_out and rng.random() < p_held else int(rng.integers(len(phr) - 1))
    return phr[i].format(**slots)


def _logic(rng, dataset: str, depth: int, held_out: bool, p_held: float) -> Problem:
    names = list(rng.permutation(CONCEPTS))
    n_ent = 1 if dataset == "prontoqa" else 2
    ents = [str(e) for e in rng.choice(ENTITIES, n_ent, replace=False)]
    chain = [str(x) for x in names[:depth]]
    prop = str(rng.choice(PROPERTIES))
    preds = chain + [prop]
    rules = [("all", chain[i], chain[i + 1]) for i in range(depth - 1)]
    negated = bool(rng.random() < 0.5)
    rules.append(("allnot" if negated else "all", chain[-1], prop))
    facts = [("is", ents[0], chain[0])]
    # distractors: an unrelated chain of two concepts (and, for ProofWriter, a negated fact)
    d1, d2 = str(names[depth]), str(names[depth + 1])
    preds += [d1, d2]
    rules.append(("all", d1, d2))
    if dataset == "proofwriter":
        facts.append(("isnot", ents[1], d1))
    ask_ent, answer = ents[0], "False" if negated else "True"
    if dataset == "proofwriter" and rng.random() < 1 / 3:
        ask_ent, answer = ents[1], "Unknown"  # nothing says whether the second entity has the property
    order = list(rng.permutation(len(rules)))
    items = [rules[i] for i in order] + facts
    sent = [_say(rng, "ent", held_out, p_held, L=" ".join(ents)),
            _say(rng, "pred", held_out, p_held, L=" ".join(sorted(preds)))]
    prog = ["ent " + " ".join(ents), "pred " + " ".join(sorted(preds))]
    for form, a, b in items:
        if form in ("all", "allnot"):
            sent.append(_say(rng, form, held_out, p_held, A=a, B=b))
            prog.append(f"all {a} {'not ' if form == 'allnot' else ''}{b}")
        else:
            sent.append(_say(rng, form, held_out, p_held, e=a, A=b))
            prog.append(f"is {a} {'not ' if form == 'isnot' else ''}{b}")
    sent.append(_say(rng, "ask", held_out, p_held, e=ask_ent, A=prop))
    prog.append(f"ask {ask_ent} {prop}")
    return Problem(dataset, depth, tuple(sent), tuple(prog), answer)


def unique_orders(n: int, constraints: list[tuple]) -> list[tuple]:
    """All orders (object index per position 1..n) consistent with ``constraints`` (brute force)."""
    out = []
    for perm in itertools.permutations(range(n)):
        pos = {o: i + 1 for i, o in enumerate(perm)}
        ok = True
        for c in constraints:
            if c[0] == "left":
                ok = pos[c[1]] < pos[c[2]]
            elif c[0] == "pos":
                ok = pos[c[1]] == c[2]
            elif c[0] == "last":
                ok = pos[c[1]] == n
            if not ok:
                break
        if ok:
            out.append(perm)
    return out


def _deduction(rng, n: int, held_out: bool, p_held: float) -> Problem:
    objs = [str(c) for c in rng.choice(COLORS, n, replace=False)]
    truth = list(rng.permutation(n))  # truth[p] = object at position p+1
    where = {o: p + 1 for p, o in enumerate(truth)}
    pool = [("left", a, b) for a in range(n) for b in range(n) if where[a] < where[b]]
    pool += [("pos", a, where[a]) for a in range(n)] + [("last", truth[-1])]
    cons: list[tuple] = []
    for j in rng.permutation(len(pool)):
        if len(unique_orders(n, cons)) == 1:
            break
        if len(unique_orders(n, cons + [pool[j]])) < len(unique_orders(n, cons)):
            cons.append(pool[j])
    a = int(rng.integers(n))
    k = where[a] if rng.random() < 0.5 else int(rng.choice([p for p in range(1, n + 1) if p != where[a]]))
    sent = [_say(rng, "obj", held_out, p_held, L=" ".join(objs))]
    prog = ["obj " + " ".join(objs)]
    for c in cons:
        if c[0] == "left":
            sent.append(_say(rng, "left", held_out, p_held, a=objs[c[1]], b=objs[c[2]]))
            prog.append(f"left {objs[c[1]]} {objs[c[2]]}")
        elif c[0] == "pos":
            sent.append(_say(rng, "pos", held_out, p_held, a=objs[c[1]], k=c[2]))
            prog.append(f"pos {objs[c[1]]} {c[2]}")
        else:
            sent.append(_say(rng, "last", held_out, p_held, a=objs[c[1]]))
            prog.append(f"last {objs[c[1]]}")
    sent.append(_say(rng, "askpos", held_out, p_held, a=objs[a], k=k))
    prog.append(f"askpos {objs[a]} {k}")
    return Problem("deduction", n, tuple(sent), tuple(prog), "True" if where[a] == k else "False")


#: depths per dataset (deduction: number of objects)
DEPTHS = {"prontoqa": (1, 2, 3, 4, 5), "proofwriter": (1, 2, 3, 4, 5), "deduction": (3, 4, 5)}


def make_problem(rng: np.random.Generator, dataset: str, depth: int, *, held_out: bool, p_held: float = 0.3) -> Problem:
    """One problem of ``dataset`` at ``depth``.

    Raises:
        ValueError: unknown dataset or a depth outside :data:`DEPTHS`.
    """
    if dataset not in DEPTHS or depth not in DEPTHS[dataset]:
        raise ValueError(f"dataset/depth: unknown {dataset!r} at depth {depth!r}")
    if dataset == "deduction":
        return _deduction(rng, depth, held_out, p_held)
    return _logic(rng, dataset, depth, held_out, p_held)
