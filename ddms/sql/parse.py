"""SQL text -> :mod:`ddms.sql.ast`: the front end, and the one module that imports sqlglot.

A script is a sequence of ``;``-separated statements in DBToaster's dialect:

* ``CREATE STREAM|TABLE name(col type, ...) FROM FILE 'path' LINE DELIMITED adaptor(k := 'v')``
  -- parsed by the M3 parser (the same declaration syntax), names upper-cased as DBToaster does;
* ``SELECT ...`` -- parsed by sqlglot, then converted node by node into the neutral AST.  Every
  sqlglot node kind the compiler does not handle is rejected here with a :class:`SqlError` that
  quotes the statement and points at the part, so later passes never see unsupported SQL.

Cost: linear in the text (sqlglot's parser), plus the M3 parser for declarations.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ddms.errors import M3SyntaxError, SqlError
from ddms.m3.ir import Column, Stream
from ddms.m3.parser import parse_program
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
    Exists,
    FromItem,
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
    RowCut,
    Scalar,
    Script,
    Select,
    SqlExpr,
    Str,
    TopN,
    View,
    has_agg,
    has_scalar,
    one_row,
    parts,
)

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_CMP = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_AGG = {exp.Sum: "SUM", exp.Count: "COUNT", exp.Avg: "AVG", exp.Max: "MAX", exp.Min: "MIN"}
_FUNC = {exp.Round: "round", exp.Floor: "floor", exp.Ceil: "ceil", exp.Trunc: "trunc", exp.Sign: "sign"}
_PRECISION = ("round", "trunc")   # the functions taking a precision, ROUND(x, 2)
_INT_CAST = {exp.DataType.Type.TINYINT: "int8", exp.DataType.Type.SMALLINT: "int16", exp.DataType.Type.INT: "int32",
             exp.DataType.Type.BIGINT: "int64", exp.DataType.Type.INT128: "int128"}
_SELECT_ARGS_OK = {"expressions", "from_", "joins", "where", "group", "kind", "hint", "having", "with_"}


def blank_comments(text: str) -> str:
    """``text`` with its ``--`` and ``/* ... */`` comments (outside quotes) replaced by blanks,
    newlines kept: every offset, line and column of the code stays where it was, so statements
    are split, parsed and located (``file:line:column``) on this text alike whichever comments
    they hold.  One pass, O(len(text))."""
    out = list(text)
    i, n, quote = 0, len(text), ""
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
            i += 1
        elif c in "'\"":
            quote = c
            i += 1
        elif text.startswith("--", i) or text.startswith("/*", i):
            end = text.find("\n", i) if c == "-" else text.find("*/", i + 2)
            end = n if end < 0 else (end if c == "-" else end + 2)
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
        else:
            i += 1
    return "".join(out)


def split_statements(text: str) -> list[tuple[int, str]]:
    """``;``-separated statements (quotes and comments respected), with their offsets."""
    clean = blank_comments(text)
    out: list[tuple[int, str]] = []
    start, quote = 0, ""
    for i, c in enumerate(clean):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == ";":
            out.append((start, text[start:i]))
            start = i + 1
    out.append((start, text[start:]))
    return [(o, s) for o, s in out if blank_comments(s).strip()]


_CREATE_VIEW = re.compile(r"CREATE\s+VIEW\s+(\w+)\s+AS\s+(?=(?:SELECT|WITH)\b)", re.IGNORECASE)
_CREATE_VIEW_HEAD = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\w*\s+)?VIEW\b", re.IGNORECASE)


def _over_keys(c: Cond, group: tuple[SqlExpr, ...]) -> bool:
    """Whether condition ``c`` reads GROUP BY columns (of ``group``) and nothing else: no other
    column, aggregate or subquery."""
    keys = [g for g in group if isinstance(g, Col)]
    seen: list[Col] = []

    def plain(e) -> bool:
        if isinstance(e, Agg | Scalar | Exists | Quantified):
            return False
        if isinstance(e, Col):
            seen.append(e)
        return all(plain(x) for x in parts(e))

    return plain(c) and bool(seen) and all(
        any(k.name == col.name and (col.table is None or k.table is None or k.table == col.table) for k in keys)
        for col in seen)


def _having_aliases(cond: exp.Expression, select: exp.Select) -> exp.Expression:
    """``cond`` (a HAVING condition) with each unqualified column named like an output alias
    (``COUNT(*) AS n ... HAVING n > 1``) replaced by that output's expression, as DuckDB reads
    HAVING (an alias wins over a FROM column of the same name there).  Columns inside an
    aggregate's argument or a subquery are left alone: there they name the FROM's (or the
    subquery's) columns, as in DuckDB (``SUM(volume) AS volume ... HAVING MAX(volume) > 6``)."""
    aliases = {e.alias.lower(): e.this for e in select.expressions if isinstance(e, exp.Alias) and e.alias}
    if not aliases:
        return cond
    cond = cond.copy()
    for col in list(cond.find_all(exp.Column)):
        if (col.table or col.name.lower() not in aliases
                or col.find_ancestor(exp.Select, exp.AggFunc, exp.Window) is not None):
            continue
        new = aliases[col.name.lower()].copy()
        if col is cond:
            return new
        col.replace(new)
    return cond


def _node_name(node: exp.Expression) -> str:
    """What a user wrote, for a message: a function sqlglot does not know (``exp.Anonymous``,
    ``EPOCH(..)``) by its name, not by the class name "ANONYMOUS"."""
    if isinstance(node, exp.Anonymous):
        return f"function {str(node.this).upper()}"
    if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
        return "IS [NOT] DISTINCT FROM"
    if isinstance(node, exp.BitwiseXor):   # DuckDB's and PostgreSQL's ^ is a power, not XOR
        return "^, a power"
    return node.key.upper()


def _code_start(stmt: str) -> int:
    """Offset in ``stmt`` of its first token (after blanks and comments)."""
    clean = blank_comments(stmt)
    return len(clean) - len(clean.lstrip())


def parse_sql(text: str, source: str = "<sql>") -> Script:
    """Parse a whole script.  Raises :class:`SqlError` (or ``M3SyntaxError`` for a malformed
    CREATE) naming ``source``."""
    streams: list[Stream] = []
    views: list[View] = []
    for offset, stmt in split_statements(text):
        stmt = blank_comments(stmt)   # comments blanked: offsets unchanged
        body = stmt.strip()
        head = body.split(None, 1)[0].upper() if body else ""
        named = _CREATE_VIEW.match(body)
        if named is not None:
            # CREATE VIEW name AS SELECT ...: the view is named explicitly
            raw = _CREATE_VIEW.search(stmt, _code_start(stmt))
            start = raw.end() if raw is not None else _code_start(stmt)
            select = _Converter(text, source, offset + start).statement(body[named.end():])
            views.append(View(named.group(1).upper(), select))
        elif _CREATE_VIEW_HEAD.match(body):
            raise SqlError("expected CREATE VIEW name AS SELECT ... (or AS WITH ...)", source,
                           body.split("\n", 1)[0], text)
        elif head == "CREATE":
            streams.append(_stream(stmt, text, offset, source))
        elif head in ("SELECT", "WITH"):
            # (errors are located from the first token, not inside a leading comment)
            select = _Converter(text, source, offset + _code_start(stmt)).statement(body)
            views.append(View(_view_name(select, text, source), select))
        else:
            raise SqlError(f"expected CREATE STREAM/TABLE, CREATE VIEW or SELECT, found {head or 'nothing'!r}",
                           source, body.split("\n", 1)[0], text)
    if not views:
        raise SqlError("no SELECT view in the script", source)
    seen: dict[str, View] = {}
    for v in views:
        if v.name in seen:
            raise SqlError(f"two views are named {v.name} (give each its own AS name)", source, v.select.text, text,
                           text.find(seen[v.name].select.text) + 1)
        seen[v.name] = v
    return Script(tuple(streams), tuple(views), source, text)


def _stream(stmt: str, text: str, offset: int, source: str) -> Stream:
    # Parse with the M3 parser, keeping line numbers of the whole file in its messages.
    prefix = "\n" * text.count("\n", 0, offset)
    try:
        prog = parse_program(prefix + stmt + ";", source)
    except M3SyntaxError as e:
        raise SqlError(e.reason, source, stmt.strip().split("\n", 1)[0], text) from e
    if len(prog.streams) != 1 or prog.maps or prog.triggers or prog.queries:
        raise SqlError("expected one CREATE STREAM or CREATE TABLE", source, stmt.strip(), text)
    s = prog.streams[0]
    _check_orderbook(s, stmt, text, offset, source)
    return replace(s, name=s.name.upper(), columns=tuple(Column(c.name.upper(), c.type) for c in s.columns))


def _check_orderbook(s: Stream, stmt: str, text: str, offset: int, source: str) -> None:
    """Reject orderbook options that cannot work (:func:`ddms.io.inputs.orderbook_problem`)
    here, where the line is known and before any compile, pointing at the option."""
    if s.source is None or s.source.adaptor.lower() != "orderbook":
        return
    from ddms.io.inputs import orderbook_problem
    problem = orderbook_problem(s)
    if problem is None:
        return
    option, reason = problem
    m = re.search(rf"\b{option}\s*:=\s*'[^']*'" if option else r"\borderbook\s*\(?", stmt, re.IGNORECASE)
    fragment = m.group(0) if m else stmt.strip().split("\n", 1)[0]
    raise SqlError(f"orderbook {'option ' if option else ''}{reason}", source, fragment, text, offset)


def _view_name(select: Select, text: str, source: str) -> str:
    """A view is named by its output's alias, the first one when it has several (``CREATE VIEW
    name AS SELECT`` names it explicitly)."""
    aggs = [it for it in select.items if has_agg(it.expr) or has_scalar(it.expr) or one_row(select)]
    for it in select.items:
        if not it.name:
            raise SqlError("an output expression needs an alias (AS name): it names the view or its column",
                           source, it.text, text, select.offset)
    if not aggs and _rows_view(select):
        # rows without aggregates (a ladder, SELECT DISTINCT): named by its first output given
        # an alias (AS name), else by its first column
        named = [it for it in select.items if not (isinstance(it.expr, Col) and it.expr.name == it.name)]
        return (named or list(select.items))[0].name.upper()
    if not aggs:
        raise SqlError("a view needs an aggregate output (SUM, COUNT, AVG, MIN or MAX, or arithmetic "
                       "over them or over scalar subqueries), named by its alias",
                       source, select.items[0].text if select.items else "SELECT", text, select.offset)
    return aggs[0].name.upper()




def _rows_view(select: Select) -> bool:
    """Whether a SELECT without aggregates is a view of rows: its keys (GROUP BY, DISTINCT), its
    own ORDER BY / LIMIT, or a plain selection of a top-N subquery (a ladder)."""
    src = select.sources
    return bool(select.group) or select.rows is not None or (
        len(src) == 1 and isinstance(src[0], FromSelect) and src[0].select.top is not None)


class _Converter:
    """sqlglot tree -> neutral AST, rejecting whatever is outside the subset."""

    def __init__(self, text: str, source: str, offset: int = 0) -> None:
        self.text, self.source, self.offset = text, source, offset
        self.body = ""   # the statement being converted
        self.ctes: dict[str, exp.Select] = {}   # WITH name AS (SELECT ...): read as a subquery in FROM
        self.pending: dict[int, TopN] = {}   # id of a subquery's SELECT -> its ROW_NUMBER() <= n cut
        self.cte_cuts: dict[int, exp.Select] = {}   # id of a FROM reference to a WITH query -> its cut copy

    def fail(self, reason: str, node: exp.Expression | str) -> SqlError:
        frag = node if isinstance(node, str) else node.sql()
        return SqlError(reason, self.source, frag, self.text, self.offset)

    def statement(self, body: str) -> Select:
        self.body = body
        try:
            tree = sqlglot.parse_one(body)
        except ParseError as e:
            raise self._syntax(e, body) from e
        self._mysql_limit(body)
        if not isinstance(tree, exp.Select):
            kind = tree.key.upper()
            # a set operation (UNION [ALL], INTERSECT, EXCEPT) is pointed at by its keyword, after
            # its first SELECT; anything else at its start
            if re.search(rf"\b{kind}\b", body, re.I):
                raise self.fail(f"only SELECT views are supported, not {kind}: a view is one SELECT (write one "
                                "view per part)", kind)
            raise self.fail(f"only SELECT views are supported, not {kind}", tree)
        for alias in tree.find_all(exp.TableAlias):
            # ``FROM (...) AS x(a, b)``, ``WITH lv(p, v) AS (...)``: the names were dropped and the
            # subquery's own ones read (a wrong answer when they are swapped), so refused here
            if alias.columns:
                raise self.fail(f"a column list after an alias ({alias.sql()}) is not supported: name the "
                                "columns inside the subquery (SELECT price AS p, ...)", alias)
        for grp in list(tree.find_all(exp.Group)):
            # GROUP BY (): the grand total, one group, as without GROUP BY (beside keys it adds none)
            keep = [g for g in grp.expressions if not (isinstance(g, exp.Tuple) and not g.expressions)]
            if len(keep) < len(grp.expressions):
                if keep or grp.args.get("all"):
                    grp.set("expressions", keep)
                else:
                    grp.pop()
        return self.select(tree, top_level=True)

    def _one_row_on_true(self, j: exp.Join) -> bool:
        """Whether the joined item of ``j`` is exactly one row whatever the input (an aggregate
        SELECT without GROUP BY, HAVING, LIMIT or OFFSET, in FROM or as a WITH query) joined ON
        TRUE: every left row then has its match, so a LEFT JOIN is the cross join."""
        on = j.args.get("on")
        if on is not None and not (isinstance(on, exp.Boolean) and on.this):
            return False
        item = j.this
        if isinstance(item, exp.Subquery):
            sel = item.this
        elif isinstance(item, exp.Table) and item.name.lower() in self.ctes:
            sel = self.ctes[item.name.lower()]
        else:
            return False
        return isinstance(sel, exp.Select) and _one_aggregate_row(sel) and not any(
            sel.args.get(k) for k in ("limit", "offset", "order", "qualify"))

    def _mysql_limit(self, body: str) -> None:
        """Refuse MySQL's ``LIMIT m, n`` (skip m, keep n): sqlglot reads it as ``LIMIT n OFFSET
        m`` and leaves no trace of the form, but DuckDB and PostgreSQL reject it, so a view
        written so has no agreed meaning for the oracle a user checks against."""
        tokens = sqlglot.tokenize(body)
        for i, tok in enumerate(tokens[:-2]):
            if tok.token_type == sqlglot.TokenType.LIMIT and tokens[i + 2].token_type == sqlglot.TokenType.COMMA:
                frag = body[tok.start:tokens[i + 2].end + 1]
                raise SqlError("LIMIT m, n (MySQL's form) is not supported: write LIMIT n OFFSET m",
                               self.source, frag, self.text, self.offset + tok.start)

    def _syntax(self, e: ParseError, body: str) -> SqlError:
        """sqlglot's parse error, pointing at the token it stopped at (its context: the text
        before the token, then the token) and naming expression classes as SQL does (``GT``,
        not ``<class 'sqlglot.expressions.core.GT'>``)."""
        err = e.errors[0] if e.errors else {}
        reason = re.sub(r"<class '(?:\w+\.)*(\w+)'>", r"\1", err.get("description") or str(e))
        before, token = err.get("start_context") or "", err.get("highlight") or ""
        found = body.find(before + token) if token else -1
        if found < 0:
            return SqlError(f"not valid SQL: {reason}", self.source, body.split("\n", 1)[0], self.text, self.offset)
        return SqlError(f"not valid SQL: {reason}", self.source, token, self.text, self.offset + found + len(before))

    # -- SELECT ---------------------------------------------------------------------------------
    def select(self, node: exp.Select, with_items: bool = True, in_from: bool = False,
               top_level: bool = False) -> Select:
        """The SELECT ``node``; without ``with_items`` (EXISTS) its select list is not read.
        ``in_from``: a subquery in FROM, which may be cut to its first rows (a top-N);
        ``top_level``: a view's own SELECT, whose ORDER BY / LIMIT / OFFSET cut its rows."""
        for key, val in node.args.items():
            if val and key in ("order", "limit", "offset") and not in_from and not top_level:
                raise self.fail("ORDER BY ... LIMIT is supported in a subquery in FROM (its first n rows, then "
                                "aggregated outside) and on a view's own SELECT (the rows it shows)", val)
            if val and key not in _SELECT_ARGS_OK | {"order", "limit", "offset", "distinct"}:
                raise self.fail(f"{key.upper()} is not supported in views", node)
        top = self._top(node) if in_from else None
        if top is None:
            top = self.pending.pop(id(node), None)
        rows = self._rows(node) if top_level else None
        if node.args.get("kind"):
            raise self.fail("SELECT DISTINCT/ALL modifiers are not supported", node)
        distinct = node.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            raise self.fail("DISTINCT ON is not supported: SELECT DISTINCT cols keeps each distinct row once",
                            distinct)
        with_ = node.args.get("with_")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise self.fail("WITH RECURSIVE is not supported", with_)
            for cte in with_.expressions:
                if not isinstance(cte.this, exp.Select):
                    raise self.fail("a WITH query must be a SELECT", cte)
                self.ctes[cte.alias.lower()] = cte.this
        self._fold_row_numbers(node)
        frm = node.args.get("from_")
        # no FROM: a view over scalar subqueries only (``translate`` checks that it is one)
        sources = [self.source_item(frm.this)] if frm is not None else []
        conds: list[Cond] = []
        for j in node.args.get("joins") or []:
            side, kind = (j.args.get("side") or "").upper(), (j.args.get("kind") or "").upper()
            method = (j.args.get("method") or "").upper()   # NATURAL, ASOF: not a plain inner join
            if method:
                raise self.fail(f"{method} JOIN is not supported (inner and cross joins only: write the "
                                "join condition in ON or WHERE)", j)
            if side == "LEFT" and kind in ("", "OUTER") and self._one_row_on_true(j):
                pass   # LEFT JOIN of a one-row aggregate ON TRUE: it always matches, a cross join
            elif side or kind not in ("", "INNER", "CROSS"):
                raise self.fail(f"{side or kind} JOIN is not supported (inner and cross joins only; a LEFT JOIN of "
                                "a one-row aggregate subquery ON TRUE is a cross join and is kept)", j)
            sources.append(self.source_item(j.this))
            if j.args.get("on") is not None:
                conds.append(self.cond(j.args["on"]))
            if j.args.get("using"):
                raise self.fail("JOIN ... USING is not supported: write the equality in WHERE", j)
        where = node.args.get("where")
        if where is not None:
            conds.append(self.cond(where.this))
        aliases = [s.alias for s in sources]
        for a in aliases:
            if aliases.count(a) > 1:
                raise self.fail(f"the alias {a!r} is used twice in one FROM", node)
        grp = node.args.get("group")
        if grp is not None and grp.args.get("all"):
            # GROUP BY ALL (DuckDB): every SELECT item without an aggregate or subquery
            plain = [e for e in node.expressions
                     if not e.find(exp.AggFunc, exp.Subquery, exp.Select, exp.Window)]
            group = tuple(self.group_item(e.this if isinstance(e, exp.Alias) else e, node) for e in plain)
        else:
            group = tuple(self.group_item(g, node) for g in (grp.expressions if grp is not None else ()))
        items = tuple(self.item(e) for e in node.expressions) if with_items else ()
        cond = None if not conds else conds[0] if len(conds) == 1 else And(tuple(conds))
        having = node.args.get("having")
        keyed = False
        if distinct is not None and (in_from or top_level) and not group and with_items \
                and not any(has_agg(it.expr) or has_scalar(it.expr) for it in items):
            # SELECT DISTINCT cols: one row per distinct value of them, GROUP BY every column
            # (elsewhere -- IN, EXISTS, over aggregates -- DISTINCT changes no answer)
            for it, e in zip(items, node.expressions, strict=True):
                if not isinstance(it.expr, Col):
                    raise self.fail("SELECT DISTINCT takes columns (each distinct row of them is a row of the view)",
                                    e)
            group, keyed = tuple(it.expr for it in items), True   # type: ignore[misc]
        test = self.cond(_having_aliases(having.this, node)) if having is not None else None
        if test is not None:
            # a HAVING conjunct over GROUP BY columns only keeps or drops whole groups: it is the
            # same filter on their rows, a WHERE (what it compiles as; SQL refuses other columns)
            parts_ = test.items if isinstance(test, And) else (test,)
            rows_ = [c for c in parts_ if _over_keys(c, group)]
            if rows_:
                kept = [c for c in parts_ if c not in rows_]
                conds.extend(rows_)
                cond = conds[0] if len(conds) == 1 else And(tuple(conds))
                test = None if not kept else kept[0] if len(kept) == 1 else And(tuple(kept), test.text)
        return Select(items, tuple(sources), cond, group, node.sql(), self.offset, test, top, rows, keyed)

    # -- top-N ----------------------------------------------------------------------------------
    def _top(self, node: exp.Select) -> TopN | None:
        """``ORDER BY key [DESC] LIMIT n`` of a subquery in FROM, or None without them."""
        order, limit, offset = node.args.get("order"), node.args.get("limit"), node.args.get("offset")
        if order is None and limit is None and offset is None:
            return None
        if limit is None and offset is None:
            raise self.fail("ORDER BY without LIMIT in a subquery changes no aggregate: remove it, or add "
                            "LIMIT n to keep the first n rows", order)
        if order is None:
            word = "LIMIT" if limit is not None else "OFFSET"
            raise self.fail(f"{word} without ORDER BY keeps arbitrary rows: order them (ORDER BY price DESC "
                            f"{word} n)", limit if limit is not None else offset)
        n, offset = self._limit(node)
        key, desc, ties = self._order_key(order)
        # OFFSET m without LIMIT: every row past the first m (n = -1, no bound)
        return TopN(key, desc, -1 if n is None else n, (), order.sql(), ties, offset=offset)

    def _limit(self, node: exp.Select) -> tuple[int | None, int]:
        """``LIMIT n`` (None without) and ``OFFSET m`` (0 without), whole numbers."""
        limit, off = node.args.get("limit"), node.args.get("offset")
        if limit is not None and (limit.args.get("offset") or limit.args.get("expressions")):
            raise self.fail("LIMIT takes one count (LIMIT n OFFSET m)", limit)
        if isinstance(limit, exp.Fetch):   # FETCH FIRST n ROWS ONLY: standard SQL's LIMIT n
            opts = limit.args.get("limit_options")
            if opts is not None and (opts.args.get("with_ties") or opts.args.get("percent")):
                raise self.fail("FETCH ... WITH TIES / PERCENT is not supported (FETCH FIRST n ROWS ONLY is)", limit)
            limit = exp.Limit(expression=limit.args.get("count") or exp.Literal.number(1))
        out = []
        for part, word in ((limit, "LIMIT"), (off, "OFFSET")):
            x = part.expression if part is not None else None
            if part is not None and not (isinstance(x, exp.Literal) and not x.is_string and x.this.isdigit()):
                raise self.fail(f"{word} takes a whole number", part)
            out.append(int(x.this) if x is not None else None)
        return out[0], out[1] or 0

    def _rows(self, node: exp.Select) -> RowCut | None:
        """A view's own ``ORDER BY cols [LIMIT n] [OFFSET m]``, or None without any of them."""
        order = node.args.get("order")
        if order is None and node.args.get("limit") is None and node.args.get("offset") is None:
            return None
        if order is None:
            raise self.fail("LIMIT/OFFSET without ORDER BY keeps arbitrary rows: order them (ORDER BY price DESC "
                            "LIMIT n)", node.args.get("limit") or node.args.get("offset"))
        n, offset = self._limit(node)
        cols = []
        outs = node.expressions
        for k in order.expressions:
            pos = k.this if isinstance(k, exp.Ordered) else None
            if isinstance(pos, exp.Literal) and not pos.is_string and pos.name.isdigit():
                # ``ORDER BY 2 DESC``: the 2nd output column, as GROUP BY 1 reads the 1st
                i = int(pos.name)
                if not 1 <= i <= len(outs):
                    raise self.fail(f"ORDER BY {i}: the SELECT list has {len(outs)} columns", k)
                out = outs[i - 1]
                named = exp.column(out.alias) if isinstance(out, exp.Alias) and out.alias else out
                if not isinstance(named, exp.Column):
                    raise self.fail(f"ORDER BY {i}: name the column it orders (an alias)", k)
                k = k.copy()
                k.set("this", named.copy())
            if not (isinstance(k, exp.Ordered) and isinstance(k.this, exp.Column)):
                raise self.fail("a view's ORDER BY names its output columns (by alias: ORDER BY vol DESC, "
                                "broker_id)", k)
            cols.append((self.column(k.this), bool(k.args.get("desc"))))
        first = re.search(r"\bNULLS\s+FIRST\b", self.body, re.IGNORECASE)
        if first is not None:   # (sqlglot's default dialect reads ORDER BY x as NULLS FIRST: not told apart)
            raise self.fail("NULLS FIRST is not supported (NULL rows come last, as DuckDB orders them)", first.group(0))
        return RowCut(tuple(cols), n, offset, order.sql())

    def _first_row_extreme(self, sel: exp.Select) -> exp.Select:
        """A scalar subquery ``(SELECT c FROM .. [WHERE ..] ORDER BY c DESC[, ..] LIMIT 1)`` (a best
        price as many write it) as ``(SELECT MAX(c) FROM ..)`` (ASC: ``MIN``): the first row's c
        is the largest, and both are NULL over no rows; DuckDB orders NULLs last either way, so a
        NULL c comes first only when every c is NULL, where MAX is NULL too.  Any other ORDER BY
        or LIMIT in a scalar subquery is returned as it is (and refused by :meth:`select`)."""
        order, item = sel.args.get("order"), sel.expressions[0] if len(sel.expressions) == 1 else None
        if order is None or sel.args.get("limit") is None or item is None or sel.args.get("offset") is not None \
                or any(sel.args.get(k) for k in ("group", "having", "distinct")) \
                or re.search(r"\bNULLS\s+FIRST\b", self.body, re.IGNORECASE) or self._limit(sel)[0] != 1:
            return sel
        col, key = (item.this if isinstance(item, exp.Alias) else item), order.expressions[0]
        if not (isinstance(col, exp.Column) and isinstance(key, exp.Ordered) and isinstance(key.this, exp.Column)):
            return sel
        k = key.this
        same = k.name.lower() == col.name.lower() and k.table.lower() in ("", col.table.lower())
        if not (same or (isinstance(item, exp.Alias) and not k.table and k.name.lower() == item.alias.lower())):
            return sel
        out = sel.copy()
        out.set("order", None)
        out.set("limit", None)
        ext = (exp.Max if key.args.get("desc") else exp.Min)(this=col.copy())
        ext.meta["source"] = sel.sql()
        out.set("expressions", [exp.alias_(ext, item.alias) if isinstance(item, exp.Alias) else ext])
        return out

    def _order_key(self, order: exp.Order) -> tuple[Col, bool, tuple[tuple[Col, bool], ...]]:
        """The column a top-N is ordered by, whether descending, and the tie-break columns after
        it (each with its direction; ``translate`` decides which lists it can keep exactly)."""
        keys = order.expressions
        if not keys or not all(isinstance(k, exp.Ordered) and isinstance(k.this, exp.Column) for k in keys):
            raise self.fail("a top-N is ordered by columns (ORDER BY price DESC, or ORDER BY price DESC, id over "
                            "single orders): its cut is the n-th value of them", order)
        cols = [(self.column(k.this), bool(k.args.get("desc"))) for k in keys]
        return cols[0][0], cols[0][1], tuple(cols[1:])

    def _fold_row_numbers(self, node: exp.Select) -> None:
        """Feldera's top-N: a subquery in FROM selecting ``ROW_NUMBER() OVER (PARTITION BY p ORDER
        BY k DESC) AS rn``, filtered ``rn <= n`` (or ``rn < n``, ``n >= rn``, ``rn = 1``) by one
        conjunct of this SELECT's WHERE, becomes the subquery's :class:`TopN`: the conjunct and
        the column are removed from the sqlglot tree and the cut waits in ``pending`` for the
        subquery's conversion.  Any other use of ``rn`` is rejected at its place."""
        frm = node.args.get("from_")
        items = ([frm.this] if frm is not None else []) + [j.this for j in node.args.get("joins") or []]
        for sq in items:
            if isinstance(sq, exp.Table) and sq.name.lower() in self.ctes:
                inner = self.ctes[sq.name.lower()].copy()   # (each reference is cut by its own WHERE)
                self.cte_cuts[id(sq)] = inner
            elif isinstance(sq, exp.Subquery) and isinstance(sq.this, exp.Select):
                inner = sq.this
            else:
                continue
            wins = [e for e in inner.expressions if isinstance(e, exp.Alias) and isinstance(e.this, exp.Window)]
            if not wins:
                continue
            if len(wins) > 1:
                raise self.fail("one ROW_NUMBER() per subquery", wins[1])
            alias, w = wins[0], wins[0].this
            if not isinstance(w.this, exp.RowNumber | exp.Rank | exp.DenseRank):
                raise self.fail("of the window functions, ROW_NUMBER(), RANK() and DENSE_RANK() (a top-N) are "
                                "supported", w)
            if w.args.get("spec") or w.args.get("alias"):
                raise self.fail("ROW_NUMBER() takes no window frame", w)
            if inner.args.get("order") or inner.args.get("limit"):
                raise self.fail("ROW_NUMBER() and ORDER BY ... LIMIT in one subquery: use one of them", w)
            if w.args.get("order") is None:
                raise self.fail("ROW_NUMBER() needs ORDER BY (the order of the top-N)", w)
            key, desc, ties = self._order_key(w.args["order"])
            dense = isinstance(w.this, exp.DenseRank)
            if dense and ties:
                raise self.fail("DENSE_RANK() is supported ordered by one column (the n first distinct values of "
                                "it); with a tie-break it is ROW_NUMBER()", w.args["order"])
            partition = tuple(self.column(c) for c in w.args.get("partition_by") or ())
            rn, table = alias.alias.lower(), (sq.alias or sq.name or "").lower()
            where = node.args.get("where")
            conj = [] if where is None else list(where.this.flatten()) if isinstance(where.this, exp.And) \
                else [where.this]
            hits = [(c, k) for c in conj if (k := _rank_bound(c, rn, table)) is not None]
            if not hits:
                raise self.fail(f"ROW_NUMBER() AS {rn} keeps the first rows of a top-N: filter it, {rn} <= n, "
                                "in the enclosing WHERE (a conjunct joined by AND)", alias)
            rest = [c for c in conj if all(c is not h for h, _ in hits)]
            node.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
            inner.set("expressions", [e for e in inner.expressions if e is not alias])
            for col in node.find_all(exp.Column):
                if col.name.lower() == rn and col.table.lower() in ("", table) and not _inside(col, sq):
                    raise self.fail(f"{rn} is the ROW_NUMBER() of a top-N: it can only be filtered, {rn} <= n "
                                    "(it is not a column the view can read)", col)
            n, skip = _rank_and([k for _, k in hits])
            self.pending[id(inner)] = TopN(key, desc, n, partition, w.sql(), ties,
                                           isinstance(w.this, exp.Rank) or dense, skip, dense)

    def source_item(self, node: exp.Expression) -> FromItem:
        if isinstance(node, exp.Table):
            if node.args.get("db") or node.args.get("catalog"):
                raise self.fail("qualified table names are not supported", node)
            name = node.name
            alias = node.alias or name
            if name.lower() in self.ctes:   # a WITH query: a subquery in FROM under its alias
                sel = self.cte_cuts.pop(id(node), None) or self.ctes[name.lower()]
                return FromSelect(self.select(sel, in_from=True), alias.lower(), node.sql())
            return FromTable(name.upper(), alias.lower(), node.sql())
        if isinstance(node, exp.Subquery):
            if not isinstance(node.this, exp.Select):
                raise self.fail("only SELECT subqueries are supported in FROM", node)
            if not node.alias:
                raise self.fail("a subquery in FROM needs an alias", node)
            return FromSelect(self.select(node.this, in_from=True), node.alias.lower(), node.sql())
        raise self.fail(f"unsupported FROM item ({node.key})", node)

    def item(self, node: exp.Expression) -> Item:
        if isinstance(node, exp.Alias):
            return Item(self.expr(node.this), node.alias.lower(), node.sql())
        if isinstance(node, exp.Column):
            return Item(self.expr(node), node.name.lower(), node.sql())
        if isinstance(node, exp.Star):
            raise self.fail("SELECT * is not supported: name the columns and the aggregate", node)
        e = self.expr(node)
        if isinstance(e, Agg):
            return Item(e, e.func.lower(), node.sql())
        return Item(e, "", node.sql())   # unnamed: fine in a scalar subquery, not as a view's column

    def column(self, node: exp.Expression) -> Col:
        if not isinstance(node, exp.Column):
            raise self.fail("ORDER BY and PARTITION BY take column names only", node)
        return Col(node.table.lower() or None, node.name.lower(), node.sql())

    def group_item(self, node: exp.Expression, select: exp.Select) -> SqlExpr:
        """One GROUP BY item: a column, an expression over the row (``FLOOR(price / 100) * 100``:
        a price bucket), or an ordinal (``GROUP BY 1``: the first SELECT item's expression, as
        DuckDB reads it).  An output alias (``GROUP BY bucket``) arrives as a column and is
        resolved by ``translate``, which knows whether a FROM column of that name exists (it wins,
        as in DuckDB).  No aggregate or subquery may be grouped by."""
        if isinstance(node, exp.Literal) and not node.is_string:
            k = int(node.this) if node.this.isdigit() else 0
            items = select.expressions
            if not 1 <= k <= len(items):
                raise self.fail(f"GROUP BY {node.this}: an ordinal names a SELECT item, 1 to {len(items)}", node)
            node = items[k - 1].this if isinstance(items[k - 1], exp.Alias) else items[k - 1]
        e = self.expr(node)
        if has_agg(e) or has_scalar(e):
            raise self.fail("GROUP BY takes columns and expressions over a row's columns, not aggregates or "
                            "subqueries", node)
        return e

    # -- values ---------------------------------------------------------------------------------
    def expr(self, node: exp.Expression) -> SqlExpr:
        t = type(node)
        if isinstance(node, exp.Paren):
            return self.expr(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise self.fail("table.* is not supported", node)
            return Col(node.table.lower() or None, node.name.lower(), node.sql())
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Str(node.this, node.sql())
            return Lit(float(node.this), node.sql())
        if isinstance(node, exp.Neg):
            return Minus(self.expr(node.this), node.sql())
        if t in _ARITH:
            return Arith(_ARITH[t], self.expr(node.this), self.expr(node.expression), node.sql())
        if t in _AGG:
            distinct = bool(node.args.get("distinct")) or isinstance(node.this, exp.Distinct)
            arg = node.this
            if isinstance(arg, exp.Distinct):
                if len(arg.expressions) != 1:
                    raise self.fail(f"{_AGG[t]}(DISTINCT ...) takes one argument", node)
                arg = arg.expressions[0]
            if distinct and t in (exp.Max, exp.Min):
                distinct = False   # the same value
            if node.args.get("expressions"):
                raise self.fail(f"{_AGG[t]} takes one argument (GREATEST/LEAST compare several)", node)
            if isinstance(arg, exp.Star):
                if t is not exp.Count:
                    raise self.fail(f"{_AGG[t]}(*) is not valid", node)
                if distinct:
                    raise self.fail("COUNT(DISTINCT *) is not valid", node)
                return Agg("COUNT", None, node.sql())
            # (a rewritten first row, _first_row_extreme, is located at the SELECT it came from)
            return Agg(_AGG[t], self.expr(arg), node.meta.get("source") or node.sql(), distinct)
        if isinstance(node, exp.Subquery):
            if not isinstance(node.this, exp.Select):
                raise self.fail("only SELECT subqueries are supported", node)
            return Scalar(self.select(self._first_row_extreme(node.this)), node.sql())
        if isinstance(node, exp.Cast):   # (and TRY_CAST, whose NULL out of range is ours too)
            if node.to.this in _INT_CAST:
                # DuckDB's cast of a DOUBLE to an integer type rounds half to even (Func intN)
                return Call(_INT_CAST[node.to.this], (self.expr(node.this),), node.sql())
            if not node.to.is_type("double"):
                # DECIMAL rounds to its scale in DuckDB, and FLOAT/REAL is single precision there
                raise self.fail(f"CAST to {node.to.sql()} changes the value (CAST(x AS DOUBLE), the type every "
                                "value is computed in, and to TINYINT/SMALLINT/INTEGER/BIGINT/HUGEINT are supported)",
                                node)
            return self.expr(node.this)
        if t in _FUNC:
            name = _FUNC[t]
            extra = [a for k, a in node.args.items() if k != "this" and a is not None]
            if extra and name not in _PRECISION:
                raise self.fail(f"{name.upper()} takes one argument", node)
            args = [self.expr(node.this)]
            if extra:
                d = extra[0]
                neg = isinstance(d, exp.Neg)
                lit = d.this if neg else d
                if len(extra) > 1 or not isinstance(lit, exp.Literal) or lit.is_string or not lit.this.isdigit():
                    raise self.fail(f"the precision of {name.upper()} is an integer constant (ROUND(x, 2))", d)
                args.append(Lit(-float(lit.this) if neg else float(lit.this), d.sql()))
            return Call(name, tuple(args), node.sql())
        if isinstance(node, exp.Filter):
            agg = self.expr(node.this)
            where = node.expression
            if not isinstance(agg, Agg) or not isinstance(where, exp.Where):
                raise self.fail("FILTER (WHERE ...) follows an aggregate function", node)
            if agg.filter is not None:
                raise self.fail("one FILTER per aggregate", node)
            return replace(agg, filter=self.cond(where.this), text=node.sql())
        if isinstance(node, exp.Null):
            return Null(node.sql())
        if isinstance(node, exp.Case):
            if node.this is not None:   # CASE x WHEN v THEN ...: CASE WHEN x = v THEN ...
                x = self.expr(node.this)
                whens = tuple((Compare("=", x, self.expr(i.this)), self.expr(i.args["true"])) for i in node.args["ifs"])
            else:
                whens = tuple((self.cond(i.this), self.expr(i.args["true"])) for i in node.args["ifs"])
            d = node.args.get("default")
            return Case(whens, self.expr(d) if d is not None else Null(), node.sql())
        # each kept as its function too (Case.fn), taken where an argument holds a CASE
        if isinstance(node, exp.Coalesce):
            args = [self.expr(node.this), *(self.expr(a) for a in node.expressions)]
            out = args[-1]
            for a in reversed(args[:-1]):
                out = Case(((Not(IsNull(a)), a),), out, node.sql(), Call("coalesce", (a, out)))
            return out
        if isinstance(node, exp.Nullif):
            a, b = self.expr(node.this), self.expr(node.expression)
            return Case(((Compare("=", a, b), Null()),), a, node.sql(), Call("nullif", (a, b)))
        if isinstance(node, exp.Abs):
            a = self.expr(node.this)
            return Case(((Compare("<", a, Lit(0.0)), Minus(a)),), a, node.sql(), Call("abs", (a,)))
        if isinstance(node, exp.Greatest | exp.Least):
            # NULL arguments are skipped, as DuckDB does: NULL only when all are NULL
            op = ">=" if isinstance(node, exp.Greatest) else "<="
            name = "greatest" if isinstance(node, exp.Greatest) else "least"
            args = [self.expr(node.this), *(self.expr(a) for a in node.expressions)]
            out = args[0]
            for b in args[1:]:
                out = Case(((IsNull(b), out), (IsNull(out), b), (Compare(op, out, b), out)), b, node.sql(),
                           Call(name, (out, b)))
            return out
        if isinstance(node, exp.Window):
            raise self.fail("a window function is supported as ROW_NUMBER() OVER (ORDER BY ...) AS rn in a "
                            "subquery in FROM, filtered rn <= n by the enclosing WHERE (a top-N)", node)
        raise self.fail(f"unsupported expression ({_node_name(node)})", node)

    def quantified(self, node: exp.Expression) -> Quantified:
        """``x op ALL (SELECT e ...)`` and ``x op ANY/SOME (SELECT e ...)`` (one column)."""
        q = node.expression
        sub = q.this.this if isinstance(q.this, exp.Subquery) else q.this
        word = "ALL" if isinstance(q, exp.All) else "ANY"
        if not isinstance(sub, exp.Select) or len(sub.expressions) != 1:
            raise self.fail(f"{word} takes a SELECT of one column", q)
        return Quantified(_CMP[type(node)], self.expr(node.this), self.select(sub), word == "ALL", node.sql())

    def cond(self, node: exp.Expression) -> Cond:
        t = type(node)
        if isinstance(node, exp.Paren):
            return self.cond(node.this)
        if t in _CMP and isinstance(node.expression, exp.All | exp.Any):
            return self.quantified(node)
        if t in _CMP:
            return Compare(_CMP[t], self.expr(node.this), self.expr(node.expression), node.sql())
        if isinstance(node, exp.And):
            return And((self.cond(node.this), self.cond(node.expression)), node.sql())
        if isinstance(node, exp.Or):
            return Or((self.cond(node.this), self.cond(node.expression)), node.sql())
        if isinstance(node, exp.Not):
            inner = self.cond(node.this)
            if isinstance(inner, Exists) and inner.match is not None:
                # x NOT IN (SELECT y ...) is x <> ALL (SELECT y ...): not true where x is NULL or a
                # y is NULL (unless there is no row), which NOT of the match count would miss
                return Quantified("!=", inner.match[1], inner.select, True, node.sql())
            return Not(inner, node.sql())
        if isinstance(node, exp.Boolean):
            return Bool(bool(node.this), node.sql())
        if isinstance(node, exp.Null):   # WHERE NULL, CASE WHEN NULL: unknown, and so is its NOT
            return Compare("=", Null(node.sql()), Null(node.sql()), node.sql())
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return IsNull(self.expr(node.this), node.sql())
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            # c IS TRUE / c IS FALSE: never NULL (a NULL c is neither), so written as CASE WHEN
            # [NOT] c THEN 1 ELSE 0 END = 1, whose NOT (IS NOT TRUE) is exact too
            c = self.cond(node.this)
            when = c if node.expression.this else Not(c, node.sql())
            return Compare("=", Case(((when, Lit(1.0)),), Lit(0.0), node.sql()), Lit(1.0), node.sql())
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            # a IS NOT DISTINCT FROM b: both NULL, or neither NULL and equal (never NULL itself:
            # each part is true or false, so its NOT, IS DISTINCT FROM, is exact)
            a, b = self.expr(node.this), self.expr(node.expression)
            same = Or((And((_is_null(a), _is_null(b)), node.sql()),
                       And((Not(_is_null(a)), Not(_is_null(b)), Compare("=", a, b, node.sql())), node.sql())),
                      node.sql())
            return same if isinstance(node, exp.NullSafeEQ) else Not(same, node.sql())
        if isinstance(node, exp.Exists):
            if not isinstance(node.this, exp.Select):
                raise self.fail("EXISTS takes a SELECT", node)
            if _one_aggregate_row(node.this):
                return Bool(True, node.sql())   # EXISTS (SELECT MAX(..) FROM .. WHERE ..): always one row
            return Exists(self.select(node.this, with_items=False), None, node.sql())
        if isinstance(node, exp.In):
            x = self.expr(node.this)
            query = node.args.get("query")
            if query is not None:
                sub = query.this if isinstance(query, exp.Subquery) else query
                if not isinstance(sub, exp.Select) or len(sub.expressions) != 1:
                    raise self.fail("IN takes a SELECT of one column", node)
                sel = self.select(sub)
                if not sel.group and sel.having is None and has_agg(sel.items[0].expr):
                    # an aggregate without GROUP BY is exactly one row: x IN it is x = it, and
                    # NOT IN is x <> it (false when it is NULL, as SQL's NOT IN (NULL))
                    return Compare("=", x, Scalar(sel, query.sql()), node.sql())
                if sel.group or sel.having is not None or has_agg(sel.items[0].expr):
                    raise self.fail("IN (SELECT ...) with GROUP BY or HAVING is not supported", node)
                return Exists(sel, (sel.items[0].expr, x), node.sql())
            if not node.expressions or node.args.get("unnest") or node.args.get("field"):
                raise self.fail("IN takes a list of values or a SELECT", node)
            values = [self.expr(v) for v in node.expressions]
            if all(isinstance(v, Lit | Str) for v in values):
                # distinct constants: the equalities exclude each other, so IN is their sum
                # (x is one of them), not an OR's inclusion-exclusion (2**k terms)
                return InList(x, tuple(dict.fromkeys(v.value for v in values)), node.sql())  # type: ignore[union-attr]
            items = tuple(Compare("=", x, v) for v in values)
            return items[0] if len(items) == 1 else Or(items, node.sql())
        if isinstance(node, exp.Between):
            if node.args.get("symmetric"):   # was read as plain BETWEEN: a reversed range kept nothing
                raise self.fail("BETWEEN SYMMETRIC is not supported: write BETWEEN LEAST(a, b) AND GREATEST(a, b)",
                                "SYMMETRIC")   # (node.sql() is sqlglot's rewrite, not the text written)
            x = self.expr(node.this)
            return And((Compare(">=", x, self.expr(node.args["low"])),
                        Compare("<=", x, self.expr(node.args["high"]))), node.sql())
        raise self.fail(f"unsupported condition ({_node_name(node)})", node)


def _is_null(e: SqlExpr) -> Cond:
    """``e IS NULL``, decided here for a literal (a string literal has no NULL test downstream)."""
    if isinstance(e, Null):
        return Bool(True)
    if isinstance(e, Lit | Str):
        return Bool(False)
    return IsNull(e)


_RANK_CMP = (exp.LTE, exp.LT, exp.EQ, exp.GT, exp.GTE)
_RANK_FLIP = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ, exp.LTE: exp.GTE, exp.LT: exp.GT}


def _rank_bound(c: exp.Expression, rn: str, table: str) -> tuple[int, int] | None:
    """(n, m) when ``c`` keeps the row numbers ``rn`` m+1..m+n (``rn <= n``, ``rn < n + 1``,
    ``n >= rn``: m = 0; ``rn = m + 1``: n = 1; ``rn BETWEEN m + 1 AND m + n``), else None."""
    if isinstance(c, exp.Between):   # rn >= 1 always: a low bound of 1 or less keeps from the first
        low = c.args.get("low")
        if not isinstance(low, exp.Literal) or low.is_string:
            return None
        skip = max(0, math.ceil(float(low.this)) - 1)
        upto = _rank_bound(exp.LTE(this=c.this, expression=c.args.get("high")), rn, table)
        return None if upto is None else (max(0, upto[0] - skip), skip)
    kind, a, b = type(c), c.args.get("this"), c.args.get("expression")
    if isinstance(b, exp.Column) and kind in _RANK_FLIP:
        kind, a, b = _RANK_FLIP[kind], b, a
    if kind not in _RANK_CMP or not isinstance(a, exp.Column) or a.name.lower() != rn \
            or a.table.lower() not in ("", table):
        return None
    if not isinstance(b, exp.Literal) or b.is_string:
        return None
    x = float(b.this)
    if kind is exp.EQ:   # rn = k: the k-th row alone (1 row after k - 1)
        return (1, int(x) - 1) if x.is_integer() and x >= 1.0 else None
    if kind in (exp.GT, exp.GTE):   # rn > m, rn >= m + 1: every row past the first m (n = -1: no bound)
        return -1, max(0, math.floor(x) if kind is exp.GT else math.ceil(x) - 1)
    return max(0, math.floor(x) if kind is exp.LTE else math.ceil(x) - 1), 0


def _rank_and(bounds: list[tuple[int, int]]) -> tuple[int, int]:
    """The ranks that several conjuncts on one row number all keep (``rn > 2 AND rn <= 4``: 3..4,
    as ``rn BETWEEN 3 AND 4``), in :func:`_rank_bound`'s form: each keeps m+1..m+n (n = -1: no
    upper bound), and their intersection is one such range (n = 0: no rank at all)."""
    lo, hi = 0, math.inf
    for n, m in bounds:
        lo = max(lo, m)
        hi = min(hi, math.inf if n < 0 else m + n)
    return (-1, lo) if hi == math.inf else (max(0, int(hi) - lo), lo)


def _one_aggregate_row(sel: exp.Select) -> bool:
    """Whether ``sel`` aggregates without GROUP BY or HAVING: exactly one row, whatever its FROM
    and WHERE keep (an aggregate of its own, not one inside a window or a nested SELECT)."""
    if sel.args.get("group") or sel.args.get("having"):
        return False
    return any(agg.find_ancestor(exp.Select) is sel and agg.find_ancestor(exp.Window) is None
               for e in sel.expressions for agg in e.find_all(exp.AggFunc))


def _inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False
