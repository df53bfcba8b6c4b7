"""Write the measured tables of the seed cards from their committed ``metrics.json``.

Each card in :data:`CARDS` holds a block between two markers; this script rewrites the block from
the card's committed runs, the prose around it is the card's own. tapc's and autotune's blocks are
the tables their method's own report code writes into ``results.md`` (so a card and its results
file never disagree), and so are gats's (its default run and its literal-judge run), logicsage's, multi2's and
dynaview's (with a paired table over five metrics); token-search's block is computed here from its per-seed
values (its gap differences are stored nowhere else); ais's block is written by ``sweeps/ais/card_tables.py``,
registered here so that one command rebuilds every card. Unlearning's card is written with its README by
``sweeps/unlearning/make_readme.py``.

Run: ``PYTHONPATH=python python sweeps/card_tables.py [--check] [NAME ...]`` (seconds; no experiment
is rerun). ``--check`` writes nothing and exits 1 when a card differs from what it would write.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "sweeps"
END = "<!-- card-tables: end -->"


def start(sources: str) -> str:
    """The start marker of a block written from ``sources`` (named in the marker)."""
    return f"<!-- card-tables: start (written by sweeps/card_tables.py from {sources}) -->"


class Card(NamedTuple):
    """One card's generated block.

    Attributes:
        path: the card (``seeds/<name>.md``).
        start, end: the markers around the block.
        block: the block, markers included, from the committed runs (reads them itself).
    """

    path: Path
    start: str
    end: str
    block: Callable[[], str]


def _metrics(rel: str) -> dict:
    return json.loads((SWEEPS / rel / "metrics.json").read_text())


def _demote(markdown: str) -> str:
    """A results.md section's ``## Title`` lines as bold paragraphs, so they sit inside a card's section."""
    return "\n".join(f"**{line[3:]}**" if line.startswith("## ") else line for line in markdown.splitlines())


def tapc_block() -> str:
    """tapc's card: the tables of ``sweeps/tapc/results.md`` (``tapc.experiment.results_table``)."""
    from onchip.methods._report import seeds_text
    from onchip.methods.tapc.experiment import results_table

    m = _metrics("tapc")
    seeds = m["headline"]["seeds"]
    intro = (f"**Measured** by `{m['command']}` ({len(seeds)} seeds, {seeds_text(seeds)}; "
             f"{m['seconds']:.0f} s wall as the run recorded it); the tables of `sweeps/tapc/results.md`:")
    return "\n\n".join([start("sweeps/tapc/metrics.json"), intro, _demote(results_table(m)).strip("\n"), END])


#: autotune's committed runs, in the card's order: (folder under sweeps/autotune, title)
AUTOTUNE = [("regression", "Default run: drift-regression, LUT budget 600"),
            ("readout-target", "Smallest-learner example: readout-drift, target fidelity 0.98, LUT budget 2000")]


def autotune_block() -> str:
    """autotune's card: per committed run, the sections of its ``results.md``
    (``autotune.experiment.results_markdown``)."""
    from onchip.methods.autotune.experiment import results_markdown

    parts = [start("sweeps/autotune/*/metrics.json")]
    for folder, title in AUTOTUNE:
        m = _metrics(f"autotune/{folder}")
        parts += [f"### {title} (`sweeps/autotune/{folder}/`)", f"Command: `{m['command']}`",
                  _demote(results_markdown(m)).strip("\n")]
    return "\n\n".join([*parts, END])


#: gats's committed runs, in the card's order: (folder under sweeps, title)
GATS = [("gats", "The actions judge (the default run)"), ("gats-literal-judge", "The literal judge")]


def gats_block() -> str:
    """gats's card: per committed run, its command and the controls, main, per-seed and first-feedback
    tables of its ``results.md`` (``gats.experiment``'s report code)."""
    from onchip.methods.gats import experiment as gats

    parts = [start("sweeps/gats*/metrics.json")]
    for folder, title in GATS:
        m = _metrics(folder)
        parts += [f"### {title} (`sweeps/{folder}/`)",
                  f"Command: `{m['command']}` ({m['seconds']:.0f} s wall as the run recorded it)",
                  gats.controls_table(m).strip("\n"), gats.results_table(m).strip("\n"),
                  gats.per_seed_table(m).strip("\n")]
    return "\n\n".join([*parts, END])


def logicsage_block() -> str:
    """logicsage's card: its command and the sections of ``sweeps/logicsage/results.md``
    (``logicsage.experiment.results_sections``)."""
    from onchip.methods.logicsage.experiment import results_sections

    m = _metrics("logicsage")
    return "\n\n".join([start("sweeps/logicsage/metrics.json"),
                         f"Command: `{m['command']}` ({m['seconds']:.0f} s wall as the run recorded it)",
                         *(s.strip("\n") for s in results_sections(m)), END])


