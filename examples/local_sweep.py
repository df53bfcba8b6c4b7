"""A small sweep on a local Dask cluster: KAN grid size against accuracy on drifting regression.

    python examples/local_sweep.py [--quick] [--workers 2] [--scheduler ADDRESS] [--out DIR]

Starts a ``distributed.LocalCluster`` (or uses a running scheduler given by ``--scheduler``),
hands it to :func:`onchip.run_sweep` and prints the table. Finished points are cached in
``--out``/cache, so a second run recomputes nothing; ``results.csv``, ``points.json`` and the
plot are written to ``--out``/sweep.
"""

import argparse
import time
from pathlib import Path

import onchip


def definition(quick: bool) -> dict:
    """The sweep definition, the same structure as a sweep TOML file."""
    backends = ["golden"] if quick else ["golden", "float"]   # the float twin steps in PyTorch: slower
    return {
        "sweep": {"name": "kan-grid-size", "compute": ["accuracy"]},
        "base": {"preset": "kan-regression"},
        "grid": [{"grid_size": [4, 8] if quick else [4, 8, 16, 32]}],
        "accuracy": {"task": "drift-regression", "samples": 3000 if quick else 20_000, "seed": 0,
                     "backends": backends},
        "plot": [{"x": "grid_size", "y": [f"{b}_mse" for b in backends], "file": "mse.png",
                  "title": "KAN on drift-regression: MSE vs grid size"}],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two points, short streams, threads")
    ap.add_argument("--workers", type=int, default=2, help="local Dask workers")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler (no local cluster)")
    ap.add_argument("--out", type=Path, default=Path("out/examples/local_sweep"))
    args = ap.parse_args(argv)
    d = definition(args.quick)

    t = time.perf_counter()
    if args.scheduler:
        records = onchip.run_sweep(d, args.out / "sweep", scheduler=args.scheduler,
                                   cache=args.out / "cache", progress=False)
    else:
        from distributed import LocalCluster

        # --quick: worker threads in this process (no process start-up); else worker processes
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=not args.quick,
                          dashboard_address=None) as cluster:
            print(f"Dask scheduler: {cluster.scheduler_address}  workers: {args.workers}")
            records = onchip.run_sweep(d, args.out / "sweep", scheduler=cluster.scheduler_address,
                                       cache=args.out / "cache", progress=False)
    seconds = time.perf_counter() - t

    columns = [f"{b}_mse" for b in d["accuracy"]["backends"]]
    print(f"{'grid_size':>9} {'params':>6} {'status':>6} " + " ".join(f"{c:>11}" for c in columns))
    for rec in records:
        r = rec["results"]
        print(f"{rec['params']['grid_size']:>9} {r.get('param_count', ''):>6} {rec['status']:>6} "
              + " ".join(f"{r.get(c, float('nan')):>11.3e}" for c in columns))
    ok = sum(rec["status"] == "ok" for rec in records)
    print(f"points: {len(records)}  ok: {ok}  seconds: {seconds:.1f}")
    print(f"table: {args.out / 'sweep' / 'results.csv'}")
    return 0 if ok == len(records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
