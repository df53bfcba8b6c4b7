"""``onchip vivado``: Vivado project scripts for a part (out of context), a Xilinx board, or an IP."""

from __future__ import annotations

from . import _args

DESCRIPTION = """Write a Vivado project that a user with Vivado runs with one command (sh run.sh):
for --part, out-of-context synthesis + implementation of the learner core with utilisation
and timing reports; for a UART --board (arty-a7-*), the UART board top with the board's
constraints, ending in a bitstream; for an AXI4-Stream --board (rfsoc4x2, redpitaya-125-14,
kcu105, zcu102), the AXI4-Stream learner out of context on the board's part; with --ip, a
script that packages the AXI4-Stream learner as a Vivado IP for a block design. Every folder
also holds the learner's JSON description and its Verilog and VHDL instantiation templates, and
the JSON and Verilog headers give the clock the flow constrains. Without --part or --board the
default part (--part's help names it) is used and named in the last line. After a run,
`onchip vivado-report DIR` reads the timing and utilisation reports into DIR/report.json.
First, Yosys counts the core's LUT, FF, DSP and BRAM for the part's family and a design larger
than a known part (the default part and the boards' parts) is refused, naming each resource.
Vivado is not run here (this path is untested on this machine): hw/README.md (section
"Xilinx boards and Vivado IP")."""


def add_parser(sub) -> None:
    from ..flow.vivado import DEFAULT_CLOCK_MHZ, DEFAULT_PART, xilinx_boards

    p = sub.add_parser("vivado", help="Vivado project scripts (part OOC, board, or IP packaging)",
                       description=DESCRIPTION)
    _args.add_spec(p)
    _args.add_top(p, "the core module (the IP and the AXI4-Stream learner are <top>_axis)")
    _args.add_theta(p)
    p.add_argument("--part", type=_args.xilinx_part, default=None, help=f"Xilinx part (default {DEFAULT_PART})")
    p.add_argument("--board", default=None, choices=xilinx_boards(), help="a Xilinx board instead of a bare part")
    p.add_argument("--clock-mhz", type=_args.float_range(0, 1000, lo_open=True), default=None,
                   help=f"clock constraint of the out-of-context flows (default {DEFAULT_CLOCK_MHZ:g}); with --ip, "
                        "the FREQ_HZ of the IP's aclk (default: none, the block design's)")
    p.add_argument("--ip", action="store_true",
                   help="package the AXI4-Stream learner as a Vivado IP (for --part or the --board's part)")
    p.add_argument("--no-fit-check", dest="fit_check", action="store_false",
                   help="skip the fit check (the core's Yosys count against the part's LUT, FF, DSP and "
                        "BRAM, a minute or two per design, cached) that refuses a design too large for "
                        "the part before anything is written")
    _args.add_packet(p)
    _args.add_out(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def fit_line(fit: dict) -> str:
    """The console line of the fit check: used/available per resource, or why it was not run."""
    if fit.get("checked"):
        use = ", ".join(f"{k.upper()} {fit['used'][k]:g}/{fit['available'][k]}" for k in ("dsp", "bram", "lut", "ff"))
        return f"fits the {fit['device']} (Yosys {fit['family']} count of the core, used/available): {use}"
    return f"fit check not run: {fit['reason']}"


def run(args) -> int:
    from ..flow.steps import vivado
    from .generate import resolve_spec

    spec = resolve_spec(args.spec, args.schedule, args.staleness, args.timing, args.channels, rtl=True)

    manifest = vivado(spec, out=args.out, part=args.part, board=args.board, clock_mhz=args.clock_mhz,
                      ip=args.ip, top=args.top, theta=_args.load_theta(args.theta, spec),
                      fit_check=args.fit_check, packet=args.packet)
    print(fit_line(manifest["fit"]))
    part = manifest["part"] + (": the default part, as neither --part nor --board was given"
                               if manifest["part_from"] == "default" else "")
    print(f"wrote {args.out}/ (part {part}); run it with: cd {args.out} && sh run.sh")
    return 0
