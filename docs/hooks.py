"""MkDocs hook: render the Sphinx roles of the docstrings (``:class:`X```, ``:func:`~m.f```) as code."""

import re

from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


class _Roles(Preprocessor):
    def run(self, lines):
        return [ROLE.sub(r"`\1`", line) for line in lines]


class SphinxRoles(Extension):
    def extendMarkdown(self, md):
        md.preprocessors.register(_Roles(md), "sphinx_roles", 35)


def on_config(config):
    config.markdown_extensions.append(SphinxRoles())
    return config
