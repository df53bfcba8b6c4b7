"""Time-multiplexed ("serial") KAN learner: a chosen number of edge lanes per layer, coefficients in RAM.

The parallel KAN (:class:`~onchip.hw.learner.OnchipLearner`) gives every edge its own k+1
multipliers, so its DSP count grows with the number of edges. Here layer l has
c = min(``spec.lanes``, n_in) lanes; each lane processes one edge per clock cycle (its k+1
active coefficients, the sparse access of Liu et al., "KAN: Kolmogorov-Arnold Networks", 2024,
Sec. 2.2), so the multipliers grow with the lanes, not with the edges, and the cycles with
the edges divided by the lanes. The arithmetic and every rounding point are those of
:func:`onchip.model.kernels.kan_step` (sequential schedule), bit for bit.

Edges and storage. The inputs of layer l are split over its lanes: lane a takes inputs
i = t c + a, t = 0 .. T - 1, T = ceil(n_in / c). A pass over the layer takes S = n_out T steps,
step s = j T + t handling output j and, on lane a, edge (j, t c + a) (a lane whose input
would be >= n_in idles). Lane a keeps the coefficients of its edges in k+1 RAM banks
(``amaranth.lib.memory.Memory``, one read and one write port: LUTRAM or block RAM by size):
coefficient q of the edge of step s is word s ceil((G+k)/(k+1)) + q div (k+1) of bank
q mod (k+1), so the k+1 coefficients an input reads fall in the k+1 banks (as in
:mod:`onchip.hw.coefmem`) and a step reads every bank once.

Per layer, in its forward pass (cycle k = 0 .. S + 3 of the pass):

* k = 0: the B-spline units locate every input (cell, basis values and derivatives, clamp
  flag) and their outputs are registered for the whole sample;
* k = 1 .. S: step s = k - 1 reads its coefficients (every lane, every bank);
* k = s + 2: the lane's spline dot sum_m acc(coef[c+m] * B_m) (k+1 multipliers), the lanes
  added; k = s + 3: added into output j's accumulator, wrapping in the ``acc`` width (``acc``
  overflow is WRAP, so this equals the golden sum wrapped once);
* k = S + 3: the outputs, converted into ``act``, go to the next layer (or the prediction).

Backward pass of layer l, last layer first, with the error e of its outputs (the output
layer forms it in its k = 0 from the prediction and the sample's kind):

* k = 1 .. S: step s reads its coefficients again (pre-update: this layer is not yet updated)
  and forms its deltas requant(e_j B_m 2**-s -> ``coef``) (registered: they need no coefficient);
* k = s + 2: the sparse update, read-modify-write: coef[c+m] = overflow(coef[c+m] - delta_m)
  written back; hidden-input layers also form
  dphi = requant(wrap(sum_m acc(coef[c+m] dB_m)) -> ``grad``) on the same multipliers;
* k = s + 3: acc(e_j dphi) added into input i's error accumulator;
* k = S + 3 (layers > 0): the error to the previous layer, requant(-> ``grad``), 0 where the
  input was clamped (the edge is flat outside the grid).

Timing (cycles counted from the accepting cycle, offset 0; S_l = n_out T_l):

* prediction latency P = 1 + sum_l (S_l + 4);
* backward pass: layer l > 0 takes S_l + 4 cycles, layer 0 S_0 + 2; a layer's update is
  committed (its last coefficient written, the ``commit_l<l>`` strobe) in cycle S_l + 1 of its
  pass;
* initiation interval II = P + sum_{l>0} (S_l + 4) + S_0 + 2 (the next sample is accepted the
  cycle after layer 0's update is committed).

``timing = "fast"`` (:func:`pass_offsets`) registers every step: the cycle that handles a step
(its stage 0) picks the step's input and registers its words' bank addresses and its basis values
already in bank order (no multiplexer after the RAM); stage 1 issues the read from those registers;
every raw product (the spline dot's, the update's deltas e_j B_m, the error term e_j dphi) is
registered (on ECP5 in the MULT18X18D's output register, :mod:`onchip.hw.dsp`); the RAM word and
the rounded delta are registered and the update written back in stage 3; the products'
conversion into ``acc`` takes a stage when it rounds or saturates (R = 1, else 0), the k+1 terms'
adder tree K = :func:`~onchip.hw.plan.tree_stages` (k+1) stages and the dot is registered; the
lanes' tree takes C = tree_stages(max lanes) stages; dphi, e_j dphi and its conversion are
registered. The B-spline unit is cut in two cycles, its table in logic; the pass strobes, the
output error's load, the reload's ``active`` and the port's busy flag are registers decoded a cycle
ahead; the port's constant multiplies are shifts and adds in logic, with one decode step more
(:func:`port_stages`). So a forward pass takes S_l + 7 + R + K + C cycles, a backward
pass S_l + 9 + R + K (layer 0: S_0 + 4, the commit in its cycle S_0 + 3):

* P = 1 + sum_l (S_l + 7 + R + K + C);
* II = P + sum_{l>0} (S_l + 9 + R + K) + S_0 + 4.

A prediction that has not been taken holds the next sample's forward pass in its last cycle.
Streams as :class:`~onchip.hw.mlp_serial.SerialMlpLearner`'s (:mod:`onchip.hw.serial_front`): a
command waits until the learner is idle and its last prediction is taken, then reads or writes
theta[addr] (flat index of :func:`onchip.model.golden.layout`) and answers one word. The port
decodes the address into layer, lane, bank and word in N = :func:`port_stages` registered steps
(one constant multiply each: the decode was the routed critical path, 24 MHz on the ECP5; 7, fast
8), so a command answers N + 1 cycles after it is taken. After reset the banks are rewritten from
a ROM of the initial parameters through the same stages (n_params + 1 + N cycles, with
``s.ready`` and ``pc.ready`` low until the last word is written).
"""

