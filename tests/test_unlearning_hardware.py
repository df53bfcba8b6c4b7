"""OEU-unlearned brevitas networks on the fixed-point backends (golden model, HLS C simulation, RTL)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.fixed import Fmt
from onchip.frontends.brevitas import brevitas_outputs, from_brevitas
from onchip.methods.unlearning import data, hardware, methods, metrics, models
from onchip.model import GoldenLearner
from onchip.spec import Formats, LearnerSpec

torch.set_num_threads(1)

FAST = methods.UnlearnConfig(train_epochs=3, epochs=2)


@pytest.fixture(scope="module")
def split():
    return data.make_split("digits", "class:3", seed=0)


def _unlearned(split, bits, hidden=(8,)):
    original = methods.train_original(split, bits, FAST, hidden=hidden, seed=0)
    model, _ = methods.unlearn("oeu", original, split, FAST, seed=0)
    return model


@pytest.mark.parametrize("bits", [2])
def test_golden_and_hls_equal_brevitas_sample_for_sample(split, bits):
    model = _unlearned(split, bits)
    sets = hardware.split_sets(split)
    res = hardware.check_on_hardware(model, sets, backends=("golden", "hls"))
    # accuracies of the brevitas model computed by the unlearning metrics, independently
    ref = metrics.evaluate(model, split, seed=0)
    for name in ("forget", "retain", "test"):
        row = res["sets"][name]
        assert row["n"] == len(sets[name][1])
        assert row["brevitas_acc"] == pytest.approx(ref[f"{name}_acc"], abs=0)
        for b in ("golden", "hls"):
            assert row[b]["argmax_mismatches"] == 0 and row[b]["output_mismatches"] == 0
            assert row[b]["acc"] == row["brevitas_acc"]
    assert res["all_equal"]
    # the comparison is not vacuous: the outputs use several levels of the b+1-bit act format
    x = np.concatenate([sets[n][0] for n in sets])
    out = brevitas_outputs(model, x)
    assert len(np.unique(out)) >= 3
    assert res["spec"]["formats"]["act"].startswith(f"ap_fixed<{bits + 1},")


def test_a_changed_parameter_is_caught(split):
    """The check compares against brevitas, not against the imported parameters: perturbing
    brevitas' weights after the comparison data is fixed shows up as mismatches."""
    model = _unlearned(split, 4)
    imp = from_brevitas(model)
    x = split.x_test
    want = brevitas_outputs(model, x)
    theta = imp.theta.copy()
    theta[: imp.spec.widths[0] * imp.spec.widths[1]] //= 2  # halve the first layer's weights
    golden = GoldenLearner(imp.spec, theta)
    x_raw = models.quantize_input(models.export_layers(model), x)
    assert (golden.predict(x_raw) != want).any(axis=1).sum() > 10


def test_learned_layout_is_refused_with_the_layer_named(split):
    model = methods.train_original(split, 4, FAST, hidden=(8,), seed=0, act="learned")
    with pytest.raises(ValueError, match="layer"):
        from_brevitas(model)
    with pytest.raises(ValueError, match="layer"):
        hardware.check_on_hardware(model, hardware.split_sets(split), backends=("golden",))


def _one_layer_spec(lr=2.0**-4):
    # grad ap_fixed<8,1> (F=7): act ap_fixed<6,1> differences of up to 2 saturate it;
    # input ap_fixed<8,3> (F=5), act F=5, coef ap_fixed<16,4> (F=12)
    f = Formats(input=Fmt.parse("ap_fixed<8,3,RND_CONV,SAT>"), coef=Fmt.parse("ap_fixed<16,4,RND_CONV,SAT>"),
                act=Fmt.parse("ap_fixed<6,1,RND_CONV,SAT>"), grad=Fmt.parse("ap_fixed<8,1,RND_CONV,SAT>"),
                acc=Fmt.parse("ap_fixed<40,14,TRN,WRAP>"))
    return LearnerSpec(kind="mlp", widths=(3, 2), formats=f, learning_rate=lr, init_scale=1.0)


