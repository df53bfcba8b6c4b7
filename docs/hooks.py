"""MkDocs hooks: Markdown written for GitHub, rendered the same by Python-Markdown.

- Sphinx roles of the docstrings (``:class:`X```, ``:func:`~m.f```) render as code.
- A pipe inside a code span of a table row is written ``\\|`` for GitHub; Python-Markdown's
  tables already leave pipes inside code spans alone and would show the backslash, so it is
  dropped there (after the snippets of ``seeds/`` and ``hw/`` are included).
- ``cli.md`` is generated from the command-line parsers (:func:`onchip.cli.reference_markdown`)
  at the marker it holds, so the reference cannot lag the flags.
"""

import re

from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`~?([^`]+)`")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s*(```|~~~)")


class _Roles(Preprocessor):
    def run(self, lines):
        return [ROLE.sub(r"`\1`", line) for line in lines]


def _unescape_pipes(span: re.Match) -> str:
    return span.group(1) + span.group(2).replace("\\|", "|") + span.group(1)


class _TableCodePipes(Preprocessor):
    def run(self, lines):
        out, fenced = [], False
        for line in lines:
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and line.lstrip().startswith("|"):
                line = CODE_SPAN.sub(_unescape_pipes, line)
            out.append(line)
        return out


class GitHubMarkdown(Extension):
    def extendMarkdown(self, md):
        md.preprocessors.register(_Roles(md), "sphinx_roles", 35)
        # below the snippets preprocessor (32), so included files are seen too
        md.preprocessors.register(_TableCodePipes(md), "table_code_pipes", 31)


CLI_MARKER = "<!-- generated: onchip.cli.reference_markdown() -->"


def on_page_markdown(markdown, page, config, files):
    if CLI_MARKER in markdown:
        from onchip.cli import reference_markdown

        markdown = markdown.replace(CLI_MARKER, reference_markdown())
    return markdown


def on_config(config):
    config.markdown_extensions.append(GitHubMarkdown())
    return config
