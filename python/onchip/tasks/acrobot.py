"""Acrobot swing-up: gymnasium's ``Acrobot-v1`` dynamics in numpy, its features and its drift.

The dynamics are those of Sutton & Barto, *Reinforcement Learning: An Introduction* (2nd ed.,
section 16.3; the "book" equations, which the NIPS 1995 paper misprints), integrated as
gymnasium's ``AcrobotEnv`` does: one fourth-order Runge-Kutta step of dt = 0.2 s per action,
angles wrapped into [-pi, pi], velocities clipped to +/-4 pi and +/-9 pi rad/s, torque
-1, 0 or +1 N m on the joint between the links, reward -1 per step, the episode ends when
the tip is above the target height, -cos(theta1) - cos(theta1 + theta2) > 1 (angles only, as
gymnasium), or after 500 steps. Nothing here imports gymnasium (the tests compare with it).

The physical parameters (:data:`PARAMETERS`) are settable, so that a drift scenario's
``dynamics = {name = value}`` event changes them mid-run. Only the parameters that enter
gymnasium's equations are offered: the second link's length enters them only through its
centre of mass ``link_com_pos_2`` and moment of inertia ``link_moi_2`` (gymnasium's
``LINK_LENGTH_2`` only draws the link), so a longer second link is written as those two.

Features for a learner (:func:`features`): cos/sin of both angles and the velocities divided
by their bounds, six values in [-1, 1] (gymnasium's observation, velocities scaled).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from ..qlearning import LearnerPort, run_episode
from ..spec import TASK_PRESETS, LearnerSpec

DT = 0.2  #: integration step, s (one action)
MAX_VEL_1 = 4 * math.pi  #: rad/s
MAX_VEL_2 = 9 * math.pi  #: rad/s
TORQUES = (-1.0, 0.0, 1.0)  #: N m, by action index
MAX_STEPS = 500  #: episode cap (Acrobot-v1's TimeLimit)
GRAVITY = 9.8  #: m/s^2
N_FEATURES = 6


@dataclass(frozen=True)
class AcrobotParams:
    """Physical parameters of the two links (gymnasium's defaults; SI units).

    Attributes:
        link_length_1: length of link 1 (the second joint's distance from the pivot), m.
        link_mass_1, link_mass_2: masses, kg.
        link_com_pos_1, link_com_pos_2: centre of mass of each link from its own joint, m.
        link_moi_1, link_moi_2: moments of inertia about the centres of mass, kg m^2
            (gymnasium's single ``LINK_MOI``, here one per link).

    Raises:
        ValueError: a value that is not a finite number inside :data:`PARAMETERS`' bounds.
    """

    link_length_1: float = 1.0
    link_mass_1: float = 1.0
    link_mass_2: float = 1.0
    link_com_pos_1: float = 0.5
    link_com_pos_2: float = 0.5
    link_moi_1: float = 1.0
    link_moi_2: float = 1.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            low, high = PARAMETERS[f.name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high:
                raise ValueError(f"acrobot parameter {f.name} must be a number in [{low}, {high}], got {value!r}")
            object.__setattr__(self, f.name, float(value))

    def changed(self, **values) -> "AcrobotParams":
        """A copy with some parameters changed (names as the attributes)."""
        unknown = sorted(set(values) - set(PARAMETERS))
        if unknown:
            raise ValueError(f"acrobot parameter {unknown[0]!r} is unknown; known: {', '.join(PARAMETERS)}")
        return replace(self, **values)


#: Parameters a ``dynamics`` drift event may set: name -> inclusive (low, high).
PARAMETERS: dict[str, tuple[float, float]] = {
    "link_length_1": (0.1, 10.0),
    "link_mass_1": (0.1, 10.0),
    "link_mass_2": (0.1, 10.0),
    "link_com_pos_1": (0.05, 5.0),
    "link_com_pos_2": (0.05, 5.0),
    "link_moi_1": (0.01, 100.0),
    "link_moi_2": (0.01, 100.0),
}

#: Drift scenarios of the acrobot task (TOML; positions are in episodes: ``at`` a fraction of
#: the run's episodes, ``sample`` an episode index).
DRIFT_PRESETS: dict[str, str] = {
    "default": """\
description = "at half the run the second link becomes 1.25 times as heavy and as long (mass 1.25, centre of mass 0.625, inertia 1.25 * 1.25^2)"

[[event]]
at = 0.5
dynamics = { link_mass_2 = 1.25, link_com_pos_2 = 0.625, link_moi_2 = 1.953125 }
label = "link 2: mass x1.25, length x1.25"
""",
    "heavy-link": """\
description = "at half the run the second link becomes 1.5 times as heavy and as long (mass 1.5, centre of mass 0.75, inertia 1.5 * 1.5^2)"

[[event]]
at = 0.5
dynamics = { link_mass_2 = 1.5, link_com_pos_2 = 0.75, link_moi_2 = 3.375 }
label = "link 2: mass x1.5, length x1.5"
""",
    "none": """\
description = "stationary dynamics"
event = []
""",
    "light-link": """\
description = "at half the run the second link becomes half as heavy and half as long"

[[event]]
at = 0.5
dynamics = { link_mass_2 = 0.5, link_com_pos_2 = 0.25, link_moi_2 = 0.125 }
label = "link 2: mass x0.5, length x0.5"
""",
}


def derivatives(p: AcrobotParams, theta1: float, theta2: float, dtheta1: float, dtheta2: float,
                torque: float) -> tuple[float, float, float, float]:
    """Time derivatives of the state (rad/s, rad/s^2), the book's equations (Sutton & Barto,
    section 16.3), term for term as gymnasium's ``AcrobotEnv._dsdt``."""
    m1, m2, l1, lc1, lc2, i1, i2 = (p.link_mass_1, p.link_mass_2, p.link_length_1, p.link_com_pos_1,
                                    p.link_com_pos_2, p.link_moi_1, p.link_moi_2)
    g = GRAVITY
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * math.cos(theta2)) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * math.cos(theta2)) + i2
    phi2 = m2 * lc2 * g * math.cos(theta1 + theta2 - math.pi / 2.0)
    phi1 = (-m2 * l1 * lc2 * dtheta2**2 * math.sin(theta2)
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * math.sin(theta2)
            + (m1 * lc1 + m2 * l1) * g * math.cos(theta1 - math.pi / 2) + phi2)
    ddtheta2 = ((torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * math.sin(theta2) - phi2)
                / (m2 * lc2**2 + i2 - d2**2 / d1))
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _wrap(x: float) -> float:
    # gymnasium's wrap(x, -pi, pi): subtract/add 2 pi until inside (same float steps)
    while x > math.pi:
        x = x - 2 * math.pi
    while x < -math.pi:
        x = x + 2 * math.pi
    return x


