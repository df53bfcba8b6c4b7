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
    p.set_defaults(func=run)


def run(args) -> int:
    from ..flow.boards import get_board
    from ..flow.vivado import check_part, write_board_project, write_part_project
    from ..hw import generate
    from ..io import atomic_output_dir, write_json
    from ..spec import load_spec

    spec = load_spec(args.spec)
    if args.board is not None:
        get_board(args.board, vendor="xilinx")
    else:
        check_part(args.part)
    design = generate(spec, axis=False)
    with atomic_output_dir(args.out) as stage:
        if args.board is not None:
            manifest = write_board_project(design, args.board, stage)
        else:
            manifest = write_part_project(design, stage, args.part, args.clock_mhz)
        manifest["latency_cycles_update"] = design.info["latency_cycles_update"]
        manifest["initiation_interval"] = design.info["initiation_interval"]
        write_json(stage / "manifest.json", manifest)
        (stage / "spec.toml").write_text(spec.to_toml())
    print(f"wrote {args.out}/ ({manifest['part']}); run it with: cd {args.out} && sh run.sh")
    return 0
