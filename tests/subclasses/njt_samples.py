"""Factories of torch's jagged NestedTensor for the checker (`python -m subclassaot check tests.subclasses.njt_samples:
example`) and for tests: fresh instances built as users build them."""

from __future__ import annotations

import torch

D = 4


def example() -> torch.Tensor:
    """Three rows of lengths 2, 3 and 2 with D features (`torch.nested.nested_tensor`, so min/max seqlen are set)."""
    gen = torch.Generator().manual_seed(0)
    rows = [torch.randn(n, D, generator=gen) for n in (2, 3, 2)]
    return torch.nested.nested_tensor(rows, layout=torch.jagged)


def example_from_values() -> torch.Tensor:
    """An NJT over a values buffer and offsets (`nested_tensor_from_jagged`): no min/max seqlen tensors."""
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(7, D, generator=gen)
    return torch.nested.nested_tensor_from_jagged(values, torch.tensor([0, 2, 5, 7]))
