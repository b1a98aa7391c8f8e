"""Corpus, PyTorch's own programs, eighth part: test/dynamo/test_subclasses.py's SubclassTests (not TwoTensor's):
`__torch_function__` subclasses (as_subclass inputs, subclasses made in the program, overridden methods and
attributes, nn.Parameter subclasses), and wrapper subclasses with extra metadata (ScaledTensor, OptionalScaledTensor,
CtxSubclassTensor with return_and_correct_aliasing, a wrapper whose outer size differs from its inner one), and
views of a TwoTensor passed as inputs (test_subclass_views). As written: their inputs, their subclasses (copied here
where torch's testing module lacks them), their programs; `torch.compile(backend="eager")` there is our compile here.

Input: nothing. Output: `CASES8` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`sub_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import return_and_correct_aliasing

from tests.pipeline.corpus import Case

T = torch.Tensor
Fn = Callable[..., Any]


def _no_inputs() -> tuple[object, ...]:
    return ()


# ---------------------------------------------------------------------------------------------------------------
# __torch_function__ subclasses (SubclassTests)


class BaseTorchFunction(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class MockSubclass(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class DummyNDim(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func == torch.Tensor.ndim.__get__:  # type: ignore[attr-defined]
            return 10
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class SigmoidToExpSubclass(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func == torch.Tensor.sigmoid:
            return super().__torch_function__(torch.Tensor.exp, types, args, kwargs)  # type: ignore[no-untyped-call]
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]


class DoublingAdd(torch.Tensor):
    """test_torch_function_reentrant_dispatch's ScaledTensor: torch.add's result doubled."""

    @staticmethod
    def __new__(cls, data: T) -> Any:
        return torch.Tensor._make_subclass(cls, data)

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raw = super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]
        if isinstance(raw, torch.Tensor) and func is torch.add:
            return raw * 2.0
        return raw


class AddIsSub(torch.Tensor):
    """test_torch_function_call_on_method_arg's LocalSubclass: add_ runs as sub_."""

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func == torch._C.TensorBase.add_:
            func = torch._C.TensorBase.sub_
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]

    def sigmoid(self) -> Any:
        return None


class NdimProperty(torch.Tensor):
    """test_user_overridden_property_unsupported's LocalSubclass."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._ndim = 10

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]

    @property
    def ndim(self) -> int:
        return self._ndim

    @ndim.setter
    def ndim(self, value: int) -> None:
        self._ndim = value


class AttrSubclass(torch.Tensor):
    x: int = 10

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]


class InstanceTorchFunction(torch.Tensor):
    """test_tensor_subclass_with_non_classmethod_torch_function's MySubclass."""

    def __torch_function__(self, func: Fn, types: Any, args: Any, kwargs: Any = None) -> Any:  # type: ignore[override]
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class CloneDoubles(torch.Tensor):
    """test_no_torch_function_on_size_bytecode's TestTensor."""

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
            return out * 2 if func == torch.clone else out


class SigmoidNone(torch.Tensor):
    """test_user_overridden_method_unsupported's LocalSubclass."""

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return super().__torch_function__(func, types, args, kwargs)  # type: ignore[no-untyped-call]

    def sigmoid(self) -> Any:
        return None


class ToTimesLen(torch.Tensor):
    """test_subclass_dont_invoke_torch_function_on_overridden_method's MySubclass (its graph_break left out)."""

    def to(self, device: Any) -> Any:  # type: ignore[override]
        return self * len(device)


class NdimMethod(torch.Tensor):
    """test_subclass_dont_invoke_torch_function_on_overridden_attr's MySubclass (its graph_break left out)."""

    def ndim(self) -> int:  # type: ignore[override]
        return 42


class OldParameter(torch.nn.Parameter):
    pass


class DisabledTorchFunction(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]


class SumKeepsClass(torch.Tensor):
    """test_subclass_method_override's MyTensor."""

    def sum(self, dim: Any = None, keepdim: bool = False) -> Any:  # type: ignore[override]
        return super().sum(dim=dim, keepdim=keepdim).as_subclass(SumKeepsClass)


