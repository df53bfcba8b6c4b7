"""QKeras front end: QDense/QActivation networks -> MLP learners, bit-exact with QKeras' own pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("qkeras")  # TensorFlow with tf-keras: conftest sets TF_USE_LEGACY_KERAS=1
from onchip.frontends.qkeras import from_qkeras, modules, qkeras_outputs, show  # noqa: E402

tf, _ = modules()
from onchip.fixed import Fmt, quantize  # noqa: E402
from onchip.model import GoldenLearner  # noqa: E402
from qkeras import QActivation, QDense, quantized_bits, quantized_relu  # noqa: E402


def _mlp(seed=0, alpha=1, n_in=3):
    """n_in -> 6 -> 4 -> 2: 8-bit input and output, 6-bit kernels, 10-bit biases, 7-bit ReLUs; the
    second layer's ReLU is its QDense's own activation. Scaled weights make the output busy."""
    tf.keras.utils.set_random_seed(seed)
    inp = tf.keras.Input((n_in,))
    x = QActivation(quantized_bits(8, 2, alpha=1), name="q_in")(inp)
    x = QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=alpha), bias_quantizer=quantized_bits(10, 2, alpha=1),
               name="d1")(x)
    x = QActivation(quantized_relu(7, 2), name="r1")(x)
    x = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=alpha), bias_quantizer=quantized_bits(10, 2, alpha=1),
               activation=quantized_relu(7, 2), name="d2")(x)
    x = QDense(2, kernel_quantizer=quantized_bits(6, 1, alpha=alpha), bias_quantizer=quantized_bits(10, 2, alpha=1),
               name="d3")(x)
    out = QActivation(quantized_bits(8, 2, alpha=1), name="q_out")(x)
    model = tf.keras.Model(inp, out)
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, QDense):
            columns = 0.5 ** (np.arange(layer.kernel.shape[1]) % 3)  # channels of different ranges
            layer.kernel.assign((rng.uniform(-3.0, 3.0, layer.kernel.shape) * columns).astype(np.float32))
            layer.bias.assign(rng.uniform(-1.0, 1.0, layer.bias.shape).astype(np.float32))
    return model


def _inputs(n, n_in=3, seed=1):
    return (2.0 * np.random.default_rng(seed).normal(size=(n, n_in))).astype(np.float32)


def _golden(imp, x):
    golden = GoldenLearner(imp.spec, imp.theta)
    return golden.predict(golden.quantize_inputs(np.asarray(x, np.float64)))


@pytest.fixture(scope="module")
def imported():
    model = _mlp()
    return model, from_qkeras(model)


def test_golden_equals_qkeras_on_3000_inputs(imported):
    model, imp = imported
    x = _inputs(3000)
    want = qkeras_outputs(model, x, imp.spec.formats.act)
    act = imp.spec.formats.act
    assert len(np.unique(want)) > 100 and want.min() < 0 < want.max()  # busy, both signs
    assert act.min_raw in want or act.max_raw in want  # and saturating
    assert all(d["exact"] for d in imp.float32_exact)  # the case where QKeras' float32 pass is exact
    np.testing.assert_array_equal(_golden(imp, x), want)


def test_quantizers_map_onto_ap_fixed(imported):
    model, imp = imported
    f = imp.spec.formats
    assert imp.spec.kind == "mlp" and imp.spec.widths == (3, 6, 4, 2)
    assert str(f.input) == "ap_fixed<8,3,RND_CONV,SAT>"  # quantized_bits(8, 2): integer excludes the sign
    assert str(f.act) == "ap_fixed<8,3,RND_CONV,SAT>"  # quantized_relu(7, 2) plus a sign bit
    assert str(f.coef) == "ap_fixed<10,3,RND_CONV,SAT>"  # 6-bit kernels (2^-5) and 10-bit biases within +/-4
    assert [l["kind"] for l in imp.layers] == ["input", "dense", "relu", "dense", "relu", "dense", "output"]
    d1 = model.get_layer("d1")
    kernel = d1.kernel_quantizer_internal(d1.kernel).numpy()
    np.testing.assert_array_equal(f.coef.dequantize(imp.theta[:18]).reshape(6, 3), kernel.T)


def test_auto_po2_kernels_resolve_per_channel():
    model = _mlp(alpha="auto_po2")
    imp = from_qkeras(model)
    q = model.get_layer("d1").kernel_quantizer_internal
    exponents = np.log2(np.asarray(q.scale).reshape(-1))
    assert np.all(exponents == np.round(exponents)) and len(set(exponents)) > 1  # per-channel powers of two
    x = _inputs(3000, seed=5)
    np.testing.assert_array_equal(_golden(imp, x), qkeras_outputs(model, x, imp.spec.formats.act))


def test_a_wider_coef_keeps_the_outputs_and_a_narrow_one_is_refused(imported):
    model, imp = imported
    wide = from_qkeras(model, coef="ap_fixed<16,4,RND_CONV,SAT>")
    assert str(wide.spec.formats.coef) == "ap_fixed<16,4,RND_CONV,SAT>"
    x = _inputs(500, seed=2)
    np.testing.assert_array_equal(_golden(wide, x), _golden(imp, x))
    with pytest.raises(ValueError, match=r"coef: ap_fixed<8,3,RND_CONV,SAT> cannot hold the bias -?[0-9.]+ of layer 'd1' exactly"):
        from_qkeras(model, coef="ap_fixed<8,3,RND_CONV,SAT>")


def _wide(n_in=16):
    """16-bit inputs, kernels and activations over 16 inputs: accumulators of 33 bits, more than
    float32's 24-bit significand holds."""
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((n_in,))
    x = QActivation(quantized_bits(16, 3, alpha=1), name="q_in")(inp)
    x = QDense(16, kernel_quantizer=quantized_bits(16, 0, alpha=1), bias_quantizer=quantized_bits(16, 2, alpha=1),
               name="d1")(x)
    x = QActivation(quantized_relu(15, 3), name="r1")(x)
    x = QDense(2, kernel_quantizer=quantized_bits(16, 0, alpha=1), bias_quantizer=quantized_bits(16, 2, alpha=1),
               name="d2")(x)
    return tf.keras.Model(inp, QActivation(quantized_bits(16, 3, alpha=1), name="q_out")(x))


