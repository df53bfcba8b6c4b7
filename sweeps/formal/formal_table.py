"""Formal checks of every preset, both schedules and both timing plans (SymbiYosys + Yices 2).

For each preset x schedule x timing, and the serial datapaths (mlp-regression and kan-regression, sequential,
both plans): the stream-protocol properties of the core and of its AXI4-Stream wrapper by k-induction
(:func:`onchip.formal.prove`: properties proved, the induction length that closed, wall time) and the
bounded read-back check. Each protocol row carries the date it was measured.
For each point of ``--points`` (part ``live``): the bounded-response properties (s ready when the reload
ends, a prediction within its latency: proved by k-induction or bounded) and the covers a working core
must reach from reset (a sample accepted, a prediction delivered, an update committed, a parameter
written and read back: the length of the trace that reaches each), on the core and its wrapper.
For each preset x schedule: the bounded equivalence of the fast and compact plans
(:func:`onchip.formal.check_plans`) with ``--plans-timeout`` seconds of solver time, reported
in cycles and in predictions compared, and the item-by-item proof of the same two plans
(:func:`onchip.formal.check_plans_per_item`) with ``--items-timeout`` seconds per solver query.
For ``--netlist`` (kan-paper): the ECP5 netlist against
its RTL to a bound (:func:`onchip.formal.check_netlist`).

Writes ``results.json`` and ``results.md`` beside this script (the README's table). One line per
solver run is printed as it goes.

Usage (about 40 minutes on a 2-core machine)::

    python sweeps/formal/formal_table.py
    python sweeps/formal/formal_table.py --only kan-paper --plans-timeout 60
    python sweeps/formal/formal_table.py --parts plans      # then --combine results-plans.json results.json
    python sweeps/formal/formal_table.py --points 'kan-*/sequential/fast/*' '*/*/*/serial'
    python sweeps/formal/formal_table.py --parts live --points '*/sequential/compact/*'
        # those protocol rows again, and the item-by-item rows of the matching presets' sequential/fast/parallel
        # points, merged into results.json (the other rows, the bounded plan checks and the netlist kept)
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import platform
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRESETS = ("kan-paper", "kan-regression", "kan-readout", "mlp-regression", "mlp-readout")
SCHEDULES = ("sequential", "pipelined")
TIMINGS = ("compact", "fast")


def point_spec(preset: str, schedule: str, timing: str, datapath: str = "parallel"):
    from onchip.commands.generate import resolve_spec

    spec = resolve_spec(preset, schedule, "min" if schedule == "pipelined" else None, timing)
    return dataclasses.replace(spec, datapath=datapath) if datapath != "parallel" else spec


def points(only, patterns=None):
    """(preset, schedule, timing, datapath) of every protocol row: each preset at both schedules and
    plans, then the serial datapaths (sequential); ``only``: those presets; ``patterns``: rows whose
    ``preset/schedule/timing/datapath`` matches a shell pattern."""
    rows = [(preset, schedule, timing, "parallel") for preset in PRESETS for schedule in SCHEDULES for timing in TIMINGS]
    rows += [(preset, "sequential", timing, "serial") for preset in ("mlp-regression", "kan-regression")
             for timing in TIMINGS]
    for row in rows:
        if only and row[0] not in only:
            continue
        if patterns and not any(fnmatch.fnmatch("/".join(row), pat) for pat in patterns):
            continue
        yield row


def log(text: str) -> None:
    """One line per solver run, as it goes."""
    print(f"  {text}", flush=True)


def protocol_row(preset, schedule, timing, datapath, log) -> dict:
    from onchip import formal

    spec = point_spec(preset, schedule, timing, datapath)
    # the port is the same in every schedule and plan: the read-back once per preset and datapath
    readback = timing == "compact" and schedule == "sequential"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onchip-formal-") as tmp:
        results = formal.prove(spec, folder=tmp, log=log, readback=readback, live=False)  # live: its own part
    seconds = time.perf_counter() - t0
    proto = [r for r in results if r.name not in formal.READBACK_PROPERTIES]
    back = [r for r in results if r.name in formal.READBACK_PROPERTIES]
    return {"preset": preset, "schedule": schedule, "timing": timing, "datapath": datapath,
            "date": time.strftime("%Y-%m-%d"), "properties": len(proto), "proved": sum(r.status == "proved" for r in proto),
            "not_proved": [f"{r.level}.{r.name}: {r.status}" for r in proto if r.status != "proved"],
            "induction_depth": max((r.depth or 0) for r in proto),
            "readback_bound_cycles": min(r.bound for r in back) if back else "",
            "readback_status": sorted({r.status for r in back}),
            "seconds": round(seconds, 1)}


def live_row(preset, schedule, timing, datapath, log) -> dict:
    from onchip import formal
    from onchip.formal.covers import cover_depth
    from onchip.formal.protocol import prove_protocol
    from onchip.hw import generate
    from onchip.model.golden import initial_parameters

    spec = point_spec(preset, schedule, timing, datapath)
    design = generate(spec)
    theta0 = initial_parameters(spec)
    response, covers = {}, {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onchip-formal-") as tmp:
        for level in formal.LEVELS:
            text = design.verilog if level == "core" else design.axis_verilog
            for r in prove_protocol(design.info, text, level, Path(tmp) / level, response=True, log=log):
                response[f"{level}.{r.name}"] = {"status": r.status, "k": r.depth, "bound_cycles": r.bound}
            for r in formal.check_covers(design.info, text, level, theta0, Path(tmp) / level, log=log):
                covers[f"{level}.{r.name}"] = {"status": r.status, "cycles": r.bound}
    return {"preset": preset, "schedule": schedule, "timing": timing, "datapath": datapath,
            "date": time.strftime("%Y-%m-%d"), "reset_cycles": design.info["reset_cycles"],
            "latency_cycles_prediction": design.info["latency_cycles_prediction"],
            "cover_depth": cover_depth(design.info), "response": response, "covers": covers,
            "seconds": round(time.perf_counter() - t0, 1)}


def _live_cells(r: dict) -> list[str]:
    """Table cells of a live row: per response property its verdict on core / axis (k or bound), per
    cover the cycles of the trace that reaches it on core / axis (or its failure)."""
    from onchip import formal

    def verdict(x):
        return f"proved k={x['k']}" if x["status"] == "proved" else \
            f"{x['status']} {x['bound_cycles']}" if x.get("bound_cycles") is not None else x["status"]

    def reached(x):
        return str(x["cycles"]) if x["status"] == "covered" else f"{x['status']} ({x['cycles']})"

    cells = [" / ".join(verdict(r["response"][f"{lv}.{n}"]) for lv in formal.LEVELS) for n in formal.RESPONSE_PROPERTIES]
    cells += [" / ".join(reached(r["covers"][f"{lv}.{n}"]) for lv in formal.LEVELS) for n in formal.COVER_PROPERTIES]
    return cells


def plans_row(preset, schedule, timeout, log) -> dict:
    from onchip import formal

    # one staleness for both plans: the fast plan's smallest (the compact pipeline allows it too)
    compact, fast = formal.plan_designs(point_spec(preset, schedule, "fast"))
    row = {"preset": preset, "schedule": schedule, "staleness": fast.info["staleness"], "timeout_s": timeout,
           "solver": "/".join(formal.PLANS_SOLVER[w] for w in (True, False)),
           "first_fast_prediction_cycle": fast.info["reset_cycles"] + 1 + fast.info["latency_cycles_prediction"] + 1}
    for writes, host in ((True, "any"), (False, "reads")):  # any commands; reads only
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="onchip-formal-") as tmp:
            results = formal.check_plans(compact, fast, tmp, timeout=timeout, writes=writes, log=log)
        r = results[0]
        row.update({f"{host}_status": sorted({x.status for x in results}), f"{host}_bound_cycles": r.bound,
                    f"{host}_bound_samples": r.samples, f"{host}_seconds": round(time.perf_counter() - t0, 1)})
    return row


def items_row(preset, schedule, timeout, log) -> dict:
    from onchip import formal

    compact, fast = formal.plan_designs(point_spec(preset, schedule, "fast"))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onchip-formal-") as tmp:
        results = formal.check_plans_per_item(compact, fast, tmp, timeout=timeout, log=log)
    return {"preset": preset, "schedule": schedule, "staleness": fast.info["staleness"], "timeout_s": timeout,
            "date": time.strftime("%Y-%m-%d"), "status": {r.name: r.status for r in results}, "detail": {r.name: r.detail for r in results},
            "seconds": round(time.perf_counter() - t0, 1)}


def netlist_row(preset, timeout, log) -> dict:
    from onchip import formal
    from onchip.hw import generate

    design = generate(point_spec(preset, "sequential", "compact"), axis=False)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onchip-formal-") as tmp:
        (r,) = formal.check_netlist(design, tmp, depth=64, timeout=timeout, log=log)
    return {"preset": preset, "family": "ecp5", "status": r.status, "bound_cycles": r.bound,
            "reset_cycles": design.info["reset_cycles"], "timeout_s": timeout,
            "seconds": round(time.perf_counter() - t0, 1)}


def report(data: dict) -> str:
    lines = ["# Formal checks of the presets", "",
             f"Measured on {data['machine']} with `{data['command']}` (a part run again with `--points`, or",
             "with `--parts` and then `--combine`); each row gives the date it was measured.", "",
             "Protocol: the properties of `onchip.formal.properties` on the core and on its AXI4-Stream wrapper,",
             "proved by k-induction for all time (k: the induction length that closed, in cycles). Read-back:",
             "a read at an arbitrary address returns the last word written (or the reset value), checked",
             "to the bound given, in cycles from reset (bounded: not a proof), once per preset and datapath",
             "(sequential, compact: the parameter port's decode is the same in every plan).", "",
             "| preset | schedule | timing | datapath | protocol properties proved | induction k | "
             "read-back bound (cycles) | wall time (s) | measured |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in data["protocol"]:
        lines.append(f"| {r['preset']} | {r['schedule']} | {r['timing']} | {r['datapath']} | {r['proved']} / "
                     f"{r['properties']} | {r['induction_depth']} | {r['readback_bound_cycles']} | {r['seconds']} | "
                     f"{r.get('date', data['date'])} |")
    if data.get("live"):
        lines += ["", "Doing the work (`onchip.formal.prove` with `live`): the protocol above holds on a core that never",
                  "takes a sample, so each point also proves, on the core / on its AXI4-Stream wrapper, that s ready",
                  "is high when the reload ends (`reset_cycles` after reset, no command offered) and that, with m ready",
                  "held high, a prediction leaves within `latency_cycles_prediction` of its sample (k-induction; a",
                  "bound where it does not close: cycles from reset, not a proof), and reaches four covers from reset",
                  "in SymbiYosys cover mode: the cycles of the shortest trace that reaches each (searched to the",
                  "cover depth; an unreached cover fails the check).", "",
                  "| preset | schedule | timing | datapath | reload (cycles) | latency (cycles) | s ready after reload | "
                  "prediction within latency | sample accepted | prediction delivered | update committed | "
                  "written, read back | cover depth | wall time (s) | measured |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in data["live"]:
            lines.append(f"| {r['preset']} | {r['schedule']} | {r['timing']} | {r['datapath']} | {r['reset_cycles']} | "
                         f"{r['latency_cycles_prediction']} | " + " | ".join(_live_cells(r)) +
                         f" | {r['cover_depth']} | {r['seconds']} | {r['date']} |")
    solver = {r["solver"] for r in data["plans"]}
    lines += ["", "Timing plans, bounded: fast and compact of each preset and schedule side by side on every",
              "input sequence up to the bound, in cycles from reset and in predictions the slower core",
              "delivers within it (pipelined: both at the fast plan's smallest staleness), for two hosts:",
              "any commands (samples of any kind, reads and writes of any parameter) and reads only",
              "(samples of any kind and reads: the parameters start at their reset values and change only",
              f"by learning); {data['plans_timeout_s']} s of solver time each ({', '.join(sorted(solver))}).", "",
              "| preset | schedule | any commands: cycles / samples | reads only: cycles / samples | "
              "fast core's first prediction (cycle) | wall time (s) | measured |",
              "|---|---|---|---|---|---|---|"]
    for r in data["plans"]:
        lines.append(f"| {r['preset']} | {r['schedule']} | {r['any_bound_cycles']} / {r['any_bound_samples']} | "
                     f"{r['reads_bound_cycles']} / {r['reads_bound_samples']} | {r['first_fast_prediction_cycle']} | "
                     f"{round(r['any_seconds'] + r['reads_seconds'], 1)} | {r.get('date', data['date'])} |")
    if data.get("items"):
        lines += ["", "Timing plans item by item, sequential schedule (`onchip.formal.check_plans_per_item`): for every parameter state,",
                  "every sample (any kind, any values) and every read or write of any parameter, offered to an",
                  "idle core with the outputs taken at once, fast and compact give the same prediction and",
                  "decision, the same response and the same parameters after, and both return to idle: by",
                  "induction over the items, equal for every number of them (proved: unbounded). Samples that",
                  "overlap in the pipeline, stalled outputs and the pipelined schedule are the bounded check's, above.",
                  "Yices 2, with the solver time per query given (a query out of time: not_proved).", "",
                  "| preset | schedule | predictions | responses | parameters | solver time per query (s) | "
                  "wall time (s) | measured |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in data["items"]:
            st = r["status"]
            lines.append(f"| {r['preset']} | {r['schedule']} | {st['item_predictions_equal']} | "
                         f"{st['item_responses_equal']} | {st['item_parameters_equal']} | {r['timeout_s']} | {r['seconds']} | "
                         f"{r.get('date', data['date'])} |")
    if data.get("netlist"):
        lines += ["", "Netlist against RTL, bounded: the Yosys ECP5 netlist (`synth_ecp5 -flatten -nobram`, its",
                  "primitives through Yosys's simulation models and a MULT18X18D model) and the Amaranth Verilog",
                  "on the same free inputs, every output equal every cycle.", "",
                  "| preset | family | status | bound (cycles) | reload cycles | wall time (s) | measured |",
                  "|---|---|---|---|---|---|---|"]
        for r in data["netlist"]:
            lines.append(f"| {r['preset']} | {r['family']} | {r['status']} | {r['bound_cycles']} | "
                         f"{r['reset_cycles']} | {r['seconds']} | {r.get('date', data['date'])} |")
    return "\n".join(lines) + "\n"


def update_rows(only, patterns, parts, items_timeout) -> int:
    """Run the protocol rows matching ``patterns`` (``"protocol" in parts``) and the item-by-item rows of
    the presets whose ``preset/sequential/fast/parallel`` matches (``"items" in parts``), the live rows of the
    matching points (``"live" in parts``), and merge them into
    ``results.json`` / ``results.md``: a row of the same point replaced, rows in :func:`points` /
    :data:`PRESETS` order; the bounded plan checks and the netlist kept as they are."""
    data = json.loads((HERE / "results.json").read_text())
    rows = {tuple(r[k] for k in ("preset", "schedule", "timing", "datapath")): r for r in data["protocol"]}
    by_preset = {r["preset"]: r for r in data["items"]}
    live = {tuple(r[k] for k in ("preset", "schedule", "timing", "datapath")): r for r in data.get("live", [])}
    todo = list(points(only, patterns)) if "protocol" in parts else []
    live_todo = list(points(only, patterns)) if "live" in parts else []
    items = [p for p in PRESETS if (not only or p in only) and "items" in parts
             and any(fnmatch.fnmatch(f"{p}/sequential/fast/parallel", pat) for pat in patterns)]
    if not todo and not items and not live_todo:
        raise SystemExit(f"--points: no row matches {' '.join(patterns)}")

    def save():  # after every row: a stopped run keeps the rows it finished
        data["protocol"] = [rows[key] for key in points(None) if key in rows]
        data["items"] = [by_preset[p] for p in PRESETS if p in by_preset]
        data["live"] = [live[key] for key in points(None) if key in live]
        tmp = HERE / "results.json.tmp"
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        (HERE / "results.md").write_text(report(data))
        os.replace(tmp, HERE / "results.json")

    for preset, schedule, timing, datapath in todo:
        print(f"{preset} {schedule} {timing} {datapath}: protocol", flush=True)
        rows[preset, schedule, timing, datapath] = protocol_row(preset, schedule, timing, datapath, log)
        save()
    for preset, schedule, timing, datapath in live_todo:
        print(f"{preset} {schedule} {timing} {datapath}: response bounds and covers", flush=True)
        live[preset, schedule, timing, datapath] = live_row(preset, schedule, timing, datapath, log)
        save()
    for preset in items:
        print(f"{preset} sequential: fast against compact, item by item", flush=True)
        by_preset[preset] = items_row(preset, "sequential", items_timeout, log)
        save()
    print(f"wrote {HERE / 'results.md'}")
    return 0


PARTS = ("protocol", "plans", "items", "netlist", "live")


def combine(files: list[dict]) -> dict:
    """One results dict from several: the first gives every part, each later one replaces the parts
    it holds (so ``--combine results.json results-plans.json`` puts a new plans run into the
    committed results). Every row keeps the date of the run that made it."""
    data = None
    for part in files:
        for key in PARTS:
            for row in part.get(key) or ():
                row.setdefault("date", part["date"])
        if data is None:
            data = part
            continue
        for key in PARTS:
            if part.get(key):
                data[key] = part[key]
                if key in ("plans", "items"):
                    data[f"{key}_timeout_s"] = part[f"{key}_timeout_s"]
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="presets to run (default: all)")
    ap.add_argument("--plans-timeout", type=float, default=180.0, help="solver seconds per plan comparison")
    ap.add_argument("--items-timeout", type=float, default=600.0, help="solver seconds per item-by-item query")
    ap.add_argument("--netlist-timeout", type=float, default=600.0, help="solver seconds of the netlist check")
    ap.add_argument("--no-netlist", action="store_true", help="skip the netlist check")
    ap.add_argument("--parts", default="protocol,plans,items,netlist",
                    help="comma-separated parts to run (protocol, plans, items, netlist; live with --points only); a subset "
                         "writes results-<parts>.json (default: all but live)")
    ap.add_argument("--combine", nargs="+", default=None, metavar="JSON",
                    help="only write results.json and results.md from these files: the first gives every part, "
                         "each later one replaces the parts it holds")
    ap.add_argument("--points", nargs="+", default=None, metavar="PATTERN",
                    help="run only the protocol (and item-by-item) rows matching preset/schedule/timing/datapath "
                         "(shell patterns) and merge them into results.json")
    args = ap.parse_args(argv)
    if args.points:
        return update_rows(args.only, args.points, set(args.parts.split(",")), args.items_timeout)
    if args.combine:
        data = combine([json.loads(Path(path).read_text()) for path in args.combine])
        (HERE / "results.json").write_text(json.dumps(data, indent=1) + "\n")
        (HERE / "results.md").write_text(report(data))
        print(f"wrote {HERE / 'results.md'}")
        return 0
    parts = set(args.parts.split(","))
    data = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python sweeps/formal/formal_table.py", "plans_timeout_s": args.plans_timeout,
            "items_timeout_s": args.items_timeout, "protocol": [], "plans": [], "items": [], "netlist": []}
    for preset, schedule, timing, datapath in points(args.only) if "protocol" in parts else ():
        print(f"{preset} {schedule} {timing} {datapath}: protocol", flush=True)
        data["protocol"].append(protocol_row(preset, schedule, timing, datapath, log))
    for preset in PRESETS if "plans" in parts else ():
        if args.only and preset not in args.only:
            continue
        for schedule in SCHEDULES:
            print(f"{preset} {schedule}: fast against compact", flush=True)
            data["plans"].append(plans_row(preset, schedule, args.plans_timeout, log))
    for preset in PRESETS if "items" in parts else ():
        if args.only and preset not in args.only:
            continue
        print(f"{preset} sequential: fast against compact, item by item", flush=True)
        data["items"].append(items_row(preset, "sequential", args.items_timeout, log))
    if "netlist" in parts and not args.no_netlist and (not args.only or "kan-paper" in args.only):
        print("kan-paper: ECP5 netlist against RTL", flush=True)
        data["netlist"].append(netlist_row("kan-paper", args.netlist_timeout, log))
    if parts != {"protocol", "plans", "items", "netlist"}:
        out = HERE / f"results-{'-'.join(sorted(parts))}.json"
        out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {out}; combine the parts with --combine")
        return 0
    (HERE / "results.json").write_text(json.dumps(data, indent=1) + "\n")
    (HERE / "results.md").write_text(report(data))
    print(f"wrote {HERE / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
