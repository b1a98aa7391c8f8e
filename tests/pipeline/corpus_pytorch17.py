"""Corpus, PyTorch's own programs, seventeenth part (held out: written from PyTorch's tests, not from ours): the
programs of test/dynamo/test_functions.py and test/dynamo/test_misc.py that write, alias, view, switch grad mode,
read module parameters or globals, or return their inputs or views of them.

From test_functions.py (FunctionTests, DefaultsTests): in-place ops on a copy made by torch.tensor(a), addcmul_ into
an input with a 0-d tensor as its value, _foreach_lerp_ over lists of inputs, inputs returned in tuples and dicts
(one input several times), `x += c` on an input in a loop, slices, unpacked halves and permuted views of an input,
a no_grad-decorated inner function, writes before a set/list membership test, a function's and a module method's
default tensor arguments written and returned, a filter over inputs by requires_grad, a global tensor and a global
Linear. From test_misc.py (MiscTests): empty() filled by copy_ then written, `x0 = 1; x0 += y`, a complex input's
`.real` set, `.grad` and Python attributes set on inputs and intermediates, torch.add(2, 3, out=0-d tensor), every row
of an input written while iterating it (the last row returned), share_memory_() of a fresh tensor, parameter shapes in
Python arithmetic, getattr(x, "view"), dict inputs summed into a fresh tensor in place, a closure cell written, a
Parameter written under set_grad_enabled(False) switched three times, hasattr of an input's Python attribute.

Each program that takes tensors runs twice: as written (`fm_<name>`), and on torch's TwoTensor (`fm_two_<name>`: each
tensor input a TwoTensor of it and its clone); a `_train` variant takes inputs that require grad where eager allows
it (non-leaves where the program writes them). Modules and programs without tensor inputs run as written only.
As written: their inputs (shapes, dtypes, requires_grad), programs and ops; where the test's program reads state it
keeps across calls (a function's default tensors), `make_inputs` resets that state in place, so both sides start alike.

Input: nothing. Output: `CASES17` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`fm_`); each program names the PyTorch test it follows.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch

from tests.pipeline.corpus import Case, inp, ported_as

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]
ported = ported_as("fm")


def _randn(*shapes: tuple[int, ...], rg: bool = False, nonleaf: bool = False) -> Make:
    """Fresh randn inputs of `shapes`; with `nonleaf`, each a clone of a leaf that requires grad."""

    def make(two: bool) -> tuple[object, ...]:
        out = tuple(inp(torch.randn(*s), two, rg=rg or nonleaf) for s in shapes)
        return tuple(t.clone() for t in out) if nonleaf else out

    return make


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_functions.py: FunctionTests


def add_into_copy(a: T, b: T) -> object:
    # test_add_
    a_copy = torch.tensor(a)
    return a_copy.add_(b, alpha=5.0)


def addcdiv_into_copy(a: T, b: T, c: T) -> object:
    # test_addcdiv_
    a_copy = torch.tensor(a)
    return a_copy.addcdiv_(b, c, value=5.0)


def addcmul_tensor_value(x: T, y: T, z: T, s: T) -> object:
    # test_addcmul_ (the value a 0-d tensor)
    return x.addcmul_(y, z, value=s)  # type: ignore[arg-type]


def _addcmul_inputs(rg: bool) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        return (
            inp(torch.ones(2, 2), two),
            inp(torch.ones(2, 2) + 1, two, rg=rg),
            inp(torch.rand(2, 2), two, rg=rg),
            inp(torch.tensor(0.3), two),
        )

    return make


def foreach_lerp_lists(x: list[T], y: list[T], s: T) -> object:
    # test_foreach_lerp_
    return torch._foreach_lerp_(x, y, s)  # type: ignore[call-overload]


def _lerp_inputs(two: bool) -> tuple[object, ...]:
    return (
        [inp(torch.ones(2, 2) * 4.26, two), inp(torch.ones(2, 2) * 3.14, two)],
        [inp(torch.ones(2, 2), two), inp(torch.ones(2, 2), two)],
        inp(torch.tensor(0.5), two),
    )


def return_tuple_with_inputs(a: T, b: T) -> object:
    # test_return_tuple1
    return (a - b, b - a, a, b)


def return_sum_and_input(x: T) -> object:
    # test_return_tuple2
    return (torch.add(x, x), x)


def return_dict_of_inputs(x: T, y: T) -> object:
    # test_return_dict: x three times, one list twice
    z = [x + y, y, False]
    return {"x": x, "z": z, "a": x, "b": z, "c": x}


def iadd_input_in_loop(x: T) -> object:
    # test_list_compare_polyfill: `x += k * c` on the input, once per true comparison
    for a, b, c in [
        [(1, 2, 3), (1, 2, 3), 7.77],
        [(1, 4, 3), (1, 2, 3), 3.33],
        [(1, 2), (1, 2, 3), 5.55],
        [(1, 2, 3), (1, 2), 11.11],
        [(1, -1, 3), (1, 2, 3), 13.33],
    ]:
        if a != b:
            x += 1 * c  # type: ignore[operator]
        if a == b:
            x += 2 * c  # type: ignore[operator]
        if a < b:  # type: ignore[operator]
            x += 4 * c  # type: ignore[operator]
        if a > b:  # type: ignore[operator]
            x += 8 * c  # type: ignore[operator]
        if a <= b:  # type: ignore[operator]
            x += 16 * c  # type: ignore[operator]
        if a >= b:  # type: ignore[operator]
            x += 32 * c  # type: ignore[operator]
    return x


def unsqueezed_slice(a: T) -> object:
    # test_slice6
    return torch.unsqueeze(a, 0)[:, 2:]


def halves_difference(a: T) -> object:
    # test_unpack1
    a, b = a[:5], a[5:]
    return a - b


def transpose_for_scores(x: T) -> object:
    # test_transpose_for_scores: a view of the input returned
    new_x_shape = x.size()[:-1] + (2, 5)
    x = x.view(*new_x_shape)
    return x.permute(0, 2, 1)


def tuple_iadd(a: T, b: T) -> object:
    # test_tuple_iadd: the inputs returned beside new values
    output: tuple[T, ...] = (a, b)
    output += (a + b, a - b)
    return output


def no_grad_inner_function(x: T) -> object:
    # test_context_wrapping_nested_functions_no_closure
    @torch.no_grad()
    def augment(x: T) -> T:
        return (x + 1) * 2

    return augment(x)


def ones_like_transpose(x: T) -> object:
    # test_T
    return torch.ones_like(x.T)


def filter_by_requires_grad(inputs: list[T]) -> object:
    # test_filter: the inputs that require grad multiplied in
    out = inputs[0]
    for i in filter(lambda x: x.requires_grad, inputs):
        out = out * i
    return out


def _filter_inputs(two: bool) -> tuple[object, ...]:
    return ([inp(torch.arange(2, dtype=torch.bfloat16), two), inp(torch.arange(2, dtype=torch.bfloat16), two, True)],)


GLOBAL_D = torch.ones(10, 10)
torch.manual_seed(0)
GLOBAL_LINEAR = torch.nn.Linear(10, 10)


def global_tensor(a: T, b: T) -> object:
    # test_globalvar
    return a - b + GLOBAL_D


def global_module(x: T) -> object:
    # test_globalmodule: a global Linear (its parameters require grad)
    return GLOBAL_LINEAR(x)


def partial_mul_kwarg(x: T) -> object:
    # test_partials_torch_op_kwarg
    par_mul = functools.partial(torch.mul, other=torch.ones(10, 10))
    return par_mul(x)


def inline_softmax(x: T, y: T) -> object:
    # test_inline_softmax
    return torch.nn.Softmax(dim=-1)(x + y * 2)


FUNCTIONS = [
    *ported("add_into_copy", add_into_copy, _randn((10, 10), (10, 10))),
    *ported("add_into_copy_train", add_into_copy, _randn((10, 10), (10, 10), rg=True)),
    *ported("addcdiv_into_copy", addcdiv_into_copy, _randn((10, 10), (10, 10), (10, 10))),
    *ported("addcmul_tensor_value", addcmul_tensor_value, _addcmul_inputs(False)),
    *ported("addcmul_tensor_value_train", addcmul_tensor_value, _addcmul_inputs(True)),
    *ported("foreach_lerp_lists", foreach_lerp_lists, _lerp_inputs),
    *ported("return_tuple_with_inputs", return_tuple_with_inputs, _randn((10, 10), (10, 10))),
    *ported("return_tuple_with_inputs_train", return_tuple_with_inputs, _randn((10, 10), (10, 10), rg=True)),
    *ported("return_sum_and_input_train", return_sum_and_input, _randn((10, 10), rg=True)),
    *ported("return_dict_of_inputs", return_dict_of_inputs, _randn((10, 10), (10, 10))),
    *ported("return_dict_of_inputs_train", return_dict_of_inputs, _randn((10, 10), (10, 10), rg=True)),
    *ported("iadd_input_in_loop", iadd_input_in_loop, _randn((10, 10))),
    *ported("iadd_input_in_loop_train", iadd_input_in_loop, _randn((10, 10), nonleaf=True)),
    *ported("unsqueezed_slice", unsqueezed_slice, _randn((10, 10))),
    *ported("unsqueezed_slice_train", unsqueezed_slice, _randn((10, 10), rg=True)),
    *ported("halves_difference_train", halves_difference, _randn((10, 10), rg=True)),
    *ported("transpose_for_scores", transpose_for_scores, _randn((10, 10))),
    *ported("transpose_for_scores_train", transpose_for_scores, _randn((10, 10), rg=True)),
    *ported("tuple_iadd_train", tuple_iadd, _randn((10, 10), (10, 10), rg=True)),
    *ported("no_grad_inner_function_train", no_grad_inner_function, _randn((10, 10), rg=True)),
    *ported("ones_like_transpose", ones_like_transpose, _randn((10, 10))),
    *ported("filter_by_requires_grad_train", filter_by_requires_grad, _filter_inputs),
    *ported("global_tensor", global_tensor, _randn((10, 10), (10, 10))),
    *ported("global_module", global_module, _randn((10, 10))),
    *ported("partial_mul_kwarg_train", partial_mul_kwarg, _randn((10, 10), rg=True)),
    *ported("inline_softmax_train", inline_softmax, _randn((10, 10), (10, 10), rg=True)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_functions.py: DefaultsTests


def _with_default_tensors(x: T = torch.zeros((2, 2)), *, kw_x: T = torch.zeros((1, 2))) -> tuple[T, T]:  # noqa: B008
    # global_func_with_default_tensor_args: its default tensors written each call
    x.add_(1)
    kw_x.add_(1)
    return x, kw_x


def default_tensor_args() -> object:
    # test_func_default_tensor_args: the function's default tensors written and returned
    return _with_default_tensors()


def _reset_function_defaults() -> tuple[object, ...]:
    (x,) = _with_default_tensors.__defaults__  # type: ignore[misc]
    x.zero_()
    (_with_default_tensors.__kwdefaults__ or {})["kw_x"].zero_()
    return ()


class _DefaultTensorArgsMethod(torch.nn.Module):
    def forward(self, x: T = torch.zeros((2, 2)), *, kw_x: T = torch.zeros((1, 2))) -> tuple[T, T]:  # noqa: B008
        x.add_(1)
        kw_x.add_(1)
        return x, kw_x


class DefaultTensorArgsWrapper(torch.nn.Module):
    # test_meth_default_tensor_args: WrapperModule over ModuleWithDefaultTensorArgsMethod
    def __init__(self) -> None:
        super().__init__()
        self.m = _DefaultTensorArgsMethod()

    def forward(self) -> object:
        return self.m()


def _reset_method_defaults() -> tuple[object, ...]:
    forward = _DefaultTensorArgsMethod.forward
    (x,) = forward.__defaults__  # type: ignore[misc]
    x.zero_()
    (forward.__kwdefaults__ or {})["kw_x"].zero_()
    return ()


def write_then_contains_list(x: T) -> object:
    # test_listlike_of_tensors_contains_constant (list): `1 in [x]` compares x with 1
    x.add_(1)
    s = [x]
    return 1 in s


def write_then_contains_set(x: T) -> object:
    # test_listlike_of_tensors_contains_constant (set): by hash, no comparison
    x.add_(1)
    s = {x}
    return 1 in s


def write_then_set_size(x: T) -> object:
    # test_set_construction: add_ returns x itself, so the set holds one tensor
    y = x.add_(1)
    s = {x}
    s.add(y)
    return len(s)


DEFAULTS = [
    Case(name="fm_default_tensor_args", fn=default_tensor_args, make_inputs=_reset_function_defaults),
    Case(name="fm_meth_default_tensor_args", fn=DefaultTensorArgsWrapper(), make_inputs=_reset_method_defaults),
    *ported("write_then_contains_list", write_then_contains_list, _randn((1,))),
    *ported("write_then_contains_set", write_then_contains_set, _randn((1,))),
    *ported("write_then_set_size", write_then_set_size, _randn((4,))),
    *ported("write_then_set_size_train", write_then_set_size, _randn((4,), nonleaf=True)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_misc.py: MiscTests


def copy_into_empty_then_sub(a: T, b: T) -> object:
    # test_inplace (inplace1)
    o = torch.empty((10, 10))
    o.copy_(a)
    o -= b
    return o


def iadd_on_literals(y: T) -> object:
    # test_inplace_desugaring
    x0 = 1
    x0 += y  # type: ignore[assignment]
    x1 = 1
    x1 -= y  # type: ignore[assignment]
    return x0, x1


def copy_slices_into_empty(a: T, b: T) -> object:
    # test_unpack4
    a = a[:5, :]
    b = b[:5, :]
    x, y = a.size()
    o = torch.empty((x, y))
    o.copy_(a / b)
    return o


def set_real_of_complex(x: T) -> object:
    # test_tensor_setattr_getset_descriptor
    x.real = 10  # type: ignore[assignment]
    return x + 1


def _complex_ones(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(5, dtype=torch.cfloat), two),)


def grad_and_attr_on_intermediate(x: T) -> object:
    # test_newly_constructed_tensor_attr_mutation
    y = x + 10
    y.grad = x
    y.foo = 42  # type: ignore[attr-defined]
    return y


def attr_on_input(x: T, flag: bool) -> object:
    # test_input_tensor_custom_attr_mutation
    x.offloading_activation = flag  # type: ignore[attr-defined]
    return x + 1


def attr_on_intermediate(x: T, flag: bool) -> object:
    # test_intermediate_tensor_custom_attr_mutation
    y = x + 1
    y.offloading_activation = flag  # type: ignore[attr-defined]
    return y


def _ones_and_flag(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(5), two), True)


def add_numbers_out(a: int, b: int, out: T) -> object:
    # test_scalar_device_movement: the result is `out`
    res = torch.add(a, b, out=out)
    return res


def _numbers_and_out(two: bool) -> tuple[object, ...]:
    return (2, 3, inp(torch.tensor(0.0), two))


def write_rows_by_dunder_iter(x: T) -> object:
    # test_tensor__iter__: every row written, the last returned
    it = x.__iter__()  # type: ignore[no-untyped-call]
    for y in it:
        y.add_(1.0)
    return y


def write_rows_by_for(x: T) -> object:
    # test_tensor_iter (with grad, eager raises: a view of unbind written in place)
    for y in x:
        y.add_(1.0)
    return y


class ShareMemory(torch.nn.Module):
    # test_tensor_share_memory
    def __init__(self) -> None:
        super().__init__()
        self.hidden_size = 64
        self.num_layers = 2

    def forward(self, x: T) -> T:
        batch_size = x.size(0)
        h: T = torch.zeros(self.num_layers, batch_size, self.hidden_size).share_memory_()  # type: ignore[no-untyped-call]
        c = torch.zeros(self.num_layers, batch_size, self.hidden_size)
        return x + h.sum() + c.sum()


class ParamShapeBinops(torch.nn.Module):
    # test_param_shape_binops
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.param = torch.nn.Parameter(torch.randn(15))

    def forward(self, x: T) -> T:
        p = self.param.shape[0]
        y: float = p - x.shape[0]
        y = p + y
        y = p * y
        y = p % y
        y = p**y
        y = p // y
        y = pow(p, y)
        y = p / y
        return x + y


def getattr_view(x: T) -> object:
    # test_tensor_call_obj_hasattr_view
    return getattr(x, "view", None)(10)  # type: ignore[misc]


def shape_unpack(x: T) -> object:
    # test_shape_unpack
    _, b = x.size()
    return x * b


def builtin_isinstance(x: T) -> object:
    # test_builtin_isinstance
    t = torch.arange(1, 3)
    return [
        isinstance(x, torch.Tensor),
        isinstance(t, torch.Tensor),
        isinstance(x, int),
        isinstance(3, int),
        isinstance([1, 2, 3], list),
        isinstance({"foo": 1, "bar": 2}, dict),
    ]


def dict_difference(inputs: dict[str, T]) -> object:
    # test_tensor_dict1
    return inputs["a"] - inputs["b"] * 1.5


def dict_items_into_zeros(inputs: dict[str, T]) -> object:
    # test_tensor_dict2 (fn1): a fresh tensor written with each value
    total = torch.zeros(1)
    for _, v in inputs.items():
        total += v
    return total


def dict_keys_union_into_zeros(inputs_a: dict[str, T], inputs_b: dict[str, T]) -> object:
    # test_tensor_dict3
    total = torch.zeros(1)
    for k in inputs_a.keys() | inputs_b.keys():
        if k in inputs_a:
            total += inputs_a[k]
        if k in inputs_b:
            total += inputs_b[k]
    return total


def _dict_ab(rg: bool) -> Make:
    return lambda two: ({"a": inp(torch.Tensor([100]), two, rg=rg), "b": inp(torch.Tensor([200]), two, rg=rg)},)


def _dicts_abc(two: bool) -> tuple[object, ...]:
    v1, v2 = inp(torch.Tensor([100]), two), inp(torch.Tensor([200]), two)
    return ({"a": v1, "b": v2}, {"b": v1, "c": v2})


def _make_cell_writer() -> Callable[[T, T], object]:
    out = None

    def cell_output(a: T, b: T) -> object:
        # test_cell_output1: a closure cell written, nothing returned
        nonlocal out
        out = a + b * 10
        return None

    return cell_output


CELL_OUTPUT = _make_cell_writer()


def _cell_holds_result(outputs: object, args: tuple[object, ...]) -> None:
    """After each call (both sides): the cell holds a + b * 10, of the inputs' type."""
    a, b = args
    assert isinstance(a, T) and isinstance(b, T)
    (cell,) = CELL_OUTPUT.__closure__ or ()
    out = cell.cell_contents
    assert type(out) is type(a) and torch.equal(out, a + b * 10), "the closure's cell does not hold a + b * 10"


