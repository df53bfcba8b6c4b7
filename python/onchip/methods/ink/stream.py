"""An analogue of distractor proportion on the fixed-point readout learner (not attention: a contrast).

The golden KAN readout learner (preset ``kan-readout``) learns online from a stationary qubit-readout
stream (:func:`onchip.tasks.make_qubit_readout` with no drift). Inside one window of ``window`` shots
after a clean warm-up, a proportion ``p`` of the shots carry the wrong label (the other state:
conflicting evidence of the same relation). The learner is then frozen and its assignment fidelity
on the following clean shots is measured: fidelity lost against ``p``.
"""

from __future__ import annotations

from ...model import GoldenLearner
from ...spec import PRESETS
from ...tasks import NO_DRIFT, assignment_fidelity, make_qubit_readout
from .._report import rng


def readout_fidelity(p: float, *, seed: int, window: int = 256, warmup: int = 3000, test: int = 2000) -> float:
    """Assignment fidelity on ``test`` clean shots after a window with a proportion ``p`` of flipped labels.

    Args:
        p: proportion of mislabelled shots in the window, in [0, 1].
        seed: stream and flip positions (the stream is the same for every ``p`` of one seed).
        window, warmup, test: shot counts (clean warm-up, contaminated window, frozen evaluation).

    Raises:
        ValueError: ``p`` outside [0, 1] or a count < 1.
    """
    if not 0 <= p <= 1:
        raise ValueError(f"p: must be in [0, 1], got {p!r}")
    if min(window, warmup, test) < 1:
        raise ValueError(f"window, warmup, test: must be >= 1, got {(window, warmup, test)}")
    stream = make_qubit_readout(warmup + window + test, seed, drift=NO_DRIFT)
    y = stream.y.copy()
    flip = rng(seed, "readout-flips").permutation(window)[: int(round(p * window))] + warmup
    y[flip] = -y[flip]
    learner = GoldenLearner(PRESETS["kan-readout"])
    n = warmup + window
    learner.run(learner.quantize_inputs(stream.x[:n]), learner.quantize_targets(y[:n]))
    learner.flush()
    preds = learner.predict(learner.quantize_inputs(stream.x[n:]))
    return assignment_fidelity(stream.y[n:], preds)
