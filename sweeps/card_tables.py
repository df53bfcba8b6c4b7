"""Write the measured tables of the seed cards from their committed ``metrics.json``.

Each card in :data:`CARDS` holds a block between two markers; this script rewrites the block from
the card's committed runs, the prose around it is the card's own. tapc's and autotune's blocks are
the tables their method's own report code writes into ``results.md`` (so a card and its results
file never disagree), and so are gats's (its default run and its literal-judge run), logicsage's, multi2's and
dynaview's (with a paired table over five metrics); ais's block is written by ``sweeps/ais/card_tables.py``, registered here so
that one command rebuilds every card. Unlearning's card is written with its README by
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


#: dynaview's paired table beyond results.md: (per-seed key, column title), the headline's first
DYNAVIEW_PAIRED = [("schema", "schema acc (headline)"), ("rare_schema", "rare-set schema acc"),
                   ("next_state", "next-state"), ("rollout", "rollout"), ("changed_cell", "changed cell")]


def dynaview_block() -> str:
    """dynaview's card (its command is printed above the block): the run's wall time, the tables of ``sweeps/dynaview/results.md``
    (``dynaview.experiment.results_table``), then the paired difference ``full`` - arm on five metrics,
    computed as the headline's (``_report.paired_difference``) from the per-seed values."""
    from onchip.methods._report import paired_difference
    from onchip.methods.dynaview.experiment import results_table

    m = _metrics("dynaview")
    seeds, main = m["headline"]["seeds"], m["headline"]["method"]
    arms = [v for v in m["results"] if v != main]

    def cell(arm, key):
        d = paired_difference([m["per_seed"][str(s)][main][key] for s in seeds],
                              [m["per_seed"][str(s)][arm][key] for s in seeds])
        return f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"

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
