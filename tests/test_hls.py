"""HLS C++ backend: the C simulation equals the golden model bit for bit.

The C-simulation programs are compiled once per test session (two at a time) and shared.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("hls4ml")  # ships the ap_types headers the C simulation compiles against

from onchip.fixed import OVERFLOW_MODES, QUANT_MODES, Fmt, requantize  # noqa: E402
from onchip.hls import HlsLearner, HlsSimulationError, ap_types_dir, build_simulator, emit  # noqa: E402
from onchip.hls.build import CXXFLAGS, compiler  # noqa: E402
from onchip.model import GoldenLearner  # noqa: E402
from onchip.spec import PRESETS, Formats, LearnerSpec  # noqa: E402
from support import golden_final, random_stream, task_stream  # noqa: E402

SCHEDULES = ("sequential", "pipelined")

# Two learners deeper and narrower than the presets: hidden layers (so errors are
# back-propagated, through dphi and the clamp/ReLU gates), rounding modes other
# than RND_CONV, saturating and wrapping signals, a negative cell exponent.
STRESS = {
    "kan-deep": LearnerSpec(
        kind="kan", widths=(2, 3, 2), grid_size=4, spline_order=2, grid_range=(-1.0, 1.0),
        basis_table_bits=4, learning_rate=2.0**-1, init_scale=0.6, init_seed=3,
        schedule="pipelined", staleness=2,
        formats=Formats(
            input="ap_fixed<10,3,RND_INF,SAT>", coef="ap_fixed<10,2,RND_CONV,SAT>",
            basis="ap_fixed<9,2,RND_ZERO,SAT>", act="ap_fixed<9,3,TRN,SAT>",
            grad="ap_fixed<8,2,RND,WRAP>", acc="ap_fixed<20,4,TRN,WRAP>",
        ),
    ),
    "mlp-deep": LearnerSpec(
        kind="mlp", widths=(3, 5, 4, 2), learning_rate=2.0**-2, init_scale=1.5, init_seed=7,
        schedule="sequential", allow_acc_wrap=True,  # a narrow acc whose wrap is compared too
        formats=Formats(
            input="ap_fixed<12,3,RND_MIN_INF,SAT>", coef="ap_fixed<10,2,RND_INF,SAT_ZERO>",
            act="ap_fixed<9,3,TRN_ZERO,SAT>", grad="ap_fixed<8,2,RND_CONV,SAT>",
            acc="ap_fixed<18,5,RND,WRAP>",
        ),
    ),
}


def _specs() -> dict[str, LearnerSpec]:
    specs = {f"{name}/{s}": spec.replace(schedule=s) for name, spec in PRESETS.items() for s in SCHEDULES}
    specs.update(STRESS)
    return specs


@pytest.fixture(scope="session")
def learners() -> dict[str, HlsLearner]:
    specs = _specs()
    # compile in parallel (g++ runs outside the GIL), then load
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda s: build_simulator(emit(s)), specs.values()))
    return {key: HlsLearner(spec) for key, spec in specs.items()}


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("preset", list(PRESETS))
def test_presets_bit_exact(learners, preset, schedule):
    spec = PRESETS[preset].replace(schedule=schedule)
    hls = learners[f"{preset}/{schedule}"]
    for x_raw, y_raw in (random_stream(spec, 3000, 1), task_stream(spec, 6000, 2)):
        want_preds, want_theta = golden_final(spec, x_raw, y_raw)
        got_preds, got_theta = hls.run(x_raw, y_raw)
        np.testing.assert_array_equal(got_preds, want_preds)
        np.testing.assert_array_equal(got_theta, want_theta)
        # the stream did train the learner: the check is not between two idle models
        assert not np.array_equal(want_theta, GoldenLearner(spec).initial_theta)


@pytest.mark.parametrize("name", list(STRESS))
def test_stress_specs_bit_exact(learners, name):
    spec = STRESS[name]
    x_raw, y_raw = random_stream(spec, 4000, 5)
    want_preds, want_theta = golden_final(spec, x_raw, y_raw)
    got_preds, got_theta = learners[name].run(x_raw, y_raw)
    np.testing.assert_array_equal(got_preds, want_preds)
    np.testing.assert_array_equal(got_theta, want_theta)
    # the narrow formats are exercised at their limits
    act, coef = spec.formats.act, spec.formats.coef
    assert {act.min_raw, act.max_raw} <= set(want_preds.ravel().tolist())
    assert coef.max_raw in want_theta or coef.min_raw in want_theta or 0 in want_theta


def test_loaded_parameters_and_inference(learners):
    """Parameters loaded through the parameter port, and inference only, match the golden model."""
    spec = STRESS["kan-deep"]
    rng = np.random.default_rng(11)
    c = spec.formats.coef
    theta = rng.integers(c.min_raw, c.max_raw + 1, spec.parameter_count())
    x_raw, y_raw = random_stream(spec, 1500, 12)
    hls = HlsLearner(spec, theta)
    want_preds, want_theta = golden_final(spec, x_raw, y_raw, theta)
    got_preds, got_theta = hls.run(x_raw, y_raw)
    np.testing.assert_array_equal(got_preds, want_preds)
    np.testing.assert_array_equal(got_theta, want_theta)
    inf_preds, inf_theta = hls.run(x_raw, None, learn=False)
    np.testing.assert_array_equal(inf_preds, GoldenLearner(spec, theta).predict(x_raw))
    np.testing.assert_array_equal(inf_theta, theta)


# -- ap_fixed semantics against onchip.fixed ------------------------------------------
_SRC = Fmt(24, 9, True)  # raw values with 15 fractional bits


def _conversion_source(targets: list[Fmt]) -> str:
    lines = ['#include "onchip_fixed.h"', "#include <stdint.h>", 'extern "C" {']
    src = f"ap_fixed<{_SRC.width},{_SRC.int_bits}>"
    for k, fmt in enumerate(targets):
        lines.append(
            f"void conv{k}(const int64_t* in, int64_t* out, int n) {{ for (int i = 0; i < n; i++) {{"
            f" {src} x; x.range() = ap_int<64>(in[i]).range({_SRC.width - 1}, 0);"
            f" {fmt.cpp()} y = onchip::convert<{fmt.cpp()} >(x); out[i] = onchip::raw_bits(y).to_int64(); }} }}"
        )
    lines.append(
        "void shift(const int64_t* in, int64_t* out, int n) { for (int i = 0; i < n; i++) {"
        f" {src} x; x.range() = ap_int<64>(in[i]).range({_SRC.width - 1}, 0);"
        " ap_fixed<12,4,AP_RND_CONV,AP_SAT> y = onchip::scale_pow2<3>(x);"
        " ap_fixed<12,4,AP_RND_CONV,AP_SAT> z = onchip::scale_pow2<-2>(x);"
        " out[2 * i] = onchip::raw_bits(y).to_int64(); out[2 * i + 1] = onchip::raw_bits(z).to_int64(); } }"
    )
    lines.append("}")
    return "\n".join(lines) + "\n"


def test_ap_fixed_assignment_is_golden_requant(tmp_path):
    """Every (quantization, overflow) mode of ap_fixed assignment (as the emitted C++ spells it,
    onchip::convert) equals onchip.fixed.requantize, shifts beyond the source width included.

    An independent check of the premise of the backend: the hls4ml ap_types headers
    round then saturate/wrap exactly as the golden model's requant does.
    """
    import ctypes

    targets = [Fmt(7, 3, True, q, o) for q in QUANT_MODES for o in OVERFLOW_MODES]
    targets += [Fmt(6, 2, False, q, "SAT") for q in QUANT_MODES] + [Fmt(5, -1, True, "RND_CONV", "WRAP")]
    # shifts right by the source width and beyond (the headers assert on a plain assignment
    # there with any mode but TRN; onchip::convert spells the result out), and far left
    targets += [Fmt(7, 7 + _SRC.frac_bits - _SRC.width - d, True, q, o)
                for d in (-1, 0, 1, 2, 40) for q in QUANT_MODES for o in ("SAT", "WRAP")]
    targets += [Fmt(6, 6 - 40, True, "RND", "SAT"), Fmt(6, 6 - 40, False, "TRN_ZERO", "SAT_ZERO")]
    (tmp_path / "conv.cpp").write_text(_conversion_source(targets))
    (tmp_path / "onchip_fixed.h").write_text(emit(PRESETS["mlp-readout"]).files["onchip_fixed.h"])
    cxx, _ = compiler()
    subprocess.run(
        [cxx, *CXXFLAGS, "-shared", "-fPIC", f"-I{tmp_path}", f"-I{ap_types_dir()}", "conv.cpp", "-o", "conv.so"],
        cwd=tmp_path, check=True,
    )
    lib = ctypes.CDLL(str(tmp_path / "conv.so"))
    rng = np.random.default_rng(0)
    # every tie and near-tie around the target grids, plus random values over the whole range
    raw = np.concatenate([np.arange(-3000, 3000), rng.integers(_SRC.min_raw, _SRC.max_raw + 1, 20000)])
    raw = np.ascontiguousarray(raw, np.int64)
    ptr = ctypes.POINTER(ctypes.c_int64)
    for k, fmt in enumerate(targets):
        out = np.zeros_like(raw)
        getattr(lib, f"conv{k}")(raw.ctypes.data_as(ptr), out.ctypes.data_as(ptr), len(raw))
        np.testing.assert_array_equal(out, requantize(raw, _SRC.frac_bits, fmt), err_msg=str(fmt))
    out = np.zeros(2 * len(raw), np.int64)
    lib.shift(raw.ctypes.data_as(ptr), out.ctypes.data_as(ptr), len(raw))
    to = Fmt(12, 4, True, "RND_CONV", "SAT")
    np.testing.assert_array_equal(out[0::2], requantize(raw, _SRC.frac_bits + 3, to))
    np.testing.assert_array_equal(out[1::2], requantize(raw, _SRC.frac_bits - 2, to))


# -- compile cache ---------------------------------------------------------------------
def test_compile_cache(learners, tmp_path):
    project = emit(PRESETS["kan-regression"])
    path, built = build_simulator(project)
    assert not built  # the session fixture compiled it
    assert path.is_file()
    # a changed source is a different entry; a second call hits it
    changed = emit(PRESETS["kan-regression"].replace(init_seed=5, init_scale=0.5))
    root = tmp_path / "cache"
    p1, b1 = build_simulator(changed, root=root)
    p2, b2 = build_simulator(changed, root=root)
    assert (b1, b2) == (True, False) and p1 == p2 and p1.parent.parent == root
    assert p1.parent != path.parent
    # a failed compile leaves neither an entry nor a build folder
    broken = type(project)(project.top, {**project.files, f"{project.top}.cpp": "this is not C++\n"})
    with pytest.raises(RuntimeError, match="g\\+\\+ failed"):
        build_simulator(broken, root=root)
    entries = sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock"))
    assert [e for e in entries if not e.startswith("hls_pch-")] == [p1.parent.name]


def test_emit_rejects_bad_arguments():
    spec = PRESETS["mlp-readout"]
    with pytest.raises(ValueError, match="--top '9lives': a module name must start with a letter"):
        emit(spec, top="9lives")
    with pytest.raises(ValueError, match="theta must have shape"):
        emit(spec, theta=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="outside"):
        emit(spec, theta=np.full(spec.parameter_count(), 1 << 20, np.int64))
    with pytest.raises(ValueError, match="clock_ns"):
        emit(spec, clock_ns=0)


def test_fast_timing_emits_the_same_project():
    """timing is an RTL register plan: Vitis schedules its own registers from the clock, so a fast
    spec gives the same C++ (the same numbers) as its compact twin."""
    for name in ("kan-readout", "mlp-readout"):
        spec = PRESETS[name]
        assert emit(spec.replace(timing="fast")).files == emit(spec).files


def test_emitted_types_are_the_golden_formats():
    spec = STRESS["kan-deep"]
    header = emit(spec).files["onchip_learner.h"]
    f = spec.formats
    for name in ("input", "coef", "basis", "act", "grad", "acc"):
        assert f"typedef {getattr(f, name).cpp()} {name}_t;" in header
    assert f"typedef {f.act.cpp()} out_t;" in header  # no output format: predictions and targets in act
    assert "static const int STALENESS = 2;" in header


def test_cli_writes_a_self_checking_vitis_project(learners, tmp_path, capsys):
    """`onchip hls` writes the project; its Vitis test bench, built with g++, passes on the golden data."""
    from onchip.cli import main

    out = tmp_path / "proj"
    assert main(["hls", "--spec", "kan-readout", "--out", str(out), "--samples", "200", "--csim"]) == 0
    wrote = capsys.readouterr().out.splitlines()[-2]
    assert wrote.startswith(f"wrote {out}/ (") and wrote.endswith(")"), wrote  # as every command's folder line
    listed = wrote[len(f"wrote {out}/ ("):-1].split(", ")
    assert sorted(listed) == sorted(p.name + "/" * p.is_dir() for p in out.iterdir() if p.name[0] != "."), wrote
    for name in ("onchip_learner.cpp", "onchip_learner.h", "onchip_tb.cpp", "run_hls.tcl",
                 "tb_data/stimulus.dat", "tb_data/expected.dat"):
        assert (out / name).is_file(), name
    tcl = (out / "run_hls.tcl").read_text()
    for step in ("csim_design", "csynth_design", "cosim_design", "export_design"):
        assert step in tcl
    cxx, _ = compiler()
    subprocess.run([cxx, "-O0", "-std=c++14", "-w", "-I.", f"-I{ap_types_dir()}", "onchip_tb.cpp",
                    "onchip_learner.cpp", "-o", "tb"], cwd=out, check=True)
    ok = subprocess.run(["./tb"], cwd=out, capture_output=True, text=True)
    assert ok.returncode == 0 and "0 mismatches" in ok.stdout
    # a corrupted expectation is caught by the test bench
    exp = out / "tb_data" / "expected.dat"
    lines = exp.read_text().splitlines()
    fields = lines[3].split()  # prediction(s), then the decision
    fields[0] = str(int(fields[0]) + 1)
    lines[3] = " ".join(fields)
    exp.write_text("\n".join(lines) + "\n")
    bad = subprocess.run(["./tb"], cwd=out, capture_output=True, text=True)
    assert bad.returncode == 1 and "1 mismatches" in bad.stdout


def test_two_learners_share_one_cpp_file_and_one_program(tmp_path):
    """The headers of two learners of different tops go into one file (their formats, sizes and
    tables each in the namespace <top>_ns), and both top functions link into one program: each
    answers a parameter read with its own initial parameters."""
    from onchip.hls.emit import namespace, write
    from onchip.model.golden import initial_parameters

    pair = {"qubit_hls": PRESETS["kan-readout"], "mlp_hls": PRESETS["mlp-readout"].replace(init_seed=5)}
    for top, spec in pair.items():  # each project in its own folder, as onchip hls writes it
        (tmp_path / top).mkdir()
        write(emit(spec, top=top), tmp_path / top)
    main = ['#include <cstdio>', '#include "qubit_hls.h"', '#include "mlp_hls.h"', "int main() {"]
    for top, spec in pair.items():
        ns = namespace(top)
        main += [f"  {{ hls::stream<axis_word> s_in, s_out;",
                 f"    {top}(s_in, s_out, {ns}::OP_RESET, 0);",
                 f"    {top}(s_in, s_out, {ns}::OP_READ, 0);",
                 f"    for (int q = 0; q < {ns}::N_PARAM; q++)",
                 f'      std::printf("%lld ", (long long) s_out.read().data.to_int64());',
                 '    std::printf("\\n"); }']
    (tmp_path / "both.cpp").write_text("\n".join(main + ["  return 0;", "}"]) + "\n")
    cxx, _ = compiler()
    subprocess.run([cxx, "-O0", "-std=c++14", "-w", "-Iqubit_hls", "-Imlp_hls", f"-I{ap_types_dir()}", "both.cpp",
                    "qubit_hls/qubit_hls.cpp", "mlp_hls/mlp_hls.cpp", "-o", "both"], cwd=tmp_path, check=True)
    out = subprocess.run(["./both"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.splitlines()
    assert [list(map(int, line.split())) for line in out] == [initial_parameters(s).tolist() for s in pair.values()]


@pytest.mark.parametrize("top", ["hls", "std", "stdout", "EOF", "size_t", "int64_t", "ap_int", "axis_word",
                                 "ONCHIP_AXIS_WORD", "N_IN", "coef_t", "onchip"])
def test_a_top_the_cpp_already_uses_is_refused_at_parse_time(top, tmp_path, capsys):
    from onchip.cli import main

    for command in (["hls", "--csim"], ["verify", "--backends", "hls"]):
        out = tmp_path / "o"
        assert main([*command, "--spec", "kan-regression", "--top", top, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--top: {top!r}: a name the HLS C++ already uses" in err, err
        assert not out.exists()


def test_csim_compiles_the_files_written_under_their_top(tmp_path, capsys, monkeypatch):
    """`hls --csim` and `verify --backends hls` build the project `hls` writes (its top, its reset
    state from --theta), test bench included, not the default top's."""
    from onchip.cli import main
    from onchip.hls import backend
    from onchip.model.golden import initial_parameters

    built = []

    def record(project, **kw):
        built.append((project, kw.get("testbench")))
        return build_simulator(project, **kw)

    monkeypatch.setattr(backend, "build_simulator", record)
    spec = PRESETS["kan-regression"]
    theta = tmp_path / "theta.npy"
    np.save(theta, initial_parameters(spec.replace(init_seed=9)))
    out = tmp_path / "proj"
    assert main(["hls", "--spec", "kan-regression", "--top", "readout_core", "--theta", str(theta),
                 "--samples", "16", "--csim", "--out", str(out)]) == 0
    assert "bit-exact" in capsys.readouterr().out
    (project, testbench), = built
    assert project.top == "readout_core" and testbench
    assert project.files == {name: (out / name).read_text() for name in project.files}
    built.clear()
    assert main(["verify", "--spec", "kan-regression", "--top", "readout_core", "--theta", str(theta),
                 "--backends", "hls", "--samples", "64", "--out", str(tmp_path / "v")]) == 0
    (project, testbench), = built
    assert project.top == "readout_core" and testbench
    assert project.files["readout_core.h"] == (out / "readout_core.h").read_text()


