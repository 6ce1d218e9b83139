"""Helpers for the tests that run ``ddms`` as a user does (a subprocess of this checkout) and
serve a small generated order book over loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def cli(*args: str, **kw) -> subprocess.Popen:
    """``python -m ddms.cli ARGS`` started from the repository, this checkout's package first."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "ddms.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO, **kw)


def small_book(tmp_path: Path, n: int = 300) -> Path:
    """A small order-book CSV (t,id,action,volume,price), written here: adds on both sides
    behind the touch, partial executions and deletes (no reference data needed)."""
    lines = []
    for i in range(1, n + 1):
        if i % 7 == 0 and i > 14:
            lines.append(f"{i},{i - 14},D,0,0")
        elif i % 5 == 0 and i > 10:
            lines.append(f"{i},{i - 10},E,1,0")
        else:
            side, price = ("B", 1000 - i % 13) if i % 2 else ("S", 1010 + i % 11)
            lines.append(f"{i},{i},{side},{10 + i % 9},{price}")
    path = tmp_path / "book.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def serve(path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """``ddms serve-feed PATH EXTRA...`` started; returns the process and the URL it printed."""
    server = cli("serve-feed", str(path), *extra)
    url = server.stdout.readline().decode().strip()
    assert url.startswith("ws://127.0.0.1:"), server.stderr.read().decode()
    return server, url
