"""``onchip gats``: GATS against single shot, self-consistency, real-tool refinement and its ablations.

Per seed: train the agent (cached), draw held-out tasks, run every arm with the same number of agent
decodes per task, execute on a fresh real backend per task and compare its final state with the task's
known target state. Then one positive control per feedback kind: an error only that kind can see is
planted in the agent's first attempt, and GATS runs against its ablation without that kind.
See ``seeds/gats.md``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, headline_line, markdown_table, mean_std, need, paired_difference, paired_line,
    positive_control, recorded_config, rng, save, write_metrics, write_results,
)
from . import ARMS, FEEDBACK


@dataclass(frozen=True)
class GatsConfig:
    """One run; validated on construction.

    Attributes:
        tasks: held-out tasks per seed (>= 1).
        samples: agent decodes per task for every arm (1 + GATS's max retries; >= 1).
        temperature: sampling temperature of self-consistency and of fresh samples (> 0).
        arms: subset of :data:`~onchip.methods.gats.ARMS` (must include "gats").
        seeds: seeds (agent training data and weights, tasks, sampling); >= 2 (paired intervals), each >= 0.
        train_tasks, train_steps: the agent's training budget (>= 1 each).
        judge: the simulated judge's checklist, ``actions`` or ``literal`` (:data:`~.simulator.JUDGES`).
        controls: run the three positive controls (planted validity, response and judge errors).
        out: output folder; progress: progress bars; command: recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    tasks: int = 120
    samples: int = 4
    temperature: float = 1.0
    arms: tuple[str, ...] = ARMS
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    train_tasks: int = 500
    train_steps: int = 250
    judge: str = "actions"
    controls: bool = True
    out: str = "out/gats"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        from .simulator import JUDGES

        object.__setattr__(self, "arms", tuple(self.arms))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        for name in ("tasks", "samples", "train_tasks", "train_steps"):
            need(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        need(self.temperature > 0, "temperature", self.temperature, "must be > 0")
        need(bool(self.arms) and all(a in ARMS for a in self.arms), "arms", list(self.arms),
             f"choose from {', '.join(ARMS)}")
        need("gats" in self.arms, "arms", list(self.arms), "must include gats (the headline method)")
        need(len(self.arms) >= 2, "arms", list(self.arms), "need gats and at least one arm to compare with")
        need(len(self.seeds) >= 2 and min(self.seeds) >= 0, "seeds", list(self.seeds),
             "need two or more seeds >= 0 (paired intervals)")
        need(len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds), "must be distinct")
        need(self.judge in JUDGES, "judge", self.judge, f"one of {', '.join(JUDGES)}")


def run(config: GatsConfig) -> dict:
    """Run every arm for every seed, the positive controls, and write ``metrics.json``, ``results.md``
    and ``gats.png``.

    Returns:
        The content of ``metrics.json``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .agent import AgentTraining, train_agent
    from .refine import PLANTS, plant_error, run_arm
    from .tools import make_task

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed: dict[str, list[dict]] = {a: [] for a in c.arms}
    per_task: dict[str, list[float]] = {a: [] for a in c.arms}
    by_kind: dict[str, dict[str, list]] = {a: {} for a in c.arms}
    first_fb: dict[str, Counter] = {a: Counter() for a in c.arms}
    judge_corr = []
    control_values = {k: {"gats": [], f"gats-no-{k}": [], "planted": []} for k in PLANTS}
    for seed in c.seeds:
        model, vocab = train_agent(seed, AgentTraining(n_tasks=c.train_tasks, steps=c.train_steps), c.progress)
        r = rng(seed, "gats", "test-tasks")
        tasks = [make_task(r, held_out=True) for _ in range(c.tasks)]
        for arm in c.arms:
            recs = run_arm(arm, tasks, model, vocab, samples=c.samples, temperature=c.temperature,
                           rng=rng(seed, "gats", "sample", arm), judge=c.judge)
            per_seed[arm].append({"success": float(np.mean([x["success"] for x in recs])),
                                  "side_effects": float(np.mean([x["side_effects"] for x in recs])),
                                  "decodes": float(np.mean([x["decodes"] for x in recs]))})
            per_task[arm] += [float(x["success"]) for x in recs]
            first_fb[arm].update(str(x["first_feedback"]) for x in recs)
            for t, x in zip(tasks, recs):
                by_kind[arm].setdefault(t.kind, []).append(x["success"])
            if arm == "gats":
                j = np.array([x["judge"] for x in recs], float)
                s = np.array([x["success"] for x in recs], float)
                if j.std() > 0 and s.std() > 0:
                    judge_corr.append(float(np.corrcoef(j, s)[0, 1]))
        if c.progress:
            print(f"seed {seed}: " + ", ".join(f"{a} {per_seed[a][-1]['success']:.3f}" for a in c.arms)
                  + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
        if c.controls:
            for kind in PLANTS:
                planted: dict[int, str | None] = {}

                def first(i, greedy, kind=kind, planted=planted):
                    if i not in planted:  # the same plant for both arms (greedy decoding is deterministic)
                        planted[i] = plant_error(tasks[i].text, greedy, kind, rng(seed, "gats", "plant", kind, i))
                    return planted[i]

                for arm in ("gats", f"gats-no-{kind}"):
                    recs = run_arm(arm, tasks, model, vocab, samples=c.samples, temperature=c.temperature,
                                   rng=rng(seed, "gats", "sample", arm), judge=c.judge, first=first)
                    idx = [i for i in range(len(tasks)) if planted.get(i)]
                    control_values[kind][arm].append(float(np.mean([recs[i]["success"] for i in idx])) if idx
                                                     else float("nan"))
                control_values[kind]["planted"].append(len([v for v in planted.values() if v]))
            if c.progress:
                print(f"seed {seed} controls: " + ", ".join(
                    f"{k}: gats {v['gats'][-1]:.2f} / no-{k} {v[f'gats-no-{k}'][-1]:.2f} ({v['planted'][-1]} planted)"
                    for k, v in control_values.items()), flush=True)
    summary = {}
    for arm in c.arms:
        row = {}
        for key in ("success", "side_effects", "decodes"):
            m, s = mean_std(x[key] for x in per_seed[arm])
            row[key], row[key + "_std"] = m, s
        row["success_by_kind"] = {k: float(np.mean(v)) for k, v in sorted(by_kind[arm].items())}
        row["first_feedback"] = dict(sorted(first_fb[arm].items()))
        if arm != "gats":
            row["paired_per_task"] = paired_difference(per_task["gats"], per_task[arm])
            row["paired_per_task"].pop("per_seed")  # one value per task: kept in per_task
        summary[arm] = row
    base = [a for a in c.arms if a != "gats"]
    values = {a: [x["success"] for x in per_seed[a]] for a in c.arms}
    result = {
        "headline": headline(
            "success rate on the real backend (final state = known target state)", "gats",
            summary["gats"]["success"], {a: summary[a]["success"] for a in base},
            budget={"agent decodes per task (at most)": c.samples, "tasks per seed": c.tasks,
                    "agent decodes per task (used)": {a: round(summary[a]["decodes"], 3) for a in c.arms},
                    "real side-effecting calls per task": {a: round(summary[a]["side_effects"], 3) for a in c.arms}},
            seeds=c.seeds, direction="higher", std=summary["gats"]["success_std"],
            baseline_std={a: summary[a]["success_std"] for a in base},
            paired={a: paired_difference(values["gats"], values[a]) for a in base}),
    }
    if c.controls:
        controls = {kind: _control(kind, v, c.seeds) for kind, v in control_values.items()}
        result["positive_control"] = controls["response"]
        result["positive_controls"] = controls
    result.update({
        "config": recorded_config(c),
        "results": summary,
        "per_seed": per_seed,
        "per_task_success": per_task,
        "judge_real_success_correlation": mean_std(judge_corr)[0] if judge_corr else None,
        "torch": {"version": torch.__version__, "threads": torch.get_num_threads()},
        "seconds": time.perf_counter() - t0,
    })
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def _control(kind: str, values: dict, seeds) -> dict:
    """The positive control of one feedback kind over the seeds on which an error of that kind was
    planted (a plant needs a first attempt that has the slot it changes; a short run may have none).

    ``values``: ``{"gats": [...], "gats-no-<kind>": [...], "planted": [...]}``, one entry per seed
    (success is NaN where nothing was planted). Returns :func:`positive_control` over the planted
    seeds plus ``planted_tasks_per_seed`` and ``not_planted_seeds``; with fewer than 2 planted seeds
    there is no interval: ``paired`` and ``sensitive`` are None (nothing planted, nothing tested)."""
    setting = (f"an error only {kind} feedback can see planted in the agent's first attempt "
               f"({_PLANT_WORDS[kind]}); success on the planted tasks")
    metric, ablation = "real success rate (planted tasks)", f"gats-no-{kind}"
    keep = [i for i, n in enumerate(values["planted"]) if n > 0]
    method_values, ablation_values = [values["gats"][i] for i in keep], [values[ablation][i] for i in keep]
    if len(keep) >= 2:
        pc = positive_control(setting, "gats", ablation, method_values, ablation_values,
                              seeds=[seeds[i] for i in keep], metric=metric)
    else:
        pc = {"setting": setting, "metric": metric, "method": "gats", "ablation": ablation,
              "seeds": [int(seeds[i]) for i in keep], "method_values": method_values,
              "ablation_values": ablation_values, "paired": None, "sensitive": None}
    pc["planted_tasks_per_seed"] = [int(n) for n in values["planted"]]
    pc["not_planted_seeds"] = [int(s) for s, n in zip(seeds, values["planted"]) if n == 0]
    return pc


def _control_cell(pc: dict) -> str:
    """A control's paired difference, or why it has none."""
    if pc["paired"] is None:
        return f"nothing planted (planted on {len(pc['seeds'])} seed(s); an interval needs 2)"
    return paired_line("", pc["paired"]).lstrip(": ")


_PLANT_WORDS = {"validity": "an enum argument set to another enum's word",
                "response": "a ticket id the user never named",
                "judge": "an unrequested close appended, or the requested close turned into a look-up"}


def results_table(result: dict) -> str:
    """Markdown table: one row per arm (mean ± std over seeds; paired difference GATS - arm over seeds
    and over tasks, ci95)."""
    h = result["headline"]
    rows = []
    for a, r in result["results"].items():
        seeds = "-" if a == "gats" else paired_line("", h["paired"][a]).lstrip(": ")
        tasks = "-" if a == "gats" else paired_line("", r["paired_per_task"]).lstrip(": ")
        rows.append((a, f"{r['success']:.3f} ± {r['success_std']:.3f}", seeds, tasks,
                     f"{r['side_effects']:.2f} ± {r['side_effects_std']:.2f}", f"{r['decodes']:.2f}"))
    return markdown_table(["arm", "real success", "GATS - arm [ci95] over seeds", "GATS - arm [ci95] over tasks",
                           "real side-effecting calls / task", "agent decodes / task"], rows)


def per_seed_table(result: dict) -> str:
    """Markdown table: each arm's success rate on each seed."""
    seeds = result["headline"]["seeds"]
    return markdown_table(["arm", *(f"seed {s}" for s in seeds)],
                          [(a, *(f"{x['success']:.3f}" for x in v)) for a, v in result["per_seed"].items()],
                          caption="Per seed: real success rate.")


def controls_table(result: dict) -> str:
    """Markdown table of the positive controls (one per feedback kind)."""
    rows = []
    for kind, pc in result.get("positive_controls", {}).items():
        rows.append((kind, pc["setting"].split("(")[1].split(")")[0], sum(pc["planted_tasks_per_seed"]),
                     " / ".join(f"{v:.2f}" for v in pc["method_values"]),
                     " / ".join(f"{v:.2f}" for v in pc["ablation_values"]),
                     _control_cell(pc), {True: "yes", False: "no", None: "not tested"}[pc["sensitive"]]))
    return markdown_table(["feedback kind", "planted error", "planted tasks (all seeds)", "gats per seed",
                           "gats-no-<kind> per seed", "difference [ci95]", "sensitive"], rows,
                          caption="Positive controls: GATS against its ablation without one feedback kind, on tasks "
                                  "whose first attempt carries an error only that kind can see.")


def results_sections(result: dict) -> list[str]:
    """The sections of ``results.md`` (after its title and command) for a :func:`run` result."""
    kinds = sorted(next(iter(result["results"].values()))["success_by_kind"])
    by_kind = markdown_table(["arm", *kinds], [[a, *(f"{r['success_by_kind'].get(k, float('nan')):.2f}" for k in kinds)]
                                               for a, r in result["results"].items()],
                             caption="Success by task kind (pooled over seeds):")
    corr = result["judge_real_success_correlation"]
    fb_kinds = ["None", *FEEDBACK]
    first = markdown_table(["arm", *("clean" if k == "None" else k for k in fb_kinds)],
                           [[a, *(r["first_feedback"].get(k, 0) for k in fb_kinds)]
                            for a, r in result["results"].items() if a not in ("single", "self-consistency")],
                           caption="Feedback on the first attempt (tasks, all seeds; the first failing kind the arm's "
                                   "simulator, or the real tools, report; an ablation cannot report its missing kind):")
    pc = result.get("positive_control")
    return [headline_line(result["headline"]),
            "Paired difference GATS - arm, success rate (ci95 over seeds): "
            + "; ".join(paired_line(a, p) for a, p in result["headline"]["paired"].items()) + ".",
            *([f"Positive control (`positive_control`, the response kind): {pc['method']} - {pc['ablation']}: "
               + _control_cell(pc)
               + {True: " (sensitive).", False: " (not sensitive).", None: "."}[pc["sensitive"]]] if pc else []),
            results_table(result), per_seed_table(result), *([controls_table(result)] if pc else []), first,
            by_kind,
            ("Correlation of the simulated judge score (GATS's chosen attempt) with real success: "
             f"{'n/a' if corr is None else f'{corr:.3f}'}")]


def _write(stage, c: GatsConfig, result: dict) -> None:
    from onchip.plotting import pyplot

    write_metrics(stage, result, c.command)
    write_results(stage, "GATS: simulated tool feedback before real calls", c.command or "onchip gats",
                  *results_sections(result))
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.2))
    arms = list(result["results"])
    grouped_bars(axes[0], arms, {"success": [result["results"][a]["success"] for a in arms]},
                 errors={"success": [result["results"][a]["success_std"] for a in arms]}, rotation=30, fontsize=8)
    for k, a in enumerate(arms):
        axes[0].plot([k] * len(result["per_seed"][a]), [x["success"] for x in result["per_seed"][a]], "k.", ms=4)
    axes[0].set_ylabel("real success rate (dots: seeds)")
    axes[0].set_title(f"{c.samples} agent decodes per task, {len(c.seeds)} seeds, {c.judge} judge", fontsize=9)
    for a in arms:
        r = result["results"][a]
        axes[1].errorbar(r["side_effects"], r["success"], xerr=r["side_effects_std"], yerr=r["success_std"],
                         fmt="o", capsize=3)
        axes[1].annotate(a, (r["side_effects"], r["success"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    axes[1].set_xlabel("real side-effecting calls per task")
    axes[1].set_ylabel("real success rate")
    controls = result.get("positive_controls", {})
    if controls:
        kinds = list(controls)
        mean = lambda v: float(np.mean(v)) if v else None  # a kind planted nowhere leaves a gap
        grouped_bars(axes[2], kinds, {"gats": [mean(controls[k]["method_values"]) for k in kinds],
                                      "gats-no-<kind>": [mean(controls[k]["ablation_values"]) for k in kinds]},
                     rotation=0, fontsize=9)
        axes[2].set_ylabel("real success on planted tasks")
        axes[2].set_title("positive controls: one error planted per kind", fontsize=9)
        axes[2].legend(fontsize=8)
    else:
        axes[2].set_axis_off()
    save(fig, stage / "gats.png")
