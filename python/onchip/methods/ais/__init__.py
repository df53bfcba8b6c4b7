"""Adaptive importance sampling driven by the entropic mirror step (Entropic Mirror Monte Carlo).

Source: "Entropic Mirror Monte Carlo", ICML 2026, arXiv 2602.03165. The package holds the
targets with known normalising constants (:mod:`.targets`), the Gaussian-mixture proposal
(:mod:`.proposal`), the samplers with their baselines (:mod:`.samplers`) and the
per-iteration diagnostics (:mod:`.metrics`).
"""

import importlib

#: samplers (:mod:`.samplers`) and targets (:mod:`.targets`): defined here, free of scipy, so that
#: building the command line stays fast
METHODS = ("em2c", "em2c-nomove", "pmc", "amis")
TARGETS = ("gmm2", "gmm4", "grid25", "funnel")

_LAZY = {
    "IterationMetrics": "metrics", "kl_target_to_proposal": "metrics", "mode_coverage": "metrics",
    "DefensiveMixture": "proposal", "GaussianMixtureDensity": "proposal",
    "SamplerConfig": "samplers", "run_sampler": "samplers",
    "GaussianMixtureTarget": "targets", "NealFunnel": "targets", "make_target": "targets",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METHODS",
    "TARGETS",
    "DefensiveMixture",
    "GaussianMixtureDensity",
    "GaussianMixtureTarget",
    "IterationMetrics",
    "NealFunnel",
    "SamplerConfig",
    "kl_target_to_proposal",
    "make_target",
    "mode_coverage",
    "run_sampler",
]
