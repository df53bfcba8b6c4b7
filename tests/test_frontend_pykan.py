"""pykan front end: KANs projected onto onchip's uniform grid; the --theta flag of the commands."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
kan = pytest.importorskip("kan")

from onchip.frontends.pykan import (  # noqa: E402
    WARN_RMS_LSB,
    from_pykan,
    hidden_gain,
    load_pykan,
    pykan_outputs,
)
from onchip.model import GoldenLearner  # noqa: E402
from onchip.spec import PRESETS, Formats, LearnerSpec  # noqa: E402


def _kan(width=(2, 1), grid=8, k=3, grid_range=(-2, 2), base="zero", seed=0):
    model = kan.KAN(width=list(width), grid=grid, k=k, grid_range=list(grid_range), base_fun=base, seed=seed,
                    auto_save=False)
    with torch.no_grad():
        for layer in model.act_fun:
            layer.coef.normal_(0.0, 0.5)
    return model


def _pykan_coef(layer):
    # pykan's spline part as onchip lays it out: (n_out, n_in, G+k), scale_sp folded in
    coef = layer.coef.detach().double() * layer.scale_sp.detach().double()[:, :, None]
    return coef.numpy().transpose(1, 0, 2)


def test_uniform_grid_without_base_function_converts_with_zero_error():
    """Same G and k, power-of-two cell width (4/8 = 0.5), base function off: the spline space is
    onchip's, so the projection recovers pykan's coefficients (float64 round-off only)."""
    model = _kan()
    imp = from_pykan(model, refine=1, fit_to="spline")
    spec = imp.spec
    assert (spec.grid_size, spec.spline_order, spec.grid_range) == (8, 3, (-2.0, 2.0))
    assert imp.grid["model_grids"][0]["uniform"] and imp.grid["source"] == "model"
    np.testing.assert_allclose(imp.coef, _pykan_coef(model.act_fun[0]).reshape(-1), rtol=0, atol=1e-12)
    assert max(e["max_error"] for e in imp.edges) < 1e-12
    assert imp.output["float_max_error"] < 1e-12  # the float spline equals pykan's network
    # quantization is what remains: coefficients and the basis table of the hardware
    assert 0 < imp.output["max_error"] < 0.05 and imp.output["clamped_fraction"] == 0.0
    # the default grid halves the cells: G = 8 splines are G = 16 splines too, so the fit stays exact
    fine = from_pykan(model, fit_to="spline")
    assert fine.spec.grid_size == 16 and fine.output["float_max_error"] < 1e-12


def test_node_and_subnode_affine_terms_fold_into_the_coefficients():
    model = _kan(width=(2, 2))
    with torch.no_grad():
        model.node_scale[0].copy_(torch.tensor([1.5, -0.5]))
        model.node_bias[0].copy_(torch.tensor([0.25, -1.0]))
        model.subnode_scale[0].copy_(torch.tensor([0.5, 2.0]))
        model.subnode_bias[0].copy_(torch.tensor([-0.125, 0.375]))
    imp = from_pykan(model, fit_to="spline")
    assert max(e["max_error"] for e in imp.edges) < 1e-12 and imp.output["float_max_error"] < 1e-12
    x = np.random.default_rng(0).uniform(-2, 2, (256, 2))
    with torch.no_grad():  # the float64 replica of MultKAN.forward the errors are measured against
        ours = model(torch.tensor(x, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(pykan_outputs(model, x), ours, rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def trained():
    """A 2 -> 3 -> 1 KAN with SiLU base functions whose grids pykan moved to the data (non-uniform)."""
    torch.manual_seed(0)
    model = kan.KAN(width=[2, 3, 1], grid=5, k=3, seed=0, auto_save=False)
    x = torch.rand(1000, 2) * 3 - 1.5
    model.update_grid_from_samples(x)
    return model, x.numpy().astype(np.float64)


def test_a_non_uniform_model_is_projected_and_its_errors_reported(trained):
    model, x = trained
    imp = from_pykan(model, x=x)
    assert not imp.grid["model_grids"][0]["uniform"]
    lo, hi = imp.spec.grid_range
    assert lo <= x.min() and x.max() < hi and imp.grid["cell_width"] == 0.25  # 2^floor(log2(3 / (2 * 5)))
    assert len(imp.edges) == 2 * 3 + 3 * 1
    for e in imp.edges:  # errors in function units and act LSB, consistent with each other
        assert e["rms_error"] <= e["max_error"] and e["max_error_lsb"] == pytest.approx(
            e["max_error"] / imp.spec.formats.act.lsb)
    out = imp.output
    assert out["source"] == "data" and out["samples"] == 1000 and out["clamped_fraction"] == 0.0
    assert out["rms_error_lsb"] < 1 and out["max_error_lsb"] < 3  # measured: 0.46 and 1.5 LSB
    # each hidden node is mapped from its pykan grid interval onto the learner's grid range
    assert len(imp.grid["hidden_maps"]) == 1 and len(imp.grid["hidden_maps"][0]["scale"]) == 3
    assert not any(w.startswith("output ") for w in imp.warnings), imp.warnings  # within WARN_RMS_LSB


def _identity_chain(width=(1, 1, 1), hidden_scale=0.25, gain=3.0, x=None):
    """A KAN whose edges are its identity base function times scale_base (splines zero): the
    hidden node is ``hidden_scale * x``, the output ``gain * hidden``; pykan's hidden grid moved
    onto the hidden values of ``x``."""
    model = kan.KAN(width=list(width), grid=4, k=1, base_fun="identity", grid_range=[-2, 2], seed=0, auto_save=False)
    with torch.no_grad():
        for layer, scale in zip(model.act_fun, (hidden_scale, gain)):
            layer.coef.zero_()
            layer.scale_base.fill_(scale)
    model.update_grid_from_samples(torch.tensor(x, dtype=torch.float32))
    return model


def test_hidden_gain_is_the_output_step_per_act_lsb_of_a_hidden_input():
    """out = 3 h, and the learner holds h as u = s h + t: one LSB of u moves the output by 3 / s LSB."""
    x = np.random.default_rng(0).uniform(-2, 2, (500, 1))
    model = _identity_chain(x=x)
    imp = from_pykan(model, x=x)
    (s,) = imp.grid["hidden_maps"][0]["scale"]
    assert s == pytest.approx(4.0 / 1.0, rel=0.01)  # h spans [-0.5, 0.5], mapped onto [-2, 2)
    (g,) = hidden_gain(model, x, imp)
    assert g["layer"] == 1 and g["rms"][0] == pytest.approx(3.0 / s, rel=1e-6) and g["max"][0] == pytest.approx(3.0 / s, rel=1e-6)


def test_an_output_error_beyond_the_target_is_explained_in_the_warnings():
    """A linear-spline edge bending at knots pykan put at the data's quantiles, amplified 40-fold by
    the next layer: the import is far from pykan's, and a warning says where the error comes from."""
    x = np.random.default_rng(1).normal(0, 0.5, (500, 1))
    model = _identity_chain(x=x, hidden_scale=1.0, gain=40.0)
    with torch.no_grad():
        model.act_fun[0].coef.normal_(0, 1.0, generator=torch.Generator().manual_seed(0))
    imp = from_pykan(model, x=x)
    o = imp.output
    assert o["rms_error_lsb"] > 10 * WARN_RMS_LSB
    worst = max(imp.edges, key=lambda e: e["rms_error_quantized_lsb"])
    (g,) = hidden_gain(model, x, imp)
    line = next(w for w in imp.warnings if w.startswith("output "))
    assert line == (f"output {o['rms_error_lsb']:.3g} LSB RMS (max {o['max_error_lsb']:.3g}) of act from pykan's on "
                    f"the 500 data samples, more than 4: edge (layer {worst['layer']}, i=0, j=0) is "
                    f"{worst['rms_error_quantized_lsb']:.3g} LSB RMS from pykan's over its range (pykan's spline bends "
                    f"at its own knots, which onchip's G = {imp.spec.grid_size} uniform cells do not hold); one act "
                    f"LSB at layer 1 input 0 moves the output by up to {g['max'][0]:.3g} LSB; a larger refine (finer "
                    "cells) lowers the projection's part (sweeps/pykan_import/README.md)")
    assert imp.warnings.index(line) == len(imp.warnings) - 1  # the out-of-grid fraction stays the first line
    assert from_pykan(model, x=x, refine=8).output["rms_error"] < 0.75 * o["rms_error"]  # finer cells


