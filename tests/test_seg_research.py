"""Seg-ReSearch (search-interleaved segmentation, hierarchical reward, GRPO): reward terms on hand
cases, GRPO advantages, J&F and the point+box mask on planted scenes, the knowledge base, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods._rl import group_advantages, grpo_loss
from onchip.methods.seg_research.reward import (Answer, outcome_reward, process_reward, stepwise_reward,
                                                text_similarity, total_reward)
from onchip.methods.seg_research.world import Retriever, build_kb, j_and_f, mask_from_prompt, render_scene
from method_support import assert_refused


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _square(r0, c0, r1, c1, size=20):
    m = np.zeros((size, size), bool)
    m[r0:r1 + 1, c0:c1 + 1] = True
    return m


def test_outcome_reward_terms_on_hand_cases():
    gt = _square(2, 2, 11, 11)  # 100 pixels, box (2, 2, 11, 11), point (6, 6)
    pred = _square(2, 2, 11, 6)  # 50 pixels inside: IoU 0.5, not > 0.5
    r = outcome_reward(Answer((2, 2, 11, 11), (6, 6)), pred, gt, (2, 2, 11, 11), (6, 6))
    assert r == {"iou": 0.0, "box": 1.0, "point": 1.0, "outcome": 2.0}
    # box L1 = mean(|0|, |0|, |4|, |4|) = 2 < 3; point outside the gold box
    r = outcome_reward(Answer((2, 2, 15, 15), (13, 13)), gt, gt, (2, 2, 11, 11), (6, 6))
    assert r == {"iou": 1.0, "box": 1.0, "point": 0.0, "outcome": 2.0}
    # box L1 = 4 >= 3; point inside but 9.9 px away > 8
    r = outcome_reward(Answer((6, 6, 15, 15), (11, 2)), gt, gt, (2, 2, 11, 11), (4, 9))
    assert r["box"] == 0.0 and r["point"] == 0.0
    assert outcome_reward(None, None, gt, (2, 2, 11, 11), (6, 6))["outcome"] == 0.0


def test_process_reward_guidance_and_bounded_incentive():
    gold = ["Kelmi founded", "Zorvan mascot"]
    assert text_similarity("Kelmi founded", "kelmi founded") == pytest.approx(1.0)
    assert text_similarity("Kelmi mascot", "Kelmi founded") == pytest.approx(0.5)  # not > 0.5
    r = process_reward(["Kelmi founded", "Zorvan mascot"], gold, True)
    assert r["igr"] == 1.0 and r["tpr"] == pytest.approx(1 - 0.3**3)
    assert r["process"] == pytest.approx(0.5 * (1 + 1 - 0.3**3))
    r = process_reward(["Kelmi mascot"], gold, False)
    assert r["igr"] == 0.0 and r["tpr"] == pytest.approx(0.7)
    assert process_reward([], gold, True)["tpr"] == pytest.approx(0.7)
    many = process_reward(["x"] * 30, gold, True)
    assert many["tpr"] == pytest.approx(1 - 0.3**11) and many["tpr"] < 1  # capped at 10 searches, bounded by 1
    assert stepwise_reward(["Kelmi founded", "Zorvan emblem"], gold) == 0.5
    assert stepwise_reward(["Kelmi founded"], gold) == 0.0
    out = {"outcome": 3.0}
    assert total_reward("outcome", out, [], gold, True) == 3.0
    assert total_reward("hierarchical", out, [], gold, True) == pytest.approx(3.0 + 0.5 * 0.7)
    with pytest.raises(ValueError, match="kind"):
        total_reward("dense", out, [], gold, True)
    # a valid route that is not the annotated one: the rigid reward gives it half, stepwise-any all
    routes = [gold, ["Kelmi leads", "Kelvan mascot"]]
    other = routes[1]
    assert total_reward("stepwise", out, other, gold, True) == 3.0
    assert total_reward("stepwise-any", out, other, gold, True, routes=routes) == 4.0
    with pytest.raises(ValueError, match="routes"):
        total_reward("stepwise-any", out, other, gold, True)


def test_group_advantages_are_normalised_within_groups():
    adv = group_advantages([[1.0, 0.0, 0.0, 1.0], [3.0, 3.0, 3.0, 3.0], [0.0, 1.0, 2.0, 3.0]])
    np.testing.assert_allclose(adv[0], [1, -1, -1, 1], atol=1e-5)
    np.testing.assert_allclose(adv[1], 0.0)
    np.testing.assert_allclose(adv[2], (np.arange(4) - 1.5) / np.sqrt(1.25), atol=1e-5)
    np.testing.assert_allclose(adv.mean(1), 0.0, atol=1e-9)
    with pytest.raises(ValueError, match="rewards"):
        group_advantages([1.0, 2.0])
    # on-policy (ratio 1) the loss is -mean(A); a ratio beyond the clip stops the gradient of a positive A
    logp = torch.zeros(2, requires_grad=True)
    loss = grpo_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]))
    assert float(loss.detach()) == pytest.approx(0.0)
    new = torch.tensor([0.5], requires_grad=True)
    grpo_loss(new, torch.tensor([0.0]), torch.tensor([1.0]), clip=0.2).backward()
    assert float(new.grad) == 0.0


def test_j_and_f_on_planted_masks():
    gt = _square(2, 2, 11, 11)
    assert j_and_f(gt, gt) == (1.0, 1.0)
    j, f = j_and_f(_square(2, 2, 11, 6), gt)
    assert j == pytest.approx(0.5)
    assert 0 < f < 1
    assert j_and_f(np.zeros_like(gt), gt) == (0.0, 0.0)
    j, f = j_and_f(_square(3, 3, 12, 12), gt)  # a one-pixel shift: boundaries within tol = 1
    assert j == pytest.approx(81 / 119) and f == pytest.approx(1.0)


def test_mask_from_point_is_clipped_to_the_box():
    colour = np.zeros((10, 10), int)
    colour[2:5, 2:8] = 1  # two same-coloured objects touching: one component
    m = mask_from_prompt(colour, (3, 3), (2, 2, 4, 4))
    assert m.sum() == 9 and m[2:5, 2:5].all()
    assert mask_from_prompt(colour, (0, 0), (0, 0, 9, 9)).sum() == 0  # background point: empty
    scene, k = render_scene(np.random.default_rng(0), ("red", "circle"))
    assert scene.objects[k] == ("red", "circle")
    pred = mask_from_prompt(scene.colour, scene.point(k), scene.box(k))
    assert pred[scene.mask(k)].all()  # the gold object is inside its own prompt's mask


def test_knowledge_base_questions_are_answered_by_their_gold_steps():
    docs, qs = build_kb(np.random.default_rng(1), 5, set(), aliases=False)
    retr = Retriever(docs)
    assert len(qs) == 20 and {q.hops for q in qs} == {1, 2}
    for q in qs:
        assert q.routes == [q.gold_steps]  # without aliases: one route, the annotated one
        last = retr.search(q.gold_steps[-1]).lower()
        assert q.answer[0] in last and q.answer[1] in last
        if q.hops == 2:
            club = q.gold_steps[1].split()[0]
            assert club in retr.search(q.gold_steps[0])


def test_every_valid_route_finds_the_fact_and_the_annotated_one_is_one_of_them():
    """With aliases a 1-hop question has 2 routes (either club name), a 2-hop one 4 (either relation word
    for the person, either club name); each retrieves the answer through BM25 beside 55 clubs' documents;
    the step-wise reward gives a valid route that is not the annotated one less than 1."""
    taken: set = set()
    docs, qs = build_kb(np.random.default_rng(3), 40, taken)
    docs2, qs2 = build_kb(np.random.default_rng(4), 15, taken)
    retr = Retriever(docs + docs2)
    penalised = 0
    for q in qs + qs2:
        assert len(q.routes) == (2 if q.hops == 1 else 4) and q.gold_steps in q.routes
        assert len({tuple(r) for r in q.routes}) == len(q.routes)
        for route in q.routes:
            last = retr.search(route[-1]).lower()
            assert q.answer[0] in last and q.answer[1] in last, (q.text, route, last)
            if q.hops == 2:
                assert route[1].split()[0] in retr.search(route[0])
            if route != q.gold_steps:
                penalised += 1
                assert stepwise_reward(route, q.gold_steps) < 1.0
    assert penalised == sum(len(q.routes) - 1 for q in qs + qs2) > 0
    # the annotator's pick is spread over the routes: both club names occur as the gold 1-hop step
    names_in_question = [q.text.split()[-2] == q.gold_steps[0].split()[0] for q in qs if q.hops == 1]
    assert 0 < sum(names_in_question) < len(names_in_question)


@pytest.mark.parametrize("argv, flag", [
    (["--group", "1"], "--group"),
    (["--arms", "ppo"], "--arms"),
    (["--max-turns", "9"], "--max-turns"),
    (["--lr", "0"], "--lr"),
    (["--seeds", "3"], "--seeds"),  # the paired comparisons need two seeds
    (["--objects", "9"], "--objects"),
    (["--eval-every", "0"], "--eval-every"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("seg-research", argv, flag, tmp_path / "out", capsys)


def test_cli_quick_run_writes_the_headline(tmp_path):
    """The --quick run (seeds 0, 1): every baseline of the headline has its paired difference with ci95,
    computed from the per-seed values; the learning-curve area and the positive control are present."""
    from onchip.methods._report import HEADLINE_KEYS, HEADLINE_PAIRED, excludes_zero

    out = tmp_path / "run"
    assert main(["seg-research", "--quick", "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert tuple(h) == (*HEADLINE_KEYS, HEADLINE_PAIRED)
    assert h["method"] == "hierarchical" and h["direction"] == "higher" and h["seeds"] == [0, 1]
    assert set(h["baselines"]) == {"outcome", "stepwise", "no-search"} == set(h["paired"])
    assert h["budget"]["training_rollouts_per_arm"] == 3 * 2 * 4
    per = m["per_seed"]
    for name, p in h["paired"].items():
        lo, hi = p["ci95"]
        assert p["n"] == 2 and lo <= p["difference"] <= hi
        assert p["per_seed"] == pytest.approx([per[s]["hierarchical"]["all"]["jf"] - per[s][name]["all"]["jf"]
                                               for s in ("0", "1")])
        assert "ci95" in m["area"]["paired"][name]
    assert h["value"] == pytest.approx(np.mean([per[s]["hierarchical"]["all"]["jf"] for s in ("0", "1")]))
    for s in ("0", "1"):
        for arm in h["baselines"]:
            assert len(per[s][arm]["curve"]) == 3 and per[s][arm]["area"] == pytest.approx(np.mean(per[s][arm]["curve"]))
            assert per[s][arm]["curve"][-1] == pytest.approx(per[s][arm]["all"]["jf"])  # last checkpoint = end
    assert m["results"]["no-search"]["all"]["searches"] == 0 and m["results"]["no-search"]["all"]["found"] == 0
    assert 0 <= h["value"] <= 1
    pc = m["positive_control"]
    assert set(pc) >= {"setting", "metric", "method", "ablation", "seeds", "method_values", "ablation_values",
                       "paired", "sensitive", "end_jf", "end_jf_paired"}
    assert pc["method"] == "hierarchical" and pc["ablation"].startswith("outcome") and pc["seeds"] == [0, 1]
    assert len(pc["paired"]["ci95"]) == 2 and pc["sensitive"] == excludes_zero(pc["paired"])
    assert pc["method_values"] == [m["control_per_seed"][s]["hierarchical"]["area"] for s in ("0", "1")]
    assert pc["end_jf"]["outcome"] == [m["control_per_seed"][s]["outcome"]["all"]["jf"] for s in ("0", "1")]
    assert "ci95" in m["rigidity"]["stepwise_minus_any"]
    assert set(m["control_per_seed"]["0"]["hierarchical"]) == {"1", "all", "curve", "area"}  # 1-hop questions only
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "jf_by_hops.png", "curves.png",
                                               "training.png"}


def test_cli_quick_keeps_the_flags_given(tmp_path, monkeypatch):
    import onchip.methods.seg_research.experiment as experiment

    seen = []
    monkeypatch.setattr(experiment, "run", seen.append)
    assert main(["seg-research", "--quick", "--seeds", "5,6", "--iters", "7", "--out", str(tmp_path / "o")]) == 0
    c = seen[0]
    assert c.seeds == (5, 6) and c.iters == 7  # given: kept
    assert c.train_clubs == 6 and c.group == 4  # not given: --quick's
    assert main(["seg-research", "--out", str(tmp_path / "o")]) == 0
    assert seen[1].seeds == tuple(range(5)) and seen[1].iters == 40  # no --quick: the defaults
    assert seen[1].aliases and seen[1].control and seen[1].eval_every == 10
