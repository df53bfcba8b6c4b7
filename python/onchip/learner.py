"""`Learner`: one learner spec on one backend, driven from Python with arrays.

The online learner of the seed paper (D. Hoang, A. Gupta, P. Harris, "KANs for online
learning on FPGAs", arXiv:2602.02056): online SGD with batch size 1, test-then-train,
in the fixed-point semantics of :class:`onchip.model.GoldenLearner`. Every backend gives
the same raw results (:mod:`onchip.backends`), so a script written against ``golden`` runs
unchanged against the Verilated RTL or the HLS C simulation.
"""

from __future__ import annotations

import numpy as np

from .backends import get_backend
from .fixed import dequantize
from .spec import LearnerSpec, load_spec


class Learner:
    """A learner spec on one backend, holding its current parameters between calls.

    Each call is one stream through the backend from the current parameters: ``step``/``run``
    learn test-then-train and keep the parameters after the stream (in the pipelined schedule,
    updates still pending at the end of a call land before it returns); ``predict`` does not
    learn. Float methods quantize inputs and targets to the spec's formats and dequantize
    predictions; the ``*_raw`` methods take and return raw integers (fixed-point backends only).

    Args:
        spec: a :class:`~onchip.spec.LearnerSpec`, a preset name or a TOML file path.
        backend: a name of :func:`onchip.backends.backend_names` (``"golden"``, ``"float"``,
            ``"rtl"``, ``"cocotb"``, ``"hls"``).
        theta: initial parameters (P,): raw ``coef`` integers, or floats for ``"float"``;
            with ``spec.channels`` = C > 1, (C, P) (a bank per channel) or (P,) (every
            channel); default: the spec's seeded initial parameters (in every channel).

    Channels: with C > 1 channels the learner is C independent learners on one datapath (one
    per qubit of a multiplexed readout). Every call of N samples then takes ``channel`` (N,)
    integers in [0, C), the channel of each sample, and refuses a call without it; channel c's predictions
    and parameters are those of a single-channel sequential learner run on channel c's samples
    alone, whatever the order of channels in the stream. With one channel, ``channel`` may be
    left out (or all zeros).

    Sample kinds (:class:`onchip.model.SampleKind`): ``run``/``step``/``step_raw`` take
    ``kind`` (N,): TARGET (y is the target; the default), PREDICT (y ignored, no update) or
    ERROR (y is dL/dy_hat per output, 0 for an output that must not learn, ``grad`` format
    when raw): the learner predicts x with its current parameters and applies the sparse
    update with that error, the way a host computes any loss (or a TD error) itself.

    Attributes:
        spec: the resolved spec.
        backend: the backend's name.
        raw: True for a fixed-point backend.
        decisions: (N,) int64 decisions of the last call's predictions, as the backend gave
            them (index of the largest output, lowest on a tie; sign for one output), or None.

    Raises:
        onchip.SpecError: a bad spec.
        ValueError: an unknown backend, or a bad ``theta`` (wrong shape, not integers,
            outside the ``coef`` format); in a call, a bad or missing ``channel`` (one line
            naming ``channel`` and the bad value) or a multi-channel spec on a backend
            without channel support.

    Example:
        >>> import numpy as np, onchip
        >>> learner = onchip.Learner("kan-regression")
        >>> x = np.linspace(-2, 2, 256).reshape(-1, 1)
        >>> predictions = learner.run(x, np.sin(x))       # learn, test-then-train
        >>> learner.predict(x).shape
        (256, 1)
        >>> from onchip.model import SampleKind            # the host computes the error itself
        >>> q = learner.predict(x[:1])
        >>> _ = learner.step(x[:1], 0.5 * (q - 1.0), kind=[SampleKind.ERROR])
        >>> two = onchip.Learner(onchip.load_spec("kan-regression").replace(channels=2))
        >>> _ = two.run(x, np.sin(x), channel=np.arange(256) % 2)   # round robin
        >>> two.parameters.shape
        (2, 11)
    """

    def __init__(self, spec: "LearnerSpec | str", backend: str = "golden", *, theta=None):
        from .model import GoldenLearner

        self.spec = load_spec(spec)
        self._impl = get_backend(backend)
        self.backend = backend
        self.raw = self._impl.raw
        self._golden = GoldenLearner(self.spec)  # the formats' quantizers; its own state is not used
        self._initial = None if theta is None else self._checked_theta(theta)
        self._theta = self._initial
        self.decisions = None

    # -- parameters --------------------------------------------------------------------------
    def _checked_theta(self, theta) -> np.ndarray:
        from .model.float_twin import check_float_parameters
        from .model.golden import check_parameters

        if self.raw:
            return check_parameters(self.spec, theta)
        return check_float_parameters(self.spec, theta)

    def _channel(self, channel, n: int):
        # None with one channel and none given (the stream as before); else (n,) int64, checked
        from .model.golden import check_channel

        if channel is None and self.spec.channels == 1:
            return None
        if channel is not None and np.ndim(channel) == 0:
            channel = [channel]  # one sample's channel as a plain integer
        return check_channel(self.spec, channel, n)

    @property
    def parameters(self) -> np.ndarray:
        """Current parameters (P,), (C, P) with C > 1 channels: raw int64 ``coef`` values, or
        float64 for ``"float"``. A copy.

        Setting it checks and loads new parameters (raises ValueError like ``theta``)."""
        if self._theta is None:
            from .model.golden import initial_parameters

            theta = initial_parameters(self.spec)
            return self._checked_theta(theta if self.raw else dequantize(theta, self.spec.formats.coef))
        return self._theta.copy()

    @parameters.setter
    def parameters(self, theta) -> None:
        self._theta = self._checked_theta(theta)

    def reset(self) -> None:
        """Back to the initial parameters (those given as ``theta``, else the spec's)."""
        self._theta = self._initial

    # -- raw integers ------------------------------------------------------------------------
    def _need_raw(self, what: str) -> None:
        if not self.raw:
            raise ValueError(f"{what} needs a fixed-point backend; {self.backend!r} works in floats")

    def predict_raw(self, x_raw, channel=None) -> np.ndarray:
        """Raw predictions (N, n_out) int64 (``act`` format) of raw inputs (N, n_in) (``input``
        format), without learning; ``channel`` (N,) as in :meth:`run`.

        Raises:
            ValueError: a float backend, bad shapes, raw values outside their format, or a bad
                or missing ``channel``.
        """
        self._need_raw("predict_raw")
        channel = self._channel(channel, len(np.asarray(x_raw)))
        out = self._impl.run(self.spec, x_raw, None, theta=self._theta, learn=False, channel=channel)
        self.decisions = out.decisions
        return out[0]

    def step_raw(self, x_raw, y_raw, kind=None, channel=None) -> np.ndarray:
        """Test-then-train over raw samples: x (N, n_in) ``input``, y (N, n_out) by ``kind``:
        targets (``act``), errors dL/dy_hat (``grad``) or ignored (PREDICT); ``channel`` (N,) as
        in :meth:`run`.

        Returns:
            raw predictions (N, n_out) int64, each made before its sample's update.

        Raises:
            ValueError: a float backend, bad shapes, kinds or channels, or raw values outside
                their format.
        """
        self._need_raw("step_raw")
        channel = self._channel(channel, len(np.asarray(x_raw)))
        out = self._impl.run(self.spec, x_raw, y_raw, kind=kind, theta=self._theta, channel=channel)
        preds, self._theta = out
        self.decisions = out.decisions
        return preds

    # -- floats ------------------------------------------------------------------------------
    def _x(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1 and self.spec.n_in == 1:
            x = x.reshape(-1, 1)
        if x.ndim != 2 or x.shape[1] != self.spec.n_in:
            raise ValueError(f"x must have shape (N, {self.spec.n_in}), got {x.shape}")
        return x

    def _y(self, y, n: int) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 1 and self.spec.n_out == 1:
            y = y.reshape(-1, 1)
        if y.shape != (n, self.spec.n_out):
            raise ValueError(f"y must have shape ({n}, {self.spec.n_out}), got {y.shape}")
        return y

    def predict(self, x, channel=None) -> np.ndarray:
        """Predictions (N, n_out) float64 of inputs x (N, n_in) (or (N,) for one input), without
        learning; ``channel`` (N,) as in :meth:`run`.

        Raises:
            ValueError: bad shapes, NaN or infinite inputs, a bad or missing ``channel``.
        """
        x = self._x(x)
        channel = self._channel(channel, len(x))
        if not self.raw:
            out = self._impl.run(self.spec, x, None, theta=self._theta, learn=False, channel=channel)
            self.decisions = out.decisions
            return out[0]
        return self._golden.dequantize_outputs(self.predict_raw(self._golden.quantize_inputs(x), channel))

    def run(self, x, y, *, kind=None, channel=None, progress: bool = False) -> np.ndarray:
        """Test-then-train over float samples x (N, n_in), y (N, n_out) ((N,) for one column).

        Args:
            kind: (N,) :class:`onchip.model.SampleKind` values (None: all TARGET); the y rows of
                ERROR samples are dL/dy_hat (quantized to the ``grad`` format on a fixed-point
                backend), those of PREDICT samples are ignored.
            channel: (N,) integers in [0, channels), the channel of each sample: required with
                channels > 1 (refused when missing), may be left out with one.

        Returns:
            predictions (N, n_out) float64, each made before its sample's update.

        Raises:
            ValueError: bad shapes, kinds or channels, NaN or infinite values.
        """
        from .model.golden import check_kind
        from .model.stream import SampleKind

        x = self._x(x)
        y = self._y(y, len(x))
        channel = self._channel(channel, len(x))
        kinds = None if kind is None else check_kind(kind, len(x))
        if kinds is not None:
            y = np.where((kinds == SampleKind.PREDICT)[:, None], 0.0, y)
        if not self.raw:
            out = self._impl.run(self.spec, x, y, kind=kinds, theta=self._theta, progress=progress,
                                 channel=channel)
            preds, self._theta = out
            self.decisions = out.decisions
            return preds
        y_raw = self._golden.quantize_targets(y)
        if kinds is not None:
            err = kinds == SampleKind.ERROR
            y_raw[err] = self.spec.formats.grad.quantize(y[err])
        out = self._impl.run(self.spec, self._golden.quantize_inputs(x), y_raw, kind=kinds,
                             theta=self._theta, progress=progress, channel=channel)
        preds, self._theta = out
        self.decisions = out.decisions
        return self._golden.dequantize_outputs(preds)

    def step(self, x, y, kind=None, channel=None) -> np.ndarray:
        """One sample or a few: :meth:`run` without a progress bar (x (n_in,) or (N, n_in));
        ``channel`` an integer for one sample, else (N,)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1 and self.spec.n_in > 1:
            x, y = x.reshape(1, -1), np.asarray(y, dtype=np.float64).reshape(1, -1)
        return self.run(x, y, kind=kind, channel=channel)

    def __repr__(self) -> str:
        return f"Learner({self.spec.name or self.spec.kind!r}, backend={self.backend!r})"
