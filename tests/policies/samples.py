"""Small subclasses for policy and fakify tests: same-rank inner tensors, a scalar scale, values + offsets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from policies import SubclassSymbolicPolicy, TensorPolicy, affine, dynamic, inner, marked, outer


class _Wrapper(torch.Tensor):
    """Shared plumbing: a wrapper with an outer size/stride and inner tensors as attributes; no ops."""

    inner_names: tuple[str, ...] = ()

    @staticmethod
    def __new__(
        cls,
        inner: dict[str, torch.Tensor],
        outer_size: Sequence[int | torch.SymInt],
        outer_stride: Sequence[int | torch.SymInt],
    ) -> _Wrapper:
        first = next(iter(inner.values()))
        return torch.Tensor._make_wrapper_subclass(
            cls, outer_size, strides=outer_stride, dtype=first.dtype, device=first.device
        )

    def __init__(
        self,
        inner: dict[str, torch.Tensor],
        outer_size: Sequence[int | torch.SymInt],
        outer_stride: Sequence[int | torch.SymInt],
    ) -> None:
        for name, t in inner.items():
            setattr(self, name, t)

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return list(self.inner_names), None

    @classmethod
    def __tensor_unflatten__(
        cls,
        inner: dict[str, torch.Tensor],
        ctx: object,
        outer_size: Sequence[int | torch.SymInt],
        outer_stride: Sequence[int | torch.SymInt],
    ) -> _Wrapper:
        return cls(inner, outer_size, outer_stride)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
        raise NotImplementedError(f"{cls.__name__} runs no ops in these tests ({func})")

    def __repr__(self) -> str:  # type: ignore[override]
        return f"{type(self).__name__}{tuple(self.shape)}"


class Pair(_Wrapper):
    """Two inner tensors `a`, `b` of the outer shape."""

    inner_names = ("a", "b")
    a: torch.Tensor
    b: torch.Tensor


def pair(a: torch.Tensor, b: torch.Tensor) -> Pair:
    return Pair({"a": a, "b": b}, a.shape, a.stride())


class Scaled(_Wrapper):
    """`qdata` of the outer shape times a 0-dim `scale` (scale stays static under mark_dynamic)."""

    inner_names = ("qdata", "scale")
    qdata: torch.Tensor
    scale: torch.Tensor


def scaled(data: torch.Tensor, scale: float = 0.5) -> Scaled:
    return Scaled({"qdata": data, "scale": torch.tensor(scale)}, data.shape, data.stride())


class Bag(_Wrapper):
    """B bags of D-vectors: `flat_values` (N, D), `offsets` (B + 1,); outer shape (B, D)."""

    inner_names = ("flat_values", "offsets")
    flat_values: torch.Tensor
    offsets: torch.Tensor

    def __tensor_mark_dynamic__(
        self, dims: tuple[int, ...], min: int | None, max: int | None
    ) -> SubclassSymbolicPolicy:
        outer_policy = marked(2, dims, dynamic(min=min, max=max))
        if 0 not in dims:
            return SubclassSymbolicPolicy(outer=outer_policy)
        return SubclassSymbolicPolicy(
            outer=outer_policy,
            inner={"flat_values": marked(2, (0, *dims), dynamic()), "offsets": TensorPolicy(sizes=(dynamic(),))},
            relations=[affine(inner("offsets", 0), outer(0), offset=1)],
        )


def bag(lengths: Sequence[int], d: int = 3) -> Bag:
    offsets = torch.tensor([0, *torch.tensor(list(lengths)).cumsum(0).tolist()])
    values = torch.randn(int(offsets[-1]), d)
    size = (len(lengths), d)
    return Bag({"flat_values": values, "offsets": offsets}, size, (d, 1))
