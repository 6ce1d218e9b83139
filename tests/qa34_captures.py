"""Captures written from scratch for the qa34 outside check (test helper, not a test module): a
random book per symbol is driven by the venue's documented rules, written in the venue's format,
and its final state kept as the independent answer ``{symbol: Final}``.

- :func:`kraken_capture`: Kraken v1 ``book`` (cryptofeed's raw format) of pairs and a depth the
  real capture does not have (``book-25``; 4, 5 and 8 decimals), ``a`` and ``b`` in one message,
  republish flags, truncation to the depth and the CRC32 of the 10 best levels per update.
- :func:`coinbase_capture`: Coinbase ``level2`` of unseen products with ``ticker`` messages.
- :func:`okx_capture`: OKX v5 ``books`` with ``seqId``/``prevSeqId`` and the signed CRC32.
- :func:`tardis_capture`: tardis.dev ``incremental_book_L2`` CSV of another exchange (bitmex), two
  symbols interleaved, a re-snapshot mid-file, amounts in exponent notation, gzip.
- :func:`dbn_capture`: a Databento MBO file written with databento-dbn's encoder, several
  instruments (one symbol with a space), adds, partial cancels, modifies (price and size), trades,
  fills and clears, events of several records; instrument names in the metadata's mappings, or
  (``live``) in ``SymbolMappingMsg`` records as a live session sends them.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import json
import random
import zlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path


@dataclass(frozen=True)
class Final:
    """One symbol's book at the end: best prices (None on an empty side), total size and levels
    (or orders) per side."""

    best_bid: float | None
    bid_vol: float
    n_bids: int
    best_ask: float | None
    ask_vol: float


def _final(bids: dict, asks: dict) -> Final:
    """From price -> size maps (numbers or decimal strings)."""
    b = {float(p): float(v) for p, v in bids.items()}
    a = {float(p): float(v) for p, v in asks.items()}
    return Final(max(b) if b else None, sum(b.values()), len(b), min(a) if a else None, sum(a.values()))


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _clock(rng: random.Random):
    """Receive times (unix seconds) 0 to 0.1 s apart."""
    t = [1700000000.0]

    def ts() -> float:
        t[0] += rng.random() / 10
        return t[0]
    return ts


def _price(rng: random.Random, mid: Decimal, places: int, ticks: int, below: bool) -> str:
    """A price 1 to ``ticks`` ticks below (bids) or above (asks) ``mid``, as a venue spells it."""
    k = rng.randint(1, ticks) * Decimal(1).scaleb(-places)
    return f"{mid - k if below else mid + k:.{places}f}"


def _size(rng: random.Random, top: int) -> str:
    """A size of 8 decimals, up to ``top`` / 1e8."""
    return f"{Decimal(rng.randint(1, top)) / Decimal(10**8):.8f}"


def kraken_capture(path: Path, seed: int, messages: int, depth: int = 25) -> dict[str, Final]:
    rng = random.Random(seed)
    pairs = {"DOT/USD": (Decimal("6.1234"), 4), "LINK/EUR": (Decimal("13.55"), 5),
             "XDG/XBT": (Decimal("0.00000231"), 8)}
    chans = {p: 100 + 17 * i for i, p in enumerate(pairs)}
    books: dict[str, tuple[dict[str, str], dict[str, str]]] = {p: ({}, {}) for p in pairs}   # asks, bids
    ts = _clock(rng)

    def price(p: str, side: str) -> str:
        return _price(rng, *pairs[p], 3 * depth, side == "b")

    def vol() -> str:
        return _size(rng, 10**9)

    def truncate(p: str) -> None:
        a, b = books[p]
        for x in sorted(a, key=Decimal)[depth:]:
            del a[x]
        for x in sorted(b, key=Decimal, reverse=True)[depth:]:
            del b[x]

    def checksum(p: str) -> str:
        a, b = books[p]

        def s(x: str) -> str:
            return x.replace(".", "").lstrip("0")
        text = "".join(s(x) + s(a[x]) for x in sorted(a, key=Decimal)[:10])
        text += "".join(s(x) + s(b[x]) for x in sorted(b, key=Decimal, reverse=True)[:10])
        return str(zlib.crc32(text.encode()) & 0xFFFFFFFF)

    out = [f"wss://ws.kraken.com <-> {ts()}",
           f"wss://ws.kraken.com <- {ts()}: " + _json({"event": "subscribe", "pair": list(pairs),
                                                        "subscription": {"name": "book", "depth": depth}})]
    for p, c in chans.items():
        out.append(f"{ts()}: " + _json({"channelID": c, "channelName": f"book-{depth}", "event": "subscriptionStatus",
                                        "pair": p, "status": "subscribed",
                                        "subscription": {"depth": depth, "name": "book"}}))
    for p in pairs:
        a, b = books[p]
        for _ in range(depth + 3):
            a[price(p, "a")], b[price(p, "b")] = vol(), vol()
        truncate(p)
        snap = {"as": [[x, a[x], f"{ts():.6f}"] for x in sorted(a, key=Decimal)],
                "bs": [[x, b[x], f"{ts():.6f}"] for x in sorted(b, key=Decimal, reverse=True)]}
        out.append(f"{ts()}: " + _json([chans[p], snap, f"book-{depth}", p]))
    for _ in range(messages):
        p = rng.choice(list(pairs))
        parts = []
        for side in rng.choice(["a", "b", "ab"]):
            book = books[p][0 if side == "a" else 1]
            ups = []
            for _ in range(rng.randint(1, 3)):
                if book and rng.random() < 0.35:
                    x = rng.choice(list(book))
                    ups.append([x, "0.00000000", f"{ts():.6f}"])
                    del book[x]
                else:
                    x, v = price(p, side), vol()
                    ups.append([x, v, f"{ts():.6f}", "r"] if rng.random() < 0.1 else [x, v, f"{ts():.6f}"])
                    book[x] = v
            parts.append({side: ups})
        truncate(p)
        parts[-1]["c"] = checksum(p)
        out.append(f"{ts()}: " + _json([chans[p], *parts, f"book-{depth}", p]))
    path.write_text("\n".join(out) + "\n")
    return {p: _final(b, a) for p, (a, b) in books.items()}


def tardis_capture(path: Path, seed: int, messages: int) -> dict[str, Final]:
    rng = random.Random(seed)
    mids = {"XBTUSD": 37000.0, "ETHUSD_240628": 2000.5}
    books: dict[str, tuple[dict, dict]] = {s: ({}, {}) for s in mids}   # bid, ask
    rows: list[list] = []
    ts = [1700000000000000]

    def amount() -> float:
        return rng.choice([rng.randint(1, 500) * 100.0, float(f"{rng.randint(1, 9)}e-05")])

    def price(s: str, side: str) -> float:
        k = rng.randint(1, 30) * 0.5
        return mids[s] - k if side == "bid" else mids[s] + k

    def snapshot(s: str) -> None:
        ts[0] += 1000
        for side, b in zip(("bid", "ask"), books[s], strict=True):
            b.clear()
            for _ in range(12):
                b[price(s, side)] = amount()
            rows.extend(["bitmex", s, ts[0] - 5, ts[0], "true", side, repr(p), repr(a)] for p, a in b.items())

    for s in mids:
        snapshot(s)
    for _ in range(messages):
        s = rng.choice(list(mids))
        if rng.random() < 0.01:
            snapshot(s)
            continue
        ts[0] += rng.randint(1, 2000)
        for _ in range(rng.randint(1, 4)):
            side = rng.choice(["bid", "ask"])
            b = books[s][side == "ask"]
            if b and rng.random() < 0.4:
                p = rng.choice(list(b))
                del b[p]
                rows.append(["bitmex", s, ts[0] - 7, ts[0], "false", side, repr(p), "0"])
            else:
                p, a = price(s, side), amount()
                b[p] = a
                rows.append(["bitmex", s, ts[0] - 7, ts[0], "false", side, repr(p), repr(a)])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["exchange", "symbol", "timestamp", "local_timestamp", "is_snapshot", "side", "price", "amount"])
    w.writerows(rows)
    with gzip.open(path, "wt") as f:
        f.write(buf.getvalue())
    return {s: _final(b, a) for s, (b, a) in books.items()}


class _Mapping:
    """A symbology mapping as databento-dbn's Metadata takes it (an object with attributes)."""

    def __init__(self, raw: str, iid: int) -> None:
        self.raw_symbol = raw
        self.intervals = [_Interval(str(iid))]


