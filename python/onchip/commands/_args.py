"""Arguments every ``onchip`` sub-command shares, and argparse types that name the bad flag.

A command module is parse-and-call: ``add_parser(subparsers)`` registers its flags with the
helpers below, ``run(args)`` builds one config (:func:`build_config`) and calls one function.
argparse prefixes a type's error with the flag (``argument --steps: ...``) and
:class:`onchip.cli.Parser` prints it on one line, so the types only say what is wrong.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import sys
from typing import Callable, Sequence

#: One wording of ``--out`` for every command.
OUT_HELP = ("output folder, new or an earlier output of this command (replaced whole on success; "
            "default: %(default)s)")
FORCE_HELP = ("replace --out even if a file in it changed since onchip wrote it, or another command wrote it "
              "(files onchip never wrote there are still refused)")


def add_out(parser: argparse.ArgumentParser, command: str | None = None) -> None:
    """Add ``--out`` (default ``out/<command>``), checked at parse time, and :func:`add_force`.

    The folder is refused up front for the same reasons
    :func:`onchip.io.atomic_output_dir` refuses it later (a file, the current folder or a
    parent, a folder of files onchip did not write), so a bad ``--out`` fails before any work;
    a changed file or another command's output (which ``--force`` allows) is refused by
    :func:`onchip.cli.main` once the flags are parsed.

    Args:
        parser: the sub-command's parser.
        command: the name in the default folder; defaults to the parser's last ``prog`` word.
    """
    command = command or parser.prog.split()[-1]
    parser.add_argument("--out", type=output_dir, default=f"out/{command}", help=OUT_HELP)
    add_force(parser)


def add_force(parser: argparse.ArgumentParser) -> None:
    """Add ``--force`` (``args.force``): replace an ``--out`` holding a file changed since onchip
    wrote it, or another command's output (:func:`onchip.io.output_policy`)."""
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)


def add_seed(parser: argparse.ArgumentParser, *, many: bool = False, what: str = "",
             default: int | Sequence[int] = 0) -> None:
    """Add ``--seed`` (integer >= 0); ``many`` takes one or more seeds as a list.

    Args:
        parser: the sub-command's parser.
        many: ``nargs="+"`` (a list, default ``[default]``, or ``default`` itself when it is a
            list) instead of one integer.
        what: what the seed drives, appended to the help text.
        default: the seed (with ``many``, the seeds) when the flag is not given.
    """
    tail = f"; {what}" if what else ""
    if many:
        seeds = [default] if isinstance(default, int) else list(default)
        parser.add_argument("--seed", type=nonneg_int, nargs="+", default=seeds,
                            help=f"one or more random seeds (default: {' '.join(map(str, seeds))}){tail}")
    else:
        parser.add_argument("--seed", type=nonneg_int, default=default, help=f"random seed (default: {default}){tail}")


def add_spec(parser: argparse.ArgumentParser) -> None:
    """Add ``--spec`` and the design overrides ``--schedule``, ``--staleness``, ``--timing`` and
    ``--channels`` (applied by :func:`onchip.commands.generate.resolve_spec`) for the commands that
    build a learner."""
    parser.add_argument("--spec", required=True, help="a preset name or a TOML spec file")
    parser.add_argument("--channels", type=int_range(1, None), default=None, metavar="N",
                        help="override the spec's channels: N independent learners on one datapath, each "
                             "sample naming its channel (default: the spec's, 1 unless it sets one)")
    parser.add_argument("--schedule", choices=("sequential", "pipelined"), help="override the spec's schedule")
    parser.add_argument(
        "--staleness",
        help="override the pipelined staleness D: an integer, or 'min' for the smallest the pipeline allows",
    )
    parser.add_argument(
        "--timing", choices=("auto", "compact", "fast", "predict-first"),  # spec.TIMING_CHOICES, unimported
        help="override the spec's register stages: compact (fewest cycles) or fast (a register after every "
             "multiplier and carry chain: more cycles, higher fmax), or predict-first (one-layer KANs: the fewest "
             "cycles from sample to prediction, the update registered as in fast behind it), or auto (fast for "
             "the sequential schedule, on either datapath, compact for the pipelined one); a pipelined staleness "
             "below the new minimum is raised to it unless --staleness is given (default: the spec's timing, "
             "itself auto unless the spec sets one)",
    )


