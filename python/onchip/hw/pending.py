"""Pending-update FIFO of the pipelined schedule (:mod:`onchip.hw.learner`).

In the pipelined schedule a layer's update waits until the sample D later
reads that layer's parameters (the golden model's ``land``). The updates
waiting are kept, oldest first, in a :class:`PendingUpdates` queue per layer.
Two things set it apart from a plain synchronous FIFO:

* fall-through: when the queue is empty, ``r_data`` is ``w_data``, so an
  update that may commit in the cycle it is ready needs no entry;
* look-ahead: ``next_data`` / ``next_level`` give the head and the fill
  after the coming clock edge, for the RAM read port that must be addressed
  one cycle before a commit (:meth:`onchip.hw.layers.KanLayer.apply`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class PendingUpdates(wiring.Component):
    """Queue of at most ``depth`` update words of ``width`` bits, oldest first, with fall-through.

    Ports:
        w_en: In(1), push ``w_data`` at the coming clock edge. Not allowed when ``level == depth``
            unless ``r_en`` pops in the same cycle.
        w_data: In(width), the word pushed; also ``r_data`` while the queue is empty.
        r_en: In(1), pop the head at the coming clock edge. Not allowed when ``level == 0``.
        r_data: Out(width), the head (oldest word), or ``w_data`` when the queue is empty
            (``registered``: from the first clock edge after a reset on).
        w_next: In(width), only when ``registered``: ``w_data`` as it will be after the coming edge.
        level: Out(range(depth + 1)), words held now.
        next_level: Out(range(depth + 1)), words held after the coming clock edge.
        next_data: Out(width), the head after the coming clock edge (``w_data`` if that
            edge pushes into an otherwise empty queue); meaningful when ``next_level > 0``.

    The words themselves are not reset (``rst`` empties the queue).

    Args:
        width: bits of one word.
        depth: words the queue holds (the schedule's staleness D).
        registered: ``r_data`` is a register, loaded with ``next_data`` or, when the queue will be
            empty, with ``w_next`` (an extra input: ``w_data`` as it will be after the coming clock
            edge), instead of a ``depth``-to-1 multiplexer over the words and a fall-through
            multiplexer; and the tail (where a push goes) is a register instead of head plus level
            modulo ``depth``: the same values, shorter paths (``timing = "fast"``; measured with
            nextpnr-ecp5, each of them limited kan-readout's fmax).

    Raises:
        TypeError: ``width`` or ``depth`` is not an integer.
        ValueError: ``width`` or ``depth`` below 1.
    """

    def __init__(self, *, width: int, depth: int, registered: bool = False):
        for name, value in (("width", width), ("depth", depth)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"PendingUpdates {name} must be an integer, got {value!r}")
            if value < 1:
                raise ValueError(f"PendingUpdates {name} must be at least 1, got {value}")
        self.width, self.depth, self.registered = width, depth, registered
        # the level counts 0 .. depth: depth.bit_length() bits (1 for depth 1)
        level = unsigned(max(1, depth.bit_length()))
        super().__init__({
            "w_en": In(1),
            "w_data": In(width),
            **({"w_next": In(width)} if registered else {}),
            "r_en": In(1),
            "r_data": Out(width),
            "level": Out(level),
            "next_level": Out(level),
            "next_data": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.depth
        entries = Array(Signal(self.width, name=f"entry{n}", reset_less=True) for n in range(d))
        head = Signal(range(d), name="head")
        tail = Signal(range(d), name="tail")
        head_next = Signal.like(head, name="head_next")
        head_step = Mux(self.r_en, Mux(head == d - 1, 0, head + 1), head)
        # the word pushed now is the next head when everything before it is popped
        next_data = Mux(self.w_en & (tail == head_next), self.w_data, entries[head_next])
        if self.registered:
            with m.If(self.w_en):
                m.d.sync += tail.eq(Mux(tail == d - 1, 0, tail + 1))
            m.d.comb += [head_next.eq(head_step), self.next_level.eq(self.level + self.w_en - self.r_en),
                         self.next_data.eq(next_data)]
            r_data = Signal(self.width, name="r_data_q", reset_less=True)
            m.d.sync += r_data.eq(Mux(self.next_level == 0, self.w_next, self.next_data))
            m.d.comb += self.r_data.eq(r_data)
        else:
            m.d.comb += [
                tail.eq(Mux(head + self.level >= d, head + self.level - d, head + self.level)),
                head_next.eq(head_step),
                self.next_level.eq(self.level + self.w_en - self.r_en),
                self.r_data.eq(Mux(self.level == 0, self.w_data, entries[head])),
                self.next_data.eq(next_data),
            ]
        with m.If(self.w_en):
            with m.Switch(tail):
                for n in range(d):
                    with m.Case(n):
                        m.d.sync += entries[n].eq(self.w_data)
        m.d.sync += [head.eq(head_next), self.level.eq(self.next_level)]
        return m
