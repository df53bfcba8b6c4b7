"""Many channels on one datapath: channel c of the RTL equals a single-channel sequential golden
learner run on channel c's sub-stream alone, whatever the channel order, with stalls, reset,
checkpoint and read-back; round-robin channels with N >= the sequential II issue one sample per
clock, a burst of one channel one per II.
"""

import numpy as np
import pytest

from onchip.hw import sim
from onchip.hw.interface import channel_parameters, single_channel
from onchip.hw.sim import cached_design
from onchip.model import GoldenLearner
from onchip.spec import PRESETS

from hw_support import stimulus
from support import random_theta

ORDERS = ("round_robin", "random", "bursts")


def channel_order(order: str, n: int, channels: int, seed: int) -> np.ndarray:
    """(n,) channels: round robin, uniform random, or runs of one channel (lengths 1 .. 40)."""
    rng = np.random.default_rng(seed)
    if order == "round_robin":
        return np.arange(n) % channels
    if order == "random":
        return rng.integers(0, channels, n)
    out = []
    while len(out) < n:
        out += [int(rng.integers(channels))] * int(rng.integers(1, 41))
    return np.asarray(out[:n])


def golden_channels(spec, x, y, channel, theta=None):
    """Predictions (in stream order) and flushed parameters (N, P) of N single-channel
    sequential golden learners, channel c run on the samples whose channel is c."""
    one = single_channel(spec)
    theta = channel_parameters(spec, theta)
    preds = np.zeros((len(x), spec.n_out), np.int64)
    final = []
    for c in range(spec.channels):
        g = GoldenLearner(one, theta[c])
        pick = channel == c
        if pick.any():
            preds[pick] = g.run(x[pick], y[pick])
        g.flush()
        final.append(g.theta.copy())
    return preds, np.stack(final)


def preset(kind: str, timing: str, channels: int = 4):
    return PRESETS[f"{kind}-readout"].replace(timing=timing, channels=channels)


def kan(timing: str, channels: int = 4):
    return preset("kan", timing, channels)


# (kind, timing, order): the KAN at fast in every order, the KAN at compact and the MLP at fast in
# random order run by default, the rest in the slow set (a Verilator build each design)
DEFAULT = {("kan", "fast")} | {("kan", "compact", "random"), ("mlp", "fast", "random")}
CASES = [pytest.param(k, t, o, marks=() if (k, t) in DEFAULT or (k, t, o) in DEFAULT else pytest.mark.slow)
         for k in ("kan", "mlp") for t in ("compact", "fast") for o in ORDERS]


def assert_channels(design, spec, seg, want_preds, want_theta):
    got = sim.unpack_predictions(design, seg["preds"])
    assert got.shape == want_preds.shape
    bad = np.nonzero((got != want_preds).any(axis=1))[0]
    assert bad.size == 0, f"sample {bad[0]}: RTL {got[bad[0]]}, golden {want_preds[bad[0]]} ({bad.size} differ)"
    np.testing.assert_array_equal(sim.unpack_coef(design, seg["responses"]).reshape(spec.channels, -1), want_theta)


@pytest.mark.parametrize("kind, timing, order", CASES)
def test_channels_equal_golden_per_channel(kind, timing, order):
    spec = preset(kind, timing)
    design = cached_design(spec)
    x, y = stimulus(spec, 1500, seed=3)
    ch = channel_order(order, len(x), spec.channels, seed=4)
    want_preds, want_theta = golden_channels(spec, x, y, ch)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y, channel=ch), "then": {"op": "read"}}],
                      seed=7, p_valid=0.8, p_ready=0.8, p_param_ready=0.7)
    assert_channels(design, spec, out["segments"][0], want_preds, want_theta)
    # the channels learned different things: the test could tell a shared bank from N banks
    assert len({tuple(t) for t in want_theta}) == spec.channels


@pytest.mark.parametrize("kind, timing, channels", [
    ("kan", "compact", 8), ("kan", "fast", 8), pytest.param("mlp", "fast", 16, marks=pytest.mark.slow)])
