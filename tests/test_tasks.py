"""Task streams and their metrics: closed forms, hand-worked values, real shots, bad data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.spatial import cKDTree
from scipy.stats import norm

from onchip.tasks import (
    NO_DRIFT,
    TASKS,
    DriftEvent,
    DriftStep,
    ReadoutDrift,
    ReadoutModel,
    Stream,
    assignment_fidelity,
    evaluate,
    load_shots,
    make_qubit_readout,
    make_stream,
    recovery_shots,
    recovery_status,
    rolling_fidelity,
    rolling_metric,
    static_baseline_predictions,
)

from real_data import REAL_SHOTS


def _lda_fidelity(x_fit, y_fit, x_test, y_test):
    """Fidelity of an LDA fitted on one block of shots and applied to another."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    lda = LinearDiscriminantAnalysis().fit(x_fit, y_fit[:, 0] > 0)
    return assignment_fidelity(y_test, np.where(lda.predict(x_test), 1.0, -1.0))


# ---------------------------------------------------------------- drift regression


def test_regression_events_and_closed_form_targets():
    s = make_stream("drift-regression", samples=300, seed=3)
    assert [e.index for e in s.events] == [100, 200]
    assert s.x.shape == s.y.shape == (300, 1)
    assert s.x.min() >= -2.0 and s.x.max() <= 2.0
    x = s.x[:, 0]
    np.testing.assert_allclose(s.y[:100, 0], np.sin(np.pi * x[:100] / 2))
    np.testing.assert_allclose(s.y[100:200, 0], x[100:200] ** 2 / 2 - 1)
    np.testing.assert_allclose(s.y[200:, 0], 0.75 * np.sin(np.pi * x[200:]) - 0.25 * x[200:])
    # the three targets on a fine grid stay inside +-1.5 (16-bit, 4 integer bits)
    g = np.linspace(-2, 2, 4001)
    for f in (np.sin(np.pi * g / 2), g**2 / 2 - 1, 0.75 * np.sin(np.pi * g) - 0.25 * g):
        assert np.abs(f).max() <= 1.5
    pairs = list(s)
    assert len(pairs) == len(s) == 300
    np.testing.assert_array_equal(pairs[7][0], s.x[7])
    np.testing.assert_array_equal(pairs[7][1], s.y[7])


def test_regression_events_for_lengths_not_divisible_by_three():
    assert [e.index for e in make_stream("drift-regression", samples=10, seed=0).events] == [3, 6]
    assert [e.index for e in make_stream("drift-regression", samples=100000, seed=0).events] == [33333, 66666]


def test_regression_segment_metrics_hand_computed():
    s = make_stream("drift-regression", samples=60, seed=1)  # segments of 20, last window 2
    err = np.zeros(60)
    err[0:18], err[18:20] = 0.1, 0.5
    err[20:40] = -0.2
    err[58:60] = 1.0
    m = evaluate(s, s.y + err[:, None])
    np.testing.assert_allclose(m["mse_per_segment"], [(18 * 0.01 + 2 * 0.25) / 20, 0.04, 2 / 20])
    np.testing.assert_allclose(m["mse_last_window"], [0.25, 0.04, 1.0])
    np.testing.assert_allclose(m["mse"], (0.68 + 0.8 + 2.0) / 60)
    assert [seg["window"] for seg in m["segments"]] == [2, 2, 2]
    assert [(seg["start"], seg["stop"]) for seg in m["segments"]] == [(0, 20), (20, 40), (40, 60)]


def test_regression_last_window_rounds_up():
    s = make_stream("drift-regression", samples=10, seed=0)  # segments 3, 3, 4 -> windows 1, 1, 1
    err = np.arange(10, dtype=float) / 10
    m = evaluate(s, (s.y[:, 0] + err))  # 1-D predictions accepted
    np.testing.assert_allclose(m["mse_last_window"], [0.04, 0.25, 0.81])
    np.testing.assert_allclose(m["mse_per_segment"], [(0 + 0.01 + 0.04) / 3, (0.09 + 0.16 + 0.25) / 3,
                                                      (0.36 + 0.49 + 0.64 + 0.81) / 4])


