"""N multiplexed qubits on one datapath: the round-robin stream, its per-qubit figures, the job."""

import json

import numpy as np
import pytest

from onchip import tasks
from onchip.cli import main
from onchip.tasks.fidelity import evaluate_readout
from onchip.tasks.multiqubit import make_multiqubit_readout
from onchip.tasks.readout import IQMap


def _two_state_file(path, m0, m1, n=400, seed=0):
    rng = np.random.default_rng(seed)
    shots = np.stack([rng.normal(m0, 0.1, size=(n, 2)), rng.normal(m1, 0.1, size=(n, 2))])
    np.save(path, shots)
    return path


def test_the_stream_interleaves_the_qubits_round_robin():
    n, s = 5, 700
    m = make_multiqubit_readout(n, s, 3)
    assert m.x.shape == (n * s, 2) and m.y.shape == (n * s, 1) and len(m) == n * s
    assert m.channel.dtype == np.int64 and m.channel.tolist() == [t % n for t in range(n * s)]
    for t in (0, 1, 4, 5, 9, 2 * n + 3, n * s - 1):
        k, c = divmod(t, n)  # sample k N + c is shot k of qubit c
        np.testing.assert_array_equal(m.x[t], m.qubits[c].x[k])
        np.testing.assert_array_equal(m.y[t], m.qubits[c].y[k])
    for c, rows in enumerate(m.split(m.x)):
        np.testing.assert_array_equal(rows, m.qubits[c].x)
        assert len(m.qubits[c]) == s
    with pytest.raises(ValueError, match="predictions"):
        m.split(m.x[:-1])


def test_each_qubit_has_its_own_clouds_and_its_own_drift():
    m = make_multiqubit_readout(8, 3000, 0)
    means = [tuple(np.round(q.meta["source"]["state_means_adc"][0], 6)) for q in m.qubits]
    assert len(set(means)) == 8
    firsts = [q.events[0].index for q in m.qubits]
    assert len(set(firsts)) == 8  # drift events at each qubit's own shots
    assert len({len(q.events) for q in m.qubits} | {0}) > 1
    assert all(m.drifts[c].name == f"independent (qubit {c})" for c in range(8))
    # a scenario given for all drives every qubit alike
    shared = make_multiqubit_readout(4, 3000, 0, drift="phase-jump")
    assert {tuple(q.events) for q in shared.qubits} == {(tasks.DriftEvent(1500, "phase jump +90 deg"),)}


def test_a_qubit_does_not_depend_on_the_others():
    # independence per qubit: qubit c's shots, clouds and drift are the same whatever the other qubits are
    four, eight = make_multiqubit_readout(4, 2000, 7), make_multiqubit_readout(8, 2000, 7)
    for c in range(4):
        np.testing.assert_array_equal(four.qubits[c].x, eight.qubits[c].x)
        assert four.qubits[c].events == eight.qubits[c].events
    other = make_multiqubit_readout(4, 2000, 8)
    assert not np.array_equal(other.qubits[0].x, four.qubits[0].x)
    np.testing.assert_array_equal(make_multiqubit_readout(4, 2000, 7).x, four.x)


def test_a_file_per_qubit_and_one_file_reused(tmp_path):
    a = _two_state_file(tmp_path / "a.npy", (0.0, 0.0), (1.0, 0.0))
    b = _two_state_file(tmp_path / "b.npy", (0.0, 0.0), (0.0, 2.0), seed=1)
    m = make_multiqubit_readout(2, 500, 0, data=[a, b], drift="none")
    for q, f in zip(m.qubits, (a, b)):
        assert q.meta["source"]["path"] == str(f) and "iq_map" not in q.meta["source"]
    sep = [np.hypot(*np.subtract(*q.meta["source"]["state_means_adc"][:2])) for q in m.qubits]
    assert sep[1] == pytest.approx(2 * sep[0], rel=0.05)

    reused = make_multiqubit_readout(3, 500, 0, data=[a], drift="none")
    assert "iq_map" not in reused.qubits[0].meta["source"]
    file_means = np.load(a).mean(axis=1)
    for c in (1, 2):
        iq = reused.qubits[c].meta["source"]["iq_map"]
        assert f"rotated {iq['rotation_deg']:g} deg" in reused.meta["per_qubit"][c]["source"]
        m0, m1 = np.asarray(reused.qubits[c].meta["source"]["state_means_adc"])
        # the |0> -> |1> direction turned by the stated angle, the centre moved by the stated offset
        turn = np.degrees(np.arctan2(*(m1 - m0)[::-1]) - np.arctan2(*(file_means[1] - file_means[0])[::-1]))
        assert (turn - iq["rotation_deg"]) % 360 == pytest.approx(0, abs=1e-6) or \
            (turn - iq["rotation_deg"]) % 360 == pytest.approx(360, abs=1e-6)
        d = np.hypot(*(file_means[1] - file_means[0]))
        np.testing.assert_allclose((m0 + m1) / 2 - file_means.mean(axis=0), d * np.asarray(iq["offset_separations"]),
                                   atol=1e-9)
    assert reused.qubits[1].meta["source"]["iq_map"] != reused.qubits[2].meta["source"]["iq_map"]
    with pytest.raises(ValueError, match=r"^data: 2 files for 3 qubits"):
        make_multiqubit_readout(3, 500, 0, data=[a, b])


