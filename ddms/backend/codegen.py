"""M3 program -> Python source for numba: a pure function of the (verified) program.

Layout of the generated module:

* a ``State`` structref holding every map: a scalar map is a float64 array of length 1; a keyed
  map that no view exposes, or any map of a view of rows (a ladder), that the program only probes
  and updates at one key at a time is a ``ddms.storage.hashtab`` table (float values: one plain
  array, :func:`_point_candidates`; a view of rows' maps updated together at one key share one
  table as its value columns, one probe an event: ``hgroups``); any
  other keyed map is a numba ``Dict`` from a float64 key tuple to its nonzero value, plus one secondary index
  (partial key -> set of full keys) for every slice pattern the program reads, plus, for ORDERED
  maps, a range-cumulative B+-tree (``ddms.storage.btree``) over the last key, one tree per value of
  the other keys, found through a ``ddms.storage.hashtab`` table (a plain array: one field load);
* one ``@njit(cache=True)`` function per map writer and per statement, the statements inlined
  into the trigger that runs them (in chunks of ``STATEMENTS_PER_FUNCTION``), and short triggers
  inlined into ``run_batch`` / ``flush`` (``INLINE_BUDGET``);
* ``run_batch``: the loop over a columnar event batch that dispatches to the triggers and, when
  views are watched, returns to Python after a line that changed one (and only then);
* ``flush``: the deferred ``:=`` statements (``deferral.py``) of the triggers that fired, grouped
  by identical statement lists (an insert and a delete trigger usually share one), run by
  ``run_batch`` after each line while views are watched and at the end of the batch; a group of
  keyed statements (a per-symbol view) runs once for each key (symbol) recorded since, in a hash
  table per group (``lazy_keys_<g>``: a probe per event, a store per key new since the flush).

Expressions compile by continuation: ``_emit(e, env, k)`` writes the loops that enumerate the
bindings of ``e`` and calls ``k(value, env)`` to write the code that consumes each value.  Two
shapes are recognised and compiled to O(log n) range-map calls instead of loops:

* range sum     ``AggSum([..], M[.., Q] * {Q op x})``    M ORDERED on Q, x bound
* threshold sum ``AggSum([], A[.., P] * {X cmp RS(P)})``  A ORDERED on P, RS(P) a range sum over
  an ORDERED B compared with P, X independent of P (VWAP's "volume above me below k * total")

``Max/Min`` over the ordered key of an ORDERED map reads the tree's extreme key, ``Max(x, M[x], n)``
its n-th key (``btree_nth``: a select by rank, the cut of a top-N), ``Max(x, M[x], n rows)`` the key
of its n-th row (``btree_nth_row``: by weighted rank, the cut of a top-N over orders).  Every other
shape compiles to loops over hash maps and their indexes; ``plan`` lists which was chosen.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ddms.backend.cutguard import GroupGuards, group_guards
from ddms.backend.deferral import deferred_maps, keyed_deferred_maps, statement_key
from ddms.backend.fusion import runs, tree_groups
from ddms.backend.generated import Generated
from ddms.backend.inlinesize import InlineSizes
from ddms.errors import CompileError, ProgramError
from ddms.m3.ir import (
    INT_BITS,
    Add,
    AggSum,
    Cmp,
    Const,
    Div,
    Expr,
    Extreme,
    Func,
    Lift,
    MapDecl,
    MapRef,
    Mod,
    Mul,
    Neg,
    Program,
    Statement,
    Trigger,
    Var,
    map_reads,
    variables,
    walk,
)
from ddms.m3.printer import print_expr, print_program
from ddms.m3.verify import outputs, verify

CODEGEN_VERSION = "41.1"
STATEMENTS_PER_FUNCTION = 16
"""Statements are inlined into the function that calls them, at most this many per function:
numba links the callee libraries (the range trees) into every compiled function, so fewer
functions compile much faster (sobi.m3: 61 s -> 18 s cold), while compile time of one function
grows faster than its size (10/50/200 statements: about 2/8/79 s), so functions stay small."""
PF_AHEAD = 4
"""``run_batch`` starts loading the range-tree leaves event ``i + PF_AHEAD`` will update while it
applies event ``i`` (``btree_prefetch``), once a tree is too big for the caches.  Measured at 1M
distinct prices (``python -m bench --only depth``, ns per line): VWAP 743 -> 659-670, SOBI
984 -> 772-787; 8 or 16 events ahead were no better, and also prefetching the bottom internal
level twice as far ahead was slower.  Below ``btree.PF_LEAVES`` leaves it is skipped (one test per batch)."""
PF_HASH_AHEAD = 24
"""The same for hash-table rows and EXTREME windows (``ht_prefetch``, ``xh_prefetch``): a probe
and an add are cheaper than a tree update, so the load must start more events ahead to have
landed.  Measured at 1M distinct prices (best bid: an EXTREME map, ns per line): 59 without, 46
at 4 events ahead, 34 at 12; with the state borrowed in ``run_batch`` (no fencing reference
counts per event, stop 35), 27.0 at 12 against 23.9 at 24 and 25.7 at 32 (100k: 25.5 / 26.4 /
25.2, within the noise)."""
PF_PATH = 2
"""With a range tree per slice (per symbol), every row of the updated tree is cold, root included,
so a leaf prefetch's own descent would wait on memory: ``run_batch`` starts loading levels 0 ..
PF_PATH - 1 of such a tree's path (``btree_prefetch_level``), level ``l`` ``PF_SLICE * (PF_PATH + 1
- l)`` events ahead, and its leaf ``PF_SLICE`` ahead, so that each stage descends through rows an
earlier one loaded.  Measured on a pool of 1,000 trees of 500 keys (a delete and an insert a line,
random tree): 893 ns/line without prefetch, 459 with the leaf's alone 4 ahead, 337 with the path 12,
8, 4 ahead, 281 with it 6, 4, 2 ahead (185 for one tree of 500 keys).  The path stages run only
while the pool's trees average two leaves or more (``btree_deep``, tested once per batch): a tree
per price level at distinct prices is a leaf of one order, and each stage would probe the slice's
root table again for a node the leaf stage loads anyway."""
PF_SLICE = 2
"""Events between two prefetch stages of a per-slice tree's path (see ``PF_PATH``)."""
PF_LEAF = 64
"""The last stage's level: at least any tree's depth (``btree.MAXD``), so it loads the leaf."""
PF_ROOT_LEAF = -2
"""The leaf stage's level code while a pool's trees are shallow (no path stages ran: see
``PF_PATH``): descend from the slice's root to the leaf (``PF_LEAF`` levels), not from the ring."""
PF_ROOT_AHEAD = 4
"""Events ahead of the leaf stage of a per-slice tree while its pool's trees are shallow (no path
stage ran: ``PF_PATH``): the stage probes the root table (its row loaded ``PF_HASH_AHEAD`` ahead)
and loads the first blocks of the leaf it names, which must land before the update.  Measured
(top5_bid_order_volume, 1M distinct prices, CPU time, load 7-10 on 2 cores, two rounds): ahead
4: 463 / 457 ns/line, 6: 439 / 500, 8: 532 / 489; the base (leaf stage 2 ahead, no root-table
row prefetch) 586 / 825 in the same session."""
PF_RING = 8
"""Rows of ``run_batch``'s ring of prefetched refs (``pfr``): a power of two above the farthest
stage's distance, ``PF_SLICE * PF_PATH``.  Each stage of a per-slice tree's path stores the node it
loaded in row ``event & (PF_RING - 1)``, and the next stage of the same event starts its descent
there (``btree_prefetch_level`` from a ref), not at the root: one root-table probe and one node
search per event for the path instead of one probe per stage and a descent from the root each
(measured on a pool of 1,000 trees of 500 keys, a delete and an insert a line, load ~10:
503 -> 473 ns/line)."""
PF_EVENTS = True
"""The path stages (``PF_PATH``) count their distances in events that update a per-slice tree,
not in all events: ``run_batch`` lists those events of its range once (``pf_events``, O(n)) and,
at the k-th of them, prefetches for the (k + 6)-th, (k + 4)-th and (k + 2)-th (ring row: the rank
k, ``PF_RING``); the other events (a stream no per-slice tree reads: the asks of a bid-side view)
run no prefetch test at all.  Why: tested per event, each stage's test ``i + a`` lands on a
random mix of relevant and irrelevant events, three unpredictable branches per event that stall
the very misses the stages should overlap.  Measured on the tree layer alone (1,000 trees of 500
keys, bid and ask events mixed, asks no-ops, CPU time, load ~15 on 2 cores): 551 ns per bid line
per event, 465 counted in tree events, 441 for the bids alone (one tree: 314 / 314 / 297).  In
``bench.symbols``' bid-side VWAP (asks half the lines): 1,000 instruments 2-8% cheaper, ratio to one
instrument 2.12-2.22x -> 2.02-2.06x at load 10-15, 1.84x -> 1.78x at load 3.4; SOBI (every event
updates a per-symbol tree) unchanged within the noise."""
LAZY_KEYS_SMALL = 16
"""A keyed deferred group records the keys (symbols) its triggers touched in a hash table
(``lazy_keys_<g>``: one probe per event, a store only for a key new since the last flush); the flush
scans its rows, so one grown past this many rows by a big batch is replaced by a small one when a
flush finds it mostly empty (per-line flushes while views are watched stay cheap)."""
CHUNK_BLOCKS = 2000
"""A trigger's statements go into functions of at most this many numba blocks, as estimated once
every inlined callee is expanded (``ddms.backend.inlinesize``; the estimate runs 1.1-1.4x numba's
count), as well as at most ``STATEMENTS_PER_FUNCTION`` statements; a one-statement trigger past it
is compiled on its own, not into ``run_batch``.  Why: numba's untyped passes cost more than linear
time and memory in a function's size once inlined (SSA reconstruction, variables x statements, now
patched in ``ddms.numbacache``; liveness, blocks x variables): a 16-statement chunk of qa36 that
expanded to 4,714 blocks took 30 minutes and 4.6 GB.  A statement's own text does not show its
size (an EXTREME map's writer inlines a window, a table probe and a heap update: ~130 blocks behind
one line).  Why not smaller: each function compiled costs a fixed part too (numba links and
re-optimises the library code it calls into each): qa36's 25-view ``on_insert_BIDS`` (810 blocks)
took 375 s whole and 395 + 147 s as two chunks (632 + 179 blocks), three chunks of ~270 blocks
422 s, all at load 13-30 on 2 cores.  No program of ``examples/``, ``bench/``, the finance
queries, or any single qa view but the NULLIF blow-ups reaches it."""
INLINE_BUDGET = STATEMENTS_PER_FUNCTION
"""Triggers inline into ``run_batch`` (and deferred groups into ``flush``) while their statements
add up to at most this many.  Every compiled function that reaches a range-tree update links and
re-optimises the tree's whole update code (numba links callee libraries into each caller): a
separate trigger function costs about 4 s of compile time for that alone, so vwap.m3's program
compiles in about 9 s instead of 17 s with cached trees, while a long program keeps one function
per trigger (one function's compile time grows faster than its size)."""

WATCH_INLINE_BUDGET = 24
"""``run_batch`` compiles the per-line checks of the watched views (the scalar views' snapshot
before a line, the comparison of every view map after it) into its loop while the program
exposes at most this many maps; past it they are two functions of their own
(``watch_snap``, ``watch_changes``), called once per line only while views are watched.  Why:
numba's untyped passes keep, for every block of a function, the set of variables live there
(``compute_live_map``): memory and time grow as blocks x variables, quadratic in a function's
size.  A run_batch holding the checks of every view of a 91-view program (plus its prefetch
stages, ``PREFETCH_INLINE_BUDGET``) needed 7 GB at 25 views and over 19 GB at 91 while numba
compiled it; out of line, each part is compiled once at its own size.  Cost past the budget: a
call per line while watched (a program that large does far more work per line)."""
PREFETCH_INLINE_BUDGET = 64
"""``prefetch`` / ``prefetch_hash`` (the loads ``run_batch`` starts events ahead) are inlined at
each of their call sites (one per prefetch stage) while the prefetch calls they hold, times the
sites, add up to at most this many; past it they are functions of their own, called per event
and stage (see ``WATCH_INLINE_BUDGET`` for why: a 25-view program inlined ~540 probe-and-load
sequences, each with its own loops, into run_batch)."""


def _chunks(units: list[list[str]], blocks: list[int]) -> list[list[str]]:
    """``units`` (a trigger's statement calls, a statement with the shared boundaries it needs
    being one unit) in order, cut into chunks of at most ``STATEMENTS_PER_FUNCTION`` lines and
    ``CHUNK_BLOCKS`` estimated blocks (``blocks``, one per unit); a unit past either is a chunk of
    its own.  O(units)."""
    out: list[list[str]] = []
    size = 0
    for u, b in zip(units, blocks, strict=True):
        if out and len(out[-1]) + len(u) <= STATEMENTS_PER_FUNCTION and size + b <= CHUNK_BLOCKS:
            out[-1] += u
            size += b
        else:
            out.append(list(u))
            size = b
    return out


def _inlined(sizes: list[int]) -> set[int]:
    """Indexes of the functions (by statement count, in program order) to inline into their caller:
    the smallest first, while the total stays within ``INLINE_BUDGET``.  O(n log n)."""
    chosen: set[int] = set()
    total = 0
    for i in sorted(range(len(sizes)), key=lambda i: (sizes[i], i)):
        if total + sizes[i] > INLINE_BUDGET:
            break
        chosen.add(i)
        total += sizes[i]
    return chosen


