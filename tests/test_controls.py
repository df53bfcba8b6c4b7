"""The negative control object shared by the seed methods (methods/_controls.py)."""

from __future__ import annotations

import pytest
from onchip.methods import _controls


def test_negative_control_holds_zero_only_when_nothing_is_seen():
    flat = _controls.negative_control("nothing planted", "m", "a", [0.5, 0.6, 0.4], [0.6, 0.4, 0.5],
                                      seeds=[0, 1, 2], metric="accuracy")
    assert flat["holds_zero"] and flat["paired"]["per_seed"] == pytest.approx([-0.1, 0.2, -0.1])
    assert (flat["method"], flat["ablation"], flat["seeds"]) == ("m", "a", [0, 1, 2])
    seen = _controls.negative_control("a leak", "m", "a", [0.9, 0.8, 0.85], [0.5, 0.45, 0.5],
                                      seeds=[0, 1, 2], metric="accuracy")
    assert not seen["holds_zero"]   # a difference where nothing was planted: the control fails
    with pytest.raises(ValueError, match="seeds"):
        _controls.negative_control("s", "m", "a", [1.0, 2.0], [0.0, 1.0], seeds=[0], metric="x")
