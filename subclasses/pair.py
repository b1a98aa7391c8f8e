"""`PairTensor`: the smallest useful WrapperTensor, two inner tensors `a` and `b` that every op runs on.

Purpose: the sample subclass the pipeline and its tests trace (views, in-place ops, set_, resize_, symbolic sizes).
Every op is applied to `a` and to `b` (plain tensor arguments go to both sides unchanged); tensor results become
PairTensors of the two results, other results (`.item()`, `is_same_size`) come from `a`'s side.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from subclassaot.authoring.wrapper_tensor import WrapperTensor


class PairTensor(WrapperTensor):
    """Two tensors of the outer shape; see the module docstring. Build with `PairTensor(a, b)`."""

    inner_names: ClassVar[tuple[str, ...]] = ("a", "b")
    apply_to_inner_by_default: ClassVar[bool] = True
    a: torch.Tensor
    b: torch.Tensor

    @classmethod
    def from_tensor(cls, t: torch.Tensor, *, requires_grad: bool = False) -> PairTensor:
        """A pair of `t` and an independent copy of `t` (same strides, no shared storage)."""
        b = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t)
        return cls(t.detach(), b.detach(), requires_grad=requires_grad)


def example() -> PairTensor:
    """A small PairTensor with `a != b`: shape (3, 4), float32."""
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return PairTensor(a, -2.0 * a + 1.0)


def nested_example() -> PairTensor:
    """A PairTensor whose `a` and `b` are PairTensors themselves (shape (3, 4))."""
    x = example()
    return PairTensor(x, PairTensor(x.a * 3.0, x.b * 3.0))
