"""What the README and the documentation site promise about their own structure."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CARDS = sorted(p.name for p in (ROOT / "seeds").glob("*.md") if p.name != "README.md")


def _nav_files(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    return [f for value in node.values() for f in _nav_files(value)]


def test_readme_starts_with_setup_tests_and_the_main_job():
    lines = (ROOT / "README.md").read_text().splitlines()
    first_text = next(i for i, line in enumerate(lines[1:], 1) if line and not line.startswith("    "))
    commands = [line.strip() for line in lines[1:first_text] if line.strip()]
    setup = 'pip install -e ".[dev]" --extra-index-url https://download.pytorch.org/whl/cpu --retries 1'
    assert commands == [setup, "python -m pytest", "onchip run"]  # one pip install: torch's CPU build
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # CI installs and tests the README's way (`python -m`: the pytest of the environment that was set up)
    assert f"python -m {commands[0]}" in ci and commands[1] in ci


def test_every_seed_card_is_indexed_and_on_the_site():
    assert CARDS
    index = (ROOT / "seeds" / "README.md").read_text()
    nav = _nav_files(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    for card in CARDS:
        # one index line and one table row per card, both linking it
        assert re.search(rf"^- \[[^]]+\]\({re.escape(card)}\): ", index, re.M), card
        assert re.search(rf"^\| [^|]+ \| \[[^]]+\]\({re.escape(card)}\) \|", index, re.M), card
        page = ROOT / "docs" / "seeds" / card
        assert page.read_text().strip() == f'--8<-- "seeds/{card}"', card
        assert f"seeds/{card}" in nav, card
    assert (ROOT / "docs" / "seeds" / "index.md").read_text().strip() == '--8<-- "seeds/README.md"'
    assert "seeds/index.md" in nav


def test_every_docs_page_is_in_the_nav():
    nav = set(_nav_files(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages == nav
