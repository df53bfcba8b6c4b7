"""Gecko/GATS: schema validity, state-consistent simulation, the checklist judge, targeted revision, the CLI."""

from __future__ import annotations


import jsonschema
import numpy as np
import pytest
import torch

from onchip.methods.gats.agent import locate, repair_request
from onchip.methods.gats.refine import judge_request, next_request
from onchip.methods.gats.simulator import Feedback, Simulator, checklist
from onchip.methods.gats.tools import SCHEMAS, RealBackend, Task, calls_to_text, make_task, parse_calls, schema_errors
from method_support import assert_refused, quick_run


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def test_schema_errors_name_the_argument():
    assert schema_errors(call("create_ticket", title="vpn", priority="high")) == []
    assert schema_errors(call("assign_ticket", ticket_id="$1", user="bo")) == []  # a reference stands for an id
    assert schema_errors(call("reboot", host="x")) == [(None, "unknown tool 'reboot'")]
    assert [a for a, _ in schema_errors(call("create_ticket", title="vpn"))] == ["priority"]
    assert [a for a, _ in schema_errors(call("create_ticket", title="vpn", priority="urgent"))] == ["priority"]
    assert [a for a, _ in schema_errors(call("close_ticket", ticket_id="17"))] == ["ticket_id"]
    assert [a for a, _ in schema_errors(call("close_ticket", ticket_id=17, user="bo"))] == ["user"]


def test_parse_calls_round_trip_and_malformed_output():
    gold = (("create_ticket", {"title": "vpn", "priority": "low"}), ("assign_ticket", {"ticket_id": "$1", "user": "bo"}))
    calls, err = parse_calls(calls_to_text(gold))
    assert err is None and calls == [call(n, **a) for n, a in gold]
    assert parse_calls("close_ticket ticket_id 17")[0] == [call("close_ticket", ticket_id=17)]
    assert parse_calls("close_ticket ticket_id")[1] == "call 1: arguments must be key value pairs"
    assert parse_calls("close_ticket ticket_id 3 ; ")[1] == "empty call"


def test_real_backend_logs_side_effects_and_refuses_without_them():
    b = RealBackend(tickets={17: {"title": "vpn", "priority": "low", "status": "open", "owner": None}}, next_id=120)
    res, err = b.execute([call("create_ticket", title="printer", priority="high"),
                          call("assign_ticket", ticket_id="$1", user="bo"), call("get_ticket", ticket_id=17)])
    assert err is None and res[0] == {"ticket_id": 120} and res[1] == {"owner": "bo"}
    assert [s["name"] for s in b.side_effects] == ["create_ticket", "assign_ticket"]  # get_ticket changes nothing
    assert b.tickets[120]["owner"] == "bo"
    for bad, where in ((call("close_ticket", ticket_id=55), (0, "ticket_id")),
                       (call("assign_ticket", ticket_id="$1", user="bo"), (0, "ticket_id")),
                       (call("set_priority", ticket_id=17, priority="urgent"), (0, "priority"))):
        _, err = b.execute([bad])
        assert err is not None and err.where == where
    assert len(b.side_effects) == 2
    b.execute([call("close_ticket", ticket_id=17)])
    _, err = b.execute([call("close_ticket", ticket_id=17)])
    assert err.kind == "response" and "closed" in str(err) and len(b.side_effects) == 3


def test_simulator_state_rules_and_schema_conforming_responses():
    sim = Simulator()
    text = "please close ticket 17 and give it to bo"
    fb = sim.simulate(text, [call("close_ticket", ticket_id=17), call("close_ticket", ticket_id=17)])
    assert fb.kind == "response" and fb.where == (1, "ticket_id")  # closed earlier in this session
    fb = sim.simulate(text, [call("assign_ticket", ticket_id=18, user="bo")])
    assert fb.kind == "response" and "never named" in fb.message
    fb = sim.simulate(text, [call("send_message", user="bo", topic="vpn"), call("assign_ticket", ticket_id="$1", user="bo")])
    assert fb.kind == "response" and fb.where == (1, "ticket_id")  # $1 returned no ticket
    fb = sim.simulate("please open a low ticket about the vpn and give it to bo",
                      "create_ticket title vpn priority low ; assign_ticket ticket_id $1 user bo")
    assert fb.kind is None and fb.judge == 1.0 and fb.responses[1] == {"owner": "bo"}
    every = [call("create_ticket", title="vpn", priority="low"), call("get_ticket", ticket_id="$1"),
             call("set_priority", ticket_id="$1", priority="high"), call("send_message", user="ana", topic="vpn"),
             call("assign_ticket", ticket_id="$1", user="ana"), call("close_ticket", ticket_id="$1")]
    fb = Simulator(feedback=("validity", "response")).simulate("x", every)
    assert fb.kind is None
    for c, r in zip(every, fb.responses):
        jsonschema.validate(r, SCHEMAS[c["name"]]["response"])


