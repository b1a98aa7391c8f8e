"""ShardedTensor in one process: propagation rules (pure), the scenarios on a world of 1 (the group-less
`local_mesh()`: no process group, redistributions are local copies), the checker, guards and mark_dynamic."""

from __future__ import annotations

import runpy
import sys
import warnings

import pytest
import torch

import subclassaot
from subclasses.distributed import (
    Partial,
    Placement,
    Replicate,
    Shard,
    ShardedTensor,
    distribute_tensor,
    example,
    local_mesh,
)
from subclasses.distributed import propagation as prop
from subclasses.distributed.collectives import chunk_bounds
from subclasses.distributed.propagation import Linearity
from tests.subclasses import distributed_scenarios

R, P = Replicate(), Partial()


@pytest.mark.parametrize(
    ("a", "b", "out"),
    [(R, Shard(1), Shard(1)), (Shard(0), R, Shard(0)), (Shard(1), Shard(0), P), (P, R, P), (R, R, R)],
)
def test_mm_rule_keeps_parallel_layouts(a: Placement, b: Placement, out: Placement) -> None:
    decision = prop.mm(a, b)
    assert decision.inputs == (a, b) and decision.output == out


def test_mm_rule_falls_back_through_replicate() -> None:
    assert prop.mm(Shard(0), Shard(0)) == prop.Decision(inputs=(Shard(0), R), output=Shard(0))
    assert prop.mm(P, P) == prop.Decision(inputs=(R, R), output=R)


def test_pointwise_rule_partial_linearity() -> None:
    shapes = [(4, 6), (4, 6)]
    assert prop.pointwise([P, P], shapes, 2, Linearity.ADDITIVE).output == P
    assert prop.pointwise([P, R], shapes, 2, Linearity.ADDITIVE) == prop.Decision(inputs=(R, R), output=R)
    assert prop.pointwise([P, R], shapes, 2, Linearity.MULTIPLICATIVE).output == P
    assert prop.pointwise([P], [(4, 6)], 2, Linearity.NONE) == prop.Decision(inputs=(R,), output=R)


def test_pointwise_rule_broadcasts_shard_dims() -> None:
    decision = prop.pointwise([Shard(1), R, R], [(4, 6), (6,), (4, 1)], 2, Linearity.NONE)
    assert decision == prop.Decision(inputs=(Shard(1), Shard(0), R), output=Shard(1))


def test_reduction_rule() -> None:
    assert prop.reduction(Shard(1), 2, [1], keepdim=False) == P
    assert prop.reduction(Shard(1), 2, [0], keepdim=False) == Shard(0)
    assert prop.reduction(Shard(1), 2, [0], keepdim=True) == Shard(1)
    assert prop.reduction(Shard(0), 2, None, keepdim=False) == P


def test_view_rule_keeps_even_shards_only() -> None:
    assert prop.view(Shard(0), (4, 3, 6), (12, 6), 2) == Shard(0)
    assert prop.view(Shard(2), (4, 3, 6), (12, 6), 2) == Shard(1)
    assert prop.view(Shard(1), (4, 3, 6), (12, 6), 2) is None  # not the outer dim of the merged group
    assert prop.view(Shard(1), (4, 3, 6), (4, 18), 2) is None  # 3 rows over 2 ranks: chunks would not line up
    assert prop.view(Shard(0), (12, 6), (4, 3, 6), 2) == Shard(0)


def test_chunk_bounds_follow_torch_chunk() -> None:
    for n in range(0, 9):
        chunks = torch.arange(n).chunk(3) if n else ()
        for rank in range(3):
            start, length = chunk_bounds(n, 3, rank)
            expected = chunks[rank].tolist() if rank < len(chunks) else []
            assert list(range(start, start + length)) == expected, (n, rank)


@pytest.mark.parametrize("name", distributed_scenarios.ALL)
def test_scenario_world_of_one(name: str) -> None:
    getattr(distributed_scenarios, name)(local_mesh())