def test_rolling_mse_hand_computed():
    s = make_stream("drift-regression", samples=6, seed=0)
    err = np.array([1.0, 0.0, 2.0, 0.0, 0.0, 3.0])
    name, r = rolling_metric(s, s.y + err[:, None], window=2)
    assert name == "mse"
    np.testing.assert_allclose(r, [np.nan, 0.5, 2.0, 2.0, 0.0, 4.5])


# ---------------------------------------------------------------- readout metrics


def test_assignment_fidelity_hand_worked():
    y = np.array([-1, -1, -1, -1, 1, 1, 1, 1, 1], dtype=float)
    # one |0> shot scored exactly 0.0 (counts as |1>), two |1> shots scored negative
    p = np.array([-0.3, 0.0, -2.0, -0.1, 0.4, -0.2, 1.0, -5.0, 0.1])
    assert assignment_fidelity(y, p) == pytest.approx(1 - (1 / 4 + 2 / 5) / 2)
    assert assignment_fidelity(y, y) == 1.0
    assert assignment_fidelity(y, -y) == 0.0
    assert assignment_fidelity(y, np.ones(9)) == 0.5  # always |1>
    assert math.isnan(assignment_fidelity(np.ones(3), np.ones(3)))


def test_rolling_fidelity_hand_worked():
    y = np.array([-1, 1, -1, 1, -1, 1], dtype=float)
    p = np.array([-1, 1, 1, 1, -1, -1], dtype=float)
    np.testing.assert_allclose(rolling_fidelity(y, p, 2), [np.nan, 1.0, 0.5, 0.5, 1.0, 0.5])
    # window 3 over [0 0 0 1 1]: first full window holds no |1> shot -> NaN
    y2 = np.array([-1, -1, -1, 1, 1], dtype=float)
    p2 = np.array([-1, 1, -1, 1, -1], dtype=float)
    np.testing.assert_allclose(rolling_fidelity(y2, p2, 3),
                               [np.nan, np.nan, np.nan, 1 - (1 / 2 + 0) / 2, 1 - (0 + 1 / 2) / 2])


def _alternating_stream(n, events):
    y = np.where(np.arange(n) % 2 == 1, 1.0, -1.0)[:, None]
    x = np.column_stack([y[:, 0], np.zeros(n)]) + np.random.default_rng(0).normal(0, 0.1, (n, 2))
    return Stream("qubit-readout", x, y, tuple(DriftEvent(i, f"e{i}") for i in events))


def test_recovery_shots_on_constructed_predictions():
    n, window = 8000, 250
    s = _alternating_stream(n, [3000, 6000])
    pred = s.y.copy()
    pred[3000:3800] *= -1  # 800 wrong shots, then correct again
    pred[6000:] *= -1  # never recovers
    m = evaluate(s, pred, window=window)
    # windows of 250 alternating shots hold 125 of each state: F = 1 - k/250 for k wrong
    # shots; within 0.01 of 1.0 needs k <= 2, first at the window starting at 3798
    assert m["recovery_shots"] == [798, None]
    assert m["assignment_fidelity"] == pytest.approx(1 - 1400 / 4000)
    assert m["assignment_fidelity_last_5000"] == pytest.approx(1 - 1400 / 2500)
    assert m["error_0_as_1"] == pytest.approx(1400 / 4000) and m["error_1_as_0"] == pytest.approx(1400 / 4000)
    # brute force over windows: the first start after the event within 0.01 of the reference
    reference = assignment_fidelity(s.y[3000 - window:3000], pred[3000 - window:3000])
    first = next(k for k in range(3000) if assignment_fidelity(
        s.y[3000 + k:3000 + k + window], pred[3000 + k:3000 + k + window]) >= reference - 0.01)
    assert first == 798


def test_recovery_shots_edge_cases():
    r = rolling_fidelity(np.tile([-1.0, 1.0], 500), np.tile([-1.0, 1.0], 500), 100)
    assert recovery_shots(r, [500], 100) == [0]  # undisturbed learner
    assert recovery_shots(r, [50], 100) == [None]  # no full window before the event
    assert recovery_shots(r, [500, 550], 100) == [None, 0]  # no full window between the events


