"""The Seg-ReSearch experiment: J&F on held-out questions about facts never seen in training, by
number of hops, for GRPO with the hierarchical reward against outcome-only reward, a rigid step-wise
reward and a policy that may not search - at the same number of rollouts per arm.

Per seed: a training knowledge base and a held-out one (new invented names and facts), one BM25
index over both; each arm trains a fresh policy by GRPO (``iters`` x ``batch`` questions x ``group``
rollouts) and is evaluated greedily on every held-out question with a fresh scene. Writes
``metrics.json``, ``results.md``, ``jf_by_hops.png`` and ``training.png``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .._report import need
from . import ARMS


@dataclass(frozen=True)
class SegResearchConfig:
    """One run (defaults = the committed run).

    Attributes:
        arms: subset of :data:`~onchip.methods.seg_research.ARMS`.
        train_clubs, test_clubs: clubs in the training / held-out knowledge base (4 questions each:
            mascot and emblem, one and two hops).
        iters: GRPO iterations.
        batch: questions per iteration.
        group: rollouts per question (GRPO group size, >= 2).
        max_turns: turns per rollout (searches + the answer).
        lr: Adam learning rate.
        seeds: the seeds.
        out, progress, command: as every command.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    arms: tuple[str, ...] = ARMS
    train_clubs: int = 40
    test_clubs: int = 15
    iters: int = 40
    batch: int = 4
    group: int = 8
    max_turns: int = 3
    lr: float = 0.01
    seeds: tuple[int, ...] = (0, 1, 2)
    out: str = "out/seg-research"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "arms", tuple(self.arms))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        need(bool(self.arms) and all(a in ARMS for a in self.arms), "arms", list(self.arms),
             f"choose from {', '.join(ARMS)}")
        need(len(self.seeds) >= 1 and all(s >= 0 for s in self.seeds), "seeds", list(self.seeds),
             "one or more seeds >= 0")
        for name, lo in (("train_clubs", 2), ("test_clubs", 1), ("iters", 1), ("batch", 1), ("group", 2),
                         ("max_turns", 1)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(self.max_turns <= 6, "max_turns", self.max_turns, "must be <= 6")
        need(0 < self.lr < 1, "lr", self.lr, "must be in (0, 1)")


def train_arm(arm: str, c: SegResearchConfig, seed: int, questions, retriever) -> tuple[object, list[float]]:
    """GRPO on the training questions with the arm's reward; returns the policy and the mean reward
    per iteration."""
    import torch
    from tqdm import tqdm

    from .._report import rng
    from .._rl import group_advantages, grpo_loss
    from .policy import make_policy, predicted_mask, rollout
    from .reward import outcome_reward, total_reward
    from .world import render_scene

    torch.manual_seed(seed)
    policy = make_policy()
    opt = torch.optim.Adam(policy.parameters(), lr=c.lr)
    g = rng(seed, "grpo", arm)
    curve = []
    for _ in tqdm(range(c.iters), desc=f"GRPO {arm}", disable=not c.progress, leave=False):
        picks = g.integers(0, len(questions), c.batch)
        rewards, logps = [], []
        for qi in picks:
            q = questions[int(qi)]
            scene, k = render_scene(g, q.answer)
            row = []
            for _ in range(c.group):
                t = rollout(policy, q, scene, retriever, max_turns=c.max_turns, rng=g, allow_search=arm != "no-search")
                out = outcome_reward(t.answer, predicted_mask(scene, t), scene.mask(k), scene.box(k), scene.point(k))
                row.append(total_reward(arm, out, t.queries, q.gold_steps, t.answer is not None))
                logps.append(t.logp)
            rewards.append(row)
        adv = torch.as_tensor(group_advantages(rewards).ravel(), dtype=torch.float32)
        logp = torch.stack(logps)
        loss = grpo_loss(logp, logp.detach(), adv)
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve.append(float(np.mean(rewards)))
    return policy, curve


def evaluate(policy, c: SegResearchConfig, seed: int, questions, retriever, allow_search: bool) -> dict:
    """Greedy rollouts on every question (one fresh scene each): J&F, J, F, answer accuracy and searches,
    by hops."""
    from .._report import rng
    from .policy import predicted_mask, rollout
    from .world import j_and_f, render_scene

    g = rng(seed, "eval-scenes")
    rows = {1: [], 2: []}
    for q in questions:
        scene, k = render_scene(g, q.answer)
        t = rollout(policy, q, scene, retriever, max_turns=c.max_turns, allow_search=allow_search, grad=False)
        j, f = j_and_f(predicted_mask(scene, t), scene.mask(k))
        rows[q.hops].append((0.5 * (j + f), j, f, float(t.picked == k), len(t.queries)))
    out = {}
    for h, r in rows.items():
        a = np.asarray(r)
        out[str(h)] = {"jf": float(a[:, 0].mean()), "j": float(a[:, 1].mean()), "f": float(a[:, 2].mean()),
                       "accuracy": float(a[:, 3].mean()), "searches": float(a[:, 4].mean()), "n": len(r)}
    a = np.asarray(rows[1] + rows[2])
    out["all"] = {"jf": float(a[:, 0].mean()), "accuracy": float(a[:, 3].mean()), "searches": float(a[:, 4].mean()),
                  "n": len(a)}
    return out


def run(config: SegResearchConfig) -> dict:
    """Train and evaluate every arm for every seed and write the output folder; returns metrics.json's content."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import headline, mean_std, rng, write_metrics
    from .world import Retriever, build_kb

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed, curves = {}, {}
    for seed in c.seeds:
        taken: set = set()
        docs_tr, q_tr = build_kb(rng(seed, "kb-train"), c.train_clubs, taken)
        docs_te, q_te = build_kb(rng(seed, "kb-test"), c.test_clubs, taken)
        retriever = Retriever(docs_tr + docs_te)
        per_seed[seed] = {}
        for arm in c.arms:
            policy, curve = train_arm(arm, c, seed, q_tr, retriever)
            per_seed[seed][arm] = evaluate(policy, c, seed, q_te, retriever, allow_search=arm != "no-search")
            curves.setdefault(arm, []).append(curve)
    results = {}
    for arm in c.arms:
        results[arm] = {}
        for part in ("1", "2", "all"):
            results[arm][part] = {}
            for key in per_seed[c.seeds[0]][arm][part]:
                m, s = mean_std(per_seed[sd][arm][part][key] for sd in c.seeds)
                results[arm][part][key], results[arm][part][f"{key}_std"] = m, s
    main = "hierarchical" if "hierarchical" in c.arms else c.arms[0]
    others = [a for a in c.arms if a != main]
    rollouts = c.iters * c.batch * c.group
    result = {
        "config": {k: v for k, v in asdict(c).items() if k not in ("out", "progress", "command")},
        "results": results,
        "per_seed": {str(s): v for s, v in per_seed.items()},
        "headline": headline("J&F on held-out questions (1 and 2 hops)", main, results[main]["all"]["jf"],
                             {a: results[a]["all"]["jf"] for a in others}, std=results[main]["all"]["jf_std"],
                             baseline_std={a: results[a]["all"]["jf_std"] for a in others},
                             budget={"training_rollouts_per_arm": rollouts,
                                     "held_out_questions": 4 * c.test_clubs}, seeds=list(c.seeds),
                             direction="higher"),
        "seconds": time.perf_counter() - t0,
    }
    with atomic_output_dir(c.out) as stage:
        write_metrics(stage, result, c.command)
        (stage / "results.md").write_text(results_table(result, c.command))
        _plots(stage, result, curves)
    if c.progress:
        print(results_table(result, c.command))
    return result


def results_table(result: dict, command: str | None) -> str:
    """Markdown: J&F, answer accuracy and searches per arm and hops (mean ± std over seeds)."""
    from .._report import markdown_table

    rows = []
    for arm, r in result["results"].items():
        rows.append((arm, *[f"{r[h]['jf']:.3f} ± {r[h]['jf_std']:.3f}" for h in ("1", "2", "all")],
                     *[f"{r[h]['accuracy']:.2f}" for h in ("1", "2")],
                     *[f"{r[h]['searches']:.2f}" for h in ("1", "2")]))
    text = markdown_table(["arm", "J&F 1-hop", "J&F 2-hop", "J&F all", "acc 1-hop", "acc 2-hop", "searches 1-hop",
                           "searches 2-hop"], rows,
                          caption=f"Held-out questions about unseen facts; seeds {result['headline']['seeds']}; "
                          f"{result['headline']['budget']['training_rollouts_per_arm']} training rollouts per arm.")
    return text + (f"\nCommand: `{command}`\n" if command else "")


def _plots(stage, result, curves):
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    plt = pyplot()
    res = result["results"]
    fig, ax = plt.subplots(figsize=(6, 4))
    grouped_bars(ax, ["1 hop", "2 hops", "all"], {a: [r[h]["jf"] for h in ("1", "2", "all")] for a, r in res.items()},
                 errors={a: [r[h]["jf_std"] for h in ("1", "2", "all")] for a, r in res.items()}, rotation=0)
    ax.set_ylabel("J&F (held-out facts)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    save(fig, stage / "jf_by_hops.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, cs in curves.items():
        ax.plot(np.mean(cs, 0), label=arm)
    ax.set_xlabel("GRPO iteration")
    ax.set_ylabel("mean training reward (own reward)")
    ax.legend(fontsize=8)
    save(fig, stage / "training.png")
