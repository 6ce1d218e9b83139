"""numba's disk cache, keyed on a kernel's whole import closure instead of its own file.

Why: numba (``cache=True``) reuses machine code while the *function's own file* is unchanged
(its index is stamped with that file's hash).  A kernel inlines or calls kernels of other files
(the order-id table of :mod:`ddms.io.kernels.ordertable`, the decimal parser of
:mod:`ddms.io.kernels.decimal`), and an edit there leaves the caller's file untouched: numba
would load the caller's stale machine code, with the old callee compiled in.

:class:`ClosureLocator` is numba's user-directory locator with one change: the source stamp of a
function in a package file is the hash of that file AND of every file of the same source tree
it imports, directly or through others (``import``/``from`` statements anywhere in the file,
found by an AST walk; relative imports resolved; only the file's own top-level package and
ddms's, :data:`PROJECT_PACKAGES`, are followed).  Editing any of them makes numba recompile
the caller and overwrite its cache entry.  It is installed by ``ddms/__init__.py`` through
numba's ``NUMBA_CACHE_LOCATOR_CLASSES`` (before numba is imported), ahead of numba's own
locators, which keep serving files outside a package (generated programs: their module name
carries a digest of the run-time libraries instead, :mod:`ddms.backend.codegen`).

The entry's folder is named by the file's package-relative folder and its closure hash, and
stamped with that hash alone (no absolute path, no modification time): a fresh clone, a wheel
install or a touched file with the same sources loads the machine code compiled by another
(numba links callees into the cached object code, so equal sources mean equal code); an edit
anywhere in the closure compiles into a new folder, so checkouts of different commits sharing
one cache keep their entries side by side.

Cost: the closure is looked up once per process per file, when the first cached kernel of a
file is loaded or compiled, never at import: each file's imported modules are parsed once per
content and remembered in ``ddms_import_index.json`` in numba's cache folder (:class:`_ImportIndex`).
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import json
import os
import pickle
import sys
import threading

from numba.core import config
from numba.core.caching import UserProvidedCacheLocator

__all__ = ["LOCATORS", "PROJECT_PACKAGES", "ClosureLocator", "ProgramLocator", "import_closure", "source_root"]

LOCATORS = ("ddms.numbacache.ClosureLocator,ddms.numbacache.ProgramLocator,InTreeCacheLocator,"
            "UserWideCacheLocator,IPythonCacheLocator,ZipCacheLocator")
"""The value ``ddms/__init__.py`` gives ``NUMBA_CACHE_LOCATOR_CLASSES``: ours first, then
numba's own list in numba's order (:class:`ProgramLocator` is numba's ``UserProvidedCacheLocator``
checking its folder once per process)."""


PROJECT_PACKAGES = ("ddms", "replay", "strategies")
"""Top-level packages followed through imports (besides the file's own): installed in
site-packages, the source root also holds numpy, numba, ...; their files are not ours to hash."""


def source_root(py_file: str) -> str | None:
    """The directory holding ``py_file``'s top-level package (walk up while ``__init__.py``
    exists), or None for a file outside any package."""
    return _package_root(os.path.dirname(os.path.abspath(py_file)))


@functools.lru_cache(maxsize=256)
def _package_root(d: str) -> str | None:
    """:func:`source_root` of a file in folder ``d``, remembered per process: every kernel of a
    file asks several times (~200 kernels a start, a few ``stat`` calls each), and packages do not
    appear or vanish under a running process."""
    if not os.path.exists(os.path.join(d, "__init__.py")):
        return None
    while os.path.exists(os.path.join(os.path.dirname(d), "__init__.py")):
        d = os.path.dirname(d)
    return os.path.dirname(d)


def _module_file(root: str, dotted: str) -> str | None:
    base = os.path.join(root, *dotted.split("."))
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def _package_of(root: str, path: str) -> list[str]:
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    return rel[:-1] if rel[-1] != "__init__" else rel[:-1]


def _modules_named(data: bytes, path: str, pkg: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """The modules ``data`` (the bytes of ``path``, in package ``pkg``) imports, as
    ``(dotted module, names imported from it)``: relative imports resolved against ``pkg``, an
    ``import a.b`` with no names.  An AST walk: the statements anywhere in the file count
    (deferred imports inside functions too).  Cost: a parse, 2-10 ms a file."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(data, path)):
        if isinstance(node, ast.Import):
            found.extend((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1] if node.level > 1 else pkg
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if mod:
                found.append((mod, tuple(a.name for a in node.names)))
    return found


class _ImportIndex:
    """The modules each source file imports, remembered across processes in one JSON file of
    numba's cache folder, keyed by the SHA-1 of the file's bytes and its package.

    Why: every process that loads a cached kernel computes that kernel's import closure, and
    parsing the closure's few dozen files cost ~0.1 s of a ``ddms run`` whose whole start is
    meant to stay under 0.7 s.  The key is the content, so an edited file is parsed again (the
    entry can never be stale); a lost or corrupt index file costs only the parses.  Writes are
    atomic (a temporary file renamed); two processes writing at once lose at most each other's
    new entries.  Cost: one read of the index per process (well under a millisecond), one SHA-1
    per file (its bytes are read for the closure hash anyway)."""

    def __init__(self) -> None:
        self._entries: dict[str, list[list]] | None = None
        self._dirty = False

    def _path(self) -> str | None:
        return os.path.join(config.CACHE_DIR, "ddms_import_index.json") if config.CACHE_DIR else None

    def _load(self) -> dict[str, list[list]]:
        if self._entries is None:
            self._entries = {}
            path = self._path()
            if path is not None:
                try:
                    with open(path, encoding="utf-8") as f:
                        loaded = json.load(f)
                    if isinstance(loaded, dict):
                        self._entries = loaded
                except (OSError, ValueError):
                    pass
        return self._entries

    def modules(self, path: str, pkg: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        with open(path, "rb") as f:
            data = f.read()
        key = hashlib.sha1(data + b"\0" + ".".join(pkg).encode()).hexdigest()
        entries = self._load()
        hit = entries.get(key)
        if isinstance(hit, list):
            try:
                return [(str(m), tuple(str(n) for n in names)) for m, names in hit]
            except (TypeError, ValueError):
                pass                               # a damaged entry: parse again
        found = _modules_named(data, path, pkg)
        entries[key] = [[m, list(names)] for m, names in found]
        self._dirty = True
        self._save()
        return found

    def _save(self) -> None:
        path = self._path()
        if path is None or not self._dirty:
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self._entries, f)
            os.replace(tmp, path)
            self._dirty = False
        except OSError:
            pass                                   # a read-only cache: parse again next time


_INDEX = _ImportIndex()


@functools.cache
def _imports(path: str, root: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """Files under ``root`` that ``path`` imports (keyed on its stamp: an edit looks again)."""
    found: list[str] = []
    pkg = _package_of(root, path)
    tracked = {*PROJECT_PACKAGES, *pkg[:1]}

    def add(dotted: str) -> None:
        parts = dotted.split(".")
        if parts[0] not in tracked:                 # a third-party package installed beside us
            return
        for i in range(1, len(parts) + 1):          # a.b.c imports a, a.b and a.b.c
            f = _module_file(root, ".".join(parts[:i]))
            if f is not None:
                found.append(f)

    for mod, names in _INDEX.modules(path, tuple(pkg)):
        add(mod)
        if mod.split(".")[0] not in tracked:
            continue
        for name in names:                          # from pkg import module
            f = _module_file(root, f"{mod}.{name}")
            if f is not None:
                found.append(f)
    return tuple(sorted(set(found)))


def import_closure(py_file: str) -> list[str]:
    """``py_file`` and every file of its source tree it imports, transitively (sorted)."""
    root = source_root(py_file)
    start = os.path.abspath(py_file)
    if root is None:
        return [start]
    seen = {start}
    todo = [start]
    while todo:
        p = todo.pop()
        st = os.stat(p)
        for q in _imports(p, root, st.st_mtime_ns, st.st_size):
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return sorted(seen)


def closure_hash(py_file: str) -> str:
    """SHA-256 over the paths (relative to the source root) and bytes of :func:`import_closure`.
    Memoized on the files' stamps (a module's kernels share one hash: a stat per file)."""
    root = source_root(py_file) or os.path.dirname(os.path.abspath(py_file))
    files = import_closure(py_file)
    stamps = tuple((p, (st := os.stat(p)).st_mtime_ns, st.st_size) for p in files)
    return _hash_files(root, stamps)


@functools.lru_cache(maxsize=1024)
def _hash_files(root: str, stamps: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for p, _, _ in stamps:
        h.update(os.path.relpath(p, root).encode() + b"\0")
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def claimed_packages() -> set[str]:
    """Top-level packages whose kernels this locator serves: :data:`PROJECT_PACKAGES` plus the
    comma-separated ``$DDMS_NUMBA_PACKAGES`` (your own package of kernels calling ours)."""
    extra = os.environ.get("DDMS_NUMBA_PACKAGES", "")
    return {*PROJECT_PACKAGES, *(p.strip() for p in extra.split(",") if p.strip())}


def _top_package(py_file: str) -> str | None:
    root = source_root(py_file)
    if root is None:
        return None
    return os.path.relpath(os.path.abspath(py_file), root).split(os.sep)[0]


class ClosureLocator(UserProvidedCacheLocator):
    """numba's ``NUMBA_CACHE_DIR`` locator for functions defined in a file of a claimed package
    (:func:`claimed_packages`), whose source stamp covers the file's import closure (see the
    module docstring).  Other files (scripts, generated modules outside a package, third-party
    packages) are left to numba's locators."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not config.CACHE_DIR or _top_package(py_file) not in claimed_packages():
            return None
        return super().from_function(py_func, py_file)

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        # numba's folder is named by the file's absolute path; ours by the package-relative folder
        # and the closure hash, so equal sources share one entry wherever they are installed and
        # different sources (two checkouts of different commits) keep theirs side by side instead
        # of overwriting each other's index on every switch.
        root = source_root(py_file)
        rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), root)
        self._stamp = closure_hash(py_file)     # the folder's name and the stamp: one closure walk
        digest = hashlib.sha1(f"{rel}\0{self._stamp}".encode()).hexdigest()
        self._cache_path = os.path.join(config.CACHE_DIR, f"{os.path.basename(rel)}_{digest}")

    def ensure_cache_path(self):
        _ensure_once(self.get_cache_path(), super().ensure_cache_path)

    def get_source_stamp(self):
        """The content hash of the file's import closure only (no modification time): a copy of
        the same sources elsewhere, or the same file touched, loads the cached code; any edit in
        the closure compiles again (into another folder, see ``__init__``).  Computed with the
        folder's name (numba asks right after making the locator): the two always agree."""
        return self._stamp


_ENSURED: set[str] = set()


def _ensure_once(path: str, ensure) -> None:
    """numba's ``ensure_cache_path`` (``makedirs`` and a temporary file written, to prove the
    folder writable) once per folder and process instead of once per kernel: ~30 us of CPU and
    ~100 us of wall each, for ~200 kernels of a start.  A failure raises as before (the locator
    is then refused) and is not remembered."""
    if path not in _ENSURED:
        ensure()
        _ENSURED.add(path)


class ProgramLocator(UserProvidedCacheLocator):
    """numba's ``NUMBA_CACHE_DIR`` locator unchanged (same folder, same source stamp: entries
    are shared with it), except that the cache folder is checked once per process
    (:func:`_ensure_once`) rather than once per function: it serves the generated program
    modules, ~50-150 functions each, outside any package."""

    def ensure_cache_path(self):
        _ensure_once(self.get_cache_path(), super().ensure_cache_path)


# -- loading cached machine code without its linking bitcode ----------------------------------
#
# numba caches a function as its object code plus the LLVM bitcode of the same module (kept to
# link the function into *other* functions compiled later).  On every load it parses that bitcode
# (``llvmlite.binding.parse_bitcode``) and walks every function and global of it through the FFI,
# only to learn the names the object defines (``JitEngine._defined_symbols``, which
# ``get_pointer_to_function`` consults).  For a generated program that is 1-3 MB of bitcode:
# 35-90 ms of CPU of a cached ``ddms run`` (vwap, missedtrades), for nothing when nothing is
# compiled afterwards.  The names are in the object's own symbol table: read from there (~1 ms),
# and the bitcode parsed only if the library is ever linked into a new compilation.


def elf_defined_symbols(obj: bytes) -> set[str] | None:
    """Names of the symbols an ELF64 little-endian relocatable object defines (section index not
    UNDEF; file and section symbols left out): exactly the set numba takes from the bitcode of the
    same module (the functions and globals that are not declarations), checked on every entry of
    a cache of ~600.  None when ``obj`` is not such an object or is malformed (the caller then does
    as numba does).  Cost: one pass over the symbol table (~0.1-1 ms)."""
    import struct

    try:
        if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
            return None
        shoff = struct.unpack_from("<Q", obj, 0x28)[0]
        shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
        if shentsize != 64 or shnum == 0:
            return None
        sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * 64) for i in range(shnum)]
        names: set[str] = set()
        for _n, kind, _f, _a, off, size, link, _i, _al, entsize in sections:
            if kind != 2:                                  # SHT_SYMTAB
                continue
            if entsize != 24 or link >= shnum:
                return None
            strtab = sections[link][4]
            for st_name, st_info, _other, st_shndx, _v, _s in struct.iter_unpack("<IBBHQQ", obj[off:off + size]):
                if st_shndx == 0 or st_name == 0 or (st_info & 0xF) in (3, 4):   # UNDEF, SECTION, FILE
                    continue
                start = strtab + st_name
                names.add(obj[start:obj.index(b"\0", start)].decode())
        return names
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None


def _install_lazy_linking_bitcode() -> None:
    """Replace ``CPUCodeLibrary._unserialize`` (object-code entries only) and wrap
    ``_get_module_for_linking`` so that a loaded library's bitcode is parsed on first use for
    linking instead of at load; its defined names come from :func:`elf_defined_symbols`.  Every
    other path (bitcode entries, objects that are not ELF64, a numba without these internals,
    ``DDMS_NUMBA_EAGER_BITCODE=1``) stays numba's."""
    if os.environ.get("DDMS_NUMBA_EAGER_BITCODE") == "1":
        return
    try:
        from llvmlite import binding as ll
        from numba.core import codegen as cg
        lib_cls, engine_cls = cg.CPUCodeLibrary, cg.JitEngine
        original_unserialize = lib_cls.__dict__["_unserialize"].__func__
        original_linking = lib_cls._get_module_for_linking
    except (ImportError, AttributeError, KeyError):
        return
    if getattr(lib_cls, "_ddms_lazy_bitcode", False) or not hasattr(engine_cls, "_load_defined_symbols"):
        return

    def _unserialize(cls, codegen, state):
        name, kind, data = state
        symbols = elf_defined_symbols(data[0]) if kind == "object" else None
        engine = getattr(codegen, "_engine", None)
        if symbols is None or not isinstance(getattr(engine, "_defined_symbols", None), set):
            return original_unserialize(cls, codegen, state)
        object_code, shared_bitcode = data
        self = codegen.create_library(name)
        assert isinstance(self, cls)
        self.enable_object_caching()
        self._set_compiled_object(object_code)
        self._ddms_linking_bitcode = shared_bitcode
        self._finalize_final_module()
        engine._defined_symbols |= symbols
        return self

    def _get_module_for_linking(self):
        bitcode = self.__dict__.pop("_ddms_linking_bitcode", None)
        if bitcode is not None and self._shared_module is None:
            self._shared_module = ll.parse_bitcode(bitcode)
        return original_linking(self)

    lib_cls._unserialize = classmethod(_unserialize)
    lib_cls._get_module_for_linking = _get_module_for_linking
    lib_cls._ddms_lazy_bitcode = True


def _install_tolerant_index() -> None:
    """A cache index that cannot be read back is an empty index, not an error.

    Why: numba pickles a function's whole index (every signature it was compiled for) in one
    piece, and the signature of a kernel compiled for generated state types (``statecopy.
    set_field`` on each program's state structref) names the generated module that defines them.
    Reading the index imports every such module; one that no longer imports (its program file
    removed from ``~/.cache/ddms/programs``, or written by an older ddms whose modules were
    renamed) raised from inside numba for every later use of the kernel, in every program: a
    checkpoint could no longer be loaded.  Now such an index reads as empty, so the kernel is
    compiled for the signature at hand and the index rewritten (the other signatures compile
    again when next used).  Cost: none on the normal path (one ``try``)."""
    try:
        from numba.core.caching import IndexDataCacheFile
        original = IndexDataCacheFile._load_index
    except (ImportError, AttributeError):
        return
    if getattr(IndexDataCacheFile, "_ddms_tolerant", False):
        return

    def _load_index(self):
        try:
            return original(self)
        except (ImportError, AttributeError, EOFError, TypeError, ValueError, pickle.UnpicklingError):
            return {}

    IndexDataCacheFile._load_index = _load_index
    IndexDataCacheFile._ddms_tolerant = True


def _install_lazy_registries() -> None:
    """A cache load initialises numba's run-time (NRT) only, not its typing and lowering
    registries.

    Why: numba's ``Cache.load_overload`` calls ``target_context.refresh()`` before every load,
    and the first call imports ~40 of numba's implementation modules (``numba.cpython.*``,
    ``numba.np.*``, typed containers, random, polynomial, ...) and installs their registries
    into both contexts: ~0.25 s of a cached ``ddms run``'s ~0.85 s, for machine code that is
    only linked and called, never typed or lowered.  What a loaded entry does need is the NRT
    (its allocator and reference counts), which ``refresh`` initialises on the way
    (``rtsys.initialize``; without it the first allocation crashes).  Everything that types or
    lowers still refreshes first: the compiler refreshes both contexts before every compile,
    and a lowering lookup that misses refreshes and retries.  ``DDMS_NUMBA_EAGER_REFRESH=1``
    keeps numba's behaviour.  Cost: one call into an already initialised NRT per load."""
    if os.environ.get("DDMS_NUMBA_EAGER_REFRESH") == "1":
        return
    try:
        from numba.core.caching import Cache
        from numba.core.runtime import rtsys
        guard = Cache._guard_against_spurious_io_errors
        load = Cache._load_overload
    except (ImportError, AttributeError):
        return
    if getattr(Cache, "_ddms_lazy_registries", False) or not callable(guard) or not callable(load):
        return

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None   # the guard swallowed an I/O error: a miss, as in numba

    Cache.load_overload = load_overload
    Cache._ddms_lazy_registries = True


def _loc_copy(self, memo: dict):
    """``copy.deepcopy`` of a numba source location: a shallow copy (see :func:`_install_shared_source_lines`)."""
    out = object.__new__(type(self))
    out.__dict__.update(self.__dict__)
    memo[id(self)] = out
    return out


def _install_shared_source_lines() -> None:
    """Make numba's deep copies of IR share a location's cached source lines instead of copying them.

    Why: a numba ``ir.Loc`` caches the lines of its whole source file (``Loc.lines``, filled by
    ``get_lines()``), and numba's inliner deep-copies the callee's IR block by block
    (``inline_closurecall.copy_ir``, for every ``inline='always'`` call), each block's copy
    copying that list again.  For a generated program the file is the program itself (~14,000
    lines at ~100 views) and the inlined blocks number in the tens of thousands, so the copies
    cost time and memory ~ blocks x file lines: quadratic in the number of views (each copied
    block's locations keep their own 110 KB list alive in the caller's IR).  A location's fields
    are immutable (file name, line, column, a flag) but for that list, which is never mutated (it
    is linecache's own list), so sharing it is what the copy would mean anyway.  Left alone if
    numba ever defines its own ``Loc.__deepcopy__``.  Cost: none."""
    try:
        from numba.core import ir as nir
    except ImportError:
        return
    if "__deepcopy__" not in vars(nir.Loc):
        nir.Loc.__deepcopy__ = _loc_copy


_SCOPE_COPIES = threading.local()   # .memo: {id(scope): (scope, copy)} while an inline_ir runs, else absent


def _scope_copy(self, memo: dict):
    """``copy.deepcopy`` of a numba ``ir.Scope``: inside one ``InlineWorker.inline_ir``, every deep
    copy of the same scope is the same copy (see :func:`_install_shared_inline_scope`); outside
    it, the default deep copy."""
    shared = getattr(_SCOPE_COPIES, "memo", None)
    if shared is not None:
        hit = shared.get(id(self))
        if hit is not None and hit[0] is self:
            memo[id(self)] = hit[1]
            return hit[1]
    out = object.__new__(type(self))
    memo[id(self)] = out
    out.__dict__.update(copy.deepcopy(self.__dict__, memo))
    if shared is not None:
        shared[id(self)] = (self, out)   # the original kept alive with it: its id is not reused
    return out


_INLINER = "numba.core.inline_closurecall"


def _copies_per_block(inline_ir) -> bool:
    """Whether numba's ``InlineWorker.inline_ir`` is the one :func:`_install_shared_inline_scope` was
    written against: a nested ``copy_ir`` that deep-copies block by block (numba 0.5x-0.68)."""
    code = getattr(inline_ir, "__code__", None)
    nested = [c for c in (code.co_consts if code else ()) if getattr(c, "co_name", "") == "copy_ir"]
    return len(nested) == 1 and "deepcopy" in nested[0].co_names and "blocks" in nested[0].co_names


def _share_inline_scope(icc) -> None:
    """Patch numba's inliner module ``icc`` (see :func:`_install_shared_inline_scope`)."""
    from numba.core import ir as nir
    worker = getattr(icc, "InlineWorker", None)
    if worker is None or getattr(worker, "_ddms_shared_scope", False) or "__deepcopy__" in vars(nir.Scope) \
            or not _copies_per_block(getattr(worker, "inline_ir", None)):
        return
    inline_ir = worker.inline_ir

    @functools.wraps(inline_ir)
    def shared_scope_inline_ir(self, *args, **kwargs):
        outer = getattr(_SCOPE_COPIES, "memo", None)
        _SCOPE_COPIES.memo = {}
        try:
            return inline_ir(self, *args, **kwargs)
        finally:
            _SCOPE_COPIES.memo = outer

    nir.Scope.__deepcopy__ = _scope_copy
    worker.inline_ir = shared_scope_inline_ir
    worker._ddms_shared_scope = True


class _PatchInlinerOnImport:
    """A ``sys.meta_path`` finder that patches numba's inliner module right after numba imports it
    (numba imports it lazily, at its first compile: importing it here would add ~45 ms to every
    ddms start, cached or not).  Finds nothing itself; removes itself once it has fired."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _INLINER:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _share_inline_scope(module)
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass

        spec.loader.exec_module = exec_module
        return spec


def _install_shared_inline_scope() -> None:
    """Make numba's inliner copy a callee's variable table (``ir.Scope``) once per inline, not once per block.

    Why: ``InlineWorker.inline_ir`` (every ``inline='always'`` call, and typed overload inlining)
    copies the callee's IR twice with ``copy_ir``, which deep-copies each block with a fresh memo;
    each block's first variable deep-copies the callee's whole ``Scope`` (every variable of the
    callee, each with its location) again.  One inline then costs blocks x variables in time and
    in memory held until the copies die: quadratic in the callee's size, and a generated
    program's triggers inline the map writers, heaps and hash-table probes of every map they
    touch, each of which inlines its own helpers (bigprog37/38: the 113-view program's trigger
    chunks passed 8 GB there).  numba's own IR, as its interpreter builds it, has one scope per
    function shared by every block; with this patch the copy has that shape too: the per-block
    copies share one copy of the scope (the one inline_ir then renames the callee's variables
    through; every block's scope is replaced by the caller's afterwards).  Applied only while
    numba's inline_ir has the per-block copy this was written against (its nested ``copy_ir`` is
    checked), only if numba defines no ``Scope.__deepcopy__`` of its own, and at numba's own
    import of its inliner (:class:`_PatchInlinerOnImport`); a no-op outside inline_ir.  Cost: one
    dict look-up per deep-copied scope reference."""
    module = sys.modules.get(_INLINER)
    if module is not None:
        _share_inline_scope(module)
    elif not any(isinstance(f, _PatchInlinerOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchInlinerOnImport())


def _fixup_var_define_in_scope(blocks) -> None:
    """numba's ``ir_utils.fixup_var_define_in_scope``, each distinct scope visited once (see
    :func:`_install_scope_fixup_once_per_scope`)."""
    used_var = {}
    for blk in blocks.values():
        for inst in blk.body:
            for var in inst.list_vars():
                used_var[var] = inst
    seen: set[int] = set()
    for blk in blocks.values():
        scope = blk.scope
        if id(scope) in seen:   # every variable is defined in it already: numba's loop would find none
            continue
        seen.add(id(scope))
        localvars = scope.localvars
        for var in used_var:
            if var.name not in localvars:
                localvars.define(var.name, var)


_FIXUP_LOCALS = ("blocks", "used_var", "blk", "scope", "inst", "var")
_NUMBA_FIXUP = None   # numba's own, once replaced (tests compare the two)


def _replace(name: str, old, new, *modules) -> None:
    """Point each of ``modules`` that holds numba's ``old`` under ``name`` (its own module, and
    those that imported it by name) at ``new``."""
    for module in modules:
        if getattr(module, name, None) is old:
            setattr(module, name, new)


def _install_scope_fixup_once_per_scope() -> None:
    """Make numba's ``fixup_var_define_in_scope`` visit each scope once, not once per block.

    Why: after inlining, numba's ``InlineClosureLikes`` pass (run on every function compiled and
    again on every callee the inliner expands, ``InlineWorker.run_untyped_passes``) makes every
    variable used anywhere defined in every block's scope, looping blocks x used variables.
    Inlined blocks all share their caller's scope, so all but the first pass over a scope find
    nothing to add, and the loop is quadratic in the expanded function's size: a 113-view
    program's trigger chunk (thousands of blocks and tens of thousands of variables once its
    statements' map writers are inlined) spent ~20 minutes there (py-spy: ~80% of the samples).
    Visiting each distinct scope once (in the same order, adding the same variables in the same
    order) gives the same IR.  Applied only to the numba function of that shape (its local names
    are checked), in ``ir_utils`` and in ``untyped_passes``, which imported it by name.  Cost:
    one set look-up per block."""
    try:
        from numba.core import ir_utils, untyped_passes
    except ImportError:
        return
    fixup = getattr(ir_utils, "fixup_var_define_in_scope", None)
    if fixup is None or getattr(fixup, "__code__", None) is None or fixup.__code__.co_varnames != _FIXUP_LOCALS:
        return
    global _NUMBA_FIXUP
    _NUMBA_FIXUP = fixup
    _replace("fixup_var_define_in_scope", fixup, _fixup_var_define_in_scope, ir_utils, untyped_passes)


def _ssa_rewrite(ssa, blocks, states, handler, labels) -> None:
    """numba's ``ssa._run_block_rewrite`` in place, over the blocks ``labels`` (in program order):
    the others name none of the variable being fixed, so numba's handlers would return each of
    their statements unchanged (see :func:`_install_ssa_per_variable_blocks`)."""
    for label in labels:
        blk = blocks[label]
        states["label"] = label
        states["block"] = blk
        blk.body = list(ssa._run_ssa_block_pass(states, blk, handler))


def _run_ssa(blocks):
    """numba's ``ssa._run_ssa`` (SSA reconstruction of a function's blocks), each variable's two
    rewrites visiting only the blocks that name it (see :func:`_install_ssa_per_variable_blocks`).
    Returns new blocks, as numba's does (the ones passed in are left as they were)."""
    from collections import defaultdict

    from numba.core import errors, ir, ssa
    if not blocks:
        return {}
    cfg = ssa.compute_cfg_from_blocks(blocks)
    df_plus = ssa._iterated_domfronts(cfg)
    violators = ssa._find_defs_violators(blocks, cfg)
    cache_list_vars = ssa._CacheListVars()
    where: dict[str, list] = defaultdict(list)   # variable -> labels of the blocks naming it, in order
    new = {}
    for label, blk in blocks.items():
        new[label] = copy = ir.Block(scope=blk.scope, loc=blk.loc)
        copy.body = list(blk.body)
        for name in {var.name for stmt in blk.body for var in stmt.list_vars()}:
            where[name].append(label)
    for varname in violators:
        labels = where.get(varname, ())
        states = ssa._make_states(new)
        states["varname"] = varname
        states["defmap"] = defmap = defaultdict(list)
        _ssa_rewrite(ssa, new, states, ssa._FreshVarHandler(), labels)
        states = ssa._make_states(new)
        states["varname"] = varname
        states["defmap"] = defmap
        states["phimap"] = phimap = defaultdict(list)
        states["cfg"] = cfg
        states["phi_locations"] = ssa._compute_phi_locations(df_plus, defmap)
        _ssa_rewrite(ssa, new, states, ssa._FixSSAVars(cache_list_vars), labels)
        for label, philist in phimap.items():
            new[label].body = philist + new[label].body
    if ssa.compute_cfg_from_blocks(new) != cfg:
        raise errors.CompilerError("CFG mutated in SSA pass")
    return new