def param_add_under_grad_switches(param: T, y: T) -> object:
    # test_inplace_param_update: grad mode switched off, on, off, the Parameter written, the mode restored
    prev_grad = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        torch.set_grad_enabled(True)
        torch.set_grad_enabled(False)
        param.add_(y)
    finally:
        torch.set_grad_enabled(prev_grad)
    return None


def _param_and_y(two: bool) -> tuple[object, ...]:
    y = inp(torch.randn(4), two)
    return (torch.nn.Parameter(inp(torch.randn(4), two)), y)


def hasattr_of_input(x: T) -> object:
    # test_tensor_hasattr
    if hasattr(x, "test"):
        return x + 2
    return x + 1


def _with_test_attr(two: bool) -> tuple[object, ...]:
    x = inp(torch.ones(2, 2), two)
    x.test = None  # type: ignore[attr-defined]
    return (x,)


MISC = [
    *ported("copy_into_empty_then_sub", copy_into_empty_then_sub, _randn((10, 10), (10, 10))),
    *ported("copy_into_empty_then_sub_train", copy_into_empty_then_sub, _randn((10, 10), (10, 10), rg=True)),
    *ported("iadd_on_literals_train", iadd_on_literals, _randn((10, 10), rg=True)),
    *ported("copy_slices_into_empty_train", copy_slices_into_empty, _randn((10, 10), (10, 10), rg=True)),
    *ported("set_real_of_complex", set_real_of_complex, _complex_ones),
    *ported("grad_and_attr_on_intermediate", grad_and_attr_on_intermediate, lambda two: (inp(torch.ones(5), two),)),
    *ported("attr_on_input", attr_on_input, _ones_and_flag),
    *ported("attr_on_intermediate", attr_on_intermediate, _ones_and_flag),
    *ported("add_numbers_out", add_numbers_out, _numbers_and_out),
    *ported("write_rows_by_dunder_iter", write_rows_by_dunder_iter, _randn((10, 10))),
    *ported("write_rows_by_for", write_rows_by_for, _randn((10, 10))),
    *ported("write_rows_by_for_train", write_rows_by_for, _randn((10, 10), nonleaf=True), eager_raises=True),
    Case(name="fm_share_memory", fn=ShareMemory(), make_inputs=lambda: (torch.randn(4, 10),)),
    Case(name="fm_param_shape_binops", fn=ParamShapeBinops(), make_inputs=lambda: (torch.randn(3),)),
    *ported("getattr_view", getattr_view, _randn((10,))),
    *ported("getattr_view_train", getattr_view, _randn((10,), rg=True)),
    *ported("shape_unpack", shape_unpack, _randn((5, 10))),
    *ported("builtin_isinstance", builtin_isinstance, _randn((10, 10))),
    *ported("dict_difference_train", dict_difference, _dict_ab(True)),
    *ported("dict_items_into_zeros", dict_items_into_zeros, _dict_ab(False)),
    *ported("dict_items_into_zeros_train", dict_items_into_zeros, _dict_ab(True)),
    *ported("dict_keys_union_into_zeros", dict_keys_union_into_zeros, _dicts_abc),
    *ported("cell_output", CELL_OUTPUT, lambda two: (inp(torch.Tensor([100]), two),) * 2),
    *ported("param_add_under_grad_switches", param_add_under_grad_switches, _param_and_y),
    *ported("hasattr_of_input", hasattr_of_input, _randn((2, 2))),
    *ported("hasattr_of_input_with_attr", hasattr_of_input, _with_test_attr),
]
# (the cell's content checked after each call, on both sides)
MISC = [dataclasses.replace(c, after_call=_cell_holds_result) if "cell_output" in c.name else c for c in MISC]

CASES17 = FUNCTIONS + DEFAULTS + MISC
