"""Seg-ReSearch's hierarchical reward and the two reward baselines.

Outcome reward (the repo's reward manager): ``1[IoU > 0.5] + 1[box L1 < box_tol] + 1[point inside the
gold box and within point_tol of the gold point]``. Process reward, when gold search steps exist:
``0.5 * (IGR + TPR)`` with the initial guidance reward ``IGR = 1[sim(first query, closest gold step) >
0.5]`` and the progressive incentive ``TPR = 1 - (1 - 0.7)^k``, ``k = min(#searches, 10) + format_ok``
(bounded: more searches earn less and less, never more than 1). Pixel tolerances are scaled from the
paper's (10 px box L1, 100 px point distance at roughly 1000-pixel frames) to the 48-pixel scenes here.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Answer:
    """A final answer: ``box`` ``(r0, c0, r1, c1)`` inclusive and ``point`` ``(r, c)`` in pixels; the
    mask is derived from them (:func:`.world.mask_from_prompt`)."""

    box: tuple
    point: tuple


def text_similarity(a: str, b: str) -> float:
    """Cosine similarity of the two texts' word-count vectors (lower-case): the stand-in for the MiniLM
    cosine the paper's IGR uses."""
    ca, cb = Counter(a.lower().split()), Counter(b.lower().split())
    dot = sum(ca[w] * cb[w] for w in ca)
    na, nb = math.sqrt(sum(v * v for v in ca.values())), math.sqrt(sum(v * v for v in cb.values()))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def outcome_reward(answer: Answer | None, pred_mask: np.ndarray | None, gt_mask: np.ndarray, gt_box: tuple,
                   gt_point: tuple, *, box_tol: float = 3.0, point_tol: float = 8.0) -> dict:
    """The three outcome terms (each 0 or 1) and their sum; all 0 without an answer.

    Args:
        answer: the policy's box and point (None: it never answered).
        pred_mask, gt_mask: boolean masks of the same shape.
        gt_box: inclusive ``(r0, c0, r1, c1)``; gt_point: ``(r, c)``.
        box_tol: bound on the mean absolute difference of the 4 box coordinates (pixels).
        point_tol: bound on the Euclidean distance to the gold point (pixels).
    """
    if answer is None:
        return {"iou": 0.0, "box": 0.0, "point": 0.0, "outcome": 0.0}
    union = (pred_mask | gt_mask).sum()
    iou = float((pred_mask & gt_mask).sum() / union) if union else 1.0
    l1 = float(np.mean(np.abs(np.asarray(answer.box, float) - np.asarray(gt_box, float))))
    r, c = answer.point
    inside = gt_box[0] <= r <= gt_box[2] and gt_box[1] <= c <= gt_box[3]
    near = math.hypot(r - gt_point[0], c - gt_point[1]) <= point_tol
    terms = {"iou": float(iou > 0.5), "box": float(l1 < box_tol), "point": float(inside and near)}
    return {**terms, "outcome": sum(terms.values())}


def process_reward(queries: list[str], gold_steps: list[str], format_ok: bool, *, threshold: float = 0.5,
                   base: float = 0.7, cap: int = 10) -> dict:
    """Initial guidance (IGR), progressive incentive (TPR) and ``process = 0.5 (IGR + TPR)``.

    Args:
        queries: the policy's search queries in order.
        gold_steps: the gold search steps (non-empty).
        format_ok: the trajectory ended with a well-formed answer.
    """
    igr = 0.0
    if queries:
        igr = float(max(text_similarity(queries[0], g) for g in gold_steps) > threshold)
    k = min(len(queries), cap) + int(format_ok)
    tpr = 1.0 - (1.0 - base) ** k
    return {"igr": igr, "tpr": tpr, "process": 0.5 * (igr + tpr)}


def stepwise_reward(queries: list[str], gold_steps: list[str]) -> float:
    """Rigid step-wise reward: the share of gold steps matched *exactly and in place* by the queries
    (0 unless the number of searches equals the number of gold steps)."""
    if len(queries) != len(gold_steps):
        return 0.0
    return sum(q == g for q, g in zip(queries, gold_steps)) / len(gold_steps)


def total_reward(kind: str, outcome: dict, queries: list[str], gold_steps: list[str], format_ok: bool, *,
                 routes: list | None = None) -> float:
    """The scalar reward of one trajectory for each arm's reward ``kind``:
    ``hierarchical`` = outcome + process, ``outcome`` / ``no-search`` = outcome, ``stepwise`` = outcome +
    step-wise against the annotated gold steps, ``stepwise-any`` = outcome + the best step-wise score
    over every valid route in ``routes`` (a diagnostic: the step-wise reward without its rigidity).

    Raises:
        ValueError: an unknown kind, or ``stepwise-any`` without ``routes``.
    """
    if kind == "stepwise-any":
        if not routes:
            raise ValueError(f"routes: stepwise-any needs the valid routes, got {routes!r}")
        return outcome["outcome"] + max(stepwise_reward(queries, r) for r in routes)
    if kind == "hierarchical":
        return outcome["outcome"] + process_reward(queries, gold_steps, format_ok)["process"]
    if kind in ("outcome", "no-search"):
        return outcome["outcome"]
    if kind == "stepwise":
        return outcome["outcome"] + stepwise_reward(queries, gold_steps)
    raise ValueError(f"reward: unknown kind {kind!r}")
