"""Register stages against nanoseconds: ``timing`` x schedule x learner on ECP5 (placed) and xcup (Yosys).

The learners ("members"): the presets, the acrobot task specs, and the user-like specs of the
family in ``family/*.toml`` (KANs of 1-3 layers, widths up to 4, G 4-32, k 1-3, formats 8-18
bits; MLPs up to 2->16->1 and the serial MLP). For every (member, timing, schedule) point: the RTL core's cycles (update latency, II) from
:func:`onchip.hw.generate`; fmax, LUT, FF and DSP after nextpnr-ecp5 places and routes the
UART board top on the ULX3S 85F (:func:`onchip.flow.nextpnr.place_and_route`, a real
bitstream each run), best of the placer seeds run; the block RAMs (DP16KD) from Yosys's ECP5
synthesis of the core as the board builds it (``synth_ecp5``: the count nextpnr places; seed-free);
LUT/FF/DSP of the core on UltraScale+ from Yosys (:func:`onchip.flow.yosys.synthesize`, not placed). One online step (predict + update of
one sample) takes ``latency_cycles_update / fmax`` ns; a new sample can come every
``II / fmax`` ns.

Runs are kept in ``runs.json`` next to this script (one entry per place-and-route run and per
synthesis, with a hash of the core's Verilog), so a rerun only does what is missing or what was
run on a design that has changed since; ``--report`` rewrites ``results.md``, ``results.json``,
``timing.png``, the top-level README's preset table and the family table of this folder's README from
the runs of the current designs.

Usage (about 4-8 minutes per place-and-route run on a loaded 2-core machine)::

    python sweeps/timing/timing_sweep.py --seeds 1 2 3 --only kan-paper/*/sequential kan-readout/*/pipelined
    python sweeps/timing/timing_sweep.py --seeds 1          # every point, one seed
    python sweeps/timing/timing_sweep.py --report
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs.json"
BOARD = "ulx3s-85f"
FAMILY = HERE / "family"
PRESETS = ("kan-paper", "kan-readout", "mlp-readout")
#: the acrobot task specs (onchip.spec.TASK_PRESETS) placed with the presets
TASKS = ("kan-acrobot", "kan2-acrobot", "mlp-acrobot")
MEMBERS = PRESETS + TASKS + tuple(sorted(p.stem for p in FAMILY.glob("*.toml")))
TIMINGS = ("compact", "fast")
SCHEDULES = ("sequential", "pipelined")
#: the members also placed at ``timing = "predict-first"`` (one-layer KANs: the fewest cycles to a prediction)
PREDICT_FIRST = ("kan-readout",)
#: the paper's headline: an online step in under 100 ns
TARGET_NS = 100.0


def point_spec(preset: str, timing: str, schedule: str):
    """The member at ``timing`` in ``schedule``; pipelined at the smallest staleness its pipeline allows
    (the ``--timing`` / ``--schedule`` overrides of ``onchip generate``).

    Raises:
        onchip.SpecError / ValueError: the spec refuses that point (the serial datapaths are
            sequential).
    """
    from onchip.commands.generate import resolve_spec

    family = FAMILY / f"{preset}.toml"
    source = str(family) if family.exists() else preset  # a member of the family, else onchip's preset
    return resolve_spec(source, schedule, "min" if schedule == "pipelined" else None, timing)


def refusal(preset: str, timing: str, schedule: str) -> str | None:
    """Why the spec refuses the point (its one-line error), or None."""
    try:
        point_spec(preset, timing, schedule)
    except ValueError as exc:
        return str(exc)
    return None


def point_design(preset: str, timing: str, schedule: str, placed: bool = False, board: str = BOARD):
    """The point's core (:func:`onchip.hw.generate`); ``placed``: as ``onchip pnr`` builds it for ``board``
    (on ECP5 the ``fast`` plan's products are MULT18X18D instances holding their product registers)."""
    from onchip.flow.boards import get_board
    from onchip.flow.steps import family_dsp
    from onchip.hw import generate

    dsp = family_dsp(get_board(board).family) if placed else None
    return generate(point_spec(preset, timing, schedule), axis=False, dsp=dsp)


def design_hash(preset: str, timing: str, schedule: str, placed: bool = False, board: str = BOARD) -> str:
    """First 12 hex digits of the SHA-256 of the point's core Verilog (``placed``: the placed variant,
    :func:`point_design`), without its descriptive header (which names the onchip version): a run of
    another design is stale. ``refused-<digest of the spec's error>`` for a refused point: a record of
    another refusal message is stale too."""
    from onchip.hw.description import strip_header

    why = refusal(preset, timing, schedule)
    if why is not None:
        return "refused-" + hashlib.sha256(why.encode()).hexdigest()[:8]
    verilog = strip_header(point_design(preset, timing, schedule, placed, board).verilog)
    return hashlib.sha256(verilog.encode()).hexdigest()[:12]


def cycles(preset: str, timing: str, schedule: str) -> dict:
    why = refusal(preset, timing, schedule)
    if why is not None:
        return {"refused": why}
    info = point_design(preset, timing, schedule).info
    return {"latency_cycles_update": info["latency_cycles_update"], "initiation_interval": info["initiation_interval"],
            "latency_cycles_prediction": info["latency_cycles_prediction"], "staleness": info["staleness"]}


def run_pnr(preset: str, timing: str, schedule: str, seed: int, **flow) -> dict:
    """One nextpnr-ecp5 run: fmax, utilisation and the critical path; ``{"does_not_fit": message}`` for a
    design over the device's budget (refused after packing, :mod:`onchip.flow.fit`). ``flow``: the
    ``synth_opts`` / ``nextpnr_opts`` of :func:`onchip.flow.nextpnr.place_and_route` (default flow: none)."""
    from onchip.errors import ToolError
    from onchip.flow.fit import DesignTooLarge
    from onchip.flow.nextpnr import place_and_route

    design = point_design(preset, timing, schedule, placed=True)
    with tempfile.TemporaryDirectory(prefix="onchip-timing-") as tmp:
        try:
            rep = place_and_route(design, BOARD, tmp, seed=seed, **flow)
        except DesignTooLarge as exc:
            return {"does_not_fit": str(exc)}
        except ToolError as exc:  # placed and routed, but slower than the board's own clock
            found = re.search(r"Max frequency for clock [^:]*: ([0-9.]+) MHz \(FAIL at ([0-9.]+) MHz\)", str(exc))
            if found is None:
                raise
            return {"fmax_mhz": float(found.group(1)), "lut": None, "ff": None, "dsp": None, "critical_path": None,
                    "note": f"below the board clock ({found.group(2)} MHz): nextpnr stops, no utilisation"}
    util = rep["utilisation"]
    cp = rep["critical_path"]
    return {"fmax_mhz": rep["fmax_mhz"], "lut": util.get("TRELLIS_COMB", {}).get("used"),
            "ff": util.get("TRELLIS_FF", {}).get("used"), "dsp": util.get("MULT18X18D", {}).get("used"),
            "critical_path": {"start": cp["start"]["signal"] or cp["start"]["cell"],
                              "end": cp["end"]["signal"] or cp["end"]["cell"], "total_ns": cp["total_ns"],
                              "logic_ns": cp["logic_ns"], "routing_ns": cp["routing_ns"]},
            # the board build's retry with -dff past Yosys 0.70's abc9 assertion (onchip.flow.nextpnr)
            **({"synth_opts": rep["synth_opts"]} if rep.get("synth_opts") else {})}


def run_yosys(preset: str, timing: str, schedule: str, kind: str) -> dict:
    """Yosys counts of the point's core: ``kind = "xcup"``, ``synth_xilinx`` of the core alone (LUT, FF,
    DSP); ``"ecp5"``, ``synth_ecp5`` of the core as ``onchip pnr`` builds it (:func:`point_design` placed),
    with its block RAMs (DP16KD, the number nextpnr places)."""
    from onchip.flow.yosys import synthesize

    design = point_design(preset, timing, schedule, placed=kind in PLACED_KINDS)
    res = synthesize(design.verilog, design.top, kind)
    return {"lut": res["lut"], "ff": res["ff"], "dsp": res["dsp"], **({"bram": res["bram"]} if kind == "ecp5" else {})}


#: the kinds of run made on the placed variant of a point's design (:func:`point_design`)
PLACED_KINDS = ("pnr", "ecp5")


def _kind(key: str) -> str:
    return key.split("/")[3]


def _job(key: str) -> tuple[str, dict]:
    preset, timing, schedule, kind, *seed = key.split("/")
    if kind == "pnr":
        value = run_pnr(preset, timing, schedule, int(seed[0]))
    elif kind in ("xcup", "ecp5"):
        value = run_yosys(preset, timing, schedule, kind)
    else:
        value = cycles(preset, timing, schedule)
    return key, {**value, "design": design_hash(preset, timing, schedule, placed=kind in PLACED_KINDS)}


def current(runs: dict, names: list[str] | None = None) -> dict:
    """The runs made on each point's current design (by :func:`design_hash`; a place-and-route run by
    the placed variant's), of the points ``names`` (default: every point)."""
    from onchip.progress import progress_bar

    todo = [(name, placed) for name in names or points(None) for placed in (False, True)]
    hashes = {}
    # each hash elaborates a design (a second or more): minutes for the whole family, so say so
    for name, placed in progress_bar(todo, desc="hashing the designs", unit="design"):
        hashes[(name, placed)] = design_hash(*name.split("/"), placed=placed)
    return {k: v for k, v in runs.items()
            if v.get("design") == hashes.get(("/".join(k.split("/")[:3]), _kind(k) in PLACED_KINDS))}


def load_runs(path: Path = RUNS) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def save_run(key: str, value: dict, path: Path = RUNS) -> None:
    """Add one run to ``path`` (``runs.json``): read, update, replace atomically (two sweeps may run at once)."""
    runs = load_runs(path)
    runs[key] = value
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def points(only: list[str] | None) -> list[str]:
    """Every point (member/timing/schedule); with ``only``, those matching a pattern, in the order of the
    first pattern each matches (so a campaign runs the cheap points first)."""
    names = [f"{p}/{t}/{s}" for p in MEMBERS for t in TIMINGS for s in SCHEDULES]
    names += [f"{p}/predict-first/{s}" for p in PREDICT_FIRST for s in SCHEDULES]
    if only:
        first = {n: next((i for i, pat in enumerate(only) if fnmatch.fnmatch(n, pat)), None) for n in names}
        names = sorted((n for n in names if first[n] is not None), key=lambda n: first[n])
    return names


def run(only: list[str] | None, seeds: list[int], jobs: int, xcup: bool, ecp5: bool = True) -> None:
    from tqdm import tqdm

    runs = load_runs()
    names = points(only)
    fresh = current(runs, names)
    todo = []
    for name in names:
        if refusal(*name.split("/")) is not None:
            todo.append(f"{name}/cycles")  # records the refusal
            continue
        todo += ([f"{name}/cycles"] + ([f"{name}/xcup"] if xcup else []) + ([f"{name}/ecp5"] if ecp5 else [])
                 + [f"{name}/pnr/{s}" for s in seeds])
    todo = [k for k in todo if k not in fresh]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_job, k): k for k in todo}
        for fut in tqdm(as_completed(futures), total=len(futures), desc="timing sweep"):
            key = futures[fut]
            try:
                key, value = fut.result()
            except Exception as exc:  # one failed tool run: reported, not recorded; the others go on
                tqdm.write(f"{key}: failed, not recorded ({type(exc).__name__}: {str(exc).strip()[:300]})")
                continue
            save_run(key, value)
            if "/pnr/" in key and ("does_not_fit" in value or "note" in value):
                tqdm.write(f"{key}: {value.get('fmax_mhz', '')} {value.get('does_not_fit', value.get('note'))}")
            elif "/pnr/" in key:
                tqdm.write(f"{key}: {value['fmax_mhz']:.1f} MHz, critical path {value['critical_path']['start']} -> "
                           f"{value['critical_path']['end']} ({value['critical_path']['total_ns']:.2f} ns)")


