"""A help-desk tool suite with JSON schemas, its real backend (hidden state, side-effect log) and tasks.

The schemas are the only thing the simulator (:mod:`.simulator`) is given about the tools, like an
OpenAPI file in Gecko (arXiv 2602.19218, sec. 3); the backend's state and code stay hidden from it.

A *call* is ``{"name": str, "arguments": dict}``; an argument value ``"$k"`` (k >= 1) refers to the
``ticket_id`` returned by the k-th call of the same attempt (resolved by whoever executes it).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import jsonschema
import numpy as np

TITLES = ("printer", "laptop", "network", "badge", "monitor", "vpn", "email", "phone")
PRIORITIES = ("low", "medium", "high")
USERS = ("ana", "bo", "chen", "dev", "eli", "fay")
ID_MIN, ID_MAX = 10, 99

_ID = {"type": "integer", "minimum": 1, "maximum": 999}

#: tool name -> {"description", "parameters" (JSON schema), "response" (JSON schema), "mutates"}
SCHEMAS: dict[str, dict] = {
    "create_ticket": {
        "description": "open create file raise log report a new ticket",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["title", "priority"],
                       "properties": {"title": {"type": "string", "enum": list(TITLES)},
                                      "priority": {"type": "string", "enum": list(PRIORITIES)}}},
        "response": {"type": "object", "additionalProperties": False, "required": ["ticket_id"],
                     "properties": {"ticket_id": _ID}},
        "mutates": True},
    "close_ticket": {
        "description": "close resolve shut finish a ticket",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["ticket_id"],
                       "properties": {"ticket_id": _ID}},
        "response": {"type": "object", "additionalProperties": False, "required": ["status"],
                     "properties": {"status": {"const": "closed"}}},
        "mutates": True},
    "assign_ticket": {
        "description": "assign give hand route a ticket to a user",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["ticket_id", "user"],
                       "properties": {"ticket_id": _ID, "user": {"type": "string", "enum": list(USERS)}}},
        "response": {"type": "object", "additionalProperties": False, "required": ["owner"],
                     "properties": {"owner": {"type": "string", "enum": list(USERS)}}},
        "mutates": True},
    "set_priority": {
        "description": "set change make bump priority of a ticket",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["ticket_id", "priority"],
                       "properties": {"ticket_id": _ID, "priority": {"type": "string", "enum": list(PRIORITIES)}}},
        "response": {"type": "object", "additionalProperties": False, "required": ["priority"],
                     "properties": {"priority": {"type": "string", "enum": list(PRIORITIES)}}},
        "mutates": True},
    "send_message": {
        "description": "send message tell notify inform ping a user about a topic",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["user", "topic"],
                       "properties": {"user": {"type": "string", "enum": list(USERS)},
                                      "topic": {"type": "string", "enum": list(TITLES)}}},
        "response": {"type": "object", "additionalProperties": False, "required": ["delivered"],
                     "properties": {"delivered": {"const": True}}},
        "mutates": True},
    "get_ticket": {
        "description": "look up show read a ticket",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["ticket_id"],
                       "properties": {"ticket_id": _ID}},
        "response": {"type": "object", "additionalProperties": False,
                     "required": ["ticket_id", "title", "priority", "status"],
                     "properties": {"ticket_id": _ID, "title": {"type": "string", "enum": list(TITLES)},
                                    "priority": {"type": "string", "enum": list(PRIORITIES)},
                                    "status": {"type": "string", "enum": ["open", "closed"]},
                                    "owner": {"type": ["string", "null"]}}},
        "mutates": False},
}


class ToolError(Exception):
    """A tool call refused by the real backend; ``where`` = (call index, argument or None)."""

    def __init__(self, message: str, where: tuple[int, str | None], kind: str):
        super().__init__(message)
        self.where, self.kind = where, kind


def schema_errors(call: dict, schemas: dict = SCHEMAS) -> list[tuple[str | None, str]]:
    """Validity check of one call against the schemas: ``[(argument or None, message)]``, empty if valid.

    ``None`` marks an unknown tool name. Validation is ``jsonschema`` Draft 2020-12 on the arguments;
    a ``"$k"`` reference stands for an integer id (it is resolved at execution).
    """
    name = call.get("name")
    if name not in schemas:
        return [(None, f"unknown tool {name!r}")]
    args = {k: (1 if isinstance(v, str) and v.startswith("$") else v) for k, v in call["arguments"].items()}
    out = []
    for err in jsonschema.Draft202012Validator(schemas[name]["parameters"]).iter_errors(args):
        if err.validator == "required":
            arg = err.message.split("'")[1]
        elif err.validator == "additionalProperties":
            extra = [k for k in args if k not in schemas[name]["parameters"]["properties"]]
            arg = extra[0] if extra else None
        else:
            arg = err.path[0] if err.path else None
        out.append((arg, f"{err.validator}: {err.message}"))
    return out


def resolve(value, results: list[dict]):
    """``"$k"`` -> the ``ticket_id`` in the k-th result (KeyError/IndexError if there is none)."""
    if isinstance(value, str) and value.startswith("$"):
        k = int(value[1:])
        if k < 1:
            raise IndexError(k)
        return results[k - 1]["ticket_id"]
    return value


@dataclass
class RealBackend:
    """The real tools: hidden tickets and messages, every successful mutating call logged as a side effect.

    Attributes:
        tickets: id -> {"title", "priority", "status", "owner"} (hidden from the simulator).
        messages: delivered (user, topic) pairs.
        next_id: the id the next created ticket gets (hidden).
        side_effects: successful state-changing calls executed, in order.
    """

    tickets: dict[int, dict]
    messages: list[tuple[str, str]] = field(default_factory=list)
    next_id: int = 100
    side_effects: list[dict] = field(default_factory=list)

    def state(self) -> dict:
        """The observable final state that task success is judged on."""
        return {"tickets": copy.deepcopy(self.tickets), "messages": sorted(self.messages)}

    def call(self, call: dict, results: list[dict], index: int = 0) -> dict:
        """Execute one call; returns its response or raises :class:`ToolError` (no side effect then)."""
        errs = schema_errors(call)
        if errs:
            raise ToolError(errs[0][1], (index, errs[0][0]), "validity")
        name, raw = call["name"], call["arguments"]
        try:
            a = {k: resolve(v, results) for k, v in raw.items()}
        except (KeyError, IndexError):
            bad = next(k for k, v in raw.items() if isinstance(v, str) and v.startswith("$"))
            raise ToolError("reference to a call that returned no ticket", (index, bad), "response") from None
        if "ticket_id" in a and name != "create_ticket":
            t = self.tickets.get(a["ticket_id"])
            if t is None:
                raise ToolError(f"ticket {a['ticket_id']} not found", (index, "ticket_id"), "response")
            if name in ("close_ticket", "assign_ticket", "set_priority") and t["status"] == "closed":
                raise ToolError(f"ticket {a['ticket_id']} is closed", (index, "ticket_id"), "response")
        if name == "create_ticket":
            tid = self.next_id
            self.next_id += 1
            self.tickets[tid] = {"title": a["title"], "priority": a["priority"], "status": "open", "owner": None}
            out = {"ticket_id": tid}
        elif name == "close_ticket":
            self.tickets[a["ticket_id"]]["status"] = "closed"
            out = {"status": "closed"}
        elif name == "assign_ticket":
            self.tickets[a["ticket_id"]]["owner"] = a["user"]
            out = {"owner": a["user"]}
        elif name == "set_priority":
            self.tickets[a["ticket_id"]]["priority"] = a["priority"]
            out = {"priority": a["priority"]}
        elif name == "send_message":
            self.messages.append((a["user"], a["topic"]))
            out = {"delivered": True}
        else:
            t = self.tickets[a["ticket_id"]]
            out = {"ticket_id": a["ticket_id"], **{k: t[k] for k in ("title", "priority", "status", "owner")}}
        if SCHEMAS[name]["mutates"]:
            self.side_effects.append({"name": name, "arguments": dict(a)})
        return out

    def execute(self, calls: list[dict]) -> tuple[list[dict], ToolError | None]:
        """Run calls in order, stopping at the first error: (responses so far, the error or None)."""
        results: list[dict] = []
        for i, c in enumerate(calls):
            try:
                results.append(self.call(c, results, i))
            except ToolError as exc:
                return results, exc
        return results, None


# ------------------------------------------------------------------ tasks

#: verb synonyms; the last one of each list is held out of training (phrasings unseen by the agent)
VERBS = {
    "create": ["open", "create", "file", "raise", "log"],
    "close": ["close", "resolve", "shut", "finish"],
    "assign": ["assign", "give", "hand", "route"],
    "priority": ["set", "change", "make", "bump"],
    "message": ["tell", "notify", "message", "ping", "inform"],
}
#: task kinds. The two ``close+`` kinds with a second ticket name two ids, so that a call on the ticket
#: just closed (or on an id the user never named) is a *state* error only the simulated responses can see
KINDS = ("create", "close", "assign", "priority", "message", "create+assign", "close+message", "create+message",
         "close+assign", "close+priority")


@dataclass(frozen=True)
class Task:
    """One user request: its text, the gold calls and the real backend's initial (hidden) state."""

    kind: str
    text: str
    gold: tuple
    tickets: dict
    next_id: int

    def backend(self) -> RealBackend:
        """A fresh real backend in the task's initial state."""
        return RealBackend(tickets=copy.deepcopy(self.tickets), next_id=self.next_id)

    def target_state(self) -> dict:
        """The state the gold calls leave behind (the known final state success is checked against)."""
        b = self.backend()
        _, err = b.execute([dict(name=n, arguments=dict(a)) for n, a in self.gold])
        assert err is None, err
        return b.state()


