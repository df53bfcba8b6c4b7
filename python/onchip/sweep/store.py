"""Finished points in the project cache (:mod:`onchip.cache`): one entry ``sweep_point-<key>`` per point.

An entry holds ``record.json`` (the point's record, result or error). Entries appear
whole (built in a locked, renamed folder), so a killed sweep leaves no half record and
two sweeps sharing a cache never interleave their writes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..cache import cache_root, cached_build, entry_path

KIND = "sweep_point"
RECORD = "record.json"


def store_root(cache: str | os.PathLike | None = None) -> Path:
    """The folder of finished points: ``cache`` if given, else ``<onchip cache>/sweeps``."""
    return Path(cache) if cache is not None else cache_root() / "sweeps"


def record_path(cache: str | os.PathLike | None, key: str) -> Path:
    """Where the record of point ``key`` is stored (whether or not it exists).

    Raises:
        ValueError: ``key`` is not 16 to 64 lower-case hex digits.
    """
    return entry_path(KIND, key, store_root(cache)) / RECORD


def load_record(cache: str | os.PathLike | None, key: str) -> dict | None:
    """The stored record of point ``key``, or None when it has not finished."""
    path = record_path(cache, key)
    return json.loads(path.read_text()) if path.is_file() else None


def save_record(cache: str | os.PathLike | None, record: dict) -> None:
    """Store a finished point's record, replacing a stored one (a retried failure)."""
    from ..io import write_json

    entry = entry_path(KIND, record["key"], store_root(cache))
    if entry.is_dir():
        # moved aside first so readers see the old record or none, never a partial one; the
        # name is a cache build folder, so the next builder of this key removes a leftover
        aside = entry.parent / f".tmp-{KIND}-{record['key']}-replaced-{os.getpid()}"
        try:
            os.rename(entry, aside)
        except FileNotFoundError:  # another sweep replaced it meanwhile
            pass
        else:
            shutil.rmtree(aside, ignore_errors=True)
    cached_build(KIND, record["key"], lambda folder: write_json(folder / RECORD, record), root=store_root(cache))