def test_recovery_status_tells_a_learner_that_never_came_back_from_a_stream_too_short():
    r = rolling_fidelity(np.tile([-1.0, 1.0], 500), np.tile([-1.0, 1.0], 500), 100)
    assert recovery_status(r, [500], 100) == ["recovered"]
    assert recovery_status(r, [50], 100) == ["too short to measure"]  # no full window before
    assert recovery_status(r, [500, 550], 100) == ["too short to measure", "recovered"]  # none between
    assert recovery_status(r, [500, 950], 100) == ["recovered", "too short to measure"]  # none after
    s = _alternating_stream(8000, [3000, 6000])
    pred = s.y.copy()
    pred[3000:3800] *= -1
    pred[6000:] *= -1  # never recovers, with 2000 shots after the event to show it
    m = evaluate(s, pred, window=250)
    assert m["recovery_shots"] == [798, None] and m["recovery_status"] == ["recovered", "not recovered"]


# ---------------------------------------------------------------- built-in source


def test_builtin_source_statistics_match_its_parameters():
    model = ReadoutModel()
    rng = np.random.default_rng(7)
    n = 200_000
    z0, z1 = model.sample(0, n, rng), model.sample(1, n, rng)
    m0, m1 = np.array(model.mean0), np.array(model.mean1)
    r = model.readout_over_t1
    # E[min(tau/T, 1)] for tau ~ Exp(T1): the mean fraction of the window spent in |1>
    mean_frac = (1 - np.exp(-r)) / r
    se = 5 * model.std / np.sqrt(n)
    np.testing.assert_allclose(z0.mean(axis=0), m0, atol=se)
    np.testing.assert_allclose(z1.mean(axis=0), m0 + mean_frac * (m1 - m0), atol=se)
    np.testing.assert_allclose(z0.std(axis=0), model.std, rtol=0.01)
    # error rates of the perpendicular-bisector discriminant against their integrals
    d = np.linalg.norm(m1 - m0)
    axis = (m1 - m0) / d
    mid = (m0 + m1) / 2
    p10_obs = np.mean((z0 - mid) @ axis >= 0)
    p01_obs = np.mean((z1 - mid) @ axis < 0)
    p10 = norm.cdf(-d / 2 / model.std)
    p01 = np.exp(-r) * p10 + quad(lambda f: r * np.exp(-r * f) * norm.cdf(-(f - 0.5) * d / model.std), 0, 1)[0]
    assert p10_obs == pytest.approx(p10, abs=5 * np.sqrt(p10 / n))
    assert p01_obs == pytest.approx(p01, abs=5 * np.sqrt(p01 / n))
    # and the configured defaults sit near the real set (README: 0.6% and 2.7%)
    assert 0.004 < p10 < 0.008 and 0.022 < p01 < 0.032


def test_builtin_stream_defeats_static_baseline():
    s = make_stream("qubit-readout", samples=100_000, seed=0)
    e0 = s.events[0].index
    base = static_baseline_predictions(s)
    assert assignment_fidelity(s.y[2000:e0], base[2000:e0]) > 0.97
    assert assignment_fidelity(s.y[e0:], base[e0:]) < 0.6


# ---------------------------------------------------------------- real shots


@pytest.fixture(scope="module")
def real_stream():
    return make_stream("qubit-readout", samples=100_000, seed=0, data=REAL_SHOTS)


def test_load_shots_real_file():
    shots = load_shots(REAL_SHOTS)
    assert shots.shape == (2, 50000, 2) and shots.dtype == np.float64
    np.testing.assert_allclose(shots[0].mean(axis=0), [-0.079, 0.035], atol=5e-4)
    np.testing.assert_allclose(shots[1].mean(axis=0), [0.537, -0.187], atol=5e-4)


