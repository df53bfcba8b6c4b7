"""``onchip verify``: prove the generated hardware of a spec equals the golden model (for CI)."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import _args

DESCRIPTION = """Generate the learner of --spec and check it against the golden model: the cocotb
bench on Verilator (random valid/ready stalls, a reset in mid-stream, parameter read-back and a
checkpoint/restore, latency and II against the generator's report) and the HLS C simulation,
over a corner-case stream (or a task's). Exit status 0 only when every check that ran matched,
1 on a mismatch or a tool failure (the first one is printed), 2 on bad input. A backend whose
tool is not installed is reported as skipped, never as passed."""

#: verify() argument -> flag, for its error messages
FLAGS = {"samples": "--samples", "seed": "--seed", "stream": "--stream", "data": "--data", "backends": "--backends",
         "theta": "--theta"}


def junit_path(text: str) -> str:
    """argparse type of ``--junit``: a file path whose folder exists and which is not a folder."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; name the XML file")
    if not path.resolve().parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder of {text!r} does not exist")
    return text


def add_parser(sub) -> None:
    from ..verification import VERIFY_BACKENDS

    p = sub.add_parser("verify", help="verify the generated RTL and HLS of a spec against the golden model",
                       description=DESCRIPTION)
    _args.add_spec(p)
    _args.add_top(p)
    _args.add_theta(p)
    p.add_argument("--samples", type=_args.int_range(8), default=2000, help="stream length (default: %(default)s)")
    _args.add_seed(p, what="the stream and the bench's random stalls")
    p.add_argument("--stream", default="random",
                   help="'random' (full-range, grid-edge, out-of-grid inputs and saturating targets) or a "
                        "task name: drift-regression, qubit-readout (default: %(default)s)")
    p.add_argument("--data", default=None, help="readout shots .npy for --stream qubit-readout")
    p.add_argument("--backends", type=_args.name_list(VERIFY_BACKENDS), default=["rtl", "hls"],
                   help="comma-separated: rtl (cocotb on Verilator), icarus (cocotb on Icarus), hls "
                        "(C simulation), or 'all' (default: rtl,hls)")
    p.add_argument("--waves", action="store_true",
                   help="dump the bench as FST (VCD without liblz4-dev); its path is named in a mismatch "
                        "and copied into --out")
    p.add_argument("--junit", type=junit_path, default=None, help="write a JUnit XML report to this file")
    p.add_argument("--out", type=_args.output_dir, default=None,
                   help="write report.json and junit.xml into this folder (replaced whole; optional)")
    _args.add_quiet(p)
    p.set_defaults(func=run, reports_out=True)


def run(args) -> int:
    import shutil

    from ..io import atomic_output_dir, write_json
    from ..verification import verify

    try:
        report = verify(args.spec, samples=args.samples, seed=args.seed, stream=args.stream, data=args.data,
                        backends=tuple(args.backends), schedule=args.schedule, staleness=args.staleness,
                        timing=args.timing, waves=args.waves, progress=not args.quiet, top=args.top,
                        theta=_args.load_theta(args.theta, args.spec))
    except ValueError as exc:
        message = _args.flag_message(str(exc), list(FLAGS), FLAGS)
        if message == str(exc) and not message.startswith("--") and "spec" in message.split(":")[0]:
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
            write_json(stage / "report.json", data)
            report.to_junit(stage / "junit.xml")
        print(f"wrote {args.out}/")
    return 0 if report.ok else 1