class ElemHolder(torch.Tensor):
    """test_tensor_subclass_attr_codegen_tos's MySubclass: an empty tensor holding `elem`."""

    elem: T

    def __new__(cls, elem: T, *args: Any, **kwargs: Any) -> Any:
        r = torch.Tensor._make_subclass(cls, torch.ones(0))
        r.elem = elem
        return r


class SuperNew(torch.Tensor):
    """test_tensor_subclass_super_new's MyTensor."""

    def __new__(cls, x: T) -> Any:
        return super().__new__(cls, x)


class Bare(torch.Tensor):
    pass


class GGUFParameter(torch.nn.Parameter):
    """test_parameter_subclass_custom_torch_func_and_dynamic_attr's (diffusers' quantized weight)."""

    quant_type: Any

    def __new__(cls, data: Any, requires_grad: bool = False, quant_type: Any = None) -> Any:
        data = data if data is not None else torch.empty(0)
        return torch.Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, *args: Any, quant_type: Any = None, **kwargs: Any) -> None:
        self.quant_type = quant_type

    def as_tensor(self) -> T:
        return torch.Tensor._make_subclass(torch.Tensor, self, self.requires_grad)

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]
        quant_type = None
        for arg in args:
            if isinstance(arg, list) and isinstance(arg[0], GGUFParameter):
                quant_type = arg[0].quant_type
                break
            if isinstance(arg, GGUFParameter):
                quant_type = arg.quant_type
                break
        if isinstance(result, torch.Tensor):
            return cls(result, quant_type=quant_type)
        if isinstance(result, (tuple, list)):
            return type(result)(cls(x, quant_type=quant_type) if isinstance(x, torch.Tensor) else x for x in result)
        return result


