"""Control through the error-input interface: a host that learns a Q-function on the chip.

The learner is the action-value function Q(s, .): the task's state features in, one output per
action. The host talks to it with two of the stream's sample kinds
(:class:`onchip.model.SampleKind`): PREDICT (Q values of a state, no update) and ERROR (the host's
dL/dQ for a state, which the learner back-propagates and applies as its sparse update after
recomputing the forward pass). That is semi-gradient Q-learning (Watkins 1989; Sutton & Barto,
*Reinforcement Learning: An Introduction*, 2nd ed., section 10.1 with the max target of 6.5),
or SARSA (section 10.1) with ``algorithm="sarsa"``, with the learner as the function
approximator.

One environment step costs two samples:

1. PREDICT x' = features(s'): Q(s', .) from the chip;
2. ERROR x = features(s) with e = scale * (Q(s, a) - target) on the taken action's output and
   0 on the others, where target = reward_scale * r + gamma * max_b Q(s', b) (Q-learning;
   SARSA: Q(s', a'), a' the next action already chosen; 0 instead of the bootstrap when s'
   is terminal, kept when the episode is only cut at its step cap). Q(s, a) is the value
   the chip predicted for s one step earlier (its own prediction, from before the previous
   step's update landed).

Scaling: rewards are multiplied by ``reward_scale`` (learner units per reward unit, so that
Q stays inside the ``act`` format: with -1 per step, gamma = 0.99 and reward_scale = 1/16
every Q lies in (-6.25, 0]); the error is ``error_scale`` times Q(s, a) - target, converted
into the ``grad`` format with its rounding and saturation (an error beyond the format's
range is clipped to it, which bounds a single update as gradient clipping does). The
learning rate is the spec's.

Actions are epsilon-greedy on the chip's Q values with a fixed schedule per episode (linear
from ``epsilon_start`` to ``epsilon_end`` over ``epsilon_episodes`` episodes), drawn from a
generator seeded by the run's seed; the greedy choice is :func:`onchip.model.decisions` (the
first maximum, the decision the RTL and HLS designs output).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from .model import SampleKind, decisions
from .spec import LearnerSpec

ALGORITHMS = ("q-learning", "sarsa")
#: Backends the host drives sample by sample; ``rtl`` and ``hls`` replay their recorded streams.
CLOSED_LOOP_BACKENDS = ("golden", "float")


@dataclass(frozen=True)
class QConfig:
    """The host's learning rule and schedule.

    Attributes:
        episodes: number of episodes (>= 1).
        gamma: discount in (0, 1].
        reward_scale: learner units per reward unit (> 0).
        error_scale: factor on Q(s, a) - target before it is put in the ``grad`` format (> 0).
        epsilon_start, epsilon_end: exploration probability of the first episode and from
            ``epsilon_episodes`` on, in [0, 1].
        epsilon_episodes: episodes of the linear epsilon decay (>= 1).
        algorithm: ``"q-learning"`` or ``"sarsa"``.

    Raises:
        ValueError: a field outside its range (the message names it and its value).
    """

    episodes: int = 200
    gamma: float = 0.99
    reward_scale: float = 1.0 / 16
    error_scale: float = 1.0
    epsilon_start: float = 0.1
    epsilon_end: float = 0.05
    epsilon_episodes: int = 100
    algorithm: str = "q-learning"

    def __post_init__(self):
        def need(ok, name):
            if not ok:
                raise ValueError(f"{name} = {getattr(self, name)!r} is out of range ({_RANGES[name]})")

        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        def integer(v):
            return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

        need(integer(self.episodes) and self.episodes >= 1, "episodes")
        need(number(self.gamma) and 0 < self.gamma <= 1, "gamma")
        need(number(self.reward_scale) and self.reward_scale > 0, "reward_scale")
        need(number(self.error_scale) and self.error_scale > 0, "error_scale")
        need(number(self.epsilon_start) and 0 <= self.epsilon_start <= 1, "epsilon_start")
        need(number(self.epsilon_end) and 0 <= self.epsilon_end <= 1, "epsilon_end")
        need(integer(self.epsilon_episodes) and self.epsilon_episodes >= 1, "epsilon_episodes")
        need(self.algorithm in ALGORITHMS, "algorithm")

    def epsilon(self, episode: int) -> float:
        """Exploration probability of ``episode`` (0-based): linear decay, then constant."""
        t = min(1.0, episode / self.epsilon_episodes)
        return self.epsilon_start + (self.epsilon_end - self.epsilon_start) * t


_RANGES = {
    "episodes": "an integer >= 1", "gamma": "(0, 1]", "reward_scale": "> 0", "error_scale": "> 0",
    "epsilon_start": "[0, 1]", "epsilon_end": "[0, 1]", "epsilon_episodes": "an integer >= 1",
    "algorithm": " or ".join(ALGORITHMS),
}


class LearnerPort:
    """The learner as the host sees it: one sample in, one prediction out.

    ``step(x_raw, y_raw, kind) -> pred_raw`` is the whole interface; :meth:`predict` and
    :meth:`train_error` wrap it with the conversions (features into the ``input`` format,
    errors into ``grad`` with saturation, raw predictions back to floats). The golden model is
    driven directly; the float twin takes floats and returns them. With ``record`` every
    sample and prediction is kept (raw), for replay through another backend.

    Args:
        spec: the learner.
        backend: ``"golden"`` or ``"float"``.
        theta: initial parameters (raw ``coef`` integers, floats for ``float``); default the
            spec's initial parameters.
        record: keep the stream.

    Raises:
        ValueError: an unknown backend.
    """

    def __init__(self, spec: LearnerSpec, backend: str = "golden", theta=None, record: bool = False):
        if backend not in CLOSED_LOOP_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(CLOSED_LOOP_BACKENDS)} for a closed loop; got {backend!r}")
        self.spec, self.backend, self.record = spec, backend, record
        if backend == "golden":
            from .model import GoldenLearner

            self._impl = GoldenLearner(spec, theta)
        else:
            from .model.float_twin import FloatTwin

            self._impl = FloatTwin(spec, theta)
        self.samples: list[tuple[np.ndarray, np.ndarray, int, np.ndarray]] = []

    @property
    def raw(self) -> bool:
        """True when samples and predictions are raw fixed-point integers (golden)."""
        return self.backend == "golden"

    @property
    def theta(self) -> np.ndarray:
        """The current parameters (a copy; pending updates of a pipelined schedule not landed)."""
        return self._impl.theta.copy() if self.raw else self._impl.theta.numpy().copy()

    def step(self, x_raw, y_raw, kind: int) -> np.ndarray:
        """One sample of ``kind`` (:class:`SampleKind`) -> the prediction made before its update:
        raw int64 (n_out,) for golden, float64 for float."""
        if self.raw:
            pred = self._impl.step(x_raw, y_raw, int(kind))
        else:
            pred = self._impl.run(np.asarray(x_raw)[None], np.asarray(y_raw)[None], kind=[int(kind)])[0]
        if self.record:
            self.samples.append((np.asarray(x_raw), np.asarray(y_raw), int(kind), np.asarray(pred)))
        return pred

    def _io(self, x, err):
        f = self.spec.formats
        if self.raw:
            return f.input.quantize(x), f.grad.quantize(err)
        return np.asarray(x, np.float64), np.clip(err, f.grad.min_value, f.grad.max_value)

    def _out(self, pred) -> np.ndarray:
        return self.spec.formats.y.dequantize(pred) if self.raw else np.asarray(pred, np.float64)

    def predict(self, x) -> np.ndarray:
        """Q values (n_out,) float64 of features ``x`` (n_in,): a PREDICT sample."""
        x_raw, y_raw = self._io(x, np.zeros(self.spec.n_out))
        return self._out(self.step(x_raw, y_raw, SampleKind.PREDICT))

    def train_error(self, x, err) -> np.ndarray:
        """An ERROR sample: features ``x`` (n_in,) with dL/dQ ``err`` (n_out,), converted into the
        ``grad`` format (rounded, saturated; the float twin clips to the same range). Returns the
        chip's recomputed Q values of ``x`` (before this update)."""
        x_raw, y_raw = self._io(x, err)
        return self._out(self.step(x_raw, y_raw, SampleKind.ERROR))

    def recorded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The recorded stream: (x (N, n_in), y (N, n_out), kind (N,), predictions (N, n_out))."""
        if not self.samples:
            n_in, n_out = self.spec.n_in, self.spec.n_out
            dt = np.int64 if self.raw else np.float64
            return np.zeros((0, n_in), dt), np.zeros((0, n_out), dt), np.zeros(0, np.int64), np.zeros((0, n_out), dt)
        xs, ys, ks, ps = zip(*self.samples)
        return np.stack(xs), np.stack(ys), np.array(ks, np.int64), np.stack(ps)

    def fork(self) -> "LearnerPort":
        """An independent copy of the learner in its current state (pending updates included);
        its record starts with this one's, so it replays from the same initial parameters."""
        twin = copy.copy(self)
        twin._impl = copy.deepcopy(self._impl)
        twin.samples = list(self.samples)
        return twin


