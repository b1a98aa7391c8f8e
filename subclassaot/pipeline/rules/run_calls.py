"""Single calls of the program's run that the swap record's modes handle specially: in-place foreach ops (run
tensor by tensor) and reads of tensors that require grad (set_() of a wrapper subclass onto a plain tensor, once
refused here, is Note [Wrapper Storage]).

Input: one torch function or aten op call of the program, as the modes see it. Output: a per-tensor method or a
flag. Invariants: pure reads of the call's arguments.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["per_tensor_method", "reads_grad"]


def per_tensor_method(func: Any) -> Any:
    name = getattr(func, "__name__", "")
    if not (name.startswith("_foreach_") and name.endswith("_")):
        return None
    return getattr(torch.Tensor, name[len("_foreach_") :], None)


def reads_grad(tree: object) -> bool:
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(tree))
