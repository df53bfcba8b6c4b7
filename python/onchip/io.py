"""Output folders that appear whole or not at all, and never replace what onchip did not write."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from .interrupts import check


#: Written into every output folder: only folders holding it may be replaced by a later run.
#: It lists the files onchip wrote there; a folder holding any other file is not replaced.
MARKER = ".onchip-output"
_MARKER_TEXT = "written by onchip; this folder is replaced whole by the next run\n"
_MANIFEST_HEAD = "files written (anything else in this folder stops the next run from replacing it):"


def _listing(folder: Path) -> list[str]:
    # every entry below folder but the marker, as relative POSIX paths (folders end with "/")
    entries = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        entries += [(rel / d).as_posix() + "/" for d in dirs]
        entries += [(rel / f).as_posix() for f in files]
    return sorted(e for e in entries if e != MARKER)


def _manifest(folder: Path) -> set[str] | None:
    # the files an earlier run listed in its marker; None for a marker without a list (older
    # outputs), whose files cannot be told from the user's
    try:
        lines = (folder / MARKER).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if _MANIFEST_HEAD not in lines:
        return None
    return set(lines[lines.index(_MANIFEST_HEAD) + 1:])


def _write_marker(folder: Path) -> None:
    listing = _listing(folder)
    (folder / MARKER).write_text(_MARKER_TEXT + _MANIFEST_HEAD + "\n" + "".join(f"{e}\n" for e in listing))


def check_output_dir(out: str | os.PathLike, *, overwrite: bool = True) -> Path:
    """Refuse an output folder :func:`atomic_output_dir` would not replace; returns it resolved.

    Call it before long work, so a bad ``--out`` fails at once. Raises as
    :func:`atomic_output_dir` does.
    """
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out: {str(out)!r} exists and is not a folder")
    if out == Path.cwd().resolve() or out in Path.cwd().resolve().parents:
        raise ValueError(f"--out: {str(out)!r} is the current folder or contains it; name a new folder")
    # the folder the output (or its first missing parent) goes into: a file there, or a folder
    # that cannot be written, would otherwise fail only when the output is written, after the work
    base = next(p for p in out.parents if p.exists() or p == p.parent)
    if not base.is_dir():
        raise NotADirectoryError(f"--out: cannot write {str(out)!r}: {str(base)!r} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise PermissionError(f"--out: cannot write {str(out)!r}: the folder {str(base)!r} is not writable")
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise FileExistsError(
                f"--out: {str(out)!r} holds files onchip did not write ({_shown(_listing(out))}); "
                f"choose a new or empty folder"
            )
        written = _manifest(out)
        extra = [] if written is None else [e for e in _listing(out) if e not in written]
        if extra:
            shown = _shown(extra)
            raise FileExistsError(
                f"--out: {str(out)!r} is an earlier onchip output but also holds {shown}, which onchip "
                f"did not write; move them away or choose a new folder"
            )
        if not overwrite:
            raise FileExistsError(f"--out: {str(out)!r} exists and is not empty")
    return out


def _shown(entries: list[str]) -> str:
    return ", ".join(entries[:10]) + (f" and {len(entries) - 10} more" if len(entries) > 10 else "")


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a staging folder that replaces ``out`` only if the block succeeds.

    Everything is written into a hidden sibling folder; on success it is
    renamed onto ``out``, on any exception (SIGTERM included, see
    :mod:`onchip.interrupts`, also one that C code swallowed inside the block) it
    is deleted, so a failed or interrupted run leaves no partial output. An
    existing ``out`` is replaced only if it is empty or an earlier onchip output
    (it holds :data:`MARKER`, which lists the files written) with nothing added to
    it, and ``overwrite`` is set: a file of the user's is never deleted.

    Raises:
        FileExistsError: ``out`` holds files onchip did not write (naming them,
            for an earlier output), or is not empty and ``overwrite`` is False.
        NotADirectoryError: ``out`` exists and is a file.
        ValueError: ``out`` is the current folder or one of its parents.
        PermissionError: ``out``'s folder cannot be created or written (``--out`` and the path
            named, not the staging folder).
    """
    out = check_output_dir(out, overwrite=overwrite)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:  # named for the user's path, not the hidden staging folder
        raise PermissionError(f"--out: cannot write {str(out)!r}: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(stage, 0o777 & ~umask)  # mkdtemp makes it private; the result is an ordinary folder
    try:
        (stage / MARKER).write_text(_MARKER_TEXT)
        yield stage
        check()  # an interrupt swallowed inside the block (onchip.interrupts): nothing is committed
        _write_marker(stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if out.exists():
        trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.replace(out, trash / "old")
        os.replace(stage, out)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(stage, out)


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
