"""Fuzz follow-ups (seed 45000): reads of an input after a write through its view, whose functional value was
regenerated with other strides in size-1 dims, give eager's strides (Note [Eager's Layouts Under Functionalization])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _transposed(make: Callable[..., T]) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        return (make(1, 4, 1).transpose(2, 1),)  # shape (1, 1, 4), strides (4, 1, 1)

    return make_inputs


def test_read_after_write_through_view_keeps_eager_strides(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #3943 (shrunk): x0 regenerated as `mul(...).view(1, 1, 4)` has strides (4, 4, 1): our add
    # gave (4, 4, 1), eager's (4, 1, 1)
    def f(x0: T) -> object:
        t0 = x0.view((2, 2, 1))
        t0.mul_(-1.0)
        t1 = x0.add(3.0)
        return (t1,)

    check_no_grad(f, _transposed(lambda *s: torch.randn(s)), compile_fn)


_READS: dict[str, Callable[[T], T]] = {
    "clone": lambda x: x.clone(),
    "mul_self": lambda x: x.mul(x),
    "cat": lambda x: torch.cat([x, x], 0),
    "transpose_add": lambda x: x.transpose(1, 2).add(1.0),  # a view of the drifted tensor, then a read
    "unsqueeze_mul": lambda x: x.unsqueeze(0).mul(2.0),
    "view_out": lambda x: x.transpose(0, 1),
}


def _written_then(read: Callable[[T], T]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.view(-1)
        t0.mul_(-1.0)
        return (read(x0), x0)

    return f


@pytest.mark.parametrize("read", sorted(_READS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_reads_and_views_after_write_no_grad(compile_fn: CompileFn | None, read: str, kind: str) -> None:
    make = (lambda *s: torch.randn(s)) if kind == "plain" else pair
    check_no_grad(_written_then(_READS[read]), _transposed(make), compile_fn)


@pytest.mark.parametrize("read", sorted(_READS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_reads_and_views_after_write_with_grad(compile_fn: CompileFn | None, read: str, kind: str) -> None:
    check_with_grad(_written_then(_READS[read]), _transposed(nonleaf if kind == "plain" else pair_nonleaf), compile_fn)


@pytest.mark.parametrize("read", sorted(_READS))
def test_other_size1_layout(compile_fn: CompileFn | None, read: str) -> None:
    # (1, 2, 3) with strides (3, 3, 1): regenerated from the flat view as (6, 3, 1)
    check_no_grad(_written_then(_READS[read]), lambda: (torch.randn(2, 1, 3).transpose(0, 1),), compile_fn)
