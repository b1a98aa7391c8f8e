"""Fuzz regressions for strides, storage offsets and aliasing of outputs and inputs after the call where the fake
tensors of the analysis lay tensors out differently from eager's kernels (Note [Inputs Set To Computed Tensors])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import pair

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
    # relative to the regenerated value (Note [Offsets After A Write]); the input set_() to one ended at offset 0.
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
    # metadata when the view was taken (Note [Views Between In-Place View Ops]); regenerated, the output shared no
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
