"""Corpus, PyTorch's own programs, fifteenth part (held out: written from PyTorch's tests, not from ours): the programs
of test/dynamo/test_aot_autograd.py and test/inductor/test_auto_functionalize.py the eleventh part did not port.

From test_aot_autograd.py's AotAutogradFallbackTests: inputs whose requires_grad differs between calls, duplicated
arguments beside a captured tensor and beside lists of numbers, a custom op (a schema without alias annotations)
returning one tensor twice then written in place, a training module (conv, BatchNorm, ReLU, a residual add, Linear,
L1 loss), backwards run again (retain_graph, create_graph) and twice (a gradient of a gradient), set_() of a leaf
(eager raises), ops whose kernel reads data_ptr() in the forward or in a custom Function's backward, the donated
buffer programs (relu, matmul of an activation), a write of eleven overlapping views of one base, autograd.grad
inside the program. From test_auto_functionalize.py: an op with a defaulted optional mutable argument, an op that
writes its argument through numpy, no-op mutable ops on rows, aliases and overlapping slices (test_recompile's
programs), two aliases of one input passed to one op, an op returning fresh values while declaring a write.

Each program runs twice where it takes tensors: as written (`da_<name>`), and on torch's TwoTensor (`da_two_<name>`:
each tensor input a TwoTensor of it and its clone, with its requires_grad); modules run as written only. A `_train`
variant takes inputs that require grad (non-leaves where the program writes them, as eager requires).

As written: their inputs (shapes, dtypes, requires_grad settings) and programs; sizes the test picks only to be large
(a 100x16x32x32 input of a 1638400-wide Linear, 100 views of a 1000-element base) are smaller here (said where). Ops
the tests declare with `torch.library.define` and a CPU kernel are declared so here too, in the namespace `corpus15`.

Input: nothing. Output: `CASES15` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`da_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx

from tests.pipeline.corpus import Case, inp, ported_as

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]

ported = ported_as("da")


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_aot_autograd.py: requires_grad settings, duplicated arguments


def add_pair(x: T, y: T) -> object:
    # test_requires_grad_fake_via_dynamo_recompiles (F.forward)
    return (x + y,)


def _leaves_3x3(*rgs: bool) -> Make:
    return lambda two: tuple(inp(torch.randn(3, 3), two, rg=rg) for rg in rgs)


def sin_exp(x: T) -> object:
    # test_double_backward_with_compile's f3 and f4 (the program; the backward runs after the call)
    return x.sin().exp()


def _grad_of_grad(out: object, args: tuple[object, ...]) -> None:
    """test_double_backward_with_compile (3): autograd.grad with create_graph=True outside the program, then the grad
    of that gradient; written into the second input (a buffer) so the oracle compares it."""
    x, buf = args
    assert isinstance(out, torch.Tensor) and isinstance(x, torch.Tensor) and isinstance(buf, torch.Tensor)
    (gx,) = torch.autograd.grad(out, x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx, x)
    with torch.no_grad():
        buf.copy_(torch.stack([gx.detach(), ggx]))


def sin_exp_of_first(x: T, buf: T) -> object:
    # test_double_backward_with_compile (3)
    return x.sin().exp()


def _scalar_leaf_and_buffer(two: bool) -> tuple[object, ...]:
    return inp(torch.tensor(1.0), two, rg=True), inp(torch.zeros(2), two)


def grad_inside(x: T) -> object:
    # test_double_backward_with_compile (2): autograd.grad with create_graph=True inside the program
    y = x.sin().exp()
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    return gx


_GLOBAL_Z = torch.randn(3, 3, requires_grad=True)


class TruncPlusGlobal(torch.nn.Module):
    # test_arg_dupe_via_dynamo_recompiles_many_with_global (z, a tensor the module reads from outside, requires grad)
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, a: T, b: T, e: int, f: int) -> T:
        a.trunc_()
        b.trunc_()
        return (a + b + _GLOBAL_Z + self.mean) * e * f


class TruncPlusMeanLists(torch.nn.Module):
    # test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg_list
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, e: list[int], f: list[int], a: T, b: T) -> T:
        a.trunc_()
        b.trunc_()
        return (a + b + self.mean) * e[0] * f[0]


def _dupes(same: bool) -> tuple[T, T]:
    a = torch.randn(3, 3, requires_grad=True).clone()
    return (a, a) if same else (a, torch.randn(3, 3, requires_grad=True).clone())


# test_multiple_aot_autograd_calls_dupe_args: a schema without alias annotations whose kernel returns one tensor twice
# for small inputs (the test turns the custom-op aliasing check off); kernels for CPU and Meta, as there.
_LIB = torch.library.Library("corpus15", "DEF")  # type: ignore[no-untyped-call]
_LIB.define("maybe_dupe_op(Tensor a) -> (Tensor, Tensor)")  # type: ignore[no-untyped-call]


def _maybe_dupe(x: T) -> tuple[T, T]:
    y = x + 1
    z = x + 2
    return (y, y) if x.numel() < 5 else (y, z)


_LIB.impl("maybe_dupe_op", _maybe_dupe, "CPU")  # type: ignore[no-untyped-call]
_LIB.impl("maybe_dupe_op", _maybe_dupe, "Meta")  # type: ignore[no-untyped-call]


def mul_dupe_outputs(a: T) -> object:
    # test_multiple_aot_autograd_calls_dupe_args (f)
    b, c = torch.ops.corpus15.maybe_dupe_op(a)
    return (b.mul_(c),)


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_aot_autograd.py: modules, backwards run again


class ConvBnLinearLoss(torch.nn.Module):
    # test_aot_sequence_nr's Model (16 channels of 32x32 into a Linear of 1638400 there; 4 channels of 4x4 here)
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(4, 4, kernel_size=(1, 1), stride=1, padding="same", bias=True)
        self.bn1 = torch.nn.BatchNorm2d(num_features=4)
        self.relu1 = torch.nn.ReLU()
        self.fc1 = torch.nn.Linear(in_features=2 * 4 * 4 * 4, out_features=1)
        self.loss_fn = torch.nn.L1Loss()

    def forward(self, x: T, target: T) -> object:
        y = x
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu1(x)
        x = x + y
        x = torch.flatten(x)
        x = self.fc1(x)
        return (self.loss_fn(x, target),)


class Linear5x7(torch.nn.Module):
    # test_aot_export_joint_simple_repro
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(5, 7)

    def forward(self, x: T) -> T:
        out: T = self.linear(x)
        return out


class Sin(torch.nn.Module):
    # test_joint_custom_pass
    def forward(self, x: T) -> T:
        return x.sin()


class ReluPlusParam(torch.nn.Module):
    # test_donated_buffer4 ([2, 2]) and test_donated_buffer_with_retain_or_create_graph1..4 ([3, 3])
    def __init__(self, n: int) -> None:
        super().__init__()
        self.param = torch.nn.Parameter(torch.zeros([n, n]))

    def forward(self, x: T) -> T:
        return F.relu(x) + self.param


def _backward_retained(out: object, args: tuple[object, ...]) -> None:
    # test_donated_buffer_with_retain_or_create_graph2: five backwards that keep the graph (the oracle's is the last)
    assert isinstance(out, torch.Tensor)
    total = out.sum()
    for _ in range(5):
        total.backward(retain_graph=True)  # type: ignore[no-untyped-call]


def _backward_create_graph(out: object, args: tuple[object, ...]) -> None:
    # test_donated_buffer_with_retain_or_create_graph3: a backward that records its own graph, then retained ones
    assert isinstance(out, torch.Tensor)
    out.sum().backward(create_graph=True, retain_graph=True)  # type: ignore[no-untyped-call]
    for _ in range(2):
        out.sum().backward(retain_graph=True)  # type: ignore[no-untyped-call]


def relu(x: T) -> object:
    # test_donated_buffer1
    return F.relu(x)


def matmul(activation: T, param2: T) -> object:
    # test_donated_buffer2 and 3 (g, the compiled part; the activation made outside it)
    return torch.matmul(activation, param2)


def _activation(exp: bool) -> Make:
    """test_donated_buffer2 (inp + param1) and 3 (exp of it): the activation, a non-leaf that requires grad, and
    param2."""

    def make(two: bool) -> tuple[object, ...]:
        param1 = inp(torch.ones(4, 4), two, rg=True)
        activation = inp(torch.ones(4, 4), two) + param1
        return (activation.exp() if exp else activation), inp(torch.ones(4, 4), two, rg=True)

    return make


def set_leaf_to_fresh(x: T) -> object:
    # test_aot_autograd_raises_invalid_leaf_set (eager raises: a leaf that requires grad used in an in-place op)
    x.set_(torch.ones(2))  # type: ignore[call-overload]
    return None


def add_one_to_each(*args: T) -> object:
    # test_inputs_overlapping_with_mutation_stress
    for a in args:
        a.add_(1)
    return args[0]


def _splits_and_overlap(rg: bool) -> Make:
    """test_inputs_overlapping_with_mutation_stress: ten views of ten elements of one base (a hundred of a thousand
    there) and one more over elements 4..44, overlapping five of them (fifty there). With grad (`rg`: floats, the
    base a non-leaf) the ten are basic slices: eager forbids writing split()'s views in place when they require grad.
    """

    def make(two: bool) -> tuple[object, ...]:
        if not rg:
            base = inp(torch.arange(100), two)
            return (*base.split(10), base[4:44])  # type: ignore[no-untyped-call]
        base = inp(torch.arange(100, dtype=torch.float32), two, rg=True).clone()
        return (*(base[i : i + 10] for i in range(0, 100, 10)), base[4:44])

    return make


def layer_norm_grad(x: T, weight: T, bias: T) -> object:
    # test_layer_norm_double_backward_dynamic_shapes (LayerNormGradModel.forward: LayerNorm(64) there, 8 wide here)
    x = x.clone().requires_grad_(True)
    y = F.layer_norm(x, (8,), weight, bias)
    (grad,) = torch.autograd.grad(y, x, grad_outputs=torch.ones_like(y), create_graph=True, allow_unused=True)
    return y, grad


# test_data_ptr_access_fails_in_forward / _in_backward: ops whose kernel (CompositeImplicitAutograd) reads the data
# pointer of its input, or whose custom Function's backward reads its gradient's.
_LIB.define("data_ptr_forward(Tensor x) -> Tensor")  # type: ignore[no-untyped-call]
_LIB.define("data_ptr_backward(Tensor x) -> Tensor")  # type: ignore[no-untyped-call]


def _data_ptr_forward(x: T) -> T:
    x.data_ptr()
    return x.clone()


class CloneReadingGradPointer(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        return x.clone()

    @staticmethod
    def backward(ctx: FunctionCtx, grad: T) -> T:
        grad.data_ptr()
        return grad.clone()


def _data_ptr_backward(x: T) -> T:
    out: T = CloneReadingGradPointer.apply(x)  # type: ignore[no-untyped-call]
    return out


_LIB.impl("data_ptr_forward", _data_ptr_forward, "CompositeImplicitAutograd")  # type: ignore[no-untyped-call]
_LIB.impl("data_ptr_backward", _data_ptr_backward, "CompositeImplicitAutograd")  # type: ignore[no-untyped-call]


def data_ptr_graph_input(x: T) -> object:
    # test_data_ptr_access_fails_in_forward
    return torch.ops.corpus15.data_ptr_forward(x)


def data_ptr_graph_intermediate(x: T) -> object:
    # test_data_ptr_access_fails_in_forward
    return torch.ops.corpus15.data_ptr_forward(x.clone())


def data_ptr_in_backward(x: T) -> object:
    # test_data_ptr_access_fails_in_backward
    return torch.ops.corpus15.data_ptr_backward(x)


def _randn(*shape: int, rg: bool = False) -> Make:
    return lambda two: (inp(torch.randn(*shape), two, rg=rg),)


AOT_AUTOGRAD = [
    *ported("requires_grad_fake_train", add_pair, _leaves_3x3(True, True)),
    *ported("requires_grad_fake_mixed_train", add_pair, _leaves_3x3(True, False)),
    *ported("double_backward_create_graph_false_train", sin_exp, lambda two: (inp(torch.tensor(1.0), two, rg=True),)),
    *ported("double_backward_outside_train", sin_exp_of_first, _scalar_leaf_and_buffer, after_call=_grad_of_grad),
    *ported("double_backward_inside_train", grad_inside, lambda two: (inp(torch.tensor(1.0), two, rg=True),)),
    *ported("multiple_aot_calls_dupe_args", mul_dupe_outputs, lambda two: (inp(torch.ones(4), two),)),
    *ported("multiple_aot_calls_distinct_args", mul_dupe_outputs, lambda two: (inp(torch.ones(6), two),)),
    *ported(
        "invalid_leaf_set_train", set_leaf_to_fresh, lambda two: (inp(torch.ones(2), two, rg=True),), eager_raises=True
    ),
    *ported("overlapping_mutation_stress", add_one_to_each, _splits_and_overlap(False)),
    *ported("overlapping_mutation_stress_train", add_one_to_each, _splits_and_overlap(True)),
    *ported("data_ptr_graph_input", data_ptr_graph_input, _randn(3)),
    *ported("data_ptr_graph_intermediate", data_ptr_graph_intermediate, _randn(3)),
    *ported("data_ptr_in_backward_train", data_ptr_in_backward, _randn(3, rg=True)),
    *ported("donated_buffer1_train", relu, _randn(3, 3, rg=True)),
    *ported("donated_buffer2_train", matmul, _activation(False)),
    *ported("donated_buffer3_train", matmul, _activation(True)),
    Case(
        name="da_layer_norm_double_backward",
        fn=layer_norm_grad,
        make_inputs=lambda: (torch.randn(10, 8), torch.ones(8, requires_grad=True), torch.zeros(8, requires_grad=True)),
    ),
    Case(
        name="da_arg_dupe_many_with_global_train",  # f(a1, a1, 2, 2)
        fn=_seeded(TruncPlusGlobal),
        make_inputs=lambda: (*_dupes(True), 2, 2),
    ),
    Case(
        name="da_arg_dupe_many_with_global_distinct_train",  # f(a2, b2, 2, 2)
        fn=_seeded(TruncPlusGlobal),
        make_inputs=lambda: (*_dupes(False), 2, 2),
    ),
    Case(
        name="da_arg_dupe_non_tensor_arg_list_train",  # f([3, 2, 1], [4, 5, 6], a1, a1)
        fn=_seeded(TruncPlusMeanLists),
        make_inputs=lambda: ([3, 2, 1], [4, 5, 6], *_dupes(True)),
    ),
    Case(
        name="da_arg_dupe_non_tensor_arg_list_distinct_train",  # f([3, 2, 1], [4, 5, 6], a2, b2)
        fn=_seeded(TruncPlusMeanLists),
        make_inputs=lambda: ([3, 2, 1], [4, 5, 6], *_dupes(False)),
    ),
    Case(
        name="da_aot_sequence_nr_train",  # test_aot_sequence_nr (mod.train(); x requires grad)
        fn=_seeded(ConvBnLinearLoss),
        make_inputs=lambda: (torch.rand(2, 4, 4, 4, requires_grad=True), torch.rand(1)),
    ),
    Case(name="da_aot_export_joint_simple", fn=_seeded(Linear5x7), make_inputs=lambda: (torch.rand(3, 4, 5),)),
    Case(name="da_joint_custom_pass", fn=Sin(), make_inputs=lambda: (torch.randn(10),)),
    Case(name="da_joint_custom_pass_train", fn=Sin(), make_inputs=lambda: (torch.randn(10, requires_grad=True),)),
    Case(
        name="da_donated_buffer4_train",
        fn=ReluPlusParam(2),
        make_inputs=lambda: (torch.ones([2, 2], requires_grad=True),),
    ),
    Case(
        name="da_donated_buffer_retain_graph_train",  # test_donated_buffer_with_retain_or_create_graph2 (and 4)
        fn=ReluPlusParam(3),
        make_inputs=lambda: (torch.randn(3, 3, requires_grad=True),),
        after_call=_backward_retained,
    ),
    Case(
        name="da_donated_buffer_create_graph_train",  # test_donated_buffer_with_retain_or_create_graph3
        fn=ReluPlusParam(3),
        make_inputs=lambda: (torch.randn(3, 3, requires_grad=True),),
        after_call=_backward_create_graph,
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# test/inductor/test_auto_functionalize.py: ops declared by a schema with a CPU kernel, as there

_LIB.define(  # type: ignore[no-untyped-call]
    "with_default(Tensor a, int b, Tensor(d!)? c=None, Tensor? d=None, int e=-1) -> ()"
)
_LIB.define("sin_numpy(Tensor(a!) x) -> ()")  # type: ignore[no-untyped-call]
_LIB.define("nop_two(Tensor(a!) x, Tensor(b!) y) -> ()")  # type: ignore[no-untyped-call]
_LIB.define("not_same(Tensor(a!) x, Tensor(b!) y) -> ()")  # type: ignore[no-untyped-call]


def _with_default(a: T, b: int, c: T | None = None, d: T | None = None, e: int = -1) -> None:
    a + b  # (the test's kernel computes and drops it)


def _sin_numpy(x: T) -> None:
    x_np = x.detach().numpy()  # a view of x's memory
    np.sin(x_np, out=x_np)


def _nop_two(x: T, y: T) -> None:
    pass


def _not_same(x: T, y: T) -> None:
    assert x is not y  # test_alias_id_input_to_custom_op: id(x) != id(y)


for _name, _kernel in (
    ("with_default", _with_default),
    ("sin_numpy", _sin_numpy),
    ("nop_two", _nop_two),
    ("not_same", _not_same),
):
    _LIB.impl(_name, _kernel, "CPU")  # type: ignore[no-untyped-call]


def call_with_defaults(a: T) -> object:
    # test_auto_functionalize_can_with_default (f(a, mode) calls foo(a, 0))
    return torch.ops.corpus15.with_default(a, 0)


def sin_numpy_of_slice_of_clone(x: T) -> object:
    # test_auto_functionalize_on_view (its kernel writes through numpy)
    x = x.clone()
    y = x[:]
    torch.ops.corpus15.sin_numpy(y)
    return x


def sin_numpy_of_input(x: T) -> object:
    # test_auto_functionalize_on_view (the eager call on the input itself)
    torch.ops.corpus15.sin_numpy(x)
    return None


def nop_first_rows(x: T) -> object:
    # test_recompile's first func
    torch.ops.corpus15.nop_two(x[0], x[1])
    return None


def nop_aliases(x: T) -> object:
    # test_recompile's second func
    a = torch.ops.aten.alias.default(x)
    b = torch.ops.aten.alias.default(x)
    torch.ops.corpus15.nop_two(a, b)
    return None


def nop_crossing_slices(x: T) -> object:
    # test_recompile's fourth func: column 3 and rows 1..3 meet
    a = torch.ops.aten.slice.Tensor(x, 1, 3, 4)
    b = torch.ops.aten.slice.Tensor(x, 0, 1, 4)
    torch.ops.corpus15.nop_two(a, b)
    return None


def alias_and_input_to_op(x: T) -> object:
    # test_alias_id_input_to_custom_op (skipped in torch: inductor optimizes the alias away)
    a = torch.ops.aten.alias.default(x)
    torch.ops.corpus15.not_same(a, x)
    return None


@torch.library.custom_op("corpus15::mk_image", mutates_args=("decoder",), device_types=["cpu"])
def mk_image(decoder: T) -> T:
    # test_unbacked_auto_functionalize_op (declares a write of decoder, makes a fresh random image)
    return torch.randn(2, 3, 4, 5)


@mk_image.register_fake
def _mk_image_fake(decoder: T) -> T:
    image_size = [torch.library.get_ctx().new_dynamic_size() for _ in range(4)]
    return torch.empty(image_size)


def make_image(x: T) -> object:
    # test_unbacked_auto_functionalize_op (f)
    return torch.ops.corpus15.mk_image.default(x)


DYNAMIC = {"dynamic": True}


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> Make:
    return lambda two: (inp(torch.rand(*shape).to(dtype), two),)


AUTO_FUNCTIONALIZE = [
    *ported("af_can_with_default", call_with_defaults, lambda two: (inp(torch.tensor([10, 10, 10]), two),)),
    *ported("af_on_view_numpy", sin_numpy_of_slice_of_clone, _rand(3)),
    *ported("af_on_view_numpy_input", sin_numpy_of_input, _rand(3)),
    *ported("af_recompile_first_rows", nop_first_rows, _rand(10, 10), compile_kwargs=DYNAMIC),
    *ported("af_recompile_aliases", nop_aliases, _rand(10, 2), compile_kwargs=DYNAMIC),
    *ported("af_recompile_crossing_slices", nop_crossing_slices, _rand(10, 10), compile_kwargs=DYNAMIC),
    *ported("af_alias_id_input", alias_and_input_to_op, _rand(2, 2)),
    *ported("af_unbacked_op", make_image, lambda two: (inp(torch.zeros(100, dtype=torch.int64), two),)),
]

CASES15 = AOT_AUTOGRAD + AUTO_FUNCTIONALIZE
