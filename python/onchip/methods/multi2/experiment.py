"""The Multi^2 experiment: success by horizon and objective-drift rate of the hierarchical agent and
its ablations against flat behaviour cloning and flat offline IQL.

Per seed: expert + noisy-expert demonstrations on random missions of 1..max horizon sub-instructions;
the high level fine-tuned on the expert sub-goal stacks; the low level trained in stages (warm-up
BC -> ``hier-bc``; + offline IQL -> ``hier-offline``; + online IQL -> ``multi2``); flat BC on the
expert steps (``flat-bc``) and flat BC + offline IQL on all steps (``flat-iql``). Every arm is
evaluated greedily on the same held-out episodes per horizon. Writes ``metrics.json``,
``results.md``, ``success.png`` and ``drift.png``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .._report import need
from . import ARMS


@dataclass(frozen=True)
class Multi2Config:
    """One run (defaults = the committed run).

    Attributes:
        arms: subset of :data:`~onchip.methods.multi2.ARMS`.
        horizons: evaluated numbers of sub-instructions (each in 1..max_horizon; training missions
            draw 1..max(horizons)).
        demos: demonstration episodes (half expert, half noisy expert).
        bc_steps: behaviour-cloning steps (flat BC and the low level's format warm-up).
        iql_steps: offline IQL updates of critics and actor (flat and hierarchical).
        critic_steps: offline IQL updates of the critics alone before those (flat and hierarchical):
            the Polyak target (rate 0.01) moves a reward about one step back per ~100 updates, and
            paths here are up to ~13 steps, so without them the advantages are still noise when the
            actor starts to follow them.
        online_episodes: episodes the low level collects online (``multi2`` only).
        online_updates: IQL updates per online episode.
        high_steps: SFT steps of the high-level agent.
        eval_episodes: held-out episodes per horizon and arm.
        grid: grid side N.
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
    bc_steps: int = 800
    iql_steps: int = 800
    critic_steps: int = 2000
    online_episodes: int = 100
    online_updates: int = 4
    high_steps: int = 400
    eval_episodes: int = 50
    grid: int = 7
    seeds: tuple[int, ...] = (0, 1, 2)
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


def _episodes(seed, label, horizons, n, grid):
    from .._report import rng
    from .env import new_episode

    g = rng(seed, label)
    hs = g.choice(horizons, n) if len(horizons) > 1 else np.full(n, horizons[0])
    return [new_episode(g, int(h), size=grid) for h in hs]


def run_seed(c: Multi2Config, seed: int) -> dict:
    """Train every arm for one seed and evaluate it; returns ``{arm: {horizon: {success, drift}}}``
    plus ``"_budget"`` (gradient steps and environment episodes per arm)."""
    import torch

    from .._report import rng
    from .._rl import IQL, IQLConfig
    from .agents import (KIND_DIM, N_JOINT, N_ACTIONS, advantages, behaviour_cloning, collect_demos, greedy_actions,
                         iql_train, object_net, run_flat, run_hierarchical, train_high_level)
    from .env import drift_rate

    max_h = max(c.horizons)
    demo_eps = _episodes(seed, "demos", list(range(1, max_h + 1)), c.demos, c.grid)
    noisy = np.arange(c.demos) % 2 == 1
    data = collect_demos(demo_eps, rng(seed, "demo-noise"), noisy=noisy, max_horizon=max_h)
    low, flat = data["low"], data["flat"]
    expert = lambda d: {k: v[d["expert"]] for k, v in d.items()}  # noqa: E731
    d_obs = low["s"].shape[1] - KIND_DIM
    want = set(c.arms)
    actors, budget, diag = {}, {}, {}
    torch.manual_seed(seed)

    if want & {"multi2", "hier-offline", "hier-bc"}:
        high, vocab = train_high_level(data["high"], steps=c.high_steps, seed=seed, progress=c.progress,
                                       cache_key=(c.demos, c.grid, max_h))
        actor = object_net(KIND_DIM, N_JOINT)
        behaviour_cloning(actor, expert(low), steps=c.bc_steps, seed=seed, progress=c.progress, desc="warm-up BC")
        actors["hier-bc"] = copy.deepcopy(actor)
        budget["hier-bc"] = {"gradient_steps": c.bc_steps, "online_episodes": 0}
        if want & {"multi2", "hier-offline"}:
            iql = IQL(object_net(KIND_DIM, N_JOINT), object_net(KIND_DIM, 1), actor, IQLConfig())
            iql_train(iql, low, steps=c.critic_steps, seed=seed + 1, progress=c.progress, desc="IQL critics (low)",
                      train_actor=False)
            iql_train(iql, low, steps=c.iql_steps, seed=seed, progress=c.progress, desc="offline IQL (low)")
            diag["low"] = _advantage_gap(advantages(iql, low), low["expert"])
            actors["hier-offline"] = copy.deepcopy(actor)
            budget["hier-offline"] = {"gradient_steps": c.bc_steps + c.critic_steps + c.iql_steps,
                                      "online_episodes": 0}
            if "multi2" in want:
                buffer = {k: list(v) for k, v in low.items()}
                g = rng(seed, "online")
                online = _episodes(seed, "online", list(range(1, max_h + 1)), c.online_episodes, c.grid)
                from tqdm import tqdm

                for k in tqdm(range(0, len(online), 10), desc="online IQL", disable=not c.progress, leave=False):
                    run_hierarchical(high, vocab, actor, online[k:k + 10], rng=g, record=buffer)
                    arrays = {key: np.asarray(val) for key, val in buffer.items()}
                    iql_train(iql, arrays, steps=c.online_updates * len(online[k:k + 10]), seed=seed * 7919 + k)
                actors["multi2"] = actor
                budget["multi2"] = {"gradient_steps": c.bc_steps + c.critic_steps + c.iql_steps
                                    + c.online_updates * c.online_episodes, "online_episodes": c.online_episodes}

    if want & {"flat-bc", "flat-iql"}:
        d_flat = flat["s"].shape[1]
        actor = object_net(d_flat - d_obs, N_ACTIONS)
        behaviour_cloning(actor, expert(flat), steps=c.bc_steps, seed=seed, progress=c.progress, desc="flat BC")
        actors["flat-bc"] = copy.deepcopy(actor)
        budget["flat-bc"] = {"gradient_steps": c.bc_steps, "online_episodes": 0}
        if "flat-iql" in want:
            iql = IQL(object_net(d_flat - d_obs, N_ACTIONS), object_net(d_flat - d_obs, 1), actor, IQLConfig())
            iql_train(iql, flat, steps=c.critic_steps, seed=seed + 1, progress=c.progress, desc="IQL critics (flat)",
                      train_actor=False)
            iql_train(iql, flat, steps=c.iql_steps, seed=seed, progress=c.progress, desc="offline IQL (flat)")
            diag["flat"] = _advantage_gap(advantages(iql, flat), flat["expert"])
            actors["flat-iql"] = actor
            budget["flat-iql"] = {"gradient_steps": c.bc_steps + c.critic_steps + c.iql_steps, "online_episodes": 0}

    # how far the RL stages moved each warm-started actor: share of demonstration states whose greedy action
    # differs from the BC actor's
    for arm, base, d in (("hier-offline", "hier-bc", low), ("multi2", "hier-bc", low), ("flat-iql", "flat-bc", flat)):
        if arm in actors and base in actors:
            diag[f"{arm}_changed"] = float(np.mean(greedy_actions(actors[arm], d["s"])
                                                   != greedy_actions(actors[base], d["s"])))
    out = {}
    for arm in c.arms:
        out[arm] = {}
        for h in c.horizons:
            eps = _episodes(seed, f"eval-{h}", [h], c.eval_episodes, c.grid)
            if arm.startswith("flat"):
                run_flat(actors[arm], eps, max_h)
            else:
                run_hierarchical(high, vocab, actors[arm], eps)
            log = [(e.success, [i for _, i in e.completed]) for e in eps]
            out[arm][h] = {"success": float(np.mean([e.success for e in eps])), "drift": drift_rate(log),
                           "drift_share": float(np.mean([e.drift for e in eps]))}
            if not arm.startswith("flat"):  # the same episodes with the mission's true sub-goals
                eps = _episodes(seed, f"eval-{h}", [h], c.eval_episodes, c.grid)
                run_hierarchical(None, None, actors[arm], eps, true_subgoals=True)
                out[arm][h]["success_true_subgoals"] = float(np.mean([e.success for e in eps]))
    out["_budget"] = {**budget, "demo_transitions": {"low": int(len(low["a"])), "flat": int(len(flat["a"]))}}
    out["_diagnostics"] = diag
    return out


def _advantage_gap(adv: np.ndarray, expert: np.ndarray) -> dict:
    """Mean IQL advantage of the expert's and the noisy expert's transitions (a critic that learned
    anything ranks the expert's higher)."""
    return {"advantage_expert": float(adv[expert].mean()), "advantage_noisy": float(adv[~expert].mean())}


def run(config: Multi2Config) -> dict:
    """Run every seed and write the output folder; returns the content of ``metrics.json``."""
    import torch

    from onchip.io import atomic_output_dir, check_output_dir

    from .._report import headline, mean_std
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
    budget = {"demos": c.demos, "eval_episodes_per_horizon": c.eval_episodes,
              "per_arm": per_seed[c.seeds[0]]["_budget"]}
    result = {
        "config": {k: v for k, v in asdict(c).items() if k not in ("out", "progress", "command", "jobs")},
        "results": results,
        "per_seed": {str(s): {a: {str(h): v for h, v in r.items()} for a, r in per_seed[s].items()
                              if not a.startswith("_")} for s in c.seeds},
        "diagnostics": _mean_diagnostics([per_seed[s]["_diagnostics"] for s in c.seeds]),
        "headline": headline(f"success rate at horizon {top}", main, results[main][top]["success"],
                             {a: results[a][top]["success"] for a in c.arms if a != main},
                             std=results[main][top]["success_std"],
                             baseline_std={a: results[a][top]["success_std"] for a in c.arms if a != main},
                             budget=budget, seeds=list(c.seeds), direction="higher"),
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
    diag = result.get("diagnostics", {})
    lines = []
    for key, val in diag.items():
        if key.endswith("_changed"):
            lines.append(f"- {key[:-8]}: greedy action differs from its BC warm-up on "
                         f"{val['mean']:.3f} ± {val['std']:.3f} of the demonstration states")
        else:
            lines.append(f"- IQL critic ({key}): mean advantage of expert transitions "
                         f"{val['advantage_expert']['mean']:.3f}, of noisy-expert transitions "
                         f"{val['advantage_noisy']['mean']:.3f}")
    if lines:
        text += "\nDiagnostics (mean ± std over seeds):\n\n" + "\n".join(lines) + "\n"
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
