"""Fuzz follow-ups (seed 17000, PairTensor inputs): views of an intermediate that an input was set_() onto share one
rebuilt root (Note [Intermediates set_() Onto Inputs Are One Root]); a detach() of an intermediate that an in-place
view op changed since shares its wrapper storage, wherever the detach() is in its chain (Note [Views Between In-Place
View Ops])."""

from __future__ import annotations

from collections.abc import Callable

import torch

from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import (
    assert_refused,
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)

T = torch.Tensor
Make = Callable[[], tuple[object, ...]]


def _one(make: Callable[[], T]) -> Make:
    def make_inputs() -> tuple[object, ...]:
        return (make(),)

    return make_inputs


def _makers(*shape: int) -> list[Make]:
    """Plain and PairTensor inputs, none requiring grad."""
    return [_one(lambda: torch.randn(shape)), _one(lambda: pair(*shape))]


def _grad_makers(*shape: int) -> list[Make]:
    """Inputs that require grad: leaves and non-leaves, plain and PairTensor."""
    return [
        _one(lambda: leaf(*shape)),
        _one(lambda: nonleaf(*shape)),
        _one(lambda: pair(*shape, requires_grad=True)),
        _one(lambda: pair_nonleaf(*shape)),
    ]


def test_seed17000_program4540(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #4540 (shrunk): t1 and t2 are eager views of the one intermediate t0, whose leaves x0 now
    # holds; each was rebuilt from a wrapper of its own, so t2._base was not t1._base
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        t2 = t0.view((1, 1, 1))
        return (t1, t2)

    with torch.no_grad():
        assert_matches_eager(f, _one(pair), compile_fn=compile_fn)


def test_views_of_an_intermediate_an_input_was_set_onto(compile_fn: CompileFn | None) -> None:
    # variants of seed 17000 #4540: n-d, views of views, views taken before the set_(), the intermediate itself and a
    # detach() of it returned too, an in-place write or view op on it between the views, the input returned
    def transposed(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.t(), t0[0])

    def view_of_view(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        return (t1, t1.view(-1))

    def before_set(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.unsqueeze(-1)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t1, t0.view(-1))

    def with_itself(x0: T) -> object:
        t0 = x0.mul(x0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), t0.view(-1), t0)

    def with_detach(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), t0.detach(), t0.view(-1))

    def with_input(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), x0.view(-1), t0.view(-1))

    def written_between(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        t0.mul_(2.0)
        return (t1, t0.view(-1))

    def changed_between(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        t0.unsqueeze_(0)
        return (t1, t0.view(-1))

    for fn in (transposed, view_of_view, before_set, with_itself, with_detach, with_input, written_between):
        for make in _makers(2, 3):
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)
        check_no_grad(fn, _one(lambda: pair_nonleaf(2, 3)), compile_fn)
    for fn in (view_of_view, before_set, with_itself, changed_between):
        for make in _makers():
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)


def test_views_of_an_intermediate_set_onto_an_input_in_training(compile_fn: CompileFn | None) -> None:
    # seed 17000 #4540 with an input that requires grad, grad enabled: x0 is set_() to a tensor that requires grad
    # and the outputs share its storage; refused, as before, for plain and subclass inputs alike
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), t0.view(-1))

    for make in (_one(lambda: nonleaf(2, 3)), _one(lambda: pair_nonleaf(2, 3)), _one(pair_nonleaf)):
        refused_with_grad(f, make, compile_fn, "set_\\(\\) to a new tensor that requires grad")
        check_no_grad(f, make, compile_fn)