def test_wide_accumulators_differ_only_where_float32_rounding_moves_a_value_across_a_tie():
    """Where QKeras' pass is not exact: 16-bit data over 16 inputs need 33-bit sums, and TensorFlow
    sums in float32. Measured on 3000 inputs: 14 of 6000 outputs (0.23%) differ, by 1 LSB. The cause,
    checked layer by layer: the golden model equals QKeras' formulas evaluated exactly (float64
    holds every 33-bit sum), and every differing sample has a layer whose float32 pre-activation
    rounds, in that layer's quantizer, to another value than the exact one."""
    model = _wide()
    imp = from_qkeras(model)
    assert [d["accumulator_bits"] for d in imp.float32_exact] == [33, 33]
    assert not any(d["exact"] for d in imp.float32_exact)
    x = _inputs(3000, n_in=16)
    act = imp.spec.formats.act
    ours, theirs = _golden(imp, x), qkeras_outputs(model, x, act)
    diff = ours - theirs
    assert (np.count_nonzero(diff), np.abs(diff).max()) == (14, 1)  # docs/frontends-pretrained.md quotes these

    names = ["q_in", "d1", "r1", "d2", "q_out"]
    tapped = tf.keras.Model(model.inputs, [model.get_layer(n).output for n in names])(x)
    tf_out = {n: np.asarray(t.numpy(), np.float64) for n, t in zip(names, tapped)}
    flipped = np.zeros(len(x), bool)
    exact = tf_out["q_in"]  # the input quantizer is exact in float32
    for dense, source, quant, relu in (("d1", "q_in", "r1", True), ("d2", "r1", "q_out", False)):
        layer = model.get_layer(dense)
        w = layer.kernel_quantizer_internal(layer.kernel).numpy().astype(np.float64)
        b = layer.bias_quantizer_internal(layer.bias).numpy().astype(np.float64)

        def quantizer(z, relu=relu):  # QKeras' formula clip(round_half_even(z 2^F)) in exact arithmetic
            raw = quantize(z, act)
            return np.maximum(raw, 0) if relu else raw

        from_exact = quantizer(tf_out[source] @ w + b)  # QKeras' own inputs of the layer, summed exactly
        flipped |= np.any(from_exact != np.ldexp(tf_out[quant], act.frac_bits), axis=1)
        exact_raw = quantizer(exact @ w + b)
        exact = act.dequantize(exact_raw)
    np.testing.assert_array_equal(ours, exact_raw)
    assert np.all(flipped[np.any(diff != 0, axis=1)])


