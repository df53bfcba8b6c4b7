"""Measured coupling between the factors of :mod:`.space`: a two-way factorial design per factor pair.

SPARK (arXiv 2605.04057) guards against edits that reach into *entangled* factors: regions of the
program whose effects on the score do not add. Whether two of our factors entangle is measured,
not assumed: for each pair (A, B) of :data:`~.space.FACTORS`, one probe field of A at
:data:`LEVELS` values times one probe field of B at its values, the other fields at the task's
preset, each cell scored by the golden model on several seeds (the seed changes the stream and
the initial parameters). A two-way analysis of variance (:func:`two_way_anova`) splits the score
into the main effects of A and B and their interaction A x B; the interaction is tested with the
F test and with a permutation test of the additive model's residuals (Freedman & Lane 1983;
Anderson & ter Braak 2003, "Permutation tests for multi-factorial analysis of variance"), which
does not lean on normal errors (the clipped R^2 of a diverged learner is far from normal).

The probes tie to how our fixed-point learners overflow and underflow (:data:`PROBES`):
``grid_range`` (BASIS: the input span one spline covers), ``formats.coef`` integer bits at a
fixed width (NUMERICS: more range for the parameters, fewer fractional bits for small updates),
the hidden width of a two-layer learner (TOPOLOGY: the fan-in of the output sum) and the
learning rate (SCHEDULE: the size of each update against the coef LSB); the design varies
around :func:`coupling_base`.

A pair is **entangled** (:func:`entangled_pairs`) when its interaction is significant after a
Bonferroni correction over the pairs (permutation p-value) *and* carries at least
:data:`MIN_INTERACTION_SHARE` of the pair's explained sum of squares: with deterministic golden
runs even a negligible interaction can be significant, so the share guards the decision.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ...spec import LearnerSpec
from .space import FACTORS, apply_changes, hardware_check, with_hidden

#: levels per probe (3 values, the task's preset value among them where it lies on the grid)
LEVELS = 3
#: significance level of the interaction test, before the Bonferroni correction over pairs
ALPHA = 0.05
#: smallest share SS_AxB / (SS_A + SS_B + SS_AxB) for an entangled pair (fixed before measuring)
MIN_INTERACTION_SHARE = 0.05
#: permutations of the interaction test
PERMUTATIONS = 2000


@dataclass(frozen=True)
class Probe:
    """One probe field of a factor: a name, its level labels, and ``apply(spec, level) -> changes``."""

    factor: str
    name: str
    levels: tuple
    changes: object  # (spec, level) -> dict of field path -> value


#: coefficient width of the NUMERICS probe: narrow enough that an integer bit costs a fractional
#: bit that small updates need (the search's LUT budget pushes the formats this narrow)
PROBE_COEF_WIDTH = 10


def _coef_int(spec: LearnerSpec, int_bits: int) -> dict:
    from ...fixed import Fmt

    f = spec.formats.coef
    return {"formats.coef": Fmt(PROBE_COEF_WIDTH, int_bits, f.signed, f.quant, f.overflow)}


def coupling_base(preset: LearnerSpec) -> LearnerSpec:
    """The spec the factorial designs vary around: ``preset`` with ``init_scale`` set to the value the
    knowledge gives a new hidden layer (:data:`.search.HIDDEN_INIT_SCALE`): with zero initial
    parameters a hidden layer never learns, and the TOPOLOGY probe would measure only that."""
    from .search import HIDDEN_INIT_SCALE

    return preset.replace(init_scale=HIDDEN_INIT_SCALE)


def probes_for(preset: LearnerSpec) -> dict[str, Probe]:
    """The probe of each factor around ``preset`` (a KAN preset of one of the search tasks).

    BASIS: grid range ±2^(a-1), ±2^a, ±2^(a+1) around the preset's ±2^a; NUMERICS: the coef
    format ``ap_fixed<10, I>`` with I = 1, 2, 3 integer bits (range against fractional bits);
    TOPOLOGY: no hidden layer, 2 or 8 hidden units; SCHEDULE: learning rate 2^-(s-2), 2^-s,
    2^-(s+2) around the preset's 2^-s (2^0 at most).

    Raises:
        ValueError: ``preset`` is not a KAN (the BASIS probe needs a grid).
    """
    if preset.kind != "kan":
        raise ValueError(f"preset: the probes need a KAN preset, got kind {preset.kind!r}")
    a = int(round(np.log2(preset.grid_range[1])))
    s = preset.lr_shift
    return {
        "BASIS": Probe("BASIS", "grid_range", tuple(2.0 ** e for e in (a - 1, a, a + 1)),
                       lambda sp, hi: {"grid_range": (-hi, hi)}),
        "NUMERICS": Probe("NUMERICS", f"formats.coef integer bits at width {PROBE_COEF_WIDTH}", (1, 2, 3),
                          _coef_int),
        "TOPOLOGY": Probe("TOPOLOGY", "hidden width", (0, 2, 8), lambda sp, h: {"widths": with_hidden(sp, h)}),
        "SCHEDULE": Probe("SCHEDULE", "learning_rate", tuple(2.0 ** -t for t in (max(0, s - 2), s, s + 2)),
                          lambda sp, lr: {"learning_rate": lr}),
    }


def two_way_anova(y: np.ndarray, *, permutations: int = PERMUTATIONS, seed: int = 0) -> dict:
    """Two-way analysis of variance with replication, balanced design.

    Args:
        y: (a, b, n) scores: level i of factor A, level j of factor B, replicate r; a, b >= 2, n >= 2.
        permutations: permutations of the additive model's residuals for the interaction's
            permutation p-value (0: none).
        seed: seeds the permutations.

    Returns:
        ``{"ss_a", "ss_b", "ss_ab", "ss_error", "df_a", "df_b", "df_ab", "df_error", "f_a", "f_b",
        "f_ab", "p_a", "p_b", "p_ab" (F test), "p_ab_perm" (permutation test; None with 0
        permutations), "partial_eta2_ab" = SS_AB / (SS_AB + SS_E), "interaction_share" = SS_AB /
        (SS_A + SS_B + SS_AB) (0 when nothing varies), "max_abs_interaction" (largest |cell mean -
        row mean - column mean + grand mean|, score units)}``. An F statistic with zero error
        variance is inf (p 0) when its sum of squares is > 0, else nan (p 1).

    Raises:
        ValueError: ``y`` is not 3-d with a, b, n >= 2, or holds a non-finite value.
    """
    y = np.asarray(y, dtype=float)
    if y.ndim != 3 or min(y.shape) < 2:
        raise ValueError(f"y: need shape (a, b, n) with a, b, n >= 2, got {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError("y: every score must be finite")
    from scipy import stats

    a, b, n = y.shape
    cell = y.mean(axis=2)
    grand = cell.mean()
    row, col = cell.mean(axis=1), cell.mean(axis=0)
    inter = cell - row[:, None] - col[None, :] + grand
    ss_a = b * n * float(((row - grand) ** 2).sum())
    ss_b = a * n * float(((col - grand) ** 2).sum())
    ss_ab = n * float((inter**2).sum())
    ss_e = float(((y - cell[:, :, None]) ** 2).sum())
    df_a, df_b, df_ab, df_e = a - 1, b - 1, (a - 1) * (b - 1), a * b * (n - 1)
    # relative floor: sums of squares below float rounding of the scores count as zero
    tiny = 1e-12 * max(1.0, float((y**2).sum()))

    def f_and_p(ss, df):
        if ss_e <= tiny:
            return (float("inf"), 0.0) if ss > tiny else (float("nan"), 1.0)
        f = (ss / df) / (ss_e / df_e)
        return float(f), float(stats.f.sf(f, df, df_e))

    f_a, p_a = f_and_p(ss_a, df_a)
    f_b, p_b = f_and_p(ss_b, df_b)
    f_ab, p_ab = f_and_p(ss_ab, df_ab)
    p_perm = None
    if permutations:
        # residuals of the additive (reduced) model, permuted over every cell and added back to
        # the additive fit; SS_AB recomputed (Freedman & Lane)
        additive = row[:, None, None] + col[None, :, None] - grand
        resid = y - additive
        rng = np.random.default_rng(seed)
        flat = resid.reshape(-1)
        hits = 0
        for _ in range(permutations):
            yp = additive + rng.permutation(flat).reshape(y.shape)
            cp = yp.mean(axis=2)
            ip = cp - cp.mean(axis=1)[:, None] - cp.mean(axis=0)[None, :] + cp.mean()
            hits += n * float((ip**2).sum()) >= ss_ab - tiny
        p_perm = (hits + 1) / (permutations + 1)
    explained = ss_a + ss_b + ss_ab
    return {"ss_a": ss_a, "ss_b": ss_b, "ss_ab": ss_ab, "ss_error": ss_e, "df_a": df_a, "df_b": df_b,
            "df_ab": df_ab, "df_error": df_e, "f_a": f_a, "f_b": f_b, "f_ab": f_ab, "p_a": p_a, "p_b": p_b,
            "p_ab": p_ab, "p_ab_perm": p_perm,
            "partial_eta2_ab": ss_ab / (ss_ab + ss_e) if ss_ab + ss_e > tiny else 0.0,
            "interaction_share": ss_ab / explained if explained > tiny else 0.0,
            "max_abs_interaction": float(np.abs(inter).max())}


def is_entangled(test: dict, n_pairs: int, *, alpha: float = ALPHA,
                 min_share: float = MIN_INTERACTION_SHARE) -> bool:
    """The decision of :func:`entangled_pairs` for one pair's :func:`two_way_anova` result:
    (permutation p-value, else F p-value) < ``alpha / n_pairs`` and interaction share >= ``min_share``."""
    p = test["p_ab_perm"] if test.get("p_ab_perm") is not None else test["p_ab"]
    return bool(p < alpha / n_pairs and test["interaction_share"] >= min_share)


def factorial_scores(score, preset: LearnerSpec, probe_a: Probe, probe_b: Probe, seeds) -> np.ndarray:
    """(levels A, levels B, seeds) scores of the factorial design; ``score(spec, seed) -> float``.

    The other fields stay at ``preset`` (its ``init_seed`` is replaced by each seed). A cell whose
    spec the space cannot build gets the repairs the space's value grids need: none are needed
    for the probes of :func:`probes_for` on the task presets.

    Raises:
        ValueError: a cell's spec is not valid or buildable, naming the two levels.
    """
    out = np.empty((len(probe_a.levels), len(probe_b.levels), len(seeds)))
    for i, la in enumerate(probe_a.levels):
        for j, lb in enumerate(probe_b.levels):
            try:
                spec = apply_changes(preset, {**probe_a.changes(preset, la), **probe_b.changes(preset, lb)})
                hardware_check(spec)
            except ValueError as exc:
                raise ValueError(f"{probe_a.name}={la}, {probe_b.name}={lb}: {exc}") from None
            for r, s in enumerate(seeds):
                out[i, j, r] = score(spec.replace(init_seed=int(s)), int(s))
    return out


def measure_coupling(score, preset: LearnerSpec, seeds, *, probes: dict | None = None, progress=None,
                     permutations: int = PERMUTATIONS) -> dict:
    """The factorial design and interaction test for every pair of factors.

    Args:
        score: ``score(spec, seed) -> float``, higher better (the golden model's accuracy on the
            seed's stream).
        preset: the spec the design varies around.
        seeds: replicates, >= 2.
        probes: factor -> :class:`Probe` (default :func:`probes_for`).
        progress: called with ``(pair_index, n_pairs)`` after each pair (None: silent).
        permutations: of the interaction's permutation test.

    Returns:
        ``{"pairs": [{"a", "b", "probe_a", "probe_b", "levels_a", "levels_b", "cell_means"
        (a x b list), **two_way_anova(...), "entangled"}], "entangled": [[a, b], ...], "alpha",
        "min_share", "seeds", "evaluations"}``.

    Raises:
        ValueError: fewer than 2 seeds.
    """
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds: the interaction test needs >= 2 replicates, got {seeds}")
    probes = probes or probes_for(preset)
    pairs = list(itertools.combinations([f for f in FACTORS if f in probes], 2))
    rows, evals = [], 0
    for k, (fa, fb) in enumerate(pairs):
        pa, pb = probes[fa], probes[fb]
        y = factorial_scores(score, preset, pa, pb, seeds)
        evals += y.size
        test = two_way_anova(y, permutations=permutations, seed=k)
        rows.append({"a": fa, "b": fb, "probe_a": pa.name, "probe_b": pb.name,
                     "levels_a": [float(v) for v in pa.levels], "levels_b": [float(v) for v in pb.levels],
                     "cell_means": y.mean(axis=2).round(6).tolist(), **test,
                     "entangled": is_entangled(test, len(pairs))})
        if progress:
            progress(k + 1, len(pairs))
    return {"pairs": rows, "entangled": [[r["a"], r["b"]] for r in rows if r["entangled"]],
            "alpha": ALPHA, "bonferroni_pairs": len(pairs), "min_share": MIN_INTERACTION_SHARE, "seeds": seeds,
            "evaluations": evals}


def entangled_pairs(measurement: dict) -> frozenset:
    """The scope guard's entanglement map from :func:`measure_coupling`: a set of ``frozenset({A, B})``."""
    return frozenset(frozenset(p) for p in measurement["entangled"])
