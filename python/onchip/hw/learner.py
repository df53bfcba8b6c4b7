"""The learner top: sample and prediction streams, the update schedule and the parameter port.

Test-then-train online SGD with batch size 1 (as :class:`onchip.model.GoldenLearner`):
each accepted sample is predicted with the parameters it reads, and its
update is committed later. The whole datapath is one in-order pipeline that
advances whenever the prediction output is not held back.

Schedules (:mod:`onchip.model.stream`):

* sequential: a sample is accepted only when every update it must see will
  be committed before it reads the parameters; the initiation interval is
  max over layers of (U - R + 1) cycles (U: stage where a layer's update is
  ready, R: stage whose cycle reads its parameters). Updates commit at U.
* pipelined (staleness D >= max over layers of U - R): a sample is accepted
  every cycle. Updates wait in a per-layer pending-update FIFO
  (:class:`~onchip.hw.pending.PendingUpdates`) and are committed on read:
  in the cycle sample n reads a layer's parameters (stage R), if D updates
  of that layer are pending the oldest (sample n - D) is written at the end
  of that cycle (read before write), so sample n + 1 is the first to see it
  and sample m sees exactly the updates of samples <= m - D - 1, whatever
  the stalls (the golden model's ``land``). When the FIFO is empty the
  update is taken straight from stage U.

Parameter port: a command (read or write of theta[addr], flat index of
:func:`onchip.model.golden.layout`) first drains the learner: no sample is
accepted, samples in flight finish (their predictions must be taken), the
pending updates are committed oldest first (the golden model's ``flush``);
then the command executes and answers one response word (a write in the next
cycle, a read one cycle after it reaches the parameters, as RAM reads are synchronous:
with ``timing = "fast"`` a KAN command passes the port's register stages first, see
:func:`~onchip.hw.plan.stage_plan`, and no sample is taken while one is in them).

Channels (``spec.channels`` N > 1): N independent learners share the datapath. Every parameter
has N copies (KAN: a range per channel in each RAM bank, addressed (channel, word)); each sample
names its channel, which travels down the pipeline with it and addresses its reads and its
commit; the parameter port addresses (channel, index); the reset ROM holds N P words. Each
channel runs the sequential schedule on its own sub-stream: a sample is accepted unless a sample
of its channel is still in the first II - 1 stages (the per-channel hazard), so samples of other
channels issue every cycle and round-robin channels with N >= II run at one sample per clock.
With N not a power of two the channel field can name a channel >= N: such a sample is taken and
dropped (no prediction, no update), and such a parameter command reads and writes no bank and
answers 0; either raises the sticky output ``channel_error`` until reset.

Reset: registers return to their initial values at once; parameters kept in
RAM (KAN coefficients, :mod:`onchip.hw.coefmem`) are rewritten from a ROM of
the initial parameters, one word per cycle, through the parameter port's
write path. For those P + 1 cycles after reset (plus the port's stages) no sample is taken.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned

from ..model.golden import kernel_config
from ..spec import LearnerSpec, default_timing
from .dsp import check_dsp
from .fixedpoint import as_signed, fmt_shape, overflow, requant_less
from .interface import LearnerPorts, reload_from_rom, single_channel
from .layers import layer_class
from .pending import PendingUpdates
from .pipeline import Pipe, Staged
from .plan import fast_registers, stage_plan


def unpack(word, like: list) -> list:
    """Split a packed word (``Cat(*like)``) back into fields of the shapes of ``like``."""
    fields, pos = [], 0
    for fv in like:
        w = len(fv)
        chunk = word[pos : pos + w]
        fields.append(chunk.as_signed() if fv.shape().signed else chunk)
        pos += w
    return fields


def schedule_staleness(spec: LearnerSpec) -> int:
    """D the hardware implements: ``spec.effective_staleness`` (0: the sequential schedule)."""
    return spec.effective_staleness


def min_staleness(spec: LearnerSpec) -> int:
    """Smallest pipelined staleness D at II = 1: max over layers of U - R (cycles from a
    layer's parameter read to its update being ready), for the stage plan ``spec`` builds when
    pipelined (``timing = "auto"`` builds compact there, whatever the schedule it has now)."""
    if spec.timing == "auto":
        spec = spec.replace(timing=default_timing("pipelined"))
    plan = stage_plan(spec.replace(schedule="pipelined"))  # the sequential fast plan has fewer stages
    return max(u - r for u, r in zip(plan["update"], plan["read"]))


def check_staleness(spec: LearnerSpec) -> None:
    """Raise ValueError when a pipelined ``spec`` asks for a staleness below :func:`min_staleness`."""
    d, need = spec.effective_staleness, min_staleness(spec)
    if spec.schedule == "pipelined" and d < need:
        raise ValueError(
            f"staleness = {d}: too small for the pipelined {spec.kind} {list(spec.widths)}: an update "
            f"is ready {need} cycles after its sample read the parameters, so staleness must be "
            f">= {need} (or the sequential schedule)"
        )


class OnchipLearner(LearnerPorts):
    """Fixed-point online learner (KAN or MLP) of a :class:`~onchip.spec.LearnerSpec`.

    Ports: those of :class:`~onchip.hw.interface.LearnerPorts` (sample, prediction and
        parameter streams).

    Attributes (after construction):
        stages: dict of the pipeline's stages: ``prediction`` P, per-layer ``read`` and ``update``.
        min_staleness: smallest D the pipelined schedule can run at II = 1 (sequential II - 1).

    Args:
        spec: the learner; its schedule and staleness select the schedule.
        theta: raw reset values of the parameters (P,) (default: the golden initial parameters).
        dsp: products as generic ``*`` (None) or a device's DSP primitive (``"ecp5"``,
            ``"ice40"``: :mod:`onchip.hw.dsp`; only the ``fast`` plan's registered raw products change).

    Raises:
        ValueError: a pipelined spec whose staleness is below :attr:`min_staleness`, a bad ``dsp``.
    """

    def __init__(self, spec: LearnerSpec, theta=None, dsp: str | None = None):
        self.spec = spec
        self.dsp = check_dsp(dsp)
        self.staleness = schedule_staleness(spec)
        self.pipelined = self.staleness > 0
        # each channel is a sequential learner: the datapath is the sequential one
        self.plan_spec = single_channel(spec).replace(channels=spec.channels)
        self._plan()
        super().__init__(spec, theta)
        #: where the parameters live: KAN coefficients in RAM banks, MLP weights in registers
        self.param_storage = "memory" if spec.kind == "kan" or self.channels > 1 else "registers"
        #: cycles after reset before a parameter command is taken: the RAM reload from the ROM of N P
        #: words (a command enters the port's stages behind the last reload word)
        self.reset_cycles_command = len(self.theta0) + 1 if self.param_storage == "memory" else 0
        #: ... before a sample is taken: the reload, and its last word through the port's stages
        self.reset_cycles = self.reset_cycles_command + self.stages["port"] if self.param_storage == "memory" else 0

    def _plan(self) -> None:
        self.stages = stage_plan(self.plan_spec)
        self.sequential_ii = max(u - r + 1 for u, r in zip(self.stages["update"], self.stages["read"]))
        self.min_staleness = min_staleness(self.plan_spec)
        check_staleness(self.plan_spec)

    @property
    def latency_update(self) -> int:
        """Clock edges from accepting a sample to committing its update in every layer
        (pipelined: with a new sample every cycle, as a commit waits for sample n + D to read)."""
        if not self.pipelined:
            return max(self.stages["update"])
        return max(self.staleness + r for r in self.stages["read"])

    @property
    def initiation_interval(self) -> int:
        """Cycles between accepted samples at full rate (N > 1 channels: round-robin channels;
        1 once N >= the sequential II, see :attr:`round_robin_interval`)."""
        if self.spec.channels > 1:
            return max(1, -(-self.sequential_ii // self.spec.channels))
        return 1 if self.pipelined else self.sequential_ii

    @property
    def round_robin_interval(self) -> float:
        """Mean cycles per sample with round-robin channels at full rate: max(1, II_seq / N)
        (a channel's next sample waits II_seq cycles after its last; the N - 1 others issue
        in between, one per cycle)."""
        return max(1.0, self.sequential_ii / self.spec.channels)

    def fused_output_error(self, m: Module, pipe: Pipe, sums: list, ys: list, kind) -> list:
        """:meth:`output_error` made from the output sums (``acc``, one stage before the prediction)
        instead of the predictions: TARGET ``requant(requant(sum -> y) - y -> grad)`` (``formats.y``) as one addition
        (:func:`~onchip.hw.fixedpoint.requant_less`), with ``-y`` and ``max - y``, ``min - y`` (the
        prediction saturated) registered from the sample payload's ``y``; ERROR ``y``; otherwise 0.
        Combinational at the sums' stage, ``grad`` shaped."""
        f = self.spec.formats
        s = sums[0].stage
        out = []
        for j, (sm, y) in enumerate(zip(sums, ys)):
            yv = pipe.before(y.value)  # the payload's y, registered here three ways
            neg = pipe.at(pipe.reg(-as_signed(yv), 0, f"y{j}_neg_s1"), s)
            at_max = pipe.at(pipe.reg(overflow(m, f.y.max_raw - as_signed(yv), f.grad), 0, f"y{j}_at_max_s1"), s)
            at_min = pipe.at(pipe.reg(overflow(m, f.y.min_raw - as_signed(yv), f.grad), 0, f"y{j}_at_min_s1"), s)
            e = Signal(fmt_shape(f.grad), name=f"err{j}")
            target = requant_less(m, sm.value, f.acc.frac_bits, f.y, f.grad, neg, at_max, at_min)
            with m.Switch(pipe.at(kind, s)):
                with m.Case(0):
                    m.d.comb += e.eq(target)
                with m.Case(2):
                    m.d.comb += e.eq(pipe.at(y, s))
                with m.Default():
                    m.d.comb += e.eq(0)
            out.append(e)
        return out

    # -- hardware ---------------------------------------------------------------------
    def elaborate(self, platform):
        spec, f = self.plan_spec, self.spec.formats
        m = Module()
        en = Signal()
        accept = Signal()
        pipe = Pipe(m, en)
        cfg = kernel_config(spec)
        theta0 = self.theta_channels if self.channels > 1 else self.theta0
        n_layers = len(spec.widths) - 1
        live = not self.pipelined and self.channels == 1  # channels: the weights read travel with the sample

        make = layer_class(spec.kind)
        layers = [make(spec=spec, config=cfg, theta0=theta0, index=l, live_backprop=live,
                       stages=self.stages["layers"][l], dsp=self.dsp) for l in range(n_layers)]

        # stage 0: the sample payload, registered on acceptance
        x_in, y_in, kind_in = self.sample_fields()
        if self.stages["layers"][0]["in"] == 0:  # the first layer registers what it makes of the payload
            xs = [Staged(x, 0) for x in x_in]
        else:
            xs = [pipe.reg(x, 0, f"x{i}_s1") for i, x in enumerate(x_in)]
        ys = [pipe.reg(y, 0, f"y{j}_s1") for j, y in enumerate(y_in)]
        kind = pipe.reg(kind_in, 0, "kind_s1")
        chan_in = self.sample_channel()
        chan = None if chan_in is None else pipe.reg(chan_in, 0, "channel_s1")
        for layer in layers:
            layer.channel, layer.channel_in = chan, chan_in

        acts = xs
        for layer in layers:
            acts = layer.forward(m, pipe, acts)
        p = acts[0].stage
        assert p == self.stages["prediction"]
        m.d.comb += [self.m.payload.pred[j].eq(a.value) for j, a in enumerate(acts)]
        self.decision(m, [a.value for a in acts], parallel=fast_registers(spec))

        # output error by the sample's kind (TARGET, ERROR, PREDICT: zero update, same slot)
        if self.stages.get("error_fused"):  # from the sums, beside the prediction (stage_plan)
            sums = layers[-1].sums
            e_out = self.fused_output_error(m, pipe, sums, ys, kind)
            err = [pipe.reg(e, p - 1, f"err{j}_s{p}") for j, e in enumerate(e_out)]
        else:  # formed in the cycle before the error stage E (predict-first: from the prediction
            # registered behind P)
            q = self.stages["layers"][-1]["error"] - 1
            preds = [pipe.at(pipe.reg(a.value, p, f"pred{j}_s{p + 1}") if q > p else a, q) for j, a in enumerate(acts)]
            e_out = self.output_error(m, preds, [pipe.at(y, q) for y in ys], pipe.at(kind, q))
            err = [pipe.reg(e, q, f"err{j}_s{q + 1}") for j, e in enumerate(e_out)]
        for layer in reversed(layers):
            err = layer.backward(m, pipe, err)
        assert [ly.read_stage for ly in layers] == self.stages["read"]
        assert [ly.update_stage for ly in layers] == self.stages["update"]

        # valid bit of every stage; the pipeline advances unless the prediction is held back
        last = max(pipe.last_stage, max(self.stages["update"]))
        valid = [accept] + [Signal(name=f"valid_s{s}") for s in range(1, last + 1)]
        with m.If(en):
            m.d.sync += [valid[s + 1].eq(valid[s]) for s in range(last)]
        m.d.comb += [
            en.eq(~(valid[p] & ~self.m.ready)),
            self.m.valid.eq(valid[p]),
        ]
        busy = Signal()
        m.d.comb += busy.eq(Cat(*valid[1:]).any())

        # updates: commit schedule per layer, and the parameter port's drain and flush
        draining = self.pc.valid
        flushed = []
        for l, layer in enumerate(layers):
            commit = Signal(name=f"commit_l{l}")
            u, r = layer.update_stage, layer.read_stage
            fields_u = layer.update_fields
            # the first n_lookahead fields (RAM addresses) of the update a commit in the next cycle
            # would take: the stage-U value after this cycle's advance
            la = layer.lookahead[: layer.n_lookahead]
            ahead_u = [Mux(en, pipe.at(x, u - 1), pipe.at(x, u)) for x in la]
            if not self.pipelined:
                m.d.comb += commit.eq(en & valid[u])
                layer.apply(m, commit, fields_u, ahead_u)
                continue
            packed_u = Cat(*fields_u)
            fast = fast_registers(spec)
            m.submodules[f"l{l}_pending"] = fifo = PendingUpdates(
                width=len(packed_u), depth=self.staleness, registered=fast,
                lookahead_bits=sum(len(x.value) for x in la) if fast else 0)
            pending = Signal(unsigned(max(1, self.staleness.bit_length())), name=f"l{l}_pending")
            enter = en & valid[r]  # a sample leaves the read stage: its read is done
            bypass = fifo.level == 0
            commit_on_read = Signal(name=f"commit_on_read_l{l}")
            flush_pop = Signal(name=f"flush_l{l}")
            m.d.comb += [
                commit_on_read.eq(enter & (pending == self.staleness)),
                flush_pop.eq(draining & ~busy & ~bypass),
                commit.eq(commit_on_read | flush_pop),
            ]
            if not fifo.registered:
                m.d.comb += [
                    # an update committed the cycle it is ready never enters the queue
                    fifo.w_en.eq(en & valid[u] & ~(commit_on_read & bypass)),
                    fifo.w_data.eq(packed_u),
                    fifo.r_en.eq(commit & ~bypass),
                ]
            else:
                # the push and pop an advancing edge makes (flush_pop only happens while the
                # pipeline is empty, so it advances), and the stage-U update after it: en is the
                # queue's enable, kept out of the selects of its wide head register
                read_full = valid[r] & (pending == self.staleness)
                m.d.comb += [
                    fifo.en.eq(en),
                    fifo.w_en.eq(valid[u] & ~(read_full & bypass)),
                    fifo.w_data.eq(packed_u),
                    fifo.r_en.eq((read_full | flush_pop) & ~bypass),
                    fifo.w_next.eq(Cat(*[pipe.before(x) for x in fields_u])),
                ]
            fields = unpack(fifo.r_data, fields_u)
            # the update a commit in the next cycle takes: the queue's next head or, when the queue
            # will be empty, the stage-U update after this advance
            from_fifo = unpack(fifo.next_data, fields_u)[: len(la)]
            ahead = [Mux(fifo.next_level == 0, x, y) for x, y in zip(ahead_u, from_fifo)]
            layer.apply(m, commit, fields, ahead)
            m.d.sync += pending.eq(pending + enter - commit)
            flushed.append(bypass)

        seq_ok = 1
        if chan is not None:
            # per-channel hazard: a sample of this channel still before the stage where the next one may
            # enter (its update commits at U, and a sample entering now reads at R, II - 1 stages later)
            same = [valid[s] & (pipe.at(chan, s) == chan_in) for s in range(1, self.sequential_ii)]
            if same:
                hazard = Signal(name="channel_hazard")
                m.d.comb += hazard.eq(Cat(*same).any())
                seq_ok = ~hazard
        elif not self.pipelined and self.initiation_interval > 1:
            seq_ok = ~Cat(*valid[1 : self.initiation_interval]).any()

        # reload after reset: parameters kept in RAM go back to theta0 through the port's write path
        reload = reload_from_rom(m, self.theta0, f.coef, any(layer.storage == "memory" for layer in layers),
                                 channels=self.channels)
        reloading = reload.active
        # a port command (or reload word) still in the port's register stages: no sample may read
        # the parameters before it lands
        n_port = self.stages["port"]
        port_cmd = Signal(name="port_cmd") if n_port else None
        in_flight = [Signal(name=f"port_in_flight{n}") for n in range(n_port)]
        for n, r in enumerate(in_flight):
            m.d.sync += r.eq(in_flight[n - 1] if n else port_cmd)
        takes = en & ~draining & ~reloading & seq_ok
        if n_port:
            takes = takes & ~Cat(*in_flight).any()

        taken = self.s.valid & self.s.ready
        m.d.comb += self.s.ready.eq(takes)
        if self.guards_channel:
            # N not a power of two: a channel field >= N names no bank; the sample is taken (the
            # stream never blocks on it) and dropped, and channel_error stays high until reset
            bad = chan_in >= self.channels
            m.d.comb += accept.eq(taken & ~bad)
            with m.If(taken & bad):
                m.d.sync += self.channel_error.eq(1)
        else:
            m.d.comb += accept.eq(taken)

        # parameter port: a command waits until the learner is drained and flushed; a write
        # answers the value written in the next cycle, a read the value read once it is back
        # (the port's stages + 1 cycles later, as RAM reads are synchronous)
        data, addr, write = self.command_fields()
        drained = ~busy
        for ok in flushed:
            drained = drained & ok
        execute = Signal()
        reading = [Signal(name=f"read_wait{n}" if n else "read_wait") for n in range(n_port + 1)]
        read_wait = Cat(*reading).any() if n_port else reading[0]
        m.d.comb += [
            execute.eq(self.pc.valid & drained & ~reloading & ~read_wait & (~self.pr.valid | self.pr.ready)),
            self.pc.ready.eq(execute),
        ]
        port_addr = Signal.like(addr, name="port_addr")
        m.d.comb += port_addr.eq(Mux(reload.write, reload.addr, addr))
        cmd_chan = self.command_channel()
        if cmd_chan is not None:
            port_chan = Signal.like(cmd_chan, name="port_chan")
            m.d.comb += port_chan.eq(Mux(reload.write, reload.channel, cmd_chan))
        acts = execute  # a command that addresses a bank
        if self.guards_channel:
            # N not a power of two: a command naming a channel >= N addresses no bank; it reads and
            # writes nothing, answers 0 the next cycle (one answer per command, as always) and
            # raises channel_error, as a dropped sample does
            bad_cmd = Signal(name="command_channel_bad")
            acts = Signal(name="command_acts")
            m.d.comb += [bad_cmd.eq(cmd_chan >= self.channels), acts.eq(execute & ~bad_cmd)]
            with m.If(execute & bad_cmd):
                m.d.sync += self.channel_error.eq(1)
        read_layer = Signal(range(max(2, n_layers)), name="read_layer")
        for l, layer in enumerate(layers):
            hit = (port_addr >= layer.offset) & (port_addr < layer.offset + layer.size)
            m.d.comb += [
                layer.port_local.eq(port_addr - layer.offset),
                layer.port_data.eq(Mux(reload.write, reload.data, data)),
                layer.port_wr.eq(hit & (reload.write | (acts & write))),
                layer.port_rd.eq(hit & acts & ~write),
            ]
            if cmd_chan is not None:
                m.d.comb += layer.port_chan.eq(port_chan)
            layer.port(m)
            with m.If(layer.port_rd):
                m.d.sync += read_layer.eq(l)
        if n_port:
            m.d.comb += port_cmd.eq(reload.write | execute)
        for n, r in enumerate(reading):
            m.d.sync += r.eq(reading[n - 1] if n else acts & ~write)
        resp = Signal(fmt_shape(f.coef))
        # answered the next cycle: a write with its value, a command of no channel with 0 (the
        # expressions built here, in this order, keep the Verilog of unguarded designs as it was)
        answer_now, answer = execute & write, data
        if self.guards_channel:
            answer_now, answer = execute & (write | bad_cmd), Mux(bad_cmd, 0, data)
        with m.If(answer_now):
            m.d.sync += [self.pr.valid.eq(1), resp.eq(answer)]
        with m.Elif(reading[-1]):
            m.d.sync += [self.pr.valid.eq(1), resp.eq(Array([ly.readback for ly in layers])[read_layer])]
        with m.Elif(self.pr.ready):
            m.d.sync += self.pr.valid.eq(0)
        m.d.comb += self.pr.payload.data.eq(resp)

        pipe.finalize()
        return m
