"""Drift scenarios as data: a TOML list of changes of a task stream, validated like specs.

A scenario is a list of ``[[event]]`` tables. Each event sits at a position in the stream,
``at`` (a fraction in [0, 1), acting from sample floor(at N) on) or ``sample`` (an index in
[0, N)), and holds one kind of change:

* readout chain (task ``qubit-readout``), abrupt (a *step*) or, with ``span`` (a fraction of
  the stream) or ``span_samples``, a *linear ramp* that reaches the full change at
  start + span:

  - ``rotation_deg``: IQ-plane rotation (phase of the readout tone), degrees;
  - ``gain``: factor on the signal around the pivot (amplifier gain), > 0; a ramp goes
    linearly from 1 to ``gain``;
  - ``offset``: ``[I, Q]`` shift in units of the distance between the source's |0> and |1>
    means (DC offset);

* slow continuous drift (readout): ``rotation_deg_per_1000_shots``, a rotation rate that acts
  from the event's position to the end of the stream;
* environment (control tasks): ``dynamics = { name = value, ... }``, parameters the task
  declares (for example ``link_mass_2``), set from the event's position on.

Optional fields: ``label`` (the event's description in plots and tables). Top level:
``pivot`` (``"centre"``, the midpoint of the |0> and |1> means, or ``"origin"``, I = Q = 0;
readout only), ``description`` and the ``event`` list. An unknown field or an impossible
value raises :class:`DriftError` naming the event number (from 1), the field and the value.

A readout shot ``z`` at index t becomes ``p + g_t R(theta_t) (z - p) + d o_t`` with
theta_t the summed rotations (steps, ramps and rates reached at t), g_t the product of the
gains, o_t the summed offsets and d the |0>-|1> separation of the source
(:meth:`DriftScenario.apply_readout`).

Example (the ``default`` preset, the built-in readout drift)::

    [[event]]
    at = 0.0
    span = 1.0
    rotation_deg = 20.0
    label = "slow rotation 20 deg over the stream"

    [[event]]
    at = 0.4
    rotation_deg = 90.0
    label = "phase jump +90 deg"

    [[event]]
    at = 0.7
    gain = 0.8
    offset = [0.3, -0.2]
    label = "gain x0.8, offset (+0.3, -0.2) sep."

Use from a task: ``load_drift(text_or_path_or_preset, task="acrobot",
parameters={"link_mass_2": (0.1, 10.0)}, presets={...})``; then
:meth:`DriftScenario.stream_events` gives the events marked in plots and used for recovery
figures, :meth:`DriftScenario.dynamics_schedule` the parameter changes of a control task and
:meth:`DriftScenario.apply_readout` the drifted readout shots.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import tomli_w

from ..numbers import is_finite_number, is_integer
from .stream import DriftEvent

#: Tasks whose streams are readout shots (the IQ fields apply to them).
READOUT_TASKS = ("qubit-readout",)
PIVOTS = ("centre", "origin")
POSITION_FIELDS = ("at", "sample")
SPAN_FIELDS = ("span", "span_samples")
READOUT_FIELDS = ("rotation_deg", "gain", "offset")
RATE_FIELD = "rotation_deg_per_1000_shots"
EVENT_FIELDS = POSITION_FIELDS + SPAN_FIELDS + READOUT_FIELDS + (RATE_FIELD, "dynamics", "label")
TOP_FIELDS = ("pivot", "description", "event")

#: Built-in readout scenarios (TOML text); ``default`` is the drift of ``onchip run``.
PRESETS: dict[str, str] = {
    "default": """\
description = "slow 20 deg rotation, +90 deg phase jump at 40%, gain x0.8 and offset at 70%"

[[event]]
at = 0.0
span = 1.0
rotation_deg = 20.0
label = "slow rotation 20 deg over the stream"

[[event]]
at = 0.4
rotation_deg = 90.0
label = "phase jump +90 deg"

[[event]]
at = 0.7
gain = 0.8
offset = [0.3, -0.2]
label = "gain x0.8, offset (+0.3, -0.2) sep."
""",
    "none": """\
description = "a stationary readout chain"
event = []
""",
    "slow-rotation": """\