def test_real_stream_static_baseline_collapses_and_drift_is_learnable(real_stream):
    s = real_stream
    e1, e2 = (e.index for e in s.events)
    assert (e1, e2) == (40000, 70000)
    base = static_baseline_predictions(s)
    before = assignment_fidelity(s.y[2000:e1], base[2000:e1])
    assert 0.975 < before < 0.99  # README: about 0.984 without drift
    assert assignment_fidelity(s.y[e1:e2], base[e1:e2]) < 0.6
    assert assignment_fidelity(s.y[e2:], base[e2:]) < 0.6
    # an LDA refitted on 2000 shots after each change separates the states again
    for start, stop in ((e1, e2), (e2, len(s))):
        cut = start + 2000
        assert _lda_fidelity(s.x[start:cut], s.y[start:cut], s.x[cut:stop], s.y[cut:stop]) > 0.975
    m = evaluate(s, base)
    assert m["static_baseline"]["assignment_fidelity"] == m["assignment_fidelity"]
    assert m["static_baseline"]["assignment_fidelity_last_5000"] < 0.6
    assert m["static_baseline"]["recovery_shots"][0] is None
    assert -4.0 <= s.x.min() and s.x.max() < 4.0


def test_real_stream_follows_the_documented_drift_geometry(real_stream):
    s = real_stream
    x, one = s.x, s.y[:, 0] > 0

    def state_means(a, b):
        return x[a:b][~one[a:b]].mean(axis=0), x[a:b][one[a:b]].mean(axis=0)

    def axis(a, b):
        m0, m1 = state_means(a, b)
        return m1 - m0

    # calibration: state means 2 apart, centred on 0
    m0, m1 = state_means(0, 2000)
    assert np.linalg.norm(m1 - m0) == pytest.approx(2.0)
    np.testing.assert_allclose((m0 + m1) / 2, 0.0, atol=1e-12)

    def angle(v):
        return np.degrees(np.arctan2(v[1], v[0]))

    # phase jump: +90 deg (plus 20 deg * 2000/100000 of ramp between the blocks)
    jump = angle(axis(40000, 42000)) - angle(axis(38000, 40000))
    assert jump == pytest.approx(90.0 + 0.4, abs=3.0)
    # ramp: 20 deg over the stream, seen between two drift-free stretches
    ramp = angle(axis(36000, 40000)) - angle(axis(0, 4000))
    assert ramp == pytest.approx(20.0 * 0.36, abs=3.0)
    # gain x0.8 at 70%, offset (+0.3, -0.2) separations = (+0.6, -0.4) features
    ratio = np.linalg.norm(axis(70000, 74000)) / np.linalg.norm(axis(66000, 70000))
    assert ratio == pytest.approx(0.8, abs=0.03)
    shift = np.add(*state_means(70000, 74000)) / 2 - np.add(*state_means(66000, 70000)) / 2 * 0.8
    np.testing.assert_allclose(shift, [0.6, -0.4], atol=0.05)


def test_real_stream_without_drift_replays_file_shots():
    s = make_qubit_readout(20000, 5, data=REAL_SHOTS, drift=NO_DRIFT)
    assert s.events == () and s.meta["source"]["with_replacement"] == [False, False]
    norm_ = s.meta["normalisation"]
    raw = s.x / norm_["scale_per_adc"] + np.array(norm_["centre_adc"])
    shots = load_shots(REAL_SHOTS)
    for state, sign in ((0, -1.0), (1, 1.0)):
        # every drawn shot is a shot of its prepared state in the file
        dist, _ = cKDTree(shots[state]).query(raw[s.y[:, 0] == sign])
        assert dist.max() < 1e-9
    assert s.y.mean() == pytest.approx(0.0, abs=0.03)  # fair prepared-state draws
    base = static_baseline_predictions(s)
    assert assignment_fidelity(s.y, base) == pytest.approx(0.984, abs=0.006)


def test_file_smaller_than_stream_draws_with_replacement(tmp_path):
    rng = np.random.default_rng(0)
    shots = np.stack([rng.normal(-1, 0.2, (50, 2)), rng.normal(1, 0.2, (50, 2)), rng.normal(3, 0.2, (50, 2))])
    path = tmp_path / "three_states.npy"
    np.save(path, shots)
    s = make_stream("qubit-readout", samples=500, seed=2, data=path)  # every state of the file
    assert s.meta["source"]["with_replacement"] == [True, True, True]
    assert s.meta["states"] == [0, 1, 2] and s.y.shape == (500, 3)
    assert len(s) == 500 and s.meta["source"]["file_shape"] == [3, 50, 2]
    s = make_stream("qubit-readout", samples=80, seed=2, data=path, states="0,2")
    assert s.meta["source"]["with_replacement"] == [False, False] and s.y.shape == (80, 1)
    assert s.meta["source"]["state_means_adc"][1] == pytest.approx(shots[2].mean(axis=0).tolist())