def token_search_block() -> str:
    """token-search's card: the accuracy of every arm, the positive control, the headline, the 1D - grid
    gaps per search with the differences of those gaps (computed here from the per-seed values, paired
    over seeds with ``_report.paired_difference``), the beam's Frechet gap and the prefix diagnostics."""
    from onchip.methods._report import markdown_table, paired_difference, paired_text as ci

    m = _metrics("token-search")
    per_seed, summary, h, pc = m["per_seed"], m["summary"], m["headline"], m["positive_control"]
    seeds, budgets = list(per_seed), m["config"]["budgets"]
    kinds, searches = m["config"]["tokenizers"], m["config"]["searches"]

    def values(key, metric="evaluator_accuracy"):
        return [per_seed[s][key][metric] for s in seeds]

    def gap(search, b, metric="evaluator_accuracy"):  # per seed, 1D - grid
        return [a - g for a, g in zip(values(f"ordered-{search}@{b}", metric), values(f"grid-{search}@{b}", metric))]

    cols = ["1 call", *[f"{b} calls" for b in budgets]]
    label = {"sample": " (one AR sample)", "blind": " (ablation)"}
    acc_rows = []
    order = [s for s in ("sample",) if s in searches] + [s for s in searches if s not in ("sample", "blind")] \
        + [s for s in ("blind",) if s in searches]
    for search in order:
        for kind in kinds:
            cells = []
            for b in [1, *budgets]:
                r = summary.get(f"{kind}-{search}@{b}")
                cells.append(f"{r['evaluator_accuracy']:.3f} ± {r['evaluator_accuracy_std']:.3f}" if r else "")
            acc_rows.append((f"{kind}-{search}{label.get(search, '') if kind == kinds[0] else ''}", *cells))
    acc = markdown_table(["arm", *cols], acc_rows,
                         caption=f"Evaluator accuracy, mean ± std over the {len(seeds)} seeds (chance 0.10):")
    control = (f"**Positive control** ({pc['setting']}): {pc['method']} "
               f"{' / '.join(f'{v:.3f}' for v in pc['method_values'])} per seed against {pc['ablation']} "
               f"{' / '.join(f'{v:.3f}' for v in pc['ablation_values'])}; paired **{ci(pc['paired'])}**; "
               f"sensitive: {pc['sensitive']}.")
    b0 = h["budget"]["verifier_calls_per_image"]
    head = markdown_table(
        ["arm", "value", f"{h['method']} - arm [ci95]"],
        [(name + (" (1 call)" if name.endswith("-sample") else f" ({budgets[-1]} calls)" if name.endswith("-blind")
                  else ""), f"{h['baselines'][name]:.3f}", ci(p)) for name, p in h["paired"].items()],
        caption=f"**Headline** ({b0} calls): {h['method']} {h['value']:.3f} ± {h['std']:.3f}; "
                f"{h['method']} - arm, paired over seeds:")
    gap_rows = [(f"1D - grid, {s}", *[ci(m["paired"][str(b)][f"ordered-{s}"][f"grid-{s}"]) for b in budgets])
                for s in ("beam", "lookahead", "bon", "uniform") if s in searches]
    if "bon" in searches:
        gap_rows += [(f"(1D - grid, {s}) - (1D - grid, bon)",
                      *[ci(paired_difference(gap(s, b), gap("bon", b))) for b in budgets])
                     for s in ("beam", "lookahead") if s in searches]
    gap_rows += [(f"Frechet 1D - grid, {s} (lower is better)",
                  *[ci(paired_difference(values(f"ordered-{s}@{b}", "frechet"), values(f"grid-{s}@{b}", "frechet")), 2)
                    for b in budgets]) for s in ("beam", "uniform") if s in searches]
    gaps = markdown_table(["difference", *[f"{b} calls" for b in budgets]], gap_rows,
                          caption="1D - grid per search (evaluator accuracy unless named), and how much larger the "
                                  "gap is under a prefix search than under best-of-N, paired over seeds (Student t "
                                  "ci95):")
    ranks, mse = m["prefix_rank_correlation"], m["prefix_mse"]
    ks = list(ranks[seeds[0]][kinds[0]])
    prefix = markdown_table(
        ["tokenizer", *[f"k={k}" for k in ks]],
        [(kind, *[f"{sum(ranks[s][kind][k] for s in seeds) / len(seeds):.2f} / "
                  f"{sum(mse[s][kind][int(k) - 1] for s in seeds) / len(seeds):.3f}" for k in ks])
         for kind in ("ordered", "grid")],
        caption="Prefix diagnostics (mean over seeds): Spearman between the verifier score of a k-token prefix "
                "and of the full sample / reconstruction MSE of held-out digits from k tokens (all "
                f"{m['protocol']['tokens']} tokens: " + " vs ".join(
                    f"{kind} {sum(mse[s][kind][-1] for s in seeds) / len(seeds):.3f}" for kind in ("ordered", "grid"))
                + "):")
    command = (f"Command: `{m['command']}` ({m['protocol']['seconds_total']:.0f} s wall as the run recorded it)")
    return "\n\n".join([start("sweeps/token-search/metrics.json"), command,
                         *(t.strip("\n") for t in (acc, control, head, gaps, prefix)), END])


