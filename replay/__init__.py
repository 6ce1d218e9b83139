"""Replay: order-flow sources for demos, scale tests and backtests (``synthetic``)."""
