"""Sweeps: grid expansion, per-point caching and resume, failure isolation, local and Dask executors."""

import csv
import json
import math

import numpy as np
import pytest
import tomli_w

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
    with pytest.raises(ValueError, match=r"grid point \{\}: names no learner: give it \(or \[base\]\) a preset"):
        sweep.validate_definition({"sweep": {"compute": ["accuracy"]}, "grid": [{}]})
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


def test_a_plot_naming_no_column_of_the_table_is_refused_not_drawn_empty(local_run):
    tmp, d, _ = local_run
    bad = {**d, "plot": [{"file": "mse.png", "x": "format_width", "y": ["float_mes"], "series": ["preset"]}]}
    with pytest.raises(ValueError, match=r"\[\[plot\]\] mse.png: no column 'float_mes' in the table; its "
                                         r"columns: .*float_mse"):
        sweep.run_sweep(bad, tmp / "bad-plot", cache=tmp / "cache", progress=False)
    assert not (tmp / "bad-plot").exists()


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


def test_key_changes_with_the_computations_source(monkeypatch):
    # a record cached before the computations changed what it holds is computed again, not read
    from onchip.sweep import grid
    d = _definition(None)
    before = [p["key"] for p in sweep.expand(d)]
    assert grid.computations_digest() == grid.computations_digest() != ""
    monkeypatch.setattr(grid, "computations_digest", lambda: "edited")
    assert not set(before) & {p["key"] for p in sweep.expand(d)}


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


# -- failing loudly ---------------------------------------------------------------------------
def _write_toml(path, d):
    import tomli_w

    path.write_text(tomli_w.dumps(d))
    return path


