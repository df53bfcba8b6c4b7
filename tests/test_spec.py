"""LearnerSpec: validation messages, TOML round trip, presets."""

import dataclasses
import math
import re

import numpy as np
import pytest
import tomli_w

from onchip.errors import SpecError
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
        # a grid finer than the input's LSB: no negative bit count, the LSB in cells and the ways out
        (dict(grid_size=1 << 20), ["formats.input", "no position inside a cell", "LSB spans 64 cells",
                                   "a smaller grid_size or more fractional bits"]),
        (dict(formats={"coef": 12}), ["formats.coef", "ap_fixed<16,4,RND_CONV,SAT>", "12"]),
        (dict(learning_rate=0.1), ["learning_rate", "power of two"]),
        (dict(widths=(1,)), ["widths"]),
        (dict(kind="svm"), ["kind", "svm"]),
        (dict(schedule="eager"), ["schedule", "eager"]),
        (dict(staleness=-1), ["staleness", "-1"]),
        (dict(datapath="systolic"), ["datapath", "systolic"]),
        (dict(datapath="serial", lanes=3), ["lanes=3", "widest layer's 1 inputs"]),
        (dict(lanes=2), ["lanes=2", "serial KAN datapath only"]),
        (dict(channels=0), ["channels", "0"]),
        (dict(channels=2.5), ["channels", "2.5"]),
    ],
)
def test_unbuildable_specs_say_which_field_and_why(changes, words):
    with pytest.raises(ValueError) as info:
        PRESETS["kan-regression"].replace(**changes)
    for word in words:
        assert word in str(info.value)


def test_an_mlp_spec_file_with_kan_fields_is_refused_naming_them():
    text = PRESETS["mlp-readout"].to_toml()
    assert LearnerSpec.from_toml(text) == PRESETS["mlp-readout"]  # an MLP's own text has none
    with pytest.raises(ValueError, match=r"^grid_size, basis_table_bits: KAN fields in a spec of kind = 'mlp'"):
        LearnerSpec.from_toml("grid_size = 8\nbasis_table_bits = 4\n" + text)
    kan = PRESETS["kan-readout"].to_dict()
    assert LearnerSpec.from_dict(kan) == PRESETS["kan-readout"]  # a KAN's grid fields stay its own


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
    with pytest.raises(ValueError, match=r"unknown format name\(s\) in \[formats\]: gradd \(did you mean grad\?\)"):
        LearnerSpec.from_toml('kind = "kan"\nwidths = [1, 1]\n[formats]\ngradd = "ap_fixed<16,4,RND,SAT>"\n')
    with pytest.raises(ValueError, match=r"formats\.coef"):
        LearnerSpec.from_toml('kind = "kan"\nwidths = [1, 1]\n[formats]\ncoef = "float"\n')
    with pytest.raises(ValueError, match="neither a preset"):
        load_spec(str(tmp_path / "missing.toml"))
    with pytest.raises(ValueError, match=r"nor an existing file \(did you mean kan-readout\?\)"):
        load_spec("kan-redout")
    # products too wide for the accumulator: named by the format the user gave, not only by acc
    with pytest.raises(ValueError, match=r"formats\.coef \(ap_fixed<16,40,.*\) x formats\.input .* narrow formats\.coef"):
        LearnerSpec.from_toml('kind = "kan"\nwidths = [1, 1]\n[formats]\ncoef = "ap_fixed<16,40>"\n')


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


def test_timing_is_validated_and_written_only_when_chosen():
    with pytest.raises(ValueError, match="timing must be one of auto, compact, fast, predict-first; got 'turbo'"):
        PRESETS["kan-paper"].replace(timing="turbo")
    for name, spec in PRESETS.items():
        assert spec.timing == "auto" and "timing" not in spec.to_toml()  # presets keep their text
        for plan in ("compact", "fast"):
            chosen = spec.replace(timing=plan)
            assert f'timing = "{plan}"' in chosen.to_toml() and chosen.stage_timing == plan
            assert LearnerSpec.from_toml(chosen.to_toml()) == chosen
    for preset in ("kan-readout", "mlp-readout"):  # both plans on the serial datapaths too
        assert PRESETS[preset].replace(datapath="serial", timing="fast").stage_timing == "fast"
        assert PRESETS[preset].replace(datapath="serial", timing="compact").stage_timing == "compact"


