"""The golden models: fixed-point KAN and MLP online learners in integer arithmetic.

:class:`GoldenLearner` is the contract every backend must reproduce bit for
bit. Its arithmetic is in :mod:`onchip.model.kernels` (every rounding point
is listed there), its schedule in :mod:`onchip.model.stream`.

Method: online SGD with batch size 1, test-then-train (predict with the
current parameters, then update from that sample's error), as in the online
KAN learner of the seed paper; KAN edges are uniform B-splines with the
sparse update of only k+1 coefficients per edge (Liu et al. 2024, Sec. 2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fixed import Fmt, dequantize, quantize
from ..spec import LearnerSpec
from . import specialise as _specialise
from .basis import basis_table
from .kernels import KanConfig, MlpConfig
from .stream import flush as _flush
from .stream import SampleKind, run_kan, run_mlp


@dataclass(frozen=True)
class Layer:
    """Where one layer's parameters sit in the flat parameter vector.

    KAN: ``coef`` of shape (n_out, n_in, G+k) at ``offset`` (row-major).
    MLP: ``weight`` (n_out, n_in) at ``offset``, then ``bias`` (n_out,).
    """

    offset: int
    n_in: int
    n_out: int
    size: int


def layout(spec: LearnerSpec) -> list[Layer]:
    """Per-layer slices of the flat parameter vector (the order of the RTL parameter port too)."""
    layers, offset = [], 0
    for n_in, n_out in zip(spec.widths[:-1], spec.widths[1:]):
        size = n_in * n_out * spec.n_coef if spec.kind == "kan" else n_in * n_out + n_out
        layers.append(Layer(offset, n_in, n_out, size))
        offset += size
    return layers


def initial_parameters(spec: LearnerSpec) -> np.ndarray:
    """Seeded initial parameters (raw, ``coef`` format), flat int64 of length parameter_count():
    one channel's; with channels > 1 every channel starts from them (:func:`check_parameters`).

    KAN coefficients uniform in +/- init_scale; MLP weights uniform in
    +/- init_scale*sqrt(3/fan_in) (variance init_scale^2/fan_in), biases 0.
    """
    rng = np.random.default_rng(spec.init_seed)
    parts = []
    for layer in layout(spec):
        if spec.kind == "kan":
            parts.append(rng.uniform(-spec.init_scale, spec.init_scale, layer.size))
        else:
            bound = spec.init_scale * np.sqrt(3.0 / layer.n_in)
            parts.append(rng.uniform(-bound, bound, layer.n_in * layer.n_out))
            parts.append(np.zeros(layer.n_out))
    return quantize(np.concatenate(parts), spec.formats.coef)


def check_parameters(spec: LearnerSpec, theta) -> np.ndarray:
    """Validate raw parameters for ``spec``: integers inside the ``coef`` range, one bank per channel.

    Shapes: (P,) with one channel; with ``spec.channels`` = N > 1, (N, P) (row c is channel c's
    bank) or (P,), which every channel starts from (broadcast).

    Returns:
        an int64 copy: (P,) with one channel, (N, P) with more.

    Raises:
        ValueError: naming ``theta``: wrong shape (and the shapes it takes), not integers, or values
            outside ``formats.coef``.
    """
    theta = np.asarray(theta)
    p, n = spec.parameter_count(), spec.channels
    if n == 1 and theta.shape != (p,):
        raise ValueError(f"theta must have shape ({p},), got {theta.shape}")
    if n > 1 and theta.shape not in ((n, p), (p,)):
        raise ValueError(f"theta must have shape ({n}, {p}) (one row per channel) or ({p},) (every channel), "
                         f"got {theta.shape}")
    if not np.issubdtype(theta.dtype, np.integer):
        raise ValueError(f"theta must hold raw integers, got dtype {theta.dtype}")
    c = spec.formats.coef
    out = (theta < c.min_raw) | (theta > c.max_raw)
    if out.any():
        at = np.unravel_index(int(np.flatnonzero(out)[0]), theta.shape)
        index = int(at[0]) if len(at) == 1 else tuple(int(i) for i in at)
        raise ValueError(f"theta has raw value {int(theta[at])} at index {index} outside formats.coef {c} "
                         f"([{c.min_raw}, {c.max_raw}])")
    if n > 1:
        return np.ascontiguousarray(np.broadcast_to(theta, (n, p)), dtype=np.int64).copy()
    return theta.astype(np.int64).copy()


def check_channel(spec: LearnerSpec, channel, n: int) -> np.ndarray:
    """Validate per-sample channels: (n,) integers in [0, ``spec.channels``).

    ``None`` is every sample on channel 0, allowed only with one channel: with more, a stream
    that does not say where each sample goes is refused rather than guessed.

    Returns:
        an int64 array (n,): ``channel`` itself when it already is one (to read, not to write into).

    Raises:
        ValueError: naming ``channel``: missing with channels > 1, wrong shape, a value that is
            not an integer (the first such sample), or one outside [0, channels) (the first).
    """
    nc = spec.channels
    if channel is None:
        if nc > 1:
            raise ValueError(f"channel is required: the spec has channels = {nc}; pass channel: ({n},) "
                             f"integers in [0, {nc}), the channel of each sample")
        return np.zeros(n, np.int64)
    c = np.asarray(channel)
    if c.shape != (n,):
        raise ValueError(f"channel must have shape ({n},) (one per sample), got {c.shape}")
    if c.size and not np.issubdtype(c.dtype, np.integer):
        k = 0  # the first value that is not a whole number (or the first, for an integral float)
        if c.dtype.kind == "f":
            frac = ~np.isfinite(c) | (c != np.round(c))
            k = int(np.flatnonzero(frac)[0]) if frac.any() else 0
        raise ValueError(f"channel must hold integers in [0, {nc}), got channel[{k}] = {c[k].item()!r} (dtype {c.dtype})")
    if c.size and (c.min() < 0 or c.max() >= nc):
        k = int(np.flatnonzero((c < 0) | (c >= nc))[0])
        raise ValueError(f"channel[{k}] = {int(c[k])} is not a channel of the spec "
                         f"(channels = {nc}: 0 to {nc - 1})")
    return c.astype(np.int64, copy=False)


def check_raw(name: str, a, cols: int, fmt: Fmt) -> np.ndarray:
    """Validate a raw stream array: shape (N, ``cols``), integers inside ``fmt``'s range.

    The one check every entry point that takes raw values applies, so that no backend
    accepts a value another refuses.

    Returns:
        an int64 array: ``a`` itself when it already is one (to read, not to write into).

    Raises:
        ValueError: naming ``name``: wrong shape, not integers, or values outside ``fmt``.
    """
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[1] != cols:
        raise ValueError(f"{name} must have shape (N, {cols}), got {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must hold raw integers ({fmt}), got dtype {a.dtype}")
    if a.size:
        lo, hi = a.min(), a.max()
        if lo < fmt.min_raw or hi > fmt.max_raw:
            raise ValueError(
                f"{name} holds raw values in [{int(lo)}, {int(hi)}], outside {fmt} "
                f"([{fmt.min_raw}, {fmt.max_raw}])"
            )
    return a.astype(np.int64, copy=False)


_KIND_VALUES = sorted(int(v) for v in SampleKind)
# the kinds are consecutive integers: a range check of the whole array then decides
_KINDS_CONTIGUOUS = _KIND_VALUES == list(range(_KIND_VALUES[0], _KIND_VALUES[-1] + 1))


def check_kind(kind, n: int) -> np.ndarray:
    """Validate per-sample kinds: None (every sample TARGET) or integers (n,) in :class:`SampleKind`.

    Returns:
        an int64 array (n,): ``kind`` itself when it already is one (to read, not to write into).

    Raises:
        ValueError: naming ``kind``: wrong shape, not integers, or the first sample whose value is
            not a :class:`SampleKind`.
    """
    if kind is None:
        return np.full(n, int(SampleKind.TARGET), np.int64)
    k = np.asarray(kind)
    if k.shape != (n,):
        raise ValueError(f"kind must have shape ({n},) (one per sample), got {k.shape}")
    if k.size and not np.issubdtype(k.dtype, np.integer):
        raise ValueError(f"kind must hold integers (SampleKind), got dtype {k.dtype}")
    in_range = not k.size or (_KINDS_CONTIGUOUS and _KIND_VALUES[0] <= k.min() and k.max() <= _KIND_VALUES[-1])
    if not in_range:
        bad = np.flatnonzero(~np.isin(k, _KIND_VALUES))
        if len(bad):
            raise ValueError(
                f"kind[{bad[0]}] = {int(k[bad[0]])} is not a sample kind "
                f"({', '.join(f'{v.name} = {int(v)}' for v in SampleKind)})"
            )
    return k.astype(np.int64, copy=False)


def check_stream(
    spec: LearnerSpec, x_raw, y_raw, *, learn: bool = True, kind=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a raw stream for ``spec``: the one check every backend applies.

    Args:
        x_raw: (N, n_in) raw inputs (``input`` format).
        y_raw: (N, n_out) raw values, by each sample's kind: TARGET rows are targets (output
            format, ``formats.y``), ERROR rows dL/dy_hat (``grad`` format), PREDICT rows are ignored. Ignored,
            and may be None, without ``learn``.
        learn: False: inference only; y and kind are not used and come back as zeros / PREDICT.
        kind: (N,) :class:`SampleKind` values, or None: every sample TARGET.

    Returns:
        (x, y, kind) int64 arrays, to read (each may be the argument itself); PREDICT rows of y
        come back as zeros (what the hardware stream carries for them; a copy then).

    Raises:
        ValueError: as :func:`check_raw` (naming ``y_raw`` and, for the range, the first bad
            sample and its kind), :func:`check_kind`, or x and y of different lengths.
    """
    x = check_raw("x_raw", x_raw, spec.n_in, spec.formats.input)
    if not learn:
        n = len(x)
        return x, np.zeros((n, spec.n_out), np.int64), np.full(n, int(SampleKind.PREDICT), np.int64)
    y = np.asarray(y_raw)
    if y.ndim != 2 or y.shape[1] != spec.n_out:
        raise ValueError(f"y_raw must have shape (N, {spec.n_out}), got {y.shape}")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y_raw must hold raw integers, got dtype {y.dtype}")
    if len(x) != len(y):
        raise ValueError(f"x_raw has {len(x)} samples but y_raw has {len(y)}")
    k = check_kind(kind, len(x))
    y = y.astype(np.int64, copy=False)
    by_kind = ((SampleKind.TARGET, spec.formats.y, "target"), (SampleKind.ERROR, spec.formats.grad, "error"))
    # every value inside every kind's format: nothing to look at row by row
    fits_all = not y.size or (
        y.min() >= max(fmt.min_raw for _, fmt, _ in by_kind) and y.max() <= min(fmt.max_raw for _, fmt, _ in by_kind)
    )
    for v, fmt, what in () if fits_all else by_kind:
        rows = k == v
        out = rows & ((y < fmt.min_raw) | (y > fmt.max_raw)).any(axis=1)
        if out.any():
            n = int(np.flatnonzero(out)[0])
            raise ValueError(
                f"y_raw holds raw values in [{int(y[rows].min())}, {int(y[rows].max())}] in {v.name} "
                f"samples ({what}s), outside {fmt} ([{fmt.min_raw}, {fmt.max_raw}]); first: "
                f"y_raw[{n}] = {y[n].tolist()}"
            )
    if kind is not None:
        predict = k == SampleKind.PREDICT
        if y[predict].any():
            y = y.copy()
            y[predict] = 0
    return x, y, k


