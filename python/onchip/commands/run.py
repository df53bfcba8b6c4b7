"""``onchip run``: the main job, one learner on one task stream."""

from __future__ import annotations

import functools

from . import _args

DESCRIPTION = """Run a fixed-point online learner test-then-train over a task stream and write
metrics.json, predictions.npy, rolling.csv, rolling.png and spec.toml to --out (qubit-readout
also drift.toml and confusion.png). --task acrobot instead learns the Acrobot swing-up's Q-function
online through the error-input interface under a dynamics change, and writes metrics.json,
episodes.csv, steps.png, spec.toml and drift.toml.
With no options it runs the 16-bit KAN on the built-in drifting qubit-readout source.
--qubits N reads N multiplexed qubits, interleaved round robin, on one learner of channels = N
(one parameter bank per qubit): each qubit its own IQ clouds and drift, figures per qubit and
their mean, one panel per qubit in rolling.png."""


def add_parser(sub) -> None:
    from ..backends import JOB_BACKENDS
    from ..run import MODELS

    p = sub.add_parser("run", help="run a learner over a task stream (the main job)", description=DESCRIPTION)
    p.add_argument("--task", default="qubit-readout", choices=("drift-regression", "qubit-readout", "acrobot"),
                   help="task stream (default: %(default)s)")
    p.add_argument("--model", default=None, choices=MODELS,
                   help="learner kind of the task's preset (default: kan); with --spec the spec's kind is "
                        "taken, and a different --model is refused")
    p.add_argument("--spec", default=None,
                   help="TOML spec file or preset name, of either kind (default: the preset of the task and model)")
    p.add_argument("--backend", default="golden", choices=JOB_BACKENDS,
                   help="golden: integer reference; float: PyTorch float twin; rtl: Verilated RTL; "
                        "hls: HLS C simulation (default: %(default)s)")
    p.add_argument("--data", default=None, nargs="+", metavar="SHOTS",
                   help="readout shots .npy of layout (states, shots, 2) (default: built-in source); with "
                        "--qubits N, N files (one per qubit) or one file that every qubit reuses, qubit c >= 1 "
                        "under its own rotation and offset (stated in metrics.json and the summary)")
    p.add_argument("--qubits", type=_args.positive_int, default=None, metavar="N",
                   help="qubit-readout: N multiplexed qubits on one learner of channels = N; --samples is then "
                        "the shots per qubit, the drift is drawn for each qubit on its own unless --drift "
                        "names one scenario for all (default: one qubit, the single-qubit job)")
    p.add_argument("--states", default=None,
                   help="qubit-readout: comma-separated prepared states to tell apart, e.g. 0,1,2 "
                        "(default: every state in --data; 0,1 of the built-in source, which also has 2)")
    p.add_argument("--drift", default=None,
                   help="qubit-readout: drift scenario, a TOML file of [[event]] tables or a preset: "
                        "default, none, slow-rotation, phase-jump, gain-offset (default: default); "
                        "acrobot: dynamics events, presets default, none, heavy-link, light-link")
    p.add_argument("--samples", type=_args.samples(), default=None, help="stream length; with --qubits, shots per qubit (default: 100000)")
    p.add_argument("--episodes", type=_args.positive_int, default=None,
                   help="acrobot: episodes of the control loop (default: 200)")
    _args.add_theta(p)
    _args.add_seed(p, what="the stream")
    _args.add_out(p)
    _args.add_quiet(p)
    p.set_defaults(func=run, reports_out=True)  # prints its own 'wrote' line


def _theta_spec(args):
    # the spec --theta is for: with --qubits N, the job's spec of channels = N (a row per qubit)
    # without --spec the job checks the shape against its task's preset (onchip.run.job_theta)
    if args.theta is None or args.qubits is None or args.spec is None:
        return args.spec
    from ..multiplexed import multichannel_spec
    from ..spec import load_spec

    return multichannel_spec(load_spec(args.spec), args.qubits)


def run(args) -> int:
    from ..run import run_job

    if args.theta is not None and args.task == "acrobot":
        raise ValueError(f"--theta {args.theta}: the acrobot task takes no --theta (its learner starts from its "
                         "spec's own parameters)")
    if args.qubits is None and args.spec is not None:
        from ..spec import load_spec

        if (n := load_spec(args.spec).channels) > 1:  # the job would ask for a channel per sample
            raise ValueError(f"--spec {args.spec}: a spec of channels = {n} learns one stream per channel; run it "
                             f"as --task qubit-readout --qubits {n} (one qubit per channel)")
    if args.task == "acrobot" and args.samples is not None:
        raise ValueError(f"--samples: the acrobot task runs --episodes, not samples; got {args.samples}")
    if args.qubits is not None and args.qubits * (args.samples or 100_000) > _args.MAX_SAMPLES:
        raise ValueError(f"--qubits {args.qubits}: {args.qubits} x {args.samples or 100_000} shots exceed the "
                         f"{_args.MAX_SAMPLES} samples a stream may hold; lower --samples or --qubits")
    common = dict(model=args.model, spec=args.spec, backend=args.backend, data=args.data,
                  samples=100_000 if args.samples is None else args.samples, seed=args.seed, out=args.out,
                  progress=not args.quiet, states=args.states, drift=args.drift,
                  theta=_args.load_theta(args.theta, _theta_spec(args)))
    if args.qubits is not None:
        if args.task != "qubit-readout":
            raise ValueError(f"qubits: only the qubit-readout task reads several qubits, got {args.qubits!r} "
                             f"for {args.task}")
        from ..multiplexed import run_multiplexed_job, summary_lines

        job = functools.partial(run_multiplexed_job, qubits=args.qubits)
    else:
        from ..run import summary_lines

        job = functools.partial(run_job, task=args.task, episodes=args.episodes)
    try:
        metrics = job(**common)
    except ValueError as exc:  # the job checks --theta against its task's spec: name the file
        if args.theta is None or not str(exc).startswith("theta: "):
            raise
        raise ValueError(f"--theta {args.theta}: {str(exc).removeprefix('theta: ')}") from None
    print("\n".join(summary_lines(metrics)))
    print(f"wrote {args.out}/")
    return 0