def test_auto_timing_follows_datapath_and_schedule():
    kan, mlp = PRESETS["kan-readout"], PRESETS["mlp-readout"]
    assert kan.schedule == "sequential" and kan.stage_timing == "fast"
    # what changes with the schedule, never a refusal: the pipelined fast plan would need a larger
    # staleness (the learner's numbers); the serial datapaths are fast by default (measured: fewer
    # routed ns per update)
    assert kan.replace(schedule="pipelined").stage_timing == "compact"
    assert kan.replace(datapath="serial").stage_timing == "fast"
    assert mlp.stage_timing == "fast" and mlp.replace(datapath="serial").stage_timing == "fast"
    assert mlp.replace(schedule="pipelined").stage_timing == "compact"
    assert LearnerSpec.from_toml(kan.to_toml()).stage_timing == "fast"


# -- numbers: a bool is not an integer, NaN and infinities are not numbers ----------------------
INT_FIELDS = ("grid_size", "spline_order", "basis_table_bits", "staleness", "init_seed", "lanes", "channels")
FLOAT_FIELDS = ("learning_rate", "init_scale")
#: every numeric field, with a bad value of each kind it can be given (a list field: each element)
BOOL_VALUES = [(name, True) for name in INT_FIELDS + FLOAT_FIELDS] + [
    ("widths", [True, True]), ("widths", [1, False]), ("grid_range", [True, 2.0]), ("grid_range", [-2.0, True]),
]
NON_FINITE = [(name, v) for name in FLOAT_FIELDS for v in (math.inf, -math.inf, math.nan)] + [
    ("grid_range", [v, 2.0]) for v in (-math.inf, math.nan)] + [("grid_range", [-2.0, v]) for v in (math.inf, math.nan)]


CASES = [pytest.param(f, v, id=f"{f}={v}") for f, v in BOOL_VALUES + NON_FINITE]


def test_the_numeric_field_lists_cover_every_number_of_a_spec():
    numeric = {f.name for f in dataclasses.fields(LearnerSpec)
               if f.type in ("int", "float", "tuple[int, ...]", "tuple[float, float]")}
    assert numeric == set(INT_FIELDS) | set(FLOAT_FIELDS) | {"widths", "grid_range"}
    assert {name for name, _ in BOOL_VALUES} == numeric
    assert {name for name, _ in NON_FINITE} == set(FLOAT_FIELDS) | {"grid_range"}


def _bad_element(value):
    """The element of ``value`` the message must name (the value itself for a scalar)."""
    if not isinstance(value, list):
        return value
    return next(v for v in value if isinstance(v, bool) or not math.isfinite(v))


def _assert_names(exc, field, value):
    text = str(exc.value)
    assert isinstance(exc.value, SpecError) and "\n" not in text
    bad = _bad_element(value)
    shown = ("true" if bad else "false") if isinstance(bad, bool) else repr(bad)  # as a spec file spells it
    assert field in text and f"got {shown}" in text, text


@pytest.mark.parametrize("field, value", CASES)
@pytest.mark.parametrize("kind", ["kan", "mlp"])
def test_a_bool_or_non_finite_number_is_refused_on_construction(kind, field, value):
    base = PRESETS[f"{kind}-regression"]
    with pytest.raises(SpecError) as exc:
        base.replace(**{field: value})
    _assert_names(exc, field, value)


@pytest.mark.parametrize("field, value", CASES)
@pytest.mark.parametrize("kind", ["kan", "mlp"])
def test_a_bool_or_non_finite_number_is_refused_on_toml_load(kind, field, value, tmp_path):
    d = PRESETS[f"{kind}-regression"].to_dict()
    d[field] = value
    text = tomli_w.dumps(d)
    with pytest.raises(SpecError) as exc:
        LearnerSpec.from_toml(text)
    _assert_names(exc, field, value)
    path = tmp_path / "spec.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"spec file {path}: {field}"):
        load_spec(str(path))


@pytest.mark.parametrize("text", ["grid_size = true", "staleness = true", "grid_range = [-inf, 2.0]",
                                  "learning_rate = nan"])
