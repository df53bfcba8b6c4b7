"""Write the measured tables of seeds/ais-entropic-mirror.md from the committed sweeps/ais/*/metrics.json.

Run: ``PYTHONPATH=python python sweeps/ais/card_tables.py`` (reads only the six folders here; rewrites the card
between its ``ais-tables`` markers, the prose around them is the card's own). ``--check`` writes nothing and
exits 1 when the card differs from what it would write. ``sweeps/card_tables.py`` registers this card beside
tapc's and autotune's, so one command (and ``sweeps/seed_verdicts.py``) rebuilds every card's tables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from onchip.methods._report import seeds_text

HERE = Path(__file__).resolve().parent
CARD = HERE.parents[1] / "seeds" / "ais-entropic-mirror.md"
START = "<!-- ais-tables: start (written by sweeps/ais/card_tables.py from sweeps/ais/*/metrics.json) -->"
END = "<!-- ais-tables: end -->"
#: (folder stem, title) in the card's order; each stem has an equal-evaluations and an equal-iterations folder
TARGETS = [("gmm4-d10", "4-mode mixture"), ("grid25-d2", "25-mode grid"), ("funnel-d10", "Neal's funnel")]


def _ci(p: dict) -> str:
    lo, hi = p["ci95"]
    return f"{p['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _per_seed(values) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _command(m: dict) -> str:
    return f"`{m['command']}`"


def method_table(runs: list[dict]) -> str:
    """One row per (budget, method): draws, evaluations, final KL per seed, its mean ± std, the paired
    difference EM2C - method, log Z error, ESS/N and mode coverage (means over seeds)."""
    from onchip.methods._report import markdown_table, mean_std_text

    seeds = runs[0]["seeds"]
    same = all(m["seeds"] == seeds for m in runs)
    rows = []
    for m in runs:
        paired = m["headline"].get("paired", {})
        for name, s in m["summary"].items():
            rows.append([name, m["budget"], *([] if same else [seeds_text(m["seeds"])]), m["target_evals"][name],
                         m["samples_per_iteration"][name],
                         _per_seed(m["per_seed"][name][str(k)]["kl"] for k in m["seeds"]),
                         mean_std_text(s["kl"]["mean"], s["kl"]["std"]),
                         _ci(paired[name]) if name in paired else "—",
                         mean_std_text(s["log_z_error"]["mean"], s["log_z_error"]["std"], sign=True),
                         f"{s['ess_fraction']['mean']:.3f}", f"{s['mode_coverage']['mean']:.2f}"])
    return markdown_table(["method", "budget", *([] if same else ["seeds"]), "target evals", "draws/iteration",
                           f"final KL per seed {seeds_text(seeds)}" if same else "final KL per seed", "KL mean ± std", "em2c - method, paired [ci95]",
                           "log Z error", "ESS/N", "mode coverage"], rows)


def split_table(m: dict) -> str:
    """The split sweep of an equal-evaluations run: one row per MH-step count, paired against the fewest."""
    from onchip.methods._report import markdown_table, mean_std_text

    sp = m["split"]
    rows = [[a["mcmc_steps"], a["samples_per_iteration"], a["target_evals"], _per_seed(a["kl"]),
             mean_std_text(a["kl_summary"]["mean"], a["kl_summary"]["std"]),
             f"{sum(a['mode_coverage']) / len(a['mode_coverage']):.2f}",
             _ci(a["paired_vs_fewest_steps"]) if "paired_vs_fewest_steps" in a else "reference"]
            for a in sp["arms"]]
    return markdown_table(["MH steps", "draws/iteration", "target evals", "final KL per seed", "KL mean ± std",
                           "mean coverage", f"minus {sp['reference_steps']} steps, paired [ci95]"], rows,
                          f"Split sweep at {sp['total_evaluations']:,} evaluations (EM2C's total), final KL; paired "
                          f"difference against {sp['reference_steps']} steps:")


def control_table(runs: dict[str, dict]) -> str:
    """The positive control of each equal-evaluations run (the equal-iterations run repeats it)."""
    from onchip.methods._report import markdown_table

    pcs = {stem: m["positive_control"] for stem, m in runs.items()}
    seeds = next(iter(pcs.values()))["seeds"]
    same = all(pc["seeds"] == seeds for pc in pcs.values())
    k = lambda n: f"{n // 1000}k"
    evals = [(m["config"]["iterations"], pc["target_evals"]) for m, pc in zip(runs.values(), pcs.values())]
    caption = (f"**Positive control** (gmm4, d = 10, N = {next(iter(runs.values()))['config']['n_samples']} draws per "
               "iteration for both arms; EM2C spends " + " / ".join(k(e["em2c"]) for _, e in evals)
               + " evaluations at " + " / ".join(str(i) for i, _ in evals) + " iterations, the ablation "
               + " / ".join(k(e["em2c-nomove"]) for _, e in evals) + "), final KL per seed"
               + (f" {seeds_text(seeds)}:" if same else " (seeds per row):"))
    mean = lambda v: sum(v) / len(v)
    rows = [[f"{m['config']['iterations']} (`{stem}*`)", *([] if same else [seeds_text(pc["seeds"])]),
             _per_seed(pc["method_values"]),
             _per_seed(pc["ablation_values"]), _ci(pc["paired"]), f"{pc['paired']['p_value']:.3g}",
             f"{mean(pc['mode_coverage']['em2c']):.2f} / {mean(pc['mode_coverage']['em2c-nomove']):.2f}",
             "yes" if pc["sensitive"] else "no"]
            for (stem, m), pc in zip(runs.items(), pcs.values())]
    return markdown_table(["iterations (folder)", *([] if same else ["seeds"]), "em2c", "em2c-nomove", "em2c - em2c-nomove [ci95]", "sign-flip p",
                           "mode coverage em2c / nomove", "sensitive (excludes zero)"], rows, caption)


def block() -> str:
    """The card's measured tables, between the markers."""
    runs = {stem: [json.loads((HERE / f"{stem}{tail}" / "metrics.json").read_text())
                   for tail in ("", "-equal-iterations")] for stem, _ in TARGETS}
    seeds = {tuple(m["seeds"]) for pair in runs.values() for m in pair}
    scale = (f"{len(next(iter(seeds)))} seeds, {seeds_text(list(next(iter(seeds))))}" if len(seeds) == 1
             else "seeds per table: " + " or ".join(f"{len(s)} ({seeds_text(list(s))})" for s in sorted(seeds, key=len)))
    parts = [START, (f"**Measured** ({scale}, per row; every cell of \"final KL per seed\" "
                     "is one run; `sweeps/ais/<target>/` at equal target evaluations, the default, with the positive "
                     "control and the split sweep; `sweeps/ais/<target>-equal-iterations/` with N = 1000 draws per "
                     "iteration for every method; each folder's `results.md` holds the same tables.) \"paired "
                     "[ci95]\" is EM2C minus the method over the same seeds (Student t): negative means EM2C's KL "
                     "is lower; an interval that holds zero is no difference.")]
    for stem, title in TARGETS:
        main, equal_iter = runs[stem]
        parts += [f"**{title}, d = {main['dim']}, {main['config']['iterations']} iterations**",
                  method_table([main, equal_iter]).rstrip("\n"),
                  f"{_command(main)}; {_command(equal_iter)}", split_table(main).rstrip("\n")]
    parts += [control_table({stem: pair[0] for stem, pair in runs.items()}).rstrip("\n"), END]
    return "\n\n".join(parts)


def card_text(card: str) -> str:
    """``card`` with the block between its markers replaced.

    Raises:
        ValueError: the card has no markers.
    """
    from onchip.methods._report import replace_marked

    return replace_marked(card, START, END, block(), where=str(CARD))


def main(argv: list[str]) -> int:
    old = CARD.read_text()
    new = card_text(old)
    if "--check" in argv:
        return int(new != old)
    if new != old:
        CARD.write_text(new)
    print(f"{'wrote' if new != old else 'unchanged'}: {CARD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
