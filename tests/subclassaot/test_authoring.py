"""WrapperTensor: declarations checked at class creation, op tables, aliasing, copies, outer strides."""

from __future__ import annotations

import copy
import pickle
from typing import Any, ClassVar

import pytest
import torch

from subclassaot.authoring.protocol import flatten_subclass, unflatten_subclass
from subclassaot.authoring.wrapper_tensor import WrapperTensor, implements
from subclassaot.errors import ProtocolError, UnsupportedError
from subclasses.pair import PairTensor, example

aten = torch.ops.aten


class Scaled(WrapperTensor):
    """Data times a scale; only the ops in its table are supported."""

    inner_names: ClassVar[tuple[str, ...]] = ("payload",)
    optional_inner_names: ClassVar[tuple[str, ...]] = ("scale",)
    ctx_names: ClassVar[tuple[str, ...]] = ("label",)
    payload: torch.Tensor
    scale: torch.Tensor | None
    label: str

    @implements(aten.mul.Tensor)
    def _mul(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args
        return Scaled(x.payload * other, x.scale, x.label)


class ScaledChild(Scaled):
    @implements(aten.mul.Tensor)
    def _mul(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args
        return ScaledChild(x.payload * other * 10, x.scale, "child")


def test_typo_against_constructor_fails_at_class_creation() -> None:
    with pytest.raises(ProtocolError, match=r"Bad.__init__ takes \('a', 'scael'\).*fix the typo"):

        class Bad(WrapperTensor):
            inner_names: ClassVar[tuple[str, ...]] = ("a", "scale")

            def __init__(self, a: torch.Tensor, scael: torch.Tensor) -> None:
                super().__init__()


def test_string_instead_of_tuple_fails_at_class_creation() -> None:
    with pytest.raises(ProtocolError, match=r"must be a tuple of attribute names.*trailing comma"):

        class Bad(WrapperTensor):
            inner_names = "a"  # type: ignore[assignment]


@pytest.mark.parametrize("name", ["data", "grad", "shape", "outer_size"])
def test_name_shadowing_tensor_attribute_fails(name: str) -> None:
    with pytest.raises(ProtocolError, match=f"'{name}' shadows a torch.Tensor attribute"):
        type("Bad", (WrapperTensor,), {"inner_names": (name,)})


def test_duplicate_names_fail() -> None:
    with pytest.raises(ProtocolError, match=r"declared twice.*\['a'\]"):
        type("Bad", (WrapperTensor,), {"inner_names": ("a",), "ctx_names": ("a",)})


def test_unlisted_op_names_class_op_and_arg_types() -> None:
    x = Scaled(torch.ones(2, 3), None, "s")
    with pytest.raises(UnsupportedError, match=r"Scaled does not implement aten.sin.default .*args \(Scaled\)"):
        torch.sin(x)
    with pytest.raises(NotImplementedError, match=r"args \(Scaled, Tensor\).*Scaled.implements"):
        torch.add(x, torch.ones(2, 3))


def test_op_table_inheritance_and_override() -> None:
    x = Scaled(torch.ones(2), None, "s")
    doubled = x * 2
    assert isinstance(doubled, Scaled) and doubled.payload.tolist() == [2.0, 2.0]
    y = ScaledChild(torch.ones(2), None, "s")
    z = y * 2
    assert isinstance(z, ScaledChild) and z.payload.tolist() == [20.0, 20.0] and z.label == "child"
    detached = y.detach()
    assert isinstance(detached, ScaledChild) and torch.equal(
        detached.payload, y.payload
    )  # the base table's detach is inherited


def test_late_registration_is_inherited() -> None:
    class Base(WrapperTensor):
        inner_names: ClassVar[tuple[str, ...]] = ("p",)
        p: torch.Tensor

    class Child(Base):
        pass

    @Base.implements(aten.neg)
    def _neg(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return type(args[0])(-args[0].p)

    negated = -Child(torch.ones(2))
    assert isinstance(negated, Child) and negated.p.tolist() == [-1.0, -1.0]


def test_optional_inner_tensors() -> None:
    without = Scaled(torch.ones(2, 3), None, "s")
    with_scale = Scaled(torch.ones(2, 3), torch.full((2, 1), 2.0), label="s")
    assert without.__tensor_flatten__() == (["payload"], ("s",))
    assert with_scale.__tensor_flatten__() == (["payload", "scale"], ("s",))
    for x in (without, with_scale):
        node, leaves = flatten_subclass(x, "x")
        y = unflatten_subclass(node, leaves)
        assert isinstance(y, Scaled) and y.__tensor_flatten__() == x.__tensor_flatten__()
        assert "Scaled(payload=" in repr(y) and "label='s'" in repr(y)


def test_constructor_errors() -> None:
    with pytest.raises(TypeError, match=r"missing field\(s\) \['label'\]"):
        Scaled(torch.ones(2))
    with pytest.raises(TypeError, match="inner tensor 'payload' must be a Tensor, got int"):
        Scaled(3, None, "s")
    with pytest.raises(TypeError, match="unexpected or repeated argument 'bogus'"):
        Scaled(torch.ones(2), None, "s", bogus=1)


class Transposed(WrapperTensor):
    """A wrapper whose outer strides are not its inner tensor's: a transposed view over contiguous data."""

    inner_names: ClassVar[tuple[str, ...]] = ("payload",)
    payload: torch.Tensor

    @classmethod
    def over(cls, payload: torch.Tensor) -> Transposed:
        size = (payload.size(1), payload.size(0))
        return cls(payload, outer_size=size, outer_stride=(1, payload.size(1)))


def test_outer_stride_differs_from_inner() -> None:
    x = Transposed.over(torch.arange(6.0).reshape(2, 3))
    assert x.shape == (3, 2) and x.stride() == (1, 3) and x.payload.stride() == (3, 1)
    node, leaves = flatten_subclass(x, "x")
    y = unflatten_subclass(node, leaves)
    assert y.stride() == (1, 3)


def test_unflatten_copes_with_minus_one() -> None:
    inner = {"a": torch.ones(2, 3), "b": torch.ones(2, 3)}
    y = PairTensor.__tensor_unflatten__(inner, (), (-1, 3), (-1, 1))
    assert y.shape == (2, 3) and y.stride() == (3, 1)


class WithLabel(WrapperTensor):
    """Constructs as WrapperTensor does, with a ctx field."""

    inner_names: ClassVar[tuple[str, ...]] = ("a", "b")
    ctx_names: ClassVar[tuple[str, ...]] = ("label",)
    a: torch.Tensor
    b: torch.Tensor
    label: str


class CountsConstruction(WithLabel):
    """Its own __init__: unflatten must go through the constructor."""

    built = 0

    def __init__(self, a: torch.Tensor, b: torch.Tensor, label: str, **kwargs: Any) -> None:
        super().__init__(a, b, label, **kwargs)
        type(self).built += 1


@pytest.mark.parametrize(
    ("size", "stride"),
    [(None, None), ((2, 3), (3, 1)), ((-1, 3), (-1, 1)), ((3, 2), (1, 3)), ((3, 2), None), ((-1, 3), None)],
)
def test_unflatten_builds_what_the_constructor_builds(
    size: tuple[int, ...] | None, stride: tuple[int, ...] | None
) -> None:
    inner = {"a": torch.randn(2, 3), "b": torch.randn(2, 3)}
    built = WithLabel.__tensor_unflatten__(inner, ("x",), size, stride)
    expected = WithLabel(inner["a"], inner["b"], "x", outer_size=size, outer_stride=stride)
    assert type(built) is WithLabel and built.label == "x" and built.a is inner["a"] and built.b is inner["b"]
    assert (built.shape, built.stride(), built.storage_offset()) == (
        expected.shape,
        expected.stride(),
        expected.storage_offset(),
    )
    assert (built.dtype, built.device, built.requires_grad) == (expected.dtype, expected.device, False)


def test_unflatten_of_a_class_with_its_own_constructor_calls_it() -> None:
    before = CountsConstruction.built
    inner = {"a": torch.randn(2), "b": torch.randn(2)}
    CountsConstruction.__tensor_unflatten__(inner, ("x",), (2,), (1,))
    assert CountsConstruction.built == before + 1
    with pytest.raises(TypeError, match="inner tensor 'b' must be a Tensor"):
        WithLabel.__tensor_unflatten__({"a": torch.randn(2), "b": 3}, ("x",), (2,), (1,))  # type: ignore[dict-item]


def test_copies_and_pickle() -> None:
    x = example()
    for y in (x.detach(), x.clone(), copy.deepcopy(x), pickle.loads(pickle.dumps(x)), x.to(torch.float32)):
        assert isinstance(y, PairTensor) and torch.equal(y.a, x.a) and torch.equal(y.b, x.b)
    cloned = x.clone()
    assert isinstance(cloned, PairTensor)
    assert cloned.a.untyped_storage().data_ptr() != x.a.untyped_storage().data_ptr()
    z = x.to(torch.float64)
    assert isinstance(z, PairTensor) and z.dtype == torch.float64 and z.a.dtype == torch.float64


def test_deepcopy_keeps_requires_grad() -> None:
    x = PairTensor(torch.ones(2), torch.zeros(2), requires_grad=True)
    y = copy.deepcopy(x)
    assert y.requires_grad and y.is_leaf


def test_copy_between_wrappers() -> None:
    dst = Scaled(torch.zeros(2), None, "s")
    dst.copy_(Scaled(torch.ones(2), None, "s"))
    assert dst.payload.tolist() == [1.0, 1.0]
    with pytest.raises(UnsupportedError, match="copy_ from Tensor into Scaled"):
        dst.copy_(torch.ones(2))
    with pytest.raises(UnsupportedError, match=r"same present inner tensors and ctx.*\('t',\)"):
        dst.copy_(Scaled(torch.ones(2), None, "t"))


def test_wrapper_with_requires_grad_is_a_leaf_and_grads_reach_inner() -> None:
    x = PairTensor(torch.ones(2, 2), torch.full((2, 2), 3.0), requires_grad=True)
    assert x.is_leaf
    torch.autograd.backward((x * x).sum())
    assert isinstance(x.grad, PairTensor)
    assert x.grad.a.tolist() == [[2.0, 2.0], [2.0, 2.0]] and x.grad.b.tolist() == [[6.0, 6.0], [6.0, 6.0]]


def test_compile_aot_eager_fullgraph_matches_eager() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        return (t.transpose(0, 1) * 3)[1:].sum(1)

    got, expected = torch.compile(fn, backend="aot_eager", fullgraph=True)(example()), fn(example())
    assert isinstance(got, PairTensor) and isinstance(expected, PairTensor)
    torch.testing.assert_close(got.a, expected.a)
    torch.testing.assert_close(got.b, expected.b)
