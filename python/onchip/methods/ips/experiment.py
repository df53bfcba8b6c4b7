"""The ``onchip ips`` experiment: interaction-based prompt sensitivity of Gemma 3 270M, tiny
transformers (scale, mixture of experts, fine-tuning, few-shot) and the fixed-point learners, with a
positive control through a tiny model trained with a planted rule on one template and its negative
control (the same model trained without it).

Writes ``metrics.json`` (config, per-pair records, per-arm summary with mean/std over seeds,
the headline, ``positive_control`` and ``negative_control``), ``results.md``, ``pairs.csv``, ``ips_by_order.png`` and ``learners.png``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    excludes_zero, grouped_bars, headline, headline_line, markdown_table, mean_std, need, paired_difference,
    paired_line, positive_control, recorded_config, save, write_dict_csv, write_metrics, write_results,
)
from . import SUBJECTS


@dataclass(frozen=True)
class IpsConfig:
    """One run; validated on construction.

    Attributes:
        subjects: subset of :data:`~onchip.methods.ips.SUBJECTS`.
        seeds: seeds (>= 1 of them, each >= 0): reviews, shots, tiny-model training, learner streams.
        reviews: query reviews per seed and subject (>= 1); each gives one prompt pair per changed
            template, so ``2 * reviews`` pairs per seed, subject and shot setting.
        shots: few-shot settings (numbers of answered examples before the query, each 0..3). The
            default is 0-shot only: a 1-shot prompt costs Gemma about 1.8 times a 0-shot one, and
            20 reviews x 3 seeds at 0 shots already take ~15 minutes on one thread.
        tau: salience threshold, relative to a prompt's largest non-empty interaction, in (0, 1].
        tiny_steps: pre-training steps of each tiny model (fine-tuning: half as many).
        learner_samples: stream length each learner is trained on (>= 100).
        learner_points: input points per learner and seed at which interactions are computed.
        output_tol: learners: output change (output units) below which the output counts as unchanged.
        out: output folder.
        progress: progress bars and the table on stdout.
        command: the command line recorded in metrics.json.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    subjects: tuple[str, ...] = SUBJECTS
    seeds: tuple[int, ...] = (0, 1, 2)
    reviews: int = 20
    shots: tuple[int, ...] = (0,)
    tau: float = 0.1
    tiny_steps: int = 200
    learner_samples: int = 20000
    learner_points: int = 8
    output_tol: float = 1 / 32
    out: str = "out/ips"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("subjects", "seeds", "shots"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(bool(self.subjects) and all(s in SUBJECTS for s in self.subjects), "subjects", list(self.subjects),
             f"choose from {', '.join(SUBJECTS)}")
        need(bool(self.seeds) and all(s >= 0 for s in self.seeds), "seeds", list(self.seeds),
             "need at least one seed, each >= 0")
        need(len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds), "seeds must be distinct")
        need(bool(self.shots) and all(0 <= k <= 3 for k in self.shots), "shots", list(self.shots),
             "each number of shots must be in 0..3")
        need(self.reviews >= 1, "reviews", self.reviews, "must be >= 1")
        need(0 < self.tau <= 1, "tau", self.tau, "must be in (0, 1]")
        need(self.tiny_steps >= 2, "tiny_steps", self.tiny_steps, "must be >= 2")
        need(self.learner_samples >= 100, "learner_samples", self.learner_samples, "must be >= 100")
        need(self.learner_points >= 1, "learner_points", self.learner_points, "must be >= 1")
        need(self.output_tol >= 0, "output_tol", self.output_tol, "must be >= 0")


VARIANTS = ("punct", "paraphrase")
def _record(subject, arm, seed, item, shots, variant, comp, unchanged, **extra) -> dict:
    return {"subject": subject, "arm": arm, "seed": int(seed), "item": int(item), "shots": int(shots),
            "variant": variant, "ips": comp.ips, "num_by_order": list(comp.num_by_order),
            "den_by_order": list(comp.den_by_order), "n_salient": comp.n_salient,
            "n_unstable": comp.n_unstable, "output_unchanged": bool(unchanged),
            "output_change": comp.output_change, **extra}


