"""``onchip vivado``: Vivado project scripts for a part (out of context) or a Xilinx board."""

from __future__ import annotations

from . import _args

DESCRIPTION = """Write a Vivado project that a user with Vivado runs with one command (sh run.sh):
for --part, out-of-context synthesis + implementation of the learner core with utilisation
and timing reports; for --board, the UART board top with the board's constraints, ending in
a bitstream. Vivado is not run here (this path is untested on this machine)."""


def add_parser(sub) -> None:
    from ..flow.boards import BOARDS
    from ..flow.vivado import DEFAULT_PART

    xilinx = [n for n, b in BOARDS.items() if b.vendor == "xilinx"]
    p = sub.add_parser("vivado", help="Vivado project scripts (part OOC or board bitstream)", description=DESCRIPTION)
    p.add_argument("--spec", required=True, help="a preset name or a TOML spec file")
    p.add_argument("--part", default=DEFAULT_PART, help=f"Xilinx part (default {DEFAULT_PART})")
    p.add_argument("--board", default=None, choices=xilinx, help="a Xilinx board instead of a bare part")
    p.add_argument("--clock-mhz", type=float, default=200.0, help="clock constraint of the part flow")
    _args.add_out(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def run(args) -> int:
    from ..flow.steps import vivado

    manifest = vivado(args.spec, out=args.out, part=args.part, board=args.board, clock_mhz=args.clock_mhz)
    print(f"wrote {args.out}/ ({manifest['part']}); run it with: cd {args.out} && sh run.sh")
    return 0
