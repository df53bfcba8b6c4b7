"""Sample kinds in the golden model and the float twin: ERROR by hand, TARGET == ERROR with the
requantised error, PREDICT as a zero update in its slot of the pipelined window, refusals."""

import dataclasses

import numpy as np
import pytest

from onchip.fixed import Fmt, quantize, requantize
from onchip.model import GoldenLearner, SampleKind, decisions
from onchip.model.float_twin import FloatTwin
from onchip.model.golden import check_stream
from onchip.spec import PRESETS, LearnerSpec
from kind_support import mixed_stream
from support import random_stream

T, P, E = int(SampleKind.TARGET), int(SampleKind.PREDICT), int(SampleKind.ERROR)
COEF = Fmt(16, 4, True, "RND_CONV", "SAT")


def test_kan_error_sample_by_hand():
    # 1->1 linear splines, G = 4 on [-2, 2): x = 0.25 reads coefficients 2, 3 with basis (0.75, 0.25)
    spec = LearnerSpec(kind="kan", widths=(1, 1), grid_size=4, spline_order=1, grid_range=(-2, 2),
                       learning_rate=0.5, init_scale=0.0)
    g = GoldenLearner(spec, theta=quantize([0, 0, 1.0, -1.0, 0], COEF))
    e = quantize([[0.5]], spec.formats.grad)
    pred = g.step(g.quantize_inputs([[0.25]])[0], e[0], kind=E)
    assert g.dequantize_outputs(pred)[0] == 0.5
    # c <- c - lr * e * b = c - 0.25 * (0.75, 0.25)
    np.testing.assert_array_equal(COEF.dequantize(g.theta), [0, 0, 1.0 - 0.1875, -1.0 - 0.0625, 0])


def test_mlp_error_sample_by_hand():
    # 1->2->1 ReLU, x = 0.5: h = (1, 0), output 1.5; host error e = 1 on the output
    spec = LearnerSpec(kind="mlp", widths=(1, 2, 1), learning_rate=0.25)
    g = GoldenLearner(spec, theta=quantize([2.0, -1.0, 0.0, 0.0, 1.0, -1.0, 0.5], COEF))
    pred = g.step(g.quantize_inputs([[0.5]])[0], quantize([1.0], spec.formats.grad), kind=E)
    assert g.dequantize_outputs(pred)[0] == 1.5
    # dW2 = e*h = (1, 0), db2 = 1, hidden error W2*e masked = (1, 0), dW1 = (0.5, 0), db1 = (1, 0)
    expected = [2.0 - 0.125, -1.0, 0.0 - 0.25, 0.0, 1.0 - 0.25, -1.0, 0.5 - 0.25]
    np.testing.assert_array_equal(COEF.dequantize(g.theta), expected)


def test_zero_error_on_one_output_leaves_its_parameters():
    spec = LearnerSpec(kind="kan", widths=(1, 2), grid_size=4, spline_order=2, grid_range=(-2, 2))
    g = GoldenLearner(spec)
    before = g.parameters()[0]["coef"].copy()
    x = g.quantize_inputs([[0.3]])
    g.run(x, quantize([[0.0, 0.75]], spec.formats.grad), [E])
    after = g.parameters()[0]["coef"]
    np.testing.assert_array_equal(after[0], before[0])
    assert (after[1] != before[1]).sum() == spec.spline_order + 1


@pytest.mark.parametrize("preset", ["kan-readout", "mlp-readout"])
@pytest.mark.parametrize("staleness", [0, 3])
def test_target_equals_error_with_requantised_error(preset, staleness):
    spec = PRESETS[preset].replace(widths=PRESETS[preset].widths[:-1] + (3,))
    if staleness:
        spec = spec.replace(schedule="pipelined", staleness=staleness)
    x, y = random_stream(spec, 3000, 7)
    a = GoldenLearner(spec)
    want = a.run(x, y)
    f = spec.formats
    err = requantize(want - y, f.act.frac_bits, f.grad)  # e = requant(y_hat - y -> grad)
    b = GoldenLearner(spec)
    got = b.run(x, err, np.full(len(x), E))
    np.testing.assert_array_equal(got, want)
    a.flush()
    b.flush()
    np.testing.assert_array_equal(b.theta, a.theta)


@pytest.mark.parametrize("preset", ["kan-regression", "mlp-regression"])
@pytest.mark.parametrize("staleness", [0, 2])
def test_predict_is_a_zero_error_sample(preset, staleness):
    spec = PRESETS[preset]
    if staleness:
        spec = spec.replace(schedule="pipelined", staleness=staleness)
    x, y, kind = mixed_stream(spec, 4000, 3)
    a = GoldenLearner(spec)
    want = a.run(x, y, kind)
    y0 = y.copy()
    y0[kind == P] = 0
    k0 = np.where(kind == P, E, kind)
    b = GoldenLearner(spec)
    np.testing.assert_array_equal(b.run(x, y0, k0), want)
    a.flush()
    b.flush()
    np.testing.assert_array_equal(a.theta, b.theta)


