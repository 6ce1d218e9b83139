"""SQL AST -> calculus: each view becomes aggregate queries in normal form plus the expression
that combines them (``SUM(x) / COUNT(*)`` for AVG).

* a FROM table ``bids b`` is the atom ``BIDS(B_T, B_ID, ...)`` (fresh variables per alias);
* WHERE is a product of comparisons; ``OR`` is inclusion-exclusion (``{a} + {b} - {a}{b}``),
  ``NOT`` is ``1 - {a}`` (a negated comparison flips its operator);
* ``SUM(e)`` multiplies ``e`` into the terms, ``COUNT`` counts, ``AVG`` is ``SUM / COUNT``; an
  argument that can be NULL (a quotient: ``AVG`` over nothing, ``x / 0``) is guarded by
  ``{e = e}``, false for NULL, so ``SUM``/``COUNT``/``AVG`` skip NULL inputs as SQL does;
* a scalar subquery is a nested ``AggSum`` (its free variables are the correlation);
* a plain (aggregate-free) subquery in FROM is inlined;
* an aggregate subquery in FROM is a relation whose columns are nested aggregates (DBToaster's
  lifted nested aggregates, with the column's expression substituted where it is read):
  without ``GROUP BY`` it is exactly one row (``SUM`` over nothing is 0, ``COUNT`` 0, ``AVG``
  NULL), so it adds no factor and each column is a scalar subquery; with ``GROUP BY g`` it is
  one row per non-empty group, the factor ``Exists(g, count of rows per g)`` binding ``g``, and
  each aggregate column is the aggregate correlated on ``g``.  A ``GROUP BY`` subquery may not
  refer to columns of an enclosing query, and a ``GROUP BY`` key of the enclosing query that is
  an aggregate column is bound by a lift ``(k ^= aggregate)`` (rejected when it can be NULL:
  NULL keys would need a group of their own);
* ``MIN(x)``/``MAX(x)`` count the rows per value ``v`` of ``x`` (``(v ^= x)``, per group and
  per outer key it is correlated on by equality) and take the extreme key: an ``ExtremeAgg``
  nested, ``Extreme(kind, v, #i[group.., v])`` at top level; NULL over nothing;
* ``CASE`` is a sum of branches, each value times its condition and "no earlier condition held"
  as opaque 0/1 factors placed first (a branch not taken is 0 even if its value is NULL);
  ``COALESCE``, ``NULLIF``, ``ABS``, ``GREATEST``, ``LEAST`` arrive as ``CASE``, and are taken as
  one ``Func`` each where an argument holds a CASE (a CASE whose condition holds one: nested ``If``
  functions), so nesting does not copy a CASE into every branch (:meth:`_Translator.sugar`); ``HAVING``
  multiplies every output by its condition over the aggregates; a SELECT without FROM is an
  expression over scalar subqueries; a view may have several outputs (``ViewDef.columns``);
* a **top-N** subquery in FROM (``GROUP BY price ORDER BY price DESC LIMIT n``, or
  ``ROW_NUMBER() OVER ([PARTITION BY ..] ORDER BY price DESC) <= n``) keeps the groups at or
  above the n-th largest key, ``ExtremeAgg(max, v, counts, n)`` (:meth:`_Translator.top_source`);
  a sum over the kept groups of their sums drops the groups' row factor (:func:`_uncover`), so
  it is a range sum up to the cut; a top-N over single rows needs a unique tie-break (``ORDER BY
  price DESC, id``): its cut is the key of the n-th row, ``ExtremeAgg(.., n, rows=True)``, and the
  rows at that key are kept by their rank in the tie-break (:meth:`_Translator.row_top_source`);
  without one it is rejected (rows tying at the cut);
* ``x / c`` for a nonzero constant ``c`` is ``x * (1 / c)``, except inside a SQL function's argument
  or a GROUP BY expression, where the quotient is kept (``FLOOR(x / 100)`` must divide as DuckDB);
* ``ROUND``/``FLOOR``/``CEIL``/``TRUNC``/``SIGN`` and integer CASTs are ``Func`` nodes: per row inside
  an aggregate's argument, over the aggregates' maps at the output (never inside a delta);
* ``GROUP BY`` an expression (or an ordinal, or an output alias) lifts each row's key into a
  variable, ``(k ^= FLOOR(price / 100) * 100)``, that keys the maps; ``AGG(x) FILTER (WHERE c)``
  multiplies ``c`` into that aggregate's rows only; ``x op ALL/ANY (subquery)`` becomes
  comparisons with the subquery's COUNT/MIN/MAX (:meth:`_Translator.quantified`);
* equalities between variables are removed by renaming (:func:`ddms.calculus.normal.unify`).

Pure; cost linear in the SQL plus the multiplied-out terms (bounded by ``normal.MAX_TERMS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ddms.calculus.ir import (
    Exists,
    ExtremeAgg,
    Query,
    Rel,
    Term,
    children,
    expr_vars,
    has_rel,
    nullable,
    query_expr,
    substitute,
    term_expr,
    term_vars,
    walk,
    with_children,
)
from ddms.calculus.normal import check_budget, expand, merge_terms, simplify_term, unify
from ddms.errors import SqlError
from ddms.io.symbols import symbol_id
from ddms.m3.ir import (
    Add,
    AggSum,
    Cmp,
    Const,
    Div,
    Expr,
    Extreme,
    Func,
    Lift,
    Limit,
    MapRef,
    Mod,
    Mul,
    Neg,
    Stream,
    Var,
)
from ddms.sql.ast import (
    Agg,
    And,
    Arith,
    Bool,
    Call,
    Case,
    Col,
    Compare,
    Cond,
    FromSelect,
    FromTable,
    InList,
    IsNull,
    Item,
    Lit,
    Minus,
    Not,
    Null,
    Or,
    Quantified,
    Scalar,
    Script,
    Select,
    SqlExpr,
    Str,
    TopN,
    has_agg,
    has_scalar,
    one_row,
    parts,
)
from ddms.sql.ast import Exists as SqlExists

_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class ViewDef:
    """A view in calculus: ``value`` combines the ``aggregates`` (read as ``MapRef('#i', group)``)."""

    name: str
    group: tuple[str, ...]
    key_names: tuple[str, ...]
    aggregates: tuple[Query, ...]
    value: Expr
    domain: Query
    sql: str = field(compare=False, default="")
    columns: tuple[tuple[str, Expr], ...] = ()
    """With several outputs: (column name, value over the ``#i`` aggregates) each, ``value``
    being the first's; empty for a view with one output (named after the view)."""
    limit: Limit | None = None
    """How the rows are cut and ordered when read (its ``rows`` map named by the materializer);
    ``keys_only``: a view of keys without outputs (SELECT DISTINCT)."""


@dataclass
class _Scope:
    """Column name -> what it reads, for the FROM items of one SELECT, with the enclosing scope: a
    variable (a relation's column, a GROUP BY key of a subquery in FROM) or an expression (an
    aggregate column of a subquery in FROM: a nested aggregate)."""

    tables: dict[str, dict[str, str | Expr]]
    parent: _Scope | None

    def lookup(self, c: Col, fail) -> str | Expr:
        scope: _Scope | None = self
        while scope is not None:
            if c.table is not None:
                if c.table in scope.tables:
                    cols = scope.tables[c.table]
                    if c.name.upper() not in cols:
                        raise fail(f"{c.table} has no column {c.name}", c.text)
                    return cols[c.name.upper()]
            else:
                hits = [cols[c.name.upper()] for cols in scope.tables.values() if c.name.upper() in cols]
                if len(hits) > 1:
                    raise fail(f"column {c.name} is ambiguous: qualify it", c.text)
                if hits:
                    return hits[0]
            scope = scope.parent
        raise fail(f"unknown column {c.text or c.name}", c.text)

    def resolve(self, c: Col, fail) -> str:
        """The variable of a column that must be one (a key, a plain subquery's output)."""
        hit = self.lookup(c, fail)
        if not isinstance(hit, str):
            raise fail(f"{c.text or c.name} is an aggregate computed by a subquery in FROM, not a column of a "
                       "relation: it cannot be used here", c.text)
        return hit

    def outer_vars(self) -> set[str]:
        """The variables of the enclosing queries' columns (what a subquery may correlate on)."""
        out: set[str] = set()
        scope = self.parent
        while scope is not None:
            out |= {v for cols in scope.tables.values() for v in cols.values() if isinstance(v, str)}
            scope = scope.parent
        return out

    def rebind(self, c: Col, var: str) -> None:
        """Make ``c`` read ``var`` from now on (an aggregate column lifted into a variable)."""
        scope: _Scope | None = self
        while scope is not None:
            for alias, cols in scope.tables.items():
                if c.name.upper() in cols and (c.table is None or c.table == alias):
                    cols[c.name.upper()] = var
                    return
            scope = scope.parent


class _Translator:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.streams: dict[str, Stream] = {s.name: s for s in script.streams}
        self.at = 0  # offset of the statement being translated (error locations)
        # trigger arguments are named STREAM_COLUMN (see ddms.calculus.materialize): never reuse them
        self.used: set[str] = {f"{s.name}_{c.name}" for s in script.streams for c in s.columns}
        self.string_vars: set[str] = set()   # variables of VARCHAR (symbol) columns
        self.covered: set[Exists] = set()   # rows of top-N groups a term may drop (normalize)
        # inside a SQL function's argument or a GROUP BY expression, ``x / c`` stays a quotient (the
        # value is DuckDB's only so: FLOOR(x * 0.01) is not FLOOR(x / 100) at every x); elsewhere it
        # is the product ``x * (1 / c)``, which factorises (:func:`_divide`)
        self.exact = False

    def exactly(self, on: bool, fn, *args):
        """``fn(*args)`` with :attr:`exact` set to ``on`` (restored after)."""
        saved, self.exact = self.exact, on
        try:
            return fn(*args)
        finally:
            self.exact = saved

    def divide(self, x: Expr, y: Expr) -> Expr:
        return Div(x, y) if self.exact else _divide(x, y)

    def fail(self, reason: str, fragment: str = "") -> SqlError:
        return SqlError(reason, self.script.source, fragment, self.script.text, self.at)

    def fresh(self, base: str) -> str:
        base = "".join(ch if ch.isalnum() else "_" for ch in base.upper())
        if base[0].isdigit():
            base = "V" + base
        name, i = base, 1
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    # -- FROM -------------------------------------------------------------------------------------
    def from_items(self, sel: Select, parent: _Scope | None) -> tuple[_Scope, list[Term], set[str]]:
        """The scope of ``sel``'s FROM, the terms of its atoms (and inlined subqueries), and the
        variables local to this level."""
        scope = _Scope({}, parent)
        terms = [Term(1.0, (), ())]
        local: set[str] = set()
        for item in sel.sources:
            if isinstance(item, FromSelect):
                for it in item.select.items:
                    if not it.name:
                        raise self.fail("a column of a subquery in FROM needs a name (AS name)", it.text)
            if isinstance(item, FromTable):
                s = self.streams.get(item.name)
                if s is None:
                    raise self.fail(f"unknown stream or table {item.name} (declare it with CREATE STREAM)", item.text)
                cols = {c.name: self.fresh(f"{item.alias}_{c.name}") for c in s.columns}
                self.string_vars |= {cols[c.name] for c in s.columns if c.type == "string"}
                scope.tables[item.alias] = dict(cols)
                local |= set(cols.values())
                atom = Rel(s.name, tuple(cols[c.name] for c in s.columns))
                terms = [Term(t.coef, t.atoms + (atom,), t.factors) for t in terms]
            else:
                assert isinstance(item, FromSelect)
                sub = item.select
                if sub.top is not None:
                    top_cols, sub_terms, sub_local = self.top_source(item, parent)
                    scope.tables[item.alias] = top_cols
                    local |= sub_local
                    terms = _times(terms, sub_terms)
                    continue
                if any(has_agg(it.expr) for it in sub.items) or sub.group:
                    agg_cols, sub_terms, sub_local = self.aggregate_source(item, parent)
                    scope.tables[item.alias] = agg_cols
                    local |= sub_local
                    terms = _times(terms, sub_terms)
                    continue
                cols, inner_terms, inner_local = self.plain_source(item, parent)
                scope.tables[item.alias] = cols
                local |= inner_local
                terms = _times(terms, inner_terms)
        return scope, terms, local

    def plain_source(self, item: FromSelect, parent: _Scope | None
                     ) -> tuple[dict[str, str | Expr], list[Term], set[str]]:
        """A plain (aggregate-free) subquery in FROM, inlined: its columns, terms and variables."""
        sub = item.select
        inner_scope, inner_terms, inner_local = self.from_items(sub, parent)
        if sub.where is not None:
            inner_terms = _times(inner_terms, self.cond(sub.where, inner_scope))
        cols: dict[str, str | Expr] = {}
        for it in sub.items:
            if not isinstance(it.expr, Col):
                raise self.fail("a subquery in FROM may select plain columns only", it.text)
            cols[it.name.upper()] = inner_scope.lookup(it.expr, self.fail)
        return cols, inner_terms, inner_local

    def aggregate_source(self, item: FromSelect, parent: _Scope | None
                         ) -> tuple[dict[str, str | Expr], list[Term], set[str]]:
        """An aggregate subquery in FROM as (its columns, the terms it multiplies into the
        enclosing FROM, the variables it adds to the enclosing level).

        Without GROUP BY the subquery is one row whatever its input: its columns are scalar
        subqueries and it contributes the factor 1.  With GROUP BY ``g`` its rows are the
        non-empty groups: the factor ``Exists(g, count per g)`` binds ``g`` and each aggregate
        column is the aggregate for the bound group (a nested ``AggSum`` correlated on ``g``).
        Cost: as translating the subquery once per aggregate column, plus once for its rows."""
        sub = item.select
        if sub.having is not None:
            raise self.fail("HAVING is supported in a view's top-level SELECT only", item.text)
        for g in sub.group:
            if not isinstance(g, Col):
                raise self.fail("a subquery in FROM groups by columns (GROUP BY expressions are supported in a "
                                "view's top-level SELECT)", g.text or item.text)
        created_before = set(self.used)
        inner_scope, body, inner_local = self.from_items(sub, parent)
        if sub.where is not None:
            body = _times(body, self.cond(sub.where, inner_scope))
        group = tuple(dict.fromkeys(inner_scope.resolve(g, self.fail) for g in sub.group))
        cols: dict[str, str | Expr] = {}
        for it in sub.items:
            name = it.name.upper()
            if name in cols:
                raise self.fail(f"the subquery {item.alias} has two columns named {it.name}", it.text)
            if has_agg(it.expr):
                cols[name] = self.aggregate_expr(it.expr, inner_scope, body, inner_local, group, nested=True)
            elif isinstance(it.expr, Col) and inner_scope.lookup(it.expr, self.fail) in group:
                cols[name] = inner_scope.resolve(it.expr, self.fail)
            else:
                raise self.fail("outside an aggregate, a subquery in FROM may select its GROUP BY columns only",
                                it.text)
        if not group:
            return cols, [Term(1.0, (), ())], set()
        # the rows (groups) are a map over the whole input: no variable of an enclosing query
        created = set(self.used) - created_before
        seen = {v for t in body for v in term_vars(t)}
        seen |= {v for e in cols.values() if not isinstance(e, str) for v in expr_vars(e)}
        if seen - created:
            raise self.fail("a GROUP BY subquery in FROM cannot refer to columns of an enclosing query "
                            f"({', '.join(sorted(seen - created))}): join on its GROUP BY columns outside it",
                            item.text)
        count = self.normalize(group, body, inner_local)
        return cols, [Term(1.0, (), (Exists(group, query_expr(count)),))], set(group)

    def top_source(self, item: FromSelect, parent: _Scope | None
                   ) -> tuple[dict[str, str | Expr], list[Term], set[str]]:
        """A top-N subquery in FROM (:class:`ddms.sql.ast.TopN`) over price levels: ``GROUP BY
        [p..,] k`` ordered by the key ``k`` (per partition ``p``) keeps the groups whose ``k`` is
        at or above the n-th largest ``k`` present (DESC; at or below the n-th smallest for ASC):
        the rows of :meth:`aggregate_source` times ``{k >= ExtremeAgg(max, v, count per [p.., v],
        n)}``, a select by rank in the tree of group counts, O(log n).  Group keys are distinct,
        so the cut has no ties.

        Rows of orders (no GROUP BY) are rejected: ``ORDER BY price LIMIT n`` over orders that
        tie at the n-th price keeps an arbitrary subset of them (SQL leaves it open), so a sum of
        their volumes has no one answer.  The groups' row factor ``Exists`` is registered in
        ``covered``: a term that also reads one of the groups' sums drops it (:meth:`normalize`),
        so "volume of the 5 best levels" is a range sum, not a pass over the groups."""
        sub = item.select
        top = sub.top
        assert top is not None
        pushed = _push_top(item)
        if pushed is not None:   # a plain selection over a GROUP BY subquery: cut the groups
            return self.plain_source(pushed, parent)
        if not sub.group:
            return self.row_top_source(item, parent)
        if top.ties:
            raise self.fail("a top-N over groups is ordered by one column, its GROUP BY key (levels have no ties: "
                            "ORDER BY price DESC)", top.text or item.text)
        cols, terms, sub_local = self.aggregate_source(item, parent)
        exists = terms[0].factors[0]
        assert isinstance(exists, Exists) and isinstance(exists.body, AggSum)
        # GROUP BY columns by their names and by the names they are selected under
        names: dict[str, str] = {}
        if len(sub.group) == len(exists.group):
            names = {g.name.upper(): v for g, v in zip(sub.group, exists.group, strict=True)}
        for it in sub.items:
            if isinstance(it.expr, Col) and it.expr.name.upper() in names:
                names.setdefault(it.name.upper(), names[it.expr.name.upper()])

        def var_of(c: Col) -> str:
            if c.name.upper() not in names:
                raise self.fail("a top-N over groups is ordered and partitioned by its GROUP BY columns (the n "
                                "best price levels: GROUP BY price ... ORDER BY price DESC LIMIT n)",
                                top.text or c.text)
            return names[c.name.upper()]
        key = var_of(top.key)
        self.numeric(Var(key), top.key, "an ORDER BY of a top-N")
        part = tuple(dict.fromkeys(var_of(c) for c in top.partition))
        if set(exists.group) != set(part) | {key} or key in part:
            raise self.fail("a top-N over groups orders by the GROUP BY column that is not a PARTITION BY "
                            "column, and partitions by the others (GROUP BY broker_id, price with PARTITION BY "
                            "broker_id ORDER BY price)", top.text or item.text)
        kind = "max" if top.desc else "min"
        v = self.fresh(f"{kind}_rank")
        counts = substitute(exists.body, {key: v})
        assert isinstance(counts, AggSum)
        if top.n == 0:   # LIMIT 0: no row
            return cols, [], sub_local

        def cut(n: int) -> Expr:
            return ExtremeAgg(kind, v, AggSum(part + (v,), counts.expr), n)
        keep: tuple[Expr, ...] = () if top.n < 0 else (   # (n = -1: no bound, OFFSET m alone)
            Cmp(">=" if top.desc else "<=", Var(key), cut(top.n + top.offset)),)
        if top.offset:   # OFFSET m: not among the m first levels (none when there are m or fewer)
            keep += (Cmp("<" if top.desc else ">", Var(key), cut(top.offset)),)
        self.covered.add(exists)
        return cols, [Term(1.0, (), (exists, *keep))], sub_local

    def row_order(self, sub: Select, top: TopN, where: str) -> TopN:
        """``top`` over the single rows of ``sub`` with its columns resolved through ``sub``'s
        aliases, after checking that it orders them totally (a unique tie-break, or ``RANK()``):
        else rows tying at the cut would make the result depend on which SQL keeps."""
        def column(c: Col) -> Col:
            # ORDER BY / PARTITION BY may name a column by its alias in the select list
            for it in sub.items:
                if c.table is None and it.name.upper() == c.name.upper() and isinstance(it.expr, Col):
                    return it.expr
            return c
        top = replace(top, key=column(top.key), partition=tuple(column(c) for c in top.partition),
                      ties=tuple((column(c), d) for c, d in top.ties))
        tables = [s for s in sub.sources if isinstance(s, FromTable)]
        stream = self.streams.get(tables[0].name) if len(sub.sources) == 1 and len(tables) == 1 else None
        unique = _unique_columns(stream) if stream is not None else set()
        if not top.ties and top.key.name.upper() not in unique and not top.rank:
            raise self.fail("ORDER BY ... LIMIT over single rows needs a unique tie-break: rows that tie at the "
                            "cut make the result depend on which of them SQL keeps; order by the price and then "
                            "the order id (ORDER BY price DESC, id LIMIT n), or keep the first n price levels "
                            "(SELECT price, SUM(volume) ... GROUP BY price ORDER BY price DESC LIMIT n)", where)
        if len(sub.sources) != 1 or len(tables) != 1:
            raise self.fail("a top-N over single rows reads one stream (its order id is unique there, not in a "
                            "join or a subquery)", where)
        if top.ties and not top.rank and top.ties[-1][0].name.upper() not in unique:
            raise self.fail("a top-N over single rows ends its tie-break with a column the stream keeps unique "
                            f"({', '.join(sorted(unique)).lower() or 'none here'}: ORDER BY price DESC, id or "
                            "ORDER BY price DESC, t, id), so that the n first rows are one set", where)
        if not top.rank and stream is not None and any(c.name == "SYMBOL" for c in stream.columns) \
                and "SYMBOL" not in {c.name.upper() for c in top.partition}:
            raise self.fail("order ids are unique per instrument only (price-level readers derive them from the "
                            "price): rank the orders per symbol, ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY "
                            "price DESC, id)", where)

        return top

    def row_top_source(self, item: FromSelect, parent: _Scope | None
                       ) -> tuple[dict[str, str | Expr], list[Term], set[str]]:
        """A top-N over single rows of one stream, ordered by a key ``k`` and then a column ``i``
        the stream keeps unique (``ORDER BY price DESC, id LIMIT n``, or ``ROW_NUMBER() OVER
        ([PARTITION BY g] ORDER BY price DESC, id) <= n``): the n first rows in the order (k, i),
        per partition.  With the tie-break the order is total, so the result is one set of rows.

        The cut is the key of the n-th row, ``P = ExtremeAgg(max, v, rows per [g.., v], n,
        rows=True)``: a select by weighted rank in the tree of row counts per key (the last key
        when there are fewer than n rows), O(log n).  A row is kept when its key is better than
        ``P``, or equal to it with fewer than ``n - A`` rows of that key before it by ``i``, ``A``
        the rows at better keys: ``{k > P} + {k = P} * {n - A(k) > B(k, i)}``.  The first part is
        a range sum, and at the one key ``P`` (a lift) the second is a threshold search in the
        tree of rows per ``i`` at that key (``ddms.calculus.order``): O(log n) per event.

        Ordered by a unique column alone (``ORDER BY id DESC LIMIT n``) the rows are ``{k >= P}``,
        and so are the rows of ``RANK() OVER (ORDER BY k) <= n`` whatever the data (the rows with
        fewer than n rows at better keys); ``RANK()`` with a second column is the formula above,
        exact whatever the data too (it never needs uniqueness: ties are all kept).
        This keeps the rows ranked n or better (``RANK() <= n`` of the order), which is ``LIMIT
        n`` exactly when (k, i) is unique among the rows; hence the tie-break must be a column
        the stream keeps unique (``id`` of an order-book stream: every reader keeps one row per
        resting order id, a repeated id replaces).  Without it, orders tying at the n-th key make
        SQL keep an arbitrary subset of them: rejected, pointing at the ORDER BY.

        Several tie-break columns (``ORDER BY price DESC, t, id``, the last one unique; or any
        columns under ``RANK()``) order the rows at a key lexicographically: ``B`` is then the sum
        over the columns ``j`` of the rows equal on the key and the columns before ``j`` and before
        on ``j``, exact alike.  Its cost is not O(log n) but O(m log n), ``m`` the rows at the cut
        key (``ddms compile``: "loop over .. slice", cost class O(slice)): the rows kept at ``P``
        are a prefix of its rows in (t, id) order, and the trees order one column each, so no
        single threshold search finds the prefix's end.  O(log n) would take a second cut, the
        ``t`` of the ``(n - A)``-th row at ``P`` (a select by weighted rank in the tree of rows per
        ``t`` at ``P``, whose rank ``n - A`` is read from a map, where ``ExtremeAgg.n`` is a
        constant today), then the rows at that ``t`` by id (the threshold search above)."""
        sub, top = item.select, item.select.top
        assert top is not None
        top = self.row_order(sub, top, top.text or item.text)

        def rows() -> tuple[_Scope, list[Term], set[str]]:
            # a fresh copy of the subquery's rows (its own variables): the rows, and each count
            scope, terms, local = self.from_items(sub, parent)
            if sub.where is not None:
                terms = _times(terms, self.cond(sub.where, scope))
            return scope, terms, local

        def var(scope: _Scope, c: Col) -> str:
            hit = scope.lookup(c, self.fail)
            if not isinstance(hit, str):
                raise self.fail("a top-N over single rows orders and partitions by columns of its stream", c.text)
            return hit
        scope0, terms0, local0 = rows()
        cols: dict[str, str | Expr] = {}
        for it in sub.items:
            if not isinstance(it.expr, Col):
                raise self.fail("a subquery in FROM may select plain columns only", it.text)
            cols[it.name.upper()] = scope0.lookup(it.expr, self.fail)
        if top.n == 0:   # LIMIT 0: no row
            return cols, [], local0
        k0 = var(scope0, top.key)
        ties0 = [var(scope0, c) for c, _ in top.ties]
        for c, w in [(top.key, k0), *((c, w) for (c, _), w in zip(top.ties, ties0, strict=True))]:
            self.numeric(Var(w), c, "an ORDER BY of a top-N")
        g0 = tuple(var(scope0, c) for c in top.partition)

        def count(group: tuple[str, ...], conds) -> Expr:
            # rows of a fresh copy in the row's partition, with ``conds(scope)`` (a nested count)
            scope, terms, local = rows()
            same = tuple(Cmp("=", Var(var(scope, c)), Var(g)) for c, g in zip(top.partition, g0, strict=True))
            extra = tuple(v for v in group if v not in local)
            q = self.normalize(group, _times(terms, [Term(1.0, (), same + conds(scope))]), local | set(extra))
            return query_expr(q)
        kind, better = ("max", ">") if top.desc else ("min", "<")
        v = self.fresh(f"{kind}_row")
        counts = count(g0 + (v,), lambda s: (Cmp("=", Var(v), Var(var(s, top.key))),))
        assert isinstance(counts, AggSum)
        if not top.ties:   # the key is unique: the rows up to the key of the n-th
            def keep(n: int) -> list[Term]:
                # (DENSE_RANK: the n-th distinct key, each counted once; else the n-th row's key)
                return [Term(1.0, (), (Cmp(better + "=", Var(k0), ExtremeAgg(kind, v, counts, n,
                                                                              rows=not top.dense)),))]
            return cols, _times(terms0, _ranks(keep, top.n, top.offset)), local0
        above = count((), lambda s: (Cmp(better, Var(var(s, top.key)), Var(k0)),))
        # rows before this one at its key, by the tie-break columns in order (lexicographic):
        # equal on the key and on the columns before ``j``, before it on column ``j``
        before = [count((), lambda s, j=j: (Cmp("=", Var(var(s, top.key)), Var(k0)),
                                            *(Cmp("=", Var(var(s, c)), Var(t)) for (c, _), t
                                              in zip(top.ties[:j], ties0, strict=False)),
                                            Cmp(">" if top.ties[j][1] else "<", Var(var(s, top.ties[j][0])),
                                                Var(ties0[j]))))
                  for j in range(len(top.ties))]
        ahead = before[0] if len(before) == 1 else Add(tuple(before))

        def keep_ties(n: int) -> list[Term]:
            cut = ExtremeAgg(kind, v, counts, n, rows=True)
            return [Term(1.0, (), (Cmp(better, Var(k0), cut),)),
                    Term(1.0, (), (Cmp("=", Var(k0), cut), Cmp(">", Add((Const(float(n)), Neg(above))), ahead)))]
        return cols, _times(terms0, _ranks(keep_ties, top.n, top.offset)), local0

    # -- conditions -------------------------------------------------------------------------------
    def cond(self, c: Cond, scope: _Scope) -> list[Term]:
        match c:
            case Compare(op, a, b):
                x, y = self.compared(op, a, b, lambda v: self.value(v, scope))
                return [Term(1.0, (), (Cmp(op, x, y),))]
            case And(items):
                out = [Term(1.0, (), ())]
                for x in items:
                    out = _times(out, self.cond(x, scope))
                return out
            case Or(items):
                out = self.cond(items[0], scope)
                for x in items[1:]:
                    y = self.cond(x, scope)
                    out = out + y + [Term(-t.coef, t.atoms, t.factors) for t in _times(out, y)]
                return out
            case Not(Compare(op, a, b)):
                return self.cond(Compare(_NEGATE[op], a, b), scope)
            case Not(Quantified(op, x, sel, every)):
                # NOT (x > ALL S) is x <= ANY S in SQL's three-valued logic, and the converse
                return self.cond(Quantified(_NEGATE[op], x, sel, not every, c.text), scope)
            case Quantified():
                # alternatives that exclude each other: their sum, not an OR's inclusion-exclusion
                return [t for alt in self.quantified(c) for t in self.cond(alt, scope)]
            case Not(Not(x)):
                return self.cond(x, scope)
            case Not(Or(items)):
                # NOT (a OR b) is NOT a AND NOT b in SQL's three-valued logic too, and each NOT
                # then lands on a comparison, where NULL stays false (``x NOT IN (1, NULL)`` is
                # never true; 1 minus the OR counted its NULL rows in)
                return self.cond(And(tuple(Not(x) for x in items), c.text), scope)
            case Not(InList(x, values)):
                # true where x is none of the values and is not NULL
                v, values = self.listed(x, values, lambda e: self.value(e, scope))
                base = Term(1.0, (), (Cmp("=", v, v),) if nullable(v) else ())
                return [base] + [Term(-1.0, (), (Cmp("=", v, Const(c)),)) for c in values]
            case Not(x):
                inner = self.cond(x, scope)
                if isinstance(x, And) and _can_be_null(inner):
                    # 1 - [a AND b] would count the rows where a or b is NULL: NOT (a AND b) is
                    # NOT a OR NOT b (inclusion-exclusion: taken only where a part can be NULL)
                    return self.cond(Or(tuple(Not(y) for y in x.items), c.text), scope)
                return [Term(1.0, (), ())] + [Term(-t.coef, t.atoms, t.factors) for t in inner]
            case Bool(v):
                return [Term(1.0, (), ())] if v else []
            case IsNull(x):
                v = self.value(x, scope)
                return [Term(1.0, (), (Cmp("=", Cmp("=", v, v), Const(0.0)),))] if nullable(v) else []
            case InList(x, values):
                v, values = self.listed(x, values, lambda e: self.value(e, scope))
                return [Term(1.0, (), (Cmp("=", v, Const(c)),)) for c in values]
            case SqlExists(sel, match):
                # EXISTS: the subquery's row count (correlated like a scalar subquery) is nonzero
                if sel.group or sel.having is not None:
                    raise self.fail("EXISTS (SELECT ... GROUP BY / HAVING) is not supported", c.text)
                inner, terms, local = self.from_items(sel, scope)
                if sel.where is not None:
                    terms = _times(terms, self.cond(sel.where, inner))
                if match is not None:   # x IN (SELECT y ...): the rows with y = x
                    y, x = self.value(match[0], inner), self.value(match[1], scope)
                    if self.symbolic(x) != self.symbolic(y) and _NULL not in (x, y):   # symbol IN numbers
                        sym, num = match if self.symbolic(y) else match[::-1]
                        raise self.fail(f"{getattr(sym, 'text', '') or 'a symbol'} is a VARCHAR column: it is "
                                        "compared with a string literal or another VARCHAR column, not with a "
                                        "number", getattr(num, "text", "") or getattr(sym, "text", ""))
                    terms = _times(terms, [Term(1.0, (), (Cmp("=", y, x),))])
                count = self.aggregate_expr(Agg("COUNT", None), inner, terms, local, (), nested=True)
                return [Term(1.0, (), (Cmp("!=", count, Const(0.0)),))]
        raise self.fail("unsupported condition", getattr(c, "text", ""))

    def compared(self, op: str, a: SqlExpr, b: SqlExpr, value) -> tuple[Expr, Expr]:
        """The operands of ``a op b``, translated by ``value``.  A string literal is a symbol
        name: it needs a ``VARCHAR`` column on the other side and ``=`` or ``<>`` (symbols are
        held as ids, :func:`ddms.io.symbols.symbol_id`, hashes with no order), and becomes the
        name's id, the number the readers put in that column for that name."""
        if not isinstance(a, Str) and not isinstance(b, Str):
            x, y = value(a), value(b)
            if self.symbolic(x) and self.symbolic(y):
                if op not in ("=", "!="):
                    raise self.fail(f"symbols compare with = and <> only, not {op}: they are held as ids with no "
                                    "order", getattr(a, "text", ""))
            elif (self.symbolic(x) or self.symbolic(y)) and _NULL not in (x, y):   # (= NULL: never true)
                sym, num = (a, b) if self.symbolic(x) else (b, a)
                raise self.fail(f"{getattr(sym, 'text', '') or 'a symbol'} is a VARCHAR column: it is compared "
                                "with a string literal or another VARCHAR column, not with a number",
                                getattr(num, "text", "") or getattr(sym, "text", ""))
            return x, y
        lit, other = (a, b) if isinstance(a, Str) else (b, a)
        if isinstance(other, Str):
            raise self.fail("a comparison of two string literals is not supported", getattr(other, "text", ""))
        v = self.symbol_column(other, value, lit)   # (price > '100': price is no VARCHAR column)
        if op not in ("=", "!="):
            raise self.fail(f"symbols compare with = and <> only, not {op}: they are held as ids with no order",
                            lit.text)
        c = self.symbol(lit)
        return (c, v) if lit is a else (v, c)

    def listed(self, x: SqlExpr, values: tuple[float | str, ...], value) -> tuple[Expr, tuple[float, ...]]:
        """``x`` of ``x [NOT] IN (values)`` translated by ``value``, and the values as numbers: a
        list of strings is a list of symbol names (``x`` a ``VARCHAR`` column), as for ``=``."""
        strings = [v for v in values if isinstance(v, str)]
        if not strings:
            v = value(x)
            if self.symbolic(v) and any(not isinstance(n, str) and n is not None for n in values):
                raise self.fail(f"{getattr(x, 'text', '') or 'a symbol'} is a VARCHAR column: an IN list of "
                                "numbers never names a symbol (write symbol IN ('AAA', 'BBB'))",
                                getattr(x, "text", ""))
            return v, values  # type: ignore[return-value]
        if len(strings) < len(values):
            raise self.fail("an IN list mixes string literals and numbers", getattr(x, "text", ""))
        lit = Str(strings[0], repr(strings[0]))
        v = self.symbol_column(x, value, lit)
        return v, tuple(self.symbol(Str(s, repr(s))).value for s in strings)

    def symbol_column(self, e: SqlExpr, value, lit: Str) -> Expr:
        """``e`` translated by ``value``, which must be a ``VARCHAR`` column's variable (what a
        string literal may be compared with)."""
        if not isinstance(e, Col):
            raise self.fail("a string literal is compared with a VARCHAR column only (symbol = 'BTCUSDT')",
                            lit.text)
        v = value(e)
        if not (isinstance(v, Var) and v.name in self.string_vars):
            raise self.fail(f"{e.text or e.name} is not a VARCHAR column: a string literal is compared with a "
                            "symbol column only", lit.text)
        return v

    def symbolic(self, x: Expr) -> bool:
        """Whether ``x`` is a ``VARCHAR`` (symbol) column's variable: a symbol id, a hash with no
        order and no arithmetic meaning (:func:`ddms.io.symbols.symbol_id`)."""
        return isinstance(x, Var) and x.name in self.string_vars

    def numeric(self, x: Expr, e: SqlExpr, use: str) -> Expr:
        """``x``, the translation of ``e``, where a number is needed (``use``: arithmetic, a
        function, MIN/MAX/SUM/AVG, an ordering).  A symbol column there would be read as its id,
        a hash: a number DuckDB never shows (MIN(symbol) is a name there, symbol + 1 an error),
        so it is refused at ``e``."""
        if self.symbolic(x):
            raise self.fail(f"{getattr(e, 'text', '') or getattr(e, 'name', 'a symbol')} is a VARCHAR column "
                            f"(symbol names, held as ids): not a number for {use}; a symbol is grouped by, "
                            "counted, or compared with = / <> / IN with a string literal or another VARCHAR "
                            "column", getattr(e, "text", ""))
        return x

    def symbol(self, lit: Str) -> Const:
        """The id of the symbol named by ``lit``."""
        try:
            return Const(float(symbol_id(lit.value)))
        except ValueError as err:
            raise self.fail(f"not a symbol name: {err}", lit.text) from None

    def quantified(self, q: Quantified) -> list[Cond]:
        """``x op ALL/ANY (SELECT e FROM ..)`` rewritten onto COUNT, MIN and MAX of ``e`` over the
        subquery's rows (so over the MIN/MAX range trees: ``price > ALL (SELECT price FROM asks)``
        is one comparison with the best ask, O(log n)), keeping SQL's rules for empty sets and
        NULLs exactly:

        * ``x > ALL S``: true when S has no row, else when no ``e`` is NULL and ``x > MAX(e)``
          (``>=`` alike; ``<``/``<=`` with ``MIN``; ``=`` needs ``x = MIN = MAX``; ``<>`` is NOT
          IN: ``x`` not NULL and no row with ``e = x``);
        * ``x > ANY S``: ``x > MIN(e)`` (``MIN`` skips NULLs and is NULL over nothing, which
          compares false); ``<``/``<=`` with ``MAX``; ``= ANY`` is IN; ``<> ANY``: ``x`` differs
          from ``MIN(e)`` or from ``MAX(e)``.

        A subquery that is one aggregate without GROUP BY is one row: a plain comparison.  Returns
        conditions of which at most one holds (S empty makes MIN/MAX NULL, so the comparison
        branch of ALL fails there): the condition is their sum, one range sum or extreme each.
        O(size of the subquery), translated once per aggregate read."""
        sel = q.select
        if sel.group or sel.having is not None:
            raise self.fail(f"{'ALL' if q.all else 'ANY'} (SELECT ... GROUP BY / HAVING) is not supported", q.text)
        e = sel.items[0].expr
        if has_agg(e):
            return [Compare(q.op, q.expr, Scalar(sel, sel.text), q.text)]

        def agg(func: str, arg: SqlExpr | None) -> Scalar:
            return Scalar(replace(sel, items=(replace(sel.items[0], expr=Agg(func, arg, q.text)),)), q.text)
        x, op = q.expr, q.op
        if not q.all:
            if op in (">", ">="):
                return [Compare(op, x, agg("MIN", e), q.text)]
            if op in ("<", "<="):
                return [Compare(op, x, agg("MAX", e), q.text)]
            if op == "=":
                return [SqlExists(replace(sel, items=()), (e, x), q.text)]
            return [Or((Compare("!=", x, agg("MIN", e)), Compare("!=", x, agg("MAX", e))), q.text)]
        empty = Compare("=", agg("COUNT", None), Lit(0.0), q.text)
        parts: list[Cond] = [] if _never_null(e) else [Compare("=", agg("COUNT", e), agg("COUNT", None), q.text)]
        if op in (">", ">="):
            parts.append(Compare(op, x, agg("MAX", e), q.text))
        elif op in ("<", "<="):
            parts.append(Compare(op, x, agg("MIN", e), q.text))
        elif op == "=":
            parts += [Compare("=", x, agg("MIN", e), q.text), Compare("=", x, agg("MAX", e), q.text)]
        else:
            # NOT IN: holds over an empty S too, unless x is NULL (then only the empty branch does)
            parts.append(Not(SqlExists(replace(sel, items=()), (e, x), q.text)))
            if _never_null(x):
                return [And(tuple(parts), q.text)]
            return [Or((empty, And((Not(IsNull(x)), *parts), q.text)), q.text)]
        return [empty, And(tuple(parts), q.text)]

    def agg_cond(self, c: Cond, value) -> Expr:
        """A condition over aggregates (HAVING, CASE over aggregates) as one 0/1 expression,
        ``value`` translating its operands.  NULL compares false."""
        match c:
            case Compare(op, a, b):
                return Cmp(op, *self.compared(op, a, b, value))
            case And(items):
                return Mul(tuple(self.agg_cond(x, value) for x in items))
            case Or(items):
                return Cmp("!=", Add(tuple(self.agg_cond(x, value) for x in items)), Const(0.0))
            case InList(x, values):
                return self.agg_cond(Or(tuple(Compare("=", x, _literal(v)) for v in values)), value)
            case Not(InList(x, values)):
                return self.agg_cond(And(tuple(Compare("!=", x, _literal(v)) for v in values)), value)
            case Not(Compare(op, a, b)):   # NULL compares false either way round
                return Cmp(_NEGATE[op], *self.compared(op, a, b, value))
            case Not(And(items)):   # De Morgan holds in three-valued logic: NOT lands on comparisons
                return self.agg_cond(Or(tuple(Not(x) for x in items)), value)
            case Not(Or(items)):
                return self.agg_cond(And(tuple(Not(x) for x in items)), value)
            case Not(Not(x)):
                return self.agg_cond(x, value)
            case Not(x):   # of a condition that is never NULL (IS NULL, TRUE/FALSE)
                return Cmp("=", self.agg_cond(x, value), Const(0.0))
            case Bool(v):
                return Const(1.0 if v else 0.0)
            case IsNull(x):
                v = value(x)
                return Cmp("=", Cmp("=", v, v), Const(0.0)) if nullable(v) else Const(0.0)
        if isinstance(c, SqlExists | Quantified) or (isinstance(c, Not) and isinstance(c.cond, SqlExists | Quantified)):
            raise self.fail("EXISTS / IN / ANY / ALL (SELECT ...) over aggregates (in HAVING, or in a CASE over "
                            "aggregates) is not supported: compare with a scalar subquery, (SELECT MIN(..) ...)",
                            getattr(c, "text", ""))
        raise self.fail("unsupported condition", getattr(c, "text", ""))

    # -- values -----------------------------------------------------------------------------------
    def value(self, e: SqlExpr, scope: _Scope) -> Expr:
        match e:
            case Col():
                hit = scope.lookup(e, self.fail)
                return Var(hit) if isinstance(hit, str) else hit
            case Lit(v):
                return Const(v)
            case Minus(x):
                return Neg(self.numeric(self.value(x, scope), x, "arithmetic"))
            case Arith(op, a, b):
                x = self.numeric(self.value(a, scope), a, "arithmetic")
                y = self.numeric(self.value(b, scope), b, "arithmetic")
                if op == "+":
                    return Add((x, y))
                if op == "-":
                    return Add((x, Neg(y)))
                if op == "*":
                    return _product(x, y)
                if op == "%":
                    return Mod(x, y)
                return self.divide(x, y)
            case Call(name, args):
                return Func(name, tuple(self.numeric(self.exactly(True, self.value, a, scope), a, name)
                                        for a in args))
            case Scalar(sel):
                return self.exactly(False, self.scalar, sel, scope, e.text)
            case Null():
                return _NULL
            case Case(_, _, _, fn) if fn is not None and any(_holds_case(a) for a in fn.args):
                return self.sugar(fn, lambda a: self.numeric(self.value(a, scope), a, fn.name.upper()))
            case Case(whens, default) if any(_holds_case(c) for c, _ in whens):
                return self.choice([_factor(self.cond(c, scope)) for c, _ in whens],
                                   [self.numeric(self.value(v, scope), v, "a CASE result") for _, v in whens],
                                   self.numeric(self.value(default, scope), default, "a CASE result"))
            case Case(whens, default):
                return self.bounded(_case([(_factor(self.cond(c, scope)),
                                            self.numeric(self.value(v, scope), v, "a CASE result"))
                                           for c, v in whens],
                                          self.numeric(self.value(default, scope), default, "a CASE result")), e)
            case Agg():
                raise self.fail("an aggregate cannot appear here (only in the SELECT list)", e.text)
            case Str():
                raise self.fail("a string literal is a symbol name, compared with a VARCHAR column only "
                                "(symbol = 'BTCUSDT', symbol IN ('A', 'B'))", e.text)
        raise self.fail("unsupported expression", getattr(e, "text", ""))

    def sugar(self, fn: Call, value: Callable[[SqlExpr], Expr]) -> Expr:
        """``COALESCE``/``NULLIF``/``ABS``/``GREATEST``/``LEAST`` (:class:`ddms.sql.ast.Case`'s
        ``fn``) as one ``Func`` of its arguments, each translated once by ``value``: taken where an
        argument holds a CASE (or one of these).  Their CASE form names each argument two to four
        times (in its tests and branches) and the CASE lowering copies each test into the later
        branches, so a CASE nested in one is copied that many times per level: a GREATEST of two
        NULLIFs was 190 KB of generated code, one more level 5 MB.  The function is opaque to the
        delta (computed where its arguments are values, as ROUND is); where the arguments are
        columns, constants and aggregates the CASE form stays (it factorises like any sum).  Cost
        linear in the arguments."""
        return Func(fn.name, tuple(value(a) for a in fn.args))

    @staticmethod
    def choice(tests: list[Expr], values: list[Expr], default: Expr) -> Expr:
        """``CASE WHEN t1 THEN v1 ... ELSE d END`` from 0/1 tests as nested ``If(t, v, else)``
        functions, each test and value once: taken where a condition holds a CASE, which the sum
        form (:func:`_case`) would copy into the "no earlier test held" factor of each later branch,
        twice per level of nesting.  Opaque to the delta, as :meth:`sugar`.  Cost linear."""
        out = default
        for t, v in zip(reversed(tests), reversed(values), strict=True):
            out = Func("if", (t, v, out))
        return out

    def bounded(self, e: Expr, case: Case) -> Expr:
        """``e``, the translation of ``case``, unless it is more than ``MAX_CASE_NODES`` nodes as a
        tree: then a located error instead of a program that exhausts memory where it is expanded,
        materialized or compiled (each WHEN's test is copied into every later branch: quadratic in
        the branches; nesting that would multiply is taken as functions before, :meth:`sugar` and
        :meth:`choice`).  Cost linear in the distinct nodes of ``e``."""
        n = _tree_size(e, {})
        if n > MAX_CASE_NODES:
            raise self.fail(f"this CASE translates to {n} expression nodes (more than {MAX_CASE_NODES}): each "
                            "WHEN's test is copied into every later branch; use fewer branches (a lookup by "
                            "GROUP BY, a range by FLOOR) or split the CASE", case.text)
        return e

    def scalar(self, sel: Select, parent: _Scope, text: str) -> Expr:
        if sel.having is not None:
            raise self.fail("HAVING is supported in a view's top-level SELECT only", text)
        if sel.group:
            raise self.fail("a scalar subquery cannot have GROUP BY (it must return one row)", text)
        if len(sel.items) == 1 and one_row(sel):
            # (SELECT p FROM best), best a one-row aggregate (WITH) query: the expression over its
            # row, as a view's SELECT list over such a FROM is
            scope, _, _ = self.from_items(sel, parent)
            return self.value(sel.items[0].expr, scope)
        if len(sel.items) != 1 or not has_agg(sel.items[0].expr):
            raise self.fail("a scalar subquery must select exactly one aggregate", text)
        scope, terms, local = self.from_items(sel, parent)
        if sel.where is not None:
            terms = _times(terms, self.cond(sel.where, scope))
        return self.aggregate_expr(sel.items[0].expr, scope, terms, local, (), nested=True)

    def aggregate_expr(self, e: SqlExpr, scope: _Scope, body: list[Term], local: set[str],
                       group: tuple[str, ...], nested: bool, out: list[Query] | None = None) -> Expr:
        """The select-list expression ``e`` over aggregates of ``body``.  Nested: aggregates are
        inlined as ``AggSum`` expressions; top level: appended to ``out`` and read as ``#i``."""
        if isinstance(e, Agg) and e.filter is not None:
            # AGG(x) FILTER (WHERE c): the aggregate over the rows where c holds (c is NULL or false
            # elsewhere), the condition multiplied into its rows as a WHERE is
            terms = _times(body, self.exactly(False, self.cond, e.filter, scope))
            return self.aggregate_expr(replace(e, filter=None), scope, terms, local, group, nested, out)
        if isinstance(e, Agg) and self.exact:   # (an aggregate inside ROUND(...): its argument as usual)
            return self.exactly(False, self.aggregate_expr, e, scope, body, local, group, nested, out)
        match e:
            case Agg(func, arg, _, True):
                return self.distinct(func, arg, scope, body, local, group, nested, out, e.text)
            case Agg(func, arg):
                if func == "AVG":
                    if arg is not None and not has_agg(arg):
                        self.numeric(self.value(arg, scope), arg, "AVG")
                    s = self.aggregate_expr(Agg("SUM", arg, e.text), scope, body, local, group, nested, out)
                    c = self.aggregate_expr(Agg("COUNT", arg, e.text), scope, body, local, group, nested, out)
                    return Div(s, c)
                if arg is not None and has_agg(arg):
                    raise self.fail("nested aggregate functions are not supported", e.text)
                x = None if arg is None else self.value(arg, scope)
                if x is not None and func != "COUNT":
                    x = self.numeric(x, arg, func)
                if x is not None and nullable(x):  # SQL aggregates skip NULL inputs
                    body = _times(body, [Term(1.0, (), (Cmp("=", x, x),))])
                if func in ("MAX", "MIN"):
                    assert x is not None
                    return self.extreme(func.lower(), x, scope, body, local, group, nested, out, e.text)
                terms = body if func == "COUNT" or x is None else _times(body, expand(x))
                q = self.normalize(group, terms, local)
                if nested:
                    return query_expr(q)
                assert out is not None
                out.append(q)
                return MapRef(f"#{len(out) - 1}", group)
            case Arith(op, a, b):
                x = self.aggregate_expr(a, scope, body, local, group, nested, out)
                y = self.aggregate_expr(b, scope, body, local, group, nested, out)
                return {"+": lambda: Add((x, y)), "-": lambda: Add((x, Neg(y))), "*": lambda: _product(x, y),
                        "/": lambda: self.divide(x, y), "%": lambda: Mod(x, y)}[op]()
            case Call(name, args):
                # a function of aggregates: computed from the aggregates' maps where the view's value
                # is (post-aggregate), never inside a delta
                return Func(name, tuple(self.exactly(True, self.aggregate_expr, a, scope, body, local, group,
                                                     nested, out) for a in args))
            case Minus(x):
                return Neg(self.aggregate_expr(x, scope, body, local, group, nested, out))
            case Lit(v):
                return Const(v)
            case Scalar(sel):
                # a scalar subquery beside aggregates: a nested aggregate, re-evaluated from maps
                return self.exactly(False, self.scalar, sel, scope, e.text)
            case Null():
                return _NULL
            case Case(whens, default, _, fn):
                def val(x: SqlExpr) -> Expr:
                    return self.aggregate_expr(x, scope, body, local, group, nested, out)
                if fn is not None and any(_holds_case(a) for a in fn.args):
                    return self.sugar(fn, val)
                if any(_holds_case(c) for c, _ in whens):
                    return self.choice([self.agg_cond(c, val) for c, _ in whens], [val(v) for _, v in whens],
                                       val(default))
                return self.bounded(_case([(self.agg_cond(c, val), val(v)) for c, v in whens], val(default)), e)
        raise self.fail("outside an aggregate, the SELECT list may name GROUP BY columns only", getattr(e, "text", ""))

    def distinct(self, func: str, arg: SqlExpr, scope: _Scope, body: list[Term], local: set[str],
                 group: tuple[str, ...], nested: bool, out: list[Query] | None, text: str) -> Expr:
        """``COUNT/SUM/AVG(DISTINCT x)``: the rows counted per value ``v`` of ``x`` (per group), as
        for MIN/MAX, then a sum over the values present, ``AggSum(g, C[g, v] / C[g, v])`` (times
        ``v`` for SUM).  Not incremental: re-evaluated by a pass over the group's distinct values
        (``ddms compile`` flags it)."""
        if has_agg(arg):
            raise self.fail("nested aggregate functions are not supported", text)
        x = self.value(arg, scope)
        if func != "COUNT":
            x = self.numeric(x, arg, f"{func}(DISTINCT)")
        if nullable(x):
            body = _times(body, [Term(1.0, (), (Cmp("=", x, x),))])
        v = self.fresh("distinct_value")
        terms = _times(body, [Term(1.0, (), (Cmp("=", Var(v), x) if isinstance(x, Var) else Lift(v, x),))])
        q = self.normalize(group + (v,), terms, local | {v})
        outer = scope.outer_vars()
        for t in q.terms:
            loose = (term_vars(t) & outer) - {w for a in t.atoms for w in a.vars} - set(group)
            if loose:
                raise self.fail(f"{func}(DISTINCT ...) in a subquery correlated other than by equality is not "
                                "supported", text)
        if nested:
            counts: Expr = query_expr(q)
        else:
            assert out is not None
            out.append(q)
            counts = MapRef(f"#{len(out) - 1}", q.group)
        present = Div(counts, counts)   # 1 per value present (its rows' count is nonzero)
        n = AggSum(group, present)
        s = AggSum(group, Mul((present, Var(v))))
        return {"COUNT": n, "SUM": s, "AVG": Div(s, n)}[func]

    def extreme(self, kind: str, x: Expr, scope: _Scope, body: list[Term], local: set[str],
                group: tuple[str, ...], nested: bool, out: list[Query] | None, text: str) -> Expr:
        """``MAX(x)``/``MIN(x)`` over ``body``: the rows counted per value ``v`` of ``x`` (per
        group), ``AggSum(group + (v,), body * (v ^= x))``, and the extreme key of those counts:
        nested, an :class:`ExtremeAgg`; at top level, ``Extreme(kind, v, #i[group..., v])`` over
        the placeholder of that count query.  Correlation with an enclosing query must be by
        equality (the counts are then keyed by the outer column): the largest value below an
        outer one is no tree extreme, so it is rejected here, at its place in the SQL."""
        v = self.fresh(f"{kind}_value")
        terms = _times(body, [Term(1.0, (), (Cmp("=", Var(v), x) if isinstance(x, Var) else Lift(v, x),))])
        q = self.normalize(group + (v,), terms, local | {v})
        outer = scope.outer_vars()
        for t in q.terms:
            in_atoms = {w for a in t.atoms for w in a.vars}
            loose = (term_vars(t) & outer) - in_atoms - set(group)
            if loose:
                raise self.fail(f"{kind.upper()} in a subquery correlated other than by equality (on "
                                f"{', '.join(sorted(loose))}) is not supported: only MIN/MAX per value of "
                                "outer columns (b2.col = b1.col) are kept as range-tree extremes", text)
        if nested:
            return ExtremeAgg(kind, v, AggSum(q.group, query_expr(q).expr))
        assert out is not None
        out.append(q)
        return Extreme(kind, v, MapRef(f"#{len(out) - 1}", q.group))  # type: ignore[arg-type]

    def normalize(self, group: tuple[str, ...], terms: list[Term], local: set[str]) -> Query:
        keep = set(group) | {v for t in terms for v in term_vars(t) if v not in local}
        out = []
        for t in terms:
            t = simplify_term(unify(t, local, keep))
            if t is not None:
                out.append(_uncover(t, self.covered) if self.covered else t)
        return Query(group, tuple(merge_terms(out)))

    # -- views of rows ----------------------------------------------------------------------------
    def rows_view(self, sel: Select) -> tuple[Select, _RowSpec | None]:
        """A view whose rows are cut or ordered (a ladder), as a grouped view plus how its rows are
        cut when read (:class:`ddms.m3.ir.Limit`): its own ``ORDER BY .. LIMIT .. OFFSET``; a plain
        selection of a top-N subquery in FROM (``SELECT l.price, l.v FROM (... GROUP BY price ORDER
        BY price DESC LIMIT 5) l``, or ``ROW_NUMBER() <= n``), whose groups are the view's and whose
        cut becomes the view's; rows of orders ordered by a unique tie-break (``SELECT id, price,
        volume FROM bids ORDER BY price DESC, id LIMIT 10``), grouped by the ORDER BY (and PARTITION
        BY) columns, one order per group, its other columns ``SUM`` over that one row.  The maps
        keep every group (deltas, as any grouped view); the cut costs nothing per event.
        O(size of the SELECT)."""
        plain = not sel.group and not any(has_agg(it.expr) or has_scalar(it.expr) for it in sel.items)
        src = sel.sources
        if plain and len(src) == 1 and isinstance(src[0], FromSelect) and src[0].select.top is not None:
            return self.ladder(sel, src[0])
        if sel.rows is None:
            return sel, None
        cut = sel.rows
        if not sel.group and not plain:
            raise self.fail("a view without GROUP BY is one row: ORDER BY / LIMIT cut nothing in it (a view of "
                            "rows groups them: GROUP BY price ORDER BY price DESC LIMIT 5)", cut.text)
        if plain:   # orders: ORDER BY price DESC, id LIMIT n over the rows of a stream
            top = TopN(cut.order[0][0], cut.order[0][1], cut.n if cut.n is not None else -1, (), cut.text,
                       cut.order[1:], offset=cut.offset)
            return self.order_rows(sel, [(it.name, it) for it in sel.items], top, cut.text)
        order = tuple((self.output_name(sel, c, cut.text), d) for c, d in cut.order)
        return replace(sel, rows=None), _RowSpec(order, cut.n, cut.offset, (), cut.text)

    def output_name(self, sel: Select, c: Col, where: str) -> str:
        """The output column of ``sel`` that ORDER BY column ``c`` names (by alias or column)."""
        for it in sel.items:
            if c.table is None and it.name.upper() == c.name.upper():
                return it.name.upper()
        for it in sel.items:
            if isinstance(it.expr, Col) and it.expr.name == c.name and c.table in (None, it.expr.table):
                return it.name.upper()
        raise self.fail(f"ORDER BY {c.text or c.name}: a view's rows are ordered by its output columns (select it, "
                        "or order by an output's alias)", c.text or where)

    def ladder(self, sel: Select, item: FromSelect) -> tuple[Select, _RowSpec]:
        """A plain selection of a top-N subquery in FROM as the view of its rows (see
        :meth:`rows_view`); through one plain selection between them too (``ROW_NUMBER()`` over
        a GROUP BY subquery: :func:`_push_top`)."""
        where = item.select.top.text or item.text  # type: ignore[union-attr]
        if sel.where is not None:
            raise self.fail("a WHERE beside the top-N that makes a view's rows is not supported: filter inside "
                            "the subquery, before the cut", sel.where.text or sel.text)
        pairs: list[tuple[str, Item]] = []
        pushed = _push_top(item)
        if pushed is not None:   # outer -> the plain selection -> the GROUP BY subquery, cut
            mid = pushed.select
            inner_item = mid.sources[0]
            assert isinstance(inner_item, FromSelect)
            for it in sel.items:
                m = _through(mid, item.alias, it)
                if m is None:
                    raise self.fail(f"{it.text}: select columns of the subquery {item.alias}", it.text)
                i = _through(inner_item.select, inner_item.alias, Item(m.expr, it.name, it.text))
                if i is None:
                    raise self.fail(f"{it.text}: select columns of the subquery {item.alias}", it.text)
                pairs.append((it.name, i))
            item = inner_item
        else:
            for it in sel.items:
                i = _through(item.select, item.alias, it)
                if i is None:
                    raise self.fail(f"{it.text}: a view of a top-N's rows selects columns of it", it.text)
                pairs.append((it.name, i))
        sub, top = item.select, item.select.top
        assert top is not None
        if sel.rows is not None and (sel.rows.n is not None or sel.rows.offset):
            raise self.fail("one cut per view: the LIMIT of the subquery, or the view's own (not both)", sel.rows.text)
        if not sub.group:
            select, spec = self.order_rows(sel, pairs, top, where, sub)
        else:
            if top.ties:
                raise self.fail("a top-N over groups is ordered by one column, its GROUP BY key (levels have no "
                                "ties: ORDER BY price DESC)", where)

            def name_of(c: Col) -> str:
                for n, it in pairs:
                    if it.name.upper() == c.name.upper() or (isinstance(it.expr, Col) and it.expr.name == c.name):
                        return n.upper()
                raise self.fail(f"select {c.name}: the rows of a top-N over groups are keyed by the column it is "
                                "ordered (and partitioned) by", c.text or where)
            order = ((name_of(top.key), top.desc),)
            spec = _RowSpec(order, None if top.n < 0 else top.n, top.offset, tuple(name_of(c) for c in top.partition),
                            where)
            items = tuple(Item(it.expr, n, it.text) for n, it in pairs)
            select = replace(sub, items=items, top=None, rows=None, offset=sel.offset)
        if sel.rows is not None:   # the view's own ORDER BY: the order the kept rows are shown in
            order = tuple((self.output_name(select, c, sel.rows.text), d) for c, d in sel.rows.order)
            spec = replace(spec, order=order + tuple(o for o in spec.order if o[0] not in {x for x, _ in order}))
        return select, spec

    def order_rows(self, sel: Select, pairs: list[tuple[str, Item]], top: TopN, where: str,
                   sub: Select | None = None) -> tuple[Select, _RowSpec]:
        """Rows of single orders (``sub``'s, else ``sel``'s own FROM) ordered by ``top``'s key and
        tie-break, as a view keyed by the ORDER BY and PARTITION BY columns (each must be selected:
        they identify a row), its other outputs ``SUM`` over the group's one row."""
        sub = sub if sub is not None else replace(sel, rows=None)
        if top.rank:
            raise self.fail("RANK() keeps every row tying at the cut, rows a view cannot tell apart: order the rows "
                            "with a unique tie-break, ROW_NUMBER() OVER (ORDER BY price DESC, id)", where)
        top = self.row_order(sub, top, where)
        keys = [top.key, *(c for c, _ in top.ties), *top.partition]

        def name_of(c: Col) -> str:
            for n, it in pairs:
                if isinstance(it.expr, Col) and it.expr.name == c.name:
                    return n.upper()
            raise self.fail(f"select {c.name}: rows of orders are keyed by the columns they are ordered and "
                            "partitioned by (the order id among them)", c.text or where)
        names = {name_of(c) for c in keys}
        items = tuple(Item(it.expr if n.upper() in names else Agg("SUM", it.expr, it.text), n, it.text)
                      for n, it in pairs)
        for it in items:
            if isinstance(it.expr, Agg) and it.expr.arg is not None and has_agg(it.expr.arg):
                raise self.fail("a view of rows selects columns and expressions over them", it.text)
        group = tuple(dict.fromkeys(keys))
        select = replace(sub, items=items, group=group, top=None, rows=None, offset=sel.offset)
        order = ((name_of(top.key), top.desc), *((name_of(c), d) for c, d in top.ties))
        return select, _RowSpec(order, None if top.n < 0 else top.n, top.offset,
                                tuple(name_of(c) for c in top.partition), where)

    # -- views ------------------------------------------------------------------------------------
    def group_alias(self, g: SqlExpr, sel: Select, scope: _Scope) -> SqlExpr:
        """A GROUP BY item as DuckDB binds it: a name that is no column of the FROM items but the
        alias of a SELECT item (``GROUP BY bucket``) is that item's expression."""
        if not isinstance(g, Col) or g.table is not None:
            return g
        try:
            scope.lookup(g, self.fail)
            return g
        except SqlError:
            hits = [it.expr for it in sel.items if it.name == g.name]
            if len(hits) != 1 or has_agg(hits[0]) or has_scalar(hits[0]):
                raise
            return hits[0]

    def view(self, name: str, sel: Select) -> ViewDef:
        self.at = sel.offset
        sel, spec = self.rows_view(sel)
        scope, body, local = self.from_items(sel, None)
        if sel.where is not None:
            body = _times(body, self.cond(sel.where, scope))
        group_vars: list[str] = []
        keyed: dict[Expr, str] = {}   # a GROUP BY expression's value -> the variable lifted to it
        for g in sel.group:
            g = self.group_alias(g, sel, scope)
            if not isinstance(g, Col):
                # GROUP BY an expression over the row (a price bucket): each row's key is computed
                # when the row is inserted or deleted, a lift (k ^= FLOOR(price / 100) * 100) in its
                # terms, and the maps are keyed by its value
                val = self.exactly(True, self.value, g, scope)
                if nullable(val):
                    raise self.fail(f"GROUP BY {g.text}: a key that can be NULL (a quotient by a column, a "
                                    "CASE without ELSE, a CAST out of range) is not supported: NULL keys would "
                                    "need a group of their own", g.text)
                if isinstance(val, Var):
                    group_vars.append(val.name)
                    continue
                if val not in keyed:
                    keyed[val] = self.fresh("group_key")
                    # + 0.0 makes -0.0 (TRUNC(-0.5), x % 3 of a negative multiple) the key 0.0: one
                    # group, as in DuckDB and the interpreter's dicts (the engine's hash tables
                    # hash a key's bits, and -0.0 and 0.0 differ there)
                    body = _times(body, [Term(1.0, (), (Lift(keyed[val], Add((val, Const(0.0)))),))])
                    local.add(keyed[val])
                group_vars.append(keyed[val])
                continue
            hit = scope.lookup(g, self.fail)
            if not isinstance(hit, str):
                # a key that is an aggregate column of a subquery in FROM: lift it into a variable
                if nullable(hit):
                    raise self.fail(f"GROUP BY {g.text}: a key that can be NULL (an AVG or a quotient) is not "
                                    "supported", g.text)
                v = self.fresh(g.name)
                body = _times(body, [Term(1.0, (), (Lift(v, hit),))])
                scope.rebind(g, v)
                local.add(v)
                hit = v
            group_vars.append(hit)
        group = tuple(dict.fromkeys(group_vars))
        keys: list[str] = []
        key_vars: list[str] = []
        outputs: list[tuple[str, Expr]] = []
        aggs: list[Query] = []
        if not sel.sources and (sel.where is not None or sel.group):
            raise self.fail("a view without FROM is an expression over scalar subqueries: it takes no WHERE "
                            "or GROUP BY", sel.text)
        for it in sel.items:
            if not it.name:
                raise self.fail("an output expression needs an alias (AS name): it names its column", it.text)
            if any(it.name.upper() == o for o, _ in outputs) or it.name.upper() in keys:
                raise self.fail(f"two output columns are named {it.name}: give each its own AS name", it.text)
            if (not sel.sources or one_row(sel)) and not has_agg(it.expr):
                # no FROM, or FROM one-row aggregate subqueries: one row, the expression over
                # scalar subqueries (nested aggregates)
                outputs.append((it.name.upper(), self.value(it.expr, scope)))
            elif has_agg(it.expr) or has_scalar(it.expr):
                outputs.append((it.name.upper(),
                                self.aggregate_expr(it.expr, scope, body, local, group, False, aggs)))
            elif isinstance(it.expr, Col):
                v = scope.resolve(it.expr, self.fail)
                if v not in group:
                    raise self.fail(f"{it.text} is neither aggregated nor in GROUP BY", it.text)
                keys.append(it.name.upper())
                key_vars.append(v)
            elif keyed and (val := self.exactly(True, self.value, it.expr, scope)) in keyed:
                keys.append(it.name.upper())   # a GROUP BY expression, selected as the view's key
                key_vars.append(keyed[val])
            elif not _reads_columns(it.expr):
                raise self.fail(f"a constant output column ({it.name}) beside aggregates is not supported: a view's "
                                "columns are its GROUP BY keys and aggregates (add the constant where the view is "
                                "read)", it.text)
            else:
                raise self.fail("outside an aggregate, the SELECT list may name GROUP BY columns and expressions "
                                "only (each as it is grouped by)", it.text)
        if sorted(key_vars) != sorted(group):
            raise self.fail("every GROUP BY column or expression must also be selected (it names the view's key)",
                            sel.text)
        if spec is not None:
            for c, _ in spec.order:   # ORDER BY symbol: its ids are hashes, not the names' order
                if c in keys and key_vars[keys.index(c)] in self.string_vars:
                    raise self.fail(f"ORDER BY {c.lower()}: a VARCHAR column (symbol names, held as ids with no "
                                    "order) orders nothing; partition by it or order by a number",
                                    spec.text or sel.text)
            for c, v in zip(keys, key_vars, strict=True):
                if v in self.string_vars and c not in spec.partition and (spec.n is not None or spec.offset):
                    # rows of several symbols tie on the other columns: the cut is per symbol
                    raise self.fail(f"LIMIT/OFFSET over the rows of every {c.lower()} keeps an arbitrary subset "
                                    f"where they tie (a VARCHAR column has no order to break ties): cut per "
                                    f"{c.lower()}, ROW_NUMBER() OVER (PARTITION BY {c.lower()} ORDER BY ...) <= n",
                                    spec.text or sel.text)
        limit = self.limit(spec, keys, [c for c, _ in outputs], sel)
        if limit is not None and sel.having is not None:
            # HAVING zeroes a failing group's values, but the rows of a cut are the groups with
            # input rows (Limit: a group of zeros is a row, as in SQL): the dropped groups would be
            # shown with 0 and take places before the LIMIT (a wrong answer before qa36)
            raise self.fail("HAVING with ORDER BY / LIMIT / OFFSET / DISTINCT on a view is not supported: the groups "
                            "HAVING drops would still be rows of the cut (filter the rows with WHERE, or drop the "
                            "ORDER BY and LIMIT)", sel.having.text or sel.text)
        if not outputs and sel.having is not None:
            raise self.fail("HAVING needs aggregate outputs to filter on", sel.having.text or sel.text)
        if sel.having is not None:
            # HAVING: every output is 0 (no row) where the condition over aggregates fails; the
            # test comes first, so a NULL output of a filtered group is dropped too
            def val(x: SqlExpr) -> Expr:
                return self.aggregate_expr(x, scope, body, local, group, False, aggs)
            test = self.agg_cond(sel.having, val)
            outputs = [(c, Mul((test, e))) for c, e in outputs]
        # the view's keys are in SELECT-list order
        order = tuple(key_vars)
        aggs = [Query(order + q.group[len(order):], q.terms) for q in aggs]  # (MIN/MAX: + their value)
        columns = tuple((c, _regroup(e, order)) for c, e in outputs)
        domain = self.normalize(order, body, local)
        return ViewDef(name, order, tuple(keys), tuple(aggs), columns[0][1] if columns else Const(0.0), domain,
                       sel.text, columns if len(columns) > 1 else (), limit)

    def limit(self, spec: _RowSpec | None, keys: list[str], values: list[str], sel: Select) -> Limit | None:
        """How the view's rows are cut when read (:class:`ddms.m3.ir.Limit`, its map of row counts
        named by the materializer), or None for a view showing every group in key order."""
        if not values and not keys:
            raise self.fail("a view needs an output column", sel.text)
        if spec is None and values:
            return None
        spec = spec or _RowSpec((), None, 0, (), sel.text)
        row = keys + values
        if not keys:
            raise self.fail("a view without GROUP BY is one row: ORDER BY / LIMIT cut nothing in it (a view of "
                            "rows groups them: GROUP BY price ORDER BY price DESC LIMIT 5)", spec.text or sel.text)
        part = [row.index(c) for c in spec.partition]
        if any(i >= len(keys) for i in part):
            raise self.fail("PARTITION BY takes the view's key columns", spec.text)
        order = tuple((row.index(c), d) for c, d in spec.order)
        if (spec.n is not None or spec.offset) and not set(range(len(keys))) <= {i for i, _ in order} | set(part):
            missing = [k.lower() for i, k in enumerate(keys) if i not in {j for j, _ in order} | set(part)]
            raise self.fail(f"rows tying on the ORDER BY columns at the cut make LIMIT/OFFSET keep an arbitrary "
                            f"subset: end the ORDER BY with the key column(s) {', '.join(missing)}, which tell rows "
                            "apart", spec.text)
        return Limit("", order, spec.n, spec.offset, tuple(part), keys_only=not values)


@dataclass(frozen=True)
class _RowSpec:
    """A view's row cut by output column names (upper case): what :meth:`_Translator.limit`
    turns into a :class:`ddms.m3.ir.Limit` once the view's columns are known."""

    order: tuple[tuple[str, bool], ...]
    n: int | None
    offset: int
    partition: tuple[str, ...]
    text: str = ""


def _through(sub: Select, alias: str, it: Item) -> Item | None:
    """The item of ``sub`` (a subquery in FROM under ``alias``) that the enclosing query's column
    item ``it`` selects, or None when ``it`` is no column of it."""
    c = it.expr
    if not isinstance(c, Col) or c.table not in (None, alias):
        return None
    return next((x for x in sub.items if x.name.upper() == c.name.upper()), None)


def _literal(v: float | str) -> SqlExpr:
    """A constant of an IN list as a literal: a number, or a symbol name."""
    return Str(v, repr(v)) if isinstance(v, str) else Lit(v)


def _reads_columns(e: SqlExpr | Cond) -> bool:
    """Whether ``e`` reads a column, an aggregate or a subquery (else it is a constant)."""
    return isinstance(e, (Col, Agg, Scalar, SqlExists)) or any(_reads_columns(x) for x in parts(e))


def _never_null(e: SqlExpr) -> bool:
    """Whether ``e`` is certainly not NULL: columns and constants under ``+ - *`` (a stream's
    values are never NULL).  Conservative: anything else may be."""
    match e:
        case Col() | Lit():
            return True
        case Minus(x):
            return _never_null(x)
        case Arith(op, a, b) if op in "+-*":
            return _never_null(a) and _never_null(b)
    return False


def _unique_columns(stream: Stream) -> set[str]:
    """The columns ``stream`` keeps unique among its rows: ``ID`` of an order-book stream (every
    reader keeps one row per resting order id; a repeated id replaces the row), none otherwise.
    With a ``SYMBOL`` column, unique per symbol (:meth:`_Translator.row_top_source` checks)."""
    if stream.source is not None and stream.source.adaptor.lower() == "orderbook" \
            and any(c.name == "ID" for c in stream.columns):
        return {"ID"}
    return set()


def _push_top(item: FromSelect) -> FromSelect | None:
    """A top-N over a plain selection of one GROUP BY subquery's columns (``SELECT l.price, l.v,
    ROW_NUMBER() OVER (ORDER BY l.price DESC) AS rn FROM (... GROUP BY price) l``) as the same
    selection over that subquery cut to its first groups, or None for another shape.  The order
    and partition columns must be selected GROUP BY columns of the inner subquery, named through
    the selection.  O(size of the selection)."""
    sub, top = item.select, item.select.top
    if top is None or sub.group or sub.where is not None or len(sub.sources) != 1 \
            or not isinstance(sub.sources[0], FromSelect) or not all(isinstance(it.expr, Col) for it in sub.items):
        return None
    inner = sub.sources[0]
    if inner.select.top is not None or not inner.select.group:
        return None

    def through(c: Col) -> Col | None:
        for it in sub.items:
            assert isinstance(it.expr, Col)
            if (c.table in (None, inner.alias) and c.name == it.expr.name) or (c.table is None and c.name == it.name):
                if it.expr.table in (None, inner.alias):
                    return Col(None, it.expr.name, c.text)
        return None
    key, part = through(top.key), [through(c) for c in top.partition]
    if key is None or any(c is None for c in part):
        return None
    cut = replace(top, key=key, partition=tuple(c for c in part if c is not None))
    return FromSelect(replace(sub, sources=(FromSelect(replace(inner.select, top=cut), inner.alias, inner.text),),
                              top=None), item.alias, item.text)


def _ranks(keep, n: int, offset: int) -> list[Term]:
    """The rows ranked ``offset + 1 .. offset + n`` from ``keep(k)``, the 0/1 terms of the rows
    ranked k or better: ``keep(n + offset) - keep(offset)`` (the second a subset of the first);
    ``n`` -1 (no bound): every row but ``keep(offset)``."""
    out = [Term(1.0, (), ())] if n < 0 else keep(n + offset)
    return out + [Term(-t.coef, t.atoms, t.factors) for t in keep(offset)] if offset else out


def _uncover(t: Term, covered: set[Exists]) -> Term:
    """``t`` without the row factor ``Exists(g, AggSum(g, C))`` of top-N groups (``covered``)
    when another factor is a sum over the rows of the same groups, ``AggSum(g, B)`` with every
    term of ``B`` the one term of ``C`` times more factors: that sum is 0 where the group has no
    row, so the factor changes nothing, and without it the sum over the groups is a range sum
    of ``B``'s map instead of a pass over the groups (volume of the n best levels: O(log n)).
    Conservative: any other shape keeps the factor (exact, slower).  O(size of t)."""
    for f in t.factors:
        if not (isinstance(f, Exists) and f in covered and isinstance(f.body, AggSum)):
            continue
        base = expand(f.body.expr)
        if len(base) != 1 or base[0].coef != 1.0:
            continue
        need = base[0]
        for g in t.factors:
            if not (isinstance(g, AggSum) and tuple(g.group) == tuple(f.group) and g is not f):
                continue
            parts = expand(g.expr)
            if parts and all(p.atoms == need.atoms and _contains(p.factors, need.factors) for p in parts):
                # factors over the group keys alone (the level's price) are constant in the
                # group: moved into its sum (sum of price * volume per level), so that the sum
                # over the levels is still one range sum
                keyed = [h for h in t.factors if h is not f and h is not g and not has_rel(h)
                         and not any(isinstance(x, AggSum | Exists | ExtremeAgg) for x in walk(h))
                         and expr_vars(h) <= set(f.group)]
                rest = [h for h in t.factors if h is not f and not any(h is k for k in keyed)]
                if keyed:   # (into one occurrence of the sum: SUM(t.v * t.v) reads it twice)
                    rest[next(j for j, h in enumerate(rest) if h is g)] = AggSum(g.group, Mul((*keyed, g.expr)))
                return Term(t.coef, t.atoms, tuple(rest))
    return t


def _contains(big: tuple[Expr, ...], small: tuple[Expr, ...]) -> bool:
    rest = list(big)
    for x in small:
        if x not in rest:
            return False
        rest.remove(x)
    return True


def _regroup(e: Expr, order: tuple[str, ...]) -> Expr:
    """``e`` with every aggregate placeholder (a ``#`` map) keyed by the view's keys in ``order``."""
    if isinstance(e, MapRef) and e.name.startswith("#"):
        return MapRef(e.name, order + e.keys[len(order):])
    kids = children(e)
    return with_children(e, tuple(_regroup(t, order) for t in kids)) if kids else e


_NULL = Div(Const(0.0), Const(0.0))
"""SQL NULL as an expression (0 / 0 is NaN, and a quotient counts as nullable)."""


def _can_be_null(terms: list[Term]) -> bool:
    """Whether a condition's terms compare a value that can be NULL (the condition is then NULL,
    neither true nor false, on such rows).  O(size of the terms)."""
    return any(nullable(x) for t in terms for f in t.factors if isinstance(f, Cmp) for x in (f.left, f.right))


MAX_CASE_NODES = 20_000
"""Budget of expression nodes (counted as a tree: shared subexpressions as often as they occur)
one CASE may translate to (:meth:`_Translator.bounded`)."""


def _holds_case(e: SqlExpr | Cond) -> bool:
    """Whether ``e`` holds a CASE (or COALESCE, NULLIF, ...) outside subqueries.  O(size of e)."""
    return isinstance(e, Case) or any(_holds_case(x) for x in parts(e))


def _tree_size(e: Expr, memo: dict[int, int]) -> int:
    """The number of nodes of ``e`` as a tree, each distinct node object visited once (``memo``:
    ``id`` -> size), so a shared subexpression costs nothing more however often it repeats."""
    got = memo.get(id(e))
    if got is None:
        got = memo[id(e)] = 1 + sum(_tree_size(c, memo) for c in children(e))
    return got


def _factor(terms: list[Term]) -> Expr:
    """A condition's terms (0/1 valued, no relation atoms) as one opaque 0/1 factor: multiplied
    into a branch, it is never distributed over it (``1 - {c}`` times a NULL value would add
    NULL to the sum even where ``c`` holds)."""
    if not terms:
        return Const(0.0)
    if len(terms) == 1 and terms[0].coef == 1.0 and not terms[0].atoms:
        fs = terms[0].factors
        if not fs:
            return Const(1.0)
        if len(fs) == 1 and isinstance(fs[0], Cmp):
            return fs[0]
    return Cmp("!=", Add(tuple(term_expr(t) for t in terms)), Const(0.0))


def _case(branches: list[tuple[Expr, Expr]], default: Expr) -> Expr:
    """``CASE WHEN c1 THEN v1 ... ELSE d END`` from 0/1 conditions: each value times its
    condition and the test that no earlier one held (a NULL condition does not hold), tests
    first so a branch not taken is 0 even when its value is NULL."""
    parts: list[Expr] = []
    earlier: list[Expr] = []
    for c, v in branches + [(Const(1.0), default)]:
        held = earlier[0] if len(earlier) == 1 else Add(tuple(earlier))
        none_before = [Cmp("=", held, Const(0.0))] if earlier else []
        if not (isinstance(v, Const) and v.value == 0.0) and c != Const(0.0):
            parts.append(Mul(tuple(none_before + ([c] if c != Const(1.0) else []) + [v])))
        earlier.append(c)
    if not parts:
        return Const(0.0)
    return parts[0] if len(parts) == 1 else Add(tuple(parts))


def _divide(x: Expr, y: Expr) -> Expr:
    """``x / y``: a product when ``y`` is a nonzero constant (``x / 2`` is ``x * 0.5``), so the
    quotient is neither NULL-guarded nor kept whole: it factorises like any product (a division by
    a constant blocked that and ran two orders of magnitude slower); else a quotient."""
    c = y.value if isinstance(y, Const) else -y.expr.value if isinstance(y, Neg) and isinstance(y.expr, Const) \
        else None
    if c is not None and c != 0.0:
        return Mul((x, Const(1.0 / c)))
    return Div(x, y)


def _product(x: Expr, y: Expr) -> Expr:
    """SQL's ``x * y``, in a row's expression, over aggregates, or in a SELECT without FROM.  M3's
    product (``Mul``) reads ``0 * NULL`` as 0, and the CASE forms of NULLIF/COALESCE/GREATEST/
    LEAST/ABS and every condition rely on that (an indicator that does not hold times a value
    that may be NULL), but SQL's ``0 * NULL`` is NULL: a row of volume 0 made ``volume *
    NULLIF(price, 100)`` 0 and was counted by ``COUNT``/``AVG``, compared in a WHERE, and
    ``(SELECT COUNT(*) ..) * (SELECT MIN(..) ..)`` read 0 on an empty book.  So where one factor
    can be NULL (:func:`nullable`) and the other can be 0 (anything but a nonzero constant: ``1.01 *
    MIN(price)`` is NULL exactly where MIN is, either way) the product is ``Func("mul")``, IEEE's
    (``rt.f_mul``), computed where its factors are values as ROUND is; elsewhere both agree and it
    stays ``Mul``, which factorises (the finance queries' products, never NULL, are unchanged).
    O(size of x and y)."""
    def may_be_zero(e: Expr) -> bool:
        c = e.expr if isinstance(e, Neg) else e
        return not (isinstance(c, Const) and c.value != 0.0)
    if (nullable(x) and may_be_zero(y)) or (nullable(y) and may_be_zero(x)):
        return Func("mul", (x, y))
    return Mul((x, y))


def _times(a: list[Term], b: list[Term]) -> list[Term]:
    out = [Term(x.coef * y.coef, x.atoms + y.atoms, x.factors + y.factors) for x in a for y in b]
    check_budget(out)
    return out




def translate(script: Script) -> list[ViewDef]:
    """Every view of the script in calculus."""
    tr = _Translator(script)
    return [tr.view(v.name, v.select) for v in script.views]