_SSA_SHAPES = {
    "_run_ssa": ("blocks", "cfg", "df_plus", "violators", "cache_list_vars", "varname", "defmap", "cfg_post"),
    "_fresh_vars": ("blocks", "varname", "states", "defmap", "newblocks"),
    "_fix_ssa_vars": ("blocks", "varname", "defmap", "cfg", "df_plus", "cache_list_vars", "states", "phimap",
                      "newblocks", "label", "philist", "curblk"),
    "_run_block_rewrite": ("blocks", "states", "handler", "newblocks", "label", "blk", "newblk", "newbody", "stmt"),
}
"""numba's SSA functions :func:`_run_ssa` restates, by their local names (the guard)."""
_NUMBA_RUN_SSA = None   # numba's own, once replaced (tests compare the two)


def _install_ssa_per_variable_blocks() -> None:
    """Make numba's SSA reconstruction rewrite, for each variable it fixes, only the blocks that
    name that variable.

    Why: ``ssa._run_ssa`` fixes the variables assigned more than once (every inlined branch or
    loop adds some) one at a time, and for each one rebuilds every block of the function twice,
    calling a Python handler on every statement: variables x statements, quadratic in a function's
    size once inlined (a trigger chunk of ~800 blocks spent ~60 s there at load ~15; a 4,714-block
    one most of 30 minutes).  A statement that does not name the variable comes back unchanged
    from both handlers (they only rename the variable's assignments and uses, and phi nodes go
    where the uses find them, by label), so a block naming it nowhere is left as it is: the same
    IR (tests compare numba's and this one's output), in time linear in the statements naming
    each variable.  Which blocks name a variable is read once: later rewrites rename only the
    variable being fixed (its versions and phi nodes are new names).  Applied only to numba's functions of the
    shape this restates (local names checked).  Cost: one pass over the statements per function."""
    try:
        from numba.core import ssa
    except ImportError:
        return
    for name, shape in _SSA_SHAPES.items():
        f = getattr(ssa, name, None)
        if getattr(f, "__code__", None) is None or f.__code__.co_varnames != shape:
            return
    global _NUMBA_RUN_SSA
    _NUMBA_RUN_SSA = ssa._run_ssa
    ssa._run_ssa = _run_ssa