def _lm_pairs(score, reviews, shot_pool, c: IpsConfig, subject: str, arm: str, seed: int, text,
              shots=None) -> list[dict]:
    """Records of one language subject: every review x shots x changed template against ``base``."""
    from .harsanyi import compare, harsanyi, subset_masks

    masks = subset_masks(6)
    rows = []
    for i, r in enumerate(reviews):
        for k in (c.shots if shots is None else shots):
            shots_k = shot_pool[:k]
            prompts = {t: [text(r, t, m, shots_k) for m in masks] for t in ("base", *VARIANTS)}
            flat = [p for t in prompts for p in prompts[t]]
            v = score(flat).reshape(len(prompts), -1)
            v = v if r.label else -v                      # log-odds of the correct label
            div = {t: harsanyi(v[j]) for j, t in enumerate(prompts)}
            for t in VARIANTS:
                comp = compare(div["base"], div[t], tau=c.tau)
                ans_a, ans_b = div["base"][1:].sum() > 0, div[t][1:].sum() > 0   # calibrated answers
                rows.append(_record(subject, arm, seed, i, k, t, comp, ans_a == ans_b,
                                    correct_base=bool(ans_a), correct_variant=bool(ans_b),
                                    max_abs_interaction=float(np.abs(div["base"][1:]).max())))
    return rows


#: the positive control's arms: the tiny model trained with the planted rule, and without it
CONTROL_MODELS = {"control-planted": True, "control-unplanted": False}


def _control_pairs(c: IpsConfig, seed: int, reviews) -> list[dict]:
    """Records of the positive control on one seed: for each of :data:`CONTROL_MODELS`, every review's base
    prompt against its ``planted`` and ``twin`` templates (:data:`~.language.CONTROL_TEMPLATES`), 0-shot."""
    import torch

    from .harsanyi import compare, harsanyi, subset_masks
    from .language import train_control_tiny, tiny_scores, tiny_words

    masks = subset_masks(6)
    rows = []
    for arm, planted in CONTROL_MODELS.items():
        model, vocab = train_control_tiny(planted, seed=seed, steps=c.tiny_steps, progress=c.progress)
        for i, r in enumerate(reviews):
            with torch.no_grad():
                v = tiny_scores(model, vocab, [tiny_words(r, t, m) for t in ("base", "planted", "twin")
                                               for m in masks]).reshape(3, -1)
            v = v if r.label else -v
            div = [harsanyi(x) for x in v]
            for j, t in ((1, "planted"), (2, "twin")):
                comp = compare(div[0], div[j], tau=c.tau)
                same = (div[0][1:].sum() > 0) == (div[j][1:].sum() > 0)
                rows.append(_record("tiny", arm, seed, i, 0, t, comp, same,
                                    max_abs_interaction=float(np.abs(div[0][1:]).max())))
    return rows


def _controls(control: list[dict], c: IpsConfig) -> tuple[dict | None, dict | None]:
    """The positive control (planted model: IPS of base vs ``planted`` template minus base vs ``twin``, per
    seed) and its negative control (the same difference on the model trained without the plant)."""
    from .._controls import negative_control

    if not control or len(c.seeds) < 2:
        return None, None
    rows = {(r["arm"], r["variant"]): r for r in summarise(control, c.seeds)}

    def ips(arm, t):
        return rows[(arm, t)]["ips_per_seed"]

    metric = "IPS (pooled relative change of the salient interactions) of the base prompt against the template"
    setting = ("the tiny model (the tiny arm's size) trained on the five templates with the 'planted' template's "
               "labels following a planted rule: a masked adjective counts as positive (language.polarity); "
               "unmasked reviews get the same label under every template, so only the interactions of masked "
               "prompts can move, and only as far as the model learned the rule; IPS of base vs 'planted' "
               "against base vs 'twin' (a template trained at the same rate under the language's rule)")
    pc = positive_control(setting, "planted template", "twin template", ips("control-planted", "planted"),
                          ips("control-planted", "twin"), seeds=c.seeds, metric=metric)
    nc = negative_control(
        "the same model trained without the plant (every template under the language's rule): IPS of base vs "
        "'planted' against base vs 'twin'", "planted template", "twin template", ips("control-unplanted", "planted"),
        ips("control-unplanted", "twin"), seeds=c.seeds, metric=metric)
    for ctl, arm in ((pc, "control-planted"), (nc, "control-unplanted")):
        ctl["output_change"] = {t: rows[(arm, t)]["output_change_per_seed"] for t in ("planted", "twin")}
        ctl["answer_flip"] = {t: rows[(arm, t)]["output_flip_per_seed"] for t in ("planted", "twin")}
    return pc, nc


