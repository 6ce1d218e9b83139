"""Synthetic multi-symbol venue streams with known books (test helper, not a test module).

Each generator keeps the TRUE book of every symbol and writes the messages the venue would send
for random changes, with checksums computed here independently of ``ddms.io`` (from the venue
rules in ../shared/data/venues/README.md).  It returns ``(messages, truth)``: ``messages`` a list
of ``(symbol, parsed JSON message)`` (symbol None for messages of no symbol), ``truth`` the final
books ``{symbol: (bids, asks)}`` as ``{price string: size string}`` dicts.  Deterministic from
``rng`` (a ``random.Random``).
"""

from __future__ import annotations

import random
import zlib
from decimal import Decimal


def _strip(s: str) -> str:
    return s.replace(".", "").lstrip("0")


def _order(side: dict[str, str], bids: bool) -> list[tuple[str, str]]:
    return sorted(side.items(), key=lambda kv: Decimal(kv[0]), reverse=bids)


def kraken(rng: random.Random, pairs: tuple[str, ...] = ("AAA/USD", "BBB/EUR", "CCC/XBT"), depth: int = 10,
           n: int = 150) -> tuple[list, dict]:
    """Kraken v1 ``book-<depth>``: snapshots, updates of the visible book (a delete brings the
    next level back with ``"r"``; an insert that pushes a level out sends nothing for it: the
    client truncates), CRC32 ``c`` on every update."""
    full = {p: ({}, {}) for p in pairs}   # the venue's whole book (bids, asks)
    dec = {p: rng.choice((2, 5, 8)) for p in pairs}
    chan = {p: 100 + i for i, p in enumerate(pairs)}
    name = f"book-{depth}"

    def px(p: str, tick: int) -> str:
        return f"{tick / 10 ** 2:.{dec[p]}f}"

    def qty() -> str:
        return f"{rng.randrange(1, 10**6) / 10**4:.8f}"

    def visible(p: str) -> tuple[dict, dict]:
        b, a = full[p]
        return dict(_order(b, True)[:depth]), dict(_order(a, False)[:depth])

    def crc(p: str) -> str:
        b, a = visible(p)
        text = "".join(_strip(x) + _strip(y) for x, y in _order(a, False)[:10])
        text += "".join(_strip(x) + _strip(y) for x, y in _order(b, True)[:10])
        return str(zlib.crc32(text.encode()))

    msgs: list = [(None, {"event": "systemStatus", "status": "online"})]
    for p in pairs:
        b, a = full[p]
        for _ in range(rng.randrange(0, 2 * depth)):
            b[px(p, rng.randrange(1000, 2000))] = qty()
            a[px(p, rng.randrange(2000, 3000))] = qty()
        vb, va = visible(p)
        ts = "1618678133.123456"
        msgs.append((p, [chan[p], {"as": [[x, y, ts] for x, y in _order(va, False)],
                                   "bs": [[x, y, ts] for x, y in _order(vb, True)]}, name, p]))
    for i in range(n):
        p = rng.choice(pairs)
        side = rng.randrange(2)
        book = full[p][side]
        before = visible(p)
        op = rng.random()
        if op < 0.35 and book:
            del book[rng.choice(list(book))]
        elif op < 0.6 and book:
            book[rng.choice(list(book))] = qty()
        else:
            book[px(p, rng.randrange(1000, 2000) if side == 0 else rng.randrange(2000, 3000))] = qty()
        after = visible(p)
        ts = f"{1618678134 + i}.{rng.randrange(10**6):06d}"
        parts = []
        for s, key in ((1, "a"), (0, "b")):
            ent = []
            for x, y in after[s].items():
                if before[s].get(x) != y:
                    e = [x, y, ts]
                    if x not in before[s] and x in full[p][s] and rng.random() < 0.9:
                        e.append("r")    # came back into the visible depth
                    ent.append(e)
            for x in before[s]:
                if x not in after[s] and x not in full[p][s]:
                    ent.append([x, "0.00000000", ts])
            if ent:
                parts.append({key: ent})
        if not parts:
            continue
        parts[-1]["c"] = crc(p)
        msgs.append((p, [chan[p], *parts, name, p]))
        if rng.random() < 0.05:
            msgs.append((None, {"event": "heartbeat"}))
    return msgs, {p: visible(p) for p in pairs}


