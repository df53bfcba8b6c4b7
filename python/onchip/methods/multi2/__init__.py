"""Multi^2: a high-level agent (supervised fine-tuning) that emits sub-goals as text and a low-level
agent (format warm-up, offline IQL, online RL) that executes them and declares each one done.

Stand-in for arXiv 2606.03698 (code: github park-sangeun/Multi-Square) on a grid world written
here whose horizon is the number of sub-instructions. See ``seeds/multi2.md``.

Modules: :mod:`.env` (grid world, experts, drift counting), :mod:`.agents` (encoders, high-level
SFT, low-level stages, flat baselines, evaluation), :mod:`.experiment` (the run).
"""

#: the arms, torch-free so the command line can offer them
ARMS = ("multi2", "hier-offline", "hier-bc", "flat-iql", "flat-bc")
