"""The two timing plans compared item by item, for every parameter state: a proof, not a bound.

The bounded miter (:func:`onchip.formal.check_plans`) unrolls both cores from reset and stalls
at the first prediction once the parameters are free. This check splits the stream instead:
an *item* is one sample, or one parameter command, offered to an *idle* core (nothing in
flight, every update committed) with ``m`` and ``pr`` taken as soon as they are valid. For
each plan, :mod:`onchip.formal.symbolic` computes the item's cycles as terms, with the
parameters one shared free value in both cores and every register that holds data between
items free too (a value of its own in each core), and a solver (Yices 2) shows:

* ``item_predictions_equal``: the sample's prediction and decision are equal;
* ``item_responses_equal``: the command's response is equal;
* ``item_parameters_equal``: every parameter after the item is equal (after a sample: its
  update; after a command: the write);
* and, checked on the terms themselves, both cores are idle again afterwards (every control
  register back to its value after reset), an idle cycle keeps them idle, and after reset
  both hold the same parameters.

Together these prove by induction over the items that, for every input sequence in which each
sample or command is offered to an idle core and the outputs are taken at once, the two plans
give the same predictions, decisions, responses and parameters, after any number of items.
Items that overlap (a sample taken while another is in flight) and stalled outputs are not
covered, nor the pipelined schedule (a lone sample leaves its update pending): the bounded miter
checks those to its bound.

Products of two free operands are abstracted (:mod:`onchip.formal.symbolic`), and sums are
written in one form whatever their adder tree, so that what both plans compute alike is one
term the solver shares. A query the solver does not refute is tried again with cut points: the
operands of products that only one plan's term holds (computed by different circuits, such as
the two plans' rounding), paired by the free symbols they depend on, are proved equal one pair
at a time and the fast core multiplies the compact core's operand from then on. Still not
refuted, it is decided with the real products; only a counterexample with them is reported
``failed``; undecided in time is ``not_proved``.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import time
from pathlib import Path

import z3

from .. import processes
from .protocol import PropertyResult
from .symbolic import Netlist, free_symbols, write_btor

ITEMS_PROPERTIES = ("item_predictions_equal", "item_responses_equal", "item_parameters_equal")
ITEMS_LEVEL = "equivalence_per_item"
#: the parameters of a core: MLP weights and biases (registers), KAN coefficient banks (memories)
#: (:mod:`onchip.hw.layers`)
PARAMETER_STATE = re.compile(r"l\d+_(?:w_\d+_\d+|b_\d+|coef_\d+_\d+_bank\d+)")
#: cycles an item is given beyond the core's update latency and port stages
SLACK_CYCLES = 4
_HOST = ("every sample (any kind, any values) and every parameter command (a read or a write of any "
         "parameter) offered to an idle core, m and pr taken at once, whatever the parameters")


class ItemsError(RuntimeError):
    """A core does not behave as the item check assumes (its control depends on data, an item
    gives no output or two): the message says which core and what."""


@dataclasses.dataclass
class _Core:
    name: str
    net: Netlist
    info: dict
    idle: dict  # node id -> term after reset and reload
    params: list  # node ids of the parameters

    def cycles(self) -> int:
        return self.info["latency_cycles_update"] + self.info["stages"]["port"] + SLACK_CYCLES


def _const(term) -> int | None:
    term = z3.simplify(term)
    return term.as_long() if z3.is_bv_value(term) else None


def _one():
    return z3.BitVecVal(1, 1)


def _taken() -> dict:
    """The host's inputs that take every output at once (``m`` and ``pr`` ready)."""
    return {"m__ready": _one(), "pr__ready": _one()}


def _core(name: str, design, verilog: str, folder: Path) -> _Core:
    """Reset and reload ``design`` symbolically until it takes a sample: its idle state."""
    net = Netlist(write_btor(verilog, design.top, folder))
    params = [nid for nid, (_, n) in net.states.items() if PARAMETER_STATE.fullmatch(n)]
    if not params:
        raise ItemsError(f"{name}: no parameter state found in the netlist")
    state = net.initial_state(f"{name}_")
    state, _ = net.step(state, {"rst": _one()})
    for _ in range(design.info["reset_cycles"] + SLACK_CYCLES):
        nxt, out = net.step(state, _taken())
        if _const(out["s__ready"]) == 1:
            return _Core(name, net, design.info, state, params)
        state = nxt
    raise ItemsError(f"{name}: s__ready is not high {design.info['reset_cycles']} cycles after reset")


