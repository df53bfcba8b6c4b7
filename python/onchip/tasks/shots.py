"""Sources of single-shot qubit readout values: a measured file or a physical model.

A readout "shot" is the integrated (I, Q) value of the resonator signal for one
measurement, in the ADC's arbitrary units. Shots prepared in |0>, |1> (and |2>) form
clusters in the IQ plane; relaxation (T1) during the integration window
drags part of the |1> shots towards the |0> cluster, and |2> shots through |1> to |0>. See J. Heinsoo et al.,
"Rapid high-fidelity multiplexed readout of superconducting qubits",
Phys. Rev. Applied 10, 034040 (2018), for the readout picture this model
follows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..io import read_npy


def load_shots(path) -> np.ndarray:
    """Load and validate a ``.npy`` file of integrated readout shots.

    Args:
        path: file holding a real-valued array of layout (states, shots, 2):
            axis 0 the prepared state (|0>, |1>, ...), axis 1 the shot, axis 2
            the integrated (I, Q) value. The readout task uses every state, or
            those its ``states`` argument selects.

    Returns:
        (states, shots, 2) float64 array.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the file is not a readable plain ``.npy`` array, is not
            real-valued, has rank != 3, a last axis != 2, fewer than 2 states,
            no shots, or holds NaN/inf. The message names the path.
    """
    p = Path(path)
    try:
        arr = read_npy(p, "data")
    except ValueError as exc:  # a missing file stays FileNotFoundError
        raise DataError(str(exc)) from None
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
    with np.errstate(over="ignore", invalid="ignore"):  # the calibration averages and spreads the shots
        spread = arr.var(axis=1)
    if not np.isfinite(spread).all():
        raise DataError(f"data: {str(p)!r} holds values up to {np.abs(arr).max():.3g}, too large to average in "
                        "float64; give the shots in ADC units or volts")
    return arr


@dataclass(frozen=True)
class ReadoutModel:
    """Three-state dispersive readout with decay during the integration window.

    A shot of a qubit prepared in |0> is ``mean0 + n``. A shot of |1> decays at
    a time tau ~ Exponential(T1); if tau is shorter than the integration time
    T, the integrated signal is ``(tau/T) mean1 + (1 - tau/T) mean0 + n``, a
    point on the segment between the two centres at the decay-time fraction;
    otherwise ``mean1 + n``. A shot of |2> (the leakage state of a transmon)
    decays 2 -> 1 at tau2 ~ Exponential(T1_21), then 1 -> 0 at a further
    tau1 ~ Exponential(T1); with f2 = min(tau2/T, 1) and f1 = min(tau1/T, 1 - f2)
    the fractions of the window spent in |2> and |1>, the signal is
    ``f2 mean2 + f1 mean1 + (1 - f2 - f1) mean0 + n``. The noise n is isotropic
    Gaussian with per-axis standard deviation ``std`` (amplifier noise).

    The |0> and |1> defaults reproduce the real transmon set shipped for tests
    (means (-0.079, 0.035) and (0.537, -0.187) in ADC units, |0> error about 0.6%
    and |1> error about 2.7% for a linear discriminant). The |2> centre is a
    modelled value: about as far from |0> (0.67) and |1> (0.64) as they are from
    each other (0.66), off their line, as the dispersive shifts of a transmon's
    three lowest levels place it; T1 of |2> -> |1> is half T1 of |1> -> |0>
    (the harmonic-oscillator ratio, J. Koch et al., Phys. Rev. A 76, 042319 (2007)).

    Attributes:
        mean0, mean1, mean2: (I, Q) cluster centres of |0>, |1> and |2>, ADC units.
        std: per-axis standard deviation of the noise, ADC units (> 0).
        readout_over_t1: integration time divided by T1 of |1> -> |0> (>= 0; 0 means no decay).
        readout_over_t1_21: integration time divided by T1 of |2> -> |1> (>= 0).

    Raises:
        ValueError: a non-finite centre, coinciding centres, std <= 0 or a
            negative decay ratio (names the field).
    """

    mean0: tuple[float, float] = (-0.079, 0.035)
    mean1: tuple[float, float] = (0.537, -0.187)
    std: float = 0.13
    readout_over_t1: float = 0.042
    mean2: tuple[float, float] = (0.45, 0.45)
    readout_over_t1_21: float = 0.084

    #: number of states the model prepares
    STATES = 3

    def __post_init__(self):
        for name in ("mean0", "mean1", "mean2"):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != (2,) or not np.isfinite(value).all():
                raise ValueError(f"ReadoutModel.{name}: expected two finite numbers, got {getattr(self, name)!r}")
        if tuple(self.mean0) == tuple(self.mean1):
            raise ValueError(f"ReadoutModel.mean1: equals mean0 {self.mean0!r}; the states are indistinguishable")
        if tuple(self.mean2) in (tuple(self.mean0), tuple(self.mean1)):
            raise ValueError(f"ReadoutModel.mean2: equals another state's centre, got {self.mean2!r}")
        if not (np.isfinite(self.std) and self.std > 0):
            raise ValueError(f"ReadoutModel.std: expected a finite value > 0, got {self.std!r}")
        for name in ("readout_over_t1", "readout_over_t1_21"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"ReadoutModel.{name}: expected a finite value >= 0, got {value!r}")

    def means(self) -> np.ndarray:
        """(3, 2) centres of |0>, |1>, |2>, ADC units."""
        return np.array([self.mean0, self.mean1, self.mean2], dtype=np.float64)

    @staticmethod
    def _decay_fraction(rate: float, n: int, rng: np.random.Generator) -> np.ndarray:
        # decay time in units of the integration time, capped at 1 (no decay in the window)
        if rate > 0:
            return np.minimum(rng.exponential(1.0 / rate, size=n), 1.0)
        return np.ones(n)

    def sample(self, state: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n shots of a qubit prepared in ``state`` (0, 1 or 2): (n, 2) float64, ADC units.

        Raises:
            ValueError: ``state`` not 0, 1 or 2.
        """
        m0, m1, m2 = self.means()
        if state == 0:
            centre = np.broadcast_to(m0, (n, 2))
        elif state == 1:
            frac = self._decay_fraction(self.readout_over_t1, n, rng)
            centre = m0 + frac[:, None] * (m1 - m0)
        elif state == 2:
            f2 = self._decay_fraction(self.readout_over_t1_21, n, rng)
            f1 = np.minimum(self._decay_fraction(self.readout_over_t1, n, rng), 1.0 - f2)
            centre = f2[:, None] * m2 + f1[:, None] * m1 + (1.0 - f2 - f1)[:, None] * m0
        else:
            raise ValueError(f"state: the model has states 0, 1 and 2, got {state!r}")
        return centre + rng.normal(0.0, self.std, size=(n, 2))

    def describe(self) -> dict:
        """JSON-able parameters."""
        d = asdict(self)
        for name in ("mean0", "mean1", "mean2"):
            d[name] = list(getattr(self, name))
        return d
