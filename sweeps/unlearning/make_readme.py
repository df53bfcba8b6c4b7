"""Rebuild sweeps/unlearning/README.md from the committed metrics.json / results.md of each configuration.

Run: python sweeps/unlearning/make_readme.py  (reads only files in this folder). The page opens with the summary
tables and the commands that make them, then the method, and ends with the runs on the simulated hardware
(:func:`hardware_section`, from the ``hardware-digits-*`` folders). The same run writes the measured tables of
seeds/unlearning-oeu.md between its ``unlearning-tables`` and ``unlearning-hardware`` markers (:func:`card_text`;
the prose around them is the card's own).
"""

from __future__ import annotations

import json
from pathlib import Path

from onchip.methods._report import seeds_text

HERE = Path(__file__).parent
CARD = HERE.resolve().parents[1] / "seeds" / "unlearning-oeu.md"
CARD_START = ("<!-- unlearning-tables: start (written by sweeps/unlearning/make_readme.py from "
              "sweeps/unlearning/*/metrics.json) -->")
CARD_END = "<!-- unlearning-tables: end -->"
HARDWARE_START = ("<!-- unlearning-hardware: start (written by sweeps/unlearning/make_readme.py from "
                  "sweeps/unlearning/hardware-digits-*/) -->")
HARDWARE_END = "<!-- unlearning-hardware: end -->"
#: bit widths of the runs on the simulated hardware (OEU, forget class:3, seed 0), in page order
HARDWARE_BITS = (8, 4, 2)
#: the card's names of the headline's baselines, in its row order per forget request
CARD_ROWS = {"class:3": [("oeu-noproj", "OEU-noproj"), ("relabel", "relabel"), ("gradascent", "gradient ascent"),
                         ("finetune", "fine-tune"), ("original", "original")],
             "random:0.1": [("oeu-noproj", "OEU-noproj"), ("original", "original"), ("finetune", "fine-tune"),
                            ("gradascent", "gradient ascent"), ("relabel", "relabel")]}
CONFIGS = [(8, "class:3"), (4, "class:3"), (2, "class:3"), (8, "random:0.1"), (4, "random:0.1"), (2, "random:0.1")]


def folder(bits: int, forget: str) -> Path:
    return HERE / f"digits-{bits}bit-{forget.replace(':', '-')}"


def hardware_folder(bits: int) -> Path:
    return HERE / f"hardware-digits-{bits}bit-class-3"


def _hardware_runs() -> dict:
    """bits -> (metrics.json, hardware.json's one run, hardware.md) of each ``hardware-digits-*`` folder."""
    out = {}
    for b in HARDWARE_BITS:
        d = hardware_folder(b)
        hw = json.loads((d / "hardware.json").read_text())
        (run,) = (r for per_seed in hw["runs"].values() for r in per_seed.values())
        out[b] = (json.loads((d / "metrics.json").read_text()), run, (d / "hardware.md").read_text().strip())
    return out


def _one_or_each(values: dict, fmt) -> str:
    """``fmt(v)`` when every bit width has the same value, else each with its bits."""
    if len(set(values.values())) == 1:
        return fmt(next(iter(values.values())))
    return ", ".join(f"{fmt(v)} at {b} bits" for b, v in values.items())


def hardware_section() -> str:
    """The README's section on the simulated hardware: per bit width its command (metrics.json's), the table of
    hardware.md and the plot; sample and cycle counts from hardware.json."""
    runs = _hardware_runs()
    samples = {b: sum(s["n"] for s in run["sets"].values()) for b, (_, run, _) in runs.items()}
    cycles = {b: run.get("rtl_stream_cycles") for b, (_, run, _) in runs.items()}  # older runs recorded them
    out = ["## On the simulated hardware (OEU, forget class:3, seed 0; lr 0.2)", "",
           "The OEU-unlearned 64-64-32-10 network, imported by the brevitas front end, on the golden model "
           "(inference), the HLS C simulation (inference) and the RTL (the Verilated serial MLP datapath with the "
           "imported parameters as reset values and a learning rate at which every update rounds to zero; its "
           "parameters read back unchanged after the stream); accuracies computed from each backend's outputs, "
           "mismatches counted sample for sample against brevitas (forget + retain + test = "
           f"{_one_or_each(samples, str)} samples"
           + ("" if None in cycles.values() else f", {_one_or_each(cycles, str)} clock cycles on the RTL") + ")."]
    for b, (metrics, _, table) in runs.items():
        d = hardware_folder(b)
        out += ["", f"### {b} bits", "", f"`{metrics['command']}`", "", table, "", f"![{d.name}]({d.name}/hardware.png)"]
    return "\n".join(out)


def hardware_block() -> str:
    """The card's block on the simulated hardware: the committed commands and one table of every bit width
    (with its activation format, hardware.json's spec) from the ``hardware-digits-*`` folders."""
    runs = _hardware_runs()
    lines = [HARDWARE_START, "The committed runs, exactly:", ""]
    lines += [f"- `{metrics['command']}`" for metrics, _, _ in runs.values()]
    lines += ["", "| bits | act format | backend | forget acc % | retain acc % | test acc % | argmax mismatches | "
              "output mismatches |", "|---|---|---|---|---|---|---|---|"]
    for b, (_, run, table) in runs.items():
        act = run["spec"]["formats"]["act"]
        lines += [f"| {b} | `{act}` |" + row.split("|", 2)[2] for row in table.splitlines()[2:]]
    return "\n".join([*lines, HARDWARE_END])


