"""A custom autograd.Function that returns its input, or a view of it (Note [Custom Functions]):
eager's output is an autograd view of the input carrying the Function's history. PyTorch's test_aotdispatch.py
(test_input_output_aliase_custom_autograd_function, test_input_output_view_custom_autograd_function), on plain and
PairTensor inputs, leaf or not, with the variants around them: the Function's view ops, views taken after, two calls,
inputs passed twice or as views, no_grad, dynamic shapes, and the writes to the input that are refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor, nested_example
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.program_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
    twice,
)

T = torch.Tensor
Ctx = Any


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T) -> T:
        return x

    @staticmethod
    def backward(ctx: Ctx, g: T) -> T:
        return g * 0.5


class Flat(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T) -> T:
        return x.view(-1)

    @staticmethod
    def backward(ctx: Ctx, g: T) -> T:
        return g.view(2, 3) * 2


class Row(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T) -> T:
        return x[1]

    @staticmethod
    def backward(ctx: Ctx, g: T) -> T:
        return torch.stack([g, g * 3])


class Transposed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T) -> T:
        return x.t()

    @staticmethod
    def backward(ctx: Ctx, g: T) -> T:
        return g.t() + 1


class InputAndDouble(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T) -> tuple[T, T]:
        return x, x * 2

    @staticmethod
    def backward(ctx: Ctx, g: T, h: T) -> T:
        return g + h * 2


def identity(x: T) -> object:
    return Identity.apply(x)  # type: ignore[no-untyped-call]


def flat(x: T) -> object:
    return Flat.apply(x)  # type: ignore[no-untyped-call]


def row(x: T) -> object:
    return Row.apply(x)  # type: ignore[no-untyped-call]


def transposed(x: T) -> object:
    return Transposed.apply(x)  # type: ignore[no-untyped-call]


def called_twice(x: T) -> object:
    return Identity.apply(x), Flat.apply(x)  # type: ignore[no-untyped-call]


def viewed_after(x: T) -> object:
    y = Identity.apply(x)  # type: ignore[no-untyped-call]
    return y.view(3, 2), y


def used_after(x: T) -> object:
    y = Flat.apply(x)  # type: ignore[no-untyped-call]
    return y, y * 2


def input_and_double(x: T) -> object:
    return InputAndDouble.apply(x)  # type: ignore[no-untyped-call]


def input_and_output(x: T) -> object:
    return x, Identity.apply(x)  # type: ignore[no-untyped-call]


def nested_calls(x: T) -> object:
    return Identity.apply(Identity.apply(x))  # type: ignore[no-untyped-call]


def hidden_write_before(x: T) -> object:
    x.data.mul_(2)
    return Identity.apply(x)  # type: ignore[no-untyped-call]


def hidden_write_after(x: T) -> object:
    y = Flat.apply(x)  # type: ignore[no-untyped-call]
    x.data.mul_(2)
    return y


def first_of_two(x: T, y: T) -> object:
    return Identity.apply(x), y.sin()  # type: ignore[no-untyped-call]


PROGRAMS: list[Callable[[T], object]] = [
    identity,
    flat,
    row,
    transposed,
    called_twice,
    viewed_after,
    used_after,
    input_and_double,
    input_and_output,
    nested_calls,
    hidden_write_before,
    hidden_write_after,
]

MAKERS: dict[str, Callable[[], T]] = {
    "plain_leaf": lambda: leaf(2, 3),
    "plain_nonleaf": lambda: nonleaf(2, 3),
    "pair_leaf": lambda: pair(2, 3, requires_grad=True),
    "pair_nonleaf": lambda: pair_nonleaf(2, 3),
    "pair_view": lambda: pair_nonleaf(4, 3)[1:3],
    "pair_no_grad": lambda: pair(2, 3),
}


def _ids(fns: Sequence[Callable[[T], object]]) -> list[str]:
    return [f.__name__ for f in fns]


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=_ids(PROGRAMS))
def test_function_returning_its_input_matches_eager(
    fn: Callable[[T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    # test_aotdispatch.py test_input_output_aliase_custom_autograd_function / _view_custom_autograd_function, and
    # variants: corpus cases pair_input_output_alias_custom_autograd_function, pair_custom_autograd_function_view_*
    make = MAKERS[kind]
    check_with_grad(fn, lambda: (make(),), compile_fn)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=_ids(PROGRAMS))
def test_function_returning_its_input_under_no_grad(
    fn: Callable[[T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    # the same programs called under an outer no_grad: no history, the epilogue regenerates the views
    make = MAKERS[kind]
    check_no_grad(fn, lambda: (make(),), compile_fn)


@pytest.mark.parametrize("fn", [identity, flat, row, viewed_after], ids=_ids([identity, flat, row, viewed_after]))
def test_function_returning_its_input_dynamic(fn: Callable[[T], object], compile_fn: CompileFn | None) -> None:
    # the view chain's sizes are symbolic: replayed on the real input with its own sizes
    with torch.enable_grad():
        assert_matches_eager(
            fn, lambda: (pair_nonleaf(2, 3),), compile_kwargs={"dynamic": True}, compile_fn=compile_fn, calls=1
        )


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
def test_function_on_an_input_passed_twice(maker: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # one tensor as two arguments: the Function's output is a view of that one object
    check_with_grad(first_of_two, twice(lambda: maker(2, 3)), compile_fn)


def write_before(x: T) -> object:
    x.mul_(2)
    return Identity.apply(x)  # type: ignore[no-untyped-call]


def write_after(x: T) -> object:
    y = Flat.apply(x)  # type: ignore[no-untyped-call]
    x.add_(1)
    return y


def transpose_before(x: T) -> object:
    x.t_()
    return Identity.apply(x)  # type: ignore[no-untyped-call]


REFUSED = [write_before, write_after, transpose_before]


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
@pytest.mark.parametrize("fn", REFUSED, ids=_ids(REFUSED))
def test_function_returning_a_written_input_is_refused(
    fn: Callable[[T], object], maker: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    # The compiled Function returns the view before the epilogue writes the input (eager's was made after the write:
    # its grad_fn reads fine), or eager's grad_fn raises naming the program's Function (a write after): refused.
    refused_with_grad(fn, lambda: (maker(2, 3),), compile_fn, "Custom Functions")


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
@pytest.mark.parametrize("fn", REFUSED, ids=_ids(REFUSED))
def test_function_returning_a_written_input_under_no_grad(
    fn: Callable[[T], object], maker: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    # without autograd there is no Function history to keep: the epilogue writes and regenerates as usual
    check_no_grad(fn, lambda: (maker(2, 3),), compile_fn)


def row_of_second(x: T, y: T) -> object:
    return x * 2, Row.apply(y)  # type: ignore[no-untyped-call]


def identity_of_other(x: T, y: T) -> object:
    y.mul_(2)
    return Identity.apply(x)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
def test_function_on_one_of_two_inputs(maker: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # the view is replayed on the input it came from; another input the program writes does not matter
    check_with_grad(row_of_second, lambda: (maker(2, 3), maker(2, 3)), compile_fn)
    check_with_grad(identity_of_other, lambda: (maker(2, 3), maker(2, 3)), compile_fn)


class _ReturnsParameter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(PairTensor(torch.randn(2, 3), torch.randn(2, 3)))

    def forward(self, x: T) -> object:
        return Identity.apply(self.p), x + 1  # type: ignore[no-untyped-call]


def test_function_returning_a_pair_parameter(compile_fn: CompileFn | None) -> None:
    # a lifted parameter is an input like any other: the output is a view of the module's own parameter
    check_with_grad(_ReturnsParameter(), lambda: (pair(2, 3),), compile_fn)


def test_function_returning_a_nested_pair(compile_fn: CompileFn | None) -> None:
    # PairTensor of PairTensors: the wrapper-level view_as runs the subclass's own view ops at every level
    def make() -> tuple[object, ...]:
        return (PairTensor(nested_example(), nested_example(), requires_grad=True),)

    check_with_grad(identity, make, compile_fn)
    check_with_grad(transposed, make, compile_fn)


def after_constants(scale: float, w: T, x: T) -> object:
    return Flat.apply(x), w * scale  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
def test_function_on_an_input_after_other_arguments(maker: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # the replayed view's source is found among the tensor inputs, past a constant and another tensor
    check_with_grad(after_constants, lambda: (2.0, maker(3), maker(2, 3)), compile_fn)


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T) -> T:
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Ctx, g: T) -> T:
        return g * 3


def dirty(x: T) -> object:
    return Dirty.apply(x)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
def test_input_marked_dirty_by_a_function_matches_eager(maker: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # Note [Custom Functions]: eager's input takes Dirty's backward (g * 3) as its history; the compiled program
    # once repeated the write without history (the gradient behind the input was g, not 3 g). The write is one
    # autograd records now: the epilogue's copy_ (for a pair, at the wrapper level) runs with grad from the
    # Function's update, whose backward holds Dirty's.
    check_with_grad(dirty, lambda: (maker(2, 3),), compile_fn)
    check_no_grad(dirty, lambda: (maker(2, 3),), compile_fn)


class ViewOfFirst(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Ctx, x: T, w: T) -> tuple[T, T]:
        return x.unsqueeze(0).transpose(1, 2), w * 2

    @staticmethod
    def backward(ctx: Ctx, g: T, h: T) -> tuple[None, T]:
        return None, h * 2


def view_of_first(x: T, w: T) -> object:
    return ViewOfFirst.apply(x, w)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("maker", [torch.randn, pair], ids=["plain", "pair"])
def test_function_viewing_an_input_without_grad(maker: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # the view of x (which does not require grad) comes out of the Function requiring grad, because w does: a
    # two-step chain (unsqueeze, transpose) replayed on x, and no gradient for x
    check_with_grad(view_of_first, lambda: (maker(2, 3), maker(2, 3).requires_grad_()), compile_fn)


def dirty_plus_one(x: T) -> object:
    return Dirty.apply(x) + 1  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
def test_input_marked_dirty_but_not_returned_runs(maker: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # corpus case custom_mark_dirty_train with another backward: the outputs' gradients come from the Function's
    # backward in the joint graph, and the input's own history after the call runs through it too
    check_with_grad(dirty_plus_one, lambda: (maker(2, 3),), compile_fn)


class _ViewOfOwnProduct(torch.autograd.Function):
    """Returns a view of a tensor its forward made (as torchao's Float8Linear returns a reshape of its mm result)."""

    @staticmethod
    def forward(ctx: Any, x: T) -> T:
        product = torch.mm(x, x.t())
        return product.reshape(product.shape)

    @staticmethod
    def backward(ctx: Any, grad: T) -> T:
        return grad.sum(1, keepdim=True).expand(3, 4).clone()


def view_of_function_product(x: T) -> object:
    out: T = _ViewOfOwnProduct.apply(x)  # type: ignore[no-untyped-call]  # untyped in torch
    return out


def view_of_function_product_and_more(x: T) -> object:
    out: T = _ViewOfOwnProduct.apply(x)  # type: ignore[no-untyped-call]  # untyped in torch
    return out, out.sum(), x * 2


@pytest.mark.parametrize("requires_grad", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("fn", [view_of_function_product, view_of_function_product_and_more])
def test_view_of_a_function_intermediate_is_a_view(fn: Callable[[T], object], requires_grad: bool) -> None:
    # See Note [Output Regeneration]: eager's output is a view of a tensor nobody sees.
    assert_matches_eager(fn, lambda: (torch.randn(3, 4, requires_grad=requires_grad),), calls=2)


def dirty_second(x0: T, x1: T) -> object:
    return (Dirty.apply(x1),)  # type: ignore[no-untyped-call]


def dirty_view_of_second(x0: T, x1: T) -> object:
    t0 = x1.transpose(1, 0)
    Dirty.apply(t0)  # type: ignore[no-untyped-call]
    return (t0, x0 * 2)


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf], ids=["plain", "pair"])
@pytest.mark.parametrize("f", [dirty_second, dirty_view_of_second])
def test_one_input_passed_twice_marked_dirty_matches_eager(
    maker: Callable[..., T], f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # fuzz seed 81101 #282 (and seed 86100 #467): a PairTensor passed twice was traced as two members of one synthetic
    # base, written below autograd, where the mark rebased only the wrapper's history: the gradient behind the input
    # lost Dirty's backward. The one object is one input now (Note [Synthetic Bases]), as a plain tensor was.
    check_with_grad(f, twice(lambda: maker(3, 4, 1)), compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, twice(lambda: maker(3, 4, 1)), after_call=write_outputs, compile_fn=compile_fn)


class _DirtySecond(torch.nn.Module):
    def forward(self, x0: T, x1: T) -> object:
        return dirty_second(x0, x1)


_SHARED_DIRTY_RULE = r"marks it dirty \(ctx.mark_dirty\), and its inner tensors share storage with input"


def test_subclass_marked_dirty_sharing_storage_with_another_input_is_refused(compile_fn: CompileFn | None) -> None:
    # a module's inputs are not deduplicated (its state lifts to inputs), so the one PairTensor is an alias group
    # there; and a plain view of its inner tensor beside it is one with it: refused, not a wrong gradient
    refused_with_grad(_DirtySecond(), twice(lambda: pair_nonleaf(2, 3)), compile_fn, _SHARED_DIRTY_RULE)

    def inner_beside() -> tuple[object, ...]:
        b = pair_nonleaf(2, 3)
        assert isinstance(b, PairTensor)
        return (b.a.detach(), b)

    refused_with_grad(dirty_second, inner_beside, compile_fn, _SHARED_DIRTY_RULE)
