"""The HLS backend: run whole streams through the C simulation of the emitted C++.

:class:`HlsLearner` runs the compiled C-simulation program (:mod:`onchip.hls.build`,
protocol in :file:`onchip_csim.cpp`) as a child process and drives the top function
through its AXI4-Stream ports, so that C simulation exercises exactly the code Vitis
HLS synthesizes. A failure inside the simulation (an assertion of the ap_types headers,
a signal) ends the child, never the calling process: it is raised as
:class:`HlsSimulationError`, one line naming the spec and the program. Predictions and
final parameters equal :class:`onchip.model.GoldenLearner`'s bit for bit (checked by
tests/test_hls.py and tests/test_fuzz_specs.py).
"""

from __future__ import annotations

import signal
import subprocess
import tempfile

import numpy as np

from ..errors import ToolError
from ..model.golden import check_channel, check_stream
from ..result import RunResult
from ..spec import LearnerSpec
from .build import build_simulator
from ..hw.names import DEFAULT_TOP
from .emit import HlsProject, checked_theta, emit

#: Samples per RUN command sent to the child (one pipe round trip each).
_CHUNK = 16384
_RESET, _RUN, _READ, _LOAD = 0, 1, 2, 3


class HlsSimulationError(ToolError):
    """The HLS C simulation failed (an ap_types assertion, a signal, a protocol error).

    The message is one line: the spec, the program, how it ended and the last line of
    its error output.
    """


def spec_label(spec: LearnerSpec) -> str:
    """A short name of ``spec`` for messages: its preset name, else kind and widths."""
    if spec.name:
        return f"spec {spec.name!r}"
    return f"spec {spec.kind} {list(spec.widths)} ({spec.schedule})"


