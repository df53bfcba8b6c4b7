"""HLS C++ learners: Vitis HLS sources emitted from a LearnerSpec, checked by C simulation.

* :func:`emit` / :func:`write`: the C++ project (``ap_fixed`` types of the golden
  formats, AXI4-Stream top function, Vitis HLS script) (:mod:`onchip.hls.emit`);
* :func:`build_simulator`: g++ against hls4ml's ap_types headers, cached (:mod:`onchip.hls.build`);
* :func:`run` / :class:`HlsLearner`: whole streams through the C simulation, run as a child
  process (:mod:`onchip.hls.backend`); its failures raise :class:`HlsSimulationError`.
"""

from .backend import HlsLearner, HlsSimulationError, run
from .build import HlsBuildError, ap_types_dir, build_simulator
from .emit import HlsProject, emit, write

__all__ = [
    "HlsBuildError", "HlsLearner", "HlsProject", "HlsSimulationError", "ap_types_dir", "build_simulator",
    "emit", "run", "write",
]
