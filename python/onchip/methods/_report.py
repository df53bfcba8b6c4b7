"""What every seed method's report needs: metrics.json, tables, standard plots and named seeds.

An experiment (``methods/<name>/experiment.py``) computes its result and writes it into
the staging folder of :func:`onchip.io.atomic_output_dir` with these helpers, so every
method's folder reads the same way: ``metrics.json`` led by the command line that made it,
markdown / CSV tables, and plots saved at one place.
"""

from __future__ import annotations

import csv
import os
import zlib
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from onchip.environment import RECORDED_PACKAGES, environment, write_metrics  # noqa: F401  (re-exported)


def rng(seed: int, *labels: str | int) -> np.random.Generator:
    """An independent generator for one named use of ``seed``.

    ``rng(seed, "sampler", 3)`` and ``rng(seed, "noise")`` draw unrelated streams: the labels
    are hashed to stable integers (CRC-32 of their text, the same on every run and platform)
    and spawned through :class:`numpy.random.SeedSequence`, so two uses never collide the way
    hand offsets (``seed + 1000``) can.

    Args:
        seed: the run's seed (an integer >= 0).
        labels: names (and indices) of the use, in order.

    Returns:
        A fresh :class:`numpy.random.Generator`.

    Raises:
        ValueError: ``seed`` is negative.
    """
    if int(seed) < 0:
        raise ValueError(f"seed: must be >= 0, got {seed!r}")
    words = [zlib.crc32(str(label).encode()) for label in labels]
    return np.random.default_rng(np.random.SeedSequence([int(seed), *words]))


def seed_int(seed: int, *labels: str | int) -> int:
    """An integer seed in [0, 2**31) drawn from ``rng(seed, *labels)``, for APIs that take an integer
    (``torch.manual_seed``, ``torch.Generator().manual_seed``, scikit-learn's ``random_state``, a
    function's ``seed`` argument): as independent across labels and seeds as :func:`rng` itself.

    Raises:
        ValueError: ``seed`` is negative.
    """
    return int(rng(seed, *labels).integers(2**31))


def need(ok: bool, field: str, value, reason: str) -> None:
    """Raise ``ValueError("<field>: <reason>, got <value>")`` unless ``ok``: how experiment configs
    name a bad field (the command line turns the field into its flag,
    :func:`onchip.commands._args.build_config`)."""
    if not ok:
        raise ValueError(f"{field}: {reason}, got {value!r}")


#: config fields that say how a run is made, not what it computes (left out of the recorded settings)
RUN_FIELDS = ("out", "progress", "command", "jobs")  # how a run ran, not what it computes


def recorded_config(config) -> dict:
    """The fields of an experiment config (a dataclass) that define its result: all but
    :data:`RUN_FIELDS`, as recorded in ``metrics.json``."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(config).items() if k not in RUN_FIELDS}


def write_results(folder: str | os.PathLike, title: str, command: str, *sections: str) -> None:
    """Write ``results.md``: ``# title``, the exact command line, then ``sections`` (markdown
    paragraphs or tables), separated by blank lines.

    Args:
        folder: the (staging) output folder.
        title: the heading.
        command: the command line that made the results (the recorded one, or the method's
            default command when none was recorded).
    """
    parts = [f"# {title}", f"Command: `{command}`", *(s.rstrip("\n") for s in sections)]
    (Path(folder) / "results.md").write_text("\n\n".join(parts) + "\n")


def headline_line(h: Mapping) -> str:
    """One markdown line for a :func:`headline` object: the method's value (mean ± std over
    seeds) and each baseline's."""
    return (f"Headline ({h['metric']}): **{h['value']:.3f}** ± {h['std']:.3f} for {h['method']}; "
            + ", ".join(f"{k}: {v:.3f}" for k, v in h["baselines"].items()) + f" (seeds {h['seeds']}).")


