"""One tensor passed at several positions of a call (`f(x, x)`): compiled as a program of its first position only.

Input: the user's function and one call's args/kwargs. Output: `SameInputs` (which positions repeat which), the
function the pipeline compiles in the user's place, and the compiled entry's guards and runner over the user's
values. Invariants: only the leaves of a repeated tensor change (to a `SameTensorAs` marker); every other leaf
keeps its position and its path; an entry compiled this way runs only where the same positions hold the very same
object again (guarded by `is`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.guards import Guards


@dataclass(frozen=True, slots=True)
class SameTensorAs:
    """Marks a repeated tensor's later position: the tensor is the one at flat leaf `index` (a constant leaf)."""

    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SameInputs:
    repeats: tuple[tuple[int, int], ...]  # (later flat leaf, its first flat leaf) of (args, kwargs), in leaf order
    spec: pytree.TreeSpec  # of (args, kwargs)


def find_same_inputs(args: tuple[object, ...], kwargs: Mapping[str, object]) -> SameInputs | None:
    """The repeated tensors of a call (Note [Synthetic Bases]), or None where none repeats."""
    values, spec = pytree.tree_flatten((args, dict(kwargs)))
    first: dict[int, int] = {}
    repeats: list[tuple[int, int]] = []
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor) and not is_traceable_subclass(v):
            k = first.setdefault(id(v), i)
            if k != i:
                repeats.append((i, k))
    return SameInputs(repeats=tuple(repeats), spec=spec) if repeats else None


def marked_call(
    same: SameInputs, args: tuple[object, ...], kwargs: Mapping[str, object], offset: int
) -> tuple[tuple[object, ...], dict[str, object]]:
    """The call with each repeated position replaced by its marker. `offset`: how many leaves of state lifted from
    modules among the arguments come before the call's in the compiled entry's flat inputs (markers name those)."""
    values = pytree.tree_flatten((args, dict(kwargs)))[0]
    for later, k in same.repeats:
        values[later] = SameTensorAs(k + offset)
    marked_args, marked_kwargs = pytree.tree_unflatten(values, same.spec)
    return tuple(marked_args), dict(marked_kwargs)


def unmarking(fn: Callable[..., object], same: SameInputs) -> Callable[..., object]:
    """`fn` over the marked call: puts the first position's tensor (the traced one, at trace time) back in."""

    def unmarked(*args: object, **kwargs: object) -> object:
        values, spec = pytree.tree_flatten((args, kwargs))
        for later, k in same.repeats:
            values[later] = values[k]
        real_args, real_kwargs = pytree.tree_unflatten(values, spec)
        return fn(*real_args, **real_kwargs)

    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        if hasattr(fn, attr):
            setattr(unmarked, attr, getattr(fn, attr))
    return unmarked


def same_input_guards(
    same: SameInputs, inner: Guards, paths: Sequence[str], offset: int
) -> tuple[Guards, Callable[[Sequence[object]], list[object]]]:
    """Guards over the entry's flat values (the state lifted from argument modules, `offset` leaves, then those of
    (args, kwargs)) and the map from those values to the marked ones the compiled entry takes. `paths`: each flat
    leaf's source path."""
    repeats = tuple((later + offset, k + offset) for later, k in same.repeats)
    markers = tuple(SameTensorAs(k) for _, k in repeats)

    def marked(values: Sequence[object]) -> list[object]:
        out = list(values)
        for (later, _), marker in zip(repeats, markers, strict=True):
            out[later] = marker
        return out

    def check(values: Sequence[object]) -> dict[str, int] | str:
        for later, k in repeats:
            if len(values) <= later or values[later] is not values[k]:
                return f"input aliasing changed: compiled for {paths[later]} being the very same tensor as {paths[k]}"
        return inner.check(marked(values))

    lines = "".join(f"#   L[{later}] is L[{k}]  ({paths[later]} is {paths[k]})\n" for later, k in repeats)
    source = f"# Note [Synthetic Bases]: first\n{lines}# then, with those replaced by markers:\n"
    source += inner.source
    return Guards(source=source, check=check, symbols=inner.symbols, fast_source=inner.fast_source), marked