def test_a_template_gives_grid_and_formats(trained):
    model, x = trained
    template = PRESETS["kan-readout"].replace(widths=(2, 3, 1))
    imp = from_pykan(model, template, x=x)
    assert imp.spec == template and imp.grid["source"] == "template"
    c = template.formats.coef
    assert imp.theta.min() >= c.min_raw and imp.theta.max() <= c.max_raw
    with pytest.raises(ValueError, match=r"template: a KAN spec of widths \[2, 3, 1\]"):
        from_pykan(model, "kan-readout")
    narrow = template.replace(formats=Formats(coef="ap_fixed<8,1,RND_CONV,SAT>"))
    with pytest.raises(ValueError, match=r"template: formats.coef \(ap_fixed<8,1,RND_CONV,SAT>\) holds"):
        from_pykan(model, narrow)


def test_refusals_name_the_edge_or_layer():
    symbolic = _kan()
    symbolic.fix_symbolic(0, 1, 0, "sin", fit_params_bool=False, verbose=False, log_history=False)
    with pytest.raises(ValueError, match=r"edge \(layer 0, i=1, j=0\) is symbolic \(fix_symbolic 'sin'\)"):
        from_pykan(symbolic)
    mult = kan.KAN(width=[2, [1, 1], 1], grid=5, k=3, seed=0, auto_save=False)
    with pytest.raises(ValueError, match=r"layer 1: 1 multiplication node\(s\)"):
        from_pykan(mult)
    with pytest.raises(ValueError, match=r"spline order k=\[4\]; onchip builds one k of 1, 2, 3"):
        from_pykan(_kan(k=4))
    from_pykan(_kan(k=4), PRESETS["kan-readout"])  # a template of k = 3 is a projection target


