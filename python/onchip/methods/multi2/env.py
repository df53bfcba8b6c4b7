"""A sequential instruction-following grid world whose horizon is the number of sub-instructions.

Stand-in for the long-horizon text environments of Multi^2 (ScienceWorld, ALFWorld, TextCraft) in
the shape of BabyAI's sequence levels: the mission "touch the red ball then touch the blue key ..."
lists K sub-instructions; objects of 12 kinds (4 colours x 3 types) lie on an N x N grid; the agent
moves (up, down, left, right) and touches the object under it. Touching the next mission object
completes that sub-instruction; touching a *later* mission object completes a sub-instruction out of
order - objective drift - and fails the mission at once (BabyAI's sequence levels fail the same way);
touching a distractor or an already completed object does nothing. Episodes end on success, drift or
the step limit.

Two things make the atomic control hard (the low level's task): moves **slip** (with probability
``slip`` a move goes in a uniformly random direction instead) and the observation is **partial**
(an object farther than ``view`` cells, Chebyshev distance, is seen only by its direction: its offset
is censored to ``view + 1`` cells along each axis).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COLOURS = ("red", "green", "blue", "yellow")
TYPES = ("ball", "key", "box")
KINDS = tuple(f"{c} {t}" for c in COLOURS for t in TYPES)  # kind id = colour * 3 + type
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # up, down, left, right (row, col)
TOUCH = 4
N_ACTIONS = 5
CONNECTIVES = ("then", "and then", "after that")


def subgoal_text(kind: int) -> str:
    """The sub-goal as the high-level agent writes it: ``"touch red ball"``."""
    return f"touch {KINDS[kind]}"


def mission_text(kinds, connectives) -> str:
    """``"touch the red ball then touch the blue key"``; ``connectives[i]`` joins clause i and i+1."""
    parts = [f"touch the {KINDS[kinds[0]]}"]
    for k, conn in zip(kinds[1:], connectives):
        parts.append(f"{conn} touch the {KINDS[k]}")
    return " ".join(parts)


@dataclass
class Episode:
    """One episode's state and record.

    Attributes:
        size: grid side N.
        agent: (row, col).
        objects: kind id -> (row, col); every kind at most once.
        mission: the K kind ids in the order to touch them.
        text: the mission text.
        limit: step limit.
        progress: sub-instructions completed in order.
        completed: log of (step, mission index) of every sub-instruction completed, in time order
            (an out-of-order one included).
        steps, done, success, drift.
        slip: probability that a move goes in a random direction.
        view: observation radius in cells (offsets beyond it are censored; 0 = unlimited).
        noise: the generator of the slips (each episode its own, so the same episode replays the same
            slips for every agent that takes the same actions).
    """

    size: int
    agent: tuple
    objects: dict
    mission: list
    text: str
    limit: int
    progress: int = 0
    completed: list = field(default_factory=list)
    steps: int = 0
    done: bool = False
    success: bool = False
    drift: bool = False
    slip: float = 0.0
    view: int = 0
    noise: np.random.Generator | None = None

    def step(self, action: int) -> float:
        """Apply an atomic action; returns the reward (1 for each sub-instruction completed in order).

        Raises:
            ValueError: an action outside 0..4 or a step after the end.
        """
        if self.done:
            raise ValueError("step: the episode has ended")
        if not 0 <= action < N_ACTIONS:
            raise ValueError(f"action: must be in 0..{N_ACTIONS - 1}, got {action!r}")
        self.steps += 1
        reward = 0.0
        if action < TOUCH:
            if self.slip > 0 and self.noise is not None and self.noise.random() < self.slip:
                action = int(self.noise.integers(4))
            dr, dc = MOVES[action]
            r, c = self.agent
            self.agent = (min(max(r + dr, 0), self.size - 1), min(max(c + dc, 0), self.size - 1))
        else:
            kind = self.kind_at(self.agent)
            if kind is not None and kind in self.mission:
                idx = self.mission.index(kind)
                if idx == self.progress:
                    self.completed.append((self.steps, idx))
                    self.progress += 1
                    reward = 1.0
                    if self.progress == len(self.mission):
                        self.success = self.done = True
                elif idx > self.progress:  # a later sub-instruction first: objective drift
                    self.completed.append((self.steps, idx))
                    self.drift = self.done = True
        if self.steps >= self.limit:
            self.done = True
        return reward

    def kind_at(self, pos):
        """The kind id of the object at ``pos`` or None."""
        for k, p in self.objects.items():
            if p == pos:
                return k
        return None


def new_episode(rng: np.random.Generator, horizon: int, *, size: int = 7, distractors: int = 2,
                steps_per_goal: int = 16, slip: float = 0.0, view: int = 0) -> Episode:
    """A random episode with ``horizon`` sub-instructions and ``distractors`` other objects.

    Args:
        slip: probability in [0, 1) that a move goes in a random direction (its own generator,
            drawn from ``rng``).
        view: observation radius in cells (0 = the whole grid).

    Raises:
        ValueError: ``horizon`` < 1, too many objects for the grid or the 12 kinds, ``slip`` outside
            [0, 1) or ``view`` < 0.
    """
    if not 0.0 <= slip < 1.0:
        raise ValueError(f"slip: must be in [0, 1), got {slip!r}")
    if view < 0:
        raise ValueError(f"view: must be >= 0, got {view!r}")
    n_obj = horizon + distractors
    if horizon < 1 or n_obj > len(KINDS) or n_obj + 1 > size * size:
        raise ValueError(f"horizon: need 1 <= horizon and horizon + distractors <= {len(KINDS)}, got {horizon}")
    kinds = rng.permutation(len(KINDS))[:n_obj].tolist()
    cells = rng.permutation(size * size)[:n_obj + 1]
    pos = [(int(c) // size, int(c) % size) for c in cells]
    objects = {k: p for k, p in zip(kinds, pos[1:])}
    mission = kinds[:horizon]
    conns = [CONNECTIVES[int(i)] for i in rng.integers(0, len(CONNECTIVES), horizon - 1)]
    noise = np.random.default_rng(int(rng.integers(2**63)))
    return Episode(size, pos[0], objects, mission, mission_text(mission, conns), steps_per_goal * horizon,
                   slip=slip, view=view, noise=noise)


def ego_observation(ep: Episode) -> np.ndarray:
    """Egocentric symbolic observation, object-centric: for each of the 12 kinds, whether it is in the
    grid, its offset from the agent (rows, columns, divided by N) and whether the agent stands on it;
    float32 ``(48,)``. (BabyAI's symbolic grid holds the same facts cell by cell.) With ``ep.view`` > 0
    an object farther than ``view`` cells (Chebyshev) has each offset censored to at most ``view + 1``
    cells: its direction is seen, not its distance."""
    obs = np.zeros((len(KINDS), 4), np.float32)
    r0, c0 = ep.agent
    for k, (r, c) in ep.objects.items():
        dr, dc = r - r0, c - c0
        if ep.view and max(abs(dr), abs(dc)) > ep.view:
            cap = ep.view + 1
            dr, dc = int(np.clip(dr, -cap, cap)), int(np.clip(dc, -cap, cap))
        obs[k] = (1.0, dr / ep.size, dc / ep.size, float(r == r0 and c == c0))
    return obs.ravel()


def expert_action(ep: Episode, target: int, rng: np.random.Generator) -> int:
    """A shortest-path action towards the object of kind ``target`` (touch when on it); ties between
    the two axes broken at random."""
    tr, tc = ep.objects[target]
    r, c = ep.agent
    options = []
    if tr != r:
        options.append(0 if tr < r else 1)
    if tc != c:
        options.append(2 if tc < c else 3)
    return TOUCH if not options else int(options[rng.integers(len(options))])


def drift_rate(episodes) -> float:
    """Objective-drift rate: among failed episodes, the share that completed a sub-instruction out of
    order. An episode is ``(success, completed)`` with ``completed`` the list of completed mission
    indices in time order; NaN when no episode failed.

    Example: ``[(False, [0, 2]), (False, [0]), (True, [0, 1])]`` -> 0.5 (one of two failures drifted).
    """
    failed = [c for s, c in episodes if not s]
    if not failed:
        return float("nan")
    return sum(any(i != j for j, i in enumerate(c)) for c in failed) / len(failed)
