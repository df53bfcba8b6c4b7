"""Acrobot swing-up learned through the error-input interface: dynamics equal to gymnasium's, the
TD error the host sends, the frozen policy, the RTL replay and the refusals of ``onchip run``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from method_support import assert_refused
from onchip.backends import available_backends
from onchip.control import recovery_episodes, replay
from onchip.model import SampleKind
from onchip.qlearning import LearnerPort, QConfig, choose, run_episode
from onchip.tasks.acrobot import (
    SPECS, Acrobot, AcrobotParams, features, is_terminal, load_acrobot_drift, run_episodes, step_state,
)
from onchip.tasks.drift import DriftError


@pytest.mark.parametrize("params", [{}, {"link_mass_2": 1.5, "link_com_pos_2": 0.75, "link_length_1": 1.3,
                                         "link_mass_1": 0.7, "link_com_pos_1": 0.4}])
def test_dynamics_equal_gymnasium(params):
    gym = pytest.importorskip("gymnasium.envs.classic_control.acrobot")
    env = gym.AcrobotEnv()
    names = {"link_length_1": "LINK_LENGTH_1", "link_mass_1": "LINK_MASS_1", "link_mass_2": "LINK_MASS_2",
             "link_com_pos_1": "LINK_COM_POS_1", "link_com_pos_2": "LINK_COM_POS_2"}
    for name, value in params.items():
        setattr(env, names[name], value)
    p = AcrobotParams().changed(**params)
    rng = np.random.default_rng(1)
    for _ in range(300):
        s = np.array([rng.uniform(-math.pi, math.pi), rng.uniform(-math.pi, math.pi),
                      rng.uniform(-14, 14), rng.uniform(-30, 30)])  # beyond the velocity bounds too
        a = int(rng.integers(3))
        env.state = s.copy()
        obs, reward, terminated, _, _ = env.step(a)
        mine = step_state(p, s, a)
        np.testing.assert_allclose(mine, env.state, rtol=0, atol=1e-12)
        assert is_terminal(mine) == terminated
        assert (0.0 if is_terminal(mine) else -1.0) == reward
        np.testing.assert_allclose(features(mine)[:4], obs[:4], atol=1e-6)  # gymnasium's obs is float32


def test_product_does_not_import_gymnasium():
    import subprocess
    import sys

    code = ("import sys, onchip.tasks.acrobot, onchip.control; "
            "sys.exit(1 if any(m.split('.')[0] == 'gymnasium' for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


class Corridor:
    """A three-step environment: reward -1, -1, then the goal (reward 0, terminal); the state is the step."""

    def __init__(self):
        self.t = 0

    def reset(self):
        self.t = 0
        return np.array([0.0])

    def step(self, action):
        self.t += 1
        return np.array([float(self.t)]), (0.0 if self.t == 3 else -1.0), self.t == 3


def _featurize(state):
    # 6 inputs, a different pattern per step
    return np.linspace(-0.9, 0.9, 6) * (1.0 - 0.4 * state[0])


def test_first_td_error_from_zero_parameters():
    # every Q value starts at 0 (init_scale 0): the first error is 2 * (0 - (-1 * 0.25 + 0.5 * 0))
    # = 0.5 on the greedy action (0, the first maximum), 0.5 * 2^12 raw in ap_fixed<16,4>
    spec = SPECS["kan-acrobot"]
    port = LearnerPort(spec, record=True)
    run_episode(Corridor(), _featurize, port, QConfig(gamma=0.5, reward_scale=0.25, error_scale=2.0), 0.0,
                np.random.default_rng(0))
    _, y, kind, _ = port.recorded()
    assert kind[2] == SampleKind.ERROR and y[2].tolist() == [2048, 0, 0]


@pytest.mark.parametrize("backend", ["golden", "float"])
def test_td_error_sent_equals_hand_computation(backend):
    """Every ERROR sample carries 2 * (Q(s, a) - target) on the taken action only, Q the chip's own
    predictions, target -0.25 + 0.5 max Q(s') or 0 at the goal (all exact on the 2^-12 grid)."""
    if backend == "float" and "float" not in available_backends():
        pytest.skip("no torch")
    spec = SPECS["kan-acrobot"]
    theta = spec.formats.coef.quantize(np.random.default_rng(5).uniform(-0.5, 0.5, len(LearnerPort(spec).theta)))
    if backend == "float":
        theta = spec.formats.coef.dequantize(theta)
    cfg = QConfig(gamma=0.5, reward_scale=0.25, error_scale=2.0)
    port = LearnerPort(spec, backend, theta=theta, record=True)
    steps, ret, done = run_episode(Corridor(), _featurize, port, cfg, 0.0, np.random.default_rng(0))
    assert (steps, ret, done) == (3, -2.0, True)
    x, y, kind, preds = port.recorded()
    P, E = SampleKind.PREDICT, SampleKind.ERROR
    assert kind.tolist() == [P, P, E, P, E, P, E]  # s0, s1, s0, s2, s1, s3, s2
    to_float = spec.formats.act.dequantize if backend == "golden" else np.asarray
    q = {0: to_float(preds[0]), 1: to_float(preds[1]), 2: to_float(preds[3]), 3: to_float(preds[5])}
    for step, row in ((0, 2), (1, 4), (2, 6)):
        a = int(np.argmax(q[step]))  # epsilon 0: the first maximum
        target = 0.0 if step == 2 else -0.25 + 0.5 * float(np.max(q[step + 1]))
        want = np.zeros(3)
        want[a] = 2.0 * (float(q[step][a]) - target)
        if backend == "golden":
            want = want * 2.0**spec.formats.grad.frac_bits
        np.testing.assert_array_equal(y[row], want)
        np.testing.assert_array_equal(x[row], x[{0: 0, 1: 1, 2: 3}[step]])  # the state s, sent again
        assert want[a] != 0


def test_td_error_saturates_in_grad_format():
    spec = SPECS["kan-acrobot"]
    cfg = QConfig(reward_scale=1.0, error_scale=1000.0)
    port = LearnerPort(spec, record=True)
    run_episode(Corridor(), _featurize, port, cfg, 0.0, np.random.default_rng(0))
    _, y, kind, _ = port.recorded()
    assert y[2].tolist() == [spec.formats.grad.max_raw, 0, 0]  # 1000 * 1.0 clipped


def test_q_learning_and_sarsa_targets():
    from onchip.qlearning import td_error

    q_next = np.array([-1.0, -0.5, -2.0])
    assert td_error(QConfig(gamma=0.5, reward_scale=0.25), -1.0, -1.0, q_next, 2) == -1.0 - (-0.25 + 0.5 * -0.5)
    assert td_error(QConfig(gamma=0.5, reward_scale=0.25, algorithm="sarsa"), -1.0, -1.0, q_next, 2) \
        == -1.0 - (-0.25 + 0.5 * -2.0)
    assert td_error(QConfig(gamma=0.5, reward_scale=0.25), -1.0, 0.0, None, 0) == -1.0


def test_frozen_policy_does_not_change_parameters():
    spec = SPECS["kan-acrobot"]
    rng = np.random.default_rng(3)
    theta = spec.formats.coef.quantize(rng.uniform(-0.5, 0.5, len(LearnerPort(spec).theta)))
    port = LearnerPort(spec, theta=theta, record=True)
    steps, _, _ = run_episode(Acrobot(0), features, port, QConfig(), 0.2, rng, learn=False, max_steps=40)
    np.testing.assert_array_equal(port.theta, theta)
    _, _, kind, _ = port.recorded()
    assert len(kind) == steps + 1 and (kind == SampleKind.PREDICT).all()


def test_epsilon_greedy_schedule():
    cfg = QConfig(epsilon_start=0.2, epsilon_end=0.05, epsilon_episodes=10)
    assert [cfg.epsilon(e) for e in (0, 5, 10, 50)] == pytest.approx([0.2, 0.125, 0.05, 0.05])
    rng = np.random.default_rng(0)
    assert {choose(np.array([0.0, 1.0, 1.0]), 0.0, rng) for _ in range(20)} == {1}  # first maximum
    assert {choose(np.array([0.0, 1.0, 1.0]), 1.0, rng) for _ in range(200)} == {0, 1, 2}


def test_recovery_episodes_hand_worked():
    steps = [100] * 20 + [400] * 5 + [100] * 30
    # the window of episodes [k, k + 20) after the change at 20 is within 110 only once it holds
    # no 400 (one gives (400 + 19 * 100) / 20 = 115): first at k = 25
    assert recovery_episodes(steps, 20, 100.0) == 25
    assert recovery_episodes([100] * 20 + [400] * 30, 20, 100.0) is None
    assert recovery_episodes([100] * 20 + [105] * 20, 20, 100.0) == 20
    assert recovery_episodes([500] * 40, 20, 500.0, cap=500) is None  # never learned: nothing to recover
    assert recovery_episodes([450] * 40, 20, 450.0, cap=500) is None
    assert recovery_episodes([449] * 40, 20, 449.0, cap=500) == 20
    assert recovery_episodes([500] * 40, 20, 500.0) == 20


def test_drift_changes_the_dynamics_mid_run_and_frozen_branch():
    spec = SPECS["kan-acrobot"]
    scenario = load_acrobot_drift("""
[[event]]
sample = 2
dynamics = { link_mass_2 = 3.0 }
""")
    cfg = QConfig(episodes=3)
    run = run_episodes(spec, cfg, seed=4, drift=scenario)
    assert run.changes == [(2, {"link_mass_2": 3.0})]
    assert run.frozen_steps[:2].tolist() == run.steps[:2].tolist()
    # the same run without the change agrees up to it and not after (heavier link 2)
    calm = run_episodes(spec, cfg, seed=4, drift="none")
    assert calm.frozen_steps is None
    assert calm.steps[:2].tolist() == run.steps[:2].tolist()
    assert not np.array_equal(calm.theta, run.theta)


@pytest.mark.parametrize("source, message", [
    ("[[event]]\nat = 0.5\nrotation_deg = 10.0\n", "field 'rotation_deg'"),
    ("[[event]]\nat = 0.5\ndynamics = { link_length_2 = 2.0 }\n", "unknown parameter 'link_length_2'"),
    ("[[event]]\nat = 0.5\ndynamics = { link_mass_2 = 0.0 }\n", "link_mass_2 = 0.0 is outside"),
])
def test_bad_drift_is_refused(source, message):
    with pytest.raises(DriftError, match=message):
        load_acrobot_drift(source)


def test_replay_names_the_first_differing_sample():
    spec = SPECS["kan-acrobot"]
    run = run_episodes(spec, QConfig(episodes=1), seed=0, drift="none", record=True)
    x, y, kind, preds, theta0 = run.streams["learner"]
    assert replay("golden", spec, run.streams["learner"]) == len(x)
    bad = preds.copy()
    bad[7, 1] += 1
    with pytest.raises(RuntimeError, match=r"at sample 7 of"):
        replay("golden", spec, (x, y, kind, bad, theta0))


# a Verilator build of its own; RTL sample kinds are covered by tests/test_hw_kinds.py by default
@pytest.mark.slow
def test_rtl_replays_closed_loop_exactly():
    """The golden closed loop's samples through the Verilated design: every prediction equal,
    learning and frozen streams (see :func:`onchip.control.replay` for why that makes the
    episodes on the RTL identical)."""
    if "rtl" not in available_backends():
        pytest.skip("Verilator is not installed")
    spec = SPECS["kan-acrobot"]
    run = run_episodes(spec, QConfig(episodes=4, epsilon_start=0.3), seed=2, drift="default", record=True)
    assert set(run.streams) == {"learner", "frozen"}
    for stream in run.streams.values():
        kinds = set(stream[2].tolist())
        assert kinds <= {SampleKind.PREDICT, SampleKind.ERROR} and len(stream[0]) > 100
        assert replay("rtl", spec, stream) == len(stream[0])


@pytest.mark.parametrize("argv, flag", [
    (["--task", "acrobot", "--episodes", "0"], "episodes"),
    (["--task", "acrobot", "--samples", "100"], "--samples"),
    (["--task", "acrobot", "--data", "x.npy"], "data"),
    (["--task", "acrobot", "--states", "0,1"], "states"),
    (["--task", "acrobot", "--drift", "phase-jump"], "phase-jump"),
    (["--task", "acrobot", "--spec", "kan-readout"], "widths"),
    (["--task", "acrobot", "--model", "mlp", "--spec", "kan-acrobot"], "--model"),
    (["--task", "qubit-readout", "--episodes", "5"], "episodes"),
])
def test_bad_flags_are_refused(argv, flag, tmp_path, capsys):
    assert_refused("run", argv, flag, tmp_path / "out", capsys)


def test_short_run_labels_and_plot_match_the_data():
    """20 episodes with the change at 10: the summary counts 10 episodes a side, every line the
    legend names is drawn, and the episode axis has whole ticks."""
    import matplotlib

    matplotlib.use("Agg")
    from onchip.control import change_metrics, steps_figure, summary_lines

    rng = np.random.default_rng(0)
    steps, frozen = rng.integers(100, 400, 20), rng.integers(100, 400, 20)
    m = change_metrics(steps, 10)
    assert (m["episodes_before"], m["episodes_after"]) == (10, 10)
    metrics = {"spec": "kan-acrobot", "backend": "golden", "episodes": 20, "seed": 0, "steps_last_window": 1.0,
               "goal_reached": 20, "max_steps": 500, "changes": [m]}
    line = summary_lines(metrics)[2]
    assert "over 10 before" in line and "first 10 after" in line and "last 10" in line and "20" not in line
    fig = steps_figure("t", steps, frozen, [(10, {"link_mass_2": 1.25})])
    ax = fig.axes[0]
    labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    assert len(labelled) == 3
    for ln in labelled:
        assert np.isfinite(np.asarray(ln.get_ydata(), float)).sum() >= 2, ln.get_label()
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