def test_frozen_learning_rate_closed_form_and_golden_stream():
    spec = _one_layer_spec()
    # bias: W_g + 1 - F_g + F_c = 8 + 1 - 7 + 12 = 14; weights on the input: 8 + 8 - 7 - 5 + 12 = 16;
    # weights on act: 8 + 6 - 7 - 5 + 12 = 14  ->  s = 16
    assert hardware.frozen_learning_rate(spec) == 2.0**-16
    rng = np.random.default_rng(0)
    f = spec.formats
    # extreme stream: saturated inputs, targets at the far end of act -> saturated errors
    x = rng.choice([f.input.min_raw, f.input.max_raw], size=(400, 3)).astype(np.int64)
    y = rng.choice([f.act.min_raw, f.act.max_raw], size=(400, 2)).astype(np.int64)
    frozen = hardware.frozen_spec(spec)
    g = GoldenLearner(frozen)
    theta0 = g.theta.copy()
    preds = g.run(x, y)
    g.flush()
    np.testing.assert_array_equal(g.theta, theta0)
    np.testing.assert_array_equal(preds, GoldenLearner(frozen).predict(x))
    # four times the frozen rate: the same stream does change the parameters
    g4 = GoldenLearner(spec.replace(learning_rate=2.0**-14))
    g4.run(x, y)
    g4.flush()
    assert not np.array_equal(g4.theta, theta0)
    with pytest.raises(ValueError, match="spec.kind"):
        hardware.frozen_learning_rate(LearnerSpec(kind="kan", widths=(2, 1)))


@pytest.mark.slow  # golden == HLS == brevitas and the refusals stay in the default run
def test_cli_hardware_json_matches_metrics(tmp_path):
    out = tmp_path / "run"
    rc = main(["unlearn", "--dataset", "digits", "--bits", "4", "--forget", "class:3", "--method", "oeu",
               "--hidden", "8", "--train-epochs", "3", "--epochs", "2", "--hardware",
               "--hardware-backends", "golden,hls", "--no-progress", "--out", str(out)])
    assert rc == 0
    hw = json.loads((out / "hardware.json").read_text())
    met = json.loads((out / "metrics.json").read_text())
    row = met["runs"]["0"]["oeu"]
    sets = hw["runs"]["oeu"]["0"]["sets"]
    for name in ("forget", "retain", "test"):
        assert sets[name]["brevitas_acc"] == pytest.approx(row[f"{name}_acc"], abs=0)
        for b in ("golden", "hls"):
            assert sets[name][b]["acc"] == sets[name]["brevitas_acc"]
    assert hw["summary"]["oeu"]["golden_argmax_mismatches"] == 0
    assert hw["summary"]["oeu"]["hls_output_mismatches"] == 0
    assert (out / "hardware.png").stat().st_size > 0


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--hardware", "--act", "learned"], "--hardware: needs --act fixed"),
        (["--hardware", "--hardware-backends", "golden,fpga"], "--hardware-backends"),
        (["--act", "relu6"], "--act: unknown activation layout"),
    ],
)
def test_cli_refuses_bad_hardware_arguments_before_writing(tmp_path, capsys, extra, match):
    out = tmp_path / "never"
    assert main(["unlearn", "--method", "oeu", "--no-progress", "--out", str(out), *extra]) == 2
    assert match in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif(not hardware.rtl_available(), reason="no Verilator toolchain or onchip.hw generator")
def test_rtl_equals_brevitas_and_never_updates(split):
    """The 64-8-10 network on the serial MLP datapath (a Verilator build of about 20 s)."""
    model = methods.train_original(split, 4, FAST, hidden=(8,), seed=0)
    res = hardware.check_on_hardware(model, hardware.split_sets(split), backends=("golden", "rtl"))
    assert res["rtl_parameters_unchanged"]
    for row in res["sets"].values():
        assert row["rtl"]["output_mismatches"] == 0 and row["rtl"]["argmax_mismatches"] == 0
        assert row["rtl"]["acc"] == row["brevitas_acc"] == row["golden"]["acc"]
    assert res["all_equal"]
