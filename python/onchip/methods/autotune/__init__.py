"""``onchip autotune``: SPARK's factor-conditioned architecture search (arXiv 2605.04057, ICML 2026) over
our own :class:`~onchip.spec.LearnerSpec`, scored by the golden model under hardware budgets.

Modules: :mod:`.space` (factors, moves, scope guard), :mod:`.evaluate` (streams, accuracy,
diagnostics, budgets), :mod:`.resources` (Yosys-calibrated resource surrogate, cached Yosys
check), :mod:`.search` (router, conditioner, scoped rewriter and the baseline arms),
:mod:`.interaction` (the measured coupling of the factors: two-way factorial designs),
:mod:`.experiment` (the run and its outputs), :mod:`.calibrate` (the surrogate's calibration table).
"""

#: search tasks (:mod:`.evaluate`), arms (:mod:`.search`) and resource families: here, free of
#: heavy imports, so that building the command line stays fast
SEARCH_TASKS = ("readout-drift", "drift-regression")
ARMS = ("spark", "spark-noguard", "freeform", "asr-only", "rc-sar-only", "random", "tpe")
FAMILIES = ("xcup", "xc7", "ecp5", "ice40")
