"""Where numba keeps the golden model's compiled kernels.

numba's own on-disk cache (``cache=True``) is invalidated when the file that holds a jitted
function changes, not when a function it calls from another file does (numba issue #1833): after
an edit of :mod:`onchip.fixed`, a cached kernel of :mod:`onchip.model.kernels` that inlines its
helpers would go on running the old arithmetic. So the kernels are cached in a folder named by a
hash of every source file they are compiled from (``fixed.py`` and ``model/*.py``):
``<base>/numba-<hash>``, where the base is ``NUMBA_CACHE_DIR`` when it is set (numba's own
setting; the test suite uses it for a fresh cache per session) and the onchip cache folder
otherwise. An edit of any of those files selects a fresh folder and the kernels compile again,
whatever the environment says.

The per-spec specialised kernels (:mod:`onchip.model.specialise`) are small generated source
files; they live in :func:`specialised_dir`, inside that folder, and their names carry
:func:`kernel_digest`, so they follow the same rule.
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


def numba_base_dir() -> Path:
    """The folder the kernel cache folders sit in: ``$NUMBA_CACHE_DIR`` if set, else
    :func:`onchip.cache.cache_root`."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    return Path(env) if env else cache_root()


def kernel_cache_dir(package: Path = _PACKAGE, cache: Path | None = None) -> Path:
    """``<cache>/numba-<first 16 hex digits of kernel_digest(package)>``.

    Args:
        package: the onchip package folder (its ``fixed.py`` and ``model/``).
        cache: the folder the cache folders sit in (default :func:`numba_base_dir`).

    Raises:
        FileNotFoundError: ``package`` has no ``fixed.py``.
    """
    return (numba_base_dir() if cache is None else Path(cache)) / f"numba-{kernel_digest(package)[:16]}"


@functools.cache
def installed_kernel_digest() -> str:
    """:func:`kernel_digest` of this installed package, read once per process."""
    return kernel_digest()


@functools.cache
def _installed_cache_dir(base: str) -> Path:
    return kernel_cache_dir(cache=Path(base))


def installed_cache_dir() -> Path:
    """:func:`kernel_cache_dir` of this installed package under :func:`numba_base_dir` (the
    sources are hashed once per process)."""
    return _installed_cache_dir(str(numba_base_dir()))


def specialised_dir() -> Path:
    """Where the generated per-spec kernel sources go: ``<installed_cache_dir()>/specialised``.
    Not created here."""
    return installed_cache_dir() / "specialised"


def configure() -> None:
    """Point numba's cache at :func:`installed_cache_dir`, under ``NUMBA_CACHE_DIR`` when it is set.

    Must run before the first ``@numba.njit(cache=True)`` decorator executes (numba picks the
    cache folder when a function is decorated); :mod:`onchip.fixed` calls it on import.
    Idempotent: the folder is computed from the environment, not from numba's current setting.
    """
    import numba

    numba.config.CACHE_DIR = str(installed_cache_dir())
