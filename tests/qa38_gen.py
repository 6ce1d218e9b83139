"""qa38: an independent generator of venue captures with their ground truth.

Written from the venues' public documentation (and /work/shared/data/*/README), not from ddms's
readers, so that the captures it writes are "files ddms has not seen". Every writer starts from one
ground-truth model: per symbol, a deep price-level book (integer ticks and lots, formatted as the
venue's exact decimal strings) and a list of timed level changes that never cross the book. Each
writer then speaks its venue's protocol around that truth:

- Binance spot / USD-M / COIN-M (cryptofeed `ts: json` lines plus the `.http.` REST snapshot file, and
  hftbacktest `<ns> <json>` lines): update-id ranges, buffered events before the snapshot, snapshots
  that arrive late or straddle an event, bookTicker equal to the truth after the matching event.
- Kraken v1 `book`: depth truncation done by the client, republished levels, CRC32 on every update.
- OKX v5 `books`: seqId/prevSeqId, signed CRC32 of the 25 best levels, empty updates.
- Coinbase `level2`: snapshot + l2update, ticker beside it.
- tardis `incremental_book_L2` CSV, several symbols, a second snapshot that restarts a book.

`expected()` of each capture is the final visible book per symbol (what a correct reader holds at the
end). Cost: O(events * depth) Python; a few thousand events take well under a second.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path


def fmt(units: int, decimals: int) -> str:
    """An exact decimal string of `units` * 10**-decimals (no float round trip)."""
    if decimals == 0:
        return str(units)
    sign = "-" if units < 0 else ""
    units = abs(units)
    return f"{sign}{units // 10**decimals}.{units % 10**decimals:0{decimals}d}"


@dataclass
class Sym:
    """One instrument: its name as the venue spells it, tick and lot decimals, and its true book."""

    name: str
    pdec: int
    qdec: int
    bids: dict[int, int] = field(default_factory=dict)  # tick -> lots
    asks: dict[int, int] = field(default_factory=dict)

    def px(self, tick: int) -> str:
        return fmt(tick, self.pdec)

    def qty(self, lots: int) -> str:
        return fmt(lots, self.qdec)

    def side(self, s: str) -> dict[int, int]:
        return self.bids if s == "b" else self.asks

    def best(self, depth: int | None = None) -> tuple[list[int], list[int]]:
        b = sorted(self.bids, reverse=True)
        a = sorted(self.asks)
        if depth is not None:
            b, a = b[:depth], a[:depth]
        return b, a

    def copy_book(self) -> tuple[dict[int, int], dict[int, int]]:
        return dict(self.bids), dict(self.asks)


Change = tuple[str, int, int]  # side 'b'/'a', tick, lots (0 removes)


@dataclass
class Event:
    ts: float
    sym: str
    changes: list[Change]


class Truth:
    """Symbols, their initial books and a timed, interleaved list of level changes.

    Changes keep every book uncrossed (bids below asks) and keep >= 3 levels a side; a level removed
    is re-added later with some probability (`removed`), the touch moves both ways, and one event
    never names the same (side, price) twice (so a venue event is a set of absolute level sizes).
    """

    def __init__(self, names: list[str], *, seed: int, levels: int = 40, events: int = 600,
                 pdec: int | list[int] = 2, qdec: int | list[int] = 3, t0: float = 1700000000.0,
                 max_changes: int = 6):
        self.rng = rng = random.Random(seed)
        self.syms: dict[str, Sym] = {}
        for i, n in enumerate(names):
            pd = pdec[i % len(pdec)] if isinstance(pdec, list) else pdec
            qd = qdec[i % len(qdec)] if isinstance(qdec, list) else qdec
            s = Sym(n, pd, qd)
            mid = rng.randint(1000, 500000)
            for k in range(levels):
                s.bids[mid - 1 - k * rng.randint(1, 3)] = rng.randint(1, 10**qd * 5)
                s.asks[mid + 1 + k * rng.randint(1, 3)] = rng.randint(1, 10**qd * 5)
            self.syms[n] = s
        self.initial = {n: s.copy_book() for n, s in self.syms.items()}
        self.events: list[Event] = []
        removed: dict[str, list[Change]] = {n: [] for n in names}
        t = t0
        for _ in range(events):
            t += rng.uniform(0.0005, 0.02)
            n = rng.choice(names)
            s = self.syms[n]
            ch: dict[tuple[str, int], int] = {}
            for _ in range(rng.randint(1, max_changes)):
                b, a = s.best()
                bb, ba = b[0], a[0]
                r = rng.random()
                if r < 0.15 and removed[n]:
                    side, tick, _ = removed[n].pop(rng.randrange(len(removed[n])))
                    if (side == "b" and tick >= ba) or (side == "a" and tick <= bb):
                        continue
                    lots = rng.randint(1, 10**s.qdec * 5)
                elif r < 0.45:
                    side = rng.choice("ba")
                    levels_ = b if side == "b" else a
                    if len(levels_) <= 3:
                        continue
                    tick = levels_[0] if rng.random() < 0.2 else rng.choice(levels_)
                    lots = 0
                elif r < 0.75:
                    side = rng.choice("ba")
                    levels_ = b if side == "b" else a
                    tick = rng.choice(levels_[:10])
                    lots = rng.randint(1, 10**s.qdec * 5)
                else:
                    side = rng.choice("ba")
                    tick = rng.randint(bb - 30, ba - 1) if side == "b" else rng.randint(bb + 1, ba + 30)
                    lots = rng.randint(1, 10**s.qdec * 5)
                if (side, tick) in ch or (lots == 0 and tick not in s.side(side)):
                    continue
                if lots == 0:
                    removed[n].append((side, tick, 0))
                ch[(side, tick)] = lots
                # apply at once so the next change sees the book (keeps the event uncrossed)
                self._apply(s, side, tick, lots)
            if not ch:
                continue
            self.events.append(Event(t, n, [(sd, tk, q) for (sd, tk), q in ch.items()]))
        # reset to the initial books: writers replay the events themselves
        for n, s in self.syms.items():
            s.bids, s.asks = (dict(x) for x in self.initial[n])

    @staticmethod
    def _apply(s: Sym, side: str, tick: int, lots: int) -> None:
        book = s.side(side)
        if lots == 0:
            book.pop(tick, None)
        else:
            book[tick] = lots

    def replay(self, upto: dict[str, int] | None = None):
        """Yield (event index, event, Sym after it) replaying from the initial books."""
        books = {n: Sym(s.name, s.pdec, s.qdec, dict(self.initial[n][0]), dict(self.initial[n][1]))
                 for n, s in self.syms.items()}
        for i, e in enumerate(self.events):
            s = books[e.sym]
            for side, tick, lots in e.changes:
                self._apply(s, side, tick, lots)
            yield i, e, s

    def final(self, depth: int | None = None) -> dict[str, dict]:
        """The final book of each symbol (top `depth` levels a side when truncated) as exact strings."""
        last: dict[str, Sym] = {}
        books = None
        for _, e, s in self.replay():
            last[e.sym] = s
        books = last
        out = {}
        for n in self.syms:
            s = books.get(n)
            if s is None:
                s = Sym(n, self.syms[n].pdec, self.syms[n].qdec, *self.initial[n])
            b, a = s.best(depth)
            out[n] = {"bids": [(s.px(t), s.qty(s.bids[t])) for t in b],
                      "asks": [(s.px(t), s.qty(s.asks[t])) for t in a]}
        return out


def summary(book: dict) -> dict:
    """Per-symbol view values a reader's book must give: best prices, volume sums, level counts."""
    b, a = book["bids"], book["asks"]
    return {"best_bid": float(b[0][0]) if b else None, "best_ask": float(a[0][0]) if a else None,
            "bid_volume": sum(float(q) for _, q in b), "ask_volume": sum(float(q) for _, q in a),
            "bid_levels": len(b), "ask_levels": len(a)}