# ---------------------------------------------------------------- determinism and tiny streams


@pytest.mark.parametrize("task", TASKS)
def test_streams_are_reproducible_from_the_seed(task):
    a = make_stream(task, samples=5000, seed=11)
    b = make_stream(task, samples=5000, seed=11)
    c = make_stream(task, samples=5000, seed=12)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.events == b.events and a.meta == b.meta
    assert not np.array_equal(a.x, c.x)


def test_file_stream_is_reproducible_from_the_seed():
    a = make_stream("qubit-readout", samples=3000, seed=4, data=REAL_SHOTS)
    b = make_stream("qubit-readout", samples=3000, seed=4, data=str(REAL_SHOTS))
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)


def test_single_shot_readout_stream():
    s = make_stream("qubit-readout", samples=1, seed=0)
    assert s.x.shape == (1, 2) and s.events == ()
    assert "source" in s.meta["normalisation"]["method"]
    m = evaluate(s, np.zeros((1, 1)))
    assert m["static_baseline"] is None and m["recovery_shots"] == []


def test_readout_meta_is_json_serialisable():
    import json

    s = make_stream("qubit-readout", samples=3000, seed=0)
    json.dumps(s.meta)
    json.dumps(make_stream("drift-regression", samples=30, seed=0).meta)
    json.dumps(evaluate(s, s.y))


# ---------------------------------------------------------------- bad input


def _save(tmp_path, name, arr):
    path = tmp_path / name
    np.save(path, arr)
    return path


@pytest.mark.parametrize(
    "arr, message",
    [
        (np.zeros((2, 10)), r"rank 2"),
        (np.zeros((2, 10, 3)), r"last axis must be 2"),
        (np.zeros((1, 10, 2)), r"1 prepared state\(s\), need at least 2"),
        (np.zeros((2, 0, 2)), r"no shots"),
        (np.zeros((2, 10, 2), dtype=complex), r"dtype complex128"),
        (np.array([[["a", "b"]] * 3] * 2), r"dtype <U1"),
    ],
)
def test_bad_shot_arrays_are_refused(tmp_path, arr, message):
    path = _save(tmp_path, "bad.npy", arr)
    with pytest.raises(ValueError, match=message) as info:
        load_shots(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match=message):
        make_stream("qubit-readout", samples=10, seed=0, data=path)


@pytest.mark.parametrize("value, where", [(np.nan, "state 1, shot 3, Q"), (np.inf, "state 0, shot 7, I")])
def test_non_finite_shots_are_refused(tmp_path, value, where):
    arr = np.zeros((2, 10, 2))
    state, shot, comp = (1, 3, 1) if where.startswith("state 1") else (0, 7, 0)
    arr[state, shot, comp] = value
    with pytest.raises(ValueError, match=f"1 NaN/inf values, first at {where}"):
        load_shots(_save(tmp_path, "nonfinite.npy", arr))


def test_shots_too_large_to_average_are_refused(tmp_path):
    # finite, but the calibration's mean and spread overflow: once named as "the same mean [inf, inf]"
    arr = np.random.default_rng(0).normal(size=(2, 10, 2))
    arr[0, 3, 0] = 1e308
    with pytest.raises(ValueError, match=r"holds values up to 1e\+308, too large to average"):
        load_shots(_save(tmp_path, "huge.npy", arr))
    arr[0, 3, 0] = 1e6  # ADC units: fine
    assert load_shots(_save(tmp_path, "adc.npy", arr)).shape == (2, 10, 2)