def _copy(model, folder):
    # through a checkpoint in ``folder``, as model.copy() does in the working folder (a deepcopy
    # fails on the cached activations)
    model.saveckpt(str(folder / "copy"))
    return kan.MultKAN.loadckpt(str(folder / "copy"))


def _shifted(trained, folder):
    """The trained fixture with its hidden nodes moved off layer 1's grid, as training without
    update_grid or prune_input leave them: a copy, hidden node biases shifted."""
    model = _copy(trained[0], folder)
    with torch.no_grad():
        model.node_bias[0] += torch.tensor([0.3, -0.2, 0.25])
    return model


def test_hidden_values_beyond_the_pykan_grid_are_followed_and_reported(trained, tmp_path):
    model, x = _shifted(trained, tmp_path), trained[1]
    imp = from_pykan(model, x=x)
    out = imp.output
    assert out["outside_model_grid_fraction"] > 0.5  # measured: 0.734
    # pykan's edges beyond their grid (base function, spline tails) are fitted, not held flat
    assert out["rms_error_lsb"] < 1 and out["max_error_lsb"] < 4  # measured 0.51, 1.8; held flat: 32, 141
    # each hidden input's interval covers the values the data gives it
    hidden = pykan_hidden(model, x)
    r = imp.grid["reach"][1]
    assert np.all(np.array(r["lo"]) <= hidden.min(axis=0) + 1e-6) and np.all(hidden.max(axis=0) <= np.array(r["hi"]) + 1e-6)
    assert re.fullmatch(r"73\.4% of the 1000 data samples leave a pykan grid interval \(most: layer 1 input \d "
                        r"reaches .*\); the edges follow pykan's function over the range reached", imp.warnings[0])
    # without data a probe over the input grid is all the import sees, and it says so
    assert "give the inputs (x, --data)" in from_pykan(model).warnings[0]


def pykan_hidden(model, x):
    # pykan's own (float32) values of the hidden nodes
    with torch.no_grad():
        model(torch.tensor(x, dtype=torch.float32))
    return model.acts[1].numpy().astype(np.float64)


