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

from amaranth.hdl import Array, Module, Mux, Signal, Value

from ..model.golden import layout
from ..spec import LearnerSpec
from .bspline import BSplineUnit
from .coefmem import EdgeBanks, bank_address, by_bank, by_basis, split_cell
from .fixedpoint import fmt_shape, node, overflow, requant
from .pipeline import Pipe, Staged
from .ram import div_const


def layer_class(kind: str) -> type:
    """The layer datapath of a learner ``kind``: :class:`KanLayer` (``"kan"``) or :class:`MlpLayer` (``"mlp"``).

    Raises:
        ValueError: another kind.
    """
    classes = {"kan": KanLayer, "mlp": MlpLayer}
    if kind not in classes:
        raise ValueError(f"kind must be one of {', '.join(classes)}, got {kind!r}")
    return classes[kind]


def tree_sum(values: list[Value]) -> Value:
    """Exact sum of ``values`` as a balanced adder tree."""
    values = list(values)
    if not values:
        raise ValueError("tree_sum needs at least one value")
    while len(values) > 1:
        nxt = [values[n] + values[n + 1] for n in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


class _Layer:
    """What a KAN and an MLP layer share: the constructor, the parameter-port signals and one
    signature per role (:meth:`forward`, :meth:`backward`, :meth:`apply`, :meth:`port`), so the
    learner builds and calls every layer the same way.

    Args (keyword-only):
        spec: the learner (its ``kind`` must be the layer's).
        config: its kernel configuration (:func:`onchip.model.golden.kernel_config`).
        theta0: raw initial parameters of the whole learner, flat (P,); the layer takes its
            slice ``layout(spec)[index]`` (:func:`onchip.model.golden.layout`).
        index: layer number l, 0 .. L-1 (the last layer is the output layer).
        live_backprop: the backward pass may use the parameters as they are when it runs (the
            sequential schedule, where no update lands in between) instead of the values the
            forward pass read.

    Raises:
        ValueError: a spec of another kind, an index outside 0 .. L-1, or theta0 not of length P.
    """

    kind = ""
    n_lookahead = 0
    #: where the parameters are kept: "registers" or "memory"
    storage = "registers"

    def __init__(self, *, spec: LearnerSpec, config, theta0, index: int, live_backprop: bool):
        slices = layout(spec)
        if spec.kind != self.kind:
            raise ValueError(f"{type(self).__name__} builds a {self.kind} layer, the spec is a {spec.kind}")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(slices):
            raise ValueError(f"index must be a layer number 0 .. {len(slices) - 1}, got {index!r}")
        if len(theta0) != spec.parameter_count():
            raise ValueError(f"theta0 must hold the {spec.parameter_count()} parameters of the learner, "
                             f"got {len(theta0)}")
        lay = slices[index]
        self.spec, self.index, self.offset = spec, index, lay.offset
        self.n_in, self.n_out, self.size = lay.n_in, lay.n_out, lay.size
        self.in_frac = int(config.in_frac[index])
        self.last = index == len(slices) - 1
        self.live_backprop = live_backprop
        self.f = spec.formats
        self.read_stage = self.update_stage = None
        self.update_fields: list[Value] = []
        self.lookahead: list[Staged] = []
        # parameter port, driven by the learner: write or read theta[offset + port_local]
        self.port_wr = Signal(name=f"l{index}_port_wr")
        self.port_rd = Signal(name=f"l{index}_port_rd")
        self.port_local = Signal(range(max(2, self.size)), name=f"l{index}_port_local")
        self.port_data = Signal(fmt_shape(self.f.coef), name=f"l{index}_port_data")
        self.readback: Value | None = None

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
        """Build the parameter port: ``port_*`` signals in, :attr:`readback` one cycle after a read."""
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

    Args, Raises: those of the layers' common constructor (keyword-only ``spec``, ``config``
    (a :class:`~onchip.model.kernels.KanConfig`), ``theta0``, ``index``, ``live_backprop``).
    """

    kind = "kan"
    storage = "memory"

    def __init__(self, *, spec: LearnerSpec, config, theta0, index: int, live_backprop: bool):
        super().__init__(spec=spec, config=config, theta0=theta0, index=index, live_backprop=live_backprop)
        self.cfg = config
        offset, n_in, n_out = self.offset, self.n_in, self.n_out
        self.g, self.k1 = spec.grid_size, spec.spline_order + 1
        self.n_lookahead = n_in
        nc = spec.n_coef
        self.theta0 = [[[int(theta0[offset + (j * n_in + i) * nc + q]) for q in range(nc)] for i in range(n_in)]
                       for j in range(n_out)]
        self.depth = -(-nc // self.k1)
        self.port_edge = Signal(range(max(2, n_in * n_out)), name=f"l{index}_port_edge")
        self.port_bank = Signal(range(max(2, self.k1)), name=f"l{index}_port_bank")
        self.port_baddr = Signal(range(max(2, self.depth)), name=f"l{index}_port_baddr")

    def _split(self, m: Module, cell: Value, name: str):
        return split_cell(m, cell, self.k1, self.g, f"l{self.index}_{name}")

    def forward(self, m: Module, pipe: Pipe, u: list[Staged]) -> list[Staged]:
        cfg, f, l = self.cfg, self.f, self.index
        a = u[0].stage
        hidden_in = l > 0
        self.cell, self.bval, self.bder, self.clamped, self.dphi = [], [], [], [], []
        lo_r, addr = [], []
        for i in range(self.n_in):
            unit = BSplineUnit(
                f.input if l == 0 else f.act, cfg.lo_raw[l], cfg.pos_bits[l], cfg.grid_size,
                cfg.table_bits, cfg.bval, cfg.bder, f.basis,
            )
            m.submodules[f"l{l}_bspline{i}"] = unit
            m.d.comb += unit.u.eq(pipe.at(u[i], a))
            hi, lo = self._split(m, unit.cell, f"cell{i}")
            addr.append([bank_address(hi, lo, b) for b in range(self.k1)])
            lo_r.append(pipe.reg(lo, a, f"l{l}_lo{i}_s{a + 1}").value)
            self.cell.append(pipe.reg(unit.cell, a, f"l{l}_cell{i}_s{a + 1}"))
            self.bval.append([pipe.reg(unit.bval[mm], a, f"l{l}_bval{i}_{mm}_s{a + 1}") for mm in range(self.k1)])
            if hidden_in:
                self.bder.append([pipe.reg(unit.bder[mm], a, f"l{l}_bder{i}_{mm}_s{a + 1}")
                                  for mm in range(self.k1)])
                self.clamped.append(pipe.reg(unit.clamped, a, f"l{l}_clamped{i}_s{a + 1}"))
        self.lookahead = self.cell
        r = a + 1
        self.read_stage = r
        f_prod = f.coef.frac_bits + f.basis.frac_bits
        self.banks = []
        outs = []
        for j in range(self.n_out):
            terms, self_dphi, row = [], [], []
            for i in range(self.n_in):
                banks = EdgeBanks(m, self.theta0[j][i], self.k1, f.coef, f"l{l}_coef_{j}_{i}")
                row.append(banks)
                for b, rp in enumerate(banks.read):
                    m.d.comb += [
                        rp.addr.eq(Mux(self.port_rd, self.port_baddr, addr[i][b])),
                        rp.en.eq(pipe.en | self.port_rd),
                    ]
                coefs = by_basis([rp.data for rp in banks.read], lo_r[i])
                dterms = []
                for mm in range(self.k1):
                    coef = node(m, coefs[mm], f"l{l}_read{j}_{i}_{mm}")
                    p = requant(m, coef * self.bval[i][mm].value, f_prod, f.acc)
                    terms.append(pipe.reg(p, r, f"l{l}_prod{j}_{i}_{mm}_s{r + 1}").value)
                    if hidden_in:
                        dp = requant(m, coef * self.bder[i][mm].value, f_prod, f.acc)
                        dterms.append(pipe.reg(dp, r, f"l{l}_dprod{j}_{i}_{mm}_s{r + 1}").value)
                if hidden_in:
                    sd = overflow(m, tree_sum(dterms), f.acc)
                    dphi = requant(m, sd, f.acc.frac_bits + self.spec.cell_exp, f.grad)
                    self_dphi.append(pipe.reg(dphi, r + 1, f"l{l}_dphi{j}_{i}_s{r + 2}"))
            self.banks.append(row)
            self.dphi.append(self_dphi)
            s = overflow(m, tree_sum(terms), f.acc)
            out = requant(m, s, f.acc.frac_bits, f.act)
            outs.append(pipe.reg(out, r + 1, f"l{l}_out{j}_s{r + 2}"))
        return outs

    def backward(self, m: Module, pipe: Pipe, err: list[Staged]) -> list[Staged] | None:
        f, l = self.f, self.index
        e = err[0].stage
        self.update_stage = e
        f_update = f.grad.frac_bits + f.basis.frac_bits + self.spec.lr_shift
        cells = [pipe.at(self.cell[i], e) for i in range(self.n_in)]
        deltas = []
        for j in range(self.n_out):
            for i in range(self.n_in):
                for mm in range(self.k1):
                    b = pipe.at(self.bval[i][mm], e)
                    deltas.append(requant(m, err[j].value * b, f_update, f.coef))
        self.update_fields = cells + deltas
        if l == 0:
            return None
        prev = []
        for i in range(self.n_in):
            terms = []
            for j in range(self.n_out):
                p = requant(m, err[j].value * pipe.at(self.dphi[j][i], e), 2 * f.grad.frac_bits, f.acc)
                terms.append(pipe.reg(p, e, f"l{l}_bprod{i}_{j}_s{e + 1}").value)
            s = overflow(m, tree_sum(terms), f.acc)
            val = requant(m, s, f.acc.frac_bits, f.grad)
            val = Mux(pipe.at(self.clamped[i], e + 1), 0, val)
            prev.append(pipe.reg(val, e + 1, f"l{l - 1}_err{i}_s{e + 2}"))
        return prev

    def apply(self, m: Module, commit: Value, fields: list[Value], ahead: list[Value]) -> None:
        """Commit an update vector when ``commit``: theta[c+m] = overflow(theta[c+m] - delta[m]) on
        every edge, read (through the ``rmw`` ports, addressed by ``ahead``: the cells of the update
        that can commit in the next cycle) and written in the same cycle; parameter-port writes share
        the write ports."""
        n_in, k1 = self.n_in, self.k1
        cells, deltas = fields[:n_in], fields[n_in:]
        now = [self._split(m, cells[i], f"commit{i}") for i in range(n_in)]
        nxt = [self._split(m, ahead[i], f"ahead{i}") for i in range(n_in)]
        n = 0
        for j in range(self.n_out):
            for i in range(n_in):
                banks = self.banks[j][i]
                d = by_bank(deltas[n : n + k1], now[i][1])
                n += k1
                for b in range(k1):
                    rmw, wp = banks.rmw[b], banks.write[b]
                    new = overflow(m, rmw.data - d[b], self.f.coef)
                    hit = node(m, self.port_wr & (self.port_edge == j * n_in + i) & (self.port_bank == b),
                               f"l{self.index}_port_hit{j}_{i}_{b}")
                    m.d.comb += [
                        rmw.addr.eq(bank_address(*nxt[i], b)),
                        rmw.en.eq(1),
                        wp.addr.eq(Mux(hit, self.port_baddr, bank_address(*now[i], b))),
                        wp.data.eq(Mux(hit, self.port_data, new)),
                        wp.en.eq(commit | hit),
                    ]

    def port(self, m: Module) -> None:
        """Parameter port: theta[offset + e*(G+k) + q] is word q div (k+1) of bank q mod (k+1) of edge e."""
        nc, k1, l = self.spec.n_coef, self.k1, self.index
        edge = node(m, div_const(self.port_local, nc, self.size - 1), f"l{l}_port_edge_q")
        q = Signal(range(max(2, nc)), name=f"l{l}_port_q")
        m.d.comb += q.eq(self.port_local - edge * nc)
        baddr = node(m, div_const(q, k1, nc - 1), f"l{l}_port_baddr_q")
        m.d.comb += [self.port_edge.eq(edge), self.port_baddr.eq(baddr), self.port_bank.eq(q - baddr * k1)]
        sel_edge = Signal.like(self.port_edge, name=f"l{l}_rd_edge")
        sel_bank = Signal.like(self.port_bank, name=f"l{l}_rd_bank")
        with m.If(self.port_rd):
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

    Args, Raises: those of the layers' common constructor (keyword-only ``spec``, ``config``
    (a :class:`~onchip.model.kernels.MlpConfig`), ``theta0``, ``index``, ``live_backprop``).
    """

    kind = "mlp"

    def __init__(self, *, spec: LearnerSpec, config, theta0, index: int, live_backprop: bool):
        super().__init__(spec=spec, config=config, theta0=theta0, index=index, live_backprop=live_backprop)
        offset, n_in, n_out = self.offset, self.n_in, self.n_out
        self.params: list[Signal] = []
        self.w = [[self._param(theta0[offset + j * n_in + i], f"l{index}_w_{j}_{i}") for i in range(n_in)]
                  for j in range(n_out)]
        b0 = offset + n_in * n_out
        self.b = [self._param(theta0[b0 + j], f"l{index}_b_{j}") for j in range(n_out)]

    def forward(self, m: Module, pipe: Pipe, u: list[Staged]) -> list[Staged]:
        f, l = self.f, self.index
        a = u[0].stage
        self.read_stage = a
        self.u = u
        f_prod = f.coef.frac_bits + self.in_frac
        self.w_read = None
        if l > 0 and not self.live_backprop:
            self.w_read = [[pipe.reg(self.w[j][i], a, f"l{l}_wread_{j}_{i}_s{a + 1}") for i in range(self.n_in)]
                           for j in range(self.n_out)]
        outs = []
        for j in range(self.n_out):
            terms = [pipe.reg(requant(m, self.b[j], f.coef.frac_bits, f.acc), a, f"l{l}_bias{j}_s{a + 1}").value]
            for i in range(self.n_in):
                p = requant(m, self.w[j][i] * u[i].value, f_prod, f.acc)
                terms.append(pipe.reg(p, a, f"l{l}_prod{j}_{i}_s{a + 1}").value)
            s = overflow(m, tree_sum(terms), f.acc)
            z = requant(m, s, f.acc.frac_bits, f.act)
            if not self.last:  # ReLU on hidden layers
                z = Mux(z > 0, z, 0)
            outs.append(pipe.reg(z, a + 1, f"l{l}_out{j}_s{a + 2}"))
        return outs

    def backward(self, m: Module, pipe: Pipe, err: list[Staged]) -> list[Staged] | None:
        f, l = self.f, self.index
        e = err[0].stage
        self.update_stage = e
        ins = [pipe.at(self.u[i], e) for i in range(self.n_in)]
        f_w = f.grad.frac_bits + self.in_frac + self.spec.lr_shift
        f_b = f.grad.frac_bits + self.spec.lr_shift
        dw = [requant(m, err[j].value * ins[i], f_w, f.coef) for j in range(self.n_out) for i in range(self.n_in)]
        db = [requant(m, err[j].value, f_b, f.coef) for j in range(self.n_out)]
        self.update_fields = dw + db
        if l == 0:
            return None
        f_back = f.coef.frac_bits + f.grad.frac_bits
        prev = []
        for i in range(self.n_in):
            terms = []
            for j in range(self.n_out):
                w = self.w[j][i] if self.w_read is None else pipe.at(self.w_read[j][i], e)
                p = requant(m, w * err[j].value, f_back, f.acc)
                terms.append(pipe.reg(p, e, f"l{l}_bprod{i}_{j}_s{e + 1}").value)
            s = overflow(m, tree_sum(terms), f.acc)
            val = requant(m, s, f.acc.frac_bits, f.grad)
            val = Mux(pipe.at(self.u[i], e + 1) <= 0, 0, val)
            prev.append(pipe.reg(val, e + 1, f"l{l - 1}_err{i}_s{e + 2}"))
        return prev

    def _param(self, init: int, name: str) -> Signal:
        sig = Signal(fmt_shape(self.f.coef), init=int(init), name=name)
        self.params.append(sig)
        return sig

    def apply(self, m: Module, commit: Value, fields: list[Value], ahead: list[Value]) -> None:
        """Commit an update vector when ``commit``: every weight and bias, theta = overflow(theta - delta)."""
        thetas = [w for row in self.w for w in row] + self.b
        with m.If(commit):
            for theta, delta in zip(thetas, fields):
                m.d.sync += theta.eq(overflow(m, theta - delta, self.f.coef))

    def port(self, m: Module) -> None:
        """Parameter port: theta[offset + n] is register n (weights row by row, then biases)."""
        sel = Signal.like(self.port_local, name=f"l{self.index}_rd_sel")
        with m.If(self.port_rd):
            m.d.sync += sel.eq(self.port_local)
        self.readback = Array(self.params)[sel]
        with m.If(self.port_wr):
            with m.Switch(self.port_local):
                for n, sig in enumerate(self.params):
                    with m.Case(n):
                        m.d.sync += sig.eq(self.port_data)
