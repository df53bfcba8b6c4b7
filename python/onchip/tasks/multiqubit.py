"""Multiplexed readout of N qubits on one datapath: N readout streams interleaved round robin.

A frequency-multiplexed readout chain reads N qubits per shot; each qubit needs its own
discriminator that follows its own drift. The stream of a learner spec with ``channels = N``
carries each sample's channel: here sample ``t = k N + c`` is shot k of qubit c (round robin),
and channel c's learner sees exactly qubit c's single-qubit stream
(:func:`onchip.tasks.readout.make_qubit_readout`), so every per-qubit figure is the
single-qubit figure of that sub-stream.

Qubit c's stream, all its randomness from a generator seeded by ``(seed, c)``:

* source: without data, a :class:`~onchip.tasks.shots.ReadoutModel` of its own
  (:func:`draw_qubit_model`: the built-in clouds rotated, their separation, noise and decay
  rate scaled); with one file per qubit, that file; with one file for every qubit, that
  file under a per-qubit :class:`~onchip.tasks.readout.IQMap` (:func:`draw_iq_map`;
  qubit 0 reads the file as it is);
* drift: by default (:data:`INDEPENDENT`) a scenario of its own (:func:`draw_qubit_drift`:
  a slow rotation and one or two abrupt events at their own positions), independent of
  every other qubit's; a preset, file or scenario given instead drives every qubit alike;
* shots, prepared states and calibration: as the single-qubit task, with the child seed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..numbers import is_integer
from .drift import DriftChange, DriftScenario, load_drift
from .fidelity import RECOVERED, TOO_SHORT
from .readout import IQMap, make_qubit_readout
from .shots import ReadoutModel
from .stream import Stream, check_samples_seed

#: ``drift`` value (and default) of a scenario drawn for each qubit on its own
INDEPENDENT = "independent"


def check_qubits(qubits) -> int:
    """Validate a qubit count (an integer >= 1) and return it as int.

    Raises:
        ValueError: naming ``qubits`` and the bad value.
    """
    if not is_integer(qubits) or qubits < 1:
        raise ValueError(f"qubits: expected an integer >= 1, got {qubits!r}")
    return int(qubits)


#: what a qubit's seed sequences draw, each from its own: the source, the drift, the shots
DRAWS = ("source", "drift", "shots")


def qubit_seed(seed: int, qubit: int, what: str) -> np.random.SeedSequence:
    """The seed sequence of one qubit's draws of ``what`` (one of :data:`DRAWS`): keyed by
    (seed, qubit, what), so no two qubits and no two kinds of draw share a stream."""
    return np.random.SeedSequence([seed, qubit, DRAWS.index(what)])


def qubit_rng(seed: int, qubit: int, what: str) -> np.random.Generator:
    """A generator on :func:`qubit_seed`."""
    return np.random.default_rng(qubit_seed(seed, qubit, what))


def draw_qubit_model(rng: np.random.Generator) -> ReadoutModel:
    """A qubit's own IQ clouds: the built-in :class:`ReadoutModel` rotated about the origin by
    U(0, 360) degrees, its state means spread about their centroid by a factor U(0.8, 1.25),
    its noise std by U(0.8, 1.25) and its decay rates by U(0.5, 2) (readout resonators at
    other frequencies and phases, qubits of other T1)."""
    base = ReadoutModel()
    angle = np.deg2rad(rng.uniform(0.0, 360.0))
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    means = base.means()
    centroid = means.mean(axis=0)
    means = (centroid + rng.uniform(0.8, 1.25) * (means - centroid)) @ rot.T
    t1 = rng.uniform(0.5, 2.0)
    return ReadoutModel(mean0=tuple(map(float, means[0])), mean1=tuple(map(float, means[1])),
                        mean2=tuple(map(float, means[2])), std=float(base.std * rng.uniform(0.8, 1.25)),
                        readout_over_t1=float(base.readout_over_t1 * t1),
                        readout_over_t1_21=float(base.readout_over_t1_21 * t1))


def draw_qubit_drift(rng: np.random.Generator, qubit: int) -> DriftScenario:
    """A qubit's own drift scenario: a slow rotation ramp of U(-30, 30) degrees over the
    stream, then one or two abrupt events at fractions of the stream drawn in [0.15, 0.85]
    at least 0.15 apart, each either a phase jump of +/-U(45, 120) degrees or a gain drop to
    U(0.7, 0.9) with an offset of U(-0.3, 0.3) separations per axis."""
    ramp = float(rng.uniform(-30.0, 30.0))
    events = [DriftChange(at=0.0, span=1.0, rotation_deg=ramp, label=f"slow rotation {ramp:+.0f} deg over the stream")]
    count = int(rng.integers(1, 3))
    while True:
        ats = np.sort(rng.uniform(0.15, 0.85, size=count))
        if count == 1 or np.diff(ats).min() >= 0.15:
            break
    for at in ats:
        if rng.random() < 0.5:
            angle = float(rng.choice([-1.0, 1.0]) * rng.uniform(45.0, 120.0))
            events.append(DriftChange(at=round(float(at), 4), rotation_deg=angle, label=f"phase jump {angle:+.0f} deg"))
        else:
            gain = float(rng.uniform(0.7, 0.9))
            off = tuple(float(v) for v in rng.uniform(-0.3, 0.3, size=2))
            events.append(DriftChange(at=round(float(at), 4), gain=gain, offset=off,
                                      label=f"gain x{gain:.2f}, offset ({off[0]:+.2f}, {off[1]:+.2f}) sep."))
    events = [dataclasses.replace(e, number=k) for k, e in enumerate(events, start=1)]
    return DriftScenario(tuple(events), description=f"qubit {qubit}: drawn on its own ({INDEPENDENT})",
                         name=f"{INDEPENDENT} (qubit {qubit})")


def draw_iq_map(rng: np.random.Generator) -> IQMap:
    """The map that reads a shared file as another qubit: rotation U(0, 360) degrees, offset
    U(-0.5, 0.5) separations per axis."""
    return IQMap(rotation_deg=round(float(rng.uniform(0.0, 360.0)), 2),
                 offset=tuple(round(float(v), 3) for v in rng.uniform(-0.5, 0.5, size=2)))


def interleave(per_qubit: Sequence[np.ndarray]) -> np.ndarray:
    """Round-robin interleaving: N arrays (S, ...) -> (N S, ...) with row k N + c = row k of array c."""
    stacked = np.stack(per_qubit, axis=1)
    return stacked.reshape((-1,) + stacked.shape[2:])


def _data_files(data, qubits: int) -> list:
    # one path (reused by every qubit) or one per qubit
    if data is None:
        return [None] * qubits
    files = [data] if isinstance(data, (str, Path)) else list(data)
    if len(files) == 1:
        return files * qubits
    if len(files) != qubits:
        raise ValueError(f"data: {len(files)} files for {qubits} qubits; give one file per qubit, or one file "
                         f"that every qubit reuses (under its own rotation and offset)")
    return files


@dataclass(frozen=True, eq=False)
class MultiQubitStream:
    """N qubits' readout streams, interleaved round robin on one datapath.

    Attributes:
        qubits: the N single-qubit streams (:class:`~onchip.tasks.stream.Stream`, S shots each,
            equal widths), qubit c's in position c.
        drifts: the drift scenario of each qubit (empty if not known).
        meta: JSON-able description (qubit count, shots per qubit, how sources and drift were made).
        x: (N S, 2) float64 features in stream order (row k N + c: shot k of qubit c).
        y: (N S, n_out) float64 targets in stream order.
        channel: (N S,) int64, the qubit of each row (0, 1, ..., N-1, 0, 1, ...).

    Raises:
        ValueError: no qubit, streams of unequal length or width, or drifts not one per qubit.
    """

    qubits: tuple[Stream, ...]
    meta: dict = field(default_factory=dict)
    drifts: tuple[DriftScenario, ...] = ()
    x: np.ndarray = field(init=False, repr=False)
    y: np.ndarray = field(init=False, repr=False)
    channel: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        if not self.qubits:
            raise ValueError("qubits: expected at least one qubit stream, got none")
        first = self.qubits[0]
        for c, s in enumerate(self.qubits):
            if len(s) != len(first) or s.x.shape[1] != first.x.shape[1] or s.y.shape[1] != first.y.shape[1]:
                raise ValueError(f"qubits: stream of qubit {c} has x {s.x.shape}, y {s.y.shape}; "
                                 f"qubit 0's has x {first.x.shape}, y {first.y.shape}")
        if self.drifts and len(self.drifts) != len(self.qubits):
            raise ValueError(f"drifts: {len(self.drifts)} scenarios for {len(self.qubits)} qubits")
        object.__setattr__(self, "x", interleave([s.x for s in self.qubits]))
        object.__setattr__(self, "y", interleave([s.y for s in self.qubits]))
        object.__setattr__(self, "channel", np.tile(np.arange(len(self.qubits), dtype=np.int64), len(first)))

    @property
    def n_qubits(self) -> int:
        return len(self.qubits)

    @property
    def shots(self) -> int:
        """Shots per qubit S."""
        return len(self.qubits[0])

    def __len__(self) -> int:
        return len(self.x)

    def split(self, values) -> list[np.ndarray]:
        """Rows in stream order ((N S, ...)) -> one (S, ...) array per qubit, in shot order.

        Raises:
            ValueError: ``values`` has not N S rows.
        """
        values = np.asarray(values)
        if len(values) != len(self):
            raise ValueError(f"predictions: {len(values)} rows for a stream of {len(self)} "
                             f"({self.n_qubits} qubits x {self.shots} shots)")
        return [values[c::self.n_qubits] for c in range(self.n_qubits)]


def make_multiqubit_readout(qubits: int, samples: int, seed: int, *, data=None, states=None,
                            drift: "str | Path | DriftScenario | None" = None,
                            progress: bool = False) -> MultiQubitStream:
    """Build the N-qubit readout stream (see the module docstring).

    Args:
        qubits: N >= 1.
        samples: shots per qubit S (>= 1); the stream holds N S samples.
        seed: non-negative integer; equal arguments give an identical stream.
        data: None (the built-in source, each qubit its own clouds), one ``.npy`` shots file
            (every qubit reuses it, qubit c >= 1 under its own :class:`IQMap`), or a sequence of
            N files (file c is qubit c's; a sequence of one is one file reused).
        states: prepared states, as for :func:`~onchip.tasks.readout.make_qubit_readout`, the
            same for every qubit.
        drift: None or ``"independent"`` (each qubit its own drawn scenario), else a preset
            name, TOML file or :class:`DriftScenario` that drives every qubit alike.
        progress: show a progress bar over the qubits (:func:`onchip.progress.progress_bar`).

    Returns:
        A :class:`MultiQubitStream`; ``meta["per_qubit"][c]`` says how qubit c's source and drift
        were made.

    Raises:
        ValueError: bad qubits, samples or seed; a data list whose length is neither 1 nor N; any
            error of :func:`~onchip.tasks.readout.make_qubit_readout` (bad file, states, drift).
        FileNotFoundError: a data or drift file does not exist.
    """
    qubits = check_qubits(qubits)
    samples, seed = check_samples_seed(samples, seed)
    files = _data_files(data, qubits)
    reused = data is not None and len(set(map(str, files))) == 1 and qubits > 1
    shared = None if drift is None or (isinstance(drift, str) and drift == INDEPENDENT) else \
        load_drift(drift, task="qubit-readout")
    from ..progress import progress_bar

    streams, scenarios, described = [], [], []
    for c in progress_bar(range(qubits), desc="qubit streams", unit="qubit", disable=not progress, leave=False):
        scenario = shared or draw_qubit_drift(qubit_rng(seed, c, "drift"), c)
        child = int(qubit_seed(seed, c, "shots").generate_state(1)[0])
        if files[c] is None:
            model = draw_qubit_model(qubit_rng(seed, c, "source"))
            stream = make_qubit_readout(samples, child, model=model, drift=scenario, states=states)
            how = "built-in source, clouds of its own"
        else:
            iq = draw_iq_map(qubit_rng(seed, c, "source")) if reused and c > 0 else None
            stream = make_qubit_readout(samples, child, data=files[c], drift=scenario, states=states, iq_map=iq)
            how = (f"{files[c]} rotated {iq.rotation_deg:g} deg, offset ({iq.offset[0]:+g}, {iq.offset[1]:+g}) sep."
                   if iq is not None else f"{files[c]}" + (" as it is" if reused else ""))
        streams.append(stream)
        scenarios.append(scenario)
        described.append({"qubit": c, "stream_seed": child, "source": how,
                          "drift": "own draw" if shared is None else f"shared: {shared.name or 'given scenario'}"})
    meta = {"task": "qubit-readout", "qubits": qubits, "samples_per_qubit": samples, "seed": seed,
            "order": "round robin: sample k*N + c is shot k of qubit c",
            "source": ("built-in source" if data is None else
                       "one file reused by every qubit (qubit c >= 1 rotated and offset)" if reused else
                       "one file per qubit"),
            "drift": INDEPENDENT if shared is None else shared.name or "given scenario",
            "per_qubit": described}
    return MultiQubitStream(tuple(streams), meta, tuple(scenarios))


#: the figures averaged over qubits (the learner's, and the static discriminator's where calibrated)
MEAN_FIELDS = ("assignment_fidelity", "assignment_fidelity_last_5000")


def _mean_figures(per_qubit: list[dict | None]) -> dict:
    # mean over the qubits that have the figures; recovered events counted over all of them
    have = [m for m in per_qubit if m is not None]
    out: dict = {"qubits": len(have)}
    for name in MEAN_FIELDS:
        out[name] = float(np.mean([m[name] for m in have])) if have else None
    status = [s for m in have for s in m["recovery_status"]]
    out["drift_events"] = len(status)
    out["recovered_events"] = sum(s == RECOVERED for s in status)
    out["too_short_events"] = sum(s == TOO_SHORT for s in status)  # neither recovered nor not: unmeasured
    shots = [n for m in have for n in m["recovery_shots"] if n is not None]
    out["recovery_shots_median"] = float(np.median(shots)) if shots else None
    return out


def evaluate_multiqubit(stream: MultiQubitStream, predictions, window: int | None = None, *,
                        progress: bool = False) -> dict:
    """Readout metrics of each qubit, and their mean, from predictions in stream order.

    Qubit c's figures are :func:`onchip.tasks.fidelity.evaluate_readout` of its own stream and
    its rows of ``predictions`` (assignment fidelity, last 5000 of its shots, recovery per drift
    event, its own static discriminator: LDA fitted on its first shots, then frozen).

    Args:
        stream: the N-qubit stream (N S samples).
        predictions: (N S, n_out) learner outputs in stream order.
        window: rolling-fidelity window in shots of one qubit (default 1000).
        progress: show a progress bar over the qubits.

    Returns:
        ``{"qubits": N, "samples_per_qubit": S, "per_qubit": [N dicts], "mean": {...},
        "static_baseline_mean": {...}}``: the means over qubits of ``assignment_fidelity`` and
        ``assignment_fidelity_last_5000``, the drift events and how many were recovered from,
        and the median recovery in shots (the static discriminator's over the qubits where it
        could be calibrated; ``qubits`` says how many).

    Raises:
        ValueError: predictions of the wrong length or width, or not finite; a bad window.
    """
    from ..progress import progress_bar
    from .fidelity import evaluate_readout

    pairs = zip(stream.qubits, stream.split(predictions))
    per_qubit = [evaluate_readout(s, p, window) for s, p in progress_bar(
        pairs, total=stream.n_qubits, desc="scoring qubits", unit="qubit", disable=not progress, leave=False)]
    return {"qubits": stream.n_qubits, "samples_per_qubit": stream.shots, "per_qubit": per_qubit,
            "mean": _mean_figures(per_qubit),
            "static_baseline_mean": _mean_figures([m["static_baseline"] for m in per_qubit])}


def rolling_per_qubit(stream: MultiQubitStream, predictions, window: int | None = None) -> np.ndarray:
    """(N, S) trailing-window assignment fidelity of each qubit over its own shots (NaN until
    its window fills); see :func:`onchip.tasks.fidelity.rolling_fidelity`."""
    from .fidelity import DEFAULT_WINDOW, rolling_fidelity
    from .stream import check_predictions, check_window

    window = check_window(DEFAULT_WINDOW if window is None else window)
    return np.stack([rolling_fidelity(s.y, check_predictions(s, p), window)
                     for s, p in zip(stream.qubits, stream.split(predictions))])
