"""The specialised stream kernels (one spec's constants compiled in) equal the generic ones bit for bit.

Differential: the same learner state driven through both paths over random specs (kind, widths,
KAN grid and order, every format field narrow and wide with every quantization and overflow mode,
learning-rate shifts, schedule and staleness; :func:`test_fuzz_specs.spec_fields`) and random
streams of all sample kinds, compared after every chunk: predictions, parameters and the pending
updates of the pipelined window. Each spec compiles its own runner (seconds): a few specs by
default, many more with ``-m slow``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onchip import jitcache
from onchip.model import GoldenLearner, SampleKind
from onchip.model import specialise as sp
from onchip.model.golden import kernel_config
from onchip.spec import PRESETS
from support import random_theta
from test_fuzz_specs import _SETTINGS, _valid_spec, spec_fields, streams

#: Specs per test: (default run, ``-m slow``).
N_SPECS = (3, 60)


@st.composite
def kinds_streams(draw, spec, max_samples: int = 60):
    """Raw (x, y, kind): :func:`test_fuzz_specs.streams` with kinds TARGET / PREDICT / ERROR mixed
    in drawn shares; ERROR rows carry errors over the whole ``grad`` range, PREDICT rows garbage."""
    x, y = draw(streams(spec, max_samples=max_samples))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    share = rng.dirichlet(np.ones(3))
    kind = rng.choice([int(k) for k in SampleKind], len(x), p=share).astype(np.int64)
    g = spec.formats.grad
    err = rng.integers(g.min_raw, g.max_raw + 1, y.shape)
    edge = rng.random(y.shape) < 0.2
    err[edge] = rng.choice([g.min_raw, g.max_raw, 0], edge.sum())
    y = np.where((kind == SampleKind.ERROR)[:, None], err, y)
    y = np.where((kind == SampleKind.PREDICT)[:, None], rng.integers(-(1 << 40), 1 << 40, y.shape), y)
    return x, y, kind


def _differential(spec, x, y, kind, theta) -> None:
    generic = GoldenLearner(spec, theta, specialise=False)
    special = GoldenLearner(spec, theta, specialise=True)
    cut = len(x) // 2
    for lo, hi in ((0, cut), (cut, len(x))):  # two runs: the pipelined window carries across
        want = generic.run(x[lo:hi], y[lo:hi], kind[lo:hi])
        got = special.run(x[lo:hi], y[lo:hi], kind[lo:hi])
        np.testing.assert_array_equal(got, want, err_msg=f"predictions differ in samples {lo}..{hi}")
        np.testing.assert_array_equal(special.theta, generic.theta, err_msg=f"parameters differ after {hi}")
        assert special.pending == generic.pending
    np.testing.assert_array_equal(special.predict(x), generic.predict(x), err_msg="inference differs")
    generic.flush()
    special.flush()
    np.testing.assert_array_equal(special.theta, generic.theta, err_msg="flushed parameters differ")


def _case(data, max_width: int) -> None:
    spec = _valid_spec(data.draw(spec_fields(max_width=max_width)))
    x, y, kind = data.draw(kinds_streams(spec))
    theta = random_theta(spec, data.draw(st.integers(0, 2**16))) if data.draw(st.booleans()) else None
    _differential(spec, x, y, kind, theta)


@settings(max_examples=N_SPECS[0], derandomize=True, **_SETTINGS)
@given(st.data())
def test_specialised_equals_generic_on_random_specs(data):
    _case(data, max_width=4)


@pytest.mark.slow
@settings(max_examples=N_SPECS[1], **_SETTINGS)
@given(st.data())
def test_specialised_equals_generic_on_random_specs_slow(data):
    _case(data, max_width=6)


@pytest.mark.parametrize("preset", ["kan-readout", pytest.param("mlp-readout", marks=pytest.mark.slow)])
def test_presets_pipelined_and_sequential(preset):
    """The readout presets in both schedules, a long mixed-kind stream (the sweeps' case)."""
    from kind_support import mixed_stream

    for spec in (PRESETS[preset], PRESETS[preset].replace(schedule="sequential")):
        x, y, kind = mixed_stream(spec, 3000, seed=11)
        _differential(spec, x, y, kind, random_theta(spec, 12))


# -- the runner's file and the automatic choice ---------------------------------------------
def test_runner_file_is_named_by_config_and_kernel_sources():
    a = sp.SpecialisedRunner(kernel_config(PRESETS["kan-readout"]))
    b = sp.SpecialisedRunner(kernel_config(PRESETS["kan-readout"].replace(learning_rate=2.0**-5)))
    assert a.path != b.path and a.path.parent == b.path.parent == jitcache.specialised_dir()
    assert jitcache.installed_kernel_digest() in a.source
    assert a.path == sp.SpecialisedRunner(kernel_config(PRESETS["kan-readout"])).path  # stable


def test_a_runner_file_is_written_once_and_never_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(jitcache, "specialised_dir", lambda: tmp_path)
    runner = sp.SpecialisedRunner(kernel_config(PRESETS["kan-paper"]))
    assert not runner.compiled
    runner.path.write_text("# not the runner\n")
    with pytest.raises(OSError, match="remove it"):
        runner.load()
    assert runner.path.read_text() == "# not the runner\n"


def test_automatic_choice(monkeypatch, tmp_path):
    monkeypatch.setattr(jitcache, "specialised_dir", lambda: tmp_path)
    runner = sp.SpecialisedRunner(kernel_config(PRESETS["kan-paper"]))
    monkeypatch.delenv(sp.ENV, raising=False)
    assert not sp.use_specialised(None, 100, runner)  # short stream, nothing compiled
    assert sp.use_specialised(None, sp.SPECIALISE_AFTER, runner)  # long stream
    assert not sp.use_specialised(False, sp.SPECIALISE_AFTER, runner)
    assert sp.use_specialised(True, 1, runner)
    runner.path.write_text(runner.source)  # built before on this machine
    assert sp.use_specialised(None, 1, runner)
    monkeypatch.setenv(sp.ENV, "0")
    assert not sp.use_specialised(None, sp.SPECIALISE_AFTER, runner)
    monkeypatch.setenv(sp.ENV, "yes")
    with pytest.raises(ValueError, match="ONCHIP_SPECIALISE must be 1"):
        sp.use_specialised(None, 1, runner)


def test_specialise_argument_is_checked():
    with pytest.raises(ValueError, match="specialise must be True, False or None"):
        GoldenLearner(PRESETS["kan-paper"], specialise="yes")
