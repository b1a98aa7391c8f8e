"""Corpus, PyTorch's own programs, fifth part: the view/mutation programs of test/test_functionalization.py (views of
one base, out= into fresh tensors, as_strided/diagonal/split/unbind/slice writes, resize_ of intermediates, copy_
across shapes and dtypes), the input/output aliasing and grad-mode programs of test_aotdispatch.py the first four
parts did not yet run, TwoTensor programs of test/dynamo/test_subclasses.py (nested pairs, inner tensors of different
strides, outputs aliasing subclass inputs, inputs marked dynamic), custom Functions and modules that write, and a few
mutation repros of test/dynamo/test_repros.py; written fresh, on plain tensors and PairTensors, without and with
grad.

Input: nothing. Output: `CASES5` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus; a
training variant's mutated inputs are non-leaves, as eager requires. Each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import policies
from subclasses.pair import PairTensor
from tests.pipeline import corpus_pytorch as plain
from tests.pipeline.corpus import Case
from tests.pipeline.corpus_pytorch2 import MakeOne, both_kinds, kinds, leaf_kinds
from tests.pipeline.corpus_pytorch_subclass import pair

T = torch.Tensor
FunctionCtx = torch.autograd.function.FunctionCtx


# ---------------------------------------------------------------------------------------------------------------
# test_functionalization.py: views of an input, then a write through one of them


def two_flat_views_then_write(x: T) -> object:
    # test_multiple_views_of_same_base
    y = x.view(-1)
    z = x.view(-1)
    x.add_(1)
    return y + 1, z + 1


def view_write_returns_view(x: T) -> object:
    # test_simple
    y = x.view(4, 2)
    y.add_(torch.ones(4, 2))
    z = x * x
    return y, z


def write_base_return_view(x: T) -> object:
    # test_inplace_on_non_view
    y = x.view(4, 2)
    x.add_(torch.ones(4, 2))
    return y


def as_strided_write(x: T) -> object:
    # test_as_strided
    y = x.as_strided((2,), (2,), 1)
    y.add_(1)
    return x


def diagonal_write_then_square(x: T) -> object:
    # test_diagonal
    y = x.diagonal()
    y.add_(torch.ones(2))
    return x * x


def diagonal_write_returns_input(x: T) -> object:
    # test_diagonal_mutated_input
    x.diagonal().add_(1)
    return x


def transpose_then_row_write(x: T) -> object:
    # test_view_inplace
    x.transpose_(1, 0)
    y = x[0]
    y.add_(torch.ones(4))
    return x


def index_put_through_view(x: T) -> object:
    # test_optional_tensor_list
    y = x.view(8)
    y.index_put_((torch.arange(4),), torch.arange(4, dtype=y.dtype))
    return y


def view_write_then_scalar_ops(x: T) -> object:
    # test_scalars
    y = x.view(4, 2)
    y.add_(1)
    z = 2 * y
    z.div_(1)
    return z


def two_views_one_written(x: T) -> object:
    # test_aliases_maintained_after_pass_when_reapplying_views
    y = x.view(4, 2)
    z = x.view(4, 2)
    y.add_(torch.ones(4, 2))
    return y, z


def slice_write_returns_input(x: T) -> object:
    # test_slice
    x[:, 1:].add_(1)
    return x


def nested_helper_writes_row(x: T) -> object:
    # test_nested_functions_propagate_updates
    def g(v: T) -> None:
        v[0].add_(1)

    g(x)
    return x + x


def split_diagonal_write(x: T) -> object:
    # test_split (training variant: eager refuses an in-place write on a multi-output view)
    _, y2 = x.split(2)  # type: ignore[no-untyped-call]
    y3 = y2.diagonal()
    y3.add_(torch.ones(2))
    return y3, x * x


def split_with_sizes_write(x: T) -> object:
    # test_split_with_sizes
    y1, _ = x.split_with_sizes([2, 2])
    y1.diagonal().add_(1)
    return x * 2


def unbind_write(x: T) -> object:
    # test_unbind
    y0, _ = x.unbind(0)
    y0.add_(1)
    return x + 1


def everything_views(x: T) -> object:
    # test_everything, ending in a write through a reshape and an unsqueeze_/squeeze_ pair of the input
    y = x.view(8)
    z0 = y.reshape(2, 4)
    z1 = z0.transpose(1, 0)
    z1.unsqueeze_(0)
    z1.squeeze_()
    z1.mul_(2)
    return z0[0] + z1.reshape(8)[:4], z1


FUNCTIONALIZATION_VIEWS = [
    *kinds("fz_multiple_views_of_same_base", two_flat_views_then_write, (4,)),
    *kinds("fz_simple", view_write_returns_view, (4, 2)),
    *kinds("fz_inplace_on_non_view", write_base_return_view, (4, 2)),
    *kinds("fz_as_strided", as_strided_write, (9,)),
    *kinds("fz_diagonal", diagonal_write_then_square, (2, 2)),
    *kinds("fz_diagonal_mutated_input", diagonal_write_returns_input, (2, 2)),
    *kinds("fz_view_inplace", transpose_then_row_write, (4, 2)),
    *kinds("fz_optional_tensor_list", index_put_through_view, (4, 2)),
    *kinds("fz_scalars", view_write_then_scalar_ops, (4, 2)),
    *kinds("fz_aliases_maintained", two_views_one_written, (4, 2)),
    *kinds("fz_slice", slice_write_returns_input, (3, 3)),
    *kinds("fz_nested_functions_propagate_updates", nested_helper_writes_row, (2, 2)),
    *kinds("fz_split", split_diagonal_write, (4, 2), train_raises=True),
    *kinds("fz_split_with_sizes", split_with_sizes_write, (4, 2), train_raises=True),
    *kinds("fz_unbind", unbind_write, (2, 3), train_raises=True),
    *kinds("fz_everything_views", everything_views, (4, 2)),
]


# ---------------------------------------------------------------------------------------------------------------
# test_functionalization.py: fresh tensors written (out=, copy_, fill_, resize_), the input only read


def add_out_into_empty(x: T) -> object:
    # test_simple_out (out= resizes the 0-d tensor)
    z = x.new_empty(())
    torch.add(x.view(4, 2), torch.ones(4, 2), out=z)
    return z * z


def tensor_ctr_write(x: T) -> object:
    # test_tensor_ctr
    y = torch.tensor((1.0, 2.0, 3.0))
    y.view(-1).add_(1)
    return x * y


def copy_into_diagonal_of_zeros(x: T) -> object:
    # test_copy_ (same shape, broadcast from one element, other dtype)
    tmp = torch.zeros(2, 2)
    y = tmp.diagonal().copy_(x)
    z = y.add_(x)
    return z, tmp


def pair_copy_into_diagonal_of_zeros(x: T) -> object:
    # test_copy_, the zeros made from the PairTensor input
    tmp = x.new_zeros(2, 2)
    y = tmp.diagonal().copy_(x)
    z = y.add_(x)
    return z, tmp


def fill_diagonal_of_intermediate(x: T) -> object:
    # test_fill_
    y = x + x
    y.diagonal().fill_(0)
    return y


def resize_view_of_intermediate_smaller(w: T) -> object:
    # test_resize_smaller
    x = w + 1
    y = x.view(4, 4)
    y.resize_(3, 3)
    y.view(-1).add_(1)
    return y + 1


def resize_intermediate_larger(x: T) -> object:
    # test_resize_larger_valid
    y = x + 1
    y.resize_(5, 5)
    y.view(25).fill_(1)
    return y, y + 1


def masked_fill_of_cloned_column(a: T) -> object:
    # test_advanced_indexing_correct_strides
    b = a.clone()[:, 1]
    c = torch.ones_like(b, dtype=torch.bool)
    return b.masked_fill_(c, 0)


def write_into_fresh_then_use(x: T) -> object:
    # test_index_mutation_on_non_input
    tmp = x.new_zeros(10)
    tmp[5].fill_(1)
    return tmp + x


def copy_into_strided_empty(x: T) -> object:
    # test_copy_stride_mismatch
    y = x.new_empty((2, 2)).as_strided((2, 2), (1, 2))
    y.copy_(x)
    return y


def channels_last_write(x: T) -> object:
    # test_channels_last_contiguous
    x.mul_(2)
    return x.contiguous(), x + 1


def _channels_last(new: MakeOne, rg: bool) -> tuple[object, ...]:
    return (new(1, 2, 3, 4, rg=rg).contiguous(memory_format=torch.channels_last),)


def _copy_sources(dtype: torch.dtype, shape: tuple[int, ...]) -> Callable[[], tuple[object, ...]]:
    return lambda: (torch.arange(1, 1 + shape[0], dtype=dtype),)


FUNCTIONALIZATION_FRESH = [
    *kinds("fz_simple_out", add_out_into_empty, (4, 2), train_raises=True),
    Case(name="fz_tensor_ctr", fn=tensor_ctr_write, make_inputs=lambda: (plain.t(3),)),
    Case(name="fz_tensor_ctr_train", fn=tensor_ctr_write, make_inputs=lambda: (plain.leaf(3),)),
    Case(name="fz_copy_same_shape", fn=copy_into_diagonal_of_zeros, make_inputs=lambda: (plain.t(2),)),
    Case(name="fz_copy_same_shape_train", fn=copy_into_diagonal_of_zeros, make_inputs=lambda: (plain.leaf(2),)),
    Case(name="fz_copy_broadcast", fn=copy_into_diagonal_of_zeros, make_inputs=lambda: (plain.t(1),)),
    Case(name="fz_copy_broadcast_train", fn=copy_into_diagonal_of_zeros, make_inputs=lambda: (plain.leaf(1),)),
    Case(name="fz_copy_other_dtype", fn=copy_into_diagonal_of_zeros, make_inputs=_copy_sources(torch.long, (2,))),
    Case(
        name="fz_copy_other_dtype_broadcast",
        fn=copy_into_diagonal_of_zeros,
        make_inputs=_copy_sources(torch.long, (1,)),
    ),
    *both_kinds("fz_copy_from_pair", pair_copy_into_diagonal_of_zeros, lambda new, rg: (new(2, rg=rg),)),
    *kinds("fz_fill", fill_diagonal_of_intermediate, (2, 2)),
    Case(name="fz_resize_smaller", fn=resize_view_of_intermediate_smaller, make_inputs=lambda: (plain.t(8, 2),)),
    Case(name="pair_fz_resize_smaller", fn=resize_view_of_intermediate_smaller, make_inputs=lambda: (pair(8, 2),)),
    Case(
        name="fz_resize_smaller_train_raises",
        fn=resize_view_of_intermediate_smaller,
        make_inputs=lambda: (plain.leaf(8, 2),),
        eager_raises=True,
    ),
    Case(name="fz_resize_larger_valid", fn=resize_intermediate_larger, make_inputs=lambda: (plain.t(8, 2),)),
    *kinds("fz_advanced_indexing_correct_strides", masked_fill_of_cloned_column, (2, 2)),
    *kinds("fz_index_mutation_on_non_input", write_into_fresh_then_use, (10,)),
    *kinds("fz_copy_stride_mismatch", copy_into_strided_empty, (2, 2)),
    *both_kinds("fz_channels_last_contiguous", channels_last_write, _channels_last),
]


# ---------------------------------------------------------------------------------------------------------------
# test_aotdispatch.py: outputs aliasing intermediates and inputs, outputs that do not require grad, grad modes


def intermediate_view_written_after(a: T) -> object:
    # test_output_aliases_intermediate_mutation_linear (the caller writes the returned view)
    out = a.mul(2)
    return out.view(-1)


def intermediate_view_and_plain_output(a: T, b: T) -> object:
    # test_output_aliases_intermediate_no_grad
    out = a * 3
    return out.view(-1), b.add(1)


def intermediate_transposed_and_detached(a: T) -> object:
    # test_output_aliases_intermediate_inplace_view_with_detach
    a = a.mul(2)
    a.t_()
    return a, a.detach()


def intermediate_view_then_inplace_view(a: T) -> object:
    # test_output_aliases_intermediate_inplace_view_and_view
    out = a.mul(2)
    v = out.unsqueeze(0)
    out.t_()
    return out, v


def intermediate_multiple_mixed(a: T) -> object:
    # test_output_aliases_intermediate_multiple_mixed
    out1 = a.mul(2)
    out2 = a.mul(3)
    return out1.view(-1), out2.transpose(1, 0), out1.transpose(1, 0)


def shape_dependent_output(x: T) -> object:
    # test_output_op_depending_on_symint
    return x.new_ones(x.shape[0]) * x.sum(), x.view(-1)[: x.shape[0]]


def cos_of_both_one_without_grad(a: T, b: T) -> object:
    # test_no_grad_input_output
    return a.cos(), b.cos(), a * b


def written_then_aliases_other(a: T, b: T) -> object:
    # test_input_mutation_aliases_other_input2
    a.add_(1)
    return a + b


def _row_and_base(new: MakeOne, rg: bool) -> tuple[object, ...]:
    base = new(2, 2, rg=rg)
    return base[0], base


def returns_three_aliases_of_input(x: T) -> object:
    # test_output_all_alias_types, the subclass-input variant (test_subclasses.py: outputs alias the input)
    return x.view(-1), x[1], x


def write_under_inference_mode_of_fresh(x: T) -> object:
    # test_aot_dispatch_inference (inference_mode inside, its tensor used afterwards)
    with torch.inference_mode():
        y = torch.ones(3)
        y.mul_(2)
    return x * y.clone()


def write_under_no_grad_then_view_returned(x: T) -> object:
    # test_input_mutation_requires_grad_no_grad (the mutated input's view returned)
    with torch.no_grad():
        x.mul_(2)
    return x.view(-1), x + 1


AOTDISPATCH = [
    *kinds("intermediate_mutation_linear", intermediate_view_written_after, (2, 3), after_call=plain.mul_out(-1)),
    *both_kinds(
        "intermediate_view_no_grad_other",
        intermediate_view_and_plain_output,
        lambda new, rg: (new(2, 3, rg=rg), new(3)),
    ),
    *kinds("intermediate_inplace_view_with_detach", intermediate_transposed_and_detached, (2, 3)),
    *kinds("intermediate_inplace_view_and_view", intermediate_view_then_inplace_view, (2, 3)),
    *kinds("intermediate_multiple_mixed", intermediate_multiple_mixed, (2, 3)),
    *kinds("output_op_depending_on_symint", shape_dependent_output, (3, 3)),
    *both_kinds("no_grad_input_output", cos_of_both_one_without_grad, lambda new, rg: (new(3, rg=rg), new(3))),
    *both_kinds("input_mutation_aliases_other_input2", written_then_aliases_other, _row_and_base),
    *kinds("outputs_alias_input_three_ways", returns_three_aliases_of_input, (2, 3)),
    *leaf_kinds("outputs_alias_leaf_three_ways", returns_three_aliases_of_input, lambda new: (new(2, 3),)),
    *kinds("inference_mode_fresh_tensor", write_under_inference_mode_of_fresh, (3,)),
    *kinds("no_grad_write_view_returned", write_under_no_grad_then_view_returned, (2, 2)),
]


# ---------------------------------------------------------------------------------------------------------------
# test_subclasses.py: nested pairs, inner tensors of different strides, outputs aliasing subclass inputs


def _nested_pair(rg: bool) -> tuple[object, ...]:
    inner = PairTensor(torch.randn(3, 2), torch.randn(3, 2))
    outer = PairTensor(inner, PairTensor(torch.randn(3, 2), torch.randn(3, 2)), requires_grad=rg)
    return (outer.clone() if rg else outer,)


def _strided_pair(rg: bool) -> tuple[object, ...]:
    """A PairTensor whose `a` is contiguous and whose `b` is a transposed (column-major) tensor."""
    p = PairTensor(torch.randn(2, 3), torch.randn(3, 2).t(), requires_grad=rg)
    return (p.clone() if rg else p,)


def transpose_write_flat_out(x: T) -> object:
    # test_subclasses.py TwoTensor of TwoTensors: a write through a transposed view, a flat view returned
    x.t().add_(1)
    return x.reshape(-1), x[0]


def unsqueeze_write_out(x: T) -> object:
    # test_subclasses.py: metadata then data mutation of a subclass input
    x.unsqueeze_(0)
    x.mul_(2)
    return x.squeeze(0) + 1


def mul_then_transposed(x: T) -> object:
    # test_subclasses.py: test_tensor_subclass_TwoTensor_different_shape, inner strides differ
    x.mul_(2)
    return x.t(), x.sum()


def mul_then_add(x: T) -> object:
    # test_subclasses.py TwoTensor of TwoTensors: a data write of the input
    x.mul_(2)
    return x + 1


def view_out_of_mutated(x: T) -> object:
    # test_subclasses.py: the subclass input written, then outputs aliasing it
    x.add_(1)
    return x[0], x.narrow(1, 0, 1)


def transposed_contiguous_write(x: T) -> object:
    # test_subclasses.py: a contiguous copy of a transposed subclass input written, the input read after
    y = x.t().contiguous()
    y.add_(1)
    return y, x * 2


SUBCLASS = [
    *plain.both("pair_nested_transpose_write", transpose_write_flat_out, _nested_pair),
    *plain.both("pair_nested_unsqueeze_write", unsqueeze_write_out, _nested_pair),
    *plain.both("pair_nested_outputs_alias", returns_three_aliases_of_input, _nested_pair),
    *plain.both("pair_nested_mul_write", mul_then_add, _nested_pair),
    *plain.both("pair_strided_inner_mul", mul_then_transposed, _strided_pair),
    *plain.both("pair_strided_inner_unsqueeze", unsqueeze_write_out, _strided_pair),
    *plain.both("pair_strided_inner_view_out", view_out_of_mutated, _strided_pair),
    *plain.both("pair_strided_inner_contiguous", transposed_contiguous_write, _strided_pair),
    *kinds("view_out_of_mutated", view_out_of_mutated, (3, 2)),
]


def _marked(make: Callable[[bool], tuple[object, ...]]) -> Callable[[bool], tuple[object, ...]]:
    """The inputs of `make`, each marked dynamic in dim 0 (outer and same-rank inner tensors): test_subclasses.py
    runs its TwoTensor programs with torch._dynamo.mark_dynamic."""

    def made(rg: bool) -> tuple[object, ...]:
        inputs = make(rg)
        for x in inputs:
            assert isinstance(x, torch.Tensor)
            policies.mark_dynamic(x, 0)
        return inputs

    return made


def _flat_pair(rg: bool) -> tuple[object, ...]:
    p = PairTensor(torch.randn(4, 3), torch.randn(4, 3), requires_grad=rg)
    return (p.clone() if rg else p,)


def narrow_rows_after_write(x: T) -> object:
    # test_subclasses.py, mark_dynamic on a TwoTensor: rows read through a view whose size follows the marked dim
    x.mul_(2)
    return x[1:], x.narrow(0, 0, x.shape[0] - 1).sum()


MARKED = [
    *plain.both("pair_marked_view_out_of_mutated", view_out_of_mutated, _marked(_flat_pair)),
    *plain.both("pair_marked_unsqueeze_write", unsqueeze_write_out, _marked(_flat_pair)),
    *plain.both("pair_marked_narrow_rows", narrow_rows_after_write, _marked(_flat_pair)),
    *plain.both("pair_marked_outputs_alias", returns_three_aliases_of_input, _marked(_flat_pair)),
    *plain.both("pair_marked_nested_mul_write", mul_then_add, _marked(_nested_pair)),
    *plain.both("pair_marked_nested_transpose_write", transpose_write_flat_out, _marked(_nested_pair)),
    *plain.both("pair_marked_strided_inner_mul", mul_then_transposed, _marked(_strided_pair)),
]


# ---------------------------------------------------------------------------------------------------------------
# Custom autograd Functions and modules that write


class ScaleWithStats(torch.autograd.Function):
    """Scales x and records its mean into a stats tensor (not requiring grad) without mark_dirty."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: T, stats: T) -> T:
        stats.add_(x.detach().mean())
        return x * 2

    @staticmethod
    def backward(ctx: FunctionCtx, g: T) -> tuple[T, None]:
        return g * 2, None


