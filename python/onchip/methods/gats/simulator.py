"""The Gecko stand-in: a stateful tool simulator built from the schemas and the call history only.

Gecko (arXiv 2602.19218, sec. 3) gives an agent three kinds of feedback without touching the real
tools: (1) *validity* - tool names and arguments checked against the schemas; (2) *response* -
schema-conforming responses synthesised consistently with the state implied by earlier calls;
(3) *judge* - a checklist derived from the user's request, scored against the trajectory.
Here (1) is ``jsonschema`` validation, (2) follows generic state rules (ids the user mentions
exist and are open; ids it created exist; closed tickets stay closed; a ``$k`` reference needs
the k-th call to have returned an id) and never reads the real backend, (3) is a rule checklist
in the spirit of Gecko's LLM judge. By default (``judge="actions"``) the checklist holds the task's
*actions* only: the tools the request asks for (from the tools' descriptions) and no unrequested
call; it reads no literal value out of the request, so it cannot repair an id or an argument value
for the other two kinds. ``judge="literal"`` adds every value the user named and a reference for
"it" (the earlier, stronger rule judge that made validity and response feedback redundant).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jsonschema

from .tools import SCHEMAS, parse_calls, schema_errors

#: words of tool descriptions that name no action
_STOP = {"a", "an", "the", "to", "of", "about", "new", "ticket", "user", "topic", "priority", "up"}


@dataclass
class Feedback:
    """What the simulator says about one attempt.

    Attributes:
        kind: first failing feedback kind ("validity", "response", "judge") or None (clean, judge 1.0).
        where: (call index, argument name or None) of a validity/response error, else None.
        message: human-readable reason.
        judge: checklist score in [0, 1] (fraction of items satisfied; 0 when the judge is off).
        responses: the synthesised responses, one per call simulated.
        missing: checklist items not satisfied.
    """

    kind: str | None
    where: tuple[int, str | None] | None = None
    message: str = ""
    judge: float = 0.0
    responses: list = field(default_factory=list)
    missing: list = field(default_factory=list)

    def rank(self) -> tuple:
        """Sort key of an attempt: no validity error, no response error, then the judge score."""
        return (self.kind != "validity", self.kind not in ("validity", "response"), self.judge)


def mentioned_ids(text: str) -> list[int]:
    """Integers in the request: ticket ids the user says exist."""
    return [int(w) for w in text.split() if w.isdigit()]


#: the judge's checklists: task actions only, or actions plus the request's literal values
JUDGES = ("actions", "literal")


def checklist(text: str, schemas: dict = SCHEMAS, *, judge: str = "actions") -> list[tuple[str, object]]:
    """The judge's checklist for a request: ``("call", tool)`` items, and with ``judge="literal"`` also
    ``("value", v)`` and ``("ref", None)`` items.

    Derived from the text and the public schemas only: a tool is requested when a word of the request
    is one of its description's action words. The literal judge adds: every enum value or integer in the
    request must be passed to some call; "it", when a requested tool other than create takes a ticket id,
    asks for a reference to the ticket created in the same attempt.

    Raises:
        ValueError: ``judge`` is not one of :data:`JUDGES`.
    """
    if judge not in JUDGES:
        raise ValueError(f"judge: must be one of {', '.join(JUDGES)}, got {judge!r}")
    words = text.split()
    items: list[tuple[str, object]] = []
    for name, s in schemas.items():
        keys = set(s["description"].split()) - _STOP
        if keys & set(words):
            items.append(("call", name))
    if judge == "actions":
        return items
    enums = {v for s in schemas.values() for p in s["parameters"]["properties"].values() for v in p.get("enum", [])}
    for w in words:
        if w in enums or w.isdigit():
            items.append(("value", int(w) if w.isdigit() else w))
    takes_id = any("ticket_id" in schemas[n]["parameters"]["properties"] for k, n in items
                   if k == "call" and n != "create_ticket")
    if "it" in words and takes_id:
        items.append(("ref", None))
    return items


class Simulator:
    """Simulates the tools from their schemas and the attempt's own history.

    Args:
        schemas: tool name -> {"description", "parameters", "response", "mutates"} (JSON schemas).
        feedback: which of "validity", "response", "judge" to give (ablations drop one).
        first_id: ids the simulator invents for created tickets start here (any schema-valid id works:
            the real ids are hidden; ``$k`` references keep the trajectory consistent).
        judge: the checklist, one of :data:`JUDGES` (see :func:`checklist`).

    Raises:
        ValueError: an unknown feedback kind or judge.
    """

    def __init__(self, schemas: dict = SCHEMAS, feedback=("validity", "response", "judge"), first_id: int = 900,
                 judge: str = "actions"):
        bad = [k for k in feedback if k not in ("validity", "response", "judge")]
        if bad:
            raise ValueError(f"feedback: unknown kind {bad[0]!r} (validity, response, judge)")
        if judge not in JUDGES:
            raise ValueError(f"judge: must be one of {', '.join(JUDGES)}, got {judge!r}")
        self.schemas = schemas
        self.feedback = tuple(feedback)
        self.first_id = first_id
        self.judge_kind = judge

    def synthesise(self, call: dict, args: dict, state: dict) -> dict:
        """A response that conforms to the tool's response schema and to ``state`` (updated in place)."""
        name = call["name"]
        if name == "create_ticket":
            tid = self.first_id + state["created"]
            state["created"] += 1
            state["open"].add(tid)
            out = {"ticket_id": tid}
        elif name == "close_ticket":
            state["open"].discard(args.get("ticket_id"))
            state["closed"].add(args.get("ticket_id"))
            out = {"status": "closed"}
        elif name == "assign_ticket":
            out = {"owner": args.get("user")}
        elif name == "set_priority":
            out = {"priority": args.get("priority")}
        elif name == "send_message":
            out = {"delivered": True}
        else:
            # the simulator does not know the hidden fields: a schema-valid placeholder, kept consistent
            tid = args.get("ticket_id")
            out = state["seen"].setdefault(tid, {"ticket_id": tid, "title": "printer", "priority": "medium",
                                                 "status": "closed" if tid in state["closed"] else "open",
                                                 "owner": None})
        return out

    def simulate(self, text: str, output: str | list) -> Feedback:
        """Simulate an attempt (the agent's output text, or parsed calls) for request ``text``.

        Returns:
            The :class:`Feedback`: the first validity/response error (when those kinds are on), the
            synthesised responses and the judge's score.
        """
        if isinstance(output, str):
            calls, perr = parse_calls(output)
            if perr is not None and "validity" in self.feedback:
                return Feedback("validity", (len(calls), None), perr)
        else:
            calls = output
        state = {"open": set(mentioned_ids(text)), "closed": set(), "created": 0, "seen": {}}
        responses: list[dict] = []
        for i, call in enumerate(calls):
            errs = schema_errors(call, self.schemas) if call.get("name") in self.schemas else [(None, "unknown tool")]
            if errs and "validity" in self.feedback:
                return Feedback("validity", (i, errs[0][0]), errs[0][1], responses=responses)
            if call.get("name") not in self.schemas:
                responses.append({})  # without validity feedback an unknown tool "succeeds" silently
                continue
            args, bad = {}, None
            for k, v in call["arguments"].items():
                if isinstance(v, str) and v.startswith("$"):
                    k_ref = int(v[1:]) if v[1:].isdigit() else 0
                    if 1 <= k_ref <= len(responses) and "ticket_id" in responses[k_ref - 1]:
                        v = responses[k_ref - 1]["ticket_id"]
                    else:
                        bad = bad or (k, f"{v} refers to no earlier created ticket")
                args[k] = v
            tid = args.get("ticket_id")
            if bad is None and call["name"] not in ("create_ticket",) and "ticket_id" in args:
                if tid in state["closed"] and call["name"] != "get_ticket":
                    bad = ("ticket_id", f"ticket {tid} was closed earlier in this session")
                elif tid not in state["open"] and tid not in state["closed"]:
                    bad = ("ticket_id", f"ticket {tid} is not known: the user never named it and no call created it")
            if bad is not None and "response" in self.feedback:
                return Feedback("response", (i, bad[0]), bad[1], responses=responses)
            resp = self.synthesise(call, args, state)
            if not errs:
                jsonschema.validate(resp, self.schemas[call["name"]]["response"])
            responses.append(resp)
        if "judge" not in self.feedback:
            return Feedback(None, responses=responses)
        score, missing = self.judge(text, calls, responses)
        return Feedback(None if score == 1.0 else "judge", None, "; ".join(map(str, missing)), score,
                        responses, missing)

    def judge(self, text: str, calls: list[dict], responses: list[dict]) -> tuple[float, list]:
        """Checklist score of a trajectory: (fraction satisfied, unsatisfied items). Unrequested calls
        count as one more unsatisfied item."""
        items = checklist(text, self.schemas, judge=self.judge_kind)
        names = [c.get("name") for c in calls]
        values = set()
        refs = False
        for c in calls:
            for v in c.get("arguments", {}).values():
                values.add(v)
                refs = refs or (isinstance(v, str) and v.startswith("$"))
        missing = []
        for kind, v in items:
            ok = (v in names) if kind == "call" else (v in values) if kind == "value" else refs
            if not ok:
                missing.append((kind, v))
        wanted = {v for k, v in items if k == "call"}
        extra = [n for n in names if n not in wanted]
        if extra:
            missing.append(("unrequested", extra[0]))
        total = len(items) + (1 if extra else 0)
        return (1.0 - len(missing) / total if total else 1.0), missing