def test_channels_interval(kind, timing, channels):
    """Without stalls: round robin over N >= II channels takes a sample every clock; a burst of
    one channel one per II (the per-channel hazard); the design reports both."""
    spec = preset(kind, timing, channels)
    design = cached_design(spec)
    info = design.info
    ii = info["initiation_interval_channel"]
    assert spec.channels >= ii and info["initiation_interval"] == 1
    x, y = stimulus(spec, 400, seed=8)
    rr = channel_order("round_robin", len(x), spec.channels, 0)
    burst = np.full(len(x), spec.channels - 1)
    want_rr, _ = golden_channels(spec, x, y, rr)
    out = sim.run_job(design, [
        {"payloads": sim.pack_samples(design, x, y, channel=rr), "then": {"op": "none"}},
        {"payloads": sim.pack_samples(design, x, y, channel=burst), "then": {"op": "none"}},
    ], measure=True)
    seg_rr, seg_b = out["segments"]
    np.testing.assert_array_equal(sim.unpack_predictions(design, seg_rr["preds"]), want_rr)
    assert set(np.diff(seg_rr["accept_cycles"])) == {1}
    assert set(np.diff(seg_b["accept_cycles"])) == {ii}
    lat = np.asarray(seg_rr["pred_cycles"]) - np.asarray(seg_rr["accept_cycles"])
    assert set(lat) == {info["latency_cycles_prediction"]}


@pytest.mark.parametrize("kind, shared", [("kan", False), ("mlp", True),
                                           pytest.param("mlp", False, marks=pytest.mark.slow)])
def test_channels_reset_checkpoint_restore(kind, shared):
    """Per-channel reset ROM (a distinct theta per channel, or one ROM of P words shared by every
    channel: mlp-readout's nonzero initial parameters), reset with samples in flight, read-back,
    checkpoint and restore through the (channel, index) parameter port, under random stalls."""
    spec = preset(kind, "fast", channels=3)  # N not a power of two: the field holds 3, the design has no channel 3
    p = spec.parameter_count()
    if shared:
        theta0 = channel_parameters(spec)
        assert theta0.any()
        design = cached_design(spec)
    else:
        theta0 = np.stack([random_theta(single_channel(spec), s) for s in range(spec.channels)])
        design = cached_design(spec, theta=theta0)
    xs = [stimulus(spec, 500, seed=s) for s in (11, 12, 13)]
    chs = [channel_order(o, 500, spec.channels, s) for o, s in zip(ORDERS, (1, 2, 3))]
    restore = np.stack([random_theta(single_channel(spec), 10 + s) for s in range(spec.channels)])

    # reset after the first stream: the ROM restores every channel's own theta0
    _, theta_a = golden_channels(spec, *xs[0], chs[0], theta0)
    p1, t1 = golden_channels(spec, *xs[1], chs[1], theta0)
    p2, t2 = golden_channels(spec, *xs[2], chs[2], restore)
    out = sim.run_job(design, [
        {"payloads": sim.pack_samples(design, *xs[0], channel=chs[0]), "then": {"op": "reset", "after": 3}},
        {"payloads": [], "then": {"op": "read"}},
        {"payloads": sim.pack_samples(design, *xs[1], channel=chs[1]),
         "then": {"op": "write", "values": [int(v) for v in restore.ravel()]}},
        {"payloads": sim.pack_samples(design, *xs[2], channel=chs[2]), "then": {"op": "read"}},
    ], seed=9, p_valid=0.8, p_ready=0.7, p_param_ready=0.6)
    seg_a, seg_0, seg_1, seg_2 = out["segments"]
    assert not (theta_a == theta0).all()
    np.testing.assert_array_equal(sim.unpack_coef(design, seg_0["responses"]).reshape(-1, p), theta0)
    np.testing.assert_array_equal(sim.unpack_predictions(design, seg_1["preds"]), p1)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg_1["responses"]).reshape(-1, p), restore)
    assert_channels(design, spec, seg_2, p2, t2)


def three_channels(kind: str):
    """The N = 3 design of :func:`test_channels_reset_checkpoint_restore` (its Verilator build shared):
    the KAN with a distinct theta per channel, the MLP with its shared reset ROM."""
    spec = preset(kind, "fast", channels=3)
    if kind == "mlp":
        return spec, channel_parameters(spec), cached_design(spec)
    theta0 = np.stack([random_theta(single_channel(spec), s) for s in range(spec.channels)])
    return spec, theta0, cached_design(spec, theta=theta0)


