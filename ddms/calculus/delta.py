"""The delta of a linear query for one event: DBToaster's delta rule on the normal form.

For an event ``+R(a1..an)`` (``-R``: sign -1) the delta of a product of atoms is the sum, over
every non-empty subset S of the atoms over R, of the product with the atoms of S replaced by the
event tuple (each contributes ``sign``): with self-joins the subsets of two or more atoms are the
higher-order terms (the new tuple joining itself).  Replacing an atom binds its variables to the
event's argument variables: the renaming is applied to the whole term, including the group
variables, which is how the target key of an update becomes an event argument.

Pure; cost O(2**k) terms for k atoms over R in one term (k is the self-join width, 1 or 2 in
practice; ``MAX_SELF_JOIN`` bounds it).
"""

from __future__ import annotations

from itertools import combinations

from ddms.calculus.ir import Query, Term, substitute_term
from ddms.calculus.normal import merge_terms, simplify_term
from ddms.errors import SqlError
from ddms.m3.ir import Cmp, Var

MAX_SELF_JOIN = 6


def delta(q: Query, stream: str, sign: int, args: tuple[str, ...]) -> dict[tuple[str, ...], list[Term]]:
    """Target key tuple -> delta terms (over the remaining atoms) of ``q`` for the event."""
    out: dict[tuple[str, ...], list[Term]] = {}
    for t in q.terms:
        pos = [i for i, a in enumerate(t.atoms) if a.name == stream]
        if len(pos) > MAX_SELF_JOIN:
            raise SqlError(f"a term joins {stream} with itself {len(pos)} times (at most {MAX_SELF_JOIN})")
        for k in range(1, len(pos) + 1):
            for subset in combinations(pos, k):
                sub: dict[str, str] = {}
                eqs = []
                for i in subset:
                    for var, arg in zip(t.atoms[i].vars, args, strict=True):
                        if var in sub and sub[var] != arg:
                            eqs.append(Cmp("=", Var(sub[var]), Var(arg)))
                        else:
                            sub.setdefault(var, arg)
                rest = tuple(a for i, a in enumerate(t.atoms) if i not in subset)
                nt = substitute_term(Term(t.coef * (sign ** k), rest, t.factors + tuple(eqs)), sub)
                nt = simplify_term(nt)
                if nt is None:
                    continue
                keys = tuple(sub.get(g, g) for g in q.group)
                out.setdefault(keys, []).append(nt)
    return {k: merged for k, v in out.items() if (merged := merge_terms(v))}