def _ones_as(cls: type[T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (torch.ones(shape).as_subclass(cls),)

    return make


def _randn_as(cls: type[T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (torch.randn(shape).as_subclass(cls),)

    return make


def plus_one(x: T) -> object:
    # test_base_torch_function_tracing, test_tensor_subclass_with_non_classmethod_torch_function
    return torch.add(x, 1)


def add_both(a: T, b: T) -> object:
    # test_torch_function_reentrant_dispatch: torch.compile(torch.add)
    return torch.add(a, b)


def _doubling_pair() -> tuple[object, ...]:
    return DoublingAdd(torch.tensor([1.0, 2.0])), DoublingAdd(torch.tensor([3.0, 4.0]))


def made_subclass_doubled(x: T) -> object:
    # test_return_subclass
    return MockSubclass(torch.add(x, 1.0)) * 2


def as_subclass_doubled(x: T) -> object:
    # test_return_as_subclass
    return torch.add(x, 1.0).as_subclass(MockSubclass) * 2


def _ones(*shape: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (torch.ones(shape),)

    return make


def exp(w: T) -> object:
    # test_torch_function_call_on_method
    return w.exp()


def add_into_first(a: T, w: T) -> object:
    # test_torch_function_call_on_method_arg
    a.add_(w)
    return a


def _plain_and_add_is_sub() -> tuple[object, ...]:
    return torch.ones(2, 2), torch.ones(2, 2).as_subclass(AddIsSub)


def plus_own_ndim(x: T) -> object:
    # test_user_overridden_property_unsupported
    return x + x.ndim


def _ndim_property() -> tuple[object, ...]:
    return (NdimProperty(torch.ones(2, 2)),)


def ndim_plus_ones(w: T) -> object:
    # test_torch_function_call_on_attr
    return w.ndim + torch.ones(2)


def made_subclass_aliases_written(x: T) -> object:
    # test_make_subclass: three tensors over x's data, each written
    y: T = torch.Tensor._make_subclass(Bare, x)
    z: T = torch.Tensor._make_subclass(torch.Tensor, x)
    x += 1
    y += 2
    z += 3
    return x * y + z


def _randn(*shape: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (torch.randn(shape),)

    return make


def transposed_twice_plus_one(x: T) -> object:
    # test_parameter_subclass_with_old_torch_function, test_subclass_with_disabled_torch_function
    x = x.t()
    x = x.T
    return x + 1


def quantized_then_plain(x: T) -> object:
    # test_parameter_subclass_custom_torch_func_and_dynamic_attr
    tmp = x * 2
    tmp = tmp + tmp.quant_type  # type: ignore[attr-defined]
    tmp = tmp.as_tensor()
    return tmp * 3


def _gguf() -> tuple[object, ...]:
    return (GGUFParameter(torch.ones(2), quant_type=42),)


def made_subclass_attr_set() -> object:
    # test_newly_constructed_tensor_subclass_attr_mutation
    x = Bare(torch.ones(2))
    x.bar = 42  # type: ignore[attr-defined]
    return x, x * x.bar  # type: ignore[attr-defined]


def as_subclass_attr_set() -> object:
    # test_as_subclass_attr_mutation
    x = torch.ones(2).as_subclass(Bare)
    x.bar = 42  # type: ignore[attr-defined]
    return x, x * x.bar  # type: ignore[attr-defined]


def overridden_sum(x: T) -> object:
    # test_subclass_method_override
    y = x.as_subclass(SumKeepsClass)
    return y.sum(dim=1)


def clone_of_elem(t: T) -> object:
    # test_tensor_subclass_attr_codegen_tos
    return ElemHolder(t.elem.clone())  # type: ignore[attr-defined]


def _elem_holder() -> tuple[object, ...]:
    return (ElemHolder(torch.ones(2)),)


def clone(x: T) -> object:
    # test_no_torch_function_on_size_bytecode
    return torch.clone(x)


def _clone_doubles_marked() -> tuple[object, ...]:
    x = torch.ones(4, 4).as_subclass(CloneDoubles)
    torch._dynamo.mark_dynamic(x, 0)
    return (x,)


def class_attr_plus_ones(x: T) -> object:
    # test_tensor_subclass_custom_attr
    return x.x + torch.ones(2, 2)  # type: ignore[attr-defined]


def sigmoid_discarded(x: T) -> object:
    # test_user_overridden_method_unsupported
    x.sigmoid()
    return None


def to_cpu(x: T) -> object:
    # test_subclass_dont_invoke_torch_function_on_overridden_method
    return x.to("cpu")


def plus_ndim_method(x: T) -> object:
    # test_subclass_dont_invoke_torch_function_on_overridden_attr
    return x + x.ndim()  # type: ignore[operator]


def _parameter_of(cls: type[T]) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (torch.nn.Parameter(torch.randn(2, 2).as_subclass(cls)),)

    return make


def made_by_super_new(x: T) -> object:
    # test_tensor_subclass_super_new
    return SuperNew(x)


TORCH_FUNCTION = [
    Case(name="sub_base_torch_function_tracing", fn=plus_one, make_inputs=_ones_as(BaseTorchFunction, 2, 2)),
    Case(name="sub_torch_function_reentrant_dispatch", fn=add_both, make_inputs=_doubling_pair),
    Case(name="sub_return_subclass", fn=made_subclass_doubled, make_inputs=_ones(2, 2)),
    Case(name="sub_return_as_subclass", fn=as_subclass_doubled, make_inputs=_ones(2, 2)),
    Case(name="sub_torch_function_call_on_method", fn=exp, make_inputs=_ones_as(SigmoidToExpSubclass, 2, 2)),
    Case(name="sub_torch_function_call_on_method_arg", fn=add_into_first, make_inputs=_plain_and_add_is_sub),
    Case(name="sub_user_overridden_property", fn=plus_own_ndim, make_inputs=_ndim_property),
    Case(name="sub_torch_function_call_on_attr", fn=ndim_plus_ones, make_inputs=_ones_as(DummyNDim, 2, 2)),
    Case(name="sub_make_subclass", fn=made_subclass_aliases_written, make_inputs=_randn(2, 2)),
    Case(
        name="sub_parameter_subclass_with_old_torch_function",
        fn=transposed_twice_plus_one,
        make_inputs=_randn_as(OldParameter, 2, 2),
    ),
    Case(
        name="sub_subclass_with_disabled_torch_function",
        fn=transposed_twice_plus_one,
        make_inputs=_randn_as(DisabledTorchFunction, 2, 2),
    ),
    Case(name="sub_parameter_subclass_custom_torch_func", fn=quantized_then_plain, make_inputs=_gguf),
    Case(name="sub_newly_constructed_attr_mutation", fn=made_subclass_attr_set, make_inputs=_no_inputs),
    Case(name="sub_as_subclass_attr_mutation", fn=as_subclass_attr_set, make_inputs=_no_inputs),
    Case(name="sub_subclass_method_override", fn=overridden_sum, make_inputs=_randn(4, 10)),
    Case(name="sub_attr_codegen_tos", fn=clone_of_elem, make_inputs=_elem_holder),
    Case(name="sub_no_torch_function_on_size_bytecode", fn=clone, make_inputs=_clone_doubles_marked),
    Case(name="sub_tensor_subclass_custom_attr", fn=class_attr_plus_ones, make_inputs=_ones_as(AttrSubclass, 2, 2)),
    Case(name="sub_non_classmethod_torch_function", fn=plus_one, make_inputs=_randn_as(InstanceTorchFunction, 2, 2)),
    Case(name="sub_user_overridden_method", fn=sigmoid_discarded, make_inputs=_ones_as(SigmoidNone, 2, 2)),
    Case(name="sub_dont_invoke_on_overridden_method", fn=to_cpu, make_inputs=_parameter_of(ToTimesLen)),
    Case(name="sub_dont_invoke_on_overridden_attr", fn=plus_ndim_method, make_inputs=_parameter_of(NdimMethod)),
    Case(name="sub_tensor_subclass_super_new", fn=made_by_super_new, make_inputs=_randn(4, 10)),
]


# ---------------------------------------------------------------------------------------------------------------
# wrapper subclasses with metadata (SubclassTests)


def _wrapper_like(cls: type[T], data: T) -> Any:
    return torch.Tensor._make_wrapper_subclass(
        cls,
        data.size(),
        strides=data.stride(),
        storage_offset=data.storage_offset(),
        dtype=data.dtype,
        layout=data.layout,
        requires_grad=data.requires_grad,
        device=data.device,
    )


class ScaledTensor(torch.Tensor):
    """test_subclasses.py's ScaledTensor: `_data` of the outer's shape, `_scale` of any, a constant."""

    _data: T
    _scale: T
    _constant: int

    def __new__(cls, data: T, scale: T, *, constant: int = 0) -> Any:
        return _wrapper_like(cls, data)

    def __init__(self, data: T, scale: T, constant: int = 0) -> None:
        self._data = data
        self._scale = scale
        self._constant = constant

    def __tensor_flatten__(self) -> tuple[list[str], dict[str, int]]:
        return ["_data", "_scale"], {"_constant": self._constant}

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, T], metadata: dict[str, int], size: Any, stride: Any) -> ScaledTensor:
        return ScaledTensor(inner["_data"], inner["_scale"], constant=metadata["_constant"])

    @classmethod
    def __torch_dispatch__(cls, func: Fn, types: Any, args: Any, kwargs: Any = None) -> Any:  # type: ignore[override]
        scaled = args[0]
        out = func(scaled._data, *args[1:], **(kwargs or {}))
        return ScaledTensor(out, scaled._scale, constant=scaled._constant)


class OptionalScaledTensor(torch.Tensor):
    """test_subclasses.py's OptionalScaledTensor: `_scale` may be None (then not flattened)."""

    _data: T
    _scale: T | None
    _constant: int

    def __new__(cls, data: T, scale: T | None, *, constant: int = 0) -> Any:
        return _wrapper_like(cls, data)

    def __init__(self, data: T, scale: T | None, constant: int = 0) -> None:
        self._data = data
        self._scale = scale
        self._constant = constant

    def __tensor_flatten__(self) -> tuple[list[str], dict[str, int]]:
        ctx = {"_constant": self._constant}
        return (["_data", "_scale"], ctx) if self._scale is not None else (["_data"], ctx)

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, T], metadata: dict[str, int], size: Any, stride: Any
    ) -> OptionalScaledTensor:
        return OptionalScaledTensor(inner["_data"], inner.get("_scale"), constant=metadata["_constant"])

    @classmethod
    def __torch_dispatch__(cls, func: Fn, types: Any, args: Any, kwargs: Any = None) -> Any:  # type: ignore[override]
        scaled = args[0]
        out = func(scaled._data, *args[1:], **(kwargs or {}))
        if scaled._scale is not None:
            out = out * scaled._scale
        return OptionalScaledTensor(out, scaled._scale, constant=scaled._constant)


class CtxSubclassTensor(torch.Tensor):
    """test_subclasses.py's CtxSubclassTensor: a constant in its metadata, added to every mul's result."""

    a: T
    constant: Any

    @staticmethod
    def __new__(cls, a: T, constant: Any) -> Any:
        return _wrapper_like(cls, a)

    def __init__(self, a: T, constant: Any) -> None:
        self.a = a
        self.constant = constant

    def __tensor_flatten__(self) -> tuple[list[str], tuple[Any, ...]]:
        return ["a"], (self.constant,)

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, T], meta: tuple[Any, ...], size: Any, stride: Any) -> CtxSubclassTensor:
        return CtxSubclassTensor(inner["a"], meta[0])

    @classmethod
    def __torch_dispatch__(cls, func: Fn, types: Any, args: Any, kwargs: Any = None) -> Any:  # type: ignore[override]
        kwargs = kwargs or {}
        biggest = max(x.constant for x in pytree.tree_flatten(args)[0] if isinstance(x, CtxSubclassTensor))
        args_a = pytree.tree_map(lambda x: x.a if isinstance(x, CtxSubclassTensor) else x, args)
        kwargs_a = pytree.tree_map(lambda x: x.a if isinstance(x, CtxSubclassTensor) else x, kwargs)
        out_a = func(*args_a, **kwargs_a)
        out = pytree.tree_map(lambda x: CtxSubclassTensor(x, biggest) if isinstance(x, torch.Tensor) else x, out_a)
        if func == torch.ops.aten.mul.Tensor:
            out = out + out.constant
        return return_and_correct_aliasing(func, args, kwargs, out)  # type: ignore[no-untyped-call]


