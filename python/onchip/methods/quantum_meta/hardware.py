"""Hardware-in-the-loop calibrator: the per-device adaptation loop on the fixed-point KAN learner.

Source: arXiv 2601.18973 (adaptation on a new device), run the way a
calibrator inside the FPGA would: each step the learner predicts a control
correction from the device features, the loop measures fidelities around it
and feeds the learner one (features, improved correction) sample
(:func:`onchip.methods.quantum_meta.calibration.calibrate`). The learner is
an online KAN (:mod:`onchip.model`): its golden model and the Verilated RTL
give identical corrections, and its float twin measures what fixed point costs.
"""

from __future__ import annotations

import numpy as np

from ...spec import LearnerSpec


def calibrator_spec(n_features: int, n_outputs: int) -> LearnerSpec:
    """The KAN calibrator: features (log noise rates, |x| < 4) -> P corrections, 16-bit formats.

    Single layer F -> P, G = 8, k = 3 on [-4, 4). Each of the F edges adds
    about 0.6 lr to the fraction of the error one step removes (sum of squared
    cubic basis values), so lr = 2**-ceil(log2 F) keeps that fraction near 0.6
    for any F: a damped step, never an overshoot.
    """
    lr = 2.0 ** -int(np.ceil(np.log2(max(n_features, 1))))
    return LearnerSpec(kind="kan", widths=(n_features, n_outputs), grid_size=8, spline_order=3,
                       grid_range=(-4.0, 4.0), learning_rate=lr, init_scale=0.0,
                       name="kan-calibrator")


class SpecCorrectionLearner:
    """A :class:`~onchip.methods.quantum_meta.calibration.CorrectionLearner` backed by a learner spec
    on any backend of :mod:`onchip.backends`.

    The learner holds the current parameters, as the host of a device would read them back: a
    prediction is an inference-only run from them, a step a one-sample test-then-train run that
    returns the updated parameters. On the ``rtl`` backend both go through the Verilated design's
    parameter port (no replay of the sample history); with the calibrator's sequential schedule
    the result equals a device that kept its state.

    Args:
        spec: the learner (n_in = features F, n_out = corrections P).
        backend: a name of :func:`onchip.backends.backend_names` (``"golden"``, ``"float"``,
            ``"rtl"``, ``"hls"``, ``"cocotb"``).

    Raises:
        ValueError: unknown backend.
    """

    def __init__(self, spec: LearnerSpec, backend: str = "golden"):
        from ...backends import get_backend
        from ...model import GoldenLearner

        self.spec, self.backend = spec, backend
        self._impl = get_backend(backend)
        self._golden = GoldenLearner(spec)  # quantizes and dequantizes for the fixed-point backends
        #: current parameters (raw, or float for ``float``); None: the spec's initial parameters
        self.theta: np.ndarray | None = None
        #: raw predictions made by the fixed-point learner, in order
        self.raw_predictions: list[np.ndarray] = []

    def predict(self, x: np.ndarray) -> np.ndarray:
        """(F,) features -> (P,) correction (float)."""
        x = np.asarray(x, dtype=np.float64).reshape(1, -1)
        if not self._impl.raw:
            return self._impl.run(self.spec, x, None, theta=self.theta, learn=False)[0][0]
        raw = self._impl.run(self.spec, self._golden.quantize_inputs(x), None, theta=self.theta, learn=False)[0][0]
        self.raw_predictions.append(raw.copy())
        return self._golden.dequantize_outputs(raw)

    def step(self, x: np.ndarray, y: np.ndarray) -> None:
        """Learn one sample: features (F,), target correction (P,)."""
        x = np.asarray(x, dtype=np.float64).reshape(1, -1)
        y = np.asarray(y, dtype=np.float64).reshape(1, -1)
        if self._impl.raw:
            x, y = self._golden.quantize_inputs(x), self._golden.quantize_targets(y)
        self.theta = self._impl.run(self.spec, x, y, theta=self.theta)[1]


def hardware_in_the_loop(gate: str = "x", n_devices: int = 2, k_steps: int = 8, seed: int = 0,
                         backends: tuple[str, ...] = ("float", "golden")) -> dict:
    """Calibrate fresh devices with the KAN calibrator on several backends.

    The base controls are the analytic pulse (no meta-learned policy is needed
    for the comparison); each backend starts from the same zero correction.

    Returns:
        dict with, per backend, ``fidelity`` (n_devices, K+1) and, for fixed-point
        backends, ``raw_predictions`` (n_devices, K+1, P) int; the spec; and
        ``step_latency_cycles``: cycles of one adaptation step on the RTL
        (sample accepted to update committed, sequential schedule).

    Raises:
        ValueError: unknown gate or backend, k_steps < 0, n_devices < 1.
    """
    from .calibration import calibrate
    from .lindblad import gate_problem
    from .tasks import device_family, sample_devices

    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    problem = gate_problem(gate)
    family = device_family(gate)
    devices = sample_devices(family, n_devices, 0.06, np.random.default_rng(seed))
    spec = calibrator_spec(devices.features.shape[1], problem.n_controls)
    base = problem.reference
    from ...hw import generate

    info = generate(spec).info
    out: dict = {
        "gate": gate, "k_steps": k_steps, "spec": spec.to_dict(),
        "step_latency_cycles": info["latency_cycles_update"],
        "prediction_latency_cycles": info["latency_cycles_prediction"],
    }
    for backend in backends:
        fids, raws = [], []
        for i in range(n_devices):
            learner = SpecCorrectionLearner(spec, backend)
            fids.append(calibrate(problem, devices, i, base, learner, k_steps))
            raws.append(np.array(learner.raw_predictions))
        out[backend] = {"fidelity": np.array(fids)}
        if backend != "float":
            out[backend]["raw_predictions"] = np.array(raws)
    return out
