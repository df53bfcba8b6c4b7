"""Pretrain a readout model off-line (pykan KAN, QKeras MLP), import it, then adapt it on chip.

    python examples/pretrain_then_adapt.py [--quick] [--samples 100000] [--out DIR] [--page README.md]

For each readout source (the real transmon shots in tests/data/qubit_readout and the built-in
physically modelled source), a 2->1 KAN is trained in pykan and a 2->8->1 QDense MLP in QKeras
on the first 2000 shots of the drifting stream; each is imported (``onchip.from_pykan``,
``onchip.from_qkeras``) and run test-then-train over the whole stream from three starts: the
imported parameters, onchip's own seeded random initial parameters (same spec), and the
imported parameters frozen (learning off). Prints and writes (``results.md``, ``results.json``
in ``--out``) the assignment fidelity over the stream and its last 5000 shots and the shots to
recover after each drift event, and checks that the Verilated RTL of each imported learner
predicts exactly what the golden model does. ``--page`` also writes the table, what each import
became and a reading of the table (every figure from this run, dated) between the page's snippet
markers (sweeps/pretrain_adapt/README.md). Needs the ``qkeras`` and ``pykan`` extras.
"""

import argparse
import datetime
import json
import os
import platform
from pathlib import Path

from onchip.frontends.qkeras import modules as qkeras_modules

tf, _ = qkeras_modules()  # TensorFlow first, with the legacy Keras that QKeras needs

import numpy as np  # noqa: E402
import torch  # noqa: E402

import onchip  # noqa: E402
from onchip.tasks.fidelity import assignment_fidelity, static_baseline_predictions  # noqa: E402

#: the lines of a --page between which the generated text goes (mkdocs snippet markers, see docs/frontends-pretrained.md)
BEGIN, END = "<!-- --8<-- [start:table] -->", "<!-- --8<-- [end:table] -->"
SHOTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "qubit_readout" / "transmon_two_state_shots.npy"
PRETRAIN = 2000
STARTS = ("imported", "onchip init", "imported, frozen")


def pretrain_kan(x, y, steps, seed):
    """A pykan 2->1 KAN (G = 5, k = 3) fitted with LBFGS; pykan moves its grid to the data."""
    from kan import KAN

    torch.manual_seed(seed)
    model = KAN(width=[2, 1], grid=5, k=3, seed=seed, auto_save=False, grid_range=[-3, 3])
    data = {k: torch.tensor(v, dtype=torch.float32) for k, v in
            (("train_input", x), ("train_label", y), ("test_input", x), ("test_label", y))}
    model.fit(data, opt="LBFGS", steps=steps, log=steps + 1, update_grid=True, grid_update_num=5)
    return model


def pretrain_mlp(x, y, epochs, seed):
    """A QKeras 2->8->1 MLP: 16-bit input and activations (ap_fixed<16,4>), 8-bit weights."""
    from qkeras import QActivation, QDense, quantized_bits, quantized_relu

    tf.keras.utils.set_random_seed(seed)
    inp = tf.keras.Input((2,))
    h = QActivation(quantized_bits(16, 3, alpha=1), name="q_in")(inp)
    h = QDense(8, kernel_quantizer=quantized_bits(8, 1, alpha=1), bias_quantizer=quantized_bits(8, 2, alpha=1),
               name="dense_1")(h)
    h = QActivation(quantized_relu(15, 3), name="relu_1")(h)
    h = QDense(1, kernel_quantizer=quantized_bits(8, 1, alpha=1), bias_quantizer=quantized_bits(8, 2, alpha=1),
               name="dense_2")(h)
    out = QActivation(quantized_bits(16, 3, alpha=1), name="q_out")(h)
    model = tf.keras.Model(inp, out)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x.astype(np.float32), y.astype(np.float32), epochs=epochs, batch_size=64, verbose=0)
    return model


def readout_metrics(stream, pred):
    m = onchip.evaluate(stream, pred)
    return {"fidelity": m["assignment_fidelity"], "fidelity_first_1000": assignment_fidelity(stream.y[:1000], pred[:1000]),
            "fidelity_last_5000": m["assignment_fidelity_last_5000"], "recovery_shots": m["recovery_shots"]}


