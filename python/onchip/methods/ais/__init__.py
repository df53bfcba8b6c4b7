"""Adaptive importance sampling driven by the entropic mirror step (Entropic Mirror Monte Carlo).

Source: "Entropic Mirror Monte Carlo", ICML 2026, arXiv 2602.03165. The package holds the
targets with known normalising constants (:mod:`.targets`), the Gaussian-mixture proposal
(:mod:`.proposal`), the samplers with their baselines (:mod:`.samplers`) and the
per-iteration diagnostics (:mod:`.metrics`).
"""

from .metrics import IterationMetrics, kl_target_to_proposal, mode_coverage
from .proposal import DefensiveMixture, GaussianMixtureDensity
from .samplers import METHODS, SamplerConfig, run_sampler
from .targets import TARGETS, GaussianMixtureTarget, NealFunnel, make_target

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
