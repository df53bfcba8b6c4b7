"""The ``onchip autotune`` experiment: SPARK's factor-conditioned search vs its baselines at equal evaluations.

First the factors' coupling is measured (:mod:`.interaction`: a two-way factorial design per
factor pair on the search streams of the run's seeds); the pairs found entangled are the scope
guard's entanglement map. Then the positive control: SPARK against SPARK without its guard
when the rewriter leaks random moves across the pair measured most coupled (the obstacle the guard
exists for), scored by the golden model alone, and its negative control (the leak across the pair
measured least coupled, which the guard lets through), ``control_seeds`` seeds, paired Student t CI. Then, per seed: build the search stream and the
held-out-drift stream, run every arm of
:data:`~.search.ARMS` for ``budget`` golden-model evaluations from the task's preset, take each
arm's most accurate design within the budgets (surrogate resources) and re-score it on the
held-out drift. Then pick the returned design from every arm's feasible candidates (the most
accurate, or with ``target`` the smallest LUT that holds ``accuracy >= target``), check the
finalists with Yosys in that order (``verify_top`` of them) and return the first whose Yosys
resources are within the budgets.

Writes ``metrics.json`` (headline: held-out-drift accuracy of each arm's best design, mean over
seeds, with paired differences; with ``target``: the surrogate LUT of each arm's smallest design
holding the target; ``coupling``: the interaction tests; ``positive_control``, ``negative_control``),
``results.md``,
``best_spec.toml`` (usable by ``onchip run --spec`` and ``onchip generate --spec``),
``pareto.csv`` and the plots ``pareto.png`` (accuracy vs LUT, every evaluated candidate),
``curves.png`` (gap of each arm's best-so-far to the best any arm found, against evaluations)
and ``coupling.png`` (interaction share per factor pair; the positive control per seed).
Method: SPARK, arXiv 2605.04057 (see seeds/autotune.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._report import (
    headline, markdown_table, mean_std, need, paired_difference, paired_line, positive_control,
    recorded_config, rng, save, write_csv, write_metrics, write_results,
)
from .evaluate import HELDOUT, PRESET_OF, SEARCH_TASKS, TASK_KIND
from .search import ARMS

from . import FAMILIES  # noqa: E402  (defined once, in the package)
ACCURACY_NAME = {"readout": "assignment fidelity", "regression": "R^2 (1 - MSE/Var y)"}
#: an arm's run reaches the "best found" when within this fraction of the best any arm found (per seed)
REACH_FRACTION = 0.01
#: arms whose proposals pass the scope guard with the measured entanglement map
GUARDED_ARMS = ("spark", "asr-only", "rc-sar-only")
#: the positive control's planted leak: probability that a scoped proposal also carries a random
#: move of a factor entangled with the routed one
CONTROL_LEAK = 0.5


@dataclass(frozen=True)
class AutotuneConfig:
    """One autotune run; validated on construction.

    Attributes:
        task: search task, one of :data:`~.evaluate.SEARCH_TASKS`.
        data: readout shots ``.npy`` for ``readout-drift`` (None: the built-in source).
        samples: stream length of the search and held-out streams (>= 300).
        budget: golden-model evaluations per arm and seed (>= 2), the same for every arm.
        arms: the arms to run, a subset of :data:`~.search.ARMS` containing ``spark``.
        seeds: seeds (streams and search randomness), at least one.
        lut_budget, dsp_budget: resource budgets (None: none), > 0.
        ii_max: largest initiation interval, cycles (None: none), >= 1.
        latency_max_ns: largest latency to the committed update, ns; needs ``fmax_mhz``.
        fmax_mhz: clock for the latency, MHz (> 0).
        target: smallest-learner mode: return the design with the fewest LUTs whose search
            accuracy is >= target (None: the most accurate design).
        verify_top: finalists checked with Yosys, in order, until one is within the budgets (0: none).
        control_seeds: seeds of the positive control (>= 2; SPARK vs SPARK without the guard).
        coupling: measure the factors' coupling before the search and use the entangled pairs
            as the guard's map (False: no measurement, the paper's guard: every pair entangled).
        family: Yosys family of the resources.
        out: output folder; progress: progress bars; command: the command line for metrics.json.

    Raises:
        ValueError: a field out of range, naming it.
    """

    task: str = "drift-regression"
    data: str | None = None
    samples: int = 20_000
    budget: int = 60
    arms: tuple[str, ...] = ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    lut_budget: float | None = 600.0
    dsp_budget: float | None = None
    ii_max: int | None = None
    latency_max_ns: float | None = None
    fmax_mhz: float | None = None
    target: float | None = None
    verify_top: int = 2
    control_seeds: tuple[int, ...] = tuple(range(10))
    coupling: bool = True
    family: str = "xcup"
    out: str = "out/autotune"
    progress: bool = field(default=True, compare=False)
    command: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "arms", tuple(self.arms))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "control_seeds", tuple(self.control_seeds))
        need(self.task in SEARCH_TASKS, "task", self.task, f"must be one of {', '.join(SEARCH_TASKS)}")
        need(self.data is None or TASK_KIND[self.task] == "readout", "data", self.data,
             "only the readout-drift task takes a shots file")
        need(isinstance(self.samples, int) and self.samples >= 300, "samples", self.samples, "must be an integer >= 300")
        need(isinstance(self.budget, int) and self.budget >= 2, "budget", self.budget, "must be an integer >= 2")
        need(bool(self.arms) and all(a in ARMS for a in self.arms) and len(set(self.arms)) == len(self.arms),
             "arms", list(self.arms), f"choose distinct arms from {', '.join(ARMS)}")
        need("spark" in self.arms, "arms", list(self.arms), "must include spark (the method)")
        need(bool(self.seeds) and all(isinstance(s, int) and s >= 0 for s in self.seeds)
             and len(set(self.seeds)) == len(self.seeds), "seeds", list(self.seeds),
             "must be distinct integers >= 0")
        for name in ("lut_budget", "dsp_budget", "latency_max_ns", "fmax_mhz"):
            v = getattr(self, name)
            need(v is None or (np.isfinite(v) and v > 0), name, v, "must be a number > 0")
        need(self.ii_max is None or (isinstance(self.ii_max, int) and self.ii_max >= 1), "ii_max", self.ii_max,
             "must be an integer >= 1")
        need(self.latency_max_ns is None or self.fmax_mhz is not None, "latency_max_ns", self.latency_max_ns,
             "needs --fmax-mhz (the clock the latency in cycles is converted at)")
        need(self.target is None or (np.isfinite(self.target) and 0 < self.target <= 1), "target", self.target,
             "must be in (0, 1]")
        need(isinstance(self.verify_top, int) and self.verify_top >= 0, "verify_top", self.verify_top,
             "must be an integer >= 0")
        need(self.family in FAMILIES, "family", self.family, f"must be one of {', '.join(FAMILIES)}")
        need(len(self.control_seeds) == 0 or (len(self.control_seeds) >= 2 and len(set(self.control_seeds))
             == len(self.control_seeds) and all(isinstance(s, int) and s >= 0 for s in self.control_seeds)),
             "control_seeds", list(self.control_seeds), "must be none or >= 2 distinct integers >= 0")

    def budgets(self):
        from .evaluate import Budgets

        return Budgets(self.lut_budget, self.dsp_budget, self.ii_max, self.latency_max_ns, self.fmax_mhz)


def _controls(c, cp: dict, preset, evaluator, run_edit_arm, entangled) -> tuple[dict | None, dict | None]:
    """The positive and negative controls of the guard (see :func:`run`); ``(None, None)`` with a reason
    printed when the coupling test found no entangled pair or no free pair to leak across.

    Args:
        c: the run.
        cp: the coupling measurement (:func:`~.interaction.measure_coupling`) on the real evaluator.
        preset: the start design.
        evaluator: ``seed -> Evaluator`` on that seed's search stream (no plant).
        run_edit_arm: :func:`~.search.run_edit_arm`.
        entangled: the guard's map made of ``cp``.
    """
    from onchip.progress import progress_bar

    from .._controls import negative_control
    from .search import anytime_objective

    rows = sorted(cp["pairs"], key=lambda r: -r["interaction_share"])
    coupled = next((r for r in rows if r["entangled"]), None)
    free = next((r for r in reversed(rows) if not r["entangled"]), None)
    if coupled is None or free is None:
        print("autotune: no control (the coupling test found " + ("no entangled pair" if coupled is None else
                                                                  "every pair entangled") + ")")
        return None, None
    metric = ("anytime objective: mean over the budget of the best search objective so far (golden-model accuracy "
              "when within the budgets, else accuracy - 1 - overshoot; with a target, 2 - LUT/LUT budget once it "
              "holds); higher is better")
    out = {}
    bar = progress_bar(total=4 * len(c.control_seeds), desc="autotune: controls", disable=not c.progress)
    for which, row in (("positive", coupled), ("negative", free)):
        pair = frozenset({frozenset((row["a"], row["b"]))})
        vals, counts = {"spark": [], "spark-noguard": []}, {"spark": [], "spark-noguard": []}
        for seed in c.control_seeds:
            for arm in vals:
                ev = evaluator(seed)
                res = run_edit_arm(arm, preset, ev, c.budget, rng(seed, "autotune-control", which, arm),
                                   entangled=entangled, leak=CONTROL_LEAK, leak_pairs=pair)
                vals[arm].append(anytime_objective(res, c.budget))
                counts[arm].append({"scope_rejected": res.scope_rejected, "cross_factor": res.cross_factor,
                                    "evaluations": ev.evaluations, "proposals": res.proposals})
                bar.update(1)
        setting = (f"the rewriter leaks across {row['a']} x {row['b']} (measured interaction share "
                   f"{row['interaction_share']:.3f}, permutation p {row['p_ab_perm']:.3g}, entangled: "
                   f"{row['entangled']}): each proposal routed to one of them also carries, with probability "
                   f"{CONTROL_LEAK}, a uniformly random move of the other; every design is scored by the golden "
                   f"model alone (nothing planted in the score); {c.task}, {c.budget} evaluations per arm and seed")
        make = positive_control if which == "positive" else negative_control
        out[which] = make(setting, "spark", "spark-noguard", vals["spark"], vals["spark-noguard"],
                          seeds=list(c.control_seeds), metric=metric)
        out[which].update(leak_pair=[row["a"], row["b"]], per_seed=counts,
                          entangled_pairs=[list(p) for p in cp["entangled"]])
    bar.close()
    return out["positive"], out["negative"]


def _run_arm(arm, start, evaluator, budget, seed, entangled=None):
    from .search import EDIT_ARMS, run_edit_arm, run_random, run_tpe

    if arm in EDIT_ARMS:
        return run_edit_arm(arm, start, evaluator, budget, rng(seed, "autotune", arm),
                            entangled=entangled if arm in GUARDED_ARMS else None)
    if arm == "random":
        return run_random(start, evaluator, budget, rng(seed, "autotune", arm))
    return run_tpe(start, evaluator, budget, seed)


def _pair_counts(recs) -> dict:
    out: dict[str, int] = {}
    for r in recs:
        for k, v in r["result"].cross_pairs.items():
            out[k] = out.get(k, 0) + int(v)
    return dict(sorted(out.items()))


def within(budgets, res: dict) -> bool:
    """Whether resources (``lut``, ``dsp``, ``initiation_interval``, ``latency_cycles_update``) meet every budget."""
    return sum(budgets.overshoot(res).values()) == 0.0


def _summary(spec) -> str:
    s = f"{spec.kind} {list(spec.widths)}"
    if spec.kind == "kan":
        s += f" G={spec.grid_size} k={spec.spline_order} range=±{spec.grid_range[1]:g} T={spec.basis_table_bits}"
    else:
        s += f" {spec.datapath}"
    f = spec.formats
    s += (f"; in/coef/act/grad {f.input.width},{f.input.int_bits}/{f.coef.width},{f.coef.int_bits}/"
          f"{f.act.width},{f.act.int_bits}/{f.grad.width},{f.grad.int_bits} basis {f.basis.width} acc {f.acc.width}"
          f"; lr 2^-{spec.lr_shift} {spec.schedule}" + (f" D={spec.staleness}" if spec.schedule == "pipelined" else ""))
    return s


def run(config: AutotuneConfig) -> dict:
    """Run the experiment and write the output folder (see the module docstring).

    Returns:
        The content of ``metrics.json``.

    Raises:
        ValueError: a bad output folder or data file, before any work.
    """
    from onchip.progress import progress_bar

    from onchip.io import atomic_output_dir, check_output_dir

    from ...spec import PRESETS
    from .evaluate import Evaluator, make_task_stream, score_on
    from .resources import Surrogate, load_calibration, yosys_resources
    from .search import evals_to_reach

    c = config
    check_output_dir(c.out)
    t_start = time.perf_counter()
    kind = TASK_KIND[c.task]
    budgets = c.budgets()
    surrogate = Surrogate(load_calibration())
    loo = surrogate.loo_error()
    preset = PRESETS[PRESET_OF[c.task]]

    streams: dict[int, object] = {}

    def stream_of(seed):
        if seed not in streams:
            streams[seed] = make_task_stream(c.task, c.samples, seed, c.data)
        return streams[seed]

    # ---- the factors' coupling, measured before the search: the guard's entanglement map
    coupling, entangled = None, None
    if c.coupling:
        from .evaluate import score_on
        from .interaction import coupling_base, entangled_pairs, measure_coupling

        cseeds = list(c.seeds) if len(c.seeds) >= 2 else [c.seeds[0], c.seeds[0] + 1]
        cbar = progress_bar(total=6, desc="autotune: factor coupling", disable=not c.progress)
        coupling = measure_coupling(lambda spec, s: score_on(spec, stream_of(s), kind), coupling_base(preset),
                                    cseeds, progress=lambda k, n: cbar.update(1))
        cbar.close()
        coupling["base_init_scale"] = float(coupling_base(preset).init_scale)
        entangled = entangled_pairs(coupling)

    # ---- positive control through the real evaluator: a rewriter that leaks across the pair the coupling test
    # found most entangled; SPARK (the guard refuses those leaks) vs SPARK without the guard, scored by the
    # golden model alone. Negative control: the same leak across the pair found least coupled (the guard
    # lets the leaks through and refuses only its ordinary cases), nothing for the guard to act on.
    control = negative = None
    if c.control_seeds:
        from .interaction import coupling_base, entangled_pairs, measure_coupling
        from .search import run_edit_arm

        cp = coupling
        if cp is None:
            cbar = progress_bar(total=6, desc="autotune: coupling for the control", disable=not c.progress)
            cp = measure_coupling(lambda spec, s: score_on(spec, stream_of(s), kind), coupling_base(preset),
                                  list(c.control_seeds[:3]), progress=lambda k, n: cbar.update(1))
            cbar.close()
        control, negative = _controls(c, cp, preset, lambda seed: Evaluator(stream_of(seed), kind, budgets,
                                                                             surrogate, c.target), run_edit_arm,
                                      entangled_pairs(cp))

    runs: dict[int, dict] = {}
    bar = progress_bar(total=len(c.seeds) * len(c.arms), desc="autotune", disable=not c.progress)
    for seed in c.seeds:
        stream = stream_of(seed)
        heldout = make_task_stream(HELDOUT[c.task], c.samples, seed, c.data)
        ref = Evaluator(stream, kind, budgets, surrogate, c.target)(preset)
        per = {"preset": {"eval": ref, "ood": score_on(preset, heldout, kind)}, "arms": {}, "heldout": heldout,
               "stream": stream}
        for arm in c.arms:
            bar.set_postfix_str(f"seed {seed} {arm}")
            evaluator = Evaluator(stream, kind, budgets, surrogate, c.target)
            t0 = time.perf_counter()
            res = _run_arm(arm, preset, evaluator, c.budget, seed, entangled)
            best = res.best(c.target) or (res.best() if c.target is None else None)
            per["arms"][arm] = {"result": res, "evaluations": evaluator.evaluations,
                                "ood": score_on(best.spec, heldout, kind) if best else float("nan"),
                                "seconds": time.perf_counter() - t0}
            bar.update(1)
        top = max((r["result"].best().accuracy for r in per["arms"].values() if r["result"].best()), default=np.nan)
        per["best_any"] = top
        runs[seed] = per
    bar.close()

    # ---- per-arm figures over seeds
    rows = {}
    for arm in c.arms:
        recs = [runs[s]["arms"][arm] for s in c.seeds]
        accs = [r["result"].best().accuracy if r["result"].best() else np.nan for r in recs]
        oods = [r["ood"] for r in recs]
        reach = []
        for s, r in zip(c.seeds, recs):
            thr = runs[s]["best_any"] - REACH_FRACTION * abs(runs[s]["best_any"])
            reach.append(evals_to_reach(r["result"].best_so_far(), thr))
        props = sum(r["result"].proposals for r in recs)
        evald = sum(r["evaluations"] for r in recs)
        luts = [r["result"].best().resources["lut"] if r["result"].best() else np.nan for r in recs]
        held = [r["result"].best(c.target) for r in recs] if c.target is not None else []
        # a seed where the arm found no design holding the target counts as the LUT budget (or 10^5)
        target_luts = [h.resources["lut"] if h else (c.lut_budget or 1e5) for h in held]
        rows[arm] = {
            "search_accuracy": mean_std(np.nan_to_num(accs, nan=0.0)),
            "heldout_accuracy": mean_std(np.nan_to_num(oods, nan=0.0)),
            "search_accuracy_per_seed": accs, "heldout_accuracy_per_seed": oods,
            "feasible_found": int(sum(np.isfinite(accs))),
            "evals_to_reach_per_seed": reach,
            "evals_to_reach_mean": float(np.mean([r if r is not None else c.budget + 1 for r in reach])),
            "reached": int(sum(r is not None for r in reach)),
            # proposals that became evaluations (the start design is evaluated without a proposal)
            "valid_rate": (evald - len(recs)) / props if props else 1.0,
            "scope_rejected": int(sum(r["result"].scope_rejected for r in recs)),
            "scope_rejected_per_seed": [int(r["result"].scope_rejected) for r in recs],
            "cross_factor_proposals_per_seed": [int(r["result"].cross_factor) for r in recs],
            "cross_factor_pairs_evaluated": _pair_counts(recs),
            "invalid": int(sum(r["result"].invalid for r in recs)),
            "multi_factor_edit_rate": float(sum(r["result"].multi_factor for r in recs)
                                            / max(1, sum(len(r["result"].history) - 1 for r in recs))),
            "factors_edited": {f: int(sum(r["result"].factors.get(f, 0) for r in recs))
                               for f in ("BASIS", "NUMERICS", "TOPOLOGY", "SCHEDULE")},
            "best_lut_surrogate_mean": float(np.nanmean(luts)) if np.isfinite(luts).any() else None,
            "target_lut": mean_std(target_luts) if held else None,
            "target_lut_per_seed": [h.resources["lut"] if h else None for h in held] if held else None,
            "target_found": int(sum(h is not None for h in held)) if held else None,
            "evaluations": [r["evaluations"] for r in recs],
            "seconds": float(sum(r["seconds"] for r in recs)),
        }
    pre_acc = mean_std([runs[s]["preset"]["eval"].accuracy for s in c.seeds])
    pre_ood = mean_std([runs[s]["preset"]["ood"] for s in c.seeds])

    # ---- finalists, Yosys check, the returned spec
    cands = {}
    for s in c.seeds:
        for arm in c.arms:
            for e in runs[s]["arms"][arm]["result"].history:
                if e.feasible:
                    key = e.spec.to_toml()
                    if key not in cands or e.accuracy < cands[key][0].accuracy:  # worst seed it was seen on
                        cands[key] = (e, arm, s)
    finalists = list(cands.values())
    if c.target is not None:
        finalists = sorted([f for f in finalists if f[0].accuracy >= c.target], key=lambda f: f[0].resources["lut"])
    else:
        finalists = sorted(finalists, key=lambda f: -f[0].accuracy)
    verified, chosen = [], None
    for e, arm, s in finalists[: c.verify_top]:
        if c.progress:
            print(f"autotune: Yosys check of a finalist from {arm} (seed {s}) ...", flush=True)
        try:
            yres = yosys_resources(e.spec, c.family)
        except Exception as exc:  # a flow failure rules the finalist out and is reported
            verified.append({"arm": arm, "seed": s, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        ok = within(budgets, {**yres, "lut": yres["lut"], "dsp": yres["dsp"]})
        verified.append({"arm": arm, "seed": s, "spec": _summary(e.spec), "accuracy": e.accuracy,
                         "surrogate": {k: e.resources[k] for k in ("lut", "ff", "dsp")},
                         "yosys": {k: yres[k] for k in ("lut", "ff", "dsp")}, "within_budgets": ok,
                         "surrogate_rel_error": {k: abs(e.resources[k] - yres[k]) / max(yres[k], 1)
                                                 for k in ("lut", "ff", "dsp")}})
        if ok:
            chosen = (e, arm, s, yres)
            break
    if chosen is None and c.verify_top == 0 and finalists:
        e, arm, s = finalists[0]
        chosen = (e, arm, s, None)

    result = {
        "config": recorded_config(c),
        "accuracy": ACCURACY_NAME[kind], "heldout_task": HELDOUT[c.task],
        "budget_unit": "golden-model stream evaluations per arm and seed (invalid or out-of-scope proposals "
                       "are refused before evaluation and not counted)",
        "arms": rows,
        "preset": {"name": preset.name, "search_accuracy": pre_acc, "heldout_accuracy": pre_ood,
                   "surrogate_lut": runs[c.seeds[0]]["preset"]["eval"].resources["lut"],
                   "feasible": bool(runs[c.seeds[0]]["preset"]["eval"].feasible)},
        "surrogate": {"calibration_points": len(surrogate.points), "loo_relative_error": loo},
        "verified": verified,
        "coupling": coupling,
        "guard": {"entangled_pairs": coupling["entangled"] if coupling else "all",
                  "arms": list(GUARDED_ARMS),
                  "rule": "a scoped proposal is refused when it changes a field of a factor entangled with the "
                          "routed one (or a frozen field); other cross-factor changes pass"},
    }
    if control is not None:
        result["positive_control"] = control
    if negative is not None:
        result["negative_control"] = negative
    budget_obj = {"evaluations_per_arm": c.budget, "unit": "golden-model stream evaluations"}
    if c.target is None:
        base = {a: rows[a]["heldout_accuracy"][0] for a in c.arms if a != "spark"}
        base["preset"] = pre_ood[0]
        paired = None
        if len(c.seeds) >= 2:
            per = {a: np.nan_to_num(rows[a]["heldout_accuracy_per_seed"], nan=-1.0) for a in c.arms}
            paired = {a: paired_difference(per["spark"], per[a]) for a in c.arms if a != "spark"}
        result["headline"] = headline(
            f"held-out drift ({HELDOUT[c.task]}) {ACCURACY_NAME[kind]} of each arm's best design within the budgets",
            "spark", rows["spark"]["heldout_accuracy"][0], base, budget=budget_obj,
            seeds=list(c.seeds), direction="higher", std=rows["spark"]["heldout_accuracy"][1],
            baseline_std={**{a: rows[a]["heldout_accuracy"][1] for a in c.arms if a != "spark"}, "preset": pre_ood[1]},
            paired=paired)
    else:
        pre_lut = runs[c.seeds[0]]["preset"]["eval"].resources["lut"]
        paired = None
        if len(c.seeds) >= 2:
            per = {a: [v if v is not None else (c.lut_budget or 1e5) for v in rows[a]["target_lut_per_seed"]]
                   for a in c.arms}
            paired = {a: paired_difference(per["spark"], per[a]) for a in c.arms if a != "spark"}
        result["headline"] = headline(
            f"surrogate LUT of the smallest design within the budgets whose search {ACCURACY_NAME[kind]} is "
            f">= {c.target} (a seed without one counts as the LUT budget)",
            "spark", rows["spark"]["target_lut"][0],
            {**{a: rows[a]["target_lut"][0] for a in c.arms if a != "spark"}, "preset": pre_lut},
            budget=budget_obj, seeds=list(c.seeds), direction="lower", std=rows["spark"]["target_lut"][1],
            baseline_std={a: rows[a]["target_lut"][1] for a in c.arms if a != "spark"}, paired=paired)

    with atomic_output_dir(c.out) as stage:
        if chosen is not None:
            e, arm, s, yres = chosen
            heldout = runs[s]["heldout"]
            spec = e.spec.replace(name="autotune-best")
            ood = score_on(e.spec, heldout, kind)
            mode = f"smallest LUT with accuracy >= {c.target}" if c.target is not None else "most accurate"
            head = [f"# onchip autotune: {mode} design within the budgets, found by {arm} (seed {s})",
                    f"# search {ACCURACY_NAME[kind]} {e.accuracy:.4f}, held-out drift {ood:.4f}",
                    (f"# Yosys {c.family}: LUT {yres['lut']} FF {yres['ff']} DSP {yres['dsp']}" if yres else
                     "# not checked with Yosys (--verify-top 0): resources are the surrogate's"),
                    f"# II {e.resources['initiation_interval']} cycles, latency {e.resources['latency_cycles_update']} cycles",
                    f"# use: onchip run --task {'qubit-readout' if kind == 'readout' else 'drift-regression'} "
                    f"--model {spec.kind} --spec best_spec.toml ; onchip generate --spec best_spec.toml"]
            (stage / "best_spec.toml").write_text("\n".join(head) + "\n" + spec.to_toml())
            result["best"] = {"arm": arm, "seed": s, "mode": mode, "spec": _summary(e.spec),
                              "search_accuracy": e.accuracy, "heldout_accuracy": ood,
                              "surrogate": {k: e.resources[k] for k in ("lut", "ff", "dsp")},
                              "yosys": ({k: yres[k] for k in ("lut", "ff", "dsp")} if yres else None),
                              "initiation_interval": e.resources["initiation_interval"],
                              "latency_cycles_update": e.resources["latency_cycles_update"]}
        else:
            result["best"] = None
        front = _pareto(runs, c)
        result["pareto_front"] = [{"accuracy": e.accuracy, "lut_surrogate": e.resources["lut"], "arm": arm,
                                   "seed": s, "spec": _summary(e.spec)} for e, arm, s in front]
        result["seconds"] = time.perf_counter() - t_start
        _plots(stage, runs, c, kind, front, result)
        write_metrics(stage, result, c.command)
        write_results(stage, f"onchip autotune: {c.task}", c.command or "onchip autotune", _markdown(result, c, kind))

        write_csv(stage / "pareto.csv", ["accuracy", "lut_surrogate", "arm", "seed", "spec"],
                  [[f"{e.accuracy:.6f}", f"{e.resources['lut']:.0f}", arm, s, _summary(e.spec)] for e, arm, s in front])
    if c.progress:
        print(_markdown(result, c, kind))
    return result


def _pareto(runs, c):
    """Non-dominated (higher accuracy, fewer surrogate LUTs) candidates of every arm and seed, by LUT."""
    pts = []
    for s in c.seeds:
        for arm in c.arms:
            for e in runs[s]["arms"][arm]["result"].history:
                if e.accuracy > -np.inf:
                    pts.append((e, arm, s))
    pts.sort(key=lambda p: (p[0].resources["lut"], -p[0].accuracy))
    front, best = [], -np.inf
    for p in pts:
        if p[0].accuracy > best:
            front.append(p)
            best = p[0].accuracy
    return front


def _plots(stage, runs, c, kind, front, result) -> None:
    from onchip.plotting import pyplot


    plt = pyplot()
    colors = {a: plt.cm.tab10(i) for i, a in enumerate(ARMS)}
    fig, ax = plt.subplots(figsize=(8, 5))
    for arm in c.arms:
        xs, ys = [], []
        for s in c.seeds:
            for e in runs[s]["arms"][arm]["result"].history:
                xs.append(e.resources["lut"])
                ys.append(e.accuracy)
        ax.scatter(xs, ys, s=9, alpha=0.45, color=colors[arm], label=arm)
    ax.step([e.resources["lut"] for e, _, _ in front], [e.accuracy for e, _, _ in front], where="post",
            color="k", lw=1.2, label="Pareto front (all arms)")
    pre = runs[c.seeds[0]]["preset"]["eval"]
    ax.scatter([pre.resources["lut"]], [pre.accuracy], marker="s", s=50, color="k", label=f"preset {PRESET_OF[c.task]}")
    if c.lut_budget:
        ax.axvline(c.lut_budget, color="r", ls="--", lw=0.9, label=f"LUT budget {c.lut_budget:g}")
    if c.target is not None:
        ax.axhline(c.target, color="g", ls=":", lw=0.9, label=f"target {c.target:g}")
    for v in result["verified"]:
        if "yosys" in v:
            ax.scatter([v["yosys"]["lut"]], [v["accuracy"]], marker="x", s=60, color="m")
    if result.get("best") and result["best"]["yosys"]:
        ax.scatter([result["best"]["yosys"]["lut"]], [result["best"]["search_accuracy"]], marker="*", s=180,
                   color="gold", edgecolor="k", label="returned design (Yosys LUT)", zorder=5)
    accs = [e.accuracy for e, _, _ in front]
    lo = max(min(accs) - 0.05, np.quantile([e.accuracy for s in c.seeds for a in c.arms
                                            for e in runs[s]["arms"][a]["result"].history], 0.2) - 0.05)
    ax.set_ylim(lo, max(accs) + 0.02 * (max(accs) - lo + 1e-3))
    ax.set_xscale("log")
    ax.set_xlabel("LUT (surrogate; x = Yosys-checked finalists)")
    ax.set_ylabel(f"search-stream {ACCURACY_NAME[kind]}")
    ax.set_title(f"autotune on {c.task}: accuracy vs LUT, every evaluated design")
    ax.legend(fontsize=7, loc="lower right")
    save(fig, stage / "pareto.png")

    fig, ax = plt.subplots(figsize=(8, 4.5))
    floor = -1.0 if kind == "regression" else 0.0  # the lowest accuracy: a seed without a feasible design yet
    for arm in c.arms:
        gaps = []
        for s in c.seeds:
            b = np.nan_to_num(runs[s]["arms"][arm]["result"].best_so_far(), nan=floor)
            b = np.concatenate([b, np.full(max(0, c.budget - len(b)), b[-1] if len(b) else floor)])[: c.budget]
            gaps.append(runs[s]["best_any"] - b)
        m = np.maximum(np.mean(gaps, axis=0), 1e-5)
        ax.plot(np.arange(1, len(m) + 1), m, color=colors[arm], label=arm, lw=2.0 if arm == "spark" else 1.0)
    ax.axhline(REACH_FRACTION, color="0.5", ls=":", lw=0.8, label="1% (the 'reached' line for accuracy ~1)")
    ax.set_yscale("log")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("best accuracy any arm found - arm's best so far\n(mean over seeds; none feasible = lowest score)")
    ax.set_title("gap to the best design found, within the budgets (lower is better)")
    ax.legend(fontsize=8)
    save(fig, stage / "curves.png")

    cp, pc = result.get("coupling"), result.get("positive_control")
    if cp or pc:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        ax = axes[0]
        if cp:
            names = [f"{r['a'][:4]} x {r['b'][:4]}" for r in cp["pairs"]]
            shares = [r["interaction_share"] for r in cp["pairs"]]
            ax.bar(range(len(names)), shares, color=["C3" if r["entangled"] else "C0" for r in cp["pairs"]])
            for i, r in enumerate(cp["pairs"]):
                ax.text(i, shares[i], f"p={r['p_ab_perm']:.2g}\n|I|={r['max_abs_interaction']:.3f}", ha="center",
                        va="bottom", fontsize=7)
            ax.axhline(cp["min_share"], color="0.4", ls=":", lw=0.9, label=f"share threshold {cp['min_share']}")
            ax.set_xticks(range(len(names)), names, rotation=30, fontsize=8)
            ax.set_ylim(0, max(shares + [cp["min_share"]]) * 1.35 + 1e-3)
            ax.set_ylabel("interaction share SS_AxB / (SS_A + SS_B + SS_AxB)")
            ax.set_title("factor coupling (red: entangled, used by the guard)", fontsize=10)
            ax.legend(fontsize=8)
        else:
            ax.axis("off")
        ax = axes[1]
        if pc:
            nc = result.get("negative_control")
            x = np.arange(len(pc["seeds"]))
            for ctl, style in ((pc, "-"), (nc, ":")):
                diff = np.subtract(ctl["method_values"], ctl["ablation_values"])
                ax.plot(x, diff, "o" + style, label=f"leak across {' x '.join(ctl['leak_pair'])}: "
                        + paired_line("spark - noguard", ctl["paired"], 3).split(": ", 1)[1])
            ax.axhline(0, color="0.5", lw=0.8)
            ax.set_xticks(x, [str(s) for s in pc["seeds"]])
            ax.set_xlabel("seed")
            ax.set_ylabel("anytime objective, spark - spark-noguard")
            ax.set_title("controls: leaky rewriter, golden model only\n(solid: most coupled pair; dotted: least)",
                         fontsize=10)
            ax.legend(fontsize=7)
        else:
            ax.axis("off")
        save(fig, stage / "coupling.png")


def _fmt(ms) -> str:
    return f"{ms[0]:.4f} ± {ms[1]:.4f}"


def results_markdown(result: dict) -> str:
    """``results.md``'s sections rebuilt from a stored ``metrics.json`` (the same text the run wrote): the
    coupling table, the controls, the search comparison with its paired differences, the returned design
    and the surrogate's error. The run's settings are read from ``result["config"]``."""
    from types import SimpleNamespace

    c = SimpleNamespace(**result["config"])
    return _markdown(result, c, TASK_KIND[c.task])


def _markdown(result, c, kind) -> str:

    arms = result["arms"]
    header = ["arm", f"search {ACCURACY_NAME[kind]}", f"held-out ({result['heldout_task']})",
              "evals to within 1% of best", "reached", "feasible", "valid rate", "scope rejected (per seed)",
              "cross-factor proposals (per seed)", "multi-factor edits", "best LUT (surr.)"]
    if c.target is not None:
        header[2] = f"held-out ({result['heldout_task']}) of the smallest holding {c.target}"
        header.append(f"smallest LUT (surr.) holding {c.target} (seeds found)")
    rows = []
    for a in c.arms:
        r = arms[a]
        rows.append([a, _fmt(r["search_accuracy"]), _fmt(r["heldout_accuracy"]), f"{r['evals_to_reach_mean']:.1f}",
                     f"{r['reached']}/{len(c.seeds)}", f"{r['feasible_found']}/{len(c.seeds)}",
                     f"{r['valid_rate']:.2f}", "/".join(map(str, r["scope_rejected_per_seed"])),
                     "/".join(map(str, r["cross_factor_proposals_per_seed"])), f"{r['multi_factor_edit_rate']:.2f}",
                     "-" if r["best_lut_surrogate_mean"] is None else f"{r['best_lut_surrogate_mean']:.0f}"]
                    + ([f"{r['target_lut'][0]:.0f} ± {r['target_lut'][1]:.0f} ({r['target_found']}/{len(c.seeds)})"]
                       if c.target is not None else []))
    p = result["preset"]
    rows.append([f"preset {p['name']} (reference)", _fmt(p["search_accuracy"]), _fmt(p["heldout_accuracy"]), "-", "-",
                 "yes" if p["feasible"] else "no (over budget)", "-", "-", "-", "-", f"{p['surrogate_lut']:.0f}"]
                + (["-"] if c.target is not None else []))
    budgets = ", ".join(f"{k} {v:g}" for k, v in (("LUT", c.lut_budget), ("DSP", c.dsp_budget), ("II", c.ii_max),
                                                  ("latency ns", c.latency_max_ns)) if v is not None) or "none"
    text = [f"Budgets: {budgets}; {c.budget} evaluations per arm and seed; seeds {list(c.seeds)}; "
            f"{c.samples} samples per stream; accuracy = {ACCURACY_NAME[kind]} over the whole stream "
            "(mean ± std over seeds).", ""]
    cp = result.get("coupling")
    if cp:
        text += ["## Factor coupling, measured before the search", "",
                 f"Per factor pair: 3 x 3 levels of one probe field each around the preset (init scale "
                 f"{cp['base_init_scale']:g}), the other fields at the preset, {len(cp['seeds'])} seeds "
                 f"(stream and initial parameters), golden-model {ACCURACY_NAME[kind]} ({cp['evaluations']} "
                 "evaluations, not part of any arm's budget). Two-way ANOVA; interaction share = SS_AxB / "
                 "(SS_A + SS_B + SS_AxB); largest |interaction| = largest cell deviation from the additive model "
                 f"(score units). Entangled = permutation p < {cp['alpha']}/{cp['bonferroni_pairs']} and share >= "
                 f"{cp['min_share']}.", ""]
        prow = [[f"{r['a']} x {r['b']}", f"{r['probe_a']} x {r['probe_b']}", f"{r['interaction_share']:.3f}",
                 f"{r['partial_eta2_ab']:.3f}", f"{r['max_abs_interaction']:.4f}", f"{r['f_ab']:.3g}",
                 f"{r['p_ab']:.2g}", f"{r['p_ab_perm']:.3g}", "yes" if r["entangled"] else "no"]
                for r in cp["pairs"]]
        text += [markdown_table(["pair", "probes", "interaction share", "partial eta^2", "largest |interaction|",
                                 "F (AxB)", "p (F)", "p (permutation)", "entangled"], prow), "",
                 "Scope guard's entanglement map: " + (", ".join(f"{a} x {b}" for a, b in cp["entangled"]) or "none")
                 + f" (used by {', '.join(GUARDED_ARMS)}).", ""]
    pc, nc = result.get("positive_control"), result.get("negative_control")
    if pc:
        text += ["## Positive and negative control", "", f"Metric: {pc['metric']}.", ""]
        for name, ctl, verdict in (("Positive", pc, "sensitive" if pc["sensitive"] else "not sensitive: the "
                                    "experiment does not see the guard matter where the factors are measured coupled"),
                                   ("Negative", nc, "holds zero" if nc["holds_zero"] else "excludes zero: the arms "
                                    "differ with nothing for the guard to refuse")):
            rej = [d["scope_rejected"] for d in ctl["per_seed"]["spark"]]
            text += [f"- {name} control ({ctl['setting']}): spark {np.mean(ctl['method_values']):.4f}, spark-noguard "
                     f"{np.mean(ctl['ablation_values']):.4f}; " + paired_line("spark - spark-noguard", ctl["paired"], 4)
                     + f"; {verdict}; proposals the guard refused per seed: {'/'.join(map(str, rej))}"]
        text += [""]
    text += ["## Search comparison", "", markdown_table(header, rows)]
    h = result["headline"]
    if h.get("paired"):
        text += ["Paired differences, spark - arm, of the headline per seed (Student t ci95):", ""]
        text += [f"- {paired_line(a, v, 5 if c.target is None else 0)}" for a, v in h["paired"].items()]
        text += [""]
    guarded = [f"{a}: " + (", ".join(f"{k} {v}" for k, v in arms[a]["cross_factor_pairs_evaluated"].items()) or "none")
               for a in c.arms if a in arms and arms[a]["cross_factor_pairs_evaluated"]]
    if guarded:
        text += ["Evaluated multi-factor edits per factor pair (all seeds): " + "; ".join(guarded) + ".", ""]
    b = result.get("best")
    if b:
        y = b["yosys"]
        text += [f"Returned design ({b['mode']}, from {b['arm']}, seed {b['seed']}): {b['spec']}; search "
                 f"{b['search_accuracy']:.4f}, held-out {b['heldout_accuracy']:.4f}; "
                 + (f"Yosys {c.family} LUT {y['lut']} FF {y['ff']} DSP {y['dsp']}" if y else "not Yosys-checked")
                 + f" (surrogate LUT {b['surrogate']['lut']:.0f}); II {b['initiation_interval']}, "
                 f"latency {b['latency_cycles_update']} cycles. Written to best_spec.toml.", ""]
    else:
        text += ["No design within the budgets was found (or none passed the Yosys check).", ""]
    loo = result["surrogate"]["loo_relative_error"]
    text += [f"Resource surrogate: {result['surrogate']['calibration_points']} Yosys calibration points, "
             f"leave-one-out relative error median LUT {loo['lut']['median']:.2f} / FF {loo['ff']['median']:.2f} / "
             f"DSP {loo['dsp']['median']:.2f} (max {loo['lut']['max']:.2f} / {loo['ff']['max']:.2f} / "
             f"{loo['dsp']['max']:.2f})."]
    for v in result["verified"]:
        if "yosys" in v:
            text.append(f"- Yosys check ({v['arm']}, seed {v['seed']}): surrogate LUT {v['surrogate']['lut']:.0f} vs "
                        f"Yosys {v['yosys']['lut']}, DSP {v['surrogate']['dsp']:.0f} vs {v['yosys']['dsp']}; "
                        f"within budgets: {v['within_budgets']}")
        else:
            text.append(f"- Yosys check ({v['arm']}, seed {v['seed']}) failed: {v['error']}")
    text += ["", f"Run time {result['seconds']:.0f} s.", ""]
    return "\n".join(text)
