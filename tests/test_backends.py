"""The contract every backend keeps: the golden model's predictions and parameters, bit for bit.

One test per (backend, preset, schedule), from a random initial theta written through each
backend's own parameter path, test-then-train and inference only. A backend whose tools are
not installed here is reported as skipped, never counted as passing.
"""

from __future__ import annotations

import numpy as np
import pytest

from onchip.backends import Backend, available_backends, backend_names, get_backend, register_backend
from onchip.model import GoldenLearner
from onchip.spec import PRESETS
from support import golden_final, random_theta, stimulus, variant

FIXED_POINT = [name for name in backend_names() if get_backend(name).raw and name != "golden"]
SCHEDULES = ("sequential", "pipelined")
#: samples per stream: the cocotb bench is ~1000x slower than the stream harness
SAMPLES = {"cocotb": 60, "rtl": 1500, "hls": 1500}


def _backend(name: str) -> Backend:
    if name not in available_backends():
        pytest.skip(f"backend {name!r} is not available on this machine")
    return get_backend(name)


def _theta(spec, seed):
    """Random parameters in the middle half of the coef range: learning moves them both ways."""
    return random_theta(spec, seed) // 4


#: (preset, schedule) pairs every backend runs in the default suite (a KAN and an MLP, both
#: schedules); the rest of the matrix is slow (the RTL and HLS suites cover every preset)
DEFAULT_CASES = {("kan-readout", "pipelined"), ("mlp-regression", "sequential")}


@pytest.mark.parametrize("preset, schedule", [
    pytest.param(p, s, marks=() if (p, s) in DEFAULT_CASES else pytest.mark.slow)
    for p in PRESETS for s in SCHEDULES
])
@pytest.mark.parametrize("name", FIXED_POINT)
def test_backend_equals_golden(name, preset, schedule):
    backend = _backend(name)
    spec = variant(PRESETS[preset], schedule)
    theta = _theta(spec, seed=len(preset))
    x, y = stimulus(spec, SAMPLES[name], seed=3)
    want_preds, want_theta = golden_final(spec, x, y, theta)
    got_preds, got_theta = backend.run(spec, x, y, theta=theta)
    np.testing.assert_array_equal(got_preds, want_preds)
    np.testing.assert_array_equal(got_theta, want_theta)
    assert not np.array_equal(want_theta, theta)  # the stream did train the learner


@pytest.mark.parametrize("name", FIXED_POINT)
def test_backend_inference_only(name):
    """``learn=False``: every prediction with the given theta, which comes back unchanged."""
    backend = _backend(name)
    spec = variant(PRESETS["kan-readout"], "pipelined")
    theta = _theta(spec, seed=9)
    x, _ = stimulus(spec, 40, seed=4)
    got_preds, got_theta = backend.run(spec, x, None, theta=theta, learn=False)
    np.testing.assert_array_equal(got_preds, GoldenLearner(spec, theta).predict(x))
    np.testing.assert_array_equal(got_theta, theta)


@pytest.mark.parametrize("name", ["golden", *FIXED_POINT])
def test_backend_refuses_raw_values_outside_their_format(name):
    backend = _backend(name)
    spec = PRESETS["kan-regression"]
    fi = spec.formats.input
    x = np.array([[fi.max_raw + 1], [0]])
    y = np.zeros((2, 1), np.int64)
    with pytest.raises(ValueError, match="x_raw holds raw values"):
        backend.run(spec, x, y)


def _golden_entry(spec, x, y):
    return GoldenLearner(spec).run(x, y)


def _hls_entry(spec, x, y):
    from onchip.hls import HlsLearner

    if "hls" not in available_backends():
        pytest.skip("the HLS C simulation is not available on this machine")
    return HlsLearner(spec).run(x, y)


def _cocotb_entry(spec, x, y):
    from onchip.hw import sim

    return sim.pack_samples(sim.cached_design(spec), x, y)


@pytest.mark.parametrize("entry", [_golden_entry, _hls_entry, _cocotb_entry], ids=["golden", "hls", "cocotb-packer"])
def test_learner_entry_points_refuse_raw_values_outside_their_format(entry):
    """The entry points below the backend registry apply the same check: x = 40000 does not fit
    the 16-bit input of kan-regression, and -32769 is not turned into +32767."""
    spec = PRESETS["kan-regression"]
    with pytest.raises(ValueError, match=r"x_raw holds raw values in \[8191, 40000\]"):
        entry(spec, np.array([[40000], [8191]]), np.array([[4096], [0]]))
    with pytest.raises(ValueError, match=r"y_raw holds raw values in \[-32769, 0\]"):
        entry(spec, np.array([[0], [1]]), np.array([[-32769], [0]]))


def test_float_backend_starts_from_theta_and_keeps_it_without_learning():
    backend = _backend("float")
    spec = PRESETS["mlp-regression"]
    theta = np.linspace(-0.5, 0.5, spec.parameter_count())
    x = np.linspace(-2, 2, 64).reshape(-1, 1)
    preds, kept = backend.run(spec, x, None, theta=theta, learn=False)
    np.testing.assert_array_equal(kept, theta)
    _, trained = backend.run(spec, x, np.sin(x), theta=theta)
    assert not np.allclose(trained, theta)
    # a different start gives different predictions: theta is used, not the default
    other, _ = backend.run(spec, x, None, learn=False)
    assert not np.allclose(preds, other)


def test_registry_names_every_backend_and_refuses_unknown_ones():
    assert {"golden", "float", "rtl", "cocotb", "hls"} <= set(backend_names())
    assert "golden" in available_backends()
    with pytest.raises(ValueError, match="backend must be one of golden, float"):
        get_backend("vhdl")
    with pytest.raises(TypeError, match="does not implement the Backend protocol"):
        register_backend(object())