def test_onchip_generate_refuses_them_in_one_line(text, tmp_path, capsys):
    from onchip.cli import main

    d = PRESETS["kan-regression"].to_dict()
    key = text.split(" = ")[0]
    d.pop(key)
    path = tmp_path / "spec.toml"
    path.write_text(f"{text}\n" + tomli_w.dumps(d))
    out = tmp_path / "gen"
    assert main(["generate", "--spec", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and "Traceback" not in err, err
    assert not out.exists()


def test_exact_integers_are_taken_as_floats_and_numpy_integers_as_ints():
    spec = PRESETS["kan-regression"].replace(learning_rate=1, init_scale=0, grid_range=[-2, 2],
                                             grid_size=np.int64(8), widths=[np.int64(1), 1])
    assert type(spec.learning_rate) is float and type(spec.init_scale) is float
    assert all(type(v) is float for v in spec.grid_range)
    assert type(spec.grid_size) is int and all(type(w) is int for w in spec.widths)
    assert "learning_rate = 1.0" in spec.to_toml()
    with pytest.raises(SpecError, match="init_scale must be a finite number, got 9007199254740993"):
        PRESETS["kan-regression"].replace(init_scale=2**53 + 1)  # no float holds it exactly
    with pytest.raises(SpecError, match="grid_size must be an integer, got 8.0"):
        PRESETS["kan-regression"].replace(grid_size=8.0)
    with pytest.raises(SpecError, match='grid_range\\[0\\] must be a finite number, got "-2"'):
        PRESETS["kan-regression"].replace(grid_range=("-2", 2))


def test_a_bad_value_is_shown_as_the_spec_file_spells_it():
    text = PRESETS["kan-regression"].to_toml()
    with pytest.raises(SpecError, match="grid_size must be an integer, got true$"):
        LearnerSpec.from_toml(re.sub(r"(?m)^grid_size = .*$", "grid_size = true", text))
    with pytest.raises(SpecError, match='init_scale must be a finite number, got "0.5"$'):
        LearnerSpec.from_toml(re.sub(r"(?m)^init_scale = .*$", 'init_scale = "0.5"', text))


def test_a_grid_range_wider_than_the_float_range_is_refused_cleanly():
    with pytest.raises(SpecError, match="grid_range: cell width .* inf is not a power of two"):
        PRESETS["kan-regression"].replace(grid_range=(-1e308, 1e308))


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\t", "\n", "\x7f", "\x85", "\ud800"])
def test_a_name_with_a_control_character_is_refused(char, tmp_path):
    name = f"kan{char}readout"
    with pytest.raises(SpecError, match=f"name must not hold control characters, got .* \\(U\\+{ord(char):04X}\\)"):
        PRESETS["kan-readout"].replace(name=name)
    if char != "\ud800":  # TOML cannot hold a lone surrogate
        text = tomli_w.dumps({**PRESETS["kan-readout"].to_dict(), "name": name})
        with pytest.raises(SpecError, match="name must not hold control characters"):
            LearnerSpec.from_toml(text)
    with pytest.raises(SpecError, match="name must be a string, got 5"):
        PRESETS["kan-readout"].replace(name=5)
    assert PRESETS["kan-readout"].replace(name="kan readout – µ").name == "kan readout – µ"


@pytest.mark.parametrize("name", ["kan-acrobot", "kan2-acrobot",
                                  pytest.param("mlp-acrobot", marks=pytest.mark.slow)])  # 35 s; the KANs stay
def test_task_presets_work_in_every_spec_taking_command(name, tmp_path):
    """The acrobot presets the README names load and generate like the hardware presets."""
    from onchip.cli import main
    from onchip.spec import TASK_PRESETS, load_spec
    from onchip.tasks.acrobot import SPECS

    assert load_spec(name) is TASK_PRESETS[name] is SPECS[name]
    assert main(["generate", "--spec", name, "--out", str(tmp_path / "gen")]) == 0
    assert (tmp_path / "gen" / "onchip_learner.v").is_file()


def test_a_grad_format_coarser_than_every_error_is_refused_naming_the_field():
    from onchip.spec import Formats, LearnerSpec, SpecError

    with pytest.raises(SpecError, match=r"formats.grad \(ap_fixed<3,9,TRN,WRAP>\): its LSB 64 is coarser than any "
                                        r"error the act format"):
        LearnerSpec(kind="kan", widths=(1, 1), formats=Formats(grad="ap_fixed<3,9>"))
    # an LSB as coarse as the act range still lets an error through
    LearnerSpec(kind="kan", widths=(1, 1), formats=Formats(grad="ap_fixed<4,7>"))


def test_the_defaults_table_of_docs_spec_is_the_dataclasses_defaults():
    """docs/spec.md lists every optional field's default; a default changed in one place only fails."""
    import tomllib
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "spec.md").read_text()
    table = text.split("## Defaults", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `")]
    documented = {name.strip().strip("`"): tomllib.loads(f"v = {value.strip().strip('`')}")["v"] for name, value in rows}
    fields = {f.name: f for f in dataclasses.fields(LearnerSpec)}
    expected = {name: (list(f.default) if isinstance(f.default, tuple) else f.default)
                for name, f in fields.items() if f.default is not dataclasses.MISSING}
    expected.update({f"formats.{f.name}": str(getattr(Formats(), f.name)) for f in dataclasses.fields(Formats)
                     if getattr(Formats(), f.name) is not None})  # formats.output: unset means act (the text says)
    assert documented == expected
    required = {name for name, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert required == {"kind", "widths"} and "needs `kind` and `widths`" in table


@pytest.mark.parametrize("kind, widths, datapath, what", [
    ("kan", [1, 100_000_000], "parallel", "parameter bits"),
    ("mlp", [1, 100_000_000], "serial", "parameter bits"),
    ("kan", [1, 1_000_000], "serial", "parameter bits"),
    ("mlp", [1, 1_000_000], "parallel", "multipliers"),
    ("mlp", [1, 1_000_000], "serial", "multipliers"),
    ("kan", [1, 100_000], "parallel", "multipliers"),
])
def test_a_spec_no_device_could_hold_is_refused_before_any_allocation(kind, widths, datapath, what):
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match=rf"widths \[1, {widths[1]}\].*: \d+ {what}, more than the \d+ "
                                            r"the largest supported device \(xcvu13p\) holds"):
            LearnerSpec(kind=kind, widths=widths, datapath=datapath, allow_acc_wrap=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    LearnerSpec(kind=kind, widths=[1, 64], datapath=datapath)  # the same learner at a plausible size


def test_the_size_bound_is_the_largest_device_onchip_names():
    from onchip.flow.fit import XILINX_PARTS
    from onchip.spec import LARGEST_DEVICE

    for resource in ("bram", "ff", "dsp", "lut"):
        assert LARGEST_DEVICE[resource] == max(part[resource] for part in XILINX_PARTS.values()), resource
    assert XILINX_PARTS[LARGEST_DEVICE["part"]] == {k: v for k, v in LARGEST_DEVICE.items() if k != "part"}


def test_a_sweep_grid_point_beyond_any_device_is_refused():
    from onchip.sweep.grid import point_spec

    with pytest.raises(SpecError, match=r"grid point .*widths \[1, 100000000\].*more than"):
        point_spec({"widths": [1, 100_000_000]}, {"kind": "kan"})


@pytest.mark.parametrize("command", [["generate"], ["hls"], ["verify", "--backends", "hls"]])
def test_a_mistyped_width_is_refused_in_one_line_within_little_memory(tmp_path, command):
    """Under a 4 GiB address-space limit (a stray allocation of the learner would need 8 GiB)."""
    import resource
    import subprocess
    import sys

    spec = tmp_path / "big.toml"
    spec.write_text('kind = "kan"\nwidths = [1, 100000000]\n')

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    proc = subprocess.run([sys.executable, "-m", "onchip.cli", *command, "--spec", str(spec),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                          preexec_fn=limit)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "the largest supported device" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_channels_round_trip_and_each_channel_is_sequential():
    spec = PRESETS["kan-readout"].replace(schedule="pipelined", staleness=3)
    assert spec.effective_staleness == 3
    multi = spec.replace(channels=4)
    assert multi.effective_staleness == 0  # a channel's sample waits for its own update: no staleness
    assert LearnerSpec.from_toml(multi.to_toml()) == multi
    assert "channels" not in spec.to_toml()  # single-channel specs keep their text (and cache keys)
    assert multi.hardware_size()["parameter_bits"] == 4 * spec.hardware_size()["parameter_bits"]


def test_predict_first_is_for_one_layer_parallel_kans():
    spec = PRESETS["kan-readout"].replace(timing="predict-first")
    assert spec.stage_timing == "predict-first" and LearnerSpec.from_toml(spec.to_toml()) == spec
    for bad in (dict(kind="mlp", widths=(2, 8, 1)), dict(widths=(2, 3, 1)), dict(datapath="serial")):
        with pytest.raises(ValueError, match=r"timing='predict-first' is built for a one-layer KAN on the "
                                             r"parallel datapath; got kind="):
            PRESETS["kan-readout"].replace(timing="predict-first", **bad)


@pytest.mark.parametrize("field, value, match", [
    ("staleness", 257, r"staleness must be an integer in \[0, 256\] .* got 257"),
    ("staleness", 2**63 - 1, r"staleness must be an integer in \[0, 256\]"),
    ("init_seed", -1, r"init_seed must be an integer >= 0, got -1"),
])
def test_a_value_no_design_or_draw_can_take_is_refused_on_construction(field, value, match):
    # before: staleness 2**63 - 1 grew a generate to 5 GB, init_seed -1 failed inside numpy
    with pytest.raises(SpecError, match=match):
        PRESETS["kan-readout"].replace(schedule="pipelined", **{field: value})


def test_a_spec_file_with_a_byte_order_mark_loads(tmp_path):
    spec = PRESETS["kan-readout"]
    (tmp_path / "s.toml").write_bytes(b"\xef\xbb\xbf" + spec.to_toml().encode())
    assert load_spec(str(tmp_path / "s.toml")) == spec


def test_too_many_channels_names_channels():
    with pytest.raises(SpecError, match=r"channels 1000000 \(parallel datapath\): 352000000 parameter bits, .* "
                                        r"is channels or a width mistyped\?"):
        PRESETS["kan-readout"].replace(channels=1_000_000)