def _seq(*layers):
    model = tf.keras.Sequential([tf.keras.Input((3,)), *layers])
    return model


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: _seq(QActivation(quantized_bits(8, 2, alpha=1)),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0, alpha=0.3), bias_quantizer=quantized_bits(8, 2),
                             name="d"), QActivation(quantized_bits(8, 2))),
         r"layer 'd': kernel quantizer quantized_bits\(6,0,0,alpha=0.3\) has scale 0.3.*not a power of two"),
        (lambda: _seq(QActivation(quantized_bits(8, 2, alpha=1)),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0, alpha="auto"), bias_quantizer=quantized_bits(8, 2),
                             name="d"), QActivation(quantized_bits(8, 2))),
         r"layer 'd': kernel quantizer .*alpha='auto'.* a float scale"),
        (lambda: _seq(QActivation(quantized_bits(8, 2, symmetric=1), name="q"),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      QActivation(quantized_bits(8, 2))),
         r"layer 'q': quantizer quantized_bits\(8,2,1\) is symmetric \(symmetric=1\)"),
        (lambda: _seq(QActivation(quantized_bits(8, 2)),
                      QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      tf.keras.layers.BatchNormalization(name="bn"), QActivation(quantized_relu(7, 2)),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      QActivation(quantized_bits(8, 2))),
         r"layer 'bn' \(BatchNormalization\): batch normalisation that is not folded"),
        (lambda: _seq(QActivation(quantized_bits(8, 2)),
                      QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      tf.keras.layers.LeakyReLU(name="leaky"), QActivation(quantized_relu(7, 2)),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      QActivation(quantized_bits(8, 2))),
         r"layer 'leaky' \(LeakyReLU\) is an unsupported layer"),
        (lambda: _seq(QActivation(quantized_bits(8, 2)), tf.keras.layers.Dense(2, name="plain"),
                      QActivation(quantized_bits(8, 2))),
         r"layer 'plain' \(Dense\) is not quantized"),
        (lambda: _seq(QActivation(quantized_bits(8, 2)),
                      QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2),
                             activation="tanh", name="d")),
         r"layer 'd' \(QDense\): activation 'tanh' is not quantized and not a ReLU"),
        (lambda: _seq(QActivation(quantized_bits(8, 2)),
                      QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      tf.keras.layers.ReLU(max_value=1.0, name="capped"),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2))),
         r"layer 'capped' \(ReLU\): max_value=1; only the plain ReLU"),
        (lambda: _seq(QActivation(quantized_bits(8, 2)),
                      QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      QActivation(quantized_relu(7, 2), name="r0"),
                      QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      QActivation(quantized_relu(5, 2), name="r"),
                      QDense(2, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                      QActivation(quantized_bits(8, 2))),
         r"layer 'r0': quantizer quantized_relu\(7,2\) gives the activation format ap_fixed<8,3,RND_CONV,SAT>, which "
         r"differs from ap_fixed<6,3,RND_CONV,SAT> of the quantizer quantized_relu\(5,2\) of layer 'r'"),
    ],
)
def test_refusals_name_the_layer_the_quantizer_and_the_reason(build, match):
    with pytest.raises(ValueError, match=match):
        from_qkeras(build())


@pytest.mark.parametrize("hidden", ["relu", "quantized_relu"])
def test_an_output_quantizer_unlike_the_hidden_act_becomes_the_output_format(hidden):
    """The output quantizer quantized_bits(8, 2) gives the output format beside the hidden act (an
    unquantized ReLU's exact format, or quantized_relu(5, 2)'s): bit-exact with QKeras."""
    tf.keras.utils.set_random_seed(0)
    first = (QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2), activation="relu",
                    name="d") if hidden == "relu" else
             QDense(4, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2), name="d"))
    after = [] if hidden == "relu" else [QActivation(quantized_relu(5, 2), name="r")]
    model = _seq(QActivation(quantized_bits(8, 2)), first, *after,
                 QDense(2, kernel_quantizer=quantized_bits(6, 0), bias_quantizer=quantized_bits(8, 2)),
                 QActivation(quantized_bits(8, 2), name="q_out"))
    imp = from_qkeras(model)
    f = imp.spec.formats
    assert str(f.output) == "ap_fixed<8,3,RND_CONV,SAT>" and f.act != f.output
    assert hidden == "relu" or str(f.act) == "ap_fixed<6,3,RND_CONV,SAT>"
    x = _inputs(2000)
    want = qkeras_outputs(model, x, f.y)
    assert f.y.min_raw in want or f.y.max_raw in want  # saturating in the output format
    np.testing.assert_array_equal(_golden(imp, x), want)


