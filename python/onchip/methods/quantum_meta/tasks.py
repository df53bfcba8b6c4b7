"""Device distributions: each task is one device with its own noise rates and miscalibrations.

Source: arXiv 2601.18973, Sec. "Task distributions": a task is a device drawn
from a distribution whose spread (task variance sigma^2) is the quantity the
adaptation gain scales with; an out-of-distribution set has rates well beyond
the training range (up to 10x).

Parameterisation (our choice where the paper leaves it open), with a spread
sigma and a shift s (s = 1 in distribution, s > 1 out of distribution):

* noise rates:  gamma = s * gamma_nominal * exp(sigma * xi),  xi ~ N(0, 1)
  (relaxation gamma_1 with L = sqrt(gamma_1) sigma_-, pure dephasing gamma_phi
  with L = sqrt(gamma_phi / 2) sigma_z, so coherences decay as exp(-gamma_phi t));
* coherent miscalibrations, zero mean, std  s * sigma * scale:
  X gate: qubit detuning Delta (H_0 = Delta Z / 2, scale pi) and a drive
  amplitude error eps (both controls scaled by 1 + eps, scale 1);
  CZ: detunings delta_1, delta_2 (scale pi/2), ZZ drift zeta
  (H_0 += zeta Z1 Z2 / 2, scale pi/2), drive errors eps_1, eps_2 (x/y controls of
  each qubit) and eps_zz (coupler) (scale 1).

The policy sees only the task *features*: the log noise rates relative to
nominal, what a T1/T2 characterisation gives. The coherent miscalibrations are
hidden; they drift between calibrations and are what adaptation must find from
fidelity measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lindblad import SM, SZ, I2, GateProblem, dissipator_superop, hamiltonian_superop


@dataclass(frozen=True)
class DeviceFamily:
    """Nominal device of one gate and the scales of its random deviations.

    Attributes:
        gate: "x" or "cz".
        gamma1: nominal relaxation rate per qubit, in 1/T.
        gamma_phi: nominal pure-dephasing rate per qubit, in 1/T.
        coherent_scales: std of each coherent parameter per unit sigma.
        coherent_names: labels of the coherent parameters.
        coherent_offset: systematic (mean) coherent miscalibration of every device, in units of
            ``coherent_scales`` (0 = the default zero-mean family). A non-zero offset breaks the analytic
            pulse's assumption of a calibrated device (used for the positive control of
            :mod:`onchip.methods.quantum_meta.experiment`); it is scaled by the shift like the spread.
    """

    gate: str
    gamma1: float
    gamma_phi: float
    coherent_scales: tuple[float, ...]
    coherent_names: tuple[str, ...]
    coherent_offset: float = 0.0

    @property
    def n_qubits(self) -> int:
        return 1 if self.gate == "x" else 2

    @property
    def n_features(self) -> int:
        return 2 * self.n_qubits


def device_family(gate: str, gamma1: float = 0.01, gamma_phi: float = 0.02) -> DeviceFamily:
    """Default family for gate "x" or "cz" (T1 = 100 T, T_phi = 50 T at nominal).

    Raises:
        ValueError: unknown gate or a negative rate.
    """
    if gamma1 < 0 or not np.isfinite(gamma1):
        raise ValueError(f"gamma1: expected a finite rate >= 0, got {gamma1!r}")
    if gamma_phi < 0 or not np.isfinite(gamma_phi):
        raise ValueError(f"gamma_phi: expected a finite rate >= 0, got {gamma_phi!r}")
    if gate == "x":
        return DeviceFamily("x", gamma1, gamma_phi, (np.pi, 1.0), ("detuning", "drive_error"))
    if gate == "cz":
        return DeviceFamily(
            "cz", gamma1, gamma_phi,
            (np.pi / 2, np.pi / 2, np.pi / 2, 1.0, 1.0, 1.0),
            ("detuning1", "detuning2", "zz_drift", "drive_error1", "drive_error2", "coupler_error"),
        )
    raise ValueError(f"gate: expected 'x' or 'cz', got {gate!r}")


@dataclass(frozen=True)
class DeviceBatch:
    """B devices of one family.

    Attributes:
        family: the family they were drawn from.
        gamma1: (B, n_qubits) relaxation rates, 1/T.
        gamma_phi: (B, n_qubits) dephasing rates, 1/T.
        coherent: (B, n_coherent) coherent parameters (see module docstring).
        features: (B, 2 n_qubits) float64 policy inputs: log(gamma / gamma_nominal).
    """

    family: DeviceFamily
    gamma1: np.ndarray
    gamma_phi: np.ndarray
    coherent: np.ndarray
    features: np.ndarray

    def __len__(self) -> int:
        return int(self.coherent.shape[0])

    def subset(self, idx) -> "DeviceBatch":
        """The devices at ``idx`` (index array or slice)."""
        return DeviceBatch(self.family, self.gamma1[idx], self.gamma_phi[idx],
                           self.coherent[idx], self.features[idx])

    # -- physics of device i

    def drift_hamiltonian(self, i: int) -> np.ndarray:
        """(d, d) drift H_0 of device ``i``."""
        c = self.coherent[i]
        if self.family.gate == "x":
            return c[0] * SZ / 2
        z1, z2 = np.kron(SZ, I2), np.kron(I2, SZ)
        return (c[0] * z1 + c[1] * z2 + c[2] * z1 @ z2) / 2

    def collapse_operators(self, i: int) -> list[np.ndarray]:
        """Relaxation and dephasing operators of device ``i`` (rates folded in)."""
        ops = []
        for q in range(self.family.n_qubits):
            for a, rate in ((SM, self.gamma1[i, q]), (SZ, self.gamma_phi[i, q] / 2)):
                if self.family.n_qubits == 1:
                    full = a
                else:
                    full = np.kron(a, I2) if q == 0 else np.kron(I2, a)
                ops.append(np.sqrt(rate) * full)
        return ops

    def control_scale(self, i: int) -> np.ndarray:
        """(n_ctrl,) multiplicative drive factors of device ``i``."""
        c = self.coherent[i]
        if self.family.gate == "x":
            return np.array([1 + c[1], 1 + c[1]])
        e1, e2, ezz = c[3], c[4], c[5]
        return np.array([1 + e1, 1 + e1, 1.0, 1 + e2, 1 + e2, 1.0, 1 + ezz])

    def torch_tensors(self, problem: GateProblem):
        """(l_drift (B, d^2, d^2) complex128, ctrl_scale (B, n_ctrl) float64) for the torch simulator.

        Raises:
            ValueError: the problem is for another gate.
        """
        import torch

        if problem.name != self.family.gate:
            raise ValueError(f"problem: gate {problem.name!r} does not match devices of gate {self.family.gate!r}")
        ls = [hamiltonian_superop(self.drift_hamiltonian(i))
              + dissipator_superop(self.collapse_operators(i), problem.dim) for i in range(len(self))]
        scales = [self.control_scale(i) for i in range(len(self))]
        return (torch.tensor(np.stack(ls), dtype=torch.complex128),
                torch.tensor(np.stack(scales), dtype=torch.float64))


def sample_devices(family: DeviceFamily, n: int, sigma: float, rng: np.random.Generator,
                   shift: float = 1.0) -> DeviceBatch:
    """Draw ``n`` devices with spread ``sigma`` and out-of-distribution shift ``shift``.

    Args:
        family: nominal device and deviation scales.
        n: number of devices (>= 1).
        sigma: task spread (>= 0); the task variance is sigma^2.
        rng: NumPy generator (the only source of randomness).
        shift: s >= 1 multiplies the noise rates and the coherent spread
            (1 = training distribution, 10 = far out of distribution).
    Returns:
        DeviceBatch of n devices.
    Raises:
        ValueError: n < 1, sigma < 0 or shift < 1 (or not finite).
    """
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected a positive integer, got {n!r}")
    if not np.isfinite(sigma) or sigma < 0:
        raise ValueError(f"sigma: expected a finite value >= 0, got {sigma!r}")
    if not np.isfinite(shift) or shift < 1:
        raise ValueError(f"shift: expected a finite value >= 1, got {shift!r}")
    q = family.n_qubits
    xi_rates = rng.standard_normal((n, 2 * q))
    g1 = shift * family.gamma1 * np.exp(sigma * xi_rates[:, :q])
    gp = shift * family.gamma_phi * np.exp(sigma * xi_rates[:, q:])
    scales = np.asarray(family.coherent_scales)
    coherent = shift * scales * (family.coherent_offset + sigma * rng.standard_normal((n, scales.size)))
    with np.errstate(divide="ignore"):
        feats = np.concatenate([
            np.log(g1 / family.gamma1) if family.gamma1 > 0 else np.zeros_like(g1),
            np.log(gp / family.gamma_phi) if family.gamma_phi > 0 else np.zeros_like(gp),
        ], axis=1)
    return DeviceBatch(family, g1, gp, coherent, feats)