def split_parameters(spec: LearnerSpec, theta: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Flat parameters -> per-layer arrays: ``{"coef"}`` (KAN) or ``{"weight", "bias"}`` (MLP).

    ``theta`` (P,) gives ``coef`` (n_out, n_in, G+k), ``weight`` (n_out, n_in), ``bias``
    (n_out,); (N, P) (one row per channel) gives the same with a leading (N,) dimension.
    """
    out = []
    lead = theta.shape[:-1]
    for layer in layout(spec):
        chunk = theta[..., layer.offset : layer.offset + layer.size]
        if spec.kind == "kan":
            out.append({"coef": chunk.reshape(lead + (layer.n_out, layer.n_in, spec.n_coef))})
        else:
            w = layer.n_in * layer.n_out
            out.append({"weight": chunk[..., :w].reshape(lead + (layer.n_out, layer.n_in)), "bias": chunk[..., w:]})
    return out


def _layer_input_formats(spec: LearnerSpec) -> list[Fmt]:
    return [spec.formats.input] + [spec.formats.act] * (len(spec.widths) - 2)


def kernel_config(spec: LearnerSpec):
    """The numba config tuple of ``spec`` (:class:`KanConfig` or :class:`MlpConfig`)."""
    f = spec.formats
    layers = layout(spec)
    in_fmts = _layer_input_formats(spec)
    common = dict(
        widths=np.asarray(spec.widths, np.int64),
        max_width=max(spec.widths),
        update_size=update_size(spec),
        offsets=np.asarray([lay.offset for lay in layers], np.int64),
        in_frac=np.asarray([fm.frac_bits for fm in in_fmts], np.int64),
        lr_shift=spec.lr_shift,
        f_coef=f.coef.code,
        f_act=f.act.code,
        f_grad=f.grad.code,
        f_acc=f.acc.code,
        f_out=f.y.code,
    )
    if spec.kind == "mlp":
        return MlpConfig(**common)
    bval, bder = basis_table(spec.spline_order, spec.basis_table_bits, f.basis)
    lo = spec.grid_range[0]
    return KanConfig(
        **common,
        lo_raw=np.asarray([int(fm.quantize(lo)) for fm in in_fmts], np.int64),
        pos_bits=np.asarray([fm.frac_bits + spec.cell_exp for fm in in_fmts], np.int64),
        grid_size=spec.grid_size,
        n_coef=spec.n_coef,
        table_bits=spec.basis_table_bits,
        cell_exp=spec.cell_exp,
        bval=bval,
        bder=bder,
        f_basis=f.basis.code,
    )


def update_size(spec: LearnerSpec) -> int:
    """Entries of one sample's update: sum of n_out*n_in*(k+1) (KAN, sparse) or all parameters (MLP)."""
    if spec.kind == "kan":
        return sum(lay.n_in * lay.n_out for lay in layout(spec)) * (spec.spline_order + 1)
    return spec.parameter_count()


class GoldenLearner:
    """Bit-exact reference of a fixed-point online learner.

    Channels: with ``spec.channels`` = N > 1 the learner is N independent learners, one
    parameter bank each; every sample names its channel, and channel c's predictions and
    parameters are exactly those of a single-channel sequential learner run on channel c's
    samples alone, whatever the order of channels in the stream (the hardware stalls a sample
    whose channel still has an update in flight, so the order changes only its throughput).
    That definition is how it computes: each call runs the samples of each channel, in their
    order, on that channel's bank.

    Args:
        spec: the learner.
        theta: initial raw parameters (``coef`` format): (P,) with one channel; with N
            channels (N, P) (a bank per channel) or (P,) (every channel starts from it);
            default :func:`initial_parameters` in every channel.
        specialise: which compiled stream kernel runs; both compute the same bits
            (:mod:`onchip.model.specialise`). True: the runner specialised to this spec
            (compiled on first use, seconds once per machine and spec, then several times the
            samples per second); False: the generic kernels; None (default): decided per run
            by :func:`onchip.model.specialise.use_specialised` (the specialised runner once it
            is compiled or the stream is long). May be changed between runs.

    Attributes:
        theta: current raw parameters, int64 (P,), P = spec.parameter_count(); (N, P) with
            N > 1 channels. Pending (not yet committed) updates of the pipelined schedule are
            not in it until :meth:`flush`.

    Raises:
        ValueError: ``theta`` of the wrong shape or outside the ``coef`` range (naming the
            shapes it takes); inputs of the wrong shape; a bad ``channel`` (:func:`check_channel`).

    Example (two channels, interleaved)::

        g = GoldenLearner(load_spec("kan-readout").replace(channels=2))
        preds = g.run(x_raw, y_raw, channel=[0, 1, 1, 0])  # x_raw (4, n_in), y_raw (4, n_out)
        g.theta.shape                                      # (2, P)
    """

    def __init__(self, spec: LearnerSpec, theta: np.ndarray | None = None, *, specialise: bool | None = None):
        if specialise is not None and not isinstance(specialise, bool):
            raise ValueError(f"specialise must be True, False or None (automatic), got {specialise!r}")
        self.spec = spec
        self.specialise = specialise
        self._cfg = kernel_config(spec)
        self._run_generic = run_kan if spec.kind == "kan" else run_mlp
        self._specialised = None  # its SpecialisedRunner, made when first considered
        self._samples_run = 0
        #: the stream kernels that have run, in the order of first use: "generic" and/or
        #: "specialised" (same bits; their speed differs several-fold)
        self.kernels: list[str] = []
        depth = spec.effective_staleness  # 0 with channels > 1: every update lands before the next sample
        m = update_size(spec)
        self._q_addr = np.zeros((depth + 1, m), np.int64)  # the FIFO of stream._stream
        self._q_delta = np.zeros((depth + 1, m), np.int64)
        self._q_state = np.zeros(2, np.int64)
        self.initial_theta = self._checked(initial_parameters(spec) if theta is None else theta)
        self.theta = self.initial_theta.copy()

    # -- parameters ------------------------------------------------------------
    def _checked(self, theta) -> np.ndarray:
        return check_parameters(self.spec, theta)

    def _channel_index(self, channel) -> int:
        c = check_channel(self.spec, np.asarray(channel).reshape(1), 1)
        return int(c[0])

    def reset(self, channel: int | None = None) -> None:
        """Back to the initial parameters, with no update pending: every channel, or only ``channel``.

        Raises:
            ValueError: ``channel`` not in [0, channels).
        """
        if channel is None:
            self.theta = self.initial_theta.copy()
            self._q_state[:] = 0
            return
        c = self._channel_index(channel)
        if self.spec.channels == 1:
            self.reset()
        else:
            self.theta[c] = self.initial_theta[c]

    def flush(self) -> None:
        """Commit all pending updates (pipelined schedule); the next sample sees all of them."""
        if self.spec.channels == 1:  # with more, nothing is ever pending (each channel is sequential)
            _flush(self.theta, self.spec.formats.coef.code, self._q_addr, self._q_delta, self._q_state)

    def load(self, theta, channel: int | None = None) -> None:
        """Flush, then replace the parameters (the RTL parameter port's write).

        Args:
            theta: as the constructor's (every channel), or (P,) for ``channel`` alone.
            channel: None (every channel) or the one channel whose bank is replaced.

        Raises:
            ValueError: a bad ``theta`` (naming the shapes it takes) or ``channel``.
        """
        if channel is None or self.spec.channels == 1:
            if channel is not None:
                self._channel_index(channel)
            theta = self._checked(theta)
            self.flush()
            self.theta = theta
            return
        c = self._channel_index(channel)
        one = check_parameters(self.spec.replace(channels=1), theta)
        self.theta[c] = one

    def parameters(self, channel: int | None = None) -> list[dict[str, np.ndarray]]:
        """Flush, then the per-layer parameter arrays (copies): see :func:`split_parameters`;
        with channels > 1 each has a leading (N,) dimension, or is ``channel``'s alone."""
        self.flush()
        theta = self.theta.copy()
        if channel is not None and self.spec.channels > 1:
            theta = theta[self._channel_index(channel)]
        elif channel is not None:
            self._channel_index(channel)
        return split_parameters(self.spec, theta)

    @property
    def pending(self) -> int:
        """Updates computed but not yet committed."""
        return int(self._q_state[1])

    # -- data ---------------------------------------------------------------------
    def quantize_inputs(self, x) -> np.ndarray:
        """Float features (N, n_in) -> raw ``input`` format."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.spec.n_in:
            raise ValueError(f"inputs must have shape (N, {self.spec.n_in}), got {x.shape}")
        return quantize(x, self.spec.formats.input)

    def quantize_targets(self, y) -> np.ndarray:
        """Float targets (N, n_out) -> raw output format (``formats.y``)."""
        y = np.asarray(y, dtype=np.float64)
        if y.ndim != 2 or y.shape[1] != self.spec.n_out:
            raise ValueError(f"targets must have shape (N, {self.spec.n_out}), got {y.shape}")
        return quantize(y, self.spec.formats.y)

    def dequantize_outputs(self, raw) -> np.ndarray:
        """Raw predictions (output format, ``formats.y``) -> float."""
        return dequantize(raw, self.spec.formats.y)

    # -- running ----------------------------------------------------------------------
    def _run(self, x_raw, y_raw, learn: bool, kind=None, channel=None) -> np.ndarray:
        x_raw, y_raw, kind = check_stream(self.spec, x_raw, y_raw, learn=learn, kind=kind)
        if channel is not None or self.spec.channels > 1:  # one channel and none named: nothing to check
            channel = check_channel(self.spec, channel, len(x_raw))
        x_raw, y_raw = np.ascontiguousarray(x_raw), np.ascontiguousarray(y_raw)
        preds = np.zeros((len(x_raw), self.spec.n_out), np.int64)
        self._samples_run += len(x_raw)
        if self._specialised is None and self.specialise is not False:
            self._specialised = _specialise.SpecialisedRunner(self._cfg)
        kernel = "specialised" if _specialise.use_specialised(self.specialise, self._samples_run,
                                                              self._specialised) else "generic"
        if kernel not in self.kernels:
            self.kernels.append(kernel)
        if self.spec.channels == 1:
            self._stream(kernel, self.theta, x_raw, y_raw, kind, preds, learn)
            return preds
        # each channel's samples, in order, on its own bank: the definition of the channels
        for c in np.unique(channel):
            rows = np.flatnonzero(channel == c)
            out = np.zeros((len(rows), self.spec.n_out), np.int64)
            self._stream(kernel, self.theta[c], x_raw[rows], y_raw[rows], kind[rows], out, learn)
            preds[rows] = out
        return preds

    def _stream(self, kernel, theta, x, y, kind, preds, learn) -> None:
        # one compiled stream over (x, y, kind) on the bank ``theta`` (updated in place)
        if kernel == "specialised":
            self._specialised(theta, x, y, kind, self._q_addr, self._q_delta, self._q_state, preds, learn)
        else:
            self._run_generic(theta, x, y, kind, self._cfg, self._q_addr, self._q_delta, self._q_state, preds, learn)

    def run(self, x_raw, y_raw, kind=None, channel=None) -> np.ndarray:
        """Test-then-train over a stream of raw samples.

        Args:
            x_raw: (N, n_in) raw inputs (``input`` format).
            y_raw: (N, n_out) raw values by kind: targets (``act`` format) for TARGET samples,
                dL/dy_hat (``grad`` format) for ERROR samples, ignored for PREDICT samples.
            kind: (N,) :class:`~onchip.model.stream.SampleKind` values; None: all TARGET.
                A PREDICT sample commits a zero update in its slot of the D-sample window
                (:mod:`onchip.model.stream`).
            channel: (N,) integers in [0, channels): each sample's channel; required with
                channels > 1, None (channel 0) with one.

        Returns:
            (N, n_out) int64 raw predictions, each made before that sample's update; the
            decisions are :func:`onchip.model.decision.decisions` of them.

        Raises:
            ValueError: wrong shapes, non-integer values, bad kinds or raw values outside their
                format (:func:`check_stream`, the check every backend applies), a bad or missing
                ``channel`` (:func:`check_channel`).
        """
        return self._run(x_raw, y_raw, learn=True, kind=kind, channel=channel)

    def predict(self, x_raw, channel=None) -> np.ndarray:
        """Inference only: (N, n_in) raw inputs (and their (N,) ``channel``) -> (N, n_out) raw
        predictions, no update."""
        return self._run(x_raw, None, learn=False, channel=channel)

    def step(self, x_raw, y_raw, kind: int = 0, channel: int | None = None) -> np.ndarray:
        """One sample: (n_in,) raw input, (n_out,) raw target or error, its kind and channel ->
        (n_out,) raw prediction."""
        ch = None if channel is None else np.asarray(channel).reshape(1)
        return self.run(np.asarray(x_raw).reshape(1, -1), np.asarray(y_raw).reshape(1, -1), [kind], ch)[0]
