"""fakify_inputs: symbols where the policy says, relations as expressions, aliasing kept, stable re-fakification."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import sympy
import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import policies as P
from subclassaot.errors import PolicyError, SubclassAOTError
from subclassaot.pipeline.fakify import FakifyResult, SymbolCache, fakify_inputs
from subclassaot.torch_internals import new_fake_mode, static_fake_copies, storage_key
from tests.policies.samples import Bag, Pair, Scaled, bag, pair, scaled


def fakify(
    inputs: Sequence[torch.Tensor],
    paths: Sequence[str] | None = None,
    *,
    dynamic: bool | None = False,
    given: Mapping[str, P.Policy] | None = None,
    state: P.AutomaticDynamicState | None = None,
    cache: SymbolCache | None = None,
) -> FakifyResult:
    return fakify_inputs(
        inputs,
        [f"args[{i}]" for i in range(len(inputs))] if paths is None else paths,
        fake_mode=FakeTensorMode(shape_env=ShapeEnv()),
        dynamic=dynamic,
        policies={} if given is None else given,
        state=P.AutomaticDynamicState() if state is None else state,
        symbol_cache=SymbolCache() if cache is None else cache,
    )


def exprs(t: torch.Tensor) -> tuple[str, ...]:
    return tuple(str(s) for s in (*t.size(), *t.stride(), t.storage_offset()))


def free_symbols(r: FakifyResult) -> set[sympy.Symbol]:
    out: set[sympy.Symbol] = set()
    for e in r.exprs.values():
        out |= e.free_symbols
    return out


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(storage_key(a) == storage_key(b))


def test_static_by_default_and_dynamic_true() -> None:
    x = torch.randn(8, 4)
    r = fakify([x])
    assert r.fakes[0].shape == (8, 4) and free_symbols(r) == set()
    r = fakify([x], dynamic=True)
    s0, s1 = r.fakes[0].shape
    assert isinstance(s0, torch.SymInt) and isinstance(s1, torch.SymInt)
    assert r.fakes[0].stride() == (s1, 1)
    assert {str(a) for a in r.symbol_bindings.values()} == {"args[0].size(0)", "args[0].size(1)"}


def test_marks_win_over_dynamic_false_and_given_policies_win_over_marks() -> None:
    x = torch.randn(8, 4)
    P.mark_dynamic(x, 1)
    r = fakify([x], dynamic=False)
    assert isinstance(r.fakes[0].shape[1], torch.SymInt) and r.fakes[0].shape[0] == 8
    r = fakify([x], given={"args[0]": P.TensorPolicy(sizes=(P.dynamic(), P.static()))})
    assert isinstance(r.fakes[0].shape[0], torch.SymInt) and r.fakes[0].shape[1] == 4


def test_size_one_dim_marked_dynamic_is_static() -> None:
    x = torch.randn(1, 4)
    P.mark_dynamic(x, 0)
    r = fakify([x])
    assert r.fakes[0].shape == (1, 4)
    assert "Zero One" in P.describe(r.plans[0])


def test_pair_shares_outer_symbols() -> None:
    p = pair(torch.randn(8, 4), torch.randn(8, 4))
    P.mark_dynamic(p, 0)
    r = fakify([p])
    f = r.fakes[0]
    assert type(f) is Pair
    s0 = f.shape[0]
    assert isinstance(s0, torch.SymInt)
    assert f.a.shape[0] is not None and str(f.a.shape[0]) == str(s0) == str(f.b.shape[0])
    assert len(free_symbols(r)) == 1
    assert str(r.symbol_bindings[sympy.Symbol(str(s0), positive=True, integer=True)]) == "args[0].size(0)"


def test_real_pair_tensor_shares_outer_symbols() -> None:
    from subclasses.pair import PairTensor

    p = PairTensor(torch.randn(6, 5), torch.randn(6, 5))
    P.mark_dynamic(p, (0, 1))
    r = fakify([p])
    f = r.fakes[0]
    assert type(f) is PairTensor
    assert exprs(f.a) == exprs(f.b) and tuple(map(str, f.shape)) == exprs(f.a)[:2]
    assert len(free_symbols(r)) == 2


def test_scaled_keeps_scale_static() -> None:
    s = scaled(torch.randn(8, 4))
    P.mark_dynamic(s, 0)
    r = fakify([s])
    f = r.fakes[0]
    assert type(f) is Scaled
    assert f.scale.shape == () and str(f.qdata.shape[0]) == str(f.shape[0])
    assert len(free_symbols(r)) == 1


def test_bag_hook_relation_is_an_expression() -> None:
    b = bag([2, 3, 1, 4])
    P.mark_dynamic(b, 0)
    r = fakify([b])
    f = r.fakes[0]
    assert type(f) is Bag
    assert str(f.offsets.shape[0]) == f"{f.shape[0]} + 1"
    assert len(free_symbols(r)) == 2  # B and N; offsets is B + 1, D static
    assert str(f.flat_values.shape[0]) != str(f.shape[0])
    text = r.describe()
    assert "hook" in text and "offsets.size(0) == size(0) + 1" in text


def test_refakify_in_fresh_mode_gives_same_symbols_and_relations() -> None:
    b = bag([2, 3, 1, 4])
    P.mark_dynamic(b, 0)
    x = torch.randn(5, 7, 3)
    P.mark_dynamic(x, (0, 1, 2))
    cache = SymbolCache()
    first = fakify([b, x], cache=cache)
    second = fakify([b, x], cache=cache)
    assert {str(k): str(v) for k, v in first.exprs.items()} == {str(k): str(v) for k, v in second.exprs.items()}
    assert first.shape_env is not second.shape_env
    assert [exprs(f) for f in first.fakes] == [exprs(f) for f in second.fakes]


def test_names_are_stable_when_automatic_dynamic_adds_symbols() -> None:
    # Many inputs so that symbol names collide in the ShapeEnv's hash space and creation order matters.
    state, cache = P.AutomaticDynamicState(), SymbolCache()
    xs = [torch.randn(3 + i, 2) for i in range(12)]
    for x in xs:
        P.mark_dynamic(x, 0)
    first = fakify(xs, dynamic=None, state=state, cache=cache)
    ys = [torch.randn(3 + i, 5 + i) for i in range(12)]
    for y in ys:
        P.mark_dynamic(y, 0)
    second = fakify(ys, dynamic=None, state=state, cache=cache)
    for f1, f2 in zip(first.fakes, second.fakes, strict=True):
        assert str(f1.shape[0]) == str(f2.shape[0])
        assert f1.shape[1] == 2 - 0 and isinstance(f2.shape[1], torch.SymInt)


def test_automatic_dynamic_per_inner_source() -> None:
    state, cache = P.AutomaticDynamicState(), SymbolCache()
    r1 = fakify([scaled(torch.randn(8, 4))], dynamic=None, state=state, cache=cache)
    assert free_symbols(r1) == set()
    r2 = fakify([scaled(torch.randn(8, 6))], dynamic=None, state=state, cache=cache)
    f = r2.fakes[0]
    assert f.shape[0] == 8 and isinstance(f.shape[1], torch.SymInt)
    assert str(f.qdata.shape[1]) == str(f.shape[1])  # shared, not a second symbol
    assert state.dynamic_dims("args[0].qdata") == {1} and state.dynamic_dims("args[0].scale") == frozenset()
    assert "automatic: size changed" in r2.describe()


def test_same_tensor_twice_is_one_fake() -> None:
    x = torch.randn(8, 4)
    r = fakify([x, x], dynamic=True)
    assert r.fakes[0] is r.fakes[1]
    assert r.aliases == {"args[1]": "args[0]"}
    assert len(free_symbols(r)) == 2


@pytest.mark.parametrize("dynamic", [False, True])
def test_view_and_base_alias_in_fake_world(dynamic: bool) -> None:
    x = torch.randn(8, 4)
    r = fakify([x, x.view(-1), x[2:]], dynamic=dynamic)
    fx, fv, fs = r.fakes
    assert fv._base is fx and fs._base is fx
    assert same_storage(fx, fv) and same_storage(fx, fs)
    assert fs.storage_offset() == 8
    with r.fakes[0].fake_mode:  # type: ignore[attr-defined]
        version = fx._version
        fv.add_(1)
        assert fx._version > version  # the mutation is seen through the base


def test_view_before_its_base_uses_the_base_symbols() -> None:
    x = torch.randn(8, 4)
    P.mark_dynamic(x, 0)
    r = fakify([x[:, 1], x])
    fs, fx = r.fakes
    assert fs._base is fx and same_storage(fs, fx)
    assert isinstance(fx.shape[0], torch.SymInt)


def test_inner_tensors_aliasing_each_other_and_other_inputs() -> None:
    x = torch.randn(8, 4)
    P.mark_dynamic(x, 0)
    p = pair(x, x)
    r = fakify([x, p])
    fx, fp = r.fakes
    assert isinstance(fp, Pair)
    assert fp.a is fx and fp.b is fx
    assert r.aliases == {"args[1].a": "args[0]", "args[1].b": "args[0]"}


def test_subclass_passed_twice_is_one_fake() -> None:
    p = pair(torch.randn(8, 4), torch.randn(8, 4))
    r = fakify([p, p], dynamic=True)
    assert r.fakes[0] is r.fakes[1]


def test_shared_storage_without_view() -> None:
    x = torch.randn(16)
    y = torch.empty(0).set_(x.untyped_storage(), 4, (4, 3), (3, 1))
    r = fakify([x, y])
    assert same_storage(r.fakes[0], r.fakes[1])


def test_ranges_and_divisibility_are_in_the_shape_env() -> None:
    x = torch.randn(16, 4)
    r = fakify([x], given={"args[0]": P.TensorPolicy(sizes=(P.dynamic(min=4, max=64, divisible_by=8), P.static()))})
    (sym,) = free_symbols(r)
    env = r.shape_env
    assert (int(env.var_to_range[sym].lower), int(env.var_to_range[sym].upper)) == (4, 64)
    assert any("Mod" in str(g.expr) for g in env.guards)


def test_every_symbol_is_bound_bare() -> None:
    b = bag([2, 3, 1, 4])
    P.mark_dynamic(b, (0, 1))
    r = fakify([b, torch.randn(3, 3)], dynamic=True)
    for sym, address in r.symbol_bindings.items():
        assert r.exprs[address] == sym
    assert set(r.symbol_bindings) == free_symbols(r)


def test_dynamic_stride_policy_gets_its_own_symbol() -> None:
    x = torch.randn(8, 10)[:, :4]
    policy = P.TensorPolicy(sizes=(P.dynamic(), P.static()), strides=(P.dynamic(), None))
    r = fakify([x], given={"args[0]": policy})
    f = r.fakes[0]
    assert isinstance(f.stride()[0], torch.SymInt) and f.stride()[1] == 1
    assert len(free_symbols(r)) == 2


def test_policy_errors_are_subclassaot_errors() -> None:
    b = bag([2, 3])
    bad = P.SubclassSymbolicPolicy(
        outer=P.TensorPolicy.all_dynamic(2), relations=[P.equal(P.inner("offsets", 0), P.outer(0))]
    )
    with pytest.raises(PolicyError, match=r"args\[0\]: relation `offsets.size\(0\) == size\(0\)` does not hold"):
        fakify([b], given={"args[0]": bad})
    with pytest.raises(SubclassAOTError):
        fakify([b], given={"args[0]": bad})


def test_nested_subclass_outer_sizes_are_symbolic() -> None:
    inner_pair = pair(torch.randn(8, 4), torch.randn(8, 4))
    outer_pair = pair(inner_pair, pair(torch.randn(8, 4), torch.randn(8, 4)))
    r = fakify([outer_pair], dynamic=True)
    f = r.fakes[0]
    assert isinstance(f, Pair) and isinstance(f.a, Pair) and isinstance(f.b, Pair)
    assert exprs(f.a.a) == exprs(f.b.b)
    assert tuple(map(str, f.a.shape)) == tuple(map(str, f.shape))
    assert len(free_symbols(r)) == 2


def _modes() -> dict[str, Callable[[], FakeTensorMode]]:
    return {"compile": new_fake_mode, "static": lambda: static_fake_copies([])[0]}


@pytest.mark.parametrize("mode", list(_modes()))
@pytest.mark.parametrize("op", ["copy", "as_strided_scatter"])
def test_a_cached_fake_result_has_the_kernels_storage_offset_and_size(mode: str, op: str) -> None:
    # torch_internals._CacheKeepsStorage (fuzz seed 122852 #196, TwoTensor): functionalization's copy of
    # a written input at storage offset 1 clones its whole storage and keeps the offset; torch's dispatch cache
    # answered every call after the first with offset 0 in a storage of one element.
    calls: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "copy": lambda x: torch.ops.aten.copy.default(x, torch.ones(1)),
        "as_strided_scatter": lambda x: torch.ops.aten.as_strided_scatter.default(x, torch.ones(1), (1,), (1,), 1),
    }
    real = calls[op](torch.randn(8).as_strided((1,), (1,), 1))
    layout = (real.storage_offset(), real.untyped_storage().nbytes())
    assert layout == (1, 32)  # the kernel's: the offset kept, the whole storage cloned
    with _modes()[mode]():
        x = torch.empty(8).as_strided((1,), (1,), 1)
        for _ in range(2):  # a miss or a hit, then a hit
            out = calls[op](x)
            assert (out.storage_offset(), out.untyped_storage().nbytes()) == layout
            assert out._version == 0 and not out._is_view()


_STATIC_CALLS: dict[str, tuple[Callable[[], object], bool]] = {  # the call, and whether its arguments are walked
    "mm": (lambda: torch.mm(torch.empty(2, 3), torch.empty(4, 3).t()), False),
    "cat": (lambda: torch.cat([torch.empty(2, 3), torch.empty(1, 3)]), False),
    "mul_of_transposed": (lambda: torch.empty(4, 3).t() * 2, False),
    "one_empty_result": (lambda: torch.empty(2, 0, 3).transpose(0, 2) + 1, False),
    "two_empty_results": (lambda: torch.empty(0, 3).max(1), True),
}


@pytest.mark.parametrize("call", list(_STATIC_CALLS))
def test_static_fakes_walk_the_arguments_only_of_ops_with_several_empty_results(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's static fake mode (`_EagerEmptyLayouts`) runs an op whose results are all empty again on real empty
    tensors for eager's strides, which reads every argument; an op with one result keeps the fake kernel's layout
    where it has elements (eager's: checked) and takes eager's view layout where it is empty, with no walk of its
    arguments."""
    make, walks = _STATIC_CALLS[call]
    leaves = pytree.tree_leaves
    walked: list[str] = []

    def noted(tree: object, *args: Any, **kwargs: Any) -> list[Any]:
        if sys._getframe(1).f_code.co_qualname == "_EagerEmptyLayouts.__torch_dispatch__":
            walked.append(call)
        return leaves(tree, *args, **kwargs)

    def layouts(out: object) -> list[tuple[torch.Size, tuple[int, ...], int]]:
        return [(t.shape, t.stride(), int(t.storage_offset())) for t in leaves(out) if isinstance(t, torch.Tensor)]

    eager = layouts(make())
    monkeypatch.setattr(pytree, "tree_leaves", noted)
    with static_fake_copies([])[0]:
        fake = layouts(make())
    monkeypatch.undo()
    assert bool(walked) == walks, walked
    if all(t[0].numel() for t in eager):  # (empty results' strides: `_empty_view_as_eager`'s, unchanged here)
        assert fake == eager


