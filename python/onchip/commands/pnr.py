"""``onchip pnr``: bitstream, fmax and utilisation on a Lattice board (open flow)."""

from __future__ import annotations

from . import _args

DESCRIPTION = """Put the learner core in a UART board top, build it with Amaranth's Lattice plan run by
the YoWASP tools (yosys, nextpnr-ecp5 + ecppack or nextpnr-ice40 + icepack) and write the
bitstream, the build logs and report.json (fmax from nextpnr, utilisation, latency in ns =
cycles / fmax, and the critical path: start and end registers named after the learner's
signals and stages, logic and routing ns) into --out. On ECP5 the fast plan's products are
MULT18X18D instances holding their product register (onchip generate --dsp ecp5); on iCE40
their factor registers stay out of SB_MAC16 (--dsp ice40). Stream protocol and tool costs:
hw/README.md (section "Feeding a stream to a board")."""


def add_parser(sub) -> None:
    from ..flow.boards import BOARDS, DEFAULT_BAUD

    lattice = [n for n, b in BOARDS.items() if b.vendor == "lattice"]
    p = sub.add_parser("pnr", help="Lattice place and route: bitstream, fmax, utilisation", description=DESCRIPTION)
    _args.add_spec(p)
    _args.add_top(p, "the core module (not top: the board top's name)")
    _args.add_theta(p)
    p.add_argument("--board", default="ulx3s-85f", choices=lattice,
                   help="the Lattice board whose UART top is built (default: %(default)s)")
    p.add_argument("--baud", type=_args.int_range(1200), default=DEFAULT_BAUD,
                   help="UART rate of the board top, bit/s, >= 1200 (default: %(default)s)")
    _args.add_seed(p, default=1, what="the nextpnr placer")
    _args.add_out(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def run(args) -> int:
    from ..flow.steps import pnr
    from .generate import resolve_spec

    spec = resolve_spec(args.spec, args.schedule, args.staleness, args.timing, args.channels, rtl=True)

    report = pnr(spec, out=args.out, board=args.board, baud=args.baud, seed=args.seed, top=args.top,
                 theta=_args.load_theta(args.theta, spec))
    print(f"{args.board} ({_args.plan_words(spec, report)}): fmax {report['fmax_mhz']:.1f} MHz (board clock {report['clock_mhz']:.0f} MHz, "
          f"{'met' if report['timing_met'] else 'NOT met'}), update latency {report['latency_cycles_update']} "
          f"cycles = {report['latency_ns_update']:.1f} ns")
    cp = report["critical_path"]
    name = lambda end: end["signal"] or end["cell"]  # noqa: E731
    print(f"critical path {cp['total_ns']:.2f} ns: {name(cp['start'])} -> {name(cp['end'])} "
          f"(logic {cp['logic_ns']:.2f} ns, routing {cp['routing_ns']:.2f} ns"
          + (f", through {', '.join(cp['hard_blocks'])}" if cp["hard_blocks"] else "") + ")")
    print(f"wrote {args.out}/ ({report['bitstream']}, report.json)")
    return 0