def _bits(names, index: dict, order: list) -> int:
    """The set ``names`` as a bit set: bit ``index[name]``, numbering names new to ``index`` in
    first-seen order (appended to ``order``)."""
    out = 0
    for name in names:
        i = index.get(name)
        if i is None:
            i = index[name] = len(order)
            order.append(name)
        out |= 1 << i
    return out


def _names(bits: int, order: list) -> set:
    """The names of the bits set in ``bits`` (the inverse of :func:`_bits`).  The bits are read
    from ``bin()``'s text with ``str.find``: time linear in the bits, in C, plus one step per name
    (taking the lowest bit off a big int costs its whole length per name: names x variables)."""
    text = bin(bits)[:1:-1]   # lowest bit first, without "0b"
    out = set()
    i = text.find("1")
    while i >= 0:
        out.add(order[i])
        i = text.find("1", i + 1)
    return out


def _compute_live_map(cfg, blocks, var_use_map, var_def_map):
    """numba's ``analysis.compute_live_map`` (the variables live at the entry of each block) with
    each block's variable sets held as one Python int, a bit per variable (see
    :func:`_install_bitset_live_map`): the same two fix points, in the same block order, over
    the same sets; the result is converted back to numba's ``{label: set of names}``."""
    topo_order = cfg.topo_order()
    index: dict = {}
    order: list = []
    use = {label: _bits(names, index, order) for label, names in var_use_map.items()}
    defs = {label: _bits(names, index, order) for label, names in var_def_map.items()}
    succs = {label: [s for s, _ in cfg.successors(label)] for label in topo_order}
    reach: dict = {}   # numba's def_reach_map: definitions and uses reachable at a block's entry
    while True:
        before = dict(reach)
        for label in topo_order:
            here = reach.get(label, 0) | defs[label] | use[label]
            reach[label] = here
            for s in succs[label]:
                reach[s] = reach.get(s, 0) | here
        if reach == before:
            break
    live = {label: use[label] for label in blocks.keys()}
    preds = {label: [p for p, _ in cfg.predecessors(label)] for label in topo_order}
    rev = topo_order[::-1]
    while True:
        before = dict(live)
        for label in rev:
            here = live[label]
            for p in preds[label]:
                live[p] |= here & reach.get(p, 0) & ~defs[p]
        if live == before:
            break
    return {label: _names(bits, order) for label, bits in live.items()}


