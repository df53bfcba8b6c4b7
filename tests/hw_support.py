"""Shared pieces of the RTL tests: designs, stimulus, golden reference runs."""

from __future__ import annotations

import numpy as np

from onchip.hw.learner import min_staleness
from onchip.hw.sim import cached_design
from onchip.model import GoldenLearner
from onchip.spec import PRESETS, LearnerSpec


def variant(spec: LearnerSpec, schedule: str) -> LearnerSpec:
    """The spec in ``schedule``; pipelined at the smallest staleness its pipeline allows."""
    if schedule == "sequential":
        return spec.replace(schedule="sequential")
    return spec.replace(schedule="pipelined", staleness=min_staleness(spec))


def preset_design(name: str, schedule: str):
    spec = variant(PRESETS[name], schedule)
    return spec, cached_design(spec)


def stimulus(spec: LearnerSpec, n: int, seed: int, extreme: float = 0.05):
    """Raw (x, y): a smooth target of the inputs plus noise, and a share ``extreme`` of samples
    at the format limits (grid edges and beyond, targets at +/- full scale) to exercise saturation."""
    rng = np.random.default_rng(seed)
    fi, fa = spec.formats.input, spec.formats.act
    lo, hi = (spec.grid_range if spec.kind == "kan" else (-2.0, 2.0))
    span = hi - lo
    xf = rng.uniform(lo - 0.1 * span, hi + 0.1 * span, (n, spec.n_in))
    yf = np.sin(xf.sum(axis=1, keepdims=True) * np.pi / span) + 0.05 * rng.standard_normal((n, 1))
    yf = np.repeat(yf, spec.n_out, axis=1)
    x = fi.quantize(np.clip(xf, fi.min_value, fi.max_value))
    y = fa.quantize(np.clip(yf, fa.min_value, fa.max_value))
    pick = rng.random(n) < extreme
    lo_raw = int(fi.quantize(lo)) if fi.contains(lo) else fi.min_raw
    edges = np.clip([fi.min_raw, lo_raw - 1, lo_raw, lo_raw + 1, fi.max_raw, 0, -1, 1], fi.min_raw, fi.max_raw)
    x[pick] = rng.choice(edges, (pick.sum(), spec.n_in))
    y[pick] = rng.choice([fa.min_raw, fa.max_raw], (pick.sum(), spec.n_out))
    return x.astype(np.int64), y.astype(np.int64)


def golden_final(spec: LearnerSpec, x, y):
    """Golden predictions over the stream and the flushed final parameters."""
    g = GoldenLearner(spec)
    preds = g.run(x, y)
    g.flush()
    return preds, g.theta.copy()
