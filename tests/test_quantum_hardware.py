"""The KAN calibrator in the gate-calibration loop (golden model vs float twin)."""

import numpy as np
import pytest

from onchip.methods.quantum_meta.hardware import SpecCorrectionLearner, calibrator_spec, hardware_in_the_loop


@pytest.fixture(scope="module")
def x_gate_run():
    return hardware_in_the_loop("x", n_devices=2, k_steps=4, seed=3, backends=("float", "golden", "rtl"))


def test_rtl_calibrator_equals_golden(x_gate_run):
    np.testing.assert_array_equal(x_gate_run["rtl"]["raw_predictions"], x_gate_run["golden"]["raw_predictions"])
    np.testing.assert_array_equal(x_gate_run["rtl"]["fidelity"], x_gate_run["golden"]["fidelity"])
    assert x_gate_run["golden"]["raw_predictions"].shape == (2, 5, 2)
    assert 0 < x_gate_run["step_latency_cycles"] < 20


def test_fixed_point_calibrator_improves_every_device(x_gate_run):
    fid = x_gate_run["golden"]["fidelity"]
    assert fid.shape == (2, 5)
    assert np.all(fid[:, -1] > fid[:, 0] + 1e-4)


def test_fixed_point_calibrator_tracks_its_float_twin(x_gate_run):
    # 16-bit corrections: the fidelity curves agree with the float twin far below the gain itself
    gold, twin = x_gate_run["golden"]["fidelity"], x_gate_run["float"]["fidelity"]
    gain = np.abs(twin[:, -1] - twin[:, 0]).min()
    assert np.max(np.abs(gold - twin)) < 0.05 * gain


def test_learning_rate_keeps_the_step_damped_for_any_feature_count():
    for f in (1, 2, 3, 4, 8):
        spec = calibrator_spec(f, 2)
        learner = SpecCorrectionLearner(spec, "golden")
        x, y = np.full(f, 0.3), np.array([1.0, -1.0])
        first = learner.predict(x)
        learner.step(x, y)
        moved = (learner.predict(x) - first) / (y - first)
        assert np.all((moved > 0.3) & (moved < 1.0))  # toward the target, never past it


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend"):
        SpecCorrectionLearner(calibrator_spec(2, 2), "fpga")
