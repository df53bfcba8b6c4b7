"""Verilate a learner with the stream harness, cache the executable, run whole streams through it.

:func:`build_model` turns Verilog text and its :class:`~onchip.verilator.ports.PortLayout`
into a :class:`StreamModel`: ``harness.cpp`` (package data) compiled together with
the Verilated design, optimised for throughput (Verilator ``-O3``,
``--x-assign fast``, ``--x-initial fast``, no tracing, no assertions,
single-threaded model; C++ ``-O3`` on the per-cycle code). The executable is
kept in the build cache (:mod:`onchip.cache`) under a hash of the
Verilog, the Verilator and compiler versions, the harness source and every
flag. Verilator's own runtime objects (``verilated.o`` ...) depend only on the
toolchain and flags, so they are cached separately and reused by every model,
which saves most of a build's compile time.

The harness follows the Verilator manual ("Connecting to C++": one ``eval()``
per clock edge; "Benchmarking & Optimization": ``-O3``, ``--x-assign fast``,
``--x-initial fast``, ``OPT_FAST``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from .. import processes
from . import toolchain
from ..cache import cached_build, digest, entry_path
from .ports import PortLayout, pack_fields, words
from ..errors import ToolError

#: Verilator options of every build.
VERILATOR_FLAGS = (
    "--cc", "--exe", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
    "-Wno-fatal", "-Wno-lint", "-Wno-style", "--prefix", "Vtop", "-CFLAGS", "-std=c++20",
)
#: make variables of every build (Verilator's default is -Os): -O3 on the per-cycle code; the
#: runtime library (OPT_GLOBAL) is off the hot path, -O1 keeps its one-off compile short.
#: The wheel's verilated.mk leaves its configure results empty; CFG_CXXFLAGS_PCH_I must name the
#: compiler's include flag, or designs large enough for a precompiled header fail to compile.
MAKE_VARS = ("OPT_FAST=-O3", "OPT_SLOW=-O1", "OPT_GLOBAL=-O1", "CFG_CXXFLAGS_PCH_I=-include")
#: Bump when the build recipe changes in a way the hashed inputs do not show.
RECIPE = "onchip-stream-model-1"


class BuildError(ToolError):
    """Verilator or the C++ compiler rejected a design; the message ends with the log's tail."""


class SimulationError(ToolError):
    """The compiled model stopped with an error (e.g. the learner stopped handshaking)."""


def harness_source() -> str:
    """Text of the C++ stream harness shipped with the package."""
    return resources.files(__package__).joinpath("harness.cpp").read_text()


def ports_header(layout: PortLayout) -> str:
    """``onchip_ports.h``: the harness's compile-time view of the port layout."""
    w = layout.widths
    return "\n".join([
        "#pragma once",
        f"#define ONCHIP_S_WORDS {words(w['s'])}",
        f"#define ONCHIP_M_WORDS {words(w['m'])}",
        f"#define ONCHIP_PC_WORDS {words(w['pc'])}",
        f"#define ONCHIP_PR_WORDS {words(w['pr'])}",
        f"#define ONCHIP_COEF_WIDTH {layout.coef_width}",
        f"#define ONCHIP_N_PARAMS {layout.param_count}",
        *([f"#define ONCHIP_CHANNELS {layout.channels}",
           f"#define ONCHIP_PC_CHANNEL_LSB {layout.fields()['pc']['channel'][0]}"] if layout.channels > 1 else []),
        "",
    ])


def make_vars() -> tuple[str, ...]:
    """make variables of a build: :data:`MAKE_VARS`, plus clang's precompiled-header suffix."""
    clang = "clang" in toolchain.version().rsplit(";", 1)[-1].lower()
    return MAKE_VARS + (("CFG_GCH_IF_CLANG=.gch",) if clang else ())


