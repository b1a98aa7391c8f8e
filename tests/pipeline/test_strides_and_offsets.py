"""Strides, storage offsets and whole storages of outputs and inputs after the call: eager's kernels' layouts where
fake tensors choose others, as_strided() and set_(storage, offset, ...) at absolute offsets, writes through expanded
or overlapping inputs (Note [In-Place Ops As Eager Runs Them], Note [as_strided On Inputs], Note
[as_strided On Inputs], Note [Strides The Kernels Choose]).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
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
)

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions for strides, storage offsets and aliasing of outputs and inputs after the call where the fake
# tensors of the analysis lay tensors out differently from eager's kernels (Note [Strides The Kernels Choose]).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


def _diagonal_input(*shape: int, offset: int = 0) -> Callable[[], tuple[object, ...]]:
    return lambda: (torch.randn(shape).diagonal(offset, 1, 0),)


def test_intermediate_base_returned_with_a_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10000 #3436: mul of a (2, 1) input with strides (1, 4) is (1, 2) in eager, (1, 1) on fake tensors;
    # the output that is the intermediate base itself keeps the graph's real strides, and its view replays on it.
    def f(x0: T) -> object:
        t0 = x0.mul(3.0)
        return (t0, t0.diagonal(0, 1, 0))

    with torch.no_grad():
        assert_matches_eager(f, _diagonal_input(2, 1, 2), compile_fn=compile_fn)


def test_intermediate_base_returned_after_its_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 11000 #4869.
    def f(x0: T) -> object:
        t0 = x0.mul(0.5)
        return (t0.t(), t0)

    with torch.no_grad():
        assert_matches_eager(f, _diagonal_input(1, 1, 2, offset=-1), compile_fn=compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
@pytest.mark.parametrize("returned", ["input", "target", "target_and_views", "data"])
def test_input_set_to_computed_size_one_tensor(compile_fn: CompileFn | None, subclass: bool, returned: str) -> None:
    # Fuzz seed 11000 #1397: the input set_() to a computed tensor takes the strides the real kernel gave it.
    def f(x0: T) -> object:
        t0 = x0.mul(3.0)
        if returned == "data":
            x0.data = t0
            return (t0, x0)
        set_to(x0, t0)
        if returned == "input":
            return (x0,)
        if returned == "target":
            return (t0,)
        return (t0, t0.t(), t0[1:])

    def make_inputs() -> tuple[object, ...]:
        return ((pair(1, 3) if subclass else torch.randn(1, 3)).t(),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_input_set_to_empty_broadcast_sum(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 11000 #6737: an empty (4, 3, 0) sum has eager strides (0, 1, 3), fake (3, 1, 1).
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(x1)
        set_to(x0, t0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(4, 3, 1)
        return (b0, b0[:, :, 1:1:2])

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def _selected(subclass: bool) -> Callable[[], tuple[object, ...]]:
    # a (4, 3) input at storage offset 12
    return lambda: ((pair(3, 4, 3) if subclass else torch.randn(3, 4, 3)).select(0, -2),)


@pytest.mark.parametrize("subclass", [False, True])
@pytest.mark.parametrize("program", ["identity_transpose", "slice", "slice_before_write", "view_after_write"])
def test_offsets_of_views_taken_after_a_write(compile_fn: CompileFn | None, subclass: bool, program: str) -> None:
    # Fuzz seed 9000 #8570 ("identity_transpose"): functionalization reports offsets of views taken after a write
    # relative to the regenerated value (Note [as_strided On Inputs]); the input set_() to one ended at offset 0.
    def f(x0: T) -> object:
        if program == "slice_before_write":
            t0 = x0[1:]
            x0.mul_(2.0)
            set_to(x0, t0)
            return (x0, t0)
        x0.mul_(2.0)
        if program == "view_after_write":
            return (x0[1:], x0.t())
        set_to(x0, x0.transpose(1, 1) if program == "identity_transpose" else x0[1:])
        return (x0.transpose(1, 0),)

    with torch.no_grad():
        assert_matches_eager(f, _selected(subclass), compile_fn=compile_fn)


def test_offset_of_empty_view_of_written_subclass_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 9000 #5645: a view of an empty input at offset 3 taken after a write and in-place view ops.
    def f(x0: T) -> object:
        x0.mul_(2.0)
        x0.unsqueeze_(-2)
        t0 = x0.view((0, 2))
        x0.t_()
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(3)[3:3],), compile_fn=compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
@pytest.mark.parametrize("program", ["detach", "detach_then_view", "written"])
def test_view_between_in_place_view_ops(compile_fn: CompileFn | None, subclass: bool, program: str) -> None:
    # Fuzz seed 11000 #7526 ("written", with grad enabled): the chain replays from an alias of the input with its
    # metadata when the view was taken (Note [Output Regeneration]); regenerated, the output shared no
    # wrapper storage with the input, and its `._base` was the input.
    def f(x0: T) -> object:
        x0.resize_((4, 1))
        t0 = x0.detach()
        x0.t_()
        if program == "detach":
            return (t0,)
        if program == "written":
            x0.zero_()
        t1 = t0.view((1, 4, 1))
        return (t1, t1)

    def make_inputs() -> tuple[object, ...]:
        return (pair(2, 2, 2) if subclass else torch.randn(2, 2, 2),)

    with torch.set_grad_enabled(program == "written"):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups (seed 45000): reads of an input after a write through its view, whose functional value was
# regenerated with other strides in size-1 dims, give eager's strides (Note [In-Place Ops As Eager Runs Them]).
# ---------------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper offset): absolute offsets on inputs at a nonzero storage offset. as_strided() views and
# set_(storage, offset, ...) taken before a write to the input itself (Note [as_strided On Inputs]),
# as_strided_() of a view (Note [as_strided On Inputs]), as_strided() of a view without an offset. Source: helper
# p109's hand-written variant (in this file) and its family, after torch's
# test/functorch/test_aotdispatch.py (test_input_mutation_storage_offset, as_strided views of inputs).
# ---------------------------------------------------------------------------------------------------------------------

ESCAPING_READ = r"outside it, taken before a write to its storage: .*Note \[as_strided On Inputs\]"
Maker = Callable[[], tuple[object, ...]]


def _inputs(make: Callable[..., T], shape: tuple[int, ...], view: Callable[[T], T], other: Callable[..., T]) -> Maker:
    """(a (2,) tensor, view(a tensor of `shape`)): the second input sits at a nonzero offset of its storage."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return other(2), view(make(*shape))

    return make_inputs


def _row(b: T) -> T:
    return b[1]  # offset 4 of a 12-element storage, elements 4..7


def _slice(b: T) -> T:
    return b[2:8]  # offset 2, elements 2..7


def _column(b: T) -> T:
    return b[:, 1]  # offset 1, elements 1, 5, 9


def _plain(shape: tuple[int, ...], view: Callable[[T], T]) -> Maker:
    return _inputs(torch.randn, shape, view, torch.randn)


def _check_all(f: Callable[..., object], compile_fn: CompileFn | None, views: tuple[Callable[[T], T], ...]) -> None:
    """Plain and PairTensor inputs, leaf and non-leaf, with grad and under no_grad."""
    for view in views:
        shape = (12,) if view is _slice else (3, 4)
        makers: tuple[tuple[Callable[..., T], Callable[..., T]], ...] = ((torch.randn, torch.randn), (pair, pair))
        for make, other in makers:
            check_no_grad(f, _inputs(make, shape, view, other), compile_fn)
            check_with_grad(f, _inputs(make, shape, view, other), compile_fn)
        for make, other in ((nonleaf, torch.randn), (pair_nonleaf, pair)):
            check_with_grad(f, _inputs(make, shape, view, other), compile_fn)


def test_as_strided_before_write_of_input_at_offset(compile_fn: CompileFn | None) -> None:
    # helper p109's variant: "setStorage: ... out of bounds" at main (y replayed at offset 5 on x1's regenerated
    # 4-element value); returned beside x1, and read after a second write
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        x1.add_(1.0)
        return (y * 2.0,)

    def g(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        x1.add_(1.0)
        x1.mul_(x0.sum())
        return (x1, y.sum(), y)

    _check_all(f, compile_fn, (_row, _slice))
    _check_all(g, compile_fn, (_row,))


def test_as_strided_before_write_reads_other_elements(compile_fn: CompileFn | None) -> None:
    # (1,) at offset 5 of x1 = b[2:8]: in bounds of the regenerated value, it read b[7] for eager's b[5] (a wrong
    # result at main, no error); a view of it taken before the write; the offset given by keyword
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((1,), (1,), 5)
        z = x1.as_strided((2,), (1,), 4)[1:]
        x1.add_(1.0)
        return (y * 2.0, z + x0)

    def g(x0: T, x1: T) -> object:
        y = torch.as_strided(x1, (2,), (1,), storage_offset=3)
        x1.sub_(x0.sum())
        return (y + x0,)

    _check_all(f, compile_fn, (_slice,))
    _check_all(g, compile_fn, (_slice,))


def test_as_strided_before_writes_through_view_and_input(compile_fn: CompileFn | None) -> None:
    # a write through a view of x1 keeps the frame, the next one through x1 itself moves it; y then written
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        x1[1:].add_(1.0)
        x1.mul_(2.0)
        y.add_(x0)
        return (y, x1)

    for view in (_row, _slice):
        shape = (12,) if view is _slice else (3, 4)
        check_no_grad(f, _plain(shape, view), compile_fn)
        check_no_grad(f, _inputs(pair, shape, view, pair), compile_fn)


def test_as_strided_before_write_under_no_grad_inside(compile_fn: CompileFn | None) -> None:
    # the write under torch.no_grad() inside a training program; y written first, then x1
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        with torch.no_grad():
            x1.add_(1.0)
        return (y * 2.0,)

    def g(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 5)
        y.mul_(2.0)
        x1.add_(1.0)
        return (y.sum(), x1)

    _check_all(f, compile_fn, (_row, _slice))
    for view in (_row, _slice):
        shape = (12,) if view is _slice else (3, 4)
        check_no_grad(g, _plain(shape, view), compile_fn)
        check_with_grad(g, _inputs(pair, shape, view, pair), compile_fn)


def test_set_storage_at_offset_before_write_of_input(compile_fn: CompileFn | None) -> None:
    # x0.set_(storage, 5, ...) rebinds x0 by an as_strided at offset 5: the same failure as an as_strided() view
    def f(x0: T, x1: T) -> object:
        x0.set_(x1.untyped_storage(), 5, (2,), (1,))
        x1.add_(1.0)
        return (x0 * 2.0, x0)

    for view in (_row, _slice):
        shape = (12,) if view is _slice else (3, 4)
        check_no_grad(f, _plain(shape, view), compile_fn)
        check_with_grad(f, _plain(shape, view), compile_fn)


def test_write_through_set_storage_target_refused(compile_fn: CompileFn | None) -> None:
    # then written through x0: functionalization's refusal of a write after an as_strided not first in its chain
    # (the crash of main's "setStorage: ... out of bounds" before it, on these inputs)
    def f(x0: T, x1: T) -> object:
        x0.set_(x1.untyped_storage(), 5, (2,), (1,))
        x1.mul_(2.0)
        x0.add_(1.0)
        return (x0, x1)

    with torch.no_grad():
        assert_refused(f, _plain((3, 4), _row), compile_fn, "not the first view of its chain")


def test_in_place_as_strided_and_write_of_input_at_offset(compile_fn: CompileFn | None) -> None:
    # as_strided_() before the write: a wrong offset and base at main with grad; after it: "out of bounds" at main
    def f(x0: T, x1: T) -> object:
        x1.as_strided_((2,), (1,), 5)
        x1.add_(1.0)
        return (x1 * 2.0,)

    def g(x0: T, x1: T) -> object:
        x1.add_(1.0)
        x1.as_strided_((2,), (1,), 5)
        return (x1 * 2.0, x1)

    for fn in (f, g):
        for view in (_row, _slice):
            shape = (12,) if view is _slice else (3, 4)
            check_no_grad(fn, _plain(shape, view), compile_fn)
            check_with_grad(fn, _plain(shape, view), compile_fn)


def test_in_place_as_strided_of_a_view_then_written(compile_fn: CompileFn | None) -> None:
    # Note [as_strided On Inputs]: as_strided_() reaching outside x1 (x1 traced as a view of a synthetic base), or
    # of a column (not dense), then a write: wrong values at main
    def f(x0: T, x1: T) -> object:
        x1.as_strided_((2,), (1,), 9)
        x1.add_(1.0)
        return (x1 * 2.0,)

    def g(x0: T, x1: T) -> object:
        x1.as_strided_((2,), (1,))
        x1.add_(1.0)
        return (x1 * 2.0, x1)

    check_no_grad(f, _plain((3, 4), _row), compile_fn)
    check_no_grad(g, _plain((3, 4), _column), compile_fn)
    check_no_grad(g, _plain((3, 4), _row), compile_fn)


def test_as_strided_of_view_without_offset(compile_fn: CompileFn | None) -> None:
    # x1[1:].as_strided(size, stride) takes the view's own offset in eager; main took the chain root's
    def f(x0: T, x1: T) -> object:
        y = x1[1:].as_strided((2,), (1,))
        return (y * 2.0, y)

    def g(x0: T, x1: T) -> object:
        y = x1[1:].as_strided((2,), (1,))
        x1.add_(1.0)
        return (y * 2.0, y)

    for fn in (f, g):
        for view in (_row, _slice, _column):
            shape = (12,) if view is _slice else (3, 4)
            check_no_grad(fn, _plain(shape, view), compile_fn)
            check_with_grad(fn, _plain(shape, view), compile_fn)


def test_escaping_as_strided_view_used_after_write_refused(compile_fn: CompileFn | None) -> None:
    # Note [as_strided On Inputs]: y reaches b[0, 3], outside x1 = b[1]; used with grad
    # after x1's write, eager's gradient reaches b[0, 3] through the base (a wrong gradient at main); also a view of
    # y, and the write under no_grad
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 3)
        x1.mul_(2.0)
        return (y * 1.0,)

    def g(x0: T, x1: T) -> object:
        z = x1.as_strided((2,), (1,), 3)[1:]
        with torch.no_grad():
            x1.add_(1.0)
        return (z + x0,)

    for fn in (f, g):
        refused_with_grad(fn, _inputs(nonleaf, (3, 4), _row, torch.randn), compile_fn, ESCAPING_READ)
        check_with_grad(fn, _inputs(pair_nonleaf, (3, 4), _row, pair), compile_fn)  # (a subclass's is exact)
        check_no_grad(fn, _inputs(torch.randn, (3, 4), _row, torch.randn), compile_fn)


