"""``onchip vivado-report DIR``: the reports of a Vivado run of an ``onchip vivado`` folder -> DIR/report.json."""

from __future__ import annotations

DESCRIPTION = """Read what a Vivado run (sh run.sh) of a folder written by onchip vivado left there:
report_timing_summary (WNS/TNS/WHS, the clock's period, the worst setup path with its start
and end registers named after the learner's signals and its delay split into logic and
route) and report_utilization (LUT, FF, LUTRAM, DSP, Block RAM tiles with RAMB36/RAMB18,
URAM). Writes DIR/report.json with fmax = 1000 / (period - WNS) MHz and the learner's
latency in ns (cycles * 1000 / fmax). A missing or malformed report is an error naming the
file. hw/README.md (section "Xilinx boards and Vivado IP")."""


def add_parser(sub) -> None:
    """Register ``onchip vivado-report``."""
    p = sub.add_parser("vivado-report", help="parse a Vivado run's timing and utilisation reports into report.json",
                       description=DESCRIPTION)
    p.add_argument("dir", metavar="DIR", help="a folder written by onchip vivado, after sh run.sh")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..flow.vivado_report import vivado_report

    r = vivado_report(args.dir)
    path = r["worst_path"]
    where = (f"; worst path {path['start']['signal']} -> {path['end']['signal']}: logic {path['logic_ns']:.3f} ns, "
             f"route {path['route_ns']:.3f} ns") if path and path.get("logic_ns") is not None else ""
    print(f"{r.get('board') or r['part']}: WNS {r['wns_ns']:.3f} ns at {r['clock_mhz']:.1f} MHz "
          f"({'met' if r['timing_met'] else 'NOT met'}), fmax {r['fmax_mhz']:.1f} MHz, update latency "
          f"{r['latency_cycles_update']} cycles = {r['latency_ns_update']:.1f} ns{where}")
    print(f"LUT {r['lut']}, FF {r['ff']}, DSP {r['dsp']}, BRAM {r['bram']} (RAMB36), LUTRAM {r['lutram']}")
    print(f"wrote {args.dir}/report.json")
    return 0
