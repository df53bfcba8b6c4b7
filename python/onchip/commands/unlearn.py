"""``onchip unlearn``: Orthogonal Entropy Unlearning and baselines on a quantized MLP.

Trains a brevitas MLP (power-of-two scales, weights and activations at
``--bits``) with QAT on a scikit-learn data set, unlearns a forget request
with each method, and writes ``metrics.json``, ``comparison.csv``,
``comparison.md`` and ``comparison.png`` (plus ``ablation.*`` with
``--ablation``) into ``--out``. ``--hardware`` also runs every unlearned
model through the fixed-point golden model, the HLS C simulation and the RTL
(``--act fixed`` only) and writes ``hardware.json``/``.md``/``.png``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

METHOD_CHOICES = ("oeu", "oeu-noproj", "retrain", "finetune", "gradascent", "relabel", "all")
TABLE_KEYS = (
    "forget_acc", "retain_acc", "test_acc", "test_forget_class_acc",
    "mia_forget", "forget_entropy", "avg_gap", "wall_s",
)
PERCENT_KEYS = ("forget_acc", "retain_acc", "test_acc", "test_forget_class_acc", "mia_forget")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``onchip unlearn``."""
    p = subparsers.add_parser(
        "unlearn",
        help="unlearn a forget set from a quantized MLP (OEU, arXiv:2602.00567) and compare baselines",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", default="digits", help="digits | breast-cancer (default digits)")
    p.add_argument("--bits", type=int, default=4, help="weight/activation bit width: 8, 4 or 2 (default 4)")
    p.add_argument("--forget", default="class:3", help="forget request: class:N or random:F (default class:3)")
    p.add_argument("--method", default="all", help=f"one of {', '.join(METHOD_CHOICES)} (default all)")
    p.add_argument("--seed", type=int, nargs="+", default=[0], help="one or more seeds (table gives mean and std)")
    p.add_argument("--out", required=True, help="output folder (replaced as a whole on success)")
    g = p.add_argument_group("unlearning")
    g.add_argument("--epochs", type=int, default=10, help="passes over the forget set (default 10)")
    g.add_argument("--lr", type=float, default=0.2, help="SGD learning rate on latent weights (default 0.2)")
    g.add_argument("--retain-weight", type=float, default=1.0, help="lambda of the retain term (default 1)")
    g.add_argument("--projection", default="global", help="OEU projection: global | layer | none (default global)")
    g.add_argument("--project-when", default="always", help="OEU projection rule: always | conflict (default always)")
    g.add_argument("--ablation", action="store_true", help="also run the OEU variant grid (projection x rule x lambda)")
    g.add_argument("--export", action="store_true",
                   help="also write export/<method>-seed<S>.json: integer weights, biases, power-of-two "
                        "exponents and the integer inputs, labels and predictions of the forget/retain/test sets")
    g.add_argument("--hardware", action="store_true",
                   help="also run each unlearned model's forget/retain/test inputs through the fixed-point "
                        "backends (brevitas front end; needs --act fixed) and write hardware.json")
    g.add_argument("--hardware-backends", default="golden,hls,rtl",
                   help="backends of --hardware, comma separated from golden, hls, rtl (default all three; "
                        "rtl compiles one Verilator model per network: minutes each)")
    g = p.add_argument_group("model")
    g.add_argument("--hidden", default="64,32", help="hidden widths, comma separated (default 64,32)")
    g.add_argument("--act", default="fixed",
                   help="activation layout: fixed (one constant power-of-two format for every hidden ReLU "
                        "and quantized logits: runs on the hardware) | learned (per-layer learned scales, "
                        "float logits) (default fixed)")
    g.add_argument("--train-epochs", type=int, default=40, help="QAT epochs of original and retrained model (default 40)")
    g.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)
    return p


def _parse_hidden(text: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(w) for w in text.split(","))
    except ValueError:
        raise ValueError(f"--hidden: {text!r} is not a comma-separated list of integers") from None
    if not widths or min(widths) < 1:
        raise ValueError(f"--hidden: every width must be >= 1, got {text!r}")
    return widths