class _Child:
    """One C-simulation process; every failure becomes :class:`HlsSimulationError`."""

    def __init__(self, program, label: str):
        self.program, self.label = str(program), label
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([self.program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, bufsize=1 << 20)

    def send(self, *arrays) -> None:
        try:
            for a in arrays:
                self.proc.stdin.write(np.ascontiguousarray(a, np.int64).tobytes())
            self.proc.stdin.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.fail("stopped reading its input")

    def receive(self, n: int) -> np.ndarray:
        data = self.proc.stdout.read(8 * n) if n else b""
        if len(data) != 8 * n:
            self.fail(f"answered {len(data) // 8} of {n} words")
        return np.frombuffer(data, np.int64).copy()

    def close(self) -> None:
        """End the child (end of input); raise if it did not exit cleanly."""
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass
        if self.proc.wait() != 0:
            self.fail("failed at the end of the stream")
        self._err.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._err.close()

    def fail(self, what: str):
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            pass
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        if rc < 0:
            try:
                how = f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                how = f"was killed by signal {-rc}"
        elif rc > 0:
            how = f"exited with status {rc}"
        else:
            how = what
        self._err.seek(0)
        lines = [ln.strip() for ln in self._err.read().decode(errors="replace").splitlines() if ln.strip()]
        self._err.close()
        detail = f": {lines[-1][-600:]}" if lines else ""
        raise HlsSimulationError(f"HLS C simulation of {self.label} ({self.program}) {how}{detail}")


class HlsLearner:
    """The C-simulated HLS learner of ``spec``.

    Args:
        spec: the learner.
        theta: initial raw parameters (flat int64 (P,), ``coef`` format; with channels > 1
            (N, P), or (P,) for every channel), loaded through the parameter port; default:
            the compiled-in reset state (:func:`onchip.model.golden.initial_parameters`).
        opt: optimization level of the program (:data:`onchip.hls.build.OPT_LEVELS`):
            ``O2`` for long streams, ``O0`` to build faster for short ones.
        top: the top function the project is emitted under (:func:`onchip.hw.names.check_top`).
        project: the :class:`onchip.hls.HlsProject` to compile instead of ``emit(spec, top=top)``:
            the files ``onchip hls`` writes, so that its C simulation checks exactly them (its
            top, its compiled-in reset state); ``theta`` is then still loaded when given.

    The program is built once per project (cached on disk); every :meth:`run` starts
    its own process, which resets, loads ``theta`` and runs, so learners of the same
    spec are independent and may run concurrently.

    Raises:
        ValueError: bad ``theta`` or ``opt``. FileNotFoundError: no compiler or no ap_types headers.
        onchip.hls.build.HlsBuildError: a compile error.
    """

    def __init__(self, spec: LearnerSpec, theta: np.ndarray | None = None, *, opt: str = "O2",
                 top: str = DEFAULT_TOP, project: HlsProject | None = None):
        self.spec = spec
        self.theta_init = None if theta is None else checked_theta(spec, theta)
        self.project = emit(spec, top=top) if project is None else project
        # a given project is a written one: its test bench must compile too
        self.program, self.compiled = build_simulator(self.project, opt=opt, testbench=project is not None)

    def run(self, x_raw, y_raw, *, kind=None, learn: bool = True, progress: bool = False, channel=None):
        """Reset, load the initial parameters, run the stream, flush and read the parameters.

        Args:
            x_raw: (N, n_in) raw inputs (``input`` format).
            y_raw: (N, n_out) by kind: raw targets (``act`` format) or errors (``grad``
                format); ignored for PREDICT samples and when not ``learn``.
            kind: (N,) :class:`onchip.model.SampleKind` values (None: all TARGET, sent with
                ``OP_RUN``; otherwise ``OP_RUN_KINDS``, one kind word per sample).
            learn: test-then-train (True) or inference only (``OP_PREDICT``).
            progress: show a tqdm bar.
            channel: (N,) integers in [0, channels), each sample's channel (sent after its
                other words); required with channels > 1.

        Returns:
            :class:`onchip.result.RunResult`: (predictions raw int64 (N, n_out), final
            parameters raw int64 (P,), (channels, P) with more than one), ``.decisions`` (N,)
            the top function's decision words.

        Raises:
            ValueError: inputs of the wrong shape or outside their formats (``check_stream``),
                a bad or missing ``channel`` (``check_channel``).
            HlsSimulationError: the C simulation failed (the calling process carries on).
        """
        from ..progress import progress_bar

        spec = self.spec
        with_kinds = learn and kind is not None
        x, y, kind = check_stream(spec, x_raw, y_raw, learn=learn, kind=kind)
        channel = check_channel(spec, channel, len(x))
        n_out, p, nc = spec.n_out, spec.parameter_count(), spec.channels
        preds = np.zeros((len(x), n_out), np.int64)
        dec = np.zeros(len(x), np.int64)
        mode = 2 if with_kinds else int(learn)
        child = _Child(self.program, spec_label(spec))
        try:
            with progress_bar(total=len(x), desc=f"{spec.name or spec.kind} hls", unit="sample", unit_scale=True,
                      disable=not progress, leave=False) as bar:
                sizes = child.receive(5).tolist()
                want = [spec.n_in, n_out, p, spec.effective_staleness, nc]
                if sizes != want:
                    child.fail(f"has sizes {sizes}, expected {want}")
                child.send([_RESET])
                if self.theta_init is not None:
                    child.send([_LOAD], self.theta_init)
                for lo in range(0, len(x), _CHUNK):
                    hi = min(lo + _CHUNK, len(x))
                    xs = x[lo:hi]
                    if mode == 2:
                        words = np.hstack([xs, kind[lo:hi, None], y[lo:hi]])
                    else:
                        words = np.hstack([xs, y[lo:hi]]) if learn else xs
                    if nc > 1:  # the channel word, after the other fields
                        words = np.hstack([words, channel[lo:hi, None]])
                    child.send([_RUN, len(xs), mode], words)
                    out = child.receive(len(xs) * (n_out + 1) + 1)
                    if out[-1] != 0:
                        child.fail("did not answer every sample")
                    rows = out[:-1].reshape(len(xs), n_out + 1)
                    preds[lo:hi], dec[lo:hi] = rows[:, :n_out], rows[:, n_out]
                    bar.update(len(xs))
                child.send([_READ])
                theta = child.receive(nc * p)
                if nc > 1:
                    theta = theta.reshape(nc, p)
            child.close()
        finally:
            child.kill()
        return RunResult(preds, theta, dec)


def run(spec: LearnerSpec, x_raw, y_raw, *, kind=None, theta=None, learn: bool = True,
        progress: bool = True, top: str = DEFAULT_TOP, channel=None):
    """Test-then-train (or, without ``learn``, infer over) a whole raw stream on the C-simulated HLS learner.

    Args:
        spec: the learner.
        x_raw: (N, n_in) raw inputs; y_raw: (N, n_out) raw targets or errors by ``kind``
            (ignored without ``learn``).
        kind: (N,) :class:`onchip.model.SampleKind` values (None: all TARGET).
        theta: initial raw parameters (default: the spec's initial parameters).
        learn: test-then-train (True) or inference only.
        progress: show a tqdm bar.
        top: the top function the C++ is emitted and compiled under.
        channel: (N,) each sample's channel (required with channels > 1).

    Returns:
        :class:`onchip.result.RunResult`: (predictions raw int64 (N, n_out), final parameters
        raw int64 (P,) after a flush), equal to ``GoldenLearner(spec, theta).run(x_raw, y_raw,
        kind)`` and its ``theta`` after ``flush()``; ``.decisions`` the decision words.

    Raises:
        ValueError: bad shapes or theta. FileNotFoundError: no toolchain.
        onchip.hls.build.HlsBuildError: a compile error. HlsSimulationError: the C simulation failed.
    """
    return HlsLearner(spec, theta, top=top).run(x_raw, y_raw, kind=kind, learn=learn, progress=progress,
                                                channel=channel)
