"""Fuzz regressions: outputs set_() under grad whose `._base` is eager's (Note [Bases Of Outputs set_() Under Grad]).

The six programs once pinned as known `._base` divergences live on as parity tests in test_fuzz_setgrad.py and
test_fuzz_setdata.py; these are variants of them (other shapes, subclasses, several outputs on one base). With
`--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf, twice
from tests.pipeline.fuzz_helpers import leaf as _leaf

T = torch.Tensor


def _check(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A view of an intermediate, then set_() under grad: eager's `._base` is the intermediate as it ends


def test_view_of_intermediate_written_then_set(compile_fn: CompileFn | None) -> None:
    # the base's values are the fill's, which only the graph knows
    def f(x: T, y: T) -> object:
        r = x * 2
        t = r.view(-1)
        r.fill_(1.5)
        set_to(t, y)
        return (t,)

    _check(f, lambda: (_leaf(3, 2), _leaf(6)), compile_fn)


def test_view_of_intermediate_set_to_another_intermediate(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        r = x.exp()
        t = r[1]
        set_to(t, x.cos())
        return (t,)

    _check(f, lambda: (_leaf(2, 3),), compile_fn)


def test_view_of_clone_set_to_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2259's shape: the output stays on the clone's storage, eager's `._base` the clone
    def f(x: T) -> object:
        c = x.clone()
        t = c.t()
        set_to(t, t)
        return (t,)

    _check(f, lambda: (nonleaf(4, 2),), compile_fn)


def test_view_of_intermediate_set_then_base_unsqueezed(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x * 3
        t = r.view(-1)
        set_to(t, y)
        r.unsqueeze_(0)
        return (t,)

    _check(f, lambda: (_leaf(2, 3), _leaf(4)), compile_fn)


def test_set_view_beside_other_views_of_its_base(compile_fn: CompileFn | None) -> None:
    # eager's outputs share one `._base` object: so do ours
    def f(x: T, y: T) -> object:
        r = x * 3
        t = r.view(-1)
        u = r[0]
        set_to(t, y)
        return (u, t, r.t())

    _check(f, lambda: (_leaf(2, 3), _leaf(4)), compile_fn)


def test_subclass_view_of_intermediate_set_under_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x * 2
        t = r.view(-1)
        set_to(t, y[1:])
        return (t,)

    with torch.enable_grad():
        assert_matches_eager(
            f, lambda: (pair(3, 2, requires_grad=True), pair(6, requires_grad=True)), compile_fn=compile_fn
        )


def test_subclass_view_chain_of_nonleaf_set_under_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x.sin()
        t = r.t().unsqueeze(0)
        set_to(t, y)
        return (t, y * 2)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 4), pair_nonleaf(3)), compile_fn=compile_fn)


def test_subclass_set_view_beside_another_view_of_its_base(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x * 3
        t = r.view(-1)
        set_to(t, y)
        return (t, r.t())

    _check(f, lambda: (pair(2, 3, requires_grad=True), pair(4, requires_grad=True)), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# set_() under grad, then a view: eager's `._base` is the tensor set_(), on the storage the output lives on


def test_view_after_set_to_another_intermediate(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t0 = x * 2
        set_to(t0, x * 3)
        return (t0.t(),)

    _check(f, lambda: (_leaf(2, 3),), compile_fn)


def test_view_after_set_to_a_view_of_an_input(compile_fn: CompileFn | None) -> None:
    # eager's `._base` has the input row's size, not the sum's
    def f(x: T) -> object:
        t0 = x.sum(0)
        set_to(t0, x[1])
        return (t0[1:],)

    _check(f, lambda: (_leaf(4, 3),), compile_fn)


def test_subclass_view_chain_after_set_to_input(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t0 = x * 2
        set_to(t0, x)
        return (t0.t()[1:],)

    _check(f, lambda: (pair(2, 3, requires_grad=True),), compile_fn)


def test_subclass_view_after_set_to_a_view_of_a_nonleaf(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t0 = x.sum(0)
        set_to(t0, x[1])
        return (t0[1:],)

    _check(f, lambda: (pair_nonleaf(4, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Computed with grad, then set_() onto an input under no_grad (Note [Outputs That An Input Was set_() To])


def test_no_grad_set_onto_input_passedtwice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #178: eager's t0 keeps AddBackward0 over x1's storage
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(x1)
        with torch.no_grad():
            set_to(t0, x1)
        return (t0,)

    _check(f, twice(_leaf), compile_fn)


def test_no_grad_set_onto_input_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.sin()
        with torch.no_grad():
            set_to(t0, x1)
        t0.mul_(2.0)
        return (t0, x0 * 2)

    _check(f, lambda: (_leaf(2, 3), torch.randn(2, 3)), compile_fn)


def test_no_grad_sets_of_two_outputs_onto_one_nonleaf(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0 * x1
        with torch.no_grad():
            set_to(t0, x1)
        t1 = x0.cos()
        with torch.no_grad():
            set_to(t1, x1)
        return (t0, t1, x1)

    _check(f, lambda: (nonleaf(2, 3), nonleaf(2, 3)), compile_fn)


def test_no_grad_set_onto_input_of_another_size_refused(compile_fn: CompileFn | None) -> None:
    # eager's backward raises (MulBackward0 gets a gradient of the new size): the joint cannot trace that
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(t0, x1)
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (_leaf(3), torch.randn(2, 2)), compile_fn, "set_\\(\\) this tensor under no_grad after computing"
        )


def test_no_grad_set_onto_part_of_input_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(t0, x1[1])
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (_leaf(3), torch.randn(2, 3)), compile_fn, "set_\\(\\) this tensor under no_grad after computing"
        )


# ---------------------------------------------------------------------------------------------------------------
# A view taken with grad, then set_() under no_grad (Note [Views Set Under no_grad With History])

_VIEW_SET_RULE = "a view the program took with grad and then set_\\(\\) under no_grad"


def test_view_of_intermediate_set_under_no_grad_onto_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #674 (shrunk): UnsqueezeBackward0 over MulBackward0 on x0's storage, `._base` t0; the backward
    # raises on the changed size in both
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.unsqueeze(-1)
        with torch.no_grad():
            set_to(t1, x0)
        return (t1,)

    _check(f, lambda: (_leaf(),), compile_fn)


def test_view_set_under_no_grad_beside_its_base(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.unsqueeze(-1)
        with torch.no_grad():
            set_to(t1, x0)
        return (t1, t0)

    _check(f, lambda: (_leaf(),), compile_fn)


def test_view_set_under_no_grad_of_the_same_size(compile_fn: CompileFn | None) -> None:
    # the backward runs: gradients through SelectBackward0 and MulBackward0
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        with torch.no_grad():
            set_to(t1, y)
        return (t1,)

    _check(f, lambda: (_leaf(2, 3), _leaf(3)), compile_fn)


def test_view_chain_of_nonleaf_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t0 = x.sin()
        t1 = t0.t()[1]
        with torch.no_grad():
            set_to(t1, y[1:])
        return (t1, y * 2)

    _check(f, lambda: (nonleaf(2, 3), nonleaf(3)), compile_fn)


def test_two_views_one_set_under_no_grad_then_base_written(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        t2 = t0[1]
        with torch.no_grad():
            set_to(t1, x.cos()[1])
        t0.mul_(3.0)
        return (t1, t2)

    _check(f, lambda: (_leaf(2, 3), _leaf(3)), compile_fn)


def test_subclass_view_set_under_no_grad_refused(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        with torch.no_grad():
            set_to(t1, y)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(2, 3, requires_grad=True), pair(3)), compile_fn, _VIEW_SET_RULE)


def test_view_set_under_no_grad_after_its_base_transposed_refused(compile_fn: CompileFn | None) -> None:
    # the chain no longer replays from the base as it ends
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        t0.t_()
        with torch.no_grad():
            set_to(t1, y)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (_leaf(2, 3), torch.randn(3)), compile_fn, _VIEW_SET_RULE)


def test_data_of_view_of_unreturned_intermediate_of_another_size(compile_fn: CompileFn | None) -> None:
    # like fuzz seed 2000 #3412: eager's t1 stays a view of the sum, on x0's first row
    def f(x0: T) -> object:
        t1 = x0.add(3.0)[1:3]
        t1.data = x0[0]
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 4),), compile_fn=compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 4),), compile_fn=compile_fn)


def test_data_of_view_chain_of_unreturned_intermediate(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(2.0).t()[1:3]
        t1.data = x0
        return (t1, x0 + 1)

    _check(f, lambda: (torch.randn(3, 4),), compile_fn)
