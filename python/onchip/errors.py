"""The exception types of onchip's API; the CLI turns each into its one-line message.

* :class:`SpecError` (a ``ValueError``): a learner spec that cannot be built; the message
  names the field, the bad value and the reason.
* :class:`DataError` (a ``ValueError``): a data file or array that cannot be used; the message
  names the file (or argument) and what is wrong with it.
* :class:`ToolError` (a ``RuntimeError``): an external tool (Verilator, the C++ compiler,
  Yosys, nextpnr, the HLS C simulation) failed; the message holds the tool's own words and,
  where there is one, the path of its log. The tool-specific errors
  (:class:`onchip.verilator.BuildError`, ...) derive from it.
"""

from __future__ import annotations


class SpecError(ValueError):
    """A learner spec field with a bad value (the message names the field, the value and why)."""


class DataError(ValueError):
    """A data file or array that cannot be used (the message names the file and what is wrong)."""


class ToolError(RuntimeError):
    """An external tool failed (the message holds its output's tail and, if any, its log path)."""
