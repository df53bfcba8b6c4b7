"""Proving the stream protocol of a generated learner (:mod:`onchip.formal.properties`).

:func:`prove_protocol` runs the property harness on the generated Verilog by k-induction with
increasing induction lengths k (:data:`INDUCTION_DEPTHS`) until SBY reports a proof. Every
property then holds in every reachable state, for all time: ``proved``, with the k that closed
the induction. When a length fails:

* a counterexample from the initial state (SBY ``FAIL``) makes the properties it violates
  ``failed``, with the VCD trace; the others are tried again without them;
* when no k up to the last one closes the induction, a bounded model check from the initial
  state looks for a real counterexample up to :func:`bmc_depth` cycles: a property it breaks is
  ``failed``; one it does not is ``not_proved``, reported with the induction length tried and
  the bound it holds to (never as proved).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from . import sby
from .properties import RESPONSE_PROPERTIES, harness, protocol_properties

#: induction lengths tried, in cycles
INDUCTION_DEPTHS = (4, 8, 16, 32)
#: per-job solver timeout, in seconds
JOB_TIMEOUT = 600
#: solver seconds of the check from reset of a response property whose induction did not close
RESPONSE_BMC_TIMEOUT = 300

STATUSES = ("proved", "bounded", "covered", "failed", "not_proved")


@dataclasses.dataclass
class PropertyResult:
    """The verdict on one property.

    Attributes:
        name: the property's label (:data:`onchip.formal.properties.PROTOCOL_PROPERTIES`...).
        level: ``"core"``, ``"axis"`` or the check it belongs to (``"equivalence"``, ``"netlist"``).
        status: ``proved`` (unbounded: k-induction closed), ``bounded`` (holds for every input
            sequence up to ``bound`` cycles from reset; not a proof), ``covered`` (a cover reached:
            ``trace`` reaches it in ``bound`` cycles from reset), ``failed`` (a counterexample,
            ``trace``; for a cover: not reached within ``bound`` cycles) or ``not_proved`` (no
            counterexample up to ``bound`` cycles, induction open at ``depth``).
        depth: the induction length k in cycles (proved / not_proved), else None.
        bound: the cycles checked from the initial state (bounded / failed / not_proved), or the
            length of the trace that reaches a cover (covered), else None.
        samples: for equivalence checks, the samples every sequence of ``bound`` cycles holds.
        seconds: wall time of the solver runs that decided it.
        trace: the counterexample VCD (failed), or the induction step's (not_proved).
        detail: one line for a report.
    """

    name: str
    level: str
    status: str
    depth: int | None = None
    bound: int | None = None
    samples: int | None = None
    seconds: float = 0.0
    trace: str | None = None
    detail: str = ""

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def top_of(info: dict, level: str) -> str:
    """The Verilog module of ``level``: the core ``info["top"]`` or the wrapper ``<top>_axis``."""
    return info["top"] if level == "core" else info["axis"]["top"]


def script(top: str, expose: str, files=("design.v",), props: str = "onchip_props.sv", *,
           map_memories: bool = False) -> str:
    """Yosys commands of a harness job: read the generated Verilog, flatten it under ``top``, expose
    the observed internal signals, read the SystemVerilog properties and prepare ``onchip_props``;
    with ``map_memories`` every memory becomes registers (``memory_map``), which the solver takes
    far faster than arrays when a check follows data through the parameter RAM."""
    reads = "\n".join(f"read_verilog {f}" for f in files)
    tail = "\nmemory_map\nopt -fast" if map_memories else ""
    return (f"{reads}\nhierarchy -top {top}\nflatten\n{expose}\nread_verilog -formal -sv {props}\n"
            f"prep -top onchip_props{tail}")


def bmc_depth(info: dict) -> int:
    """Cycles the bounded search for a counterexample covers: the reload after reset, two samples
    through prediction and update, and two commands with their responses through the port."""
    port = info["stages"].get("port", 0)
    return info["reset_cycles"] + info["latency_cycles_update"] + 2 * info["initiation_interval"] \
        + 2 * (port + 3) + 4


def response_depth(info: dict) -> int:
    """Cycles the check from reset of a response property spans: the reload, then two samples
    taken II apart, each through its prediction."""
    return info["reset_cycles"] + info["initiation_interval"] + info["latency_cycles_prediction"] + 2


def _without(text: str, labels) -> str:
    """The harness text with the assertions of ``labels`` left out."""
    for label in labels:
        text = re.sub(rf"^\s*{re.escape(label)}: assert\(.*\);\s*$\n", "", text, flags=re.M)
    return text


def prove_protocol(info: dict, verilog: str, level: str, folder, *, depths=INDUCTION_DEPTHS, settle: bool = True,
                   response: bool = False, log=lambda text: None) -> list[PropertyResult]:
    """Prove the stream-protocol properties of one generated design (or its bounded-response ones).

    Args:
        info: the design's description (:attr:`onchip.hw.Design.info`).
        verilog: the Verilog to check: ``Design.verilog`` (core) or ``Design.axis_verilog`` (axis),
            or a modified copy of it.
        level: ``"core"`` or ``"axis"``.
        folder: where the SBY jobs run (their logs, models and traces stay there).
        depths: the induction lengths to try, increasing.
        settle: after a counterexample, go on deciding the other properties without the failed
            ones (False: stop there; the undecided properties are ``not_proved``, their text
            naming the counterexample that stopped the run).
        response: check :data:`onchip.formal.properties.RESPONSE_PROPERTIES` instead, the
            protocol's assertions kept beside them as the invariants their induction needs. One
            the induction does not close is ``bounded`` to the cycles the check from reset reached
            (:func:`response_depth`, or what :data:`RESPONSE_BMC_TIMEOUT` seconds reach), never
            proved; where that check ends before the reload and one prediction, ``not_proved``.
        log: called with one line per solver run.

    Returns:
        One :class:`PropertyResult` per property of :func:`onchip.formal.properties.protocol_properties`
        (``response``: of ``RESPONSE_PROPERTIES``), in that order.

    Raises:
        FileNotFoundError: the formal tools are not installed.
        ToolError: Yosys could not read the design or the properties.
    """
    names = list(RESPONSE_PROPERTIES if response else protocol_properties(info, level))
    text, expose = harness(info, level, response=response)
    job = f"{level}_{'response' if response else 'prove'}"
    top = top_of(info, level)
    folder = Path(folder)
    results: dict[str, PropertyResult] = {}
    open_names = list(names)
    attempt = 0
    while open_names:
        props = _without(text, [n for n in names if n not in open_names])
        closed = None
        last = None
        for k in depths:
            attempt += 1
            r = sby.run_job(folder, f"{job}{attempt}", mode="prove", depth=k,
                            script=script(top, expose), files={"design.v": verilog, "onchip_props.sv": props},
                            timeout=JOB_TIMEOUT)
            log(f"formal {level}{' response' if response else ''}: k-induction at k = {k}: {r.status} {' '.join(r.failed)} ({r.seconds:.1f} s)")
            last = r
            if r.status == "PASS":
                closed = k
                break
            if r.status == "FAIL":
                break
        if closed is not None:
            for n in open_names:
                results[n] = PropertyResult(n, level, "proved", depth=closed, seconds=last.seconds,
                                            detail=f"proved by k-induction, k = {closed} cycles")
            break
        if last.status == "FAIL" and last.failed:
            bad = [n for n in last.failed if n in open_names]
            for n in bad:
                trace = last.traces.get(n) or last.trace
                results[n] = PropertyResult(n, level, "failed", bound=last.depth, seconds=last.seconds,
                                            trace=trace, detail=f"counterexample within {last.depth} cycles of "
                                                                f"reset (trace: {trace})")
            open_names = [n for n in open_names if n not in bad]
            if bad and not settle:
                return _undecided(names, results, open_names, level, bad)
            if bad:
                continue
        # the induction did not close: look for a real counterexample from reset
        depth = response_depth(info) if response else bmc_depth(info)
        attempt += 1
        b = sby.run_job(folder, f"{job}_bmc{attempt}", mode="bmc", depth=depth, script=script(top, expose),
                        files={"design.v": verilog, "onchip_props.sv": props},
                        timeout=RESPONSE_BMC_TIMEOUT if response else JOB_TIMEOUT)
        log(f"formal {level}{' response' if response else ''}: bounded check to {depth} cycles: {b.status} {' '.join(b.failed)} ({b.seconds:.1f} s)")
        bad = [n for n in b.failed if n in open_names] if b.status == "FAIL" else []
        for n in bad:
            trace = b.traces.get(n) or b.trace
            results[n] = PropertyResult(n, level, "failed", bound=depth, seconds=b.seconds, trace=trace,
                                        detail=f"counterexample within {depth} cycles of reset (trace: {trace})")
        open_names = [n for n in open_names if n not in bad]
        if bad and not settle:
            return _undecided(names, results, open_names, level, bad)
        if bad:
            continue
        reached = b.steps_checked if b.steps_checked is not None else depth
        for n in open_names:
            # a response bound checked past the reload and a sample's prediction: bounded, not proved
            if response and reached > info["reset_cycles"] + info["latency_cycles_prediction"] + 1:
                results[n] = PropertyResult(
                    n, level, "bounded", bound=reached, seconds=b.seconds,
                    detail=f"bounded, not a proof: holds for every input sequence of up to {reached} cycles from "
                           f"reset (k-induction did not close at k = {depths[-1]})")
                continue
            culprit = n in (last.failed if last else [])
            results[n] = PropertyResult(
                n, level, "not_proved", depth=depths[-1], bound=reached, seconds=b.seconds,
                trace=last.traces.get(n) if culprit else None,
                detail=(f"not proved: k-induction did not close at k = {depths[-1]}"
                        f"{' (this property failed the induction step)' if culprit else ''}; "
                        f"no counterexample within {reached} cycles of reset"))
        break
    return [results[n] for n in names]


def _undecided(names, results, open_names, level, bad) -> list[PropertyResult]:
    for n in open_names:
        results[n] = PropertyResult(n, level, "not_proved",
                                    detail=f"not decided: the run stopped at the counterexample of {', '.join(bad)}")
    return [results[n] for n in names]
