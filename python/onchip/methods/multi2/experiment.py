"""The Multi^2 experiment: success by horizon and objective-drift rate of the hierarchical agent and
its ablations against flat behaviour cloning and flat offline IQL.

Per seed: demonstrations from a noisy demonstrator only (random actions, wrong objects, and a
systematic premature "done" one move before touching) on random missions of 1..max horizon
sub-instructions, in a world with slipping moves and a limited view; the high level fine-tuned on the
missions' sub-goal stacks; the low level trained in stages (warm-up BC -> ``hier-bc``; + offline IQL
-> ``hier-offline``; + online IQL -> ``multi2``); flat BC (``flat-bc``) and flat BC + offline IQL
(``flat-iql``). Every arm sees the same number of environment steps (``multi2``'s online steps are
matched by further demonstrations for the others). Every arm is evaluated greedily on the same
held-out episodes per horizon. The positive control is ``hier-offline`` against ``hier-bc`` with the
true sub-goals (the RL stage must fix the copied premature "done"); the headline is success at the
largest horizon with paired ci95 against every arm. Writes ``metrics.json``, ``results.md``,
``success.png`` and ``drift.png``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np

from .._report import need, recorded_config
from . import ARMS


@dataclass(frozen=True)
class Multi2Config:
    """One run (defaults = the committed run).

    Attributes:
        arms: subset of :data:`~onchip.methods.multi2.ARMS`.
        horizons: evaluated numbers of sub-instructions (each in 1..max_horizon; training missions
            draw 1..max(horizons)).
        demos: demonstration episodes, all by the noisy demonstrator (no clean expert data).
        bc_steps: behaviour-cloning steps (flat BC and the low level's format warm-up).
        iql_steps: offline IQL updates of critics and actor (flat and hierarchical).
        critic_steps: offline IQL updates of the critics alone before those (flat and hierarchical):
            the Polyak target (rate 0.01) moves a reward about one step back per ~100 updates, and
            paths here are up to ~13 steps, so without them the advantages are still noise when the
            actor starts to follow them.
        online_episodes: episodes the low level collects online (``multi2`` only; every other arm gets
            as many further demonstration steps, so all arms see the same environment steps).
        online_updates: IQL updates per online episode.
        high_steps: SFT steps of the high-level agent.
        eval_episodes: held-out episodes per horizon and arm.
        grid: grid side N.
        slip: probability that a move goes in a random direction.
        view: observation radius in cells (farther objects: direction only; 0 = full view).
        demo_eps: the demonstrator's random-action probability per step.
        p_early: the demonstrator's probability of declaring a sub-goal done with the move onto its
            object, before touching it (> 0.5: behaviour cloning copies the error).
        seeds: the seeds (>= 1 of them).
        out: output folder.
        progress: progress bars and the table on stdout.
        command: the command line recorded in metrics.json.
        jobs: processes that run the seeds (1 = in this process; the results do not depend on it).

    Raises:
        ValueError: a field out of range, named in the message.
    """

    arms: tuple[str, ...] = ARMS
    horizons: tuple[int, ...] = (1, 2, 3, 4)
    demos: int = 300
    bc_steps: int = 3000
    iql_steps: int = 800
    critic_steps: int = 2000
    online_episodes: int = 100
    online_updates: int = 4
    high_steps: int = 1500
    eval_episodes: int = 50
    grid: int = 7
    slip: float = 0.1
    view: int = 2
    demo_eps: float = 0.2
    p_early: float = 0.6
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    out: str = "out/multi2"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)
    jobs: int = field(default=1, compare=False)

    def __post_init__(self):
        for name in ("arms", "horizons", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        need(bool(self.arms) and all(a in ARMS for a in self.arms), "arms", list(self.arms),
             f"choose from {', '.join(ARMS)}")
        need(bool(self.horizons) and all(1 <= h <= 6 for h in self.horizons), "horizons", list(self.horizons),
             "each must be in 1..6")
        need(len(self.seeds) >= 1 and all(s >= 0 for s in self.seeds), "seeds", list(self.seeds),
             "one or more seeds >= 0")
        need(self.jobs >= 1, "jobs", self.jobs, "must be >= 1")
        for name, lo in (("demos", 4), ("bc_steps", 1), ("iql_steps", 1), ("critic_steps", 0), ("online_episodes", 0),
                         ("online_updates", 0), ("high_steps", 1), ("eval_episodes", 1)):
            need(getattr(self, name) >= lo, name, getattr(self, name), f"must be >= {lo}")
        need(5 <= self.grid <= 12, "grid", self.grid, "must be in 5..12")
        need(0.0 <= self.slip < 1.0, "slip", self.slip, "must be in [0, 1)")
        need(self.view >= 0, "view", self.view, "must be >= 0")
        for name in ("demo_eps", "p_early"):
            need(0.0 <= getattr(self, name) <= 1.0, name, getattr(self, name), "must be in [0, 1]")


def _episodes(seed, label, horizons, n, c):
    from .._report import rng
    from .env import new_episode

    g = rng(seed, label)
    hs = g.choice(horizons, n) if len(horizons) > 1 else np.full(n, horizons[0])
    return [new_episode(g, int(h), size=c.grid, slip=c.slip, view=c.view) for h in hs]


def _concat(a: dict, b: dict, n: int) -> dict:
    """Transition arrays ``a`` followed by the first ``n`` of ``b``."""
    return {k: np.concatenate([a[k], b[k][:n]]) for k in a}


def run_seed(c: Multi2Config, seed: int) -> dict:
    """Train every arm for one seed and evaluate it; returns ``{arm: {horizon: {success, drift, ...}}}``
    plus ``"_budget"`` (environment steps and gradient steps per arm) and ``"_diagnostics"``.

    Every arm sees the same number of environment steps: ``multi2`` its demonstrations plus its
    online episodes; every other arm the same demonstrations plus further demonstrations from the
    same noisy demonstrator, cut at the step count of ``multi2``'s online phase."""
    import torch

    from .._report import rng, seed_int
    from .._rl import IQL, IQLConfig
    from .agents import (
        KIND_DIM,
        N_ACTIONS,
        N_JOINT,
        advantages,
        behaviour_cloning,
        collect_demos,
        greedy_actions,
        iql_train,
        object_net,
        run_flat,
        run_hierarchical,
        train_high_level,
    )
    from .env import drift_rate

    max_h = max(c.horizons)
    horizons = list(range(1, max_h + 1))
    demo_kw = {"max_horizon": max_h, "eps": c.demo_eps, "p_early": c.p_early}
    demo_eps = _episodes(seed, "demos", horizons, c.demos, c)
    data = collect_demos(demo_eps, rng(seed, "demo-noise"), noisy=np.ones(c.demos, bool), **demo_kw)
    low, flat = data["low"], data["flat"]
    d_obs = low["s"].shape[1] - KIND_DIM
    want = set(c.arms)
    hier = want & {"multi2", "hier-offline", "hier-bc"}
    actors, budget, diag = {}, {}, {}
    torch.manual_seed(seed_int(seed, "torch"))
    high = vocab = None
    if hier:
        high, vocab = train_high_level(data["high"], steps=c.high_steps, seed=seed_int(seed, "high"),
                                       progress=c.progress,
                                       cache_key=(c.demos, c.grid, max_h, torch.__version__, torch.get_num_threads()))
        diag["high_level_accuracy"] = _high_accuracy(high, vocab, seed, max_h, c)

    def low_stages(d, label, offline):
        """Warm-up BC on ``d`` (-> actor copy), then, if ``offline``, IQL critics alone then IQL."""
        actor = object_net(KIND_DIM, N_JOINT)
        behaviour_cloning(actor, d, steps=c.bc_steps, seed=seed_int(seed, label, "bc"), progress=c.progress,
                          desc=f"warm-up BC ({label})")
        bc = copy.deepcopy(actor)
        iql = None
        if offline:
            iql = IQL(object_net(KIND_DIM, N_JOINT), object_net(KIND_DIM, 1), actor, IQLConfig())
            iql_train(iql, d, steps=c.critic_steps, seed=seed_int(seed, label, "critics"), progress=c.progress,
                      desc=f"IQL critics ({label})", train_actor=False)
            iql_train(iql, d, steps=c.iql_steps, seed=seed_int(seed, label, "iql"), progress=c.progress,
                      desc=f"offline IQL ({label})")
        return bc, actor, iql

    # multi2 first: its online phase fixes the environment-step budget of every arm
    online_steps = 0
    if "multi2" in want:
        _, actor, iql = low_stages(low, "multi2", True)
        buffer = {k: list(v) for k, v in low.items()}
        g = rng(seed, "online")
        online = _episodes(seed, "online", horizons, c.online_episodes, c)
        from onchip.progress import progress_bar

        for k in progress_bar(range(0, len(online), 10), desc="online IQL", disable=not c.progress, leave=False):
            run_hierarchical(high, vocab, actor, online[k:k + 10], rng=g, record=buffer)
            arrays = {key: np.asarray(val) for key, val in buffer.items()}
            iql_train(iql, arrays, steps=c.online_updates * len(online[k:k + 10]), seed=seed_int(seed, "online", k))
        online_steps = len(buffer["a"]) - len(low["a"])
        actors["multi2"] = actor
        budget["multi2"] = {"env_steps": int(len(low["a"]) + online_steps),
                            "gradient_steps": c.bc_steps + c.critic_steps + c.iql_steps
                            + c.online_updates * c.online_episodes}

    # the other arms: the same demonstrations plus as many further demonstration steps
    extra_low, extra_flat, k = None, None, 0
    while online_steps and (extra_low is None or len(extra_low["a"]) < online_steps):
        more = collect_demos(_episodes(seed, f"demos-extra-{k}", horizons, 20, c),
                             rng(seed, "demo-noise-extra", k), noisy=np.ones(20, bool), **demo_kw)
        extra_low = more["low"] if extra_low is None else _concat(extra_low, more["low"], len(more["low"]["a"]))
        extra_flat = more["flat"] if extra_flat is None else _concat(extra_flat, more["flat"],
                                                                     len(more["flat"]["a"]))
        k += 1
    low_all = low if not online_steps else _concat(low, extra_low, online_steps)
    flat_all = flat if not online_steps else _concat(flat, extra_flat, online_steps)
    env_steps = len(low_all["a"])

    if want & {"hier-offline", "hier-bc"}:
        bc, actor, iql = low_stages(low_all, "hier", "hier-offline" in want)
        actors["hier-bc"] = bc
        budget["hier-bc"] = {"env_steps": env_steps, "gradient_steps": c.bc_steps}
        if iql is not None:
            diag["low"] = _declare_gap(advantages(iql, low_all), low_all)
            actors["hier-offline"] = actor
            budget["hier-offline"] = {"env_steps": env_steps,
                                      "gradient_steps": c.bc_steps + c.critic_steps + c.iql_steps}

    if want & {"flat-bc", "flat-iql"}:
        d_flat = flat_all["s"].shape[1]
        actor = object_net(d_flat - d_obs, N_ACTIONS)
        behaviour_cloning(actor, flat_all, steps=c.bc_steps, seed=seed_int(seed, "flat", "bc"),
                          progress=c.progress, desc="flat BC")
        actors["flat-bc"] = copy.deepcopy(actor)
        budget["flat-bc"] = {"env_steps": env_steps, "gradient_steps": c.bc_steps}
        if "flat-iql" in want:
            iql = IQL(object_net(d_flat - d_obs, N_ACTIONS), object_net(d_flat - d_obs, 1), actor, IQLConfig())
            iql_train(iql, flat_all, steps=c.critic_steps, seed=seed_int(seed, "flat", "critics"),
                      progress=c.progress, desc="IQL critics (flat)", train_actor=False)
            iql_train(iql, flat_all, steps=c.iql_steps, seed=seed_int(seed, "flat", "iql"), progress=c.progress,
                      desc="offline IQL (flat)")
            actors["flat-iql"] = actor
            budget["flat-iql"] = {"env_steps": env_steps,
                                  "gradient_steps": c.bc_steps + c.critic_steps + c.iql_steps}

    # how far the RL stages moved each warm-started actor: share of demonstration states whose greedy action
    # differs from the BC actor's
    for arm, base, d in (("hier-offline", "hier-bc", low_all), ("flat-iql", "flat-bc", flat_all)):
        if arm in actors and base in actors:
            diag[f"{arm}_changed"] = float(np.mean(greedy_actions(actors[arm], d["s"])
                                                   != greedy_actions(actors[base], d["s"])))
    out = {}
    for arm in c.arms:
        out[arm] = {}
        for h in c.horizons:
            eps = _episodes(seed, f"eval-{h}", [h], c.eval_episodes, c)
            if arm.startswith("flat"):
                run_flat(actors[arm], eps, max_h)
            else:
                run_hierarchical(high, vocab, actors[arm], eps)
            log = [(e.success, [i for _, i in e.completed]) for e in eps]
            out[arm][h] = {"success": float(np.mean([e.success for e in eps])), "drift": drift_rate(log),
                           "drift_share": float(np.mean([e.drift for e in eps]))}
            if not arm.startswith("flat"):  # the same episodes with the mission's true sub-goals
                eps = _episodes(seed, f"eval-{h}", [h], c.eval_episodes, c)
                run_hierarchical(None, None, actors[arm], eps, true_subgoals=True)
                out[arm][h]["success_true_subgoals"] = float(np.mean([e.success for e in eps]))
    out["_budget"] = budget
    out["_diagnostics"] = diag
    return out


def _high_accuracy(high, vocab, seed, max_h, c) -> float:
    """Share of held-out high-level prompts (every prefix of 50 fresh missions) for which the high
    level writes the mission's next sub-goal (or ``stop`` after the last)."""
    from .agents import decode_subgoals, high_level_prompt
    from .env import subgoal_text

    eps = _episodes(seed, "high-eval", list(range(1, max_h + 1)), 50, c)
    prompts, want = [], []
    for ep in eps:
        stack = [subgoal_text(g) for g in ep.mission]
        for i in range(len(stack) + 1):
            prompts.append(high_level_prompt(ep.text, stack[:i]))
            want.append(ep.mission[i] if i < len(stack) else None)
    got = decode_subgoals(high, vocab, prompts)
    return float(np.mean([g == w for g, w in zip(got, want)]))


def _declare_gap(adv: np.ndarray, d: dict) -> dict:
    """Mean IQL advantage of the low level's correct "done" declarations (sub-goal reached) and of its
    premature ones (declared, not reached): a critic that learned anything ranks the correct higher."""
    from .agents import N_ACTIONS

    declared = d["a"] >= N_ACTIONS
    return {"advantage_done_reached": float(adv[declared & (d["r"] > 0)].mean()),
            "advantage_done_premature": float(adv[declared & (d["r"] == 0)].mean())}


def run(config: Multi2Config) -> dict:
    """Run every seed and write the output folder; returns the content of ``metrics.json``."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import headline, mean_std, paired_difference, positive_control
    from .._seeds import run_seeds

    c = config
    check_output_dir(c.out)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed = run_seeds(run_seed, c, c.seeds, c.jobs)
    results = {}
    for arm in c.arms:
        results[arm] = {}
        for h in c.horizons:
            row = {}
            for key in ("success", "drift", "drift_share", "success_true_subgoals"):
                if key not in per_seed[c.seeds[0]][arm][h]:
                    continue
                vals = [per_seed[s][arm][h][key] for s in c.seeds]
                finite = [v for v in vals if np.isfinite(v)]
                m, sd = mean_std(finite) if finite else (float("nan"), 0.0)
                row[key], row[f"{key}_std"] = m, sd
            results[arm][str(h)] = row
    top = str(max(c.horizons))
    main = "multi2" if "multi2" in c.arms else c.arms[0]
    budget = {"unit": "environment steps (demonstrations + online) per arm", "demos": c.demos,
              "eval_episodes_per_horizon": c.eval_episodes,
              "per_seed": {str(s): per_seed[s]["_budget"] for s in c.seeds}}
    seeds = list(c.seeds)
    per_arm = lambda arm, key, h=top: [per_seed[s][arm][int(h)][key] for s in seeds]
    others = [a for a in c.arms if a != main]
    paired = control = drift_paired = None
    if len(seeds) >= 2:
        paired = {a: paired_difference(per_arm(main, "success"), per_arm(a, "success")) for a in others}
        drift_paired = {a: {h: paired_difference(per_arm(main, "drift_share", h), per_arm(a, "drift_share", h))
                            for h in map(str, c.horizons)} for a in others}
        if {"hier-offline", "hier-bc"} <= set(c.arms):
            control = positive_control(
                f"low level alone (the mission's true sub-goals), horizon {top}: demonstrations only from a noisy "
                f"demonstrator that declares a sub-goal done one move early with p = {c.p_early} (the most frequent "
                "action there, so behaviour cloning copies it); slips and partial view", "hier-offline", "hier-bc",
                per_arm("hier-offline", "success_true_subgoals"), per_arm("hier-bc", "success_true_subgoals"),
                seeds=seeds, metric=f"success rate at horizon {top} with true sub-goals")
    result = {
        "config": recorded_config(c),
        "results": results,
        "per_seed": {str(s): {a: {str(h): v for h, v in r.items()} for a, r in per_seed[s].items()
                              if not a.startswith("_")} for s in c.seeds},
        "diagnostics": _mean_diagnostics([per_seed[s]["_diagnostics"] for s in c.seeds]),
        "headline": headline(f"success rate at horizon {top}", main, results[main][top]["success"],
                             {a: results[a][top]["success"] for a in others},
                             std=results[main][top]["success_std"],
                             baseline_std={a: results[a][top]["success_std"] for a in others},
                             budget=budget, seeds=seeds, direction="higher", paired=paired),
        **({"positive_control": control} if control is not None else {}),
        **({"paired_drift_share": drift_paired} if drift_paired is not None else {}),
        "seconds": time.perf_counter() - t0,
    }
    with atomic_output_dir(c.out) as stage:
        from .._report import write_metrics

        write_metrics(stage, result, c.command)
        (stage / "results.md").write_text(results_table(result, c.command))
        _plots(stage, result, c)
    if c.progress:
        print(results_table(result, c.command))
    return result


def _mean_diagnostics(per_seed: list[dict]) -> dict:
    """Mean and std over seeds of every diagnostic number (nested one level for the advantage gaps)."""
    from .._report import mean_std

    out = {}
    for key, val in per_seed[0].items():
        if isinstance(val, dict):
            out[key] = {k: dict(zip(("mean", "std"), mean_std(d[key][k] for d in per_seed))) for k in val}
        else:
            out[key] = dict(zip(("mean", "std"), mean_std(d[key] for d in per_seed)))
    return out


def _fmt(m, s):
    return "n/a" if not np.isfinite(m) else f"{m:.2f} ± {s:.2f}"


def results_table(result: dict, command: str | None) -> str:
    """Markdown: success and drift rate per arm and horizon (mean ± std over seeds)."""
    from .._report import markdown_table

    res = result["results"]
    horizons = list(next(iter(res.values())))
    rows = [(arm, *[_fmt(r[h]["success"], r[h]["success_std"]) for h in horizons],
             *[_fmt(r[h]["drift"], r[h]["drift_std"]) for h in horizons]) for arm, r in res.items()]
    head = ["arm", *[f"success H={h}" for h in horizons], *[f"drift H={h}" for h in horizons]]
    text = markdown_table(head, rows, caption=f"Seeds {result['headline']['seeds']}; drift = share of failed "
                          "episodes that completed a sub-instruction out of order (n/a: no failures).")
    hier = [(arm, *[_fmt(r[h]["success_true_subgoals"], r[h]["success_true_subgoals_std"]) for h in horizons])
            for arm, r in res.items() if "success_true_subgoals" in r[horizons[0]]]
    if hier:
        text += "\n" + markdown_table(["arm", *[f"H={h}" for h in horizons]], hier,
                                      caption="Low level alone: success on the same episodes with the mission's "
                                      "true sub-goals in place of the high level's.")
    from .._report import paired_line

    h = result["headline"]
    if "paired" in h:
        text += (f"\nHeadline ({h['metric']}), paired difference {h['method']} - arm over seeds {h['seeds']}, "
                 "mean [ci95] (per seed):\n\n" + "\n".join(
                     f"- {paired_line(a, p)} per seed {[round(v, 3) for v in p['per_seed']]}"
                     for a, p in h["paired"].items()) + "\n")
    pc = result.get("positive_control")
    if pc:
        text += (f"\nPositive control ({pc['setting']}): {pc['metric']}, {pc['method']} per seed "
                 f"{[round(v, 3) for v in pc['method_values']]}, {pc['ablation']} per seed "
                 f"{[round(v, 3) for v in pc['ablation_values']]}; "
                 f"{paired_line(pc['method'] + ' - ' + pc['ablation'], pc['paired'])}; "
                 f"sensitive: {pc['sensitive']}\n")
    dp = result.get("paired_drift_share")
    if dp:
        rows = [(a, *[paired_line("", v[hz]).lstrip(": ") for hz in horizons]) for a, v in dp.items()]
        text += "\n" + markdown_table(["arm", *[f"H={hz}" for hz in horizons]], rows,
                                      caption=f"Share of all episodes ending in objective drift, paired difference "
                                      f"{h['method']} - arm, mean [ci95] (negative: {h['method']} drifts less).")
    diag = result.get("diagnostics", {})
    lines = []
    for key, val in diag.items():
        if key.endswith("_changed"):
            lines.append(f"- {key[:-8]}: greedy action differs from its BC warm-up on "
                         f"{val['mean']:.3f} ± {val['std']:.3f} of the training states")
        elif key == "high_level_accuracy":
            lines.append(f"- high level: writes the mission's next sub-goal on {val['mean']:.3f} ± {val['std']:.3f} "
                         "of held-out prompts")
        else:
            lines.append(f"- IQL critic ({key}): mean advantage of correct 'done' declarations "
                         f"{val['advantage_done_reached']['mean']:.3f}, of premature ones "
                         f"{val['advantage_done_premature']['mean']:.3f}")
    if lines:
        text += "\nDiagnostics (mean ± std over seeds):\n\n" + "\n".join(lines) + "\n"
    budget = h["budget"]["per_seed"]
    text += "\nEnvironment steps per arm (seed: steps): " + "; ".join(
        f"{s}: " + ", ".join(f"{a} {b['env_steps']}" for a, b in arms.items()) for s, arms in budget.items()) + "\n"
    return text + (f"\nCommand: `{command}`\n" if command else "")


def _plots(stage, result, c):
    from onchip.plotting import pyplot

    from .._report import grouped_bars, save

    plt = pyplot()
    res = result["results"]
    hs = [str(h) for h in c.horizons]
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, r in res.items():
        ax.errorbar([int(h) for h in hs], [r[h]["success"] for h in hs], yerr=[r[h]["success_std"] for h in hs],
                    marker="o", capsize=3, label=arm)
    ax.set_xlabel("horizon (sub-instructions)")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    save(fig, stage / "success.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    grouped_bars(ax, [f"H={h}" for h in hs], {a: [r[h]["drift_share"] for h in hs] for a, r in res.items()},
                 errors={a: [r[h]["drift_share_std"] for h in hs] for a, r in res.items()}, rotation=0)
    ax.set_ylabel("episodes ending in objective drift")
    ax.legend(fontsize=8)
    save(fig, stage / "drift.png")
