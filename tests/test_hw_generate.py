"""`onchip generate` and the committed reference RTL under rtl/."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from onchip.hw import generate
from onchip.hw.learner import min_staleness
from onchip.hw.reference import reference_specs
from onchip.hw.sim import cached_design
from onchip.spec import PRESETS, LearnerSpec

RTL = Path(__file__).resolve().parents[1] / "rtl"


@pytest.mark.parametrize("name", list(reference_specs()))
def test_committed_rtl_is_reproduced(name):
    design = cached_design(reference_specs()[name])
    folder = RTL / name
    assert (folder / "onchip_learner.v").read_text() == design.verilog
    assert (folder / "onchip_learner_axis.v").read_text() == design.axis_verilog
    assert json.loads((folder / "onchip_learner.json").read_text()) == json.loads(json.dumps(design.info))


def test_contract_ports_and_payload():
    spec = PRESETS["kan-readout"]
    info = cached_design(reference_specs()["kan-readout"]).info
    ports = {name: {"dir": e["dir"], "width": e["width"]} for name, e in info["ports"].items()}
    w = spec.formats
    # x0, x1, y (act and grad both 16 bits), the 2-bit kind; the prediction and a 1-bit decision
    assert ports["s__payload"] == {"dir": "in", "width": 2 * w.input.width + w.act.width + 2}
    assert ports["m__payload"] == {"dir": "out", "width": w.act.width + 1}
    kind, decision = info["payload"]["s"]["kind"], info["payload"]["m"]["decision"]
    assert (kind["offset"], kind["width"]) == (2 * w.input.width + w.act.width, 2)
    assert (decision["offset"], decision["width"]) == (w.act.width, 1)
    assert ports["pc__payload"]["width"] == w.coef.width + info["param_addr_width"] + 1
    assert ports["pr__payload"] == {"dir": "out", "width": w.coef.width}
    assert info["param_count"] == 2 * (spec.grid_size + spec.spline_order)
    assert 2 ** info["param_addr_width"] >= info["param_count"]
    for name in ("clk", "rst", "s__valid", "s__ready", "m__valid", "m__ready", "pc__valid", "pr__ready"):
        assert name in ports


def test_pipelined_staleness_below_pipeline_depth_is_refused():
    spec = PRESETS["kan-regression"]
    d = min_staleness(spec)
    with pytest.raises(ValueError, match=f"staleness must be >= {d}"):
        generate(spec.replace(schedule="pipelined", staleness=d - 1), axis=False)
    with pytest.raises(ValueError, match="LearnerSpec"):
        generate(3)


def test_generate_takes_a_preset_name_or_spec_file_as_the_flow_steps_do(tmp_path):
    spec = PRESETS["kan-regression"]
    want = generate(spec, axis=False).verilog
    assert generate("kan-regression", axis=False).verilog == want
    path = tmp_path / "spec.toml"
    path.write_text(spec.to_toml())
    assert generate(path, axis=False).verilog == want
    with pytest.raises(ValueError, match="neither a preset"):
        generate("kan-regresion", axis=False)


def test_cli_generate_writes_verilog_and_json(tmp_path):
    from onchip.cli import main

    out = tmp_path / "gen"
    assert main(["generate", "--spec", "kan-regression", "--schedule", "pipelined", "--staleness", "min",
                 "--out", str(out)]) == 0
    info = json.loads((out / "onchip_learner.json").read_text())
    assert info["initiation_interval"] == 1 and info["staleness"] == min_staleness(PRESETS["kan-regression"])
    assert "module onchip_learner(" in (out / "onchip_learner.v").read_text()
    assert "s_axis_sample_tdata" in (out / "onchip_learner_axis.v").read_text()
    assert main(["generate", "--spec", "kan-regression", "--staleness", "soon", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_cli_generate_names_the_flag_a_spec_cannot_take(tmp_path, capsys):
    from onchip.cli import main

    assert main(["generate", "--spec", "kan-regression", "--staleness", "9", "--out", str(tmp_path / "a")]) == 2
    assert "--staleness 9 applies to the pipelined schedule" in capsys.readouterr().err
    serial = tmp_path / "serial.toml"
    serial.write_text(PRESETS["mlp-readout"].replace(datapath="serial").to_toml())
    assert main(["generate", "--spec", str(serial), "--schedule", "pipelined", "--out", str(tmp_path / "b")]) == 2
    assert "--schedule pipelined: datapath='serial'" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # a spec written for the sequential schedule keeps its staleness field's default: the way out is named
    deep = LearnerSpec(kind="kan", widths=(2, 3, 1))
    assert deep.staleness < min_staleness(deep)
    user = tmp_path / "user.toml"
    user.write_text(deep.to_toml())
    assert main(["generate", "--spec", str(user), "--schedule", "pipelined", "--out", str(tmp_path / "c")]) == 2
    assert (f"the spec's staleness {deep.staleness} is below the {min_staleness(deep)} this pipeline needs; "
            "add --staleness min") in capsys.readouterr().err
    assert main(["generate", "--spec", str(user), "--schedule", "pipelined", "--staleness", "min",
                 "--out", str(tmp_path / "c")]) == 0


def test_presets_carry_the_smallest_staleness_their_pipeline_allows():
    from onchip.hw.learner import min_staleness

    for spec in PRESETS.values():
        assert spec.staleness == min_staleness(spec.replace(schedule="sequential"))


def test_wide_parallel_mlp_is_refused_with_the_serial_hint():
    from onchip.hw import PARALLEL_MLP_MAX_PARAMS, generate

    wide = LearnerSpec(kind="mlp", widths=(64, 64, 32, 10))
    assert wide.parameter_count() > PARALLEL_MLP_MAX_PARAMS
    with pytest.raises(ValueError, match='^datapath = "parallel": .* use datapath = "serial"'):
        generate(wide)
    design = generate(wide.replace(datapath="serial"), axis=False)
    assert design.info["datapath"] == "serial" and design.info["param_storage"] == "memory"


@pytest.mark.parametrize("command", ["generate", "synth", "pnr", "vivado", "verify"])
def test_a_spec_the_rtl_generator_does_not_build_is_refused_naming_its_source(command, tmp_path, capsys):
    # the generator's own limits (onchip.hw.check_buildable), checked before anything is built: the
    # message names the file or the flag the field came from, and spells the field as the file does
    from onchip.cli import main

    serial = tmp_path / "serial.toml"
    serial.write_text('kind = "kan"\nwidths = [2, 3, 1]\ndatapath = "serial"\nchannels = 2\n')
    serial_one = tmp_path / "serial1.toml"
    serial_one.write_text('kind = "kan"\nwidths = [2, 3, 1]\ndatapath = "serial"\n')
    wide = tmp_path / "wide.toml"
    wide.write_text('kind = "mlp"\nwidths = [64, 64, 32, 10]\n')
    out = ["--out", str(tmp_path / "out")] if command != "verify" else []
    cases = [([str(serial)], f"--spec {serial}: channels = 2: many channels are built on the parallel datapath"),
             ([str(serial_one), "--channels", "3"], "--channels 3: channels = 3: many channels are built on"),
             ([str(wide)], f'--spec {wide}: datapath = "parallel": the MLP [64, 64, 32, 10] has')]
    for spec, expected in cases:
        assert main([command, "--spec", *spec, *out]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"onchip {command}: error: {expected}"), err
        assert not (tmp_path / "out").exists()


def test_cli_timing_override_raises_the_staleness_to_the_new_minimum(tmp_path, capsys):
    from onchip.cli import main
    from onchip.commands.generate import resolve_spec

    fast = resolve_spec("kan-readout", "pipelined", None, "fast")
    assert fast.timing == "fast" and fast.staleness == min_staleness(fast) > PRESETS["kan-readout"].staleness
    assert resolve_spec("kan-readout", "pipelined", "12", "fast").staleness == 12  # an explicit D stays
    out = tmp_path / "gen"
    assert main(["generate", "--spec", "kan-readout", "--schedule", "pipelined", "--timing", "fast",
                 "--out", str(out)]) == 0
    info = json.loads((out / "onchip_learner.json").read_text())
    assert info["spec"]["timing"] == "fast" and info["staleness"] == min_staleness(fast)
    assert info["initiation_interval"] == 1
    said = capsys.readouterr().out  # the plan used is printed with the cycles it gives
    assert f"pipelined (staleness {min_staleness(fast)}), timing fast, latency to prediction" in said
    # --timing auto takes a spec's own plan back to the schedule's default (the choices are the spec's)
    from onchip.spec import TIMING_CHOICES
    assert resolve_spec("kan-readout", None, None, "auto").stage_timing == "fast"
    assert main(["generate", "--spec", "kan-readout", "--schedule", "pipelined", "--timing", "auto",
                 "--out", str(tmp_path / "auto")]) == 0
    info = json.loads((tmp_path / "auto" / "onchip_learner.json").read_text())
    assert info["timing"] == "compact" and "(auto)" in capsys.readouterr().out
    from onchip.cli import build_parser
    parser = build_parser()
    timing = next(a for a in parser._subparsers._group_actions[0].choices["verify"]._actions if a.dest == "timing")
    assert set(timing.choices) == set(TIMING_CHOICES)
    # the default, timing = "auto": the plan with fewer routed ns per update for the learner
    assert main(["generate", "--spec", "kan-readout", "--out", str(tmp_path / "seq")]) == 0
    assert "sequential, timing fast (auto), latency to prediction" in capsys.readouterr().out
    assert json.loads((tmp_path / "seq" / "onchip_learner.json").read_text())["timing"] == "fast"
    assert main(["generate", "--spec", "kan-readout", "--schedule", "pipelined", "--out", str(tmp_path / "p")]) == 0
    assert f"pipelined (staleness {PRESETS['kan-readout'].staleness}), timing compact (auto)" in capsys.readouterr().out
    assert main(["generate", "--spec", "mlp-readout", "--out", str(tmp_path / "m")]) == 0
    assert "sequential, timing fast (auto), latency to prediction" in capsys.readouterr().out
    # an explicit staleness below the fast pipeline's minimum is refused, naming the minimum
    assert main(["generate", "--spec", "kan-readout", "--schedule", "pipelined", "--timing", "fast",
                 "--staleness", "3", "--out", str(tmp_path / "a")]) == 2
    assert f"staleness must be >= {min_staleness(fast)}" in capsys.readouterr().err
    serial = tmp_path / "serial.toml"  # both plans on the serial KAN too
    serial.write_text(PRESETS["kan-readout"].replace(datapath="serial").to_toml())
    for plan in ("compact", "fast"):
        assert main(["generate", "--spec", str(serial), "--timing", plan, "--out", str(tmp_path / f"s{plan}")]) == 0
        assert f"timing {plan}, latency to prediction" in capsys.readouterr().out
    assert main(["pnr", "--spec", "kan-paper", "--timing", "slow", "--out", str(tmp_path / "c")]) == 2
    assert not any((tmp_path / n).exists() for n in "abc")


@pytest.mark.parametrize("name", list(reference_specs()))
def test_committed_rtl_lints_clean_under_verilator_wall(name):
    """Every reference design, core and AXI4-Stream wrapper, passes `verilator --lint-only -Wall` with no
    waiver on the command line: the file's own lint_off lines (header) waive only the listed warnings."""
    import subprocess

    from onchip.hw.description import LINT_WAIVERS
    from onchip.verilator.toolchain import tool_env, verilator_root

    for top in ("onchip_learner", "onchip_learner_axis"):
        text = (RTL / name / f"{top}.v").read_text()
        assert [ln.split()[-1] for ln in text.splitlines() if ln.startswith("// verilator lint_off")] \
            == list(LINT_WAIVERS)
        lint = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--lint-only", "-Wall", "--top-module",
                               top, f"{top}.v"], cwd=RTL / name, env=tool_env(), capture_output=True, text=True)
        assert lint.returncode == 0 and "%Warning" not in lint.stderr, lint.stderr[-2000:]


def test_a_learner_refused_while_built_is_not_reported_unused(tmp_path):
    # Amaranth warns "created but never used" when it frees a component whose constructor raised, at a
    # moment the collector picks; so the half-built learner is looked up, in a process of its own
    import subprocess
    import sys

    script = (  # a theta of the wrong shape is refused by the learner's constructor
        "import gc\n"
        "import numpy as np\n"
        "from onchip.hw import generate\n"
        "from onchip.hw.learner import OnchipLearner\n"
        "try:\n"
        "    generate('kan-readout', theta=np.zeros(3, dtype=np.int64))\n"
        "except ValueError as exc:\n"
        "    print(exc, file=__import__('sys').stderr)\n"
        "print([o._MustUse__silence for o in gc.get_objects() if type(o) is OnchipLearner])\n"
    )
    import onchip

    env = {**os.environ, "PYTHONPATH": str(Path(onchip.__file__).parents[1])}  # this onchip, from any folder
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert "theta" in done.stderr and "UnusedElaboratable" not in done.stderr
    assert done.stdout.strip() == "[True]"  # built, refused, silenced
