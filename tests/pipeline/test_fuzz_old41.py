"""Fuzz regressions (helper old41): wrong results left from seed 41000 and the strict xfails of earlier rounds.

- `t0 = x.sin(); t0.data = x; return t0.reshape(())` with grad: the view came back without history (seed 41000
  #3773); refused where no output returns t0 (Note [Outputs Assigned .data With History]).
- `t1 = t0.transpose(1, 0); t0.data = x1; return t1` with t0 an intermediate PairTensor: eager's `t1._base` takes
  x1's metadata, ours kept t0's (seed 41000 #4420); the rebuilt root now takes them (inference), refused in
  training where the assignment resizes the root (Note [Views Of A Root Whose .data Was Assigned]).

Newly supported programs get a parity test; refusals get a test naming the rule. With `--identity-compile` (eager
against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf, refused_with_grad

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# A view of a tensor with history whose `.data` the program assigned (Note [Outputs Assigned .data With History])


def _view_of_assigned(x0: T) -> tuple[T]:
    # seed 41000 #3773, shrunk
    t0 = x0.sin()
    t0.data = x0
    t1 = t0.reshape(())
    return (t1,)


def _transpose_of_assigned(x0: T) -> tuple[T]:
    t0 = x0.sin()
    t0.data = x0
    return (t0.t(),)


def _view_of_assigned_and_it(x0: T) -> tuple[T, T]:
    t0 = x0.sin()
    t0.data = x0
    return (t0.view(-1), t0)


_HISTORY_RULE = "view of a tensor with autograd history whose `.data` the program assigned"


def test_seed41000_3773_view_of_assigned_with_history_is_refused(compile_fn: CompileFn | None) -> None:
    # was: output[0] requires_grad False vs eager True, and no gradient for x0
    refused_with_grad(_view_of_assigned, lambda: (nonleaf(),), compile_fn, _HISTORY_RULE)
    refused_with_grad(_transpose_of_assigned, lambda: (nonleaf(2, 3),), compile_fn, _HISTORY_RULE)
    refused_with_grad(
        _transpose_of_assigned, lambda: (torch.randn(2, 3, requires_grad=True),), compile_fn, _HISTORY_RULE
    )


def test_view_of_assigned_with_history_inference_and_returned(compile_fn: CompileFn | None) -> None:
    # no history under no_grad: rebuilt as a view of x0's storage; with t0 returned, replayed from it
    check_no_grad(_view_of_assigned, lambda: (nonleaf(),), compile_fn)
    check_no_grad(_transpose_of_assigned, lambda: (nonleaf(2, 3),), compile_fn)
    check_with_grad(_view_of_assigned_and_it, lambda: (nonleaf(2, 3),), compile_fn)
    check_with_grad(_transpose_of_assigned, lambda: (pair_nonleaf(2, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A view of an intermediate subclass whose `.data` the program assigned after (Note [Views Of A Root Whose .data Was
# Assigned])


def _view_then_assigned(x0: T, x1: T) -> tuple[T]:
    # seed 41000 #4420, shrunk
    t0 = x0.sin()
    t1 = t0.transpose(1, 0)
    t0.data = x1
    return (t1,)


def _two_views_then_assigned(x0: T, x1: T) -> tuple[T, T]:
    t0 = x0.sin()
    t1 = t0.transpose(1, 0)
    t2 = t0.view(-1)
    t0.data = x1
    return (t1, t2)


def test_seed41000_4420_base_takes_assigned_metadata(compile_fn: CompileFn | None) -> None:
    # was: output[0]._base shape (3, 3) vs eager ()
    check_no_grad(_view_then_assigned, lambda: (pair(3, 3), pair()), compile_fn)
    check_no_grad(_two_views_then_assigned, lambda: (pair(3, 3), pair()), compile_fn)
    check_no_grad(_two_views_then_assigned, lambda: (pair(3, 3), pair(3, 1)), compile_fn)
    # grad enabled, nothing requires grad; and an assignment of the same size in training
    check_with_grad(_view_then_assigned, lambda: (pair(3, 3), pair()), compile_fn)
    check_with_grad(_view_then_assigned, lambda: (pair_nonleaf(3, 3), pair_nonleaf(3, 3).t()), compile_fn)


def test_seed41000_4420_resized_root_in_training_is_refused(compile_fn: CompileFn | None) -> None:
    # the compiled backward raised "invalid gradient ... got [] but expected shape compatible with [3, 3]"
    rule = "whose `.data` the program then assigned a tensor of another size"
    refused_with_grad(_view_then_assigned, lambda: (pair_nonleaf(3, 3), pair_nonleaf()), compile_fn, rule)
    refused_with_grad(_two_views_then_assigned, lambda: (pair(3, 3, requires_grad=True), pair(3, 1)), compile_fn, rule)


# ---------------------------------------------------------------------------------------------------------------
# Plain views whose history autograd rebuilds from a view function that misses their own in-place view op (Note
# [Stale View Functions]): wrong leaf gradients, now refused for any plain view, not only members of an alias group


def _transpose_view_then_write_base(x: T) -> tuple[T]:
    x0 = x.clone()
    t0 = x0[0]
    t0.t_()
    x0.mul_(2)
    return (t0 * 1,)


def _transpose_view_then_write_its_row(x: T) -> tuple[T]:
    x0 = x.clone()
    t0 = x0[0]
    t0.t_()
    t0[1].mul_(2)
    return (x0,)


def _transpose_view_twice_then_write_base(x: T) -> tuple[T]:
    x0 = x.clone()
    t0 = x0[0]
    t0.t_()
    t0.t_()
    x0.mul_(2)
    return (t0 * 1,)


_STALE = r"the program changes the layout .* of a view .*\(Note \[Stale View Functions\]"


def test_stale_plain_views_in_training_are_refused(compile_fn: CompileFn | None) -> None:
    # was: the leaf's gradient went to the untransposed elements (torch.compile's aot_eager is wrong the same way)
    for fn in (_transpose_view_then_write_base, _transpose_view_then_write_its_row):
        refused_with_grad(fn, lambda: (nonleaf(3, 3, 3),), compile_fn, _STALE)
        refused_with_grad(fn, lambda: (torch.randn(3, 3, 3, requires_grad=True),), compile_fn, _STALE)


def test_plain_views_changed_in_place_still_supported(compile_fn: CompileFn | None) -> None:
    # the layout back as the view function makes it; no grad; a subclass (eager replays view functions too)
    check_with_grad(_transpose_view_twice_then_write_base, lambda: (nonleaf(3, 3, 3),), compile_fn)
    check_no_grad(_transpose_view_then_write_base, lambda: (torch.randn(3, 3, 3),), compile_fn)
    check_with_grad(_transpose_view_then_write_base, lambda: (pair_nonleaf(3, 3, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Outputs viewing one intermediate before and after in-place view ops on it share it (Note [Views Across In-Place
# View Ops On An Intermediate])


def _view_then_base_unsqueezed(x: T) -> tuple[T, T]:
    t0 = x.detach()
    t1 = t0.view(-1)
    t0.unsqueeze_(0)
    return t1, t0


def _after_first(x: T) -> tuple[T, T]:
    t0 = x.detach()
    a = t0.view(-1)
    t0.t_()
    return t0.unsqueeze(0), a


def _three_states(x: T) -> tuple[T, T, T]:
    t0 = x.detach()
    a = t0.view(-1)
    t0.t_()
    b = t0.unsqueeze(0)
    t0.unsqueeze_(0)
    return a, b, t0


def _intermediate_then_unsqueezed(x: T) -> tuple[T, T]:
    t0 = x.sin()
    t1 = t0.view(-1)
    t0.unsqueeze_(0)
    return t1, t0


def test_views_across_in_place_view_ops_share_the_intermediate(compile_fn: CompileFn | None) -> None:
    # was: aliasing: output[0]._base: a view of output[0]._base vs eager a view of output[1]
    makers = (lambda: (torch.randn(2, 3),), lambda: (nonleaf(2, 3),), lambda: (pair(2, 3),))
    for fn in (_view_then_base_unsqueezed, _after_first, _three_states):
        for make in makers:
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)
    # the task's shape: t0 an intermediate (its base returned beside a view taken before the in-place view op)
    for make in (*makers, lambda: (pair_nonleaf(2, 3),)):
        check_no_grad(_intermediate_then_unsqueezed, make, compile_fn)
    for make in makers:
        check_with_grad(_intermediate_then_unsqueezed, make, compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Subclass views whose eager history is rebuilt without their own in-place view op (Note [Stale View Functions])


def _t_then_other_view_unsqueezed(x0: T) -> tuple[T]:
    t0 = x0[0]
    t0.t_()
    x0[1].unsqueeze_(0)
    return (t0,)


def _t_then_written(x0: T) -> tuple[T]:
    t0 = x0[0]
    t0.t_()
    x0.mul_(2)
    return (t0,)


def _t_then_returned_view_unsqueezed(x0: T) -> tuple[T, T]:
    t0 = x0[0]
    t0.t_()
    t1 = t0[1]
    t1.unsqueeze_(0)
    return (t0, t1)


def test_subclass_view_rebuilt_without_its_t_is_refused(compile_fn: CompileFn | None) -> None:
    # was: leaf 0 behind args[0].grad.a: values differ (eager's gradient transposed)
    rule = r"is a view of a tensor subclass that an in-place view op .* of its own changed"
    refused_with_grad(_t_then_other_view_unsqueezed, lambda: (pair_nonleaf(3, 3, 3),), compile_fn, rule)
    # plain: eager rebuilds by as_strided(), as the replay does
    check_with_grad(_t_then_other_view_unsqueezed, lambda: (nonleaf(3, 3, 3),), compile_fn)
    # a data write after it, and the later op on a returned view, are repeated at run time
    check_with_grad(_t_then_written, lambda: (pair_nonleaf(3, 3, 3),), compile_fn)
    check_with_grad(_t_then_returned_view_unsqueezed, lambda: (pair_nonleaf(3, 3, 3),), compile_fn)
