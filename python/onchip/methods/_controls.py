"""Negative controls of the seed methods: the positive control's setting with its plant removed.

A positive control (:func:`onchip.methods._report.positive_control`) shows that an experiment can see
the mechanism when it is planted; its negative control runs the same arms with the plant removed (or
the mechanism ablated) and must *not* see a difference. Together they show that the control's
outcome is decided by the model the experiment runs through, not by the code that scores it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._report import excludes_zero, need, paired_difference


def negative_control(setting: str, method: str, ablation: str, method_values: Sequence[float],
                     ablation_values: Sequence[float], *, seeds: Sequence[int], metric: str) -> dict:
    """The ``negative_control`` object beside a method's ``positive_control`` in ``metrics.json``.

    Args:
        setting: what was removed from the positive control's setting, in words.
        method, ablation: the two arms' names (the plant-free arm and the arm it is compared with).
        method_values, ablation_values: each arm's value per seed, same order as ``seeds``.
        seeds: the seeds.
        metric: what the values measure (the positive control's metric).

    Returns:
        ``{"setting", "metric", "method", "ablation", "seeds", "method_values", "ablation_values",
        "paired": paired_difference(method_values, ablation_values), "holds_zero": bool}``;
        ``holds_zero`` is True when the paired interval holds zero (the control passes: nothing
        planted, nothing seen).

    Raises:
        ValueError: as :func:`~onchip.methods._report.paired_difference`, or a seed count that differs
            from the values'.
    """
    need(len(seeds) == len(method_values), "seeds", list(seeds), f"one seed per value ({len(method_values)})")
    paired = paired_difference(method_values, ablation_values)
    return {"setting": setting, "metric": metric, "method": method, "ablation": ablation,
            "seeds": [int(s) for s in seeds], "method_values": [float(v) for v in method_values],
            "ablation_values": [float(v) for v in ablation_values], "paired": paired,
            "holds_zero": not excludes_zero(paired)}
