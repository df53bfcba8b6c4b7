"""Output folders a user can trust: replaced in one step, never lost to an interrupt or a kill at
any step of the replacement, an edit or another command's output refused unless --force, and one
rule for the exit status and the last line of an interrupted command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from onchip import interrupts, io
from onchip.cli import main
from onchip.io import MARKER, atomic_output_dir, check_output_dir, output_policy

CHECKOUT = Path(__file__).resolve().parents[1]


def _write(out: Path, text: str, command: str | None = None) -> None:
    import contextlib

    with output_policy(command) if command else contextlib.nullcontext(), atomic_output_dir(out) as stage:
        (stage / "result.txt").write_text(text)
        (stage / "sub").mkdir()
        (stage / "sub" / "more.txt").write_text(text * 2)


def _contents(out: Path) -> str:
    return (out / "result.txt").read_text()


def _beside(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


# ------------------------------------------------------------------ the commit, step by step


def test_the_exchange_swaps_two_folders_in_one_step(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("from a")
    (b / "y").write_text("from b")
    assert io._exchange(a, b) is True  # Linux with glibc 2.28+ on ext4/tmpfs: the fallback is not needed
    assert [p.name for p in a.iterdir()] == ["y"] and [p.name for p in b.iterdir()] == ["x"]


def test_out_exists_at_every_step_of_a_replacement(tmp_path, monkeypatch):
    """Watched at the exchange and at the removal of the earlier output: OUT is there, whole."""
    out = tmp_path / "out"
    _write(out, "old")
    seen = []
    exchange, discard = io._exchange, io._discard

    def watched_exchange(a, b):
        seen.append(("before exchange", _contents(out)))
        done = exchange(a, b)
        seen.append(("after exchange", _contents(out)))
        return done

    def watched_discard(folder):
        seen.append(("before removal", _contents(out)))
        discard(folder)

    monkeypatch.setattr(io, "_exchange", watched_exchange)
    monkeypatch.setattr(io, "_discard", watched_discard)
    _write(out, "new")
    assert seen == [("before exchange", "old"), ("after exchange", "new"), ("before removal", "new")]
    assert _beside(tmp_path) == ["out"]


def test_an_interrupt_before_the_commit_leaves_out_as_it_was(tmp_path):
    out = tmp_path / "out"
    _write(out, "old")
    with pytest.raises(KeyboardInterrupt), atomic_output_dir(out) as stage:
        (stage / "result.txt").write_text("half")
        raise KeyboardInterrupt
    assert _contents(out) == "old" and _beside(tmp_path) == ["out"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_commit_waits_until_it_is_done(tmp_path, monkeypatch, signum):
    """A real signal raised between the exchange and the removal of the earlier output is held:
    it is delivered once OUT is the new output and nothing is left beside it."""
    out = tmp_path / "out"
    _write(out, "old")
    discard = io._discard

    def signalled(folder):
        signal.raise_signal(signum)
        discard(folder)

    monkeypatch.setattr(io, "_discard", signalled)
    with interrupts.handled():
        expected = interrupts.Terminated if signum == signal.SIGTERM else interrupts.Interrupted
        with pytest.raises(expected), output_policy(None) as committed:
            _write(out, "new")
    assert committed == [out.resolve()]
    assert _contents(out) == "new" and _beside(tmp_path) == ["out"]


def test_a_file_changed_during_the_run_is_still_refused_at_the_commit(tmp_path):
    out = tmp_path / "out"
    _write(out, "old")
    with pytest.raises(FileExistsError, match="result.txt, changed since"), atomic_output_dir(out) as stage:
        (stage / "result.txt").write_text("new")
        (out / "result.txt").write_text("edited while the run ran")
    assert _contents(out) == "edited while the run ran" and _beside(tmp_path) == ["out"]


_KILLED_AT = """
import os, signal, sys
from pathlib import Path
from onchip import io
out, step = Path(sys.argv[1]), sys.argv[2]
def kill(*args):
    os.kill(os.getpid(), signal.SIGKILL)
