"""The independent oracle: a plain-Python replay of the order-book format (written separately
from ddms.io.orderbook) and DuckDB evaluating SQL over the current bids/asks."""

from __future__ import annotations

import math
import re

import duckdb
import numpy as np
import pyarrow as pa

COLUMNS = ("t", "id", "broker_id", "volume", "price")


class Book:
    """Resting orders after each line, by the README's rules."""

    def __init__(self, brokers: int = 10) -> None:
        self.brokers = brokers
        self.rows: dict[int, tuple[str, tuple[float, ...]]] = {}
        self.version = 0            # bumped by every line: Duck re-registers the tables only then

    def line(self, text: str) -> None:
        self.version += 1
        t, oid, action, volume, price = text.strip().split(",")
        oid_i = int(oid)
        if action in ("B", "S"):
            self.rows[oid_i] = ("bids" if action == "B" else "asks",
                                (float(t), float(oid_i), float(oid_i % self.brokers), float(volume), float(price)))
        elif action == "E" and oid_i in self.rows:
            book, r = self.rows.pop(oid_i)
            left = r[3] - float(volume)
            if left > 0:
                self.rows[oid_i] = (book, (r[0], r[1], r[2], left, r[4]))
        elif action in ("F", "D"):
            self.rows.pop(oid_i, None)

    def table(self, book: str) -> pa.Table:
        rows = [r for b, r in self.rows.values() if b == book]
        arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
        return pa.table({c: arr[:, i] for i, c in enumerate(COLUMNS)})

    def tables(self) -> tuple[pa.Table, pa.Table]:
        return self.table("bids"), self.table("asks")


class Duck:
    """DuckDB over the current tables of a :class:`Book`."""

    def __init__(self) -> None:
        # one thread: the oracle's queries are tiny, and DuckDB's worker threads only add
        # hand-offs (seconds of waiting per thousand queries on a busy 2-core machine)
        self.con = duckdb.connect(config={"threads": 1})

        self._seen: tuple[int, int] | None = None   # (book, version) registered

    def query(self, book, sql: str) -> list[tuple]:
        """``sql`` over ``book``'s current tables (a :class:`Book` or anything with a
        ``version`` bumped on every change and ``tables()`` -> bids, asks).  The tables are built
        and registered once per book state: checking many views after a line costs one execute
        each, not a rebuild and two registrations (2/3 of the oracle's time before)."""
        state = (id(book), book.version)
        if state != self._seen:
            bids, asks = book.tables()
            self.con.register("bids", bids)
            self.con.register("asks", asks)
            self._seen = state
        return self.con.execute(sql).fetchall()


def top_fraction(table: str, k: float, direction: str) -> str:
    """Rows of ``table`` whose volume at strictly better prices is below k * total volume."""
    return (f"SELECT * FROM {table} b1 WHERE {k} * (SELECT SUM(volume) FROM {table}) > "
            f"(SELECT COALESCE(SUM(b2.volume), 0) FROM {table} b2 WHERE b2.price {direction} b1.price)")


VWAP_SQL = f"SELECT COALESCE(SUM(price * volume), 0) FROM ({top_fraction('bids', 0.25, '>')})"

SOBI_SQL = f"""
WITH btop AS ({top_fraction('bids', 0.25, '>')}), atop AS ({top_fraction('asks', 0.25, '<')}),
v AS (SELECT (SELECT SUM(price * volume) / SUM(volume) FROM btop) AS bid_vwap,
             (SELECT SUM(price * volume) / SUM(volume) FROM atop) AS ask_vwap,
             (SELECT MAX(price) FROM bids) AS best_bid, (SELECT MIN(price) FROM asks) AS best_ask)
SELECT bid_vwap, ask_vwap, best_bid, best_ask, best_ask - best_bid,
       (best_bid + best_ask) / 2, (ask_vwap - (best_bid + best_ask) / 2) - ((best_bid + best_ask) / 2 - bid_vwap)
FROM v
"""
SOBI_VIEWS = ("BID_VWAP", "ASK_VWAP", "BEST_BID", "BEST_ASK", "SPREAD", "MID", "SOBI")


def same(a: float | None, b: float | None, rel: float = 1e-9) -> bool:
    """Equal up to rounding, with SQL NULL equal to NaN."""
    a = math.nan if a is None else float(a)
    b = math.nan if b is None else float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-4)


def duck_select(script: str) -> str:
    """The SELECT of a DBToaster SQL script, for DuckDB: CREATE STREAM statements dropped and
    every SUM(x) read as COALESCE(SUM(x), 0) (the finance suite's convention: sums over empty
    sets count as 0, as DBToaster computes them)."""
    stmts = [s.strip() for s in strip_comments(script).split(";")]
    selects = [s for s in stmts if s.upper().startswith("SELECT")]
    assert len(selects) == 1, "one SELECT per script in these tests"
    return coalesce_sums(selects[0])


def strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


def coalesce_sums(sql: str) -> str:
    """Every ``SUM(x)`` (any case, blanks before the parenthesis allowed) as ``COALESCE(SUM(x), 0)``."""
    out, i = [], 0
    while True:
        m = re.compile(r"(?<![\w.])SUM\s*\(", re.IGNORECASE).search(sql, i)
        if m is None:
            out.append(sql[i:])
            return "".join(out)
        j = m.start()
        depth, k = 0, m.end() - 1
        while True:
            if sql[k] == "(":
                depth += 1
            elif sql[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        inner = coalesce_sums(sql[m.end():k])
        agg = f"SUM({inner})"
        flt = re.match(r"\s*FILTER\s*\(", sql[k + 1:], re.IGNORECASE)
        if flt is not None:   # SUM(x) FILTER (WHERE c): the filter belongs inside the COALESCE
            end, depth = k + 1 + flt.end(), 1
            while depth:
                depth += {"(": 1, ")": -1}.get(sql[end], 0)
                end += 1
            agg += " " + coalesce_sums(sql[k + 1:end].strip())
            k = end - 1
        out.append(sql[i:j] + f"COALESCE({agg}, 0)")
        i = k + 1


def rows_of(result: list[tuple]) -> float | dict[tuple[float, ...], float]:
    """DuckDB rows as the engine shows a view: a scalar, or key tuple -> value without zeros (a
    group whose value is NULL is kept, as NaN: the engine holds it as a NaN entry)."""
    if len(result) == 1 and len(result[0]) == 1:
        v = result[0][0]
        return math.nan if v is None else float(v)
    return {tuple(float(k) for k in r[:-1]): (math.nan if r[-1] is None else float(r[-1]))
            for r in result if r[-1] != 0}


def same_view(got, want, rel: float = 1e-9) -> bool:
    """A view value (scalar or dict of rows) equal to DuckDB's, treating missing rows as 0."""
    if isinstance(want, dict):
        got = {k: v for k, v in dict(got).items() if v != 0}
        keys = set(got) | set(want)
        return all(same(got.get(k, 0.0), want.get(k, 0.0), rel) for k in keys)
    return same(got, want, rel)
