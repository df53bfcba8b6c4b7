"""The token-search experiment: ordered 1D tokens vs a 2D grid under test-time search, at equal compute.

Per seed: split the digits, train both tokenizers, both class-conditional AR priors, the
verifier, the evaluator and the feature network (kept in the onchip cache); then, for every
token structure, search algorithm and budget, generate ``per_class`` images of each class and
judge them with the evaluator (accuracy of the target class) and the Frechet distance to held-out
real digits in the feature network's space. Writes ``metrics.json`` (with the ``headline``),
``results.md``, ``accuracy.png``, ``prefix.png`` and ``samples.png``.
Method: arXiv 2604.15453 (see seeds/token-search.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._report import (
    headline, markdown_table, mean_std, need, recorded_config, save, write_metrics, write_results,
)
from . import SEARCHES, TOKENIZERS

SCHEDULE_STEPS = 5  # len(search.SCHEDULE), kept here so the config needs no torch
MIN_CANDIDATES_PER_BEAM = 2  # search.MIN_CANDIDATES_PER_BEAM, likewise (a test checks they agree)
#: the searches that run over the beam schedule (and so need 2 candidates per beam and step)
BEAM_SEARCHES = ("beam", "lookahead", "uniform")


@dataclass(frozen=True)
class TokenSearchConfig:
    """One run (defaults = the committed run); validated on construction.

    Attributes:
        tokenizers: token structures, a subset of :data:`~onchip.methods.token_search.TOKENIZERS`.
        searches: search algorithms, a subset of :data:`~onchip.methods.token_search.SEARCHES`
            (``sample`` always costs one call).
        budgets: scored candidates per image (= decoder calls = verifier calls), each a multiple
            of the 5 beam steps; with a beam search (beam, lookahead, uniform) each must give every
            beam at least 2 candidates per step (>= 10), else the search selects nothing
            (:func:`~onchip.methods.token_search.search.check_beam`); the headline uses the largest.
        candidates_per_beam: proposals per beam per step (beam width = candidates per step / this), >= 2.
        per_class: images generated per class and arm.
        seeds: one run per seed (data split, training, search).
        tokenizer_steps, prior_steps, classifier_steps: training steps.
        out: output folder; progress: progress bars; command: recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    tokenizers: tuple[str, ...] = TOKENIZERS
    searches: tuple[str, ...] = SEARCHES
    budgets: tuple[int, ...] = (10, 20, 80)
    candidates_per_beam: int = 4
    per_class: int = 6
    seeds: tuple[int, ...] = (0, 1, 2)
    tokenizer_steps: int = 1200
    prior_steps: int = 600
    classifier_steps: int = 400
    out: str = "out/token-search"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("tokenizers", "searches", "budgets", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name, known in (("tokenizers", TOKENIZERS), ("searches", SEARCHES)):
            values = getattr(self, name)
            need(bool(values) and all(v in known for v in values) and len(set(values)) == len(values), name,
                 list(values), f"choose distinct names from {', '.join(known)}")
        need(bool(self.seeds) and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "need distinct integers >= 0")
        need(bool(self.budgets) and list(self.budgets) == sorted(set(self.budgets)), "budgets", list(self.budgets),
             "need strictly increasing budgets")
        for name, lo, hi in (("candidates_per_beam", 2, 64), ("per_class", 1, 100), ("tokenizer_steps", 1, 10**6),
                             ("prior_steps", 1, 10**6), ("classifier_steps", 1, 10**6)):
            v = getattr(self, name)
            need(lo <= v <= hi, name, v, f"must be an integer in [{lo}, {hi}]")
        for b in self.budgets:
            need(b >= SCHEDULE_STEPS and b % SCHEDULE_STEPS == 0 and b <= 2000, "budgets", b,
                 f"each budget must be a multiple of the {SCHEDULE_STEPS} beam steps, at most 2000")
            per_step = b // SCHEDULE_STEPS
            width = max(1, per_step // self.candidates_per_beam)
            need(per_step % width == 0, "budgets", b,
                 f"{per_step} candidates per step do not split evenly over {width} beams of {self.candidates_per_beam}")
            if set(self.searches) & set(BEAM_SEARCHES):
                need(per_step // width >= MIN_CANDIDATES_PER_BEAM, "budgets", b,
                     f"gives {per_step // width} candidate(s) per beam and step; {', '.join(BEAM_SEARCHES)} need "
                     f"at least {MIN_CANDIDATES_PER_BEAM} to select anything (a budget >= "
                     f"{MIN_CANDIDATES_PER_BEAM * SCHEDULE_STEPS})")


def _state_key(c: TokenSearchConfig, seed: int) -> list[str]:
    return ["token_search_v1", str(seed), str(c.tokenizer_steps), str(c.classifier_steps)]


def train_models(c: TokenSearchConfig, seed: int, splits) -> dict:
    """Tokenizers, verifier, evaluator and feature network of one seed (onchip cache), then the priors."""
    import torch

    from onchip.cache import cached_build, digest

    from .. import _tiny
    from . import models, tokenizers as tk

    key_parts = _state_key(c, seed)

    def fill(folder):
        states = {}
        for i, kind in enumerate(("ordered", "grid")):
            tok = tk.make_tokenizer(kind)
            tk.train_tokenizer(tok, splits.a_x, steps=c.tokenizer_steps, seed=seed * 100 + i)
            states[kind] = tok.state_dict()
        states["verifier"] = models.train_classifier(models.verifier_net(), splits.a_x, splits.a_y,
                                                     steps=c.classifier_steps, seed=seed * 100 + 10).state_dict()
        states["evaluator"] = models.train_classifier(models.EvaluatorNet(), splits.b_x, splits.b_y,
                                                      steps=c.classifier_steps, seed=seed * 100 + 11).state_dict()
        states["features"] = models.train_classifier(models.FeatureNet(), splits.b_x, splits.b_y,
                                                     steps=c.classifier_steps, seed=seed * 100 + 12).state_dict()
        torch.save(states, folder / "nets.pt")

    entry, _ = cached_build("token_search_nets", digest(*key_parts)[:32], fill)
    states = torch.load(entry / "nets.pt", weights_only=True)
    out = {}
    for kind in ("ordered", "grid"):
        tok = tk.make_tokenizer(kind)
        tok.load_state_dict(states[kind])
        tok.eval()
        out[kind] = tok
    for name, net in (("verifier", models.verifier_net()), ("evaluator", models.EvaluatorNet()),
                      ("features", models.FeatureNet())):
        net.load_state_dict(states[name])
        net.eval()
        out[name] = net
    n_codes = tk.codebook_size()
    xa = torch.as_tensor(splits.a_x)
    for i, kind in enumerate(("ordered", "grid")):
        seqs = models.prior_sequences(splits.a_y, out[kind].encode(xa).numpy())
        out[f"prior_{kind}"] = _tiny.cached_model(
            "token_search_prior", models.tiny_prior_config(n_codes), [*key_parts, kind, str(c.prior_steps)],
            lambda m, seqs=seqs, i=i: models.train_prior(m, seqs, steps=c.prior_steps, seed=seed * 100 + 20 + i,
                                                         progress=c.progress))
    return out


def prefix_curves(nets: dict, splits) -> dict:
    """Reconstruction MSE of held-out digits from their first k tokens, k = 1..16, per tokenizer."""
    import torch

    from .tokenizers import N_TOKENS

    x = torch.as_tensor(splits.ref_x)
    curves = {}
    for kind in ("ordered", "grid"):
        ids = nets[kind].encode(x)
        curves[kind] = [float(((nets[kind].decode(ids, k) - x) ** 2).mean()) for k in range(1, N_TOKENS + 1)]
    return curves


def prefix_rank_correlation(nets: dict, kind: str, n_per_class: int, seed: int) -> dict:
    """Spearman correlation, over AR samples of one class, between the verifier score of the
    k-token prefix decode and that of the full decode (mean over classes), for each scheduled k < 16.
    A class whose prefix scores are all equal counts 0 (the prefix ranks nothing)."""
    import torch
    from scipy.stats import spearmanr

    from .. import _report
    from .models import ARPrior, N_CLASSES
    from .search import SCHEDULE, VerifierScore
    from .tokenizers import N_TOKENS, codebook_size

    gen = torch.Generator().manual_seed(_report.seed_int(seed, "rank", kind))
    prior = ARPrior(nets[f"prior_{kind}"], codebook_size())
    score = VerifierScore(nets[kind], nets["verifier"])
    classes = torch.arange(N_CLASSES).repeat_interleave(n_per_class)
    full = prior.extend(classes, torch.zeros(len(classes), 0, dtype=torch.long), N_TOKENS, gen)
    final, _ = score(classes, full)
    out = {}
    for k in SCHEDULE[:-1]:
        s, _ = score(classes, full[:, :k])
        rhos = []
        for c in range(N_CLASSES):
            a, b = s[classes == c].numpy(), final[classes == c].numpy()
            # constant prefix scores rank nothing: counted as 0 (spearmanr would return nan)
            rhos.append(0.0 if a.std() == 0 or b.std() == 0 else float(spearmanr(a, b)[0]))
        out[str(k)] = float(sum(rhos) / len(rhos))
    return out


def run_arm(nets: dict, kind: str, search: str, budget: int, c: TokenSearchConfig, seed: int, splits) -> dict:
    """Generate ``per_class`` images of every class with one (tokenizer, search, budget) arm and judge them."""
    import numpy as np
    import torch

    from .. import _report
    from .._scores import accuracy, frechet_distance
    from .models import ARPrior, N_CLASSES, UniformPrior
    from .search import SCHEDULE, VerifierScore, beam_search, best_of_n, check_beam
    from .tokenizers import N_TOKENS, codebook_size

    gen = torch.Generator().manual_seed(_report.seed_int(seed, "search", kind, search, budget))
    n_codes = codebook_size()
    prior = UniformPrior(n_codes) if search == "uniform" else ARPrior(nets[f"prior_{kind}"], n_codes)
    score = VerifierScore(nets[kind], nets["verifier"])
    classes = torch.arange(N_CLASSES).repeat_interleave(c.per_class)
    t0 = time.perf_counter()
    if search in ("bon", "sample"):
        _, images, _ = best_of_n(prior.extend, score, classes, 1 if search == "sample" else budget, N_TOKENS, gen)
    else:
        per_step, width = check_beam(budget, SCHEDULE, c.candidates_per_beam)
        complete = None
        if search == "lookahead":
            def complete(cls, cand, g):
                return prior.extend(cls, cand, N_TOKENS - cand.shape[1], g)
        _, images, _ = beam_search(prior.extend, score, classes, SCHEDULE, per_step=per_step, width=width, gen=gen,
                                   complete=complete)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        feats = nets["features"].features(images).numpy()
        ref = nets["features"].features(torch.as_tensor(splits.ref_x)).numpy()
        judged = {name: accuracy(nets[name](torch.as_tensor(images, dtype=torch.float32)), classes)
                  for name in ("evaluator", "verifier")}
    n = len(classes)
    return {"evaluator_accuracy": judged["evaluator"], "verifier_accuracy": judged["verifier"],
            "frechet": frechet_distance(feats, ref),
            "decoder_calls_per_image": score.counter.decoder / n, "verifier_calls_per_image": score.counter.verifier / n,
            "prior_forwards": prior.forwards, "prior_rows_per_image": prior.sequences / n, "seconds": seconds,
            "images": np.asarray(images[:: c.per_class][:N_CLASSES])}


def arm_name(kind: str, search: str) -> str:
    """Arm label: ``<tokenizer>-<search>``."""
    return f"{kind}-{search}"


def run(config: TokenSearchConfig) -> dict:
    """Train, search and judge for every seed; write the output folder.

    Returns:
        The content of ``metrics.json``.
    """
    import torch
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, check_output_dir

    from .._scores import accuracy
    from .models import digit_splits

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    per_seed, curves, ranks, sanity, samples = {}, {}, {}, {}, {}
    t_start = time.perf_counter()
    arms = [(k, s, b) for k in c.tokenizers for s in c.searches for b in c.budgets
            if not (s == "sample" and b != c.budgets[0])]
    for seed in c.seeds:
        splits = digit_splits(seed)
        nets = train_models(c, seed, splits)
        with torch.no_grad():
            real = torch.as_tensor(splits.ref_x)
            sanity[seed] = {f"{name}_accuracy_real": accuracy(nets[name](real), splits.ref_y)
                            for name in ("verifier", "evaluator")}
        curves[seed] = prefix_curves(nets, splits)
        ranks[seed] = {k: prefix_rank_correlation(nets, k, max(8, c.per_class), seed) for k in c.tokenizers}
        rows = {}
        for kind, search, budget in tqdm(arms, desc=f"seed {seed}", disable=not c.progress, leave=False):
            r = run_arm(nets, kind, search, budget, c, seed, splits)
            if seed == c.seeds[0] and budget == (c.budgets[0] if search == "sample" else c.budgets[-1]):
                samples[arm_name(kind, search)] = r["images"]
            del r["images"]
            rows[f"{arm_name(kind, search)}@{1 if search == 'sample' else budget}"] = r
        per_seed[seed] = rows

    summary = _summarise(per_seed, c)
    result = {"config": recorded_config(c),
              "protocol": {"schedule": [1, 2, 4, 8, 16], "codebook": 75, "tokens": 16,
                           "budget_unit": "scored candidates per image = decoder calls = verifier calls",
                           "evaluator": "CNN trained on split B (never the verifier)",
                           "frechet": "feature MLP trained on split B; reference = 200 held-out real digits",
                           "seconds_total": time.perf_counter() - t_start},
              "headline": _headline(summary, c),
              "summary": summary,
              "per_seed": {str(s): v for s, v in per_seed.items()},
              "prefix_mse": {str(s): v for s, v in curves.items()},
              "prefix_rank_correlation": {str(s): v for s, v in ranks.items()},
              "sanity": {str(s): v for s, v in sanity.items()}}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result, samples)
    if c.progress:
        print(results_table(result))
    return result


def _summarise(per_seed: dict, c: TokenSearchConfig) -> dict:

    keys = list(next(iter(per_seed.values())))
    out = {}
    for key in keys:
        row = {}
        for metric in ("evaluator_accuracy", "verifier_accuracy", "frechet", "decoder_calls_per_image",
                       "verifier_calls_per_image", "prior_rows_per_image", "seconds"):
            m, s = mean_std(per_seed[seed][key][metric] for seed in per_seed)
            row[metric], row[metric + "_std"] = m, s
        out[key] = row
    return out


def _headline(summary: dict, c: TokenSearchConfig) -> dict:

    b = c.budgets[-1]
    main_search = next((s for s in ("beam", "lookahead", "uniform", "bon") if s in c.searches), c.searches[0])
    main_kind = c.tokenizers[0]
    key = lambda k, s: f"{arm_name(k, s)}@{1 if s == 'sample' else b}"  # noqa: E731
    main = key(main_kind, main_search)
    others = [key(k, s) for s in c.searches for k in c.tokenizers if key(k, s) != main]
    return headline(f"evaluator accuracy of the target class (generated digits, {len(c.seeds)} seeds)",
                    arm_name(main_kind, main_search), summary[main]["evaluator_accuracy"],
                    {o.split("@")[0]: summary[o]["evaluator_accuracy"] for o in others},
                    budget={"decoder_calls_per_image": b, "verifier_calls_per_image": b,
                            "note": "'sample' arms: one AR sample, 1 call each"},
                    seeds=list(c.seeds), direction="higher", std=summary[main]["evaluator_accuracy_std"],
                    baseline_std={o.split("@")[0]: summary[o]["evaluator_accuracy_std"] for o in others})


def results_table(result: dict) -> str:
    """Markdown: one row per arm and budget (mean +- std over seeds), then the prefix diagnostics."""

    rows = []
    for key, r in result["summary"].items():
        arm, budget = key.split("@")
        rows.append((arm, budget, f"{r['evaluator_accuracy']:.3f} ± {r['evaluator_accuracy_std']:.3f}",
                     f"{r['verifier_accuracy']:.3f}", f"{r['frechet']:.2f} ± {r['frechet_std']:.2f}",
                     f"{r['decoder_calls_per_image']:.0f}+{r['verifier_calls_per_image']:.0f}",
                     f"{r['prior_rows_per_image']:.0f}"))
    text = markdown_table(["arm", "budget", "evaluator acc.", "verifier acc.", "Frechet", "decoder+verifier calls",
                           "prior rows"], rows,
                          caption="Generated digits per arm (tokenizer-search), mean ± std over seeds. "
                                  "Evaluator = a CNN trained on data the verifier never saw.")
    seeds = list(result["prefix_rank_correlation"])
    ks = list(next(iter(result["prefix_rank_correlation"].values())).values())[0].keys()
    rank_rows = []
    for kind in next(iter(result["prefix_rank_correlation"].values())):
        vals = [sum(result["prefix_rank_correlation"][s][kind][k] for s in seeds) / len(seeds) for k in ks]
        mse = [sum(result["prefix_mse"][s][kind][int(k) - 1] for s in seeds) / len(seeds) for k in ks]
        rank_rows.append((kind, *[f"{v:.2f} / {m:.3f}" for v, m in zip(vals, mse)]))
    text += "\n" + markdown_table(["tokenizer", *[f"k={k}" for k in ks]], rank_rows,
                                  caption="Prefix diagnostics: Spearman(verifier score of the k-token prefix, of the "
                                          "full sample) / reconstruction MSE of held-out digits from k tokens.")
    return text


def _write(stage, c: TokenSearchConfig, result: dict, samples: dict) -> None:
    import numpy as np

    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    write_results(stage, "Token-level search", c.command or "onchip token-search", results_table(result))
    plt = pyplot()
    searches = [s for s in c.searches if s != "sample"]
    fig, axes = plt.subplots(1, max(1, len(searches)), figsize=(3.2 * max(1, len(searches)), 3.0), squeeze=False)
    for ax, s in zip(axes[0], searches):
        for kind in c.tokenizers:
            m = [result["summary"][f"{kind}-{s}@{b}"]["evaluator_accuracy"] for b in c.budgets]
            e = [result["summary"][f"{kind}-{s}@{b}"]["evaluator_accuracy_std"] for b in c.budgets]
            ax.errorbar(c.budgets, m, yerr=e, marker="o", capsize=3, label=kind)
        if "sample" in c.searches:
            for kind in c.tokenizers:
                ax.axhline(result["summary"][f"{kind}-sample@1"]["evaluator_accuracy"], ls=":", lw=1,
                           color="C0" if kind == c.tokenizers[0] else "C1")
        ax.set_xscale("log")
        ax.set_title(s)
        ax.set_xlabel("decoder (= verifier) calls per image")
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("evaluator accuracy")
    axes[0][0].legend(fontsize=8)
    save(fig, stage / "accuracy.png")
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for kind in ("ordered", "grid"):
        seeds = list(result["prefix_mse"])
        mse = np.mean([result["prefix_mse"][s][kind] for s in seeds], 0)
        ax.plot(range(1, len(mse) + 1), mse, marker=".", label=kind)
    ax.set_xlabel("tokens kept (prefix length k)")
    ax.set_ylabel("reconstruction MSE (held-out)")
    ax.legend()
    save(fig, stage / "prefix.png")
    if samples:
        names = list(samples)
        fig, axes = plt.subplots(len(names), 10, figsize=(10 * 0.8, 0.85 * len(names)), squeeze=False)
        for i, name in enumerate(names):
            for j in range(10):
                ax = axes[i, j]
                if j < len(samples[name]):
                    ax.imshow(samples[name][j].reshape(8, 8), cmap="gray", vmin=-1, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
            axes[i, 0].set_ylabel(name, fontsize=6, rotation=0, ha="right")
        save(fig, stage / "samples.png", dpi=100)
