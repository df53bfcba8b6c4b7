"""Test-then-train stream driver with the pipelined schedule's delayed updates.

For each sample n the step reads the parameters, predicts, and produces the
update of sample n; the prediction is made before that update. When the
update lands is the schedule:

* sequential (D = 0): the update is committed before sample n + 1 is read.
* pipelined (D > 0): the update of sample n is committed after sample n + D
  has read the parameters and before sample n + D + 1 reads them (in hardware:
  written in the cycle sample n + D reads, read-before-write), so a sample
  never sees the D most recent updates (delayed SGD: theta_{n+1} = theta_n - eta g(theta_{n-D}, x_n)).
  Pending updates wait in a FIFO of D + 1 slots (a sample writes its update into the free
  one); a flush commits them all, in order (done before the parameters are read out or
  replaced). Counting in samples, not clock cycles, makes the result independent of stalls.

A commit is theta[a] = overflow(theta[a] - delta) in the ``coef`` format:
read-modify-write on the current value, so no update is lost.

Sample kinds (:class:`SampleKind`, one small int per sample, the 2-bit ``kind`` field of the
hardware stream): TARGET carries a target y, ERROR carries the host's dL/dy_hat, PREDICT only
predicts. A PREDICT sample is, exactly, an ERROR sample with an all-zero error: it computes an
update whose deltas are all 0 and that update takes its place in the D-sample window like any
other (so the update of sample n still lands after sample n + D reads, whatever the kinds in
between); committing a zero delta leaves theta unchanged (theta is always inside ``coef``, so
the overflow is the identity). Hardware does the same without a special case.
"""

from __future__ import annotations

from enum import IntEnum

import numba
import numpy as np

from ..fixed import overflow
from .kernels import kan_step, mlp_step


class SampleKind(IntEnum):
    """What a sample of the stream asks for (the 2-bit ``kind`` field of the hardware stream).

    * TARGET = 0: (x, y) with y the target (output format, ``formats.y``); error = requant(y_hat - y -> ``grad``).
    * PREDICT = 1: predict only; a zero update (see the module doc); y is ignored.
    * ERROR = 2: y carries dL/dy_hat per output, raw in the ``grad`` format (0 for an output that
      must not learn); the forward pass for x uses the current parameters and the sparse update
      uses this error, back-propagated through hidden layers as usual.
    """

    TARGET = 0
    PREDICT = 1
    ERROR = 2


@numba.njit(cache=True, inline="always")
def commit(theta, q_addr, q_delta, slot, size, f_coef):
    """Apply the update in FIFO slot ``slot`` (the first ``size`` entries of rows of ``q_addr``/``q_delta``;
    ``size`` is the row length, a constant of a specialised runner) to ``theta`` in place."""
    for n in range(size):
        a = q_addr[slot, n]
        theta[a] = overflow(theta[a] - q_delta[slot, n], f_coef.width, f_coef.signed, f_coef.overflow)


@numba.njit(cache=True)
def _next(slot, slots):
    """The FIFO slot after ``slot`` (mod ``slots``, without a division)."""
    return slot + 1 if slot + 1 < slots else 0


@numba.njit(cache=True)
def tail_slot(q_state, slots):
    """The free slot a sample writes its update into: (head + count) mod ``slots``.

    The FIFO (``q_addr``/``q_delta`` (D + 1, M), ``q_state`` = [head, count]) holds at most D
    pending updates between samples, so this slot is never one of them.
    """
    tail = q_state[0] + q_state[1]
    return tail - slots if tail >= slots else tail


@numba.njit(cache=True, inline="always")
def _stream(step, work, theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """Test-then-train over the samples with the per-sample ``step`` (:func:`kan_step` or
    :func:`mlp_step`) and its scratch ``work``; the schedule (module doc) lands the updates.

    A sample writes its update into :func:`tail_slot`; with ``learn`` it joins the pending
    updates, and when D + 1 are then pending the oldest (sample n - D) is committed (D = 0, one
    slot: at once). The landing is written here rather than called: an inlined call that
    takes the FIFO arrays costs reference-count updates on every sample.
    """
    slots = q_addr.shape[0]
    for n in range(xs.shape[0]):
        tail = tail_slot(q_state, slots)
        step(theta, xs, ys, kinds, n, cfg, preds, q_addr[tail], q_delta[tail], work)
        if learn:
            q_state[1] += 1
            if q_state[1] == slots:
                head = q_state[0]
                commit(theta, q_addr, q_delta, head, cfg.update_size, cfg.f_coef)
                q_state[0] = _next(head, slots)
                q_state[1] -= 1


@numba.njit(cache=True, inline="always")
def kan_stream(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """KAN over samples ``xs`` (N, n_in) / ``ys`` (N, n_out) / ``kinds`` (N,), raw int64, test-then-train.

    ``theta`` is updated in place (when ``learn``); ``preds`` (N, n_out) receives the raw
    predictions; ``q_addr``/``q_delta`` (D + 1, M) and ``q_state`` hold the pending updates
    (:func:`tail_slot`). ``learn=False`` runs inference only. Inlined into its callers:
    :func:`run_kan` (``cfg`` a run-time value) and the specialised runners of
    :mod:`onchip.model.specialise` (``cfg`` a compile-time constant).
    """
    work = np.zeros((4 * len(cfg.widths) - 1, cfg.max_width), np.int64)
    _stream(kan_step, work, theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn)


@numba.njit(cache=True, inline="always")
def mlp_stream(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """MLP counterpart of :func:`kan_stream`."""
    work = np.zeros((len(cfg.widths) + 2, cfg.max_width), np.int64)
    _stream(mlp_step, work, theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn)


@numba.njit(cache=True)
def run_kan(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """:func:`kan_stream` for any KAN spec (``cfg`` read at run time)."""
    kan_stream(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn)


@numba.njit(cache=True)
def run_mlp(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """:func:`mlp_stream` for any MLP spec (``cfg`` read at run time)."""
    mlp_stream(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn)


@numba.njit(cache=True)
def flush(theta, f_coef, q_addr, q_delta, q_state):
    """Commit every pending update, oldest first."""
    slots = q_addr.shape[0]
    while q_state[1] > 0:
        head = q_state[0]
        commit(theta, q_addr, q_delta, head, q_addr.shape[1], f_coef)
        q_state[0] = _next(head, slots)
        q_state[1] -= 1
