"""Non-stationary qubit-readout stream: real or modelled shots under a drift model.

The online-readout setting follows D. Hoang, A. Gupta, P. Harris, "Ultrafast
On-Chip Online Learning via Spline Locality in Kolmogorov-Arnold Networks",
arXiv:2602.02056 (2026): a discriminator learns, shot by shot, to assign the
qubit state from the integrated (I, Q) value while the readout chain drifts;
the label is the prepared state (calibration-style feedback).

Building a stream of N shots (all randomness from one numpy Generator):

1. Prepared states: N independent uniform draws among the S selected states
   (``states``: every state of a file, |0> and |1> of the built-in source
   unless more are asked for).
2. Shots: for a file, shots of that state drawn at random from the file
   (without replacement while the file has enough, otherwise with
   replacement); without a file, fresh shots of :class:`ReadoutModel`.
3. Drift, as a function of the shot index t, see :mod:`onchip.tasks.drift`::

       z'_t = p + g_t R(theta_t) (z_t - p) + d o_t

   theta_t the rotations of the steps, ramps and rates reached at t, g_t the
   product of their gains, o_t the sum of their offsets (in units of d, the
   distance between the means of the first two selected states), p the pivot.
4. Calibration: from the first min(2000, N) shots of the drifted stream,
   the means m0, m1 of the first two selected states give a fixed affine map
   ``x = (z' - (m0 + m1) / 2) * 2 / |m1 - m0|``: centred between the states,
   which sit 2 apart (at distance 1 from the centre, the scale of the ±1
   targets). One scalar scale keeps the IQ geometry (angles, cluster
   shapes); on the real transmon shots with the default drift the features
   stay within about [-2.8, 2.8], inside the [-4, 4) of 16-bit formats with
   4 integer bits.
5. Targets: S = 2, one output, -1.0 / +1.0 for the first / second selected
   state (sign decision); S > 2, S outputs one-hot +/-1 (argmax decision).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .drift import PIVOTS, DriftChange, DriftScenario, load_drift
from .shots import ReadoutModel, load_shots
from .stream import DriftEvent, Stream, check_samples_seed

CALIBRATION_SHOTS = 2000
# distance between the calibrated |0> and |1> means in feature units
FEATURE_SEPARATION = 2.0


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

    def scenario(self) -> DriftScenario:
        """The same drift as a :class:`~onchip.tasks.drift.DriftScenario` (a ramp over the
        whole stream from shot 0, then one step per :class:`DriftStep`)."""
        events = []
        if self.ramp_deg != 0.0:
            events.append(DriftChange(at=0.0, span=1.0, rotation_deg=self.ramp_deg,
                                      label=f"slow rotation {self.ramp_deg:g} deg over the stream"))
        for step in self.steps:
            events.append(DriftChange(at=step.at, rotation_deg=step.rotation_deg, gain=step.gain,
                                      offset=tuple(step.offset), label=step.label or f"drift step at {step.at:g}"))
        events = [dataclasses.replace(e, number=k) for k, e in enumerate(events, start=1)]
        return DriftScenario(tuple(events), pivot=self.pivot)

    def trajectory(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-shot rotation (rad, (n,)), gain ((n,)) and offset ((n, 2), separations)."""
        return self.scenario().readout_trajectory(n)

    def apply(self, z: np.ndarray, pivot: np.ndarray, separation: float) -> np.ndarray:
        """Drift shots ``z`` ((n, 2), stream order, ADC units) and return them, same shape."""
        return self.scenario().apply_readout(z, pivot, separation)

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
class IQMap:
    """A fixed rotation and offset of a file's shots: one measured qubit read as another.

    ``z' = c + R(rotation_deg) (z - c) + d offset``, with c the midpoint and d the distance of
    the means of the first two selected states (ADC units). It acts before the drift and the
    calibration; the calibration re-centres the stream, so the rotation is what the learner
    sees (another orientation of the decision boundary), the offset what the raw ADC values show.

    Attributes:
        rotation_deg: IQ-plane rotation, degrees.
        offset: (I, Q) shift in units of d.

    Raises:
        ValueError: a non-finite rotation or offset (names the field).
    """

    rotation_deg: float = 0.0
    offset: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self):
        if not np.isfinite(self.rotation_deg):
            raise ValueError(f"IQMap.rotation_deg: expected a finite angle, got {self.rotation_deg!r}")
        off = np.asarray(self.offset, dtype=float)
        if off.shape != (2,) or not np.isfinite(off).all():
            raise ValueError(f"IQMap.offset: expected two finite numbers, got {self.offset!r}")

    def apply(self, shots: np.ndarray, mean0: np.ndarray, mean1: np.ndarray) -> np.ndarray:
        """Map ``shots`` (any (..., 2) array, ADC units) given the two reference means (2,); same shape."""
        centre, sep = (mean0 + mean1) / 2.0, float(np.hypot(*(mean1 - mean0)))
        a = np.deg2rad(self.rotation_deg)
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        return centre + (shots - centre) @ rot.T + sep * np.asarray(self.offset, dtype=float)

    def describe(self) -> dict:
        """JSON-able parameters."""
        return {"rotation_deg": float(self.rotation_deg), "offset_separations": [float(v) for v in self.offset]}


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


