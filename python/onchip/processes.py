"""External tools as child processes that end with the command.

``subprocess.run`` kills only the child it started when its wait is cut short (Ctrl-C, a
scheduler's SIGTERM, a timeout), and the tools onchip starts start their own: ``sh`` runs
Yosys and nextpnr (Amaranth's build script), ``make`` runs the compiler, SymbiYosys its
solvers. Those ran on after onchip had exited, nextpnr for 10 s and more. :func:`run` starts
the child in a process group of its own and kills the whole group instead; :func:`end_all`
ends every group still running (a sweep's worker told to stop). A process pool's workers (a
sweep's points, a seed method's seeds) end with the command too: :func:`stop_pool`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

#: this process's children started by :func:`run` and not yet ended
_running: set[subprocess.Popen] = set()


def cxx_compiler() -> str:
    """Path of the C++ compiler that the C simulation and Verilator's models are built with:
    ``$CXX`` if set, else the first of g++, c++, clang++ on PATH.

    Raises:
        FileNotFoundError: none is found (naming ``$CXX`` when it is set but not on PATH).
    """
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    named = os.environ.get("CXX")
    raise FileNotFoundError(f"C++ compiler {named!r} (CXX) not found" if named
                            else "no C++ compiler found (set CXX or install g++)")


def run(cmd: list[str], *, input: str | bytes | None = None, timeout: float | None = None,
        capture_output: bool = False, **popen_kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, ...)`` (same arguments and result; ``check`` is not taken), with the
    child and everything it starts killed (SIGKILL to its process group) when the wait ends by
    an exception: an interrupt (:mod:`onchip.interrupts`) or the ``timeout`` (seconds).

    Raises:
        subprocess.TimeoutExpired: ``timeout`` passed (the group is killed first).
        OSError: ``cmd`` cannot be started (as ``subprocess.run``).
    """
    if capture_output:
        popen_kwargs["stdout"] = popen_kwargs["stderr"] = subprocess.PIPE
    # its own session: a terminal's Ctrl-C reaches onchip alone, which then ends the group
    with subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.PIPE if input is not None else None,
                          **popen_kwargs) as proc:
        _running.add(proc)
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            _running.discard(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def end_all() -> None:
    """Kill every process group :func:`run` started in this process and that still runs.

    Safe in a signal handler: it does not wait for them (the interrupted ``run`` may hold the
    child's wait lock)."""
    for proc in list(_running):
        _kill_group(proc, wait=False)


def _kill_group(proc: subprocess.Popen, *, wait: bool = True) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group outlives its leader while a member runs
    except ProcessLookupError:
        pass
    if wait:
        proc.wait()


def stop_pool(pool) -> None:
    """Drop a ``ProcessPoolExecutor``'s queued work and end its running workers now: leaving its
    ``with`` would wait for everything submitted (a sweep interrupted at 2 s ran on for its whole
    28 s; a seed method's workers trained on after Ctrl-C). Workers started with
    :func:`pool_worker_start` end at once, with the tools they run. The workers are the pool's
    private ``_processes``: Python 3.11 has no public way (``terminate_workers`` came in 3.14)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.terminate()  # SIGTERM: _worker_end
    for worker in workers:
        worker.join(timeout=10)


def pool_worker_start() -> None:
    """A pool worker's initializer: SIGTERM (:func:`stop_pool`) ends it at once."""
    signal.signal(signal.SIGTERM, _worker_end)


def _worker_end(signum, frame):
    """A worker told to stop ends at once, with the tools it runs (their own process groups). Not by
    unwinding: the worker would take the next queued item."""
    end_all()
    os._exit(128 + signum)
