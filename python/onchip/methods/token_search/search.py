"""Test-time search over token sequences under a verifier, with every decoder and verifier call counted.

After the public SoTo code (EPFL-VILAB/search-over-tokens, ``soto/search_algorithms``):

* best-of-N: N complete samples from the prior, decoded, scored; the best is kept. It never
  scores a prefix (the control of the 1D-vs-grid comparison).
* beam search over token prefixes with a token schedule (geometric 1, 2, 4, 8, 16 for 16 tokens; 1, 2, 4, 8, 16, 28 for 28):
  at each step every beam is extended by sampled chunks up to the next scheduled length, the
  candidates are decoded *as prefixes* and scored, the top ``width`` stay. The first step starts
  from one empty beam; the answer is the best candidate of the last step.
* lookahead: beam search whose candidates are completed to full length by the prior before
  decoding and scoring; only the original (non-extended) tokens stay in the beam.
* the uniform prior (AR-free search): beam search whose proposals are uniform random codes.

Compute is counted per prompt as decoder calls + verifier calls (one each per scored candidate):
a budget of B calls gives best-of-N ``N = B`` and the beam searches ``B / len(schedule)``
candidates per step. A beam search that scores fewer than :data:`MIN_CANDIDATES_PER_BEAM`
candidates per beam and step selects nothing (it is plain sampling that spends calls), so such a
budget is refused (:func:`check_beam`, :func:`beam_search`). The prior's forward passes are counted separately (lookahead spends more).
All prompts run as one batch: ``classes`` ``(P,)``, tokens ``(P, t)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from . import schedule

#: cumulative token counts per beam step (geometric, base 2), as SoTo's "geometric" schedule, for
#: 16 tokens (:func:`~onchip.methods.token_search.schedule` gives it for any token count)
SCHEDULE = schedule(16)

#: the fewest candidates each beam must score per step for the step to select anything
MIN_CANDIDATES_PER_BEAM = 2

#: propose(classes (n,), prefixes (n, t), n_new, generator) -> (n, t + n_new): one continuation per row
Propose = Callable[[torch.Tensor, torch.Tensor, int, torch.Generator], torch.Tensor]
#: score(classes (n,), tokens (n, t)) -> (scores (n,), images (n, ...)): higher is better
Score = Callable[[torch.Tensor, torch.Tensor], tuple]


@dataclass
class CallCounter:
    """Decoder and verifier calls, one per image decoded / scored."""

    decoder: int = 0
    verifier: int = 0


class VerifierScore:
    """The search's score: decode the given tokens as a prefix, return the verifier's ``log p(class | image)``.

    Args:
        tokenizer: has ``decode(ids (n, t)) -> (n, pixels)`` (a prefix of length t).
        verifier: a classifier module ``(n, pixels) -> (n, 10)`` logits.
        counter: counts the calls (a new one if None).
    """

    def __init__(self, tokenizer, verifier, counter: CallCounter | None = None):
        self.tokenizer, self.verifier = tokenizer, verifier
        self.counter = counter or CallCounter()

    @torch.no_grad()
    def __call__(self, classes: torch.Tensor, tokens: torch.Tensor):
        images = self.tokenizer.decode(tokens)
        self.counter.decoder += images.shape[0]
        logp = torch.log_softmax(self.verifier(images), -1)
        self.counter.verifier += images.shape[0]
        return logp[torch.arange(len(classes)), classes], images


class BlindScore:
    """The ablation of selection: calls ``score`` (so the same decoder and verifier calls are counted and
    the same images come back) but returns uniform random numbers from ``gen`` as the scores, so a
    search keeps random candidates. A beam search under it is plain sampling that spends calls.
    """

    def __init__(self, score: Score, gen: torch.Generator):
        self.score, self.gen = score, gen

    def __call__(self, classes: torch.Tensor, tokens: torch.Tensor):
        _, images = self.score(classes, tokens)
        return torch.rand(len(classes), generator=self.gen), images


def check_beam(budget: int, schedule: Sequence[int], candidates_per_beam: int) -> tuple[int, int]:
    """Candidates per step and beam width for a budget of ``budget`` scored candidates per prompt.

    ``per_step = budget / len(schedule)``; ``width = per_step / candidates_per_beam`` (at least 1;
    with fewer candidates than ``candidates_per_beam`` one beam takes them all). Every beam must
    score at least :data:`MIN_CANDIDATES_PER_BEAM` candidates per step: with one candidate per beam
    the search keeps every proposal and selects nothing, so its result is plain sampling (the
    5-call budget over the 5-step schedule did exactly that).

    Raises:
        ValueError: the budget is not a multiple of the number of steps, the candidates of a step
            do not split evenly over the beams, or a beam would score fewer than
            :data:`MIN_CANDIDATES_PER_BEAM` candidates per step (the message names ``budgets``
            and the value).
    """
    n = len(schedule)
    if budget < n or budget % n:
        raise ValueError(f"budgets: each budget must be a positive multiple of the {n} beam steps, got {budget}")
    per_step = budget // n
    width = max(1, per_step // candidates_per_beam)
    if per_step % width:
        raise ValueError(f"budgets: {budget} gives {per_step} candidates per step, which do not split evenly over "
                         f"{width} beams of {candidates_per_beam}")
    if per_step // width < MIN_CANDIDATES_PER_BEAM:
        raise ValueError(f"budgets: {budget} gives {per_step // width} candidate(s) per beam and step over the "
                         f"{n}-step schedule; a beam search needs at least {MIN_CANDIDATES_PER_BEAM} to select "
                         f"anything (use a budget >= {MIN_CANDIDATES_PER_BEAM * n} and candidates_per_beam >= "
                         f"{MIN_CANDIDATES_PER_BEAM}), got {budget}")
    return per_step, width


def best_of_n(propose: Propose, score: Score, classes: torch.Tensor, n: int, length: int,
              gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Best of ``n`` complete samples per prompt: ``n`` scored candidates per prompt.

    Returns:
        (tokens ``(P, length)``, images ``(P, ...)``, scores ``(P,)``) of the best sample of each prompt.
    """
    p = len(classes)
    cls = classes.repeat_interleave(n)
    cand = propose(cls, torch.zeros(p * n, 0, dtype=torch.long), length, gen)
    s, images = score(cls, cand)
    best = s.view(p, n).argmax(1) + torch.arange(p) * n
    return cand[best], images[best], s[best]


