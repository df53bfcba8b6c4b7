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
    grouped_bars, headline, markdown_table, mean_std_dict, need, paired_difference, paired_line, positive_control,
    recorded_config, rng, save, write_metrics, write_results,
)
from . import ARMS, LONG_ARMS, TASKS

ARM_LABELS = {"dpo": "DPO", "cdpo": "cDPO (label smoothing)", "rdpo": "rDPO (Chowdhury 2024)",
              "uniform": "uniform calibration", "tapc": "TAPC", "oracle": "TAPC, oracle task labels",
              "clean": "DPO on clean labels", "dpo-long": "DPO, equal forwards", "rdpo-long": "rDPO, equal forwards"}


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
        alpha: step size of the calibration's one-step look-ahead ``theta' = theta - alpha grad L_soft``
            (> 0). 0.01 keeps ``theta'`` near ``theta``; at 1.0 (the earlier default) the look-ahead
            lands far from the policy and the meta-gradient taught the calibrations the wrong sign.
        meta_steps: look-ahead meta-steps per DPO step for the calibrated arms (>= 1).
        control: also run the positive control (:data:`CONTROL_ARMS` under the planted, type-dependent
            noise of :func:`~onchip.methods.tapc.world.planted_flips`).
        out, progress, command: output folder, progress bars, recorded command line.

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    arms: tuple[str, ...] = ARMS
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    noise: float = 0.3
    n_train: int = 300
    meta_size: int = 32
    n_eval: int = 100
    steps: int = 100
    batch: int = 32
    ref_steps: int = 500
    beta: float = 0.5
    alpha: float = 0.01
    meta_steps: int = 1
    control: bool = True
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
        need(self.alpha > 0, "alpha", self.alpha, "must be > 0")
        need(self.meta_steps >= 1, "meta_steps", self.meta_steps, "must be >= 1")
        need(not self.control or len(self.seeds) >= 2, "seeds", list(self.seeds),
             "the positive control's paired comparison needs at least 2 seeds")


MAX_LEN = 10
#: the positive control's arms: TAPC, its ablation (one calibration for every prompt) and the oracle encoder
CONTROL_ARMS = ("uniform", "tapc", "oracle")


