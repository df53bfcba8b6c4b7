"""Output folders that appear whole or not at all, and never replace what onchip did not write.

A command writes its output into a hidden staging folder beside ``--out`` (``.OUT.xxxxxxxx.partial``)
and commits it in one step: where the system has it, an atomic exchange of the two folders
(Linux ``renameat2(RENAME_EXCHANGE)``), so there is no instant without ``OUT``; elsewhere two
renames (``OUT`` into ``.OUT.xxxxxxxx.old/old``, then the staging folder onto ``OUT``). Then the
earlier output is removed. Ctrl-C and SIGTERM are held during the commit (:func:`onchip.interrupts.held`).
A staging folder a killed run left behind is recovered (an earlier output whose replacement
was cut between the two renames is put back) or removed by the next command on that ``OUT``.

Each output holds :data:`MARKER`, naming the command that wrote it and the SHA-256 of every file:
a later command replaces the folder only if nothing was added to it (always), and, unless forced
(``--force``, :func:`output_policy`), no file was changed since and it is the same command's output.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from .interrupts import check, held


#: Written into every output folder: only folders holding it may be replaced by a later run.
#: It names the command that wrote the folder and lists every entry with each file's SHA-256.
MARKER = ".onchip-output"
_MARKER_TEXT = "written by onchip; this folder is replaced whole by the next run of the same command\n"
_COMMAND_HEAD = "command: "
_MANIFEST_HEAD = ("files written (SHA-256, path; a file added here, or one changed since, stops the next run "
                  "from replacing this folder):")
#: the list of earlier outputs, without hashes: their files count as unchanged
_OLD_MANIFEST_HEAD = "files written (anything else in this folder stops the next run from replacing it):"


@dataclasses.dataclass
class _Policy:
    command: str | None = None  # "onchip run"; None: the Python API (any command's output may be replaced)
    force: bool = False  # replace an edited folder or another command's output
    committed: list[Path] = dataclasses.field(default_factory=list)  # outputs written so far


_policy: contextvars.ContextVar[_Policy] = contextvars.ContextVar("onchip_output_policy", default=_Policy())


def read_npy(path: str | os.PathLike, field: str) -> np.ndarray:
    """One array from a .npy file, every way it can fail named in one line starting ``field``.

    Checks the file before numpy reads it: numpy guesses a pickle for a text file and advises
    ``allow_pickle``, and opens an .npz archive lazily whatever its name.

    Args:
        path: the file. field: what the message starts with (``"--theta"``, ``"data"``), the path
            following it.

    Raises:
        FileNotFoundError: no such file. ValueError: a folder, an empty file, an .npz archive, no
            NumPy header (a text or CSV file), or an array numpy cannot read without pickles
            (truncated, object dtype).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{field}: {str(p)!r} does not exist")
    if not p.is_file():
        raise ValueError(f"{field}: {str(p)!r} is not a file")
    with open(p, "rb") as f:
        magic = f.read(len(np.lib.format.MAGIC_PREFIX))
    if not magic:
        raise ValueError(f"{field}: {str(p)!r} is an empty file, not a .npy array")
    if magic[:4] == b"PK\x03\x04":
        raise ValueError(f"{field}: {str(p)!r} is an .npz archive, not a .npy array (save one array with numpy.save)")
    if magic != np.lib.format.MAGIC_PREFIX:
        raise ValueError(f"{field}: {str(p)!r} is not a .npy file (no NumPy header); save the array with numpy.save")
    try:
        return np.load(p, allow_pickle=False)
    except Exception as exc:  # a truncated file, or an object array (a pickle inside the .npy)
        raise ValueError(f"{field}: {str(p)!r} is not a readable .npy array ({exc})") from None


@contextlib.contextmanager
def output_policy(command: str | None, *, force: bool = False) -> Iterator[list[Path]]:
    """The command on whose behalf output folders are written inside the block (the CLI sets it).

    Args:
        command: recorded in :data:`MARKER` (``"onchip run"``); an output another command wrote is
            not replaced unless ``force``. None (the default outside the block): not recorded, and
            any command's output may be replaced.
        force: replace an earlier output even where a file in it changed since it was written,
            or another command wrote it (files onchip never wrote are still refused).

    Yields:
        The list of output folders committed inside the block, in order (filled as they are).
    """
    policy = _Policy(command, force)
    token = _policy.set(policy)
    try:
        yield policy.committed
    finally:
        _policy.reset(token)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _listing(folder: Path) -> list[str]:
    # every entry below folder but the marker, as relative POSIX paths (folders end with "/")
    entries = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        entries += [(rel / d).as_posix() + "/" for d in dirs]
        entries += [(rel / f).as_posix() for f in files]
    return sorted(e for e in entries if e != MARKER)