def _visible(books: dict[str, Sym], started: list[str], depth: int | None = None) -> dict:
    """summary() of each started symbol's (top `depth`) book: the views after one book message."""
    out = {}
    for n in started:
        s = books[n]
        b, a = s.best(depth)
        out[n] = summary({"bids": [(s.px(t), s.qty(s.bids[t])) for t in b],
                          "asks": [(s.px(t), s.qty(s.asks[t])) for t in a]})
    return out


# ----------------------------------------------------------------------------------------- Binance


def binance(truth: Truth, out: Path, *, market: str = "spot", snap_after: dict[str, int] | None = None,
            straddle: bool = True, hft: bool = False, extra_fields: bool = True,
            name: str | None = None) -> dict:
    """Write a Binance combined-stream capture of `truth` (cryptofeed ws + .http. files, or hftbacktest).

    market: spot (`U` = previous `u` + 1), usdm (`pu`), coinm (`pu`, `ps`, dapi snapshot with symbol/pair).
    Per symbol the REST snapshot is taken after `snap_after[sym]` of its events (default random 0-12),
    received a random number of stream messages later (a late snapshot: the events between are
    buffered); with `straddle`, half the snapshots cover part of the next event (lastUpdateId inside
    its U..u range, the book holding the first changes of that event). bookTickers: after about a
    third of the post-snapshot depth events, u equal to that event's u, the truth's best b/B/a/A.
    Returns {"files": [...], "expected": final books, "booktickers": n, "symbols": [...]}.
    """
    rng = random.Random(f"{market}/{'/'.join(truth.syms)}/{len(truth.events)}")  # (str seeds: stable)
    out.mkdir(parents=True, exist_ok=True)
    names = list(truth.syms)
    per_sym_events: dict[str, list[int]] = {n: [] for n in names}
    for i, e in enumerate(truth.events):
        per_sym_events[e.sym].append(i)
    # update ids
    next_id = {n: rng.randint(10**8, 10**12) for n in names}
    ids: list[tuple[int, int]] = []
    prev_u: dict[str, int] = {}
    pu: list[int] = []
    for e in truth.events:
        gap = rng.randint(0, 5) if market != "spot" else 0  # futures ids are not contiguous
        U = next_id[e.sym] + gap
        u = U + len(e.changes) - 1
        next_id[e.sym] = u + 1
        ids.append((U, u))
        pu.append(prev_u.get(e.sym, U - 1 - rng.randint(0, 3)))
        prev_u[e.sym] = u
    # futures ids are not contiguous: a real snapshot's lastUpdateId is the u of the last event in it
    # (or inside the next event's U..u), so a futures snapshot comes after >= 1 event of the symbol
    lo = 0 if market == "spot" else 1
    snap_after = snap_after or {n: rng.randint(lo, max(lo, min(12, len(per_sym_events[n]) - 1)))
                                for n in names}
    last_u: dict[str, int] = {}
    # snapshot books and lastUpdateIds
    books = {n: Sym(n, truth.syms[n].pdec, truth.syms[n].qdec, *map(dict, truth.initial[n])) for n in names}
    count = {n: 0 for n in names}
    snaps: dict[str, tuple[int, Sym, float]] = {}
    first_applied: dict[str, int] = {}

    def take(n: str, last_id: int, s: Sym, t: float) -> None:
        snaps[n] = (last_id, Sym(n, s.pdec, s.qdec, dict(s.bids), dict(s.asks)), t)

    for i, e in enumerate(truth.events):
        n = e.sym
        s = books[n]
        k = count[n]
        if n not in snaps and k == snap_after[n]:
            # snapshot between event k-1 and k of this symbol (k = 0: before any of its events)
            U, u = ids[i]
            if straddle and rng.random() < 0.5 and len(e.changes) >= 2:
                j = rng.randint(0, len(e.changes) - 2)
                part = Sym(n, s.pdec, s.qdec, dict(s.bids), dict(s.asks))
                for side, tick, lots in e.changes[: j + 1]:
                    Truth._apply(part, side, tick, lots)
                take(n, U + j, part, e.ts)
            else:
                take(n, last_u.get(n, U - 1), s, e.ts)
            first_applied[n] = i
        for side, tick, lots in e.changes:
            Truth._apply(s, side, tick, lots)
        count[n] += 1
        last_u[n] = ids[i][1]
    for n in names:
        if n not in snaps:  # the snapshot after every event of the symbol
            last = ids[per_sym_events[n][-1]][1] if per_sym_events[n] else rng.randint(10**6, 10**9)
            take(n, last, books[n], truth.events[-1].ts)
    # ---- stream messages
    lines: list[tuple[float, str]] = []
    replay = {n: Sym(n, truth.syms[n].pdec, truth.syms[n].qdec, *map(dict, truth.initial[n])) for n in names}
    n_bt = 0
    trade_id = rng.randint(10**6, 10**9)
    low = {n: n.lower() for n in names}
    for i, e in enumerate(truth.events):
        n = e.sym
        s = replay[n]
        for side, tick, lots in e.changes:
            Truth._apply(s, side, tick, lots)
        U, u = ids[i]
        E = int(e.ts * 1000)
        b = [[s.px(t), s.qty(q)] for sd, t, q in e.changes if sd == "b"]
        a = [[s.px(t), s.qty(q)] for sd, t, q in e.changes if sd == "a"]
        data: dict = {"e": "depthUpdate", "E": E}
        if market != "spot":
            data["T"] = E - 1
        data["s"] = n
        if market == "coinm":
            data["ps"] = n.split("_")[0]
        data.update({"U": U, "u": u})
        if market != "spot":
            data["pu"] = pu[i]
        data.update({"b": b, "a": a})
        if extra_fields and i % 7 == 3:
            data["zz_new"] = {"nested": [1, 2.5, None]}
        lines.append((e.ts, json.dumps({"stream": f"{low[n]}@depth@100ms", "data": data},
                                       separators=(",", ":"))))
        after_snap = n in first_applied and i >= first_applied[n] and snaps[n][0] <= u
        if after_snap and rng.random() < 0.35:
            bb, ba = s.best(1)
            bt = {"u": u, "s": n, "b": s.px(bb[0]), "B": s.qty(s.bids[bb[0]]),
                  "a": s.px(ba[0]), "A": s.qty(s.asks[ba[0]])}
            if market != "spot":
                bt = {"e": "bookTicker", **bt, "T": E, "E": E}
            if market == "coinm":
                bt["ps"] = n.split("_")[0]
            lines.append((e.ts + 0.00001, json.dumps({"stream": f"{low[n]}@bookTicker", "data": bt},
                                                     separators=(",", ":"))))
            n_bt += 1
        if rng.random() < 0.2:
            bb, _ = s.best(1)
            tr = {"e": "aggTrade", "E": E, "s": n, "a": trade_id, "p": s.px(bb[0]), "q": s.qty(1),
                  "f": trade_id, "l": trade_id, "T": E, "m": True}
            if market == "spot":
                tr["M"] = True
            trade_id += 1
            lines.append((e.ts + 0.00002, json.dumps({"stream": f"{low[n]}@aggTrade", "data": tr},
                                                     separators=(",", ":"))))
    # snapshot receive times: after the event it was taken at, some messages late
    snap_lines: list[tuple[float, str, str]] = []
    for n in names:
        last_id, s, t = snaps[n]
        later = [ts for ts, _ in lines if ts > t]
        late = later[min(len(later) - 1, rng.randint(0, 8))] + 0.000001 if later else t + 0.001
        b, a = s.best()
        body: dict = {"lastUpdateId": last_id}
        if market != "spot":
            body.update({"E": int(t * 1000), "T": int(t * 1000)})
        if market == "coinm":
            body.update({"symbol": n, "pair": n.split("_")[0]})
        body["bids"] = [[s.px(x), s.qty(s.bids[x])] for x in b]
        body["asks"] = [[s.px(x), s.qty(s.asks[x])] for x in a]
        snap_lines.append((late, n, json.dumps(body, separators=(",", ":"))))
    lines.sort(key=lambda x: x[0])
    host, rest, venue = {
        "spot": ("wss://stream.binance.com:9443", "https://api.binance.com/api/v3/depth", "BINANCE"),
        "usdm": ("wss://fstream.binance.com", "https://fapi.binance.com/fapi/v1/depth", "BINANCE_FUTURES"),
        "coinm": ("wss://dstream.binance.com", "https://dapi.binance.com/dapi/v1/depth", "BINANCE_DELIVERY"),
    }[market]
    files = []
    if hft:
        # hftbacktest: '<ns> <json>' lines, the REST snapshot one line (single-symbol captures)
        assert len(names) == 1, "hftbacktest captures hold one symbol's snapshot"
        allv = [(ts, ln) for ts, ln in lines] + [(ts, body) for ts, _, body in snap_lines]
        allv.sort(key=lambda x: x[0])
        p = out / (name or f"{market}_{names[0].lower()}.txt")
        p.write_text("".join(f"{int(round(ts * 1e9))} {ln}\n" for ts, ln in allv))
        files.append(p)
    else:
        streams = "/".join(f"{low[n]}@depth@100ms/{low[n]}@bookTicker/{low[n]}@aggTrade" for n in names)
        t0 = truth.events[0].ts - 0.5
        ws = out / (name or f"{venue}.ws.1.0")
        ws.write_text(f"{host}/stream?streams={streams} <-> {t0}\n"
                      + "".join(f"{ts!r}: {ln}\n" for ts, ln in lines))
        http = out / ws.name.replace(".ws.", ".http.").replace(".1.0", ".0.0")
        snap_lines.sort(key=lambda x: x[0])
        http.write_text("".join(f"{rest}?symbol={n}&limit=1000 -> {ts!r}: {body}\n"
                                for ts, n, body in snap_lines))
        files += [ws, http]
    return {"files": files, "expected": truth.final(), "booktickers": n_bt, "symbols": names}


