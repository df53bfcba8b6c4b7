"""The unlearning comparison: Orthogonal Entropy Unlearning and baselines on a quantized MLP.

Trains a brevitas MLP (power-of-two scales, weights and activations at ``bits``) with QAT on
a scikit-learn data set, unlearns a forget request with each method, and writes
``metrics.json``, ``comparison.csv``, ``comparison.md`` and ``comparison.png`` (plus
``ablation.*`` with ``ablation``). ``export`` writes the integer networks; ``hardware`` also
runs every unlearned model through the fixed-point golden model, the HLS C simulation and the
RTL (``act="fixed"`` only) and writes ``hardware.json``/``.md``/``.png``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._report import need

if TYPE_CHECKING:
    from .methods import UnlearnConfig

#: ``method``: one method, or all of them (retrain is always run: it is the reference)
METHOD_CHOICES = ("oeu", "oeu-noproj", "retrain", "finetune", "gradascent", "relabel", "all")
TABLE_KEYS = (
    "forget_acc", "retain_acc", "test_acc", "test_forget_class_acc",
    "mia_forget", "forget_entropy", "avg_gap", "wall_s",
)
PERCENT_KEYS = ("forget_acc", "retain_acc", "test_acc", "test_forget_class_acc", "mia_forget")


@dataclass(frozen=True)
class UnlearningExperiment:
    """One comparison (defaults = the committed digits 4-bit class:3 run); validated on construction.

    Attributes:
        dataset: one of :data:`.data.DATASETS`.
        bits: weight/activation bit width (8, 4 or 2).
        forget: forget request, ``class:N`` or ``random:F``.
        method: one of :data:`METHOD_CHOICES`.
        seeds: one or more distinct seeds (>= 0); tables give mean and std over them.
        hidden: hidden widths (each >= 1).
        act: activation layout, ``fixed`` (runs on the hardware) or ``learned``.
        threads: torch CPU threads.
        unlearn: the hyper-parameters of the methods (:class:`.methods.UnlearnConfig`).
        ablation: also run the OEU variant grid (projection x rule x lambda).
        export: also write ``export/<method>-seed<S>.json`` (integer network and sets).
        hardware: also run each unlearned model on ``hardware_backends`` (needs ``act="fixed"``).
        hardware_backends: from :data:`.hardware.BACKENDS`.
        control: forget request of the positive control (``"none"``: no control; needs >= 2
            seeds): OEU against OEU-noproj with no retain term (lambda = 0), so only the
            projection keeps the retain set, from the same original model of each seed.
        control_lr, control_epochs: the control's SGD rate and passes (None: those of ``unlearn``).
        control_bits: the control's bit width (None: ``bits``, and the run's original model; else one
            more original per seed, QAT at these bits, that both control arms start from).
        out: output folder (replaced whole on success).
        progress: progress bars.
        command: the command line recorded in metrics.json and the tables (None: not recorded).

    Raises:
        ValueError: a field out of range or an unknown name, named in the message.
    """

    dataset: str = "digits"
    bits: int = 4
    forget: str = "class:3"
    method: str = "all"
    seeds: tuple[int, ...] = (0,)
    hidden: tuple[int, ...] = (64, 32)
    act: str = "fixed"
    threads: int = 1
    unlearn: UnlearnConfig = field(default_factory=lambda: _default_unlearn())
    ablation: bool = False
    export: bool = False
    hardware: bool = False
    hardware_backends: tuple[str, ...] = ("golden", "hls", "rtl")
    control: str = "random:0.5"
    control_lr: float | None = None
    control_epochs: int | None = None
    control_bits: int | None = None
    out: str = "out/unlearn"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        from .data import DATASETS
        from .models import check_act, check_bits

        for name in ("seeds", "hidden", "hardware_backends"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(self.dataset in DATASETS, "dataset", self.dataset,
             f"unknown data set (choose from {', '.join(DATASETS)})")
        check_bits(self.bits)
        check_act(self.act)
        if self.hardware:
            from .hardware import BACKENDS

            need(bool(self.hardware_backends) and all(b in BACKENDS for b in self.hardware_backends),
                 "hardware_backends", ",".join(self.hardware_backends), f"choose from {', '.join(BACKENDS)}")
            need(self.act == "fixed", "hardware", self.act, "needs --act fixed (the front end refuses per-layer "
                 "learned activation scales and float logits)")
        need(self.method in METHOD_CHOICES, "method", self.method,
             f"unknown method (choose from {', '.join(METHOD_CHOICES)})")
        need(self.threads >= 1, "threads", self.threads, "must be >= 1")
        need(bool(self.seeds) and min(self.seeds) >= 0 and len(set(self.seeds)) == len(self.seeds), "seeds",
             list(self.seeds), "need one or more distinct seeds >= 0")
        need(bool(self.hidden) and min(self.hidden) >= 1, "hidden", list(self.hidden), "every width must be >= 1")
        if self.control != "none":
            from .data import load_dataset, parse_forget

            try:
                parse_forget(self.control, int(load_dataset(self.dataset)[1].max()) + 1)
            except ValueError as err:
                raise ValueError(str(err).replace("--forget:", "control:", 1)) from None
        if self.control_bits is not None:
            check_bits(self.control_bits)
        need(self.control_lr is None or self.control_lr > 0, "control_lr", self.control_lr, "must be > 0")
        need(self.control_epochs is None or self.control_epochs >= 1, "control_epochs", self.control_epochs,
             "must be >= 1")


def _named_seeds(seed: int) -> dict[str, int]:
    """The integer seeds of one run seed's uses (:func:`onchip.methods._report.seed_int`): the data
    split (shared by the control's split, whose training samples must be the run's), the original
    model, the retrained reference, every unlearning arm (one stream for all arms, so they see the
    same batches) and the evaluation (membership inference)."""
    from .._report import seed_int

    return {use: seed_int(seed, "unlearn", use) for use in ("split", "original", "retrain", "unlearn", "evaluate")}


def _default_unlearn():
    # imported here: the methods need torch, the command line's help does not
    from .methods import UnlearnConfig

    return UnlearnConfig()


def run(config: UnlearningExperiment) -> dict:
    """Run the comparison and write the output folder.

    Args:
        config: the run.

    Returns:
        The content of ``metrics.json``, with ``"hardware"`` (the content of hardware.json) when
        ``config.hardware``.

    Raises:
        ValueError: a forget request the data set cannot serve (nothing written).
    """
    from onchip.io import check_output_dir

    from .data import make_split
    from .methods import METHODS

    c = config
    check_output_dir(c.out)
    ucfg = c.unlearn
    named = {seed: _named_seeds(seed) for seed in c.seeds}
    splits = {seed: make_split(c.dataset, c.forget, named[seed]['split']) for seed in c.seeds}
    methods = [m for m in METHODS if m != "retrain"] if c.method == "all" else [c.method]
    methods = [m for m in methods if m != "retrain"]

    import torch
    from onchip.progress import progress_bar

    from onchip.io import atomic_output_dir

    from dataclasses import replace

    import numpy as np

    from .methods import model_fingerprint, train_original, unlearn
    from .metrics import average_gap, evaluate

    torch.set_num_threads(c.threads)
    variants = _ablation_variants(ucfg) if c.ablation else []
    runs, ablation_runs, control_runs, models_out = {}, {}, {}, {}
    control = c.control != "none" and len(c.seeds) >= 2
    ccfg = replace(ucfg, retain_weight=0.0, lr=c.control_lr or ucfg.lr, epochs=c.control_epochs or ucfg.epochs)
    total = len(splits) * (2 + len(methods) + len(variants) + 2 * control)
    bar = progress_bar(total=total, desc="unlearn", disable=not c.progress, file=sys.stderr)
    for seed, split in splits.items():
        ns = named[seed]
        bar.set_postfix_str(f"seed {seed}: original")
        original = train_original(split, c.bits, ucfg, c.hidden, ns["original"], act=c.act)
        sha = model_fingerprint(original)
        bar.update()

        def from_original(method, split_, cfg_):
            # every arm of a seed starts from this one original model, which it must leave unchanged
            model_, info_ = unlearn(method, original, split_, cfg_, seed=ns["unlearn"])
            if model_fingerprint(original) != sha:
                raise RuntimeError(f"{method} modified the original model of seed {seed}")
            return model_, {**evaluate(model_, split_, ns["evaluate"]), **info_, "from_original": sha}
        bar.set_postfix_str(f"seed {seed}: retrain")
        retrained, info = unlearn("retrain", original, split, ucfg, seed=ns["retrain"])
        reference = {**evaluate(retrained, split, ns["evaluate"]), **info}
        bar.update()
        rows = {"original": {**evaluate(original, split, ns["evaluate"]), "wall_s": None, "model": sha},
                "retrain": reference}
        models_out[("original", seed)], models_out[("retrain", seed)] = original, retrained
        for method in methods:
            bar.set_postfix_str(f"seed {seed}: {method}")
            model, rows[method] = from_original(method, split, ucfg)
            models_out[(method, seed)] = model
            bar.update()
        arows = {}
        for name, cfg in variants:
            bar.set_postfix_str(f"seed {seed}: oeu {name}")
            _, arows[name] = from_original("oeu", split, cfg)
            bar.update()
        if control:
            csplit = make_split(c.dataset, c.control, ns["split"])
            if not np.array_equal(csplit.x_train, split.x_train):
                raise RuntimeError(f"control split of seed {seed} has other training samples than the run's")
            crows = {}
            if c.control_bits is not None and c.control_bits != c.bits:
                bar.set_postfix_str(f"seed {seed}: control original ({c.control_bits} bits)")
                original = train_original(split, c.control_bits, ucfg, c.hidden, ns["original"], act=c.act)
                sha = model_fingerprint(original)
            for arm in ("oeu", "oeu-noproj"):
                bar.set_postfix_str(f"seed {seed}: control {arm}")
                _, crows[arm] = from_original(arm, csplit, ccfg)
                bar.update()
            control_runs[seed] = crows
        for table in (rows, arows):
            for row in table.values():
                row["avg_gap"] = average_gap(row, reference)
        runs[seed], ablation_runs[seed] = rows, arows
    bar.close()

    summary = _summarise(runs)
    split0 = next(iter(splits.values()))
    caption = (f"{c.dataset}, {c.bits}-bit weights/activations, forget {c.forget} "
               f"({int(split0.forget.sum())} of {len(split0.forget)} training samples), "
               f"seeds {', '.join(map(str, c.seeds))}; mean ± std over seeds."
               + (f"\n\n`{c.command}`" if c.command else ""))
    result = {
        "dataset": c.dataset, "bits": c.bits, "forget": c.forget, "hidden": list(c.hidden), "act": c.act,
        "seeds": list(c.seeds), "config": ucfg.as_dict(),
        "sizes": {str(s): {"forget": int(sp.forget.sum()), "retain": int(sp.retain.sum()), "test": len(sp.y_test)}
                  for s, sp in splits.items()},
        "runs": {str(s): r for s, r in runs.items()},
        "summary": summary,
    }
    if variants:
        result["ablation_runs"] = {str(s): r for s, r in ablation_runs.items()}
        result["ablation_summary"] = _summarise(ablation_runs)
    if control:
        from .._report import positive_control

        cs = [int(s) for s in control_runs]
        result["positive_control"] = {
            **positive_control(
                f"{c.control_bits or c.bits}-bit model, forget {c.control} (in-distribution samples, so the forget gradient opposes the retain "
                f"gradient) with no retain term (lambda = 0): only the projection keeps the retain set; "
                f"SGD lr {ccfg.lr:g}, {ccfg.epochs} epochs, projection {ccfg.projection}/{ccfg.project_when}",
                "oeu", "oeu-noproj", [100 * control_runs[s]["oeu"]["retain_acc"] for s in cs],
                [100 * control_runs[s]["oeu-noproj"]["retain_acc"] for s in cs], seeds=cs,
                metric="retain accuracy % after unlearning (higher: the retain set kept)"),
            "config": ccfg.as_dict(), "runs": {str(s): r for s, r in control_runs.items()}}
    result = {"headline": headline_of(result), **result}
    hw = None
    with atomic_output_dir(c.out) as stage:
        from .._report import write_metrics

        write_metrics(stage, result, c.command)
        _write_tables(stage, "comparison", summary, "method", caption)
        _plot(stage, summary, f"{c.dataset} {c.bits}-bit, forget {c.forget}")
        _write_results(stage, result, c.command or "onchip unlearn")
        _plot_per_seed(stage, result)
        if c.export:
            _export(stage / "export", models_out, splits)
        if c.hardware:
            hw = _hardware(stage, models_out, splits, methods, list(c.hardware_backends), c.progress)
        if variants:
            _write_tables(stage, "ablation", result["ablation_summary"], "OEU variant (projection/rule/lambda)",
                          caption.replace("; mean", "; OEU variants; mean"))
    print(f"wrote {c.out}/metrics.json, results.md, per_seed.png and comparison.csv/.md/.png"
          + (", ablation.csv/.md" if variants else ""))
    print((Path(c.out) / "comparison.md").read_text())
    if hw is None:
        return result
    print((Path(c.out) / "hardware.md").read_text())
    return {**result, "hardware": hw}


def headline_of(result: dict) -> dict:
    """The headline of a comparison's ``metrics.json`` content (without its headline).

    The average gap to the retrained model (pp, mean |difference| over forget, retain, test
    accuracy and MIA on the forget set; Jia et al. 2023) of OEU (or the one method run), mean and
    sample std over seeds (:func:`~onchip.methods._report.mean_std`; the tables use ddof=0), next
    to every other row's but the reference (``retrain``, gap 0 by definition). With two or more
    seeds, ``paired`` holds OEU - baseline per seed with its Student t ci95
    (:func:`~onchip.methods._report.paired_difference`; negative: OEU closer to retraining). The
    budget is the gradient evaluations each unlearning arm spent (equal for every arm,
    :func:`.methods.gradient_budget`).

    Raises:
        ValueError: arms of one seed that spent different gradient budgets.
    """
    from .._report import headline, mean_std, paired_difference

    runs = result["runs"]
    names = [n for n in next(iter(runs.values())) if n != "retrain"]
    main = "oeu" if "oeu" in names else next(n for n in names if n != "original")
    gaps = {n: mean_std(r[n]["avg_gap"] for r in runs.values()) for n in names}
    others = [n for n in names if n != main]
    cfg = result["config"]
    spent = sorted({r[n]["grad_evals"] for r in runs.values() for n in names if "grad_evals" in r[n]})
    for s, r in runs.items():
        per = {n: r[n]["grad_evals"] for n in names if "grad_evals" in r[n]}
        if len(set(per.values())) > 1:
            raise ValueError(f"seed {s}: arms spent different gradient budgets {per}")
    paired = ({n: paired_difference([r[main]["avg_gap"] for r in runs.values()], [r[n]["avg_gap"] for r in runs.values()])
               for n in others} if len(runs) >= 2 else None)
    return headline(
        f"average gap to retrain (pp: forget, retain, test accuracy and MIA), {result['dataset']} "
        f"{result['bits']}-bit, forget {result['forget']}", main, gaps[main][0], {n: gaps[n][0] for n in others},
        budget={"gradient_evaluations_per_arm": spent[0] if len(spent) == 1 else spent,
                "unlearning_epochs": cfg["epochs"], "batch_size": cfg["batch_size"],
                "retain_batch_size": cfg["retain_batch_size"], "lr": cfg["lr"],
                "retrain_epochs": cfg["train_epochs"]},
        seeds=[int(s) for s in runs], direction="lower", std=gaps[main][1],
        baseline_std={n: gaps[n][1] for n in others}, paired=paired)


def _write_results(stage, result: dict, command: str) -> None:
    """results.md: the headline with every paired difference, per-seed gaps, the positive control, the table."""
    from .._report import excludes_zero, headline_line, markdown_table, paired_line, write_results

    h, runs = result["headline"], result["runs"]
    seeds = list(runs)
    parts = [headline_line(h), f"Budget per unlearning arm: {h['budget']}."]
    if h.get("paired"):
        parts.append("Paired differences, OEU - baseline, average gap (pp; negative: OEU closer to retraining), "
                     "Student t ci95 over seeds; a win only where the interval excludes zero:\n\n"
                     + "\n".join(f"- {paired_line(n, p, 2)}" + (" (interval excludes zero)" if excludes_zero(p) else
                                                                " (interval holds zero: no difference shown)")
                                 for n, p in h["paired"].items()))
    names = [n for n in next(iter(runs.values())) if n != "retrain"]
    parts.append(markdown_table(["arm", *[f"seed {s}" for s in seeds]],
                                [[n, *(f"{runs[s][n]['avg_gap']:.1f}" for s in seeds)] for n in names],
                                "Average gap to retrain per seed (pp):"))
    parts.append(markdown_table(["arm", *[f"seed {s}" for s in seeds]],
                                [[n, *(f"{100 * runs[s][n]['forget_acc']:.0f}" for s in seeds)] for n in ["retrain", *names]],
                                "Forget accuracy per seed (%):"))
    pc = result.get("positive_control")
    if pc:
        parts.append(f"Positive control: {pc['setting']}. {pc['metric']}, per seed "
                     f"{', '.join(map(str, pc['seeds']))}:\n\n"
                     f"- oeu: {', '.join(f'{v:.1f}' for v in pc['method_values'])}\n"
                     f"- oeu-noproj: {', '.join(f'{v:.1f}' for v in pc['ablation_values'])}\n"
                     f"- {paired_line('oeu - oeu-noproj', pc['paired'], 1)}; "
                     + ("the experiment sees the projection (interval excludes zero)." if pc["sensitive"] else
                        "NOT sensitive: the interval holds zero, so this experiment cannot see the projection "
                        "even where it must matter."))
    table = Path(stage / "comparison.md").read_text()
    parts.append("Mean ± std over seeds (ddof 0):\n\n" + table)
    write_results(stage, f"Unlearning: OEU vs baselines, {result['dataset']} {result['bits']}-bit, "
                         f"forget {result['forget']}", command, *parts)


def _plot_per_seed(stage, result: dict) -> None:
    """per_seed.png: every arm's average gap on each seed (lines join a seed's arms), and the positive control."""
    from onchip.plotting import pyplot

    from .._report import save

    runs = result["runs"]
    names = [n for n in next(iter(runs.values())) if n != "retrain"]
    pc = result.get("positive_control")
    fig, axes = pyplot().subplots(1, 2 if pc else 1, figsize=(11 if pc else 7, 3.6), squeeze=False)
    ax = axes[0][0]
    for s, r in runs.items():
        ax.plot(range(len(names)), [r[n]["avg_gap"] for n in names], "o-", alpha=0.5, lw=0.8, label=f"seed {s}")
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    ax.set_ylabel("avg gap to retrain (pp)")
    ax.set_title(f"{result['dataset']} {result['bits']}-bit, forget {result['forget']}: per seed", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    if pc:
        ax = axes[0][1]
        for a, b in zip(pc["method_values"], pc["ablation_values"]):
            ax.plot([0, 1], [a, b], "o-", color="gray", alpha=0.6)
        ax.set_xticks([0, 1], ["oeu", "oeu-noproj"])
        ax.set_xlim(-0.5, 1.5)
        ax.set_ylabel("retain acc %")
        lo, hi = pc["paired"]["ci95"]
        ax.set_title(f"positive control: {pc['paired']['difference']:+.1f} [{lo:+.1f}, {hi:+.1f}] pp", fontsize=9)
    save(fig, stage / "per_seed.png", dpi=110)


def _ablation_variants(config):
    from dataclasses import replace

    variants = []
    for lam in sorted({0.0, config.retain_weight}):
        variants.append((f"none/lambda={lam:g}", replace(config, projection="none", retain_weight=lam)))
        for proj in ("global", "layer"):
            for when in ("always", "conflict"):
                variants.append((f"{proj}/{when}/lambda={lam:g}",
                                 replace(config, projection=proj, project_when=when, retain_weight=lam)))
    return variants


def _summarise(runs: dict) -> dict:
    """``{name: {key: {"mean", "std"}}}`` over seeds (std with ddof=0; keys with None skipped)."""
    import numpy as np

    names = list(next(iter(runs.values())).keys())
    out = {}
    for name in names:
        out[name] = {}
        for key in TABLE_KEYS:
            vals = [runs[s][name].get(key) for s in runs]
            if any(v is None for v in vals):
                continue
            out[name][key] = {"mean": float(np.mean(vals)), "std": float(np.std(vals))}
    return out


def _write_tables(stage, stem: str, summary: dict, label: str, caption: str) -> None:
    from .._report import markdown_table, write_csv

    keys = [k for k in TABLE_KEYS if any(k in row for row in summary.values())]
    write_csv(stage / f"{stem}.csv", [label] + [f"{k}_{s}" for k in keys for s in ("mean", "std")],
              [[name] + [f"{row[k][s]:.6g}" if k in row else "" for k in keys for s in ("mean", "std")]
               for name, row in summary.items()])

    def cell(row, k):
        if k not in row:
            return "-"
        m, s = row[k]["mean"], row[k]["std"]
        if k in PERCENT_KEYS:
            m, s = 100 * m, 100 * s
        fmt = "{:.2f}" if k == "wall_s" else "{:.1f}"
        return fmt.format(m) + (f" ± {fmt.format(s)}" if s > 0 else "")

    heads = {
        "forget_acc": "forget acc %", "retain_acc": "retain acc %", "test_acc": "test acc %",
        "test_forget_class_acc": "test acc, forgotten class %", "mia_forget": "MIA on forget %",
        "forget_entropy": "forget entropy / log C", "avg_gap": "avg gap to retrain (pp)", "wall_s": "wall s",
    }
    (stage / f"{stem}.md").write_text(markdown_table(
        [label] + [heads[k] for k in keys], [[name] + [cell(row, k) for k in keys] for name, row in summary.items()],
        caption))


def _plot(stage, summary: dict, title: str) -> None:
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    keys = ["forget_acc", "retain_acc", "test_acc", "mia_forget"]
    names = list(summary)
    fig, ax = pyplot().subplots(figsize=(max(6, 1.3 * len(names)), 3.6))
    grouped_bars(ax, names, {k.replace("_", " "): [100 * summary[n][k]["mean"] for n in names] for k in keys},
                 errors={k.replace("_", " "): [100 * summary[n][k]["std"] for n in names] for k in keys})
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    save(fig, stage / "comparison.png", dpi=110)


def _export(folder, models_out: dict, splits: dict) -> None:
    """One JSON per (method, seed): :func:`export_layers` plus integer inputs, labels and brevitas predictions."""
    from onchip.io import write_json

    from .models import export_layers, predict_logits, quantize_input

    folder.mkdir()
    for (method, seed), model in models_out.items():
        split = splits[seed]
        exported = export_layers(model)
        sets = {}
        for name, x, y in (("forget", split.x_train[split.forget], split.y_train[split.forget]),
                           ("retain", split.x_train[split.retain], split.y_train[split.retain]),
                           ("test", split.x_test, split.y_test)):
            sets[name] = {"x_int": quantize_input(exported, x), "y": y,
                          "pred": predict_logits(model, x).argmax(axis=1)}
        write_json(folder / f"{method}-seed{seed}.json", {**exported, "sets": sets})


def _hardware(stage, models_out: dict, splits: dict, methods: list, backends: list, progress: bool) -> dict:
    """hardware.json/.md/.png: every unlearned model on the fixed-point backends against brevitas."""
    from onchip.progress import progress_bar

    from onchip.io import write_json

    from .._report import markdown_table
    from .hardware import check_on_hardware, split_sets

    keys = [(m, s) for (m, s) in models_out if m in methods]
    runs = {}
    for method, seed in progress_bar(keys, desc="hardware", disable=not progress, file=sys.stderr):
        res = check_on_hardware(models_out[(method, seed)], split_sets(splits[seed]), backends=backends,
                                progress=progress)
        runs.setdefault(method, {})[str(seed)] = res
    summary = {}
    for method, by_seed in runs.items():
        row = {}
        for b in ["brevitas", *backends]:
            for name in ("forget", "retain", "test"):
                accs = [r["sets"][name]["brevitas_acc"] if b == "brevitas" else r["sets"][name][b]["acc"]
                        for r in by_seed.values()]
                row[f"{b}_{name}_acc"] = float(sum(accs) / len(accs))
            if b != "brevitas":
                row[f"{b}_argmax_mismatches"] = sum(r["sets"][n][b]["argmax_mismatches"]
                                                    for r in by_seed.values() for n in r["sets"])
                row[f"{b}_output_mismatches"] = sum(r["sets"][n][b]["output_mismatches"]
                                                    for r in by_seed.values() for n in r["sets"])
        if "rtl" in backends:
            row["rtl_parameters_unchanged"] = all(r["rtl_parameters_unchanged"] for r in by_seed.values())
        row["all_equal"] = all(r["all_equal"] for r in by_seed.values())
        summary[method] = row
    out = {"backends": backends, "summary": summary, "runs": runs}
    write_json(stage / "hardware.json", out)
    rows = []
    for method, row in summary.items():
        for b in ["brevitas", *backends]:
            mm = ("-", "-") if b == "brevitas" else (row[f"{b}_argmax_mismatches"], row[f"{b}_output_mismatches"])
            rows.append([method, b, *(f"{100 * row[f'{b}_{n}_acc']:.1f}" for n in ("forget", "retain", "test")), *mm])
    (stage / "hardware.md").write_text(markdown_table(
        ["method", "backend", "forget acc %", "retain acc %", "test acc %", "argmax mismatches", "output mismatches"],
        rows))
    _plot_hardware(stage, summary, ["brevitas", *backends])
    return out


def _plot_hardware(stage, summary: dict, sources: list) -> None:
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    names = list(summary)
    fig, axes = pyplot().subplots(1, 3, figsize=(10, 3.2), sharey=True)
    for ax, part in zip(axes, ("forget", "retain", "test")):
        grouped_bars(ax, names, {src: [100 * summary[n][f"{src}_{part}_acc"] for n in names] for src in sources})
        ax.set_title(f"{part} accuracy %", fontsize=9)
    axes[0].set_ylim(0, 105)
    axes[0].legend(fontsize=7)
    save(fig, stage / "hardware.png", dpi=110)
