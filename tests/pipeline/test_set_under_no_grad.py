"""set_() under no_grad (and `x.set_(x)`) of inputs, intermediates and their views, then read, written or returned
with grad: the refusals that name Note [Stale View Functions] and the layouts, histories and accumulators that match
eager's (Note [Inputs Written In Training], Note [Wrapper Storage]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
    DirtyAddSaved,
    SinFunction,
    ViewAsAndRowOfOwnTensor,
    assert_refused,
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
    twice,
)

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups: set_() under no_grad of tensors with autograd history, and metadata parity after set_() and
# in-place view ops (fuzz seeds 6000 and 7000).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor

_VIEW_AFTER_SET_RULE = "a view of a tensor the program computed with grad and set_\\(\\) under no_grad before taking"


def test_view_of_intermediate_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #9637: eager's output keeps its expand's history (AsStridedBackward0 reaching args[0]) over
    # args[1]'s storage; ours was a view of args[1] without grad (refused, then supported: Note [Outputs Over Another
    # Storage])
    def f(x0: T, x1: T) -> object:
        t1 = x0.clone().expand((3, 1, 2))
        with torch.no_grad():
            set_to(t1, x1)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 2), requires_grad=True)
        return (b0[:, 2:4:2], torch.randn((2, 4)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_clone_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #8850: the same through view(); eager's `_base` is the clone, ours was args[0]
    def f(x0: T, x1: T) -> object:
        t1 = x1.clone().view((3, 1, -1))
        with torch.no_grad():
            set_to(t1, x0)
        return (t1,)

    with torch.enable_grad():
        assert_matches_eager(
            f, lambda: (torch.randn((4, 2, 3)), torch.randn((3, 1), requires_grad=True)), compile_fn=compile_fn
        )


def test_view_taken_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #501: eager's view has ViewBackward0 over MulBackward0 of the old size (its backward raises);
    # ours was a leaf without grad
    def f(x0: T) -> object:
        t2 = x0.expand((6,)).mul(0.5)
        with torch.no_grad():
            set_to(t2, x0[1:1:2])
        return (t2.view((0,)),)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(2, 3).view((6,)),), compile_fn, _VIEW_AFTER_SET_RULE)


def test_subclass_view_taken_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t = x0 * 2
        with torch.no_grad():
            set_to(t, x1)
        return (t.view(-1),)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(4), pair(4)), compile_fn, _VIEW_AFTER_SET_RULE)


def test_subclass_view_of_input_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # Views of inputs are rebuilt with their own history: not refused
    def f(x0: T, x1: T) -> object:
        t = x0.view(-1)
        with torch.no_grad():
            set_to(t, x1)
        return (t,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(4), pair(4)), compile_fn=compile_fn)


def test_view_of_set_intermediate_used_by_the_graph(compile_fn: CompileFn | None) -> None:
    # A value computed from such a view is the graph's own: exact
    def f(x0: T, x1: T) -> object:
        t = x0 * 2
        with torch.no_grad():
            set_to(t, x1)
        return (t.view(-1) * 2,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4), torch.randn(4)), compile_fn=compile_fn)


def _set_then_fill(x0: T, x1: T) -> object:
    with torch.no_grad():
        set_to(x1, x0)
    x1.fill_(2.0)
    return (x1,)


def _inference_set_then_mul(x0: T, x1: T) -> object:
    with torch.inference_mode():
        x1.set_(x0)  # type: ignore[call-overload]  # the stubs list only storage overloads
    x1.mul_(0.5)
    return ()


def _set_then_dirty_add(x0: T, x1: T) -> object:
    with torch.no_grad():
        set_to(x1, x0)
    DirtyAddSaved.apply(x1, x1)  # type: ignore[no-untyped-call]  # untyped in torch
    return (x1,)


def _set_then_write_through_view(x0: T, x1: T) -> object:
    with torch.no_grad():
        set_to(x1, x0)
    x1[0].mul_(2.0)
    return (x1 * x0,)


_WRITES_AFTER_SET_ONTO_INPUT: list[tuple[Callable[..., object], tuple[int, ...], tuple[int, ...]]] = [
    (_set_then_fill, (3, 4), (4,)),
    (_inference_set_then_mul, (), ()),
    (_set_then_dirty_add, (), ()),
    (_set_then_dirty_add, (2, 3), (3,)),
    (_set_then_write_through_view, (2, 3), (2, 3)),
]


def _onto_and_nonleaf(onto: tuple[int, ...], shape: tuple[int, ...]) -> Callable[[], tuple[object, ...]]:
    return lambda: (torch.randn(onto), nonleaf(*shape))


@pytest.mark.parametrize("dynamic", [False, True])
def test_write_with_grad_after_no_grad_set_onto_input(compile_fn: CompileFn | None, dynamic: bool) -> None:
    # fuzz seed 7000 #29 (fill), seed 121008 #8577 (inference_mode), #8437 (a mark_dirty Function): a plain input
    # that requires grad, set_() under no_grad (or inference_mode) onto another input's storage, then written with
    # grad. Eager records the write on the history the input came with (a gradient summed back to its size at entry)
    # and the set_() bumps its counter. Before, refused ("set_() it under no_grad to another input's storage and then
    # wrote it with grad enabled"); it takes the `.data =` path now (Note [History Kept Through .data =]), and
    # dynamic=True sums the gradient back where the two inputs' sizes agree (a zero gradient before, with `.data =`
    # too)
    for f, onto, shape in _WRITES_AFTER_SET_ONTO_INPUT:
        with torch.enable_grad():
            assert_matches_eager(
                f,
                _onto_and_nonleaf(onto, shape),
                compile_fn=compile_fn,
                compile_kwargs={"dynamic": dynamic},
            )


@pytest.mark.parametrize("returned", [True, False])
def test_write_with_grad_after_no_grad_set_onto_intermediate_is_refused(
    compile_fn: CompileFn | None, returned: bool
) -> None:
    # the same onto a tensor the program computed: eager's x1 ends with MulBackward0 over its history from before (a
    # gradient of 2 to the leaf behind it); ours kept that history alone (1), returned or not
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 3
        with torch.no_grad():
            set_to(x1, t0)
        x1.mul_(2.0)
        return (x1,) if returned else ()

    refused_with_grad(
        f,
        lambda: (torch.randn(3), nonleaf(3)),
        compile_fn,
        "set_\\(\\) it under no_grad to a tensor the program computed and then wrote it with grad enabled",
    )


def _view_then_base(view: Callable[[T], T]) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((2, 4, 2)).requires_grad_().clone()
            return (view(b0), b0)

    return make


def test_write_with_grad_after_no_grad_set_of_an_overlapping_view_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 28000 #5131 (argument changes): args[0] a zero-stride as_strided view of args[1], set_() under no_grad
    # to an intermediate, then filled with grad: eager's fill is recorded on the base through the view's new layout;
    # our backward wrote the base's gradient through the overlapping one and raised ("more than one element of the
    # written-to tensor refers to a single memory location") where eager's ran. A view without overlap is refused too:
    # eager's history of args[0] after the call is regenerated from its base's CopySlices, which records the write at
    # the view's new offset (element [0, 0, 0], not [0, 0, 1]); the compiled one did not (backward through the written
    # inputs: wrong leaf gradients, for fill_ and for mul_ alike)
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(0.5)
        with torch.no_grad():
            x0.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        x0.fill_(-1.0)
        return (x0 * 2,)

    def g(x0: T, x1: T) -> object:
        t0 = x0.mul(0.5)
        with torch.no_grad():
            x0.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        x0.mul_(3.0)
        return (x0 * 2,)

    rule = "is a view that requires grad whose elements overlap"
    select = _view_then_base(lambda b: b.select(0, 0).select(0, 1))
    with torch.enable_grad():
        assert_refused(f, _view_then_base(lambda b: b.as_strided((2,), (0,), 2)), compile_fn, rule)
        assert_refused(f, select, compile_fn, _WRITE_AFTER_SET_ONTO_COMPUTED)
        assert_refused(g, select, compile_fn, _WRITE_AFTER_SET_ONTO_COMPUTED)


_WRITE_AFTER_SET_ONTO_COMPUTED = (
    r"args\[0\] requires grad, and the program set_\(\) it under no_grad to a tensor the program computed and then "
    r"wrote it with grad enabled \(itself or through a view of it\)"
)


def _set_then_write_old_view(x0: T) -> object:
    v = x0.view(-1)
    t0 = x0.mul(2.0)
    with torch.no_grad():
        set_to(x0, t0)
    v.mul_(2.0)
    return (x0 + t0,)


def _set_then_write_new_view(x0: T) -> object:
    t0 = x0.mul(2.0)
    with torch.no_grad():
        set_to(x0, t0)
    x0[0].mul_(2.0)
    return (x0 + t0,)


@pytest.mark.parametrize("f", [_set_then_write_old_view, _set_then_write_new_view])
@pytest.mark.parametrize("make", [nonleaf, pair_nonleaf])
def test_write_through_a_view_after_no_grad_set_is_refused(
    f: Callable[[T], object], make: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    # corpus set__and_data_mutation_bad_train: a write with grad through a view of args[0] (taken before or after its
    # set_() under no_grad onto an intermediate) is recorded by eager on args[0]'s history (CopySlices over the history
    # it came with: a gradient of 2 through it after the call); the compiled args[0] kept its history (1). Under no_grad
    # autograd records nothing, and the program runs.
    with torch.enable_grad():
        assert_refused(f, lambda: (make(3, 3),), compile_fn, _WRITE_AFTER_SET_ONTO_COMPUTED)
    with torch.no_grad():
        assert_matches_eager(f, lambda: (make(3, 3),), compile_fn=compile_fn)


def test_view_input_set_under_no_grad_to_another_size_then_read_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 28000 #8068 (argument changes): args[1] a view of a non-leaf that requires grad, set_() under no_grad
    # to a tensor of another size, then read with grad: eager rebuilds its grad_fn as an as_strided of its base in the
    # new size and its backward runs; ours expected the view's old size ("MulBackward0 returned an invalid gradient
    # ... got [2, 2, 4] but expected shape compatible with [3, 1]"): refused, a gradient reaching a read of a view
    # input set_() to another storage (Note [Stale View Functions]). Returned as itself, with no read, it matches eager.
    def make() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = torch.randn((3, 1)).requires_grad_().clone()
        return (torch.randn(2, 2, 4), b1.transpose(1, 1))

    def read(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        with torch.no_grad():
            x1.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        return (x1 * 2,)

    def returned(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        with torch.no_grad():
            x1.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        return (x1,)

    with torch.enable_grad():
        assert_refused(read, make, compile_fn, "set_\\(\\) under torch.no_grad\\(\\) to a layout over another storage")
        assert_matches_eager(returned, make, compile_fn=compile_fn)


def test_write_through_other_input_after_no_grad_set(compile_fn: CompileFn | None) -> None:
    # The write goes through the set_() source, not the input that requires grad: not refused
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        x0.mul_(2.0)
        return (x1 * 1,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(4), nonleaf(4)), compile_fn=compile_fn)


def test_detach_of_view_taken_before_resize(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #7202: eager's detach() is no view; the as_strided() replay after the resize_() made one
    def f(x0: T) -> object:
        t0 = x0.view((12, 4))
        x0.resize_((4,))
        return (t0.detach(),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn((4, 3, 4)),), compile_fn=compile_fn)


def test_view_of_view_taken_before_resize(compile_fn: CompileFn | None) -> None:
    # The same chain ending in a view stays a view of the input
    def f(x0: T) -> object:
        t0 = x0.view((12, 4))
        x0.resize_((4,))
        return (t0.view(-1),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn((4, 3, 4)),), compile_fn=compile_fn)


_STALE_VIEW_RULE = "a view taken with grad enabled is used with grad after the program changed the layout of the tensor"


def test_view_used_after_transpose_of_its_base_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #6722: the traced backward sent t0's gradient to the transposed elements of the leaf
    def f(x0: T) -> object:
        t0 = x0.view((4, -1, 1))
        x0.transpose_(1, 0)
        return (t0.add(2.0),)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(4, 4),), compile_fn, _STALE_VIEW_RULE + ".*transpose_\\(\\)")


def test_slice_of_intermediate_used_after_its_t_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t = x0 * 2
        v = t[1:]
        t.t_()
        return (v.add(2.0), t)

    with torch.enable_grad():
        assert_refused(f, lambda: (torch.randn(4, 4, requires_grad=True),), compile_fn, _STALE_VIEW_RULE)


def test_view_used_after_in_place_view_op_that_replays_the_same(compile_fn: CompileFn | None) -> None:
    # unsqueeze_() then view((4, -1, 1)) of the new layout is the same view, squeeze_() of a 4x4 changes nothing:
    # the regenerated histories agree, not refused
    def f(x0: T, x1: T) -> object:
        t0 = x0.view((4, -1, 1))
        t1 = x1[1:]
        x0.unsqueeze_(0)
        x1.squeeze_()
        return (t0.add(2.0), t1.mul(3.0))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4, 4), nonleaf(4, 4)), compile_fn=compile_fn)


_SUBCLASS_VIEW_RULE = "is a view with autograd history of a tensor subclass input whose layout the program changed"


def test_subclass_view_between_in_place_view_ops_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #5093: eager's output is a view of args[0] with history (whose backward raises); ours was
    # rebuilt from its inner tensors, without history
    def f(x0: T) -> object:
        x0.transpose_(0, 0)
        t0 = x0.transpose(0, 0)
        x0.unsqueeze_(-1)
        return (t0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(1),), compile_fn, _SUBCLASS_VIEW_RULE)


def test_subclass_view_after_t_then_unsqueeze_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0[0]
        x0.unsqueeze_(0)
        return (t0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(2, 3),), compile_fn, _SUBCLASS_VIEW_RULE)


def test_subclass_view_after_t(compile_fn: CompileFn | None) -> None:
    # A view taken after the only in-place view op is replayed: not refused
    def f(x0: T) -> object:
        x0.t_()
        return (x0[0],)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 3),), compile_fn=compile_fn)


def test_subclass_view_set_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #9543: the first set_() was taken for an in-place step of the view chain, which it cannot
    # replay; eager's output is a view of args[0] (the last set_() overrides the first)
    def f(x0: T) -> object:
        t0 = x0.view((2, 1))
        t1 = t0.clone()
        set_to(t0, t1)
        set_to(t0, t1)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 2),), compile_fn=compile_fn)


def test_subclass_view_set_to_two_tensors(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view((2, 1))
        t1 = t0.clone()
        set_to(t0, t1.t())
        set_to(t0, t1 * 2)
        return (t0, t1)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 2),), compile_fn=compile_fn)


def test_subclass_intermediate_root_takes_its_leaf_strides(compile_fn: CompileFn | None) -> None:
    # fuzz seed 6000 #8603: t0, a root its view t1 replays from, was rebuilt with the fake trace's outer strides
    # (4, 1); eager's add of a (1, 4) tensor with strides (1, 1) keeps them
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0.add(3.0)
        return (t0, t0.diagonal(0, 0, 1))

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(4, 1),), compile_fn=compile_fn)


def test_subclass_intermediate_root_takes_its_leaf_strides_in_training(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.t().add(3.0)
        return (t0, t0.diagonal(0, 0, 1))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(4, 1, requires_grad=True),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper set43): plain views set_() under no_grad and then used with grad (Note [Stale View
# Functions]), dev seed 43000 #4392 and variants.
# ---------------------------------------------------------------------------------------------------------------------

RULE = r"set_\(\) under (torch\.)?no_grad.*\(Note \[Stale View Functions\]\)"


def test_unsqueezed_view_set_to_its_base_then_cloned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #4392: eager rebuilds t0's history by as_strided() of x0 in t0's new layout (2, 2); the trace
    # replayed unsqueeze(0) and its backward raised ("invalid gradient ... expected shape compatible with [1, 2, 2]")
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x0)
        t1 = t0.clone()
        return (t1,)

    check_with_grad(f, lambda: (leaf(2, 2),), compile_fn)


def test_transposed_view_set_to_its_base_same_shape(compile_fn: CompileFn | None) -> None:
    # a square t() set_() to its base: the replayed TBackward sent the gradient to the transposed elements
    def f(x0: T) -> object:
        t0 = x0.t()
        with torch.no_grad():
            set_to(t0, x0)
        return (t0.mul(3.0),)

    check_with_grad(f, lambda: (leaf(2, 2),), compile_fn)


def test_views_set_to_part_of_their_base(compile_fn: CompileFn | None) -> None:
    # set_() to a slice of the base, a select() set_() to the whole base, and a view of the view taken after
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(0)
        t1 = x1[1]
        with torch.no_grad():
            set_to(t0, x0[:, 1:])
            set_to(t1, x1)
        return (t0.clone(), t1.sum(0), t1.view(6).mul(2.0))

    check_with_grad(f, lambda: (leaf(2, 3), leaf(2, 3)), compile_fn)


def test_view_of_an_intermediate_set_to_it(compile_fn: CompileFn | None) -> None:
    # the base is an intermediate, returned too
    def f(x0: T) -> object:
        b = x0.mul(2.0)
        t0 = b.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, b)
        return (t0.mul(2.0), b)

    check_with_grad(f, lambda: (nonleaf(2, 2),), compile_fn)


def test_view_set_twice_read_in_between(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.t()
        with torch.no_grad():
            set_to(t0, x0)
        a = t0.mul(2.0)
        with torch.no_grad():
            set_to(t0, x0[1])
        return (a, t0.mul(3.0))

    check_with_grad(f, lambda: (leaf(2, 3),), compile_fn)


def test_view_set_to_its_base_written_with_grad(compile_fn: CompileFn | None) -> None:
    # in-place writes with grad through the view: autograd rebases its base through eager's as_strided() view
    def f(x0: T, x1: T, x2: T) -> object:
        y = x0.mul(2.0)
        t0 = y.t()
        t1 = x1.t()
        with torch.no_grad():
            set_to(t0, y)
            set_to(t1, x1)
        t0.add_(x2)
        t0[0] = x2[1]
        t1.mul_(x2)
        return (y.mul(1.0), t1.mul(2.0))

    check_with_grad(f, lambda: (leaf(2, 2), torch.randn(2, 2), leaf(2, 2)), compile_fn)


def test_subclass_view_set_to_its_base(compile_fn: CompileFn | None) -> None:
    # a PairTensor view: eager rebuilds its history by replaying its view ops, as the trace does
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x0)
        return (t0.clone(), t0)

    check_with_grad(f, lambda: (pair(2, 2, requires_grad=True),), compile_fn)


def test_view_set_to_its_base_under_no_grad_program(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        set_to(t0, x0)
        return (t0.clone(), t0)

    check_no_grad(f, lambda: (leaf(2, 2),), compile_fn)


def test_view_set_to_a_larger_storage_then_read_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # eager's rebuilt history is as_strided() of x0 at t0's new layout, which x0's storage does not hold (a view set
    # to a tensor x0's storage holds is supported: Note [Stale View Functions])
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x1)
        return (t0.clone(),)

    refused_with_grad(f, lambda: (leaf(2, 2), torch.randn(3, 3)), compile_fn, RULE)


def test_subclass_view_of_an_intermediate_set_to_an_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 41000 #9334 (Note [Output Regeneration]): eager's t1 stays a wrapper-level view of
    # t0 with plain inner aliases of x1's; it came back as no view, with inner views of x1's
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        t1 = t0.reshape((1, -1, 2))
        set_to(t1, x1)
        return (t1,)

    check_with_grad(f, lambda: (leaf(1, 4, 3), pair(4)), compile_fn)


def test_subclass_views_set_off_their_base_under_no_grad(compile_fn: CompileFn | None) -> None:
    # the same without grad (refused before): a chain of two views, the base changed in place after, an
    # intermediate source, and a second view of the base returned too
    def f(x1: T, x2: T) -> object:
        t0 = x1.mul(2.0)
        t1 = t0.t()[1]
        t2 = t0[0]
        set_to(t1, x1[0])
        t0.add_(1.0)
        t3 = x2.add(1.0).view(6)
        set_to(t3, x2.mul(3.0))
        return (t1, t2, t3)

    check_no_grad(f, lambda: (pair(2, 3), pair(2, 3)), compile_fn)


def test_subclass_view_set_off_its_base_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        t1 = t0.reshape((2, 2))
        with torch.no_grad():
            set_to(t1, x1)
        t1.mul_(2.0)
        t0.t_()
        return (t1, x1)

    check_with_grad(f, lambda: (leaf(2), pair(4)), compile_fn)


def test_view_set_to_another_storage_read_but_not_differentiated(compile_fn: CompileFn | None) -> None:
    # fuzz seed 43000 #3583: the view on another storage is read with grad, but no gradient reaches what it made, so
    # only a backward through it is refused
    def f(x0: T, x1: T) -> object:
        t0 = x0.clone()
        t1 = x1.reshape((1, 1, 4))
        t0.transpose_(0, 0)
        with torch.no_grad():
            set_to(t1, t0)
        t1.unsqueeze(0)
        return (x0, t1.detach().mul(2.0))

    def make() -> tuple[T, T]:
        x = leaf(4)
        return x, x

    check_with_grad(f, make, compile_fn)


def test_view_set_to_another_storage_then_written_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        y = x0.mul(1.0)
        t0 = y.t()
        with torch.no_grad():
            set_to(t0, x1)
        t0.add_(x2)
        return (y, t0)

    refused_with_grad(f, lambda: (leaf(3, 2), torch.randn(3, 2), leaf(3, 2)), compile_fn, RULE)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper setview): plain views of leaves set_() under no_grad onto another storage, then read
# or returned with grad (Note [Stale View Functions]); cases found beside fuzz seed 43000
# (r14b c1, c2, c3) and variants.
# ---------------------------------------------------------------------------------------------------------------------

SET_OFF = r"view that requires grad of tensor input 1, taken from a view of it that the program set_\(\)"


def test_unsqueezed_transpose_set_to_a_product_returned_and_summed(compile_fn: CompileFn | None) -> None:
    # r14b c1: the backward through t2 (an intermediate base) and t2.sum() replayed t2's stale view function,
    # unsqueeze(0) ("invalid gradient ... expected shape compatible with [1, 4, 4]"); eager's goes through
    # as_strided() of x1 at t2's new layout
    def f(x0: T, x1: T) -> object:
        t2 = x1.t().unsqueeze(0)
        with torch.no_grad():
            set_to(t2, x0 * 2)
        return t2, t2.sum()

    check_with_grad(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn)
    check_no_grad(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn)


def test_view_set_to_another_input_then_read_with_grad(compile_fn: CompileFn | None) -> None:
    # refused before (helper set43's tests, in this file): eager's history reads no values, so t0's own values with x0's
    # as_strided() history are exact
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(0)
        with torch.no_grad():
            set_to(t0, x1)
        return (t0.clone(), t0.mul(x1))

    check_with_grad(f, lambda: (leaf(2, 2), torch.randn(2, 2)), compile_fn)
    check_with_grad(f, lambda: (leaf(2, 2), leaf(2, 2)), compile_fn)


def test_view_set_to_a_smaller_tensor_read_with_grad(compile_fn: CompileFn | None) -> None:
    # another shape: a flat view set_() to a (2, 3) product, read by an op whose backward reads its operand
    def f(x0: T, x1: T) -> object:
        t1 = x1.view(12)
        with torch.no_grad():
            set_to(t1, x0.mul(3.0))
        return (t1.mul(x0).sum(), x1)

    check_with_grad(f, lambda: (leaf(2, 3), leaf(3, 4)), compile_fn)


def test_view_of_a_nonleaf_set_off_its_base_read_with_grad(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t1 = x1.t()
        with torch.no_grad():
            set_to(t1, x0.add(1.0))
        return (t1.exp(),)

    check_with_grad(f, lambda: (nonleaf(3, 3), nonleaf(3, 3)), compile_fn)


def test_subclass_view_set_off_its_base_read_with_grad(compile_fn: CompileFn | None) -> None:
    # a PairTensor view: eager replays its view ops (left alone by the stand-ins)
    def f(x0: T, x1: T) -> object:
        t1 = x1.t()
        with torch.no_grad():
            set_to(t1, x0.mul(2.0))
        return (t1.sum(), t1)

    check_with_grad(f, lambda: (pair(3, 3, requires_grad=True), pair(3, 3, requires_grad=True)), compile_fn)


def test_view_of_a_view_set_off_its_base_returned(compile_fn: CompileFn | None) -> None:
    # r14b c2: eager's output is a view of x1 (its `._base`) on x0 * 2's storage; ours came back as no view (training)
    # or a view of the intermediate without grad (inference); refused in training. In a call without grad eager's
    # view (requiring grad through x1) has no history: rebuilt onto its base as one that requires none (Note [Outputs
    # Over Another Storage]), where it was refused
    def f(x0: T, x1: T) -> object:
        t2 = x1.view(16)
        with torch.no_grad():
            set_to(t2, x0 * 2)
        return (t2.view(-1),)

    refused_with_grad(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn, SET_OFF)
    with torch.no_grad():
        assert_matches_eager(f, lambda: (leaf(4, 4), leaf(4, 4)), compile_fn=compile_fn, after_call=write_outputs)


def test_view_of_a_view_set_to_another_input_returned_is_refused(compile_fn: CompileFn | None) -> None:
    # the same onto input 0's storage: ours was a view of args[0]
    def f(x0: T, x1: T) -> object:
        t2 = x1[1]
        with torch.no_grad():
            set_to(t2, x0)
        return (t2.view(-1), x0)

    refused_with_grad(f, lambda: (nonleaf(4, 4), nonleaf(4, 4)), compile_fn, SET_OFF)


def test_view_of_an_input_view_moved_by_data_then_set_off_names_that_rule(compile_fn: CompileFn | None) -> None:
    # hrefuse19 k2: x1 a view of input 0; `x1.data = y` moves x1, t1 = x1[1] set_() under no_grad: eager's output
    # is a view whose `._base` is input 0, on y's storage. The run's stand-in for t1 (a pipeline Function's view)
    # made this a custom Function's view; refused with that Function's message, now with the rule it breaks
    def inputs() -> tuple[T, T]:
        b0 = nonleaf(4, 3, 2)
        return (b0, b0.select(1, 0))

    def f(x0: T, x1: T) -> object:
        t1 = x1[1]
        y = x0.mul(3.0)
        x1.data = y
        with torch.no_grad():
            set_to(t1, y[2])
        return (t1.view(-1),)

    refused_with_grad(f, inputs, compile_fn, SET_OFF.replace("input 1", "input 0"))


def test_view_of_an_aliased_input_set_to_another_input_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 118700 program 9161 (issue #27): x0 shares its storage with x2, so the run lays both out as views of
    # one synthetic base, the root it found for t2; eager's t2 (taken under no_grad, requiring grad as a view of a
    # leaf that does) keeps x0 as its `._base` on x1's storage, where ours was rebuilt as a view of args[1] whose
    # grad_fn raised, with args[1]'s counter moved. Refused, as the same program was when x0 is passed alone; in a
    # call without grad t2 has no history, and is rebuilt onto x0 set onto x1's storage (seed 121012 #2971)
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.as_strided((2, 3), (0, 0), 1)
        t1 = t0.reshape((2, 3, 1))
        set_to(t1, x1)
        return (t1.view((1, 1, 2)),)

    @torch.enable_grad()
    def make() -> tuple[object, ...]:
        b0 = leaf(2, 1, 2)
        return (b0, nonleaf(2, 1, 1), b0.unbind(2)[1])

    with torch.no_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)
        assert_matches_eager(f, lambda: make()[:2] + (torch.randn(2, 1),), compile_fn=compile_fn)


def test_view_of_a_view_set_off_its_base_without_grad(compile_fn: CompileFn | None) -> None:
    # inputs that do not require grad: rebuilt onto its base (Note [Outputs Over Another Storage]), not refused
    def f(x0: T, x1: T) -> object:
        t2 = x1.view(16)
        set_to(t2, x0 * 2)
        return (t2.view(-1),)

    check_with_grad(f, lambda: (torch.randn(4, 4), torch.randn(4, 4)), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regression: a view of a multi-output view input, set_() under no_grad (Note [Views That Raise After
# A Bump]); the program is a shrunk fuzz program (seed and index in the test's comment), with variants.
# ---------------------------------------------------------------------------------------------------------------------


def _unbind_input(shape: tuple[int, ...], *, wrapped: bool, split: bool) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn(shape)
            base = PairTensor.from_tensor(b0, requires_grad=True) if wrapped else b0.requires_grad_()
            return (torch.split(base, 1, 0)[0].squeeze(0) if split else base.unbind(0)[0],)

    return make_inputs


# fuzz seed 15000 #6332
def test_view_of_unbind_input_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # the runtime's replay of the diagonal raised: the epilogue had advanced the unbind() output's counter
    def f(x0: T) -> object:
        t0 = x0[:, 1:1:1]
        t1 = x0.diagonal(-1, 0, 1)
        with torch.no_grad():
            set_to(t1, t0)
        return (t1,)

    check_with_grad(f, _unbind_input((3, 2, 1), wrapped=False, split=False), compile_fn)


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("split", [False, True])
def test_view_of_multi_output_input_set_to_other_storage(
    compile_fn: CompileFn | None, wrapped: bool, split: bool
) -> None:
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = x0.t()
        with torch.no_grad():
            set_to(t1, t0)
        return (t1, x0)

    check_with_grad(f, _unbind_input((2, 3, 4), wrapped=wrapped, split=split), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-up (seed 15000 #537): a view op's replay by autograd that fails below the ops the program calls
# (Note [Stale View Functions]).
# ---------------------------------------------------------------------------------------------------------------------


def _view_input(subclass: bool) -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = pair(3, 3, 3, requires_grad=True) if subclass else torch.randn(3, 3, 3, requires_grad=True)
        b1 = pair(2, 2, 1) if subclass else torch.randn(2, 2, 1)
        return (b0.clone().diagonal(-1, 0, 2), b1)


def _set_of_view_after_base_set(x0: T, x1: T) -> object:
    t0 = x0.t()
    x0.set_(x1)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
    t0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
    return ()


@pytest.mark.parametrize("subclass", [False, True])
def test_self_set_of_view_whose_base_was_set_to_3d(compile_fn: CompileFn | None, subclass: bool) -> None:
    # fuzz seed 15000 #537: t0.set_(t0) makes autograd replay t() on x0, 3-d since its set_(): a RuntimeError from
    # below the program's ops, where eager's as_strided() replay of t0 from its base works; refused, naming the rule
    refused_with_grad(
        _set_of_view_after_base_set,
        lambda: _view_input(subclass),
        compile_fn,
        "written or set_\\(\\) after the program changed the layout .* by set_\\(\\)",
    )


@pytest.mark.parametrize("subclass", [False, True])
def test_self_set_of_view_whose_base_was_set_to_3d_no_grad(compile_fn: CompileFn | None, subclass: bool) -> None:
    # the same under no_grad: no replay, supported
    check_no_grad(_set_of_view_after_base_set, lambda: _view_input(subclass), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper dv2065): a view of an input set_() under no_grad and returned, beside a view of the input
# taken after that set_() (Note [Views That Raise After A Bump]). The runtime repeats the output's set_() when it
# builds it, which advanced the counter of the later view built before it: its grad_fn and is_leaf raised, where
# eager's read fine.
# ---------------------------------------------------------------------------------------------------------------------


_MAKERS = {
    "leaf": lambda: leaf(3, 4),
    "nonleaf": lambda: nonleaf(3, 4),
    "plain": lambda: torch.randn(3, 4),
    "pair_leaf": lambda: pair(3, 4, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(3, 4),
}
_VIEWS: dict[str, Callable[[T], T]] = {
    "unbind": lambda x: x.unbind(0)[1],
    "select": lambda x: x.select(0, 1),
    "slice": lambda x: x[1:2],
    "t": lambda x: x.t(),
    "view": lambda x: x.view(-1),
}
_TARGETS: dict[str, Callable[[T], T]] = {
    "input": lambda x: x,
    "slice": lambda x: x[0:2],
    "view_as": lambda x: x.view_as(x),
}
_LATER: dict[str, Callable[[T], T]] = {
    "slice": lambda x: x[2:3:2],
    "unbind": lambda x: x.unbind(0)[2],
    "select": lambda x: x[2],
}


def test_view_taken_after_an_unbind_view_set_to_the_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 47000 #2065 (shrunk): t1 came back with a grad_fn that raises, eager's is a leaf
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((3,), requires_grad=True),)

    def f(x0: T) -> object:
        t0 = x0.unbind(0)[1]
        set_to(t0, x0)
        t1 = x0[2:3:2]
        return (t1, t0)

    check_no_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("target", list(_TARGETS), ids=str)
@pytest.mark.parametrize("view", list(_VIEWS), ids=str)
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_view_taken_after_a_returned_view_set_to_the_input(
    make: str, view: str, target: str, compile_fn: CompileFn | None
) -> None:
    # variants of fuzz seed 47000 #2065: the view set_() (any view op), onto the input or a view of it
    def f(x: T) -> object:
        t0 = _VIEWS[view](x)
        set_to(t0, _TARGETS[target](x))
        t1 = x[2:3:2]
        return (t1, t0)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("returned", [True, False])
@pytest.mark.parametrize("after", [True, False])
@pytest.mark.parametrize("later", list(_LATER), ids=str)
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_views_before_or_after_the_set_with_or_without_the_set_view(
    make: str, later: str, after: bool, returned: bool, compile_fn: CompileFn | None
) -> None:
    # variants of fuzz seed 47000 #2065: the other view taken before the set_() (eager's raises) or after it, by a
    # slice, a multi-output view or a select; the view set_() returned (first) or not
    def f(x: T) -> object:
        t0 = x.unbind(0)[1]
        t1 = None if after else _LATER[later](x)
        set_to(t0, x)
        t1 = _LATER[later](x) if t1 is None else t1
        return (t0, t1) if returned else (t1,)

    check_no_grad(f, lambda: (_MAKERS[make](),), compile_fn)


@pytest.mark.parametrize("after", [True, False])
@pytest.mark.parametrize("make", list(_MAKERS), ids=str)
def test_set_under_no_grad_in_a_training_program(make: str, after: bool, compile_fn: CompileFn | None) -> None:
    # a variant of fuzz seed 47000 #2065 with grad enabled around a no_grad set_()
    def f(x: T) -> object:
        t0 = x.unbind(0)[1]
        t1 = None if after else x[2:3:2]
        with torch.no_grad():
            set_to(t0, x)
        t1 = x[2:3:2] if t1 is None else t1
        return (t1, t0)

    check_with_grad(f, lambda: (_MAKERS[make](),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper refshare1): a view taken under no_grad of an input that requires grad, which set_() then
# leaves on the same storage with the same layout (Note [Storage Swaps By Rebinding]). Eager's view raises when
# its grad_fn or is_leaf is read (set_() advanced the counter it shares); the compiled one came back as a leaf.
# ---------------------------------------------------------------------------------------------------------------------


_MAKERS_refshare1 = {
    "leaf": lambda: leaf(2, 3),
    "nonleaf": lambda: nonleaf(2, 3),
    "plain": lambda: torch.randn(2, 3),
    "view_nonleaf": lambda: nonleaf(4, 3)[1:3],
    "transposed_nonleaf": lambda: nonleaf(3, 2).t(),
    "pair_leaf": lambda: pair(2, 3, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(2, 3),
}
_SAME_LAYOUT_VIEWS: dict[str, Callable[[T], T]] = {
    "view_as": lambda x: x.view_as(x),
    "view": lambda x: x.view(x.shape),
    "slice": lambda x: x[:],
    "alias": torch.ops.aten.alias,
    "t_t": lambda x: x.t().t(),
}


@pytest.mark.parametrize("view", list(_SAME_LAYOUT_VIEWS), ids=str)
@pytest.mark.parametrize("make", list(_MAKERS_refshare1), ids=str)
def test_input_set_to_its_own_view_under_no_grad_returned(view: str, make: str, compile_fn: CompileFn | None) -> None:
    # the refshare helper's record (session 10): `v` came back a leaf under no_grad where eager's grad_fn raises
    take = _SAME_LAYOUT_VIEWS[view]

    def f(x: T) -> object:
        with torch.no_grad():
            v = take(x)
            set_to(x, v)
        return (v,)

    check_no_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)
    check_with_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)


@pytest.mark.parametrize("source", ["view_as", "detach"])
@pytest.mark.parametrize("make", list(_MAKERS_refshare1), ids=str)
def test_view_returned_after_input_set_to_a_same_layout_view(
    source: str, make: str, compile_fn: CompileFn | None
) -> None:
    # a variant: the view returned is another one (a select) than the one set_() takes, and the input too
    def f(x: T) -> object:
        with torch.no_grad():
            v = x[0]
            set_to(x, x.view_as(x) if source == "view_as" else x.detach())
        return (v, x)

    check_no_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)
    check_with_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)


@pytest.mark.parametrize("make", ["leaf", "nonleaf", "view_nonleaf", "pair_nonleaf"])
def test_views_before_and_after_the_set_returned(make: str, compile_fn: CompileFn | None) -> None:
    # a variant: eager's view taken before the set_() raises, the one after it does not (refused before in training)
    def f(x: T) -> object:
        with torch.no_grad():
            v = x.view_as(x)
            set_to(x, v)
            w = x.view_as(x)
        return (v, w)

    check_no_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)
    check_with_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)


@pytest.mark.parametrize("make", ["leaf", "nonleaf"])
def test_view_with_grad_then_set_to_storage_with_same_metadata(make: str, compile_fn: CompileFn | None) -> None:
    # a variant: set_(storage, offset, size, stride) with the input's own metadata
    def f(x: T) -> object:
        v = x.view_as(x)
        with torch.no_grad():
            x.set_(x.untyped_storage(), x.storage_offset(), x.shape, x.stride())
        return (v,)

    check_no_grad(f, lambda: (_MAKERS_refshare1[make](),), compile_fn)


def _views_of_one_base() -> tuple[T, T]:
    b = nonleaf(2, 3)
    return (b[:], b.view(2, 3))


def _base_and_view() -> tuple[T, T]:
    b = nonleaf(2, 3)
    return (b, b[:])


@pytest.mark.parametrize("make", [_views_of_one_base, _base_and_view])
def test_other_member_of_an_alias_group_set_to_its_own_view(
    make: Callable[[], tuple[T, T]], compile_fn: CompileFn | None
) -> None:
    # a variant: the set_() input shares its version counter with the one viewed
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            v = x1.view_as(x1)
            set_to(x0, x0.view_as(x0))
        return (v,)

    def g(x0: T, x1: T) -> object:
        with torch.no_grad():
            v = x1.view_as(x1)
            set_to(x0, v)
        return (v, x1.mul(2.0))

    check_no_grad(f, make, compile_fn)
    check_no_grad(g, make, compile_fn)


@pytest.mark.parametrize("make", [lambda: leaf(2, 3), lambda: nonleaf(2, 3)])
def test_one_tensor_twice_set_to_its_own_view(make: Callable[[], T], compile_fn: CompileFn | None) -> None:
    # a variant with one tensor at two positions (Note [Synthetic Bases]): once refused, naming the output; a set_ to
    # a view in x0's very layout is x0.set_(x0) (Note [Gradient Accumulators Of Leaves]; issue #27)
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            v = x1.view_as(x1)
            set_to(x0, x0.view_as(x0))
        return (v,)

    check_no_grad(f, twice(make), compile_fn)
    check_with_grad(f, twice(make), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper r14b): subclass views of an input whose wrapper the program set_() to an intermediate
# under no_grad, returned in training (Note [Output Regeneration]), fuzz seed 14000 #2383 and
# variants. Eager's output stays a view of the input (its `._base`), with the view chain's history; it was rebuilt
# as a view of a fresh tensor instead.
# ---------------------------------------------------------------------------------------------------------------------


def _pair_leaf_and_view(*shape: int, transposed: bool = True) -> Callable[[], tuple[T, T]]:
    def make() -> tuple[T, T]:
        b0 = pair(*shape, requires_grad=True)
        with torch.enable_grad():
            return (b0.t() if transposed else b0.view(shape), b0)

    return make


def test_view_of_a_view_input_set_to_an_intermediate(compile_fn: CompileFn | None) -> None:
    # fuzz seed 14000 #2383 (shrunk): t2 is a view of args[1] (x0's `._base`) in eager; ours was a view of a fresh
    # tensor ("output[0]._base: a view of output[0]._base vs eager a view of args[1]")
    def f(x0: T, x1: T) -> object:
        t0 = x0.unsqueeze(-2)
        t1 = t0.contiguous()
        t2 = x0.view((4, 4))
        with torch.no_grad():
            set_to(t2, t1)
        return (t2,)

    check_with_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


@pytest.mark.parametrize("transposed", [True, False])
def test_view_chain_of_an_input_set_to_an_intermediate(compile_fn: CompileFn | None, transposed: bool) -> None:
    # two views of the leaf input, set_() to a product; a value read from the output too
    def f(x0: T, x1: T) -> object:
        t1 = x0 * 2.0
        t2 = x1.t().unsqueeze(0)
        with torch.no_grad():
            set_to(t2, t1)
        return (t2, t2.sum())

    check_with_grad(f, _pair_leaf_and_view(4, 4, transposed=transposed), compile_fn)


def test_slice_set_to_a_flat_intermediate_then_read(compile_fn: CompileFn | None) -> None:
    # a slice set_() to a reshaped intermediate, read with grad after and returned
    def f(x0: T, x1: T) -> object:
        t1 = (x0 + 1.0).reshape(-1)
        t2 = x0[1:]
        with torch.no_grad():
            set_to(t2, t1)
        return (t2 * 3.0, t2)

    check_with_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


def test_view_set_to_an_intermediate_without_history(compile_fn: CompileFn | None) -> None:
    # the intermediate has no history (a clone of a detach); the output still has the view chain's
    def f(x0: T, x1: T) -> object:
        t1 = x0.detach().clone()
        t2 = x0.view(4, 4)
        with torch.no_grad():
            set_to(t2, t1)
        return (t2,)

    check_with_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


def test_view_set_to_an_intermediate_called_under_no_grad(compile_fn: CompileFn | None) -> None:
    # the whole call under no_grad: eager's output still views the input that requires grad
    def f(x0: T, x1: T) -> object:
        t1 = x0.unsqueeze(-2).contiguous()
        t2 = x0.view((4, 4))
        with torch.no_grad():
            set_to(t2, t1)
        return (t2,)

    check_no_grad(f, _pair_leaf_and_view(4, 4), compile_fn)


def test_output_is_still_a_view_of_the_input(compile_fn: CompileFn | None) -> None:
    # the fix itself, checked directly: `._base` is the leaf input and the history is the view chain's
    def f(x0: T, x1: T) -> T:
        t1 = x0.unsqueeze(-2).contiguous()
        t2 = x0.view((4, 4))
        with torch.no_grad():
            set_to(t2, t1)
        return t2

    run = f if compile_fn is not None else subclassaot.compile(f)
    x0, x1 = _pair_leaf_and_view(4, 4)()
    with torch.enable_grad():
        t2 = run(x0, x1)
    assert isinstance(t2, PairTensor) and t2._base is x1
    assert t2.shape == (4, 1, 4) and type(t2.grad_fn).__name__ == "ViewBackward0"


@pytest.mark.parametrize("grad", [True, False])
def test_view_of_a_view_set_to_an_intermediate_is_refused(compile_fn: CompileFn | None, grad: bool) -> None:
    # a view taken of the set_() view: its chain cannot be replayed, and the fallback made it a view of a fresh
    # tensor where eager's `._base` is the input (Note [Output Regeneration])
    def f(x0: T, x1: T) -> object:
        t1 = x0.exp()
        t2 = x1.view(16)
        with torch.no_grad():
            set_to(t2, t1)
        return (t2.view(-1),)

    with torch.set_grad_enabled(grad):
        rule = r"could not be a view of it \(Note \[Output Regeneration\]\)"
        assert_refused(f, _pair_leaf_and_view(4, 4, transposed=False), compile_fn, rule)


@pytest.mark.parametrize("grad", [True, False])
def test_views_of_input_views_set_under_grad(compile_fn: CompileFn | None, grad: bool) -> None:
    # set_() with grad on (the call under grad or not): replayed from the input, then set_(), as fuzz seed 42000
    # #4220 (refused before, tests/pipeline/test_set_storage.py)
    def g(x0: T) -> object:
        t0 = x0.unsqueeze(0)
        set_to(t0, x0.exp())
        return (t0, t0.sum())

    def h(x0: T) -> object:
        t0 = x0.t()
        set_to(t0, (x0 * 3.0).reshape(-1))
        return (t0,)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(g, lambda: (pair_nonleaf(3, 4).t(),), compile_fn=compile_fn)
        assert_matches_eager(h, lambda: (pair_nonleaf(4, 4)[1:],), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# PyTorch-corpus follow-ups (session 13, "pairset"): PairTensor programs the pipeline refused, now parity tests.
#
# set_() of a PairTensor onto a plain tensor: eager's wrapper then shares the plain tensor's storage with its own inner
# tensors (Note [Wrapper Storage]); set_() back to the size it had, and set_() under dynamic shapes
# (Note [Inputs Written In Training]); an inner tensor of an input
# that requires grad written directly (Note [Inputs Written In Training]); set_() under no_grad
# onto another input, then a write with grad (refused: Note [History Kept Through .data =]).
# ---------------------------------------------------------------------------------------------------------------------

HIDDEN_SET_WRITE = (
    r"set_\(\) it under no_grad to another input's storage and then wrote it with grad enabled.*"
    r"Note \[History Kept Through \.data =\]"
)
Make = Callable[[], tuple[object, ...]]


def _pair_makers(*shape: int) -> list[tuple[Make, bool]]:
    """(maker, may run with grad): a PairTensor without grad, a non-leaf one, a leaf one (set_ under no_grad only)."""
    return [
        (lambda: (pair(*shape),), True),
        (lambda: (pair_nonleaf(*shape),), True),
        (lambda: (pair(*shape, requires_grad=True),), False),
    ]


def _check_all(fn: Callable[..., object], makers: list[tuple[Make, bool]], compile_fn: CompileFn | None) -> None:
    for make, with_grad in makers:
        check_no_grad(fn, make, compile_fn)
        if with_grad:
            check_with_grad(fn, make, compile_fn)
            with torch.enable_grad():
                assert_matches_eager(fn, make, compile_fn=compile_fn, compile_kwargs={"dynamic": True})


def test_pair_set_to_plain_intermediate(compile_fn: CompileFn | None) -> None:
    # PyTorch test_input_mutation_set__input_mutation on a PairTensor (corpus pair_input_mutation_set__input_mutation):
    # the compiled wrapper kept a storage of its own where eager's shares the arange's with its inner tensors
    def f(a: T) -> object:
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        with torch.no_grad():
            set_to(a, b)
        return a * b

    def written_after(a: T) -> object:  # a write through the wrapper writes the shared storage once per inner tensor
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        with torch.no_grad():
            set_to(a, b)
            a.mul_(2)
        return a + 1

    def strided(a: T) -> object:  # a non-contiguous view as the source
        b = torch.arange(18, dtype=a.dtype).reshape(3, 6)[:, ::2]
        with torch.no_grad():
            set_to(a, b)
        return a + b

    for fn in (f, written_after, strided):
        _check_all(fn, _pair_makers(3, 3), compile_fn)


def test_pair_set_to_plain_returned_or_resized(compile_fn: CompileFn | None) -> None:
    # the plain source returned too (the wrapper shares the output's storage), and a source of another shape (the
    # wrapper takes it): parity without grad and on an input that does not require grad; on a non-leaf that requires
    # grad they stay refused, as for a plain input (returned: the output would need the set_() tensor's history) and
    # by Note [Inputs Written In Training] (a read with grad after a set_() to another size)
    def returned(a: T) -> object:
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        with torch.no_grad():
            set_to(a, b)
        return b, a

    def other_shape(a: T) -> object:
        b = torch.arange(12, dtype=a.dtype)
        with torch.no_grad():
            set_to(a, b)
        return a.sum()

    for fn, match in ((returned, "shares storage with args"), (other_shape, "args.0.: a tensor subclass input")):
        for make, _ in _pair_makers(3, 3):
            check_no_grad(fn, make, compile_fn)
        check_with_grad(fn, lambda: (pair(3, 3),), compile_fn)
        refused_with_grad(fn, lambda: (pair_nonleaf(3, 3),), compile_fn, match)


def test_pair_set_to_plain_and_back(compile_fn: CompileFn | None) -> None:
    # PyTorch test_input_mutation_set__nop on a PairTensor (corpus pair_input_mutation_set__nop)
    def f(a: T) -> object:
        b = torch.arange(9, dtype=a.dtype)
        a_old = torch.ops.aten.alias.default(a)
        with torch.no_grad():
            set_to(a, b)
            set_to(a, a_old)
        return a + b.reshape(3, 3)

    def view_between(a: T) -> object:  # a view taken while a had the other size, read after the set_() back
        b = torch.arange(9, dtype=a.dtype)
        a_old = torch.ops.aten.alias.default(a)
        with torch.no_grad():
            set_to(a, b)
        v = a.view(9)
        with torch.no_grad():
            set_to(a, a_old)
        return v * 2, a + 1

    def view_after(a: T) -> object:  # Note [Inputs Written In Training]: a view taken after the set_() back
        b = torch.arange(9, dtype=a.dtype)
        a_old = torch.ops.aten.alias.default(a)
        with torch.no_grad():
            set_to(a, b)
            set_to(a, a_old)
        return a.view(9) * 2

    for fn in (f, view_after):
        _check_all(fn, _pair_makers(3, 3), compile_fn)
    for make, _ in _pair_makers(3, 3):
        check_no_grad(view_between, make, compile_fn)
    check_with_grad(view_between, lambda: (pair(3, 3),), compile_fn)
    refused_with_grad(view_between, lambda: (pair_nonleaf(3, 3),), compile_fn, "args.0.: a tensor subclass input")


def test_pair_set_to_plain_input(compile_fn: CompileFn | None) -> None:
    # a plain input as the source: the wrapper ends on the plain input's storage
    def f(a: T, x: T) -> object:
        with torch.no_grad():
            set_to(a, x)
        return a + 1

    def source_written(a: T, x: T) -> object:  # a later write of the source reaches both inner tensors
        with torch.no_grad():
            set_to(a, x)
            x.add_(1)
        return a * 2

    for fn in (f, source_written):
        check_no_grad(fn, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
        check_with_grad(fn, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
        check_with_grad(fn, lambda: (pair_nonleaf(3, 3), torch.randn(3, 3)), compile_fn)


def test_pair_intermediate_set_to_plain(compile_fn: CompileFn | None) -> None:
    # a PairTensor made by the program set_() onto a plain tensor and returned: its wrapper shares the plain storage
    def f(a: T, x: T) -> object:
        w = a * 2
        set_to(w, x)
        return w

    def intermediate_source(a: T) -> object:
        w = a * 2
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        set_to(w, b)
        return w, b

    check_no_grad(f, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
    check_with_grad(f, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
    check_no_grad(intermediate_source, lambda: (pair(3, 3),), compile_fn)
    check_with_grad(intermediate_source, lambda: (pair(3, 3),), compile_fn)


def _pair_and_leaf() -> list[tuple[Make, bool]]:
    return [
        (lambda: (pair(2, 3), leaf(2, 3)), True),
        (lambda: (pair_nonleaf(2, 3), leaf(2, 3)), True),
        (lambda: (pair(2, 3, requires_grad=True), leaf(2, 3)), True),
    ]


def _inner_written_directly() -> dict[str, Callable[..., object]]:
    # PyTorch test_subclass_inner_mutated on a PairTensor that requires grad (corpus pair_inner_mutated_train): the
    # pipeline refused writing some inner tensors but not others; eager records nothing on the wrapper
    def f(x: T, y: T) -> object:
        x.a.add_(1)  # type: ignore[attr-defined]
        return x * 2

    def squared(x: T, y: T) -> object:  # the gradient reads the new values, not the write
        x.a.mul_(x.a)  # type: ignore[attr-defined]
        return x * x

    def both(x: T, y: T) -> object:
        x.a.add_(1)  # type: ignore[attr-defined]
        x.b.mul_(3)  # type: ignore[attr-defined]
        return x.sin()

    def through_view(x: T, y: T) -> object:
        x.a.view(-1)[0].fill_(5)  # type: ignore[attr-defined]
        return x * x, x.b  # type: ignore[attr-defined]

    def grad_value(x: T, y: T) -> object:  # a value that requires grad written into the inner tensor
        x.a.add_(y)  # type: ignore[attr-defined]
        return x * 2

    def other_input(x: T, y: T) -> object:
        x.a.add_(1)  # type: ignore[attr-defined]
        return x * y

    return {fn.__name__: fn for fn in (f, squared, both, through_view, grad_value, other_input)}


@pytest.mark.parametrize("name", list(_inner_written_directly()))
def test_pair_inner_tensor_written_directly(compile_fn: CompileFn | None, name: str) -> None:
    _check_all(_inner_written_directly()[name], _pair_and_leaf(), compile_fn)


def _inner_written_below_autograd() -> dict[str, Callable[..., object]]:
    # corpus pair_inner_mutated_train, variants: the inner tensor written under no_grad (was refused as "some inner
    # tensors but not others"), through `x.data` or `x.detach()`, the input returned or viewed after the write
    def no_grad_one(x: T, y: T) -> object:
        with torch.no_grad():
            x.a.add_(1)  # type: ignore[attr-defined]
        return x * 2

    def no_grad_returned(x: T, y: T) -> object:
        with torch.no_grad():
            x.b.add_(1)  # type: ignore[attr-defined]
        return x, x.view(-1)

    def view_before(x: T, y: T) -> object:  # a view taken before the write, returned
        v = x.view(-1)
        with torch.no_grad():
            x.a.add_(1)  # type: ignore[attr-defined]
        return v

    def through_data(x: T, y: T) -> object:
        x.data.mul_(2)
        return x * 2

    def through_detach(x: T, y: T) -> object:  # shares x's version counter: the wrapper-level rule
        x.detach().mul_(2)
        return x * 2

    def returned_inner(x: T, y: T) -> object:
        x.a.mul_(2)  # type: ignore[attr-defined]
        return x.a, x.t()  # type: ignore[attr-defined]

    fns = (no_grad_one, no_grad_returned, view_before, through_data, through_detach, returned_inner)
    return {fn.__name__: fn for fn in fns}


@pytest.mark.parametrize("name", list(_inner_written_below_autograd()))
def test_pair_inner_tensor_written_below_autograd(compile_fn: CompileFn | None, name: str) -> None:
    _check_all(_inner_written_below_autograd()[name], _pair_and_leaf(), compile_fn)


def test_pair_inner_tensor_written_below_autograd_of_a_view_or_passed_twice(compile_fn: CompileFn | None) -> None:
    # a view of a PairTensor as the input, and one passed twice
    fns = _inner_written_below_autograd()
    check_with_grad(fns["no_grad_one"], lambda: (pair_nonleaf(2, 3).view(-1), leaf(6)), compile_fn)
    check_with_grad(fns["no_grad_one"], lambda: (pair(2, 3, requires_grad=True)[0], leaf(3)), compile_fn)
    check_with_grad(fns["returned_inner"], twice(lambda: pair_nonleaf(3, 3)), compile_fn)


def test_pair_set_under_no_grad_then_written_stays_refused(compile_fn: CompileFn | None) -> None:
    # PyTorch test_set__not_allowed on a PairTensor (corpus pair_set__not_allowed_train): refused by the rule for plain
    # inputs, which now names it (it was the generic "only data writes" refusal)
    def f(a: T, b: T) -> object:
        with torch.no_grad():
            set_to(a, b)
        a.mul_(2)
        return a + b

    refused_with_grad(f, lambda: (pair_nonleaf(3, 3), pair_nonleaf(3, 3)), compile_fn, HIDDEN_SET_WRITE)
    check_no_grad(f, lambda: (pair_nonleaf(3, 3), pair_nonleaf(3, 3)), compile_fn)
    check_with_grad(f, lambda: (pair(3, 3), pair(3, 3)), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups: tensor subclass inputs that require grad and whose storage or metadata the program changes where
# autograd does not record it (fuzz seeds 10000 and 11000). See Note [Inputs Written In Training].
# ---------------------------------------------------------------------------------------------------------------------


_RULE = "a tensor subclass input that requires grad has its metadata or storage changed in place"


def test_leaf_set_under_no_grad_to_another_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #998 (shrunk); seed 11000 #3834 is the same with the operands' roles swapped
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1, 4, 3), pair(3, requires_grad=True)), compile_fn=compile_fn)


def test_leaf_set_under_no_grad_after_uses(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #998: an output computed from the input before the set_() reaches its old history
    def f(x0: T, x1: T) -> object:
        a = x1.mul(3.0)
        with torch.no_grad():
            set_to(x1, x0)
        return (x0.detach(), a, x0.mul(2.0))

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, 3, requires_grad=True), pair(3, requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_under_no_grad_to_input_that_requires_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #9420: the source requires grad and is set_() to itself with grad after
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        set_to(x0, x0)
        return (x0, x0)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(), pair(3, 4, 3, requires_grad=True).expand((-1, 4, -1)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_under_no_grad_to_own_views(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #7502, #9652; seed 11000 #7875, #8285 (shrunk): set_() to a view of the input itself
    def expand(x0: T) -> object:
        t0 = x0.expand((1,))
        with torch.no_grad():
            set_to(x0, t0)
        return ()

    def unbind(x0: T) -> object:
        t0 = x0.unbind(1)[0]
        with torch.no_grad():
            set_to(x0, t0)
        return ()

    def view(x0: T) -> object:
        t0 = x0.view((1, 6))
        with torch.no_grad():
            set_to(x0, t0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(expand, lambda: (pair(requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(
            unbind, lambda: (pair(requires_grad=True).view((1, 1, 1)).transpose(2, 0),), compile_fn=compile_fn
        )
        assert_matches_eager(view, lambda: (pair_nonleaf(2, 3, 1),), compile_fn=compile_fn)


def test_set_under_no_grad_then_returned(compile_fn: CompileFn | None) -> None:
    # the input itself, returned after the set_(): eager's and ours are the same object
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        return (x0, x1.mul(2.0))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(2, requires_grad=True), pair_nonleaf(4)), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (pair_nonleaf(3), pair_nonleaf(2, 2)), compile_fn=compile_fn)


def test_read_after_set_under_no_grad_at_the_same_size(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #5481 (a view taken before, read after: autograd rebuilds it from the input), and reads of the
    # input itself and of views taken after, with gradients that tell the layouts apart
    w = torch.arange(4.0).view(2, 2)

    def before(x0: T) -> object:
        t0 = x0.t()
        with torch.no_grad():
            set_to(x0, x0.t())
        return (t0 * w, t0)

    def after(x0: T, x1: T) -> object:
        a = x0 * 3.0
        with torch.no_grad():
            set_to(x0, x1)
        return (a, x0 * w, x0.t()[0])

    with torch.enable_grad():
        assert_matches_eager(before, lambda: (pair(2, 2, requires_grad=True),), compile_fn=compile_fn)
        assert_matches_eager(before, lambda: (pair_nonleaf(2, 2),), compile_fn=compile_fn)
        assert_matches_eager(after, lambda: (pair(2, 2, requires_grad=True), pair(2, 2)), compile_fn=compile_fn)
        assert_matches_eager(after, lambda: (pair_nonleaf(2, 2), pair_nonleaf(2, 2)), compile_fn=compile_fn)


def test_write_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # eager records the write on the input (its grad_fn, its gradient), the epilogue would not: wrong gradients
    def itself(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        x0.mul_(2.0)
        return (x0,)

    def view(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        x0[0].mul_(2.0)
        return (x0,)

    # since pairset, the rule for plain inputs (Note [History Kept Through .data =]) refuses the first; since ora1 (a
    # write through a view of the input is recorded on the input's history too) the second
    hidden_set = r"args\[0\] requires grad, and the program set_\(\) it under no_grad to another input's storage"
    with torch.enable_grad():
        assert_refused(itself, lambda: (pair_nonleaf(2, 2), pair(2, 2)), compile_fn, hidden_set)
        assert_refused(view, lambda: (pair_nonleaf(2, 2), pair(2, 2)), compile_fn, hidden_set)


def test_read_after_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # A read with grad after a set_() to another size: eager's gradient reaches the leaf in its new layout, the compiled
    # Function's input has the old one (the compiled backward raised where eager's did not)
    def f(x0: T) -> object:
        with torch.no_grad():
            set_to(x0, x0.view(-1))
        return (x0.sum(),)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(2, 3, requires_grad=True),), compile_fn, _RULE)


def test_write_with_grad_before_set_under_no_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        with torch.no_grad():
            set_to(x0, x1)
        return (x0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(2), pair(2, 2)), compile_fn, _RULE)


def test_no_grad_view_op_then_write(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #3577 (shrunk; see Note [Inputs Written In Training]): a non-square
    # transpose_ under no_grad, then a write autograd records; the backward through the input raises in both
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.transpose_(1, 0)
        x0.mul_(3.0)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(3, 4, 2),), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 2, 2),), compile_fn=compile_fn)  # square: no error


def test_write_then_no_grad_view_op(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #6031 (shrunk): a write through a view with grad, then unsqueeze_() under no_grad; autograd
    # sums the gradient of the new layout down to the old one
    def f(x0: T) -> object:
        t0 = x0.expand((-1, 4))
        t0.mul_(3.0)
        with torch.no_grad():
            x0.unsqueeze_(-2)
        return (t0, x0, x0.sin())

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 4),), compile_fn=compile_fn)


def test_no_grad_view_op_then_copy(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #5999 (shrunk): unsqueeze_() under no_grad, then a copy_ with grad (of itself, of another)
    def itself(x0: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(-2)
        x0.copy_(x0)
        return (x0,)

    def other(x0: T, x1: T) -> object:
        a = x0.mul(2.0)
        with torch.no_grad():
            x0.transpose_(0, 1)
        x0.copy_(x1)
        return (a, x0.sum())

    with torch.enable_grad():
        assert_matches_eager(itself, lambda: (pair_nonleaf(1),), compile_fn=compile_fn)
        assert_matches_eager(other, lambda: (pair_nonleaf(2, 3), pair_nonleaf(3, 2)), compile_fn=compile_fn)


def test_leaf_written_through_data_then_no_grad_view_op_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 11000 #7862 (shrunk): a leaf keeps the refusal (Note [Inputs Written In Training])
    def f(x0: T) -> object:
        x0.data.fill_(3.0)
        with torch.no_grad():
            x0.unsqueeze_(0)
        return ()

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(requires_grad=True),), compile_fn, _RULE)


def test_leaf_with_no_grad_view_op_written_through_an_alias(compile_fn: CompileFn | None) -> None:
    # Note [Inputs Written In Training]: a leaf written with grad through a tensor set_() to it
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.t_()
            set_to(x1, x0)
        x1.mul_(2.0)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(2, 3, requires_grad=True), pair(1)), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (seed 45000, lead): views whose `._base` was set_() after the view was taken from it.
#
# With `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------


def test_view_of_detach_set_to_the_view_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #1194: eager's t2._base is t1 (a detach() is no view), set_() to t2 after, so of shape (1,);
    # the chain was replayed from t0 and gave a `._base` of shape (). A subclass chain with an op on its `._base`
    # after the view that no step replays is not exact; the wrapper t1 cannot be rebuilt (its leaves are views of
    # t0's), so it is refused.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.detach()
        t2 = t1.view((1,))
        set_to(t1, t2)
        return (t2,)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_refused(
                f, lambda: (pair(),), compile_fn, r"out\[0\] is a view of a tensor subclass whose view chain"
            )
            assert_matches_eager(f, lambda: (torch.randn(()),), compile_fn=compile_fn)
    # the program's input requires grad (the fuzzed one): the set_() runs with grad enabled but autograd records
    # nothing (neither t1 nor t2 requires grad); it was built as no view
    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(),), compile_fn, r"out\[0\] is a view of a tensor subclass whose")
        assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def _grad_scalar() -> tuple[object, ...]:
    return (torch.randn((), requires_grad=True),)


def _relaid_detach_set_back(x0: T, *, relaid: bool = True, unsqueezed: bool = True, data: bool = False) -> T:
    """`x0.transpose_(0, 0); t0 = x0.detach(); t0.unsqueeze_(0); x0.set_(t0)`, returning t0."""
    if relaid:
        x0.transpose_(0, 0)
    t0 = x0.data if data else x0.detach()
    if unsqueezed:
        t0.unsqueeze_(0)
    set_to(x0, t0)
    return t0


def _written_after(x0: T) -> object:
    t1 = _relaid_detach_set_back(x0).expand((3, 1, 2))
    x0.mul_(2.0)
    return (t1,)


_RELAID_DETACH_SET_BACK: dict[str, Callable[[T], object]] = {
    "fuzzed": lambda x0: (_relaid_detach_set_back(x0).expand((3, 1, 2)),),
    "not_relaid": lambda x0: (_relaid_detach_set_back(x0, relaid=False).expand((3, 1, 2)),),
    "not_unsqueezed": lambda x0: (_relaid_detach_set_back(x0, unsqueezed=False).expand((3, 2)),),
    "detach_returned": lambda x0: (_relaid_detach_set_back(x0),),
    "data": lambda x0: (_relaid_detach_set_back(x0, data=True).expand((3, 1, 2)),),
    "input_returned": lambda x0: (_relaid_detach_set_back(x0).expand((3, 1, 2)), x0),
    "written_after": _written_after,
}

# a plain input that requires grad, a PairTensor that does, a plain one that does not
_ONE_TWO_ELEMENT_INPUT: tuple[Callable[[], tuple[object, ...]], ...] = (
    lambda: (nonleaf(2),),
    lambda: (pair_nonleaf(2),),
    lambda: (torch.randn(2),),
)


@pytest.mark.parametrize("variant", list(_RELAID_DETACH_SET_BACK))
def test_view_of_detach_of_relaid_input_set_onto_it(compile_fn: CompileFn | None, variant: str) -> None:
    # fuzz seed 123234 #81: `x0.transpose_(0, 0); t0 = x0.detach(); t0.unsqueeze_(0); x0.set_(t0); return
    # (t0.expand(...),)` with x0 requiring grad. Eager's output is a view of t0, a detach() that requires no grad;
    # ours was an as_strided() view of args[0] (requires_grad, `._base` args[0]): a chain from an input relaid before
    # its first view replays from the input with its layout then only where neither required grad, though a detach()
    # in the chain cuts the input's history (Note [Output Regeneration]). The variants without the transpose_() or
    # the unsqueeze_() passed before (not relaid before the view: replayed before the epilogue); a subclass output is
    # rebuilt around its leaves.
    f = _RELAID_DETACH_SET_BACK[variant]
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            for make_inputs in _ONE_TWO_ELEMENT_INPUT:
                assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_two_views_of_detach_of_relaid_input_set_onto_it_are_refused_under_no_grad(
    compile_fn: CompileFn | None,
) -> None:
    # beside fuzz seed 123234 #81: two views of the detach(), one taken after the other's in-place view op; under
    # no_grad a plain input's is refused (as where the input requires no grad), never the views of args[0] with grad
    # they were; a PairTensor's, and with grad a plain one's, match eager
    def f(x0: T) -> object:
        t0 = _relaid_detach_set_back(x0)
        return (t0.expand((3, 1, 2)), t0.t())

    for make_inputs in (_ONE_TWO_ELEMENT_INPUT[0], _ONE_TWO_ELEMENT_INPUT[2]):
        with torch.no_grad():
            assert_refused(f, make_inputs, compile_fn, r"out\[0\] is a view \(made under no_grad")
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(f, lambda: (pair_nonleaf(2),), compile_fn=compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(2),), compile_fn=compile_fn)


def test_plain_view_of_output_set_after_the_view_is_refused(compile_fn: CompileFn | None) -> None:
    # found beside seed 45000 #1194: eager's out[0]._base is out[1], set_() to out[0] after the view; ours was a
    # view of args[0] (wrong). Refused where the view requires grad; without grad it is replayed from out[1] as laid
    # out when the view was taken (fuzz seed 37200, #167); returning only the view, or a base set_() before, is
    # supported.
    def returned(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.view((1, 1, 1))
        set_to(t0, t1)
        return (t1, t0)

    def only_view(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.view((1, 1, 1))
        set_to(t0, t1)
        return (t1,)

    def detached(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.reshape((1, 1, 1))
        set_to(t0, t1)
        return (t1,)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            if grad:
                assert_refused(
                    returned,
                    _grad_scalar,
                    compile_fn,
                    r"out\[0\] is a view of another output that the program set_\(\)",
                )
            else:
                assert_matches_eager(returned, _grad_scalar, compile_fn=compile_fn)
            assert_matches_eager(returned, lambda: (torch.randn(()),), compile_fn=compile_fn)
            for fn in (only_view, detached):
                assert_matches_eager(fn, lambda: (torch.randn(()),), compile_fn=compile_fn)
                assert_matches_eager(fn, lambda: (pair(),), compile_fn=compile_fn)
            assert_matches_eager(returned, lambda: (pair(),), compile_fn=compile_fn)


def _expanded_and_base() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn((1, 4, 1), requires_grad=True).clone()
        return (b0.expand((1, 4, 2)), b0)


def test_empty_write_through_an_expand_is_refused_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #6667: the empty write was traced, and the compiled backward raised "more than one element of
    # the written-to tensor refers to a single memory location" where eager's ran (Note [In-Place Ops As
    # Eager Runs Them]); under no_grad it passes, and so does a write that is not empty
    def f(x0: T, x1: T) -> object:
        t0 = x0[1:1:1]
        t0.zero_()
        return (t0,)

    def whole(x0: T, x1: T) -> object:
        t0 = x0[0:1]
        t0.zero_()
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f,
            _expanded_and_base,
            compile_fn,
            r"aten.zero_.default: an in-place write with grad into a view with no elements",
        )
        assert_matches_eager(whole, _expanded_and_base, compile_fn=compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, _expanded_and_base, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper setcrash: crashes around set_(), `.data` and writes below tensors whose elements overlap
# (fuzz seeds 9000, 10000, 11000). Each program is now either compiled with eager's results or refused, naming the
# input and the rule.
# ---------------------------------------------------------------------------------------------------------------------


def _overlapping_view() -> tuple[object, ...]:
    b0 = torch.randn((4, 2))
    return (b0.as_strided((2, 2), (0, 2), 2),)


def _diagonal_data_add(x0: T) -> object:
    t0 = x0.diagonal(0, 1, 0)
    t0.data.add_(2.0)
    return ()


def _diagonal_data_add_returned(x0: T) -> object:
    t0 = x0.diagonal(0, 1, 0)
    t0.data.add_(2.0)
    return (t0, x0 * 1)


@pytest.mark.parametrize("f", [_diagonal_data_add, _diagonal_data_add_returned], ids=["bare", "returned"])
def test_write_through_data_below_overlapping_input_7524(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # seed 11000 #7524, #9684: the diagonal of an input whose rows are one memory location has distinct elements;
    # a write through its `.data` was written back view by view, the last step scattering into the overlapping
    # input, which raised (Note [as_strided On Inputs] now follows the chain through `.data`)
    with torch.no_grad():
        assert_matches_eager(f, _overlapping_view, compile_fn=compile_fn)


def _aliased_nonleaf() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn((4,), requires_grad=True).clone()
        return (b0, b0.view((2, 2)))


def _data_expand_set(x0: T, x1: T) -> object:
    x0.data = x1
    t0 = x0.expand((2, 2, 2))
    set_to(t0, x1)
    return ()


def _data_transpose_write(x0: T, x1: T) -> object:
    x0.data = x1
    t0 = x0.transpose(0, 1)
    t0.mul_(2)
    return ()


_STALE = r"args\[0\] and args\[1\]: the program changes the layout .*`\.data =`.*\(Note \[Stale View Functions\]"


@pytest.mark.parametrize("f", [_data_expand_set, _data_transpose_write], ids=["set_", "mul_"])
def test_data_assigned_view_of_synthetic_base_refused_9696(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # seed 10000 #9696: x0 and x1 share storage, so both are views of a synthetic base; `x0.data = x1` changed x0's
    # layout but not its view function, and autograd's rebase of t0 on set_() (or mul_()) replayed it: expand((2,
    # 2, 2)) of a (4,) tensor raised, where eager's as_strided() does not
    with torch.enable_grad():
        assert_refused(f, _aliased_nonleaf, compile_fn, _STALE)


def _separate_inputs() -> tuple[object, ...]:
    with torch.enable_grad():
        return (torch.randn((4,), requires_grad=True).clone(), torch.randn((2, 2)))


@pytest.mark.parametrize("f", [_data_expand_set, _data_transpose_write], ids=["set_", "mul_"])
def test_data_assigned_input_of_its_own_storage_still_supported(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # The same programs over inputs that share no storage: x0 is no view, nothing is replayed
    with torch.enable_grad():
        assert_matches_eager(f, _separate_inputs, compile_fn=compile_fn)


def _t_then_set_data_to_view(x0: T) -> object:
    t0 = x0.diagonal(-1, 2, 1)
    t1 = t0.transpose(0, 1)
    t0.t_()
    src = t0.data
    set_to(src, t1)
    return ()


def test_set_of_data_to_view_after_t_refused_3406(compile_fn: CompileFn | None) -> None:
    # seed 9000 #3406: t1 is a view of t0 taken with grad and used with grad (the set_() source) after t0.t_(); the
    # refusal was raised in the torch-function mode on `_backward_hooks.__set__`, which torch calls from C++ under
    # set_(), and came out as a SystemError. Setters are no use of a view; set_() itself, which never reaches the
    # torch-function mode, is checked in the dispatch mode
    with torch.enable_grad():
        assert_refused(
            _t_then_set_data_to_view,
            lambda: (nonleaf(1, 1, 3),),
            compile_fn,
            r"args\[0\]: a view taken with grad enabled is used with grad after .* by t_\(\) with grad enabled",
        )


def _set_to_unbound_element(x0: T) -> object:
    t0 = x0.mul(x0)
    t1 = t0.unbind(0)[2]
    set_to(x0, t1)
    t2 = t1.contiguous()
    return (t2,)


def _set_to_unbound_element_bare(x0: T) -> object:
    t0 = x0.mul(x0)
    set_to(x0, t0.unbind(0)[2])
    return ()


def test_set_to_element_of_intermediate_subclass_3608(compile_fn: CompileFn | None) -> None:
    # seed 9000 #3608 without the output: x0 set_() to the third element of an intermediate; the epilogue gave it a
    # fresh storage of 3 elements (offset 2 + 1). The fresh storage now has the intermediate's size, as eager's
    def make_inputs() -> tuple[object, ...]:
        return (pair(4),)

    with torch.no_grad():
        compiled = assert_matches_eager(_set_to_unbound_element_bare, make_inputs, compile_fn=compile_fn)
        got, want = make_inputs(), make_inputs()
        compiled(*got)
        _set_to_unbound_element_bare(cast(T, want[0]))
    for x, name in ((got[0], "compiled"), (want[0], "eager")):
        assert isinstance(x, PairTensor), name
        assert [t.untyped_storage().nbytes() for t in (x.a, x.b)] == [16, 16], name


def _set_to_slice_of_intermediate(x0: T) -> object:
    t0 = x0.mul(x0)
    t1 = t0[2:]
    set_to(x0, t1)
    return (t1.view(2),)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_of_intermediate_set_in_part_refused_3608(kind: str, compile_fn: CompileFn | None) -> None:
    # seed 9000 #3608: t2 (a view of t0, an intermediate x0 was set_() to in part) has eager's `._base` t0; ours
    # was rebuilt over x0's fresh storage, whose elements outside x0's were uninitialized memory in `t2._base`
    # (analyze._check_base_within)
    f = _set_to_unbound_element if kind == "pair" else _set_to_slice_of_intermediate

    def make_inputs() -> tuple[object, ...]:
        return (pair(4),) if kind == "pair" else (torch.randn(4),)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, r"is a view of an intermediate that input 0 was set_\(\) to in part")


def _write_view_then_set_base(x0: T, x1: T, x2: T) -> object:
    x0.copy_(x1)
    set_to(x2, x0)
    return ()


def test_set_of_shared_input_after_grad_write_refused_756(compile_fn: CompileFn | None) -> None:
    # seed 9000 #756: x0 (a diagonal of x2) and x2 are views of one synthetic base; x0.copy_(x1) with x1 requiring
    # grad rebased the base, and x2.set_(x0), x2's history not yet regenerated, took x2 for a leaf that requires grad
    # (RuntimeError). The histories are read after each op with grad; the program is refused by the rule on inputs
    # that gain grad
    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 2))
        return (b0.diagonal(-1, 1, 2), torch.randn((1,), requires_grad=True), b0)

    with torch.enable_grad():
        assert_refused(
            _write_view_then_set_base,
            make_inputs,
            compile_fn,
            r"args\[0\] does not require grad, shares storage with another input, and the program writes a value",
        )


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper r3crash: a view op replayed on a layout other than the one the program took it on
# (after t_(), unsqueeze_(), set_() or `.data =`), which crashed the functional run (fuzz seed 8000 #4353, #6029,
# #6268, #6485). Each is refused, naming the input and the rule (Note [Stale View Functions]).
# ---------------------------------------------------------------------------------------------------------------------


_STALE_r3crash = r"args\[0\] and args\[1\]: the program changes the layout .*\(Note \[Stale View Functions\]"
_FAILS = r"args\[0\]: a view taken with grad enabled is used with grad after .* by set_\(\) .* does not apply"


def _two_views(*shape: int) -> Callable[[], tuple[object, ...]]:
    """Two views of one base: the same object passed twice runs as its own base in the joint trace, whose view
    functions are exact (Note [Aliased Inputs In Training]; test_gradient_types.py)."""

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(*shape)
        return (b0.view(shape), b0.view(shape))

    return make_inputs


def _unsqueeze_transpose_write(x0: T, x1: T) -> object:
    x0.unsqueeze_(-2)
    t0 = x0.transpose(0, 2)
    t0.mul_(t0)
    return ()


def _t_expand_write_other(x0: T, x1: T) -> object:
    x0.t_()
    t0 = x0.expand((4, 1))
    x1.mul_(0.5)
    t0.transpose(0, 1)
    return ()


def test_stale_view_function_replay_fails_refused_4353(compile_fn: CompileFn | None) -> None:
    # seed 8000 #4353: autograd rebuilt t0's history by the synthetic base's view function, which misses
    # unsqueeze_(): transpose(0, 2) of a 2-d tensor (IndexError); there one object passed twice, which now passes
    # (test_gradient_types.py), here two views of one base
    with torch.enable_grad():
        assert_refused(_unsqueeze_transpose_write, _two_views(1, 2), compile_fn, _STALE_r3crash)


def test_stale_view_function_replay_fails_refused_6029(compile_fn: CompileFn | None) -> None:
    # seed 8000 #6029: the same, the function missing t_(): expand((4, 1)) of a (1, 4) tensor (RuntimeError)
    with torch.enable_grad():
        assert_refused(_t_expand_write_other, _two_views(1, 4), compile_fn, _STALE_r3crash)


def _select_data_write(x0: T) -> object:
    t0 = x0.select(0, -4)
    x0.data = t0
    t0.mul_(0.5)
    return ()


def test_select_of_data_assigned_0d_refused_6268(compile_fn: CompileFn | None) -> None:
    # seed 8000 #6268: the check of views used after an in-place view op replayed select() on the 0-d layout
    # `.data =` gave x0 (IndexError); the program is refused by the rule on writes and `.data =` of another size
    with torch.enable_grad():
        assert_refused(
            _select_data_write,
            lambda: (pair_nonleaf(4),),
            compile_fn,
            r"args\[0\]: the program writes this input where autograd records it and assigns its `\.data`",
        )


def _t_then_set_3d(x0: T) -> object:
    t0 = x0.reshape((1, 1, 4))
    t1 = x0.t()
    with torch.no_grad():
        set_to(x0, t0)
    t1.reshape((1, 1, 4))
    return ()


@pytest.mark.parametrize("make", [lambda: (pair_nonleaf(4).t(),), lambda: (nonleaf(4),)], ids=["pair", "plain"])
def test_view_replay_fails_after_no_grad_set_refused_6485(
    make: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    # seed 8000 #6485 (pair): x0.set_() under no_grad bumps the version, and autograd rebuilt t1's history by
    # replaying t() on x0's new 3-d layout (RuntimeError); eager's as_strided() does not replay it
    with torch.enable_grad():
        assert_refused(_t_then_set_3d, make, compile_fn, _FAILS)


def _t_then_no_grad_t_(x0: T) -> object:
    t1 = x0.t()
    with torch.no_grad():
        x0.t_()
    return (t1 * 2,)


def test_view_replayed_after_no_grad_t_still_supported(compile_fn: CompileFn | None) -> None:
    # The replay of t() applies to the new layout: an in-place view op under no_grad is not refused for it
    with torch.enable_grad():
        assert_matches_eager(_t_then_no_grad_t_, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)


def test_view_input_read_with_grad_after_its_base_input_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 26000 #80 (argument changes: the wrapper computes on the returned view, which the plain fuzzer's
    # programs do not). Eager raises "Function AsStridedBackward0 returned an invalid gradient at index 0 - got [4,
    # 2] but expected shape compatible with [3]" in the backward (x0's history is rebuilt over its base's new size);
    # the compiled backward returned gradients. Refused now (Note [Probing Eager's Backward]); the view returned as
    # it came keeps eager's own history and matches eager.
    def f(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            x2.set_(x1)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (x0 + 1.5,)

    def returned(x0: T, x1: T, x2: T) -> object:
        x0.t_()
        with torch.no_grad():
            x2.set_(x1)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3)
        return (b0.t(), torch.randn(4, 2), b0)

    # (refused before the probe runs now: Note [Stale View Functions], fuzz seed 30000 #7742)
    refused_with_grad(f, make_inputs, compile_fn, r"set_\(\) its base args\[2\] to another storage or layout")
    with torch.enable_grad():
        assert_matches_eager(returned, make_inputs, check_grads=True, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# A write with grad, then set_() under no_grad onto another storage: eager keeps the write's history (Note [History
# Kept Through .data =]).
# ---------------------------------------------------------------------------------------------------------------------

_SET_BEFORE_RULE = r"args\[1\]: the program writes this input, .* then set_\(\)s it onto another storage under"


def test_write_then_set_under_no_grad_refused_9616(compile_fn: CompileFn | None) -> None:
    # fuzz seed 80000 #9616: eager's x1 keeps CopyBackwards (zero gradient through the fill) after the set_(); ours
    # kept x1's history from before the call, a gradient where eager's is 0
    def f(x0: T, x1: T) -> object:
        t0, _ = x1.sort(0, descending=True)
        t0.fill_(2.0)
        x1.copy_(t0)
        with torch.no_grad():
            set_to(x1, x0)
        return (x1,)

    refused_with_grad(f, lambda: (torch.randn(()), nonleaf()), compile_fn, _SET_BEFORE_RULE)


@pytest.mark.parametrize("onto", ["input", "intermediate", "none_returned"])
def test_write_then_set_under_no_grad_onto_another_storage_refused(compile_fn: CompileFn | None, onto: str) -> None:
    # the write's MulBackward0 stays x1's grad_fn whatever x1 is set_() onto, returned or not
    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        with torch.no_grad():
            set_to(x1, x0 if onto != "intermediate" else x0 * 3)
        return () if onto == "none_returned" else (x1,)

    refused_with_grad(f, lambda: (torch.randn(3), nonleaf(3)), compile_fn, _SET_BEFORE_RULE)


def test_write_then_set_under_no_grad_of_subclass_refused(compile_fn: CompileFn | None) -> None:
    # the PairTensor kin: its own rule (a subclass input that requires grad whose storage is changed in place)
    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        with torch.no_grad():
            set_to(x1, x0)
        return (x1,)

    refused_with_grad(f, lambda: (pair(3), pair_nonleaf(3)), compile_fn, "metadata or storage changed in place")


def test_set_and_write_under_no_grad_still_supported(compile_fn: CompileFn | None) -> None:
    # no write with grad around the set_(): x1 keeps the history it came with
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 3
        with torch.no_grad():
            set_to(x1, t0)
            x1.mul_(2.0)
        return (x1,)

    check_with_grad(f, lambda: (torch.randn(3), nonleaf(3)), compile_fn)


# fuzz seed 112000 #8003 (helper gc, issue #27): x0.set_(a view of x0 in x0's very layout) under no_grad changes
# nothing but the counter and, as x0.set_(x0) does, renews the leaf's gradient accumulator: the returned leaf's
# accumulator is then a root of its own, run before the node that saved x0 raises (Note [Gradient Accumulators Of
# Leaves]); the set_ was taken for a swap of the same layout, and the leaf kept one accumulator behind the Function.
_SAME_LAYOUT_SOURCES: dict[str, Callable[[T], T]] = {
    "expand": lambda x: x.expand((-1,)),
    "view": lambda x: x.view(-1),
    "slice": lambda x: x[:],
    "detach": lambda x: x.detach(),
}
_SAME_LAYOUT_LEAVES: dict[str, Callable[[], T]] = {
    "leaf": lambda: leaf(4),
    "pair_leaf": lambda: pair(4, requires_grad=True),
}


@pytest.mark.parametrize("kind", sorted(_SAME_LAYOUT_LEAVES))
@pytest.mark.parametrize("source", sorted(_SAME_LAYOUT_SOURCES))
def test_no_grad_set_to_own_layout_renews_the_accumulator(compile_fn: CompileFn | None, kind: str, source: str) -> None:
    # fuzz seed 112000 #8003 (expand, leaf), shrunk
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = _SAME_LAYOUT_SOURCES[source](x0)
        with torch.no_grad():
            set_to(x0, t1)
        return (x0, t0)

    make = _SAME_LAYOUT_LEAVES[kind]
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("kind", sorted(_SAME_LAYOUT_LEAVES))
def test_no_grad_set_to_own_storage_in_another_layout(compile_fn: CompileFn | None, kind: str) -> None:
    # the same with a source of another layout over x0's storage: a swap as before, not taken for x0.set_(x0); a
    # subclass leaf's accumulator is renewed after the call too (its epilogue lays out the inner tensors, not set_)
    def f(x0: T) -> object:
        t0 = x0.sin()
        with torch.no_grad():
            set_to(x0, x0[1:3])
        return (x0, t0)

    make = _SAME_LAYOUT_LEAVES[kind]
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# x.set_(x) of a leaf, and the ops before it that make no autograd node (Note [Gradient Accumulators Of Leaves])
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("before", ["requires_grad_", "contiguous"])
@pytest.mark.parametrize("passed", ["once", "twice"])
@pytest.mark.parametrize("make", ["plain", "pair"])
def test_self_set_of_a_leaf_after_an_op_that_makes_no_node(
    before: str, passed: str, make: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 112000 #8046 (shrunk): x0.requires_grad_() (or a contiguous() returning x0) made no node, so eager's
    # reads all come after the set_() and feed the one new accumulator, which sums the two gradients into a new
    # tensor. Counted as a read before it, the accumulator was renewed after the compiled call, the view replayed
    # after it fed a second one, and the Function's gradient was added in place into the view of the tangent the
    # first had taken as .grad: args[0].grad shared (and wrote) the caller's tangent.
    def f(x0: T, x1: T) -> object:
        if before == "requires_grad_":
            x0.requires_grad_()
        else:
            x0.contiguous()
        with torch.inference_mode():
            set_to(x0, x0)
        t0 = x1.contiguous()
        return (t0.view((1,)), x0.add(x1))

    def make_leaf() -> T:
        return leaf() if make == "plain" else pair(requires_grad=True)

    def make_inputs() -> tuple[object, ...]:
        x = make_leaf()
        return (x, x if passed == "twice" else make_leaf())

    check_with_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("passed", ["once", "twice"])
def test_self_set_of_a_leaf_after_a_contiguous_that_copies(passed: str, compile_fn: CompileFn | None) -> None:
    # the kin of the above where contiguous() copies (a transposed leaf): eager's copy is a node that read the leaf
    # before the set_(), so its accumulator feeds the backward through it
    def f(x0: T, x1: T) -> object:
        c = x0.contiguous()
        with torch.inference_mode():
            set_to(x0, x0)
        return (x1.contiguous().view((6,)), x0.add(x1), c)

    def make_leaf() -> T:
        return torch.randn(3, 2).t().detach().requires_grad_()

    def make_inputs() -> tuple[object, ...]:
        x = make_leaf()
        return (x, x if passed == "twice" else make_leaf())

    check_with_grad(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# A view taken under no_grad of a tensor computed with grad and then set_() under no_grad onto an input's storage
# (fuzz seed 116000 #697). Eager's rule: a view made under no_grad of a tensor that requires grad reports
# requires_grad from its base, live (`requires_grad_through_base`), whatever the view op, the sizes, or a set_() of
# the base before it. Eager's `._base` is the set_() tensor, with its own history over the input's storage, which a
# compiled output cannot have (Note [Outputs Over Another Storage]); ours came back as a view of the input without
# grad. Refused; set_() onto an intermediate's storage is computed by the graph, exactly.
# ---------------------------------------------------------------------------------------------------------------------

_NO_GRAD_VIEW_AFTER_SET_RULE = "a view taken under no_grad of a tensor the program computed with grad and set_"
_NO_GRAD_VIEWS: dict[str, Callable[[T], T]] = {
    "unsqueeze": lambda t: t.unsqueeze(0),
    "alias": lambda t: t[...],
    "unbind": lambda t: t.unbind(0)[0],
    "two_views": lambda t: t.unsqueeze(0).transpose(0, 1),
}
_SET_TARGETS: dict[str, Callable[[T], T]] = {
    "input": lambda y: y,
    "input_view": lambda y: y.view(-1).view(y.shape),
    "intermediate": lambda y: y * 3,
}


def _no_grad_view_after_set(target: str, view: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        with torch.enable_grad():
            t1 = x0 * 2
        with torch.no_grad():
            set_to(t1, _SET_TARGETS[target](x1))
            t2 = _NO_GRAD_VIEWS[view](t1)
        return (t2,)

    return f


@pytest.mark.parametrize("program_grad", [False, True], ids=["no_grad_call", "grad_call"])
@pytest.mark.parametrize("target", list(_SET_TARGETS), ids=str)
@pytest.mark.parametrize("view", list(_NO_GRAD_VIEWS), ids=str)
@pytest.mark.parametrize("subclass", [False, True], ids=["plain", "pair"])
def test_no_grad_view_of_a_tensor_set_under_no_grad(
    subclass: bool, view: str, target: str, program_grad: bool, compile_fn: CompileFn | None
) -> None:
    # variants of fuzz seed 116000 #697: eager's view requires grad through the set_() tensor, its `._base`
    def make_inputs() -> tuple[object, ...]:
        if subclass:
            return (pair_nonleaf(2, 3), pair(2, 3))
        return (nonleaf(2, 3), torch.randn(2, 3))

    f = _no_grad_view_after_set(target, view)
    with torch.enable_grad() if program_grad else torch.no_grad():
        if target == "intermediate":
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        else:
            assert_refused(f, make_inputs, compile_fn, _NO_GRAD_VIEW_AFTER_SET_RULE)


# fuzz seed 116000 #697
def test_view_of_a_clone_with_grad_set_onto_a_view_of_another_input(compile_fn: CompileFn | None) -> None:
    # the shrunk program: a clone made with grad set_() onto a (1, 1, 1) view of the other input, unsqueezed; ours
    # came back with requires_grad False
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((), requires_grad=True).clone(), torch.randn(()))

    def f(x0: T, x1: T) -> object:
        t0 = x1.view((1, 1, 1))
        with torch.enable_grad():
            t1 = x0.clone()
        set_to(t1, t0)
        return (t1.unsqueeze(-3),)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, _NO_GRAD_VIEW_AFTER_SET_RULE)


# ---------------------------------------------------------------------------------------------------------------------
# Views taken under no_grad of a view an input's set_() left on its old storage (fuzz seed 122911 #107, PairTensor):
# eager's views taken after the set_() are fresh (is_leaf reads True); ours, replayed whole before the epilogue, whose
# set_() advanced their counter, raised. The chain's steps after the set_() are taken after the epilogue (Note [Views
# That Raise After A Bump]); a chain taken wholly before the set_() still raises as eager's.
# ---------------------------------------------------------------------------------------------------------------------


def _views_around_set(after: int) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        t0 = x0.reshape((4, -1, 1))
        t1 = t0.view((2, 1, 2)) if after < 2 else t0
        if after < 1:
            t1 = t1.select(2, -1)
        set_to(x0, x1)
        if after >= 2:
            t1 = t1.view((2, 1, 2))
        if after >= 1:
            t1 = t1.select(2, -1)
        return (t1,)

    return f


@pytest.mark.parametrize("after", [0, 1, 2])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_views_taken_after_input_set_under_no_grad(compile_fn: CompileFn | None, kind: str, after: int) -> None:
    make = pair_nonleaf if kind == "pair" else nonleaf
    other = pair if kind == "pair" else torch.randn

    def make_inputs() -> tuple[object, ...]:
        return (make(4), other(4))

    check_no_grad(_views_around_set(after), make_inputs, compile_fn)


@pytest.mark.parametrize("target", ["expand", "itself"])
@pytest.mark.parametrize("make", ["plain", "pair"])
def test_self_set_of_a_leaf_then_a_custom_function_reads_it(
    target: str, make: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117200 #6506: a custom Function's apply reads the leaf (its forward's ops run with grad off). Read
    # after the set_(), its node feeds the new accumulator, as does the view taken before (its node made again at
    # the backward's read); the Function's edge must too, or, with the view written after the call, the view's
    # gradient reaches args[0].grad before the Function's backward raises, where eager's stays None
    def f(x0: T) -> object:
        t0 = x0.expand(x0.shape)
        with torch.no_grad():
            set_to(x0, t0 if target == "expand" else x0)
        return (t0, SinFunction.apply(x0))  # type: ignore[no-untyped-call]  # untyped in torch

    def make_inputs() -> tuple[object, ...]:
        return (leaf(4) if make == "plain" else pair(4, requires_grad=True),)

    check_with_grad(f, make_inputs, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# A leaf set_() under no_grad (to itself or to another input) after an op with grad read it whose result died (fuzz
# seed 117600 #5431: `x0.data.copy_(x0)`, whose copy recorded a CopyBackwards on the temporary `x0.data`). Eager's set_()
# renews the leaf's gradient accumulator; the node made before died with its result, so every live node feeds the one
# made after, as the returned leaf does: with the outputs written after the call, the backward through the sin()
# raises before anything reaches args[0].grad, which stays None. Counted as a read before the set_(), ours renewed the
# accumulator after the compiled call (for a plain leaf set_() to another input, the epilogue's set_() did so): the
# returned leaf, a root of its own, got a gradient first (Note [Gradient Accumulators Of Leaves]).
# ---------------------------------------------------------------------------------------------------------------------

_DEAD_READS: dict[str, Callable[[T], object]] = {
    "data_copy": lambda x: x.data.copy_(x),
    "discarded": lambda x: x.sin(),
    "none": lambda x: None,
}


def _set_after_dead_read(before: str, target: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        _DEAD_READS[before](x0)
        with torch.no_grad():
            set_to(x0, x0 if target == "itself" else x1)
        t0 = x0.sin()
        return (x0, t0)

    return f


@pytest.mark.parametrize("target", ["itself", "other"])
@pytest.mark.parametrize("before", sorted(_DEAD_READS))
@pytest.mark.parametrize("make", ["plain", "pair"])
def test_leaf_set_under_no_grad_after_a_read_whose_result_died(
    make: str, before: str, target: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117600 #5431 (data_copy, itself, plain), shrunk; "none", "other", plain failed the same way
    def make_leaf() -> T:
        return leaf(4) if make == "plain" else pair(4, requires_grad=True)

    f = _set_after_dead_read(before, target)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make_leaf(), make_leaf()), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (make_leaf(), make_leaf()), compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("target", ["itself", "other"])
@pytest.mark.parametrize("make", ["plain", "pair"])
def test_leaf_set_under_no_grad_between_reads_that_live_is_refused(
    make: str, target: str, compile_fn: CompileFn | None
) -> None:
    # the kin where the read before lives on (returned) and saved the leaf, whose set_() moved its counter: eager's
    # nodes feed two accumulators, the returned leaf the second, which the Function's one edge cannot
    def f(x0: T, x1: T) -> object:
        t0 = x0.cos()
        with torch.no_grad():
            set_to(x0, x0 if target == "itself" else x1)
        return (x0, x0.sin(), t0)

    def make_leaf() -> T:
        return leaf(4) if make == "plain" else pair(4, requires_grad=True)

    rule = "set_\\(\\) under no_grad \\(to itself or to another tensor\\) and read with grad both before and after"
    refused_with_grad(f, lambda: (make_leaf(), make_leaf()), compile_fn, rule)


@pytest.mark.xfail(strict=True, reason="known gap: one Function edge for a leaf whose live nodes feed two accumulators")
@pytest.mark.parametrize("make", ["plain", "pair"])
def test_leaf_set_under_no_grad_between_reads_that_live_then_outputs_written(
    make: str, compile_fn: CompileFn | None
) -> None:
    # the kin where nothing raises until the caller writes the outputs (the read before saved nothing): eager's
    # backward raises at the sin() before the returned leaf's accumulator, which waits on it, runs; ours gives the
    # returned leaf, whose accumulator the renewal after the call made apart from the Function's, a gradient first.
    # It should match eager (args[0].grad None) or be refused by name
    def f(x0: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(x0, x0)
        return (x0, x0.sin(), t0)

    def make_leaf() -> T:
        return leaf(4) if make == "plain" else pair(4, requires_grad=True)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make_leaf(),), compile_fn=compile_fn, after_call=write_outputs)


_SUBCLASS_RELAID_RULE = "a tensor subclass input that requires grad has its metadata or storage changed in place"


def _input_set_to_its_base_under_no_grad(then: str) -> Callable[..., object]:
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x1, x0)
        if then == "t_":
            x0.t_()
            return (x0 * 2,)
        x0.mul_(2)
        return ()

    return f


@pytest.mark.parametrize("then", ["t_", "mul_"])
@pytest.mark.parametrize("view", ["unbind", "select", "clone"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_input_set_under_no_grad_keeps_its_history_when_its_storage_is_written_with_grad(
    compile_fn: CompileFn | None, kind: str, view: str, then: str
) -> None:
    """x1, a view of the non-leaf x0 (or a clone of one), set_() to x0 under no_grad, then x0 changed with grad:
    eager's set_() records nothing on x1 (a view's history is rebuilt from its base at the next read; an unbind()
    output's read raises there, a multi-output view modified in place), so the epilogue lays x1 out anew under
    no_grad too. Its as_strided_ with grad raised "Output 2 of Unbind is a view and is being modified inplace" (fuzz
    seed 117700, program 1307: CRASHED), and gave the select() view's base a wrong gradient after mul_. A PairTensor
    view input is refused by the rule for subclass inputs requiring grad laid out anew."""
    wrap = kind == "pair"

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = (pair(3, requires_grad=True) if wrap else torch.randn(3, requires_grad=True)).clone()
            if view == "unbind":
                return (b0, b0.unsqueeze(0).unbind(1)[2])
            return (b0, b0[2] if view == "select" else b0[2].clone())

    f = _input_set_to_its_base_under_no_grad(then)
    if wrap and view != "clone":
        refused_with_grad(f, make_inputs, compile_fn, _SUBCLASS_RELAID_RULE if then == "t_" else "shares storage")
        return
    check_with_grad(f, make_inputs, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# View inputs that require grad, set_() under no_grad, then read with grad (fuzz seeds 119500-119700, issue #27):
# eager's set_() bumps the version, and the read rebuilds the view's grad_fn as an as_strided() of its base at the new
# layout, whatever storage the view now reads; where those positions are among the input's own, each read goes
# through `_Relaid`, which takes the gradient from them to the layout the input came with (Note [Stale View
# Functions]). Before, refused ("gets another layout from an in-place view op or a set_() under torch.no_grad()").
def _set_to_own_slice(x0: T, x1: T) -> object:
    with torch.no_grad():
        set_to(x0, x0[1:3])
    return (x0 * torch.arange(1.0, 3.0),)


def _set_to_own_element_expanded(x0: T, x1: T) -> object:
    with torch.no_grad():
        set_to(x0, x0[2:3].expand(3))  # (one position three times: eager's backward sums them)
    return (x0 * torch.arange(1.0, 4.0), x0.sum() * 2)


def _row_of(b: T) -> T:
    return b[1]  # (positions 4 to 7)


def _row_expanded(b: T) -> T:
    return b[1].expand(2, 4)  # (each of the positions 4 to 7 twice)


@pytest.mark.parametrize("f", [_set_to_own_slice, _set_to_own_element_expanded])
@pytest.mark.parametrize("view", [_row_of, _row_expanded])
@pytest.mark.parametrize("leaf_base", [True, False])
def test_view_input_set_under_no_grad_within_its_positions_then_read_with_grad(
    f: Callable[[T, T], object], view: Callable[[T], T], leaf_base: bool, compile_fn: CompileFn | None
) -> None:
    def make() -> tuple[T, ...]:
        with torch.enable_grad():
            b = torch.randn(3, 4, requires_grad=True)
            return (view(b if leaf_base else b.clone()), torch.randn(8))

    if view is _row_expanded:

        def g(x0: T, x1: T) -> object:  # (the view's elements, not its first row: positions 4 to 7)
            with torch.no_grad():
                set_to(x0, x0[0])
            return f(x0, x1)

        check_with_grad(g, make, compile_fn)
    else:
        check_with_grad(f, make, compile_fn)


_RELAYOUTS: dict[str, Callable[[T], object]] = {
    "set_to_a_clone": lambda x: set_to(x, x.detach().clone()),  # (another storage, at offset 0)
    "set_to_own_transpose": lambda x: set_to(x, x.detach().t()),  # (the positions the view holds, transposed)
    "t_": lambda x: x.t_(),  # (a square view: the same size, the elements transposed)
}
_FUNCTION_READS: dict[str, Callable[[T], object]] = {
    "two_views": lambda x: (ViewAsAndRowOfOwnTensor.apply(x)[1],),  # type: ignore[no-untyped-call]  # untyped in torch
    "sin": lambda x: (SinFunction.apply(x),),  # type: ignore[no-untyped-call]  # untyped in torch
}


_RELAID_VIEW_RULE = (
    "(an input that is a view and requires grad gets another layout|a view the program took is set_\\(\\) under "
    "torch.no_grad\\(\\) to a tensor of another layout, and .*apply is then applied to it|the program changes the "
    "layout \\(t_, .* of a view \\(one it took)"
)


@pytest.mark.parametrize("read", sorted(_FUNCTION_READS))
@pytest.mark.parametrize("relayout", sorted(_RELAYOUTS))
@pytest.mark.parametrize("view", ["input", "taken"])
def test_view_relaid_under_no_grad_then_read_by_a_custom_function(
    view: str, relayout: str, read: str, compile_fn: CompileFn | None
) -> None:
    # issue #27 (hfnv5): a custom Function's apply is the read with grad of its input (its ops run with grad off
    # inside), which no stand-in replaced: eager rebuilds the view's history by as_strided() of its base at the new
    # layout (`set_to_a_clone`: its first row, not the view's own), the Function's edge went to the traced history of
    # the layout the view had before, and the base got its gradient at the wrong positions. Now refused as any read
    # of the view through its traced history is (Note [Stale View Functions]); a view the program took (`taken`)
    # likewise
    def f(x0: T) -> object:
        v = x0 if view == "input" else x0[1]
        with torch.no_grad():
            _RELAYOUTS[relayout](v)
        return _FUNCTION_READS[read](v)

    def make() -> tuple[T, ...]:
        with torch.enable_grad():
            b = torch.randn(4, 3, 3, requires_grad=True)
            return (b[1] if view == "input" else b,)

    refused_with_grad(f, make, compile_fn, _RELAID_VIEW_RULE)


def test_view_input_set_under_no_grad_to_its_own_layout_then_read_by_a_custom_function(
    compile_fn: CompileFn | None,
) -> None:
    # the history eager rebuilds at the layout the input came with is the traced one: still supported
    def f(x0: T) -> object:
        with torch.no_grad():
            set_to(x0, x0.detach())
        return (ViewAsAndRowOfOwnTensor.apply(x0)[1],)  # type: ignore[no-untyped-call]  # untyped in torch

    check_with_grad(f, lambda: (nonleaf(4, 3, 3)[1],), compile_fn)


def test_view_input_set_under_no_grad_elsewhere_then_read_without_a_gradient(compile_fn: CompileFn | None) -> None:
    # fuzz seed 119500 #2595: set_() to another storage, read with grad, nothing differentiated through the read:
    # eager's rebuilt history is never used. A gradient reaching it is refused: eager sends it to the base's positions
    # at the offsets the view has in the other storage, which the run's input need not keep (its storage may start
    # at the view)
    def unused(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1[:2])
        x0.mul(2)  # (its result unused)
        return (x1 + 1,)

    def used(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1[:2])
        return (x0 * 2,)

    def make() -> tuple[T, ...]:
        return (nonleaf(3, 4)[1], torch.randn(8))

    check_with_grad(unused, make, compile_fn)
    refused_with_grad(used, make, compile_fn, "set_\\(\\) under torch.no_grad\\(\\) to a layout over another storage")


def test_view_input_set_with_grad_then_its_flag_read(compile_fn: CompileFn | None) -> None:
    # fuzz seeds 119600 #7806, 119700 #223, #275: a set_() with grad (torch sets `_backward_hooks`), the swap mode's
    # own metadata change of the set_() tensor, and a `.requires_grad` read read no history: refused before as reads
    # with grad of a view input relaid under no_grad
    def set_with_grad(x0: T, x1: T) -> object:
        set_to(x0, x1)
        return (x1 * 2,)

    def flag_read(x0: T, x1: T) -> object:
        x0.data = x1.t()
        return (x0.requires_grad, x1 * 2)

    def make() -> tuple[T, ...]:
        return (nonleaf(3)[1:].unsqueeze(0), torch.randn(2, 3))

    check_with_grad(set_with_grad, make, compile_fn)
    check_with_grad(flag_read, make, compile_fn)


@pytest.mark.parametrize("returned", ["nothing", "another_input"])
def test_view_input_set_under_no_grad_then_requires_grad_(returned: str, compile_fn: CompileFn | None) -> None:
    # Issue #27 (fuzz seed 121008 #8078's sibling): requires_grad_() on a non-leaf reads no history (it checks
    # `grad_fn_` itself, eager rebuilds no view's grad_fn there): refused before as a read with grad of a view input
    # relaid under no_grad ("gets another layout from an in-place view op or a set_() under torch.no_grad()")
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        x0.requires_grad_()
        return (x1 * 2,) if returned == "another_input" else ()

    def unbind_output() -> tuple[T, ...]:
        return (leaf(3).unbind(0)[1], torch.randn(2))

    def transposed() -> tuple[T, ...]:
        return (nonleaf(2, 3).t(), torch.randn(2, 3))

    check_with_grad(f, unbind_output, compile_fn)
    check_with_grad(f, transposed, compile_fn)


@pytest.mark.parametrize("view", ["unbind", "t"])
def test_view_input_set_in_inference_mode_then_its_data_written(view: str, compile_fn: CompileFn | None) -> None:
    # Issue #27 (fuzz seed 121008 #2809): the `.data` getter reads no history (its alias has a counter of its own, and
    # x1's grad_fn is not rebuilt): refused before as a read with grad of x1 after a set_() to another size ("gets
    # another layout from an in-place view op or a set_() under torch.no_grad()")
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(1)
        with torch.inference_mode():
            set_to(x1, t0)
        x1.data.mul_(x0)
        return ()

    def make() -> tuple[T, ...]:
        b1 = nonleaf(1, 2, 4)
        return (torch.randn(()), b1.unbind(0)[0] if view == "unbind" else b1[0].t())

    check_with_grad(f, make, compile_fn)


# A view input set_() under no_grad to positions of its own storage, then relaid by t_() (no `_Relaid` stand-in: the
# first set_() is not the last layout change), then read with grad by a call at which eager rebuilds no history: a
# size, stride or contiguity query returns no tensor and records no node (hrec4, #28). Before, each was taken as a read
# of the stale history, refused ("gets another layout from an in-place view op or a set_() under torch.no_grad()");
# a read that records a node (sum(), a view by indexing) or reads `.grad_fn` stays refused.
_SIZE_READS: dict[str, Callable[[T], object]] = {
    "size": lambda x: x.size(0),
    "numel": lambda x: x.numel(),
    "dim": lambda x: x.dim(),
    "stride": lambda x: x.stride(0),
    "storage_offset": lambda x: x.storage_offset(),
    "is_contiguous": lambda x: x.is_contiguous(),
}


def _set_in_place_then_transposed(x: T) -> None:
    with torch.no_grad():
        x.set_(x.untyped_storage(), x.storage_offset(), (2, 2), (1, 3))
        x.t_()


def _view_of_a_nonleaf() -> tuple[T]:
    return (nonleaf(3, 3)[:, 1:],)


@pytest.mark.parametrize("read", sorted(_SIZE_READS))
def test_view_input_set_and_relaid_under_no_grad_then_size_read_with_grad_matches_eager(
    read: str, compile_fn: CompileFn | None
) -> None:
    def f(x: T) -> object:
        _set_in_place_then_transposed(x)
        n = _SIZE_READS[read](x)
        return (torch.full((2,), float(cast(int, n))),)

    with torch.enable_grad():
        assert_matches_eager(f, _view_of_a_nonleaf, compile_fn=compile_fn)


@pytest.mark.parametrize("read", ["sum", "getitem", "grad_fn"])
def test_view_input_set_and_relaid_under_no_grad_then_read_through_its_history_refused(
    read: str, compile_fn: CompileFn | None
) -> None:
    reads: dict[str, Callable[[T], object]] = {
        "sum": lambda x: x.sum(),
        "getitem": lambda x: x[0],
        "grad_fn": lambda x: x.grad_fn,
    }

    def f(x: T) -> object:
        _set_in_place_then_transposed(x)
        reads[read](x)
        return ()

    refused_with_grad(
        f, _view_of_a_nonleaf, compile_fn, "an input that is a view and requires grad gets another layout"
    )
