"""Formal checks (onchip.formal): the stream protocol proved by k-induction for presets of every
datapath, and evidence that the property suite can fail: a bug of each kind injected into a copy
of the generated Verilog gives a counterexample naming the property, with a VCD trace."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from onchip import formal
from onchip.commands.generate import resolve_spec
from onchip.formal import properties as props
from onchip.formal.covers import cover_depth
from onchip.formal.protocol import prove_protocol
from onchip.hw import generate
from onchip.spec import PRESETS

pytestmark = pytest.mark.skipif(formal.missing_tools() is not None, reason=str(formal.missing_tools()))


def kan_paper(timing="compact"):
    return PRESETS["kan-paper"].replace(timing=timing)


@pytest.fixture(scope="module")
def design():
    return generate(kan_paper())


def mutate(text: str, pattern: str, repl: str) -> str:
    """``text`` with the one match of ``pattern`` replaced (the test fails if there is not exactly one)."""
    out, n = re.subn(pattern, repl, text)
    assert n == 1, f"the bug site {pattern!r} matched {n} times"
    return out


def by_name(results):
    return {r.name: r for r in results}


@pytest.mark.parametrize("spec", [
    kan_paper(),
    resolve_spec("kan-readout", "pipelined", "min", "fast"),
    dataclasses.replace(PRESETS["mlp-regression"], datapath="serial"),
    # slow: the serial MLP's compact plan (its default before fast) is proved in the slow set
    pytest.param(dataclasses.replace(PRESETS["mlp-regression"], datapath="serial", timing="compact"),
                 marks=pytest.mark.slow),
    # slow: the serial KAN at its default, fast (registered strobes, reload flag and port busy flag)
    pytest.param(dataclasses.replace(PRESETS["kan-regression"], datapath="serial"), marks=pytest.mark.slow),
    # slow: predict-first, the prediction combinational out of its stage (both schedules)
    pytest.param(resolve_spec("kan-readout", "sequential", None, "predict-first"), marks=pytest.mark.slow),
    pytest.param(resolve_spec("kan-readout", "pipelined", "min", "predict-first"), marks=pytest.mark.slow),
], ids=["kan-paper", "kan-readout-pipelined-fast", "mlp-regression-serial-fast", "mlp-regression-serial-compact",
        "kan-regression-serial-fast", "kan-readout-predict-first", "kan-readout-pipelined-predict-first"])
def test_the_stream_protocol_is_proved_for_every_cycle(spec, tmp_path):
    results = formal.prove(spec, folder=tmp_path, readback=False, live=False)
    names = [r.name for r in results]
    info = generate(spec).info
    expected = list(props.protocol_properties(info, "core")) + list(props.protocol_properties(info, "axis"))
    assert names == expected
    assert {r.level for r in results} == {"core", "axis"}
    for r in results:
        assert r.status == "proved" and r.depth in (4, 8, 16, 32), r
        assert "proved by k-induction" in r.detail and r.trace is None


#: the presets whose covers and response bounds the default run checks (the rest: slow)
LIVE_FAST = ("kan-paper",)


@pytest.mark.parametrize("preset", [p if p in LIVE_FAST else pytest.param(p, marks=pytest.mark.slow)
                                    for p in PRESETS])
def test_every_preset_does_its_work_within_its_reported_cycles(preset, tmp_path):
    # both levels: the covers reached with a trace from reset, the response bounds proved or bounded
    design = generate(PRESETS[preset])
    from onchip.model.golden import initial_parameters

    theta0 = initial_parameters(PRESETS[preset])
    for level in props.LEVELS:
        text = design.verilog if level == "core" else design.axis_verilog
        response = prove_protocol(design.info, text, level, tmp_path / level, response=True)
        assert [r.name for r in response] == list(props.RESPONSE_PROPERTIES)
        for r in response:
            assert r.status in ("proved", "bounded"), r
            assert r.status == "proved" or ("bounded, not a proof" in r.detail and r.bound >= design.info["reset_cycles"])
        covers = formal.check_covers(design.info, text, level, theta0, tmp_path / level)
        assert [r.name for r in covers] == list(formal.COVER_PROPERTIES)
        for r in covers:
            assert r.status == "covered" and Path(r.trace).exists(), r
        # no sample before the reload ends, so none accepted (nor predicted) in fewer cycles
        got = by_name(covers)
        assert got["sample_accepted"].bound == design.info["reset_cycles"] + 1
        assert got["prediction_delivered"].bound >= design.info["reset_cycles"] + 1 + design.info["latency_cycles_prediction"]


def dead(verilog: str, *ports: str) -> str:
    """``verilog`` with the ready of each of ``ports`` tied to 0 (its logic left beside, unused)."""
    for port in ports:  # the core's assignment (its right side a Yosys net), not the AXI wrapper's
        verilog = mutate(verilog, rf"assign {port} = (?=\\\$)", f"assign {port} = 1'b0; wire dead_{port} = ")
    return verilog


@pytest.mark.parametrize("ports", [("s__ready", "pc__ready"), ("s__ready",)], ids=["dead", "half-dead"])
def test_a_core_that_takes_no_sample_fails_although_its_protocol_holds(design, ports, tmp_path):
    results = formal.prove(kan_paper(), folder=tmp_path, levels=("core",), readback=False,
                           verilog={"core": dead(design.verilog, *ports)})
    got = by_name(results)
    # every safety property still holds: that alone proves nothing about a working core
    assert all(got[n].status == "proved" for n in props.protocol_properties(design.info, "core"))
    bad = {n for n, r in got.items() if r.status == "failed"}
    assert bad == {"sample_ready_after_reload", "sample_accepted", "prediction_delivered", "update_committed"} | \
        ({"write_read_back"} if "pc__ready" in ports else set())
    assert Path(got["sample_ready_after_reload"].trace).exists()
    depth = cover_depth(design.info)  # searched to the end: the whole depth, not a timeout's part of it
    assert all("unreachable" in got[n].detail and got[n].bound == depth for n in bad & set(formal.COVER_PROPERTIES))
    if "pc__ready" not in ports:
        assert got["write_read_back"].status == "covered"


def test_a_prediction_later_than_its_reported_latency_is_caught(design, tmp_path):
    # stage 1 holds while the host offers a sample: m ready high, the prediction still comes late
    bad = mutate(design.verilog, r"assign en = ~ (\\\$\d+) ;", r"assign en = ~ \1  & ~(valid_s1 & s__valid);")
    got = by_name(prove_protocol(design.info, bad, "core", tmp_path, response=True))
    assert got["prediction_within_latency"].status == "failed"
    assert Path(got["prediction_within_latency"].trace).exists()
    assert got["sample_ready_after_reload"].status == "proved"


@pytest.mark.slow  # a minute or more; the default run keeps a cheaper check of the same kind
def test_tready_ignored_for_a_cycle_is_caught_at_the_axi_boundary(design, tmp_path):
    # the pipeline advances when the host offers a sample, whatever m_axis_pred_tready says
    bad = mutate(design.axis_verilog, r"assign en = ~ (\\\$\d+) ;", r"assign en = ~ \1  | s__valid;")
    got = by_name(prove_protocol(design.info, bad, "axis", tmp_path, settle=False))
    assert got["m_valid_held"].status == "failed"
    assert Path(got["m_valid_held"].trace).suffix == ".vcd" and Path(got["m_valid_held"].trace).exists()
    assert all(r.status == "not_proved" and "stopped at the counterexample" in r.detail
               for r in got.values() if r.status != "failed")


@pytest.mark.slow  # a minute or more; the default run keeps a cheaper check of the same kind
def test_response_data_changed_while_stalled_is_caught(design, tmp_path):
    # the response register also loads a new command's data while the last response waits
    bad = mutate(design.verilog, r"if \((\\\$\d+) \) begin\n(\s+)(\\\$\d+)  = pc__payload\[",
                 r"if (\1  | pc__valid) begin\n\2\3  = pc__payload[")
    got = by_name(prove_protocol(design.info, bad, "core", tmp_path, settle=False))
    assert got["pr_data_stable"].status == "failed" and Path(got["pr_data_stable"].trace).exists()


@pytest.mark.slow  # about 3 minutes
def test_a_duplicated_prediction_beat_is_caught(design, tmp_path):
    # after a prediction is taken, it is offered again when its lowest bit is 1
    bad = mutate(design.verilog, r"(\\\$\d+)  = m__valid;\n(\s+)if \(en\) begin\n(\s+)\1  = (valid_s\d+);",
                 r"\1  = m__valid;\n\2if (en) begin\n\3\1  = \4 | (m__valid & m__payload[0]);")
    got = by_name(prove_protocol(design.info, bad, "core", tmp_path, settle=False))
    failed = {n for n, r in got.items() if r.status == "failed"}
    assert {"pred_only_after_sample", "in_flight_matches_stages"} & failed, failed
    assert all(Path(got[n].trace).exists() for n in failed)


@pytest.mark.slow  # about 2 minutes
def test_a_prediction_valid_through_reset_is_caught(design, tmp_path):
    # the reset no longer clears the prediction's valid bit
    bad = mutate(design.verilog,
                 r"(\\\$\d+)  = m__valid;\n(\s+if \(en\) begin\n\s+\1  = valid_s\d+;\n\s+end\n\s+if \(rst\) begin\n\s+)"
                 r"\1  = 1'h0;", r"\1  = m__valid;\n\2\1  = m__valid;")
    got = by_name(prove_protocol(design.info, bad, "core", tmp_path, settle=False))
    assert got["nothing_valid_after_reset"].status == "failed"
    assert Path(got["nothing_valid_after_reset"].trace).exists()


@pytest.fixture(scope="module")
def serial_kan():
    return generate(dataclasses.replace(PRESETS["kan-regression"], datapath="serial"))


@pytest.mark.parametrize("pattern, repl, caught", [
    # the prediction stays offered after the host took it (its clear on m__ready dropped)
    (r"(\\\$\d+)  = m__valid;\n(\s+)if \(m__ready\) begin\n\s+\1  = 1'h0;\n\s+end\n", r"\1  = m__valid;\n",
     {"pred_only_after_sample", "in_flight_matches_stages"}),
    # a sample is taken while the passes of the last one still run (ready no longer waits for idle)
    pytest.param(r"assign s__ready = idle & (\\\$\d+) ;", r"assign s__ready = \1 ;",
                 {"samples_in_flight_bounded", "in_flight_matches_stages"}, marks=pytest.mark.slow),  # about 1 minute
], ids=["prediction-held-after-taken", "ready-while-busy"])
def test_a_protocol_bug_in_the_serial_kan_is_caught(serial_kan, pattern, repl, caught, tmp_path):
    bad = mutate(serial_kan.verilog, pattern, repl)
    got = by_name(prove_protocol(serial_kan.info, bad, "core", tmp_path, settle=False))
    failed = {n for n, r in got.items() if r.status == "failed"}
    assert caught <= failed, failed
    assert all(Path(got[n].trace).exists() for n in failed)


def test_a_wrong_read_back_is_caught_at_an_arbitrary_address(design, tmp_path):
    from onchip.model.golden import initial_parameters

    theta0 = initial_parameters(kan_paper())
    # a read answers the word with its lowest bit flipped
    bad = mutate(design.verilog, r"end else if \(read_wait\) begin\n(\s+)(\\\$\d+)  = (\\\$\d+) ;",
                 r"end else if (read_wait) begin\n\1\2  = \3 ^ 1'h1;")
    got = by_name(formal.prove_readback(design, theta0, tmp_path, verilog=bad))
    assert got["read_returns_last_write"].status == "failed"
    assert Path(got["read_returns_last_write"].trace).exists()
    assert got["write_echoes_value"].status == "bounded"


#: a one-LSB bug in kan-paper's fast plan: its output conversion (x + 2**(s-1) - 1 + c, the carry
#: into bit s rounding) adds 0 for 2**(s-1) - 1, so it forgets to round up when the discarded bits
#: are above one half
FORGETS_TO_ROUND_UP = (r"(\+ \$signed\(\{ 16'h)7fff(, l0_sum0_t\d+_\d+_s\d+\[\d+\] \}\))", r"\g<1>0000\2")


@pytest.fixture(scope="module")
def paper_plans():
    import numpy as np

    # from nonzero parameters (the preset starts at 0, so its first prediction is 0 whatever the
    # rounding) and with reads only, the first prediction already shows the bug: a quick search
    f = kan_paper().formats.coef
    theta = np.random.default_rng(0).integers(f.min_raw // 8, f.max_raw // 8, kan_paper().parameter_count())
    return formal.plan_designs(kan_paper(), theta)


def _plan_miter_with_the_bug(plans, tmp_path, **kw):
    compact, fast = plans
    bad = mutate(fast.verilog, *FORGETS_TO_ROUND_UP)
    return by_name(formal.check_plans(compact, fast, tmp_path, depth=30, fast_verilog=bad, writes=False, **kw))


def test_one_lsb_of_rounding_in_the_fast_plan_is_caught_by_the_plan_miter(paper_plans, tmp_path):
    # the predictions alone: the search ends on their first counterexample (the first compared
    # prediction), not on the deeper cycles where the responses would still be searched
    got = _plan_miter_with_the_bug(paper_plans, tmp_path / "bug", timeout=300, properties=("predictions_equal",))
    r = got["predictions_equal"]
    assert list(got) == ["predictions_equal"] and r.status == "failed", r
    assert Path(r.trace).exists()
    # that counterexample is the first comparison: the correct plans, to its bound, count one
    # compared prediction, and none a cycle short of it (the responses alone keep the search cheap)
    compact, fast = paper_plans
    for bound, compared in ((r.bound, 1), (r.bound - 1, 0)):
        (ok,) = formal.check_plans(compact, fast, tmp_path / str(bound), depth=bound, timeout=300, writes=False,
                                   properties=("responses_equal",))
        assert (ok.status, ok.bound, ok.samples) == ("bounded", bound, compared), ok
        assert f"up to {compared} predictions compared" in ok.detail


@pytest.mark.slow  # the solver's two whole minutes
def test_a_counterexample_found_before_the_solver_runs_out_of_time_is_a_failure(paper_plans, tmp_path):
    # with both properties the search goes on for the responses after the predictions' counterexample
    # (cycle 20) and spends its time past cycle 27: that counterexample still stands
    got = _plan_miter_with_the_bug(paper_plans, tmp_path, timeout=120)
    assert got["predictions_equal"].status == "failed", got["predictions_equal"]
    assert Path(got["predictions_equal"].trace).exists()
    r = got["responses_equal"]
    assert r.status == "bounded" and 20 <= r.bound < 30 and "counterexample" in r.detail, r


def tiny_mlp():
    return PRESETS["mlp-regression"].replace(widths=(1, 2, 1))


def test_the_plans_are_proved_equal_item_by_item(tmp_path):
    compact, fast = formal.plan_designs(tiny_mlp())
    got = by_name(formal.check_plans_per_item(compact, fast, tmp_path, timeout=300))
    assert list(got) == list(formal.ITEMS_PROPERTIES)
    for r in got.values():
        assert r.status == "proved", r.detail
        assert r.level == formal.ITEMS_LEVEL and "idle core" in r.detail and "every number" in r.detail


def test_one_lsb_of_rounding_in_the_fast_plan_is_caught_item_by_item(tmp_path):
    compact, fast = formal.plan_designs(kan_paper())
    # the bug of the plan miter's test; the parameters are free here, so the preset's zero reset
    # values cannot hide it
    bad = mutate(fast.verilog, *FORGETS_TO_ROUND_UP)
    (r,) = formal.check_plans_per_item(compact, fast, tmp_path, timeout=300, fast_verilog=bad,
                                       properties=("item_predictions_equal",))
    assert r.status == "failed", r.detail
    assert "differ on a sample: prediction" in r.detail and "s_payload" in r.detail


@pytest.mark.slow  # a minute or more; the default run keeps a cheaper check of the same kind
def test_a_read_back_off_by_one_lsb_in_the_fast_plan_is_caught_item_by_item(tmp_path):
    compact, fast = formal.plan_designs(tiny_mlp())
    bad = mutate(fast.verilog, r"pr__payload <= (\\\$\d+) ;", r"pr__payload <= \1 ^ 16'h0001;")
    got = by_name(formal.check_plans_per_item(compact, fast, tmp_path, timeout=300, fast_verilog=bad))
    assert got["item_responses_equal"].status == "failed"
    assert "differ on a read" in got["item_responses_equal"].detail
    # the parameters and predictions do not go through the response register
    assert got["item_predictions_equal"].status == got["item_parameters_equal"].status == "proved"


def test_the_item_check_refuses_an_unknown_property_and_the_pipelined_schedule(tmp_path):
    compact, fast = formal.plan_designs(tiny_mlp())
    with pytest.raises(ValueError, match="properties: 'predictions'"):
        formal.check_plans_per_item(compact, fast, tmp_path, properties=("predictions",))
    compact, fast = formal.plan_designs(resolve_spec("mlp-regression", "pipelined", "min", "fast"))
    with pytest.raises(ValueError, match="schedule: .* got 'pipelined'"):
        formal.check_plans_per_item(compact, fast, tmp_path)


def test_a_bounded_result_says_so_and_is_never_called_proved(tmp_path):
    compact, fast = formal.plan_designs(kan_paper())
    for writes, level, host in ((True, "equivalence", "any commands"), (False, "equivalence_reads_only", "reads only")):
        got = formal.check_plans(compact, fast, tmp_path / level, depth=12, timeout=120, writes=writes)
        for r in got:
            assert r.status == "bounded" and r.bound == 12 and "proved" not in r.detail and "bounded" in r.detail
            assert r.level == level and host in r.detail
            assert r.samples == 0  # the fast core's first prediction needs more than 12 cycles


@pytest.mark.slow  # a minute or more; the default run keeps a cheaper check of the same kind
def test_verify_formal_puts_one_case_per_property_in_the_report_and_junit(tmp_path, capsys):
    from onchip.cli import main

    out = tmp_path / "out"
    rc = main(["verify", "--spec", "kan-paper", "--backends", "hls", "--formal", "--samples", "40", "--quiet",
               "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    report = json.loads((out / "report.json").read_text())
    formal_cases = [c for c in report["cases"] if c["name"].startswith("formal.")]
    info = generate(PRESETS["kan-paper"]).info  # what verify builds: the spec's default timing
    want = [f"formal.{level}.{n}" for level in props.LEVELS for n in (*props.protocol_properties(info, level),
                                                                      *props.RESPONSE_PROPERTIES, *formal.COVER_PROPERTIES)]
    want += [f"formal.core.{n}" for n in props.READBACK_PROPERTIES]
    assert [c["name"] for c in formal_cases] == want
    assert all(c["status"] == "passed" for c in formal_cases)
    covers = [c for c in formal_cases if c["name"].split(".")[-1] in formal.COVER_PROPERTIES]
    assert all(c["measured"]["status"] == "covered" and c["measured"]["trace_cycles"] >= 1 for c in covers)
    assert formal_cases[0]["measured"]["status"] == "proved" and formal_cases[0]["measured"]["induction_depth"] >= 1
    assert formal_cases[-1]["measured"]["status"] == "bounded" and "bounded, not a proof" in formal_cases[-1]["detail"]
    junit = (out / "junit.xml").read_text()
    assert junit.count("formal.core.") + junit.count("formal.axis.") >= len(want)
    assert "PASS  formal.axis.m_valid_held" in text


@pytest.mark.slow  # about 5 minutes
def test_verify_formal_fails_a_dead_core_naming_each_unreached_cover(tmp_path, capsys, monkeypatch):
    import onchip.hw
    from onchip.cli import main

    real = onchip.hw.generate

    def generate_dead(*args, **kwargs):  # the core and its wrapper with the sample port's ready tied to 0
        d = real(*args, **kwargs)
        return dataclasses.replace(d, verilog=dead(d.verilog, "s__ready"),
                                   axis_verilog=dead(d.axis_verilog, "s__ready") if d.axis_verilog else "")

    monkeypatch.setattr(onchip.hw, "generate", generate_dead)
    out = tmp_path / "out"
    rc = main(["verify", "--spec", "kan-paper", "--backends", "hls", "--formal", "--samples", "40", "--quiet",
               "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 1, text
    cases = {c["name"]: c for c in json.loads((out / "report.json").read_text())["cases"]}
    for level in props.LEVELS:
        for n in ("sample_accepted", "prediction_delivered", "update_committed"):
            assert cases[f"formal.{level}.{n}"]["status"] == "failed" and "unreachable" in cases[f"formal.{level}.{n}"]["detail"]
            assert f"FAIL  formal.{level}.{n}" in text
        assert cases[f"formal.{level}.sample_ready_after_reload"]["status"] == "failed"
        assert cases[f"formal.{level}.write_read_back"]["status"] == "passed"
        assert cases[f"formal.{level}.m_valid_held"]["status"] == "passed"


@pytest.mark.parametrize("argv, flag", [
    (["--equivalence", "10"], "--equivalence"),
    (["--formal", "--equivalence", "-1"], "--equivalence"),
])
def test_bad_formal_flags_exit_2(argv, flag, capsys):
    from onchip.cli import main

    with pytest.raises(SystemExit) as exc:
        rc = main(["verify", "--spec", "kan-paper", "--backends", "hls", *argv])
        raise SystemExit(rc)
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err


def test_products_paired_through_different_multiplexers_are_one_term_under_the_abstraction(tmp_path):
    """The sequential fast KAN multiplies each bank's word by the basis value rotated into bank order;
    compact multiplies each basis value by the word selected for it. Under the abstracted product
    (an uninterpreted ``mul``) the two dot products are equal for every rotation only if a
    multiplexed operand is split into its branches and each product takes its operands in one order."""
    import z3

    from onchip.formal import symbolic
    from onchip.formal.items import _solve

    bits = symbolic.PRODUCT_BITS
    rot = z3.BitVec("rot", 1)  # two banks (k = 1)
    basis = [z3.BitVec(f"b{j}", 16) for j in range(2)]
    words = [z3.BitVec(f"w{j}", 16) for j in range(2)]

    def pick(values, index):  # a multiplexer: values[index]
        return z3.SignExt(bits - 16, z3.If(index == 0, values[0], values[1]))

    def differ(product):
        compact = sum(product(z3.SignExt(bits - 16, basis[j]), pick(words, rot + j), {}) for j in range(2))
        fast = sum(product(z3.SignExt(bits - 16, words[k]), pick(basis, k - rot), {}) for k in range(2))
        return compact != fast

    def unsplit(a, b, cache):  # the product as one uninterpreted application, operands as given
        return z3.Function("mul", *(z3.BitVecSort(bits),) * 3)(a, b)

    assert _solve(differ(symbolic._abstract_product), tmp_path, "split", 60)[0] == "unsat"
    # a spurious difference: the abstraction alone cannot see that the two pairings agree
    assert _solve(differ(unsplit), tmp_path, "unsplit", 60)[0] == "sat"


def test_the_recorded_table_has_every_preset_doing_its_work():
    # sweeps/formal/results.json, written by formal_table.py --parts live: every preset at least once
    rows = json.loads((Path(__file__).resolve().parents[1] / "sweeps" / "formal" / "results.json").read_text())["live"]
    assert set(PRESETS) <= {r["preset"] for r in rows}
    for r in rows:
        assert all(v["status"] == "covered" and v["cycles"] >= 1 for v in r["covers"].values()), r
        assert all(v["status"] in ("proved", "bounded") for v in r["response"].values()), r
        assert r["covers"]["core.sample_accepted"]["cycles"] == r["reset_cycles"] + 1


def test_combining_a_new_part_replaces_it_and_keeps_every_rows_date():
    # formal_table.py --combine results.json results-plans.json: the new plans, the rest as committed
    from support import load_script

    table = load_script("sweeps/formal/formal_table.py")
    committed = json.loads((Path(__file__).resolve().parents[1] / "sweeps" / "formal" / "results.json").read_text())
    committed["date"] = "2000-01-01"
    for key in table.PARTS:
        for row in committed.get(key) or ():
            row.pop("date", None)
    new = {"date": "2100-01-01", "plans_timeout_s": 1.0, "items_timeout_s": 2.0, "protocol": [], "items": [],
           "netlist": [], "plans": [dict(committed["plans"][0], any_bound_cycles=99)]}
    data = table.combine([committed, new])
    assert data["plans"] == new["plans"] and data["plans"][0]["date"] == "2100-01-01"
    assert data["plans_timeout_s"] == 1.0 and data["items_timeout_s"] == committed["items_timeout_s"]
    assert data["live"] and all(r["date"] == "2000-01-01" for key in ("protocol", "live", "items", "netlist")
                                for r in data[key])
    text = table.report(data)
    assert "| 99 / " in text and "2100-01-01" in text and "2000-01-01 |" in text