def make_task(rng: np.random.Generator, *, held_out: bool) -> Task:
    """A random task of any kind in :data:`KINDS`; ``held_out`` draws the verb phrasings kept out of training.

    Training tasks use every verb but the last of each list in :data:`VERBS`; held-out tasks draw the
    unseen one half of the time (the agent reads it as ``<unk>``), with fresh ids, values and states.
    Every kind is trained, so no kind is out of the agent's reach; its errors are wrong tools on unseen
    verbs, wrong ids (copied badly, or the ticket closed one call earlier) and wrong values.
    """
    kind = KINDS[rng.integers(len(KINDS))]

    def verb(v):
        words = VERBS[v]
        if held_out and rng.random() < 0.5:
            return words[-1]
        return words[rng.integers(len(words) - 1)]

    n_open = int(rng.integers(3, 7))
    ids = sorted(rng.choice(np.arange(ID_MIN, ID_MAX + 1), n_open, replace=False).tolist())
    tickets = {int(i): {"title": str(rng.choice(TITLES)), "priority": str(rng.choice(PRIORITIES)),
                        "status": "open", "owner": None} for i in ids}
    tid, other = (int(i) for i in rng.choice(ids, 2, replace=False))
    title, prio, user = str(rng.choice(TITLES)), str(rng.choice(PRIORITIES)), str(rng.choice(USERS))
    if kind.endswith("priority"):  # a real change: a no-op request would count every attempt a success
        target = tickets[other if kind == "close+priority" else tid]
        prio = str(rng.choice([p for p in PRIORITIES if p != target["priority"]]))
    parts, gold = [], []
    if kind.startswith("create"):
        parts.append(f"{verb('create')} a {prio} ticket about the {title}")
        gold.append(("create_ticket", {"title": title, "priority": prio}))
    if kind.startswith("close"):
        parts.append(f"{verb('close')} ticket {tid}")
        gold.append(("close_ticket", {"ticket_id": tid}))
    if kind == "assign":
        parts.append(f"{verb('assign')} ticket {tid} to {user}")
        gold.append(("assign_ticket", {"ticket_id": tid, "user": user}))
    if kind == "priority":
        parts.append(f"{verb('priority')} ticket {tid} to {prio}")
        gold.append(("set_priority", {"ticket_id": tid, "priority": prio}))
    if kind == "message":
        parts.append(f"{verb('message')} {user} about the {title}")
        gold.append(("send_message", {"user": user, "topic": title}))
    if kind == "create+assign":
        parts.append(f"and {verb('assign')} it to {user}")
        gold.append(("assign_ticket", {"ticket_id": "$1", "user": user}))
    if kind == "close+message":
        topic = tickets[tid]["title"]
        parts.append(f"and {verb('message')} {user} about the {topic}")
        gold.append(("send_message", {"user": user, "topic": topic}))
    if kind == "create+message":
        parts.append(f"and {verb('message')} {user} about it")
        gold.append(("send_message", {"user": user, "topic": title}))
    if kind == "close+assign":
        parts.append(f"and {verb('assign')} ticket {other} to {user}")
        gold.append(("assign_ticket", {"ticket_id": other, "user": user}))
    if kind == "close+priority":
        parts.append(f"and {verb('priority')} ticket {other} to {prio}")
        gold.append(("set_priority", {"ticket_id": other, "priority": prio}))
    text = "please " + " ".join(parts)
    return Task(kind, text, tuple(gold), tickets, int(rng.integers(100, 200)))


def calls_to_text(calls) -> str:
    """The agent's output language: ``name key value key value ; name ...``."""
    out = []
    for name, args in calls:
        out.append(" ".join([name] + [f"{k} {v}" for k, v in args.items()]))
    return " ; ".join(out)


def parse_calls(text: str) -> tuple[list[dict], str | None]:
    """Parse the agent's output into calls: (calls, error message or None).

    Integers become ints; a malformed call (odd number of key/value tokens, empty call) is an error.
    """
    calls = []
    for chunk in text.split(";"):
        toks = chunk.split()
        if not toks:
            return calls, "empty call"
        if len(toks) % 2 == 0:
            return calls, f"call {len(calls) + 1}: arguments must be key value pairs"
        args = {}
        for k, v in zip(toks[1::2], toks[2::2]):
            args[k] = int(v) if v.lstrip("-").isdigit() else v
        calls.append({"name": toks[0], "arguments": args})
    return calls, None