@pytest.mark.slow
def test_the_taken_cpp_names_are_what_g_plus_plus_finds_today():
    """hw/cxx_names.py is generated (python -m onchip.hls.taken_names); it still holds every name
    g++ finds taken in the emitted KAN and MLP projects."""
    from onchip.hls.taken_names import taken_names
    from onchip.hw.cxx_names import TAKEN

    for preset in ("kan-regression", "mlp-regression"):
        missing = taken_names(PRESETS[preset].replace(schedule="pipelined")) - TAKEN
        assert not missing, sorted(missing)[:20]


def test_cli_rejects_bad_samples(tmp_path):
    from onchip.cli import main

    assert main(["hls", "--spec", "kan-readout", "--out", str(tmp_path / "o"), "--samples", "0"]) == 2
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, words", [
    (["--samples", "10000000000"], ["--samples", "[1, 100000000]"]),  # refused before its arrays exist
    (["--part", "foo"], ["--part", "'foo'", "Xilinx part name"]),
    (["--part", 'xc7a35t"; puts [pwd]; set x "'], ["--part", "Xilinx part name"]),  # never into the Tcl
])
def test_cli_rejects_a_bad_flag_before_writing(tmp_path, capsys, argv, words):
    from onchip.cli import main

    assert main(["hls", "--spec", "kan-readout", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert all(word in err for word in words) and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="not a Xilinx part name"):
        emit(PRESETS["kan-readout"], part='xc7a35t"; puts [pwd]; set x "')


# -- requantisation beyond the source width; C-simulation failures --------------------------
#: Every format 6 bits but the accumulator, learning rate 2^-15: the update e * a * 2^-15
#: (12 bits, 21 fractional) is rounded into coef (3 fractional) by a shift of 18 > 12 bits,
#: where a plain ap_fixed assignment asserts in the ap_types headers.
NARROW_SLOW = LearnerSpec(
    kind="mlp", widths=(2, 4, 1), learning_rate=2.0**-15,
    formats=Formats(input="ap_fixed<6,3,RND_CONV,SAT>", coef="ap_fixed<6,3,RND_CONV,SAT>",
                    basis="ap_fixed<6,3,RND_CONV,SAT>", act="ap_fixed<6,3,RND_CONV,SAT>",
                    grad="ap_fixed<6,3,RND_CONV,SAT>", acc="ap_fixed<20,8,TRN,WRAP>"),
)


def test_update_shift_beyond_the_product_width():
    """The narrow slow learner runs on the C simulation, equal to golden (and to the RTL)."""
    from onchip.backends import available_backends, get_backend

    spec = NARROW_SLOW
    x_raw, y_raw = task_stream(spec, 3000, 4)
    want_preds, want_theta = golden_final(spec, x_raw, y_raw)
    got_preds, got_theta = HlsLearner(spec).run(x_raw, y_raw)
    np.testing.assert_array_equal(got_preds, want_preds)
    np.testing.assert_array_equal(got_theta, want_theta)
    if "rtl" in available_backends():
        rtl_preds, rtl_theta = get_backend("rtl").run(spec, x_raw, y_raw)
        np.testing.assert_array_equal(rtl_preds, want_preds)
        np.testing.assert_array_equal(rtl_theta, want_theta)


def _asserting_project(spec: LearnerSpec, **kw):
    """The project of ``spec`` (``kw``: :func:`emit`'s) with a read beyond an ap_int's MSB in its top
    function: every operation but RESET trips the ap_types assertion (SIGABRT) in C simulation."""
    project = emit(spec, **kw)
    name = f"{project.top}.cpp"
    anchor = "    if (op == OP_RESET) {"
    assert anchor in project.files[name]
    probe = "    if (op != OP_RESET) { ap_int<4> probe = 0; volatile bool bit = probe[int(op) + 7]; (void)bit; }\n"
    return type(project)(project.top, {**project.files, name: project.files[name].replace(anchor, probe + anchor, 1)})


@pytest.fixture
def asserting_hls(monkeypatch):
    """The HLS backend builds the asserting project of every spec (see :func:`_asserting_project`)."""
    import onchip.hls.backend as backend

    monkeypatch.setattr(backend, "emit", _asserting_project)


def test_csim_failure_leaves_python_alive(asserting_hls):
    spec = PRESETS["kan-readout"]
    x_raw, y_raw = random_stream(spec, 100, 1)
    with pytest.raises(HlsSimulationError) as info:
        HlsLearner(spec).run(x_raw, y_raw)
    message = str(info.value)
    assert "\n" not in message
    assert "'kan-readout'" in message and "SIGABRT" in message and "beyond MSB" in message
    # this process carries on, and an intact program of the same spec still runs
    import onchip.hls.backend as backend

    backend.emit = emit
    preds, _ = HlsLearner(spec).run(x_raw, y_raw)
    np.testing.assert_array_equal(preds, golden_final(spec, x_raw, y_raw)[0])


def test_cli_reports_a_csim_failure_in_one_line(asserting_hls, tmp_path, capsys):
    from onchip.cli import main

    out = tmp_path / "run"
    code = main(["run", "--model", "kan", "--backend", "hls", "--samples", "300", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith("onchip run: tool failed: HLS C simulation of spec 'kan-readout'"), err
    assert not out.exists()