def run_starts(spec, theta, stream, init_scale):
    """Test-then-train from the imported theta, from onchip's seeded init, and frozen at theta."""
    rows = {}
    rows["imported"] = onchip.Learner(spec, "golden", theta=theta).run(stream.x, stream.y)
    own = spec.replace(init_scale=init_scale)  # the same learner, parameters drawn by onchip
    rows["onchip init"] = onchip.Learner(own, "golden").run(stream.x, stream.y)
    rows["imported, frozen"] = onchip.Learner(spec, "golden", theta=theta).predict(stream.x)
    return {start: readout_metrics(stream, pred) for start, pred in rows.items()}


def rtl_matches(spec, theta, stream, n):
    """The Verilated RTL against the golden model on the first ``n`` shots, learning on."""
    if "rtl" not in onchip.available_backends():
        return None
    x, y = stream.x[:n], stream.y[:n]
    want = onchip.Learner(spec, "golden", theta=theta).run(x, y)
    got = onchip.Learner(spec, "rtl", theta=theta).run(x, y)
    return bool(np.array_equal(got, want))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="20000 shots, short pretraining, the RTL check on 300 shots of the first source only")
    ap.add_argument("--samples", type=int, default=100_000, help="stream length (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("out/examples/pretrain_then_adapt"))
    ap.add_argument("--page", type=Path, help="a page whose snippet markers receive the table and its reading")
    args = ap.parse_args(argv)
    if args.page is not None and not all(m in args.page.read_text().splitlines() for m in (BEGIN, END)):
        ap.error(f"--page {args.page}: no lines {BEGIN!r} and {END!r} to write between")
    samples = 20_000 if args.quick else args.samples
    kan_steps, mlp_epochs, rtl_shots = (5, 10, 300) if args.quick else (20, 40, 5000)

    results, imports = [], []
    for source, data in (("real shots", SHOTS), ("built-in", None)):
        stream = onchip.make_stream("qubit-readout", samples=samples, seed=args.seed, data=data)
        x0, y0 = stream.x[:PRETRAIN], stream.y[:PRETRAIN]
        kan = onchip.from_pykan(pretrain_kan(x0, y0, kan_steps, args.seed), x=x0, name="pykan-readout")
        mlp = onchip.from_qkeras(pretrain_mlp(x0, y0, mlp_epochs, args.seed), coef="ap_fixed<16,4,RND_CONV,SAT>",
                                 learning_rate=2.0**-5, name="qkeras-readout")
        static = onchip.evaluate(stream, np.zeros_like(stream.y))["static_baseline"]
        static_first = assignment_fidelity(stream.y[:1000], static_baseline_predictions(stream)[:1000])
        rtl = {}
        for model, imported, init_scale in (("kan", kan, 0.1), ("mlp", mlp, 1.0)):
            per_start = run_starts(imported.spec, imported.theta, stream, init_scale)
            if not args.quick or source == "real shots":  # a Verilator build per learner
                rtl[model] = rtl_matches(imported.spec, imported.theta, stream, rtl_shots)
                print(f"rtl == golden ({model}, {source}, imported, {rtl_shots} shots): {rtl[model]}")
            for start, m in per_start.items():
                results.append({"source": source, "model": model, "start": start, **m})
                print(f"{source} / {model} / {start}: fidelity {m['fidelity']:.4f}, first 1000 "
                      f"{m['fidelity_first_1000']:.4f}, last 5000 "
                      f"{m['fidelity_last_5000']:.4f}, recovery shots {m['recovery_shots']}")
        results.append({"source": source, "model": "static discriminator", "start": "calibrated on the first shots",
                        "fidelity": static["assignment_fidelity"], "fidelity_first_1000": static_first,
                        "fidelity_last_5000": static["assignment_fidelity_last_5000"],
                        "recovery_shots": static["recovery_shots"]})
        imports.append({"source": source, "kan_grid": [kan.grid["lo"], kan.grid["hi"]],
                        "kan_grid_size": kan.grid["grid_size"], "kan_act": str(kan.spec.formats.act),
                        "kan_max_error": kan.output["max_error"], "kan_rms_error": kan.output["rms_error"],
                        "kan_rms_error_lsb": kan.output["rms_error_lsb"], "mlp_act": str(mlp.spec.formats.act),
                        "mlp_coef": str(mlp.spec.formats.coef), "rtl_shots": rtl_shots,
                        **{f"{m}_rtl": rtl.get(m) for m in ("kan", "mlp")}})
        print(f"kan import ({source}): grid [{kan.grid['lo']}, {kan.grid['hi']}) G={kan.grid['grid_size']}, "
              f"output error on the pretraining shots: max {kan.output['max_error']:.4g}, "
              f"RMS {kan.output['rms_error']:.4g}")

    args.out.mkdir(parents=True, exist_ok=True)
    lines = [f"Qubit readout, {samples} shots, pretrained on the first {PRETRAIN} (the imported starts have seen "
             "the first 1000 shots in training); assignment fidelity over the stream, its first 1000 and last "
             "5000 shots; recovery shots per drift event (None: not recovered).", "",
             "| source | model | start | fidelity | first 1000 | last 5000 | recovery shots |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['source']} | {r['model']} | {r['start']} | {r['fidelity']:.4f} | {r['fidelity_first_1000']:.4f} "
              f"| {r['fidelity_last_5000']:.4f} | {', '.join(map(str, r['recovery_shots']))} |" for r in results]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"table: {args.out / 'results.md'}")
    if args.page is not None:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        from importlib.metadata import version

        cond = (f"Measured {when} by `python examples/pretrain_then_adapt.py --out {args.out} --page {args.page}`; "
                f"{samples} shots, seed {args.seed}; pykan {version('pykan')}, QKeras {version('qkeras')}, "
                f"torch {torch.__version__}, Python {platform.python_version()}; {os.cpu_count()} cores, load average "
                f"{os.getloadavg()[0]:.1f} at the end.")
        block = [cond, "", *lines, "", *reading(results, imports)]
        page = args.page.read_text().split("\n")
        first, last = page.index(BEGIN), page.index(END)
        args.page.write_text("\n".join([*page[:first + 1], *block, *page[last:]]))
        print(f"page: {args.page}")


