"""The reference designs committed under ``rtl/``: every preset, sequential and pipelined.

``python -m onchip.hw.reference [FOLDER]`` (default ``rtl``) rewrites
``FOLDER/<preset>/`` (the preset as it is, sequential) and
``FOLDER/<preset>-pipelined/`` (pipelined at the smallest staleness its
pipeline allows), each with ``onchip_learner.v``, ``onchip_learner_axis.v``
and ``onchip_learner.json``. A test regenerates them and fails on any change.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..spec import PRESETS, LearnerSpec


def reference_specs() -> dict[str, LearnerSpec]:
    """Folder name -> spec of every reference design."""
    from .learner import min_staleness

    out = {}
    for name, spec in PRESETS.items():
        seq = spec.replace(schedule="sequential")
        out[name] = seq
        d = min_staleness(seq)
        out[f"{name}-pipelined"] = spec.replace(schedule="pipelined", staleness=d)
    return out


def write_reference_rtl(root: str | Path = "rtl") -> list[Path]:
    """Regenerate every reference design under ``root`` (each folder replaced atomically)."""
    from ..flow.steps import write_design
    from ..io import atomic_output_dir
    from . import generate

    written = []
    for name, spec in reference_specs().items():
        design = generate(spec)
        with atomic_output_dir(Path(root) / name) as staging:
            write_design(design, staging)
        written.append(Path(root) / name)
    return written


if __name__ == "__main__":
    for path in write_reference_rtl(sys.argv[1] if len(sys.argv) > 1 else "rtl"):
        print(path)
