"""The output format (``formats.output``): the last layer's sum is converted into it, targets are read
in it; the spec keeps its text without it; every backend equals the golden model bit for bit with an
output format unlike ``act`` (finer, wider, another rounding), KAN and MLP, both plans, both schedules,
the serial datapaths, predict-first and channels (the Verilator builds beyond two are slow)."""

from __future__ import annotations

import numpy as np
import pytest

from onchip.backends import available_backends, get_backend
from onchip.errors import SpecError
from onchip.model import GoldenLearner, SampleKind
from onchip.spec import PRESETS, Formats, LearnerSpec

from kind_support import golden_kinds_final, mixed_stream
from support import variant

#: finer, wider and truncating where act (ap_fixed<16,4,RND_CONV,SAT>) rounds; SAT reached by the
#: random targets (+/-3 and the format's limits) through the output error
OUTPUT = "ap_fixed<22,3,TRN,SAT>"


def with_output(spec: LearnerSpec, output: str = OUTPUT, **changes) -> LearnerSpec:
    return spec.replace(formats=Formats(**{**spec.formats.as_dict(), "output": output}), **changes)


KAN = with_output(PRESETS["kan-readout"], widths=(2, 3, 2), init_scale=0.5, name="kan-output-format")
MLP = with_output(PRESETS["mlp-readout"], widths=(2, 4, 2), name="mlp-output-format")


# -- the spec -------------------------------------------------------------------------------------

def test_without_an_output_format_the_spec_keeps_its_text_and_with_one_round_trips():
    for spec in PRESETS.values():
        assert spec.formats.output is None and spec.formats.y is spec.formats.act
        assert "output" not in spec.to_toml()
    back = LearnerSpec.from_toml(KAN.to_toml())
    assert back == KAN and str(back.formats.y) == OUTPUT and 'output = "ap_fixed<22,3,TRN,SAT>"' in KAN.to_toml()


@pytest.mark.parametrize("output, match", [
    ("ap_fixed<16", r"formats\.output: "),
    ("ap_fixed<33,4,RND_CONV,SAT>", r"formats\.output is wider than 32 bits: ap_fixed<33,4"),
    ("ap_fixed<2,-12,RND_CONV,SAT>", r"formats\.grad \(.*\): its LSB .* coarser than any error the output format "
                                    r"\(ap_fixed<2,-12"),
])
def test_a_bad_output_format_is_refused_naming_formats_output(output, match):
    with pytest.raises(SpecError, match=match):
        with_output(PRESETS["mlp-readout"], output)


# -- the golden model -----------------------------------------------------------------------------

def _one_weight(output: str | None) -> GoldenLearner:
    """1 -> 1 MLP, w = 3 * 2^-12, bias 0 (coef ap_fixed<16,4>: 12 fractional bits)."""
    spec = PRESETS["mlp-readout"].replace(widths=(1, 1), init_scale=0.0)
    if output:
        spec = with_output(spec, output)
    return GoldenLearner(spec, np.array([3, 0]))


def test_the_last_sum_goes_into_the_output_format_and_targets_are_read_in_it():
    x = np.array([[5]])  # 5 * 2^-12: w x = 15 * 2^-24
    fine = _one_weight("ap_fixed<32,4,RND_CONV,SAT>")  # 28 fractional bits: 15 * 2^-24 = 240 LSB
    assert fine.predict(x).tolist() == [[240]]
    assert _one_weight(None).predict(x).tolist() == [[0]]  # act (12 fractional bits) rounds it to 0
    # a target equal to the prediction, read in the output format, is no error: nothing changes
    fine.run(x, np.array([[240]]), np.array([int(SampleKind.TARGET)]))
    fine.flush()
    assert fine.theta.tolist() == [3, 0]
    plain = _one_weight(None)  # the same raw target in act is 240 * 2^-12 away from the prediction
    plain.run(x, np.array([[240]]), np.array([int(SampleKind.TARGET)]))
    plain.flush()
    assert plain.theta.tolist() != [3, 0]


# -- every backend equals the golden model ------------------------------------------------------------

def _check(name: str, spec: LearnerSpec, n: int = 300, seed: int = 5) -> None:
    if name not in available_backends():
        pytest.skip(f"backend {name} is not available here")
    x, y, kind = mixed_stream(spec, n, seed)
    want_preds, want_dec, want_theta = golden_kinds_final(spec, x, y, kind)
    plain = spec.replace(formats=Formats(**{k: v for k, v in spec.formats.as_dict().items() if k != "output"}))
    assert not np.array_equal(GoldenLearner(plain).predict(x), GoldenLearner(spec).predict(x))  # it matters here
    got = get_backend(name).run(spec, x, y, kind=kind)
    np.testing.assert_array_equal(got.predictions, want_preds)
    np.testing.assert_array_equal(got.decisions, want_dec)
    np.testing.assert_array_equal(got.theta, want_theta)


@pytest.mark.parametrize("spec", [KAN, MLP], ids=["kan", "mlp"])
def test_hls_csim_equals_golden_with_an_output_format(spec):
    _check("hls", spec)


def test_rtl_equals_golden_with_an_output_format_kan_sequential_fast():
    assert KAN.stage_timing == "fast" and KAN.schedule == "sequential"
    _check("rtl", KAN)


def test_rtl_equals_golden_with_an_output_format_mlp_pipelined_compact():
    spec = variant(MLP, "pipelined")
    assert spec.stage_timing == "compact"
    _check("rtl", spec)


SLOW_RTL = [
    pytest.param(KAN.replace(timing="compact"), id="kan-sequential-compact"),
    pytest.param(variant(KAN, "pipelined"), id="kan-pipelined-compact"),
    pytest.param(MLP, id="mlp-sequential-fast"),
    pytest.param(MLP.replace(timing="compact"), id="mlp-sequential-compact"),
    pytest.param(KAN.replace(datapath="serial", lanes=2), id="kan-serial-fast"),
    pytest.param(KAN.replace(datapath="serial", lanes=2, timing="compact"), id="kan-serial-compact"),
    pytest.param(MLP.replace(datapath="serial"), id="mlp-serial-fast"),
    pytest.param(MLP.replace(datapath="serial", timing="compact"), id="mlp-serial-compact"),
    pytest.param(with_output(PRESETS["kan-readout"], widths=(2, 2), init_scale=0.5, timing="predict-first"),
                 id="kan-predict-first"),
]


@pytest.mark.slow
@pytest.mark.parametrize("spec", SLOW_RTL)
def test_rtl_equals_golden_with_an_output_format(spec):
    _check("rtl", spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [KAN, variant(MLP, "pipelined")], ids=["kan", "mlp-pipelined"])
def test_cocotb_equals_golden_with_an_output_format(spec):
    _check("cocotb", spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [KAN.replace(channels=2), MLP.replace(channels=2)], ids=["kan", "mlp"])
def test_channels_equal_golden_with_an_output_format(spec):
    if "rtl" not in available_backends():
        pytest.skip("no Verilator toolchain")
    x, y, kind = mixed_stream(spec, 300, 7)
    channel = np.random.default_rng(7).integers(0, 2, len(x))
    g = GoldenLearner(spec)
    want = g.run(x, y, kind, channel=channel)
    g.flush()
    for name in ("rtl", "hls"):
        if name not in available_backends():
            continue
        got = get_backend(name).run(spec, x, y, kind=kind, channel=channel)
        np.testing.assert_array_equal(got.predictions, want, err_msg=name)
        np.testing.assert_array_equal(got.theta, g.theta, err_msg=name)
