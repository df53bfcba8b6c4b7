"""Many channels, one datapath: N independent learners in one spec, each exact.

The contract (docs/spec.md, ``channels``): channel c's predictions and parameters equal those of
a single-channel *sequential* learner run on channel c's samples alone, whatever the order of
channels in the stream. Checked here against N separate single-channel golden learners, on
round-robin, random and bursty channel orders; then the HLS C simulation against the golden
model, the float twin per channel, and every bad input refused in one line.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import onchip
from onchip.model import GoldenLearner
from onchip.spec import PRESETS
from support import random_stream

N = 3  # channels of the specs below


def single(spec):
    """The one-channel sequential learner each channel of ``spec`` must equal."""
    return spec.replace(channels=1, schedule="sequential", staleness=0)


SPECS = {
    "kan": PRESETS["kan-regression"].replace(channels=N),
    "mlp": PRESETS["mlp-readout"].replace(channels=N),
    # a pipelined spec: with channels the schedule's staleness does not apply
    "kan-pipelined": PRESETS["kan-readout"].replace(schedule="pipelined", staleness=2, channels=N),
}


def orders(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Channel orders of ``n`` samples: round robin, uniform random, and bursts of one channel
    (runs of 1 to 40 samples), each channel present."""
    rng = np.random.default_rng(seed)
    bursts = np.concatenate([np.full(rng.integers(1, 41), rng.integers(N)) for _ in range(n)])[:n]
    bursts[:N] = np.arange(N)
    return {"round-robin": np.arange(n) % N, "random": rng.integers(0, N, n), "bursts": bursts}


def reference(spec, x, y, channel, theta=None, kind=None):
    """Predictions and (N, P) parameters of N separate single-channel sequential learners, each run
    on its channel's samples (``theta`` (N, P): each its own start)."""
    preds = np.zeros((len(x), spec.n_out), np.int64)
    banks = []
    for c in range(spec.channels):
        rows = np.flatnonzero(channel == c)
        g = GoldenLearner(single(spec), None if theta is None else theta[c])
        preds[rows] = g.run(x[rows], y[rows], None if kind is None else kind[rows])
        g.flush()
        banks.append(g.theta)
    return preds, np.stack(banks)


