"""Views made under no_grad and views of multi-output ops (unbind, split, chunk): autograd's "A view was created in
no_grad mode ..." error where eager raises it and nowhere else, and requires_grad / is_leaf / grad_fn of such views
(Note [Views That Raise After A Bump]).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.parity import write_outputs
from subclassaot.torch_internals import grad_fn_raises
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_call_matches_eager, assert_matches_eager, assert_raises_like_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
    DirtyScale,
    SinFunction,
    assert_refused,
    backward_through,
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
    twice,
)
from tests.pipeline.program_helpers import check_no_grad as _no_grad_parity

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper nograd17: autograd's "A view was created in no_grad mode ..." error.
#
# * fuzz seed 17000 #1356 (under no_grad): an output view of an unbind() input, taken after the program's last write
#   to the input, raised on is_leaf and grad_fn where eager's reads fine: a write to an intermediate of its own
#   storage counted as a write to an input (Note [Views That Raise After A Bump]).
# * fuzz seed 49000 #988 (training): a node that saved a no_grad view and ends a cut path (the view has no grad_fn)
#   did not run in the traced backward, so eager's error when it unpacks the view, written through its base since,
#   was missing (Note [Backward Errors Are Deferred]).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


def _pair_leaf(*shape: int) -> T:
    return pair(*shape, requires_grad=True)


_BASES: dict[str, Callable[[], T]] = {
    "leaf": lambda: leaf(2),
    "nonleaf": lambda: nonleaf(2),
    "pair_leaf": lambda: _pair_leaf(2),
    "pair_nonleaf": lambda: pair_nonleaf(2),
}
_BASE_KINDS = sorted(_BASES)

_TAKE: dict[str, Callable[[T], T]] = {
    "unbind": lambda b: b.unbind(0)[1],
    "chunk": lambda b: b.chunk(2)[1],
    "select": lambda b: b[1],
    "diagonal": lambda b: b.unsqueeze(0).expand(2, 2).diagonal(),
}
_TAKE_KINDS = sorted(_TAKE)


def _input_view(base: str, take: str) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (_TAKE[take](_BASES[base]()),)

    return make_inputs


def _squared_then_expanded_beside_a_written_sum(x0: T) -> object:
    x0.mul_(x0)
    t0 = x0.expand(())
    t1 = x0.sum()
    t1.zero_()
    return (t0,)


def test_expand_of_a_squared_unbind_view_beside_a_written_sum(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #1356, shrunk: under no_grad
    check_no_grad(_squared_then_expanded_beside_a_written_sum, _input_view("leaf", "unbind"), compile_fn)


def _expand_after_write(x0: T) -> object:
    # fuzz seed 17000 #1356 for an input of any shape
    x0.mul_(x0)
    t0 = x0.expand_as(x0)
    t1 = x0.sum()
    t1.zero_()
    return (t0,)


def _view_after_write(x0: T) -> object:
    x0.mul_(2.0)
    t0 = x0.view(-1)
    t1 = x0.sum()
    t1.zero_()
    return (t0,)


def _view_before_write(x0: T) -> object:
    t0 = x0.view(-1)
    x0.mul_(2.0)
    t1 = x0.sum()
    t1.zero_()
    return (t0,)


def _view_between_writes(x0: T) -> object:
    x0.mul_(2.0)
    t0 = x0.view(-1)
    t1 = x0.sum()
    t1.zero_()
    x0.add_(1.0)
    return (t0, x0)


@pytest.mark.parametrize("base", _BASE_KINDS)
@pytest.mark.parametrize("take", _TAKE_KINDS)
@pytest.mark.parametrize("fn", [_expand_after_write, _view_after_write, _view_before_write, _view_between_writes])
def test_view_of_view_input_intermediate_written_no_grad(
    compile_fn: CompileFn | None, base: str, take: str, fn: Callable[[T], object]
) -> None:
    # fuzz seed 17000 #1356 and variants: the input a view (of a leaf or not) made with grad; called under no_grad
    check_no_grad(fn, _input_view(base, take), compile_fn)


@pytest.mark.parametrize("base", _BASE_KINDS)
@pytest.mark.parametrize("take", _TAKE_KINDS)
def test_view_of_view_input_intermediate_written_with_grad(compile_fn: CompileFn | None, base: str, take: str) -> None:
    # fuzz seed 17000 #1356 called with grad: the write under no_grad, the rest with grad
    # (x0 read with grad after its base's counter moved raises for an unbind() or split() view: all under no_grad)
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.mul_(2.0)
            t0 = x0.view(-1)
            t1 = x0.sum()
        t1.zero_()
        return (t0,)

    check_with_grad(f, _input_view(base, take), compile_fn)


_INPUTS: dict[str, Callable[[], T]] = {"nonleaf": lambda: nonleaf(4), "pair_nonleaf": lambda: pair_nonleaf(4)}
_INPUT_KINDS = sorted(_INPUTS)

_VIEW: dict[str, Callable[[T], T]] = {
    "unbind": lambda x: x.unbind(0)[2],
    "chunk": lambda x: x.chunk(4)[2],
    "select": lambda x: x[2],
    "expand": lambda x: x.expand(2, 4),
    "diagonal": lambda x: x.unsqueeze(0).expand(4, 4).diagonal(),
}
_VIEW_KINDS = sorted(_VIEW)


def _no_grad_view_read_then_base_written(view: Callable[[T], T]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = view(x0)
        t1 = t0.sin()
        x0.add_(t1.sum())
        return (t1,)

    return f


@pytest.mark.parametrize("kind", _INPUT_KINDS)
def test_no_grad_view_read_with_grad_then_base_written(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 49000 #988, shrunk (generated with a PairTensor non-leaf)
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.unbind(0)[2]
        t1 = t0.sin()
        x0.add_(t1)
        return (t1,)

    check_with_grad(f, lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
def test_saved_no_grad_view_written_after(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # fuzz seed 49000 #988 with other views: the node that saved the view runs in eager's backward and raises
    check_with_grad(_no_grad_view_read_then_base_written(_VIEW[view]), lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
def test_saved_no_grad_view_written_after_no_grad(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # fuzz seed 49000 #988 called under no_grad: nothing is saved
    check_no_grad(_no_grad_view_read_then_base_written(_VIEW[view]), lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
def test_saved_no_grad_view_written_before(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # fuzz seed 49000 #988 with the write before the view is used with grad: eager raises in the forward
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = _VIEW[view](x0)
        x0.add_(1.0)
        t1 = t0.sin()
        return (t1, x0)

    with torch.enable_grad():
        assert_raises_like_eager(f, lambda: (_INPUTS[kind](),), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
@pytest.mark.parametrize("through", [None, 0, 1])
def test_saved_no_grad_view_written_under_no_grad(
    compile_fn: CompileFn | None, kind: str, view: str, through: int | None
) -> None:
    # fuzz seed 49000 #988 with the write under no_grad too: eager's backward through t1 raises the saved-tensor
    # error, through the other output alone it completes: the backward graph is traced without t1's tangent, which
    # raises (Note [Backward Errors Are Deferred]; once refused, until the probe ran eager's order: issue #27)
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = _VIEW[view](x0)
        t1 = t0.sin()
        with torch.no_grad():
            x0.add_(1.0)
        return (t1, x0 * 2.0)

    after_call = None if through is None else backward_through(through)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_INPUTS[kind](),), compile_fn=compile_fn, after_call=after_call)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
def test_saved_no_grad_view_written_under_no_grad_alone(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # the same with t1 the only output: the backward error is deferred
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = _VIEW[view](x0)
        t1 = t0.sin()
        with torch.no_grad():
            x0.add_(1.0)
        return (t1,)

    check_with_grad(f, lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
def test_saved_no_grad_view_only_used(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # fuzz seed 49000 #988 with the stale node behind another output: eager's backward through it raises
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = _VIEW[view](x0)
        t1 = t0.sin()
        t2 = t1 * 2.0
        x0.mul_(2.0)
        return (t2.sum(),)

    check_with_grad(f, lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
def test_saved_no_grad_view_unwritten(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 49000 #988 without the write: the node reads its saved view fine
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.unbind(0)[2]
        return (t0.sin(), x0 * 2.0)

    check_with_grad(f, lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
def test_saved_detached_written_after(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 49000 #988 with a detach() (no view of a base that requires grad): eager's end node raises the
    # "modified by an inplace operation" error
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.sin()
        t0.add_(1.0)
        return (t1 * x0,)

    check_with_grad(f, lambda: (_INPUTS[kind](),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper n5952: a no_grad view of a detach() whose base the program then wrote with a value that
# requires grad, replayed after the epilogue (fuzz seed 16000 #5952, diverged). Eager's view requires grad through its
# `._base` and its grad_fn raises autograd's view-after-write error; ours came back without requires_grad, as the
# replayed `._base` was given requires_grad only for views rebuilt before the epilogue. The runtime's bump of the
# view's counter after the replay (Replay.bump_after) makes ours raise too (Note [Views That Raise After A
# Bump]).
# ---------------------------------------------------------------------------------------------------------------------


_MAKERS: dict[str, Callable[[], T]] = {
    "leaf": lambda: leaf(4),
    "nonleaf": lambda: nonleaf(4),
    "pair": lambda: pair(4, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(4),
}
_KINDS = sorted(_MAKERS)


def _transposed_and_zeroed_under_no_grad_then_written(x0: T, x1: T, x2: T) -> object:
    # fuzz seed 16000 #5952 as generated: x0, x1 and x2 are one tensor
    with torch.no_grad():
        x1.t_()
    t0 = x2.detach()
    with torch.no_grad():
        x1.zero_()
        t1 = t0.view((4, 1, 1))
    t0.mul_(x2)
    return (x1, t1, x2)


@pytest.mark.parametrize("kind", _KINDS)
def test_one_tensor_thrice_transposed_and_zeroed_under_no_grad_then_written(
    compile_fn: CompileFn | None, kind: str
) -> None:
    # fuzz seed 16000 #5952 (generated with a PairTensor leaf; plain and non-leaf inputs behave the same)
    def make_inputs() -> tuple[object, ...]:
        x = _MAKERS[kind]()
        return (x, x, x)

    check_with_grad(_transposed_and_zeroed_under_no_grad_then_written, make_inputs, compile_fn)


def _shrunk(x: T) -> object:
    # the t_() under no_grad makes the view replay after the epilogue; without it, it replays before (as tested in
    # this file)
    with torch.no_grad():
        x.t_()
    t0 = x.detach()
    with torch.no_grad():
        t1 = t0.view((4, 1, 1))
    t0.mul_(x)
    return (t1,)


@pytest.mark.parametrize("kind", _KINDS)
def test_no_grad_view_of_detach_written_after_in_place_view_op(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952, shrunk
    check_with_grad(_shrunk, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _KINDS)
def test_no_grad_view_of_detach_written_after_in_place_view_op_no_grad(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952, shrunk, under no_grad: nothing gains grad
    check_no_grad(_shrunk, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _KINDS)
def test_no_grad_view_of_detach_written_without_t(compile_fn: CompileFn | None, kind: str) -> None:
    # fuzz seed 16000 #5952 without the t_(): replayed before the epilogue (passed before)
    def f(x0: T, x1: T) -> object:
        t0 = x1.detach()
        with torch.no_grad():
            x0.zero_()
            t1 = t0.view((4, 1, 1))
        t0.mul_(x1)
        return (x0, t1, x1)

    check_with_grad(f, twice(_MAKERS[kind]), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "pair_nonleaf"])
def test_no_grad_view_of_detach_of_other_input_after_unsqueeze(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: another in-place view op, and two views of the detach, a view of a view, and an
    # output computed from the input
    def f(x: T) -> object:
        with torch.no_grad():
            x.unsqueeze_(0)
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
            t2 = t0.unsqueeze(0)
        t3 = t1.squeeze(-1)
        t0.mul_(x)
        return (t1, t2, t3, x.sin())

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["nonleaf", "pair"])
def test_no_grad_views_of_detach_written_through_a_slice(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: the write reaches the detach through a view of it, the view taken by unbind()
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0[1:]
        a, _ = t0.view(2, 2).unbind(0)
        t0[:2].mul_(x[:2])
        return (t1, a)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "pair"])
def test_no_grad_view_of_detach_copied_with_grad_after_data_write(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a data write and a t_() of the input under no_grad, the detach written by copy_
    def f(x: T) -> object:
        with torch.no_grad():
            x.mul_(2)
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.copy_(x)
        return (t1,)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["nonleaf", "pair"])
def test_no_grad_view_of_detach_of_other_input(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: the detach of one input written with the other
    def f(x: T, y: T) -> object:
        with torch.no_grad():
            y.t_()
        t0 = y.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.mul_(x)
        return (t1,)

    check_with_grad(f, lambda: (_MAKERS[kind](), _MAKERS[kind]()), compile_fn)


@pytest.mark.parametrize("kind", ["pair", "pair_nonleaf"])
def test_no_grad_view_of_detach_of_subclass_intermediate(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a subclass intermediate's detach, its view replayed from the intermediate
    def f(x: T) -> object:
        y = x * 2
        with torch.no_grad():
            y.t_()
        t0 = y.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.mul_(x)
        return (t1, y)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


def test_no_grad_view_of_detach_written_without_grad(compile_fn: CompileFn | None) -> None:
    # beside fuzz seed 16000 #5952: a write without grad leaves the detach and its view without requires_grad
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t0.mul_(2.0)
        return (t1, t0)

    check_with_grad(f, lambda: (nonleaf(4),), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "nonleaf", "pair_nonleaf"])
def test_views_of_no_grad_view_of_detach_on_square_input(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a t_() that moves the layout, a view of the no_grad view taken with grad before
    # the write, both returned (the `._base` gains requires_grad only once both are built)
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        t0 = x.detach()
        with torch.no_grad():
            t1 = t0[0]
        t2 = t1.unsqueeze(0)
        t0.add_(x * 2)
        return (t2, t1, x * 3)

    makers: dict[str, Callable[[], T]] = {
        "leaf": lambda: leaf(3, 3),
        "nonleaf": lambda: nonleaf(3, 3),
        "pair_nonleaf": lambda: pair_nonleaf(3, 3),
    }
    check_with_grad(f, lambda: (makers[kind](),), compile_fn)


@pytest.mark.parametrize("kind", ["pair", "pair_nonleaf"])
def test_views_of_no_grad_view_of_detach_of_subclass_intermediate(compile_fn: CompileFn | None, kind: str) -> None:
    # beside fuzz seed 16000 #5952: a view taken with grad of the no_grad view, before the write
    def f(x: T) -> object:
        y = x * 2
        with torch.no_grad():
            y.t_()
        t0 = y.detach()
        with torch.no_grad():
            t1 = t0.view((4, 1, 1))
        t3 = t1.squeeze(-1)
        t0.mul_(x)
        return (t1, t3)

    check_with_grad(f, lambda: (_MAKERS[kind](),), compile_fn)


def _flagged_detach_viewed(x0: T) -> object:
    # fuzz seed 123280 #324 as generated (x0 a 0-d tensor)
    t0 = x0.detach()
    if not t0.requires_grad:
        t0.requires_grad_()
    return (t0.view((1, 1)),)


def _flagged_detach_viewed_before(x0: T) -> object:
    t0 = x0.detach()
    t1 = t0.unsqueeze(0)
    t0.requires_grad = True
    return (t1,)


def _flagged_detach_viewed_twice(x0: T) -> object:
    t0 = x0.detach()
    t0.requires_grad_()
    return (t0.view((1, 1)).view((1,)), t0.unsqueeze(0), x0)


_INFERENCE_INPUTS: dict[str, Callable[[], T]] = {
    "plain": lambda: torch.randn(()),
    "row": lambda: torch.randn(2)[0],
    "pair": pair,
}


@pytest.mark.parametrize("kind", list(_INFERENCE_INPUTS))
@pytest.mark.parametrize("f", [_flagged_detach_viewed, _flagged_detach_viewed_before, _flagged_detach_viewed_twice])
def test_no_grad_view_of_a_detach_the_program_made_require_grad(
    compile_fn: CompileFn | None, f: Callable[[T], object], kind: str
) -> None:
    # fuzz seed 123280 #324 (diverged: requires_grad False vs eager True), a call under no_grad: t0 = x0.detach() is a
    # leaf the program made require grad, and a view of it made under no_grad reads t0's flag (no gradient of its own).
    # The output replays x0.detach().view(...), whose `._base`, a fresh detach(), is given the flag (OutputInfo.
    # base_gains_grad: Note [Views That Raise After A Bump]), not the view, which a flag of its own would make a leaf
    # that takes a gradient
    def after_call(out: object, args: tuple[object, ...]) -> None:
        with torch.enable_grad():
            view = cast(tuple[T, ...], out)[0]
            (view * 2).sum().backward()  # type: ignore[no-untyped-call]
            assert view.grad is None  # no gradient reaches a no_grad view that reads its base's flag

    with torch.no_grad():
        assert_matches_eager(f, lambda: (_INFERENCE_INPUTS[kind](),), compile_fn=compile_fn, after_call=after_call)


def _flagged_intermediate_viewed_before(x: T) -> object:
    t1 = x.sin()
    t2 = t1[0]
    t1.requires_grad_()
    return (t2,)


def _flagged_intermediate_viewed_after(x: T) -> object:
    t1 = x.sin()
    t1.requires_grad_()
    return (t1[0], t1[1:].t())


@pytest.mark.parametrize("f", [_flagged_intermediate_viewed_before, _flagged_intermediate_viewed_after])
def test_no_grad_view_of_an_intermediate_the_program_made_require_grad(
    compile_fn: CompileFn | None, f: Callable[[T], object]
) -> None:
    # issue #27 (hnewrg, session 48; was a wrong result): a call under no_grad takes a view (under no_grad) of an
    # intermediate it makes a leaf requiring grad, before the flag or after, and returns only views. Eager's view reads
    # the flag through its `._base`, with none of its own, so once the caller writes it its is_leaf / grad_fn raise ("A
    # view was created in no_grad mode and its base ... modified inplace"). The compiled call gave the view a flag of
    # its own over a base requiring none, which read fine; the rebuilt `._base` is given the flag instead
    # (OutputInfo.base_gains_grad)
    def write_first(out: object, args: tuple[object, ...]) -> None:
        cast(tuple[T, ...], out)[0].add_(1)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 3),), compile_fn=compile_fn, after_call=write_first)


_NEW_LEAVES: dict[str, Callable[[T], T]] = {
    "detach_of_intermediate": lambda x: (x * 2).detach().requires_grad_(),
    "clone_detach": lambda x: x.clone().detach().requires_grad_(),
    "intermediate": lambda x: x.sin().requires_grad_(),
    "zeros": lambda x: torch.zeros(2, 3, requires_grad=True),
    "zeros_like": lambda x: torch.zeros_like(x, requires_grad=True),
}
_NEW_LEAF_VIEWS: dict[str, Callable[[T], T]] = {
    "view": lambda t: t.view(-1),
    "t": lambda t: t.t(),
    "select": lambda t: t.select(0, 0),
    "unbind": lambda t: t.unbind(0)[0],
    "split": lambda t: t.split(1)[1],  # type: ignore[no-untyped-call]  # (Tensor.split is untyped in torch)
    "view_t": lambda t: t.view(3, 2).t(),
}


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("take", list(_NEW_LEAF_VIEWS))
@pytest.mark.parametrize("make", list(_NEW_LEAVES))
def test_no_grad_view_of_a_new_leaf_written_after_the_call(
    compile_fn: CompileFn | None, make: str, take: str, kind: str
) -> None:
    # issue #27 (hwrong1, session 58; was a wrong result): a call under no_grad makes a new leaf (a detach() or an
    # intermediate given requires_grad_(), a factory's requires_grad=True) and returns a view of it, taken under
    # no_grad, which the caller then writes. Eager's view reads the flag through its `._base`, so once written its
    # is_leaf / grad_fn raise ("A view was created in no_grad mode and its base ... modified inplace"). The compiled
    # call gave the view a flag of its own (a detach() replayed as the graph's base, a PairTensor rebuilt from its
    # leaves), which read fine, or no flag at all (a factory's requires_grad=True): its rebuilt `._base` is given the flag
    def f(x0: T, x1: T) -> object:
        return (_NEW_LEAF_VIEWS[take](_NEW_LEAVES[make](x1)), x0)

    def make_inputs() -> tuple[T, T]:
        return (torch.randn(2, 3), torch.randn(2, 3)) if kind == "plain" else (pair(2, 3), pair(2, 3))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# Views made by a multi-output op (unbind) and views whose grad_fn raises in eager (fuzz seeds 9000, 10000, 11000; Note
# [Views That Raise After A Bump]).
# ---------------------------------------------------------------------------------------------------------------------


def test_unread_unbind_input_beside_its_base(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 9000, program 5294 (crashed): the early replay of t_() advances the base's counter, and the unbind()
    # output x0, which the program never reads, was handed to the autograd.Function, which read its grad_fn.
    def f(x0: T, x1: T) -> object:
        t0 = x1[3:4:2]
        t0.t_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4)
        return (b0.unbind(0)[1], b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        x0, x1 = (cast(T, x) for x in make_inputs())
        f(x0, x1)
        assert grad_fn_raises(x0)  # eager's input after the call: the test reaches the case


def test_set_onto_detached_unbind_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 9000, program 8076 (crashed): the set_() contents were regenerated as an autograd view of the unbind()
    # input after the epilogue advanced its counter (set_ through a detach() shares it).
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.transpose(0, 0)
        set_to(t1, t0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((4, 3), requires_grad=True)
            return (b0.unbind(0)[3],)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_unbind_input_after_write(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 2529 (crashed): the chain's first view, taken with grad enabled before the no_grad
    # write, was replayed after the epilogue's write, reading the unbind() input's grad_fn; now it is taken before
    # the epilogue and the no_grad view after it.
    def f(x0: T) -> object:
        t0 = x0.view((3, 1, -1))
        with torch.no_grad():
            t0.mul_(-1.0)
            t1 = t0.view((1, 1, 3))
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair(2, 3, requires_grad=True)
            return (b0.unbind(0)[0],)

    def make_plain() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((2, 3), requires_grad=True).unbind(0)[0],)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_plain, compile_fn=compile_fn)


# A view input whose grad_fn raises once its version counter moved (an unbind() or chunk() output, a view taken under
# no_grad of a tensor that requires grad), the counter moved by the program through another tensor sharing it, then
# read with grad: eager raises at the read; the run's stand-in is no such view, so the read raises by the real input's
# (Note [Views That Raise After A Bump]). Read under no_grad, or before the write, or a select() view: no error.
_COUNTER_VIEWS: dict[str, Callable[[T], T]] = {
    "unbind": lambda b: b.unbind(1)[1],
    "chunk": lambda b: b.chunk(2, 1)[1],
    "no_grad": lambda b: _under_no_grad(lambda: b[:, 1]),
    "select": lambda b: b.select(1, 1),
}


def _under_no_grad(take: Callable[[], T]) -> T:
    with torch.no_grad():
        return take()


def _written_through_its_detach(x0: T, x1: T) -> None:
    x0.detach().add_(1.0)


def _written_through_a_view_of_its_bases_detach(x0: T, x1: T) -> None:
    x1.detach()[0].mul_(2.0)


def _base_written_under_no_grad(x0: T, x1: T) -> None:
    with torch.no_grad():
        x1.add_(1.0)


def _written_itself_under_no_grad(x0: T, x1: T) -> None:
    with torch.no_grad():
        x0.mul_(2.0)


_COUNTER_WRITES = [
    _written_through_its_detach,
    _written_through_a_view_of_its_bases_detach,
    _base_written_under_no_grad,
    _written_itself_under_no_grad,
]


def _then_read(write: Callable[[T, T], None], when: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        if when == "before":
            y = x0 * 2.0
            write(x0, x1)
            return (y,)
        write(x0, x1)
        with torch.set_grad_enabled(when == "after"):
            return (x0 * 2.0,)

    return f


# (a read before the write: plain inputs only, but for the no_grad view: a PairTensor multi-output view whose base
# another input writes is refused by name, check_multi_output_view_inputs)
_COUNTER_READS = [
    pytest.param(view, when, kind, id=f"{view}-{when}-{kind}")
    for view in sorted(_COUNTER_VIEWS)
    for when in ("after", "after_under_no_grad", "before")
    for kind in ("plain", "pair")
    if when != "before" or kind == "plain" or view == "no_grad"
]


@pytest.mark.parametrize(("view", "when", "kind"), _COUNTER_READS)
@pytest.mark.parametrize("write", _COUNTER_WRITES, ids=lambda w: w.__name__.lstrip("_"))
def test_view_input_read_with_grad_after_its_counter_moved(
    view: str, write: Callable[[T, T], None], when: str, kind: str, compile_fn: CompileFn | None
) -> None:
    """Beside helper hg8616b's unbind() view grown by its detach() (issue #27; test_tensor_resize.py): the same
    read after a write. The plain inputs' compiled calls returned normally, and so did a PairTensor view passed without
    its base."""

    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2)
        return _COUNTER_VIEWS[view](b0), b0

    f = _then_read(write, when)
    with torch.enable_grad():
        if when == "after" and view != "select":
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


# One compiled function called with view inputs of two kinds in turn, each read with grad after its counter moved:
# whether the read raises is the input's creation meta's, which the compile decided on, so the entry is guarded on it
# and the second call recompiles, then raises or returns as eager (Note [What The Guards Compare]). Issue
# #27: the unbind() view's call reused the entry compiled for the select() view and returned normally.
# (views of one layout: a split() output squeezed is a multi-output view too, autograd's creation meta propagating)
_SAME_LAYOUT_VIEWS: dict[str, Callable[[T], T]] = {
    "select": lambda b: b.select(1, 1),
    "unbind": lambda b: b.unbind(1)[1],
    "split": lambda b: b.split_with_sizes([1, 1], 1)[1].squeeze(1),
}


@pytest.mark.parametrize(("first", "second"), [("select", "unbind"), ("unbind", "select"), ("select", "split")])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_input_of_another_creation_meta_after_a_compile_read_with_grad_after_its_counter_moved(
    first: str, second: str, kind: str, compile_fn: CompileFn | None
) -> None:
    def make(view: str) -> Callable[[], tuple[object, ...]]:
        def inputs() -> tuple[object, ...]:
            b0 = pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2)
            return _SAME_LAYOUT_VIEWS[view](b0), b0

        return inputs

    f = _then_read(_written_through_its_detach, "after")
    c = (compile_fn or subclassaot.compile)(f, backend="eager")
    with torch.enable_grad():
        for view in (first, second):
            if view == "select":
                assert_call_matches_eager(c, f, make(view))
            else:
                assert_raises_like_eager(f, make(view), compile_fn=lambda fn, **kwargs: c)


def _grown_through_its_detach(x0: T, x1: T) -> object:
    x0.detach().resize_((15,))
    return (x0 * 2,)


def test_unbind_view_input_grown_through_its_detach_after_a_compile_for_a_select_view(
    compile_fn: CompileFn | None,
) -> None:
    # the issue's program (helper hub's repro): the resize_() moves the counter the view shares with its base
    def make(view: str) -> Callable[[], tuple[object, ...]]:
        def inputs() -> tuple[object, ...]:
            b0 = nonleaf(4, 3, 2)
            return (b0.select(2, 1) if view == "select" else b0.unbind(2)[1]), b0

        return inputs

    f = _grown_through_its_detach
    c = (compile_fn or subclassaot.compile)(f, backend="eager")
    with torch.enable_grad():
        assert_call_matches_eager(c, f, make("select"))
        error = assert_raises_like_eager(f, make("unbind"), compile_fn=lambda fn, **kwargs: c)
    assert "Output 1 of Unbind" in str(error)


def test_pair_unbind_view_input_whose_base_another_input_writes_after_a_compile_for_a_select_view() -> None:
    # check_multi_output_view_inputs refuses a PairTensor multi-output view used with grad whose base another input
    # writes; a compile for a select() view decided on that creation meta too, so the unbind() view's call recompiles
    # and is refused as a first call with it is (it reused the select() view's entry before)
    def f(x0: T, x1: T) -> object:
        y = x0 * 2.0
        x1.detach()[0].mul_(2.0)
        return (y,)

    def make(view: str) -> Callable[[], tuple[T, T]]:
        def inputs() -> tuple[T, T]:
            b0 = pair_nonleaf(3, 2)
            return _SAME_LAYOUT_VIEWS[view](b0), b0

        return inputs

    c = subclassaot.compile(f, backend="eager")
    with torch.enable_grad():
        assert_call_matches_eager(c, f, make("select"))
        with pytest.raises(UnsupportedError, match="a view made by an op that returns several views"):
            c(*make("unbind")())
        with pytest.raises(UnsupportedError, match="a view made by an op that returns several views"):
            subclassaot.compile(f, backend="eager")(*make("unbind")())


@pytest.mark.parametrize("first", ["leaf", "leaf_view"])
def test_no_grad_view_input_after_a_compile_for_a_leaf_read_with_grad_after_its_counter_moved(
    first: str, compile_fn: CompileFn | None
) -> None:
    # A view taken under no_grad of a tensor requiring grad is a leaf that requires grad (through its base), as a
    # plain leaf is, and as a view with a flag of its own is (the default kind, whose grad_fn stays None): only its
    # creation meta tells them apart, and its read after the write raises (Note [What The Guards Compare])
    def leaf_input() -> tuple[object, ...]:
        if first == "leaf":
            return (torch.randn(3, requires_grad=True),)
        return (torch.randn(3, 2)[:, 1].requires_grad_(),)

    def no_grad_view() -> tuple[object, ...]:
        b0 = torch.randn((3,) if first == "leaf" else (3, 2), requires_grad=True)
        with torch.no_grad():
            return (b0[:] if first == "leaf" else b0[:, 1],)

    def f(x0: T) -> object:
        x0.detach().add_(1.0)
        return (x0 * 2.0,)

    c = (compile_fn or subclassaot.compile)(f, backend="eager")
    with torch.enable_grad():
        assert_call_matches_eager(c, f, leaf_input)
        error = assert_raises_like_eager(f, no_grad_view, compile_fn=lambda fn, **kwargs: c)
    assert "A view was created in no_grad mode" in str(error)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_input_passed_alone_read_with_grad_after_its_detach_was_written(
    kind: str, compile_fn: CompileFn | None
) -> None:
    # the unbind() view without its base among the inputs: the write through its detach() moves its counter all the same
    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2)
        return (b0.unbind(1)[1],)

    def f(x0: T) -> object:
        x0.detach().add_(1.0)
        return (x0 * 2.0,)

    with torch.enable_grad():
        assert_raises_like_eager(f, make, compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_unbind_input_given_to_a_custom_function_after_its_detach_was_written(
    kind: str, compile_fn: CompileFn | None
) -> None:
    # the apply records its node with grad on, reading the input's grad_fn before the forward runs
    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2)
        return (b0.unbind(1)[1],)

    def f(x0: T) -> object:
        x0.detach().add_(1.0)
        return (SinFunction.apply(x0),)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch

    with torch.enable_grad():
        assert_raises_like_eager(f, make, compile_fn=compile_fn)


@pytest.mark.parametrize("taken", ["unbind", "as_strided_unbind", "chunk", "no_grad"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_requires_grad_on_a_raising_view_input_after_its_base_was_written(
    taken: str, kind: str, compile_fn: CompileFn | None
) -> None:
    """Fuzz seed 119200 program 2258: requires_grad_() on an unbind() view input (of an as_strided() of its base) after
    the program wrote the base with grad: it hands the view back and builds no node, so eager reads no grad_fn and
    returns; the compiled run took the flag's event for a node and raised the view's error. So too a to() that
    changes nothing (whether a call built a node is autograd's to say: Note [The Eager Record])."""
    views: dict[str, Callable[[T], T]] = {
        "unbind": lambda b: b.unbind(1)[1],
        "as_strided_unbind": lambda b: b.as_strided((2, 1), (0, 3), 2).unbind(0)[1],
        "chunk": lambda b: b.chunk(2, 1)[1],
        "no_grad": lambda b: _under_no_grad(lambda: b[:, 1]),
    }

    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2)
        return b0, views[taken](b0)

    def f(x0: T, x1: T) -> object:
        x0.add_(3.0)
        x1.requires_grad_()
        return ()

    def to(x0: T, x1: T) -> object:  # (a to() that changes nothing hands x1 back too: no node)
        x0.add_(3.0)
        return x1.to(torch.float32)

    with torch.enable_grad():
        for program in (f, to):
            assert_matches_eager(program, make, compile_fn=compile_fn)
            assert_matches_eager(program, make, compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_contiguous_of_a_contiguous_unbind_input_after_its_base_was_written(kind: str) -> None:
    """Fuzz seed 123315 program 58 (crashed): `x0.contiguous()`, x0 an unbind() view input laid out contiguously, after
    the program wrote its base x1 with grad: contiguous() hands x0 back and builds no node, so eager reads no grad_fn;
    the compiled run raised the multi-output view's error (the same fact as the to() above)."""

    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(4, 2) if kind == "pair" else nonleaf(4, 2)
        return b0.unbind(0)[0], b0

    def f(x0: T, x1: T) -> object:
        x1.fill_(-1.0)
        return (x0.contiguous(),)

    with torch.enable_grad():
        assert_matches_eager(f, make)
        assert_matches_eager(f, make, after_call=write_outputs)


# The same inputs, 2-d (x0 = b0's view over its last dim), for the events of Note [Views That Raise After A Bump] beside
# a read with grad of the input: a read of a view the program took of it before the bump (eager's view inherits the
# input's creation meta), a read of its grad_fn or is_leaf (in any grad mode), an in-place write with grad of it or of
# such a view (raising at once, bump or not). The compiled calls returned normally (a write after the bump: raised the
# read's message); each error is now eager's very message.
_COUNTER_VIEW_INPUTS: dict[str, Callable[[T], T]] = {
    "unbind": lambda b: b.unbind(2)[1],
    "chunk": lambda b: b.chunk(2, 2)[1].squeeze(2),
    "no_grad": lambda b: _under_no_grad(lambda: b[..., 1]),
    "select": lambda b: b.select(2, 1),
}


def _view_input(view: str, kind: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(4, 3, 2) if kind == "pair" else nonleaf(4, 3, 2)
        return _COUNTER_VIEW_INPUTS[view](b0), b0

    return make


def _raises_as_eager(
    f: Callable[..., object], make: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """assert_raises_like_eager, with eager's very message."""
    with torch.enable_grad():
        with pytest.raises(RuntimeError) as eager:
            f(*make())
        error = assert_raises_like_eager(f, make, compile_fn=compile_fn)
    assert str(error) == str(eager.value)


def _view_taken_before(take: str, read: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        if take == "after_under_no_grad":
            x1.detach().mul_(2.0)
        with torch.set_grad_enabled(take != "under_no_grad" and take != "after_under_no_grad"):
            t = x0[1:].view(-1) if take == "sliced" else x0.view(-1)
        if take != "after_under_no_grad":
            x1.detach().mul_(2.0)
        with torch.set_grad_enabled(read != "under_no_grad"):
            return (t * 2.0,)

    return f


# (a view taken under no_grad before the bump raises too, whatever the input's kind: the run's own no_grad view does)
_TAKES = ["with_grad", "sliced", "after_under_no_grad"]


@pytest.mark.parametrize("read", ["with_grad", "under_no_grad"])
@pytest.mark.parametrize("take", _TAKES)
@pytest.mark.parametrize("view", sorted(_COUNTER_VIEW_INPUTS))
def test_view_of_view_input_read_with_grad_after_its_counter_moved(
    view: str, take: str, read: str, compile_fn: CompileFn | None
) -> None:
    """Found by helper hub (issue #27): `t = x0.view(-1); x0.detach().add_(1.0); return (t * 2,)`, x0 an unbind()
    view: eager raises "Output 0 of View is a view and its base or another view of its base has been modified inplace"
    at the read (the view inherits the input's creation meta); the compiled call returned normally. A view taken
    under no_grad after the bump, a read under no_grad, or views of a select() view, read fine."""
    f, make = _view_taken_before(take, read), _view_input(view, "plain")
    if view != "select" and take != "after_under_no_grad" and read == "with_grad":
        _raises_as_eager(f, make, compile_fn)
    else:
        with torch.enable_grad():
            assert_matches_eager(f, make, compile_fn=compile_fn)


@pytest.mark.parametrize("view", ["no_grad", "select"])
def test_view_of_subclass_view_input_read_with_grad_after_its_counter_moved(
    view: str, compile_fn: CompileFn | None
) -> None:
    # (a PairTensor multi-output view whose base another input writes is refused by name: check_multi_output_view_inputs)
    f, make = _view_taken_before("with_grad", "with_grad"), _view_input(view, "pair")
    if view == "select":
        with torch.enable_grad():
            assert_matches_eager(f, make, compile_fn=compile_fn)
    else:
        _raises_as_eager(f, make, compile_fn)


def _history_read(attribute: str, of: str, mode: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        t = x0.view(-1) if of == "view" else x0
        x0.detach().add_(1.0)
        block = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference": torch.inference_mode}[mode]
        with block():
            read = t.grad_fn is None if attribute == "grad_fn" else getattr(t, attribute)
        return (read, x0.detach() * 2.0)

    return f


# (a PairTensor multi-output view whose base is written, read otherwise than as the input itself, is refused by name:
# check_multi_output_view_inputs; its grad_fn raised before too, the run's wrapper being such a view)
_ATTRIBUTE_READS = [
    pytest.param(view, kind, attribute, of, id=f"{view}-{kind}-{attribute}-{of}")
    for view, kind in [("unbind", "plain"), ("unbind", "pair"), ("no_grad", "plain"), ("select", "plain")]
    for attribute in ("is_leaf", "grad_fn", "requires_grad", "_base")
    for of in ("input", "view")
    if kind == "plain" or (of == "input" and attribute != "grad_fn")
]


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference"])
@pytest.mark.parametrize(("view", "kind", "attribute", "of"), _ATTRIBUTE_READS)
def test_view_input_history_attribute_read_after_its_counter_moved(
    view: str, kind: str, attribute: str, of: str, mode: str, compile_fn: CompileFn | None
) -> None:
    """Found by helper hub (issue #27): `x0.detach().add_(1.0); return (x0.is_leaf,)`, x0 an unbind() view: eager
    raises at the read of is_leaf or grad_fn, in any grad mode (of a view taken before the bump too); the compiled
    call answered from the real input and returned normally. requires_grad and `._base` read fine."""
    f, make = _history_read(attribute, of, mode), _view_input(view, kind)
    rebuilt = view == "select" and mode == "inference" and attribute in ("is_leaf", "grad_fn")
    if view != "select" and attribute in ("is_leaf", "grad_fn"):
        _raises_as_eager(f, make, compile_fn)
    elif rebuilt and of != "input":
        # (the run rebuilds the select() view's history inside inference_mode, where it cannot: refused by name; a
        # read of the input's own grad_fn answers eager's rebuilt node, made outside the block)
        assert_refused(f, make, compile_fn, "which take no version count")
    else:
        with torch.enable_grad():
            assert_matches_eager(f, make, compile_fn=compile_fn)


_WRITES: dict[str, Callable[[T], object]] = {
    "mul_": lambda t: t.mul_(2.0),
    "setitem": lambda t: t.__setitem__(0, 1.0),
    "transpose_": lambda t: t.transpose_(0, 1),
}


def _written(write: str, of: str, bumped: bool, grad: bool) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        t = x0.view(2, -1) if of == "view" else x0
        if bumped:
            x1.detach().add_(1.0)
        with torch.set_grad_enabled(grad):
            _WRITES[write](t)
        return (x0.detach() * 2.0, t.detach() + 1.0)

    return f


# (an in-place view op of the input itself with nothing written before raised before too: the run's own does)
_IN_PLACE_WRITES = [
    pytest.param(view, write, of, bumped, id=f"{view}-{write}-{of}-{'bumped' if bumped else 'fresh'}")
    for view in ("unbind", "no_grad", "select")
    for write in sorted(_WRITES)
    for of in ("input", "view")
    for bumped in (False, True)
    if (write, of, bumped) != ("transpose_", "input", False)
]


@pytest.mark.parametrize("grad", [True, False], ids=["with_grad", "under_no_grad"])
@pytest.mark.parametrize(("view", "write", "of", "bumped"), _IN_PLACE_WRITES)
def test_view_input_written_in_place(
    view: str, write: str, of: str, bumped: bool, grad: bool, compile_fn: CompileFn | None
) -> None:
    """An unbind() view input (its base passed too) written with grad: eager raises "Output 1 of Unbind is a view and
    is being modified inplace" at the write, counter moved or not (a view of it: "Output 0 of View ..."; `x0[0] = 1.0`:
    "Output 0 of Select ..."); the compiled call returned normally, and after a bump raised the read's message
    instead. Under no_grad, or a select() view input, it writes as eager's."""
    f, make = _written(write, of, bumped, grad), _view_input(view, "plain")
    if view != "select" and grad:
        _raises_as_eager(f, make, compile_fn)
    else:
        with torch.enable_grad():
            assert_matches_eager(f, make, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# A view taken under no_grad of a tensor that requires grad, passed beside its base (or another view of its storage),
# read with grad where the program writes that storage (issue #27; helper hub's repro): eager's view requires grad
# through its base but has no edge, so its reads give the base nothing; ours was traced as a view of the group's
# synthetic base with history and gave the base a gradient. It is taken again under no_grad now (Note [Aliased Inputs
# In Training]); one with a flag of its own (requires_grad_()) keeps the usual path, told apart by a guard.
# ---------------------------------------------------------------------------------------------------------------------

_FLAGLESS_VIEWS: dict[str, Callable[[T], T]] = {"slice": lambda b: b[:, 1], "unbind": lambda b: b.unbind(1)[1]}


def _flagless_view_inputs(view: str, kind: str, beside: str = "base") -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2)
        v = _under_no_grad(lambda: _FLAGLESS_VIEWS[view](b0))
        other = {"base": b0, "detach": b0.detach(), "sibling": b0[:, 0]}[beside]
        return v, other

    return make


def _data_write_then_read(x0: T, x1: T) -> object:
    x0.data.add_(1.0)
    return (x0 * 2.0,)


def _read_then_data_write(x0: T, x1: T) -> object:
    y = x0 * 2.0
    x0.data.add_(1.0)
    return (y,)


def _read_then_detach_write(x0: T, x1: T) -> object:
    y = x0 * 2.0
    x0.detach().add_(1.0)
    return (y,)


def _read_then_other_written(x0: T, x1: T) -> object:
    y = x0 * 2.0
    x1.mul_(2.0)
    return (y, x1 * 3.0)


def _read_then_other_written_under_no_grad(x0: T, x1: T) -> object:
    y = x0 * 2.0
    with torch.no_grad():
        x1.add_(1.0)
    return (y,)


def _both_read_then_data_write(x0: T, x1: T) -> object:
    y = x0 * 2.0 + x1[:, 1] * 3.0
    x0.data.add_(1.0)
    return (y, x1 * 1.0)


def _returned_after_data_write(x0: T, x1: T) -> object:
    x0.data.mul_(3.0)
    return (x0, x1, x0 * x1[:, 0])


def _returned_after_other_written(x0: T, x1: T) -> object:
    y = x0 * 2.0
    x1.mul_(2.0)
    return (x0, y)


def _written_with_grad(x0: T, x1: T) -> object:
    y = x0 * 2.0
    x0.add_(1.0)  # eager: a view made under no_grad modified in place with grad
    return (y,)


def _read_after_other_written(x0: T, x1: T) -> object:
    x1.add_(1.0)
    return (x0 * 2.0,)  # eager: its base was written in place with grad since


_FLAGLESS_PROGRAMS = [
    _data_write_then_read,
    _read_then_data_write,
    _read_then_detach_write,
    _read_then_other_written,
    _read_then_other_written_under_no_grad,
    _both_read_then_data_write,
    _returned_after_data_write,
    _returned_after_other_written,
]


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("view", sorted(_FLAGLESS_VIEWS))
@pytest.mark.parametrize("f", _FLAGLESS_PROGRAMS, ids=lambda f: f.__name__.lstrip("_"))
def test_no_grad_view_input_beside_its_written_base_gives_it_no_gradient(
    f: Callable[[T, T], object], view: str, kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, _flagless_view_inputs(view, kind), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("beside", ["detach", "sibling"])
@pytest.mark.parametrize("f", _FLAGLESS_PROGRAMS[:4], ids=lambda f: f.__name__.lstrip("_"))
def test_no_grad_view_input_beside_another_alias_gives_no_gradient(
    f: Callable[[T, T], object], beside: str, kind: str, compile_fn: CompileFn | None
) -> None:
    # (its base not passed: the group's autograd root is that base all the same)
    with torch.enable_grad():
        assert_matches_eager(f, _flagless_view_inputs("slice", kind, beside), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("f", [_written_with_grad, _read_after_other_written], ids=lambda f: f.__name__.lstrip("_"))
def test_no_grad_view_input_beside_its_base_raises_as_eager(
    f: Callable[[T, T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_raises_like_eager(f, _flagless_view_inputs("slice", kind), compile_fn=compile_fn)


@pytest.mark.parametrize("f", [_read_then_data_write, _read_after_other_written], ids=lambda f: f.__name__.lstrip("_"))
def test_inference_mode_view_input_beside_its_base(f: Callable[[T, T], object], compile_fn: CompileFn | None) -> None:
    # taken inside inference_mode: no gradient either, and eager's error after the base's write names that mode (a
    # PairTensor's view made there is an inference tensor, whose `.data` eager refuses)
    def make() -> tuple[object, ...]:
        b0 = nonleaf(3, 2)
        with torch.inference_mode():
            return b0[:, 1], b0

    with torch.enable_grad():
        if f is _read_after_other_written:
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


def test_no_grad_view_input_with_a_flag_of_its_own_recompiles() -> None:
    """A no_grad view that requires_grad_() gave a flag of its own is a leaf with an accumulator in eager: the entry
    compiled for a flagless one is not taken for it."""

    def make(own: bool) -> tuple[T, T]:
        b0 = nonleaf(3, 2)
        v = _under_no_grad(lambda: b0[:, 1])
        return (v.requires_grad_() if own else v), b0

    compiled = subclassaot.compile(_data_write_then_read, backend="eager")  # (a guard: no backend reads it)
    with torch.enable_grad():
        compiled(*make(False))
        compiled(*make(True))  # (a stand-in of its own: test_no_grad_view_input_with_a_flag_of_its_own_gets_...)
    assert compiled.recompile_reasons == (
        "args[0] (a view taken under no_grad) has no requires_grad flag of its own: expected True, got False",
    )


def _own_flag_view_inputs(view: str, kind: str, beside: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        v, other = _flagless_view_inputs(view, kind, beside)()
        return cast(T, v).requires_grad_(), other

    return make


@pytest.mark.parametrize("beside", ["base", "detach", "sibling"])
@pytest.mark.parametrize("view", sorted(_FLAGLESS_VIEWS))
@pytest.mark.parametrize(
    "f",
    [
        _data_write_then_read,
        _read_then_data_write,
        _read_then_other_written_under_no_grad,
        _both_read_then_data_write,
        _returned_after_data_write,
    ],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_no_grad_view_input_with_a_flag_of_its_own_gets_its_gradient(
    f: Callable[[T, T], object], view: str, beside: str, compile_fn: CompileFn | None
) -> None:
    """A no_grad view given a flag of its own (requires_grad_(): a leaf with an accumulator of its own in eager), beside
    another input over the storage the program writes below autograd (helper hngw, issue #27): the compiled call
    traced it as a view of the group's base and sent its gradient to b0 (refused by name since); it runs as a
    stand-in of its own now (runtime.steps.own_accumulator_inputs), v.grad filled and b0's none, as eager's."""
    with torch.enable_grad():
        make = _own_flag_view_inputs(view, "plain", beside)
        if f in (_both_read_then_data_write, _returned_after_data_write) and beside == "sibling":
            assert_raises_like_eager(f, make, compile_fn=compile_fn)  # (x1[:, 1] / x1[:, 0]: out of range)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


@pytest.mark.parametrize(
    ("f", "kind", "rule"),
    [
        (_read_then_other_written, "plain", "over a storage the program writes where the view.s base requires grad"),
        (_read_then_detach_write, "plain", "over a storage the program writes where the view.s base requires grad"),
        (_data_write_then_read, "pair", "requires_grad_\\(\\) gave a flag of its own"),
    ],
    ids=["written_with_grad", "detach_written_with_grad", "pair"],
)
def test_no_grad_view_input_with_a_flag_of_its_own_refused(f: Callable[[T, T], object], kind: str, rule: str) -> None:
    """What the stand-in of its own does not cover, refused by name: a write with grad on in its version-counter
    family (eager's reads of the view after it raise, or its backward does: ours would not), and a tensor subclass
    view (traced as a view of the base, its gradient would go there)."""
    make = _own_flag_view_inputs("slice", kind, "base")
    with torch.enable_grad():
        f(*cast(tuple[T, T], make()))  # legal in eager
        with pytest.raises(UnsupportedError, match=rule):
            subclassaot.compile(f)(*cast(tuple[T, T], make()))


def _raises_in_eager(f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], k: int) -> None:
    """The test reaches the case: eager's out[k] has a grad_fn that raises."""
    with torch.enable_grad():
        out = cast(tuple[T, ...], f(*make_inputs()))
        assert grad_fn_raises(out[k])


def test_no_grad_view_of_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 7533 (refused before): Note [Views That Raise After A Bump].
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        with torch.no_grad():
            t1 = t0.select(0, -1)
        t0.mul_(2.0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((1,), requires_grad=True),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_view_of_subclass_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 1981 (refused before): a PairTensor intermediate's unbind() output, replayed from the
    # intermediate the autograd.Function returns.
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0.unbind(0)[0]
        t0.copy_(x0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(1),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_subclass_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 4550 (refused before).
    def f(x0: T) -> object:
        t1 = x0.unsqueeze(1).clone()
        with torch.no_grad():
            t2 = t1.select(2, 3)
        t1.mul_(3.0)
        return (t2,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 4, requires_grad=True),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_view_of_returned_intermediate_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 11000, program 5304 (refused before): the view replays from the intermediate, itself an output.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.unbind(0)[1]
        t0.mul_(2.0)
        return (t0, t1)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 2, 1), requires_grad=True),)

    _raises_in_eager(f, make_inputs, 1)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_raising_view_beside_a_no_grad_view_made_after_the_write_is_refused(compile_fn: CompileFn | None) -> None:
    # The version bump would reach out[1], a no_grad view eager made after the write (its grad_fn reads fine).
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.unbind(0)[1]
        t0.mul_(2.0)
        with torch.no_grad():
            t2 = t0[0]
        return (t1, t2)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 2, 1), requires_grad=True),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "of one tensor the program wrote between taking them")


def test_raising_view_beside_a_default_view_made_after_the_write(compile_fn: CompileFn | None) -> None:
    # A view of the default kind rebuilds its grad_fn whatever the counter: supported beside the bumped one.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.unbind(0)[1]
        t0.mul_(2.0)
        return (t1, t0[0])

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 2, 1), requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_input_written_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 2418 (refused before): a no_grad view of an input after an in-place view op, the
    # input then written with grad; replayed after the epilogue, its counter advanced.
    def f(x0: T) -> object:
        x0.unsqueeze_(0)
        with torch.no_grad():
            t0 = x0.view((1, 1))
        x0.mul_(-1.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_view_of_leaf_input_set_to_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 1602 (refused before); y saves the input after the set_(), and its backward runs
    # as eager's does.
    def f(x0: T) -> object:
        t0 = x0.unbind(2)[1]
        with torch.no_grad():
            set_to(x0, x0)
        y = x0 * x0
        return (t0, y)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 1, 4), requires_grad=True),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_diagonal_of_subclass_input_then_transposed(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 9029 (refused before).
    def f(x0: T) -> object:
        x0.unsqueeze_(1)
        with torch.no_grad():
            t0 = x0.diagonal(1, 0, 2)
        x0.transpose_(1, 1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 4),)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_of_input_passed_twice_then_set(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000, program 6701 (refused before).
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t0 = x1[:, 0:1:2]
        set_to(x0, x1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(1, 1)
        return (b0, b0)

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_views_of_unbind_input_and_overlapping_input_written_through_detach(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 11000, program 6991 (refused before; crashed once out[2] was supported): out[0] is a view of the
    # unbind() input x0 made before the program set_() a detach() of a view of x2, which shares x0's eager base
    # (traced apart): replayed after the epilogue with x0's counter at entry, it raises as eager's does.
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.transpose(0, 0)
        with torch.no_grad():
            t1 = x2.select(1, 0)
        t2 = x0.view((6, 2))
        t1.unbind(0)[7]
        t4 = t1.detach()
        set_to(t4, t0)
        return (t2, t4, t1)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair_nonleaf(4, 3, 4)
            return (b0.unbind(2)[1], pair(2), b0.reshape((-1, 6)))

    _raises_in_eager(f, make_inputs, 0)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regression (seed 80501 #683, under no_grad): beside a detach() of a multi-output view input taken before the
# write, which the runtime rebuilds at the input's counter at entry, an output view taken after the write was rebuilt
# at that counter too, and its is_leaf then raised where eager's reads fine (Note [Views That Raise After A Bump]).
# ---------------------------------------------------------------------------------------------------------------------


def _unbind_view_input(kind: str) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = pair_nonleaf(2, 4) if kind == "pair" else nonleaf(2, 4)
            return (b0.unbind(1)[1].view((1, 2, 1)),)

    return make_inputs


def _detached_then_written(x0: T) -> object:
    t0 = x0.detach()
    x0.mul_(-1.0)
    return (t0, x0.transpose(2, 1))


def _detached_then_written_view_first(x0: T) -> object:
    t0 = x0.detach()
    x0.mul_(-1.0)
    return (x0.transpose(2, 1), t0)


def _viewed_then_written(x0: T) -> object:
    t0 = x0.transpose(2, 1)  # eager's raises: taken before the write
    x0.mul_(-1.0)
    return (t0, x0.transpose(2, 1))


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("f", [_detached_then_written, _detached_then_written_view_first, _viewed_then_written])
def test_view_taken_after_the_write_beside_one_taken_before_reads_as_eager(
    compile_fn: CompileFn | None, kind: str, f: Callable[[T], object]
) -> None:
    check_no_grad(f, _unbind_view_input(kind), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: a view of a subclass input taken before an in-place view op changed the input, viewed again
# under no_grad after it (fuzz seed 3001 #2001). See Note [Views That Raise After A Bump].
# ---------------------------------------------------------------------------------------------------------------------


MAKERS: dict[str, Callable[[], T]] = {
    "plain": lambda: nonleaf(4, 1),
    "pair": lambda: pair_nonleaf(4, 1),
    "pair_no_grad": lambda: pair(4, 1),
    "pair_leaf": lambda: pair(4, 1, requires_grad=True),
}


def _run(f: Callable[..., object], kind: str, inference: bool, compile_fn: CompileFn | None) -> None:
    make = MAKERS[kind]
    with torch.no_grad() if inference else torch.enable_grad():
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn)


def test_view_of_select_taken_after_input_unsqueeze_in_inference(compile_fn: CompileFn | None) -> None:
    # seed 3001 #2001 (inference): t1 was replayed before the epilogue, whose unsqueeze_() on the wrapper then moved
    # x0's version counter, and reading t1.is_leaf raised "A view was created in no_grad mode ...".
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((-1,))
        return (t1,)

    _run(f, "pair", True, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("inference", [True, False])
def test_no_grad_views_after_bump(compile_fn: CompileFn | None, kind: str, inference: bool) -> None:
    # two views after the bump, in a no_grad block (the program itself may run with grad)
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.select(1, 0)
            x0.unsqueeze_(-2)
            t1 = t0.view((2, 2)).t()
        return (t1, x0 * 2)

    if kind == "pair_leaf" and not inference:
        pytest.skip("eager raises: an in-place view op on a view of a leaf that requires grad")
    _run(f, kind, inference, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_no_grad_view_between_bumps(compile_fn: CompileFn | None, kind: str) -> None:
    # t1 is made between two bumps: stale in eager too (its is_leaf raises on both sides), so it stays early
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((-1,))
        x0.squeeze_(-3)
        t2 = t0.view((2, 2))
        return (t1, t2)

    _run(f, kind, True, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_no_grad_view_after_bump_not_returned(compile_fn: CompileFn | None, kind: str) -> None:
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((-1,))
        return (t1 + 1, t0)

    _run(f, kind, True, compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_multi_output_view_after_bump(compile_fn: CompileFn | None, kind: str) -> None:
    # the late step is one view of an op returning several (unbind)
    def f(x0: T) -> object:
        t0 = x0.select(1, 0)
        x0.unsqueeze_(-2)
        t1 = t0.view((2, 2)).unbind(0)[1]
        return (t1,)

    _run(f, kind, True, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups (round 3, refusal classes): outputs made by multi-output view ops (unbind, split, chunk) of an
# input whose base the program writes through another input (Note [Views That Raise After A Bump]).
# ---------------------------------------------------------------------------------------------------------------------


def _leaf_and_view(make: Callable[..., T], view: Callable[[T], T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = make(*shape)
            if not b0.requires_grad:
                b0.requires_grad_()
            return (b0, view(b0))

    return make_inputs


def _plain_leaf(*shape: int) -> T:
    return torch.randn(shape, requires_grad=True)


@pytest.mark.parametrize("make", [pair_nonleaf, nonleaf], ids=["pair", "plain"])
def test_reshape_of_a_split_view_written_after_the_call(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 81500 #9853: the caller's write makes reading the output's grad_fn raise, in eager through a
    # _reshape_alias node (ReshapeAlias), here through the view() the trace saw (View): the oracle compares that it
    # raises, and why, not the view node's name
    def f(x0: T) -> object:
        t0, _, _ = x0.split_with_sizes([1, 2, 0], 1)
        return (t0.reshape((2, 1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make(2, 3),), compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("make", [_pair_leaf, _plain_leaf], ids=["pair", "plain"])
def test_unbind_after_no_grad_write_through_view_input(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #4454: the base is advanced through the other input before the unbind was taken
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.add_(-1.0)
        t0 = x1.unbind(0)[0]
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _leaf_and_view(make, lambda b: b.view(1, 3, 1), 3), compile_fn=compile_fn)


@pytest.mark.parametrize("make", [_pair_leaf, _plain_leaf], ids=["pair", "plain"])
def test_unbind_of_base_after_write_through_empty_view(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8006
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.add_(3.0)
        t0 = x0.unbind(0)[2]
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _leaf_and_view(make, lambda b: b[:, 1:1:1], 3, 3), compile_fn=compile_fn)


@pytest.mark.parametrize("make", [pair_nonleaf, nonleaf], ids=["pair", "plain"])
def test_split_chunk_after_grad_writes_through_other_input(
    make: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    # Variants: writes with grad through the other input, several views of one op, then views of those.
    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        x0[1].add_(1.0)
        a, b = torch.split(x0, 2, 0)
        c = x1.chunk(2, 1)[1]
        return a.t(), b, c.unsqueeze(0), (a * 2).sum()

    def make_inputs() -> tuple[object, ...]:
        b0 = make(4, 4)
        return (b0, b0[1:3])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("make", [_pair_leaf, _plain_leaf], ids=["pair", "plain"])
def test_unbind_before_write_through_other_input(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # The write comes after the unbind: eager's view raises when autograd reads it, and so does ours (rebuilt
    # before the epilogue writes the base, Replay.before_epilogue).
    def f(x0: T, x1: T) -> object:
        t0 = x1.unbind(0)[0]
        with torch.no_grad():
            x0.add_(1.0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, _leaf_and_view(make, lambda b: b.view(1, 3, 1), 3), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups: requires_grad, is_leaf and grad_fn of outputs (no_grad views of tensors that require grad, a
# detach() written with a value that requires grad, set_() between outputs, a wrapper set_() after a view).
# ---------------------------------------------------------------------------------------------------------------------


def test_no_grad_view_of_input_changed_in_place(compile_fn: CompileFn | None) -> None:
    # fuzz seed 9000 #2949: x0 is given to the Function detached (its metadata changes, no gradient reaches it);
    # t3 still requires grad in eager (a no_grad view of x0 requires grad), with a grad_fn (Note [Backward Errors
    # Are Deferred])
    def f(x0: T) -> object:
        x0.unsqueeze_(-1)
        t0 = x0.reshape((1,))
        with torch.no_grad():
            t1 = t0.unsqueeze(-2)
        t2 = t1[:, 1:1:2]
        t3 = t2.sum(1)
        return (t3,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def test_no_grad_view_of_input_changed_in_place_computed_with_grad(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.unsqueeze_(-1)
        with torch.no_grad():
            t1 = x0.view(-1)
        return (t1 * 2, x0.sin())

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(3),), compile_fn=compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
def test_no_grad_view_of_detach_written_with_grad(compile_fn: CompileFn | None, subclass: bool) -> None:
    # fuzz seed 10000 #9135: t0 gains requires_grad by the copy_; its no_grad view requires grad through its
    # `._base` (Note [Views That Raise After A Bump])
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0)
        with torch.no_grad():
            t1 = t0.unsqueeze(-3)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True) if subclass else torch.randn(1, 4, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
def test_no_grad_view_of_detach_then_written_with_grad(compile_fn: CompileFn | None, subclass: bool) -> None:
    # the view is taken before the write: eager's grad_fn raises (and requires_grad is True)
    def f(x0: T) -> object:
        t0 = x0.detach()
        with torch.no_grad():
            t1 = t0.unsqueeze(-3)
        t0.mul_(x0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True) if subclass else torch.randn(1, 4, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_views_of_detach_written_with_grad_and_computed_from(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0 * 2)
        with torch.no_grad():
            t1 = t0.unsqueeze(-3)
        return (t1 * 3, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(1, 4),), compile_fn=compile_fn)


@pytest.mark.parametrize("order", ["set_first", "owner_first"])
def test_output_set_onto_another_keeps_the_others_history(compile_fn: CompileFn | None, order: str) -> None:
    # fuzz seed 11000 #7045: the intermediate base of the two outputs is t1 (whose storage it is, with its history),
    # not t0, which set_() moved onto it
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.add(0.5)
        set_to(t0, t1)
        return (t0, t1) if order == "set_first" else (t1, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(1, 3, 1),), compile_fn=compile_fn)


def test_output_set_onto_another_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.add(0.5)
        set_to(t0, t1)
        t0.mul_(2)
        return (t0, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(1, 3, 1, requires_grad=True),), compile_fn=compile_fn)


def test_output_with_history_beside_views_of_tensor_set_onto_it(compile_fn: CompileFn | None) -> None:
    # the outputs' base is t0 (the view names it): t1 would come back as an alias without its history
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.add(0.5)
        set_to(t0, t1)
        return (t1, t0.view(-1))

    with torch.enable_grad():
        assert_refused(
            f, lambda: (nonleaf(1, 3, 1),), compile_fn, "has an autograd history of its own, and the program set_()"
        )


def test_view_of_subclass_input_before_wrapper_set_onto_it(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10000 #2840 (inference): t1.set_(t0) bumps t1's version counter, not x0's, so t0 is a view made
    # after x0's last bump (Note [Storage Swaps By Rebinding])
    def f(x0: T) -> object:
        x0.add_(x0)
        t0 = x0.reshape((2, -1, 4))
        t1 = x0.add(3.0)
        set_to(t1, t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 4, requires_grad=True),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of seed 13000's inference programs; each program is a shrunk fuzz program (seed and index in the
# test's comment).
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# resize_() to the size a tensor already has keeps its strides


# fuzz seed 13000 #9159
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_resize_to_own_size_keeps_strides(kind: str, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.resize_((2,))
        x0.add_(0.5)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(4, 3) if kind == "pair" else torch.randn(4, 3)
        return (b0.as_strided((2,), (2,), 1),)

    _no_grad_parity(f, make_inputs, compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_resize_to_own_size_of_a_strided_view_returned(grad: bool, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        x0.resize_((3, 2))
        x0.mul_(2.0)
        return (x0, x0.sum())

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 3).t(),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A view of an input's detach() taken after an in-place view op on the input (Note [Views That Raise After A
# Bump]): eager's `._base` is the detach's result


# fuzz seed 13000 #545
def test_view_of_detach_after_input_unsqueeze_(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.detach()
        x0.unsqueeze_(-1)
        t1 = t0.view(())
        return (t1,)

    _no_grad_parity(f, lambda: (torch.randn(()),), compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_view_of_detached_view_after_input_t_(grad: bool, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0[1:].detach()
        x0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0).view(-1)
        return (t1, t0)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (torch.randn(3, 2),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper l45b: a returned subclass input rebuilt without its in-place view op (seed 45000 #3277)
# and a no_grad view of an intermediate with history moved by `.data =` (seed 46000 #590); each program is a shrunk
# fuzz program (seed and index in the test's comment).
# ---------------------------------------------------------------------------------------------------------------------


def _two_views_of_pair_nonleaf() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = pair(3, 1, requires_grad=True).clone()
        return (b0.as_strided((), (), 0), b0.transpose(1, 0))


# fuzz seed 45000 #3277
def test_returned_input_unsqueeze_then_other_input_t_refused(compile_fn: CompileFn | None) -> None:
    # eager's backward rebuilds x1's history from view functions without its unsqueeze_() and raises "invalid
    # gradient ... got [1, 3, 1] but expected shape compatible with [1, 3]" (Note [Stale View Functions])
    def f(x0: T, x1: T) -> object:
        x1.unsqueeze_(2)
        x0.t_()
        return (x1,)

    rule = r"another view of the same tensor that it does not return.*Note \[Stale View Functions\]"
    refused_with_grad(f, _two_views_of_pair_nonleaf, compile_fn, rule)


# fuzz seed 45000 #3277
def test_returned_input_own_view_op_last_supported(compile_fn: CompileFn | None) -> None:
    # the returned input's own in-place view op comes last: nothing rebuilds its history, no refusal
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x1.unsqueeze_(2)
        return (x1,)

    check_with_grad(f, _two_views_of_pair_nonleaf, compile_fn)


def _twice_nonleaf() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn(4, 2, requires_grad=True).clone()
        return (b0, b0)


# fuzz seed 46000 #590
def test_no_grad_view_of_intermediate_with_history_assigned_data_refused(compile_fn: CompileFn | None) -> None:
    # eager's t1._base is t0 (an intermediate with history, on its own storage); t1 lives on x0's storage
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(1)
        with torch.no_grad():
            t1 = t0.as_strided((1,), (0,), 2)
        t1.data = x0
        return (t1,)

    refused_with_grad(
        f, _twice_nonleaf, compile_fn, r"intermediate with autograd history .*Outputs Over Another Storage"
    )


# fuzz seed 46000 #590
def test_no_grad_diagonal_of_intermediate_with_history_assigned_data_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        with torch.no_grad():
            t1 = t0.diagonal()
        t1.data = x0
        return (t1,)

    refused_with_grad(
        f, lambda: (torch.randn(3, 3, requires_grad=True),), compile_fn, r"intermediate with autograd history"
    )


# fuzz seed 46000 #590
def test_view_of_intermediate_assigned_data_in_inference_supported(compile_fn: CompileFn | None) -> None:
    # under no_grad the intermediate has no history: the graph returns it as the base (Note [Outputs Over Another
    # Storage])
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(1)
        t1 = t0.as_strided((1,), (0,), 2)
        t1.data = x0
        return (t1,)

    check_no_grad(f, lambda: (torch.randn(4, 2),) * 2, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (issue #9): programs our pipeline crashed on where eager runs, and programs about eager's own
# errors on views (a grad_fn that raises, views of multi-output ops written in place). Each is a shrunk fuzz program;
# the seed and index are in the test's docstring.
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# A leaf that requires grad written only through a tensor set_() or `.data =`-assigned to its storage


def test_leaf_written_through_set_alias_after_no_grad_write(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #7901: the no_grad write advanced the leaf's version; the write under grad went through t0."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        with torch.no_grad():
            x0.copy_(t0)
        set_to(t0, x0)
        t0.fill_(0.5)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((), requires_grad=True), torch.randn(()))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_leaf_written_through_data_alias_after_no_grad_write(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #5074."""

    def f(x0: T, x1: T) -> object:
        x1.data = x0
        with torch.no_grad():
            x0.mul_(3.0)
        x1.add_(-1.0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2,), requires_grad=True), torch.randn((3, 2, 4)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_aliased_leaf_inputs_data_alias_gets_inplace_view_op(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #2360: the same leaf passed twice (a synthetic base); t0.transpose_() under grad is no write to
    the leaf's own autograd history."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.add(0.5)
        x0.data.mul_(0.5)
        t0.data = x0
        t0.transpose_(0, 1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 1), requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_leaf_written_through_itself_still_raises() -> None:
    """The other side of the rule: a write under grad through the leaf itself raises, compiled as in eager."""

    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        x0.mul_(2.0)
        return ()

    def make_inputs() -> tuple[T, T]:
        return (torch.randn(2, requires_grad=True), torch.randn(2))

    with torch.enable_grad():
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            f(*make_inputs())
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            subclassaot.compile(f)(*make_inputs())


# ---------------------------------------------------------------------------------------------------------------
# unbind() views among the inputs and outputs: eager's grad_fn check on a multi-output view


def test_unbind_input_read_while_another_member_writes_is_refused(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #2426 (crashed: a wrapper-level copy_ into x0): x0, an unbind() output, is saved by the write
    through x1, which advances their base's counter; eager's backward raises when it unpacks x0 (Note [Views That
    Raise After A Bump])."""

    def f(x0: T, x1: T) -> object:
        x1.mul_(x0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0.unbind(0)[0], b0.select(0, 1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "is a view made by an op that returns several views")


def test_subclass_member_written_only_through_another_member(compile_fn: CompileFn | None) -> None:
    """x0 shares its base's version counter with x1, written in place, but the program never reads x0: x0 gets no
    wrapper-level copy_ of its own (eager writes nothing through it; a copy_ into an unbind() output raises)."""

    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0.unbind(0)[0], b0.select(0, 1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unread_unbind_input_after_early_inplace_view_replay(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #550: the returned t0's t_() is replayed on the input before the graph runs, which makes reading
    x1's grad_fn raise; x1 reaches no output, so it goes into the compiled Function detached."""

    def f(x0: T, x1: T) -> object:
        t0 = x0.expand((3, 1))
        t0.t_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 1)
        return (b0, b0.unbind(1)[0])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_output_of_alias_whose_version_a_no_grad_view_op_advanced(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #9285: eager's returned unbind() view raises when its grad_fn is read (and in backward), because
    an in-place view op on a view of the other alias advanced the shared counter: the aliases stay one base."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.unbind(1)[0]
        t1 = x0.select(2, -2)
        with torch.no_grad():
            t1.unsqueeze_(0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 3), requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Inputs whose elements overlap run as contiguous clones in training


def test_view_of_overlapping_input_that_only_its_strides_allow(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #1090 (crashed with the fake view's ValueError): the view succeeds on eager's zero strides, which
    the training trace now keeps (zero-stride inputs run as an expanded clone, test_view_bases.py)."""

    def f(x0: T) -> object:
        t0 = x0.expand((1, -1, 2))
        t0.view((1, 4))
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1, 2)
        return (b0.as_strided((2,), (0,), 0).view((1, -1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_overlapping_plain_input(compile_fn: CompileFn | None) -> None:
    """The plain-tensor form of seed 3000 #1090."""

    def f(x0: T) -> object:
        return x0.expand((1, -1, 2)).view((1, 4)).sum()

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((1, 2), requires_grad=True).clone()
        return (b0.as_strided((2,), (0,), 0).view((1, -1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_early_replays_run_in_program_order(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #9285 (unshrunk): out[1], an unbind() view of x2, was made before out[0]'s no_grad unsqueeze_()
    advanced their base's counter; both outputs are rebuilt before the epilogue, in the program's order, so that
    out[1]'s grad_fn raises as eager's does."""

    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x2.unbind(1)[0]
        t1 = x1.select(2, -2)
        with torch.no_grad():
            t1.unsqueeze_(0)
        return (t1, t0, t1)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 3), requires_grad=True)
        return (b0, b0, b0.as_strided((1, 1), (1, 0), 0))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_output_set_to_input_then_written_with_grad(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #7901 (unshrunk; diverged: out[1] came back a leaf without requires_grad): t0, set_() to x0 under
    no_grad, then filled with grad enabled, has eager's FillBackward history on x0's storage. Refused, then
    supported: the graph computes it, set_() onto x0 after the epilogue (Note [Outputs Over Another Storage])."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        with torch.no_grad():
            x0.copy_(t0)
        t1 = t0.add(3.0)
        with torch.no_grad():
            set_to(t0, x0)
        t0.fill_(0.5)
        return (t1, t0)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = torch.randn((), requires_grad=True).clone()
        return (torch.randn((), requires_grad=True), b1)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# fuzz seed 24000 #621
def _root_and_its_view_inputs() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn((2,))
        return (b0, b0.transpose(0, 0))


def test_view_of_root_input_that_gains_grad(compile_fn: CompileFn | None) -> None:
    """Seed 24000 #621 (shrunk; diverged: out[0] read as a leaf without grad_fn where eager's is_leaf and grad_fn
    raise "A view was created in no_grad mode ..."): x0 is the root of the storage it shares with x1 and gains
    requires_grad; its no_grad view, written after, requires grad in eager. The run lays both inputs out as views of a
    synthetic base that does not require grad, so its view did not, and the output was rebuilt after the write."""

    def f(x0: T, x1: T) -> object:
        x0.requires_grad_()
        t0 = x0.unsqueeze(-2)
        t0.add_(0.5)
        return (t0,)

    check_no_grad(f, _root_and_its_view_inputs, compile_fn)


def test_view_of_input_whose_root_input_gains_grad(compile_fn: CompileFn | None) -> None:
    """Seed 24000 #872 (shrunk; diverged as #621): t0 is a no_grad view of x1, a view of x0; set_() on x1 advances
    their counter, then x0 (the root) gains requires_grad: eager's t0 requires grad and its grad_fn raises."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.select(0, -1)
        set_to(x1, t0)
        x0.requires_grad_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((3,))
            return (b0, b0[1:3:2])

    check_no_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("order", ["root_first", "root_second"])
@pytest.mark.parametrize("written", ["view", "root", "other"])
def test_no_grad_view_of_root_input_that_gains_grad(compile_fn: CompileFn | None, order: str, written: str) -> None:
    # seed 24000 #621 and variants: the root passed first or second, the write through the view, the root or the
    # other input
    def f(x0: T, x1: T) -> object:
        root, other = (x0, x1) if order == "root_first" else (x1, x0)
        root.requires_grad_()
        t0 = root.unsqueeze(-2)
        {"view": t0, "root": root, "other": other}[written].add_(0.5)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((3,))
            return (b0, b0[1:]) if order == "root_first" else (b0[1:], b0)

    check_no_grad(f, make_inputs, compile_fn)


def test_no_grad_view_of_pair_root_input_that_gains_grad(compile_fn: CompileFn | None) -> None:
    # seed 24000 #621 with PairTensor inputs
    def f(x0: T, x1: T) -> object:
        x0.requires_grad_()
        t0 = x0.unsqueeze(-2)
        t0.add_(0.5)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(3)
        return (b0, b0[1:])

    check_no_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("order", ["grad_then_view", "view_then_grad"])
@pytest.mark.parametrize("written", ["view", "input"])
def test_no_grad_view_of_input_relaid_in_place_that_gains_grad(
    compile_fn: CompileFn | None, kind: str, order: str, written: str
) -> None:
    """Fuzz seed 112000 #3071 (shrunk; diverged: out[0] read as a leaf without grad_fn where eager's is_leaf and
    grad_fn raise "A view was created in no_grad mode ..."): x0's unsqueeze_() has the run lay it out as a view of a
    synthetic base, which does not require grad; x0 then gains requires_grad, so eager's no_grad view of it requires
    grad and, written after it was taken, raises. The run's view required no grad, so the output, replayed after the
    epilogue, read fine (Note [Views That Raise After A Bump]). Variants: the flag set before or after the view is
    taken, the write through the view or the input, PairTensor inputs."""

    def f(x0: T) -> object:
        x0.unsqueeze_(-3)
        if order == "grad_then_view":
            x0.requires_grad_()
        t1 = x0.expand((3, -1, 2)).transpose(2, 1)
        if order == "view_then_grad":
            x0.requires_grad_()
        (t1.fill_(2.0) if written == "view" else x0.mul_(2.0))
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 2))
        return (b0 if kind == "plain" else PairTensor.from_tensor(b0),)

    with torch.no_grad():
        (eager,) = cast(tuple[T], f(cast(T, make_inputs()[0])))
        assert grad_fn_raises(eager)  # eager's raises: the test is of that
    check_no_grad(f, make_inputs, compile_fn)


def test_no_grad_view_with_its_own_flag_of_input_relaid_then_set_refused(compile_fn: CompileFn | None) -> None:
    """Fuzz seed 118800 #487 (shrunk; diverged: out[0] read as a leaf without grad_fn where eager's is_leaf and
    grad_fn raise "A view was created in no_grad mode and its base ... modified inplace"): t0 is a no_grad view of x0,
    which its t_() lays out as a view of a synthetic base (shared with x1) and which gains requires_grad; the set_()
    of x0 after the view advances the counter they share, so eager's grad_fn raises. t0's own requires_grad_() hid
    that from the check of a view rebuilt from its leaves (its chain, through an in-place view op and a set_(), is not
    replayed), so the output came back a leaf; now refused as the same view without its own flag is."""

    def f(x0: T, x1: T) -> object:
        x0.t_()
        x0.requires_grad_()
        t0 = x0.reshape((1, 1, 1))
        t0.requires_grad_()
        set_to(x0, x1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn(())
            return (b0, b0.view((1, -1, 1)))

    with torch.no_grad():
        (eager,) = cast(tuple[T], f(*cast(tuple[T, T], make_inputs())))
        assert grad_fn_raises(eager)  # eager's raises: the test is of that
        assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager")


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("relaid", ["none", "t_", "unsqueeze_"])
@pytest.mark.parametrize("own_flag", [False, True], ids=["no_own_flag", "own_requires_grad_"])
def test_no_grad_view_of_input_relaid_then_set_onto_its_alias(
    compile_fn: CompileFn | None, kind: str, relaid: str, own_flag: bool
) -> None:
    """Seed 118800 #487 and variants: a no_grad view of x0 (which gained requires_grad) taken after an in-place view op
    on x0 or none, with or without the view's own requires_grad_(), then x0 set_() onto x1, a view of it. Eager's
    grad_fn raises either way: the root's flag decides, not the view's (Note [Views That Raise After A Bump]). Plain
    inputs relaid in place are refused (the chain is not replayed); without the in-place view op, and with PairTensor
    inputs, the output raises as eager's."""

    def f(x0: T, x1: T) -> object:
        if relaid == "t_":
            x0.t_()
        elif relaid == "unsqueeze_":
            x0.unsqueeze_(0)
        x0.requires_grad_()
        t0 = x0.reshape((3, 2))
        if own_flag:
            t0.requires_grad_()
        set_to(x0, x1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((2, 3)) if kind == "plain" else PairTensor.from_tensor(torch.randn((2, 3)))
            return (b0, b0.view((1, -1, 1)))

    if kind == "plain" and relaid != "none":
        with torch.no_grad():
            assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager")
    else:
        check_no_grad(f, make_inputs, compile_fn)


def _split_view_written(x0: T) -> T:
    t0, _, t2 = x0.split_with_sizes([0, 1, 0], 2)
    t2.copy_(t0)  # fuzz seed 76100, program 796 (shrunk)
    return t2


def _select_written(x0: T) -> T:
    t1 = x0[0]
    t1.mul_(2)
    return t1


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("view", [_split_view_written, _select_written], ids=["split_with_sizes", "select"])
def test_no_grad_view_of_an_input_whose_root_input_gains_grad_after_the_write(
    compile_fn: CompileFn | None, view: Callable[[T], T], kind: str
) -> None:
    """x0 is passed as a view of x1; a no_grad view of x0 is written, then x1 gains requires_grad: eager's view
    requires grad and its grad_fn raises ("A view was created in no_grad mode ..."). The run's PairTensor inputs are
    wrappers of their own, no views of each other, so whether the view requires grad is read off eager's inputs; the
    output, replayed after the epilogue, read as a leaf."""

    def f(x0: T, x1: T) -> object:
        t = view(x0)
        x1.requires_grad_()
        return (t,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn(()) if kind == "plain" else PairTensor.from_tensor(torch.randn(()))
            return (b0.view((1, 1, 1)), b0)

    check_no_grad(f, make_inputs, compile_fn)


def test_no_grad_view_of_an_unbind_output_set_after_replays_through_its_chain(compile_fn: CompileFn | None) -> None:
    # fuzz seed 32000 #402 (grad_mode vocabulary): a call under no_grad with an input that requires grad; t1 is an
    # as_strided view of an unbind() output t0, which the program then set_()s. Eager's t1.grad_fn (and is_leaf) raises
    # "A view was created in no_grad mode and its base ... modified inplace"; ours, rebuilt by as_strided after the
    # epilogue, answered, and was refused. The set_() came after t1 was taken from t0: t1's chain (unbind, as_strided)
    # still says how it was made, and replayed on x0 it raises as eager's.
    def f(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.unbind(0)[0]
        t1 = t0.as_strided((), (), 0)
        t0.set_(x1)  # type: ignore[call-overload]  # the stubs list only storage overloads
        return (t1,)

    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True), torch.randn(()))

    with torch.no_grad():
        out = f(torch.randn(3, requires_grad=True), torch.randn(()))
        assert isinstance(out, tuple) and grad_fn_raises(out[0])  # eager's raises
        for after_call in (None, write_outputs):
            assert_matches_eager(f, make, after_call=after_call, compile_fn=compile_fn)


def test_as_strided_input_leaving_the_view_it_was_taken_of(compile_fn: CompileFn | None) -> None:
    # fuzz seed 30000 #6164 (Note [as_strided On Inputs]): x0's history is an as_strided() of b[:, 0:1], whose backward
    # drops the element at offset 2; after the no_grad write eager rebuilds it as b's as_strided(), which reaches it
    # (b.grad[0, 2] is 3 in eager, was 0 compiled): refused. The same write on a view within its source still compiles.
    def f(x0: torch.Tensor) -> object:
        with torch.no_grad():
            x0.mul_(1.0)
        return (x0 * 3.0,)

    def leaving() -> tuple[object, ...]:
        return (torch.randn(1, 4, requires_grad=True)[:, 0:1].as_strided((), (), 2),)

    def within() -> tuple[object, ...]:
        return (torch.randn(1, 4, requires_grad=True)[:, 1:3].as_strided((), (), 2),)

    with torch.enable_grad():
        assert_refused(f, leaving, compile_fn, r"args\[0\]: an as_strided\(\) view that reaches elements")
        assert_matches_eager(f, within, compile_fn=compile_fn)


def test_as_strided_input_leaving_its_view_beside_a_base_data_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 36000 #6907 (DIVERGED, Note [as_strided On Inputs]): x1, an as_strided() of b0.unbind(0)[1] at offset
    # 0, outside that view: eager's backward drops the element (b0's gradient is zero). `x0.data = ...` on its base
    # x0 made the compiled call send the group's gradients through the base, which reaches it (6 at [0]): refused.
    # Without the assignment it compiles and matches eager
    def assigned(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x1.mul(2.0)
        x0.data = x1
        return (t0,)

    def unassigned(x0: torch.Tensor, x1: torch.Tensor) -> object:
        return (x1.mul(2.0),)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 3, 1), requires_grad=True).clone()
        return (b0, b0.unbind(0)[1].as_strided((1,), (1,), 0))

    with torch.enable_grad():
        assert_refused(assigned, make_inputs, compile_fn, r"args\[1\]: an as_strided\(\) view that reaches elements")
        assert_matches_eager(unassigned, make_inputs, compile_fn=compile_fn)


def test_as_strided_input_leaving_its_view_beside_a_read_outside_the_inputs(compile_fn: CompileFn | None) -> None:
    # fuzz seed 38000 #245 (DIVERGED, Note [as_strided On Inputs]): x1 leaves the select() it was taken of (eager drops
    # its gradient); `x0.as_strided(..., 0)` reads outside x0, so both compile over the whole storage as one base,
    # which sent x1's gradient to b0[0]: refused. Without the outside read it compiles and matches eager; so does a
    # view of x1 returned (replayed from x1 itself: no gradient reaches the base)
    def outside(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x0.as_strided((1,), (2,), 0)
        return (x1.mul(2.0),)

    def outside_view(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x0.as_strided((1,), (2,), 0)
        return (x1.expand(()),)

    def inside(x0: torch.Tensor, x1: torch.Tensor) -> object:
        return (x1.expand(()),)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((4,), requires_grad=True)
        return (b0[2:4], b0.select(0, -2).as_strided((), (), 0))

    with torch.enable_grad():
        assert_refused(outside, make_inputs, compile_fn, r"args\[1\]: an as_strided\(\) view that reaches elements")
        assert_matches_eager(inside, make_inputs, compile_fn=compile_fn)
        for after_call in (None, write_outputs):
            assert_matches_eager(outside_view, make_inputs, after_call=after_call, compile_fn=compile_fn)


def test_as_strided_input_leaving_its_view_bumped_where_no_gradient_reaches_it(compile_fn: CompileFn | None) -> None:
    # fuzz seed 118800 #28 and #1166 (Note [as_strided On Inputs]): x1 leaves the select() it was taken of, and a set_()
    # (through x0.t(), an alias, or on x1 itself) bumps the counter they share, so eager rebuilds x1's history from b0
    # at its next read. Where no returned value's gradient reaches x1's value from before the call (read only into
    # a value the program drops) the two histories never meet a gradient: it compiles and matches eager. Written
    # and returned (x1.add_(x1), seed 118800 #420), eager's write sends the gradient to b0's element at offset 0,
    # where x1's own history drops it: refused
    def alias_set(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.t()
        t0.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        x1.mul(2.0)
        return (t0,)

    def own_set(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x1.set_(x1)  # type: ignore[call-overload]
        x1.mul(2.0)
        return (x1,)

    def written(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x1.add_(x1)
        return (x1.expand(()),)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 3), requires_grad=True).clone()
        return (b0.detach(), b0.select(1, 0).as_strided((), (), 1))

    with torch.enable_grad():
        for f in (alias_set, own_set):
            for after_call in (None, write_outputs):
                assert_matches_eager(f, make_inputs, after_call=after_call, compile_fn=compile_fn)
        assert_refused(written, make_inputs, compile_fn, r"args\[1\]: an as_strided\(\) view that reaches elements")


def test_as_strided_input_leaving_its_view_unread_beside_a_write_of_its_storage(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121002 #8921 and #4702 (refused before; Note [as_strided On Inputs]): x1 leaves the view it was taken
    # of and shares the storage of x0, which the program writes with grad, so the two trace as members of one
    # synthetic base. x1 is never read: eager's write bumps its counter and its next read rebuilds its history from
    # the base, as the compiled call's does; its own history never meets a gradient: compiles and matches eager, read
    # after the write too. Read before the write (its own history gets the gradient, where the compiled call's goes
    # through the base) it is refused
    def unread(x0: torch.Tensor, x1: torch.Tensor) -> object:
        with torch.enable_grad():  # (called under no_grad too)
            x0.mul_(x0)  # (eager's backward of x0 raises: saved x0 modified)
        return ()

    def read_after(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x0.mul_(2.0)
        return (x1 * 3.0,)

    def read_before(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t = x1 * 3.0
        x0.mul_(2.0)
        return (t,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((4, 2), requires_grad=True).clone()
        return (b0, b0.diagonal(1, 0, 1).as_strided((), (), 0))

    def view_of_base() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 4), requires_grad=True).clone()
        return (b0, b0.as_strided((2,), (0,), 2).as_strided((2, 3), (0, 2), 0))

    with torch.enable_grad():
        for make in (make_inputs, view_of_base):
            for f in (unread, read_after):
                assert_matches_eager(f, make, compile_fn=compile_fn)
            assert_refused(read_before, make, compile_fn, r"args\[1\]: an as_strided\(\) view that reaches elements")
    with torch.no_grad():
        assert_matches_eager(unread, make_inputs, compile_fn=compile_fn)


def test_as_strided_input_leaving_its_view_unread_beside_writes_without_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121002 #5065 and #8422 (refused before; Note [as_strided On Inputs]): x1 leaves the select() it was
    # taken of; the program resizes and fills its detach()ed base, or fills x1 through `.data`, and never reads x1:
    # compiles and matches eager. Read before the write, it is refused
    def resized(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x0.resize_((4,))
        x0.fill_(0.5)
        return ()

    def data_filled(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x1.data.fill_(-1.0)
        return ()

    def read_before(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t = x1 * 2.0
        x1.data.fill_(-1.0)
        return (t,)

    def detached() -> tuple[object, ...]:
        b0 = torch.randn((3,), requires_grad=True).clone()
        return (b0.detach(), b0.unbind(0)[0].as_strided((1, 1), (3, 2), 2))

    def leaf_base() -> tuple[object, ...]:
        b0 = torch.randn((4, 3, 4), requires_grad=True)
        return (b0, b0.select(1, -1).as_strided((), (), 1))

    with torch.enable_grad():
        assert_matches_eager(resized, detached, compile_fn=compile_fn)
        assert_matches_eager(data_filled, leaf_base, compile_fn=compile_fn)
        assert_refused(read_before, leaf_base, compile_fn, r"args\[1\]: an as_strided\(\) view that reaches elements")


def test_escaping_as_strided_view_set_in_inference_mode_then_read_names_the_op(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121012 #2330 (Note [as_strided On Inputs]): t2 reaches an element of b0 that x0 does not cover, and a
    # set_() in inference_mode bumps their counter before sort() reads t2 with grad. The refusal named the pipeline's
    # stand-in Function read in t2's place ("_EagerHistory.apply uses ..."); it names the program's op
    def f(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0, _ = x0.sort(0, descending=True)
        t2 = x0.as_strided((), (), 2)
        with torch.inference_mode():
            t2.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        t2.sort(0, descending=True)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((2, 4), requires_grad=True)
        return (b0.select(1, -1), b0)

    with torch.enable_grad():
        assert_refused(
            f, make_inputs, compile_fn, r"args\[0\], args\[1\]: aten\.sort\.default uses, with grad, an as_s"
        )


def test_view_input_read_after_it_is_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 39000 #3399 (DIVERGED, Note [Stale View Functions]): x0 = b0.unsqueeze(-2), set_() under no_grad to
    # a tensor of another size, then read with grad: eager rebuilds x0's history on the new geometry, the compiled
    # graph kept the old one (its backward failed a shape check): refused, a gradient reaching a read of a view input
    # set_() to another storage (relaid_views.py). (The fuzz program set_() it to its base,
    # another input: the shared-storage rule refuses that form first.)
    def read(x0: torch.Tensor, x1: torch.Tensor) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        return (-x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 3, 2), requires_grad=True).clone()
        return (b0.unsqueeze(-2), torch.randn((1, 3, 2)))

    with torch.enable_grad():
        x0, x1 = cast(tuple[torch.Tensor, torch.Tensor], make_inputs())
        read(x0, x1)  # eager runs it
        assert_refused(read, make_inputs, compile_fn, "args\\[0\\]: an input that is a view and requires grad is set_")


def test_view_input_read_after_its_base_is_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 30000 #7742 (Note [Stale View Functions]): x2 is x0's base; its set_() to a 0-d tensor moves the
    # counter x0 shares, so eager's read of x0 rebuilds x0's history on x2's new geometry (x2.grad of shape ()), where
    # the compiled one kept x0's (shape (2,)): refused; x0 returned unread matches eager
    def read(x0: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> object:
        with torch.no_grad():
            set_to(x2, x1)
        return (x0 + 1.5,)

    def unread(x0: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> object:
        with torch.no_grad():
            set_to(x2, x1)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(2, requires_grad=True)
        return (b0.reshape((2, 1)), torch.randn(()), b0)

    with torch.enable_grad():
        assert_refused(read, make_inputs, compile_fn, "set_\\(\\) its base args\\[2\\] to another storage or layout")
        assert_matches_eager(unread, make_inputs, compile_fn=compile_fn)


def _transposed_then_viewed_then_unsqueezed(x0: torch.Tensor) -> tuple[torch.Tensor]:
    x0.t_()
    t0 = x0.t()
    x0.unsqueeze_(-1)
    return (t0,)


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "nonleaf"])
def test_a_no_grad_view_of_a_subclass_input_an_in_place_view_op_changed_raises_like_eager(leaf: bool) -> None:
    # found by the fuzzer (PairTensor inputs, seed 75800 #853): the runtime rebuilds the view over the input's
    # storage (its own set_()), which left its grad_fn answering where eager's raises ("A view was created in no_grad
    # mode and its base ... has been modified inplace"); its counter is now advanced after it is built
    @torch.enable_grad()
    def inputs() -> tuple[torch.Tensor]:
        b = PairTensor.from_tensor(torch.randn(4))
        b.requires_grad_()
        return (b if leaf else b.clone(),)

    with torch.no_grad():
        assert_matches_eager(_transposed_then_viewed_then_unsqueezed, inputs)


# ---------------------------------------------------------------------------------------------------------------------
# A view taken with grad from a no_grad view that a `.data =` moved first: regenerated (Note [Output Regeneration])
# by as_strided under no_grad to the layout the view was taken from, then the recorded view op with grad, so that its
# grad_fn, once the output is written, raises naming eager's op (Select, Unbind, ...), not View. Found by the fuzzer
# (seed 80400, program 725, which a `.data =` after the view now replays through its chain instead).
# ---------------------------------------------------------------------------------------------------------------------


def _select_of_a_moved_no_grad_expand(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x0.expand((2,))
    t0.data = x0.expand((2,))
    return (t0.select(0, -2),)


def _unsqueeze_of_a_moved_no_grad_expand(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x0.expand((2,))
    t0.data = x0
    return (t0.unsqueeze(0),)


def _unbind_of_a_moved_no_grad_transpose(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x0.t()
    t0.data = x0[1:].t()
    return (t0.unbind(1)[1],)


def _split_of_a_moved_no_grad_slice(x0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        t0 = x0[1:]
    t0.data = x0[2:]
    t1, t2 = t0.split_with_sizes([1, 1], 0)
    return (t2, t1)


def _diagonal_of_a_moved_no_grad_slice(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x0[1:]
    t0.data = x0[1:].t()
    return (t0.diagonal(0, 0, 1),)


_MOVED_NO_GRAD_SOURCES = {
    "select": (_select_of_a_moved_no_grad_expand, ()),
    "unsqueeze": (_unsqueeze_of_a_moved_no_grad_expand, ()),
    "unbind": (_unbind_of_a_moved_no_grad_transpose, (4, 3)),
    "split": (_split_of_a_moved_no_grad_slice, (4, 3)),
    "diagonal": (_diagonal_of_a_moved_no_grad_slice, (4, 3)),
}


@pytest.mark.parametrize("make", [leaf, nonleaf])
@pytest.mark.parametrize("name", sorted(_MOVED_NO_GRAD_SOURCES))
def test_view_of_a_moved_no_grad_view_raises_naming_eager_op(
    compile_fn: CompileFn | None, name: str, make: Callable[..., torch.Tensor]
) -> None:
    f, shape = _MOVED_NO_GRAD_SOURCES[name]
    with torch.enable_grad():
        for after_call in (None, write_outputs):
            assert_matches_eager(f, lambda: (make(*shape),), after_call=after_call, compile_fn=compile_fn)


@pytest.mark.parametrize("make", [functools.partial(pair, requires_grad=True), pair_nonleaf], ids=["leaf", "nonleaf"])
@pytest.mark.parametrize("name", ["diagonal", "select"])
def test_view_of_a_moved_no_grad_pair_view_matches_eager(
    compile_fn: CompileFn | None, name: str, make: Callable[..., torch.Tensor]
) -> None:
    f, shape = _MOVED_NO_GRAD_SOURCES[name]
    with torch.enable_grad():
        for after_call in (None, write_outputs):
            assert_matches_eager(f, lambda: (make(*shape),), after_call=after_call, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Issue #27 (fuzz seed 100100, program 714): an in-place view op applied to a view of an input (not the input itself)
# bumps the counter the input and all its views share, once, when eager runs it. An output whose chain repeats that op
# was built after the epilogue at the point its last view was taken, so a no_grad view of the input taken in between
# (after the bump in eager) came out before the repeated bump and raised at grad_fn / is_leaf (Note [Views That Raise
# After A Bump]).
# ---------------------------------------------------------------------------------------------------------------------

_BUMP_MAKERS: dict[str, Callable[[], T]] = {
    "leaf": lambda: leaf(4),
    "nonleaf": lambda: nonleaf(4),
    "pair": lambda: pair(4),
    "pair_leaf": lambda: pair(4, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(4),
}


def _view_taken_after_a_chain_bump(x0: T) -> object:
    t0 = x0.reshape((1, 4, 1))
    t0.transpose_(2, 1)
    t1 = x0.as_strided((), (), 0)
    t2 = t0.expand((1, 2, 4))
    return (t1, t2)


def _view_taken_after_a_chain_bump_returned_last(x0: T) -> object:
    t1, t2 = cast(tuple[T, T], _view_taken_after_a_chain_bump(x0))
    return (t2, t1)


def _view_taken_before_a_chain_bump(x0: T) -> object:
    t1 = x0.as_strided((), (), 0)  # eager's raises: the transpose_() below bumps the counter it shares
    t0 = x0.reshape((1, 4, 1))
    t0.transpose_(2, 1)
    t2 = t0.expand((1, 2, 4))
    return (t2, t1.unsqueeze(0))


def _chain_viewed_after_another_chain_bump(x0: T) -> object:
    # t2 is taken after u0's t_(): eager's reads fine; built at t0's transpose_(), before the repeated t_(), it would not
    t0 = x0.reshape((1, 4, 1))
    t0.transpose_(2, 1)
    u0 = x0.reshape((4, 1))
    u0.t_()
    t2 = t0.expand((1, 2, 4))
    return (t2, u0.expand(2, 4))


# fuzz seed 100100 #714
@pytest.mark.parametrize("kind", sorted(_BUMP_MAKERS))
@pytest.mark.parametrize(
    "f", [_view_taken_after_a_chain_bump, _view_taken_after_a_chain_bump_returned_last], ids=["first", "last"]
)
def test_view_after_bump_of_a_view(compile_fn: CompileFn | None, kind: str, f: Callable[[T], object]) -> None:
    make = _BUMP_MAKERS[kind]
    check_no_grad(f, lambda: (make(),), compile_fn)
    if kind in ("nonleaf", "pair", "pair_nonleaf"):  # (with grad, eager refuses the transpose_() of a leaf's view)
        check_with_grad(f, lambda: (make(),), compile_fn)


@pytest.mark.parametrize("kind", sorted(_BUMP_MAKERS))
def test_view_before_bump_of_a_view(compile_fn: CompileFn | None, kind: str) -> None:
    make = _BUMP_MAKERS[kind]
    check_no_grad(_view_taken_before_a_chain_bump, lambda: (make(),), compile_fn)


@pytest.mark.parametrize("kind", ["leaf", "pair_nonleaf"])
def test_chain_view_after_another_chains_bump_is_refused(compile_fn: CompileFn | None, kind: str) -> None:
    make = _BUMP_MAKERS[kind]
    with torch.no_grad():
        assert_refused(
            _chain_viewed_after_another_chain_bump,
            lambda: (make(),),
            compile_fn,
            match=r"out\[0\] is a view .* taken after out\[1\]'s chain applied an in-place view op",
        )


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper q3 (fuzz seed 111000, issue #27):
#
# * #5613 (under no_grad): a no_grad view taken after another output's chain applied an in-place view op, where that
#   chain ends in a detach(): the detach()'s output was built after the view, repeating the op's bump, and the view's
#   is_leaf raised where eager's reads fine (`chain_bump_seq` now walks through the detach()).
# * #6504 (training): an unbind() view input beside its written base made the probe of eager's saved tensors fail (its
#   is_leaf raises), so a saved no_grad view written after the call did not fail the backward; the compiled backward
#   now raises eager's error for it, the no_grad view's message (Note [Probing Eager's Backward]).
# * #2853 (training): a split() output of an input the program first gave history (a write with grad) was replayed
#   from the input as received, with no grad_fn, so its read after the program's later write raised the no_grad
#   message where eager's names SplitWithSizesBackward0: it is now replayed after the epilogue, its counter advanced.
# ---------------------------------------------------------------------------------------------------------------------


def _chain_through_detach_bumped_before_view(x0: T) -> object:
    t0 = x0[1:3]
    t1 = t0.as_strided((1,), (2,), 0)
    t1.unsqueeze_(-2)
    t2 = t0.expand((2,))
    return (t2, t1.detach())


@pytest.mark.parametrize("kind", sorted(_BUMP_MAKERS))
def test_view_after_bump_of_a_detached_chain(compile_fn: CompileFn | None, kind: str) -> None:
    make = _BUMP_MAKERS[kind]
    check_no_grad(_chain_through_detach_bumped_before_view, lambda: (make(),), compile_fn)


_SAVED_BESIDE: dict[str, Callable[[], tuple[object, ...]]] = {
    "nonleaf": lambda: (lambda b: (b, b.unbind(1)[0]))(nonleaf(2, 3, 2)),
    "pair_nonleaf": lambda: (lambda b: (b, b.unbind(1)[0]))(pair_nonleaf(2, 3, 2)),
}


def _saved_no_grad_view_beside_unbind_input(x0: T, x1: T) -> object:
    x0.mul_(0.5)
    with torch.no_grad():
        t0 = x0.select(2, -2)
    return (t0.sin(), x0)


@pytest.mark.parametrize("kind", sorted(_SAVED_BESIDE))
def test_saved_no_grad_view_beside_unbind_input_written_after(compile_fn: CompileFn | None, kind: str) -> None:
    with torch.enable_grad():
        assert_matches_eager(_saved_no_grad_view_beside_unbind_input, _SAVED_BESIDE[kind], compile_fn=compile_fn)
        assert_matches_eager(
            _saved_no_grad_view_beside_unbind_input,
            _SAVED_BESIDE[kind],
            compile_fn=compile_fn,
            after_call=write_outputs,
        )


def test_saved_no_grad_view_written_after_raises_eagers_message() -> None:
    # the oracle compares the backward's error by type: its message, eager's own
    compiled = subclassaot.compile(_saved_no_grad_view_beside_unbind_input)
    with torch.enable_grad():
        args = cast(tuple[T, T], _SAVED_BESIDE["nonleaf"]())
        t1, x0 = cast(tuple[T, T], compiled(*args))
        with torch.no_grad():
            x0.add_(1.0)
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode and its base"):
            t1.sum().backward()  # type: ignore[no-untyped-call]


def _split_of_input_given_history(x0: T, x1: T) -> object:
    x1.add_(x0)
    t0, _ = x1.split_with_sizes([4, 0], 2)
    x1.copy_(x1)
    return (t0,)


_HISTORY_GIVERS: dict[str, Callable[[], tuple[object, ...]]] = {
    "plain": lambda: (nonleaf(), torch.randn(1, 4, 4)),
    "pair": lambda: (pair_nonleaf(), pair(1, 4, 4)),
}


@pytest.mark.parametrize("kind", sorted(_HISTORY_GIVERS))
def test_split_of_input_given_history_written_after(compile_fn: CompileFn | None, kind: str) -> None:
    with torch.enable_grad():
        assert_matches_eager(_split_of_input_given_history, _HISTORY_GIVERS[kind], compile_fn=compile_fn)
        assert_matches_eager(
            _split_of_input_given_history, _HISTORY_GIVERS[kind], compile_fn=compile_fn, after_call=write_outputs
        )


# The same for a view taken with grad of a view made inside inference_mode or under no_grad (its creation meta, which
# it inherits, makes its grad_fn read raise once the counter moves): eager's, taken after the write that gave the input
# history, has its view op's node, named in "Output 0 of Select is a view of a view which was created in ..."; the
# replay before the epilogue had none ("A view was created in ...": fuzz seed 120900 #304). Beside it, a no_grad view
# taken before that write, returned too, raises in eager as well: no refusal of the pair (check_bumped_views).
def _inference_view_of_input_given_history(x0: T, x1: T) -> object:
    x1.add_(x0)
    with torch.inference_mode():
        t0 = x1.diagonal(0, 1, 2)
    t1 = t0.select(0, 0)
    x1.copy_(x1)
    return (t1,)


def _no_grad_view_of_input_given_history(x0: T, x1: T) -> object:
    x1.add_(x0)
    with torch.no_grad():
        t0 = x1.diagonal(0, 1, 2)
    t1 = t0.select(0, 0)
    x1.detach().zero_()
    return (t1,)


def _inference_view_of_a_no_grad_view_of_input_given_history(x0: T, x1: T) -> object:
    with torch.no_grad():
        t0 = x1.select(0, 0)
    x1.add_(x0)
    with torch.inference_mode():
        t1 = t0.diagonal(-1)
    t2 = t1.select(0, -1)
    set_to(t0.detach(), torch.zeros(()))
    return (t2, t0)


@pytest.mark.parametrize(
    "f",
    [
        _inference_view_of_input_given_history,
        _no_grad_view_of_input_given_history,
        _inference_view_of_a_no_grad_view_of_input_given_history,
    ],
)
def test_view_of_a_no_grad_or_inference_view_of_input_given_history_written_after(
    compile_fn: CompileFn | None, f: Callable[..., object]
) -> None:
    with torch.enable_grad():
        outputs = f(*_HISTORY_GIVERS["plain"]())
        assert isinstance(outputs, tuple) and grad_fn_raises(outputs[0])  # (eager's raises naming its node)
        assert_matches_eager(f, _HISTORY_GIVERS["plain"], compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regression (issue #27): fuzz seed 112000 #1804 (training): a view taken with grad of an input written under
# no_grad after it is stale; eager regenerates its history as AsStridedBackward0, which computes a new gradient, where
# the replayed view ops passed views of the tangent that AccumulateGrad took (Note [Views That Raise After A Bump]).


def _viewed_after_stale(x0: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0.transpose(1, 1)
    with torch.no_grad():
        x0.mul_(0.5)
    return (t0.view((1, 2, 1)),)


def _stale_at_end(x0: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0.t()
    with torch.no_grad():
        x0.mul_(0.5)
    return (t0,)


_STALE_GIVERS: dict[str, Callable[[], tuple[object, ...]]] = {
    "plain": lambda: (nonleaf(2, 1),),
    "pair": lambda: (pair_nonleaf(2, 1),),
}


@pytest.mark.parametrize("kind", sorted(_STALE_GIVERS))
@pytest.mark.parametrize("program", [_viewed_after_stale, _stale_at_end])
def test_stale_view_gradient_is_fresh(
    compile_fn: CompileFn | None, kind: str, program: Callable[[torch.Tensor], tuple[torch.Tensor]]
) -> None:
    with torch.enable_grad():
        assert_matches_eager(program, _STALE_GIVERS[kind], compile_fn=compile_fn)
        assert_matches_eager(program, _STALE_GIVERS[kind], compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regression (issue #27): fuzz seed 105300 #33 (training, PairTensor kinds drawn), first seen with a backend
# that runs the graph module as it is (the Function's plain steps), then on the eager backend too: a no_grad view of
# an intermediate, a view of that view taken with grad, then a write to the intermediate. Eager took the second view
# before the write (its grad_fn raises only when read); the runtime replayed it from the first output after advancing
# that output's counter (Replay.bump_after), so taking it raised "A view was created in no_grad mode ...". The counter
# is now advanced once every output is built (Note [Views That Raise After A Bump]).


def _max_view_under_no_grad_then_written(x0: T) -> object:
    t0, t1 = x0.max(0, keepdim=True)
    with torch.set_grad_enabled(False):
        t2 = t0.view((1,))
    t3 = t2[1:1:1]
    t2.sin()
    t0.add_(t1)
    return (t3, t2)


def _no_grad_view_first_then_its_view(x0: T) -> object:
    t0, t1 = x0.max(0, keepdim=True)
    with torch.no_grad():
        t2 = t0.view((1,))
    t3 = t2[0:1]
    t0.add_(t1)
    return (t2, t3)


def _unbind_output_then_its_view(x0: T) -> object:
    t0 = x0 * 2
    t1, _ = t0.unbind(0)
    t2 = t1.view(-1)
    t0.add_(1.0)
    return (t2, t1)


def _its_view_then_an_in_place_view_op(x0: T) -> object:
    t0 = x0 * 2
    with torch.no_grad():
        t1 = t0.view(-1)
    t2 = t1[0:1]
    t3 = t0.unsqueeze(0)
    t3.t_()  # advances the counter t1 and t2 share, as the replay of t3 does: the runtime's bump still counts
    t0.add_(1.0)
    return (t1, t3, t2)


_BUMPED_PROGRAMS: dict[str, tuple[Callable[[T], object], Callable[[], tuple[T, ...]]]] = {
    "max_view_under_no_grad_then_written-plain": (_max_view_under_no_grad_then_written, lambda: (leaf(),)),
    "max_view_under_no_grad_then_written-pair": (_max_view_under_no_grad_then_written, lambda: (_pair_leaf(),)),
    "max_view_under_no_grad_then_written-plain_1d": (_max_view_under_no_grad_then_written, lambda: (leaf(2),)),
    "max_view_under_no_grad_then_written-pair_1d": (_max_view_under_no_grad_then_written, lambda: (_pair_leaf(2),)),
    "no_grad_view_first-plain": (_no_grad_view_first_then_its_view, lambda: (leaf(),)),
    "no_grad_view_first-pair": (_no_grad_view_first_then_its_view, lambda: (_pair_leaf(),)),
    "in_place_view_op-plain": (_its_view_then_an_in_place_view_op, lambda: (leaf(2),)),
    "in_place_view_op-pair": (_its_view_then_an_in_place_view_op, lambda: (_pair_leaf(2),)),
    "unbind_output-plain": (_unbind_output_then_its_view, lambda: (leaf(2, 3),)),
    "unbind_output-pair": (_unbind_output_then_its_view, lambda: (_pair_leaf(2, 3),)),
}

# The eager backend, and one that runs the graph module as it is (the compiled Function and its plain steps in
# training: Note [Straight-Line Runners]).
_BACKENDS: dict[str, object] = {"eager": "eager", "function": lambda gm, example_inputs: gm}


@pytest.mark.parametrize("backend", sorted(_BACKENDS))
@pytest.mark.parametrize("case", sorted(_BUMPED_PROGRAMS))
def test_view_taken_with_grad_of_a_no_grad_view_before_the_write(
    compile_fn: CompileFn | None, case: str, backend: str
) -> None:
    program, make_inputs = _BUMPED_PROGRAMS[case]
    with torch.enable_grad():
        outputs = program(*make_inputs())
        assert isinstance(outputs, tuple) and grad_fn_raises(outputs[0])  # as the runtime must give
        for after_call in (None, write_outputs):
            assert_matches_eager(
                program, make_inputs, backend=_BACKENDS[backend], compile_fn=compile_fn, after_call=after_call
            )


# Fuzz regressions of helper gc: a no_grad view of an input read by a custom Function (issue #27).
#
# * fuzz seed 111000 #755: a leaf, read only through a no_grad view (which requires grad with no edge to the leaf) and
#   returned as itself, went into the Function attached, its only input: its AccumulateGrad waited on the Function's
#   node, so a backward that raised there (the view's saved read, written after the call) left it without the gradient
#   eager's engine gives it first (Note [Backward Errors Are Deferred]: it goes in as a stand-in).
# * fuzz seed 112000 #7490: eager's backward through the input's new value alone completes, through the output of the
#   Function that saved the view raises; the probe's fake of the non-leaf input had a history node numbered above all
#   (Note [Probing Eager's Backward]), so it saw every backward complete, and the compiled one raised for both.
# ---------------------------------------------------------------------------------------------------------------------


_NO_GRAD_VIEWS: dict[str, Callable[[T], T]] = {
    "transpose": lambda x: x.transpose(0, 0),
    "t": lambda x: x.t(),
    "expand": lambda x: x.expand(x.shape),
    "alias": lambda x: x.view(x.shape),
}
_READS: dict[str, Callable[[T], T]] = {
    "function": lambda x: cast(T, SinFunction.apply(x)),  # type: ignore[no-untyped-call]  # untyped in torch
    "sin": torch.sin,
}


def _leaf_read_through_no_grad_view(view: Callable[[T], T], read: Callable[[T], T]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = view(x0)
        t1 = read(t0)
        return (t1.mul(t0), x0)

    return f


@pytest.mark.parametrize("kind", ["leaf", "pair_leaf"])
@pytest.mark.parametrize("view", sorted(_NO_GRAD_VIEWS))
@pytest.mark.parametrize("read", sorted(_READS))
def test_leaf_read_through_no_grad_view_and_returned(
    compile_fn: CompileFn | None, kind: str, view: str, read: str
) -> None:
    # fuzz seed 111000 #755 (transpose, function, leaf), shrunk
    f = _leaf_read_through_no_grad_view(_NO_GRAD_VIEWS[view], _READS[read])
    make = _BASES[kind]
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn, after_call=write_outputs)


def _saved_view_base_written_returned(view: Callable[[T], T], read: Callable[[T], T]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = view(x0)
        t1 = read(t0)
        x0.add_(-1.0)
        return (x0, t1.view((1, -1, 1)))

    return f


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", sorted(_NO_GRAD_VIEWS))
@pytest.mark.parametrize("read", sorted(_READS))
@pytest.mark.parametrize("through", [None, 0, 1])
def test_saved_no_grad_view_base_written_with_grad_and_returned(
    compile_fn: CompileFn | None, kind: str, view: str, read: str, through: int | None
) -> None:
    # fuzz seed 112000 #7490 (t, function, nonleaf), shrunk: the backward through x0 alone completes in eager
    f = _saved_view_base_written_returned(_NO_GRAD_VIEWS[view], _READS[read])
    after_call = None if through is None else backward_through(through)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_INPUTS[kind](),), compile_fn=compile_fn, after_call=after_call)


# Fuzz regression (issue #27): fuzz seed 112000 #6757 (training): the same, where the view was relaid in place (t_())
# before the bump: eager's view is stale all the same, where the early replay's own t_() took the bump the runtime
# gives the input, so its history stayed TBackward1's, and the leaf behind it took a view of the tangent. Relaid after
# the bump (the last), the t_() regenerates the stale view's history before its own node (Note [Views That Raise After A Bump]).


def _bump(x0: torch.Tensor, how: str) -> None:
    if how == "self_set":
        with torch.inference_mode():
            set_to(x0, x0)
    else:
        with torch.no_grad():
            x0.mul_(0.5)


def _relaid_then_stale(x0: torch.Tensor, how: str) -> tuple[torch.Tensor]:
    t0 = x0.transpose(1, 1)
    t0.t_()
    _bump(x0, how)
    return (t0,)


def _relaid_then_stale_viewed(x0: torch.Tensor, how: str) -> tuple[torch.Tensor]:
    t0 = x0.unsqueeze(0)
    t0.transpose_(0, 2)
    _bump(x0, how)
    return (t0.view((2,)),)


def _relaid_by_the_last_bump(x0: torch.Tensor, how: str) -> tuple[torch.Tensor]:
    t0 = x0.transpose(1, 1)
    _bump(x0, how)
    t0.t_()  # the last bump: t0's history is read then, before it, and is fresh
    return (t0,)


@pytest.mark.parametrize("how", ["self_set", "no_grad_write"])
@pytest.mark.parametrize("kind", sorted(_STALE_GIVERS))
@pytest.mark.parametrize("program", [_relaid_then_stale, _relaid_then_stale_viewed, _relaid_by_the_last_bump])
def test_stale_view_relaid_in_place_gradient_is_fresh(
    compile_fn: CompileFn | None, kind: str, how: str, program: Callable[[torch.Tensor, str], tuple[torch.Tensor]]
) -> None:
    def f(x0: torch.Tensor) -> tuple[torch.Tensor]:
        return program(x0, how)

    if (program, kind, how) == (_relaid_then_stale, "pair", "self_set"):
        # the wrapper's set_() is an in-place view op on another view of it (Note [Stale View Functions])
        refused_with_grad(f, _STALE_GIVERS[kind], compile_fn, "in-place view op to another view of the same tensor")
        return
    with torch.enable_grad():
        assert_matches_eager(f, _STALE_GIVERS[kind], compile_fn=compile_fn)
        assert_matches_eager(f, _STALE_GIVERS[kind], compile_fn=compile_fn, after_call=write_outputs)


# Views without history stale at the end: a view of an input that requires no grad, written after the view was taken,
# rebuilds its grad_fn from the input once the caller makes the input require grad (or raises, for a no_grad or
# multi-output view); one made after the last write stays a leaf (Note [Views That Raise After A Bump]). Found through
# the torch.compile entry (fuzz seed 116100 #104: Dynamo runs the program's requires_grad_() after the graph).
def _no_grad_view(x: T) -> T:
    with torch.no_grad():
        return x[1:3]


_STALE_VIEWS: dict[str, Callable[[T], T]] = {
    "slice": lambda x: x[1:3],
    "view": lambda x: x.view(2, 2),
    "select": lambda x: x.select(0, 1),
    "view_of_view": lambda x: x.view(2, 2)[1],
    "unbind": lambda x: x.unbind(0)[1],
    "no_grad_slice": _no_grad_view,
}


def _write(x0: T, t0: T, how: str) -> None:
    if how == "input":
        x0.add_(2.0)
    elif how == "other_view":
        x0[3:].mul_(3.0)
    elif how == "the_view":
        t0.mul_(2.0)
    elif how == "after":
        x0.view(2, 2).t_()  # an in-place view op of another view: a bump all the same


def _require_grad_of_inputs(outputs: object, args: tuple[object, ...]) -> None:
    """An `after_call`: the caller makes every input require grad (its views read their grad_fn then)."""
    for a in args:
        assert isinstance(a, torch.Tensor)
        a.requires_grad_()


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("how", ["input", "other_view", "the_view", "after", "none"])
@pytest.mark.parametrize("view", sorted(_STALE_VIEWS))
@pytest.mark.parametrize("make", [lambda: torch.randn(4), lambda: pair(4)], ids=["plain", "PairTensor"])
def test_view_stale_at_the_end_regenerates_once_its_input_requires_grad(
    compile_fn: CompileFn | None, make: Callable[[], T], view: str, how: str, grad: bool
) -> None:
    def f(x0: T) -> tuple[T]:
        t0 = _STALE_VIEWS[view](x0)
        _write(x0, t0, how)
        return (t0,)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn, after_call=_require_grad_of_inputs)


_VIEW_WRITES: dict[str, Callable[[T], T]] = {
    "function": lambda t: cast(T, DirtyScale.apply(t)),  # type: ignore[no-untyped-call]  # torch leaves apply untyped
    "mul_": lambda t: t.mul_(2),
}


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("write", sorted(_VIEW_WRITES))
@pytest.mark.parametrize("take", ["split", "narrow"])
@pytest.mark.parametrize("own_flag", [True, False])
def test_no_grad_view_with_own_flag_whose_root_gains_grad(
    compile_fn: CompileFn | None, kind: str, write: str, take: str, own_flag: bool
) -> None:
    """Fuzz seed 116500 #3219 (shrunk; diverged: out[0] read as a leaf without grad_fn where eager's is_leaf and
    grad_fn raise "A view was created in no_grad mode ..."): t0, a no_grad view of x1 (itself a view of x0), written
    in place, then given requires_grad_() of its own; x0, the root, then gains requires_grad. Autograd's check at the
    read looks at the root's flag, not the view's own: eager's raises. The run's root (a synthetic base) does not
    require grad, and the view's own flag hid that eager's root does (Note [Views That Raise After A Bump]).
    Variants: the write by a custom Function's mark_dirty or by mul_(), a multi-output split or a narrow(), without the
    view's own flag, PairTensor inputs."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.split_with_sizes([0, 2], 1)[0] if take == "split" else x1.narrow(1, 0, 1)
        t2 = _VIEW_WRITES[write](t0)
        if own_flag:
            t2.requires_grad_()
        x0.requires_grad = True
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((1, 4, 2)) if kind == "plain" else pair(1, 4, 2)
            return (b0, b0.select(0, -1))

    check_no_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("take", ["unbind", "select", "unbind_t"])
@pytest.mark.parametrize("write", [True, False], ids=["written", "unwritten"])
def test_view_taken_with_grad_of_an_input_whose_base_gains_grad_after(
    compile_fn: CompileFn | None, kind: str, take: str, write: bool
) -> None:
    """Fuzz seed 116700 #1537 (unbind, written; diverged: out[0]'s grad_fn raised the multi-output view's message
    where eager's says "A view was created in no_grad mode ..."): t0 is taken with grad of x0, a view of x1, while x1
    requires no grad; x1 then gains requires_grad. Eager's t0 has no history but grad mode's creation meta; replayed
    with grad after the gain, ours had UnbindBackward0 (a grad_fn read as one where eager's is a leaf, unwritten).
    Now replayed under no_grad and given grad mode's creation meta (Note [Views That Raise After A Bump]). Variants:
    a single-output view, a view of the unbind() output, unwritten, PairTensor inputs."""

    def f(x0: T, x1: T) -> object:
        with torch.enable_grad():
            t0 = x0.select(0, 0) if take == "select" else x0.unbind(0)[0]
            t0 = t0.t() if take == "unbind_t" else t0
        if write:
            t0.mul_(-1.0)
        x1.requires_grad_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((2, 4, 2)) if kind == "plain" else pair(2, 4, 2)
            return (b0.expand((-1, 4, 2)), b0)

    check_no_grad(f, make_inputs, compile_fn)


_RESHAPES: dict[str, Callable[[T], T]] = {
    "reshape": lambda t: t.reshape((1, 4, 3)),
    "torch_reshape": lambda t: torch.reshape(t, (1, 4, 3)),
    "reshape_as": lambda t: t.reshape_as(torch.empty(1, 4, 3)),
    "flatten": lambda t: t.unsqueeze(0).flatten(0, 1),
    "view": lambda t: t.unsqueeze(0).view(4, 3),
    "contiguous_reshape": lambda t: t.contiguous().reshape(12),
}


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("op", sorted(_RESHAPES))
def test_reshape_of_a_no_grad_view_names_eagers_node(compile_fn: CompileFn | None, kind: str, op: str) -> None:
    """Fuzz seed 116700 #78 (reshape; diverged: after the output was written, its grad_fn's error named "Output 0 of
    View is a view of a view which was created in no_grad mode" where eager's names ReshapeAlias): eager's reshape()
    of a plain tensor that is not contiguous is a _reshape_alias, which the functional run sees as a view() of its
    stand-ins. The replay runs reshape() where the program did (ViewRecord.reshape). Variants: torch.reshape,
    reshape_as, flatten (all reshape() below), view() and a contiguous reshape() (View in eager too), PairTensor
    inputs (View: a subclass is tensor-subclass-like)."""

    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.transpose(0, 1)
        return (_RESHAPES[op](t0),)

    def make_inputs() -> tuple[object, ...]:
        return (leaf(3, 4) if kind == "plain" else pair(3, 4, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def _require_grad_of_bases(outputs: object, args: tuple[object, ...]) -> None:
    """An `after_call`: the caller makes the intermediate the program returned require grad (the first output, or
    the `._base` of the view returned alone): its views read their grad_fn then."""
    assert isinstance(outputs, tuple)
    first = outputs[0]
    assert isinstance(first, torch.Tensor)
    base = first if len(outputs) > 1 else first._base
    assert base is not None
    base.requires_grad_()


@pytest.mark.parametrize("returned", ["view", "with_fresh"])
@pytest.mark.parametrize("how", ["input", "other_view", "the_view", "after", "none"])
@pytest.mark.parametrize("view", sorted(_STALE_VIEWS))
@pytest.mark.parametrize("make", [lambda: torch.randn(4), lambda: pair(4)], ids=["plain", "PairTensor"])
def test_view_of_an_intermediate_stale_at_the_end_regenerates_once_it_requires_grad(
    compile_fn: CompileFn | None, make: Callable[[], T], view: str, how: str, returned: str
) -> None:
    # As for inputs (above), for a view of a tensor the program made: eager's view taken before a write to the
    # intermediate is stale, and rebuilds its grad_fn from it once the caller makes it require grad; the replay of the
    # view, made from the graph's intermediate with the write in it, stayed a leaf (issue #27). Views taken after the
    # write stay fresh: the runtime bumps the stale view as soon as it is built, building outputs in program order
    def f(x0: T) -> tuple[T, ...]:
        y = x0.clone()
        t0 = _STALE_VIEWS[view](y)
        _write(y, t0, how)
        if returned == "with_fresh":  # views taken after the write (of the intermediate, of the stale view): fresh
            return y, t0, y[1:], t0.view(t0.shape)
        return (t0,)  # its base reached through `._base`

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make(),), compile_fn=compile_fn, after_call=_require_grad_of_bases)


def _views_around_a_write(x0: T) -> tuple[T, ...]:
    y = x0.clone()
    t0, u0 = y[0:2], y.unbind(0)[1]  # taken before the write: stale (u0, no_grad or multi-output, raises)
    y.add_(1.0)
    return y, t0, u0, y[1:3], t0.view(2)  # the last two taken after it: fresh


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("make", [lambda: torch.randn(4), lambda: pair(4)], ids=["plain", "PairTensor"])
def test_views_of_an_intermediate_taken_around_its_write(
    compile_fn: CompileFn | None, make: Callable[[], T], grad: bool
) -> None:
    # Views of one intermediate taken before and after its write: the stale ones are bumped as soon as they are built,
    # outputs in program order, so the fresh ones stay fresh (a bump once every output is built made them stale too,
    # and under no_grad such a mix was refused as views whose grad_fn raises); issue #27
    with torch.set_grad_enabled(grad):
        assert_matches_eager(_views_around_a_write, lambda: (make(),), compile_fn=compile_fn)
        assert_matches_eager(
            _views_around_a_write, lambda: (make(),), compile_fn=compile_fn, after_call=_require_grad_of_bases
        )


# ---------------------------------------------------------------------------------------------------------------------
# Views of multi-output view inputs whose base the program writes (issue #27).
#
# * fuzz seed 117100 #6137: an output view of an unbind() input, taken with grad, then resized and written in
#   inference_mode: eager's grad_fn raises ("Output 0 of View is a view and its base ... returns multiple views"); ours,
#   rebuilt by as_strided() of the input, raised that at the call (the input's grad_fn read)
#   (Note [Views Of Inputs Whose History Raises]).
# * fuzz seed 117100 #3816: an unbind() view of an input that is a view of the other input, which the program then
#   makes require grad and writes in inference_mode: the probe of eager's autograd graphs read the view's grad_fn and
#   raised at compile time; it is the requires_grad_()-after-a-read refusal.
# ---------------------------------------------------------------------------------------------------------------------

_MULTI_OUTPUT: dict[str, Callable[[T], T]] = {
    "unbind": lambda b: b.unbind(0)[0],
    "split": lambda b: torch.split(b, 1)[0],
    "chunk": lambda b: b.chunk(2)[0],
}
_MULTI_OUTPUT_KINDS = sorted(_MULTI_OUTPUT)
_MULTI_OUTPUT_BASES: dict[str, Callable[[], T]] = {
    "nonleaf": lambda: nonleaf(2, 3),
    "leaf": lambda: leaf(2, 3),
    "pair_nonleaf": lambda: pair_nonleaf(2, 3),
}


def _multi_output_input(base: str, op: str) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (_MULTI_OUTPUT[op](_MULTI_OUTPUT_BASES[base]()),)

    return make_inputs


def _view_resized_in_inference_mode(x0: T) -> object:
    # fuzz seed 117100 #6137 for inputs of any multi-output op
    t0 = x0.view(-1)
    with torch.inference_mode():
        t0.resize_((8,))
        t0.fill_(-1.0)
    return (t0,)


def _view_of_input_resized_in_inference_mode(x0: T) -> object:
    t0 = x0.view(-1)
    t1 = x0.unsqueeze(0)
    with torch.inference_mode():
        t0.resize_((8,))
        t0.fill_(-1.0)
    return (t0, t1, x0)


# fuzz seed 117100 #6137
@pytest.mark.parametrize("base", sorted(_MULTI_OUTPUT_BASES))
@pytest.mark.parametrize("op", _MULTI_OUTPUT_KINDS)
@pytest.mark.parametrize("fn", [_view_resized_in_inference_mode, _view_of_input_resized_in_inference_mode])
def test_view_of_multi_output_input_resized_and_written(
    compile_fn: CompileFn | None, base: str, op: str, fn: Callable[[T], object]
) -> None:
    # eager's output views taken with grad before the write raise at grad_fn, naming their own node; a subclass input
    # grown by resize_() through an alias is refused (its own rule)
    make_inputs = _multi_output_input(base, op)
    if base.startswith("pair") and compile_fn is None:
        match = "grows this input's storage with resize_|changes the metadata"
        refused_with_grad(fn, make_inputs, compile_fn, match)
        return
    check_with_grad(fn, make_inputs, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(fn, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# Issue #27, fuzz seed 123056 #310: `t0 = x0.select(0, 0)` of a view input (x0 = b.diagonal(), b = leaf.clone()),
# resized to 7 elements and written inside inference_mode, returned. Eager's t0 is stale: its grad_fn regenerates at the
# next read as as_strided(b, (7,), (1,), 0), whose gradient reaches every element of b it covers; ours, taken of x0,
# gave b x0's diagonal only (Note [Views Of Inputs Whose History Raises]: OutputLeaf.from_base).
_VIEW_INPUTS: dict[str, Callable[[T], T]] = {
    "diagonal": lambda b: b.diagonal(0, 1, 0),
    "column": lambda b: b[:, 0],
    "row": lambda b: b[1],
}


def _view_of_view_input_relaid(how: str) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.select(0, 0) if x0.dim() > 1 else x0[:1]
        with torch.inference_mode() if how == "resize_" else torch.no_grad():
            if how == "resize_":
                t0.resize_((7,))  # past x0's elements, and past b's storage
            elif how == "as_strided_":
                t0.as_strided_((3,), (1,), 0)  # past x0's elements
            t0.fill_(-1.0)
        return (t0,)

    return f


@pytest.mark.parametrize("how", ["resize_", "as_strided_", "write"])
@pytest.mark.parametrize("view", sorted(_VIEW_INPUTS))
@pytest.mark.parametrize("base", ["leaf", "nonleaf", "pair_nonleaf"])
def test_stale_view_of_a_view_input_regenerates_from_its_base(
    compile_fn: CompileFn | None, base: str, view: str, how: str
) -> None:
    def make_inputs() -> tuple[object, ...]:
        make = {"leaf": leaf, "nonleaf": nonleaf, "pair_nonleaf": pair_nonleaf}[base]
        with torch.enable_grad():
            return (_VIEW_INPUTS[view](make(2, 2)),)

    f = _view_of_view_input_relaid(how)
    if base == "pair_nonleaf" and how == "resize_" and compile_fn is None:
        # (a subclass input grown by resize_() through an alias is refused: its own rule)
        refused_with_grad(f, make_inputs, compile_fn, "grows this input's storage with resize_")
        return
    check_with_grad(f, make_inputs, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def _view_relaid_in_place(how: str) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.view(-1)
        y = x0 * 2.0  # read with grad before the bump: its history reaches x0's base
        with torch.inference_mode() if how == "resize_" else torch.no_grad():
            if how == "resize_":
                t0.resize_((2,))  # (shrinks: no resize of the storage)
            else:
                t0.as_strided_((2,), (1,))
            t0.fill_(-1.0)
        return (t0, y)

    return f


@pytest.mark.parametrize("how", ["resize_", "as_strided_"])
@pytest.mark.parametrize("base", sorted(_MULTI_OUTPUT_BASES))
@pytest.mark.parametrize("op", _MULTI_OUTPUT_KINDS)
def test_view_of_multi_output_input_relaid_in_place_and_written(
    compile_fn: CompileFn | None, base: str, op: str, how: str
) -> None:
    # issue #27: the output view is replayed before the graph, its in-place view op with it, which left the input's
    # grad_fn raising when the training Function read it (eager's program read it before that op)
    make_inputs = _multi_output_input(base, op)
    check_with_grad(_view_relaid_in_place(how), make_inputs, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(_view_relaid_in_place(how), make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def test_view_of_multi_output_input_written_raises_eagers_message() -> None:
    # the sentence autograd raises is eager's (a view with history, of a multi-output op), not the no_grad one
    with torch.enable_grad():
        x0 = cast(T, _multi_output_input("nonleaf", "unbind")()[0])
        (out,) = cast(tuple[T], subclassaot.compile(_view_resized_in_inference_mode)(x0))
        assert grad_fn_raises(out) and grad_fn_raises(x0)
        with pytest.raises(RuntimeError, match=r"^Output 0 of \w+ is a view and its base .* multiple views"):
            _ = out.grad_fn


def _multi_output_view_before_base_gains_grad(make: Callable[[T], T]) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        t0 = make(x0)
        x1.requires_grad_()
        with torch.inference_mode():
            x0.resize_((5,))
            x0.fill_(-1.0)
        return (t0,)

    return f


@pytest.mark.parametrize("kind", ["plain", "PairTensor"])
@pytest.mark.parametrize("op", _MULTI_OUTPUT_KINDS)
def test_multi_output_view_of_input_whose_base_gains_grad(compile_fn: CompileFn | None, kind: str, op: str) -> None:
    # fuzz seed 117100 #3816: eager's unbind() view, taken while its input required no grad, raises at grad_fn
    # ("A view was created in no_grad mode ... multiple views") once the base gains grad and is written; the probe
    # comparing eager's autograd graphs (flag set early or as called) read it and raised. The compiled call sets the
    # flag before the graph: refused as for any read before a requires_grad_() of an input over the same storage
    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(2) if kind == "plain" else pair(2)
        return (b0.t(), b0)

    f = _multi_output_view_before_base_gains_grad(_MULTI_OUTPUT[op])
    gained = r"calls requires_grad_\(\) on this input after computing from it"
    # (a subclass input grown by resize_() through its view is refused first, by its own rule)
    refused_with_grad(f, make_inputs, compile_fn, gained if kind == "plain" else "grows this input's storage")


# ---------------------------------------------------------------------------------------------------------------------
# Issue #27 (helper hng): no_grad views of a leaf view that requires grad, and views taken after a set_().
# ---------------------------------------------------------------------------------------------------------------------


def _leaf_view_and_base(kind: str, grad: bool) -> Callable[[], tuple[object, ...]]:
    """x0, a view of x1 that requires grad of its own (a leaf: x1 requires none), or is made to in the program."""

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 2)) if kind == "plain" else pair(3, 2)
        x0 = b0.as_strided((3,), (2,), 1) if kind == "plain" else b0[:, 1]
        return (x0.requires_grad_() if grad else x0, b0)

    return make_inputs


@pytest.mark.parametrize("x0_strides", [(2,), (0,)], ids=["column", "overlapping"])
def test_no_grad_view_of_input_made_to_require_grad_read_after_base_relaid(x0_strides: tuple[int, ...]) -> None:
    """Fuzz seed 117200 #4500 (shrunk; crashed: the run raised "A view was created in no_grad mode and its base ...
    modified inplace"): t0 is a no_grad view of x0, a view of x1 that the program makes require grad; eager's t0 takes
    requires_grad from x1, which requires none, so its reshape() after x1.unsqueeze_() reads no history. The joint
    trace lays x0 over a synthetic base that requires grad, whose no_grad view raised at the read: it runs under
    no_grad there, as eager's records nothing. The fuzz program's x0 overlaps (stride 0): a leaf that requires grad
    over an alias group the program relays is refused (fuzz seed 120200 #1006: its gradient through the group's base
    would be the mean over its repeats), so the column view keeps the case compiled."""

    def f(x0: T, x1: T) -> object:
        with torch.set_grad_enabled(False):
            t0 = x0.select(0, -3)
        x0.requires_grad_()
        x1.unsqueeze_(1)
        t0.reshape(())
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 2))
        return (b0.as_strided((3,), x0_strides, 1), b0)

    with torch.enable_grad():
        if x0_strides == (0,):
            with pytest.raises(UnsupportedError, match="elements overlap in memory"):
                subclassaot.compile(f)(*cast("tuple[T, T]", make_inputs()))
            return
        for after_call in (None, write_outputs):
            assert_matches_eager(f, make_inputs, after_call=after_call)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("grad", ["at_call", "in_program"])
@pytest.mark.parametrize("write", ["unsqueeze_", "mul_", "none"])
def test_view_op_of_no_grad_view_of_a_leaf_view_input(
    compile_fn: CompileFn | None, kind: str, grad: str, write: str
) -> None:
    # seed 117200 #4500 and variants: x0 requires grad from the call or from the program's requires_grad_(); x1, its
    # base, relaid or written with grad, or not at all; the no_grad view viewed again and returned
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t0 = x0.select(0, -3)
        if grad == "in_program":
            x0.requires_grad_()
        if write == "unsqueeze_":
            x1.unsqueeze_(1)
        elif write == "mul_":
            x1.mul_(2)
        return (t0.reshape(()),)

    make_inputs = _leaf_view_and_base(kind, grad == "at_call")
    if compile_fn is None and grad == "in_program" and write != "none" and kind == "pair":
        # (refused by a rule of its own: subclass inputs over one storage, one made to require grad; the plain mul_
        # variant, once refused as an input written in place and made to require grad, matches eager since that rule
        # lets a write no operand of which requires grad through)
        match = "share storage and do not require grad"
        with torch.enable_grad(), pytest.raises(UnsupportedError, match=match):
            subclassaot.compile(cast(Callable[..., object], f))(*make_inputs())
        return
    check_with_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("write", ["unsqueeze_", "mul_", "none"])
def test_computing_from_no_grad_view_of_a_leaf_view_input_matches_eager(
    compile_fn: CompileFn | None, kind: str, write: str
) -> None:
    # x0 comes requiring grad of its own, a view of x1 that requires none: eager's no_grad view of it requires no grad,
    # so `t0 + 1` has no history, where the run's view follows x0 (it diverged with no write, crashed with one), then
    # refused; the add reads the view through a detach() (Note [Grad Mode And Autograd Reads], flagless views)
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t0 = x0.select(0, -3)
        if write == "unsqueeze_":
            x1.unsqueeze_(1)
        elif write == "mul_":
            x1.mul_(2)
        return (t0 + 1,)

    check_with_grad(f, _leaf_view_and_base(kind, True), compile_fn)


def test_view_taken_after_set_onto_a_storage_written_after() -> None:
    """Fuzz seed 123045 #37 (shrunk; diverged: out[0].is_leaf raised "A view was created in no_grad mode ..." where
    eager's is True): x0, an unbind() view, is set_() onto x1's storage, then viewed (t1); t0.unsqueeze_() then bumps
    x1's counter, which x0 does not share. Eager's t1 was made after x0's last bump and reads fine; the bump on the
    storage x0 moved onto was counted as x0's, and t1 replayed at x0's counter at entry."""

    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        t0 = x1.view((1, 1))
        t1 = x0.view((1, 1, 1))
        t0.unsqueeze_(2)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 1, 1))
        b0.requires_grad_()
        return (b0.unbind(0)[1], torch.randn(()))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("write", ["other_view_relaid", "other_view_written", "other", "self", "sibling"])
def test_no_grad_view_taken_after_set_onto_another_inputs_storage(
    compile_fn: CompileFn | None, kind: str, write: str
) -> None:
    # seed 123045 #37 and variants: after x0.set_(x1) and the view, a bump of x1's counter (through a view of it, in
    # place or relaid, or directly) leaves eager's view fresh; one of x0's own (x0 itself, or x2, an unbind() sibling
    # sharing its counter) makes it raise
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x0, x1)
        t0 = x1.view((1, 1))
        t1 = x0.view((1, 1, 1))
        if write == "other_view_relaid":
            t0.unsqueeze_(2)
        elif write == "other_view_written":
            t0.mul_(2)
        else:
            {"other": x1, "self": x0, "sibling": x2}[write].mul_(2)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0, b1 = (torch.randn((3, 1, 1)), torch.randn(())) if kind == "plain" else (pair(3, 1, 1), pair())
        with torch.enable_grad():
            views = b0.requires_grad_().unbind(0)
        return (views[1], b1, views[2])

    check_no_grad(f, make_inputs, compile_fn)


_FLAG_AHEAD_RULE = "a view of a tensor that does not require grad, and then computes with grad enabled"


def _no_grad_view_changed_with_grad_then_flag(op: str, of_base: bool, flag: bool) -> Callable[..., object]:
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t0 = (x1 if of_base else x0).t()
        if op == "t_":
            t0.t_()
        else:
            getattr(t0, op)(2.0)
        if flag:
            x0.requires_grad_()
        return (x0.mul(2.0), t0)

    return f


@pytest.mark.parametrize("flag", ["after", "never"])
@pytest.mark.parametrize("op", ["mul_", "add_", "t_"])
@pytest.mark.parametrize("viewed", ["view_input", "base_of_the_view_input", "leaf_input"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_no_grad_view_changed_with_grad_before_the_input_requires_grad(
    compile_fn: CompileFn | None, kind: str, viewed: str, op: str, flag: str
) -> None:
    """x0, a view of x1 (which requires no grad), has a view taken under no_grad, changed in place with grad, and the
    program then makes x0 require grad: eager's view takes requires_grad from x0's base (none), so its write runs and
    records nothing. The compile sets the flag on x0's stand-in from the start, whose no_grad view requires grad
    through the synthetic base of x0 and x1, and autograd raised "A view was created in no_grad mode" at the write
    (fuzz seed 123176, program 101: CRASHED). Refused by name, as for a view input that came requiring grad. Without
    the flag, with the view taken of x1, or where x0 is x1 (a leaf of its own), it matches eager."""
    f = _no_grad_view_changed_with_grad_then_flag(op, viewed == "base_of_the_view_input", flag == "after")

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(3) if kind == "pair" else torch.randn(3)
        return (b0 if viewed == "leaf_input" else b0.view(3), b0)

    if flag == "after" and viewed == "view_input" and op == "t_":
        with torch.enable_grad():
            f(*make_inputs())  # eager runs it
        refused_with_grad(f, make_inputs, compile_fn, _FLAG_AHEAD_RULE)
        return
    # (the element writes, no operand of which requires grad, go through a detach() of the view since Note [Grad
    # Mode And Autograd Reads], flagless views)
    check_with_grad(f, make_inputs, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def _no_grad_empty_slice_set_then_contiguous_with_grad(x0: T, x1: T) -> object:
    t0 = x1[3:3:2]
    t0.set_(x0)  # type: ignore[call-overload]
    with torch.set_grad_enabled(True):
        t0.contiguous()  # contiguous already: eager returns t0 itself and reads no history
    return ()


def _no_grad_slice_set_then_contiguous_with_grad(x0: T, x1: T) -> object:
    t0 = x1[0:2]
    t0.set_(x0)  # type: ignore[call-overload]
    with torch.set_grad_enabled(True):
        t1 = t0.contiguous()
    return (t1 * 2,)


@pytest.mark.parametrize(
    "f",
    [_no_grad_empty_slice_set_then_contiguous_with_grad, _no_grad_slice_set_then_contiguous_with_grad],
    ids=["empty", "read"],
)
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_no_grad_view_set_then_contiguous_with_grad(
    compile_fn: CompileFn | None, kind: str, f: Callable[..., object]
) -> None:
    """A view taken under no_grad of a non-leaf that requires grad, set_() to another input's storage there, then
    contiguous() with grad on: the view is contiguous, so eager's contiguous() returns it and reads no history. The
    run read a stand-in with the view's rebuilt history instead (Note [Stale View Functions]), whose apply read the
    no_grad view's grad_fn after its bump and raised "A view was created in no_grad mode and its base or another view
    of its base has been modified inplace with grad mode enabled" (fuzz seed 118300, program 1907: CRASHED)."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = (pair(3) if kind == "pair" else torch.randn((3,))).requires_grad_().clone()
        b0 = torch.randn((4, 2, 1))
        return (PairTensor.from_tensor(b0) if kind == "pair" else b0, b1)

    check_no_grad(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 123242 #420 (under no_grad, issue #27): an output view of a view of an input (itself a view of a leaf
# requiring grad) made between two in-place view ops on a view the program does not return. Eager bumps the counter
# they all share at each in-place view op (transpose_(0, 0), a no-op, counts), so the output, made at 1, raises at its
# grad_fn once the counter is at 2. Ours replays the chain before the epilogue, its t_() moving the counter before the
# output is made; a plain input is then settled to eager's count (2), which makes the output raise, but a PairTensor
# input that outputs are replayed from kept the count the replay left (1), so the output read its grad_fn as a leaf
# (with two in-place view ops after the view instead, the input ended at 1 where eager's is at 2). An early replay
# whose eager grad_fn raises no longer keeps its input's count (Replay.eager_raises).
# ---------------------------------------------------------------------------------------------------------------------


def _expand_then_sibling_transposed(x0: T) -> object:
    t0 = x0.as_strided((1,), (1,), 2)
    t0.t_()
    t1 = t0.expand((1, 2))
    t0.transpose_(0, 0)
    return (t1,)


def _unsqueeze_then_sibling_unsqueezed(x0: T) -> object:
    t0 = x0[0:2]
    t0.t_()
    t1 = t0.unsqueeze(0)
    t0.unsqueeze_(0)
    return (t1,)


def _slice_then_sibling_t(x0: T) -> object:
    t0 = x0.view(3)
    t1 = t0[1:]
    t0.t_()
    return (t1,)


def _expand_then_sibling_written(x0: T) -> object:
    t0 = x0.as_strided((1,), (1,), 2)
    t0.t_()
    t1 = t0.expand((1, 2))
    t0.mul_(2.0)
    return (t1,)


def _squeeze_then_sibling_transposed_twice(x0: T) -> object:
    t0 = x0.unsqueeze(0)
    t1 = t0.squeeze(0)
    t0.transpose_(0, 1)
    t0.transpose_(0, 1)
    return (t1,)


_SIBLING_PROGRAMS = [
    _expand_then_sibling_transposed,
    _unsqueeze_then_sibling_unsqueezed,
    _slice_then_sibling_t,
    _expand_then_sibling_written,
    _squeeze_then_sibling_transposed_twice,
]


def _select_view(kind: str, *, of_leaf: bool = True) -> Callable[[], tuple[object, ...]]:
    """A select() view of a (1, 3) tensor requiring grad: a leaf, or (`of_leaf` False) a clone of one."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            base = pair(1, 3, requires_grad=True) if kind == "pair" else torch.randn(1, 3, requires_grad=True)
            return ((base if of_leaf else base.clone()).select(0, 0),)

    return make_inputs


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("fn", _SIBLING_PROGRAMS)
def test_no_grad_view_raises_after_in_place_view_op_on_unreturned_sibling(
    compile_fn: CompileFn | None, kind: str, fn: Callable[[T], object]
) -> None:
    # fuzz seed 123242 #420 (the first program, with a plain input); the input ends at eager's count too
    with torch.no_grad():
        assert_matches_eager(fn, _select_view(kind), compile_fn=compile_fn, versions="exact")


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("fn", _SIBLING_PROGRAMS)
def test_view_after_in_place_view_op_on_unreturned_sibling_with_grad(
    compile_fn: CompileFn | None, kind: str, fn: Callable[[T], object]
) -> None:
    # the same programs with grad (of a non-leaf: an in-place view op on a view of a leaf raises): the views have
    # histories of their own and read their grad_fn
    check_with_grad(fn, _select_view(kind, of_leaf=False), compile_fn)


def _leaf_view_of_input(x0: T) -> tuple[T, ...]:
    with torch.no_grad():
        t0 = x0.unsqueeze(0)
    t0.requires_grad_()
    return (t0.mul(-1.0), x0)


def _leaf_view_of_intermediate(x0: T) -> tuple[T, ...]:
    y = x0 * 2
    with torch.no_grad():
        v = y[0]
    v.requires_grad_()
    return (v * 3, y)


def _leaf_view_then_base_written(x0: T) -> tuple[T, ...]:
    with torch.no_grad():
        t0 = x0.unsqueeze(0)
    t0.requires_grad_()
    t1 = t0.mul(-1.0)
    with torch.no_grad():
        x0.add_(1)
    return (t1,)


@pytest.mark.parametrize("fn", [_leaf_view_of_input, _leaf_view_of_intermediate, _leaf_view_then_base_written])
def test_view_made_leaf_under_no_grad_raises_once_its_base_is_written(fn: Callable[[T], tuple[T, ...]]) -> None:
    # fuzz seed 121005 #2921 (the first program, written after): a view taken under no_grad of a base requiring grad,
    # made a leaf, raises "A view was created in no_grad mode ..." at its accumulator in the backward once its base's
    # counter moved, in the program or after the call; the graph's leaf, a view of the base's detached alias, never
    # did (autograd checks the counter only against a base requiring grad)
    with torch.enable_grad():
        for make in (functools.partial(leaf, 3), functools.partial(nonleaf, 3)):
            assert_matches_eager(fn, lambda m=make: (m(),))  # type: ignore[misc]
            assert_matches_eager(fn, lambda m=make: (m(),), after_call=write_outputs)  # type: ignore[misc]


def _imag_of_conj() -> tuple[object, ...]:
    # a float view (negative bit) of a complex base
    return ((torch.randn((), dtype=torch.complex64).conj().imag.unsqueeze(-1)),)


def _conj() -> tuple[object, ...]:
    return (torch.randn(2, 3, dtype=torch.complex64).conj(),)  # a view with the conjugate bit of a base without it


def _unbound_grown(x0: T) -> tuple[T, ...]:
    t0 = x0.unbind(0)[0]
    t0.resize_((7,))
    t0.fill_(3.0)
    return (t0,)


@pytest.mark.parametrize("make", [_imag_of_conj, _conj], ids=["imag", "conj"])
@pytest.mark.parametrize("grad", [False, True])
def test_stale_view_of_a_view_input_that_reads_its_base_otherwise(
    make: Callable[[], tuple[object, ...]], grad: bool
) -> None:
    """Fuzz seed 121008 program 1093: an unbind() view of x0, grown by resize_() and written, is stale at the end;
    such an output is rebuilt by as_strided() of the input's `._base` (Note [Views Of Inputs Whose History Raises]).
    Where x0 reads its base otherwise, an `.imag` of a complex base, that as_strided() took the complex dtype and
    raised "setStorage: ... out of bounds"; a conj() view's output lost its conjugate bit. Rebuilt of x0 itself."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(_unbound_grown, make)


# A view taken with grad of a no_grad view that requires_grad_() gave a flag of its own (the fuzz's input
# `b.conj().imag` made under no_grad, then requires_grad_(), passed with a view of it): autograd gives the later view
# the first's NO_GRAD_MODE creation meta, but it has history (its node leads to the first's accumulator), no flag of
# its own. Fuzz seed 121008 #2265, #3130, #3435, #3587, #3917, #4833, #5327, #6268, #8119 (UNSUPPORTED): it was
# refused as a no_grad view given a flag of its own, beside an input over the storage the program writes.
_OWN_FLAG_BASES: dict[str, Callable[[T], T]] = {"slice": lambda b: b[:, 1], "imag": lambda b: b.conj().imag}


def _own_flag_view_and_its_view(view: str, order: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        b = torch.randn(3, 2) * (1 + 0.5j) if view == "imag" else torch.randn(3, 2)
        v = _under_no_grad(lambda: _OWN_FLAG_BASES[view](b)).requires_grad_()
        with torch.enable_grad():
            w = v[1:]
        return (v, w) if order == "leaf_first" else (w, v)

    return make


def _leaf_written_under_no_grad(v: T, w: T) -> object:
    with torch.no_grad():
        v.add_(1.0)
    return ()


def _view_written_under_no_grad_then_leaf_read(v: T, w: T) -> object:
    with torch.no_grad():
        w.mul_(2.0)
    return (v * 3.0,)


def _view_read_then_leaf_written_under_no_grad(v: T, w: T) -> object:
    y = w * 3.0
    with torch.no_grad():
        v.zero_()
    return (y,)


def _leaf_set_onto_itself_under_no_grad(v: T, w: T) -> object:
    with torch.no_grad():
        set_to(v, v)
    return (v * 2.0,)


@pytest.mark.parametrize("order", ["leaf_first", "view_first"])
@pytest.mark.parametrize("view", sorted(_OWN_FLAG_BASES))
@pytest.mark.parametrize(
    "f",
    [
        _leaf_written_under_no_grad,
        _view_written_under_no_grad_then_leaf_read,
        _view_read_then_leaf_written_under_no_grad,
        _leaf_set_onto_itself_under_no_grad,
    ],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_view_with_history_of_a_no_grad_view_with_a_flag_of_its_own(
    f: Callable[[T, T], object], view: str, order: str, compile_fn: CompileFn | None
) -> None:
    """v a no_grad view given requires_grad_() (a leaf with its own accumulator), w = v[1:] taken with grad (history
    to v's accumulator, v's NO_GRAD_MODE creation meta), both passed, the storage written below autograd: it matches
    eager (v.grad through w's history too), in a call with grad and under no_grad. (A PairTensor v is refused by
    the rule for a no_grad view with a flag of its own.)"""
    make = _own_flag_view_and_its_view(view, order)
    g = f if order == "leaf_first" else (lambda w, v: f(v, w))
    for mode in (torch.enable_grad(), torch.no_grad()):
        with mode:
            assert_matches_eager(g, make, compile_fn=compile_fn)


# Such a view with history passed alone: its `._base` is the storage's root, which requires no grad, so eager's views
# of it taken under no_grad require none, and a write into one with grad on records nothing (no operand requires
# grad). Fuzz seed 121008 #3130 (CRASHED once the rule above was lifted): the run's view followed the input's stand-in,
# which requires grad, and autograd refused its write ("A view was created in no_grad mode ...").
def _unfold_resized_then_filled_with_grad(x: T) -> object:
    t = x.unfold(0, 1, 3)
    with torch.enable_grad():
        t.resize_((2,))
        t.fill_(3.0)
    return ()


def _slice_written_with_grad(x: T) -> object:
    t = x[:]
    with torch.enable_grad():
        t.mul_(2.0)
    return (t,)


@pytest.mark.parametrize(
    "f", [_unfold_resized_then_filled_with_grad, _slice_written_with_grad], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("view", sorted(_OWN_FLAG_BASES))
def test_no_grad_view_of_a_view_with_history_of_a_no_grad_view_with_a_flag_of_its_own(
    f: Callable[[T], object], view: str, compile_fn: CompileFn | None
) -> None:
    """x = v.view(-1) taken with grad, v a no_grad view given requires_grad_(), passed alone; under no_grad the
    program takes a view of x and writes it with grad on: eager's view requires no grad (its base, the storage's
    root, requires none), so the write runs and records nothing, and so does the compiled call."""

    def make() -> tuple[object, ...]:
        b = torch.randn(1) * (1 + 0.5j) if view == "imag" else torch.randn(1, 2)  # (x of one element)
        v = _under_no_grad(lambda: _OWN_FLAG_BASES[view](b)).requires_grad_()
        with torch.enable_grad():
            return (v.view(-1),)

    with torch.no_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