def check_states(states, available: int, where: str) -> tuple[int, ...]:
    """Validate a selection of prepared states: distinct integers in [0, available), at least 2,
    in increasing order.

    Args:
        states: sequence of ints, a comma-separated string such as ``"0,1,2"``, or None.
        available: number of states the source holds.
        where: what the states come from, for the message (a file path or "the built-in source").

    Returns:
        The selection as a tuple.

    Raises:
        ValueError: naming ``states`` and the bad value.
    """
    raw = states
    if isinstance(states, str):
        try:
            states = [int(part) for part in states.split(",")]
        except ValueError:
            raise ValueError(f"states: expected comma-separated state numbers such as 0,1,2, got {raw!r}") from None
    try:
        states = tuple(states)
    except TypeError:
        raise ValueError(f"states: expected a list of state numbers, got {raw!r}") from None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in states):
        raise ValueError(f"states: expected integer state numbers, got {raw!r}")
    states = tuple(int(v) for v in states)
    if len(states) < 2:
        raise ValueError(f"states: need at least 2 states to tell apart, got {raw!r}")
    if any(b <= a for a, b in zip(states, states[1:])):
        raise ValueError(f"states: expected distinct states in increasing order, got {raw!r}")
    if states[0] < 0 or states[-1] >= available:
        raise ValueError(
            f"states: {where} holds states 0..{available - 1}, got {raw!r}"
        )
    return states


def readout_targets(labels: np.ndarray, n_states: int) -> np.ndarray:
    """Targets of prepared-state indices ``labels`` ((N,) ints in [0, S)).

    S = 2: (N, 1), -1.0 for index 0 and +1.0 for index 1 (one output, sign decision);
    S > 2: (N, S) one-hot +/-1, +1.0 in the column of the prepared index, -1.0 elsewhere
    (S outputs, argmax decision; see :func:`onchip.model.decision.decisions`).
    """
    if n_states == 2:
        return np.where(labels == 1, 1.0, -1.0)[:, None]
    return np.where(np.arange(n_states)[None, :] == labels[:, None], 1.0, -1.0)