def _start(core: _Core, free: set) -> dict:
    """The abstract idle state: parameters shared symbols, the registers of ``free`` symbols of
    this core, every other register at its value after reset."""
    state = dict(core.idle)
    for nid in core.params:
        s, n = core.net.states[nid]
        state[nid] = z3.Const(n, core.net.sort(s))
    for nid in free:
        s, n = core.net.states[nid]
        state[nid] = z3.Const(f"{core.name}_free_{n}", core.net.sort(s))
    return state


def _item(core: _Core, state: dict, stream: str, payload, products: str):
    """Offer ``payload`` on ``stream`` (``"s"`` or ``"pc"``) until taken, then idle inputs; returns
    the end state and the words the core gave: ``{"m": [...], "pr": [...]}``."""
    out = {"m": [], "pr": []}
    pending = True
    for cycle in range(core.cycles()):
        given = dict(_taken(), **({f"{stream}__valid": _one(), f"{stream}__payload": payload} if pending else {}))
        nxt, o = core.net.step(state, given, products=products)
        for port in ("m", "pr"):
            valid = _const(o[f"{port}__valid"])
            if valid is None:
                raise ItemsError(f"{core.name}: {port}__valid depends on data in cycle {cycle} of an item on {stream}")
            if valid:
                out[port].append(o[f"{port}__payload"])
        if pending:
            taken = _const(o[f"{stream}__ready"])
            if taken is None:
                raise ItemsError(f"{core.name}: {stream}__ready depends on data in cycle {cycle}")
            pending = not taken
        state = nxt
    if pending:
        raise ItemsError(f"{core.name}: an item on {stream} was not taken in {core.cycles()} cycles")
    word, other = ("m", "pr") if stream == "s" else ("pr", "m")
    if len(out[word]) != 1 or out[other]:
        raise ItemsError(f"{core.name}: an item on {stream} gave {len(out['m'])} words on m and "
                         f"{len(out['pr'])} on pr (one on {word} expected)")
    return state, out


def _changed(core: _Core, start: dict, end: dict) -> set:
    return {nid for nid in core.net.states if nid not in core.params and not end[nid].eq(start[nid])}


def _items(core: _Core) -> dict:
    """The items, each ``(stream, payload, assumption)``: a sample (any kind, any values), a read
    and a write (any data, any address of a parameter: 0 .. param_count - 1, the port's contract;
    the write bit is fixed, as it decides when the response comes)."""
    s = z3.BitVec("s_payload", core.net.input_width("s__payload"))
    pc = z3.BitVec("pc_payload", core.net.input_width("pc__payload"))
    fields = core.info["payload"]["pc"]
    bit = z3.BitVecVal(1 << fields["write"]["offset"], pc.size())
    lo, width = fields["addr"]["offset"], fields["addr"]["width"]
    addr = z3.Extract(lo + width - 1, lo, pc)
    valid = z3.ULT(z3.ZeroExt(64, addr), z3.BitVecVal(core.info["param_count"], width + 64))
    return {"sample": ("s", s, z3.BoolVal(True)), "read": ("pc", pc & ~bit, valid), "write": ("pc", pc | bit, valid)}


def _free_registers(core: _Core) -> tuple[set, dict]:
    """The registers of ``core`` that hold data between items: those an item (a sample, a
    command) or an idle cycle leaves at another value than after reset, to a fixpoint (every
    register not in the set returns to its value after reset). Returns the set and, from the
    fixpoint's last round, each item's run (:func:`_item`, products abstracted)."""
    free: set = set()
    while True:
        start = _start(core, free)
        runs = {item: _item(core, start, stream, payload, "uninterpreted")
                for item, (stream, payload, _) in _items(core).items()}
        ends = [end for end, _ in runs.values()] + [core.net.step(start, _taken())[0]]
        new = set().union(*(_changed(core, start, e) for e in ends)) - free
        if not new:
            return free, runs
        free |= new


