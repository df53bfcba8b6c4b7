"""Sample kinds and the decision field in the RTL learners, bit for bit against the golden model.

Mixed streams (TARGET, PREDICT and ERROR samples, errors at the ``grad`` limits included) run
through the cocotb bench with random stalls on every stream; the predictions, the decision field
of the prediction stream and the parameters read back at the end must equal
:class:`onchip.model.GoldenLearner`'s and :func:`onchip.model.decisions` of its predictions.
Default: a 2->3 KAN (pipelined, argmax decision, 10000 samples), the narrow 4->6->5->3 serial
MLP and the narrow 3->3->2 serial KAN (2000 samples each; their builds are shared with the
serial-datapath tests); the other schedules, the
parallel MLP, 10000 samples of the serial MLP, a ``grad`` wider than ``act`` and the C++ stream
harness (rtl backend) on 20000 samples are in the slow set.
"""

import dataclasses

import numpy as np
import pytest

from onchip.backends import get_backend
from onchip.hw import sim
from onchip.hw.interface import payload_fields, sample_layout, y_field_shape
from onchip.hw.sim import cached_design
from onchip.model import GoldenLearner, SampleKind
from onchip.spec import PRESETS, LearnerSpec

from hw_support import variant
from kind_support import golden_kinds_final, mixed_stream
from support import random_theta
from test_hw_kan_serial import NARROW as NARROW_KAN
from test_hw_mlp_serial import NARROW

KAN3 = PRESETS["kan-readout"].replace(widths=(2, 3), name="kan-readout-3out")


def run_mixed(spec: LearnerSpec, n: int, seed: int, **stalls):
    design = cached_design(spec)
    x, y, kind = mixed_stream(spec, n, seed)
    want_preds, want_dec, want_theta = golden_kinds_final(spec, x, y, kind)
    out = sim.run_job(design, [{"payloads": sim.pack_samples(design, x, y, kind), "then": {"op": "read"}}],
                      seed=seed, **stalls)
    seg = out["segments"][0]
    got, dec = sim.unpack_predictions(design, seg["preds"], decisions=True)
    bad = np.nonzero((got != want_preds).any(axis=1))[0]
    assert bad.size == 0, (f"sample {bad[0]} (kind {kind[bad[0]]}): RTL {got[bad[0]]}, golden "
                           f"{want_preds[bad[0]]} ({bad.size} differ)")
    np.testing.assert_array_equal(dec, want_dec)
    np.testing.assert_array_equal(sim.unpack_coef(design, seg["responses"]), want_theta)
    return kind, want_dec


STALLS = dict(p_valid=0.7, p_ready=0.6, p_param_ready=0.5)


def test_kan_pipelined_mixed_kinds_and_argmax_decision():
    kind, dec = run_mixed(variant(KAN3, "pipelined"), 10000, 1, **STALLS)
    assert set(kind.tolist()) == {0, 1, 2} and set(dec.tolist()) == {0, 1, 2}


@pytest.mark.parametrize("spec", [variant(KAN3, "pipelined"), NARROW, NARROW_KAN],
                         ids=["kan3-pipelined", "mlp-serial-narrow", "kan-serial-narrow"])
def test_predict_samples_keep_saturated_parameters(spec):
    """A PREDICT sample commits a zero delta: parameters at the coef limits stay where they are."""
    c = spec.formats.coef
    theta = random_theta(spec, 8)
    theta[::3], theta[1::3] = c.max_raw, c.min_raw
    design = cached_design(spec)
    x, y, _ = mixed_stream(spec, 300, 9)
    kind = np.full(len(x), int(SampleKind.PREDICT))
    out = sim.run_job(design, [{"payloads": [], "then": {"op": "write", "values": [int(v) for v in theta]}},
                               {"payloads": sim.pack_samples(design, x, y, kind), "then": {"op": "read"}}],
                      seed=9, **STALLS)
    seg = out["segments"][1]
    np.testing.assert_array_equal(sim.unpack_coef(design, seg["responses"]), theta)
    np.testing.assert_array_equal(sim.unpack_predictions(design, seg["preds"]),
                                  GoldenLearner(spec, theta).predict(x))


def test_serial_mlp_mixed_kinds():
    run_mixed(NARROW, 2000, 2, **STALLS)  # 10000 samples: the slow set


def test_serial_kan_mixed_kinds():
    kind, _ = run_mixed(NARROW_KAN, 2000, 3, **STALLS)  # the build is shared with test_hw_kan_serial
    assert set(kind.tolist()) == {0, 1, 2}