# ----------------------------------------------------------------------------------------- Kraken


def kraken_checksum(s: Sym, bids: list[int], asks: list[int]) -> str:
    """Kraken v1: 10 best asks ascending then 10 best bids descending, price then volume, '.'
    removed and leading zeros stripped; unsigned CRC32 in decimal."""
    def part(txt: str) -> str:
        return txt.replace(".", "").lstrip("0")
    text = "".join(part(s.px(t)) + part(s.qty(s.asks[t])) for t in asks[:10])
    text += "".join(part(s.px(t)) + part(s.qty(s.bids[t])) for t in bids[:10])
    return str(zlib.crc32(text.encode()) & 0xffffffff)


def kraken(truth: Truth, out: Path, *, depth: int = 25, name: str = "KRAKEN.ws.9.0") -> dict:
    """Kraken websocket v1 `book` at `depth`: a snapshot per pair, then updates of the visible book.

    The venue sends the changes of the top `depth` levels; a level pushed out of the window by a
    better one is NOT deleted by the venue (the client truncates); a level that enters the window
    from below because one above was removed is sent with the republish flag "r". Every update
    carries "c", the CRC32 of the visible book after it. An event touching both sides is split
    over two dicts ({"a": ..}, {"b": .., "c": ..}).
    """
    rng = random.Random(len(truth.events) * 7 + depth)
    names = list(truth.syms)
    chan = {n: 100 + 16 * i for i, n in enumerate(names)}
    t0 = truth.events[0].ts - 1
    lines = [f"wss://ws.kraken.com <-> {t0}",
             f"wss://ws.kraken.com <- {t0 + 0.1}: " + json.dumps(
                 {"event": "subscribe", "pair": names, "subscription": {"name": "book", "depth": depth}}),
             f"{t0 + 0.2}: " + json.dumps({"connectionID": 1234567890123, "event": "systemStatus",
                                            "status": "online", "version": "1.9.0"})]
    for n in names:
        lines.append(f"{t0 + 0.3}: " + json.dumps(
            {"channelID": chan[n], "channelName": f"book-{depth}", "event": "subscriptionStatus",
             "pair": n, "status": "subscribed", "subscription": {"depth": depth, "name": "book"}}))
    books = {n: Sym(n, truth.syms[n].pdec, truth.syms[n].qdec, *map(dict, truth.initial[n])) for n in names}
    trace: list[dict] = []   # views after each book message
    for k, n in enumerate(names):
        s = books[n]
        b, a = s.best(depth)
        ts = f"{t0 + 0.5:.6f}"
        msg = [chan[n], {"as": [[s.px(t), s.qty(s.asks[t]), ts] for t in a],
                         "bs": [[s.px(t), s.qty(s.bids[t]), ts] for t in b]}, f"book-{depth}", n]
        lines.append(f"{t0 + 0.4 + k * 0.001}: " + json.dumps(msg, separators=(",", ":")))
        trace.append(_visible(books, names[: k + 1], depth))
    n_ck = 0
    for e in truth.events:
        s = books[e.sym]
        b0, a0 = s.best(depth)
        vis0 = {("b", t): s.bids[t] for t in b0} | {("a", t): s.asks[t] for t in a0}
        for side, tick, lots in e.changes:
            Truth._apply(s, side, tick, lots)
        b1, a1 = s.best(depth)
        vis1 = {("b", t): s.bids[t] for t in b1} | {("a", t): s.asks[t] for t in a1}
        ups: dict[str, list] = {"a": [], "b": []}
        ts = f"{e.ts:.6f}"
        changed = {(sd, tk) for sd, tk, _ in e.changes}
        for key in sorted(set(vis0) | set(vis1)):
            sd, tk = key
            if key in vis1 and vis0.get(key) != vis1[key]:
                entry = [s.px(tk), s.qty(vis1[key]), ts]
                if key not in changed:
                    entry.append("r")  # entered the window from below
                ups[sd].append(entry)
            elif key in vis0 and key not in vis1 and key in changed and tk not in s.side(sd):
                ups[sd].append([s.px(tk), s.qty(0), ts])  # really removed (not just pushed out)
        if not ups["a"] and not ups["b"]:
            continue  # a change outside the subscribed depth: the venue sends nothing
        c = kraken_checksum(s, b1, a1)
        n_ck += 1
        if ups["a"] and ups["b"] and rng.random() < 0.5:
            body = [{"a": ups["a"]}, {"b": ups["b"], "c": c}]
        else:
            d: dict = {}
            if ups["a"]:
                d["a"] = ups["a"]
            if ups["b"]:
                d["b"] = ups["b"]
            d["c"] = c
            body = [d]
        lines.append(f"{e.ts!r}: " + json.dumps([chan[e.sym], *body, f"book-{depth}", e.sym],
                                                 separators=(",", ":")))
        trace.append(_visible(books, names, depth))
        if rng.random() < 0.05:
            lines.append(f"{e.ts + 0.0001!r}: " + json.dumps({"event": "heartbeat"}))
    p = out / name
    out.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(lines) + "\n")
    return {"files": [p], "expected": truth.final(depth), "checksums": n_ck, "symbols": names, "trace": trace}


