"""Fuzz regressions for Note [Strides Of Assigned Tensors]: `.data =` of a wrapper subclass from a tensor whose
strides fake and real kernels may choose differently (size-0 and size-1 dims)."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, pair

T = torch.Tensor


def test_empty_view_of_input_assigned(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 3000, program 1635 (refused before): a view of an input takes the view ops' strides, which the fake
    # tensors give exactly, empty or not.
    def f(x0: T) -> object:
        x0.data = x0.expand((2, 0, 4))
        return ()

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2, 1, 4),), compile_fn=compile_fn)


def test_empty_slice_of_input_assigned_and_viewed(compile_fn: CompileFn | None) -> None:
    # Fuzz seeds 39 #6195 / 31 #4452 (refused before; was test_subclass_data_assigned_with_kernel_strides_refused):
    # the empty slice is a view of the input.
    def f(x0: T) -> object:
        t0 = x0[0:0:2]
        x0.data = t0
        return (t0.view((0,)),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 2),), compile_fn=compile_fn)


@pytest.mark.parametrize("program", ["mul", "transposed_mul", "view", "expand"])
def test_computed_size_one_assigned_to_input(compile_fn: CompileFn | None, program: str) -> None:
    # Shrunk from fuzz seed 3000 #3232, #2908, seed 5000 #2968 (the whole #2968 stays refused: a later write to the
    # leaf's storage), seeds 39 #6195 / 31 #4452 (refused before): the wrapper takes the real strides of the assigned tensor's leaf, which the graph returns as a stride probe.
    # "transposed_mul": fake strides (1, 1), eager's (1, 2) (the refusal's own example).
    def f(x0: T, x1: T) -> object:
        if program == "mul":
            x0.data = x0.mul(-1.0)
        elif program == "transposed_mul":
            x0.t_()
            x0.data = x0.mul(0.5)
        elif program == "view":
            x0.data = x1[:, :1].sin().view((1, 1, 1))
        else:
            x0.data = x1.t().mul(-1.0).expand((4, 1))
        return ()

    shape = (1, 2) if program == "transposed_mul" else (1, 1, 3) if program == "mul" else (1, 4)
    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(*shape), pair(1, 4)), compile_fn=compile_fn)


def test_computed_size_one_assigned_to_output(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 5000, program 29 (refused before): an output's wrapper takes the probe's real strides.
    def f(x0: T) -> object:
        t1 = x0.transpose(0, 1)
        t1.data = x0.select(1, -2).sin()
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(3, 2, 1),), compile_fn=compile_fn)


def test_computed_size_one_written_after_refused(compile_fn: CompileFn | None) -> None:
    # The graph would return the written value, made by the functional op that replaced the write, whose strides
    # need not be the leaf's: refused (conservatively; add_ happens to keep them).
    def f(x0: T) -> object:
        t0 = x0.t().mul(0.5)
        t0.add_(1.0)
        x0.data = t0
        return ()

    with torch.no_grad():
        assert_refused(f, lambda: (pair(1, 2),), compile_fn, "its strides come from the kernels")


def test_computed_size_one_in_training(compile_fn: CompileFn | None) -> None:
    # Training (refused before): the autograd.Function returns the stride probes after its symbolic ints.
    def f(x0: T, x1: T) -> object:
        x1.data = x0.t().mul(0.5)
        return (x0 * 2,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1, 2, requires_grad=True), pair(3)), compile_fn=compile_fn)