def run(config: IpsConfig) -> dict:
    """Run every subject over every seed and write the output folder; returns metrics.json's content."""
    import torch
    from onchip.progress import progress_bar

    from onchip.io import atomic_output_dir, check_output_dir

    from .. import _report
    from .harsanyi import compare
    from .language import TINY_ARMS, gemma_scores, gemma_text, sample_reviews, tiny_scores, tiny_words, train_tiny
    from .learners import FORMAT_VARIANTS, LEARNERS, learner_interactions, learner_spec, train_learner

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)  # one thread: the run shares two cores; results do not depend on it
    t_start = time.perf_counter()
    records: list[dict] = []
    control: list[dict] = []
    extra: dict = {"gemma_pool_accuracy": {}, "tiny_accuracy": {}, "learner_fit_mse": {}, "kan_oracle": {}}
    lm = None
    if "gemma" in c.subjects:
        from .._lm import causal_lm

        lm = causal_lm()
    bar = progress_bar(total=len(c.seeds) * len(c.subjects), desc="ips", disable=not c.progress)
    for seed in c.seeds:
        rng = _report.rng(seed, "reviews")
        pool = sample_reviews(rng, max(12, 2 * c.reviews))
        shot_pool = sample_reviews(_report.rng(seed, "shots"), 4)
        shot_pool = [next(s for s in shot_pool if s.label == 1), next(s for s in shot_pool if s.label == 0),
                     *[s for s in shot_pool][:1]]
        if lm is not None:
            full = gemma_scores(lm, [gemma_text(r, "base") for r in pool])
            empty = gemma_scores(lm, [gemma_text(r, "base", [False] * 6) for r in pool])
            labels = np.array([r.label for r in pool])
            calibrated_ok = ((full - empty) > 0) == (labels == 1)
            extra["gemma_pool_accuracy"][str(seed)] = {"raw": float(np.mean((full > 0) == (labels == 1))),
                                                       "calibrated": float(np.mean(calibrated_ok))}
            chosen = [r for r, ok in zip(pool, calibrated_ok) if ok][:c.reviews]
            chosen += [r for r, ok in zip(pool, calibrated_ok) if not ok][:c.reviews - len(chosen)]
            records += _lm_pairs(lambda t: gemma_scores(lm, t), chosen, shot_pool, c, "gemma", "gemma-270m", seed,
                                 gemma_text)
            bar.update()
        if "tiny" in c.subjects:
            test = sample_reviews(_report.rng(seed, "tiny-test"), 200)
            for arm in TINY_ARMS:
                model, vocab = train_tiny(arm, seed=seed, steps=c.tiny_steps, progress=c.progress)
                s = tiny_scores(model, vocab, [tiny_words(r, "base") for r in test])
                extra["tiny_accuracy"].setdefault(arm, {})[str(seed)] = float(
                    np.mean((s > 0) == np.array([r.label for r in test])))
                with torch.no_grad():
                    records += _lm_pairs(lambda t, m=model, v=vocab: tiny_scores(m, v, t), pool[:c.reviews],
                                         shot_pool, c, "tiny", arm, seed, lambda r, t, k, sh: tiny_words(r, t, k, sh),
                                         shots=(0,))
            control += _control_pairs(c, seed, pool[:c.reviews])
            bar.update()
        if "learners" in c.subjects:
            x = _report.rng(seed, "learner-points").uniform(-2.0, 2.0, size=(c.learner_points, 6))
            for name in LEARNERS:
                spec = learner_spec(name, 6)
                theta = train_learner(spec, samples=c.learner_samples, seed=seed)
                base = learner_interactions(spec, theta, x, "base")
                from .learners import target

                extra["learner_fit_mse"].setdefault(name, {})[str(seed)] = float(
                    np.mean((base.values[:, -1] - target(x)[:, 0]) ** 2))
                if name == "kan-1layer":
                    from .harsanyi import popcount

                    order = popcount(np.arange(64))
                    extra["kan_oracle"][str(seed)] = {
                        v: {"max_abs_order2plus_lsb": float(np.abs(li.dividends[:, order >= 2]).max() / li.lsb),
                            "rounding_bound_lsb_order2": 2.0}
                        for v in FORMAT_VARIANTS for li in [learner_interactions(spec, theta, x, v)]}
                for variant in FORMAT_VARIANTS:
                    if variant == "base":
                        continue
                    other = learner_interactions(spec, theta, x, variant)
                    for j in range(len(x)):
                        comp = compare(base.dividends[j], other.dividends[j], tau=c.tau)
                        unchanged = abs(base.values[j, -1] - other.values[j, -1]) <= c.output_tol
                        records.append(_record("learners", name, seed, j, 0, variant, comp, unchanged,
                                               max_abs_interaction=float(np.abs(base.dividends[j, 1:]).max())))
            bar.update()
    bar.close()

    summary = summarise(records, c.seeds)
    head, head_per_seed = _headline(summary, c)
    pick, k = _pick(c)
    pc, nc = _controls(control, c)
    over_pairs = _over_prompt_pairs(records, pick, k)
    settings = recorded_config(c)
    settings.update(n_variables=6, baseline_word="___", learner_baseline_value=0.0,
                    evaluations_per_prompt=64, seconds=time.perf_counter() - t_start)
    result = {"headline": head, "headline_per_seed": head_per_seed,
              **({"positive_control": pc, "negative_control": nc} if pc is not None else {}),
              "over_prompt_pairs": over_pairs, "config": settings, "summary": summary,
              "control_summary": summarise(control, c.seeds), **extra, "pairs": records, "control_pairs": control}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(summary))
    return result


