"""Equity samples depend on the input lines only (not on how the data is cut into batches), so
Sharpe is the same from a file, its chunked parse and its Parquet copy; plots put every point at
its own data time, as wall-clock dates when the timestamps are epoch-like."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import shared_file

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.io.columnar import convert
from ddms.io.orderbook import OrderBookParser, parse_chunks
from ddms.io.sources import open_source
from replay.backtest import identical, run_backtest, summary_row
from replay.results import epoch_unit, figure, time_axis
from replay.sample_data import binance_capture_lines
from replay.synthetic import write_orderbook

SOBI = {"threshold": 0.0001, "order_size": 1}


def _same_run(a, b) -> None:
    """Bit-identical equity samples, fills and summary metrics (the partition label aside)."""
    for k in a.equity:
        assert np.array_equal(a.equity[k], b.equity[k], equal_nan=True), k
    for k in a.fills:
        assert np.array_equal(a.fills[k], b.fills[k], equal_nan=True), k
    ra, rb = summary_row(a), summary_row(b)
    ra.pop("partition")
    rb.pop("partition")
    assert identical(ra, rb)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("sampling")
    csv = d / "synth.csv"
    write_orderbook(csv, 30_000, seed=7)
    pq_path = d / "synth.parquet"
    convert([open_source(csv)], pq_path, group_events=997)     # row groups cut anywhere
    return csv, pq_path


def test_equity_samples_and_sharpe_do_not_depend_on_batches(synth):
    csv, pq_path = synth
    base = run_backtest(str(csv), "sobi", SOBI, sample_lines=700)
    assert base.metrics.n_trades > 0 and np.isfinite(base.metrics.sharpe)
    # samples at every 700th line and at the end, nowhere else
    assert base.equity["line"].tolist() == [*range(700, 30_000, 700), 30_000]
    data = csv.read_bytes()
    for size in (4096, 65_537):        # the text parsed in chunks of other sizes: other batches
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        batches = list(parse_chunks(OrderBookParser(brokers=10), chunks))
        assert len(batches) > 5
        _same_run(base, run_backtest(batches, "sobi", SOBI, sample_lines=700, name="chunks"))
    parquet = run_backtest(str(pq_path), "sobi", SOBI, sample_lines=700)
    _same_run(base, parquet)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("capture")
    gz = d / "usdm_btcusdt.gz"
    import gzip
    with gzip.open(gz, "wt") as f:
        for line in binance_capture_lines("futures", 1500, seed=2):
            f.write(line + "\n")
    pq_path = d / "usdm.parquet"
    # the capture read in batches of 100 book updates: one row group each
    convert([replace(open_source(gz), batch_updates=100)], pq_path, group_events=1)
    return gz, pq_path


def test_sharpe_identical_from_a_capture_and_its_parquet_copy(capture):
    gz, pq_path = capture
    params = {"threshold": 0.000005, "order_size": 1, "sample_lines": 50}
    a = run_backtest(str(gz), "sobi", params)
    b = run_backtest(str(pq_path), "sobi", params)
    assert a.metrics.n_trades > 0 and np.isfinite(a.metrics.sharpe)
    assert len(list(open_source(pq_path))) > 5 * len(list(open_source(gz)))   # chunked differently
    _same_run(a, b)


def test_sharpe_identical_from_the_real_usdm_capture_and_its_parquet_copy(tmp_path):
    gz = shared_file("data", "binance", "usdm_btcusdt_20240808.gz")
    pq_path = tmp_path / "usdm.parquet"
    convert([open_source(gz)], pq_path)
    params = {"k": 0.1, "threshold": 0.001, "order_size": 1, "position_limit": 5, "maker_fee": 0.0002,
              "taker_fee": 0.0005, "sample_lines": 100}
    a = run_backtest(str(gz), "sobi", params)
    b = run_backtest(str(pq_path), "sobi", params)
    assert a.metrics.n_trades > 0
    _same_run(a, b)


def test_epoch_units():
    assert epoch_unit(np.array([1_723_161_256_299.0, 1_723_161_556_000.0])) == "ms"
    assert epoch_unit(np.array([1_723_161_256.5])) == "s"
    assert epoch_unit(np.array([1.7e15])) == "us" and epoch_unit(np.array([1.7e18])) == "ns"
    assert epoch_unit(np.array([25_000_000.0, 25_100_000.0])) is None          # finance.csv's clock
    assert epoch_unit(np.array([34_200.0, 57_600.0])) is None                  # LOBSTER: s after midnight
    assert epoch_unit(np.array([1.7e12]), np.array([5.0])) is None             # mixed: not a date
    assert epoch_unit(np.array([]), np.array([np.nan])) is None
    t = time_axis(np.array([1_735_722_000_000.0]), "ms")
    assert t[0] == np.datetime64("2025-01-01T09:00:00.000")
    raw = np.array([3.0, 4.5])
    assert np.array_equal(time_axis(raw, None), raw)


def _scatter_x(fig) -> np.ndarray:
    ax = fig.axes[0]
    return np.concatenate([c.get_offsets()[:, 0] for c in ax.collections if len(c.get_offsets())])


def test_plot_draws_fills_at_their_own_time(synth, capture):
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    csv, _ = synth
    r = run_backtest(str(csv), "sobi", SOBI, sample_lines=5000)
    first = r.equity["time"][0]
    assert (r.fills["time"] < first).any()          # fills before the first equity sample
    fig = figure(r)
    x = np.sort(_scatter_x(fig))
    assert np.array_equal(x, np.sort(r.fills["time"]))    # not shifted: no negative times
    assert "own units" in fig.axes[2].get_xlabel()
    plt.close(fig)

    gz, _ = capture
    r = run_backtest(str(gz), "sobi", {"threshold": 0.000005, "order_size": 1, "sample_lines": 500})
    assert r.metrics.n_trades > 0
    fig = figure(r)
    want = mdates.date2num(time_axis(r.fills["time"], "ms"))
    assert np.allclose(np.sort(_scatter_x(fig)), np.sort(want), rtol=0, atol=1e-9)
    assert "UTC" in fig.axes[2].get_xlabel()
    lo, hi = fig.axes[0].get_xlim()
    assert mdates.num2date(lo).year == 2025 and lo <= want.min() and want.max() <= hi
    plt.close(fig)
    assert figure(replace(r, equity={k: v[:0] for k, v in r.equity.items()})) is None
