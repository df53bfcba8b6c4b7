"""TAPC - task-aware preference calibration for DPO (seed #8, ICML 2026 poster 65082).

A reference model's perplexity differential ``d = log PPL_ref(rejected) - log PPL_ref(chosen)``
is mapped to a confidence that the preference label is right, ``c = sigmoid(a(t) d + b(t))``,
with slope and bias from a task encoder over the prompt; the map is meta-learned on a small clean
reference set (one-step look-ahead) and the confidences are the soft labels of DPO. Here on a tiny
language model trained on a synthetic mix of factual and creative prompts. See seeds/tapc.md.
"""

ARMS = ("dpo", "cdpo", "rdpo", "uniform", "tapc", "oracle", "clean", "dpo-long", "rdpo-long")
#: arms that run more DPO steps, so that their policy forwards match a calibrated arm's (equal compute)
LONG_ARMS = ("dpo-long", "rdpo-long")
TASKS = ("factual", "creative")