def test_unreadable_and_missing_files(tmp_path):
    text = tmp_path / "shots.npy"
    text.write_text("I,Q\n0.1,0.2\n")
    # named as not a .npy file, not with numpy's advice to allow pickles
    with pytest.raises(ValueError, match=r"is not a .npy file \(no NumPy header\)") as info:
        load_shots(text)
    assert "pickle" not in str(info.value)
    truncated = _save(tmp_path, "truncated.npy", np.zeros((2, 50, 2)))
    truncated.write_bytes(truncated.read_bytes()[:150])
    with pytest.raises(ValueError, match="not a readable .npy array"):
        load_shots(truncated)
    pickled = _save(tmp_path, "objects.npy", np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="not a readable .npy array"):
        load_shots(pickled)
    archive = tmp_path / "two.npz"
    np.savez(archive, a=np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="archive"):
        load_shots(archive)
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        make_stream("qubit-readout", samples=10, seed=0, data=tmp_path / "missing.npy")
    with pytest.raises(ValueError, match="not a file"):
        load_shots(tmp_path)


def test_identical_state_means_are_refused(tmp_path):
    path = _save(tmp_path, "same.npy", np.ones((2, 5, 2)))
    with pytest.raises(ValueError, match="same mean"):
        make_stream("qubit-readout", samples=10, seed=0, data=path)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(task="qubit_readout", samples=10, seed=0), r"task: unknown task 'qubit_readout'"),
        (dict(task="qubit-readout", samples=0, seed=0), r"samples: expected a positive integer, got 0"),
        (dict(task="qubit-readout", samples=-3, seed=0), r"samples: .* got -3"),
        (dict(task="qubit-readout", samples=2.5, seed=0), r"samples: .* got 2.5"),
        (dict(task="qubit-readout", samples=True, seed=0), r"samples: .* got True"),
        (dict(task="qubit-readout", samples=10, seed=-1), r"seed: .* got -1"),
        (dict(task="drift-regression", samples=2, seed=0), r"samples: this task needs at least 3 samples, got 2"),
        (dict(task="drift-regression", samples=10, seed=0, data="x.npy"), r"data: the drift-regression task"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    task = kwargs.pop("task")
    with pytest.raises(ValueError, match=message):
        make_stream(task, **kwargs)


def test_bad_predictions_and_windows_are_refused():
    s = make_stream("qubit-readout", samples=100, seed=0)
    with pytest.raises(ValueError, match=r"predictions: shape \(99, 1\)"):
        evaluate(s, np.zeros((99, 1)))
    bad = np.zeros((100, 1))
    bad[42] = np.nan
    with pytest.raises(ValueError, match="first at sample 42"):
        evaluate(s, bad)
    with pytest.raises(ValueError, match="window: expected a positive integer, got 0"):
        rolling_metric(s, np.zeros(100), window=0)
    r = make_stream("drift-regression", samples=30, seed=0)
    with pytest.raises(ValueError, match=r"predictions: shape \(30, 2\)"):
        evaluate(r, np.zeros((30, 2)))


def test_stream_rejects_inconsistent_fields():
    x, y = np.zeros((10, 1)), np.zeros((10, 1))
    with pytest.raises(ValueError, match="Stream.events: index 10"):
        Stream("drift-regression", x, y, (DriftEvent(10, "late"),))
    with pytest.raises(ValueError, match="Stream.events: index 3"):
        Stream("drift-regression", x, y, (DriftEvent(5, "a"), DriftEvent(3, "b")))
    with pytest.raises(ValueError, match="Stream.y: 9 rows"):
        Stream("drift-regression", x, y[:9])
    with pytest.raises(ValueError, match="Stream.x: expected a 2-D float64"):
        Stream("drift-regression", x[:, 0], y)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: ReadoutModel(std=0.0), r"ReadoutModel.std: .* got 0.0"),
        (lambda: ReadoutModel(readout_over_t1=-0.1), r"ReadoutModel.readout_over_t1: .* got -0.1"),
        (lambda: ReadoutModel(mean1=(-0.079, 0.035)), r"ReadoutModel.mean1: equals mean0"),
        (lambda: ReadoutModel(mean0=(np.nan, 0.0)), r"ReadoutModel.mean0: expected two finite numbers"),
        (lambda: DriftStep(1.2), r"DriftStep.at: .* got 1.2"),
        (lambda: DriftStep(0.5, gain=0.0), r"DriftStep.gain: .* got 0.0"),
        (lambda: DriftStep(0.5, offset=(1.0,)), r"DriftStep.offset"),
        (lambda: ReadoutDrift(steps=(DriftStep(0.6), DriftStep(0.3))), r"ReadoutDrift.steps: 'at' must increase"),
        (lambda: ReadoutDrift(pivot="middle"), r"ReadoutDrift.pivot: .* got 'middle'"),
        (lambda: make_qubit_readout(0, 0), r"samples: expected a positive integer, got 0"),
        (lambda: make_qubit_readout(10, 0, calibration_shots=0), r"calibration_shots: .* got 0"),
    ],
)
def test_bad_source_and_drift_parameters_are_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# ---------------------------------------------------------------- multi-state readout


