"""Where numba keeps the golden model's compiled kernels.

numba's own on-disk cache (``cache=True``) is invalidated when the file that holds a jitted
function changes, not when a function it calls from another file does: after an edit of
:mod:`onchip.fixed`, a cached kernel of :mod:`onchip.model.kernels` would go on running the old
arithmetic. So the kernels are cached in a folder named by a hash of every source file they are
compiled from (``fixed.py`` and ``model/*.py``): ``<onchip cache>/numba-<hash>``. An edit of any of
them selects a fresh folder and the kernels compile again. ``NUMBA_CACHE_DIR``, when set, wins
(numba's own setting; the test suite uses it for a fresh cache per session).
"""

from __future__ import annotations

import os
from pathlib import Path

from .cache import cache_root, digest

_PACKAGE = Path(__file__).resolve().parent


def kernel_sources(package: Path = _PACKAGE) -> list[Path]:
    """The source files the jitted kernels are compiled from, in a fixed order."""
    return [package / "fixed.py", *sorted((package / "model").glob("*.py"))]


def kernel_cache_dir(package: Path = _PACKAGE, cache: Path | None = None) -> Path:
    """``<cache>/numba-<first 16 hex digits of the hash of kernel_sources(package)>``.

    Args:
        package: the onchip package folder (its ``fixed.py`` and ``model/``).
        cache: the cache root (default :func:`onchip.cache.cache_root`).

    Raises:
        FileNotFoundError: ``package`` has no ``fixed.py``.
    """
    parts = []
    for path in kernel_sources(package):
        parts += [path.relative_to(package).as_posix(), path.read_bytes()]
    return (cache_root(cache) if cache is None else Path(cache)) / f"numba-{digest(*parts)[:16]}"


def configure() -> None:
    """Point numba's cache at :func:`kernel_cache_dir` unless ``NUMBA_CACHE_DIR`` is set.

    Must run before the first ``@numba.njit(cache=True)`` decorator executes (numba picks the
    cache folder when a function is decorated); :mod:`onchip.fixed` calls it on import.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba

    numba.config.CACHE_DIR = str(kernel_cache_dir())
