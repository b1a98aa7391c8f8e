"""flatten_subclass / unflatten_subclass / check_ctx: nesting and every ProtocolError path."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from subclassaot.authoring.protocol import check_ctx, flatten_subclass, map_inner_tensors, unflatten_subclass
from subclassaot.errors import ProtocolError
from subclasses.pair import PairTensor, example, nested_example


def test_nested_flatten_unflatten() -> None:
    x = nested_example()
    node, leaves = flatten_subclass(x, "args[0]")
    assert node.leaf_paths() == ("args[0].a.a", "args[0].a.b", "args[0].b.a", "args[0].b.b")
    assert all(type(leaf) is torch.Tensor for leaf in leaves) and node.num_leaves == 4
    y = unflatten_subclass(node, leaves)
    assert isinstance(y, PairTensor) and isinstance(y.a, PairTensor)
    assert isinstance(y.b, PairTensor) and isinstance(x.b, PairTensor)
    assert torch.equal(y.b.a, x.b.a)
    doubled = map_inner_tensors(x, lambda path, t: t * 2, "x")
    assert isinstance(doubled, PairTensor) and isinstance(doubled.a, PairTensor)
    assert isinstance(x.a, PairTensor)
    assert torch.equal(doubled.a.b, x.a.b * 2)


def test_unflatten_with_symbolic_outer_sizes() -> None:
    x = example()
    node, leaves = flatten_subclass(x, "x")
    mode = FakeTensorMode(shape_env=ShapeEnv())
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    ctx: StatelessSymbolicContext[..., object] = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 2)
    fakes = [mode.from_tensor(leaf, symbolic_context=ctx) for leaf in leaves]
    with mode:
        y = unflatten_subclass(node, fakes, outer_size=fakes[0].shape, outer_stride=fakes[0].stride())
    assert isinstance(y.shape[0], torch.SymInt) and y.shape == fakes[0].shape


class Raw(torch.Tensor):
    """A hand-written wrapper whose flatten / unflatten misbehave as `breakage` says."""

    breakage: ClassVar[str] = "ok"
    ctx_value: ClassVar[object] = None

    @staticmethod
    def __new__(cls, a: torch.Tensor, size: Any = None, stride: Any = None, dtype: Any = None) -> Raw:
        out = torch.Tensor._make_wrapper_subclass(
            cls, a.shape if size is None else size, strides=stride, dtype=dtype or a.dtype, device=a.device
        )
        out.a = a  # type: ignore[attr-defined]
        return out

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __tensor_flatten__(self) -> tuple[list[str], object]:
        if self.breakage == "raises":
            raise RuntimeError("flatten broke")
        attrs: list[Any] = ["missing"] if self.breakage == "bad_attr" else [0] if self.breakage == "not_str" else ["a"]
        return attrs, self.ctx_value

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        raise NotImplementedError(func)

    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> Any:
        a = inner["a"]
        if cls.breakage == "wrong_type":
            return a
        if cls.breakage == "wrong_size":
            return cls(a)
        if cls.breakage == "wrong_stride":
            return cls(a, size, [1] * len(size))
        if cls.breakage == "wrong_dtype":
            return cls(a, size, stride, torch.float64)
        if cls.breakage == "unflatten_raises":
            raise ValueError("unflatten broke")
        return cls(a, size, stride)


def _raw(mode: str, ctx: object = None) -> torch.Tensor:
    cls = type(f"Raw_{mode}", (Raw,), {"breakage": mode, "ctx_value": ctx})
    return cls(torch.ones(2, 3))  # type: ignore[no-any-return]


def _roundtrip(x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    node, leaves = flatten_subclass(x, "args[0]")
    return unflatten_subclass(node, leaves, **kwargs)


def test_ok_raw_roundtrips() -> None:
    assert _roundtrip(_raw("ok")).shape == (2, 3)


@pytest.mark.parametrize(
    ("mode", "match"),
    [
        ("raises", r"args\[0\]: Raw_raises.__tensor_flatten__\(\) raised RuntimeError\('flatten broke'\)"),
        ("not_str", r"must return attribute \*names\* \(str\)"),
        (
            "bad_attr",
            r"args\[0\].missing: Raw_bad_attr.__tensor_flatten__\(\) names attribute 'missing', but the tensor has no such attribute",
        ),
        ("wrong_type", r"must return a Raw_wrong_type, got Tensor"),
        ("unflatten_raises", r"Raw_unflatten_raises.__tensor_unflatten__ raised ValueError"),
        ("wrong_dtype", r"gave dtype torch.float64, expected torch.float32"),
    ],
)
def test_protocol_errors(mode: str, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        _roundtrip(_raw(mode))


def test_wrong_size_and_stride() -> None:
    with pytest.raises(ProtocolError, match=r"outer size contract: expected size \(3, 2\), got \(2, 3\)"):
        _roundtrip(_raw("wrong_size"), outer_size=(3, 2), outer_stride=(1, 3))
    with pytest.raises(ProtocolError, match=r"outer stride contract: expected stride \(3, 1\), got \(1, 1\)"):
        _roundtrip(_raw("wrong_stride"))


def test_device_mismatch() -> None:
    x = _raw("ok")
    node, leaves = flatten_subclass(x, "x")
    meta_leaves = [leaf.to("meta") for leaf in leaves]
    with pytest.raises(ProtocolError, match="gave device meta, expected cpu"):
        unflatten_subclass(node, meta_leaves)


def test_not_a_subclass_and_inner_without_protocol() -> None:
    with pytest.raises(ProtocolError, match="Tensor does not implement __tensor_flatten__"):
        flatten_subclass(torch.ones(2), "x")

    class NoProtocol(torch.Tensor):
        pass

    bad = PairTensor(torch.ones(2).as_subclass(NoProtocol), torch.ones(2))
    with pytest.raises(ProtocolError, match=r"x.a: inner tensor of type NoProtocol .* must implement it too"):
        flatten_subclass(bad, "x")


class NoEq:
    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


class NoCopy:
    def __deepcopy__(self, memo: Any) -> NoCopy:
        raise RuntimeError("cannot copy")


@pytest.mark.parametrize(
    ("ctx", "match"),
    [
        ((torch.ones(2),), r"holds a Tensor of shape \(2,\).*Move tensors into the inner-tensor attrs"),
        ({"s": {1, 2}}, r"holds a set .*sorted tuple"),
        (NoEq(), "not equal to its deepcopy"),
        (NoCopy(), r"does not survive copy.deepcopy: RuntimeError\('cannot copy'\)"),
        (lambda: 0, "cannot be pickled"),
    ],
)
def test_ctx_rules(ctx: object, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        check_ctx(ctx, "args[0]", "Raw")


def test_ctx_with_symint() -> None:
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    sym_ctx: StatelessSymbolicContext[..., object] = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC])
    fake = mode.from_tensor(torch.ones(5), symbolic_context=sym_ctx)
    with pytest.raises(ProtocolError, match="holds a symbolic value s"):
        check_ctx((fake.shape[0],), "x", "Raw")