def _pool(rows, orders):
    num = sum(sum(r["num_by_order"][k - 1] for k in orders if k - 1 < len(r["num_by_order"])) for r in rows)
    den = sum(sum(r["den_by_order"][k - 1] for k in orders if k - 1 < len(r["den_by_order"])) for r in rows)
    return num / den if den > 0 else float("nan")


def summarise(records: list[dict], seeds) -> list[dict]:
    """One row per (subject, arm, shots, variant): per seed pooled scores, then mean and std over seeds.

    Scores per seed: ``ips`` (pooled over items: sum |I_A - I_B| / sum (|I_A| + |I_B|) over the
    salient sets), ``ips_order1``, ``ips_order2``, ``ips_order3plus``; ``unstable_unchanged`` =
    unstable / salient interactions over the pairs whose output is unchanged (NaN if none);
    ``unstable_all`` over all pairs; ``output_flip`` = share of pairs whose output changed;
    ``output_change`` = mean relative output change (the output-level baseline). Each score's
    per-seed values are kept as ``<score>_per_seed`` (in the order of ``seeds``; NaN where undefined).
    """

    keys = sorted({(r["subject"], r["arm"], r["shots"], r["variant"]) for r in records},
                  key=lambda k: (("gemma", "tiny", "learners").index(k[0]), k[1], k[2], k[3]))
    out = []
    for key in keys:
        per_seed: dict[str, list[float]] = {}
        for s in seeds:
            rows = [r for r in records if (r["subject"], r["arm"], r["shots"], r["variant"]) == key and r["seed"] == s]
            if not rows:
                continue
            same = [r for r in rows if r["output_unchanged"]]
            vals = {
                "ips": _pool(rows, range(1, 7)), "ips_order1": _pool(rows, [1]), "ips_order2": _pool(rows, [2]),
                "ips_order3plus": _pool(rows, range(3, 7)),
                "unstable_unchanged": (sum(r["n_unstable"] for r in same) / max(1, sum(r["n_salient"] for r in same))
                                       if same else float("nan")),
                "unstable_all": sum(r["n_unstable"] for r in rows) / max(1, sum(r["n_salient"] for r in rows)),
                "output_flip": 1.0 - len(same) / len(rows),
                "output_change": float(np.mean([r["output_change"] for r in rows])),
            }
            for k, v in vals.items():
                per_seed.setdefault(k, []).append(v)
        row = {"subject": key[0], "arm": key[1], "shots": key[2], "variant": key[3]}
        for k, vs in per_seed.items():
            finite = [v for v in vs if np.isfinite(v)]
            m, sd = mean_std(finite) if finite else (float("nan"), float("nan"))
            row[k], row[k + "_std"], row[k + "_per_seed"] = m, sd, [float(v) for v in vs]
        row["seeds"] = len(next(iter(per_seed.values()), []))
        out.append(row)
    return out


