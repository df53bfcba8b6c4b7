"""pykan front end: KANs projected onto onchip's uniform grid; the --theta flag of the commands."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
kan = pytest.importorskip("kan")

from onchip.frontends.pykan import from_pykan, load_pykan, pykan_outputs  # noqa: E402
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
    imp = from_pykan(model)
    spec = imp.spec
    assert (spec.grid_size, spec.spline_order, spec.grid_range) == (8, 3, (-2.0, 2.0))
    assert imp.grid["model_grids"][0]["uniform"] and imp.grid["source"] == "model"
    np.testing.assert_allclose(imp.coef, _pykan_coef(model.act_fun[0]).reshape(-1), rtol=0, atol=1e-12)
    assert max(e["max_error"] for e in imp.edges) < 1e-12
    assert imp.output["float_max_error"] < 1e-12  # the float spline equals pykan's network
    # quantization is what remains: coefficients and the 64-entry basis table of the hardware
    assert 0 < imp.output["max_error"] < 0.05 and imp.output["clamped_fraction"] == 0.0


def test_node_and_subnode_affine_terms_fold_into_the_coefficients():
    model = _kan(width=(2, 2))
    with torch.no_grad():
        model.node_scale[0].copy_(torch.tensor([1.5, -0.5]))
        model.node_bias[0].copy_(torch.tensor([0.25, -1.0]))
        model.subnode_scale[0].copy_(torch.tensor([0.5, 2.0]))
        model.subnode_bias[0].copy_(torch.tensor([-0.125, 0.375]))
    imp = from_pykan(model)
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
    assert lo <= x.min() and x.max() < hi and imp.grid["cell_width"] == 0.5  # 2^floor(log2(3 / 5))
    assert len(imp.edges) == 2 * 3 + 3 * 1
    for e in imp.edges:  # errors in function units and act LSB, consistent with each other
        assert e["rms_error"] <= e["max_error"] and e["max_error_lsb"] == pytest.approx(
            e["max_error"] / imp.spec.formats.act.lsb)
    out = imp.output
    assert out["source"] == "data" and out["samples"] == 1000 and out["clamped_fraction"] == 0.0
    assert out["rms_error"] < 0.002 and out["max_error"] < 0.005  # measured: 0.00054, 0.0018
    # each hidden node is mapped from its pykan grid interval onto the learner's grid range
    assert len(imp.grid["hidden_maps"]) == 1 and len(imp.grid["hidden_maps"][0]["scale"]) == 3


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
        (np.zeros(5, np.int64), r"--theta .*: shape \(5,\), the spec's 22 parameters need \(22,\)"),
        (np.full(22, 0.5), r"--theta .*: value 0.5 at index 0 is not an integer representable in int64"),
        (np.full(22, 40000, np.int64), r"--theta .*: value 40000 at index 0 is outside formats.coef"),
        (np.zeros(22, bool), r"--theta .*: dtype bool; raw parameters are integers"),
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


def test_run_refuses_theta_without_spec(tmp_path, capsys):
    from onchip.cli import main

    np.save(tmp_path / "t.npy", np.zeros(22, np.int64))
    assert main(["run", "--theta", str(tmp_path / "t.npy"), "--out", str(tmp_path / "r")]) == 2
    assert "--theta" in (err := capsys.readouterr().err) and "needs --spec" in err


def test_a_missing_pykan_names_its_extra():
    from onchip.extras import extra_for

    assert extra_for(ModuleNotFoundError(name="kan")) == "pykan"