def seeds_text(seeds: Iterable[int]) -> str:
    """Seeds as a card or table names them: ``"0-9"`` for three or more consecutive seeds, else
    ``"0, 1"`` (a list)."""
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def markdown_table(header: Sequence[str], rows: Iterable[Sequence], caption: str = "") -> str:
    """A markdown table (with ``caption`` and a blank line above it when given); ends with a newline.

    Args:
        header: the column titles.
        rows: the cells of each row, already formatted (``str()`` is applied).
        caption: text above the table.
    """
    lines = [caption, ""] if caption else []
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def replace_marked(text: str, start: str, end: str, block: str, *, where: str) -> str:
    """``text`` with the span from the marker line ``start`` through ``end`` replaced by ``block``.

    The one way a generated block (a card's measured tables, a README's summary) is put into a
    page whose prose around it is written by hand; ``block`` carries the two markers itself.

    Args:
        text: the page.
        start, end: the markers (HTML comments); ``end`` is searched after ``start``.
        block: the replacement, markers included.
        where: the page's name, for the error.

    Raises:
        ValueError: naming ``where`` and the markers when the page does not hold both.
    """
    if start not in text or end not in text[text.index(start):]:
        raise ValueError(f"{where}: no '{start}' ... '{end}' block")
    a = text.index(start)
    b = text.index(end, a) + len(end)
    return text[:a] + block + text[b:]


def write_csv(path: str | os.PathLike, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Write a CSV file: ``header`` then ``rows`` (cells written as given)."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def write_dict_csv(path: str | os.PathLike, rows: Sequence[Mapping]) -> None:
    """Write a CSV file of dict rows; the columns are the first row's keys, in order."""
    write_csv(path, list(rows[0]), [list(r.values()) for r in rows])


def grouped_bars(ax, groups: Sequence[str], series: Mapping[str, Sequence[float]], *,
                 errors: Mapping[str, Sequence[float]] | None = None, rotation: float = 20,
                 fontsize: float | None = None) -> None:
    """Bars of every series side by side over each group, centred on the group's tick.

    Args:
        ax: a matplotlib axes.
        groups: the tick labels (one per position on the x axis).
        series: legend label -> one value per group (None or NaN leaves a gap).
        errors: legend label -> one error bar per group (optional).
        rotation: tick label rotation in degrees.
        fontsize: tick label font size (matplotlib's default when None).
    """
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        vals = [np.nan if v is None else v for v in values]
        yerr = None if errors is None else errors[label]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width, yerr=yerr, label=label)
    ax.set_xticks(x, groups, rotation=rotation, fontsize=fontsize)


def save(fig, path: str | os.PathLike, dpi: int = 110, *, tight: bool = True) -> None:
    """Lay out (``tight``), save and close a matplotlib figure."""
    from onchip.plotting import pyplot

    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


DIRECTIONS = ("higher", "lower")

#: the keys of every :func:`headline` object
HEADLINE_KEYS = ("metric", "method", "value", "baselines", "budget", "seeds", "direction", "std", "baseline_std")
#: the key a :func:`headline` object carries after :data:`HEADLINE_KEYS` when it has paired comparisons
HEADLINE_PAIRED = "paired"


