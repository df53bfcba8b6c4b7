"""``LearnerSpec``: the one description of a learner that every backend builds from.

A spec is a frozen, validated dataclass. It round-trips through TOML
(:meth:`LearnerSpec.to_toml`, :meth:`LearnerSpec.from_toml`) and the CLI
accepts a TOML file or a preset name (:data:`PRESETS`) wherever it wants one
(:func:`load_spec`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tomli_w

from .errors import SpecError
from .fixed import Fmt
from .numbers import as_float, is_integer

KINDS = ("kan", "mlp")
LOSSES = ("mse",)
SCHEDULES = ("sequential", "pipelined")
DATAPATHS = ("parallel", "serial")
#: the stage plans of the RTL (:func:`onchip.hw.plan.stage_plan`)
TIMINGS = ("compact", "fast", "predict-first")
#: what the spec's ``timing`` field takes: a plan, or ``"auto"`` (:func:`default_timing`)
TIMING_CHOICES = ("auto", *TIMINGS)


def default_timing(schedule: str) -> str:
    """The stage plan ``timing = "auto"`` (the default) builds for a schedule: the plan with fewer
    routed nanoseconds per update, as measured on the ULX3S 85F over the spec family of
    ``sweeps/timing``.

    - the sequential schedule: ``"fast"``, on every datapath. Parallel: fewer ns on each of the 11
      family members placed at both plans, KAN and MLP (e.g. kan-paper 48.6 against 129.3 ns,
      mlp-readout 96.7 against 179.3 ns; with the products' registers in the ECP5 DSPs, fmax
      more than pays for the doubled cycles). The serial MLP: mlp-serial-8-16-1 551.8 against
      826.4 ns. The serial KAN: each of its three members, e.g. kan-3-4-2-g16-k3-serial 56 cycles
      at 107.9 MHz, 518.8 ns, against 38 at 43.3 MHz, 876.7 ns (best of placer seeds 1-3);
    - the pipelined schedule: ``"compact"``, because the fast plan needs a larger staleness,
      and the staleness is part of the learner (its numbers), which a default must not change.
    """
    return "fast" if schedule == "sequential" else "compact"


#: The largest device onchip names (:data:`onchip.flow.fit.XILINX_PARTS`: the xcvu13p, DS890):
#: RAMB36 block RAMs, flip-flops, DSP slices, LUTs. They bound every spec
#: (:meth:`LearnerSpec.hardware_size`): a parameter bit needs a block-RAM bit (36 Kib a RAMB36) or
#: a flip-flop; a multiplier a DSP slice, or else at least one LUT6 (two outputs) per two bits of
#: its product, which has more bits than the coef operand. A spec beyond them (a mistyped width)
#: is refused before anything is allocated.
LARGEST_DEVICE = {"part": "xcvu13p", "bram": 2_688, "ff": 3_456_000, "dsp": 12_288, "lut": 1_728_000}
#: Parameter bits the largest device holds: its block-RAM bits and flip-flops.
MAX_PARAMETER_BITS = LARGEST_DEVICE["bram"] * 36 * 1024 + LARGEST_DEVICE["ff"]


def max_multipliers(coef_width: int) -> int:
    """Multipliers with a ``coef_width``-bit operand the largest device holds: its DSP slices, and
    one in LUTs per ``ceil((coef_width + 1) / 2)`` of its LUTs (see :data:`LARGEST_DEVICE`)."""
    return LARGEST_DEVICE["dsp"] + LARGEST_DEVICE["lut"] // max(1, -(-(coef_width + 1) // 2))


#: The largest ``staleness`` D a spec may name: the pipelined design holds D pending updates (a
#: queue of registers or LUT RAM), and the deepest plan needs far fewer (``min_staleness``).
MAX_STALENESS = 256

#: Integer fields of a spec (a bool is refused: TOML's ``true`` is not the integer 1).
INT_FIELDS = ("grid_size", "spline_order", "basis_table_bits", "staleness", "init_seed", "lanes", "channels")
#: Float fields: a finite float, or an integer the float holds exactly (stored as that float);
#: bools, NaN and infinities are refused.
FLOAT_FIELDS = ("learning_rate", "init_scale")


def _fmt(text: str) -> Fmt:
    return Fmt.parse(text)


def toml_text(value) -> str:
    """``value`` as a TOML file spells it (``true``, ``"text"``), for the error messages of spec and
    sweep fields."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _integer(name: str, value) -> int:
    """``value`` as an int, or SpecError naming ``name``: bools and non-integers are refused."""
    if not is_integer(value):
        raise SpecError(f"{name} must be an integer, got {toml_text(value)}")
    return int(value)