def okx(rng: random.Random, insts: tuple[str, ...] = ("BTC-USDT", "ETH-USD-SWAP", "UNI-USDT"), n: int = 150,
        seq: bool = True) -> tuple[list, dict]:
    """OKX v5 ``books``: snapshot then updates with trimmed decimal strings (``"30261"`` beside
    ``"30249.4"``), ``seqId``/``prevSeqId`` (when ``seq``), signed CRC32 over 25 levels."""
    full = {p: ({}, {}) for p in insts}
    last = dict.fromkeys(insts, 0)

    def px(tick: int) -> str:
        return f"{tick / 100:.2f}".rstrip("0").rstrip(".")   # trimmed, as OKX sends: "1500", "1500.1"

    def crc(p: str) -> int:
        b, a = (_order(full[p][0], True)[:25], _order(full[p][1], False)[:25])
        parts: list[str] = []
        for i in range(25):
            if i < len(b):
                parts += b[i]
            if i < len(a):
                parts += a[i]
        c = zlib.crc32(":".join(parts).encode())
        return c - 2**32 if c >= 2**31 else c

    def msg(p: str, action: str, bids: list, asks: list, ts: int) -> dict:
        d: dict = {"asks": [[x, y, "0", "1"] for x, y in asks], "bids": [[x, y, "0", "1"] for x, y in bids],
                   "ts": str(ts), "checksum": crc(p)}
        if seq:
            s = last[p] + rng.randrange(1, 5)
            d["prevSeqId"] = -1 if action == "snapshot" else last[p]
            d["seqId"] = s
            last[p] = s
        return {"arg": {"channel": "books", "instId": p}, "action": action, "data": [d]}

    msgs: list = [(None, {"event": "subscribe", "arg": {"channel": "books", "instId": p}}) for p in insts]
    for p in insts:
        b, a = full[p]
        for _ in range(rng.randrange(0, 40)):
            b[px(rng.randrange(1000, 2000))] = str(rng.randrange(1, 500))
            a[px(rng.randrange(2000, 3000))] = str(rng.randrange(1, 500))
        msgs.append((p, msg(p, "snapshot", _order(b, True), _order(a, False), 1652459225000)))
    for i in range(n):
        p = rng.choice(insts)
        ch: tuple[list, list] = ([], [])
        for _ in range(rng.randrange(1, 4)):
            side = rng.randrange(2)
            book = full[p][side]
            if rng.random() < 0.4 and book:
                x = rng.choice(list(book))
                del book[x]
                ch[side].append((x, "0"))
            else:
                x = px(rng.randrange(1000, 2000) if side == 0 else rng.randrange(2000, 3000))
                book[x] = y = str(Decimal(rng.randrange(1, 10**5)) / 1000)
                ch[side].append((x, y))
        msgs.append((p, msg(p, "update", ch[0], ch[1], 1652459226000 + i)))
        if rng.random() < 0.1:
            msgs.append((None, {"arg": {"channel": "trades", "instId": p}, "data": [{"px": "1"}]}))
    return msgs, {p: full[p] for p in insts}


def coinbase(rng: random.Random, products: tuple[str, ...] = ("BTC-USD", "ETH-EUR", "SKL-GBP"),
             n: int = 150) -> tuple[list, dict]:
    """Coinbase ``level2`` snapshot + l2update, and ``ticker`` messages agreeing with the book."""
    full = {p: ({}, {}) for p in products}

    def px(tick: int) -> str:
        return f"{tick / 10**4:.4f}"

    msgs: list = [(None, {"type": "subscriptions", "channels": []})]
    for p in products:
        b, a = full[p]
        for _ in range(rng.randrange(1, 30)):
            b[px(rng.randrange(1000, 2000))] = f"{rng.randrange(1, 10**4) / 100:.2f}"
            a[px(rng.randrange(2000, 3000))] = f"{rng.randrange(1, 10**4) / 100:.2f}"
        msgs.append((p, {"type": "snapshot", "product_id": p, "bids": [list(kv) for kv in _order(b, True)],
                         "asks": [list(kv) for kv in _order(a, False)]}))
    for i in range(n):
        p = rng.choice(products)
        changes = []
        for _ in range(rng.randrange(1, 3)):
            side = rng.randrange(2)
            book = full[p][side]
            if rng.random() < 0.4 and len(book) > 1:
                x = rng.choice(list(book))
                del book[x]
                changes.append(["buy" if side == 0 else "sell", x, "0"])
            else:
                x = px(rng.randrange(1000, 2000) if side == 0 else rng.randrange(2000, 3000))
                book[x] = y = f"{rng.randrange(1, 10**4) / 100:.2f}"
                changes.append(["buy" if side == 0 else "sell", x, y])
        msgs.append((p, {"type": "l2update", "product_id": p, "changes": changes,
                         "time": f"2021-04-17T16:43:{i % 60:02d}.075687Z"}))
        if rng.random() < 0.2 and full[p][0] and full[p][1]:
            bb = _order(full[p][0], True)[0][0]
            ba = _order(full[p][1], False)[0][0]
            msgs.append((p, {"type": "ticker", "product_id": p, "best_bid": bb, "best_ask": ba, "price": bb}))
    return msgs, {p: full[p] for p in products}


