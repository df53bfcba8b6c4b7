"""Formal checks of a generated learner with SymbiYosys and Yices 2 (all from pip).

Where simulation samples input sequences, these cover every one:

* :func:`prove` proves the stream protocol of the core and of its AXI4-Stream wrapper for every
  input sequence and every cycle, by k-induction (:mod:`onchip.formal.protocol`, the properties
  in :mod:`onchip.formal.properties`); proves (or checks to a bound) that s ready rises when the
  reload ends and that a prediction leaves within the reported latency; reaches covers that a
  working core must reach (a sample accepted, a prediction delivered, an update committed, a
  parameter written and read back: :mod:`onchip.formal.covers`), so a dead core cannot pass;
  and checks to a bound that a parameter read returns the word last written, at an arbitrary
  address;
* :func:`check_plans` checks to a bound that ``timing = "fast"`` and ``"compact"`` of one spec
  give the same predictions and parameters (:mod:`onchip.formal.equivalence`);
* :func:`check_plans_per_item` proves the same item by item, for every parameter state, every
  sample and every command offered to an idle core (:mod:`onchip.formal.items`);
* :func:`check_netlist` checks to a bound that Yosys's synthesised netlist equals the RTL.

Each property gets a :class:`PropertyResult`; a bounded result carries its bound (cycles, and
samples for the timing plans) and is never reported as proved. ``onchip verify --formal`` puts
them in the same report and JUnit XML as the simulation checks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .equivalence import (NETLIST_PROPERTIES, PLANS_LEVELS, PLANS_PROPERTIES, PLANS_SOLVER, check_netlist, check_plans,
                          plans_depth, plans_miter)
from .items import ITEMS_LEVEL, ITEMS_PROPERTIES, ItemsError, check_plans_per_item
from .covers import COVER_PROPERTIES, check_covers
from .properties import (AXIS_PROPERTIES, LEVELS, PROTOCOL_PROPERTIES, READBACK_PROPERTIES, RESPONSE_PROPERTIES,
                         harness, protocol_properties)
from .protocol import PropertyResult, prove_protocol
from .sby import missing_tools

__all__ = ["PropertyResult", "prove", "prove_readback", "check_covers", "check_plans", "check_plans_per_item", "check_netlist",
           "missing_tools", "ITEMS_LEVEL", "ITEMS_PROPERTIES", "ItemsError",
           "harness", "plans_miter", "protocol_properties", "PROTOCOL_PROPERTIES", "AXIS_PROPERTIES",
           "READBACK_PROPERTIES", "RESPONSE_PROPERTIES", "COVER_PROPERTIES", "PLANS_PROPERTIES", "PLANS_LEVELS", "PLANS_SOLVER", "NETLIST_PROPERTIES", "LEVELS", "plan_designs", "plans_depth"]

def _folder(folder) -> Path:
    return Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="onchip-formal-"))


#: solver seconds of the bounded read-back check (the bound reached in that time is reported)
READBACK_TIMEOUT = 120


def prove_readback(design, theta0, folder, *, verilog: str | None = None, timeout: float = READBACK_TIMEOUT,
                   log=lambda text: None) -> list[PropertyResult]:
    """Bounded check of :func:`~onchip.formal.properties.readback_properties` on the core of ``design`` (an
    :class:`onchip.hw.Design` whose parameters reset to ``theta0``, raw (P,)): every input
    sequence of up to :func:`onchip.formal.properties.readback_depth` cycles from reset, or of the
    cycles the solver checked in ``timeout`` seconds.

    Returns:
        One :class:`PropertyResult` per property: ``bounded`` (with ``bound``) or ``failed``.
    """
    from . import sby
    from .properties import readback_depth, readback_harness, readback_properties
    from .protocol import script

    props, _ = readback_harness(design.info, "core", theta0)
    depth = readback_depth(design.info)
    r = sby.run_job(Path(folder), "readback_bmc", mode="bmc", depth=depth, script=script(design.top, "", map_memories=True),
                    files={"design.v": verilog or design.verilog, "onchip_props.sv": props}, timeout=timeout)
    log(f"formal core: read-back checked to {depth} cycles: {r.status} {' '.join(r.failed)} ({r.seconds:.1f} s)")
    out = []
    for name in readback_properties(design.info):
        if r.status == "FAIL" and name in r.failed:
            trace = r.traces.get(name)
            out.append(PropertyResult(name, "core", "failed", bound=r.steps_checked, seconds=r.seconds,
                                      trace=trace, detail=f"counterexample within {r.steps_checked} cycles of "
                                                          f"reset (trace: {trace})"))
        else:
            out.append(PropertyResult(name, "core", "bounded", bound=r.steps_checked, seconds=r.seconds,
                                      detail=f"bounded, not a proof: holds for every input sequence of up to "
                                             f"{r.steps_checked} cycles from reset, at any address"))
    return out


def prove(spec, *, top: str | None = None, theta=None, folder=None, levels=LEVELS, readback: bool = True,
          live: bool = True, log=lambda text: None, verilog: dict[str, str] | None = None) -> list[PropertyResult]:
    """Prove the stream protocol of the learner generated for ``spec``, that it does its work
    (bounded response, covers), and check its read-back to a bound.

    Args:
        spec: a :class:`~onchip.spec.LearnerSpec`.
        top: the core's module name (default :data:`onchip.hw.TOP`).
        theta: raw reset values of the parameters (P,) (default: the spec's initial ones).
        folder: where the SBY jobs run (logs, models, counterexample traces); a new temporary
            folder when None.
        levels: any of :data:`LEVELS`.
        readback: also run :func:`prove_readback` on the core.
        live: also check, at every level, :data:`RESPONSE_PROPERTIES` (proved, or bounded where
            the induction does not close) and :data:`COVER_PROPERTIES` (each ``covered`` by a
            trace from reset, or ``failed``): the protocol alone holds on a core that never
            accepts a sample.
        log: called with one line per solver run.
        verilog: level -> Verilog to check instead of the generated one (a modified copy).

    Returns:
        The :class:`PropertyResult` of every property: per level its protocol properties in order,
        then (``live``) its response properties and its covers; then the read-back ones.

    Raises:
        ValueError: an unknown level, or a spec that cannot be generated (as :func:`onchip.hw.generate`).
        FileNotFoundError: the formal tools are not installed (:func:`missing_tools` says which).
    """
    from ..hw import TOP, generate
    from ..model.golden import check_parameters, initial_parameters

    bad = [lv for lv in levels if lv not in LEVELS]
    if bad or not levels:
        raise ValueError(f"levels: choose from {LEVELS}, got {list(levels)!r}")
    why = missing_tools()
    if why:
        raise FileNotFoundError(why)
    if spec.channels > 1:  # (N, P); the covers take channel 0's
        from ..hw.interface import channel_parameters

        theta_all = channel_parameters(spec, theta)
        theta0 = theta_all[0]
    else:
        theta0 = theta_all = initial_parameters(spec) if theta is None else check_parameters(spec, theta)
    design = generate(spec, top=top or TOP, theta=theta, axis="axis" in levels)
    folder = _folder(folder)
    verilog = verilog or {}
    out = []
    for level in levels:
        text = verilog.get(level) or (design.verilog if level == "core" else design.axis_verilog)
        out += prove_protocol(design.info, text, level, folder / level, log=log)
        if live:
            out += prove_protocol(design.info, text, level, folder / level, response=True, log=log)
            out += check_covers(design.info, text, level, theta0, folder / level, log=log)
    if readback:
        out += prove_readback(design, theta_all, folder / "readback", verilog=verilog.get("core"), log=log)
    return out


def plan_designs(spec, theta=None):
    """The cores of ``spec`` at ``timing = "compact"`` and ``"fast"`` (modules ``onchip_compact`` and
    ``onchip_fast``) for :func:`check_plans`.

    Raises:
        ValueError: its pipelined staleness is below
            the fast plan's smallest (:func:`onchip.hw.generate` names the minimum).
    """
    import dataclasses

    from ..hw import generate

    return (generate(dataclasses.replace(spec, timing="compact"), top="onchip_compact", axis=False, theta=theta),
            generate(dataclasses.replace(spec, timing="fast"), top="onchip_fast", axis=False, theta=theta))
