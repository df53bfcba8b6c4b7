"""``onchip`` command line: discovers the sub-commands in :mod:`onchip.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import textwrap
import warnings

from . import __version__, commands
from .extras import extra_for, install_hint
from .interrupts import handled, status


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line: ``onchip <command>: error: --flag: reason``.

    Sub-parsers inherit the class, so every sub-command reports a bad flag the way
    :func:`main` reports a ValueError of a command's own checks.
    """

    def error(self, message: str):
        """Print ``message`` on one line to stderr and exit with status 2."""
        message = message.removeprefix("argument ")
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: ``onchip --help`` lists the commands in these groups, in this order; every other command is a
#: seed-method baseline (the ``methods`` extra) and is listed after them, in its own group
GROUPS = (
    ("learner", ("run", "import")),
    ("hardware", ("generate", "synth", "pnr", "vivado", "vivado-report", "hls", "verify")),
    ("sweeps", ("sweep",)),
)
#: the seed methods that run with the core install alone (numpy and scipy); every other one needs
#: the ``methods`` extra and says so in one line without it
CORE_METHODS = ("ais",)
SEED_GROUP = (f'seed methods (software baselines; pip install "onchip[methods]" with the CPU index of torch, '
              f'except for {", ".join(CORE_METHODS)})')


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every sub-command module registered (modules named ``_*`` are helpers).

    Its help lists the commands grouped (:data:`GROUPS`, then the seed methods), each with the
    one-line purpose its module registers.
    """
    parser = Parser(
        prog="onchip",
        description="Fixed-point online learners (KAN, MLP) as verified FPGA hardware.",
        usage="onchip [-h] [--version] COMMAND ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"onchip {__version__}")
    # argparse cannot group sub-commands: the listing is hidden here and written as the epilog
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, help=argparse.SUPPRESS,
                                prog="onchip")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.add_parser(sub)
    #: command name -> (its one-line purpose, its parser); read by the generated CLI reference
    parser.commands = {action.dest: (action.help or "", sub.choices[action.dest])
                       for action in sub._get_subactions()}
    parser.epilog = _grouped_listing(parser.commands) + "\n\nonchip COMMAND --help describes a command's flags."
    return parser


def is_seed_method(command: str) -> bool:
    """True for a seed-method command (not in any of :data:`GROUPS`)."""
    return not any(command in names for _, names in GROUPS)


def command_groups(names) -> list[tuple[str, list[str]]]:
    """``[(group title, [command, ...]), ...]`` in ``onchip --help`` order, for the commands in ``names``."""
    core = [(title, [n for n in group if n in names]) for title, group in GROUPS]
    return [*core, (SEED_GROUP, sorted(n for n in names if is_seed_method(n)))]


def _grouped_listing(commands: dict[str, tuple]) -> str:
    purposes = {name: purpose for name, (purpose, _) in commands.items()}
    width = max(map(len, purposes)) + 2
    blocks = []
    for title, names in command_groups(purposes):
        lines = [f"{title}:"]
        for name in names:
            lines.append(textwrap.fill(purposes[name], 100, initial_indent=f"  {name:<{width}}",
                                       subsequent_indent=" " * (width + 2)))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def reference_markdown() -> str:
    """The command-line reference as Markdown, from the parsers themselves (the docs build
    writes it into ``docs/cli.md``, so a new flag appears there without anyone writing it down).

    Returns:
        One section per command, in ``onchip --help`` order: its purpose and its ``--help``
        text, 100 columns wide.
    """
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal; the page must not depend on it
    try:
        parser = build_parser()
        parts = ["```text", parser.format_help().rstrip(), "```"]
        for title, names in command_groups(parser.commands):
            parts.append(f"## {title[0].upper()}{title[1:]}")
            for name in names:
                purpose, sub = parser.commands[name]
                parts += [f"### onchip {name}", "", f"{purpose[0].upper()}{purpose[1:]}.", "",
                          "```text", sub.format_help().rstrip(), "```", ""]
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit status (2 for bad input, 0 after ``--help``).

    An interrupt returns 130 (Ctrl-C) or 143 (SIGTERM) wherever it lands, and the last line says
    what ``--out`` holds: ``interrupted; nothing was written`` before the output folder was
    committed (the folder is as it was), ``interrupted; OUT/ was already written whole`` after.
    Run as the program (``argv`` None), a signal arriving after this function has returned is
    reported the same way (:func:`_late_interrupts`)."""
    words = sys.argv[1:] if argv is None else argv
    # the command as typed names an interrupt that lands while the parser is still being built
    who = f"onchip {words[0]}" if words and not str(words[0]).startswith("-") else "onchip"
    committed, given = [], None
    # a scheduler's SIGTERM unwinds like Ctrl-C, so staging folders are removed; either is kept
    # until unwound, so one swallowed on the way is raised again (onchip.interrupts). From the
    # start: the imports below and building the parser (every command) take about 1 s
    try:
        with handled():
            from .commands._args import command_line
            from .io import output_policy

            parser = build_parser()
            try:
                args, unknown = parser.parse_known_args(argv)
                if unknown:  # named against the command they were given to, not against onchip
                    parser.commands[args.command][1].error(f"unrecognized arguments: {' '.join(unknown)}")
            except SystemExit as exc:  # a bad flag (2) or --help/--version (0): a status, also for callers in Python
                code = exc.code if isinstance(exc.code, int) else 2
            else:
                who, given = f"onchip {args.command}", getattr(args, "out", None)
                # recorded in the outputs (metrics.json "command"): the arguments as they were given
                args.command_line = command_line(argv)
                args.flag_names = _flag_names(parser.commands[args.command][1])
                with output_policy(who, force=getattr(args, "force", False)) as committed:
                    code = _run(args)
    except KeyboardInterrupt as exc:
        print(f"{who}: interrupted; {_written(committed, given)}", file=sys.stderr)
        if "amaranth.hdl" in sys.modules:  # the designs cut off before elaboration would each warn after this line
            warnings.filterwarnings("ignore", category=sys.modules["amaranth.hdl"].UnusedElaboratable)
        code = status(exc)
    if argv is None:
        _late_interrupts(who, committed, given)
    return code


