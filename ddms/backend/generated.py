"""The generator's product, :class:`Generated`, in a module of its own.

Why: the engine, the module cache and the generated-code cache (:mod:`ddms.backend.gencache`)
handle a :class:`Generated` on every start, but only a program that is not cached yet needs the
generator itself (:mod:`ddms.backend.codegen`, the largest module of the package: ~20 ms of
compiling its source where bytecode is not written, plus its passes' modules).  Keeping the
dataclass here lets a cached start skip importing the generator.  Cost: none.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddms.m3.ir import Program

__all__ = ["Generated"]


@dataclass(frozen=True)
class Generated:
    """The generated module source, its content hash, and the access plan of every statement."""

    source: str
    digest: str
    plan: tuple[str, ...]
    program: Program
