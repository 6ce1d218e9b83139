"""An edited kernel never runs stale from numba's cache (ddms/numbacache.py).

Each case runs a fresh interpreter twice over a temp copy of a two-file package: the caller
(``caller.py``, cached, file untouched) inlines a callee of another file (``callee.py``); between
the runs only the callee is edited.  With ddms's locator the second run must see the edit; with
numba's own locators it does not (the control proves the test can fail).  ~10 s (4 small compiles).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddms.numbacache import LOCATORS, closure_hash, import_closure, source_root

REPO = Path(__file__).resolve().parent.parent

CALLER = """from numba import njit

from kpkg.callee import value


@njit(cache=True)
def total(n):
    s = 0
    for i in range(n):
        s += value(i)
    return s
"""
CALLEE = """from numba import njit


@njit(cache=True, inline="always")
def value(i):
    return i * {factor}
"""


def _package(root: Path, factor: int) -> None:
    pkg = root / "kpkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text(CALLER)
    (pkg / "callee.py").write_text(CALLEE.format(factor=factor))


def _run(root: Path, cache: Path, locators: str) -> int:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "NUMBA_CACHE_LOCATOR_CLASSES": locators,
           "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "DDMS_NUMBA_PACKAGES": "kpkg"}
    code = "from kpkg.caller import total; print(total(4))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("locators, stale", [(LOCATORS, False), ("", True)], ids=["ddms", "numba-default"])
def test_edited_callee_recompiles_cached_caller(tmp_path, locators, stale):
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    _package(src, 1)
    assert _run(src, cache, locators) == 0 + 1 + 2 + 3
    assert any(cache.rglob("caller.total-*.nbi")), "the caller was not cached"
    (src / "kpkg" / "callee.py").write_text(CALLEE.format(factor=10))
    assert _run(src, cache, locators) == (6 if stale else 60)


def test_closure_covers_transitive_and_relative_imports(tmp_path):
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("from p.sub.c import x\n")
    (pkg / "sub" / "c.py").write_text("import os\nx = 1\n")
    (tmp_path / "loose.py").write_text("import p.a\n")
    assert source_root(str(pkg / "a.py")) == str(tmp_path)
    assert source_root(str(tmp_path / "loose.py")) is None
    names = [str(Path(p).relative_to(tmp_path)) for p in import_closure(str(pkg / "a.py"))]
    assert names == ["p/__init__.py", "p/a.py", "p/sub/__init__.py", "p/sub/b.py", "p/sub/c.py"]
    before = closure_hash(str(pkg / "a.py"))
    (pkg / "sub" / "c.py").write_text("import os\nx = 2\n")
    assert closure_hash(str(pkg / "a.py")) != before


def test_ddms_kernels_are_in_their_callers_closure():
    closure = {str(Path(p).relative_to(REPO)) for p in import_closure(str(REPO / "ddms" / "io" / "lobster.py"))}
    assert {"ddms/io/kernels/ordertable.py", "ddms/io/kernels/decimal.py", "ddms/io/orderbook.py"} <= closure
    fills = {str(Path(p).relative_to(REPO)) for p in import_closure(str(REPO / "replay" / "fills.py"))}
    assert "ddms/io/kernels/ordertable.py" in fills
    assert os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES") == LOCATORS   # set by ddms/__init__.py


def test_only_claimed_packages_are_served(tmp_path, monkeypatch):
    """Third-party packages keep numba's own locators (their files are not hashed)."""
    from numba.core import config

    from ddms.numbacache import ClosureLocator

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "cache"))   # from_function makes its folder
    _package(tmp_path, 1)
    caller = str(tmp_path / "kpkg" / "caller.py")
    monkeypatch.delenv("DDMS_NUMBA_PACKAGES", raising=False)
    assert ClosureLocator.from_function(_package, caller) is None
    monkeypatch.setenv("DDMS_NUMBA_PACKAGES", "kpkg")
    assert ClosureLocator.from_function(_package, caller) is not None
    assert ClosureLocator.from_function(_package, str(REPO / "ddms" / "io" / "orderbook.py")) is not None