def bank_thetas(spec, seed: int) -> np.ndarray:
    """(N, P) raw starting parameters, a different draw per channel."""
    rng = np.random.default_rng(seed)
    c = spec.formats.coef
    return rng.integers(c.min_raw // 4, c.max_raw // 4, (spec.channels, spec.parameter_count()))


@pytest.mark.parametrize("order", ["round-robin", "random", "bursts"])
@pytest.mark.parametrize("name", list(SPECS))
def test_each_channel_equals_its_own_sequential_learner(name, order):
    spec = SPECS[name]
    x, y = random_stream(spec, 900, seed=1)
    channel = orders(len(x))[order]
    want_preds, want_theta = reference(spec, x, y, channel)
    g = GoldenLearner(spec)
    # over several calls: the banks carry over between them
    preds = np.concatenate([g.run(x[a:b], y[a:b], channel=channel[a:b]) for a, b in ((0, 1), (1, 400), (400, 900))])
    np.testing.assert_array_equal(preds, want_preds)
    assert g.theta.shape == (N, spec.parameter_count())
    np.testing.assert_array_equal(g.theta, want_theta)
    # and the channels really learned apart: a single learner on the whole stream differs
    assert not np.array_equal(GoldenLearner(single(spec)).run(x, y), preds)


def test_channel_banks_start_from_their_own_theta_and_reset_and_load_per_channel():
    spec = SPECS["kan"]
    x, y = random_stream(spec, 300, seed=2)
    channel = orders(len(x), seed=2)["random"]
    theta = bank_thetas(spec, 3)
    kind = np.random.default_rng(4).integers(0, 2, len(x))  # TARGET and PREDICT samples
    want_preds, want_theta = reference(spec, x, y, channel, theta, kind)
    g = GoldenLearner(spec, theta)
    np.testing.assert_array_equal(g.run(x, y, kind, channel), want_preds)
    np.testing.assert_array_equal(g.theta, want_theta)
    assert g.parameters()[0]["coef"].shape == (N, 1, 1, spec.n_coef)
    np.testing.assert_array_equal(g.parameters(channel=1)[0]["coef"].ravel(), want_theta[1])
    g.reset(channel=1)  # one channel back to its start, the others keep what they learned
    np.testing.assert_array_equal(g.theta, np.stack([want_theta[0], theta[1], want_theta[2]]))
    g.load(theta[0], channel=2)
    np.testing.assert_array_equal(g.theta[2], theta[0])
    g.load(theta[2])  # (P,): every channel
    np.testing.assert_array_equal(g.theta, np.broadcast_to(theta[2], theta.shape))
    g.reset()
    np.testing.assert_array_equal(g.theta, theta)


def test_one_channel_is_unchanged():
    spec = PRESETS["kan-regression"]
    x, y = random_stream(spec, 200, seed=5)
    g, h = GoldenLearner(spec), GoldenLearner(spec)
    np.testing.assert_array_equal(g.run(x, y), h.run(x, y, channel=np.zeros(len(x), np.int64)))
    assert g.theta.shape == (spec.parameter_count(),)
    assert onchip.Learner(spec).parameters.shape == (spec.parameter_count(),)


# -- the Python API ------------------------------------------------------------------------------
def test_learner_runs_channels_and_equals_the_golden_model():
    spec = SPECS["kan"]
    rng = np.random.default_rng(6)
    x = rng.uniform(-2, 2, (400, 1))
    y = np.sin(2 * x)
    channel = orders(len(x), seed=6)["bursts"]
    learner = onchip.Learner(spec)
    assert learner.parameters.shape == (N, spec.parameter_count())
    preds = learner.run(x, y, channel=channel)
    g = GoldenLearner(spec)
    want = g.run(g.quantize_inputs(x), g.quantize_targets(y), channel=channel)
    np.testing.assert_array_equal(preds, g.dequantize_outputs(want))
    np.testing.assert_array_equal(learner.parameters, g.theta)
    np.testing.assert_array_equal(learner.predict(x[:5], channel=channel[:5]),
                                  g.dequantize_outputs(g.predict(g.quantize_inputs(x[:5]), channel[:5])))
    step = learner.step(x[0], y[0], channel=2)  # one sample, its channel an integer
    np.testing.assert_array_equal(step[0], g.dequantize_outputs(g.step(g.quantize_inputs(x[:1])[0],
                                                                     g.quantize_targets(y[:1])[0], channel=2)))
    np.testing.assert_array_equal(learner.parameters, g.theta)


def test_run_backend_passes_channels():
    from onchip.run import run_backend

    spec = SPECS["mlp"]
    rng = np.random.default_rng(7)
    x, y = rng.uniform(-2, 2, (200, spec.n_in)), rng.uniform(-1, 1, (200, spec.n_out))
    channel = np.arange(len(x)) % N
    theta = bank_thetas(spec, 8)
    out = run_backend("golden", spec, x, y, progress=False, theta=theta, channel=channel)
    g = GoldenLearner(spec, theta)
    np.testing.assert_array_equal(out.raw, g.run(g.quantize_inputs(x), g.quantize_targets(y), channel=channel))
    np.testing.assert_array_equal(out.theta, g.theta)


def test_float_twin_learns_each_channel_on_its_own():
    pytest.importorskip("torch")
    from onchip.model.float_twin import FloatTwin

    spec = SPECS["kan"]
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 2, (120, 1))
    y = np.sin(2 * x)
    channel = orders(len(x), seed=9)["random"]
    twin = FloatTwin(spec)
    preds = twin.run(x, y, channel=channel)
    assert twin.theta.shape == (N, spec.parameter_count())
    for c in range(N):
        rows = channel == c
        one = FloatTwin(single(spec))
        np.testing.assert_array_equal(preds[rows], one.run(x[rows], y[rows]))
        np.testing.assert_array_equal(twin.theta[c].numpy(), one.theta.numpy())
    np.testing.assert_array_equal(twin.predict(x[:4], channel[:4]),
                                  np.stack([FloatTwin(single(spec), twin.theta[c].numpy()).predict(x[k:k + 1])[0]
                                            for k, c in enumerate(channel[:4])]))
    learner = onchip.Learner(spec, "float")
    np.testing.assert_array_equal(learner.run(x, y, channel=channel), preds)
    assert learner.parameters.shape == (N, spec.parameter_count())


