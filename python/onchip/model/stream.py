"""Test-then-train stream driver with the pipelined schedule's delayed updates.

For each sample n the step reads the parameters, predicts, and produces the
update of sample n; the prediction is made before that update. When the
update lands is the schedule:

* sequential (D = 0): the update is committed before sample n + 1 is read.
* pipelined (D > 0): the update of sample n is committed after sample n + D
  has read the parameters and before sample n + D + 1 reads them (in hardware:
  written in the cycle sample n + D reads, read-before-write), so a sample
  never sees the D most recent updates (delayed SGD: theta_{n+1} = theta_n - eta g(theta_{n-D}, x_n)).
  Pending updates wait in a FIFO of D entries; a flush commits them all, in
  order (done before the parameters are read out or replaced). Counting in
  samples, not clock cycles, makes the result independent of stalls.

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

    * TARGET = 0: (x, y) with y the target (``act`` format); error = requant(y_hat - y -> ``grad``).
    * PREDICT = 1: predict only; a zero update (see the module doc); y is ignored.
    * ERROR = 2: y carries dL/dy_hat per output, raw in the ``grad`` format (0 for an output that
      must not learn); the forward pass for x uses the current parameters and the sparse update
      uses this error, back-propagated through hidden layers as usual.
    """

    TARGET = 0
    PREDICT = 1
    ERROR = 2


@numba.njit(cache=True, inline="always")
def commit(theta, addr, delta, f_coef):
    """Apply one sample's update to ``theta`` in place."""
    for n in range(len(addr)):
        a = addr[n]
        theta[a] = overflow(theta[a] - delta[n], f_coef.width, f_coef.signed, f_coef.overflow)


@numba.njit(cache=True, inline="always")
def land(theta, addr, delta, f_coef, q_addr, q_delta, q_state):
    """Schedule one sample's update, after that sample has read the parameters.

    D = 0 commits it at once. Otherwise it joins the FIFO of pending updates
    (``q_addr``/``q_delta`` (D, M), ``q_state`` = [head, count]); when D are
    already pending, the oldest (sample n - D) is committed first.
    """
    depth = q_addr.shape[0]
    if depth == 0:
        commit(theta, addr, delta, f_coef)
        return
    if q_state[1] == depth:
        head = q_state[0]
        commit(theta, q_addr[head], q_delta[head], f_coef)
        q_state[0] = (head + 1) % depth
        q_state[1] -= 1
    tail = (q_state[0] + q_state[1]) % depth
    q_addr[tail, :] = addr
    q_delta[tail, :] = delta
    q_state[1] += 1


@numba.njit(cache=True)
def run_kan(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """KAN over samples ``xs`` (N, n_in) / ``ys`` (N, n_out) / ``kinds`` (N,), raw int64, test-then-train.

    ``theta`` is updated in place (when ``learn``); ``preds`` (N, n_out) receives
    the raw predictions. ``learn=False`` runs inference only.
    """
    addr = np.empty(q_addr.shape[1], np.int64)
    delta = np.empty(q_addr.shape[1], np.int64)
    work = np.zeros((4 * len(cfg.widths) - 1, cfg.widths.max()), np.int64)
    for n in range(xs.shape[0]):
        kan_step(theta, xs, ys, kinds, n, cfg, preds, addr, delta, work)
        if learn:
            land(theta, addr, delta, cfg.f_coef, q_addr, q_delta, q_state)


@numba.njit(cache=True)
def run_mlp(theta, xs, ys, kinds, cfg, q_addr, q_delta, q_state, preds, learn):
    """MLP counterpart of :func:`run_kan`."""
    addr = np.empty(q_addr.shape[1], np.int64)
    delta = np.empty(q_addr.shape[1], np.int64)
    work = np.zeros((len(cfg.widths) + 2, cfg.widths.max()), np.int64)
    for n in range(xs.shape[0]):
        mlp_step(theta, xs, ys, kinds, n, cfg, preds, addr, delta, work)
        if learn:
            land(theta, addr, delta, cfg.f_coef, q_addr, q_delta, q_state)


@numba.njit(cache=True)
def flush(theta, f_coef, q_addr, q_delta, q_state):
    """Commit every pending update, oldest first."""
    depth = q_addr.shape[0]
    while q_state[1] > 0:
        head = q_state[0]
        commit(theta, q_addr[head], q_delta[head], f_coef)
        q_state[0] = (head + 1) % depth
        q_state[1] -= 1
