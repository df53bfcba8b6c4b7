"""``onchip verify``: prove the generated hardware of a spec equals the golden model (for CI)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from . import _args

DESCRIPTION = """Generate the learner of --spec and check it against the golden model: the cocotb
bench on Verilator (random valid/ready stalls, a reset in mid-stream, parameter read-back and a
checkpoint/restore, latency and II against the generator's report) and the HLS C simulation,
over a corner-case stream (or a task's). With --formal, SymbiYosys also proves the stream protocol
of the core and of its AXI4-Stream wrapper for every input and every cycle (k-induction), proves
(or bounds) that s ready rises when the reload ends and a prediction leaves within its reported
latency, reaches covers a working core must reach (a sample accepted, a prediction delivered, an
update committed, a parameter written and read back; an unreachable one fails), checks the
parameter read-back to a bound, and with --equivalence SECONDS compares the fast and compact
timing plans: to the bound it reaches from reset (a bounded result is reported with its bound,
never as proved), and item by item, proved for every parameter state and every sample or
command offered to an idle core. Exit status 0 only when every check that ran matched,
1 on a mismatch or a tool failure (the first one is printed), 2 on bad input. A backend whose
tool is not installed is reported as skipped, never as passed."""

#: verify() argument -> flag, for its error messages
FLAGS = {"samples": "--samples", "seed": "--seed", "stream": "--stream", "data": "--data", "backends": "--backends",
         "theta": "--theta", "equivalence": "--equivalence"}


def junit_path(text: str) -> str:
    """argparse type of ``--junit``: a file path whose folder exists and which is not a folder."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; name the XML file")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"the folder of {text!r} does not exist")
    # checked now, not when the report is written after minutes of verification
    # (a trial file, not os.access: root passes os.access on read-only file systems such as /sys)
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not writable")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: the folder {str(folder)!r} is not writable "
                                         f"({exc.strerror})") from None
    return text


def add_parser(sub) -> None:
    from ..verification import VERIFY_BACKENDS

    p = sub.add_parser("verify", help="verify the generated RTL and HLS of a spec against the golden model",
                       description=DESCRIPTION)
    _args.add_spec(p)
    _args.add_top(p)
    _args.add_theta(p)
    p.add_argument("--samples", type=_args.samples(8), default=2000, help="stream length (default: %(default)s)")
    _args.add_seed(p, what="the stream and the bench's random stalls")
    p.add_argument("--stream", default="random",
                   help="'random' (full-range, grid-edge, out-of-grid inputs and saturating targets) or a "
                        "task name: drift-regression, qubit-readout (default: %(default)s)")
    p.add_argument("--data", default=None, help="readout shots .npy for --stream qubit-readout")
    p.add_argument("--backends", type=_args.name_list(VERIFY_BACKENDS), default=["rtl", "hls"],
                   help="comma-separated: rtl (cocotb on Verilator), icarus (cocotb on Icarus), hls "
                        "(C simulation), or 'all' (default: rtl,hls)")
    p.add_argument("--formal", action="store_true",
                   help="also run the formal backend: protocol proofs by k-induction (core and AXI wrapper), "
                        "response bounds, covers that must be reached, the read-back checked to a bound "
                        "(SymbiYosys + Yices 2, from pip)")
    p.add_argument("--equivalence", type=_args.float_range(0.0), default=0.0, metavar="SECONDS",
                   help="with --formal: seconds to spend comparing timing fast and compact to a bound, for "
                        "each of two hosts (any commands, and reads only), and per solver query of the "
                        "item-by-item proof (default: %(default)s, not compared)")
    p.add_argument("--waves", action="store_true",
                   help="dump the bench as FST (VCD without liblz4-dev); its path is named in a mismatch "
                        "and copied into --out")
    p.add_argument("--junit", type=junit_path, default=None, help="write a JUnit XML report to this file")
    p.add_argument("--out", type=_args.output_dir, default=None,
                   help="write report.json and junit.xml into this folder (replaced whole; optional)")
    _args.add_force(p)
    _args.add_quiet(p)
    p.set_defaults(func=run, reports_out=True)


def resolve(args):
    """The spec ``--theta`` is read for: ``--spec`` with ``--channels`` (the shape it takes)."""
    from ..spec import load_spec

    spec = load_spec(args.spec)
    return spec if args.channels is None else spec.replace(channels=args.channels)


def run(args) -> int:
    import shutil

    from ..io import atomic_output_dir, write_json
    from ..verification import verify

    backends = tuple(args.backends)
    if args.formal and "formal" not in backends:
        backends += ("formal",)
    if args.equivalence and "formal" not in backends:
        raise ValueError(f"--equivalence: compares with the formal backend; add --formal (got {args.equivalence})")
    try:
        report = verify(args.spec, samples=args.samples, seed=args.seed, stream=args.stream, data=args.data,
                        backends=backends, schedule=args.schedule, staleness=args.staleness,
                        timing=args.timing, waves=args.waves, progress=not args.quiet, top=args.top,
                        theta=_args.load_theta(args.theta, resolve(args)), equivalence=args.equivalence,
                        channels=args.channels)
    except ValueError as exc:
        message = _args.flag_message(str(exc), list(FLAGS), FLAGS)
        # "spec file PATH:" is left to the command line's "--spec PATH:" (onchip.cli._as_flag)
        if message == str(exc) and not message.startswith(("--", "spec file ")) \
                and "spec" in message.split(":")[0]:
            message = f"--spec: {message}"
        raise ValueError(message) from None
    except FileNotFoundError as exc:
        raise FileNotFoundError(_args.flag_message(str(exc), list(FLAGS), FLAGS)) from None
    print(report.summary())
    if args.junit:
        report.to_junit(args.junit)
        print(f"wrote {args.junit}")
    if args.out:
        with atomic_output_dir(args.out) as stage:
            data = report.to_dict()
            data["command"] = getattr(args, "command_line", None)
            if report.waves and not report.ok:
                dump = Path(report.waves)
                shutil.copy2(dump, stage / dump.name)
                data["waves_copy"] = dump.name
            traces = {}
            for case in report.cases:  # the counterexample of every failed property, beside the report
                trace = (case.mismatch or {}).get("trace")
                if trace and Path(trace).exists():
                    name = f"{case.name}.vcd"
                    shutil.copy2(trace, stage / name)
                    traces[case.name] = name
            if traces:
                data["trace_copies"] = traces
            write_json(stage / "report.json", data)
            report.to_junit(stage / "junit.xml")
        print(f"wrote {args.out}/")
    return 0 if report.ok else 1
