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

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class PendingUpdates(wiring.Component):
    """Queue of at most ``depth`` update words of ``width`` bits, oldest first, with fall-through.

    Ports:
        w_en: In(1), push ``w_data`` at the coming clock edge. Not allowed when ``level == depth``
            unless ``r_en`` pops in the same cycle.
        w_data: In(width), the word pushed; also ``r_data`` while the queue is empty.
        r_en: In(1), pop the head at the coming clock edge. Not allowed when ``level == 0``.
        r_data: Out(width), the head (oldest word), or ``w_data`` when the queue is empty
            (``registered``: from the first advancing clock edge after a reset on).
        w_next: In(width), only when ``registered``: ``w_data`` as it will be after the coming edge
            (if it advances, ``en``).
        en: In(1), only when ``registered``: the coming clock edge advances the queue (the
            pipeline's advance enable). While it is low ``w_en`` and ``r_en`` take no effect (they
            say what an advancing edge would do), ``w_data`` must hold, and ``r_data`` holds.
        level: Out(range(depth + 1)), words held now.
        next_level: Out(range(depth + 1)), words held after the coming clock edge.
        next_data: Out(width), the head after the coming clock edge (``w_data`` if that
            edge pushes into an otherwise empty queue); meaningful when ``next_level > 0``.

    The words themselves are not reset (``rst`` empties the queue).

    Args:
        width: bits of one word.
        depth: words the queue holds (the schedule's staleness D).
        lookahead_bits: only when ``registered``: the low bits of a word whose ``next_data`` is read
            from a register copy of those bits instead of the memory (0: none).
        registered: ``r_data`` is a register, loaded with ``next_data`` or, when the queue will be
            empty, with ``w_next`` (an extra input: ``w_data`` as it will be after the coming clock
            edge), instead of a ``depth``-to-1 multiplexer over the words and a fall-through
            multiplexer; the tail (where a push goes) is a register instead of head plus level
            modulo ``depth``: the same values, shorter paths (``timing = "fast"``; measured with
            nextpnr-ecp5, each of them limited kan-readout's fmax); and the words are a memory
            with an asynchronous read port at the next head (LUT RAM on an FPGA) instead of
            ``depth`` registers and a ``depth``-to-1 multiplexer per bit (measured, Yosys
            synth_ecp5 of the pipelined mlp-readout at fast: 14492 -> 7757 LUT, 12290 -> 6305 FF);
            the advance enable ``en`` is the enable of ``r_data``, not a select of its multiplexer;
            the memory is read at the word after the head, a register, and "empty after the edge"
            comes from two flag registers (no word, one word), so ``r_en`` and the level only
            select at the end (measured, mlp-readout pipelined seed 1: 98.8 -> 106.1 MHz).

    Raises:
        TypeError: ``width`` or ``depth`` is not an integer.
        ValueError: ``width`` or ``depth`` below 1, ``lookahead_bits`` outside 0 .. ``width`` (or
            not 0 while not ``registered``).
    """

    def __init__(self, *, width: int, depth: int, registered: bool = False, lookahead_bits: int = 0):
        for name, value in (("width", width), ("depth", depth)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"PendingUpdates {name} must be an integer, got {value!r}")
            if value < 1:
                raise ValueError(f"PendingUpdates {name} must be at least 1, got {value}")
        if not isinstance(lookahead_bits, int) or isinstance(lookahead_bits, bool) \
                or not 0 <= lookahead_bits <= width or (lookahead_bits and not registered):
            raise ValueError(f"PendingUpdates lookahead_bits must be an integer 0 .. width ({width}), and 0 "
                             f"unless registered, got {lookahead_bits!r}")
        self.width, self.depth, self.registered = width, depth, registered
        self.lookahead_bits = lookahead_bits
        # the level counts 0 .. depth: depth.bit_length() bits (1 for depth 1)
        level = unsigned(max(1, depth.bit_length()))
        super().__init__({
            "w_en": In(1),
            "w_data": In(width),
            **({"w_next": In(width), "en": In(1)} if registered else {}),
            "r_en": In(1),
            "r_data": Out(width),
            "level": Out(level),
            "next_level": Out(level),
            "next_data": Out(width),
        })

    def elaborate(self, platform):
        if self.registered:
            return self._registered()
        m = Module()
        d = self.depth
        entries = Array(Signal(self.width, name=f"entry{n}", reset_less=True) for n in range(d))
        head = Signal(range(d), name="head")
        tail = Signal(range(d), name="tail")
        head_next = Signal.like(head, name="head_next")
        head_step = Mux(self.r_en, Mux(head == d - 1, 0, head + 1), head)
        # the word pushed now is the next head when everything before it is popped
        next_data = Mux(self.w_en & (tail == head_next), self.w_data, entries[head_next])
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

    def _registered(self) -> Module:
        m = Module()
        d = self.depth
        en = self.en
        head = Signal(range(d), name="head")
        # the word after the head, and where a push goes: registers, not head + 1 and head + level
        head_p1 = Signal(range(d), name="head_p1", init=min(1, d - 1))
        tail = Signal(range(d), name="tail")
        # head, fill and head word after the coming edge if it advances (w_en / r_en take effect)
        head_adv = Signal.like(head, name="head_adv")
        level_adv = Signal.like(self.level, name="level_adv")
        # the words in a memory (LUT RAM), read without a clock at the word after the head, the head
        # after a pop: a read port in place of a depth-to-1 multiplexer per bit over registers, its
        # address a register (not chosen by r_en: it reaches every LUT RAM cell of the words)
        m.submodules.words = words = Memory(shape=unsigned(self.width), depth=d, init=[])
        wr, rd = words.write_port(), words.read_port(domain="comb")
        push = self.w_en & en
        m.d.comb += [
            head_adv.eq(Mux(self.r_en, head_p1, head)),
            level_adv.eq(self.level + self.w_en - self.r_en),
            wr.addr.eq(tail), wr.data.eq(self.w_data), wr.en.eq(push), rd.addr.eq(head_p1),
        ]
        r_data = Signal(self.width, name="r_data_q", reset_less=True)
        # whether the queue holds no word, or one, in registers beside the level: "empty after the
        # edge" is then one LUT of w_en, r_en and these two, not the level's adder and a compare
        # before the select that fans out to every bit of r_data
        empty, single = Signal(name="empty", init=1), Signal(name="single")
        empty_adv = ~self.w_en & (empty | (single & self.r_en))
        # the head after the edge: after a pop the next word (or the word pushed now, when it is the
        # only one left); else the head held in r_data (w_data while empty: the fall-through)
        popped = Mux(self.w_en & (tail == head_p1), self.w_data, rd.data)
        data_adv = Mux(self.r_en, popped, Mux(empty, self.w_data, r_data))
        # en low: no push, no pop, w_data held: r_data holds too (en is the register's enable, not
        # a select of its multiplexer: measured, that select's fan-out limited the pipelined MLP)
        with m.If(en):
            m.d.sync += [r_data.eq(Mux(empty_adv, self.w_next, data_adv)), head.eq(head_adv),
                         self.level.eq(level_adv), empty.eq(level_adv == 0), single.eq(level_adv == 1)]
            with m.If(self.r_en):
                m.d.sync += head_p1.eq(Mux(head_p1 == d - 1, 0, head_p1 + 1))
        with m.If(push):
            m.d.sync += tail.eq(Mux(tail == d - 1, 0, tail + 1))
        next_data = Mux(en, data_adv, r_data)
        n = self.lookahead_bits
        if n:
            # the low bits (a RAM's read address a commit needs one cycle ahead) also in registers:
            # next_data's are read through their multiplexer, not the memory (measured, seed 1:
            # kan-readout pipelined 93.5 MHz with the memory's read in that path, 97.8 with the copy)
            copy = Array(Signal(n, name=f"ahead{k}", reset_less=True) for k in range(d))
            with m.If(push):
                m.d.sync += copy[tail].eq(self.w_data[:n])
            ahead = Mux(self.w_en & (tail == head_adv), self.w_data[:n], copy[head_adv])
            next_data = Cat(Mux(en, ahead, r_data[:n]), next_data[n:])
        m.d.comb += [
            self.r_data.eq(r_data),
            self.next_level.eq(Mux(en, level_adv, self.level)),
            self.next_data.eq(next_data),
        ]
        return m
