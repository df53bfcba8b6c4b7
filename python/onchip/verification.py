"""Prove that the hardware generated for a spec computes what the golden model computes.

:func:`verify` runs one learner spec (a preset, a TOML file or a :class:`~onchip.spec.LearnerSpec`)
through the project's own checks and returns a :class:`VerifyReport`, one named case per check:

* ``rtl`` (and ``icarus``): the cocotb bench (:mod:`onchip.hw.sim`, the bench of the project's
  protocol tests) on Verilator (Icarus) with random valid/ready stalls on the sample, prediction
  and parameter-response streams. The stream is cut into four parts: part A, then a reset a cycle
  after its last sample is accepted (the samples in flight are lost; the golden model restarts
  from the initial parameters), a read of every parameter (they must be the initial ones again);
  part B, then a read (the checkpoint); part C, then a write of the checkpoint (restore); part D,
  then a read (the final parameters). Every prediction, every read-back and the final parameters
  are compared with :class:`~onchip.model.GoldenLearner` doing the same (``flush`` before a read,
  ``load`` for a write). The job opens with the first :data:`TIMING_SAMPLES` samples offered
  back to back without stalls, then a read: there the prediction latency, the initiation
  interval (II) and the update latency are measured, in clock cycles, against the generator's
  report (``design.info``), and their predictions compared too.
* ``hls``: the HLS C++ under C simulation over the same stream (predictions and final parameters).
* ``formal`` (``onchip verify --formal``): SymbiYosys proofs (:mod:`onchip.formal`), one case per
  property, ``formal.<level>.<property>``: the stream protocol of the core and of its AXI4-Stream
  wrapper proved by k-induction for all time (``passed``, "proved ... k = <cycles>"), its bounded
  responses (s ready after the reload, a prediction within its latency: proved, or bounded), its
  covers (a sample accepted, a prediction delivered, an update committed, a parameter written and
  read back: ``passed`` only with a trace that reaches it, "covered ... <cycles>"; an unreachable
  cover fails), the read-back of any parameter checked to a bound, and with ``equivalence`` seconds the ``fast`` and
  ``compact`` timing plans compared to the bound the solver reaches, once with any commands
  (``formal.plans.*``) and once with reads only (``formal.plans_reads_only.*``). A bounded
  case passes with its bound in cycles (and samples) in its text and in ``measured``, never the
  word "proved"; a counterexample fails the case with its VCD trace.

A backend whose tool is not installed gives one ``skipped`` case, never a passed one.
:func:`assert_verified` is the pytest helper; ``onchip verify`` (:mod:`onchip.commands.verify`)
the command. :func:`verify`, :func:`assert_verified` and :class:`VerifyReport` are also
``onchip.verify``, ``onchip.assert_verified`` and ``onchip.VerifyReport``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .spec import LearnerSpec

#: Backends :func:`verify` can run: the cocotb bench on Verilator (``rtl``) or Icarus, the HLS C simulation.
VERIFY_BACKENDS = ("rtl", "icarus", "hls", "formal")
#: Stream kinds besides the task names of :data:`onchip.tasks.TASKS`.
RANDOM_STREAM = "random"
#: Smallest stream: every one of the four bench segments gets samples.
MIN_SAMPLES = 8
#: Random stalls of the protocol job: probabilities that a sample is offered, a prediction
#: taken, a parameter response taken in a cycle.
STALLS = {"p_valid": 0.7, "p_ready": 0.6, "p_param_ready": 0.5}
#: Samples of the stall-free timing segment that opens the bench job (at most).
TIMING_SAMPLES = 200

STATUSES = ("passed", "failed", "skipped", "error")


#: Characters XML 1.0 cannot hold (its ``Char`` production): C0 controls but tab, newline and
#: carriage return, lone surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold written as its Python escape
    (U+001B -> ``\\x1b``), so that JUnit XML always parses and still shows what was there."""
    return _NOT_XML.sub(lambda m: ascii(m.group())[1:-1], text)


