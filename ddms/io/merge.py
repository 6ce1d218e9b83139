"""Several inputs merged into one event stream by receive timestamp (not batch by batch).

Why: a monitor or a backtest over captures of several venues (or files) must see the updates in
the order a single receiver would have seen them; concatenating files, or alternating their
batches, replays one venue's minutes before the other's.  Every reader whose format records a
receive time fills :attr:`EventBatch.recv <ddms.io.events.EventBatch>` (Binance captures
``<recv_ts_ns>``, cryptofeed ``<unix seconds>:``, tardis ``local_timestamp``, DBN ``ts_recv``).

Order (deterministic): the merged lines are those of every input sorted by
``(key, input index, position in its input)``, where a line's key is the largest receive time
up to and including it in its own input (a running maximum: a clock stepping back, or a line
without events, never moves a line before its predecessors, so each input's order, its books'
sequencing, and each atomic update survive).  Ties go to the input given first, then to file
order.  Each input line -- one atomic update (a depth message, a DBN event up to F_LAST) --
stays one merged line: the engine never sees half of one venue's update interleaved with
another's.

An input that stops at a bad line (strict readers) stops the merge where that line would have
been merged (keyed as its predecessor), after every line merged before it: the batch yielded
then carries the error, which is raised next, as every reader does.

Cost: O(L log L) numpy work per round over the L lines merged in it (a round merges at least one
input's whole pending batch), plus a ``np.unique`` of the symbol column per batch read to refuse
one instrument arriving from two inputs (two books would silently become one).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ddms.errors import ReplayError
from ddms.io.events import EventBatch, split_lines
from ddms.io.symbols import symbol_name

__all__ = ["MIN_KEY", "TimedInput", "line_keys", "merge_by_receive_time"]

MIN_KEY = np.iinfo(np.int64).min
"""The key of lines before an input's first receive time (they merge first)."""


@dataclass
class TimedInput:
    """One input of a merge: its ``batches`` (rel 0.. of its own relations), ``label`` (its file,
    in errors), ``base`` (the merged number of its relation 0).  The rest is the merge's state:
    the lines read but not merged yet (``pending`` and their ``keys``), the running maximum
    ``hi``, the symbol ids seen."""

    batches: Iterator[EventBatch]
    label: str
    base: int = 0
    pending: EventBatch | None = None
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    hi: int = MIN_KEY
    done: bool = False
    skipped: int = 0
    symbols: set[float] = field(default_factory=set)

    def _check(self) -> None:
        """Pending lines and keys agree; keys never decrease and end at ``hi``."""
        n = 0 if self.pending is None else self.pending.last_line - self.pending.first_line + 1
        assert len(self.keys) == n, (len(self.keys), n)
        assert n == 0 or (np.all(np.diff(self.keys) >= 0) and self.keys[-1] == self.hi)


def line_keys(batch: EventBatch, hi: int, label: str = "<input>") -> np.ndarray:
    """The merge key of each line ``batch.first_line..last_line``: the running maximum, from
    ``hi`` (the input's maximum so far), of its events' receive times.  Raises
    :class:`ReplayError` naming ``label`` when the batch has events but no receive times."""
    n = batch.last_line - batch.first_line + 1
    keys = np.full(max(n, 0), MIN_KEY, np.int64)
    if len(batch):
        if batch.recv is None:
            raise ReplayError("its reader gives no receive timestamps, so it cannot be merged with other inputs "
                              "by receive time", label)
        np.maximum.at(keys, batch.line - batch.first_line, batch.recv.astype(np.int64, copy=False))
    if n:
        keys[0] = max(keys[0], hi)
        np.maximum.accumulate(keys, out=keys)
    return keys


