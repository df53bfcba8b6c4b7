"""The HLS backend: run whole streams through the C simulation of the emitted C++.

:class:`HlsLearner` loads the compiled library (:mod:`onchip.hls.build`) with
ctypes and drives the top function through its AXI4-Stream ports, so that C
simulation exercises exactly the code Vitis HLS synthesizes. Its predictions
and final parameters equal :class:`onchip.model.GoldenLearner`'s bit for bit
(checked by tests/test_hls.py).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..spec import LearnerSpec
from .build import build_library
from .emit import checked_theta, emit

_I64P = ctypes.POINTER(ctypes.c_int64)
# A library's learner state is static C++ data: one user at a time per library.
_LOCKS: dict[str, threading.Lock] = {}
_CHUNK = 4096


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(_I64P)


class HlsLearner:
    """The C-simulated HLS learner of ``spec``.

    Args:
        spec: the learner.
        theta: initial raw parameters (flat int64 (P,), ``coef`` format), loaded
            through the parameter port; default: the compiled-in reset state
            (:func:`onchip.model.golden.initial_parameters`).

    The state lives in the shared library (one per spec, cached on disk and
    loaded once per process): two learners of the same spec share it, so use
    one at a time (:meth:`run` resets and reloads it on every call).

    Raises:
        ValueError: bad ``theta``. FileNotFoundError / RuntimeError: no compiler,
            no ap_types headers, or a compile error.
    """

    _libs: dict[str, ctypes.CDLL] = {}

    def __init__(self, spec: LearnerSpec, theta: np.ndarray | None = None):
        self.spec = spec
        self.theta_init = None if theta is None else checked_theta(spec, theta)
        self.project = emit(spec)
        path, self.compiled = build_library(self.project)
        key = str(path)
        if key not in self._libs:
            lib = ctypes.CDLL(key)
            lib.onchip_sizes.argtypes = [_I64P]
            lib.onchip_reset.argtypes = []
            lib.onchip_load.argtypes = [_I64P]
            lib.onchip_run.argtypes = [_I64P, _I64P, ctypes.c_int64, _I64P, ctypes.c_int]
            lib.onchip_run.restype = ctypes.c_int
            lib.onchip_read.argtypes = [_I64P]
            self._libs[key] = lib
            _LOCKS[key] = threading.Lock()
        self._lib = self._libs[key]
        self._lock = _LOCKS[key]
        sizes = np.zeros(4, np.int64)
        self._lib.onchip_sizes(_ptr(sizes))
        want = [spec.n_in, spec.n_out, spec.parameter_count(), spec.effective_staleness]
        if sizes.tolist() != want:
            raise RuntimeError(f"library {path} has sizes {sizes.tolist()}, expected {want}")

    def _check(self, x_raw, y_raw):
        x = np.ascontiguousarray(x_raw, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != self.spec.n_in:
            raise ValueError(f"x_raw must have shape (N, {self.spec.n_in}), got {np.shape(x_raw)}")
        if y_raw is None:
            return x, np.zeros((len(x), self.spec.n_out), np.int64)
        y = np.ascontiguousarray(y_raw, dtype=np.int64)
        if y.shape != (len(x), self.spec.n_out):
            raise ValueError(f"y_raw must have shape ({len(x)}, {self.spec.n_out}), got {np.shape(y_raw)}")
        return x, y

    def run(self, x_raw, y_raw, *, learn: bool = True, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Reset, load the initial parameters, run the stream, flush and read the parameters.

        Args:
            x_raw: (N, n_in) raw inputs (``input`` format).
            y_raw: (N, n_out) raw targets (``act`` format); ignored when not ``learn``.
            learn: test-then-train (True) or inference only.
            progress: show a tqdm bar.

        Returns:
            (predictions raw int64 (N, n_out), final parameters raw int64 (P,)).

        Raises:
            ValueError: inputs of the wrong shape.
        """
        from tqdm import tqdm

        x, y = self._check(x_raw, y_raw if learn else None)
        preds = np.zeros((len(x), self.spec.n_out), np.int64)
        theta = np.zeros(self.spec.parameter_count(), np.int64)
        lib = self._lib
        with self._lock, tqdm(total=len(x), desc=f"{self.spec.name or self.spec.kind} hls",
                              unit="sample", unit_scale=True, disable=not progress, leave=False) as bar:
            lib.onchip_reset()
            if self.theta_init is not None:
                lib.onchip_load(_ptr(np.ascontiguousarray(self.theta_init)))
            for lo in range(0, len(x), _CHUNK):
                xs, ys = np.ascontiguousarray(x[lo : lo + _CHUNK]), np.ascontiguousarray(y[lo : lo + _CHUNK])
                out = np.zeros((len(xs), self.spec.n_out), np.int64)
                if lib.onchip_run(_ptr(xs), _ptr(ys), len(xs), _ptr(out), int(learn)) != 0:
                    raise RuntimeError("the HLS top function did not answer every sample")
                preds[lo : lo + len(xs)] = out
                bar.update(len(xs))
            lib.onchip_read(_ptr(theta))
        return preds, theta


def run(spec: LearnerSpec, x_raw, y_raw, *, theta=None, learn: bool = True,
        progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Test-then-train (or, without ``learn``, infer over) a whole raw stream on the C-simulated HLS learner.

    Args:
        spec: the learner.
        x_raw: (N, n_in) raw inputs; y_raw: (N, n_out) raw targets (ignored without ``learn``).
        theta: initial raw parameters (default: the spec's initial parameters).
        learn: test-then-train (True) or inference only.
        progress: show a tqdm bar.

    Returns:
        (predictions raw int64 (N, n_out), final parameters raw int64 (P,) after a flush):
        equal to ``GoldenLearner(spec, theta).run(x_raw, y_raw)`` and its ``theta`` after ``flush()``.

    Raises:
        ValueError: bad shapes or theta; FileNotFoundError / RuntimeError: no toolchain or a compile error.
    """
    return HlsLearner(spec, theta).run(x_raw, y_raw, learn=learn, progress=progress)
