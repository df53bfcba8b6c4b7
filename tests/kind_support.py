"""Mixed-kind streams (TARGET, PREDICT, ERROR samples) for the sample-kind tests of every backend."""

from __future__ import annotations

import numpy as np

from onchip.model import GoldenLearner, SampleKind
from onchip.spec import LearnerSpec
from support import random_stream


def mixed_stream(spec: LearnerSpec, n: int, seed: int, share=(0.5, 0.2, 0.3)):
    """Raw (x, y, kind): random_stream's samples with kinds drawn TARGET/PREDICT/ERROR by ``share``.

    ERROR rows carry errors uniform in +/-1 in the ``grad`` format, one output in four set to 0
    (must not learn) and 2 % at the format's limits (saturation); PREDICT rows carry garbage
    (the kind says to ignore them; check_stream zeroes them).
    """
    rng = np.random.default_rng(seed + 1000)
    x, y = random_stream(spec, n, seed)
    kind = rng.choice([int(k) for k in SampleKind], n, p=share).astype(np.int64)
    g = spec.formats.grad
    err = g.quantize(rng.uniform(-1, 1, (n, spec.n_out)))
    err[rng.random((n, spec.n_out)) < 0.25] = 0
    extreme = rng.random((n, spec.n_out)) < 0.02
    err[extreme] = rng.choice([g.min_raw, g.max_raw], extreme.sum())
    is_err = kind == SampleKind.ERROR
    y = y.copy()
    y[is_err] = err[is_err]
    is_pred = kind == SampleKind.PREDICT
    y[is_pred] = rng.integers(-(1 << 40), 1 << 40, (is_pred.sum(), spec.n_out))
    return x, y, kind


def golden_kinds_final(spec: LearnerSpec, x, y, kind, theta=None):
    """Golden predictions, decisions and flushed final parameters of a mixed-kind stream."""
    from onchip.model import decisions

    g = GoldenLearner(spec, theta)
    preds = g.run(x, y, kind)
    g.flush()
    return preds, decisions(preds), g.theta.copy()