# -- bad input: one line naming the field and the bad value --------------------------------------
BAD_CHANNELS = [
    (None, r"^channel is required: the spec has channels = 3; pass channel: \(6,\) integers in \[0, 3\)"),
    ([0, 1, 2, 0, 1], r"^channel must have shape \(6,\) \(one per sample\), got \(5,\)$"),
    ([0, 1, 2, 3, 1, 0], r"^channel\[3\] = 3 is not a channel of the spec \(channels = 3: 0 to 2\)$"),
    ([0, -1, 2, 0, 1, 0], r"^channel\[1\] = -1 is not a channel of the spec"),
    ([0, 1, 1.5, 0, 1, 0], r"^channel must hold integers in \[0, 3\), got channel\[2\] = 1\.5 \(dtype float64\)$"),
    ([True] * 6, r"^channel must hold integers in \[0, 3\), got channel\[0\] = True \(dtype bool\)$"),
]


@pytest.mark.parametrize("channel, match", BAD_CHANNELS)
def test_a_bad_channel_is_refused_naming_it(channel, match):
    spec = SPECS["kan"]
    x, y = random_stream(spec, 6, seed=10)
    calls = [lambda: GoldenLearner(spec).run(x, y, channel=channel),
             lambda: GoldenLearner(spec).predict(x, channel=channel),
             lambda: onchip.Learner(spec).run(x / 2**12, y / 2**12, channel=channel),
             lambda: onchip.Learner(spec).predict(x / 2**12, channel=channel),
             lambda: onchip.get_backend("golden").run(spec, x, y, channel=channel)]
    for call in calls:
        with pytest.raises(ValueError, match=match) as info:
            call()
        assert "\n" not in str(info.value)


def test_a_channel_on_a_single_channel_spec_must_be_zero():
    spec = PRESETS["kan-regression"]
    x, y = random_stream(spec, 4, seed=11)
    with pytest.raises(ValueError, match=r"^channel\[2\] = 1 is not a channel of the spec \(channels = 1: 0 to 0\)"):
        GoldenLearner(spec).run(x, y, channel=[0, 0, 1, 0])


P = SPECS["kan"].parameter_count()


@pytest.mark.parametrize("shape", [(2, P), (4, P), (N, P - 1), (P, N), (N, 1, P)])
def test_theta_of_the_wrong_shape_names_the_shapes_it_takes(shape):
    spec = SPECS["kan"]
    want = rf"^theta must have shape \({N}, {P}\) \(one row per channel\) or \({P},\) \(every channel\), got "
    theta = np.zeros(shape, np.int64)
    for make in (lambda: GoldenLearner(spec, theta), lambda: onchip.Learner(spec, theta=theta),
                 lambda: GoldenLearner(spec).load(theta)):
        with pytest.raises(ValueError, match=want + re.escape(str(shape)) + "$"):
            make()
    with pytest.raises(ValueError, match=rf"^theta must have shape \({P},\), got \({N}, {P}\)$"):
        GoldenLearner(spec).load(np.zeros((N, P), np.int64), channel=1)  # one channel's bank is (P,)


