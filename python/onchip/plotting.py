"""Matplotlib set up for files only (no display needed)."""

from __future__ import annotations


def pyplot():
    """Return ``matplotlib.pyplot`` with the non-interactive Agg backend selected."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
