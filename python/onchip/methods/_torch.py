"""Lazy access to torch for the seed methods: their modules import without it (the command line's
``--help`` and the core install need no torch) and reach it only when a run starts."""

from __future__ import annotations


def import_torch():
    """The ``torch`` module, imported on first call (it is an extra of the seed methods).

    Raises:
        ModuleNotFoundError: torch is not installed.
    """
    import torch

    return torch