def _run_stats(root: Path, cache: Path) -> tuple[int, int]:
    """(result, cache hits) of ``total(4)`` in a fresh interpreter with ddms's locator."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "NUMBA_CACHE_LOCATOR_CLASSES": LOCATORS,
           "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "DDMS_NUMBA_PACKAGES": "kpkg"}
    code = ("from kpkg.caller import total; r = total(4); "
            "print(r, sum(total.stats.cache_hits.values()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    r, hits = out.stdout.strip().splitlines()[-1].split()
    return int(r), int(hits)


def test_a_copy_of_the_same_sources_elsewhere_loads_the_cached_code(tmp_path):
    """A fresh clone or a wheel install (another path, new modification times) of the same
    sources loads the machine code compiled for the first copy; a copy whose callee differs
    compiles its own, beside it (the first copy still loads its code afterwards)."""
    cache = tmp_path / "cache"
    first, same, edited = tmp_path / "first", tmp_path / "same", tmp_path / "edited"
    for root, factor in ((first, 1), (same, 1), (edited, 10)):
        root.mkdir()
        _package(root, factor)
    assert _run_stats(first, cache) == (6, 0)
    assert _run_stats(same, cache) == (6, 1)
    assert _run_stats(edited, cache) == (60, 0)
    assert _run_stats(first, cache) == (6, 1)


def test_import_index_remembers_parses_by_content(tmp_path, monkeypatch):
    """Each file's imported modules are parsed once per content and remembered in numba's cache
    folder (a start of ``ddms run`` used to spend ~0.1 s parsing the closure): a later process
    reads the index instead of parsing; an edited file is looked up by its new content; a corrupt
    index file costs only the parses."""
    import json

    from numba.core import config

    from ddms import numbacache

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "cache"))
    pkg = tmp_path / "q"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from q import b\n")
    (pkg / "b.py").write_text("x = 1\n")
    (pkg / "c.py").write_text("x = 2\n")

    def closure() -> list[str]:
        monkeypatch.setattr(numbacache, "_INDEX", numbacache._ImportIndex())   # a new process
        numbacache._imports.cache_clear()
        return [Path(p).name for p in import_closure(str(pkg / "a.py"))]

    assert closure() == ["__init__.py", "a.py", "b.py"]
    index = tmp_path / "cache" / "ddms_import_index.json"
    entries = json.loads(index.read_text())
    assert any(["q", ["b"]] in e for e in entries.values())
    # the index is what a later process reads: an entry naming c instead of b is followed
    index.write_text(json.dumps({k: [["q", ["c"]]] if ["q", ["b"]] in v else v for k, v in entries.items()}))
    assert closure() == ["__init__.py", "a.py", "c.py"]
    (pkg / "a.py").write_text("from q import b  # edited\n")            # new content: parsed again
    assert closure() == ["__init__.py", "a.py", "b.py"]
    index.write_text("{ not json")
    (pkg / "a.py").write_text("from q import b\n")
    assert closure() == ["__init__.py", "a.py", "b.py"]
    assert json.loads(index.read_text())                                 # rewritten whole


@pytest.mark.parametrize("first", ["import numba", "pass"], ids=["numba-first", "ddms-first"])
def test_ddms_locator_even_when_numba_is_imported_first(tmp_path, first):
    """A script that imports numba before ddms (numba has read its configuration already) still
    caches ddms's kernels in ddms's cache folder through :class:`ClosureLocator`."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_CACHE_LOCATOR_CLASSES")}
    env.update(XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(REPO))
    code = (f"{first}\nimport ddms\nfrom ddms.io.kernels import decimal\n"
            "loc = decimal._digits8._cache._impl.locator\n"
            "print(type(loc).__name__, loc.get_cache_path())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    name, path = out.stdout.split()
    assert name == "ClosureLocator" and path.startswith(str(tmp_path / "ddms" / "numba")), out.stdout


def test_cache_folders_are_checked_once_per_process(tmp_path, monkeypatch):
    """numba proves a cache folder writable (a temporary file) for every kernel it meets; ddms's
    locators do it once per folder and process (~200 kernels a start), for package files
    (ClosureLocator) and for files outside any package, the generated programs (ProgramLocator,
    numba's own folder and stamp otherwise: entries stay shared with numba's locator)."""
    from numba.core import config
    from numba.core.caching import UserProvidedCacheLocator, _CacheLocator

    from ddms import numbacache
    from ddms.numbacache import ClosureLocator, ProgramLocator

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(numbacache, "_ENSURED", set())
    checks: list[str] = []
    real = _CacheLocator.ensure_cache_path

    def counted(self) -> None:
        checks.append(self.get_cache_path())
        real(self)

    monkeypatch.setattr(_CacheLocator, "ensure_cache_path", counted)
    _package(tmp_path, 1)
    loose = tmp_path / "loose.py"
    loose.write_text("def f():\n    pass\n\n\ndef g():\n    pass\n")
    ns: dict = {}
    exec(compile(loose.read_text(), str(loose), "exec"), ns)
    for _ in range(3):
        assert ClosureLocator.from_function(_package, str(REPO / "ddms" / "io" / "orderbook.py")) is not None
        a, b = ProgramLocator.from_function(ns["f"], str(loose)), ProgramLocator.from_function(ns["g"], str(loose))
        assert a.get_cache_path() == b.get_cache_path()
        numba_own = UserProvidedCacheLocator(ns["f"], str(loose))
        assert (a.get_cache_path(), a.get_source_stamp()) == (numba_own.get_cache_path(), numba_own.get_source_stamp())
    assert len(checks) == 2 == len(set(checks))
    assert all(os.path.isdir(p) for p in checks)


def test_object_symbols_are_the_bitcode_definitions():
    """The names :func:`elf_defined_symbols` reads from a compiled object are the names numba
    takes from the same module's bitcode (what a cached load used to parse), for a kernel with a
    callee linked in and strings, arrays and exceptions (constants, helper globals)."""
    import numpy as np
    from llvmlite import binding as ll
    from numba import njit

    from ddms.numbacache import elf_defined_symbols

    @njit
    def callee(a, i):
        if i >= a.size:
            raise IndexError("past the end")
        return a[i] * 2.0

    @njit
    def caller(a):
        s = 0.0
        for i in range(a.size):
            s += callee(a, i)
        return s + len(str(a.size))

    caller(np.ones(3))
    for fn in (callee, caller):
        lib = fn.overloads[fn.signatures[0]].library
        _, kind, (obj, bitcode) = lib.serialize_using_object_code()
        assert kind == "object"
        mod = ll.parse_bitcode(bitcode)
        expected = {g.name for gs in (mod.functions, mod.global_variables) for g in gs if not g.is_declaration}
        assert expected and elf_defined_symbols(obj) == expected
    assert elf_defined_symbols(b"not an object") is None
    assert elf_defined_symbols(b"\x7fELF\x02\x01" + b"\0" * 10) is None   # truncated: numba's way instead


CACHED_CALLEE = """from numba import njit


@njit(cache=True)
def value(i):
    return i * {factor}
"""
NEW_CALLER = """from numba import njit

from kpkg.callee import value


@njit
def total(n):
    s = 0
    for i in range(n):
        s += value(i)
    return s
"""


def test_a_cached_callee_links_into_a_new_caller(tmp_path):
    """A function loaded from the cache (its linking bitcode not parsed at load) is linked into a
    function compiled afterwards: the bitcode is parsed then, the result is right."""
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text(CACHED_CALLEE.format(factor=3))
    (pkg / "caller.py").write_text(NEW_CALLER)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_CACHE_LOCATOR_CLASSES": LOCATORS,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "DDMS_NUMBA_PACKAGES": "kpkg"}
    code = ("import ddms.numbacache\nfrom kpkg.callee import value\nr = value(2)\n"
            "from kpkg.caller import total\n"
            "print(r, total(4), sum(value.stats.cache_hits.values()))")
    outs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        outs.append(out.stdout.split())
    assert outs[0] == ["6", "18", "0"]
    assert outs[1] == ["6", "18", "1"]      # loaded, then linked into the new caller


def test_an_index_naming_a_module_gone_reads_as_empty(tmp_path):
    """An index whose pickled signatures name a module that no longer imports (a generated
    program removed from the cache) is an empty index: the kernel compiles and the index is
    rewritten, instead of numba raising ModuleNotFoundError for every later use."""
    import pickle
    import types

    import numba
    from numba.core.caching import IndexDataCacheFile

    import ddms.numbacache  # noqa: F401  (installs the tolerant index)

    gone = types.ModuleType("ddms_prog_gone_for_test")
    exec("class StateType:\n    pass\n", gone.__dict__)
    gone.StateType.__module__ = gone.__name__
    sys.modules[gone.__name__] = gone
    try:
        blob = pickle.dumps(("stamp", {("sig", gone.StateType()): "f-1.nbc"}))
    finally:
        del sys.modules[gone.__name__]
    index = IndexDataCacheFile(str(tmp_path), "f", "stamp")
    with open(tmp_path / "f.nbi", "wb") as f:
        pickle.dump(numba.__version__, f, protocol=-1)
        f.write(blob)
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(blob)
    assert index._load_index() == {}
    index.save(("new",), b"data")
    assert index._load_index() == {("new",): "f.1.nbc"}


def _branchy(x):
    """A callee of several blocks and variables, for the inliner's copies."""
    s = 0
    for i in range(x):
        if i % 3 == 0:
            s += i
        elif i % 3 == 1:
            s -= 1
        else:
            s *= 2
    return s


def test_the_inliner_copies_a_callee_scope_once_per_inline():
    """numba's inliner deep-copies a callee block by block; inside one ``inline_ir`` the per-block
    copies share one copy of the callee's ``Scope`` (ddms.numbacache._install_shared_inline_scope),
    outside it each copy has its own, and an inlined callee still computes what Python does."""
    import copy

    import numba
    from numba.core import compiler
    from numba.core import inline_closurecall as icc

    from ddms import numbacache

    assert numbacache._copies_per_block(icc.InlineWorker.inline_ir.__wrapped__)   # the numba it was written for
    assert icc.InlineWorker._ddms_shared_scope
    assert not numbacache._copies_per_block(_branchy)   # the guard refuses another shape
    ir = compiler.run_frontend(_branchy)
    assert len(ir.blocks) > 4
    scope = next(iter(ir.blocks.values())).scope
    def scopes(blocks):
        return {id(v.scope) for b in blocks for st in b.body for v in st.list_vars()}

    apart = [copy.deepcopy(b) for b in ir.blocks.values()]
    assert len({id(b.scope) for b in apart}) == len(ir.blocks)   # numba's own copy: one scope per block
    numbacache._SCOPE_COPIES.memo = {}
    try:
        copies = [copy.deepcopy(b) for b in ir.blocks.values()]
    finally:
        numbacache._SCOPE_COPIES.memo = None
    shared = scopes(copies) | {id(b.scope) for b in copies}
    assert len(shared) == 1 and shared != {id(scope)}
    assert len(copies[0].scope.localvars) == len(scope.localvars)

    inlined = numba.njit(inline="always")(_branchy)

    @numba.njit
    def caller(n):
        return inlined(n) + inlined(n + 1) * 2

    assert [caller(n) for n in range(12)] == [_branchy(n) + _branchy(n + 1) * 2 for n in range(12)]


def test_the_scope_fixup_visits_each_scope_once_and_defines_what_numba_does():
    """ddms.numbacache's ``fixup_var_define_in_scope`` (each distinct scope once) leaves every scope
    with the variables, in the order, numba's own (each block's scope, blocks x variables) does,
    over blocks that share a scope and blocks with scopes of their own (numba's per-block copies)."""
    import copy

    from numba.core import compiler, ir_utils, untyped_passes

    from ddms import numbacache

    assert numbacache._NUMBA_FIXUP is not None   # installed on this numba
    assert ir_utils.fixup_var_define_in_scope is numbacache._fixup_var_define_in_scope
    assert untyped_passes.fixup_var_define_in_scope is numbacache._fixup_var_define_in_scope
    ir = compiler.run_frontend(_branchy)
    labels = sorted(ir.blocks)
    for blk in ir.blocks.values():   # an emptier shared scope: only the variables block 0 uses
        blk.scope.localvars._con = {}
    results = []
    for fixup in (numbacache._NUMBA_FIXUP, numbacache._fixup_var_define_in_scope):
        blocks = {lb: copy.deepcopy(ir.blocks[lb]) for lb in labels}   # each block its own scope
        shared = blocks[labels[0]].scope
        for lb in labels[: len(labels) // 2]:   # half the blocks share the first block's scope
            blocks[lb].scope = shared
        fixup(blocks)
        results.append([list(blocks[lb].scope.localvars._con) for lb in labels])
    assert results[0] == results[1]
    assert len(results[0][0]) > 10


def _violators(x, y):
    """Variables assigned in several places and read after loops and branches: SSA violators."""
    a = 0.0
    b = x
    for i in range(x):
        if i % 2:
            a += i
            b = a * 2
        elif y > i:
            a -= y
        else:
            while a > 10:
                a /= 2
    c = a if b > y else b
    return a + b + c


def test_ssa_rewrites_only_the_blocks_naming_a_variable_and_builds_what_numba_does():
    """ddms.numbacache's ``_run_ssa`` (each violator's rewrites visit only the blocks naming it)
    gives numba's SSA form statement for statement (names of the versions and phi nodes
    included) and defines the same variables in the scope, on copies of one function's blocks;
    and a function compiled with it computes what Python does."""
    import copy

    import numba
    from numba.core import compiler, ssa

    from ddms import numbacache

    assert numbacache._NUMBA_RUN_SSA is not None and ssa._run_ssa is numbacache._run_ssa   # installed
    for f in (_violators, _branchy):
        ir = compiler.run_frontend(f)
        out = []
        for run in (numbacache._NUMBA_RUN_SSA, numbacache._run_ssa):
            blocks = run(copy.deepcopy(ir.blocks))
            out.append([(lb, [str(s) for s in b.body], list(b.scope.localvars._con)) for lb, b in blocks.items()])
        assert out[0] == out[1]
        assert any("phi" in s for _, body, _ in out[0] for s in body)   # (violators were fixed)
    assert numba.njit(_violators)(7, 3.0) == _violators(7, 3.0)


def test_bitset_live_map_is_numbas_live_map():
    """ddms.numbacache's ``_compute_live_map`` (bit sets) returns numba's live map, block for block,
    on every call numba makes while compiling functions with loops, branches, SSA violators and
    inlined callees (each call is checked against numba's own); the compiled function computes
    what Python does."""
    import numba
    from numba.core import analysis, ir_utils

    from ddms import numbacache

    assert numbacache._NUMBA_LIVE_MAP is not None   # installed on this numba
    assert analysis.compute_live_map is numbacache._compute_live_map
    assert ir_utils.compute_live_map is numbacache._compute_live_map
    calls = []

    def both(cfg, blocks, var_use_map, var_def_map):
        ours = numbacache._compute_live_map(cfg, blocks, var_use_map, var_def_map)
        assert ours == numbacache._NUMBA_LIVE_MAP(cfg, blocks, var_use_map, var_def_map)
        calls.append(sum(map(len, ours.values())))
        return ours

    scope = {"inlined": numba.njit(inline="always")(_branchy), "violators": numba.njit(_violators)}
    exec("def caller(x, y):\n    return inlined(x) + violators(x, y) + inlined(x + 1)\n", scope)
    analysis.compute_live_map = ir_utils.compute_live_map = both
    try:
        assert numba.njit(scope["caller"])(7, 3.0) == _branchy(7) + _violators(7, 3.0) + _branchy(8)
    finally:
        analysis.compute_live_map = ir_utils.compute_live_map = numbacache._compute_live_map
    assert len(calls) > 10 and max(calls) > 20   # (many calls, non-trivial live sets)
