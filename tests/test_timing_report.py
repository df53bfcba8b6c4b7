"""The timing sweep's tables (sweeps/timing/timing_sweep.py): the READMEs carry the tables its
report writes from results.json, and the writer never half-edits a file."""

import json
from pathlib import Path

import pytest
from onchip.flow import fit
from support import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ts():
    return load_script("sweeps/timing/timing_sweep.py")


def test_family_and_preset_tables_are_the_ones_results_json_gives(ts):
    rows = json.loads((ROOT / "sweeps" / "timing" / "results.json").read_text())
    page = (ROOT / "sweeps" / "timing" / "README.md").read_text()
    block = page.split(ts.FAMILY_BEGIN, 1)[1].split(ts.FAMILY_END, 1)[0]
    assert block.strip() == ts.family_table(rows).strip()
    # every member has its line
    assert all(f"| {m} |" in block for m in ts.MEMBERS)
    readme = (ROOT / "README.md").read_text()
    presets = readme.split(ts.PRESET_BEGIN, 1)[1].split(ts.PRESET_END, 1)[0]
    assert presets.strip() == ts.preset_table(rows).strip()
    assert all(f"| {p} | {s}" in presets for p in ts.PRESETS for s in ts.SCHEDULES)


def test_preset_table_cells(ts):
    placed = {"preset": "kan-paper", "timing": "fast", "schedule": "sequential", "latency_cycles_prediction": 6,
              "latency_cycles_update": 9, "initiation_interval": 7, "fmax_mhz": 120.0, "step_ns": 75.0,
              "ii_ns": 58.33, "staleness": 0, "ecp5_lut": 100, "ecp5_ff": 50, "ecp5_dsp": 8, "seeds": [1, 2, 3]}
    table = ts.preset_table([placed])
    # 6 cycles at 120 MHz are 50.0 ns; a point never placed says so instead of a number
    assert "| kan-paper | sequential, `fast` | 120.0 | 6 / 50.0 | 9 / 75.0 | 7 / 58.3 | 100 / 50 / 8 |" in table
    assert "| kan-paper | pipelined, `fast` | not placed |" in table
    assert "\u2020" not in table
    # a row placed at fewer than 3 seeds carries the dagger, and the table says what it means
    table = ts.preset_table([{**placed, "seeds": [1]}])
    assert "| kan-paper | sequential, `fast` | 120.0 \u2020 | 6 / 50.0 |" in table
    assert table.splitlines()[-1] == "\u2020 placed at fewer than 3 placer seeds (the others: best of seeds 1-3)."


def test_family_table_cells(ts):
    placed = {"preset": "kan-x", "timing": "fast", "schedule": "sequential", "latency_cycles_update": 9,
              "initiation_interval": 7, "fmax_mhz": 120.0, "step_ns": 75.0, "ii_ns": 58.3, "seeds": [1, 2, 3],
              "ecp5_lut": 100, "ecp5_dsp": 8}
    assert ts._member_cell(placed, "seq") == "9 cycles, 120.0 MHz, 75.0 ns"
    assert ts._member_cell({**placed, "seeds": [1]}, "pip").endswith("\u2020")
    # the refusals as onchip.flow.fit words them: packed, and from the DSP instances alone
    packed = fit.verdict_message({"device": "LFE5U-85F",
                                  "over_budget": fit.over_budget({"MULT18X18D": {"used": 200, "available": 156}})})
    over = {"note": packed, "latency_cycles_update": 9, "seeds": []}
    assert ts._member_cell(over, "seq") == "no fit: 200 DSP of 156"
    with pytest.raises(fit.DesignTooLarge) as instances:
        fit.check_lattice_dsp("".join(f"  MULT18X18D m{i} ();\n" for i in range(160)), "top", "LFE5U-85F", "ecp5")
    assert ts._member_cell({**over, "note": str(instances.value)}, "seq") == "no fit: at least 160 DSP of 156"
    serial = {"note": "--schedule pipelined: datapath='serial' is built for the sequential schedule", "seeds": []}
    assert ts._member_cell(serial, "pip") == "sequential only"
    assert ts._member_cell(None, "ns") == "not run"