def with_channel(design, payloads, at, value):
    """``payloads`` with the channel field of samples ``at`` set to ``value`` (one the host packers
    refuse: the hardware's own guard is what is tested)."""
    fld = sim.payload_fields_of(design, "s")["channel"]
    mask = ((1 << fld.width) - 1) << fld.offset
    out = list(payloads)
    for n in at:
        out[n] = (out[n] & ~mask) | (value << fld.offset)
    return out


@pytest.mark.parametrize("kind", ["kan", pytest.param("mlp", marks=pytest.mark.slow)])
def test_channel_beyond_n_is_dropped_and_flagged(kind):
    """N = 3 (the 2-bit field holds 3): a sample naming channel 3 is taken and dropped (no prediction,
    no update of any channel) and ``channel_error`` stays high until reset; the other samples are
    each channel's golden learner's, as if the dropped ones had never been sent."""
    spec, theta0, design = three_channels(kind)
    x, y = stimulus(spec, 400, seed=31)
    ch = channel_order("random", len(x), spec.channels, seed=32)
    bad = np.random.default_rng(33).choice(np.arange(200, 400), 12, replace=False)
    keep = np.setdiff1d(np.arange(len(x)), bad)
    p1, t1 = golden_channels(spec, x[:200], y[:200], ch[:200], theta0)
    p2, t2 = golden_channels(spec, x[keep[keep >= 200]], y[keep[keep >= 200]], ch[keep[keep >= 200]], t1)
    payloads = sim.pack_samples(design, x, y, channel=ch)
    out = sim.run_job(design, [
        {"payloads": payloads[:200], "then": {"op": "read"}},
        {"payloads": with_channel(design, payloads, bad, 3)[200:], "then": {"op": "read"}},
        {"payloads": [], "then": {"op": "reset", "after": 2}},
        {"payloads": [], "then": {"op": "read"}},
    ], seed=34, p_valid=0.8, p_ready=0.8, p_param_ready=0.7)
    seg1, seg2, _, seg3 = out["segments"]
    assert_channels(design, spec, seg1, p1, t1)
    assert_channels(design, spec, seg2, p2, t2)
    assert (seg1["channel_error"], seg2["channel_error"], seg3["channel_error"]) == (0, 1, 0)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg3["responses"]).reshape(spec.channels, -1), theta0)


def command_words(design, commands):
    """Parameter command payloads packed by the command layout, each channel as given (one >= N the
    host's packers never send: the hardware's own guard is what is tested)."""
    fields = sim.payload_fields_of(design, "pc")
    return [sum((int(v) & ((1 << fields[k].width) - 1)) << fields[k].offset for k, v in cmd.items())
            for cmd in commands]


@pytest.mark.parametrize("kind", ["kan", pytest.param("mlp", marks=pytest.mark.slow)])
def test_parameter_command_beyond_n_is_answered_zero_and_flagged(kind):
    """N = 3: a parameter write or read naming channel 3 reads and writes no bank and is answered 0
    (one response per command, as always), and ``channel_error`` stays high until reset; every
    channel's parameters are still its golden learner's, and it goes on learning from them."""
    spec, theta0, design = three_channels(kind)
    p = spec.parameter_count()
    x, y = stimulus(spec, 300, seed=41)
    ch = channel_order("random", len(x), spec.channels, seed=42)
    p1, t1 = golden_channels(spec, x[:150], y[:150], ch[:150], theta0)
    p2, t2 = golden_channels(spec, x[150:], y[150:], ch[150:], t1)
    at = (0, p - 1)
    value = 5  # a write the bad commands would show if it landed: no parameter of t1 at ``at`` is 5
    assert not (t1[:, at] == value).any()
    cmds = ([{"data": value, "addr": a, "write": 1, "channel": 3} for a in at]
            + [{"addr": a, "write": 0, "channel": 3} for a in at]
            + [{"addr": a, "write": 0, "channel": c} for a in at for c in range(spec.channels)])
    payloads = sim.pack_samples(design, x, y, channel=ch)
    out = sim.run_job(design, [
        {"payloads": payloads[:150], "then": {"op": "commands", "words": command_words(design, cmds)}},
        {"payloads": payloads[150:], "then": {"op": "read"}},
        {"payloads": [], "then": {"op": "reset", "after": 2}},
        {"payloads": [], "then": {"op": "read"}},
    ], seed=43, p_valid=0.8, p_ready=0.8, p_param_ready=0.7)
    seg1, seg2, _, seg3 = out["segments"]
    np.testing.assert_array_equal(sim.unpack_predictions(design, seg1["preds"]), p1)
    got = sim.unpack_coef(design, seg1["responses"])
    np.testing.assert_array_equal(got[:4], [0, 0, 0, 0])  # the two writes and the two reads of channel 3
    np.testing.assert_array_equal(got[4:], [t1[c, a] for a in at for c in range(spec.channels)])
    assert_channels(design, spec, seg2, p2, t2)
    assert (seg1["channel_error"], seg2["channel_error"], seg3["channel_error"]) == (1, 1, 0)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg3["responses"]).reshape(spec.channels, -1), theta0)


