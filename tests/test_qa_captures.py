"""The qa32 outside check over captures ddms has not seen (``tests/qa_captures.py`` transforms
the real ones): venues' new fields, renamed symbols and markets, COIN-M, rescaled prices, gzip,
several symbols in one hftbacktest file.

Found by this check: a field a venue adds to every message (a new JSON key in each Coinbase
``l2update``) made every message fall back from the chunk lane to the Python path, and each
fallback handed the product's whole book back and forth between the lane's arrays and its
``LevelBook`` (O(levels) each way): the full Coinbase capture took 417 s to read instead of 1 s.
The lane now leaves such a book to the Python path for a doubling number of its messages."""

from __future__ import annotations

import json

import pytest
from conftest import shared_file

from ddms.io.venues.coinbase_chunk import CoinbaseLane
from tests.test_venue_chunk import _chunked, _per_message, _real, _same


def _with_field(msgs: list[bytes], venue: str) -> list[bytes]:
    """Every JSON object message with a field the venue might add tomorrow."""
    out = []
    for m in msgs:
        try:
            d = json.loads(m)
        except ValueError:
            out.append(m)
            continue
        if isinstance(d, dict):
            d["newField"] = 1
        out.append(json.dumps(d, separators=(",", ":")).encode())
    return out


@pytest.mark.parametrize("venue", ["coinbase", "okx"])
def test_a_new_field_in_every_message_does_not_ping_pong_books(venue: str, monkeypatch) -> None:
    """Same output as the per-message path (the new field counted in every message), and the
    books are taken over by the lane a bounded number of times, not once per message."""
    shared_file("data", "venues", "COINBASE.ws.28.0" if venue == "coinbase" else "OKX.ws.1.0")
    msgs = _with_field(_real(venue), venue)
    takes = []
    take = CoinbaseLane._take

    def counted(self, s: int) -> None:
        take(self, s)
        if self._books[s] is not None:
            takes.append(s)
    monkeypatch.setattr(CoinbaseLane, "_take", counted)
    ref, got = _per_message(msgs, venue), _chunked(msgs, [4096, 1000, 77], venue)
    _same(ref, got)
    s = got[2].summary()
    assert s["unknown_fields"]["newField"] >= s["messages"] > 0   # (other messages carry it too)
    books = len(got[2].books)
    assert len(takes) <= books * 16, (len(takes), s["messages"])   # was one per message (9,7k Coinbase)