_LIVE_MAP_SHAPE = (("cfg", "blocks", "var_use_map", "var_def_map", "fix_point", "def_reach", "liveness", "live_map",
                    "offset"), ("fix_point_progress", "fix_point", "def_reach", "liveness"))
"""numba's ``compute_live_map`` that :func:`_compute_live_map` restates: local names, nested functions."""
_NUMBA_LIVE_MAP = None   # numba's own, once replaced (tests compare the two)


def _install_bitset_live_map() -> None:
    """Make numba's liveness analysis (``analysis.compute_live_map``) work on bit sets.

    Why: numba runs it in its post-processing of a function's IR after nearly every untyped and
    rewrite pass (3,557 times compiling test_sql_columns' 4-view program), and its first fix point
    unions, per block, the set of every variable defined or used on any path to it: blocks x
    variables Python set operations, quadratic in a function's size once triggers and the
    library's helpers are inlined.  It was the largest single cost of compiling a program: 20 of
    the 54 s of that program's compile (cProfile, library cached).  As Python ints, a block's set
    is one machine-word OR per 64 variables: the program compiles in 37 s.  The same fix points
    over the same sets, so the same live maps (tests compare numba's and this one's on every
    function a program compiles) and the same IR.  Applied to numba's function of the shape this
    restates (local and nested names checked), in ``analysis`` and in ``ir_utils``, which imported
    it by name.  Cost: each variable numbered once per call; the result converted back to sets."""
    try:
        from numba.core import analysis, ir_utils
    except ImportError:
        return
    f = getattr(analysis, "compute_live_map", None)
    code = getattr(f, "__code__", None)
    if code is None or (code.co_varnames, tuple(c.co_name for c in code.co_consts if hasattr(c, "co_name"))) \
            != _LIVE_MAP_SHAPE:
        return
    global _NUMBA_LIVE_MAP
    _NUMBA_LIVE_MAP = f
    _replace("compute_live_map", f, _compute_live_map, analysis, ir_utils)


_install_lazy_linking_bitcode()
_install_tolerant_index()
_install_lazy_registries()
_install_shared_source_lines()
_install_shared_inline_scope()
_install_scope_fixup_once_per_scope()
_install_ssa_per_variable_blocks()
_install_bitset_live_map()
