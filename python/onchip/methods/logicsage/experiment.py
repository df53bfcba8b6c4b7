"""``onchip logicsage``: Socratic repair vs neural-only, translate-once and best-of-k resampling.

Per seed: train System 1 (translator + answerer, cached), draw held-out problems (every dataset and
depth), run every arm with the same solver-call budget per problem and the same translator forward
passes per repair round; then the positive control (every program starts one planted error away from
the gold program: LogicSAGE against resampling). See ``seeds/logicsage.md``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, markdown_table, mean_std, mean_std_dict, need, paired_difference, paired_line,
    positive_control, recorded_config, rng, save, write_metrics, write_results,
)
from . import ARMS, DATASETS

#: the positive control compares the method with its ablation (targeted questions -> whole-program resampling)
CONTROL_ARMS = ("logicsage", "resample")


@dataclass(frozen=True)
class LogicsageConfig:
    """One run; validated on construction.

    Attributes:
        datasets: subset of :data:`~onchip.methods.logicsage.DATASETS`.
        per_cell: held-out problems per (dataset, depth) and seed (>= 1).
        budget: solver calls per problem, the same for every arm (>= 1).
        scan: translator forward passes per repair round and problem, the same for the two repairing arms
            (>= 1; one pass = one candidate line scored or one token decoded).
        p_held: probability that a test sentence uses its held-out phrasing, in [0, 1].
        max_drop: largest translator log-probability drop (nats) of an edit answering the disagreement
            question (>= 0).
        translator_steps, answerer_steps: System 1 training budgets (>= 1).
        train_problems: training problems of the translator (>= 1; the answerer gets 4x as many).
        seeds: two or more seeds (training data and weights, test problems, sampling).
        out, progress, command: output folder, progress bars, recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    datasets: tuple[str, ...] = DATASETS
    per_cell: int = 10
    budget: int = 4
    scan: int = 256
    p_held: float = 0.2
    max_drop: float = 3.0
    translator_steps: int = 600
    answerer_steps: int = 400
    train_problems: int = 300
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    out: str = "out/logicsage"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "datasets", tuple(self.datasets))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        need(bool(self.datasets) and all(d in DATASETS for d in self.datasets), "datasets", list(self.datasets),
             f"choose from {', '.join(DATASETS)}")
        for name in ("per_cell", "budget", "scan", "translator_steps", "answerer_steps", "train_problems"):
            need(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        need(0 <= self.p_held <= 1, "p_held", self.p_held, "must be in [0, 1]")
        need(self.max_drop >= 0, "max_drop", self.max_drop, "must be >= 0")
        need(len(self.seeds) >= 2 and min(self.seeds) >= 0, "seeds", list(self.seeds),
             "need two or more seeds >= 0 (paired intervals)")
        need(len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds), "must be distinct")


