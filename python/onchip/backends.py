"""One interface for every implementation of a learner, registered by name in one place.

A backend runs a :class:`~onchip.spec.LearnerSpec` over a whole stream, test-then-train
(online SGD with batch size 1: each prediction is made before its sample's update), or
inference only:

* ``golden``: :class:`onchip.model.GoldenLearner`, the integer reference that defines the semantics;
* ``float``: :class:`onchip.model.float_twin.FloatTwin`, the same learner in float64 (PyTorch);
* ``rtl``: the Verilated Amaranth design driven by the C++ stream harness (:mod:`onchip.verilator.backend`);
* ``cocotb``: the same design under the cocotb bench (:mod:`onchip.hw.sim`), protocol and all;
* ``hls``: the HLS C++ under C simulation (:mod:`onchip.hls.backend`).

Every fixed-point backend (``raw`` is True) takes raw integers and returns raw predictions,
decisions and parameters equal to the golden model's, bit for bit (the project's contract; one
test, ``tests/test_backends.py``, checks it for every backend available here). The float twin
takes and returns floats.

With ``spec.channels`` = N > 1 each sample also names its channel (``channel`` (N,) integers in
[0, N), required; :func:`onchip.model.golden.check_channel`) and parameters are (N, P), a bank per
channel: channel c's results are those of a single-channel sequential learner run on its samples
alone. Every backend takes channels (the RTL: one datapath with a parameter bank per channel,
:mod:`onchip.hw`).

Each sample has a kind (:class:`onchip.model.SampleKind`: TARGET, PREDICT or ERROR; ``kind=None``
is all TARGET): ``y`` then carries a target, nothing, or dL/dy_hat (raw ``grad`` values; floats
for ``float``). A run returns a :class:`~onchip.result.RunResult`, which unpacks as ``(predictions, theta)``
as before and carries the decisions (:func:`onchip.model.decision.decisions`): the golden and
float backends compute them from their predictions, the RTL and HLS designs output them.

Like hls4ml's ``register_backend`` / ``get_backend``: a new backend is one class and one
:func:`register_backend` call.
"""

from __future__ import annotations

import importlib.util
from typing import Protocol, runtime_checkable

import numpy as np

from .result import RunResult
from .spec import LearnerSpec

#: Samples per golden-model call between progress updates.
_CHUNK = 10_000


@runtime_checkable
class Backend(Protocol):
    """What every backend provides.

    Attributes:
        name: the registry name (``golden``, ``float``, ``rtl``, ``cocotb``, ``hls``).
        raw: True for a fixed-point backend (raw integers in and out), False for the float twin.
    """

    name: str
    raw: bool

    def available(self) -> bool:
        """True when the backend can run on this machine (its tools are installed)."""

    def run(self, spec: LearnerSpec, x, y, *, kind=None, theta=None, learn: bool = True,
            progress: bool = False, channel=None) -> RunResult:
        """Run a whole stream.

        Args:
            spec: the learner (schedule and staleness included).
            x: (N, n_in) inputs: raw integers in ``formats.input`` (floats for ``float``).
            y: (N, n_out) by kind: targets, raw integers in ``formats.y``, or errors dL/dy_hat,
                raw in ``formats.grad`` (floats for ``float``); ignored for PREDICT samples,
                and may be None when not ``learn``.
            kind: (N,) :class:`onchip.model.SampleKind` values, or None (all TARGET).
            theta: (P,) initial parameters, raw ``coef`` integers (floats for ``float``);
                with channels > 1, (N, P) or (P,) for every channel; default
                :func:`onchip.model.golden.initial_parameters` (in every channel).
            learn: test-then-train (True) or inference only (the parameters do not change).
            progress: show a progress bar.
            channel: (N,) integers in [0, channels), each sample's channel; required with
                channels > 1, None (all channel 0) with one.

        Returns:
            :class:`RunResult`: (predictions (N, n_out), final parameters (P,), (N, P) with
            channels > 1, after every pending update has landed), int64 raw values or float64
            for ``float``, and ``.decisions`` (N,).

        Raises:
            ValueError: bad shapes, dtypes, kinds, channels, theta, or raw values outside their
                formats; a spec with channels > 1 on a backend without channel support.
        """


_REGISTRY: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add ``backend`` to the registry under ``backend.name`` (replacing one of that name).

    Raises:
        TypeError: ``backend`` does not implement :class:`Backend`.
    """
    if not isinstance(backend, Backend):
        raise TypeError(f"{type(backend).__name__} does not implement the Backend protocol")
    _REGISTRY[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    """Names of every registered backend, in registration order."""
    return tuple(_REGISTRY)


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``.

    Raises:
        ValueError: no backend of that name (the message lists the registered ones).
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"backend must be one of {', '.join(_REGISTRY)}; got {name!r}") from None


def available_backends() -> tuple[str, ...]:
    """Names of the registered backends that can run on this machine."""
    return tuple(name for name, b in _REGISTRY.items() if b.available())


def _bar(total: int, desc: str, enabled: bool):
    from .progress import progress_bar

    return progress_bar(total=total, desc=desc, unit="sample", unit_scale=True, disable=not enabled, leave=False)


def _label(spec: LearnerSpec, backend: str) -> str:
    return f"{spec.name or spec.kind} {backend}"


class GoldenBackend:
    """The golden model (:class:`onchip.model.GoldenLearner`): always available."""

    name, raw = "golden", True

    def available(self) -> bool:
        return True

    def run(self, spec, x, y, *, kind=None, theta=None, learn=True, progress=False, channel=None):
        from .model import GoldenLearner, decisions
        from .model.golden import check_channel, check_stream

        learner = GoldenLearner(spec, theta)
        x, y, kind = check_stream(spec, x, y, learn=learn, kind=kind)
        channel = check_channel(spec, channel, len(x)) if spec.channels > 1 or channel is not None else None
        preds = np.zeros((len(x), spec.n_out), np.int64)
        with _bar(len(x), _label(spec, self.name), progress) as bar:
            for lo in range(0, len(x), _CHUNK):
                hi = min(lo + _CHUNK, len(x))
                ch = None if channel is None else channel[lo:hi]
                preds[lo:hi] = (learner.run(x[lo:hi], y[lo:hi], kind[lo:hi], ch) if learn
                                else learner.predict(x[lo:hi], ch))
                bar.update(hi - lo)
        learner.flush()
        return RunResult(preds, learner.theta.copy(), decisions(preds), kernel=", then ".join(learner.kernels))


class FloatDivergence(ValueError):
    """The float twin's online SGD ran away to infinity or NaN (the fixed-point models saturate)."""


