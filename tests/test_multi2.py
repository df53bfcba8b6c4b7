"""Multi^2 (hierarchical agents, IQL) on the grid world: the IQL pieces against hand-solved cases, the
world's drift semantics, drift counting, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from onchip.cli import main
from onchip.methods._rl import IQL, IQLConfig, expectile, expectile_loss
from onchip.methods.multi2.agents import mission_features, parse_subgoal
from onchip.methods.multi2.env import KINDS, TOUCH, Episode, drift_rate, new_episode
from method_support import assert_refused


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_expectile_loss_matches_hand_computation():
    # u = (2, -1), tau = 0.7: (0.7 * 4 + 0.3 * 1) / 2 = 1.55
    assert float(expectile_loss(torch.tensor([2.0, -1.0]), 0.7)) == pytest.approx(1.55)
    # tau = 0.5 is half the squared error
    u = torch.tensor([0.5, -3.0, 1.0])
    assert float(expectile_loss(u, 0.5)) == pytest.approx(0.5 * float((u**2).mean()))
    with pytest.raises(ValueError, match="tau"):
        expectile_loss(u, 1.0)


def test_expectile_of_two_values_is_tau():
    # values {0, 1} equally likely: tau (1 - m) = (1 - tau) m  ->  m = tau
    for tau in (0.5, 0.7, 0.9):
        assert expectile([0.0, 1.0], tau) == pytest.approx(tau, abs=1e-9)
    assert expectile([1.0, 2.0, 6.0], 0.5) == pytest.approx(3.0, abs=1e-9)  # the mean


def test_iql_values_on_a_two_step_mdp_with_known_answer():
    """s0 --a--> s1 (r = 0) for a in {0, 1}; s1 --a--> end with r = a (a in {0, 1}), data uniform over
    actions. Known fixed point: Q(s1, a) = a, V(s1) = tau-expectile of {0, 1} = tau,
    Q(s0, a) = gamma * tau, V(s0) = gamma * tau."""
    torch.manual_seed(0)
    tau, gamma = 0.8, 0.9
    table = lambda n_out: torch.nn.Linear(2, n_out, bias=False)  # noqa: E731  one-hot states: a table
    actor = table(2)
    iql = IQL(table(2), table(1), actor, IQLConfig(gamma=gamma, tau=tau, lr=0.05, target_rate=0.5, beta=3.0))
    e0, e1 = [1.0, 0.0], [0.0, 1.0]
    s = torch.tensor([e0, e0, e1, e1])
    a = torch.tensor([0, 1, 0, 1])
    r = torch.tensor([0.0, 0.0, 0.0, 1.0])
    s2 = torch.tensor([e1, e1, e1, e1])
    done = torch.tensor([0.0, 0.0, 1.0, 1.0])
    for _ in range(600):
        iql.update(s, a, r, s2, done)
    with torch.no_grad():
        v = iql.v(torch.tensor([e0, e1])).squeeze(-1)
        q = iql.q(torch.tensor([e0, e1]))
        pi = torch.softmax(actor(torch.tensor([e1])), -1)[0]
    np.testing.assert_allclose(v.numpy(), [gamma * tau, tau], atol=0.02)
    np.testing.assert_allclose(q.numpy(), [[gamma * tau] * 2, [0.0, 1.0]], atol=0.02)
    assert float(pi[1]) > 0.9  # advantage-weighted actor prefers the rewarded action


def _episode(mission, objects):
    return Episode(size=5, agent=(0, 0), objects=dict(objects), mission=list(mission), text="", limit=50)


def test_world_completes_in_order_and_fails_on_drift():
    red_ball, blue_key, green_box = KINDS.index("red ball"), KINDS.index("blue key"), KINDS.index("green box")
    ep = _episode([red_ball, blue_key], {red_ball: (0, 1), blue_key: (0, 2), green_box: (1, 0)})
    assert ep.step(1) == 0 and ep.agent == (1, 0)
    ep.step(TOUCH)  # a distractor: nothing happens
    assert not ep.done and ep.completed == []
    ep.step(0), ep.step(3)
    assert ep.step(TOUCH) == 1.0 and ep.progress == 1 and not ep.done
    ep.step(TOUCH)  # an already completed object: nothing
    ep.step(3)
    assert ep.step(TOUCH) == 1.0 and ep.success and ep.done and not ep.drift
    # touching the second object first is objective drift and ends the episode
    ep = _episode([red_ball, blue_key], {red_ball: (0, 1), blue_key: (0, 0)})
    ep.step(TOUCH)
    assert ep.drift and ep.done and not ep.success and ep.completed == [(1, 1)]
    with pytest.raises(ValueError, match="ended"):
        ep.step(0)


def test_drift_rate_counts_failed_episodes_out_of_order():
    episodes = [(False, [0, 2]), (False, [0]), (True, [0, 1]), (False, [1]), (False, [])]
    assert drift_rate(episodes) == pytest.approx(2 / 4)
    assert np.isnan(drift_rate([(True, [0])]))


def test_mission_text_round_trips_through_the_features():
    ep = new_episode(np.random.default_rng(3), 3)
    feats = mission_features(ep.text, 4).reshape(4, 7)
    for slot, kind in enumerate(ep.mission):
        colour, typ = KINDS[kind].split()
        assert parse_subgoal(f"touch {colour} {typ}") == kind
        assert feats[slot].sum() == 2
    assert feats[3].sum() == 0
    assert parse_subgoal("stop") is None and parse_subgoal("touch red") is None


@pytest.mark.parametrize("argv, flag", [
    (["--horizons", "0,2"], "--horizons"),
    (["--arms", "multi2,ppo"], "--arms"),
    (["--demos", "2"], "--demos"),
    (["--grid", "30"], "--grid"),
    (["--seeds", "-1"], "--seeds"),
    (["--horizons", "1,7"], "--horizons"),
    (["--slip", "1.0"], "--slip"),
    (["--p-early", "1.5"], "--p-early"),
])
def test_cli_refuses_bad_arguments(tmp_path, capsys, argv, flag):
    assert_refused("multi2", argv, flag, tmp_path / "out", capsys)


def test_cli_quick_run_writes_the_headline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["multi2", "--quick", "--quiet", "--jobs", "1", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    h = m["headline"]
    arms = {"hier-offline", "hier-bc", "flat-iql", "flat-bc"}
    assert h["method"] == "multi2" and h["direction"] == "higher" and h["seeds"] == [0, 1]
    assert set(h["baselines"]) == arms and set(h["paired"]) == arms
    assert 0 <= h["value"] <= 1
    for arm, pair in h["paired"].items():
        per = [m["per_seed"][s]["multi2"]["2"]["success"] - m["per_seed"][s][arm]["2"]["success"] for s in ("0", "1")]
        assert pair["per_seed"] == pytest.approx(per) and pair["ci95"][0] <= pair["difference"] <= pair["ci95"][1]
    pc = m["positive_control"]
    assert (pc["method"], pc["ablation"], pc["seeds"]) == ("hier-offline", "hier-bc", [0, 1])
    assert pc["method_values"] == [m["per_seed"][s]["hier-offline"]["2"]["success_true_subgoals"] for s in "01"]
    assert len(pc["paired"]["ci95"]) == 2 and isinstance(pc["sensitive"], bool)
    # the same environment steps for every arm, on every seed
    for s, arms_budget in h["budget"]["per_seed"].items():
        assert set(arms_budget) == arms | {"multi2"}
        assert len({b["env_steps"] for b in arms_budget.values()}) == 1, s
    assert set(m["paired_drift_share"]["flat-bc"]) == {"1", "2"}
    for arm in ("multi2", "flat-bc"):
        for hz in ("1", "2"):
            assert 0 <= m["results"][arm][hz]["success"] <= 1
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "results.md", "success.png", "drift.png"}


def test_cli_quick_keeps_the_flags_given(tmp_path, monkeypatch):
    import onchip.methods.multi2.experiment as experiment

    seen = []
    monkeypatch.setattr(experiment, "run", seen.append)
    assert main(["multi2", "--quick", "--seeds", "5,6", "--demos", "44", "--out", str(tmp_path / "o")]) == 0
    c = seen[0]
    assert c.seeds == (5, 6) and c.demos == 44  # given: kept
    assert c.bc_steps == 40 and c.horizons == (1, 2)  # not given: --quick's
    assert main(["multi2", "--out", str(tmp_path / "o")]) == 0
    assert seen[1].seeds == (0, 1, 2) and seen[1].bc_steps == 3000  # no --quick: the defaults


def _expert_low_level(x):
    """Joint-action logits of a perfect low level, read off its own input: walk to the sub-goal's
    object (kind from the tokenised sub-goal, offset from the observation), touch it and declare done."""
    from onchip.methods.multi2.agents import N_JOINT
    from onchip.methods.multi2.env import COLOURS, N_ACTIONS

    n_obs = 4 * len(KINDS)
    logits = torch.zeros(len(x), N_JOINT)
    for row, s in enumerate(x):
        colour = int(s[n_obs:n_obs + len(COLOURS)].argmax())
        kind = colour * 3 + int(s[n_obs + len(COLOURS):].argmax())
        _, dr, dc, on = s[:n_obs].view(len(KINDS), 4)[kind].tolist()
        joint = (TOUCH + N_ACTIONS if on else 0 if dr < 0 else 1 if dr > 0 else 2 if dc < 0 else 3)
        logits[row, joint] = 1.0
    return logits


def test_true_subgoals_with_a_perfect_low_level_always_succeed():
    from onchip.methods.multi2.agents import run_hierarchical

    g = np.random.default_rng(4)
    eps = [new_episode(g, 3) for _ in range(8)]
    run_hierarchical(None, None, _expert_low_level, eps, true_subgoals=True)
    assert all(e.success and not e.drift and e.progress == 3 for e in eps)
    assert all([i for _, i in e.completed] == [0, 1, 2] for e in eps)


def test_moves_slip_and_far_objects_show_only_their_direction():
    from onchip.methods.multi2.env import ego_observation

    red_ball = KINDS.index("red ball")
    # slip 0.5: some of 200 "down" moves from the top row go elsewhere; no slip: every one goes down
    moved = []
    for slip in (0.0, 0.5):
        ep = Episode(size=7, agent=(0, 3), objects={red_ball: (6, 6)}, mission=[red_ball], text="", limit=10**4,
                     slip=slip, noise=np.random.default_rng(0))
        rows = []
        for _ in range(200):
            ep.agent = (0, 3)
            ep.step(1)
            rows.append(ep.agent)
        moved.append(sum(a != (1, 3) for a in rows))
    assert moved[0] == 0 and 50 < moved[1] < 150  # ~3/4 of the slips go elsewhere: ~75
    ep = Episode(size=7, agent=(0, 0), objects={red_ball: (6, 1)}, mission=[red_ball], text="", limit=10, view=2)
    obs = ego_observation(ep).reshape(len(KINDS), 4)[red_ball]
    assert obs[1] == pytest.approx(3 / 7) and obs[2] == pytest.approx(1 / 7)  # 6 rows away: censored to 3
    ep.agent = (4, 0)
    assert ego_observation(ep).reshape(len(KINDS), 4)[red_ball][1] == pytest.approx(2 / 7)  # in view: exact
    with pytest.raises(ValueError, match="slip"):
        new_episode(np.random.default_rng(0), 2, slip=1.0)


def test_noisy_demonstrator_declares_done_one_move_early():
    from onchip.methods.multi2.agents import N_ACTIONS, collect_demos

    g = np.random.default_rng(5)
    eps = [new_episode(g, 2) for _ in range(10)]
    d = collect_demos(eps, np.random.default_rng(0), noisy=np.ones(10, bool), max_horizon=2, eps=0.0, p_wrong=0.0,
                      p_early=1.0)
    low = d["low"]
    declared = low["a"] >= N_ACTIONS
    # always early: every declaration comes with a move (never with the touch), none is rewarded
    assert declared.sum() >= 10 and np.all(low["a"][declared] % N_ACTIONS != TOUCH) and low["r"].sum() == 0
    assert not any(e.success for e in eps)
    # the high-level examples are every mission's sub-goal stack, ending in "stop"
    assert len(d["high"]) == sum(len(e.mission) + 1 for e in eps) and d["high"][2][2] == "stop"
    # never early: the same episodes succeed with one rewarded declaration per sub-goal
    g = np.random.default_rng(5)
    eps = [new_episode(g, 2) for _ in range(10)]
    d = collect_demos(eps, np.random.default_rng(0), noisy=np.ones(10, bool), max_horizon=2, eps=0.0, p_wrong=0.0,
                      p_early=0.0)
    assert all(e.success for e in eps) and d["low"]["r"].sum() == 20
    with pytest.raises(ValueError, match="p_early"):
        collect_demos([], np.random.default_rng(0), noisy=np.ones(0, bool), max_horizon=2, p_early=2.0)
