"""Acrobot under a dynamics change: KAN, two-layer KAN and MLP Q-functions, several seeds.

Runs ``onchip run --task acrobot`` (golden backend, default drift: link 2 becomes 1.25 times as
heavy and as long at half the run) for every (spec, seed) into ``runs/<spec>-s<seed>/`` and
writes ``results.md`` (per-run and mean rows) and ``steps.png`` (mean steps per episode over
the seeds, learning and frozen, change marked).

    python sweeps/acrobot/sweep.py [--jobs 2] [--episodes 200] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPECS = {"kan-acrobot": "kan", "kan2-acrobot": "kan", "mlp-acrobot": "mlp"}


def one(spec: str, seed: int, episodes: int) -> dict:
    from onchip.control import run_acrobot_job

    return run_acrobot_job(model=SPECS[spec], spec=spec, out=HERE / "runs" / f"{spec}-s{seed}",
                           episodes=episodes, seed=seed, progress=False)


def _f(v, before: float = 0.0, cap: int = 500) -> str:
    if v is None:
        return "n/a" if before >= 0.9 * cap else "never"
    return f"{v:.0f}" if isinstance(v, float) else str(v)


def report(rows: list[dict], command: str) -> None:
    from onchip.plotting import pyplot

    backends = sorted({r["backend"] for r in rows})
    episodes = sorted({r["episodes"] for r in rows})
    changes = sorted({r["changes"][0]["episode"] for r in rows})
    setting = (f"{', '.join(backends)} backend, {', '.join(map(str, episodes))} episodes, change at episode "
               f"{', '.join(map(str, changes))}")
    measured = HERE / "runs" / "measured.json"
    when = ""
    if measured.is_file():  # written when the runs were made (a --report-only rewrite keeps it)
        m = json.loads(measured.read_text())
        command = m["command"]  # the runs' command, also under --report-only
        when = (f" Seconds: each run's wall time, measured {m['date']} with {m['jobs']} runs at a time on "
                f"{m['cpu_count']} cores (load average {m['load_before']:.1f} before, {m['load_after']:.1f} after); "
                "each run's metrics.json records the versions and threads it ran on.")
    lines = ["# Acrobot swing-up under a dynamics change", "", f"Command: `{command}` ({setting})", "",
             "Steps to swing up (cap 500; lower is better), mean over windows of 20 episodes: before the "
             "change, the first 20 after it and the last 20 of the run; recovery = episodes after the change "
             "until a 20-episode window (all after the change) is within 10 % of the level before it "
             "(never: no such window in the run; n/a: the policy had not learned the task, mean steps before the change "
             ">= 450). Frozen: the same policy with learning switched off at "
             "the change." + when, "",
             "| spec | seed | before | first 20 after | last 20 | recovery | frozen: first 20 after | "
             "frozen: last 20 | frozen: recovery | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, f = r["changes"][0], r["frozen_baseline"]
        lines.append(f"| {r['spec']} | {r['seed']} | {c['steps_before']:.0f} | {c['steps_after_first']:.0f} | "
                     f"{c['steps_after']:.0f} | {_f(c['recovery_episodes'], c['steps_before'])} | {f['steps_after_first']:.0f} | "
                     f"{f['steps_after']:.0f} | {_f(f['recovery_episodes'], f['steps_before'])} | {r['seconds']:.0f} |")
    lines += ["", "Means over seeds (recovered: runs that recovered / runs):", "",
              "| spec | before | first 20 after | last 20 | recovered | frozen: first 20 after | frozen: last 20 | "
              "frozen recovered |", "|---|---|---|---|---|---|---|---|"]
    for spec in SPECS:
        rs = [r for r in rows if r["spec"] == spec]
        if not rs:
            continue
        c = [r["changes"][0] for r in rs]
        f = [r["frozen_baseline"] for r in rs]

        def m(xs, key):
            return f"{np.mean([x[key] for x in xs]):.0f}"

        rec = sum(x["recovery_episodes"] is not None for x in c)
        frec = sum(x["recovery_episodes"] is not None for x in f)
        lines.append(f"| {spec} | {m(c, 'steps_before')} | {m(c, 'steps_after_first')} | {m(c, 'steps_after')} | "
                     f"{rec}/{len(rs)} | {m(f, 'steps_after_first')} | {m(f, 'steps_after')} | {frec}/{len(rs)} |")
    (HERE / "results.md").write_text("\n".join(lines) + "\n")

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    window = 20
    for n, spec in enumerate(SPECS):
        rs = [r for r in rows if r["spec"] == spec]
        if not rs:
            continue
        for key, style in (("steps_per_episode", "-"), ("frozen_steps_per_episode", ":")):
            mean = np.mean([r[key] for r in rs], axis=0)
            roll = np.convolve(mean, np.ones(window) / window, mode="valid")
            label = f"{spec} ({'learning' if style == '-' else 'frozen at the change'}), {len(rs)} seeds"
            start = 0 if style == "-" else rs[0]["changes"][0]["episode"]
            x = np.arange(window - 1, len(mean))
            keep = x >= start + window - 1 if style == ":" else slice(None)
            ax.plot(x[keep], roll[keep], style, color=f"C{n}", lw=1.5, label=label)
    change = rows[0]["changes"][0]["episode"]
    ax.axvline(change, color="0.4", ls="--", lw=0.8, label=f"change (episode {change}): {rows[0]['drift']['event'][0]['label'] if rows[0]['drift'].get('event') else ''}")
    ax.set_xlabel("episode")
    ax.set_ylabel(f"steps (mean: seeds, {window} episodes)")
    ax.set_ylim(0, 520)
    ax.set_title("Acrobot: Q-function learned online on the golden model")
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), fontsize=8, frameon=False, ncol=2)
    fig.tight_layout()
    fig.savefig(HERE / "steps.png", dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--specs", default=",".join(SPECS))
    p.add_argument("--report-only", action="store_true", help="rewrite results.md and steps.png from runs/")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    command = "python sweeps/acrobot/sweep.py " + " ".join(sys.argv[1:] if argv is None else argv)
    jobs = [(spec, seed) for spec in args.specs.split(",") for seed in seeds]
    if not args.report_only:
        from tqdm import tqdm

        load_before = os.getloadavg()[0]
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(one, spec, seed, args.episodes) for spec, seed in jobs]
            for fut in tqdm(futures, desc="acrobot sweep", unit="run"):
                fut.result()
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        (HERE / "runs" / "measured.json").write_text(json.dumps(
            {"command": command, "date": date, "jobs": args.jobs, "cpu_count": os.cpu_count(), "load_before": load_before,
             "load_after": os.getloadavg()[0]}, indent=2) + "\n")
    rows = []
    for spec in SPECS:
        for seed in seeds:
            path = HERE / "runs" / f"{spec}-s{seed}" / "metrics.json"
            if path.is_file():
                rows.append(json.loads(path.read_text()))
    from onchip.control import change_metrics

    for r in rows:  # the figures by the current definitions, from the recorded steps (one change)
        c = r["changes"][0]["episode"]
        r["changes"] = [change_metrics(r["steps_per_episode"], c, cap=r["max_steps"])]
        r["frozen_baseline"] = change_metrics(r["frozen_steps_per_episode"], c, cap=r["max_steps"])
    report(rows, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