def _one_hot(labels, n_states):
    return np.where(np.arange(n_states)[None, :] == np.asarray(labels)[:, None], 1.0, -1.0)


def test_three_state_metrics_hand_worked():
    from onchip.tasks import confusion_counts, state_errors

    prepared = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assigned = [0, 0, 0, 1, 1, 1, 2, 2, 0, 0]
    y, p = _one_hot(prepared, 3), _one_hot(assigned, 3) * 0.3  # any scale: argmax decides
    np.testing.assert_array_equal(confusion_counts(y, p), [[3, 1, 0], [0, 2, 1], [2, 0, 1]])
    assert state_errors(y, p) == pytest.approx([1 / 4, 1 / 3, 2 / 3])
    assert assignment_fidelity(y, p) == pytest.approx((3 / 4 + 2 / 3 + 1 / 3) / 3)
    # a tie between outputs goes to the lowest index (model.decision)
    np.testing.assert_array_equal(confusion_counts(_one_hot([1], 3), np.array([[0.5, 0.5, -1.0]])),
                                  [[0, 0, 0], [1, 0, 0], [0, 0, 0]])
    # window of 5 over the same shots: NaN until every state has a shot in the window
    r = rolling_fidelity(y, p, 5)
    assert np.isnan(r[:7]).all()  # windows ending before shot 7 lack |2>
    assert r[7] == pytest.approx(1 - (1 / 1 + 1 / 3 + 0 / 1) / 3)  # shots 3..7
    assert np.isnan(r[8:]).all()  # windows from shot 4 on lack |0>


def test_two_state_figures_keep_their_meaning():
    from onchip.tasks import confusion_counts

    y = np.array([-1.0, -1.0, -1.0, 1.0, 1.0])
    p = np.array([-0.2, 0.0, -1.0, 0.3, -0.1])  # 0.0 assigns |1> (sign rule)
    np.testing.assert_array_equal(confusion_counts(y, p), [[2, 1], [1, 1]])
    s = Stream("qubit-readout", np.arange(10.0).reshape(5, 2), y[:, None])
    m = evaluate(s, p[:, None], window=2)
    assert m["error_0_as_1"] == m["error_per_state"][0] == pytest.approx(1 / 3)
    assert m["error_1_as_0"] == m["error_per_state"][1] == 0.5
    assert m["confusion_matrix"] == [[pytest.approx(2 / 3), pytest.approx(1 / 3)], [0.5, 0.5]]


def test_recovery_after_an_unrecovered_event_is_measured_from_the_earlier_level():
    n, window = 9000, 250
    s = _alternating_stream(n, [3000, 6000])
    never = s.y.copy()
    never[3000:] *= -1  # wrong from the first event on (a frozen discriminator after a phase jump)
    assert evaluate(s, never, window=window)["recovery_shots"] == [None, None]  # not [None, 0]
    partial = s.y.copy()
    partial[3000::10] *= -1  # 10% wrong after the first event: never back within 0.01
    partial[6000:] = s.y[6000:]  # correct again after the second event
    # the second event is measured against the level before the first (1.0), reached at once
    assert evaluate(s, partial, window=window)["recovery_shots"] == [None, 0]
    late = partial.copy()
    late[6000:6400] *= -1  # and back to 1.0 only after 400 wrong shots
    # 400 wrong shots; within 0.01 of 1.0 allows 2 wrong in a window of 250
    assert evaluate(s, late, window=window)["recovery_shots"] == [None, 398]
    # the level just before the second event (0.9) would have counted it recovered much earlier
    assert assignment_fidelity(s.y[6000 - window:6000], late[6000 - window:6000]) == pytest.approx(0.9)