def run(config: LogicsageConfig) -> dict:
    """Run every arm for every seed, and the positive control; write ``metrics.json``, ``results.md`` and
    ``logicsage.png``.

    Returns:
        The content of ``metrics.json``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir
    from onchip.progress import progress_bar

    from .loop import plant_error, run_arm
    from .problems import DEPTHS, make_problem
    from .translator import SystemOneTraining, neural_answers, train_system_one

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed = {a: [] for a in ARMS}
    control = {a: [] for a in CONTROL_ARMS}
    cells: dict[str, dict[str, list]] = {a: {} for a in ARMS}
    versus_neural = {a: {ds: Counter() for ds in c.datasets} for a in ARMS}
    errors: Counter = Counter()
    bar = progress_bar(total=len(c.seeds) * (len(ARMS) + len(CONTROL_ARMS) + 1), desc="logicsage", disable=not c.progress)
    for seed in c.seeds:
        tr, ans, v = train_system_one(seed, SystemOneTraining(
            problems=c.train_problems, answerer_problems=4 * c.train_problems, translator_steps=c.translator_steps,
            answerer_steps=c.answerer_steps), c.progress)
        bar.update()
        r = rng(seed, "logicsage", "test")
        probs = [make_problem(r, ds, d, held_out=True, p_held=c.p_held)
                 for ds in c.datasets for d in DEPTHS[ds] for _ in range(c.per_cell)]
        neural = neural_answers(ans, v, [p.text for p in probs], [p.dataset for p in probs])
        recs_by_arm = {}
        for arm in ARMS:
            recs = run_arm(arm, probs, tr, v, neural, budget=c.budget, scan=c.scan, rng=rng(seed, "logicsage", arm),
                           max_drop=c.max_drop)
            recs_by_arm[arm] = recs
            per_seed[arm].append({k: float(np.mean([x[k] for x in recs]))
                                  for k in ("correct", "executable", "calls", "forwards")})
            for p, x in zip(probs, recs):
                cells[arm].setdefault(f"{p.dataset}-{p.depth}", []).append(float(x["correct"]))
            if arm == "translate-once":
                errors.update(x["first_status"] for x in recs)
            bar.update()
        for arm in ARMS:
            for p, x, nx in zip(probs, recs_by_arm[arm], recs_by_arm["neural-only"]):
                versus_neural[arm][p.dataset].update(
                    ["worse" if nx["correct"] and not x["correct"] else
                     "better" if x["correct"] and not nx["correct"] else "same"])
        # positive control: every program starts one planted error away from the gold program
        planted = [plant_error(p.program, rng(seed, "logicsage", "plant", k)) for k, p in enumerate(probs)]
        for arm in CONTROL_ARMS:
            recs = run_arm(arm, probs, tr, v, neural, budget=c.budget, scan=c.scan,
                           rng=rng(seed, "logicsage", "control", arm), max_drop=c.max_drop, start=planted)
            control[arm].append({k: float(np.mean([x[k] for x in recs])) for k in ("correct", "executable", "forwards")})
            bar.update()
    bar.close()
    summary = {}
    for arm in ARMS:
        row = {}
        for key in ("correct", "executable", "calls", "forwards"):
            m, s = mean_std(x[key] for x in per_seed[arm])
            row[key], row[key + "_std"] = m, s
        row["accuracy_by_cell"] = {k: float(np.mean(v)) for k, v in cells[arm].items()}
        row["problems_by_cell"] = {k: len(v) for k, v in cells[arm].items()}
        summary[arm] = row
    base = [a for a in ARMS if a != "logicsage"]
    acc = {a: [x["correct"] for x in per_seed[a]] for a in ARMS}
    paired = {a: paired_difference(acc["logicsage"], acc[a]) for a in base}
    n_problems = sum(len(DEPTHS[d]) for d in c.datasets) * c.per_cell
    pc = positive_control(
        "planted single error: every program starts as the gold program with one translation error planted "
        "(a premise's negation toggled, its two symbols swapped, or a symbol dropped from a declaration), "
        "same problems, solver calls and translator passes per round", "logicsage", "resample",
        [x["correct"] for x in control["logicsage"]], [x["correct"] for x in control["resample"]], seeds=c.seeds,
        metric="answer accuracy")
    result = {
        "config": recorded_config(c),
        "headline": headline(
            "answer accuracy on held-out problems (True/False/Unknown)", "logicsage", summary["logicsage"]["correct"],
            {a: summary[a]["correct"] for a in base},
            budget={"solver calls per problem (at most)": c.budget,
                    "translator forward passes per repair round (at most)": c.scan,
                    "problems per seed": n_problems,
                    "translator forward passes per problem (mean)": {a: round(summary[a]["forwards"], 1) for a in ARMS},
                    "solver calls per problem (mean)": {a: round(summary[a]["calls"], 2) for a in ARMS},
                    "executable rate": {a: round(summary[a]["executable"], 3) for a in ARMS}},
            seeds=c.seeds, direction="higher", std=summary["logicsage"]["correct_std"],
            baseline_std={a: summary[a]["correct_std"] for a in base}, paired=paired),
        "positive_control": pc,
        "control_results": {a: {k: mean_std_dict([x[k] for x in control[a]]) for k in control[a][0]}
                            for a in CONTROL_ARMS},
        "results": summary,
        "per_seed": per_seed,
        "versus_neural": {a: {ds: dict(cnt) for ds, cnt in by.items()} for a, by in versus_neural.items()},
        "first_execution_status": dict(errors),
        "seconds": time.perf_counter() - t0,
    }
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def results_table(result: dict) -> str:
    """Markdown: one row per arm (mean ± std over seeds, per-seed accuracy, the paired difference of
    LogicSAGE against the arm with its ci95, the budget each arm used), then the positive control."""

    h, seeds = result["headline"], result["headline"]["seeds"]
    rows = []
    for a, r in result["results"].items():
        per = [f"{x['correct']:.3f}" for x in result["per_seed"][a]]
        pair = "-" if a == "logicsage" else paired_line("", h["paired"][a], 3).split(": ", 1)[1]
        rows.append((a, f"{r['correct']:.3f} ± {r['correct_std']:.3f}", *per, pair,
                     f"{r['executable']:.3f} ± {r['executable_std']:.3f}", f"{r['calls']:.2f}", f"{r['forwards']:.0f}"))
    text = markdown_table(["arm", "accuracy", *[f"seed {s}" for s in seeds], "logicsage - arm [ci95]",
                           "executable rate (final program)", "solver calls / problem",
                           "translator passes / problem"], rows)
    pc = result["positive_control"]
    crow = [(a, f"{r['correct']['mean']:.3f} ± {r['correct']['std']:.3f}",
             *[f"{v:.3f}" for v in (pc["method_values"] if a == pc["method"] else pc["ablation_values"])],
             f"{r['executable']['mean']:.3f}", f"{r['forwards']['mean']:.0f}")
            for a, r in result["control_results"].items()]
    text += "\n" + markdown_table(["arm", "accuracy", *[f"seed {s}" for s in seeds], "executable rate",
                                   "translator passes / problem"], crow,
                                  caption=f"Positive control ({pc['setting']}): "
                                          f"{paired_line(pc['method'] + ' - ' + pc['ablation'], pc['paired'], 3)}; "
                                          f"sensitive: {pc['sensitive']}")
    vrows = []
    for a, by in result["versus_neural"].items():
        if a == "neural-only":
            continue
        for ds, cnt in by.items():
            n = sum(cnt.values())
            vrows.append((a, ds, cnt.get("worse", 0), cnt.get("better", 0), n))
    text += "\n" + markdown_table(["arm", "dataset", "worse than neural (neural right, arm wrong)",
                                   "better than neural", "problems"], vrows,
                                  caption="Against the neural answer, per problem, pooled over seeds")
    return text


def results_sections(result: dict) -> list[str]:
    """The sections of ``results.md`` (after its title and command) for a :func:`run` result."""
    keys = list(next(iter(result["results"].values()))["accuracy_by_cell"])
    cells = markdown_table(["arm", *keys], [[a, *(f"{r['accuracy_by_cell'][k]:.2f}" for k in keys)]
                                            for a, r in result["results"].items()],
                           caption="Accuracy by dataset and depth (pooled over seeds; deduction: objects):")
    status = ("Status of the first execution of the translator's program (translate-once, all seeds): "
              + ", ".join(f"{k}: {v}" for k, v in sorted(result["first_execution_status"].items())))
    return [results_table(result), cells, status]


def _write(stage, c: LogicsageConfig, result: dict) -> None:
    from onchip.plotting import pyplot

    from .problems import DEPTHS

    write_metrics(stage, result, c.command)
    write_results(stage, "LogicSAGE: Socratic solver feedback vs baselines", c.command or "onchip logicsage",
                  *results_sections(result))
    plt = pyplot()
    fig, axes = plt.subplots(1, len(c.datasets) + 2, figsize=(4.2 * (len(c.datasets) + 2), 3.6))
    for ax, ds in zip(axes, c.datasets):
        for a, r in result["results"].items():
            ax.plot(DEPTHS[ds], [r["accuracy_by_cell"][f"{ds}-{d}"] for d in DEPTHS[ds]], "o-", label=a)
        ax.set_title(f"{ds} ({c.per_cell * len(c.seeds)} problems per point)")
        ax.set_xlabel("objects" if ds == "deduction" else "depth")
        ax.set_ylim(0, 1.05)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=7)
    arms = list(result["results"])
    grouped_bars(axes[-2], arms, {"executable": [result["results"][a]["executable"] for a in arms],
                                  "accuracy": [result["results"][a]["correct"] for a in arms]}, rotation=30, fontsize=8)
    axes[-2].legend(fontsize=7)
    axes[-2].set_title(f"<= {c.budget} solver calls, <= {c.scan} passes / round")
    ax = axes[-1]
    seeds = list(c.seeds)
    for k, a in enumerate(arms):
        ax.plot(seeds, [x["correct"] for x in result["per_seed"][a]], "o-", color=f"C{k}", label=a)
    pc = result["positive_control"]
    for a, vals, k in ((pc["method"], pc["method_values"], arms.index("logicsage")),
                       (pc["ablation"], pc["ablation_values"], arms.index("resample"))):
        ax.plot(seeds, vals, "s--", color=f"C{k}", label=f"{a} (planted-error control)")
    ax.set_xlabel("seed")
    ax.set_ylabel("accuracy")
    ax.set_title("per seed")
    ax.legend(fontsize=6)
    save(fig, stage / "logicsage.png")
