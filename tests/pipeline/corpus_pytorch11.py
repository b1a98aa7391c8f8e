"""Corpus, PyTorch's own programs, eleventh part (held out: written from PyTorch's tests, not from ours):
test/test_autograd.py's in-place-on-view programs the ninth part did not port (saved outputs, weak grad_fns, a leaf's
view written, retain_grad on values then written in place, mark_dirty on a clone, a custom Function's view written),
test/inductor/test_auto_functionalize.py's custom ops that write their arguments (views of one input, lists of
tensors, optional arguments, overlapping slices, aliases) and test/dynamo/test_aot_autograd.py's AotAutogradFallbackTests
(writes under no_grad, duplicated arguments, overlapping view inputs, writes through expand, grad mode left changed,
modules). Each program runs twice where it takes tensors: as written (`ho_<name>`), and on torch's TwoTensor
(`ho_two_<name>`: each tensor input a TwoTensor of it and its clone, with its requires_grad); modules and programs
without tensor inputs run as written only.

As written: their inputs (shapes, dtypes, requires_grad settings), their programs (the part of the test that builds
the graph; the oracle runs a backward where outputs require grad). Sizes the test picks only to be large (a
12x4x256x513 attention score, a 92x4x64 LSTM input) are smaller here (said where). Custom ops are declared with
torch.library.custom_op and `mutates_args`, as the tests' schemas `Tensor(a!)` declare them.

Input: nothing. Output: `CASES11` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`ho_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx

from tests.pipeline.corpus import Case, inp, ported_as

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]


ported = ported_as("ho")


# ---------------------------------------------------------------------------------------------------------------
# test/test_autograd.py


def weak_grad_fn(a: T) -> object:
    # test_inplace_on_view_weak_grad_fn
    b = a.narrow(0, 0, 2).clone().view(-1)
    b.relu_()
    c = b.clone()
    return c.sum()


def _arange_10(two: bool) -> tuple[object, ...]:
    return (inp(torch.arange(10.0), two, rg=True),)


def relu_into_view_of_clone(root: T) -> object:
    # test_inplace_on_view_saved_output
    copy = root.clone()
    view = copy.view(9)
    F.relu(view, inplace=True)
    return copy


def _randn_3x3(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(3, 3), two, rg=True),)


def threshold_into_view(inputs: T) -> object:
    # test_inplace_on_view_backward (its second program: a 1x3x256x256 input there, 1x3x4x4 here)
    tmp1 = (inputs + 1).view_as(inputs)
    tmp2 = F.threshold(tmp1, 0.0, 0.0, True)
    return torch.sigmoid(tmp2)


def _ones_1x3x4x4(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(1, 3, 4, 4), two, rg=True),)


def add_into_view_of_leaf(x: T) -> object:
    # test_inplace_on_view_leaf_errors (eager raises: a view of a leaf that requires grad written in place)
    y = x.view_as(x)
    y.add_(1)
    return y


def _zeros_1(two: bool) -> tuple[object, ...]:
    return (inp(torch.zeros(1), two, rg=True),)


def retained_then_written(x: T) -> object:
    # test_retains_grad_inplace
    a = x.clone()
    a.retain_grad()
    a.mul_(2)
    return a


def _one_elem(two: bool) -> tuple[object, ...]:
    return (inp(torch.tensor([1.0]), two, rg=True),)


def var_mean_retained_then_written(b: T) -> object:
    # test_retains_grad_inplace_multiple_outputs (its var_mean)
    var, mean = torch.var_mean(b, dim=0)
    var.retain_grad()
    mean.retain_grad()
    var.mul_(2)
    return var + mean


def retained_views_written(x: T) -> object:
    # test_retain_grad_inplace_over_view
    base = x.clone()
    view = base[:]
    view2 = base[:]
    view.retain_grad()
    view2.retain_grad()
    view.mul_(2)
    return view + view2


class InplaceMul(torch.autograd.Function):
    # test_custom_function_mark_dirty_not_differentiable (its backward returns nothing)
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        result = x.mul_(2)
        ctx.mark_dirty(result)
        return result

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: T) -> None:
        return None


def dirty_mul_of_clone(z: T) -> object:
    # test_custom_function_mark_dirty_not_differentiable
    x = z.clone()
    y = InplaceMul.apply(x)  # type: ignore[no-untyped-call]
    return x, y


def _scalar_one(rg: bool) -> Make:
    return lambda two: (inp(torch.tensor(1.0), two, rg=rg),)


class ViewAs(torch.autograd.Function):
    # test_inplace_not_requires_grad's MyFn
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: FunctionCtx, grad: T) -> T:
        return grad


def add_into_function_view(a: T, b: T) -> object:
    # test_inplace_not_requires_grad (eager raises: "This view was created inside a custom Function")
    view_a = ViewAs.apply(a)  # type: ignore[no-untyped-call]
    view_a += b
    return view_a


def copy_into_select(a: T, b: T) -> object:
    # test_inplace_not_requires_grad ("views that should work still work")
    a.select(1, 0).copy_(b)
    return a


def _rand_1x2_and_1(two: bool) -> tuple[object, ...]:
    return inp(torch.rand(1, 2), two), inp(torch.rand(1), two, rg=True)


class Alias(torch.autograd.Function):
    # test_custom_function_return_view_in_nograd
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        return x[:]

    @staticmethod
    def backward(ctx: FunctionCtx, gx: T) -> T:
        return gx


def zero_no_grad_function_view(x: T) -> object:
    # test_custom_function_return_view_in_nograd (eager raises: a view made under no_grad written in place)
    with torch.no_grad():
        output = Alias.apply(x)  # type: ignore[no-untyped-call]
    output.zero_()
    return output


def _rand_2(two: bool) -> tuple[object, ...]:
    return (inp(torch.rand(2), two, rg=True),)


AUTOGRAD = [
    *ported("inplace_on_view_weak_grad_fn_train", weak_grad_fn, _arange_10),
    *ported("inplace_on_view_saved_output_train", relu_into_view_of_clone, _randn_3x3),
    *ported("inplace_on_view_backward_train", threshold_into_view, _ones_1x3x4x4),
    *ported("inplace_on_view_leaf_errors_train", add_into_view_of_leaf, _zeros_1, eager_raises=True),
    *ported("retains_grad_inplace_train", retained_then_written, _one_elem),
    *ported("retains_grad_inplace_multiple_outputs_train", var_mean_retained_then_written, _randn_3x3),
    *ported("retain_grad_inplace_over_view_train", retained_views_written, _one_elem),
    *ported("mark_dirty_not_differentiable", dirty_mul_of_clone, _scalar_one(False)),
    *ported("mark_dirty_not_differentiable_train", dirty_mul_of_clone, _scalar_one(True)),
    *ported("inplace_not_requires_grad_train", add_into_function_view, _rand_1x2_and_1, eager_raises=True),
    *ported("inplace_not_requires_grad_select_train", copy_into_select, _rand_1x2_and_1),
    *ported("return_view_in_nograd_train", zero_no_grad_function_view, _rand_2, eager_raises=True),
]


# ---------------------------------------------------------------------------------------------------------------
# test/inductor/test_auto_functionalize.py: custom ops that write their arguments


@torch.library.custom_op("corpus11::copy_into", mutates_args={"out"})
def copy_into(x: T, out: T) -> None:
    # test_auto_functionalize_can_with_none_return
    out.copy_(x)


@torch.library.custom_op("corpus11::sin_self", mutates_args={"x"})
def sin_self(x: T) -> None:
    # test_auto_functionalize_self_as_mutate_arg, test_auto_functionalize_on_view
    x.sin_()


@torch.library.custom_op("corpus11::copy_to_each", mutates_args={"out"})
def copy_to_each(all_gather_output: T, split_sizes: list[int], dim: int, out: list[T]) -> None:
    # test_auto_functionalize_tensorlist
    for o in out:
        o.copy_(all_gather_output)


@torch.library.custom_op("corpus11::add_two", mutates_args={"x", "z"})
def add_two(x: T, y: list[T], z: T, w: int, n: T) -> None:
    # test_auto_functionalize_v2 (and _old)
    x.add_(y[0] + w)
    z.add_(y[1] + n)


@torch.library.custom_op("corpus11::add_two_returning", mutates_args={"x", "z"})
def add_two_returning(x: T, y: list[T], z: T, w: int, n: T) -> tuple[T, T]:
    # test_auto_functionalize_with_returns_v2
    x.add_(y[0] + w)
    z.add_(y[1] + n)
    return y[0] + w, y[1] + n


@add_two_returning.register_fake
def _add_two_returning_fake(x: T, y: list[T], z: T, w: int, n: T) -> tuple[T, T]:
    return y[0] + w, y[1] + n


@torch.library.custom_op("corpus11::add_two_optional", mutates_args={"x", "z"})
def add_two_optional(x: T | None, y: list[T], z: T | None, w: int, n: T) -> None:
    # test_auto_functionalize_optional_v2
    if x is not None:
        x.add_(y[0] + w)
    if z is not None:
        z.add_(y[1] + n)


@torch.library.custom_op("corpus11::sin_both", mutates_args={"x", "y"})
def sin_both(x: T, y: T) -> None:
    # test_auto_functionalize_extra1..3, 5, test_alias, test_split, test_slice
    x.sin_()
    y.sin_()


@torch.library.custom_op("corpus11::sin_first_of", mutates_args={"x", "y"})
def sin_first_of(x: T, y: list[T]) -> None:
    # test_auto_functionalize_extra4
    x.sin_()
    y[0].sin_()


@torch.library.custom_op("corpus11::writes_nothing", mutates_args={"x"})
def writes_nothing(x: T) -> None:
    # test_graph_input_is_view
    pass


@torch.library.custom_op("corpus11::clone_with_workspace", mutates_args={"workspace"})
def clone_with_workspace(x: T, workspace: T) -> T:
    # test_inference_mode_view
    return x.clone()


@clone_with_workspace.register_fake
def _clone_with_workspace_fake(x: T, workspace: T) -> T:
    return x.clone()


def copy_and_return_nothing(x: T, out: T) -> object:
    # test_auto_functionalize_can_with_none_return
    torch.ops.corpus11.copy_into(x, out)
    return None


def sin_of_input(x: T) -> object:
    # test_auto_functionalize_self_as_mutate_arg
    torch.ops.corpus11.sin_self(x)
    return None


def copy_to_list(all_gather_output: T, d0: T, d1: T) -> object:
    # test_auto_functionalize_tensorlist
    torch.ops.corpus11.copy_to_each(all_gather_output, [2, 3], 0, [d0, d1])
    return None


def add_two_of(x: T, y0: T, y1: T, z: T, n: T) -> object:
    # test_auto_functionalize_v2
    torch.ops.corpus11.add_two(x, [y0, y1], z, 2, n)
    return None


def add_two_returning_of(x: T, y0: T, y1: T, z: T, n: T) -> object:
    # test_auto_functionalize_with_returns_v2
    return torch.ops.corpus11.add_two_returning(x, [y0, y1], z, 2, n)


def add_two_optional_of(y0: T, y1: T, z: T, n: T) -> object:
    # test_auto_functionalize_optional_v2 (x is None)
    torch.ops.corpus11.add_two_optional(None, [y0, y1], z, 2, n)
    return None


def _randn_3s(count: int) -> Make:
    return lambda two: tuple(inp(torch.randn(3), two) for _ in range(count))


def _gather_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.ones(4), two), inp(torch.empty(4).fill_(7), two), inp(torch.zeros(4), two)


def sin_of_slice_of_clone(x: T) -> object:
    # test_auto_functionalize_on_view
    x = x.clone()
    y = x[:]
    torch.ops.corpus11.sin_self(y)
    return x


def sin_both_then_add(x: T, y: T) -> object:
    # test_auto_functionalize_extra1
    torch.ops.corpus11.sin_both(x, y)
    return x + y


def sin_both_selects(x: T) -> object:
    # test_auto_functionalize_extra2
    a = x[0]
    b = x[1]
    torch.ops.corpus11.sin_both(a, b)
    return None


def sin_both_selects_returned(x: T) -> object:
    # test_auto_functionalize_extra3
    a = x[0]
    b = x[1]
    torch.ops.corpus11.sin_both(a, b)
    return (a, b, x)


def sin_both_inputs(x: T, y: T) -> object:
    # test_auto_functionalize_extra5: two rows of one base, not overlapping
    torch.ops.corpus11.sin_both(x, y)
    return None


def _rows_of_one_base(two: bool) -> tuple[object, ...]:
    base = inp(torch.randn(2, 2), two)
    return base[0], base[1]


def sin_first_of_views(x: T, y: T, z: T) -> object:
    # test_auto_functionalize_extra4
    a = x[0]
    b = z[0]
    torch.ops.corpus11.sin_first_of(a, [b, y])
    return None


def writes_nothing_to_select(x: T) -> object:
    # test_graph_input_is_view (the input a row of a 2x2 integer tensor)
    a = x[0]
    torch.ops.corpus11.writes_nothing(a)
    return None


def _row_of_int_2x2(two: bool) -> tuple[object, ...]:
    return (inp(torch.tensor([[1, 2], [3, 4]]), two)[1],)


def sin_both_aliases(x: T) -> object:
    # test_alias
    a = torch.ops.aten.alias.default(x)
    b = torch.ops.aten.alias.default(x)
    torch.ops.corpus11.sin_both(a, b)
    return (a, b, x)


def sin_both_split(x: T) -> object:
    # test_split
    splits = x.split([4, 6], dim=1)  # type: ignore[no-untyped-call]
    a = splits[0]
    b = splits[1]
    torch.ops.corpus11.sin_both(a, b)
    return (a, b, x)


def sin_both_slices(x: T) -> object:
    # test_slice: the two slices overlap (rows 0-1 of column 3)
    a = torch.ops.aten.slice.Tensor(x, 0, 0, 2)
    b = torch.ops.aten.slice.Tensor(x, 1, 3, 4)
    torch.ops.corpus11.sin_both(a, b)
    return (a, b, x)


def _randn_10x10(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(10, 10), two),)


def sin_both_alias_and_nonzero(x: T) -> object:
    # test_alias2: the second argument has a size made of tensor values
    a = torch.ops.aten.alias.default(x)
    b = x.clone()
    c = b.nonzero().float()
    d = torch.ops.aten.slice(c)
    torch.ops.corpus11.sin_both(a, d)
    return a, d


def sin_both_last_and_first_rows(x: T) -> object:
    # test_recompile (its third program, compiled with dynamic=True)
    a = x[x.size()[0] - 1]
    b = x[0]
    torch.ops.corpus11.sin_both(a, b)
    return None


def sin_both_alias_and_input(x: T) -> object:
    # test_alias_id_output
    a = torch.ops.aten.alias.default(x)
    torch.ops.corpus11.sin_both(a, x)
    return a


def _rand_2x2(two: bool) -> tuple[object, ...]:
    return (inp(torch.rand(2, 2), two),)


def workspace_then_view(x: T, w: T) -> object:
    # test_inference_mode_view (its program; not under inference_mode here)
    y = torch.ops.corpus11.clone_with_workspace(x, w)
    z = y.view(-1)
    return z.sin()


def _randn_2s(count: int) -> Make:
    return lambda two: tuple(inp(torch.randn(2), two) for _ in range(count))


DYNAMIC = {"dynamic": True}

AUTO_FUNCTIONALIZE = [
    *ported("af_none_return", copy_and_return_nothing, _randn_3s(2)),
    *ported("af_self_as_mutate_arg", sin_of_input, _randn_3s(1)),
    *ported("af_tensorlist", copy_to_list, _gather_inputs),
    *ported("af_v2", add_two_of, _randn_3s(5)),
    *ported("af_with_returns", add_two_returning_of, _randn_3s(5)),
    *ported("af_optional", add_two_optional_of, _randn_3s(4)),
    *ported("af_on_view", sin_of_slice_of_clone, _randn_3s(1)),
    *ported("af_extra1", sin_both_then_add, _randn_2s(2)),
    *ported("af_extra2", sin_both_selects, _randn_2s(1)),
    *ported("af_extra3", sin_both_selects_returned, _randn_2s(1)),
    *ported("af_extra5", sin_both_inputs, _rows_of_one_base),
    *ported("af_extra4", sin_first_of_views, _randn_2s(3)),
    *ported("af_graph_input_is_view", writes_nothing_to_select, _row_of_int_2x2),
    *ported("af_alias", sin_both_aliases, _randn_2s(1)),
    *ported("af_split", sin_both_split, _randn_10x10),
    *ported("af_slice", sin_both_slices, _randn_10x10),
    *ported("af_alias2", sin_both_alias_and_nonzero, _randn_2s(1)),
    *ported("af_recompile_rows", sin_both_last_and_first_rows, _randn_10x10, compile_kwargs=DYNAMIC),
    *ported("af_alias_id_output", sin_both_alias_and_input, _rand_2x2),
    *ported("af_inference_mode_view", workspace_then_view, _randn_2s(2)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_aot_autograd.py: AotAutogradFallbackTests


def add_under_no_grad(param: T, y: T) -> object:
    # test_mutation (a Parameter written under set_grad_enabled(False))
    prev_grad = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        param.add_(y)
    finally:
        torch.set_grad_enabled(prev_grad)
    return y


def _param_and_y(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(4), two, rg=True), inp(torch.randn(4), two)


def _stack_setitem(stack: T, scores: T) -> object:
    getitem = scores[:, :, :4, :5]
    stack[:, :-1, :, 4:] = getitem
    return (stack.view(1, 2, 16, 9),)


def setitem_into_input(stack: T, scores: T) -> object:
    # test_mutation1 (a 12x4x256x513 input there, 2x4x4x9 here; slices scaled alike)
    return _stack_setitem(stack, scores)


def setitem_into_sin(stack: T, scores: T) -> object:
    # test_negative_testing_mutation
    return _stack_setitem(torch.sin(stack), scores)


def _stack_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(2, 4, 4, 9), two), inp(torch.randn(2, 3, 8, 9), two)


def sin_add_(x: T, y: T) -> object:
    # test_negative_testing
    return torch.sin(x).add_(y)


class ConvForward(torch.nn.Module):
    # test_call_fn_with_non_const_inputs_aot_safe's ModuleSpecialFwd
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels=3, out_channels=20, kernel_size=(5, 5))

    def forward(self, x: T) -> T:
        out: T = self.conv._conv_forward(x, self.conv.weight, self.conv.bias)
        return out


class ParamAddNoGrad(torch.nn.Module):
    # test_call_fn_with_non_const_inputs_aot_unsafe's ModuleSpecialFwd
    def forward(self, x: T, y: T) -> object:
        return add_under_no_grad(x, y)


class ValueBranch(torch.nn.Module):
    # test_call_fn_with_non_const_inputs_aot_unsafe_control_flow's ModuleSpecialFwd
    def _some_bad_fwd(self, param: T, y: T) -> T:
        if y[0][0] < 3:
            return y + param
        return param * y

    def forward(self, x: T, y: T) -> T:
        a = x * y
        a = self._some_bad_fwd(a, a)
        b = x + y
        return a * b


def trunc_both(x: T, y: T) -> object:
    # test_arg_dupe_via_dynamo_recompiles
    x = x.trunc_()
    y = y.trunc_()
    return (x + y,)


def _two_clones(same: bool) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        x = inp(torch.randn(3, 3), two, rg=True).clone()
        return (x, x) if same else (x, inp(torch.randn(3, 3), two, rg=True).clone())

    return make


class TruncPlusMean(torch.nn.Module):
    # test_arg_dupe_via_dynamo_recompiles_many_args_param
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, a: T, b: T) -> T:
        a.trunc_()
        b.trunc_()
        return a + b + self.mean


class TruncPlusMeanScaled(TruncPlusMean):
    # test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg
    def forward(self, a: T, b: T, e: int, f: int) -> T:  # type: ignore[override]
        a.trunc_()
        b.trunc_()
        return (a + b + self.mean) * e * f


def trunc_four(a: T, b: T, c: T, d: T) -> object:
    # test_arg_dupe_via_dynamo_recompiles_many_args
    a.trunc_()
    b.trunc_()
    c.trunc_()
    d.trunc_()
    return (a + b + c + d,)


def _four_of(pattern: str) -> Make:
    """Arguments by letter: the same letter is the same tensor (a clone of a leaf that requires grad)."""

    def make(two: bool) -> tuple[object, ...]:
        made: dict[str, object] = {}
        for letter in pattern:
            made.setdefault(letter, inp(torch.randn(3, 3), two, rg=True).clone())
        return tuple(made[letter] for letter in pattern)

    return make


def write_then_read_fresh() -> object:
    # test_alias_inputs (no inputs; reads a value of a tensor it made)
    a = torch.tensor([1])
    a = a[0:1]
    b = a.squeeze()
    a[0] = 0
    if a[0] < 1e5:
        pass
    a[0] = 2
    return b


class ReturnsSecond(torch.autograd.Function):
    # test_grad_inputs_alias_inputs
    @staticmethod
    def forward(ctx: FunctionCtx, x: T, y: T) -> T:
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx: FunctionCtx, grad: T) -> tuple[T, T]:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return x, grad


def returns_second(x: T, y: T) -> object:
    # test_grad_inputs_alias_inputs
    return ReturnsSecond.apply(x, y)  # type: ignore[no-untyped-call]


def _ones_1_pair(two: bool) -> tuple[object, ...]:
    return inp(torch.ones(1), two, rg=True), inp(torch.ones(1), two, rg=True)


def sin_plus_new_parameter(x: T) -> object:
    # test_nn_parameter_construction
    y = x.sin()
    z = torch.nn.Parameter(torch.ones(1))
    return y + z


def _rand_4x4(two: bool) -> tuple[object, ...]:
    return (inp(torch.rand(4, 4), two),)


def square_then_grad_off(x: T) -> object:
    # test_aot_grad_mode_mutation (grad mode stays off after the call)
    y = x * x
    torch.set_grad_enabled(False)
    return y.clone(), y


def _regrad(out: object, args: tuple[object, ...]) -> None:
    torch.set_grad_enabled(True)


def _ones_3_times_3(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(3), two, rg=True) * 3,)


def add_through_expand(x: T) -> object:
    # test_aot_autograd_expand_mutation_functionalizes
    y = x.expand(3, *x.shape)
    y[0, 0].add_(5)
    return y


def _arange_6(two: bool) -> tuple[object, ...]:
    return (inp(torch.arange(6), two),)


def mul_through_expand(x: T, z: T) -> object:
    # test_aot_autograd_expand_mutation_backwards
    y = x.expand(3, *x.shape)
    y[1, 1].mul_(5)
    return y * z


def _arange_6_and_grad(two: bool) -> tuple[object, ...]:
    x = torch.arange(6, dtype=torch.float)
    return inp(x, two), inp(x.clone(), two, rg=True)


def add_through_overlapping_expand(x: T) -> object:
    # test_aot_autograd_expand_mutation_error (eager raises: the written elements share memory)
    y = x.expand(3, *x.shape)
    y[0:3, 0].add_(5)
    return y


class TwoClonesCopyingGrad(torch.autograd.Function):
    # test_autograd_function_tangent_mutation
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> tuple[T, T]:
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx: FunctionCtx, grad1: T, grad2: T) -> T:
        return grad1.copy_(grad2)


def two_clones_copying_grad(x: T) -> object:
    # test_autograd_function_tangent_mutation
    return TwoClonesCopyingGrad.apply(x)  # type: ignore[no-untyped-call]


def _randn_4(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(4), two, rg=True),)


def add_one_to_each(a: T, b: T, c: T) -> object:
    # test_inputs_overlapping_with_mutation_recompile (its f over three arguments)
    for t in (a, b, c):
        t.add_(1)
    return a


def _views_of_ones_20(*spans: tuple[int, int]) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        base = inp(torch.ones(20), two)
        return tuple(base[lo:hi] for lo, hi in spans)

    return make


def mul_first_sum_all(a: T, b: T, c: T, d: T) -> object:
    # test_different_inputs_overlapping_set_with_mutation
    a.mul_(2)
    return a + b + c + d


def add_views(a: T, b: T) -> object:
    # test_no_storage_overlap_guards_no_mutation
    return a + b


def add_one_to_both(a: T, b: T) -> object:
    # test_no_storage_overlap_guards_no_aliasing
    a.add_(1)
    b.add_(1)
    return a


def _arange_views(two: bool) -> tuple[object, ...]:
    base = inp(torch.arange(20), two)
    return base[:10], base[5:15]


def _arange_views_of_two(two: bool) -> tuple[object, ...]:
    return inp(torch.arange(20), two)[:10], inp(torch.arange(20), two)[5:15]


def unique_times(sentinel: T) -> object:
    # test_aot_autograd_stride_reconstruction_on_zero_dim_dynamic_shaped_tensor (squeezed)
    x = torch.unique(torch.ones(1))
    x = torch.reshape(x, [1])
    x = torch.squeeze(x)
    return x * sentinel


def _sentinel(two: bool) -> tuple[object, ...]:
    return (inp(torch.tensor(1.0), two, rg=True),)


def nonzero_divided(arg_0: T, sentinel: T) -> object:
    # test_unbacked_activation_specialized_in_inductor
    var_node_5 = torch.full((1, 2), -66, dtype=torch.int32)
    var_node_6 = torch.full((1, 2), 77, dtype=torch.int64)
    var_node_4 = torch.ops.aten.add(var_node_5, var_node_6)
    var_node_7 = torch.full((1, 2), -64, dtype=torch.int32)
    var_node_3 = torch.ops.aten.mul(var_node_4, var_node_7)
    var_node_9 = torch.full((3, 4), False, dtype=torch.bool)
    var_node_8 = torch.nonzero(var_node_9)
    var_node_2 = torch.ops.aten.add(var_node_3, var_node_8)
    var_node_0 = torch.ops.aten.div(arg_0, var_node_2)
    return var_node_0 * sentinel


def _randint_and_sentinel(two: bool) -> tuple[object, ...]:
    return inp(torch.randint(0, 3, (1, 2)), two), inp(torch.tensor(1.0), two, rg=True)


def mm_of_view_plus_relu(x: T, z: T) -> object:
    # test_donated_buffer5
    y = x.view(2, 3)
    z = torch.nn.functional.relu(z)
    return torch.mm(y, x) + z


def _rand_3x2_2x2(two: bool) -> tuple[object, ...]:
    return inp(torch.rand(3, 2), two, rg=True), inp(torch.rand(2, 2), two, rg=True)


def parameter_of_intermediate(x: T) -> object:
    # test_donated_buffer6
    p = torch.nn.Parameter(x + 123)
    return p, p.sin()


def _randn_16(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(16), two),)


class Lstm(torch.nn.Module):
    # test_LSTM (LSTM(64, 64, num_layers=2, bidirectional=True) there; 8 wide here)
    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 8, num_layers=2, bidirectional=True)

    def forward(self, permute: T) -> object:
        return (self.lstm(permute),)


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


def _strided_lstm_input() -> tuple[object, ...]:
    # rand_strided((92, 4, 64), (1, 5888, 92)) there: dim 0 innermost; (6, 2, 8) with strides (1, 48, 6) here
    return (torch.randn(2, 8, 6).permute(2, 0, 1),)


AOT_AUTOGRAD = [
    *ported("mutation_train", add_under_no_grad, _param_and_y),
    *ported("mutation1", setitem_into_input, _stack_inputs),
    *ported("negative_testing_mutation", setitem_into_sin, _stack_inputs),
    *ported("negative_testing", sin_add_, _randn_2s(2)),
    *ported("arg_dupe_train", trunc_both, _two_clones(False)),
    *ported("arg_dupe_same_train", trunc_both, _two_clones(True)),
    *ported("arg_dupe_many_args_train", trunc_four, _four_of("abcc")),
    *ported("arg_dupe_many_args_same_train", trunc_four, _four_of("aaaa")),
    *ported("arg_dupe_many_args_mixed_train", trunc_four, _four_of("abbb")),
    *ported("grad_inputs_alias_inputs_train", returns_second, _ones_1_pair),
    *ported("nn_parameter_construction", sin_plus_new_parameter, _rand_4x4),
    *ported("aot_grad_mode_mutation_train", square_then_grad_off, _ones_3_times_3, after_call=_regrad),
    *ported("expand_mutation_functionalizes", add_through_expand, _arange_6),
    *ported("expand_mutation_backwards_train", mul_through_expand, _arange_6_and_grad),
    *ported("expand_mutation_error", add_through_overlapping_expand, _arange_6, eager_raises=True),
    *ported("autograd_function_tangent_mutation_train", two_clones_copying_grad, _randn_4),
    *ported("inputs_overlapping", add_one_to_each, _views_of_ones_20((0, 5), (7, 13), (9, 20))),
    *ported("inputs_not_overlapping", add_one_to_each, _views_of_ones_20((0, 5), (7, 13), (13, 15))),
    *ported("overlapping_set_ab", mul_first_sum_all, _views_of_ones_20((0, 5), (4, 9), (10, 15), (15, 20))),
    *ported("overlapping_set_abc", mul_first_sum_all, _views_of_ones_20((0, 5), (4, 9), (8, 13), (15, 20))),
    *ported("no_storage_overlap_no_mutation", add_views, _arange_views),
    *ported("no_storage_overlap_no_aliasing", add_one_to_both, _arange_views_of_two),
    *ported("stride_reconstruction_zero_dim_train", unique_times, _sentinel),
    *ported("unbacked_activation_train", nonzero_divided, _randint_and_sentinel),
    *ported("donated_buffer5_train", mm_of_view_plus_relu, _rand_3x2_2x2),
    *ported("donated_buffer6", parameter_of_intermediate, _randn_16),
    Case(name="ho_alias_inputs", fn=write_then_read_fresh, make_inputs=lambda: ()),
    Case(name="ho_lstm", fn=_seeded(Lstm), make_inputs=_strided_lstm_input),
    Case(
        name="ho_call_fn_aot_safe",  # test_call_fn_with_non_const_inputs_aot_safe
        fn=_seeded(ConvForward),
        make_inputs=lambda: (torch.randn(3, 10, 10),),
    ),
    Case(
        name="ho_call_fn_aot_unsafe",  # test_call_fn_with_non_const_inputs_aot_unsafe
        fn=ParamAddNoGrad(),
        make_inputs=lambda: (torch.nn.Parameter(torch.randn(4)), torch.randn(4)),
    ),
    Case(
        name="ho_call_fn_aot_unsafe_control_flow",  # test_call_fn_with_non_const_inputs_aot_unsafe_control_flow
        fn=ValueBranch(),
        make_inputs=lambda: (torch.nn.Parameter(torch.randn(2, 2)), torch.randn(2, 2)),
    ),
    Case(
        name="ho_arg_dupe_param",  # test_arg_dupe_via_dynamo_recompiles_many_args_param: f(a1, a1)
        fn=_seeded(TruncPlusMean),
        make_inputs=lambda: _two_clones(True)(False),
    ),
    Case(
        name="ho_arg_dupe_param_distinct",  # ... f(a2, b2)
        fn=_seeded(TruncPlusMean),
        make_inputs=lambda: _two_clones(False)(False),
    ),
    Case(
        name="ho_arg_dupe_param_non_tensor_arg",  # ..._many_args_param_non_tensor_arg: f(a1, a1, 2, 2)
        fn=_seeded(TruncPlusMeanScaled),
        make_inputs=lambda: (*_two_clones(True)(False), 2, 2),
    ),
]

CASES11 = AUTOGRAD + AUTO_FUNCTIONALIZE + AOT_AUTOGRAD
