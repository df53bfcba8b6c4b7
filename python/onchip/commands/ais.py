"""``onchip ais``: entropic mirror adaptive importance sampling against PMC, AMIS and an ablation.

Writes ``metrics.json`` (configuration, final and per-iteration diagnostics of every method),
``history.csv`` (one row per method and iteration) and ``metrics.png`` / ``samples.png``.
Method: "Entropic Mirror Monte Carlo", arXiv 2602.03165 (see seeds/ais-entropic-mirror.md).
"""

from __future__ import annotations

import argparse
import csv


def add_parser(subparsers) -> None:
    """Register ``onchip ais``."""
    p = subparsers.add_parser(
        "ais",
        help="adaptive importance sampling: entropic mirror (EM2C) vs PMC, AMIS, no-move ablation",
        description="Run adaptive importance samplers on a target with known log Z and write "
        "per-iteration log Z error, ESS, KL(target||proposal) and mode coverage.",
    )
    p.add_argument("--target", default="gmm4", help="gmm2 | gmm4 | grid25 | funnel (default gmm4)")
    p.add_argument("--dim", type=int, default=10, help="dimension (default 10)")
    p.add_argument("--method", default="all",
                   help="comma-separated subset of em2c,em2c-nomove,pmc,amis or 'all' (default)")
    p.add_argument("--iterations", type=int, default=30, help="iterations per method (default 30)")
    p.add_argument("--samples", type=int, default=1000, help="draws per iteration (default 1000)")
    p.add_argument("--eps", type=float, default=0.5, help="mirror step size in (0, 1] (default 0.5)")
    p.add_argument("--components", type=int, default=None,
                   help="mixture components (default: number of target modes/regions)")
    p.add_argument("--defensive-weight", type=float, default=0.2, help="heavy-tailed weight (default 0.2)")
    p.add_argument("--mcmc-steps", type=int, default=10, help="global-move MH steps (default 10)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, help="output folder (replaced on success)")
    p.set_defaults(func=run)


def _methods(text: str, known: tuple[str, ...]) -> list[str]:
    if text == "all":
        return list(known)
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in known]
    if not names or bad:
        raise ValueError(f"--method: unknown method(s) {bad or text!r}; choose from {', '.join(known)} or 'all'")
    return names


def run(args: argparse.Namespace) -> int:
    """Validate every argument, run the samplers, then write the output folder."""
    from onchip.io import atomic_output_dir, write_json
    from onchip.methods.ais import METHODS, SamplerConfig, make_target, run_sampler
    from onchip.plotting import pyplot

    methods = _methods(args.method, METHODS)
    try:
        target = make_target(args.target, args.dim)
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None
    config = SamplerConfig(
        n_samples=args.samples, iterations=args.iterations, eps=args.eps, n_components=args.components,
        defensive_weight=args.defensive_weight, mcmc_steps=args.mcmc_steps,
    )
    try:
        config.validate()
    except ValueError as exc:
        raise ValueError(f"--{str(exc).replace('_', '-').replace('n-samples', 'samples').replace('n-components', 'components')}") from None
    results = {m: run_sampler(target, m, config, seed=args.seed, progress=True) for m in methods}

    with atomic_output_dir(args.out) as out:
        rows = [dict(method=m, **r.as_dict()) for m, (hist, _) in results.items() for r in hist]
        with open(out / "history.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        write_json(out / "metrics.json", {
            "target": args.target, "dim": args.dim, "log_z": target.log_z, "seed": args.seed,
            "config": config.as_dict(),
            "final": {m: hist[-1].as_dict() for m, (hist, _) in results.items()},
            "history": {m: [r.as_dict() for r in hist] for m, (hist, _) in results.items()},
        })
        plt = pyplot()
        fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
        panels = [("kl", "KL(target || proposal) [nats]", True), ("log_z_error", "|log Z error|", True),
                  ("ess_fraction", "ESS / N", False), ("mode_coverage", "mode coverage", False)]
        for ax, (key, label, log) in zip(axes, panels):
            for m, (hist, _) in results.items():
                vals = [abs(getattr(r, key)) if key == "log_z_error" else getattr(r, key) for r in hist]
                ax.plot([r.iteration for r in hist], vals, marker=".", label=m)
            ax.set(xlabel="iteration", title=label, yscale="log" if log else "linear")
        axes[0].legend()
        fig.suptitle(f"{args.target}, d={args.dim}, seed {args.seed}")
        fig.tight_layout()
        fig.savefig(out / "metrics.png", dpi=80)
        fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 4), squeeze=False)
        import numpy as np

        truth = target.sample(2000, np.random.default_rng(args.seed))
        for ax, (m, (_, final)) in zip(axes[0], results.items()):
            draws = final["mixture"].sample(1000, np.random.default_rng(args.seed))
            ax.scatter(truth[:, 0], truth[:, 1], s=2, c="0.7", label="target")
            ax.scatter(draws[:, 0], draws[:, 1], s=2, c="C3", label="final proposal")
            ax.set(title=m, xlabel="x1" if args.target != "funnel" else "v", ylabel="x2")
        axes[0][0].legend(markerscale=4)
        fig.tight_layout()
        fig.savefig(out / "samples.png", dpi=80)
        plt.close("all")
    for m, (hist, _) in results.items():
        r = hist[-1]
        print(f"{m:12s} KL={r.kl:.3f} logZerr={r.log_z_error:+.3f} ESS/N={r.ess_fraction:.3f} "
              f"coverage={r.mode_coverage:.2f}")
    return 0
