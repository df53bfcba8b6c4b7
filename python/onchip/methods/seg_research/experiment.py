"""The Seg-ReSearch experiment: J&F on held-out questions about facts never seen in training, by
number of hops, for GRPO with the hierarchical reward against outcome-only reward, a rigid step-wise
reward and a policy that may not search - at the same number of rollouts per arm.

Per seed: a training knowledge base and a held-out one (new invented names and facts), one BM25
index over both. Clubs have aliases and the person step may use either relation word, so a question
has several valid search routes, of which the annotated gold steps are one (drawn at random): the
rigid step-wise reward then penalises valid routes. Each arm trains a fresh policy by GRPO (``iters``
x ``batch`` questions x ``group`` rollouts, the same for every arm) and is evaluated greedily on every
held-out question with a fresh scene, every ``eval_every`` iterations (the learning-curve area is the
mean held-out J&F over those checkpoints) and at the end. The positive control runs the hierarchical
reward against its ablation (outcome only) where the process reward must matter: questions that
need a search, in scenes with ``control_objects`` objects, so the outcome reward alone is sparse.
Writes ``metrics.json``, ``results.md``, ``jf_by_hops.png``, ``curves.png`` and ``training.png``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import need
from . import ARMS


@dataclass(frozen=True)
class SegResearchConfig:
    """One run (defaults = the committed run).

    Attributes:
        arms: subset of :data:`~onchip.methods.seg_research.ARMS`.
        train_clubs, test_clubs: clubs in the training / held-out knowledge base (4 questions each:
            mascot and emblem, one and two hops).
        iters: GRPO iterations.
        batch: questions per iteration.
        group: rollouts per question (GRPO group size, >= 2).
        max_turns: turns per rollout (searches + the answer).
        lr: Adam learning rate.
        seeds: the seeds (>= 2: the paired comparisons need two).
        aliases: several valid routes per question (club aliases, either relation word for the person
            step; see :func:`.world.build_kb`); False: one route, the annotated one.
        n_objects: objects per scene (the target and its distractors), 2-6.
        eval_every: held-out evaluation every this many iterations (learning-curve area).
        control: run the positive control.
        control_hops: question hops of the positive control (train and evaluation).
        control_objects: objects per scene in the positive control, 2-6.
        out, progress, command: as every command.

    Raises:
        ValueError: a field out of range, named in the message.
    """

    arms: tuple[str, ...] = ARMS
    train_clubs: int = 40
    test_clubs: int = 15
    iters: int = 40
    batch: int = 4
    group: int = 8
    max_turns: int = 3
    lr: float = 0.01
    seeds: tuple[int, ...] = tuple(range(10))
    aliases: bool = True
    n_objects: int = 4
    eval_every: int = 10
    control: bool = True
    control_hops: tuple[int, ...] = (1,)
    control_objects: int = 6
    out: str = "out/seg-research"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "arms", tuple(self.arms))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "control_hops", tuple(self.control_hops))
        need(bool(self.arms) and all(a in ARMS for a in self.arms), "arms", list(self.arms),
             f"choose from {', '.join(ARMS)}")
        need(len(self.seeds) >= 2 and all(s >= 0 for s in self.seeds) and len(set(self.seeds)) == len(self.seeds),
             "seeds", list(self.seeds), "two or more distinct seeds >= 0 (the comparisons are paired over seeds)")
        need(bool(self.control_hops) and set(self.control_hops) <= {1, 2}, "control_hops", list(self.control_hops),
             "a non-empty subset of 1, 2")
        for name in ("n_objects", "control_objects"):
            need(2 <= getattr(self, name) <= 6, name, getattr(self, name), "must be in 2..6")
        for name, lo in (("train_clubs", 2), ("test_clubs", 1), ("iters", 1), ("batch", 1), ("group", 2),
                         ("max_turns", 1), ("eval_every", 1)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(self.max_turns <= 6, "max_turns", self.max_turns, "must be <= 6")
        need(0 < self.lr < 1, "lr", self.lr, "must be in (0, 1)")


def checkpoints(c: SegResearchConfig) -> list[int]:
    """The iterations (counted after the step) at which held-out J&F is measured for the
    learning-curve area: every ``eval_every`` and the last."""
    return sorted({*range(c.eval_every, c.iters + 1, c.eval_every), c.iters})


def train_arm(arm: str, c: SegResearchConfig, seed: int, questions, retriever, *, n_objects: int,
              on_checkpoint=None) -> tuple[object, list[float], list[float]]:
    """GRPO on the training questions with the arm's reward (Seg-ReSearch sec. 3.3: group-normalised
    advantages, ``c.group`` rollouts per question, ``c.batch`` questions per step, ``c.iters`` steps).

    Args:
        arm: one of :data:`~onchip.methods.seg_research.ARMS` (names the reward; "no-search" also
            forbids searching).
        questions: the training questions; retriever: the search tool.
        n_objects: objects per training scene.
        on_checkpoint: called with the policy at every iteration of :func:`checkpoints`; its return
            values are collected.

    Returns:
        ``(policy, mean training reward per iteration, checkpoint values)``.
    """
    import torch
    from onchip.progress import progress_bar

    from .._report import rng
    from .._rl import group_advantages, grpo_loss
    from .policy import make_policy, predicted_mask, rollout
    from .reward import outcome_reward, total_reward
    from .world import render_scene

    torch.manual_seed(seed)
    policy = make_policy()
    opt = torch.optim.Adam(policy.parameters(), lr=c.lr)
    g = rng(seed, "grpo", arm)
    curve, points = [], []
    marks = set(checkpoints(c))
    for it in progress_bar(range(1, c.iters + 1), desc=f"GRPO {arm} seed {seed}", disable=not c.progress, leave=False):
        picks = g.integers(0, len(questions), c.batch)
        rewards, logps = [], []
        for qi in picks:
            q = questions[int(qi)]
            scene, k = render_scene(g, q.answer, n_objects=n_objects)
            row = []
            for _ in range(c.group):
                t = rollout(policy, q, scene, retriever, max_turns=c.max_turns, rng=g, allow_search=arm != "no-search")
                out = outcome_reward(t.answer, predicted_mask(scene, t), scene.mask(k), scene.box(k), scene.point(k))
                row.append(total_reward(arm, out, t.queries, q.gold_steps, t.answer is not None, routes=q.routes))
                logps.append(t.logp)
            rewards.append(row)
        adv = torch.as_tensor(group_advantages(rewards).ravel(), dtype=torch.float32)
        logp = torch.stack(logps)
        loss = grpo_loss(logp, logp.detach(), adv)
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve.append(float(np.mean(rewards)))
        if on_checkpoint is not None and it in marks:
            points.append(on_checkpoint(policy))
    return policy, curve, points


def evaluate(policy, c: SegResearchConfig, seed: int, questions, retriever, allow_search: bool, *,
             n_objects: int | None = None) -> dict:
    """Greedy rollouts on every question (one fresh scene each, the same scenes for every arm and
    checkpoint of a seed).

    Returns:
        Per hops present (``"1"``, ``"2"``) and ``"all"``: J&F (DAVIS, in [0, 1]), answer accuracy,
        mean searches, the share of questions whose searches were exactly the annotated gold steps
        (``on_gold``), the share whose searches read a document stating the asked fact (``found``: the
        relation word and the answer's colour and shape in one retrieved document, by whatever route),
        and ``n``.
    """
    from .._report import rng
    from .policy import predicted_mask, rollout
    from .world import j_and_f, render_scene

    g = rng(seed, "eval-scenes")
    rows: dict = {}
    for q in questions:
        scene, k = render_scene(g, q.answer, n_objects=n_objects or c.n_objects)
        t = rollout(policy, q, scene, retriever, max_turns=c.max_turns, allow_search=allow_search, grad=False)
        j, f = j_and_f(predicted_mask(scene, t), scene.mask(k))
        rows.setdefault(q.hops, []).append((0.5 * (j + f), j, f, float(t.picked == k), len(t.queries),
                                            float(t.queries == q.gold_steps), _found(q, t.docs)))
    keys = ("jf", "j", "f", "accuracy", "searches", "on_gold", "found")
    out = {}
    for h, r in sorted(rows.items()):
        a = np.asarray(r)
        out[str(h)] = {**{key: float(a[:, i].mean()) for i, key in enumerate(keys)}, "n": len(r)}
    a = np.asarray([x for r in rows.values() for x in r])
    out["all"] = {**{key: float(a[:, i].mean()) for i, key in enumerate(keys)}, "n": len(a)}
    return out


def _found(q, docs) -> float:
    from .world import tokenize

    rel = q.text.split()[2]
    return float(any({rel, *q.answer} <= set(tokenize(d)) for d in docs))


def _world(c: SegResearchConfig, seed: int):
    from .._report import rng
    from .world import Retriever, build_kb

    taken: set = set()
    docs_tr, q_tr = build_kb(rng(seed, "kb-train"), c.train_clubs, taken, aliases=c.aliases)
    docs_te, q_te = build_kb(rng(seed, "kb-test"), c.test_clubs, taken, aliases=c.aliases)
    return q_tr, q_te, Retriever(docs_tr + docs_te)


def _train_and_score(arm, c, seed, q_tr, q_te, retriever, n_objects):
    allow = arm != "no-search"

    def score(policy):
        return evaluate(policy, c, seed, q_te, retriever, allow, n_objects=n_objects)["all"]["jf"]

    policy, curve, points = train_arm(arm, c, seed, q_tr, retriever, n_objects=n_objects, on_checkpoint=score)
    res = evaluate(policy, c, seed, q_te, retriever, allow, n_objects=n_objects)
    res["curve"] = points
    res["area"] = float(np.mean(points))
    return res, curve


def run(config: SegResearchConfig) -> dict:
    """Train and evaluate every arm for every seed, then the positive control, and write the output
    folder; returns metrics.json's content."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import (
        headline,
        mean_std,
        paired_difference,
        positive_control,
        recorded_config,
        write_metrics,
    )

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed, curves, control = {}, {}, {}
    control_arms = ("hierarchical", "outcome")
    rigidity: dict = {}
    for seed in c.seeds:
        q_tr, q_te, retriever = _world(c, seed)
        per_seed[seed] = {}
        for arm in c.arms:
            per_seed[seed][arm], curve = _train_and_score(arm, c, seed, q_tr, q_te, retriever, c.n_objects)
            curves.setdefault(arm, []).append(curve)
        if c.control and "stepwise" in c.arms:
            rigidity[seed] = _train_and_score("stepwise-any", c, seed, q_tr, q_te, retriever, c.n_objects)[0]
        if c.control:
            keep = [q for q in q_tr if q.hops in c.control_hops], [q for q in q_te if q.hops in c.control_hops]
            control[seed] = {arm: _train_and_score(arm, c, seed, *keep, retriever, c.control_objects)[0]
                             for arm in control_arms}
        if c.progress:
            line = ", ".join(f"{a} J&F {per_seed[seed][a]['all']['jf']:.3f} area {per_seed[seed][a]['area']:.3f}"
                             for a in c.arms)
            if c.control:
                line += "; control " + ", ".join(f"{a} {control[seed][a]['all']['jf']:.3f}" for a in control_arms)
            print(f"seed {seed}: {line} ({time.perf_counter() - t0:.0f} s)", flush=True)

    def values(table, arm, key="jf", part="all"):
        return [table[s][arm][part][key] if key != "area" else table[s][arm]["area"] for s in c.seeds]

    results = {}
    for arm in c.arms:
        results[arm] = {}
        for part in per_seed[c.seeds[0]][arm]:
            if part in ("curve", "area"):
                continue
            results[arm][part] = {}
            for key in per_seed[c.seeds[0]][arm][part]:
                m, s = mean_std(per_seed[sd][arm][part][key] for sd in c.seeds)
                results[arm][part][key], results[arm][part][f"{key}_std"] = m, s
        results[arm]["area"], results[arm]["area_std"] = mean_std(values(per_seed, arm, "area"))
    main = "hierarchical" if "hierarchical" in c.arms else c.arms[0]
    others = [a for a in c.arms if a != main]
    rollouts = c.iters * c.batch * c.group
    paired = {a: paired_difference(values(per_seed, main), values(per_seed, a)) for a in others}
    paired_area = {a: paired_difference(values(per_seed, main, "area"), values(per_seed, a, "area")) for a in others}
    paired_hops = {h: {a: paired_difference(values(per_seed, main, part=h), values(per_seed, a, part=h))
                       for a in others} for h in ("1", "2") if h in per_seed[c.seeds[0]][main]}
    result = {
        "config": recorded_config(c),
        "protocol": {"torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                     "routes_per_question": {"1": 2 if c.aliases else 1, "2": 4 if c.aliases else 1},
                     "checkpoints": checkpoints(c),
                     "budget_unit": "GRPO training rollouts (policy episodes) per arm; evaluation is greedy and "
                                    "identical for every arm"},
        "headline": headline("J&F on held-out questions (1 and 2 hops), end of training", main,
                             results[main]["all"]["jf"], {a: results[a]["all"]["jf"] for a in others},
                             std=results[main]["all"]["jf_std"],
                             baseline_std={a: results[a]["all"]["jf_std"] for a in others},
                             budget={"training_rollouts_per_arm": rollouts, "held_out_questions": 4 * c.test_clubs},
                             seeds=list(c.seeds), direction="higher", paired=paired),
        "area": {"metric": "mean held-out J&F over the checkpoints (learning-curve area / iterations)",
                 "values": {a: results[a]["area"] for a in c.arms}, "paired": paired_area},
        "paired_by_hops": paired_hops,
        "results": results,
        "per_seed": {str(s): v for s, v in per_seed.items()},
    }
    if c.control:
        pc = positive_control(
            f"questions of {'/'.join(map(str, c.control_hops))} hop(s) only, {c.control_objects} objects per scene: "
            "every question needs a search and a policy that answers at once is right about "
            f"1 in {c.control_objects} times, so the outcome reward alone is sparse and the process reward "
            "(initial guidance + bounded search incentive) must get searching started sooner",
            "hierarchical", "outcome (process reward removed)", values(control, "hierarchical", "area"),
            values(control, "outcome", "area"), seeds=c.seeds,
            metric="held-out J&F learning-curve area (mean over the checkpoints)")
        pc["end_jf"] = {a: values(control, a) for a in control_arms}
        pc["end_jf_paired"] = paired_difference(values(control, "hierarchical"), values(control, "outcome"))
        pc["searches"] = {a: values(control, a, "searches") for a in control_arms}
        result["positive_control"] = pc
        result["control_per_seed"] = {str(s): v for s, v in control.items()}
    if rigidity:
        result["rigidity"] = {
            "what": "the step-wise arm against the same reward scoring the best-matching valid route "
                    "(stepwise-any): how much the rigidity of the annotated route costs, same seeds and budget",
            "stepwise_any": {"jf": [rigidity[s]["all"]["jf"] for s in c.seeds],
                             "area": [rigidity[s]["area"] for s in c.seeds],
                             "on_gold": [rigidity[s]["all"]["on_gold"] for s in c.seeds]},
            "stepwise_minus_any": paired_difference(values(per_seed, "stepwise"),
                                                    [rigidity[s]["all"]["jf"] for s in c.seeds]),
            "stepwise_minus_any_area": paired_difference(values(per_seed, "stepwise", "area"),
                                                         [rigidity[s]["area"] for s in c.seeds]),
            "hierarchical_minus_any": (paired_difference(values(per_seed, "hierarchical"),
                                                         [rigidity[s]["all"]["jf"] for s in c.seeds])
                                       if "hierarchical" in c.arms else None)}
    result["seconds"] = time.perf_counter() - t0
    with atomic_output_dir(c.out) as stage:
        write_metrics(stage, result, c.command)
        (stage / "results.md").write_text(results_table(result, c.command))
        _plots(stage, result, curves, c)
    if c.progress:
        print(results_table(result, c.command))
    return result


