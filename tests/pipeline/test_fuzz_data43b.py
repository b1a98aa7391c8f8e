"""Fuzz regressions (helper data43b, dev seed 43000): `.data =` with expanded or transposed values.

Newly supported programs get a parity test; the refusals get a test naming the rule. With `--identity-compile`
(eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, nonleaf, pair, refused_with_grad

T = torch.Tensor

# ---------------------------------------------------------------------------------------------------------------
# A view of an intermediate subclass whose wrapper a later `.data =` changed: eager's `._base` is that wrapper, with
# the assigned metadata (Note [Views Of A Root Whose .data Was Assigned])


def _unbind_then_transposed(x0: T) -> object:
    # fuzz seed 43000 #3871 (shrunk): output[0]._base had shape (4, 1, 4) where eager's has (4, 4, 1)
    t0 = x0.unsqueeze(1)
    t1 = t0.add(t0)
    t2 = t1.unbind(1)[0]
    t3 = t1.transpose(2, 1)
    t1.data = t3
    return (t2,)


def _select_then_flattened(x0: T) -> object:
    t1 = x0.add(x0)
    t2 = t1[0]
    t1.data = t1.reshape(-1)
    return (t2,)


def _select_then_transposed(x0: T) -> object:
    t1 = x0.add(x0)
    t2 = t1[0]
    t1.data = t1.t()
    return (t2,)


def test_view_base_takes_the_assigned_metadata(compile_fn: CompileFn | None) -> None:
    check_no_grad(_unbind_then_transposed, lambda: (pair(4, 4),), compile_fn)


def test_view_base_takes_the_assigned_metadata_with_grad_mode_on(compile_fn: CompileFn | None) -> None:
    check_with_grad(_unbind_then_transposed, lambda: (pair(4, 4),), compile_fn)


def test_view_base_takes_a_flattened_assignment(compile_fn: CompileFn | None) -> None:
    check_no_grad(_select_then_flattened, lambda: (pair(4, 4),), compile_fn)
    check_no_grad(_select_then_flattened, lambda: (pair(4, 4, requires_grad=True),), compile_fn)


def test_view_base_takes_a_transposed_assignment_in_training(compile_fn: CompileFn | None) -> None:
    # same size, other strides: the subclass view replays from the root as it was viewed, exact
    check_with_grad(_select_then_transposed, lambda: (pair(4, 4, requires_grad=True),), compile_fn)


def test_plain_views_before_an_assignment_still_match(compile_fn: CompileFn | None) -> None:
    check_no_grad(_unbind_then_transposed, lambda: (torch.randn(4, 4),), compile_fn)
    check_no_grad(_select_then_transposed, lambda: (torch.randn(4, 4),), compile_fn)


def test_subclass_view_with_history_before_a_resizing_assignment_is_refused(compile_fn: CompileFn | None) -> None:
    # #3871 in training: the compiled backward raised "invalid gradient ... got [4, 4, 1]" where eager's ran
    # (Note [Views Of A Root Whose .data Was Assigned])
    for f in (_unbind_then_transposed, _select_then_flattened):
        refused_with_grad(
            f, lambda: (pair(4, 4, requires_grad=True),), compile_fn, "whose `.data` the program then assigned a tensor"
        )


def test_plain_view_with_history_before_a_transposing_assignment_is_refused(compile_fn: CompileFn | None) -> None:
    # same size, other strides: the regenerated view read the gradient in the new layout (args[0].grad values
    # differed from eager's)
    refused_with_grad(
        _select_then_transposed, lambda: (leaf(4, 4),), compile_fn, "taken before the program assigned its `.data`"
    )


# ---------------------------------------------------------------------------------------------------------------
# A leaf's gradient accumulator through `.data =` (Note [Accumulators Kept Through .data =])


def _expand_assigned_then_expanded(x0: T, x1: T) -> object:
    # fuzz seed 43000 #5247 (shrunk): args[0].grad had shape (2, 2) where eager's has (2,): t0's node keeps the
    # accumulator made at x0's old size, and the engine sums the gradient of the later expand down to it
    t0 = x1.expand((2, -1))
    x0.data = t0
    t1 = x0.expand((2, 2))
    return (t1,)


def test_kept_accumulator_of_a_subclass_leaf_passed_twice(compile_fn: CompileFn | None) -> None:
    def make() -> tuple[T, T]:
        b0 = pair(2, requires_grad=True)
        return (b0, b0)

    check_with_grad(_expand_assigned_then_expanded, make, compile_fn)


def test_kept_accumulator_of_one_leaf(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return _expand_assigned_then_expanded(x0, x0)

    check_with_grad(f, lambda: (leaf(2),), compile_fn)
    check_with_grad(f, lambda: (pair(2, requires_grad=True),), compile_fn)


def _read_assigned_then_viewed(view: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(2.0)  # held until the views are made, as a program's local is
        x0.data = x1
        out = x0.expand((2, 2)) if view == "expand" else x0.t()
        del t0
        return (out,)

    return f


def test_kept_accumulator_for_views_replayed_after_the_epilogue(compile_fn: CompileFn | None) -> None:
    # an earlier read with grad keeps the accumulator; eager's views after the assignment feed it (the gradient summed
    # to the old size): the compiled replays did not (values differed; a PairTensor's backward raised)
    for view in ("expand", "t"):
        f = _read_assigned_then_viewed(view)
        check_with_grad(f, lambda: (leaf(2), torch.randn(2, 2)), compile_fn)
        check_with_grad(f, lambda: (pair(2, requires_grad=True), pair(2, 2)), compile_fn)


def test_no_earlier_read_makes_a_new_accumulator_for_replayed_views(compile_fn: CompileFn | None) -> None:
    # no read with grad before: eager's accumulator is made at the first read after, in the new size
    def f(x0: T, x1: T) -> object:
        t0 = x0.detach().mul(2.0)
        x0.data = x1
        return (x0.expand((2, 2)), t0)

    check_with_grad(f, lambda: (leaf(2), torch.randn(2, 2)), compile_fn)
    check_with_grad(f, lambda: (pair(2, requires_grad=True), pair(2, 2)), compile_fn)


def test_plain_leaf_computed_from_after_an_assignment_of_another_size_is_refused(compile_fn: CompileFn | None) -> None:
    # no read with grad before: eager's gradient of x0.mul(2) is in the new size, the compiled one was summed to the
    # old one and came back doubled (args[0].grad values differed)
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.mul(2.0),)

    def g(x0: T, x1: T) -> object:
        x0.data = x1
        t0 = x0.t()
        return (t0.sin(),)

    for fn in (f, g):
        refused_with_grad(fn, lambda: (leaf(2), nonleaf(2, 2)), compile_fn, "or assigned one by `.data =`")


def test_subclass_leaf_computed_from_after_an_assignment_of_another_size(compile_fn: CompileFn | None) -> None:
    # a wrapper keeps its inner tensors through `.data =`: the compiled gradient matches eager's
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.mul(2.0),)

    check_with_grad(f, lambda: (pair(2, requires_grad=True), pair(2, 2)), compile_fn)


def test_computed_from_after_an_assignment_of_the_same_size(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        return (x0.mul(2.0),)

    check_with_grad(f, lambda: (leaf(2, 2), nonleaf(2, 2)), compile_fn)


@pytest.mark.xfail(
    strict=True,
    reason="known gap (Note [Accumulators Kept Through .data =]): a read with grad whose result is dropped still counts "
    "as keeping the leaf's accumulator, where eager's dies with the temporary",
)
def test_read_into_a_temporary_before_the_assignment(compile_fn: CompileFn | None) -> None:
    # eager's accumulator dies with the temporary expand(); the functional run keeps every result, so the compiled
    # replay feeds the accumulator of the old size (args[0].grad shape (2,) where eager's is (2, 2))
    def f(x0: T) -> object:
        x0.data = x0.expand((2, -1))
        return (x0.expand((2, 2)),)

    check_with_grad(f, lambda: (leaf(2),), compile_fn)