description = "continuous rotation of the IQ plane, 0.5 deg per 1000 shots (50 deg over 100000 shots)"

[[event]]
at = 0.0
rotation_deg_per_1000_shots = 0.5
label = "rotation 0.5 deg per 1000 shots"
""",
    "phase-jump": """\
description = "one +90 deg phase jump at half the stream"

[[event]]
at = 0.5
rotation_deg = 90.0
label = "phase jump +90 deg"
""",
    "gain-offset": """\
description = "gain drop to 0.7 and a DC offset of (+0.3, -0.2) separations at half the stream"

[[event]]
at = 0.5
gain = 0.7
offset = [0.3, -0.2]
label = "gain x0.7, offset (+0.3, -0.2) sep."
""",
}


class DriftError(ValueError):
    """A drift scenario field with a bad value (the message names the event, the field and the value)."""


@dataclass(frozen=True)
class DriftChange:
    """One event of a drift scenario (see the module docstring for the fields' meaning).

    Exactly one of ``at`` / ``sample`` is set; at most one of ``span`` / ``span_samples``.
    An event is one of: a readout step or ramp (``rotation_deg``, ``gain``, ``offset``), a
    rotation rate, or a dynamics change; ``kind`` says which.

    Attributes:
        at: fraction of the stream in [0, 1) or None.
        sample: first sample index (>= 0) or None.
        span: ramp length as a fraction of the stream in (0, 1], or None.
        span_samples: ramp length in samples (>= 1), or None.
        rotation_deg: IQ rotation, degrees.
        gain: gain factor (> 0).
        offset: (I, Q) shift, |0>-|1> separations.
        rotation_deg_per_1000_shots: rotation rate, degrees per 1000 shots, or None.
        dynamics: ((name, value), ...) environment parameters set at the position.
        label: description for plots and tables.
        number: the event's number in its scenario (from 1), for error messages.

    Raises:
        DriftError: a missing or doubled position, a value out of range, or fields of two
            kinds mixed (names the event number, the field and the value).
    """

    at: float | None = None
    sample: int | None = None
    span: float | None = None
    span_samples: int | None = None
    rotation_deg: float = 0.0
    gain: float = 1.0
    offset: tuple[float, float] = (0.0, 0.0)
    rotation_deg_per_1000_shots: float | None = None
    dynamics: tuple[tuple[str, float], ...] = ()
    label: str = ""
    number: int = 1

    def _fail(self, field: str, value, why: str):
        raise DriftError(f"drift event {self.number}: field {field!r} {why}, got {value!r}")

    def __post_init__(self):
        if (self.at is None) == (self.sample is None):
            raise DriftError(
                f"drift event {self.number}: give exactly one position, 'at' (a fraction of the "
                f"stream in [0, 1)) or 'sample' (an index), got at={self.at!r}, sample={self.sample!r}"
            )
        if self.at is not None and not (is_finite_number(self.at) and 0.0 <= self.at < 1.0):
            self._fail("at", self.at, "must be a fraction of the stream in [0, 1)")
        if self.sample is not None and not (is_integer(self.sample) and self.sample >= 0):
            self._fail("sample", self.sample, "must be an integer sample index >= 0")
        if self.span is not None and self.span_samples is not None:
            raise DriftError(
                f"drift event {self.number}: give at most one of 'span' and 'span_samples', "
                f"got span={self.span!r}, span_samples={self.span_samples!r}"
            )
        if self.span is not None:
            if not (is_finite_number(self.span) and 0.0 < self.span <= 1.0):
                self._fail("span", self.span, "must be a fraction of the stream in (0, 1]")
            if self.at is not None and self.at + self.span > 1.0 + 1e-12:
                self._fail("span", self.span, f"ends after the stream (at {self.at!r} + span > 1)")
        if self.span_samples is not None and not (is_integer(self.span_samples) and self.span_samples >= 1):
            self._fail("span_samples", self.span_samples, "must be an integer >= 1")
        if not is_finite_number(self.rotation_deg):
            self._fail("rotation_deg", self.rotation_deg, "must be a finite angle in degrees")
        if not (is_finite_number(self.gain) and self.gain > 0):
            self._fail("gain", self.gain, "must be a finite number > 0")
        off = self.offset
        if not (isinstance(off, (tuple, list)) and len(off) == 2 and all(is_finite_number(v) for v in off)):
            self._fail("offset", off, "must be two finite numbers [I, Q] in separations")
        rate = self.rotation_deg_per_1000_shots
        if rate is not None and not is_finite_number(rate):
            self._fail(RATE_FIELD, rate, "must be a finite rate in degrees per 1000 shots")
        for name, value in self.dynamics:
            if not isinstance(name, str) or not is_finite_number(value):
                self._fail("dynamics", dict(self.dynamics), f"must map names to finite numbers ({name!r})")
        if not isinstance(self.label, str):
            self._fail("label", self.label, "must be a string")
        readout = self._readout_fields()
        spanned = self.span is not None or self.span_samples is not None
        if self.dynamics and (readout or rate is not None or spanned):
            raise DriftError(
                f"drift event {self.number}: 'dynamics' is a change of its own; it cannot be combined "
                f"with {', '.join(readout + ([RATE_FIELD] if rate is not None else []) + (['span'] if spanned else []))}"
            )
        if rate is not None and (readout or spanned):
            raise DriftError(
                f"drift event {self.number}: {RATE_FIELD!r} is a continuous drift of its own; it cannot "
                f"be combined with {', '.join(readout + (['span'] if spanned else []))}"
            )
        if not (readout or rate is not None or self.dynamics):
            raise DriftError(
                f"drift event {self.number}: no change given; set one of "
                f"{', '.join(READOUT_FIELDS + (RATE_FIELD, 'dynamics'))}"
            )

    def _readout_fields(self) -> list[str]:
        return [name for name, default in (("rotation_deg", 0.0), ("gain", 1.0), ("offset", (0.0, 0.0)))
                if tuple(np.atleast_1d(getattr(self, name))) != tuple(np.atleast_1d(default))]

    @property
    def kind(self) -> str:
        """``"dynamics"``, ``"rate"``, ``"ramp"`` or ``"step"``."""
        if self.dynamics:
            return "dynamics"
        if self.rotation_deg_per_1000_shots is not None:
            return "rate"
        return "ramp" if self.span is not None or self.span_samples is not None else "step"

    def start(self, n: int) -> int:
        """First sample index the event acts on in an n-sample stream: floor(at n) or ``sample``.

        Raises:
            DriftError: ``sample`` >= n, or a ramp that ends after the stream.
        """
        start = int(np.floor(self.at * n)) if self.at is not None else int(self.sample)
        if start >= n:
            self._fail("sample", self.sample, f"is outside the {n}-sample stream")
        if self.span_samples is not None and start + self.span_samples > n:
            self._fail("span_samples", self.span_samples,
                       f"ends after the {n}-sample stream (starts at sample {start})")
        return start

    def length(self, n: int) -> int:
        """Ramp length in samples in an n-sample stream (floor(span n), at least 1); 0 for a step."""
        if self.span is not None:
            return max(1, int(np.floor(self.span * n)))
        return int(self.span_samples or 0)

    def describe(self) -> str:
        """The label, or a short description built from the fields."""
        if self.label:
            return self.label
        if self.kind == "dynamics":
            return "dynamics " + ", ".join(f"{k} = {v:g}" for k, v in self.dynamics)
        if self.kind == "rate":
            return f"rotation {self.rotation_deg_per_1000_shots:g} deg per 1000 shots"
        parts = []
        if self.rotation_deg:
            parts.append(f"rotation {self.rotation_deg:+g} deg")
        if self.gain != 1.0:
            parts.append(f"gain x{self.gain:g}")
        if tuple(self.offset) != (0.0, 0.0):
            parts.append(f"offset ({self.offset[0]:+g}, {self.offset[1]:+g}) sep.")
        text = ", ".join(parts)
        return f"ramp: {text}" if self.kind == "ramp" else text

    def to_dict(self) -> dict:
        """The event as its TOML table (fields at their defaults left out)."""
        d: dict = {}
        for name in ("at", "sample", "span", "span_samples"):
            if getattr(self, name) is not None:
                d[name] = getattr(self, name)
        if self.rotation_deg != 0.0:
            d["rotation_deg"] = self.rotation_deg
        if self.gain != 1.0:
            d["gain"] = self.gain
        if tuple(self.offset) != (0.0, 0.0):
            d["offset"] = list(self.offset)
        if self.rotation_deg_per_1000_shots is not None:
            d[RATE_FIELD] = self.rotation_deg_per_1000_shots
        if self.dynamics:
            d["dynamics"] = dict(self.dynamics)
        if self.label:
            d["label"] = self.label
        return d


@dataclass(frozen=True)
class DriftScenario:
    """A validated drift scenario: its events, the rotation pivot and where it came from.

    Attributes:
        events: the events in file order (applied in order of their first sample, file order
            among equal ones).
        pivot: ``"centre"`` or ``"origin"`` (readout rotation and gain pivot).
        description: free text.
        name: preset name or file path the scenario was read from ("" for text).

    Raises:
        DriftError: unknown pivot.
    """

    events: tuple[DriftChange, ...] = ()
    pivot: str = "centre"
    description: str = ""
    name: str = ""

    def __post_init__(self):
        if self.pivot not in PIVOTS:
            raise DriftError(f"drift: field 'pivot' must be one of {', '.join(PIVOTS)}, got {self.pivot!r}")
        if not isinstance(self.description, str):
            raise DriftError(f"drift: field 'description' must be a string, got {self.description!r}")

    # ---- position and events -------------------------------------------------------------
    def schedule(self, n: int) -> list[tuple[int, DriftChange]]:
        """(first sample, event) pairs for an n-sample stream, ordered by first sample (stable).

        Raises:
            DriftError: an event outside the stream (names the event).
        """
        if not is_integer(n) or n < 1:
            raise ValueError(f"samples: expected a positive integer, got {n!r}")
        placed = [(event.start(n), event) for event in self.events]
        return sorted(placed, key=lambda pair: pair[0])

    def stream_events(self, n: int) -> tuple[DriftEvent, ...]:
        """The drift events of an n-sample stream: one per distinct first sample in (0, n),
        labels of events sharing it joined by "; ". Events at sample 0 act from the start
        (nothing to recover from) and are not marked."""
        merged: dict[int, list[str]] = {}
        for start, event in self.schedule(n):
            if 0 < start < n:
                merged.setdefault(start, []).append(event.describe())
        return tuple(DriftEvent(index, "; ".join(labels)) for index, labels in merged.items())

    def dynamics_schedule(self, n: int) -> list[tuple[int, dict[str, float]]]:
        """Environment changes of a control task: ``(first sample, {name: value})`` in order;
        a parameter keeps its value until a later event changes it."""
        return [(start, dict(event.dynamics)) for start, event in self.schedule(n) if event.kind == "dynamics"]

    # ---- readout -------------------------------------------------------------------------
    def readout_trajectory(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-shot rotation (rad, (n,)), gain ((n,)) and offset ((n, 2), separations).

        Steps act from their first shot on; a ramp of L shots starting at s contributes
        the fraction clip(t - s, 0, L) / L of its change (gain: 1 + (gain - 1) fraction);
        a rate contributes rate (t - s) / 1000 degrees for t >= s.
        """
        t = np.arange(n)
        theta = np.zeros(n)
        gain = np.ones(n)
        offset = np.zeros((n, 2))
        for start, event in self.schedule(n):
            off = np.asarray(event.offset, dtype=np.float64)
            if event.kind == "step":
                theta[start:] += np.deg2rad(event.rotation_deg)
                gain[start:] *= event.gain
                offset[start:] += off
            elif event.kind == "ramp":
                length = event.length(n)
                frac_num = np.clip(t - start, 0, length)
                theta += np.deg2rad(event.rotation_deg) * frac_num / length
                frac = frac_num / length
                gain *= 1.0 + (event.gain - 1.0) * frac
                offset += frac[:, None] * off
            elif event.kind == "rate":
                theta[start:] += np.deg2rad(event.rotation_deg_per_1000_shots) * (t[start:] - start) / 1000.0
        return theta, gain, offset

    def apply_readout(self, z: np.ndarray, pivot_point: np.ndarray, separation: float) -> np.ndarray:
        """Drift shots ``z`` ((n, 2), stream order, ADC units): ``p + g R(theta) (z - p) + d o``.

        Args:
            z: (n, 2) shots.
            pivot_point: (2,) midpoint of the |0> and |1> means (used for pivot ``"centre"``).
            separation: d, distance between the |0> and |1> means, ADC units.

        Returns:
            (n, 2) float64 drifted shots.
        """
        theta, gain, offset = self.readout_trajectory(len(z))
        p = np.asarray(pivot_point, dtype=np.float64) if self.pivot == "centre" else np.zeros(2)
        dz = z - p
        c, s = np.cos(theta), np.sin(theta)
        rotated = np.stack([c * dz[:, 0] - s * dz[:, 1], s * dz[:, 0] + c * dz[:, 1]], axis=1)
        return p + gain[:, None] * rotated + separation * offset

    # ---- checks and serialisation -------------------------------------------------------
    def check_task(self, task: str, parameters: "Mapping[str, tuple] | None" = None) -> "DriftScenario":
        """Check that every event applies to ``task``; return self.

        Args:
            task: task name; readout fields apply to :data:`READOUT_TASKS` only.
            parameters: the task's dynamics parameters, ``{name: (low, high)}`` (inclusive
                bounds, None for unbounded) or a sequence of names; None or empty: the task
                takes no dynamics events.

        Raises:
            DriftError: an event of a kind the task does not take, an unknown parameter name
                or a value out of its range (names the event, the field and the value).
        """
        bounds = _bounds(parameters)
        for event in self.events:
            where = f"drift event {event.number}"
            if event.kind == "dynamics":
                if not bounds:
                    raise DriftError(
                        f"{where}: field 'dynamics' does not apply to task {task!r}, which has no "
                        f"dynamics parameters; got {dict(event.dynamics)!r}"
                    )
                for name, value in event.dynamics:
                    if name not in bounds:
                        raise DriftError(
                            f"{where}: field 'dynamics': unknown parameter {name!r} for task {task!r}; "
                            f"known: {', '.join(bounds)}"
                        )
                    low, high = bounds[name]
                    if (low is not None and value < low) or (high is not None and value > high):
                        raise DriftError(
                            f"{where}: field 'dynamics': {name} = {value!r} is outside "
                            f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
                        )
            elif task not in READOUT_TASKS:
                field = (event._readout_fields() or [RATE_FIELD])[0]
                value = getattr(event, field)
                raise DriftError(
                    f"{where}: field {field!r} (a readout-chain change) does not apply to task {task!r}, "
                    f"got {value!r}; "
                    + (f"it takes dynamics = {{ name = value }} with {', '.join(bounds)}" if bounds
                       else "it takes no drift events")
                )
        return self

    def to_dict(self) -> dict:
        d: dict = {}
        if self.description:
            d["description"] = self.description
        if self.pivot != "centre":
            d["pivot"] = self.pivot
        d["event"] = [event.to_dict() for event in self.events]
        return d

    def to_toml(self) -> str:
        """The scenario as TOML text that :func:`load_drift` reads back to an equal scenario."""
        head = f"# drift scenario {self.name}\n" if self.name else ""
        return head + tomli_w.dumps(self.to_dict())

    def describe(self, n: int | None = None) -> dict:
        """JSON-able description; with n, each event's first sample in an n-sample stream."""
        d = {"name": self.name, "pivot": self.pivot, **self.to_dict()}
        if n is not None:
            starts = [event.start(n) for event in self.events]
            d["event"] = [{**e, "first_sample": s} for e, s in zip(d["event"], starts)]
        return d

    @classmethod
    def from_dict(cls, data: Mapping, name: str = "") -> "DriftScenario":
        """Build from a parsed TOML document.

        Raises:
            DriftError: an unknown field, a wrong type or an impossible value.
        """
        if not isinstance(data, Mapping):
            raise DriftError(f"drift: expected a table of fields, got {data!r}")
        for key in data:
            if key not in TOP_FIELDS:
                raise DriftError(f"drift: unknown field {key!r}; known fields: {', '.join(TOP_FIELDS)}")
        raw_events = data.get("event", [])
        if not isinstance(raw_events, list):
            raise DriftError(f"drift: field 'event' must be a list of [[event]] tables, got {raw_events!r}")
        events = []
        for number, raw in enumerate(raw_events, start=1):
            if not isinstance(raw, Mapping):
                raise DriftError(f"drift event {number}: expected a table of fields, got {raw!r}")
            for key in raw:
                if key not in EVENT_FIELDS:
                    raise DriftError(
                        f"drift event {number}: unknown field {key!r} (value {raw[key]!r}); "
                        f"known fields: {', '.join(EVENT_FIELDS)}"
                    )
            kwargs = dict(raw)
            if "offset" in kwargs:
                off = kwargs["offset"]
                kwargs["offset"] = tuple(off) if isinstance(off, list) else off
            if "dynamics" in kwargs:
                dyn = kwargs["dynamics"]
                if not isinstance(dyn, Mapping) or not dyn:
                    raise DriftError(
                        f"drift event {number}: field 'dynamics' must be a non-empty table "
                        f"{{ name = value, ... }}, got {dyn!r}"
                    )
                kwargs["dynamics"] = tuple(dyn.items())
            events.append(DriftChange(**kwargs, number=number))
        return cls(tuple(events), pivot=data.get("pivot", "centre"),
                   description=data.get("description", ""), name=name)


def _bounds(parameters) -> dict[str, tuple]:
    if not parameters:
        return {}
    if isinstance(parameters, Mapping):
        out = {}
        for name, rng in parameters.items():
            low, high = (None, None) if rng is None else rng
            out[str(name)] = (low, high)
        return out
    return {str(name): (None, None) for name in parameters}


def parse_drift(text: str, name: str = "") -> DriftScenario:
    """Parse TOML text into a scenario (no task check).

    Raises:
        DriftError: not TOML, or an invalid scenario.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DriftError(f"drift: not valid TOML ({exc})") from None
    return DriftScenario.from_dict(data, name=name)


def load_drift(
    source: "str | Path | DriftScenario",
    *,
    task: str,
    parameters: "Mapping[str, tuple] | None" = None,
    presets: "Mapping[str, str] | None" = None,
) -> DriftScenario:
    """A preset name, a TOML file path, TOML text or a scenario -> a scenario checked for ``task``.

    Args:
        source: a name in ``presets``; a path to a ``.toml`` file; TOML text (anything holding
            a newline or '='); or a :class:`DriftScenario`.
        task: the task the scenario drives (``"qubit-readout"`` takes readout fields).
        parameters: the task's dynamics parameters, ``{name: (low, high)}`` with inclusive
            bounds (None: unbounded) or a sequence of names; None for a task without dynamics.
        presets: ``{name: TOML text}`` the task offers; default the readout :data:`PRESETS`.

    Returns:
        The validated scenario (``name`` is the preset name or the file path).

    Raises:
        DriftError: an invalid scenario, or an event the task does not take (names the event
            number, the field and the value; file errors also name the file).
        FileNotFoundError: ``source`` is neither a preset, TOML text nor an existing file.
    """
    presets = PRESETS if presets is None else presets
    if isinstance(source, DriftScenario):
        return source.check_task(task, parameters)
    text = str(source)
    if text in presets:
        scenario = parse_drift(presets[text], name=text)
    elif "\n" in text or "=" in text:
        scenario = parse_drift(text)
    else:
        path = Path(text)
        if not path.is_file():
            raise FileNotFoundError(
                f"drift: {text!r} is neither a preset ({', '.join(presets)}) nor an existing file"
            )
        try:
            scenario = parse_drift(path.read_text(), name=text)
            scenario.check_task(task, parameters)
        except DriftError as exc:
            raise DriftError(f"drift file {text}: {str(exc).removeprefix('drift: ')}") from None
        return scenario
    return scenario.check_task(task, parameters)
