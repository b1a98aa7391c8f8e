"""Fuzz regression: a view of a multi-output view input, set_() under no_grad (Note [Views Of Intermediates Written
After]); the program is a shrunk fuzz program (seed and index in the test's name), with variants."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from subclasses.pair import PairTensor
from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_with_grad

T = torch.Tensor


def _unbind_input(shape: tuple[int, ...], *, wrapped: bool, split: bool) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn(shape)
            base = PairTensor.from_tensor(b0, requires_grad=True) if wrapped else b0.requires_grad_()
            return (torch.split(base, 1, 0)[0].squeeze(0) if split else base.unbind(0)[0],)

    return make_inputs


def test_seed15000_6332_view_of_unbind_input_set_under_no_grad(compile_fn: CompileFn | None) -> None:
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
