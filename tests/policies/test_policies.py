"""Policy objects, marks, derivation, automatic dynamic, planning and describe; every PolicyError."""

from __future__ import annotations

import threading

import pytest
import torch

import policies as P
from policies import PolicyError
from tests.policies.samples import bag, pair, scaled


def test_reprs_are_readable() -> None:
    assert repr(P.dynamic(min=2, max=64)) == "dynamic(min=2, max=64)"
    assert repr(P.TensorPolicy(sizes=(P.dynamic(), P.static()))) == "TensorPolicy(sizes=(dynamic(), static()))"
    rel = P.affine(P.inner("offsets", 0), P.outer(0), offset=1)
    assert repr(rel) == "offsets.size(0) == size(0) + 1"
    assert repr(P.product(P.outer(0), P.inner("local", 0), factor=4)) == "size(0) == local.size(0) * 4"
    assert repr(P.floordiv(P.inner("local", 0), P.outer(0), divisor=4)) == "local.size(0) == size(0) // 4"
    policy = P.SubclassSymbolicPolicy(outer=P.TensorPolicy.all_dynamic(1), relations=[rel])
    assert "relations=[offsets.size(0) == size(0) + 1]" in repr(policy)


def test_self_contradictions_cannot_be_built() -> None:
    with pytest.raises(PolicyError, match="min=5 > max=3"):
        P.dynamic(min=5, max=3)
    with pytest.raises(PolicyError, match="a range or divisibility on a static dim"):
        P.DimPolicy(kind=P.DimKind.STATIC, max=4)
    with pytest.raises(PolicyError, match="divisible_by=0 must be >= 1"):
        P.dynamic(divisible_by=0)
    with pytest.raises(PolicyError, match="min=-1 is negative"):
        P.dynamic(min=-1)
    with pytest.raises(PolicyError, match="1 size policies but 2 stride policies"):
        P.TensorPolicy(sizes=(P.dynamic(),), strides=(None, None))
    with pytest.raises(PolicyError, match=r"stride\(0\) is automatic"):
        P.TensorPolicy(sizes=(P.dynamic(),), strides=(P.automatic(),))
    with pytest.raises(PolicyError, match="cannot be related to itself"):
        P.equal(P.outer(0), P.outer(0))
    with pytest.raises(PolicyError, match="scale and divisor must be >= 1"):
        P.floordiv(P.outer(0), P.inner("a", 0), divisor=0)
    with pytest.raises(PolicyError, match="attr must name an inner tensor"):
        P.inner("", 0)
    with pytest.raises(PolicyError, match=r"a.size\(0\) is the target of 2 relations"):
        P.SubclassSymbolicPolicy(
            outer=P.TensorPolicy.all_dynamic(1),
            relations=[P.equal(P.inner("a", 0), P.outer(0)), P.equal(P.inner("a", 0), P.inner("b", 0))],
        )


def _plan(x: torch.Tensor, policy: P.Policy, path: str = "args[0]") -> P.TensorPlan:
    return P.plan_input(x, path, P.derive_policy(x, path, given={path: policy}))


