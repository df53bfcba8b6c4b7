"""Learner models: the fixed-point golden models (the semantics) and their float twins."""

from .golden import GoldenLearner, initial_parameters, layout, split_parameters

__all__ = ["GoldenLearner", "initial_parameters", "layout", "split_parameters"]
