"""Where a pykan import's error comes from, and what the defaults of ``onchip.from_pykan`` cost.

Run:  python sweeps/pykan_import/run.py [--steps 20] [--synth]
Writes sweeps/pykan_import/results.json and README.md (its tables between snippet markers, with
date and conditions; ``--render`` writes README.md again from results.json). A pykan 0.2.8 KAN [2, 3, 1], G = 5, k = 3, SiLU base, is trained with LBFGS
(``--steps``, grid updates as ``fit`` does them) on f(x, y) = exp(sin(pi x) + y^2), 1000 points
uniform in [-1, 1]^2 (pykan's ``create_dataset``, seed 0); every import is measured against pykan's
own ``model(x)`` on the 2000 test points, in LSB of each import's ``act`` and in function units.

Each row changes one knob, so that the error's sources separate:
* the float projection alone (the fitted splines in float64: grid re-mapping onto power-of-two
  cells, and the SiLU base function), for the whole edge, its spline part and its base part;
* the basis table (its truncation of the position to T bits), by T and by what the
  coefficients are fitted to (the exact B-splines, or the table as the hardware reads it);
* coefficient and data rounding, by the width of the data formats (16 against 24 bits).
Other models, each imported with the defaults and measured the same way (the table "Other models"):
the trained model after ``refine(10)`` and ``--steps`` more LBFGS steps, the trained model after
``update_grid`` on its training inputs, and a [2, 4, 3, 1] G6 k1 KAN trained like the first.
``--synth`` adds the LUT / FF / DSP / LUTRAM of the old and the new default import (Yosys,
``synth_xilinx -family xcup``; several minutes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

#: (label, from_pykan keyword arguments); the first is the old default, the last the new
ROWS = [
    ("old default: refine 1 (G 8), T 6, fit to B-splines", dict(refine=1, basis_table_bits=6, fit_to="spline")),
    ("refine 1, T 6, fit to the table", dict(refine=1, basis_table_bits=6)),
    ("refine 1, 24-bit data, T 12, fit to B-splines (projection only)",
     dict(refine=1, bits=24, basis_table_bits=12, fit_to="spline")),
    ("refine 2 (G 16), 24-bit data, T 12, fit to B-splines (projection only)",
     dict(bits=24, basis_table_bits=12, fit_to="spline")),
    ("refine 2, T 7, fit to B-splines", dict(fit_to="spline")),
    ("refine 2, 24-bit data, T 7, fit to the table", dict(bits=24, basis_table_bits=7)),
    ("refine 4 (G 32), T auto, fit to the table", dict(refine=4)),
    ("new default: refine 2, T auto, fit to the table", dict()),
]


def dataset():
    """pykan's ``create_dataset`` of f(x, y) = exp(sin(pi x) + y^2): 1000 training, 2000 test points, seed 0."""
    import torch
    from kan import create_dataset

    torch.manual_seed(0)
    f = lambda x: torch.exp(torch.sin(torch.pi * x[:, [0]]) + x[:, [1]] ** 2)  # noqa: E731
    return create_dataset(f, n_var=2, train_num=1000, test_num=2000, seed=0)


def fit(model, data, steps: int) -> float:
    """``steps`` LBFGS steps of pykan's ``fit`` (no regularisation); pykan's test RMS after them."""
    import torch

    model.fit(data, opt="LBFGS", steps=steps, lamb=0.0, log=steps + 1)
    with torch.no_grad():
        return float(((model(data["test_input"]) - data["test_label"]) ** 2).mean().sqrt())


def train(steps: int, data, width=(2, 3, 1), grid: int = 5, k: int = 3):
    """A pykan KAN of ``width``, ``grid``, ``k`` (seed 0) trained on ``data``: (model, pykan's test RMS)."""
    from kan import KAN

    model = KAN(width=list(width), grid=grid, k=k, seed=0, auto_save=False)
    return model, fit(model, data, steps)