#: dynaview's paired table beyond results.md: (per-seed key, column title), the headline's first
DYNAVIEW_PAIRED = [("schema", "schema acc (headline)"), ("rare_schema", "rare-set schema acc"),
                   ("next_state", "next-state"), ("rollout", "rollout"), ("changed_cell", "changed cell")]


def dynaview_block() -> str:
    """dynaview's card (its command is printed above the block): the run's wall time, the tables of ``sweeps/dynaview/results.md``
    (``dynaview.experiment.results_table``), then the paired difference ``full`` - arm on five metrics,
    computed as the headline's (``_report.paired_difference``) from the per-seed values."""
    from onchip.methods._report import paired_difference, paired_text
    from onchip.methods.dynaview.experiment import results_table

    m = _metrics("dynaview")
    seeds, main = m["headline"]["seeds"], m["headline"]["method"]
    arms = [v for v in m["results"] if v != main]

    def cell(arm, key):
        return paired_text(paired_difference([m["per_seed"][str(s)][main][key] for s in seeds],
                                             [m["per_seed"][str(s)][arm][key] for s in seeds]))

    paired = "\n".join([f"Paired difference `{main}` - arm over the {len(seeds)} seeds, mean [ci95] (Student t; an "
                        "interval that holds zero is no difference), per metric:", "",
                        "| arm | " + " | ".join(t for _, t in DYNAVIEW_PAIRED) + " |",
                        "|---|" + "---|" * len(DYNAVIEW_PAIRED),
                        *(f"| {a} | " + " | ".join(cell(a, k) for k, _ in DYNAVIEW_PAIRED) + " |" for a in arms)])
    return "\n\n".join([start("sweeps/dynaview/metrics.json"),
                         f"By the committed command above ({m['seconds']:.0f} s wall as the run recorded it):",
                         _demote(results_table(m, None)).strip("\n"), paired, END])


def multi2_block() -> str:
    """multi2's card (its command is printed above the block): the run's wall time and the tables of
    ``sweeps/multi2/results.md`` (``multi2.experiment.results_table``)."""
    from onchip.methods.multi2.experiment import results_table

    m = _metrics("multi2")
    return "\n\n".join([start("sweeps/multi2/metrics.json"),
                         f"By the committed command above ({m['seconds']:.0f} s wall as the run recorded it):",
                         _demote(results_table(m, None)).strip("\n"), END])


def _ais() -> Card:
    import importlib.util

    path = SWEEPS / "ais" / "card_tables.py"
    spec = importlib.util.spec_from_file_location("ais_card_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Card(module.CARD, module.START, module.END, module.block)


CARDS: dict[str, Callable[[], Card]] = {
    "ais": _ais,
    "tapc": lambda: Card(ROOT / "seeds" / "tapc.md", start("sweeps/tapc/metrics.json"), END, tapc_block),
    "autotune": lambda: Card(ROOT / "seeds" / "autotune.md", start("sweeps/autotune/*/metrics.json"), END,
                             autotune_block),
    "gats": lambda: Card(ROOT / "seeds" / "gats.md", start("sweeps/gats*/metrics.json"), END, gats_block),
    "dynaview": lambda: Card(ROOT / "seeds" / "dynaview.md", start("sweeps/dynaview/metrics.json"), END,
                             dynaview_block),
    "logicsage": lambda: Card(ROOT / "seeds" / "logicsage.md", start("sweeps/logicsage/metrics.json"), END,
                              logicsage_block),
    "token-search": lambda: Card(ROOT / "seeds" / "token-search.md", start("sweeps/token-search/metrics.json"), END,
                                 token_search_block),
    "multi2": lambda: Card(ROOT / "seeds" / "multi2.md", start("sweeps/multi2/metrics.json"), END, multi2_block),
}


def card_text(card: Card, text: str) -> str:
    """``text`` (the card) with its block rewritten.

    Raises:
        ValueError: the card has no markers.
    """
    from onchip.methods._report import replace_marked

    return replace_marked(text, card.start, card.end, card.block(), where=str(card.path))


def main(argv: list[str]) -> int:
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("--")] or list(CARDS)
    unknown = [n for n in names if n not in CARDS]
    if unknown:
        print(f"card_tables: unknown card {unknown[0]!r}; one of {', '.join(CARDS)}", file=sys.stderr)
        return 2
    differ = []
    for name in names:
        card = CARDS[name]()
        old = card.path.read_text()
        new = card_text(card, old)
        if new != old:
            differ.append(card.path)
            if not check:
                card.path.write_text(new)
        print(f"{'differs' if check and new != old else 'wrote' if new != old else 'unchanged'}: "
              f"{card.path.relative_to(ROOT)}")
    return int(check and bool(differ))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
