"""Non-stationary qubit-readout stream: real or modelled shots under a drift model.

The online-readout setting follows D. Hoang, A. Gupta, P. Harris, "Ultrafast
On-Chip Online Learning via Spline Locality in Kolmogorov-Arnold Networks",
arXiv:2602.02056 (2026): a discriminator learns, shot by shot, to assign the
qubit state from the integrated (I, Q) value while the readout chain drifts;
the label is the prepared state (calibration-style feedback).

Building a stream of N shots (all randomness from one numpy Generator):

1. Prepared states: N independent fair draws of |0> or |1>.
2. Shots: for a file, shots of that state drawn at random from the file
   (without replacement while the file has enough, otherwise with
   replacement); without a file, fresh shots of :class:`ReadoutModel`.
3. Drift, as a function of the shot index t (u = t / N), see :class:`ReadoutDrift`::

       z'_t = p + g_t R(theta_t) (z_t - p) + d o_t

   theta_t = ramp_deg u + the rotations of the steps passed, g_t the product
   of their gains, o_t the sum of their offsets (in units of d, the distance
   between the source's |0> and |1> means), p the pivot of the rotation.
4. Calibration: from the first min(2000, N) shots of the drifted stream,
   the |0> and |1> means m0, m1 give a fixed affine map
   ``x = (z' - (m0 + m1) / 2) * 2 / |m1 - m0|``: centred between the states,
   which sit 2 apart (at distance 1 from the centre, the scale of the ±1
   targets). One scalar scale keeps the IQ geometry (angles, cluster
   shapes); on the real transmon shots with the default drift the features
   stay within about [-2.8, 2.8], inside the [-4, 4) of 16-bit formats with
   4 integer bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .shots import ReadoutModel, load_shots
from .stream import DriftEvent, Stream, check_samples_seed

CALIBRATION_SHOTS = 2000
# distance between the calibrated |0> and |1> means in feature units
FEATURE_SEPARATION = 2.0
PIVOTS = ("centre", "origin")


@dataclass(frozen=True)
class DriftStep:
    """An abrupt change of the readout chain, from a fraction of the stream on.

    Attributes:
        at: fraction of the stream in (0, 1); the change acts from shot floor(at N) on.
        rotation_deg: extra IQ-plane rotation (phase of the readout tone), degrees.
        gain: factor on the signal around the pivot (amplifier gain), > 0.
        offset: (I, Q) shift in units of the |0>-|1> separation (DC offset).
        label: description used for the drift event.
    """

    at: float
    rotation_deg: float = 0.0
    gain: float = 1.0
    offset: tuple[float, float] = (0.0, 0.0)
    label: str = ""

    def __post_init__(self):
        if not (np.isfinite(self.at) and 0.0 < self.at < 1.0):
            raise ValueError(f"DriftStep.at: expected a fraction in (0, 1), got {self.at!r}")
        if not np.isfinite(self.rotation_deg):
            raise ValueError(f"DriftStep.rotation_deg: expected a finite angle, got {self.rotation_deg!r}")
        if not (np.isfinite(self.gain) and self.gain > 0):
            raise ValueError(f"DriftStep.gain: expected a finite value > 0, got {self.gain!r}")
        off = np.asarray(self.offset, dtype=float)
        if off.shape != (2,) or not np.isfinite(off).all():
            raise ValueError(f"DriftStep.offset: expected two finite numbers, got {self.offset!r}")


@dataclass(frozen=True)
class ReadoutDrift:
    """Drift of the readout chain as a function of the shot index.

    A slow rotation ramp (``ramp_deg`` over the whole stream, linear in the
    shot index) plus abrupt :class:`DriftStep` changes. Rotation and gain act
    around the pivot: ``"centre"`` (default), the midpoint of the source's
    |0> and |1> means, keeps every file's drifted clusters at the same
    distance from the calibration centre whatever DC offset it carries;
    ``"origin"`` rotates around I = Q = 0 like a pure phase shift of the tone.

    The default scenario (:data:`DEFAULT_DRIFT`): ramp 20 deg over the stream,
    a +90 deg phase jump at 40% of the stream (puts the static decision
    boundary through both clusters), and at 70% a gain drop to 0.8 with an
    offset of (+0.3, -0.2) separations.

    Raises:
        ValueError: non-finite ramp, unknown pivot, or steps not in increasing ``at`` order.
    """

    ramp_deg: float = 20.0
    steps: tuple[DriftStep, ...] = (
        DriftStep(0.4, rotation_deg=90.0, label="phase jump +90 deg"),
        DriftStep(0.7, gain=0.8, offset=(0.3, -0.2), label="gain x0.8, offset (+0.3, -0.2) sep."),
    )
    pivot: str = "centre"

    def __post_init__(self):
        if not np.isfinite(self.ramp_deg):
            raise ValueError(f"ReadoutDrift.ramp_deg: expected a finite angle, got {self.ramp_deg!r}")
        if self.pivot not in PIVOTS:
            raise ValueError(f"ReadoutDrift.pivot: expected one of {PIVOTS}, got {self.pivot!r}")
        ats = [s.at for s in self.steps]
        if any(b <= a for a, b in zip(ats, ats[1:])):
            raise ValueError(f"ReadoutDrift.steps: 'at' must increase strictly, got {ats}")

    def step_indices(self, n: int) -> list[int]:
        """First shot index of each step in an n-shot stream: floor(at n)."""
        return [int(np.floor(s.at * n)) for s in self.steps]

    def trajectory(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-shot rotation (rad, (n,)), gain ((n,)) and offset ((n, 2), separations)."""
        t = np.arange(n)
        theta = np.deg2rad(self.ramp_deg) * t / n
        gain = np.ones(n)
        offset = np.zeros((n, 2))
        for step, start in zip(self.steps, self.step_indices(n)):
            theta[start:] += np.deg2rad(step.rotation_deg)
            gain[start:] *= step.gain
            offset[start:] += np.asarray(step.offset, dtype=float)
        return theta, gain, offset

    def apply(self, z: np.ndarray, pivot: np.ndarray, separation: float) -> np.ndarray:
        """Drift shots ``z`` ((n, 2), stream order, ADC units) and return them, same shape."""
        theta, gain, offset = self.trajectory(len(z))
        p = np.asarray(pivot, dtype=np.float64) if self.pivot == "centre" else np.zeros(2)
        dz = z - p
        c, s = np.cos(theta), np.sin(theta)
        rotated = np.stack([c * dz[:, 0] - s * dz[:, 1], s * dz[:, 0] + c * dz[:, 1]], axis=1)
        return p + gain[:, None] * rotated + separation * offset

    def describe(self) -> dict:
        """JSON-able parameters."""
        return {
            "ramp_deg": self.ramp_deg,
            "pivot": self.pivot,
            "steps": [
                {"at": s.at, "rotation_deg": s.rotation_deg, "gain": s.gain,
                 "offset_separations": list(s.offset), "label": s.label}
                for s in self.steps
            ],
        }