def table(runs: dict) -> list[dict]:
    rows = []
    for name in points(None):
        preset, timing, schedule = name.split("/")
        if f"{name}/cycles" not in runs:  # listed all the same: a point the campaign has not reached
            rows.append({"preset": preset, "timing": timing, "schedule": schedule, "not_run": True, "seeds": []})
            continue
        c = runs[f"{name}/cycles"]
        if "refused" in c:
            rows.append({"preset": preset, "timing": timing, "schedule": schedule, "note": c["refused"], "seeds": []})
            continue
        placed = {int(k.rsplit("/", 1)[1]): v for k, v in runs.items() if k.startswith(f"{name}/pnr/")}
        seeds = {s: v for s, v in placed.items() if "fmax_mhz" in v}
        row = {"preset": preset, "timing": timing, "schedule": schedule, **c, "seeds": sorted(seeds),
               "fmax_by_seed": {s: seeds[s]["fmax_mhz"] for s in sorted(seeds)}}
        # a design over the device's budget, or placed below the board's clock: its one-line reason
        notes = [v.get("does_not_fit", v.get("note")) for v in placed.values()]
        if any(notes):
            row["note"] = next(n for n in notes if n)
        if seeds:
            best_seed = max(seeds, key=lambda s: seeds[s]["fmax_mhz"])
            best = seeds[best_seed]
            row.update(fmax_mhz=best["fmax_mhz"], best_seed=best_seed, ecp5_lut=best["lut"], ecp5_ff=best["ff"],
                       ecp5_dsp=best["dsp"], critical_path=best["critical_path"], synth_opts=best.get("synth_opts"),
                       step_ns=c["latency_cycles_update"] * 1e3 / best["fmax_mhz"],
                       latency_ns_prediction=c["latency_cycles_prediction"] * 1e3 / best["fmax_mhz"],
                       ii_ns=c["initiation_interval"] * 1e3 / best["fmax_mhz"])
        if f"{name}/ecp5" in runs:
            row["ecp5_bram"] = runs[f"{name}/ecp5"]["bram"]
        if f"{name}/xcup" in runs:
            x = runs[f"{name}/xcup"]
            row.update(xcup_lut=x["lut"], xcup_ff=x["ff"], xcup_dsp=x["dsp"])
        rows.append(row)
    return rows


