"""Behaviour metrics grouped by principle, the distance between metric distributions, and the
normalised human-likeness score.

The paper (ICML 2026 poster 65092) measures human-likeness as the closeness of AI and human
*distributions* of generic metrics under three principles - rationality, consistency, diversity -
but its exact metrics are not public. The metrics here are ours, in that spirit:

============  =============================  ===========================================================
domain        principle                      metric (per person; the distribution is over the population)
============  =============================  ===========================================================
mobility      rationality                    ``gc_rank``: rank 0-3 of the chosen mode's generalised cost (ordinal)
mobility      rationality                    ``dominated``: chose a mode another mode beats on cost and total time
mobility      consistency                    ``neighbour_agreement``: same mode as the most similar other traveller
mobility      diversity                      ``mode_share``: the chosen mode
mobility      diversity                      ``mode_by_income``: (income tercile, mode), 12 cells
opinion       rationality                    ``ideological_vote``: votes for the candidate of own ideology (non-moderates)
opinion       consistency                    ``party_vote``: votes for own party's candidate (partisans)
opinion       consistency                    ``party_ideology``: (party, ideology), 9 cells
opinion       diversity                      ``party_share``, ``ideology_share``: the answers
opinion       diversity                      ``profile``: the whole answer profile, 18 cells
============  =============================  ===========================================================

A metric maps a population (scenarios + behaviour) to one category per person (``-1`` = the
metric does not apply to that person); its distribution is the histogram of the applicable
people. Distance: total variation for nominal metrics, the 1-D Wasserstein distance (unit
spacing) for ordinal ones. Score: ``1 - d(agent, humans) / d(random, humans)`` where ``random``
is the expected distribution of the uniform random agent on the same scenarios: 0 for the
random agent, 1 for a distribution identical to the humans', negative when farther than random.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .data import Mobility, Opinion

#: income terciles of the 210 travellers (k AUD): < 26, 26-45, > 45
MOBILITY_INCOME_CUTS = (26.0, 45.0)


@dataclass(frozen=True)
class Metric:
    """One behaviour metric.

    Attributes:
        name: identifier.
        domain: ``mobility`` or ``opinion``.
        principle: ``rationality``, ``consistency`` or ``diversity``.
        kind: ``nominal`` (total variation) or ``ordinal`` (Wasserstein-1 over ordered categories).
        support: number of categories.
        values: ``values(scenarios, behaviour) -> (n,)`` int category per person, -1 = not applicable.
            ``behaviour`` is ``(n,)`` chosen modes (mobility) or ``(n, 3)`` party, ideology, vote (opinion).
    """

    name: str
    domain: str
    principle: str
    kind: str
    support: int
    values: Callable[[object, np.ndarray], np.ndarray]


# ---------------------------------------------------------------- mobility


def total_time(s: Mobility) -> np.ndarray:
    """In-vehicle plus terminal waiting time ``(n, 4)`` minutes."""
    return s.time + s.wait


def gc_rank(s: Mobility, choice: np.ndarray) -> np.ndarray:
    """Rank (0 = cheapest) of the chosen mode's generalised cost; ties share the lower rank."""
    chosen = s.gc[np.arange(s.n), choice]
    return (s.gc < chosen[:, None]).sum(1)


def dominated(s: Mobility, choice: np.ndarray) -> np.ndarray:
    """1 where another mode costs no more and takes no longer (one of the two strictly), else 0."""
    tt = total_time(s)
    i = np.arange(s.n)
    c, t = s.cost[i, choice][:, None], tt[i, choice][:, None]
    beats = (s.cost <= c) & (tt <= t) & ((s.cost < c) | (tt < t))
    return beats.any(1).astype(np.int64)


def situation_features(s: Mobility) -> np.ndarray:
    """Standardised (within the population) log cost and log total time of the 4 modes, income and
    party size ``(n, 10)``: the space in which "similar travellers" are nearest neighbours."""
    x = np.column_stack([np.log(s.cost + 1), np.log(total_time(s) + 1), s.income, s.party])
    sd = x.std(0)
    return (x - x.mean(0)) / np.where(sd > 0, sd, 1)


def neighbour_agreement(s: Mobility, choice: np.ndarray) -> np.ndarray:
    """1 where the traveller chose the same mode as the nearest other traveller (Euclidean distance in
    :func:`situation_features`; ties to the lowest index), else 0. Needs >= 2 travellers."""
    x = situation_features(s)
    d = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    return (choice == choice[d.argmin(1)]).astype(np.int64)


def mode_share(s: Mobility, choice: np.ndarray) -> np.ndarray:
    """The chosen mode."""
    return np.asarray(choice, np.int64)