class _Interval:
    def __init__(self, symbol: str) -> None:
        self.start_date, self.end_date, self.symbol = dt.date(2023, 11, 14), dt.date(2023, 11, 15), symbol


def dbn_capture(path: Path, seed: int, events: int, *, live: bool = False) -> dict[str, Final]:
    import databento_dbn as dbn

    rng = random.Random(seed)
    syms = {101: "NQM5", 202: "CLN5", 303: "ZN U5"}
    mids = {101: 18000.0, 202: 75.0, 303: 110.0}
    start = 1_700_000_000_000_000_000
    meta = dbn.Metadata(dataset="GLBX.MDP3", start=start, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema("mbo"), symbols=list(syms.values()),
                        mappings=[] if live else [_Mapping(s, i) for i, s in syms.items()])
    out = [meta.encode()]
    if live:
        raw = dbn.SType.RAW_SYMBOL
        out += [bytes(dbn.SymbolMappingMsg(publisher_id=1, instrument_id=i, ts_event=start, stype_in=raw,
                                           stype_in_symbol=s, stype_out=raw, stype_out_symbol=s, start_ts=start,
                                           end_ts=start + 86_400 * 10**9)) for i, s in syms.items()]
    books: dict[int, dict[int, list]] = {i: {} for i in syms}   # order id -> [side, price, size]
    t, oid = [start], [1000]

    def msg(iid: int, o: int, px: int, sz: int, action: str, side: str, flags: int) -> bytes:
        t[0] += rng.randint(0, 3)
        return bytes(dbn.MBOMsg(publisher_id=1, instrument_id=iid, ts_event=t[0], order_id=o, price=px, size=sz,
                                action=dbn.Action(action), side=dbn.Side(side), ts_recv=t[0], flags=flags))

    for _ in range(events):
        iid = rng.choice(list(syms))
        bk = books[iid]
        k = rng.randint(1, 3)
        for j in range(k):
            flags = dbn.F_LAST if j == k - 1 else 0
            r = rng.random()
            if r < 0.5 or not bk:
                side = rng.choice("BA")
                ticks = rng.randint(1, 8) * (-0.25 if side == "B" else 0.25)
                oid[0] += 1
                bk[oid[0]] = [side, int((mids[iid] + ticks) * 1e9), rng.randint(1, 50)]
                out.append(msg(iid, oid[0], bk[oid[0]][1], bk[oid[0]][2], "A", side, flags))
                continue
            o = rng.choice(list(bk))
            side, px, sz = bk[o]
            if r < 0.7:   # a partial or full cancel: the size cancelled
                c = rng.randint(1, sz)
                bk[o][2] -= c
                if bk[o][2] == 0:
                    del bk[o]
                out.append(msg(iid, o, px, c, "C", side, flags))
            elif r < 0.85:   # a modify: the new price and size
                bk[o] = [side, px + rng.choice([-1, 0, 1]) * 250_000_000, rng.randint(1, 60)]
                out.append(msg(iid, o, bk[o][1], bk[o][2], "M", side, flags))
            elif r < 0.95:   # trades and fills leave the book to the cancels that follow
                out.append(msg(iid, 0, px, rng.randint(1, 5), "T", "A" if side == "B" else "B", flags))
            elif r < 0.97:
                bk.clear()
                out.append(msg(iid, 0, dbn.UNDEF_PRICE, 0, "R", "N", flags))
            else:
                out.append(msg(iid, o, px, rng.randint(1, sz), "F", side, flags))
    path.write_bytes(b"".join(out))
    want = {}
    for iid, bk in books.items():
        bids, asks = {}, {}
        for side, px, sz in bk.values():
            m = bids if side == "B" else asks
            m[px / 1e9] = m.get(px / 1e9, 0) + sz
        f = _final(bids, asks)
        want[syms[iid]] = Final(f.best_bid, f.bid_vol, sum(1 for s, _, _ in bk.values() if s == "B"), f.best_ask,
                                f.ask_vol)
    return want


