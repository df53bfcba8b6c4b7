"""``onchip sweep``: run a TOML sweep definition into a table and plots."""

from __future__ import annotations

from pathlib import Path

from . import _args

DESCRIPTION = """Run every point of a sweep definition (grid over spec fields; resources, pnr, latency,
accuracy per point), resuming from the point cache, and write results.csv, points.json and the
plots into --out. Points run in local processes, or on a Dask cluster with --scheduler. The exit
status is 1 when any point failed (the table of the others is written, the failures are listed);
a point whose worker was lost is computed again by the next run, other failures with --retry-failed.
--report computes nothing: it writes the definition's [[table]]s from --out's results.csv into their
pages (between each table's marker lines).
The definition format is described in docs/sweeps.md (example: sweeps/example/sweep.toml)."""


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a sweep definition (TOML) into a table and plots", description=DESCRIPTION)
    p.add_argument("definition", help="sweep TOML file, e.g. sweeps/example/sweep.toml")
    _args.add_out(p)
    p.add_argument("--jobs", type=int, default=1, help="local worker processes (default 1)")
    p.add_argument("--scheduler", default=None, help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--cache", default=None, help="finished-point cache folder (default: <onchip cache>/sweeps)")
    p.add_argument("--retry-failed", action="store_true", help="recompute points cached as errors")
    p.add_argument("--report", action="store_true",
                   help="only write the [[table]]s from --out's results.csv into their pages (computes nothing)")
    _args.add_quiet(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def failure_lines(records: list[dict]) -> list[str]:
    """One line per failed point: its grid parameters and the first line of its error."""
    lines = []
    for r in records:
        if r["status"] == "error":
            first = (r["error"] or "").strip().splitlines()
            params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
            lines.append(f"  failed {params}: {first[0] if first else '(no message)'}")
    return lines


def run(args) -> int:
    import sys

    from ..sweep import run_sweep
    from ..sweep.pages import write_pages
    from ..sweep.schema import load_definition

    if args.report:
        definition = load_definition(args.definition)
        csv_path = f"{args.out}/results.csv"
        if not definition.get("table"):
            raise ValueError(f"--report: {args.definition} has no [[table]] to write")
        pages = write_pages(definition, csv_path)
        print(f"wrote {len(definition['table'])} table(s) from {csv_path} into {', '.join(map(str, pages))}")
        return 0

    records = run_sweep(args.definition, args.out, jobs=args.jobs, scheduler=args.scheduler, cache=args.cache,
                        retry_failed=args.retry_failed, progress=not args.quiet)
    counts = {s: sum(r["status"] == s for r in records) for s in ("ok", "error", "pending")}
    print(f"{len(records)} points: {counts['ok']} ok, {counts['error']} failed")
    held = sorted(p.name for p in Path(args.out).iterdir() if not p.name.startswith("."))
    print(f"wrote {args.out}/ ({', '.join(held)})")
    failed = failure_lines(records)
    if failed:
        print("\n".join(failed), file=sys.stderr)
        lost = sum(bool(r.get("lost")) for r in records)
        hint = []
        if lost:
            hint.append(f"{lost} lost with their worker are computed again by the next run")
        if counts["error"] > lost:
            hint.append("rerun with --retry-failed to recompute the others")
        print(f"onchip sweep: {counts['error']} point(s) failed; " + "; ".join(hint), file=sys.stderr)
        return 1
    return 0
