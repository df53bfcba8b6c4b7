"""Drift scenarios as data: trajectories against closed forms, TOML round trips, refusals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import tomli_w

from onchip.tasks import DRIFT_PRESETS, DriftError, ReadoutDrift, load_drift
from onchip.tasks.drift import DriftChange, DriftScenario, parse_drift

ACROBOT = {"link_mass_2": (0.1, 10.0), "link_length_2": (0.1, None)}


def test_default_preset_is_the_documented_drift():
    # 20 deg linear over the stream, +90 deg from floor(0.4 n), gain 0.8 and offset from floor(0.7 n)
    n = 1000
    theta, gain, offset = load_drift("default", task="qubit-readout").readout_trajectory(n)
    t = np.arange(n)
    expected = np.deg2rad(20.0) * t / n + np.where(t >= 400, np.pi / 2, 0.0)
    np.testing.assert_allclose(theta, expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(gain, np.where(t >= 700, 0.8, 1.0))
    np.testing.assert_array_equal(offset, np.where(t[:, None] >= 700, [0.3, -0.2], [0.0, 0.0]))
    # and it is the drift of the stream builder's default, bit for bit
    for a, b in zip(ReadoutDrift().trajectory(12345),
                    load_drift("default", task="qubit-readout").readout_trajectory(12345)):
        np.testing.assert_array_equal(a, b)


def test_ramp_and_rate_hand_worked():
    s = load_drift(
        """
        [[event]]
        sample = 100
        span_samples = 50
        rotation_deg = 10.0
        gain = 0.5
        offset = [1.0, -2.0]

        [[event]]
        sample = 500
        rotation_deg_per_1000_shots = 2.0
        """,
        task="qubit-readout",
    )
    theta, gain, offset = s.readout_trajectory(2000)
    deg = np.rad2deg(theta)
    assert deg[99] == 0.0 and deg[125] == pytest.approx(5.0) and deg[150] == pytest.approx(10.0)
    assert gain[99] == 1.0 and gain[125] == pytest.approx(0.75) and gain[400] == pytest.approx(0.5)
    np.testing.assert_allclose(offset[125], [0.5, -1.0])
    assert deg[1500] == pytest.approx(10.0 + 2.0) and deg[1999] == pytest.approx(10.0 + 2.0 * 1.499)
    # no event at sample 0, so both are marked, with descriptions built from the fields
    labels = [e.label for e in s.stream_events(2000)]
    assert [e.index for e in s.stream_events(2000)] == [100, 500]
    assert labels == ["ramp: rotation +10 deg, gain x0.5, offset (+1, -2) sep.", "rotation 2 deg per 1000 shots"]


def test_pivot_stays_put_and_offsets_are_in_separations():
    s = load_drift("[[event]]\nsample = 1\nrotation_deg = 90.0\ngain = 2.0\noffset = [0.5, 0.0]",
                   task="qubit-readout")
    p = np.array([3.0, 4.0])
    z = np.array([[3.0, 4.0], [3.0, 4.0], [4.0, 4.0]])
    out = s.apply_readout(z, p, separation=2.0)
    np.testing.assert_allclose(out[0], p)  # before the event
    np.testing.assert_allclose(out[1], p + [1.0, 0.0])  # the pivot only moves by the offset, 0.5 * 2
    np.testing.assert_allclose(out[2], p + [0.0, 2.0] + [1.0, 0.0])  # (1, 0) turned 90 deg, doubled
    origin = load_drift("pivot = 'origin'\n[[event]]\nsample = 0\nrotation_deg = 180.0", task="qubit-readout")
    np.testing.assert_allclose(origin.apply_readout(z[:1], p, 1.0), [[-3.0, -4.0]], atol=1e-12)


def test_events_sharing_a_sample_are_merged_and_sample_zero_is_not_marked():
    s = load_drift(
        "[[event]]\nat = 0.5\ngain = 0.9\nlabel = 'a'\n[[event]]\nsample = 0\nrotation_deg = 1.0\n"
        "[[event]]\nsample = 50\nrotation_deg = 5.0\nlabel = 'b'\n",
        task="qubit-readout",
    )
    assert [(e.index, e.label) for e in s.stream_events(100)] == [(50, "a; b")]


@pytest.mark.parametrize("name", sorted(DRIFT_PRESETS))
def test_presets_round_trip_through_toml(name):
    s = load_drift(name, task="qubit-readout")
    assert s.name == name
    assert parse_drift(s.to_toml(), name=name) == s


def test_dynamics_schedule_for_a_control_task(tmp_path):
    path = tmp_path / "change.toml"
    path.write_text("[[event]]\nat = 0.5\ndynamics = { link_mass_2 = 2.0, link_length_2 = 1.5 }\n"
                    "[[event]]\nsample = 10\ndynamics = { link_mass_2 = 0.5 }\n")
    s = load_drift(path, task="acrobot", parameters=ACROBOT, presets={})
    assert s.dynamics_schedule(100) == [(10, {"link_mass_2": 0.5}), (50, {"link_mass_2": 2.0, "link_length_2": 1.5})]
    assert [e.index for e in s.stream_events(100)] == [10, 50]
    assert load_drift(s.to_toml(), task="acrobot", parameters=list(ACROBOT)) == \
        DriftScenario(s.events, description=s.description)  # names only: any finite value


@pytest.mark.parametrize(
    "text, words",
    [
        ("[[event]]\nat = 0.5\ngian = 0.9", ["event 1", "'gian'", "0.9"]),
        ("[[event]]\nat = 0.1\ngain = 0.9\n[[event]]\nat = 1.0\ngain = 0.9", ["event 2", "'at'", "1.0"]),
        ("[[event]]\nat = 0.5\ngain = 0.0", ["event 1", "'gain'", "0.0"]),
        ("[[event]]\nat = 0.5\noffset = [1.0, 2.0, 3.0]", ["event 1", "'offset'", "1.0, 2.0, 3.0"]),
        ("[[event]]\nat = 0.5\nsample = 3\ngain = 2.0", ["event 1", "exactly one position"]),
        ("[[event]]\ngain = 2.0", ["event 1", "exactly one position"]),
        ("[[event]]\nsample = -3\ngain = 2.0", ["event 1", "'sample'", "-3"]),
        ("[[event]]\nat = 0.5\nlabel = 'nothing'", ["event 1", "no change"]),
        ("[[event]]\nat = 0.8\nspan = 0.3\nrotation_deg = 5.0", ["event 1", "'span'", "0.3"]),
        ("[[event]]\nat = 0.1\nrotation_deg_per_1000_shots = 1.0\ngain = 2.0", ["event 1", "rotation_deg_per_1000"]),
        ("[[event]]\nat = 0.1\nrotation_deg = inf", ["event 1", "'rotation_deg'", "inf"]),
        ("[[event]]\nat = 0.1\ndynamics = { link_mass_2 = 2.0 }", ["event 1", "'dynamics'", "qubit-readout"]),
        ("pivot = 'middle'", ["'pivot'", "'middle'"]),
        ("drift = 3", ["unknown field 'drift'"]),
        ("[[event]\nat = 0.1", ["not valid TOML"]),
    ],
)
def test_bad_readout_scenarios_name_the_event_field_and_value(text, words):
    with pytest.raises(DriftError) as info:
        load_drift(text, task="qubit-readout")
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[[event]]\nat = 0.5\nrotation_deg = 30.0", ["event 1", "'rotation_deg'", "acrobot", "link_mass_2"]),
        ("[[event]]\nat = 0.5\ndynamics = { link_mas_2 = 2.0 }", ["event 1", "'link_mas_2'", "link_length_2"]),
        ("[[event]]\nat = 0.5\ndynamics = { link_mass_2 = 20.0 }", ["event 1", "link_mass_2 = 20.0", "10.0"]),
        ("[[event]]\nat = 0.5\ndynamics = { link_mass_2 = 'heavy' }", ["event 1", "'dynamics'", "heavy"]),
        ("[[event]]\nat = 0.5\ndynamics = {}", ["event 1", "non-empty"]),
        ("[[event]]\nat = 0.5\nspan = 0.1\ndynamics = { link_mass_2 = 2.0 }", ["event 1", "cannot be combined"]),
    ],
)
def test_bad_control_scenarios_name_the_event_field_and_value(text, words):
    with pytest.raises(DriftError) as info:
        load_drift(text, task="acrobot", parameters=ACROBOT, presets={})
    for word in words:
        assert word in str(info.value)


def test_positions_outside_the_stream_and_missing_sources_are_refused(tmp_path):
    s = load_drift("[[event]]\nsample = 150\ngain = 2.0\n[[event]]\nsample = 10\nspan_samples = 95\ngain = 2.0",
                   task="qubit-readout")
    with pytest.raises(DriftError, match=r"event 1: field 'sample' is outside the 100-sample stream, got 150"):
        s.stream_events(100)
    assert [e.index for e in s.stream_events(151)] == [10, 150]
    with pytest.raises(DriftError, match=r"event 2: field 'span_samples' ends after the 104-sample stream"):
        DriftScenario(s.events[1:]).stream_events(104)
    with pytest.raises(FileNotFoundError, match=r"'no-such' is neither a preset \(default, none"):
        load_drift("no-such", task="qubit-readout")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[event]]\nat = 0.5\ngain = -1.0\n")
    with pytest.raises(DriftError, match=rf"drift file {bad}: drift event 1: field 'gain'"):
        load_drift(bad, task="qubit-readout")


def test_documented_drift_example_is_a_valid_readout_scenario():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "docs" / "main-job.md").read_text()
    example = next(b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "[[event]]" in b)
    scenario = load_drift(example, task="qubit-readout")
    events = scenario.stream_events(1000)
    assert [e.index for e in events] == [400, 600]  # the jump at 40%, the ramp's start at 60%


# -- numbers: a bool is not a number, NaN and infinities are refused, in files and in code -----------
#: every numeric field of an event -> (an event that is valid with a good value, where the value goes)
_EVENTS = {
    "at": ({"gain": 2.0}, "at", True),
    "sample": ({"gain": 2.0}, "sample", False),
    "span": ({"at": 0.0, "rotation_deg": 5.0}, "span", True),
    "span_samples": ({"at": 0.0, "rotation_deg": 5.0}, "span_samples", False),
    "rotation_deg": ({"at": 0.1}, "rotation_deg", True),
    "gain": ({"at": 0.1}, "gain", True),
    "offset[0]": ({"at": 0.1}, "offset", True),
    "offset[1]": ({"at": 0.1}, "offset", True),
    "rotation_deg_per_1000_shots": ({"at": 0.1}, "rotation_deg_per_1000_shots", True),
    "dynamics": ({"at": 0.1}, "dynamics", True),
}


def _event(where: str, value) -> tuple[dict, str]:
    base, field, _ = _EVENTS[where]
    if where.startswith("offset"):
        value = [value, 0.0] if where.endswith("[0]") else [0.0, value]
    elif field == "dynamics":
        value = {"link_mass_2": value}
    task = "acrobot" if field == "dynamics" else "qubit-readout"
    return {**base, field: value}, task


DRIFT_CASES = [pytest.param(w, True, id=f"{w}=true") for w in _EVENTS] + [
    pytest.param(w, v, id=f"{w}={v}") for w, (_, _, is_float) in _EVENTS.items() if is_float
    for v in (math.inf, -math.inf, math.nan)]


def test_the_drift_cases_cover_every_number_of_an_event():
    numeric = {f.name for f in dataclasses.fields(DriftChange)
               if any(t in f.type for t in ("int", "float")) and f.name != "number"}
    assert numeric == {w.split("[")[0] for w in _EVENTS}


@pytest.mark.parametrize("where, value", DRIFT_CASES)
def test_a_bool_or_non_finite_number_in_a_drift_file_is_refused(where, value, tmp_path):
    event, task = _event(where, value)
    path = tmp_path / "drift.toml"
    path.write_text(tomli_w.dumps({"event": [event]}))
    with pytest.raises(DriftError) as info:
        load_drift(str(path), task=task, parameters=ACROBOT, presets={})
    text = str(info.value)
    field = _EVENTS[where][1]
    assert "\n" not in text and f"drift file {path}: drift event 1: field {field!r}" in text, text
    assert ("True" if value is True else repr(value)) in text
    # the same values given in code
    kwargs = {k: tuple(v.items()) if k == "dynamics" else tuple(v) if isinstance(v, list) else v
              for k, v in event.items()}
    with pytest.raises(DriftError, match=f"drift event 1: field {field!r}"):
        DriftChange(**kwargs)
