"""HLS C++ learners: Vitis HLS sources emitted from a LearnerSpec, checked by C simulation.

* :func:`emit` / :func:`write`: the C++ project (``ap_fixed`` types of the golden
  formats, AXI4-Stream top function, Vitis HLS script) (:mod:`onchip.hls.emit`);
* :func:`build_library`: g++ against hls4ml's ap_types headers, cached (:mod:`onchip.hls.build`);
* :func:`run` / :class:`HlsLearner`: whole streams through the C simulation (:mod:`onchip.hls.backend`).
"""

from .backend import HlsLearner, run
from .build import ap_types_dir, build_library
from .emit import HlsProject, emit, write

__all__ = ["HlsLearner", "HlsProject", "ap_types_dir", "build_library", "emit", "run", "write"]
