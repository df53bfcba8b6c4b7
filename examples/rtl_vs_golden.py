"""Run one stream on the golden model, the Verilated RTL and the HLS C simulation and compare.

    python examples/rtl_vs_golden.py [--quick] [--spec kan-readout] [--backends rtl hls] [--out DIR]

Every fixed-point backend must return the golden model's raw predictions and final
parameters bit for bit. Prints one line per backend and exits 1 on any difference.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import onchip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short stream (2000 samples)")
    ap.add_argument("--spec", default="kan-readout", help="preset name or TOML file")
    ap.add_argument("--backends", nargs="+", default=["rtl", "hls"], help="compared with golden")
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("out/examples/rtl_vs_golden"))
    args = ap.parse_args(argv)
    samples = 2000 if args.quick else args.samples

    spec = onchip.load_spec(args.spec)
    task = "qubit-readout" if spec.n_in == 2 else "drift-regression"
    stream = onchip.make_stream(task, samples=samples, seed=args.seed)
    # raw integers in the spec's formats (inputs: ``input``, targets: ``act``), fed to every backend
    x_raw = spec.formats.input.quantize(stream.x)
    y_raw = spec.formats.act.quantize(stream.y)

    results = {}
    for name in ["golden", *args.backends]:
        learner = onchip.Learner(spec, name)
        t = time.perf_counter()
        predictions = learner.step_raw(x_raw, y_raw)     # test-then-train, raw act integers
        results[name] = (predictions, learner.parameters, time.perf_counter() - t)

    ref_pred, ref_theta, _ = results["golden"]
    print(f"learner: {spec.name or spec.kind} ({spec.schedule})  task: {task}  samples: {samples}  "
          f"parameters: {len(ref_theta)}")
    summary, ok = {}, True
    for name in args.backends:
        pred, theta, seconds = results[name]
        same_pred = pred.shape == ref_pred.shape and bool(np.array_equal(pred, ref_pred))
        same_theta = theta.shape == ref_theta.shape and bool(np.array_equal(theta, ref_theta))
        mismatches = int(np.sum(pred != ref_pred)) if pred.shape == ref_pred.shape else len(ref_pred)
        verdict = "identical" if same_pred and same_theta else "DIFFERENT"
        print(f"{name} vs golden: raw predictions and parameters {verdict} "
              f"(prediction mismatches: {mismatches}, parameters equal: {same_theta}, {seconds:.1f} s)")
        summary[name] = {"identical": same_pred and same_theta, "prediction_mismatches": mismatches,
                         "parameters_equal": same_theta, "seconds": seconds}
        ok &= same_pred and same_theta
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "golden_predictions.npy", ref_pred)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print("all backends identical to the golden model" if ok else "MISMATCH: a backend differs from golden")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