def test_cli_exits_1_listing_failed_points_after_writing_the_table(local_run, tmp_path, capsys):
    from onchip.cli import main

    tmp, d, _ = local_run  # same definition and cache: the points are read back, not recomputed
    path = _write_toml(tmp_path / "sweep.toml", d)
    code = main(["sweep", str(path), "--out", str(tmp_path / "o"), "--cache", str(tmp / "cache"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert [r["status"] for r in _rows(tmp_path / "o" / "results.csv")] == ["ok", "ok", "error"]
    failed = [line for line in err.splitlines() if line.strip().startswith("failed")]
    assert len(failed) == 1
    assert "task=qubit-readout" in failed[0] and "preset=kan-readout" in failed[0] and "missing.npy" in failed[0]
    assert "Traceback" not in err

    # every point failing is a failure too
    only_bad = {**d, "grid": d["grid"][1:], "plot": []}
    path = _write_toml(tmp_path / "bad.toml", only_bad)
    assert main(["sweep", str(path), "--out", str(tmp_path / "b"), "--cache", str(tmp / "cache"), "--quiet"]) == 1
    assert [r["status"] for r in _rows(tmp_path / "b" / "results.csv")] == ["error"]


def test_data_paths_fill_in_environment_variables_and_refuse_unset_ones(tmp_path, monkeypatch):
    d = {"sweep": {"compute": ["accuracy"]},
         "grid": [{"preset": "kan-readout", "task": "qubit-readout",
                   "data": "${ONCHIP_TEST_DATA_DIR}/shots.npy"}]}
    monkeypatch.delenv("ONCHIP_TEST_DATA_DIR", raising=False)
    with pytest.raises(ValueError, match=r"accuracy\.data.*ONCHIP_TEST_DATA_DIR"):
        sweep.validate_definition(d)
    monkeypatch.setenv("ONCHIP_TEST_DATA_DIR", str(tmp_path))
    (point,) = sweep.expand(d)
    assert point["settings"]["accuracy"]["data"] == str(tmp_path / "shots.npy")


def test_quantization_sweep_points_at_its_data_without_unset_variables():
    from pathlib import Path

    definition = Path(__file__).resolve().parents[1] / "sweeps" / "quantization" / "sweep.toml"
    d = sweep.load_definition(definition)
    data = {p["settings"]["accuracy"]["data"] for p in sweep.expand(d)} - {None}
    assert len(data) == 1
    (path,) = data
    assert "$" not in path and path.endswith("qubit_readout/transmon_two_state_shots.npy")
    # the real shots ship with the tests
    assert Path(path).resolve() == (definition.parents[2] / "tests" / "data" / "qubit_readout"
                                    / "transmon_two_state_shots.npy").resolve()


def test_misspelled_grid_axis_is_an_unknown_spec_field():
    with pytest.raises(ValueError, match=r"unknown spec field\(s\): grid_sise \(did you mean grid_size\?\)"):
        sweep.validate_definition({"sweep": {"compute": ["accuracy"]},
                                   "grid": [{"preset": "kan-regression", "grid_sise": [4, 8]}]})
    with pytest.raises(ValueError, match=r"unknown spec field\(s\): lerning_rate \(did you mean learning_rate\?\)"):
        sweep.validate_definition({"sweep": {"compute": ["accuracy"]}, "base": {"lerning_rate": 0.5},
                                   "grid": [{"preset": "kan-regression"}]})


@pytest.mark.parametrize("extra, message", [
    ({"plott": [{"x": "grid_size", "y": "lut"}]}, r"sweep definition: unknown key\(s\): plott \(did you mean plot\?\)"),
    ({"sweep": {"compute": ["accuracy"], "nme": "x"}}, r"\[sweep\]: unknown key\(s\): nme \(did you mean name\?\)"),
    ({"sweep": {"computations": ["accuracy"]}}, r"\[sweep\]: unknown key\(s\): computations \(did you mean compute\?\)"),
    ({"accuracy": {"sampels": 100}}, r"\[accuracy\]: unknown key\(s\): sampels \(did you mean samples\?\)"),
    ({"latency": 3}, r"\[latency\] must be a table; got 3"),
    ({"plot": [{"x": "grid_size", "y": "lut", "serie": ["kind"]}]},
     r"\[\[plot\]\] 1: unknown key\(s\): serie \(did you mean series\?\)"),
    ({"plot": [{"x": "grid_size"}]}, r"\[\[plot\]\] 1: needs y"),
])
def test_a_misspelt_table_or_key_of_a_definition_is_refused_not_ignored(extra, message):
    """A name the reader would skip (a default used in its place, a plot never drawn) is refused,
    with the closest known name."""
    d = {"sweep": {"compute": ["accuracy"]}, "grid": [{"preset": "kan-regression"}], **extra}
    with pytest.raises(ValueError, match=message):
        sweep.validate_definition(d)
    sweep.validate_definition({  # the same names, spelt right (and columns the points compute)
        "sweep": {"compute": ["accuracy", "resources"], "name": "x"},
        "grid": [{"preset": "kan-regression", "grid_size": [4, 8]}], "accuracy": {"samples": 100}, "latency": {},
        "plot": [{"x": "grid_size", "y": "lut", "series": ["preset"]}]})


def test_example_sweep_definition_loads():
    from pathlib import Path

    d = sweep.load_definition(Path(__file__).resolve().parents[1] / "sweeps" / "example" / "sweep.toml")
    assert len(sweep.expand(d)) == 8


# -- a lost worker ----------------------------------------------------------------------------
def test_dask_worker_killed_mid_point_fails_only_that_point(tmp_path):
    import os
    import signal

    distributed = pytest.importorskip("distributed")
    import dask

    armed = tmp_path / "armed"  # the marked point kills its worker only while this file exists
    log = tmp_path / "log"      # one line per point evaluated

    # defined here, so it travels to the workers by value (cloudpickle)
    def _evaluate(state, config):
        import time as _time

        with open(config["log"], "a") as fh:
            fh.write(f"{config['n']}\n")
        if config["die"] and os.path.exists(config["armed"]):
            os.kill(os.getpid(), signal.SIGKILL)
        _time.sleep(1.0)  # healthy points are running on the other worker meanwhile
        return {"n_done": config["n"]}

    comp = sweep.Computation("die_test", {"die": False, "n": 0, "armed": str(armed), "log": str(log)},
                             lambda config: None, _evaluate, axes=("die", "n"))
    sweep.register_computation(comp)
    try:
        d = {"sweep": {"name": "kill", "compute": ["die_test"]},
             "grid": [{"preset": "kan-regression", "n": 0, "die": False},
                      {"preset": "kan-regression", "n": 1, "die": True},
                      {"preset": "kan-regression", "n": [2, 3], "die": False}]}
        armed.write_text("")
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as cluster:
                got = sweep.run_sweep(d, tmp_path / "out", cache=tmp_path / "cache", progress=False,
                                      scheduler=cluster.scheduler_address)
                assert [r["status"] for r in got] == ["ok", "error", "ok", "ok"]
                assert "KilledWorker" in got[1]["error"] and got[1]["error"].startswith("worker lost")
                assert [r["results"]["n_done"] for r in got if r["status"] == "ok"] == [0, 2, 3]
                assert [r["status"] for r in _rows(tmp_path / "out" / "results.csv")] == ["ok", "error", "ok", "ok"]
                # the lost point is not cached: a rerun computes it (and only it) again
                assert not sweep.record_path(tmp_path / "cache", got[1]["key"]).exists()
                armed.unlink()
                before = log.read_text().split()
                again = sweep.run_sweep(d, tmp_path / "out", cache=tmp_path / "cache", progress=False,
                                        scheduler=cluster.scheduler_address)
        assert [r["status"] for r in again] == ["ok"] * 4
        assert log.read_text().split()[len(before):] == ["1"]
    finally:
        sweep.COMPUTATIONS.pop("die_test", None)


def _die_if_marked(state, config):
    import os
    import signal

    if config["die"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"n_done": config["n"]}


def _no_check(config):
    pass


def test_local_worker_killed_mid_point_is_recorded_and_not_cached(tmp_path):
    sweep.register_computation(sweep.Computation("die_local", {"die": False, "n": 0}, _no_check,
                                                 _die_if_marked, axes=("die", "n")))
    try:
        d = {"sweep": {"compute": ["die_local"]},
             "grid": [{"preset": "kan-regression", "n": 0, "die": False},
                      {"preset": "kan-regression", "n": 1, "die": True}]}
        got = sweep.run_sweep(d, tmp_path / "out", cache=tmp_path / "cache", progress=False, jobs=1)
    finally:
        sweep.COMPUTATIONS.pop("die_local", None)
    assert [r["status"] for r in got] == ["ok", "error"], [r["error"] for r in got]
    assert got[1]["error"].startswith("worker lost: BrokenProcessPool")
    assert sweep.record_path(tmp_path / "cache", got[0]["key"]).exists()
    assert not sweep.record_path(tmp_path / "cache", got[1]["key"]).exists()


# -- numbers in a definition: a bool is not a number, NaN and infinities are refused ----------------
#: every numeric key of a definition: (table, key, bad value); spec fields in [[grid]] and in [base]
_SPEC_NUMBERS = [("grid_size", True), ("spline_order", True), ("basis_table_bits", True), ("staleness", True),
                 ("init_seed", True), ("learning_rate", True), ("init_scale", True), ("widths", [[True, True]]),
                 ("grid_range", [[True, 2.0]]), ("learning_rate", math.inf), ("learning_rate", math.nan),
                 ("init_scale", math.inf), ("grid_range", [[-math.inf, 2.0]]), ("grid_range", [[-2.0, math.nan]])]
SWEEP_NUMBERS = (
    [("grid", k, v) for k, v in _SPEC_NUMBERS] + [("base", k, v) for k, v in _SPEC_NUMBERS]
    + [("grid", k, True) for k in ("hidden", "format_width", "format_int_bits")]
    + [("grid", "hidden", 2.5), ("grid", "format_width", 8.0)]
    + [("pnr", "seed", True), ("latency", "software_samples", True), ("accuracy", "samples", True),
       ("accuracy", "seed", True)]
    + [("latency", "clock_mhz", v) for v in (True, math.inf, math.nan)]
)


def _numbers_definition(table, key, value):
    d = {"sweep": {"name": "n", "compute": ["accuracy", "latency", "pnr"]},
         "grid": [{"preset": "kan-regression"}, {"preset": "mlp-regression", "hidden": 4}]}
    if table in ("grid", "base"):
        d.setdefault(table, [{}] if table == "grid" else {})
        target = d["grid"][0] if table == "grid" else d["base"]
        # a list value is one grid value written as an axis of one; [base] holds the value itself
        target[key] = value[0] if table == "base" and isinstance(value, list) else value
    else:
        d[table] = {key: value}
    return d


@pytest.mark.parametrize("table, key, value",
                         [pytest.param(t, k, v, id=f"{t}.{k}={v}") for t, k, v in SWEEP_NUMBERS])
def test_a_bool_or_non_finite_number_in_a_sweep_definition_is_refused(table, key, value, tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(tomli_w.dumps(_numbers_definition(table, key, value)))
    with pytest.raises(ValueError) as info:
        sweep.load_definition(path)
    text = str(info.value)
    bad = value[0] if isinstance(value, list) else value
    bad = next(v for v in bad if isinstance(v, bool) or not math.isfinite(v)) if isinstance(bad, list) else bad
    shown = ("true" if bad else "false") if isinstance(bad, bool) else repr(bad)  # as the TOML file spells it
    assert "\n" not in text and key in text and shown in text, text


def test_onchip_sweep_refuses_a_non_finite_grid_range_in_one_line(tmp_path, capsys):
    from onchip.cli import main

    path = tmp_path / "sweep.toml"
    path.write_text('[sweep]\nname = "n"\ncompute = ["accuracy"]\n'
                    '[[grid]]\npreset = "kan-regression"\ngrid_range = [-inf, 2.0]\n')
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "grid_range[0] must be a finite number, got -inf" in err, err
    assert not (tmp_path / "out").exists()


def test_run_sweep_refuses_a_bool_limit(tmp_path):
    with pytest.raises(ValueError, match="limit must be a non-negative integer, got True"):
        sweep.run_sweep(_definition(tmp_path), tmp_path / "o", limit=True)
    assert not (tmp_path / "o").exists()


def test_grid_fields_of_an_mlp_point_keep_its_key_and_a_table_bits_default_is_still_chosen():
    d = {"sweep": {"compute": ["accuracy"]},
         "grid": [{"kind": ["kan", "mlp"], "widths": [1, 2, 1], "grid_size": 8, "grid_range": [-2.0, 2.0]}]}
    kan, mlp = sweep.expand(d)
    assert kan["spec"]["basis_table_bits"] == 6 and "grid_size" not in mlp["spec"]
    assert mlp["spec"] == PRESETS["mlp-regression"].replace(widths=(1, 2, 1), init_scale=0.1, staleness=4,
                                                            learning_rate=2.0**-4, name="").to_dict()


def test_a_backend_that_fails_fails_the_point_and_keeps_the_other_backends_figures(monkeypatch):
    import onchip.run

    real = onchip.run.run_backend

    def golden_fails(backend, *args, **kwargs):
        if backend == "golden":
            raise ValueError("golden broke\nsecond line")
        return real(backend, *args, **kwargs)

    monkeypatch.setattr(onchip.run, "run_backend", golden_fails)
    d = {"sweep": {"compute": ["accuracy"]},
         "accuracy": {"samples": 200, "backends": ["golden", "float"]},
         "grid": [{"preset": "kan-regression"}]}
    (point,) = sweep.expand(d)
    rec = sweep.evaluate_point(point)
    assert rec["status"] == "error"
    assert rec["error"] == "accuracy: golden: ValueError: golden broke"
    assert math.isnan(rec["results"]["golden_mse"]) and rec["results"]["golden_error"] == "golden broke"
    assert math.isfinite(rec["results"]["float_mse"])


@pytest.mark.parametrize("where", ["grid", "base"])
def test_accuracy_refuses_a_channels_spec_up_front_in_one_line(where, tmp_path, capsys):
    from onchip.cli import main

    d = {"sweep": {"compute": ["accuracy"]}, "grid": [{"preset": "kan-regression"}]}
    if where == "grid":
        d["grid"][0]["channels"] = [1, 3]
    else:
        d["base"] = {"channels": 3}
    path = _write_toml(tmp_path / "sweep.toml", d)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "accuracy: channels = 3: accuracy runs one task stream through one learner" in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()
    # the hardware computations take a channels axis
    d["sweep"]["compute"] = ["latency"]
    assert {p["spec"].get("channels", 1) for p in sweep.expand(d)} >= {3}


@pytest.mark.parametrize("table, value, message", [
    ("pnr", {"seed": -1}, "pnr.seed must be a non-negative integer, got -1"),
    ("grid", {"preset": "kan-regression", "grid_size": []}, "[[grid]] 1: axis grid_size is empty"),
    ("grid", {"preset": "kan-regression", "widths": []}, "[[grid]] 1: axis widths is empty"),
])
def test_a_bad_pnr_seed_or_an_empty_axis_is_refused_before_any_work(table, value, message, tmp_path, capsys):
    from onchip.cli import main

    d = {"sweep": {"compute": ["pnr"]}, "grid": [{"preset": "kan-regression"}]}
    if table == "grid":
        d["grid"] = [{"preset": "kan-regression"}, value]
        message = message.replace("1", "2", 1)
    else:
        d[table] = value
    path = _write_toml(tmp_path / "sweep.toml", d)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize("definition, table", [
    ("sweeps/quantization/sweep.toml", "sweeps/quantization/results/results.csv"),
    ("sweeps/resources/sweep.toml", "sweeps/resources/results/results.csv"),
    ("sweeps/resources/reset_rom.toml", "sweeps/resources/reset_rom/results.csv"),
    ("sweeps/latency/sweep.toml", "sweeps/latency/results/results.csv"),
])
def test_the_declared_columns_hold_every_column_a_committed_sweep_wrote(definition, table):
    from pathlib import Path

    from onchip.sweep.schema import table_columns

    root = Path(__file__).resolve().parents[1]
    d = sweep.load_definition(root / definition)  # its [[plot]]s pass the check before computing
    with open(root / table) as fh:
        written = set(next(csv.reader(fh)))
    assert written <= table_columns(d, sweep.expand(d))


def test_a_plot_column_no_point_computes_is_refused_before_computing(tmp_path, capsys):
    from onchip.cli import main

    d = {**_definition(tmp_path), "plot": [{"file": "a.png", "x": "grid_sise", "y": ["float_mse"]}]}
    with pytest.raises(ValueError, match=r"\[\[plot\]\] a.png: no column 'grid_sise' in the table; its columns: "
                                         r".*float_mse"):
        sweep.validate_definition(d)
    path = _write_toml(tmp_path / "sweep.toml", d)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()
