"""A procedural sprite world: keyframe states as 3 x 3 token grids, transitions as four hierarchical
schema tokens ``event actor attribute change``.

Objects are one-cell sprites of 4 kinds (2 colours x 2 shapes), 1-3 per scene, each kind at most
once (a world small enough that a 30-47 k-parameter decoder learns much of it in about a thousand
steps). Events: ``move`` (an object one cell up/down/left/right into an empty cell), ``recolour`` (an
object takes a colour no other object of its shape has), ``appear`` (a new object at a cell),
``disappear``, and the rare ``wind`` (every object that can moves one cell right; actor ``all``).
"""

from __future__ import annotations

import numpy as np

SIZE = 3
COLOURS = ("red", "blue")
SHAPES = ("ball", "box")
MAX_OBJECTS = 3
KINDS = tuple(f"{c}-{s}" for c in COLOURS for s in SHAPES)
EMPTY = "."
DIRS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
EVENTS = ("move", "recolour", "appear", "disappear", "wind")
EVENT_P = (0.45, 0.2, 0.15, 0.15, 0.05)


def schema_vocab() -> list[str]:
    """Every schema token, level-prefixed (``E:move``, ``A:red-ball``, ``T:position``, ``C:right``)."""
    return ([f"E:{e}" for e in EVENTS] + [f"A:{k}" for k in (*KINDS, "all")]
            + ["T:position", "T:colour", "T:presence"]
            + [f"C:{d}" for d in DIRS] + [f"C:{c}" for c in COLOURS] + [f"C:cell{i}" for i in range(SIZE * SIZE)]
            + ["C:off"])


def state_tokens(objects: dict) -> list[str]:
    """A state (kind -> (row, col)) as ``SIZE * SIZE`` cell tokens, row-major."""
    grid = [EMPTY] * (SIZE * SIZE)
    for k, (r, c) in objects.items():
        grid[r * SIZE + c] = k
    return grid


def random_state(rng: np.random.Generator) -> dict:
    """1 to :data:`MAX_OBJECTS` objects of distinct kinds at distinct cells."""
    n = int(rng.integers(1, MAX_OBJECTS + 1))
    kinds = rng.permutation(len(KINDS))[:n]
    cells = rng.permutation(SIZE * SIZE)[:n]
    return {KINDS[int(k)]: (int(c) // SIZE, int(c) % SIZE) for k, c in zip(kinds, cells)}


def apply(objects: dict, schema: list[str]) -> dict:
    """The state after the transition ``schema`` (four tokens) - the world's deterministic rule.

    Raises:
        ValueError: an event not in :data:`EVENTS`.
    """
    event, actor, _attr, change = (t.split(":", 1)[1] for t in schema)
    out = dict(objects)
    if event == "move":
        dr, dc = DIRS[change]
        r, c = out[actor]
        out[actor] = (r + dr, c + dc)
    elif event == "recolour":
        colour, shape = actor.split("-")
        out[f"{change}-{shape}"] = out.pop(actor)
    elif event == "appear":
        cell = int(change[4:])
        out[actor] = (cell // SIZE, cell % SIZE)
    elif event == "disappear":
        out.pop(actor)
    elif event == "wind":
        for k in sorted(out, key=lambda k: -out[k][1]):  # rightmost first, so a row shifts together
            r, c = out[k]
            if c + 1 < SIZE and (r, c + 1) not in out.values():
                out[k] = (r, c + 1)
    else:
        raise ValueError(f"event: one of {EVENTS}, got {event!r}")
    return out


def event_probabilities(wind_p: float) -> tuple[float, ...]:
    """:data:`EVENT_P` with the rare ``wind`` at probability ``wind_p`` and the common events scaled
    to fill the rest (``wind_p = 0.05`` gives :data:`EVENT_P`).

    Raises:
        ValueError: ``wind_p`` outside [0, 1).
    """
    if not 0 <= wind_p < 1:
        raise ValueError(f"wind_p: must be in [0, 1), got {wind_p!r}")
    common = np.asarray(EVENT_P[:-1]) / sum(EVENT_P[:-1]) * (1 - wind_p)
    return (*(float(p) for p in common), float(wind_p))


def moved(before: dict, after: dict) -> int:
    """How many objects of ``before`` sit at another cell in ``after`` (0 for one that left)."""
    return sum(1 for k, rc in before.items() if k in after and after[k] != rc)


def random_transition(objects: dict, rng: np.random.Generator, event_p: tuple[float, ...] = EVENT_P) -> list[str]:
    """A valid random transition of ``objects`` as four schema tokens (events drawn with ``event_p``,
    one probability per :data:`EVENTS` entry, re-drawn when impossible)."""
    occupied = set(objects.values())
    while True:
        event = EVENTS[int(rng.choice(len(EVENTS), p=event_p))]
        kinds = sorted(objects)
        actor = kinds[int(rng.integers(len(kinds)))]
        if event == "move":
            r, c = objects[actor]
            ok = [d for d, (dr, dc) in DIRS.items()
                  if 0 <= r + dr < SIZE and 0 <= c + dc < SIZE and (r + dr, c + dc) not in occupied]
            if ok:
                return ["E:move", f"A:{actor}", "T:position", f"C:{ok[int(rng.integers(len(ok)))]}"]
        elif event == "recolour":
            shape = actor.split("-")[1]
            ok = [col for col in COLOURS if f"{col}-{shape}" not in objects]
            if ok:
                return ["E:recolour", f"A:{actor}", "T:colour", f"C:{ok[int(rng.integers(len(ok)))]}"]
        elif event == "appear" and len(objects) < MAX_OBJECTS:
            new = [k for k in KINDS if k not in objects]
            free = [i for i in range(SIZE * SIZE) if (i // SIZE, i % SIZE) not in occupied]
            return ["E:appear", f"A:{new[int(rng.integers(len(new)))]}", "T:presence",
                    f"C:cell{free[int(rng.integers(len(free)))]}"]
        elif event == "disappear" and len(objects) > 1:
            return ["E:disappear", f"A:{actor}", "T:presence", "C:off"]
        elif event == "wind" and apply(objects, ["E:wind", "A:all", "T:position", "C:right"]) != objects:
            return ["E:wind", "A:all", "T:position", "C:right"]


def episode(rng: np.random.Generator, steps: int, event_p: tuple[float, ...] = EVENT_P
            ) -> tuple[list[dict], list[list[str]]]:
    """An interleaved sequence ``S0 T1 S1 ... T_steps S_steps``: (states, transitions); events drawn
    with ``event_p`` (:func:`event_probabilities`)."""
    states, trans = [random_state(rng)], []
    for _ in range(steps):
        t = random_transition(states[-1], rng, event_p)
        trans.append(t)
        states.append(apply(states[-1], t))
    return states, trans


WIND = ["E:wind", "A:all", "T:position", "C:right"]


def wind_transitions(rng: np.random.Generator, n: int) -> list[tuple[dict, dict]]:
    """``n`` *identifiable* ``wind`` transitions (before, after): random states in which wind moves at
    least two objects. A wind that moves one object looks exactly like that object's ``move right``
    (the more probable reading), so only these are a fair test of predicting the rare event.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n: must be >= 1, got {n!r}")
    out = []
    while len(out) < n:
        s = random_state(rng)
        after = apply(s, WIND)
        if moved(s, after) >= 2:
            out.append((s, after))
    return out
