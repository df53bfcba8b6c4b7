"""Running an experiment's seeds, in this process or in several (the numbers do not depend on which)."""

from __future__ import annotations

from typing import Callable


def run_seeds(run_seed: Callable, config, seeds, jobs: int) -> dict:
    """``{seed: run_seed(config, seed)}`` for every seed.

    Args:
        run_seed: a module-level function (it is sent to other processes) that seeds everything
            it draws from its ``seed`` argument, so the result does not depend on ``jobs``.
        config: the experiment's configuration (picklable).
        seeds: the seeds, in order.
        jobs: processes to use; 1 (or a single seed) runs in this process. Others are spawned,
            not forked (a forked torch can hang), each with one torch thread; an interrupt, or a
            seed that raises, ends them all (:func:`onchip.processes.stop_pool`).
    """
    seeds = list(seeds)
    if jobs <= 1 or len(seeds) == 1:
        return {s: run_seed(config, s) for s in seeds}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from onchip.processes import stop_pool

    with ProcessPoolExecutor(min(jobs, len(seeds)), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_start) as pool:
        try:
            return dict(zip(seeds, pool.map(run_seed, [config] * len(seeds), seeds)))
        except BaseException:  # an interrupt or a failed seed: the other seeds' workers end now
            stop_pool(pool)
            raise


def _worker_start():
    import torch

    from onchip.processes import pool_worker_start

    pool_worker_start()
    torch.set_num_threads(1)
