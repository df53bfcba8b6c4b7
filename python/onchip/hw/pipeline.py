"""Stage bookkeeping for the learner datapath: values tagged with the pipeline stage they belong to.

The learner is one in-order pipeline with a single advance enable ``en``: a
sample accepted at stage 0 is at stage s exactly s advances later. A
:class:`Staged` value is an expression that is correct while its sample
sits at ``stage``; :meth:`Pipe.reg` registers it into the next stage and
:meth:`Pipe.at` delays it to a later stage through (shared) registers.
Datapath registers carry no reset: the ``valid`` bit of each stage says
whether they hold a sample.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Signal, Value


@dataclass(frozen=True)
class Staged:
    """An expression ``value`` valid while its sample is at pipeline ``stage``."""

    value: Value
    stage: int


class Pipe:
    """Registers of an in-order pipeline that all advance on ``en``.

    Args:
        m: the module the registers go into.
        en: 1-bit advance enable (every stage moves one step on a clock edge where it is 1).
    """

    def __init__(self, m: Module, en: Signal):
        self.m = m
        self.en = en
        self._updates = []
        self._delayed: dict[tuple[int, int], Staged] = {}
        self._inputs: dict[int, tuple[Signal, Value]] = {}  # id(register) -> (register, its input)
        self.last_stage = 0

    def reg(self, value, stage: int, name: str) -> Staged:
        """Register ``value`` (valid at ``stage``) into stage ``stage + 1``."""
        value = Value.cast(value)
        sig = Signal(value.shape(), name=name, reset_less=True)
        self._updates.append(sig.eq(value))
        self._inputs[id(sig)] = (sig, value)
        self.last_stage = max(self.last_stage, stage + 1)
        return Staged(sig, stage + 1)

    def before(self, register: Value) -> Value:
        """The expression a pipeline register is loaded from: its sample's value one stage earlier.

        Raises:
            ValueError: ``register`` was not made by :meth:`reg` (or :meth:`at`).
        """
        if not self.is_register(register):
            raise ValueError(f"{register!r} is not a register of this pipeline")
        return self._inputs[id(register)][1]

    def is_register(self, value: Value) -> bool:
        """Whether ``value`` is a register made by :meth:`reg` (or :meth:`at`)."""
        entry = self._inputs.get(id(value))
        return entry is not None and entry[0] is value

    def at(self, s: Staged, stage: int) -> Value:
        """The value of ``s`` for the sample now at ``stage`` (>= s.stage), delayed by registers."""
        if stage < s.stage:
            raise ValueError(f"stage {stage} is before the stage {s.stage} where the value is computed")
        cur = s
        while cur.stage < stage:
            key = (id(cur.value), cur.stage)
            nxt = self._delayed.get(key)
            if nxt is None:
                base = getattr(cur.value, "name", "v") if isinstance(cur.value, Signal) else "v"
                base = base.rsplit("_s", 1)[0]
                nxt = self.reg(cur.value, cur.stage, f"{base}_s{cur.stage + 1}")
                self._delayed[key] = nxt
            cur = nxt
        return cur.value

    def finalize(self) -> None:
        """Emit every register update under the advance enable."""
        with self.m.If(self.en):
            self.m.d.sync += self._updates
