"""The documentation's Python examples run: every ```python block preceded by ``<!-- test: exec -->``."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
MARKED = re.compile(r"<!-- test: exec -->\s*\n```python\n(.*?)```", re.DOTALL)


def _snippets():
    for page in sorted(DOCS.rglob("*.md")):
        for i, code in enumerate(MARKED.findall(page.read_text())):
            yield pytest.param(code, id=f"{page.relative_to(DOCS)}#{i}")


SNIPPETS = list(_snippets())


def test_pages_have_marked_snippets():
    assert {p.id.split("#")[0] for p in SNIPPETS} >= {"index.md", "backends.md", "frontends.md"}


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anything a snippet writes stays in tmp_path
    exec(compile(code, "<docs snippet>", "exec"), {"__name__": "__docs__"})