def custom_writes_stats(x: T, stats: T) -> object:
    # test_aotdispatch.py custom autograd Functions that write a buffer in forward
    return ScaleWithStats.apply(x, stats) + stats  # type: ignore[no-untyped-call]


class ViewAndNew(torch.autograd.Function):
    """Returns a view of x and a new tensor."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> tuple[T, T]:
        return x.view_as(x), x * 3

    @staticmethod
    def backward(ctx: FunctionCtx, g1: T, g2: T) -> T:
        return g1 + g2 * 3


def custom_view_and_new(x: T) -> object:
    # test_input_output_aliase_custom_autograd_function, two outputs
    a, b = ViewAndNew.apply(x)  # type: ignore[no-untyped-call]
    return a, b


class BufferSliceWrite(torch.nn.Module):
    """A buffer written through a slice with a value computed from the input."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("hist", torch.zeros(4))
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x: T) -> T:
        hist = self.get_buffer("hist")
        hist[1:3] = x.detach().sum()
        return x * self.w + hist[:3]


class BufferIndexCopy(torch.nn.Module):
    """A buffer written with index_copy_ under no_grad, then read."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mem", torch.zeros(4, 3))

    def forward(self, x: T) -> T:
        mem = self.get_buffer("mem")
        with torch.no_grad():
            mem.index_copy_(0, torch.tensor([2]), x.unsqueeze(0))
        return x.sum() * mem


def _module(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


CUSTOM_AND_MODULES = [
    *both_kinds("custom_writes_stats", custom_writes_stats, lambda new, rg: (new(3, rg=rg), new(1))),
    *kinds("custom_view_and_new", custom_view_and_new, (2, 3)),
    *leaf_kinds("custom_view_and_new_leaf", custom_view_and_new, lambda new: (new(2, 3),)),
    Case(name="buffer_slice_write", fn=_module(BufferSliceWrite), make_inputs=lambda: (plain.leaf(3),)),
    Case(name="buffer_index_copy", fn=_module(BufferIndexCopy), make_inputs=lambda: (plain.leaf(3),)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_repros.py: in-place ops on inputs


def unsqueeze_input_returned(x: T) -> object:
    # test_inplace_unsqueeze_input
    x.unsqueeze_(0)
    return x + 1, x


def fill_diagonal_input(x: T) -> object:
    # test_fill_diagonal_
    x.fill_diagonal_(0)
    return x.sum(1)


def setitem_with_index_tensor(x: T, idx: T) -> object:
    # test_setitem_with_index / test_tensor_setitem: a written row of the input, via an index tensor
    x[idx] = 2.0
    return x * 3


def clamp_slice_inplace(x: T) -> object:
    # test_clamp_ on a slice of the input
    x[1:].clamp_(min=0.0)
    return x


def addcmul_into_input(x: T, y: T) -> object:
    # test_addcmul_ into an input
    return x.addcmul_(y, y, value=0.5)


REPROS = [
    *kinds("repro_unsqueeze_input", unsqueeze_input_returned, (2, 3)),
    *kinds("repro_fill_diagonal", fill_diagonal_input, (3, 3)),
    *both_kinds(
        "repro_setitem_index_tensor",
        setitem_with_index_tensor,
        lambda new, rg: (new(4, 2, rg=rg), torch.tensor([0, 2])),
    ),
    *kinds("repro_clamp_slice", clamp_slice_inplace, (3, 2)),
    *kinds("repro_addcmul", addcmul_into_input, (3,), (3,)),
]


CASES5 = (
    FUNCTIONALIZATION_VIEWS + FUNCTIONALIZATION_FRESH + AOTDISPATCH + SUBCLASS + MARKED + CUSTOM_AND_MODULES + REPROS
)
