"""Registered opaque reference objects among a subclass's inner attributes (Note [The Flatten Protocol]): carried
through flatten/unflatten and the pipeline unchanged, guarded by identity with a readable reason; any other
non-tensor attribute is a ProtocolError that says how to register it. DTensor's device_mesh is the real-world case
(tests/subclasses/test_dtensor.py); this file needs no process group."""

from __future__ import annotations

import enum
from typing import Any

import pytest
import torch
from torch._library.opaque_object import register_opaque_type
from torch._opaque_base import OpaqueBase
from torch.utils._pytree import tree_map

import subclassaot
from subclassaot.authoring.protocol import flatten_subclass, unflatten_subclass
from subclassaot.errors import ProtocolError
from tests.oracle import assert_call_matches_eager, assert_matches_eager


class Handle(OpaqueBase):
    """A handle to state outside tensors (as a DeviceMesh is), identified by its name."""

    def __init__(self, name: str) -> None:
        self.name = name


register_opaque_type(Handle, typ="reference", guard_fn=lambda h: [h.name])


class Color(enum.Enum):  # torch registers every Enum as an opaque *value* type
    RED = 1


class Tagged(torch.Tensor):
    """A wrapper around `elem` that carries `tag` (flattened as an inner attribute) through every op."""

    elem: torch.Tensor
    tag: object

    @staticmethod
    def __new__(cls, elem: torch.Tensor, tag: object, size: Any = None, stride: Any = None) -> Tagged:
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape if size is None else size,
            strides=elem.stride() if stride is None else stride,
            dtype=elem.dtype,
            device=elem.device,
            requires_grad=elem.requires_grad,
        )
        out.elem = elem
        out.tag = tag
        return out

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __tensor_flatten__(self) -> tuple[list[str], object]:
        return ["elem", "tag"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, Any], ctx: object, size: Any, stride: Any) -> Tagged:
        return Tagged(inner["elem"], inner["tag"], size, stride)

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        tags = [a.tag for a in args if isinstance(a, Tagged)]
        out = func(*tree_map(lambda t: t.elem if isinstance(t, Tagged) else t, args), **(kwargs or {}))
        return tree_map(lambda t: Tagged(t, tags[0]) if isinstance(t, torch.Tensor) else t, out)


HANDLE = Handle("h")


def _tagged(tag: object = HANDLE, *, grad: bool = False) -> Tagged:
    out = Tagged(torch.randn(3, 4), tag)
    out.requires_grad_(grad)
    return out


def test_flatten_keeps_opaque_reference_out_of_the_leaves() -> None:
    x = _tagged()
    node, leaves = flatten_subclass(x, "args[0]")
    assert node.attrs == ("elem",) and node.flatten_attrs() == ("elem", "tag")
    assert [(o.name, o.index, o.value) for o in node.opaques] == [("tag", 1, HANDLE)]
    assert len(leaves) == 1 and leaves[0] is x.elem
    rebuilt = unflatten_subclass(node, [leaves[0] * 2])
    assert isinstance(rebuilt, Tagged) and rebuilt.tag is HANDLE
    torch.testing.assert_close(rebuilt.elem, x.elem * 2)


def test_program_over_opaque_attribute_matches_eager() -> None:
    compiled = assert_matches_eager(lambda x, y: (x * 2 + y).relu(), lambda: (_tagged(), _tagged()))
    out = compiled(_tagged(), _tagged())
    assert isinstance(out, Tagged) and out.tag is HANDLE


def test_opaque_attribute_training_matches_eager() -> None:
    assert_matches_eager(lambda x: (x * x).sum(dim=0), lambda: (_tagged(grad=True),), check_grads=True)


def test_another_opaque_object_recompiles_naming_the_attribute_and_field() -> None:
    compiled = assert_matches_eager(lambda x: x + 1, lambda: (_tagged(),))
    other = Handle("other")
    assert_call_matches_eager(compiled, lambda x: x + 1, lambda: (_tagged(other),))
    assert compiled.compile_count == 2  # type: ignore[attr-defined]
    (reason,) = compiled.recompile_reasons  # type: ignore[attr-defined]
    assert (
        reason
        == "args[0].tag: compiled for one Handle object, got another one: its registered guard_fn field [0] 'h' -> 'other'"
    )
    twin = Handle("h")  # equal by guard_fn, but outputs must hold the caller's object: recompiles too
    out = compiled(_tagged(twin))
    assert isinstance(out, Tagged) and out.tag is twin
    assert "another one equal to it by its registered guard_fn" in compiled.recompile_reasons[-1]  # type: ignore[attr-defined]


def test_unregistered_non_tensor_attribute_is_a_protocol_error() -> None:
    class Plain:
        pass

    with pytest.raises(
        ProtocolError,
        match=r"args\[0\]\.tag: .*getattr gives a Plain, which is neither a Tensor nor a registered opaque reference type.*register_opaque_type\(Plain, typ='reference'\)",
    ):
        subclassaot.compile(lambda x: x * 2)(_tagged(Plain()))


def test_opaque_value_attribute_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"args\[0\]\.tag: .*opaque \*value\* \(Color\).*Put values in ctx"):
        subclassaot.compile(lambda x: x * 2)(_tagged(Color.RED))


def test_missing_attribute_is_a_protocol_error_not_an_attribute_error() -> None:
    x = _tagged()
    del x.tag
    with pytest.raises(
        ProtocolError,
        match=r"args\[0\]\.tag: Tagged\.__tensor_flatten__\(\) names attribute 'tag', but the tensor has no such attribute",
    ):
        subclassaot.compile(lambda x: x * 2)(x)