def headline(metric: str, method: str, value: float, baselines: Mapping[str, float], *, budget: Mapping | str,
             seeds: Sequence[int], direction: str, std: float, baseline_std: Mapping[str, float],
             paired: Mapping[str, Mapping] | None = None) -> dict:
    """The ``headline`` object every seed method's ``metrics.json`` carries (keys :data:`HEADLINE_KEYS`).

    ``{"metric", "method", "value", "baselines": {name: value}, "budget", "seeds", "direction",
    "std", "baseline_std": {name: std}}``: the method's main number, mean over ``seeds``, next to
    each baseline's under the same ``budget`` (evaluations, solver calls, rollouts or tokens per
    arm), which way is better, and the standard deviations over seeds (:func:`mean_std`: 0.0
    for a single seed). With ``paired`` (baseline name -> :func:`paired_difference` of the method
    against that baseline over the same seeds) the object also carries ``"paired"``: the
    difference method - baseline with its ``ci95`` beside each baseline's value.

    Raises:
        ValueError: ``direction`` is not "higher"/"lower", fewer than one seed, a value is not
            finite, or ``paired`` names a baseline that is not in ``baselines``.
    """
    need(direction in DIRECTIONS, "direction", direction, f"one of {DIRECTIONS}")
    need(len(seeds) >= 1, "seeds", list(seeds), "at least one seed")
    for name in paired or {}:
        need(name in baselines, "paired", name, f"a baseline of the headline ({', '.join(baselines)})")
    values = {"value": value, **{f"baselines.{k}": v for k, v in baselines.items()}}
    for name, v in values.items():
        need(bool(np.isfinite(float(v))), name, v, "a finite number")
    return {"metric": metric, "method": method, "value": float(value),
            "baselines": {k: float(v) for k, v in baselines.items()},
            "budget": dict(budget) if isinstance(budget, Mapping) else budget,
            "seeds": [int(s) for s in seeds], "direction": direction, "std": float(std),
            "baseline_std": {k: float(v) for k, v in baseline_std.items()},
            **({HEADLINE_PAIRED: {k: dict(v) for k, v in paired.items()}} if paired is not None else {})}


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0.0 for a single value) of per-seed results."""
    v = np.asarray(list(values), dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def mean_std_text(mean: float | None, std: float, digits: int = 3, *, sign: bool = False,
                  std_digits: int | None = None) -> str:
    """``"0.123 ± 0.045"``: a mean and standard deviation over seeds as a table cell; ``"n/a"`` when
    the mean is None or not finite (nothing was measured).

    Args:
        mean, std: e.g. from :func:`mean_std`.
        digits: decimals of the mean (and of the std unless ``std_digits``).
        sign: write the mean's sign always (``+0.123``).
        std_digits: decimals of the std when they differ from the mean's.
    """
    if mean is None or not np.isfinite(mean):
        return "n/a"
    return f"{mean:{'+' if sign else ''}.{digits}f} ± {std:.{digits if std_digits is None else std_digits}f}"


def mean_std_dict(values: Iterable[float]) -> dict:
    """``{"mean": m, "std": s}`` of :func:`mean_std`: one per-seed figure as a summary stores it."""
    m, s = mean_std(values)
    return {"mean": m, "std": s}


#: sign patterns of :func:`paired_difference`'s permutation p-value: every one of the 2**n when
#: 2**n is at most this many (n <= 14 pairs), else this many drawn at random
SIGN_FLIPS = 2**14


def paired_difference(method: Sequence[float], baseline: Sequence[float], *, confidence: float = 0.95,
                      seed: int = 0) -> dict:
    """Paired comparison of a method with one arm over the same seeds (or items): the mean of the
    per-seed differences ``method[i] - baseline[i]``, its Student t confidence interval and a
    sign-flip permutation p-value.

    The interval is ``mean +/- t_{n-1} * s / sqrt(n)`` over the n differences (Student, 1908;
    :func:`scipy.stats.t`): it holds its level at every n >= 2 when the differences are roughly
    normal, where a percentile bootstrap of the mean is too narrow at a few seeds (at n = 3 it is
    [min, max], which holds a normal mean 75% of the time; ``tests/test_methods_shared.py``
    simulates the coverage of both). The p-value is the two-sided sign-flip permutation test of a zero mean
    (Fisher, 1935; :func:`scipy.stats.permutation_test`, ``permutation_type="samples"``): exact
    over all 2**n sign patterns for n <= 14, a Monte Carlo estimate from :data:`SIGN_FLIPS`
    patterns beyond. It makes no normality assumption, but it cannot go below 2 / 2**n: under
    0.05 only from n = 6 on. Pairing removes what the two arms share on a seed (its data, its
    initial model), so a difference smaller than either arm's spread over seeds can still be
    seen. When every difference is the same the interval is that value. A difference is a win
    only when its interval excludes zero (:func:`excludes_zero`).

    Args:
        method: the method's value on each seed, shape (n,), n >= 2.
        baseline: the arm's value on the same seeds, in the same order, shape (n,).
        confidence: the interval's level, in (0, 1).
        seed: seeds the random sign patterns when n > 14 (the result is reproducible).

    Returns:
        ``{"difference": mean, "ci95": [lo, hi], "n": n, "per_seed": [d_0 .. d_{n-1}],
        "p_value": p}``; the interval's key is ``ci95`` at the default level, else
        ``ci<percent>`` (``ci90``).

    Raises:
        ValueError: fewer than 2 pairs, unequal lengths, a value that is not finite, or a
            confidence outside (0, 1).
    """
    a, b = np.asarray(method, dtype=float), np.asarray(baseline, dtype=float)
    need(a.shape == b.shape and a.ndim == 1, "baseline", b.shape, f"one value per seed of the method {a.shape}")
    need(a.size >= 2, "method", a.size, "at least 2 paired values")
    need(bool(np.isfinite(a).all() and np.isfinite(b).all()), "method", [a.tolist(), b.tolist()],
         "finite values")
    need(0.0 < confidence < 1.0, "confidence", confidence, "a level in (0, 1)")
    from scipy import stats

    d = a - b
    mean = float(d.mean())
    if np.all(d == d[0]):
        lo = hi = float(d[0])
    else:
        half = float(stats.t.ppf(0.5 + confidence / 2, d.size - 1) * stats.sem(d))
        lo, hi = mean - half, mean + half
    if not d.any():
        p = 1.0
    else:
        p = float(stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=SIGN_FLIPS,
                                         alternative="two-sided", random_state=np.random.default_rng(seed)).pvalue)
    return {"difference": mean, f"ci{round(confidence * 100):d}": [lo, hi], "n": int(d.size),
            "per_seed": [float(v) for v in d], "p_value": p}


def repaired(paired: Mapping) -> dict:
    """A stored :func:`paired_difference` (from a ``metrics.json``) recomputed from its own
    ``per_seed`` differences at its own level: how committed results take up a change of the
    interval without rerunning their experiment. Keys other than the interval's, ``n`` and
    ``p_value`` are kept.

    Raises:
        ValueError: as :func:`paired_difference`, or ``paired`` holds no ``per_seed`` values.
    """
    need("per_seed" in paired, "paired", sorted(paired), "a paired difference with per_seed values")
    key = next(k for k in paired if k.startswith("ci"))
    d = np.asarray(paired["per_seed"], dtype=float)
    fresh = paired_difference(d, np.zeros_like(d), confidence=int(key[2:]) / 100)
    return {**paired, **fresh, "per_seed": list(paired["per_seed"])}


def excludes_zero(paired: Mapping) -> bool:
    """True when a :func:`paired_difference`'s interval lies wholly above or below zero: the only
    case in which a report may say that one arm beats the other."""
    lo, hi = next(v for k, v in paired.items() if k.startswith("ci"))
    return lo > 0 or hi < 0


def positive_control(setting: str, method: str, ablation: str, method_values: Sequence[float],
                     ablation_values: Sequence[float], *, seeds: Sequence[int], metric: str) -> dict:
    """The ``positive_control`` object of a seed method's ``metrics.json``: the same experiment in a
    setting where the paper's mechanism must matter (its obstacle planted), the method against its
    ablation (the mechanism removed) on the same seeds, and whether the experiment can see it.

    Args:
        setting: what was planted, in words.
        method, ablation: the two arms' names.
        method_values, ablation_values: each arm's value per seed, same order as ``seeds``.
        seeds: the seeds.
        metric: what the values measure.

    Returns:
        ``{"setting", "metric", "method", "ablation", "seeds", "method_values", "ablation_values",
        "paired": paired_difference(method_values, ablation_values), "sensitive": bool}``;
        ``sensitive`` is :func:`excludes_zero` of the paired difference.

    Raises:
        ValueError: as :func:`paired_difference`, or a seed count that differs from the values'.
    """
    need(len(seeds) == len(method_values), "seeds", list(seeds), f"one seed per value ({len(method_values)})")
    paired = paired_difference(method_values, ablation_values)
    return {"setting": setting, "metric": metric, "method": method, "ablation": ablation,
            "seeds": [int(s) for s in seeds], "method_values": [float(v) for v in method_values],
            "ablation_values": [float(v) for v in ablation_values], "paired": paired,
            "sensitive": excludes_zero(paired)}


def paired_text(paired: Mapping, digits: int = 3) -> str:
    """``"+0.012 [-0.004, +0.030]"``: a paired difference (:func:`paired_difference`) and its interval."""
    lo, hi = next(v for k, v in paired.items() if k.startswith("ci"))
    return f"{paired['difference']:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def paired_line(name: str, paired: Mapping, digits: int = 3) -> str:
    """``"<name>: +0.012 [-0.004, +0.030] (n=5)"``: one paired difference as a table cell or line."""
    return f"{name}: {paired_text(paired, digits)} (n={paired['n']})"
