"""SPARK's factor-conditioned search and its baselines, over :mod:`.space` at a fixed number of evaluations.

SPARK (arXiv 2605.04057; code AIM-ResearchLab/SPARK) evolves a design by local edits. Each
iteration samples a parent from the archive, then

1. **scope router (ASR)** picks ONE functional factor from the parent's diagnostics
   (:func:`route`: a draw with probability proportional to :func:`factor_scores`);
2. **reasoning conditioner (RC)** turns the diagnostics into a factor-local directive: weights
   over the factor's moves (:func:`directive`, the knowledge rules of :func:`tag_weights`);
3. **scoped rewriter (SAR)** applies a move drawn from the directive (with the follow-up
   repairs the knowledge knows, :func:`repair`), and the edit is **rejected before evaluation**
   when it changed any field outside the chosen factor (:func:`~.space.scope_check`) or is not a
   valid, buildable spec.

Arms (:data:`ARMS`), all with the same knowledge and the same number of golden-model evaluations:
``spark`` (ASR + RC + SAR), ``freeform`` (one edit may touch 1-4 factors: knowledge moves of
several factors merged, repairs kept, no scope guard: the OpenEvolve analogue), ``asr-only``
(router, then a uniformly random in-factor move: no conditioning), ``rc-sar-only`` (uniformly
random factor, then the conditioned, scoped edit), ``random`` (uniform draws over the space) and
``tpe`` (optuna's TPE over the same genes), and ``spark-noguard`` (SPARK with the scope guard
off: its coupled follow-ups reach into entangled factors unrefused). The LLM of the paper is
replaced by rules that read only the diagnostics of :mod:`.evaluate`; they never see the score's
target.

The knowledge also knows how factors couple in a fixed-point learner (:func:`coupled_followups`):
a move in one factor asks for a partner edit in another (a hidden layer needs non-zero initial
parameters; a grid range sets the input format's integer bits; a smaller step underflows the
coefficient LSB). SPARK's guard refuses such a proposal when the two factors are measured as
entangled (:mod:`.interaction`) and lets it through when their effects add.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...spec import LearnerSpec
from .evaluate import Evaluation, Evaluator
from .space import (FACTORS, GENES, MOVES, ScopeViolation, applicable, apply_changes, factors_touched,
                    hardware_check, hidden_of, sample_spec, scope_check, spec_from_genes)

from . import ARMS  # noqa: E402  (defined once, in the package)
EDIT_ARMS = ("spark", "spark-noguard", "freeform", "asr-only", "rc-sar-only")
#: the initial-parameter scale a follow-up gives a new hidden layer (the interaction design's base value)
HIDDEN_INIT_SCALE = 0.1
#: fraction of updates rounding to zero above which a smaller step asks for a coefficient fractional bit
UNDERFLOW_FOLLOWUP = 0.01
#: weight every applicable move keeps (exploration), and every factor in the router
BASE_MOVE_WEIGHT = 0.05
BASE_FACTOR_WEIGHT = 0.05


# ----------------------------------------------------------------------------- knowledge rules
def tag_weights(d: dict, spec: LearnerSpec) -> dict[str, float]:
    """The knowledge rules: diagnostics -> weight of each kind of edit (a move's tags).

    Saturation of a signal class asks for integer bits of that class; errors or updates that
    round to zero ask for fractional bits (and a larger learning rate); inputs clamped at the
    grid ask for a wider grid, an unused grid for a narrower one; a high steady error asks for
    capacity (G, k, T, hidden units) and a smaller step; a slow recovery after drift for a larger
    step and less staleness; a budget overshoot for fewer resources, fewer DSPs, the pipelined
    schedule (II) or less staleness (latency); a design that already holds the target accuracy
    (smallest-learner mode) asks for fewer resources, precision and capacity.
    """
    w: dict[str, float] = defaultdict(float)
    over = d["lut_over"] + d["dsp_over"]
    for cls, key in (("input", "sat_input"), ("act", "sat_pred"), ("grad", "sat_grad"), ("coef", "sat_coef")):
        w[f"more_range:{cls}"] += 10.0 * d[key]
    w["more_precision:grad"] += 3.0 * d["zero_error"]
    w["more_precision:coef"] += 3.0 * d["zero_update"]
    w["faster_learning"] += 1.5 * d["zero_update"] + 8.0 * d["recovery_excess"]
    w["wider_grid"] += 10.0 * d["clamp_grid"]
    if d["clamp_grid"] < 1e-3:
        w["narrower_grid"] += 2.0 * d["grid_waste"]
    e = min(1.0, 4.0 * d["error_level"])
    above = d.get("above_target", 0.0)  # smallest-learner mode: the target holds, so spend less
    w["fewer_resources"] += 2.0 * above
    w["less_capacity"] += 1.0 * above
    for cls in ("input", "coef", "act", "grad", "basis", "acc"):
        w[f"less_precision:{cls}"] += 0.5 * above
    if over == 0.0 and not above:
        w["more_capacity"] += 2.0 * e
        w["finer_table"] += 0.5 * e
        w["more_precision:coef"] += 0.5 * e
        w["more_precision:act"] += 0.3 * e
    w["slower_learning"] += 1.5 * e * max(0.0, 1.0 - 10.0 * d["recovery_excess"])
    w["staleness_down"] += 4.0 * d["recovery_excess"] + 3.0 * d["latency_over"]
    w["fewer_resources"] += 3.0 * over + 1.0 * d["latency_over"]
    w["less_capacity"] += 1.0 * over
    for cls in ("input", "coef", "act", "grad", "basis", "acc"):
        w[f"less_precision:{cls}"] += 0.5 * over
    w["fewer_dsp"] += 3.0 * d["dsp_over"]
    w["kind"] += 0.5 * e + 0.5 * over
    w["ii"] += 3.0 * d["ii_over"]
    return w


def _move_weight(move, spec: LearnerSpec, w: dict) -> float:
    weight = BASE_MOVE_WEIGHT + sum(w.get(t, 0.0) for t in move.tags if t not in ("ii", "datapath", "fewer_dsp",
                                                                                 "schedule"))
    if move.name == "schedule swap":  # pipelining gives II = 1; back to sequential removes staleness
        weight += w["ii"] if spec.schedule == "sequential" else 0.5 * w["staleness_down"]
    if move.name == "datapath swap":  # serial: fewer DSPs, higher II; parallel: the reverse
        weight += w["fewer_dsp"] + 0.5 * w["fewer_resources"] if spec.datapath == "parallel" else w["ii"]
    return weight


def factor_scores(ev: Evaluation) -> dict[str, float]:
    """The scope router's evidence per factor: the sum of the knowledge weights of its applicable moves."""
    w = tag_weights(ev.diagnostics, ev.spec)
    scores = {}
    for factor in FACTORS:
        moves = applicable(ev.spec, factor)
        scores[factor] = BASE_FACTOR_WEIGHT + sum(_move_weight(m, ev.spec, w) - BASE_MOVE_WEIGHT for m, _ in moves) \
            if moves else 0.0
    return scores


def route(ev: Evaluation, rng: np.random.Generator) -> str:
    """ASR: one factor, drawn with probability proportional to :func:`factor_scores`."""
    s = factor_scores(ev)
    p = np.array([s[f] for f in FACTORS])
    return FACTORS[int(rng.choice(len(FACTORS), p=p / p.sum()))]


def directive(ev: Evaluation, factor: str) -> list[tuple[object, dict, float]]:
    """RC: the factor's applicable moves with their knowledge weights ``(move, changes, weight)``."""
    w = tag_weights(ev.diagnostics, ev.spec)
    return [(m, ch, _move_weight(m, ev.spec, w)) for m, ch in applicable(ev.spec, factor)]


def repair(spec: LearnerSpec, changes: dict) -> dict:
    """The follow-up edits the knowledge adds so that a move gives a buildable spec (any factor).

    A pipelined staleness below the new pipeline's minimum is raised to it; a grid the input
    format cannot hold gets input integer bits; a basis table finer than the input's position
    bits gets input fractional bits; a serial MLP datapath asks for the sequential schedule; an
    accumulator too narrow for the worst-case sum gets the integer bits it needs (fractional bits
    kept); initial parameters the coef format cannot hold start at zero instead.
    Returns the changes with the repairs added (unchanged when none applies).
    """
    from ...fixed import Fmt
    from ...hw.learner import min_staleness

    out = dict(changes)
    for _ in range(4):
        cand = None
        try:
            cand = apply_changes(spec, out)
            hardware_check(cand)
            return out
        except ValueError as exc:
            msg = str(exc)
        if "datapath='serial'" in msg:
            out["schedule"] = "sequential"
        elif "worst-case forward sum" in msg and "integer bits" in msg:
            import re

            fa = out.get("formats.acc", spec.formats.acc)
            need_i = int(re.search(r"at least (\d+) integer bits", msg).group(1))
            out["formats.acc"] = Fmt(fa.width + need_i - fa.int_bits, need_i, True, fa.quant, fa.overflow)
        elif "init_scale" in msg and "outside formats.coef" in msg:
            out["init_scale"] = 0.0
        elif "staleness" in msg and cand is not None:
            out["staleness"] = min_staleness(cand)
        elif "too narrow for grid_range" in msg or "fractional bits, leaving" in msg:
            fi = out.get("formats.input", spec.formats.input)
            lo, hi = out.get("grid_range", spec.grid_range)
            need_i = int(np.log2(hi)) + 1
            t = out.get("basis_table_bits", spec.basis_table_bits)
            e = int(round(np.log2((hi - lo) / out.get("grid_size", spec.grid_size))))
            need_f = max(fi.frac_bits, t - e)
            i = max(fi.int_bits, need_i)
            out["formats.input"] = Fmt(i + need_f, i, True, fi.quant, fi.overflow)
        else:
            return out
    return out


def coupled_followups(spec: LearnerSpec, changes: dict, diagnostics: dict) -> dict:
    """The knowledge of cross-factor coupling: partner edits a move asks for in another factor.

    * a hidden layer appears (TOPOLOGY: ``hidden up`` from none, ``kind swap`` onto a hidden
      MLP) while ``init_scale`` is 0: every hidden unit starts identical and the first layer's
      gradient is zero, so the follow-up sets ``init_scale`` to :data:`HIDDEN_INIT_SCALE`
      (SCHEDULE);
    * the grid range changes (BASIS): the input format's integer bits are set to what the grid
      needs (a wider grid overflows a format without them, a narrower one leaves unused integer
      bits), fractional bits kept (NUMERICS);
    * the learning rate halves (SCHEDULE) while more than :data:`UNDERFLOW_FOLLOWUP` of the
      updates already round to zero in ``formats.coef``: one more coefficient fractional bit
      (NUMERICS).

    Returns:
        ``changes`` with the follow-ups added (then :func:`repair` makes the result buildable).
    """
    from ...fixed import Fmt

    out = dict(changes)
    widths = out.get("widths", spec.widths)
    init = out.get("init_scale", spec.init_scale)
    if len(widths) > 2 and init == 0.0 and (len(spec.widths) == 2 or out.get("kind", spec.kind) != spec.kind):
        out["init_scale"] = HIDDEN_INIT_SCALE
    if "grid_range" in out and out.get("kind", spec.kind) == "kan":
        hi = out["grid_range"][1]
        fi = out.get("formats.input", spec.formats.input)
        need_i = int(np.log2(hi)) + 1
        if need_i != fi.int_bits:
            out["formats.input"] = Fmt(fi.frac_bits + need_i, need_i, fi.signed, fi.quant, fi.overflow)
    if ("learning_rate" in out and out["learning_rate"] < spec.learning_rate
            and diagnostics.get("zero_update", 0.0) > UNDERFLOW_FOLLOWUP):
        fc = out.get("formats.coef", spec.formats.coef)
        out["formats.coef"] = Fmt(fc.width + 1, fc.int_bits, fc.signed, fc.quant, fc.overflow)
    return out


# ----------------------------------------------------------------------------- the search loop
@dataclass
class ArmResult:
    """One arm's run on one seed.

    Attributes:
        arm: the arm; history: its evaluations in order; proposals: candidates proposed;
        invalid: proposals refused as invalid or not buildable; scope_rejected: proposals the
        scope guard refused; cross_factor: scoped proposals that changed another factor
        (refused or not); multi_factor: evaluated edits that changed more than one factor;
        factors: evaluated edits per factor touched; cross_pairs: evaluated multi-factor edits per
        factor pair ``"A x B"`` (scoped arms: the routed factor with each other factor changed;
        free-form: every pair of factors changed).
    """

    arm: str
    history: list[Evaluation] = field(default_factory=list)
    proposals: int = 0
    invalid: int = 0
    scope_rejected: int = 0
    cross_factor: int = 0
    multi_factor: int = 0
    factors: dict = field(default_factory=lambda: {f: 0 for f in FACTORS})
    cross_pairs: dict = field(default_factory=dict)

    def best(self, target: float | None = None) -> Evaluation | None:
        """The most accurate feasible evaluation; with ``target``, the feasible one with the fewest
        (surrogate) LUTs whose accuracy is >= target (None if there is none)."""
        feas = [e for e in self.history if e.feasible]
        if target is not None:
            holds = [e for e in feas if e.accuracy >= target]
            return min(holds, key=lambda e: (e.resources["lut"], -e.accuracy)) if holds else None
        return max(feas, key=lambda e: e.accuracy) if feas else None

    def best_so_far(self) -> np.ndarray:
        """(evaluations,) best feasible accuracy after each evaluation (NaN before the first)."""
        out, best = [], float("nan")
        for e in self.history:
            if e.feasible and not (e.accuracy <= best):
                best = e.accuracy
            out.append(best)
        return np.array(out)


def _tournament(history: list[Evaluation], rng: np.random.Generator, size: int = 3) -> Evaluation:
    idx = rng.choice(len(history), size=min(size, len(history)), replace=False)
    return max((history[i] for i in idx), key=lambda e: e.objective)


def _pick(items: list, weights: list[float], rng: np.random.Generator):
    p = np.asarray(weights, dtype=float)
    return items[int(rng.choice(len(items), p=p / p.sum()))]


def propose_edit(arm: str, parent: Evaluation, rng: np.random.Generator, entangled: frozenset | None = None,
                 leak: float = 0.0, leak_pairs: frozenset | None = None) -> tuple[LearnerSpec | None, str, str | None]:
    """One proposal of an edit arm from ``parent``.

    Args:
        arm: one of :data:`EDIT_ARMS`.
        parent: the evaluation edited.
        rng: the proposal's randomness.
        entangled: the scope guard's entanglement map (:func:`~.space.scope_check`; None: every
            pair entangled). ``spark-noguard`` and ``freeform`` have no guard.
        leak: probability that a scoped proposal also carries a uniformly random move of a factor
            paired with the chosen one in ``leak_pairs`` (a planted whole-program rewrite, the
            positive control's obstacle; 0 in the comparison).
        leak_pairs: the factor pairs a leak crosses (None: ``entangled``; both None: any factor).

    Returns:
        ``(child, status, factor)``: status ``"ok"``, ``"invalid"`` (not a valid buildable spec) or
        ``"scope"`` (rejected by the scope guard); child is None unless ok.
    """
    spec = parent.spec
    diag = parent.diagnostics
    if arm == "freeform":
        m = int(rng.integers(1, len(FACTORS) + 1))
        scores = factor_scores(parent)
        avail = [f for f in FACTORS if scores[f] > 0]
        p = np.array([scores[f] for f in avail])
        chosen = rng.choice(len(avail), size=min(m, len(avail)), replace=False, p=p / p.sum())
        changes: dict = {}
        for i in chosen:
            options = directive(parent, avail[int(i)])
            move, ch, _ = _pick(options, [o[2] for o in options], rng)
            changes.update(ch)
        changes = repair(spec, coupled_followups(spec, changes, diag))
        factor = None
    else:
        if arm in ("spark", "spark-noguard", "asr-only"):
            factor = route(parent, rng)
        else:  # rc-sar-only: a uniformly random factor that has a move
            factor = FACTORS[int(rng.choice([i for i, f in enumerate(FACTORS) if applicable(spec, f)]))]
        options = directive(parent, factor)
        if not options:
            return None, "invalid", factor
        if arm == "asr-only":  # no conditioning: any in-factor move, no follow-up knowledge
            _, changes, _ = options[int(rng.integers(len(options)))]
        else:
            _, ch, _ = _pick(options, [o[2] for o in options], rng)
            changes = coupled_followups(spec, ch, diag)
        if leak > 0 and rng.random() < leak:
            crossing = entangled if leak_pairs is None else leak_pairs
            partners = [f for f in FACTORS if f != factor and applicable(spec, f)
                        and (crossing is None or frozenset((factor, f)) in crossing)]
            if partners:
                other = applicable(spec, partners[int(rng.integers(len(partners)))])
                changes = {**other[int(rng.integers(len(other)))][1], **changes}
        if arm != "asr-only":
            changes = repair(spec, changes)
    try:
        child = apply_changes(spec, changes)
        hardware_check(child)
    except ValueError:
        return None, "invalid", factor
    if factor is not None and arm != "spark-noguard":
        try:
            scope_check(spec, child, factor, entangled)
        except ScopeViolation:
            return None, "scope", factor
    return child, "ok", factor


def run_edit_arm(arm: str, start: LearnerSpec, evaluator: Evaluator, budget: int, rng: np.random.Generator,
                 max_proposals: int | None = None, entangled: frozenset | None = None,
                 leak: float = 0.0, leak_pairs: frozenset | None = None,
                 on_edit: Callable[[Evaluation, Evaluation], None] | None = None) -> ArmResult:
    """Evolve from ``start`` with an edit arm until ``budget`` evaluations (or ``max_proposals``);
    ``entangled``, ``leak`` and ``leak_pairs`` as in :func:`propose_edit`. ``on_edit(parent, child)``
    is called with each evaluated edit (the parent's and the child's :class:`Evaluation`), in order;
    it sees the search, it does not steer it.

    Raises:
        ValueError: unknown arm.
    """
    if arm not in EDIT_ARMS:
        raise ValueError(f"arm must be one of {', '.join(EDIT_ARMS)}, got {arm!r}")
    res = ArmResult(arm)
    res.history.append(evaluator(start))
    seen = {start.to_toml()}
    cap = max_proposals or 50 * budget
    while evaluator.evaluations < budget and res.proposals < cap:
        parent = _tournament(res.history, rng)
        res.proposals += 1
        child, status, factor = propose_edit(arm, parent, rng, entangled, leak, leak_pairs)
        if status == "invalid":
            res.invalid += 1
            continue
        if status == "scope":
            res.scope_rejected += 1
            res.cross_factor += 1
            continue
        if factor is not None and factors_touched(parent.spec, child) - {factor}:
            res.cross_factor += 1
        key = child.to_toml()
        if key in seen:
            continue
        seen.add(key)
        touched = factors_touched(parent.spec, child)
        res.multi_factor += len(touched) > 1
        for f in touched:
            res.factors[f] = res.factors.get(f, 0) + 1
        for pair in _pairs(touched, factor):
            res.cross_pairs[pair] = res.cross_pairs.get(pair, 0) + 1
        res.history.append(evaluator(child))
        if on_edit is not None:
            on_edit(parent, res.history[-1])
    return res


def pair_name(a: str, b: str) -> str:
    """``"A x B"`` with the factors in :data:`~.space.FACTORS` order (the key of a factor pair)."""
    a, b = sorted((a, b), key=lambda f: FACTORS.index(f) if f in FACTORS else len(FACTORS))
    return f"{a} x {b}"


def _pairs(touched: set, factor: str | None) -> list[str]:
    if factor is not None:
        return [pair_name(factor, f) for f in touched if f != factor]
    t = sorted(touched)
    return [pair_name(a, b) for i, a in enumerate(t) for b in t[i + 1:]]


def anytime_objective(res: ArmResult, budget: int) -> float:
    """Mean over ``budget`` evaluations of the best search objective so far (the last value carried
    to the end when the arm stopped early): how fast an arm climbs, not only where it ends."""
    best, out = -np.inf, []
    for e in res.history[:budget]:
        best = max(best, e.objective)
        out.append(best)
    if not out:
        raise ValueError("res: the arm evaluated nothing")
    out += [out[-1]] * (budget - len(out))
    return float(np.mean(out))


def genes_of(spec: LearnerSpec) -> dict:
    """The genes (:data:`~.space.GENES`) of a spec of the space (inverse of :func:`~.space.spec_from_genes`)."""
    f = spec.formats
    g = {"kind": spec.kind, "hidden": hidden_of(spec), "datapath": spec.datapath, "grid_size": spec.grid_size,
         "spline_order": spec.spline_order, "range_exp": int(round(np.log2(spec.grid_range[1]))),
         "table_bits": spec.basis_table_bits, "basis_w": f.basis.width, "acc_w": f.acc.width,
         "acc_i": f.acc.int_bits, "rounding": f.coef.quant, "lr_shift": spec.lr_shift, "schedule": spec.schedule,
         "staleness": spec.staleness, "init_scale": float(spec.init_scale)}
    for cls in ("input", "coef", "act", "grad"):
        g[f"{cls}_w"] = getattr(f, cls).width
        g[f"{cls}_i"] = getattr(f, cls).int_bits
    return g


def _kept(start: LearnerSpec) -> dict:
    """Fields a drawn spec takes from the start spec: the initial-parameter seed, and ``timing`` (no gene
    and no move edits the register-stage plan, so every arm keeps the start's)."""
    kept = {"init_seed": start.init_seed}
    if hasattr(start, "timing"):
        kept["timing"] = start.timing
    return kept


def run_random(start: LearnerSpec, evaluator: Evaluator, budget: int, rng: np.random.Generator) -> ArmResult:
    """Random search: the start spec, then uniform draws over the space (invalid draws are free)."""
    res = ArmResult("random")
    res.history.append(evaluator(start))
    while evaluator.evaluations < budget:
        res.proposals += 1
        spec = sample_spec(rng, start.n_in, start.n_out).replace(**_kept(start))
        ev = evaluator(spec)
        if all(ev is not h for h in res.history):
            res.history.append(ev)
    return res


def run_tpe(start: LearnerSpec, evaluator: Evaluator, budget: int, seed: int, max_trials: int | None = None) -> ArmResult:
    """optuna TPE over the genes (categorical), the start spec as its first trial; invalid trials are free."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    res = ArmResult("tpe")
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=10))
    study.enqueue_trial(genes_of(start))
    seen: set[int] = set()
    cap = max_trials or 50 * budget
    while evaluator.evaluations < budget and res.proposals < cap:
        trial = study.ask()
        genes = {k: trial.suggest_categorical(k, list(v)) for k, v in GENES.items()}
        res.proposals += 1
        try:
            spec = spec_from_genes(genes, start.n_in, start.n_out).replace(**_kept(start))
            hardware_check(spec)
        except ValueError:
            res.invalid += 1
            study.tell(trial, -3.0)
            continue
        ev = evaluator(spec)
        if id(ev) not in seen:
            seen.add(id(ev))
            res.history.append(ev)
        study.tell(trial, ev.objective)
    return res


def evals_to_reach(best_so_far: np.ndarray, threshold: float) -> int | None:
    """First evaluation (1-based) whose best-so-far accuracy is >= ``threshold`` (None: never)."""
    hit = np.flatnonzero(np.nan_to_num(best_so_far, nan=-np.inf) >= threshold)
    return int(hit[0]) + 1 if hit.size else None
