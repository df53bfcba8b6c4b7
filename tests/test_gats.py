"""Gecko/GATS: schema validity, state-consistent simulation, the checklist judge, targeted revision, the CLI."""

from __future__ import annotations


import jsonschema
import numpy as np
import pytest
import torch

from onchip.methods.gats.agent import locate, repair_request
from onchip.methods.gats.refine import judge_request, next_request, plant_error
from onchip.methods.gats.simulator import Feedback, Simulator, checklist
from onchip.methods.gats.tools import (KINDS, SCHEMAS, RealBackend, Task, calls_to_text, make_task, parse_calls,
                                      schema_errors)
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
    assert checklist(text) == [("call", "create_ticket"), ("call", "assign_ticket")]  # actions only, no literal
    assert checklist(text, judge="literal") == [("call", "create_ticket"), ("call", "assign_ticket"),
                                                ("value", "high"), ("value", "vpn"), ("value", "chen"), ("ref", None)]
    calls = [call("create_ticket", title="vpn", priority="high"), call("assign_ticket", ticket_id=901, user="chen")]
    score, missing = Simulator(judge="literal").judge(text, calls, [])
    assert missing == [("ref", None)] and score == pytest.approx(5 / 6)
    # the actions judge does not read values: a wrong id or user is left to the other feedback kinds
    wrong = [call("create_ticket", title="vpn", priority="low"), call("assign_ticket", ticket_id=33, user="bo")]
    assert Simulator().judge(text, wrong, []) == (1.0, [])
    score, missing = Simulator(judge="literal").judge("please ping bo about the vpn", [call("close_ticket", ticket_id=3)], [])
    assert missing == [("call", "send_message"), ("value", "bo"), ("value", "vpn"), ("unrequested", "close_ticket")]
    assert score == 0.0
    score, missing = Simulator().judge("please ping bo about the vpn", [call("close_ticket", ticket_id=3)], [])
    assert missing == [("call", "send_message"), ("unrequested", "close_ticket")] and score == 0.0
    with pytest.raises(ValueError, match="judge"):
        Simulator(judge="llm")


def test_state_error_tasks_name_two_ids_and_a_reused_closed_id_is_a_response_error():
    rng = np.random.default_rng(3)
    tasks = [make_task(rng, held_out=True) for _ in range(300)]
    assert {t.kind for t in tasks} == set(KINDS)
    t = next(t for t in tasks if t.kind == "close+priority")
    closed, other = t.gold[0][1]["ticket_id"], t.gold[1][1]["ticket_id"]
    assert closed != other and {closed, other} <= set(t.tickets)
    wrong = f"close_ticket ticket_id {closed} ; set_priority ticket_id {closed} priority {t.gold[1][1]['priority']}"
    fb = Simulator().simulate(t.text, wrong)
    assert fb.kind == "response" and fb.where == (1, "ticket_id") and "closed" in fb.message
    assert Simulator(feedback=("validity", "judge")).simulate(t.text, wrong).kind is None  # the judge cannot see it
    _, err = t.backend().execute(parse_calls(wrong)[0])
    assert err is not None and err.kind == "response"  # the real tools refuse it too
    req = next_request(t.text, wrong, fb, 1.0)
    assert req.first == [str(other)]  # the revision may only use the other named ticket


@pytest.mark.parametrize("kind", ["validity", "response", "judge"])
def test_a_planted_error_is_seen_by_its_feedback_kind_only(kind):
    """Each positive control plants an error that the full simulator reports as that kind, that the
    simulator without that kind passes as clean, and that makes the real task fail."""
    rng = np.random.default_rng(4)
    sim, blind = Simulator(), Simulator(feedback=tuple(k for k in ("validity", "response", "judge") if k != kind))
    seen = 0
    for _ in range(80):
        t = make_task(rng, held_out=True)
        planted = plant_error(t.text, calls_to_text(t.gold), kind, np.random.default_rng(seen))
        if planted is None:
            continue
        seen += 1
        assert sim.simulate(t.text, planted).kind == kind, (t.text, planted)
        assert blind.simulate(t.text, planted).kind is None, (t.text, planted)
        b = t.backend()
        calls, perr = parse_calls(planted)
        b.execute(calls)
        assert perr is None and b.state() != t.target_state(), (t.text, planted)
    assert seen >= 40
    with pytest.raises(ValueError, match="plant"):
        plant_error("x", "close_ticket ticket_id 3", "oracle", np.random.default_rng(0))