def test_bench_refuses_command_words_outside_the_command_layout():
    design = three_channels("kan")[2]
    width = sum(f.width for f in sim.payload_fields_of(design, "pc").values())
    with pytest.raises(ValueError, match=rf"^segments\[0\]\.then\.words must be one or more {width}-bit command "
                                         rf"payloads, got {1 << width}$"):
        sim.run_job(design, [{"payloads": [], "then": {"op": "commands", "words": [0, 1 << width]}}])


def test_power_of_two_channels_have_no_flag():
    """N a power of two: every field value is a channel, the design has no ``channel_error``."""
    design = cached_design(kan("fast"))
    assert "channel_error" not in design.info["ports"] and "channel_error" not in design.info["axis"]["ports"]
    assert "channel_error" in three_channels("kan")[2].info["ports"]


@pytest.mark.parametrize("bad, message", [
    (3, "channel[7] = 3 is not a channel of the spec (channels = 3: 0 to 2)"),
    (-1, "channel[7] = -1 is not a channel of the spec (channels = 3: 0 to 2)"),
])
def test_channel_out_of_range_refused(bad, message):
    from onchip.hw.interface import pack_samples

    spec = kan("compact", channels=3)
    x, y = stimulus(spec, 10, seed=0)
    ch = np.zeros(10, int)
    ch[7] = bad
    with pytest.raises(ValueError) as exc:
        pack_samples(spec, x, y, channel=ch)
    assert str(exc.value) == message


def test_channel_missing_and_theta_shape_refused():
    from onchip.hw.interface import pack_samples

    spec = kan("compact", channels=4)
    x, y = stimulus(spec, 4, seed=0)
    with pytest.raises(ValueError, match="^channel is required: the spec has channels = 4"):
        pack_samples(spec, x, y)
    p = spec.parameter_count()
    with pytest.raises(ValueError, match=rf"^theta must have shape \(4, {p}\) \(one row per channel\) or \({p},\) \(every channel\), got \(3, {p}\)$"):
        channel_parameters(spec, np.zeros((3, p), int))


@pytest.mark.parametrize("kind", ["kan", pytest.param("mlp", marks=pytest.mark.slow)])
def test_rtl_backend_channels(kind):
    """The ``rtl`` backend (the Verilated core under the C++ stream harness) takes ``channel`` and
    (N, P) parameters, loads them through the (channel, index) port and reads (N, P) back."""
    from onchip.backends import get_backend

    backend = get_backend("rtl")
    if not backend.available():
        pytest.skip("the rtl backend's toolchain is not available")
    spec = preset(kind, "fast", channels=4)
    theta = np.stack([random_theta(single_channel(spec), 20 + c) for c in range(spec.channels)])
    x, y = stimulus(spec, 2000, seed=21)
    ch = channel_order("random", len(x), spec.channels, seed=22)
    want_preds, want_theta = golden_channels(spec, x, y, ch, theta)
    got = backend.run(spec, x, y, theta=theta, channel=ch)
    np.testing.assert_array_equal(got.predictions, want_preds)
    np.testing.assert_array_equal(got.theta, want_theta)
    with pytest.raises(ValueError, match=r"^channel\[3\] = 4 is not a channel of the spec \(channels = 4: 0 to 3\)$"):
        backend.run(spec, x[:5], y[:5], channel=np.array([0, 1, 2, 4, 0]))