def ci(p: dict, digits: int = 1) -> str:
    lo, hi = p["ci95"]
    return f"{p['difference']:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def commands(configs: list[tuple[int, str]]) -> list[str]:
    """The ``onchip unlearn`` command lines of ``configs`` (from each folder's results.md) as indented code
    lines: one line with ``B`` and ``F`` for bits and forget set when they differ only there and in
    ``--ablation`` (named in a comment), else one line each."""
    lines = {c: (folder(*c) / "results.md").read_text().split("Command: `", 1)[1].split("`", 1)[0] for c in configs}
    general = {c: line.replace(f"--bits {c[0]} ", "--bits B ").replace(f"--forget {c[1]} ", "--forget F ")
               .replace(f"--out sweeps/unlearning/{folder(*c).name}", "--out sweeps/unlearning/digits-Bbit-F")
               .replace(" --ablation", "") for c, line in lines.items()}
    if len(set(general.values())) != 1:
        return [f"    {line}" for line in lines.values()]
    ablation = [f"{b}-bit {f}" for (b, f), line in lines.items() if " --ablation" in line]
    return [f"    {next(iter(general.values()))}",
            f"    # B in {' '.join(sorted({str(b) for b, _ in configs}, key=int, reverse=True))}, "
            f"F in {' '.join(dict.fromkeys(f for _, f in configs))} (the folder writes ':' as '-')"
            + (f"; {', '.join(ablation)} adds --ablation" if ablation else "")]

def card_block(results: dict) -> str:
    """The card's measured tables from the configurations' metrics.json (``results``: (bits, forget) ->
    metrics): per forget request the OEU mean ± sd (ddof 1, the headline's), per-seed gaps of OEU and
    OEU-noproj (class forgetting) and every paired difference OEU - baseline, then the positive control."""
    def ci2(p):
        lo, hi = p["ci95"]
        return f"{p['difference']:+.2f} [{lo:+.2f}, {hi:+.2f}]"

    parts = [CARD_START]
    for forget, title in (("class:3", "Class forgetting (class:3), average gap to retrain"),
                          ("random:0.1", "Random forgetting (random:0.1), OEU - baseline (pp)")):
        runs = [results[c] for c in CONFIGS if c[1] == forget]
        seeds = runs[0]["headline"]["seeds"]
        lines = [f"**{title}, {len(seeds)} seeds:**", "", "| | " + " | ".join(f"{r['bits']} bits" for r in runs) + " |",
                 "|---|" + "---|" * len(runs),
                 "| OEU, mean ± sd | " + " | ".join(f"{r['headline']['value']:.1f} ± {r['headline']['std']:.1f}"
                                                   for r in runs) + " |"]
        if forget == "class:3":
            for arm, name in (("oeu", "OEU"), ("oeu-noproj", "OEU-noproj")):
                lines.append(f"| {name} per seed | " + " | ".join(
                    " ".join(f"{r['runs'][str(s)][arm]['avg_gap']:.1f}" for s in seeds) for r in runs) + " |")
        for arm, name in CARD_ROWS[forget]:
            lines.append(f"| OEU - {name} | " + " | ".join(ci2(r["headline"]["paired"][arm]) for r in runs) + " |")
        parts.append("\n".join(lines))
    pcs = [results[c]["positive_control"] for c in CONFIGS]
    pc = pcs[0]
    same = all((p["method_values"], p["ablation_values"]) == (pc["method_values"], pc["ablation_values"]) for p in pcs)
    d = pc["paired"]
    parts.append("\n".join([
        f"**Positive control**, retain accuracy after unlearning (%), seeds {seeds_text(pc['seeds'])}"
        + (" (the same in every configuration's metrics.json: same seeds, same 2-bit originals)" if same
           else " (8-bit class:3's; the configurations differ)") + ":", "",
        "| arm | per seed | mean ± sd |", "|---|---|---|",
        *(f"| {name} | {', '.join(f'{v:.1f}' for v in vals)} | {_mean_sd(vals)} |"
          for name, vals in (("OEU", pc["method_values"]), ("OEU-noproj", pc["ablation_values"]))),
        f"| OEU - OEU-noproj | {', '.join(f'{v:+.1f}' for v in d['per_seed'])} | {_mean_sd(d['per_seed'])} |", "",
        f"Paired {d['difference']:+.1f} pp [{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}] (Student t, sign-flip p "
        f"{d['p_value']:.3g}); positive on {sum(v > 0 for v in d['per_seed'])} of {d['n']} seeds; sensitive: "
        f"{'yes' if pc['sensitive'] else 'no'}."]))
    return "\n\n".join([*parts, CARD_END])


def _mean_sd(values) -> str:
    import numpy as np

    v = np.asarray(values, dtype=float)
    return f"{v.mean():.1f} ± {v.std(ddof=1):.1f}"


