"""Hardware-in-the-loop calibration: the KAN calibrator on the golden model, the RTL and in float.

Run:  python sweeps/quantum_meta/hil.py
Writes sweeps/quantum_meta/hil.md: fidelity after K steps per backend, whether the
RTL's corrections equal the golden model's bit for bit, and the cycles of one step.
"""

from pathlib import Path

import numpy as np

from onchip.methods.quantum_meta.hardware import hardware_in_the_loop

HERE = Path(__file__).resolve().parent


def main() -> None:
    lines = ["# KAN calibrator in the loop (analytic pulse + learned constant offsets)", "",
             "Command: `python sweeps/quantum_meta/hil.py` (4 in-distribution devices per gate, seed 0, K = 8)", "",
             "| gate | F at K=0 | F at K=8, float twin | F at K=8, 16-bit golden | F at K=8, RTL | RTL == golden (raw) | cycles per step (to prediction / to update) |",
             "|---|---:|---:|---:|---:|---|---|"]
    for gate in ("x", "cz"):
        r = hardware_in_the_loop(gate, n_devices=4, k_steps=8, seed=0, backends=("float", "golden", "rtl"))
        same = bool(np.array_equal(r["rtl"]["raw_predictions"], r["golden"]["raw_predictions"]))
        lines.append(
            f"| {gate.upper()} | {r['golden']['fidelity'][:, 0].mean():.5f} | {r['float']['fidelity'][:, -1].mean():.5f} | "
            f"{r['golden']['fidelity'][:, -1].mean():.5f} | {r['rtl']['fidelity'][:, -1].mean():.5f} | {same} | "
            f"{r['prediction_latency_cycles']} / {r['step_latency_cycles']} |")
    lines.append("")
    (HERE / "hil.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