def plan_words(spec, report: dict) -> str:
    """The plan a design was built with, as the hardware commands print it: ``"sequential, timing fast
    (auto)"`` or ``"pipelined (staleness 8), timing compact"``, from a report or description holding
    ``schedule``, ``staleness`` and ``timing`` (:data:`onchip.hw.description.PLAN_KEYS`)."""
    schedule = f"pipelined (staleness {report['staleness']})" if report["schedule"] == "pipelined" else "sequential"
    if report.get("channels", 1) > 1:
        schedule = spec.schedule_words + (f" ({spec.schedule_not_applied})" if spec.schedule_not_applied else "")
    return f"{schedule}, timing {report['timing']}{' (auto)' if spec.timing == 'auto' else ''}"


def add_top(parser: argparse.ArgumentParser, what: str = "the core module") -> None:
    """Add ``--top NAME`` (default ``onchip_learner``), checked at parse time by
    :func:`onchip.hw.names.check_top`: the name of the generated module, prefixing every module the
    Verilog holds (the AXI4-Stream wrapper is ``<top>_axis``), so that two learners fit one design.

    Args:
        parser: the sub-command's parser.
        what: what the name names, for the help text.
    """
    from onchip.hw.names import DEFAULT_TOP

    parser.add_argument("--top", type=top_name, default=DEFAULT_TOP,
                        help=f"name of {what}, a Verilog/VHDL identifier; prefixes every generated module, the "
                             f"AXI4-Stream wrapper is <top>_axis (default: %(default)s)")


def add_packet(parser: argparse.ArgumentParser) -> None:
    """Add ``--packet N`` (default 1): predictions per packet of the AXI4-Stream wrapper's prediction
    stream, ``m_axis_pred_tlast`` high on the last of each (:class:`onchip.hw.axis.AxisLearner`)."""
    from onchip.hw.axis import MAX_PACKET

    parser.add_argument("--packet", type=int_range(1, MAX_PACKET), default=1, metavar="N",
                        help="predictions per packet on the AXI4-Stream wrapper's m_axis_pred: TLAST is high on "
                             "the last of every N, as an AXI DMA expects (default: %(default)s, every prediction)")


