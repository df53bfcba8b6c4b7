"""Ctrl-C and a scheduler's SIGTERM: a command stops, and writes nothing.

A signal's Python handler raises its exception at whatever bytecode the main thread runs next,
and C code that clears errors can swallow it there. numpy does: comparing a numpy integer with
an ``IntEnum`` member looks ``__array_ufunc__`` up on the enum's type, which runs the
metaclass's ``__getattr__``, and numpy discards whatever that raises. An interrupt landing in it
vanishes (the SIGTERM handler has already set the signal to be ignored) and the command runs on
to exit 0. So :func:`handled` also records the request, and :func:`check` raises it again: at
each progress update (:mod:`onchip.progress`) and before an output folder is committed
(:func:`onchip.io.atomic_output_dir`).

During an optional package's import the interrupts are :func:`held` instead: torch's import,
cut half-way, aborts the process before any cleanup.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: the interrupt asked for while :func:`handled` is active and not yet unwound to it
_requested: type[KeyboardInterrupt] | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C. A subclass on purpose: CPython 3.11 exits by SIGINT
    (status -2) once a bare KeyboardInterrupt has passed through code it runs with
    ``PyEval_EvalCode`` (as during the float twin's imports), even after ``main`` caught it."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, a subclass for the reason :class:`Terminated` is one: a bare KeyboardInterrupt that
    passed through an import made the process end by SIGINT (status -2) after ``main`` had caught it
    and returned 130."""


def _on_signal(signum, frame):
    global _requested
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: the cleanup must not be cut short
        _requested = Terminated
    else:
        _requested = Interrupted
    raise _requested


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` and Ctrl-C ``KeyboardInterrupt`` inside the block, and
    the request is kept until the block is left, so :func:`check` raises it again wherever the
    first exception was swallowed. Only in the main thread (elsewhere a no-op: handlers are the
    main thread's to set); Ctrl-C only while it has Python's default handler (an ignored SIGINT,
    as under ``nohup``, stays ignored). The previous handlers are restored on the way out."""
    global _requested
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = [signal.SIGTERM] + [signal.SIGINT] * (signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    outer, _requested = _requested, None  # before the handlers: a signal right after them is kept
    previous = {}
    try:
        for s in ours:
            previous[s] = signal.signal(s, _on_signal)
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _requested = outer


def status(interrupt: BaseException) -> int:
    """The exit status of a command stopped by ``interrupt``: 143 (128 + 15) for SIGTERM
    (:class:`Terminated`), 130 (128 + 2) for Ctrl-C, as a shell reports a process the signal ended."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def check() -> None:
    """Raise the interrupt asked for inside :func:`handled`, if any (a no-op otherwise).

    Raises:
        Terminated: SIGTERM was received.
        Interrupted: Ctrl-C was pressed (a KeyboardInterrupt).
    """
    if _requested is not None:
        raise _requested


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block is over (an optional package's import,
    :func:`onchip.extras.need`): interrupted half-way, torch's import aborts the process (SIGABRT)
    before any cleanup, leaving the run's staging folder behind (or a bare ``except`` inside it
    swallows the interrupt, and the run goes on). A held signal is delivered, and unwinds as
    usual, as soon as the block returns.

    Blocking the signals covers only the main thread: the kernel hands a process's signal to any
    thread that does not block it (a BLAS pool started before), and Python then runs the handler
    in the main thread all the same. So the Python handlers are also swapped for one that only
    notes the signal, which is raised again once the block is over."""
    signals = (signal.SIGINT, signal.SIGTERM)
    noted: list[int] = []
    handlers = {}
    if threading.current_thread() is threading.main_thread():  # handlers are the main thread's to set
        handlers = {s: signal.getsignal(s) for s in signals}
        handlers = {s: h for s, h in handlers.items() if h is not None}  # None: set outside Python, kept
        for s in handlers:
            signal.signal(s, lambda signum, frame: noted.append(signum))
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for s, h in handlers.items():
            signal.signal(s, h)
        for s in dict.fromkeys(noted):
            signal.raise_signal(s)
