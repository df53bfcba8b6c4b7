"""``onchip quantum-meta``: adaptation-gain scaling law and few-shot budget protocol for one gate.

Method: arXiv 2601.18973 (see onchip.methods.quantum_meta). Writes into --out:
metrics.json (everything measured), law.json (fitted c, beta, R^2 and the
linearity check), gain_vs_K.png (measured G_K with the fitted law) and
gain_vs_variance.png (G at the largest K against sigma^2).
"""

from __future__ import annotations

import argparse
import math


def add_parser(subparsers) -> None:
    """Register the ``quantum-meta`` sub-command."""
    p = subparsers.add_parser(
        "quantum-meta",
        help="meta-learned gate calibration: adaptation-gain scaling law and budget protocol",
        description="Measure G_K ~ c sigma^2 (1 - exp(-beta K)) for a one-qubit X or a CZ gate "
                    "(FOMAML policy, Lindblad simulation), the few-shot budget protocol in and "
                    "out of distribution, and the linear-quadratic check.",
    )
    p.add_argument("--gate", required=True, help="x (one qubit) or cz (two qubits)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    p.add_argument("--out", required=True, help="output folder (replaced on success)")
    p.add_argument("--n-test", type=int, default=16, help="test devices per set (default 16)")
    p.add_argument("--meta-iters", type=int, default=60, help="FOMAML outer iterations (default 60)")
    p.add_argument("--ood-shift", type=float, default=10.0,
                   help="out-of-distribution shift of rates and miscalibrations (default 10)")
    p.add_argument("--fraction", type=float, default=0.9, help="fraction f defining K* (default 0.9)")
    p.add_argument("--no-lqr", action="store_true", help="skip the mass-spring-damper check")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace):
    from onchip.methods.quantum_meta.experiment import ExperimentSettings

    if args.gate not in ("x", "cz"):
        raise ValueError(f"--gate: expected 'x' or 'cz', got {args.gate!r}")
    if args.seed < 0:
        raise ValueError(f"--seed: expected an integer >= 0, got {args.seed}")
    if args.n_test < 2:
        raise ValueError(f"--n-test: expected an integer >= 2, got {args.n_test}")
    if args.meta_iters < 1:
        raise ValueError(f"--meta-iters: expected an integer >= 1, got {args.meta_iters}")
    if not math.isfinite(args.ood_shift) or args.ood_shift < 1:
        raise ValueError(f"--ood-shift: expected a finite value >= 1, got {args.ood_shift}")
    if not 0 < args.fraction < 1:
        raise ValueError(f"--fraction: expected a value in (0, 1), got {args.fraction}")
    s = ExperimentSettings(n_test=args.n_test, meta_iters=args.meta_iters, ood_shift=args.ood_shift,
                           fraction=args.fraction, lqr=not args.no_lqr)
    s.validate()
    return s


def _plots(res: dict, folder) -> None:
    import numpy as np

    from onchip.methods.quantum_meta.scaling import saturating_law
    from onchip.plotting import pyplot

    plt = pyplot()
    sc = res["scaling"]
    ks = np.asarray(sc["K"])
    kf = np.linspace(0, ks[-1], 200)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for s, s2, g, se in zip(sc["sigma"], sc["sigma2"], sc["gain_mean"], sc["gain_stderr"]):
        line = ax.errorbar(ks, g, yerr=se, fmt="o", ms=4, label=f"sigma={s:g}")
        ax.plot(kf, saturating_law(kf, s2, sc["fit"]["c"], sc["fit"]["beta"]), color=line[0].get_color())
    ax.set_xlabel("adaptation steps K")
    ax.set_ylabel("gain G_K = E[L_0 - L_K] (infidelity)")
    f = sc["fit"]
    ax.set_title(f"{res['gate'].upper()}: c={f['c']:.3g}, beta={f['beta']:.3g}, R2={f['r2']:.4f}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "gain_vs_K.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 4))
    s2 = np.asarray(sc["sigma2"])
    gk = np.asarray(sc["gain_mean"])[:, -1]
    lin = sc[f"linearity_G{ks[-1]}_vs_sigma2"]
    ax.plot(s2, gk, "o", label=f"measured G_{ks[-1]}")
    xx = np.linspace(0, s2.max(), 50)
    ax.plot(xx, lin["slope"] * xx + lin["intercept"], "-", label=f"linear fit, R2={lin['r2']:.4f}")
    ax.plot(xx, saturating_law(ks[-1], xx, f["c"], f["beta"]), "--", label="scaling law")
    ax.set_xlabel("task variance sigma^2")
    ax.set_ylabel(f"G_{ks[-1]}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "gain_vs_variance.png", dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Validate the arguments, run the experiment, write metrics, law and plots atomically."""
    settings = _settings(args)  # refuses bad arguments before anything is written

    import torch

    from onchip.io import atomic_output_dir, write_json
    from onchip.methods.quantum_meta.experiment import run_experiment

    torch.set_num_threads(1)
    res = run_experiment(args.gate, args.seed, settings, progress=not args.quiet)
    with atomic_output_dir(args.out) as folder:
        write_json(folder / "metrics.json", res)
        law = {"gate": args.gate, "law": "G_K = c * sigma^2 * (1 - exp(-beta * K))",
               **res["scaling"]["fit"],
               "linearity": res["scaling"][f"linearity_G{settings.k_max}_vs_sigma2"]}
        if "lqr" in res:
            law["lqr_fit"] = res["lqr"]["fit"]
        write_json(folder / "law.json", law)
        _plots(res, folder)
    kr = settings.k_report
    f = res["scaling"]["fit"]
    print(f"{args.gate}: c={f['c']:.4g} beta={f['beta']:.4g} R2={f['r2']:.4f}; "
          f"relative gain K={kr}: in {res['sets']['in_distribution'][f'relative_gain_K{kr}']:.1%}, "
          f"out {res['sets']['out_of_distribution'][f'relative_gain_K{kr}']:.1%} -> {args.out}")
    return 0
