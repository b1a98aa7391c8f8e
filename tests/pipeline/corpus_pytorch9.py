"""Corpus, PyTorch's own programs, ninth part: test/test_autograd.py's programs of in-place writes through views
(test_inplace_on_view_*), of `y[index] = ...` (test_setitem*), of custom Functions (mark_dirty on views, duplicate
outputs, mark_non_differentiable), and torch.library custom ops that write their inputs (`mutates_args`, as
test/functorch/test_aotdispatch.py's custom-op tests declare them). Each program runs twice: as written (`ag_<name>`),
and on torch's TwoTensor (`ag_two_<name>`: each tensor input a TwoTensor of it and its clone, with its requires_grad).

As written: their inputs (shapes, dtypes, requires_grad settings), their programs (the part of the test that builds
the graph; the oracle runs the backward gradcheck ran). Where the test passes a tensor the program closes over (a
mask, a complex output buffer), it is an input here.

Input: nothing. Output: `CASES9` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`ag_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import FunctionCtx
from torch.testing._internal.two_tensor import TwoTensor

from tests.pipeline.corpus import inp, ported_as

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]


ported = ported_as("ag")


# ---------------------------------------------------------------------------------------------------------------
# test_autograd.py, TestAutogradDeviceType: test_inplace_on_view_*


def _root_2x2(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(2, 2), two, rg=True),)


def backprop_base(root: T) -> object:
    # test_inplace_on_view_backprop_base
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v1.mul_(2)
    return x


def backprop_view_of_view(root: T) -> object:
    # test_inplace_on_view_backprop_view_of_view
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = x.narrow(0, 0, 1)
    v1.mul_(2)
    return v2


def view_of_view(root: T) -> object:
    # test_inplace_on_view_of_view
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = v1.narrow(1, 1, 1)
    v2.mul_(2)
    return x


def then_no_grad(a: T) -> object:
    # test_inplace_on_view_then_no_grad
    b = a * 2
    c = b.view_as(b)
    c[0][0] = 3
    with torch.no_grad():
        c.grad_fn  # noqa: B018 (the test reads it under no_grad to force a graph update)
    return c


def _ones_3x1_double(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(3, 1, dtype=torch.double), two, rg=True),)


def two_views_mul_by(root: T, b: T) -> object:
    # test_inplace_on_view_gradcheck
    x = root.clone()
    x.narrow(1, 2, 2).narrow(0, 1, 2).mul_(b)
    x.narrow(1, 0, 2).narrow(0, 1, 2).mul_(b)
    return x


def _gradcheck_inputs(two: bool) -> tuple[object, ...]:
    a = inp(torch.randn(4, 4, dtype=torch.double), two, rg=True)
    return a, inp(torch.randn(2, 2, dtype=torch.double), two, rg=True)


def unbind_then_write(root: T) -> object:
    # test_inplace_on_view_multiple_outputs (eager raises: an in-place op on a multi-output view)
    x = root.clone()
    v1 = x.unbind()
    return v1[0].mul_(2)


def _arange_3x3(two: bool) -> tuple[object, ...]:
    return (inp(torch.arange(9.0, dtype=torch.double).reshape(3, 3), two, rg=True),)


def view_of_unbind_then_write(a: T) -> object:
    # test_inplace_on_view_of_multiple_output_view (eager raises)
    b = a.unbind(0)
    c = b[0].view_as(b[0])
    return c.mul_(2)


def unbind_of_view_then_write(a: T) -> object:
    # test_inplace_multiple_output_view_of_view (eager raises)
    b = a.view_as(a)
    c = b.unbind(0)
    return c[0].mul_(2)


def _rand_10_clone(two: bool) -> tuple[object, ...]:
    return (inp(torch.rand(10, dtype=torch.double), two, rg=True).clone(),)


def narrow_mul_by(root: T, b: T) -> object:
    # test_inplace_on_view_makes_base_require_grad
    x = root.clone()
    x.narrow(1, 2, 2).mul_(b)
    return x


def _makes_base_inputs(two: bool) -> tuple[object, ...]:
    a = inp(torch.randn(4, 4, dtype=torch.double), two, rg=False)
    return a, inp(torch.randn(4, 2, dtype=torch.double), two, rg=True)


def narrow_of_input_mul_by(a: T, b: T) -> object:
    # test_inplace_on_view_backprop_view: writes a leaf that does not require grad through a view
    return a.narrow(0, 1, 1).mul_(b)


def _backprop_view_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.tensor([2.0, 5.0]), two), inp(torch.tensor([3.0]), two, rg=True)


def select_then_add_to_base(r: T) -> object:
    # test_inplace_on_view_modify_base: v is made dependent on r by the in-place add to its base
    x = torch.ones(5, dtype=torch.double)
    v = x.select(0, 1)
    x.add_(r)
    return v


def _one_double(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(1, dtype=torch.double), two, rg=True),)


class PyAdd(torch.autograd.Function):
    # test_inplace_on_view_python
    @staticmethod
    def forward(ctx: FunctionCtx, x: T, y: T) -> T:
        ctx.mark_dirty(x)
        x.add_(y)
        return x

    @staticmethod
    def backward(ctx: FunctionCtx, grad: T) -> tuple[T, T]:
        return grad, grad


def python_add_into_views(root: T, b: T) -> object:
    # test_inplace_on_view_python
    x = root.clone()
    PyAdd.apply(x.narrow(1, 2, 2).narrow(0, 1, 2), b)  # type: ignore[no-untyped-call]
    PyAdd.apply(x.narrow(1, 0, 2).narrow(0, 1, 2), b)  # type: ignore[no-untyped-call]
    return x


def _non_contig_root(two: bool) -> tuple[object, ...]:
    # test_inplace_on_view_non_contig: a leaf that is a non-contiguous view
    base = torch.ones(2, 3, 2)
    if two:
        base = TwoTensor(base, base.clone())  # type: ignore[no-untyped-call]
    return (base.select(2, 1).t().requires_grad_(True),)


def unsafe_split_mul(a: T) -> object:
    # test_inplace_on_view_multi_output_unsafe (unsafe_split)
    b = a + a
    s1, s2, s3 = b.unsafe_split(1)
    s1.mul_(s2)
    return s1


def unsafe_split_with_sizes_mul(a: T) -> object:
    # test_inplace_on_view_multi_output_unsafe (unsafe_split_with_sizes)
    b = a + a
    s1, s2, s3 = b.unsafe_split_with_sizes((1, 1, 1))
    s1.mul_(s2)
    return s1


def unsafe_chunk_mul(a: T) -> object:
    # test_inplace_on_view_multi_output_unsafe (unsafe_chunk)
    b = a + a
    s1, s2, s3 = b.unsafe_chunk(3)
    s1.mul_(s2)
    return s1


def split_mul(a: T) -> object:
    # test_inplace_on_view_multi_output_safe (eager raises: "returns multiple views")
    b = a + a
    s1, s2, s3 = torch.split(b, 1)
    s1.mul_(s2)
    return s1


def _randn_3x3(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(3, 3), two, rg=True),)


INPLACE_ON_VIEW = [
    *ported("inplace_on_view_backprop_base", backprop_base, _root_2x2),
    *ported("inplace_on_view_backprop_view_of_view", backprop_view_of_view, _root_2x2),
    *ported("inplace_on_view_of_view", view_of_view, _root_2x2),
    *ported("inplace_on_view_then_no_grad", then_no_grad, _ones_3x1_double),
    *ported("inplace_on_view_gradcheck", two_views_mul_by, _gradcheck_inputs),
    *ported("inplace_on_view_multiple_outputs", unbind_then_write, _arange_3x3, eager_raises=True),
    *ported("inplace_on_view_of_multiple_output_view", view_of_unbind_then_write, _rand_10_clone, eager_raises=True),
    *ported("inplace_multiple_output_view_of_view", unbind_of_view_then_write, _rand_10_clone, eager_raises=True),
    *ported("inplace_on_view_makes_base_require_grad", narrow_mul_by, _makes_base_inputs),
    *ported("inplace_on_view_backprop_view", narrow_of_input_mul_by, _backprop_view_inputs),
    *ported("inplace_on_view_modify_base", select_then_add_to_base, _one_double),
    *ported("inplace_on_view_python", python_add_into_views, _gradcheck_inputs),
    *ported("inplace_on_view_non_contig", view_of_view, _non_contig_root),
    *ported("inplace_on_view_multi_output_unsafe_split", unsafe_split_mul, _randn_3x3),
    *ported("inplace_on_view_multi_output_unsafe_split_with_sizes", unsafe_split_with_sizes_mul, _randn_3x3),
    *ported("inplace_on_view_multi_output_unsafe_chunk", unsafe_chunk_mul, _randn_3x3),
    *ported("inplace_on_view_multi_output_safe", split_mul, _randn_3x3, eager_raises=True),
]


# ---------------------------------------------------------------------------------------------------------------
# test_autograd.py, TestAutograd: _test_setitem / _test_setitem_tensor / test_setitem_mask, put_, fill_


def setitem_to(index: object) -> Callable[[T], object]:
    def fn(x: T) -> object:
        # _test_setitem: y = x + 2; y[index] = 2
        y = x + 2
        y[index] = 2  # type: ignore[index]
        return y

    return fn


def setitem_tensor_to(index: object) -> Callable[[T, T], object]:
    def fn(x: T, value: T) -> object:
        # _test_setitem_tensor: y[index] = value (a tensor that requires grad)
        y = x + 2
        y[index] = value  # type: ignore[index]
        return y

    return fn


def _ones_of(*size: int) -> Make:
    return lambda two: (inp(torch.ones(*size), two, rg=True),)


def _ones_and_sevens(size: tuple[int, ...], value_size: tuple[int, ...]) -> Make:
    return lambda two: (inp(torch.ones(*size), two, rg=True), inp(torch.full(value_size, 7.0), two, rg=True))


def setitem_broadcast(x: T) -> object:
    # _test_setitem_tensor: "case when x broadcasts to as y[1]"
    y = torch.zeros(2, 3, 4)
    y[1] = x
    return y


def setitem_mask(x: T, mask: T) -> object:
    # test_setitem_mask: _test_setitem((5, 5), mask)
    y = x + 2
    y[mask] = 2
    return y


def setitem_mask_tensor(x: T, mask: T, value: T) -> object:
    # test_setitem_mask: _test_setitem_tensor((5,), mask[0])
    y = x + 2
    y[mask] = value
    return y


_MASK = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 1, 0, 1], [1, 1, 0, 0, 0], [0, 1, 0, 1, 1], [1, 0, 0, 0, 1]]).bool()


def _mask_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.ones(5, 5), two, rg=True), _MASK.clone()


def _mask_row_inputs(two: bool) -> tuple[object, ...]:
    mask = _MASK[0].clone()
    return inp(torch.ones(5), two, rg=True), mask, inp(torch.full((int(mask.sum()),), 7.0), two, rg=True)


_IDX = torch.tensor([1, 2, 3, -1, -2, -3])
_IDX_ACC = torch.tensor([1, 2, 3, 1, 2, 3])


def put_values(root: T, values: T) -> object:
    # test_put
    x = root.clone()
    x.put_(_IDX, values)
    return x


def put_values_accumulate(root: T, values: T) -> object:
    # test_put_accumulate
    x = root.clone()
    x.put_(_IDX_ACC, values, accumulate=True)
    return x


def _put_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(4, 5), two, rg=True), inp(torch.randn(6), two, rg=True)


def fill_clone(root: T) -> object:
    # test_fill
    x = root.clone()
    x.fill_(2)
    return x


def chunk_unused_outputs(x: T) -> object:
    # test_unused_output
    outputs = x.chunk(5)
    o = outputs[2]
    return o * 4 + 2


def masked_self_assign(a: T, b: T) -> object:
    # test_index_backward_does_not_save_tensor
    tensor = b + 0
    tensor[a != 0] = tensor[a != 0]
    return tensor


def _index_backward_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.tensor([1.0, 0, 0]), two), inp(torch.zeros(3), two, rg=True)


def index_assign_of_fresh(b: T) -> object:
    # test_backward_twice_with_saved_values: c[[1, 2]] = b[[1, 1]] into a fresh tensor
    c = torch.zeros(3, dtype=torch.double)
    c[[1, 2]] = b[[1, 1]]
    return c


def add_into_input(a: T, b: T) -> object:
    # test_requires_grad_inplace: a += b, a an input without grad
    a += b
    return a


def _requires_grad_inplace_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(5, 5), two), inp(torch.randn(5, 5), two, rg=True)


def add_through_view(a: T) -> object:
    # test_no_requires_grad_inplace ("same but with a view"): a write of an input without grad through a view
    b = a[:]
    b.add_(5)
    return a.sum()


def copy_real_into_complex(out_c: T, inp_r: T) -> object:
    # test_copy_r_to_c
    out_c.copy_(inp_r)
    return out_c


def _copy_r_to_c_inputs(two: bool) -> tuple[object, ...]:
    out_c = inp(torch.zeros(3, 2, dtype=torch.cdouble), two)
    return out_c, inp(torch.randn(3, 2, dtype=torch.double), two, rg=True)


SETITEM = [
    *ported("setitem_row", setitem_to(1), _ones_of(5, 5)),
    *ported("setitem_1d", setitem_to(1), _ones_of(5)),
    *ported("setitem_list", setitem_to([[0, 4, 2]]), _ones_of(10)),
    *ported("setitem_two_lists", setitem_to([[0, 4], [2, 2]]), _ones_of(5, 5)),
    *ported("setitem_last_dim_list", setitem_to((slice(None), slice(None), [1, 3])), _ones_of(5, 5, 5)),
    *ported("setitem_adjacent_lists", setitem_to((slice(None), [2, 4], [1, 3])), _ones_of(5, 5, 5)),
    *ported("setitem_tensor_row", setitem_tensor_to(3), _ones_and_sevens((5, 5), (5,))),
    *ported("setitem_tensor_pairs", setitem_tensor_to([[0, 1], [1, 0]]), _ones_and_sevens((5, 5), (2,))),
    *ported(
        "setitem_tensor_leading_lists",
        setitem_tensor_to(([1, 3], [2, 4], slice(None))),
        _ones_and_sevens((5, 5, 5), (2, 5)),
    ),
    *ported("setitem_tensor_broadcast", setitem_broadcast, lambda two: (inp(torch.randn(4), two, rg=True),)),
    *ported("setitem_mask", setitem_mask, _mask_inputs),
    *ported("setitem_mask_tensor", setitem_mask_tensor, _mask_row_inputs),
    *ported("put", put_values, _put_inputs),
    *ported("put_accumulate", put_values_accumulate, _put_inputs),
    *ported("fill", fill_clone, lambda two: (inp(torch.randn(4, 5), two, rg=True),)),
    *ported("unused_output", chunk_unused_outputs, lambda two: (inp(torch.randn(10, 10), two, rg=True),)),
    *ported("index_backward_does_not_save_tensor", masked_self_assign, _index_backward_inputs),
    *ported(
        "backward_twice_with_saved_values",
        index_assign_of_fresh,
        lambda two: (inp(torch.randn(3, dtype=torch.double), two, rg=True),),
    ),
    *ported("requires_grad_inplace", add_into_input, _requires_grad_inplace_inputs),
    *ported("no_requires_grad_inplace_view", add_through_view, lambda two: (inp(torch.randn(2, 3), two),)),
    *ported("copy_r_to_c", copy_real_into_complex, _copy_r_to_c_inputs),
]


# ---------------------------------------------------------------------------------------------------------------
# test_autograd.py, TestAutograd: custom Functions


class DoubleDuplicate(torch.autograd.Function):
    # test_return_duplicate
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> tuple[T, T]:
        output = x * 2
        return output, output

    @staticmethod
    def backward(ctx: FunctionCtx, grad1: T, grad2: T) -> T:
        return grad1 * 2 + grad2 * 2


def duplicate_outputs_added(x: T) -> object:
    a, b = DoubleDuplicate.apply(x)  # type: ignore[no-untyped-call]
    return a + b


class DoubleInplace(torch.autograd.Function):
    # test_return_duplicate_inplace
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> tuple[T, T]:
        x.mul_(2)
        ctx.mark_dirty(x)
        return x, x

    @staticmethod
    def backward(ctx: FunctionCtx, grad1: T, grad2: T) -> T:
        return grad1 * 2 + grad2 * 2


def duplicate_dirty_outputs_added(x: T) -> object:
    a, b = DoubleInplace.apply(x.clone())  # type: ignore[no-untyped-call]
    return a + b


def dirty_view_of_clone(x: T) -> object:
    # test_return_duplicate_inplace: "Functions which modify views in-place must return only one output" (raises)
    return DoubleInplace.apply(x.clone()[0])  # type: ignore[no-untyped-call]


class NonDifferentiableMask(torch.autograd.Function):
    # test_mark_non_differentiable
    @staticmethod
    def forward(ctx: FunctionCtx, input: T) -> T:
        output = input > 0
        ctx.mark_non_differentiable(output)
        return output

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: T) -> T:
        return (grad_output * 0).to(torch.double)


def masked_fill_by_function_mask(x: T) -> object:
    mask = NonDifferentiableMask.apply(x)  # type: ignore[no-untyped-call]
    return x.masked_fill(mask, 0), mask


class MixedNonDifferentiable(torch.autograd.Function):
    # test_mark_non_differentiable_mixed
    @staticmethod
    def forward(ctx: FunctionCtx, input: T) -> tuple[T, T]:
        a = input + 1
        b = input + 2
        ctx.mark_non_differentiable(a)
        return a, b

    @staticmethod
    def backward(ctx: FunctionCtx, grad_a: T, grad_b: T) -> T:
        return grad_b


def mixed_outputs(x: T) -> object:
    a, b = MixedNonDifferentiable.apply(x)  # type: ignore[no-untyped-call]
    return a, b


class NonDifferentiableClone(torch.autograd.Function):
    # test_mark_non_differentiable_none
    @staticmethod
    def forward(ctx: FunctionCtx, input: T) -> T:
        output = input.clone()
        ctx.mark_non_differentiable(output)
        return output

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: T) -> None:
        return None


def non_differentiable_times_input(x: T) -> object:
    r = NonDifferentiableClone.apply(x * x)  # type: ignore[no-untyped-call]
    return (r * x).sum()


def _randn_5x5(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(5, 5), two, rg=True),)


FUNCTIONS = [
    *ported("return_duplicate", duplicate_outputs_added, _randn_5x5),
    *ported("return_duplicate_inplace", duplicate_dirty_outputs_added, _randn_5x5),
    *ported("return_duplicate_inplace_view", dirty_view_of_clone, _randn_5x5, eager_raises=True),
    *ported("mark_non_differentiable", masked_fill_by_function_mask, _randn_5x5),
    *ported("mark_non_differentiable_mixed", mixed_outputs, _randn_5x5),
    *ported("mark_non_differentiable_none", non_differentiable_times_input, _randn_5x5),
]


# ---------------------------------------------------------------------------------------------------------------
# torch.library custom ops that write their inputs (test_aotdispatch.py's custom-op tests declare them with
# `mutates_args`), on plain and TwoTensor inputs


@torch.library.custom_op("corpus9::add_one_into", mutates_args={"x"})
def add_one_into(x: T) -> None:
    x.add_(1)


@add_one_into.register_fake
def _add_one_into_fake(x: T) -> None:
    return None


@torch.library.custom_op("corpus9::scale_into_and_sum", mutates_args={"out"})
def scale_into_and_sum(x: T, out: T) -> T:
    out.copy_(x * 2)
    return x.sum(0)


@scale_into_and_sum.register_fake
def _scale_into_and_sum_fake(x: T, out: T) -> T:
    return x.new_empty(x.shape[1:])


def custom_op_writes_input(x: T) -> object:
    torch.ops.corpus9.add_one_into(x)
    return x * 2


def custom_op_writes_view_of_input(x: T) -> object:
    torch.ops.corpus9.add_one_into(x[0])
    return x.sum()


def custom_op_writes_intermediate(x: T) -> object:
    y = x.clone()
    torch.ops.corpus9.add_one_into(y)
    return y


def custom_op_writes_out_and_returns(x: T, out: T) -> object:
    s = torch.ops.corpus9.scale_into_and_sum(x, out)
    return s, out.view(-1)


def _randn_2x3(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(2, 3), two),)


def _x_and_out(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(2, 3), two), inp(torch.zeros(2, 3), two)


CUSTOM_OPS = [
    *ported("custom_op_mutates_input", custom_op_writes_input, _randn_2x3),
    *ported("custom_op_mutates_view_of_input", custom_op_writes_view_of_input, _randn_2x3),
    *ported("custom_op_mutates_intermediate", custom_op_writes_intermediate, _randn_3x3),
    *ported("custom_op_mutates_out_arg", custom_op_writes_out_and_returns, _x_and_out),
]


CASES9 = INPLACE_ON_VIEW + SETITEM + FUNCTIONS + CUSTOM_OPS
