"""Corpus, PyTorch's own programs, tenth part: test/functorch/test_aotdispatch.py's programs the earlier parts did not
yet run: TestAOTAutograd's remaining programs (custom Functions without grad, outputs that view an intermediate, the
dupe/requires-grad guard programs, complex Linear, BatchNorm and Sequential modules), TestPartitioning's (recompute
and min-cut programs, saved shapes, layer_norm's getitem outputs, dropout's randomness), TestAOTDispatch's
TwoTensor-beside-plain program and TestAOTModuleSimplified's modules. Each program runs twice where it takes tensors:
as written (`ad_<name>`), and on torch's TwoTensor (`ad_two_<name>`: each tensor input a TwoTensor of it and its
clone, with its requires_grad); modules run as written only.

As written: their inputs (shapes, dtypes, requires_grad settings), their programs (the part of the test that builds
the graph; the oracle runs the backward the test ran and compares every gradient). Where the test compiles with
`test_mutation=True`, the inputs are non-leaves (`leaf.add(1)`) and `after_call` writes the outputs, as
verify_aot_autograd does; where it compiles with `dynamic=True`, so does the case. Sizes the test picks only to be
large (a 16x128x768 input of a 3072-wide Linear, a 2x512x40x59 upsample) are smaller here (said where).

Input: nothing. Output: `CASES10` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`ad_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx
from torch.testing._internal.two_tensor import TwoTensor

from tests.pipeline.corpus import Case, inp, ported_as

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]


ported = ported_as("ad")


def mul_outputs(out: object, args: tuple[object, ...]) -> None:
    """after_call of verify_aot_autograd(test_mutation=True): each tensor output multiplied by 2 in place."""
    for o in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(o, torch.Tensor):
            o.mul_(2)


# ---------------------------------------------------------------------------------------------------------------
# TestAOTAutograd


def view_of_intermediate(a: T) -> object:
    # test_output_aliases_intermediate_single
    out = torch.mul(a, 3)
    return out.view(-1)


def _ones_3x3_nonleaf(rg: bool) -> Make:
    return lambda two: (inp(torch.ones(3, 3), two, rg).add(1),)


class CloneGradPlusOne(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        return x.clone()

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: T) -> T:
        return grad_output + 1


def custom_clone(x: T) -> object:
    # test_custom_autograd
    return CloneGradPlusOne.apply(x)  # type: ignore[no-untyped-call]


def _randn_3(rg: bool) -> Make:
    return lambda two: (inp(torch.randn(3), two, rg),)


def sin_cos_sin(a: T, b: T, c: T) -> object:
    # test_list_codegen
    return a.sin() * b.cos() * c.sin()


def _three_randn_5(two: bool) -> tuple[object, ...]:
    return tuple(inp(torch.randn(5), two, rg=True) for _ in range(3))


def sin_sin(x: T) -> object:
    # test_compilation_context (compiled once with grad, once without)
    return x.sin().sin()


def _randn_5(rg: bool) -> Make:
    return lambda two: (inp(torch.randn(5), two, rg),)


def add_pair(x: T, y: T) -> object:
    # test_invalid_requires_grad (x, y) and (x, z); test_dupe_arg's x + y
    return (x + y,)


def _x_y(y_rg: bool) -> Make:
    return lambda two: (inp(torch.randn(3, 3), two, rg=True), inp(torch.randn(3, 3), two, rg=y_rg))


def times_two(x: T) -> object:
    # test_grad_context (its no_grad call: the `_no_grad` variant)
    return x * 2


def _randn_scalar(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(()), two, rg=True),)


class ComplexLinear(torch.nn.Module):
    # test_complex_linear (https://github.com/pytorch/pytorch/issues/93424)
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(10, 10, dtype=torch.complex64)

    def forward(self, x: T) -> T:
        out: T = self.linear(x).sum().abs()
        return out


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


def _batchnorm_eval() -> torch.nn.Module:
    # test_batchnorm_inference: BatchNorm2d(4, 4) (eps=4) in eval mode
    m = torch.nn.BatchNorm2d(4, 4)
    m.eval()
    return m


def _linear_5_eval() -> torch.nn.Module:
    # test_real_weights_in_symbolic_mode
    return torch.nn.Linear(5, 5).eval()


def aot_dispatch_simple(a: T, b: T) -> object:
    # TestAOTDispatch.test_aot_dispatch_simple: a is a TwoTensor, b is not
    aa = torch.mul(a, 6)
    bb = torch.div(b, 2)
    return aa + bb


def _two_and_plain(two: bool) -> tuple[object, ...]:
    a = TwoTensor(torch.ones(3, 3, requires_grad=True), torch.ones(3, 3, requires_grad=True))  # type: ignore[no-untyped-call]
    return a, inp(torch.ones(3, 3), two, rg=True)


AUTOGRAD = [
    *ported("intermediate_single", view_of_intermediate, _ones_3x3_nonleaf(False), after_call=mul_outputs),
    *ported("intermediate_single_train", view_of_intermediate, _ones_3x3_nonleaf(True), after_call=mul_outputs),
    *ported("custom_autograd", custom_clone, _randn_3(False)),
    *ported("custom_autograd_train", custom_clone, _randn_3(True)),
    *ported("list_codegen_train", sin_cos_sin, _three_randn_5),
    *ported("compilation_context", sin_sin, _randn_5(False)),
    *ported("compilation_context_train", sin_sin, _randn_5(True)),
    *ported("invalid_requires_grad_train", add_pair, _x_y(True)),
    *ported("invalid_requires_grad_mixed_train", add_pair, _x_y(False)),
    *ported("grad_context_train", times_two, _randn_scalar),
    *ported("aot_dispatch_simple_train", aot_dispatch_simple, _two_and_plain),
    Case(
        name="ad_complex_linear",
        fn=_seeded(ComplexLinear),
        make_inputs=lambda: (torch.randn(1, 10, 10, dtype=torch.complex64),),
    ),
    Case(
        name="ad_module_sequential",  # test_module
        fn=_seeded(lambda: torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())),
        make_inputs=lambda: (torch.randn(32, 32),),
    ),
    Case(
        name="ad_batchnorm",  # test_batchnorm: compiled_module(BatchNorm2d(4)), its backward
        fn=_seeded(lambda: torch.nn.BatchNorm2d(4)),
        make_inputs=lambda: (torch.ones(1, 4, 2, 2),),
    ),
    Case(name="ad_batchnorm_inference", fn=_seeded(_batchnorm_eval), make_inputs=lambda: (torch.ones(4, 4, 4, 4),)),
    Case(name="ad_real_weights", fn=_seeded(_linear_5_eval), make_inputs=lambda: (torch.randn(2, 5),)),
]


# ---------------------------------------------------------------------------------------------------------------
# TestPartitioning


def sin_sin_plus(a: T, b: T) -> object:
    # test_recompute_partitioning
    return torch.sin(torch.sin(a)) + b


def _rand_10x10_pair(two: bool) -> tuple[object, ...]:
    return inp(torch.rand(10, 10), two, rg=True), inp(torch.rand(10, 10), two, rg=True)


class LinearGelu(torch.nn.Module):
    # test_meta_tensor_inplace_op (its MockModule: a 3072x768 weight, a 16x128x768 input; 48x16 and 2x8x16 here)
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(48, 16, requires_grad=True))
        self.bias = torch.nn.Parameter(torch.randn(48, requires_grad=True))

    def forward(self, add_4: T) -> T:
        linear_4 = F.linear(add_4, self.weight, bias=self.bias)
        return F.gelu(linear_4)


def layer_norm_10(x: T, mod_weight: T, mod_bias: T) -> object:
    # test_default_partitioner_getitem
    return F.layer_norm(x, [10], mod_weight, mod_bias, eps=1e-6)


def _layer_norm_inputs(two: bool) -> tuple[object, ...]:
    return (
        inp(torch.randn(3, 10), two, rg=True),
        inp(torch.ones(10), two, rg=True),
        inp(torch.zeros(10), two, rg=True),
    )


def sum_dim1(x: T) -> object:
    # test_min_cut_partitioner_save_shape
    return x.sum(dim=1)


def _ones_10x10(two: bool) -> tuple[object, ...]:
    return (inp(torch.ones(10, 10), two, rg=True),)


def cat_expanded(a: T, b: T, c: T) -> object:
    # test_min_cut_partitioner_save_shape (its second program)
    sb = torch.ops.aten.sym_size(b)
    sc = c.size()
    x = sb[0] + sc[0]
    a_sz = (x, a.size(0))
    return torch.cat([a.expand(a_sz), b, c])


def _cat_inputs(two: bool) -> tuple[object, ...]:
    return (
        inp(torch.randn(10), two, rg=True),
        inp(torch.randn(3, 10), two, rg=True),
        inp(torch.randn(2, 10), two, rg=True),
    )


def cos3(x: T) -> object:
    # test_min_cut_partitioner
    return x.cos().cos().cos()


def _randn_3_grad(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(3), two, rg=True),)


def sum4_cos2(a: T, b: T, c: T, d: T) -> object:
    # test_min_cut_partitioner (its second program)
    x = a + b + c + d
    return x.cos().cos()


def _four_randn_3(two: bool) -> tuple[object, ...]:
    return tuple(inp(torch.randn(3), two, rg=True) for _ in range(4))


def cube(x: T) -> object:
    # test_min_cut_partitioner_recomputable_ops
    return x * x * x


def dropout_plus(x: T) -> object:
    # test_preserve_random
    return F.dropout(x, 0.5) + x


def _randn_4(two: bool) -> tuple[object, ...]:
    return (inp(torch.randn(4), two),)


DYNAMIC = {"dynamic": True}

PARTITIONING = [
    *ported("recompute_partitioning_train", sin_sin_plus, _rand_10x10_pair),
    Case(name="ad_meta_tensor_inplace_op", fn=_seeded(LinearGelu), make_inputs=lambda: (torch.randn(2, 8, 16),)),
    *ported("default_partitioner_getitem_train", layer_norm_10, _layer_norm_inputs),
    *ported("min_cut_save_shape_train", sum_dim1, _ones_10x10, compile_kwargs=DYNAMIC),
    *ported("min_cut_save_shape_cat_train", cat_expanded, _cat_inputs, compile_kwargs=DYNAMIC),
    *ported("min_cut_partitioner_train", cos3, _randn_3_grad),
    *ported("min_cut_partitioner_four_train", sum4_cos2, _four_randn_3),
    *ported("min_cut_recomputable_ops_train", cube, _randn_3_grad),
    *ported("preserve_random", dropout_plus, _randn_4),
]


# ---------------------------------------------------------------------------------------------------------------
# TestAOTModuleSimplified


class LinearAddRelu(torch.nn.Module):
    # test_aot_module_simplified_preserves_stack_trace (its MockModule)
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(20, 30)

    def forward(self, x: T, y: T) -> tuple[T]:
        z = self.linear(x)
        z = z + y
        z = z.relu()
        return (z,)


class Upsample(torch.nn.Module):
    # test_aot_module_simplified_dynamic... upsample (a 2x512x40x59 input there; 2x4x5x7 here)
    def __init__(self) -> None:
        super().__init__()
        self.upsample = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)

    def forward(self, x: T) -> tuple[T]:
        return (self.upsample(x),)


MODULE_SIMPLIFIED = [
    Case(
        name="ad_module_simplified_linear_add_relu",
        fn=_seeded(LinearAddRelu),
        make_inputs=lambda: (torch.randn(128, 20, requires_grad=True), torch.randn(128, 30, requires_grad=True)),
    ),
    Case(name="ad_module_simplified_upsample", fn=_seeded(Upsample), make_inputs=lambda: (torch.randn(2, 4, 5, 7),)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_subclasses.py's SubclassTests the eighth part did not port: torch-function subclasses whose class
# is read (isinstance, a class attribute, an overridden property), whose __new__ or __torch_function__ must not run,
# torch-function state read in the program, redispatch_function. (test_nontraceable_tensor_subclass is not here: its
# class's __torch_function__ raises on every call, the oracle's own copies of the input among them.)


class BadNewTorchFunction(torch.Tensor):
    # test_no_call_to_new: its __new__ must not run for the result of torch.add
    def __new__(cls, *args: Any, **kwargs: Any) -> BadNewTorchFunction:
        raise RuntimeError("Oops!")

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class DummyNDim(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func == torch.Tensor.ndim.__get__:  # type: ignore[attr-defined]
            return 10
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class NdimAttr(torch.Tensor):
    # test_user_overridden_attr_unsupported: a class attribute shadows Tensor.ndim
    ndim = 10

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class PlainTF(torch.Tensor):
    # test_overridden_method_guarding's, test_has_torch_function's LocalSubclass
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class Foo(torch.Tensor):
    # test_tensor_subclass_unpack: no override of its own
    pass


class ShapeAndTo(torch.Tensor):
    # test_subclass_override_shape_and_to (diffusers' GGUF parameter)
    def to(self, *args: Any, **kwargs: Any) -> Any:
        new = super().to(*args, **kwargs)
        new.tensor_shape = getattr(self, "tensor_shape", new.data.shape)  # type: ignore[attr-defined]
        return new

    @property
    def shape(self) -> Any:  # type: ignore[override]
        if not hasattr(self, "tensor_shape"):
            self.tensor_shape = self.size()
        return self.tensor_shape


class Redispatching(torch.Tensor):
    # test_redispatch_function_with_dynamo's SimpleTFTensor
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        return torch.overrides.redispatch_function(func, types, args, kwargs)  # type: ignore[no-untyped-call]


def plus_one(x: T) -> object:
    # test_no_call_to_new
    return torch.add(x, 1)


def ones_if_dummy_isinstance(x: T) -> object:
    # test_type_check (isinstance)
    return torch.ones(1, 1) if isinstance(x, DummyNDim) else torch.zeros(2, 2)


def ones_if_dummy_type(x: T) -> object:
    # test_type_check (equality, identity)
    return torch.ones(1, 1) if type(x) is DummyNDim else torch.zeros(2, 2)


def own_ndim(x: T) -> object:
    # test_user_overridden_attr_unsupported (Dynamo refuses it; eager gives 10)
    return x.ndim


def sigmoid(x: T) -> object:
    # test_overridden_method_guarding
    return x.sigmoid()


def as_list(x: T) -> object:
    # test_tensor_subclass_unpack
    return list(x)


def shape_and_to(x: T) -> object:
    # test_subclass_override_shape_and_to
    x_shape = x.shape
    y = x.to("cpu")
    return x + 1, y + 2, x_shape, x.tensor_shape, y.tensor_shape  # type: ignore[attr-defined]


def _my_add(a: T, b: T) -> object:
    if torch.overrides.has_torch_function((a, b)):
        return torch.overrides.handle_torch_function(_my_add, (a, b), a, b)
    return a + b


def redispatched_add(x: T, y: T) -> object:
    # test_redispatch_function_with_dynamo
    return _my_add(x, y)


def has_torch_function(x: T) -> object:
    # test_has_torch_function
    return torch.overrides.has_torch_function_unary(x), torch.overrides.has_torch_function_variadic(x)


def disabled_subclass_state(x: T) -> object:
    # test_torch_function_state_graph_break
    with torch._C.DisableTorchFunctionSubclass():
        torch._dynamo.graph_break()
        return torch._C._is_torch_function_enabled(), torch.add(x, 1.0)


def disabled_all_state(x: T) -> object:
    # test_disable_all_torch_function
    with torch._C.DisableTorchFunction():
        torch._dynamo.graph_break()
        return torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled(), torch.add(x, 1.0)


def nested_disabled_state(x: T) -> object:
    # test_torch_function_state_nested
    with torch._C.DisableTorchFunctionSubclass():
        with torch._C.DisableTorchFunctionSubclass():
            x = x + 1
        return torch._C._is_torch_function_enabled(), torch.add(x, 1.0)


def _ones_as(cls: type) -> Callable[[], tuple[object, ...]]:
    return lambda: (torch.ones(2, 2).as_subclass(cls),)


def _shape_and_to() -> tuple[object, ...]:
    return (torch.nn.Parameter(torch.randn(2, 2).as_subclass(ShapeAndTo)),)


def _redispatching() -> tuple[object, ...]:
    return torch.tensor([1.0]).as_subclass(Redispatching), torch.tensor([2.0]).as_subclass(Redispatching)


TORCH_FUNCTION = [
    Case(name="sub10_no_call_to_new", fn=plus_one, make_inputs=_ones_as(BadNewTorchFunction)),
    Case(name="sub10_type_check_isinstance_tensor", fn=ones_if_dummy_isinstance, make_inputs=_ones_as(torch.Tensor)),
    Case(name="sub10_type_check_isinstance_subclass", fn=ones_if_dummy_isinstance, make_inputs=_ones_as(DummyNDim)),
    Case(name="sub10_type_check_identity_tensor", fn=ones_if_dummy_type, make_inputs=_ones_as(torch.Tensor)),
    Case(name="sub10_type_check_identity_subclass", fn=ones_if_dummy_type, make_inputs=_ones_as(DummyNDim)),
    Case(name="sub10_user_overridden_attr", fn=own_ndim, make_inputs=_ones_as(NdimAttr)),
    Case(name="sub10_overridden_method_guarding", fn=sigmoid, make_inputs=_ones_as(PlainTF)),
    Case(name="sub10_tensor_subclass_unpack", fn=as_list, make_inputs=lambda: (torch.ones(3).as_subclass(Foo),)),
    Case(name="sub10_override_shape_and_to", fn=shape_and_to, make_inputs=_shape_and_to),
    Case(name="sub10_redispatch_function", fn=redispatched_add, make_inputs=_redispatching),
    Case(name="sub10_has_torch_function", fn=has_torch_function, make_inputs=lambda: (PlainTF(),)),
    Case(name="sub10_torch_function_state", fn=disabled_subclass_state, make_inputs=lambda: (torch.ones(2, 2),)),
    Case(name="sub10_disable_all_torch_function", fn=disabled_all_state, make_inputs=lambda: (torch.ones(2, 2),)),
    Case(name="sub10_torch_function_state_nested", fn=nested_disabled_state, make_inputs=lambda: (torch.ones(2, 2),)),
    Case(name="sub10_state_on_subclass", fn=disabled_subclass_state, make_inputs=_ones_as(PlainTF)),
]

CASES10 = AUTOGRAD + PARTITIONING + MODULE_SIMPLIFIED + TORCH_FUNCTION
