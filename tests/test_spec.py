"""LearnerSpec: validation messages, TOML round trip, presets."""

import numpy as np
import pytest

from onchip.spec import PRESETS, Formats, LearnerSpec, load_spec


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_through_toml(name, tmp_path):
    spec = PRESETS[name]
    path = tmp_path / "spec.toml"
    path.write_text(spec.to_toml())
    assert load_spec(str(path)) == spec
    assert load_spec(name) is spec
    assert all(getattr(spec.formats, f).width == 16 for f in ("input", "coef", "basis", "act", "grad"))


def test_changed_spec_round_trips():
    spec = PRESETS["kan-regression"].replace(
        widths=(2, 4, 1), grid_size=16, spline_order=2, schedule="pipelined", staleness=6,
        formats=Formats.uniform(10, 3), basis_table_bits=4,
    )
    assert LearnerSpec.from_toml(spec.to_toml()) == spec


@pytest.mark.parametrize(
    "changes, words",
    [
        (dict(grid_size=0), ["grid_size", "0"]),
        (dict(grid_size=5), ["grid_range", "not a power of two"]),
        (dict(spline_order=0), ["spline_order", "0"]),
        (dict(grid_range=(2.0, -2.0)), ["grid_range", "lo < hi"]),
        (dict(grid_range=(-16.0, 16.0)), ["formats.input", "too narrow"]),
        (dict(formats=Formats.uniform(8, 4)), ["formats.input", "basis_table_bits"]),
        (dict(learning_rate=0.1), ["learning_rate", "power of two"]),
        (dict(widths=(1,)), ["widths"]),
        (dict(kind="svm"), ["kind", "svm"]),
        (dict(schedule="eager"), ["schedule", "eager"]),
        (dict(staleness=-1), ["staleness", "-1"]),
        (dict(datapath="systolic"), ["datapath", "systolic"]),
        (dict(datapath="serial"), ["datapath='serial'", "kind='kan'"]),
    ],
)
def test_unbuildable_specs_say_which_field_and_why(changes, words):
    with pytest.raises(ValueError) as info:
        PRESETS["kan-regression"].replace(**changes)
    for word in words:
        assert word in str(info.value)


def test_serial_datapath_is_a_sequential_mlp_choice_and_round_trips():
    spec = PRESETS["mlp-readout"].replace(datapath="serial")
    assert LearnerSpec.from_toml(spec.to_toml()) == spec
    with pytest.raises(ValueError, match="schedule='pipelined'"):
        spec.replace(schedule="pipelined")


def test_init_scale_beyond_coef_is_refused_not_wrapped():
    """init_scale = 20 with a coef holding [-8, 8): the initial coefficients would wrap (change sign)."""
    spec = LearnerSpec(kind="kan", widths=(1, 1), grid_size=8, grid_range=(-2.0, 2.0), init_scale=4.0,
                       formats=Formats(coef="ap_fixed<16,4,RND_CONV,WRAP>"))
    with pytest.raises(ValueError, match=r"init_scale=20.0 draws initial coefficients in \+/-20, outside "
                                         r"formats.coef \(ap_fixed<16,4,RND_CONV,WRAP>\), which holds \[-8.0, 7.99"):
        spec.replace(init_scale=20.0)
    # MLP weights are drawn in +/- init_scale * sqrt(3 / fan_in): fan-in 1 -> 1.73 x init_scale
    mlp = PRESETS["mlp-regression"]
    with pytest.raises(ValueError, match="draws initial weights in"):
        mlp.replace(init_scale=4.7)
    assert mlp.replace(init_scale=4.6).init_scale == 4.6


def test_accumulator_too_narrow_for_its_sum_is_refused_unless_wrap_is_allowed():
    """MLP 2->1 with acc = ap_fixed<7,1>: 0.5 + 0.5 would give -1.0."""
    narrow = Formats(acc="ap_fixed<7,1,TRN,WRAP>")
    with pytest.raises(ValueError, match="formats.acc .* cannot hold the worst-case forward sum of layer 0 "
                                         r"\(\+/-136\): it needs at least 9 integer bits; set allow_acc_wrap"):
        LearnerSpec(kind="mlp", widths=(2, 1), formats=narrow, init_scale=0.0)
    spec = LearnerSpec(kind="mlp", widths=(2, 1), formats=narrow, init_scale=0.0, allow_acc_wrap=True)
    assert "allow_acc_wrap = true" in spec.to_toml()
    assert LearnerSpec.from_toml(spec.to_toml()) == spec
    assert "allow_acc_wrap" not in PRESETS["mlp-regression"].to_toml()
    # the wrap the check warns about is real: 0.5 * 1 + 0.5 * 1 wraps to -1 in ap_fixed<7,1>
    from onchip.model import GoldenLearner

    g = GoldenLearner(spec)
    half = 1 << (spec.formats.coef.frac_bits - 1)
    g.load(np.array([half, half, 0]))
    one = 1 << spec.formats.input.frac_bits
    pred = g.predict(np.array([[one, one]]))
    assert spec.formats.act.lsb * pred[0, 0] == -1.0
    # the worst case counts fan-in x |coef| x |input| + |bias|: 2 * 8 * 8 + 8
    assert spec.worst_case_sums() == [2 * 8.0 * 8.0 + 8.0]


def test_accumulator_must_wrap():
    with pytest.raises(ValueError, match="formats.acc"):
        Formats(acc="ap_fixed<40,14,TRN,SAT>")


def test_bad_toml_and_unknown_fields(tmp_path):
    with pytest.raises(ValueError, match="TOML"):
        LearnerSpec.from_toml("kind = ")
    with pytest.raises(ValueError, match="grid_sise"):
        LearnerSpec.from_toml('kind = "kan"\nwidths = [1, 1]\ngrid_sise = 4\n')
    with pytest.raises(ValueError, match=r"formats\.coef"):
        LearnerSpec.from_toml('kind = "kan"\nwidths = [1, 1]\n[formats]\ncoef = "float"\n')
    with pytest.raises(ValueError, match="neither a preset"):
        load_spec(str(tmp_path / "missing.toml"))


def test_derived_quantities():
    spec = PRESETS["kan-readout"]
    assert spec.cell_exp == 0 and spec.n_coef == 11 and spec.lr_shift == 4
    assert spec.parameter_count() == 2 * 11
    assert PRESETS["mlp-readout"].parameter_count() == 2 * 8 + 8 + 8 + 1
    assert spec.effective_staleness == 0
    assert spec.replace(schedule="pipelined", staleness=3).effective_staleness == 3


def test_readme_spec_example_is_the_kan_readout_preset():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Learner specs", 1)[1]
    example = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    assert LearnerSpec.from_toml(example) == PRESETS["kan-readout"].replace(name="")


def test_timing_is_validated_and_written_only_when_fast():
    with pytest.raises(ValueError, match="timing must be one of compact, fast; got 'turbo'"):
        PRESETS["kan-paper"].replace(timing="turbo")
    for name, spec in PRESETS.items():
        assert spec.timing == "compact" and "timing" not in spec.to_toml()  # presets keep their text
        fast = spec.replace(timing="fast")
        assert 'timing = "fast"' in fast.to_toml()
        assert LearnerSpec.from_toml(fast.to_toml()) == fast
    with pytest.raises(ValueError, match="timing='fast' is built for the parallel datapath"):
        PRESETS["mlp-readout"].replace(datapath="serial", timing="fast")
