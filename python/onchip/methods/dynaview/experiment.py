"""The world model, its training and evaluation, and the run (in the spirit of DynaVieW).

Two tasks share one tiny decoder (:mod:`onchip.methods._tiny`), told apart by a task token:
transition prediction ``TP S_t | S_t+1 => T`` and state simulation ``SS S_t | T => S_t+1``. Tokens
carry a type (0 = state and structure, 1 = schema); the full model routes each type to its own FFN
expert and lets a query attend only to its ``cross_topk`` best keys of the other type (selective
attention across experts); schema targets are weighted by inverse square-root frequency of their
token (mean weight 1 over schema targets). Grid cells carry spatial position ids shared by the two
keyframes (:func:`positions`). Metrics (:func:`evaluate`): schema accuracy (all four tokens right) and
per token, next-state accuracy (whole grid right), per cell and per changed cell, k-step rollout
consistency (state simulation fed its own predictions along a true transition sequence; final grid right),
and the same schema / next-state accuracies on a separate set of rare, identifiable ``wind`` transitions.
Every arm trains for the same optimiser steps; validation curves are recorded along the way. The
positive control (:func:`run_seed` with ``control=True``) plants ``wind`` at a lower frequency and
compares the re-weighted model with its unweighted ablation on the rare set.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .._report import need, recorded_config
from . import VARIANTS

#: the accuracies of :func:`evaluate`, in table order, and their column names
METRICS = ("schema", "schema_common", "schema_token", "next_state", "cell", "changed_cell", "rollout",
           "rare_schema", "rare_next_state")
METRIC_NAMES = ("schema acc", "schema acc (common events)", "schema token acc", "next-state acc", "cell acc",
                "changed-cell acc", "rollout consistency", "rare-set schema acc (wind)", "rare-set next-state acc")
#: the validation curves recorded during training (:func:`train_model`'s ``curve``)
CURVE_METRICS = ("schema", "next_state", "rare_schema")
#: the arms of the positive control: the schema re-weighting and its ablation
CONTROL_VARIANTS = ("full", "no-reweight")


@dataclass(frozen=True)
class DynaviewConfig:
    """One run.

    Attributes:
        variants: subset of :data:`~onchip.methods.dynaview.VARIANTS`.
        episodes: training episodes (each ``steps`` transitions).
        steps: transitions per episode (also the rollout length k).
        train_steps: optimiser steps per model (``separate`` trains two models of half as many).
        eval_items: held-out transitions for schema / next-state accuracy; a quarter of it as rollouts.
        rare_items: held-out identifiable ``wind`` transitions (the rare set, scored separately).
        wind_p: probability of the rare ``wind`` event in training and the common test set.
        control, control_wind_p: run the positive control (``full`` vs ``no-reweight``) with ``wind``
            planted at ``control_wind_p`` instead.
        curve_points: validation points per training run (on ``curve_items`` held-out transitions and as
            many rare ones), for the curves that show whether training has flattened.
        d_model, cross_topk: model width and the selective-attention k.
        batch, lr: sequences per optimiser step and the peak AdamW learning rate.
        seeds, out, progress, command: as every command.
        jobs: processes that run the seeds (1 = in this process; the results do not depend on it).
    """

    variants: tuple[str, ...] = VARIANTS
    episodes: int = 600
    steps: int = 3
    train_steps: int = 5000
    eval_items: int = 200
    rare_items: int = 100
    wind_p: float = 0.05
    control: bool = True
    control_wind_p: float = 0.015
    curve_points: int = 12
    curve_items: int = 60
    d_model: int = 32
    cross_topk: int = 4
    batch: int = 32
    lr: float = 1e-2
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
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
        need(not self.control or len(self.seeds) >= 2, "seeds", list(self.seeds),
             "the positive control's paired comparison needs at least 2 seeds (or no control)")
        need(0 <= self.wind_p < 1, "wind_p", self.wind_p, "must be in [0, 1)")
        need(0 < self.control_wind_p < 1, "control_wind_p", self.control_wind_p, "must be in (0, 1)")
        for name, lo in (("episodes", 1), ("steps", 1), ("train_steps", 2), ("eval_items", 4), ("cross_topk", 1),
                         ("batch", 1), ("rare_items", 1), ("curve_points", 0), ("curve_items", 1)):
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
    the schema targets of ``transitions``; every other token 1.

    A guess from the abstract's "schema token re-weighted loss". The public code (``schema2weight`` in
    its ``modeling/data/data_utils.py``) does something else: the JSON skeleton tokens of a transition
    weigh 0.1 and its content tokens 1. Here a schema token fuses key and value, so that loss would be
    uniform (the ``no-reweight`` arm)."""
    counts = Counter(tok for t in transitions for tok in t)
    w = np.ones(len(v), np.float32)
    raw = {tok: c ** -0.5 for tok, c in counts.items()}
    mean = sum(raw[tok] * c for tok, c in counts.items()) / sum(counts.values())
    for tok, r in raw.items():
        w[v.stoi[tok]] = r / mean
    return w