class FloatBackend:
    """The float twin (:class:`onchip.model.float_twin.FloatTwin`): floats in and out."""

    name, raw = "float", False

    def available(self) -> bool:
        return importlib.util.find_spec("torch") is not None

    def run(self, spec, x, y, *, kind=None, theta=None, learn=True, progress=False, channel=None):
        from .model import decisions
        from .model.float_twin import FloatTwin

        twin = FloatTwin(spec, theta)
        x = np.asarray(x, dtype=np.float64)
        if not learn:
            preds = twin.predict(x, channel)
            return RunResult(preds, twin.theta.numpy().copy(), decisions(preds))
        with _bar(len(x), _label(spec, self.name), progress) as bar:
            preds = twin.run(x, np.asarray(y, dtype=np.float64), progress=bar.update, kind=kind, channel=channel)
        twin.flush()
        bad = np.flatnonzero(~np.isfinite(preds).all(axis=1))
        if len(bad):  # float SGD has no saturation: at a large learning rate it can run away
            raise FloatDivergence(f"the float twin diverged: its prediction of sample {bad[0]} is not finite "
                                  f"(learning_rate = {spec.learning_rate:g}; the fixed-point learner saturates)")
        return RunResult(preds, twin.theta.numpy().copy(), decisions(preds))


class RtlBackend:
    """The Verilated design under the C++ stream harness (:func:`onchip.verilator.backend.run`)."""

    name, raw = "rtl", True

    def available(self) -> bool:
        from .verilator.backend import available

        return available()

    def run(self, spec, x, y, *, kind=None, theta=None, learn=True, progress=False, channel=None):
        from .verilator.backend import run

        return run(spec, x, y, kind=kind, theta=theta, learn=learn, progress=progress, channel=channel)


class CocotbBackend:
    """The design under the cocotb bench (:mod:`onchip.hw.sim`, Verilator): the parameters are
    written and read through the parameter port, as a host would; without ``learn`` every sample
    is sent as PREDICT (a zero update), so the parameters stay."""

    name, raw = "cocotb", True

    def available(self) -> bool:
        return RtlBackend().available() and importlib.util.find_spec("cocotb") is not None

    def run(self, spec, x, y, *, kind=None, theta=None, learn=True, progress=False, channel=None):
        from .hw import sim
        from .hw.interface import channel_parameters
        from .model.golden import check_channel, check_stream

        x, y, kind = check_stream(spec, x, y, learn=learn, kind=kind)
        channel = check_channel(spec, channel, len(x))  # before the build: a bad stream costs nothing
        theta = channel_parameters(spec, theta)  # (channels, P)
        design = sim.cached_design(spec)
        write = {"op": "write", "values": [int(v) for v in theta.ravel()]}
        segments = [{"payloads": [], "then": write},
                    {"payloads": sim.pack_samples(design, x, y, kind, channel), "then": {"op": "none"}},
                    {"payloads": [], "then": {"op": "read"}}]
        segs = sim.run_job(design, segments)["segments"]
        got = [sim.unpack_predictions(design, s["preds"], decisions=True) for s in segs if s["preds"]]
        if got:
            preds, dec = np.concatenate([p for p, _ in got]), np.concatenate([d for _, d in got])
        else:
            preds, dec = np.zeros((0, spec.n_out), np.int64), np.zeros(0, np.int64)
        final = sim.unpack_coef(design, segs[-1]["responses"])
        return RunResult(preds.astype(np.int64), final.reshape(spec.channels, -1) if spec.channels > 1 else final, dec)


class HlsBackend:
    """The HLS C++ under C simulation (:class:`onchip.hls.HlsLearner`)."""

    name, raw = "hls", True

    def available(self) -> bool:
        from .hls.build import missing

        return missing() is None

    def run(self, spec, x, y, *, kind=None, theta=None, learn=True, progress=False, channel=None):
        from .hls import HlsLearner

        return HlsLearner(spec, theta).run(x, y, kind=kind, learn=learn, progress=progress, channel=channel)


for _backend in (GoldenBackend(), FloatBackend(), RtlBackend(), CocotbBackend(), HlsBackend()):
    register_backend(_backend)

#: Backends of a job (``onchip run``, sweeps, the acrobot replay): every registered one but the
#: cocotb bench (a protocol checker, three orders of magnitude slower than the stream harness on
#: the same design).
JOB_BACKENDS = tuple(name for name in backend_names() if name != "cocotb")