def seed_gain(rows: list[dict]) -> dict | None:
    """What the best of placer seeds 1-3 adds to seed 1's fmax (%), over the rows placed at all three:
    ``{"points", "mean", "median", "max", "max_point"}``, or None without such a row."""
    gains = {f"{r['preset']}/{r['timing']}/{r['schedule']}": 100 * (r["fmax_mhz"] / r["fmax_by_seed"][1] - 1)
             for r in rows if {1, 2, 3} <= set(r.get("fmax_by_seed", {}))}
    if not gains:
        return None
    values = sorted(gains.values())
    return {"points": len(values), "mean": sum(values) / len(values), "median": statistics.median(values),
            "max": values[-1], "max_point": max(gains, key=gains.get)}


def _cell(row: dict, key: str, fmt: str = "{}") -> str:
    return fmt.format(row[key]) if row.get(key) is not None else "-"


#: where --report writes the presets' table (the top-level README's headline) and the family table (this
#: folder's README, which docs/results.md includes), each between its two marker lines
README = HERE.parents[1] / "README.md"
RESULTS_PAGE = HERE / "README.md"
PRESET_BEGIN, PRESET_END = "<!-- preset table: written by sweeps/timing/timing_sweep.py --report -->", "<!-- end of preset table -->"
#: where --report writes the table beside the anchors (the seed paper, QICK + hls4ml)
ANCHORS_PAGE = HERE.parents[1] / "docs" / "results.md"
ANCHORS_BEGIN, ANCHORS_END = "<!-- anchors table: written by sweeps/timing/timing_sweep.py --report -->", "<!-- end of anchors table -->"
FAMILY_BEGIN, FAMILY_END = "<!-- family table: written by sweeps/timing/timing_sweep.py --report -->", "<!-- end of family table -->"