def test_hls4ml_converter_agrees_once_its_two_rounding_differences_are_set(imported, tmp_path):
    """hls4ml's QKeras converter (keras v2 path) against ours, on inputs and near-ties of the input grid.

    With hls4ml's defaults two things differ, both measured here: (1) its input layer has
    ``default_precision`` fixed<16,6,TRN,WRAP>, so an input is truncated to 10 fractional bits
    before q_in rounds it to 5 (double rounding, as on the brevitas path); (2) the output
    QActivation(quantized_bits) after the last QDense is merged into that layer (hls4ml's
    MergeLinearActivation) and its precision is lost: the output is the exact sum, neither rounded
    nor saturated into act. Setting the input layer's result to q_in's format and the last
    QDense's result to q_out's makes hls4ml's outputs equal ours (and QKeras') exactly.
    """
    pytest.importorskip("hls4ml")
    from onchip.frontends import hls4ml_bridge

    model, imp = imported
    rng = np.random.default_rng(4)
    x = (np.round(rng.uniform(-3, 3, (2000, 3)) * 2**12) / 2**12).astype(np.float32)
    ours = _golden(imp, x)
    act = imp.spec.formats.act
    default = hls4ml_bridge.convert_qkeras(model, tmp_path / "default")
    assert "q_out" not in hls4ml_bridge.result_types(default)  # merged away
    got = np.asarray(default.predict(np.ascontiguousarray(x)), np.float64).reshape(ours.shape)
    assert not np.allclose(np.ldexp(got, act.frac_bits), np.round(np.ldexp(got, act.frac_bits)))  # off the grid
    # the figures docs/frontends-pretrained.md quotes: outputs differing, and by how many LSB at most, as
    # hls4ml gives them and rounded into act
    off = np.abs(np.ldexp(got, act.frac_bits) - ours)
    rounded = np.abs(quantize(got, act) - ours)
    assert (np.count_nonzero(off), int(np.round(off.max()))) == (3778, 133)
    assert (np.count_nonzero(rounded), int(rounded.max())) == (49, 7)

    fixed = hls4ml_bridge.convert_qkeras(model, tmp_path / "fixed", precision={
        model.layers[0].name: imp.spec.formats.input.cpp().replace("ap_", "").replace("AP_", ""),
        "d3": act.cpp().replace("ap_", "").replace("AP_", "")})
    report = hls4ml_bridge.compare(fixed, x, ours, act.lsb)
    assert report["differing"] == 0 and report["samples"] == 2000


def test_import_command_writes_spec_theta_and_report(imported, tmp_path, capsys):
    from onchip.cli import main
    from onchip.spec import LearnerSpec

    model, imp = imported
    path = tmp_path / "net.h5"
    model.save(path)
    out = tmp_path / "imp"
    assert main(["import", str(path), "--out", str(out)]) == 0
    spec = LearnerSpec.from_toml((out / "spec.toml").read_text())
    assert spec.replace(name=imp.spec.name) == imp.spec and spec.name == "net"
    np.testing.assert_array_equal(np.load(out / "theta.npy"), imp.theta)
    report = json.loads((out / "report.json").read_text())
    check = report["check"]
    assert report["framework"] == "qkeras" and check["samples"] == 3000 and check["differing"] == 0
    assert "bit-exact" in (out / "report.md").read_text()
    assert main(["import", str(path), "--out", str(tmp_path / "x"), "--template", "kan-readout"]) == 2
    assert "--template applies to pykan models" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_missing_qkeras_names_its_extra():
    from onchip.extras import extra_for

    for package in ("qkeras", "tensorflow", "tf_keras"):
        assert extra_for(ModuleNotFoundError(name=package)) == "qkeras"


# -- the form of the hls4ml tutorials: no input quantizer, no output quantizer --------------------

