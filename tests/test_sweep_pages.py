"""Results pages whose tables are written from a sweep's results.csv (``[[table]]``, ``onchip sweep --report``):
every committed page holds what its committed CSV gives, and a CSV that moves makes the page stale."""

import csv
import shutil
from pathlib import Path

import pytest

from onchip.sweep.pages import markers, render_tables, stale_tables, write_pages
from onchip.sweep.schema import load_definition, validate_definition

ROOT = Path(__file__).resolve().parents[1]
# every sweep definition that writes tables: sweeps/NAME/sweep.toml into sweeps/NAME/results/,
# another definition sweeps/NAME/OTHER.toml into sweeps/NAME/OTHER/
PAGED = sorted(str(p.relative_to(ROOT / "sweeps")) for p in (ROOT / "sweeps").glob("*/*.toml")
               if "[sweep]" in p.read_text() and load_definition(p).get("table"))


def _results(definition: Path) -> Path:
    return definition.parent / ("results" if definition.stem == "sweep" else definition.stem)


def test_the_hand_copied_pages_are_generated():
    assert {"latency/sweep.toml", "quantization/sweep.toml", "resources/sweep.toml",
            "resources/reset_rom.toml"} <= set(PAGED)


@pytest.mark.parametrize("name", PAGED)
def test_every_page_holds_what_its_csv_gives(name):
    path = ROOT / "sweeps" / name
    stale = stale_tables(load_definition(path), _results(path) / "results.csv")
    out = _results(path).relative_to(ROOT)
    assert not stale, f"{stale}: run onchip sweep sweeps/{name} --out {out} --report"


def _copy(tmp_path, name):
    """The sweep's definition, page and CSV in tmp_path: (definition loaded from there, CSV path)."""
    src = ROOT / "sweeps" / name
    shutil.copy(src / "sweep.toml", tmp_path / "sweep.toml")
    shutil.copy(src / "README.md", tmp_path / "README.md")
    (tmp_path / "results").mkdir()
    shutil.copy(src / "results" / "results.csv", tmp_path / "results" / "results.csv")
    d = load_definition(tmp_path / "sweep.toml")
    d["_dir"] = str(tmp_path)
    return d, tmp_path / "results" / "results.csv"


def _set(csv_path, where: dict, column: str, value: str) -> None:
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    hit = [r for r in rows if all(r[k] == v for k, v in where.items())]
    assert len(hit) == 1
    hit[0][column] = value
    with open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_a_moved_figure_makes_the_page_stale_until_it_is_written(tmp_path):
    d, csv_path = _copy(tmp_path, "resources")
    assert stale_tables(d, csv_path) == []
    _set(csv_path, {"preset": "kan-readout", "datapath": "parallel", "grid_size": "64"}, "logic_excl_params", "2852")
    assert stale_tables(d, csv_path) == [f"{tmp_path / 'README.md'}: table resources",
                                         f"{tmp_path / 'README.md'}: table kan-growth"]
    write_pages(d, csv_path)
    assert stale_tables(d, csv_path) == []
    page = (tmp_path / "README.md").read_text()
    assert "| parallel | 9.6x (14 -> 134) | +20.0% (2376 -> 2852) |" in page  # 2852 / 2376 - 1
    assert page.count("## Method") == 1  # the rest of the page is kept


def test_pivoted_rows_take_each_column_from_its_own_row(tmp_path):
    d, csv_path = _copy(tmp_path, "quantization")
    _set(csv_path, {"preset": "mlp-readout", "format_width": "8"}, "golden_fidelity", "0.5")
    row = next(line for line in render_tables(d, csv_path)["readout"].splitlines() if line.startswith("| 8 |"))
    assert row.split(" | ")[3].startswith("0.5000 (") and not row.split(" | ")[1].startswith("0.5000")


def test_a_compared_column_divides_and_subtracts_within_one_row(tmp_path):
    d, csv_path = _copy(tmp_path, "quantization")
    _set(csv_path, {"preset": "kan-regression", "format_width": "10"}, "golden_mse", "0.007")
    _set(csv_path, {"preset": "kan-regression", "format_width": "10"}, "float_mse", "0.002")
    _set(csv_path, {"preset": "kan-readout", "format_width": "10"}, "golden_fidelity", "0.9")
    _set(csv_path, {"preset": "kan-readout", "format_width": "10"}, "float_fidelity", "0.95")
    row = next(line for line in render_tables(d, csv_path)["versus-twin"].splitlines() if line.startswith("| 10 |"))
    cells = row.strip("| ").split(" | ")
    assert cells[1] == "3.50x" and cells[5] == "-5.00%", cells


def test_a_page_without_the_markers_is_refused_and_nothing_written(tmp_path):
    d, csv_path = _copy(tmp_path, "quantization")
    page = tmp_path / "README.md"
    text = page.read_text().replace(markers("readout")[1], "")
    page.write_text(text)
    with pytest.raises(ValueError, match="no marker lines for table 'readout'"):
        write_pages(d, csv_path)
    assert page.read_text() == text


@pytest.mark.parametrize("table, message", [
    ({"name": "t", "page": "README.md", "columns": [{"head": "a", "valeu": "{x}"}]}, r"unknown key\(s\): valeu \(did you mean value"),
    ({"name": "t", "page": "README.md", "columns": [{"head": "a", "value": "{x}", "range": "x"}]}, "exactly one of"),
    ({"name": "t", "page": "README.md", "columns": [{"head": "a", "change": "x", "from": {}}]}, "change needs from and to"),
    ({"name": "t", "columns": [{"head": "a", "value": "{x}"}]}, "needs page"),
    ({"name": "t", "page": "README.md", "columns": [{"head": "a", "compare": "x"}]}, r"compare needs two column names"),
])
def test_a_bad_table_is_refused_by_name(table, message):
    d = load_definition(ROOT / "sweeps" / "resources" / "sweep.toml")
    d["table"] = [table]
    with pytest.raises(ValueError, match=message):
        validate_definition(d)


def test_report_writes_the_pages_from_the_csv_and_computes_nothing(tmp_path):
    from onchip.cli import main

    d, csv_path = _copy(tmp_path, "latency")
    shutil.copy(ROOT / "sweeps" / "latency" / "results" / ".onchip-output", tmp_path / "results")  # as onchip wrote it
    committed = (tmp_path / "README.md").read_text()
    first, last = markers("latency")
    (tmp_path / "README.md").write_text(committed.split(first)[0] + first + "\n" + last + committed.split(last)[1])
    assert stale_tables(d, csv_path)
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "results"), "--report"]) == 0
    assert (tmp_path / "README.md").read_text() == committed
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [".onchip-output", "results.csv"]
