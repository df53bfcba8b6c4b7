"""Software step time: the float twin's per-sample online step on this CPU, measured in the driver."""

from __future__ import annotations

import json
import time

import numpy as np


def software_step_seconds(spec, x, y, samples: int) -> float:
    """Median per-sample wall time (s) of the float twin's online step (predict + SGD update) in PyTorch.

    Runs ``samples`` steps in 10 timed blocks after 50 untimed warm-up steps on one CPU
    thread (per-sample steps are too small to gain from more) and returns the median
    block time / block size.

    Args:
        spec: the :class:`~onchip.spec.LearnerSpec`.
        x, y: float stream, (N, n_in) and (N, n_out).
        samples: timed steps.

    Raises:
        ValueError: fewer than 50 + samples rows in ``x``.
    """
    from ..extras import need
    from ..model.float_twin import FloatTwin

    torch = need("torch", "timing the float twin's software step")

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _step_seconds(FloatTwin, spec, x, y, samples)
    finally:
        torch.set_num_threads(threads)


def _step_seconds(FloatTwin, spec, x, y, samples: int) -> float:
    block = max(1, samples // 10)
    if len(x) < 50 + 10 * block:
        raise ValueError(f"software step timing needs {50 + 10 * block} samples, got {len(x)}")
    twin = FloatTwin(spec)
    twin.run(x[:50], y[:50])
    times = []
    for b in range(10):
        lo = 50 + b * block
        start = time.perf_counter()
        twin.run(x[lo: lo + block], y[lo: lo + block])
        times.append((time.perf_counter() - start) / block)
    return float(np.median(times))


def add_software_latency(records: list[dict], points: list[dict], progress: bool = False) -> list[dict]:
    """Measure the float twin's per-sample step on this CPU for every finished point, now.

    Software timing is never cached: it belongs to the run's machine, and it is measured
    here in the driver, one point after another, so measurements do not compete with
    each other for cores. Adds ``sw_step_ns`` and the ratios ``sw_over_hw_at_clock``
    (and ``sw_over_hw_fmax`` where place and route gave an fmax) to copies of the records.

    Args:
        records: point records in grid order (those without ``hw_step_ns_at_clock`` are copied unchanged).
        points: the points of :func:`onchip.sweep.expand` (their ``latency`` settings give the sample count).
        progress: show a tqdm bar.

    Returns:
        New records; the given ones are not modified.
    """
    from ..progress import progress_bar

    from .. import tasks
    from ..spec import LearnerSpec

    out = []
    by_key = {p["key"]: p for p in points}
    for rec in progress_bar(records, desc="software step", unit="point", disable=not progress, leave=False):
        rec = json.loads(json.dumps(rec))
        res = rec["results"]
        if rec["status"] == "ok" and "hw_step_ns_at_clock" in res:
            point = by_key[rec["key"]]
            spec = LearnerSpec.from_dict(point["spec"])
            samples = int(point["settings"]["latency"]["software_samples"])
            task = "drift-regression" if spec.n_in == 1 else "qubit-readout"
            stream = tasks.make_stream(task, samples=samples + 60, seed=0)
            res["sw_step_ns"] = software_step_seconds(spec, stream.x, stream.y, samples) * 1e9
            res["sw_over_hw_at_clock"] = res["sw_step_ns"] / res["hw_step_ns_at_clock"]
            if "hw_step_ns_fmax" in res:
                res["sw_over_hw_fmax"] = res["sw_step_ns"] / res["hw_step_ns_fmax"]
        out.append(rec)
    return out
