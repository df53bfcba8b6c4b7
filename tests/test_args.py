"""The arguments every sub-command shares (commands/_args.py) and the report helpers (methods/_report.py)."""

from __future__ import annotations

import argparse
import re

import numpy as np
import pytest

import onchip
from onchip.cli import build_parser, main
from onchip.commands import _args
from onchip.methods import _report


@pytest.mark.parametrize("kind, text, value", [
    (_args.positive_int, "3", 3),
    (_args.nonneg_int, "0", 0),
    (_args.int_range(2, 5), "5", 5),
    (_args.probability, "1", 1.0),
    (_args.float_range(0, 1, lo_open=True), "0.5", 0.5),
    (_args.int_list(1, increasing=True), "1, 3,7", [1, 3, 7]),
    (_args.name_list(("a", "b", "c")), "all", ["a", "b", "c"]),
    (_args.name_list(("a", "b", "c")), "c,a", ["c", "a"]),
])
def test_types_accept(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize("kind, text, reason", [
    (_args.positive_int, "0", ">= 1"),
    (_args.positive_int, "x", "expected an integer"),
    (_args.int_range(2, 5), "6", "in [2, 5]"),
    (_args.probability, "1.5", "in [0, 1]"),
    (_args.probability, "nan", "finite"),
    (_args.float_range(0, 1, lo_open=True), "0", "in (0, 1]"),
    (_args.int_list(1, increasing=True), "3,1", "strictly increasing"),
    (_args.int_list(1), "1,a", "comma-separated integers"),
    (_args.int_list(1), ",", "at least one"),
    (_args.name_list(("a", "b")), "a,z", "unknown value(s) ['z']"),
])
def test_types_refuse_with_the_reason(kind, text, reason):
    with pytest.raises(argparse.ArgumentTypeError, match=reason.replace("(", r"\(").replace("[", r"\[")
                       .replace(")", r"\)").replace("]", r"\]")):
        kind(text)


def test_a_bad_flag_is_one_line_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["memorization", "--steps", "3,1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("onchip memorization: error: --steps: ")
    assert not out.exists()


def test_out_is_shared_and_refuses_foreign_folders(tmp_path, capsys, monkeypatch):
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = set()
    for name in ("ais", "lmaps", "memorization", "quantum-meta", "unlearn"):
        out = next(a for a in sub.choices[name]._actions if "--out" in a.option_strings)
        helps.add(out.help)
        assert out.default == f"out/{name}"
    assert helps == {_args.OUT_HELP}
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    assert main(["ais", "--out", str(foreign)]) == 2
    assert "--out: " in capsys.readouterr().err and (foreign / "notes.txt").exists()
    monkeypatch.chdir(tmp_path)
    assert main(["lmaps", "--out", "."]) == 2


def test_quiet_keeps_the_older_spelling_hidden(capsys):
    parser = build_parser()
    args = parser.parse_args(["unlearn", "--no-progress"])
    assert args.quiet
    assert parser.parse_args(["unlearn", "--quiet"]).quiet
    assert main(["unlearn", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--quiet" in text and "--no-progress" not in text


def test_config_errors_name_the_flag():
    from onchip.methods.lmaps.experiment import LmapsConfig

    with pytest.raises(ValueError, match=r"^--n-test: n_val \+ n_test must be <= 200"):
        _args.build_config(LmapsConfig, n_test=500)
    with pytest.raises(ValueError, match=r"^--operator: "):
        _args.build_config(LmapsConfig, flags={"operators": "--operator"}, operators=("deblur",))
    with pytest.raises(ValueError, match=r"^n_test: "):  # in Python the field is named
        LmapsConfig(n_test=500)


def test_a_file_a_command_read_is_named_as_its_flag_with_the_path(tmp_path, capsys):
    """The API names a file it read `spec file PATH:` / `drift file PATH:`; a command says `--spec PATH:`
    as it says `--theta PATH:` (the TOML error once read `drift file d.toml: drift: not valid TOML`)."""
    (tmp_path / "d.toml").write_text("drift = [\n")
    (tmp_path / "s.toml").write_text('kind = "kan"\nwidths = [2, 1]\ngrid_size = true\n')
    out = tmp_path / "out"
    assert main(["run", "--drift", str(tmp_path / "d.toml"), "--samples", "1000", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"onchip run: error: --drift {tmp_path / 'd.toml'}: not valid TOML (Invalid value (at end of document))\n"
    assert main(["generate", "--spec", str(tmp_path / "s.toml"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"onchip generate: error: --spec {tmp_path / 's.toml'}: grid_size ")
    assert not out.exists()


def test_command_line_is_the_real_arguments():
    assert _args.command_line(["ais", "--out", "a b"]) == "onchip ais --out 'a b'"


def test_rng_is_stable_and_separates_labels():
    a = _report.rng(3, "noise", 1).integers(0, 2**31, 4)
    assert np.array_equal(a, _report.rng(3, "noise", 1).integers(0, 2**31, 4))
    assert not np.array_equal(a, _report.rng(3, "noise", 2).integers(0, 2**31, 4))
    assert not np.array_equal(a, _report.rng(4, "noise", 1).integers(0, 2**31, 4))
    assert not np.array_equal(_report.rng(0, "ab").random(3), _report.rng(0, "a", "b").random(3))
    with pytest.raises(ValueError, match="seed"):
        _report.rng(-1)


def test_tables(tmp_path):
    assert _report.markdown_table(["a", "b"], [[1, "x"]], caption="c") == "c\n\n| a | b |\n|---|---|\n| 1 | x |\n"
    _report.write_dict_csv(tmp_path / "t.csv", [{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    assert (tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1,2", "3,4"]


def _npz(path, p):
    with open(path, "wb") as f:  # np.savez would append .npz to a name ending .npy
        np.savez(f, theta=np.zeros(p, np.int64))


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a warning line is a second line
@pytest.mark.parametrize("write, match", [
    (lambda path, p: _npz(path, p), r"is an \.npz archive, not a \.npy array"),
    (lambda path, p: path.write_bytes(b""), r"is an empty file, not a \.npy array"),
    (lambda path, p: path.write_text("1,2,3\n"), r"is not a \.npy file \(no NumPy header\)"),  # never numpy's pickle advice
    (lambda path, p: np.save(path, np.full(p, np.inf, np.float16)),
     r"value inf at index 0 is not an integer representable in int64"),
])
@pytest.mark.parametrize("command", [
    ["verify", "--spec", "kan-readout", "--backends", "hls"],
    ["hls", "--spec", "kan-readout"],
    ["run", "--spec", "kan-readout", "--samples", "10"],
])
def test_theta_files_that_are_no_plain_array_are_refused_in_one_line(tmp_path, capsys, command, write, match):
    from onchip.spec import load_spec

    path = tmp_path / "theta.npy"  # an archive renamed to .npy included
    write(path, load_spec("kan-readout").parameter_count())
    out = tmp_path / "out"
    assert main([*command, "--theta", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("onchip") and "--theta" in err and err.count("\n") == 1, err
    assert "pickle" not in err, err
    assert re.search(match, err), err
    assert not out.exists()


@pytest.mark.parametrize("name, content, match", [
    ("model.h5", b"hello\n", "not an HDF5 file"),
    ("model.keras", b"hello\n", "not a .keras file"),
])
def test_a_keras_file_of_the_wrong_container_is_refused_before_tensorflow(tmp_path, capsys, monkeypatch,
                                                                          name, content, match):
    from onchip.frontends import qkeras

    def no_tensorflow():
        raise AssertionError("TensorFlow loaded for a file that is not a Keras container")

    monkeypatch.setattr(qkeras, "modules", no_tensorflow)
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["import", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("attrs, match", [
    ({}, "model.h5: an HDF5 file without a Keras model (no model_config attribute); save the model with "
         "model.save('model.h5')"),
    ({"layer_names": [b"dense"], "keras_version": "2.21.0"},
     "model.h5: a weights-only file (model.save_weights); save the model with model.save('model.h5')"),
])
def test_an_hdf5_file_without_a_keras_model_is_refused_before_tensorflow(tmp_path, capsys, monkeypatch, attrs, match):
    import h5py

    from onchip.frontends import qkeras

    def no_tensorflow():
        raise AssertionError("TensorFlow loaded for an HDF5 file without a Keras model")

    monkeypatch.setattr(qkeras, "modules", no_tensorflow)
    path = tmp_path / "model.h5"
    with h5py.File(path, "w") as h5:
        h5["a"] = [1, 2, 3]
        h5.attrs.update(attrs)
    assert main(["import", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_an_hdf5_signature_after_a_user_block_is_accepted(tmp_path):
    import h5py

    from onchip.frontends.qkeras import HDF5_SIGNATURE, _check_container

    path = tmp_path / "model.h5"
    with h5py.File(path, "w", userblock_size=512) as h5:  # HDF5 allows a user block of 512, 1024, ...
        h5.attrs["model_config"] = '{"class_name": "Sequential"}'
    assert path.read_bytes()[512:520] == HDF5_SIGNATURE
    _check_container(path)
    path.write_bytes(b"\0" * 700 + HDF5_SIGNATURE + b"\0" * 64)  # not at a permitted offset
    with pytest.raises(ValueError, match="not an HDF5 file"):
        _check_container(path)


def test_an_unknown_flag_is_named_against_its_command(tmp_path, capsys):
    assert main(["generate", "--spec", "kan-readout", "--bogus", "1", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert err == "onchip generate: error: unrecognized arguments: --bogus 1 (see onchip generate --help)\n", err
    assert not (tmp_path / "g").exists()


def test_hls_takes_the_design_overrides_of_the_other_hardware_commands(tmp_path):
    out = tmp_path / "h"
    assert main(["hls", "--spec", "kan-readout", "--channels", "4", "--out", str(out)]) == 0
    assert "static const int N_CHANNELS = 4;" in (out / "onchip_learner.h").read_text()
    assert "channels = 4" in (out / "spec.toml").read_text()


def test_run_theta_without_spec_is_for_the_tasks_preset(tmp_path, capsys):
    # without --spec the job's own preset (qubit-readout: kan-readout) is the spec --theta is for
    from onchip.model import GoldenLearner
    from onchip.spec import load_spec

    spec = load_spec("kan-readout")
    p = spec.parameter_count()
    theta = np.random.default_rng(3).integers(-200, 200, p)
    np.save(tmp_path / "t.npy", theta)
    args = ["run", "--samples", "200", "--quiet", "--backend", "golden"]
    assert main([*args, "--theta", str(tmp_path / "t.npy"), "--out", str(tmp_path / "a")]) == 0
    g = GoldenLearner(spec, theta)
    x = onchip.make_stream("qubit-readout", samples=200, seed=0).x
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "predictions.npy")[:1], g.predict(g.quantize_inputs(x[:1])))

    np.save(tmp_path / "short.npy", theta[:5])
    assert main([*args, "--theta", str(tmp_path / "short.npy"), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    # the job's check (its task's preset), worded as with --spec, the file named
    assert err.count("\n") == 1 and f"--theta {tmp_path / 'short.npy'}: theta must have shape ({p},), got (5,) (spec kan-readout)" in err, err
    assert not (tmp_path / "b").exists()
    np.save(tmp_path / "float.npy", np.full(p, 0.5))
    assert main([*args, "--theta", str(tmp_path / "float.npy"), "--out", str(tmp_path / "c")]) == 2
    assert "value 0.5 at index 0 is not an integer" in capsys.readouterr().err


def test_run_refuses_theta_for_acrobot(tmp_path, capsys):
    np.save(tmp_path / "t.npy", np.zeros(22, np.int64))
    assert main(["run", "--task", "acrobot", "--theta", str(tmp_path / "t.npy"), "--out", str(tmp_path / "r")]) == 2
    assert "--theta" in (err := capsys.readouterr().err) and "acrobot task takes no --theta" in err