@pytest.mark.parametrize("preset", ["kan-regression", "mlp-regression"])
def test_predict_samples_leave_theta_and_match_predict(preset):
    spec = PRESETS[preset]
    g = GoldenLearner(spec)
    x, y = random_stream(spec, 500, 2)
    g.run(x[:100], y[:100])
    theta = g.theta.copy()
    preds = g.run(x[100:], y[100:], np.full(400, P))
    np.testing.assert_array_equal(g.theta, theta)
    np.testing.assert_array_equal(preds, GoldenLearner(spec, theta).predict(x[100:]))


def test_pipelined_window_counts_predict_samples():
    # D = 3: the update of sample 0 (a large ERROR) is first seen by sample 4, whatever the kinds
    spec = PRESETS["kan-regression"].replace(schedule="pipelined", staleness=3)
    g = GoldenLearner(spec)
    x = g.quantize_inputs(np.full((6, 1), 0.4))
    y = np.zeros((6, 1), np.int64)
    y[0] = quantize([2.0], spec.formats.grad)
    preds = g.run(x, y, [E, P, P, P, P, P])
    assert (preds[1:4] == preds[0]).all()
    assert (preds[4:] < preds[0]).all()
    assert g.pending == 3


def test_check_stream_kinds():
    spec = PRESETS["mlp-readout"]
    x, y = random_stream(spec, 6, 1)
    g = spec.formats.grad
    with pytest.raises(ValueError, match=r"kind\[2\] = 3 is not a sample kind"):
        check_stream(spec, x, y, kind=[0, 1, 3, 0, 0, 0])
    with pytest.raises(ValueError, match=r"kind must have shape \(6,\)"):
        check_stream(spec, x, y, kind=[0, 1])
    with pytest.raises(ValueError, match="kind must hold integers"):
        check_stream(spec, x, y, kind=np.zeros(6))
    bad = y.copy()
    bad[4] = g.max_raw + 1
    with pytest.raises(ValueError, match=r"ERROR samples \(errors\).*first: y_raw\[4\]"):
        check_stream(spec, x, bad, kind=[0, 0, 0, 2, 2, 0])
    with pytest.raises(ValueError, match=r"TARGET samples \(targets\).*first: y_raw\[4\]"):
        check_stream(spec, x, bad)
    # a PREDICT row may hold anything: it is ignored and comes back as zeros
    _, y2, k2 = check_stream(spec, x, bad, kind=[0, 0, 0, 0, 1, 0])
    assert (y2[4] == 0).all() and (y2[[0, 5]] == y[[0, 5]]).all() and k2.tolist() == [0, 0, 0, 0, 1, 0]


def test_grad_wider_than_act_accepts_the_grad_range():
    spec = PRESETS["kan-readout"]
    spec = spec.replace(formats=dataclasses.replace(spec.formats, grad=Fmt(20, 6, True, "RND_CONV", "SAT")))
    x, _ = random_stream(spec, 2, 1)
    e = np.array([[spec.formats.grad.max_raw], [spec.formats.grad.min_raw]])
    GoldenLearner(spec).run(x, e, [E, E])
    with pytest.raises(ValueError, match="TARGET samples"):
        GoldenLearner(spec).run(x, e)


@pytest.mark.parametrize("preset", ["kan-regression", "mlp-regression"])
def test_float_twin_error_and_predict_samples(preset):
    spec = PRESETS[preset].replace(schedule="pipelined", staleness=2)
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (300, 1))
    y = np.sin(x)
    a = FloatTwin(spec)
    want = a.run(x, y)
    b = FloatTwin(spec)
    kind = np.full(300, E)
    kind[::7] = T
    err = np.where(kind[:, None] == E, want - y, y)
    np.testing.assert_array_equal(b.run(x, err, kind=kind), want)
    a.flush()
    b.flush()
    np.testing.assert_array_equal(b.theta.numpy(), a.theta.numpy())
    theta = b.theta.numpy().copy()
    c = FloatTwin(spec, theta)
    c.run(x[:50], np.full((50, 1), 1e9), kind=np.full(50, P))
    c.flush()
    np.testing.assert_array_equal(c.theta.numpy(), theta)


def test_decisions_of_golden_predictions():
    spec = PRESETS["mlp-readout"].replace(widths=(2, 8, 3))
    x, y, kind = mixed_stream(spec, 200, 5)
    preds = GoldenLearner(spec).run(x, y, kind)
    d = decisions(preds)
    for n in range(len(preds)):
        assert d[n] == min(j for j in range(3) if preds[n, j] == preds[n].max())