def _few_seeds(row: dict) -> str:
    """A dagger (" \u2020") for a point placed at fewer than the 3 placer seeds the figures are the best of, else ""."""
    return "" if {1, 2, 3} <= set(row.get("seeds", ())) else " \u2020"


def _dagger_note(lines: list[str]) -> list[str]:
    """The footnote a table's lines need when one of them carries the dagger of :func:`_few_seeds`."""
    if not any("\u2020" in line for line in lines):
        return []
    return ["", "\u2020 placed at fewer than 3 placer seeds (the others: best of seeds 1-3)."]


def _member_cell(row: dict | None, what: str) -> str:
    """One point of the family table: ``what`` is "seq" (cycles, MHz, ns per update), "pip" (MHz, ns per
    sample) or "ns" (ns per update); a refusal or a design over budget in a few words; a dagger for a
    point placed at fewer than 3 seeds."""
    if row is None or row.get("not_run"):
        return "not run"
    note = row.get("note") or ""
    if "latency_cycles_update" not in row:  # refused by the spec: the serial datapaths are sequential
        return "sequential only" if "sequential schedule" in note else "refused"
    from onchip.flow.fit import shortfalls

    over = shortfalls(note)  # a design over the device's budget: its first resource short
    if over:
        o = over[0]
        return f"no fit: {'at least ' if o['at_least'] else ''}{o['needed']} {o['resource']} of {o['available']}"
    if row.get("fmax_mhz") is None:
        return "not placed"
    mhz = f"{row['fmax_mhz']:.1f} MHz"
    if "below the board clock" in note:  # "below the board clock (25.00 MHz): ..."
        return f"{mhz}, {note.split(':')[0]}"
    few = _few_seeds(row)
    if what == "seq":
        return f"{row['latency_cycles_update']} cycles, {mhz}, {row['step_ns']:.1f} ns{few}"
    if what == "pip":
        return f"{mhz}, {row['ii_ns']:.1f} ns{few}"
    if what == "pred":
        return f"{row['latency_cycles_prediction']} cycles, {row['latency_ns_prediction']:.1f} ns{few}"
    return f"{row['step_ns']:.1f} ns{few}"