@pytest.mark.parametrize("layout_op", ["write", "unsqueeze_no_grad", "unsqueeze_inference"])
def test_escaping_as_strided_view_read_by_a_custom_function_after_write_refused(
    layout_op: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117600 #105 (shrunk): the same read through a custom Function's apply (whose ops run with grad off
    # inside, so no aten op reads the view with grad): eager's gradient reaches b[0, 3] through the base, ours did not
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((), (), 3)
        if layout_op == "write":
            x1.mul_(2.0)
        else:
            with torch.inference_mode() if layout_op == "unsqueeze_inference" else torch.no_grad():
                y.unsqueeze_(0)
        return (SinFunction.apply(y),)  # type: ignore[no-untyped-call]  # (Function.apply is untyped in torch)

    refused_with_grad(f, _inputs(nonleaf, (3, 4), _row, torch.randn), compile_fn, ESCAPING_READ)
    check_no_grad(f, _inputs(torch.randn, (3, 4), _row, torch.randn), compile_fn)


def test_escaping_as_strided_view_used_before_write_or_taken_after(compile_fn: CompileFn | None) -> None:
    # the neighbours that are exact: used before the write, returned as it is, taken after the write
    def f(x0: T, x1: T) -> object:
        y = x1.as_strided((2,), (1,), 3)
        z = y * 1.0
        x1.mul_(2.0)
        return (z, y)

    def g(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        y = x1.as_strided((2,), (1,), 3)
        return (y * 1.0,)

    for fn in (f, g):
        check_with_grad(fn, _inputs(nonleaf, (3, 4), _row, torch.randn), compile_fn)
        check_with_grad(fn, _inputs(nonleaf, (3, 4), _column, torch.randn), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper p109): set_() onto a view of an input at a storage offset, taken after the input was
# written (Note [as_strided On Inputs]), dev seed 44000 #109, and absolute offsets on such inputs (as_strided(),
# set_(storage, offset, ...): Note [as_strided On Inputs]).
# ---------------------------------------------------------------------------------------------------------------------


def _at_offset(make: object, shape: tuple[int, ...], view: object) -> tuple[T, T]:
    """(a (2,) tensor, view(a tensor of `shape`)): the second input sits at a nonzero offset of its storage."""
    assert callable(make) and callable(view)
    with torch.enable_grad():
        return make(2), view(make(*shape))


def test_set_to_unsqueezed_view_of_written_select_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #109: x0 ended at offset 0 of b1's storage (the offset the view reports after the write),
    # eager's is 2, with the values there
    def f(x0: T, x1: T) -> object:
        x1.add_(-1.0)
        t0 = x1.unsqueeze(0)
        set_to(x0, t0)
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        b1 = torch.randn(4)
        return (torch.randn(1), b1.select(0, 2))

    check_no_grad(f, make_inputs, compile_fn)


def test_set_to_views_of_written_row_input(compile_fn: CompileFn | None) -> None:
    # other views of x1 (slice, transpose, expand), x0 also returned beside a view; with grad, and x1 requiring grad
    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        t0 = x1[1:].unsqueeze(0).transpose(0, 1)
        set_to(x0, t0)
        return (x0, x1.unsqueeze(0).expand(2, 4).sum(0))

    check_no_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(nonleaf, (3, 4), lambda b: b[1]), compile_fn)


def test_set_to_view_of_written_pair_input(compile_fn: CompileFn | None) -> None:
    # a PairTensor at an offset; x0 then written through
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        set_to(x0, x1[1:3])
        x0.mul_(3.0)
        return (x0, x1)

    check_no_grad(f, lambda: _at_offset(pair, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(pair, (3, 4), lambda b: b.t()[1:]), compile_fn)


def test_set_to_written_input_itself_and_view_taken_before(compile_fn: CompileFn | None) -> None:
    # set_() onto x1 itself, and onto a view taken before the write: their offsets were eager's already
    def f(x0: T, x1: T, x2: T) -> object:
        t2 = x2[1:]
        x1.add_(-1.0)
        x2.add_(1.0)
        set_to(x0, x1)
        set_to(x2, t2)
        return (x0, x2)

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(3, 4)
        return (torch.randn(2), b[1], pair_nonleaf(3, 4)[2].detach())

    check_no_grad(f, make_inputs, compile_fn)


def test_set_storage_at_absolute_offset_of_written_input(compile_fn: CompileFn | None) -> None:
    # set_(storage, offset, ...) names eager's offset: after the write it named other elements (a wrong x0, or an
    # "out of bounds" setStorage error once x0 was read); offset 0 is outside x1's elements (a synthetic base)
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        x0.set_(x1.untyped_storage(), x1.storage_offset() + 1, (2,), (1,))
        x0.mul_(2.0)
        return (x0, x0 * 2.0)

    def g(x0: T, x1: T) -> object:
        x1.add_(1.0)
        x0.set_(x1.untyped_storage(), 0, (2,), (1,))
        return (x0 * 2.0, x0)

    for fn in (f, g):
        check_no_grad(fn, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
        check_with_grad(fn, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)


def test_as_strided_at_absolute_offset_of_written_input(compile_fn: CompileFn | None) -> None:
    # as_strided() after a write to an input at an offset: "setStorage: ... out of bounds" at main
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        y = x1.as_strided((2,), (1,), 5)
        return (y * 2.0, y)

    check_no_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)
    check_with_grad(f, lambda: _at_offset(torch.randn, (3, 4), lambda b: b[1]), compile_fn)


def test_view_set_to_written_input_at_offset_then_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #1228 (also #4584, #7294): refused by Note [as_strided On Inputs] until the
    # rebuilt output's leaves carried eager's offsets; x0 is an unbind() output at offset 6
    def f(x0: T) -> object:
        t0 = x0.view((1, 2, 1))
        set_to(t0, x0)
        t0.add_(x0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((2, 3, 3))
        return (b0.view((1, 2, 9)).unbind(2)[6],)

    check_no_grad(f, make_inputs, compile_fn)


def test_view_set_to_views_of_written_input_at_offset(compile_fn: CompileFn | None) -> None:
    # variants: the set_ source a view taken after the write (slice, transpose), a PairTensor input, with grad
    def f(x0: T) -> object:
        x0.add_(1.0)
        t0 = x0.view(-1).unsqueeze(0)
        set_to(t0, x0.unsqueeze(0).transpose(0, 1)[1:])
        t0.mul_(2.0)
        return (t0,)

    for make_inputs in (lambda: (torch.randn(3, 4)[1],), lambda: (pair(3, 4)[1],)):
        check_no_grad(f, make_inputs, compile_fn)
        check_with_grad(f, make_inputs, compile_fn)


def test_view_of_other_input_set_to_view_of_written_input(compile_fn: CompileFn | None) -> None:
    # a view of x0 set_() onto a slice of the written x1 (at offset 8), returned beside x0
    def f(x0: T, x1: T) -> object:
        x1.add_(1.0)
        t0 = x0[0:1]
        set_to(t0, x1[1:])
        t0.add_(x1.sum())
        return (t0, x0)

    for make_inputs in (lambda: (torch.randn(3), torch.randn(3, 4)[2]), lambda: (pair(3), pair(3, 4)[2])):
        check_no_grad(f, make_inputs, compile_fn)
        check_with_grad(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions about outputs that alias an input set_() (or `.data =`-assigned) to an empty tensor the program
# computed, whose eager strides are the kernel's (Note [Strides The Kernels Choose], Note [Strides The Kernels
# Choose]); each program is a shrunk fuzz program or a variant of one (seed and index in the test's comment).
# ---------------------------------------------------------------------------------------------------------------------


def _x() -> T:
    return torch.randn(4, 2, 1)


def _x_permuted() -> T:
    return torch.randn(1, 2, 4).permute(2, 1, 0)


# fuzz seed 47000 #3804: the output, a view of the empty product, is what x0.data was assigned: eager's (0, 2)
def test_view_assigned_to_data_keeps_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0[:, :, 0:0:2]
        t1 = x0.mul(t0)
        t2 = t1.select(1, -1)
        x0.data = t2
        return (t2,)

    check_no_grad(f, lambda: (_x(),), compile_fn)
    check_with_grad(f, lambda: (_x(),), compile_fn)
    check_no_grad(f, lambda: (_x_permuted(),), compile_fn)
    check_no_grad(f, lambda: (leaf(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: set_() instead of `.data =`, returned with the input
def test_view_set_to_input_keeps_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t2 = x0.mul(x0[:, :, 0:0:2]).select(1, -1)
        set_to(x0, t2)
        return (t2, x0)

    check_no_grad(f, lambda: (_x(),), compile_fn)
    check_with_grad(f, lambda: (_x_permuted(),), compile_fn)
    check_no_grad(f, lambda: (nonleaf(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804 on a PairTensor: the wrapper and its inner tensors take the kernel's strides
def test_pair_view_set_keeps_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t2 = x0.mul(x0[:, :, 0:0:2]).select(1, -1)
        set_to(x0, t2)
        return (t2,)

    def g(x0: T) -> object:
        t2 = x0.mul(x0[:, :, 0:0:2]).select(1, -1)
        x0.data = t2
        return (t2,)

    for h in (f, g):
        check_no_grad(h, lambda: (pair(4, 2, 1),), compile_fn)
        check_with_grad(h, lambda: (pair(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: a view of the intermediate that the input becomes, rebuilt by replaying the view
# on a PairTensor, and a view of the input itself (replayed on the real input)
def test_views_after_set_keep_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        x0.data = t1
        return (t1.select(1, -1),)

    def g(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        set_to(x0, t1)
        return (x0.select(1, -1), t1)

    check_no_grad(f, lambda: (pair(4, 2, 1),), compile_fn)
    check_with_grad(f, lambda: (pair(4, 2, 1),), compile_fn)
    check_no_grad(g, lambda: (_x_permuted(),), compile_fn)
    check_with_grad(g, lambda: (pair(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: a view of the empty intermediate with a layout of its own takes the strides its
# view ops give the input's real layout, the kernel's (Note [Strides The Kernels Choose]); refused before
def test_own_layout_view_of_empty_target(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        x0.data = t1
        return (t1.select(1, -1),)

    def g(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        set_to(x0, t1)
        return (t1.select(1, -1),)

    check_no_grad(f, lambda: (_x(),), compile_fn)
    check_no_grad(g, lambda: (_x_permuted(),), compile_fn)
    check_no_grad(g, lambda: (pair(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: such a view taken before the intermediate was laid out anew in place (the input
# took the new layout) has no view ops to replay from the input; rebuilt from the fake strides, it is refused (Note
# [Strides The Kernels Choose])
def test_own_layout_view_of_relaid_empty_target_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        t2 = t1.select(1, -1)
        t1.transpose_(0, 2)
        x0.data = t1
        return (t2,)

    def g(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        t2 = t1.select(1, -1)
        t1.transpose_(0, 2)
        set_to(x0, t1)
        return (t2,)

    match = r"of an empty tensor the program computed and set_\(\) input .*Note \[Strides The Kernels Choose\]"
    with torch.no_grad():
        assert_refused(f, lambda: (_x(),), compile_fn, match)
        assert_refused(g, lambda: (_x_permuted(),), compile_fn, match)
        assert_refused(g, lambda: (pair(4, 2, 1),), compile_fn, match)


# Ops whose eager and fake kernels choose different strides in a size-1 dim of a (3, 1, 4) input of strides
# (4, 12, 1): mul and sub by a scalar keep 12 in eager, the fake kernels give 4; clamp the other way round
_SIZE_ONE_STRIDE_OPS: dict[str, Callable[[T], T]] = {
    "mul": lambda x: x.mul(-1.0),
    "sub": lambda x: x.sub(1.0),
    "clamp": lambda x: x.clamp(min=0.0),
}


# fuzz seed 114000 #126: views, with layouts of their own, of the tensor an input was set_() to (or assigned by
# `.data =`) take the strides their view ops give the input's real layout, not the fake kernel's
# (Note [Strides The Kernels Choose]); taken before and after the assignment
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("assign", ["data", "set"])
@pytest.mark.parametrize("op", sorted(_SIZE_ONE_STRIDE_OPS))
def test_views_of_set_target_keep_kernel_strides(compile_fn: CompileFn | None, op: str, assign: str, kind: str) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = _SIZE_ONE_STRIDE_OPS[op](x0)
        t1 = t0[:, :, 1:2]
        t2 = t0.unsqueeze(0)
        if assign == "data":
            x1.data = t0
        else:
            set_to(x1, t0)
        return (t1, t2, t0.select(2, 1), t0.transpose(0, 1), t0[1:].view(2, 4))

    def make_inputs() -> tuple[object, ...]:
        if kind == "pair":
            return (pair(1, 3, 4).transpose(1, 0), pair())
        return (torch.randn(1, 3, 4).transpose(1, 0), torch.randn(()))

    check_no_grad(f, make_inputs, compile_fn)


# variant of fuzz seed 114000 #126: such views laid out anew by in-place view ops, before and after the assignment,
# replay those too
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("assign", ["data", "set"])
def test_relaid_views_of_set_target_keep_kernel_strides(compile_fn: CompileFn | None, assign: str, kind: str) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        t1 = t0[:, :, 1:2]
        t1.transpose_(0, 1)
        t2 = t0.unsqueeze(0)
        t3 = t2.select(0, 0)
        t2.transpose_(0, 2)
        if assign == "data":
            x1.data = t0
        else:
            set_to(x1, t0)
        t4 = t0[1:]
        t4.unsqueeze_(1)
        return (t1, t2, t3, t4)

    def make_inputs() -> tuple[object, ...]:
        if kind == "pair":
            return (pair(1, 3, 4).transpose(1, 0), pair())
        return (torch.randn(1, 3, 4).transpose(1, 0), torch.randn(()))

    check_no_grad(f, make_inputs, compile_fn)


# Views of an intermediate whose base an in-place view op relaid after the view was taken
_VIEWS_OF_RELAID: dict[str, Callable[[T], T]] = {
    "split": lambda t: t.split_with_sizes([1] * t.size(1), 1)[0],
    "slice": lambda t: t[:, 1:3],
    "unsqueeze": lambda t: t.unsqueeze(0),
}
_RELAYOUTS: dict[str, Callable[[T], object]] = {
    "transpose_": lambda t: t.transpose_(0, 1),
    "t_": lambda t: t.t_(),
    "squeeze_": lambda t: t.squeeze_(),
    "unsqueeze_": lambda t: t.unsqueeze_(1),
    "as_strided_": lambda t: t.as_strided_((t.numel(),), (1,)),
}


def _kernel_laid_out_inputs(layout: str, kind: str, grad: bool) -> tuple[T, T]:
    """Two inputs whose sum's layout eager's add kernel chooses otherwise than the fake one: an empty (0, 4, 1) sum,
    strides (4, 1, 4) in eager, (4, 1, 1) fake; a (1, 3) one, strides (1, 1) in eager, (3, 1) fake."""
    made = pair if kind == "pair" else (lambda *shape: torch.randn(shape))
    b = made(1, 4, 1) if layout == "empty" else made(3, 1)
    if grad:
        b.requires_grad_()
    return (b[1:1:2], b.transpose(0, 2)) if layout == "empty" else (b.t(), made(1))


# fuzz seed 118100 #6318: an empty split_with_sizes() of an intermediate whose base a transpose_() relaid afterwards
# kept the fake kernel's strides (4, 1, 1), eager's (4, 1, 4): such a view, rebuilt by as_strided() over the base the
# graph returns, takes the layout of its own value in the graph (a stride probe), which the real kernel laid out
# (Note [Strides The Kernels Choose]). Variants: other views and in-place view ops, a nonempty result whose size-1
# dim's stride the kernel chose, PairTensor inputs (the view set_() to its rebuilt dense leaves), with grad (a
# split's grad_fn raises in eager there: refused)
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    ("layout", "relayout"),
    # (t_() takes at most two dims; the empty sum has three)
    [(layout, op) for layout in ("empty", "size_one") for op in sorted(_RELAYOUTS) if (layout, op) != ("empty", "t_")],
)
@pytest.mark.parametrize("view", sorted(_VIEWS_OF_RELAID))
def test_view_of_intermediate_relaid_after_it_keeps_kernel_strides(
    compile_fn: CompileFn | None, view: str, layout: str, relayout: str, kind: str
) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x0)
        t1 = _VIEWS_OF_RELAID[view](t0)
        _RELAYOUTS[relayout](t0)
        return (t1,)

    check_no_grad(f, lambda: _kernel_laid_out_inputs(layout, kind, False), compile_fn)
    if kind == "plain" and view != "split":
        check_with_grad(f, lambda: _kernel_laid_out_inputs(layout, kind, True), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions found and fixed by the lead in session 5 (each from a shrunk fuzz program).
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_write_of_no_elements_through_an_expand_changes_nothing(
    compile_fn: CompileFn | None, kind: str, grad: bool
) -> None:
    # Fuzz seed 3000 #2073, #4995: an in-place op on an expand() to a size-0 dim writes nothing, so its zero strides
    # overlap nothing; it was refused as a write through overlapping memory. Eager still bumps the version counter.
    def f(b: T) -> object:
        t = b.expand((0, 2, 3))
        t.add_(1.0)
        d = b.diagonal(0, 1, 2).expand((3, 0, 1))
        d.mul_(0.5)
        return b * 2, t, d

    def make_inputs() -> tuple[T]:
        if grad:
            return (pair_nonleaf(1, 1, 1) if kind == "pair" else nonleaf(1, 1, 1),)
        return (PairTensor.from_tensor(torch.randn(1, 1, 1)) if kind == "pair" else torch.randn(1, 1, 1),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_elementwise_read_of_the_location_written_at_the_same_index_is_exact(
    compile_fn: CompileFn | None, kind: str
) -> None:
    # Fuzz seed 3000 #473: the column and the sub-diagonal of a (3, 4) tensor meet at one element, read and written
    # at the same index; #1365: copy_ of a view into its own expand(). Both were refused as reads of written memory.
    def f(x: T) -> object:
        x.select(1, -1).mul_(x.diagonal(-1, 1, 0))
        d = x.diagonal(0, 0, 1)
        d.expand((1, 3)).copy_(d)
        d.expand((1, 3)).add_(d)
        return x, d

    def make_inputs() -> tuple[T]:
        return (PairTensor.from_tensor(torch.randn(3, 4)) if kind == "pair" else torch.randn(3, 4),)

    assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_elementwise_read_of_a_location_written_at_another_index_stays_refused(compile_fn: CompileFn | None) -> None:
    # Note [In-Place Ops As Eager Runs Them]: row 1 reads row 0, which the same op writes (eager's loop order
    # decides).
    def f(x: T) -> object:
        x[:, :2].add_(x[:, 1:3])
        return x

    if compile_fn is not None:
        return  # eager's result is unspecified: nothing to compare
    with pytest.raises(UnsupportedError, match="reads part of the memory it writes"):
        subclassaot.compile(f)(torch.randn(3, 4))


@pytest.mark.parametrize("op", ["fill", "zero"])
def test_write_of_one_value_through_an_expand_with_grad_raises_in_backward_as_eager(
    compile_fn: CompileFn | None, op: str
) -> None:
    # Fuzz seed 3000 #1760, #7813 (refused before): fill_/zero_ through an expand() of a tensor that requires grad
    # is legal in eager, and eager's backward through it raises (its CopySlices copies the gradient into the
    # repeats); the compiled program writes the same memory once and its backward raises the same error.
    def f(b: T) -> object:
        t = b[:, 0:2:2].expand((2, 3))
        t.fill_(2.0) if op == "fill" else t.zero_()
        return b, t

    assert_matches_eager(f, lambda: (nonleaf(1, 3),), compile_fn=compile_fn)


def test_write_of_one_value_through_an_expand_in_the_middle_of_a_program(compile_fn: CompileFn | None) -> None:
    # After the write, gradients reach the written tensor only through the failing node; before it, they do not.
    def f(b: T) -> object:
        y = b.sin()
        b.expand((2, 1, 3)).fill_(0.5)
        return y, b * 2

    assert_matches_eager(f, lambda: (nonleaf(1, 3),), compile_fn=compile_fn)


def test_write_of_one_value_through_an_expand_of_a_strided_input_that_requires_grad_is_refused(
    compile_fn: CompileFn | None,
) -> None:
    # Fuzz seed 5000 #6159 (after the generator change): functionalization's as_strided_scatter of a non-contiguous
    # tensor that requires grad is an internal assert in torch; refused with the rule instead.
    def make_inputs() -> tuple[T]:
        return (nonleaf(4, 2, 4).as_strided((3,), (2,), 0),)

    def f(x: T) -> object:
        x.expand((2, -1)).zero_()
        return ()

    if compile_fn is not None:
        with torch.no_grad():
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        return
    with torch.no_grad(), pytest.raises(UnsupportedError, match="a write of one value through an expand"):
        subclassaot.compile(f)(*make_inputs())


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_leaf_transposed_under_no_grad_then_read_with_grad(compile_fn: CompileFn | None, kind: str) -> None:
    # found by the aliasmeta helper (the compiled backward raised 'invalid gradient'): Note [Leaves Laid Out Anew
    # Under no_grad]
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
        return x.sin()

    def make_inputs() -> tuple[T]:
        t = torch.randn(2, 3)
        return (PairTensor.from_tensor(t, requires_grad=True) if kind == "pair" else t.requires_grad_(),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("twice", [False, True])
def test_view_of_a_view_set_to_a_tensor_of_the_same_metadata(compile_fn: CompileFn | None, twice: bool) -> None:
    # Fuzz seed 6000 #1268 (wrong values): t1 = t0.view((1,)) was replayed from the output t0, which set_() had
    # moved to another storage of the same metadata; eager's t1 stays a view of the input's storage.
    def f(*xs: T) -> object:
        t0 = xs[0].view(())
        t1 = t0.view((1,))
        set_to(t0, xs[-1].mul(xs[-1]))
        return t1, t0

    def make_inputs() -> tuple[T, ...]:
        b = torch.randn(())
        return (b, b) if twice else (b,)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper crash6: epilogue copies into inputs whose elements overlap (fuzz seed 6000 #1630,
# #6572, #6885), an output whose grad_fn raises in eager made from an intermediate (seed 7000 #4719), and a view of an
# expanded subclass input checked on its layout before t_() (seed 7000 #9147).
# ---------------------------------------------------------------------------------------------------------------------


def _plain_3x2() -> tuple[object, ...]:
    return (torch.randn((3, 2)),)


def _data_expand_after_write(x0: T) -> object:
    # seed 6000 #1630: the final value's copy_ into the input, now an expand(), raised
    t0 = x0.expand((2, -1, -1))
    x0.add_(3.0)
    x0.data = t0
    return ()


def _data_expand_then_write_view(x0: T) -> object:
    t0 = x0.expand((2, -1, -1))
    x0.add_(1.0)
    x0.data = t0
    t0[1, 1].mul_(2)
    return (t0,)


def _rows_expand_after_write(x0: T) -> object:
    t0 = x0[0].expand((4, -1))
    x0.mul_(2)
    x0.data = t0
    return (x0.sum(),)


def _set_expand_after_write(x0: T) -> object:
    t0 = x0.expand((2, -1, -1))
    x0.add_(3.0)
    set_to(x0, t0)
    return ()


@pytest.mark.parametrize(
    "f", [_data_expand_after_write, _data_expand_then_write_view, _rows_expand_after_write, _set_expand_after_write]
)
@pytest.mark.parametrize("grad", [False, True])
def test_written_input_ending_expanded_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, _plain_3x2, compile_fn=compile_fn)


def _plain_nonleaf_3x2() -> tuple[object, ...]:
    return (nonleaf(3, 2),)


def _as_strided_expand_after_write(x0: T) -> object:
    x0.add_(3.0)
    x0.as_strided_((2, 3, 2), (0, 2, 1))
    return (x0 * 1,)


@pytest.mark.parametrize("f", [_set_expand_after_write])
def test_written_nonleaf_ending_expanded_matches_eager(f: Callable[..., object], compile_fn: CompileFn | None) -> None:
    # training: the final value's copy_ (recorded by autograd) goes into the expanded layout once per location
    with torch.enable_grad():
        assert_matches_eager(f, _plain_nonleaf_3x2, compile_fn=compile_fn)


@pytest.mark.parametrize("make_inputs", [_plain_nonleaf_3x2, lambda: (pair_nonleaf(3, 2),)])
def test_written_nonleaf_relaid_to_repeats_is_refused(
    make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    # as_strided_() to a zero stride after a write with grad: eager's x0 holds AsStridedBackward1 over the write, whose
    # backward runs; the epilogue's once-per-location copy_ of the final value records CopySlices into the repeating
    # layout, whose backward raises (widened oracle: backward through the written inputs). Refused
    with torch.enable_grad():
        assert_refused(
            _as_strided_expand_after_write,
            make_inputs,
            compile_fn,
            r"args\[0\] is written with grad .* laid out in place",
        )


def _expanded_one() -> tuple[object, ...]:
    return (torch.randn((1,)).expand((3,)),)


def _write_select_after_resize(x0: T) -> object:
    # seed 6000 #6572: resize_() made the input one element after the select() was taken of its expand(); the
    # write went back through the expand() (as_strided_scatter into repeated elements raised)
    t0 = x0.select(0, -1)
    x0.resize_((1,))
    t0.zero_()
    return ()


def _write_select_after_resize_returned(x0: T) -> object:
    t0 = x0.select(0, 1)
    x0.resize_((1,))
    t0.add_(2.0)
    return (t0, x0)


@pytest.mark.parametrize("f", [_write_select_after_resize, _write_select_after_resize_returned])
@pytest.mark.parametrize("grad", [False, True])
def test_write_below_expand_resized_since_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, _expanded_one, compile_fn=compile_fn)


def _expanded_pair_nonleaf() -> tuple[object, ...]:
    return (pair_nonleaf(3, 1, 1).expand((3, 2, 1)),)


def _empty_write(x0: T) -> object:
    # seed 6000 #6885: the epilogue's copy_ into the expanded input raised
    t0 = x0[:, 2:2:2]
    t0.zero_()
    return ()


def _column_write(x0: T) -> object:
    x0[:, 0:1].mul_(2)
    return ()


@pytest.mark.parametrize("f", [_empty_write, _column_write])
def test_write_into_expanded_subclass_nonleaf_refused(f: Callable[..., object], compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_refused(
            f,
            _expanded_pair_nonleaf,
            compile_fn,
            r"args\[0\]: the program writes this tensor subclass input, which requires grad and whose elements "
            r"overlap \(expand\(\)\)",
        )


def _expanded_pair_row() -> tuple[object, ...]:
    return (pair_nonleaf(4).expand((2, -1)),)


def _select_after_t(x0: T) -> object:
    # seed 7000 #9147: the view chain was checked on the input's layout before t_(), where select(0, -4) raised
    x0.t_()
    return (x0.select(0, -4),)


def _select_after_t_first(x0: T) -> object:
    x0.t_()
    return (x0.select(0, 0), x0.select(1, 1))


@pytest.mark.parametrize("f", [_select_after_t, _select_after_t_first])
def test_view_after_inplace_view_of_expanded_subclass_matches_eager(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, _expanded_pair_row, compile_fn=compile_fn)


def _pair_and_expanded_pair() -> tuple[object, ...]:
    with torch.enable_grad():
        return (pair(), pair(4, 1, requires_grad=True).expand((1, 4, 2)))


def _no_grad_view_set_to_intermediate(x0: T, x1: T) -> object:
    # seed 7000 #4719 (shrunk): eager's output (a no_grad view of x1, set_() to an intermediate) has a grad_fn that
    # raises; the joint trace read it and raised
    t0 = x0.clone()
    with torch.no_grad():
        t1 = x1.view((4, 2))
        set_to(t1, t0)
    return (t1,)


def _no_grad_view_set_after_data(x0: T, x1: T) -> object:
    # seed 7000 #4719 as generated
    t0 = x0.clone()
    with torch.no_grad():
        t1 = x1.view((4, 2))
        t2 = x1.detach()
    x1.data = t2
    with torch.no_grad():
        set_to(t1, t0)
    return (t1,)


@pytest.mark.parametrize("f", [_no_grad_view_set_to_intermediate, _no_grad_view_set_after_data])
def test_no_grad_view_set_to_intermediate_matches_eager(f: Callable[..., object], compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, _pair_and_expanded_pair, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of seed 43000 (helper crash43).
#
# - An expanded input with no elements runs as a compact clone whose backward keeps the incoming gradient's type
#   (functional_run._EmptyCompactClone; seed 43000 #4613).
# - An output assigned `.data` from an input that is an unbind view, whose base the program then changed in place:
#   the alias the runtime assigns is taken without an autograd record (reading the view's grad_fn raises by then), as
#   Note [History Kept Through .data =] says (seed 43000 #891).
# ---------------------------------------------------------------------------------------------------------------------


def _unbind_pair(b0: T, dim: int, at: int) -> tuple[T, T]:
    return (b0, b0.unbind(dim)[at])


def _data_from_multi_output_view(x0: T, x1: T) -> tuple[T]:
    t0 = x1.view(())
    t1 = t0.mul(x1)
    t1.data = t0
    x0.unsqueeze_(-1)
    return (t1,)


def test_data_from_unbind_view_then_base_unsqueeze_(compile_fn: CompileFn | None) -> None:
    # seed 43000 #891: the runtime raised "Output 1 of Unbind is a view and its base ... has been modified inplace"
    # while regenerating t1's .data; eager's forward passes and its backward raises (so must ours)
    check_with_grad(_data_from_multi_output_view, lambda: _unbind_pair(nonleaf(2), 0, 1), compile_fn)


def test_data_from_unbind_view_other_shape(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> tuple[T]:
        t0 = x1.view(-1)
        t1 = t0.add(x1)
        t1.data = t0
        x0.transpose_(0, 1)
        return (t1,)

    check_with_grad(f, lambda: _unbind_pair(nonleaf(3, 2), 1, 0), compile_fn)


def test_data_from_chunk_view_then_base_unsqueeze_(compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[T, T]:
        b0 = nonleaf(4)
        return (b0, b0.chunk(2)[1])

    def f(x0: T, x1: T) -> tuple[T]:
        t0 = x1[1:]
        t1 = t0.mul(2.0)
        t1.data = t0
        x0.unsqueeze_(0)
        return (t1,)

    check_with_grad(f, make_inputs, compile_fn)


def test_data_from_unbind_view_no_grad(compile_fn: CompileFn | None) -> None:
    check_no_grad(_data_from_multi_output_view, lambda: _unbind_pair(nonleaf(2), 0, 1), compile_fn)


def _empty_expand(x: T) -> T:
    return x[4:4:1].expand((1, 0, 2))


def _slice_empty(x0: T) -> tuple[T]:
    t0 = x0.unsqueeze(1)
    t1 = t0[:, :, 0:0:2]
    return (t1.add(0.5),)


def test_empty_expanded_pair_view_gets_pair_gradient(compile_fn: CompileFn | None) -> None:
    # seed 43000 #4613: leaf 0 behind args[0].grad was a plain Tensor where eager's is a PairTensor
    check_with_grad(_slice_empty, lambda: (_empty_expand(pair_nonleaf(4, 1)),), compile_fn)


def test_empty_expanded_plain_view_gets_plain_gradient(compile_fn: CompileFn | None) -> None:
    check_with_grad(_slice_empty, lambda: (_empty_expand(nonleaf(4, 1)),), compile_fn)


def test_empty_expanded_plain_view_times_pair(compile_fn: CompileFn | None) -> None:
    # the gradient of the plain input comes from a PairTensor operand: eager's is a PairTensor
    def f(x0: T, x1: T) -> tuple[T]:
        return (x0.mul(x1),)

    check_with_grad(f, lambda: (_empty_expand(nonleaf(4, 1)), pair(1, 0, 2)), compile_fn)


def test_empty_expanded_pair_view_other_shape(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> tuple[T]:
        return (x0.transpose(0, 2).mul(2.0),)

    check_with_grad(f, lambda: (pair_nonleaf(3, 0, 1).expand(3, 0, 5),), compile_fn)


def test_empty_expanded_pair_view_no_grad(compile_fn: CompileFn | None) -> None:
    check_no_grad(_slice_empty, lambda: (_empty_expand(pair_nonleaf(4, 1)),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups (seed 8000): view and alias metadata of outputs (storage offset, `_base`, view-ness, is_leaf).
# ---------------------------------------------------------------------------------------------------------------------


def _pair_at_offset() -> tuple[object, ...]:
    return (pair(4, 2, 1).as_strided((1,), (2,), 2),)


def test_set_output_onto_view_of_written_input_at_offset(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2407: functionalization reports offset 0 for a view of the written input at offset 2 (Note
    # [as_strided On Inputs]); the output came back at the wrong offset with wrong values, then was refused; its leaves
    # now carry eager's offsets (helper p109)
    def f(x0: T) -> object:
        x0.add_(x0)
        t0 = x0.unsqueeze(-2)
        set_to(t0, t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, _pair_at_offset, compile_fn=compile_fn)


def test_set_output_onto_view_of_unwritten_input_at_offset(compile_fn: CompileFn | None) -> None:
    # the same program without the write stays supported
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(-2)
        set_to(t0, t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, _pair_at_offset, compile_fn=compile_fn)


def test_no_grad_view_returned_after_its_base_is_set_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #3759: eager's grad_fn (and is_leaf) of the view raises after set_() of its base, even under
    # no_grad; the compiled output was a leaf
    def f(x0: T, x1: T) -> object:
        t0 = x0.expand((1,))
        t1 = t0[0:1:2]
        set_to(x1, t1)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf()
        return (b0, b0)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager \\(a view made under no_grad")


_VIEW_RULE = "is a view of a tensor subclass whose view chain cannot be replayed"


def test_view_of_subclass_view_set_to_itself_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2870: eager's output is a view (of the input) whose inner tensors are not views; the compiled
    # one was the other way round, and without requires_grad
    def f(x0: T) -> object:
        t0 = x0.as_strided((2, 3), (3, 0), 2)
        with torch.no_grad():
            set_to(t0, t0)
            t1 = t0.transpose(1, 0)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(2, 3, 1),), compile_fn, _VIEW_RULE)


def test_subclass_view_of_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #7374: eager's output is a view of an intermediate, its inner tensors plain aliases of the input's
    # (refused until Note [Output Regeneration])
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0.expand((2, -1, -1))
        set_to(t1, x0)
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 4),), compile_fn=compile_fn)


def test_view_of_output_whose_data_is_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #2604: eager's `t1._base` is t0, returned too; the compiled t1 was a view of the input (then
    # refused); replayed from t0 as laid out when the view was taken now (fuzz seed 37200, #167)
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.t()
        t0.data = t1
        x0.data = t1
        return (t0, t1)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(f, lambda: (torch.randn(3, 3),), compile_fn=compile_fn)


def test_no_grad_view_returned_after_its_base_is_set_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 8000 #3759 as generated: the set_() runs with grad enabled
    def f(x0: T, x1: T) -> object:
        t0 = x0.expand((1,))
        with torch.no_grad():
            t1 = t0[0:1:2]
        t2 = x1.expand(())
        set_to(x1, t1)
        return (t2, t1)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf()
        return (b0, b0)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager \\(a view made under no_grad")


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: one hand-minimized program per distinct bug the fuzzer found (`python -m subclassaot fuzz`).
# Each program was a bug (once a strict xfail naming it); each now matches eager or is refused as eager's rule says.
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# Strides after in-place ops (Note [In-Place Ops As Eager Runs Them])


def test_clone_of_empty_view_after_inplace_add_keeps_eager_strides(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 0, program 52: functionalization gave x0's inner tensors the out-of-place add's strides.
    def f(x0: T) -> object:
        x0.add_(x0)
        return (x0[:, 0:0:1].clone(),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 2, 2)[:, 2:2:1],), compile_fn=compile_fn)


def test_inplace_ops_on_size_one_dims_keep_eager_strides(compile_fn: CompileFn | None) -> None:
    # A (1, 3) transposed intermediate has strides (1, 1); the out-of-place add would give (3, 1).
    def f(x: T) -> object:
        y = (x * 2).t()
        y.add_(1)
        y.mul_(x.t())
        z = y.clone()
        y.zero_()
        return (z, y.clone(), y + 1)

    assert_matches_eager(f, lambda: (torch.randn(3, 1),), compile_fn=compile_fn)


def test_inplace_op_keeping_strides_still_trains(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        y = (x * 2).t()
        y.mul_(3)
        return (y.clone(), y.sum())

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 1, requires_grad=True),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# copy_ from exactly the destination's data: eager returns at once, only the version counter moves


def test_copy_of_expanded_input_into_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, programs 2215, 4330 (refused before: a write through overlapping memory).
    def f(x0: T, x1: T) -> object:
        x0.copy_(x0)
        t = x1.view(-1, 1).expand(3, 3)[0:1:2]
        t.copy_(t)
        return (x0 + 1, t)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(()).expand(2), torch.randn(())), compile_fn=compile_fn)


def test_copy_of_expanded_subclass_data_alias_into_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1202: the `.data` alias has a version counter of its own.
    def f(x0: T) -> object:
        x0.data.copy_(x0)
        x0.copy_(x0)
        return (x0.mul(2),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair().expand(2),), compile_fn=compile_fn)


def test_copy_into_itself_through_expand_stays_refused_where_autograd_records_it(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3035: eager's backward of such a copy raises.
    def f(x0: T) -> object:
        x0.copy_(x0)
        return (x0 * 2,)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(1, 4).as_strided((), (), 2).expand(2),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "overlap in memory")


def test_inplace_op_on_size_one_dim_whose_fake_strides_differ_from_real(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 31, program 1824: fake and real add() choose different strides for the (1, 4) result, so the rewrite
    # cannot be decided on fake strides.
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x0)
        t0.mul_(t0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(4), torch.randn(4, 1).t()), compile_fn=compile_fn)


def test_inplace_ops_of_many_kinds_on_undecided_layouts(compile_fn: CompileFn | None) -> None:
    def f(x: T, m: T) -> object:
        y = (x + 0).t()  # (1, 3) with strides (1, 1)
        y.clamp_(-0.5, 0.5)
        y.masked_fill_(m, 2.0)
        y.gt_(0.1)
        y.cumsum_(1)
        y.index_add_(1, torch.tensor([0, 2]), torch.ones(1, 2))
        return (y.clone(), y * 1)

    assert_matches_eager(f, lambda: (torch.randn(3, 1), torch.tensor([[True, False, True]])), compile_fn=compile_fn)


# Helper "storage" (session 4): whole storages of view inputs, subclass inputs grown in place, crashes of seed 2000


def test_as_strided_reaches_outside_a_view_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1301 and the like (refused before): as_strided's offsets are absolute, so it reaches
    # storage elements the input does not cover; the input's whole storage becomes a synthetic base.
    def f(x0: T) -> object:
        t0 = x0.as_strided((2,), (3,), 0)
        t0.mul_(3.0)
        return (t0 + 1, x0.as_strided((), (), 2))

    def make_inputs() -> tuple[object, ...]:
        base = torch.randn(4, 2)
        return (base[1:3],)

    with torch.no_grad():
        compiled = assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
    base = torch.randn(4, 2)
    expected = base.clone()
    expected.view(-1)[::3][:2] *= 3.0
    with torch.no_grad():
        compiled(base[1:3])
    torch.testing.assert_close(base, expected)  # the write outside the input reached its storage


def test_as_strided_reaches_outside_an_empty_subclass_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 4426 (refused before): the input has no elements, so its fake has no storage; the
    # synthetic base takes the real storage's size.
    def f(x0: T) -> object:
        return (x0[0:0:2].as_strided((), (), 1).add(1.0),)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 2).diagonal(1, 1, 0),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_as_strided_reaches_outside_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 882 (refused before): a non-leaf subclass view input runs as a clone in training,
    # whose offsets are not the input's: as_strided of it reads from the whole storage instead.
    def f(x0: T) -> object:
        return (x0.as_strided((2,), (2,), 0).mul(2.0), x0.as_strided((2,), (4,), 3).sum(0))

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (pair(3, 3, requires_grad=True).diagonal(-1, 0, 1),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_whole_storage_guard_recompiles_for_another_storage_size() -> None:
    def f(x0: T) -> object:
        return (x0.as_strided((2,), (1,), 0).add(1.0),)

    compiled = subclassaot.compile(f, backend="eager")
    with torch.no_grad():
        compiled(torch.randn(4)[1:3])
        big = torch.randn(8)
        out = compiled(big[1:3])
    assert compiled.compile_count == 2
    assert "storage of 4 elements expected, got 8" in compiled.recompile_reasons[-1]
    torch.testing.assert_close(cast(tuple[T, ...], out)[0], big[:2] + 1.0)


def test_write_through_as_strided_of_aliased_inputs_refused_in_training(compile_fn: CompileFn | None) -> None:
    # The backward raised "mutation on a view chain ... as_strided" (plain) or gave wrong gradients (PairTensor).
    def f(x0: T, x1: T) -> object:
        x0.as_strided((2,), (3,), 0).mul_(3.0)
        return (x0 * 2,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b = pair_nonleaf(4, 2)
            return (b[1:3], b[0:1])

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "write with grad through an as_strided")


def test_subclass_input_set_to_a_larger_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 206 (refused before): the wrapper takes x0's larger metadata; its own storage grows
    # in place, as eager's set_ of the wrapper does.
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        return (x1 + 1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(4), pair()), compile_fn=compile_fn)


def test_subclass_input_grown_by_resize(compile_fn: CompileFn | None) -> None:
    # Note [Autograd Sees The Wrapper]: resize_ grows the inner tensors, then the wrapper's own metadata and storage.
    def f(x0: T) -> object:
        x0.resize_(3, 4)
        x0.fill_(2.0)
        return (x0.sum(),)

    with torch.no_grad():
        compiled = assert_matches_eager(f, lambda: (pair(2, 2),), compile_fn=compile_fn)
    x = pair(2, 2)
    with torch.no_grad():
        compiled(x)
    assert x.shape == (3, 4) and x.untyped_storage().nbytes() >= 48


def test_as_strided_write_after_inplace_view_op_on_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 2072 (crashed: "mutation on a view chain ... as_strided"): after t_() the input's own
    # chain is not empty; it is traced as a view of a synthetic base instead (Note [as_strided On Inputs]).
    def f(x0: T) -> object:
        x0.t_()
        x0.as_strided((), (), 0).add_(-1.0)
        return (x0 + 0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(2, 1),), compile_fn=compile_fn)


def test_uniform_write_through_expand_after_set_to_subclass_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1323 (crashed the same way).
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        x0.expand((2, -1, 1)).fill_(3.0)
        return ()

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 1, 3), pair(1, 4, 1)), compile_fn=compile_fn)


def test_uniform_write_through_expand_of_input_set_to_it(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 9792 (crashed the same way): x0 is set_() to its own expand.
    def f(x0: T) -> object:
        t0 = x0.expand((1,))
        set_to(x0, t0)
        t0.fill_(3.0)
        return ()

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(()),), compile_fn=compile_fn)


def test_as_strided_write_of_a_view_refused_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 6135 (the backward raised "mutation on a view chain ... as_strided" where eager's
    # runs): refused when the program returns tensors; without outputs the error stays deferred.
    def f(x0: T) -> object:
        t1 = x0.view((2, 1, 2)).as_strided((3, 1), (1, 1), 0)
        t1.add_(3.0)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(4, 1, 1),), compile_fn, "not the first view")


def test_write_through_plain_input_set_to_a_leaf_that_requires_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 300 (crashed: "a leaf Variable that requires grad is being used in an in-place
    # operation"): eager writes x0's storage through x1, which autograd does not relate to x0; the epilogue's copy
    # into x0 is made below autograd.
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        x1.mul_(-1.0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((), requires_grad=True), torch.randn(2, 4))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_returned_view_after_inplace_view_op_of_its_subclass_base(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1357 (crashed: "Cannot view a tensor with shape ..."): reading the view's grad_fn
    # replays view() on the transposed base, which raises ValueError under fake tensors.
    def f(x0: T) -> object:
        t0 = x0.view((-1, 1, 3))
        x0.t_()
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 3),), compile_fn=compile_fn)


def test_returned_select_after_inplace_view_ops_of_its_base(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 5277 (crashed: "select(): index -2 out of range"): eager regenerates the view's
    # grad_fn by as_strided; replaying select() on the transposed fake base raises IndexError.
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0.select(0, -2)
        x0.t_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(3, 4, 2)[2:2:2].select(2, -1),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_resize_of_expanded_view_input_reaches_its_storage(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 5858 (crashed in the growth copy): the resized view becomes contiguous over storage
    # elements the input does not cover; the input is traced as a view of its whole storage.
    def f(x0: T) -> object:
        t1 = x0.expand((3, 3, 3)).select(1, 1)
        t1.resize_((2, 1, 3))
        return (t1 + 0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(1, 2, 3)[:, 0:1:1],), compile_fn=compile_fn)


def test_write_through_diagonal_of_expanded_subclass_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 7855 (crashed: "more than one element of the written-to tensor refers to a single
    # memory location"): Note [as_strided On Inputs].
    def f(x0: T) -> object:
        x0.diagonal(1, 0, 2).mul_(-1.0)
        return (x0 + 0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 3, 1).expand((-1, 3, 2)),), compile_fn=compile_fn)


def test_write_through_as_strided_of_expanded_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 7877 (crashed the same way, in the epilogue's copy into the expanded input).
    def f(x0: T) -> object:
        t0 = x0.as_strided((3,), (2,), 1)
        t0.copy_(t0 * 2)
        return (x0 + 0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 2).expand((2, -1, 2)),), compile_fn=compile_fn)


def test_as_strided_of_plain_view_input_written_in_training(compile_fn: CompileFn | None) -> None:
    # The joint trace runs a written plain input that requires grad as a clone at offset 0: as_strided's absolute
    # offsets do not name the input's elements there (it crashed: setStorage out of bounds); the compile is redone
    # with the input's whole storage as a synthetic base.
    def f(x0: T) -> object:
        x0.add_(2.0)
        return (x0.as_strided((2,), (1,), 17) * 2,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4, 4, 2)[2:4:2],), compile_fn=compile_fn)


def test_write_into_strided_view_input_in_training_is_not_an_overlap(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 27: the training clone of a view input is laid out elsewhere; that is no overlap.
    def f(x0: T) -> object:
        x0.add_(2.0)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4, 4, 2)[2:4:2],), compile_fn=compile_fn)


def test_write_through_a_restrided_view_of_a_non_contiguous_input_requiring_grad_is_refused(
    compile_fn: CompileFn | None,
) -> None:
    # Fuzz seed 25000 #1709 (argument changes): the reshape's eager strides differ from the fake kernel's in a
    # size-1 dim, so it runs as an as_strided view of the input's clone; the write then scatters into a
    # non-contiguous tensor requiring grad, which autograd's as_strided_scatter rejects (it crashed on an internal
    # assert). Refused; the same write to the input itself, or through a view with the kernel's strides, compiles.
    def f(x0: T, x1: T) -> object:
        t0 = x0.reshape((-1, 2))
        t0.copy_(x1)
        return (x0.mul(2),)

    def direct(x0: T, x1: T) -> object:
        x0.copy_(x1)
        x0.t().mul_(2)
        return (x0.mul(2),)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(3, 4, 1).diagonal(-1, 0, 1), torch.randn(1, 2))

    refused_with_grad(f, make_inputs, compile_fn, "requires grad and is not contiguous")
    check_with_grad(direct, make_inputs, compile_fn)


def test_write_into_an_empty_expand_keeps_its_views_strides(compile_fn: CompileFn | None) -> None:
    # fuzz seed 30000 #5708 (Note [In-Place Ops As Eager Runs Them]): mul_ into an empty expand of an empty diagonal
    # changes no value; functionalized, t1 was regenerated with fresh strides, so `t1 + 1.5` came out (1, 1, 1) where
    # eager's is (0, 1, 1). Under grad too, and with the view returned itself
    def f(x0: torch.Tensor) -> object:
        t0 = x0.expand((2, -1, 0))
        t1 = t0[:, 1:2:1]
        t0.mul_(x0)
        return (t1 + 1.5, t1, x0)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((1, 3, 4)).diagonal(-1, 0, 2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("written", [True, False])
def test_view_with_eager_strides_of_a_written_input_at_an_offset(compile_fn: CompileFn | None, written: bool) -> None:
    # fuzz seed 33000 #5301 (Note [In-Place Ops As Eager Runs Them]): `x0.view((1, 1))` runs as an as_strided with
    # eager's size-1 strides; given x0's offset (1) it read out of the fresh value fill_ regenerated x0 from (the
    # output was 1.0 where eager's is 0.0). The as_strided now takes x0's own offset, relative to its base
    def computed(x0: torch.Tensor) -> object:
        if written:
            x0.fill_(-1.0)
        return (x0.view((1, 1)) + 1.0,)

    def returned(x0: torch.Tensor) -> object:
        if written:
            x0.fill_(-1.0)
        return (x0.view((1, 1)), x0.t().view((1, 1)))

    def make_inputs() -> tuple[torch.Tensor]:  # the same values at every call
        return (torch.randn((4, 2, 1), generator=torch.Generator().manual_seed(0)).diagonal(1, 0, 1),)

    def nonleaf_inputs() -> tuple[object, ...]:
        return (torch.randn((4, 2, 1), requires_grad=True).clone().diagonal(1, 0, 1),)

    for f in (computed, returned):
        with torch.no_grad():
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        with torch.enable_grad():
            assert_matches_eager(f, nonleaf_inputs, compile_fn=compile_fn)
    # the out-of-frame read returned whatever lay past the fresh value, which the oracle's own allocations could make
    # equal to eager's: the compiled function called directly too
    compiled = subclassaot.compile(computed) if compile_fn is None else compile_fn(computed)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(*make_inputs()), computed(*make_inputs()))


def test_view_with_eager_strides_beyond_the_regenerated_value(compile_fn: CompileFn | None) -> None:
    # fuzz seed 35000 #6421 (CRASHED, Note [In-Place Ops As Eager Runs Them]): a write through `x0.expand(...)` of a
    # sliced input regenerates x0 as a dense (2, 3, 3) value; `t0.view(...)` then ran as an as_strided with eager's
    # strides (12, 3, 1), which reach past that value's 18 elements: the graph raised at run time. The view keeps the
    # fake kernel's strides there; a returned view is rebuilt from the input with eager's
    def computed(x0: torch.Tensor) -> object:
        t0 = x0.expand((-1, -1, 3))
        t0.add_(2.0)
        t1 = t0.view((2, 3, -1))
        return (t1 * 2, t1.detach().sum(), t1.clone())

    def returned(x0: torch.Tensor) -> object:
        t0 = x0.expand((-1, -1, 3))
        t0.add_(2.0)
        return (t0.view((2, 3, -1)),)

    def make_inputs() -> tuple[torch.Tensor]:
        return (torch.randn((2, 4, 3), generator=torch.Generator().manual_seed(0))[:, 1:4],)

    def nonleaf_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 4, 3), requires_grad=True).clone()[:, 1:4],)

    for f in (computed, returned):
        with torch.no_grad():
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        with torch.enable_grad():
            assert_matches_eager(f, nonleaf_inputs, compile_fn=compile_fn)


def data_of_a_diagonal_from_its_sort(x0: torch.Tensor) -> object:
    t0 = x0.diagonal(-1, 0, 2)
    t1, _ = t0.sort(1, descending=True)
    t0.data = t1
    return (t0,)


def data_of_a_split_from_an_empty_product(x0: torch.Tensor) -> object:
    _, t1, t2 = x0.split_with_sizes([0, 4, 0], 0)
    t1.data = t2.mul(-1.0)
    return (t1,)


@pytest.mark.parametrize(
    ("f", "shape"),
    [(data_of_a_diagonal_from_its_sort, (2, 1, 1)), (data_of_a_split_from_an_empty_product, (4, 1))],
    ids=["sort", "empty"],
)
def test_data_assigned_an_intermediate_takes_its_real_strides(
    f: Callable[..., object], shape: tuple[int, ...], compile_fn: CompileFn | None
) -> None:
    """`.data =` an intermediate gives the output that tensor's layout, whose strides in size-1 and empty dims are the
    kernel's (sort keeps its input's (1, 2); an empty product (1, 0)), not the trace's (fuzz seed 55000, programs
    6927 and 3193: DIVERGED on strides)."""
    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(shape),), compile_fn=compile_fn)


def _empty_with_gaps_1d() -> T:
    return torch.randn(1, 4).diagonal(1, 1, 0)  # (0,) with strides (5,)


def _empty_with_gaps_2d() -> T:
    return torch.randn(3, 6)[:, ::2][:, 3:]  # (3, 0) with strides (6, 2)


def view_of_detached_sort_indices(x0: torch.Tensor) -> object:
    _, t1 = x0.sort(0)
    return (t1.detach().view(t1.shape),)


def views_of_detached_multi_output_results(x0: torch.Tensor) -> object:
    values, indices = x0.sort(-1)
    mantissa, _ = torch.frexp(x0)
    return (indices.detach().unsqueeze(-1), values.detach().view(values.shape), mantissa.detach().unsqueeze(0))


def view_of_detached_product(x0: torch.Tensor) -> object:
    return (x0.mul(3.0).detach().t(),)


_DETACHED_VIEW_INPUTS: dict[str, Callable[[], T]] = {
    "empty_1d": _empty_with_gaps_1d,
    "empty_2d": _empty_with_gaps_2d,
    "size_one": lambda: torch.randn(2, 1, 2).diagonal(0, 1, 0),  # (2, 1) with strides (1, 2)
}


@pytest.mark.parametrize("kind", ["plain", "leaf", "pair"])
@pytest.mark.parametrize(
    ("f", "shape"),
    [
        (view_of_detached_sort_indices, "empty_1d"),
        (views_of_detached_multi_output_results, "empty_1d"),
        (views_of_detached_multi_output_results, "empty_2d"),
        (view_of_detached_product, "size_one"),
    ],
    ids=["sort_indices", "multi_output_1d", "multi_output_2d", "product"],
)
def test_views_of_a_detached_intermediate_take_the_kernels_strides(
    f: Callable[..., object], shape: str, kind: str, compile_fn: CompileFn | None
) -> None:
    """A view of a detach() of a computed tensor has eager's `._base` the detach(), which the graph returns as an
    intermediate base with the strides the kernel chose: sort and frexp of an empty input with gaps keep its strides
    ((5,) where the trace has (1,)), a product in size-1 dims too. The view is replayed on that real base, not
    rebuilt by as_strided() with the trace's strides (fuzz seed 80000 #7124: DIVERGED on strides)."""

    def make() -> tuple[object, ...]:
        x = _DETACHED_VIEW_INPUTS[shape]()
        if kind == "pair":
            return (PairTensor.from_tensor(x),)
        return (x.requires_grad_(),) if kind == "leaf" else (x,)

    check_no_grad(f, make, compile_fn)
    check_with_grad(f, make, compile_fn)


def outputs_over_a_base_assigned_by_data(x0: torch.Tensor) -> object:
    t0 = x0.add(1.0)
    t1 = x0.sort(0)[0]
    t0.data = t1
    return (t0, t1)


def test_outputs_over_an_assigned_base_take_its_real_layout_in_the_generated_runner(
    compile_fn: CompileFn | None,
) -> None:
    """An output over an intermediate base with the base's layout in the trace (`t0.data = t1`) takes the real
    base's layout (OutputLeaf.base_layout), in the generated straight-line runner as in the generic one: it took the
    trace's ((1,) for eager's (5,), the sort of an empty input with gaps)."""
    check_no_grad(outputs_over_a_base_assigned_by_data, lambda: (_empty_with_gaps_1d(),), compile_fn)
    check_with_grad(outputs_over_a_base_assigned_by_data, lambda: (_empty_with_gaps_1d(),), compile_fn)


# (storage numel, size, stride, storage offset): inputs with a size-1 dim whose stride is 0 (or another value no
# contiguous layout gives), beside dims with gaps
_SIZE_ONE_STRIDE_INPUTS = {
    "row_stride0_gap": (4, (1, 2), (0, 2), 1),
    "column_stride0_gap": (5, (2, 1), (2, 0), 1),
    "middle_stride0_gap": (12, (2, 1, 3), (6, 0, 2), 0),
    "two_stride0_gap": (6, (1, 1, 2), (0, 0, 3), 0),
    "row_stride5_dense": (4, (1, 2), (5, 1), 1),
}
_SIZE_ONE_STRIDE_VIEWS: dict[str, Callable[[T], object]] = {
    "transpose": lambda x: (x.transpose(1, 0),),
    "permute": lambda x: (x.permute(*reversed(range(x.dim()))),),
    "unsqueeze": lambda x: (x.unsqueeze(1),),
    "t": lambda x: (x.t(),),
    "transpose_then_mul": lambda x: (x.transpose(1, 0).mul(2.0), x.unsqueeze(0).transpose(0, 1)),
}


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    ("shape", "view"),
    [
        (shape, view)
        for shape, (_, size, _, _) in _SIZE_ONE_STRIDE_INPUTS.items()
        for view in _SIZE_ONE_STRIDE_VIEWS
        if view != "t" or len(size) == 2
    ],
)
def test_views_of_inputs_keep_strides_of_size_one_dims(
    compile_fn: CompileFn | None, kind: str, shape: str, view: str
) -> None:
    """A view of an input whose size-1 dim has stride 0 shows that stride (`x.transpose(1, 0)` of a (1, 2) input with
    strides (0, 2) is (2, 0)). Training runs the program on a clone of the input with the input's strides; the clone
    made that input contiguous, and a PairTensor output viewing the input is rebuilt from the traced layout: it took
    strides (1, 2) and read the wrong elements (fuzz seed 116200 #289). Plain views replay on the real input."""
    numel, size, stride, offset = _SIZE_ONE_STRIDE_INPUTS[shape]

    def make_inputs(requires_grad: bool) -> tuple[object, ...]:
        base = PairTensor.from_tensor(torch.randn(numel)) if kind == "pair" else torch.randn(numel)
        return (base.requires_grad_(requires_grad).as_strided(size, stride, offset),)

    check_no_grad(_SIZE_ONE_STRIDE_VIEWS[view], lambda: make_inputs(False), compile_fn)
    check_with_grad(_SIZE_ONE_STRIDE_VIEWS[view], lambda: make_inputs(True), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# The first compile of a process (torch_internals._CacheKeepsStorage): fake tensors' dispatch cache,
# empty in a fresh process, answered a written input's `copy` at offset 0 on a hit where the kernel (a miss) keeps
# the input's offset, so the first compile and the later ones laid the written value out differently. Each program
# runs in a fresh interpreter, where its first compile meets an empty cache and its second a filled one.
# ---------------------------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _of_kind(kind: str, t: T) -> T:
    from tests.subclasses.two_tensor_factory import two_tensor_from_tensor

    makers: dict[str, Callable[[T], T]] = {
        "plain": lambda t: t,
        "pair": PairTensor.from_tensor,
        "two_tensor": two_tensor_from_tensor,
    }
    return makers[kind](t)


def _strided_input(kind: str) -> T:
    """A (1,) input at storage offset 1 of a (2, 1, 4) tensor of `kind`."""
    return _of_kind(kind, torch.randn(2, 1, 4)).as_strided((1,), (1,), 1)


def _written_then_transposed(x0: T, x1: T) -> object:
    x0.add_(x1)
    t0 = x0.t()
    return (x0, t0, t0.unbind(0)[0])


def run_first_compiles(kind: str) -> None:
    """Compile `_written_then_transposed` on a written as_strided input of `kind` with grad (the fuzz program, its
    outputs also written after the call) and without, against eager; run by a fresh interpreter."""
    from subclassaot.tools.parity import write_outputs

    def make_inputs() -> tuple[object, ...]:
        return (_strided_input(kind), _of_kind(kind, torch.randn(())).requires_grad_())

    with torch.enable_grad():
        assert_matches_eager(_written_then_transposed, make_inputs)
        assert_matches_eager(_written_then_transposed, make_inputs, after_call=write_outputs)
    check_no_grad(lambda x: (x.add_(1), x.t()), lambda: (_strided_input(kind),), None)


@pytest.mark.parametrize(
    "kind",
    # plain and PairTensor inputs matched eager before too (their outputs are views replayed on the real input): slow
    ["two_tensor", pytest.param("plain", marks=pytest.mark.slow), pytest.param("pair", marks=pytest.mark.slow)],
)
def test_a_written_strided_input_matches_eager_on_the_first_compile_of_a_process(kind: str) -> None:
    # fuzz --subclass tests.subclasses.two_tensor_factory:two_tensor, seed 122852, program 196: CRASHED on the first
    # compile of a process only. TwoTensor's t() ran on its inner `a` (the kernel's `copy` at offset 1, a cache miss)
    # and `b` (the same call, a cache hit at offset 0), and TwoTensor's constructor refused the unequal offsets.
    program = f"from tests.pipeline.test_strides_and_offsets import run_first_compiles; run_first_compiles({kind!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _reshaped(x: torch.Tensor) -> object:
    return (x.reshape((1, 12)) * torch.arange(12.0).view(1, 12),)


def _made_leaf_then_reshaped(x: torch.Tensor) -> object:
    x.requires_grad_()
    return (x.reshape((1, 12)) * torch.arange(12.0).view(1, 12),)


def _expanded_leaf() -> tuple[object, ...]:
    return (torch.randn((1, 1, 2)).expand((3, 2, 2)).requires_grad_(),)


def _expanded_view() -> tuple[object, ...]:
    return (torch.randn((1, 1, 2)).expand((3, 2, 2)),)


def _expanded_of_grad_base() -> tuple[object, ...]:
    return (torch.randn((1, 1, 2), requires_grad=True).expand((3, 2, 2)),)


def _expanded_pair_leaf() -> tuple[object, ...]:
    return (PairTensor.from_tensor(torch.randn((1, 1, 2))).expand((3, 2, 2)).requires_grad_(),)


def _expanded_pair_view() -> tuple[object, ...]:
    return (PairTensor.from_tensor(torch.randn((1, 1, 2))).expand((3, 2, 2)),)


def _expanded_of_grad_pair_base() -> tuple[object, ...]:
    return (PairTensor.from_tensor(torch.randn((1, 1, 2)), requires_grad=True).expand((3, 2, 2)),)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize(
    ("f", "make"),
    [
        (_reshaped, _expanded_leaf),
        (_made_leaf_then_reshaped, _expanded_view),
        (_reshaped, _expanded_of_grad_base),
        (_reshaped, _expanded_pair_leaf),
        (_made_leaf_then_reshaped, _expanded_pair_view),
        (_reshaped, _expanded_of_grad_pair_base),
    ],
    ids=["leaf", "made_leaf", "view_of_grad_base", "pair_leaf", "pair_made_leaf", "pair_view_of_grad_base"],
)
def test_expanded_input_gets_the_gradient_of_each_element(
    f: Callable[..., object], make: Callable[[], tuple[object, ...]], backend: str
) -> None:
    # fuzz seed 117100 #8383: an expanded input requiring grad ran as an expand() of a compact clone, whose backward
    # summed the gradients of the elements sharing memory and gave each their mean; eager's is per element.
    # The PairTensor variants: fuzz seed 123119 #144 (a tensor subclass input kept the summing clone)
    with torch.enable_grad():
        assert_matches_eager(f, make, backend=backend)


def _selecting(op: str) -> Callable[[torch.Tensor], object]:
    """The program of fuzz seed 123119 #144 with its reduction: a selecting op's values, sliced."""

    def run(x: torch.Tensor) -> object:
        if op == "sort":
            values = x.sort(1)[0]
        elif op == "max":
            values = x.max(1, keepdim=True)[0]
        else:
            values = x.topk(2, 1)[0]
        return (values[:, 0:2:1],)

    return run


def _expanded_made_leaf(kind: str, view: str, when: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        t = torch.randn((2,))
        base = PairTensor.from_tensor(t) if kind == "pair" else t
        x = base.expand((2, 2)) if view == "expand" else torch.broadcast_to(base, (2, 2))
        return (x.requires_grad_() if when == "before_the_call" else x,)

    return make


@pytest.mark.parametrize("when", ["attribute", "requires_grad_", "before_the_call"])
@pytest.mark.parametrize("view", ["expand", "broadcast_to"])
@pytest.mark.parametrize("op", ["sort", "max", "topk"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_expanded_leaf_of_either_kind_gets_the_gradient_of_each_element(
    kind: str, op: str, view: str, when: str
) -> None:
    # fuzz seed 123119 #144: a PairTensor expand() of a fresh tensor, made to require grad by the program and sorted,
    # got the gradient of its clone's as_strided backward (the sum over the elements sharing memory) where eager gives
    # each element its own, as it does for a plain input (test_expanded_input_gets_the_gradient_of_each_element)
    selecting = _selecting(op)

    def f(x: torch.Tensor) -> object:
        if when == "attribute":
            x.requires_grad = True
        elif when == "requires_grad_":
            x.requires_grad_()
        return selecting(x)

    with torch.enable_grad():
        assert_matches_eager(f, _expanded_made_leaf(kind, view, when))


def _write_row_under_no_grad(b: torch.Tensor, x: torch.Tensor) -> object:
    with torch.no_grad():
        x[0].add_(1.0)
    return (x * torch.arange(6.0).view(2, 3),)


def _write_row_after_use(b: torch.Tensor, x: torch.Tensor) -> object:
    x.requires_grad_()
    y = x * torch.arange(6.0).view(2, 3)
    with torch.no_grad():
        x[1].mul_(3.0)
    return (y,)


def _write_base_under_no_grad(b: torch.Tensor, x: torch.Tensor) -> object:
    with torch.no_grad():
        b.add_(1.0)
    return (x * torch.arange(6.0).view(2, 3),)


def _expanded_leaf_beside_its_base(kind: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        t = torch.randn((1, 3))
        b = PairTensor.from_tensor(t) if kind == "pair" else t
        return (b, b.expand((2, 3)).requires_grad_())

    return make


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("f", [_write_row_under_no_grad, _write_row_after_use, _write_base_under_no_grad])
def test_written_expanded_leaf_gets_each_elements_gradient_or_is_refused(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    # variants of fuzz seed 123119 #144 (an expanded leaf's gradient, per element in eager): a plain input written
    # (through itself or its base) is traced over its storage as a synthetic base, whose gradient spread the mean of
    # the elements sharing memory over them; refused. A PairTensor input runs as its compact clone and matches eager.
    make = _expanded_leaf_beside_its_base(kind)
    if kind == "plain":
        refused_with_grad(f, make, compile_fn, "no autograd history of its own .* would spread their mean")
    else:
        check_with_grad(f, make, compile_fn)


def _flag_clone_and_set_alias_to_itself(x0: T, x1: T) -> object:
    # fuzz seed 120200 #1006
    with torch.no_grad(), torch.set_grad_enabled(True):
        x0.requires_grad_()
    t0 = x0.clone()
    x1.set_(x1)  # type: ignore[call-overload]  # the stubs list only storage overloads
    t0.unbind(0)
    return (t0, x1)


def _flag_clone_and_relay_alias(x0: T, x1: T) -> object:
    x0.requires_grad_()
    t0 = x0.clone()
    x1.unsqueeze_(0)
    return (t0, x1)


def _clone_and_set_alias_to_itself(x0: T, x1: T) -> object:
    t0 = x0.clone()
    x1.set_(x1)  # type: ignore[call-overload]  # the stubs list only storage overloads
    return (t0, x1)


@pytest.mark.parametrize(
    ("f", "passed"),
    [
        (_flag_clone_and_set_alias_to_itself, False),
        (_flag_clone_and_relay_alias, False),
        (_clone_and_set_alias_to_itself, True),
    ],
)
def test_overlapping_leaf_beside_an_alias_set_or_relaid_is_refused(
    f: Callable[..., object], passed: bool, compile_fn: CompileFn | None
) -> None:
    # An input whose two elements are one in memory (as_strided with zero strides, detached: a leaf), beside a view of
    # the same storage that the program set_()s to itself or relays in place: the group is traced over one synthetic
    # base, and the leaf's gradient taken through it spread the mean of its elements ((0.5, 0.5) where eager's clone
    # gives each element its own tangent); refused, whether the leaf requires grad as passed or by the program's flag.
    def make() -> tuple[object, ...]:
        b0 = torch.randn(())
        x0 = b0.as_strided((1, 2), (0, 0), 0).detach()
        return (x0.requires_grad_(passed), b0.reshape((1, 1, 1)))

    refused_with_grad(f, make, compile_fn, "no autograd history of its own .* would spread their mean")


# A tensor whose strides in a size-1 dim are its own (a clone of `b.t()`, b (4, 1): strides (1, 1)), written through a
# view and returned: functionalization regenerates it by the view's inverse with (4, 1); eager's keeps (1, 1). The
# graph returns it through a copy laid out as the wrapper is (Note [In-Place Ops As Eager Runs Them]).
def _clone_written_through_reshape(x0: T) -> object:
    t0 = x0.clone()
    t0.reshape((4, 1, -1)).zero_()
    return (t0,)


def _clone_written_through_flat_view_and_read(x0: T) -> object:
    t0 = x0.clone()
    t0.view((4,)).add_(1.0)
    return (t0 + 0, t0)


def _clone_written_through_flat_view_and_viewed(x0: T) -> object:
    t0 = x0.clone()
    t0.view((4,)).mul_(2.0)
    return (t0, t0[:, 1:])


@pytest.mark.parametrize(
    "f",
    [
        _clone_written_through_reshape,
        _clone_written_through_flat_view_and_read,
        _clone_written_through_flat_view_and_viewed,
    ],
)
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_fresh_output_written_through_a_view_keeps_its_size_one_strides(
    f: Callable[[T], object], grad: bool, kind: str, compile_fn: CompileFn | None
) -> None:
    """Fuzz seed 119200 program 7113: out[0] came back with strides (4, 1) where eager's are (1, 1)."""

    def make() -> tuple[object, ...]:
        b0 = torch.randn(4, 1, requires_grad=grad)
        if kind == "pair":
            b0 = PairTensor(b0, torch.randn(4, 1, requires_grad=grad))
        return (b0.t(),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)


def _nested_two_tensor(t: T, grad: bool) -> T:
    """A TwoTensor of TwoTensors over `t` (each wrapper's size and stride are its first inner tensor's)."""
    from torch.testing._internal.two_tensor import TwoTensor

    nested = TwoTensor(TwoTensor(t, t * 2), TwoTensor(-t, t + 1))  # type: ignore[no-untyped-call]
    return nested.requires_grad_() if grad else nested


def _sorted_both(x0: T) -> object:
    t0, t1 = x0.sort(1)
    return (t1, t0)


def _sorted_descending(x0: T) -> object:
    t0, _ = x0.sort(0, descending=True)
    return (t0,)


_NESTED_KERNEL_LAYOUTS: dict[str, tuple[Callable[[T], object], Callable[[T], T]]] = {
    # fuzz seed 121000 #3613: an empty diagonal slice; eager's sort keeps its strides (4, 5), fakes give (1, 1)
    "empty_diagonal": (_sorted_both, lambda t: t.view(1, 1, 4).diagonal(-1, 0, 2)[:, 0:0]),
    # fuzz seed 121000 #5011: a (2, 1) expand().t() of strides (1, 0); eager's sort gives (1, 2), fakes (1, 1)
    "expanded_column": (_sorted_descending, lambda t: t[:2].expand(1, 2).t()),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", sorted(_NESTED_KERNEL_LAYOUTS))
def test_nested_wrapper_outputs_take_their_leaves_kernel_strides(
    case: str, grad: bool, compile_fn: CompileFn | None
) -> None:
    """A fresh output that is a wrapper of wrappers, each laid out as its first inner tensor: the nested wrapper
    takes its leaf's real strides as the outer one does (Note [Strides The Kernels Choose]); it was rebuilt with the
    fake strides of a dim of size 0 or 1 (`.a` stride (1, 1) vs eager's (4, 5))."""
    f, view = _NESTED_KERNEL_LAYOUTS[case]

    def make() -> tuple[object, ...]:
        return (view(_nested_two_tensor(torch.randn(4), grad)),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)


# batch_norm's CPU kernels lay their result (and the backward's grad_input) out contiguously in the input's suggested
# memory format; the meta kernels keep the input's strides, a transposed input's too. A view that needs the layout
# (view(-1)) or a resize_() that reinterprets the storage showed the difference: the trace raised or read other
# elements (Note [Strides The Kernels Choose], Batch Norm Results Laid Out As Eager).
def _batch_norm_flattened(x0: T) -> object:
    c = x0.shape[1]
    t0 = torch.nn.functional.batch_norm(x0, torch.zeros(c), torch.ones(c), training=True, momentum=0.1, eps=1e-05)
    return (t0.view(-1), t0.view(x0.shape[0], -1)[1:])


def _batch_norm_eval_flattened(x0: T) -> object:
    c = x0.shape[1]
    t0 = torch.nn.functional.batch_norm(x0, torch.zeros(c), torch.ones(c), torch.ones(c), torch.zeros(c))
    return (t0.view(-1) * 2.0,)


def _native_batch_norm_flattened(x0: T) -> object:
    c = x0.shape[1]
    t0 = torch.native_batch_norm(x0, torch.ones(c), None, torch.zeros(c), torch.ones(c), True, 0.1, 1e-05)[0]
    return (t0.view(-1),)


_BATCH_NORM_LAYOUTS: dict[str, Callable[[torch.Tensor], T]] = {
    "transposed": lambda t: t.view(3, 4).t(),  # (4, 3) of strides (1, 4): eager's result (3, 1)
    "channels_last_transposed": lambda t: t.view(2, 3, 2, 2).to(memory_format=torch.channels_last).transpose(2, 3),
    "batch_transposed": lambda t: t.view(3, 2, 2).transpose(0, 1),  # (2, 3, 2) of strides (4, 6, 1)
}


def _batch_norm_input(layout: str, grad: bool) -> tuple[object, ...]:
    t = _BATCH_NORM_LAYOUTS[layout](torch.randn(24 if "channels" in layout else 12))
    return (t.detach().requires_grad_(grad),)


@pytest.mark.parametrize("layout", sorted(_BATCH_NORM_LAYOUTS))
def test_batch_norm_result_takes_the_cpu_kernels_layout(layout: str, compile_fn: CompileFn | None) -> None:
    """Fuzz smoke (seed 0, wide vocabulary): view(-1) of batch_norm's result on a transposed input raised in the trace
    ("view size is not compatible"), where eager's result is contiguous. Forward and training."""
    for grad in (False, True):
        make = functools.partial(_batch_norm_input, layout, grad)
        for f in (_batch_norm_flattened, _batch_norm_eval_flattened, _native_batch_norm_flattened):
            with torch.set_grad_enabled(grad):
                assert_matches_eager(f, make, compile_fn=compile_fn)


def test_batch_norm_result_of_a_transposed_input_resized(compile_fn: CompileFn | None) -> None:
    """The fixed-seed wide smoke (seed 0, 200 programs) CRASHED: batch_norm's result is (2, 1) in eager, (1, 3) on
    fakes; resize_((7,)) of it makes it contiguous in eager, and the runner rebuilt it by view ops the traced layout
    cannot take ("view size is not compatible")."""

    def f(x0: T) -> object:
        t0 = torch.nn.functional.batch_norm(
            x0.clone().reshape(-1, 2), x0[0], torch.ones(2), training=True, momentum=0.1, eps=1e-05
        )
        t0.resize_((7,))
        t0.fill_(0.5)
        return (t0,)

    check_no_grad(f, lambda: (torch.randn((2, 3)).t(),), compile_fn)


_EMPTY_EXPANDED_READS: dict[str, Callable[[T], T]] = {
    "clone": lambda x: x.clone(),
    "add": lambda x: x + 1,
    "unsqueezed_clone": lambda x: x.unsqueeze(0).clone(),
}


def _empty_expand_of(make: Callable[..., T]) -> tuple[T]:
    return (make(2, 1)[:, 1:1:2].expand((2, 2, -1)),)


@pytest.mark.parametrize("read", sorted(_EMPTY_EXPANDED_READS))
def test_read_of_empty_expanded_input_written_through_data_keeps_eager_strides(
    compile_fn: CompileFn | None, read: str
) -> None:
    # fuzz seed 121005 #9592: x0 is an empty expand() laid out (0, 1, 2); `.data.mul_(x0)` (autograd records it on the
    # alias) regenerates x0's functional value with strides of its own, (0, 1, 1). Eager's kernels keep an empty
    # tensor's strides whatever they are, so the read goes through a copy in eager's layout, overlapping or not
    def f(x0: T) -> tuple[T]:
        x0.data.mul_(x0)
        return (_EMPTY_EXPANDED_READS[read](x0),)

    with torch.enable_grad():
        for make in (nonleaf, pair_nonleaf):
            assert_matches_eager(f, functools.partial(_empty_expand_of, make), compile_fn=compile_fn)


# batch_norm's CPU kernel picks its arithmetic by layout: with the input, weight, bias and both running statistics
# contiguous, `x * alpha + beta`; else `((x - mean) * invstd) * weight + bias`. On a batch of one row repeated
# (variance 0, rounding magnified by 1/sqrt(eps)) the two differ past the oracle's tolerance: eager's result is 0
# exactly where a statistic is non-contiguous. The functional op the trace records cloned the statistics contiguous
# (fuzz seed 121005, program 6560: a running_var `x0[0]` of an expanded input); the eager backend runs batch norm on
# copies that keep them non-contiguous (opaque_ops: batch norm's running statistics in their own layout).
_STATISTICS: dict[str, Callable[[T], tuple[T, T]]] = {
    "var_a_column": lambda x1: (torch.zeros(4), x1[:, 0]),
    "mean_a_column": lambda x1: (x1[:, 1], torch.ones(4)),
    "both_columns": lambda x1: (x1[:, 1], x1[:, 2]),
    "made_strided": lambda x1: (torch.zeros(8)[::2], torch.ones(4)),
}


def _batch_norm_of_one_row(api: str, statistics: str, x0: T, x1: T) -> object:
    mean, var = _STATISTICS[statistics](x1)
    batch = x0.expand(3, 4) * 2.0  # (three equal rows: its variance is 0)
    if api == "native":
        return (torch.native_batch_norm(batch, None, None, mean, var, True, 0.1, 1e-05)[0], x1)
    return (torch.nn.functional.batch_norm(batch, mean, var, training=True, momentum=0.1, eps=1e-05), x1)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "training"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("api", ["native", "functional"])
@pytest.mark.parametrize("statistics", sorted(_STATISTICS))
def test_batch_norm_over_non_contiguous_running_statistics_computes_as_eager(
    statistics: str, api: str, kind: str, grad: bool, compile_fn: CompileFn | None
) -> None:
    def make() -> tuple[object, ...]:
        x1 = torch.rand(4, 3) + 0.5
        if kind == "pair":
            return pair(4, requires_grad=grad), PairTensor.from_tensor(x1)
        return torch.randn(4, requires_grad=grad), x1

    program = functools.partial(_batch_norm_of_one_row, api, statistics)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact")


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_batch_norm_over_the_row_of_an_expanded_input(dynamic: bool, compile_fn: CompileFn | None) -> None:
    """fuzz seed 121005, program 6560 (shrunk): values differed by 3e-5 (eager's 0)."""

    def f(x0: T) -> object:
        t1 = x0.add(-1.0).add(x0)
        return (torch.nn.functional.batch_norm(t1.clone().reshape(-1, 4), torch.zeros(4), x0[0], training=True),)

    def make() -> tuple[object, ...]:
        return (torch.randn((1, 4, 3)).abs().expand((3, 4, -1)).unbind(2)[0],)

    with torch.no_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn, compile_kwargs={"dynamic": dynamic})


# ---------------------------------------------------------------------------------------------------------------------
# Writes through unfold windows of a view (torch_internals.py, Unfold as the as_strided view it is): the unfold is
# traced as the as_strided view of its layout, which functionalization writes back only at the head of a chain, so an
# unfold of a view is taken from the chain's root (Note [as_strided On Inputs]). Fuzz seed 121007 #253, #956, #1114
# were refused ("not the first view of its chain"); #4947 crashed ("setStorage: ... out of bounds").
# ---------------------------------------------------------------------------------------------------------------------


def _unfold_of_view(program: str) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0 * 1.0  # (an intermediate: written with grad too)
        if program == "unsqueezed":  # #956: every window, one element each
            t0.unsqueeze(-2).unfold(1, 1, 1).zero_()
        elif program == "transposed_apart":  # windows apart (step 2 > size 1) leave odd rows as they were
            t0.t().unfold(0, 1, 2).mul_(0.5)
        elif program == "sliced_remainder":  # a remainder past the last window, at an offset
            t0[1:, 1:].unfold(1, 2, 2).add_(1.0)
        else:  # a view of the window written, from a selected row
            t0[1].unfold(0, 2, 3)[1].fill_(5.0)
        return (t0,)

    return f


@pytest.mark.parametrize("subclass", [False, True])
@pytest.mark.parametrize("program", ["unsqueezed", "transposed_apart", "sliced_remainder", "window_selected"])
def test_write_through_unfold_of_a_view(compile_fn: CompileFn | None, subclass: bool, program: str) -> None:
    f = _unfold_of_view(program)
    check_no_grad(f, lambda: ((pair(3, 5) if subclass else torch.randn(3, 5)),), compile_fn)
    check_with_grad(f, lambda: ((pair_nonleaf(3, 5) if subclass else nonleaf(3, 5)),), compile_fn)


@pytest.mark.parametrize("subclass", [False, True])
@pytest.mark.parametrize("program", ["reshaped", "zero_dim"])
def test_write_through_unfold_of_an_input_sharing_storage(
    compile_fn: CompileFn | None, subclass: bool, program: str
) -> None:
    # #253 (x1 = b0.reshape(3, 1, 1)) and #1114 (x1 = b0.t() of a 0-d b0): the input is a view of the inputs'
    # synthetic base, the root its unfold is taken from
    def f(x0: T, x1: T) -> object:
        if program == "reshaped":
            x1.unfold(2, 1, 2).mul_(0.5)
        else:
            x1.unfold(0, 1, 3).add_(0.5)
        return (x0 * 1.0,)

    def make_inputs() -> tuple[object, ...]:
        shape = (3,) if program == "reshaped" else ()
        b0 = pair(*shape) if subclass else torch.randn(shape)
        return (b0, b0.reshape(3, 1, 1) if program == "reshaped" else b0.t())

    check_no_grad(f, make_inputs, compile_fn)
    check_with_grad(f, make_inputs, compile_fn)


def test_as_strided_of_a_conj_view_written(compile_fn: CompileFn | None) -> None:
    # the chain's head (t0) reads the storage without the view's conjugate bit: the as_strided() view is taken from
    # the head and given x's bit back (a head of the same bits only: wrong values and is_conj() at bd64982c, refused
    # "not the first view of its chain" with a view-root tracker that required them)
    def f(x0: T) -> object:
        t0 = x0 * 1.0
        v = t0.conj().as_strided((2,), (1,), 1)
        v.mul_(1j)
        return (t0, v)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(6, dtype=torch.complex64),)

    check_no_grad(f, make_inputs, compile_fn)
    check_with_grad(f, make_inputs, compile_fn)


def test_as_strided_of_a_view_of_another_dtype_written_refused(compile_fn: CompileFn | None) -> None:
    # the chain's head reads the storage in another dtype: an as_strided() of it is not x's, and functionalization
    # writes an as_strided() view back only from the head of its chain
    def f(x0: T) -> object:
        t0 = x0 * 1.0
        t0.view(torch.int32).as_strided((2,), (1,), 1).fill_(7)
        return (t0,)

    with torch.no_grad():
        assert_refused(f, lambda: (torch.randn(6),), compile_fn, "not the first view of its chain")


def _imag_of_conj(*shape: int) -> T:
    # a view with a negative bit (`c.conj().imag`): strides 2 apart in the complex storage's reals, not dense
    return (torch.randn(shape) * (1 + 0.5j)).conj().imag


@pytest.mark.parametrize("program", ["diagonal_one_window", "tiled", "conj_dense_at_offset"])
def test_write_through_unfold_of_a_math_bit_input(compile_fn: CompileFn | None, program: str) -> None:
    # #4947 ("diagonal_one_window"): torch's math-bit fallback runs the write-back's as_strided_scatter on a dense
    # resolved copy of the input, where eager's strides and offset name other elements (or none)
    def f(x0: T) -> object:
        if program == "diagonal_one_window":
            x0.unfold(1, 1, 2).mul_(0.5)
        else:
            x0.unfold(1, 2, 2).mul_(0.5)
        return (x0 * 1.0,)

    def make_inputs() -> tuple[object, ...]:
        if program == "diagonal_one_window":
            return (_imag_of_conj(1, 2).unsqueeze(2).diagonal(-1, 1, 0),)
        if program == "tiled":
            return (_imag_of_conj(3, 4),)
        return ((torch.randn(3, 4) * (1 + 0.5j))[1:].conj(),)

    check_no_grad(f, make_inputs, compile_fn)


def test_write_through_untiled_unfold_of_a_math_bit_input_refused(compile_fn: CompileFn | None) -> None:
    # windows apart over a neg-bit view that is not dense: neither write-back gives eager's value (the as_strided's
    # names other elements of the resolved copy, unfold_backward zeroes the elements between windows)
    def f(x0: T) -> object:
        x0.unfold(1, 1, 2).mul_(0.5)
        return (x0 * 1.0,)

    with torch.no_grad():
        assert_refused(f, lambda: (_imag_of_conj(3, 4),), compile_fn, "unfold.. of a tensor with a negative")


def view_as_of_a_product_inside_inference_mode(x0: T) -> object:
    with torch.inference_mode():
        y = x0 * 2
        return (y.view_as(y),)


def function_views_inside_inference_mode(x0: T) -> object:
    t1 = x0.detach().mul(1.0)
    with torch.inference_mode():
        t2, _ = ViewAsAndRowOfOwnTensor.apply(t1)  # type: ignore[no-untyped-call]  # (Function.apply is untyped in torch)
    return (t2,)


@pytest.mark.parametrize(
    "f", [view_as_of_a_product_inside_inference_mode, function_views_inside_inference_mode], ids=["view_as", "function"]
)
def test_inference_tensor_views_take_the_view_ops_strides(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    """A view of an inference tensor is no autograd view: the output is an alias of the intermediate base with the
    base's layout in the trace (fake mul lays the size-1 dim out (9, 1, 9, 3)), but eager's view op lays that dim out
    by itself (computeStride: (9, 1, 9, 3)) where the product has the kernel's (9, 1, 3, 3). It takes its own value's
    layout from the graph, not the real base's (fuzz seed 121007 #7127: DIVERGED on strides)."""

    def make() -> T:
        return torch.randn(3, 3, 3).unsqueeze(2).transpose(1, 3)

    check_no_grad(f, lambda: (make(),), compile_fn)
    check_with_grad(f, lambda: (make(),), compile_fn)
    check_with_grad(f, lambda: (make().requires_grad_(),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Training with symbolic sizes: the joint runs the program on clones of the inputs, which keep the inputs' strides
# (clone() lays a non-dense input out contiguously) and whose wrappers' outer strides are the trace's own symbols


def _columns(make: Callable[..., T], transpose: bool) -> T:
    with torch.enable_grad():
        x = make(8, 16, requires_grad=True)[:, :6]  # strides (16, 1), not dense
        return x.t() if transpose else x


@pytest.mark.parametrize(("kind", "transpose"), [("plain", False), ("plain", True), ("pair", True)])
def test_non_dense_input_keeps_its_strides_in_dynamic_training(
    kind: str, transpose: bool, compile_fn: CompileFn | None
) -> None:
    # corpus_pytorch14's exact_stride: ours gave the result strides (6, 1) where eager's are (16, 1).
    def f(x: T) -> object:
        r = torch.empty_strided(x.size(), x.stride())
        r[:] = x * 2
        return (r, x + 1)

    make = (lambda *s, requires_grad: torch.randn(s, requires_grad=requires_grad)) if kind == "plain" else pair
    with torch.enable_grad():
        assert_matches_eager(
            f, lambda: (_columns(make, transpose),), compile_fn=compile_fn, compile_kwargs={"dynamic": True}
        )


def test_wrapper_with_a_stride_of_three_symbols_rebuilt_in_dynamic_training(compile_fn: CompileFn | None) -> None:
    # corpus_pytorch14's two_concat_add_inplace: z's size (s0, s1 + s2, s3, s4) gives it the outer stride
    # s3*s4*(s1 + s2), which make_fx could not rebuild from its symbols (PairTensor's unflatten raised in a mul).
    def f(x: T, y: T, z: T) -> object:
        return (torch.cat([x, y], dim=1).add_(z),)

    with torch.enable_grad():
        assert_matches_eager(
            f,
            lambda: (
                pair(2, 3, 4, 4, requires_grad=True),
                pair(2, 3, 4, 4, requires_grad=True),
                pair(2, 6, 4, 4, requires_grad=True),
            ),
            compile_fn=compile_fn,
            compile_kwargs={"dynamic": True},
        )


def test_inplace_view_op_on_a_view_set_to_another_tensor_is_no_write(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121012 #2110 and #8190 (refused before, as "an in-place write with grad into a tensor that was a view
    # and then set_()"): t_() changes t0's layout, not its data, so the write rule does not apply; eager's result,
    # read and returned with grad, is ours. A real write after (mul_) stays refused
    def f(x0: T, x1: T) -> object:
        t0 = x1.view(2, 3)
        t0.set_(x0)  # type: ignore[call-overload]  # the stubs list only storage overloads
        t0.t_()
        return (t0.sum(), t0, x1)

    def written(x0: T, x1: T) -> object:
        t0 = x1.view(2, 3)
        t0.set_(x0)  # type: ignore[call-overload]
        t0.t_()
        t0.mul_(2.0)
        return (t0, x1)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 3), torch.randn(6, requires_grad=True).clone())

    with torch.enable_grad():
        for after_call in (None, write_outputs):
            assert_matches_eager(f, make_inputs, after_call=after_call, compile_fn=compile_fn)
        with pytest.raises(UnsupportedError, match=r"aten\.mul_\.Tensor: an in-place write with grad into a tensor"):
            assert_matches_eager(written, make_inputs, compile_fn=compile_fn)


def test_inplace_view_op_on_an_untiled_unfold_of_a_neg_bit_tensor_is_no_write(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121012 #1066 (refused before, as "an in-place write through an unfold() of a tensor with a negative or
    # conjugate bit"): t_() of such an unfold writes nothing back; eager's result is ours
    def f(x0: T) -> object:
        t1 = x0.transpose(0, 0).unfold(0, 2, 3)
        t1.t_()
        return (t1, t1 * 2.0, x0)

    def make_inputs() -> tuple[object, ...]:
        with torch.no_grad():
            return ((torch.randn(3) * (1 + 0.5j)).conj().imag,)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            for after_call in (None, write_outputs):
                assert_matches_eager(f, make_inputs, after_call=after_call, compile_fn=compile_fn)
