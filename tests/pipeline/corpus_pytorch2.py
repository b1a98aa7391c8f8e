"""Corpus, PyTorch's own programs, second part: the mutation/aliasing tests of test_aotdispatch.py (TestAOTAutograd,
TestAOTDispatch, TestAOTExport, TestPartitioning) and the TwoTensor tests of test/dynamo/test_subclasses.py that
corpus_pytorch.py and corpus_pytorch_subclass.py did not yet cover, written fresh, each on plain tensors and (where
the program makes sense on one) on PairTensors, in an inference and a training variant.

Input: nothing. Output: `CASES2` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus; a
training variant's mutated inputs are non-leaves, as eager requires.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from subclasses.pair import PairTensor
from tests.pipeline import corpus_pytorch as plain
from tests.pipeline.corpus import Case, set_to
from tests.pipeline.corpus_pytorch_subclass import pair, pair_leaf

T = torch.Tensor
Make = plain.Make
MakeOne = Callable[..., T]


def kinds(name: str, fn: Callable[..., object], *shapes: tuple[int, ...], **kwargs: object) -> list[Case]:
    """The program on fresh plain tensors and on fresh PairTensors of `shapes`, each without and with grad."""

    def make(new: MakeOne) -> Make:
        return lambda rg: tuple(new(*s, rg=rg) for s in shapes)

    return [
        *plain.both(name, fn, make(plain.t), **kwargs),  # type: ignore[arg-type]
        *plain.both(f"pair_{name}", fn, make(pair), **kwargs),  # type: ignore[arg-type]
    ]


def both_kinds(name: str, fn: Callable[..., object], make: Callable[[MakeOne, bool], tuple[object, ...]]) -> list[Case]:
    """Like `kinds`, for inputs built by `make(new_tensor, requires_grad)` (views, aliases, non-tensors)."""
    return [
        *plain.both(name, fn, lambda rg: make(plain.t, rg)),
        *plain.both(f"pair_{name}", fn, lambda rg: make(pair, rg)),
    ]


def leaf_kinds(name: str, fn: Callable[..., object], make: Callable[[MakeOne], tuple[object, ...]]) -> list[Case]:
    """The program on leaves that require grad, plain and PairTensor (programs that do not mutate their inputs)."""

    def plain_leaf(*shape: int, rg: bool = False) -> T:
        return plain.leaf(*shape)

    def pair_leaf_rg(*shape: int, rg: bool = False) -> T:
        return pair_leaf(*shape)

    return [
        Case(name=name, fn=fn, make_inputs=lambda: make(plain_leaf)),
        Case(name=f"pair_{name}", fn=fn, make_inputs=lambda: make(pair_leaf_rg)),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Input mutations (data and metadata), and outputs that are views of mutated inputs


def mutation_is_output(a: T) -> object:
    a.mul_(2)
    return a


def mutate_first_and_third(a: T, b: T, c: T) -> object:
    a.mul_(2)
    c.mul_(2)
    return a + b + c


def transpose_then_add(a: T, b: T) -> object:
    a.transpose_(1, 0)
    return a + b


def transpose_then_mul(a: T) -> object:
    a.transpose_(1, 0)
    a.mul_(2)
    return a + 1


def detach_mul_no_grad_mixed(a: T) -> object:
    a.detach().mul_(2)
    a.mul_(3)
    with torch.no_grad():
        a.mul_(4)
    return a + 5


def whole_body_no_grad(a: T) -> object:
    with torch.no_grad():
        a.mul_(2)
        return a + 3


def detached_write(a: T) -> object:
    a.detach().mul_(2)
    return a + 3


def no_grad_write(a: T) -> object:
    with torch.no_grad():
        a.mul_(2)
    return a + 3


def resize_smaller(a: T, b: T) -> object:
    a.resize_(2, 2)
    return a + b


def batch_norm_legit(inpt: T, weight: T, bias: T, running_mean: T, running_var: T) -> object:
    return torch._native_batch_norm_legit(inpt, weight, bias, running_mean, running_var, True, 0.5, 1e-5)


def mutate_two_return_views(a: T, b: T, c: T) -> object:
    a.mul_(2)
    c.mul_(3)
    return b.view(2, 2), c.view(2, 2)


def data_and_metadata_views(a: T, b: T, c: T) -> object:
    b.mul_(3)
    c.t_()
    return a.view(2, 2), b.view(2, 2), c.view(2, 2)


def add_then_flat_view(a: T) -> object:
    a.add_(1)
    return a.view(-1)


def mutations_output_views_multiple(a: T, b: T, c: T, d: T) -> object:
    b.transpose_(1, 0)
    c.add_(1)
    return d + 1, b.diagonal(), a + c


def detach_before_mutation(a: T) -> object:
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


def transpose_then_row_write(a: T) -> object:
    a.t_()
    a[0].mul_(2)
    return a.view(a.shape)


def inplace_view_and_view(a: T, b: T) -> object:
    a.t_()
    return b.view(b.shape), a.view(a.shape)


def squeeze_clone_mutation(a: T) -> object:
    b = a.clone().squeeze(-1)
    b.add_(1.0)
    return a + b


def add_return_nothing(a: T) -> object:
    a.add_(1)
    return ()


def mul_then_plus_one(a: T) -> object:
    a.mul_(2)
    return a + 1


def _strided_rows(new: MakeOne, rg: bool) -> tuple[object, ...]:
    return (new(4, rg=rg)[0::2],)


def _column(new: MakeOne, rg: bool) -> tuple[object, ...]:
    return (new(2, 2, rg=rg)[:, 0],)


def _bn_inputs(rg: bool) -> tuple[object, ...]:
    w, b = (plain.leaf(5) if rg else plain.t(5) for _ in range(2))
    return plain.t(2, 5, 5, 5, rg=rg), w, b, plain.t(5), torch.rand(5) + 0.5


INPUT_MUTATIONS = [
    *kinds("input_mutation_is_output", mutation_is_output, (3, 3), after_call=plain.mul_out(-1)),
    *kinds("input_mutation_multiple", mutate_first_and_third, (3, 3), (3, 3), (3, 3)),
    *kinds("input_mutation_metadata", transpose_then_add, (3, 3), (3, 3)),
    *kinds("input_mutation_metadata2", transpose_then_mul, (3, 3)),
    *kinds("input_mutation_no_grad_detach_mixed", detach_mul_no_grad_mixed, (4,)),
    *kinds("input_mutation_no_grad_inference_graph", whole_body_no_grad, (4,)),
    *leaf_kinds("input_mutation_requires_grad_detach_leaf", detached_write, lambda new: (new(4),)),
    *leaf_kinds("input_mutation_requires_grad_no_grad_leaf", no_grad_write, lambda new: (new(4),)),
    *leaf_kinds("input_mutation_no_grad_inference_graph_leaf", whole_body_no_grad, lambda new: (new(4),)),
    Case(name="input_mutation_resize_smaller", fn=resize_smaller, make_inputs=lambda: (plain.t(3, 3), plain.t(2, 2))),
    Case(
        name="input_mutation_resize_smaller_other_grad",
        fn=resize_smaller,
        make_inputs=lambda: (plain.t(3, 3), plain.leaf(2, 2)),
    ),
    *plain.both("input_mutation_batchnorm", batch_norm_legit, _bn_inputs),
    *kinds("input_output_view_mutate_multiple", mutate_two_return_views, (2, 2), (2, 2), (2, 2)),
    *kinds("input_output_view_metadata_mutate_multiple", data_and_metadata_views, (2, 2), (2, 2), (2, 2)),
    *kinds("input_mutation_and_output_view", add_then_flat_view, (2, 2), after_call=plain.mul_out(-1)),
    *kinds("input_mutation_output_view_multiple", mutations_output_views_multiple, (2, 2), (2, 2), (2, 2), (2, 2)),
    *kinds("view_detach", detach_before_mutation, (3, 3)),
    *kinds("input_data_and_metadata_mutation", transpose_then_row_write, (3, 3)),
    *kinds("view_and_inplace_view", inplace_view_and_view, (3, 3), (3, 3)),
    *kinds("squeeze_mutation", squeeze_clone_mutation, (3, 1)),
    *both_kinds("mutates_input_noncontiguous", add_return_nothing, _strided_rows),
    *both_kinds("input_mutation_noncontiguous", mul_then_plus_one, _column),
]


# ---------------------------------------------------------------------------------------------------------------
# Outputs aliasing intermediates, inputs and each other; multi-output views


def intermediate_and_its_view(a: T) -> object:
    b = a.mul(2)
    return b, b.view(-1)


def view_then_intermediate(a: T) -> object:
    out = a * 3
    return out.view(-1), out


def intermediate_then_view(a: T) -> object:
    out = a * 3
    return out, out.view(-1)


def view_intermediate_detached_row(a: T) -> object:
    out = a * 3
    return out.view(-1), out, out[0].detach()


def all_alias_types(a: T) -> object:
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.squeeze(), tmp.transpose(1, 0), a.unsqueeze(0)


def metadata_mutation_then_transposed_intermediate(a: T) -> object:
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.transpose(1, 0)


def unbind_input(a: T) -> object:
    return list(a.unbind(0))


def unbind_input_and_view(a: T) -> object:
    return *a.unbind(0), a.view(a.shape)


def unbind_intermediate(a: T) -> object:
    return list((a * 3).unbind(0))


def unbind_intermediate_and_base(a: T) -> object:
    out = a * 3
    return *out.unbind(0), out


def views_of_each_input(a: T, b: T) -> object:
    return a.view(a.shape), b.view(b.shape)


def detached_input_and_input(a: T, b: T) -> object:
    return a.detach(), b


def detached_fresh_and_input(a: T, b: T) -> object:
    return a.add(1).detach(), b


def plus_one_and_size(x: T) -> object:
    return [x + 1, x.shape[0]]


def doubled_dict(d: dict[str, T]) -> object:
    return {k: v * 2 for k, v in d.items()}


def times_third(a: object, b: object, c: T) -> object:
    assert isinstance(a, int)
    return a * c


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g * 0.5


def custom_identity(x: T) -> object:
    return Identity.apply(x)  # type: ignore[no-untyped-call]


def _view_and_row(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(2, 2, rg=rg) * 2
    return x.view(-1), x[0]


def _two_leaves(new: MakeOne) -> tuple[object, ...]:
    return new(3, 3), new(3, 3)


OUTPUT_ALIASES = [
    *kinds("outputs_are_aliased", intermediate_and_its_view, (3,), after_call=plain.mul_out(0)),
    *kinds("output_aliases_intermediate_and_returned", view_then_intermediate, (3, 3), after_call=plain.mul_out(1)),
    *kinds(
        "output_aliases_intermediate_and_returned_flipped",
        intermediate_then_view,
        (3, 3),
        after_call=plain.mul_out(0),
    ),
    *kinds(
        "output_aliases_intermediate_and_returned_different_grad",
        view_intermediate_detached_row,
        (3, 3),
        after_call=plain.mul_out(1),
    ),
    *kinds("output_all_alias_types", all_alias_types, (1, 2, 4)),
    *kinds("subclass_metadata_mutation", metadata_mutation_then_transposed_intermediate, (1, 2, 4)),
    *leaf_kinds("output_aliases_input_multi_output_view", unbind_input, lambda new: (new(3, 3),)),
    Case(
        name="output_aliases_input_multi_output_view_mutated_after",
        fn=unbind_input,
        make_inputs=lambda: (plain.leaf(3, 3),),
        after_call=plain.mul_out(0),
    ),
    *kinds(
        "output_aliases_input_multi_output_view_and_view", unbind_input_and_view, (3, 3), after_call=plain.mul_out(-1)
    ),
    *leaf_kinds("output_aliases_intermediate_multi_output_view", unbind_intermediate, lambda new: (new(3, 3),)),
    *kinds(
        "output_aliases_intermediate_multi_output_view_and_base",
        unbind_intermediate_and_base,
        (3, 3),
        after_call=plain.mul_out(-1),
    ),
    *both_kinds("output_aliases_multiple_inputs_get_correct_one", views_of_each_input, _view_and_row),
    *leaf_kinds("some_outputs_dont_require_grad_view", detached_input_and_input, _two_leaves),
    *leaf_kinds("some_outputs_dont_require_grad_non_view", detached_fresh_and_input, _two_leaves),
    *kinds("dynamic_shape_output_not_in_bw_graph", plus_one_and_size, (5,)),
    *both_kinds("output_dict_of_input_dict", doubled_dict, lambda new, rg: ({"a": new(3, rg=rg), "b": new(3, rg=rg)},)),
    *both_kinds("non_tensor_and_none_inputs", times_third, lambda new, rg: (2, None, new(3, 3, rg=rg))),
    *leaf_kinds("input_output_alias_custom_autograd_function", custom_identity, lambda new: (new(2, 2),)),
    *kinds("input_output_alias_custom_autograd_function_nonleaf", custom_identity, (2, 2)),
    *leaf_kinds("custom_autograd_function_view_of_leaf", plain.custom_view, lambda new: (new(2, 2),)),
    *kinds("custom_autograd_function_view", plain.custom_view, (2, 2)),
]


# ---------------------------------------------------------------------------------------------------------------
# Aliased and duplicated inputs (synthetic bases), false aliasing


def mul_first_transpose_second(a: T, b: T) -> object:
    a.mul_(2)
    b.t_()
    return a.mul(b)


def add_first_view_second(a: T, b: T) -> object:
    a.add_(1)
    return b.view(b.shape)


def unsqueeze_both(x: T, y: T) -> object:
    x.unsqueeze_(0)
    y.unsqueeze_(0)
    return x + y


def mul_both_clone_flat(a: T, b: T) -> object:
    a.mul_(3)
    b.mul_(2)
    return a.clone().view(-1) + b.clone().view(-1)


def _same_row_twice(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(2, 2, rg=rg)
    return x[0], x[0]


def _flat_twice(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(2, 2, rg=rg)
    return x.view(-1), x.view(-1)


def _detached_rows(new: MakeOne, rg: bool) -> tuple[object, ...]:
    base = new(4, 4)
    return base[0].detach(), base[1].detach()


def _same_twice(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(3, 3, rg=rg)
    return x, x


def _distinct(new: MakeOne, rg: bool) -> tuple[object, ...]:
    return new(3, 3, rg=rg), new(3, 3, rg=rg)


def _strided(
    size: tuple[int, ...], stride: tuple[int, ...], off_a: int, off_b: int
) -> Callable[[MakeOne, bool], tuple[object, ...]]:
    def make(new: MakeOne, rg: bool) -> tuple[object, ...]:
        x = new(256, rg=rg)
        return x.as_strided(size, stride, off_a), x.as_strided(size, stride, off_b)

    return make


def _strided_3d_then_slice(start: int) -> Callable[[MakeOne, bool], tuple[object, ...]]:
    def make(new: MakeOne, rg: bool) -> tuple[object, ...]:
        x = new(256, rg=rg)
        a = x.as_strided((2, 4, 3), (110, 24, 4), 5)
        return a, x[start : start + a.numel()]

    return make


def _wide_strided(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(256, rg=rg)
    return x.as_strided((4, 4), (8, 1), 0), x.as_strided((4, 4), (8, 1), 28)


ALIASED_INPUTS = [
    *both_kinds("input_data_and_metadata_mutation_aliases_other_input", mul_first_transpose_second, _same_row_twice),
    *both_kinds("input_mutation_aliases_and_output_alias", add_first_view_second, _flat_twice),
    *both_kinds("synthetic_base_base_attribute_is_none", plain.add_first_read_both, _detached_rows),
    *both_kinds("invalid_dupe_distinct", unsqueeze_both, _distinct),
    *both_kinds("invalid_dupe_same", unsqueeze_both, _same_twice),
    *both_kinds("false_aliasing_wide_rows", mul_both_clone_flat, _wide_strided),
    *both_kinds("false_aliasing_strided_gap", mul_both_clone_flat, _strided((4, 4), (9, 1), 0, 23)),
    *both_kinds("false_aliasing_3d_then_slice", mul_both_clone_flat, _strided_3d_then_slice(196)),
    *both_kinds("aliasing_strided_overlap_by_one", mul_both_clone_flat, _strided((4, 4), (9, 1), 0, 25)),
    *both_kinds("aliasing_3d_then_slice_overlap", mul_both_clone_flat, _strided_3d_then_slice(195)),
]


# ---------------------------------------------------------------------------------------------------------------
# set_(): storage swaps of inputs


def set_to_arange_no_grad(a: T) -> object:
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    with torch.no_grad():
        set_to(a, b)
    return a * b


def set_steals_view_chain(a: T, b: T) -> object:
    a_ = a.mul(2)
    b_ = b.mul(2)
    b_slice = b_[1].view(3, 3)
    set_to(a_, b_slice)
    a_.view(-1).mul_(2)
    return a_ * b_slice


def set_then_write_source(a: T, b: T) -> object:
    with torch.no_grad():
        set_to(a, b)
    b.mul_(2)
    return a + b


def set_then_write_old_view(a: T) -> object:
    a_view = a.view(-1)
    tmp = torch.ones(3, 3, requires_grad=True)
    with torch.no_grad():
        set_to(a, tmp)
    a_view.mul_(2)
    return a + tmp


def set_there_and_back(a: T) -> object:
    b = torch.arange(9, dtype=a.dtype)
    a_old = torch.ops.aten.alias.default(a)
    with torch.no_grad():
        set_to(a, b)
        set_to(a, a_old)
    return a + b.reshape(3, 3)


SET_CASES = [
    *plain.both("input_mutation_set__input_mutation", set_to_arange_no_grad, plain._g(3, 3)),
    Case(name="set__steals_view_chain", fn=set_steals_view_chain, make_inputs=lambda: (plain.t(3, 3), plain.t(3, 9))),
    *plain.both(
        "set__and_data_mutation_good", set_then_write_source, lambda rg: (plain.t(3, 3, rg=rg), plain.t(3, 3, rg=rg))
    ),
    *plain.both("set__and_data_mutation_bad", set_then_write_old_view, plain._g(3, 3)),
    *plain.both("input_mutation_set__nop", set_there_and_back, plain._g(3, 3)),
]


# ---------------------------------------------------------------------------------------------------------------
# Grad modes, requires_grad_ on an input, mutations in the backward


def requires_grad_on_input(a: T, b: T) -> object:
    a.requires_grad_(True)
    return a.mul(3), b.mul(4)


def no_grad_write_of_intermediate(x: T) -> object:
    y = x + 2
    with torch.no_grad():
        y.add_(2)
    return x * 2 + y


def enable_grad_matmul_then_write(x: T) -> object:
    with torch.enable_grad():
        y = x @ x
    y.add_(2)
    return x.sum() + y.sum()


def enable_grad_writes(x: T) -> object:
    with torch.enable_grad():
        y = x + 5
        y.add_(5)
        y.add_(7)
        return x.cos() + y.sin()


def matmul_write_then_view(x: T) -> object:
    y = x @ x
    y.add_(2)
    return x.sum() + y.view(1, 4).sum()


def square_no_grad(x: T) -> object:
    with torch.no_grad():
        return torch.mul(x, x)


class SavesAndWritesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        x.mul_(2)
        return g.clone()


class TransposesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, a: T, b: T) -> tuple[T, T]:
        ctx.save_for_backward(b)
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, ga: T, gb: T) -> tuple[T, T]:
        (b,) = ctx.saved_tensors  # type: ignore[attr-defined]
        b.transpose_(1, 0)
        return ga.clone(), gb.clone()


class WritesGradOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x.clone()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        g.mul_(2)
        return g.clone()


def backward_mutation_data(a: T, b: T) -> object:
    return a * SavesAndWritesInBackward.apply(b)  # type: ignore[no-untyped-call]


def backward_mutation_metadata(a: T, b: T) -> object:
    a_, b_ = TransposesInBackward.apply(a, b)  # type: ignore[no-untyped-call]
    return a_ * b_


def backward_mutation_on_grad_out(a: T, b: T) -> object:
    return WritesGradOutput.apply(a * b)  # type: ignore[no-untyped-call]


GRAD_MODES = [
    Case(
        name="input_inplace_requires_grad_true",
        fn=requires_grad_on_input,
        make_inputs=lambda: (plain.t(3, 3), plain.leaf(3, 3)),
    ),
    Case(
        name="pair_input_inplace_requires_grad_true",
        fn=requires_grad_on_input,
        make_inputs=lambda: (pair(3, 3), pair_leaf(3, 3)),
    ),
    *kinds("predispatch_func_simple", no_grad_write_of_intermediate, (2, 2)),
    *kinds("predispatch_composite_implicit", enable_grad_matmul_then_write, (2, 2)),
    *kinds("predispatch_with_autograd_op", enable_grad_writes, (2, 2)),
    *kinds("predispatch_func_view", matmul_write_then_view, (2, 2)),
    *leaf_kinds("generate_gives_inference_graph", square_no_grad, lambda new: (new(4),)),
    Case(
        name="backward_mutation_data", fn=backward_mutation_data, make_inputs=lambda: (plain.leaf(3, 3), plain.t(3, 3))
    ),
    Case(
        name="backward_mutation_data_requires_grad",
        fn=backward_mutation_data,
        make_inputs=lambda: (plain.leaf(3, 3), plain.leaf(3, 3)),
    ),
    Case(
        name="backward_mutation_metadata",
        fn=backward_mutation_metadata,
        make_inputs=lambda: (plain.leaf(3, 3), plain.t(3, 3)),
    ),
    Case(
        name="backward_mutation_on_grad_out",
        fn=backward_mutation_on_grad_out,
        make_inputs=lambda: (plain.leaf(3, 3), plain.leaf(3, 3)),
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# PairTensor mixed with plain tensors (TestAOTDispatch), views of PairTensor inputs and nested PairTensors
# (test/dynamo/test_subclasses.py)


def output_alias_and_product(a: T, b: T) -> object:
    return b.view(b.shape), a * b


def mul_both(a: T, b: T) -> object:
    a.mul_(2)
    b.mul_(3)
    return a + b


def metadata_both(a: T, b: T) -> object:
    a.t_()
    b.unsqueeze_(0)
    return a + b


def metadata_and_data_both(a: T, b: T) -> object:
    a.t_()
    b.unsqueeze_(0)
    a.mul_(2)
    b.mul_(3)
    return a + b


def mul_both_view_second(a: T, b: T) -> object:
    a.mul_(2)
    b.mul_(3)
    return b.view(b.shape), a + b


def double(x: T) -> object:
    return x * 2


def sins_times_sizes(x: T, i: T, y: T) -> object:
    out = x.sin() + i.sin() + y.sin()
    return out * (x.shape[0] * i.shape[1] * y.shape[0])


def _plain_and_pair(rg: bool) -> tuple[object, ...]:
    return plain.t(3, 3, rg=rg), pair(3, 3, rg=rg)


def _plain_and_pair_leaves() -> tuple[object, ...]:
    return plain.leaf(3, 3), pair_leaf(3, 3)


def _pair_view(view: Callable[[T], T]) -> Make:
    return lambda rg: (view(pair(4, 15, rg=rg)),)


PAIR_VIEWS: dict[str, Callable[[T], T]] = {
    "narrow": lambda t: t.narrow(dim=-1, start=3, length=8),
    "split": lambda t: t.split(5, -1)[2],  # type: ignore[no-untyped-call]  # Tensor.split is unannotated in torch
    "split_with_sizes": lambda t: t.split_with_sizes([9, 6], -1)[1],
    "expand": lambda t: t.unsqueeze(-1).expand(4, 15, 10),
    "select": lambda t: t.select(-1, 6),
    "slice_2d": lambda t: t[2:3, 5:9],
    "view": lambda t: t.view(-1, 15),
}


def _nested_pairs() -> tuple[object, ...]:
    i = plain.leaf(2, 2)
    x = PairTensor(i, i.clone())
    y = PairTensor(x.clone(), x.clone())
    return x, i, y


def _nested_pairs_detached() -> tuple[object, ...]:
    i = plain.t(2, 2)
    x = PairTensor(i, i.clone())
    return x, i, PairTensor(x.clone(), x.clone())


def _mixed_depth() -> tuple[object, ...]:
    data = plain.t(2, 3)
    s = PairTensor(data, data.clone())
    return (PairTensor(PairTensor(s.a, s.b), PairTensor(s.clone(), s.clone())),)


PAIR_MIXED = [
    Case(name="aot_dispatch_output_alias", fn=output_alias_and_product, make_inputs=_plain_and_pair_leaves),
    *plain.both("aot_dispatch_input_mutation", mul_both, _plain_and_pair),
    *plain.both("aot_dispatch_input_metadata_mutation", metadata_both, _plain_and_pair),
    *plain.both("aot_dispatch_input_data_and_metadata_mutation", metadata_and_data_both, _plain_and_pair),
    *plain.both("aot_dispatch_input_mutation_and_output_alias", mul_both_view_second, _plain_and_pair),
    *(
        case
        for name, view in PAIR_VIEWS.items()
        for case in plain.both(f"subclass_views_{name}", double, _pair_view(view))
    ),
    Case(name="two_tensor_nested", fn=sins_times_sizes, make_inputs=_nested_pairs),
    Case(name="two_tensor_nested_no_grad", fn=sins_times_sizes, make_inputs=_nested_pairs_detached),
    Case(name="two_tensor_two_tensor_two_tensor", fn=lambda x: x.sin(), make_inputs=_mixed_depth),
]


# ---------------------------------------------------------------------------------------------------------------
# Modules: a buffer and an input both mutated (TestAOTExport)


class BufferAndInputMutated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buffer1", torch.ones(6, 4))

    def forward(self, x: T, y: T) -> tuple[T, T]:
        y.add_(4)
        buf = self.get_buffer("buffer1")
        buf.add_(5)
        return x.cos().sum() + y.sin().sum(), buf.sum()


MODULES = [
    Case(
        name="forward_mutation_multiple_mut",
        fn=BufferAndInputMutated(),
        make_inputs=lambda: (plain.t(6, 4), plain.t(6, 4)),
    ),
    Case(
        name="forward_mutation_multiple_mut_train",
        fn=BufferAndInputMutated(),
        make_inputs=lambda: (plain.leaf(6, 4), plain.t(6, 4, rg=True)),
    ),
]

CASES2 = INPUT_MUTATIONS + OUTPUT_ALIASES + ALIASED_INPUTS + SET_CASES + GRAD_MODES + PAIR_MIXED + MODULES