DEFAULT_DRIFT = ReadoutDrift()
NO_DRIFT = ReadoutDrift(ramp_deg=0.0, steps=())


@dataclass(frozen=True)
class Calibration:
    """Fixed affine map from drifted ADC values to features: ``x = (z - centre) * scale``."""

    centre: np.ndarray = field(compare=False)
    scale: float
    shots: int
    method: str

    def __call__(self, z: np.ndarray) -> np.ndarray:
        return (z - self.centre) * self.scale


def calibrate(z: np.ndarray, states: np.ndarray, fallback: tuple[np.ndarray, np.ndarray],
              shots: int = CALIBRATION_SHOTS) -> Calibration:
    """Calibration step: centre between the state means, state means 2 apart.

    Uses the first ``min(shots, n)`` shots of the stream. A stream too short to
    hold both states among them (a handful of shots) falls back to the
    source's own state means ``fallback``.
    """
    n = min(shots, len(z))
    cal_z, cal_s = z[:n], states[:n]
    if (cal_s == 0).any() and (cal_s == 1).any():
        m0, m1 = cal_z[cal_s == 0].mean(axis=0), cal_z[cal_s == 1].mean(axis=0)
        method = f"state means of the first {n} shots"
    else:
        m0, m1 = fallback
        method = "state means of the source (calibration block lacks a state)"
    sep = float(np.hypot(*(m1 - m0)))
    if sep == 0.0:
        m0, m1 = fallback
        sep = float(np.hypot(*(m1 - m0)))
        method = "state means of the source (calibration means coincide)"
    return Calibration(centre=(m0 + m1) / 2.0, scale=FEATURE_SEPARATION / sep, shots=n, method=method)