def _written(committed, given) -> str:
    # what an interrupted command leaves: the folders it committed (as the user named --out), or nothing
    if not committed:
        return "nothing was written"
    from pathlib import Path

    names = [given if given and Path(given).resolve() == path else str(path) for path in committed]
    return f"{', '.join(name.rstrip('/') + '/' for name in names)} {'was' if len(names) == 1 else 'were'} " \
           f"already written whole"


def _late_interrupts(who: str, committed, given) -> None:
    """From here to the process's exit (its return, the interpreter's shutdown), Ctrl-C and SIGTERM
    end it as inside :func:`main`: the line saying what was written, status 130 or 143."""
    import signal

    def late(signum, frame):
        sys.stdout.flush()
        print(f"{who}: interrupted; {_written(committed, given)}", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) in (signal.default_int_handler, signal.SIG_DFL):  # an ignored one stays ignored
            signal.signal(s, late)


def _flag_names(parser) -> dict[str, str]:
    """``{dest: "--flag"}`` for the long options of a command's parser."""
    return {a.dest: long[0] for a in parser._actions
            if (long := [o for o in a.option_strings if o.startswith("--")])}


def _as_flag(message: str, flags: dict[str, str]) -> str:
    """A message from the Python API that starts ``name:`` (a keyword argument) or ``name file
    PATH:`` (a file it read) with the name respelled as the command's flag (``samples:`` ->
    ``--samples:``, ``spec file s.toml:`` -> ``--spec s.toml:``), so that one command names its
    fields and files one way (``--theta t.npy:``)."""
    head, sep, rest = message.partition(":")
    name, file, path = head.partition(" file ")
    if not sep or name not in flags:
        return message
    if file and path:
        return f"{flags[name]} {path}:{rest}"
    return f"{flags[name]}:{rest}" if head == name else message


def _run(args) -> int:
    try:
        if getattr(args, "out", None) and hasattr(args, "force"):  # the checks --force lifts, now it is parsed
            from .io import check_output_dir

            check_output_dir(args.out)
        status = int(args.func(args) or 0)
        # every command that writes a folder names it last, --quiet included (unless it already did)
        out = getattr(args, "out", None)
        if status == 0 and out and not getattr(args, "reports_out", False) and os.path.isdir(out):
            print(f"wrote {out}/")
        return status
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, PermissionError) as exc:
        print(f"onchip {args.command}: error: {_as_flag(str(exc), getattr(args, 'flag_names', {}))}",
              file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional package, reported with the extra that installs it
        extra = "methods" if is_seed_method(args.command) else extra_for(exc)
        if extra is None:
            raise
        print(f'onchip {args.command}: needs the "{extra}" extra (no module {exc.name!r}): '
              f'{install_hint(extra)}', file=sys.stderr)
        return 2
    except _tool_errors() as exc:
        print(f"onchip {args.command}: tool failed: {exc}", file=sys.stderr)
        return 1


def _tool_errors() -> tuple[type, ...]:
    """Failures of the external tools (HDL conversion, and every :class:`onchip.ToolError`:
    Verilator, Yosys/nextpnr, the g++ build and the C simulation of the HLS C++): reported in
    one line with the tool's own message, exit status 1, not as a traceback."""
    from amaranth.back.verilog import YosysError

    from .errors import ToolError

    return (YosysError, ToolError)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