def binance(rng: random.Random, symbols: tuple[str, ...] = ("BTCUSDT", "ETHUSDT", "XRPUSDT"), n: int = 150,
            market: str = "futures", coin_m: bool = False) -> tuple[list, dict, dict]:
    """A Binance combined stream of several symbols: depth updates (``U``/``u``, futures ``pu``;
    COIN-M adds ``ps``), bookTickers of the book after an update, trades; and one REST snapshot
    per symbol taken after the stream started (returned separately: ``{symbol: (position in
    the stream, snapshot)}``, to be applied when the stream reaches that position)."""
    full = {s: ({}, {}) for s in symbols}
    last = {s: rng.randrange(100, 10**6) for s in symbols}
    fut = market == "futures"
    msgs: list = []
    snaps: dict = {}

    def px(tick: int) -> str:
        return f"{tick / 100:.2f}"

    for s in symbols:
        b, a = full[s]
        for _ in range(rng.randrange(1, 20)):
            b[px(rng.randrange(1000, 2000))] = f"{rng.randrange(1, 1000)}"
            a[px(rng.randrange(2000, 3000))] = f"{rng.randrange(1, 1000)}"
    for i in range(n):
        s = rng.choice(symbols)
        seen = any(x == s and "depth" in m["stream"] for x, m in msgs)   # subscribed before the snapshot
        if s not in snaps and seen and (rng.random() < 0.15 or i > n // 3):
            b, a = full[s]
            snap = {"lastUpdateId": last[s], "bids": [list(kv) for kv in _order(b, True)],
                    "asks": [list(kv) for kv in _order(a, False)]}
            if fut:
                snap.update(E=1, T=1)
            snaps[s] = (len(msgs), snap)
        ch: tuple[list, list] = ([], [])
        for _ in range(rng.randrange(1, 4)):
            side = rng.randrange(2)
            book = full[s][side]
            if rng.random() < 0.35 and len(book) > 1:
                x = rng.choice(list(book))
                del book[x]
                ch[side].append([x, "0"])
            else:
                x = px(rng.randrange(1000, 2000) if side == 0 else rng.randrange(2000, 3000))
                book[x] = y = f"{rng.randrange(1, 1000)}"
                ch[side].append([x, y])
        first, u = last[s] + 1, last[s] + rng.randrange(1, 4)
        d = {"e": "depthUpdate", "E": 1000 + i, "s": s, "U": first, "u": u, "b": ch[0], "a": ch[1]}
        if fut:
            d.update(T=1000 + i, pu=last[s])
        if coin_m:
            d["ps"] = s.split("_")[0]
        last[s] = u
        msgs.append((s, {"stream": f"{s.lower()}@depth@100ms", "data": d}))
        if rng.random() < 0.3:
            bb, ba = _order(full[s][0], True)[0], _order(full[s][1], False)[0]
            t = {"u": u, "s": s, "b": bb[0], "B": bb[1], "a": ba[0], "A": ba[1]}
            if fut:
                t.update(e="bookTicker", E=1, T=1)
            msgs.append((s, {"stream": f"{s.lower()}@bookTicker", "data": t}))
        if rng.random() < 0.1:
            msgs.append((s, {"stream": f"{s.lower()}@aggTrade", "data": {"e": "aggTrade", "s": s}}))
    for s in symbols:          # a symbol never picked after the first third: a snapshot at the end
        if s not in snaps:
            b, a = full[s]
            snap = {"lastUpdateId": last[s], "bids": [list(kv) for kv in _order(b, True)],
                    "asks": [list(kv) for kv in _order(a, False)]}
            snaps[s] = (len(msgs), snap)
    return msgs, {s: full[s] for s in symbols}, snaps
