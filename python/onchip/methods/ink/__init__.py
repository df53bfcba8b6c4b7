"""The first drop of ink: how a proportion p of hard distractors in a fixed-length context hurts
answering, with attention shares and filtering experiments (arXiv 2605.10828; see ``seeds/ink.md``).

Modules: :mod:`.documents` (fictional-entity contexts), :mod:`.subjects` (Gemma 3 270M, a tiny
transformer trained here), :mod:`.stream` (the analogue on the fixed-point readout learner),
:mod:`.experiment` (``onchip ink``).
"""

#: subjects of ``onchip ink`` (free of torch for the command line)
SUBJECTS = ("gemma", "tiny", "learner")
#: filtering arms at one proportion (see :func:`onchip.methods.ink.documents.filtered`)
FILTERS = ("none", "shorten", "swap-hard-to-easy", "drop-hard")
