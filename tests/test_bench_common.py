"""bench.common.interleaved, the timing shape the benches share: functions take turns, each is
warmed up once untimed, setups run untimed before every run, the best time counts."""

from __future__ import annotations

import pytest

from bench.common import interleaved


def test_interleaved_takes_turns_and_keeps_the_best() -> None:
    log: list[str] = []
    now = [0.0]

    def clock() -> float:
        return now[0]

    def work(name: str, seconds: list[float]):
        def fn(*args):
            log.append(name + "".join(f"({a})" for a in args))
            now[0] += seconds.pop(0)
            return name + "!"
        return fn

    setups = iter(range(100))
    out = interleaved([work("a", [9, 3, 1, 2]), work("b", [9, 5, 7, 6])], 3, clock=clock,
                      setup=[None, lambda: next(setups)])
    assert log == ["a", "b(0)", "a", "b(1)", "a", "b(2)", "a", "b(3)"]   # warm-up, then A, B, A, B, ...
    assert [t.best for t in out] == [1, 5] and [t.times for t in out] == [[3, 1, 2], [5, 7, 6]]
    assert [t.result for t in out] == ["a!", "b!"]
    best, result, times = out[0]          # unpacks as the (best, result, times) tuples it replaced
    assert (best, result, times) == (1, "a!", [3, 1, 2])


def test_interleaved_without_warm_up_and_bad_setup() -> None:
    calls = []
    interleaved([lambda: calls.append(1)], 2, warm_up=False)
    assert calls == [1, 1]
    with pytest.raises(ValueError, match="setups"):
        interleaved([print, print], 1, setup=[None])