def card_text(card: str, results: dict) -> str:
    """``card`` with its blocks between the markers replaced by :func:`card_block` and :func:`hardware_block`.

    Raises:
        ValueError: the card has no markers.
    """
    from onchip.methods._report import replace_marked

    card = replace_marked(card, CARD_START, CARD_END, card_block(results), where=str(CARD))
    return replace_marked(card, HARDWARE_START, HARDWARE_END, hardware_block(), where=str(CARD))


def main() -> None:
    results = {c: json.loads((folder(*c) / "metrics.json").read_text()) for c in CONFIGS}
    fresh = {c: r for c, r in results.items() if "paired" in r["headline"]}
    cols = [f"{b}-bit {f}" for b, f in fresh]
    out = ["# Unlearning on digits: OEU vs baselines (brevitas QAT MLP 64-64-32-10, power-of-two scales, `--act fixed`)",
           "",
           "Average gap to the retrained model (mean |difference| of forget, retain, test accuracy and MIA on "
           "the forget set, pp; lower is better), mean ± std over seeds (ddof 0):", "",
           "| method | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    names = list(next(iter(fresh.values()))["summary"])
    for n in names:
        out.append(f"| {n} | " + " | ".join(
            f"{r['summary'][n]['avg_gap']['mean']:.1f} ± {r['summary'][n]['avg_gap']['std']:.1f}" for r in fresh.values())
            + " |")
    out += ["", "Paired difference OEU - baseline (pp, mean over the 10 seeds, Student t ci95); negative: OEU closer "
            "to retraining; **bold** where the interval excludes zero:", "",
            "| baseline | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for n in fresh[next(iter(fresh))]["headline"]["paired"]:
        cells = []
        for r in fresh.values():
            p = r["headline"]["paired"][n]
            lo, hi = p["ci95"]
            cells.append(f"**{ci(p)}**" if lo > 0 or hi < 0 else ci(p))
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out += ["", "Made by one command per configuration (each section below gives its own), then this page:", "",
            *commands(list(fresh)), "    python sweeps/unlearning/make_readme.py", "",
            "## Method", "",
            "- Every configuration: 10 seeds (0-9); on each seed one original model (QAT on the whole training set) "
            "that every arm starts from (its fingerprint is recorded in each arm's row of metrics.json).",
            "- SGD lr 0.5, chosen by the rule in [lr-rule/lr_rule.md](lr-rule/lr_rule.md) (the smallest rate of "
            "{0.2, 0.5, 1, 2} at which both entropy arms leave the 8-bit forget set above 0.5 log C, on "
            "calibration seeds 100-102, not the reported ones) and used by every arm at every bit width.",
            "- Every unlearning arm spends the same number of gradient evaluations, 80 (10 epochs x 4 forget "
            "batches of 32 x 2 gradients, forget and retain batch, for OEU, OEU-noproj and relabel; fine-tuning "
            "and gradient ascent, one gradient per step, take 80 steps).",
            "- Metric: the average gap to the retrained model above; per seed, per arm and per metric in each "
            "configuration's section."]
    out += ["", "Positive control (the same in every configuration: a 2-bit original per seed, forget random:0.5, no "
            "retain term, lr 0.05, 10 epochs; OEU - OEU-noproj retain accuracy, pp):", "",
            "| configuration | oeu retain % per seed | oeu-noproj retain % per seed | paired difference | sensitive |",
            "|---|---|---|---|---|"]
    for col, r in zip(cols, fresh.values()):
        pc = r["positive_control"]
        out.append(f"| {col} | {', '.join(f'{v:.0f}' for v in pc['method_values'])} | "
                   f"{', '.join(f'{v:.0f}' for v in pc['ablation_values'])} | {ci(pc['paired'])} | "
                   f"{'yes' if pc['sensitive'] else 'no'} |")
    stale = [c for c in CONFIGS if c not in fresh]
    if stale:
        out += ["", "**Not rerun** (still the previous 3-seed runs at lr 0.2, no paired comparison): "
                + ", ".join(f"{b}-bit {f}" for b, f in stale) + "."]
    for c in CONFIGS:
        b, f = c
        d = folder(*c)
        out += ["", f"## {b} bits, forget {f}", ""]
        if c in fresh:
            text = (d / "results.md").read_text().split("\n", 1)[1].strip()
            out += [text.replace("# ", "### "), "", f"![{d.name}]({d.name}/per_seed.png)", "",
                    f"![{d.name}]({d.name}/comparison.png)"]
        else:
            out += ["(previous 3-seed run at lr 0.2, not rerun)", "", (d / "comparison.md").read_text().strip(), "",
                    f"![{d.name}]({d.name}/comparison.png)"]
        if (d / "ablation.md").exists():
            out += ["", f"### OEU ablation ({b} bits, forget {f})", "", (d / "ablation.md").read_text().strip()]
    out += ["", hardware_section()]
    (HERE / "README.md").write_text("\n".join(out).rstrip() + "\n")
    card = CARD.read_text()
    CARD.write_text(card_text(card, results))


if __name__ == "__main__":
    main()
