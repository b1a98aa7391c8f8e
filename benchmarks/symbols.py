"""Free symbols and shape guards after fakification: subclassaot's fakify vs torch's SubclassSymbolicContext.

Run: `python benchmarks/symbols.py`. For each subclass, the same dims are made dynamic on both sides (every dim our
plan makes dynamic, derived ones included); torch gets a `SubclassSymbolicContext` with those dims DYNAMIC and
fakifies with `FakeTensorMode.from_tensor`, which is what torch.compile does for `mark_dynamic` on a subclass.
Ours is never more, and fewer wherever inner dims follow outer dims (see Note [Inner Dims Share Outer Symbols]).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch._dynamo.source import LocalSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
    SubclassSymbolicContext,
    SymbolicContext,
)

import policies as P
from subclassaot.pipeline.fakify import SymbolCache, fakify_inputs
from subclasses.pair import PairTensor


class _Wrapper(torch.Tensor):
    inner_names: tuple[str, ...] = ()

    @staticmethod
    def __new__(cls, inner: dict[str, torch.Tensor], size: Sequence[Any], stride: Sequence[Any]) -> _Wrapper:
        first = next(iter(inner.values()))
        return torch.Tensor._make_wrapper_subclass(cls, size, strides=stride, dtype=first.dtype, device=first.device)

    def __init__(self, inner: dict[str, torch.Tensor], size: Sequence[Any], stride: Sequence[Any]) -> None:
        for name, t in inner.items():
            setattr(self, name, t)

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return list(self.inner_names), None

    @classmethod
    def __tensor_unflatten__(
        cls, inner: dict[str, torch.Tensor], ctx: object, size: Sequence[Any], stride: Sequence[Any]
    ) -> _Wrapper:
        return cls(inner, size, stride)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
        raise NotImplementedError(func)


class Scaled(_Wrapper):
    """`qdata` of the outer shape and a 0-dim `scale`."""

    inner_names = ("qdata", "scale")


class Jagged(_Wrapper):
    """`flat_values` (N, D) and `offsets` (B + 1,); outer (B, D). The hook relates offsets to the outer batch."""

    inner_names = ("flat_values", "offsets")

    def __tensor_mark_dynamic__(
        self, dims: tuple[int, ...], min: int | None, max: int | None
    ) -> P.SubclassSymbolicPolicy:
        return P.SubclassSymbolicPolicy(
            outer=P.marked(2, dims, P.dynamic(min=min, max=max)),
            inner={"flat_values": P.marked(2, (0, *dims), P.dynamic())},
            relations=[P.affine(P.inner("offsets", 0), P.outer(0), offset=1)] if 0 in dims else [],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    symbols: int  # distinct free symbols in the fakes' sizes/strides/offsets after simplification
    created: int  # symbols the ShapeEnv allocated
    guards: int  # shape guards recorded while fakifying


def _count(fake: torch.Tensor, env: ShapeEnv) -> Count:
    free: set[sympy.Symbol] = set()
    stack = [fake]
    while stack:
        t = stack.pop()
        for v in (*t.size(), *t.stride(), t.storage_offset()):
            if isinstance(v, torch.SymInt):
                free |= env.simplify(v.node.expr).free_symbols
        if hasattr(type(t), "__tensor_flatten__"):
            stack.extend(getattr(t, a) for a in t.__tensor_flatten__()[0])  # type: ignore[attr-defined]
    return Count(symbols=len(free), created=len(env.backed_var_to_val), guards=len(env.guards))


def ours(x: torch.Tensor) -> Count:
    env = ShapeEnv()
    r = fakify_inputs(
        [x],
        ["x"],
        fake_mode=FakeTensorMode(shape_env=env),
        dynamic=False,
        policies={},
        state=P.AutomaticDynamicState(),
        symbol_cache=SymbolCache(),
    )
    return _count(r.fakes[0], env)


def _torch_context(plan: P.TensorPlan, tensor: torch.Tensor) -> SymbolicContext:
    dyn = [DimDynamic.DYNAMIC if d.dynamic else DimDynamic.STATIC for d in plan.sizes]
    if not plan.attrs:
        return StatelessSymbolicContext(dynamic_sizes=dyn)
    inner = {a: _torch_context(c, getattr(tensor, a)) for a, c in zip(plan.attrs, plan.children, strict=True)}
    return SubclassSymbolicContext(
        dynamic_sizes=dyn, inner_contexts=inner, tensor_source=LocalSource("x"), shape_env_to_source_to_symbol_cache={}
    )


def torchs(x: torch.Tensor) -> Count:
    env = ShapeEnv()
    plan = P.plan_input(x, "x", P.policy_for(x, "x"))
    fake = FakeTensorMode(shape_env=env).from_tensor(
        x, source=LocalSource("x"), symbolic_context=_torch_context(plan, x)
    )
    return _count(fake, env)


def _pair() -> torch.Tensor:
    x = PairTensor(torch.randn(16, 8), torch.randn(16, 8))
    P.mark_dynamic(x, (0, 1))
    return x


def _scaled() -> torch.Tensor:
    data = torch.randn(16, 8)
    x = Scaled({"qdata": data, "scale": torch.tensor(0.5)}, data.shape, data.stride())
    P.mark_dynamic(x, (0, 1))
    return x


def _jagged() -> torch.Tensor:
    offsets = torch.tensor([0, 3, 5, 9, 10])
    x = Jagged({"flat_values": torch.randn(10, 8), "offsets": offsets}, (4, 8), (8, 1))
    P.mark_dynamic(x, 0)
    return x


CASES: tuple[tuple[str, Callable[[], torch.Tensor]], ...] = (
    ("PairTensor, dims 0,1", _pair),
    ("Scaled (data + scale), dims 0,1", _scaled),
    ("Jagged (values + offsets), dim 0", _jagged),
)


def main() -> None:
    header = f"{'subclass, marked':36} | {'ours: free':>10} {'created':>8} {'guards':>7} | {'torch: free':>11} {'created':>8} {'guards':>7}"
    print(header)
    print("-" * len(header))
    for name, make in CASES:
        a, b = ours(make()), torchs(make())
        print(
            f"{name:36} | {a.symbols:>10} {a.created:>8} {a.guards:>7} | {b.symbols:>11} {b.created:>8} {b.guards:>7}"
        )
        assert a.symbols <= b.symbols and a.created <= b.created and a.guards <= b.guards, name


if __name__ == "__main__":
    main()