@dataclasses.dataclass(frozen=True)
class SubclassTensorArgs:
    original_shape: torch.Size
    device: torch.device
    inner_meta: Any


class MetaSubclassTensor(torch.Tensor):
    """test_subclass_constructor_proxying's SubclassTensor: a dataclass of sizes and a device as metadata."""

    a: T
    meta: Any

    @staticmethod
    def __new__(cls, a: T, meta: Any) -> Any:
        return _wrapper_like(cls, a)

    def __init__(self, a: T, meta: Any) -> None:
        self.a = a
        self.meta = meta

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["a"], self.meta

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, T], meta: Any, size: Any, stride: Any) -> MetaSubclassTensor:
        return MetaSubclassTensor(inner["a"], meta)

    @classmethod
    def __torch_dispatch__(cls, func: Fn, types: Any, args: Any, kwargs: Any = None) -> Any:  # type: ignore[override]
        kwargs = kwargs or {}
        args_a = pytree.tree_map(lambda x: x.a if isinstance(x, MetaSubclassTensor) else x, args)
        kwargs_a = pytree.tree_map(lambda x: x.a if isinstance(x, MetaSubclassTensor) else x, kwargs)
        out_a = func(*args_a, **kwargs_a)
        out = pytree.tree_map(
            lambda x: (
                MetaSubclassTensor(x, SubclassTensorArgs(x.shape, x.device, None)) if isinstance(x, torch.Tensor) else x
            ),
            out_a,
        )
        return return_and_correct_aliasing(func, args, kwargs, out)  # type: ignore[no-untyped-call]