def test_simulator_never_sees_the_hidden_state():
    """Two tasks with the same request and different hidden tickets get identical simulated feedback."""
    text = "please close ticket 17"
    a = Task("close", text, (), {17: {"title": "vpn", "priority": "low", "status": "open", "owner": None}}, 100)
    b = Task("close", text, (), {17: {"title": "badge", "priority": "high", "status": "closed", "owner": "bo"},
                                 40: {"title": "vpn", "priority": "low", "status": "open", "owner": None}}, 150)
    sim = Simulator()
    for out in ("close_ticket ticket_id 17", "close_ticket ticket_id 40", "set_priority ticket_id 17 priority low"):
        fa, fb = sim.simulate(a.text, out), sim.simulate(b.text, out)
        assert (fa.kind, fa.where, fa.judge, fa.responses) == (fb.kind, fb.where, fb.judge, fb.responses)
    assert b.backend().execute(parse_calls("close_ticket ticket_id 17")[0])[1] is not None  # the real one refuses


def test_judge_checklist_from_text_and_schemas():
    text = "please raise a high ticket about the vpn and hand it to chen"
    assert checklist(text) == [("call", "create_ticket"), ("call", "assign_ticket"), ("value", "high"),
                               ("value", "vpn"), ("value", "chen"), ("ref", None)]
    sim = Simulator()
    calls = [call("create_ticket", title="vpn", priority="high"), call("assign_ticket", ticket_id=901, user="chen")]
    score, missing = sim.judge(text, calls, [])
    assert missing == [("ref", None)] and score == pytest.approx(5 / 6)
    score, missing = sim.judge("please ping bo about the vpn", [call("close_ticket", ticket_id=3)], [])
    assert missing == [("call", "send_message"), ("value", "bo"), ("value", "vpn"), ("unrequested", "close_ticket")]
    assert score == 0.0


def test_gold_calls_pass_the_simulator_and_reach_the_target_state():
    rng = np.random.default_rng(0)
    sim = Simulator()
    for _ in range(60):
        t = make_task(rng, held_out=True)
        fb = sim.simulate(t.text, calls_to_text(t.gold))
        assert fb.kind is None and fb.judge == 1.0, (t.text, fb)
        b = t.backend()
        b.execute(parse_calls(calls_to_text(t.gold))[0])
        assert b.state() == t.target_state()


def test_revision_targets_the_located_token():
    out = "create_ticket title vpn priority urgent ; assign_ticket ticket_id $1 user bo"
    assert locate(out.split(), (0, "priority")) == (4, "value")
    assert locate(out.split(), (1, None)) == (6, "name")
    assert locate("close_ticket user bo".split(), (0, "ticket_id")) == (3, "missing")
    text = "please open a high ticket about the vpn and give it to bo"
    req = next_request(text, out, Feedback("validity", (0, "priority"), "enum"), 1.0)
    assert req.prefix == out.split()[:4] and sorted(req.first) == ["high", "low", "medium"]
    req = repair_request("please close ticket 17", "close_ticket ticket_id 71", (0, "ticket_id"), state_ids=["17"])
    assert req.prefix == ["close_ticket", "ticket_id"] and req.first == ["17"]
    req = repair_request("x", "close_ticket user bo", (0, "ticket_id"), state_ids=[])
    assert req.prefix == "close_ticket user bo".split() and req.first == ["ticket_id"]
    # judge: a requested tool replaces the unrequested call; an unmet value is forced where it fits
    req = judge_request("please open a low ticket about the vpn and ping bo about it",
                        "create_ticket title vpn priority low ; assign_ticket ticket_id $1 user bo",
                        [("call", "send_message"), ("unrequested", "assign_ticket")])
    assert req.prefix == "create_ticket title vpn priority low ;".split() and req.first == ["send_message"]
    req = judge_request("please shut ticket 17", "close_ticket ticket_id 71", [("value", 17)])
    assert req.prefix == ["close_ticket", "ticket_id"] and req.first == ["17"]


@pytest.mark.parametrize("argv, flag", [
    (["--samples", "0"], "--samples"),
    (["--arms", "single,oracle"], "--arms"),
    (["--arms", "single"], "--arms"),
    (["--temperature", "0"], "--temperature"),
    (["--seeds", "1,1"], "--seeds"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("gats", argv, flag, tmp_path / "out", capsys)


def test_quick_run_writes_headline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    m = quick_run("gats", out)
    h = m["headline"]
    assert h["method"] == "gats" and h["direction"] == "higher" and h["seeds"] == [0]
    assert set(h["baselines"]) == {"single", "self-consistency", "real-refine", "gats-no-validity",
                                   "gats-no-response", "gats-no-judge"}
    assert all(0 <= v <= 1 for v in [h["value"], *h["baselines"].values()])
    assert m["results"]["self-consistency"]["decodes"] == 4 and m["results"]["single"]["decodes"] == 1
    assert all(r["decodes"] <= 4 for r in m["results"].values())
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "gats.png"}