# ----------------------------------------------------------------------------------------- OKX


def okx_checksum(s: Sym, bids: list[int], asks: list[int]) -> int:
    """OKX v5: bid1px:bid1sz:ask1px:ask1sz:... over the 25 best levels, signed CRC32."""
    parts = []
    for i in range(25):
        if i < len(bids):
            parts += [s.px(bids[i]), s.qty(s.bids[bids[i]])]
        if i < len(asks):
            parts += [s.px(asks[i]), s.qty(s.asks[asks[i]])]
    c = zlib.crc32(":".join(parts).encode()) & 0xffffffff
    return c - (1 << 32) if c >= 1 << 31 else c


def okx(truth: Truth, out: Path, *, name: str = "OKX.ws.9.0") -> dict:
    """OKX v5 `books`: snapshot (prevSeqId -1) then updates (prevSeqId = previous seqId), each with
    the signed checksum of the book after it; an empty update (seqId = prevSeqId) now and then;
    tickers and trades interleaved; a new field in the data dict."""
    rng = random.Random(len(truth.events) * 11)
    names = list(truth.syms)
    url = "wss://ws.okx.com:8443/ws/v5/public"
    t0 = truth.events[0].ts - 1
    args = [{"channel": "books", "instId": n} for n in names]
    lines = [f"{url} <-> {t0}", f"{url} <- {t0 + 0.1}: " + json.dumps({"op": "subscribe", "args": args})]
    for a in args:
        lines.append(f"{t0 + 0.2}: " + json.dumps({"event": "subscribe", "arg": a, "connId": "a4d3ae55"}))
    books = {n: Sym(n, truth.syms[n].pdec, truth.syms[n].qdec, *map(dict, truth.initial[n])) for n in names}
    seq = {n: rng.randint(10**6, 10**10) for n in names}
    trace: list[dict] = []   # views after each book message
    for k, n in enumerate(names):
        s = books[n]
        b, a = s.best()
        d = {"asks": [[s.px(t), s.qty(s.asks[t]), "0", str(rng.randint(1, 9))] for t in a],
             "bids": [[s.px(t), s.qty(s.bids[t]), "0", str(rng.randint(1, 9))] for t in b],
             "ts": str(int((t0 + 0.3) * 1000)), "checksum": okx_checksum(s, b, a),
             "prevSeqId": -1, "seqId": seq[n]}
        lines.append(f"{t0 + 0.3 + k * 0.001}: " + json.dumps(
            {"arg": {"channel": "books", "instId": n}, "action": "snapshot", "data": [d]},
            separators=(",", ":")))
        trace.append(_visible(books, names[: k + 1]))
    n_ck = len(names)
    for e in truth.events:
        s = books[e.sym]
        for side, tick, lots in e.changes:
            Truth._apply(s, side, tick, lots)
        b, a = s.best()
        new = seq[e.sym] + rng.randint(1, 50)
        d = {"asks": [[s.px(t), s.qty(q), "0", "0" if q == 0 else "1"] for sd, t, q in e.changes if sd == "a"],
             "bids": [[s.px(t), s.qty(q), "0", "0" if q == 0 else "1"] for sd, t, q in e.changes if sd == "b"],
             "ts": str(int(e.ts * 1000)), "checksum": okx_checksum(s, b, a),
             "prevSeqId": seq[e.sym], "seqId": new}
        if rng.random() < 0.1:
            d["newField"] = "x"
        seq[e.sym] = new
        lines.append(f"{e.ts!r}: " + json.dumps(
            {"arg": {"channel": "books", "instId": e.sym}, "action": "update", "data": [d]},
            separators=(",", ":")))
        trace.append(_visible(books, names))
        n_ck += 1
        if rng.random() < 0.05:  # no change: seqId == prevSeqId, empty sides, same checksum
            d2 = {"asks": [], "bids": [], "ts": str(int(e.ts * 1000) + 1),
                  "checksum": okx_checksum(s, b, a), "prevSeqId": new, "seqId": new}
            lines.append(f"{e.ts + 0.0001!r}: " + json.dumps(
                {"arg": {"channel": "books", "instId": e.sym}, "action": "update", "data": [d2]},
                separators=(",", ":")))
            n_ck += 1   # (no change: no update of ddms's, so no line of the trace)
        if rng.random() < 0.1:
            tk = {"instType": "SPOT", "instId": e.sym, "last": s.px(b[0]), "lastSz": "1",
                  "askPx": s.px(a[0]), "askSz": s.qty(s.asks[a[0]]), "bidPx": s.px(b[0]),
                  "bidSz": s.qty(s.bids[b[0]]), "ts": str(int(e.ts * 1000))}
            lines.append(f"{e.ts + 0.0002!r}: " + json.dumps(
                {"arg": {"channel": "tickers", "instId": e.sym}, "data": [tk]}, separators=(",", ":")))
    p = out / name
    out.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(lines) + "\n")
    return {"files": [p], "expected": truth.final(), "checksums": n_ck, "symbols": names, "trace": trace}