def merge_by_receive_time(inputs: Sequence[TimedInput], *, width: int, offset: int = 0) -> Iterator[EventBatch]:
    """The events of ``inputs`` as one stream in the order of the module docstring: batches of
    ``width`` columns (narrower inputs padded with zeros), relations shifted by each input's
    ``base``, lines numbered ``offset + 1, ...`` over every input's lines, ``recv`` kept."""
    active = list(range(len(inputs)))
    while active:
        for k in list(active):
            if not _top_up(inputs, k):
                active.remove(k)
        if not active:
            skipped = _take_skipped(inputs)
            if skipped:
                e = EventBatch.empty(width, offset)
                yield EventBatch(e.rel, e.sign, e.cols, e.line, e.first_line, e.last_line, skipped)
            return
        # (key, input) of the last pending line of each input: no unread line can sort before it
        bound_key, star = min((_last_key(inputs[k]), k) for k in active)
        heads: list[tuple[int, EventBatch, np.ndarray]] = []
        for k in active:
            inp = inputs[k]
            if inp.pending is None or len(inp.keys) == 0:
                continue
            take = (len(inp.keys) if k == star else
                    int(np.searchsorted(inp.keys, bound_key, side="right" if k < star else "left")))
            if take == 0:
                continue
            head, tail = split_lines(inp.pending, inp.pending.first_line + take - 1)
            heads.append((k, head, inp.keys[:take]))
            inp.pending, inp.keys = tail, inp.keys[take:]
        batch = _merged(inputs, heads, width, offset)
        offset = batch.last_line
        err = inputs[star].pending.error if inputs[star].pending is not None and len(inputs[star].keys) == 0 else None
        if err is not None:
            yield EventBatch(batch.rel, batch.sign, batch.cols, batch.line, batch.first_line, batch.last_line,
                             batch.skipped, err, batch.recv)
            raise err
        if len(batch) or batch.last_line >= batch.first_line:
            yield batch


def _take_skipped(inputs: Sequence[TimedInput]) -> int:
    """The bad lines skipped in the inputs since the last call (reported once, in the next batch)."""
    n = sum(inp.skipped for inp in inputs)
    for inp in inputs:
        inp.skipped = 0
    return n


def _last_key(inp: TimedInput) -> int:
    return int(inp.keys[-1]) if len(inp.keys) else inp.hi


def _top_up(inputs: Sequence[TimedInput], k: int) -> bool:
    """Read input ``k`` until it has a pending line (or is at a bad line, or ended).  False when
    it has ended with nothing pending."""
    inp = inputs[k]
    while len(inp.keys) == 0 and not (inp.pending is not None and inp.pending.error is not None):
        b = next(inp.batches, None) if not inp.done else None
        if b is None:
            inp.done = True
            inp.pending = None
            return False
        inp.skipped += b.skipped
        if b.cols.shape[1] > 5 and len(b):
            _claim_symbols(inputs, k, b)
        keys = line_keys(b, inp.hi, inp.label)
        if len(keys):
            inp.hi = int(keys[-1])
        inp.pending, inp.keys = b, keys
    return True


def _claim_symbols(inputs: Sequence[TimedInput], k: int, b: EventBatch) -> None:
    """Refuse an instrument (symbol id) that two inputs carry: their rows would land in one
    book (level ids colliding, sizes summed), a silent corruption."""
    new = set(np.unique(b.cols[:, 5]).tolist()) - inputs[k].symbols
    if not new:
        return
    for j, other in enumerate(inputs):
        both = new & other.symbols if j != k else set()
        if both:
            sym = symbol_name(min(both))
            raise ReplayError(f"symbol {sym} is also in {other.label}: merged inputs must hold different instruments "
                              f"(one book per symbol); choose one file's with FILE#SYMBOL, or name each file's symbols "
                              f"apart with a prefix, FILE#PREFIX* (e.g. usdm.gz#USDM:* reads {sym} as USDM:{sym})",
                              inputs[k].label)
    inputs[k].symbols |= new


def _merged(inputs: Sequence[TimedInput], heads: list[tuple[int, EventBatch, np.ndarray]], width: int,
            offset: int) -> EventBatch:
    """One batch of the lines in ``heads``, ordered by (key, input, position)."""
    if not heads:
        return EventBatch.empty(width, offset)
    keys = np.concatenate([h[2] for h in heads])
    src = np.concatenate([np.full(len(hk), k, np.int64) for k, _, hk in heads])
    pos = np.concatenate([np.arange(len(h[2]), dtype=np.int64) for h in heads])
    order = np.lexsort((pos, src, keys))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    rel, sign, cols, line, recv = [], [], [], [], []
    start = 0
    for k, head, hk in heads:
        r = rank[start:start + len(hk)]
        start += len(hk)
        rel.append(head.rel.astype(np.int16) + inputs[k].base)
        sign.append(head.sign)
        c = np.zeros((len(head), width))
        c[:, :head.cols.shape[1]] = head.cols
        cols.append(c)
        line.append(r[head.line - head.first_line] + offset + 1)
        recv.append(head.recv if head.recv is not None else np.full(len(head), MIN_KEY, np.int64))
    g = np.concatenate(line)
    o = np.argsort(g, kind="stable")
    skipped = _take_skipped(inputs)
    return EventBatch(np.concatenate(rel).astype(np.int8)[o], np.concatenate(sign)[o], np.concatenate(cols)[o], g[o],
                      offset + 1, offset + len(keys), skipped, None, np.concatenate(recv)[o])
