"""Human-likeness of behaviour as a distribution distance (seed #16: "A Computational Framework for
Evaluating Human-likeness in LLMs' Open-ended Human Behaviors", ICML 2026 poster 65092).

Real human behaviour shipped with statsmodels (Greene's intercity travel-mode choices and the 1996
American National Election Study) is compared with the behaviour of generators - a language model
with persona prompts, fitted statistical models, a utility maximiser, a uniform random agent and
held-out humans - on metrics grouped by principle (rationality, consistency, diversity). Each metric's
distance to the human distribution is divided by the bootstrap split-half distance between two samples
of real people (:func:`.metrics.normalised_distance`: 0 = identical, ~1 = as far as other humans); a
near-human generator (humans with a share x of answers replaced by noise) is the positive control.
See seeds/humanlike.md.
"""

DOMAINS = ("mobility", "opinion")
AGENTS = ("lm", "statistical", "utility", "random", "humans")
PRINCIPLES = ("rationality", "consistency", "diversity")