def results_table(result: dict, command: str | None) -> str:
    """Markdown: the positive control, J&F / area / accuracy / searches / routes per arm and hops (mean ±
    std over seeds), the per-seed J&F and area, and the paired differences of the method against
    each arm."""
    from .._report import markdown_table, paired_line

    h = result["headline"]
    seeds = h["seeds"]
    parts = []
    pc = result.get("positive_control")
    if pc:
        parts.append("**Positive control** (" + pc["setting"] + "), " + pc["metric"] + ": "
                     + ", ".join(f"{a} {np.mean(v):.3f}" for a, v in (("hierarchical", pc["method_values"]),
                                                                      ("outcome", pc["ablation_values"])))
                     + "; " + paired_line("hierarchical - outcome", pc["paired"]) + f"; sensitive: {pc['sensitive']}. "
                     + "End-of-training J&F: " + paired_line("hierarchical - outcome", pc["end_jf_paired"]) + ".\n")
    rows = []
    for arm, r in result["results"].items():
        hops = [x for x in ("1", "2") if x in r]
        rows.append((arm, *[f"{r[x]['jf']:.3f} ± {r[x]['jf_std']:.3f}" for x in (*hops, "all")],
                     f"{r['area']:.3f} ± {r['area_std']:.3f}",
                     *[f"{r[x]['accuracy']:.2f}" for x in hops], *[f"{r[x]['searches']:.2f}" for x in hops],
                     f"{r['all']['found']:.2f}", f"{r['all']['on_gold']:.2f}"))
    parts.append(markdown_table(
        ["arm", "J&F 1-hop", "J&F 2-hop", "J&F all", "area", "acc 1-hop", "acc 2-hop", "searches 1-hop",
         "searches 2-hop", "fact found", "annotated route"], rows,
        caption=f"Held-out questions about unseen facts; seeds {seeds}; "
        f"{h['budget']['training_rollouts_per_arm']} training rollouts per arm; mean ± std over seeds. "
        "Area = mean held-out J&F at iterations " + ", ".join(map(str, result["protocol"]["checkpoints"]))
        + ". Fact found: share of held-out questions whose searches read a document stating the asked fact "
        "(any route); annotated route: share whose searches were exactly the annotated gold steps."))
    per = result["per_seed"]
    parts.append(markdown_table(["arm", *[f"seed {s}" for s in seeds]],
                                [(a, *[f"{per[str(s)][a]['all']['jf']:.3f} / {per[str(s)][a]['area']:.3f}"
                                       for s in seeds]) for a in result["results"]],
                                caption="Per seed: J&F (all) / area."))
    lines = [f"- {a}: J&F {paired_line('', p).lstrip(': ')}; area {paired_line('', result['area']['paired'][a]).lstrip(': ')}"
             + "".join(f"; {x}-hop J&F {paired_line('', result['paired_by_hops'][x][a]).lstrip(': ')}"
                       for x in result["paired_by_hops"])
             for a, p in h["paired"].items()]
    parts.append(f"Paired differences, {h['method']} - arm (mean over seeds [Student t ci95]):\n" + "\n".join(lines) + "\n")
    rg = result.get("rigidity")
    if rg:
        parts.append("**Rigidity check** (step-wise reward scoring the annotated route vs the best-matching valid "
                     f"route, stepwise-any: J&F {np.mean(rg['stepwise_any']['jf']):.3f}, area "
                     f"{np.mean(rg['stepwise_any']['area']):.3f}): "
                     + paired_line("stepwise - stepwise-any, J&F", rg["stepwise_minus_any"]) + "; "
                     + paired_line("area", rg["stepwise_minus_any_area"])
                     + (("; " + paired_line("hierarchical - stepwise-any, J&F", rg["hierarchical_minus_any"]))
                        if rg["hierarchical_minus_any"] else "") + ".\n")
    text = "\n".join(parts)
    return text + (f"\nCommand: `{command}`\n" if command else "")