def test_rtl_backend_channels_predict_only():
    """``learn=False`` on the ``rtl`` backend with channels: every sample is a prediction with its own
    channel's parameters, as each channel's golden learner predicts, and no channel changes."""
    from onchip.backends import get_backend

    backend = get_backend("rtl")
    if not backend.available():
        pytest.skip("the rtl backend's toolchain is not available")
    spec = preset("kan", "fast", channels=4)  # the model of test_rtl_backend_channels
    theta = np.stack([random_theta(single_channel(spec), 40 + c) for c in range(spec.channels)])
    x, y = stimulus(spec, 300, seed=41)
    ch = channel_order("random", len(x), spec.channels, seed=42)
    want = np.zeros((len(x), spec.n_out), np.int64)
    for c in range(spec.channels):
        want[ch == c] = GoldenLearner(single_channel(spec), theta[c]).predict(x[ch == c])
    got = backend.run(spec, x, y, theta=theta, channel=ch, learn=False)
    np.testing.assert_array_equal(got.predictions, want)
    np.testing.assert_array_equal(got.theta, theta)
    # the channels' parameters differ enough that a wrong bank would show
    assert len({tuple(map(tuple, want[ch == c][:20])) for c in range(spec.channels)}) == spec.channels


def test_axis_wrapper_carries_the_channel():
    """The AXI4-Stream wrapper of an N = 3 design: the channel field travels in ``s_axis_sample_tdata``
    (after kind) and every channel's results equal its golden learner's; a sample naming channel 3 is
    dropped and raises the wrapper's ``channel_error``, and so, after a reset, does a parameter read
    naming channel 3, answered 0."""
    spec = _tiny_channels().replace(channels=3)  # a small core: the wrapper's build is its own
    theta0 = np.stack([random_theta(single_channel(spec), 50 + c) for c in range(spec.channels)])
    design = cached_design(spec, theta=theta0)
    axis = sim.axis_design(design)
    x, y = stimulus(spec, 300, seed=51)
    ch = channel_order("random", len(x), spec.channels, seed=52)
    p1, t1 = golden_channels(spec, x[:250], y[:250], ch[:250], theta0)
    p2, t2 = golden_channels(spec, x[251:], y[251:], ch[251:], t1)
    payloads = sim.pack_samples(design, x, y, channel=ch)
    out = sim.run_job(axis, [
        {"payloads": payloads[:250], "then": {"op": "read"}},
        {"payloads": with_channel(design, payloads, [250], 3)[250:], "then": {"op": "read"}},
        {"payloads": [], "then": {"op": "reset", "after": 2}},
        {"payloads": [], "then": {"op": "commands", "words": command_words(design, [
            {"addr": 1, "write": 0, "channel": 3}, {"addr": 1, "write": 0, "channel": 2}])}},
    ], seed=53, p_valid=0.8, p_ready=0.8, p_param_ready=0.7)
    seg1, seg2, seg3, seg4 = out["segments"]
    assert_channels(design, spec, seg1, p1, t1)
    assert_channels(design, spec, seg2, p2, t2)
    assert (seg1["channel_error"], seg2["channel_error"], seg3["channel_error"]) == (0, 1, 0)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg4["responses"]), [0, theta0[2, 1]])
    assert seg4["channel_error"] == 1 and theta0[2, 1] != 0