def mode_by_income(s: Mobility, choice: np.ndarray) -> np.ndarray:
    """Cell ``4 * income tercile + mode`` (:data:`MOBILITY_INCOME_CUTS`)."""
    return 4 * np.searchsorted(MOBILITY_INCOME_CUTS, s.income, side="right") + np.asarray(choice, np.int64)


# ---------------------------------------------------------------- opinion (behaviour columns: party, ideology, vote)


def ideological_vote(s: Opinion, b: np.ndarray) -> np.ndarray:
    """1 = liberal votes Clinton or conservative votes Dole, 0 = the other candidate, -1 = moderate."""
    ideo, vote = b[:, 1], b[:, 2]
    return np.where(ideo == 1, -1, (vote == (ideo == 2)).astype(np.int64))


def party_vote(s: Opinion, b: np.ndarray) -> np.ndarray:
    """1 = Democrat votes Clinton or Republican votes Dole, 0 = the other candidate, -1 = Independent."""
    party, vote = b[:, 0], b[:, 2]
    return np.where(party == 1, -1, (vote == (party == 2)).astype(np.int64))


def party_ideology(s: Opinion, b: np.ndarray) -> np.ndarray:
    """Cell ``3 * party + ideology``."""
    return 3 * b[:, 0] + b[:, 1]


def profile(s: Opinion, b: np.ndarray) -> np.ndarray:
    """Cell ``6 * party + 2 * ideology + vote``: the whole answer profile."""
    return 6 * b[:, 0] + 2 * b[:, 1] + b[:, 2]


METRICS: tuple[Metric, ...] = (
    Metric("gc_rank", "mobility", "rationality", "ordinal", 4, gc_rank),
    Metric("dominated", "mobility", "rationality", "nominal", 2, dominated),
    Metric("neighbour_agreement", "mobility", "consistency", "nominal", 2, neighbour_agreement),
    Metric("mode_share", "mobility", "diversity", "nominal", 4, mode_share),
    Metric("mode_by_income", "mobility", "diversity", "nominal", 12, mode_by_income),
    Metric("ideological_vote", "opinion", "rationality", "nominal", 2, ideological_vote),
    Metric("party_vote", "opinion", "consistency", "nominal", 2, party_vote),
    Metric("party_ideology", "opinion", "consistency", "nominal", 9, party_ideology),
    Metric("party_share", "opinion", "diversity", "nominal", 3, lambda s, b: b[:, 0]),
    Metric("ideology_share", "opinion", "diversity", "nominal", 3, lambda s, b: b[:, 1]),
    Metric("profile", "opinion", "diversity", "nominal", 18, profile),
)


def metrics_of(domain: str) -> tuple[Metric, ...]:
    """The metrics of one domain, in :data:`METRICS` order."""
    return tuple(m for m in METRICS if m.domain == domain)


# ---------------------------------------------------------------- distributions and distances


def histogram(values: np.ndarray, support: int) -> np.ndarray:
    """Probability vector ``(support,)`` of the applicable (>= 0) values.

    Raises:
        ValueError: a value >= ``support``, or no applicable value (the distribution is undefined).
    """
    v = np.asarray(values)
    v = v[v >= 0]
    if v.size == 0:
        raise ValueError("histogram: no person to whom the metric applies")
    if v.max() >= support:
        raise ValueError(f"histogram: value {int(v.max())} outside the support 0..{support - 1}")
    return np.bincount(v, minlength=support) / v.size


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """``0.5 * sum |p - q|`` between two probability vectors of the same length (0..1)."""
    return 0.5 * float(np.abs(np.asarray(p, float) - np.asarray(q, float)).sum())


def wasserstein_ordinal(p: np.ndarray, q: np.ndarray) -> float:
    """1-D Wasserstein distance between distributions on the ordered categories 0, 1, ..., k-1 (unit
    spacing): ``sum_j |P(X <= j) - Q(X <= j)|``, in category steps."""
    return float(np.abs(np.cumsum(p) - np.cumsum(q)).sum())


def distance(metric: Metric, p: np.ndarray, q: np.ndarray) -> float:
    """The metric's distance: total variation (nominal) or Wasserstein-1 (ordinal)."""
    return wasserstein_ordinal(p, q) if metric.kind == "ordinal" else total_variation(p, q)


def humanlikeness(d_agent: float, d_random: float) -> float:
    """Normalised human-likeness ``1 - d_agent / d_random``: 0 at the random agent's distance, 1 at an
    identical distribution, < 0 farther than random.

    Raises:
        ValueError: ``d_random`` <= 0 (the random agent already matches the humans: nothing to normalise by).
    """
    if not d_random > 0:
        raise ValueError(f"d_random: must be > 0 (random agent distinguishable from humans), got {d_random!r}")
    return 1.0 - float(d_agent) / float(d_random)
