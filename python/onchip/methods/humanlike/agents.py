"""The generators whose behaviour is compared with the humans'.

Every generator answers the same held-out scenarios once (the budget): ``(n,)`` chosen modes for
mobility, ``(n, 3)`` party, ideology and vote indices for opinion.

* :func:`random_behaviour`: uniform over the options of every question.
* :func:`near_human_behaviour`: the humans' answers with a share x replaced by uniform noise: a
  calibrated positive control for the metric's sensitivity (human-likeness must fall with x).
* :func:`utility_behaviour`: homo economicus - the cheapest mode in generalised cost; voters who
  follow their income's self-interest (above the reference humans' median income: Republican,
  conservative, Dole; else Democrat, liberal, Clinton), perfectly consistent.
* :class:`ConditionalLogit` (mobility; McFadden 1974) and :class:`OpinionChain` (opinion: a
  multinomial logit per answer, each conditioned on demographics and the earlier answers): statistical
  models fitted to the reference humans, sampled.
* :func:`lm_option_probs` + the prompt builders: a language model (Gemma 3 270M base) given a persona
  from the scenario's demographics, scoring each option by its next-token log-probability; answers
  are sampled from the renormalised option probabilities. Questions are asked independently given
  the persona (the probabilities are then cacheable per prompt).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .data import EDUCATION, IDEOLOGIES, INCOME_BANDS, MODES, PARTIES, VOTES, Mobility, Opinion

OPINION_SIZES = (len(PARTIES), len(IDEOLOGIES), len(VOTES))


def sample_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One category per row of ``probs`` ``(n, k)`` (rows summing to 1) -> ``(n,)`` int64."""
    u = rng.random(len(probs))[:, None]
    return np.minimum((np.cumsum(probs, 1) < u).sum(1), probs.shape[1] - 1).astype(np.int64)


def random_behaviour(domain: str, scenarios, rng: np.random.Generator) -> np.ndarray:
    """Uniform random answers for ``scenarios.n`` people."""
    if domain == "mobility":
        return rng.integers(0, len(MODES), scenarios.n)
    return np.column_stack([rng.integers(0, k, scenarios.n) for k in OPINION_SIZES])


def near_human_behaviour(humans: np.ndarray, x: float, u: np.ndarray, replacement: np.ndarray) -> np.ndarray:
    """Calibrated near-human generator: the humans' answers with a share ``x`` replaced by noise.

    Every answer (each question of each person) whose uniform draw ``u`` is below ``x`` is replaced by
    the matching entry of ``replacement`` (uniform random answers). With the same ``u`` and
    ``replacement`` for every ``x`` the replaced sets are nested, so a larger ``x`` only adds noise:
    ``x = 0`` gives the humans, ``x = 1`` a uniform random agent.

    Args:
        humans: ``(n,)`` or ``(n, 3)`` answers; u: uniform [0, 1) draws of the same shape;
        replacement: random answers of the same shape.

    Raises:
        ValueError: ``x`` outside [0, 1] or shapes that differ.
    """
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x: noise share must be in [0, 1], got {x!r}")
    if not (np.shape(humans) == np.shape(u) == np.shape(replacement)):
        raise ValueError(f"u, replacement: must have the humans' shape {np.shape(humans)}, got "
                         f"{np.shape(u)}, {np.shape(replacement)}")
    return np.where(np.asarray(u) < x, replacement, humans).astype(np.int64)


def utility_behaviour(domain: str, scenarios, reference) -> np.ndarray:
    """Homo economicus (module docstring); ``reference`` gives the opinion domain's median income."""
    if domain == "mobility":
        return scenarios.gc.argmin(1).astype(np.int64)
    rich = (scenarios.income > np.median(reference.income)).astype(np.int64)
    return np.column_stack([2 * rich, 2 * rich, rich])