def test_derived_defaults_pass_their_own_check(trained, tmp_path):
    """Large outputs leave act few fractional bits: too few for the basis table in a fine grid."""
    model, x = _copy(trained[0], tmp_path), trained[1]
    with torch.no_grad():
        model.node_scale[1] *= 2000
    imp = from_pykan(model, x=x)
    act = imp.spec.formats.act
    assert imp.spec.basis_table_bits == 6 and act.frac_bits + imp.spec.cell_exp >= 6
    assert any(re.fullmatch(r"formats\.act widened from ap_fixed<16,\d+,RND_CONV,SAT> to ap_fixed<\d+,\d+,RND_CONV,"
                            r"SAT>: .* fewer than basis_table_bits=6", w) for w in imp.warnings), imp.warnings
    # a table asked for is resolved too: the formats widen rather than the spec failing
    wide = from_pykan(model, x=x, basis_table_bits=9)
    assert wide.spec.basis_table_bits == 9 and wide.spec.formats.input.frac_bits + wide.spec.cell_exp >= 9


def test_fitting_to_the_hardware_table_removes_its_truncation_bias(trained):
    """The table reads the basis at the left edge of a position bin: fitted to exact B-splines the
    edge lags by half a bin; fitted to the table's reading it does not."""
    model, x = trained
    spline = from_pykan(model, x=x, refine=1, basis_table_bits=6, fit_to="spline")
    table = from_pykan(model, x=x, refine=1, basis_table_bits=6)
    assert table.spec == spline.spec
    assert table.output["rms_error"] < 0.75 * spline.output["rms_error"]
    q = [sum(e["rms_error_quantized"] for e in imp.edges) for imp in (spline, table)]
    assert q[1] < 0.75 * q[0]
    with pytest.raises(ValueError, match=r"fit_to must be one of table, spline, got 'exact'"):
        from_pykan(model, fit_to="exact")


# -- saved models, `onchip import` and --theta ----------------------------------------------------
@pytest.fixture(scope="module")
def import_dir(tmp_path_factory):
    from onchip.cli import main

    tmp = tmp_path_factory.mktemp("pykan")
    model = _kan(grid_range=(-4, 4), base="silu")
    model.saveckpt(str(tmp / "readout"))
    assert main(["import", str(tmp / "readout"), "--out", str(tmp / "imp")]) == 0
    return model, tmp / "imp"


def test_import_command_writes_spec_theta_and_report(import_dir):
    _, out = import_dir
    spec = LearnerSpec.from_toml((out / "spec.toml").read_text())
    theta = np.load(out / "theta.npy")
    assert spec.name == "readout" and theta.dtype == np.int64 and theta.shape == (spec.parameter_count(),)
    again = from_pykan(load_pykan(out.parent / "readout_config.yml"))
    np.testing.assert_array_equal(theta, again.theta)
    report = json.loads((out / "report.json").read_text())
    assert report["framework"] == "pykan" and len(report["edges"]) == 2
    assert report["output"]["max_error"] == pytest.approx(again.output["max_error"])
    assert "| layer | i | j |" in (out / "report.md").read_text()


def _rom(verilog: str) -> list[int]:
    values = [(int(i), int(h, 16)) for i, h in re.findall(r"theta0_rom\[(\d+)\] = 16'h([0-9a-f]+);", verilog)]
    return [v - (1 << 16) if v >= 1 << 15 else v for _, v in sorted(values)]


def test_generate_and_vivado_reset_roms_hold_theta(import_dir, tmp_path):
    from onchip.cli import main

    _, out = import_dir
    theta = np.load(out / "theta.npy")
    args = ["--spec", str(out / "spec.toml"), "--theta", str(out / "theta.npy")]
    assert main(["generate", *args, "--out", str(tmp_path / "gen")]) == 0
    assert _rom((tmp_path / "gen" / "onchip_learner.v").read_text()) == theta.tolist()
    assert main(["vivado", *args, "--out", str(tmp_path / "viv")]) == 0
    verilog = "".join(p.read_text() for p in (tmp_path / "viv").rglob("*.v"))
    assert _rom(verilog) == theta.tolist()