def test_iq_map_rotates_about_the_centre_and_offsets_in_separations():
    m0, m1 = np.array([0.0, 0.0]), np.array([2.0, 0.0])
    z = np.array([[2.0, 0.0], [1.0, 1.0]])
    out = IQMap(rotation_deg=90.0, offset=(0.5, 0.0)).apply(z, m0, m1)
    # about the centre (1, 0): (2, 0) -> (1, 1), (1, 1) -> (0, 0); then + 2 * (0.5, 0)
    np.testing.assert_allclose(out, [[2.0, 1.0], [1.0, 0.0]], atol=1e-12)
    with pytest.raises(ValueError, match="IQMap.rotation_deg"):
        IQMap(rotation_deg=float("nan"))
    with pytest.raises(ValueError, match="iq_map"):
        tasks.make_qubit_readout(100, 0, iq_map=IQMap(10.0))


@pytest.mark.parametrize("qubits", [0, -1, 2.0, True, "3"])
def test_a_bad_qubit_count_is_refused(qubits):
    with pytest.raises(ValueError, match=r"^qubits: expected an integer >= 1"):
        make_multiqubit_readout(qubits, 500, 0)


def test_per_qubit_figures_are_the_single_qubit_figures_of_each_sub_stream():
    from onchip.tasks.multiqubit import evaluate_multiqubit

    n, s = 3, 6000
    m = make_multiqubit_readout(n, s, 1)
    rng = np.random.default_rng(0)
    preds = m.y * np.where(rng.random(m.y.shape) < 0.9, 1.0, -1.0)  # 10% of the shots wrong
    got = evaluate_multiqubit(m, preds)
    assert got["qubits"] == n and got["samples_per_qubit"] == s
    for c in range(n):
        rows = np.arange(c, n * s, n)  # qubit c's samples, counted out here
        want = evaluate_readout(m.qubits[c], preds[rows])
        assert got["per_qubit"][c] == want
    for key in ("assignment_fidelity", "assignment_fidelity_last_5000"):
        assert got["mean"][key] == pytest.approx(np.mean([evaluate_readout(m.qubits[c], preds[c::n])[key]
                                                          for c in range(n)]), abs=1e-15)
        assert got["static_baseline_mean"][key] == pytest.approx(
            np.mean([got["per_qubit"][c]["static_baseline"][key] for c in range(n)]), abs=1e-15)
    assert got["mean"]["drift_events"] == sum(len(q.events) for q in m.qubits)


def _run(tmp_path, *args, name="out"):
    out = tmp_path / name
    return main(["run", "--quiet", "--out", str(out), *args]), out


@pytest.mark.parametrize(
    "args, words",
    [
        (["--qubits", "0"], ["--qubits", "'0'"]),
        (["--qubits", "two"], ["--qubits", "'two'"]),
        (["--qubits", "2.5"], ["--qubits", "'2.5'"]),
        (["--qubits", "3", "--data", "a.npy", "b.npy"], ["data", "2 files for 3 qubits"]),
        (["--data", "a.npy", "b.npy"], ["data", "2 files", "--qubits"]),
        (["--qubits", "2", "--task", "drift-regression"], ["qubits", "drift-regression"]),
        (["--qubits", "2", "--samples", "50"], ["samples", "per qubit", "50"]),
        (["--qubits", "2000", "--samples", "100000"], ["--qubits 2000", "100000000"]),
        (["--qubits", "2", "--drift", "no-such-drift"], ["no-such-drift", "preset"]),
    ],
)
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, args, words):
    code, out = _run(tmp_path, *args)
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    for word in words:
        assert word in err
    assert [p.name for p in tmp_path.iterdir()] == []


def _single_channel_runs(stream, spec, theta=None):
    # qubit c alone on a one-channel learner: what channel c of the multiplexed learner must give
    from onchip.model import GoldenLearner

    out = []
    for c, q in enumerate(stream.qubits):
        g = GoldenLearner(spec.replace(channels=1), None if theta is None else theta[c])
        out.append(g.run(g.quantize_inputs(q.x), g.quantize_targets(q.y)))
    return out