def _validate(args):
    """Check every argument and build the splits; raises ValueError before anything is written."""
    from onchip.methods.unlearning.data import DATASETS, make_split
    from onchip.methods.unlearning.methods import METHODS, UnlearnConfig
    from onchip.methods.unlearning.models import check_act, check_bits

    if args.dataset not in DATASETS:
        raise ValueError(f"--dataset: unknown data set {args.dataset!r} (choose from {', '.join(DATASETS)})")
    check_bits(args.bits)
    check_act(args.act)
    if args.hardware:
        from onchip.methods.unlearning.hardware import BACKENDS

        backends = [b for b in args.hardware_backends.split(",") if b]
        bad = [b for b in backends if b not in BACKENDS]
        if bad or not backends:
            raise ValueError(f"--hardware-backends: {args.hardware_backends!r} (choose from {', '.join(BACKENDS)})")
        if args.act != "fixed":
            raise ValueError(f"--hardware: needs --act fixed (the front end refuses --act {args.act}: "
                             "per-layer learned activation scales and float logits)")
    if args.method not in METHOD_CHOICES:
        raise ValueError(f"--method: unknown method {args.method!r} (choose from {', '.join(METHOD_CHOICES)})")
    if args.threads < 1:
        raise ValueError(f"--threads: must be >= 1, got {args.threads}")
    if len(set(args.seed)) != len(args.seed):
        raise ValueError(f"--seed: repeated seed in {args.seed}")
    hidden = _parse_hidden(args.hidden)
    try:
        config = UnlearnConfig(
            epochs=args.epochs, lr=args.lr, retain_weight=args.retain_weight,
            projection=args.projection, project_when=args.project_when,
            train_epochs=args.train_epochs,
        )
    except ValueError as exc:
        raise ValueError(f"--{str(exc).replace('_', '-')}") from None
    splits = {seed: make_split(args.dataset, args.forget, seed) for seed in args.seed}
    methods = [m for m in METHODS if m != "retrain"] if args.method == "all" else [args.method]
    methods = [m for m in methods if m != "retrain"]
    return config, hidden, splits, methods


def _ablation_variants(config):
    from dataclasses import replace

    variants = []
    for lam in sorted({0.0, config.retain_weight}):
        variants.append((f"none/lambda={lam:g}", replace(config, projection="none", retain_weight=lam)))
        for proj in ("global", "layer"):
            for when in ("always", "conflict"):
                variants.append((f"{proj}/{when}/lambda={lam:g}", replace(config, projection=proj, project_when=when, retain_weight=lam)))
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
    import csv

    keys = [k for k in TABLE_KEYS if any(k in row for row in summary.values())]
    with open(stage / f"{stem}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([label] + [f"{k}_{s}" for k in keys for s in ("mean", "std")])
        for name, row in summary.items():
            w.writerow([name] + [f"{row[k][s]:.6g}" if k in row else "" for k in keys for s in ("mean", "std")])

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
    lines = [caption, "", "| " + " | ".join([label] + [heads[k] for k in keys]) + " |",
             "|" + "---|" * (len(keys) + 1)]
    for name, row in summary.items():
        lines.append("| " + " | ".join([name] + [cell(row, k) for k in keys]) + " |")
    (stage / f"{stem}.md").write_text("\n".join(lines) + "\n")


def _plot(stage, summary: dict, title: str) -> None:
    import numpy as np

    from onchip.plotting import pyplot

    plt = pyplot()
    keys = ["forget_acc", "retain_acc", "test_acc", "mia_forget"]
    names = list(summary)
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names)), 3.6))
    width = 0.8 / len(keys)
    for i, k in enumerate(keys):
        means = [100 * summary[n][k]["mean"] for n in names]
        stds = [100 * summary[n][k]["std"] for n in names]
        ax.bar(np.arange(len(names)) + (i - 1.5) * width, means, width, yerr=stds, label=k.replace("_", " "))
    ax.set_xticks(np.arange(len(names)), names, rotation=20)
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    fig.tight_layout()
    fig.savefig(stage / "comparison.png", dpi=110)
    plt.close(fig)


def _export(folder, models_out: dict, splits: dict) -> None:
    """One JSON per (method, seed): :func:`export_layers` plus integer inputs, labels and brevitas predictions."""
    from onchip.io import write_json
    from onchip.methods.unlearning.models import export_layers, predict_logits, quantize_input

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
    from tqdm import tqdm

    from onchip.io import write_json
    from onchip.methods.unlearning.hardware import check_on_hardware, split_sets

    keys = [(m, s) for (m, s) in models_out if m in methods]
    runs = {}
    for method, seed in tqdm(keys, desc="hardware", disable=not progress, file=sys.stderr):
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
    lines = ["| method | backend | forget acc % | retain acc % | test acc % | argmax mismatches | "
             "output mismatches |", "|---|---|---|---|---|---|---|"]
    for method, row in summary.items():
        for b in ["brevitas", *backends]:
            accs = " | ".join(f"{100 * row[f'{b}_{n}_acc']:.1f}" for n in ("forget", "retain", "test"))
            mm = ("-", "-") if b == "brevitas" else (row[f"{b}_argmax_mismatches"], row[f"{b}_output_mismatches"])
            lines.append(f"| {method} | {b} | {accs} | {mm[0]} | {mm[1]} |")
    (stage / "hardware.md").write_text("\n".join(lines) + "\n")
    _plot_hardware(stage, summary, ["brevitas", *backends])
    return out


def _plot_hardware(stage, summary: dict, sources: list) -> None:
    import numpy as np

    from onchip.plotting import pyplot

    plt = pyplot()
    names = list(summary)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), sharey=True)
    width = 0.8 / len(sources)
    for ax, part in zip(axes, ("forget", "retain", "test")):
        for i, src in enumerate(sources):
            vals = [100 * summary[n][f"{src}_{part}_acc"] for n in names]
            ax.bar(np.arange(len(names)) + (i - (len(sources) - 1) / 2) * width, vals, width, label=src)
        ax.set_xticks(np.arange(len(names)), names, rotation=20)
        ax.set_title(f"{part} accuracy %", fontsize=9)
    axes[0].set_ylim(0, 105)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(stage / "hardware.png", dpi=110)
    plt.close(fig)