from __future__ import annotations

import functools

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib.memory import Memory

from ..model.golden import kernel_config, layout
from ..spec import LearnerSpec
from .bspline import BSplineUnit
from .coefmem import bank_address, by_bank, by_basis, split_cell
from .dsp import check_dsp, registered_product
from .fixedpoint import fmt_shape, node, overflow, requant, requant_by_carry, requant_has_logic
from .layers import staged_tree, tree_sum
from .pipeline import Pipe, Staged
from .plan import tree_stages
from .ram import div_const, mul_const, port_step, ram_style
from .serial_front import SerialLearner, serial_front

__all__ = ["PORT_STAGES", "SerialKanLearner", "lane_counts", "pass_ends", "pass_offsets", "port_stages", "serial_kan_plan"]

#: registered steps of the parameter port's address decode (commands and the reload after reset);
#: ``timing = "fast"`` adds one (:func:`port_stages`)
PORT_STAGES = 7


def port_stages(spec: LearnerSpec) -> int:
    """Registered steps of the parameter port's decode: :data:`PORT_STAGES`, one more at
    ``timing = "fast"`` (the word address's multiply by the edge's depth and its addition get a
    step each; measured: together they were the routed critical path, 10.7 ns)."""
    return PORT_STAGES + int(spec.stage_timing == "fast")


