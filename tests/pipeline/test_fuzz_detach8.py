"""Fuzz follow-ups (seed 40000): values that require grad written into tensors that do not (a tensor passed twice,
a detach() returned), expanded subclass inputs written through another input, and the stale-view and
gained-family-member refusals (kept)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf
from tests.pipeline.fuzz_helpers import leaf as _leaf

T = torch.Tensor

_STALE_RULE = "a view taken with grad enabled is used with grad after the program changed the layout"
_FAMILY_RULE = "share storage and do not require grad; a write with grad makes one of them require grad"


def test_stale_view_use_reaching_an_output_is_refused(compile_fn: CompileFn | None) -> None:
    # the same use as above, returned (or computed on, or written into an input), stays refused
    def returned(x0: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        return (t0.view((1, 1, 2)),)

    def computed_on(x0: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        t1 = t0.view((1, 1, 2))
        return (t1 * 2,)

    def written(x0: T, x1: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        t1 = t0.mul(2)
        x1.copy_(t1.sum())
        return ()

    def set_onto(x0: T, x1: T) -> object:
        t0 = x0.select(0, -2)
        x0.t_()
        t1 = t0.mul(2)
        set_to(x1, t1)
        return ()

    with torch.enable_grad():
        for make_inputs in (lambda: (pair_nonleaf(2, 2),), lambda: (nonleaf(2, 2),)):
            assert_refused(returned, make_inputs, compile_fn, _STALE_RULE)
            assert_refused(computed_on, make_inputs, compile_fn, _STALE_RULE)
        assert_refused(written, lambda: (nonleaf(2, 2), nonleaf()), compile_fn, _STALE_RULE)
        assert_refused(set_onto, lambda: (nonleaf(2, 2), nonleaf(2)), compile_fn, _STALE_RULE)


def test_stale_view_write_into_its_input_is_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #5591 (shrunk): the use writes x0 through the view; x0 is an input, so it is reached
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(-1)
        x0.unsqueeze_(-1)
        t0.fill_(-1.0)
        return ()

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(),), compile_fn, _STALE_RULE)


def test_family_member_use_reaching_an_output_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x1.copy_(x0)
        return (x2.unsqueeze(0) * 2,)

    def make_inputs() -> tuple[object, ...]:
        b1 = pair(2)
        return (nonleaf(), b1, b1.select(0, -1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, _FAMILY_RULE)


_ALIASED_GAIN_RULE = "does not require grad, shares storage with another input, and the program writes a value"


def test_input_passed_twice_gains_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #1161, #6072 (shrunk): x0 and x2 are one tensor that does not require grad; a write of a value
    # that requires grad gives it eager's history (Note [Inputs That Gain Grad In Training])
    def written(x0: T, x1: T, x2: T) -> object:
        x2.add_(x1)
        return ()

    def returned(x0: T, x1: T, x2: T) -> object:
        x0.add_(x1)
        return (x2, x0 * 2)

    def through_view(x0: T, x1: T, x2: T) -> object:
        x2[0].mul_(x1)
        with torch.no_grad():
            x0[2].mul_(2.0)
        return (x0[1], x2)

    def make(second: T) -> tuple[object, ...]:
        b0 = torch.randn((4, 4))
        return (b0, second, b0)

    with torch.enable_grad():
        for f in (written, returned, through_view):
            assert_matches_eager(f, lambda: make(nonleaf(4)), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: make(torch.randn((4,), requires_grad=True)), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: make(pair_nonleaf()), compile_fn=compile_fn)


def test_aliased_inputs_gaining_grad_stay_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #6072: x2 a detach() alias of x0 (eager: only x0 gains grad; the trace's members all would);
    # #1161: one tensor passed twice whose layout the program changes (supported since Note [One Tensor Passed Several
    # Times])
    def written(x0: T, x1: T, x2: T) -> object:
        x0.add_(x1)
        return (x2 * 2, x0)

    def relaid(x0: T, x1: T, x2: T) -> object:
        x0.t_()
        x2.add_(x1)
        return (x2,)

    def detached() -> tuple[object, ...]:
        b0 = torch.randn((3, 3))
        return (b0, nonleaf(3), b0.detach())

    def viewed() -> tuple[object, ...]:
        b0 = torch.randn((3, 3))
        return (b0, nonleaf(3), b0.view(3, 3))

    def twice() -> tuple[object, ...]:
        b0 = torch.randn((4, 4))
        return (b0, nonleaf(4), b0)

    with torch.enable_grad():
        assert_refused(written, detached, compile_fn, _ALIASED_GAIN_RULE)
        assert_refused(written, viewed, compile_fn, _ALIASED_GAIN_RULE)
        assert_matches_eager(relaid, twice, compile_fn=compile_fn)


_DETACH_RULE = "is a detach\\(\\) of an input \\(or a view of one\\) that the program then wrote with a value"


def test_detach_of_input_written_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2743, #2811, #5641, seed 11000 #7533: the detach() gets its history from the Function and
    # the input's storage (Note [Detached Outputs Written With Grad])
    def copied(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0)
        return (t0,)

    def multiplied(x0: T) -> object:
        t0 = x0.t()
        t1 = x0.detach()
        t1.mul_(t0)
        return (t1,)

    def added(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        return (t0, x0, t0 * 2)

    def written_twice(x0: T) -> object:
        t0 = x0.detach()
        with torch.no_grad():
            t0.mul_(2.0)
        t0.add_(x0 * 3.0)
        t0.mul_(x0)
        return (t0.sum(), t0, t0)

    with torch.enable_grad():
        assert_matches_eager(multiplied, lambda: (pair_nonleaf(),), compile_fn=compile_fn)  # (t() of 0-d: eager's own)
        assert_matches_eager(multiplied, lambda: (nonleaf(),), compile_fn=compile_fn)
        for f in (copied, added, written_twice):
            assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (nonleaf(3, 3),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (_leaf(3, 3),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (pair_nonleaf(),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (pair(3, 3, requires_grad=True),), compile_fn=compile_fn)


def test_detach_of_view_of_input_written_with_grad(compile_fn: CompileFn | None) -> None:
    def row(x0: T) -> object:
        t0 = x0[0].detach()
        t0.mul_(x0[1])
        return (t0,)

    def transposed(x0: T) -> object:
        t0 = x0.t().detach()
        t0.add_(x0.t())
        return (t0,)

    with torch.enable_grad():
        for f in (row, transposed):
            assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)
            assert_matches_eager(f, lambda: (_leaf(2, 3),), compile_fn=compile_fn)


def test_detach_of_input_written_with_grad_stays_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #8919: a view of the detach() taken after the write has it for `._base`; a no_grad view of it
    # returned beside it; an input that does not require grad; an input the program then transposes in place
    def selected(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        return (t0.select(1, -1),)

    def beside_no_grad_view(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        with torch.no_grad():
            t1 = t0.view(-1)
        return (t0, t1)

    def no_grad_input(x0: T, w: T) -> object:
        t0 = x0.detach()
        t0.add_(w)
        return (t0,)

    def transposed_after(x0: T) -> object:
        t0 = x0.detach()
        t0.add_(x0)
        x0.t_()
        return (t0,)

    with torch.enable_grad():
        assert_refused(selected, lambda: (pair(1, 2, requires_grad=True),), compile_fn, _DETACH_RULE)
        assert_refused(selected, lambda: (nonleaf(1, 2),), compile_fn, _DETACH_RULE)
        assert_refused(beside_no_grad_view, lambda: (nonleaf(2, 3),), compile_fn, _DETACH_RULE)
        assert_refused(no_grad_input, lambda: (torch.randn(2, 3), _leaf(3)), compile_fn, _DETACH_RULE)
        assert_refused(transposed_after, lambda: (nonleaf(2, 3),), compile_fn, _DETACH_RULE)


def test_expanded_subclass_input_written_through_another_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #5481, #9365: the expanded input is written only through the input it views (its base), whose
    # wrapper-level copy_ the epilogue makes; #5857 and seed 6000 #6885's no_grad neighbour: written below autograd
    def base_written(x0: T, x1: T) -> object:
        x1.mul_(3.0)
        return ()

    def first_written(x0: T, x1: T) -> object:
        x0.mul_(2.0)
        return (x1 * 2,)

    def no_grad_fill(x0: T) -> object:
        with torch.no_grad():
            x0.fill_(-1.0)
        return ()

    def no_grad_column(x0: T) -> object:
        with torch.no_grad():
            x0[:, 0:1].zero_()
        return (x0 * 2, x0)

    def expanded_first() -> tuple[object, ...]:
        b0 = pair_nonleaf()
        return (b0.expand((2, 3)), b0)

    def expanded_second() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0, b0.reshape((2, 1, 1)).expand((-1, 1, 2)))

    with torch.enable_grad():
        assert_matches_eager(base_written, expanded_first, compile_fn=compile_fn)
        assert_matches_eager(first_written, expanded_second, compile_fn=compile_fn)
        assert_matches_eager(
            no_grad_fill,
            lambda: (pair(3, 4, 3, requires_grad=True).as_strided((1, 3), (2, 0), 0),),
            compile_fn=compile_fn,
        )
        assert_matches_eager(no_grad_column, lambda: (pair_nonleaf(3, 1, 1).expand((3, 2, 1)),), compile_fn=compile_fn)
