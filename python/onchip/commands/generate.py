"""``onchip generate``: Verilog of a learner plus a JSON of its ports, formats, latency and II."""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate the Verilog of a learner (RTL) and its JSON description",
        description="Write <top>.v (core), <top>_axis.v (AXI4-Stream wrapper) and <top>.json "
        "(ports, payload fields, formats, latency, II) into --out.",
    )
    p.add_argument("--spec", required=True, help="a preset name or a TOML spec file")
    _args.add_out(p)
    p.add_argument("--schedule", choices=("sequential", "pipelined"), help="override the spec's schedule")
    p.add_argument(
        "--staleness",
        help="override the pipelined staleness D: an integer, or 'min' for the smallest the pipeline allows",
    )
    p.set_defaults(func=run, reports_out=True)  # names the folder in its summary line


def resolve_spec(spec_arg: str, schedule: str | None = None, staleness: str | int | None = None):
    """Load a spec and apply the --schedule / --staleness overrides.

    Raises:
        ValueError: a bad spec, a schedule the spec cannot take, a staleness that is neither an
            integer >= 0 nor 'min', or a staleness for a sequential spec.
    """
    from ..hw.learner import min_staleness
    from ..spec import load_spec

    spec = load_spec(spec_arg)
    if schedule:
        try:
            spec = spec.replace(schedule=schedule)
        except ValueError as exc:
            raise ValueError(f"--schedule {schedule}: {exc}") from None
    if staleness is not None and spec.schedule != "pipelined":
        raise ValueError(f"--staleness {staleness} applies to the pipelined schedule; the spec's schedule "
                         f"is {spec.schedule!r} (add --schedule pipelined)")
    if staleness is not None:
        if str(staleness) == "min":
            spec = spec.replace(staleness=min_staleness(spec))
        else:
            try:
                value = int(staleness)
            except ValueError:
                raise ValueError(f"--staleness must be an integer >= 0 or 'min', got {staleness!r}") from None
            spec = spec.replace(staleness=value)
    return spec


def run(args: argparse.Namespace) -> int:
    from ..flow.steps import generate_to

    design = generate_to(resolve_spec(args.spec, args.schedule, args.staleness), args.out)
    info = design.info
    print(
        f"{design.top}: {info['datapath']} datapath, {info['schedule']} (staleness {info['staleness']}), "
        f"latency to prediction {info['latency_cycles_prediction']} cycles, "
        f"to update {info['latency_cycles_update']} cycles, II {info['initiation_interval']} -> {args.out}"
    )
    return 0