def beam_search(propose: Propose, score: Score, classes: torch.Tensor, schedule: Sequence[int], *, per_step: int,
                width: int, gen: torch.Generator,
                complete: Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor] | None = None):
    """Beam search over token prefixes (SoTo ``BeamSearch``; with ``complete``, ``LookaheadSearch``).

    Args:
        propose: samples continuations (the AR prior, or the uniform prior).
        score: scores decoded token sequences.
        classes: ``(P,)`` class of each prompt.
        schedule: strictly increasing cumulative token counts; the last is the full length.
        per_step: scored candidates per prompt per step, split evenly over the current beams
            (the first step has one empty beam).
        width: beams kept per prompt.
        gen: random generator of the proposals.
        complete: lookahead: ``complete(classes, candidates, gen) -> full-length tokens`` scored
            in place of the candidates; the beam keeps the candidates themselves.

    Returns:
        (tokens ``(P, schedule[-1])``, images, scores ``(P,)``) of the best last-step candidate.

    Raises:
        ValueError: the schedule is not strictly increasing from >= 1, ``per_step`` is not a
            multiple of ``width``, or a beam would score fewer than :data:`MIN_CANDIDATES_PER_BEAM`
            candidates per step (``per_step < 2 * width``: nothing would be selected).
    """
    if not schedule or schedule[0] < 1 or any(b <= a for a, b in zip(schedule, schedule[1:])):
        raise ValueError(f"schedule: need strictly increasing token counts >= 1, got {tuple(schedule)}")
    if width < 1 or per_step < width or per_step % width:
        raise ValueError(f"per_step: must be a multiple of width={width}, got {per_step}")
    if per_step // width < MIN_CANDIDATES_PER_BEAM:
        raise ValueError(f"per_step: must give each of the {width} beam(s) at least {MIN_CANDIDATES_PER_BEAM} "
                         f"candidates per step (with fewer the search selects nothing), got {per_step}")
    p = len(classes)
    beams = torch.zeros(p, 1, 0, dtype=torch.long)
    for length in schedule:
        n_beams, t = beams.shape[1], beams.shape[2]
        per_beam = per_step // n_beams
        flat = beams.repeat_interleave(per_beam, 1).reshape(p * per_step, t)
        cls = classes.repeat_interleave(per_step)
        cand = propose(cls, flat, length - t, gen)
        scored = cand if complete is None or length == schedule[-1] else complete(cls, cand, gen)
        s, images = score(cls, scored)
        s = s.view(p, per_step)
        top = s.topk(min(width, per_step), dim=1).indices
        rows = torch.arange(p)[:, None]
        beams = cand.view(p, per_step, length)[rows, top]
    best = top[:, 0] + torch.arange(p) * per_step
    return cand[best], images[best], s.flatten()[best]
