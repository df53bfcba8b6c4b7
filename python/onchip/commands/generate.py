"""``onchip generate``: Verilog of a learner plus a JSON of its ports, formats, latency and II."""

from __future__ import annotations

import argparse
import os

from . import _args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate the Verilog of a learner (RTL) and its JSON description",
        description="Write <top>.v (core), <top>_axis.v (AXI4-Stream wrapper), <top>.json (ports, payload "
        "fields, handshake, reset, formats, latency, II; the same facts head each Verilog file) and the "
        "instantiation templates <top>_inst.v, <top>_axis_inst.v (Verilog) and <top>_component.vhd, "
        "<top>_axis_component.vhd (VHDL component declarations) into --out.",
    )
    _args.add_spec(p)
    p.add_argument(
        "--dsp", choices=("generic", "ecp5", "ice40"), default="generic",
        help="products as generic '*' for the synthesis tool to map (default); for Lattice ECP5, "
             "the fast (or predict-first) plan's registered products as MULT18X18D instances holding their product "
             "register (Yosys does not move it into the block on ECP5), with MULT18X18D_sim.v, a "
             "simulation model of that primitive subset; for iCE40, the same products generic with "
             "their factor registers marked keep (Yosys moves the product register into SB_MAC16 and "
             "leaves the factor registers in the fabric). The compact plan registers no raw products: "
             "ecp5 or ice40 there is refused. The JSON's dsp says what the Verilog holds",
    )
    _args.add_top(p)
    _args.add_packet(p)
    _args.add_theta(p)
    _args.add_out(p)
    p.set_defaults(func=run, reports_out=True)  # names the folder in its summary line


def resolve_spec(spec_arg: str, schedule: str | None = None, staleness: str | int | None = None,
                 timing: str | None = None, channels: int | None = None, *, rtl: bool = False):
    """Load a spec and apply the --schedule / --staleness / --timing / --channels overrides.

    A ``timing`` override of a pipelined spec raises a staleness below the new
    :func:`~onchip.hw.learner.min_staleness` to it, unless ``staleness`` is given. With ``rtl`` (a
    command that builds the RTL) the generator's limits are checked too
    (:func:`onchip.hw.check_buildable`), the message naming where the field came from: ``--channels
    N`` or the spec file (``spec file PATH:``, which the command line spells ``--spec PATH:``).

    Raises:
        ValueError: a bad spec, a schedule or timing the spec cannot take, a staleness that is
            neither an integer >= 0 nor 'min', a staleness for a sequential spec, or (``rtl``) a spec
            the RTL generator does not build.
    """
    from ..hw.learner import min_staleness
    from ..spec import PRESETS, TASK_PRESETS, load_spec

    spec = load_spec(spec_arg)
    if channels is not None:
        try:
            spec = spec.replace(channels=channels)
        except ValueError as exc:
            raise ValueError(f"--channels {channels}: {exc}") from None
    if timing:
        try:
            spec = spec.replace(timing=timing)
        except ValueError as exc:
            raise ValueError(f"--timing {timing}: {exc}") from None
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
            try:
                spec = spec.replace(staleness=value)
            except ValueError as exc:
                raise ValueError(f"--staleness {staleness}: {exc}") from None
    elif timing and spec.schedule == "pipelined":
        spec = spec.replace(staleness=max(spec.staleness, min_staleness(spec)))
    elif schedule == "pipelined" and spec.staleness < (need := min_staleness(spec)):
        # the staleness is part of the learner's numbers: not raised behind the user's back, but named
        raise ValueError(f"--schedule pipelined: the spec's staleness {spec.staleness} is below the "
                         f"{need} this pipeline needs; add --staleness min (or an integer >= {need})")
    if rtl:
        from ..hw import check_buildable

        try:
            check_buildable(spec)
        except ValueError as exc:
            if channels is not None and str(exc).startswith("channels"):
                raise ValueError(f"--channels {channels}: {exc}") from None
            if isinstance(spec_arg, (str, os.PathLike)) and str(spec_arg) not in {*PRESETS, *TASK_PRESETS}:
                raise ValueError(f"spec file {spec_arg}: {exc}") from None
            raise
    return spec


def run(args: argparse.Namespace) -> int:
    from ..flow.steps import generate_to

    from ..hw.dsp import dsp_applies

    spec = resolve_spec(args.spec, args.schedule, args.staleness, args.timing, args.channels, rtl=True)
    if args.dsp != "generic" and not dsp_applies(spec):  # the Python API takes it (flows pass it at every plan)
        raise ValueError(f"--dsp {args.dsp}: the {spec.stage_timing} plan has no registered raw products to map; "
                         f"use --timing fast")
    design = generate_to(spec, args.out, top=args.top, theta=_args.load_theta(args.theta, spec),
                         dsp=None if args.dsp == "generic" else args.dsp, packet=args.packet)
    info = design.info
    print(
        f"{design.top}: {info['architecture']}; {_args.plan_words(spec, info)}, "
        f"latency to prediction {info['latency_cycles_prediction']} cycles, "
        f"to update {info['latency_cycles_update']} cycles, II {info['initiation_interval']}"
        + (f" ({info['channels']} channels in round robin; {info['initiation_interval_channel']} within a channel)"
           if info.get("channels", 1) > 1 else "") + f" -> {args.out}"
    )
    return 0