class DoubleSizeMaybeAddGeThreeTensor(torch.Tensor):
    """test_wrapper_subclass_guards_on_inner_tensor's: the outer twice the inner's first size; +2 where it is > 3."""

    inner_elem: T

    @staticmethod
    def __new__(cls, inner: T) -> Any:
        outer_shape = (inner.shape[0] * 2,) + inner.shape[1:]
        return torch.Tensor._make_wrapper_subclass(
            cls, outer_shape, inner.stride(), None, None, inner.dtype, inner.layout, inner.device, False,
            inner.requires_grad,
        )  # fmt: skip

    def __init__(self, inner: T) -> None:
        self.inner_elem = inner

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner_elem"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, T], _: None, size: Any, stride: Any) -> DoubleSizeMaybeAddGeThreeTensor:
        return DoubleSizeMaybeAddGeThreeTensor(inner["inner_elem"])

    @classmethod
    def __torch_dispatch__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
        args_inner = pytree.tree_map_only(DoubleSizeMaybeAddGeThreeTensor, lambda x: x.inner_elem, args)
        out_inner = func(*args_inner, **(kwargs or {}))
        if args_inner[0].shape[0] > 3:
            out_inner += 2
        return DoubleSizeMaybeAddGeThreeTensor(out_inner)


class UnwrapTorchFunction(torch.Tensor):
    """test_torch_function_subclass_survives_into_aot_autograd's SubTensor."""

    _t: T

    @staticmethod
    def __new__(cls, t: T) -> Any:
        return torch.Tensor._make_wrapper_subclass(
            cls, t.shape, t.stride(), t.storage_offset(), torch.contiguous_format, t.dtype, torch.strided, t.device,
            False, t.requires_grad, "sizes", False, False, None,
        )  # fmt: skip

    def __init__(self, t: T) -> None:
        super().__init__()
        self._t = t

    def __tensor_flatten__(self) -> tuple[list[str], dict[str, Any]]:
        return ["_t"], {}

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, T], ctx: Any, size: Any, stride: Any) -> UnwrapTorchFunction:
        return UnwrapTorchFunction(inner["_t"])

    @classmethod
    def __torch_function__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    @classmethod
    def __torch_dispatch__(cls, func: Fn, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
        new_args = pytree.tree_map_only(UnwrapTorchFunction, lambda s: s._t, args)
        output = func(*new_args, **(kwargs or {}))
        return pytree.tree_map_only(torch.Tensor, UnwrapTorchFunction, output)


def sin(a: T) -> object:
    # test_wrapper_subclass_with_same_sized_inner_tensor (the module's `func`)
    return a.sin()


def _scaled(data: tuple[int, ...], scale: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (ScaledTensor(torch.randn(data), torch.randn(scale)),)

    return make


def _scaled_marked() -> tuple[object, ...]:
    (sub,) = _scaled((2, 4), 6)()
    torch._dynamo.mark_dynamic(sub, 0)
    torch._dynamo.mark_dynamic(sub, 1)
    return (sub,)


def plus_one_data(x: T) -> object:
    # test_recompiles_with_optional_inner_tensor
    return x + 1


def _optional_scale(with_scale: bool) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        scale = torch.randn(2, 4) if with_scale else None
        return (OptionalScaledTensor(torch.randn(2, 4), scale),)

    return make


def _two_clones() -> tuple[object, ...]:
    # test_torch_dispatch_subclass_guard_recompile
    x = torch.ones(2, 2)
    return (TwoTensor(x.clone(), x.clone()),)  # type: ignore[no-untyped-call]


def square(x: T) -> object:
    # test_tensor_subclass_ctx_guards (`lambda x: x * x`)
    return x * x


def _ctx(constant: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return (CtxSubclassTensor(torch.ones(2), constant),)

    return make


def _two_of_plain_and_ctx() -> tuple[object, ...]:
    # test_tensor_subclass_ctx_recursive_guards
    x0 = torch.ones(2, 2)
    return (TwoTensor(x0.clone(), CtxSubclassTensor(x0.clone(), 2)),)  # type: ignore[no-untyped-call]


def made_with_metadata_squared(x: T) -> object:
    # test_subclass_constructor_proxying
    meta = SubclassTensorArgs(x.shape, x.device, SubclassTensorArgs(x.shape, x.device, None))
    out = MetaSubclassTensor(x, meta)
    return out * out


def scale_times_constant(x: T) -> object:
    # test_wrapper_subclass_dynamo_attribute_access_on_intermediate (its `torch.add(x, 1)` reads the closure's x,
    # the argument itself)
    tmp = torch.add(x, 1)
    return torch.mul(tmp._scale, tmp._constant)  # type: ignore[attr-defined]


def _scaled_with_constant() -> tuple[object, ...]:
    return (ScaledTensor(torch.randn(2, 4), torch.randn(3), constant=2),)


def mul_or_div_by_size(x: T) -> object:
    # test_wrapper_subclass_guards_on_inner_tensor
    if x.shape[0] < 13:
        return torch.mul(x, x)
    return torch.div(x, x)


def _double_size_marked() -> tuple[object, ...]:
    x = DoubleSizeMaybeAddGeThreeTensor(torch.ones(4, 4))
    torch._dynamo.mark_dynamic(x, 0)
    return (x,)


def unflatten_last(x: T) -> object:
    # test_torch_function_subclass_survives_into_aot_autograd
    return x.unflatten(-1, [2, 5])  # type: ignore[no-untyped-call]


def _unwrap_torch_function() -> tuple[object, ...]:
    return (UnwrapTorchFunction(torch.randn(3, 10)),)


DYNAMIC: dict[str, object] = {"dynamic": True}

WRAPPERS = [
    Case(name="sub_wrapper_same_sized_inner", fn=sin, make_inputs=_scaled((2, 4), 6)),
    Case(name="sub_wrapper_same_sized_inner_marked", fn=sin, make_inputs=_scaled_marked),
    Case(name="sub_wrapper_differently_sized_inner", fn=sin, make_inputs=_scaled((2, 4), 3)),
    Case(name="sub_optional_inner_tensor_absent", fn=plus_one_data, make_inputs=_optional_scale(False)),
    Case(name="sub_optional_inner_tensor_present", fn=plus_one_data, make_inputs=_optional_scale(True)),
    Case(name="sub_torch_dispatch_subclass_guard_recompile", fn=plus_one, make_inputs=_two_clones),
    Case(name="sub_tensor_subclass_ctx_guards", fn=square, make_inputs=_ctx(3)),
    Case(name="sub_tensor_subclass_ctx_recursive_guards", fn=square, make_inputs=_two_of_plain_and_ctx),
    Case(name="sub_subclass_constructor_proxying", fn=made_with_metadata_squared, make_inputs=_randn(3, 3)),
    Case(
        name="sub_wrapper_attribute_access_on_intermediate",
        fn=scale_times_constant,
        make_inputs=_scaled_with_constant,
    ),
    Case(name="sub_wrapper_guards_on_inner_tensor", fn=mul_or_div_by_size, make_inputs=_double_size_marked),
    Case(
        name="sub_torch_function_survives_into_aot",
        fn=unflatten_last,
        make_inputs=_unwrap_torch_function,
        compile_kwargs=DYNAMIC,
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# test_subclass_views: a view of a TwoTensor as the input of `x * 2`


def double(x: T) -> object:
    return x * 2


def _view_of_two(take: Callable[[T], T]) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        t = TwoTensor(torch.randn(4, 15), torch.randn(4, 15))  # type: ignore[no-untyped-call]
        return (take(t),)

    return make


VIEWS: dict[str, Callable[[T], T]] = {
    "narrow": lambda t: t.narrow(dim=-1, start=3, length=8),
    "split": lambda t: t.split(5, -1)[2],  # type: ignore[no-untyped-call]
    "split_with_sizes": lambda t: t.split_with_sizes([9, 6], -1)[1],
    "expand": lambda t: t.unsqueeze(-1).expand(4, 15, 10),
    "select": lambda t: t.select(-1, 6),
    "slice2d": lambda t: t[2:3, 5:9],
    "view": lambda t: t.view(-1, 15),
}

SUBCLASS_VIEWS = [
    Case(name=f"sub_subclass_views_{name}", fn=double, make_inputs=_view_of_two(take)) for name, take in VIEWS.items()
]


# ---------------------------------------------------------------------------------------------------------------
# test/test_python_dispatch.py, TestWrapperSubclassAliasing: each op of its sampling (return_and_correct_aliasing's
# schemas: out-of-place, TensorList and Optional TensorList inputs, in-place, view, in-place view, multi-output view,
# a mutable op, an out= op, defaults torchscript expands) on TwoTensor(t, t.clone()) of each tensor argument


def _two_tensors(*tensors: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        return tuple(TwoTensor(t, t.clone()) for t in (f() for f in tensors))  # type: ignore[no-untyped-call]

    return make


def _randn_of(*shape: int) -> Callable[[], T]:
    return lambda: torch.randn(shape)


def mul(a: T, b: T) -> object:
    return torch.mul(a, b)


def cat_pair(a: T, b: T) -> object:
    return torch.cat([a, b])


def index_by_long(a: T, i: T) -> object:
    return torch.ops.aten.index.Tensor(a, [i])


def mul_in_place(a: T, b: T) -> object:
    return a.mul_(b)


def view_flat(a: T) -> object:
    return a.view(-1)


def t_in_place(a: T) -> object:
    return a.t_()


def split_in_two(a: T) -> object:
    return torch.split(a, 2)


def batch_norm_training(x: T, w: T, b: T, mean: T, var: T) -> object:
    return torch.native_batch_norm(x, w, b, mean, var, True, 0.1, 1e-5)


def conv2d_in_inference_mode(x: T, w: T) -> object:
    # (there under inference_mode, so conv2d reaches __torch_dispatch__ undecomposed)
    with torch.inference_mode():
        return torch.ops.aten.conv2d.default(x, w)


def add_out(a: T, b: T, out: T) -> object:
    return torch.ops.aten.add.out(a, b, out=out)


def fft2_in_inference_mode(x: T) -> object:
    with torch.inference_mode():
        return torch.ops.aten.fft_fft2(x)


def _index_inputs() -> tuple[object, ...]:
    a = torch.randn(4, 3)
    i = torch.tensor([0, 2, 3])
    return TwoTensor(a, a.clone()), TwoTensor(i, i.clone())  # type: ignore[no-untyped-call]


ALIASING = [
    Case(name="sub_wrapper_aliasing_mul", fn=mul, make_inputs=_two_tensors(_randn_of(4, 3), _randn_of(4, 3))),
    Case(name="sub_wrapper_aliasing_cat", fn=cat_pair, make_inputs=_two_tensors(_randn_of(2, 3), _randn_of(4, 3))),
    Case(name="sub_wrapper_aliasing_index", fn=index_by_long, make_inputs=_index_inputs),
    Case(name="sub_wrapper_aliasing_mul_", fn=mul_in_place, make_inputs=_two_tensors(_randn_of(4, 3), _randn_of(3))),
    Case(name="sub_wrapper_aliasing_view", fn=view_flat, make_inputs=_two_tensors(_randn_of(4, 3))),
    Case(name="sub_wrapper_aliasing_t_", fn=t_in_place, make_inputs=_two_tensors(_randn_of(4, 3))),
    Case(name="sub_wrapper_aliasing_split", fn=split_in_two, make_inputs=_two_tensors(_randn_of(5, 3))),
    Case(
        name="sub_wrapper_aliasing_native_batch_norm",
        fn=batch_norm_training,
        make_inputs=_two_tensors(
            _randn_of(2, 3, 4), _randn_of(3), _randn_of(3), lambda: torch.zeros(3), lambda: torch.ones(3)
        ),
    ),
    Case(
        name="sub_wrapper_aliasing_conv2d",
        fn=conv2d_in_inference_mode,
        make_inputs=_two_tensors(_randn_of(4, 4, 4, 4), _randn_of(4, 4, 4, 4)),
    ),
    Case(
        name="sub_wrapper_aliasing_out_op",
        fn=add_out,
        make_inputs=_two_tensors(lambda: torch.ones(4), lambda: torch.ones(4), lambda: torch.empty(4)),
    ),
    Case(name="sub_wrapper_aliasing_fft_fft2", fn=fft2_in_inference_mode, make_inputs=_two_tensors(_randn_of(4, 4))),
]


CASES8 = TORCH_FUNCTION + WRAPPERS + SUBCLASS_VIEWS + ALIASING