def family_table(rows: list[dict]) -> str:
    """The family in one table, a line per member: sequential at ``fast`` (update latency in cycles, fmax,
    ns per update), pipelined at ``fast`` (fmax, ns per sample), sequential at ``compact`` (ns per update),
    ECP5 LUT / DSP at ``fast`` sequential; from the rows of :func:`table` (``results.json``)."""
    by = {(r["preset"], r["timing"], r["schedule"]): r for r in rows}
    lines = ["| learner | sequential, `fast` | prediction, sequential `fast` | pipelined, `fast` (per sample) "
             "| sequential, `compact` | ECP5 LUT / DSP (sequential, `fast`) |",
             "|---|---|---|---|---|---|"]
    for m in MEMBERS:
        seq = by.get((m, "fast", "sequential"))
        lut = f"{seq['ecp5_lut']} / {seq['ecp5_dsp']}" if seq and seq.get("ecp5_lut") is not None else "-"
        lines.append(f"| {m} | {_member_cell(seq, 'seq')} | {_member_cell(seq, 'pred')} "
                     f"| {_member_cell(by.get((m, 'fast', 'pipelined')), 'pip')} "
                     f"| {_member_cell(by.get((m, 'compact', 'sequential')), 'ns')} | {lut} |")
    lines += _dagger_note(lines)
    return "\n".join(lines)