def step_state(p: AcrobotParams, state, action: int) -> np.ndarray:
    """One action: RK4 over dt = 0.2 s, then wrap the angles and clip the velocities.

    Args:
        p: the link parameters.
        state: (4,) theta1, theta2 (rad), dtheta1, dtheta2 (rad/s).
        action: 0, 1 or 2 (torque -1, 0, +1 N m).

    Returns:
        (4,) float64 next state.

    Raises:
        ValueError: an action outside 0..2.
    """
    if action not in (0, 1, 2):
        raise ValueError(f"action must be 0, 1 or 2, got {action!r}")
    torque = TORQUES[action]
    y0 = [float(v) for v in state]
    h, h2 = DT, DT / 2.0

    def f(y):
        return derivatives(p, y[0], y[1], y[2], y[3], torque)

    k1 = f(y0)
    k2 = f([a + h2 * b for a, b in zip(y0, k1)])
    k3 = f([a + h2 * b for a, b in zip(y0, k2)])
    k4 = f([a + h * b for a, b in zip(y0, k3)])
    ns = [a + h / 6.0 * (b1 + 2 * b2 + 2 * b3 + b4) for a, b1, b2, b3, b4 in zip(y0, k1, k2, k3, k4)]
    return np.array([_wrap(ns[0]), _wrap(ns[1]),
                     min(max(ns[2], -MAX_VEL_1), MAX_VEL_1), min(max(ns[3], -MAX_VEL_2), MAX_VEL_2)])


def is_terminal(state) -> bool:
    """The tip is above the target height: -cos(theta1) - cos(theta1 + theta2) > 1."""
    return bool(-math.cos(state[0]) - math.cos(state[1] + state[0]) > 1.0)


def features(state) -> np.ndarray:
    """(6,) learner inputs of a state: cos theta1, sin theta1, cos theta2, sin theta2,
    dtheta1 / 4 pi, dtheta2 / 9 pi (each in [-1, 1])."""
    t1, t2, v1, v2 = (float(v) for v in state)
    return np.array([math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2), v1 / MAX_VEL_1, v2 / MAX_VEL_2])


class Acrobot:
    """The environment: a state, its parameters and a seeded generator for resets.

    Args:
        seed: seeds the numpy Generator that draws the start states.
        params: the link parameters (default gymnasium's).

    Attributes:
        state: (4,) float64 theta1, theta2, dtheta1, dtheta2.
        params: :class:`AcrobotParams`, changeable between steps (:meth:`set_params`).
    """

    def __init__(self, seed: int, params: AcrobotParams | None = None):
        self.rng = np.random.default_rng(seed)
        self.params = AcrobotParams() if params is None else params
        self.state = np.zeros(4)

    def set_params(self, **values) -> None:
        """Change parameters (a ``dynamics`` drift event). Raises ValueError on a bad name or value."""
        self.params = self.params.changed(**values)

    def reset(self) -> np.ndarray:
        """Start an episode: every state variable uniform in [-0.1, 0.1] (as gymnasium's reset,
        in float64). Returns the state (4,)."""
        self.state = self.rng.uniform(-0.1, 0.1, 4)
        return self.state

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        """Apply an action: (next state (4,), reward -1.0 or 0.0 at the goal, terminated)."""
        self.state = step_state(self.params, self.state, action)
        done = is_terminal(self.state)
        return self.state, (0.0 if done else -1.0), done


