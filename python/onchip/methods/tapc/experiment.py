"""The TAPC experiment: every arm trains the same reference policy with DPO on the same noisy pairs
for the same number of steps; clean held-out preference accuracy per prompt type is reported.

Also measured (not assumed): how well the perplexity differential ``d`` predicts whether a noisy
label is right, per prompt type (AUC), and the slopes and biases each calibration learned. Writes
``metrics.json``, ``results.md``, ``accuracy.png`` and ``calibration.png``. Method: ICML 2026 poster
65082 (see seeds/tapc.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, markdown_table, mean_std_dict, need, recorded_config, rng, save, write_metrics,
    write_results,
)
from . import ARMS, TASKS

ARM_LABELS = {"dpo": "DPO", "cdpo": "cDPO (label smoothing)", "rdpo": "rDPO (Chowdhury 2024)",
              "uniform": "uniform calibration", "tapc": "TAPC", "oracle": "TAPC, oracle task labels",
              "clean": "DPO on clean labels"}


@dataclass(frozen=True)
class TapcConfig:
    """One run; validated on construction.

    Attributes:
        arms: subset of :data:`~onchip.methods.tapc.ARMS`.
        seeds: one or more seeds (>= 0): world, reference model, pairs, flips, batches.
        noise: flip rate of the preference labels, in [0, 0.5).
        n_train: noisy training pairs per prompt type (>= 8).
        meta_size: clean reference pairs per prompt type for the calibration (>= 2).
        n_eval: clean held-out pairs per prompt type (>= 4).
        steps: DPO steps per arm (>= 1); batch: pairs per step (>= 2).
        ref_steps: reference-model training steps (>= 1).
        beta: DPO temperature (> 0).
        out, progress, command: output folder, progress bars, recorded command line.

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    arms: tuple[str, ...] = ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    noise: float = 0.3
    n_train: int = 300
    meta_size: int = 32
    n_eval: int = 100
    steps: int = 100
    batch: int = 32
    ref_steps: int = 500
    beta: float = 0.5
    out: str = "out/tapc"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        arms = tuple(self.arms)
        object.__setattr__(self, "arms", arms)
        need(bool(arms) and all(a in ARMS for a in arms) and len(set(arms)) == len(arms), "arms", list(arms),
             f"distinct names from {', '.join(ARMS)}")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        need(len(self.seeds) >= 1 and min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
             list(self.seeds), "one or more distinct integers >= 0")
        need(0 <= self.noise < 0.5, "noise", self.noise, "must be in [0, 0.5) (rDPO needs < 1/2)")
        for name, lo in (("n_train", 8), ("meta_size", 2), ("n_eval", 4), ("steps", 1), ("batch", 2), ("ref_steps", 1)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(self.batch <= 2 * self.n_train, "batch", self.batch, f"must be <= 2 * n_train = {2 * self.n_train}")
        need(self.beta > 0, "beta", self.beta, "must be > 0")


MAX_LEN = 10


def run_seed(c: TapcConfig, seed: int) -> dict:
    """One seed: world, reference model, pairs, every arm; returns the seed's numbers."""
    from .._tiny import Vocab
    from .train import ArmSettings, auc, preference_accuracy, reference_model, tensorise, train_arm
    from .world import flip, make_pairs, make_world, reference_corpus, words

    vocab = Vocab(words())
    world = make_world(rng(seed, "world"))
    ref, config = reference_model(vocab, reference_corpus(world, rng(seed, "corpus")), seed=seed, steps=c.ref_steps,
                                  max_len=MAX_LEN, progress=c.progress)
    clean_train = make_pairs(world, rng(seed, "train-pairs"), c.n_train, held_out=False)
    noisy = flip(clean_train, c.noise, rng(seed, "flips"))
    meta = make_pairs(world, rng(seed, "meta-pairs"), c.meta_size, held_out=False)
    held = make_pairs(world, rng(seed, "eval-pairs"), c.n_eval, held_out=True)
    train_t, meta_t, eval_t = (tensorise(p, vocab, ref, MAX_LEN) for p in (noisy, meta, held))
    order_rng = rng(seed, "batches")
    order = np.stack([order_rng.choice(len(train_t), c.batch, replace=False) for _ in range(c.steps)])
    settings = ArmSettings(steps=c.steps, batch=c.batch, beta=c.beta, eps=c.noise)

    d = train_t.d.numpy()
    out = {"d_auc": {t: auc(d[train_t.task == k], train_t.correct[train_t.task == k]) for k, t in enumerate(TASKS)},
           "d_mean_if_correct": {t: float(d[(train_t.task == k) & (train_t.correct == 1)].mean()) for k, t in enumerate(TASKS)},
           "d_mean_if_flipped": {t: float(d[(train_t.task == k) & (train_t.correct == 0)].mean()) if c.noise > 0 else None
                                 for k, t in enumerate(TASKS)},
           "accuracy": {}, "calibration": {}, "seconds": {}}
    for arm in c.arms:
        t0 = time.perf_counter()
        policy, info = train_arm(arm, ref, config, train_t, meta_t, order, settings, seed=seed, progress=c.progress)
        acc = preference_accuracy(policy, eval_t)
        out["accuracy"][arm] = {t: float(acc[eval_t.task == k].mean()) for k, t in enumerate(TASKS)}
        out["accuracy"][arm]["mean"] = float(np.mean([out["accuracy"][arm][t] for t in TASKS]))
        out["seconds"][arm] = time.perf_counter() - t0
        if info:
            out["calibration"][arm] = {t: {"slope": float(info["slope"][train_t.task == k].mean()),
                                           "bias": float(info["bias"][train_t.task == k].mean()),
                                           "confidence_auc": auc(info["confidence"][train_t.task == k],
                                                                 train_t.correct[train_t.task == k])}
                                       for k, t in enumerate(TASKS)}
    return out


def run(config: TapcConfig) -> dict:
    """Run every seed and write the output folder; returns the content of ``metrics.json``."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)  # tiny tensors: threads only add hand-off stalls
    t0 = time.perf_counter()
    per_seed = {s: run_seed(c, s) for s in c.seeds}

    cols = (*TASKS, "mean")
    summary = {"accuracy": {a: {t: mean_std_dict([per_seed[s]["accuracy"][a][t] for s in c.seeds]) for t in cols}
                            for a in c.arms},
               "d_auc": {t: mean_std_dict([per_seed[s]["d_auc"][t] for s in c.seeds]) for t in TASKS},
               "calibration": {a: {t: {k: mean_std_dict([per_seed[s]["calibration"][a][t][k] for s in c.seeds])
                                       for k in ("slope", "bias", "confidence_auc")} for t in TASKS}
                               for a in c.arms if a in ("uniform", "tapc", "oracle")}}
    method = "tapc" if "tapc" in c.arms else c.arms[0]
    others = [a for a in c.arms if a != method]
    acc = summary["accuracy"]
    head = headline("clean held-out preference accuracy (implicit-reward ranking), mean over prompt types "
                    f"{', '.join(TASKS)}", ARM_LABELS[method], acc[method]["mean"]["mean"],
                    {ARM_LABELS[a]: acc[a]["mean"]["mean"] for a in others},
                    budget={"dpo_steps": c.steps, "pairs_per_step": c.batch, "noisy_train_pairs": 2 * c.n_train,
                            "clean_reference_pairs (calibrated arms only)": 2 * c.meta_size,
                            "note": "calibrated arms also take one look-ahead meta-step per DPO step"},
                    seeds=c.seeds, direction="higher", std=acc[method]["mean"]["std"],
                    baseline_std={ARM_LABELS[a]: acc[a]["mean"]["std"] for a in others})
    settings = recorded_config(c)
    settings.update(arms=list(c.arms), seeds=list(c.seeds))
    result = {"headline": head, "config": settings, "summary": summary,
              "per_seed": {str(s): v for s, v in per_seed.items()}, "seconds": time.perf_counter() - t0}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def results_table(result: dict) -> str:
    """Markdown: accuracy per arm and type; the measured predictiveness of d; the learned calibrations."""

    c, s = result["config"], result["summary"]

    def f(x):
        return f"{x['mean']:.3f} ± {x['std']:.3f}"

    text = markdown_table(["arm", *TASKS, "mean"], [[ARM_LABELS[a], *[f(s["accuracy"][a][t]) for t in (*TASKS, "mean")]]
                                                     for a in c["arms"]],
                          caption=f"Clean held-out preference accuracy (mean ± std over seeds {c['seeds']}; "
                          f"flip rate {c['noise']}, {c['steps']} DPO steps x {c['batch']} pairs per arm)")
    text += "\n" + markdown_table(["prompt type", "AUC of d for 'label is right'"],
                                  [[t, f(s["d_auc"][t])] for t in TASKS],
                                  caption="How well the reference perplexity differential predicts label quality "
                                  "(0.5 = no information, < 0.5 = misleading)")
    if s["calibration"]:
        rows = [[ARM_LABELS[a], t, f(v["slope"]), f(v["bias"]), f(v["confidence_auc"])]
                for a, by_t in s["calibration"].items() for t, v in by_t.items()]
        text += "\n" + markdown_table(["arm", "prompt type", "slope a(t)", "bias b(t)", "AUC of confidence"], rows,
                                      caption="Learned calibration c = sigmoid(a(t) d + b(t)) on the training pairs")
    return text


def _write(stage, c: TapcConfig, result: dict) -> None:
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    write_results(stage, "TAPC: calibrated preference optimisation", c.command or "onchip tapc", results_table(result))
    s = result["summary"]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    grouped_bars(ax, [*TASKS, "mean"], {ARM_LABELS[a]: [s["accuracy"][a][t]["mean"] for t in (*TASKS, "mean")]
                                        for a in c.arms},
                 errors={ARM_LABELS[a]: [s["accuracy"][a][t]["std"] for t in (*TASKS, "mean")] for a in c.arms},
                 rotation=0)
    ax.axhline(0.5, color="k", lw=0.6, ls=":")
    ax.set_ylabel("clean held-out preference accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    save(fig, stage / "accuracy.png")
    if s["calibration"]:
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        d = np.linspace(-4, 4, 101)
        for a, by_t in s["calibration"].items():
            for t, v in by_t.items():
                ax.plot(d, 1 / (1 + np.exp(-(v["slope"]["mean"] * d + v["bias"]["mean"]))),
                        ls="-" if t == "factual" else "--", label=f"{ARM_LABELS[a]}: {t}")
        ax.set_xlabel("perplexity differential d (nats/token)")
        ax.set_ylabel("confidence c")
        ax.legend(fontsize=6)
        save(fig, stage / "calibration.png")
