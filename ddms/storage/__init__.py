"""Run-time storage: range-cumulative ordered maps as counted B+-trees (``btree``)."""