class ConditionalLogit:
    """McFadden's conditional logit for the mode choice: ``P(j) ~ exp(x_ij . theta)`` with alternative
    constants for air/train/bus, cost, in-vehicle time, waiting time (per 100 AUD / minutes) and
    income (per 100 k AUD) times each alternative constant: 9 parameters, fitted by maximum likelihood
    (L-BFGS, a 1e-3 ridge so a separable sample still has a finite optimum).
    """

    n_params = 9

    @staticmethod
    def design(s: Mobility) -> np.ndarray:
        """Attributes ``(n, 4, 9)`` of each alternative (car is the base alternative)."""
        n = s.n
        x = np.zeros((n, 4, 9))
        asc = np.eye(4)[:, :3]
        x[:, :, 0:3] = asc[None]
        x[:, :, 3] = s.cost / 100
        x[:, :, 4] = s.time / 100
        x[:, :, 5] = s.wait / 100
        x[:, :, 6:9] = asc[None] * (s.income / 100)[:, None, None]
        return x

    def __init__(self, theta: np.ndarray | None = None):
        self.theta = None if theta is None else np.asarray(theta, float)

    def fit(self, s: Mobility) -> "ConditionalLogit":
        """Maximum likelihood on the travellers ``s`` (their ``choice``); returns self."""
        from scipy.optimize import minimize

        x, y = self.design(s), s.choice

        def nll(theta):
            u = x @ theta
            u = u - u.max(1, keepdims=True)
            logp = u - np.log(np.exp(u).sum(1, keepdims=True))
            p = np.exp(logp)
            f = -logp[np.arange(len(y)), y].sum() + 1e-3 * theta @ theta
            g = -(x[np.arange(len(y)), y] - (p[:, :, None] * x).sum(1)).sum(0) + 2e-3 * theta
            return f, g

        self.theta = minimize(nll, np.zeros(self.n_params), jac=True, method="L-BFGS-B").x
        return self

    def probs(self, s: Mobility) -> np.ndarray:
        """Choice probabilities ``(n, 4)``."""
        u = self.design(s) @ self.theta
        e = np.exp(u - u.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def sample(self, s: Mobility, rng: np.random.Generator) -> np.ndarray:
        """One sampled choice per traveller ``(n,)``."""
        return sample_rows(self.probs(s), rng)


class OpinionChain:
    """party ~ demographics; ideology ~ demographics + party; vote ~ demographics + party + ideology:
    one multinomial logit each (scikit-learn ``LogisticRegression`` on standardised inputs, L2 with C = 1), answers sampled
    in that order so the fitted dependence between answers is kept."""

    def fit(self, s: Opinion) -> "OpinionChain":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        b = np.column_stack([s.party, s.ideology, s.vote])
        self.models = []
        for q in range(3):
            # standardised inputs: a few dozen L-BFGS iterations instead of hundreds
            model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=500))
            self.models.append(model.fit(self._inputs(s.features(), b, q), b[:, q]))
        return self

    @staticmethod
    def _inputs(features, b, q):
        onehots = [np.eye(k)[b[:, j]] for j, k in enumerate(OPINION_SIZES[:q])]
        return np.column_stack([features, *onehots]) if onehots else features

    def sample(self, s: Opinion, rng: np.random.Generator) -> np.ndarray:
        """Sampled (party, ideology, vote) ``(n, 3)``."""
        b = np.zeros((s.n, 3), np.int64)
        for q, model in enumerate(self.models):
            p = np.zeros((s.n, OPINION_SIZES[q]))
            p[:, model.classes_] = model.predict_proba(self._inputs(s.features(), b, q))
            b[:, q] = sample_rows(p, rng)
        return b


# ---------------------------------------------------------------- persona prompts for the language model

MOBILITY_OPTIONS = tuple(" " + m for m in MODES)
OPINION_QUESTIONS = (
    ("Party (Democrat, Independent or Republican):", tuple(" " + p for p in PARTIES)),
    ("Political views (liberal, moderate or conservative):", tuple(" " + i for i in IDEOLOGIES)),
    ("Vote in the 1996 presidential election (Clinton or Dole):", tuple(" " + v for v in VOTES)),
)


def mobility_prompt(s: Mobility, i: int) -> str:
    """Persona + the four options of traveller ``i`` (cost, door-to-door minutes incl. waiting); the
    next word is the chosen mode."""
    tt = s.time[i] + s.wait[i]
    opts = "; ".join(f"{m} {s.cost[i, j]:.0f} AUD {tt[j]:.0f} min" for j, m in enumerate(MODES))
    return (f"Trip Sydney-Melbourne. Traveller: household income {s.income[i]:.0f}k AUD, party of {s.party[i]:.0f}.\n"
            f"Options: {opts}.\nThe traveller went by")


def income_text(code: int) -> str:
    """ANES income code 1-24 as words."""
    lo, hi = INCOME_BANDS[int(code) - 1]
    if lo == 0:
        return f"under ${hi}k"
    return f"over ${lo}k" if hi is None else f"${lo}-{hi}k"


def place_text(popul: float) -> str:
    """Census place population (thousands) as words."""
    if popul < 1:
        return "rural area"
    return f"town of {popul:.0f}k" if popul < 100 else f"city of {popul / 1000:.1f} million" if popul >= 1000 \
        else f"city of {popul:.0f}k"


def opinion_persona(s: Opinion, i: int) -> str:
    """A respondent's demographics as one line."""
    return (f"1996 US election survey. Respondent: age {s.age[i]:.0f}, {EDUCATION[s.educ[i] - 1]}, income "
            f"{income_text(s.income[i])}, TV news {s.tvnews[i]} days a week, {place_text(s.popul[i])}.")


def opinion_prompts(s: Opinion, i: int) -> list[str]:
    """The three questions for respondent ``i``, each after the persona; the next word is the answer."""
    return [opinion_persona(s, i) + "\n" + q for q, _ in OPINION_QUESTIONS]


def lm_option_probs(lm, prompts: Sequence[str], options: Sequence[str], *, batch_size: int = 16,
                    progress: bool = False, desc: str = "lm") -> np.ndarray:
    """Probabilities ``(len(prompts), len(options))`` of each option as the next token, renormalised
    over the options.

    Args:
        lm: an object with ``next_token_logprobs(prompts) -> (n, vocab)`` and a ``tokenizer``
            (:func:`onchip.methods._lm.causal_lm`).
        options: continuations that are each one token (with their leading space).

    Raises:
        ValueError: an option is not a single token, or two options share a token.
    """
    from onchip.progress import progress_bar

    ids = [lm.tokenizer(o, add_special_tokens=False)["input_ids"] for o in options]
    if any(len(t) != 1 for t in ids) or len({t[0] for t in ids}) != len(ids):
        raise ValueError(f"options: each must be one distinct token, got {dict(zip(options, ids))}")
    cols = [t[0] for t in ids]
    out = np.zeros((len(prompts), len(options)))
    for k in progress_bar(range(0, len(prompts), batch_size), desc=desc, disable=not progress, leave=False):
        lp = np.asarray(lm.next_token_logprobs(list(prompts[k:k + batch_size])), float)[:, cols]
        e = np.exp(lp - lp.max(1, keepdims=True))
        out[k:k + batch_size] = e / e.sum(1, keepdims=True)
    return out