def test_cli_generate_takes_channels(tmp_path, capsys):
    import json

    from onchip.cli import main

    out = tmp_path / "g"
    assert main(["generate", "--spec", "kan-readout", "--timing", "compact", "--channels", "4", "--out", str(out)]) == 0
    info = json.loads((out / "onchip_learner.json").read_text())
    assert info["channels"] == 4 and info["spec"]["channels"] == 4
    assert info["payload"]["s"]["channel"]["width"] == 2 and info["payload"]["pc"]["channel"]["width"] == 2
    assert main(["generate", "--spec", "kan-readout", "--channels", "0", "--out", str(tmp_path / "z")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--channels" in err[0] and "'0'" in err[0]
    assert not (tmp_path / "z").exists()


def test_cli_theta_shape_per_channel(tmp_path, capsys):
    from onchip.cli import main

    spec = kan("compact", channels=4)
    p = spec.parameter_count()
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, np.stack([random_theta(single_channel(spec), c) for c in range(4)]))
    np.save(bad, np.zeros((3, p), np.int64))
    assert main(["generate", "--spec", "kan-readout", "--timing", "compact", "--channels", "4", "--theta", str(good),
                 "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(["generate", "--spec", "kan-readout", "--channels", "4", "--theta", str(bad),
                 "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        f"--theta {bad}: theta must have shape (4, {p}) (one row per channel) or ({p},) (every channel), "
        f"got (3, {p})"), err
    assert not (tmp_path / "b").exists()


def test_channels_over_the_block_ram_refused_before_generation(tmp_path, capsys):
    """N banks over the device's block RAM: refused from the spec, naming the BRAM count, before
    the N-bank design is generated (exit 2, one line, nothing written)."""
    from onchip.cli import main
    from onchip.flow.fit import DesignTooLarge, block_rams_needed, check_lattice_bram, shortfalls

    spec = kan("fast", channels=20000)
    with pytest.raises(DesignTooLarge) as exc:
        check_lattice_bram(spec, "LFE5U-85F", "ecp5")
    (short,) = shortfalls(str(exc.value))
    assert short == {"resource": "BRAM", "cell": "DP16KD", "needed": block_rams_needed(spec, "ecp5"),
                     "available": 208, "at_least": True}
    assert check_lattice_bram(kan("fast", channels=64), "LFE5U-85F", "ecp5") is not None  # fits: no refusal
    out = tmp_path / "p"
    assert main(["pnr", "--spec", "kan-readout", "--channels", "20000", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "BRAM (DP16KD): at least" in err[0] and "208 available" in err[0], err
    assert not out.exists()


def test_verify_takes_channels_on_every_backend():
    """``onchip verify --channels``: the RTL bench and the HLS C simulation on one random channel
    order against the golden model per channel, and the round-robin II."""
    from onchip.verification import verify

    report = verify("kan-readout", timing="fast", channels=4, samples=600, seed=3, backends=("rtl", "hls"))
    got = {c.name: c for c in report.cases}
    names = ("rtl.predictions", "rtl.parameters", "rtl.initiation_interval", "hls.predictions", "hls.final_parameters")
    assert {n: got[n].status for n in names} == dict.fromkeys(names, "passed"), report.summary()
    assert "4 channels" in got["rtl.predictions"].detail
    p = PRESETS["kan-readout"].parameter_count()
    assert got["hls.final_parameters"].detail.startswith(f"{4 * p} final parameters (4 channels)"), report.summary()
    # the single-channel cases the channel bench does not run are listed as skipped, saying why
    for name in ("rtl.reset_mid_stream", "rtl.checkpoint_restore", "rtl.latency", "rtl.channel_error"):
        assert got[name].status == "skipped" and "channels" in got[name].detail, report.summary()
    assert report.ok


def _tiny_channels():
    """A KAN of one edge (P = 3) on 2 channels: a reload of 7 cycles keeps the solver's runs short."""
    return PRESETS["kan-readout"].replace(widths=(1, 1), grid_size=2, spline_order=1, timing="compact", channels=2)


def _formal_or_skip():
    from onchip import formal

    if formal.missing_tools() is not None:
        pytest.skip(str(formal.missing_tools()))


def test_channel_protocol_hazard_and_guard_are_proved(tmp_path):
    """N = 3: the protocol with the hazard stall, and a sample naming channel 3 dropped (owed no
    prediction) or a parameter command naming it, with ``channel_error`` high until reset (about the
    time of the same proof at N = 2)."""
    _formal_or_skip()
    from onchip.formal import properties as props
    from onchip.formal.protocol import prove_protocol
    from onchip.hw import generate

    d = generate(_tiny_channels().replace(channels=3), axis=False)
    got = {r.name: r for r in prove_protocol(d.info, d.verilog, "core", tmp_path, log=lambda t: None)}
    assert list(got) == list(props.protocol_properties(d.info, "core"))
    assert {"channel_hazard", "channel_guard"} <= set(got)
    assert all(r.status == "proved" for r in got.values()), {n: r.status for n, r in got.items()}


@pytest.mark.slow
def test_a_missing_channel_hazard_is_caught(tmp_path):
    """The hazard stall removed: a sample enters behind one of its channel, and channel_hazard fails
    with a trace (the other properties still hold: the protocol alone does not see it)."""
    _formal_or_skip()
    from pathlib import Path

    from onchip.formal.protocol import prove_protocol
    from onchip.hw import generate

    d = generate(_tiny_channels(), axis=False)
    bad = d.verilog.replace("assign channel_hazard = | {", "assign channel_hazard = 1'h0 & | {")
    assert bad != d.verilog
    got = {r.name: r for r in prove_protocol(d.info, bad, "core", tmp_path, log=lambda t: None)}
    assert {n for n, r in got.items() if r.status != "proved"} == {"channel_hazard"}
    assert got["channel_hazard"].status == "failed" and Path(got["channel_hazard"].trace).exists()


@pytest.mark.slow
def test_the_parameter_port_channel_guard_is_checked_and_its_removal_caught(tmp_path):
    """N = 3: the read-back check holds with a command naming channel 3 answered 0 (bounded), and with
    the port's guard taken out (the command's channel compared with nothing, as before the guard)
    channel_guard fails (the flag misses the command) and so does no_channel_answers_zero."""
    _formal_or_skip()
    import re

    from onchip import formal
    from onchip.formal.protocol import prove_protocol
    from onchip.hw import generate

    spec = _tiny_channels().replace(channels=3)
    d = generate(spec, axis=False)
    # timeout: the solver's budget also pays Yosys's first WebAssembly compile in the run's own cache
    good = {r.name: r.status for r in formal.prove_readback(d, channel_parameters(spec), tmp_path / "rb", timeout=600)}
    assert good == dict.fromkeys(("read_returns_last_write", "write_echoes_value", "no_channel_answers_zero"), "bounded")
    bad, n = re.subn(r"assign command_channel_bad = [^;]*;", "assign command_channel_bad = 1'h0;", d.verilog)
    assert n == 1
    proto = {r.name: r.status for r in prove_protocol(d.info, bad, "core", tmp_path / "p", log=lambda t: None)}
    assert {k for k, v in proto.items() if v != "proved"} == {"channel_guard"} and proto["channel_guard"] == "failed"
    back = {r.name: r.status for r in formal.prove_readback(d, channel_parameters(spec), tmp_path / "rb2", verilog=bad,
                                                                        timeout=600)}
    assert back["no_channel_answers_zero"] == "failed"


def test_pipelined_channels_spec_is_built_and_labelled_sequential_fast(tmp_path, capsys):
    """channels > 1 with schedule = "pipelined" and timing "auto": every channel is a sequential
    learner, so auto resolves to the sequential plan (fast); the console line, the header and the
    JSON name the plan that is built, and the cycles are those of the same spec without the schedule."""
    import json

    from onchip.cli import main
    from onchip.hw import generate

    spec = PRESETS["kan-readout"].replace(channels=3, schedule="pipelined", staleness=3)
    seq = spec.replace(schedule="sequential")
    assert spec.stage_timing == seq.stage_timing == "fast"
    got, want = generate(spec, axis=False), generate(seq, axis=False)
    for key in ("timing", "schedule", "stages", "latency_cycles_prediction", "latency_cycles_update",
                "initiation_interval", "initiation_interval_channel", "reset_cycles"):
        assert got.info[key] == want.info[key], key
    assert got.info["timing"] == "fast" and got.info["schedule"] == "sequential"
    assert "does not apply" in got.info["schedule_note"] and "sequential" in got.info["schedule_note"]
    body = got.verilog[got.verilog.index("module "):]
    assert body == want.verilog[want.verilog.index("module "):]
    head = got.verilog[:got.verilog.index("module ")]
    assert "Timing plan: fast" in head and "Timing plan: compact" not in head
    assert "sequential per channel" in head

    path = tmp_path / "c.toml"
    path.write_text(spec.to_toml())
    out = tmp_path / "g"
    assert main(["generate", "--spec", str(path), "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "timing fast (auto)" in line and "sequential per channel" in line, line
    said = "the spec's schedule 'pipelined', staleness 3, does not apply with channels"  # one wording, both places
    assert said in line and said in got.info["schedule_note"]
    assert json.loads((out / "onchip_learner.json").read_text())["timing"] == "fast"


def test_pipelined_channels_spec_rtl_equals_golden_per_channel():
    """The design of a channels spec that asks for the pipelined schedule (timing auto) still equals
    N sequential golden learners, channel by channel."""
    spec = kan("auto").replace(schedule="pipelined", staleness=3)
    design = cached_design(spec)
    x, y = stimulus(spec, 600, seed=5)
    ch = channel_order("random", len(x), spec.channels, seed=6)
    want_preds, want_theta = golden_channels(spec, x, y, ch)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y, channel=ch), "then": {"op": "read"}}],
                      seed=8, p_valid=0.8, p_ready=0.8, p_param_ready=0.7)
    assert_channels(design, spec, out["segments"][0], want_preds, want_theta)
