"""LogicSAGE's Socratic repair loop and the baselines, every arm under the same solver-call budget.

One round = one solver call (:func:`.solver.execute`). After each call LogicSAGE turns the solver's
feedback into a targeted question about the implicated lines and lets the translator answer it by
scoring candidate edits of those lines only (log p(line | sentence)); the best edit replaces the line:

| feedback | question | candidate edits (lines) |
|---|---|---|
| syntax | "what does sentence i say, in the DSL?" | every well-formed line over the symbols the sentence mentions (line i) |
| undeclared symbol s | "is s declared, or a slip?" | the declaration with s added; line i with s replaced by a declared symbol |
| sort mismatch | "which argument is which?" | line i with arguments swapped or re-filled from the right sort |
| unsat premises (core C) | "which of these sentences did I misread?" | negation toggled / arguments swapped, lines in C |
| disagreement with System 1 | "is the derivation of the answer right?" | the same edits, lines supporting the answer (Unknown: all premise lines) |

An edit is taken only if the translator finds it plausible (log-probability drop <= ``max_drop`` nats
for the disagreement question, since there the program may well be right). Adaptive fusion: the final
answer is the solver's when the last program is executable and consistent, else System 1's.
"""

from __future__ import annotations

import itertools

import numpy as np

from .solver import DECLS, FORMS, Execution, execute
from .translator import line_logprob, translate


def _decls(program: list[str]) -> dict[str, str]:
    sort = {}
    for line in program:
        t = line.split()
        if t and t[0] in DECLS:
            for s in t[1:]:
                sort.setdefault(s, DECLS[t[0]])
    return sort


def _well_formed(sentence: str, sort_of: dict[str, str], n_obj: int) -> list[str]:
    """Every well-formed non-declaration line whose symbols are words of the sentence (or, if a sort has
    none there, any declared symbol of that sort)."""
    words = sentence.split()
    fill = {}
    for kind in ("E", "P", "O"):
        mine = [w for w in dict.fromkeys(words) if sort_of.get(w) == kind]
        fill[kind] = mine or [s for s, k in sort_of.items() if k == kind]
    fill["K"] = [w for w in dict.fromkeys(words) if w.isdigit()] or [str(k) for k in range(1, n_obj + 1)]
    fill["N"] = [None, "not"]
    out = []
    for head, sorts in FORMS.items():
        for combo in itertools.product(*[fill[s] for s in sorts]):
            out.append(" ".join([head] + [c for c in combo if c is not None]))
    return out


def _edits(line: str, sort_of: dict[str, str], sentence: str) -> list[str]:
    """Local edits of a statement: toggle negation, swap its two symbols, replace one symbol with another
    of the same sort that the sentence mentions."""
    t = line.split()
    if not t or t[0] not in FORMS:
        return []
    out = []
    if t[0] in ("all", "is"):
        out.append(" ".join(t[:2] + t[3:]) if len(t) == 4 else " ".join(t[:2] + ["not"] + t[2:]))
    syms = [j for j in range(1, len(t)) if t[j] != "not"]
    if len(syms) == 2:
        u = list(t)
        u[syms[0]], u[syms[1]] = u[syms[1]], u[syms[0]]
        out.append(" ".join(u))
    for j in syms:
        for w in dict.fromkeys(sentence.split()):
            if w != t[j] and sort_of.get(w) is not None and sort_of.get(w) == sort_of.get(t[j]):
                u = list(t)
                u[j] = w
                out.append(" ".join(u))
    return [o for o in dict.fromkeys(out) if o != line]


def candidate_repairs(sentences: list[str], program: list[str], ex: Execution, neural: str | None) -> list[tuple[int, str]]:
    """The targeted question's candidate answers: (line index, new line) pairs (see the module table)."""
    sort_of = _decls(program)
    n_obj = sum(1 for k in sort_of.values() if k == "O")
    cands: list[tuple[int, str]] = []
    if ex.status == "syntax":
        i = ex.lines[0]
        if i < len(sentences):
            head = sentences[i].split()
            if i == 0 or any(w in ("things", "properties", "books", "talk", "words", "shelf") for w in head):
                # a declaration sentence: its symbols, as the declaration of each sort
                for kw, kind in DECLS.items():
                    syms = [w for w in head if w in _all_symbols(kind)]
                    if syms:
                        cands.append((i, " ".join([kw] + syms)))
            cands += [(i, c) for c in _well_formed(sentences[i], sort_of, n_obj)]
    elif ex.status == "undeclared":
        i, s = ex.lines[0], ex.symbol
        for j, line in enumerate(program):
            t = line.split()
            if t and t[0] in DECLS and s in sentences[j].split():
                cands.append((j, line + " " + s))
        t = program[i].split()
        for k, w in enumerate(t):
            if w == s:
                for alt in sort_of:
                    u = list(t)
                    u[k] = alt
                    cands.append((i, " ".join(u)))
    elif ex.status == "sort":
        i = ex.lines[0]
        cands += [(i, c) for c in _edits(program[i], sort_of, sentences[i])]
        cands += [(i, c) for c in _well_formed(sentences[i], sort_of, n_obj)]
    elif ex.status == "unsat":
        for i in ex.lines:
            cands += [(i, c) for c in _edits(program[i], sort_of, sentences[i])]
    elif ex.status == "ok" and neural is not None and ex.answer != neural:
        lines = ex.lines or [i for i, line in enumerate(program) if line.split()[:1] and line.split()[0] in FORMS
                             and not line.startswith("ask")]
        for i in lines:
            cands += [(i, c) for c in _edits(program[i], sort_of, sentences[i])]
    return list(dict.fromkeys(cands))


