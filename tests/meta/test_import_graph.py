"""The import graph of ``src/mindstore`` has no cycle — not even a type-only one.

Every module is parsed with :mod:`ast` (nothing is imported), and every import counts: at module
level, inside ``if TYPE_CHECKING:`` blocks and inside function bodies. A cycle means two modules
that cannot be understood, tested or moved one without the other; a type-only cycle is the same
coupling with the import hidden. The test names each cycle it finds, module by module.

An edge goes to the module an import names: ``from a.b import c`` is an edge to ``a.b.c`` when
that is a module, else to ``a.b``; ``import a.b`` is an edge to ``a.b``. The implicit import of
parent packages (``a`` runs before ``a.b``) is not an edge: it would make every package that
re-exports a submodule a "cycle" with it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "mindstore"

# Cycles that exist in parts of the code being restructured elsewhere, each named by its
# modules. An entry here is a debt, not a rule: remove it when the cycle is gone (the test
# fails on an entry that no longer matches a cycle, so the list cannot go stale).
KNOWN_CYCLES: set[frozenset[str]] = set()


def modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name → (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _known(name: str, mods: dict[str, tuple[Path, bool]]) -> str | None:
    """``name`` or its nearest enclosing module of ours (``None`` for third-party names)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, mods: dict[str, tuple[Path, bool]]) -> set[str]:
    """The modules of ours that module ``name`` imports, anywhere in its source."""
    path, is_package = mods[name]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if is_package else name.rpartition(".")[0]
    edges: set[str] = set()
    for node in ast.walk(tree):  # every statement: TYPE_CHECKING blocks and functions too
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name, mods)
                if target:
                    edges.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                target = submodule if submodule in mods else _known(module, mods)
                if target:
                    edges.add(target)
    edges.discard(name)
    return edges


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, mods) for name in mods}


def tangles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module: each module of one reaches
    every other through imports (so each lies on a cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[frozenset[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iteratively (no recursion limit on deep graphs).
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(frozenset(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(components, key=sorted)


def cycle_through(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """One cycle inside ``component``, from its first module back to it (for the message)."""
    start = min(component)
    # breadth-first search for the shortest way back to start within the component
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not strongly connected")  # pragma: no cover


def _describe(graph: dict[str, set[str]], component: frozenset[str]) -> str:
    return f"{' -> '.join(cycle_through(graph, component))}  (modules: {sorted(component)})"


def test_no_import_cycles() -> None:
    graph = import_graph()
    new = [c for c in tangles(graph) if c not in KNOWN_CYCLES]
    assert not new, "import cycles (an import anywhere counts, TYPE_CHECKING ones too):\n" + (
        "\n".join(_describe(graph, c) for c in new)
    )


def test_known_cycles_still_exist() -> None:
    """An allow-listed cycle that is gone must leave the list (it would hide a new one)."""
    found = set(tangles(import_graph()))
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not stale, f"remove these from KNOWN_CYCLES, they are no longer cycles: {stale}"


# ---- the checker itself ------------------------------------------------------------------------


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import thing\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\nthing = 1\n"
    )
    (pkg / "b.py").write_text("def f():\n    import pkg.sub.c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from .. import a\nfrom ..b import f\nimport os\n")
    mods = modules(tmp_path, "pkg")
    graph = {name: imports_of(name, mods) for name in mods}
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},  # TYPE_CHECKING-only
        "pkg.b": {"pkg.sub.c"},  # inside a function
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.a", "pkg.b"},  # relative; "from .. import a" names the module
    }
    [tangle] = tangles(graph)
    assert cycle_through(graph, tangle) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]


def test_acyclic_graphs_and_small_cycles() -> None:
    assert tangles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert tangles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []  # a diamond is no cycle
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a", "d"}, "d": {"c"}}
    assert tangles(graph) == [frozenset({"a", "b"}), frozenset({"c", "d"})]
    assert cycle_through(graph, frozenset({"a", "b"})) == ["a", "b", "a"]
    assert "a -> b -> a" in _describe(graph, frozenset({"a", "b"}))


# ---- the layer rules of docs/architecture.md ---------------------------------------------------
PURE = (
    "mindstore._async",
    "mindstore.compaction.overlays",
    "mindstore.errors",
    "mindstore.formats",
    "mindstore.lexical",
    "mindstore.messages",
    "mindstore.prompt",
    "mindstore.search",
    "mindstore.store._checks",
    "mindstore.store._rows",
    "mindstore.store._rules",
    "mindstore.store.failpoints",
    "mindstore.store.types",
    "mindstore.tokens",
    "mindstore.vectors",
)
BACKENDS = ("mindstore.store.sqlite", "mindstore.store.postgres")
# Who may name a backend: open_store, the blocking twins, and the entry points that open files.
MAY_OPEN_BACKENDS = ("mindstore.store", "mindstore.sync", "mindstore.cli", "mindstore.viewer")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_pure_modules_import_only_pure_modules() -> None:
    graph = import_graph()
    bad = {
        m: sorted(d for d in deps if not _within(d, PURE))
        for m, deps in graph.items()
        if _within(m, PURE)
    }
    assert not {m: d for m, d in bad.items() if d}, "pure modules must stay pure (no I/O layers)"


def test_only_the_named_modules_import_a_backend() -> None:
    graph = import_graph()
    bad = {
        m: sorted(d for d in deps if _within(d, BACKENDS))
        for m, deps in graph.items()
        if not _within(m, BACKENDS)
        and not (m == "mindstore.store" or _within(m, MAY_OPEN_BACKENDS[1:]))
    }
    assert not {m: d for m, d in bad.items() if d}, (
        "only open_store, sync, cli and viewer open backends"
    )
