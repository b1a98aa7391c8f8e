"""Training programs the pipeline once refused, through the parity oracle: outputs aliasing one intermediate
(Note [Output Regeneration]), subclass inputs whose metadata and data change in place (Note [Inputs
Written In Training]), and aliased inputs one of which changes its metadata (Note [Aliased Inputs In Training]);
plain and PairTensor inputs, eager and (a sample) inductor."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import Case, backend_params, run_case

T = torch.Tensor
Make = Callable[[], tuple[object, ...]]


def plain(*shape: int) -> Make:
    return lambda: (torch.randn(shape, requires_grad=True).clone(),)


def pair(*shape: int) -> Make:
    return lambda: (PairTensor.from_tensor(torch.randn(shape), requires_grad=True) * 1.0,)


def pair_leaf(*shape: int) -> Make:
    return lambda: (PairTensor.from_tensor(torch.randn(shape), requires_grad=True),)


# Several outputs aliasing one intermediate


def clone_viewed_two_ways(x: T) -> object:
    y = x.clone()
    return y.view(-1), y.t()


def unbind_to_list(x: T) -> object:
    return list((x * 2).unbind(0))


def view_transpose_and_base(x: T) -> object:
    y = x.clone()
    return y.view(-1), y.t(), y


def two_intermediates_interleaved(x: T) -> object:
    y, z = x * 2, x + 1
    return y.t(), z.view(-1), y.view(-1), z.unsqueeze(0)


def split_of_mutated_intermediate(x: T) -> object:
    y = x.clone()
    y.mul_(2)
    a, b = torch.split(y, 1, 0)
    return a, b.t()


def inner_and_two_views(x: T) -> object:
    y = x.clone()
    assert isinstance(y, PairTensor)
    return y.a, y.t(), y.view(-1)


def mul_first(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, tuple | list) and isinstance(out[0], torch.Tensor)
    out[0].mul_(2)


# A subclass input whose metadata and data change in place


def t_then_mul(p: T) -> object:
    p.t_()
    p.mul_(2)
    return p.sum()


def mul_then_t(p: T) -> object:
    p.mul_(2)
    p.t_()
    return p * 3


def unsqueeze_then_add(p: T) -> object:
    p.unsqueeze_(0)
    p.add_(1)
    return p.sin()


def as_strided_then_mul(p: T) -> object:
    p.as_strided_((2,), (1,), 1)
    p.mul_(3)
    return p * 2


def transpose_unsqueeze_mul_returned(p: T) -> object:
    p.transpose_(0, 1)
    p.unsqueeze_(0)
    p.mul_(2)
    return p.sum(), p


def t_around_mul(p: T) -> object:
    p.t_()
    p.mul_(2)
    p.t_()
    return p + 1


# Aliased inputs, one of which changes its metadata


def two_views(make: Callable[[], T]) -> Make:
    def inputs() -> tuple[object, ...]:
        x = make()
        return x.view(2, 2), x.view(2, 2)

    return inputs


def rows_of_one() -> tuple[object, ...]:
    x = torch.randn(4, 2, requires_grad=True).clone()
    return x[0], x[1:3]


def t_one_return_it(a: T, b: T) -> object:
    a.t_()
    return a * b.t(), a


def unsqueeze_one_sum(a: T, b: T) -> object:
    a.unsqueeze_(0)
    return (a * b).sum(), a


def t_one_matmul(a: T, b: T) -> object:
    a.t_()
    return a @ b, b.sin()


def unsqueeze_other(a: T, b: T) -> object:
    b.unsqueeze_(1)
    return a + b, b * 2


def as_strided_one(a: T, b: T) -> object:
    a.as_strided_((2,), (1,), 1)
    return a * b[0], a


def _grad_base() -> T:
    return torch.randn(2, 2, requires_grad=True).clone()


CASES = [
    Case(name="clone_viewed_two_ways", fn=clone_viewed_two_ways, make_inputs=plain(2, 3), after_call=mul_first),
    Case(name="pair_clone_viewed_two_ways", fn=clone_viewed_two_ways, make_inputs=pair(2, 3), inductor=True),
    Case(name="pair_leaf_clone_viewed_two_ways", fn=clone_viewed_two_ways, make_inputs=pair_leaf(2, 3)),
    Case(name="unbind_to_list", fn=unbind_to_list, make_inputs=plain(3, 2)),
    Case(name="pair_unbind_to_list", fn=unbind_to_list, make_inputs=pair(3, 2), after_call=mul_first),
    Case(name="pair_view_transpose_and_base", fn=view_transpose_and_base, make_inputs=pair(2, 3), inductor=True),
    Case(name="pair_two_intermediates_interleaved", fn=two_intermediates_interleaved, make_inputs=pair(2, 3)),
    Case(name="two_intermediates_interleaved", fn=two_intermediates_interleaved, make_inputs=plain(2, 3)),
    Case(name="pair_split_of_mutated_intermediate", fn=split_of_mutated_intermediate, make_inputs=pair(2, 3)),
    Case(name="pair_inner_and_two_views", fn=inner_and_two_views, make_inputs=pair(2, 3), inductor=True),
    Case(name="pair_t_then_mul", fn=t_then_mul, make_inputs=pair(2, 3), inductor=True),
    Case(name="t_then_mul", fn=t_then_mul, make_inputs=plain(2, 3)),
    Case(name="pair_mul_then_t", fn=mul_then_t, make_inputs=pair(2, 3)),
    Case(name="pair_unsqueeze_then_add", fn=unsqueeze_then_add, make_inputs=pair(3), inductor=True),
    Case(name="pair_as_strided_then_mul", fn=as_strided_then_mul, make_inputs=pair(4)),
    Case(name="mul_then_t", fn=mul_then_t, make_inputs=plain(2, 3), inductor=True),
    Case(name="unsqueeze_then_add", fn=unsqueeze_then_add, make_inputs=plain(3)),
    Case(name="transpose_unsqueeze_mul_returned", fn=transpose_unsqueeze_mul_returned, make_inputs=plain(2, 3)),
    Case(name="as_strided_then_mul", fn=as_strided_then_mul, make_inputs=plain(4)),
    Case(name="pair_transpose_unsqueeze_mul_returned", fn=transpose_unsqueeze_mul_returned, make_inputs=pair(2, 3)),
    Case(name="pair_t_around_mul", fn=t_around_mul, make_inputs=pair(2, 3)),
    Case(name="aliased_t_one_return_it", fn=t_one_return_it, make_inputs=two_views(_grad_base), inductor=True),
    Case(name="aliased_unsqueeze_one_sum", fn=unsqueeze_one_sum, make_inputs=two_views(_grad_base)),
    Case(name="aliased_t_one_matmul", fn=t_one_matmul, make_inputs=two_views(_grad_base)),
    Case(name="aliased_rows_unsqueeze_other", fn=unsqueeze_other, make_inputs=rows_of_one, inductor=True),
    Case(name="aliased_as_strided_one", fn=as_strided_one, make_inputs=two_views(_grad_base)),
]


@pytest.mark.parametrize(("case", "backend"), backend_params(CASES))
def test_once_refused_training_program_matches_eager(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        run_case(case, backend, compile_fn)


def _views_twice_written(a: T, b: T) -> object:
    a.t_()
    a.mul_(2)
    return a + b


def _both_transposed(a: T, b: T) -> object:
    a.t_()
    b.t_()
    return a @ b


def _transposed_under_no_grad(a: T, b: T) -> object:
    with torch.no_grad():
        a.t_()
    return a * b, a


@pytest.mark.parametrize("fn", [_views_twice_written, _both_transposed, _transposed_under_no_grad])
def test_aliased_inputs_metadata_changes_that_would_differ_are_refused(fn: Callable[..., object]) -> None:
    # Note [Aliased Inputs In Training]: these gave other gradients than eager's.
    with torch.enable_grad():
        a, b = two_views(_grad_base)()
        with pytest.raises(subclassaot.UnsupportedError, match="shares storage with another input"):
            subclassaot.compile(fn, backend="eager")(a, b)


def _view_of_grad_base() -> tuple[object, ...]:
    b = torch.randn(3, 3, requires_grad=True).clone()
    return (b[:2],)


def test_view_input_metadata_then_write_matches_eager() -> None:
    def f(x: T) -> object:
        x.t_()
        x.mul_(2)
        return x.sum(), x

    with torch.enable_grad():
        assert_matches_eager(f, _view_of_grad_base)


def test_subclass_input_reshaped_and_written_under_no_grad_is_refused() -> None:
    # Note [Inputs Written In Training]: the wrapper-level update covers changes autograd records only.
    def f(x: T) -> object:
        with torch.no_grad():
            x.t_()
            x.mul_(2)
        return x * 2

    with torch.enable_grad():
        p = PairTensor.from_tensor(torch.randn(2, 3), requires_grad=True)
        with pytest.raises(subclassaot.UnsupportedError, match="metadata or storage changed in place"):
            subclassaot.compile(f, backend="eager")(p)
