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


#: an accuracy figure in prose: an error or difference in LSB, a count of differing outputs, a share of them
ACCURACY_FIGURE = re.compile(r"\b\d[\d.,]*\s*LSB\b|\b\d+ of [\d,]+ outputs\b|\b\d+(?:\.\d+)?% of (?:the )?(?:outputs|inputs)\b")
#: a command that reproduces it: `python ...`, `onchip ...`, `pytest ...` inline, or an indented command line
COMMAND = re.compile(r"`(?:python |onchip |pytest )[^`]*`|^ {4}(?:python |onchip |pytest )", re.MULTILINE)
INCLUDE = re.compile(r'^--8<-- "([^":]+)(?::([^"]+))?"', re.MULTILINE)


def _units(text: str) -> list[str]:
    """A page's paragraphs outside code fences; an included file or snippet block is one unit (the
    one command that writes a generated block reproduces every figure in it)."""
    units = []
    for para in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
        m = INCLUDE.search(para)
        if m is None:
            units.append(para)
            continue
        source = (ROOT / m.group(1)).read_text()
        if m.group(2) is None:
            units += _units(source)
        else:
            units.append(source.split(f"[start:{m.group(2)}] -->")[1].split(f"[end:{m.group(2)}] -->")[0])
    return units


def test_every_accuracy_figure_has_the_command_that_reproduces_it_beside_it():
    """In the site's own pages (the seed cards, docs/seeds, carry their commands in their own
    sections), every paragraph or generated block quoting an error in LSB or a count of differing
    outputs also prints the command that measures it."""
    bare = [f"{page.relative_to(ROOT)}: {' '.join(unit.split())[:120]}"
            for page in sorted((ROOT / "docs").glob("*.md")) for unit in _units(page.read_text())
            if ACCURACY_FIGURE.search(unit) and not COMMAND.search(unit)]
    assert not bare, "\n".join(bare)


def test_the_sites_quick_start_agrees_with_the_readme():
    import tomllib

    readme = (ROOT / "README.md").read_text().splitlines()
    first_text = next(i for i, line in enumerate(readme[1:], 1) if line and not line.startswith("    "))
    commands = [line.strip() for line in readme[1:first_text] if line.strip()]
    index = (ROOT / "docs" / "index.md").read_text()
    block = re.search(r"## Quick start\s*```sh\n(.*?)```", index, re.S).group(1)
    assert [line.split("#")[0].strip() for line in block.splitlines()] == commands
    assert not re.search(r"pip install onchip(\s|`|$)", index)  # not on PyPI
    assert "not published on PyPI" in index
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    listed = set(re.findall(r"^\| `([\w-]+)` \| ", index, re.M))
    assert set(extras) <= listed, set(extras) - listed
    scripts = {p.name for p in (ROOT / "examples").glob("*.py")}
    assert scripts <= set(re.findall(r"^\| `([\w-]+\.py)` \| ", index, re.M))
