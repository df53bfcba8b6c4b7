"""Progress of long work: a tqdm bar on a terminal, plain periodic lines elsewhere.

A redirected or captured stderr (CI logs, ``2> file``, a notebook's pipe) gets no carriage
returns, so no "0%|" remnant shares a line with the summary that follows: one full line every
:data:`LINE_INTERVAL` seconds while the work runs, and nothing for work shorter than that.

Each update (and each item of an iterated bar), shown or not, is also where an interrupt that
C code swallowed is raised again (:func:`onchip.interrupts.check`).
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from .interrupts import check

#: seconds between two progress lines when stderr is not a terminal
LINE_INTERVAL = 10.0


class _Checked(tqdm):
    """tqdm that raises a pending interrupt at each update, a disabled bar's included."""

    def update(self, n=1):
        check()
        return super().update(n)

    def __iter__(self):  # tqdm counts an iterated bar's items without calling update
        for item in super().__iter__():
            check()
            yield item


class _Lines(_Checked):
    """tqdm writing one plain line per refresh (at most every :data:`LINE_INTERVAL` s)."""

    def __init__(self, *args, **kwargs):
        kwargs["mininterval"] = max(kwargs.get("mininterval", 0.0), LINE_INTERVAL)
        kwargs["miniters"] = 1
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        # close()'s clearing call writes nothing (False: nor the '\r' it would follow with)
        if msg == "":
            return False
        if msg is None and self.n == 0:  # the first refresh, before any work
            return True
        text = self.__str__() if msg is None else msg
        self._shown = self.n
        self.fp.write(text.strip() + "\n")
        self.fp.flush()
        return True


    def close(self):
        if not self.disable and self.leave and self.n and getattr(self, "_shown", None) != self.n:
            self.fp.write(self.__str__().strip() + "\n")  # the final count, once
        self.leave = False  # tqdm's own close then writes nothing more
        super().close()


def progress_bar(*args, file=None, **kwargs) -> tqdm:
    """A ``tqdm`` bar (same arguments) on a terminal, periodic lines when ``file`` is not one.

    Args:
        file: the stream written to; default ``sys.stderr``.
        args, kwargs: tqdm's (``total``, ``desc``, ``unit``, ``disable``, ``leave``...).
    """
    file = sys.stderr if file is None else file
    terminal = getattr(file, "isatty", lambda: False)()
    return (_Checked if terminal else _Lines)(*args, file=file, **kwargs)
