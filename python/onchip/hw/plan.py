"""Where the learner's pipeline registers go: the stage plan of a spec, shared by the layers
(:mod:`onchip.hw.layers`), which place their registers at its stages, and the learner top
(:mod:`onchip.hw.learner`), which checks that they did and derives its schedule from it.
"""

from __future__ import annotations

from ..spec import LearnerSpec
from .fixedpoint import requant_has_logic, requant_less_fuses, subtract_requant_fuses

#: registers of a KAN parameter port at ``timing = "fast"`` (:meth:`onchip.hw.layers.KanLayer.port`)
PORT_STAGES = 4

#: ``timing = "predict-first"``: adder-tree levels in the products' cycle, before the one register of
#: the forward sum (the other levels and the rounding to ``act`` follow it, in the prediction's cycle)
PREDICT_FIRST_LEVELS = 1


def fast_registers(spec: LearnerSpec) -> bool:
    """Whether the plan registers the update path and the parameter port as ``fast`` does (raw
    products registered, rounding by carry, bank-ordered updates, the port's register stages):
    ``timing = "fast"``, and ``"predict-first"`` behind its forward path."""
    return spec.stage_timing in ("fast", "predict-first")


def predict_first_plan(spec: LearnerSpec) -> dict:
    """The stage plan of ``timing = "predict-first"`` (a one-layer KAN; :func:`stage_plan` returns it).

    Forward, in the fewest register stages its arithmetic allows: stage 0 takes the sample (the input
    register); stage 1 holds the whole B-spline unit (offset, clamp, cell, basis table in logic),
    the basis values registered in bank order beside the coefficient RAM's read address; stage 2
    (``read``) holds the RAM words times the basis values (unregistered multipliers) and
    :data:`PREDICT_FIRST_LEVELS` adder-tree levels, registered; stage 3 (``prediction``) the other
    levels and the rounding and saturation to ``act`` (the saturation decided beside the rounding's
    carry chain, :func:`~onchip.hw.fixedpoint.requant_beside`), driving the prediction and the decision
    combinationally (the sink's register ends the latency). Behind it, the prediction is registered
    (P + 1), the output error registered (E = P + 2), then the update as ``fast`` forms it (raw
    product e x b at E + 1, its rounding at U = E + 2); the parameter port has ``fast``'s stages.
    """
    a, read = 1, 2
    p = read + 1
    e = p + 2
    layer = {"in": a, "read": read, "operands": read, "product": read, "terms": read,
             "levels": PREDICT_FIRST_LEVELS, "sum": p, "out": p, "port": PORT_STAGES,
             "error": e, "delta": e + 1, "update": e + 2}
    return {"timing": spec.stage_timing, "prediction": p, "read": [read], "update": [layer["update"]],
            "port": PORT_STAGES, "layers": [layer]}