def _static_inputs() -> list[torch.Tensor]:
    base = torch.randn(6, 4)
    shared = torch.empty(0).set_(base.untyped_storage(), 4, (4, 3), (3, 1))
    weight = torch.nn.Parameter(torch.randn(3, 5))
    weight.grad = torch.randn(3, 5)
    non_input = torch.randn(10)
    count, scale = torch.tensor(7), torch.tensor(0.5, dtype=torch.float64)  # 0-dim: their item() is a symbol
    return [base, base[1:].t(), shared, weight, non_input[2:8].view(2, 3), count, scale, torch.randn(2, 3, 4)[:, 1]]


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_all_static_call_fakifies_without_the_shape_env_but_its_0_dim_tensors(
    dynamic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call with no symbol (every dim static, as a module's first compile) fakifies each leaf with the layout it
    has, without the ShapeEnv's size/stride/offset creation; the fakes are those the ShapeEnv path makes: layouts,
    the view relations and storages the real inputs share, a parameter's grad. A 0-dim tensor keeps the ShapeEnv
    path: its fake's item() is a backed symbol, as torch's converter makes it (the ShapeEnv sees its source). A call
    with a symbol fakifies every leaf through the ShapeEnv."""
    created: list[str] = []
    create = ShapeEnv._create_symbolic_sizes_strides_storage_offset

    def noted(self: ShapeEnv, *args: Any, **kwargs: Any) -> Any:
        created.append(args[4].name)  # (ex_size, ex_stride, ex_storage_offset, is_dim_dynamic, source)
        return create(self, *args, **kwargs)

    monkeypatch.setattr(ShapeEnv, "_create_symbolic_sizes_strides_storage_offset", noted)
    inputs = _static_inputs()
    r = fakify(inputs, dynamic=dynamic)
    paths = [f"args[{i}]" for i in range(len(inputs))]
    if dynamic:
        assert free_symbols(r) and {"args[0]", "args[3]", "args[5]", "args[6]"} <= set(created)
    else:
        assert free_symbols(r) == set() and created == ["args[5]", "args[6]"]
    fakes = r.fakes
    for real, fake in zip(inputs, fakes, strict=True):
        assert fake.dim() == real.dim() and fake.dtype == real.dtype
        if not dynamic:
            assert (fake.shape, fake.stride(), fake.storage_offset()) == (
                real.shape,
                real.stride(),
                real.storage_offset(),
            )
        assert fake.requires_grad == real.requires_grad and fake._is_view() == real._is_view()
    assert fakes[1]._base is fakes[0] and same_storage(fakes[0], fakes[2]) and not fakes[2]._is_view()
    assert fakes[4]._base is not None and fakes[4]._base.shape == (10,)
    assert fakes[3].grad is not None and fakes[3].grad.shape == (3, 5)
    for i in (5, 6):
        memo = fakes[i].item_memo  # type: ignore[attr-defined]
        assert memo is not None and memo.node.hint == inputs[i].item() and paths[i] in str(r.shape_env.var_to_sources)
