"""KAN and MLP layer datapaths: forward pass, backward pass and the parameter update.

A layer builds its logic into the learner's module on a shared :class:`Pipe`
(one in-order pipeline). KAN coefficients live in RAM banks
(:mod:`onchip.hw.coefmem`: k+1 banks per edge, so the logic does not grow with
G); MLP weights and biases are registers (every weight is read every sample).
The arithmetic and every rounding point are those of
:func:`onchip.model.kernels.kan_step` / :func:`~onchip.model.kernels.mlp_step`.

After :meth:`forward` and :meth:`backward` a layer knows

* ``read_stage`` R: the stage whose cycle reads its parameters;
* ``update_stage`` U: the stage at which its update (``update_fields``) is ready;
* ``n_lookahead``: how many leading update fields the commit needs one cycle
  early (a RAM's read address), and ``lookahead`` (their :class:`Staged` values);
* :meth:`apply`: the logic that commits an update vector;
* :meth:`port`: the parameter port (``port_*`` signals, ``readback`` one cycle after a read).
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib.memory import Memory

from ..model.golden import layout
from ..spec import LearnerSpec
from .bspline import BSplineUnit
from .coefmem import EdgeBanks, bank_address, by_bank, by_basis, channel_address, split_cell
from .dsp import check_dsp, registered_product
from .fixedpoint import fmt_shape, node, overflow, requant, requant_beside, requant_by_carry, subtract_requant
from .pipeline import Pipe, Staged
from .plan import PORT_STAGES, fast_registers, stage_plan, update_fracs
from .ram import div_const, port_step, ram_style


def layer_class(kind: str) -> type:
    """The layer datapath of a learner ``kind``: :class:`KanLayer` (``"kan"``) or :class:`MlpLayer` (``"mlp"``).

    Raises:
        ValueError: another kind.
    """
    classes = {"kan": KanLayer, "mlp": MlpLayer}
    if kind not in classes:
        raise ValueError(f"kind must be one of {', '.join(classes)}, got {kind!r}")
    return classes[kind]


def staged_tree(pipe: Pipe, terms: list[Staged], to_stage: int, name: str, extra_last: bool = False) -> Staged:
    """Exact sum of ``terms`` (all at one stage) as a balanced adder tree whose ceil(log2 n) levels
    are spread evenly over the stages until ``to_stage``, a register after each stage's levels
    (the first stages take the extra level, or with ``extra_last`` the last ones: the stage right
    after a multiplier's product register, whose route into the fabric is long, then gets the
    fewest adders); with no stage left, the tree is combinational.

    Returns:
        the sum, valid at ``to_stage``.

    Raises:
        ValueError: no terms, terms at different stages, or ``to_stage`` before the terms (a
            ``to_stage`` beyond the tree's ceil(log2 n) levels delays the sum with registers).
    """
    if not terms or len({t.stage for t in terms}) != 1:
        raise ValueError("staged_tree needs at least one term, all at one stage")
    s, values, level = terms[0].stage, [t.value for t in terms], 0
    if to_stage < s:
        raise ValueError(f"an adder tree of {len(values)} terms at stage {s} cannot end at stage {to_stage}")
    while s < to_stage:  # a tree shallower than the stages given is delayed (extra_last: before its first level)
        depth = (len(values) - 1).bit_length()
        for _ in range(depth // (to_stage - s) if extra_last else -(-depth // (to_stage - s))):
            values = _tree_level(values)
        values = [pipe.reg(v, s, f"{name}_t{level}_{n}_s{s + 1}").value for n, v in enumerate(values)]
        s, level = s + 1, level + 1
    return Staged(tree_sum(values), s)


def tree_sum(values: list[Value]) -> Value:
    """Exact sum of ``values`` as a balanced adder tree."""
    values = list(values)
    if not values:
        raise ValueError("tree_sum needs at least one value")
    while len(values) > 1:
        values = _tree_level(values)
    return values[0]


def _tree_level(values: list[Value]) -> list[Value]:
    """One level of a balanced adder tree: neighbours summed in pairs, an odd last value carried."""
    return [values[n] + values[n + 1] for n in range(0, len(values) - 1, 2)] + ([values[-1]] if len(values) % 2 else [])


class _Layer:
    """What a KAN and an MLP layer share: the constructor, the parameter-port signals and one
    signature per role (:meth:`forward`, :meth:`backward`, :meth:`apply`, :meth:`port`), so the
    learner builds and calls every layer the same way.

    Args (keyword-only):
        spec: the learner (its ``kind`` must be the layer's).
        config: its kernel configuration (:func:`onchip.model.golden.kernel_config`).
        theta0: raw initial parameters of the whole learner, flat (P,), or (N, P) for N channels
            (KAN: one bank range per channel, :class:`~onchip.hw.coefmem.EdgeBanks`); the layer takes
            its slice ``layout(spec)[index]`` (:func:`onchip.model.golden.layout`).
        index: layer number l, 0 .. L-1 (the last layer is the output layer).
        live_backprop: the backward pass may use the parameters as they are when it runs (the
            sequential schedule, where no update lands in between) instead of the values the
            forward pass read.
        stages: the layer's entry of :func:`onchip.hw.plan.stage_plan` (where its registers
            go); default: taken from the spec's plan.
        dsp: the registered raw products of the ``fast`` plan as generic ``*`` (None) or as a
            device's DSP primitive with its registers (``"ecp5"``, ``"ice40"``: :mod:`onchip.hw.dsp`).

    Raises:
        ValueError: a spec of another kind, an index outside 0 .. L-1, or theta0 not of length P
            (or not N rows of P for N channels).

    Channels (N > 1): the learner sets :attr:`channel` (the sample's channel, a :class:`Staged`)
    before :meth:`forward` and drives :attr:`port_chan` beside the port's other signals.
    """

    kind = ""
    n_lookahead = 0
    #: where the parameters are kept: "registers" or "memory"
    storage = "registers"

    def __init__(self, *, spec: LearnerSpec, config, theta0, index: int, live_backprop: bool,
                 stages: dict | None = None, dsp: str | None = None):
        slices = layout(spec)
        if spec.kind != self.kind:
            raise ValueError(f"{type(self).__name__} builds a {self.kind} layer, the spec is a {spec.kind}")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(slices):
            raise ValueError(f"index must be a layer number 0 .. {len(slices) - 1}, got {index!r}")
        thetas = np.atleast_2d(np.asarray(theta0))
        if thetas.ndim != 2 or thetas.shape[1] != spec.parameter_count():
            raise ValueError(f"theta0 must hold the {spec.parameter_count()} parameters of the learner, "
                             f"got shape {np.shape(theta0)}")
        #: initial parameters by channel (N, P); theta0 is channel 0's
        self.thetas, self.channels = thetas, thetas.shape[0]
        theta0 = thetas[0]
        self.channel: Staged | None = None  # the sample's channel from stage 1 on
        self.channel_in: Value | None = None  # ... and in the accepting cycle (the payload field)
        lay = slices[index]
        self.spec, self.index, self.offset = spec, index, lay.offset
        self.n_in, self.n_out, self.size = lay.n_in, lay.n_out, lay.size
        self.in_frac = int(config.in_frac[index])
        self.last = index == len(slices) - 1
        self.live_backprop = live_backprop
        self.f = spec.formats
        #: the format of this layer's outputs: the output format (``formats.y``) for the last layer
        self.out_fmt = self.f.y if self.last else self.f.act
        if stages is None:
            stages = stage_plan(spec)["layers"][index]
        self.st = stages
        # timing = "fast": products registered raw, their conversion after the register; KAN updates
        # carry bank addresses and bank-ordered deltas
        self.raw_products = self.bank_ordered = fast_registers(spec)
        #: an odd adder-tree level goes to the tree's last stage on the sequential schedule (measured,
        #: placer seeds 1-3, mean fmax change: sequential +4.1%, the user's 2->3->1 KAN +11%, where the
        #: first tree stage was the path; pipelined -1.9%, where the paths lie elsewhere: kept first)
        self.tree_extra_last = spec.schedule == "sequential"
        #: the rounding conversion: fast rounds with one carry chain, saturates by bits (requant_by_carry)
        self.rq = requant_by_carry if fast_registers(spec) else requant
        #: the registered raw products: generic, or a device's DSP primitive (:mod:`onchip.hw.dsp`), on
        #: both schedules: with the pending-update queue in LUT RAM, mlp-readout pipelined at fast placed
        #: at 98.8 MHz with the product registers in the DSP against 79.9 generic (kan-readout 108.7
        #: against 110.8; seed 1 each)
        self.dsp = check_dsp(dsp)
        self.read_stage = self.update_stage = None
        self.update_fields: list[Value] = []
        self.lookahead: list[Staged] = []
        # parameter port, driven by the learner: write or read theta[offset + port_local]
        self.port_wr = Signal(name=f"l{index}_port_wr")
        self.port_rd = Signal(name=f"l{index}_port_rd")
        self.port_local = Signal(range(max(2, self.size)), name=f"l{index}_port_local")
        self.port_data = Signal(fmt_shape(self.f.coef), name=f"l{index}_port_data")
        self.port_chan = (Signal(range(self.channels), name=f"l{index}_port_chan") if self.channels > 1
                          else None)
        self.readback: Value | None = None
        #: after :meth:`forward`: each output's sum in ``acc`` before its conversion into ``out_fmt``
        self.sums: list[Staged] = []

    def product(self, m: Module, pipe: Pipe, x: Value, y: Value, stage: int, frac_from: int, fmt,
                to_stage: int, name: str) -> Staged:
        """``requant(x * y)`` into ``fmt``, registered: converted then registered (compact), or the raw
        product registered and converted after it, registered again when ``to_stage`` says so (fast).

        Args:
            x, y: the factors, valid at ``stage``. frac_from: fractional bits of the product.
            to_stage: the stage where the converted product is to be valid (from the stage plan).
        """
        if not self.raw_products:
            out = pipe.reg(requant(m, x * y, frac_from, fmt), stage, f"{name}_s{stage + 1}")
        else:
            raw = registered_product(m, pipe, x, y, stage, f"{name}_raw_s{stage + 1}", self.dsp)
            out = Staged(self.rq(m, raw.value, frac_from, fmt), raw.stage)
            if to_stage > out.stage:
                out = pipe.reg(out.value, out.stage, f"{name}_s{out.stage + 1}")
        if out.stage != to_stage:
            raise AssertionError(f"{name}: product at stage {out.stage}, the stage plan says {to_stage}")
        return out

    def delta(self, m: Module, pipe: Pipe, x: Value, y: Value | None, stage: int, frac_from: int,
              name: str) -> Value:
        """An update term ``requant(x * y)`` (or ``requant(x)`` when ``y`` is None) into ``coef``, valid at
        the update stage U: formed in stage ``stage`` = E when compact; fast: the raw product registered,
        then its rounding registered (U = E + 2), or with the stage plan's ``rounds_in_commit`` the raw
        product itself (U = E + 1), which :meth:`apply` rounds in the commit's subtraction."""
        u, f = self.st["update"], self.f
        if self.st.get("rounds_in_commit"):  # raw, U = E + 1: the commit rounds it (subtract_requant)
            if y is None:
                return pipe.at(Staged(x, stage), u)
            return pipe.at(registered_product(m, pipe, x, y, stage, f"{name}_raw_s{stage + 1}", self.dsp), u)
        if u == stage:
            return requant(m, x if y is None else x * y, frac_from, f.coef)
        if y is None:
            return pipe.at(pipe.reg(self.rq(m, x, frac_from, f.coef), stage, f"{name}_s{stage + 1}"), u)
        raw = registered_product(m, pipe, x, y, stage, f"{name}_raw_s{stage + 1}", self.dsp)
        return pipe.at(pipe.reg(self.rq(m, raw.value, frac_from, f.coef), raw.stage, f"{name}_s{raw.stage + 1}"), u)

    def forward(self, m: Module, pipe: Pipe, u: list[Staged]) -> list[Staged]:
        """Build the forward pass on the inputs ``u`` (n_in values at one stage); returns the n_out
        outputs (at a later stage) and sets :attr:`read_stage`."""
        raise NotImplementedError

    def backward(self, m: Module, pipe: Pipe, err: list[Staged]) -> list[Staged] | None:
        """Build the backward pass from the output errors ``err`` (n_out values at one stage):
        sets :attr:`update_stage` and :attr:`update_fields`; returns the error of the previous
        layer (n_in values), or None for layer 0."""
        raise NotImplementedError

    def apply(self, m: Module, commit: Value, fields: list[Value], ahead: list[Value]) -> None:
        """Commit the update vector ``fields`` (shaped as :attr:`update_fields`) when ``commit``;
        ``ahead``: the first :attr:`n_lookahead` fields of the update that can commit in the next cycle."""
        raise NotImplementedError

    def port(self, m: Module) -> None:
        """Build the parameter port: ``port_*`` signals in, :attr:`readback` P + 1 cycles after a read
        (P: the layer's ``port`` entry of the stage plan, registers between command and parameters)."""
        raise NotImplementedError


class KanLayer(_Layer):
    """One KAN layer: n_out x n_in B-spline edges of G + k coefficients each, in RAM banks.

    Forward (3 stages from its input a): B-spline unit and basis ROM, and the
    RAM read address of the k+1 active coefficients (a); coefficients arrive
    from the RAM, products into ``acc`` (a+1); sums, outputs into ``act`` and,
    for hidden layers, dphi into ``grad`` (a+2). Backward from the error e at
    stage E: the sparse update of the k+1 active coefficients per edge (ready
    at E) and, for hidden layers, the error to the previous layer (2 stages).
    A commit reads the current k+1 coefficients through a second RAM read port
    (address one cycle ahead, ``lookahead``) and writes them back changed.
    The stages are those of the layer's :func:`~onchip.hw.plan.stage_plan` entry; with
    ``timing = "fast"`` the update carries the k+1 bank addresses and its deltas in bank order
    (registered in the read stage) instead of the cell, and ``lookahead`` is the addresses; on the
    sequential schedule the basis values are registered in bank order with the read address, so
    the RAM words meet the multipliers directly (no by-basis multiplexer, no operand stage).

    Args, Raises: those of the layers' common constructor (keyword-only ``spec``, ``config``
    (a :class:`~onchip.model.kernels.KanConfig`), ``theta0``, ``index``, ``live_backprop``).
    """

    kind = "kan"
    storage = "memory"

    def __init__(self, *, spec: LearnerSpec, config, theta0, index: int, live_backprop: bool,
                 stages: dict | None = None, dsp: str | None = None):
        super().__init__(spec=spec, config=config, theta0=theta0, index=index, live_backprop=live_backprop,
                         stages=stages, dsp=dsp)
        self.cfg = config
        offset, n_in, n_out = self.offset, self.n_in, self.n_out
        self.g, self.k1 = spec.grid_size, spec.spline_order + 1
        self.n_lookahead = n_in
        nc = spec.n_coef
        # [channel][j][i]: the G + k coefficients of edge (j, i)
        self.theta_ch = [[[[int(th[offset + (j * n_in + i) * nc + q]) for q in range(nc)] for i in range(n_in)]
                          for j in range(n_out)] for th in self.thetas]
        self.theta0 = self.theta_ch[0]
        self.depth = -(-nc // self.k1)
        # the port command as it reaches the RAM banks (decoded; registered when fast, see port)
        self.port_edge = Signal(range(max(2, n_in * n_out)), name=f"l{index}_port_edge")
        self.port_bank = Signal(range(max(2, self.k1)), name=f"l{index}_port_bank")
        self.port_baddr = Signal(range(max(2, self.depth)), name=f"l{index}_port_baddr")
        if self.st["port"]:
            self.ram_wr = Signal(name=f"l{index}_ram_wr")
            self.ram_rd = Signal(name=f"l{index}_ram_rd")
            self.ram_data = Signal.like(self.port_data, name=f"l{index}_ram_data")
            self.ram_chan = None if self.port_chan is None else Signal.like(self.port_chan, name=f"l{index}_ram_chan")
        else:
            self.ram_wr, self.ram_rd, self.ram_data = self.port_wr, self.port_rd, self.port_data
            self.ram_chan = self.port_chan

    def _split(self, m: Module, cell: Value, name: str):
        return split_cell(m, cell, self.k1, self.g, f"l{self.index}_{name}")

    def forward(self, m: Module, pipe: Pipe, u: list[Staged]) -> list[Staged]:
        cfg, f, l, st = self.cfg, self.f, self.index, self.st
        a = u[0].stage
        if a != st["in"] or st["read"] not in (a + 1, a + 2):
            raise AssertionError(f"layer {l}: inputs at stage {a}, the stage plan says {st['in']} (read at "
                                 f"in + 1, or in + 2 with the B-spline unit split)")
        split = st["read"] == a + 2
        c = st["read"] - 1  # the stage of the cell index, the basis table and the RAM address
        hidden_in = l > 0
        # sequential fast: the basis values (and derivatives) registered in bank order with the read
        # address, so the RAM words meet their multipliers with no by-basis multiplexer and no
        # register between (one stage less per layer; measured: sweeps/timing/README.md)
        bank_operands = self.bank_ordered and st["operands"] == st["read"]
        self.cell, self.bval, self.bder, self.clamped, self.dphi = [], [], [], [], []
        lo_r, addr = [], []
        for i in range(self.n_in):
            unit = BSplineUnit(
                f.input if l == 0 else f.act, cfg.lo_raw[l], cfg.pos_bits[l], cfg.grid_size,
                cfg.table_bits, cfg.bval, cfg.bder, f.basis, split=split,
                logic_rom=self.bank_ordered,  # the table feeds the bank-order multiplexer in one cycle
            )
            m.submodules[f"l{l}_bspline{i}"] = unit
            m.d.comb += unit.u.eq(pipe.at(u[i], a))
            if split:
                m.d.comb += unit.pos_in.eq(pipe.reg(unit.pos, a, f"l{l}_pos{i}_s{a + 1}").value)
            hi, lo = self._split(m, unit.cell, f"cell{i}")
            addr.append([bank_address(hi, lo, bk) for bk in range(self.k1)])
            lo_r.append(pipe.reg(lo, c, f"l{l}_lo{i}_s{c + 1}").value)
            self.cell.append(pipe.reg(unit.cell, c, f"l{l}_cell{i}_s{c + 1}"))
            # by basis index, or (bank_operands) by the bank that holds the coefficient
            bval, bder, order = list(unit.bval), list(unit.bder), ""
            if bank_operands:
                bval, bder, order = by_bank(bval, lo), by_bank(bder, lo), "_bank"
            self.bval.append([pipe.reg(v, c, f"l{l}_bval{order}{i}_{mm}_s{c + 1}") for mm, v in enumerate(bval)])
            if hidden_in:
                self.bder.append([pipe.reg(v, c, f"l{l}_bder{order}{i}_{mm}_s{c + 1}") for mm, v in enumerate(bder)])
                self.clamped.append(pipe.reg(unit.clamped, a, f"l{l}_clamped{i}_s{a + 1}"))
        self.lookahead = self.cell
        r = st["read"]
        # the sample's channel where the RAM is addressed (N > 1: the banks hold a range per channel)
        chan_c = None if self.channel is None else pipe.at(self.channel, c)
        self.read_stage = r
        if self.bank_ordered:
            # per bank, registered in the read stage: the commit's RAM address, and the basis value of
            # the coefficient the bank holds (so an update product comes out in bank order): the
            # commit then holds no cell split, address adder or bank mux
            self.waddr, self.bval_bank = [], []
            for i in range(self.n_in):
                hi, lo = self._split(m, self.cell[i].value, f"waddr{i}")
                self.waddr += [pipe.reg(bank_address(hi, lo, bk), r, f"l{l}_waddr{i}_{bk}_s{r + 1}")
                               for bk in range(self.k1)]
                if bank_operands:  # in bank order already
                    self.bval_bank.append(self.bval[i])
                    continue
                ordered = by_bank([x.value for x in self.bval[i]], lo_r[i])
                self.bval_bank.append([pipe.reg(v, r, f"l{l}_bval_bank{i}_{bk}_s{r + 1}")
                                       for bk, v in enumerate(ordered)])
            self.lookahead = self.waddr
            self.n_lookahead = len(self.waddr)
        if self.channel is not None:  # the commit's RAM addresses start with the sample's channel
            self.lookahead = [self.channel] + self.lookahead
            self.n_lookahead += 1
        f_prod = f.coef.frac_bits + f.basis.frac_bits
        # the stage of the sums' last register: the outputs are registered after it, or with the plan's
        # out_comb leave from it unregistered
        sum_end = st["out"] - int(not st.get("out_comb"))
        self.banks = []
        outs = []
        for j in range(self.n_out):
            terms, self_dphi, row = [], [], []
            for i in range(self.n_in):
                banks = EdgeBanks(m, self.theta0[j][i], self.k1, f.coef, f"l{l}_coef_{j}_{i}",
                                  channels=None if self.channel is None else [t[j][i] for t in self.theta_ch])
                self.span = banks.span
                row.append(banks)
                port_addr = channel_address(self.port_baddr, self.ram_chan, banks.span)
                for b, rp in enumerate(banks.read):
                    m.d.comb += [
                        rp.addr.eq(Mux(self.ram_rd, port_addr, channel_address(addr[i][b], chan_c, banks.span))),
                        rp.en.eq(pipe.en | self.ram_rd),
                    ]
                dterms = []
                o = st["operands"]
                if "levels" in st:  # predict-first: the products unregistered, summed after the loop
                    terms += [Staged(self.rq(m, rp.data * self.bval[i][b].value, f_prod, f.acc), o)
                              for b, rp in enumerate(banks.read)]
                    continue
                # the k+1 words by basis index, or (bank_operands) as the banks give them
                words = [rp.data for rp in banks.read]
                coefs = words if bank_operands else by_basis(words, lo_r[i])
                for mm in range(self.k1):
                    coef = Staged(node(m, coefs[mm], f"l{l}_read{j}_{i}_{mm}"), r)
                    if o > r:
                        coef = pipe.reg(coef.value, r, f"l{l}_coef{j}_{i}_{mm}_s{r + 1}")
                    coef = pipe.at(coef, o)
                    terms.append(self.product(m, pipe, coef, pipe.at(self.bval[i][mm], o), o, f_prod, f.acc,
                                              st["terms"], f"l{l}_prod{j}_{i}_{mm}"))
                    if hidden_in:
                        dterms.append(self.product(m, pipe, coef, pipe.at(self.bder[i][mm], o), o, f_prod,
                                                   f.acc, st["terms"], f"l{l}_dprod{j}_{i}_{mm}"))
                if hidden_in:
                    sd = staged_tree(pipe, dterms, sum_end, f"l{l}_dsum{j}_{i}", self.tree_extra_last)
                    dphi = self.rq(m, overflow(m, sd.value, f.acc), f.acc.frac_bits + self.spec.cell_exp, f.grad)
                    self_dphi.append(pipe.reg(dphi, sd.stage, f"l{l}_dphi{j}_{i}_s{sd.stage + 1}"))
            self.banks.append(row)
            self.dphi.append(self_dphi)
            if "levels" in st:
                outs.append(self._predict_first_sum(m, pipe, terms, j))
                continue
            s = staged_tree(pipe, terms, sum_end, f"l{l}_sum{j}", self.tree_extra_last)
            self.sums.append(Staged(overflow(m, s.value, f.acc), s.stage))
            out = self.rq(m, self.sums[-1].value, f.acc.frac_bits, self.out_fmt)
            if st.get("out_comb"):  # unregistered: the next layer's B-spline unit registers what it makes of it
                outs.append(Staged(node(m, out, f"l{l}_out{j}"), s.stage))
            else:
                outs.append(pipe.reg(out, s.stage, f"l{l}_out{j}_s{st['out']}"))
        if any(o.stage != st["out"] for o in outs):
            raise AssertionError(f"layer {l}: outputs at stage {outs[0].stage}, the stage plan says {st['out']}")
        return outs

    def _predict_first_sum(self, m: Module, pipe: Pipe, terms: list[Staged], j: int) -> Staged:
        """``timing = "predict-first"``: output j from its products (at the read stage, unregistered):
        the plan's ``levels`` adder-tree levels, one register, then the other levels and the rounding
        to the output format, combinational at the plan's ``out`` stage (the prediction; nothing registers it)."""
        st, f = self.st, self.f
        values = [t.value for t in terms]
        for _ in range(st["levels"]):
            values = _tree_level(values)
        s = terms[0].stage
        values = [pipe.reg(v, s, f"l{self.index}_sum{j}_t0_{n}_s{s + 1}").value for n, v in enumerate(values)]
        # the saturation decided beside the rounding's carry chain, not after it (the path to the sink)
        out = requant_beside(m, overflow(m, tree_sum(values), f.acc), f.acc.frac_bits, self.out_fmt)
        if s + 1 != st["out"]:
            raise AssertionError(f"layer {self.index}: output at stage {s + 1}, the stage plan says {st['out']}")
        return Staged(out, s + 1)

    def backward(self, m: Module, pipe: Pipe, err: list[Staged]) -> list[Staged] | None:
        f, l, st = self.f, self.index, self.st
        e = err[0].stage
        if e != st["error"]:
            raise AssertionError(f"layer {l}: error at stage {e}, the stage plan says {st['error']}")
        self.update_stage = st["update"]
        (f_update,) = update_fracs(self.spec, l)
        where = self.waddr if self.bank_ordered else self.cell  # bank addresses, or the cells
        cells = [pipe.at(x, self.update_stage) for x in where]
        if self.channel is not None:  # the channel first: the commit reads it one cycle ahead
            cells = [pipe.at(self.channel, self.update_stage)] + cells
        bvals = self.bval_bank if self.bank_ordered else self.bval
        deltas = []
        for j in range(self.n_out):
            for i in range(self.n_in):
                for mm in range(self.k1):
                    b = pipe.at(bvals[i][mm], e)
                    deltas.append(self.delta(m, pipe, err[j].value, b, e, f_update, f"l{l}_delta{j}_{i}_{mm}"))
        self.update_fields = cells + deltas
        if l == 0:
            return None
        prev = []
        for i in range(self.n_in):
            terms = [self.product(m, pipe, err[j].value, pipe.at(self.dphi[j][i], e), e, 2 * f.grad.frac_bits,
                                  f.acc, st["bterms"], f"l{l}_bprod{i}_{j}") for j in range(self.n_out)]
            s = staged_tree(pipe, terms, st["prev"] - 1, f"l{l}_bsum{i}", self.tree_extra_last)
            val = self.rq(m, overflow(m, s.value, f.acc), f.acc.frac_bits, f.grad)
            val = Mux(pipe.at(self.clamped[i], s.stage), 0, val)
            prev.append(pipe.reg(val, s.stage, f"l{l - 1}_err{i}_s{st['prev']}"))
        return prev

    def apply(self, m: Module, commit: Value, fields: list[Value], ahead: list[Value]) -> None:
        """Commit an update vector when ``commit``: theta[c+m] = overflow(theta[c+m] - delta[m]) on
        every edge, read (through the ``rmw`` ports, addressed by ``ahead``: the cells of the update
        that can commit in the next cycle) and written in the same cycle; parameter-port writes share
        the write ports."""
        n_in, k1 = self.n_in, self.k1
        ch_now = ch_next = None
        if self.channel is not None:  # fields and ahead start with the channel
            ch_now, ch_next, fields, ahead = fields[0], ahead[0], fields[1:], ahead[1:]
        if self.bank_ordered:  # fields: bank addresses, then deltas in bank order
            na = n_in * k1
            deltas = fields[na:]
            now_addr = [fields[i * k1 : (i + 1) * k1] for i in range(n_in)]
            nxt_addr = [ahead[i * k1 : (i + 1) * k1] for i in range(n_in)]
        else:  # fields: cells, then deltas in basis order
            deltas = fields[n_in:]
            now = [self._split(m, fields[i], f"commit{i}") for i in range(n_in)]
            nxt = [self._split(m, ahead[i], f"ahead{i}") for i in range(n_in)]
            now_addr = [[bank_address(*now[i], b) for b in range(k1)] for i in range(n_in)]
            nxt_addr = [[bank_address(*nxt[i], b) for b in range(k1)] for i in range(n_in)]
        n = 0
        for j in range(self.n_out):
            for i in range(n_in):
                banks = self.banks[j][i]
                d = deltas[n : n + k1] if self.bank_ordered else by_bank(deltas[n : n + k1], now[i][1])
                n += k1
                for b in range(k1):
                    rmw, wp = banks.rmw[b], banks.write[b]
                    if self.st.get("rounds_in_commit"):
                        new = subtract_requant(m, rmw.data, d[b], update_fracs(self.spec, self.index)[0], self.f.coef)
                    else:
                        new = overflow(m, rmw.data - d[b], self.f.coef, by_bits=fast_registers(self.spec))
                    hit = node(m, self.ram_wr & (self.port_edge == j * n_in + i) & (self.port_bank == b),
                               f"l{self.index}_port_hit{j}_{i}_{b}")
                    span = banks.span
                    m.d.comb += [
                        rmw.addr.eq(channel_address(nxt_addr[i][b], ch_next, span)),
                        rmw.en.eq(1),
                        wp.addr.eq(Mux(hit, channel_address(self.port_baddr, self.ram_chan, span),
                                       channel_address(now_addr[i][b], ch_now, span))),
                        wp.data.eq(Mux(hit, self.ram_data, new)),
                        wp.en.eq(commit | hit),
                    ]

    def port(self, m: Module) -> None:
        """Parameter port: theta[offset + e*(G+k) + q] is word q div (k+1) of bank q mod (k+1) of edge e.

        The stage plan's ``port`` entry: 0 decodes in the command's cycle; 4 (fast) registers
        the command, the edge e (a constant division, in logic), q (the local index less a table's e (G + k))
        and the bank/word split, one step each, so
        the command reaches the RAM 4 cycles later (the learner waits for it)."""
        nc, k1, l, stages = self.spec.n_coef, self.k1, self.index, self.st["port"]
        if stages not in (0, PORT_STAGES):
            raise AssertionError(f"layer {l}: {stages} parameter-port stages, the KAN port has 0 or {PORT_STAGES}")
        if not stages:  # decoded in the command's cycle
            edge = node(m, div_const(self.port_local, nc, self.size - 1), f"l{l}_port_edge_q")
            q = Signal(range(max(2, nc)), name=f"l{l}_port_q")
            m.d.comb += q.eq(self.port_local - edge * nc)
            baddr = node(m, div_const(q, k1, nc - 1), f"l{l}_port_baddr_q")
            m.d.comb += [self.port_edge.eq(edge), self.port_baddr.eq(baddr), self.port_bank.eq(q - baddr * k1)]
        else:
            pre = f"l{l}_port"
            wr, rd, data = self.port_wr, self.port_rd, self.port_data
            chan = {} if self.port_chan is None else {"chan": self.port_chan}  # carried beside the command
            local, wr, rd, data, *ch = port_step(m, 1, pre, local=self.port_local, wr=wr, rd=rd, data=data, **chan)
            chan = {"chan": ch[0]} if ch else {}
            # the division by G + k as shifts and adds: as a constant multiply Yosys maps it to a
            # MULT18X18D, whose routing was kan-1-4-1's critical path (sweeps/timing/README.md)
            edge, local, wr, rd, data, *ch = port_step(m, 2, pre, edge=div_const(local, nc, self.size - 1, in_logic=True),
                                                       local=local, wr=wr, rd=rd, data=data, **chan)
            chan = {"chan": ch[0]} if ch else {}
            # the edge's first word e (G + k) from a table on e (one LUT level), then one subtraction
            first = Array([Const(e * nc, range(max(2, self.size))) for e in range(self.n_in * self.n_out)])[edge]
            q, edge, wr, rd, data, *ch = port_step(m, 3, pre, q=(local - first)[: max(1, (nc - 1).bit_length())],
                                                   edge=edge, wr=wr, rd=rd, data=data, **chan)
            chan = {"chan": ch[0]} if ch else {}
            if k1 & (k1 - 1):
                # q < G + k: for k + 1 not a power of two the bank/word split is read from two small
                # constant tables (one LUT level), not a constant multiply and a subtract in one cycle
                baddr = Array([Const(w // k1, range(max(2, -(-nc // k1)))) for w in range(nc)])[q]
                bank = Array([Const(w % k1, range(max(2, k1))) for w in range(nc)])[q]
            else:  # a shift and a mask
                baddr = div_const(q, k1, nc - 1)
                bank = q - baddr * k1
            baddr, bank, edge, *carried = port_step(m, 4, pre, baddr=baddr, bank=bank, edge=edge, wr=wr, rd=rd,
                                                    data=data, **chan)
            m.d.comb += [self.port_edge.eq(edge), self.port_baddr.eq(baddr), self.port_bank.eq(bank)]
            ram = [self.ram_wr, self.ram_rd, self.ram_data] + ([self.ram_chan] if chan else [])
            m.d.comb += [r.eq(v) for r, v in zip(ram, carried)]
        sel_edge = Signal.like(self.port_edge, name=f"l{l}_rd_edge")
        sel_bank = Signal.like(self.port_bank, name=f"l{l}_rd_bank")
        with m.If(self.ram_rd):
            m.d.sync += [sel_edge.eq(self.port_edge), sel_bank.eq(self.port_bank)]
        words = Array([Array([rp.data for rp in banks.read]) for row in self.banks for banks in row])
        self.readback = words[sel_edge][sel_bank]


class MlpLayer(_Layer):
    """One fully connected layer, ReLU on hidden layers, linear output.

    Forward (2 stages from its input a): products and bias into ``acc``
    (reads W and b at a); sum, output into ``act``, ReLU (a+1). Backward from
    the error e at stage E: the dense update of W and b (ready at E) and, for
    hidden inputs, the error to the previous layer W^T e masked by the ReLU
    (2 stages) with the weights the forward pass read.

    N > 1 channels (``theta0`` (N, P)): the layer's weights and biases are one row of a memory of N
    rows (one per channel, each parameter a write granule), read a stage before the products
    (address: the sample's channel), read again by the commit one cycle ahead and written back
    changed, as a KAN layer's banks are; the backward pass uses the weights the forward pass read.

    Args, Raises: those of the layers' common constructor (keyword-only ``spec``, ``config``
    (a :class:`~onchip.model.kernels.MlpConfig`), ``theta0``, ``index``, ``live_backprop``).
    """

    kind = "mlp"

    def __init__(self, *, spec: LearnerSpec, config, theta0, index: int, live_backprop: bool,
                 stages: dict | None = None, dsp: str | None = None):
        super().__init__(spec=spec, config=config, theta0=theta0, index=index, live_backprop=live_backprop,
                         stages=stages, dsp=dsp)
        offset, n_in, n_out = self.offset, self.n_in, self.n_out
        self.params: list[Signal] = []
        if self.channels > 1:  # a memory row per channel, made in forward
            self.storage, self.n_lookahead = "memory", 1
            return
        self.w = [[self._param(theta0[offset + j * n_in + i], f"l{index}_w_{j}_{i}") for i in range(n_in)]
                  for j in range(n_out)]
        b0 = offset + n_in * n_out
        self.b = [self._param(theta0[b0 + j], f"l{index}_b_{j}") for j in range(n_out)]

    def _memory(self, m: Module, a: int, pipe: Pipe) -> None:
        """N > 1 channels: the memory of N rows, its read port (addressed by the channel of the sample
        one stage before ``a``, the word valid at ``a``) and the weights and biases as its fields."""
        w, l = self.f.coef.width, self.index
        n = self.size
        rows = [sum((int(v) & ((1 << w) - 1)) << (k * w) for k, v in enumerate(th[self.offset : self.offset + n]))
                for th in self.thetas]
        self.mem = Memory(shape=unsigned(n * w), depth=self.channels, init=rows,
                          attrs={"ram_style": ram_style(self.channels, n * w)})
        m.submodules[f"l{l}_params"] = self.mem
        self.wport = self.mem.write_port(granularity=w)
        self.rport = self.mem.read_port(transparent_for=(self.wport,))
        self.rmw = self.mem.read_port(transparent_for=(self.wport,))
        chan = self.channel_in if a == 1 else pipe.at(self.channel, a - 1)  # stage 0: the payload's
        m.d.comb += [
            self.rport.addr.eq(Mux(self.port_rd, self.port_chan, chan)),
            self.rport.en.eq(pipe.en | self.port_rd),
        ]

        def fields(word):
            return [word[k * w : (k + 1) * w].as_signed() if self.f.coef.signed else word[k * w : (k + 1) * w]
                    for k in range(n)]

        self.fields_of = fields
        words = fields(self.rport.data)
        self.params = words
        self.w = [[words[j * self.n_in + i] for i in range(self.n_in)] for j in range(self.n_out)]
        self.b = words[self.n_in * self.n_out :]

    def forward(self, m: Module, pipe: Pipe, u: list[Staged]) -> list[Staged]:
        f, l, st = self.f, self.index, self.st
        a = u[0].stage
        if a != st["in"] or st["read"] != a:
            raise AssertionError(f"layer {l}: inputs at stage {a}, the stage plan says {st['in']} (read at in)")
        self.read_stage = a
        if self.channel is not None:
            self._memory(m, a, pipe)
        self.u = u
        f_prod = f.coef.frac_bits + self.in_frac
        self.w_read = None
        if l > 0 and not self.live_backprop:
            self.w_read = [[pipe.reg(self.w[j][i], a, f"l{l}_wread_{j}_{i}_s{a + 1}") for i in range(self.n_in)]
                           for j in range(self.n_out)]
        outs = []
        for j in range(self.n_out):
            bias = pipe.reg(requant(m, self.b[j], f.coef.frac_bits, f.acc), a, f"l{l}_bias{j}_s{a + 1}")
            terms = [Staged(pipe.at(bias, st["terms"]), st["terms"])]
            for i in range(self.n_in):
                terms.append(self.product(m, pipe, self.w[j][i], u[i].value, a, f_prod, f.acc, st["terms"],
                                          f"l{l}_prod{j}_{i}"))
            s = staged_tree(pipe, terms, st["out"] - 1, f"l{l}_sum{j}", self.tree_extra_last)
            self.sums.append(Staged(overflow(m, s.value, f.acc), s.stage))
            z = self.rq(m, self.sums[-1].value, f.acc.frac_bits, self.out_fmt)
            if not self.last:  # ReLU on hidden layers; fast tests the sign bit (the same values: z = 0 gives 0
                # either way) instead of a comparator after the saturation (measured: mlp-readout's path)
                z = Mux(z[-1], 0, z) if self.spec.stage_timing == "fast" else Mux(z > 0, z, 0)
            outs.append(pipe.reg(z, s.stage, f"l{l}_out{j}_s{st['out']}"))
        return outs

    def backward(self, m: Module, pipe: Pipe, err: list[Staged]) -> list[Staged] | None:
        f, l, st = self.f, self.index, self.st
        e = err[0].stage
        if e != st["error"]:
            raise AssertionError(f"layer {l}: error at stage {e}, the stage plan says {st['error']}")
        self.update_stage = st["update"]
        ins = [pipe.at(self.u[i], e) for i in range(self.n_in)]
        f_w, f_b = update_fracs(self.spec, l)
        dw = [self.delta(m, pipe, err[j].value, ins[i], e, f_w, f"l{l}_dw{j}_{i}")
              for j in range(self.n_out) for i in range(self.n_in)]
        db = [self.delta(m, pipe, err[j].value, None, e, f_b, f"l{l}_db{j}") for j in range(self.n_out)]
        self.update_fields = dw + db
        if self.channel is not None:  # the channel first: the commit reads its row one cycle ahead
            self.lookahead = [self.channel]
            self.update_fields = [pipe.at(self.channel, self.update_stage)] + self.update_fields
        if l == 0:
            return None
        f_back = f.coef.frac_bits + f.grad.frac_bits
        prev = []
        for i in range(self.n_in):
            terms = []
            for j in range(self.n_out):
                w = self.w[j][i] if self.w_read is None else pipe.at(self.w_read[j][i], e)
                terms.append(self.product(m, pipe, w, err[j].value, e, f_back, f.acc, st["bterms"],
                                          f"l{l}_bprod{i}_{j}"))
            s = staged_tree(pipe, terms, st["prev"] - 1, f"l{l}_bsum{i}", self.tree_extra_last)
            val = self.rq(m, overflow(m, s.value, f.acc), f.acc.frac_bits, f.grad)
            val = Mux(pipe.at(self.u[i], s.stage) <= 0, 0, val)
            prev.append(pipe.reg(val, s.stage, f"l{l - 1}_err{i}_s{st['prev']}"))
        return prev

    def _param(self, init: int, name: str) -> Signal:
        sig = Signal(fmt_shape(self.f.coef), init=int(init), name=name)
        self.params.append(sig)
        return sig

    def apply(self, m: Module, commit: Value, fields: list[Value], ahead: list[Value]) -> None:
        """Commit an update vector when ``commit``: every weight and bias, theta = overflow(theta - delta)
        (N > 1 channels: in the row of the update's channel, read one cycle ahead; port writes
        share the write port, one granule)."""
        f_w, f_b = update_fracs(self.spec, self.index)
        fracs = [f_w] * (self.size - self.n_out) + [f_b] * self.n_out

        def subtract(theta: Value, delta: Value, frac: int) -> Value:
            if self.st.get("rounds_in_commit"):  # delta: the raw term (see delta)
                return subtract_requant(m, theta, delta, frac, self.f.coef)
            return overflow(m, theta - delta, self.f.coef, by_bits=self.spec.stage_timing == "fast")

        if self.channel is not None:
            ch_now, ch_next, deltas = fields[0], ahead[0], fields[1:]
            old = self.fields_of(self.rmw.data)
            new = [subtract(t, d, frac) for t, d, frac in zip(old, deltas, fracs)]
            onehot = Signal(self.size, name=f"l{self.index}_port_granule")
            m.d.comb += [
                onehot.eq(Mux(self.port_wr, 1 << self.port_local, 0)),
                self.rmw.addr.eq(ch_next),
                self.rmw.en.eq(1),
                self.wport.addr.eq(Mux(self.port_wr, self.port_chan, ch_now)),
                self.wport.data.eq(Mux(self.port_wr, Cat(*([self.port_data] * self.size)), Cat(*new))),
                self.wport.en.eq(Mux(self.port_wr, onehot, Mux(commit, (1 << self.size) - 1, 0))),
            ]
            return
        thetas = [w for row in self.w for w in row] + self.b
        with m.If(commit):
            for theta, delta, frac in zip(thetas, fields, fracs):
                m.d.sync += theta.eq(subtract(theta, delta, frac))

    def port(self, m: Module) -> None:
        """Parameter port: theta[offset + n] is register n (weights row by row, then biases)."""
        if self.st["port"]:
            raise AssertionError(f"layer {self.index}: the MLP port has no register stage, the plan says "
                                 f"{self.st['port']}")
        sel = Signal.like(self.port_local, name=f"l{self.index}_rd_sel")
        with m.If(self.port_rd):
            m.d.sync += sel.eq(self.port_local)
        self.readback = Array(self.params)[sel]
        if self.channel is not None:  # read through the read port; writes in apply
            return
        with m.If(self.port_wr):
            with m.Switch(self.port_local):
                for n, sig in enumerate(self.params):
                    with m.Case(n):
                        m.d.sync += sig.eq(self.port_data)