@dataclass
class EpisodeLog:
    """Per-episode results of a run. Lists of length ``episodes``."""

    steps: list[int] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    reached: list[bool] = field(default_factory=list)


def choose(q: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    """Epsilon-greedy: with probability ``epsilon`` a uniform action, else the decision of
    ``q`` (first maximum). Always draws one uniform number (and one integer when exploring)."""
    if rng.random() < epsilon:
        return int(rng.integers(len(q)))
    return int(decisions(np.asarray(q)[None])[0])


def td_error(cfg: QConfig, q_sa: float, reward: float, q_next: np.ndarray | None, a_next: int | None) -> float:
    """dL/dQ(s, a) = Q(s, a) - target, in learner units, before ``error_scale``.

    target = reward_scale * reward + gamma * (max_b Q(s', b) for Q-learning, Q(s', a') for
    SARSA); ``q_next`` None means s' is terminal (no bootstrap)."""
    target = cfg.reward_scale * reward
    if q_next is not None:
        target += cfg.gamma * (float(np.max(q_next)) if cfg.algorithm == "q-learning" else float(q_next[a_next]))
    return q_sa - target


def run_episode(env, featurize, port: LearnerPort, cfg: QConfig, epsilon: float, rng: np.random.Generator,
                *, learn: bool = True, max_steps: int = 500) -> tuple[int, float, bool]:
    """One episode of the host loop (see the module doc).

    Args:
        env: ``reset() -> state`` and ``step(action) -> (state, reward, terminated)``.
        featurize: state -> (n_in,) features.
        port: the learner.
        cfg: learning rule and scales.
        epsilon: this episode's exploration probability.
        rng: the policy's generator.
        learn: False: a frozen policy, PREDICT samples only (the parameters do not change).
        max_steps: step cap (the last transition still bootstraps: a cap is not a terminal state).

    Returns:
        (steps taken, undiscounted return, whether the goal was reached).
    """
    x = featurize(env.reset())
    q = port.predict(x)
    a = choose(q, epsilon, rng)
    total, done, steps = 0.0, False, 0
    while not done and steps < max_steps:
        state, reward, done = env.step(a)
        steps += 1
        total += reward
        x_next = featurize(state)
        q_next = port.predict(x_next)
        a_next = choose(q_next, epsilon, rng)
        if learn:
            err = np.zeros(len(q))
            err[a] = cfg.error_scale * td_error(cfg, float(q[a]), reward, None if done else q_next, a_next)
            port.train_error(x, err)
        x, q, a = x_next, q_next, a_next
    return steps, total, done
