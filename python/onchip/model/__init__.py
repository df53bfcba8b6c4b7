"""Learner models: the fixed-point golden models (the semantics) and their float twins."""

from .decision import decisions
from .golden import GoldenLearner, initial_parameters, layout, split_parameters
from .stream import SampleKind

__all__ = ["GoldenLearner", "SampleKind", "decisions", "initial_parameters", "layout", "split_parameters"]
