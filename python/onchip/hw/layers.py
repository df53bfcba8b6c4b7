"""KAN and MLP layer datapaths: forward pass, backward pass and the parameter update.

A layer builds its logic into the learner's module on a shared :class:`Pipe`
(one in-order pipeline). Parameters are registers with the initial
parameters as reset values, so a reset restores them in one cycle and the
k+1 active KAN coefficients are read in parallel (one multiplexer per active
coefficient). The arithmetic and every rounding point are those of
:func:`onchip.model.kernels.kan_step` / :func:`~onchip.model.kernels.mlp_step`.

After :meth:`forward` and :meth:`backward` a layer knows

* ``read_stage`` R: the stage whose cycle reads its parameters;
* ``update_stage`` U: the stage at which its update (``update_fields``) is ready;
* :meth:`apply`: the statements that commit an update vector.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal, Value

from ..spec import LearnerSpec
from .bspline import BSplineUnit
from .fixedpoint import fmt_shape, node, overflow, requant
from .pipeline import Pipe, Staged


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
    def __init__(self, spec: LearnerSpec, index: int, offset: int, n_in: int, n_out: int,
                 in_frac: int, live_backprop: bool):
        self.spec, self.index, self.offset = spec, index, offset
        self.n_in, self.n_out, self.in_frac = n_in, n_out, in_frac
        self.live_backprop = live_backprop
        self.f = spec.formats
        self.read_stage = self.update_stage = None
        self.update_fields: list[Value] = []
        self.params: list[Signal] = []

    def _param(self, init: int, name: str) -> Signal:
        sig = Signal(fmt_shape(self.f.coef), init=int(init), name=name)
        self.params.append(sig)
        return sig

    def _commit(self, m: Module, theta: Signal, delta: Value) -> None:
        m.d.sync += theta.eq(overflow(m, theta - delta, self.f.coef))


class KanLayer(_Layer):
    """One KAN layer: n_out x n_in B-spline edges of G + k coefficients each.

    Forward (3 stages from its input a): B-spline unit and basis ROM (a);
    read the k+1 active coefficients, products into ``acc`` (a+1); sums,
    outputs into ``act`` and, for hidden layers, dphi into ``grad`` (a+2).
    Backward from the error e at stage E: the sparse update of the k+1 active
    coefficients per edge (ready at E) and, for hidden layers, the error to
    the previous layer (2 stages).

    Args:
        spec: the learner; cfg: its :class:`~onchip.model.kernels.KanConfig`;
        theta0: initial flat parameters; index: layer number.
    """

    def __init__(self, spec, cfg, theta0, index, offset, n_in, n_out, live_backprop):
        super().__init__(spec, index, offset, n_in, n_out, int(cfg.in_frac[index]), live_backprop)
        self.cfg = cfg
        self.g, self.k1 = spec.grid_size, spec.spline_order + 1
        self.coef = [
            [
                [
                    self._param(theta0[offset + (j * n_in + i) * spec.n_coef + q], f"l{index}_coef_{j}_{i}_{q}")
                    for q in range(spec.n_coef)
                ]
                for i in range(n_in)
            ]
            for j in range(n_out)
        ]

    def forward(self, m: Module, pipe: Pipe, u: list[Staged]) -> list[Staged]:
        cfg, f, l = self.cfg, self.f, self.index
        a = u[0].stage
        hidden_in = l > 0
        self.cell, self.bval, self.bder, self.clamped, self.dphi = [], [], [], [], []
        for i in range(self.n_in):
            unit = BSplineUnit(
                f.input if l == 0 else f.act, cfg.lo_raw[l], cfg.pos_bits[l], cfg.grid_size,
                cfg.table_bits, cfg.bval, cfg.bder, f.basis,
            )
            m.submodules[f"l{l}_bspline{i}"] = unit
            m.d.comb += unit.u.eq(pipe.at(u[i], a))
            self.cell.append(pipe.reg(unit.cell, a, f"l{l}_cell{i}_s{a + 1}"))
            self.bval.append([pipe.reg(getattr(unit.bval, f"m{mm}"), a, f"l{l}_bval{i}_{mm}_s{a + 1}")
                              for mm in range(self.k1)])
            if hidden_in:
                self.bder.append([pipe.reg(getattr(unit.bder, f"m{mm}"), a, f"l{l}_bder{i}_{mm}_s{a + 1}")
                                  for mm in range(self.k1)])
                self.clamped.append(pipe.reg(unit.clamped, a, f"l{l}_clamped{i}_s{a + 1}"))
        r = a + 1
        self.read_stage = r
        f_prod = f.coef.frac_bits + f.basis.frac_bits
        outs = []
        for j in range(self.n_out):
            terms, self_dphi = [], []
            for i in range(self.n_in):
                cell = self.cell[i].value
                dterms = []
                for mm in range(self.k1):
                    coef = node(m, Array(self.coef[j][i][mm : mm + self.g])[cell], f"l{l}_read{j}_{i}_{mm}")
                    p = requant(m, coef * self.bval[i][mm].value, f_prod, f.acc)
                    terms.append(pipe.reg(p, r, f"l{l}_prod{j}_{i}_{mm}_s{r + 1}").value)
                    if hidden_in:
                        dp = requant(m, coef * self.bder[i][mm].value, f_prod, f.acc)
                        dterms.append(pipe.reg(dp, r, f"l{l}_dprod{j}_{i}_{mm}_s{r + 1}").value)
                if hidden_in:
                    sd = overflow(m, tree_sum(dterms), f.acc)
                    dphi = requant(m, sd, f.acc.frac_bits + self.spec.cell_exp, f.grad)
                    self_dphi.append(pipe.reg(dphi, r + 1, f"l{l}_dphi{j}_{i}_s{r + 2}"))
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

    def apply(self, m: Module, fields: list[Value]) -> None:
        """Commit an update vector: theta[c+m] = overflow(theta[c+m] - delta[m]) on every edge."""
        cells, deltas = fields[: self.n_in], fields[self.n_in :]
        n = 0
        for j in range(self.n_out):
            for i in range(self.n_in):
                d = deltas[n : n + self.k1]
                n += self.k1
                for q, theta in enumerate(self.coef[j][i]):
                    hit, delta = None, None
                    for mm in range(self.k1):
                        c = q - mm
                        if 0 <= c < self.g:
                            cond = cells[i] == c
                            hit = cond if hit is None else (hit | cond)
                            delta = d[mm] if delta is None else Mux(cond, d[mm], delta)
                    with m.If(hit):
                        self._commit(m, theta, delta)


class MlpLayer(_Layer):
    """One fully connected layer, ReLU on hidden layers, linear output.

    Forward (2 stages from its input a): products and bias into ``acc``
    (reads W and b at a); sum, output into ``act``, ReLU (a+1). Backward from
    the error e at stage E: the dense update of W and b (ready at E) and, for
    hidden inputs, the error to the previous layer W^T e masked by the ReLU
    (2 stages) with the weights the forward pass read.
    """

    def __init__(self, spec, cfg, theta0, index, offset, n_in, n_out, live_backprop):
        super().__init__(spec, index, offset, n_in, n_out, int(cfg.in_frac[index]), live_backprop)
        self.w = [[self._param(theta0[offset + j * n_in + i], f"l{index}_w_{j}_{i}") for i in range(n_in)]
                  for j in range(n_out)]
        b0 = offset + n_in * n_out
        self.b = [self._param(theta0[b0 + j], f"l{index}_b_{j}") for j in range(n_out)]

    def forward(self, m: Module, pipe: Pipe, u: list[Staged], last: bool) -> list[Staged]:
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
            if not last:
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

    def apply(self, m: Module, fields: list[Value]) -> None:
        """Commit an update vector: every weight and bias, theta = overflow(theta - delta)."""
        thetas = [w for row in self.w for w in row] + self.b
        for theta, delta in zip(thetas, fields):
            self._commit(m, theta, delta)
