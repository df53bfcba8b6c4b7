"""Sample kinds and the decision word in the HLS C++ (C simulation), bit for bit against the
golden model: mixed TARGET / PREDICT / ERROR streams for a 2->3 KAN (pipelined) and, in the slow
set, a 2->8->3 MLP (sequential): predictions, decisions and final parameters."""

import numpy as np
import pytest

from onchip.backends import get_backend
from onchip.model import SampleKind
from onchip.spec import PRESETS

from kind_support import golden_kinds_final, mixed_stream
from support import variant

pytestmark = pytest.mark.skipif(not get_backend("hls").available(), reason="no g++ or ap_types headers")

KAN3 = variant(PRESETS["kan-readout"].replace(widths=(2, 3), name="kan-readout-3out"), "pipelined")
MLP3 = PRESETS["mlp-readout"].replace(widths=(2, 8, 3), name="mlp-readout-3out")


@pytest.mark.parametrize("spec", [KAN3, pytest.param(MLP3, marks=pytest.mark.slow)],
                         ids=["kan3-pipelined", "mlp3-sequential"])
def test_mixed_kinds_bit_exact(spec):
    x, y, kind = mixed_stream(spec, 10000, 11)
    want_preds, want_dec, want_theta = golden_kinds_final(spec, x, y, kind)
    got = get_backend("hls").run(spec, x, y, kind=kind)
    bad = np.nonzero((got.predictions != want_preds).any(axis=1))[0]
    assert bad.size == 0, f"sample {bad[0]} (kind {kind[bad[0]]}) differs ({bad.size} in all)"
    np.testing.assert_array_equal(got.decisions, want_dec)
    np.testing.assert_array_equal(got.theta, want_theta)
    assert set(want_dec.tolist()) == {0, 1, 2}


def test_all_target_kinds_equal_a_plain_run():
    x, y, _ = mixed_stream(KAN3, 2000, 12, share=(1.0, 0.0, 0.0))
    hls = get_backend("hls")
    plain = hls.run(KAN3, x, y)
    kinded = hls.run(KAN3, x, y, kind=np.full(len(x), int(SampleKind.TARGET)))
    np.testing.assert_array_equal(plain.predictions, kinded.predictions)
    np.testing.assert_array_equal(plain.decisions, kinded.decisions)
    np.testing.assert_array_equal(plain.theta, kinded.theta)
