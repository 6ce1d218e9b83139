"""`ddms backtest`: the command-line face of the replay and backtest code (issue 4)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register the backtest subcommand on the `ddms` parser."""