def test_errors_that_need_the_input_name_its_path() -> None:
    b = bag([2, 3, 1])
    two_d = P.TensorPolicy.all_dynamic(2)
    missing_attr = P.SubclassSymbolicPolicy(outer=two_d, relations=[P.equal(P.inner("lengths", 0), P.outer(0))])
    with pytest.raises(
        PolicyError, match=r"args\[0\]: relation .* names inner tensor 'lengths'.*\['flat_values', 'offsets'\]"
    ):
        _plan(b, missing_attr)
    missing_dim = P.SubclassSymbolicPolicy(outer=two_d, relations=[P.equal(P.inner("offsets", 1), P.outer(0))])
    with pytest.raises(
        PolicyError, match=r"args\[0\]: relation .* names size\(1\) of args\[0\].offsets, which has 1 dims"
    ):
        _plan(b, missing_dim)
    violated = P.SubclassSymbolicPolicy(outer=two_d, relations=[P.affine(P.inner("offsets", 0), P.outer(0), offset=2)])
    with pytest.raises(PolicyError, match=r"args\[0\]: relation `offsets.size\(0\) == size\(0\) \+ 2` does not hold"):
        _plan(b, violated)
    with pytest.raises(PolicyError, match=r"args\[0\].size\(0\) is 3, which breaks the policy dynamic\(max=2\)"):
        _plan(b, P.TensorPolicy(sizes=(P.dynamic(max=2), P.static())))
    with pytest.raises(PolicyError, match=r"args\[0\].size\(0\) is 3, which breaks .*divisible_by=2"):
        _plan(b, P.TensorPolicy(sizes=(P.dynamic(divisible_by=2), P.static())))
    with pytest.raises(PolicyError, match=r"args\[0\]: the policy .* has 1 dims but the tensor has 2"):
        _plan(b, P.TensorPolicy.all_dynamic(1))
    with pytest.raises(PolicyError, match=r"args\[0\]: the policy names inner tensor 'values'"):
        _plan(b, P.SubclassSymbolicPolicy(outer=two_d, inner={"values": two_d}))
    with pytest.raises(PolicyError, match=r"args\[0\]: a SubclassSymbolicPolicy was given for a plain Tensor"):
        _plan(torch.randn(3), P.SubclassSymbolicPolicy(outer=P.TensorPolicy.all_dynamic(1)))
    constrained_target = P.SubclassSymbolicPolicy(
        outer=two_d,
        inner={"offsets": P.TensorPolicy(sizes=(P.dynamic(max=100),))},
        relations=[P.affine(P.inner("offsets", 0), P.outer(0), offset=1)],
    )
    with pytest.raises(PolicyError, match=r"args\[0\].offsets.size\(0\) is derived by relation .* own constraint"):
        _plan(b, constrained_target)
    stride_source = P.SubclassSymbolicPolicy(
        outer=two_d, relations=[P.equal(P.inner("offsets", 0), P.outer(0, P.Prop.STRIDE))]
    )
    with pytest.raises(PolicyError, match=r"args\[0\]: relation .* reads a stride"):
        _plan(b, stride_source)


def test_relation_cycle_is_an_error() -> None:
    p = pair(torch.randn(4, 4), torch.randn(4, 4))
    cyc = P.SubclassSymbolicPolicy(
        outer=P.TensorPolicy.all_dynamic(2),
        relations=[P.equal(P.inner("a", 0), P.inner("b", 0)), P.equal(P.inner("b", 0), P.inner("a", 0))],
    )
    with pytest.raises(PolicyError, match="relations form a cycle"):
        _plan(p, cyc)


def test_mark_errors() -> None:
    with pytest.raises(PolicyError, match=r"mark_dynamic\(x, 2\): x \(Tensor of shape \(2, 3\)\) has 2 dims"):
        P.mark_dynamic(torch.randn(2, 3), 2)
    with pytest.raises(PolicyError, match="min=9 > max=3"):
        P.mark_dynamic(torch.randn(2, 3), 0, min=9, max=3)

    class BadHook(type(pair(torch.randn(1), torch.randn(1)))):  # type: ignore[misc]
        def __tensor_mark_dynamic__(self, dims: object, min: object, max: object) -> object:
            return P.TensorPolicy.all_dynamic(1)

    bad = BadHook({"a": torch.randn(3), "b": torch.randn(3)}, (3,), (1,))
    with pytest.raises(PolicyError, match=r"BadHook.__tensor_mark_dynamic__ returned TensorPolicy"):
        P.mark_dynamic(bad, 0)


def test_mark_dynamic_recurses_into_same_rank_inner_tensors() -> None:
    s = scaled(torch.randn(8, 4))
    P.mark_dynamic(s, 1, max=16)
    policy = P.policy_for(s)
    assert isinstance(policy, P.SubclassSymbolicPolicy)
    assert policy.outer.sizes[1] == P.dynamic(max=16) and policy.outer.sizes[1].origin is P.Origin.MARK
    qdata = policy.inner["qdata"]
    assert isinstance(qdata, P.TensorPolicy) and qdata.sizes[1].kind is P.DimKind.DYNAMIC
    assert policy.inner["scale"] == P.TensorPolicy(sizes=())


