"""Fuzz regressions of helper c7422: an input written only through another input set_() (or `.data =`-assigned) to
its storage (fuzz seed 44000 #7422, crashed). Eager's write leaves the input's autograd history and version counter
as they were; the epilogue recorded its copy_ with autograd, which raises on a view made by an op that returns
several views (unbind, split), and gave other non-leaf inputs a grad_fn eager's has not. Now the copy_ runs below
autograd and the version is put back at once (Note [Writes Through A set_() Alias])."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _set_then_write(x0: T, x1: T, x2: T) -> object:
    # seed 44000 #7422, shrunk: x1 and x2 are one tensor, set_() onto the unbind() view x0's storage, then written
    t0 = x0.contiguous()
    set_to(x2, t0)
    x1.add_(-1.0)
    return ()


def _set_then_scale_return(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0.contiguous())
    x1.mul_(2.0)
    return (x0, x1 * 1)


def _assign_data_then_scale_return(x0: T, x1: T, x2: T) -> object:
    x2.data = x0.contiguous()
    x1.mul_(2.0)
    return (x0,)


def _seed_44000_7422() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn(())
        b0.requires_grad_()
        b0 = b0.clone()
        b1 = torch.randn(())
        return (b0.unsqueeze(-1).unbind(0)[0], b1, b1)


def _views(view: Callable[[T], T], make_base: Callable[..., T], grad_b1: bool) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = make_base(3) if grad_b1 else torch.randn(3)
            return (view(make_base(2, 3)), b1, b1)

    return make_inputs


def _unbind(b: T) -> T:
    return b.unbind(0)[1]


def _split(b: T) -> T:
    return torch.split(b, 1)[1].squeeze(0)


def _chunk(b: T) -> T:
    return b.chunk(2)[0].squeeze(0)


def _select(b: T) -> T:
    return b.select(0, 1)


def test_set_onto_unbind_input_then_write(compile_fn: CompileFn | None) -> None:
    check_with_grad(_set_then_write, _seed_44000_7422, compile_fn)
    check_no_grad(_set_then_write, _seed_44000_7422, compile_fn)


@pytest.mark.parametrize("view", [_unbind, _split, _chunk, _select])
@pytest.mark.parametrize("grad_b1", [False, True])
@pytest.mark.parametrize("f", [_set_then_scale_return, _assign_data_then_scale_return])
def test_write_through_alias_of_view_input(
    compile_fn: CompileFn | None, view: Callable[[T], T], grad_b1: bool, f: Callable[..., object]
) -> None:
    if not (grad_b1 and f is _assign_data_then_scale_return):  # refused by Note [Stale View Functions]
        check_with_grad(f, _views(view, nonleaf, grad_b1), compile_fn)
    check_no_grad(f, _views(view, nonleaf, grad_b1), compile_fn)


def test_write_through_alias_of_pair_unbind_input(compile_fn: CompileFn | None) -> None:
    # the same at the wrapper level: a PairTensor unbind() view written through another PairTensor set_() onto it
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = pair_nonleaf(3)
            return (pair_nonleaf(2, 3).unbind(0)[0], b1, b1)

    def make_plain_b1() -> tuple[object, ...]:
        b1 = pair(3)
        return (pair(2, 3).unbind(0)[0], b1, b1)

    check_with_grad(_set_then_scale_return, make_inputs, compile_fn)
    check_no_grad(_set_then_scale_return, make_inputs, compile_fn)
    check_no_grad(_set_then_scale_return, make_plain_b1, compile_fn)


def test_write_through_alias_of_aliased_unbind_inputs(compile_fn: CompileFn | None) -> None:
    # x0 and y overlap (one alias group, written through a synthetic base): its copy_ is below autograd too
    def f(x0: T, y: T, x1: T, x2: T) -> object:
        set_to(x2, x0.contiguous())
        x1.mul_(2.0)
        return (x0, y)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0, b1 = nonleaf(2, 3), torch.randn(3)
            return (b0.unbind(0)[0], b0[0], b1, b1)

    check_with_grad(f, make_inputs, compile_fn)
    check_no_grad(f, make_inputs, compile_fn)


def test_write_through_alias_keeps_eager_history(compile_fn: CompileFn | None) -> None:
    # the oracle compares only whether an input has a grad_fn: here, that it is eager's own (the view op's node)
    if compile_fn is not None:
        pytest.skip(
            "calls subclassaot.compile itself: another compile_fn (--identity-compile) has no pipeline history to check"
        )
    with torch.enable_grad():
        for view, node in ((_select, "SelectBackward0"), (_unbind, "UnbindBackward0")):
            x0, x1, x2 = (cast(T, x) for x in _views(view, nonleaf, False)())
            before = x0._version
            subclassaot.compile(_set_then_scale_return)(x0, x1, x2)
            assert type(x0.grad_fn).__name__ == node
            assert x0._version == before