def test_builtin_third_state_follows_its_decay_model():
    model = ReadoutModel()
    rng = np.random.default_rng(3)
    n = 200_000
    z2 = model.sample(2, n, rng)
    m0, m1, m2 = (np.array(m) for m in (model.mean0, model.mean1, model.mean2))
    r2, r1 = model.readout_over_t1_21, model.readout_over_t1
    # E[f2] for f2 = min(tau2/T, 1); E[f1] = E[min(tau1/T, 1 - f2)], integrated over f2
    e_f2 = (1 - np.exp(-r2)) / r2
    e_f1 = quad(lambda u: r2 * np.exp(-r2 * u) * (1 - np.exp(-r1 * (1 - u))) / r1, 0, 1)[0]
    expected = e_f2 * m2 + e_f1 * m1 + (1 - e_f2 - e_f1) * m0
    np.testing.assert_allclose(z2.mean(axis=0), expected, atol=5 * model.std / np.sqrt(n))
    # no decay: the |2> cloud is centred on mean2 with the amplifier noise
    still = ReadoutModel(readout_over_t1_21=0.0).sample(2, n, rng)
    np.testing.assert_allclose(still.mean(axis=0), m2, atol=5 * model.std / np.sqrt(n))
    np.testing.assert_allclose(still.std(axis=0), model.std, rtol=0.01)
    with pytest.raises(ValueError, match="state: the model has states 0, 1 and 2, got 3"):
        model.sample(3, 1, rng)


def test_three_state_stream_targets_and_baseline():
    s = make_stream("qubit-readout", samples=6000, seed=4, states="0,1,2", drift="none")
    assert s.y.shape == (6000, 3) and s.meta["states"] == [0, 1, 2] and s.events == ()
    assert sorted(np.unique(s.y.sum(axis=1))) == [-1.0]  # one +1 per row
    assert s.meta["source"]["states_used"] == [0, 1, 2] and sum(s.meta["source"]["draws"]) == 6000
    base = static_baseline_predictions(s)
    assert base.shape == (6000, 3) and (np.sort(base, axis=1) == [-1.0, -1.0, 1.0]).all()
    # a frozen multi-class LDA separates three stationary clouds about 0.66 ADC apart (std 0.13)
    m = evaluate(s, base)
    assert len(m["confusion_counts"]) == 3 and sum(map(sum, m["confusion_counts"])) == 6000
    assert m["static_baseline"]["assignment_fidelity"] > 0.9
    assert "error_0_as_1" not in m and len(m["error_per_state"]) == 3
    # the default of the built-in source stays two states, unchanged
    assert make_stream("qubit-readout", samples=100, seed=0).y.shape == (100, 1)


@pytest.mark.parametrize(
    "states, message",
    [
        ("0", r"states: need at least 2 states to tell apart, got '0'"),
        ("1,1", r"states: expected distinct states in increasing order, got '1,1'"),
        ("2,1", r"states: expected distinct states in increasing order, got '2,1'"),
        ("0,3", r"states: the built-in source holds states 0..2, got '0,3'"),
        ("a,b", r"states: expected comma-separated state numbers such as 0,1,2, got 'a,b'"),
    ],
)
def test_bad_state_selections_are_refused(states, message):
    with pytest.raises(ValueError, match=message):
        make_stream("qubit-readout", samples=10, seed=0, states=states)


def test_state_selection_of_a_file_is_checked_against_the_file(tmp_path):
    path = _save(tmp_path, "two.npy", np.stack([np.zeros((5, 2)), np.ones((5, 2))]))
    with pytest.raises(ValueError, match=r"states: data '.*two.npy' holds states 0..1, got '0,2'"):
        make_stream("qubit-readout", samples=10, seed=0, data=path, states="0,2")
    with pytest.raises(ValueError, match=r"drift: the drift-regression task takes no drift option"):
        make_stream("drift-regression", samples=10, seed=0, drift="none")
