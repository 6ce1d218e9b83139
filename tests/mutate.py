"""A small mutation fuzzer for line-oriented input files (test helper, not a test module).

Why our own and not hypothesis alone: the interesting inputs are *real* files with one small
defect (a flipped byte, a non-UTF-8 byte, a cut or an extra line, JSON junk, a number out of
range), which a generator of whole files almost never produces.  Every mutant is reproducible
from its seed (``mutants(data, n, seed)``), and the kind of defect is in its label.

Cost: O(len(data)) per mutant (one copy with a splice).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator

KINDS = ("flip", "non_utf8", "truncate_line", "insert_line", "json_junk", "number_out_of_range", "cut_file",
         "drop_line", "duplicate_line")
_JUNK = (b"{", b"}", b"[", b"]]", b'"', b"null", b",,", b":", b"\\u12", b"NaN", b"-Infinity", b"true", b"\x00",
         b'{"a":' * 5, b"[" * 3000)
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")
_HUGE = (b"99999999999999999999999999", b"-1", b"1e999", b"-0", b"18446744073709551616", b"0.0000000000000000000001",
         b"9007199254740993", b"1" * 400)


def _lines(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line, the newline excluded."""
    out = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        out.append((pos, end))
        pos = end + 1
    return out or [(0, 0)]


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    """One defect of ``kind`` at a random place of ``data``."""
    if not data:
        return bytes(rng.randrange(256) for _ in range(8))
    lines = _lines(data)
    s, e = lines[rng.randrange(len(lines))]
    at = rng.randrange(s, e + 1) if e >= s else s
    if kind == "flip":
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if kind == "non_utf8":
        return data[:at] + rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80")) + data[at:]
    if kind == "truncate_line":
        return data[:at] + data[e:]
    if kind == "insert_line":
        junk = rng.choice((data[s:e], data[s:at], b"", b"garbage", b"1,2,3", b"1 {}", b"0: {}", b"[]", b"{}"))
        return data[:s] + junk + b"\n" + data[s:]
    if kind == "json_junk":
        return data[:at] + rng.choice(_JUNK) + data[at:]
    if kind == "number_out_of_range":
        nums = list(_NUMBER.finditer(data, s, e)) or list(_NUMBER.finditer(data))
        if not nums:
            return data[:at] + rng.choice(_HUGE) + data[at:]
        m = rng.choice(nums)
        return data[:m.start()] + rng.choice(_HUGE) + data[m.end():]
    if kind == "cut_file":
        return data[:rng.randrange(len(data))]
    if kind == "drop_line":
        return data[:s] + data[min(e + 1, len(data)):]
    if kind == "duplicate_line":
        return data[:e + 1] + data[s:e + 1] + data[e + 1:]
    raise AssertionError(kind)


def mutants(data: bytes, n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> Iterator[tuple[str, bytes]]:
    """``n`` mutants of ``data``, each with one defect; labels ``"<kind>#<i>"``."""
    rng = random.Random(seed)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        yield f"{kind}#{i}", mutate(data, kind, rng)


def fuzz(read: Callable[[bytes], object], data: bytes, n: int, seed: int = 0,
         kinds: tuple[str, ...] = KINDS) -> dict[str, int]:
    """Feed ``n`` mutants of ``data`` to ``read`` (which reads the whole input); each must end
    normally or with a :class:`~ddms.errors.DdmsError` whose message names the input.  Any other
    exception fails with the mutant's label and the first differing bytes.  Returns counts of
    outcomes: ``ok`` and ``error``."""
    from ddms.errors import DdmsError

    out = {"ok": 0, "error": 0}
    for label, mutant in mutants(data, n, seed, kinds):
        try:
            read(mutant)
        except DdmsError as e:
            assert str(e), label
            out["error"] += 1
        except Exception as e:   # noqa: BLE001 - the point: nothing else may escape
            i = next((j for j, (a, b) in enumerate(zip(data, mutant, strict=False)) if a != b), min(len(data),
                                                                                                     len(mutant)))
            raise AssertionError(f"mutant {label} (seed {seed}) raised {type(e).__name__}: {e}; "
                                 f"around byte {i}: {mutant[max(i - 40, 0):i + 40]!r}") from e
        else:
            out["ok"] += 1
    return out
