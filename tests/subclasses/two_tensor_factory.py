"""Input kinds for `python -m subclassaot fuzz --subclass tests.subclasses.two_tensor_factory:two_tensor`: PyTorch's
own TwoTensor (torch.testing._internal.two_tensor), a subclass we did not write, drawn in any shape.

TwoTensor has no `from_tensor`, so the factory carries one (`two_tensor.from_tensor`, read by the fuzzer's
`kind_from_factory`): `b` is an affine image of `a`, so that a program mixing up the two sides is seen.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.testing._internal.two_tensor import TwoTensor

# torch's test subclasses are untyped: constructed through a typed callable
_two: Callable[[torch.Tensor, torch.Tensor], TwoTensor] = TwoTensor


def two_tensor() -> TwoTensor:
    """A (3, 4) float32 TwoTensor with `a != b`."""
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return _two(a, -2.0 * a + 1.0)


def two_tensor_from_tensor(t: torch.Tensor) -> TwoTensor:
    """A TwoTensor of `t` and `-2 t + 1` (same strides, no shared storage)."""
    b = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(-2.0 * t + 1.0)
    return _two(t.detach(), b.detach())


two_tensor.from_tensor = two_tensor_from_tensor  # type: ignore[attr-defined]  # read by kind_from_factory