def _tutorial(seed=0, hidden="quantized_relu"):
    """3 -> 8 -> 4 -> 2 as QKeras' and hls4ml's examples write it: QDense -> ReLU -> ... -> QDense,
    no input or output quantizer, a Dropout and an Activation('linear') in between. ``hidden``:
    "quantized_relu" (QActivation(quantized_relu(6, 2))), or unquantized: QDense's
    activation="relu" then a Keras ReLU layer ("relu"), QActivation("relu") ("string") or
    Activation("relu") ("activation")."""
    tf.keras.utils.set_random_seed(seed)
    kq, bq = quantized_bits(4, 0, alpha=1), quantized_bits(4, 0, alpha=1)
    inp = tf.keras.Input((3,))
    if hidden != "quantized_relu":
        x = QDense(8, kernel_quantizer=kq, bias_quantizer=bq, activation="relu", name="d1")(inp)
    else:
        x = QDense(8, kernel_quantizer=kq, bias_quantizer=bq, name="d1")(inp)
        x = QActivation(quantized_relu(6, 2), name="r1")(x)
    x = tf.keras.layers.Dropout(0.2, name="drop")(x)
    x = QDense(4, kernel_quantizer=kq, bias_quantizer=bq, name="d2")(x)
    second = {"relu": lambda: tf.keras.layers.ReLU(name="r2"), "string": lambda: QActivation("relu", name="r2"),
              "activation": lambda: tf.keras.layers.Activation("relu", name="r2"),
              "quantized_relu": lambda: QActivation(quantized_relu(6, 2), name="r2")}
    x = second[hidden]()(x)
    x = tf.keras.layers.Activation("linear", name="lin")(x)
    model = tf.keras.Model(inp, QDense(2, kernel_quantizer=kq, bias_quantizer=bq, name="d3")(x))
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, QDense):
            layer.kernel.assign(rng.uniform(-1.0, 1.0, layer.kernel.shape).astype(np.float32))
            layer.bias.assign(rng.uniform(-0.5, 0.5, layer.bias.shape).astype(np.float32))
    return model


TUTORIAL_INPUT = "ap_fixed<8,3,RND_CONV,SAT>"


def _on_grid(n, fmt=TUTORIAL_INPUT, seed=3):
    f = Fmt.parse(fmt)
    return f.dequantize(np.random.default_rng(seed).integers(f.min_raw, f.max_raw + 1, (n, 3)))


@pytest.mark.parametrize("hidden", ["relu", "string", "activation"])
def test_unquantized_relus_and_output_are_held_exactly_and_identity_layers_skipped(hidden):
    model = _tutorial(hidden=hidden)
    imp = from_qkeras(model, input_format=TUTORIAL_INPUT)
    act = imp.spec.formats.act
    assert str(imp.spec.formats.input) == TUTORIAL_INPUT and imp.spec.widths == (3, 8, 4, 2)
    # 4-bit kernels (3 fractional bits) over three layers on 5-bit inputs: the output's exact grid is 2^-14
    assert act.frac_bits == 5 + 3 * 3 and act.width <= 24  # float32 holds every value
    assert all(d["exact"] for d in imp.float32_exact)
    assert [s["layer"] for s in imp.skipped] == ["drop", "lin"]
    assert any("skipped: drop (Dropout), lin (Activation(linear))" in n for n in imp.notes)
    assert any(n.startswith("layer 'd1': the unquantized ReLU is exact in act") for n in imp.notes)
    x = _on_grid(3000)
    want = qkeras_outputs(model, x, act)  # model.predict itself: refuses outputs off act's grid
    assert len(np.unique(want)) > 1000 and want.min() < 0 < want.max()
    np.testing.assert_array_equal(_golden(imp, x), want)


def test_the_tutorial_form_is_exact_in_the_last_sums_own_output_format():
    """Hidden quantized ReLUs fix act; the unquantized output takes the exact format of the last
    layer's sum (formats.output, no rounding), so the learner equals model.predict itself on inputs on
    the input format's grid. output_format still overrides it, rounding (not exact)."""
    model = _tutorial()
    imp = from_qkeras(model, input_format=TUTORIAL_INPUT)
    f = imp.spec.formats
    assert str(f.act) == "ap_fixed<7,3,RND_CONV,SAT>" and not imp.output_rounded and not imp.input_quantized
    # d3's sum: 4-bit kernels and biases (3 fractional bits) on act's 2^-4 grid
    assert f.output is not None and f.output.frac_bits == 4 + 3 and f.y is f.output
    assert any("its unquantized output is exact in its own output format" in n for n in imp.notes)
    assert imp.layers[-1] == {"layer": "d3", "kind": "output", "quantizer": "none", "format": str(f.output)}
    x = _on_grid(3000)
    y = model.predict(x.astype(np.float32), verbose=0).astype(np.float64)
    raw = np.ldexp(y, f.output.frac_bits)
    assert np.array_equal(raw, np.round(raw))  # model.predict's outputs lie on the output format's grid
    assert not np.array_equal(quantize(y, f.act), np.ldexp(y, f.act.frac_bits))  # act would round them
    np.testing.assert_array_equal(_golden(imp, x), raw.astype(np.int64))
    assert "output = " in imp.spec.to_toml()
    rounded = from_qkeras(model, input_format=TUTORIAL_INPUT, output_format="ap_fixed<7,3,RND_CONV,SAT>")
    assert rounded.output_rounded and rounded.spec.formats.output is None  # act's own format: nothing to add
    np.testing.assert_array_equal(_golden(rounded, x), quantize(y, rounded.spec.formats.y))
    with pytest.raises(ValueError, match=r"output_format: ap_fixed<9,3,RND_CONV,SAT> differs from "
                                         r"ap_fixed<8,3,RND_CONV,SAT>, the format of the output quantizer"):
        from_qkeras(_mlp(), output_format="ap_fixed<9,3,RND_CONV,SAT>")