def coinbase_capture(path: Path, seed: int, messages: int) -> dict[str, Final]:
    """Coinbase Exchange ``level2`` of products the real capture does not have (one starting with a
    digit, 8-decimal sizes): a snapshot each, then ``l2update`` changes (absolute sizes, "0"
    removes), and ``ticker`` messages with the book's best prices."""
    rng = random.Random(seed)
    mids = {"1INCH-EUR": (Decimal("0.4125"), 4), "ETH-USDC": (Decimal("2034.17"), 2),
            "MATIC-USD": (Decimal("0.8123"), 4)}
    books: dict[str, tuple[dict[str, str], dict[str, str]]] = {p: ({}, {}) for p in mids}   # bids, asks
    ts = _clock(rng)

    def price(p: str, buy: bool) -> str:
        return _price(rng, *mids[p], 40, buy)

    def size() -> str:
        return _size(rng, 10**10)

    out = ["wss://ws-feed.exchange.coinbase.com <-> 1700000000.0",
           "wss://ws-feed.exchange.coinbase.com <- 1700000000.1: " + _json(
               {"type": "subscribe", "product_ids": list(mids), "channels": ["level2", "ticker"]})]
    for p in mids:
        bids, asks = books[p]
        for _ in range(30):
            bids[price(p, True)], asks[price(p, False)] = size(), size()
        out.append(f"{ts()}: " + _json({"type": "snapshot", "product_id": p,
                                        "bids": [[x, bids[x]] for x in sorted(bids, key=Decimal, reverse=True)],
                                        "asks": [[x, asks[x]] for x in sorted(asks, key=Decimal)]}))
    for _ in range(messages):
        p = rng.choice(list(mids))
        bids, asks = books[p]
        if rng.random() < 0.1 and bids and asks:
            out.append(f"{ts()}: " + _json({"type": "ticker", "product_id": p, "price": max(bids, key=Decimal),
                                            "best_bid": max(bids, key=Decimal), "best_ask": min(asks, key=Decimal)}))
            continue
        changes = []
        for _ in range(rng.randint(1, 3)):
            buy = rng.random() < 0.5
            book = bids if buy else asks
            if book and rng.random() < 0.4:
                x = rng.choice(list(book))
                del book[x]
                changes.append(["buy" if buy else "sell", x, "0"])
            else:
                x, v = price(p, buy), size()
                book[x] = v
                changes.append(["buy" if buy else "sell", x, v])
        out.append(f"{ts()}: " + _json({"type": "l2update", "product_id": p, "changes": changes,
                                        "time": "2023-11-14T22:13:20.000000Z"}))
    path.write_text("\n".join(out) + "\n")
    return {p: _final(b, a) for p, (b, a) in books.items()}


