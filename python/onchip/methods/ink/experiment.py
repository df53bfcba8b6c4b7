"""The ``onchip ink`` experiment: accuracy, answer margin and attention against the proportion of hard
distractors at fixed context length, filtering experiments, and the readout-learner analogue.

Writes ``metrics.json`` (config, per-context records, summaries, headline), ``results.md``,
``contexts.csv``, ``curves.png`` and ``filtering.png``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars, headline, headline_line, markdown_table, mean_std, need, recorded_config, save,
    write_dict_csv, write_metrics, write_results,
)
from . import FILTERS, SUBJECTS


@dataclass(frozen=True)
class InkConfig:
    """One run; validated on construction.

    Attributes:
        subjects: subset of :data:`~onchip.methods.ink.SUBJECTS`.
        seeds: seeds (distinct, each >= 0): contexts, tiny-model training, readout streams.
        n_docs: documents per context (fixed length), 2..20.
        hard_counts: numbers of hard distractors among the ``n_docs - 1`` other slots (p = h / (n_docs - 1)),
            increasing, starting at 0, at most ``n_docs - 1``.
        items: contexts per proportion, seed and language subject.
        filter_hard: hard distractors of the contexts the filtering experiments start from.
        attention_items: contexts per proportion and seed whose attention is read (0: none).
        tiny_steps: training steps of the tiny transformer.
        window: readout analogue: shots in the contaminated window.
        out, progress, command: as every experiment.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    subjects: tuple[str, ...] = SUBJECTS
    seeds: tuple[int, ...] = (0, 1, 2)
    n_docs: int = 12
    hard_counts: tuple[int, ...] = (0, 1, 2, 4, 8, 11)
    items: int = 3
    filter_hard: int = 6
    attention_items: int = 1
    tiny_steps: int = 400
    window: int = 256
    out: str = "out/ink"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("subjects", "seeds", "hard_counts"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(bool(self.subjects) and all(s in SUBJECTS for s in self.subjects), "subjects", list(self.subjects),
             f"choose from {', '.join(SUBJECTS)}")
        need(bool(self.seeds) and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "need distinct seeds, each >= 0")
        need(2 <= self.n_docs <= 20, "n_docs", self.n_docs, "must be in 2..20")
        h = self.hard_counts
        need(len(h) >= 2 and h[0] == 0 and all(b > a for a, b in zip(h, h[1:])) and h[-1] <= self.n_docs - 1,
             "hard_counts", list(h), f"need increasing counts from 0 to at most n_docs - 1 = {self.n_docs - 1}")
        need(self.items >= 1, "items", self.items, "must be >= 1")
        need(0 <= self.filter_hard <= self.n_docs - 1, "filter_hard", self.filter_hard,
             f"must be in 0..{self.n_docs - 1}")
        need(self.attention_items >= 0, "attention_items", self.attention_items, "must be >= 0")
        need(self.tiny_steps >= 1, "tiny_steps", self.tiny_steps, "must be >= 1")
        need(self.window >= 1, "window", self.window, "must be >= 1")


def first_drop_share(curve: dict[float, float]) -> float:
    """Share of the total drop ``f(0) - f(1)`` (or up to the largest p) already incurred at the smallest
    non-zero p: ``(f(0) - f(p1)) / (f(0) - f(p_max))``; NaN when there is no drop.

    A curve linear in p gives ``p1 / p_max``; a concave "first drop" curve gives more.
    """
    ps = sorted(curve)
    total = curve[ps[0]] - curve[ps[-1]]
    return float((curve[ps[0]] - curve[ps[1]]) / total) if total > 0 else float("nan")


def run(config: InkConfig) -> dict:
    """Run every subject over every seed and write the output folder; returns metrics.json's content."""
    import torch
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, check_output_dir

    from .. import _report
    from .documents import filtered, make_context
    from .stream import readout_fidelity
    from .subjects import GemmaSubject, TinySubject, accuracy_margin

    c = config
    check_output_dir(c.out)
    t0 = time.perf_counter()
    m = c.n_docs - 1
    ps = [h / m for h in c.hard_counts]
    records: list[dict] = []
    readout: list[dict] = []
    subjects = []
    if "gemma" in c.subjects:
        from .._lm import causal_lm

        subjects.append(("gemma", lambda seed: GemmaSubject(causal_lm())))
    if "tiny" in c.subjects:
        subjects.append(("tiny", lambda seed: TinySubject(c.n_docs, seed=seed, steps=c.tiny_steps,
                                                          progress=c.progress)))
    total = len(c.seeds) * (len(subjects) * (len(ps) * c.items + len(FILTERS) * c.items) + ("learner" in c.subjects))
    bar = tqdm(total=total, desc="ink", disable=not c.progress)
    for seed in c.seeds:
        for name, make in subjects:
            subject = make(seed)
            with torch.no_grad():
                for h, p in zip(c.hard_counts, ps):
                    ctxs = [make_context(_report.rng(seed, "ctx", h, i), c.n_docs, h) for i in range(c.items)]
                    for i, ctx in enumerate(ctxs):
                        row = subject.score([ctx], attention=i < c.attention_items)[0]
                        ok, margin = accuracy_margin(ctx, row["logp"])
                        records.append({"subject": name, "seed": seed, "p": p, "hard": h, "filter": "curve",
                                        "item": i, "correct": bool(ok), "margin": margin, "tokens": row["tokens"],
                                        "n_docs": c.n_docs, "attention": row.get("attention")})
                        bar.update()
                base = [make_context(_report.rng(seed, "filter", i), c.n_docs, c.filter_hard) for i in range(c.items)]
                for how in FILTERS:
                    for i, ctx in enumerate(base):
                        f = filtered(ctx, how, _report.rng(seed, "filter-how", how, i))
                        row = subject.score([f])[0]
                        ok, margin = accuracy_margin(f, row["logp"])
                        records.append({"subject": name, "seed": seed, "p": f.p, "hard": c.filter_hard,
                                        "filter": how, "item": i, "correct": bool(ok), "margin": margin,
                                        "tokens": row["tokens"], "n_docs": len(f.docs), "attention": None})
                        bar.update()
        if "learner" in c.subjects:
            for h, p in zip(c.hard_counts, ps):
                readout.append({"seed": seed, "p": p, "fidelity": readout_fidelity(p, seed=seed, window=c.window)})
            bar.update()
    bar.close()

    curves, filters, attention = summarise(records, readout, c)
    head = _headline(curves, c, ps)
    settings = recorded_config(c)
    settings.update(proportions=ps, seconds=time.perf_counter() - t0,
                    prompt_format="documents, then 'Question: What is the favourite colour of <name>?\\n"
                                  "Answer: The favourite colour of <name> is' -> next word among 12 colours")
    result = {"headline": head, "config": settings, "curves": curves, "filtering": filters, "attention": attention,
              "contexts": records, "readout": readout}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(curve_table(curves))
        print(filter_table(filters))
    return result


def summarise(records, readout, c: InkConfig):
    """Per subject: curves over p (accuracy, margin, first-drop share; mean ± std over seeds), the
    filtering arms, and the attention shares."""

    curves: dict = {}
    for name in sorted({r["subject"] for r in records}):
        rows = [r for r in records if r["subject"] == name and r["filter"] == "curve"]
        per_p = {}
        drops_acc, drops_margin = [], []
        for seed in c.seeds:
            acc = {p: float(np.mean([r["correct"] for r in rows if r["seed"] == seed and r["p"] == p]))
                   for p in sorted({r["p"] for r in rows})}
            mar = {p: float(np.mean([r["margin"] for r in rows if r["seed"] == seed and r["p"] == p])) for p in acc}
            drops_acc.append(first_drop_share(acc))
            drops_margin.append(first_drop_share(mar))
            for p in acc:
                per_p.setdefault(p, {"accuracy": [], "margin": []})
                per_p[p]["accuracy"].append(acc[p])
                per_p[p]["margin"].append(mar[p])
        curves[name] = {
            "p": sorted(per_p),
            "accuracy": [mean_std(per_p[p]["accuracy"]) for p in sorted(per_p)],
            "margin": [mean_std(per_p[p]["margin"]) for p in sorted(per_p)],
            "first_drop_share_margin": mean_std([d for d in drops_margin if np.isfinite(d)] or [float("nan")]),
            "first_drop_share_accuracy": mean_std([d for d in drops_acc if np.isfinite(d)] or [float("nan")]),
        }
    if readout:
        per_p = {}
        drops = []
        for seed in c.seeds:
            f = {r["p"]: r["fidelity"] for r in readout if r["seed"] == seed}
            drops.append(first_drop_share(f))
            for p, v in f.items():
                per_p.setdefault(p, []).append(v)
        curves["learner"] = {"p": sorted(per_p), "fidelity": [mean_std(per_p[p]) for p in sorted(per_p)],
                             "first_drop_share_fidelity": mean_std([d for d in drops if np.isfinite(d)]
                                                                   or [float("nan")])}
    filters: dict = {}
    for name in sorted({r["subject"] for r in records}):
        filters[name] = {}
        for how in FILTERS:
            rows = [r for r in records if r["subject"] == name and r["filter"] == how]
            if not rows:
                continue
            acc = [float(np.mean([r["correct"] for r in rows if r["seed"] == s])) for s in c.seeds]
            mar = [float(np.mean([r["margin"] for r in rows if r["seed"] == s])) for s in c.seeds]
            filters[name][how] = {"accuracy": mean_std(acc), "margin": mean_std(mar),
                                  "tokens": float(np.mean([r["tokens"] for r in rows])),
                                  "p": float(np.mean([r["p"] for r in rows])),
                                  "n_docs": float(np.mean([r["n_docs"] for r in rows]))}
    attention: dict = {}
    for name in sorted({r["subject"] for r in records}):
        rows = [r for r in records if r["subject"] == name and r["attention"]]
        if not rows:
            continue
        attention[name] = {}
        for p in sorted({r["p"] for r in rows}):
            sel = [r for r in rows if r["p"] == p]
            hard = int(round(p * (c.n_docs - 1)))
            counts = {"gold": 1, "hard": hard, "easy": c.n_docs - 1 - hard}
            attention[name][f"{p:.4f}"] = {
                **{f"{k}_total": float(np.mean([r["attention"][k] for r in sel])) for k in counts},
                **{f"{k}_per_doc": (float(np.mean([r["attention"][k] for r in sel])) / counts[k]
                                    if counts[k] else None) for k in counts}}
    return curves, filters, attention


def _headline(curves, c: InkConfig, ps) -> dict:

    name = "gemma" if "gemma" in curves else "tiny" if "tiny" in curves else "learner"
    key = "first_drop_share_fidelity" if name == "learner" else "first_drop_share_margin"
    value, std = curves[name][key]
    baselines = {"linear in p (no first-drop effect)": ps[1] / ps[-1]}
    baseline_std = {"linear in p (no first-drop effect)": 0.0}
    for other, k in (("tiny", "first_drop_share_margin"), ("learner", "first_drop_share_fidelity")):
        if other != name and other in curves and np.isfinite(curves[other][k][0]):
            label = "tiny transformer (margin)" if other == "tiny" else "KAN readout learner (analogue, fidelity)"
            baselines[label], baseline_std[label] = curves[other][k]
    return headline(
        f"share of the total loss (p: 0 -> {ps[-1]:.2f}) already incurred at p = {ps[1]:.3f} "
        f"({c.hard_counts[1]} hard distractor(s) among {c.n_docs - 1} documents)",
        f"{name}: answer margin (log p(gold) - best rival colour)" if name != "learner" else "learner: fidelity",
        value if np.isfinite(value) else 0.0, baselines,
        budget={"contexts per proportion and seed": c.items, "documents per context": c.n_docs,
                "unit": "one forward pass per context, every subject the same contexts"},
        seeds=list(c.seeds), direction="higher", std=std if np.isfinite(std) else 0.0, baseline_std=baseline_std)


def _ms(pair, digits=3):
    m, s = pair
    return "n/a" if not np.isfinite(m) else f"{m:.{digits}f} ± {s:.{digits}f}"


def curve_table(curves) -> str:

    rows = []
    for name, cur in curves.items():
        for i, p in enumerate(cur["p"]):
            if name == "learner":
                rows.append((name, f"{p:.3f}", "-", "-", _ms(cur["fidelity"][i])))
            else:
                rows.append((name, f"{p:.3f}", _ms(cur["accuracy"][i]), _ms(cur["margin"][i], 2), "-"))
    fd = "; ".join(f"{n}: {_ms(cur.get('first_drop_share_margin', cur.get('first_drop_share_fidelity')))}"
                   for n, cur in curves.items())
    return markdown_table(["subject", "p (hard distractors)", "accuracy", "answer margin (nats)",
                           "readout fidelity (analogue)"], rows, caption=f"First-drop share: {fd}")


def filter_table(filters) -> str:

    rows = [(name, how, f"{r['n_docs']:.1f}", f"{r['tokens']:.0f}", f"{r['p']:.2f}", _ms(r["accuracy"]),
             _ms(r["margin"], 2)) for name, arms in filters.items() for how, r in arms.items()]
    return markdown_table(["subject", "filter", "documents", "tokens", "p", "accuracy", "margin (nats)"], rows)


def _write(stage, c: InkConfig, result: dict) -> None:
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    h = result["headline"]
    att_rows = [(n, p, *(f"{v:.3f}" if v is not None else "-" for v in a.values()))
                for n, by in result["attention"].items() for p, a in by.items()]
    sections = [headline_line(h), curve_table(result["curves"]),
                f"Filtering (starting from {c.filter_hard} hard distractors among {c.n_docs - 1}):",
                filter_table(result["filtering"])]
    if att_rows:
        keys = list(next(iter(next(iter(result["attention"].values())).values())))
        sections.append(markdown_table(["subject", "p", *keys], att_rows,
                                       caption="Attention of the answer position (mean over layers and heads)"))
    write_results(stage, "onchip ink: the first drop of ink", c.command or "onchip ink", *sections)
    write_dict_csv(stage / "contexts.csv", [{k: v for k, v in r.items() if k != "attention"} |
                                            {f"att_{k}": (r["attention"] or {}).get(k) for k in ("gold", "hard", "easy")}
                                            for r in result["contexts"]] or [{"empty": ""}])
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for name, cur in result["curves"].items():
        if name == "learner":
            m = np.array([v[0] for v in cur["fidelity"]])
            axes[0].plot(cur["p"], (m - m[-1]) / max(m[0] - m[-1], 1e-12), "k--", marker="s",
                         label="KAN readout (analogue), fidelity")
            continue
        acc = np.array([v[0] for v in cur["accuracy"]])
        mar = np.array([v[0] for v in cur["margin"]])
        axes[0].plot(cur["p"], (mar - mar[-1]) / max(mar[0] - mar[-1], 1e-12), marker="o", label=f"{name}, margin")
        axes[1].errorbar(cur["p"], acc, yerr=[v[1] for v in cur["accuracy"]], marker="o", label=name)
    axes[0].plot([0, 1], [1, 0], ":", color="grey", label="linear")
    axes[0].set_xlabel("proportion p of hard distractors")
    axes[0].set_ylabel("normalised score (1 at p=0, 0 at p=1)")
    axes[0].legend(fontsize=7)
    axes[1].set_xlabel("p")
    axes[1].set_ylabel("accuracy")
    axes[1].legend(fontsize=7)
    for name, by in result["attention"].items():
        pp = [float(p) for p in by]
        for kind, style in (("gold", "-"), ("hard", "--"), ("easy", ":")):
            axes[2].plot(pp, [by[p][f"{kind}_total"] for p in by], style, marker=".", label=f"{name}: {kind}")
    axes[2].set_xlabel("p")
    axes[2].set_ylabel("attention share of the answer position")
    axes[2].legend(fontsize=6)
    save(fig, stage / "curves.png")
    fig, ax = plt.subplots(figsize=(8, 3.6))
    names = list(result["filtering"])
    if names:
        grouped_bars(ax, names, {how: [result["filtering"][n].get(how, {}).get("accuracy", (np.nan, 0))[0]
                                       for n in names] for how in FILTERS}, rotation=0)
        ax.set_ylabel("accuracy")
        ax.set_title(f"filtering from {c.filter_hard}/{c.n_docs - 1} hard distractors")
        ax.legend(fontsize=8)
    save(fig, stage / "filtering.png")
