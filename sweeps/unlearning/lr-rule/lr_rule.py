"""The learning-rate rule of the unlearning runs, measured on calibration seeds (not the reported ones).

Rule (stated before the reported runs, the same rate then used by every arm and every bit width):
the smallest SGD rate on the grid GRID at which the entropy gradient is no longer saturated at
8 bits, i.e. at which *both* entropy arms (OEU and OEU-noproj, each from the same original model of a
calibration seed) end with a mean forget-set entropy of at least THRESHOLD * log C on digits,
forget class:3, 10 epochs. The original 8-bit model's logits span +-16 (9-bit signed), so its
softmax on the forget set is near one-hot and the entropy gradient vanishes; a rate too small
leaves the forget set at low entropy (the previous lr 0.2 ended at 0.1-0.3 of log C).

Run: OMP_NUM_THREADS=1 python sweeps/unlearning/lr-rule/lr_rule.py  (writes lr_rule.json, lr_rule.md here)
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from onchip.methods.unlearning.data import make_split
from onchip.methods.unlearning.methods import UnlearnConfig, model_fingerprint, train_original, unlearn
from onchip.methods.unlearning.metrics import evaluate

GRID = (0.2, 0.5, 1.0, 2.0)
SEEDS = (100, 101, 102)
THRESHOLD = 0.5
BITS, FORGET = 8, "class:3"


def main() -> None:
    torch.set_num_threads(1)
    here = Path(__file__).parent
    rows = []
    for seed in SEEDS:
        split = make_split("digits", FORGET, seed)
        original = train_original(split, BITS, UnlearnConfig(), (64, 32), seed)
        sha = model_fingerprint(original)
        for lr in GRID:
            for arm in ("oeu", "oeu-noproj"):
                model, _ = unlearn(arm, original, split, replace(UnlearnConfig(), lr=lr), seed=seed)
                e = evaluate(model, split, seed)
                rows.append({"seed": seed, "lr": lr, "arm": arm, "original": sha,
                             "forget_entropy": e["forget_entropy"], "forget_acc": e["forget_acc"],
                             "retain_acc": e["retain_acc"], "test_acc": e["test_acc"]})
                print(rows[-1], flush=True)
    mean = {(lr, arm): float(np.mean([r["forget_entropy"] for r in rows if r["lr"] == lr and r["arm"] == arm]))
            for lr in GRID for arm in ("oeu", "oeu-noproj")}
    chosen = next((lr for lr in GRID if min(mean[(lr, "oeu")], mean[(lr, "oeu-noproj")]) >= THRESHOLD), None)
    out = {"rule": __doc__.split("Run:")[0].strip(), "grid": GRID, "seeds": SEEDS, "threshold": THRESHOLD,
           "mean_forget_entropy": {f"{lr:g}/{arm}": v for (lr, arm), v in mean.items()}, "chosen_lr": chosen,
           "rows": rows}
    (here / "lr_rule.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# Learning-rate rule (8 bits, digits, forget class:3, calibration seeds 100-102)", "",
             out["rule"], "", "| lr | arm | forget entropy / log C per seed | mean | retain acc % per seed |",
             "|---|---|---|---|---|"]
    for lr in GRID:
        for arm in ("oeu", "oeu-noproj"):
            rs = [r for r in rows if r["lr"] == lr and r["arm"] == arm]
            ent = ", ".join(f"{r['forget_entropy']:.2f}" for r in rs)
            ret = ", ".join(f"{100 * r['retain_acc']:.1f}" for r in rs)
            lines.append(f"| {lr:g} | {arm} | {ent} | {mean[(lr, arm)]:.2f} | {ret} |")
    lines += ["", f"Chosen: lr = {chosen} (the smallest rate on the grid where both arms reach {THRESHOLD} log C)."]
    (here / "lr_rule.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
