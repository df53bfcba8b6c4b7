"""Meta-learned quantum-gate calibration (arXiv 2601.18973, "When does adaptation win?").

Lindblad gate simulation (``lindblad``), device distributions (``tasks``), first-order
MAML and baselines (``maml``), the adaptation-gain scaling law (``scaling``), the
few-shot budget protocol (``protocol``), the linear-quadratic check (``lqr``), the
learner-driven calibration loop (``calibration``) and the full measurement
(``experiment``). CLI: ``onchip quantum-meta``.
"""
