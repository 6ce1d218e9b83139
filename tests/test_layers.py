"""The import layering (issue 22): applications on top, nothing below imports them, no circles.

An AST walk over every module of ddms/, replay/ and strategies/ (every ``import``, also those
inside functions, which run later but are dependencies all the same; ``if TYPE_CHECKING:``
blocks excluded).  Cheap: parsing ~100 files.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("ddms", "replay", "strategies")

APPLICATIONS = ("ddms.cli", "ddms.__main__", "ddms.feeds", "replay", "strategies")
"""The CLI, the monitor and serve-feed, backtests, strategies: the top layer."""
BELOW = ("ddms.io", "ddms.runtime", "ddms.storage", "ddms.backend", "ddms.m3", "ddms.sql", "ddms.calculus",
         "ddms.compiler", "ddms.errors", "ddms.programs", "ddms.numbacache", "ddms.bytecode")
"""Everything the applications stand on."""


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((REPO / pkg).rglob("*.py")):
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, known: set[str], *, top_level_only: bool = False) -> set[str]:
    """Modules of ``known`` that module ``name`` imports (``from a import b`` counts ``a.b``
    when it is a module, else ``a``)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for c in child.orelse:
                    visit(c, in_function)
                continue
            fn = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if top_level_only and fn:
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    _add(a.name)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = pkg[: len(pkg) - child.level + 1]
                    mod = ".".join([*base, child.module] if child.module else base)
                else:
                    mod = child.module or ""
                for a in child.names:
                    if f"{mod}.{a.name}" in known:
                        found.add(f"{mod}.{a.name}")
                    else:
                        _add(mod)
            visit(child, fn)

    def _add(mod: str) -> None:
        while mod and mod not in known:
            mod = mod.rpartition(".")[0]
        if mod:
            found.add(mod)

    visit(tree, False)
    found.discard(name)
    return found


def _under(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: imports_of(m, p, known) for m, p in mods.items()}


@pytest.fixture(scope="module")
def top_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: imports_of(m, p, known, top_level_only=True) for m, p in mods.items()}


def test_every_module_is_in_a_layer(graph):
    stray = [m for m in graph if m != "ddms" and not _under(m, APPLICATIONS + BELOW)]
    assert not stray, f"modules in no layer (add them to APPLICATIONS or BELOW): {stray}"


def test_nothing_below_imports_an_application(graph):
    bad = sorted((m, d) for m, deps in graph.items() if _under(m, BELOW)
                 for d in deps if _under(d, APPLICATIONS))
    assert not bad, f"lower layers import applications: {bad}"


def test_io_imports_no_engine(graph):
    """The readers stand below the engine: ddms/io imports neither the runtime nor the compiler."""
    up = ("ddms.runtime", "ddms.backend", "ddms.compiler", "ddms.sql", "ddms.calculus", "ddms.storage")
    bad = sorted((m, d) for m, deps in graph.items() if _under(m, ("ddms.io",)) for d in deps if _under(d, up))
    assert not bad, f"ddms/io imports layers above it: {bad}"


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def _without_packages(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """Importing ``a.b`` runs ``a/__init__.py`` first; an ``__init__`` re-exporting its
    submodules is not a circle, so package -> own submodule edges are dropped."""
    return {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in g.items()}


def test_no_import_circle_at_module_level(top_graph):
    assert _cycles(_without_packages(top_graph)) == []


def test_no_import_circle_in_the_io_layer(graph):
    """Within ddms/io not even a deferred import closes a circle."""
    io = {m: {d for d in deps if _under(d, ("ddms.io",))} for m, deps in graph.items() if _under(m, ("ddms.io",))}
    assert _cycles(_without_packages(io)) == []


def test_the_walk_sees_deferred_and_relative_imports(tmp_path):
    """The checker itself: an import inside a function and a relative import are edges."""
    (tmp_path / "a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "c.py").write_text("from . import b\nfrom .b import x\n")
    known = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    assert imports_of("pkg.a", tmp_path / "a.py", known) == {"pkg.b"}
    assert imports_of("pkg.a", tmp_path / "a.py", known, top_level_only=True) == set()
    assert imports_of("pkg.c", tmp_path / "c.py", known) == {"pkg.b"}
    assert _cycles({"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [["x", "y"]]


def test_one_declaration_of_the_book_schema():
    """BIDS/ASKS and the column list are declared in ddms/io/schema.py only."""
    import re
    decl = re.compile(r'^(BIDS|ASKS)\s*=|^\w*\s*=\s*\("t", "id", "broker_id", "volume", "price"\)'
                      r'|^\w+\s*=\s*\("bids", "asks"\)', re.M)
    found = [str(p.relative_to(REPO)) for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")
             if decl.search(p.read_text())]
    assert found == ["ddms/io/schema.py"], found
