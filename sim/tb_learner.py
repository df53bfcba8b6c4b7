"""cocotb test bench of the ``onchip_learner`` core: drives samples and parameter commands, records what comes out.

The bench is a driver and monitor only; the comparison against the golden
model is done by the caller (``tests/test_hw_*.py`` through
:mod:`onchip.hw.sim`). It reads a JSON job from ``$ONCHIP_TB_IN`` and writes
the JSON result to ``$ONCHIP_TB_OUT``.

Job: ``segments``, each ``{"payloads": [int, ...], "then": {...}}``: the
sample payloads to stream, then one action once all of them are accepted:
``{"op": "read"}`` (read every parameter), ``{"op": "write", "values": [...]}``
(write every parameter), ``{"op": "commands", "words": [int, ...]}`` (these
parameter command payloads as they are, in order: a host that packs its own),
``{"op": "reset", "after": cycles}`` (hold ``rst``
for two cycles that many cycles later; samples in flight are lost) or
``{"op": "none"}``. ``p_valid`` / ``p_ready`` / ``p_param_ready``: the
probability that the bench offers a sample, takes a prediction, takes a
parameter response in a cycle (random stalls from ``seed``); a segment may
hold its own ``p_valid`` / ``p_ready`` / ``p_param_ready`` for its cycles
(e.g. 1.0: a segment without stalls, to measure latency and II); ``measure``:
also record the cycles of every acceptance, prediction and commit strobe.
``param_count``: parameters read or written per channel; ``channels`` (default 1): a read or
write covers every channel, channel by channel (``values`` then holds channels x param_count
values); ``command``: ``{"data", "addr", "write"}`` (and ``"channel"`` for more than one channel) ->
``[offset, width]`` in the command payload (from its layout, :func:`onchip.hw.interface.command_layout`).
``names`` (optional) drives a wrapper instead of the core: ``{"clk": ..., "rst": ...,
"rst_active_low": bool, "s": prefix, "m": ..., "pc": ..., "pr": ...}``, the streams
then being ``<prefix>_tvalid`` / ``_tready`` / ``_tdata`` (AXI4-Stream); where the wrapper has them,
the bench drives the input streams' ``_tlast`` with random bits (the learner ignores them) and
records the prediction stream's ``_tlast`` with every prediction.

Result per segment: ``preds`` (raw payload ints, in order), ``responses``
(the parameter port's answers), ``lasts`` (the prediction stream's TLAST with each prediction;
empty without one), ``start_cycle`` (its first cycle; after a reset segment, the
first cycle out of reset), ``channel_error`` (the design's sticky flag at the segment's end, None
for a design without it), and with ``measure`` the cycle lists (``accept_cycles``,
``pred_cycles``, ``command_cycles`` (parameter commands accepted), ``commit_cycles`` per layer).

Every port may be one bit wide (cocotb gives a ``Logic`` for it, a ``LogicArray`` for a
vector): values are read through :func:`unsigned`.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.types import Logic


def unsigned(value) -> int:
    """A port's value as an unsigned integer, for a one-bit port (``Logic``) as for a vector."""
    return int(value) if isinstance(value, Logic) else value.to_unsigned()


