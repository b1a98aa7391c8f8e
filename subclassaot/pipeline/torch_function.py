"""Stage `analyze` (torch-function subclasses): a compile-time eager trial run when an input is a tensor subclass
with only a __torch_function__ override (no __tensor_flatten__), which the pipeline traces as a plain tensor.

Input: the call and its `FlatInputs`. Output: `TorchFunctionTrial` (eager's output types, and what the compiled
entry must reproduce on identical clones), or None when no input is such a subclass.
Invariants: the trial runs on clones of the inputs under a forked RNG: the real inputs and the generator are untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.inputs import unflatten_call
from subclassaot.schemas import FlatInputs


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchFunctionTrial:
    """A compile-time eager run of a program with torch-function subclass inputs (Note [Ambient
    Modes])."""

    output_types: tuple[type[torch.Tensor] | None, ...]  # per OutputIndex: eager's subclass type, None if plain
    subclass_input: str  # the path of the first torch-function subclass input (for messages)
    trial_values: tuple[object, ...]  # flat input values (fresh clones) for the compiled entry's trial call
    eager_outputs: tuple[object, ...]  # eager's output leaves on identical clones
    rng_state: torch.Tensor  # the CPU RNG state both runs start from


def torch_function_trial(call: Callable[..., object], flat: FlatInputs) -> TorchFunctionTrial | None:
    """Run the program eagerly on clones if an input is a torch-function subclass; None otherwise."""
    tensors = [cast(torch.Tensor, flat.values[i]) for i in flat.tensor_indices]
    first = next((i for i, t in zip(flat.tensor_indices, tensors, strict=True) if _has_torch_function(t)), None)
    if first is None:
        return None
    eager_values, trial_values = list(flat.values), list(flat.values)
    for i, t in zip(flat.tensor_indices, tensors, strict=True):
        eager_values[i], trial_values[i] = _detached_clone(t), _detached_clone(t)
    state, args, kwargs = unflatten_call(flat, eager_values)
    rng_state = torch.get_rng_state()
    try:
        with torch.random.fork_rng(devices=[]):
            out = call(state, args, kwargs)
    except Exception as e:
        raise UnsupportedError(
            f"{flat.leaves[first].path} is a torch-function subclass ({type(flat.values[first]).__name__}): the "
            f"types of the program's outputs are found by running it once on clones of the inputs, and that run "
            f"raised {e!r}"
        ) from e
    leaves = pytree.tree_leaves(out)
    return TorchFunctionTrial(
        output_types=tuple(
            type(leaf) if isinstance(leaf, torch.Tensor) and _has_torch_function(leaf) else None for leaf in leaves
        ),
        subclass_input=flat.leaves[first].path,
        trial_values=tuple(trial_values),
        eager_outputs=tuple(leaves),
        rng_state=rng_state,
    )


def check_trial(trial: TorchFunctionTrial, run: Callable[[Sequence[object]], object]) -> None:
    """Run the compiled entry on the trial inputs (`run`) and refuse it unless it gives eager's outputs."""
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(trial.rng_state)
        ours = pytree.tree_leaves(run(trial.trial_values))
    same = len(ours) == len(trial.eager_outputs) and all(
        _same_value(a, b) for a, b in zip(ours, trial.eager_outputs, strict=True)
    )
    if not same:
        raise UnsupportedError(
            f"{trial.subclass_input}: its class's __torch_function__ changes what the program computes (a trial "
            "run of the compiled program on clones of the inputs differs from eager). The pipeline traces the "
            "plain ops under a torch-function subclass; make it a traceable wrapper subclass (__tensor_flatten__ / "
            "__torch_dispatch__) or call the function uncompiled"
        )


def _same_value(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return True
    return a.shape == b.shape and bool(torch.allclose(a.detach(), b.detach(), equal_nan=True))


def _has_torch_function(t: torch.Tensor) -> bool:
    """A Python tensor subclass with a live __torch_function__ that the pipeline traces as a plain tensor."""
    if type(t) in (torch.Tensor, torch.nn.Parameter) or is_traceable_subclass(t):
        return False
    impl = getattr(type(t).__torch_function__, "__func__", type(t).__torch_function__)
    return impl is not torch._C._disabled_torch_function_impl


def _detached_clone(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` of the same class (a torch-function subclass via _make_subclass: not a view), same
    requires_grad, a non-leaf where `t` is one."""
    with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
        c = t.detach().clone()
    if type(c) is not type(t) and _has_torch_function(t):
        c = torch.Tensor._make_subclass(type(t), c)
    if t.requires_grad and t.is_leaf:
        c.requires_grad_(True)
    elif t.requires_grad:
        with torch.enable_grad():
            c = c.requires_grad_(True).clone()
    return c
