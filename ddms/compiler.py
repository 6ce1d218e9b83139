"""The SQL compiler driver: SQL text -> verified M3 program, one visible pass at a time.

    parse      (ddms.sql.parse)          SQL text -> SQL AST            (sqlglot)
    translate  (ddms.sql.translate)      SQL AST -> calculus views
    materialize(ddms.calculus.materialize) calculus -> M3 (delta compilation, maps)
    order      (ddms.calculus.order)     M3 -> M3 with ORDERED range maps
               (ddms.m3.extremes)         ... and EXTREME maps (read by one extreme alone)
    verify     (ddms.m3.verify)          after every pass that yields M3

``--print-after-all`` shows each stage's output, ``--time-passes`` their cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ddms.calculus.materialize import Compiler, MapInfo
from ddms.calculus.order import choose_orders
from ddms.errors import DdmsError, ProgramError, SqlError
from ddms.m3.extremes import choose_extremes
from ddms.m3.ir import Program
from ddms.m3.maptypes import infer_map_types
from ddms.m3.parser import read_source
from ddms.m3.printer import print_program
from ddms.m3.verify import verify
from ddms.sql.parse import parse_sql
from ddms.sql.translate import ViewDef, translate


@dataclass
class SqlProgram:
    """A compiled SQL script: the M3 program plus what each pass produced and cost."""

    program: Program
    views: list[ViewDef]
    maps: list[MapInfo]
    notes: list[str]
    timings: list[tuple[str, float]] = field(default_factory=list)
    stages: list[tuple[str, str]] = field(default_factory=list)
    source: str = "<sql>"

    @property
    def compile_seconds(self) -> float:
        return sum(t for _, t in self.timings)


def compile_sql(text: str, source: str = "<sql>") -> SqlProgram:
    """Compile a SQL script (stream declarations and SELECT views) to a verified M3 program.
    Raises :class:`ddms.errors.SqlError` for SQL outside the subset, naming the part."""
    timings: list[tuple[str, float]] = []
    stages: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    script = parse_sql(text, source)
    timings.append(("parse", time.perf_counter() - t0))
    stages.append(("parse", "\n".join(f"VIEW {v.name}: {v.select.text}" for v in script.views)))

    t0 = time.perf_counter()
    views = translate(script)
    timings.append(("translate", time.perf_counter() - t0))
    stages.append(("translate", "\n".join(_show_view(v) for v in views)))

    t0 = time.perf_counter()
    try:
        compiled = Compiler(script.streams).program(views)
        verify(compiled.program)
    except ProgramError as e:
        raise _located(e, script, views, text, source) from e
    timings.append(("materialize", time.perf_counter() - t0))
    stages.append(("materialize", print_program(compiled.program)))

    t0 = time.perf_counter()
    program, notes = choose_orders(compiled.program)
    program = choose_extremes(program)
    notes += [f"{m.name} EXTREME {' '.join(k.upper() for k in m.extremes)} instead: only its "
              f"{' and '.join(m.extremes)} key and bound keys read it (ddms.m3.extremes)"
              for m in program.maps if m.extreme]
    program = infer_map_types(program)
    verify(program)
    timings.append(("order", time.perf_counter() - t0))
    stages.append(("order", print_program(program)))
    return SqlProgram(program, views, compiled.maps, notes, timings, stages, source)


def _located(e: ProgramError, script, views: list[ViewDef], text: str, source: str) -> DdmsError:
    """A view the translation accepted but the program built from it fails a check of (a shape
    the lowering gets wrong): refused at that view, found by building each view alone (costs a
    compile per view, on this error path only), with the check's own words.  The error itself
    when no single view fails alone."""
    for v in views:
        try:
            verify(Compiler(script.streams).program([v]).program)
        except ProgramError:
            sel = next((s.select for s in script.views if s.name == v.name), None)
            if sel is not None:
                return SqlError(f"view {v.name}: this combination is not supported (an internal check failed: {e})",
                                source, sel.text, text)
    return e


def compile_sql_file(path: str | Path) -> SqlProgram:
    p = Path(path)
    return compile_sql(read_source(p), str(p))


def _show_view(v: ViewDef) -> str:
    from ddms.calculus.ir import query_expr
    lines = [f"VIEW {v.name}[{', '.join(v.group)}] = {_pe(v.value)}"] if not v.columns else \
        [f"VIEW {v.name}[{', '.join(v.group)}].{c} = {_pe(e)}" for c, e in v.columns]
    for i, q in enumerate(v.aggregates):
        lines.append(f"  #{i} = {_pe(query_expr(q))}")
    return "\n".join(lines)


def _pe(e) -> str:
    from ddms.m3.printer import print_expr
    try:
        return print_expr(e)
    except Exception:  # relation atoms are not M3: show them structurally
        return repr(e)