def _solve(formula, folder: Path, name: str, timeout: float, *, show=()) -> tuple[str, str]:
    """``(verdict, values)`` for ``formula``: verdict ``"unsat"``, ``"sat"`` or ``"unknown"``, by
    Yices 2 (``yices-smt2``), the faster here, or by Z3 for what Yices does not read (a constant
    array: a memory's reset contents); values: on ``sat``, the terms ``show`` in a model, one line."""
    from .sby import find_tool

    solver = z3.Solver()
    solver.add(formula)
    path = folder / f"{name}.smt2"
    query = solver.to_smt2()
    if show:
        query += "(get-value (" + " ".join(t.sexpr() for t in show) + "))\n"
    path.write_text("(set-option :produce-models true)\n(set-logic QF_AUFBV)\n" + query)
    try:
        proc = processes.run([find_tool("yices-smt2") or "yices-smt2", path.name], cwd=folder, capture_output=True,
                             text=True, timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        return "unknown", ""
    lines = proc.stdout.strip().splitlines()
    if lines and lines[0] in ("sat", "unsat", "unknown") and "error" not in proc.stdout:
        return lines[0], " ".join(" ".join(lines[1:]).split())
    solver.set("timeout", int(timeout * 1000))
    verdict = str(solver.check())
    values = " ".join(f"{t} = {solver.model().eval(t, model_completion=True)}" for t in show) if verdict == "sat" else ""
    return verdict, values


def _products(term) -> tuple[dict, dict]:
    """The abstracted products (``mul`` applications, :mod:`onchip.formal.symbolic`) in ``term``, by
    term id, and every subterm's free symbols (:func:`~onchip.formal.symbolic.free_symbols`'s cache:
    term id -> (term, names))."""
    apps, symbols = {}, {}

    def visit(t):
        if z3.is_app(t) and t.decl().name() == "mul" and t.num_args() == 2:
            apps[t.get_id()] = t

    free_symbols(term, symbols, visit)
    return apps, symbols


def _merge_operands(fast: Netlist, compact_term, fast_term, folder: Path, name: str, timeout: float) -> bool:
    """Cut points for the solver: the operands of the products that only one plan's term holds
    (the same product, its operand computed by another circuit, such as the two plans' rounding),
    paired by the free symbols they depend on, proved equal one pair at a time, and recorded in
    ``fast.merged`` so that a new run of the fast core multiplies the compact core's operand.
    Returns whether a pair was merged."""
    (apps_c, sym_c), (apps_f, sym_f) = _products(compact_term), _products(fast_term)
    symbols = {**sym_c, **sym_f}
    candidates: dict = {}  # (operand index, its free symbols) -> ({id: compact operand}, {id: fast operand})
    for side, (mine, other) in enumerate(((apps_c, apps_f), (apps_f, apps_c))):
        for key, app in mine.items():
            if key not in other:
                for n, operand in enumerate(app.children()):
                    candidates.setdefault((n, symbols[operand.get_id()][1]), ({}, {}))[side][operand.get_id()] = operand
    merged = False
    for ours, theirs in candidates.values():
        if len(ours) == 1 and len(theirs) == 1:
            (c,), (f,) = ours.values(), theirs.values()
            if f.get_id() not in fast.merged and not c.eq(f):
                if _solve(c != f, folder, f"{name}_merge{len(fast.merged)}", timeout)[0] == "unsat":
                    fast.merged[f.get_id()] = (f, c)
                    merged = True
    return merged


def _equal_parameters(cores, ends) -> list[tuple]:
    """(label, compact term, fast term) per parameter: a word at a free address for a memory."""
    pairs = []
    for nid_c in cores[0].params:
        name = cores[0].net.states[nid_c][1]
        nid_f = cores[1].net.names.get(name)
        if nid_f is None:
            raise ItemsError(f"the fast core has no parameter {name}")
        c, f = ends[0][nid_c], ends[1][nid_f]
        if z3.is_array(c):
            at = z3.Const(f"{name}_addr", c.sort().domain())
            c, f = z3.Select(c, at), z3.Select(f, at)
        pairs.append((name, c, f))
    return pairs


def check_plans_per_item(compact, fast, folder, *, timeout: float = 600.0, properties=ITEMS_PROPERTIES,
                         compact_verilog: str | None = None, fast_verilog: str | None = None,
                         log=lambda text: None) -> list[PropertyResult]:
    """Prove, item by item (module docstring), that the cores ``compact`` and ``fast`` (the
    :class:`onchip.hw.Design` pair of :func:`onchip.formal.plan_designs`) compute the same thing.

    Args:
        folder: where the BTOR2 netlists and the solver's queries are written.
        timeout: seconds of solver time for each query (one per property and item).
        properties: the properties to check, a subset of :data:`ITEMS_PROPERTIES`.
        compact_verilog: Verilog to check instead of the compact design's own (an injected bug).
        fast_verilog: the same for the fast design.
        log: called with one line per step.

    Returns:
        One :class:`PropertyResult` per property, level :data:`ITEMS_LEVEL`: ``proved``,
        ``failed`` (the two plans differ on an item; ``detail`` names the item, the quantity and
        the item's payload in a counterexample) or ``not_proved`` (a query undecided within
        ``timeout``: with the products abstracted, then with the real products).

    Raises:
        ValueError: an unknown property, or a schedule other than sequential.
        ItemsError: a core's control depends on data, or an item gives no output.
        ToolError: Yosys failed.
    """
    if compact.info["schedule"] != "sequential":
        raise ValueError(f"schedule: the item-by-item proof is for the sequential schedule (a lone pipelined sample "
                         f"leaves its update pending), got {compact.info['schedule']!r}")
    unknown = [p for p in properties if p not in ITEMS_PROPERTIES]
    if unknown:
        raise ValueError(f"properties: {unknown[0]!r} is not one of {', '.join(ITEMS_PROPERTIES)}")
    folder = Path(folder)
    t0 = time.perf_counter()
    cores = [_core("c", compact, compact_verilog or compact.verilog, folder / "compact"),
             _core("f", fast, fast_verilog or fast.verilog, folder / "fast")]
    fixed = [_free_registers(core) for core in cores]
    free = [f for f, _ in fixed]
    log(f"formal items: reset, reload and the registers holding data between items "
        f"({len(free[0])} compact, {len(free[1])} fast) in {time.perf_counter() - t0:.1f} s")
    items = _items(cores[0])
    known = {("uninterpreted", item): [r[item] for _, r in fixed] for item in items}

    stale: set = set()  # runs whose fast core is to run again (operands merged since)

    def runs(products, item):  # both cores' run of an item; the exact products only when asked
        key = (products, item)
        stream, payload, _ = items[item]
        if key not in known:
            known[key] = [_item(core, _start(core, f), stream, payload, products) for core, f in zip(cores, free)]
        elif key in stale:
            known[key] = [known[key][0], _item(cores[1], _start(cores[1], free[1]), stream, payload, products)]
        stale.discard(key)
        return known[key]

    reset = _equal_parameters(cores, [c.idle for c in cores])
    if _solve(z3.Or(*[c != f for _, c, f in reset]), folder, "reset_parameters", timeout)[0] != "unsat":
        raise ItemsError("the two cores do not hold the same parameters after reset")

    # property -> products -> [(label, item, compact term, fast term)]
    checks = {
        "item_predictions_equal": lambda p: [("prediction", "sample", *(r[1]["m"][0] for r in runs(p, "sample")))],
        "item_responses_equal": lambda p: [(f"response to a {item}", item, *(r[1]["pr"][0] for r in runs(p, item)))
                                           for item in ("read", "write")],
        "item_parameters_equal": lambda p: [(f"after a {item}: {label}", item, c, f) for item in items
                                            for label, c, f in _equal_parameters(cores, [r[0] for r in runs(p, item)])],
    }
    results = []
    for name in properties:
        terms = checks[name]
        t1 = time.perf_counter()
        abstract = terms("uninterpreted")
        status, detail = "proved", ""
        for i in range(len(abstract)):
            label, item, c, f = abstract[i]
            _, payload, assumption = items[item]
            verdict, _ = _solve(z3.And(assumption, c != f), folder, f"{name}_{i}", timeout)
            while verdict != "unsat" and _merge_operands(cores[1].net, c, f, folder, f"{name}_{i}", timeout):
                stale.update(k for k in known if k[0] == "uninterpreted")
                abstract = terms("uninterpreted")  # every quantity again, with the operands merged so far
                *_, c, f = abstract[i]
                verdict, _ = _solve(z3.And(assumption, c != f), folder, f"{name}_{i}", timeout)
            if verdict != "unsat":  # the abstraction may be too weak: the real products decide
                *_, xc, xf = terms("exact")[i]
                verdict, values = _solve(z3.And(assumption, xc != xf), folder, f"{name}_{i}_exact", timeout,
                                         show=[z3.simplify(payload)])
            if verdict == "sat":
                status, detail = "failed", f"the plans differ on a {item}: {label} ({values})"
                break
            if verdict != "unsat":
                status, detail = "not_proved", f"not proved: {label} undecided within {timeout:.0f} s"
                break
        if status == "proved":
            detail = (f"proved for {_HOST} ({len(abstract)} {'quantity' if len(abstract) == 1 else 'quantities'}; "
                      "by induction over the items, for every number of them)")
        results.append(PropertyResult(name, ITEMS_LEVEL, status, seconds=time.perf_counter() - t1, detail=detail))
        log(f"formal items: {name}: {status} ({results[-1].seconds:.1f} s)")
    return results
