"""The one exception hierarchy of ddms.

Every error a user can provoke derives from :class:`DdmsError`, and its message says *where*
(file, line, column, map or view name) and *why*.  Catch ``DdmsError`` to handle them all.

::

    DdmsError
    ├── M3SyntaxError        M3 program text that does not parse (source, line, column)
    ├── ProgramError         a parsed program that is ill-formed (unknown map, arity, unbound variable)
    ├── CompileError         the numba backend could not build a program
    ├── InputError           a bad input line or message (source, line number, reason, the text)
    ├── ReplayError          a replay input that cannot be used as a whole (unknown format, corrupt file)
    ├── ViewError            misuse of a live view (writes, unknown view or key)
    ├── DependencyError      an optional dependency is missing (names the pip install)
    ├── SqlError             SQL outside the supported subset (quotes the SQL, points at the part)
    └── CheckpointError      a checkpoint that cannot be used (another program or format, corrupt), names the file
"""

from __future__ import annotations

import re


class DdmsError(Exception):
    """Base class of every error raised by ddms on bad programs, bad input or misuse."""


class M3SyntaxError(DdmsError):
    """M3 text that does not parse; the message points at source:line:column."""

    def __init__(self, reason: str, source: str = "<string>", line: int = 0, column: int = 0,
                 text: str = "") -> None:
        self.reason, self.source, self.line, self.column, self.text = reason, source, line, column, text
        where = f"{source}:{line}:{column}" if line else source
        caret = f"\n    {text}\n    {' ' * max(column - 1, 0)}^" if text else ""
        super().__init__(f"{where}: {reason}{caret}")


class ProgramError(DdmsError):
    """A syntactically valid program that breaks a rule of the IR (found by the verifier)."""


class CompileError(DdmsError):
    """The backend failed to generate or compile code for a program."""


class InputError(DdmsError):
    """A bad input record.  ``line`` is 1-based; ``text`` is the offending record (shortened)."""

    def __init__(self, reason: str, source: str = "<input>", line: int = 0, text: str = "") -> None:
        self.reason, self.source, self.line, self.text = reason, source, line, text
        shown = text if len(text) <= 120 else text[:117] + "..."
        super().__init__(f"{source}:{line}: {reason}" + (f": {shown!r}" if text else ""))


class ReplayError(DdmsError):
    """A replay data source that cannot be used as a whole: a format that is not recognised, a
    corrupt or truncated file, a capture whose book cannot start.  The message names the file
    (``source``) and says why; errors of single records stay :class:`InputError`."""

    def __init__(self, reason: str, source: str = "<source>") -> None:
        self.reason, self.source = reason, source
        super().__init__(f"{source}: {reason}")

    def __reduce__(self):  # pickles (e.g. from a Spark worker) with its fields, not the message
        return (type(self), (self.reason, self.source))


class ViewError(DdmsError):
    """Misuse of a live view: writing to it, or asking for a view that does not exist."""


class SqlError(DdmsError):
    """SQL the compiler does not accept: outside the supported subset, or not valid SQL.  The
    message quotes the SQL and points at the unsupported part (searched for from offset ``at``,
    the start of the statement, in ``sql``, the whole file)."""

    def __init__(self, reason: str, source: str = "<sql>", fragment: str = "", sql: str = "", at: int = 0) -> None:
        self.reason, self.source, self.fragment, self.sql = reason, source, fragment, sql
        pos = -1
        if sql:
            lower = sql.lower()
            words = fragment.split()
            for cand in (fragment, fragment[:30], " ".join(words[:2]), words[0] if words else ""):
                if cand:
                    pos = lower.find(cand.lower(), at)
                    if pos >= 0:
                        break
            if pos < 0 and fragment:
                # sqlglot's rendering spaces some parts otherwise (``EXISTS(SELECT`` for ``EXISTS
                # (SELECT``): its first tokens, any whitespace between them
                toks = re.findall(r"\w+|[^\w\s]", fragment)[:6]
                found = re.compile(r"\s*".join(map(re.escape, toks)), re.I).search(sql, at) if toks else None
                pos = found.start() if found else -1
            if pos < 0 and at:
                pos = at + len(sql[at:]) - len(sql[at:].lstrip())
        if pos >= 0:
            line = sql.count("\n", 0, pos) + 1
            col = pos - (sql.rfind("\n", 0, pos) + 1) + 1
            text = sql.splitlines()[line - 1]
            super().__init__(f"{source}:{line}:{col}: {reason}\n    {text}\n    {' ' * (col - 1)}^")
            return
        shown = f"\n    {fragment}" if fragment else ""
        super().__init__(f"{source}: {reason}{shown}")


class DependencyError(DdmsError):
    """An optional dependency a feature needs is not installed; the message names the
    ``pip install`` that provides it."""


class CheckpointError(DdmsError):
    """A checkpoint file or folder that cannot be restored: of another program, written by another
    format or code version, unreadable, or not matching the input it resumes.  Names the file."""
