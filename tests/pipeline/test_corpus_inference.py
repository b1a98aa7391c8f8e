"""Corpus, inference: programs over plain tensors that do not require grad, each checked against eager.

Programs port the mutation/aliasing programs of PyTorch's `test/functorch/test_aotdispatch.py` (TestAOTAutograd)
and add the corner cases torch.compile has got wrong: mutations through views, metadata mutations, `set_()`,
`.data`, aliased inputs, outputs that are inputs or views of inputs, intermediates or other outputs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import Call, CompileFn
from tests.pipeline.corpus import Case, params, run_case, set_to

T = torch.Tensor


def randn(*shape: int) -> T:
    return torch.randn(*shape)


# ---------------------------------------------------------------------------------------------------------------
# Data mutations of inputs, directly and through views


def mul_then_use(a: T) -> object:
    a.mul_(2)
    return a * 3


def mutation_is_output(a: T) -> object:
    a.mul_(2)
    return a


def return_inplace_result(a: T) -> object:
    return a.add_(1)


def through_view(x: T) -> object:
    x.view(-1).add_(1)
    return x + 1


def through_select(x: T) -> object:
    x[0].mul_(2)
    return x.sum()


def through_transpose(x: T) -> object:
    x.t().add_(1)
    return x * 2


def through_diagonal(x: T) -> object:
    x.diagonal().zero_()
    return x.clone()


def through_unbind(x: T) -> object:
    x.unbind(0)[1].fill_(3.0)
    return x.sum(0)


def through_strided_slice(x: T) -> object:
    x[::2].mul_(10)
    return x[1]


def through_chained_views(x: T) -> object:
    x.t()[1:].unsqueeze(0)[0, 1].sub_(5)
    return x.mean()


def several_inputs(a: T, b: T, c: T) -> object:
    a.mul_(2)
    c.mul_(2)
    return a + b + c


def mutation_only(a: T) -> object:
    a.add_(1)
    return ()


def mutation_returns_none(a: T, b: T) -> object:
    b.copy_(a)
    return None


def copy_into_input(x: T, y: T) -> object:
    x.copy_(y)
    return x + y


def mutation_then_view_output(a: T) -> object:
    a.add_(1)
    return a.view(-1)


def input_output_view_mutate_multiple(a: T, b: T, c: T) -> object:
    a.mul_(2)
    c.mul_(3)
    return b.view(2, 2), c.view(2, 2)


def input_mutation_output_view_multiple(a: T, b: T, c: T, d: T) -> object:
    b.transpose_(1, 0)
    c.add_(1)
    return d + 1, b.diagonal(), a + c


def int_mutation(x: T) -> object:
    x.add_(3)
    return x * 2


def bool_mutation(m: T, n: T) -> object:
    m.logical_not_()
    return m & n


def zero_dim(s: T) -> object:
    s.mul_(2)
    return s + 1


def scalar_arg(x: T, s: float) -> object:
    x.mul_(s)
    return x + s


def none_and_int_args(a: T, b: None, c: int) -> object:
    return a * c


def with_kwargs(x: T, *, y: T, alpha: int) -> object:
    x.add_(y, alpha=alpha)
    return x - y


def dict_input(d: dict[str, object]) -> object:
    b = d["b"]
    assert isinstance(b, list)
    b[0].mul_(2)
    a = d["a"]
    assert isinstance(a, torch.Tensor)
    return a + b[0] + b[1]


def nested_outputs(x: T, y: T) -> object:
    x.add_(1)
    return {"x": x, "sum": [x + y, (y.view(-1),)]}, 3, None


def index_put(x: T, mask: T) -> object:
    x[mask] = 0.0
    return x.sum()


def slice_assign(x: T, y: T) -> object:
    x[1:3] = y
    return x * 2


def index_add(x: T, idx: T, y: T) -> object:
    x.index_add_(0, idx, y)
    return x.clone()


def out_variant(a: T, b: T, c: T) -> object:
    torch.add(a, b, out=c)
    return c * 2


def mutation_in_loop(x: T) -> object:
    for i in range(3):
        x[i].add_(i)
    return x.sum(1)


def read_before_and_after(x: T) -> object:
    y = x * 2
    x.add_(1)
    return y, x * 2


def view_taken_before_mutation(x: T) -> object:
    v = x.view(-1)
    x.mul_(2)
    return v + 1


def intermediate_mutation_only(x: T) -> object:
    y = x.clone()
    y.add_(1)
    return y


def in_place_unary(x: T) -> object:
    torch.sigmoid_(x)
    return x.sum()


def zero_then_sum(x: T) -> object:
    x.zero_()
    return x.sum()


DATA_MUTATIONS = [
    Case(name="mul_then_use", fn=mul_then_use, make_inputs=lambda: (torch.ones(3, 3),), inductor=True),
    Case(name="mutation_is_output", fn=mutation_is_output, make_inputs=lambda: (randn(3, 3),)),
    Case(name="return_inplace_result", fn=return_inplace_result, make_inputs=lambda: (randn(3),)),
    Case(name="through_view", fn=through_view, make_inputs=lambda: (randn(2, 3),), inductor=True),
    Case(name="through_select", fn=through_select, make_inputs=lambda: (randn(3, 2),)),
    Case(name="through_transpose", fn=through_transpose, make_inputs=lambda: (randn(2, 3),)),
    Case(name="through_diagonal", fn=through_diagonal, make_inputs=lambda: (randn(3, 3),)),
    Case(name="through_unbind", fn=through_unbind, make_inputs=lambda: (randn(3, 2),)),
    Case(name="through_strided_slice", fn=through_strided_slice, make_inputs=lambda: (randn(5, 2),)),
    Case(name="through_chained_views", fn=through_chained_views, make_inputs=lambda: (randn(3, 4),)),
    Case(
        name="several_inputs",
        fn=several_inputs,
        make_inputs=lambda: (randn(3, 3), randn(3, 3), randn(3, 3)),
        inductor=True,
    ),
    Case(name="mutation_only", fn=mutation_only, make_inputs=lambda: (randn(4),)),
    Case(name="mutation_returns_none", fn=mutation_returns_none, make_inputs=lambda: (randn(4), randn(4))),
    Case(name="copy_into_input", fn=copy_into_input, make_inputs=lambda: (randn(2, 2), randn(2, 2))),
    Case(name="mutation_then_view_output", fn=mutation_then_view_output, make_inputs=lambda: (randn(2, 2),)),
    Case(
        name="input_output_view_mutate_multiple",
        fn=input_output_view_mutate_multiple,
        make_inputs=lambda: (randn(4), randn(4), randn(4)),
    ),
    Case(
        name="input_mutation_output_view_multiple",
        fn=input_mutation_output_view_multiple,
        make_inputs=lambda: (
            torch.arange(4.0).view(2, 2) + 1,
            torch.arange(4.0).view(2, 2) + 1,
            randn(2, 2),
            randn(2, 2),
        ),
    ),
    Case(name="int_mutation", fn=int_mutation, make_inputs=lambda: (torch.randint(0, 10, (5,)),)),
    Case(
        name="bool_mutation",
        fn=bool_mutation,
        make_inputs=lambda: (torch.randn(5) > 0, torch.randn(5) > 0),
    ),
    Case(name="zero_dim", fn=zero_dim, make_inputs=lambda: (torch.tensor(1.5),)),
    Case(name="scalar_arg", fn=scalar_arg, make_inputs=lambda: (randn(3), 2.5)),
    Case(name="none_and_int_args", fn=none_and_int_args, make_inputs=lambda: (randn(3, 3), None, 3)),
    Case(
        name="with_kwargs",
        fn=with_kwargs,
        make_inputs=lambda: Call(args=(randn(3),), kwargs={"y": randn(3), "alpha": 2}),
    ),
    Case(name="dict_input", fn=dict_input, make_inputs=lambda: ({"a": randn(2), "b": [randn(2), randn(2)]},)),
    Case(name="nested_outputs", fn=nested_outputs, make_inputs=lambda: (randn(2, 2), randn(2, 2))),
    Case(name="index_put", fn=index_put, make_inputs=lambda: (randn(6), torch.randn(6) > 0)),
    Case(name="slice_assign", fn=slice_assign, make_inputs=lambda: (randn(4, 2), randn(2, 2))),
    Case(
        name="index_add",
        fn=index_add,
        make_inputs=lambda: (randn(4, 2), torch.tensor([0, 2, 0]), randn(3, 2)),
    ),
    Case(name="out_variant", fn=out_variant, make_inputs=lambda: (randn(3), randn(3), randn(3))),
    Case(name="mutation_in_loop", fn=mutation_in_loop, make_inputs=lambda: (randn(3, 4),)),
    Case(name="read_before_and_after", fn=read_before_and_after, make_inputs=lambda: (randn(3),)),
    Case(name="view_taken_before_mutation", fn=view_taken_before_mutation, make_inputs=lambda: (randn(2, 2),)),
    Case(name="intermediate_mutation_only", fn=intermediate_mutation_only, make_inputs=lambda: (randn(3),)),
    Case(name="in_place_unary", fn=in_place_unary, make_inputs=lambda: (randn(3, 2),)),
    Case(name="zero_then_sum", fn=zero_then_sum, make_inputs=lambda: (randn(3),)),
    Case(name="noncontiguous_input", fn=mul_then_use, make_inputs=lambda: (randn(4, 4)[:, 1],)),
    Case(name="storage_offset_input", fn=through_view, make_inputs=lambda: (randn(10)[3:9].view(2, 3),)),
    Case(name="transposed_input", fn=through_select, make_inputs=lambda: (randn(2, 3).t(),)),
]


# ---------------------------------------------------------------------------------------------------------------
# Metadata mutations, and data + metadata on the same input


def transpose_then_add(a: T, b: T) -> object:
    a.transpose_(1, 0)
    return a + b


def transpose_then_mul(a: T) -> object:
    a.transpose_(1, 0)
    a.mul_(2)
    return a + 1


def unsqueeze_in_place(x: T) -> object:
    x.unsqueeze_(0)
    return x * 2


def squeeze_in_place(x: T) -> object:
    x.squeeze_(1)
    return x.sum(0)


def as_strided_in_place(x: T) -> object:
    x.as_strided_((2, 2), (1, 2))
    return x + 1


def resize_shrink(x: T) -> object:
    x.resize_(2)
    return x * 2


def resize_grow(x: T) -> object:
    x.resize_(8)
    x[4:].fill_(1.0)
    return x + 1


def resize_same_numel(x: T) -> object:
    x.resize_(2, 2)
    return x.sum(0)


def data_and_metadata(a: T) -> object:
    a.t_()
    a[0].mul_(2)
    return a.view(a.shape)


def view_and_inplace_view(a: T, b: T) -> object:
    a.t_()
    return b.view(b.shape), a.view(a.shape)


def input_output_view_metadata_mutate_multiple(a: T, b: T, c: T) -> object:
    b.mul_(3)
    c.t_()
    return a.view(2, 2), b.view(2, 2), c.view(2, 2)


def output_all_alias_types(a: T) -> object:
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.squeeze(), tmp.transpose(1, 0), a.unsqueeze(0)


def metadata_then_fill(x: T) -> object:
    x.t_()
    x[0].fill_(0.0)
    return x


def squeeze_all_in_place(x: T) -> object:
    x.squeeze_()
    return x + 1


def swapdims_twice(x: T) -> object:
    x.swapdims_(0, 1)
    x.add_(1)
    x.swapdims_(0, 1)
    return x * 1


METADATA_MUTATIONS = [
    Case(name="transpose_then_add", fn=transpose_then_add, make_inputs=lambda: (randn(3, 3), randn(3, 3))),
    Case(name="transpose_then_mul", fn=transpose_then_mul, make_inputs=lambda: (randn(2, 3),), inductor=True),
    Case(name="unsqueeze_in_place", fn=unsqueeze_in_place, make_inputs=lambda: (randn(3),)),
    Case(name="squeeze_in_place", fn=squeeze_in_place, make_inputs=lambda: (randn(3, 1, 4),)),
    Case(name="as_strided_in_place", fn=as_strided_in_place, make_inputs=lambda: (randn(4),)),
    Case(name="resize_shrink", fn=resize_shrink, make_inputs=lambda: (randn(4),)),
    Case(name="resize_grow", fn=resize_grow, make_inputs=lambda: (randn(4),)),
    Case(name="resize_same_numel", fn=resize_same_numel, make_inputs=lambda: (randn(4),)),
    Case(name="data_and_metadata", fn=data_and_metadata, make_inputs=lambda: (randn(3, 3),)),
    Case(name="view_and_inplace_view", fn=view_and_inplace_view, make_inputs=lambda: (randn(3, 3), randn(3, 3))),
    Case(
        name="input_output_view_metadata_mutate_multiple",
        fn=input_output_view_metadata_mutate_multiple,
        make_inputs=lambda: (randn(2, 2), randn(2, 2), randn(2, 2)),
    ),
    Case(
        name="output_all_alias_types", fn=output_all_alias_types, make_inputs=lambda: (randn(1, 2, 4),), inductor=True
    ),
    Case(name="metadata_then_fill", fn=metadata_then_fill, make_inputs=lambda: (randn(2, 3),)),
    Case(name="metadata_on_view_input", fn=transpose_then_mul, make_inputs=lambda: (randn(4, 3)[1:],)),
    Case(name="squeeze_all_in_place", fn=squeeze_all_in_place, make_inputs=lambda: (randn(1, 3, 1),)),
    Case(name="swapdims_twice", fn=swapdims_twice, make_inputs=lambda: (randn(2, 3),)),
]


# ---------------------------------------------------------------------------------------------------------------
# set_() and .data


def set_then_mutate_old_view(x: T) -> object:
    x_view = x.view(-1)
    set_to(x, torch.ones(2))
    x_view.mul_(2)
    return x + 0


def set_to_new_tensor(x: T) -> object:
    set_to(x, torch.arange(6.0).view(2, 3))
    return x * 2


def set_to_other_input_then_mutate(a: T, b: T) -> object:
    set_to(a, b)
    b.mul_(2)
    return a + b


def set_then_mutate(a: T) -> object:
    set_to(a, torch.zeros(3))
    a.add_(1)
    return a


def set_input_mutation(a: T) -> object:
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    set_to(a, b)
    return a * b


def set_nop(a: T) -> object:
    b = torch.arange(9, dtype=a.dtype)
    a_old = torch.ops.aten.alias.default(a)
    set_to(a, b)
    set_to(a, a_old)
    return a + b.reshape(3, 3)


def set_steals_view_chain(a: T, b: T) -> object:
    a_ = a.mul(2)
    b_ = b.mul(2)
    b_slice = b_[1].view(3, 3)
    set_to(a_, b_slice)
    a_.view(-1).mul_(2)
    return a_ * b_slice


def set_storage_overload(x: T, y: T) -> object:
    x.set_(y.untyped_storage(), 1, (2,), (2,))
    return x + 1


def mutate_then_set(a: T, b: T) -> object:
    a.mul_(2)
    set_to(a, b)
    return a + 1


def mutate_old_storage_then_set(a: T, old: T, b: T) -> object:
    a.mul_(2)
    set_to(a, b)
    a.add_(1)
    return old + 0


def data_mul(x: T) -> object:
    x.data.mul_(2)
    return x + 1


def data_assign(x: T, y: T) -> object:
    x.data = y
    return x * 2


def data_assign_new_shape(x: T) -> object:
    x.data = torch.ones(5)
    return x + 1


STORAGE_MUTATIONS = [
    Case(
        name="set_then_mutate_old_view",
        fn=set_then_mutate_old_view,
        make_inputs=lambda: (torch.arange(2.0),),
        inductor=True,
    ),
    Case(name="set_to_new_tensor", fn=set_to_new_tensor, make_inputs=lambda: (randn(4),)),
    Case(
        name="set_to_other_input_then_mutate",
        fn=set_to_other_input_then_mutate,
        make_inputs=lambda: (torch.ones(3, 3), torch.zeros(3, 3)),
    ),
    Case(name="set_then_mutate", fn=set_then_mutate, make_inputs=lambda: (randn(2, 2),)),
    Case(name="set_input_mutation", fn=set_input_mutation, make_inputs=lambda: (torch.ones(3, 3),)),
    Case(name="set_nop", fn=set_nop, make_inputs=lambda: (torch.ones(3, 3),)),
    Case(name="set_steals_view_chain", fn=set_steals_view_chain, make_inputs=lambda: (torch.ones(3, 3), randn(3, 9))),
    Case(name="set_storage_overload", fn=set_storage_overload, make_inputs=lambda: (randn(3), randn(6))),
    Case(name="mutate_then_set", fn=mutate_then_set, make_inputs=lambda: (randn(3), randn(2))),
    Case(
        name="mutate_old_storage_then_set",
        fn=mutate_old_storage_then_set,
        make_inputs=lambda: (base := randn(3), base.view(-1), randn(3)),
    ),
    Case(name="data_mul", fn=data_mul, make_inputs=lambda: (randn(3),)),
    Case(name="data_assign", fn=data_assign, make_inputs=lambda: (randn(3), randn(3))),
    Case(name="data_assign_new_shape", fn=data_assign_new_shape, make_inputs=lambda: (randn(3),)),
]


# ---------------------------------------------------------------------------------------------------------------
# Outputs that alias inputs, intermediates or other outputs


VIEWS: dict[str, Callable[[T], object]] = {
    "itself": lambda x: x,
    "view": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(4, 3),
    "transpose": lambda x: x.transpose(0, 1),
    "select": lambda x: x[1],
    "slice": lambda x: x[:, 1:3],
    "diagonal": lambda x: x.diagonal(),
    "unbind": lambda x: x.unbind(0),
    "split": lambda x: torch.split(x, 2, dim=1),
    "expand": lambda x: x[:, :1].expand(3, 5),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 4), 1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "ellipsis": lambda x: x[...],
    "narrow": lambda x: x.narrow(1, 1, 2),
    "chunk": lambda x: x.chunk(3, dim=0),
    "alias": torch.ops.aten.alias.default,
    "detach": lambda x: x.detach(),
    "permute_contiguous": lambda x: x.t().contiguous(),
}


def views_of_intermediate(x: T) -> object:
    out = x * 3
    return out.view(-1)


def intermediate_and_view(x: T) -> object:
    out = x * 3
    return out, out.view(-1)


def view_and_intermediate(x: T) -> object:
    out = x * 3
    return out.view(-1), out, out[0].detach()


def intermediates_mixed(x: T) -> object:
    out1 = x * 3
    out2 = x * 4
    return out1.view(-1), out2.transpose(1, 0), out1.transpose(1, 0)


def views_of_other_output(x: T) -> object:
    y = x + 1
    return y, y[0], y.t()


def several_views_of_input(x: T) -> object:
    return x[0], x[1], x.view(-1)


def views_of_mutated_input(x: T) -> object:
    x.add_(1)
    return x[0], x.t()


def returned_twice(x: T) -> object:
    return x, x


def intermediate_returned_twice(x: T) -> object:
    y = x + 1
    return y, y


def equal_but_distinct(x: T) -> object:
    return x + 1, x + 1


def non_tensor_outputs(x: T) -> object:
    return x.shape[0], None, x + 1, x.shape


def view_then_mutate_output(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, torch.Tensor)
    out.mul_(3)


def first_output_mul(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, tuple)
    out[0].mul_(3)


def mutate_input_after(out: object, args: tuple[object, ...]) -> None:
    x = args[0]
    assert isinstance(x, torch.Tensor)
    x.view(-1).add_(10)


def outputs_are_aliased(a: T) -> object:
    b = a.mul(2)
    c = b.view(-1)
    return b, c


ALIASED_OUTPUTS = [
    *(Case(name=f"output_is_{name}_of_input", fn=fn, make_inputs=lambda: (randn(3, 4),)) for name, fn in VIEWS.items()),
    Case(name="view_of_intermediate", fn=views_of_intermediate, make_inputs=lambda: (randn(3, 3),), inductor=True),
    Case(name="intermediate_and_view", fn=intermediate_and_view, make_inputs=lambda: (randn(3, 3),)),
    Case(name="view_and_intermediate", fn=view_and_intermediate, make_inputs=lambda: (randn(3, 3),)),
    Case(name="intermediates_mixed", fn=intermediates_mixed, make_inputs=lambda: (randn(3, 3),)),
    Case(name="views_of_other_output", fn=views_of_other_output, make_inputs=lambda: (randn(2, 3),)),
    Case(name="several_views_of_input", fn=several_views_of_input, make_inputs=lambda: (randn(2, 3),)),
    Case(name="views_of_mutated_input", fn=views_of_mutated_input, make_inputs=lambda: (randn(2, 3),)),
    Case(name="returned_twice", fn=returned_twice, make_inputs=lambda: (randn(2),)),
    Case(name="intermediate_returned_twice", fn=intermediate_returned_twice, make_inputs=lambda: (randn(2),)),
    Case(name="equal_but_distinct", fn=equal_but_distinct, make_inputs=lambda: (randn(2),), inductor=True),
    Case(name="non_tensor_outputs", fn=non_tensor_outputs, make_inputs=lambda: (randn(2, 3),)),
    Case(
        name="output_view_mutated_after_call",
        fn=VIEWS["view"],
        make_inputs=lambda: (randn(2, 3),),
        after_call=view_then_mutate_output,
    ),
    Case(
        name="input_mutated_after_call_seen_by_output",
        fn=VIEWS["transpose"],
        make_inputs=lambda: (randn(2, 3),),
        after_call=mutate_input_after,
    ),
    Case(
        name="outputs_are_aliased",
        fn=outputs_are_aliased,
        make_inputs=lambda: (randn(3),),
        after_call=first_output_mul,
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# Inputs that alias each other


def mutate_first_read_second(a: T, b: T) -> object:
    a.add_(1)
    return a + b


def mutate_second_read_first(a: T, b: T) -> object:
    b.mul_(2)
    return a + 1


def overlapping(a: T, b: T) -> object:
    a.mul_(2)
    return b.clone()


def false_aliasing(a: T, b: T) -> object:
    a.mul_(3)
    b.mul_(2)
    return a.clone().view(-1) + b.clone().view(-1)


def data_and_metadata_aliases_other(a: T, b: T) -> object:
    a.mul_(2)
    b.t_()
    return a.mul(b)


def base_and_row(base: T, row: T) -> object:
    row.mul_(2)
    return base.sum(0)


def no_mutation_aliased(a: T, b: T) -> object:
    return a + b


def mutate_then_return_other(a: T, b: T) -> object:
    a.add_(1)
    return b


def set_one_alias(a: T, b: T) -> object:
    set_to(a, torch.zeros(2))
    b.add_(1)
    return a + 1


ALIASED_INPUTS = [
    Case(name="same_tensor_twice", fn=mutate_first_read_second, make_inputs=lambda: (x := randn(3), x), inductor=True),
    Case(
        name="tensor_and_its_flat_view",
        fn=mutate_second_read_first,
        make_inputs=lambda: (x := randn(2, 2), x.view(-1)),
    ),
    Case(name="overlapping_views", fn=overlapping, make_inputs=lambda: (base := randn(4, 4), base[0:2], base[1:3])[1:]),
    Case(
        name="non_overlapping_rows",
        fn=false_aliasing,
        make_inputs=lambda: (base := randn(4, 4), base[0], base[1])[1:],
    ),
    Case(
        name="non_overlapping_strided",
        fn=false_aliasing,
        make_inputs=lambda: (base := randn(4, 4), base[:, 0:2], base[:, 2:4])[1:],
    ),
    Case(
        name="data_and_metadata_aliases_other",
        fn=data_and_metadata_aliases_other,
        make_inputs=lambda: (x := randn(2, 2) + 1, x[0], x[0])[1:],
    ),
    Case(name="base_and_row", fn=base_and_row, make_inputs=lambda: (base := randn(3, 3), base[1])),
    Case(name="no_mutation_aliased", fn=no_mutation_aliased, make_inputs=lambda: (x := randn(3, 3), x.t())),
    Case(name="mutate_then_return_other", fn=mutate_then_return_other, make_inputs=lambda: (x := randn(2, 2), x[0])),
    Case(name="set_one_alias", fn=set_one_alias, make_inputs=lambda: (x := randn(2), x.view(-1))),
]


# ---------------------------------------------------------------------------------------------------------------
# Programs eager rejects: the compiled function must raise too


def write_to_expanded(x: T) -> object:
    x.add_(1)
    return x


def bad_view(x: T) -> object:
    return x.view(5)


def bad_promotion(x: T) -> object:
    x.add_(1.5)
    return x


def set_wrong_dtype(x: T) -> object:
    set_to(x, torch.ones(2, dtype=torch.int64))
    return x


EAGER_ERRORS = [
    Case(name="write_to_expanded", fn=write_to_expanded, make_inputs=lambda: (randn(1).expand(3),), eager_raises=True),
    Case(name="bad_view", fn=bad_view, make_inputs=lambda: (randn(2, 2),), eager_raises=True),
    Case(name="bad_promotion", fn=bad_promotion, make_inputs=lambda: (torch.arange(3),), eager_raises=True),
    Case(name="set_wrong_dtype", fn=set_wrong_dtype, make_inputs=lambda: (randn(2),), eager_raises=True),
]

CASES = DATA_MUTATIONS + METADATA_MUTATIONS + STORAGE_MUTATIONS + ALIASED_OUTPUTS + ALIASED_INPUTS + EAGER_ERRORS


@pytest.mark.parametrize(("case", "backend"), params(CASES, "inference"))
def test_inference_program_matches_eager(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    run_case(case, backend, compile_fn)
