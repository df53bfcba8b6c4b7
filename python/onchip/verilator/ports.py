"""Port layout of a generated learner and the packing of its stream payloads.

The contract (shared with :mod:`onchip.hw`): ``clk``, ``rst`` (synchronous,
active high) and four ``amaranth.lib.stream`` interfaces flattened to
``<name>__valid``, ``<name>__ready``, ``<name>__payload``; every payload is
packed little end first:

* ``s`` (in): x[0] .. x[n_in-1] (``input`` width each, raw two's complement),
  then y[0] .. y[n_out-1] (a target in ``act`` or an error in ``grad``:
  :func:`onchip.hw.interface.y_field_shape`), then kind (2 bits, :class:`onchip.model.SampleKind`);
* ``m`` (out): pred[0] .. pred[n_out-1] (``act`` width each), then decision
  (:func:`onchip.hw.interface.decision_width` bits);
* ``pc`` (in): data (``coef`` width), addr (``param_addr_width``), write (1 bit);
* with N > 1 channels, ``s`` and ``pc`` end with ``channel`` (ceil(log2 N) bits);
* ``pr`` (out): data (``coef`` width).

The payloads are the :mod:`amaranth.lib.data` layouts of
:func:`onchip.hw.interface.stream_layouts`, the ones the generated hardware
is built from: every field's bit offset and width here is read from them.

Verilator holds a port of up to 32 bits in one 32-bit word, up to 64 bits in
two, wider ones in ``ceil(width / 32)`` words; payloads cross the Python/C++
boundary as those words (uint32, little-end word first), packed and unpacked
here with numpy so the harness stays a plain word copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Shape, signed, unsigned
from amaranth.lib import data

from ..hw.interface import payload_fields, stream_layouts
from ..spec import LearnerSpec


def words(width: int) -> int:
    """32-bit words Verilator uses for a port of ``width`` bits."""
    return (width + 31) // 32


@dataclass(frozen=True)
class PortLayout:
    """Widths of the learner's ports.

    Attributes:
        n_in, n_out: features per sample, outputs per prediction.
        input_width, act_width, coef_width: bits of one x, one y / prediction (the output format
            ``formats.y``), one parameter.
        act_signed, coef_signed: two's complement (sign-extended when read back) or unsigned.
        param_count: P, parameters readable at addresses 0 .. P-1.
        addr_width: bits of the parameter address.
        grad_width, grad_signed: one raw error (an ERROR sample's y); 0 means ``act_width``.
        channels: N, the learners sharing the datapath (parameters read back: N x P).

    Raises:
        ValueError: a non-positive count or width, a field wider than 32 bits,
            or an address too narrow for P parameters.
    """

    n_in: int
    n_out: int
    input_width: int
    act_width: int
    coef_width: int
    act_signed: bool
    coef_signed: bool
    param_count: int
    addr_width: int
    grad_width: int = 0
    grad_signed: bool = True
    channels: int = 1

    def __post_init__(self):
        for name in ("n_in", "n_out", "input_width", "act_width", "coef_width", "param_count", "addr_width"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"PortLayout.{name} must be a positive integer, got {value!r}")
        for name in ("input_width", "act_width", "coef_width"):
            if getattr(self, name) > 32:
                raise ValueError(f"PortLayout.{name} must be at most 32 bits, got {getattr(self, name)}")
        if (1 << self.addr_width) < self.param_count:
            raise ValueError(
                f"PortLayout.addr_width={self.addr_width} cannot address param_count={self.param_count} parameters"
            )
        if self.coef_width + self.addr_width > 64:
            raise ValueError(
                f"PortLayout: coef_width + addr_width = {self.coef_width + self.addr_width} exceeds 64 bits"
            )

    @property
    def layouts(self) -> dict[str, data.StructLayout]:
        """The payload layout of each stream, ``{"s", "m", "pc", "pr"}``
        (:func:`onchip.hw.interface.stream_layouts`; x taken as signed, which packing does not
        depend on)."""
        def fmt(width: int, is_signed: bool):
            return signed(width) if is_signed else unsigned(width)

        return stream_layouts(n_in=self.n_in, n_out=self.n_out, input_shape=signed(self.input_width),
                              out_shape=fmt(self.act_width, self.act_signed),
                              coef_shape=fmt(self.coef_width, self.coef_signed), addr_width=self.addr_width,
                              grad_shape=fmt(self.grad_width or self.act_width, self.grad_signed),
                              channels=self.channels)

    @property
    def widths(self) -> dict[str, int]:
        """Payload width of each stream: ``{"s", "m", "pc", "pr"}``."""
        return {name: layout.size for name, layout in self.layouts.items()}

    @classmethod
    def from_spec(cls, spec: LearnerSpec, info: dict | None = None) -> "PortLayout":
        """The layout of ``spec``'s generated learner, checked against the generator's ``info``.

        Args:
            spec: the learner.
            info: ``design.info`` of :func:`onchip.hw.generate`: ``param_addr_width``
                and ``param_count`` are taken from it, and each ``ports[name]["width"]``
                it lists must equal the width the contract gives.

        Raises:
            ValueError: the generator's ports disagree with the contract.
        """
        info = info or {}
        f = spec.formats
        p = spec.parameter_count()
        if int(info.get("param_count", p)) != p:
            raise ValueError(f"design info param_count={info['param_count']} but the spec has {p} parameters")
        layout = cls(
            n_in=spec.n_in,
            n_out=spec.n_out,
            input_width=f.input.width,
            act_width=f.y.width,
            coef_width=f.coef.width,
            act_signed=f.y.signed,
            coef_signed=f.coef.signed,
            param_count=p,
            addr_width=int(info.get("param_addr_width", max(1, (p - 1).bit_length()))),
            grad_width=f.grad.width,
            grad_signed=f.grad.signed,
            channels=spec.channels,
        )
        ports = info.get("ports", {})
        expected = {f"{name}__payload": w for name, w in layout.widths.items()}
        for name, width in expected.items():
            if name in ports and int(ports[name]["width"]) != width:
                raise ValueError(
                    f"design port {name} is {ports[name]['width']} bits wide, the contract gives {width}"
                )
        payload = info.get("payload", {})
        for stream, fields in layout.fields().items():
            for name, (offset, width) in fields.items():
                got = payload.get(stream, {}).get(name)
                if got is not None and (int(got["offset"]), int(got["width"])) != (offset, width):
                    raise ValueError(
                        f"design payload field {stream}.{name} sits at bit {got['offset']} with width "
                        f"{got['width']}, the contract gives bit {offset} with width {width}"
                    )
        return layout

    def fields(self) -> dict[str, dict[str, tuple[int, int]]]:
        """(lsb, width) of every payload field, by stream: ``s`` x0.. y0.., ``m`` pred0..,
        ``pc`` data/addr/write, ``pr`` data (the names of the generator's ``info["payload"]``),
        read from :attr:`layouts`."""
        return {stream: {name: (fld.offset, fld.width) for name, fld in payload_fields(layout).items()}
                for stream, layout in self.layouts.items()}

    # -- payloads ------------------------------------------------------------------
    def pack_samples(self, x_raw: np.ndarray, y_raw: np.ndarray, kind=None, channel=None) -> np.ndarray:
        """Raw samples -> ``s__payload`` words.

        Args:
            x_raw: (N, n_in) integer raw inputs; each must fit ``input_width``
                bits (signed or unsigned).
            y_raw: (N, n_out) integer raw targets or errors, fitting the ``y`` field.
            kind: (N,) sample kinds 0 .. 3 (None: all 0, TARGET).
            channel: (N,) channels 0 .. channels - 1 (None: all 0).

        Returns:
            (N, words(s width)) uint32.

        Raises:
            ValueError: wrong shapes, non-integer dtype, or a value that does not fit its field.
        """
        at = self.fields()["s"]
        x_raw = _raw("x_raw", x_raw, self.n_in, self.input_width)
        y_raw = _raw("y_raw", y_raw, self.n_out, at["y0"][1])
        if len(x_raw) != len(y_raw):
            raise ValueError(f"x_raw has {len(x_raw)} samples but y_raw has {len(y_raw)}")
        kind = np.zeros(len(x_raw), np.int64) if kind is None else np.asarray(kind, np.int64)
        if kind.shape != (len(x_raw),) or (kind.size and (kind.min() < 0 or kind.max() >= 1 << at["kind"][1])):
            raise ValueError(f"kind must be (N,) integers in 0 .. {(1 << at['kind'][1]) - 1}")
        fields = [(x_raw[:, i], *at[f"x{i}"]) for i in range(self.n_in)]
        fields += [(y_raw[:, j], *at[f"y{j}"]) for j in range(self.n_out)]
        fields.append((kind, *at["kind"]))
        if self.channels > 1:
            channel = np.zeros(len(x_raw), np.int64) if channel is None else np.asarray(channel, np.int64)
            if channel.shape != (len(x_raw),) or (channel.size and (channel.min() < 0 or channel.max() >= self.channels)):
                raise ValueError(f"channel must be (N,) integers in 0 .. {self.channels - 1}")
            fields.append((channel, *at["channel"]))
        return pack_fields(fields, len(x_raw), self.widths["s"])

    def unpack_predictions(self, words_: np.ndarray) -> np.ndarray:
        """``m__payload`` words (N, words(m width)) -> (N, n_out) int64 raw predictions."""
        fields = payload_fields(self.layouts["m"])
        return np.stack([_unpack(words_, fields[f"pred{j}"]) for j in range(self.n_out)], axis=1)

    def unpack_decisions(self, words_: np.ndarray) -> np.ndarray:
        """``m__payload`` words (N, words(m width)) -> (N,) int64 decision field."""
        return _unpack(words_, payload_fields(self.layouts["m"])["decision"])

    def unpack_parameters(self, words_: np.ndarray) -> np.ndarray:
        """``pr__payload`` words (P, words(coef width)) -> (P,) int64 raw parameters."""
        return _unpack(words_, payload_fields(self.layouts["pr"])["data"])


def _unpack(words_: np.ndarray, fld: data.Field) -> np.ndarray:
    return unpack_field(words_, fld.offset, fld.width, Shape.cast(fld.shape).signed)


def _raw(name: str, a, cols: int, width: int) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[1] != cols:
        raise ValueError(f"{name} must have shape (N, {cols}), got {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must hold raw integers, got dtype {a.dtype}")
    a = a.astype(np.int64)
    if a.size and (a.min() < -(1 << (width - 1)) or a.max() >= (1 << width)):
        bad = a[(a < -(1 << (width - 1))) | (a >= (1 << width))][0]
        raise ValueError(f"{name} holds {int(bad)}, which does not fit a {width}-bit field")
    return a


def pack_fields(fields, n: int, total_width: int) -> np.ndarray:
    """Pack bit fields into little-end-first 32-bit words.

    Args:
        fields: iterable of (values (n,) int64, lsb, width <= 32); values are
            taken modulo 2**width (two's complement).
        n: rows.
        total_width: payload width; fields must lie inside it.

    Returns:
        (n, words(total_width)) uint32.
    """
    n_words = words(total_width)
    out = np.zeros((n, n_words + 1), np.uint64)
    for values, lsb, width in fields:
        if lsb + width > total_width:
            raise ValueError(f"field at bit {lsb} of width {width} exceeds the payload width {total_width}")
        v = np.asarray(values, np.int64).view(np.uint64) & np.uint64((1 << width) - 1)
        index, shift = divmod(lsb, 32)
        shifted = v << np.uint64(shift)  # at most 31 + 32 bits: fits
        out[:, index] |= shifted & np.uint64(0xFFFFFFFF)
        out[:, index + 1] |= shifted >> np.uint64(32)
    return out[:, :n_words].astype(np.uint32)


def unpack_field(words_: np.ndarray, lsb: int, width: int, signed: bool) -> np.ndarray:
    """One bit field of every row of little-end-first uint32 words, as int64 (sign-extended if ``signed``)."""
    w = np.asarray(words_, np.uint32).astype(np.uint64)
    index, shift = divmod(lsb, 32)
    window = w[:, index]
    if index + 1 < w.shape[1]:
        window = window | (w[:, index + 1] << np.uint64(32))
    v = ((window >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.int64)
    if signed:
        v = np.where(v >= (1 << (width - 1)), v - (1 << width), v)
    return v
