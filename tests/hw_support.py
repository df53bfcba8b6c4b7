"""Shared pieces of the RTL tests: preset designs and protocol checks (streams and golden runs: support.py)."""

from __future__ import annotations

import numpy as np

from support import golden_final, stimulus, variant  # noqa: F401  (re-exported for the RTL tests)

from onchip.hw.sim import cached_design
from onchip.model import GoldenLearner
from onchip.spec import PRESETS, LearnerSpec


def preset_design(name: str, schedule: str, timing: str = "compact"):
    spec = variant(PRESETS[name].replace(timing=timing), schedule)
    return spec, cached_design(spec)


def assert_same(design, seg, want_preds, want_theta):
    """A bench segment's predictions equal ``want_preds`` and its read-back parameters ``want_theta``."""
    from onchip.hw import sim

    got = sim.unpack_predictions(design, seg["preds"])
    assert got.shape == want_preds.shape
    bad = np.nonzero((got != want_preds).any(axis=1))[0]
    assert bad.size == 0, f"sample {bad[0]}: RTL {got[bad[0]]}, golden {want_preds[bad[0]]} ({bad.size} differ)"
    np.testing.assert_array_equal(sim.unpack_coef(design, seg["responses"]), want_theta)


def run_stream(spec: LearnerSpec, n: int, seed: int, *, bench_seed: int | None = None, **stalls):
    """``n`` samples of :func:`stimulus` (seeded by ``seed``) through the cocotb bench (its random
    stalls seeded by ``bench_seed``), then every parameter read back; both must equal the golden
    model. Returns (design, segment, golden final parameters)."""
    from onchip.hw import sim

    design = cached_design(spec)
    x, y = stimulus(spec, n, seed)
    want_preds, want_theta = golden_final(spec, x, y)
    if bench_seed is not None:
        stalls["seed"] = bench_seed
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y), "then": {"op": "read"}}], **stalls)
    seg = out["segments"][0]
    assert_same(design, seg, want_preds, want_theta)
    return design, seg, want_theta


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