def run_seed(c: TapcConfig, seed: int, *, planted: bool = False, arms=None) -> dict:
    """One seed: world, reference model, pairs, every arm; returns the seed's numbers.

    Every arm trains on the same pool (noisy pairs + the clean reference pairs, known right) with the same
    batches; ``planted``: the noise of :func:`~onchip.methods.tapc.world.planted_flips` instead of random
    flips. cDPO and rDPO are told the true share of flipped training pairs."""
    from .._tiny import Vocab
    from dataclasses import replace

    from .train import (ArmSettings, auc, compute_ratio, concat, normalise, policy_passes, preference_accuracy,
                        reference_model, tensorise, train_arm)
    from .world import flip, make_pairs, make_world, planted_flips, reference_corpus, words

    arms = c.arms if arms is None else arms
    vocab = Vocab(words())
    world = make_world(rng(seed, "world"))
    ref, config = reference_model(vocab, reference_corpus(world, rng(seed, "corpus")), seed=seed, steps=c.ref_steps,
                                  max_len=MAX_LEN, progress=c.progress)
    clean_train = make_pairs(world, rng(seed, "train-pairs"), c.n_train, held_out=False)
    meta = make_pairs(world, rng(seed, "meta-pairs"), c.meta_size, held_out=False)
    held = make_pairs(world, rng(seed, "eval-pairs"), c.n_eval, held_out=True)
    if planted:
        clean_t = tensorise(clean_train, vocab, ref, MAX_LEN)
        train_t = clean_t.swapped(planted_flips(clean_t.task, clean_t.d.numpy(), c.noise, rng(seed, "planted-flips")))
    else:
        train_t = tensorise(flip(clean_train, c.noise, rng(seed, "flips")), vocab, ref, MAX_LEN)
    meta_t, eval_t = (tensorise(p, vocab, ref, MAX_LEN) for p in (meta, held))
    train_t, meta_t, eval_t = normalise(train_t, meta_t, eval_t)
    pool = concat(train_t, meta_t)
    known = np.r_[np.zeros(len(train_t), bool), np.ones(len(meta_t), bool)]
    flipped = float(1 - train_t.correct.mean())
    settings = ArmSettings(steps=c.steps, batch=c.batch, beta=c.beta, eps=min(flipped, 0.499), alpha=c.alpha,
                           meta_steps=c.meta_steps)
    long = replace(settings, steps=c.steps * compute_ratio(settings, len(meta_t)))
    order_rng = rng(seed, "batches")  # the long arms' first c.steps batches are everyone's batches
    order = np.stack([order_rng.choice(len(pool), c.batch, replace=False) for _ in range(long.steps)])

    d = train_t.d.numpy()
    out = {"flip_share": {t: float(1 - train_t.correct[train_t.task == k].mean()) for k, t in enumerate(TASKS)},
           "d_auc": {t: auc(d[train_t.task == k], train_t.correct[train_t.task == k]) for k, t in enumerate(TASKS)},
           "d_mean_if_correct": {t: float(d[(train_t.task == k) & (train_t.correct == 1)].mean()) for k, t in enumerate(TASKS)},
           "d_mean_if_flipped": {t: float(d[(train_t.task == k) & (train_t.correct == 0)].mean())
                                 if (train_t.correct[train_t.task == k] == 0).any() else None for k, t in enumerate(TASKS)},
           "accuracy": {}, "calibration": {}, "seconds": {},
           "policy_passes": {a: policy_passes(a, long if a in LONG_ARMS else settings, len(meta_t)) for a in arms},
           "dpo_steps": {a: (long if a in LONG_ARMS else settings).steps for a in arms}}
    for arm in arms:
        t0 = time.perf_counter()
        policy, info = train_arm(arm, ref, config, pool, meta_t, order, long if arm in LONG_ARMS else settings,
                                 seed=seed, known=known, progress=c.progress)
        acc = preference_accuracy(policy, eval_t)
        out["accuracy"][arm] = {t: float(acc[eval_t.task == k].mean()) for k, t in enumerate(TASKS)}
        out["accuracy"][arm]["mean"] = float(np.mean([out["accuracy"][arm][t] for t in TASKS]))
        out["seconds"][arm] = time.perf_counter() - t0
        if info:
            noisy = ~known
            out["calibration"][arm] = {t: {"slope": float(info["slope"][noisy & (pool.task == k)].mean()),
                                           "bias": float(info["bias"][noisy & (pool.task == k)].mean()),
                                           "confidence_auc": auc(info["confidence"][noisy & (pool.task == k)],
                                                                 pool.correct[noisy & (pool.task == k)])}
                                       for k, t in enumerate(TASKS)}
            out["calibration"][arm]["late_change"] = float(info["late_change"])
    return out


def _summary(per_seed: dict, seeds, arms) -> dict:
    cols = (*TASKS, "mean")
    return {"accuracy": {a: {t: mean_std_dict([per_seed[s]["accuracy"][a][t] for s in seeds]) for t in cols}
                         for a in arms},
            "d_auc": {t: mean_std_dict([per_seed[s]["d_auc"][t] for s in seeds]) for t in TASKS},
            "flip_share": {t: mean_std_dict([per_seed[s]["flip_share"][t] for s in seeds]) for t in TASKS},
            "calibration": {a: {**{t: {k: mean_std_dict([per_seed[s]["calibration"][a][t][k] for s in seeds])
                                       for k in ("slope", "bias", "confidence_auc")} for t in TASKS},
                                "late_change": mean_std_dict([per_seed[s]["calibration"][a]["late_change"]
                                                              for s in seeds])}
                            for a in arms if a in CONTROL_ARMS},
            "policy_passes": per_seed[seeds[0]]["policy_passes"], "dpo_steps": per_seed[seeds[0]]["dpo_steps"]}


