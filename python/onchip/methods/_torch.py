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


def seeded_init(seed: int, build):
    """``build()`` with torch's global generator seeded with ``seed``, inside a fork of that generator.

    A module's initial weights come from the global generator, which torch seeds differently in every
    process: built this way they are a function of ``seed`` alone, whatever ran before, and the caller's
    generator is left as it was (``torch.random.fork_rng``; the CPU generator only).

    Args:
        seed: an integer >= 0, e.g. a named stream of the run's seed
            (:func:`onchip.methods._report.seed_int`).
        build: a function of no arguments that constructs the module(s).

    Returns:
        What ``build`` returns.

    Raises:
        ValueError: ``seed`` is negative.
    """
    if int(seed) < 0:
        raise ValueError(f"seed: must be >= 0, got {seed!r}")
    torch = import_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return build()