def test_mark_dynamic_hook_and_merging_marks() -> None:
    b = bag([2, 3, 1])
    P.mark_dynamic(b, 0)
    P.mark_dynamic(b, 1)
    policy = P.policy_for(b)
    assert isinstance(policy, P.SubclassSymbolicPolicy)
    assert [d.kind for d in policy.outer.sizes] == [P.DimKind.DYNAMIC, P.DimKind.DYNAMIC]
    assert {d.origin for d in policy.outer.sizes} == {P.Origin.HOOK}
    assert [repr(r) for r in policy.relations] == ["offsets.size(0) == size(0) + 1"]
    P.mark_static(b, 1)
    policy = P.policy_for(b)
    assert isinstance(policy, P.SubclassSymbolicPolicy)
    assert policy.outer.sizes[1].kind is P.DimKind.STATIC and policy.outer.sizes[1].origin is P.Origin.MARK


def test_torch_marker_attribute_is_read() -> None:
    x = torch.randn(4, 5)
    x._dynamo_dynamic_indices = {1}  # type: ignore[attr-defined]  # what torch._dynamo.mark_dynamic sets
    policy = P.policy_for(x)
    assert isinstance(policy, P.TensorPolicy)
    assert policy.sizes[1].kind is P.DimKind.DYNAMIC and policy.sizes[1].origin is P.Origin.TORCH_MARK
    assert policy.sizes[0].origin is P.Origin.DEFAULT


def test_torch_mark_dynamic_itself_is_read() -> None:
    import torch._dynamo

    p = pair(torch.randn(4, 5), torch.randn(4, 5))
    torch._dynamo.mark_dynamic(p, 0)
    policy = P.policy_for(p)
    assert isinstance(policy, P.SubclassSymbolicPolicy)
    a = policy.inner["a"]
    assert isinstance(a, P.TensorPolicy) and a.sizes[0].origin is P.Origin.TORCH_MARK


def test_automatic_state() -> None:
    state = P.AutomaticDynamicState()
    state.observe("args[0]", (4, 5))
    assert state.dynamic_dims("args[0]") == frozenset()
    state.observe("args[0]", (4, 6))
    state.observe("args[0]", (4, 7))
    assert state.dynamic_dims("args[0]") == {1}
    state.observe("args[0]", (4, 7, 1))
    assert state.dynamic_dims("args[0]") == {0, 1, 2}
    assert "args[0]: (*, *, *)" in repr(state)


def test_automatic_state_is_thread_safe() -> None:
    state = P.AutomaticDynamicState()

    def work(k: int) -> None:
        for i in range(200):
            state.observe(f"p{i % 7}", (3, k))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(state.dynamic_dims(f"p{i}") == {1} for i in range(7))


def test_describe_shows_origin_per_path() -> None:
    b = bag([2, 3, 1])
    P.mark_dynamic(b, 0)
    text = P.describe(b, "args[0]")
    assert "args[0].offsets (Tensor" in text
    assert "size(0) = 4: dynamic, = args[0].size(0) + 1 (relation `offsets.size(0) == size(0) + 1`)" in text
    assert "args[0].flat_values (Tensor" in text and "from hook" in text
    assert "size(1) = 3: static (policy static() from default)" in text


def test_share_outer_dims_can_be_turned_off() -> None:
    p = pair(torch.randn(4, 4), torch.randn(4, 4))
    policy = P.SubclassSymbolicPolicy(outer=P.TensorPolicy.all_dynamic(2), share_outer_dims=False)
    plan = _plan(p, policy, "x")
    assert all(d.derived is None for d in plan.children[0].sizes)
    shared = _plan(p, P.SubclassSymbolicPolicy(outer=P.TensorPolicy.all_dynamic(2)), "x")
    # inner dims nobody spoke about follow the outer symbols (the default relation)
    assert all(d.derived is not None and d.dynamic for d in shared.children[0].sizes)
    explicit = P.SubclassSymbolicPolicy(outer=P.TensorPolicy.all_dynamic(2), inner={"a": P.TensorPolicy.all_static(2)})
    assert all(d.derived is None and not d.dynamic for d in _plan(p, explicit, "x").children[0].sizes)
    P.mark_dynamic(p, (0, 1))
    marked_plan = P.plan_input(p, "x", P.policy_for(p))
    assert all(d.derived is not None and d.derived.origin is P.Origin.SHARED for d in marked_plan.children[1].sizes)