def run(config: TapcConfig) -> dict:
    """Run every seed (and the positive control) and write the output folder; returns ``metrics.json``'s content."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)  # tiny tensors: threads only add hand-off stalls
    t0 = time.perf_counter()
    per_seed = {s: run_seed(c, s) for s in c.seeds}
    control = {s: run_seed(c, s, planted=True, arms=CONTROL_ARMS) for s in c.seeds} if c.control else None

    summary = _summary(per_seed, c.seeds, c.arms)
    method = "tapc" if "tapc" in c.arms else c.arms[0]
    others = [a for a in c.arms if a != method]
    acc = summary["accuracy"]
    values = {a: [per_seed[s]["accuracy"][a]["mean"] for s in c.seeds] for a in c.arms}
    paired = ({ARM_LABELS[a]: paired_difference(values[method], values[a]) for a in others}
              if len(c.seeds) >= 2 else None)
    passes = summary["policy_passes"]
    head = headline("clean held-out preference accuracy (implicit-reward ranking), mean over prompt types "
                    f"{', '.join(TASKS)}", ARM_LABELS[method], acc[method]["mean"]["mean"],
                    {ARM_LABELS[a]: acc[a]["mean"]["mean"] for a in others},
                    budget={"dpo_steps": {ARM_LABELS[a]: summary["dpo_steps"][a] for a in c.arms},
                            "pairs_per_step": c.batch, "noisy_train_pairs": 2 * c.n_train,
                            "clean_reference_pairs (every arm)": 2 * c.meta_size,
                            "policy_sequence_forwards": {ARM_LABELS[a]: passes[a]["forward"] for a in c.arms},
                            "note": "equal DPO steps and batches, except the 'equal forwards' arms: DPO and rDPO run "
                                    "as many more steps as make their policy forwards match a calibrated arm's "
                                    "(which spends the extra on look-ahead meta-steps)"},
                    seeds=c.seeds, direction="higher", std=acc[method]["mean"]["std"],
                    baseline_std={ARM_LABELS[a]: acc[a]["mean"]["std"] for a in others}, paired=paired)
    settings = recorded_config(c)
    settings.update(arms=list(c.arms), seeds=list(c.seeds))
    result = {"headline": head}
    if control is not None:
        csum = _summary(control, c.seeds, CONTROL_ARMS)
        cv = {a: [control[s]["accuracy"][a]["mean"] for s in c.seeds] for a in CONTROL_ARMS}
        result["positive_control"] = positive_control(
            f"label noise planted to depend on the prompt type (flip rate {c.noise} per type; factual flips at "
            "random, creative flips only where the reference model then agrees with the wrong label, so d points "
            "the wrong way on creative prompts)", ARM_LABELS["tapc"], ARM_LABELS["uniform"], cv["tapc"],
            cv["uniform"], seeds=c.seeds, metric=head["metric"])
        result["positive_control"]["oracle"] = paired_difference(cv["oracle"], cv["uniform"])
        result["control_summary"] = csum
        result["control_per_seed"] = {str(s): v for s, v in control.items()}
    result.update({"config": settings, "summary": summary, "per_seed": {str(s): v for s, v in per_seed.items()},
                   "seconds": time.perf_counter() - t0})
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def _accuracy_tables(s: dict, arms, caption: str) -> str:
    def f(x):
        return f"{x['mean']:.3f} ± {x['std']:.3f}"

    text = markdown_table(["arm", *TASKS, "mean"], [[ARM_LABELS[a], *[f(s["accuracy"][a][t]) for t in (*TASKS, "mean")]]
                                                     for a in arms], caption=caption)
    text += "\n" + markdown_table(["prompt type", "flipped share of the noisy pairs", "AUC of d for 'label is right'"],
                                  [[t, f(s["flip_share"][t]), f(s["d_auc"][t])] for t in TASKS],
                                  caption="How well the reference perplexity differential predicts label quality "
                                  "(0.5 = no information, < 0.5 = misleading)")
    if s["calibration"]:
        rows = [[ARM_LABELS[a], t, f(v["slope"]), f(v["bias"]), f(v["confidence_auc"]), f(by_t["late_change"])]
                for a, by_t in s["calibration"].items() for t, v in by_t.items() if t in TASKS]
        text += "\n" + markdown_table(["arm", "prompt type", "slope a(t)", "bias b(t)", "AUC of confidence",
                                       "movement in the last quarter / whole path"], rows,
                                      caption="Learned calibration c = sigmoid(a(t) d + b(t)) on the noisy training "
                                      "pairs (d in units of its standard deviation)")
    return text


def results_table(result: dict) -> str:
    """Markdown: accuracy per arm and type, per seed with the paired differences, the budget in policy passes,
    the measured predictiveness of d, the learned calibrations, and the positive control."""

    c, s, h = result["config"], result["summary"], result["headline"]
    text = _accuracy_tables(s, c["arms"], f"Clean held-out preference accuracy (mean ± std over seeds {c['seeds']}; "
                            f"flip rate {c['noise']}, {c['steps']} DPO steps x {c['batch']} pairs per arm)")
    rows = [[seed, *[f"{result['per_seed'][str(seed)]['accuracy'][a]['mean']:.3f}" for a in c["arms"]]]
            for seed in c["seeds"]]
    text += "\n" + markdown_table(["seed", *[ARM_LABELS[a] for a in c["arms"]]], rows,
                                  caption="Per seed: mean accuracy over the prompt types")
    if h.get("paired"):
        text += ("\nPaired difference TAPC - arm over seeds (mean [ci95], Student t; an interval that "
                 "holds zero is no difference):\n\n" + "\n".join(f"- {paired_line(n, p)}" for n, p in h["paired"].items())
                 + "\n")
    passes = s["policy_passes"]
    text += "\n" + markdown_table(["arm", "DPO steps", "policy sequence forwards", "of which meta-steps", "backwards"],
                                  [[ARM_LABELS[a], s["dpo_steps"][a], passes[a]["forward"], passes[a]["meta_forward"],
                                    passes[a]["backward"]] for a in c["arms"]],
                                  caption="Compute per arm (sequences through the policy; each pair is 2)")
    pc = result.get("positive_control")
    if pc:
        text += "\n## Positive control\n\n" + f"Setting: {pc['setting']}.\n\n" + _accuracy_tables(
            result["control_summary"], CONTROL_ARMS, f"Positive control: clean held-out accuracy (seeds {c['seeds']})")
        text += ("\n" + markdown_table(["seed", pc["method"], pc["ablation"]],
                                       [[sd, f"{m:.3f}", f"{a:.3f}"] for sd, m, a in
                                        zip(pc["seeds"], pc["method_values"], pc["ablation_values"])],
                                       caption="Per seed: mean accuracy over the prompt types")
                 + f"\n{paired_line('TAPC - uniform', pc['paired'])}; "
                 + f"{paired_line('oracle - uniform', pc['oracle'])}. "
                 + ("The experiment sees the mechanism (interval excludes zero)." if pc["sensitive"] else
                    "The interval holds zero: this experiment does not see TAPC's mechanism.") + "\n")
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
            for t in TASKS:
                v = by_t[t]
                ax.plot(d, 1 / (1 + np.exp(-(v["slope"]["mean"] * d + v["bias"]["mean"]))),
                        ls="-" if t == "factual" else "--", label=f"{ARM_LABELS[a]}: {t}")
        ax.set_xlabel("perplexity differential d (standard deviations)")
        ax.set_ylabel("confidence c")
        ax.legend(fontsize=6)
        save(fig, stage / "calibration.png")