def tree_stages(n: int) -> int:
    """Registered stages of a ``fast`` adder tree over ``n`` terms: one per two of its ceil(log2 n)
    levels (:func:`onchip.hw.layers.staged_tree`)."""
    return -(-(n - 1).bit_length() // 2)


def update_fracs(spec: LearnerSpec, index: int) -> list[int]:
    """Fractional bits of layer ``index``'s raw update terms, before their rounding into ``coef``
    (:func:`onchip.model.kernels.kan_step` / ``mlp_step``): a KAN's e x b, an MLP's e x a and e (bias)."""
    f = spec.formats
    if spec.kind == "kan":
        return [f.grad.frac_bits + f.basis.frac_bits + spec.lr_shift]
    in_frac = (f.input if index == 0 else f.act).frac_bits
    return [f.grad.frac_bits + in_frac + spec.lr_shift, f.grad.frac_bits + spec.lr_shift]


def stage_plan(spec: LearnerSpec) -> dict:
    """Pipeline stages of the learner of ``spec`` (stage 0: the accepting cycle), from its kind,
    widths, formats and ``timing``. The layers (:mod:`onchip.hw.layers`) place their registers at
    the stages given here; the learner checks that they did.

    Per cycle, ``timing = "compact"``: KAN layers take 3 stages (B-spline unit and coefficient
    address; coefficient read, products and their conversion into ``acc``; adder tree and
    conversion to ``act``), MLP layers 2 (parameter read and products; sums); the output error 1;
    an update is formed in the cycle it commits; each hidden layer's back-propagated error 2
    (products; sums). ``timing = "fast"``: every product is registered raw (a DSP's output
    register can take it), its conversion into ``acc`` gets a stage of its own when it rounds or
    saturates (:func:`~onchip.hw.fixedpoint.requant_has_logic`), the KAN B-spline unit takes 2
    stages and, pipelined, KAN coefficients read from RAM are registered before their multiplier
    (measured with nextpnr-ecp5: these paths limited fmax; sequential, the basis values are
    registered in bank order beside the read address instead, so the RAM words need no
    multiplexer and meet the multipliers directly: a stage less per layer), an adder tree of n terms gets a stage per two
    of its ceil(log2 n) levels (measured: one level per stage left the tree with slack while it
    cost kan-paper a cycle; with an odd number of levels, on the sequential schedule, the stage
    after the products holds one level, as the route out of a DSP is long: measured over seeds
    1-3, user-kan-2-3-1 99.3 -> 106.4 MHz best; pipelined the first stage keeps two),
    then the conversion of the sum; an update takes 2 more
    stages (raw product e x b or e x u, then its rounding into ``coef``), so that the commit
    cycle holds only the read, the subtract-and-saturate and the write of the parameter; on the
    sequential schedule the rounding goes into the commit's subtraction instead
    (:func:`~onchip.hw.fixedpoint.subtract_requant`: the same carry chain, its saturation decided
    beside it; ``rounds_in_commit``), a stage less (pipelined, the rounded update enters the
    pending-update queue, half as wide as the raw one). Sequential, a fast KAN's first B-spline
    unit takes its offset and clamp from the sample payload in the accepting cycle (stage 0) and
    registers them in place of the input (the same logic between two registers, a stage less),
    each later B-spline unit does the same with the previous layer's outputs, which leave their
    rounding into ``act`` unregistered (``out_comb``, a stage less per hidden layer), and the output
    error is made from the output sums in the prediction's stage (E = P,
    :func:`~onchip.hw.fixedpoint.requant_less`, ``error_fused``).

    The parameter port (KAN: a flat index decoded into edge, RAM bank and word) is combinational
    when compact; fast registers it in ``port`` stages: the command, the edge (a division by
    G + k), the index inside the edge, its bank and word (measured: the decode of the reload
    counter limited kan-readout's fmax, G + k = 11). MLP parameters are registers: no stage.

    ``timing = "predict-first"``: :func:`predict_first_plan`.

    Returns:
        ``{"timing", "prediction": P, "error_fused": the output error made in the prediction's stage
        (E = P), "read": [R_l], "update": [U_l], "port": cycles a parameter-port
        command takes to reach the parameters, "layers": [dict per layer]}``;
        a layer's dict: ``in`` (stage of its inputs), ``read`` R, ``port`` (its parameter port's registers), ``operands`` (the stage whose
        cycle multiplies), ``product`` (raw or converted
        products registered), ``terms`` (products in ``acc``), ``out`` (outputs registered, or with ``out_comb`` valid
        unregistered after the sums' last register),
        ``error`` E (its output error), ``delta`` (update product registered, fast only),
        ``update`` U, ``rounds_in_commit`` (U holds the raw update, rounded by the commit), and for hidden inputs ``bproduct``, ``bterms``, ``prev`` (the
        back-propagated error registered).
    """
    if spec.stage_timing == "predict-first":
        return predict_first_plan(spec)
    fast = spec.stage_timing == "fast"
    f = spec.formats
    n_layers = len(spec.widths) - 1
    k1 = spec.spline_order + 1 if spec.kind == "kan" else 1

    def levels(n: int) -> int:
        return tree_stages(n) if fast else 0

    def to_acc(frac_from: int) -> int:  # a stage of its own for a product's conversion into acc
        return int(fast and requant_has_logic(frac_from, f.acc))

    plan = []
    # fast KAN, sequential: the first B-spline unit's offset and clamp are computed from the sample
    # payload in the accepting cycle and registered in place of the input (the payload comes from a
    # register of the caller; the same logic as from the input register, a cycle less per sample;
    # pipelined, where the rate is one sample per cycle whatever the latency, not placed so far)
    a = 0 if fast and spec.kind == "kan" and spec.schedule == "sequential" else 1
    for l in range(n_layers):
        n_in = spec.widths[l]
        in_frac = (f.input if l == 0 else f.act).frac_bits
        if spec.kind == "kan":
            # fast: the B-spline unit's clamped offset is registered before the cell index, the basis
            # table and the coefficient address (the path input -> RAM address limited fmax)
            read = a + 1 + int(fast)
            # fast, pipelined: the coefficients out of the RAM (and its by-basis mux) are registered
            # before they meet the multiplier; sequential: the basis values are registered in bank
            # order instead, and the RAM words meet the multipliers directly (measured: kan-paper 10
            # -> 9 cycles, sweeps/timing/README.md)
            operands = read + int(fast and spec.schedule != "sequential")
            terms = operands + 1 + to_acc(f.coef.frac_bits + f.basis.frac_bits)
            n_terms = n_in * k1
            back_frac = 2 * f.grad.frac_bits
        else:
            read = operands = a  # weights and inputs are registers already
            terms = read + 1 + to_acc(f.coef.frac_bits + in_frac)
            n_terms = n_in + 1
            back_frac = f.coef.frac_bits + f.grad.frac_bits
        # sequential fast KAN: a hidden layer's outputs leave unregistered after their rounding into act,
        # and the next B-spline unit registers its offset and clamp of them (as the first unit does of
        # the payload): the same logic between two registers, a stage less per hidden layer
        out_comb = fast and spec.kind == "kan" and spec.schedule == "sequential" and l < n_layers - 1
        out = terms + levels(n_terms) + int(not out_comb)
        plan.append({"in": a, "read": read, "operands": operands, "product": operands + 1, "terms": terms, "out": out,
                     "out_comb": out_comb, "port": PORT_STAGES if fast and spec.kind == "kan" else 0,
                     "back_frac": back_frac})
        a = out
    p = a
    # sequential fast: the output error is made from the output layer's sum in the prediction's own
    # stage (its rounding into act and the subtraction of y as one addition, requant_less), beside
    # the prediction
    error_fused = fast and spec.schedule == "sequential" and requant_less_fuses(f.acc.frac_bits, f.y, f.grad)
    e = p if error_fused else p + 1
    for l in range(n_layers - 1, -1, -1):
        st = plan[l]
        st["error"] = e
        st["delta"] = e + 1 if fast else e
        # sequential fast: the commit rounds the raw update inside its subtraction (one carry chain,
        # onchip.hw.fixedpoint.subtract_requant), so the update is ready with its raw product
        st["rounds_in_commit"] = fast and spec.schedule == "sequential" and all(
            subtract_requant_fuses(frac, f.coef) for frac in update_fracs(spec, l))
        st["update"] = e + 2 if fast and not st["rounds_in_commit"] else st["delta"]
        if l > 0:
            st["bproduct"] = e + 1
            st["bterms"] = e + 1 + to_acc(st["back_frac"])
            st["prev"] = e = st["bterms"] + levels(spec.widths[l + 1]) + 1
        del st["back_frac"]
    return {
        "timing": spec.stage_timing,
        "prediction": p,
        "error_fused": error_fused,
        "read": [st["read"] for st in plan],
        "update": [st["update"] for st in plan],
        "port": max(st["port"] for st in plan),
        "layers": plan,
    }
