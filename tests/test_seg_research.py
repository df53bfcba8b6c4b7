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
    docs, qs = build_kb(np.random.default_rng(1), 5, set())
    retr = Retriever(docs)
    assert len(qs) == 20 and {q.hops for q in qs} == {1, 2}
    for q in qs:
        last = retr.search(q.gold_steps[-1]).lower()
        assert q.answer[0] in last and q.answer[1] in last
        if q.hops == 2:
            club = q.gold_steps[1].split()[0]
            assert club in retr.search(q.gold_steps[0])


@pytest.mark.parametrize("argv, flag", [
    (["--group", "1"], "--group"),
    (["--arms", "ppo"], "--arms"),
    (["--max-turns", "9"], "--max-turns"),
    (["--lr", "0"], "--lr"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("seg-research", argv, flag, tmp_path / "out", capsys)


def test_cli_quick_run_writes_the_headline(tmp_path):
    out = tmp_path / "run"
    assert main(["seg-research", "--quick", "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    assert h["method"] == "hierarchical" and h["direction"] == "higher"
    assert set(h["baselines"]) == {"outcome", "stepwise", "no-search"}
    assert h["budget"]["training_rollouts_per_arm"] == 3 * 2 * 4
    assert m["results"]["no-search"]["all"]["searches"] == 0
    assert 0 <= h["value"] <= 1
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "jf_by_hops.png", "training.png"}


def test_cli_quick_keeps_the_flags_given(tmp_path, monkeypatch):
    import onchip.methods.seg_research.experiment as experiment

    seen = []
    monkeypatch.setattr(experiment, "run", seen.append)
    assert main(["seg-research", "--quick", "--seeds", "5", "--iters", "7", "--out", str(tmp_path / "o")]) == 0
    c = seen[0]
    assert c.seeds == (5,) and c.iters == 7  # given: kept
    assert c.train_clubs == 6 and c.group == 4  # not given: --quick's
    assert main(["seg-research", "--out", str(tmp_path / "o")]) == 0
    assert seen[1].seeds == (0, 1, 2) and seen[1].iters == 40  # no --quick: the defaults
