"""LogicSAGE: a neural translator and a symbolic validator (z3) in a Socratic repair loop.

"LogicSAGE" (ICML 2026 poster 65084; earlier "Logical-SAGE", AAAI'26 Bridge workshop, openreview
65A1alu4Ib): System 1 translates a reasoning problem into a logic program and also answers directly;
System 2 (a solver) executes the program; the solver's complaints (syntax, undeclared symbols, sort
mismatches, inconsistent premises with their unsat core, disagreement with System 1) become targeted
questions that drive repair of the implicated parts over rounds; adaptive fusion falls back on the
neural answer when the program still fails. See ``seeds/logicsage.md``.

Modules: :mod:`.problems` (generated problems and their gold programs), :mod:`.solver` (the DSL, its
checks and z3 execution), :mod:`.translator` (tiny translator and neural answerer), :mod:`.loop`
(LogicSAGE and the baselines), :mod:`.experiment` (the run).
"""

#: problem styles: ProntoQA-like chains (T/F), ProofWriter-like rules with negation (T/F/Unknown),
#: LogicalDeduction-like ordering puzzles (T/F)
DATASETS = ("prontoqa", "proofwriter", "deduction")
#: compared methods: neural-only and translate-once use no repair; resample (best-of-k whole programs on
#: the same feedback triggers) and logicsage get the same solver calls and translator passes per round
ARMS = ("neural-only", "translate-once", "resample", "logicsage")
ANSWERS = ("True", "False", "Unknown")
