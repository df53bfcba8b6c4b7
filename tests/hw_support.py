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


def check_checkpoint_and_restore(spec: LearnerSpec, design, xs, restore, seed: int = 6):
    """Three segments with random stalls: stream, read every parameter (checkpoint), stream,
    write ``restore``, stream, read back; predictions and parameters equal the golden model's
    doing the same (``flush`` before a read, ``load`` for the write)."""
    from onchip.hw import sim

    g = GoldenLearner(spec)
    want = [g.run(*xs[0])]
    g.flush()
    checkpoint = g.theta.copy()
    want.append(g.run(*xs[1]))
    g.load(restore)
    want.append(g.run(*xs[2]))
    g.flush()
    out = sim.run_job(design, [
        {"payloads": sim.pack_samples(design, *xs[0]), "then": {"op": "read"}},
        {"payloads": sim.pack_samples(design, *xs[1]), "then": {"op": "write", "values": list(map(int, restore))}},
        {"payloads": sim.pack_samples(design, *xs[2]), "then": {"op": "read"}},
    ], seed=seed, p_valid=0.8, p_ready=0.8, p_param_ready=0.6)
    segs = out["segments"]
    for seg, w in zip(segs, want):
        np.testing.assert_array_equal(sim.unpack_predictions(design, seg["preds"]), w)
    np.testing.assert_array_equal(sim.unpack_coef(design, segs[0]["responses"]), checkpoint)
    np.testing.assert_array_equal(sim.unpack_coef(design, segs[1]["responses"]), restore)  # writes echo
    np.testing.assert_array_equal(sim.unpack_coef(design, segs[2]["responses"]), g.theta)


def check_reset_mid_stream(spec: LearnerSpec, design):
    """Reset while samples are in flight, read every parameter at once (RAM is not reset: the
    reload from the ROM must have restored it), then a fresh stream equals a fresh golden learner."""
    from onchip.hw import sim
    from onchip.model.golden import initial_parameters

    xa, ya = stimulus(spec, 400, seed=31)
    xb, yb = stimulus(spec, 600, seed=32)
    want_a, _ = golden_final(spec, xa, ya)
    want_b, theta_b = golden_final(spec, xb, yb)  # a fresh learner: reset = initial parameters
    out = sim.run_job(design, [
        {"payloads": sim.pack_samples(design, xa, ya), "then": {"op": "reset", "after": 1}},
        {"payloads": [], "then": {"op": "read"}},
        {"payloads": sim.pack_samples(design, xb, yb), "then": {"op": "read"}},
    ], seed=5, p_ready=0.7)
    seg_a, seg_0, seg_b = out["segments"]
    got_a = sim.unpack_predictions(design, seg_a["preds"])
    assert len(got_a) < len(xa)  # samples were in flight when the reset came
    np.testing.assert_array_equal(got_a, want_a[: len(got_a)])
    np.testing.assert_array_equal(sim.unpack_coef(design, seg_0["responses"]), initial_parameters(spec))
    np.testing.assert_array_equal(sim.unpack_predictions(design, seg_b["preds"]), want_b)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg_b["responses"]), theta_b)
