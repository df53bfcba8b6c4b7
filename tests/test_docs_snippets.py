"""The documentation's Python examples run: every ```python block preceded by ``<!-- test: exec -->``
(in this process), and every one preceded by ``<!-- test: script -->`` saved as a file and run with
``python`` (a block that starts worker processes, which import the file again)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
MARKED = re.compile(r"<!-- test: exec -->\s*\n```python\n(.*?)```", re.DOTALL)
SCRIPT = re.compile(r"<!-- test: script -->\s*\n```python\n(.*?)```", re.DOTALL)


def _snippets(marked=MARKED):
    for page in sorted(DOCS.rglob("*.md")):
        for i, code in enumerate(marked.findall(page.read_text())):
            yield pytest.param(code, id=f"{page.relative_to(DOCS)}#{i}")


SNIPPETS = list(_snippets())
SCRIPTS = list(_snippets(SCRIPT))


def test_pages_have_marked_snippets():
    assert {p.id.split("#")[0] for p in SNIPPETS} >= {"index.md", "backends.md", "frontends.md"}


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anything a snippet writes stays in tmp_path
    exec(compile(code, "<docs snippet>", "exec"), {"__name__": "__docs__"})


def test_pages_have_script_snippets():
    assert {p.id.split("#")[0] for p in SCRIPTS} >= {"sweeps.md"}


@pytest.mark.slow  # a Dask local cluster of worker processes: about 35 s on 2 busy cores
@pytest.mark.parametrize("code", SCRIPTS)
def test_script_snippet_runs_as_a_file(code, tmp_path):
    if "distributed" in code:
        pytest.importorskip("distributed")
    (tmp_path / "snippet.py").write_text(code)
    checkout = str(Path(__file__).resolve().parents[1] / "python")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([checkout, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
