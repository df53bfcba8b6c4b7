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
spacing) for ordinal ones. Score (:func:`normalised_distance`): ``d(agent, humans) / d_split``
where ``d_split`` (:func:`split_half_distance`) is the mean distance between two disjoint random
samples of real people of the same sizes (the reference and the held-out set): the distance that
sampling alone puts between two groups of humans. 0 = the humans' histogram exactly, about 1 = as
close as another sample of humans, larger = less human-like. Unlike a normalisation by the random
agent's distance it cannot blow up where the humans happen to answer near uniformly: ``d_split``
is a sampling-noise floor, > 0 for any population with more than one answer.
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


def normalised_distance(d_agent: float, d_split: float) -> float:
    """``d_agent / d_split``: the agent's distance to the reference humans in units of the split-half
    human distance (module docstring); 0 = identical histograms, ~1 = as far as other humans.

    Raises:
        ValueError: ``d_split`` <= 0 (every person answers alike: no sampling floor to measure by).
    """
    if not d_split > 0:
        raise ValueError(f"d_split: must be > 0 (two samples of humans differ), got {d_split!r}")
    return float(d_agent) / float(d_split)


def split_half_distance(domain: str, people, behaviour: np.ndarray, n_reference: int, n_eval: int, draws: int,
                        generator: np.random.Generator) -> dict:
    """Bootstrap split-half human distance of every metric of ``domain``.

    Each draw splits a random permutation of all ``people`` into a group of ``n_reference`` and a
    disjoint group of ``n_eval``, computes each metric's histogram on both (a metric that looks at
    neighbours sees only its own group, as for the reference and held-out sets) and their distance;
    the result is the mean over ``draws``.

    Args:
        people: a :class:`~.data.Mobility` or :class:`~.data.Opinion` of all the humans.
        behaviour: their answers, ``(n,)`` modes or ``(n, 3)`` party, ideology, vote.
        n_reference, n_eval: the two group sizes (their sum <= ``people.n``).
        draws: number of random splits (>= 1).

    Returns:
        ``{metric name: mean distance}``.

    Raises:
        ValueError: group sizes that do not fit in the population, or ``draws`` < 1.
    """
    if not (n_reference >= 2 and n_eval >= 2 and n_reference + n_eval <= people.n):
        raise ValueError(f"n_reference, n_eval: need two groups of >= 2 within {people.n} people, got "
                         f"{n_reference}, {n_eval}")
    if draws < 1:
        raise ValueError(f"draws: must be >= 1, got {draws!r}")
    acc = {m.name: 0.0 for m in metrics_of(domain)}
    for _ in range(draws):
        perm = generator.permutation(people.n)
        a, b = np.sort(perm[:n_reference]), np.sort(perm[n_reference:n_reference + n_eval])
        sa, sb = people.subset(a), people.subset(b)
        for m in metrics_of(domain):
            acc[m.name] += distance(m, histogram(m.values(sa, behaviour[a]), m.support),
                                    histogram(m.values(sb, behaviour[b]), m.support)) / draws
    return acc