def _jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _run_logged(cmd: list[str], cwd: Path, log: Path, what: str) -> None:
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        done = processes.run(cmd, cwd=cwd, env=toolchain.tool_env(), stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise BuildError(f"{what} failed (exit status {done.returncode}); last lines of the log:\n{tail}")


def _runtime_key(version: str) -> str:
    return digest(RECIPE, "runtime", version, *VERILATOR_FLAGS, *make_vars())


def _build_into(stage: Path, verilog: str, top: str, header: str, root) -> None:
    src, obj = stage / "src", stage / "obj"
    src.mkdir()
    (src / "design.v").write_text(verilog)
    (src / "harness.cpp").write_text(harness_source())
    (src / "onchip_ports.h").write_text(header)
    log = stage / "build.log"
    cxx = toolchain.compiler()
    started = time.perf_counter()
    _run_logged(
        [str(toolchain.verilator_root() / "bin" / "verilator"), *VERILATOR_FLAGS, "--top-module", top,
         "-Mdir", str(obj), "-o", "sim", str(src / "design.v"), str(src / "harness.cpp")],
        stage, log, "Verilator",
    )
    runtime = _runtime_key(toolchain.version())
    runtime_dir = entry_path("vlruntime", runtime, root)
    reused = runtime_dir.is_dir()
    if reused:
        for o in runtime_dir.glob("*.o"):
            shutil.copyfile(o, obj / o.name)  # newer than the makefiles: make keeps them
    _run_logged(
        ["make", "-C", str(obj), "-f", "Vtop.mk", f"-j{_jobs()}", f"CXX={cxx}", f"LINK={cxx}", *make_vars(), "sim"],
        stage, log, "C++ build",
    )
    if not reused:
        def keep(folder: Path) -> None:
            for o in obj.glob("verilated*.o"):
                shutil.copyfile(o, folder / o.name)
        cached_build("vlruntime", runtime, keep, root=root)
    shutil.move(str(obj / "sim"), stage / "sim")
    shutil.rmtree(obj)
    (stage / "build.json").write_text(json.dumps({
        "top": top, "toolchain": toolchain.version(), "verilator_flags": list(VERILATOR_FLAGS),
        "make_vars": list(make_vars()), "build_seconds": time.perf_counter() - started,
        "reused_runtime": reused,
    }, indent=1))


@dataclass(frozen=True)
class StreamResult:
    """One stream through a :class:`StreamModel`.

    Attributes:
        predictions: (N, n_out) int64 raw predictions, in sample order.
        parameters: (P,) int64 raw parameters read back after the last prediction.
        stream_cycles: clock cycles from the first offered sample to the last prediction.
        readback_cycles: clock cycles of the parameter read-back.
        sim_seconds: wall time of the simulation loops (stream and read-back, harness clock).
        sim_cpu_seconds: CPU time of the harness process over those loops (what one
            core spends; lower than ``sim_seconds`` when other processes share the core).
        wall_seconds: wall time of the whole call (packing, process start, file I/O, unpacking).
        load_cycles: clock cycles of the parameter loads through the parameter port (0 without).
        decisions: (N,) int64, the prediction stream's decision field.
    """

    predictions: np.ndarray
    parameters: np.ndarray
    stream_cycles: int
    readback_cycles: int
    sim_seconds: float
    sim_cpu_seconds: float
    wall_seconds: float
    load_cycles: int = 0
    decisions: np.ndarray | None = None


@dataclass(frozen=True)
class StreamModel:
    """A compiled stream harness of one design (an executable in the build cache).

    Attributes:
        path: the cache entry folder (``sim``, ``build.json``, ``build.log``, ``src/``).
        layout: the design's port layout.
        built: whether obtaining it ran a build (False: cache hit).
    """

    path: Path
    layout: PortLayout
    built: bool

    @property
    def executable(self) -> Path:
        return self.path / "sim"

    def run(self, x_raw, y_raw, *, kind=None, load=None, reload_each: bool = False,
            progress: bool = True, channel=None) -> StreamResult:
        """Stream samples through the design (test-then-train), then read all parameters.

        Args:
            x_raw: (N, n_in) raw inputs (integers fitting the input width).
            y_raw: (N, n_out) raw targets or errors (integers fitting the y field).
            kind: (N,) sample kinds (:class:`onchip.model.SampleKind`; None: all TARGET).
            load: (P,) raw parameters (N > 1 channels: (N, P)) written through the parameter port after
                reset, before the first sample (default: none, the design's reset values stay).
            reload_each: write ``load`` again before every sample and let the next sample wait
                for the prediction, so every prediction is made with ``load`` (inference on a
                learner that always learns; the parameters read back are ``load`` updated by
                the last sample only).
            progress: show a tqdm bar of predictions received.
            channel: (N,) the channel of each sample (N > 1 channels; None: all 0).

        Returns:
            :class:`StreamResult` (``parameters`` (N, P) for N > 1 channels).

        Raises:
            ValueError: bad shapes or values (see :meth:`PortLayout.pack_samples`).
            SimulationError: the harness failed (learner stuck, I/O error).
        """
        from ..progress import progress_bar

        started = time.perf_counter()
        lay = self.layout
        packed = lay.pack_samples(x_raw, y_raw, kind, channel)
        if load is None and reload_each:
            raise ValueError("reload_each needs parameters to load (load=None)")
        commands = np.zeros((0, words(lay.widths["pc"])), np.uint32) if load is None else write_commands(lay, load)
        n = len(packed)
        w = lay.widths
        with tempfile.TemporaryDirectory(prefix="onchip-rtl-") as tmp:
            tmp = Path(tmp)
            with open(tmp / "in.bin", "wb") as f:
                f.write(b"ONCHIPS2")
                f.write(np.array([n, packed.shape[1], len(commands), int(reload_each)], np.uint64).tobytes())
                f.write(np.ascontiguousarray(commands).tobytes())
                f.write(np.ascontiguousarray(packed).tobytes())
            stats = {}
            with open(tmp / "stderr.txt", "wb") as err, progress_bar(
                total=n, unit="sample", disable=not progress, desc="rtl", leave=False
            ) as bar:
                proc = subprocess.Popen(
                    [str(self.executable), str(tmp / "in.bin"), str(tmp / "out.bin")],
                    stdout=subprocess.PIPE, stderr=err, text=True,
                )
                try:
                    for line in proc.stdout:
                        head, _, rest = line.partition(" ")
                        if head == "progress":
                            bar.update(int(rest) - bar.n)
                        elif head == "done":
                            stats = dict(kv.split("=") for kv in rest.split())
                            bar.update(n - bar.n)
                    rc = proc.wait()
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
            if rc != 0 or not stats:
                message = (tmp / "stderr.txt").read_text(errors="replace").strip()
                raise SimulationError(f"stream harness {self.executable} exited with status {rc}: {message}")
            out = np.fromfile(tmp / "out.bin", np.uint32)
        m_words, pr_words = words(w["m"]), words(w["pr"])
        n_pred = n * m_words
        preds = lay.unpack_predictions(out[:n_pred].reshape(n, m_words))
        decisions = lay.unpack_decisions(out[:n_pred].reshape(n, m_words))
        params = lay.unpack_parameters(out[n_pred:].reshape(lay.channels * lay.param_count, pr_words))
        if lay.channels > 1:
            params = params.reshape(lay.channels, lay.param_count)
        return StreamResult(
            predictions=preds,
            parameters=params,
            stream_cycles=int(stats["stream_cycles"]),
            readback_cycles=int(stats["readback_cycles"]),
            sim_seconds=float(stats["seconds"]),
            sim_cpu_seconds=float(stats["cpu_seconds"]),
            wall_seconds=time.perf_counter() - started,
            load_cycles=int(stats.get("load_cycles", 0)),
            decisions=decisions,
        )


def write_commands(layout: PortLayout, theta) -> np.ndarray:
    """``pc__payload`` words of one write command per parameter: address a gets ``theta[a]``.

    Args:
        layout: the design's port layout.
        theta: (P,) raw parameters, each fitting ``coef_width`` bits; (N, P) for N > 1 channels
            (channel by channel, each command naming its channel).

    Returns:
        (P, words(pc width)) uint32 ((N P, ...) for N channels).

    Raises:
        ValueError: ``theta`` of the wrong length, not integers, or a value that does not fit.
    """
    theta = np.asarray(theta)
    p, wc, nch = layout.param_count, layout.coef_width, layout.channels
    want = (p,) if nch == 1 else (nch, p)
    if theta.shape != want:
        raise ValueError(f"theta must have shape {want}, got {theta.shape}")
    if theta.size and not np.issubdtype(theta.dtype, np.integer):
        raise ValueError(f"theta must hold raw integers, got dtype {theta.dtype}")
    lo, hi = (-(1 << (wc - 1)), (1 << (wc - 1)) - 1) if layout.coef_signed else (0, (1 << wc) - 1)
    if theta.size and (theta.min() < lo or theta.max() > hi):
        raise ValueError(f"theta holds raw values outside a {wc}-bit parameter ([{lo}, {hi}])")
    at = layout.fields()["pc"]
    fields = [(theta.astype(np.int64).ravel(), *at["data"]), (np.tile(np.arange(p, dtype=np.int64), nch), *at["addr"]),
              (np.ones(p * nch, np.int64), *at["write"])]
    if nch > 1:
        fields.append((np.repeat(np.arange(nch, dtype=np.int64), p), *at["channel"]))
    return pack_fields(fields, p * nch, layout.widths["pc"])


def model_key(verilog: str, top: str, layout: PortLayout) -> str:
    """Cache key: Verilog, top name, port header, harness source, toolchain versions, flags."""
    return digest(
        RECIPE, verilog, top, ports_header(layout), harness_source(), toolchain.version(),
        *VERILATOR_FLAGS, *make_vars(),
    )


def build_model(
    verilog: str, layout: PortLayout, *, top: str = "onchip_learner", root: str | os.PathLike | None = None
) -> StreamModel:
    """Compile (or fetch from the cache) the stream harness of a design.

    Args:
        verilog: the whole Verilog text of the design.
        layout: its port layout (must match the Verilog's port widths).
        top: name of the top module.
        root: cache folder (default :func:`onchip.cache.cache_root`).

    Returns:
        :class:`StreamModel`.

    Raises:
        ValueError: empty Verilog or a bad top name.
        toolchain.ToolchainError: Verilator or the compiler is missing.
        BuildError: Verilator or the C++ compiler failed (no cache entry is left).
    """
    if not isinstance(verilog, str) or not verilog.strip():
        raise ValueError("verilog must be non-empty Verilog text")
    if not isinstance(top, str) or not top.isidentifier():
        raise ValueError(f"top must be a Verilog module name, got {top!r}")
    header = ports_header(layout)
    key = model_key(verilog, top, layout)
    path, built = cached_build("model", key, lambda stage: _build_into(stage, verilog, top, header, root), root=root)
    return StreamModel(path=path, layout=layout, built=built)