#: Learner specs for the Q-function (6 features -> 3 actions): the acrobot entries of
#: :data:`onchip.spec.TASK_PRESETS`.
SPECS: dict[str, LearnerSpec] = {name: TASK_PRESETS[name] for name in ("kan-acrobot", "kan2-acrobot", "mlp-acrobot")}
#: Spec of ``--model`` when none is given.
DEFAULT_SPECS = {"kan": "kan-acrobot", "mlp": "mlp-acrobot"}


def load_acrobot_drift(source=None):
    """The acrobot drift scenario: a preset of :data:`DRIFT_PRESETS` (default ``default``), a
    TOML file or text, or a scenario; only ``dynamics`` events on :data:`PARAMETERS`.

    Raises:
        DriftError: a readout field, an unknown parameter or a value outside its bounds (names
            the event, the field and the value).
        FileNotFoundError: neither a preset, TOML text nor a file.
    """
    from .drift import load_drift

    return load_drift("default" if source is None else source, task="acrobot", parameters=PARAMETERS,
                      presets=DRIFT_PRESETS)


@dataclass
class AcrobotRun:
    """What :func:`run_episodes` returns.

    Attributes:
        steps: (E,) steps per episode (<= 500) of the learning policy.
        returns: (E,) undiscounted returns (-1 per step before the goal).
        frozen_steps: (E,) steps of the frozen policy (learning switched off at the first
            change), equal to ``steps`` before it; None without a change.
        changes: [(episode, {parameter: value})] dynamics changes, in order.
        streams: {"learner": (x, y, kind, predictions, theta0), "frozen": ...} recorded raw
            streams, each from the initial parameters theta0 (the frozen one repeats the
            learner's samples up to the change), for replay through ``rtl`` / ``hls``.
        theta: final parameters of the learning policy.
    """

    steps: np.ndarray
    returns: np.ndarray
    frozen_steps: np.ndarray | None
    changes: list
    streams: dict = field(default_factory=dict)
    theta: np.ndarray | None = None


def run_episodes(spec: LearnerSpec, cfg, *, seed: int, drift=None, backend: str = "golden",
                 record: bool = False, progress: bool = False) -> AcrobotRun:
    """Learn the swing-up online: ``cfg.episodes`` episodes of :func:`onchip.qlearning.run_episode`
    on one environment whose parameters change as the drift scenario says (positions in
    episodes), and from the first change on a frozen copy of the policy (PREDICT samples only)
    on an identical copy of the environment and generators, as the static baseline.

    Args:
        spec: the Q-function learner (6 inputs, 3 outputs).
        cfg: :class:`onchip.qlearning.QConfig`.
        seed: seeds the start states (``Acrobot``) and the policy's generator, independently.
        drift: scenario (see :func:`load_acrobot_drift`); default the ``default`` preset.
        backend: ``golden`` or ``float`` (driven sample by sample).
        record: keep the raw sample streams (golden) for replay through ``rtl`` / ``hls``.
        progress: show a progress bar over episodes.

    Raises:
        ValueError: a spec whose widths are not (6, ..., 3), a bad seed or backend.
    """
    from ..progress import progress_bar

    if spec.n_in != N_FEATURES or spec.n_out != len(TORQUES):
        raise ValueError(f"spec widths {list(spec.widths)} do not fit task 'acrobot', which has "
                         f"{N_FEATURES} inputs and {len(TORQUES)} outputs")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    scenario = load_acrobot_drift(drift)
    n = cfg.episodes
    changes = scenario.dynamics_schedule(n)
    at = {}
    for episode, values in changes:
        at.setdefault(episode, {}).update(values)
    first = min((e for e in at if e > 0), default=None)
    env_seed, policy_seed = np.random.SeedSequence([int(seed), 0xAC20]).spawn(2)
    env, rng = Acrobot(env_seed), np.random.default_rng(policy_seed)
    port = LearnerPort(spec, backend, record=record)
    theta0 = port.theta
    steps, returns = np.zeros(n, np.int64), np.zeros(n)
    frozen_steps = None
    frozen = None
    with progress_bar(total=n, desc=f"acrobot {spec.name or spec.kind}", unit="episode", disable=not progress,
              leave=False) as bar:
        for e in range(n):
            if e in at:
                env.set_params(**at[e])
            if e == first:
                frozen = (port.fork(), copy.deepcopy(env), copy.deepcopy(rng))
            steps[e], returns[e], _ = run_episode(env, features, port, cfg, cfg.epsilon(e), rng, max_steps=MAX_STEPS)
            bar.update()
        if frozen is not None:
            f_port, f_env, f_rng = frozen
            frozen_steps = steps.copy()
            for e in range(first, n):
                if e in at and e != first:
                    f_env.set_params(**at[e])
                frozen_steps[e], _, _ = run_episode(f_env, features, f_port, cfg, cfg.epsilon(e), f_rng,
                                                    learn=False, max_steps=MAX_STEPS)
    streams = {}
    if record:
        streams["learner"] = (*port.recorded(), theta0)
        if frozen is not None:
            streams["frozen"] = (*frozen[0].recorded(), theta0)
    return AcrobotRun(steps, returns, frozen_steps, changes, streams, port.theta)
