"""Time-multiplexed ("serial") MLP learner: one multiply-accumulate lane per neuron, weights in RAM.

The fully parallel learner (:class:`~onchip.hw.learner.OnchipLearner`) holds
every weight in a register with its own multiplier, so its size grows with
the number of weights. Here the size grows with the number of neurons: layer
l keeps the weights of each output neuron j in a RAM bank of depth n_in
(``amaranth.lib.memory.Memory``, synchronous read, mappable to LUTRAM/BRAM)
and steps over the inputs i = 0..n_in-1, one per clock cycle, all n_out
lanes at once. The arithmetic and every rounding point are those of
:func:`onchip.model.kernels.mlp_step` (sequential schedule), bit for bit:

* forward, lane j: acc = acc(b[j]), then acc += acc(W[j, i] * u[i]) for
  every i in a wrapping register of the ``acc`` width (``acc`` overflow is
  WRAP, so this equals the golden sum of converted terms wrapped once);
  z[j] = requant(acc -> ``act``), ReLU on hidden layers;
* output error e[j] by the sample's kind: requant(y_hat[j] - y[j] -> ``grad``) (TARGET), y[j]
  (ERROR, already ``grad``), 0 (PREDICT);
* backward + update, last layer first, stepping over i again: every bank
  reads its pre-update W[j, i]; the error to the previous layer is the adder
  tree over j of acc(W[j, i] * e[j]) wrapped, converted to ``grad`` and 0
  where the ReLU output u[i] <= 0; in the same pass (read-modify-write)
  W[j, i] = overflow(W[j, i] - requant(e[j] * u[i] * 2**-s -> ``coef``));
  biases (registers) b[j] = overflow(b[j] - requant(e[j] * 2**-s -> ``coef``)).

Per layer, the inputs u of the sample sit in a rotating register (u[0] at
its head; one rotation per step, so after n_in steps it is back in order
for the backward pass) and the error of the layer's outputs in a register
that the next layer's backward pass shifts the back-propagated errors into.

Timing (cycles counted from the accepting cycle, offset 0; N_l = n_in of
layer l; no stall on the prediction output):

* forward pass of layer l: N_l + 2 cycles (layer 0: N_0 + 3, its first
  weight read is issued in the accepting cycle) - one read, product and
  accumulate per input, pipelined, then the conversion to ``act``;
* prediction latency P = 1 + sum_l (N_l + 2);
* backward pass: the output layer N + 2 cycles from cycle P (the first one
  forms the output error), every other layer N_l + 1; a layer's update is
  committed (last weight written, bias updated) in its last cycle;
* initiation interval II = 2 sum_l N_l + 3 L + 2 (the next sample is
  accepted the cycle after layer 0's update is committed).

``timing = "fast"`` (:func:`fast_stages`) registers every lane's raw products
(forward W u, weight delta e u, back-propagated W e: on ECP5 the MULT18X18D's
output register, :mod:`onchip.hw.dsp`) and converts them in the next cycle;
the error to the previous layer's adder tree over the n_out lanes takes T_l =
ceil(ceil(log2 n_out) / 2) registered stages (none for layer 0); the step
strobes (accumulate, write-back, shift, commit, end of a forward pass) are
registers decoded a cycle ahead, and the bias delta is registered. Each pass
takes one cycle more, the backward pass of layer l T_l more: P = 1 +
sum_l (N_l + 3), II = 2 sum_l N_l + 5 L + 2 + sum_l T_l. The parameter write
bus (a reload word, a command's write) is registered once: a write lands a
cycle later and the reset reload takes n_params + 2 cycles. Measured on the
ULX3S 85F, mlp-serial-8-16-1: 106.9 MHz against 66.6 at compact, 551.8
against 826.4 ns per update (``sweeps/timing/README.md``).

A prediction that has not been taken holds the next sample's forward pass in
its last cycle (the output register is full); nothing else stalls.

Parameter port, reset and streams are those of OnchipLearner: a command
waits until the learner is idle (no sample in flight, its last prediction taken; while a command
waits no sample is accepted), then reads or writes theta[addr] (flat index
of :func:`onchip.model.golden.layout`) and answers one word. RAM contents
survive ``rst``, so after reset (and at power-up) the learner copies the
initial parameters from a ROM into the banks and biases, one word per cycle
through the parameter port's write path (n_params + 1 cycles), with
``s.ready`` and ``pc.ready`` low until it is done.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib.memory import Memory

from ..model.golden import kernel_config, layout
from ..spec import LearnerSpec
from .dsp import check_dsp, registered_product
from .fixedpoint import fmt_shape, node, overflow, requant, requant_by_carry
from .layers import staged_tree, tree_sum
from .pipeline import Pipe, Staged
from .plan import tree_stages
from .ram import div_const, mul_const, port_step, ram_style
from .serial_front import SerialLearner, serial_front

__all__ = ["SerialMlpLearner", "serial_plan"]


def serial_plan(spec: LearnerSpec) -> dict:
    """Cycle offsets of the serial datapath's schedule (offset 0: the cycle accepting a sample).

    Returns:
        ``{"prediction": P, "read": [...], "update": [...], "ii": II}`` with, per layer l,
        ``read[l]`` the cycle its forward pass issues its first weight read (address 0 of
        every bank), ``update[l]`` the cycle its update is committed (last weight written,
        biases updated; the ``commit_l<l>`` strobe), P the first cycle the prediction can
        be taken, II the cycles between accepted samples at full rate. See the module
        docstring for the closed forms.
    """
    n = list(spec.widths[:-1])
    n_layers = len(n)
    x, tree = fast_stages(spec)
    read, first = [], 1  # first: offset of the cycle using the layer's first weight word
    for l in range(n_layers):
        read.append(first - 1)
        first += n[l] + 2 + x
    p = first  # the output layer's conversion to act ends in cycle p - 1
    update = [0] * n_layers
    first = p + 1  # the output error is formed at p
    for l in range(n_layers - 1, -1, -1):
        update[l] = first + n[l] + x + tree[l]
        first = update[l] + 1
    return {"prediction": p, "read": read, "update": update, "ii": update[0] + 1}


def fast_stages(spec: LearnerSpec) -> tuple[int, list[int]]:
    """The registers ``timing = "fast"`` adds to the serial MLP's passes: ``x`` (1: every product is
    registered raw, in a DSP's output register, and converted in the next cycle; 0 when compact) and,
    per layer, the registered stages of its back-propagated error's adder tree over its outputs
    (:func:`~onchip.hw.plan.tree_stages`; 0 for layer 0, which propagates nothing, and when compact)."""
    if spec.stage_timing != "fast":
        return 0, [0] * (len(spec.widths) - 1)
    return 1, [0] + [tree_stages(w) for w in spec.widths[2:]]


class _Layer:
    """Storage of one layer: weight banks, biases, the rotating input register, the error register."""

    def __init__(self, spec: LearnerSpec, theta0: np.ndarray, index: int, lay, in_frac: int):
        f = spec.formats
        self.index, self.offset = index, lay.offset
        self.n_in, self.n_out = lay.n_in, lay.n_out
        self.n_w = lay.n_in * lay.n_out
        self.in_frac = in_frac
        self.in_fmt = f.input if index == 0 else f.act
        coef = fmt_shape(f.coef)
        o, n = lay.offset, lay.n_in
        style = {"ram_style": ram_style(n, f.coef.width)}
        self.banks = [Memory(shape=coef, depth=n, init=[int(v) for v in theta0[o + j * n : o + (j + 1) * n]],
                             attrs=style) for j in range(self.n_out)]
        b0 = o + self.n_w
        self.bias = [Signal(coef, init=int(theta0[b0 + j]), name=f"l{index}_b_{j}") for j in range(self.n_out)]
        self.u = [Signal(fmt_shape(self.in_fmt), name=f"l{index}_u{i}", reset_less=True) for i in range(n)]
        self.err = [Signal(fmt_shape(f.grad), name=f"l{index}_e{j}", reset_less=True) for j in range(self.n_out)]
        self.rd = self.wr = None


class SerialMlpLearner(SerialLearner):
    """Sequential-schedule MLP learner of a :class:`~onchip.spec.LearnerSpec` with one lane per neuron.

    Ports: those of :class:`~onchip.hw.interface.LearnerPorts`, as
    :class:`~onchip.hw.learner.OnchipLearner`'s (each prediction made before that sample's update).

    Attributes (after construction):
        stages: :func:`serial_plan` without ``ii``: ``prediction`` P, per-layer ``read`` (cycle of
            the first forward weight read) and ``update`` (cycle of the commit), offsets from the
            accepting cycle.
        latency_prediction, latency_update, initiation_interval: cycles, as OnchipLearner defines them.
        min_staleness: II - 1, as OnchipLearner reports for its sequential schedule (this
            datapath has no pipelined schedule).
        staleness: 0; pipelined: False.
        param_storage: ``"memory"`` (weights in RAM banks; the n_out biases per layer are registers).

    Args:
        spec: an MLP in the sequential schedule (its ``datapath`` is normally ``"serial"``).
        theta: raw reset values of the parameters (P,) (default: the golden initial parameters).

    Raises:
        ValueError: ``spec`` is not an MLP or not sequential, or a bad ``theta``.
    """

    def __init__(self, spec: LearnerSpec, theta=None, dsp: str | None = None):
        super().__init__(spec, theta, kind="mlp", plan_of=serial_plan, port_stages=int(spec.stage_timing == "fast"))
        #: fast: the raw products' registers, generic or in the device's DSP (:mod:`onchip.hw.dsp`)
        self.dsp = check_dsp(dsp)

    # -- hardware ---------------------------------------------------------------------
    def elaborate(self, platform):
        spec, f = self.spec, self.spec.formats
        m = Module()
        cfg = kernel_config(spec)
        layers = [_Layer(spec, self.theta0, l, lay, int(cfg.in_frac[l])) for l, lay in enumerate(layout(spec))]
        n_layers = len(layers)
        for ly in layers:
            for j, bank in enumerate(ly.banks):
                m.submodules[f"l{ly.index}_bank{j}"] = bank
            ly.rd = [bank.read_port() for bank in ly.banks]
            ly.wr = [bank.write_port() for bank in ly.banks]

        x, tree = fast_stages(spec)
        fast = bool(x)
        rq = requant_by_carry if fast else requant
        pipe = Pipe(m, Const(1, 1))  # fast: the registered products and adder trees, advancing every cycle

        def product(x, y, name):  # what a lane converts: x * y, or fast its raw register (a cycle later)
            return registered_product(m, pipe, x, y, 0, name, self.dsp).value if fast else x * y
        # the step of a pass that ends it: forward (z formed), backward (last write, bias update)
        fwd_end = [ly.n_in + 2 + x for ly in layers]
        bwd_end = [ly.n_in + 1 + x + tree[ly.index] for ly in layers]
        step = Signal(range(max(fwd_end + bwd_end) + 1), name="step")  # k: position in a pass
        idle = Signal(name="idle")
        fwd = [Signal(name=f"fwd_l{l}") for l in range(n_layers)]
        bwd = [Signal(name=f"bwd_l{l}") for l in range(n_layers)]
        commit = [Signal(name=f"commit_l{l}") for l in range(n_layers)]
        advance = [Signal(name=f"fwd_done_l{l}") for l in range(n_layers)]  # forward pass of l ends
        out_free = Signal(name="out_free")
        responding = Signal(name="responding")  # a command's response is formed this cycle
        m.d.comb += out_free.eq(~self.m.valid | self.m.ready)
        for l, ly in enumerate(layers):
            if not fast:
                m.d.comb += [
                    advance[l].eq(fwd[l] & (step == ly.n_in + 2) & (out_free if l == n_layers - 1 else 1)),
                    commit[l].eq(bwd[l] & (step == ly.n_in + 1)),
                ]
                continue
            # fast: the strobes are registers, decoded from the step a cycle ahead (a pass steps by one;
            # a finished forward pass holds its last step while the prediction waits)
            at_end = Signal(name=f"fwd_end_l{l}")
            m.d.sync += at_end.eq(fwd[l] & ((step == fwd_end[l] - 1) | ((step == fwd_end[l]) & ~advance[l])))
            m.d.sync += commit[l].eq(bwd[l] & (step == bwd_end[l] - 1))
            m.d.comb += advance[l].eq(at_end & (out_free if l == n_layers - 1 else 1))

        # -- sample stream, commands and the parameter bus (reload and writes) ------
        front = serial_front(m, self, idle)
        xs, ys, kind, accept, execute = front.xs, front.ys, front.kind, front.accept, front.execute
        cmd_data, cmd_write, reload = front.cmd_data, front.cmd_write, front.reload
        bus_addr, bus_data, bus_we = front.bus_addr, front.bus_data, front.bus_we
        hit_w, hit_b, row, col, brow = [], [], [], [], []
        for ly in layers:
            l, o, nw = ly.index, ly.offset, ly.n_w
            hw, hb = Signal(name=f"l{l}_hit_w"), Signal(name=f"l{l}_hit_b")
            m.d.comb += [
                hw.eq((bus_addr >= o) & (bus_addr < o + nw)),
                hb.eq((bus_addr >= o + nw) & (bus_addr < o + nw + ly.n_out)),
            ]
            rel = node(m, (bus_addr - o)[: max(1, (nw - 1).bit_length())], f"l{l}_rel")
            # fast: the division by the fan-in and its product in logic, not in MULT18X18Ds (as the KAN ports)
            j = node(m, div_const(rel, ly.n_in, nw - 1, fast)[: max(1, (ly.n_out - 1).bit_length())], f"l{l}_row")
            i = Signal(range(ly.n_in), name=f"l{l}_col")
            # a power of two is a shift either way: kept as the generic product there
            m.d.comb += i.eq(rel - mul_const(j, ly.n_in, in_logic=fast and bool(ly.n_in & (ly.n_in - 1))))
            jb = node(m, (bus_addr - (o + nw))[: max(1, (ly.n_out - 1).bit_length())], f"l{l}_brow")
            hit_w.append(hw), hit_b.append(hb), row.append(j), col.append(i), brow.append(jb)

        # fast: the write bus registered once (a reload word from the ROM's block RAM, the decoded
        # address): it reaches the banks and biases a cycle later, and the learner is busy meanwhile
        w_we, w_data, w_hit_w, w_hit_b, w_row, w_col, w_brow = bus_we, bus_data, hit_w, hit_b, row, col, brow
        port_busy = None
        if fast:
            (w_we,), (w_data,) = port_step(m, 1, "bus", we=bus_we), port_step(m, 1, "bus", reset_less=True, data=bus_data)
            w_hit_w, w_hit_b, w_row, w_col, w_brow = (
                [port_step(m, 1, f"l{l}", reset_less=True, **{field: v})[0] for l, v in enumerate(vs)]
                for field, vs in (("hit_w", hit_w), ("hit_b", hit_b), ("row", row), ("col", col), ("brow", brow)))
            port_busy = w_we

        # -- layers: forward pass, backward pass and update ----------------------
        f_back = f.coef.frac_bits + f.grad.frac_bits
        f_b = f.grad.frac_bits + spec.lr_shift
        preds = [Signal(fmt_shape(f.y), name=f"pred{j}", reset_less=True) for j in range(spec.n_out)]
        m.d.comb += [self.m.payload.pred[j].eq(v) for j, v in enumerate(preds)]
        self.decision(m, preds)
        z_prev = None
        for ly in layers:
            l, n = ly.index, ly.n_in
            last = l == n_layers - 1
            active = fwd[l] | bwd[l]
            # the input register: loaded with the sample (layer 0) or the previous layer's
            # outputs, rotated once per step of each pass
            src = xs if l == 0 else z_prev
            load = accept if l == 0 else advance[l - 1]
            head = ly.u[0]
            with m.If(load):
                m.d.sync += [u.eq(v) for u, v in zip(ly.u, src)]
            with m.Elif(active & (step >= 1) & (step <= n)):
                m.d.sync += [ly.u[i].eq(ly.u[(i + 1) % n]) for i in range(n)]

            # read address: the step in a pass, a command's column when idle, else 0 (the
            # first word, so a pass that follows can use it at its step 1)
            raddr = Signal(range(n), name=f"l{l}_raddr")
            m.d.comb += raddr.eq(Mux(active & (step < n), step, Mux(idle & self.pc.valid, col[l], 0)))
            waddr = Signal(range(n), name=f"l{l}_waddr", reset_less=True)
            m.d.sync += waddr.eq(step - 1)
            writeback = Signal(name=f"l{l}_writeback")
            if fast:  # forward: accumulate from step 3 (products converted in step 2); backward: write from step 3
                acc_load, acc_add = Signal(name=f"l{l}_acc_load"), Signal(name=f"l{l}_acc_add")
                m.d.sync += [
                    acc_load.eq(fwd[l] & (step == 1)),
                    acc_add.eq(fwd[l] & (step >= 2) & (step <= n + 1)),
                    writeback.eq(bwd[l] & (step >= 2) & (step <= n + 1)),
                ]
                waddr_d = Signal(range(n), name=f"l{l}_waddr_d", reset_less=True)
                m.d.sync += waddr_d.eq(waddr)
            else:
                m.d.comb += writeback.eq(bwd[l] & (step >= 2))

            f_prod = f.coef.frac_bits + ly.in_frac
            f_w = f.grad.frac_bits + ly.in_frac + spec.lr_shift
            zs, bprods = [], []
            for j in range(ly.n_out):
                rp, wp = ly.rd[j], ly.wr[j]
                m.d.comb += rp.addr.eq(raddr)
                w = rp.data
                e = ly.err[j]
                # forward lane: acc = acc(b) + sum_i acc(W[j, i] u[i]), wrapping in the acc width
                prod = Signal(fmt_shape(f.acc), name=f"l{l}_prod{j}", reset_less=True)
                acc = Signal(fmt_shape(f.acc), name=f"l{l}_acc{j}", reset_less=True)
                m.d.sync += prod.eq(rq(m, product(w, head, f"l{l}_prod{j}_raw"), f_prod, f.acc))
                if fast:
                    with m.If(acc_load):
                        m.d.sync += acc.eq(requant(m, ly.bias[j], f.coef.frac_bits, f.acc))
                    with m.Elif(acc_add):
                        m.d.sync += acc.eq(acc + prod)
                else:
                    with m.If(fwd[l] & (step == 1)):
                        m.d.sync += acc.eq(requant(m, ly.bias[j], f.coef.frac_bits, f.acc))
                    with m.Elif(fwd[l] & (step >= 2) & (step <= n + 1)):
                        m.d.sync += acc.eq(acc + prod)
                z = rq(m, acc, f.acc.frac_bits, f.y if last else f.act)  # last: the output format
                if not last:
                    z = Mux(z[-1], 0, z) if fast else Mux(z > 0, z, 0)  # fast: the sign bit
                zs.append(node(m, z, f"l{l}_z{j}"))
                # backward lane: the pre-update weight and its delta, written back a cycle later (fast: two)
                w_old = Signal(fmt_shape(f.coef), name=f"l{l}_wold{j}", reset_less=True)
                delta = Signal(fmt_shape(f.coef), name=f"l{l}_dw{j}", reset_less=True)
                olds = [w_old]
                if fast:
                    olds.append(Signal(fmt_shape(f.coef), name=f"l{l}_wold{j}_d", reset_less=True))
                m.d.sync += [old.eq(v) for old, v in zip(olds, [w] + olds)]
                m.d.sync += delta.eq(rq(m, product(e, head, f"l{l}_dw{j}_raw"), f_w, f.coef))
                w_old, w_addr = olds[-1], waddr_d if fast else waddr
                if l > 0:
                    bprod = Signal(fmt_shape(f.acc), name=f"l{l}_bprod{j}", reset_less=True)
                    m.d.sync += bprod.eq(rq(m, product(w, e, f"l{l}_bprod{j}_raw"), f_back, f.acc))
                    bprods.append(bprod)
                bus_hit = w_we & w_hit_w[l] & (w_row[l] == j)
                m.d.comb += [
                    wp.en.eq(writeback | bus_hit),
                    wp.addr.eq(Mux(writeback, w_addr, w_col[l])),
                    wp.data.eq(Mux(writeback, overflow(m, w_old - delta, f.coef), w_data)),
                ]
                b = ly.bias[j]
                if fast:  # the bias delta from the layer's error, fixed during its backward pass
                    b_delta = Signal(fmt_shape(f.coef), name=f"l{l}_db{j}", reset_less=True)
                    m.d.sync += b_delta.eq(rq(m, e, f_b, f.coef))
                    with m.If(commit[l]):
                        m.d.sync += b.eq(overflow(m, b - b_delta, f.coef))
                else:
                    with m.If(commit[l]):
                        m.d.sync += b.eq(overflow(m, b - requant(m, e, f_b, f.coef), f.coef))
                with m.If(w_we & w_hit_b[l] & (w_brow[l] == j)):
                    m.d.sync += b.eq(w_data)
            z_prev = zs

            # error to the previous layer, one input per step, shifted into its error register
            if l > 0:
                positive = Signal(name=f"l{l}_u_pos", reset_less=True)
                m.d.sync += positive.eq(head > 0)
                shift = writeback
                if fast:  # the sum in tree[l] registered stages; shifted in from step 3 + tree[l]
                    s = overflow(m, staged_tree(pipe, [Staged(v, 2) for v in bprods], 2 + tree[l],
                                                f"l{l}_bsum", extra_last=True).value, f.acc)
                    positive = pipe.at(Staged(positive, 1), 2 + tree[l])
                    shift = Signal(name=f"l{l}_shift")
                    m.d.sync += shift.eq(bwd[l] & (step >= 2 + tree[l]) & (step <= n + 1 + tree[l]))
                else:
                    s = overflow(m, tree_sum(bprods), f.acc)
                e_prev = node(m, Mux(positive, rq(m, s, f.acc.frac_bits, f.grad), 0), f"l{l - 1}_eprev")
                tgt = layers[l - 1].err
                with m.If(shift):
                    m.d.sync += [tgt[i].eq(tgt[i + 1]) for i in range(len(tgt) - 1)]
                    m.d.sync += tgt[-1].eq(e_prev)

        # output error from the prediction by the sample's kind, in the first cycle of the backward pass
        self.prediction_out(m, preds, z_prev, layers[-1].err, bwd[-1] & (step == 0), advance[-1], ys, kind)

        # -- parameter responses --------------------------------------------------
        sel_w = [Signal(name=f"l{l}_sel_w") for l in range(n_layers)]
        sel_b = [Signal(name=f"l{l}_sel_b") for l in range(n_layers)]
        sel_row = [Signal(len(row[l]), name=f"l{l}_sel_row") for l in range(n_layers)]
        sel_brow = [Signal(len(brow[l]), name=f"l{l}_sel_brow") for l in range(n_layers)]
        resp_write = Signal(name="resp_write")
        resp_data = Signal(fmt_shape(f.coef), name="resp_data")
        with m.If(execute):
            m.d.sync += [resp_write.eq(cmd_write), resp_data.eq(cmd_data)]
            for l in range(n_layers):
                m.d.sync += [sel_w[l].eq(hit_w[l]), sel_b[l].eq(hit_b[l]),
                             sel_row[l].eq(row[l]), sel_brow[l].eq(brow[l])]
        readback = Signal(fmt_shape(f.coef), name="readback")
        choices = []
        for l, ly in enumerate(layers):
            choices.append((sel_w[l], Array(rp.data for rp in ly.rd)[sel_row[l]]))
            choices.append((sel_b[l], Array(ly.bias)[sel_brow[l]]))
        for n, (cond, val) in enumerate(choices):
            with (m.If if n == 0 else m.Elif)(cond):
                m.d.comb += readback.eq(val)
        resp = Signal(fmt_shape(f.coef), name="resp")
        m.d.comb += self.pr.payload.data.eq(resp)
        with m.If(self.pr.ready):
            m.d.sync += self.pr.valid.eq(0)

        # -- sequencer ------------------------------------------------------------
        with m.FSM(init="IDLE", name="sequencer"):
            with m.State("IDLE"):  # after reset, busy until the reload is done
                m.d.comb += idle.eq(~reload.active & ~port_busy if fast else ~reload.active)
                with m.If(accept):
                    m.d.sync += step.eq(1)
                    m.next = "FWD0"
                with m.Elif(execute):
                    m.next = "RESPOND"
            with m.State("RESPOND"):
                m.d.comb += responding.eq(1)
                m.d.sync += [resp.eq(Mux(resp_write, resp_data, readback)), self.pr.valid.eq(1)]
                m.next = "IDLE"
            for l, ly in enumerate(layers):
                with m.State(f"FWD{l}"):
                    m.d.comb += fwd[l].eq(1)
                    with m.If(advance[l]):
                        if l < n_layers - 1:
                            m.d.sync += step.eq(1)
                            m.next = f"FWD{l + 1}"
                        else:
                            m.d.sync += step.eq(0)
                            m.next = f"BWD{l}"
                    with m.Elif(step != fwd_end[l]):
                        m.d.sync += step.eq(step + 1)
                with m.State(f"BWD{l}"):
                    m.d.comb += bwd[l].eq(1)
                    with m.If(commit[l]):
                        m.d.sync += step.eq(1)
                        m.next = f"BWD{l - 1}" if l > 0 else "IDLE"
                    with m.Else():
                        m.d.sync += step.eq(step + 1)
        pipe.finalize()
        return m