def test_an_input_format_is_given_derived_from_data_or_asked_for():
    model = _tutorial(hidden="relu")
    with pytest.raises(ValueError, match=r"model: no input quantizer \(its first layer is QDense 'd1'\): give the "
                                         r"input format \(input_format=, onchip import --input-format\)"):
        from_qkeras(model)
    data = np.random.default_rng(0).uniform(-2.7, 1.9, (200, 3))
    imp = from_qkeras(model, data=data)
    assert str(imp.spec.formats.input) == "ap_fixed<16,3,RND_CONV,SAT>"  # [-4, 4): the fewest integer bits
    assert any(n.startswith("input format ap_fixed<16,3,RND_CONV,SAT>: derived") for n in imp.notes)
    with pytest.raises(ValueError, match=r"input_format: ap_fixed<8,2,RND_CONV,SAT> differs from "
                                         r"ap_fixed<8,3,RND_CONV,SAT>, the format of the input quantizer"):
        from_qkeras(_mlp(), input_format="ap_fixed<8,2,RND_CONV,SAT>")


def test_an_unquantized_relu_wider_than_32_bits_is_refused():
    tf.keras.utils.set_random_seed(0)
    kq = quantized_bits(12, 0, alpha=1)
    model = _seq(QDense(3, kernel_quantizer=kq, bias_quantizer=kq, activation="relu", name="d1"),
                 QDense(3, kernel_quantizer=kq, bias_quantizer=kq, activation="relu", name="d2"),
                 QDense(1, kernel_quantizer=kq, bias_quantizer=kq, name="d3"))
    with pytest.raises(ValueError, match=r"layer 'd2': the unquantized ReLU needs ap_fixed<(3[3-9]|[4-9]\d),\d+> to be "
                                         r"exact \(values in \[0, [0-9.]+\] on a 2\^-\d+ grid\), \d+ bits \(more than 32\)"):
        from_qkeras(model, input_format="ap_fixed<16,4,RND_CONV,SAT>")


# -- every quantizer QKeras exports: converted bit-exactly, or refused naming layer, quantizer, reason -----

def _exported_quantizers():
    import inspect

    import qkeras.quantizers as qq

    classes = [c for _, c in sorted(vars(qq).items()) if inspect.isclass(c) and issubclass(c, qq.BaseQuantizer)
               and c is not qq.BaseQuantizer and c.__module__ == qq.__name__]
    assert len(classes) >= 13  # QKeras 0.9.0 exports 13
    return [c() for c in classes] + [quantized_bits(1, 0, alpha=1), quantized_bits(4, 0, alpha="auto_po2"),
                                     quantized_relu(5, 1)]


def _walk_model(role, q):
    """q_in -> d1 -> act -> d2 -> q_out with ``q`` as d1's kernel or bias quantizer, or as ``act``."""
    default = quantized_bits(5, 0, alpha=1)
    kernel, bias = (q, default) if role == "kernel" else (default, q) if role == "bias" else (default, default)
    act = q if role == "activation" else quantized_relu(5, 1)
    out = quantized_bits(int(act.bits) + 1, int(act.integer)) if type(act).__name__ == "quantized_relu" else \
        quantized_bits(7, 2)
    tf.keras.utils.set_random_seed(1)
    model = _seq(QActivation(quantized_bits(8, 2, alpha=1), name="q_in"),
                 QDense(4, kernel_quantizer=kernel, bias_quantizer=bias, name="d1"),
                 QActivation(act, name="act"),
                 QDense(2, kernel_quantizer=default, bias_quantizer=default, name="d2"),
                 QActivation(out, name="q_out"))
    rng = np.random.default_rng(2)
    for layer in model.layers:
        if isinstance(layer, QDense):
            layer.kernel.assign(rng.uniform(-1.5, 1.5, layer.kernel.shape).astype(np.float32))
            layer.bias.assign(rng.uniform(-1.0, 1.0, layer.bias.shape).astype(np.float32))
    return model