def add_quiet(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """Add ``--quiet`` (no progress bars; ``args.quiet``).

    Args:
        parser: the sub-command's parser.
        aliases: older spellings (``--no-progress``) kept working but hidden from ``--help``.
    """
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    for alias in aliases:
        parser.add_argument(alias, dest="quiet", action="store_true", help=argparse.SUPPRESS)


THETA_HELP = ("raw initial parameters: a .npy of P integers in the spec's coef format (the theta.npy "
              "of `onchip import`), the reset values instead of the spec's seeded draw; with channels = N "
              "> 1, (N, P) (a row per channel) or (P,) (every channel)")


def add_theta(parser: argparse.ArgumentParser) -> None:
    """Add ``--theta FILE`` (read with :func:`load_theta` once the spec is known)."""
    parser.add_argument("--theta", default=None, metavar="FILE", help=THETA_HELP)


def load_theta(path: str | None, spec):
    """The parameters of ``--theta``: an int64 (P,) array ((N, P) or (P,) for a spec of N > 1
    channels, as given), or None without the flag.

    Args:
        path: the flag's value (None: not given).
        spec: the learner they are for (a LearnerSpec, a preset name or a TOML file; loaded only
            when ``path`` is given). None: a job that picks its task's preset itself; only the
            values are checked here, the shape and the ``formats.coef`` range by the job
            (:func:`onchip.run.job_theta`) once the preset is known.

    Raises:
        ValueError: starting ``--theta FILE:``: not a readable .npy (an empty file, an .npz archive
            under any name, a pickle), not shape (P,) (or (N, P) with N channels), a value that is
            not an integer representable in int64, or one outside ``formats.coef`` (its index).
    """
    if path is None:
        return None
    import numpy as np

    from ..io import read_npy
    from ..spec import load_spec

    from ..model.golden import check_parameters

    spec = None if spec is None else load_spec(spec)
    theta = read_npy(path, "--theta")

    def at(flat: int):  # a flat position as the index a user reads in the array
        where = np.unravel_index(flat, theta.shape)
        return where[0] if len(where) == 1 else tuple(int(i) for i in where)

    if theta.dtype == bool or not (np.issubdtype(theta.dtype, np.integer) or np.issubdtype(theta.dtype, np.floating)):
        raise ValueError(f"--theta {path}: dtype {theta.dtype}; raw parameters are integers")
    if np.issubdtype(theta.dtype, np.floating):
        wide = theta.astype(np.float64)  # exact for every float dtype; 2**63 overflows a float16
        bad = ~np.isfinite(wide) | (wide != np.round(wide)) | (np.abs(wide) >= 2.0**63)
        if bad.any():
            n = int(np.flatnonzero(bad)[0])
            raise ValueError(f"--theta {path}: value {float(theta.flat[n])!r} at index {at(n)} is not an integer "
                             "representable in int64")
    elif theta.dtype == np.uint64 and theta.size and theta.max() >= 2**63:
        n = int(np.argmax(theta))
        raise ValueError(f"--theta {path}: value {int(theta.flat[n])} at index {at(n)} is not representable in int64")
    theta = theta.astype(np.int64)
    if spec is not None:
        try:  # the shape and range, worded as the Python API and the jobs word them
            check_parameters(spec, theta)
        except ValueError as exc:
            raise ValueError(f"--theta {path}: {exc}") from None
    return theta


class _Default:
    """A flag's default as :func:`add_quick` leaves it: lets :func:`apply_quick` tell a flag the user
    gave (any plain value) from one left at its default (this wrapper)."""

    def __init__(self, value):
        self.value = value

    def __str__(self) -> str:  # %(default)s in help texts
        return str(self.value)

    __repr__ = __str__


def add_quick(parser: argparse.ArgumentParser, quick: dict, help: str | None = None) -> None:
    """Add ``--quick``: a small run (what the tests run) that changes only the flags the user did not give.

    Call after the flags named in ``quick`` are added. Their defaults are wrapped so that
    :func:`apply_quick` (call it first in the command's ``run``) knows which were given: with
    ``--quick`` an explicit ``--seeds 5`` still runs seed 5, the rest take the ``quick`` values.

    Args:
        parser: the sub-command's parser.
        quick: argparse dest -> value under ``--quick`` (already converted, e.g. ``[0]`` for seeds).
        help: the flag's help (default: the values, ``seeds 0, steps 4, ...``).

    Raises:
        KeyError: a name in ``quick`` that is no flag of ``parser``.
    """
    actions = {a.dest: a for a in parser._actions}
    for dest in quick:
        action = actions[dest]
        default = action.default
        if isinstance(default, str) and callable(action.type):  # argparse converts string defaults
            default = action.type(default)
        parser.set_defaults(**{dest: _Default(default)})
    shown = ", ".join(f"{d.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                      for d, v in quick.items())
    parser.add_argument("--quick", action="store_true",
                        help=help or f"a seconds-long run (what the tests run): {shown}; flags given win")
    parser.set_defaults(_quick=dict(quick))


def apply_quick(args: argparse.Namespace) -> argparse.Namespace:
    """Resolve the flags :func:`add_quick` registered, in place: a flag the user gave keeps its value;
    one left at its default takes the ``--quick`` value when ``args.quick``, else the default.
    Returns ``args``."""
    for dest, value in getattr(args, "_quick", {}).items():
        current = getattr(args, dest)
        if isinstance(current, _Default):
            setattr(args, dest, value if args.quick else current.value)
    return args


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as typed: ``shlex.join`` of ``onchip`` and the real arguments.

    Args:
        argv: the arguments given to :func:`onchip.cli.main`; None means ``sys.argv[1:]``.
    """
    return shlex.join(["onchip", *(sys.argv[1:] if argv is None else argv)])


def build_config(cls, *, flags: dict[str, str] | None = None, **values):
    """``cls(**values)`` (then its ``validate()``, if it has one), re-raising a ValueError that starts
    with a field name as one naming its flag.

    Experiment configs validate themselves and name the field (``n_train: ...``); on the command
    line the same message names the flag (``--n-train: ...``).

    Args:
        cls: a dataclass whose construction validates it.
        flags: field -> flag where the flag is not ``--`` plus the field with dashes.
        values: the fields.

    Raises:
        ValueError: the config refused a value; the message names the flag.
    """
    try:
        config = cls(**values)
        if callable(getattr(config, "validate", None)):
            config.validate()
        return config
    except ValueError as exc:
        raise ValueError(flag_message(str(exc), [f.name for f in dataclasses.fields(cls)], flags)) from None


def flag_message(message: str, fields: Sequence[str], flags: dict[str, str] | None = None) -> str:
    """Replace a leading ``field:`` in ``message`` with the field's flag (``--field-name:``)."""
    head, sep, rest = message.partition(":")
    if sep and head in fields:
        return f"{(flags or {}).get(head, '--' + head.replace('_', '-'))}:{rest}"
    return message


# ------------------------------------------------------------------ argparse types


def output_dir(text: str) -> str:
    """argparse type of ``--out``: the folder as given, if :func:`onchip.io.check_output_dir` accepts it
    (all but the checks ``--force`` lifts, which wait until ``--force`` is parsed)."""
    from onchip.io import check_output_dir

    try:
        check_output_dir(text, changes=False)
    except (ValueError, OSError) as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--out: ")) from None
    return text


def xilinx_part(text: str) -> str:
    """argparse type of ``--part``: a name :func:`onchip.flow.vivado.check_part` accepts (what goes
    into the Vivado and Vitis HLS scripts)."""
    from onchip.flow.vivado import check_part

    try:
        return check_part(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def top_name(text: str) -> str:
    """argparse type of ``--top``: a module name :func:`onchip.hw.names.check_top` accepts."""
    from onchip.hw.names import check_top

    try:
        return check_top(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--top ")) from None


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def int_range(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer in ``[lo, hi]`` (either bound may be None)."""

    def parse(text: str) -> int:
        value = _integer(text)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text!r}")
        return value

    parse.__name__ = "int_range"
    return parse


positive_int = int_range(1)
positive_int.__doc__ = "argparse type: an integer >= 1."
nonneg_int = int_range(0)
nonneg_int.__doc__ = "argparse type: an integer >= 0."

#: Most samples a command's stream may have: its arrays are held in memory (tens of bytes a sample,
#: several arrays), so a mistyped length is refused at parse time instead of exhausting the machine.
MAX_SAMPLES = 100_000_000


def samples(lo: int = 1) -> Callable[[str], int]:
    """argparse type of a ``--samples`` stream length: an integer in ``[lo, MAX_SAMPLES]``."""
    return int_range(lo, MAX_SAMPLES)


def float_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                hi_open: bool = False) -> Callable[[str], float]:
    """argparse type: a finite float between ``lo`` and ``hi`` (closed unless ``*_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        ok = math.isfinite(value)
        if lo is not None:
            ok = ok and (value > lo if lo_open else value >= lo)
        if hi is not None:
            ok = ok and (value < hi if hi_open else value <= hi)
        if not ok:
            left = "" if lo is None else ("(" if lo_open else "[") + f"{lo:g}"
            right = "" if hi is None else f"{hi:g}" + (")" if hi_open else "]")
            bounds = (f"in {left}, {right}" if lo is not None and hi is not None
                      else f"{'>' if lo_open else '>='} {lo:g}" if lo is not None
                      else f"{'<' if hi_open else '<='} {hi:g}")
            raise argparse.ArgumentTypeError(f"must be a finite number {bounds}, got {text!r}")
        return value

    parse.__name__ = "float_range"
    return parse


probability = float_range(0.0, 1.0)
probability.__doc__ = "argparse type: a float in [0, 1]."
nonneg_float = float_range(0.0)
nonneg_float.__doc__ = "argparse type: a finite float >= 0."
positive_float = float_range(0.0, lo_open=True)
positive_float.__doc__ = "argparse type: a finite float > 0."


def int_list(lo: int | None = None, *, increasing: bool = False) -> Callable[[str], list[int]]:
    """argparse type: comma-separated integers, each >= ``lo``, strictly increasing if asked.

    Returns a list of ints (at least one).
    """

    def parse(text: str) -> list[int]:
        try:
            values = [int(s) for s in text.split(",") if s.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one integer, got {text!r}")
        if lo is not None and min(values) < lo:
            raise argparse.ArgumentTypeError(f"every value must be >= {lo}, got {text!r}")
        if increasing and any(b <= a for a, b in zip(values, values[1:])):
            raise argparse.ArgumentTypeError(f"need strictly increasing integers, got {text!r}")
        return values

    parse.__name__ = "int_list"
    return parse


def name_list(known: Sequence[str], *, all_word: str = "all") -> Callable[[str], list[str]]:
    """argparse type: comma-separated names from ``known``, or ``all_word`` for all of them (in order)."""

    def parse(text: str) -> list[str]:
        if text == all_word:
            return list(known)
        names = [m.strip() for m in text.split(",") if m.strip()]
        bad = [m for m in names if m not in known]
        if not names or bad:
            raise argparse.ArgumentTypeError(
                f"unknown value(s) {bad or text!r}; choose from {', '.join(known)} or {all_word!r}")
        return names

    parse.__name__ = "name_list"
    parse.known, parse.all_word = tuple(known), all_word  # how a command line spells every name
    return parse
