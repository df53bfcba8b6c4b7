"""The README's figures are the committed results' figures: each headline names its page, and what it
states is found there, so a rerun that moves a figure fails here until the README follows."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?(?![\w.])")


def _table(header: str) -> list[list[str]]:
    """The rows of the README table whose header line starts with ``header``, as cells."""
    lines = README.split(header, 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


HEADLINES = _table("| what | measured | page |")


def test_the_headline_table_has_its_rows():
    assert len(HEADLINES) >= 5
    for what, measured, page in HEADLINES:
        assert re.fullmatch(r"\[[^]]+\]\([^)]+\)", page), f"{what}: its page is not a link: {page}"


@pytest.mark.parametrize("row", HEADLINES, ids=[r[0][:40] for r in HEADLINES])
def test_every_headline_number_is_on_its_page(row):
    what, measured, page = row
    target = ROOT / re.search(r"\(([^)]+)\)", page).group(1)
    text = target.read_text()
    for number in NUMBER.findall(measured):
        assert number in text, f"README headline {what!r} states {number}, which {target.relative_to(ROOT)} does not"


def test_every_preset_protocol_is_proved_as_the_headline_says():
    formal = json.loads((ROOT / "sweeps" / "formal" / "results.json").read_text())
    rows = formal["protocol"]
    presets = {r["preset"] for r in rows}
    assert {"kan-paper", "kan-regression", "kan-readout", "mlp-regression", "mlp-readout"} <= presets
    unproved = [f"{r['preset']}/{r['schedule']}/{r['timing']}/{r['datapath']}" for r in rows
                if r["proved"] != r["properties"] or r["not_proved"]]
    assert not unproved, f"the README says every preset's protocol is proved; not: {unproved}"


def test_the_real_shot_table_is_the_main_jobs():
    block = README.split("<!-- --8<-- [start:real-shots] -->", 1)[1].split("<!-- --8<-- [end:real-shots] -->", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| learner")]
    assert len(rows) == 5
    main_job = (ROOT / "sweeps" / "main_job.md").read_text()
    for line in rows:
        assert line in main_job, f"README row not in sweeps/main_job.md: {line}"


def test_every_relative_link_in_the_readme_resolves():
    for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / link).exists(), f"README links {link}, which does not exist"


def test_the_resource_headline_is_what_the_resources_csv_gives():
    """The headline's KAN growth is the generated growth table's (rendered here from the CSV, so a rerun that
    moves it fails until the README follows), and the MLP's DSP = 7H holds in every parallel row."""
    from onchip.sweep.pages import read_rows, render_tables
    from onchip.sweep.schema import load_definition

    what, measured, page = next(r for r in HEADLINES if "sweeps/resources/README.md" in r[2])
    csv_path = ROOT / "sweeps" / "resources" / "results" / "results.csv"
    growth = render_tables(load_definition(ROOT / "sweeps" / "resources" / "sweep.toml"), csv_path)["kan-growth"]
    m = re.search(r"logic ([+-][\d.]+%) from G = 4 to 64 while its parameters grow ([\d.]+x)", measured)
    assert m, f"README headline {what!r} no longer reads 'logic +X% from G = 4 to 64 ... grow Nx': {measured}"
    parallel = next(line for line in growth.splitlines() if line.startswith("| parallel "))
    assert f"| {m.group(2)} (" in parallel and f"| {m.group(1)} (" in parallel, (measured, parallel)
    mlp = [r for r in read_rows(csv_path) if r["preset"] == "mlp-readout" and r["datapath"] == "parallel"]
    assert mlp and "DSP = 7H" in measured and all(r["dsp"] == 7 * r["hidden"] for r in mlp)