def test_write_family_table_needs_both_markers_and_keeps_the_rest(ts, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\nbefore\n\n{ts.FAMILY_BEGIN}\n\nold\n\n{ts.FAMILY_END}\n\nafter\n")
    ts.write_family_table("| new |", readme)
    assert readme.read_text() == f"# t\n\nbefore\n\n{ts.FAMILY_BEGIN}\n\n| new |\n\n{ts.FAMILY_END}\n\nafter\n"
    lone = tmp_path / "lone.md"
    lone.write_text(f"{ts.FAMILY_BEGIN}\nold\n")
    with pytest.raises(ValueError, match="markers"):
        ts.write_family_table("| new |", lone)
    assert lone.read_text() == f"{ts.FAMILY_BEGIN}\nold\n"


def test_anchors_table_sets_the_presets_and_predict_first_beside_the_anchors(ts):
    placed = {"preset": "kan-readout", "timing": "predict-first", "schedule": "sequential",
              "latency_cycles_prediction": 3, "latency_cycles_update": 7, "initiation_interval": 6,
              "fmax_mhz": 75.0, "step_ns": 93.33, "latency_ns_prediction": 40.0, "seeds": [1, 2, 3]}
    table = ts.anchors_table([placed, {**placed, "preset": "kan-paper", "timing": "fast", "seeds": [1]}])
    assert "| QICK + hls4ml readout network (arXiv 2501.14663) | RFSoC | 32 ns | - (inference only) | - | no |" in table
    assert "< 100 ns | 200 MHz | yes |" in table  # the seed paper's claim
    # 3 cycles at 75 MHz: 40.0 ns to the prediction, 7 cycles 93.3 ns to the update
    assert ("| onchip kan-readout, sequential, `predict-first` | ECP5 LFE5U-85F speed 6, routed | 40.0 ns (3 cycles) "
            "| 93.3 ns (7 cycles) | 75.0 MHz | yes |") in table
    assert "| onchip kan-paper, sequential, `fast` | ECP5 LFE5U-85F speed 6, routed | 40.0 ns (3 cycles) " \
           "| 93.3 ns (7 cycles) | 75.0 MHz \u2020 | yes |" in table
    assert "| onchip mlp-readout, sequential, `fast` | ECP5 LFE5U-85F speed 6, routed | not placed |" in table
    assert ts._member_cell(placed, "pred") == "3 cycles, 40.0 ns"


def test_anchors_table_in_the_results_page_is_the_one_results_json_gives(ts):
    rows = json.loads((ROOT / "sweeps" / "timing" / "results.json").read_text())
    page = (ROOT / "docs" / "results.md").read_text()
    block = page.split(ts.ANCHORS_BEGIN, 1)[1].split(ts.ANCHORS_END, 1)[0]
    assert block.strip() == ts.anchors_table(rows).strip()
    assert "QICK + hls4ml" in block and "`predict-first`" in block


@pytest.fixture(scope="module")
def ice40():
    return load_script("sweeps/timing/ice40_sweep.py")


def test_ice40_table_is_the_one_its_results_give(ice40):
    rows = json.loads((ROOT / "sweeps" / "timing" / "ice40_results.json").read_text())
    page = (ROOT / "docs" / "results.md").read_text()
    block = page.split(ice40.BEGIN, 1)[1].split(ice40.END, 1)[0]
    assert block.strip() == ice40.table(rows).strip()
    assert (ROOT / "sweeps" / "timing" / "ice40.md").read_text().strip().endswith(block.strip())
    assert {(r["preset"], r["timing"]) for r in rows} == {(p, t) for p in ice40.presets() for t in ice40.TIMINGS}


def test_ice40_rows_name_the_resource_short_and_by_how_much(ice40):
    row = {"preset": "kan-x", "timing": "compact", "latency_cycles_prediction": 4, "latency_cycles_update": 5}
    with pytest.raises(fit.DesignTooLarge) as dsp:
        fit.check_lattice_dsp("".join(f"  SB_MAC16 m{i} ();\n" for i in range(11)), "top", "iCE40UP5K", "ice40")
    got = ice40._row({**row, "runs": {"1": {"does_not_fit": str(dsp.value), "date": "2026-12-07"}}})
    assert "no fit: DSP (SB_MAC16): at least 11 needed of 8, 3 over" in got
    placed = {"fmax_mhz": 40.0, "lut": 3000, "dsp": 8, "bram": 4, "date": "2026-12-07",
              "critical_path": {"start": "a", "end": "b", "total_ns": 25.0, "routing_ns": 12.0}}
    # 4 and 5 cycles at 40 MHz: 100 and 125 ns; the best of the seeds placed
    got = ice40._row({**row, "runs": {"1": placed, "2": {**placed, "fmax_mhz": 20.0}}})
    assert "| 40.0 MHz (seeds 1,2) | 100.0 | 125.0 | 3000 / 8 / 4 |" in got
