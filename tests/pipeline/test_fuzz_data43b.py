"""Fuzz regressions (helper data43b, dev seed 43000): `.data =` with expanded or transposed values.

Newly supported programs get a parity test; the refusals get a test naming the rule. With `--identity-compile`
(eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, leaf, pair, refused_with_grad

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
    # (Note [Histories Over Aliased Storage])
    for f in (_unbind_then_transposed, _select_then_flattened):
        refused_with_grad(
            f, lambda: (pair(4, 4, requires_grad=True),), compile_fn, "taken before the program assigned its `.data`"
        )


def test_plain_view_with_history_before_a_transposing_assignment_is_refused(compile_fn: CompileFn | None) -> None:
    # same size, other strides: the regenerated view read the gradient in the new layout (args[0].grad values
    # differed from eager's)
    refused_with_grad(
        _select_then_transposed, lambda: (leaf(4, 4),), compile_fn, "taken before the program assigned its `.data`"
    )
