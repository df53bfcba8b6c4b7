"""Interaction-based prompt sensitivity (IPS): Harsanyi (AND) interactions of a model's output over
the variables of a prompt, compared between a prompt and a subtly changed one.

Qin, Wang, Wang, Wei, Shen, ICML 2026 (openreview 6fHZR6uxNa). See ``seeds/ips.md``.

Modules: :mod:`.harsanyi` (the transform and the comparison scores), :mod:`.language` (the
sentiment language, Gemma 3 270M and the tiny models), :mod:`.learners` (the fixed-point
learners, prompt change = number-format change), :mod:`.experiment` (``onchip ips``).
"""

#: subjects of ``onchip ips`` (names free of torch for the command line)
SUBJECTS = ("gemma", "tiny", "learners")
