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

A prediction that has not been taken holds the next sample's forward pass in its last cycle.
Streams as :class:`~onchip.hw.mlp_serial.SerialMlpLearner`'s (:mod:`onchip.hw.serial_front`): a
command waits until the learner is idle and its last prediction is taken, then reads or writes
theta[addr] (flat index of :func:`onchip.model.golden.layout`) and answers one word. The port
decodes the address into layer, lane, bank and word in :data:`PORT_STAGES` registered steps (one
constant multiply each: the decode was the routed critical path, 24 MHz on the ECP5), so a
command answers PORT_STAGES + 1 cycles after it is taken. After reset the banks are rewritten
from a ROM of the initial parameters through the same stages (P + 1 + PORT_STAGES cycles, with
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
from .fixedpoint import fmt_shape, node, overflow, requant
from .layers import tree_sum
from .ram import div_const, port_step, ram_style
from .serial_front import SerialLearner, serial_front

__all__ = ["PORT_STAGES", "SerialKanLearner", "lane_counts", "serial_kan_plan"]

#: registered steps of the parameter port's address decode (commands and the reload after reset)
PORT_STAGES = 7


def lane_counts(spec: LearnerSpec) -> list[dict]:
    """Per layer: ``{"lanes": c, "per_lane": T, "steps": S}`` (c = min(spec.lanes, n_in) lanes,
    T = ceil(n_in / c) inputs per lane, S = n_out T steps per pass)."""
    out = []
    for n_in, n_out in zip(spec.widths[:-1], spec.widths[1:]):
        c = min(spec.lanes, n_in)
        t = -(-n_in // c)
        out.append({"lanes": c, "per_lane": t, "steps": n_out * t})
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
    steps = [c["steps"] for c in lane_counts(spec)]
    read, start = [], 1  # start: the cycle k = 0 of the layer's forward pass
    for s in steps:
        read.append(start + 1)
        start += s + 4
    p = start
    update = [0] * len(steps)
    start = p  # k = 0 of the backward pass, last layer first
    for l in range(len(steps) - 1, -1, -1):
        update[l] = start + steps[l] + 1
        start += steps[l] + 4
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

    def __init__(self, spec: LearnerSpec, theta=None):
        super().__init__(spec, theta, kind="kan", plan_of=serial_kan_plan, port_stages=PORT_STAGES)
        self.lanes = lane_counts(spec)

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

        k = Signal(range(max(max(ly.steps for ly in layers) + 4, PORT_STAGES)), name="step")  # cycle in a pass
        idle = Signal(name="idle")
        fwd = [Signal(name=f"fwd_l{l}") for l in range(n_layers)]
        bwd = [Signal(name=f"bwd_l{l}") for l in range(n_layers)]
        commit = [Signal(name=f"commit_l{l}") for l in range(n_layers)]
        advance = [Signal(name=f"fwd_done_l{l}") for l in range(n_layers)]
        handoff = [Signal(name=f"bwd_done_l{l}") for l in range(n_layers)]  # error to layer l - 1 ready
        out_free = Signal(name="out_free")
        responding = Signal(name="responding")
        m.d.comb += out_free.eq(~self.m.valid | self.m.ready)
        for l, ly in enumerate(layers):
            m.d.comb += [
                advance[l].eq(fwd[l] & (k == ly.steps + 3) & (out_free if l == n_layers - 1 else 1)),
                commit[l].eq(bwd[l] & (k == ly.steps + 1)),
                handoff[l].eq(bwd[l] & (k == ly.steps + 3) if l else 0),
            ]

        # step counters of the pass: t (input group), j (output), base (RAM word of the step's edge)
        t_c = Signal(range(max(2, max(ly.t for ly in layers))), name="step_t")
        j_c = Signal(range(max(2, max(ly.n_out for ly in layers))), name="step_j")
        base = Signal(range(max(ly.steps * ly.depth for ly in layers) + 1), name="step_base")
        # a step's read is issued this cycle, by layer (its own constant bound: no layer multiplexer
        # before the RAM address) and by any layer
        issues = [Signal(name=f"l{l}_issue") for l in range(n_layers)]
        for l, ly in enumerate(layers):
            m.d.comb += issues[l].eq((fwd[l] | bwd[l]) & (k >= 1) & (k <= ly.steps))
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
        # the step one and two cycles later (its RAM data; its accumulation)
        d1, d2 = Signal(name="d1_issue"), Signal(name="d2_issue")
        m.d.sync += [d1.eq(issue), d2.eq(d1)]
        d1_t, d2_t = Signal.like(t_c, name="d1_t"), Signal.like(t_c, name="d2_t")
        d1_j, d2_j = Signal.like(j_c, name="d1_j"), Signal.like(j_c, name="d2_j")
        m.d.sync += [d1_t.eq(t_c), d2_t.eq(d1_t), d1_j.eq(j_c), d2_j.eq(d1_j)]

        # -- sample stream, commands and the parameter bus (reload and writes) ------
        front = serial_front(m, self, idle)
        xs, ys, kind, accept, execute = front.xs, front.ys, front.kind, front.accept, front.execute
        cmd_data, cmd_write, reload = front.cmd_data, front.cmd_write, front.reload
        bus_addr, bus_data, bus_we = front.bus_addr, front.bus_data, front.bus_we
        # the parameter bus decoded in PORT_STAGES registered steps (flat address -> layer, lane,
        # bank, word), one constant multiply per step: a reload word or command reaches the RAM
        # PORT_STAGES cycles after it enters
        port_we, port_rd, port_data = bus_we, execute & ~cmd_write, bus_data
        carried = []
        for n in range(1, PORT_STAGES + 1):
            port_we, port_rd, port_data = port_step(m, n, "port", we=port_we, rd=port_rd, data=port_data)
            carried.append(port_we)
        port = []  # per layer: (hit, lane, bank, word address), at the last port stage
        for ly in layers:
            l, n_edges = ly.index, ly.n_in * ly.n_out

            step = functools.partial(port_step, m, prefix=f"l{l}_port")

            hit, local = step(1, hit=(bus_addr >= ly.offset) & (bus_addr < ly.offset + ly.size),
                              local=(bus_addr - ly.offset)[: max(1, (ly.size - 1).bit_length())])
            hit, local, edge = step(2, hit=hit, local=local, edge=div_const(local, ly.nc, ly.size - 1))
            hit, edge, q, j = step(3, hit=hit, edge=edge, q=(local - edge * ly.nc)[: max(1, (ly.nc - 1).bit_length())],
                                   j=div_const(edge, ly.n_in, n_edges - 1))
            hit, q, j, i, word = step(4, hit=hit, q=q, j=j, i=(edge - j * ly.n_in)[: max(1, (ly.n_in - 1).bit_length())],
                                      word=div_const(q, ly.k1, ly.nc - 1))
            hit, j, i, word, t, bank = step(5, hit=hit, j=j, i=i, word=word, t=div_const(i, ly.c, ly.n_in - 1),
                                            bank=(q - word * ly.k1)[: max(1, (ly.k1 - 1).bit_length())])
            hit, word, bank, lane, slot = step(6, hit=hit, word=word, bank=bank,
                                               lane=(i - t * ly.c)[: max(1, (ly.c - 1).bit_length())],
                                               slot=j * ly.t + t)
            hit, bank, lane, waddr = step(7, hit=hit, bank=bank, lane=lane, waddr=(
                slot * ly.depth + word)[: max(1, (ly.steps * ly.depth - 1).bit_length())])
            port.append((hit, lane, bank, waddr))
        port_busy = Signal(name="port_busy")  # a reload word or command in the port's stages
        m.d.comb += port_busy.eq(Cat(*carried).any())

        # -- layers ---------------------------------------------------------------
        f_prod = f.coef.frac_bits + f.basis.frac_bits
        f_update = f.grad.frac_bits + f.basis.frac_bits + spec.lr_shift
        preds = [Signal(fmt_shape(f.act), name=f"pred{j}", reset_less=True) for j in range(spec.n_out)]
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
                unit = BSplineUnit(ly.in_fmt, cfg.lo_raw[l], cfg.pos_bits[l], cfg.grid_size, cfg.table_bits,
                                   cfg.bval, cfg.bder, f.basis)
                m.submodules[f"l{l}_bspline{i}"] = unit
                m.d.comb += unit.u.eq(ly.u[i])
                h, o = split_cell(m, unit.cell, k1, spec.grid_size, f"l{l}_cell{i}")
                regs = [Signal(h.shape(), name=f"l{l}_hi{i}", reset_less=True),
                        Signal(o.shape(), name=f"l{l}_lo{i}", reset_less=True)]
                bv = [Signal(fmt_shape(f.basis), name=f"l{l}_bval{i}_{mm}", reset_less=True) for mm in range(k1)]
                bd = [Signal(fmt_shape(f.basis), name=f"l{l}_bder{i}_{mm}", reset_less=True)
                      for mm in range(k1)] if hidden_in else []
                cl = Signal(name=f"l{l}_clamped{i}", reset_less=True)
                with m.If(fwd[l] & (k == 0)):
                    m.d.sync += [regs[0].eq(h), regs[1].eq(o), cl.eq(unit.clamped)]
                    m.d.sync += [r.eq(unit.bval[mm]) for mm, r in enumerate(bv)]
                    m.d.sync += [r.eq(unit.bder[mm]) for mm, r in enumerate(bd)]
                hi.append(regs[0]), lo.append(regs[1]), bval.append(bv), bder.append(bd), clamped.append(cl)

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
            # forward: the lanes' dots into output j's accumulator (one cycle after the data)
            part = Signal(fmt_shape(f.acc), name=f"l{l}_part_d2", reset_less=True)
            m.d.sync += part.eq(tree_sum(parts))  # wraps in the acc width
            for j in range(ly.n_out):
                with m.If(fwd[l] & (k == 0)):
                    m.d.sync += acc[j].eq(0)
                with m.Elif(fwd[l] & d2 & (d2_j == j)):
                    m.d.sync += acc[j].eq(acc[j] + part)
            z_prev = [node(m, requant(m, acc[j], f.acc.frac_bits, f.act), f"l{l}_z{j}") for j in range(ly.n_out)]
            if hidden_in:
                for i in range(ly.n_in):
                    with m.If(bwd[l] & (k == 0)):
                        m.d.sync += eacc[i].eq(0)
                    with m.Elif(bwd[l] & d2 & (d2_t == i // ly.c)):
                        m.d.sync += eacc[i].eq(eacc[i] + terms[i % ly.c])
                below = layers[l - 1]
                with m.If(handoff[l]):
                    for i in range(ly.n_in):
                        e_prev = requant(m, eacc[i], f.acc.frac_bits, f.grad)
                        m.d.sync += below.err[i].eq(Mux(clamped[i], 0, e_prev))

        # output error from the prediction by the sample's kind, in the first cycle of the backward pass
        self.prediction_out(m, preds, z_prev, layers[-1].err, bwd[-1] & (k == 0), advance[-1], ys, kind)

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
                with m.If(k == PORT_STAGES - 1):
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
                    with m.Elif(k != ly.steps + 3):
                        m.d.sync += k.eq(k + 1)
                with m.State(f"BWD{l}"):
                    m.d.comb += bwd[l].eq(1)
                    done = commit[l] if l == 0 else handoff[l]
                    with m.If(done):
                        m.d.sync += k.eq(0)
                        m.next = f"BWD{l - 1}" if l > 0 else "IDLE"
                    with m.Else():
                        m.d.sync += k.eq(k + 1)
        return m

