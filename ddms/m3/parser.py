"""Parser for the M3 text that ``printer`` writes (and that people write by hand).

A small regex tokenizer plus recursive descent; errors are :class:`M3SyntaxError` pointing at
source:line:column with the offending line and a caret.  Keywords are case-insensitive; names
are case-sensitive.  ``--`` starts a comment.  Cost: linear in the text.

Grammar (``[...]`` optional, ``{...}`` repeated)::

    program   := { stream | map | query | trigger }
    stream    := CREATE (STREAM|TABLE) NAME '(' NAME type {',' NAME type} ')'
                 [FROM FILE STRING LINE DELIMITED NAME ['(' [NAME ':=' STRING {',' ...}] ')']] ';'
    map       := DECLARE MAP NAME '(' type ')' '[' [NAME ':' type {',' ...}] ']' [ORDERED] [EXTREME (MAX [MIN] | MIN)]
                 [':=' expr] ';'
    query     := DECLARE QUERY NAME ['[' names ']'] ':=' (NAME | '(' NAME ':=' NAME {',' ...} ')') [limit] ';'
    limit     := ROWS OF NAME [PARTITION BY INT {',' INT}] [ORDER BY INT [DESC] {',' ...}] [LIMIT INT]
                 [OFFSET INT] [RANKED BY NAME {',' NAME}] [KEYS]
    trigger   := ON ('+'|'-') NAME '(' [NAME {',' NAME}] ')' '{' { mapref ('+='|':=') expr ';' } '}'
    expr      := term { ('+'|'-') term }
    term      := unary { ('*'|'/'|'%') unary }
    unary     := '-' unary | atom
    atom      := NUMBER | NAME | mapref | '(' expr ')' | '(' NAME '^=' expr ')'
               | '{' expr cmp expr '}' | AggSum '(' '[' names ']' ',' expr ')'
               | (Max|Min) '(' NAME ',' mapref [',' NUMBER [rows]] ')'
               | (Round|Floor|Ceil|Trunc|Sign|Int8|...|Int128) '(' expr {',' expr} ')'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ddms.errors import M3SyntaxError, ProgramError
from ddms.m3.ir import (
    FUNCS,
    STRING_ALIASES,
    TYPES,
    Add,
    AggSum,
    Cmp,
    Column,
    Const,
    Div,
    Expr,
    Extreme,
    Func,
    Lift,
    Limit,
    MapDecl,
    MapRef,
    Mod,
    Mul,
    Neg,
    Program,
    Query,
    Source,
    Statement,
    Stream,
    Trigger,
    Var,
)

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+|--[^\n]*)
  | (?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op>\^=|:=|\+=|<=|>=|!=|<>|[-+*/%=<>(){}\[\],;:])
""", re.VERBOSE)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.toks = self._tokenize()
        self.i = 0

    # -- tokens ---------------------------------------------------------------------------
    def _tokenize(self) -> list[_Tok]:
        toks, pos = [], 0
        while pos < len(self.text):
            m = _TOKEN.match(self.text, pos)
            if m is None:
                self._fail(f"unexpected character {self.text[pos]!r}", pos)
            if m.lastgroup != "ws":
                toks.append(_Tok(m.lastgroup, m.group(), pos))
            pos = m.end()
        toks.append(_Tok("eof", "", len(self.text)))
        return toks

    def _fail(self, reason: str, pos: int | None = None) -> None:
        if pos is None:
            pos = self.toks[self.i].pos
        line = self.text.count("\n", 0, pos) + 1
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        raise M3SyntaxError(reason, self.source, line, pos - start + 1,
                            self.text[start:end if end >= 0 else len(self.text)])

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def _is(self, text: str) -> bool:
        t = self.tok
        return t.text.upper() == text if t.kind == "name" else t.text == text

    def _accept(self, text: str) -> bool:
        if self._is(text):
            self.i += 1
            return True
        return False

    def _expect(self, text: str) -> None:
        if not self._accept(text):
            self._fail(f"expected {text!r}, found {self.tok.text or 'end of input'!r}")

    def _name(self) -> str:
        t = self.tok
        if t.kind != "name":
            self._fail(f"expected a name, found {t.text or 'end of input'!r}")
        self.i += 1
        return t.text

    def _string(self) -> str:
        t = self.tok
        if t.kind != "string":
            self._fail(f"expected a quoted string, found {t.text or 'end of input'!r}")
        self.i += 1
        return t.text[1:-1].replace("''", "'")

    def _type(self) -> str:
        t = self._name().lower()
        if t in STRING_ALIASES:       # SQL VARCHAR, VARCHAR(n), CHAR(n), TEXT: symbol ids
            if self._accept("("):     # the length: symbols are ids, any length fits
                if self.tok.kind != "number":
                    self._fail(f"expected a length, found {self.tok.text or 'end of input'!r}")
                self.i += 1
                self._expect(")")
            return "string"
        if t not in TYPES:
            self._fail(f"unknown type {t!r} (expected one of {', '.join(TYPES)})", self.toks[self.i - 1].pos)
        return t

    def _list(self, item, close: str) -> list:
        out = []
        if self._accept(close):
            return out
        out.append(item())
        while self._accept(","):
            out.append(item())
        self._expect(close)
        return out

    # -- declarations -----------------------------------------------------------------------
    def program(self) -> Program:
        streams, maps, queries, triggers = [], [], [], []
        while self.tok.kind != "eof":
            if self._accept("CREATE"):
                streams.append(self._stream())
            elif self._accept("DECLARE"):
                if self._accept("MAP"):
                    maps.append(self._map())
                elif self._accept("QUERY"):
                    name = self._name()
                    keys: list[str] = []
                    if self._accept("["):
                        keys = self._list(self._name, "]")
                    self._expect(":=")
                    if self._accept("("):
                        def column() -> tuple[str, str]:
                            c = self._name()
                            self._expect(":=")
                            return c, self._name()
                        cols = tuple(self._list(column, ")"))
                        if not cols:
                            self._fail("a query needs at least one column")
                        queries.append(Query(name, cols[0][1], tuple(keys), cols, self._limit()))
                    else:
                        queries.append(Query(name, self._name(), tuple(keys), (), self._limit()))
                    self._expect(";")
                else:
                    self._fail("expected MAP or QUERY after DECLARE")
            elif self._accept("ON"):
                triggers.append(self._trigger())
            else:
                self._fail(f"expected CREATE, DECLARE or ON, found {self.tok.text!r}")
        return Program(tuple(streams), tuple(maps), tuple(queries), tuple(triggers))

    def _stream(self) -> Stream:
        if self._accept("STREAM"):
            kind = "STREAM"
        elif self._accept("TABLE"):
            kind = "TABLE"
        else:
            self._fail("expected STREAM or TABLE after CREATE")
        name = self._name()
        self._expect("(")

        def column() -> Column:
            return Column(self._name(), self._type())
        columns = self._list(column, ")")
        source = None
        if self._accept("FROM"):
            self._expect("FILE")
            path = self._string()
            self._expect("LINE")
            self._expect("DELIMITED")
            adaptor = self._name().lower()

            def option() -> tuple[str, str]:
                key = self._name()
                self._expect(":=")
                return key, self._string()
            options = tuple(self._list(option, ")")) if self._accept("(") else ()
            source = Source(path, adaptor, options)
        self._expect(";")
        return Stream(name, tuple(columns), source, kind)

    def _map(self) -> MapDecl:
        name = self._name()
        self._expect("(")
        vtype = self._type()
        self._expect(")")
        self._expect("[")

        def key() -> Column:
            k = self._name()
            self._expect(":")
            return Column(k, self._type())
        keys = self._list(key, "]")
        ordered = self._accept("ORDERED")
        extreme = None
        if self._accept("EXTREME"):
            kinds = [k for k in ("max", "min") if self._accept(k.upper())]
            if not kinds:
                self._fail(f"expected MAX or MIN after EXTREME, found {self.tok.text or 'end of input'!r}")
            extreme = kinds[0] if len(kinds) == 1 else "both"
        init = self.expr() if self._accept(":=") else None
        self._expect(";")
        return MapDecl(name, vtype, tuple(keys), ordered, init, extreme)

    def _trigger(self) -> Trigger:
        if self._accept("+"):
            sign = "+"
        elif self._accept("-"):
            sign = "-"
        else:
            self._fail("expected + or - after ON")
        stream = self._name()
        self._expect("(")
        args = self._list(self._name, ")")
        self._expect("{")
        stmts = []
        while not self._accept("}"):
            target = self._mapref(self._name())
            if self._accept("+="):
                op = "+="
            elif self._accept(":="):
                op = ":="
            else:
                self._fail("expected += or :=")
            stmts.append(Statement(target, op, self.expr()))
            self._expect(";")
        return Trigger(sign, stream, tuple(args), tuple(stmts))

    # -- expressions ------------------------------------------------------------------------
    def expr(self) -> Expr:
        terms = [self._term()]
        while True:
            if self._accept("+"):
                terms.append(self._term())
            elif self._accept("-"):
                terms.append(Neg(self._term()))
            else:
                break
        return terms[0] if len(terms) == 1 else Add(tuple(terms))

    def _term(self) -> Expr:
        factors = [self._unary()]
        while True:
            if self._accept("*"):
                factors.append(self._unary())
            elif self._accept("/"):
                num = factors[0] if len(factors) == 1 else Mul(tuple(factors))
                factors = [Div(num, self._unary())]
            elif self._accept("%"):
                num = factors[0] if len(factors) == 1 else Mul(tuple(factors))
                factors = [Mod(num, self._unary())]
            else:
                break
        return factors[0] if len(factors) == 1 else Mul(tuple(factors))

    def _unary(self) -> Expr:
        if self._accept("-"):
            if self.tok.kind == "number":
                c = self._number()
                return Const(-c.value, c.type)
            return Neg(self._unary())
        return self._atom()

    def _limit(self) -> Limit | None:
        """A query's row cut (:class:`ddms.m3.ir.Limit`), or None without ``ROWS OF``."""
        if not self._accept("ROWS"):
            return None
        self._expect("OF")
        rows = self._name()
        partition: list[int] = []
        order: list[tuple[int, bool]] = []
        n: int | None = None
        offset = 0
        if self._accept("PARTITION"):
            self._expect("BY")
            partition.append(self._whole())
            while self._accept(","):
                partition.append(self._whole())
        if self._accept("ORDER"):
            self._expect("BY")
            while True:
                order.append((self._whole(), self._accept("DESC")))
                if not self._accept(","):
                    break
        if self._accept("LIMIT"):
            n = self._whole()
        if self._accept("OFFSET"):
            offset = self._whole()
        ranks: list[str] = []
        if self._accept("RANKED"):
            self._expect("BY")
            ranks.append(self._name())
            while self._accept(","):
                ranks.append(self._name())
        return Limit(rows, tuple(order), n, offset, tuple(partition), self._accept("KEYS"), tuple(ranks))

    def _whole(self) -> int:
        t = self.tok
        if t.kind != "number" or not t.text.isdigit():
            self._fail(f"expected a whole number, found {t.text or 'end of input'!r}")
        self.i += 1
        return int(t.text)

    def _number(self) -> Const:
        text = self.tok.text
        self.i += 1
        if re.fullmatch(r"\d+", text):
            return Const(float(int(text)), "int")
        return Const(float(text), "float")

    def _mapref(self, name: str) -> MapRef:
        self._expect("[")
        return MapRef(name, tuple(self._list(self._name, "]")))

    def _atom(self) -> Expr:
        t = self.tok
        if t.kind == "number":
            return self._number()
        if self._accept("("):
            if self.tok.kind == "name" and self.toks[self.i + 1].text == "^=":
                var = self._name()
                self.i += 1
                e = Lift(var, self.expr())
            else:
                e = self.expr()
            self._expect(")")
            return e
        if self._accept("{"):
            left = self.expr()
            op = self.tok.text
            if op not in ("=", "!=", "<>", "<", "<=", ">", ">="):
                self._fail(f"expected a comparison operator, found {op!r}")
            self.i += 1
            right = self.expr()
            self._expect("}")
            return Cmp("!=" if op == "<>" else op, left, right)
        if t.kind != "name":
            self._fail(f"expected an expression, found {t.text or 'end of input'!r}")
        name = self._name()
        if name.upper() == "AGGSUM" and self._is("("):
            self._expect("(")
            self._expect("[")
            group = self._list(self._name, "]")
            self._expect(",")
            e = self.expr()
            self._expect(")")
            return AggSum(tuple(group), e)
        if name.upper() in ("MAX", "MIN") and self._is("("):
            self._expect("(")
            var = self._name()
            self._expect(",")
            ref = self._mapref(self._name())
            n, rows = 1, False
            if self._accept(","):   # Max(x, ref, n): the n-th largest
                t = self.tok
                if t.kind != "number" or not t.text.isdigit() or int(t.text) < 1:
                    self._fail(f"expected a rank (a positive integer), found {t.text or 'end of input'!r}")
                n = int(t.text)
                self.i += 1
                rows = self.tok.kind == "name" and self.tok.text.lower() == "rows"
                if rows:   # Max(x, ref, n rows): the key of the n-th row, each key counted m[x] times
                    self.i += 1
            self._expect(")")
            return Extreme(name.lower(), var, ref, n, rows)
        if name.lower() in FUNCS and self._is("("):   # Round(x, 2), Floor(x), Int32(x), ...
            self._expect("(")
            args = [self.expr()]
            while self._accept(","):
                args.append(self.expr())
            self._expect(")")
            return Func(name.lower(), tuple(args))
        if self._is("["):
            return self._mapref(name)
        return Var(name)


def read_source(path: Path) -> str:
    """The text of a program file (M3 or SQL): a missing, unreadable or non-UTF-8 file is a
    :class:`ProgramError` naming it, not an ``OSError`` from deep inside.  O(file size)."""
    try:
        return path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ProgramError(f"{path}: is a directory, not a program file") from None
    except FileNotFoundError:
        raise ProgramError(f"{path}: no such program file") from None
    except OSError as e:
        raise ProgramError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ProgramError(f"{path}: not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r}); "
                           "a program is M3 (.m3) or SQL (.sql) text") from None


def parse_program(text: str, source: str = "<string>") -> Program:
    """Parse M3 text into a :class:`Program` (not yet verified: see ``verify``)."""
    return _Parser(text, source).program()


def parse_expr(text: str, source: str = "<string>") -> Expr:
    """Parse a single expression (used by tests and the REPL-style API)."""
    p = _Parser(text, source)
    e = p.expr()
    if p.tok.kind != "eof":
        p._fail(f"unexpected {p.tok.text!r} after expression")
    return e
