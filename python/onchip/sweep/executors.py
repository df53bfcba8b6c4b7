"""Where points run: local worker processes or a Dask distributed cluster, behind one interface.

A point whose worker is lost (the process killed, a Dask ``KilledWorker``) does not end
the sweep: with ``on_error`` the executor hands the point and the exception back and
goes on with the others.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol

from .. import processes


class Executor(Protocol):
    """Runs a function over items and yields the results as they finish (not in item order)."""

    def map(self, fn: Callable[[Any], Any], items: Iterable,
            on_error: Callable[[Any, BaseException], Any] | None = None) -> Iterator:
        """Yield ``fn(item)`` for every item, in completion order.

        ``fn`` must be picklable (a module-level function): it runs in another process.
        When running ``fn(item)`` fails outside ``fn`` (its worker died) or ``fn`` raises,
        ``on_error(item, exc)`` is yielded instead; without ``on_error`` the exception
        propagates.
        """
        ...


class LocalExecutor:
    """Local worker processes (a crash or leak of one point stays in its process).

    A killed worker process breaks the process pool: the points that had not finished
    are then handed to ``on_error`` with the pool's ``BrokenProcessPool``.

    Args:
        jobs: worker processes (a positive integer).

    Raises:
        ValueError: ``jobs`` is not a positive integer.
    """

    def __init__(self, jobs: int = 1):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
        self.jobs = jobs

    def map(self, fn, items, on_error=None):
        """See :meth:`Executor.map`."""
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=self.jobs, initializer=processes.pool_worker_start) as pool:
            futures = {pool.submit(fn, item): item for item in items}
            try:
                for fut in as_completed(futures):
                    try:
                        result = fut.result()
                    except Exception as exc:
                        if on_error is None:
                            raise
                        result = on_error(futures[fut], exc)
                    yield result
            except BaseException:  # an interrupt, a failure, or the caller stopped reading
                processes.stop_pool(pool)
                raise


class DaskExecutor:
    """A running Dask distributed scheduler (needs the ``distributed`` package).

    At most as many points are submitted at a time as the cluster has worker threads,
    so a worker holds only the point it runs: when a worker dies, only that point is
    lost (``KilledWorker`` once the scheduler's ``allowed-failures`` are spent), and
    it is handed to ``on_error`` while the other points go on.

    Args:
        address: the scheduler's address, e.g. ``tcp://host:8786``.
    """

    def __init__(self, address: str):
        self.address = address

    def map(self, fn, items, on_error=None):
        """See :meth:`Executor.map`."""
        from ..extras import need

        distributed = need("distributed", "the Dask executor (--scheduler)")
        Client, as_completed = distributed.Client, distributed.as_completed

        queue = list(items)
        queue.reverse()  # pop() takes them in item order
        with Client(self.address) as client:
            running = as_completed()
            owner = {}

            def top_up():
                slots = max(1, sum(client.nthreads().values()))
                while queue and running.count() < slots:
                    item = queue.pop()
                    fut = client.submit(fn, item, pure=False)
                    owner[fut.key] = item
                    running.add(fut)

            top_up()
            while not running.is_empty():
                fut = next(running)
                try:
                    result = fut.result()
                except Exception as exc:  # KilledWorker, a worker that could not unpickle fn, ...
                    if on_error is None:
                        raise
                    result = on_error(owner[fut.key], exc)
                finally:
                    owner.pop(fut.key, None)
                    fut.release()
                top_up()
                yield result


def make_executor(jobs: int = 1, scheduler: str | None = None) -> Executor:
    """A :class:`DaskExecutor` on ``scheduler`` if given, else a :class:`LocalExecutor` of ``jobs`` processes.

    Raises:
        ValueError: ``jobs`` is not a positive integer (checked with a scheduler too).
    """
    local = LocalExecutor(jobs)
    return DaskExecutor(scheduler) if scheduler else local
