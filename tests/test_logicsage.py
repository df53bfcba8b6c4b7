"""LogicSAGE: z3 execution of hand-written programs, located feedback, unsat-core localisation, repairs, CLI."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from onchip.methods.logicsage.loop import candidate_repairs
from onchip.methods.logicsage.problems import DEPTHS, make_problem, unique_orders
from onchip.methods.logicsage.solver import execute
from method_support import assert_refused, quick_run


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


CHAIN = ["ent max sam", "pred wumpus yumpus bright", "all wumpus yumpus", "all yumpus not bright", "is max wumpus"]


@pytest.mark.parametrize("question, answer", [
    ("ask max yumpus", "True"),    # depth 1
    ("ask max bright", "False"),   # depth 2 through a negated rule
    ("ask sam bright", "Unknown"),  # nothing is said about sam
    ("ask max wumpus", "True"),    # a fact
])
def test_z3_answers_hand_written_rule_programs(question, answer):
    ex = execute(CHAIN + [question])
    assert ex.status == "ok" and ex.answer == answer


def test_z3_answers_an_ordering_puzzle_and_names_the_supporting_lines():
    prog = ["obj red blue green", "left red blue", "last green", "askpos blue 2"]
    ex = execute(prog)
    assert ex.answer == "True" and ex.lines == [1, 2]  # both constraints are needed to place blue
    assert execute(prog[:-1] + ["askpos red 3"]).answer == "False"
    assert execute(prog[:2] + ["askpos green 3"]).answer == "Unknown"


def test_unsat_core_localises_a_planted_contradiction():
    prog = ["ent max sam", "pred wumpus yumpus bright loud", "all loud bright", "all wumpus yumpus",
            "is sam loud", "all yumpus not bright", "is max wumpus", "is max bright", "ask max loud"]
    ex = execute(prog)
    assert ex.status == "unsat" and ex.lines == [3, 5, 6, 7]  # not the sam/loud lines
    cands = candidate_repairs(["s"] * len(prog), prog, ex, neural=None)
    assert (7, "is max not bright") in cands and (5, "all yumpus bright") in cands
    assert all(i in ex.lines for i, _ in cands)


@pytest.mark.parametrize("line, status, symbol", [
    ("all wumpus", "syntax", None),
    ("is max not", "syntax", None),
    ("all wumpus zumpus", "undeclared", "zumpus"),
    ("is wumpus max", "sort", "wumpus"),
    ("all max yumpus", "sort", "max"),
])
def test_static_feedback_is_located(line, status, symbol):
    prog = CHAIN[:2] + [line] + CHAIN[2:] + ["ask max bright"]
    ex = execute(prog)
    assert (ex.status, ex.lines, ex.symbol) == (status, [2], symbol)
    assert not ex.executable


def test_undeclared_symbol_question_offers_the_declaration_fix():
    sentences = ["the things are max", "the properties are wumpus zumpus", "every wumpus is a zumpus", "max is a wumpus",
                 "is max a zumpus ?"]
    prog = ["ent max", "pred wumpus", "all wumpus zumpus", "is max wumpus", "ask max zumpus"]
    ex = execute(prog)
    cands = candidate_repairs(sentences, prog, ex, None)
    assert (1, "pred wumpus zumpus") in cands
    fixed = list(prog)
    fixed[1] = "pred wumpus zumpus"
    assert execute(fixed).answer == "True"


def test_generated_gold_programs_execute_to_the_gold_answer():
    rng = np.random.default_rng(3)
    for ds, depths in DEPTHS.items():
        for d in depths:
            for _ in range(3):
                p = make_problem(rng, ds, d, held_out=True)
                assert len(p.sentences) == len(p.program)
                assert execute(list(p.program)).answer == p.answer, p


def test_ordering_puzzles_have_one_solution():
    rng = np.random.default_rng(4)
    for n in (3, 4, 5):
        p = make_problem(rng, "deduction", n, held_out=False)
        objs = p.program[0].split()[1:]
        cons = []
        for line in p.program[1:-1]:
            t = line.split()
            cons.append((t[0], objs.index(t[1]), int(t[2]) if t[0] == "pos" else objs.index(t[2]))
                        if t[0] != "last" else ("last", objs.index(t[1])))
        assert len(unique_orders(n, cons)) == 1


def test_make_problem_refuses_unknown_depth():
    with pytest.raises(ValueError, match="dataset/depth"):
        make_problem(np.random.default_rng(0), "deduction", 9, held_out=False)


@pytest.mark.parametrize("argv, flag", [
    (["--budget", "0"], "--budget"),
    (["--datasets", "folio"], "--datasets"),
    (["--p-held", "1.5"], "--p-held"),
    (["--seeds", "2,2"], "--seeds"),
    (["--scan", "0"], "--scan"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("logicsage", argv, flag, tmp_path / "out", capsys)


def test_quick_run_writes_headline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    m = quick_run("logicsage", out)
    h = m["headline"]
    assert h["method"] == "logicsage" and h["direction"] == "higher" and h["seeds"] == [0, 1]
    assert set(h["baselines"]) == {"neural-only", "translate-once", "resample"} == set(h["paired"])
    assert all(len(p["ci95"]) == 2 and p["n"] == 2 for p in h["paired"].values())
    assert m["results"]["neural-only"]["calls"] == 0 and m["results"]["translate-once"]["calls"] == 1
    assert all(r["calls"] <= 4 for r in m["results"].values())
    # translator passes are counted: none for the neural answer, the decoding for translate-once, and the
    # repairing arms within the first translation + 3 rounds of the per-round budget
    f = {a: r["forwards"] for a, r in m["results"].items()}
    assert f["neural-only"] == 0 < f["translate-once"] <= f["logicsage"]
    assert f["resample"] <= f["translate-once"] + 3 * (256 + 20 * 13)
    assert len(m["results"]["logicsage"]["accuracy_by_cell"]) == 13
    pc = m["positive_control"]
    assert (pc["method"], pc["ablation"]) == ("logicsage", "resample") and "ci95" in pc["paired"]
    assert set(m["versus_neural"]["logicsage"]) == {"prontoqa", "proofwriter", "deduction"}
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "logicsage.png"}


def test_planted_error_is_one_line_and_repaired_by_the_targeted_question():
    """A gold program with one planted error differs from it in exactly one line; for a dropped negation
    the disagreement question's candidates include the gold line."""
    from onchip.methods.logicsage.loop import plant_error

    rng = np.random.default_rng(0)
    for k in range(20):
        p = make_problem(rng, ("prontoqa", "proofwriter", "deduction")[k % 3], 3, held_out=False)
        bad = plant_error(p.program, np.random.default_rng(k))
        assert sum(a != b for a, b in zip(bad, p.program)) == 1 and len(bad) == len(p.program)
    gold = CHAIN + ["ask max bright"]
    bad = list(gold)
    bad[3] = "all yumpus bright"  # negation dropped: the program now answers True
    ex = execute(bad)
    assert ex.status == "ok" and ex.answer == "True"
    cands = candidate_repairs(["the things are max sam", "", "", "every yumpus is not a bright", "", ""], bad, ex,
                              "False")
    assert (3, "all yumpus not bright") in cands
    with pytest.raises(ValueError, match="program"):
        plant_error(("ask max bright",), rng)