def _finite(name: str, value) -> float:
    """``value`` as a float (:func:`onchip.numbers.as_float`), or SpecError naming ``name``."""
    out = as_float(value)
    if out is None:
        raise SpecError(f"{name} must be a finite number, got {toml_text(value)}")
    return out


def _sequence(name: str, value) -> tuple:
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise SpecError(f"{name} must be a list, got {toml_text(value)}")
    return tuple(value)


def _check_name(name) -> str:
    # the name is a one-line label in reports and JUnit XML: control characters (C0, DEL, C1) and
    # lone surrogates have no place there (XML 1.0 cannot hold most of them)
    if not isinstance(name, str):
        raise SpecError(f"name must be a string, got {name!r}")
    bad = next((c for c in name if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        raise SpecError(f"name must not hold control characters, got {name!r} (U+{ord(bad):04X})")
    return name


@dataclass(frozen=True)
class Formats:
    """Fixed-point format of every signal class of a learner.

    Attributes:
        input: the features x (first layer input).
        coef: learned parameters (KAN spline coefficients, MLP weights and biases).
        basis: KAN basis-table entries, values and derivatives (|value| <= 1).
        act: hidden layer outputs; predictions and targets too unless ``output`` is set.
        grad: output errors and back-propagated errors.
        acc: the accumulator of sums of products; products are converted into it
            (its rounding mode), the exact sum then wraps into it once. Its
            overflow must be WRAP, which makes that equal to wrapping after
            every addition in any order (an adder tree or a MAC chain).
        output: the last layer's outputs (predictions) and the targets, or None (the default):
            ``act``. :attr:`y` is the format in use. Written to TOML only when set.
    """

    input: Fmt = field(default_factory=lambda: _fmt("ap_fixed<16,4,RND_CONV,SAT>"))
    coef: Fmt = field(default_factory=lambda: _fmt("ap_fixed<16,4,RND_CONV,SAT>"))
    basis: Fmt = field(default_factory=lambda: _fmt("ap_fixed<16,2,RND_CONV,SAT>"))
    act: Fmt = field(default_factory=lambda: _fmt("ap_fixed<16,4,RND_CONV,SAT>"))
    grad: Fmt = field(default_factory=lambda: _fmt("ap_fixed<16,4,RND_CONV,SAT>"))
    acc: Fmt = field(default_factory=lambda: _fmt("ap_fixed<40,14,TRN,WRAP>"))
    output: Fmt | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "output":
                continue
            if isinstance(value, str):
                try:
                    value = Fmt.parse(value)
                except ValueError as exc:
                    raise SpecError(f"formats.{f.name}: {exc}") from None
                object.__setattr__(self, f.name, value)
            if not isinstance(value, Fmt):
                raise SpecError(f"formats.{f.name} must be an ap_fixed string such as "
                               f"'ap_fixed<16,4,RND_CONV,SAT>' (or an onchip.Fmt), got {value!r}")
        if self.acc.overflow != "WRAP" or not self.acc.signed:
            raise SpecError(
                f"formats.acc must be signed with WRAP overflow (sums are then independent of the "
                f"order of additions, as in an adder tree), got {self.acc}"
            )
        if not (self.basis.signed and self.basis.max_value >= 1.0):
            raise SpecError(
                f"formats.basis must be signed and hold the values -1 and 1 (basis values and "
                f"derivatives), got {self.basis}"
            )

    @property
    def y(self) -> Fmt:
        """The format of predictions and targets: ``output``, or ``act`` when it is not set."""
        return self.act if self.output is None else self.output

    def as_dict(self) -> dict[str, str]:
        # output is written only when set: specs without it keep their text (and cache keys)
        return {f.name: str(getattr(self, f.name)) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def uniform(cls, width: int, int_bits: int = 4, acc_width: int | None = None) -> "Formats":
        """All data formats ``ap_fixed<width,int_bits,RND_CONV,SAT>`` (basis: I=2), accumulator
        wide enough for exact products (used by the quantization sweeps)."""
        data = Fmt(width, int_bits, True, "RND_CONV", "SAT")
        basis = Fmt(width, 2, True, "RND_CONV", "SAT")
        frac = 2 * (width - int_bits) + 2
        acc_width = acc_width or min(48, frac + 14)
        return cls(data, data, basis, data, data, Fmt(acc_width, acc_width - frac, True, "TRN", "WRAP"))


@dataclass(frozen=True)
class LearnerSpec:
    """A fixed-point online learner: a KAN of B-spline edges or a ReLU MLP.

    Attributes:
        kind: ``"kan"`` or ``"mlp"``.
        widths: layer widths from input to output, e.g. ``(2, 4, 1)``.
        grid_size: KAN grid size G, the number of spline cells on ``grid_range``.
        spline_order: KAN spline order k (1 linear, 2 quadratic, 3 cubic).
        grid_range: KAN ``(lo, hi)``; the cell width h = (hi - lo) / G must be a
            power of two, so that the cell index and the position inside the cell
            are bit fields of the input (no divider).
        basis_table_bits: KAN address bits T of the basis table: the position in
            the cell is truncated to T bits and looks up k+1 basis values and
            k+1 derivatives.
        formats: :class:`Formats` of every signal class.
        learning_rate: SGD step eta, a power of two (the update is a shift).
        loss: ``"mse"``: L = 1/2 (y_hat - y)^2; two-state readout uses it on a
            +/-1 target (least-squares discriminant), decision y_hat >= 0 -> |1>.
        schedule: ``"sequential"`` (each sample sees every earlier update) or
            ``"pipelined"`` (a new sample every clock; updates land ``staleness``
            samples later, see :mod:`onchip.model`).
        staleness: D, for the pipelined schedule: the number of most recent
            updates a sample does not see. Ignored (0) when sequential.
        init_scale: initial parameters: KAN coefficients uniform in
            +/- init_scale; MLP weights uniform in +/- init_scale*sqrt(3/fan_in),
            biases zero.
        datapath: hardware datapath. MLP: ``"parallel"`` (a multiplier per weight, every
            weight in registers, II of a few cycles, pipelinable) or ``"serial"`` (one
            multiply-accumulate lane per neuron stepping over the layer's inputs, weights
            in RAM; sequential schedule only; for wide networks). KAN: ``"parallel"`` (k+1
            multipliers per edge, every edge at once) or ``"serial"`` (``lanes`` edges per
            cycle and layer, :mod:`onchip.hw.kan_serial`; sequential schedule only; for KANs
            whose edges do not fit the device's DSPs). The golden model's semantics do not
            depend on it.
        lanes: serial KAN datapath: edges processed per clock cycle in each layer (at most
            the layer's input count is used), each lane with k+1 multipliers for the spline
            dot and k+1 for the update; 1 for every other datapath.
        channels: N, the independent learners that share one datapath (multiplexed qubit
            readout: one discriminator per qubit). Every sample names its channel
            (``ceil(log2 N)`` bits after the other stream fields); channel c's predictions and
            parameters equal those of a single-channel *sequential* learner run on channel c's
            sub-stream, whatever the order of channels in the stream (so ``staleness`` does not
            apply: :attr:`effective_staleness` is 0). Parameters are (N, P). Default 1.
        init_seed: seed of the initial parameters (they are part of the learner:
            the RTL holds them as its reset values).
        name: preset name, informational.
        allow_acc_wrap: the ``acc`` format may be too narrow for the worst-case forward sum
            (:meth:`worst_case_sums`), so that a sum can wrap (the WRAP semantics of ``acc``
            then apply). Default False: such an ``acc`` is refused, naming the integer bits
            it needs.
        timing: register stages of the RTL (:func:`onchip.hw.plan.stage_plan`): ``"auto"``
            (the default: :func:`default_timing`, fast for the sequential schedule, compact for
            the pipelined one; :attr:`stage_timing` holds the plan it builds),
            ``"compact"`` (fewest cycles: a multiply, its rounding and an adder tree share
            a clock cycle) or ``"fast"`` (every multiplier's raw product is registered and no
            stage holds more than one multiplier, one carry chain or two adder-tree levels: more
            cycles of latency, a larger sequential II and pipelined minimum staleness, a higher
            fmax) or ``"predict-first"`` (one-layer parallel KANs: the forward path in as few
            stages as its arithmetic allows, the prediction leaving combinationally out of them,
            the output error, backward pass and update registered as in fast behind it:
            the fewest cycles from sample to prediction). The
            golden model's semantics do not depend on it. On the serial datapaths fast registers
            each lane's raw products and the step strobes (:func:`onchip.hw.mlp_serial.serial_plan`,
            :func:`onchip.hw.kan_serial.pass_offsets`).

    Raises:
        SpecError: (a ``ValueError``) any field that cannot be built, naming the field, the value
            and why: among them a bool where a number belongs (:data:`INT_FIELDS`,
            :data:`FLOAT_FIELDS`, ``widths``, ``grid_range``), a NaN or an infinity, a name
            holding control characters.
    """

    kind: str
    widths: tuple[int, ...]
    grid_size: int = 8
    spline_order: int = 3
    grid_range: tuple[float, float] = (-2.0, 2.0)
    basis_table_bits: int = 6
    formats: Formats = field(default_factory=Formats)
    learning_rate: float = 2.0**-4
    loss: str = "mse"
    schedule: str = "sequential"
    staleness: int = 4
    init_scale: float = 0.1
    init_seed: int = 0
    name: str = ""
    datapath: str = "parallel"
    allow_acc_wrap: bool = False
    timing: str = "auto"
    lanes: int = 1
    channels: int = 1

    def __post_init__(self):
        # numbers first, kind by kind, so that no later check computes with a bool, a NaN or an infinity
        widths = _sequence("widths", self.widths)
        object.__setattr__(self, "widths", tuple(_integer(f"widths[{i}]", w) for i, w in enumerate(widths)))
        grid_range = _sequence("grid_range", self.grid_range)
        if len(grid_range) != 2:
            raise SpecError(f"grid_range must be two numbers [lo, hi], got {list(grid_range)}")
        object.__setattr__(self, "grid_range",
                           tuple(_finite(f"grid_range[{i}]", v) for i, v in enumerate(grid_range)))
        for name in INT_FIELDS:
            object.__setattr__(self, name, _integer(name, getattr(self, name)))
        for name in FLOAT_FIELDS:
            object.__setattr__(self, name, _finite(name, getattr(self, name)))
        _check_name(self.name)
        if isinstance(self.formats, dict):
            object.__setattr__(self, "formats", Formats(**self.formats))
        if not isinstance(self.formats, Formats):
            raise SpecError(f"formats must be a Formats or a table of format names, got {self.formats!r}")
        self._validate()

    # -- validation -----------------------------------------------------------
    def _validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise SpecError(msg)

        need(self.kind in KINDS, f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        need(
            len(self.widths) >= 2 and all(w >= 1 for w in self.widths),
            f"widths must list at least two positive integers (input ... output), got {list(self.widths)}",
        )
        need(self.loss in LOSSES, f"loss must be one of {', '.join(LOSSES)}; got {self.loss!r}")
        need(self.datapath in DATAPATHS, f"datapath must be one of {', '.join(DATAPATHS)}; got {self.datapath!r}")
        size, device = self.hardware_size(), LARGEST_DEVICE["part"]
        for what, bound in (("parameter_bits", MAX_PARAMETER_BITS),
                            ("multipliers", max_multipliers(self.formats.coef.width))):
            banks = self.channels > 1 and what == "parameter_bits"  # channels multiply the parameters only
            need(
                size[what] <= bound,
                f"widths {list(self.widths)}" + (f", grid_size {self.grid_size}" if self.kind == "kan" else "")
                + (f", channels {self.channels}" if banks else "")
                + f" ({self.datapath} datapath): {size[what]} {what.replace('_', ' ')}, more than the {bound} "
                f"the largest supported device ({device}) holds; is {'channels or ' if banks else ''}a width mistyped?",
            )
        need(
            self.schedule in SCHEDULES,
            f"schedule must be one of {', '.join(SCHEDULES)}; got {self.schedule!r}",
        )
        need(
            0 <= self.staleness <= MAX_STALENESS,
            f"staleness must be an integer in [0, {MAX_STALENESS}] (the design queues D pending updates), "
            f"got {self.staleness!r}",
        )
        need(self.init_seed >= 0, f"init_seed must be an integer >= 0, got {self.init_seed!r}")
        need(
            self.datapath == "parallel" or self.schedule == "sequential",
            f"datapath='serial' is built for the sequential schedule; got schedule={self.schedule!r}",
        )
        need(self.lanes >= 1, f"lanes must be an integer >= 1, got {self.lanes!r}")
        need(self.channels >= 1, f"channels must be an integer >= 1, got {self.channels!r}")
        need(
            self.lanes == 1 or (self.kind == "kan" and self.datapath == "serial"),
            f"lanes={self.lanes!r} applies to the serial KAN datapath only (kind='kan', datapath='serial'); "
            f"got kind={self.kind!r}, datapath={self.datapath!r}",
        )
        need(
            self.lanes <= max(self.widths[:-1]),
            f"lanes={self.lanes!r} is more than the widest layer's {max(self.widths[:-1])} inputs "
            f"(a lane takes one input's edge per cycle)",
        )
        need(self.timing in TIMING_CHOICES, f"timing must be one of {', '.join(TIMING_CHOICES)}; got {self.timing!r}")
        need(
            self.timing != "predict-first" or (self.kind == "kan" and self.datapath == "parallel"
                                               and len(self.widths) == 2),
            f"timing='predict-first' is built for a one-layer KAN on the parallel datapath; got "
            f"kind={self.kind!r}, widths={list(self.widths)}, datapath={self.datapath!r}",
        )
        lr = self.learning_rate
        need(
            0 < lr <= 1 and math.log2(lr) == round(math.log2(lr)),
            f"learning_rate must be a power of two in (0, 1] (the update is a shift), got {lr!r}",
        )
        need(self.init_scale >= 0, f"init_scale must be >= 0, got {self.init_scale!r}")
        need(isinstance(self.allow_acc_wrap, bool),
             f"allow_acc_wrap must be true or false, got {toml_text(self.allow_acc_wrap)}")
        f = self.formats
        # the initial parameters are quantized into coef: a bound coef cannot hold would saturate or wrap
        bound = self.init_scale * (1.0 if self.kind == "kan" else math.sqrt(3.0 / min(self.widths[:-1])))
        need(
            f.coef.min_value <= -bound and bound <= f.coef.max_value,
            f"init_scale={self.init_scale!r} draws initial {'coefficients' if self.kind == 'kan' else 'weights'} "
            f"in +/-{bound:g}, outside formats.coef ({f.coef}), which holds [{f.coef.min_value}, {f.coef.max_value}]",
        )
        for name in ("input", "coef", "basis", "act", "grad", "output"):
            fmt = getattr(f, name)
            need(fmt is None or fmt.width <= 32, f"formats.{name} is wider than 32 bits: {fmt}")
        y_name = "act" if f.output is None else "output"
        # an error y_hat - y of two output values is quantized into grad: a coarser LSB than the
        # largest such error rounds every error to zero or one LSB, so the learner cannot learn
        span = f.y.max_value - f.y.min_value
        need(
            f.grad.lsb <= span,
            f"formats.grad ({f.grad}): its LSB {f.grad.lsb:g} is coarser than any error the {y_name} format "
            f"({f.y}) can produce (|y_hat - y| <= {span:g}); give grad fractional bits",
        )
        # every product the models form, converted into the accumulator, must fit int64
        pairs = [(a, b) for a in ("coef", "grad") for b in ("input", "basis", "act", "grad")]
        for a, b in pairs:
            fa, fb = getattr(f, a), getattr(f, b)
            bits = fa.width + fb.width + max(0, f.acc.frac_bits - fa.frac_bits - fb.frac_bits)
            need(  # named by the widest factor too: a coef or input given too wide is the usual cause
                bits <= 62,
                f"formats.{a} ({fa}) x formats.{b} ({fb}) products need {bits} bits in formats.acc ({f.acc}), "
                f"at most 62: narrow formats.{a if fa.width >= fb.width else b} or give acc fewer fractional bits",
            )
        if self.kind == "kan":
            self._validate_kan(need)
        if not self.allow_acc_wrap:
            acc = f.acc
            for layer, worst in enumerate(self.worst_case_sums()):
                if acc.min_value <= -worst and worst <= acc.max_value:
                    continue
                need_bits = math.ceil(math.log2(worst + acc.lsb)) + 1 if acc.signed else None
                need(
                    False,
                    f"formats.acc ({acc}) cannot hold the worst-case forward sum of layer {layer} "
                    f"(+/-{worst:g}): "
                    + (f"it needs at least {need_bits} integer bits" if need_bits is not None
                       else "an unsigned accumulator cannot hold negative sums")
                    + "; set allow_acc_wrap = true if wrapping is intended",
                )

    def _validate_kan(self, need) -> None:
        g, k = self.grid_size, self.spline_order
        need(g >= 1, f"grid_size (G) must be an integer >= 1, got {g!r}")
        need(k in (1, 2, 3), f"spline_order (k) must be 1, 2 or 3, got {k!r}")
        t = self.basis_table_bits
        need(1 <= t <= 12, f"basis_table_bits must be 1..12, got {t!r}")
        lo, hi = self.grid_range
        need(hi > lo, f"grid_range must have lo < hi, got {self.grid_range}")
        h = (hi - lo) / g
        e = math.log2(h) if 0 < h < math.inf else 0.5  # beyond the float range or underflowed to 0
        need(
            e == round(e),
            f"grid_range: cell width (hi - lo)/G = ({hi} - {lo})/{g} = {h} is not a power of two",
        )
        layer_inputs = [("input", self.formats.input)] + [("act", self.formats.act)] * (
            len(self.widths) - 2
        )
        for name, fmt in layer_inputs:
            need(
                fmt.contains(lo) and hi <= fmt.max_value + fmt.lsb,
                f"formats.{name} ({fmt}) is too narrow for grid_range {self.grid_range}: "
                f"it holds [{fmt.min_value}, {fmt.max_value}]",
            )
            pos_bits = fmt.frac_bits + int(round(e))
            need(
                pos_bits >= t,
                f"formats.{name} ({fmt}) has {fmt.frac_bits} fractional bits, which resolve "
                + (f"{pos_bits} bits of position inside a cell of width {h}" if pos_bits > 0 else
                   f"no position inside a cell of width {h} (its LSB spans {2.0 ** -pos_bits:g} "
                   f"cell{'s' if pos_bits < 0 else ''})")
                + f": fewer than basis_table_bits={t} (a smaller grid_size or more fractional bits)",
            )

    # -- derived quantities ----------------------------------------------------
    def worst_case_sums(self) -> list[float]:
        """Largest magnitude of each layer's forward sum in the ``acc`` format (value units).

        MLP: fan-in x the largest |weight x input| + the largest |bias| (coef range times the
        input format's range for layer 0, the ReLU output range ``[0, act.max]`` after that).
        KAN: fan-in x the largest |coef| x the largest sum of the k+1 quantized basis values
        of one table entry (about 1: the B-spline basis is a partition of unity).
        The rounding of each product into ``acc`` is not counted.
        """
        f = self.formats
        coef = max(-f.coef.min_value, f.coef.max_value)
        pairs = list(zip(self.widths[:-1], self.widths[1:]))
        if self.kind == "kan":
            from .model.basis import basis_table

            bval, _ = basis_table(self.spline_order, self.basis_table_bits, f.basis)
            basis_sum = float(np.abs(bval).sum(axis=1).max()) * f.basis.lsb
            return [n_in * coef * basis_sum for n_in, _ in pairs]
        out = []
        for layer, (n_in, _) in enumerate(pairs):
            a = max(-f.input.min_value, f.input.max_value) if layer == 0 else f.act.max_value
            out.append(n_in * coef * a + coef)
        return out

    @property
    def lr_shift(self) -> int:
        """s with learning_rate = 2**-s."""
        return int(round(-math.log2(self.learning_rate)))

    @property
    def cell_exp(self) -> int:
        """e with cell width h = 2**e (KAN)."""
        return int(round(math.log2((self.grid_range[1] - self.grid_range[0]) / self.grid_size)))

    @property
    def n_coef(self) -> int:
        """Coefficients per KAN edge: G + k."""
        return self.grid_size + self.spline_order

    @property
    def effective_staleness(self) -> int:
        """D used by the models: ``staleness`` when pipelined, 0 when sequential or with more than
        one channel (each channel is a sequential learner; the hardware stalls a sample whose
        channel still has an update in flight)."""
        return self.staleness if self.built_schedule == "pipelined" else 0

    @property
    def n_in(self) -> int:
        return self.widths[0]

    @property
    def n_out(self) -> int:
        return self.widths[-1]

    def parameter_count(self) -> int:
        """Learned parameters: KAN sum over layers of n_in*n_out*(G+k); MLP weights + biases."""
        pairs = zip(self.widths[:-1], self.widths[1:])
        if self.kind == "kan":
            return sum(a * b * self.n_coef for a, b in pairs)
        return sum(a * b + b for a, b in pairs)

    def hardware_size(self) -> dict[str, int]:
        """Lower bounds of what the learner's hardware holds, for :data:`MAX_PARAMETER_BITS` and
        :data:`MAX_MULTIPLIERS`: ``parameters`` (P x channels), ``parameter_bits`` (that x coef width) and
        ``multipliers`` (parallel KAN: k+1 per edge; parallel MLP: one per weight; serial MLP: one
        lane per neuron; serial KAN: 2(k+1) per lane and layer). Python integers: nothing is
        allocated, whatever the widths."""
        pairs = list(zip(self.widths[:-1], self.widths[1:]))
        p = self.parameter_count()
        k1 = self.spline_order + 1
        if self.kind == "kan":
            mult = (sum(a * b for a, b in pairs) * k1 if self.datapath == "parallel"
                    else len(pairs) * self.lanes * 2 * k1)
        else:
            mult = sum(a * b for a, b in pairs) if self.datapath == "parallel" else sum(b for _, b in pairs)
        p *= self.channels  # one parameter bank per channel, one datapath
        return {"parameters": p, "parameter_bits": p * self.formats.coef.width, "multipliers": mult}

    @property
    def built_schedule(self) -> str:
        """The schedule the hardware and the models run: ``schedule``, but ``"sequential"`` with more
        than one channel (each channel is a sequential learner: :attr:`effective_staleness`)."""
        return "sequential" if self.channels > 1 else self.schedule

    @property
    def schedule_words(self) -> str:
        """The schedule as the tools print it: :attr:`built_schedule`, or ``"sequential per channel"``
        with more than one channel."""
        return "sequential per channel" if self.channels > 1 else self.built_schedule

    @property
    def schedule_not_applied(self) -> str | None:
        """Why the spec's own schedule is not the one built (channels), or None when it is."""
        if self.schedule == self.built_schedule:
            return None
        return f"the spec's schedule {self.schedule!r}, staleness {self.staleness}, does not apply with channels"

    @property
    def stage_timing(self) -> str:
        """The stage plan the RTL is built with: ``timing``, or for ``"auto"``
        :func:`default_timing` of the schedule built (:attr:`built_schedule`)."""
        return default_timing(self.built_schedule) if self.timing == "auto" else self.timing

    def replace(self, **changes) -> "LearnerSpec":
        """A copy with fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- TOML -------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {
            "kind": self.kind,
            "name": self.name,
            "widths": list(self.widths),
            "learning_rate": self.learning_rate,
            "loss": self.loss,
            "schedule": self.schedule,
            "staleness": self.staleness,
            "init_scale": self.init_scale,
            "init_seed": self.init_seed,
        }
        if self.kind == "kan":
            d.update(
                grid_size=self.grid_size,
                spline_order=self.spline_order,
                grid_range=list(self.grid_range),
                basis_table_bits=self.basis_table_bits,
            )
            if self.datapath == "serial":  # written only when set: parallel KAN specs keep their text
                d.update(datapath="serial", lanes=self.lanes)
        else:
            d["datapath"] = self.datapath
        if self.allow_acc_wrap:  # written only when set: specs without it keep their text (and cache keys)
            d["allow_acc_wrap"] = True
        if self.timing != "auto":  # likewise: specs without it keep their text (the sources' digest,
            d["timing"] = self.timing  # part of every hardware cache key, tells the plans apart)
        if self.channels != 1:  # likewise: single-channel specs keep their text
            d["channels"] = self.channels
        d["formats"] = self.formats.as_dict()
        return d

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "LearnerSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SpecError(unknown_fields(unknown, known))
        if "kind" not in d or "widths" not in d:
            raise SpecError("a spec needs at least the fields 'kind' and 'widths'")
        d = dict(d)
        if "formats" in d:
            if not isinstance(d["formats"], dict):
                raise SpecError(f"[formats] must be a table of format names, got {d['formats']!r}")
            fmts = dict(d["formats"])
            known_f = {f.name for f in dataclasses.fields(Formats)}
            bad = sorted(set(fmts) - known_f)
            if bad:
                raise SpecError(unknown_fields(bad, known_f, "unknown format name(s) in [formats]"))
            d["formats"] = Formats(**fmts)
        spec = cls(**d)  # every value checked first: a bad one is named as such
        grid = [name for name in KAN_ONLY_FIELDS if name in d]
        if spec.kind == "mlp" and grid:  # written for a KAN: silently ignored, they would mislead
            raise SpecError(f"{', '.join(grid)}: KAN field{'s' if len(grid) > 1 else ''} in a spec of "
                            f"kind = 'mlp', which has no spline grid; remove {'them' if len(grid) > 1 else 'it'}")
        return spec

    @classmethod
    def from_toml(cls, text: str) -> "LearnerSpec":
        """Parse a TOML spec. Raises ValueError on bad TOML or a bad field."""
        try:
            data = tomllib.loads(text.removeprefix("\ufeff"))  # a byte-order mark, as some editors save
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"spec is not valid TOML: {exc}") from None
        return cls.from_dict(data)


def unknown_fields(unknown, known, what: str = "unknown spec field(s)") -> str:
    """The refusal of the names ``unknown`` (fields of a spec or a sweep's grid, format names, the
    tables and settings of a sweep definition), each with the closest of ``known`` where one is
    close: ``"unknown spec field(s): gridsize (did you mean grid_size?)"``; ``what`` opens it."""
    def named(name: str) -> str:
        near = difflib.get_close_matches(name, sorted(known), n=1)
        return name + (f" (did you mean {near[0]}?)" if near else "")

    return f"{what}: " + ", ".join(named(name) for name in sorted(unknown))


#: spec fields only a KAN has (:meth:`LearnerSpec.to_dict` writes them for a KAN only; a spec file of
#: kind = "mlp" that sets one is refused)
KAN_ONLY_FIELDS = ("grid_size", "spline_order", "grid_range", "basis_table_bits")


def _preset(**kw) -> LearnerSpec:
    return LearnerSpec(**kw)


#: Named specs accepted wherever a spec file is. 16-bit data formats. Their staleness is the
#: smallest the RTL's II = 1 pipeline allows (read-to-update distance), used when pipelined.
PRESETS: dict[str, LearnerSpec] = {
    "kan-regression": _preset(
        name="kan-regression", kind="kan", widths=(1, 1), grid_size=8, spline_order=3,
        grid_range=(-2.0, 2.0), learning_rate=2.0**-2, init_scale=0.0, staleness=3,
    ),
    "mlp-regression": _preset(
        name="mlp-regression", kind="mlp", widths=(1, 16, 1), learning_rate=2.0**-5, init_scale=1.0,
        staleness=7,
    ),
    "kan-readout": _preset(
        name="kan-readout", kind="kan", widths=(2, 1), grid_size=8, spline_order=3,
        grid_range=(-4.0, 4.0), learning_rate=2.0**-4, init_scale=0.0, staleness=3,
    ),
    "mlp-readout": _preset(
        name="mlp-readout", kind="mlp", widths=(2, 8, 1), learning_rate=2.0**-5, init_scale=1.0,
        staleness=7,
    ),
    # the seed paper's development design: 1->1 KAN, G = 5, k = 3, ap_fixed<16,6>
    "kan-paper": _preset(
        name="kan-paper", kind="kan", widths=(1, 1), grid_size=5, spline_order=3,
        grid_range=(-5.0, 5.0), learning_rate=2.0**-2, init_scale=0.0, staleness=3,
        formats=Formats(input="ap_fixed<16,6,RND_CONV,SAT>", coef="ap_fixed<16,6,RND_CONV,SAT>",
                        act="ap_fixed<16,6,RND_CONV,SAT>", grad="ap_fixed<16,6,RND_CONV,SAT>"),
    ),
}

#: The tasks' own named specs, accepted wherever a preset is (:func:`load_spec`, every command);
#: the reference designs and the preset test matrix are those of :data:`PRESETS`. The acrobot
#: Q-function: 6 features -> 3 actions, 16-bit formats; the KAN grids cover the features' range
#: [-1, 1] in cells of 1/4 with linear splines (k = 1: each input activates two neighbouring
#: basis functions, like one tiling of tile coding, interpolated).
TASK_PRESETS: dict[str, LearnerSpec] = {
    "kan-acrobot": _preset(
        name="kan-acrobot", kind="kan", widths=(6, 3), grid_size=8, spline_order=1,
        grid_range=(-1.0, 1.0), learning_rate=2.0**-5, init_scale=0.0),
    # two KAN layers: the hidden layer's 8 sums of edge functions feed the output edges, so the
    # Q-function is no longer additive in the features
    "kan2-acrobot": _preset(
        name="kan2-acrobot", kind="kan", widths=(6, 8, 3), grid_size=8, spline_order=1,
        grid_range=(-1.0, 1.0), learning_rate=2.0**-5, init_scale=0.25),
    "mlp-acrobot": _preset(
        name="mlp-acrobot", kind="mlp", widths=(6, 32, 3), learning_rate=2.0**-5, init_scale=0.25),
}


def load_spec(spec: "str | Path | LearnerSpec") -> LearnerSpec:
    """A preset name (:data:`PRESETS` or :data:`TASK_PRESETS`), a TOML file path, or a spec
    object -> a validated spec.

    Raises:
        ValueError: not a spec, a string or a path; the name is neither a preset nor a file, or the
            spec is invalid.
    """
    if isinstance(spec, LearnerSpec):
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise ValueError(f"spec must be a LearnerSpec, a preset name or a spec file, got {type(spec).__name__}")
    text = str(spec)
    named = PRESETS.get(text) or TASK_PRESETS.get(text)
    if named is not None:
        return named
    path = Path(text)
    if not path.is_file():
        near = difflib.get_close_matches(text, [*PRESETS, *TASK_PRESETS], n=1)
        raise ValueError(
            f"spec {text!r} is neither a preset ({', '.join([*PRESETS, *TASK_PRESETS])}) nor an existing file"
            + (f" (did you mean {near[0]}?)" if near else "")
        )
    try:
        return LearnerSpec.from_toml(path.read_text())
    except ValueError as exc:
        raise ValueError(f"spec file {text}: {exc}") from None
