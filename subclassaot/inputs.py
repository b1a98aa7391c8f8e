"""Stage `inputs`: flatten the call's argument pytree; lift a module's parameters and buffers to inputs.

Input: the user's callable (function or nn.Module) and one call's args/kwargs. Output: `FlatInputs` plus the
function that the later stages trace, taking the same pytree back. Invariants: tensor leaves keep their identity
(aliasing between inputs is visible to later stages); every leaf has a source path used in every message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.errors import UnsupportedError
from subclassaot.schemas import FlatInputs, InputIndex, InputLeaf, LeafKind


def module_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters then buffers by qualified name (the names `state_dict` uses)."""
    state: dict[str, torch.Tensor] = dict(module.named_parameters(remove_duplicate=False))
    state.update(dict(module.named_buffers(remove_duplicate=False)))
    return state


def flatten_call(
    fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object]
) -> tuple[FlatInputs, Callable[..., object]]:
    """Flatten one call; return the flat record and `call(state, args, kwargs)` that runs the user's code."""
    if isinstance(fn, torch.nn.Module):
        module = fn
        state = module_state(module)

        def call(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
            handle = module.register_forward_hook(lambda mod, a, out: _check_state_kept(mod, state))
            try:
                return torch.func.functional_call(module, state, args, kwargs, tie_weights=False, strict=True)
            finally:
                handle.remove()

    else:
        state = {}
        user_fn = fn

        def call(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
            return user_fn(*args, **kwargs)

    values, spec = pytree.tree_flatten((state, args, dict(kwargs)))
    paths = _leaf_paths((state, args, dict(kwargs)))
    leaves = tuple(
        InputLeaf(
            index=InputIndex(i),
            path=path,
            kind=LeafKind.TENSOR if isinstance(v, torch.Tensor) else LeafKind.CONSTANT,
        )
        for i, (path, v) in enumerate(zip(paths, values, strict=True))
    )
    flat = FlatInputs(
        spec=spec,
        leaves=leaves,
        values=tuple(values),
        tensor_indices=tuple(leaf.index for leaf in leaves if leaf.kind is LeafKind.TENSOR),
        module_state_names=tuple(state),
    )
    return flat, cast(Callable[..., object], call)


def _check_state_kept(module: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Refuse a forward that rebinds a parameter or buffer (`self.buf = ...`): the compiled module would keep the
    old tensor, where eager's module holds the new one after the call."""
    for name, tensor in state.items():
        owner, _, attr = name.rpartition(".")
        if getattr(module.get_submodule(owner), attr) is not tensor:
            raise UnsupportedError(
                f"self.{name}: the forward assigns a new tensor to this parameter or buffer; rebinding module state "
                f"in a compiled forward is not supported. Update it in place instead (self.{name}.copy_(...))"
            )


def _leaf_paths(tree: tuple[dict[str, torch.Tensor], tuple[object, ...], dict[str, object]]) -> list[str]:
    keyed, _ = pytree.tree_flatten_with_path(tree)
    out: list[str] = []
    for key_path, _value in keyed:
        head, *rest = key_path
        root = ("self", "args", "kwargs")[cast(pytree.SequenceKey[object], head).idx]
        if root == "self":
            # Module state is keyed by qualified name: self.layer.weight reads better than self['layer.weight'].
            name = cast(pytree.MappingKey[str, object], rest[0]).key
            out.append(f"self.{name}" + pytree.keystr(tuple(rest[1:])))
        else:
            out.append(root + pytree.keystr(tuple(rest)))
    return out


def unflatten_call(
    flat: FlatInputs, values: list[object]
) -> tuple[dict[str, torch.Tensor], tuple[object, ...], dict[str, object]]:
    """Rebuild (state, args, kwargs) from leaf values in InputIndex order."""
    state, args, kwargs = pytree.tree_unflatten(values, flat.spec)
    return (
        cast(dict[str, torch.Tensor], state),
        cast(tuple[object, ...], args),
        cast(dict[str, object], kwargs),
    )