def test_seed17000_program7333(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #7333 (shrunk): t2 = t1.detach() shares t1's wrapper storage in eager; t1.unsqueeze_() then
    # changed t1, so t2's chain could not replay from t1 and t2 came back with a wrapper storage of its own
    def f(x0: T) -> object:
        t0 = x0.expand((1,))
        t1 = t0.mul(x0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    with torch.no_grad():
        assert_matches_eager(f, _one(pair), compile_fn=compile_fn)


def test_detach_of_an_intermediate_changed_in_place_since(compile_fn: CompileFn | None) -> None:
    # variants of seed 17000 #7333: t_/transpose_/squeeze_/as_strided_ on the intermediate after the detach, the
    # outputs in either order, a view of the detach, the detach written or changed itself, two detaches at two
    # layouts, the intermediate returned only through views (an intermediate root), the input returned too
    def t_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.t_()
        return (t2, t1)

    def transpose_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.transpose_(0, -1)
        return (t1, t2)

    def squeeze_(x0: T) -> object:
        t1 = x0.mul(2.0).unsqueeze(0).clone()
        t2 = t1.detach()
        t1.squeeze_()
        return (t2, t1)

    def as_strided_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.as_strided_((1,), (1,))
        return (t2, t1)

    def view_of_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t3 = t1.detach().view(-1)
        t1.unsqueeze_(0)
        return (t3, t1)

    def detach_written(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        t2.mul_(3.0)
        return (t2, t1)

    def detach_changed(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t2.t_()
        t1.unsqueeze_(0)
        return (t2, t1)

    def two_detaches(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        t3 = t1.detach()
        t1.t_()
        return (t2, t3, t1)

    def through_views(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        return (t2, t1.view(-1), t1[0])

    def with_input(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.t_()
        return (t2, t1, x0)

    fns = (t_, transpose_, squeeze_, as_strided_, view_of_detach, detach_written, detach_changed)
    for fn in (*fns, two_detaches, through_views, with_input):
        for shape in ((), (2, 3)):
            if fn in (as_strided_, two_detaches) and shape:
                continue  # (not eager-legal at 2-d)
            for make in _makers(*shape):
                check_no_grad(fn, make, compile_fn)
                check_with_grad(fn, make, compile_fn)
            for make in _grad_makers(*shape):
                check_no_grad(fn, make, compile_fn)
                check_with_grad(fn, make, compile_fn)


def test_aliases_of_an_intermediate_changed_since_in_training(compile_fn: CompileFn | None) -> None:
    # beside seed 17000 #7333: a view_as() (a view, unlike detach()) of a subclass intermediate that requires grad,
    # with the intermediate returned too, is refused in training as before; without grad it matches eager
    def f(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.view_as(t1)
        t1.unsqueeze_(0)
        return (t2, t1)

    for make in (_one(lambda: pair(2, 3, requires_grad=True)), _one(pair_nonleaf)):
        refused_with_grad(f, make, compile_fn, "view of an intermediate tensor subclass that requires grad")
        check_no_grad(f, make, compile_fn)


def _mixed(requires_grad: bool = False) -> T:
    """A PairTensor whose `b` is laid out unlike the wrapper (transposed), so that its as_strided() does not give
    its inner tensors their own metadata."""
    return PairTensor(torch.randn(2, 3), torch.randn(3, 2).t(), requires_grad=requires_grad)


def test_detach_anywhere_in_the_chain_of_an_intermediate_changed_since(compile_fn: CompileFn | None) -> None:
    # beside seed 17000 #7333: the detach() comes after views of the intermediate (`t1.view(-1).detach()`), or twice
    def view_then_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.view(-1).detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    def t_then_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.t().detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    def detach_twice(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach().detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    def changed_before_and_after(x0: T) -> object:
        t1 = x0.mul(2.0)
        t1.unsqueeze_(0)
        t2 = t1.detach()
        t1.squeeze_(0)
        return (t1.view(-1), t2)

    for fn in (view_then_detach, t_then_detach, detach_twice, changed_before_and_after):
        for shape in ((), (2, 3)):
            for make in (*_makers(*shape), *_grad_makers(*shape)):
                check_no_grad(fn, make, compile_fn)
                check_with_grad(fn, make, compile_fn)


def test_detach_of_a_subclass_laid_out_unlike_its_inner_tensors(compile_fn: CompileFn | None) -> None:
    # seed 17000 #7333 with a PairTensor whose `b` is transposed: its as_strided() would give `b` the wrapper's
    # strides, so the detach is set_() to a wrapper of its own leaves instead; a view of it is refused
    def t_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.t_()
        return (t2, t1)

    def t_then_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.t().detach()
        t1.unsqueeze_(0)
        return (t1, t2)

    def detach_written(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        t2.mul_(3.0)
        return (t2, t1.squeeze(0))

    def detach_changed(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t2.t_()
        t1.unsqueeze_(0)
        return (t2, t1)

    def view_of_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach().t()
        t1.t_()
        return (t1, t2)

    for fn in (t_, t_then_detach, detach_written, detach_changed):
        for make in (_one(_mixed), _one(lambda: _mixed(True))):
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)
    rule = "a view of a detach\\(\\) of a PairTensor that an in-place view op"
    with torch.no_grad():
        assert_refused(view_of_detach, _one(_mixed), compile_fn, rule)
    refused_with_grad(view_of_detach, _one(lambda: _mixed(True)), compile_fn, rule)