def _pick(c: IpsConfig) -> tuple[tuple[str, str], int]:
    """The headline's subject and arm, and its number of shots."""
    pick = ("gemma", "gemma-270m") if "gemma" in c.subjects else ("tiny", "tiny") if "tiny" in c.subjects \
        else ("learners", "kan-2layer")
    return pick, (min(c.shots) if pick[0] == "gemma" else 0)


#: the headline's output-level baselines: name -> per-seed score of :func:`summarise`
BASELINES = {"output-level: share of pairs whose answer changes": "output_flip",
             "output-level: relative change of the output score": "output_change"}


def _headline(summary, c: IpsConfig) -> tuple[dict, dict]:
    """Unstable share of salient interactions among answer-unchanged pairs (the paper's 60-80 %
    number) for the first language subject at its fewest shots, averaged over both changed
    templates, next to the output-level baselines computed from the same evaluations; ``std`` is the
    standard deviation over seeds of that per-seed mean (not a mean of per-template deviations). Each
    baseline carries its paired difference over seeds (:func:`~onchip.methods._report.paired_difference`, >= 2 seeds).
    Returns the headline and the per-seed values ``{"IPS": [...], baseline: [...]}``."""

    pick, k = _pick(c)
    rows = [r for r in summary if (r["subject"], r["arm"]) == pick and r["shots"] == k]

    def avg(key):
        vals = [r[key] for r in rows if np.isfinite(r[key])]
        return float(np.mean(vals)) if vals else 0.0

    def per_seed(key):  # mean over the changed templates, seed by seed
        return [float(np.nanmean(v)) if np.isfinite(v).any() else 0.0
                for v in np.array([r[key + "_per_seed"] for r in rows], dtype=float).T]

    method = per_seed("unstable_unchanged")
    values = {"IPS": method, **{name: per_seed(key) for name, key in BASELINES.items()}}
    paired = ({name: paired_difference(method, per_seed(key)) for name, key in BASELINES.items()}
              if len(c.seeds) >= 2 else None)
    return headline(
        "share of salient interactions that change between a prompt and its variant, among pairs whose answer "
        "is unchanged (mean over variants)",
        f"IPS: Harsanyi interactions of {pick[1]}, {k}-shot, n=6 variables, tau={c.tau}",
        avg("unstable_unchanged"), {name: avg(key) for name, key in BASELINES.items()},
        budget={"masked evaluations per prompt": 64, "unit": "forward passes; every arm reads the same ones",
                "prompt pairs per seed": 2 * c.reviews},
        seeds=list(c.seeds), direction="higher", std=mean_std(method)[1],
        baseline_std={name: mean_std(values[name])[1] for name in BASELINES}, paired=paired), values