def make_qubit_readout(
    samples: int,
    seed: int,
    *,
    data: str | Path | None = None,
    drift: ReadoutDrift = DEFAULT_DRIFT,
    model: ReadoutModel | None = None,
    calibration_shots: int = CALIBRATION_SHOTS,
) -> Stream:
    """Build a drifting qubit-readout stream (see the module docstring for each step).

    Args:
        samples: number of shots N (>= 1).
        seed: seed of the numpy Generator; the stream is a pure function of the
            arguments and the file contents.
        data: ``.npy`` of layout (states, shots, 2) (see :func:`load_shots`);
            None uses the built-in :class:`ReadoutModel`.
        drift: drift scenario; :data:`NO_DRIFT` gives a stationary stream.
        model: parameters of the built-in source (only without ``data``).
        calibration_shots: shots at the start of the stream used for the
            normalisation (and by the static baseline).

    Returns:
        Stream with x (N, 2) features (calibrated state means 2 apart), y (N, 1) in
        {-1.0, +1.0} (prepared |0> / |1>), one event per drift step inside the stream.

    Raises:
        FileNotFoundError: ``data`` does not exist.
        ValueError: samples < 1 or seed < 0 (or not integers), invalid file
            (see :func:`load_shots`), states 0 and 1 with
            identical means, both ``data`` and ``model`` given, calibration_shots < 1.
    """
    samples, seed = check_samples_seed(samples, seed)
    if data is not None and model is not None:
        raise ValueError("model: the built-in source model cannot be combined with a data file")
    if isinstance(calibration_shots, bool) or not isinstance(calibration_shots, (int, np.integer)) \
            or calibration_shots < 1:
        raise ValueError(f"calibration_shots: expected a positive integer, got {calibration_shots!r}")
    if data is not None:
        shots = load_shots(data)
        means = (shots[0].mean(axis=0), shots[1].mean(axis=0))
        if np.array_equal(means[0], means[1]):
            raise ValueError(f"data: {str(data)!r}: states 0 and 1 have the same mean {means[0].tolist()}")
    else:
        model = model or ReadoutModel()
        means = (np.asarray(model.mean0, dtype=float), np.asarray(model.mean1, dtype=float))
    separation = float(np.hypot(*(means[1] - means[0])))

    rng = np.random.default_rng(seed)
    states = rng.integers(0, 2, size=samples)
    raw = np.empty((samples, 2))
    replacement = []
    for s in (0, 1):
        where = np.flatnonzero(states == s)
        if data is not None:
            pool = shots[s]
            replace = len(where) > len(pool)
            replacement.append(replace)
            raw[where] = pool[rng.choice(len(pool), size=len(where), replace=replace)]
        else:
            raw[where] = model.sample(s, len(where), rng)

    drifted = drift.apply(raw, (means[0] + means[1]) / 2.0, separation)
    cal = calibrate(drifted, states, means, calibration_shots)
    x = cal(drifted)
    y = np.where(states == 1, 1.0, -1.0)[:, None]

    events, last = [], 0
    for step, index in zip(drift.steps, drift.step_indices(samples)):
        if last < index < samples:
            events.append(DriftEvent(index, step.label or f"drift step at {step.at:g}"))
            last = index

    if data is not None:
        source = {"kind": "file", "path": str(data), "file_shape": list(shots.shape),
                  "states_used": [0, 1], "with_replacement": replacement}
    else:
        source = {"kind": "model", **model.describe()}
    source["state_means_adc"] = [m.tolist() for m in means]
    meta = {
        "task": "qubit-readout",
        "samples": samples,
        "seed": seed,
        "labels": {"-1.0": "prepared |0>", "+1.0": "prepared |1>"},
        "source": source,
        "drift": drift.describe(),
        "normalisation": {
            "formula": "x = (z - centre) * scale",
            "centre_adc": cal.centre.tolist(),
            "scale_per_adc": cal.scale,
            "calibration_shots": cal.shots,
            "method": cal.method,
        },
        "feature_range": [float(x.min()), float(x.max())],
        "fraction_outside_pm4": float(np.mean((x < -4.0) | (x >= 4.0))),
    }
    return Stream("qubit-readout", x, y, tuple(events), meta)