def _all_symbols(kind: str) -> set[str]:
    from .problems import COLORS, CONCEPTS, ENTITIES, PROPERTIES

    return {"E": set(ENTITIES), "P": set(CONCEPTS) | set(PROPERTIES), "O": set(COLORS)}[kind]


def run_arm(arm: str, problems, translator, vocab, neural: list[tuple[str, float]], *, budget: int,
            rng: np.random.Generator, max_drop: float = 3.0, temperature: float = 1.0) -> list[dict]:
    """One arm on every problem with at most ``budget`` solver calls each.

    Returns:
        Per problem: ``answer`` (final), ``correct``, ``calls`` (solver calls used), ``executable`` (the last
        program executed and was consistent), ``first_status`` (the first execution's status), ``fallback``
        (System 1's answer was used).
    """
    n = len(problems)
    if arm == "neural-only":
        return [{"answer": neural[k][0], "correct": neural[k][0] == p.answer, "calls": 0, "executable": False,
                 "first_status": None, "fallback": True} for k, p in enumerate(problems)]
    flat = [s for p in problems for s in p.sentences]
    lines = translate(translator, vocab, flat)
    programs, at = [], 0
    for p in problems:
        programs.append(lines[at:at + len(p.sentences)])
        at += len(p.sentences)
    execs = [execute(prog) for prog in programs]
    calls = [1] * n
    first = [e.status for e in execs]
    for _ in range(budget - 1):
        todo = []
        for k in range(n):
            e = execs[k]
            if arm == "translate-once":
                break
            if arm == "resample-on-error" and e.status in ("syntax", "undeclared", "sort"):
                todo.append(k)
            elif arm == "logicsage" and (e.status != "ok" or e.answer != neural[k][0]):
                todo.append(k)
        if not todo:
            break
        if arm == "resample-on-error":
            sents = [s for k in todo for s in problems[k].sentences]
            new = translate(translator, vocab, sents, temperature=temperature, rng=rng)
            at = 0
            for k in todo:
                m = len(problems[k].sentences)
                programs[k] = new[at:at + m]
                at += m
                execs[k] = execute(programs[k])
                calls[k] += 1
            continue
        # LogicSAGE: one targeted repair per problem, all candidates scored in one batch
        asks = {k: candidate_repairs(list(problems[k].sentences), programs[k], execs[k], neural[k][0]) for k in todo}
        pairs, index = [], []
        for k, cands in asks.items():
            sents = problems[k].sentences
            for i, line in cands:
                pairs.append((sents[i], line))
                index.append((k, i, line))
            for i in {i for i, _ in cands}:
                pairs.append((sents[i], programs[k][i]))
                index.append((k, i, None))
        scores = line_logprob(translator, vocab, pairs) if pairs else np.zeros(0)
        current = {(k, i): s for (k, i, line), s in zip(index, scores) if line is None}
        best: dict[int, tuple[float, int, str]] = {}
        for (k, i, line), s in zip(index, scores):
            if line is None:
                continue
            gain = float(s - current[(k, i)])
            if execs[k].status == "ok" and gain < -max_drop:
                continue  # the disagreement question: only plausible re-readings
            if k not in best or gain > best[k][0]:
                best[k] = (gain, i, line)
        for k in todo:
            if k not in best:
                continue
            _, i, line = best[k]
            trial = list(programs[k])
            trial[i] = line
            ex = execute(trial)
            calls[k] += 1
            # keep the edit unless it turns an executable program into a broken one
            if ex.executable or not execs[k].executable:
                programs[k], execs[k] = trial, ex
    out = []
    for k, p in enumerate(problems):
        e = execs[k]
        use_solver = e.status == "ok"
        ans = e.answer if use_solver else neural[k][0]
        out.append({"answer": ans, "correct": ans == p.answer, "calls": calls[k], "executable": use_solver,
                    "first_status": first[k], "fallback": not use_solver})
    return out

