"""onchip: fixed-point online learners (KAN, MLP) as verified FPGA hardware.

The Python API; every ``onchip`` command is a thin layer over these names.

- **Learners**: :class:`LearnerSpec`, :func:`load_spec`, :data:`PRESETS`, :class:`Formats`,
  :class:`Fmt` (``ap_fixed<W,I,Q,O>``); :class:`Learner` (one spec on one backend: ``run``,
  ``step``, ``predict``, their ``*_raw`` variants, ``parameters``).
- **Backends** (bit-exact with the golden model): :func:`get_backend`, :func:`register_backend`,
  :func:`backend_names`, :func:`available_backends`, :class:`Backend`.
- **Tasks and the main job**: :func:`make_stream`, :func:`evaluate`, :func:`run_job`.
- **Hardware steps**: :func:`generate` (Verilog + ports, latency and II), :func:`synth` (Yosys
  LUT/FF/DSP/BRAM), :func:`pnr` (nextpnr fmax and bitstream), :func:`vivado` (Vivado project).
- **Verification** (:mod:`onchip.verification`): :func:`verify` (RTL under the cocotb bench and
  HLS C simulation against the golden model, a :class:`VerifyReport` with JUnit XML), and
  :func:`assert_verified` for pytest: ``onchip.verify(spec)``,
  ``onchip.assert_verified("my_learner.toml")``.
- **Sweeps**: :func:`run_sweep`. **Front ends** (trained models -> a spec and raw parameters):
  :func:`from_brevitas` and :mod:`onchip.frontends.hls4ml_bridge` (the ``ml`` extra),
  :func:`from_qkeras` (``qkeras``), :func:`from_pykan` (``pykan``).
- **Errors**: :class:`SpecError`, :class:`DataError`, :class:`ToolError`; a missing optional
  package raises :class:`onchip.extras.MissingExtra`, naming the extra to install.

Names load on first use, so ``import onchip`` stays fast and needs none of the hardware tools.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: exported name -> module that defines it
_EXPORTS = {
    "LearnerSpec": "onchip.spec", "Formats": "onchip.spec", "load_spec": "onchip.spec", "PRESETS": "onchip.spec",
    "Fmt": "onchip.fixed",
    "Learner": "onchip.learner",
    "Backend": "onchip.backends", "get_backend": "onchip.backends", "register_backend": "onchip.backends",
    "backend_names": "onchip.backends", "available_backends": "onchip.backends",
    "make_stream": "onchip.tasks", "evaluate": "onchip.tasks",
    "run_job": "onchip.run",
    "generate": "onchip.hw",
    "synth": "onchip.flow.steps", "pnr": "onchip.flow.steps", "vivado": "onchip.flow.steps",
    "run_sweep": "onchip.sweep",
    "verify": "onchip.verification", "assert_verified": "onchip.verification",
    "VerifyReport": "onchip.verification",
    "from_brevitas": "onchip.frontends.brevitas",
    "from_qkeras": "onchip.frontends.qkeras", "from_pykan": "onchip.frontends.pykan",
    "SpecError": "onchip.errors", "DataError": "onchip.errors", "ToolError": "onchip.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'onchip' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
