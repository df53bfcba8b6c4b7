"""The cycle counts and routed figures docs/spec.md and docs/hardware.md quote in their prose equal
what the generator reports (``onchip.hw.generate(...).info``) and what the timing sweep measured
(``sweeps/timing/results.json``): each sentence is found by its wording and its numbers read back."""

import json
import re
from pathlib import Path

import pytest

from onchip.hw import generate
from onchip.spec import PRESETS

ROOT = Path(__file__).resolve().parents[1]


def _page(name: str) -> str:
    return " ".join((ROOT / "docs" / name).read_text().split())  # sentences wrap: one space between words


def _info(preset: str, timing: str, schedule: str = "sequential") -> dict:
    return generate(PRESETS[preset].replace(timing=timing, schedule=schedule), axis=False).info


def _numbers(pattern: str, text: str) -> list[tuple[int, ...]]:
    found = re.findall(pattern, text)
    assert found, f"no sentence matches {pattern!r}"
    return [tuple(int(v) for v in (m if isinstance(m, tuple) else (m,))) for m in found]


@pytest.mark.parametrize("page", ["spec.md", "hardware.md"])
def test_kan_paper_compact_to_fast_cycles(page):
    compact, fast = _info("kan-paper", "compact"), _info("kan-paper", "fast")
    want = (compact["latency_cycles_update"], fast["latency_cycles_update"],
            compact["initiation_interval"], fast["initiation_interval"])
    for got in _numbers(r"kan-paper:? update (\d+) -> (\d+)(?: cycles)?, sequential II (\d+) -> (\d+)", _page(page)):
        assert got == want, (page, got, want)


def test_kan_paper_pipelined_minimum_staleness():
    want = (_info("kan-paper", "compact")["min_staleness"], _info("kan-paper", "fast")["min_staleness"])
    assert _numbers(r"pipelined minimum staleness (\d+) -> (\d+)", _page("spec.md")) == [want]


def test_predict_first_against_fast_cycles():
    pf, fast = _info("kan-readout", "predict-first"), _info("kan-readout", "fast")
    got = _numbers(r"kan-readout: (\d+) cycles to the prediction against fast's (\d+), the update committed after "
                   r"(\d+) against fast's (\d+), sequential II (\d+), pipelined minimum staleness (\d+)",
                   _page("spec.md"))
    assert got == [(pf["latency_cycles_prediction"], fast["latency_cycles_prediction"], pf["latency_cycles_update"],
                    fast["latency_cycles_update"], pf["initiation_interval"], pf["min_staleness"])]
    got = _numbers(r"after (\d+) cycles \(kan-readout; `fast`: (\d+)\)", _page("hardware.md"))
    assert got == [(pf["latency_cycles_prediction"], fast["latency_cycles_prediction"])]


def test_kan_paper_routed_update_time_is_the_sweeps():
    rows = json.loads((ROOT / "sweeps" / "timing" / "results.json").read_text())
    row = next(r for r in rows if (r["preset"], r["timing"], r["schedule"]) == ("kan-paper", "compact", "sequential"))
    text = _page("hardware.md")
    found = re.findall(r"commits its update (\d+) cycles after accepting the sample.*?that is ([\d.]+) ns at "
                       r'`timing = "compact"` \(([\d.]+) MHz, sequential\)', text)
    assert len(found) == 1, found
    cycles, ns, mhz = found[0]
    assert int(cycles) == row["latency_cycles_update"] == _info("kan-paper", "compact")["latency_cycles_update"]
    assert (ns, mhz) == (f"{row['step_ns']:.1f}", f"{row['fmax_mhz']:.1f}")


def test_readme_two_layer_kan_row_is_the_sweeps():
    rows = json.loads((ROOT / "sweeps" / "timing" / "results.json").read_text())
    row = next(r for r in rows if (r["preset"], r["timing"], r["schedule"]) == ("user-kan-2-3-1", "fast", "sequential"))
    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.findall(r"2->3->1\) at 150 ns per step \| ([\d.]+) ns after routing on the ECP5 \((\d+) cycles at "
                       r"([\d.]+) MHz", text)
    assert found == [(f"{row['step_ns']:.1f}", str(row["latency_cycles_update"]), f"{row['fmax_mhz']:.1f}")]
