"""Stage `inputs`, second half: the same tensor object passed at several positions (`f(x, x)`) becomes one input.

Input: `FlatInputs` and the `call` of stage `inputs`. Output: the same with every later position of a repeated
tensor object turned into a constant `None` leaf, a `call` that puts the object back there before running the
user's code, and, around the compiled entry, guards that check the positions still hold one object and a runner that
drops the repeats. Invariants: leaf numbering (InputIndex) and paths are unchanged; the user's code sees the very
same objects it sees in eager.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from torch.utils import _pytree as pytree

from subclassaot.functional_run import check_containers_unchanged
from subclassaot.guards import GuardFn, Guards
from subclassaot.schemas import FlatInputs, InputIndex, InputLeaf, LeafKind

__all__ = ["Repeats", "deduplicated", "deduplicated_guards", "deduplicated_runner", "find_repeats"]

# Note [Inputs Passed Twice Are One Input]
# A tensor object passed at two positions (`f(x, x)`, a parameter tied under two names, a captured tensor also passed
# as an argument) is one tensor in eager: a t_(), set_() or `.data =` through one name is seen through the other,
# both share one version counter, one `.grad` and one history. Traced as two members of an alias group (views of a
# synthetic base, Note [Synthetic Bases]) it needs the group's rules, and in training autograd's view tracking of those
# traced views differs from eager's one tensor wherever a member's layout changes (Note [Stale View Functions]): such
# programs were refused (fuzz seed 40000 #483, #1189, #1421, #1658, #2195, #2813, #3022, #3301, #3362, #6134, #6700).
# So, as AOTAutograd does, the compiled program takes the object once: every later position becomes a constant `None`
# leaf of the flat inputs, and the traced call puts the first position's stand-in back there before running the
# user's code, which then sees one tensor at both positions, as in eager. Every later stage handles a program with
# one input less, whose rules are those of one input. The entry's guards check that each later position still holds
# the very object of its first position (else the call recompiles, and two distinct tensors go through the alias
# group rules), and its runner drops the repeats before the inner guards and the runtime see the values.


@dataclass(frozen=True, slots=True, kw_only=True)
class Repeats:
    """The later positions of repeated tensor objects: (later, first) InputIndex pairs, later ascending."""

    pairs: tuple[tuple[InputIndex, InputIndex], ...]

    def reduce(self, values: Sequence[object]) -> list[object]:
        """The flat values the deduplicated entry takes: `None` at every later position."""
        out = list(values)
        for later, _ in self.pairs:
            out[later] = None
        return out


def find_repeats(flat: FlatInputs) -> Repeats:
    first: dict[int, InputIndex] = {}
    pairs = []
    for i in flat.tensor_indices:
        seen = first.setdefault(id(flat.values[i]), i)
        if seen != i:
            pairs.append((i, seen))
    return Repeats(pairs=tuple(pairs))


def deduplicated(
    flat: FlatInputs, call: Callable[..., object], repeats: Repeats
) -> tuple[FlatInputs, Callable[..., object]]:
    """Note [Inputs Passed Twice Are One Input]: the flat inputs with the repeats as `None` constants, and the call
    that puts them back."""
    later = {i for i, _ in repeats.pairs}
    leaves = tuple(
        InputLeaf(index=leaf.index, path=leaf.path, kind=LeafKind.CONSTANT) if leaf.index in later else leaf
        for leaf in flat.leaves
    )
    reduced = FlatInputs(
        spec=flat.spec,
        leaves=leaves,
        values=tuple(repeats.reduce(flat.values)),
        tensor_indices=tuple(i for i in flat.tensor_indices if i not in later),
        module_state_names=flat.module_state_names,
    )

    def call_with_repeats(state: object, args: object, kwargs: object) -> object:
        values, spec = pytree.tree_flatten((state, args, kwargs))
        for i, first in repeats.pairs:
            values[i] = values[first]
        tree = pytree.tree_unflatten(values, spec)
        out = call(*cast(tuple[object, ...], tree))
        check_containers_unchanged(flat, values, tree)  # the user's code got `tree`, not the caller's containers
        return out

    return reduced, call_with_repeats


def deduplicated_guards(guards: Guards, repeats: Repeats, flat: FlatInputs) -> Guards:
    """The entry's guards over the caller's flat values: each later position holds its first position's object,
    then the deduplicated program's own guards (Note [Inputs Passed Twice Are One Input])."""
    inner = guards.check
    pairs = repeats.pairs
    paths = {leaf.index: leaf.path for leaf in flat.leaves}

    def check(values: Sequence[object]) -> dict[str, int] | str:
        for i, first in pairs:
            if values[i] is not values[first]:
                return f"{paths[i]}: expected the same tensor object as {paths[first]}, got another"
        return inner(repeats.reduce(values))

    lines = "".join(f"    # {paths[i]} is {paths[first]} (passed once to the compiled program)\n" for i, first in pairs)
    head, _, body = guards.source.partition("\n")
    return Guards(source=f"{head}\n{lines}{body}", check=cast(GuardFn, check), symbols=guards.symbols)


def deduplicated_runner(
    run: Callable[[Sequence[object], dict[str, int]], object], repeats: Repeats
) -> Callable[[Sequence[object], dict[str, int]], object]:
    def run_once(values: Sequence[object], bound: dict[str, int]) -> object:
        return run(repeats.reduce(values), bound)

    return run_once