def test_the_job_end_to_end_equals_one_learner_per_qubit(tmp_path, capsys):
    from onchip.model import GoldenLearner
    from onchip.spec import PRESETS, load_spec

    n, s = 3, 1500
    code, out = _run(tmp_path, "--qubits", str(n), "--samples", str(s))
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        ".onchip-output", "drift", "metrics.json", "predictions.npy", "rolling.csv", "rolling.png", "spec.toml"]
    spec = load_spec(out / "spec.toml")
    assert spec.channels == n and spec.replace(channels=1) == PRESETS["kan-readout"]
    stream = make_multiqubit_readout(n, s, 0)
    preds = np.load(out / "predictions.npy")
    assert preds.dtype == np.int64 and preds.shape == (n * s, 1)
    singles = _single_channel_runs(stream, spec)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["environment"]["numpy"] == np.__version__  # what it ran on
    g = GoldenLearner(PRESETS["kan-readout"])
    for c in range(n):
        np.testing.assert_array_equal(preds[c::n], singles[c])
        # the qubit's figures are the single-qubit job's figures of its own stream
        want = json.loads(json.dumps(tasks.evaluate(stream.qubits[c], g.dequantize_outputs(singles[c]))))
        assert metrics["per_qubit"][c] == want
        scenario = tasks.load_drift(out / "drift" / f"qubit-{c}.toml", task="qubit-readout")
        assert scenario.stream_events(s) == stream.qubits[c].events
    assert metrics["mean"]["assignment_fidelity"] == pytest.approx(
        np.mean([m["assignment_fidelity"] for m in metrics["per_qubit"]]), abs=1e-15)
    assert np.loadtxt(out / "rolling.csv", delimiter=",", skiprows=1).shape == (s, 1 + 2 * n)
    assert (out / "rolling.png").read_bytes()[:4] == b"\x89PNG"
    text = capsys.readouterr().out
    assert f"{n} qubits" in text and "qubit 2: fidelity" in text and f"mean over {n} qubits, online learner" in text
    last = f"{metrics['mean']['assignment_fidelity_last_5000']:.4g} (last {min(5000, s)} of each qubit)"
    assert last in text  # the mean line names its window as the qubits' lines do


def test_one_real_file_reused_by_every_qubit_is_stated_and_learned(tmp_path, capsys):
    from real_data import REAL_SHOTS

    code, out = _run(tmp_path, "--qubits", "2", "--data", str(REAL_SHOTS), "--samples", "6000", "--drift", "phase-jump")
    assert code == 0
    m = json.loads((out / "metrics.json").read_text())
    iq = m["per_qubit_stream"][1]["source"]["iq_map"]
    assert "iq_map" not in m["per_qubit_stream"][0]["source"]
    assert f"rotated {iq['rotation_deg']:g} deg" in capsys.readouterr().out
    for q in m["per_qubit"]:  # each learner follows its qubit through the +90 deg jump; each frozen LDA does not
        assert q["assignment_fidelity_last_5000"] > 0.95
        assert q["static_baseline"]["assignment_fidelity_last_5000"] < 0.8


def test_theta_of_one_row_per_qubit_starts_each_channel(tmp_path):
    from onchip.spec import PRESETS

    spec = PRESETS["kan-readout"]
    rng = np.random.default_rng(0)
    theta = rng.integers(-200, 200, size=(2, spec.parameter_count()))
    np.save(tmp_path / "theta.npy", theta)
    code, out = _run(tmp_path, "--qubits", "2", "--samples", "300", "--spec", "kan-readout",
                     "--theta", str(tmp_path / "theta.npy"))
    assert code == 0
    preds = np.load(out / "predictions.npy")
    singles = _single_channel_runs(make_multiqubit_readout(2, 300, 0), spec.replace(channels=2), theta)
    for c in range(2):
        np.testing.assert_array_equal(preds[c::2], singles[c])


def test_a_spec_of_other_channels_is_refused(tmp_path, capsys):
    from onchip.spec import PRESETS

    (tmp_path / "four.toml").write_text(PRESETS["kan-readout"].replace(channels=4).to_toml())
    code, out = _run(tmp_path, "--qubits", "8", "--samples", "200", "--spec", str(tmp_path / "four.toml"))
    assert code == 2
    err = capsys.readouterr().err
    assert "qubits" in err and "channels = 4" in err
    assert not out.exists()


@pytest.mark.slow
def test_the_hls_backend_gives_the_golden_predictions_of_the_multiplexed_job(tmp_path):
    from onchip.backends import get_backend

    if not get_backend("hls").available():
        pytest.skip("the HLS C simulation needs g++")
    assert _run(tmp_path, "--qubits", "2", "--samples", "300", name="golden")[0] == 0
    assert _run(tmp_path, "--qubits", "2", "--samples", "300", "--backend", "hls", name="hls")[0] == 0
    golden, hls = (np.load(tmp_path / name / "predictions.npy") for name in ("golden", "hls"))
    assert golden.shape == (600, 1)
    np.testing.assert_array_equal(hls, golden)


def test_events_too_short_to_measure_are_not_counted_as_missed(tmp_path, capsys):
    # a short run: the per-qubit lines say "too short to measure"; the mean line must not read
    # "recovered from 0 of N drift events" as if every event had been missed
    from onchip.tasks.fidelity import TOO_SHORT

    assert main(["run", "--qubits", "2", "--samples", "500", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    mean = metrics["mean"]
    short = sum(s == TOO_SHORT for q in metrics["per_qubit"] for s in q["recovery_status"])
    assert short > 0 and mean["too_short_events"] == short
    assert (f"recovered from {mean['recovered_events']} of {mean['drift_events'] - short} measurable drift events "
            f"({short} too short to measure)") in text, text