def reading(results, imports):
    """What the table shows and what each import became, every figure taken from ``results`` and ``imports``."""
    def pick(start, key):
        return [r[key] for r in results if r["start"] == start]

    first_imp, first_own = pick("imported", "fidelity_first_1000"), pick("onchip init", "fidelity_first_1000")
    frozen_last = pick("imported, frozen", "fidelity_last_5000") + [r["fidelity_last_5000"] for r in results
                                                                    if r["model"] == "static discriminator"]
    adapting = [r for r in results if r["start"] in ("imported", "onchip init")]
    recovered = [s for r in adapting for s in r["recovery_shots"] if isinstance(s, int)]
    gap = max(abs(a["fidelity"] - b["fidelity"]) for a in results if a["start"] == "imported"
              for b in results if b["start"] == "onchip init" and (b["source"], b["model"]) == (a["source"], a["model"]))
    never = [r for r in adapting if any(not isinstance(s, int) for s in r["recovery_shots"])]
    lines = [f"What it shows: a pretrained import starts right (first 1000 shots {min(first_imp):.3f}-"
             f"{max(first_imp):.3f}, against {min(first_own):.3f}-{max(first_own):.3f} from onchip's random start); "
             f"over the whole stream the two learning runs differ by at most {gap:.4f} in fidelity. What matters is "
             f"learning on: the frozen import, like the static discriminator, falls to {min(frozen_last):.2f}-"
             f"{max(frozen_last):.2f} over the last 5000 shots after the phase jump, while the adapting learners "
             + (f"recover within {min(recovered)}-{max(recovered)} shots after each drift event."
                if not never else (f"recover within {min(recovered)}-{max(recovered)} shots where they recover"
                                   if recovered else "do not recover either")
                + " (" + "; ".join(f"{r['source']} {r['model']} {r['start']}: {r['recovery_shots']}" for r in never)
                + ")."),
             "", "What each import became (the KAN's output error on the pretraining shots, against pykan's own):", "",
             "| source | KAN grid | KAN G | KAN act | KAN max error | KAN RMS error (LSB) | MLP act | MLP coef "
             "| RTL == golden (KAN, MLP; first shots, learning on) |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {i['source']} | [{i['kan_grid'][0]:g}, {i['kan_grid'][1]:g}) | {i['kan_grid_size']} | "
              f"`{i['kan_act']}` | {i['kan_max_error']:.3g} | {i['kan_rms_error_lsb']:.2f} | `{i['mlp_act']}` | "
              f"`{i['mlp_coef']}` | {i['kan_rtl']}, {i['mlp_rtl']} ({i['rtl_shots']} shots) |" for i in imports]
    return lines


if __name__ == "__main__":
    main()
