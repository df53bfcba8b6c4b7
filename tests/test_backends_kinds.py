"""Every backend takes sample kinds and returns the decisions: one short mixed stream, the same
spec as the RTL and HLS sample-kind tests (their builds are shared), equal to the golden model;
the Python API's float interface to ERROR samples."""

import numpy as np
import pytest

import onchip
from onchip.backends import RunResult, available_backends, get_backend
from onchip.model import GoldenLearner, SampleKind, decisions
from onchip.spec import PRESETS

from kind_support import golden_kinds_final, mixed_stream
from support import variant

KAN3 = variant(PRESETS["kan-readout"].replace(widths=(2, 3), name="kan-readout-3out"), "pipelined")
RAW = [name for name in ("golden", "rtl", "cocotb", "hls") if name in available_backends()]


@pytest.mark.parametrize("name", RAW)
def test_backend_kinds_and_decisions(name):
    x, y, kind = mixed_stream(KAN3, 400, 21)
    want_preds, want_dec, want_theta = golden_kinds_final(KAN3, x, y, kind)
    got = get_backend(name).run(KAN3, x, y, kind=kind)
    assert isinstance(got, RunResult)
    preds, theta = got  # the old two-value unpacking keeps working
    np.testing.assert_array_equal(preds, want_preds)
    np.testing.assert_array_equal(got.decisions, want_dec)
    np.testing.assert_array_equal(theta, want_theta)
    inf = get_backend(name).run(KAN3, x, None, theta=want_theta, learn=False)
    want_inf = GoldenLearner(KAN3, want_theta).predict(x)
    np.testing.assert_array_equal(inf.predictions, want_inf)
    np.testing.assert_array_equal(inf.decisions, decisions(want_inf))
    np.testing.assert_array_equal(inf.theta, want_theta)


def test_float_backend_decisions_and_kinds():
    spec = PRESETS["mlp-readout"].replace(widths=(2, 8, 3))
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (200, 2)), rng.uniform(-1, 1, (200, 3))
    kind = rng.integers(0, 3, 200)
    got = get_backend("float").run(spec, x, y, kind=kind)
    np.testing.assert_array_equal(got.decisions, np.argmax(got.predictions, axis=1))
    with pytest.raises(ValueError, match=r"kind\[0\] = 7"):
        get_backend("float").run(spec, x, y, kind=np.full(200, 7))


def test_learner_api_error_samples_quantize_to_grad():
    learner = onchip.Learner("kan-regression")
    x = np.linspace(-2, 2, 64).reshape(-1, 1)
    err = 0.25 * np.sin(3 * x)
    kind = np.full(64, int(SampleKind.ERROR))
    kind[::5] = SampleKind.PREDICT
    preds = learner.run(x, err, kind=kind)
    g = GoldenLearner(learner.spec)
    e_raw = learner.spec.formats.grad.quantize(err)
    e_raw[kind == SampleKind.PREDICT] = 0
    want = g.run(g.quantize_inputs(x), e_raw, kind)
    g.flush()
    np.testing.assert_array_equal(preds, g.dequantize_outputs(want))
    np.testing.assert_array_equal(learner.parameters, g.theta)
    np.testing.assert_array_equal(learner.decisions, (want[:, 0] >= 0).astype(int))
