"""Content-addressed cache of built artefacts (Verilated models, HLS C-simulation libraries),
safe for concurrent use.

An entry is a folder ``<root>/<kind>-<key>`` that exists only complete:

* a builder holds ``<root>/<kind>-<key>.lock`` (``flock``, exclusive) for the
  whole build, so two processes never build the same entry twice: the second
  waits, then finds the entry;
* the build runs in a fresh ``<root>/.tmp-<kind>-<key>-*`` folder that is
  renamed onto the entry name when, and only when, the build succeeded (a
  folder rename is atomic on POSIX file systems); a failed build removes its
  folder, and the leftovers of a killed builder are removed by the next
  builder of that key, which holds the lock.

The key is the caller's hash of everything the artefact depends on (see
:func:`digest`). POSIX only (``fcntl``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def cache_root(root: str | os.PathLike | None = None) -> Path:
    """The cache folder: ``root`` if given, else ``$ONCHIP_CACHE``, else
    ``$XDG_CACHE_HOME/onchip``, else ``~/.cache/onchip``. Not created here."""
    if root is not None:
        return Path(root)
    if os.environ.get("ONCHIP_CACHE"):
        return Path(os.environ["ONCHIP_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "onchip"
    return Path.home() / ".cache" / "onchip"


def digest(*parts: str | bytes) -> str:
    """SHA-256 (hex) of the parts, each length-prefixed so that no two part lists collide."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else bytes(part)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_path(kind: str, key: str, root: str | os.PathLike | None = None) -> Path:
    """Where the entry ``kind``/``key`` lives (whether or not it exists)."""
    if not _NAME.match(kind):
        raise ValueError(f"kind must be lower-case letters, digits and '_', got {kind!r}")
    if not re.fullmatch(r"[0-9a-f]{16,64}", key):
        raise ValueError(f"key must be 16 to 64 lower-case hex digits, got {key!r}")
    return cache_root(root) / f"{kind}-{key}"


def cached_build(
    kind: str,
    key: str,
    build: Callable[[Path], None],
    *,
    root: str | os.PathLike | None = None,
) -> tuple[Path, bool]:
    """Return the entry ``kind``/``key``, building it with ``build(folder)`` if it is missing.

    Args:
        kind: entry family, e.g. ``"model"``.
        key: hex digest of everything the entry depends on (:func:`digest`).
        build: fills the empty folder it is given; raising aborts the build.
        root: cache folder (default :func:`cache_root`).

    Returns:
        (entry folder, True if this call built it, False if it was there or
        another process built it while this one waited for the lock).

    Raises:
        ValueError: malformed ``kind`` or ``key``.
        Exception: whatever ``build`` raised; no entry and no build folder is left behind.
    """
    entry = entry_path(kind, key, root)
    if entry.is_dir():
        return entry, False
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.parent / f"{kind}-{key}.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if entry.is_dir():
                return entry, False
            # Holding the lock, any build folder of this key is a dead builder's leftover.
            for stale in entry.parent.glob(f".tmp-{kind}-{key}-*"):
                shutil.rmtree(stale, ignore_errors=True)
            stage = Path(tempfile.mkdtemp(prefix=f".tmp-{kind}-{key}-", dir=entry.parent))
            try:
                build(stage)
                stage.chmod(0o755)  # mkdtemp makes it private to its creator
                os.rename(stage, entry)
            except BaseException:
                shutil.rmtree(stage, ignore_errors=True)
                raise
            return entry, True
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
