"""PairTensor inputs that require grad and are overlapping views of one base the call does not pass (`f(x[0],
x[0])`), written under grad: compiled with that base as a hidden input (Note [Aliased Inputs In Training]). Sources:
the corpus cases pair_aliases_other_input_train, pair_input_data_and_metadata_mutation_aliases_
other_input_train, pair_aliasing_strided_overlap_by_one_train and pair_aliasing_3d_then_slice_overlap_train
(PyTorch's test_aotdispatch.py on TwoTensor), refused before, and variants of them written here."""

from __future__ import annotations

from collections.abc import Callable

import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import Call, CompileFn, assert_matches_eager
from tests.pipeline.program_helpers import check_no_grad, check_with_grad, pair, pair_nonleaf, refused_with_grad

T = torch.Tensor
Make = Callable[[], tuple[object, ...]]
REFUSAL = "overlaps another input that is a view of the same tensor subclass base"


def _views(*shape: int, take: Callable[[T], tuple[T, ...]]) -> Make:
    return lambda: take(pair_nonleaf(*shape))


ROWS = _views(4, 2, take=lambda x: (x[0], x[0]))


def both_written(a: T, b: T) -> object:
    a.add_(1)
    b.mul_(2)
    return a + b


def test_the_same_row_twice_both_written(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train, with the second view written too
    check_with_grad(both_written, ROWS, compile_fn)
    check_no_grad(both_written, ROWS, compile_fn)


def test_written_views_returned(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train: outputs that are the inputs (and views of them) after both writes
    def f(a: T, b: T) -> object:
        a.add_(1)
        b.mul_(2)
        return a, b, b.view(-1)

    check_with_grad(f, ROWS, compile_fn)


def test_one_written_from_the_other(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train: the write's source is the other alias
    def copy_from(a: T, b: T) -> object:
        a.copy_(b * 2)
        return a.sum() + b.sum()

    def written_then_read(a: T, b: T) -> object:
        b.mul_(3)
        a.add_(1)
        return b.sin()

    check_with_grad(copy_from, ROWS, compile_fn)
    check_with_grad(written_then_read, ROWS, compile_fn)


def test_one_written_under_no_grad(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train: one write recorded by autograd, one not
    def f(a: T, b: T) -> object:
        with torch.no_grad():
            b.mul_(2)
        a.add_(1)
        return a * b

    check_with_grad(f, ROWS, compile_fn)


def test_member_changed_in_layout(compile_fn: CompileFn | None) -> None:
    # corpus pair_input_data_and_metadata_mutation_aliases_other_input_train: rows t_()'d (1-D: only the version
    # counter moves) pass; 2-D rows transposed keep the refusal of Note [Aliased Inputs In Training] (a subclass group
    # keeps the refusal of metadata changes)
    def f(a: T, b: T) -> object:
        a.mul_(2)
        b.t_()
        return a + b.sum()

    check_with_grad(f, _views(3, 3, take=lambda x: (x[0], x[0])), compile_fn)
    square = _views(3, 3, 3, take=lambda x: (x[0], x[0]))
    refused_with_grad(f, square, compile_fn, "program changes the metadata")


def test_overlapping_strided_views(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliasing_strided_overlap_by_one_train, with other overlaps: column slices, transposed as_strided
    columns = _views(4, 4, take=lambda x: (x[:, 0:3], x[:, 1:4]))
    transposed = _views(16, take=lambda x: (x.as_strided((3, 3), (3, 1), 0), x.as_strided((3, 3), (1, 3), 2)))
    for make in (columns, transposed):
        check_with_grad(both_written, make, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(both_written, columns, compile_kwargs={"dynamic": True}, compile_fn=compile_fn)


def test_three_views_and_views_of_views(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliasing_3d_then_slice_overlap_train: more members, some views of views (`._base` is the root)
    def three(a: T, b: T, c: T) -> object:
        a.add_(1)
        c.mul_(3)
        return a + b + c[0]

    def nested(a: T, b: T) -> object:
        a.add_(1)
        b.mul_(2)
        return a + b[1:]

    check_with_grad(three, _views(4, 3, take=lambda x: (x[0], x[0], x[0:2])), compile_fn)
    check_with_grad(nested, _views(4, 3, take=lambda x: (x[0][1:], x[0])), compile_fn)
    # the views' base is itself a view: its root is the base added
    check_with_grad(both_written, _views(5, 2, take=lambda x: (x[1:][0], x[1:][0])), compile_fn)


def test_two_bases_and_other_inputs(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train: two such groups, a plain-free extra input, a detached member
    def two(a: T, b: T, c: T, d: T) -> object:
        a.add_(1)
        c.mul_(2)
        return b + d

    def extra(a: T, b: T, c: T) -> object:
        a.add_(c)
        return b * c

    def detached(a: T, b: T, c: T) -> object:
        a.add_(1)
        return b + c

    def groups() -> tuple[object, ...]:
        x, y = pair_nonleaf(4, 2), pair_nonleaf(4, 2)
        return x[0], x[0], y[1], y[1]

    def with_extra() -> tuple[object, ...]:
        x = pair_nonleaf(4, 2)
        return x[0], x[0], pair_nonleaf(2)

    def with_detached() -> tuple[object, ...]:
        x = pair_nonleaf(4, 2)
        return x[0], x[0], x[1].detach()

    check_with_grad(two, groups, compile_fn)
    check_with_grad(extra, with_extra, compile_fn)
    check_with_grad(detached, with_detached, compile_fn)


def test_views_passed_by_keyword(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train, called as f(a=x[0], b=x[0])
    def make() -> Call:
        x = pair_nonleaf(4, 2)
        return Call(args=(), kwargs={"a": x[0], "b": x[0]})

    with torch.enable_grad():
        assert_matches_eager(both_written, make, compile_fn=compile_fn)


def test_views_of_a_leaf_are_read_only(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train on a leaf base: eager forbids the writes, reads pass as before
    def read(a: T, b: T) -> object:
        return a * b

    check_with_grad(read, lambda: (x := pair(4, 2, requires_grad=True), x[0], x[0])[1:], compile_fn)


def test_aliasing_changes_between_calls(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train: the entry compiled for views of one base is not used for two
    # separate tensors (its guards fail, and the call compiles its own entry), nor the other way round
    # (the entries' guards: the eager backend; inductor compiles this program in the test below)
    compiled = (compile_fn or subclassaot.compile)(both_written, backend="eager")

    def same(fn: Callable[..., object], **kwargs: object) -> Callable[..., object]:
        return compiled

    def separate() -> tuple[object, ...]:
        return pair_nonleaf(2), pair_nonleaf(2)

    for make in (ROWS, separate, ROWS, separate):
        check_with_grad(both_written, make, same)
    if compile_fn is None:
        assert isinstance(compiled, subclassaot.CompiledFunction)
        assert compiled.compile_count == 2
        assert "views of one tensor not passed" in compiled.recompile_reasons[0]


def test_called_twice_on_the_same_views(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train: a second call on the views the first one wrote (their histories now go
    # through the first call's writes), then one backward through both calls
    def run(fn: Callable[..., object]) -> tuple[list[object], T]:
        leaf = PairTensor(torch.arange(8.0).view(4, 2), -torch.arange(8.0).view(4, 2), requires_grad=True)
        with torch.enable_grad():
            x = leaf.clone()
            a, b = x[0], x[0]
            first, second = fn(a, b), fn(a, b)
            assert isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)
            torch.autograd.backward((first * second).sum())
        assert leaf.grad is not None
        return [first.detach(), second.detach(), a.detach(), b.detach(), x.detach()], leaf.grad

    compiled = (compile_fn or subclassaot.compile)(both_written)
    eager_values, eager_grad = run(both_written)
    values, grad = run(compiled)
    for got, want in zip([*values, grad], [*eager_values, eager_grad], strict=True):
        assert isinstance(got, PairTensor) and isinstance(want, PairTensor)
        torch.testing.assert_close(got.a, want.a)
        torch.testing.assert_close(got.b, want.b)


def test_module_and_captured_tensor_keep_the_refusal(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train in a module's forward and beside a captured tensor: their state lifts
    # to inputs before the arguments, and the base is not added there (Note [Aliased Inputs In Training])
    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, a: T, b: T) -> object:
            a.add_(1)
            b.mul_(2)
            return a + b * self.w

    w = torch.ones(2)

    def captured(a: T, b: T) -> object:
        a.add_(w)
        b.mul_(2)
        return a + b

    refused_with_grad(Scale(), ROWS, compile_fn, REFUSAL)
    refused_with_grad(captured, ROWS, compile_fn, REFUSAL)


def test_with_the_same_view_twice_and_plain_inputs(compile_fn: CompileFn | None) -> None:
    # corpus pair_aliases_other_input_train beside Note [Synthetic Bases] (a view passed twice, a
    # plain tensor passed twice) and a plain input that requires grad, and with a view of the whole base
    def same_view_twice(a: T, a2: T, b: T) -> object:
        a.add_(1)
        a2.mul_(2)
        return b * 3

    def plain_twice(a: T, b: T, p: T, q: T) -> object:
        a.add_(p)
        b.mul_(2)
        q.add_(1)
        return a + b

    def plain_grad(a: T, b: T, p: T) -> object:
        a.mul_(p)
        return b * p

    def whole(a: T, b: T, c: T) -> object:
        a.add_(1)
        c.mul_(2)
        return b + c[:2]

    def view_twice() -> tuple[object, ...]:
        x = pair_nonleaf(4, 2)
        a = x[0]
        return a, a, x[0]

    def with_plain_twice() -> tuple[object, ...]:
        x, p = pair_nonleaf(4, 2), torch.randn(2)
        return x[0], x[0], p, p

    def with_plain_grad() -> tuple[object, ...]:
        x = pair_nonleaf(4, 2)
        return x[0], x[0], torch.randn(2, requires_grad=True)

    check_with_grad(same_view_twice, view_twice, compile_fn)
    check_with_grad(plain_twice, with_plain_twice, compile_fn)
    check_with_grad(plain_grad, with_plain_grad, compile_fn)
    check_with_grad(whole, _views(4, 2, take=lambda x: (x[0], x[0], x.view(8))), compile_fn)
