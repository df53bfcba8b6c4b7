"""Where numba keeps the golden model's compiled kernels.

numba's own on-disk cache (``cache=True``) is invalidated when the file that holds a jitted
function changes, not when a function it calls from another file does: after an edit of
:mod:`onchip.fixed`, a cached kernel of :mod:`onchip.model.kernels` would go on running the old
arithmetic. So the kernels are cached in a folder named by a hash of every source file they are
compiled from (``fixed.py`` and ``model/*.py``): ``<onchip cache>/numba-<hash>``. An edit of any of
them selects a fresh folder and the kernels compile again. ``NUMBA_CACHE_DIR``, when set, wins
(numba's own setting; the test suite uses it for a fresh cache per session).

The per-spec specialised kernels (:mod:`onchip.model.specialise`) are small generated source
files; they live in :func:`specialised_dir`, inside whichever folder numba caches in, and their
names carry :func:`kernel_digest`, so they follow the same rule.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from .cache import cache_root, digest

_PACKAGE = Path(__file__).resolve().parent


def kernel_sources(package: Path = _PACKAGE) -> list[Path]:
    """The source files the jitted kernels are compiled from, in a fixed order."""
    return [package / "fixed.py", *sorted((package / "model").glob("*.py"))]


def kernel_digest(package: Path = _PACKAGE) -> str:
    """The hash (64 hex digits) of :func:`kernel_sources` (names and contents).

    Raises:
        FileNotFoundError: ``package`` has no ``fixed.py``.
    """
    parts = []
    for path in kernel_sources(package):
        parts += [path.relative_to(package).as_posix(), path.read_bytes()]
    return digest(*parts)


def kernel_cache_dir(package: Path = _PACKAGE, cache: Path | None = None) -> Path:
    """``<cache>/numba-<first 16 hex digits of kernel_digest(package)>``.

    Args:
        package: the onchip package folder (its ``fixed.py`` and ``model/``).
        cache: the cache root (default :func:`onchip.cache.cache_root`).

    Raises:
        FileNotFoundError: ``package`` has no ``fixed.py``.
    """
    return (cache_root(cache) if cache is None else Path(cache)) / f"numba-{kernel_digest(package)[:16]}"


@functools.cache
def installed_kernel_digest() -> str:
    """:func:`kernel_digest` of this installed package, read once per process."""
    return kernel_digest()


def specialised_dir() -> Path:
    """Where the generated per-spec kernel sources go: ``<numba's cache folder>/specialised``
    (:func:`kernel_cache_dir` after :func:`configure`, or ``NUMBA_CACHE_DIR``). Not created here."""
    import numba

    return Path(numba.config.CACHE_DIR or kernel_cache_dir()) / "specialised"


def configure() -> None:
    """Point numba's cache at :func:`kernel_cache_dir` unless ``NUMBA_CACHE_DIR`` is set.

    Must run before the first ``@numba.njit(cache=True)`` decorator executes (numba picks the
    cache folder when a function is decorated); :mod:`onchip.fixed` calls it on import.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba

    numba.config.CACHE_DIR = str(kernel_cache_dir())
