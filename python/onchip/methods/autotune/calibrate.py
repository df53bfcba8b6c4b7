"""Build the calibration table of the resource surrogate: Yosys resources of specs drawn from the space.

``python -m onchip.methods.autotune.calibrate --points 40 --out calibration.toml`` synthesizes
``points`` specs drawn uniformly from :mod:`.space` (seeded; at most ``--max-params`` parameters, as
Yosys time grows with the design) for the
``xcup`` family and writes one ``[[point]]`` per spec (its TOML text, LUT, FF, DSP, II, latency).
``--from-sweep sweeps/resources/results/results.csv --append`` adds the rows of the committed
resources sweep (presets with ``grid_size`` / ``hidden`` / ``datapath`` changed, Yosys xcup) as
points. The committed table (``calibration.toml`` beside this file, package data) was made
this way; the surrogate (:mod:`.resources`) is fitted to it at run time, with no file of the
checkout read.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import tomli_w


def main(argv=None) -> int:
    from ...flow.yosys import synthesize
    from ...hw import generate
    from .space import sample_spec

    p = argparse.ArgumentParser()
    p.add_argument("--points", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--family", default="xcup")
    p.add_argument("--max-params", type=int, default=40, help="skip drawn specs with more parameters")
    p.add_argument("--kind", choices=("any", "kan", "mlp"), default="any", help="only draws of this kind")
    p.add_argument("--append", action="store_true", help="add to the points already in --out")
    p.add_argument("--from-sweep", metavar="CSV", help="add the ok rows of a resources sweep table instead "
                   "of drawing specs (sweeps/resources/results/results.csv)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.from_sweep:
        return _from_sweep(Path(args.from_sweep), Path(args.out), args.append)
    rng = np.random.default_rng(args.seed)
    specs = []
    while len(specs) < args.points:
        spec = sample_spec(rng, int(rng.integers(1, 3)))
        if spec.parameter_count() <= args.max_params and args.kind in ("any", spec.kind):
            specs.append(spec)
    points = []
    if args.append and Path(args.out).is_file():
        points = tomllib.loads(Path(args.out).read_text())["point"]
    for i, spec in enumerate(specs):
        t0 = time.perf_counter()
        try:
            design = generate(spec, axis=False)
            res = synthesize(design.verilog, design.top, args.family)
        except Exception as exc:  # a spec the flow refuses is reported and skipped
            print(f"[{i}] skipped: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr, flush=True)
            continue
        point = {"spec": spec.to_toml(), "family": args.family, "lut": res["lut"], "ff": res["ff"],
                 "dsp": res["dsp"], "lutram": res["lutram"],
                 "initiation_interval": design.info["initiation_interval"],
                 "latency_cycles_update": design.info["latency_cycles_update"],
                 "seconds": round(time.perf_counter() - t0, 2)}
        points.append(point)
        print(f"[{i}] {spec.kind} {list(spec.widths)} lut={res['lut']} ff={res['ff']} dsp={res['dsp']} "
              f"{point['seconds']} s", flush=True)
        with open(args.out, "wb") as fh:
            tomli_w.dump({"family": args.family, "yosys": res["yosys_version"], "point": points}, fh)
    return 0


def _from_sweep(csv_path: Path, out: Path, append: bool) -> int:
    """Write the ok rows of a resources sweep table as calibration points (spec TOML, LUT/FF/DSP)."""
    import csv

    from ...spec import PRESETS

    data = tomllib.loads(out.read_text()) if append and out.is_file() else {"family": "xcup", "point": []}
    have = {p["spec"] for p in data["point"]}
    with open(csv_path) as fh:
        for row in csv.DictReader(fh):
            if row.get("status") != "ok":
                continue
            base = PRESETS[row["preset"]]
            change = {"datapath": row["datapath"]}
            if row.get("grid_size"):
                change["grid_size"] = int(row["grid_size"])
            if row.get("hidden"):
                change["widths"] = (base.n_in, int(row["hidden"]), base.n_out)
            text = base.replace(**change).to_toml()
            if text in have:
                continue
            have.add(text)
            data["point"].append({"spec": text, "family": "xcup", "source": str(csv_path),
                                  **{k: float(row[k]) for k in ("lut", "ff", "dsp")}})
    with open(out, "wb") as fh:
        tomli_w.dump(data, fh)
    print(f"{out}: {len(data['point'])} points", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
