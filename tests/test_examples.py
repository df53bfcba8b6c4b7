"""The scripts in examples/ run with --quick and print (and write) what they measured.

Each runs in a subprocess that inherits the cache variables (ONCHIP_CACHE, NUMBA_CACHE_DIR):
with warm caches the file takes about two minutes; a cold numba cache adds minutes to the first.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

def run_example(name: str, *args: str, timeout: float = 900) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), "--quick", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def value(text: str, key: str) -> str:
    m = re.search(rf"^{re.escape(key)}: (\S+)", text, re.MULTILINE)
    assert m, f"no {key!r} line in:\n{text}"
    return m.group(1)


def test_every_example_is_tested():
    # three_learners_verilator.py runs as a block of docs/integrate.md (tests/test_docs_integrate_three.py)
    tested = {"readout_adapt.py", "hardware_report.py", "rtl_vs_golden.py", "local_sweep.py", "pretrain_then_adapt.py",
              "three_learners_verilator.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_readout_adapt(tmp_path):
    out = run_example("readout_adapt.py", "--out", str(tmp_path))
    png = tmp_path / "rolling_fidelity.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert 0.9 < float(value(out, "assignment fidelity, whole stream")) <= 1.0
    assert 0.9 < float(value(out, "final rolling fidelity (last 1000 shots)")) <= 1.0


def test_hardware_report(tmp_path):
    out = run_example("hardware_report.py", "--family", "ecp5", "--out", str(tmp_path / "hw"))  # a small KAN
    numbers = {k: int(value(out, k)) for k in ("latency_cycles_prediction", "latency_cycles_update",
                                               "initiation_interval", "lut", "ff", "dsp", "bram")}
    assert all(numbers[k] > 0 for k in ("latency_cycles_prediction", "latency_cycles_update",
                                        "initiation_interval", "lut", "ff")), numbers
    assert numbers["dsp"] >= 0 and numbers["bram"] >= 0
    assert numbers["latency_cycles_prediction"] <= numbers["latency_cycles_update"]
    report = json.loads((tmp_path / "hw" / "synth" / "report.json").read_text())
    verilog = (tmp_path / "hw" / "onchip_learner.v").read_text()
    assert verilog.startswith("// onchip_learner: ") and "\nmodule onchip_learner(" in verilog
    assert f"// Timing plan: {report['timing']} (" in verilog  # the report names the plan it measured


def test_rtl_vs_golden(tmp_path):
    out = run_example("rtl_vs_golden.py", "--out", str(tmp_path))
    assert "rtl vs golden: raw predictions and parameters identical (prediction mismatches: 0" in out
    assert "hls vs golden: raw predictions and parameters identical (prediction mismatches: 0" in out
    assert "all backends identical to the golden model" in out


@pytest.mark.filterwarnings("ignore")
def test_local_sweep(tmp_path):
    out = run_example("local_sweep.py", "--out", str(tmp_path))
    assert "Dask scheduler:" in out
    assert re.search(r"^points: 2  ok: 2 ", out, re.MULTILINE), out
    rows = (tmp_path / "sweep" / "results.csv").read_text().strip().splitlines()
    assert len(rows) == 3 and "golden_mse" in rows[0]
    assert (tmp_path / "sweep" / "mse.png").stat().st_size > 0


def test_pretrain_then_adapt(tmp_path):
    pytest.importorskip("qkeras")
    pytest.importorskip("kan")
    out = run_example("pretrain_then_adapt.py", "--out", str(tmp_path))
    for model in ("kan", "mlp"):
        assert f"rtl == golden ({model}, real shots, imported, 300 shots): True" in out
        for source in ("real shots", "built-in"):
            fid = {start: float(re.search(rf"^{source} / {model} / {re.escape(start)}: fidelity ([0-9.]+),",
                                          out, re.MULTILINE).group(1))
                   for start in ("imported", "onchip init", "imported, frozen")}
            # learning recovers from the drift; the frozen import cannot
            assert fid["imported"] > 0.95 and fid["onchip init"] > 0.95 and fid["imported, frozen"] < 0.85, fid
    rows = (tmp_path / "results.md").read_text().splitlines()
    assert sum(r.startswith("| ") for r in rows) == 1 + 2 * 7  # header, 2 sources x (2 models x 3 starts + static)
