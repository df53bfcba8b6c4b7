"""Symbolic simulation of a Yosys netlist: a design's cycles as Z3 terms.

Yosys writes the design as a BTOR2 word-level transition system (``write_btor``; Niemetz,
Preiner, Wolf, Biere, "BTOR2, BtorMC and Boolector 3.0", CAV 2018): bit-vector and array
(memory) states, their initial values and next-state functions, inputs and outputs.
:class:`Netlist` reads it; :meth:`Netlist.step` advances one clock cycle by substitution: given
the state as terms and the inputs as terms it returns the next state and the outputs as terms
over the same symbols. With concrete control inputs the control logic folds to constants and
the datapath stays a term of the free values (samples, parameters), so two designs that
compute the same function from the same values give terms a solver compares directly, without
unrolling a transition relation.

Products of two non-constant operands can be abstracted (``products="uninterpreted"``): the
product of ``a`` and ``b`` (each extended to 64 bits as the netlist extends it) becomes
``0`` when either is ``0``, else ``mul(a, b)`` for one uninterpreted function ``mul``, truncated
to the product's width. A property proved for every ``mul`` holds for the multiplication, since
the multiplication is one such function (sound, not complete: a counterexample under the
abstraction must be checked with the real products, :meth:`Netlist.step` with
``products="exact"``). Two plans that multiply the same operands, in whatever cycle and
however registered, then give the solver no multiplier to bit-blast. A multiplexed operand is
split into one product per branch, each taking its operands in one order (the multiplication
commutes): plans that pair the same values through different multiplexers give the same products
under each selection (:func:`_abstract_product`).

Sums are written in one form whatever their adder tree (:class:`_Sum`): a node whose value is
an exact sum of terms (each extended, shifted left, negated), no addition along the way
wrapping around, becomes the sum of those terms in a fixed order at a width fixed by the terms
alone, sign-extended to the node's width. A product enters a sum at the width its operands'
ranges need, and a sign extension is recognised whatever node the sign bit is taken from, so
that a plan's wider product or partial-sum register gives the same term. A registered adder tree and
a combinational one over the same products (the ``fast`` and ``compact`` plans) then give the
same term, shared by the solver, instead of two trees it would have to prove equal bit by bit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import z3

#: the bit width the abstracted products' operands are extended to
PRODUCT_BITS = 64
#: Yosys passes from a core's Verilog to its BTOR2: memories kept as arrays (their synchronous
#: read ports turned into registers after an asynchronous read), flip-flops of every kind
#: unmapped into plain ones with their enables and resets as logic. A multiplexer's undefined
#: default (a case statement over cases that cover every value) is dropped, not made a free value
#: of each core that the solver would have to prove unreachable: Amaranth's semantics has no
#: undefined value, so such a default is never selected
BTOR_SCRIPT = ("read_verilog {verilog}; prep -top {top}; flatten; memory -nomap -nordff; memory_nordff; opt -fast; "
               "opt_expr -mux_undef; opt_clean; dffunmap; setundef -undriven -anyseq; write_btor -s {btor}")

_BINARY = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
           "nand": lambda x, y: ~(x & y), "nor": lambda x, y: ~(x | y), "xnor": lambda x, y: ~(x ^ y),
           "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "udiv": z3.UDiv, "urem": z3.URem, "sdiv": lambda x, y: x / y, "srem": z3.SRem,
           "smod": lambda x, y: x % y, "sll": lambda x, y: x << y, "srl": z3.LShR, "sra": lambda x, y: x >> y,
           "concat": z3.Concat}
_COMPARE = {"eq": lambda x, y: x == y, "neq": lambda x, y: x != y, "ult": z3.ULT, "ulte": z3.ULE, "ugt": z3.UGT,
            "ugte": z3.UGE, "slt": lambda x, y: x < y, "slte": lambda x, y: x <= y, "sgt": lambda x, y: x > y,
            "sgte": lambda x, y: x >= y, "iff": lambda x, y: x == y,
            "implies": lambda x, y: z3.Or(x == 0, y == 1)}
_IGNORED = {"init", "next", "output", "bad", "constraint", "fair", "justice"}

#: most multiplexer leaves an abstracted product is split into (:func:`_abstract_product`)
PRODUCT_LEAVES = 64
_EXTENSIONS = {z3.Z3_OP_SIGN_EXT: z3.SignExt, z3.Z3_OP_ZERO_EXT: z3.ZeroExt}


class _TooManyLeaves(Exception):
    pass


def _spend(budget: list) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooManyLeaves


def _lift_ite(t, budget: list):
    """``t`` with its multiplexers lifted above the extensions, slices and concatenations around them:
    ``sext(ite(c, x, y))`` becomes ``ite(c, sext(x), sext(y))``, ``concat(ite(c, x1, y1), ite(c, x2, y2))``
    becomes ``ite(c, concat(x1, x2), concat(y1, y2))``. ``budget``: a one-item list of the branches
    still allowed (raises :class:`_TooManyLeaves` past it)."""
    if not z3.is_app(t):
        return t
    kind = t.decl().kind()
    if kind == z3.Z3_OP_ITE:
        _spend(budget)
        c, x, y = t.children()
        return z3.If(c, _lift_ite(x, budget), _lift_ite(y, budget))
    if kind in _EXTENSIONS or kind == z3.Z3_OP_EXTRACT:
        params = t.params()
        wrap = ((lambda u: _EXTENSIONS[kind](params[0], u)) if kind in _EXTENSIONS
                else (lambda u: z3.Extract(params[0], params[1], u)))
        args = [_lift_ite(t.arg(0), budget)]
    elif kind == z3.Z3_OP_CONCAT:
        wrap = z3.Concat
        args = [_lift_ite(a, budget) for a in t.children()]
    else:
        return t
    ite = next((a for a in args if z3.is_app_of(a, z3.Z3_OP_ITE)), None)
    if ite is None:
        return t
    _spend(budget)
    c = ite.arg(0)
    pick = [[a.arg(n) if z3.is_app_of(a, z3.Z3_OP_ITE) and a.arg(0).eq(c) else a for a in args] for n in (1, 2)]
    return z3.If(c, *(_lift_ite(z3.simplify(wrap(*branch)), budget) for branch in pick))


def _leaf_terms(t) -> list:
    """The multiplexer leaves of ``t`` (a tree of at most :data:`PRODUCT_LEAVES` multiplexers once lifted)."""
    if not z3.is_app_of(t, z3.Z3_OP_ITE):
        return [t]
    return _leaf_terms(t.arg(1)) + _leaf_terms(t.arg(2))


def free_symbols(term, cache: dict, visit=None) -> frozenset:
    """The names of the free symbols (inputs, states, memories) ``term`` depends on.

    ``cache``: term id -> (the term, its names), filled for every subterm (the term is kept so that
    its id is not reused while the cache lives); ``visit``: called once with each subterm the cache
    did not hold. Iterative: a netlist's terms nest deeper than Python's recursion limit."""
    stack = [(term, False)]
    while stack:
        t, done = stack.pop()
        key = t.get_id()
        if key in cache:
            continue
        if not done:
            stack.append((t, True))
            stack += [(ch, False) for ch in t.children() if ch.get_id() not in cache]
            continue
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            names = frozenset([t.decl().name()])
        else:
            names = frozenset().union(*(cache[ch.get_id()][1] for ch in t.children()))
        cache[key] = (t, names)
        if visit is not None:
            visit(t)
    return cache[term.get_id()][1]


def _abstract_product(a, b, cache: dict):
    """The abstracted product (module docstring) of ``a`` and ``b`` (:data:`PRODUCT_BITS` wide).

    A multiplexed operand is split into its branches, ``mul(ite(c, x, y), b) = ite(c, mul(x, b), mul(y, b))``
    (while the leaves stay within :data:`PRODUCT_LEAVES`), and each leaf takes its operands in one order,
    by the free symbols they depend on (the multiplication commutes): two plans that pair the same
    values through different multiplexers (one selects the coefficient word for each basis value,
    the other the basis value for each bank's word: the sequential ``fast`` KAN) give the solver the
    same leaves under each selection. An operand with a constant branch (a ReLU's zero) is not split,
    so that the sums the product enters keep their canonical form (module docstring). ``cache``:
    :func:`free_symbols`'s, kept by the caller."""
    mul = z3.Function("mul", *(z3.BitVecSort(PRODUCT_BITS),) * 3)
    zero = z3.BitVecVal(0, PRODUCT_BITS)

    def leaf(x, y):
        x, y = sorted((x, y), key=lambda u: (sorted(free_symbols(u, cache)), u.get_id()))
        return z3.If(z3.Or(x == 0, y == 0), zero, mul(x, y))

    def split(x, y):
        for n, u in enumerate((x, y)):
            if z3.is_app_of(u, z3.Z3_OP_ITE):
                c, p, q = u.children()
                other = y if n == 0 else x
                return z3.If(c, split(p, other), split(q, other))
        return leaf(x, y)

    try:
        budget = [PRODUCT_LEAVES]
        la, lb = _lift_ite(a, budget), _lift_ite(b, budget)
    except _TooManyLeaves:
        return leaf(a, b)
    leaves_a, leaves_b = _leaf_terms(la), _leaf_terms(lb)
    if (len(leaves_a) * len(leaves_b) <= PRODUCT_LEAVES
            and not any(z3.is_bv_value(u) for u in leaves_a + leaves_b)):
        return split(la, lb)
    return leaf(a, b)


_ONE, _ZERO = z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)


def _bit(cond) -> z3.BitVecRef:
    return z3.If(cond, _ONE, _ZERO)


@dataclasses.dataclass(frozen=True)
class _Sum:
    """A node's value as an exact integer sum: ``sum(sign * signed(term) * 2**shift)`` over
    ``terms`` (``(term, shift, sign)``), between ``lo`` and ``hi``."""

    terms: tuple
    lo: int
    hi: int

    @staticmethod
    def leaf(term: z3.BitVecRef) -> "_Sum":
        half = 1 << (term.size() - 1)
        return _Sum(((term, 0, 1),), -half, half - 1)

    def fits(self, width: int) -> bool:
        return -(1 << (width - 1)) <= self.lo and self.hi < (1 << (width - 1))

    def shifted(self, n: int) -> "_Sum":
        return _Sum(tuple((t, s + n, g) for t, s, g in self.terms), self.lo << n, self.hi << n)

    def negated(self) -> "_Sum":
        return _Sum(tuple((t, s, -g) for t, s, g in self.terms), -self.hi, -self.lo)

    def plus(self, other: "_Sum") -> "_Sum":
        """The sum of both, its constants folded into one term (0 dropped)."""
        terms, constant = [], 0
        for t, shift, sign in self.terms + other.terms:
            if z3.is_bv_value(t):
                constant += sign * (t.as_signed_long() << shift)
            else:
                terms.append((t, shift, sign))
        if constant or not terms:
            terms.append((z3.BitVecVal(constant, _signed_bits(constant)), 0, 1))
        return _Sum(tuple(terms), self.lo + other.lo, self.hi + other.hi)

    def key(self) -> tuple:
        """The form as plain values (for comparing two forms)."""
        return tuple((t.get_id(), s, g) for t, s, g in self.terms), self.lo, self.hi

    def trivial(self) -> bool:
        return len(self.terms) == 1 and self.terms[0][1:] == (0, 1)

    def term(self, width: int) -> z3.BitVecRef:
        """The sum at ``width`` bits: its terms in a fixed order (by Z3 term id), added modulo
        2**n, sign-extended or truncated to ``width`` (exact, since the sum lies in [lo, hi],
        which ``width`` holds). n depends on the terms alone (their widths and shifts, a
        constant's value), so that two cores whose ranges for a term differ build one term."""
        def bits(t):
            return _signed_bits(t.as_signed_long()) if z3.is_bv_value(t) else t.size()

        narrow = max(bits(t) + shift for t, shift, _ in self.terms) + len(self.terms).bit_length()
        parts = []
        for t, shift, sign in sorted(self.terms, key=lambda x: (x[0].get_id(), x[1], x[2])):
            part = z3.SignExt(narrow - t.size(), t) if t.size() <= narrow else z3.Extract(narrow - 1, 0, t)
            part = part << shift if shift else part
            parts.append(-part if sign < 0 else part)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return z3.SignExt(width - narrow, total) if width >= narrow else z3.Extract(width - 1, 0, total)


def _signed_bits(value: int) -> int:
    return (value if value >= 0 else ~value).bit_length() + 1


def _covered(memory: z3.ExprRef) -> z3.ExprRef:
    """``memory`` with the array under its chain of stores replaced by one symbol per sort when the
    stores cover every address (a ROM's contents): that array is never read, and two cores holding
    the same table then read it through the same terms, which the solver sees as shared."""
    if not z3.is_array(memory):
        return memory
    stores, base = [], memory
    while z3.is_store(base):
        stores.append(base.children()[1:])
        base = base.children()[0]
    domain = memory.sort().domain()
    if not all(z3.is_bv_value(a) for a, _ in stores) or len({a.as_long() for a, _ in stores}) < 2 ** domain.size():
        return memory
    out = z3.Const(f"never_read_{domain.size()}x{memory.sort().range().size()}", memory.sort())
    for a, d in reversed(stores):
        out = z3.Store(out, a, d)
    return out


def write_btor(verilog: str, top: str, folder) -> str:
    """The BTOR2 text of module ``top`` of ``verilog`` (:data:`BTOR_SCRIPT`), written in ``folder``.

    Raises:
        ToolError: Yosys failed.
    """
    from ..flow.tools import run_tool

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{top}.v").write_text(verilog)
    run_tool("yosys", ["-q", "-p", BTOR_SCRIPT.format(verilog=f"{top}.v", top=top, btor=f"{top}.btor")], folder)
    return (folder / f"{top}.btor").read_text()


class Netlist:
    """A BTOR2 transition system (one implicit clock) whose cycles are computed as Z3 terms.

    Attributes:
        states: node id -> (sort id, name); unnamed states get ``st<id>``.
        inputs: node id -> (sort id, name); outputs: name -> node id.
        merged: Z3 term id -> ``(term, equal term)``: an abstracted product's operand (extended to
            64 bits) that a caller proved equal to another term, used in its place.

    Raises:
        ValueError: a BTOR2 operator this reader does not know (the message names it).
    """

    def __init__(self, text: str):
        self.sorts: dict[int, tuple] = {}
        self.ops: dict[int, tuple[str, list[str]]] = {}  # node id -> (operator, arguments), in file order
        self.states: dict[int, tuple[int, str]] = {}
        self.inputs: dict[int, tuple[int, str]] = {}
        self.init: dict[int, int] = {}
        self.next: dict[int, int] = {}
        self.outputs: dict[str, int] = {}
        for raw in text.splitlines():
            words = raw.split(";")[0].split()
            if not words:
                continue
            nid, op, args = int(words[0]), words[1], words[2:]
            if op == "sort":
                self.sorts[nid] = ("bv", int(args[1])) if args[0] == "bitvec" else ("array", int(args[1]), int(args[2]))
                continue
            self.ops[nid] = (op, args)
            if op in ("input", "state"):
                getattr(self, op + "s")[nid] = (int(args[0]), args[1] if len(args) > 1 else f"{op[:2]}{nid}")
            elif op == "init":
                self.init[int(args[1])] = int(args[2])
            elif op == "next":
                self.next[int(args[1])] = int(args[2])
            elif op == "output":
                self.outputs[args[1] if len(args) > 1 else f"out{nid}"] = int(args[0])
        self.names = {name: nid for nid, (_, name) in self.states.items()}
        self._sums: dict[int, tuple] = {}  # Z3 term id -> (term, its _Sum), for every run of this netlist
        self.merged: dict[int, tuple] = {}
        self._symbols: dict[int, tuple] = {}  # term id -> (term, its free symbols): free_symbols's cache

    def sort(self, sid: int):
        """The Z3 sort of BTOR2 sort ``sid``."""
        s = self.sorts[sid]
        if s[0] == "bv":
            return z3.BitVecSort(s[1])
        return z3.ArraySort(self.sort(s[1]), self.sort(s[2]))

    def input_width(self, name: str) -> int:
        return next(self.sorts[s][1] for s, n in self.inputs.values() if n == name)

    def initial_state(self, prefix: str) -> dict[int, z3.ExprRef]:
        """Every state at its initial value; a state without one (a register Yosys made from a
        memory's read port, a memory without contents) is a fresh symbol ``<prefix><name>``."""
        free = {nid: z3.Const(prefix + name, self.sort(s)) for nid, (s, name) in self.states.items()}
        values = self._evaluate(free, {name: z3.BitVecVal(0, self.sorts[s][1]) for s, name in self.inputs.values()},
                                products="exact")
        state = {}
        for nid, (s, _) in self.states.items():
            if nid not in self.init:
                state[nid] = free[nid]
                continue
            v = values[self.init[nid]]
            state[nid] = _covered(v) if v.sort() == self.sort(s) else z3.K(self.sort(s).domain(), v)
        return state

    def step(self, state: dict, inputs: dict, *, products: str = "exact") -> tuple[dict, dict]:
        """One clock cycle: ``(next state, outputs)`` from ``state`` (node id -> term) and
        ``inputs`` (name -> term; an input left out is 0).

        Args:
            products: ``"exact"`` or ``"uninterpreted"`` (see the module docstring).
        """
        given = {name: inputs.get(name, z3.BitVecVal(0, self.sorts[s][1])) for s, name in self.inputs.values()}
        values = self._evaluate(state, given, products=products)
        nxt = {nid: values[self.next[nid]] if nid in self.next else state[nid] for nid in self.states}
        return nxt, {name: values[nid] for name, nid in self.outputs.items()}

    def _product(self, values, args, width):
        """The abstracted product (module docstring) of nodes ``args``, ``width`` bits."""
        ops = []
        for a in args:
            a, signed = int(a), True
            while a > 0 and self.ops[a][0] in ("sext", "uext"):  # the operand as the netlist extends it
                signed, a = self.ops[a][0] == "sext", int(self.ops[a][1][1])
            t = values[a] if a > 0 else ~values[-a]
            if t.size() > PRODUCT_BITS:
                return None
            ext = PRODUCT_BITS - t.size()
            ops.append(z3.simplify(z3.SignExt(ext, t) if signed else z3.ZeroExt(ext, t)))
        if any(z3.is_bv_value(t) for t in ops) or width > PRODUCT_BITS:
            return None
        ops = [self.merged.get(t.get_id(), (t, t))[1] for t in ops]
        return z3.Extract(width - 1, 0, _abstract_product(*ops, self._symbols))

    def _evaluate(self, state, inputs, *, products):
        v: dict[int, z3.ExprRef] = {}
        sums: dict[int, _Sum] = {}  # node id -> its value as a sum (bit-vector nodes)
        signs: dict[int, int] = {}  # node id of a 1-bit slice -> the node whose sign bit it is

        def arg(x: str):
            x = int(x)
            return ~v[-x] if x < 0 else v[x]

        for nid, (op, args) in self.ops.items():
            if op in _IGNORED:
                continue
            if op in ("input", "state"):
                v[nid] = inputs[self.inputs[nid][1]] if op == "input" else state[nid]
                if z3.is_bv(v[nid]):
                    sums[nid] = self._remember(v[nid], None)
                continue
            sid, r = int(args[0]), args[1:]
            w = self.sorts[sid][1] if self.sorts[sid][0] == "bv" else None
            if op in ("const", "constd", "consth"):
                t = z3.BitVecVal(int(r[0], {"const": 2, "constd": 10, "consth": 16}[op]), w)
            elif op in ("zero", "one", "ones"):
                t = z3.BitVecVal({"zero": 0, "one": 1, "ones": -1}[op], w)
            elif op == "sext":
                t = z3.SignExt(int(r[1]), arg(r[0]))
            elif op == "uext":
                t = z3.ZeroExt(int(r[1]), arg(r[0]))
            elif op == "slice":
                t = z3.Extract(int(r[1]), int(r[2]), arg(r[0]))
                if int(r[0]) > 0 and int(r[1]) == int(r[2]) == v[int(r[0])].size() - 1:
                    signs[nid] = int(r[0])
            elif op in ("not", "neg", "inc", "dec"):
                x = arg(r[0])
                t = {"not": lambda: ~x, "neg": lambda: -x, "inc": lambda: x + 1, "dec": lambda: x - 1}[op]()
            elif op in ("redor", "redand"):
                x = arg(r[0])
                t = _bit(x != 0) if op == "redor" else _bit(x == -1)
            elif op == "redxor":
                x = arg(r[0])
                t = z3.Extract(0, 0, z3.Sum([z3.ZeroExt(x.size() - 1, z3.Extract(i, i, x)) for i in range(x.size())]))
            elif op == "mul" and products == "uninterpreted" and (t := self._product(v, r[:2], w)) is not None:
                pass
            elif op in _BINARY:
                t = _BINARY[op](arg(r[0]), arg(r[1]))
            elif op in _COMPARE:
                t = _bit(_COMPARE[op](arg(r[0]), arg(r[1])))
            elif op == "ite":
                t = z3.If(arg(r[0]) == 1, arg(r[1]), arg(r[2]))
            elif op == "read":
                t = z3.Select(arg(r[0]), arg(r[1]))
            elif op == "write":
                t = z3.Store(arg(r[0]), arg(r[1]), arg(r[2]))
            else:
                raise ValueError(f"BTOR2 operator {op!r} (node {nid}) is not supported")
            form = self._form(op, r, w, sums, v, signs) if w is not None else None
            if form is not None and not form.trivial():
                t = form.term(w)
            v[nid] = z3.simplify(t)
            if form is not None and form.terms[0][0] is None:  # a product: the node's term at the width its
                # range needs (exact; a plan's wider product register then gives the same leaf), its range
                n = max(_signed_bits(form.lo), _signed_bits(form.hi))
                form = _Sum(((v[nid] if n >= w else z3.simplify(z3.Extract(n - 1, 0, v[nid])), 0, 1),),
                            form.lo, form.hi)
            if w is not None:
                sums[nid] = self._remember(v[nid], form)
        return v

    def _remember(self, term, form: "_Sum | None") -> _Sum:
        """``form`` recorded for ``term`` (so a register holding a partial sum keeps it into the
        next cycle); without one, the form recorded for the term before, else the term alone."""
        if z3.is_bv_value(term):  # a constant is its own sum (one term, however it was computed)
            value = term.as_signed_long()
            return _Sum(((term, 0, 1),), value, value)
        if form is None:
            known = self._sums.get(term.get_id())
            return known[1] if known is not None else _Sum.leaf(term)
        self._sums[term.get_id()] = (term, form)  # the term is kept: its id stays its own
        return form

    @staticmethod
    def _form(op: str, r: list[str], width: int, sums: dict, v: dict, signs: dict) -> "_Sum | None":
        """The node's value as an exact sum of its operands' sums (:class:`_Sum`), or None; ``signs``:
        the 1-bit slices that are another node's sign bit."""
        x = int(r[0])
        if x < 0 or op not in ("sext", "uext", "concat", "slice", "add", "sub", "neg", "mul"):
            return None
        a = sums[x]
        if op == "sext":
            return a
        if op == "uext":
            return a if a.lo >= 0 else None
        if op == "slice":
            return a if int(r[2]) == 0 and a.fits(width) else None
        if op == "neg":
            form = a.negated()
            return form if form.fits(width) else None
        y = int(r[1])
        if y < 0:
            return None
        b = sums[y]
        if op == "concat":  # a zero low part: a shift left; a zero high part: an unsigned extension;
            # the low part's sign bit on top: a sign extension by one bit (Yosys writes them so; the
            # bit may be taken from another node holding the same sum, at another width)
            top = v[y].size() - 1
            if v[x].size() == 1 and (v[x].eq(z3.simplify(z3.Extract(top, top, v[y])))
                                     or (x in signs and sums[signs[x]].key() == b.key())):
                return b
            if z3.is_bv_value(v[y]) and v[y].as_long() == 0:
                return a.shifted(v[y].size())
            if z3.is_bv_value(v[x]) and v[x].as_long() == 0 and b.lo >= 0:
                return b
            return None
        if op == "mul":  # a leaf, with the range of its operands' product
            corners = [p * q for p in (a.lo, a.hi) for q in (b.lo, b.hi)]
            form = _Sum(((None, 0, 1),), min(corners), max(corners))
            return form if form.fits(width) else None
        form = a.plus(b if op == "add" else b.negated())
        return form if form.fits(width) else None
