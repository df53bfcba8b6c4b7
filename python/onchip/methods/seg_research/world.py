"""Scenes, a knowledge base of fictional facts, questions of one and two hops, a BM25 retriever,
the point + box -> mask step (stand-in for SAM2) and the J&F metric.

A scene is a ``size x size`` picture of a few objects (colour, shape), some same-coloured objects
touching, so that the connected component under a point spills into a neighbour unless the box clips
it. The knowledge base states facts about invented clubs and people ("The Zorvan club chose the
purple triangle as its mascot.", "Kelmi founded the Zorvan club."); a question asks to segment "the
mascot of the Zorvan club" (one hop) or "the emblem of the club founded by Kelmi" (two hops). The
names are invented per split, so held-out questions are about facts the policy never saw: it has to
search. Source of the task shape: Seg-ReSearch (arXiv 2602.04454), sec. 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COLOURS = ("red", "green", "blue", "yellow", "purple", "orange")
SHAPES = ("square", "circle", "triangle", "cross", "diamond")
CLUB_RELATIONS = ("mascot", "emblem")
PERSON_RELATIONS = ("founded", "leads")
RELATIONS = CLUB_RELATIONS + PERSON_RELATIONS

_CLUB_TEMPLATES = ("The {club} club chose the {colour} {shape} as its {rel}.",
                   "The {rel} of the {club} club is a {colour} {shape}.",
                   "Members of the {club} club know their {rel} as the {colour} {shape}.")
_PERSON_TEMPLATES = {"founded": ("{person} founded the {club} club.", "The {club} club was founded by {person}."),
                     "leads": ("{person} leads the {club} club.", "The {club} club is led by {person} today.")}
_SYLLABLES = ("zor", "van", "kel", "mi", "das", "tro", "ben", "qua", "lix", "mor", "tal", "ven", "ska", "dri",
              "nu", "pel", "gor", "ith", "ra", "sol", "fen", "wyn", "bru", "kat")


def shape_mask(shape: str, size: int) -> np.ndarray:
    """A ``size x size`` boolean stencil of ``shape``."""
    r, c = np.mgrid[:size, :size]
    m = (size - 1) / 2
    if shape == "square":
        return np.ones((size, size), bool)
    if shape == "circle":
        return (r - m) ** 2 + (c - m) ** 2 <= (size / 2) ** 2
    if shape == "triangle":
        return np.abs(c - m) <= r / 2 + 0.5
    if shape == "cross":
        w = max(1, size // 6)
        return (np.abs(r - m) <= w) | (np.abs(c - m) <= w)
    if shape == "diamond":
        return np.abs(r - m) + np.abs(c - m) <= m + 0.5
    raise ValueError(f"shape: one of {SHAPES}, got {shape!r}")


@dataclass
class Scene:
    """A rendered scene.

    Attributes:
        colour: ``(size, size)`` int, 0 = background, else colour index + 1.
        instance: ``(size, size)`` int, 0 = background, else object index + 1.
        objects: list of (colour, shape) per object.
    """

    colour: np.ndarray
    instance: np.ndarray
    objects: list

    def mask(self, k: int) -> np.ndarray:
        """Ground-truth mask of object ``k``."""
        return self.instance == k + 1

    def box(self, k: int) -> tuple[int, int, int, int]:
        """Box ``(r0, c0, r1, c1)`` (inclusive) of object ``k``."""
        rr, cc = np.nonzero(self.mask(k))
        return int(rr.min()), int(cc.min()), int(rr.max()), int(cc.max())

    def point(self, k: int) -> tuple[int, int]:
        """The pixel of object ``k`` nearest its centroid."""
        rr, cc = np.nonzero(self.mask(k))
        i = np.argmin((rr - rr.mean()) ** 2 + (cc - cc.mean()) ** 2)
        return int(rr[i]), int(cc[i])


def render_scene(rng: np.random.Generator, target: tuple[str, str], n_objects: int = 4, size: int = 48,
                 p_touch: float = 0.5) -> tuple[Scene, int]:
    """A scene holding ``target`` and ``n_objects - 1`` distractors of other (colour, shape); with
    probability ``p_touch`` one distractor shares the target's colour and touches it.

    Returns:
        ``(scene, index of the target)``.
    """
    kinds = [target]
    touching = rng.random() < p_touch
    while len(kinds) < n_objects:
        colour = target[0] if touching and len(kinds) == 1 else COLOURS[rng.integers(len(COLOURS))]
        kind = (colour, SHAPES[rng.integers(len(SHAPES))])
        if kind not in kinds:
            kinds.append(kind)
    for _ in range(2000):  # rejection sampling of a layout without overlaps
        colour = np.zeros((size, size), np.int64)
        inst = np.zeros((size, size), np.int64)
        ok = True
        anchor = None
        for k, (col, shp) in enumerate(kinds):
            s = int(rng.integers(9, 14))
            stencil = shape_mask(shp, s)
            if k == 1 and touching:  # right next to the target, sharing an edge
                r0 = int(np.clip(anchor[0] + rng.integers(-2, 3), 0, size - s))
                c0 = anchor[1] + anchor[2] - int(rng.integers(0, 3))  # bounding boxes may overlap
                if c0 + s > size:
                    ok = False
                    break
            else:
                r0, c0 = int(rng.integers(0, size - s + 1)), int(rng.integers(0, size - s + 1))
            region = inst[r0:r0 + s, c0:c0 + s]
            if (region[stencil] != 0).any():
                ok = False
                break
            if k == 0:
                anchor = (r0, c0, s)
            region[stencil] = k + 1
            colour[r0:r0 + s, c0:c0 + s][stencil] = COLOURS.index(col) + 1
        if ok and all((inst == k + 1).any() for k in range(len(kinds))):
            order = rng.permutation(len(kinds))  # object k is listed at position where[k]: no order leaks
            where = np.argsort(order)
            relabel = np.concatenate([[0], where + 1])
            return Scene(colour, relabel[inst], [kinds[i] for i in order]), int(where[0])
    raise RuntimeError("render_scene: no layout found")


def mask_from_prompt(colour: np.ndarray, point: tuple[int, int], box: tuple[int, int, int, int]) -> np.ndarray:
    """The SAM2 stand-in: the 4-connected component of same-coloured pixels under ``point``, clipped to
    ``box`` (inclusive ``(r0, c0, r1, c1)``). Empty when the point is on the background."""
    from scipy import ndimage

    r, c = point
    out = np.zeros(colour.shape, bool)
    if not (0 <= r < colour.shape[0] and 0 <= c < colour.shape[1]) or colour[r, c] == 0:
        return out
    labels, _ = ndimage.label(colour == colour[r, c])
    comp = labels == labels[r, c]
    r0, c0, r1, c1 = box
    out[max(r0, 0):r1 + 1, max(c0, 0):c1 + 1] = True
    return comp & out


def _boundary(mask: np.ndarray) -> np.ndarray:
    from scipy import ndimage

    return mask & ~ndimage.binary_erosion(mask, border_value=0)


def j_and_f(pred: np.ndarray, gt: np.ndarray, tol: int = 1) -> tuple[float, float]:
    """Region similarity J (IoU) and contour accuracy F (boundary F-measure, boundary pixels matched
    within ``tol`` pixels, chessboard distance), as in the DAVIS benchmark (Perazzi et al. 2016).
    Two empty masks score (1, 1)."""
    from scipy import ndimage

    union = (pred | gt).sum()
    j = 1.0 if union == 0 else float((pred & gt).sum() / union)
    bp, bg = _boundary(pred), _boundary(gt)
    if not bp.any() and not bg.any():
        return j, 1.0
    if not bp.any() or not bg.any():
        return j, 0.0
    struct = np.ones((2 * tol + 1, 2 * tol + 1), bool)
    precision = float((bp & ndimage.binary_dilation(bg, struct)).sum() / bp.sum())
    recall = float((bg & ndimage.binary_dilation(bp, struct)).sum() / bg.sum())
    f = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return j, f


# ------------------------------------------------------------------ knowledge base and questions


def invent_names(rng: np.random.Generator, n: int, taken: set) -> list[str]:
    """``n`` new capitalised two- or three-syllable names not in ``taken`` (which is updated)."""
    out = []
    while len(out) < n:
        k = 2 + int(rng.random() < 0.4)
        name = "".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), k)).capitalize()
        if name not in taken:
            taken.add(name)
            out.append(name)
    return out


@dataclass
class Question:
    """A question with its annotated gold search steps, every valid route, and its answer.

    Attributes:
        text: the question.
        hops: 1 or 2.
        gold_steps: the search queries of the one route an annotator wrote down, in order (what the
            process and step-wise rewards compare against).
        answer: (colour, shape) of the object to segment.
        routes: every valid route (lists of queries that each retrieve the needed fact); contains
            ``gold_steps``. One route when the knowledge base has no aliases.
    """

    text: str
    hops: int
    gold_steps: list
    answer: tuple
    routes: list = field(default_factory=list)


def build_kb(rng: np.random.Generator, n_clubs: int, taken: set, *, aliases: bool = True) -> tuple[list[str], list[Question]]:
    """A knowledge base about ``n_clubs`` invented clubs (a mascot and an emblem each, and a person
    who founded or leads it) and every 1- and 2-hop question it answers.

    With ``aliases`` every club has two names, both written in each of its documents ("The Zorvan
    club, also called Kelvan, chose ..."), the question names the club by either, and the person
    step may use either relation word (the person's name alone finds the document): a 1-hop
    question has 2 valid routes, a 2-hop one 4. The annotated ``gold_steps`` are one of them drawn at
    random, as an annotator writes down one plan among several equally good ones. Without
    ``aliases``: one name per club, one route per question, the gold steps are that route.

    Returns:
        ``(documents, questions)``.

    Raises:
        ValueError: ``n_clubs`` < 1.
    """
    if n_clubs < 1:
        raise ValueError(f"n_clubs: must be >= 1, got {n_clubs}")
    clubs = invent_names(rng, n_clubs, taken)
    people = invent_names(rng, n_clubs, taken)
    others = invent_names(rng, n_clubs, taken) if aliases else [None] * n_clubs
    docs, questions = [], []

    def ref(names):  # how a document names the club, both names (in random order) with aliases
        if len(names) == 1:
            return f"{names[0]} club"
        a, b = (names if rng.random() < 0.5 else names[::-1])
        return f"{a} club, also called {b},"

    for club, person, alias in zip(clubs, people, others):
        names = [club] if alias is None else [club, alias]
        kinds = rng.permutation(len(COLOURS) * len(SHAPES))[:2]
        facts = {rel: (COLOURS[int(k) // len(SHAPES)], SHAPES[int(k) % len(SHAPES)])
                 for rel, k in zip(CLUB_RELATIONS, kinds)}
        for rel, (colour, shape) in facts.items():
            t = _CLUB_TEMPLATES[int(rng.integers(len(_CLUB_TEMPLATES)))]
            docs.append(t.replace("{club} club", "{club}").format(club=ref(names), rel=rel, colour=colour,
                                                                   shape=shape).replace(",.", "."))
            asked = names[int(rng.integers(len(names)))]
            routes = [[f"{n} {rel}"] for n in names]
            questions.append(Question(f"segment the {rel} of the {asked} club", 1,
                                      list(routes[int(rng.integers(len(routes)))]), facts[rel], routes))
        prel = PERSON_RELATIONS[int(rng.integers(2))]
        t = _PERSON_TEMPLATES[prel][int(rng.integers(2))]
        docs.append(t.replace("{club} club", "{club}").format(person=person, club=ref(names)).replace(",.", "."))
        verb = "founded" if prel == "founded" else "led"
        first = [prel] if alias is None else list(PERSON_RELATIONS)
        for rel in CLUB_RELATIONS:
            routes = [[f"{person} {r}", f"{n} {rel}"] for r in first for n in names]
            questions.append(Question(f"segment the {rel} of the club {verb} by {person}", 2,
                                      list(routes[int(rng.integers(len(routes)))]), facts[rel], routes))
    return docs, questions


def tokenize(text: str) -> list[str]:
    """Lower-case words without punctuation."""
    return [w.strip(".,").lower() for w in text.split() if w.strip(".,")]


class Retriever:
    """BM25 (Okapi, ``rank_bm25``) over the knowledge base's documents; :meth:`search` returns the top
    document (the search tool of Seg-ReSearch, text search only). Length normalisation is off
    (``b = 0``): every document is one sentence, and with it a short "founded" sentence outranks
    the longer fact sentence that holds both the name and the relation word of the query."""

    def __init__(self, docs: list[str]):
        from rank_bm25 import BM25Okapi

        self.docs = list(docs)
        self.bm25 = BM25Okapi([tokenize(d) for d in self.docs], b=0.0)
        self._cache: dict[str, str] = {}

    def search(self, query: str) -> str:
        """The best-scoring document for ``query`` (ties: the first)."""
        if query not in self._cache:
            scores = self.bm25.get_scores(tokenize(query))
            self._cache[query] = self.docs[int(np.argmax(scores))]
        return self._cache[query]