def test_check_cli_on_example(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m subclassaot check subclasses.distributed:example`, run in this process (its `__main__` module as
    `-m` runs it, without a second interpreter's imports): the checker passes on ShardedTensor, exit status 0."""
    monkeypatch.setattr(sys, "argv", ["subclassaot", "check", "subclasses.distributed:example"])
    with warnings.catch_warnings():  # (runpy warns where subclassaot.__main__ was imported before: test_checker)
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(SystemExit) as exit_:
            runpy.run_module("subclassaot", run_name="__main__", alter_sys=True)
    out = capsys.readouterr().out
    assert exit_.value.code == 0, out
    assert "0 failed" in out, out


def test_ctx_is_the_spec_and_unflatten_honours_outer_stride() -> None:
    x = distribute_tensor(torch.randn(4, 6), local_mesh(), (Shard(1),))
    attrs, ctx = x.__tensor_flatten__()
    assert attrs == ["local"] and ctx == x.spec
    y = ShardedTensor.__tensor_unflatten__({"local": x.local}, ctx, (4, 6), (1, 4))
    assert y.stride() == (1, 4) and y.placements == (Shard(1),)


def test_mark_dynamic_hook_relates_local_and_global() -> None:
    x = distribute_tensor(torch.randn(4, 6), local_mesh(), (Shard(0),))
    policy = x.__tensor_mark_dynamic__((0,), 2, None)
    assert [repr(r) for r in policy.relations] == ["local.size(0) == size(0)"]


def test_to_local_output_keeps_grad() -> None:
    """Pipeline: an output that is a view of an intermediate subclass's inner tensor keeps its autograd history."""
    w = distribute_tensor(torch.randn(4, 6), local_mesh(), (Shard(1),)).requires_grad_(True)
    compiled = subclassaot.compile(lambda w: (w * 2).sum().to_local(), backend="eager")
    out = compiled(w)
    assert out.requires_grad, "compiled output lost requires_grad (eager: to_local keeps it)"


def test_gradient_takes_the_tangents_placements_as_in_eager() -> None:
    # found by the checker's pipeline.training rule: eager's x.grad of (x * 2 * r).sum(), r plain, is Replicate
    # (the tangent's placements); coercing the tangent to the output's Shard(1) gave a Shard(1) gradient of the same
    # values. A tangent of other placements now gets a backward traced for them (Note [Tangent Retrace]).
    from tests.oracle import assert_matches_eager

    assert_matches_eager(lambda x: x * 2, lambda: (example().detach().requires_grad_(True),))

    def step(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + x

    grads = []
    for fn in (step, subclassaot.compile(step)):
        x = example().detach().requires_grad_(True)
        out = fn(x)
        tangent = distribute_tensor(torch.ones(out.shape), local_mesh(), (Replicate(),))
        out.backward(tangent)  # type: ignore[no-untyped-call]  # untyped in torch
        assert isinstance(x.grad, ShardedTensor)
        grads.append(x.grad)
    assert grads[1].spec == grads[0].spec and grads[0].placements == (Replicate(),)
    torch.testing.assert_close(grads[1].full_tensor(), grads[0].full_tensor())


def test_view_of_a_computed_tensor_whose_view_op_gathers_is_refused() -> None:
    # found by the fuzzer (ShardedTensor inputs, seed 75000 #73): slicing the sharded dim gathers, so the view's
    # inner tensor is a new tensor; eager's output is still a view (autograd sees the wrapper) of the unreturned
    # product, which an output rebuilt from its inner tensors cannot be. Was a silent non-view.
    def f(x: torch.Tensor) -> torch.Tensor:
        t = x * 3
        return t[:, 1:3]

    with torch.no_grad(), pytest.raises(subclassaot.UnsupportedError, match="view of a ShardedTensor"):
        subclassaot.compile(f)(example())


@pytest.mark.parametrize("views", ["slice_t", "reshape_expand"])
def test_view_of_an_input_through_a_gathering_view_op_is_refused(views: str) -> None:
    # found by the fuzzer (ShardedTensor inputs, seed 75100 #383 / #894): the first view op gathers (new inner
    # tensors), the second aliases its source; only the last step was checked, and the output came out a non-view
    def f(x: torch.Tensor) -> torch.Tensor:
        return x[:, 2:6].t() if views == "slice_t" else x.reshape(8, 3).expand(8, 3)

    with torch.no_grad(), pytest.raises(subclassaot.UnsupportedError, match="view of input 0"):
        subclassaot.compile(f)(example())


def test_no_grad_gathering_view_of_an_intermediate_in_a_training_call_is_refused() -> None:
    # found by the fuzzer (ShardedTensor inputs, seed 75100 #72): eager's output is a no_grad view of the sum that
    # requires grad; the compiled one was a view of a rebuilt root of another shape that did not require grad
    def f(x: torch.Tensor) -> torch.Tensor:
        t = x.add(2.0)
        with torch.no_grad():
            return t.view(3, 2, 4)

    with torch.enable_grad(), pytest.raises(subclassaot.UnsupportedError, match="view of a ShardedTensor"):
        subclassaot.compile(f)(example().requires_grad_().clone())


@pytest.mark.parametrize("program", ["view_then_write", "write_and_return"])
def test_backward_through_a_written_view_of_an_input_matches_eager(program: str) -> None:
    # found by the fuzzer (ShardedTensor inputs, seed 75100 #124 / #876): the backward of a view of an input written
    # in place runs as_strided's backward, which needs new_empty_strided (now in the op table); without it eager's
    # backward raised, after some gradients had accumulated, and the compiled one did not raise
    from tests.oracle import assert_matches_eager

    def view_then_write(x: torch.Tensor) -> tuple[torch.Tensor]:
        t = x.t().view(3, 2, -1)
        x.mul_(3.0)
        return (t,)

    def write_and_return(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x.zero_()
        return y.view(4, 3, -1), x

    with torch.enable_grad():
        if program == "view_then_write":
            assert_matches_eager(view_then_write, lambda: (example().requires_grad_().clone(),))
        else:
            assert_matches_eager(
                write_and_return,
                lambda: (example().requires_grad_().clone().reshape(2, 1, 12), example().requires_grad_()),
            )


def test_gathering_view_of_an_input_written_afterwards_is_refused() -> None:
    # found by the fuzzer (ShardedTensor inputs, seed 75200 #834): view(24, 1) of a Shard(1) tensor gathers (a copy
    # made when the view runs); the input is then written, and the output replayed from it at the end of the call
    # took the written values (wrong values, silently)
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = x.expand(-1, 6)
        v = t.view(24, 1)
        x.mul_(2.0)
        return v, t

    with torch.no_grad(), pytest.raises(subclassaot.UnsupportedError, match="a copy of its source's"):
        subclassaot.compile(f)(example())

    def g(x: torch.Tensor) -> torch.Tensor:  # returned alone, no write: a view of the input, refused as such
        return x.expand(-1, 6).view(24, 1)

    with torch.no_grad(), pytest.raises(subclassaot.UnsupportedError, match="view of input 0"):
        subclassaot.compile(g)(example())


def test_write_with_grad_through_a_gathering_view_is_refused() -> None:
    # found by the fuzzer (ShardedTensor inputs, seed 75400 #818): view(1, 1, 24) of a Shard(1) tensor gathers (a
    # copy); mul_() of it with grad changes the base's gradient in eager (autograd records the write on the base)
    # while the base's data never sees it; the compiled gradient was the unwritten one
    def f(x: torch.Tensor) -> torch.Tensor:
        x.view(1, 1, 24).mul_(-1.0)
        return x

    with torch.enable_grad(), pytest.raises(subclassaot.UnsupportedError, match="copy of its source's"):
        subclassaot.compile(f)(example().requires_grad_().clone())