def lane_counts(spec: LearnerSpec) -> list[dict]:
    """Per layer: ``{"lanes": c, "per_lane": T, "steps": S}`` (c = min(spec.lanes, n_in) lanes,
    T = ceil(n_in / c) inputs per lane, S = n_out T steps per pass)."""
    out = []
    for n_in, n_out in zip(spec.widths[:-1], spec.widths[1:]):
        c = min(spec.lanes, n_in)
        t = -(-n_in // c)
        out.append({"lanes": c, "per_lane": t, "steps": n_out * t})
    return out


def pass_offsets(spec: LearnerSpec) -> dict:
    """Where a step's operations fall in a pass, in cycles, at the spec's ``timing``.

    Returns:
        ``{"lead_f", "lead_b", "issue", "write", "acc", "eacc"}``: the cycle k of a forward
        (backward) pass that handles its first step (the inputs are located before it); then, from
        the cycle a step is handled: its RAM read issued, its coefficients written back, its lane
        sum added into the output accumulator, its error term added into the input's error
        accumulator. Compact: 1, 1, 0, 1, 2, 2. Fast: the B-spline unit takes 2 cycles (lead_f 2),
        and per step the picked operands, the read address, the RAM word, every raw product (a
        DSP's output register), the deltas, the spline dot and the lane sum are registered.
    """
    if spec.stage_timing != "fast":
        return {"lead_f": 1, "lead_b": 1, "issue": 0, "write": 1, "acc": 2, "eacc": 2}
    f = spec.formats
    # stage 1 the picked operands, 2 the RAM word, 3 the raw products (and the write-back), then
    # their conversion into acc (a stage when it rounds or saturates), the k+1 terms' tree, the dot
    terms = 3 + int(requant_has_logic(f.coef.frac_bits + f.basis.frac_bits, f.acc))
    dot = terms + tree_stages(spec.spline_order + 1) + 1
    lanes = max(c["lanes"] for c in lane_counts(spec))
    # backward: dphi (dot in grad), the raw product e dphi, its conversion into acc
    return {"lead_f": 2, "lead_b": 1, "issue": 1, "write": 3, "acc": dot + tree_stages(lanes), "eacc": dot + 3}


def pass_ends(spec: LearnerSpec) -> list[dict]:
    """Per layer, the last cycle k of its passes: ``{"fwd", "commit", "bwd"}`` (the forward pass
    ends when its outputs are ready, the update is committed at ``commit``, a hidden-input layer's
    backward pass ends when the error to the layer below is ready at ``bwd``; layer 0 ends at its
    commit). Compact: S + 3, S + 1, S + 3."""
    o = pass_offsets(spec)
    out = []
    for l, c in enumerate(lane_counts(spec)):
        s = c["steps"]
        commit = o["lead_b"] + s - 1 + o["write"]
        out.append({"fwd": o["lead_f"] + s + o["acc"], "commit": commit,
                    "bwd": o["lead_b"] + s + o["eacc"] if l else commit})
    return out


def serial_kan_plan(spec: LearnerSpec) -> dict:
    """Cycle offsets of the serial KAN's schedule (offset 0: the cycle accepting a sample).

    Returns:
        ``{"prediction": P, "read": [...], "update": [...], "ii": II}``: per layer l,
        ``read[l]`` the cycle its forward pass issues its first coefficient read and
        ``update[l]`` the cycle its update is committed (``commit_l<l>``); P the first cycle the
        prediction can be taken; II the cycles between accepted samples at full rate. The
        closed forms are in the module docstring.
    """
    o, ends = pass_offsets(spec), pass_ends(spec)
    read, start = [], 1  # start: the cycle k = 0 of the layer's forward pass
    for e in ends:
        read.append(start + o["lead_f"] + o["issue"])
        start += e["fwd"] + 1
    p = start
    update = [0] * len(ends)
    start = p  # k = 0 of the backward pass, last layer first
    for l in range(len(ends) - 1, -1, -1):
        update[l] = start + ends[l]["commit"]
        start += ends[l]["bwd"] + 1
    return {"prediction": p, "read": read, "update": update, "ii": update[0] + 1}


class _Layer:
    """Storage and registers of one layer: the lanes' banks, the input and error registers."""

    def __init__(self, spec: LearnerSpec, theta0, index: int, lay, lanes: dict):
        f = spec.formats
        self.index, self.offset, self.size = index, lay.offset, lay.size
        self.n_in, self.n_out = lay.n_in, lay.n_out
        self.c, self.t, self.steps = lanes["lanes"], lanes["per_lane"], lanes["steps"]
        self.k1, self.nc = spec.spline_order + 1, spec.n_coef
        self.depth = -(-self.nc // self.k1)  # words of one edge in one bank
        self.in_fmt = f.input if index == 0 else f.act
        words = self.steps * self.depth
        self.banks = []  # [lane][bank]
        for a in range(self.c):
            row = []
            for b in range(self.k1):
                init = [0] * words
                for j in range(self.n_out):
                    for t in range(self.t):
                        i = t * self.c + a
                        if i >= self.n_in:
                            continue
                        base = lay.offset + (j * self.n_in + i) * self.nc
                        s = j * self.t + t
                        for q in range(b, self.nc, self.k1):
                            init[s * self.depth + q // self.k1] = int(theta0[base + q])
                row.append(Memory(shape=fmt_shape(f.coef), depth=words, init=init,
                                  attrs={"ram_style": ram_style(words, f.coef.width)}))
            self.banks.append(row)
        self.u = [Signal(fmt_shape(self.in_fmt), name=f"l{index}_u{i}", reset_less=True) for i in range(self.n_in)]
        self.err = [Signal(fmt_shape(f.grad), name=f"l{index}_e{j}", reset_less=True) for j in range(self.n_out)]
        self.rd = self.wr = None


class SerialKanLearner(SerialLearner):
    """Sequential-schedule KAN learner of a :class:`~onchip.spec.LearnerSpec` with ``spec.lanes``
    edge lanes per layer (``datapath = "serial"``).

    Ports: those of :class:`~onchip.hw.interface.LearnerPorts`, as the other learners'.

    Attributes (after construction):
        stages: :func:`serial_kan_plan` without ``ii``, plus ``port`` 0.
        lanes: :func:`lane_counts` of the spec.
        latency_prediction, latency_update, initiation_interval: cycles, as OnchipLearner defines them.
        min_staleness: II - 1; staleness: 0; pipelined: False.
        param_storage: ``"memory"``.

    Args:
        spec: a KAN in the sequential schedule.
        theta: raw reset values of the parameters (P,) (default: the golden initial parameters).

    Raises:
        ValueError: ``spec`` is not a KAN, not sequential, or a bad ``theta``.
    """

    def __init__(self, spec: LearnerSpec, theta=None, dsp: str | None = None):
        super().__init__(spec, theta, kind="kan", plan_of=serial_kan_plan, port_stages=port_stages(spec))
        self.lanes = lane_counts(spec)
        #: fast: the raw products' registers, generic or in the device's DSP (:mod:`onchip.hw.dsp`)
        self.dsp = check_dsp(dsp)

    # -- hardware ---------------------------------------------------------------------
    def elaborate(self, platform):
        spec, f = self.spec, self.spec.formats
        m = Module()
        cfg = kernel_config(spec)
        layers = [_Layer(spec, self.theta0, l, lay, self.lanes[l]) for l, lay in enumerate(layout(spec))]
        n_layers = len(layers)
        for ly in layers:
            ly.rd = [[mem.read_port() for mem in row] for row in ly.banks]
            ly.wr = [[mem.write_port() for mem in row] for row in ly.banks]
            for a, row in enumerate(ly.banks):
                for b, mem in enumerate(row):
                    m.submodules[f"l{ly.index}_lane{a}_bank{b}"] = mem

        fast = spec.stage_timing == "fast"
        rq = requant_by_carry if fast else requant
        offs, ends = pass_offsets(spec), pass_ends(spec)
        pipe = Pipe(m, Const(1, 1))  # fast: a step's registers, advancing every cycle (stage 0: its pick)
        n_port = self.stages["port"]
        k = Signal(range(max(max(max(e["fwd"], e["bwd"]) for e in ends) + 1, n_port)), name="step")  # cycle in a pass
        idle = Signal(name="idle")
        fwd = [Signal(name=f"fwd_l{l}") for l in range(n_layers)]
        bwd = [Signal(name=f"bwd_l{l}") for l in range(n_layers)]
        commit = [Signal(name=f"commit_l{l}") for l in range(n_layers)]
        advance = [Signal(name=f"fwd_done_l{l}") for l in range(n_layers)]
        handoff = [Signal(name=f"bwd_done_l{l}") for l in range(n_layers)]  # error to layer l - 1 ready
        out_free = Signal(name="out_free")
        responding = Signal(name="responding")
        m.d.comb += out_free.eq(~self.m.valid | self.m.ready)
        for l, (ly, end) in enumerate(zip(layers, ends)):
            if not fast:
                m.d.comb += [
                    advance[l].eq(fwd[l] & (k == end["fwd"]) & (out_free if l == n_layers - 1 else 1)),
                    commit[l].eq(bwd[l] & (k == end["commit"])),
                    handoff[l].eq(bwd[l] & (k == end["bwd"]) if l else 0),
                ]
                continue
            # fast: the strobes are registers decoded a cycle ahead (a pass steps by one; a finished
            # forward pass holds its last cycle while the prediction waits)
            at_end = Signal(name=f"fwd_end_l{l}")
            m.d.sync += [
                at_end.eq(fwd[l] & ((k == end["fwd"] - 1) | ((k == end["fwd"]) & ~advance[l]))),
                commit[l].eq(bwd[l] & (k == end["commit"] - 1)),
                handoff[l].eq(bwd[l] & (k == end["bwd"] - 1) if l else 0),
            ]
            m.d.comb += advance[l].eq(at_end & (out_free if l == n_layers - 1 else 1))

        # step counters of the pass: t (input group), j (output), base (RAM word of the step's edge)
        t_c = Signal(range(max(2, max(ly.t for ly in layers))), name="step_t")
        j_c = Signal(range(max(2, max(ly.n_out for ly in layers))), name="step_j")
        base = Signal(range(max(ly.steps * ly.depth for ly in layers) + 1), name="step_base")
        # a step's read is issued this cycle, by layer (its own constant bound: no layer multiplexer
        # before the RAM address) and by any layer
        issues = [Signal(name=f"l{l}_issue") for l in range(n_layers)]
        picks = []  # fast: (forward, backward) strobes of the cycle that handles a step (its stage 0)
        for l, ly in enumerate(layers):
            if not fast:
                m.d.comb += issues[l].eq((fwd[l] | bwd[l]) & (k >= 1) & (k <= ly.steps))
                continue
            pf, pb = Signal(name=f"l{l}_pick_fwd"), Signal(name=f"l{l}_pick_bwd")
            lf, lb = offs["lead_f"], offs["lead_b"]
            m.d.sync += [pf.eq(fwd[l] & (k >= lf - 1) & (k <= lf + ly.steps - 2)),
                         pb.eq(bwd[l] & (k >= lb - 1) & (k <= lb + ly.steps - 2))]
            m.d.comb += issues[l].eq(pf | pb)
            picks.append((pf, pb))
        issue = Signal(name="issue")
        m.d.comb += issue.eq(Cat(*issues).any())
        for l, ly in enumerate(layers):
            with m.If((fwd[l] | bwd[l]) & (k == 0)):
                m.d.sync += [t_c.eq(0), j_c.eq(0), base.eq(0)]
            with m.Elif((fwd[l] | bwd[l]) & issue):
                m.d.sync += base.eq(base + ly.depth)
                with m.If(t_c == ly.t - 1):
                    m.d.sync += [t_c.eq(0), j_c.eq(j_c + 1)]
                with m.Else():
                    m.d.sync += t_c.eq(t_c + 1)
        if fast:  # the step's counters at its later stages
            t_s, j_s, base_s = (Staged(v, 0) for v in (t_c, j_c, base))
        else:  # the step one and two cycles later (its RAM data; its accumulation)
            d1, d2 = Signal(name="d1_issue"), Signal(name="d2_issue")
            m.d.sync += [d1.eq(issue), d2.eq(d1)]
            d1_t, d2_t = Signal.like(t_c, name="d1_t"), Signal.like(t_c, name="d2_t")
            d1_j, d2_j = Signal.like(j_c, name="d1_j"), Signal.like(j_c, name="d2_j")
            m.d.sync += [d1_t.eq(t_c), d2_t.eq(d1_t), d1_j.eq(j_c), d2_j.eq(d1_j)]

        strobes = {}

        def strobe_at(sig: Signal, stage: int) -> Signal:
            """A stage-0 strobe ``sig`` delayed to ``stage`` by registers with a reset (a step
            cut short by a reset writes nothing afterwards)."""
            if stage == 0:
                return sig
            key = (id(sig), stage)
            if key not in strobes:
                strobes[key] = Signal(name=f"{sig.name}_s{stage}")
                m.d.sync += strobes[key].eq(strobe_at(sig, stage - 1))
            return strobes[key]

        # -- sample stream, commands and the parameter bus (reload and writes) ------
        front = serial_front(m, self, idle, registered_reload=fast)
        xs, ys, kind, accept, execute = front.xs, front.ys, front.kind, front.accept, front.execute
        cmd_data, cmd_write, reload = front.cmd_data, front.cmd_write, front.reload
        bus_addr, bus_data, bus_we = front.bus_addr, front.bus_data, front.bus_we
        # the parameter bus decoded in n_port registered steps (flat address -> layer, lane, bank,
        # word), one constant multiply per step (fast: as shifts and adds, in logic): a reload word
        # or command reaches the RAM n_port cycles after it enters
        mul = functools.partial(mul_const, in_logic=fast)
        port_we, port_rd, port_data = bus_we, execute & ~cmd_write, bus_data
        carried = []
        for n in range(1, n_port + 1):
            port_we, port_rd, port_data = port_step(m, n, "port", we=port_we, rd=port_rd, data=port_data)
            carried.append(port_we)
        port = []  # per layer: (hit, lane, bank, word address), at the last port stage
        for ly in layers:
            l, n_edges = ly.index, ly.n_in * ly.n_out

            step = functools.partial(port_step, m, prefix=f"l{l}_port")

            hit, local = step(1, hit=(bus_addr >= ly.offset) & (bus_addr < ly.offset + ly.size),
                              local=(bus_addr - ly.offset)[: max(1, (ly.size - 1).bit_length())])
            hit, local, edge = step(2, hit=hit, local=local, edge=div_const(local, ly.nc, ly.size - 1, fast))
            hit, edge, q, j = step(3, hit=hit, edge=edge, q=(local - mul(edge, ly.nc))[: max(1, (ly.nc - 1).bit_length())],
                                   j=div_const(edge, ly.n_in, n_edges - 1, fast))
            hit, q, j, i, word = step(4, hit=hit, q=q, j=j, i=(edge - mul(j, ly.n_in))[: max(1, (ly.n_in - 1).bit_length())],
                                      word=div_const(q, ly.k1, ly.nc - 1, fast))
            hit, j, i, word, t, bank = step(5, hit=hit, j=j, i=i, word=word, t=div_const(i, ly.c, ly.n_in - 1, fast),
                                            bank=(q - mul(word, ly.k1))[: max(1, (ly.k1 - 1).bit_length())])
            hit, word, bank, lane, slot = step(6, hit=hit, word=word, bank=bank,
                                               lane=(i - mul(t, ly.c))[: max(1, (ly.c - 1).bit_length())],
                                               slot=mul(j, ly.t) + t)
            addr_bits = max(1, (ly.steps * ly.depth - 1).bit_length())
            if fast:  # the edge's first word, then the word in it
                hit, word, bank, lane, first = step(7, hit=hit, word=word, bank=bank, lane=lane,
                                                    first=mul(slot, ly.depth)[:addr_bits])
                hit, bank, lane, waddr = step(8, hit=hit, bank=bank, lane=lane, waddr=(first + word)[:addr_bits])
            else:
                hit, bank, lane, waddr = step(7, hit=hit, bank=bank, lane=lane, waddr=(
                    slot * ly.depth + word)[:addr_bits])
            port.append((hit, lane, bank, waddr))
        port_busy = Signal(name="port_busy")  # a reload word or command in the port's stages
        if fast:  # a register: the stages' contents a cycle ahead
            m.d.sync += port_busy.eq(bus_we | Cat(*carried[:-1]).any())
        else:
            m.d.comb += port_busy.eq(Cat(*carried).any())

        # -- layers ---------------------------------------------------------------
        f_prod = f.coef.frac_bits + f.basis.frac_bits
        f_update = f.grad.frac_bits + f.basis.frac_bits + spec.lr_shift
        preds = [Signal(fmt_shape(f.y), name=f"pred{j}", reset_less=True) for j in range(spec.n_out)]
        m.d.comb += [self.m.payload.pred[j].eq(v) for j, v in enumerate(preds)]
        self.decision(m, preds)
        z_prev = None
        for ly in layers:
            l, k1, hidden_in = ly.index, ly.k1, ly.index > 0
            src = xs if l == 0 else z_prev
            load = accept if l == 0 else advance[l - 1]
            with m.If(load):
                m.d.sync += [u.eq(v) for u, v in zip(ly.u, src)]
            # every input located once per sample (k = 0 of the forward pass), held to the update
            hi, lo, bval, bder, clamped = [], [], [], [], []
            for i in range(ly.n_in):
                # fast: the unit cut after its clamp, its table in logic (as on the parallel datapath)
                unit = BSplineUnit(ly.in_fmt, cfg.lo_raw[l], cfg.pos_bits[l], cfg.grid_size, cfg.table_bits,
                                   cfg.bval, cfg.bder, f.basis, split=fast, logic_rom=fast)
                m.submodules[f"l{l}_bspline{i}"] = unit
                m.d.comb += unit.u.eq(ly.u[i])
                h, o = split_cell(m, unit.cell, k1, spec.grid_size, f"l{l}_cell{i}")
                regs = [Signal(h.shape(), name=f"l{l}_hi{i}", reset_less=True),
                        Signal(o.shape(), name=f"l{l}_lo{i}", reset_less=True)]
                bv = [Signal(fmt_shape(f.basis), name=f"l{l}_bval{i}_{mm}", reset_less=True) for mm in range(k1)]
                bd = [Signal(fmt_shape(f.basis), name=f"l{l}_bder{i}_{mm}", reset_less=True)
                      for mm in range(k1)] if hidden_in else []
                cl = Signal(name=f"l{l}_clamped{i}", reset_less=True)
                if fast:  # k = 0: the clamped offset; k = 1: the cell and the basis table
                    pos = Signal.like(unit.pos, name=f"l{l}_pos{i}", reset_less=True)
                    m.d.comb += unit.pos_in.eq(pos)
                    with m.If(fwd[l] & (k == 0)):
                        m.d.sync += [pos.eq(unit.pos), cl.eq(unit.clamped)]
                located = fwd[l] & (k == offs["lead_f"] - 1)
                with m.If(located):
                    m.d.sync += [regs[0].eq(h), regs[1].eq(o)] + ([] if fast else [cl.eq(unit.clamped)])
                    m.d.sync += [r.eq(unit.bval[mm]) for mm, r in enumerate(bv)]
                    m.d.sync += [r.eq(unit.bder[mm]) for mm, r in enumerate(bd)]
                hi.append(regs[0]), lo.append(regs[1]), bval.append(bv), bder.append(bd), clamped.append(cl)

            if fast:  # the output error of the step's output, picked with its operands
                e_s1 = pipe.reg(Array(ly.err)[j_c], 0, f"l{l}_e_s1")
            else:
                e_now = node(m, Array(ly.err)[j_c], f"l{l}_e_step")
            acc = [Signal(fmt_shape(f.acc), name=f"l{l}_acc{j}", reset_less=True) for j in range(ly.n_out)]
            eacc = [Signal(fmt_shape(f.acc), name=f"l{l}_eacc{i}", reset_less=True) for i in range(ly.n_in)] \
                if hidden_in else []
            parts, terms = [], []
            p_hit, p_lane, p_bank, p_waddr = port[l]
            for a in range(ly.c):
                ins = [t * ly.c + a for t in range(ly.t)]  # lane a's inputs, by group t
                valid = Array([Const(int(i < ly.n_in), 1) for i in ins])[t_c]
                def pick(vals, ins=ins, last=ly.n_in - 1):  # lane a's value of the step's input group
                    return Array([vals[min(i, last)] for i in ins])[t_c]

                if fast:
                    part, term = self._fast_lane(m, pipe, ly, a, pick, valid, (hi, lo, bval, bder), picks[l],
                                                 strobe_at, (e_s1, base_s), port[l], (port_we, port_data), bwd[l])
                    parts.append(part)
                    terms.append(term)
                    continue
                lane_hi, lane_lo = pick(hi), pick(lo)
                # issue: the step's read addresses; its operands registered for the data cycle
                raddr = [node(m, base + bank_address(lane_hi, lane_lo, b), f"l{l}_lane{a}_raddr{b}")
                         for b in range(k1)]
                r_lo = Signal.like(lo[0], name=f"l{l}_lane{a}_lo_d1", reset_less=True)
                r_ok = Signal(name=f"l{l}_lane{a}_ok_d1", reset_less=True)
                r_addr = [Signal.like(base, name=f"l{l}_lane{a}_addr{b}_d1", reset_less=True) for b in range(k1)]
                r_op = [Signal(fmt_shape(f.basis), name=f"l{l}_lane{a}_op{mm}_d1", reset_less=True)
                        for mm in range(k1)]
                # the update's k+1 deltas, formed in the issue cycle: they need no coefficient, and the
                # data cycle then holds only read, subtract, saturate and write (measured: the delta
                # product in that cycle was the routed critical path)
                r_delta = [Signal(fmt_shape(f.coef), name=f"l{l}_lane{a}_delta{mm}_d1", reset_less=True)
                           for mm in range(k1)]
                m.d.sync += [r_lo.eq(lane_lo), r_ok.eq(valid)]
                m.d.sync += [r.eq(v) for r, v in zip(r_addr, raddr)]
                for mm in range(k1):
                    b_val = pick([bval[i][mm] for i in range(ly.n_in)])
                    # the dot's multipliers serve the forward value and the backward derivative
                    op = Mux(bwd[l], pick([bder[i][mm] for i in range(ly.n_in)]), b_val) if hidden_in else b_val
                    m.d.sync += r_op[mm].eq(op)
                    with m.If(bwd[l]):  # only then: the layers' delta products may share multipliers
                        m.d.sync += r_delta[mm].eq(requant(m, e_now * b_val, f_update, f.coef))
                # data cycle: coefficients by basis index, the dot, the sparse update
                data = [rp.data for rp in ly.rd[a]]
                coefs = by_basis(data, r_lo)
                dot = tree_sum([requant(m, coefs[mm] * r_op[mm], f_prod, f.acc) for mm in range(k1)])
                dot = node(m, overflow(m, dot, f.acc), f"l{l}_lane{a}_dot")
                parts.append(Mux(r_ok, dot, 0))
                deltas = by_bank(r_delta, r_lo)
                writeback = node(m, bwd[l] & d1 & r_ok, f"l{l}_lane{a}_writeback")
                for b, (rp, wp) in enumerate(zip(ly.rd[a], ly.wr[a])):
                    new = overflow(m, data[b] - deltas[b], f.coef)
                    bus_hit = port_we & p_hit & (p_lane == a) & (p_bank == b)
                    m.d.comb += [
                        rp.addr.eq(Mux(issues[l], raddr[b], p_waddr)),
                        wp.en.eq(writeback | bus_hit),
                        wp.addr.eq(Mux(writeback, r_addr[b], p_waddr)),
                        wp.data.eq(Mux(writeback, new, port_data)),
                    ]
                if hidden_in:  # dphi of the edge, then its share of the error to input t c + a
                    dphi = requant(m, dot, f.acc.frac_bits + spec.cell_exp, f.grad)
                    r_dphi = Signal(fmt_shape(f.grad), name=f"l{l}_lane{a}_dphi_d2", reset_less=True)
                    r_e = Signal(fmt_shape(f.grad), name=f"l{l}_lane{a}_e_d1", reset_less=True)
                    r_e2 = Signal(fmt_shape(f.grad), name=f"l{l}_lane{a}_e_d2", reset_less=True)
                    m.d.sync += [r_e.eq(e_now), r_dphi.eq(Mux(r_ok, dphi, 0)), r_e2.eq(r_e)]
                    terms.append(requant(m, r_e2 * r_dphi, 2 * f.grad.frac_bits, f.acc))
            # forward: the lanes' dots into output j's accumulator (compact: one cycle after the data)
            if fast:  # the lanes' adder tree staged up to the accumulating stage
                part = staged_tree(pipe, parts, offs["acc"], f"l{l}_part").value
                add_j = (strobe_at(picks[l][0], offs["acc"]), pipe.at(j_s, offs["acc"]))
                add_t = (strobe_at(picks[l][1], offs["eacc"]), pipe.at(t_s, offs["eacc"]))
            else:
                part = Signal(fmt_shape(f.acc), name=f"l{l}_part_d2", reset_less=True)
                m.d.sync += part.eq(tree_sum(parts))  # wraps in the acc width
                add_j, add_t = (fwd[l] & d2, d2_j), (bwd[l] & d2, d2_t)
            for j in range(ly.n_out):
                with m.If(fwd[l] & (k == 0)):
                    m.d.sync += acc[j].eq(0)
                with m.Elif(add_j[0] & (add_j[1] == j)):
                    m.d.sync += acc[j].eq(acc[j] + part)
            z_fmt = f.y if l == len(layers) - 1 else f.act  # the last layer's outputs: the output format
            z_prev = [node(m, rq(m, acc[j], f.acc.frac_bits, z_fmt), f"l{l}_z{j}") for j in range(ly.n_out)]
            if hidden_in:
                for i in range(ly.n_in):
                    with m.If(bwd[l] & (k == 0)):
                        m.d.sync += eacc[i].eq(0)
                    with m.Elif(add_t[0] & (add_t[1] == i // ly.c)):
                        m.d.sync += eacc[i].eq(eacc[i] + terms[i % ly.c])
                below = layers[l - 1]
                with m.If(handoff[l]):
                    for i in range(ly.n_in):
                        e_prev = rq(m, eacc[i], f.acc.frac_bits, f.grad)
                        m.d.sync += below.err[i].eq(Mux(clamped[i], 0, e_prev))

        # output error from the prediction by the sample's kind, in the first cycle of the backward pass
        # (fast: that cycle's strobe is a register, set as the last forward pass ends; measured: the
        # decode of the step into the error registers' enable was the routed critical path)
        first_backward = bwd[-1] & (k == 0)
        if fast:
            first_backward = Signal(name="bwd_first")
            m.d.sync += first_backward.eq(advance[-1])
        self.prediction_out(m, preds, z_prev, layers[-1].err, first_backward, advance[-1], ys, kind)

        # -- parameter responses: the word read once the command leaves the port's stages
        sel_layer = Signal(range(max(2, n_layers)), name="sel_layer")
        sels = []
        resp_write = Signal(name="resp_write")
        resp_data = Signal(fmt_shape(f.coef), name="resp_data")
        for l, (hit, lane, bank, _) in enumerate(port):
            sl, sb = Signal.like(lane, name=f"l{l}_sel_lane"), Signal.like(bank, name=f"l{l}_sel_bank")
            sels.append((sl, sb))
            with m.If(port_rd):  # the read leaves the port's stages: its word is back next cycle
                m.d.sync += [sl.eq(lane), sb.eq(bank)]
                with m.If(hit):
                    m.d.sync += sel_layer.eq(l)
        with m.If(execute):
            m.d.sync += [resp_write.eq(cmd_write), resp_data.eq(cmd_data)]
        readback = Array([Array([Array([rp.data for rp in row])[sb] for row in ly.rd])[sl]
                          for ly, (sl, sb) in zip(layers, sels)])[sel_layer]
        resp = Signal(fmt_shape(f.coef), name="resp")
        m.d.comb += self.pr.payload.data.eq(resp)
        with m.If(self.pr.ready):
            m.d.sync += self.pr.valid.eq(0)

        # -- sequencer ------------------------------------------------------------
        with m.FSM(init="IDLE", name="sequencer"):
            with m.State("IDLE"):  # after reset, busy until the reload is done
                m.d.comb += idle.eq(~reload.active & ~port_busy)
                with m.If(accept):
                    m.d.sync += k.eq(0)
                    m.next = "FWD0"
                with m.Elif(execute):
                    m.d.sync += k.eq(0)
                    m.next = "PORT"
            with m.State("PORT"):  # the command in the port's stages
                m.d.comb += responding.eq(1)
                with m.If(k == n_port - 1):
                    m.next = "RESPOND"
                with m.Else():
                    m.d.sync += k.eq(k + 1)
            with m.State("RESPOND"):
                m.d.comb += responding.eq(1)
                m.d.sync += [resp.eq(Mux(resp_write, resp_data, readback)), self.pr.valid.eq(1)]
                m.next = "IDLE"
            for l, ly in enumerate(layers):
                with m.State(f"FWD{l}"):
                    m.d.comb += fwd[l].eq(1)
                    with m.If(advance[l]):
                        m.d.sync += k.eq(0)
                        m.next = f"FWD{l + 1}" if l < n_layers - 1 else f"BWD{l}"
                    with m.Elif(k != ends[l]["fwd"]):
                        m.d.sync += k.eq(k + 1)
                with m.State(f"BWD{l}"):
                    m.d.comb += bwd[l].eq(1)
                    done = commit[l] if l == 0 else handoff[l]
                    with m.If(done):
                        m.d.sync += k.eq(0)
                        m.next = f"BWD{l - 1}" if l > 0 else "IDLE"
                    with m.Else():
                        m.d.sync += k.eq(k + 1)
        pipe.finalize()
        return m

    def _fast_lane(self, m, pipe, ly, a, pick, valid, located, pick_strobes, strobe_at, step_s, port, bus, bwd):
        """Lane ``a`` of layer ``ly`` at ``timing = "fast"`` (offsets: :func:`pass_offsets`).

        Stage 0 picks the step's input and registers its words' bank addresses and its basis values
        in bank order, so the RAM words meet their operands with no multiplexer; stage 1 issues the
        read from registers and registers the update's raw delta products; stage 2 registers the
        raw spline products (on ECP5 in the MULT18X18D), the words and the rounded deltas; stage 3
        writes the update back. Then the products' conversion into ``acc``, the k+1 terms' adder
        tree and the dot (0 on an idle lane) are registered; a hidden-input layer's backward pass
        registers dphi, the raw product e dphi and its conversion into ``acc``.

        Returns:
            (the lane's dot, :class:`~onchip.hw.pipeline.Staged` at its stage; its error term,
            Staged at ``eacc``, or None for layer 0).
        """
        spec, f, dsp = self.spec, self.spec.formats, self.dsp
        l, k1, hidden_in = ly.index, ly.k1, ly.index > 0
        hi, lo, bval, bder = located
        e_s1, base_s = step_s
        p_hit, p_lane, p_bank, p_waddr = port
        port_we, port_data = bus
        f_prod = f.coef.frac_bits + f.basis.frac_bits
        f_update = f.grad.frac_bits + f.basis.frac_bits + spec.lr_shift
        name = f"l{l}_lane{a}"

        def reg(value, stage, what):  # a value of the step's stage ``stage`` registered into the next
            return pipe.reg(value, stage, f"{name}_{what}_s{stage + 1}")

        lane_hi, lane_lo = pick(hi), pick(lo)
        ok = reg(valid, 0, "ok")
        offset = [reg(bank_address(lane_hi, lane_lo, b), 0, f"off{b}") for b in range(k1)]
        values = by_bank([pick([bval[i][mm] for i in range(ly.n_in)]) for mm in range(k1)], lane_lo)
        b_val = [reg(v, 0, f"bval{b}") for b, v in enumerate(values)]
        if hidden_in:  # the dot's multipliers serve the forward value and the backward derivative
            ders = by_bank([pick([bder[i][mm] for i in range(ly.n_in)]) for mm in range(k1)], lane_lo)
            ops = [reg(Mux(bwd, d, v), 0, f"op{b}") for b, (v, d) in enumerate(zip(values, ders))]
        else:
            ops = b_val
        issue = strobe_at(pick_strobes[0], 1) | strobe_at(pick_strobes[1], 1)
        base = pipe.at(base_s, 1)
        raddr = [node(m, base + offset[b].value, f"{name}_raddr{b}") for b in range(k1)]
        e = pipe.at(e_s1, 1)
        delta_raw = [registered_product(m, pipe, e, b_val[b].value, 1, f"{name}_dprod{b}", dsp) for b in range(k1)]
        data = [rp.data for rp in ly.rd[a]]
        prods = [registered_product(m, pipe, data[b], pipe.at(ops[b], 2), 2, f"{name}_prod{b}", dsp)
                 for b in range(k1)]
        word = [reg(data[b], 2, f"word{b}") for b in range(k1)]
        delta = [reg(requant_by_carry(m, d.value, f_update, f.coef), 2, f"delta{b}") for b, d in enumerate(delta_raw)]
        writeback = node(m, strobe_at(pick_strobes[1], 3) & pipe.at(ok, 3), f"{name}_writeback")
        waddr = [pipe.at(Staged(r, 1), 3) for r in raddr]
        for b, (rp, wp) in enumerate(zip(ly.rd[a], ly.wr[a])):
            new = overflow(m, word[b].value - delta[b].value, f.coef)
            bus_hit = port_we & p_hit & (p_lane == a) & (p_bank == b)
            m.d.comb += [
                rp.addr.eq(Mux(issue, raddr[b], p_waddr)),
                wp.en.eq(writeback | bus_hit),
                wp.addr.eq(Mux(writeback, waddr[b], p_waddr)),
                wp.data.eq(Mux(writeback, new, port_data)),
            ]
        # the dot: products into acc (a stage of its own when that rounds or saturates), k+1 terms' tree
        terms = [Staged(requant_by_carry(m, p.value, f_prod, f.acc), 3) for p in prods]
        if requant_has_logic(f_prod, f.acc):
            terms = [reg(t.value, 3, f"term{b}") for b, t in enumerate(terms)]
        total = staged_tree(pipe, terms, terms[0].stage + tree_stages(k1), f"{name}_dot", extra_last=True)
        dot = reg(Mux(pipe.at(ok, total.stage), overflow(m, total.value, f.acc), 0), total.stage, "dot")
        if not hidden_in:
            return dot, None
        dphi = reg(requant_by_carry(m, dot.value, f.acc.frac_bits + spec.cell_exp, f.grad), dot.stage, "dphi")
        eprod = registered_product(m, pipe, pipe.at(e_s1, dphi.stage), dphi.value, dphi.stage, f"{name}_eprod", dsp)
        term = reg(requant_by_carry(m, eprod.value, 2 * f.grad.frac_bits, f.acc), eprod.stage, "eterm")
        return dot, term.value