def test_gold_calls_pass_the_simulator_and_reach_the_target_state():
    rng = np.random.default_rng(0)
    sim = Simulator()
    literal = Simulator(judge="literal")
    for _ in range(60):
        t = make_task(rng, held_out=True)
        for s in (sim, literal):
            fb = s.simulate(t.text, calls_to_text(t.gold))
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
    (["--seeds", "3"], "--seeds"),
    (["--judge", "llm"], "--judge"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("gats", argv, flag, tmp_path / "out", capsys)


def test_a_control_kind_with_nothing_planted_is_reported_as_such_never_nan():
    from onchip.methods._report import positive_control
    from onchip.methods.gats.experiment import _control, controls_table

    nan = float("nan")
    nothing = {"gats": [nan, nan], "gats-no-judge": [nan, nan], "planted": [0, 0]}
    with pytest.raises(ValueError, match="finite"):  # what the control did before: NaN into the interval
        positive_control("s", "gats", "gats-no-judge", nothing["gats"], nothing["gats-no-judge"], seeds=[0, 1],
                         metric="m")
    pc = _control("judge", nothing, [0, 1])
    assert pc["paired"] is None and pc["sensitive"] is None and pc["method_values"] == []
    assert pc["planted_tasks_per_seed"] == [0, 0] and pc["not_planted_seeds"] == [0, 1]
    one = _control("judge", {"gats": [1.0, nan, 0.5], "gats-no-judge": [0.0, nan, 0.5], "planted": [2, 0, 1]},
                   [0, 1, 2])
    assert one["seeds"] == [0, 2] and one["not_planted_seeds"] == [1] and one["method_values"] == [1.0, 0.5]
    assert one["paired"]["per_seed"] == [1.0, 0.0] and one["sensitive"] is False
    table = controls_table({"positive_controls": {"judge": pc, "validity": one}})
    assert "nothing planted" in table and "not tested" in table and "nan" not in table.lower()


def test_quick_run_writes_headline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    m = quick_run("gats", out)
    h = m["headline"]
    assert h["method"] == "gats" and h["direction"] == "higher" and h["seeds"] == [0, 1]
    assert set(h["baselines"]) == {"single", "self-consistency", "real-refine", "gats-no-validity",
                                   "gats-no-response", "gats-no-judge"}
    assert set(h["paired"]) == set(h["baselines"])
    for a, pair in h["paired"].items():
        per_seed = [g["success"] - b["success"] for g, b in zip(m["per_seed"]["gats"], m["per_seed"][a])]
        assert pair["per_seed"] == pytest.approx(per_seed)
    assert all(0 <= v <= 1 for v in [h["value"], *h["baselines"].values()])
    assert m["results"]["self-consistency"]["decodes"] == 4 and m["results"]["single"]["decodes"] == 1
    assert all(r["decodes"] <= 4 for r in m["results"].values())
    pc = m["positive_control"]
    assert pc["method"] == "gats" and pc["ablation"] == "gats-no-response" and len(pc["paired"]["ci95"]) == 2
    assert set(m["positive_controls"]) == {"validity", "response", "judge"}
    for c in m["positive_controls"].values():  # a control is an interval or says nothing was planted
        assert (c["paired"] is None) == (len(c["seeds"]) < 2) and None not in c["method_values"]
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "gats.png"}