def preset_table(rows: list[dict]) -> str:
    """The presets at the plans a user builds, a line per preset and schedule: the default sequential
    build (``timing = "auto"`` builds ``fast``) and the pipelined one at ``fast``; fmax, cycles and ns
    from a sample accepted to its prediction out and to its update committed, II, ECP5 LUT / FF / DSP;
    from the rows of :func:`table` (``results.json``). A point not placed reads "not placed"."""
    by = {(r["preset"], r["timing"], r["schedule"]): r for r in rows}
    lines = ["| preset | schedule, plan | fmax (MHz) | prediction (cycles / ns) | update (cycles / ns) "
             "| II (cycles / ns) | ECP5 LUT / FF / DSP |",
             "|---|---|---:|---:|---:|---:|---|"]
    for p in PRESETS:
        for schedule in SCHEDULES:
            r = by.get((p, "fast", schedule))
            if r is None or r.get("fmax_mhz") is None or "latency_cycles_update" not in r:
                lines.append(f"| {p} | {schedule}, `fast` | not placed | - | - | - | - |")
                continue
            ns = 1e3 / r["fmax_mhz"]
            d = f" (D = {r['staleness']})" if schedule == "pipelined" else ""
            lines.append(
                f"| {p} | {schedule}{d}, `fast` | {r['fmax_mhz']:.1f}{_few_seeds(r)} "
                f"| {r['latency_cycles_prediction']} / {r['latency_cycles_prediction'] * ns:.1f} "
                f"| {r['latency_cycles_update']} / {r['step_ns']:.1f} "
                f"| {r['initiation_interval']} / {r['ii_ns']:.1f} "
                f"| {_cell(r, 'ecp5_lut')} / {_cell(r, 'ecp5_ff')} / {_cell(r, 'ecp5_dsp')} |")
    return "\n".join(lines + _dagger_note(lines))


#: the published figures onchip is set beside, as their sources state them (not measured here)
ANCHORS = [
    {"design": "seed paper: KAN, forward + backward + update (claimed)", "part": "Virtex UltraScale+ XCVU13P",
     "prediction": "-", "update": "< 100 ns", "fmax": "200 MHz", "learns": "yes"},
    {"design": "QICK + hls4ml readout network (arXiv 2501.14663)", "part": "RFSoC",
     "prediction": "32 ns", "update": "- (inference only)", "fmax": "-", "learns": "no"},
]


def anchors_table(rows: list[dict]) -> str:
    """onchip beside the anchors (:data:`ANCHORS`): a line per anchor, then a line per preset at the plan a
    user builds (sequential, ``fast``) and per point at ``timing = "predict-first"`` (:data:`PREDICT_FIRST`):
    ns from a sample accepted to its prediction and decision out, ns to its update committed, fmax,
    routed on the ULX3S 85F; from the rows of :func:`table` (``results.json``)."""
    by = {(r["preset"], r["timing"], r["schedule"]): r for r in rows}
    lines = ["| design | part | sample to prediction and decision | one online step (predict + update) | fmax "
             "| learns online |",
             "|---|---|---:|---:|---:|---|"]
    lines += [f"| {a['design']} | {a['part']} | {a['prediction']} | {a['update']} | {a['fmax']} | {a['learns']} |"
              for a in ANCHORS]
    points = [(p, "fast", "sequential") for p in PRESETS]
    points += [(p, "predict-first", s) for p in PREDICT_FIRST for s in SCHEDULES]
    for p, timing, schedule in points:
        r = by.get((p, timing, schedule))
        what = f"onchip {p}, {schedule}, `{timing}`"
        part = "ECP5 LFE5U-85F speed 6, routed"
        if r is None or r.get("fmax_mhz") is None or "latency_cycles_update" not in r:
            lines.append(f"| {what} | {part} | not placed | - | - | yes |")
            continue
        few = _few_seeds(r)
        lines.append(f"| {what} | {part} | {r['latency_ns_prediction']:.1f} ns ({r['latency_cycles_prediction']} "
                     f"cycles) | {r['step_ns']:.1f} ns ({r['latency_cycles_update']} cycles) "
                     f"| {r['fmax_mhz']:.1f} MHz{few} | yes |")
    lines += _dagger_note(lines)
    return "\n".join(lines)


