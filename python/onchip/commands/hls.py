"""``onchip hls``: write the Vitis HLS C++ project of a learner (and optionally C-simulate it).

The folder gets ``<top>.h``, ``<top>.cpp``, the helpers, a self-checking test
bench, ``run_hls.tcl`` (csim, csynth, cosim, export IP) and ``tb_data/`` with a
seeded random stream and the golden model's predictions and final parameters
on it, so that Vitis' csim and cosim check the design bit for bit. A spec of
``channels`` > 1 gets a stream of seeded random channels, one word per sample.
"""

from __future__ import annotations

import argparse

from . import _args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "hls",
        help="emit the Vitis HLS C++ of a learner",
        description="Write the Vitis HLS C++ project (ap_fixed, AXI4-Stream top, Vitis script) of a learner.",
    )
    _args.add_spec(p)  # --timing is accepted and changes nothing here: the C++ has no register plan
    _args.add_theta(p)
    _args.add_out(p)
    _args.add_top(p, "the top function (and the module Vitis makes of it)")
    p.add_argument("--part", type=_args.xilinx_part, default="xcu250-figd2104-2L-e",
                   help="Xilinx part the Vitis HLS script targets (default: %(default)s)")
    p.add_argument("--clock-ns", type=_args.float_range(0, 1000, lo_open=True), default=5.0,
                   help="clock period the Vitis HLS script constrains, ns, in (0, 1000] (default: %(default)s)")
    p.add_argument("--samples", type=_args.samples(), default=256, help="test-bench stream length (default %(default)s)")
    _args.add_seed(p, what="the test-bench stream")
    p.add_argument(
        "--csim", action="store_true",
        help="also compile with g++ (hls4ml's ap_types headers) and check the C simulation against the golden model",
    )
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def testbench_stream(spec, samples: int, seed: int):
    """Seeded raw stream for the test bench: x uniform over 1.25x the grid/input range, y in +/-1.5;
    with channels > 1 also each sample's channel, uniform (drawn after x and y, so that x and y
    are those of the single-channel stream).

    Returns (x_raw (N, n_in), y_raw (N, n_out)) int64, and channel (N,) int64 with channels > 1.
    """
    import numpy as np

    from ..model import GoldenLearner

    rng = np.random.default_rng(seed)
    g = GoldenLearner(spec)
    half = 1.25 * (max(abs(v) for v in spec.grid_range) if spec.kind == "kan" else 2.0)
    x = rng.uniform(-half, half, (samples, spec.n_in))
    y = rng.uniform(-1.5, 1.5, (samples, spec.n_out))
    stream = (g.quantize_inputs(x), g.quantize_targets(y))
    return stream if spec.channels == 1 else (*stream, rng.integers(0, spec.channels, samples))


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ..hls import emit, write
    from ..io import atomic_output_dir, write_json
    from ..model import GoldenLearner
    from .generate import resolve_spec

    spec = resolve_spec(args.spec, args.schedule, args.staleness, args.timing, args.channels)
    theta = _args.load_theta(args.theta, spec)
    project = emit(spec, theta=theta, top=args.top, part=args.part, clock_ns=args.clock_ns)
    stimulus = testbench_stream(spec, args.samples, args.seed)
    x_raw, y_raw = stimulus[:2]
    channel = stimulus[2] if spec.channels > 1 else None
    golden = GoldenLearner(spec, theta)
    preds = golden.run(x_raw, y_raw, channel=channel)
    golden.flush()
    summary = {"spec": spec.name or "custom", "top": args.top, "samples": args.samples, "seed": args.seed}
    if args.csim:
        from ..hls import HlsLearner

        # the project written below, under its top and with its compiled-in reset state
        hls_preds, hls_theta = HlsLearner(spec, project=project).run(x_raw, y_raw, channel=channel)
        summary["csim_predictions_equal"] = bool(np.array_equal(hls_preds, preds))
        summary["csim_parameters_equal"] = bool(np.array_equal(hls_theta, golden.theta))
    with atomic_output_dir(args.out) as stage:
        write(project, stage, stimulus=stimulus, expected=(preds, golden.theta))
        (stage / "spec.toml").write_text(spec.to_toml())
        write_json(stage / "summary.json", summary)
    print(f"wrote {args.out}/ ({', '.join(sorted([*project.files, 'spec.toml', 'summary.json']))}, tb_data/)")
    if args.csim:
        ok = summary["csim_predictions_equal"] and summary["csim_parameters_equal"]
        print(f"C simulation vs golden on {args.samples} samples: {'bit-exact' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    return 0