def make_data(v, seed: int, label: str, episodes: int, steps: int, wind_p: float = 0.05):
    """``episodes`` random episodes of ``steps`` transitions (``wind`` at ``wind_p``) drawn from
    ``rng(seed, label)``, and their transitions as ``(S_t tokens, S_t+1 tokens, schema)`` items."""
    from .._report import rng
    from .world import episode, event_probabilities, state_tokens

    g = rng(seed, label)
    p = event_probabilities(wind_p)
    eps = [episode(g, steps, p) for _ in range(episodes)]
    items = [(state_tokens(s[i]), state_tokens(s[i + 1]), t[i]) for s, t in eps for i in range(steps)]
    return eps, items


def rare_data(seed: int, label: str, n: int):
    """``n`` identifiable ``wind`` transitions (:func:`~.world.wind_transitions`) as items."""
    from .._report import rng
    from .world import WIND, state_tokens, wind_transitions

    return [(state_tokens(a), state_tokens(b), list(WIND)) for a, b in wind_transitions(rng(seed, label), n)]


def train_model(v, items, tasks, c: DynaviewConfig, seed: int, *, moe: bool, selective: bool, reweight: bool,
                steps: int, desc: str, curve=None):
    """A fresh tiny decoder trained on ``tasks`` (``TP``/``SS``, drawn evenly) for ``steps`` AdamW steps.

    Args:
        v, items: the vocabulary and the training items of :func:`make_data`.
        moe, selective, reweight: type-routed experts, selective cross-expert attention, schema
            re-weighting (:func:`schema_weights`) on or off.
        curve: optional ``curve(model, step)`` called (under ``torch.no_grad``, model in eval mode)
            before the steps ``0, steps/curve_points, ...`` and after the last: the validation curve.
    """
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

    every = max(1, steps // c.curve_points) if c.curve_points else 0
    done = [0]

    def loss_fn(m, ids, types, where, mask):
        if curve is not None and every and done[0] % every == 0:
            with torch.no_grad():
                m.eval()
                curve(m, done[0])
                m.train()
        done[0] += 1
        out = m(ids[:, :-1], token_type=types[:, :-1], positions=where[:, :-1])
        target = ids[:, 1:]
        keep = mask[:, 1:].float()
        logp = torch.log_softmax(out["logits"], -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        w = weight[target] * keep
        loss = -(logp * w).sum() / keep.sum().clamp(min=1)
        return loss + 0.01 * out["aux_loss"] if "aux_loss" in out else loss

    train(model, batches, steps=steps, lr=c.lr, seed=seed, loss_fn=loss_fn, progress=c.progress, desc=desc)
    if curve is not None and every:
        with torch.no_grad():
            curve(model, steps)
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


def schema_accuracy(model, v, items) -> list[bool]:
    """Per item of ``items``: all four schema tokens predicted right (greedy) from its two states."""
    pred = decode(model, v, "TP", [encode(v, "TP", s0, s1, None)[:2] for s0, s1, _ in items], 4)
    return [[v.itos[i] for i in p] == list(t) for p, (_, _, t) in zip(pred, items)]


def state_accuracy(model, v, items) -> list[bool]:
    """Per item of ``items``: the whole next grid simulated right (greedy) from its state and schema."""
    from .world import SIZE

    pred = decode(model, v, "SS", [encode(v, "SS", s0, None, t)[:2] for s0, _, t in items], SIZE * SIZE)
    return [[v.itos[i] for i in p] == list(s1) for p, (_, s1, _) in zip(pred, items)]


def evaluate(tp_model, ss_model, v, items, episodes, rare) -> dict:
    """Held-out accuracies, all exact match on greedy decodes.

    Args:
        tp_model, ss_model: the models that predict transitions and simulate states (the same one
            unless ``separate``).
        items: held-out transitions at the training frequencies; ``episodes``: rollout episodes;
        rare: identifiable ``wind`` transitions (:func:`rare_data`), scored on their own.

    Returns a dict: ``schema`` (all four schema tokens of a transition predicted from its two states),
    ``schema_common`` (the same on the transitions of ``items`` that are not ``wind``),
    ``schema_token`` (per token), ``next_state`` (the whole grid simulated from state + transition),
    ``cell`` (per cell of those grids), ``changed_cell`` (per cell that the transition changes: copying
    the input scores 0 here), ``rollout`` (state simulation fed its own predictions along a true
    transition sequence; final grid exact), ``schema_by_event``, and on ``rare``: ``rare_schema``,
    ``rare_next_state`` and ``rare_event`` (the event token alone right).
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
    rare_pred = decode(tp_model, v, "TP", [encode(v, "TP", s0, s1, None)[:2] for s0, s1, _ in rare], 1)
    return {"schema": float(np.mean(ok_t)),
            "schema_common": _mean([ok for ok, (_, _, t) in zip(ok_t, items) if t[0] != "E:wind"]),
            "schema_token": float(np.mean([a == b for p, (_, _, t) in zip(pred_t, items) for a, b in zip(p, t)])),
            "next_state": float(np.mean(ok_s)), "cell": float(np.mean(cells)),
            "changed_cell": float(np.mean(changed)) if changed else float("nan"), "rollout": float(np.mean(ok_r)),
            "schema_by_event": {e: float(np.mean(o)) for e, o in sorted(by_event.items())},
            "rare_schema": float(np.mean(schema_accuracy(tp_model, v, rare))),
            "rare_next_state": float(np.mean(state_accuracy(ss_model, v, rare))),
            "rare_event": float(np.mean([v.itos[p[0]] == "E:wind" for p in rare_pred]))}


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def run_seed(c: DynaviewConfig, seed: int, control: bool = False) -> dict:
    """Train every variant (``control``: the :data:`CONTROL_VARIANTS` with ``wind`` planted at
    ``c.control_wind_p``) for ``c.train_steps`` steps and evaluate it on the same held-out transitions,
    rollouts and rare ``wind`` set.

    Returns:
        ``{variant: evaluate(...) + {"curve": {"step": [...], metric: [...]}, "train_seconds": s}}``.
    """
    import time as _time

    v = vocab()
    wind_p = c.control_wind_p if control else c.wind_p
    pre = "control-" if control else ""  # the control draws its own data
    _, train_items = make_data(v, seed, pre + "train", c.episodes, c.steps, wind_p)
    test_eps, test_items = make_data(v, seed, pre + "test", c.eval_items // c.steps + 1, c.steps, wind_p)
    test_items = test_items[:c.eval_items]
    rollouts = test_eps[:max(1, c.eval_items // 4)]
    rare = rare_data(seed, pre + "rare", c.rare_items)
    _, val_items = make_data(v, seed, pre + "validation", c.curve_items // c.steps + 1, c.steps, wind_p)
    val_items, val_rare = val_items[:c.curve_items], rare_data(seed, pre + "validation-rare", c.curve_items)
    out = {}
    for var in (CONTROL_VARIANTS if control else c.variants):
        curve = {"step": [], **{k: [] for k in CURVE_METRICS}}
        spent = [0.0]

        def record(m, step, tasks=("TP", "SS"), offset=0, curve=curve, spent=spent):
            t = _time.process_time()
            curve["step"].append(step + offset)
            curve["schema"].append(float(np.mean(schema_accuracy(m, v, val_items))) if "TP" in tasks else None)
            curve["next_state"].append(float(np.mean(state_accuracy(m, v, val_items))) if "SS" in tasks else None)
            curve["rare_schema"].append(float(np.mean(schema_accuracy(m, v, val_rare))) if "TP" in tasks else None)
            spent[0] += _time.process_time() - t

        kw = {"moe": var != "dense", "selective": var not in ("dense", "no-selective"), "reweight": var != "no-reweight"}
        t0 = _time.process_time()
        if var == "separate":
            half = c.train_steps // 2
            tp = train_model(v, train_items, ["TP"], c, seed, steps=half, desc="separate TP",
                             curve=lambda m, k: record(m, k, ("TP",)), **kw)
            ss = train_model(v, train_items, ["SS"], c, seed, steps=c.train_steps - half, desc="separate SS",
                             curve=lambda m, k, half=half: record(m, k, ("SS",), half), **kw)
        else:
            tp = ss = train_model(v, train_items, ["TP", "SS"], c, seed, steps=c.train_steps, desc=var,
                                  curve=record, **kw)
        seconds = _time.process_time() - t0 - spent[0]  # training only, the curve's evaluations left out
        out[var] = {**evaluate(tp, ss, v, test_items, rollouts, rare), "curve": curve, "train_cpu_seconds": seconds}
    return out


def _run_seed_control(c: DynaviewConfig, seed: int) -> dict:
    return run_seed(c, seed, control=True)


def run(config: DynaviewConfig) -> dict:
    """Every seed, every variant, and the positive control; writes metrics.json, results.md,
    metrics.png and curves.png; returns metrics.json's content."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import headline, paired_difference, positive_control, write_metrics
    from .._seeds import run_seeds

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)  # tiny tensors; the spawned seed processes are pinned to 1 as well
    t0 = time.perf_counter()
    per_seed = run_seeds(run_seed, c, c.seeds, c.jobs)
    control = run_seeds(_run_seed_control, c, c.seeds, c.jobs) if c.control else None
    results = _summary(per_seed, c.seeds, c.variants)
    main = "full" if "full" in c.variants else c.variants[0]
    others = [x for x in c.variants if x != main]

    def values(ps, var, key):
        return [ps[sd][var][key] for sd in c.seeds]

    paired = ({x: paired_difference(values(per_seed, main, "schema"), values(per_seed, x, "schema")) for x in others}
              if len(c.seeds) >= 2 else None)
    paired_rare = ({x: paired_difference(values(per_seed, main, "rare_schema"), values(per_seed, x, "rare_schema"))
                    for x in others} if len(c.seeds) >= 2 else None)
    result = {
        "config": recorded_config(c),
        "threads": {"torch_threads_per_process": torch.get_num_threads(), "processes": min(c.jobs, len(c.seeds))},
        "headline": headline("schema accuracy (held-out transitions, all 4 tokens)", main, results[main]["schema"],
                             {x: results[x]["schema"] for x in others}, std=results[main]["schema_std"],
                             baseline_std={x: results[x]["schema_std"] for x in others},
                             budget={"optimizer_steps_per_variant": c.train_steps, "batch": c.batch,
                                     "training_transitions": c.episodes * c.steps,
                                     "note": "equal optimiser steps of equal batches for every arm (separate: "
                                             "half per task model); CPU seconds differ and are reported"},
                             seeds=list(c.seeds), direction="higher", paired=paired),
        "paired_rare_schema": paired_rare,
    }
    if control is not None:
        result["positive_control"] = positive_control(
            f"the rare 'wind' event planted at probability {c.control_wind_p} in training (main run: {c.wind_p}); "
            f"{c.rare_items} identifiable wind transitions scored", *CONTROL_VARIANTS,
            values(control, "full", "rare_schema"), values(control, "no-reweight", "rare_schema"),
            seeds=c.seeds, metric="rare-set schema accuracy (identifiable wind, all 4 tokens)")
        result["control_results"] = _summary(control, c.seeds, CONTROL_VARIANTS)
        result["control_per_seed"] = {str(s): r for s, r in control.items()}
    result.update({"results": results, "per_seed": {str(s): r for s, r in per_seed.items()},
                   "seconds": time.perf_counter() - t0})
    with atomic_output_dir(c.out) as stage:
        write_metrics(stage, result, c.command)
        (stage / "results.md").write_text(results_table(result, c.command))
        _plot(stage, results)
        _plot_curves(stage, result)
    if c.progress:
        print(results_table(result, c.command))
    return result


def _summary(per_seed: dict, seeds, variants) -> dict:
    from .._report import mean_std

    results = {}
    for var in variants:
        results[var] = {}
        for key in (*METRICS, "rare_event", "train_cpu_seconds"):
            m, s = mean_std(per_seed[sd][var][key] for sd in seeds)
            results[var][key], results[var][f"{key}_std"] = m, s
        events = sorted({e for sd in seeds for e in per_seed[sd][var]["schema_by_event"]})
        results[var]["schema_by_event"] = {e: float(np.nanmean([per_seed[sd][var]["schema_by_event"].get(e, np.nan)
                                                                for sd in seeds])) for e in events}
    return results


def results_table(result: dict, command: str | None) -> str:
    """Markdown: every accuracy of :func:`evaluate` per variant (mean ± std over seeds), the per-seed
    schema accuracies with the paired differences, the training CPU time, and the positive control."""
    from .._report import markdown_table, paired_line

    seeds, variants = result["headline"]["seeds"], list(result["results"])
    rows = [(var, *[f"{r[k]:.3f} ± {r[k + '_std']:.3f}" for k in METRICS]) for var, r in result["results"].items()]
    text = markdown_table(["variant", *METRIC_NAMES], rows,
                          caption=f"Seeds {seeds}; {result['config']['train_steps']} optimiser steps of "
                          f"{result['config']['batch']} sequences per variant; greedy decoding, exact match "
                          "(a grid: all cells; a transition: all four tokens). The rare set: "
                          f"{result['config']['rare_items']} identifiable wind transitions (wind moves >= 2 objects).")
    for key, name in (("schema", "schema accuracy"), ("rare_schema", "rare-set schema accuracy")):
        text += "\n" + markdown_table(["seed", *variants], [[sd, *[f"{result['per_seed'][str(sd)][v][key]:.3f}"
                                                                    for v in variants]] for sd in seeds],
                                      caption=f"Per seed: {name}")
    h = result["headline"]
    for label, pairs in (("schema accuracy", h.get("paired")), ("rare-set schema accuracy",
                                                                result.get("paired_rare_schema"))):
        if pairs:
            text += (f"\nPaired difference {h['method']} - arm, {label} (mean [ci95] over seeds, Student t; "
                     "an interval that holds zero is no difference):\n\n"
                     + "\n".join(f"- {paired_line(n, p)}" for n, p in pairs.items()) + "\n")
    text += _curve_table(result)
    text += "\n" + markdown_table(["variant", "training CPU s per seed (curve evaluations excluded)"],
                                  [[v, f"{r['train_cpu_seconds']:.0f} ± {r['train_cpu_seconds_std']:.0f}"]
                                   for v, r in result["results"].items()],
                                  caption=f"Compute: equal optimiser steps; threads {result['threads']}")
    pc = result.get("positive_control")
    if pc:
        cr = result["control_results"]
        text += (f"\n## Positive control\n\nSetting: {pc['setting']}.\n\n"
                 + markdown_table(["seed", pc["method"], pc["ablation"]],
                                  [[sd, f"{m:.3f}", f"{a:.3f}"] for sd, m, a in
                                   zip(pc["seeds"], pc["method_values"], pc["ablation_values"])],
                                  caption=f"Per seed: {pc['metric']}")
                 + "\n" + markdown_table(["variant", *METRIC_NAMES],
                                         [(v, *[f"{r[k]:.3f} ± {r[k + '_std']:.3f}" for k in METRICS])
                                          for v, r in cr.items()], caption="Positive control, every metric")
                 + f"\n{paired_line(pc['method'] + ' - ' + pc['ablation'], pc['paired'])}. "
                 + ("The experiment sees the re-weighting (interval excludes zero)." if pc["sensitive"] else
                    "The interval holds zero: this experiment does not see the schema re-weighting.") + "\n")
    return text + (f"\nCommand: `{command}`\n" if command else "")


def curve_summary(curves: list[dict], key: str, fractions=(0.5, 0.75, 1.0)) -> list[float]:
    """Mean over seeds of one validation curve (``key`` of :data:`CURVE_METRICS`) at the recorded point
    nearest each fraction of the model's steps (``separate``: of the model that produces ``key``);
    NaN where the curve has no such point."""
    out = []
    for f in fractions:
        vals = []
        for cv in curves:
            pts = [(st, x) for st, x in zip(cv["step"], cv[key]) if x is not None]
            if not pts:
                continue
            lo, hi = pts[0][0], pts[-1][0]
            vals.append(min(pts, key=lambda p: abs(p[0] - (lo + f * (hi - lo))))[1])
        out.append(float(np.mean(vals)) if vals else float("nan"))
    return out


def _curve_table(result: dict) -> str:
    from .._report import markdown_table

    seeds = result["headline"]["seeds"]
    runs = {v: [result["per_seed"][str(sd)][v]["curve"] for sd in seeds] for v in result["results"]}
    runs.update({f"control {v}": [result["control_per_seed"][str(sd)][v]["curve"] for sd in seeds]
                 for v in result.get("control_results", {})})
    if not any(cv["step"] for curves in runs.values() for cv in curves):
        return ""
    rows = [[label, *[" / ".join(f"{x:.2f}" for x in curve_summary(curves, key)) for key in CURVE_METRICS]]
            for label, curves in runs.items()]
    return "\n" + markdown_table(["variant", "val schema acc", "val next-state acc", "val rare-set schema acc"], rows,
                                 caption="Validation curves (mean over seeds) at 1/2 / 3/4 / all of the steps: "
                                 "flat when the last two agree (the cosine learning rate is near 0 by then)")


def _plot_curves(stage, result):
    """curves.png: the validation curves (greedy exact match on held-out items) per variant."""
    from onchip.plotting import pyplot

    from .._report import save

    plt = pyplot()
    runs = {v: [result["per_seed"][str(sd)][v]["curve"] for sd in result["headline"]["seeds"]]
            for v in result["results"]}
    for v in result.get("control_results", {}):
        runs[f"control {v}"] = [result["control_per_seed"][str(sd)][v]["curve"] for sd in result["headline"]["seeds"]]
    fig, axes = plt.subplots(1, len(CURVE_METRICS), figsize=(12, 3.8))
    for ax, key, name in zip(axes, CURVE_METRICS, ("schema acc", "next-state acc", "rare-set schema acc (wind)")):
        for i, (label, curves) in enumerate(runs.items()):
            steps = np.asarray(curves[0]["step"])
            vals = np.asarray([[np.nan if x is None else x for x in cv[key]] for cv in curves], dtype=float)
            if not curves[0]["step"] or np.isnan(vals).all():
                continue
            ok = ~np.isnan(vals).all(0)
            ax.plot(steps[ok], np.nanmean(vals[:, ok], 0), label=label, color=f"C{i}",
                    ls="--" if label.startswith("control") else "-")
        ax.set_title(f"validation {name}", fontsize=9)
        ax.set_xlabel("optimiser step (separate: TP model, then SS model)")
        ax.set_ylim(0, 1)
    axes[0].legend(fontsize=7)
    save(fig, stage / "curves.png")


def _plot(stage, results):
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    keys = ("schema", "schema_common", "next_state", "changed_cell", "rollout", "rare_schema", "rare_next_state")
    grouped_bars(ax, list(keys), {v: [r[k] for k in keys] for v, r in results.items()},
                 errors={v: [r[k + "_std"] for k in keys] for v, r in results.items()}, rotation=0)
    ax.set_ylim(0, 1)
    ax.set_ylabel("exact-match accuracy")
    ax.legend(fontsize=8)
    save(fig, stage / "metrics.png")
