"""Where points run: local worker processes or a Dask distributed cluster, behind one interface."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol


class Executor(Protocol):
    """Runs a function over items and yields the results as they finish (not in item order)."""

    def map(self, fn: Callable[[Any], Any], items: Iterable) -> Iterator:
        """Yield ``fn(item)`` for every item, in completion order.

        ``fn`` must be picklable (a module-level function): it runs in another process.
        """
        ...


class LocalExecutor:
    """Local worker processes (a crash or leak of one point stays in its process).

    Args:
        jobs: worker processes (a positive integer).

    Raises:
        ValueError: ``jobs`` is not a positive integer.
    """

    def __init__(self, jobs: int = 1):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
        self.jobs = jobs

    def map(self, fn, items):
        """See :meth:`Executor.map`."""
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(fn, item) for item in items]
            for fut in as_completed(futures):
                yield fut.result()


class DaskExecutor:
    """A running Dask distributed scheduler (needs the ``distributed`` package).

    Args:
        address: the scheduler's address, e.g. ``tcp://host:8786``.
    """

    def __init__(self, address: str):
        self.address = address

    def map(self, fn, items):
        """See :meth:`Executor.map`."""
        from distributed import Client, as_completed

        with Client(self.address) as client:
            futures = client.map(fn, list(items), pure=False)
            for fut in as_completed(futures):
                yield fut.result()


def make_executor(jobs: int = 1, scheduler: str | None = None) -> Executor:
    """A :class:`DaskExecutor` on ``scheduler`` if given, else a :class:`LocalExecutor` of ``jobs`` processes.

    Raises:
        ValueError: ``jobs`` is not a positive integer (checked with a scheduler too).
    """
    local = LocalExecutor(jobs)
    return DaskExecutor(scheduler) if scheduler else local