def _over_prompt_pairs(records, pick, k) -> dict:
    """Bootstrap over prompt pairs (every review x changed template x seed of the headline's subject):
    the mean per-pair unstable share among answer-unchanged pairs (its interval as a difference from 0),
    and the paired difference of the per-pair unstable share (all pairs) against each output-level
    baseline per pair (answer flipped 0/1; relative output change)."""
    rows = [r for r in records if (r["subject"], r["arm"]) == pick and r["shots"] == k and r["n_salient"] > 0]
    if len(rows) < 2:
        return {}
    share = np.array([r["n_unstable"] / r["n_salient"] for r in rows])
    same = np.array([r["output_unchanged"] for r in rows])
    out = {"n_pairs": len(rows), "n_answer_unchanged": int(same.sum())}
    if same.sum() >= 2:
        out["unstable_share_answer_unchanged"] = paired_difference(share[same], np.zeros(int(same.sum())))
    out["unstable_share_minus_answer_flip"] = paired_difference(share, 1.0 - same.astype(float))
    out["unstable_share_minus_output_change"] = paired_difference(share, [r["output_change"] for r in rows])
    for v in out.values():
        if isinstance(v, dict):
            v.pop("per_seed")  # per pair here: the pairs themselves are in "pairs"
    return out


def _f(v, std=None):
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:.3f}" if std is None or not np.isfinite(std) else f"{v:.3f} ± {std:.3f}"


def _paired_sections(result: dict) -> list[str]:
    """Markdown: per-seed headline values with the paired differences, the intervals over prompt pairs,
    and the positive control."""
    h, out = result["headline"], []
    pc, pairs = result.get("positive_control"), result.get("over_prompt_pairs") or {}
    if h.get("paired"):
        first = next(iter(h["paired"].values()))
        ps = result["headline_per_seed"]
        rows = [[s, *[f"{ps[n][i]:.3f}" for n in ps]] for i, s in enumerate(h["seeds"])]
        out.append(markdown_table(["seed", "IPS unstable share (answer unchanged)", *h["paired"]], rows,
                                  caption="Per seed (headline subject; mean over the changed templates)"))
        out.append("Paired difference IPS - baseline over seeds (mean [ci95], Student t): "
                   + "; ".join(paired_line(n, p) for n, p in h["paired"].items())
                   + f". n = {first['n']} seeds: an interval that holds zero is no difference.")
    if pairs:
        lines = [f"Over prompt pairs ({pairs['n_pairs']} pairs of the headline subject, "
                 f"{pairs['n_answer_unchanged']} with the answer unchanged; mean [Student t ci95]):"]
        for key, label in (("unstable_share_answer_unchanged", "unstable share, answer-unchanged pairs"),
                           ("unstable_share_minus_answer_flip", "unstable share - answer flip (all pairs)"),
                           ("unstable_share_minus_output_change", "unstable share - relative output change "
                                                                  "(all pairs)")):
            if key in pairs:
                lines.append(f"- {paired_line(label, pairs[key])}")
        out.append("\n".join(lines))
    if pc:
        for name, ctl, yes, no in (
                ("Positive", pc, " - the experiment sees the planted rule.",
                 " - the experiment does NOT see the planted rule (not learned, or not seen)."),
                ("Negative", result["negative_control"], " - holds zero: nothing planted, nothing seen.",
                 " - excludes zero: a difference with nothing planted.")):
            ok = ctl["sensitive"] if name == "Positive" else ctl["holds_zero"]
            out.append(f"{name} control ({ctl['setting']}): {ctl['method']} per seed "
                       + ", ".join(f"{v:.3f}" for v in ctl["method_values"]) + f"; {ctl['ablation']} per seed "
                       + ", ".join(f"{v:.3f}" for v in ctl["ablation_values"]) + "; "
                       + paired_line("difference", ctl["paired"]) + (yes if ok else no)
                       + " Answer flips per seed (planted / twin): "
                       + "; ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(ctl["answer_flip"]["planted"],
                                                                         ctl["answer_flip"]["twin"])) + ".")
    return out


def results_table(summary) -> str:
    """Markdown table: one row per subject/arm/shots/variant (mean ± std over seeds)."""

    rows = [(r["subject"], r["arm"], r["shots"], r["variant"], _f(r["ips"], r["ips_std"]), _f(r["ips_order1"]),
             _f(r["ips_order2"]), _f(r["ips_order3plus"]), _f(r["unstable_unchanged"], r["unstable_unchanged_std"]),
             _f(r["output_flip"]), _f(r["output_change"], r["output_change_std"])) for r in summary]
    return markdown_table(["subject", "arm", "shots", "changed prompt", "IPS", "IPS k=1", "IPS k=2", "IPS k>=3",
                           "unstable share (answer unchanged)", "answer flips", "output-level change"], rows)