def test_synth_passes_theta_to_the_core(import_dir, tmp_path, monkeypatch):
    from onchip.flow import steps, yosys

    _, out = import_dir
    theta = np.load(out / "theta.npy")
    seen = {}

    def fake_synthesize(verilog, top, family, workdir):
        seen["verilog"] = verilog
        return {k: 0 for k in ("lut", "ff", "dsp", "bram", "lutram", "carry")} | {
            "family": family, "bram_unit": "RAMB36", "cells": {}, "yosys_version": "fake"}

    monkeypatch.setattr(yosys, "synthesize", fake_synthesize)
    steps.synth(str(out / "spec.toml"), theta=theta)
    assert _rom(seen["verilog"]) == theta.tolist()


def test_first_rtl_prediction_of_the_imported_learner_equals_the_golden_model(import_dir):
    import onchip

    if "rtl" not in onchip.available_backends():
        pytest.skip("no Verilator toolchain")
    _, out = import_dir
    spec = LearnerSpec.from_toml((out / "spec.toml").read_text())
    theta = np.load(out / "theta.npy")
    x = np.array([[0.7, -1.3], [2.1, 0.4], [-3.5, 3.9]])
    want = GoldenLearner(spec, theta).predict(GoldenLearner(spec).quantize_inputs(x))
    assert np.any(want != GoldenLearner(spec).predict(GoldenLearner(spec).quantize_inputs(x)))  # theta matters
    got = onchip.Learner(spec, "rtl", theta=theta).predict_raw(GoldenLearner(spec).quantize_inputs(x))
    np.testing.assert_array_equal(got, want)


def test_run_and_verify_start_from_theta(import_dir, tmp_path):
    from onchip.cli import main
    from onchip.verification import verify

    _, out = import_dir
    spec, theta = LearnerSpec.from_toml((out / "spec.toml").read_text()), np.load(out / "theta.npy")
    args = ["--spec", str(out / "spec.toml"), "--samples", "300", "--quiet"]
    assert main(["run", *args, "--theta", str(out / "theta.npy"), "--out", str(tmp_path / "a")]) == 0
    assert main(["run", *args, "--out", str(tmp_path / "b")]) == 0
    with_theta, without = np.load(tmp_path / "a" / "predictions.npy"), np.load(tmp_path / "b" / "predictions.npy")
    g = GoldenLearner(spec, theta)
    x = onchip_stream_inputs(300)
    np.testing.assert_array_equal(with_theta[:1], g.predict(g.quantize_inputs(x[:1])))
    assert not np.array_equal(with_theta, without)
    report = verify(spec, samples=64, backends=("hls",), theta=theta)
    assert report.ok or report.count("skipped") == len(report.cases), report.summary()


def onchip_stream_inputs(n):
    import onchip

    return onchip.make_stream("qubit-readout", samples=n, seed=0).x


