"""Per-device calibration loop driven by an online learner: the hardware-in-the-loop boundary.

Source: arXiv 2601.18973, Sec. "Adaptation on a new device", recast as an
online-learning loop: a learner maps the device features x to a low-dimensional
control correction c; the loop measures fidelities, estimates the fidelity
gradient along c by central finite differences (2 P fidelity measurements per
step, as a calibrator on hardware would), and gives the learner the target
y = c + eta * grad_c F, one sample per step. Any object with

    predict(x: (F,) float64) -> (P,) float64
    step(x: (F,) float64, y: (P,) float64) -> None

can be the learner: :class:`FloatCorrectionLearner` is the float reference;
a fixed-point KAN learner (golden model or RTL) plugs in unchanged.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .lindblad import GateProblem, average_gate_fidelity, channel_expm
from .tasks import DeviceBatch


class CorrectionLearner(Protocol):
    """Online learner interface of the calibration loop (shapes: x (F,), prediction and target (P,))."""

    def predict(self, x: np.ndarray) -> np.ndarray: ...

    def step(self, x: np.ndarray, y: np.ndarray) -> None: ...


class FloatCorrectionLearner:
    """Float reference learner: affine map c = W x + b trained by one SGD step on (1/2)|y - c|^2 per sample.

    Args:
        n_features: F; n_outputs: P; lr: SGD step size in (0, 1] (1 with x = 0 copies y exactly).
    Raises:
        ValueError: non-positive sizes or lr outside (0, 1].
    """

    def __init__(self, n_features: int, n_outputs: int, lr: float = 1.0):
        if n_features < 0 or n_outputs < 1:
            raise ValueError(f"n_features, n_outputs: expected >= 0 and >= 1, got {n_features}, {n_outputs}")
        if not 0 < lr <= 1:
            raise ValueError(f"lr: expected a value in (0, 1], got {lr!r}")
        self.w = np.zeros((n_outputs, n_features))
        self.b = np.zeros(n_outputs)
        self.lr = lr

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.w @ np.asarray(x, float) + self.b

    def step(self, x: np.ndarray, y: np.ndarray) -> None:
        x = np.asarray(x, float)
        err = np.asarray(y, float) - self.predict(x)
        # normalised step so that lr = 1 reaches the target whatever |x| is
        scale = self.lr / (1.0 + x @ x)
        self.w += scale * np.outer(err, x)
        self.b += scale * err


def constant_offset_basis(problem: GateProblem) -> np.ndarray:
    """(P = n_ctrl, N, n_ctrl) basis: correction c_k adds a constant offset to control k."""
    basis = np.zeros((problem.n_controls, problem.n_segments, problem.n_controls))
    for k in range(problem.n_controls):
        basis[k, :, k] = 1.0
    return basis


def measure_fidelity(problem: GateProblem, devices: DeviceBatch, i: int, u: np.ndarray) -> float:
    """Average gate fidelity of controls ``u`` (N, n_ctrl) on device ``i`` (SciPy simulation)."""
    s = channel_expm(problem, devices.drift_hamiltonian(i), devices.collapse_operators(i), u,
                     devices.control_scale(i))
    return average_gate_fidelity(s, problem.target)


def calibrate(problem: GateProblem, devices: DeviceBatch, i: int, base: np.ndarray,
              learner: CorrectionLearner, k_steps: int, eta: float = 5.0, probe: float = 0.02,
              basis: np.ndarray | None = None) -> np.ndarray:
    """Run K calibration steps of ``learner`` on device ``i``.

    Args:
        base: (N, n_ctrl) controls before correction (e.g. the meta-learned policy's output).
        learner: object with predict/step (see module docstring).
        k_steps: K >= 0.
        eta: gradient-ascent step on the correction, per unit fidelity gradient.
        probe: finite-difference half-width in correction units (1/T).
        basis: (P, N, n_ctrl) correction directions (default: constant offsets).
    Returns:
        (K + 1,) fidelities after 0..K steps.
    Raises:
        ValueError: k_steps < 0, eta or probe not > 0, or shapes disagree.
    """
    if not isinstance(k_steps, (int, np.integer)) or k_steps < 0:
        raise ValueError(f"k_steps: expected an integer >= 0, got {k_steps!r}")
    if not eta > 0 or not probe > 0:
        raise ValueError(f"eta, probe: expected values > 0, got {eta!r}, {probe!r}")
    basis = constant_offset_basis(problem) if basis is None else np.asarray(basis, float)
    if basis.shape[1:] != (problem.n_segments, problem.n_controls):
        raise ValueError(f"basis: expected shape (P, {problem.n_segments}, {problem.n_controls}), got {basis.shape}")
    x = np.asarray(devices.features[i], float)

    def fid(c):
        return measure_fidelity(problem, devices, i, base + np.tensordot(c, basis, axes=1))

    fids = []
    for k in range(k_steps + 1):
        c = np.asarray(learner.predict(x), float)
        fids.append(fid(c))
        if k == k_steps:
            break
        grad = np.array([(fid(c + probe * e) - fid(c - probe * e)) / (2 * probe)
                         for e in np.eye(basis.shape[0])])
        learner.step(x, c + eta * grad)
    return np.array(fids)
