"""The evaluator of ``onchip autotune``: a spec -> golden-model stream accuracy, diagnostics, resources.

One evaluation runs the bit-exact golden model (:class:`onchip.model.GoldenLearner`)
test-then-train over the search stream and returns

* ``accuracy``: assignment fidelity over the whole stream (readout tasks) or
  R^2 = 1 - MSE / Var(y) over the whole stream, clipped at -1 (regression tasks): higher is better;
* ``diagnostics``: what the run tells about the design, the only thing the knowledge rules read
  (:data:`DIAGNOSTICS`): saturation of inputs, predictions, errors and parameters, errors that
  round to zero, updates that round to zero, inputs clamped at the KAN grid's ends, unused grid,
  the steady-state error level and the excess error right after each drift (slow recovery),
  and the overshoot of each user budget;
* ``resources``: LUT / FF / DSP from the resource surrogate (:mod:`.resources`), the II and the
  latency in cycles from the hardware generator's schedule (no Verilog is written).

Tasks (``SEARCH_TASKS``) and the held-out drift each is checked on (``HELDOUT``):
``readout-drift`` = the qubit-readout stream with the default drift (20 deg ramp, +90 deg phase
jump, gain 0.8 and offset); ``readout-gain-decay`` (held out) = a -30 deg ramp, a gain decay to
0.7, a -120 deg phase jump and an offset the search never saw. ``drift-regression`` = the
project's three-segment regression; ``regression-heldout`` = three other targets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...spec import LearnerSpec
from ...tasks import Stream

from . import SEARCH_TASKS  # noqa: E402  (defined once, in the package)
HELDOUT = {"readout-drift": "readout-gain-decay", "drift-regression": "regression-heldout"}
TASK_KIND = {"readout-drift": "readout", "readout-gain-decay": "readout",
             "drift-regression": "regression", "regression-heldout": "regression"}
PRESET_OF = {"readout-drift": "kan-readout", "drift-regression": "kan-regression"}

#: the diagnostics an evaluation reports (each a number >= 0; budget overshoots are fractions)
DIAGNOSTICS = ("sat_input", "clamp_grid", "grid_waste", "sat_pred", "sat_grad", "sat_coef", "zero_error",
               "zero_update", "error_level", "recovery_excess", "lut_over", "dsp_over", "ii_over",
               "latency_over", "above_target")

_HELDOUT_REGRESSION = (
    ("0.9 tanh(2x)", lambda x: 0.9 * np.tanh(2.0 * x)),
    ("0.5 cos(pi x) + 0.25 x", lambda x: 0.5 * np.cos(np.pi * x) + 0.25 * x),
    ("|x| - 1", lambda x: np.abs(x) - 1.0),
)


def make_task_stream(task: str, samples: int, seed: int, data=None) -> Stream:
    """The stream of a search or held-out task.

    Args:
        task: one of :data:`SEARCH_TASKS` or a value of :data:`HELDOUT`.
        samples: stream length N (>= 30).
        seed: stream seed (>= 0).
        data: readout shots file for the readout tasks (None: the built-in source).

    Raises:
        ValueError: unknown task, or a data file given to a regression task.
    """
    from ...tasks import DriftEvent, DriftStep, ReadoutDrift, make_drift_regression, make_qubit_readout
    from ...tasks.regression import X_RANGE, segment_bounds

    if task not in TASK_KIND:
        raise ValueError(f"task: unknown task {task!r}; choose one of {', '.join(TASK_KIND)}")
    if TASK_KIND[task] == "regression" and data is not None:
        raise ValueError(f"data: the {task} task takes no data file, got {str(data)!r}")
    if task == "readout-drift":
        return make_qubit_readout(samples, seed, data=data)
    if task == "readout-gain-decay":
        drift = ReadoutDrift(ramp_deg=-30.0, steps=(
            DriftStep(0.3, gain=0.7, label="gain decay x0.7"),
            DriftStep(0.55, rotation_deg=-120.0, label="phase jump -120 deg"),
            DriftStep(0.8, offset=(-0.25, 0.3), label="offset (-0.25, +0.3) sep."),
        ))
        return make_qubit_readout(samples, seed, data=data, drift=drift)
    if task == "drift-regression":
        return make_drift_regression(samples, seed)
    rng = np.random.default_rng([seed, 7])
    x = rng.uniform(X_RANGE[0], X_RANGE[1], size=(samples, 1))
    y = np.empty_like(x)
    bounds = segment_bounds(samples)
    for (start, stop), (_, f) in zip(bounds, _HELDOUT_REGRESSION):
        y[start:stop] = f(x[start:stop])
    events = tuple(DriftEvent(bounds[k][0], f"target -> {_HELDOUT_REGRESSION[k][0]}") for k in (1, 2))
    return Stream("drift-regression", x, y, events, {"task": task, "samples": samples, "seed": seed})


@dataclass(frozen=True)
class Budgets:
    """The user's hardware budgets (None: no limit).

    Attributes:
        lut: LUTs (Yosys ``lut`` of the learner core).
        dsp: DSP slices.
        ii_max: initiation interval, cycles.
        latency_max_ns: latency to the committed update, ns (needs ``fmax_mhz``).
        fmax_mhz: clock the latency is computed at.
    """

    lut: float | None = None
    dsp: float | None = None
    ii_max: int | None = None
    latency_max_ns: float | None = None
    fmax_mhz: float | None = None

    def overshoot(self, res: dict) -> dict[str, float]:
        """Fraction by which each budget is exceeded (0 when within): ``lut_over``, ``dsp_over``,
        ``ii_over``, ``latency_over``."""
        def over(value, limit):
            if limit is None:
                return 0.0
            return max(0.0, value / max(limit, 1e-9) - 1.0) if limit > 0 else float(value > 0)

        lat_ns = res["latency_cycles_update"] * 1e3 / self.fmax_mhz if self.fmax_mhz else 0.0
        return {"lut_over": over(res["lut"], self.lut), "dsp_over": over(res["dsp"], self.dsp),
                "ii_over": over(res["initiation_interval"], self.ii_max),
                "latency_over": over(lat_ns, self.latency_max_ns) if self.fmax_mhz else 0.0}


@dataclass
class Evaluation:
    """What one evaluation of a spec returns.

    Attributes:
        spec: the evaluated spec.
        accuracy: fidelity (readout) or R^2 (regression) over the whole stream.
        feasible: every budget met (by the resources used in the search).
        objective: ``accuracy`` when feasible, else ``accuracy - 1 - total overshoot``: an
            infeasible design ranks below every feasible one, and less overshoot ranks higher
            (smallest-learner mode: see :class:`Evaluator`).
        diagnostics: :data:`DIAGNOSTICS` -> value.
        resources: ``lut``, ``ff``, ``dsp``, ``initiation_interval``, ``latency_cycles_update``.
    """

    spec: LearnerSpec
    accuracy: float
    feasible: bool
    objective: float
    diagnostics: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)


def _segments(stream: Stream) -> list[tuple[int, int]]:
    cuts = [0] + [e.index for e in stream.events] + [len(stream)]
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _error_signal(kind: str, stream: Stream, pred: np.ndarray) -> np.ndarray:
    """Per-sample error: 0/1 misassignment (readout) or squared error / Var(y) (regression)."""
    if kind == "readout":
        return ((pred[:, 0] >= 0) != (stream.y[:, 0] > 0)).astype(float)
    return ((pred - stream.y) ** 2).mean(axis=1) / max(float(stream.y.var()), 1e-12)


def accuracy_of(kind: str, stream: Stream, pred: np.ndarray) -> float:
    """Fidelity (readout) or R^2 (regression) of predictions ``pred`` (N, n_out) on ``stream``."""
    if kind == "readout":
        from ...tasks import assignment_fidelity

        return float(assignment_fidelity(stream.y, pred))
    # clipped at -1: a diverged learner (R^2 -> -inf) ranks last without swamping seed means
    return float(max(-1.0, 1.0 - np.mean((pred - stream.y) ** 2) / max(float(stream.y.var()), 1e-12)))


def diagnose(spec: LearnerSpec, stream: Stream, kind: str, x_raw, pred_raw, theta) -> dict:
    """The golden run's diagnostics (all but the budget overshoots); see the module docstring.

    Args:
        spec: the learner; stream: the stream it ran on; kind: ``readout`` or ``regression``.
        x_raw: (N, n_in) raw inputs; pred_raw: (N, n_out) raw predictions; theta: final raw parameters.

    Returns:
        dict: ``sat_input`` (fraction of input values at the input format's ends), ``clamp_grid``
        (KAN: fraction outside the grid range), ``grid_waste`` (KAN: fraction of the grid range
        beyond the 99.9th percentile of |x|), ``sat_pred`` (predictions at the act format's ends),
        ``sat_grad`` (errors beyond the grad format), ``sat_coef`` (parameters at the coef
        format's ends), ``zero_error`` (nonzero errors that round to 0 in grad), ``zero_update``
        (errors whose output-layer update e * 2**-s * scale rounds to 0 in coef),
        ``error_level`` (error over the last 10% of each segment: misassignment rate or
        MSE / Var(y)), ``recovery_excess`` (mean error over the first 10% of each post-drift
        segment minus the error level, >= 0).
    """
    f = spec.formats
    fi, fa, fg, fc = f.input, f.act, f.grad, f.coef
    d = {"sat_input": float(np.mean((x_raw <= fi.min_raw) | (x_raw >= fi.max_raw))),
         "sat_pred": float(np.mean((pred_raw <= fa.min_raw) | (pred_raw >= fa.max_raw)))}
    absx = np.abs(stream.x)
    if spec.kind == "kan":
        lo, hi = spec.grid_range
        d["clamp_grid"] = float(np.mean((stream.x < lo) | (stream.x >= hi)))
        d["grid_waste"] = float(max(0.0, 1.0 - np.quantile(absx, 0.999) / hi))
    else:
        d["clamp_grid"] = d["grid_waste"] = 0.0
    d["sat_coef"] = float(np.mean((theta <= fc.min_raw) | (theta >= fc.max_raw))) if len(theta) else 0.0
    pred = pred_raw * fa.lsb
    err = pred - stream.y
    aerr = np.abs(err)
    nonzero = aerr > fa.lsb / 2
    d["sat_grad"] = float(np.mean(aerr > fg.max_value))
    e_grad = np.minimum(aerr, fg.max_value)
    d["zero_error"] = float(np.mean(nonzero & (e_grad < fg.lsb / 2)) / max(np.mean(nonzero), 1e-9))
    # a typical multiplier of the output-layer update: a basis value ~1/2 (KAN), an activation (MLP)
    scale = 0.5 if spec.kind == "kan" else max(float(np.mean(absx)), 1e-3)
    upd = e_grad * spec.learning_rate * scale
    d["zero_update"] = float(np.mean(nonzero & (upd < fc.lsb / 2)) / max(np.mean(nonzero), 1e-9))
    sig = _error_signal(kind, stream, pred)
    levels, excess = [], []
    for i, (a, b) in enumerate(_segments(stream)):
        w = max(1, (b - a) // 10)
        late = float(sig[b - w : b].mean())
        levels.append(late)
        if i > 0:
            excess.append(max(0.0, float(sig[a : a + w].mean()) - late))
    d["error_level"] = float(np.mean(levels))
    d["recovery_excess"] = float(np.mean(excess)) if excess else 0.0
    return d


class Evaluator:
    """Scores specs on one stream under :class:`Budgets`; counts its evaluations.

    Args:
        stream: the search stream; kind: ``readout`` or ``regression``.
        budgets: the user's budgets; surrogate: a :class:`.resources.Surrogate` (LUT/FF/DSP).
        target: smallest-learner mode: a feasible design with ``accuracy >= target`` scores
            ``2 - LUT / LUT_ref`` (above every design that misses the target; fewer LUTs rank
            higher; LUT_ref = the LUT budget, else 10^5); None: the score is the accuracy.

    Attributes:
        evaluations: golden-model runs so far (the search budget's unit).
    """

    def __init__(self, stream: Stream, kind: str, budgets: Budgets, surrogate, target: float | None = None):
        self.stream, self.kind, self.budgets, self.surrogate = stream, kind, budgets, surrogate
        self.target = target
        self.evaluations = 0
        self._memo: dict[str, Evaluation] = {}

    def resources(self, spec: LearnerSpec) -> dict:
        """Surrogate LUT/FF/DSP plus the generator's II and latency in cycles."""
        from ...hw import build_learner

        learner = build_learner(spec)
        learner._MustUse__used = True  # built for its schedule only: no "never used" warning from Amaranth
        return {**self.surrogate.predict(spec), "initiation_interval": int(learner.initiation_interval),
                "latency_cycles_update": int(learner.latency_update)}

    def __call__(self, spec: LearnerSpec, *, count: bool = True) -> Evaluation:
        """Evaluate ``spec`` (a spec already evaluated is returned from memory and not counted again)."""
        key = spec.to_toml()
        if key in self._memo:
            return self._memo[key]
        from ...model import GoldenLearner

        golden = GoldenLearner(spec)
        x_raw = golden.quantize_inputs(self.stream.x)
        y_raw = golden.quantize_targets(self.stream.y)
        pred_raw = golden.run(x_raw, y_raw)
        golden.flush()
        pred = golden.dequantize_outputs(pred_raw)
        acc = accuracy_of(self.kind, self.stream, pred)
        diag = diagnose(spec, self.stream, self.kind, x_raw, pred_raw, golden.theta)
        res = self.resources(spec)
        diag.update(self.budgets.overshoot(res))
        total_over = sum(diag[k] for k in ("lut_over", "dsp_over", "ii_over", "latency_over"))
        feasible = total_over == 0.0
        holds = self.target is not None and acc >= self.target
        diag["above_target"] = float(holds)
        objective = acc if feasible else acc - 1.0 - total_over
        if feasible and holds:
            objective = 2.0 - res["lut"] / (self.budgets.lut or 1e5)
        ev = Evaluation(spec, acc, feasible, float(objective), diag, res)
        if count:
            self.evaluations += 1
        self._memo[key] = ev
        return ev


def score_on(spec: LearnerSpec, stream: Stream, kind: str) -> float:
    """Accuracy of ``spec`` on another stream (the held-out drift check)."""
    from ...model import GoldenLearner

    golden = GoldenLearner(spec)
    pred_raw = golden.run(golden.quantize_inputs(stream.x), golden.quantize_targets(stream.y))
    return accuracy_of(kind, stream, golden.dequantize_outputs(pred_raw))
