"""The world model, its training and evaluation, and the run (in the spirit of DynaVieW).

Two tasks share one tiny decoder (:mod:`onchip.methods._tiny`), told apart by a task token:
transition prediction ``TP S_t | S_t+1 => T`` and state simulation ``SS S_t | T => S_t+1``. Tokens
carry a type (0 = state and structure, 1 = schema); the full model routes each type to its own FFN
expert and lets a query attend only to its ``cross_topk`` best keys of the other type (selective
attention across experts); schema targets are weighted by inverse square-root frequency of their
token (mean weight 1 over schema targets). Grid cells carry spatial position ids shared by the two
keyframes (:func:`positions`). Metrics (:func:`evaluate`): schema accuracy (all four tokens right) and
per token, next-state accuracy (whole grid right), per cell and per changed cell, k-step rollout
consistency (state simulation fed its own predictions along a true transition sequence; final grid right).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from .._report import need
from . import VARIANTS

#: the accuracies of :func:`evaluate`, in table order, and their column names
METRICS = ("schema", "schema_token", "next_state", "cell", "changed_cell", "rollout")
METRIC_NAMES = ("schema acc", "schema token acc", "next-state acc", "cell acc", "changed-cell acc",
                "rollout consistency")


@dataclass(frozen=True)
class DynaviewConfig:
    """One run.

    Attributes:
        variants: subset of :data:`~onchip.methods.dynaview.VARIANTS`.
        episodes: training episodes (each ``steps`` transitions).
        steps: transitions per episode (also the rollout length k).
        train_steps: optimiser steps per model (``separate`` trains two models of half as many).
        eval_items: held-out transitions for schema / next-state accuracy; a quarter of it as rollouts.
        d_model, cross_topk: model width and the selective-attention k.
        batch, lr: sequences per optimiser step and the peak AdamW learning rate.
        seeds, out, progress, command: as every command.
        jobs: processes that run the seeds (1 = in this process; the results do not depend on it).
    """

    variants: tuple[str, ...] = VARIANTS
    episodes: int = 600
    steps: int = 3
    train_steps: int = 800
    eval_items: int = 200
    d_model: int = 32
    cross_topk: int = 4
    batch: int = 32
    lr: float = 1e-2
    seeds: tuple[int, ...] = (0, 1, 2)
    out: str = "out/dynaview"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)
    jobs: int = field(default=1, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "variants", tuple(self.variants))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        need(bool(self.variants) and all(v in VARIANTS for v in self.variants), "variants", list(self.variants),
             f"choose from {', '.join(VARIANTS)}")
        need(len(self.seeds) >= 1 and all(s >= 0 for s in self.seeds), "seeds", list(self.seeds),
             "one or more seeds >= 0")
        need(self.jobs >= 1, "jobs", self.jobs, "must be >= 1")
        for name, lo in (("episodes", 1), ("steps", 1), ("train_steps", 2), ("eval_items", 4), ("cross_topk", 1),
                         ("batch", 1)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(self.d_model % 4 == 0 and self.d_model >= 8, "d_model", self.d_model, "must be a multiple of 4, >= 8")
        need(0 < self.lr < 1, "lr", self.lr, "must be in (0, 1)")


def vocab():
    """Cell tokens, schema tokens and the structure tokens ``TP SS | =>``."""
    from .._tiny import Vocab
    from .world import EMPTY, KINDS, schema_vocab

    return Vocab(["TP", "SS", "|", "=>", EMPTY, *KINDS, *schema_vocab()])


def encode(v, task: str, s0: list[str], s1: list[str] | None, t: list[str] | None) -> tuple[list[int], list[int], int]:
    """Ids, token types and the index where the target starts, for ``task`` in ``TP`` / ``SS``.
    The target (``t`` for TP, ``s1`` for SS) may be None (prompt only)."""
    if task == "TP":
        prompt = ["TP", *s0, "|", *s1, "=>"]
        target = t
    else:
        prompt = ["SS", *s0, "|", *t, "=>"]
        target = s1
    words = prompt + (list(target) + [] if target is not None else [])
    ids = v.encode(" ".join(words), bos=True) + ([v.eos] if target is not None else [])
    types = [1 if w.split(":")[0] in ("E", "A", "T", "C") else 0 for w in ["<bos>", *words]] + (
        [0] if target is not None else [])
    return ids, types, len(prompt) + 1


def positions(task: str) -> list[int]:
    """Position ids of a whole ``task`` sequence (prompt, target, ``<eos>``) as :func:`encode` lays it out.

    Keyframe cells get *spatial* ids (cell ``i`` -> ``i``, the same in both grids), structure and schema
    tokens ids from ``SIZE*SIZE`` on. A grid cell of ``S_t+1`` is compared with (TP) or copied from (SS)
    the same cell of ``S_t`` by matching equal position embeddings instead of learning a 25-cell shift.
    In SS the input that *predicts* cell ``i`` (``=>`` for cell 0, else target cell ``i-1``) carries id
    ``i``, because a decoder predicts the next token from the previous position.
    """
    from .world import SIZE

    n = SIZE * SIZE
    cells = list(range(n))
    schema = [n + 4 + k for k in range(4)]
    if task == "TP":
        return [n, n + 1, *cells, n + 2, *cells, n + 3, *schema, n + 8]
    return [n, n + 1, *cells, n + 2, *schema, 0, *cells[1:], n + 8, n + 9]


def schema_weights(v, transitions) -> np.ndarray:
    """Per-token loss weight (``len(vocab)``): schema tokens ``count^-1/2`` normalised to mean 1 over
    the schema targets of ``transitions``; every other token 1."""
    counts = Counter(tok for t in transitions for tok in t)
    w = np.ones(len(v), np.float32)
    raw = {tok: c ** -0.5 for tok, c in counts.items()}
    mean = sum(raw[tok] * c for tok, c in counts.items()) / sum(counts.values())
    for tok, r in raw.items():
        w[v.stoi[tok]] = r / mean
    return w


def make_data(v, seed: int, label: str, episodes: int, steps: int):
    from .._report import rng
    from .world import episode, state_tokens

    g = rng(seed, label)
    eps = [episode(g, steps) for _ in range(episodes)]
    items = [(state_tokens(s[i]), state_tokens(s[i + 1]), t[i]) for s, t in eps for i in range(steps)]
    return eps, items


def train_model(v, items, tasks, c: DynaviewConfig, seed: int, *, moe: bool, selective: bool, reweight: bool,
                steps: int, desc: str):
    """A fresh tiny decoder trained on ``tasks`` (``TP``/``SS``, drawn evenly)."""
    import torch

    from .._tiny import TinyConfig, TinyTransformer, pad_batch, train

    cfg = TinyConfig(vocab=len(v), d_model=c.d_model, n_layers=2, n_heads=4, max_len=64,
                     n_experts=2 if moe else 0, expert_by_type=moe, cross_topk=c.cross_topk if selective else 0)
    torch.manual_seed(seed)
    model = TinyTransformer(cfg)
    enc = {task: [encode(v, task, s0, s1, t) for s0, s1, t in items] for task in tasks}
    weight = torch.as_tensor(schema_weights(v, [t for _, _, t in items]) if reweight else np.ones(len(v), np.float32))

    pos = {task: positions(task) for task in tasks}

    def batches(rng):
        picks = [tasks[int(rng.integers(len(tasks)))] for _ in range(c.batch)]
        rows = [enc[task][int(rng.integers(len(items)))] for task in picks]
        ids = pad_batch([r[0] for r in rows])
        types = pad_batch([r[1] for r in rows])
        where = pad_batch([pos[task][:len(r[0])] for task, r in zip(picks, rows)])
        mask = np.zeros_like(ids)
        for i, r in enumerate(rows):
            mask[i, r[2]:len(r[0])] = 1
        return ids, types, where, mask

    def loss_fn(m, ids, types, where, mask):
        out = m(ids[:, :-1], token_type=types[:, :-1], positions=where[:, :-1])
        target = ids[:, 1:]
        keep = mask[:, 1:].float()
        logp = torch.log_softmax(out["logits"], -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        w = weight[target] * keep
        loss = -(logp * w).sum() / keep.sum().clamp(min=1)
        return loss + 0.01 * out["aux_loss"] if "aux_loss" in out else loss

    train(model, batches, steps=steps, lr=c.lr, seed=seed, loss_fn=loss_fn, progress=c.progress, desc=desc)
    return model


def decode(model, v, task: str, prompts: list[tuple[list[int], list[int]]], n_new: int) -> list[list[int]]:
    """Greedy decoding of ``n_new`` target tokens after each ``task`` prompt (ids, types): generated
    tokens get the target's types (schema for TP, state for SS; the model needs the types for routing
    and selective attention) and the positions of :func:`positions`."""
    import torch

    from .._tiny import pad_batch

    new_type = 1 if task == "TP" else 0
    layout = positions(task)
    ids = [list(p[0]) for p in prompts]
    types = [list(p[1]) for p in prompts]
    with torch.no_grad():
        for _ in range(n_new):
            lens = [len(r) for r in ids]
            out = model(torch.as_tensor(pad_batch(ids)), token_type=torch.as_tensor(pad_batch(types)),
                        positions=torch.as_tensor(pad_batch([layout[:n] for n in lens])))
            nxt = out["logits"][torch.arange(len(ids)), torch.as_tensor(lens) - 1].argmax(-1)
            for i in range(len(ids)):
                ids[i].append(int(nxt[i]))
                types[i].append(new_type)
    return [r[len(p[0]):] for r, p in zip(ids, prompts)]


def evaluate(tp_model, ss_model, v, items, episodes) -> dict:
    """Held-out accuracies, all exact match on greedy decodes.

    Returns a dict: ``schema`` (all four schema tokens of a transition predicted from its two states),
    ``schema_token`` (per token), ``next_state`` (the whole grid simulated from state + transition),
    ``cell`` (per cell of those grids), ``changed_cell`` (per cell that the transition changes: copying
    the input scores 0 here), ``rollout`` (state simulation fed its own predictions along a true
    transition sequence; final grid exact) and ``schema_by_event``.
    """
    from .world import SIZE, state_tokens

    n_cells = SIZE * SIZE
    pred_t = decode(tp_model, v, "TP", [encode(v, "TP", s0, s1, None)[:2] for s0, s1, _ in items], 4)
    pred_t = [[v.itos[i] for i in p] for p in pred_t]
    ok_t = [p == t for p, (_, _, t) in zip(pred_t, items)]
    pred_s = decode(ss_model, v, "SS", [encode(v, "SS", s0, None, t)[:2] for s0, _, t in items], n_cells)
    pred_s = [[v.itos[i] for i in p] for p in pred_s]
    ok_s = [p == s1 for p, (_, s1, _) in zip(pred_s, items)]
    cells = [a == b for p, (_, s1, _) in zip(pred_s, items) for a, b in zip(p, s1)]
    changed = [a == b for p, (s0, s1, _) in zip(pred_s, items) for a, b, c in zip(p, s1, s0) if b != c]
    by_event = {}
    for ok, (_, _, t) in zip(ok_t, items):
        by_event.setdefault(t[0][2:], []).append(ok)
    # rollouts: simulate every step of each episode from its own predictions
    states = [state_tokens(s[0]) for s, _ in episodes]
    for k in range(len(episodes[0][1])):
        prompts = [encode(v, "SS", st, None, t[k])[:2] for st, (_, t) in zip(states, episodes)]
        states = [[v.itos[i] for i in p] for p in decode(ss_model, v, "SS", prompts, n_cells)]
    ok_r = [st == state_tokens(s[-1]) for st, (s, _) in zip(states, episodes)]
    return {"schema": float(np.mean(ok_t)),
            "schema_token": float(np.mean([a == b for p, (_, _, t) in zip(pred_t, items) for a, b in zip(p, t)])),
            "next_state": float(np.mean(ok_s)), "cell": float(np.mean(cells)),
            "changed_cell": float(np.mean(changed)) if changed else float("nan"), "rollout": float(np.mean(ok_r)),
            "schema_by_event": {e: float(np.mean(o)) for e, o in sorted(by_event.items())}}


def run_seed(c: DynaviewConfig, seed: int) -> dict:
    """Train every variant and evaluate it on the same held-out transitions and rollouts."""
    v = vocab()
    _, train_items = make_data(v, seed, "train", c.episodes, c.steps)
    test_eps, test_items = make_data(v, seed, "test", c.eval_items // c.steps + 1, c.steps)
    test_items = test_items[:c.eval_items]
    rollouts = test_eps[:max(1, c.eval_items // 4)]
    out = {}
    for var in c.variants:
        kw = {"moe": var != "dense", "selective": var not in ("dense", "no-selective"), "reweight": var != "no-reweight"}
        if var == "separate":
            tp = train_model(v, train_items, ["TP"], c, seed, steps=c.train_steps // 2, desc="separate TP", **kw)
            ss = train_model(v, train_items, ["SS"], c, seed, steps=c.train_steps // 2, desc="separate SS", **kw)
        else:
            tp = ss = train_model(v, train_items, ["TP", "SS"], c, seed, steps=c.train_steps, desc=var, **kw)
        out[var] = evaluate(tp, ss, v, test_items, rollouts)
    return out


def run(config: DynaviewConfig) -> dict:
    """Every seed, every variant; writes metrics.json, results.md, metrics.png."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import headline, mean_std, write_metrics
    from .._seeds import run_seeds

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed = run_seeds(run_seed, c, c.seeds, c.jobs)
    results = {}
    for var in c.variants:
        results[var] = {}
        for key in METRICS:
            m, s = mean_std(per_seed[sd][var][key] for sd in c.seeds)
            results[var][key], results[var][f"{key}_std"] = m, s
        events = per_seed[c.seeds[0]][var]["schema_by_event"]
        results[var]["schema_by_event"] = {e: float(np.mean([per_seed[sd][var]["schema_by_event"].get(e, np.nan)
                                                             for sd in c.seeds])) for e in events}
    main = "full" if "full" in c.variants else c.variants[0]
    others = [x for x in c.variants if x != main]
    result = {
        "config": {k: v for k, v in asdict(c).items() if k not in ("out", "progress", "command", "jobs")},
        "results": results, "per_seed": {str(s): r for s, r in per_seed.items()},
        "headline": headline("schema accuracy (held-out transitions, all 4 tokens)", main, results[main]["schema"],
                             {x: results[x]["schema"] for x in others}, std=results[main]["schema_std"],
                             baseline_std={x: results[x]["schema_std"] for x in others},
                             budget={"optimizer_steps_per_variant": c.train_steps, "batch": c.batch,
                                     "training_transitions": c.episodes * c.steps},
                             seeds=list(c.seeds), direction="higher"),
        "seconds": time.perf_counter() - t0,
    }
    with atomic_output_dir(c.out) as stage:
        write_metrics(stage, result, c.command)
        (stage / "results.md").write_text(results_table(result, c.command))
        _plot(stage, results)
    if c.progress:
        print(results_table(result, c.command))
    return result


def results_table(result: dict, command: str | None) -> str:
    """Markdown: every accuracy of :func:`evaluate` per variant (mean ± std over seeds)."""
    from .._report import markdown_table

    rows = [(var, *[f"{r[k]:.3f} ± {r[k + '_std']:.3f}" for k in METRICS],
             f"{r['schema_by_event'].get('wind', float('nan')):.2f}")
            for var, r in result["results"].items()]
    text = markdown_table(["variant", *METRIC_NAMES, "schema acc (wind, rare)"], rows,
                          caption=f"Seeds {result['headline']['seeds']}; equal optimiser steps per variant; "
                          "greedy decoding, exact match (a grid: all cells; a transition: all four tokens).")
    return text + (f"\nCommand: `{command}`\n" if command else "")


def _plot(stage, results):
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    keys = METRICS
    grouped_bars(ax, list(keys), {v: [r[k] for k in keys] for v, r in results.items()},
                 errors={v: [r[k + "_std"] for k in keys] for v, r in results.items()}, rotation=0)
    ax.set_ylim(0, 1)
    ax.set_ylabel("exact-match accuracy")
    ax.legend(fontsize=8)
    save(fig, stage / "metrics.png")
