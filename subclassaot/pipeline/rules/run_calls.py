"""Single calls of the program's run that the swap record's modes handle specially: in-place foreach ops (run
tensor by tensor) and reads of tensors that require grad (set_() of a wrapper subclass onto a plain tensor, once
refused here, is Note [Wrappers set_() To A Plain Tensor]).

Input: one torch function or aten op call of the program, as the modes see it. Output: a per-tensor method or a
flag. Invariants: pure reads of the call's arguments.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["per_tensor_method", "reads_grad"]


# Note [In-Place Foreach Ops Run Tensor By Tensor]
# `torch._foreach_mul_([a, b], [2, 3])` writes every tensor of its first list argument. Functionalization and the
# run's records (version counters, writes through subclass wrappers) follow a write through a Tensor argument, not
# through a list: traced as one op, a written input kept its old version counter and a PairTensor input its old
# values (test_fw_bw_mutation_no_functionalization1). The program's run therefore calls the per-tensor in-place
# method (`Tensor.mul_`) on each tensor in turn, list arguments indexed alongside, others passed to every call; that
# is eager's own order on CPU (the slow path loops the same way, a later tensor reading an earlier one's write). An
# out-of-place `_foreach_mul` writes nothing and runs as it is. Eager's foreach op on a wrapper subclass writes its
# inner tensors but leaves the wrapper's own version counter where it was; so does the run.


def per_tensor_method(func: Any) -> Any:
    name = getattr(func, "__name__", "")
    if not (name.startswith("_foreach_") and name.endswith("_")):
        return None
    return getattr(torch.Tensor, name[len("_foreach_") :], None)


def reads_grad(tree: object) -> bool:
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(tree))
