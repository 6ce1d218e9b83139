"""Run-time storage: range-cumulative ordered maps (``ordered``)."""
