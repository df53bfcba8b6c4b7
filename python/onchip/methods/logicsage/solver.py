"""The logic-program DSL, its static checks and its execution by z3, with located feedback.

One line per sentence::

    ent max sam            pred wumpus bright     obj red blue green     (declarations and their sorts)
    all A B | all A not B  (every A is (not) a B; grounded over the declared entities)
    is e A  | is e not A   (fact)                 ask e A                (question)
    left a b | pos a k | last a                   askpos a k             (ordering: position 1..n, all distinct)

Execution (one *solver call*) checks syntax, declarations and sorts, then asserts every premise line
under its own tracking literal (``assert_and_track``) so that inconsistent premises come back with
their unsat core as line numbers, then decides the question by entailment: premises and not q unsat
-> True; premises and q unsat -> False; else Unknown (open world, as ProofWriter).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FORMS = {  # keyword -> slot sorts ("E" entity, "P" predicate, "O" object, "K" position, "N" optional not)
    "all": ("P", "N", "P"), "is": ("E", "N", "P"), "ask": ("E", "P"),
    "left": ("O", "O"), "pos": ("O", "K"), "last": ("O",), "askpos": ("O", "K"),
}
DECLS = {"ent": "E", "pred": "P", "obj": "O"}


@dataclass
class Execution:
    """Outcome of one solver call.

    Attributes:
        status: "ok", "syntax", "undeclared", "sort" or "unsat".
        answer: "True"/"False"/"Unknown" when status is "ok", else None.
        lines: implicated line indices (the faulty line; the unsat core; for "ok" the lines supporting the
            answer: the core of premises + the negated answer, empty for Unknown).
        symbol: the offending symbol (undeclared / sort).
        message: what the solver says.
    """

    status: str
    answer: str | None = None
    lines: list[int] = field(default_factory=list)
    symbol: str | None = None
    message: str = ""

    @property
    def executable(self) -> bool:
        return self.status in ("ok", "unsat")


def _parse(line: str):
    toks = line.split()
    if not toks:
        return None, "empty line"
    head, args = toks[0], toks[1:]
    if head in DECLS:
        return ((head, args), None) if args else (None, f"{head} declares nothing")
    if head not in FORMS:
        return None, f"unknown statement {head!r}"
    sorts = FORMS[head]
    if "N" in sorts:
        if len(args) == 3 and args[1] == "not":
            return (head, [args[0], "not", args[2]]), None
        if len(args) == 2 and "not" not in args:
            return (head, [args[0], None, args[1]]), None
        return None, f"{head} takes two symbols and an optional not"
    if len(args) != len(sorts) or "not" in args:
        return None, f"{head} takes {len(sorts)} argument(s)"
    return (head, args), None


def check(program: list[str]) -> tuple[Execution | None, list, dict]:
    """Static checks: (first error or None, parsed lines, symbol -> sort)."""
    parsed, sort_of = [], {}
    for i, line in enumerate(program):
        p, err = _parse(line)
        if err:
            return Execution("syntax", lines=[i], message=f"line {i}: {err}"), parsed, sort_of
        parsed.append(p)
        if p[0] in DECLS:
            for s in p[1]:
                sort_of.setdefault(s, DECLS[p[0]])
    n_obj = sum(len(p[1]) for p in parsed if p[0] == "obj")
    for i, (head, args) in enumerate(parsed):
        if head in DECLS:
            continue
        for s, want in zip(args, FORMS[head]):
            if want == "N" or s is None:
                continue
            if want == "K":
                if not (s.isdigit() and 1 <= int(s) <= max(n_obj, 1)):
                    return Execution("sort", lines=[i], symbol=s, message=f"line {i}: {s!r} is not a position"), parsed, sort_of
                continue
            if s not in sort_of:
                return Execution("undeclared", lines=[i], symbol=s, message=f"line {i}: {s!r} is not declared"), parsed, sort_of
            if sort_of[s] != want:
                return Execution("sort", lines=[i], symbol=s,
                                 message=f"line {i}: {s!r} is a {sort_of[s]} where a {want} is needed"), parsed, sort_of
    questions = [i for i, p in enumerate(parsed) if p[0] in ("ask", "askpos")]
    if len(questions) != 1:
        return Execution("syntax", lines=[len(program) - 1], message="the program needs exactly one question"), parsed, sort_of
    return None, parsed, sort_of


def execute(program: list[str], timeout_ms: int = 2000) -> Execution:
    """One solver call: checks, then z3 (see the module docstring).

    Returns:
        The :class:`Execution`; inconsistent premises give status "unsat" with the core's line indices.
    """
    import z3

    err, parsed, sort_of = check(program)
    if err is not None:
        return err
    ents = [s for s, k in sort_of.items() if k == "E"]
    objs = [s for s, k in sort_of.items() if k == "O"]
    holds = {}

    def atom(e, p):
        return holds.setdefault((e, p), z3.Bool(f"{p}({e})"))

    pos = {o: z3.Int(f"pos({o})") for o in objs}
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    if objs:
        s.add(z3.Distinct(*pos.values()), *[z3.And(v >= 1, v <= len(objs)) for v in pos.values()])
    query, tracks = None, {}
    for i, (head, args) in enumerate(parsed):
        if head == "all":
            a, neg, b = args
            f = z3.And(*[z3.Implies(atom(e, a), z3.Not(atom(e, b)) if neg else atom(e, b)) for e in ents]) \
                if ents else z3.BoolVal(True)
        elif head == "is":
            e, neg, a = args
            f = z3.Not(atom(e, a)) if neg else atom(e, a)
        elif head == "left":
            f = pos[args[0]] < pos[args[1]]
        elif head == "pos":
            f = pos[args[0]] == int(args[1])
        elif head == "last":
            f = pos[args[0]] == len(objs)
        elif head == "ask":
            query = atom(args[0], args[1])
            continue
        elif head == "askpos":
            query = pos[args[0]] == int(args[1])
            continue
        else:
            continue
        lit = z3.Bool(f"line{i}")
        tracks[str(lit)] = i
        s.assert_and_track(f, lit)

    def core_lines():
        return sorted(tracks[str(c)] for c in s.unsat_core())

    if s.check() == z3.unsat:
        return Execution("unsat", lines=core_lines(), message="the premises contradict each other")
    s.push()
    s.add(z3.Not(query))
    if s.check() == z3.unsat:
        lines = core_lines()
        s.pop()
        return Execution("ok", "True", lines)
    s.pop()
    s.push()
    s.add(query)
    if s.check() == z3.unsat:
        lines = core_lines()
        s.pop()
        return Execution("ok", "False", lines)
    s.pop()
    return Execution("ok", "Unknown", [])