def make_qubit_readout(
    samples: int,
    seed: int,
    *,
    data: str | Path | None = None,
    drift: "ReadoutDrift | DriftScenario | str | Path" = DEFAULT_DRIFT,
    model: ReadoutModel | None = None,
    calibration_shots: int = CALIBRATION_SHOTS,
    states=None,
    iq_map: "IQMap | None" = None,
) -> Stream:
    """Build a drifting qubit-readout stream (see the module docstring for each step).

    Args:
        samples: number of shots N (>= 1).
        seed: seed of the numpy Generator; the stream is a pure function of the
            arguments and the file contents.
        data: ``.npy`` of layout (states, shots, 2) (see :func:`load_shots`);
            None uses the built-in :class:`ReadoutModel`.
        drift: drift scenario: a :class:`ReadoutDrift`, a
            :class:`~onchip.tasks.drift.DriftScenario`, or a preset name / TOML file
            for :func:`~onchip.tasks.drift.load_drift`; :data:`NO_DRIFT` (preset ``none``)
            gives a stationary stream.
        model: parameters of the built-in source (only without ``data``).
        calibration_shots: shots at the start of the stream used for the
            normalisation (and by the static baseline).
        states: prepared states to use, increasing (e.g. ``(0, 1, 2)`` or ``"0,1,2"``);
            default every state of the file, or states 0 and 1 of the built-in source.
        iq_map: an :class:`IQMap` applied to the file's shots before the drift (only with
            ``data``): one measured file read as another qubit's (the multi-qubit task).

    Returns:
        Stream with x (N, 2) features (calibrated means of the first two selected states
        2 apart) and y from :func:`readout_targets`: (N, 1) in {-1.0, +1.0} for two states,
        (N, S) one-hot +/-1 for S > 2; one event per drift event inside the stream.

    Raises:
        FileNotFoundError: ``data`` or a drift file does not exist.
        ValueError: samples < 1 or seed < 0 (or not integers), invalid file
            (see :func:`load_shots`), a bad ``states`` selection, two selected states
            with identical means, both ``data`` and ``model`` given, ``iq_map`` without ``data``,
            calibration_shots < 1,
            an invalid drift scenario (:class:`~onchip.tasks.drift.DriftError`).
    """
    samples, seed = check_samples_seed(samples, seed)
    if data is not None and model is not None:
        raise ValueError("model: the built-in source model cannot be combined with a data file")
    if iq_map is not None and data is None:
        raise ValueError("iq_map: maps the shots of a data file; the built-in source takes a model instead")
    if isinstance(calibration_shots, bool) or not isinstance(calibration_shots, (int, np.integer)) \
            or calibration_shots < 1:
        raise ValueError(f"calibration_shots: expected a positive integer, got {calibration_shots!r}")
    scenario = drift.scenario() if isinstance(drift, ReadoutDrift) else load_drift(drift, task="qubit-readout")
    if data is not None:
        shots = load_shots(data)
        selected = check_states(range(len(shots)) if states is None else states, len(shots), f"data {str(data)!r}")
        if iq_map is not None:
            shots = iq_map.apply(shots, shots[selected[0]].mean(axis=0), shots[selected[1]].mean(axis=0))
        means = [shots[s].mean(axis=0) for s in selected]
        for a in range(len(selected)):
            for b in range(a + 1, len(selected)):
                if np.array_equal(means[a], means[b]):
                    raise ValueError(
                        f"data: {str(data)!r}: states {selected[a]} and {selected[b]} have the same mean "
                        f"{means[a].tolist()}"
                    )
    else:
        model = model or ReadoutModel()
        selected = check_states((0, 1) if states is None else states, model.STATES, "the built-in source")
        means = [model.means()[s] for s in selected]
    n_states = len(selected)
    separation = float(np.hypot(*(means[1] - means[0])))
    events = scenario.stream_events(samples)  # refuses events outside the stream before any work

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_states, size=samples)
    raw = np.empty((samples, 2))
    replacement, draws = [], []
    for k, state in enumerate(selected):
        where = np.flatnonzero(labels == k)
        draws.append(int(len(where)))
        if data is not None:
            pool = shots[state]
            replace = len(where) > len(pool)
            replacement.append(replace)
            raw[where] = pool[rng.choice(len(pool), size=len(where), replace=replace)]
        else:
            raw[where] = model.sample(state, len(where), rng)

    drifted = scenario.apply_readout(raw, (means[0] + means[1]) / 2.0, separation)
    cal = calibrate(drifted, labels, (means[0], means[1]), calibration_shots)
    x = cal(drifted)
    y = readout_targets(labels, n_states)

    if data is not None:
        source = {"kind": "file", "path": str(data), "file_shape": list(shots.shape),
                  "states_used": list(selected), "with_replacement": replacement,
                  "distinct_shots": [int(shots.shape[1])] * n_states, "draws": draws}
        if iq_map is not None:
            source["iq_map"] = iq_map.describe()
    else:
        source = {"kind": "model", **model.describe(), "states_used": list(selected), "draws": draws}
    source["state_means_adc"] = [m.tolist() for m in means]
    if n_states == 2:
        target_labels = {"-1.0": f"prepared |{selected[0]}>", "+1.0": f"prepared |{selected[1]}>"}
    else:
        target_labels = {f"output {k}": f"+1.0 when prepared |{s}>, else -1.0" for k, s in enumerate(selected)}
    meta = {
        "task": "qubit-readout",
        "samples": samples,
        "seed": seed,
        "states": list(selected),
        "labels": target_labels,
        "source": source,
        "drift": scenario.describe(samples),
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
    return Stream("qubit-readout", x, y, events, meta)