@dataclasses.dataclass
class _Record:
    command: str | None  # the command that wrote the folder; None: not recorded
    files: dict[str, str | None]  # entry -> SHA-256 (None: a folder, or an older list without hashes)


def _record(folder: Path) -> _Record | None:
    # what an earlier run wrote in its marker; None for a marker without a list (the oldest
    # outputs), whose files cannot be told from the user's
    try:
        lines = (folder / MARKER).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    command = next((ln.removeprefix(_COMMAND_HEAD) for ln in lines if ln.startswith(_COMMAND_HEAD)), None)
    for head in (_MANIFEST_HEAD, _OLD_MANIFEST_HEAD):
        if head in lines:
            files = {}
            for line in lines[lines.index(head) + 1:]:
                digest, sep, name = line.partition("  ")
                if head == _MANIFEST_HEAD and sep and re.fullmatch(r"[0-9a-f]{64}", digest):
                    files[name] = digest
                else:
                    files[line] = None
            return _Record(command, files)
    return None


def _write_marker(folder: Path, command: str | None) -> None:
    lines = [f"{_COMMAND_HEAD}{command}"] if command else []
    lines.append(_MANIFEST_HEAD)
    lines += [e if e.endswith("/") else f"{_sha256(folder / e)}  {e}" for e in _listing(folder)]
    (folder / MARKER).write_text(_MARKER_TEXT + "".join(f"{ln}\n" for ln in lines))


