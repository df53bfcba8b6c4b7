"""Backend-neutral test support: streams of raw samples and golden reference runs.

Imports no hardware package at module level, so every test module can use it whatever
is installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from onchip.model import GoldenLearner
from onchip.spec import LearnerSpec


def variant(spec: LearnerSpec, schedule: str) -> LearnerSpec:
    """The spec in ``schedule``; pipelined at the smallest staleness its RTL pipeline allows."""
    if schedule == "sequential":
        return spec.replace(schedule="sequential")
    from onchip.hw.learner import min_staleness

    return spec.replace(schedule="pipelined", staleness=min_staleness(spec))


def quantized(spec: LearnerSpec, x, y):
    """Float (x, y) -> raw (x, y) in the spec's input and output formats."""
    g = GoldenLearner(spec)
    return g.quantize_inputs(x), g.quantize_targets(y)


def stimulus(spec: LearnerSpec, n: int, seed: int, extreme: float = 0.05):
    """Raw (x, y): a smooth target of the inputs plus noise, and a share ``extreme`` of samples
    at the format limits (grid edges and beyond, targets at +/- full scale) to exercise saturation."""
    rng = np.random.default_rng(seed)
    fi, fa = spec.formats.input, spec.formats.y
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


def smooth_stream(spec: LearnerSpec, n: int, seed: int = 0, lo: float = -2.5, hi: float = 2.5):
    """Raw (x, y): x uniform in [lo, hi], y = tanh(sum sin 2x) on every output."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, (n, spec.n_in))
    y = np.tanh(np.sin(2 * x).sum(axis=1, keepdims=True)) * np.ones((1, spec.n_out))
    return quantized(spec, x, y)


def random_stream(spec: LearnerSpec, n: int, seed: int):
    """Raw (x, y): inputs over 1.5x the input range (clamped and saturated values included), targets in +/-3."""
    rng = np.random.default_rng(seed)
    f = spec.formats
    x = rng.uniform(1.5 * f.input.min_value, 1.5 * f.input.max_value, (n, spec.n_in))
    y = rng.uniform(-3, 3, (n, spec.n_out))
    return quantized(spec, x, y)


def task_stream(spec: LearnerSpec, n: int, seed: int):
    """Raw (x, y) of the task the spec's shape fits: drifting regression (1 input) or qubit readout."""
    from onchip.tasks import make_stream

    s = make_stream("drift-regression" if spec.n_in == 1 else "qubit-readout", samples=n, seed=seed)
    return quantized(spec, s.x, s.y)


def golden_final(spec: LearnerSpec, x, y, theta=None):
    """Golden predictions over the stream and the flushed final parameters (from ``theta`` if given)."""
    g = GoldenLearner(spec, theta)
    preds = g.run(x, y)
    g.flush()
    return preds, g.theta.copy()


def random_theta(spec: LearnerSpec, seed: int) -> np.ndarray:
    """(P,) raw parameters uniform over the whole ``coef`` range."""
    c = spec.formats.coef
    return np.random.default_rng(seed).integers(c.min_raw, c.max_raw + 1, spec.parameter_count())


#: the repository root (the scripts under sweeps/ and docs/ are not part of the package)
ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str):
    """The module of a script that is not in the package (``"sweeps/seed_times.py"``), loaded from the
    repository root under its file name."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
