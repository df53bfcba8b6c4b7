"""The core modules import one another without a cycle: every shared piece lives in a module
below the modules that use it, so each can import it at its top.

The graph is read from the source with ``ast``: one node per module of ``python/onchip``
(``methods/`` left out; a package is its ``__init__``), an edge for every import of another
such module, at module level and inside functions alike (a function-level import is still a
dependency; it only hides the cycle until the function runs). ``from pkg import name`` is an
edge to ``pkg.name`` when that is a module, else to ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import onchip

ROOT = Path(onchip.__file__).parent
SKIP = ("methods",)


def module_files(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (source file, is a package) for every core module."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[1:2] and parts[1] in SKIP:
            continue
        package = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if package else parts)] = (path, package)
    return mods


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """Edges module -> imported core module, each with the ``line`` of its first import."""
    mods = module_files(root)
    graph = nx.DiGraph()
    for name, (path, package) in mods.items():
        graph.add_node(name)
        here = name.split(".") if package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                if target in mods and target != name and not graph.has_edge(name, target):
                    graph.add_edge(name, target, line=node.lineno)
    return graph


def describe(graph: nx.DiGraph, cycle: list[str]) -> str:
    """``a (line 12) -> b (line 40) -> a``: each module with the line of its import of the next."""
    hops = [f"{a} (line {graph.edges[a, b]['line']})" for a, b in zip(cycle, cycle[1:] + cycle[:1])]
    return " -> ".join(hops + [cycle[0]])


def test_the_graph_sees_imports_of_every_form():
    """The reader finds the imports it must: relative, absolute, function-level, from a package."""
    graph = import_graph()
    assert {"onchip", "onchip.spec", "onchip.backends", "onchip.hw", "onchip.hw.learner"} <= set(graph)
    assert not any(n.startswith("onchip.methods") for n in graph)
    assert graph.has_edge("onchip.backends", "onchip.spec")  # module level, relative
    assert graph.has_edge("onchip.backends", "onchip.verilator.backend")  # inside a method
    assert graph.has_edge("onchip.hw.learner", "onchip.hw.layers")
    assert graph.has_edge("onchip.verilator.backend", "onchip.verilator.toolchain")  # from . import module


def test_core_modules_import_without_a_cycle():
    graph = import_graph()
    cycles = sorted((c for c in nx.simple_cycles(graph)), key=lambda c: (len(c), c))
    assert not cycles, "import cycles among onchip's modules:\n" + "\n".join(describe(graph, c) for c in cycles)