@cocotb.test()
async def stream(dut):
    job = json.loads(open(os.environ["ONCHIP_TB_IN"]).read())
    rng = random.Random(job.get("seed", 0))
    p_valid, p_ready = job.get("p_valid", 1.0), job.get("p_ready", 1.0)
    p_param_ready = job.get("p_param_ready", 1.0)
    measure = job.get("measure", False)
    n_params = job["param_count"]
    channels = job.get("channels", 1)
    # (channel, index) of every parameter a read or a write covers, channel by channel
    where = [({"channel": c} if channels > 1 else {}, a) for c in range(channels) for a in range(n_params)]
    fields = job["command"]  # name -> [offset, width] of the command layout

    def command(**values):
        word = 0
        for name, v in values.items():
            offset, width = fields[name]
            word |= (int(v) & ((1 << width) - 1)) << offset
        return word
    strobes = [getattr(dut, f"commit_l{l}") for l in range(job["n_layers"])] if measure else []

    names = job.get("names")

    def stream_port(name):
        if names is None:
            return [getattr(dut, f"{name}__{f}") for f in ("valid", "ready", "payload")]
        return [getattr(dut, f"{names[name]}_t{f}") for f in ("valid", "ready", "data")]

    clk = getattr(dut, names["clk"]) if names else dut.clk
    rst = getattr(dut, names["rst"]) if names else dut.rst
    active = 0 if names and names.get("rst_active_low") else 1

    def set_reset(on: bool):
        rst.value = active if on else 1 - active

    s_valid, s_ready, s_payload = stream_port("s")
    m_valid, m_ready, m_payload = stream_port("m")
    pc_valid, pc_ready, pc_payload = stream_port("pc")
    pr_valid, pr_ready, pr_payload = stream_port("pr")
    # AXI4-Stream TLAST: random on the inputs (from their own generator: the stalls stay as they were)
    tlast_in = [getattr(dut, f"{names[n]}_tlast") for n in ("s", "pc")
                if names and hasattr(dut, f"{names[n]}_tlast")]
    m_last = getattr(dut, f"{names['m']}_tlast") if names and hasattr(dut, f"{names['m']}_tlast") else None
    last_rng = random.Random(job.get("seed", 0) + 1)
    # the sticky flag of a design of N channels, N not a power of two (core and wrapper name it alike)
    channel_error = dut.channel_error if hasattr(dut, "channel_error") else None

    Clock(clk, 10, unit="ns").start()
    edge, settle = RisingEdge(clk), ReadOnly()
    for sig in (s_valid, m_ready, pc_valid, pr_ready):
        sig.value = 0
    s_payload.value = 0
    pc_payload.value = 0
    set_reset(True)
    for _ in range(2):
        await edge
    set_reset(False)

    results = []
    cycle = 0
    for seg in job["segments"]:
        payloads = seg["payloads"]
        p_valid = seg.get("p_valid", job.get("p_valid", 1.0))
        p_ready = seg.get("p_ready", job.get("p_ready", 1.0))
        p_param_ready = seg.get("p_param_ready", job.get("p_param_ready", 1.0))
        then = seg.get("then", {"op": "none"})
        op = then["op"]
        if op == "read":
            cmds = [command(addr=a, write=0, **ch) for ch, a in where]
        elif op == "write":
            cmds = [command(data=v, addr=a, write=1, **ch) for (ch, a), v in zip(where, then["values"])]
        elif op == "commands":
            cmds = list(then["words"])
        else:
            cmds = []
        n, i, sent_cmd = len(payloads), 0, 0
        preds, responses, lasts = [], [], []
        acc_cycles, pred_cycles, cmd_cycles, commit_cycles = [], [], [], [[] for _ in strobes]
        start_cycle = cycle
        reset_at = None
        offered = False
        while True:
            if op == "reset" and i == n and reset_at is None:
                reset_at = cycle + then.get("after", 0)
            in_reset = reset_at is not None and cycle >= reset_at
            # inputs of this cycle (nothing is offered or taken while in reset)
            want = i < n and rng.random() < p_valid and not in_reset
            if want != offered:
                s_valid.value = int(want)
                offered = want
            if want:
                s_payload.value = payloads[i]
            take = rng.random() < p_ready and not in_reset
            m_ready.value = int(take)
            cmd_phase = i == n and sent_cmd < len(cmds)
            pc_valid.value = int(cmd_phase)
            if cmd_phase:
                pc_payload.value = cmds[sent_cmd]
            take_resp = rng.random() < p_param_ready
            pr_ready.value = int(take_resp)
            for sig in tlast_in:
                sig.value = last_rng.getrandbits(1)
            if in_reset:
                set_reset(True)
            await settle
            # handshakes at the coming edge
            if want and s_ready.value:
                if measure:
                    acc_cycles.append(cycle)
                i += 1
            if take and m_valid.value:
                preds.append(unsigned(m_payload.value))
                if m_last is not None:
                    lasts.append(unsigned(m_last.value))
                if measure:
                    pred_cycles.append(cycle)
            if cmd_phase and pc_ready.value:
                if measure:
                    cmd_cycles.append(cycle)
                sent_cmd += 1
            if take_resp and pr_valid.value:
                responses.append(unsigned(pr_payload.value))
            for l, st in enumerate(strobes):
                if st.value:
                    commit_cycles[l].append(cycle)
            await edge
            cycle += 1
            if reset_at is not None and cycle >= reset_at + 2:
                set_reset(False)
                break
            if i == n and op in ("read", "write", "commands") and len(responses) == len(cmds):
                break
            if i == n and op == "none" and len(preds) == n:
                break
            if cycle > job.get("max_cycles", 10**7):
                raise RuntimeError(f"max_cycles={job.get('max_cycles', 10**7)} reached: {i}/{n} samples accepted, "
                                   f"{len(preds)} predictions taken")
        s_valid.value = 0
        offered = False
        pc_valid.value = 0
        results.append({"preds": preds, "responses": responses, "lasts": lasts, "start_cycle": start_cycle,
                        "accept_cycles": acc_cycles, "pred_cycles": pred_cycles, "command_cycles": cmd_cycles,
                        "commit_cycles": commit_cycles,
                        "channel_error": unsigned(channel_error.value) if channel_error is not None else None})
    with open(os.environ["ONCHIP_TB_OUT"], "w") as fh:
        json.dump({"segments": results, "cycles": cycle}, fh)
