"""ddms/io/kernels/jsonscan.py: the venue lanes' JSON scanning primitives against Python's json,
and the ``leaf`` decorator's promise (no reference counting, so no allocation either)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from numba.core.errors import NumbaError

from ddms.io.kernels.jsonscan import key, leaf, member, skip_json, skip_scalar, string, ws

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_VALUES = st.recursive(_SCALARS, lambda c: st.one_of(st.lists(c, max_size=4),
                                                      st.dictionaries(st.text(max_size=4), c, max_size=4)),
                       max_leaves=12)


def _buf(b: bytes) -> np.ndarray:
    return np.frombuffer(b, np.uint8)


@settings(max_examples=300, deadline=None)
@given(v=_VALUES, pad=st.sampled_from(["", " ", "\n\t "]), ascii_only=st.booleans())
def test_skip_json_accepts_what_json_reads(v, pad: str, ascii_only: bool) -> None:
    """A value json.dumps wrote is skipped whole (or refused: escapes and non-ASCII text are
    the Python path's); a cut one never runs past the end."""
    text = (pad + json.dumps(v, ensure_ascii=ascii_only) + pad).encode()
    j = skip_json(_buf(text), 0, len(text))
    if j >= 0:
        assert json.loads(text[:j]) == v or v != v
        assert ws(_buf(text), j, len(text)) == len(text)
    else:
        assert b"\\" in text or any(c > 126 or c < 32 and c not in b" \t\n\r" for c in text)
    cut = text[:max(len(text) - len(pad) - 1, 0)]
    assert skip_json(_buf(cut), 0, len(cut)) <= len(cut)


@settings(deadline=None)
@given(s=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=10),
       tail=st.sampled_from([" : 1", ":x", "", " :"]))
def test_string_and_key(s: str, tail: str) -> None:
    raw = json.dumps(s).encode()
    text = raw + tail.encode()
    a, b, j = string(_buf(text), 0, len(text))
    if "\\" in raw.decode():
        assert j == -1
        return
    assert (a, b, j) == (1, len(raw) - 1, len(raw)) and text[a:b].decode() == s
    ks, ke, v = key(_buf(text), 0, len(text))
    assert member(_buf(text), 0, len(text)) == (ks, ke, v) or v == -1 == member(_buf(text), 0, len(text))[2]
    if tail.strip().startswith(":"):
        assert (ks, ke) == (1, len(raw) - 1) and v == ws(_buf(text), text.index(b":", len(raw)) + 1, len(text))
    else:
        assert v == -1


@pytest.mark.parametrize("text,end", [(b"true,", 4), (b"false]", 5), (b"null", 4), (b"-0.5e+3}", 7),
                                      (b"01", 1), (b"-", -1), (b"1.", -1), (b"tru", -1), (b'"a\\"b"', -1),
                                      (b"[1]", -1)])
def test_skip_scalar(text: bytes, end: int) -> None:
    assert skip_scalar(_buf(text), 0, len(text)) == end


def test_a_leaf_cannot_allocate() -> None:
    """``leaf`` compiles without numba's reference counting: an allocation (which would leak or
    crash without it) is refused at compile time, so the flag cannot hide one."""
    @leaf
    def allocates(n):  # pragma: no cover - compiled
        return np.zeros(n).sum()

    with pytest.raises(NumbaError):
        allocates(3)
    assert njit(allocates.py_func)(3) == 0.0      # refused for the flag alone
