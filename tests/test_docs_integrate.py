"""The "Integrate it" page runs: its shell blocks, its Verilog top built and run by the page's own
Verilator command (-Wall, no waiver: the predictions it prints are the golden model's), and the
Amaranth design it writes lints against the generated learner. Its other Python blocks run in
test_docs_snippets.py; its three-learner build (the largest) in test_docs_integrate_three.py, so
that the two halves run side by side on two test workers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "integrate.md"
TEXT = PAGE.read_text()
SHELL = re.findall(r"<!-- test: sh -->\s*\n```sh\n(.*?)```", TEXT, re.S)
FILES = re.findall(r"<!-- test: file (\S+) -->\s*\n```\w+\n(.*?)```", TEXT, re.S)
BUILD = re.findall(r"<!-- test: sh-build -->\s*\n```sh\n(.*?)```", TEXT, re.S)
PYTHON = re.findall(r"<!-- test: exec -->\s*\n```python\n(.*?)```", TEXT, re.S)
#: the Amaranth block: run once, here, where its output is linted (test_docs_snippets runs only "exec" blocks)
AMARANTH = re.findall(r"<!-- test: exec-lint -->\s*\n```python\n(.*?)```", TEXT, re.S)
#: the page's shell block that builds three learners in one Verilator simulation (test_docs_integrate_three.py)
THREE = [b for b in SHELL if "three_learners_verilator.py" in b]


def _verilator(*args, cwd):
    from onchip.verilator.toolchain import tool_env, verilator_root

    return subprocess.run([str(verilator_root() / "bin" / "verilator"), *args], cwd=cwd, env=tool_env(),
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def page_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("integrate")
    (folder / "examples").symlink_to(PAGE.parents[1] / "examples")  # the page's paths are the repository's
    for block in SHELL:
        if block in THREE:
            continue
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=folder, capture_output=True, text=True)
        assert proc.returncode == 0, block + proc.stdout + proc.stderr
    return folder


def test_the_page_has_every_kind_of_block():
    assert len(SHELL) == 6 and len(THREE) == 1 and len(FILES) == 1 and len(BUILD) == 1 and len(AMARANTH) == 1
    assert len(PYTHON) >= 2 and not any("Instance(" in b for b in PYTHON)


def test_shell_blocks_write_what_the_page_uses(page_dir):
    assert (page_dir / "gen" / "readout" / "readout_learner_inst.v").is_file()
    assert "module mlp_learner" in (page_dir / "gen" / "mlp" / "mlp_learner.v").read_text()
    for q in ("qubit0", "qubit1"):
        assert f"{q}_learner_axis" in (page_dir / "ip" / q / "package_ip.tcl").read_text()
        assert (page_dir / "ip" / q / f"{q}_learner_axis_component.vhd").is_file()
        info = json.loads((page_dir / "ip" / q / f"{q}_learner.json").read_text())
        assert info["clock"]["freq_hz"] == 250_000_000 and info["axis"]["packet"] == 16
    # two HLS learners, each header's names in its own namespace; the g++-built test bench exited 0
    # with golden data to compare with (it exits 1 on a mismatch)
    assert "namespace qubit_hls_ns {" in (page_dir / "hls" / "qubit" / "qubit_hls.h").read_text()
    assert "namespace mlp_hls_ns {" in (page_dir / "hls" / "mlp" / "mlp_hls.h").read_text()
    assert (page_dir / "hls" / "qubit" / "tb_data" / "expected.dat").is_file()
    assert (page_dir / "hls" / "qubit" / "tb").is_file()


def test_the_ecp5_folder_lints_with_its_primitive_model(page_dir):
    folder = page_dir / "gen" / "ecp5"
    assert "MULT18X18D #(" in (folder / "ecp5_learner.v").read_text()
    lint = _verilator("--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "ecp5_learner",
                      "ecp5_learner.v", "MULT18X18D_sim.v", cwd=folder)
    assert lint.returncode == 0, lint.stderr


def test_the_verilog_top_built_as_the_page_says_prints_the_golden_predictions(page_dir):
    from onchip.model import GoldenLearner
    from onchip.spec import load_spec

    (name, source), = FILES
    (page_dir / name).write_text(source)
    (block,) = BUILD
    # the page's command as it stands: -Wall, and nothing waived on the command line (a warning of
    # the generated file or of the page's top would stop the build); the PCH make variable
    assert "-Wall" in block and "-Wno" not in block and 'CFG_CXXFLAGS_PCH_I=-include' in block
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=page_dir, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "%Warning" not in run.stderr, run.stderr[-3000:]
    got = [[int(v) for v in ln.split()[1::2]] for ln in run.stdout.splitlines() if ln.startswith("prediction")]
    g = GoldenLearner(load_spec("kan-paper"))
    want = g.run(np.full((3, 1), 1024), np.full((3, 1), 512))[:, 0]
    assert [p for p, _ in got] == want.tolist()
    assert [d for _, d in got] == [int(p >= 0) for p in want]


def test_the_amaranth_design_lints_with_the_learner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (block,) = AMARANTH
    exec(compile(block, "<integrate amaranth>", "exec"), {"__name__": "__docs__"})
    lint = _verilator("--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "system",
                      "system.v", "readout_learner.v", cwd=tmp_path)
    assert lint.returncode == 0 and "%Error" not in lint.stderr, lint.stderr[-3000:]
    assert "readout_learner learner" in (tmp_path / "system.v").read_text()
