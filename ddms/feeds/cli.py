"""`ddms serve-feed` and `ddms monitor`: the command-line faces of the feed transport (issue 5)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register the feed subcommands on the `ddms` parser."""
