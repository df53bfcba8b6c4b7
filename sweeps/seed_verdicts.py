"""Recompute every committed paired interval of the seed methods, and list the verdicts that change.

Every paired comparison in a committed ``sweeps/**/metrics.json`` stores its per-seed differences
(``per_seed``), or the per-item values it was computed from (:func:`item_differences`). This script recomputes each one with today's
:func:`onchip.methods._report.paired_difference` (a Student t interval with a sign-flip p-value)
from those values, without rerunning any experiment, and

- rewrites the interval, ``p_value`` and the verdicts built on it (a positive control's
  ``sensitive``, humanlike's ``monotone`` noise ladder) in each ``metrics.json``;
- rewrites ``results.md`` with the method's own report code where that code is a function of the
  stored result (:func:`_regenerators`), its command line the one that reproduces the run under
  today's defaults (:func:`reproducing_command`); a ``results.md`` it cannot rebuild (no such code, or a run
  older than the code) gets its printed bootstrap intervals replaced by the t intervals
  (:func:`requote`), and is named; ``sweeps/unlearning/README.md`` and the cards' measured tables (``sweeps/card_tables.py``)
  are rebuilt by their generators;
- writes into ``seeds/README.md``, between its markers, the table of every interval whose verdict
  (excludes zero or not) differs between the percentile bootstrap the project used before
  (:func:`bootstrap_interval`, reproduced here) and the t interval, on the same stored values. The
  table compares the two intervals, not two runs, so running the script again gives the same table.

Run: ``PYTHONPATH=python python sweeps/seed_verdicts.py`` (seconds; ``--check`` only reports files
that would change and exits 1 if any would).
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "sweeps"
README = ROOT / "seeds" / "README.md"
START, END = "<!-- seed-verdicts: start (written by sweeps/seed_verdicts.py) -->", "<!-- seed-verdicts: end -->"


def bootstrap_interval(per_seed, confidence: float) -> list[float]:
    """The interval ``paired_difference`` returned before the t interval: the percentile bootstrap
    of the mean (:func:`scipy.stats.bootstrap`, 10,000 resamples, generator seeded 0; a constant
    difference gives that value)."""
    from scipy import stats

    d = np.asarray(per_seed, dtype=float)
    if np.all(d == d[0]):
        return [float(d[0])] * 2
    res = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=10_000, method="percentile",
                          random_state=np.random.default_rng(0))
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def _ci_key(p: dict) -> str:
    return next(k for k in p if k.startswith("ci"))


def is_paired(obj) -> bool:
    """A stored :func:`~onchip.methods._report.paired_difference`."""
    return isinstance(obj, dict) and "difference" in obj and "n" in obj and any(k.startswith("ci") for k in obj)


def _walk(obj, path=()):
    """Every (path, dict) in a JSON tree, parents before children."""
    if isinstance(obj, dict):
        yield path, obj
        for k, v in obj.items():
            yield from _walk(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, (*path, i))


def item_differences(metrics: dict) -> dict[str, np.ndarray]:
    """Differences over items (tasks, prompt pairs) of intervals stored without ``per_seed``, rebuilt
    from the per-item values the same ``metrics.json`` keeps: gats's ``per_task_success``, ips's
    ``pairs`` (through ips's own selection). Path -> differences."""
    out = {}
    tasks = metrics.get("per_task_success")
    if tasks and "gats" in tasks:
        for arm in metrics.get("results", {}):
            if arm != "gats":
                out[f"results/{arm}/paired_per_task"] = np.subtract(tasks["gats"], tasks[arm])
    if "over_prompt_pairs" in metrics and "pairs" in metrics:
        from types import SimpleNamespace

        from onchip.methods.ips.experiment import _over_prompt_pairs, _pick

        pick, k = _pick(SimpleNamespace(**metrics["config"]))
        rows = [r for r in metrics["pairs"] if (r["subject"], r["arm"]) == pick and r["shots"] == k
                and r["n_salient"] > 0]
        share = np.array([r["n_unstable"] / r["n_salient"] for r in rows])
        same = np.array([r["output_unchanged"] for r in rows], dtype=bool)
        assert set(_over_prompt_pairs(metrics["pairs"], pick, k)) >= set(metrics["over_prompt_pairs"])
        out["over_prompt_pairs/unstable_share_answer_unchanged"] = share[same]
        out["over_prompt_pairs/unstable_share_minus_answer_flip"] = share - (1.0 - same)
        out["over_prompt_pairs/unstable_share_minus_output_change"] = share - np.array(
            [r["output_change"] for r in rows])
    return out


def recompute(metrics: dict) -> tuple[dict, list[dict], list[str]]:
    """``metrics`` with every paired interval recomputed and the verdicts built on them.

    Returns:
        ``(new_metrics, rows, missing)``: one row per interval (``path``, ``n``, ``difference``,
        ``bootstrap``, ``t``, ``p_value``) and the paths of stored intervals whose differences are
        neither stored nor rebuilt by :func:`item_differences` (left as they are).
    """
    from onchip.methods._report import excludes_zero, repaired

    new = copy.deepcopy(metrics)
    rows, missing = [], []
    items = item_differences(metrics)
    for path, obj in list(_walk(new)):
        for key, value in list(obj.items()):
            if not is_paired(value):
                continue
            where = "/".join(str(p) for p in (*path, key))
            d = value.get("per_seed", items.get(where))
            if d is None or len(d) != value["n"] or not np.isclose(np.mean(d), value["difference"], rtol=0,
                                                                    atol=1e-12):
                missing.append(f"{where} (n={value['n']})")
                continue
            fresh = repaired({**value, "per_seed": [float(x) for x in d]})
            if "per_seed" not in value:  # one value per item: the items are stored elsewhere
                fresh.pop("per_seed")
            obj[key] = fresh
            ck = _ci_key(value)
            rows.append({"path": where, "n": fresh["n"], "difference": fresh["difference"],
                         "bootstrap": bootstrap_interval(d, int(ck[2:]) / 100),
                         "t": fresh[ck], "p_value": fresh["p_value"]})
    for _, obj in _walk(new):
        if "sensitive" in obj and is_paired(obj.get("paired")):
            obj["sensitive"] = excludes_zero(obj["paired"])
        if "monotone" in obj and isinstance(obj.get("steps"), dict):
            obj["monotone"] = all(p["ci95"][0] > 0 for p in obj["steps"].values())
    return new, rows, missing


def _sections(fn):
    """A regenerator that keeps the file's title, writes ``command`` as its command line (the title's
    and the old command's when None) and rebuilds its sections."""
    def build(folder: Path, result: dict, old_text: str, command: str | None) -> str:
        head = with_command(old_text, command).split("\n\n")[:2]
        return "\n\n".join([*head, *(s.rstrip("\n") for s in fn(folder, result))]) + "\n"
    return build


def _whole(fn):
    """A regenerator whose report function writes the whole file from the result and a command line."""
    return lambda folder, result, old_text, command: fn(result, command or result.get("command"))


def _unlearning(folder: Path, result: dict, old_text: str, command: str | None) -> str:
    """unlearning's results.md embeds its committed comparison.md: rebuilt in a scratch folder."""
    import shutil
    import tempfile

    from onchip.methods.unlearning.experiment import _write_results

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(folder / "comparison.md", tmp)
        _write_results(Path(tmp), result, command or result["command"])
        return (Path(tmp) / "results.md").read_text()


def with_command(text: str, command: str | None) -> str:
    """``text`` (a ``results.md``) with its ``Command: `...``` paragraph, the second one as
    :func:`onchip.methods._report.write_results` writes it, showing ``command``; unchanged when
    ``command`` is None or the file has no such paragraph."""
    parts = text.split("\n\n")
    if command is None or len(parts) < 2 or not parts[1].startswith("Command: `"):
        return text
    return "\n\n".join([parts[0], f"Command: `{command}`", *parts[2:]])


def reproducing_command(path: Path) -> str | None:
    """The command line a committed run's ``results.md`` shows: :func:`committed_command` (the recorded
    command plus the flags whose defaults moved since the run), for a run of an ``onchip`` command with a
    headline; None for other files (sweep scripts, runs without a headline), which keep their line."""
    metrics = json.loads(path.read_text())
    if not metrics.get("command", "").startswith("onchip ") or "headline" not in metrics:
        return None
    return committed_command(path)


def _regenerators() -> dict:
    """sweeps folder -> how its results.md is rebuilt from its metrics.json (the method's own code)."""
    from onchip.methods.ais import experiment as ais
    from onchip.methods.autotune import experiment as autotune
    from onchip.methods.dynaview import experiment as dynaview
    from onchip.methods.fedspa import experiment as fedspa
    from onchip.methods.gats import experiment as gats
    from onchip.methods.humanlike import experiment as humanlike
    from onchip.methods.ink import experiment as ink
    from onchip.methods.ips import experiment as ips
    from onchip.methods.lmaps import experiment as lmaps
    from onchip.methods.logicsage import experiment as logicsage
    from onchip.methods.memorization import experiment as memorization
    from onchip.methods.multi2 import experiment as multi2
    from onchip.methods.quantum_meta import experiment as quantum_meta
    from onchip.methods.radar import experiment as radar
    from onchip.methods.seg_research import experiment as seg_research
    from onchip.methods.tapc import experiment as tapc
    from onchip.methods.token_search import experiment as token_search

    table = lambda mod: _sections(lambda folder, r: [mod.results_table(r)])
    sections = lambda mod: _sections(lambda folder, r: mod.results_sections(r))
    return {"ais": table(ais), "fedspa": table(fedspa), "humanlike": table(humanlike),
            "memorization": table(memorization), "tapc": table(tapc), "token-search": table(token_search),
            "lmaps": _sections(lambda folder, r: lmaps._tables(r)),
            "autotune": _sections(lambda folder, r: [autotune.results_markdown(r)]),
            "quantum_meta": _sections(lambda folder, r: quantum_meta.results_markdown(folder.name, r)),
            "dynaview": _whole(dynaview.results_table), "multi2": _whole(multi2.results_table),
            "seg-research": _whole(seg_research.results_table), "unlearning": _unlearning,
            "gats": sections(gats), "gats-literal-judge": sections(gats), "radar": sections(radar),
            "logicsage": sections(logicsage), "ink": sections(ink), "ink-tiny-control": sections(ink),
            "ips": sections(ips), "ips-tiny-control": sections(ips)}


#: config fields of a run's scale (dynaview's variants: its arms) that the committed run and the default command should share
SCALE_FIELDS = ("seeds", "threads", "torch_threads", "train_steps", "reviews", "items", "per_cell", "variants")
UNUSED = ROOT / "sweeps" / ".seed-verdicts-unused"


def config_of(argv: list[str]):
    """The experiment config ``onchip <argv>`` builds, without running it: the command's
    ``experiment.run`` is replaced by one that keeps its config (every command parses its flags and
    calls that one function)."""
    import importlib
    import inspect
    import re
    from unittest import mock

    from onchip.cli import main

    command = importlib.import_module(f"onchip.commands.{argv[0].replace('-', '_')}")
    package = re.search(r"onchip\.methods\.(\w+)\.experiment", inspect.getsource(command)).group(1)
    experiment = importlib.import_module(f"onchip.methods.{package}.experiment")
    seen = []
    with mock.patch.object(experiment, "run", lambda config: seen.append(config) or {}):
        main(argv)
    return seen[0]


def default_differences(command: str) -> dict[str, tuple]:
    """Config fields (:func:`onchip.methods._report.recorded_config`) in which a committed command line
    differs from the same command with its defaults (flags a command requires, such as
    ``--gate``, kept from the committed one): field -> (default value, committed value)."""
    import shlex

    from onchip.methods._report import recorded_config

    argv = shlex.split(command)[1:]
    argv = [a for i, a in enumerate(argv) if a != "--out" and (i == 0 or argv[i - 1] != "--out")]
    required = [a for i, a in enumerate(argv) if a == "--gate" or (i and argv[i - 1] == "--gate")]
    out = ["--out", str(UNUSED)]
    def flat(d, head=""):
        return {k2: v2 for k, v in d.items()
                for k2, v2 in (flat(v, f"{head}{k}.").items() if isinstance(v, dict) else [(f"{head}{k}", v)])}

    committed = flat(recorded_config(config_of([*argv, *out])))
    default = flat(recorded_config(config_of([argv[0], *required, *out])))
    return {k: (default.get(k), v) for k, v in committed.items() if default.get(k) != v}


def _argv(command: str) -> list[str]:
    """A recorded command line as ``onchip`` arguments, without its ``--out``."""
    import shlex

    argv = shlex.split(command)[1:]
    return [a for i, a in enumerate(argv) if a != "--out" and (i == 0 or argv[i - 1] != "--out")]


def _moved(metrics: dict, command: str) -> dict[str, tuple]:
    """Config fields in which ``command``, read with today's defaults, differs from what the committed run
    stored (its ``config``, and the seeds of its headline): field -> (value today, stored value). Only
    fields the stored config holds are compared (older runs stored fewer)."""
    from onchip.methods._report import recorded_config

    today = json.loads(json.dumps(recorded_config(config_of([*_argv(command), "--out", str(UNUSED)]))))
    stored = {**metrics.get("config", {}), "seeds": list(metrics["headline"]["seeds"])}
    return {k: (today[k], v) for k, v in stored.items() if k in today and today[k] != v}


def committed_command(path: Path) -> str:
    """The command line that reproduces a committed run with today's defaults: the command it recorded,
    plus a flag for each config field whose default has moved since (a default run made smaller than
    the committed one). Read back without running: the flags are checked to give the stored config.

    Raises:
        ValueError: naming the run and the field when no flag of the command sets that field, or the
            flags written do not give the stored config.
    """
    import shlex

    from onchip.cli import build_parser

    metrics = json.loads(path.read_text())
    command = metrics["command"]
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    moved = _moved(metrics, command)
    if not moved:
        return command
    argv = _argv(command)
    parser = build_parser().commands[argv[0]][1]
    dests = {a.dest: a for a in parser._actions if a.option_strings}
    extra = []
    for field, (_, value) in sorted(moved.items()):
        action = next((dests[d] for d in (field, field.removeprefix("n_"), field.rstrip("s")) if d in dests), None)
        if action is None:
            raise ValueError(f"{where}: no flag of `onchip {argv[0]}` sets '{field}'")
        if isinstance(value, list) and tuple(value) == getattr(action.type, "known", None):
            words = [action.type.all_word]  # every name, as the flag spells it
        elif isinstance(value, list):
            words = [str(v) for v in value] if action.nargs in ("+", "*") else [",".join(map(str, value))]
        else:
            words = [str(value)]
        extra += [max(action.option_strings, key=len), *words]
    out = shlex.split(command)[1:]
    out = out[:out.index("--out")] if "--out" in out else out
    fresh = shlex.join(["onchip", *out, *extra, *shlex.split(command)[len(out) + 1:]])
    if _moved(metrics, fresh):
        raise ValueError(f"{where}: `{fresh}` still differs in {sorted(_moved(metrics, fresh))}")
    return fresh


def run_differences(path: Path) -> dict[str, tuple]:
    """:func:`default_differences` of a committed run's :func:`committed_command`, with the seeds the run
    used (its headline's) in place of the seeds its command line gives today."""
    metrics = json.loads(path.read_text())
    command = committed_command(path)
    diff = default_differences(command)
    ran, default = metrics["headline"]["seeds"], _default_seeds(command)
    diff.pop("seeds", None)
    if list(ran) != list(default):
        diff["seeds"] = (default, ran)
    return diff


def _default_seeds(command: str) -> list:
    import shlex

    argv = shlex.split(command)[1:]
    required = [a for i, a in enumerate(argv) if a == "--gate" or (i and argv[i - 1] == "--gate")]
    return list(config_of([argv[0], *required, "--out", str(UNUSED)]).seeds)


def _value(v) -> str:
    if isinstance(v, (list, tuple)) and len(v) > 3 and all(isinstance(x, int) for x in v) \
            and list(v) == list(range(v[0], v[0] + len(v))):
        return f"{v[0]}-{v[-1]}"
    return str(v)


def defaults_table(files: list[Path]) -> str:
    """Markdown: every committed run whose seeds, threads or scale (:data:`SCALE_FIELDS`) differ from its
    command's defaults, with the command that reproduces it (:func:`committed_command`; the card prints
    it) and the other fields in which it differs."""
    from onchip.methods._report import markdown_table

    rows = []
    for path in files:
        command = committed_command(path)
        diff = run_differences(path)
        scale = {k: v for k, v in diff.items() if k in SCALE_FIELDS}
        if scale:
            rows.append([f"`{path.parent.relative_to(ROOT).as_posix()}`", f"`{command}`",
                         ", ".join(f"{k} {_value(c)} (default {_value(d)})" for k, (d, c) in scale.items()),
                         ", ".join(f"{k} {_value(c)}" for k, (d, c) in diff.items() if k not in SCALE_FIELDS)
                         or "-"])
    return markdown_table(["committed run", "its command (also in the card)", "seeds / threads / scale",
                           "other settings"],
                          rows, caption="Committed runs whose seeds, threads or scale (steps, reviews, contexts, problems per cell, arms) "
                                        "differ from their command's default run (every other committed run uses "
                                        "the default seeds, threads and scale):")


#: sweeps folder -> its card (seeds/<card>.md), where the names differ
CARDS = {"ais": "ais-entropic-mirror", "memorization": "diffusion-memorization", "quantum_meta": "quantum-meta",
         "unlearning": "unlearning-oeu", "gats-literal-judge": "gats", "ink-tiny-control": "ink",
         "ips-tiny-control": "ips"}
CARD_START = "<!-- seed-verdicts: start (written by sweeps/seed_verdicts.py; the verdicts the t interval changed) -->"


def card_of(rel: str) -> Path:
    """The card of a committed result, from its path under ``sweeps/``."""
    folder = Path(rel).relative_to("sweeps").parts[0]
    return ROOT / "seeds" / f"{CARDS.get(folder, folder)}.md"


def card_text(card: str, rows: list[tuple[str, dict]]) -> str:
    """``card`` with its block of changed verdicts replaced, inserted after its first results
    heading (or at its end), or removed when ``rows`` is empty."""
    import re

    if CARD_START in card:
        a, b = card.index(CARD_START), card.index(END, card.index(CARD_START)) + len(END)
        card = card[:a].rstrip("\n") + "\n\n" + card[b:].lstrip("\n")
    if not rows:
        return card
    lines = [f"- `{Path(f).parent.relative_to('sweeps').as_posix()}` `{r['path']}`: {_fmt(r['difference'])} "
             f"{_interval(r['t'])} (percentile bootstrap {_interval(r['bootstrap'])}): {_verdict(r['t'])}"
             for f, r in rows]
    intro = ("**Intervals.** The committed `metrics.json`, `results.md` and this card give Student t intervals; "
             "these verdicts differ from those of the percentile bootstrap used before, on the same per-seed "
             "values (all of them: seeds/README.md):")
    block = "\n".join([CARD_START, intro, "", *lines, END])
    m = re.search(r"^## (Results|Measured).*$", card, flags=re.MULTILINE)
    at = m.end() + 1 if m else len(card)
    return card[:at].rstrip("\n") + "\n\n" + block + "\n\n" + card[at:].lstrip("\n")


def _fmt(v: float) -> str:
    return f"{v:+.4g}"


def _interval(ci) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def _verdict(ci) -> str:
    return "excludes 0" if ci[0] > 0 or ci[1] < 0 else "holds 0"


def table(changed: list[tuple[str, dict]], total: int, missing: list[str], date: str | None = None) -> str:
    """The markdown block between the README's markers, stamped ``date`` (default today)."""
    from onchip.methods._report import markdown_table

    date = date or datetime.date.today().isoformat()
    intro = (f"Written by `sweeps/seed_verdicts.py` on {date} from the per-seed "
             f"differences stored in the committed `metrics.json` files. Of {total} paired intervals, {len(changed)} "
             "change their verdict between the percentile bootstrap used before and the Student t interval "
             "used now (`methods/_report.py: paired_difference`; the bootstrap is too narrow at a few seeds, "
             "at 3 seeds it is [min, max]: `tests/test_methods_shared.py` simulates both). p: the sign-flip permutation p-value, exact up to "
             "14 pairs; it cannot go below 2/2^n (0.0625 at 5 seeds).")
    lines = [START, "", intro, ""]
    rows = [[f"`{f}`", f"`{r['path']}`", r["n"], _fmt(r["difference"]), _interval(r["bootstrap"]),
             _interval(r["t"]), f"{r['p_value']:.3g}", f"{_verdict(r['bootstrap'])} -> {_verdict(r['t'])}"]
            for f, r in changed]
    lines.append(markdown_table(["file", "interval", "n", "difference", "bootstrap ci", "t ci", "p", "verdict"],
                                rows).rstrip("\n"))
    if missing:
        lines += ["", ("Not recomputed (per-item values not stored; they change when the method is rerun): "
                       + "; ".join(missing) + ".")]
    return "\n".join([*lines, "", END])


_NUM = r"[+\-−]?\d+(?:\.\d+)?"
_QUOTE = __import__("re").compile(rf"({_NUM})(\s*)\[({_NUM}),(\s*)({_NUM})\]")


def requote(text: str, rows: list[dict]) -> tuple[str, int]:
    """``text`` with every printed ``d [lo, hi]`` that is the percentile-bootstrap interval of a row
    (same difference and bounds at the printed precision) replaced by that row's t interval, printed
    the same way. For a ``results.md`` that its method's report code cannot rebuild. Returns the text
    and the number of intervals replaced."""
    def num(s):
        return float(s.replace("−", "-"))

    def digits(s):
        return len(s.split(".")[1]) if "." in s else 0

    out, last, n = [], 0, 0
    for m in _QUOTE.finditer(text):
        d, sp, lo, sp2, hi = m.groups()
        k = max(map(digits, (d, lo, hi)))
        same = lambda vals: all(abs(v - num(x)) <= 0.5001 * 10 ** -k for v, x in zip(vals, (d, lo, hi)))
        if any(same([r["difference"], *r["t"]]) for r in rows):
            continue
        hit = next((r for r in rows if same([r["difference"], *r["bootstrap"]])), None)
        if hit is None:
            continue
        signed = any(x[0] in "+-−" for x in (lo, hi))
        show = lambda v: (f"{v:+.{k}f}" if signed else f"{v:.{k}f}")
        out += [text[last:m.start()], f"{d}{sp}[{show(hit['t'][0])},{sp2}{show(hit['t'][1])}]"]
        last, n = m.end(), n + 1
    text = "".join(out) + text[last:]
    for before, after in WORDING.items():
        text = text.replace(before, after)
    return text, n


#: how the older report code named the paired interval -> the name of the interval it now holds
WORDING = {"(mean [ci95], percentile bootstrap)": "(mean [ci95], Student t)", "(bootstrap ci95)": "(Student t ci95)",
           "Bootstrap over prompt pairs": "Over prompt pairs (Student t)"}


def _script(path: Path):
    """A sweep script (not a package module) loaded by its path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    check = "--check" in argv
    regen = _regenerators()
    changed, total, missing, touched, left = [], 0, [], [], []
    for path in sorted(SWEEPS.rglob("metrics.json")):
        rel = path.relative_to(ROOT).as_posix()
        old = json.loads(path.read_text())
        new, rows, miss = recompute(old)
        total += len(rows)
        missing += [f"`{rel}` {m}" for m in miss]
        changed += [(rel, r) for r in rows if _verdict(r["bootstrap"]) != _verdict(r["t"])]
        if not rows:
            continue
        writes = {}
        if new != old:
            writes[path] = json.dumps(new, indent=2) + "\n"
        results = path.parent / "results.md"
        build = regen.get(path.parent.name) or regen.get(path.parent.parent.name)
        if results.exists():
            text, command = results.read_text(), reproducing_command(path)
            try:
                fresh = build(path.parent, new, text, command) if build else None
            except KeyError:  # a run older than its method's report code
                fresh = None
            if fresh is None:
                fresh, n = requote(with_command(text, command), rows)
                left.append(f"{rel.replace('metrics.json', 'results.md')} ({n} intervals requoted)")
            if fresh != text:
                writes[results] = fresh
        for target, text in writes.items():
            touched.append(target.relative_to(ROOT).as_posix())
            if not check:
                target.write_text(text)
    readme = README.read_text()
    files = sorted(p for p in SWEEPS.rglob("metrics.json") if json.loads(p.read_text()).get("command", "")
                   .startswith("onchip ") and "headline" in json.loads(p.read_text()))

    def with_block(date):
        block = table(changed, total, missing, date).replace(END, defaults_table(files) + "\n" + END)
        if START in readme:
            return readme[:readme.index(START)] + block + readme[readme.index(END) + len(END):]
        return readme.rstrip("\n") + "\n\n## Verdicts that the t interval changed\n\n" + block + "\n"

    # the stamp is the date the tables last changed: an unchanged table keeps its date (and --check passes
    # on any later day)
    stamp = re.search(r"Written by `sweeps/seed_verdicts.py` on (\d{4}-\d\d-\d\d)", readme)
    fresh = with_block(stamp.group(1)) if stamp else None
    if fresh != readme:
        fresh = with_block(None)
    if fresh != readme:
        touched.append(README.relative_to(ROOT).as_posix())
        if not check:
            README.write_text(fresh)
    for card in sorted({card_of(f) for f, _ in changed} | {p for p in (ROOT / "seeds").glob("*.md")
                                                           if CARD_START in p.read_text()}):
        text = card.read_text()
        fresh = card_text(text, [(f, r) for f, r in changed if card_of(f) == card])
        if fresh != text:
            touched.append(card.relative_to(ROOT).as_posix())
            if not check:
                card.write_text(fresh)
    card_tables = _script(SWEEPS / "card_tables.py")
    for make in card_tables.CARDS.values():
        card = make()
        text = card.path.read_text()
        fresh = card_tables.card_text(card, text)
        if fresh != text:
            touched.append(card.path.relative_to(ROOT).as_posix())
            if not check:
                card.path.write_text(fresh)
    if not check:
        sys.path.insert(0, str(SWEEPS / "unlearning"))
        import make_readme

        make_readme.main()
    print(f"{total} paired intervals, {len(changed)} verdicts changed; "
          f"{'would write' if check else 'wrote'} {len(touched)} files")
    for t in touched:
        print("  ", t)
    if left:
        print("results.md not rebuilt by its method's report code (older run or no such code); its printed "
              "bootstrap intervals replaced by the t intervals:", *left, sep="\n   ")
    return 1 if check and touched else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