@pytest.mark.slow
@pytest.mark.parametrize("name,schedule", [("kan-readout", "sequential"), ("mlp-readout", "sequential"),
                                           ("mlp-readout", "pipelined"), ("kan-regression", "pipelined"),
                                           ("narrow-serial", "sequential")])
def test_presets_mixed_kinds(name, schedule):
    spec = NARROW if name == "narrow-serial" else variant(PRESETS[name], schedule)
    run_mixed(spec, 10000, 3, **STALLS)


@pytest.mark.slow
def test_grad_wider_than_act():
    f = PRESETS["kan-readout"].formats
    spec = KAN3.replace(name="kan-3out-wide-grad",
                        formats=dataclasses.replace(f, grad="ap_fixed<20,6,RND_CONV,SAT>"))
    fields = payload_fields(sample_layout(spec))
    assert fields["y0"].width == 20 and fields["kind"].offset == fields["y2"].offset + 20
    run_mixed(spec, 6000, 4, **STALLS)


def test_y_field_shape():
    from amaranth.hdl import signed, unsigned

    assert y_field_shape(signed(16), signed(16)) == signed(16)
    assert y_field_shape(signed(12), signed(20)) == signed(20)
    assert y_field_shape(unsigned(16), signed(16)) == signed(17)
    assert y_field_shape(signed(16), unsigned(8)) == signed(16)


def test_target_payload_unchanged_by_the_kind_field():
    spec = KAN3
    x, y, _ = mixed_stream(spec, 50, 0, share=(1.0, 0.0, 0.0))
    words = sim.pack_samples(cached_design(variant(spec, "pipelined")), x, y)
    fields = payload_fields(sample_layout(spec))
    assert fields["kind"].offset == spec.n_in * 16 + spec.n_out * 16 and fields["kind"].width == 2
    assert all(w >> fields["kind"].offset == 0 for w in words)
    kinds = np.full(50, int(SampleKind.ERROR))
    e = np.zeros_like(y)
    words_e = sim.pack_samples(cached_design(variant(spec, "pipelined")), x, e, kinds)
    assert all(w >> fields["kind"].offset == 2 for w in words_e)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [variant(KAN3, "pipelined"), NARROW, variant(PRESETS["mlp-readout"], "pipelined")],
                         ids=["kan3-pipelined", "mlp-serial-narrow", "mlp-pipelined"])
def test_rtl_backend_mixed_kinds(spec):
    x, y, kind = mixed_stream(spec, 20000, 5)
    want_preds, want_dec, want_theta = golden_kinds_final(spec, x, y, kind)
    got = get_backend("rtl").run(spec, x, y, kind=kind)
    np.testing.assert_array_equal(got.predictions, want_preds)
    np.testing.assert_array_equal(got.decisions, want_dec)
    np.testing.assert_array_equal(got.theta, want_theta)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [variant(KAN3.replace(timing="fast"), "pipelined"),
                                  variant(PRESETS["mlp-readout"].replace(timing="fast"), "sequential")],
                         ids=["kan3-pipelined-fast", "mlp-readout-sequential-fast"])
def test_mixed_kinds_at_fast_timing(spec):
    """The kind travels with its sample through the extra register stages of ``timing = "fast"``."""
    run_mixed(spec, 10000, 4, **STALLS)


@pytest.mark.parametrize("n_out", [2, 3, 4])
def test_parallel_argmax_decision_equals_the_running_maximum_on_every_input(n_out):
    """timing = "fast" compares every pair of outputs at once; on every input of 3-bit signed
    predictions (ties included) it gives the running maximum's index: the lowest on a tie."""
    import itertools
    from types import SimpleNamespace

    from amaranth.hdl import Module, Signal, signed
    from amaranth.sim import Simulator

    from onchip.hw.interface import LearnerPorts, decision_width

    m = Module()
    preds = [Signal(signed(3), name=f"p{j}") for j in range(n_out)]
    outs = {}
    for parallel in (False, True):
        ports = SimpleNamespace(m=SimpleNamespace(payload=SimpleNamespace(
            decision=Signal(decision_width(n_out), name=f"dec_{parallel}"))))
        LearnerPorts.decision(ports, m, preds, parallel=parallel)
        outs[parallel] = ports.m.payload.decision
    seen = []

    async def bench(ctx):
        for values in itertools.product(range(-4, 4), repeat=n_out):
            for p, v in zip(preds, values):
                ctx.set(p, v)
            chain, par = ctx.get(outs[False]), ctx.get(outs[True])
            seen.append((values, chain, par))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == 8 ** n_out
    for values, chain, par in seen:
        assert chain == par == values.index(max(values)), values