@dataclasses.dataclass
class Case:
    """One check of a verification run.

    Attributes:
        name: ``<backend>.<check>``, e.g. ``rtl.predictions``.
        status: ``passed``, ``failed`` (a mismatch), ``skipped`` (tool not installed) or
            ``error`` (the tool failed).
        detail: one line saying what was compared, or what differs / why it was skipped.
        seconds: wall time of the check (the simulation is counted in the first case of a backend).
        mismatch: for a failed comparison, the first difference: ``sample`` (index in the stream)
            or ``parameter`` (index in theta), ``got``, ``want``, and for samples ``x_raw``,
            ``y_raw``, ``cycle`` (bench clock cycle of the prediction) and ``waves`` (a dump path).
        measured: for timing cases, the reported and measured cycle counts.
    """

    name: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    mismatch: dict | None = None
    measured: dict | None = None

    @property
    def backend(self) -> str:
        return self.name.split(".", 1)[0]

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass
class VerifyReport:
    """The result of :func:`verify`.

    Attributes:
        spec: the verified spec (schedule and staleness overrides applied).
        samples, seed, stream: the stream that was run.
        backends: the backends asked for.
        cases: every check, in order.
        waves: waveform dump of the bench's protocol job (only with ``waves=True``).
        formal_dir: the folder of the ``formal`` backend's SymbiYosys jobs (None when it did not run).
    """

    spec: LearnerSpec
    samples: int
    seed: int
    stream: str
    backends: tuple[str, ...]
    cases: list[Case] = dataclasses.field(default_factory=list)
    waves: str | None = None
    formal_dir: str | None = None

    @property
    def ok(self) -> bool:
        """True when no case failed or errored and at least one case passed (skips prove nothing)."""
        return (not any(c.status in ("failed", "error") for c in self.cases)
                and any(c.status == "passed" for c in self.cases))

    def count(self, status: str) -> int:
        """Cases with ``status`` (one of :data:`STATUSES`)."""
        return sum(c.status == status for c in self.cases)

    @property
    def first_failure(self) -> Case | None:
        """The first failed (else errored) case, or None."""
        return next((c for c in self.cases if c.status == "failed"),
                    next((c for c in self.cases if c.status == "error"), None))

    @property
    def label(self) -> str:
        s = self.spec
        name = s.name or f"{s.kind} {list(s.widths)}"
        sched = f"{s.channels} channels, {s.schedule_words}" if s.channels > 1 else s.schedule_words
        return (f"{name} ({sched}{', staleness %d' % s.staleness if s.effective_staleness else ''}"
                f", timing {s.stage_timing})")

    def summary(self) -> str:
        """Text: one line per case (``PASS`` / ``FAIL`` / ``SKIP`` / ``ERROR``), then the totals;
        on a failure, the first one again with its details."""
        tag = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR"}
        width = max((len(c.name) for c in self.cases), default=0)
        lines = [f"onchip verify {self.label}: {self.samples} samples, stream {self.stream}, seed {self.seed}"]
        lines += [f"  {tag[c.status]:<5} {c.name:<{width}}  {c.detail}" for c in self.cases]
        lines.append(f"{self.count('passed')} passed, {self.count('failed')} failed, "
                     f"{self.count('error')} errors, {self.count('skipped')} skipped: "
                     f"{'OK' if self.ok else 'NOT VERIFIED'}")
        bad = self.first_failure
        if bad is not None:
            lines.append(f"first failure: {bad.name}: {bad.detail}")
        elif not self.ok:
            lines.append("nothing was verified: every check was skipped")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-ready dictionary of the whole report."""
        bad = self.first_failure
        return {
            "ok": self.ok, "spec_label": self.label, "spec": self.spec.to_dict(), "samples": self.samples,
            "seed": self.seed, "stream": self.stream, "backends": list(self.backends),
            "counts": {s: self.count(s) for s in STATUSES},
            "first_failure": None if bad is None else bad.to_dict(),
            "waves": self.waves, "formal_dir": self.formal_dir, "cases": [c.to_dict() for c in self.cases],
        }

    def junit_tree(self) -> ET.ElementTree:
        """The report as JUnit XML: one ``<testsuite>`` (per report), one ``<testcase>`` per case;
        failed cases hold ``<failure>``, errored ones ``<error>``, skipped ones ``<skipped>``.
        Every text is valid XML 1.0 (:func:`xml_text`: a tool's message may hold control characters)."""
        suites = ET.Element("testsuites", name="onchip verify")
        suite = ET.SubElement(suites, "testsuite", {
            "name": xml_text(f"onchip verify {self.label}"), "tests": str(len(self.cases)),
            "failures": str(self.count("failed")), "errors": str(self.count("error")),
            "skipped": str(self.count("skipped")), "time": f"{sum(c.seconds for c in self.cases):.3f}",
        })
        props = ET.SubElement(suite, "properties")
        for k, v in (("samples", self.samples), ("seed", self.seed), ("stream", self.stream),
                     ("spec", json.dumps(self.spec.to_dict(), sort_keys=True))):
            ET.SubElement(props, "property", name=k, value=xml_text(str(v)))
        classname = f"onchip.verify.{self.spec.name or self.spec.kind}"
        for c in self.cases:
            el = ET.SubElement(suite, "testcase", classname=xml_text(f"{classname}.{c.backend}"),
                               name=xml_text(c.name), time=f"{c.seconds:.3f}")
            if c.status in ("failed", "error", "skipped"):
                tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[c.status]
                child = ET.SubElement(el, tag, message=xml_text(c.detail))
                if c.mismatch:
                    child.text = json.dumps(c.mismatch, indent=1)  # JSON escapes control characters
            else:
                ET.SubElement(el, "system-out").text = xml_text(c.detail)
        ET.indent(suites)
        return ET.ElementTree(suites)

    def to_junit(self, path) -> Path:
        """Write the JUnit XML report (:meth:`junit_tree`) to ``path``; returns it as a Path."""
        path = Path(path)
        self.junit_tree().write(path, encoding="utf-8", xml_declaration=True)
        return path


# -- the stream ------------------------------------------------------------------------
def random_stream(spec: LearnerSpec, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The corner-case stream of :func:`verify`: raw (x (N, n_in), y (N, n_out)) int64.

    Each input is, at random, uniform inside the grid range (60 %; MLP: +/-2), uniform over the
    whole ``input`` format (25 %: out-of-grid and saturated values), or an edge value (15 %: every
    grid knot and the grid ends, one LSB either side, the format limits, 0). Each target is uniform
    in +/-1 (70 %), uniform over the whole output format (``formats.y``) (20 %) or at its limits (10 %: saturating
    errors).
    """
    rng = np.random.default_rng(seed)
    fi, fa = spec.formats.input, spec.formats.y

    def raw(value, f):
        return int(f.quantize(min(max(value, f.min_value), f.max_value)))

    lo, hi = spec.grid_range if spec.kind == "kan" else (-2.0, 2.0)
    lo_raw, hi_raw = raw(lo, fi), raw(hi, fi)
    knots = [raw(lo + j * (hi - lo) / spec.grid_size, fi) for j in range(spec.grid_size + 1)] if spec.kind == "kan" \
        else [lo_raw, 0, hi_raw]
    edges = np.unique(np.clip([k + d for k in knots for d in (-1, 0, 1)] + [fi.min_raw, fi.max_raw, 0],
                              fi.min_raw, fi.max_raw))
    shape = (n, spec.n_in)
    pick = rng.random(shape)
    x = np.where(pick < 0.60, rng.integers(lo_raw, hi_raw + 1, shape),
                 np.where(pick < 0.85, rng.integers(fi.min_raw, fi.max_raw + 1, shape), rng.choice(edges, shape)))
    shape = (n, spec.n_out)
    pick = rng.random(shape)
    y = np.where(pick < 0.70, rng.integers(raw(-1.0, fa), raw(1.0, fa) + 1, shape),
                 np.where(pick < 0.90, rng.integers(fa.min_raw, fa.max_raw + 1, shape),
                          rng.choice([fa.min_raw, fa.max_raw], shape)))
    return x.astype(np.int64), y.astype(np.int64)


def make_verify_stream(spec: LearnerSpec, stream: str, samples: int, seed: int, data=None):
    """Raw (x, y) of :func:`verify`: :func:`random_stream`, or a task's stream quantized to the spec.

    Raises:
        ValueError: naming the argument: an unknown stream, a task whose shape does not fit the
            spec, ``data`` with a stream that takes none, a bad data file.
        FileNotFoundError: ``data`` does not exist.
    """
    from .tasks import TASKS, make_stream

    if stream == RANDOM_STREAM:
        if data is not None:
            raise ValueError(f"data: only the qubit-readout stream reads a data file, not stream {stream!r}")
        return random_stream(spec, samples, seed)
    if stream not in TASKS:
        raise ValueError(f"stream: must be {RANDOM_STREAM!r} or a task ({', '.join(TASKS)}), got {stream!r}")
    if data is not None and not Path(data).exists():
        raise FileNotFoundError(f"data: {str(data)!r} does not exist")
    try:
        s = make_stream(stream, samples=samples, seed=seed, data=data)
    except ValueError as exc:
        text = str(exc)
        raise ValueError(text if text.split(":")[0] in ("data", "samples", "seed") else f"data: {text}") from None
    if s.x.shape[1] != spec.n_in or s.y.shape[1] != spec.n_out:
        raise ValueError(f"stream: task {stream!r} has {s.x.shape[1]} input(s) and {s.y.shape[1]} output(s); "
                         f"the spec has widths {list(spec.widths)}")
    from .model import GoldenLearner

    g = GoldenLearner(spec)
    return g.quantize_inputs(s.x).astype(np.int64), g.quantize_targets(s.y).astype(np.int64)


def segment_bounds(n: int) -> list[tuple[int, int]]:
    """The four parts [lo, hi) of an n-sample stream on the bench: before the reset, before the
    checkpoint read, before the restoring write, before the final read (20 / 30 / 25 / 25 %)."""
    cuts = [0, max(1, n // 5), max(2, n // 2), max(3, (3 * n) // 4), n]
    return list(zip(cuts[:-1], cuts[1:]))


# -- comparisons ---------------------------------------------------------------------------
def _fmt(a) -> str:
    return "[" + ", ".join(str(int(v)) for v in np.ravel(a)) + "]"


def _compare_preds(spec, got, want, offset, x, y, who, cycles=None) -> dict | None:
    """The first difference of two (n, n_out) prediction arrays, or None when equal."""
    n = min(len(got), len(want))
    diff = np.nonzero((np.asarray(got[:n]) != np.asarray(want[:n])).any(axis=1))[0]
    if diff.size == 0 and len(got) == len(want):
        return None
    k = int(diff[0]) if diff.size else n
    i = offset + k
    f = spec.formats
    m = {"sample": i, "x_raw": x[i].tolist(), "x": f.input.dequantize(x[i]).tolist(),
         "y_raw": y[i].tolist(), "want": np.asarray(want[k]).tolist() if k < len(want) else None,
         "got": np.asarray(got[k]).tolist() if k < len(got) else None, "differing": int(diff.size)}
    if cycles is not None and k < len(cycles):
        m["cycle"] = int(cycles[k])
    if k >= len(got) or k >= len(want):
        m["text"] = f"{who} gave {len(got)} predictions where the golden model gave {len(want)} (first missing: sample {i})"
    else:
        at = f" at cycle {m['cycle']}" if "cycle" in m else ""
        m["text"] = (f"sample {i}: x_raw {_fmt(x[i])} (x {np.round(m['x'], 6).tolist()}), y_raw {_fmt(y[i])}: "
                     f"{who} predicted {_fmt(got[k])}, golden {_fmt(want[k])}{at} ({diff.size} samples differ)")
    return m


def _compare_theta(got, want, who, what) -> dict | None:
    got, want = np.asarray(got, np.int64), np.asarray(want, np.int64)
    if got.shape == want.shape and np.array_equal(got, want):
        return None
    if got.shape != want.shape:
        return {"parameter": None, "text": f"{what}: {who} returned {got.size} values, expected {want.size}"}
    got, want = got.ravel(), want.ravel()  # (channels, P): parameter k of the flat (channel, index) order
    diff = np.nonzero(got != want)[0]
    k = int(diff[0])
    return {"parameter": k, "got": int(got[k]), "want": int(want[k]), "differing": int(diff.size),
            "text": f"{what}: parameter {k}: {who} {int(got[k])}, golden {int(want[k])} "
                    f"({diff.size} of {want.size} differ)"}


def _case(name, mismatch, ok_text, seconds=0.0, waves=None) -> Case:
    if mismatch is None:
        return Case(name, "passed", ok_text, seconds)
    if waves and "sample" in mismatch:
        mismatch["waves"] = waves
        mismatch["text"] += f" (waves: {waves})"
    return Case(name, "failed", mismatch["text"], seconds, mismatch=mismatch)


# -- the golden side -------------------------------------------------------------------------
def golden_bench(spec: LearnerSpec, x, y, theta=None) -> dict:
    """What the golden model says the bench job of :func:`verify` must produce.

    Returns:
        ``{"timing": (n_t, n_out), "after_timing": theta, "preds": [per part (n_k, n_out)],
        "initial": theta, "checkpoint": theta, "final": theta}``: the timing segment (the first
        :data:`TIMING_SAMPLES` samples) from a fresh learner, ``flush`` before its read; part A
        continues from there (the bench compares the predictions before the reset); parts B-D from
        a fresh learner (the reset), ``flush`` before the checkpoint read, ``load`` of the
        checkpoint after part C, ``flush`` before the final read. ``theta``: the initial (reset)
        parameters (default: the spec's).
    """
    from .model import GoldenLearner

    (a0, a1), (b0, b1), (c0, c1), (d0, d1) = segment_bounds(len(x))
    n_t = min(len(x), TIMING_SAMPLES)
    g = GoldenLearner(spec, theta)
    timing = g.run(x[:n_t], y[:n_t])
    g.flush()
    after_timing = g.theta.copy()
    preds = [g.run(x[a0:a1], y[a0:a1])]
    g = GoldenLearner(spec, theta)  # the reset: back to the initial parameters, nothing pending
    preds.append(g.run(x[b0:b1], y[b0:b1]))
    g.flush()
    checkpoint = g.theta.copy()
    preds.append(g.run(x[c0:c1], y[c0:c1]))
    g.load(checkpoint)
    preds.append(g.run(x[d0:d1], y[d0:d1]))
    g.flush()
    return {"timing": timing, "after_timing": after_timing, "preds": preds, "initial": g.initial_theta.copy(),
            "checkpoint": checkpoint, "final": g.theta.copy()}


def golden_stream(spec: LearnerSpec, x, y, theta=None, channel=None) -> tuple[np.ndarray, np.ndarray]:
    """Golden predictions (N, n_out) over the whole stream from the initial parameters (``theta``,
    default the spec's), and the flushed final parameters ((P,), (channels, P) with more than one;
    ``channel``: each sample's, as :meth:`onchip.model.GoldenLearner.run` takes it)."""
    from .model import GoldenLearner

    g = GoldenLearner(spec, theta)
    preds = g.run(x, y, channel=channel)
    g.flush()
    return preds, g.theta.copy()


# -- the bench -------------------------------------------------------------------------------
def _available(backend: str) -> str | None:
    """None when ``backend`` can run here, else why not."""
    import importlib.util

    if backend == "formal":
        from .formal import missing_tools

        return missing_tools()
    if backend in ("rtl", "icarus"):
        if importlib.util.find_spec("cocotb") is None or importlib.util.find_spec("cocotb_tools") is None:
            return "cocotb is not installed (pip install cocotb==2.1.0)"
        if backend == "icarus":
            return None if shutil.which("iverilog") else "Icarus Verilog (iverilog) is not installed"
        from .verilator.toolchain import missing

        return missing()
    from .hls.build import missing

    return missing()


def _run_bench(design, segments, **kw) -> dict:
    """:func:`onchip.hw.sim.run_job` (the seam tests use to inject faults)."""
    from .hw import sim

    return sim.run_job(design, segments, **kw)


def verify_channels(spec: LearnerSpec, n: int, seed: int) -> np.ndarray | None:
    """The random channel of each of ``n`` samples that every backend's check of a spec of N > 1
    channels runs (seeded by ``seed``); None with one channel."""
    return None if spec.channels == 1 else np.random.default_rng([seed, 67]).integers(0, spec.channels, n)


def _run_hls(spec, x, y, progress, theta=None, top=None, channel=None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`onchip.hls.backend.run` (the seam tests use to inject faults): the project ``onchip hls
    --top top --theta`` writes (``theta`` compiled in as the reset state), compiled and run."""
    from .hls import HlsLearner, emit
    from .hw.names import DEFAULT_TOP

    project = emit(spec, theta=theta, top=DEFAULT_TOP if top is None else top)
    return HlsLearner(spec, project=project).run(x, y, progress=progress, channel=channel)


def _max_cycles(info: dict, n: int) -> int:
    per = max(info["initiation_interval"], 1) + 1
    fixed = 4 * info["param_count"] + info["latency_cycles_update"] + info.get("reset_cycles", 0)
    return 20 * (n * per + fixed) + 20_000


#: The single-channel bench's cases the channel bench (:func:`_channel_bench_cases`) does not run, and
#: why; each is reported as skipped, so a report of N > 1 channels says what it did not check.
CHANNEL_SKIPPED = {
    "reset_mid_stream": "the bench's reset and its read-back of the initial parameters are single-channel "
                        "(onchip's own tests/test_hw_channels.py resets a channels design)",
    "readback_mid_stream": "parameters are read back once, at the end of the stream",
    "checkpoint_restore": "the checkpoint write is single-channel (tests/test_hw_channels.py restores every bank)",
    "no_stall_stream": "the stall-free segment runs round-robin channels and checks only their II",
    "latency": "latency is measured on a single-channel stall-free stream",
    "channel_error": "no sample names a channel the design lacks (tests/test_hw_channels.py checks that one is "
                     "dropped and flagged)",
}


def _channel_bench_cases(spec, design, x, y, *, backend, seed, log, theta=None) -> list[Case]:
    """N > 1 channels: the stream with a random channel per sample (seeded by ``seed``) under random
    stalls, then every channel's parameters read back, against N single-channel sequential golden
    learners each run on its channel's samples; then round-robin channels without stalls, whose
    accepted-sample interval must be the reported round-robin II."""
    from .hw import sim
    from .hw.interface import channel_parameters, single_channel
    from .model import GoldenLearner

    n_ch, one = spec.channels, single_channel(spec)
    theta = channel_parameters(spec, theta)
    ch = verify_channels(spec, len(x), seed)
    rr = np.arange(min(len(x), TIMING_SAMPLES)) % n_ch
    want = np.zeros((len(x), spec.n_out), np.int64)
    final = []
    for c in range(n_ch):
        g, pick = GoldenLearner(one, theta[c]), ch == c
        if pick.any():
            want[pick] = g.run(x[pick], y[pick])
        g.flush()
        final.append(g.theta.copy())
    simulator = "icarus" if backend == "icarus" else "verilator"
    log(f"{backend}: cocotb bench, {len(x)} samples on {n_ch} channels in random order with random stalls, "
        f"read-back of every channel, then {len(rr)} in round robin without stalls (timing)")
    t0 = time.perf_counter()
    write = {"op": "write", "values": [int(v) for v in theta.ravel()]}
    out = _run_bench(design, [
        {"payloads": [], "then": write},
        {"payloads": sim.pack_samples(design, x, y, channel=ch), "then": {"op": "read"}},
        {"payloads": sim.pack_samples(design, x[: len(rr)], y[: len(rr)], channel=rr), "then": {"op": "none"},
         **{k: 1.0 for k in STALLS}},
    ], seed=seed, measure=True, simulator=simulator, max_cycles=_max_cycles(design.info, 2 * len(x)), **STALLS)
    seconds = time.perf_counter() - t0
    _, seg, seg_rr = out["segments"]
    who = f"{backend} (cocotb)"
    got = sim.unpack_predictions(design, seg["preds"])
    cases = [_case(f"{backend}.predictions", _compare_preds(spec, got, want, 0, x, y, who),
                   f"{len(x)} predictions on {n_ch} channels equal the golden model's per channel", seconds)]
    got_theta = sim.unpack_coef(design, seg["responses"])
    cases.append(_case(f"{backend}.parameters", _compare_theta(got_theta, np.concatenate(final), who, "read-back"),
                       f"{got_theta.size} parameters ({n_ch} channels) read back equal the golden model's"))
    gaps = np.diff(seg_rr["accept_cycles"])
    ii, ii_ch = design.info["initiation_interval_round_robin"], design.info["initiation_interval_channel"]
    # N samples per II_ch cycles: the cycles of k gaps are k II, give or take one channel's II
    ok = gaps.size > 0 and abs(int(gaps.sum()) - gaps.size * ii) <= (0 if ii == 1 else ii_ch)
    mean = f"{gaps.mean():.3f}" if gaps.size else "none"
    cases.append(Case(f"{backend}.initiation_interval", "passed" if ok else "failed",
                      f"round-robin channels: measured {mean} cycles per sample, reported {ii:g}"))
    return cases + [Case(f"{backend}.{name}", "skipped", f"not run with channels: {why}")
                    for name, why in CHANNEL_SKIPPED.items()]


def _bench_cases(spec, design, x, y, *, backend, seed, waves, log, theta=None) -> tuple[list[Case], str | None]:
    """One bench job: a stall-free timing segment, then the stream under stalls with a reset,
    read-backs and a restoring write; the cases of ``backend`` and the waveform path (or None)."""
    from .hw import sim

    simulator = "icarus" if backend == "icarus" else "verilator"
    bounds = segment_bounds(len(x))
    n_t = min(len(x), TIMING_SAMPLES)
    want = golden_bench(spec, x, y, theta)
    pack = [sim.pack_samples(design, x[lo:hi], y[lo:hi]) for lo, hi in bounds]
    no_stalls = {k: 1.0 for k in STALLS}
    segments = [
        {"payloads": sim.pack_samples(design, x[:n_t], y[:n_t]), "then": {"op": "read"}, **no_stalls},
        {"payloads": pack[0], "then": {"op": "reset", "after": 1}},
        {"payloads": [], "then": {"op": "read"}},
        {"payloads": pack[1], "then": {"op": "read"}},
        {"payloads": pack[2], "then": {"op": "write", "values": [int(v) for v in want["checkpoint"]]}},
        {"payloads": pack[3], "then": {"op": "read"}},
    ]
    wave_fmt = None
    if waves and simulator == "verilator":
        try:
            wave_fmt = sim.wave_format("fst")
        except FileNotFoundError:
            wave_fmt = "vcd"
    log(f"{backend}: cocotb bench, {n_t} samples without stalls (timing), then {len(x)} with random stalls, "
        f"a reset, read-backs and a restore")
    t0 = time.perf_counter()
    out = _run_bench(design, segments, seed=seed, measure=True, waves=wave_fmt or False, simulator=simulator,
                     max_cycles=_max_cycles(design.info, len(x) + n_t), **STALLS)
    seconds = time.perf_counter() - t0
    dump = None
    if out.get("folder"):
        found = sorted(Path(out["folder"]).rglob(f"*.{wave_fmt}"))
        dump = str(found[0]) if found else None
    seg_t, seg_a, seg_0, seg_b, seg_c, seg_d = out["segments"]
    who = f"{backend} (cocotb)"
    cases = []
    # predictions: part A up to the reset (samples in flight are lost), then B, C, D in full
    got = [sim.unpack_predictions(design, s["preds"]) for s in (seg_a, seg_b, seg_c, seg_d)]
    lost = len(want["preds"][0]) - len(got[0])
    mismatch = None
    for k, (g, w, s) in enumerate(zip(got, want["preds"], (seg_a, seg_b, seg_c, seg_d))):
        if k == 0 and 0 <= lost:
            w = w[: len(g)]
        mismatch = _compare_preds(spec, g, w, bounds[k][0], x, y, who, s["pred_cycles"])
        if mismatch:
            break
    n_cmp = sum(len(g) for g in got)
    stalls = ", ".join(f"{k} {v}" for k, v in STALLS.items())
    cases.append(_case(f"{backend}.predictions", mismatch,
                       f"{n_cmp} predictions equal the golden model's under random stalls ({stalls}); "
                       f"{out['cycles']} cycles in all", seconds, dump))
    m = _compare_theta(sim.unpack_coef(design, seg_0["responses"]), want["initial"], who,
                       "read-back after the mid-stream reset")
    if m is None and lost < 0:
        m = {"text": f"{-lost} more predictions than samples before the reset"}
    m = m or _reset_timing(design.info, seg_0)
    cases.append(_case(f"{backend}.reset_mid_stream", m,
                       f"reset {bounds[0][1]} samples in ({lost} in flight lost): the {want['initial'].size} "
                       f"parameters read back are the initial ones, the first command taken "
                       f"{design.info['reset_cycles_command']} cycles out of reset (reported)"))
    m = _compare_theta(sim.unpack_coef(design, seg_b["responses"]), want["checkpoint"], who,
                       f"read-back at sample {bounds[1][1]}")
    cases.append(_case(f"{backend}.readback_mid_stream", m,
                       f"parameters read at sample {bounds[1][1]} equal the golden model's (flushed)"))
    m = _compare_theta(sim.unpack_coef(design, seg_c["responses"]), want["checkpoint"], who,
                       f"write of the checkpoint at sample {bounds[2][1]}")
    if m is None:
        m = _compare_preds(spec, got[3], want["preds"][3], bounds[3][0], x, y, who, seg_d["pred_cycles"])
    cases.append(_case(f"{backend}.checkpoint_restore", m,
                       f"checkpoint written back at sample {bounds[2][1]} is echoed and the "
                       f"{len(got[3])} predictions after it match", waves=dump))
    m = _compare_theta(sim.unpack_coef(design, seg_d["responses"]), want["final"], who, "final parameters")
    cases.append(_case(f"{backend}.final_parameters", m,
                       f"{want['final'].size} final parameters equal the golden model's"))
    # the stall-free segment: its predictions and read-back, then latency and II
    m = _compare_preds(spec, sim.unpack_predictions(design, seg_t["preds"]), want["timing"], 0, x, y,
                       f"{who} without stalls", seg_t["pred_cycles"]) or _compare_theta(
        sim.unpack_coef(design, seg_t["responses"]), want["after_timing"], who, "read-back after the timing segment")
    cases.append(_case(f"{backend}.no_stall_stream", m,
                       f"the first {n_t} samples offered back to back equal the golden model's", waves=dump))
    cases += _timing_cases(design, seg_t, n_t, backend)
    return cases, dump


def _reset_timing(info: dict, seg: dict) -> dict | None:
    """A mismatch when the first parameter command of ``seg`` (offered from the first cycle out of
    reset) was not taken ``info["reset_cycles_command"]`` cycles out of reset, else None."""
    got = seg["command_cycles"][0] - seg["start_cycle"] if seg.get("command_cycles") else None
    if got == info["reset_cycles_command"]:
        return None
    return {"text": f"the first parameter command after the reset was taken {got} cycles out of reset, "
                    f"the design reports reset_cycles_command = {info['reset_cycles_command']}"}


def _timing_cases(design, seg, n, backend) -> list[Case]:
    """Latency and II measured on the stall-free segment ``seg`` of ``n`` samples, against ``design.info``."""
    info = design.info
    acc, pred = np.asarray(seg["accept_cycles"]), np.asarray(seg["pred_cycles"])
    if len(acc) != n or len(pred) != n:
        return [Case(f"{backend}.latency", "failed",
                     f"{len(acc)} acceptances and {len(pred)} predictions measured for {n} samples")]
    cases = []
    lat = sorted(set((pred - acc).tolist()))
    rep = info["latency_cycles_prediction"]
    # update latency: the k-th commit strobe of a layer belongs to sample k; pipelined, the
    # last `staleness` commits wait for the read's flush
    d = info["staleness"] if info["schedule"] == "pipelined" else 0
    upd = []
    for commits in seg["commit_cycles"]:
        commits = np.asarray(commits)
        upd.append(sorted(set((commits[: n - d] - acc[: n - d]).tolist())) if len(commits) == n else None)
    expect_upd = [info["stages"]["update"][l] if d == 0 else d + info["stages"]["read"][l] for l in range(len(upd))]
    measured_upd = max((u[-1] for u in upd if u), default=None)
    if n - d > 0:
        ok_upd = all(u == [e] for u, e in zip(upd, expect_upd)) and measured_upd == info["latency_cycles_update"]
    else:
        ok_upd = all(u is not None for u in upd)
    ok_lat = lat == [rep]
    measured = {"latency_cycles_prediction": {"reported": rep, "measured": lat},
                "latency_cycles_update": {"reported": info["latency_cycles_update"], "measured": measured_upd,
                                          "per_layer": upd, "per_layer_expected": expect_upd}}
    text = (f"prediction latency {lat[0] if len(lat) == 1 else lat} cycles (reported {rep}), update latency "
            f"{measured_upd} cycles (reported {info['latency_cycles_update']})")
    ok = ok_lat and ok_upd
    cases.append(Case(f"{backend}.latency", "passed" if ok else "failed", text if ok else f"measured {text}",
                      measured=measured))
    if n < 2:
        cases.append(Case(f"{backend}.initiation_interval", "skipped", "II needs at least 2 samples"))
        return cases
    ii = sorted(set(np.diff(acc).tolist()))
    rep_ii = info["initiation_interval"]
    ok = ii == [rep_ii]
    cases.append(Case(f"{backend}.initiation_interval", "passed" if ok else "failed",
                      f"{'' if ok else 'measured '}II {ii[0] if len(ii) == 1 else ii} (cycles between samples "
                      f"offered back to back; reported {rep_ii})",
                      measured={"initiation_interval": {"reported": rep_ii, "measured": ii}}))
    return cases


def _formal_case(r) -> Case:
    """A :class:`Case` of one :class:`onchip.formal.PropertyResult`."""
    level = r.level.replace("equivalence", "plans")  # equivalence(_reads_only) -> plans(_reads_only)
    name = f"formal.{level}.{r.name}"
    bound = "trace_cycles" if r.status == "covered" else "bound_cycles"  # a cover's bound is its trace's length
    measured = {k: v for k, v in (("status", r.status), ("induction_depth", r.depth), (bound, r.bound),
                                  ("bound_samples", r.samples)) if v is not None}
    if r.status in ("proved", "bounded", "covered"):
        return Case(name, "passed", r.detail, r.seconds, measured=measured)
    mismatch = {"property": r.name, "text": r.detail}
    if r.trace:
        mismatch["trace"] = r.trace
    return Case(name, "failed", r.detail, r.seconds, mismatch=mismatch, measured=measured)


def _formal_cases(spec, *, top, theta, folder, equivalence, log) -> list[Case]:
    """The ``formal`` backend: protocol proofs (core and AXI wrapper), the bounded read-back and,
    with ``equivalence`` seconds, the bounded comparison of the two timing plans and their proof
    item by item (``equivalence`` seconds per solver query)."""
    from . import formal

    log(f"formal: proving the stream protocol (SymbiYosys, Yices 2) in {folder}")
    # the covers and response bounds do not close on the serial datapaths within the solver's limits
    # here (their sequencer's step counter needs invariants; a cover search ran out of its 600 s):
    # said as skipped rather than failed after an hour of solver time
    live = spec.datapath != "serial"
    results = formal.prove(spec, top=top, theta=theta, folder=folder, live=live, log=log)
    cases = [_formal_case(r) for r in results]
    if not live:
        cases.append(Case("formal.live", "skipped", "covers and response bounds are checked on the parallel datapath; "
                                                    "the serial datapath's sample, prediction and update are checked "
                                                    "in simulation (latency and II against the generator)"))
    if equivalence:
        if spec.datapath == "serial":
            cases.append(Case("formal.plans", "skipped", "the plans miter is built for the parallel datapath (the serial "
                                                           "datapaths' fast plans are checked against the golden model in "
                                                           "simulation)"))
        else:
            try:
                compact, fast = formal.plan_designs(spec, theta)
            except ValueError as exc:  # a pipelined staleness the fast plan cannot run at
                return cases + [Case("formal.plans", "skipped", f"not compared: timing fast: {exc}")]
            for writes, level in formal.PLANS_LEVELS.items():  # both hosts, each its seconds
                cases += [_formal_case(r) for r in formal.check_plans(compact, fast, Path(folder) / level, writes=writes,
                                                                      timeout=equivalence, log=log)]
            if spec.schedule != "sequential":
                cases.append(Case("formal.plans_per_item", "skipped",
                                  "the item-by-item proof is for the sequential schedule"))
                return cases
            try:
                cases += [_formal_case(r) for r in formal.check_plans_per_item(
                    compact, fast, Path(folder) / formal.ITEMS_LEVEL, timeout=equivalence, log=log)]
            except formal.ItemsError as exc:
                cases.append(Case("formal.plans_per_item", "failed", str(exc),
                                  mismatch={"property": formal.ITEMS_LEVEL, "text": str(exc)}))
    return cases


def _hls_cases(spec, x, y, *, progress, log, theta=None, top=None, seed=0) -> list[Case]:
    ch = verify_channels(spec, len(x), seed)
    log(f"hls: C simulation, {len(x)} samples" + ("" if ch is None else f" on {spec.channels} channels in random order"))
    t0 = time.perf_counter()
    got, final = _run_hls(spec, x, y, progress, theta, top, channel=ch)
    seconds = time.perf_counter() - t0
    want, want_theta = golden_stream(spec, x, y, theta, channel=ch)
    return [
        _case("hls.predictions", _compare_preds(spec, got, want, 0, x, y, "hls (C simulation)"),
              f"{len(x)} predictions equal the golden model's", seconds),
        _case("hls.final_parameters", _compare_theta(final, want_theta, "hls", "final parameters"),
              f"{want_theta.size} final parameters"
              + ("" if ch is None else f" ({spec.channels} channels)") + " equal the golden model's"),
    ]


def check_arguments(samples, seed, backends) -> tuple[int, int, tuple[str, ...]]:
    """Validate :func:`verify`'s plain arguments; returns them normalised.

    Raises:
        ValueError: naming the argument (``samples``, ``seed``, ``backends``).
    """
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < MIN_SAMPLES:
        raise ValueError(f"samples: must be an integer >= {MIN_SAMPLES}, got {samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
    if isinstance(backends, str):
        backends = [b.strip() for b in backends.split(",") if b.strip()]
    backends = tuple(backends)
    bad = [b for b in backends if b not in VERIFY_BACKENDS]
    if not backends or bad or len(set(backends)) != len(backends):
        raise ValueError(f"backends: choose distinct names from {', '.join(VERIFY_BACKENDS)}, got {list(backends)!r}")
    return int(samples), int(seed), backends


def verify(spec, *, samples: int = 2000, seed: int = 0, stream: str = RANDOM_STREAM, data=None,
           backends=("rtl", "hls"), schedule: str | None = None, staleness=None, timing: str | None = None,
           waves: bool = False, progress: bool = False, top: str | None = None, theta=None,
           formal_dir=None, equivalence: float = 0, channels: int | None = None) -> VerifyReport:
    """Verify the hardware of ``spec`` against the golden model (see the module docstring).

    Args:
        spec: a :class:`~onchip.spec.LearnerSpec`, a preset name or a TOML spec file.
        samples: stream length N (>= :data:`MIN_SAMPLES`).
        seed: seeds the stream and the bench's random stalls.
        stream: ``"random"`` (:func:`random_stream`: corner cases) or a task name of
            :data:`onchip.tasks.TASKS` (its stream quantized to the spec's formats).
        data: readout shots file for ``stream="qubit-readout"``.
        backends: any of :data:`VERIFY_BACKENDS` (or one comma-separated string).
        schedule: override of the spec's schedule, as ``onchip generate --schedule``.
        staleness: override, as ``--staleness``: an integer or ``"min"``.
        timing: override, as ``--timing``: ``"compact"`` or ``"fast"``.
        channels: override, as ``--channels``: N > 1 runs the RTL bench and the HLS C simulation on
            one random channel order (:func:`verify_channels`) against the golden model per channel.
        waves: dump the bench's protocol job as FST (VCD without the LZ4 headers); a second,
            traced Verilator build. The dump path is in the report and in every mismatch.
        progress: print one line per stage to stderr and show the HLS progress bar.
        top: the module name the RTL is generated under (:func:`onchip.hw.names.check_top`).
        theta: raw initial parameters (P,), e.g. an imported network: the RTL's reset values and
            the golden model's and the HLS C simulation's start (default: the spec's).
        formal_dir: where the ``formal`` backend's SymbiYosys jobs run (logs, counterexample
            traces); a new temporary folder when None. The report's ``formal_dir``.
        equivalence: seconds the ``formal`` backend may spend comparing the ``fast`` and
            ``compact`` timing plans, for each of its two hosts (any commands, reads only; 0: not
            compared).

    Returns:
        :class:`VerifyReport`; its ``ok`` is True when every check that ran matched. A mismatch
        is a failed case naming the first differing sample (its index, raw inputs and target,
        both outputs, the bench cycle) or parameter; a tool failure an ``error`` case; a tool
        that is not installed a ``skipped`` case. Nothing is raised for those.

    Raises:
        ValueError: a bad argument; the message starts with the argument's name (``samples:``,
            ``stream:``, ``data:``, ``backends:``, ``seed:``) or ``--schedule`` / ``--staleness`` / ``--timing`` / ``--top``,
            or is the spec's own error.
        FileNotFoundError: ``data`` does not exist.
    """
    from .commands.generate import resolve_spec
    from .hw.names import DEFAULT_TOP, check_top

    samples, seed, backends = check_arguments(samples, seed, backends)
    top = DEFAULT_TOP if top is None else top
    check_top(top)
    if isinstance(equivalence, bool) or not isinstance(equivalence, (int, float, np.integer, np.floating)) \
            or not np.isfinite(equivalence) or equivalence < 0:
        raise ValueError(f"equivalence: must be a number of seconds >= 0, got {equivalence!r}")
    spec = resolve_spec(spec, schedule, staleness, timing, channels, rtl=True)
    if theta is not None:
        from .hw.interface import channel_parameters
        from .model.golden import check_parameters

        try:
            theta = check_parameters(spec, theta) if spec.channels == 1 else channel_parameters(spec, theta)
        except ValueError as exc:
            raise ValueError(f"theta: {exc}") from None
    x, y = make_verify_stream(spec, stream, samples, seed, data)
    report = VerifyReport(spec=spec, samples=samples, seed=seed, stream=stream, backends=backends)

    def log(text: str) -> None:
        if progress:
            print(f"onchip verify: {text}", file=sys.stderr, flush=True)

    design = None
    for backend in backends:
        why = _available(backend)
        if why:
            report.cases.append(Case(backend, "skipped", f"not run: {why}"))
            continue
        t0 = time.perf_counter()
        try:
            if backend == "hls":
                report.cases += _hls_cases(spec, x, y, progress=progress, log=log, theta=theta, top=top, seed=seed)
            elif backend == "formal":
                import tempfile

                report.formal_dir = str(formal_dir or tempfile.mkdtemp(prefix="onchip-formal-"))
                try:
                    report.cases += _formal_cases(spec, top=top, theta=theta, folder=report.formal_dir,
                                                  equivalence=equivalence, log=log)
                except BaseException as exc:
                    if formal_dir is None and not isinstance(exc, Exception):
                        # interrupted: no report will name the folder made for it, so it goes
                        # (a tool's failure keeps it: the report points at its logs)
                        shutil.rmtree(report.formal_dir, ignore_errors=True)
                    raise
            else:
                if design is None:
                    from .hw.sim import cached_design

                    log(f"generating the RTL of {report.label}")
                    design = cached_design(spec, top) if theta is None else cached_design(spec, top, theta=theta)
                if spec.channels > 1:
                    report.cases += _channel_bench_cases(spec, design, x, y, backend=backend, seed=seed, log=log,
                                                         theta=theta)
                    continue
                cases, dump = _bench_cases(spec, design, x, y, backend=backend, seed=seed, waves=waves, log=log,
                                           theta=theta)
                report.cases += cases
                report.waves = report.waves or dump
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:  # ToolError, a failed cocotb job or build
            report.cases.append(Case(f"{backend}.run", "error", f"{type(exc).__name__}: {exc}",
                                     time.perf_counter() - t0))
    return report


def assert_verified(spec, **kwargs) -> VerifyReport:
    """pytest helper: :func:`verify` ``spec`` and fail the calling test unless it verified.

    ``kwargs`` are :func:`verify`'s. Skips the test (``pytest.skip``) when every check was skipped
    because no tool is installed; raises ``AssertionError`` with :meth:`VerifyReport.summary` on a
    mismatch or a tool failure. Returns the report when it passed.

    Example::

        import onchip

        def test_my_learner_hardware():
            onchip.assert_verified("my_learner.toml", samples=500)
    """
    report = verify(spec, **kwargs)
    if not report.ok and report.count("passed") == 0 and report.count("skipped") == len(report.cases):
        import pytest

        pytest.skip(report.summary())
    if not report.ok:
        raise AssertionError(report.summary())
    return report
