"""Sweeps: grid expansion, per-point caching and resume, failure isolation, local and Dask executors."""

import csv
import json

import numpy as np
import pytest

from onchip import sweep, tasks
from onchip.run import run_backend
from onchip.spec import PRESETS, Formats


def _definition(tmp_path, extra_grid=None):
    d = {
        "sweep": {"name": "t", "compute": ["accuracy"]},
        "accuracy": {"task": "drift-regression", "samples": 300, "seed": 3, "backends": ["float"]},
        # the float twin starts from the initial weights quantized to each width
        "grid": [{"preset": "mlp-regression", "format_width": [8, 16]}],
        "plot": [{"file": "mse.png", "x": "format_width", "y": ["float_mse"], "series": ["preset"]}],
    }
    if extra_grid:
        d["grid"].append(extra_grid)
    return d


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_expand_special_axes_build_the_specs():
    d = {"sweep": {"compute": ["accuracy"]},
         "grid": [{"preset": "mlp-readout", "hidden": [3, 5]},
                  {"preset": "kan-regression", "format_width": 8, "format_int_bits": 4}]}
    pts = sweep.expand(d)
    assert [p["spec"]["widths"] for p in pts[:2]] == [[2, 3, 1], [2, 5, 1]]
    kan = pts[2]["spec"]
    assert kan["formats"] == Formats.uniform(8, 4).as_dict()
    # ap_fixed<8,4>: 4 fractional bits; cell width 4/8 = 2^-1 -> 3 bits of position in a cell
    assert kan["basis_table_bits"] == 3
    assert len({p["key"] for p in pts}) == 3


def test_widths_list_is_one_value_and_a_list_of_lists_an_axis():
    d = {"sweep": {"compute": ["accuracy"]},
         "grid": [{"kind": "mlp", "widths": [1, 4, 1]}, {"kind": "mlp", "widths": [[1, 2, 1], [1, 6, 1]]}]}
    assert [p["spec"]["widths"] for p in sweep.expand(d)] == [[1, 4, 1], [1, 2, 1], [1, 6, 1]]


def test_bad_definitions_are_rejected_before_running(tmp_path):
    with pytest.raises(ValueError, match="sweep.compute"):
        sweep.validate_definition({"sweep": {"compute": ["speed"]}, "grid": [{"preset": "kan-regression"}]})
    with pytest.raises(ValueError, match=r"\[\[grid\]\]"):
        sweep.validate_definition({"sweep": {"compute": ["accuracy"]}})
    with pytest.raises(ValueError, match="grid_size"):
        sweep.validate_definition({"sweep": {"compute": ["accuracy"]},
                                   "grid": [{"preset": "kan-regression", "grid_size": [3]}]})
    with pytest.raises(ValueError, match="jobs"):
        sweep.run_sweep(_definition(tmp_path), tmp_path / "o", jobs=0)
    with pytest.raises(FileNotFoundError):
        sweep.load_definition(tmp_path / "none.toml")
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    d = _definition(tmp, extra_grid={"task": "qubit-readout", "data": str(tmp / "missing.npy"),
                                     "preset": "kan-readout"})
    records = sweep.run_sweep(d, tmp / "out", cache=tmp / "cache", progress=False)
    return tmp, d, records


def test_points_match_an_independent_run_and_failures_are_recorded(local_run):
    tmp, d, records = local_run
    assert [r["status"] for r in records] == ["ok", "ok", "error"]
    assert "FileNotFoundError" in records[2]["error"] or "missing.npy" in records[2]["error"]
    stream = tasks.make_stream("drift-regression", samples=300, seed=3)
    for rec, width in zip(records[:2], (8, 16)):
        spec = sweep.point_spec({"preset": "mlp-regression", "format_width": width}, {})
        ref = tasks.evaluate(stream, run_backend("float", spec, stream.x, stream.y, progress=False).predictions)
        assert rec["results"]["float_mse"] == ref["mse"]
    assert records[0]["results"]["float_mse"] != records[1]["results"]["float_mse"]
    rows = _rows(tmp / "out" / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "error"]
    assert float(rows[1]["float_mse"]) == pytest.approx(records[1]["results"]["float_mse"])
    assert (tmp / "out" / "mse.png").stat().st_size > 0
    assert len(json.loads((tmp / "out" / "points.json").read_text())) == 3


def test_resume_reads_finished_points_from_the_cache(local_run):
    tmp, d, records = local_run
    # overwrite a cached result with a sentinel: a resumed sweep must report it, not recompute
    f = sweep.record_path(tmp / "cache", records[0]["key"])
    rec = json.loads(f.read_text())
    rec["results"]["float_mse"] = 123.0
    f.write_text(json.dumps(rec))
    again = sweep.run_sweep(d, tmp / "out2", cache=tmp / "cache", progress=False)
    assert again[0]["results"]["float_mse"] == 123.0
    assert again[2]["status"] == "error"  # a failed point is not retried by default
    assert [r["key"] for r in again] == [r["key"] for r in records]


def test_limit_leaves_points_pending(tmp_path):
    recs = sweep.run_sweep(_definition(tmp_path), tmp_path / "o", cache=tmp_path / "c", progress=False, limit=1)
    assert [r["status"] for r in recs] == ["ok", "pending"]


def test_key_depends_on_spec_and_settings():
    d = _definition(None)
    a = sweep.expand(d)
    d2 = json.loads(json.dumps(d))
    d2["accuracy"]["samples"] = 301
    b = sweep.expand(d2)
    assert a[0]["key"] == sweep.expand(d)[0]["key"]
    assert a[0]["key"] != b[0]["key"] and a[0]["key"] != a[1]["key"]


def test_dask_local_cluster_gives_the_same_table(local_run, tmp_path):
    distributed = pytest.importorskip("distributed")
    _, d, records = local_run
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        got = sweep.run_sweep(d, tmp_path / "out", cache=tmp_path / "cache", progress=False,
                              scheduler=cluster.scheduler_address)
    assert [r["status"] for r in got] == ["ok", "ok", "error"]
    for a, b in zip(got[:2], records[:2]):
        assert a["results"]["float_mse"] == b["results"]["float_mse"]


def test_software_step_time_needs_enough_samples():
    spec = PRESETS["kan-regression"]
    x = np.zeros((150, 1))
    y = np.zeros((150, 1))
    assert sweep.software_step_seconds(spec, x, y, 100) > 0
    with pytest.raises(ValueError, match="needs 150 samples"):
        sweep.software_step_seconds(spec, x[:149], y[:149], 100)


def test_software_latency_ratio_is_measured_in_the_driver():
    d = {"sweep": {"compute": ["latency"]}, "latency": {"software_samples": 100},
         "grid": [{"preset": "kan-regression"}]}
    (point,) = sweep.expand(d)
    hw = {"hw_step_ns_at_clock": 25.0, "hw_step_ns_fmax": 125.0}
    rec = {"key": point["key"], "params": {}, "status": "ok", "error": "", "seconds": 0.0, "results": dict(hw)}
    (out,) = sweep.add_software_latency([rec], [point])
    r = out["results"]
    assert r["sw_step_ns"] > 0
    assert r["sw_over_hw_at_clock"] == pytest.approx(r["sw_step_ns"] / 25.0)
    assert r["sw_over_hw_fmax"] == pytest.approx(r["sw_step_ns"] / 125.0)
    assert rec["results"] == hw  # the cached record is not modified
