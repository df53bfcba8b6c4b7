"""Sources of single-shot qubit readout values: a measured file or a physical model.

A readout "shot" is the integrated (I, Q) value of the resonator signal for one
measurement, in the ADC's arbitrary units. Shots prepared in |0> and |1> form
two clusters in the IQ plane; relaxation (T1) during the integration window
drags part of the |1> shots towards the |0> cluster. See J. Heinsoo et al.,
"Rapid high-fidelity multiplexed readout of superconducting qubits",
Phys. Rev. Applied 10, 034040 (2018), for the readout picture this model
follows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError


def load_shots(path) -> np.ndarray:
    """Load and validate a ``.npy`` file of integrated readout shots.

    Args:
        path: file holding a real-valued array of layout (states, shots, 2):
            axis 0 the prepared state (|0>, |1>, ...), axis 1 the shot, axis 2
            the integrated (I, Q) value. Only states 0 and 1 are used by the
            readout task; further states are allowed.

    Returns:
        (states, shots, 2) float64 array.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the file is not a readable plain ``.npy`` array, is not
            real-valued, has rank != 3, a last axis != 2, fewer than 2 states,
            no shots, or holds NaN/inf. The message names the path.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"data: {str(p)!r} does not exist")
    if not p.is_file():
        raise DataError(f"data: {str(p)!r} is not a file")
    try:
        arr = np.load(p, allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError, OSError, EOFError... for non-npy files
        raise DataError(f"data: {str(p)!r} is not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise DataError(f"data: {str(p)!r} holds an archive of arrays, expected one .npy array")
    if arr.dtype.kind not in "iuf":
        raise DataError(
            f"data: {str(p)!r} has dtype {arr.dtype}; expected real numbers "
            "(store I and Q on a last axis of length 2)"
        )
    if arr.ndim != 3:
        raise DataError(
            f"data: {str(p)!r} has shape {arr.shape} (rank {arr.ndim}); expected rank 3, "
            "layout (states, shots, 2)"
        )
    if arr.shape[2] != 2:
        raise DataError(
            f"data: {str(p)!r} has shape {arr.shape}; the last axis must be 2 (I, Q), "
            f"got {arr.shape[2]}"
        )
    if arr.shape[0] < 2:
        raise DataError(
            f"data: {str(p)!r} has shape {arr.shape}: {arr.shape[0]} prepared state(s), "
            "need at least 2 (|0> and |1>)"
        )
    if arr.shape[1] < 1:
        raise DataError(f"data: {str(p)!r} has shape {arr.shape}: no shots")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        state, shot, comp = (int(v) for v in np.argwhere(bad)[0])
        raise DataError(
            f"data: {str(p)!r} holds {int(bad.sum())} NaN/inf values, first at "
            f"state {state}, shot {shot}, {'IQ'[comp]}"
        )
    return arr


@dataclass(frozen=True)
class ReadoutModel:
    """Two-state dispersive readout with T1 decay during the integration window.

    A shot of a qubit prepared in |0> is ``mean0 + n``. A shot of |1> decays at
    a time tau ~ Exponential(T1); if tau is shorter than the integration time
    T, the integrated signal is ``(tau/T) mean1 + (1 - tau/T) mean0 + n``, a
    point on the segment between the two centres at the decay-time fraction;
    otherwise ``mean1 + n``. The noise n is isotropic Gaussian with per-axis
    standard deviation ``std`` (amplifier noise).

    The defaults reproduce the real transmon set shipped for tests (means
    (-0.079, 0.035) and (0.537, -0.187) in ADC units, |0> error about 0.6% and
    |1> error about 2.7% for a linear discriminant).

    Attributes:
        mean0, mean1: (I, Q) cluster centres of |0> and |1>, ADC units.
        std: per-axis standard deviation of the noise, ADC units (> 0).
        readout_over_t1: integration time divided by T1 (>= 0; 0 means no decay).

    Raises:
        ValueError: a non-finite centre, coinciding centres, std <= 0 or
            readout_over_t1 < 0 (names the field).
    """

    mean0: tuple[float, float] = (-0.079, 0.035)
    mean1: tuple[float, float] = (0.537, -0.187)
    std: float = 0.13
    readout_over_t1: float = 0.042

    def __post_init__(self):
        for name in ("mean0", "mean1"):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != (2,) or not np.isfinite(value).all():
                raise ValueError(f"ReadoutModel.{name}: expected two finite numbers, got {getattr(self, name)!r}")
        if tuple(self.mean0) == tuple(self.mean1):
            raise ValueError(f"ReadoutModel.mean1: equals mean0 {self.mean0!r}; the states are indistinguishable")
        if not (np.isfinite(self.std) and self.std > 0):
            raise ValueError(f"ReadoutModel.std: expected a finite value > 0, got {self.std!r}")
        if not (np.isfinite(self.readout_over_t1) and self.readout_over_t1 >= 0):
            raise ValueError(
                f"ReadoutModel.readout_over_t1: expected a finite value >= 0, got {self.readout_over_t1!r}"
            )

    def sample(self, state: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n shots of a qubit prepared in ``state`` (0 or 1): (n, 2) float64, ADC units."""
        m0 = np.asarray(self.mean0, dtype=np.float64)
        m1 = np.asarray(self.mean1, dtype=np.float64)
        if state == 0:
            centre = np.broadcast_to(m0, (n, 2))
        elif state == 1:
            if self.readout_over_t1 > 0:
                # decay time in units of the integration time; >= 1 means no decay in the window
                frac = np.minimum(rng.exponential(1.0 / self.readout_over_t1, size=n), 1.0)
            else:
                frac = np.ones(n)
            centre = m0 + frac[:, None] * (m1 - m0)
        else:
            raise ValueError(f"state: the model has states 0 and 1, got {state!r}")
        return centre + rng.normal(0.0, self.std, size=(n, 2))

    def describe(self) -> dict:
        """JSON-able parameters."""
        d = asdict(self)
        d["mean0"], d["mean1"] = list(self.mean0), list(self.mean1)
        return d