@pytest.mark.parametrize("role", ["kernel", "bias", "activation"])
def test_every_exported_quantizer_converts_exactly_or_is_refused_by_name(role):
    from onchip.model.golden import check_parameters

    layer = "d1" if role != "activation" else "act"
    x = _inputs(500)
    outcome = {}
    for q in _exported_quantizers():
        kind = type(q).__name__
        model = _walk_model(role, q)
        try:
            imp = from_qkeras(model)
        except ValueError as exc:
            message = str(exc)
            assert f"layer {layer!r}" in message and kind in message and len(message.splitlines()) == 1, message
            outcome[(kind, show(q))] = "refused"
            continue
        check_parameters(imp.spec, imp.theta)  # never a theta its own spec refuses
        np.testing.assert_array_equal(_golden(imp, x), qkeras_outputs(model, x, imp.spec.formats.act))
        outcome[(kind, show(q))] = "exact"
    mapped = "quantized_relu" if role == "activation" else "quantized_bits"
    for (kind, shown), result in outcome.items():
        if kind != mapped:
            assert result == "refused", shown
        elif not (role == "bias" and "auto_po2" in shown):  # a per-channel scale of a bias may be refused
            assert result == "exact", shown
    assert sum(kind == mapped for kind, _ in outcome) >= 2


def test_a_binary_kernel_maps_onto_two_integer_bits():
    model = _walk_model("kernel", quantized_bits(1, 0, alpha=1))
    imp = from_qkeras(model)
    w = imp.spec.formats.coef.dequantize(imp.theta[:12])
    assert set(np.unique(w)) == {-1.0, 1.0} and imp.spec.formats.coef.int_bits >= 2


