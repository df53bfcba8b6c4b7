"""The fixed-point learners as a subject of interaction-based prompt sensitivity.

The "prompt" of a learner is its number format: the same learned function (coefficients
trained online by the golden model in the base format) re-quantized into another
:class:`~onchip.spec.Formats` is the "subtly changed prompt" with the same input variables.
The variables are the learner's ``n`` input features; a masked feature takes the baseline
value 0 (the centre of the grid). ``v(x_T)`` is the golden model's prediction
(:meth:`onchip.model.GoldenLearner.predict`), so every interaction here is exact integer
arithmetic of the bit-exact reference.

Oracle: a one-layer KAN computes ``Q(sum_i phi_i(x_i))`` - additive before the single
conversion ``Q`` of the accumulator into the ``act`` format. Where ``Q`` is exact (``act``
has at least as many fractional bits as a coefficient x basis product, and nothing
saturates) every interaction of order >= 2 is exactly 0; with rounding it is at most
``2**(|S|-1)`` LSB of ``act``; saturation of the output creates real interactions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...fixed import dequantize, quantize
from ...model import GoldenLearner
from ...spec import Formats, LearnerSpec
from .harsanyi import harsanyi, subset_masks

#: learner subjects: name -> spec of a learner with ``n`` inputs (see :func:`learner_spec`)
LEARNERS = ("kan-1layer", "kan-2layer", "mlp")

_D = "ap_fixed<16,4,RND_CONV,SAT>"
#: format variants ("prompt changes"): name -> Formats fields changed from the base (16-bit, RND_CONV)
FORMAT_VARIANTS: dict[str, dict[str, str]] = {
    "base": {},
    "trn": {"input": "ap_fixed<16,4,TRN,SAT>", "coef": "ap_fixed<16,4,TRN,SAT>",
            "act": "ap_fixed<16,4,TRN,SAT>", "basis": "ap_fixed<16,2,TRN,SAT>"},
    "12bit": {"input": "ap_fixed<12,4,RND_CONV,SAT>", "coef": "ap_fixed<12,4,RND_CONV,SAT>",
              "act": "ap_fixed<12,4,RND_CONV,SAT>", "basis": "ap_fixed<12,2,RND_CONV,SAT>"},
    "act-range2": {"act": "ap_fixed<16,2,RND_CONV,SAT>"},
}
VARIANT_TEXT = {
    "base": "16-bit, round-to-nearest (the base format)",
    "trn": "16-bit, truncation instead of rounding",
    "12bit": "12-bit data and coefficients",
    "act-range2": "outputs in [-2, 2) instead of [-8, 8) (saturate)",
}


def target(x: np.ndarray) -> np.ndarray:
    """The regression the learners are trained on: ``(N, n>=6)`` inputs -> ``(N, 1)``.

    ``0.8 sin(1.5 x0) + 0.5 x1 x2 + 0.3 x3**2 - 0.6 x4 + 0.6 tanh(x4 x5) + 0.4 x0`` (a planted
    pair interaction x1 x2 and x4 x5 beside additive terms; range about [-3.5, 3.5]).
    """
    return (0.8 * np.sin(1.5 * x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] + 0.3 * x[:, 3] ** 2 - 0.6 * x[:, 4]
            + 0.6 * np.tanh(x[:, 4] * x[:, 5]) + 0.4 * x[:, 0])[:, None]


def learner_spec(name: str, n: int) -> LearnerSpec:
    """The base-format spec of a learner subject with ``n`` inputs.

    Raises:
        ValueError: unknown ``name``.
    """
    if name == "kan-1layer":
        return LearnerSpec(kind="kan", widths=(n, 1), grid_size=8, spline_order=3, grid_range=(-2.0, 2.0),
                           learning_rate=2.0**-4, init_scale=0.0, name=name)
    if name == "kan-2layer":
        return LearnerSpec(kind="kan", widths=(n, 4, 1), grid_size=8, spline_order=3, grid_range=(-2.0, 2.0),
                           learning_rate=2.0**-5, init_scale=0.1, name=name)
    if name == "mlp":
        return LearnerSpec(kind="mlp", widths=(n, 16, 1), learning_rate=2.0**-6, init_scale=1.0, name=name)
    raise ValueError(f"learner: unknown learner {name!r}; choose from {', '.join(LEARNERS)}")


def with_formats(spec: LearnerSpec, theta: np.ndarray, changes: dict[str, str]) -> tuple[LearnerSpec, np.ndarray]:
    """The same learned function in other formats: ``spec`` with ``changes`` applied to its formats
    and the raw parameters ``theta`` re-quantized (dequantize, then quantize into the new ``coef``)."""
    fmts = Formats(**{**spec.formats.as_dict(), **changes})
    new = spec.replace(formats=fmts)
    return new, quantize(dequantize(theta, spec.formats.coef), fmts.coef)


def train_learner(spec: LearnerSpec, *, samples: int, seed: int) -> np.ndarray:
    """Train the golden learner online (test-then-train) on :func:`target` for ``samples`` draws of
    ``x ~ U(-2, 2)**n``; returns the final raw parameters."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, size=(samples, spec.n_in))
    learner = GoldenLearner(spec.replace(init_seed=seed))
    learner.run(learner.quantize_inputs(x), learner.quantize_targets(np.clip(target(x), -7.9, 7.9)))
    learner.flush()
    return learner.theta.copy()


def masked_outputs_raw(spec: LearnerSpec, theta: np.ndarray, x: np.ndarray, baseline: float = 0.0) -> np.ndarray:
    """Raw predictions (``act`` LSB units, int64) on every masked version of each point.

    Args:
        spec, theta: the learner and its raw parameters.
        x: ``(m, n)`` float points (quantized into ``spec.formats.input``).
        baseline: the value a masked feature takes.

    Returns:
        ``(m, 2**n)`` int64: entry ``[j, T]`` is the prediction on point j with the features outside
        ``T`` set to ``baseline`` (bit i of T set = feature i kept).
    """
    masks = subset_masks(spec.n_in)
    m = len(x)
    xs = np.where(masks[None], x[:, None, :], baseline).reshape(-1, spec.n_in)
    learner = GoldenLearner(spec, theta)
    return learner.predict(learner.quantize_inputs(xs))[:, 0].reshape(m, -1)


@dataclass(frozen=True)
class LearnerInteractions:
    """Interactions of one learner in one format at ``m`` points: ``values`` and ``dividends`` are
    ``(m, 2**n)`` float (output units); ``lsb`` the output LSB."""

    variant: str
    values: np.ndarray
    dividends: np.ndarray
    lsb: float


def learner_interactions(spec: LearnerSpec, theta: np.ndarray, x: np.ndarray, variant: str) -> LearnerInteractions:
    """Harsanyi dividends of ``spec`` re-quantized into the format ``variant`` at points ``x``.

    Raises:
        ValueError: unknown ``variant``.
    """
    if variant not in FORMAT_VARIANTS:
        raise ValueError(f"variant: unknown format variant {variant!r}; choose from {', '.join(FORMAT_VARIANTS)}")
    s, t = with_formats(spec, theta, FORMAT_VARIANTS[variant])
    raw = masked_outputs_raw(s, t, x)
    lsb = s.formats.act.lsb
    return LearnerInteractions(variant, raw * lsb, harsanyi(raw) * lsb, lsb)
