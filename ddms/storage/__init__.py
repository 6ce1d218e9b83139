"""Run-time storage: range-cumulative ordered maps as counted B+-trees (``btree``) and the
open-addressing tables that find a slice's tree by its prefix keys (``hashtab``)."""
