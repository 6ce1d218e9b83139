"""numba backend: M3 program -> Python source (``codegen``) -> content-addressed module in the
cache directory (``cache``) -> imported, numba-compiled program (``program``)."""