def run(args) -> int:
    """Run the comparison; returns 0. Raises ValueError on bad arguments (nothing written)."""
    config, hidden, splits, methods = _validate(args)

    import torch
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, write_json
    from onchip.methods.unlearning.methods import train_original, unlearn
    from onchip.methods.unlearning.metrics import average_gap, evaluate

    torch.set_num_threads(args.threads)
    variants = _ablation_variants(config) if args.ablation else []
    runs, ablation_runs, models_out = {}, {}, {}
    total = len(splits) * (2 + len(methods) + len(variants))
    bar = tqdm(total=total, desc="unlearn", disable=args.no_progress, file=sys.stderr)
    for seed, split in splits.items():
        bar.set_postfix_str(f"seed {seed}: original")
        original = train_original(split, args.bits, config, hidden, seed, act=args.act)
        bar.update()
        bar.set_postfix_str(f"seed {seed}: retrain")
        retrained, info = unlearn("retrain", original, split, config, seed=seed)
        reference = {**evaluate(retrained, split, seed), **info}
        bar.update()
        rows = {"original": {**evaluate(original, split, seed), "wall_s": None}, "retrain": reference}
        models_out[("original", seed)], models_out[("retrain", seed)] = original, retrained
        for method in methods:
            bar.set_postfix_str(f"seed {seed}: {method}")
            model, info = unlearn(method, original, split, config, seed=seed)
            rows[method] = {**evaluate(model, split, seed), **info}
            models_out[(method, seed)] = model
            bar.update()
        arows = {}
        for name, cfg in variants:
            bar.set_postfix_str(f"seed {seed}: oeu {name}")
            model, info = unlearn("oeu", original, split, cfg, seed=seed)
            arows[name] = {**evaluate(model, split, seed), **info}
            bar.update()
        for table in (rows, arows):
            for row in table.values():
                row["avg_gap"] = average_gap(row, reference)
        runs[seed], ablation_runs[seed] = rows, arows
    bar.close()

    summary = _summarise(runs)
    split0 = next(iter(splits.values()))
    argv = ["onchip", "unlearn", "--dataset", args.dataset, "--bits", str(args.bits), "--forget", args.forget,
            "--method", args.method, "--seed", *map(str, args.seed), "--epochs", str(args.epochs),
            "--lr", f"{args.lr:g}", "--retain-weight", f"{args.retain_weight:g}", "--projection", args.projection,
            "--project-when", args.project_when, "--hidden", args.hidden, "--act", args.act,
            "--train-epochs", str(args.train_epochs)]
    if args.ablation:
        argv.append("--ablation")
    if args.hardware:
        argv += ["--hardware", "--hardware-backends", args.hardware_backends]
    command = " ".join(argv + ["--out", str(args.out)])
    caption = (f"{args.dataset}, {args.bits}-bit weights/activations, forget {args.forget} "
               f"({int(split0.forget.sum())} of {len(split0.forget)} training samples), "
               f"seeds {', '.join(map(str, args.seed))}; mean ± std over seeds.\n\n`{command}`")
    result = {
        "command": command,
        "dataset": args.dataset, "bits": args.bits, "forget": args.forget, "hidden": list(hidden), "act": args.act,
        "seeds": list(args.seed), "config": config.as_dict(),
        "sizes": {str(s): {"forget": int(sp.forget.sum()), "retain": int(sp.retain.sum()), "test": len(sp.y_test)}
                  for s, sp in splits.items()},
        "runs": {str(s): r for s, r in runs.items()},
        "summary": summary,
    }
    if variants:
        result["ablation_runs"] = {str(s): r for s, r in ablation_runs.items()}
        result["ablation_summary"] = _summarise(ablation_runs)
    with atomic_output_dir(args.out) as stage:
        write_json(stage / "metrics.json", result)
        _write_tables(stage, "comparison", summary, "method", caption)
        _plot(stage, summary, f"{args.dataset} {args.bits}-bit, forget {args.forget}")
        if args.export:
            _export(stage / "export", models_out, splits)
        if args.hardware:
            hw = _hardware(stage, models_out, splits, methods,
                           [b for b in args.hardware_backends.split(",") if b], not args.no_progress)
        if variants:
            _write_tables(stage, "ablation", result["ablation_summary"], "OEU variant (projection/rule/lambda)",
                          caption.replace("; mean", "; OEU variants; mean"))
    print(f"wrote {args.out}/metrics.json and comparison.csv/.md/.png" + (", ablation.csv/.md" if variants else ""))
    print((Path(args.out) / "comparison.md").read_text())
    if args.hardware:
        print((Path(args.out) / "hardware.md").read_text())
        if not all(row["all_equal"] for row in hw["summary"].values()):
            print("hardware check: MISMATCH between brevitas and a fixed-point backend", file=sys.stderr)
            return 1
    return 0
