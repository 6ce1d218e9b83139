"""How big a generated function grows once numba inlines its ``inline='always'`` callees: an
estimate of numba IR blocks, read from source text (``ast``), so that code generation can cut a long
trigger into functions of bounded size (``codegen.CHUNK_BLOCKS``).

Why: numba's SSA reconstruction (``ssa._fix_ssa_vars``) costs, per function, the variables it must
rename (every variable assigned in two places: each inlined loop or branch adds some) times the
function's statements, so its time is quadratic in a function's size after inlining.  A trigger of
16 statements of a 122-view program (qa36's ``on_insert_BIDS_c1``) expanded to 4,714 blocks and
took 30 minutes to compile, nearly all of it there; the same statements in pieces of a bounded
size cost time linear in their number.  A statement's own text says little: ``a_M(st, hx, key, 1.0)``
is one line, and the EXTREME writer it names inlines a window add, a table probe and a heap
update from ``ddms.storage.extheap``.  So the estimate follows the calls into every inlined
function, the generated writers and the run-time library's ``inline="always"`` functions alike.

The unit: numba's basic blocks, roughly: a branch or a conditional expression adds two, a loop
three, a short-circuit operand one, an inlined call two (numba splits the caller's block around
it) plus the callee's own; a straight-line statement adds nothing.  Close enough to order functions
by size and to keep each under a budget (measured: see ``codegen.CHUNK_BLOCKS``).
Cost: parsing the library once per process (~4 files), each generated function once.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

_LIBRARY = ("storage/btree.py", "storage/hashtab.py", "storage/extheap.py", "backend/rt.py")
"""The run-time library modules generated programs import (package-relative paths)."""


def _inline_always(f: ast.FunctionDef) -> bool:
    """Whether ``f`` is decorated ``@njit(..., inline="always")``."""
    return any(isinstance(d, ast.Call) and any(k.arg == "inline" and isinstance(k.value, ast.Constant)
                                               and k.value.value == "always" for k in d.keywords)
               for d in f.decorator_list)


def _own(node: ast.AST) -> tuple[int, tuple[str, ...]]:
    """(blocks ``node`` adds by its own control flow, names of the functions it calls)."""
    blocks, calls = 0, []
    for n in ast.walk(node):
        if isinstance(n, ast.If | ast.IfExp):
            blocks += 2
        elif isinstance(n, ast.For | ast.While | ast.comprehension):
            blocks += 3
        elif isinstance(n, ast.BoolOp):
            blocks += len(n.values) - 1
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            calls.append(n.func.id)
    return blocks, tuple(calls)


def _functions(source: str) -> dict[str, tuple[int, tuple[str, ...], bool]]:
    """The functions defined at the top of ``source``: name -> (:func:`_own`, inlined or not)."""
    return {f.name: (*_own(f), _inline_always(f)) for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}


_DEF = re.compile(r"^@njit\(([^\n]*)\)\ndef (\w+)\([^\n]*\n", re.M)
_BRANCH = re.compile(r"\b(?:(if|elif)|(for|while)|(and|or))\b|(?<![.\w])(\w+)\(")


def _own_text(body: str) -> tuple[int, tuple[str, ...]]:
    """:func:`_own` of generated code, read from its text: generated functions hold neither
    comments nor strings, and a statement's expression can be tens of kilobytes (a CASE nest),
    where a regular expression costs a small part of what parsing and walking the tree would."""
    blocks, calls = 0, []
    for branch, loop, short, call in _BRANCH.findall(body):
        if branch:
            blocks += 2
        elif loop:
            blocks += 3
        elif short:
            blocks += 1
        else:
            calls.append(call)
    return blocks, tuple(calls)


def _generated(source: str) -> dict[str, tuple[int, tuple[str, ...], bool]]:
    """:func:`_functions` of generated code (each function ``@njit(...)``, then ``def``, then an
    indented body), read with :func:`_own_text`."""
    found = list(_DEF.finditer(source))
    ends = [m.start() for m in found[1:]] + [len(source)]
    return {m[2]: (*_own_text(source[m.end():end]), "inline='always'" in m[1])
            for m, end in zip(found, ends, strict=True)}


@functools.cache
def _library() -> dict[str, tuple[int, tuple[str, ...], bool]]:
    """The run-time library's inlined functions (parsed once per process)."""
    root = Path(__file__).resolve().parent.parent
    out: dict[str, tuple[int, tuple[str, ...], bool]] = {}
    for rel in _LIBRARY:
        out.update({k: v for k, v in _functions((root / rel).read_text()).items() if v[2]})
    return out


class InlineSizes:
    """Estimated blocks of functions after inlining: the run-time library's inlined functions,
    plus the generated functions :meth:`add` registers.  A call of any other function is an
    ordinary call (numba compiles that function on its own).  Cost: O(size of the sources), memoised."""

    def __init__(self) -> None:
        self._defs: dict[str, tuple[int, tuple[str, ...], bool]] = dict(_library())
        self._size: dict[str, int] = {}

    def add(self, source: str) -> None:
        """Register the ``inline="always"`` functions defined in ``source`` (generated code)."""
        new = _generated(source)
        if self._size.keys() & new.keys():   # (a redefinition: sizes computed through it are stale)
            self._size.clear()
        self._defs.update(new)

    def size(self, name: str) -> int:
        """Blocks of function ``name`` (registered) with its inlined callees expanded.  A
        recursive cycle (none in ddms's library) counts once."""
        if name not in self._size:
            self._size[name] = 1   # (guards a cycle)
            own, calls, _ = self._defs[name]
            self._size[name] = 1 + own + sum(self.code(c) for c in calls)
        return self._size[name]

    def code(self, call: str) -> int:
        """Blocks a call of ``call`` adds to its caller: the inlined body and the split around it,
        or nothing for an ordinary call (it stays one instruction of its block)."""
        return 2 + self.size(call) if self._defs.get(call, (0, (), False))[2] else 0

    def lines(self, lines: list[str]) -> int:
        """Blocks of a function body made of ``lines`` (statements, indented alike)."""
        own, calls = _own_text("\n".join(lines))
        return 1 + own + sum(self.code(c) for c in calls)
