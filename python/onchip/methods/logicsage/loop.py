"""LogicSAGE's Socratic repair loop and the baselines, every arm under the same solver-call budget and
the same translator budget per repair round (forward passes: one per candidate line scored, one per
token decoded).

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


def plant_error(program: tuple[str, ...] | list[str], rng: np.random.Generator) -> list[str]:
    """The gold ``program`` with one planted translation error, the kind the translator makes: a
    premise's negation toggled, the two symbols of a premise swapped, or one symbol dropped from a
    declaration (then undeclared). Used by the positive control: a program one line away from right.

    Raises:
        ValueError: the program has no line that can take an error.
    """
    prog = list(program)
    sites = []
    for i, line in enumerate(prog):
        t = line.split()
        if not t or t[0].startswith("ask"):
            continue
        if t[0] in DECLS and len(t) > 2:
            sites.append((i, " ".join(t[:-1])))
        elif t[0] in FORMS:
            sites += [(i, e) for e in _edits(line, {}, "")]
    if not sites:
        raise ValueError(f"program: no line can take a planted error in {prog!r}")
    i, line = sites[int(rng.integers(len(sites)))]
    prog[i] = line
    return prog


def run_arm(arm: str, problems, translator, vocab, neural: list[tuple[str, float]], *, budget: int, scan: int,
            rng: np.random.Generator, max_drop: float = 3.0, temperature: float = 1.0,
            start: list[list[str]] | None = None) -> list[dict]:
    """One arm on every problem with at most ``budget`` solver calls and the same translator budget per
    repair round.

    Each repair round of a problem may spend up to ``scan`` translator forward passes (one pass = one
    candidate line scored, or one token decoded). ``logicsage`` spends them scoring the targeted
    question's candidate edits (plus the implicated current lines; a random subset when they do not fit);
    ``resample`` spends them drawing whole programs at ``temperature`` and scoring them line by line
    (best-of-k by the translator's log-probability, k as many as fit), with the same triggers (execution
    failure or disagreement with System 1), the same plausibility rule and the same solver calls.

    Args:
        arm: one of :data:`~onchip.methods.logicsage.ARMS`.
        budget: solver calls per problem (>= 1); scan: translator passes per repair round (>= 1).
        start: optional first programs (one per problem) instead of the translator's greedy translation
            (the positive control's planted programs; no translator passes charged for them).

    Returns:
        Per problem: ``answer`` (final), ``correct``, ``calls`` (solver calls used), ``forwards``
        (translator forward passes used), ``executable`` (the last program executed and was consistent),
        ``first_status`` (the first execution's status), ``fallback`` (System 1's answer was used).

    Raises:
        ValueError: an unknown arm, or ``budget`` / ``scan`` < 1.
    """
    from . import ARMS

    if arm not in ARMS:
        raise ValueError(f"arm: expected one of {ARMS}, got {arm!r}")
    if budget < 1 or scan < 1:
        raise ValueError(f"budget, scan: must be >= 1, got {budget}, {scan}")
    n = len(problems)
    if arm == "neural-only":
        return [{"answer": neural[k][0], "correct": neural[k][0] == p.answer, "calls": 0, "forwards": 0,
                 "executable": False, "first_status": None, "fallback": True} for k, p in enumerate(problems)]
    forwards = np.zeros(n, np.int64)
    if start is None:
        flat = [s for p in problems for s in p.sentences]
        lines, cost = translate(translator, vocab, flat, passes=True)
        programs, at = [], 0
        for k, p in enumerate(problems):
            m = len(p.sentences)
            programs.append(lines[at:at + m])
            forwards[k] += int(cost[at:at + m].sum())
            at += m
    else:
        programs = [list(x) for x in start]
    execs = [execute(prog) for prog in programs]
    calls = [1] * n
    first = [e.status for e in execs]
    for _ in range(budget - 1):
        if arm == "translate-once":
            break
        todo = [k for k in range(n) if execs[k].status != "ok" or execs[k].answer != neural[k][0]]
        if not todo:
            break
        proposal = (_resample_round if arm == "resample" else _socratic_round)(
            todo, problems, programs, execs, neural, translator, vocab, forwards, scan=scan, rng=rng,
            max_drop=max_drop, temperature=temperature)
        for k, trial in proposal.items():
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
        out.append({"answer": ans, "correct": ans == p.answer, "calls": calls[k], "forwards": int(forwards[k]),
                    "executable": use_solver, "first_status": first[k], "fallback": not use_solver})
    return out


def _socratic_round(todo, problems, programs, execs, neural, translator, vocab, forwards, *, scan, rng, max_drop,
                    temperature) -> dict[int, list[str]]:
    """LogicSAGE: one targeted question per problem, its candidate edits scored in one batch; returns the
    best plausible edited program per problem (``forwards`` charged in place)."""
    asks = {k: candidate_repairs(list(problems[k].sentences), programs[k], execs[k], neural[k][0]) for k in todo}
    pairs, index = [], []
    for k, cands in asks.items():
        sents = problems[k].sentences
        lines = sorted({i for i, _ in cands})
        room = scan - len(lines)
        if room < len(cands):  # the translator budget of the round: a random subset of the candidates
            keep = np.sort(rng.choice(len(cands), size=max(room, 0), replace=False))
            cands = [cands[j] for j in keep]
            lines = sorted({i for i, _ in cands})
        for i, line in cands:
            pairs.append((sents[i], line))
            index.append((k, i, line))
        for i in lines:
            pairs.append((sents[i], programs[k][i]))
            index.append((k, i, None))
        forwards[k] += len(cands) + len(lines)
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
    out = {}
    for k, (_, i, line) in best.items():
        trial = list(programs[k])
        trial[i] = line
        out[k] = trial
    return out


def _resample_round(todo, problems, programs, execs, neural, translator, vocab, forwards, *, scan, rng, max_drop,
                    temperature) -> dict[int, list[str]]:
    """The ablation of the targeted questions: whole programs re-sampled at ``temperature`` and scored by the
    translator (sum of line log-probabilities), as many as the round's ``scan`` passes allow; returns the
    best-scoring new program per problem (for a disagreement, only one within ``max_drop`` nats of the
    current program's score). ``forwards`` charged in place."""
    spent = {k: len(problems[k].sentences) for k in todo}  # scoring the current program
    pairs = [(s, line) for k in todo for s, line in zip(problems[k].sentences, programs[k])]
    cur = line_logprob(translator, vocab, pairs)
    current, at = {}, 0
    for k in todo:
        m = len(problems[k].sentences)
        current[k] = float(cur[at:at + m].sum())
        at += m
    samples: dict[int, list[tuple[float, list[str]]]] = {k: [] for k in todo}
    last = {k: 0 for k in todo}
    active = list(todo)
    while active:
        sents = [s for k in active for s in problems[k].sentences]
        lines, cost = translate(translator, vocab, sents, temperature=temperature, rng=rng, passes=True)
        sc = line_logprob(translator, vocab, list(zip(sents, lines)))
        at = 0
        for k in active:
            m = len(problems[k].sentences)
            c = int(cost[at:at + m].sum()) + m
            spent[k] += c
            last[k] = max(last[k], c)
            samples[k].append((float(sc[at:at + m].sum()), lines[at:at + m]))
            at += m
        # draw again only while another program of the largest cost seen still fits the round's budget
        active = [k for k in active if spent[k] + last[k] <= scan]
    out = {}
    for k in todo:
        forwards[k] += spent[k]
        new = [(s, prog) for s, prog in samples[k] if prog != programs[k]]
        if execs[k].status == "ok":
            new = [(s, prog) for s, prog in new if s - current[k] >= -max_drop]
        if new:
            out[k] = max(new, key=lambda x: x[0])[1]
    return out