# ----------------------------------------------------------------------------------------- Coinbase


def coinbase(truth: Truth, out: Path, *, name: str = "COINBASE.ws.9.0") -> dict:
    """Coinbase Exchange `level2`: snapshot then l2update (absolute sizes, "0" removes), with the
    `ticker` channel (best_bid/best_ask of the truth at that point) and last_match messages."""
    rng = random.Random(len(truth.events) * 13)
    names = list(truth.syms)
    url = "wss://ws-feed.pro.coinbase.com"
    t0 = truth.events[0].ts - 1
    lines = [f"{url} <-> {t0}"]
    for ch in ("level2", "ticker"):
        lines.append(f"{url} <- {t0 + 0.1}: " + json.dumps(
            {"type": "subscribe", "product_ids": names, "channels": [ch]}))
    lines.append(f"{t0 + 0.2}: " + json.dumps(
        {"type": "subscriptions", "channels": [{"name": "level2", "product_ids": names},
                                                {"name": "ticker", "product_ids": names}]}))
    books = {n: Sym(n, truth.syms[n].pdec, truth.syms[n].qdec, *map(dict, truth.initial[n])) for n in names}
    trace: list[dict] = []   # views after each book message
    for k, n in enumerate(names):
        s = books[n]
        b, a = s.best()
        lines.append(f"{t0 + 0.3 + k * 0.001}: " + json.dumps(
            {"type": "snapshot", "product_id": n, "asks": [[s.px(t), s.qty(s.asks[t])] for t in a],
             "bids": [[s.px(t), s.qty(s.bids[t])] for t in b]}, separators=(",", ":")))
        trace.append(_visible(books, names[: k + 1]))
    seq = 1000
    for e in truth.events:
        s = books[e.sym]
        for side, tick, lots in e.changes:
            Truth._apply(s, side, tick, lots)
        ch = [["buy" if sd == "b" else "sell", s.px(t), s.qty(q)] for sd, t, q in e.changes]
        lines.append(f"{e.ts!r}: " + json.dumps(
            {"type": "l2update", "product_id": e.sym, "changes": ch,
             "time": "2021-04-17T16:43:37.075687Z"}, separators=(",", ":")))
        trace.append(_visible(books, names))
        if rng.random() < 0.1:
            b, a = s.best(1)
            seq += 1
            lines.append(f"{e.ts + 0.0001!r}: " + json.dumps(
                {"type": "ticker", "sequence": seq, "product_id": e.sym, "price": s.px(b[0]),
                 "best_bid": s.px(b[0]), "best_ask": s.px(a[0]), "side": "buy",
                 "time": "2021-04-17T16:43:37.075687Z", "trade_id": seq, "last_size": "1"},
                separators=(",", ":")))
    p = out / name
    out.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(lines) + "\n")
    return {"files": [p], "expected": truth.final(), "symbols": names, "trace": trace}