# ------------------------------------------------------------------ staging folders left behind

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``, glibc
    2.28+); False where the C library or the file system lacks it (the caller falls back)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _discard(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _claimed(folder: Path) -> Iterator[bool]:
    # an exclusive lock on the folder, held while the block runs: a live run holds its staging
    # folder's, so another command on the same OUT leaves it alone (the kernel drops it on exit)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)


def _leftovers(out: Path) -> list[Path]:
    # staging folders of this OUT (mkdtemp's random part is 8 characters of [a-z0-9_])
    pattern = re.compile(rf"\.{re.escape(out.name)}\.[a-z0-9_]{{8}}\.(partial|old)")
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return []
    return sorted(p for p in entries if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink())


def recover(out: str | os.PathLike) -> None:
    """Finish what a killed run left beside ``out``: a ``.old`` folder holding the earlier output
    while ``out`` is missing (killed between the two renames of the fallback) is renamed back to
    ``out``; every other staging folder of ``out`` that no live run holds is removed (an
    uncommitted output, or the earlier output once replaced). Called by :func:`check_output_dir`,
    so by the next command on that folder."""
    out = Path(out).resolve()
    for leftover in _leftovers(out):
        with _claimed(leftover) as ours:
            if not ours:
                continue  # a run in progress
            earlier = leftover / "old"
            if leftover.name.endswith(".old") and earlier.is_dir() and not os.path.lexists(out):
                os.rename(earlier, out)
            _discard(leftover)


# ------------------------------------------------------------------ checks and the commit


def check_output_dir(out: str | os.PathLike, *, overwrite: bool = True, changes: bool = True) -> Path:
    """Refuse an output folder :func:`atomic_output_dir` would not replace; returns it resolved.

    Call it before long work, so a bad ``--out`` fails at once. Staging folders a killed run left
    beside ``out`` are recovered first (:func:`recover`). Raises as :func:`atomic_output_dir` does;
    ``changes=False`` skips the checks :func:`output_policy`'s ``force`` lifts (files changed since
    they were written, another command's output), for a check made before the policy is known.
    """
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out: {str(out)!r} exists and is not a folder")
    if out == Path.cwd().resolve() or out in Path.cwd().resolve().parents:
        raise ValueError(f"--out: {str(out)!r} is the current folder or contains it; name a new folder")
    if out.exists() and os.path.ismount(out):  # a bind mount (a container's results) cannot be renamed over
        raise ValueError(f"--out: {str(out)!r} is a mount point, which the finished output cannot replace; "
                         f"name a new folder inside it")
    # the folder the output (or its first missing parent) goes into: a file there, or a folder
    # that cannot be written, would otherwise fail only when the output is written, after the work
    base = next(p for p in out.parents if p.exists() or p == p.parent)
    if not base.is_dir():
        raise NotADirectoryError(f"--out: cannot write {str(out)!r}: {str(base)!r} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise PermissionError(f"--out: cannot write {str(out)!r}: the folder {str(base)!r} is not writable")
    recover(out)
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise FileExistsError(
                f"--out: {str(out)!r} holds files onchip did not write ({_shown(_listing(out))}); "
                f"choose a new or empty folder"
            )
        record = _record(out)
        extra = [] if record is None else [e for e in _listing(out) if e not in record.files]
        nested = [e for e in extra if (out / e.rstrip("/") / MARKER).is_file()]
        if nested:  # replacing this folder would delete them with it
            raise FileExistsError(
                f"--out: {str(out)!r} holds {_shown(nested)}, another onchip output written inside it, which "
                f"replacing this folder would delete; move it out first"
            )
        if extra:
            raise FileExistsError(
                f"--out: {str(out)!r} is an earlier onchip output but also holds {_shown(extra)}, which onchip "
                f"did not write; move them away or choose a new folder"
            )
        if not overwrite:
            raise FileExistsError(f"--out: {str(out)!r} exists and is not empty")
        policy = _policy.get()
        if changes and record is not None and not policy.force:
            _refuse_changes(out, record, policy.command)
    return out


def _refuse_changes(out: Path, record: _Record, command: str | None) -> None:
    # an edit would be lost, or another command's output replaced: refused, naming what and why
    changed = [name for name, digest in record.files.items()
               if digest is not None and (out / name).is_file() and _sha256(out / name) != digest]
    other = command is not None and record.command is not None and record.command != command
    if not changed and not other:
        return
    why = []
    if other:
        why.append(f"is the output of `{record.command}`, not `{command}`")
    if changed:
        why.append(f"holds {_shown(changed)}, changed since onchip wrote {'it' if len(changed) == 1 else 'them'}")
    raise FileExistsError(f"--out: {str(out)!r} {', and '.join(why)}; choose another folder, or pass --force "
                          f"to replace it")


def _shown(entries: list[str]) -> str:
    return ", ".join(entries[:10]) + (f" and {len(entries) - 10} more" if len(entries) > 10 else "")


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a staging folder that replaces ``out`` only if the block succeeds.

    Everything is written into a hidden sibling folder; on success it is
    committed onto ``out`` in one step (an atomic exchange where the system has
    one, see the module docstring), on any exception (SIGTERM included, see
    :mod:`onchip.interrupts`, also one that C code swallowed inside the block) it
    is deleted, so a failed or interrupted run leaves no partial output and the
    earlier ``out`` as it was. An existing ``out`` is replaced only if it is
    empty or an earlier onchip output (it holds :data:`MARKER`) with nothing added
    to it, and ``overwrite`` is set: a file of the user's is never deleted; unless
    :func:`output_policy` forces it, also only if no file in it changed since and
    the same command wrote it. ``out`` is checked again just before the commit.

    Raises:
        FileExistsError: ``out`` holds files onchip did not write (naming them,
            for an earlier output), a file changed since it was written or another
            command's output (naming them), or is not empty and ``overwrite`` is False.
        NotADirectoryError: ``out`` exists and is a file.
        ValueError: ``out`` is the current folder or one of its parents.
        PermissionError: ``out``'s folder cannot be created or written (``--out`` and the path
            named, not the staging folder).
    """
    out = check_output_dir(out, overwrite=overwrite)
    policy = _policy.get()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:  # named for the user's path, not the hidden staging folder
        raise PermissionError(f"--out: cannot write {str(out)!r}: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(stage, 0o777 & ~umask)  # mkdtemp makes it private; the result is an ordinary folder
    with _claimed(stage):  # ours while the run lasts: another command on OUT leaves it alone
        try:
            (stage / MARKER).write_text(_MARKER_TEXT)
            yield stage
            check()  # an interrupt swallowed inside the block (onchip.interrupts): nothing is committed
            _write_marker(stage, policy.command)
            check_output_dir(out, overwrite=overwrite)  # changed during the run: still refused
        except BaseException:
            _discard(stage)
            raise
        with held():  # the commit and its record are one step for an interrupt
            try:
                _commit(stage, out)
            except OSError as exc:  # the folder itself cannot be replaced (immutable, busy): name --out
                raise OSError(exc.errno, f"--out: cannot put the output at {str(out)!r} "
                                         f"({exc.strerror}); nothing was written") from None
            policy.committed.append(out)


def _commit(stage: Path, out: Path) -> None:
    # stage becomes out; the earlier out, if any, is removed. No instant without out where the
    # exchange exists; in the fallback a kill between the renames is undone by recover()
    try:
        os.rename(stage, out)  # a new (or empty) out: one rename
        return
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            _discard(stage)
            raise
    try:
        exchanged = _exchange(stage, out)
    except OSError:
        _discard(stage)
        raise
    if exchanged:
        _discard(stage)  # now the earlier output
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    with _claimed(trash):
        os.rename(out, trash / "old")
        try:
            os.rename(stage, out)
        except OSError:  # put the earlier output back: a failed commit leaves out as it was
            os.rename(trash / "old", out)
            _discard(stage)
            _discard(trash)
            raise
    _discard(trash)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON; numpy scalars/arrays become plain values, NaN/inf become null."""
    Path(path).write_text(json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")
