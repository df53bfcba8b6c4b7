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
"""

from __future__ import annotations

import numba
import numpy as np

from ..fixed import overflow


@numba.njit(cache=True)
def commit(theta, addr, delta, f_coef):
    """Apply one sample's update to ``theta`` in place."""
    for n in range(len(addr)):
        a = addr[n]
        theta[a] = overflow(theta[a] - delta[n], f_coef[0], f_coef[2], f_coef[4])


@numba.njit(cache=True)
def run_stream(step, theta, xs, ys, cfg, f_coef, q_addr, q_delta, q_state, preds, learn):
    """Run ``step`` over samples ``xs`` (N, n_in) / ``ys`` (N, n_out), raw int64.

    Args:
        step: a kernel from :mod:`onchip.model.kernels`.
        theta: flat parameters, updated in place (when ``learn``).
        q_addr, q_delta: (D, M) FIFO of pending updates; q_state = [head, count].
        preds: (N, n_out) output, the raw predictions.
        learn: False runs inference only (no update is queued or committed).
    """
    depth = q_addr.shape[0]
    m = q_addr.shape[1]
    addr = np.empty(m, np.int64)
    delta = np.empty(m, np.int64)
    n_layers = len(cfg.widths) - 1
    work = np.zeros((4 * n_layers + 3, cfg.widths.max()), np.int64)
    for n in range(xs.shape[0]):
        step(theta, xs[n], ys[n], cfg, preds[n], addr, delta, work)
        if not learn:
            continue
        if depth == 0:
            commit(theta, addr, delta, f_coef)
        else:
            # sample n has read: the update of sample n - D lands now, before sample n + 1 reads
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
def flush(theta, f_coef, q_addr, q_delta, q_state):
    """Commit every pending update, oldest first."""
    depth = q_addr.shape[0]
    while q_state[1] > 0:
        head = q_state[0]
        commit(theta, q_addr[head], q_delta[head], f_coef)
        q_state[0] = (head + 1) % depth
        q_state[1] -= 1
