"""An interrupted command ends the tools it started and a sweep's running points with it
and a seed method's seeds (onchip.processes, onchip.sweep.executors, onchip.methods._seeds): nothing runs on
after onchip has stopped."""

import multiprocessing
import signal
import subprocess
import sys
import time

import pytest
from onchip import processes
from onchip.sweep.executors import LocalExecutor


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _wait_for(path, seconds=60.0):
    deadline = time.time() + seconds
    while time.time() < deadline and not (path.exists() and path.read_text().strip()):
        time.sleep(0.05)
    return int(path.read_text().split()[0])


# the shape of the tools onchip starts: a shell (or make, g++, sby) whose own child does the work
_TOOL = 'sleep 60 & echo $! > "$1"; wait'


class _Stopped(Exception):
    pass


def test_an_interrupted_tool_is_ended_with_the_children_it_started(tmp_path):
    """subprocess.run kills only the shell; nextpnr, started by the shell, ran on for 10 s after
    onchip had exited. The whole process group is ended instead."""
    pidfile = tmp_path / "pid"

    def stop(signum, frame):
        raise _Stopped

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # the interrupt, while run() waits for the tool
        with pytest.raises(_Stopped):
            processes.run(["sh", "-c", _TOOL, "tool", str(pidfile)])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    worker = _wait_for(pidfile)
    deadline = time.time() + 10
    while time.time() < deadline and _alive(worker):
        time.sleep(0.05)
    assert not _alive(worker)
    assert not processes._running  # nothing left registered


def test_a_timed_out_tool_is_ended_with_its_children_and_a_finished_one_returns_as_subprocess_run(tmp_path):
    pidfile = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run(["sh", "-c", _TOOL, "tool", str(pidfile)], timeout=0.5)
    worker = _wait_for(pidfile)
    deadline = time.time() + 10
    while time.time() < deadline and _alive(worker):
        time.sleep(0.05)
    assert not _alive(worker)
    done = processes.run([sys.executable, "-c", "import sys; print(input()); sys.exit(3)"], input="hello",
                         capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "hello\n", "")


def _point(config):
    """A sweep point that runs a tool for a minute; records that it started and its tool's pid."""
    folder, n = config
    started = folder / f"started-{n}"
    processes.run(["sh", "-c", _TOOL, "tool", str(started)])
    return n


def test_an_interrupted_sweep_ends_its_running_points_and_their_tools_and_starts_no_other(tmp_path):
    """Leaving the process pool waited for every point submitted: a sweep interrupted at 2 s ran
    on to the end (28 s) before exiting. Now queued points are dropped, and running ones end with
    the tools they started."""
    executor = LocalExecutor(jobs=2)
    points = executor.map(_point, [(tmp_path, n) for n in range(6)])

    def stop(signum, frame):  # once both workers are inside a point, their tools running
        if sum(bool(p.read_text().strip()) for p in tmp_path.glob("started-*")) >= 2:
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.1)

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            next(points)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # the pool's workers have ended: polled, since the pool's own thread may be reaping a worker
    # (its waitpid and ours race; the loser sees the worker as running until the winner records it)
    deadline = time.time() + 10
    while time.time() < deadline and multiprocessing.active_children():
        time.sleep(0.05)
    assert multiprocessing.active_children() == []
    started = sorted(tmp_path.glob("started-*"))
    assert len(started) == 2  # one point per worker; the four queued never start
    tools = [_wait_for(p) for p in started]
    deadline = time.time() + 10
    while time.time() < deadline and any(map(_alive, tools)):
        time.sleep(0.05)
    assert not any(map(_alive, tools))
    time.sleep(1.0)
    assert sorted(tmp_path.glob("started-*")) == started  # and no worker took another point


def _slow_seed(folder, seed):
    import os

    (folder / f"started-{seed}").write_text(str(os.getpid()))
    time.sleep(60)
    return seed


def test_an_interrupted_seed_method_ends_its_seeds_workers_and_starts_no_other_seed(tmp_path):
    """A seed method's workers trained on after Ctrl-C or SIGTERM: leaving the pool waited for every
    seed. Now the queued seeds are dropped and the running ones end (onchip.methods._seeds)."""
    from onchip.methods._seeds import run_seeds

    def stop(signum, frame):  # once both workers are inside a seed
        if len(list(tmp_path.glob("started-*"))) >= 2:
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.1)

    previous = signal.signal(signal.SIGALRM, stop)
    start = time.time()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            run_seeds(_slow_seed, tmp_path, [0, 1, 2, 3], jobs=2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.time() - start < 50  # not the 60 s a seed sleeps
    workers = [int(p.read_text()) for p in tmp_path.glob("started-*")]
    deadline = time.time() + 10
    while time.time() < deadline and any(map(_alive, workers)):
        time.sleep(0.05)
    assert len(workers) == 2 and not any(map(_alive, workers))
    time.sleep(1.0)
    assert len(list(tmp_path.glob("started-*"))) == 2  # the two queued seeds never start