def test_a_refused_quantizer_is_one_line_and_exit_2_from_the_command(tmp_path, capsys):
    from onchip.cli import main
    from qkeras import quantized_tanh

    path = tmp_path / "tanh.h5"
    _walk_model("activation", quantized_tanh(4)).save(path)
    assert main(["import", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "layer 'act': the relu activation is quantized_tanh(4) (quantized_tanh)" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_tutorial_form_imports_from_the_command_and_its_verilog_verifies_with_theta(tmp_path, capsys):
    """The done-criterion, end to end: a tutorial-form .h5 (no input or output quantizer), imported
    with a stated input format and no output format (the last sum's exact one), equals QKeras on the
    probe; `onchip verify --theta` then checks the generated Verilog, reset to that theta, against the
    golden model."""
    import onchip
    from onchip.cli import main

    if "rtl" not in onchip.available_backends():
        pytest.skip("no Verilator toolchain")
    path, out = tmp_path / "tutorial.h5", tmp_path / "imp"
    _tutorial().save(path)
    assert main(["import", str(path), "--out", str(out), "--input-format", TUTORIAL_INPUT]) == 0
    report = json.loads((out / "report.json").read_text())
    check = report["check"]
    assert check["differing"] == 0 and check["inputs_on_grid"] and not check["outputs_rounded"]
    assert "output" in report["spec"]["formats"] and not report.get("warnings")  # exact: its own output format
    assert [s["layer"] for s in report["skipped"]] == ["drop", "lin"]
    printed = capsys.readouterr().out
    assert "identity at inference, skipped: drop (Dropout), lin (Activation(linear))" in printed
    assert main(["import", str(path), "--out", str(tmp_path / "no")]) == 2
    assert "--input-format" in capsys.readouterr().err and not (tmp_path / "no").exists()
    assert main(["verify", "--spec", str(out / "spec.toml"), "--theta", str(out / "theta.npy"), "--backends", "rtl",
                 "--samples", "64"]) == 0


def test_batchnorm_is_refused_unless_folded_and_then_its_error_is_measured(tmp_path, capsys):
    from onchip.cli import main

    tf.keras.utils.set_random_seed(0)
    model = _seq(QActivation(quantized_bits(8, 2, alpha=1), name="q_in"),
                 QDense(4, kernel_quantizer=quantized_bits(8, 2, alpha=1), bias_quantizer=quantized_bits(8, 2, alpha=1),
                        name="d1"),
                 tf.keras.layers.BatchNormalization(name="bn"), QActivation(quantized_relu(7, 2), name="r1"),
                 QDense(2, kernel_quantizer=quantized_bits(8, 2, alpha=1), bias_quantizer=quantized_bits(8, 2, alpha=1),
                        name="d2"),
                 QActivation(quantized_bits(8, 2, alpha=1), name="q_out"))
    bn = model.get_layer("bn")
    rng = np.random.default_rng(0)
    bn.set_weights([rng.uniform(0.5, 1.5, 4), rng.uniform(-0.5, 0.5, 4), rng.uniform(-0.5, 0.5, 4),
                    rng.uniform(0.5, 2.0, 4)])  # gamma, beta, moving mean, moving variance
    with pytest.raises(ValueError, match=r"layer 'bn' \(BatchNormalization\): batch normalisation that is not folded"):
        from_qkeras(model)
    imp = from_qkeras(model, fold_batchnorm=True)
    assert imp.folded == ({"layer": "bn", "into": "d1"},) and any("not exact" in n for n in imp.notes)
    d1 = model.get_layer("d1")  # the folded kernel differs from the trained one: the normalisation is in it
    assert not np.array_equal(imp.spec.formats.coef.dequantize(imp.theta[:12]).reshape(4, 3),
                              d1.kernel_quantizer_internal(d1.kernel).numpy().T)
    x = _inputs(2000)
    diff = np.abs(_golden(imp, x) - qkeras_outputs(model, x, imp.spec.formats.act))
    assert np.count_nonzero(diff) > 0  # not equal by construction
    path, data = tmp_path / "bn.h5", tmp_path / "x.npy"
    model.save(path)
    np.save(data, x.astype(np.float64))
    assert main(["import", str(path), "--out", str(tmp_path / "out"), "--fold-batchnorm", "--data", str(data)]) == 0
    check = json.loads((tmp_path / "out" / "report.json").read_text())["check"]
    assert (check["differing"], check["max_lsb"]) == (np.count_nonzero(diff), diff.max())  # the measured error
    text = (tmp_path / "out" / "report.md").read_text()
    assert "Batch normalisation is folded: the import is not exact" in text and "(bit-exact)" not in text


def test_a_rounded_output_states_its_error_against_qkeras_first(tmp_path, capsys):
    """The tutorial form's unquantized output, rounded into the one act format (--output-format), is
    not exact: the import says so first, with the RMS and largest difference from QKeras' own output
    in act LSB, as measured here from model.predict and the golden model; an exact import says nothing."""
    from onchip.cli import main
    from onchip.frontends.qkeras import rounded_output_error

    model = _tutorial()
    path, out = tmp_path / "tutorial.h5", tmp_path / "imp"
    model.save(path)
    x = _on_grid(2000)
    np.save(tmp_path / "x.npy", x)
    assert main(["import", str(path), "--out", str(out), "--input-format", TUTORIAL_INPUT,
                 "--output-format", "ap_fixed<7,3,RND_CONV,SAT>", "--data", str(tmp_path / "x.npy")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    imp = from_qkeras(model, input_format=TUTORIAL_INPUT, output_format="ap_fixed<7,3,RND_CONV,SAT>")
    diff = _golden(imp, x) - model.predict(x.astype(np.float32), verbose=0).astype(np.float64) * 2.0**imp.spec.formats.act.frac_bits
    rms, worst = float(np.sqrt(np.mean(diff ** 2))), float(np.abs(diff).max())
    assert 0 < rms and report["check"]["output_error"]["rms_lsb"] == pytest.approx(rms)
    assert report["check"]["output_error"]["max_lsb"] == pytest.approx(worst)
    first = printed.splitlines()[0]
    assert first.startswith("warning: not exact: the unquantized output of 'd3' is rounded into "
                            "ap_fixed<7,3,RND_CONV,SAT>") and f"RMS {rms:.3f} LSB, max {worst:.3f} LSB" in first
    assert report["warnings"] == [first.removeprefix("warning: ")]
    assert "**Warning:** not exact" in (out / "report.md").read_text()
    exact = from_qkeras(_tutorial(hidden="relu"), input_format=TUTORIAL_INPUT)
    assert rounded_output_error(model, exact, x, _golden(exact, x)) is None
