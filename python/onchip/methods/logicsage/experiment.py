"""``onchip logicsage``: Socratic repair vs neural-only, translate-once and resample-on-error.

Per seed: train System 1 (translator + answerer, cached), draw held-out problems (every dataset and
depth), run every arm with the same solver-call budget per problem. See ``seeds/logicsage.md``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, markdown_table, mean_std, need, recorded_config, rng, save, write_metrics,
    write_results,
)
from . import ARMS, DATASETS


@dataclass(frozen=True)
class LogicsageConfig:
    """One run; validated on construction.

    Attributes:
        datasets: subset of :data:`~onchip.methods.logicsage.DATASETS`.
        per_cell: held-out problems per (dataset, depth) and seed (>= 1).
        budget: solver calls per problem, the same for every arm (>= 1).
        p_held: probability that a test sentence uses its held-out phrasing, in [0, 1].
        max_drop: largest translator log-probability drop (nats) of an edit answering the disagreement
            question (>= 0).
        translator_steps, answerer_steps: System 1 training budgets (>= 1).
        train_problems: training problems of the translator (>= 1; the answerer gets 4x as many).
        seeds: seeds (training data and weights, test problems, sampling).
        out, progress, command: output folder, progress bars, recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    datasets: tuple[str, ...] = DATASETS
    per_cell: int = 8
    budget: int = 4
    p_held: float = 0.2
    max_drop: float = 3.0
    translator_steps: int = 600
    answerer_steps: int = 400
    train_problems: int = 300
    seeds: tuple[int, ...] = (0, 1, 2)
    out: str = "out/logicsage"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "datasets", tuple(self.datasets))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        need(bool(self.datasets) and all(d in DATASETS for d in self.datasets), "datasets", list(self.datasets),
             f"choose from {', '.join(DATASETS)}")
        for name in ("per_cell", "budget", "translator_steps", "answerer_steps", "train_problems"):
            need(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        need(0 <= self.p_held <= 1, "p_held", self.p_held, "must be in [0, 1]")
        need(self.max_drop >= 0, "max_drop", self.max_drop, "must be >= 0")
        need(bool(self.seeds) and min(self.seeds) >= 0, "seeds", list(self.seeds), "need one or more seeds >= 0")
        need(len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds), "must be distinct")


def run(config: LogicsageConfig) -> dict:
    """Run every arm for every seed; write ``metrics.json``, ``results.md`` and ``logicsage.png``.

    Returns:
        The content of ``metrics.json``.
    """
    import torch
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, check_output_dir

    from .loop import run_arm
    from .problems import DEPTHS, make_problem
    from .translator import SystemOneTraining, neural_answers, train_system_one

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed = {a: [] for a in ARMS}
    cells: dict[str, dict[str, list]] = {a: {} for a in ARMS}
    errors: Counter = Counter()
    bar = tqdm(total=len(c.seeds) * (len(ARMS) + 1), desc="logicsage", disable=not c.progress)
    for seed in c.seeds:
        tr, ans, v = train_system_one(seed, SystemOneTraining(
            problems=c.train_problems, answerer_problems=4 * c.train_problems, translator_steps=c.translator_steps,
            answerer_steps=c.answerer_steps), c.progress)
        bar.update()
        r = rng(seed, "logicsage", "test")
        probs = [make_problem(r, ds, d, held_out=True, p_held=c.p_held)
                 for ds in c.datasets for d in DEPTHS[ds] for _ in range(c.per_cell)]
        neural = neural_answers(ans, v, [p.text for p in probs], [p.dataset for p in probs])
        for arm in ARMS:
            recs = run_arm(arm, probs, tr, v, neural, budget=c.budget, rng=rng(seed, "logicsage", arm),
                           max_drop=c.max_drop)
            per_seed[arm].append({k: float(np.mean([x[k] for x in recs])) for k in ("correct", "executable", "calls")})
            for p, x in zip(probs, recs):
                cells[arm].setdefault(f"{p.dataset}-{p.depth}", []).append(float(x["correct"]))
            if arm == "translate-once":
                errors.update(x["first_status"] for x in recs)
            bar.update()
    bar.close()
    summary = {}
    for arm in ARMS:
        row = {}
        for key in ("correct", "executable", "calls"):
            m, s = mean_std(x[key] for x in per_seed[arm])
            row[key], row[key + "_std"] = m, s
        row["accuracy_by_cell"] = {k: float(np.mean(v)) for k, v in cells[arm].items()}
        summary[arm] = row
    base = [a for a in ARMS if a != "logicsage"]
    result = {
        "config": recorded_config(c),
        "headline": headline(
            "answer accuracy on held-out problems (True/False/Unknown)", "logicsage", summary["logicsage"]["correct"],
            {a: summary[a]["correct"] for a in base},
            budget={"solver calls per problem (at most)": c.budget,
                    "problems per seed": sum(len(DEPTHS[d]) for d in c.datasets) * c.per_cell,
                    "executable rate": {a: round(summary[a]["executable"], 3) for a in ARMS}},
            seeds=c.seeds, direction="higher", std=summary["logicsage"]["correct_std"],
            baseline_std={a: summary[a]["correct_std"] for a in base}),
        "results": summary,
        "per_seed": per_seed,
        "first_execution_status": dict(errors),
        "seconds": time.perf_counter() - t0,
    }
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def results_table(result: dict) -> str:
    """Markdown table: one row per arm (mean ± std over seeds)."""

    rows = [(a, f"{r['correct']:.3f} ± {r['correct_std']:.3f}", f"{r['executable']:.3f} ± {r['executable_std']:.3f}",
             f"{r['calls']:.2f}") for a, r in result["results"].items()]
    return markdown_table(["arm", "accuracy", "executable rate (final program)", "solver calls / problem"], rows)


def _write(stage, c: LogicsageConfig, result: dict) -> None:
    from onchip.plotting import pyplot

    from .problems import DEPTHS

    write_metrics(stage, result, c.command)
    keys = list(next(iter(result["results"].values()))["accuracy_by_cell"])
    cells = markdown_table(["arm", *keys], [[a, *(f"{r['accuracy_by_cell'][k]:.2f}" for k in keys)]
                                            for a, r in result["results"].items()],
                           caption="Accuracy by dataset and depth (pooled over seeds; deduction: objects):")
    status = ("Status of the first execution of the translator's program (translate-once, all seeds): "
              + ", ".join(f"{k}: {v}" for k, v in sorted(result["first_execution_status"].items())))
    write_results(stage, "LogicSAGE: Socratic solver feedback vs baselines", c.command or "onchip logicsage",
                  results_table(result), cells, status)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(c.datasets) + 1, figsize=(4.2 * (len(c.datasets) + 1), 3.6))
    for ax, ds in zip(axes, c.datasets):
        for a, r in result["results"].items():
            ax.plot(DEPTHS[ds], [r["accuracy_by_cell"][f"{ds}-{d}"] for d in DEPTHS[ds]], "o-", label=a)
        ax.set_title(ds)
        ax.set_xlabel("objects" if ds == "deduction" else "depth")
        ax.set_ylim(0, 1.05)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=7)
    arms = list(result["results"])
    grouped_bars(axes[-1], arms, {"executable": [result["results"][a]["executable"] for a in arms],
                                  "accuracy": [result["results"][a]["correct"] for a in arms]}, rotation=30, fontsize=8)
    axes[-1].legend(fontsize=7)
    axes[-1].set_title(f"<= {c.budget} solver calls per problem")
    save(fig, stage / "logicsage.png")
