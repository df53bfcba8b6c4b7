"""The Python API: `import onchip`, the Learner over every backend, the error types."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import onchip
from onchip.backends import available_backends
from onchip.model import GoldenLearner
from support import golden_final, random_theta, stimulus


def test_every_exported_name_resolves_and_is_documented():
    for name in onchip.__all__:
        value = getattr(onchip, name)
        if callable(value):
            assert value.__doc__ and value.__doc__.strip(), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        onchip.nope  # noqa: B018


def test_exported_names_resolve_in_a_fresh_interpreter():
    """After a plain ``import onchip`` every name of ``__all__`` resolves; ``onchip.verify`` and
    ``onchip.assert_verified`` are the functions, ``onchip.verification`` their module; no exported
    name is also a submodule's (the submodule would replace it once imported)."""
    code = (
        "import inspect, pkgutil, sys, types, onchip\n"
        "missing = [n for n in onchip.__all__ if not hasattr(onchip, n)]\n"
        "assert not missing, missing\n"
        "assert inspect.isfunction(onchip.verify) and inspect.isfunction(onchip.assert_verified)\n"
        "assert isinstance(onchip.verification, types.ModuleType)\n"
        "assert onchip.verification is sys.modules['onchip.verification']\n"
        "assert onchip.verify is onchip.verification.verify\n"
        "assert onchip.assert_verified is onchip.verification.assert_verified\n"
        "assert onchip.VerifyReport is onchip.verification.VerifyReport\n"
        "clash = sorted(set(onchip.__all__) & {m.name for m in pkgutil.iter_modules(onchip.__path__)})\n"
        "assert not clash, f'exported names that are also submodules: {clash}'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_import_is_light():
    """`import onchip` loads no hardware tool, no torch and no amaranth."""
    code = "import sys, onchip; print(sorted(m for m in ('torch', 'amaranth', 'numba', 'cocotb') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_learner_float_api_equals_the_golden_model_on_quantized_data():
    spec = onchip.PRESETS["kan-regression"]
    x = np.linspace(-2.2, 2.2, 500).reshape(-1, 1)
    y = np.sin(2 * x)
    learner = onchip.Learner("kan-regression")
    preds = learner.run(x, y)
    g = GoldenLearner(spec)
    want = g.run(g.quantize_inputs(x), g.quantize_targets(y))
    g.flush()
    np.testing.assert_array_equal(preds, g.dequantize_outputs(want))
    np.testing.assert_array_equal(learner.parameters, g.theta)
    # predict does not learn; it uses the learned parameters
    before = learner.parameters
    np.testing.assert_array_equal(learner.predict(x), g.dequantize_outputs(g.predict(g.quantize_inputs(x))))
    np.testing.assert_array_equal(learner.parameters, before)
    learner.reset()
    np.testing.assert_array_equal(learner.parameters, GoldenLearner(spec).initial_theta)


def test_learner_calls_chain_like_one_stream_in_the_sequential_schedule():
    spec = onchip.PRESETS["kan-readout"]
    x, y = stimulus(spec, 600, seed=2)
    whole = onchip.Learner(spec)
    parts = onchip.Learner(spec)
    want = whole.step_raw(x, y)
    got = np.concatenate([parts.step_raw(x[:250], y[:250]), parts.step_raw(x[250:], y[250:])])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(parts.parameters, whole.parameters)


@pytest.mark.parametrize("backend", ["hls", "rtl"])
def test_learner_gives_the_same_raw_results_on_hardware_backends(backend):
    if backend not in available_backends():
        pytest.skip(f"backend {backend!r} is not available here")
    spec = onchip.PRESETS["mlp-readout"]
    theta = random_theta(spec, 5) // 4
    x, y = stimulus(spec, 400, seed=8)
    learner = onchip.Learner(spec, backend, theta=theta)
    want_preds, want_theta = golden_final(spec, x, y, theta)
    np.testing.assert_array_equal(learner.step_raw(x, y), want_preds)
    np.testing.assert_array_equal(learner.parameters, want_theta)
    np.testing.assert_array_equal(learner.predict_raw(x[:20]), GoldenLearner(spec, want_theta).predict(x[:20]))


def test_learner_refuses_bad_input_with_named_errors():
    learner = onchip.Learner("kan-readout")
    with pytest.raises(ValueError, match=r"x must have shape \(N, 2\)"):
        learner.predict(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"theta must have shape \(22,\)"):
        learner.parameters = np.zeros(5, np.int64)
    with pytest.raises(ValueError, match="outside"):
        learner.parameters = np.full(22, 1 << 20)
    with pytest.raises(ValueError, match="backend must be one of"):
        onchip.Learner("kan-readout", "vhdl")
    with pytest.raises(ValueError, match="needs a fixed-point backend"):
        onchip.Learner("kan-readout", "float").predict_raw(np.zeros((1, 2), np.int64))


def test_error_types():
    with pytest.raises(onchip.SpecError, match="kind must be one of kan, mlp; got 'cnn'"):
        onchip.LearnerSpec(kind="cnn", widths=(1, 1))
    assert issubclass(onchip.SpecError, ValueError) and issubclass(onchip.DataError, ValueError)
    from onchip.flow.tools import ToolError as FlowToolError
    from onchip.verilator import BuildError, SimulationError

    for cls in (FlowToolError, BuildError, SimulationError):
        assert issubclass(cls, onchip.ToolError)


def test_bad_shot_file_is_a_data_error(tmp_path):
    bad = tmp_path / "shots.npy"
    np.save(bad, np.zeros((2, 10, 3)))
    with pytest.raises(onchip.DataError, match="shots.npy"):
        onchip.make_stream("qubit-readout", samples=100, seed=0, data=bad)