def okx_capture(path: Path, seed: int, messages: int) -> dict[str, Final]:
    """OKX v5 ``books`` of instruments the real capture does not have (a swap, an option-like
    name, a spot pair), with ``seqId``/``prevSeqId`` and the signed CRC32 of the 25 best levels
    of each side interleaved (``bid:size:ask:size:...``) per message."""
    rng = random.Random(seed)
    mids = {"ETH-USDT-SWAP": (Decimal("2034.5"), 1), "SOL-USDC": (Decimal("57.123"), 3),
            "BTC-USD-240628": (Decimal("37000.1"), 1)}
    books: dict[str, tuple[dict[str, str], dict[str, str]]] = {p: ({}, {}) for p in mids}   # bids, asks
    seq = {p: rng.randint(10**6, 10**9) for p in mids}
    ts = _clock(rng)

    def checksum(p: str) -> int:
        bids, asks = books[p]
        b = sorted(bids, key=Decimal, reverse=True)[:25]
        a = sorted(asks, key=Decimal)[:25]
        parts = []
        for i in range(25):
            if i < len(b):
                parts += [b[i], bids[b[i]]]
            if i < len(a):
                parts += [a[i], asks[a[i]]]
        crc = zlib.crc32(":".join(parts).encode())
        return crc - (1 << 32) if crc >= 1 << 31 else crc

    def message(p: str, action: str, bids: list, asks: list) -> str:
        prev, seq[p] = (-1 if action == "snapshot" else seq[p]), seq[p] + rng.randint(1, 5)
        data = {"asks": asks, "bids": bids, "ts": str(int(ts() * 1000)), "checksum": checksum(p),
                "prevSeqId": prev, "seqId": seq[p]}
        return f"{ts()}: " + _json({"arg": {"channel": "books", "instId": p}, "action": action, "data": [data]})

    out = ["wss://ws.okx.com:8443/ws/v5/public <-> 1700000000.0",
           "wss://ws.okx.com:8443/ws/v5/public <- 1700000000.1: " + _json(
               {"op": "subscribe", "args": [{"channel": "books", "instId": p} for p in mids]})]
    for p in mids:
        bids, asks = books[p]
        for _ in range(30):
            bids[_price(rng, *mids[p], 60, True)], asks[_price(rng, *mids[p], 60, False)] = \
                str(rng.randint(1, 500)), str(rng.randint(1, 500))
        out.append(message(p, "snapshot", [[x, bids[x], "0", "1"] for x in sorted(bids, key=Decimal, reverse=True)],
                           [[x, asks[x], "0", "1"] for x in sorted(asks, key=Decimal)]))
    for _ in range(messages):
        p = rng.choice(list(mids))
        ups: tuple[list, list] = ([], [])
        for _ in range(rng.randint(1, 3)):
            side = rng.randint(0, 1)
            book = books[p][side]
            if book and rng.random() < 0.4:
                x = rng.choice(list(book))
                del book[x]
                ups[side].append([x, "0", "0", "0"])
            else:
                x, v = _price(rng, *mids[p], 60, side == 0), str(rng.randint(1, 500))
                book[x] = v
                ups[side].append([x, v, "0", "1"])
        out.append(message(p, "update", *ups))
    path.write_text("\n".join(out) + "\n")
    return {p: _final(b, a) for p, (b, a) in books.items()}