def results_sections(result: dict) -> list[str]:
    """The sections of ``results.md`` (markdown strings), from a run's result alone, so a committed
    ``metrics.json`` rebuilds its ``results.md``."""
    text = [headline_line(result["headline"]), *_paired_sections(result), results_table(result["summary"])]
    if result["gemma_pool_accuracy"]:
        text += ["Gemma 3 270M base accuracy on the review pool per seed (0-shot, base template): "
                 + "; ".join(f"seed {s}: raw {a['raw']:.2f}, calibrated {a['calibrated']:.2f}"
                             for s, a in result["gemma_pool_accuracy"].items())]
    if result["tiny_accuracy"]:
        text += ["Tiny-model accuracy on 200 held-out reviews (0-shot, base template): "
                 + "; ".join(f"{arm}: {np.mean(list(a.values())):.3f}" for arm, a in result["tiny_accuracy"].items())]
    if result["kan_oracle"]:
        worst = {v: max(o[v]["max_abs_order2plus_lsb"] for o in result["kan_oracle"].values())
                 for v in next(iter(result["kan_oracle"].values()))}
        text += ["One-layer KAN (additive before the output conversion): largest |I(S)|, |S| >= 2, in output LSB: "
                 + ", ".join(f"{v}: {m:g}" for v, m in worst.items())]
    return text


def _write(stage, c: IpsConfig, result: dict) -> None:
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    write_results(stage, "onchip ips: interaction-based prompt sensitivity", c.command or "onchip ips",
                  *results_sections(result))
    flat = [{k: (";".join(f"{x:.6g}" for x in v) if isinstance(v, list) else v) for k, v in r.items()}
            for r in result["pairs"]]
    if flat:
        write_dict_csv(stage / "pairs.csv", flat)
    plt = pyplot()
    summ = result["summary"]
    lm_rows = [r for r in summ if r["subject"] != "learners"]
    groups = sorted({(r["arm"], r["shots"]) for r in lm_rows}, key=lambda a: (a[0], a[1]))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    if groups:
        labels = [f"{a}\n{k}-shot" for a, k in groups]

        def series(key):
            out = []
            for g in groups:
                vals = [r[key] for r in lm_rows if (r["arm"], r["shots"]) == g and np.isfinite(r[key])]
                out.append(float(np.mean(vals)) if vals else float("nan"))
            return out

        grouped_bars(axes[0], labels, {"order 1": series("ips_order1"), "order 2": series("ips_order2"),
                                       "order >= 3": series("ips_order3plus")}, rotation=30, fontsize=7)
        axes[0].set_ylabel("IPS (relative change of salient interactions)")
        axes[0].set_title("language subjects: sensitivity by interaction order")
        axes[0].legend(fontsize=8)
        grouped_bars(axes[1], labels, {"unstable share (answer unchanged)": series("unstable_unchanged"),
                                       "answer flips": series("output_flip"),
                                       "output-level change": series("output_change")}, rotation=30, fontsize=7)
        axes[1].set_title("interaction-level vs output-level sensitivity")
        axes[1].legend(fontsize=8)
    save(fig, stage / "ips_by_order.png")
    learn = [r for r in summ if r["subject"] == "learners"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    if learn:
        variants = sorted({r["variant"] for r in learn})
        arms = sorted({r["arm"] for r in learn})
        grouped_bars(ax, [f"{a}" for a in arms],
                     {v: [next((r["ips"] for r in learn if r["arm"] == a and r["variant"] == v), np.nan) for a in arms]
                      for v in variants}, rotation=0)
        ax.set_ylabel("IPS vs the 16-bit base format")
        ax.set_title("fixed-point learners: number format as the prompt change")
        ax.legend(fontsize=8)
    save(fig, stage / "learners.png")
