"""Fuzz follow-up (seed 15000 #537): a view op's replay by autograd that fails below the ops the program calls
(Note [Stale View Functions])."""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, pair, refused_with_grad

T = torch.Tensor


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