def _plots(stage, result, curves, c):
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    plt = pyplot()
    res = result["results"]
    hops = [x for x in ("1", "2") if x in next(iter(res.values()))]
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"{x} hop{'s' if x == '2' else ''}" for x in hops] + ["all"]
    grouped_bars(ax, labels, {a: [r[x]["jf"] for x in (*hops, "all")] for a, r in res.items()},
                 errors={a: [r[x]["jf_std"] for x in (*hops, "all")] for a, r in res.items()}, rotation=0)
    ax.set_ylabel("J&F (held-out facts)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    save(fig, stage / "jf_by_hops.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    marks = result["protocol"]["checkpoints"]
    for arm in res:
        ys = np.asarray([result["per_seed"][str(s)][arm]["curve"] for s in result["headline"]["seeds"]])
        ax.errorbar(marks, ys.mean(0), yerr=ys.std(0, ddof=1) if len(ys) > 1 else None, label=arm, capsize=3,
                    marker="o")
    ax.set_xlabel("GRPO iteration")
    ax.set_ylabel("held-out J&F (mean ± std over seeds)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    save(fig, stage / "curves.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, cs in curves.items():
        ax.plot(np.arange(1, len(cs[0]) + 1), np.mean(cs, 0), label=arm)
    ax.set_xlabel("GRPO iteration")
    ax.set_ylabel("mean training reward (own reward)")
    ax.legend(fontsize=8)
    save(fig, stage / "training.png")
