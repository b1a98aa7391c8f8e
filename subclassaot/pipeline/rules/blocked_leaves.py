"""Stage `analyze` (training) and the runtime's output rebuild: input leaves whose gradient eager never
accumulates because a raising node of an output set_() under grad stands between them and the loss.

Input: an output set_() under grad and the functional run's user tensors (analyze); the holder the runtime rebuilds
that output from and the real inputs (runtime). Output: which inputs are behind the output's raising node
(`inputs_behind_raising_nodes`) and the refusal of the rest (`check_set_under_grad`); runtime/output_steps.py's
`blocking_holder` makes a holder whose history reaches those inputs. Invariants: the analysis only reads autograd
graphs; the runtime's node never runs its backward (the set_ node in front of it raises first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.schemas import FlatInputs, OutputInfo, OutputKind

__all__ = ["check_set_under_grad", "inputs_behind_raising_nodes"]


def inputs_behind_raising_nodes(value: torch.Tensor, user_tensors: Sequence[torch.Tensor]) -> frozenset[int]:
    """Positions in `user_tensors` of the inputs whose node (an input's grad_fn, or a leaf's AccumulateGrad) the
    history of `value` reaches through a NotImplemented node (Note [Outputs set_() Under Grad])."""
    nodes: dict[int, int] = {}
    for k, u in enumerate(user_tensors):
        fn = _grad_fn_or_none(u)
        if fn is not None:
            nodes[id(fn)] = k
    found: set[int] = set()
    seen: set[tuple[int, bool]] = set()
    stack: list[tuple[Any, bool]] = [(_grad_fn_or_none(value), False)]
    while stack:
        node, behind = stack.pop()
        if node is None or (id(node), behind) in seen:
            continue
        seen.add((id(node), behind))
        if behind and id(node) in nodes:
            found.add(nodes[id(node)])
        variable = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        if behind and variable is not None:
            found.update(k for k, u in enumerate(user_tensors) if u is variable)
        behind = behind or type(node).__name__ == "NotImplemented"
        stack.extend((child, behind) for child, _ in node.next_functions)
    return frozenset(found)


def _grad_fn_or_none(t: torch.Tensor) -> Any:
    try:
        return t.grad_fn
    except (RuntimeError, ValueError, IndexError):  # see analyze._needs_program_autograd
        return None


def check_set_under_grad(infos: Sequence[OutputInfo], flat: FlatInputs) -> None:
    """Note [Outputs set_() Under Grad]: an autograd leaf input returned beside a set_() output is refused
    unless eager's set_ node of each such output stands between it and the loss."""
    grad_set = [info for info in infos if info.set_under_grad]
    for info in infos if grad_set else ():
        index = info.input_index if info.kind is OutputKind.IS_INPUT else None
        real = None if index is None else flat.values[index]
        if index is None or not isinstance(real, torch.Tensor) or not real.requires_grad or not real.is_leaf:
            continue
        if all(index in s.set_blocks and not _holder_shared(s) for s in grad_set):
            continue
        raise UnsupportedError(
            f"{grad_set[0].path}: the program set_() this tensor with grad enabled, so its backward raises in eager, "
            f"and {info.path} is {flat.leaves[index].path}, an autograd leaf that requires grad: whether eager "
            "accumulates its gradient before the backward raises depends on the order autograd runs its nodes (Note "
            "[Outputs set_() Under Grad]). Call set_() under torch.no_grad(), or return a clone"
        )


def _holder_shared(info: OutputInfo) -> bool:
    return info.grad_set_base is not None and info.grad_set_base.same_object
