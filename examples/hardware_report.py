"""Generate a learner's RTL, synthesise it with Yosys and (optionally) place and route it.

    python examples/hardware_report.py [--quick] [--spec kan-readout] [--family ecp5|ice40]
                                       [--no-pnr] [--out DIR]

Prints latency (cycles), initiation interval, LUT/FF/DSP/BRAM and, after place and route
on a Lattice board (nextpnr), fmax and the latency in ns. ``--quick`` skips place and route
and, unless ``--spec`` is given, builds a small 8-bit 1->1 KAN that Yosys synthesises in seconds.
"""

import argparse
import json
from pathlib import Path

import onchip

#: the Lattice board place and route uses for each family
BOARD = {"ice40": "icebreaker", "ecp5": "ulx3s-85f"}


def small_kan():
    """An 8-bit 1->1 KAN with G=4 linear (k=1) spline cells on [-2, 2]."""
    return onchip.load_spec("kan-regression").replace(
        name="kan-small-8bit", grid_size=4, spline_order=1, basis_table_bits=3,
        formats=onchip.Formats.uniform(8, 3))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="synthesis only, of a small learner by default")
    ap.add_argument("--spec", help="preset name or TOML file (default: kan-readout)")
    ap.add_argument("--family", default="ecp5", choices=sorted(BOARD),
                    help="Yosys family; place and route on its board (the iCEBreaker's iCE40UP5K has 8 DSPs)")
    ap.add_argument("--no-pnr", action="store_true", help="skip place and route")
    ap.add_argument("--out", type=Path, default=Path("out/examples/hardware_report"))
    args = ap.parse_args(argv)
    if args.spec is None and args.quick:
        spec = small_kan()
    else:
        spec = onchip.load_spec(args.spec or "kan-readout")

    design = onchip.generate(spec)                       # Verilog + ports, latency and II
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{design.top}.v").write_text(design.verilog)
    info = design.info
    print(f"learner: {spec.name or spec.kind}  parameters: {spec.parameter_count()}  "
          f"schedule: {info['schedule']}")
    print(f"latency_cycles_prediction: {info['latency_cycles_prediction']}")
    print(f"latency_cycles_update: {info['latency_cycles_update']}")
    print(f"initiation_interval: {info['initiation_interval']}")

    synth = onchip.synth(spec, family=args.family, out=args.out / "synth")   # Yosys
    for key in ("lut", "ff", "dsp", "bram"):
        print(f"{key}: {synth[key]}")
    report = {"design": info, "synth": synth}

    if not (args.quick or args.no_pnr):
        board = BOARD[args.family]
        pnr = onchip.pnr(spec, board=board, out=args.out / "pnr")       # nextpnr, a bitstream
        print(f"board: {board}  fmax_mhz: {pnr['fmax_mhz']:.1f}  timing_met: {pnr['timing_met']}")
        print(f"latency_ns_update: {pnr['latency_ns_update']:.1f}  bitstream: {args.out / 'pnr' / pnr['bitstream']}")
        report["pnr"] = pnr
    (args.out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"report: {args.out / 'report.json'}")


if __name__ == "__main__":
    main()