# ----------------------------------------------------------------------------------------- tardis


def tardis(truth: Truth, out: Path, *, exchange: str = "binance-futures", resnap: bool = True,
           name: str = "tardis_multi.csv") -> dict:
    """tardis.dev incremental_book_L2 CSV: every symbol's snapshot rows first (is_snapshot true),
    then the updates; with `resnap`, each symbol gets a second full snapshot halfway (is_snapshot
    true again after false: the book starts again from it)."""
    names = list(truth.syms)
    rows = ["exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount"]
    books = {n: Sym(n, truth.syms[n].pdec, truth.syms[n].qdec, *map(dict, truth.initial[n])) for n in names}
    t0 = int((truth.events[0].ts - 1) * 1e6)

    def snap(n: str, t: int) -> None:
        s = books[n]
        b, a = s.best()
        for tk in a:
            rows.append(f"{exchange},{n},{t - 50},{t},true,ask,{s.px(tk)},{s.qty(s.asks[tk])}")
        for tk in b:
            rows.append(f"{exchange},{n},{t - 50},{t},true,bid,{s.px(tk)},{s.qty(s.bids[tk])}")

    for k, n in enumerate(names):
        snap(n, t0 + k)
    half = len(truth.events) // 2
    for i, e in enumerate(truth.events):
        s = books[e.sym]
        t = int(e.ts * 1e6)
        for side, tick, lots in e.changes:
            Truth._apply(s, side, tick, lots)
            rows.append(f"{exchange},{e.sym},{t - 70},{t},false,{'bid' if side == 'b' else 'ask'},"
                        f"{s.px(tick)},{s.qty(lots)}")
        if resnap and i == half:
            for k, n in enumerate(names):
                snap(n, t + 1 + k)
    p = out / name
    out.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(rows) + "\n")
    return {"files": [p], "expected": truth.final(), "symbols": names}