if step == "removal":  # after the exchange, before the earlier output is removed
    io._discard = kill
else:  # no exchange on this file system: the two renames, killed after the first or the second
    io._exchange = lambda a, b: False
    renames, rename = [], os.rename
    def counted(a, b):
        rename(a, b)  # the first try, the staging folder onto OUT, fails: OUT exists
        renames.append(b)
        if len(renames) == {"first rename": 1, "second rename": 2}[step]:
            kill()
    io.os.rename = counted
with io.atomic_output_dir(out) as stage:
    (stage / "result.txt").write_text("new")
"""


@pytest.mark.parametrize("step, after", [("removal", "new"), ("first rename", "old"), ("second rename", "new")])
def test_a_kill_at_any_step_is_recovered_by_the_next_command(tmp_path, step, after):
    """SIGKILL at each step of the commit (the exchange's removal of the earlier output, the
    fallback's two renames). The next command on OUT finds a whole output, the earlier one where
    the kill came before the new one was in place, and no staging folder beside it."""
    out = tmp_path / "out"
    _write(out, "old")
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT / "python"))
    proc = subprocess.run([sys.executable, "-c", _KILLED_AT, str(out), step], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(_beside(tmp_path)) > 1  # it was killed with a staging folder left
    check_output_dir(out)  # what the next command does first
    assert _contents(out) == after and _beside(tmp_path) == ["out"]
    _write(out, "next")  # and it replaces OUT as usual
    assert _contents(out) == "next" and _beside(tmp_path) == ["out"]


def test_a_staging_folder_of_a_run_in_progress_is_left_alone(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out) as stage:
        (stage / "result.txt").write_text("mine")
        check_output_dir(out)  # another command on the same OUT, meanwhile
        assert stage.exists()
    assert _contents(out) == "mine" and _beside(tmp_path) == ["out"]


def test_a_leftover_of_an_older_onchip_is_recovered(tmp_path):
    """The layout of the two renames before this release: OUT moved into ``.OUT.xxxxxxxx.old/old``."""
    old = tmp_path / ".out.abcd1234.old" / "old"
    old.mkdir(parents=True)
    (old / MARKER).write_text("written by onchip\n")
    (old / "result.txt").write_text("old")
    (tmp_path / ".out.wxyz_789.partial").mkdir()
    check_output_dir(tmp_path / "out")
    assert _contents(tmp_path / "out") == "old" and _beside(tmp_path) == ["out"]
    (tmp_path / ".outer.abcd1234.partial").mkdir()  # another folder's: not touched
    check_output_dir(tmp_path / "out")
    assert _beside(tmp_path) == [".outer.abcd1234.partial", "out"]


# ------------------------------------------------------------------ edits and other commands' outputs


def test_the_marker_records_the_command_and_every_files_hash(tmp_path):
    import hashlib

    _write(tmp_path / "out", "text", command="onchip demo")
    lines = (tmp_path / "out" / MARKER).read_text().splitlines()
    assert "command: onchip demo" in lines
    assert f"{hashlib.sha256(b'text').hexdigest()}  result.txt" in lines
    assert f"{hashlib.sha256(b'texttext').hexdigest()}  sub/more.txt" in lines and "sub/" in lines


def _run(out, *flags):
    return main(["run", "--quiet", "--task", "drift-regression", "--samples", "300", "--out", str(out), *flags])


def test_an_edited_output_is_refused_naming_the_file_unless_forced(tmp_path, capsys):
    out = tmp_path / "job"
    assert _run(out) == 0
    (out / "spec.toml").write_text((out / "spec.toml").read_text() + "# my note\n")
    capsys.readouterr()
    assert _run(out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds spec.toml, changed since onchip wrote it" in err and "--force" in err
    assert (out / "spec.toml").read_text().endswith("# my note\n")  # untouched
    assert _run(out, "--force") == 0
    assert not (out / "spec.toml").read_text().endswith("# my note\n")
    assert _beside(tmp_path) == ["job"]


def test_another_commands_output_is_refused_unless_forced(tmp_path, capsys):
    out = tmp_path / "g"
    _write(out, "a design", command="onchip generate")
    assert _run(out) == 2
    err = capsys.readouterr().err
    assert "is the output of `onchip generate`, not `onchip run`" in err and err.count("\n") == 1
    assert _contents(out) == "a design"
    assert _run(out, "--force") == 0 and (out / "metrics.json").exists()


def test_an_unchanged_output_of_the_same_command_is_replaced(tmp_path):
    out = tmp_path / "job"
    assert _run(out) == 0
    first = (out / "metrics.json").stat().st_ino
    assert _run(out, "--seed", "1") == 0
    assert (out / "metrics.json").stat().st_ino != first


def test_force_never_deletes_a_file_onchip_did_not_write(tmp_path, capsys):
    out = tmp_path / "job"
    assert _run(out) == 0
    (out / "notes.md").write_text("mine")
    assert _run(out, "--force") == 2
    assert "notes.md, which onchip did not write" in capsys.readouterr().err
    assert (out / "notes.md").read_text() == "mine"


def test_an_output_of_an_older_onchip_without_hashes_is_still_replaced(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    (out / MARKER).write_text("written by onchip; this folder is replaced whole by the next run\n"
                              "files written (anything else in this folder stops the next run from replacing it):\n"
                              "metrics.json\n")
    assert _run(out) == 0 and (out / "predictions.npy").exists()


# ------------------------------------------------------------------ one rule for an interrupt


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_after_wrote_says_the_output_is_whole(tmp_path, monkeypatch, capsys, signum, code):
    """The signal lands just after the ``wrote OUT/`` line: the status is the interrupt's, and the
    last line says OUT was written (not 'nothing was written')."""
    import builtins

    out = tmp_path / "job"
    real_print = builtins.print

    def printed(*args, **kwargs):
        real_print(*args, **kwargs)
        if args and str(args[0]).startswith("wrote "):
            signal.raise_signal(signum)

    monkeypatch.setattr(builtins, "print", printed)
    assert _run(out) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"onchip run: interrupted; {out}/ was already written whole"]
    assert (out / "metrics.json").exists() and _beside(tmp_path) == ["job"]


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_before_the_commit_exits_with_its_own_status(tmp_path, monkeypatch, capsys, signum, code):
    from onchip import run as job

    def cut(*args, **kwargs):
        signal.raise_signal(signum)

    monkeypatch.setattr(job, "run_backend", cut)
    assert _run(tmp_path / "job") == code
    assert capsys.readouterr().err.strip().splitlines() == ["onchip run: interrupted; nothing was written"]
    assert _beside(tmp_path) == []


_LATE = """
import os, signal, sys
from onchip.cli import main
sys.argv = ["onchip", *sys.argv[1:]]
code = main()
os.kill(os.getpid(), getattr(signal, os.environ["LATE_SIGNAL"]))  # after main returned: the interpreter's exit
sys.exit(code)
"""


@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupt_after_the_command_returned_follows_the_same_rule(tmp_path, name, code):
    out = tmp_path / "job"
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT / "python"), LATE_SIGNAL=name)
    proc = subprocess.run([sys.executable, "-c", _LATE, "run", "--quiet", "--task", "drift-regression",
                           "--samples", "300", "--out", str(out)], env=env, capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"wrote {out}/"
    assert proc.stderr.strip().splitlines() == [f"onchip run: interrupted; {out}/ was already written whole"]
    assert (out / "metrics.json").exists() and _beside(tmp_path) == ["job"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_real_signal_at_any_moment_leaves_out_whole(tmp_path, name):
    """``onchip run`` over an earlier output, signalled at moments spread over its run (start-up,
    the run, the commit, its end): OUT is always a whole output, the earlier one exactly when the
    last line says nothing was written, and nothing is left beside it."""
    import time

    out = tmp_path / "job"
    assert _run(out) == 0
    earlier = (out / "metrics.json").read_text()
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT / "python"))
    code = {"SIGINT": 130, "SIGTERM": 143}[name]
    for delay in (0.3, 0.8, 1.3, 1.8, 2.3, 2.8):
        proc = subprocess.Popen([sys.executable, "-m", "onchip.cli", "run", "--quiet", "--task", "drift-regression",
                                 "--samples", "300", "--seed", "1", "--out", str(out)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        proc.send_signal(getattr(signal, name))
        stdout, stderr = proc.communicate(timeout=120)
        assert _beside(tmp_path) == ["job"], (delay, stderr)
        now = (out / "metrics.json").read_text()
        if proc.returncode == 0:  # finished before the signal
            assert now != earlier
        else:
            assert proc.returncode == code, (delay, stderr)
            last = stderr.strip().splitlines()[-1]
            assert last.partition(": ")[0] in ("onchip", "onchip run"), (delay, stderr)  # before or after parsing
            assert last.partition(": ")[2] in ("interrupted; nothing was written",
                                               f"interrupted; {out}/ was already written whole"), (delay, stderr)
            assert (now == earlier) == last.endswith("nothing was written"), (delay, stderr)
        if now != earlier:
            assert _run(out) == 0  # back to the earlier output for the next moment
            earlier = (out / "metrics.json").read_text()


class _SignalOnCollect:
    """Raises SIGINT from ``__del__``, where Python prints "Exception ignored ... KeyboardInterrupt"
    and goes on: the interrupt is lost unless onchip's handler has recorded it."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def test_an_interrupt_swallowed_while_main_starts_still_stops_the_command(tmp_path, monkeypatch, capsys):
    """Seen by a user at 0.3 s after start, about 1 run in 20: "Exception ignored ...
    KeyboardInterrupt", then the run finished, wrote its output and exited 0. The interrupt landed
    in a finaliser during main's first imports, before onchip's handler was installed."""
    import types

    import onchip.commands._args as real
    shim = types.ModuleType(real.__name__)

    def first_import(name):
        if name == "command_line":
            _SignalOnCollect()  # collected at once: the signal is raised and swallowed here
        return getattr(real, name)

    shim.__getattr__ = first_import
    monkeypatch.setitem(sys.modules, real.__name__, shim)
    swallowed = []  # where Python prints "Exception ignored in ..."
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: swallowed.append(unraisable.exc_type))
    assert _run(tmp_path / "job") == 130
    assert [issubclass(t, KeyboardInterrupt) for t in swallowed] == [True]  # the case to cover: it was swallowed
    assert capsys.readouterr().err.strip().splitlines() == ["onchip run: interrupted; nothing was written"]
    assert _beside(tmp_path) == []


def test_a_commit_that_fails_between_the_renames_puts_the_earlier_output_back(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _write(out, "old")
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)  # a file system without the exchange
    rename = os.rename

    def failing(a, b):
        if Path(b) == out.resolve() and ".partial" in Path(a).name and Path(a).exists() and \
                not out.exists():  # the second rename: the staging folder onto OUT
            raise OSError(28, "No space left on device")
        rename(a, b)

    monkeypatch.setattr(io.os, "rename", failing)
    with pytest.raises(OSError, match="No space"):
        _write(out, "new")
    assert _contents(out) == "old" and _beside(tmp_path) == ["out"]


@pytest.fixture(autouse=True)
def _default_ctrl_c():
    # a command starts with Python's default Ctrl-C handler, which onchip replaces only while it is the
    # default; the worker running these tests may have been left another by a test elsewhere
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