_PY_CMP = {"=": "==", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_RT_FUNC = {"round": "f_round", "trunc": "f_trunc", "floor": "f_floor", "ceil": "f_ceil", "sign": "f_sign",
            "abs": "f_abs", "nullif": "f_nullif", "coalesce": "f_coalesce", "greatest": "f_greatest",
            "least": "f_least", "if": "f_if", "mul": "f_mul"}
"""The ``ddms.backend.rt`` function computing each SQL function of ``Func`` (the integer casts: ``f_int``)."""


def _call(name: str, args: list[str]) -> str:
    """The call computing ``Func(name, args)`` from its arguments' code: ROUND/TRUNC take their
    precision or NaN (none), a cast ``f_int`` its type's range."""
    if name in ("round", "trunc"):
        return f"{_RT_FUNC[name]}({args[0]}, {args[1] if len(args) > 1 else 'np.nan'})"
    if name in _RT_FUNC:
        return f"{_RT_FUNC[name]}({', '.join(args)})"
    bits = INT_BITS[name]
    return f"f_int({args[0]}, {-(2.0 ** (bits - 1))!r}, {2.0 ** (bits - 1) - 1!r})"
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
_SIGN = {"max": "1.0", "min": "-1.0"}   # ddms.storage.extheap: a max-heap of sign * key


def _xfields(m: MapDecl) -> list[tuple[str, str, str, str]]:
    """(extreme, value-table field, heap field, window field) of each ``ddms.storage.extheap``
    instance of an EXTREME map: one per extreme it is read by (the first also answers its point
    reads); the instances share one window (it keeps both ends)."""
    return [(kind, *(f"x{f}{'' if j == 0 else 'n'}_{m.name}" for f in "th"), f"xw_{m.name}")
            for j, kind in enumerate(m.extremes)]
_OPCODE = {"<": 0, "<=": 1, ">": 2, ">=": 3}  # ddms.storage.btree.OP_CODES (not imported: no numba here)


@dataclass
class _Fn:
    """Lines of one generated function body, with the current indentation, and the reads it
    hoists to its top (code -> local name; see :meth:`_Codegen._hoist`)."""

    lines: list[str] = field(default_factory=list)
    depth: int = 1
    temps: int = 0
    hoisted: dict[str, str] = field(default_factory=dict)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def temp(self, prefix: str = "t") -> str:
        self.temps += 1
        return f"{prefix}{self.temps}"

    def body(self) -> list[str]:
        """The lines, after one assignment per hoisted read the lines use."""
        used = set(re.findall(r"\bh_\w+", "\n".join(self.lines)))
        for code, name in reversed(self.hoisted.items()):   # a hoisted read may use an earlier one
            if name in used:                                 # (an extreme of a slice: its root)
                used.update(re.findall(r"\bh_\w+", code))
        return [f"    {name} = {code}" for code, name in self.hoisted.items() if name in used] + self.lines


class _NeedsHash(Exception):
    """Raised while generating code for a map assumed tree-only that is read in a way its range
    trees cannot answer (a loop over some but not all of its prefix keys, or over none):
    :func:`generate` tries again with that map keeping its hash map."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _NeedsDict(Exception):
    """Raised while generating code for a map assumed point-only (:func:`_point_candidates`) that
    is iterated, cleared or indexed: :func:`generate` tries again with that map in a typed
    ``Dict``."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _point_candidates(program: Program, tree_only: frozenset[str]) -> frozenset[str]:
    """Keyed maps that may live in a ``ddms.storage.hashtab`` table (float-valued) instead of a
    typed ``Dict``: those no query exposes that have no range tree, and every map of a view of
    rows (a ladder: its values and its count of rows, an ORDERED one keeping its range trees
    beside the table), EXTREME ones and ones living in their range trees alone (``tree_only``)
    excepted.  They stay there if the program only probes and updates them at one key at a time (a
    count per broker beside a grouped MAX, a per-symbol total, a ladder's volume per price);
    :class:`_NeedsDict` moves a map that turns out to be iterated, cleared or indexed back to a
    ``Dict``.  Python reads a view's table through ``ddms.runtime.typedio.HashTable``.

    Why: a typed-``Dict`` probe and store cost ~30 ns and a reference-count pair per state field
    read, and at a million keys 200-300 ns of waiting on memory, never prefetched; a table probe is
    a hash and a compare on one plain array, prefetched a few events ahead (``PF_AHEAD``) once the
    table is big (the best bid per broker: 87 -> ~60 ns a line with its count there; bid_ladder at
    1M distinct prices ~1,180 -> ~320 ns).  The maps of other views (grouped, scalar-keyed) keep
    their ``Dict``: not measured yet."""
    views = {m for q in program.queries for m in q.exposed}
    rows = {m for q in program.queries if q.limit is not None for m in q.exposed}
    return frozenset(m.name for m in program.maps
                     if m.keys and m.extreme is None and m.name not in tree_only
                     and (m.name in rows or (not m.ordered and m.name not in views)))


def _tree_only_candidates(program: Program) -> frozenset[str]:
    """ORDERED maps that may live in their range trees alone (no hash map beside them): maps no
    query exposes, never the target of a ``:=`` that fixes some of its keys (that clears one
    slice; a whole-map ``:=`` of a one-key map frees its tree), and, with prefix keys, never the
    target of any ``:=``."""
    views = {m for q in program.queries for m in q.exposed}
    out = set()
    for m in program.maps:
        if not m.ordered or not m.keys or m.name in views:
            continue
        assigned = [(s, t) for t in program.triggers for s in t.statements
                    if s.op == ":=" and s.target.name == m.name]
        if len(m.keys) > 1 and assigned:
            continue
        if any(k in t.args for s, t in assigned for k in s.target.keys):
            continue
        out.add(m.name)
    return frozenset(out)


class _Codegen:
    def __init__(self, program: Program, tree_only: frozenset[str] = frozenset(),
                 point: frozenset[str] = frozenset(),
                 deferred: tuple[frozenset[str], frozenset[str]] | None = None) -> None:
        self.p = program
        self.tree_only = tree_only
        self.point = point   # keyed maps stored in hash tables (float values), not typed Dicts
        self.decl = {m.name: m for m in program.maps}
        self.mid = {m.name: i for i, m in enumerate(program.maps)}
        self.indexes: dict[str, set[tuple[int, ...]]] = {m.name: set() for m in program.maps}
        self.plan: list[str] = []
        self.functions: list[str] = []
        self.arity = {m.name: len(m.keys) for m in program.maps}
        self.view_maps = {m for q in program.queries for m in q.exposed}
        self._cuts: dict[tuple, tuple[str, str]] = {}   # threshold boundaries computed by the trigger
        self._fn: _Fn | None = None    # the function being generated (where reads are hoisted)
        self._hoisted = 0
        self._known: dict[str, str] = {}   # hash probe code -> the loop value that holds it
        # (deferred: both analyses, when the caller has them: they depend on the program alone)
        self.deferred, self.keyed = deferred or (deferred_maps(program), keyed_deferred_maps(program))
        # self.keyed: deferred per touched key (disjoint from self.deferred)
        self.lazy_groups = 0
        self.keyed_groups = 0
        self.cut_groups: dict[int, GroupGuards] = {}   # deferred group -> its cuts and guards (cutguard.py)
        # maps stored as the columns of one range tree (fusion.py): map -> (tree, column), the
        # tree named after its first map; maps absent here have a tree of their own
        self.groups = tree_groups(program, tree_only)
        self.tree = {name: (g[0], c) for g in self.groups for c, name in enumerate(g)}
        self.columns = {g[0]: len(g) for g in self.groups}   # tree -> its number of columns
        # the maps of a view of rows kept in hash tables and updated together at one key (a
        # ladder's volume, order count and row count per price): the value columns of one table
        # (hashtab.ht_newv), found and written by one probe -- the same analysis as the trees'
        # (fusion.py), over those maps; map -> (table, column), the table named after its first map
        rows = {m for q in program.queries if q.limit is not None for m in q.exposed}
        self.hcands = frozenset(point & rows)
        self.hgroups = tree_groups(program, self.hcands)
        self.htab = {name: (g[0], c) for g in self.hgroups for c, name in enumerate(g)}
        self._prefetch: list[tuple[str, str, int]] = []   # the trigger being generated: (tree, key, arity) it updates
        self.prefetch: dict[str, list[tuple[str, str, int]]] = {}   # trigger function -> the same
        self.pfh_body: dict[str, str] = {}   # trigger function -> the body of its pfh_ function
        self._ranks = False   # whether some read is a select by rank (imports btree_nth)
        self._nullmul = False   # whether some product has a factor that can be NaN (imports mul0)
        # the EXTREME maps' windows, hoisted into run_batch's locals (see _hx_tuple): their fields
        # in order; the trigger functions then take (st, hx) where they took st
        self.hx = [w for m in program.maps if m.extreme for _, _, _, w in _xfields(m)[:1]]
        self.S = "st, hx" if self.hx else "st"
        self._sizes_: InlineSizes | None = None

    @property
    def _sizes(self) -> InlineSizes:
        """Estimated blocks of the generated functions once inlined (``CHUNK_BLOCKS``): the
        library's and every map's writers registered on first use (a writer's text depends on
        the indexes found so far only through calls it does not inline)."""
        if self._sizes_ is None:
            self._sizes_ = InlineSizes()
            self._sizes_.add("\n\n".join(f for m in self.p.maps for f in self.map_functions(m)))
        return self._sizes_

    # -- helpers ------------------------------------------------------------------------------
    def _m(self, name: str) -> MapDecl:
        return self.decl[name]

    @staticmethod
    def _tuple(items: list[str]) -> str:
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def _hoist(self, code: str, parts: list[str]) -> str:
        """``code``, a hash probe of a map with the key ``parts``, or -- if the key is made of
        event values only and a function is being generated -- a local name for it, assigned once
        at the top of the function (:meth:`_Fn.body`): one probe per statement however often the
        statement reads the entry.  Exact because a statement reads every map before it writes
        any (a statement that reads its own target is buffered), and a boundary function writes
        none."""
        fn = self._fn
        if fn is None or not all(p.startswith("a_") for p in parts):
            return code
        if code not in fn.hoisted:   # names unique per module: boundary code shares its trigger's body
            self._hoisted += 1
            fn.hoisted[code] = f"h_{self._hoisted}"
        return fn.hoisted[code]

    def _probe(self, name: str, parts: list[str]) -> str:
        """Code reading hash map ``name`` at the key ``parts`` (0.0 if absent)."""
        if name in self.htab:
            tab, c = self.htab[name]
            return f"ht_getc(borrow(st.m_{tab}), {self._tuple(parts)}, np.int64({c}), 0.0)"
        if name in self.point:
            return f"ht_getf(borrow(st.m_{name}), {self._tuple(parts)}, 0.0)"
        if self._m(name).extreme:
            return f"xh_get(borrow(st.xt_{name}), borrow(st.xw_{name}), {parts[0]})"
        return f"st.m_{name}.get({self._tuple(parts)}, 0.0)"

    def _dict(self, name: str) -> None:
        """``name`` is about to be iterated, cleared or indexed: it needs a typed Dict."""
        if name in self.point:
            raise _NeedsDict(name)
        if self._m(name).extreme:   # (verify admits no such read: ddms.m3.extremes.check_extreme)
            raise CompileError(f"map {name} is EXTREME {self._m(name).extreme.upper()}: it cannot be iterated")

    def _tree_of(self, name: str) -> str:
        """The name of the range tree(s) holding ordered map ``name``: its own, or a shared one's."""
        return self.tree.get(name, (name, 0))[0]

    def _pool(self, name: str) -> str:
        """Code for the node pool of ordered map ``name``'s range trees."""
        return f"borrow_pool(st.op_{self._tree_of(name)})"   # (btree.borrow_pool: no reference count)

    def _col(self, name: str) -> str:
        """The column argument of a range-tree call reading map ``name`` (0 for a tree of its own),
        typed int64 rather than a literal: numba compiles one specialization of a callee per
        literal argument value, so literal columns multiplied the tree code compiled (and linked
        into every caller) by the column count, for no measurable speed."""
        return f", np.int64({self.tree[name][1] if name in self.tree else 0})"

    def _cols(self, a: str, b: str) -> str:
        """The column arguments (A's, B's) of a threshold call, int64 as in :meth:`_col`."""
        return f", np.int64({self.tree.get(a, (a, 0))[1]}), np.int64({self.tree.get(b, (b, 0))[1]})"

    def _root(self, m: MapDecl, env: dict[str, str], keys: tuple[str, ...]) -> str:
        """Code for the range-tree root of the slice of ordered map ``m`` fixed by the prefix keys."""
        tree = self._tree_of(m.name)
        if len(m.keys) == 1:
            return f"borrow(st.or_{tree})[0]"
        parts = [env[k] for k in keys[:-1]]
        return self._hoist(f"ht_get(borrow(st.or_{tree}), {self._tuple(parts)}, -1)", parts)   # -1: the empty tree

    def _ordered_slice(self, ref: MapRef, env: dict[str, str]) -> bool:
        """True if ``ref`` reads an ORDERED map with only its last (ordered) key unbound."""
        m = self._m(ref.name)
        return (m.ordered and ref.keys[-1] not in env and ref.keys[-1] not in ref.keys[:-1]
                and all(k in env for k in ref.keys[:-1]))

    def _tree_only(self, name: str) -> bool:
        """A map of ``tree_only`` (see :func:`_tree_only_candidates`) lives in its range trees
        alone, one per value of its prefix keys (no hash map): an update is one slice-root probe
        plus one O(log n) descent instead of hash probes plus a descent."""
        return name in self.tree_only

    def _closed(self, e: Expr, env: dict[str, str]) -> bool:
        return not outputs(e, frozenset(env), self.arity)

    def _ready(self, e: Expr, env: dict[str, str]) -> bool:
        """``e`` reads only variables bound in ``env`` and binds none: it can be evaluated here."""
        try:
            return self._closed(e, env)
        except ProgramError:
            return False

    def _in_place(self, name: str, pos: tuple[int, ...]) -> bool:
        """A ``:=`` of the whole map ``name`` (no key fixed by the event: ``pos`` empty) is written
        in place, only the groups that changed; other ``:=`` slices are cleared and re-added."""
        return not pos and not self._tree_only(name)

    # -- scalar (loop-free) expressions ---------------------------------------------------------
    def _inline(self, e: Expr, env: dict[str, str]) -> str | None:
        """A single Python expression for ``e`` if it needs no loop and no statement, else None."""
        match e:
            case Const(value):
                return repr(float(value))
            case Var(name):
                return env.get(name)
            case MapRef(name, keys) if all(k in env for k in keys):
                if not keys:
                    return f"st.m_{name}[0]"
                if self._tree_only(name):
                    return (f"btree_get({self._pool(name)}, {self._root(self._m(name), env, keys)}, "
                            f"{env[keys[-1]]}{self._col(name)})")
                parts = [env[k] for k in keys]
                code = self._probe(name, parts)
                return self._known.get(code) or self._hoist(code, parts)
            case Neg(x):
                inner = self._inline(x, env)
                return None if inner is None else f"(-{inner})"
            case Add(terms) | Mul(terms):
                parts = [self._inline(t, env) for t in terms]
                if any(p is None for p in parts):
                    return None
                if isinstance(e, Mul) and any(isinstance(t, Cmp) for t in terms):
                    # a comparison filters: a product whose test fails is 0 even if another factor
                    # is NaN (NULL), as in the loop form (``if test:``) and the interpreter
                    tests = [str(self._test(t, env)) for t in terms if isinstance(t, Cmp)]
                    rest = [(t, p) for t, p in zip(terms, parts, strict=True) if not isinstance(t, Cmp)]
                    return f"({self._product_code(rest)} if {' and '.join(tests)} else 0.0)"
                if isinstance(e, Mul):
                    return self._product_code(list(zip(terms, parts, strict=True)))
                return "(" + " + ".join(parts) + ")"
            case Div(num, den):
                a, b = self._inline(num, env), self._inline(den, env)
                return None if a is None or b is None else f"div({a}, {b})"
            case Mod(num, den):
                a, b = self._inline(num, env), self._inline(den, env)
                return None if a is None or b is None else f"mod({a}, {b})"
            case Func(name, args):
                parts = [self._inline(a, env) for a in args]
                return None if any(p is None for p in parts) else _call(name, parts)
            case Cmp():
                test = self._test(e, env)
                return None if test is None else f"(1.0 if {test} else 0.0)"
        return None

    def _product_code(self, factors: list[tuple[Expr, str]]) -> str:
        """Code for the product of ``factors`` (each an expression and its inline code) with M3's
        semantics: 0 if any factor is 0, even when another is NaN (SQL NULL: the MAX of an empty
        slice, a quotient by 0), as the interpreter, not IEEE's NaN.  The factors that cannot be
        NaN multiply plainly; each that can joins through ``mul0`` (one compare more).  Without
        it a NULL-guarded lift (``K ^= s + n * (0 / 0)``, n = 0: a SUM over only NULLs, 0 by the
        convention) became a NaN key of an ordered map, which the tree refuses at run time."""
        plain = [p for t, p in factors if not _nan_factor(t)]
        code = " * ".join(plain) or "1.0"
        nullable = [p for t, p in factors if _nan_factor(t)]
        if not nullable:
            return f"({code})"
        self._nullmul = True
        if not plain:
            code, nullable = nullable[0], nullable[1:]
        for p in nullable:
            code = f"mul0({code}, {p})"
        return code

    def _test(self, c: Cmp, env: dict[str, str]) -> str | None:
        """A Python boolean expression for a loop-free comparison (false when a side is NaN)."""
        x, y = self._inline(c.left, env), self._inline(c.right, env)
        if x is None or y is None:
            return None
        return f"ne({x}, {y})" if c.op == "!=" else f"({x} {_PY_CMP[c.op]} {y})"

    # -- expressions by continuation --------------------------------------------------------
    def _value(self, fn: _Fn, e: Expr, env: dict[str, str]) -> str:
        """Code for the value of a closed expression; loops go into a temporary accumulator."""
        inline = self._inline(e, env)
        if inline is not None:
            return inline
        special = self._special(fn, e, env)
        if special is not None:
            return special
        acc = fn.temp("acc")
        fn.line(f"{acc} = 0.0")
        for part in _summands(e):
            self._emit(fn, part, env, lambda v, _env: fn.line(f"{acc} += {v}"))
        return acc

    def _special(self, fn: _Fn, e: Expr, env: dict[str, str]) -> str | None:
        """O(log n) code for the range-map shapes, or None."""
        if isinstance(e, Extreme) and e.kind in self._m(e.ref.name).extremes and e.n == 1 and not e.rows \
                and e.ref.keys == (e.var,) and e.var not in env:
            name = e.ref.name
            self.plan.append(f"  {e.kind}({name}) via extreme heap: O(1) read, O(log n) update when the extreme "
                             "empties")
            [(heap, win)] = [(h, w) for kind, _, h, w in _xfields(self._m(name)) if kind == e.kind]
            call = self._hoist(f"xh_top(borrow(st.{heap}), borrow(st.{win}), {_SIGN[e.kind]})", [])
            return f"({call}[1] if {call}[0] else np.nan)"
        if isinstance(e, Extreme):
            ref = e.ref
            if self._ordered_slice(ref, env) and ref.keys[-1] == e.var:
                root = self._root(self._m(ref.name), env, ref.keys)
                col = self._col(ref.name)
                if e.rows:   # the cut of a top-N over single rows: select by weighted rank
                    self._ranks = True
                    call = f"btree_nth_row({self._pool(ref.name)}, {root}, {e.n}, {e.kind == 'max'}{col})"
                    self.plan.append(f"  {e.kind}({ref.name}, row {e.n}) via range map: O(log n)")
                elif e.n == 1:
                    call = f"btree_{e.kind}({self._pool(ref.name)}, {root}{col})"
                    self.plan.append(f"  {e.kind}({ref.name}) via range map: O(log n)")
                else:   # the cut of a top-N: select by rank
                    self._ranks = True
                    call = f"btree_nth({self._pool(ref.name)}, {root}, {e.n}, {e.kind == 'max'}{col})"
                    self.plan.append(f"  {e.kind}({ref.name}, rank {e.n}) via range map: O(log n)")
                # a slice fixed by event values only (or the whole tree) is read once per statement,
                # however often the statement's expression repeats it (a spread or a mid written
                # with subqueries names the best bid several times): one descent, and one inlined
                # copy of the tree search instead of several, which also cuts the compile time
                hoisted = self._hoist(call, [env[x] for x in ref.keys[:-1]])
                if hoisted != call:
                    return f"({hoisted}[1] if {hoisted}[0] else np.nan)"
                f, k = fn.temp("found"), fn.temp("key")
                fn.line(f"{f}, {k} = {call}")
                return f"({k} if {f} else np.nan)"
            return None
        if not isinstance(e, AggSum) or any(g not in env for g in e.group):
            return None
        rs = self._range_shape(e, env)
        if rs is not None:
            ref, op, bound = rs
            self.plan.append(f"  range sum {ref.name}[{ref.keys[-1]} {op} ...]: O(log n)")
            return (f"range_sum({self._pool(ref.name)}, {self._root(self._m(ref.name), env, ref.keys)}, "
                    f"{_OPCODE[op]}, {self._value(fn, bound, env)}{self._col(ref.name)})")
        ts = self._threshold_shape(e, env)
        if ts is not None:
            a, b, rop, cop, x = ts
            cut = self._cuts.get(_cut_key(b, rop, cop, x))
            if cut is not None and all(env.get(v) == f"a_{v}" for v in variables(x) | set(b.keys[:-1])):
                self.plan.append(f"  threshold sum {a.name} where ({b.name} range) {cop} ...: O(log n), "
                                 f"boundary found once per event, before the statements")
                return (f"threshold_apply({self._pool(a.name)}, {self._root(self._m(a.name), env, a.keys)}, "
                        f"{self._pool(b.name)}, {self._root(self._m(b.name), env, b.keys)}, "
                        f"{_OPCODE[rop]}, {_OPCODE[cop]}, {self._value(fn, x, env)}, {cut[0]}, {cut[1]}"
                        f"{self._cols(a.name, b.name)})")
            self.plan.append(f"  threshold sum {a.name} where ({b.name} range) {cop} ...: O(log n)")
            return (f"threshold_sum({self._pool(a.name)}, {self._root(self._m(a.name), env, a.keys)}, "
                    f"{self._pool(b.name)}, {self._root(self._m(b.name), env, b.keys)}, "
                    f"{_OPCODE[rop]}, {_OPCODE[cop]}, {self._value(fn, x, env)}{self._cols(a.name, b.name)})")
        return None

    def _range_shape(self, e: AggSum, env: dict[str, str]) -> tuple[MapRef, str, Expr] | None:
        """``AggSum(g, M[.., Q] * {Q op x})``, g bound -> (M ref, op as "Q op x", x)."""
        body = e.expr
        if not isinstance(body, Mul) or len(body.factors) != 2:
            return None
        refs = [f for f in body.factors if isinstance(f, MapRef)]
        cmps = [f for f in body.factors if isinstance(f, Cmp)]
        if len(refs) != 1 or len(cmps) != 1 or not self._ordered_slice(refs[0], env):
            return None
        ref, c = refs[0], cmps[0]
        q = ref.keys[-1]
        if c.op not in _OPCODE:
            return None
        if c.left == Var(q) and q not in map_reads(c.right) and self._closed(c.right, env) \
                and Var(q) not in _vars(c.right):
            return ref, c.op, c.right
        if c.right == Var(q) and self._closed(c.left, env) and Var(q) not in _vars(c.left):
            return ref, _FLIP[c.op], c.left
        return None

    def _threshold_shape(self, e: AggSum, env: dict[str, str], loose: bool = False):
        """``AggSum([], A[.., P] * {X cmp RS(P)})`` -> (A, B, rop, cop, X) meaning
        sum of A[p] over p with (sum of B[q], q rop p) cop X.  ``loose``: A's prefix keys need
        not be bound yet (they are where the sum is evaluated, e.g. per output group)."""
        body = e.expr
        if not isinstance(body, Mul) or len(body.factors) != 2:
            return None
        refs = [f for f in body.factors if isinstance(f, MapRef)]
        cmps = [f for f in body.factors if isinstance(f, Cmp)]
        if len(refs) != 1 or len(cmps) != 1:
            return None
        if loose:
            env = {**{k: "__a__" for k in refs[0].keys[:-1]}, **env}
        if not self._ordered_slice(refs[0], env):
            return None
        a, c = refs[0], cmps[0]
        if c.op not in _OPCODE:
            return None
        p = a.keys[-1]
        inner_env = dict(env)
        inner_env[p] = "__p__"
        for side, other in ((c.left, c.right), (c.right, c.left)):
            if not isinstance(side, AggSum) or Var(p) in _vars(other) or not self._closed(other, env):
                continue
            rs = self._range_shape(side, inner_env)
            if rs is None or rs[2] != Var(p):
                continue
            b, rop, _ = rs
            if any(k == p for k in b.keys[:-1]):
                continue
            real_cop = c.op if side is c.left else _FLIP[c.op]
            return a, b, rop, real_cop, other
        return None

    def _shared_cuts(self, t) -> dict[tuple, tuple[int, int, tuple]]:
        """Threshold boundaries of trigger ``t`` that depend only on its arguments and maps, found
        once per event before their first user: when several statements compute one alike (SOBI's
        top-k PV and volume sums), and when one is evaluated per output group (missedtrades: the
        boundary in the bids tree is the same for every broker).  key -> (first statement, last
        statement, (B, rop, cop, X)).  Shared only while no statement from the first user to the
        one before the last writes B or a map X reads, so the boundary is still exact."""
        env0 = {a: f"a_{a}" for a in t.args}
        found: dict[tuple, list] = {}
        for j, s in enumerate(t.statements):
            for node in walk(s.expr):
                if not isinstance(node, AggSum) or node.group:
                    continue
                try:
                    ts = self._threshold_shape(node, env0, loose=True)
                except ProgramError:
                    ts = None
                if ts is None or not variables(ts[4]) | set(ts[1].keys[:-1]) <= env0.keys():
                    continue
                _, b, rop, cop, x = ts
                key = _cut_key(b, rop, cop, x)
                uses = found.setdefault(key, [(b, rop, cop, x), []])[1]
                if j not in uses:
                    uses.append(j)
        out = {}
        for key, (shape, uses) in found.items():
            deps = {shape[0].name} | map_reads(shape[3])
            first, last = uses[0], uses[-1]
            if all(t.statements[j].target.name not in deps for j in range(first, last)):
                out[key] = (first, last, shape)
        return out

    def _emit(self, fn: _Fn, e: Expr, env: dict[str, str], k) -> None:
        """Write loops enumerating (bindings, value) of ``e``; call ``k(value, env)`` for each."""
        inline = self._inline(e, env)
        if inline is not None:
            k(inline, env)
            return
        match e:
            case MapRef(name, keys):
                self._emit_loop(fn, name, keys, env, k)
            case Mul(factors):
                self._emit_product(fn, list(factors), env, "1.0", k)
            case Add(terms):
                if self._closed(e, env):
                    k(self._value(fn, e, env), env)
                else:
                    for t in terms:
                        self._emit(fn, t, env, k)
            case Neg(x):
                self._emit(fn, x, env, lambda v, env2: k(f"(-{v})", env2))
            case Div(num, den):
                self._emit(fn, num, env, lambda v, env2: k(f"div({v}, {self._value(fn, den, env2)})", env2))
            case Mod(num, den):
                self._emit(fn, num, env, lambda v, env2: k(f"mod({v}, {self._value(fn, den, env2)})", env2))
            case Func(name, args):
                self._emit(fn, args[0], env,
                           lambda v, env2: k(_call(name, [v, *(self._value(fn, a, env2) for a in args[1:])]), env2))
            case Cmp(op, a, b):
                x, y = self._value(fn, a, env), self._value(fn, b, env)
                fn.line(f"if ne({x}, {y}):" if op == "!=" else f"if {x} {_PY_CMP[op]} {y}:")
                fn.depth += 1
                k("1.0", env)
                fn.depth -= 1
            case AggSum(group, x):
                if all(g in env for g in group):
                    k(self._value(fn, e, env), env)
                else:
                    self._emit_group(fn, e, env, k)
            case Lift(var, x):
                v = self._value(fn, x, env)
                if var in env:
                    fn.line(f"if {env[var]} == {v}:")
                    fn.depth += 1
                    k("1.0", env)
                    fn.depth -= 1
                else:
                    name = fn.temp("lift")
                    fn.line(f"{name} = {v}")
                    k("1.0", {**env, var: name})
            case Extreme(kind, var, ref, n, rows) if rows:
                v = self._special(fn, e, env)
                if v is None:  # no range map to ask: sort the slice's (key, count) pairs, O(slice log slice)
                    v, ks, left = fn.temp("ext"), fn.temp("keys"), fn.temp("left")
                    fn.line(f"{ks} = [(0.0, 0.0) for _ in range(0)]")

                    def collect_rows(val: str, env2: dict[str, str]) -> None:
                        fn.line(f"if {val} != 0.0:")
                        fn.line(f"    {ks}.append(({'-' if kind == 'max' else ''}{env2[var]}, {val}))")
                    self._emit_loop(fn, ref.name, ref.keys, env, collect_rows)
                    fn.line(f"{ks}.sort()")
                    kv = fn.temp("kv")
                    fn.line(f"{v} = np.nan")
                    fn.line(f"{left} = {float(n)}")
                    fn.line(f"for {kv} in {ks}:")   # the last key of the order unless the rows reach n first
                    fn.line(f"    {v} = {'-' if kind == 'max' else ''}{kv}[0]")
                    fn.line(f"    {left} -= {kv}[1]")
                    fn.line(f"    if {left} <= 0.0:")
                    fn.line("        break")
                    self.plan.append(f"  {kind}({ref.name}, row {n}) by sorting its keys: O(n)")
                k(v, env)
            case Extreme(kind, var, ref, n) if n != 1:
                v = self._special(fn, e, env)
                if v is None:  # no range map to ask: sort the slice's keys, O(slice log slice)
                    v, ks = fn.temp("ext"), fn.temp("keys")
                    fn.line(f"{ks} = [0.0 for _ in range(0)]")

                    def collect(_val: str, env2: dict[str, str]) -> None:
                        fn.line(f"{ks}.append({env2[var]})")
                    self._emit_loop(fn, ref.name, ref.keys, env, collect)
                    fn.line(f"{ks} = sorted(set({ks}))")
                    pick = f"min({n}, len({ks}))"
                    fn.line(f"{v} = ({ks}[-{pick}] if {kind == 'max'} else {ks}[{pick} - 1]) if {ks} else np.nan")
                    self.plan.append(f"  {kind}({ref.name}, rank {n}) by sorting its keys: O(n)")
                k(v, env)
            case Extreme(kind, var, ref):
                v = self._special(fn, e, env)
                if v is None:  # no range map to ask: scan the slice, O(slice)
                    v = fn.temp("ext")
                    fn.line(f"{v} = np.nan")

                    def better(_val: str, env2: dict[str, str]) -> None:
                        x = env2[var]
                        fn.line(f"if {v} != {v} or {x} {'>' if kind == 'max' else '<'} {v}:")
                        fn.line(f"    {v} = {x}")
                    self._emit_loop(fn, ref.name, ref.keys, env, better)
                k(v, env)
            case _:
                raise CompileError(f"cannot compile {print_expr(e)}")

    def _emit_product(self, fn: _Fn, factors: list[Expr], env: dict[str, str], acc: str, k,
                      nullable: bool | None = None, acc_nan: bool = False) -> None:
        if nullable is None:     # once per product: can a factor be NULL (NaN)?
            nullable = any(_may_be_nan(x) for f in factors for x in walk(f))
        if acc == "1.0" and len(factors) > 1:
            # loop-invariant code motion: factors whose variables are all bound now are computed
            # (or tested) before the factors that open loops, not once per iteration
            # a factor may move only if it shares no unbound variable with the others: a later
            # factor's variable bound by an earlier one is an input there, and moving the reader
            # ahead would turn it into a summed-over variable
            names = [variables(f) - env.keys() for f in factors]
            closed = [f for i, f in enumerate(factors)
                      if not isinstance(f, Lift) and self._ready(f, env)
                      and not any(names[i] & names[j] for j in range(len(factors)) if j != i)]
            if closed and len(closed) < len(factors):
                factors = closed + [f for f in factors if f not in closed]
        if not factors:
            k(acc, env)
            return
        head, rest = factors[0], factors[1:]

        head_nan = _nan_factor(head)

        def go(v: str, env2: dict[str, str]) -> None:
            if acc == "1.0":
                prod = v
            elif acc_nan or head_nan:   # 0 * NULL is 0 (M3's product, as the interpreter): see _product_code
                self._nullmul = True
                prod = f"mul0({acc}, {v})"
            else:
                prod = f"{acc} * {v}"
            self._emit_product(fn, rest, env2, prod, k, nullable, acc_nan or head_nan)
        if isinstance(head, Cmp) and nullable:
            # a comparison filters: 0 * NULL (the MAX of an empty slice, a quotient by 0: a
            # factor before or after this one) must be 0, as in the interpreter, not NaN, so the
            # test is a branch here, not a factor
            test = self._test(head, env)
            if test is not None:
                fn.line(f"if {test}:")
                fn.depth += 1
                self._emit_product(fn, rest, env, acc, k, nullable, acc_nan)   # the product so far, unchanged
                fn.depth -= 1
                return
        if isinstance(head, Cmp | Lift) or self._inline(head, env) is not None:
            self._emit(fn, head, env, go)
            return
        if self._closed(head, env):
            v = self._value(fn, head, env)
            if "(" in v and not all(self._ready(f, env) for f in rest):
                t = fn.temp("t")        # a call: once here, not once per iteration of the loops after
                fn.line(f"{t} = {v}")
                v = t
            go(v, env)
            return
        self._emit(fn, head, env, go)

    def _emit_loop(self, fn: _Fn, name: str, keys: tuple[str, ...], env: dict[str, str], k) -> None:
        bound_pos = tuple(i for i, key in enumerate(keys) if key in env)
        kk, vv = fn.temp("k"), fn.temp("v")
        if self._tree_only(name):  # the prefix keys bound, the last not: walk one tree in key order
            if bound_pos != tuple(range(len(keys) - 1)) or keys[-1] in keys[:-1]:
                raise _NeedsHash(name)
            ks, vs, j = fn.temp("ks"), fn.temp("vs"), fn.temp("j")
            fn.line(f"{ks}, {vs} = btree_items({self._pool(name)}, {self._root(self._m(name), env, keys)}"
                    f"{self._col(name)})")
            fn.line(f"for {j} in range({ks}.shape[0]):")
            fn.depth += 1
            fn.line(f"{vv} = {vs}[{j}]")
            self.plan.append(f"  loop over {name}{' slice' if bound_pos else ''} in key order: O(slice)")
            start = fn.depth
            k(vv, {**env, keys[-1]: f"{ks}[{j}]"})
            fn.depth = start - 1
            return
        self._dict(name)
        if bound_pos:
            self.indexes[name].add(bound_pos)
            part = self._tuple([env[keys[i]] for i in bound_pos])
            ix = f"st.ix_{name}_{_mask(bound_pos)}"
            fn.line(f"if {part} in {ix}:")
            fn.depth += 1
            fn.line(f"for {kk} in {ix}[{part}]:")
            fn.depth += 1
            fn.line(f"{vv} = st.m_{name}[{kk}]")
            self.plan.append(f"  loop over {name} slice on keys {list(bound_pos)}: O(slice)")
        else:
            fn.line(f"for {kk}, {vv} in st.m_{name}.items():")
            fn.depth += 1
            self.plan.append(f"  loop over all of {name}: O(n)")
        start = fn.depth
        env2 = dict(env)
        for i, key in enumerate(keys):
            if key in env2:
                if i not in bound_pos:  # repeated loop variable: M[X, X]
                    fn.line(f"if {kk}[{i}] == {env2[key]}:")
                    fn.depth += 1
            else:
                env2[key] = f"{kk}[{i}]"
        # inside the loop, reading the entry being visited (M[K] / M[K]) is the loop's value
        known = self._probe(name, [env2[x] for x in keys])
        self._known[known] = vv
        k(vv, env2)
        del self._known[known]
        fn.depth = start - (2 if bound_pos else 1)

    def _one_per_group(self, e: AggSum, env: dict[str, str], free: list[str]) -> bool:
        """True if ``e``'s body yields each binding of its unbound group variables at most once: one
        map read whose unbound keys are exactly those variables (a loop visits each key once),
        every other factor a single value once they are bound.  Then no grouping dict is needed."""
        factors = e.expr.factors if isinstance(e.expr, Mul) else (e.expr,)
        loops = [f for f in factors if not self._ready(f, env)]
        if len(loops) != 1:
            return False
        env2 = {**env, **dict.fromkeys(free, "0.0")}
        ref = loops[0]
        if isinstance(ref, Div) and self._ready(ref.den, env2):   # the loop of its numerator
            ref = ref.num
        if not isinstance(ref, MapRef):
            return False
        unbound = [x for x in ref.keys if x not in env]
        if len(set(unbound)) != len(unbound) or set(unbound) != set(free):
            return False
        return all(f is loops[0] or (not isinstance(f, Lift) and self._ready(f, env2)) for f in factors)

    def _emit_group(self, fn: _Fn, e: AggSum, env: dict[str, str], k) -> None:
        free = [g for g in e.group if g not in env]
        if self._one_per_group(e, env, free):
            self._emit(fn, e.expr, env, k)
            return
        d = fn.temp("grp")
        fn.line(f"{d} = Dict.empty(key_type=K{len(free)}, value_type=types.float64)")

        def add(v: str, env2: dict[str, str]) -> None:
            key = self._tuple([env2[g] for g in free])
            fn.line(f"{d}[{key}] = {d}.get({key}, 0.0) + {v}")
        self._emit(fn, e.expr, env, add)
        kk, vv = fn.temp("k"), fn.temp("v")
        fn.line(f"for {kk}, {vv} in {d}.items():")
        fn.depth += 1
        k(vv, {**env, **{g: f"{kk}[{i}]" for i, g in enumerate(free)}})
        fn.depth -= 1

    # -- statements -----------------------------------------------------------------------------
    def statement(self, fname: str, s: Statement, args: tuple[str, ...]) -> None:
        fn = self._fn = _Fn()
        env = {a: f"a_{a}" for a in args}
        target = self._m(s.target.name)
        self.plan.append(f"{fname}: {print_expr(s.target)} {s.op} {print_expr(s.expr)}")
        tname = target.name
        if not target.keys:
            v = self._value(fn, s.expr, env)
            if s.op == "+=":   # (one field load, not two: each costs two atomic reference counts)
                fn.line(f"st.m_{tname}[0] += {v}")
            else:
                fn.line(f"w_{tname}(st, (), {v})")
        elif self._single_entry(s, args):
            # a := of the one entry the event's values name (a grouped view re-evaluated at the
            # event's group: a best bid per broker): its value, then one write -- no buffer dict
            # and no slice clear per event
            v = self._value(fn, s.expr, env)
            fn.line(f"w_{tname}(st, {self._tuple([env[k] for k in s.target.keys])}, {v})")
        else:
            bound = [k for k in s.target.keys if k in env]
            buffered = s.op == ":=" or tname in map_reads(s.expr)
            expr = s.expr
            if isinstance(expr, AggSum) and outputs(expr, frozenset(env), self.arity):
                expr = expr.expr  # writes add up per target key anyway: no grouping dict needed
            if buffered:
                if s.op == ":=":   # (a slice cleared, or the whole map rewritten: iterated)
                    self._dict(tname)
                buf = "buf"
                fn.line(f"{buf} = Dict.empty(key_type=K{len(target.keys)}, value_type=types.float64)")

                def put(v: str, env2: dict[str, str]) -> None:
                    key = self._tuple([env2[x] for x in s.target.keys])
                    fn.line(f"{buf}[{key}] = {buf}.get({key}, 0.0) + {v}")
                self._emit(fn, expr, env, put)
                pos = tuple(i for i, x in enumerate(s.target.keys) if x in bound)
                if s.op == ":=" and self._in_place(tname, pos):
                    # the whole map is re-evaluated: write only what changed (w_ returns early on
                    # equal values), then remove the groups that vanished (rare: a list then)
                    fn.line("kept = 0")
                    fn.line(f"for kk, vv in {buf}.items():")
                    fn.line(f"    w_{tname}(st, kk, vv)")
                    fn.line("    if vv != 0.0:")          # stored (a map holds only nonzero values)
                    fn.line("        kept += 1")
                    fn.line(f"if len(st.m_{tname}) > kept:")
                    fn.line(f"    for kk in [k for k in st.m_{tname}.keys() if k not in {buf}]:")
                    fn.line(f"        w_{tname}(st, kk, 0.0)")
                else:
                    if s.op == ":=":
                        if pos:
                            self.indexes[tname].add(pos)
                        fn.line(f"clear_{tname}_{_mask(pos)}(st, {self._tuple([env[x] for x in bound])})")
                    fn.line(f"for kk, vv in {buf}.items():")
                    fn.line(f"    {self._add(tname, 'kk', 'vv')}")
            else:
                def write(v: str, env2: dict[str, str]) -> None:
                    key = self._tuple([env2[x] for x in s.target.keys])
                    fn.line(self._add(tname, key, v))
                if all(x in env for x in s.target.keys):
                    if self._tree_only(tname):
                        self._note_prefetch(tname, self._tuple([env[x] for x in s.target.keys]))
                    elif tname in self.point or target.extreme:
                        self._note_hash_prefetch(tname, self._tuple([env[x] for x in s.target.keys]))
                        if target.ordered:   # (its range tree beside the table: a ladder's rows)
                            self._note_prefetch(tname, self._tuple([env[x] for x in s.target.keys]))
                self._emit(fn, expr, env, write)
        params = ", ".join([self.S, *env.values(), *(v for cut in self._cuts.values() for v in cut)])
        self.functions.append(f"@njit(cache=True, inline='always')\ndef {fname}({params}):\n" + "\n".join(fn.body())
                              + "\n    return\n")
        self._fn = None

    def _single_entry(self, s: Statement, args: tuple[str, ...]) -> bool:
        """A ``:=`` whose target keys are all event values and whose value binds nothing: it
        replaces exactly one entry, so it is a write of one value."""
        env = {a: f"a_{a}" for a in args}
        return (s.op == ":=" and bool(s.target.keys) and all(k in env for k in s.target.keys)
                and not self._tree_only(s.target.name) and self._ready(s.expr, env))

    def _fused(self, t: Trigger) -> dict[int, list[int]]:
        """Statements of ``t`` that update a shared tree together: index of the first -> indexes of
        all, in column order; the others -> [] (emitted with the first).  A group's statements
        fuse when one run holds all of them (fusion.py: its statements commute)."""
        out: dict[int, list[int]] = {}
        for cands, groups in ((self.tree_only, self.groups), (self.hcands, self.hgroups)):
            for run in runs(t, cands):
                at = {t.statements[j].target.name: j for j in run}
                for g in groups:
                    if all(name in at for name in g):
                        idx = [at[name] for name in g]
                        out.update({j: [] for j in idx})
                        out[min(idx)] = idx
        return out

    def fused_statement(self, fname: str, stmts: list[Statement], args: tuple[str, ...]) -> None:
        """One function for the statements ``M_c[keys] += e_c`` of a shared tree: the C
        expressions (event values only), then one ``btree_addv``: one descent."""
        env = {a: f"a_{a}" for a in args}
        for s in stmts:
            self.plan.append(f"{fname}: {print_expr(s.target)} {s.op} {print_expr(s.expr)}")
        name = stmts[0].target.name
        deltas = self._tuple([self._inline(s.expr, env) for s in stmts])
        key = self._tuple([env[k] for k in stmts[0].target.keys])
        params = ", ".join([self.S, *env.values()])
        if name in self.htab:   # the value columns of one hash table: one probe
            tab = self.htab[name][0]
            self.plan.append(f"  one update of hash table {tab}, columns "
                             + ", ".join(s.target.name for s in stmts) + ": one probe")
            self._note_hash_prefetch(tab, key)
            for s in stmts:
                if self._m(s.target.name).ordered:
                    self._note_prefetch(s.target.name, key)
            self.functions.append(f"@njit(cache=True, inline='always')\ndef {fname}({params}):\n"
                                  f"    av_{tab}(st, {key}, {deltas})\n")
            return
        self.plan.append(f"  one update of range tree {self.tree[name][0]}, columns "
                         + ", ".join(s.target.name for s in stmts) + ": one descent")
        self._note_prefetch(name, key)
        self.functions.append(f"@njit(cache=True, inline='always')\ndef {fname}({params}):\n"
                              f"    {self._tree_add(name, 'btree_addv', key, deltas)}\n")

    def _note_prefetch(self, name: str, key: str) -> None:
        """Record that the trigger being generated updates tree-only map ``name`` at ``key``, a
        tuple expression of event values: ``run_batch`` prefetches there ahead (``PF_AHEAD``).
        A map with prefix keys (a tree per symbol or broker) is prefetched in the slice's tree,
        found by its prefix in the root table: with many instruments it is the pool, not one
        tree, that outgrows the caches.  The root table's row of the prefix is prefetched too,
        ``PF_HASH_AHEAD`` events ahead, once the table is big (``ht_big``): every tree stage probes
        it, and a tree per price level at a million distinct prices has a table of 500k rows a
        side (measured, top5_bid_order_volume at 1M, see ``PF_ROOT_AHEAD``)."""
        tree, arity = self._tree_of(name), self.arity[name]
        self._prefetch.append(("tree", tree, key, arity))
        if arity > 1:   # the slice's row in the root table, farther ahead (PF_HASH_AHEAD): the tree
            # stages probe it (ht_get) and would wait on it
            self._prefetch.append(("hash", f"or_{tree}", self._tuple([f"{key}[{p}]" for p in range(arity - 1)]),
                                   arity - 1))

    def _note_hash_prefetch(self, name: str, key: str) -> None:
        """Record that the trigger being generated updates the hash table of map ``name`` (a map
        of ``self.point`` or an EXTREME map's values) at ``key``, a tuple expression of event
        values: ``run_batch`` prefetches its home row ahead, as it does the trees' leaves."""
        fields = [t for _, t, _, _ in _xfields(self._m(name))][:1] or [f"m_{name}"]   # (one window: the first)
        self._prefetch += [("hash", field, key, self.arity[name]) for field in fields]

    @staticmethod
    def _big_test(kind: str, name: str) -> str:
        """Code telling whether structure ``name`` has outgrown the caches (prefetch pays then)."""
        if kind == "tree":
            return f"btree_big(st.op_{name})"
        if name.startswith("xt"):   # an EXTREME map's table and window (ddms.storage.extheap)
            return f"xh_big(st.{name}, st.xw{name[2:]})"
        return f"ht_big(st.{name})"

    def _prefetch_call(self, kind: str, tree: str, key: str, arity: int, level: str = "", ref: str = "") -> str:
        """Code starting to load the leaf of ``tree``'s slice that an update at ``key`` touches
        (``kind`` "tree"; with ``level``: the node that many levels below ``ref``, the slice's
        root by default, on its path: ``btree_prefetch_level``, which returns that node), or the
        home row of ``key`` in the hash table in state field ``tree`` (``kind`` "hash")."""
        if kind == "hash" and tree.startswith("xt"):
            return f"xh_prefetch(borrow(st.{tree}), hx[{self.hx.index('xw' + tree[2:])}], {key}[0])"
        if kind == "hash":
            return f"ht_prefetch(borrow(st.{tree}), {key})"
        fn, lv = ("btree_prefetch_level", f", {level}") if level else ("btree_prefetch", "")
        if ref:
            return f"{fn}(borrow_pool(st.op_{tree}), {ref}, {key}[{arity - 1}]{lv})"
        if arity == 1:
            return f"{fn}(borrow_pool(st.op_{tree}), st.or_{tree}[0], {key}[0]{lv})"
        prefix = self._tuple([f"{key}[{p}]" for p in range(arity - 1)])
        return (f"{fn}(borrow_pool(st.op_{tree}), ht_get(borrow(st.or_{tree}), {prefix}, -1), "
                f"{key}[{arity - 1}]{lv})")

    def _hx_tuple(self) -> str:
        """Code of ``hx``: each EXTREME map's window borrowed from the state (``self.hx``'s order).

        Why: ``run_batch`` (and ``flush``) make it once and pass it to the inlined triggers and
        prefetches, so an event reaches its window cell without reading the state field (the
        meminfo's payload, then the array's data pointer and shape): LLVM cannot keep those
        across the loop, since a window cell's store may alias the state.  A writer that regrows
        a window (rare: the live keys drifted out of it) stores the new one in the state and the
        old one in ``xg_M`` (kept allocated, as ``hx`` may still hold it), emptied by
        ``xh_retire``: its window test fails for every key, so a later add through the stale
        ``hx`` goes through the state, and a prefetch loads the table row instead (a missed hint).
        So no test per event: the stale entry costs the rest of the batch one failed window test
        per add; ``run_batch`` lets the old window go before it returns (:meth:`_bury`)."""
        return "(" + ", ".join(f"borrow(st.{w})" for w in self.hx) + ",)"

    def _bury(self, indent: str) -> str:
        """Lines dropping the windows the EXTREME writers retired during the call (``xg_M``: see
        :meth:`_hx_tuple`) for an empty one; run before ``run_batch`` / ``flush`` return.  O(1)."""
        return "".join(f"{indent}if xh_retired(st.xg{w[2:]}):\n{indent}    st.xg{w[2:]} = xh_new_win()\n"
                       for w in self.hx)

    def _add(self, name: str, key: str, delta: str) -> str:
        """Code adding ``delta`` to ``name[key]`` (key: a tuple expression)."""
        if self._tree_only(name):
            return self._tree_add(name, "btree_add", key, delta + self._col(name))
        return f"a_{name}({self.S if self._m(name).extreme else 'st'}, {key}, {delta})"

    def _tree_add(self, name: str, op: str, key: str, arg: str) -> str:
        """Code applying ``op`` (``btree_add``/``btree_addv``) with ``arg`` at ``key`` to the tree
        holding tree-only map ``name``.  The root array is loaded once: each structref field load
        costs two atomic reference-count updates, a fifth of an in-place tree update."""
        tree = self._tree_of(name)
        if self.arity[name] > 1:
            return f"{op.replace('btree_', '')}_{tree}(st, {key}, {arg})"
        return (f"rt_{tree} = borrow(st.or_{tree}); "
                f"rt_{tree}[0] = {op}(borrow_pool(st.op_{tree}), rt_{tree}[0], {key}[0], {arg})")

    # -- maps -----------------------------------------------------------------------------------
    def map_functions(self, m: MapDecl) -> list[str]:
        """The writers of ``m``: ``s_M(st, key, old, new)`` stores ``new`` over ``old`` keeping
        indexes, range trees and the change log in step; ``w_M(st, key, new)`` assigns and
        ``a_M(st, key, delta)`` adds (one hash lookup for the old value, not two: a ``+=``
        statement is most of what a trigger does, and a typed-Dict probe costs ~30 ns)."""
        i, n = self.mid[m.name], len(m.keys)
        log = (f"    if st.watch[{i}]:\n        st.log_keys_{m.name}.append(key)\n"
               f"        st.log_old_{m.name}.append(old)\n") if m.name in self.view_maps and n else ""
        if not n:
            return [f"@njit(cache=True, inline='always')\ndef w_{m.name}(st, key, new):\n"
                    f"    st.m_{m.name}[0] = new\n"]
        if self._tree_only(m.name):
            if n == 1 or self._tree_of(m.name) != m.name:   # (a shared tree's writers go with its first map)
                return []
            out = [f"@njit(cache=True, inline='always')\ndef add_{m.name}(st, key, delta, c=0):\n"
                   + "\n".join(self._slice_update(m, "btree_add", "delta, c")) + "\n"]
            if m.name in self.tree:
                out.append(f"@njit(cache=True, inline='always')\ndef addv_{m.name}(st, key, deltas):\n"
                           + "\n".join(self._slice_update(m, "btree_addv", "deltas")) + "\n")
            return out
        if m.name in self.htab:
            return [self._hash_group_writer(m.name)] if self.htab[m.name][0] == m.name else []
        if m.name in self.point:
            return self._point_functions(m)
        if m.extreme:
            return [self._extreme_writer(m)]
        body = ["    if old == new:", "        return"]
        if log:
            body.append(log.rstrip("\n"))
        ix_add, ix_del = [], []
        for pos in sorted(self.indexes[m.name]):
            part = self._tuple([f"key[{p}]" for p in pos])
            ix = f"st.ix_{m.name}_{_mask(pos)}"
            ix_add += [f"        if {part} not in {ix}:",
                       f"            {ix}[{part}] = Dict.empty(key_type=K{n}, value_type=types.float64)",
                       f"        {ix}[{part}][key] = 1.0"]
            ix_del += [f"        s = {ix}[{part}]", "        s.pop(key)",
                       "        if len(s) == 0:", f"            {ix}.pop({part})"]
        body += ["    if new == 0.0:", f"        st.m_{m.name}.pop(key)", *ix_del,
                 "    else:", f"        st.m_{m.name}[key] = new"]
        if ix_add:
            body += ["        if old == 0.0:"] + ["    " + line for line in ix_add]
        if m.ordered:
            if n == 1:
                body += [f"    st.or_{m.name}[0] = btree_set(borrow_pool(st.op_{m.name}), st.or_{m.name}[0], "
                         "key[0], new)"]
            else:
                body += self._slice_update(m, "btree_set", "new")
        return [f"@njit(cache=True)\ndef s_{m.name}(st, key, old, new):\n" + "\n".join(body) + "\n",
                f"@njit(cache=True, inline='always')\ndef w_{m.name}(st, key, new):\n"
                f"    s_{m.name}(st, key, st.m_{m.name}.get(key, 0.0), new)\n",
                f"@njit(cache=True, inline='always')\ndef a_{m.name}(st, key, delta):\n"
                f"    old = st.m_{m.name}.get(key, 0.0)\n    s_{m.name}(st, key, old, old + delta)\n"]

    def _point_functions(self, m: MapDecl) -> list[str]:
        """The writers of a map kept in a hash table (:func:`_point_candidates`): ``w_M`` assigns,
        ``a_M`` adds; both find the key's row once and write its value in place, and store the
        table back into the state only when an insertion grew it (a new array).  A value that
        ends 0.0 removes the key, as in every map.  A view's map logs the key and its old value
        while watched (as the ``Dict`` writer does); an ORDERED map sets the key's value in its
        range tree too."""
        v, n = len(m.keys), len(m.keys)   # v: the value's column in the table's rows
        i = self.mid[m.name]
        log = (f"        if st.watch[{i}]:\n            st.log_keys_{m.name}.append(key)\n"
               f"            st.log_old_{m.name}.append(old)\n") if m.name in self.view_maps else ""
        tree = ""
        if m.ordered:
            if n == 1:
                tree = (f"        rt = borrow(st.or_{m.name})\n"
                        f"        rt[0] = btree_set(borrow_pool(st.op_{m.name}), rt[0], key[0], new)\n")
            else:
                tree = "".join("    " + line + "\n" for line in self._slice_update(m, "btree_set", "new"))

        def writer(name: str, arg: str, new: str) -> str:
            head = (f"@njit(cache=True, inline='always')\ndef {name}_{m.name}(st, key, {arg}):\n"
                    f"    tab = borrow(st.m_{m.name})\n"
                    "    s = ht_slot(tab, key)\n")
            if not log and not tree:   # no old value needed: one branch on whether the key is there
                return (head + "    if s >= 0:\n"
                        + (f"        new = {new.replace('old', f'tab[s, {v}]')}\n" if new != "new" else "") +
                        "        if new == 0.0:\n"
                        "            ht_pop(tab, key)\n"
                        "        else:\n"
                        f"            tab[s, {v}] = new\n"
                        f"    elif {arg} != 0.0:\n"
                        f"        grown = ht_set(tab, key, {arg})\n"
                        "        if grown.shape[0] != tab.shape[0]:\n"
                        f"            st.m_{m.name} = grown\n")
            return (head + f"    old = tab[s, {v}] if s >= 0 else 0.0\n"
                    + (f"    new = {new}\n" if new != "new" else "") +
                    "    if old != new or old != old:\n"   # (NaN is rewritten, as in the Dict writer)
                    + log +
                    "        if s >= 0:\n"
                    "            if new == 0.0:\n"
                    "                ht_pop(tab, key)\n"
                    "            else:\n"
                    f"                tab[s, {v}] = new\n"
                    "        else:\n"
                    "            grown = ht_set(tab, key, new)\n"
                    "            if grown.shape[0] != tab.shape[0]:\n"
                    f"                st.m_{m.name} = grown\n"
                    + tree)
        return [writer("w", "new", "new"), writer("a", "delta", "old + delta")]

    def _logs_ht(self) -> bool:
        """Whether some view's map lives in a hash table (its change log checked by
        ``rt.log_changed_ht``)."""
        return any(m in self.point for q in self.p.queries for m in q.exposed)

    def _hash_group_writer(self, tab: str) -> str:
        """``av_T(st, key, deltas)``: adds one delta per map to the maps stored as the value
        columns of hash table ``T`` (``self.hgroups``): one probe for all, the row removed when
        every column ends 0.0, inserted when one becomes nonzero; then, per map whose value
        changed, its change log while watched and, for an ORDERED one, its range tree.  O(1)
        expected, plus O(log n) per ORDERED column that changed."""
        group = next(g for g in self.hgroups if g[0] == tab)
        n = len(self._m(tab).keys)
        cols = range(len(group))
        body = [f"    tab = borrow(st.m_{tab})", "    s = ht_slot(tab, key)"]
        for c in cols:
            body += [f"    o{c} = tab[s, {n + c}] if s >= 0 else 0.0", f"    n{c} = o{c} + deltas[{c}]"]
        body += ["    if s >= 0:",
                 "        if " + " and ".join(f"n{c} == 0.0" for c in cols) + ":",
                 "            ht_pop(tab, key)",
                 "        else:"]
        body += [f"            tab[s, {n + c}] = n{c}" for c in cols]
        body += ["    elif " + " or ".join(f"n{c} != 0.0" for c in cols) + ":",
                 f"        grown = ht_setv(tab, key, {self._tuple([f'n{c}' for c in cols])})",
                 "        if grown.shape[0] != tab.shape[0]:",
                 f"            st.m_{tab} = grown"]
        for c, name in enumerate(group):
            m = self._m(name)
            after = []
            if name in self.view_maps:
                after += [f"        if st.watch[{self.mid[name]}]:",
                          f"            st.log_keys_{name}.append(key)",
                          f"            st.log_old_{name}.append(o{c})"]
            if m.ordered:
                if n == 1:
                    after += [f"        rt = borrow(st.or_{name})",
                              f"        rt[0] = btree_set(borrow_pool(st.op_{name}), rt[0], key[0], n{c})"]
                else:
                    after += ["    " + line for line in self._slice_update(m, "btree_set", f"n{c}")]
            if after:
                body += [f"    if o{c} != n{c} or o{c} != o{c}:", *after]   # (NaN rewritten, as the Dict writer)
        return f"@njit(cache=True, inline='always')\ndef av_{tab}(st, key, deltas):\n" + "\n".join(body) + "\n"

    def _extreme_writer(self, m: MapDecl) -> str:
        """``a_M(st, key, delta)`` of an EXTREME map (``ddms.storage.extheap``): one probe and one
        add unless the value crosses zero; the table and the heap are stored back only when one
        grew (a new array).  Only ``+=`` writes such a map (``ddms.m3.extremes``)."""
        (kind, t, h, w), *more = _xfields(m)
        # the window's add tried first, alone: a key it holds (the common case) reaches neither the
        # table and heap nor the arrays xh_add returns (their reference-count calls); the other
        # extreme's instance has nothing to do then (xh_add_also of a window key, not regrown)
        body = (f"    tab = borrow(st.{t})\n"
                f"    hp = borrow(st.{h})\n"
                f"    win = borrow(st.{w})\n"
                f"    tab2, hp2, win2 = xh_add(tab, hp, win, key[0], delta, {_SIGN[kind]})\n"
                "    if tab2.shape[0] != tab.shape[0]:\n"
                f"        st.{t} = tab2\n"
                "    if hp2.shape[0] != hp.shape[0]:\n"
                f"        st.{h} = hp2\n"
                # (a regrown window differs in size or first key: it holds a key the old did not)
                "    grew = win2.shape[0] != win.shape[0] or win2[0] != win[0]\n"
                "    if grew:\n"
                # the old window stays allocated (run_batch's hx may hold it) but holds no key now:
                # a later add through hx fails its window test and comes here (see _hx_tuple)
                f"        st.xg{w[2:]} = st.{w}\n"
                "        xh_retire(win)\n"
                f"        st.{w} = win2\n"
                # the other extreme's instance: its own table and heap, the shared window
                + "".join(f"    tab = borrow(st.{t})\n"
                          f"    hp = borrow(st.{h})\n"
                          f"    tab2, hp2 = xh_add_also(tab, hp, borrow(st.{w}), key[0], delta, {_SIGN[kind]}, grew)\n"
                          "    if tab2.shape[0] != tab.shape[0]:\n"
                          f"        st.{t} = tab2\n"
                          "    if hp2.shape[0] != hp.shape[0]:\n"
                          f"        st.{h} = hp2\n" for kind, t, h, w in more))
        # the window from run_batch's locals (hx, see _hx_tuple)
        return (f"@njit(cache=True, inline='always')\ndef a_{m.name}(st, hx, key, delta):\n"
                f"    if xh_wadd(hx[{self.hx.index(w)}], key[0], delta):\n"
                "        return\n" + body)

    def _slice_update(self, m: MapDecl, op: str, value: str) -> list[str]:
        """Lines applying ``op`` (``btree_set``/``btree_add``) with ``value`` at ``key`` to the
        range tree of ``key``'s prefix in ordered map ``m`` (keys >= 2).  The slice's root moves
        only when its tree splits, merges or empties: written back only then."""
        n = len(m.keys)
        prefix = self._tuple([f"key[{p}]" for p in range(n - 1)])
        return [f"    r0 = ht_get(borrow(st.or_{m.name}), {prefix}, -1)",
                f"    r = {op}(borrow_pool(st.op_{m.name}), r0, key[{n - 1}], {value})",
                "    if r != r0:",
                "        if r < 0:", f"            ht_pop(st.or_{m.name}, {prefix})",
                "        else:", f"            st.or_{m.name} = ht_set(st.or_{m.name}, {prefix}, r)"]

    def clear_function(self, m: MapDecl, pos: tuple[int, ...]) -> str:
        n = len(m.keys)
        self._dict(m.name)
        if self._tree_only(m.name):
            return (f"@njit(cache=True)\ndef clear_{m.name}_{_mask(pos)}(st, part):\n"
                    f"    st.or_{m.name}[0] = btree_free(borrow_pool(st.op_{m.name}), st.or_{m.name}[0])\n")
        if pos:
            part_args = self._tuple([f"part[{j}]" for j in range(len(pos))])
            return (f"@njit(cache=True)\ndef clear_{m.name}_{_mask(pos)}(st, part):\n"
                    f"    ix = st.ix_{m.name}_{_mask(pos)}\n"
                    f"    if {part_args} not in ix:\n        return\n"
                    f"    keys = [k for k in ix[{part_args}]]\n"
                    f"    for k in keys:\n        w_{m.name}(st, k, 0.0)\n")
        return (f"@njit(cache=True)\ndef clear_{m.name}_{_mask(pos)}(st, part):\n"
                f"    keys = [k for k in st.m_{m.name}]\n"
                f"    for k in keys:\n        w_{m.name}(st, k, 0.0)\n" if n else
                f"@njit(cache=True)\ndef clear_{m.name}_{_mask(pos)}(st, part):\n    st.m_{m.name}[0] = 0.0\n")

    def _cut_text(self, c) -> str:
        return f"{c.kind}({c.map}, {'row' if c.rows else 'rank'} {c.n})"

    def _cut_function(self, g: int, gg: GroupGuards) -> str:
        """Source of ``cutv_<g>(st)``: the cuts group g reads, as a tuple, each NaN unless its map
        holds at least n keys (rows) -- with fewer, the cut is the last key and a key beyond it
        would join the top-N (cutguard.py, condition 1).  O(log n) per cut; run by ``flush`` after
        the group (and by ``Engine._check``)."""
        lines = []
        for c, cut in enumerate(gg.cuts):
            pool, col = self._pool(cut.map), self._col(cut.map)
            root = self._root(self._m(cut.map), {}, ("K",))
            largest = cut.kind == "max"
            if cut.rows:
                call = f"btree_nth_row({pool}, {root}, {cut.n}, {largest}{col})"
                size = f"btree_total({pool}, {root}{col})"
            else:
                call = f"btree_nth({pool}, {root}, {cut.n}, {largest}{col})"
                size = f"btree_len({pool}, {root}{col})"
            lines.append(f"    f{c}, k{c} = {call}\n"
                         f"    c{c} = k{c} if f{c} and {size} >= {cut.n} else np.nan\n")
        return ("@njit(cache=True)\n"
                f"def cutv_{g}(st):\n"
                f"    \"\"\"The cuts group {g} reads: " + ", ".join(self._cut_text(c) for c in gg.cuts)
                + " (NaN: none, or fewer keys than n).\"\"\"\n"
                + "".join(lines) + "    return (" + ", ".join(f"c{c}" for c in range(len(gg.cuts))) + ",)\n")

    def _mark(self, n: int, g: int, t: Trigger) -> str:
        """Code marking deferred group g dirty after an event of trigger n (``t``): unconditional,
        or unless every guarded argument lies strictly beyond its cut (cutguard.py; a NaN cut
        compares false, so the group is marked)."""
        gg = self.cut_groups.get(g)
        guard = next((gd for gd in gg.guards if gd.trigger == n), None) if gg else None
        if guard is None:
            return f"lz[{g}] = 1"
        tests = " and ".join(f"cols[i, {t.args.index(a)}] {'<' if gg.cuts[c].kind == 'max' else '>'} ct{g}[{c}]"
                             for a, c in guard.tests)
        return f"if not ({tests}):\n                    lz[{g}] = 1"

    def _trigger_functions(self, tname: str, t: Trigger, inline: bool = False) -> list[str]:
        """Sources of function ``tname`` running ``t``'s statements in order, and of the chunk
        functions it calls when there are more than ``STATEMENTS_PER_FUNCTION`` (the statement
        functions they inline go to ``self.functions``).  ``inline``: ``tname`` inlines into its
        caller (see :func:`_inlined`)."""
        out = []
        calls = []
        cuts = [0]   # indexes of calls where a chunk may start: no shared boundary is live there
        n_functions = len(self.functions)
        shared = self._shared_cuts(t) if len(t.statements) <= STATEMENTS_PER_FUNCTION else {}
        fused = self._fused(t)
        self._prefetch = []
        for j, s in enumerate(t.statements):
            fname = f"{tname}_s{j}"
            if j in fused:
                if fused[j]:
                    self.fused_statement(fname, [t.statements[i] for i in fused[j]], t.args)
                    calls.append(f"    {fname}({self.S}, {', '.join('a_' + a for a in t.args)})")
                    if not self._cuts:
                        cuts.append(len(calls))
                continue
            starting = [k for k, (first, _, _) in shared.items() if first == j]
            for n, key in enumerate(starting):   # compute the boundary before its first user
                _, _, (b, rop, cop, x) = shared[key]
                cut = (f"cut{j}_{n}_code", f"cut{j}_{n}_b")
                fn = self._fn = _Fn()
                env0 = {a: f"a_{a}" for a in t.args}
                xv = self._value(fn, x, env0)
                fn.line(f"{cut[0]}, {cut[1]} = threshold_cut({self._pool(b.name)}, "
                        f"{self._root(self._m(b.name), env0, b.keys)}, {_OPCODE[rop]}, {_OPCODE[cop]}, {xv}"
                        f"{self._col(b.name)})")
                calls += fn.body()
                self._fn = None
                self._cuts[key] = cut
            self.statement(fname, s, t.args)
            cut_args = [v for c in self._cuts.values() for v in c]
            calls.append(f"    {fname}({self.S}, {', '.join(['a_' + a for a in t.args] + cut_args)})")
            for key in [k for k, (_, last, _) in shared.items() if last == j]:
                self._cuts.pop(key, None)
            if not self._cuts:
                cuts.append(len(calls))
        self._cuts.clear()
        params = ", ".join([self.S, *("a_" + a for a in t.args)])   # passed on unchanged
        if self._prefetch:
            self.prefetch[tname] = pfs = list(dict.fromkeys(self._prefetch))
            sliced = [pf for pf in pfs if pf[0] == "tree" and pf[3] > 1]
            single = [pf for pf in pfs if pf[0] == "tree" and pf[3] == 1]
            # lvl -1: the leaves (and their parents' sums) of the single trees; lvl >= 0: that level
            # of a per-slice tree's path (its leaf if shorter)
            # (a per-slice tree's stage 0 starts at its root and the later ones at the ref the
            # previous stage left in the ring row q, column t: PF_RING)
            if sliced or single:
                out.append(f"@njit(cache=True, inline='always')\ndef pf_{tname}(lvl, pfr, rk, {params}):\n"
                           + ("    if lvl == -1:\n" + "".join(f"        {self._prefetch_call(*pf)}\n" for pf in single)
                              if single else "")
                           + (f"    q = rk & {PF_RING - 1}\n    if lvl == 0:\n"
                              + "".join(f"        pfr[q, {t}] = {self._prefetch_call(*pf, '0')}\n"
                                        for t, pf in enumerate(sliced))
                              + f"    if lvl == {PF_ROOT_LEAF}:\n"
                              + "".join(f"        {self._prefetch_call(*pf, str(PF_LEAF))}\n" for pf in sliced)
                              + "    if lvl > 0:\n"
                              + "".join(f"        pfr[q, {t}] = {self._prefetch_call(*pf, 'lvl', f'pfr[q, {t}]')}\n"
                                        for t, pf in enumerate(sliced))
                              if sliced else ""))
            hashes = [pf for pf in pfs if pf[0] == "hash"]   # (their own distance: PF_HASH_AHEAD)
            if hashes:
                self.pfh_body[tname] = "".join(f"    {self._prefetch_call(*pf)}\n" for pf in hashes)
                out.append(f"@njit(cache=True, inline='always')\ndef pfh_{tname}({params}):\n"
                           + self.pfh_body[tname])
        # a long trigger (no shared boundaries then: one line per statement) calls chunk functions
        # the statements inline into; a short one keeps its boundaries and their users together
        # the caller calls the chunks itself: a wrapper function of its own would be one more numba
        # library linking in, and LLVM re-optimising, the code of every chunk (numba links each
        # callee's whole module into its caller's), for nothing at run time
        # a trigger is also cut where its statements' code, once numba inlines it, passes
        # CHUNK_BLOCKS (why: CHUNK_BLOCKS), between statements that share no boundary
        self._sizes.add("\n\n".join(self.functions[n_functions:]))
        bounds = sorted({*cuts, len(calls)})
        units = [calls[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        blocks = [self._sizes.lines(u) for u in units]
        chunked = len(t.statements) > STATEMENTS_PER_FUNCTION or (len(units) > 1 and sum(blocks) > CHUNK_BLOCKS)
        if chunked:
            chunks = _chunks(units, blocks)
            for c, chunk in enumerate(chunks):
                out.append(f"@njit(cache=True)\ndef {tname}_c{c}({params}):\n" + "\n".join(chunk) + "\n")
            calls = [f"    {tname}_c{c}({params})" for c in range(len(chunks))]
            self.plan.append(f"{tname}: {len(chunks)} functions of at most {STATEMENTS_PER_FUNCTION} statements "
                             f"and about {CHUNK_BLOCKS} blocks once inlined (estimated: {sum(blocks)} in all), "
                             "called from its caller")
            inline = True
        elif inline and sum(blocks) > CHUNK_BLOCKS:   # (one statement, too big to cut or to inline)
            self.plan.append(f"{tname}: a function of its own (estimated {sum(blocks)} blocks once inlined, "
                             f"past CHUNK_BLOCKS = {CHUNK_BLOCKS})")
            inline = False
        elif inline:
            n = len(t.statements)
            self.plan.append(f"{tname}: compiled into its caller ({n} statement{'' if n == 1 else 's'}; "
                             "see INLINE_BUDGET)")
        deco = "@njit(cache=True, inline='always')" if inline else "@njit(cache=True)"
        out.append(f"{deco}\ndef {tname}({params}):\n" + "\n".join(calls or ["    pass"]) + "\n")
        return out

    # -- module ---------------------------------------------------------------------------------
    def module(self) -> str:
        p = self.p
        trig_fns = []
        streams = {s.name: i for i, s in enumerate(p.streams)}
        for g in self.groups:
            self.plan.append(f"range tree {g[0]} holds {', '.join(g)} as its columns (updated together: "
                             "one descent per event)")
        lazy: dict[int, int] = {}   # trigger index -> its group of deferred statements (deferral.py)
        groups: dict[tuple[Statement, ...], int] = {}   # deferred statements -> group (inserts and deletes share)
        lazies: list[Trigger] = []   # group -> a trigger running its statements
        # keyed groups (statements of one key argument): trigger index -> [(group, key column)]
        klazy: dict[int, list[tuple[int, int]]] = {}
        kgroups: dict[tuple[str, tuple[Statement, ...]], int] = {}
        klazies: list[Trigger] = []   # keyed group -> a trigger of the key argument alone running it
        now = [tuple(s for s in t.statements if s.target.name not in self.deferred | self.keyed)
               for t in p.triggers]
        inline_now = _inlined([len(ss) for ss in now])
        for n, t in enumerate(p.triggers):
            tname = _trigger_name(t)
            later = tuple(s for s in t.statements if s.target.name in self.deferred)
            trig_fns += self._trigger_functions(tname, replace(t, statements=now[n]), n in inline_now)
            by_key: dict[str, list[Statement]] = {}
            for s in t.statements:
                if s.target.name in self.keyed:
                    by_key.setdefault(statement_key(s, t) or "", []).append(s)
            for a, ss in by_key.items():
                gk = (a, tuple(ss))
                if gk not in kgroups:
                    kgroups[gk] = len(kgroups)
                    klazies.append(replace(t, args=(a,), statements=tuple(ss)))
                klazy.setdefault(n, []).append((kgroups[gk], t.args.index(a)))
                self.plan.append(f"{tname}: deferred to the end of the line (views watched) or batch, once "
                                 f"per value of {a} seen, keyed group {kgroups[gk]}: "
                                 + ", ".join(dict.fromkeys(s.target.name for s in ss)))
            if not later:
                continue
            if later not in groups:
                groups[later] = len(groups)
                lazies.append(replace(t, args=(), statements=later))
            lazy[n] = groups[later]
            self.plan.append(f"{tname}: deferred to the end of the line (views watched) or batch, group "
                             f"{lazy[n]}: " + ", ".join(dict.fromkeys(s.target.name for s in later)))
        for later, g in groups.items():
            gg = group_guards(later, [(n, p.triggers[n]) for n in lazy if lazy[n] == g], p.triggers, p.maps,
                              self.deferred)
            if gg is not None:
                self.cut_groups[g] = gg
                trig_fns.append(self._cut_function(g, gg))
                for gd in gg.guards:
                    self.plan.append(f"{_trigger_name(p.triggers[gd.trigger])}: marks group {g} dirty only when "
                                     + " or ".join(f"{a} is not {'below' if gg.cuts[c].kind == 'max' else 'above'} "
                                                   f"{self._cut_text(gg.cuts[c])}" for a, c in gd.tests)
                                     + " as the group's last evaluation left it (an event beyond the cut of a "
                                     "top-N changes neither the cut nor what the group reads: cutguard.py)")
        inline_lazy = _inlined([len(t.statements) for t in lazies + klazies])
        for g, t in enumerate(lazies):
            trig_fns += self._trigger_functions(f"lazy_{g}", t, g in inline_lazy)
        for g, t in enumerate(klazies):
            trig_fns += self._trigger_functions(f"lazyk_{g}", t, len(lazies) + g in inline_lazy)
        if groups or kgroups:
            trig_fns.append("@njit(cache=True)\ndef flush(state):\n"
                            "    \"\"\"Run the deferred statements of the triggers fired since the last flush.\"\"\"\n"
                            # borrowed, as run_batch's triggers take it: the functions both call
                            # compile for one state type
                            "    st = borrow_state(state)\n"
                            + (f"    hx = {self._hx_tuple()}\n" if self.hx else "")
                            + ("    lz = st.lazy\n" if groups else "")
                            + "".join(f"    if lz[{g}]:\n        lz[{g}] = 0\n        lazy_{g}({self.S})\n"
                                      + (f"        cv{g} = cutv_{g}(st)\n        ct{g} = st.cut_{g}\n"
                                         + "".join(f"        ct{g}[{c}] = cv{g}[{c}]\n"
                                                   for c in range(len(self.cut_groups[g].cuts)))
                                         if g in self.cut_groups else "")
                                      for g in range(len(groups)))
                            + "".join(f"    kz = st.lazy_keys_{g}\n    if kz[-1, 0] > 0:\n"
                                      "        for j in range(kz.shape[0] - 1):\n"
                                      "            if kz[j, 2] != 0.0:\n"
                                      f"                lazyk_{g}({self.S}, kz[j, 0])\n"
                                      # a table grown by a big batch, now mostly empty: a small one
                                      # again (a per-line flush scans all of it)
                                      f"        if kz.shape[0] > {LAZY_KEYS_SMALL + 1} "
                                      "and 8 * kz[-1, 0] < kz.shape[0]:\n"
                                      f"            st.lazy_keys_{g} = ht_new(1)\n"
                                      "        else:\n            kz[:, :] = 0.0\n" for g in range(len(kgroups)))
                            + self._bury("    "))
        self.lazy_groups = len(groups)
        self.keyed_groups = len(kgroups)
        clears = []
        for stmt_map, pos in self._clear_patterns():
            clears.append(self.clear_function(self._m(stmt_map), pos))
        writers = [f for m in p.maps for f in self.map_functions(m)]
        fields, inits = self._state_fields()
        B = "bst, hx" if self.hx else "bst"   # what run_batch passes where the functions take self.S
        dispatch = []
        pf_dispatch: list[str] = []    # range-tree leaves, PF_AHEAD events ahead
        pfh_dispatch: list[str] = []   # hash-table rows, PF_HASH_AHEAD events ahead
        for n, t in enumerate(p.triggers):
            si, sign = streams[t.stream], (1 if t.sign == "+" else -1)
            args = ", ".join(f"cols[i, {c}]" for c in range(len(t.args)))
            tname = _trigger_name(t)
            pf_args = ", ".join(f"cols[j, {c}]" for c in range(len(t.args)))
            kinds = {pf[0] for pf in self.prefetch.get(tname, ())}
            if "tree" in kinds:
                pf_dispatch.append(f"    if r == {si} and s == {sign}:\n"
                                   f"        pf_{tname}(lvl, pfr, q, {self.S}, {pf_args})")
            if "hash" in kinds:
                # the insert and delete triggers of a stream mostly load the same rows (a count per
                # price: +1 and -1 at one key): one test of the stream, not also one of the sign
                # (an unpredictable branch per event)
                twin = [_trigger_name(u) for u in p.triggers if u.stream == t.stream and u.sign != t.sign]
                same = bool(twin) and self.pfh_body.get(twin[0]) == self.pfh_body[tname]
                if not (same and t.sign == "-"):
                    pfh_dispatch.append(f"    if r == {si}{'' if same else f' and s == {sign}'}:\n"
                                        f"        pfh_{tname}({self.S}, {pf_args})")
            dispatch.append(f"            if r == {si} and s == {sign}:\n                {tname}({B}, {args})"
                            + (f"\n                {self._mark(n, lazy[n], t)}" if n in lazy else "")
                            # the table read through borrow() each event, not a local reassigned on
                            # growth: a loop-carried array local costs a reference-count pair per
                            # event (measured: 196 -> 135 ns/line, one symbol's top-quarter VWAP)
                            + "".join(f"\n                if ht_slot(borrow(st.lazy_keys_{g}), (cols[i, {c}],)) < 0:"
                                      f"\n                    st.lazy_keys_{g} = "
                                      f"ht_set(st.lazy_keys_{g}, (cols[i, {c}],), 1.0)"
                                      for g, c in klazy.get(n, [])))
        changed = []
        exposed = list(dict.fromkeys(name for q in p.queries for name in q.exposed))   # every view's maps
        for qmap in exposed:
            m = self._m(qmap)
            i = self.mid[m.name]
            if m.keys:
                # changed only if some logged key's value differs from its old value (an E line of
                # 0 units writes and restores); otherwise drop the log without leaving compiled code.
                # nch counts changed scalar maps; a grouped change sets it past 1, so fire() gets
                # slot -1 and Python takes the general path (change logs, every watched view)
                if m.name in self.htab:   # a value column of a shared hash table
                    tab, c = self.htab[m.name]
                    test = (f"log_changed_ht(borrow(st.m_{tab}), st.log_keys_{m.name}, st.log_old_{m.name}, "
                            f"np.int64({len(m.keys) + c}))")
                elif m.name in self.point:
                    test = (f"log_changed_ht(borrow(st.m_{m.name}), st.log_keys_{m.name}, st.log_old_{m.name}, "
                            f"np.int64({len(m.keys)}))")
                else:
                    test = f"log_changed(st.m_{m.name}, st.log_keys_{m.name}, st.log_old_{m.name})"
                changed.append(f"        if st.watch[{i}] and len(st.log_keys_{m.name}) > 0:\n"
                               f"            if {test}:\n"
                               "                changed = True\n"
                               "                nch = 2\n"
                               "            else:\n"
                               f"                st.log_keys_{m.name}.clear()\n"
                               f"                st.log_old_{m.name}.clear()")
            else:
                # a compiled condition: return to Python only if the new value leaves the band
                # gate[i] = (lo, hi); the default (inf, -inf) is empty, so every change fires
                changed.append(f"        if watch[{i}]:\n            v = mv_{m.name}[0]\n"
                               f"            if not (v == prev[{i}] or (v != v and prev[{i}] != prev[{i}])) "
                               f"and not (gate[{i}, 0] <= v <= gate[{i}, 1]):\n"
                               "                changed = True\n"
                               f"                nch += 1\n                cs = {i}\n"
                               f"                co = prev[{i}]\n                cn = v")
        snap = [f"            prev[{self.mid[qmap]}] = mv_{qmap}[0]" for qmap in exposed
                if not self._m(qmap).keys]
        # the state's arrays read once per batch, not once per line (structref field loads)
        hoist = "".join(f"    mv_{name} = st.m_{name}\n" for name in dict.fromkeys(
            qmap for qmap in exposed if not self._m(qmap).keys))
        watch_inline = len(exposed) <= WATCH_INLINE_BUDGET
        if not watch_inline:   # the checks in two functions of their own (WATCH_INLINE_BUDGET)
            self.plan.append(f"run_batch: the checks of the {len(exposed)} watched view maps in functions of their "
                             f"own, called once per line while views are watched (WATCH_INLINE_BUDGET)")
            trig_fns.append("@njit(cache=True)\ndef watch_snap(st, prev):\n"
                            "    \"\"\"Remember the scalar views' values before a watched line.\"\"\"\n"
                            + hoist + ("\n".join(line[8:] for line in snap) if snap else "    pass") + "\n")
            trig_fns.append("@njit(cache=True)\ndef watch_changes(st, prev):\n"
                            "    \"\"\"(changed, number of scalar maps changed, slot, old, new) after a watched\n"
                            "    line (see run_batch).\"\"\"\n"
                            "    watch = st.watch\n    gate = st.gate\n" + hoist
                            + "    changed = False\n    nch = 0\n    cs = -1\n    co = 0.0\n    cn = 0.0\n"
                            + "".join("\n".join(line[4:] for line in c.split("\n")) + "\n" for c in changed)
                            + "    return changed, nch, cs, co, cn\n")
            snap = ["            watch_snap(bst, prev)"] if snap else []
            hoist = ""
        flushes = bool(lazy or klazy)
        # prefetch only for trees past the caches' size (tested once per batch)
        pf_all = sorted({pf[:2] for pfs in self.prefetch.values() for pf in pfs})
        pf_trees = [name for kind, name in pf_all if kind == "tree"]
        pf_hash = list(dict.fromkeys(name.split("_", 1)[1] for kind, name in pf_all if kind == "hash"))
        big = "".join(f"    {flag} = " + " or ".join(self._big_test(*pf) for pf in pf_all if pf[0] == kind) + "\n"
                      for kind, flag in (("tree", "big"), ("hash", "bigh")) if any(pf[0] == kind for pf in pf_all))
        # trees per slice (per symbol): also the upper levels of the path, farther ahead (PF_PATH)
        path = sorted({pf[1] for pfs in self.prefetch.values() for pf in pfs if pf[0] == "tree" and pf[3] > 1})
        whole = [t for t in pf_trees if t not in path]
        # stage 0 loads the root, each later one the node one level below (the leaf's: the rest
        # of the path) the ref the previous stage left in the ring (PF_RING); the path stages run
        # only while the pool's trees are deep (btree_deep), the leaf stage then from the root
        # (PF_ROOT_AHEAD events ahead: no path stage ran, and the root table's row was loaded earlier)
        leaf = [(PF_SLICE, str(PF_LEAF))] if PF_PATH else []
        leaf.append((PF_ROOT_AHEAD, str(PF_ROOT_LEAF)))
        stages = ([(PF_SLICE * (PF_PATH + 1 - lv), str(min(lv, 1))) for lv in range(PF_PATH)] + leaf if path else [])
        nring = max((sum(pf[0] == "tree" and pf[3] > 1 for pf in pfs) for pfs in self.prefetch.values()), default=0)

        def gate(lv: str) -> str:   # the flag a stage runs under: the path stages only for pools of deep trees
            if lv.isdigit():
                return "deep"
            return "big and not deep" if lv == str(PF_ROOT_LEAF) and PF_PATH else "big"
        # the triggers whose events update a per-slice tree: the path stages run at those events
        # only, counting them (not all events) ahead (PF_EVENTS)
        sliced_events = [(streams[t.stream], 1 if t.sign == "+" else -1) for t in p.triggers
                         if any(pf[0] == "tree" and pf[3] > 1 for pf in self.prefetch.get(_trigger_name(t), ()))]
        path_stages = bool(pf_dispatch and path and PF_PATH and sliced_events)
        if path and PF_PATH:
            big += ("    deep = big and (" + " or ".join(f"btree_deep(st.op_{t}, st.or_{t}[-1, 0])" for t in path)
                    + ")\n")
        if path:
            self.plan.append(f"run_batch: prefetches the path (levels 0 .. {PF_PATH - 1}, then the leaf) in the "
                             f"per-slice range tree{'s' if len(path) > 1 else ''} " + ", ".join(path) + " "
                             + ", ".join(str(a) for a, _ in stages)
                             + " events ahead once one's pool has outgrown the caches (the path stages only while "
                             "its trees average two leaves or more)")
        if whole:
            stages.append((PF_AHEAD, "-1"))
            self.plan.append(f"run_batch: prefetches the leaves of range tree{'s' if len(whole) > 1 else ''} "
                             + ", ".join(whole) + f" {PF_AHEAD} events ahead once one has outgrown the caches")
        if pf_hash:
            self.plan.append(f"run_batch: prefetches the rows of hash table{'s' if len(pf_hash) > 1 else ''} "
                             + ", ".join(pf_hash) + f" {PF_HASH_AHEAD} events ahead once one has outgrown the caches")
        # the probe-and-load calls the prefetch functions hold, times their call sites
        # (a per-slice tree's: three, one per kind of stage)
        pf_trees_calls = sum(1 if pf[3] == 1 else 3 for pfs in self.prefetch.values() for pf in pfs if pf[0] == "tree")
        pf_size = (pf_trees_calls * max(len(stages), 1)
                   + sum(pf[0] == "hash" for pfs in self.prefetch.values() for pf in pfs))
        pf_deco = "@njit(cache=True, inline='always')\n"
        if pf_size > PREFETCH_INLINE_BUDGET and (pf_dispatch or pfh_dispatch):
            pf_deco = "@njit(cache=True)\n"
            self.plan.append("run_batch: calls its prefetch functions, not inlined (PREFETCH_INLINE_BUDGET)")
        # out of line, the stage's level is a run-time int64, not a literal: numba would compile the
        # function once per literal value (once per stage)
        lvl = "{}" if pf_deco.endswith("inline='always')\n") else "np.int64({})"
        # the local arrays the loop reads only through borrowed copies, kept alive to each return:
        # numba frees a local after its last use (btree.keep_alive)
        owned = [a for a, made in (("pfr", pf_dispatch), ("tev", path_stages)) if made]

        def keep(indent: str) -> str:
            return "".join(f"{indent}keep_alive({a})\n" for a in owned)
        run = ("@njit(cache=True, nogil=True)\n"   # GIL released: a reader thread parses meanwhile
               "def run_batch(st, relmap, rel, sign, cols, line, start, end, prev, fire, defer):\n"
               "    \"\"\"Apply events start..end.  After a line that changed a watched view, call the\n"
               "    engine's C callback ``fire(input line, slot, old, new)``: slot, old and new name the\n"
               "    one scalar view map that changed, slot -1 when a grouped map or several changed.  A\n"
               "    nonzero answer (a Python callback raised) stops the batch there.  Returns the\n"
               "    index of the next event to apply.  ``defer``: leave the deferred statements of an\n"
               "    unwatched batch for the caller's ``flush`` (a chunk followed by more of the batch).\"\"\"\n"
               "    i = start\n"
               # the state and the event arrays as borrowed handles for the inlined triggers and
               # prefetches: numba's inliner would count a reference to each argument of each
               # inlined call, two atomic (fencing) instructions per event (btree.borrow_state)
               "    bst = borrow_state(st)\n"
               + (f"    hx = {self._hx_tuple()}\n" if self.hx else "")
               + ("    brelmap = borrow(relmap)\n    brel = borrow(rel)\n    bsign = borrow(sign)\n"
                  "    bcols = borrow(cols)\n" if pf_dispatch or pfh_dispatch else "") +
               "    watching = st.watching[0]\n"
               "    watch = st.watch\n"
               "    gate = st.gate\n" + ("    lz = st.lazy\n" if lazy else "")
               + "".join(f"    ct{g} = st.cut_{g}\n" for g in self.cut_groups) + hoist + big
               + (f"    pfr = np.full(({PF_RING}, {max(nring, 1)}), -1, np.int64)\n    bpfr = borrow(pfr)\n"
                  if pf_dispatch else "")
               # the path stages count events that update a per-slice tree (PF_EVENTS): their list
               + ("    tev = pf_events(relmap, rel, sign, start, end if deep else start)\n"
                  "    btev = borrow(tev)\n    m = tev.shape[0]\n    k = 0\n" if path_stages else "") +
               "    while i < end:\n"
               "        ln = line[i]\n"
               "        if watching:\n" + ("\n".join(snap) if snap else "            pass") + "\n"
               "        while i < end and line[i] == ln:\n"
               + (("            if deep and k < m and btev[k] == i:\n"
                   + "".join(f"                if k + {a} < m:\n"
                             f"                    prefetch({B}, bpfr, brelmap, brel, bsign, bcols, btev[k + {a}], "
                             f"{lvl.format(lv)}, k + {a})\n"
                             for a, lv in stages if gate(lv) == "deep")
                   + "                k += 1\n" if path_stages else "")
                  + "".join(f"            if {gate(lv)} and i + {a} < end:\n"
                            f"                prefetch({B}, bpfr, brelmap, brel, bsign, bcols, i + {a}, "
                            f"{lvl.format(lv)}, i + {a})\n"
                            for a, lv in stages if gate(lv) != "deep")
                  if pf_dispatch else "")
               + (f"            if bigh and i + {PF_HASH_AHEAD} < end:\n"
                  f"                prefetch_hash({B}, brelmap, brel, bsign, bcols, i + {PF_HASH_AHEAD})\n"
                  if pfh_dispatch else "") +
               "            r = relmap[rel[i]]\n"
               "            s = sign[i]\n"
               + ("\n".join(dispatch) if dispatch else "            pass") + "\n"
               "            i += 1\n"
               "        if watching:\n"
               + ("            flush(st)\n" if flushes else "")
               + (f"            hx = {self._hx_tuple()}\n" if flushes and self.hx else "")
               + ("            changed = False\n"
                  "            nch = 0\n            cs = -1\n            co = 0.0\n            cn = 0.0\n"
                  + ("\n".join("    " + c.replace("\n", "\n    ") for c in changed) if changed else "            pass")
                  if watch_inline else "            changed, nch, cs, co, cn = watch_changes(bst, prev)")
               + "\n            if changed:\n                if nch != 1:\n                    cs = -1\n"
               "                if fire(ln, cs, co, cn) != 0:\n"
               + self._bury(" " * 20) + keep(" " * 20) + "                    return i\n"
               + ("    if not defer:\n        flush(st)\n" if flushes else "") + self._bury("    ") + keep("    ")
               + "    return i\n")
        if pf_dispatch:
            trig_fns.append(pf_deco +
                            f"def prefetch({self.S}, pfr, relmap, rel, sign, cols, j, lvl, q):\n"
                            "    \"\"\"Start loading what event j's tree updates touch: their leaves (lvl -1,\n"
                            "    btree_prefetch) or, in per-slice trees, the root (lvl 0) or the node lvl levels\n"
                            "    below the one the previous stage left in the ring pfr (row q & PF_RING - 1: the\n"
                            "    event's rank among the events that update a per-slice tree), the leaf if shorter"
                            " (btree_prefetch_level).\"\"\"\n"
                            "    r = relmap[rel[j]]\n"
                            "    s = sign[j]\n" + "\n".join(pf_dispatch) + "\n")
        if path_stages:
            trig_fns.append("@njit(cache=True)\n"
                            "def pf_events(relmap, rel, sign, start, end):\n"
                            "    \"\"\"The events of start..end that update a per-slice range tree, in order: what\n"
                            "    run_batch's path prefetch stages count ahead (codegen.PF_EVENTS).  O(n).\"\"\"\n"
                            "    out = np.empty(end - start, np.int64)\n"
                            "    m = 0\n"
                            "    for i in range(start, end):\n"
                            "        r = relmap[rel[i]]\n"
                            "        s = sign[i]\n"
                            "        if " + " or ".join(f"(r == {si} and s == {sg})" for si, sg in sliced_events)
                            + ":\n"
                            "            out[m] = i\n"
                            "            m += 1\n"
                            "    return out[:m]\n")
        if pfh_dispatch:
            trig_fns.append(pf_deco +
                            f"def prefetch_hash({self.S}, relmap, rel, sign, cols, j):\n"
                            "    \"\"\"Start loading the hash-table rows event j probes (ht_prefetch).\"\"\"\n"
                            "    r = relmap[rel[j]]\n"
                            "    s = sign[j]\n" + "\n".join(pfh_dispatch) + "\n")
        header = (f'"""Generated by ddms codegen v{CODEGEN_VERSION} from an M3 program: do not edit.\n\n'
                  + print_program(p).replace("\\", "\\\\").replace('"""', "'''") + '"""\n\n'
                  "import ddms  # noqa: F401\n"
                  "import numpy as np\n"
                  "from numba import njit, types\n"
                  "from numba.experimental import structref\n"
                  "from numba.typed import Dict, List\n\n"
                  f"from ddms.backend.rt import div, log_changed, {'log_changed_ht, ' if self._logs_ht() else ''}"
                  f"{'mod, ' if self._uses_mod() else ''}"
                  f"{'mul0, ' if self._nullmul else ''}ne"
                  f"{self._func_imports()}\n"
                  "from ddms.storage.btree import (\n"
                  "    DigestNamedStructRef, borrow, borrow_pool, borrow_state, btree_add, btree_addv, btree_free,"
                  " btree_get,\n    btree_items, btree_max, btree_min, keep_alive,\n"
                  "    btree_big, btree_deep, btree_new, btree_prefetch, btree_prefetch_level, btree_set, range_sum,\n"
                  "    threshold_apply, threshold_cut, threshold_sum,\n)\n"
                  + ("from ddms.storage.btree import btree_nth, btree_nth_row\n" if self._ranks else "")
                  + ("from ddms.storage.btree import btree_len, btree_nth, btree_nth_row, btree_total\n"
                     if self.cut_groups and not self._ranks else "")
                  + ("from ddms.storage.btree import btree_len, btree_total\n"
                     if self.cut_groups and self._ranks else "")
                  + ("from ddms.storage.extheap import (\n    xh_add, xh_add_also, xh_big, xh_get, xh_new, "
                     "xh_new_heap, xh_new_win, xh_prefetch, xh_retire, xh_retired, xh_top, xh_wadd,\n)\n"
                     if any(m.extreme for m in p.maps) else "")
                  + "from ddms.storage.hashtab import ht_big, ht_get, ht_getf, ht_new, ht_pop, ht_prefetch, ht_set, "
                  "ht_slot\n"
                  + ("from ddms.storage.hashtab import ht_getc, ht_newv, ht_setv\n" if self.htab else "") + "\n\n"
                  + "".join(f"K{i} = types.UniTuple(types.float64, {i})\nD{i} = types.DictType(K{i}, types.float64)\n"
                            for i in range(1, self._max_arity() + 1)) + "\n\n"
                  "@structref.register\n"
                  "class StateType(DigestNamedStructRef):\n"
                  "    def preprocess_fields(self, fields):\n"
                  "        return tuple((n, types.unliteral(t)) for n, t in fields)\n\n\n"
                  "class State(structref.StructRefProxy):\n"
                  "    \"\"\"Python handle on the program state; each field reads through a compiled getter.\"\"\"\n\n"
                  + "".join(f"    @property\n    def {f}(self):\n        return get_{f}(self)\n\n" for f in fields)
                  + "\n"
                  + "".join(f"@njit(cache=True)\ndef get_{f}(st):\n    return st.{f}\n\n\n" for f in fields)
                  + f"FIELDS = {fields!r}\n"
                  + f"INDEXES = {self._index_table()!r}\n"
                  + f"TREE_ONLY = {sorted(m.name for m in p.maps if m.keys and self._tree_only(m.name))!r}\n"
                  + f"TREES = {self.tree!r}\n"
                  + f"HASHES = {self.htab!r}\n"
                  "structref.define_proxy(State, StateType, FIELDS)\n\n\n"
                  "@njit(cache=True)\n"
                  "def new_state():\n"
                  "    return State(" + ", ".join(inits) + ")\n\n\n")
        parts = [header, *writers, *clears, *self.functions, *trig_fns, run]
        return "\n\n".join(parts)

    def _index_table(self) -> dict[str, list[tuple[int, ...]]]:
        """Map name -> the key positions of each secondary index (what ``Engine._check`` verifies)."""
        return {m: sorted(pos) for m, pos in self.indexes.items() if pos}

    def _uses_mod(self) -> bool:
        """True if a statement computes SQL's ``%`` (the import of ``mod`` is emitted only then, so
        the code of every program without it is unchanged)."""
        return any(isinstance(x, Mod) for t in self.p.triggers for st in t.statements for x in walk(st.expr))

    def _func_imports(self) -> str:
        """``, f_floor, f_round`` for the SQL functions the statements call (none: nothing, so the
        code of every program without them is unchanged)."""
        names = {_RT_FUNC.get(x.name, "f_int") for t in self.p.triggers for st in t.statements
                 for x in walk(st.expr) if isinstance(x, Func)}
        return "".join(f", {n}" for n in sorted(names))

    def _max_arity(self) -> int:
        return max([len(m.keys) for m in self.p.maps] + [4])

    def _clear_patterns(self) -> list[tuple[str, tuple[int, ...]]]:
        out = []
        for t in self.p.triggers:
            for s in t.statements:
                if s.op == ":=" and s.target.keys and not self._single_entry(s, t.args):
                    pos = tuple(i for i, x in enumerate(s.target.keys) if x in t.args)
                    if not self._in_place(s.target.name, pos) and (s.target.name, pos) not in out:
                        out.append((s.target.name, pos))
        return out

    def _state_fields(self) -> tuple[list[str], list[str]]:
        nm = max(len(self.p.maps), 1)
        fields, inits = ["watch", "watching", "gate"], [f"np.zeros({nm}, np.int8)", "np.zeros(1, np.int8)",
                                                        f"np.array([[np.inf, -np.inf]] * {nm})"]
        if self.lazy_groups:   # dirty flags of the groups of deferred statements
            fields.append("lazy")
            inits.append(f"np.zeros({self.lazy_groups}, np.int8)")
        for g, gg in self.cut_groups.items():   # the cuts each guarded group's last evaluation saw
            fields.append(f"cut_{g}")
            inits.append(f"np.full({len(gg.cuts)}, np.nan)")
        for g in range(self.keyed_groups):   # the keys each keyed group has seen since the last flush
            fields.append(f"lazy_keys_{g}")
            inits.append("ht_new(1)")
        for m in self.p.maps:
            n = len(m.keys)
            fields.append(f"m_{m.name}")
            if not n:
                inits.append("np.zeros(1)")
                continue
            kt = f"K{n}"
            if m.extreme:   # a value table and a heap per extreme (ddms.storage.extheap), no Dict
                fields.remove(f"m_{m.name}")
                for j, (_, t, h, w) in enumerate(_xfields(m)):
                    fields += [t, h] + ([w, "xg" + w[2:]] if j == 0 else [])
                    inits += ["xh_new()", "xh_new_heap()"] + (["xh_new_win()"] * 2 if j == 0 else [])
                continue
            if self._tree_only(m.name) or self.htab.get(m.name, (m.name,))[0] != m.name:
                fields.remove(f"m_{m.name}")   # (a hash group's maps after the first: its table's columns)
            elif m.name in self.htab:
                inits.append(f"ht_newv({n}, {sum(1 for g in self.htab.values() if g[0] == m.name)})")
            elif m.name in self.point:
                inits.append(f"ht_new({n})")
            else:
                inits.append(f"Dict.empty(key_type={kt}, value_type=types.float64)")
            for pos in sorted(self.indexes[m.name]):
                fields.append(f"ix_{m.name}_{_mask(pos)}")
                inits.append(f"Dict.empty(key_type=K{len(pos)}, value_type=D{n})")
            if m.ordered and self._tree_of(m.name) == m.name:
                fields += [f"op_{m.name}", f"or_{m.name}"]
                columns = self.columns.get(m.name, 1)
                inits.append(f"btree_new(16, {columns})")
                inits.append("np.full(1, -1, np.int64)" if n == 1 else f"ht_new({n - 1})")
            if m.name in self.view_maps:
                fields += [f"log_keys_{m.name}", f"log_old_{m.name}"]
                inits += [f"List.empty_list({kt})", "List.empty_list(types.float64)"]
        return fields, inits


def _trigger_name(t: Trigger) -> str:
    return f"on_{'insert' if t.sign == '+' else 'delete'}_{t.stream}"


def _summands(e: Expr) -> tuple[Expr, ...]:
    """The parts whose values add up to a closed ``e``: a sum's terms, an aggregate's body."""
    if isinstance(e, Add):
        return e.terms
    if isinstance(e, AggSum):
        return (e.expr,)
    return (e,)


def _nan_factor(f: Expr) -> bool:
    """Whether factor ``f`` of a product can be NaN: something under it can make NaN, and it is
    not a comparison or a lift (0 or 1 whatever their sides)."""
    return not isinstance(f, Cmp | Lift) and any(_may_be_nan(x) for x in walk(f))


def _may_be_nan(x: Expr) -> bool:
    """Whether node ``x`` can make its value NaN (SQL NULL) from numbers that are not: an
    extreme of an empty slice, a quotient or remainder by 0, an integer cast out of range, NULLIF."""
    return isinstance(x, Extreme | Div | Mod) or (isinstance(x, Func) and (x.name in INT_BITS or x.name == "nullif"))


def _cut_key(b: MapRef, rop: str, cop: str, x: Expr) -> tuple:
    """What identifies a threshold boundary: the map, its prefix keys, the two comparisons and
    the threshold (not the name of the ordered key's variable, bound inside the search)."""
    return (b.name, b.keys[:-1], rop, cop, print_expr(x))


def _mask(pos: tuple[int, ...]) -> str:
    return "b" + "".join(str(p) for p in pos) if pos else "all"


def _vars(e: Expr) -> set[Var]:
    return {x for x in walk(e) if isinstance(x, Var)} | {Var(k) for x in walk(e) if isinstance(x, MapRef)
                                                          for k in x.keys}


@functools.cache
def _runtime_fingerprint() -> str:
    """Hash of the run-time libraries generated code calls (their contents, not where they are
    installed).  numba's cache does not notice when a *callee* in another file changes, so the
    module name must change with them.  Two installations of the same sources (a checkout and a
    wheel built from it) share machine code; installations that differ in any of these files
    get different module names and never load each other's."""
    from ddms.backend import rt
    from ddms.storage import btree, extheap, hashtab
    h = hashlib.sha256()
    for mod in (rt, btree, hashtab, extheap):
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()


def generate(program: Program) -> Generated:
    """Generate the numba module for ``program`` (verified first).  Pure: same program, same
    text, same digest (which names the module file in the cache)."""
    verify(program)
    tree_only = _tree_only_candidates(program)
    point = _point_candidates(program, tree_only)
    deferred = (deferred_maps(program), keyed_deferred_maps(program))   # the same for every round
    while True:   # at most one round per candidate
        g = _Codegen(program, tree_only, point, deferred)
        try:
            source = g.module()
            break
        except _NeedsHash as e:
            tree_only = tree_only - {e.name}
        except _NeedsDict as e:
            point = point - {e.name}
    digest = hashlib.sha256((CODEGEN_VERSION + _runtime_fingerprint() + source).encode()).hexdigest()[:20]
    return Generated(source, digest, tuple(g.plan), program)