# ----------------------------------------------------------------------------------------- DBN MBO


def dbn_mbo(out: Path, instruments: dict[str, int], *, seed: int, events: int = 2000,
            snapshot_orders: int = 40, name: str = "qa38.mbo.dbn") -> dict:
    """A Databento DBN MBO file (encoded by databento-dbn itself) of several instruments, with the
    resting orders per instrument after the last record as ground truth.

    Databento's documented semantics: Add inserts an order; Cancel removes `size` from it (part or
    all); Modify gives it a new price and/or size; cleaR empties the instrument's book; Trade and
    Fill do not change the book; one exchange event can be several records and only the record
    with F_LAST ends it. Written: a snapshot (F_SNAPSHOT Adds) per instrument first, then Adds,
    partial and full Cancels, Modifies (price and size), Trade + Fill + Cancel events of three
    records (F_LAST on the last only), None records, and one cleaR per instrument followed by a
    rebuild. Books are kept uncrossed. Prices in 1e-9 units, a tick of 0.25.
    """
    import datetime as dt
    from types import SimpleNamespace as NS

    import databento_dbn as db

    rng = random.Random(seed)
    tick = 250_000_000
    start = 1_703_376_000_000_000_000
    md = db.Metadata(dataset="GLBX.MDP3", schema=db.Schema.MBO, start=start, stype_in=db.SType.RAW_SYMBOL,
                     stype_out=db.SType.INSTRUMENT_ID, end=start + 86_400_000_000_000,
                     symbols=list(instruments), partial=[], not_found=[],
                     mappings=[NS(raw_symbol=s, intervals=[NS(start_date=dt.date(2023, 12, 24),
                                                              end_date=dt.date(2023, 12, 25), symbol=str(iid))])
                               for s, iid in instruments.items()])
    books: dict[int, dict[int, list]] = {iid: {} for iid in instruments.values()}  # oid -> [side, price, size]
    mids = {iid: rng.randint(4000, 20000) * 4 * tick for iid in instruments.values()}
    recs: list[bytes] = []
    t = start + 3_600_000_000_000
    seq = 0
    oid = [10**12]
    n_last = [0]
    last_action: list = [None]
    # the truth after each event (F_LAST record) that changes rows: an event of one None record
    # carries flags only (no row, so no update of its own in ddms's numbering)
    trace: list[dict] = []

    def summarize() -> dict:
        out = {}
        for s, iid in instruments.items():
            bids = [(v[1] / 1e9, v[2]) for v in books[iid].values() if v[0] == "B"]
            asks = [(v[1] / 1e9, v[2]) for v in books[iid].values() if v[0] == "A"]
            if not bids and not asks:
                continue
            out[s] = {"best_bid": max((x for x, _ in bids), default=None),
                      "best_ask": min((x for x, _ in asks), default=None),
                      "bid_volume": float(sum(q for _, q in bids)), "ask_volume": float(sum(q for _, q in asks)),
                      "bid_levels": len(bids), "ask_levels": len(asks)}
        return out

    def mark() -> None:
        if n_last[0] > marked[0]:
            marked[0] = n_last[0]
            if last_action[0] != db.Action.NONE:
                trace.append(summarize())

    marked = [0]

    def rec(iid: int, action, side, price: int, size: int, order_id: int, flags: int) -> None:
        nonlocal t, seq
        seq += 1
        n_last[0] += bool(flags & db.F_LAST)
        last_action[0] = action
        recs.append(bytes(db.MBOMsg(publisher_id=1, instrument_id=iid, ts_event=t - 1000, order_id=order_id,
                                    price=price, size=size, action=action, side=side, ts_recv=t,
                                    ts_in_delta=100, sequence=seq, flags=flags, channel_id=0)))

    def best(iid: int, side: str) -> int | None:
        px = [o[1] for o in books[iid].values() if o[0] == side]
        return (max(px) if side == "B" else min(px)) if px else None

    def new_price(iid: int, side: str) -> int:
        bb, ba = best(iid, "B"), best(iid, "A")
        m = mids[iid]
        if side == "B":
            hi = (ba - tick) if ba is not None else m
            return hi - tick * rng.randint(0, 12)
        lo = (bb + tick) if bb is not None else m + tick
        return lo + tick * rng.randint(0, 12)

    def add(iid: int, side: str, flags: int) -> None:
        oid[0] += rng.randint(1, 9)
        p, sz = new_price(iid, side), rng.randint(1, 50)
        books[iid][oid[0]] = [side, p, sz]
        rec(iid, db.Action.ADD, db.Side.BID if side == "B" else db.Side.ASK, p, sz, oid[0], flags)

    ids = list(instruments.values())
    for iid in ids:  # snapshot
        for k in range(snapshot_orders):
            t += 1
            last = k == snapshot_orders - 1
            add(iid, "B" if k % 2 == 0 else "A", db.F_SNAPSHOT | (db.F_LAST if last else 0))
        mark()
    cleared = set()
    for _ in range(events):
        t += rng.randint(1000, 5_000_000)
        iid = rng.choice(ids)
        bk = books[iid]
        r = rng.random()
        sideof = {"B": db.Side.BID, "A": db.Side.ASK}
        if r < 0.35 or len(bk) < 6:
            add(iid, rng.choice("BA"), db.F_LAST)
        elif r < 0.55:
            o = rng.choice(list(bk))
            side, p, sz = bk[o]
            part = sz if rng.random() < 0.6 else rng.randint(1, sz)
            rec(iid, db.Action.CANCEL, sideof[side], p, part, o, db.F_LAST)
            if part == sz:
                del bk[o]
            else:
                bk[o][2] -= part
        elif r < 0.75:
            o = rng.choice(list(bk))
            side, p, sz = bk[o]
            if rng.random() < 0.5:
                bk.pop(o)
                p = new_price(iid, side)
                bk[o] = [side, p, sz]
            sz = rng.randint(1, 60)
            bk[o][2] = sz
            rec(iid, db.Action.MODIFY, sideof[side], p, sz, o, db.F_LAST)
        elif r < 0.92:
            # an aggressor trades against the best resting order: Trade, Fill, then Cancel/Modify (F_LAST)
            side = rng.choice("BA")
            b = best(iid, side)
            cands = [o for o, v in bk.items() if v[0] == side and v[1] == b]
            if not cands:
                continue
            o = cands[0]
            _, p, sz = bk[o]
            q = rng.randint(1, sz)
            other = db.Side.ASK if side == "B" else db.Side.BID
            rec(iid, db.Action.TRADE, other, p, q, 0, 0)
            rec(iid, db.Action.FILL, sideof[side], p, q, o, 0)
            if q == sz:
                rec(iid, db.Action.CANCEL, sideof[side], p, q, o, db.F_LAST)
                del bk[o]
            else:
                bk[o][2] = sz - q
                rec(iid, db.Action.MODIFY, sideof[side], p, sz - q, o, db.F_LAST)
        elif r < 0.97 or iid in cleared:
            rec(iid, db.Action.NONE, db.Side.NONE, db.UNDEF_PRICE, 0, 0, db.F_LAST)
        else:
            cleared.add(iid)
            rec(iid, db.Action.CLEAR, db.Side.NONE, db.UNDEF_PRICE, 0, 0, db.F_LAST)
            bk.clear()
        mark()
    out.mkdir(parents=True, exist_ok=True)
    p = out / name
    p.write_bytes(md.encode() + b"".join(recs))
    return {"files": [p], "expected_summary": summarize(), "trace": trace, "ids": instruments,
            "records": len(recs)}
