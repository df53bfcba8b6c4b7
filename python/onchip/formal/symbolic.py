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
however registered, then give the solver no multiplier to bit-blast.
"""

from __future__ import annotations

from pathlib import Path

import z3

#: the bit width the abstracted products' operands are extended to
PRODUCT_BITS = 64
#: Yosys passes from a core's Verilog to its BTOR2: memories kept as arrays (their synchronous
#: read ports turned into registers after an asynchronous read), flip-flops of every kind
#: unmapped into plain ones with their enables and resets as logic
BTOR_SCRIPT = ("read_verilog {verilog}; prep -top {top}; flatten; memory -nomap -nordff; memory_nordff; opt -fast; "
               "dffunmap; setundef -undriven -anyseq; write_btor -s {btor}")

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
_ONE, _ZERO = z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)


def _bit(cond) -> z3.BitVecRef:
    return z3.If(cond, _ONE, _ZERO)


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
            state[nid] = v if v.sort() == self.sort(s) else z3.K(self.sort(s).domain(), v)
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
        mul = z3.Function("mul", *(z3.BitVecSort(PRODUCT_BITS),) * 3)
        zero = z3.BitVecVal(0, PRODUCT_BITS)
        return z3.Extract(width - 1, 0, z3.If(z3.Or(ops[0] == 0, ops[1] == 0), zero, mul(*ops)))

    def _evaluate(self, state, inputs, *, products):
        v: dict[int, z3.ExprRef] = {}

        def arg(x: str):
            x = int(x)
            return ~v[-x] if x < 0 else v[x]

        for nid, (op, args) in self.ops.items():
            if op in _IGNORED:
                continue
            if op == "input":
                v[nid] = inputs[self.inputs[nid][1]]
                continue
            if op == "state":
                v[nid] = state[nid]
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
            v[nid] = z3.simplify(t)
        return v
