"""Fuzz regressions of helper nograd17: autograd's "A view was created in no_grad mode ..." error.

* fuzz seed 17000 #1356 (under no_grad): an output view of an unbind() input, taken after the program's last write
  to the input, raised on is_leaf and grad_fn where eager's reads fine: a write to an intermediate of its own
  storage counted as a write to an input (Note [No-Grad Views Made After The Bump]).
* fuzz seed 49000 #988 (training): a node that saved a no_grad view and ends a cut path (the view has no grad_fn)
  did not run in the traced backward, so eager's error when it unpacks the view, written through its base since,
  was missing (Note [Ends Of Cut Paths Unpack Their Saved Tensors]).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_raises_like_eager
from tests.pipeline.fuzz_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)

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


def _seed_17000_1356(x0: T) -> object:
    x0.mul_(x0)
    t0 = x0.expand(())
    t1 = x0.sum()
    t1.zero_()
    return (t0,)


def test_seed_17000_1356(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #1356, shrunk: under no_grad
    check_no_grad(_seed_17000_1356, _input_view("leaf", "unbind"), compile_fn)


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


def _seed_49000_988(view: Callable[[T], T]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = view(x0)
        t1 = t0.sin()
        x0.add_(t1.sum())
        return (t1,)

    return f


@pytest.mark.parametrize("kind", _INPUT_KINDS)
def test_seed_49000_988(compile_fn: CompileFn | None, kind: str) -> None:
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
    check_with_grad(_seed_49000_988(_VIEW[view]), lambda: (_INPUTS[kind](),), compile_fn)


@pytest.mark.parametrize("kind", _INPUT_KINDS)
@pytest.mark.parametrize("view", _VIEW_KINDS)
def test_saved_no_grad_view_written_after_no_grad(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # fuzz seed 49000 #988 called under no_grad: nothing is saved
    check_no_grad(_seed_49000_988(_VIEW[view]), lambda: (_INPUTS[kind](),), compile_fn)


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
def test_saved_no_grad_view_written_under_no_grad(compile_fn: CompileFn | None, kind: str, view: str) -> None:
    # fuzz seed 49000 #988 with the write under no_grad too: eager's backward through t1 raises the saved-tensor
    # error, through the other output alone it completes: refused (Note [Backward Errors Are Deferred])
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = _VIEW[view](x0)
        t1 = t0.sin()
        with torch.no_grad():
            x0.add_(1.0)
        return (t1, x0 * 2.0)

    refused_with_grad(f, lambda: (_INPUTS[kind](),), compile_fn, "backward fails in eager")


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
