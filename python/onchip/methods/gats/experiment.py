"""``onchip gats``: GATS against single shot, self-consistency, real-tool refinement and its ablations.

Per seed: train the agent (cached), draw held-out tasks, run every arm with the same number of agent
decodes per task, execute on a fresh real backend per task and compare its final state with the task's
known target state. See ``seeds/gats.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, markdown_table, mean_std, need, recorded_config, rng, save, write_metrics,
    write_results,
)
from . import ARMS


@dataclass(frozen=True)
class GatsConfig:
    """One run; validated on construction.

    Attributes:
        tasks: held-out tasks per seed (>= 1).
        samples: agent decodes per task for every arm (1 + GATS's max retries; >= 1).
        temperature: sampling temperature of self-consistency and of fresh samples (> 0).
        arms: subset of :data:`~onchip.methods.gats.ARMS` (must include "gats").
        seeds: seeds (agent training data and weights, tasks, sampling); >= 1, each >= 0.
        train_tasks, train_steps: the agent's training budget (>= 1 each).
        out: output folder; progress: progress bars; command: recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    tasks: int = 120
    samples: int = 4
    temperature: float = 1.0
    arms: tuple[str, ...] = ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    train_tasks: int = 500
    train_steps: int = 500
    out: str = "out/gats"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "arms", tuple(self.arms))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        for name in ("tasks", "samples", "train_tasks", "train_steps"):
            need(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        need(self.temperature > 0, "temperature", self.temperature, "must be > 0")
        need(bool(self.arms) and all(a in ARMS for a in self.arms), "arms", list(self.arms),
             f"choose from {', '.join(ARMS)}")
        need("gats" in self.arms, "arms", list(self.arms), "must include gats (the headline method)")
        need(bool(self.seeds) and min(self.seeds) >= 0, "seeds", list(self.seeds), "need one or more seeds >= 0")
        need(len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds), "must be distinct")


def run(config: GatsConfig) -> dict:
    """Run every arm for every seed and write ``metrics.json``, ``results.md`` and ``gats.png``.

    Returns:
        The content of ``metrics.json``.
    """
    import torch
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, check_output_dir

    from .agent import AgentTraining, train_agent
    from .refine import run_arm
    from .tools import make_task

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed: dict[str, list[dict]] = {a: [] for a in c.arms}
    by_kind: dict[str, dict[str, list]] = {a: {} for a in c.arms}
    judge_corr = []
    bar = tqdm(total=len(c.seeds) * (len(c.arms) + 1), desc="gats", disable=not c.progress)
    for seed in c.seeds:
        model, vocab = train_agent(seed, AgentTraining(n_tasks=c.train_tasks, steps=c.train_steps), c.progress)
        bar.update()
        r = rng(seed, "gats", "test-tasks")
        tasks = [make_task(r, held_out=True) for _ in range(c.tasks)]
        for arm in c.arms:
            recs = run_arm(arm, tasks, model, vocab, samples=c.samples, temperature=c.temperature,
                           rng=rng(seed, "gats", "sample", arm))
            per_seed[arm].append({"success": float(np.mean([x["success"] for x in recs])),
                                  "side_effects": float(np.mean([x["side_effects"] for x in recs])),
                                  "decodes": float(np.mean([x["decodes"] for x in recs]))})
            for t, x in zip(tasks, recs):
                by_kind[arm].setdefault(t.kind, []).append(x["success"])
            if arm == "gats":
                j = np.array([x["judge"] for x in recs], float)
                s = np.array([x["success"] for x in recs], float)
                if j.std() > 0 and s.std() > 0:
                    judge_corr.append(float(np.corrcoef(j, s)[0, 1]))
            bar.update()
    bar.close()
    summary = {}
    for arm in c.arms:
        row = {}
        for key in ("success", "side_effects", "decodes"):
            m, s = mean_std(x[key] for x in per_seed[arm])
            row[key], row[key + "_std"] = m, s
        row["success_by_kind"] = {k: float(np.mean(v)) for k, v in sorted(by_kind[arm].items())}
        summary[arm] = row
    base = [a for a in c.arms if a != "gats"]
    result = {
        "config": recorded_config(c),
        "headline": headline(
            "success rate on the real backend (final state = known target state)", "gats",
            summary["gats"]["success"], {a: summary[a]["success"] for a in base},
            budget={"agent decodes per task (at most)": c.samples, "tasks per seed": c.tasks,
                    "real side-effecting calls per task": {a: round(summary[a]["side_effects"], 3) for a in c.arms}},
            seeds=c.seeds, direction="higher", std=summary["gats"]["success_std"],
            baseline_std={a: summary[a]["success_std"] for a in base}),
        "results": summary,
        "per_seed": per_seed,
        "judge_real_success_correlation": mean_std(judge_corr)[0] if judge_corr else None,
        "seconds": time.perf_counter() - t0,
    }
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def results_table(result: dict) -> str:
    """Markdown table: one row per arm (mean ± std over seeds)."""

    rows = [(a, f"{r['success']:.3f} ± {r['success_std']:.3f}", f"{r['side_effects']:.2f} ± {r['side_effects_std']:.2f}",
             f"{r['decodes']:.2f}") for a, r in result["results"].items()]
    return markdown_table(["arm", "real success", "real side-effecting calls / task", "agent decodes / task"], rows)


def _write(stage, c: GatsConfig, result: dict) -> None:
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    kinds = sorted(next(iter(result["results"].values()))["success_by_kind"])
    by_kind = markdown_table(["arm", *kinds], [[a, *(f"{r['success_by_kind'].get(k, float('nan')):.2f}" for k in kinds)]
                                               for a, r in result["results"].items()],
                             caption="Success by task kind (pooled over seeds):")
    corr = result["judge_real_success_correlation"]
    write_results(stage, "GATS: simulated tool feedback before real calls", c.command or "onchip gats",
                  results_table(result), by_kind,
                  "Correlation of the simulated judge score (GATS's chosen attempt) with real success: "
                  f"{'n/a' if corr is None else f'{corr:.3f}'}")
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    arms = list(result["results"])
    grouped_bars(axes[0], arms, {"success": [result["results"][a]["success"] for a in arms]},
                 errors={"success": [result["results"][a]["success_std"] for a in arms]}, rotation=30, fontsize=8)
    axes[0].set_ylabel("real success rate")
    axes[0].set_title(f"{c.samples} agent decodes per task, {len(c.seeds)} seeds")
    for a in arms:
        r = result["results"][a]
        axes[1].errorbar(r["side_effects"], r["success"], xerr=r["side_effects_std"], yerr=r["success_std"],
                         fmt="o", capsize=3)
        axes[1].annotate(a, (r["side_effects"], r["success"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    axes[1].set_xlabel("real side-effecting calls per task")
    axes[1].set_ylabel("real success rate")
    save(fig, stage / "gats.png")