def test_theta_of_the_wrong_shape_float_twin():
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match=rf"^theta must have shape \({N}, {P}\) \(one row per channel\) or \({P},\)"):
        onchip.Learner(SPECS["kan"], "float", theta=np.zeros((2, P)))


@pytest.mark.parametrize("backend", ["rtl", "cocotb"])
@pytest.mark.parametrize("channel, match", BAD_CHANNELS[:3])
def test_the_hardware_backends_refuse_a_bad_channel_before_building(backend, channel, match):
    spec = SPECS["kan"]
    x, y = random_stream(spec, 6, seed=12)
    with pytest.raises(ValueError, match=match):
        onchip.get_backend(backend).run(spec, x, y, channel=channel)


@pytest.mark.parametrize("command", [["run", "--samples", "100", "--qubits", "3"], ["hls"]])
def test_cli_refuses_a_theta_of_the_wrong_shape(tmp_path, capsys, command):
    from onchip.cli import main

    spec = SPECS["kan"]
    (tmp_path / "spec.toml").write_text(spec.to_toml())
    np.save(tmp_path / "theta.npy", np.zeros((2, P), np.int64))
    out = tmp_path / "out"
    assert main([*command, "--spec", str(tmp_path / "spec.toml"), "--theta", str(tmp_path / "theta.npy"),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "--theta" in err and f"theta must have shape (3, {P}) (one row per channel) or ({P},) (every channel), got (2, {P})" in err, err
    assert not out.exists()


# -- HLS C simulation == golden, per channel ------------------------------------------------------
@pytest.fixture(scope="module")
def hls_learners():
    pytest.importorskip("hls4ml")  # ships the ap_types headers the C simulation compiles against
    from concurrent.futures import ThreadPoolExecutor

    from onchip.hls import HlsLearner

    names = ("kan-pipelined", "mlp")
    with ThreadPoolExecutor(max_workers=2) as pool:  # g++ runs outside the GIL
        built = list(pool.map(lambda n: HlsLearner(SPECS[n], opt="O0"), names))
    return dict(zip(names, built))


@pytest.mark.parametrize("name", ["kan-pipelined", "mlp"])
def test_hls_csim_equals_the_golden_model_per_channel(hls_learners, name):
    from onchip.hls import HlsLearner

    spec = SPECS[name]
    hls = hls_learners[name]
    x, y = random_stream(spec, 1500, seed=13)
    for order, channel in orders(len(x), seed=13).items():
        g = GoldenLearner(spec)
        got_preds, got_theta = hls.run(x, y, channel=channel)
        np.testing.assert_array_equal(got_preds, g.run(x, y, channel=channel), err_msg=order)
        np.testing.assert_array_equal(got_theta, g.theta, err_msg=order)
    # every sample kind, and a bank per channel loaded through the parameter port
    kind = np.random.default_rng(14).integers(0, 3, len(x))
    y_k = np.where(kind[:, None] == 2, y // 16, y)  # ERROR rows: small errors in the grad format
    theta = bank_thetas(spec, 15)
    g = GoldenLearner(spec, theta)
    got = HlsLearner(spec, theta, opt="O0").run(x, y_k, kind=kind, channel=channel)
    np.testing.assert_array_equal(got.predictions, g.run(x, y_k, kind, channel))
    np.testing.assert_array_equal(got.theta, g.theta)
    assert not np.array_equal(g.theta, theta)  # it learned: not two idle models compared
    np.testing.assert_array_equal(hls.run(x, None, learn=False, channel=channel).predictions,
                                  GoldenLearner(spec).predict(x, channel))
    with pytest.raises(ValueError, match=r"^channel is required"):
        hls.run(x, y)


# A driver of the top function that sends what the host never sends: channel words >= N.
_BAD_CHANNEL_DRIVER = r"""
#include <stdio.h>
#include "onchip_learner.cpp"

static void push(hls::stream<axis_word>& s, long long raw) {
    axis_word w; w.data = ap_int<32>(raw); w.keep = -1; w.strb = -1; w.last = 0; s.write(w);
}
static void read_bank(int c) {  // prints: the call's flag, then its words and the TLAST of each
    hls::stream<axis_word> s_in, s_out;
    int flag = ONCHIP_TOP(s_in, s_out, OP_READ, c);
    printf("read %d %d", c, flag);
    while (!s_out.empty()) { axis_word w = s_out.read(); printf(" %lld:%d", (long long)w.data.to_int64(), (int)w.last); }
    printf("\n");
}
int main() {
    long long n, words;
    scanf("%lld %lld", &n, &words);  // a run of n samples, `words` words each
    hls::stream<axis_word> s_in, s_out;
    for (long long k = 0; k < n * words; k++) { long long v; scanf("%lld", &v); push(s_in, v); }
    int flag = ONCHIP_TOP(s_in, s_out, OP_RUN, n);
    printf("run %d %d", flag, (int)s_in.empty());
    while (!s_out.empty()) printf(" %lld", (long long)s_out.read().data.to_int64());
    printf("\n");
    for (int c = 0; c <= N_CHANNELS; c++) read_bank(c);  // the last names no bank
    for (int q = 0; q < N_PARAM; q++) push(s_in, 1);  // a load naming no bank
    flag = ONCHIP_TOP(s_in, s_out, OP_LOAD, N_CHANNELS + 2);
    printf("load %d %d %d\n", flag, (int)s_in.empty(), (int)s_out.empty());
    read_bank(0);
    printf("reset %d\n", (int)ONCHIP_TOP(s_in, s_out, OP_RESET, 0));
    read_bank(0);
    return 0;
}
"""


def test_hls_drops_a_sample_and_answers_a_port_call_naming_no_channel_as_the_core_does(tmp_path):
    """Outside the host's contract, as the RTL core (docs/spec.md, Channels): a sample whose channel
    word is >= N is dropped (no prediction words, no update, the other samples as if it was never
    sent), a read naming no bank answers N_PARAM zeros with TLAST on the last, a load naming none
    takes and drops its words, and every call returns the sticky channel_error until OP_RESET.
    (The C++ once clamped such a sample to channel N-1 and left a bad load's words in the stream.)"""
    pytest.importorskip("hls4ml")
    import subprocess

    from onchip.hls import ap_types_dir
    from onchip.hls.build import compiler
    from onchip.hls.emit import emit, write

    spec = SPECS["mlp"]
    write(emit(spec), tmp_path)
    (tmp_path / "driver.cpp").write_text(_BAD_CHANNEL_DRIVER)
    cxx, _ = compiler()
    subprocess.run([cxx, "-O0", "-std=c++17", "-w", "-I.", f"-I{ap_types_dir()}", "driver.cpp", "-o", "driver"],
                   cwd=tmp_path, check=True)
    x, y = random_stream(spec, 8, seed=21)
    channel = np.array([0, 1, 2, N, 2, 1, N + 5, 0])  # two samples name no channel
    good = channel < N
    words = np.hstack([x, y, channel[:, None]])
    stdin = f"{len(x)} {words.shape[1]} " + " ".join(map(str, words.ravel()))
    lines = subprocess.run(["./driver"], cwd=tmp_path, input=stdin, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    g = GoldenLearner(spec)
    preds = g.run(x[good], y[good], channel=channel[good])
    run = lines[0].split()
    assert run[:3] == ["run", "1", "1"]  # channel_error set; every word taken
    out = np.array(run[3:], np.int64).reshape(-1, spec.n_out + 1)
    np.testing.assert_array_equal(out[:, :spec.n_out], preds)  # the six good samples' predictions only
    banks = [line.split() for line in lines[1:N + 2]]
    for c in range(N):
        assert banks[c][:3] == ["read", str(c), "1"]  # the flag stays up
        np.testing.assert_array_equal([int(w.split(":")[0]) for w in banks[c][3:]], g.theta[c])
    assert banks[N][:3] == ["read", str(N), "1"]
    assert banks[N][3:] == ["0:0"] * (spec.parameter_count() - 1) + ["0:1"]
    assert lines[N + 2] == "load 1 1 1"  # its words taken, nothing answered
    np.testing.assert_array_equal([int(w.split(":")[0]) for w in lines[N + 3].split()[3:]], g.theta[0])
    assert lines[N + 4] == "reset 0"
    assert lines[N + 5].split()[:3] == ["read", "0", "0"]


@pytest.mark.slow  # ~25 s: the program at O2 and the test bench, compiled
def test_cli_hls_writes_a_multichannel_project_whose_testbench_passes(tmp_path, capsys):
    """`onchip hls --csim` on a spec of 3 channels: the C simulation equals the golden model, and the
    Vitis test bench (stimulus with a channel word per sample, a parameter line per channel), built
    with g++, passes on the golden data and catches a corrupted parameter of the last channel."""
    pytest.importorskip("hls4ml")
    import subprocess

    from onchip.cli import main
    from onchip.hls import ap_types_dir
    from onchip.hls.build import compiler

    spec = SPECS["mlp"]
    (tmp_path / "spec.toml").write_text(spec.to_toml())
    out = tmp_path / "proj"
    assert main(["hls", "--spec", str(tmp_path / "spec.toml"), "--out", str(out), "--samples", "300",
                 "--csim"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("bit-exact")
    stim = (out / "tb_data" / "stimulus.dat").read_text().splitlines()
    assert {int(line.split()[-1]) for line in stim[1:]} == set(range(N))  # the channel word, last
    assert len(stim[1].split()) == spec.n_in + spec.n_out + 1
    cxx, _ = compiler()
    subprocess.run([cxx, "-O0", "-std=c++14", "-w", "-I.", f"-I{ap_types_dir()}", "onchip_tb.cpp",
                    "onchip_learner.cpp", "-o", "tb"], cwd=out, check=True)
    ok = subprocess.run(["./tb"], cwd=out, capture_output=True, text=True)
    assert ok.returncode == 0 and "0 mismatches" in ok.stdout, ok.stdout
    exp = out / "tb_data" / "expected.dat"
    lines = exp.read_text().splitlines()
    assert len(lines) == 300 + N
    fields = lines[-1].split()
    fields[0] = str(int(fields[0]) + 1)
    lines[-1] = " ".join(fields)
    exp.write_text("\n".join(lines) + "\n")
    bad = subprocess.run(["./tb"], cwd=out, capture_output=True, text=True)
    assert bad.returncode == 1 and "1 mismatches" in bad.stdout, bad.stdout


@pytest.mark.slow
def test_the_committed_channel_sweep_is_of_the_designs_generated_today():
    """Every Yosys count and routed fmax in sweeps/channels/README.md belongs to the Verilog the
    generator writes now (a change of the hardware, not of its descriptive header, makes a run stale
    and the page would then read "–"), and the page is the one its runs give."""
    from support import ROOT, load_script

    cs = load_script("sweeps/channels/channels_sweep.py")
    runs = cs.load_runs()
    for preset in cs.PRESETS:
        for n in cs.CHANNELS:
            h = cs.digest(cs.point_design(preset, n).verilog)
            assert runs[f"{preset}/{n}/yosys"]["hash"] == h, (preset, n)
            routed = runs[f"{preset}/{n}/pnr"]
            assert routed["hash"] == h and routed["fmax_mhz"] > 0, (preset, n)
    body = lambda text: text.split("\n", 3)[3]  # noqa: E731 - past the line that dates the page
    assert body(cs.render()) == body((ROOT / "sweeps/channels/README.md").read_text())
