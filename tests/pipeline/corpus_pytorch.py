"""Corpus, PyTorch's own mutation/aliasing programs, plain tensors (written fresh after test_aotdispatch.py,
test_functionalization.py and the autograd/no_grad/module tests), each in an inference and a training variant
where eager allows one.

Input: nothing. Output: `CASES`, a list of `Case` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique; a training variant's
mutated inputs are non-leaves (`leaf.clone()`), as eager requires.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from tests.pipeline.corpus import Case

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]


def t(*shape: int, rg: bool = False) -> T:
    """A fresh tensor; with `rg`, a non-leaf that requires grad (it may be mutated in place)."""
    return torch.randn(shape, requires_grad=rg).clone()


def leaf(*shape: int) -> T:
    return torch.randn(shape, requires_grad=True)


def both(
    name: str, fn: Callable[..., object], make: Make, *, train_raises: bool = False, **kwargs: object
) -> list[Case]:
    """The program on inputs without grad, and again (`<name>_train`) on inputs that require grad.

    `train_raises`: eager rejects the training variant (an in-place op on a multi-output view that requires grad).
    """
    return [
        Case(name=name, fn=fn, make_inputs=lambda: make(False), **kwargs),  # type: ignore[arg-type]
        Case(
            name=f"{name}_train",
            fn=fn,
            make_inputs=lambda: make(True),
            eager_raises=train_raises,
            **kwargs,  # type: ignore[arg-type]
        ),
    ]


def mul_out(index: int) -> Callable[[object, tuple[object, ...]], None]:
    """after_call: multiply output `index` (or the only output, for -1 on a tensor) in place."""

    def after(out: object, args: tuple[object, ...]) -> None:
        target = out if isinstance(out, torch.Tensor) else out[index]  # type: ignore[index]
        assert isinstance(target, torch.Tensor)
        target.mul_(2)

    return after


def mul_arg0(out: object, args: tuple[object, ...]) -> None:
    a = args[0]
    assert isinstance(a, torch.Tensor)
    a.mul_(3)


# ---------------------------------------------------------------------------------------------------------------
# Aliased inputs (synthetic bases)


def add_first_read_both(a: T, b: T) -> object:
    a.add_(1)
    return a + b


def mutate_third_return_views(a: T, b: T, c: T) -> object:
    c.mul_(2)
    return b.add(1), c.view(-1)


def metadata_mutation_of_alias(a: T, b: T) -> object:
    a.t_()
    return a + b


def mutate_first_none_need_grad(a: T, b: T, c: T) -> object:
    a.mul_(2)
    return b + 1, c + 1


def bases_out_of_order(a: T, b: T, c: T, d: T) -> object:
    b.add_(1)
    d.unsqueeze_(0)
    return a + c + d, b.view(-1)


def alias_everything(a: T, b: T, c: T) -> object:
    c.mul_(2)
    b.t_()
    tmp = a + c
    out1 = tmp.view(-1)
    return out1, b.t(), out1.unsqueeze(0)


def views_of_each(a: T, b: T) -> object:
    return a.view(a.shape), b.view(b.shape)


def add_dupes(x: T, y: T) -> object:
    return x + y


def dupe_torture(x: T, y: T) -> object:
    x.t_()
    y.unsqueeze_(0)
    return x + y


def dupe_returned(a: T, b: T, a2: T) -> object:
    a[0].add_(1)
    return a2


def dupe_left_bias(x: T, y: T) -> object:
    x.t_()
    return (x + y,)


def both_aliases_mutated(a: T, b: T) -> object:
    a.mul_(2)
    b.add_(1)
    return a.sum() + b.sum()


def _two_rows(rg: bool) -> tuple[object, ...]:
    x = t(4, 2, rg=rg)
    return x[0], x[0]


def _row_and_base(rg: bool) -> tuple[object, ...]:
    x = t(2, 2, rg=rg)
    return x[0], x


def _flat_pair_with_other(rg: bool) -> tuple[object, ...]:
    x, y = t(2, 2, rg=rg), t(2, 2, rg=rg)
    return x.view(-1), y, x.view(-1)


def _flat_twice(rg: bool) -> tuple[object, ...]:
    x = t(2, 2, rg=rg)
    return x.view(2, 2), x.view(2, 2)


def _flat_twice_and_grad(rg: bool) -> tuple[object, ...]:
    x = t(2, 2)
    return x.view(-1), x.view(-1), t(2, 2, rg=rg)


def _out_of_order(rg: bool) -> tuple[object, ...]:
    x1, x2 = t(2, 2, rg=rg), t(2, 2, rg=rg)
    return x1.view(-1), x2.view(-1), x1.view(-1), x2.view(-1)


def _everything(rg: bool) -> tuple[object, ...]:
    x1, x2 = t(2, 2, rg=rg), t(2, 2, rg=rg)
    return x1.view(-1), x2, x1.view(-1)


def _flat_and_base(rg: bool) -> tuple[object, ...]:
    x = t(2, 2, rg=rg)
    return x.view(-1), x


def _same_twice(rg: bool) -> tuple[object, ...]:
    x = t(3, 3, rg=rg)
    return x, x


def _dupe_with_other(rg: bool) -> tuple[object, ...]:
    a = t(2, rg=rg)
    return a, t(2), a


def _interleaved(rg: bool) -> tuple[object, ...]:
    x = t(4, 4, rg=rg)
    return x[:, 0:2], x[:, 2:4]


def _strided_overlap(rg: bool) -> tuple[object, ...]:
    x = t(64, rg=rg)
    return x.as_strided((4, 4), (9, 1), 0), x.as_strided((4, 4), (9, 1), 24)


def _strided_no_overlap(rg: bool) -> tuple[object, ...]:
    x = t(64, rg=rg)
    return x.as_strided((4, 4), (9, 1), 0), x.as_strided((4, 4), (9, 1), 22)


ALIASED_INPUTS = [
    *both("aliases_other_input", add_first_read_both, _two_rows),
    *both("aliases_other_input_is_base", add_first_read_both, _row_and_base),
    *both("aliased_mutation_output_alias", mutate_third_return_views, _flat_pair_with_other),
    *both("metadata_mutation_aliases", metadata_mutation_of_alias, _flat_twice),
    *both("aliases_none_require_grad", mutate_first_none_need_grad, _flat_twice_and_grad),
    *both("aliases_bases_out_of_order", bases_out_of_order, _out_of_order),
    *both("alias_everything", alias_everything, _everything),
    *both("outputs_view_correct_alias", views_of_each, _flat_and_base, after_call=mul_arg0),
    *both("dupe_arg", add_dupes, _same_twice),
    *both("dupe_arg_torture", dupe_torture, _same_twice),
    *both("dupe_arg_returned_as_output", dupe_returned, _dupe_with_other),
    *both("dupe_left_bias", dupe_left_bias, _same_twice),
    *both("false_aliasing_interleaved", both_aliases_mutated, _interleaved),
    *both("strided_aliases_overlap", both_aliases_mutated, _strided_overlap),
    *both("strided_aliases_no_overlap", both_aliases_mutated, _strided_no_overlap),
    Case(name="dupe_leaf_arg", fn=add_dupes, make_inputs=lambda: (x := leaf(3), x)),
]


# ---------------------------------------------------------------------------------------------------------------
# Outputs aliasing inputs, intermediates and each other


def intermediate_viewed_twice(a: T) -> object:
    out = a * 3
    return out.view(-1), out.view(-1)


def intermediate_returned_three_times(a: T) -> object:
    out = a * 3
    return out, out.view(-1), out


def intermediate_view_no_grad(a: T, b: T) -> object:
    out = a * 3
    return out.view(-1), b.add(1)


def intermediates_mixed(a: T) -> object:
    out1, out2 = a * 3, a * 4
    return out1.view(-1), out2.transpose(1, 0), out1.transpose(1, 0)


def inplace_view_then_detach(a: T) -> object:
    out = a * 3
    out.t_()
    out.detach_()
    return out, a + 1


def intermediate_inplace_view(a: T) -> object:
    out = a * 3
    out.t_()
    return out


def inplace_view_between_views(a: T) -> object:
    out = a * 3
    before = out.unsqueeze(0)
    out.t_()
    return before, out, out.unsqueeze(0)


def unbind_intermediate_and_view(a: T) -> object:
    out = a * 3
    return *out.unbind(0), out.view(out.shape)


def unbind_intermediate_and_both(a: T) -> object:
    out = a * 3
    return *out.unbind(0), out, out.view(out.shape)


def plus_one_flat(x: T) -> object:
    return (x + 1).view(-1)


def views_of_views(x: T) -> object:
    v = x.view(-1)[1:]
    return v, v.unsqueeze(0), v.unsqueeze(0)[:, ::2]


def split_of_input(x: T) -> object:
    return torch.split(x, 2)


def split_with_sizes_of_intermediate(x: T) -> object:
    return (x * 2).split_with_sizes([1, 3], dim=1)


def chunk_and_base(x: T) -> object:
    y = x + 1
    return *y.chunk(2), y


def expand_of_input(x: T) -> object:
    return x.expand(x.shape)


def masked_fill_row(a: T) -> object:
    b = a[0]
    return b.masked_fill_(torch.ones_like(b, dtype=torch.bool), 0)


def output_dict_same(x: T) -> object:
    return {"a": x, "b": x}


def output_dict_mixed(x: T, y: T) -> object:
    return {"a": x, "b": y + x}


def detach_output(x: T) -> object:
    return x.detach(), x * 2


def alias_op_output(x: T) -> object:
    return torch.ops.aten.alias.default(x), x.view_as(x)


def real_view_of_complex(x: T) -> object:
    c = torch.view_as_complex(x)
    return torch.view_as_real(c), c


def _g(*shape: int) -> Make:
    return lambda rg: (t(*shape, rg=rg),)


def _no_grad_a(rg: bool) -> tuple[object, ...]:
    return t(3, 3), t(3, 3, rg=rg)


def _two(rg: bool) -> tuple[object, ...]:
    return t(3, rg=rg), t(3)


OUTPUT_ALIASES = [
    *both("intermediate_viewed_twice", intermediate_viewed_twice, _g(3, 3), after_call=mul_out(0)),
    *both("intermediate_returned_three_times", intermediate_returned_three_times, _g(3, 3), after_call=mul_out(0)),
    *both("intermediate_view_no_grad", intermediate_view_no_grad, _no_grad_a),
    *both("intermediates_mixed_views", intermediates_mixed, _g(3, 3), after_call=mul_out(0)),
    *both("inplace_view_then_detach", inplace_view_then_detach, _g(2, 4)),
    *both("intermediate_inplace_view", intermediate_inplace_view, _g(2, 4), after_call=mul_out(-1)),
    *both("inplace_view_between_views", inplace_view_between_views, _g(2, 4)),
    *both("unbind_intermediate_and_view", unbind_intermediate_and_view, _g(3, 3), after_call=mul_out(-1)),
    *both("unbind_intermediate_and_both", unbind_intermediate_and_both, _g(3, 3), after_call=mul_out(-1)),
    *both("mutation_of_intermediate_view_output", plus_one_flat, _g(3, 3), after_call=mul_out(-1)),
    *both("views_of_views", views_of_views, _g(3, 3), after_call=mul_out(1)),
    *both("split_of_input", split_of_input, _g(5, 2)),
    Case(name="split_of_input_mutated_after", fn=split_of_input, make_inputs=lambda: (t(5, 2),), after_call=mul_out(0)),
    *both("split_with_sizes_of_intermediate", split_with_sizes_of_intermediate, _g(2, 4)),
    *both("chunk_and_base", chunk_and_base, _g(4, 2), after_call=mul_out(-1)),
    *both("expand_of_input", expand_of_input, _g(5)),
    *both("masked_fill_row_output", masked_fill_row, _g(2, 2)),
    *both("output_dict_same", output_dict_same, _g(3, 3)),
    *both("output_dict_mixed", output_dict_mixed, _two),
    *both("detach_output_mutated_after", detach_output, _g(3), after_call=mul_out(0)),
    *both("alias_op_output", alias_op_output, _g(2, 3), after_call=mul_out(0)),
    *both("real_view_of_complex", real_view_of_complex, _g(3, 2)),
]


# ---------------------------------------------------------------------------------------------------------------
# Input mutations: functionalization-style view chains, out= ops, copy_ with broadcasting, resize_, storage


def view_chain_mutation(x: T) -> object:
    y = x.transpose(1, 0)
    z = y[0]
    z.add_(torch.ones(4))
    return x


def split_then_diagonal_mutation(x: T) -> object:
    _, y2 = torch.split(x, 2)
    y2.diagonal().add_(1)
    return x * 1


def diagonal_mutated_returned(x: T) -> object:
    x.diagonal().add_(torch.ones(2))
    return x


def everything(x: T) -> object:
    tmp = torch.ones(2, 2)
    x2 = x + x
    y = x2.view(8)
    z0 = y.reshape(2, 4)
    z1 = z0.transpose(1, 0)
    z1.unsqueeze_(0)
    z1.squeeze_()
    z2, _ = torch.split(z1, 2)
    z2.add_(tmp)
    x.mul_(2)
    return y, x


def aminmax_out(x: T, mins: T, maxs: T) -> object:
    torch.aminmax(x, dim=0, out=(mins, maxs))
    return mins + maxs


def cat_out(a: T, b: T, out: T) -> object:
    torch.cat([a, b], out=out)
    return out * 1


def copy_broadcast(x: T, y: T) -> object:
    x.copy_(y)
    return x + 1


def copy_from_int(x: T, y: T) -> object:
    x.copy_(y)
    return x * 2


def fill_from_zero_dim(x: T, y: T) -> object:
    x.fill_(y)
    return x + 1


def scatter_into(x: T, idx: T, src: T) -> object:
    x.scatter_(0, idx, src)
    return x.sum(0)


def index_put_accumulate(x: T, idx: T, v: T) -> object:
    x[1:].index_put_((idx,), v, accumulate=True)
    return x


def resize_then_fill(x: T, y: T) -> object:
    y.resize_(4)
    y.fill_(1)
    return x + y.sum()


def resize_larger_then_write(x: T) -> object:
    x.resize_(6)
    x.fill_(2)
    return x * 1


def resize_zero_then_refill(x: T, y: T) -> object:  # FSDP's free and refill of a parameter's storage
    z = x.sum()
    x.resize_(0)
    x.resize_(4)
    x.copy_(y)
    return z, x * 2


def nested_updates(x: T) -> object:
    y = x[0]
    y.add_(1)
    z = x[1]
    z.mul_(y)
    return x.sum()


def add_inplace_result_returned(x: T, y: T) -> object:
    return x.add_(y)


def _long_idx(rg: bool) -> tuple[object, ...]:
    return t(3, 2, rg=rg), torch.tensor([[0, 1], [2, 0]]), t(2, 2)


def _index_put(rg: bool) -> tuple[object, ...]:
    return t(5, rg=rg), torch.tensor([0, 0, 2]), t(3)


INPUT_MUTATIONS = [
    *both("view_chain_mutation", view_chain_mutation, _g(4, 2)),
    *both("split_then_diagonal_mutation", split_then_diagonal_mutation, _g(4, 2), train_raises=True),
    *both("diagonal_mutated_returned", diagonal_mutated_returned, _g(2, 2)),
    *both("functionalization_everything", everything, _g(4, 2), train_raises=True),
    Case(name="aminmax_out", fn=aminmax_out, make_inputs=lambda: (t(3, 4), t(4), t(4))),
    Case(name="cat_out", fn=cat_out, make_inputs=lambda: (t(2, 2), t(2, 2), t(4, 2))),
    *both("copy_broadcast", copy_broadcast, lambda rg: (t(3, 4, rg=rg), t(4))),
    Case(name="copy_from_int", fn=copy_from_int, make_inputs=lambda: (t(4), torch.arange(4))),
    *both("fill_from_zero_dim", fill_from_zero_dim, lambda rg: (t(3, rg=rg), t())),
    *both("scatter_into", scatter_into, _long_idx),
    *both("index_put_accumulate", index_put_accumulate, _index_put),
    Case(name="resize_then_fill", fn=resize_then_fill, make_inputs=lambda: (t(3), t(2))),
    Case(name="resize_larger_then_write", fn=resize_larger_then_write, make_inputs=lambda: (t(2),)),
    Case(name="resize_zero_then_refill", fn=resize_zero_then_refill, make_inputs=lambda: (t(4), t(4))),
    *both("nested_updates", nested_updates, _g(2, 3)),
    Case(name="add_inplace_result_returned", fn=add_inplace_result_returned, make_inputs=lambda: (t(3), leaf(3))),
]


# ---------------------------------------------------------------------------------------------------------------
# Grad modes: no_grad, inference_mode, detach, requires_grad_, torch.autograd.grad, autograd.Function


def no_grad_view_then_mutate(a: T) -> object:
    with torch.no_grad():
        v = a.view(-1)
        v.mul_(2)
    return a * 3


def grad_disabled_inside(a: T) -> object:
    torch.set_grad_enabled(False)
    b = a * 2
    torch.set_grad_enabled(True)
    return b, a * 3


def enable_grad_inside(a: T) -> object:
    with torch.enable_grad():
        b = a * 2
    return b


def inference_mode_inside(a: T) -> object:
    with torch.inference_mode():
        b = a * 2
    return b + 0, a * 3


def requires_grad_on_view(a: T, b: T) -> object:
    v = a.view(-1)
    v.requires_grad_(True)
    return v


def cos_and_product(a: T, b: T) -> object:
    return a.cos(), b.cos(), a * b


def inner_grad(x: T) -> object:
    y = torch.exp(x)
    return torch.autograd.grad(y, x)


def detach_then_mutate_detached(a: T) -> object:
    d = a.detach()
    d.add_(1)
    return a * d


class PlusOneBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x.clone()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g + 1


class MulInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g * 2


class FlatView(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x.view(-1)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g.view(2, 2)


class AddInto(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, a: T, b: T) -> T:
        return a + b

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> tuple[T, T]:
        return g, g * 3


def custom_plus_one_backward(x: T) -> object:
    return PlusOneBackward.apply(x)  # type: ignore[no-untyped-call]


def custom_mark_dirty(x: T) -> object:
    return MulInPlace.apply(x) + 1  # type: ignore[no-untyped-call]


def custom_view(x: T) -> object:
    return FlatView.apply(x)  # type: ignore[no-untyped-call]


def custom_after_aliased_mutation(a: T, b: T) -> object:
    a.add_(1)
    return AddInto.apply(a, b)  # type: ignore[no-untyped-call]


GRAD_MODES = [
    *both("no_grad_view_then_mutate", no_grad_view_then_mutate, _g(4)),
    *both("grad_disabled_inside", grad_disabled_inside, _g(3)),
    *both("enable_grad_inside", enable_grad_inside, _g(3)),
    *both("inference_mode_inside", inference_mode_inside, _g(3)),
    Case(name="requires_grad_on_view", fn=requires_grad_on_view, make_inputs=lambda: (t(3, 3), leaf(3, 3))),
    Case(name="cos_and_product_grad_none", fn=cos_and_product, make_inputs=lambda: (leaf(5), t(5))),
    Case(name="cos_and_product_none_grad", fn=cos_and_product, make_inputs=lambda: (t(5), leaf(5))),
    Case(name="cos_and_product_both", fn=cos_and_product, make_inputs=lambda: (leaf(5), leaf(5))),
    Case(name="inner_grad", fn=inner_grad, make_inputs=lambda: (leaf(),)),
    *both("detach_then_mutate_detached", detach_then_mutate_detached, _g(3)),
    *both("custom_plus_one_backward", custom_plus_one_backward, lambda rg: (leaf(3) if rg else t(3),)),
    *both("custom_mark_dirty", custom_mark_dirty, _g(3)),
    *both("custom_view", custom_view, lambda rg: (leaf(2, 2) if rg else t(2, 2),)),
    *both("custom_after_aliased_mutation", custom_after_aliased_mutation, _two_rows),
]


# ---------------------------------------------------------------------------------------------------------------
# Randomness


def dropout_train(x: T) -> object:
    return F.dropout(x, 0.5, training=True)


def rand_like_plus(x: T) -> object:
    return x + torch.rand_like(x), torch.randn(3)


def bernoulli_in_place(x: T) -> object:
    x.bernoulli_(0.5)
    return x * 2


def dropout_then_mutate(x: T, y: T) -> object:
    d = F.dropout(x, 0.3)
    y.add_(d)
    return d.sum()


RANDOMNESS = [
    *both("dropout_train", dropout_train, _g(4, 4)),
    *both("rand_like_plus", rand_like_plus, _g(3)),
    Case(name="bernoulli_in_place", fn=bernoulli_in_place, make_inputs=lambda: (t(6),)),
    Case(name="dropout_then_mutate", fn=dropout_then_mutate, make_inputs=lambda: (t(4), t(4))),
]

# ---------------------------------------------------------------------------------------------------------------
# More: storage resizing, self-aliasing writes, out= aliasing an input, hooks, .data outputs


def index_setitem_add(x: T, idx: T) -> object:
    x[idx] += 1
    return x * 2


def add_out_into_input(a: T, b: T) -> object:
    torch.add(a, b, out=a)
    return a + 1


def self_add(a: T) -> object:
    a.add_(a)
    return a


def swap_values(a: T, b: T) -> object:
    old = a.clone()
    a.copy_(b)
    b.copy_(old)
    return a + b


def resize_as(x: T, y: T) -> object:
    x.resize_as_(y)
    x.fill_(3)
    return x.sum()


def data_output(x: T) -> object:
    return x.data, x * 2


def hook_on_intermediate(x: T) -> object:
    y = x * 2
    y.register_hook(lambda g: g * 3)  # type: ignore[no-untyped-call]
    return y.sum()


def unfold_output(x: T) -> object:
    return x.unfold(0, 2, 1), x.as_strided((2, 2), (1, 1), 1)


def view_clone_view_inplace(x: T) -> object:
    y = x.view(-1).clone().view(2, 2)
    y.add_(1)
    return y, x * 1


def select_copy_into(x: T, y: T) -> object:
    x.select(1, 0).copy_(y)
    return x


def mutated_intermediate_outputs(a: T) -> object:
    out = a * 3
    out.add_(1)
    return out.view(-1), out


def expand_after_mutation(a: T) -> object:
    a.mul_(2)
    return a.unsqueeze(0).expand(3, -1)


def same_input_thrice(a: T) -> object:
    return a, a, a.view(-1)


def nested_alias_structure(a: T) -> object:
    return [a.view(-1), {"t": a.t(), "fresh": a + 1}]


def unsafe_view_of_intermediate(a: T) -> object:
    return torch.ops.aten._unsafe_view(a * 2, [-1])


MORE = [
    *both("index_setitem_add", index_setitem_add, lambda rg: (t(5, rg=rg), torch.tensor([0, 3]))),
    Case(name="add_out_into_input", fn=add_out_into_input, make_inputs=lambda: (t(3), t(3))),
    *both("self_add", self_add, _g(3)),
    *both("swap_values", swap_values, lambda rg: (t(3, rg=rg), t(3, rg=rg))),
    Case(name="resize_as", fn=resize_as, make_inputs=lambda: (t(2), t(2, 3))),
    *both("data_output_mutated_after", data_output, lambda rg: (leaf(3) if rg else t(3),), after_call=mul_out(0)),
    *both("unfold_output", unfold_output, _g(4)),
    *both("view_clone_view_inplace", view_clone_view_inplace, _g(4)),
    *both("select_copy_into", select_copy_into, lambda rg: (t(3, 2, rg=rg), t(3))),
    *both("mutated_intermediate_outputs", mutated_intermediate_outputs, _g(2, 2), after_call=mul_out(0)),
    *both("expand_after_mutation", expand_after_mutation, _g(3)),
    *both("same_input_thrice", same_input_thrice, _g(2, 2), after_call=mul_out(2)),
    *both("nested_alias_structure", nested_alias_structure, _g(2, 3)),
    *both("unsafe_view_of_intermediate", unsafe_view_of_intermediate, _g(2, 3), after_call=mul_out(-1)),
    Case(name="hook_on_intermediate", fn=hook_on_intermediate, make_inputs=lambda: (leaf(3),)),
]

CASES = ALIASED_INPUTS + OUTPUT_ALIASES + INPUT_MUTATIONS + GRAD_MODES + RANDOMNESS + MORE
