"""GATS and its baselines: every arm gets the same number of agent samples (decodes) per task.

GATS (arXiv 2602.19218, sec. 4; repo ``SimSolver``: ``max_retries``, ``target_score`` 1.0): the agent's
attempt runs in the simulator; while the simulator reports a validity or response error or the judge
scores below the target, the agent revises (here: constrained re-decoding at the located error, or a
fresh sample after a judge failure) up to the retry limit; the best attempt (validity, then response,
then judge) is the one that runs on the real tools. Baselines: one greedy attempt; self-consistency
(majority over the same number of samples); the same refinement loop against the *real* tools, where
every attempt executes and its side effects stay.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np

from .agent import Request, decode, repair_request
from .simulator import Feedback, Simulator, mentioned_ids
from .tools import SCHEMAS, RealBackend, Task, parse_calls


def _state_ids(text: str, output: str) -> list[str]:
    """Ticket ids a revision may use: the ones the user named and ``$k`` for each earlier create."""
    ids = [str(i) for i in mentioned_ids(text)]
    names = [c.split()[0] for c in output.split(";") if c.split()]
    ids += [f"${k + 1}" for k, n in enumerate(names) if n == "create_ticket"]
    return ids


def next_request(text: str, output: str, fb: Feedback, temperature: float) -> Request:
    """How the agent revises after feedback ``fb`` on ``output``: a located error -> constrained
    re-decode at that token; a parse error or a judge failure -> a fresh sample."""
    if fb.kind in ("validity", "response") and fb.where is not None and "key value" not in fb.message \
            and "empty call" not in fb.message:
        req = repair_request(text, output, fb.where, state_ids=_state_ids(text, output))
        if req is not None:
            return req
    if fb.kind == "judge" and fb.missing:
        req = judge_request(text, output, fb.missing)
        if req is not None:
            return req
    return Request(text, [], None, temperature)


def judge_request(text: str, output: str, missing: list) -> Request | None:
    """A re-decode aimed at the judge's first unmet checklist item (None: nothing to aim at).

    A requested tool that was not called replaces an unrequested call (or is appended); an unmet value
    is forced at the first argument whose schema accepts it; an unmet "it" forces a ``$k`` reference at
    a ticket id; an unrequested call with nothing else missing is cut off.
    """
    tokens = output.split()
    starts = [0] + [j + 1 for j, t in enumerate(tokens) if t == ";"]
    names = [tokens[s] if s < len(tokens) else None for s in starts]
    want = [v for k, v in missing if k == "call"]
    extra = [v for k, v in missing if k == "unrequested"]
    if want:
        if extra and extra[0] in names:
            return Request(text, tokens[:starts[names.index(extra[0])]], [want[0]])
        return Request(text, tokens + [";"], [want[0]])
    for kind, v in missing:
        if kind in ("value", "ref"):
            for c, s in enumerate(starts):
                props = SCHEMAS.get(names[c], {}).get("parameters", {}).get("properties", {})
                end = starts[c + 1] - 1 if c + 1 < len(starts) else len(tokens)
                for j in range(s + 1, end - 1, 2):
                    p = props.get(tokens[j], {})
                    fits = (v in p.get("enum", ())) if kind == "value" and isinstance(v, str) else \
                        (tokens[j] == "ticket_id" and names[c] != "create_ticket")
                    if fits and tokens[j + 1] != str(v):
                        first = [str(v)] if kind == "value" else [i for i in _state_ids(text, output) if i[0] == "$"]
                        if first:
                            return Request(text, tokens[:j + 1], first)
    if extra and extra[0] in names:
        k = names.index(extra[0])
        return Request(text, tokens[:max(0, starts[k] - 1)], ["<eos>"])
    return None


def _real_feedback(text: str, output: str, backend: RealBackend, judge: Simulator) -> Feedback:
    """Execute an attempt on the real tools; real errors as feedback; the judge on the real responses."""
    calls, perr = parse_calls(output)
    if perr is not None:
        return Feedback("validity", (len(calls), None), perr)
    responses, err = backend.execute(calls)
    if err is not None:
        return Feedback(err.kind, err.where, str(err), responses=responses)
    score, missing = judge.judge(text, calls, responses)
    return Feedback(None if score == 1.0 else "judge", None, "", score, responses, missing)


#: errors a positive control plants in the agent's first attempt, one per feedback kind
PLANTS = ("validity", "response", "judge")


def plant_error(text: str, output: str, kind: str, rng: np.random.Generator) -> str | None:
    """The first attempt ``output`` with one error planted that only feedback ``kind`` can see (None when
    the attempt offers no place for it). The positive controls of the three feedback kinds.

    * ``validity``: the value of the first enum argument becomes a word of another argument's enum (a
      schema error; ids, state and the actions judge are untouched);
    * ``response``: the first integer ``ticket_id`` becomes an id the user never named (a missing id: valid
      for the schema, the tool is still the requested one);
    * ``judge``: an unrequested ``close_ticket`` on a ticket the attempt may touch is appended (valid and
      state-consistent), or, when closing is requested, the close becomes a ``get_ticket`` (a wrong action).

    Raises:
        ValueError: ``kind`` is not one of :data:`PLANTS`.
    """
    if kind not in PLANTS:
        raise ValueError(f"plant: must be one of {', '.join(PLANTS)}, got {kind!r}")
    from .tools import ID_MAX, ID_MIN

    tokens = output.split()
    starts = [0] + [j + 1 for j, t in enumerate(tokens) if t == ";"]
    names = [tokens[s] if s < len(tokens) else None for s in starts]
    if kind == "judge":
        if "close_ticket" in names:
            return " ".join("get_ticket" if t == "close_ticket" else t for t in tokens)
        ids = [str(i) for i in mentioned_ids(text)] or (["$1"] if names and names[0] == "create_ticket" else [])
        return f"{output} ; close_ticket ticket_id {ids[0]}" if ids and tokens else None
    for c, st in enumerate(starts):
        props = SCHEMAS.get(names[c], {}).get("parameters", {}).get("properties", {})
        end = starts[c + 1] - 1 if c + 1 < len(starts) else len(tokens)
        for j in range(st + 1, end - 1, 2):
            p = props.get(tokens[j])
            if p is None:
                continue
            if kind == "validity" and "enum" in p:
                others = sorted({v for q in props.values() for v in q.get("enum", ())} - set(p["enum"]))
                others = others or [w for w in ("low", "bo") if w not in p["enum"]]
                return " ".join(tokens[:j + 1] + [str(rng.choice(others))] + tokens[j + 2:])
            if kind == "response" and tokens[j] == "ticket_id" and tokens[j + 1].isdigit():
                named = set(mentioned_ids(text))
                free = [i for i in range(ID_MIN, ID_MAX + 1) if i not in named]
                return " ".join(tokens[:j + 1] + [str(rng.choice(free))] + tokens[j + 2:])
    return None


def run_arm(arm: str, tasks: list[Task], model, vocab, *, samples: int, temperature: float,
            rng: np.random.Generator, judge: str = "actions",
            first: Callable[[int, str], str | None] | None = None,
            progress: Callable | None = None) -> list[dict]:
    """Run one arm on every task with at most ``samples`` agent decodes per task.

    Args:
        arm: one of :data:`~onchip.methods.gats.ARMS`.
        tasks: the tasks.
        model, vocab: the agent.
        samples: agent decodes per task (the budget, the same for every arm).
        temperature: sampling temperature of fresh samples.
        rng: the arm's sampling stream.
        judge: the simulated judge's checklist (:data:`~.simulator.JUDGES`).
        first: ``first(i, greedy_output)`` -> a replacement first attempt for task ``i`` (None keeps it):
            how a positive control plants an error (:func:`plant_error`).

    Returns:
        One record per task: ``success`` (final real state equals the task's known target state),
        ``side_effects`` (successful state-changing real calls), ``decodes``, ``judge`` (simulated judge
        score of the chosen attempt, GATS arms), ``first_feedback`` (the feedback kind on the first
        attempt, simulated or real; None for single and self-consistency), ``output`` (the calls that ran last).

    Raises:
        ValueError: an unknown ``arm``.
    """
    n = len(tasks)
    greedy = decode(model, vocab, [Request(t.text, []) for t in tasks], rng)
    if first is not None:
        greedy = [first(i, g) or g for i, g in enumerate(greedy)]
    backends = [t.backend() for t in tasks]
    records = [{"decodes": 1, "judge": None, "first_feedback": None} for _ in tasks]
    if arm == "single":
        finals = greedy
    elif arm == "self-consistency":
        outs = [[g] for g in greedy]
        if samples > 1:
            reqs = [Request(t.text, [], None, temperature) for t in tasks for _ in range(samples - 1)]
            more = decode(model, vocab, reqs, rng)
            for i in range(n):
                outs[i] += more[i * (samples - 1):(i + 1) * (samples - 1)]
        finals = []
        for i in range(n):
            counts = Counter(outs[i])
            finals.append(max(outs[i], key=lambda o: (counts[o], -outs[i].index(o))))  # ties: earliest
            records[i]["decodes"] = samples
    elif arm == "real-refine" or arm.startswith("gats"):
        real = arm == "real-refine"
        kinds = ("validity", "response", "judge")
        if arm.startswith("gats-no-"):
            kinds = tuple(k for k in kinds if k != arm.removeprefix("gats-no-"))
        sim = Simulator(SCHEMAS, feedback=kinds, judge=judge)
        real_judge = Simulator(SCHEMAS, judge=judge)

        def feedback(i, out):
            if real:
                return _real_feedback(tasks[i].text, out, backends[i], real_judge)
            return sim.simulate(tasks[i].text, out)

        current = list(greedy)
        fbs = [feedback(i, current[i]) for i in range(n)]
        for i in range(n):
            records[i]["first_feedback"] = fbs[i].kind
        best = [(fbs[i].rank(), 0, current[i], fbs[i]) for i in range(n)]
        for r in range(1, samples):
            todo = [i for i in range(n) if fbs[i].kind is not None]
            if not todo:
                break
            reqs = [next_request(tasks[i].text, current[i], fbs[i], temperature) for i in todo]
            outs = decode(model, vocab, reqs, rng)
            for i, out in zip(todo, outs):
                current[i] = out
                fbs[i] = feedback(i, out)
                records[i]["decodes"] += 1
                if fbs[i].rank() > best[i][0]:
                    best[i] = (fbs[i].rank(), r, out, fbs[i])
            if progress:
                progress()
        finals = [b[2] for b in best] if not real else current
        for i in range(n):
            records[i]["judge"] = best[i][3].judge if not real else fbs[i].judge
    else:
        raise ValueError(f"arm: unknown arm {arm!r}")
    for i in range(n):
        if arm != "real-refine":  # real-refine has executed every attempt already, the last included
            calls, perr = parse_calls(finals[i])
            if perr is None:
                backends[i].execute(calls)
        records[i].update(success=backends[i].state() == tasks[i].target_state(),
                          side_effects=len(backends[i].side_effects), output=finals[i])
    return records


