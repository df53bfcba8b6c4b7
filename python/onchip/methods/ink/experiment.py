"""The ``onchip ink`` experiment: accuracy, p(gold), log p(gold), answer margin and attention against the
proportion of hard distractors at fixed context length (arXiv 2605.10828), a positive control through the
tiny transformer (the query's surname erased, so the hard distractors cannot be told from the gold document)
with its negative control, filtering experiments on long contexts, and the readout-learner analogue.

The headline is the first-drop share (:func:`first_drop_share`) of accuracy, per seed, with the other
readings and subjects beside it, each paired seed by seed (:func:`onchip.methods._report.paired_difference`).

Writes ``metrics.json`` (config, per-context records, summaries, headline, positive_control,
negative_control), ``results.md``,
``contexts.csv``, ``curves.png`` and ``filtering.png``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    grouped_bars,
    headline,
    headline_line,
    markdown_table,
    mean_std,
    mean_std_text,
    need,
    paired_line,
    recorded_config,
    save,
    write_dict_csv,
    write_metrics,
    write_results,
)
from . import FILTERS, SUBJECTS
from .documents import LAST as LAST_DEFAULT

#: the readings of one answer whose first-drop share is reported (record key -> label); accuracy and
#: p(gold) are linear in the answer probability, the two log readings bend it (see ``subjects.gold_scores``)
METRICS = {"correct": "accuracy", "gold_prob": "p(gold)", "gold_logp": "log p(gold)", "margin": "answer margin"}
#: the positive control's arms, both read by the tiny transformer with the query's surname replaced by one no
#: document holds (``documents.without_surname``): ``confusable`` keeps the hard distractors (the gold and h
#: distractors then match the query equally, so accuracy cannot exceed about 1/(h+1): a first drop, if the
#: reader still answers from the documents that match the first name); ``filler`` swaps every hard distractor
#: for filler in place (``documents.filtered(..., "swap-hard-to-easy")``: only the gold document matches)
CONTROL_ARMS = ("confusable", "filler")
LINEAR = "linear in p (no first-drop effect)"


@dataclass(frozen=True)
class InkConfig:
    """One run; validated on construction.

    Attributes:
        subjects: subset of :data:`~onchip.methods.ink.SUBJECTS`.
        seeds: seeds (distinct, each >= 0, at least 2 for the paired intervals): context resamples,
            tiny-model training, readout streams.
        n_docs: documents per context of the p-curves (fixed length), 2..20.
        hard_counts: numbers of hard distractors among the ``n_docs - 1`` other slots (p = h / (n_docs - 1)),
            increasing, starting at 0, at most ``n_docs - 1``.
        items: contexts per proportion, seed and language subject.
        control_items: contexts per proportion and seed of the positive control (tiny model only).
        filter_hard: hard distractors (of ``n_docs - 1``) of the contexts the filtering arms start from;
            the long filtering contexts keep the same proportion.
        filter_docs: documents per context of Gemma's filtering arm (long contexts; the tiny model
            filters at ``n_docs``, its trained length), n_docs..160.
        filter_items: base contexts per seed of the filtering arm.
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
    items: int = 10
    control_items: int = 40
    filter_hard: int = 6
    filter_docs: int = 48
    filter_items: int = 4
    attention_items: int = 1
    tiny_steps: int = 400
    window: int = 256
    out: str = "out/ink"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        from .documents import LONG_LAST

        for name in ("subjects", "seeds", "hard_counts"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(bool(self.subjects) and all(s in SUBJECTS for s in self.subjects), "subjects", list(self.subjects),
             f"choose from {', '.join(SUBJECTS)}")
        need(len(self.seeds) >= 2 and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "need at least 2 distinct seeds (paired intervals), each >= 0")
        need(2 <= self.n_docs <= 20, "n_docs", self.n_docs, "must be in 2..20")
        h = self.hard_counts
        need(len(h) >= 2 and h[0] == 0 and all(b > a for a, b in zip(h, h[1:])) and h[-1] <= self.n_docs - 1,
             "hard_counts", list(h), f"need increasing counts from 0 to at most n_docs - 1 = {self.n_docs - 1}")
        need(self.items >= 1, "items", self.items, "must be >= 1")
        need(self.control_items >= 1, "control_items", self.control_items, "must be >= 1")
        need("tiny" not in self.subjects or h[-1] + 2 <= len(LAST_DEFAULT), "hard_counts", list(h),
             f"the tiny model's positive control asks about a surname no document holds: at most "
             f"{len(LAST_DEFAULT) - 2} hard distractors")
        need(0 <= self.filter_hard <= self.n_docs - 1, "filter_hard", self.filter_hard,
             f"must be in 0..{self.n_docs - 1}")
        need(self.n_docs <= self.filter_docs <= 160, "filter_docs", self.filter_docs, f"must be in {self.n_docs}..160")
        need(self.long_filter_hard + 1 <= len(LONG_LAST), "filter_docs", self.filter_docs,
             f"too many hard distractors ({self.long_filter_hard}) for {len(LONG_LAST)} surnames")
        need(self.filter_items >= 1, "filter_items", self.filter_items, "must be >= 1")
        need(self.attention_items >= 0, "attention_items", self.attention_items, "must be >= 0")
        need(self.tiny_steps >= 1, "tiny_steps", self.tiny_steps, "must be >= 1")
        need(self.window >= 1, "window", self.window, "must be >= 1")

    @property
    def long_filter_hard(self) -> int:
        """Hard distractors of Gemma's long filtering contexts: ``filter_hard / (n_docs - 1)`` of the
        ``filter_docs - 1`` other slots, rounded."""
        return round(self.filter_hard / (self.n_docs - 1) * (self.filter_docs - 1))


def first_drop_share(curve: dict[float, float]) -> float:
    """Share of the total drop ``f(0) - f(1)`` (or up to the largest p) already incurred at the smallest
    non-zero p: ``(f(0) - f(p1)) / (f(0) - f(p_max))``; NaN when there is no drop.

    A curve linear in p gives ``p1 / p_max``; a concave "first drop" curve gives more.
    """
    ps = sorted(curve)
    total = curve[ps[0]] - curve[ps[-1]]
    return float((curve[ps[0]] - curve[ps[1]]) / total) if total > 0 else float("nan")


def excess_first_drop(curve: dict[float, float]) -> float:
    """The first drop beyond a line: ``f(0) - f(p1) - (p1 / p_max) (f(0) - f(p_max))`` (the reading's units).

    0 for a curve linear in p and for a flat one (no drop, where :func:`first_drop_share` is NaN);
    > 0 for a concave "first drop" curve.
    """
    ps = sorted(curve)
    f0, f1, fm = curve[ps[0]], curve[ps[1]], curve[ps[-1]]
    return float(f0 - f1 - ps[1] / ps[-1] * (f0 - fm))


def run(config: InkConfig) -> dict:
    """Run every subject over every seed, the positive control and the filtering arms, and write the
    output folder; returns metrics.json's content."""
    import torch
    from onchip.progress import progress_bar

    from onchip.io import atomic_output_dir, check_output_dir

    from .. import _report
    from .documents import LONG_LAST, filtered, make_context
    from .stream import readout_fidelity
    from .subjects import GemmaSubject, TinySubject, gold_scores

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    m = c.n_docs - 1
    ps = [h / m for h in c.hard_counts]
    records: list[dict] = []
    readout: list[dict] = []
    control: list[dict] = []
    subjects = []
    if "gemma" in c.subjects:
        from .._lm import causal_lm

        subjects.append(("gemma", lambda seed: GemmaSubject(causal_lm())))
    if "tiny" in c.subjects:
        subjects.append(("tiny", lambda seed: TinySubject(c.n_docs, seed=seed, steps=c.tiny_steps,
                                                          progress=c.progress)))
    total = len(c.seeds) * (len(subjects) * (len(ps) * c.items + len(FILTERS) * c.filter_items)
                            + ("learner" in c.subjects))
    bar = progress_bar(total=total, desc="ink", disable=not c.progress)
    for seed in c.seeds:
        curve_ctxs = {h: [make_context(_report.rng(seed, "ctx", h, i), c.n_docs, h) for i in range(c.items)]
                      for h in c.hard_counts}
        for name, make in subjects:
            subject = make(seed)
            long = name == "gemma"
            f_docs, f_hard = (c.filter_docs, c.long_filter_hard) if long else (c.n_docs, c.filter_hard)
            with torch.no_grad():
                for h, p in zip(c.hard_counts, ps):
                    for i, ctx in enumerate(curve_ctxs[h]):
                        row = subject.score([ctx], attention=i < c.attention_items)[0]
                        records.append({"subject": name, "seed": seed, "p": p, "hard": h, "filter": "curve",
                                        "item": i, **gold_scores(ctx, row["logp"]), "tokens": row["tokens"],
                                        "n_docs": c.n_docs, "attention": row.get("attention")})
                        bar.update()
                base = [make_context(_report.rng(seed, "filter", f_docs, i), f_docs, f_hard,
                                     LONG_LAST if long else LAST_DEFAULT) for i in range(c.filter_items)]
                for how in FILTERS:
                    for i, ctx in enumerate(base):
                        f = filtered(ctx, how, _report.rng(seed, "filter-how", how, i))
                        row = subject.score([f])[0]
                        records.append({"subject": name, "seed": seed, "p": f.p, "hard": f_hard,
                                        "filter": how, "item": i, **gold_scores(f, row["logp"]),
                                        "tokens": row["tokens"], "n_docs": len(f.docs), "attention": None})
                        bar.update()
                if name == "tiny":   # the positive control, through the trained reader
                    control += _control_rows(subject, c, seed)
        if "learner" in c.subjects:
            for h, p in zip(c.hard_counts, ps):
                readout.append({"seed": seed, "p": p, "fidelity": readout_fidelity(p, seed=seed, window=c.window)})
            bar.update()
    bar.close()

    curves, filters, attention = summarise(records, readout, c)
    positive, negative = _positive_control(control, c, ps)
    head, first_drop = _headline(curves, c, ps)
    settings = recorded_config(c)
    seconds = time.perf_counter() - t0
    settings.update(proportions=ps, long_filter_hard=c.long_filter_hard, torch_threads=torch.get_num_threads(),
                    prompt_format="documents, then 'Question: What is the favourite colour of <name>?\\n"
                                  "Answer: The favourite colour of <name> is' -> next word among 12 colours")
    result = {"headline": head, "positive_control": positive, "negative_control": negative, "first_drop": first_drop, "seconds": seconds,
              "config": settings, "curves": curves, "filtering": filters, "attention": attention,
              "control_curves": _control_curves(control, c), "contexts": records, "control": control,
              "readout": readout}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(headline_line(head))
        print(curve_table(curves))
        print(filter_table(filters))
        print(f"{seconds:.0f} s")
    return result


def _per_seed_curve(rows, seed, key) -> dict[float, float]:
    sel = [r for r in rows if r["seed"] == seed]
    return {p: float(np.mean([r[key] for r in sel if r["p"] == p])) for p in sorted({r["p"] for r in sel})}


def summarise(records, readout, c: InkConfig):
    """Per subject: curves over p of every reading in :data:`METRICS` (mean ± std over seeds) with the
    per-seed first-drop shares; the filtering arms (per seed, and paired per base context against
    ``none``); the attention shares."""
    from .._report import paired_difference

    curves: dict = {}
    for name in sorted({r["subject"] for r in records}):
        rows = [r for r in records if r["subject"] == name and r["filter"] == "curve"]
        cur: dict = {"p": sorted({r["p"] for r in rows})}
        for key in METRICS:
            per_seed = [_per_seed_curve(rows, s, key) for s in c.seeds]
            cur[key] = [mean_std([ps[p] for ps in per_seed]) for p in cur["p"]]
            cur[f"share_{key}"] = [first_drop_share(ps) for ps in per_seed]
        curves[name] = cur
    if readout:
        per_seed = [{r["p"]: r["fidelity"] for r in readout if r["seed"] == s} for s in c.seeds]
        ps = sorted(per_seed[0])
        curves["learner"] = {"p": ps, "fidelity": [mean_std([f[p] for f in per_seed]) for p in ps],
                             "share_fidelity": [first_drop_share(f) for f in per_seed]}
    filters: dict = {}
    for name in sorted({r["subject"] for r in records}):
        filters[name] = {}
        none = {(r["seed"], r["item"]): r for r in records if r["subject"] == name and r["filter"] == "none"}
        for how in FILTERS:
            rows = [r for r in records if r["subject"] == name and r["filter"] == how]
            if not rows:
                continue
            arm = {k: mean_std([float(np.mean([r[k] for r in rows if r["seed"] == s])) for s in c.seeds])
                   for k in ("correct", "gold_prob", "margin")}
            entry = {"accuracy": arm["correct"], "gold_prob": arm["gold_prob"], "margin": arm["margin"],
                     "tokens": float(np.mean([r["tokens"] for r in rows])),
                     "p": float(np.mean([r["p"] for r in rows])), "n_docs": float(np.mean([r["n_docs"] for r in rows]))}
            if how != "none" and len(rows) >= 2:
                pairs = [(r, none[(r["seed"], r["item"])]) for r in rows]
                entry["paired_vs_none"] = {   # over base contexts (seeds x filter_items)
                    k: paired_difference([a[k] for a, _ in pairs], [b[k] for _, b in pairs])
                    for k in ("correct", "gold_prob", "margin")}
            filters[name][how] = entry
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


def _control_rows(subject, c: InkConfig, seed: int) -> list[dict]:
    """The positive control's records of one seed: both :data:`CONTROL_ARMS` on the same contexts."""
    from .. import _report
    from .documents import filtered, make_context, without_surname
    from .subjects import gold_scores

    rows = []
    for h in c.hard_counts:
        for i in range(c.control_items):
            ctx, k = None, 0
            while ctx is None:   # redraw the rare context whose filler holds every other surname
                base = make_context(_report.rng(seed, "control-ctx", h, i, *([k] if k else [])), c.n_docs, h)
                try:
                    ctx = without_surname(base, _report.rng(seed, "control-query", h, i))  # the plant
                except ValueError:
                    k += 1
            arms = {"confusable": ctx,
                    "filler": filtered(ctx, "swap-hard-to-easy", _report.rng(seed, "control-swap", h, i))}
            for arm, x in arms.items():
                row = subject.score([x])[0]
                rows.append({"arm": arm, "seed": seed, "p": h / (c.n_docs - 1), "hard": h, "item": i,
                             **gold_scores(x, row["logp"])})
    return rows


def _control_curves(control, c: InkConfig) -> dict:
    out = {}
    for arm in CONTROL_ARMS:
        rows = [r for r in control if r["arm"] == arm]
        if not rows:
            continue
        ps = sorted({r["p"] for r in rows})
        out[arm] = {"p": ps}
        for key in ("correct", "gold_prob"):
            per_seed = [_per_seed_curve(rows, s, key) for s in c.seeds]
            out[arm][key] = [mean_std([d[p] for d in per_seed]) for p in ps]
            out[arm][f"excess_{key}"] = [excess_first_drop(d) for d in per_seed]
    return out


def _positive_control(control, c: InkConfig, ps) -> tuple[dict | None, dict | None]:
    """The positive control (:data:`CONTROL_ARMS`, confusable against filler: excess first drop of accuracy,
    paired per seed) and its negative control (filler against a line through its own end points); None
    when the tiny model did not run."""
    from .._controls import negative_control
    from .._report import positive_control

    curves = _control_curves(control, c)
    if set(curves) != set(CONTROL_ARMS):
        return None, None
    metric = (f"first drop of accuracy beyond a line: acc(0) - acc({ps[1]:.3f}) - {ps[1] / ps[-1]:.3f} "
              f"(acc(0) - acc({ps[-1]:.3f})); 0 for a linear or flat curve")
    pc = positive_control(
        f"the tiny transformer asked about a surname no document holds (documents.without_surname), "
        f"{c.control_items} contexts per proportion and seed: the gold document and the h hard distractors then "
        "match the query only by its first name, so a reader that answers from them is right about 1/(h+1) of "
        "the time (a first drop), one that does not answer from the documents shows no drop; ablation: the same "
        "contexts with every hard distractor swapped for filler in place (only the gold document matches)",
        "confusable", "filler", curves["confusable"]["excess_correct"], curves["filler"]["excess_correct"],
        seeds=c.seeds, metric=metric)
    nc = negative_control(
        "the ablation alone (hard distractors swapped for filler, surname erased): no document competes with "
        "the gold one, so no first drop should be seen", "filler", "no first drop (0)",
        curves["filler"]["excess_correct"], [0.0] * len(c.seeds), seeds=c.seeds, metric=metric)
    return pc, nc


def _finite_pairs(a, b):
    keep = [i for i, (x, y) in enumerate(zip(a, b)) if np.isfinite(x) and np.isfinite(y)]
    return [a[i] for i in keep], [b[i] for i in keep]


def _headline(curves, c: InkConfig, ps):
    """The headline (first-drop share of accuracy for Gemma, else the tiny model, else the learner),
    with linear-in-p, the other readings of the same subject and the other subjects as baselines, each
    paired over seeds; and the ``first_drop`` table (every subject and reading, per seed)."""
    from .._report import paired_difference

    linear = ps[1] / ps[-1]
    shares: dict[str, list[float]] = {}
    for name, cur in curves.items():
        if name == "learner":
            shares["KAN readout learner (analogue): fidelity"] = cur["share_fidelity"]
        else:
            for key, label in METRICS.items():
                shares[f"{name}: {label}"] = cur[f"share_{key}"]
    first_drop = {"linear": linear, "per_seed": shares, "vs_linear": {}}
    for label, v in shares.items():
        a, b = _finite_pairs(v, [linear] * len(v))
        first_drop["vs_linear"][label] = paired_difference(a, b) if len(a) >= 2 else None

    def finite_enough(v):
        return sum(np.isfinite(x) for x in v) >= 2

    name = next((n for n in ("gemma", "tiny") if n in curves and finite_enough(curves[n]["share_correct"])), None)
    method = f"{name}: accuracy" if name else "KAN readout learner (analogue): fidelity"
    mv = shares[method]
    baselines = {LINEAR: [linear] * len(mv)}
    order = [f"{name}: {METRICS[k]}" for k in ("gold_prob", "gold_logp", "margin")] if name else []
    order += [f"{n}: accuracy" for n in ("tiny", "gemma") if n != name and n in curves]
    order += ["KAN readout learner (analogue): fidelity"] if method != "KAN readout learner (analogue): fidelity" else []
    left_out = {}
    for label in order:
        if label not in shares:
            continue
        a, b = _finite_pairs(mv, shares[label])
        if len(a) >= 2:
            baselines[label] = shares[label]
        else:
            left_out[label] = "fewer than 2 seeds with a drop in both (share undefined)"
    paired, values, stds = {}, {}, {}
    for label, v in baselines.items():
        a, b = _finite_pairs(mv, v)
        paired[label] = paired_difference(a, b)
        values[label], stds[label] = mean_std([x for x in v if np.isfinite(x)])
    first_drop["left_out_of_headline"] = left_out
    value, std = mean_std([x for x in mv if np.isfinite(x)])
    head = headline(
        f"first-drop share: share of the total loss (p: 0 -> {ps[-1]:.2f}) already incurred at p = {ps[1]:.3f} "
        f"({c.hard_counts[1]} hard distractor(s) among {c.n_docs - 1} documents); per seed, mean over seeds; "
        "baselines are other readings (p(gold), log p(gold), margin) or subjects, paired seed by seed",
        method, value, values,
        budget={"contexts per proportion and seed": c.items, "contexts per proportion": c.items * len(c.seeds),
                "documents per context": c.n_docs,
                "unit": "one forward pass per context, every subject and reading the same contexts"},
        seeds=list(c.seeds), direction="higher", std=std, baseline_std=stds, paired=paired)
    return head, first_drop


def curve_table(curves) -> str:
    """The p-curves of every subject and reading (mean ± std over seeds) as a markdown table."""
    rows = []
    for name, cur in curves.items():
        for i, p in enumerate(cur["p"]):
            if name == "learner":
                rows.append((name, f"{p:.3f}", "-", "-", "-", "-", mean_std_text(*cur["fidelity"][i])))
            else:
                rows.append((name, f"{p:.3f}", mean_std_text(*cur["correct"][i]), mean_std_text(*cur["gold_prob"][i]),
                             mean_std_text(*cur["gold_logp"][i], 2), mean_std_text(*cur["margin"][i], 2), "-"))
    return markdown_table(["subject", "p (hard distractors)", "accuracy", "p(gold)", "log p(gold) (nats)",
                           "answer margin (nats)", "readout fidelity (analogue)"], rows,
                          caption="Curves against p (mean ± std over seeds)")


def first_drop_table(first_drop) -> str:
    """Per subject and reading: the per-seed first-drop shares and their paired difference from linear."""
    rows = []
    for label, v in first_drop["per_seed"].items():
        pair = first_drop["vs_linear"][label]
        finite = [x for x in v if np.isfinite(x)]
        rows.append((label, ", ".join("n/a" if not np.isfinite(x) else f"{x:.3f}" for x in v),
                     mean_std_text(*mean_std(finite)) if finite else "n/a",
                     paired_line("", pair).lstrip(": ") if pair else "n/a"))
    return markdown_table(["subject: reading", "share per seed", "mean ± std", "minus linear, ci95 over seeds"],
                          rows, caption=f"First-drop share by reading (linear in p: {first_drop['linear']:.3f}; "
                                        "n/a: no drop on that seed, the share is undefined)")


def filter_table(filters) -> str:
    """The filtering arms (per-seed means, and each arm minus ``none`` paired over base contexts)."""

    def pair(r, k):
        pv = r.get("paired_vs_none", {}).get(k)
        return paired_line("", pv).lstrip(": ") if pv else "-"

    rows = [(name, how, f"{r['n_docs']:.1f}", f"{r['tokens']:.0f}", f"{r['p']:.2f}", mean_std_text(*r["accuracy"]),
             mean_std_text(*r["gold_prob"]), mean_std_text(*r["margin"], 2), pair(r, "correct"), pair(r, "gold_prob"))
            for name, arms in filters.items() for how, r in arms.items()]
    return markdown_table(["subject", "filter", "documents", "tokens", "p", "accuracy", "p(gold)", "margin (nats)",
                           "accuracy - none (ci95 over contexts)", "p(gold) - none (ci95)"], rows)


def control_table(pc, nc, control_curves) -> str:
    """The positive and negative controls: per arm, accuracy and p(gold) against p, and the per-seed excess."""
    if pc is None:
        return "Positive control: not run (it reads the tiny transformer, not among the subjects)."
    rows = []
    for arm, cur in control_curves.items():
        for i, p in enumerate(cur["p"]):
            rows.append((arm, f"{p:.3f}", mean_std_text(*cur["correct"][i]), mean_std_text(*cur["gold_prob"][i])))
    lines = [f"Positive control ({pc['setting']}). Metric: {pc['metric']}.",
             (f"Per seed: confusable {', '.join(f'{v:.3f}' for v in pc['method_values'])}; filler "
              f"{', '.join(f'{v:.3f}' for v in pc['ablation_values'])}; "
              f"{paired_line('confusable - filler', pc['paired'])}; sensitive: {pc['sensitive']}."),
             (f"Negative control ({nc['setting']}): {paired_line('filler - 0', nc['paired'])}; holds zero: "
              f"{nc['holds_zero']}."),
             markdown_table(["arm", "p", "accuracy", "p(gold)"], rows)]
    return "\n\n".join(lines)


def results_sections(result: dict) -> list[str]:
    """The sections of ``results.md`` (markdown strings), from a run's result alone (its recorded
    ``config`` included), so a committed ``metrics.json`` rebuilds its ``results.md``."""
    c = result["config"]
    h = result["headline"]
    att_rows = [(n, p, *(f"{v:.3f}" if v is not None else "-" for v in a.values()))
                for n, by in result["attention"].items() for p, a in by.items()]
    pairs = "; ".join(paired_line(k, v) for k, v in h["paired"].items())
    sections = [headline_line(h), f"Paired over seeds ({h['method']} minus each): {pairs}.",
                f"Run time: {result['seconds']:.0f} s (torch threads: {c['torch_threads']}).",
                control_table(result["positive_control"], result["negative_control"], result["control_curves"]),
                first_drop_table(result["first_drop"]), curve_table(result["curves"]),
                (f"Filtering (starting from {c['filter_hard']} hard distractors among {c['n_docs'] - 1}; Gemma's "
                 f"filtering contexts hold {c['filter_docs']} documents with {c['long_filter_hard']} hard "
                 f"distractors, the tiny model's {c['n_docs']}; {c['filter_items']} base contexts per seed):"),
                filter_table(result["filtering"])]
    if att_rows:
        keys = list(next(iter(next(iter(result["attention"].values())).values())))
        sections.append(markdown_table(["subject", "p", *keys], att_rows,
                                       caption="Attention of the answer position (mean over layers and heads)"))
    return sections


def _write(stage, c: InkConfig, result: dict) -> None:
    from onchip.plotting import pyplot

    write_metrics(stage, result, c.command)
    write_results(stage, "onchip ink: the first drop of ink", c.command or "onchip ink", *results_sections(result))
    write_dict_csv(stage / "contexts.csv", [{k: v for k, v in r.items() if k != "attention"} |
                                            {f"att_{k}": (r["attention"] or {}).get(k) for k in ("gold", "hard", "easy")}
                                            for r in result["contexts"]] or [{"empty": ""}])
    plt = pyplot()

    def norm(vals):
        m = np.array([v[0] for v in vals])
        return (m - m[-1]) / max(m[0] - m[-1], 1e-12)

    fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
    styles = {"correct": "-", "gold_prob": "--", "gold_logp": "-.", "margin": ":"}
    for name, cur in result["curves"].items():
        if name == "learner":
            axes[0].plot(cur["p"], norm(cur["fidelity"]), "k--", marker="s", label="KAN readout (analogue), fidelity")
            continue
        for key, label in METRICS.items():
            axes[0].plot(cur["p"], norm(cur[key]), styles[key], marker="o", ms=3, label=f"{name}, {label}")
        axes[1].errorbar(cur["p"], [v[0] for v in cur["correct"]], yerr=[v[1] for v in cur["correct"]], marker="o",
                         label=f"{name}, accuracy")
        axes[1].plot(cur["p"], [v[0] for v in cur["gold_prob"]], "--", marker=".", label=f"{name}, p(gold)")
    for ax in axes[:1]:
        ax.plot([0, 1], [1, 0], color="grey", lw=3, alpha=0.4, label="linear")
        ax.set_ylabel("normalised (1 at p=0, 0 at p=max)")
        ax.legend(fontsize=6)
    axes[0].set_title("language models and analogue")
    for arm, cur in result["control_curves"].items():
        axes[2].errorbar(cur["p"], [v[0] for v in cur["correct"]], yerr=[v[1] for v in cur["correct"]], marker="o",
                         label=f"{arm}, accuracy")
    axes[2].set_title("positive control (tiny model, surname erased)")
    axes[2].legend(fontsize=7)
    axes[1].set_ylabel("accuracy / p(gold)")
    axes[1].legend(fontsize=7)
    for name, by in result["attention"].items():
        pp = [float(p) for p in by]
        for kind, style in (("gold", "-"), ("hard", "--"), ("easy", ":")):
            axes[3].plot(pp, [by[p][f"{kind}_total"] for p in by], style, marker=".", label=f"{name}: {kind}")
    axes[3].set_ylabel("attention share of the answer position")
    axes[3].legend(fontsize=6)
    for ax in axes:
        ax.set_xlabel("proportion p of hard distractors")
    save(fig, stage / "curves.png")
    fig, ax = plt.subplots(figsize=(8, 3.6))
    names = list(result["filtering"])
    if names:
        grouped_bars(ax, [f"{n} ({result['filtering'][n]['none']['tokens']:.0f} tokens)" for n in names],
                     {how: [result["filtering"][n].get(how, {}).get("accuracy", (np.nan, 0))[0] for n in names]
                      for how in FILTERS}, rotation=0)
        ax.set_ylabel("accuracy")
        ax.set_title(f"filtering at p = {c.filter_hard}/{c.n_docs - 1}")
        ax.legend(fontsize=8)
    save(fig, stage / "filtering.png")