def copy(model):
    """A copy of a pykan KAN through its own checkpoint (``model.copy()`` writes into the working folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        model.saveckpt(f"{tmp}/copy")
        out = type(model).loadckpt(f"{tmp}/copy")
    out.auto_save = False  # pykan would otherwise write checkpoints into ./model
    return out


def other_models(model, data, steps: int) -> list[dict]:
    """The models pykan users commonly hold beside the trained one, each imported with the defaults."""
    from onchip.frontends.pykan import from_pykan

    refined = model.refine(10)
    refined.auto_save = False
    refined_rms = fit(refined, data, steps)
    updated = copy(model)
    updated.update_grid(data["train_input"])
    deep, deep_rms = train(steps, data, width=(2, 4, 3, 1), grid=6, k=1)
    cases = [(f"refine(10), then {steps} more steps", "[2, 3, 1] G10 k3", refined, refined_rms),
             ("update_grid on the training inputs", "[2, 3, 1] G5 k3", updated, None),
             ("a deeper, linear-spline KAN", "[2, 4, 3, 1] G6 k1", deep, deep_rms)]
    x = data["test_input"].numpy().astype(np.float64)
    out = []
    breakdown = deep_breakdown(deep, x)
    for label, shape, m, rms in cases:
        imp = from_pykan(m, x=x)
        o = imp.output
        out.append({"label": label, "model": shape, "pykan_test_rms": rms, "grid_size": imp.spec.grid_size,
                    "basis_table_bits": imp.spec.basis_table_bits, "act": str(imp.spec.formats.act),
                    "parameters": imp.spec.parameter_count(), "rms_lsb": o["rms_error_lsb"],
                    "max_lsb": o["max_error_lsb"], "outside": o["outside_model_grid_fraction"],
                    "warnings": list(imp.warnings)})
    return out, breakdown


def _layer_as_hardware(imp, l: int, a: np.ndarray) -> np.ndarray:
    """Layer ``l`` of an import as the hardware reads it (``theta`` through the basis table, inputs
    rounded into their format), in float64, on pykan's values ``a`` (N, n_in) of its inputs; its
    outputs in pykan's units (N, n_out) (the next layer's hidden map undone)."""
    from onchip.frontends.pykan import table_basis

    spec, g = imp.spec, imp.grid
    maps = [(np.ones(spec.n_in), np.zeros(spec.n_in))] + [(np.array(m["scale"]), np.array(m["shift"]))
                                                           for m in g["hidden_maps"]]
    n = spec.grid_size + spec.spline_order
    sizes = list(zip(spec.widths[1:], spec.widths[:-1]))
    start = sum(o * i * n for o, i in sizes[:l])
    n_out, n_in = sizes[l]
    coef = (imp.theta[start : start + n_out * n_in * n] * spec.formats.coef.lsb).reshape(n_out, n_in, n)
    fmt = spec.formats.input if l == 0 else spec.formats.act
    s, t = maps[l]
    out = sum(table_basis(s[i] * a[:, i] + t[i], spec, fmt) @ coef[:, i, :].T for i in range(n_in))
    if l + 1 < len(maps):
        out = (out - maps[l + 1][1]) / maps[l + 1][0]
    return out


def deep_breakdown(model, x: np.ndarray) -> dict:
    """Where the [2, 4, 3, 1] G6 k1 import's error comes from, in the default import's act LSB:
    the default import against 24-bit data (rounding), each layer alone as the hardware reads it
    (every other layer pykan's own), finer cells (refine 4, 8), the network's gain per hidden act
    LSB (:func:`onchip.frontends.pykan.hidden_gain`), and the knot interval of a hidden input (of
    pykan's grid) that holds the largest share of the squared error."""
    from onchip.frontends.pykan import _layer_bounds, _propagate, from_pykan, hidden_gain
    from onchip.model import GoldenLearner

    inputs, want = _propagate(model, x)
    base = from_pykan(model, x=x)
    ref = base.spec.formats.act.lsb

    def err(imp):
        g = GoldenLearner(imp.spec, imp.theta)
        return g.dequantize_outputs(g.predict(g.quantize_inputs(x))) - want

    variants = []
    for label, kw in (("default (refine 2)", {}), ("24-bit data", {"bits": 24}), ("refine 4", {"refine": 4}),
                      ("refine 8", {"refine": 8})):
        imp = base if not kw else from_pykan(model, x=x, **kw)
        e = err(imp)
        variants.append({"label": label, "grid_size": imp.spec.grid_size, "parameters": imp.spec.parameter_count(),
                         "act": str(imp.spec.formats.act), "rms_ref": float(np.sqrt(np.mean(e**2)) / ref),
                         "max_ref": float(np.abs(e).max() / ref),
                         "edge_rms_ref": max(d["rms_error_quantized"] for d in imp.edges) / ref})
    alone = []
    for l in range(len(model.act_fun)):
        a = x
        for L in range(len(model.act_fun)):
            a = _layer_as_hardware(base, L, a) if L == l else model_layer(model, L, a)
        alone.append(float(np.sqrt(np.mean((a - want) ** 2)) / ref))
    gains = hidden_gain(model, x, base)
    e2 = (err(base) ** 2).sum(axis=1)
    best = None  # the knot interval of a hidden input holding the largest share of the squared error
    for l in range(1, len(model.act_fun)):
        lo_k, hi_k = _layer_bounds(model.act_fun[l])
        for i in range(inputs[l].shape[1]):
            knots = np.asarray(model.act_fun[l].grid[i].detach().cpu(), dtype=np.float64)
            cuts = np.concatenate([[-np.inf], knots[(knots > lo_k[i]) & (knots < hi_k[i])], [np.inf]])
            cell = np.digitize(inputs[l][:, i], cuts) - 1
            share = np.bincount(cell, weights=e2, minlength=len(cuts) - 1) / e2.sum()
            c = int(np.argmax(share))
            if best is None or share[c] > best[0]:
                best = (share[c], l, i, cuts[c], cuts[c + 1], float(np.mean(cell == c)))
    share, gl, gi, lo_c, hi_c, samples = best
    lo_c, hi_c = max(lo_c, inputs[gl][:, gi].min()), min(hi_c, inputs[gl][:, gi].max())
    probe = np.repeat(np.median(inputs[gl], axis=0, keepdims=True), 2, axis=0)
    probe[:, gi] = (lo_c, hi_c)
    slope = float(np.abs(np.diff(model_edges(model, gl, probe)[:, :, gi], axis=0)).max() / (hi_c - lo_c))
    gain = max(g["max"][gi] for g in gains if g["layer"] == gl)
    return {"variants": variants, "alone": alone, "gains": gains,
            "interval": {"layer": gl, "input": gi, "lo": float(lo_c), "hi": float(hi_c), "samples": samples,
                         "share": float(share), "slope": slope, "gain": gain}}


def model_layer(model, l: int, a: np.ndarray) -> np.ndarray:
    """pykan's own layer ``l`` (float64) on its inputs ``a``."""
    from onchip.frontends.pykan import _layer_forward

    return _layer_forward(model, l, a)


def model_edges(model, l: int, a: np.ndarray) -> np.ndarray:
    """pykan's edge activations of layer ``l`` at ``a`` (N, n_in): (N, n_out, n_in), float64."""
    import copy as _copy

    import torch

    work = _copy.deepcopy(model.act_fun[l]).double()
    with torch.no_grad():
        return work(torch.as_tensor(a))[2].numpy()


def part(model, keep: str):
    """A copy of ``model`` whose edges keep only their spline part or only their base part."""
    import torch

    out = copy(model)
    with torch.no_grad():
        for layer in out.act_fun:
            (layer.scale_base if keep == "spline" else layer.scale_sp).zero_()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="LBFGS steps of pykan's fit (default 20)")
    ap.add_argument("--synth", action="store_true", help="also synthesize the old and new default imports")
    ap.add_argument("--render", action="store_true", help="only write README.md again from results.json")
    args = ap.parse_args()
    if args.render:
        render(json.loads((HERE / "results.json").read_text()))
        return

    from importlib.metadata import version

    import torch

    from onchip.frontends.pykan import from_pykan

    start = time.time()
    data = dataset()
    model, fit_rms = train(args.steps, data)
    x = data["test_input"].numpy().astype(np.float64)
    rows = []
    for label, kw in ROWS:
        imp = from_pykan(model, x=x, **kw)
        o, lsb = imp.output, imp.spec.formats.act.lsb
        rows.append({"label": label, "options": kw, "grid_size": imp.spec.grid_size,
                     "basis_table_bits": imp.spec.basis_table_bits, "act": str(imp.spec.formats.act),
                     "parameters": imp.spec.parameter_count(), "rms_lsb": o["rms_error_lsb"],
                     "max_lsb": o["max_error_lsb"], "rms": o["rms_error"], "float_rms_lsb": o["float_rms_error"] / lsb,
                     "act_lsb": lsb,
                     "warnings": list(imp.warnings), "spec": imp.spec, "theta": imp.theta})
    parts = []
    for refine in (1, 2):
        for keep in ("whole", "spline", "base"):
            m = model if keep == "whole" else part(model, keep)
            imp = from_pykan(m, x=x, refine=refine, bits=24, basis_table_bits=12, fit_to="spline")
            parts.append({"refine": refine, "grid_size": imp.spec.grid_size, "edge": keep,
                          "float_rms": imp.output["float_rms_error"], "float_max": imp.output["float_max_error"]})
    others, deep = other_models(copy(model), data, args.steps)
    synth = []
    if args.synth:
        from onchip.flow.steps import synth as run_synth

        for r in (rows[0], rows[-1]):
            s = run_synth(r["spec"], family="xcup", theta=r["theta"])
            synth.append({"label": r["label"], **{k: s[k] for k in ("lut", "ff", "dsp", "bram", "lutram")},
                          "latency_cycles": s["latency_cycles"], "initiation_interval": s["initiation_interval"]})
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cond = (f"{when}; pykan {version('pykan')}, torch {torch.__version__}, "
            f"Python {platform.python_version()}, {platform.machine()}; LBFGS {args.steps} steps, pykan's "
            f"test RMS {fit_rms:.4f}; {time.time() - start:.0f} s on {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end")
    ref = rows[-1]["spec"].formats.act.lsb  # a common unit: the new default's act LSB
    for r in rows:
        r.pop("spec"), r.pop("theta")
        r["rms_ref"], r["float_rms_ref"] = r["rms"] / ref, r.pop("float_rms_lsb") * r.pop("act_lsb") / ref
    results = {"conditions": cond, "rows": rows, "parts": parts, "others": others, "deep": deep, "synth": synth}
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    render(results)


def render(results: dict) -> None:
    """Write README.md from ``results`` (the contents of results.json)."""
    cond, rows, parts, synth = (results[k] for k in ("conditions", "rows", "parts", "synth"))
    ref = rows[-1]["rms"] / rows[-1]["rms_ref"]  # the new default's act LSB
    by = {r["label"].split(":")[0] if ":" in r["label"] else r["label"]: r for r in rows}
    old, new = rows[0], rows[-1]
    proj8, proj16 = rows[2], rows[3]
    whole8 = next(p for p in parts if p["grid_size"] == proj8["grid_size"] and p["edge"] == "whole")
    base8 = next(p for p in parts if p["grid_size"] == proj8["grid_size"] and p["edge"] == "base")
    wide7, spline7 = by["refine 2, 24-bit data, T 7, fit to the table"], by["refine 2, T 7, fit to B-splines"]
    lines = ["# pykan import: where the error comes from", "",
             "Reproduce (needs the `pykan` extra; its duration and the machine's load are in the line below):", "",
             "    python sweeps/pykan_import/run.py --synth      # --render: README.md again from results.json", "",
             f"Measured {cond}.", "", "<!-- --8<-- [start:table] -->",
             ("Output error of the imported learner (golden model) against pykan's `model(x)` on 2000 test points, "
              "a [2, 3, 1] G5 k3 SiLU KAN trained on exp(sin(pi x) + y^2) (`python sweeps/pykan_import/run.py`). "
              "LSB: of each import's own `act`; the last two columns in a common unit, the default act's LSB "
              f"({ref:g}), since a 24-bit act has a finer LSB. The float projection evaluates the float "
              "coefficients on exact B-splines: for a fit to the table it is not what the hardware computes."), "",
             ("| import | G | T | act | parameters | RMS (LSB) | max (LSB) | RMS (default LSB) | "
              "float projection RMS (default LSB) |"), "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['label']} | {r['grid_size']} | {r['basis_table_bits']} | `{r['act']}` | {r['parameters']} | "
              f"{r['rms_lsb']:.2f} | {r['max_lsb']:.1f} | {r['rms_ref']:.2f} | {r['float_rms_ref']:.2f} |" for r in rows]
    lines += ["", ("The float projection alone, by part of the edge (24-bit data, T 12, fitted to the B-splines; "
                   "function units):"), "", "| G | edge | RMS | max |", "|---|---|---|---|"]
    lines += [f"| {p['grid_size']} | {p['edge']} | {p['float_rms']:.2e} | {p['float_max']:.2e} |" for p in parts]
    others = results.get("others", [])
    if others:
        lines += ["", ("Other models, each imported with the defaults and measured on the same 2000 test points "
                       "(LSB of its own `act`; outside: the share of test points where some layer's input leaves "
                       "its own pykan grid, which the import follows):"), "",
                  "| model | pykan model | pykan test RMS | G | T | act | parameters | RMS (LSB) | max (LSB) | outside |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {o['label']} | {o['model']} | "
                  f"{'-' if o['pykan_test_rms'] is None else format(o['pykan_test_rms'], '.4f')} | {o['grid_size']} | "
                  f"{o['basis_table_bits']} | `{o['act']}` | {o['parameters']} | {o['rms_lsb']:.2f} | "
                  f"{o['max_lsb']:.1f} | {o['outside']:.1%} |" for o in others]
    deep = results.get("deep")
    if deep:
        v, iv = deep["variants"], deep["interval"]
        lines += ["", ("Why the [2, 4, 3, 1] G6 k1 import errs (`python sweeps/pykan_import/run.py`; the same test points, "
                       "in the default import's act LSB):"), "",
                  "| import | G | act | parameters | RMS | max | worst edge's RMS over its range |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['label']} | {r['grid_size']} | `{r['act']}` | {r['parameters']} | {r['rms_ref']:.1f} | "
                  f"{r['max_ref']:.0f} | {r['edge_rms_ref']:.1f} |" for r in v]
        lines += ["", "One layer as the hardware reads it (`theta` through the basis table), every other layer pykan's "
                  "own in float64: " + ", ".join(f"layer {l} {a:.1f}" for l, a in enumerate(deep["alone"]))
                  + " LSB RMS. Output LSB per act LSB of each hidden input (max over the test points): "
                  + "; ".join(f"layer {g['layer']}: " + ", ".join(f"{m:.1f}" for m in g["max"]) for g in deep["gains"])
                  + "."]
    if synth:
        lines += ["", "Cost (Yosys `synth_xilinx -family xcup`, sequential schedule, the spec's timing):", "",
                  "| import | LUT | FF | DSP | LUTRAM | latency (cycles) | II |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {s['label']} | {s['lut']} | {s['ff']} | {s['dsp']} | {s['lutram']} | {s['latency_cycles']} | "
                  f"{s['initiation_interval']} |" for s in synth]
    lines += ["", "Reading it (each figure from the table above):", "",
              (f"- Old default, {old['rms_ref']:.2f} LSB RMS: the projection alone (24-bit data, T 12) leaves "
               f"{proj8['rms_ref']:.2f}; the rest, sqrt({old['rms_ref']:.2f}^2 - {proj8['rms_ref']:.2f}^2) = "
               f"{max(0.0, old['rms_ref'] ** 2 - proj8['rms_ref'] ** 2) ** 0.5:.2f}, is quantization, mostly the basis "
               f"table's truncation of the position to {old['basis_table_bits']} bits (rounding adds little, "
               "below): the dominant cause."),
              (f"- The projection is the re-mapping of pykan's non-uniform spline onto power-of-two cells: the base "
               f"function (SiLU) alone projects to {base8['float_rms']:.1e} RMS against {whole8['float_rms']:.1e} for "
               f"the whole edge at G {proj8['grid_size']}; halving the cells (G {proj16['grid_size']}) leaves "
               f"{proj16['rms_ref']:.2f} LSB."),
              (f"- Fitting to the table removes the truncation's lag: {spline7['rms_ref']:.2f} -> {new['rms_ref']:.2f} "
               f"LSB at G {new['grid_size']}, T {new['basis_table_bits']}. Coefficient and data rounding at 16 bits "
               f"add little: {wide7['rms_ref']:.2f} LSB with 24-bit data."),
              (f"- New default: {new['rms_lsb']:.2f} LSB RMS, max {new['max_lsb']:.1f}, for "
               f"{new['parameters']} parameters instead of {old['parameters']}"
               + (f"; {synth[-1]['lut']} LUT instead of {synth[0]['lut']} ({synth[-1]['lut'] / synth[0]['lut'] - 1:+.0%}), "
                  f"{synth[-1]['ff']} FF instead of {synth[0]['ff']}, {synth[-1]['dsp']} DSP instead of "
                  f"{synth[0]['dsp']}, latency {synth[-1]['latency_cycles']} cycles and II "
                  f"{synth[-1]['initiation_interval']} instead of {synth[0]['latency_cycles']} and "
                  f"{synth[0]['initiation_interval']}."
                  if len(synth) == 2 else ".")),
              ]
    if deep:
        v, iv = deep["variants"], deep["interval"]
        lines.append(
            f"- The [2, 4, 3, 1] G6 k1 import, {v[0]['rms_ref']:.1f} LSB RMS, is the projection, not fixed point: with "
            f"24-bit data it is {v[1]['rms_ref']:.1f}. pykan's linear splines bend at knots its `update_grid` put at "
            f"the data's quantiles, which onchip's uniform cells do not hold (the worst edge is "
            f"{v[0]['edge_rms_ref']:.1f} LSB RMS from pykan's over its range), and the later layers multiply an "
            f"error (up to {max(m for g in deep['gains'] for m in g['max']):.1f} output LSB per act LSB of a hidden "
            f"input). {iv['share']:.0%} of the squared error comes from the {iv['samples']:.0%} of the test points "
            f"whose layer {iv['layer']} input {iv['input']} lies in its knot interval [{iv['lo']:.3g}, {iv['hi']:.3g}], "
            f"across which pykan's edge from that input changes by {iv['slope']:.0f} per unit (one act LSB there "
            f"moves the output by up to {iv['gain']:.1f} LSB). Each layer alone leaves "
            + ", ".join(f"{a:.0f}" for a in deep["alone"]) + " LSB. Finer cells shrink it ("
            + ", ".join(f"{r['label']} {r['rms_ref']:.1f}" for r in v[2:])
            + f" LSB, for {v[-1]['parameters']} parameters instead of {v[0]['parameters']}); the import's warnings "
            "say this for any import above 4 LSB RMS. Even an exact projection would keep the hidden inputs' rounding "
            f"to act's grid (half an LSB each): up to {0.5 * max(m for g in deep['gains'] for m in g['max']):.0f} LSB "
            "at the output from one input, a fixed-point floor for a model this steep.")
    lines += ["<!-- --8<-- [end:table] -->", ""]
    (HERE / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
