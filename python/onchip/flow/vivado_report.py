"""Vivado's timing and utilisation reports -> the numbers of ``report.json`` (``onchip vivado-report``).

Vivado does not run here: a user runs a folder written by ``onchip vivado`` (``sh run.sh``)
and this module reads the text reports the run leaves there, in the formats of Vivado
2019-2024 (UG906, "Design Analysis and Closure Techniques": ``report_timing_summary``,
``report_utilization``):

* ``report_timing_summary``: the "Design Timing Summary" row (WNS, TNS, WHS, THS in ns),
  the "Clock Summary" (period of each clock), the "Intra Clock Table" (WNS per clock) and
  the worst setup path of "Max Delay Paths" (source, destination, data path delay split into
  logic and route, logic levels). fmax = 1000 / (period - WNS) MHz of the clock with the
  worst WNS: the period at which the worst path would just meet its requirement.
* ``report_utilization``: the "Used" column of the site-type tables (CLB/Slice LUTs and
  registers, LUT as Memory, DSPs, Block RAM Tile with RAMB36/RAMB18, URAM); 7-series and
  UltraScale(+) spellings, with or without the "Prohibited" column.

Register names of the worst path (``learner/err0_s5_reg[15]/C``) map back to the learner's
signals (``err0_s5``: signal ``err0`` of stage 5), as for nextpnr's critical path.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from ..io import _jsonable

_NUM = r"-?\d+(?:\.\d+)?"
_SLACK_RX = re.compile(rf"^Slack(?: \((MET|VIOLATED)\))?\s*:\s*({_NUM}|inf)ns", re.M)
_FIELD_RX = re.compile(r"^\s{2}([A-Z][A-Za-z ]+?):\s+(.*)$")
_DATA_PATH_RX = re.compile(rf"({_NUM})ns\s+\(logic ({_NUM})ns .*route ({_NUM})ns")
_LEVELS_RX = re.compile(r"^(\d+)\s*(?:\((.*)\))?")
_HEADER_RX = re.compile(r"^\|\s*(Tool Version|Device)\s*:\s*(.+?)\s*$", re.M)
_STAGE_RX = re.compile(r"_s(\d+)$")


def _section(text: str, title: str) -> list[str] | None:
    """The lines under a ``| <title>`` banner of a Vivado report, up to the next banner."""
    m = re.search(rf"^\|\s*{re.escape(title)}\s*$", text, re.M)
    if not m:
        return None
    out: list[str] = []
    for line in text[m.end():].splitlines()[1:]:
        if line.startswith("|") or (not out and line.startswith("---")):
            if out:
                break
            continue  # the banner's underline and rule
        out.append(line)
    return out


def _table_rows(lines: list[str]) -> list[list[str]]:
    """Whitespace-split rows of the first aligned table in ``lines``: below the dashed rule that
    follows its header line, up to the first blank line."""
    rows: list[list[str]] = []
    header = started = False
    for line in lines:
        text = line.strip()
        if not started:
            if text.startswith("---") and header:
                started = True
            elif text and not text.startswith("---"):
                header = True
            continue
        if not text:
            break
        rows.append(text.split())
    return rows


def _float(token: str) -> float:
    return float("inf") if token == "inf" else float(token)


def signal_of(pin: str) -> dict:
    """A Vivado pin or cell name -> ``{"cell", "signal", "stage"}`` of the learner.

    Vivado names a register bit ``<signal>_reg[<bit>]`` and a memory ``<memory>_reg...``
    under the instance path (``learner/err0_s5_reg[15]/C``, a LUTRAM's pin
    ``learner/l0_coef_0_0_bank1_reg_0_1_0_13/RAMA/I``); ``stage`` is the ``_s<k>``
    suffix Amaranth gives pipeline registers, None where there is none.
    """
    parts = pin.split("/")
    if len(parts) > 1:
        parts = parts[:-1]  # the pin
    # the innermost register or memory: a LUTRAM's pin sits below its macro (<memory>_reg_0_1_0_13/RAMA/I)
    k = next((i for i in range(len(parts) - 1, -1, -1) if re.match(r"^.*?_reg(?:$|[\[_])", parts[i])),
             len(parts) - 1)
    cell = "/".join(parts[:k + 1])
    m = re.match(r"^(.*?)_reg(?:$|[\[_])", parts[k])
    signal = m.group(1) if m else re.sub(r"\[\d+\]$", "", parts[k])
    stage = _STAGE_RX.search(signal)
    return {"cell": cell, "signal": signal, "stage": int(stage.group(1)) if stage else None}


def parse_timing_summary(text: str, name: str = "the timing report") -> dict:
    """Parse ``report_timing_summary`` text.

    Args:
        text: the report.
        name: the file's name, for errors.

    Returns:
        ``{"wns_ns", "tns_ns", "whs_ns", "ths_ns", "failing_endpoints", "clocks": {name:
        {"period_ns", "wns_ns"}}, "clock", "period_ns", "fmax_mhz", "worst_path"}``;
        ``worst_path``: ``{"start", "end"`` (see :func:`signal_of`), ``"slack_ns",
        "requirement_ns", "data_path_ns", "logic_ns", "route_ns", "logic_levels",
        "levels_by_type"}`` of the setup path with the least slack, or None if the report
        lists no path.

    Raises:
        ValueError: naming ``name``: no Design Timing Summary, no clock, or no timed path.
    """
    design = _section(text, "Design Timing Summary")
    rows = _table_rows(design or [])
    if not rows or len(rows[0]) < 8:
        raise ValueError(f"{name}: no 'Design Timing Summary' table (is it a report_timing_summary output?)")
    values = rows[0]
    if values[0] == "inf" or not re.fullmatch(_NUM, values[0]):
        raise ValueError(f"{name}: WNS is {values[0]!r}: no timed path (is the clock constrained?)")
    summary = {"wns_ns": float(values[0]), "tns_ns": float(values[1]), "failing_endpoints": int(values[2]),
               "whs_ns": _float(values[4]), "ths_ns": _float(values[5])}
    clocks = {}
    for row in _table_rows(_section(text, "Clock Summary") or []):
        waveform_end = next((i for i, t in enumerate(row) if t.endswith("}")), None)
        if waveform_end is not None and len(row) >= waveform_end + 3:
            clocks[row[0]] = {"period_ns": float(row[waveform_end + 1]), "wns_ns": None}
    if not clocks:
        raise ValueError(f"{name}: no 'Clock Summary' table (no clock is defined: create_clock missing?)")
    for row in _table_rows(_section(text, "Intra Clock Table") or []):
        if row[0] in clocks and len(row) > 1 and re.fullmatch(_NUM, row[1]):
            clocks[row[0]]["wns_ns"] = float(row[1])
    timed = {c: v for c, v in clocks.items() if v["wns_ns"] is not None}
    if timed:
        clock = min(timed, key=lambda c: timed[c]["wns_ns"])
        wns = timed[clock]["wns_ns"]
    elif len(clocks) == 1:
        clock, wns = next(iter(clocks)), summary["wns_ns"]
    else:
        raise ValueError(f"{name}: no 'Intra Clock Table' row with a WNS for any of the clocks {sorted(clocks)}")
    period = clocks[clock]["period_ns"]
    return {**summary, "clocks": clocks, "clock": clock, "period_ns": period,
            "fmax_mhz": 1e3 / (period - wns), "worst_path": _worst_setup_path(text)}


def _worst_setup_path(text: str) -> dict | None:
    best = None
    starts = list(_SLACK_RX.finditer(text))
    for i, m in enumerate(starts):
        if m.group(2) == "inf":
            continue
        block = text[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        fields = {}
        for line in block.splitlines()[1:30]:
            f = _FIELD_RX.match(line)
            if f and f.group(1) not in fields:
                fields[f.group(1)] = f.group(2).strip()
        if not fields.get("Path Type", "").startswith("Setup"):
            continue
        slack = float(m.group(2))
        if best is not None and slack >= best["slack_ns"]:
            continue
        dp = _DATA_PATH_RX.match(fields.get("Data Path Delay", ""))
        levels = _LEVELS_RX.match(fields.get("Logic Levels", ""))
        by_type = {}
        if levels and levels.group(2):
            for item in levels.group(2).split():
                kind, _, count = item.partition("=")
                if count.isdigit():
                    by_type[kind] = int(count)
        requirement = re.match(_NUM, fields.get("Requirement", ""))
        best = {
            "start": signal_of(fields.get("Source", "")),
            "end": signal_of(fields.get("Destination", "")),
            "slack_ns": slack,
            "requirement_ns": float(requirement.group(0)) if requirement else None,
            "data_path_ns": float(dp.group(1)) if dp else None,
            "logic_ns": float(dp.group(2)) if dp else None,
            "route_ns": float(dp.group(3)) if dp else None,
            "logic_levels": int(levels.group(1)) if levels else None,
            "levels_by_type": by_type,
        }
    return best


#: report_utilization site types -> report.json keys; the first name found wins (UltraScale, 7 series).
UTILIZATION_ROWS = {
    "lut": ("CLB LUTs", "Slice LUTs"),
    "ff": ("CLB Registers", "Slice Registers"),
    "lutram": ("LUT as Memory",),
    "dsp": ("DSPs", "DSP Slices"),
    "bram": ("Block RAM Tile",),
    "ramb36": ("RAMB36/FIFO",),
    "ramb18": ("RAMB18",),
    "uram": ("URAM",),
}
_REQUIRED = ("lut", "ff", "dsp", "bram")


def parse_utilization(text: str, name: str = "the utilisation report") -> dict:
    """Parse ``report_utilization`` text: the "Used" count of each site type of :data:`UTILIZATION_ROWS`.

    Returns:
        ``{"lut", "ff", "lutram", "dsp", "bram", "bram_unit": "RAMB36", "ramb36", "ramb18", "uram"}``;
        ``bram`` counts Block RAM tiles (one RAMB36 or two RAMB18 each, so it may end in .5);
        a site type the family lacks (URAM on a 7 series) is None.

    Raises:
        ValueError: naming ``name``: a LUT, register, DSP or Block RAM row is missing.
    """
    used_col = None
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "Site Type":
            used_col = cells.index("Used") if "Used" in cells else None
            continue
        if used_col is None or len(cells) <= used_col:
            continue
        site = cells[0].rstrip("*").strip()
        for key, names in UTILIZATION_ROWS.items():
            if key not in found and site in names and re.fullmatch(_NUM, cells[used_col]):
                value = float(cells[used_col])
                found[key] = int(value) if value.is_integer() else value
    missing = [UTILIZATION_ROWS[k][0] for k in _REQUIRED if k not in found]
    if missing:
        raise ValueError(f"{name}: no {', '.join(repr(m) for m in missing)} row with a 'Used' count "
                         "(is it a report_utilization output?)")
    return {**{k: found.get(k) for k in UTILIZATION_ROWS}, "bram_unit": "RAMB36"}


def _read(path: Path, what: str, hint: str = "run the Vivado flow first: sh run.sh") -> str:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {what} ({hint})")
    return path.read_text(errors="replace")


def vivado_report(folder: str | os.PathLike) -> dict:
    """Read the reports a Vivado run of an ``onchip vivado`` folder left there into ``folder/report.json``.

    The folder's ``manifest.json`` names the flow, its report files, the part and the learner's
    latency in cycles; latency in ns = cycles * 1000 / fmax.

    Returns:
        the report: manifest fields (``flow``, ``part``, ``top``, ``board``), ``device`` and
        ``vivado_version`` from the report header, the timing of :func:`parse_timing_summary`
        (``timing_met``: WNS >= 0 and WHS >= 0), the counts of :func:`parse_utilization`,
        ``latency_cycles_*``, ``initiation_interval`` and ``latency_ns_prediction`` /
        ``latency_ns_update`` at fmax.

    Raises:
        FileNotFoundError: no manifest or report file (the message names it).
        ValueError: a malformed manifest or report (the message names the file), a report of
            another device than the folder's part, or an IP packaging folder (nothing is
            implemented there).
    """
    folder = Path(folder)
    manifest_path = folder / "manifest.json"
    try:
        manifest = json.loads(_read(manifest_path, "manifest.json", "is it a folder written by onchip vivado?"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{manifest_path}: not JSON ({exc})") from None
    if manifest.get("flow") == "ip":
        raise ValueError(f"{manifest_path}: an IP packaging folder (onchip vivado --ip) has no timing to report; "
                         "implement the learner with --part or --board")
    reports = manifest.get("reports")
    cycles = {k: manifest.get(k) for k in ("latency_cycles_prediction", "latency_cycles_update",
                                            "initiation_interval")}
    if not isinstance(reports, dict) or {"timing", "utilization"} - set(reports) or None in cycles.values():
        raise ValueError(f"{manifest_path}: lacks 'reports' or the latency in cycles "
                         "(written by an older onchip vivado? write the folder again)")
    timing_path, util_path = folder / reports["timing"], folder / reports["utilization"]
    timing_text = _read(timing_path, "report_timing_summary output")
    timing = parse_timing_summary(timing_text, str(timing_path))
    util = parse_utilization(_read(util_path, "report_utilization output"), str(util_path))
    header = dict(_HEADER_RX.findall(timing_text))
    device, part = header.get("Device"), str(manifest.get("part", ""))
    # Vivado writes a 7-series device without its "xc" (7z010-clg400), an UltraScale one with it
    bare = lambda name: name.replace("-", "").lower().removeprefix("xc")  # noqa: E731
    if device and not bare(part).startswith(bare(device)):
        raise ValueError(f"{timing_path}: a report for device {device}, but the folder's part is {part} "
                         "(reports of another run?)")
    fmax = timing["fmax_mhz"]
    report = {
        **{k: manifest[k] for k in ("flow", "part", "top", "board") if k in manifest},
        "device": header.get("Device"),
        "vivado_version": header.get("Tool Version"),
        "clock_mhz": 1e3 / timing["period_ns"],
        **timing,
        "timing_met": timing["wns_ns"] >= 0 and timing["whs_ns"] >= 0,
        **util,
        **cycles,
        "latency_ns_prediction": cycles["latency_cycles_prediction"] * 1e3 / fmax,
        "latency_ns_update": cycles["latency_cycles_update"] * 1e3 / fmax,
        "reports": reports,
    }
    # replace report.json whole: a reader never sees half a file
    fd, tmp = tempfile.mkstemp(prefix=".report.", suffix=".json", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(_jsonable(report), indent=2) + "\n")
    os.replace(tmp, folder / "report.json")
    return report
