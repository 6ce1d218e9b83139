"""Captures ddms has not seen, made by transforming the real ones in ../shared/data (test helper
of the qa32 outside check, not a test module).

Each transform keeps a capture's protocol valid (sequence ids, snapshots, checksums over the
exact strings) while changing what a reader might have hard-wired: symbol names (new markets and
spellings), the market (USD-M -> COIN-M: other hosts and REST paths, the ``ps`` field), price
scales (Binance carries no checksum, so its prices may be rescaled exactly as decimal strings),
fields a venue may add without notice (in every JSON object of a message), gzip, and how the
messages are spread over files (split by symbol, merged).  Every function reads a real file
and writes the new one(s) into ``out``; none needs the network.
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path


def _open(path: Path):
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def _write(path: Path, lines: list[str]) -> Path:
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def _rename(text: str, names: dict[str, str]) -> str:
    """Every whole occurrence of each old name (as given, and lower case for stream names)."""
    for old, new in names.items():
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9])", new, text)
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(old.lower())}(?![A-Za-z0-9])", new.lower(), text)
    return text


def _add_fields(obj, extra: dict):
    """``obj`` with ``extra`` added to every JSON object in it (a venue's new fields)."""
    if isinstance(obj, dict):
        return {**{k: _add_fields(v, extra) for k, v in obj.items()}, **extra}
    if isinstance(obj, list):
        return [_add_fields(v, extra) for v in obj]
    return obj


def _scale(s: str, exp10: int) -> str:
    """A decimal price string times 10**exp10, exactly (``"61800.20"``, -2 -> ``"618.0020"``)."""
    d = Decimal(s).scaleb(exp10)
    places = max(0, -d.as_tuple().exponent)
    return f"{d:.{places}f}"


# -- hftbacktest (`<ns> <json>`) -----------------------------------------------------------------

def hft_transform(src: Path, dst: Path, *, symbol: str, coinm: bool = False, price_exp10: int = 0,
                  extra: dict | None = None, ns_offset: int = 0, lines: int | None = None,
                  id_offset: int = 0) -> Path:
    """A Binance hftbacktest capture with its one symbol renamed (stream names, ``s``), prices
    scaled by 10**price_exp10 (depth levels, bookTicker, trades, the REST snapshot), ``extra``
    fields in every message object, receive times shifted by ``ns_offset``, update ids by
    ``id_offset``; ``coinm`` adds
    COIN-M's ``ps`` (pair) to each stream message; the first ``lines`` lines only if given."""
    out = []
    with _open(src) as f:
        for n, line in enumerate(f):
            if lines is not None and n >= lines:
                break
            ns, raw = line.rstrip("\n").split(" ", 1)
            msg = json.loads(raw)
            data = msg.get("data", msg)
            old = data.get("s")
            if price_exp10:
                for side in ("b", "a", "bids", "asks"):
                    if isinstance(data.get(side), list):
                        data[side] = [[_scale(p, price_exp10), q] for p, q in data[side]]
                    elif isinstance(data.get(side), str):
                        data[side] = _scale(data[side], price_exp10)
                if "p" in data:
                    data["p"] = _scale(data["p"], price_exp10)
            for k in ("U", "u", "pu", "lastUpdateId"):     # another symbol's update id sequence
                if id_offset and isinstance(data.get(k), int):
                    data[k] += id_offset
            if old is not None:
                data["s"] = symbol
                if coinm:
                    data["ps"] = symbol.split("_")[0]
            if "stream" in msg:
                msg["stream"] = symbol.lower() + "@" + msg["stream"].split("@", 1)[1]
            if extra:
                msg = _add_fields(msg, extra)
            out.append(f"{int(ns) + ns_offset} {json.dumps(msg, separators=(',', ':'))}")
    return _write(dst, out)


def hft_merge(srcs: list[Path], dst: Path) -> Path:
    """Several one-symbol hftbacktest captures as one file, lines ordered by receive time."""
    rows = []
    for k, src in enumerate(srcs):
        with _open(src) as f:
            rows += [(int(line.split(" ", 1)[0]), k, i, line.rstrip("\n")) for i, line in enumerate(f)]
    rows.sort()
    return _write(dst, [r[3] for r in rows])


# -- cryptofeed (`ts: json` + `.http.` REST files) --------------------------------------------------

def cf_transform(src: Path, dst: Path, names: dict[str, str], *, extra: dict | None = None,
                 url: tuple[str, str] | None = None) -> Path:
    """A cryptofeed capture with symbols renamed, ``extra`` fields added to every JSON object
    of every received message (not to the lines the client sent), and the URL's host replaced
    (``url=(old, new)``)."""
    out = []
    with _open(src) as f:
        for n, line in enumerate(f):
            line = line.rstrip("\n")
            if url is not None:
                line = line.replace(url[0], url[1])
            line = _rename(line, names)
            head, sep, body = line.partition(": ")
            if extra and n and " <- " not in head and " -> " not in head and sep and body.startswith(("{", "[")):
                body = json.dumps(_add_fields(json.loads(body), extra), separators=(",", ":"))
                line = head + sep + body
            out.append(line)
    return _write(dst, out)


def cf_split(src: Path, out: Path, symbol_key: str) -> list[Path]:
    """A cryptofeed capture split into one file per symbol (``symbol_key``: the JSON path
    picking a message's symbol: "kraken" -> the pair at the end of the array, "okx" ->
    ``arg.instId``, "coinbase" -> ``product_id``); the header and the lines sent go to each."""
    head, per = [], {}
    with _open(src) as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines):
        h, sep, body = line.partition(": ")
        if n == 0 or " <- " in h or not sep:
            head.append(line)
            continue
        msg = json.loads(body)
        sym = None
        if symbol_key == "kraken" and isinstance(msg, list):
            sym = msg[-1]
        elif symbol_key == "kraken" and isinstance(msg, dict):
            sym = msg.get("pair")
        elif symbol_key == "okx":
            sym = (msg.get("arg") or {}).get("instId")
        elif symbol_key == "coinbase":
            sym = msg.get("product_id")
        if sym is None:
            for lst in per.values():
                lst.append(line)
            continue
        per.setdefault(sym, list(head)).append(line)
    paths = []
    for k, (_sym, body) in enumerate(sorted(per.items())):
        name = src.name.split(".", 1)
        paths.append(_write(out / f"{name[0]}.ws.{90 + k}.0", body))
    return paths
