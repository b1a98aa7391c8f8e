"""Symbolic vs concrete: what fakify derives symbolically, re-checked at sampled concrete sizes."""

from __future__ import annotations

import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import policies as P
from subclassaot.pipeline.fakify import FakifyResult, SymbolCache, fakify_inputs
from subclassaot.torch_internals import expr_of
from tests.policies.samples import Pair

FAST = settings(max_examples=40, deadline=None)


def _fakify(x: torch.Tensor, policy: P.Policy) -> FakifyResult:
    return fakify_inputs(
        [x],
        ["args[0]"],
        fake_mode=FakeTensorMode(shape_env=ShapeEnv()),
        dynamic=False,
        policies={"args[0]": policy},
        state=P.AutomaticDynamicState(),
        symbol_cache=SymbolCache(),
    )


def _at_hints(r: FakifyResult, expr: sympy.Expr) -> int:
    """`expr` with every symbol replaced by the real value at the place it is bound."""
    dims = {d.address: d for d in r.plans[0].dims()}
    return int(expr.xreplace({sym: dims[address].hint for sym, address in r.symbol_bindings.items()}))


dim_policy = st.sampled_from(["static", "dynamic", "automatic", "ranged"])


@FAST
@given(shape=st.lists(st.integers(0, 9), min_size=1, max_size=3), kinds=st.lists(dim_policy, min_size=3, max_size=3))
def test_plain_fakes_evaluate_to_the_real_sizes(shape: list[int], kinds: list[str]) -> None:
    x = torch.randn(*shape).transpose(0, -1)
    sizes = []
    for d in range(x.dim()):
        kind = kinds[d]
        if kind == "ranged":
            sizes.append(P.dynamic(min=x.size(d), max=x.size(d) + 5))
        else:
            sizes.append(P.DimPolicy(kind=P.DimKind(kind)))
    r = _fakify(x, P.TensorPolicy(sizes=tuple(sizes)))
    fake = r.fakes[0]
    for d in range(x.dim()):
        size, stride = fake.size(d), fake.stride(d)
        assert _at_hints(r, expr_of(size)) == x.size(d)
        expected_symbolic = kinds[d] in ("dynamic", "ranged") and x.size(d) >= 2
        assert isinstance(size, torch.SymInt) == expected_symbolic
        if isinstance(stride, int):
            assert stride == x.stride(d)
    for address, e in r.exprs.items():
        real = x.size(address.dim) if address.prop is P.Prop.SIZE else x.stride(address.dim)
        assert _at_hints(r, e) == real


relation_kind = st.sampled_from(["equal", "affine", "product", "floordiv"])


@FAST
@given(
    n=st.integers(2, 40),
    k=st.integers(1, 5),
    kind=relation_kind,
    samples=st.lists(st.integers(2, 200), min_size=1, max_size=5),
)
def test_relations_hold_at_sampled_sizes(n: int, k: int, kind: str, samples: list[int]) -> None:
    rel = {
        "equal": P.equal(P.inner("b", 0), P.outer(0)),
        "affine": P.affine(P.inner("b", 0), P.outer(0), offset=k),
        "product": P.product(P.inner("b", 0), P.outer(0), factor=k),
        "floordiv": P.floordiv(P.inner("b", 0), P.outer(0), divisor=k),
    }[kind]
    a = torch.randn(n, 3)
    b = torch.randn(rel.apply(n))
    x = Pair({"a": a, "b": b}, a.shape, a.stride())
    policy = P.SubclassSymbolicPolicy(outer=P.TensorPolicy(sizes=(P.dynamic(), P.static())), relations=[rel])
    r = _fakify(x, policy)
    assert isinstance(r.fakes[0], Pair)
    (sym,) = r.symbol_bindings
    b_expr = r.exprs[P.DimAddress(path="args[0].b", prop=P.Prop.SIZE, dim=0)]
    a_expr = r.exprs[P.DimAddress(path="args[0].a", prop=P.Prop.SIZE, dim=0)]
    if rel.apply(n) < 2:  # see Note [Zero One Specialization]: a derived 0/1 is static
        assert b_expr == rel.apply(n)
        samples = []
    for v in samples:
        assert int(b_expr.xreplace({sym: v})) == rel.apply(v)
        assert int(a_expr.xreplace({sym: v})) == v  # `a` follows the outer dim (the default relation)
    assert len(r.symbol_bindings) == 1