def write_family_table(text: str, path: Path = RESULTS_PAGE, markers: tuple[str, str] = (FAMILY_BEGIN, FAMILY_END)) -> None:
    """Replace the lines between the two ``markers`` lines in ``path`` with ``text`` (by default the family
    table's markers in the results page).

    Raises:
        ValueError: ``path`` lacks either marker line (nothing is written).
    """
    first, last = markers
    lines = path.read_text().split("\n")
    if first not in lines or last not in lines:
        raise ValueError(f"{path}: no table markers ({first!r} ... {last!r})")
    begin, end = lines.index(first), lines.index(last)
    path.write_text("\n".join([*lines[:begin + 1], "", text, "", *lines[end:]]))


def report(runs: dict) -> None:
    rows = table(runs)
    lines = [
        "# Register stages (`timing`) against nanoseconds",
        "",
        "Written by `python sweeps/timing/timing_sweep.py --report` from `runs.json` (see README.md).",
        "ECP5: nextpnr-ecp5 on the ULX3S 85F (LFE5U-85F, speed 6, UART board top, a real bitstream), best",
        "fmax of the placer seeds listed; prediction = latency to the prediction (cycles) / fmax, step = update",
        "latency (cycles) / fmax, II ns = II / fmax.",
        "BRAM: DP16KD of Yosys synth_ecp5 of the core as the board builds it (what nextpnr places).",
        "xcup: Yosys synth_xilinx of the core alone (not placed: no fmax).",
        "",
        "| preset | timing | schedule | D | latency prediction (cycles) | latency update (cycles) | II "
        "| fmax ECP5 (MHz) | seeds | prediction (ns) | step (ns) "
        "| II (ns) | ECP5 LUT / FF / DSP | ECP5 BRAM | xcup LUT / FF / DSP | critical path (best seed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("not_run") or "latency_cycles_update" not in r:  # no record, or refused by the spec
            why = "not run with the current design" if r.get("not_run") else f"refused: {r['note']}"
            lines.append(f"| {r['preset']} | {r['timing']} | {r['schedule']} | - | - | - | - | - | - | - | - | - | - "
                         f"| - | - | {why} |")
            continue
        cp = r.get("critical_path")
        cp_text = (f"{cp['start']} -> {cp['end']}: {cp['total_ns']:.2f} ns (logic {cp['logic_ns']:.2f}, "
                   f"routing {cp['routing_ns']:.2f})" if cp else r.get("note", "not placed with the current design"))
        if r.get("synth_opts"):
            cp_text += f"; built with synth_ecp5 {r['synth_opts']} (Yosys 0.70's abc9 assertion without it)"
        lines.append(
            f"| {r['preset']} | {r['timing']} | {r['schedule']} | {r['staleness']} | {r['latency_cycles_prediction']} "
            f"| {r['latency_cycles_update']} | {r['initiation_interval']} | {_cell(r, 'fmax_mhz', '{:.1f}')} "
            f"| {','.join(map(str, r['seeds'])) or '-'} | {_cell(r, 'latency_ns_prediction', '{:.1f}')} "
            f"| {_cell(r, 'step_ns', '{:.1f}')} | {_cell(r, 'ii_ns', '{:.1f}')} "
            f"| {_cell(r, 'ecp5_lut')} / {_cell(r, 'ecp5_ff')} / {_cell(r, 'ecp5_dsp')} | {_cell(r, 'ecp5_bram')} "
            f"| {_cell(r, 'xcup_lut')} / {_cell(r, 'xcup_ff')} / {_cell(r, 'xcup_dsp')} | {cp_text} |")
    gain = seed_gain(rows)
    if gain:
        lines += ["", f"Best of seeds 1-3 against seed 1 alone, over the {gain['points']} points placed at all three: "
                      f"fmax +{gain['mean']:.1f}% on average, median +{gain['median']:.1f}%, at most +{gain['max']:.1f}% "
                      f"({gain['max_point']}); a row placed at seed 1 only may be that much below its best of 3."]
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    (HERE / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    write_family_table(family_table(rows))
    write_family_table(preset_table(rows), README, (PRESET_BEGIN, PRESET_END))
    write_family_table(anchors_table(rows), ANCHORS_PAGE, (ANCHORS_BEGIN, ANCHORS_END))
    plot(rows)


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    markers = {"sequential": "o", "pipelined": "s"}
    colors = {"compact": "tab:gray", "fast": "tab:blue", "predict-first": "tab:green"}
    for r in rows:
        if "step_ns" not in r or r.get("ecp5_lut") is None:
            continue
        ax.scatter(r["ecp5_lut"], r["step_ns"], marker=markers[r["schedule"]], color=colors[r["timing"]], s=30)
        if r["timing"] == "fast" and r["schedule"] == "sequential" or "serial" in r["preset"]:
            # one name per member (its fast sequential point, or its serial one): the cycles and
            # fmax of every point are in results.md
            ax.annotate(r["preset"], (r["ecp5_lut"], r["step_ns"]), fontsize=6, xytext=(4, 2),
                        textcoords="offset points")
    ax.axhline(TARGET_NS, color="tab:red", ls="--", lw=1)
    ax.text(ax.get_xlim()[1], TARGET_NS, "paper: 100 ns ", color="tab:red", va="bottom", ha="right", fontsize=8)
    for t, c in colors.items():
        ax.scatter([], [], color=c, label=f"timing = {t}")
    for s, mk in markers.items():
        ax.scatter([], [], color="k", marker=mk, label=s)
    ax.set_yscale("log")  # 70 ns to 2 us
    ax.set_xlabel("ECP5 LUT (nextpnr, TRELLIS_COMB)")
    ax.set_ylabel("one online step: update latency / fmax (ns)")
    ax.set_title("ULX3S 85F (ECP5), placed and routed, best placer seed")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(HERE / "timing.png", dpi=130)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", help="points as preset/timing/schedule (shell patterns)")
    ap.add_argument("--seeds", type=int, nargs="*", default=[1, 2, 3],
                    help="nextpnr placer seeds (none: only cycles and the Yosys counts)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    ap.add_argument("--no-xcup", action="store_true", help="skip the Yosys UltraScale+ counts")
    ap.add_argument("--no-ecp5", action="store_true", help="skip the Yosys ECP5 counts (the BRAM column)")
    ap.add_argument("--report", action="store_true", help="only rewrite results.md/json, timing.png, the README's preset table and this folder's README's family table "
                         "(no place and route, but every point's design is elaborated to hash it: about 10 minutes)")
    ap.add_argument("--no-report", action="store_true",
                    help="only the runs: leave the report (the report hashes every point's design)")
    args = ap.parse_args()
    if not args.report:
        run(args.only, args.seeds, args.jobs, not args.no_xcup, not args.no_ecp5)
    if args.report or not args.no_report:
        report(current(load_runs()))


if __name__ == "__main__":
    main()
