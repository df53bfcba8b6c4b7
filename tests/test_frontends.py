"""Front ends: brevitas networks -> onchip learners, and the hls4ml bridge."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
qnn = pytest.importorskip("brevitas.nn")

from brevitas.inject.enum import ScalingImplType  # noqa: E402
from brevitas.quant import (  # noqa: E402
    Int8ActPerTensorFixedPoint,
    Int8ActPerTensorFloat,
    Int8WeightPerTensorFixedPoint,
    Int16Bias,
    Uint8ActPerTensorFixedPoint,
)
from torch import nn  # noqa: E402

from onchip.fixed import quantize  # noqa: E402
from onchip.frontends.brevitas import brevitas_outputs, from_brevitas  # noqa: E402
from onchip.hls import HlsLearner  # noqa: E402
from onchip.model import GoldenLearner  # noqa: E402

# constant power-of-two activation scales: 4 / 2^(b-1) (signed), 4 / 2^b (unsigned)
_CONST = dict(scaling_impl_type=ScalingImplType.CONST, scaling_const=4.0, max_val=4.0, return_quant_tensor=True)


def _identity(bits=8, quant=Int8ActPerTensorFixedPoint, scale_const=4.0):
    kw = {**_CONST, "scaling_const": scale_const, "max_val": scale_const}
    return qnn.QuantIdentity(act_quant=quant, bit_width=bits, min_val=-scale_const, **kw)


def _relu(bits=7):
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPoint, bit_width=bits, **_CONST)


def _linear(a, b):
    return qnn.QuantLinear(a, b, bias=True, weight_quant=Int8WeightPerTensorFixedPoint, weight_bit_width=6,
                           bias_quant=Int16Bias, return_quant_tensor=True)


def _net(*layers):
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for m in model:
            if isinstance(m, qnn.QuantLinear):
                m.bias.uniform_(-0.5, 0.5)
                m.weight.mul_(3.0)
    return model.eval()


def _mlp(seed=0):
    """3 -> 6 -> 4 -> 2: 8-bit input, 6-bit weights, 16-bit biases, 7-bit ReLUs, 8-bit output."""
    torch.manual_seed(seed)  # before the layers are built: their initial weights
    return _net(_identity(), _linear(3, 6), _relu(), _linear(6, 4), _relu(), _linear(4, 2), _identity())


def _inputs(n, seed):
    return (2.0 * np.random.default_rng(seed).normal(size=(n, 3))).astype(np.float32)


@pytest.fixture(scope="module")
def imported():
    model = _mlp()
    return model, from_brevitas(model)


def test_brevitas_integers_equal_golden_and_hls(imported):
    model, imp = imported
    x = _inputs(3000, 1)
    want = brevitas_outputs(model, x)
    assert len(np.unique(want)) > 100  # a busy output, saturating at both ends
    act = imp.spec.formats.act
    assert act.min_raw in want or act.max_raw in want
    golden = GoldenLearner(imp.spec, imp.theta)
    x_raw = golden.quantize_inputs(x.astype(np.float64))
    np.testing.assert_array_equal(golden.predict(x_raw), want)
    hls_preds, hls_theta = HlsLearner(imp.spec, imp.theta).run(x_raw, None, learn=False)
    np.testing.assert_array_equal(hls_preds, want)
    np.testing.assert_array_equal(hls_theta, imp.theta)


def test_imported_learner_trains_identically_on_golden_and_hls(imported):
    _, imp = imported
    rng = np.random.default_rng(2)
    golden = GoldenLearner(imp.spec, imp.theta)
    x_raw = golden.quantize_inputs(_inputs(2000, 3).astype(np.float64))
    y_raw = golden.quantize_targets(rng.uniform(-2, 2, (2000, 2)))
    want = golden.run(x_raw, y_raw)
    golden.flush()
    got, theta = HlsLearner(imp.spec, imp.theta).run(x_raw, y_raw)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(theta, golden.theta)
    assert not np.array_equal(theta, imp.theta)


def test_import_layout_and_formats(imported):
    model, imp = imported
    spec = imp.spec
    assert spec.kind == "mlp" and spec.widths == (3, 6, 4, 2)
    assert str(spec.formats.input) == "ap_fixed<8,3,RND_CONV,SAT>"  # 8 bits at scale 2^-5
    assert str(spec.formats.act) == "ap_fixed<8,3,RND_CONV,SAT>"  # 7-bit ReLU at 2^-5, plus sign
    # the raw parameters are brevitas' integers, rescaled onto the coef grid
    lin = model[1]
    qw = lin.quant_weight()
    f = spec.formats.coef.frac_bits
    w_raw = imp.theta[: 18].reshape(6, 3)
    np.testing.assert_array_equal(w_raw, qw.int().numpy().astype(np.int64) * round(float(qw.scale) * 2**f))
    np.testing.assert_allclose(spec.formats.coef.dequantize(w_raw), qw.value.detach().numpy(), rtol=0, atol=0)


@pytest.mark.parametrize(
    "layers, match",
    [
        (lambda: (_identity(quant=Int8ActPerTensorFloat, scale_const=3.0), _linear(3, 2), _identity()),
         "layer '0'.*not a power of two"),
        (lambda: (_identity(), _linear(3, 4), nn.Tanh(), _linear(4, 2), _identity()),
         "layer '2' \\(Tanh\\) is an activation without a fixed-point equivalent"),
        (lambda: (_identity(), _linear(3, 4), _relu(), nn.Dropout(0.1), _linear(4, 2), _identity()),
         "layer '3' \\(Dropout\\) is an unsupported layer"),
        (lambda: (_identity(), _linear(3, 4), _relu(bits=5), _linear(4, 2), _identity()),
         "layer '2': activation format ap_fixed<6,3,RND_CONV,SAT> differs"),
    ],
)
def test_refused_networks_name_the_layer(layers, match):
    with pytest.raises(ValueError, match=match):
        from_brevitas(_net(*layers()))


def test_hls4ml_bridge_differs_only_by_input_double_rounding(imported, tmp_path):
    """hls4ml (QONNX route, default precision fixed<16,6>) against ours.

    Where hls4ml's rounding differs: its input layer has type ``default_precision``
    = ap_fixed<16,6,AP_TRN,AP_WRAP>, so the float input is first truncated to 10
    fractional bits and only then rounded by the QuantIdentity (AP_RND_CONV, 5
    fractional bits). Inputs less than 2^-10 above a tie of the 2^-5 grid thus round
    down instead of up (double rounding). Every other rounding point agrees (the
    quantizers map to AP_RND_CONV/AP_SAT, the accumulators are exact): fed the same
    double-rounded inputs, our learner reproduces hls4ml exactly. Measured on this
    stream: 1.35% of the outputs differ, by up to 4 output LSBs (the hidden layers
    amplify a 1-LSB input difference).
    """
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    from onchip.frontends import hls4ml_bridge

    model, imp = imported
    # inputs on a fine grid so that ties and near-ties of the input grid are frequent
    rng = np.random.default_rng(4)
    x = (np.round(rng.uniform(-3, 3, (2000, 3)) * 2**12) / 2**12).astype(np.float32)
    golden = GoldenLearner(imp.spec, imp.theta)
    ours = golden.predict(golden.quantize_inputs(x.astype(np.float64)))
    hls_model = hls4ml_bridge.convert(model, 3, tmp_path / "h4")
    types = hls4ml_bridge.result_types(hls_model)
    assert types["global_in"].startswith("fixed<16,6,TRN")
    report = hls4ml_bridge.compare(hls_model, x, ours, imp.spec.formats.act.lsb)
    # the figures docs/frontends.md and docs/backends.md quote
    assert (report["differing"], report["outputs"], report["max_lsb"]) == (54, 4000, 4)

    # the independent explanation: truncate to 10 fractional bits first, then round
    truncated = np.floor(x.astype(np.float64) * 2**10) / 2**10
    double = golden.predict(golden.quantize_inputs(truncated))
    exact = hls4ml_bridge.compare(hls_model, x, double, imp.spec.formats.act.lsb)
    assert exact["differing"] == 0
    changed = np.any(quantize(truncated, imp.spec.formats.input) != golden.quantize_inputs(x.astype(np.float64)),
                     axis=1)
    differs = np.any(ours != double, axis=1)
    assert not np.any(differs & ~changed)  # differences only where the input double-rounds