@pytest.mark.parametrize(
    "content, match",
    [
        (np.zeros(5, np.int64), r"--theta .*: theta must have shape \(38,\), got \(5,\)$"),
        (np.full(38, 0.5), r"--theta .*: value 0.5 at index 0 is not an integer representable in int64"),
        (np.full(38, 40000, np.int64), r"--theta .*: theta has raw value 40000 at index 0 outside formats.coef"),
        (np.zeros(38, bool), r"--theta .*: dtype bool; raw parameters are integers"),
    ],
)
def test_bad_theta_files_are_refused_in_one_line(import_dir, tmp_path, capsys, content, match):
    from onchip.cli import main

    _, out = import_dir
    path = tmp_path / "bad.npy"
    np.save(path, content)
    assert main(["generate", "--spec", str(out / "spec.toml"), "--theta", str(path),
                 "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err) and err.count("\n") == 1, err
    assert not (tmp_path / "g").exists()


def test_a_missing_pykan_names_its_extra():
    from onchip.extras import extra_for

    assert extra_for(ModuleNotFoundError(name="kan")) == "pykan"


def test_import_puts_the_out_of_grid_warning_first(trained, tmp_path, capsys):
    from onchip.cli import main

    model, x = _shifted(trained, tmp_path), trained[1]
    model.saveckpt(str(tmp_path / "shifted"))
    np.save(tmp_path / "x.npy", x)
    assert main(["import", str(tmp_path / "shifted"), "--data", str(tmp_path / "x.npy"),
                 "--out", str(tmp_path / "imp")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("warning: 73.4% of the 1000 data samples leave a pykan grid interval"), first
    report = json.loads((tmp_path / "imp" / "report.json").read_text())
    assert report["warnings"][0] == first.removeprefix("warning: ")
    assert (tmp_path / "imp" / "report.md").read_text().splitlines()[2] == "**Warning:** " + report["warnings"][0]


def test_a_checkpoint_pykan_cannot_load_is_refused_in_one_line(tmp_path, capsys):
    """pykan's saveckpt after prune_input writes the base function as a Python object that its own
    loadckpt (yaml.safe_load) refuses; the way out the message names loads."""
    from onchip.cli import main

    model = kan.KAN(width=[3, 2, 1], grid=3, k=3, seed=0, auto_save=False, ckpt_path=str(tmp_path / "ckpt"))
    pruned = model.prune_input(active_inputs=[0, 1])
    pruned.saveckpt(str(tmp_path / "pruned"))
    assert main(["import", str(tmp_path / "pruned"), "--out", str(tmp_path / "imp")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(r"pruned_config\.yml: pykan's own loadckpt cannot read it: 'base_fun_name' holds a Python "
                     r"object, not a name \(could not determine a constructor .*SiLU'\)", err), err
    assert not (tmp_path / "imp").exists()
    del pruned.base_fun_name
    pruned.base_fun_name = "silu"
    pruned.saveckpt(str(tmp_path / "pruned"))
    assert main(["import", str(tmp_path / "pruned"), "--out", str(tmp_path / "imp")]) == 0


def test_only_saveckpt_checkpoints_are_offered_and_other_files_refused(tmp_path, capsys):
    """pykan cannot torch.save a KAN (a lambda in its symbolic layers), so import does not offer it."""
    from onchip.cli import main

    try:
        main(["import", "--help"])
    except SystemExit:  # argparse's exit after printing the help
        pass
    assert "torch.save" not in (help_text := capsys.readouterr().out) and "saveckpt" in help_text
    with pytest.raises(Exception, match="pickle"):
        torch.save(_kan(), tmp_path / "whole.pt")
    torch.save(_kan().state_dict(), tmp_path / "state.pt")
    assert main(["import", str(tmp_path / "state.pt"), "--out", str(tmp_path / "imp")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"state\.pt: not a pykan checkpoint .*model\.saveckpt\(prefix\)", err) and err.count("\n") == 1


@pytest.mark.parametrize("config, state, message", [
    # truncated YAML: its own cause, not the base_fun_name advice
    ("a: [\n", "junk\n", r"b_config\.yml: not valid YAML \(line 2: expected the node content, but found "
                         r"'<stream end>'\)$"),
    # another key holding an object: no base_fun_name advice either
    ("width: [2, 1]\nfoo: !!python/object:torch.nn.SiLU {}\n", "junk\n",
     r"b_config\.yml: pykan's own loadckpt cannot read it: 'foo' holds a Python object, not a name "
     r"\(could not determine a constructor .*SiLU'\)$"),
    # a config pykan reads beside a state that is no torch file: the state file is named
    ("width: [2, 1]\n", "junk\n", r"b_state: not a torch checkpoint \(the parameters saveckpt writes with "
                                  r"torch.save; torch.load: "),
    ("width: [2, 1]\n", None, r"b_state: missing \(a pykan checkpoint is"),
])
def test_a_broken_checkpoint_names_the_file_at_fault_and_its_cause(tmp_path, capsys, config, state, message):
    from onchip.cli import main

    (tmp_path / "b_config.yml").write_text(config)
    if state is not None:
        (tmp_path / "b_state").write_text(state)
    assert main(["import", str(tmp_path / "b"), "--out", str(tmp_path / "imp")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(message, err.strip()), err
    assert "base_fun_name" not in err
    assert not (tmp_path / "imp").exists()
