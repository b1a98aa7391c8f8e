"""Subclass inputs that are views of one wrapper base the call does not pass (`f(x[0], x[0])`, x a PairTensor that
requires grad): compiled as a program that takes that base too.

Input: the user's function and one call's args/kwargs. Output: `HiddenBases` (which positions are views of which
base), the call with the bases added, the function the pipeline compiles in the user's place, and the compiled
entry's guards and runner over the user's values. Invariants: the bases go last, as keyword arguments the user's
function never sees; every other leaf keeps its position and path; an entry compiled this way runs only where the
same positions are views of one base object again (guarded by `is`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.guards import Guards

_HIDDEN_KEY = "<base of "  # no identifier: no keyword argument of the user's function has such a name


def is_hidden_base_path(path: str) -> bool:
    """Is `path` (an input's, or one of its inner tensors') that of a base added by Note [Aliased Inputs In
    Training]?"""
    return path.startswith(f"kwargs['{_HIDDEN_KEY}")


@dataclass(frozen=True, slots=True, kw_only=True)
class HiddenBases:
    views: tuple[tuple[int, ...], ...]  # per base: the flat leaves of (args, kwargs) that are views of it, >= 2
    keys: tuple[str, ...]  # per base: its keyword in the call the pipeline compiles
    spec: pytree.TreeSpec  # of (args, kwargs)


def find_hidden_bases(args: tuple[object, ...], kwargs: Mapping[str, object]) -> HiddenBases | None:
    """Subclass inputs that require grad and are views of one wrapper base the call does not pass, grouped by base
    (Note [Aliased Inputs In Training]); None where there are none."""
    values, spec = pytree.tree_flatten((args, dict(kwargs)))
    paths = [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path((args, dict(kwargs)))[0]]
    passed = {id(v) for v in values if isinstance(v, torch.Tensor)}
    by_base: dict[int, list[int]] = {}
    for i, v in enumerate(values):
        if not isinstance(v, torch.Tensor) or not is_traceable_subclass(v) or not v.requires_grad:
            continue
        base = v._base
        if base is None or not is_traceable_subclass(base) or id(base) in passed:
            continue
        views = by_base.setdefault(id(base), [])
        if not any(values[k] is v for k in views):
            views.append(i)
    groups = tuple(tuple(views) for views in by_base.values() if len(views) >= 2)
    keys = tuple(f"{_HIDDEN_KEY}{_user_path(paths[views[0]])}>" for views in groups)
    if not groups or any(k in kwargs for k in keys):
        return None
    return HiddenBases(views=groups, keys=keys, spec=spec)


def _user_path(keystr: str) -> str:
    """`[0][1]` (a leaf of (args, kwargs)) -> `args[1]`; `[1]['k']` -> `kwargs['k']`."""
    root = "args" if keystr.startswith("[0]") else "kwargs"
    return root + keystr[3:]


def call_with_bases(
    hidden: HiddenBases, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> tuple[tuple[object, ...], dict[str, object]]:
    """The call with each base added as a keyword argument (after the user's own)."""
    values = pytree.tree_flatten((args, dict(kwargs)))[0]
    extra = {key: _base_of(values, views) for key, views in zip(hidden.keys, hidden.views, strict=True)}
    return args, {**kwargs, **extra}


def _base_of(values: Sequence[object], views: Sequence[int]) -> torch.Tensor:
    base = values[views[0]]
    assert isinstance(base, torch.Tensor) and base._base is not None, "BUG: not a view"
    return base._base


def dropping_bases(fn: Callable[..., object], hidden: HiddenBases) -> Callable[..., object]:
    """`fn` over the call with bases: drops them before it calls the user's function."""
    keys = set(hidden.keys)

    def without_bases(*args: object, **kwargs: object) -> object:
        return fn(*args, **{k: v for k, v in kwargs.items() if k not in keys})

    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        if hasattr(fn, attr):
            setattr(without_bases, attr, getattr(fn, attr))
    return without_bases


def hidden_base_guards(
    hidden: HiddenBases, inner: Guards, paths: Sequence[str]
) -> tuple[Guards, Callable[[Sequence[object]], list[object]]]:
    """Guards over the user's flat values (those of (args, kwargs): no lifted state) and the map from those values
    to the ones the compiled entry takes (the bases appended). `paths`: each flat leaf's source path."""
    views = hidden.views

    def with_bases(values: Sequence[object]) -> list[object]:
        return [*values, *(_base_of(values, group) for group in views)]

    def check(values: Sequence[object]) -> dict[str, int] | str:
        for group in views:
            first = values[group[0]] if len(values) > group[0] else None
            base = first._base if isinstance(first, torch.Tensor) else None
            for k in group:
                v = values[k] if len(values) > k else None
                if base is None or not isinstance(v, torch.Tensor) or v._base is not base:
                    names = ", ".join(paths[k] for k in group)
                    return f"input aliasing changed: compiled for {names} being views of one tensor not passed"
        return inner.check(with_bases(values))

    lines = "".join(
        "#   "
        + " and ".join(f"L[{k}]._base" for k in group)
        + " are one tensor  ("
        + ", ".join(paths[k] for k in group)
        + ")\n"
        for group in views
    )
    source = f"# Note [Aliased Inputs In Training]: first\n{lines}# then, with those bases appended:\n"
    source += inner.source
    return Guards(source=source, check=check, symbols=inner.symbols, fast_source=inner.fast_source), with_bases
