"""Training through the partitioned joint graph: random ops drawn once (gradients agree with the forward, the
generator advances as in eager), saved activations within eager's, backward twice, double backward.

See Note [Training Through A Joint Graph].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import torch
from torch import nn
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.authoring.wrapper_tensor import WrapperTensor, implements
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.program_helpers import SinFunction

T = torch.Tensor


def dropout_sum(x: T) -> object:
    return (nn.functional.dropout(x, 0.5, training=True).sum(),)


def dropout_twice(x: T, w: T) -> object:
    h = nn.functional.dropout(x * w, 0.3, training=True)
    return (nn.functional.dropout(h.relu(), 0.6, training=True) * w).sum()


class DropoutMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.4), nn.Linear(16, 4))

    def forward(self, x: T) -> T:
        out: T = self.net(x)
        return out.pow(2).mean()


def _step(fn: Callable[..., object], make: Callable[[], tuple[T, ...]]) -> tuple[list[T], list[T | None], T]:
    """Seeded forward + backward; returns outputs, input grads and the next draw of the global generator."""
    torch.manual_seed(7)
    args = make()
    torch.manual_seed(11)
    out = fn(*args)
    leaves = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, torch.Tensor)]
    torch.autograd.backward([o.sum() for o in leaves])
    params = list(fn.parameters()) if isinstance(fn, nn.Module) else []
    grads = [a.grad for a in args] + [p.grad for p in params]
    return [o.detach() for o in leaves], grads, torch.rand(3)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_dropout_grad_consistent_with_forward(backend: str) -> None:
    x = torch.randn(1000, requires_grad=True)
    out = subclassaot.compile(dropout_sum, backend=backend)(x)[0]  # type: ignore[index]
    torch.autograd.backward(out)
    assert x.grad is not None
    # d(sum(mask * x / 0.5))/dx = mask / 0.5, so x * grad sums back to the output: one mask, drawn once.
    torch.testing.assert_close((x.detach() * x.grad).sum(), out.detach(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (dropout_sum, lambda: (torch.randn(100, requires_grad=True),)),
        (dropout_twice, lambda: (torch.randn(6, 5, requires_grad=True), torch.randn(5, requires_grad=True))),
        (dropout_sum, lambda: (PairTensor.from_tensor(torch.randn(50), requires_grad=True),)),
    ],
    ids=["dropout", "dropout_twice", "dropout_pair"],
)
def test_dropout_rng_state_matches_eager(fn: Callable[..., object], make: Callable[[], tuple[T, ...]]) -> None:
    want = _step(fn, make)
    got = _step(subclassaot.compile(fn, backend="eager"), make)
    torch.testing.assert_close(got, want)


def test_dropout_module_rng_state_matches_eager() -> None:
    torch.manual_seed(0)
    model = DropoutMLP()
    compiled = subclassaot.compile(DropoutMLP(), backend="eager")
    compiled.load_state_dict(model.state_dict())
    make = lambda: (torch.randn(5, 8),)  # noqa: E731
    for _ in range(2):  # the second step runs the cached entry
        want = _step(model, make)
        got = _step(compiled, make)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[2], want[2])
        for p, q in zip(compiled.parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad, q.grad = None, None


def test_dropout_through_parity_oracle(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_matches_eager(
            dropout_twice,
            lambda: (torch.randn(6, 5, requires_grad=True), torch.randn(5, requires_grad=True)),
            compile_fn=compile_fn,
        )
        assert_matches_eager(DropoutMLP(), lambda: (torch.randn(5, 8),), compile_fn=compile_fn)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh())

    def forward(self, x: T) -> T:
        out: T = self.net(x)
        return out.pow(2).mean()


def _saved_bytes(fn: Callable[[T], T], x: T) -> int:
    """nbytes of the unique storages packed by autograd during one forward."""
    storages: dict[int, int] = {}

    def pack(t: T) -> T:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.autograd.backward(fn(x))
    return sum(storages.values())


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_mlp_saved_bytes_within_eager(backend: str) -> None:
    torch.manual_seed(0)
    model = MLP()
    compiled = subclassaot.compile(model, backend=backend)
    x = torch.randn(32, 64)
    compiled(x)  # compile first: the count below is one step of the compiled entry
    ours, eager = _saved_bytes(compiled, x), _saved_bytes(model, x)
    assert 0 < ours <= eager, (ours, eager)


def test_backward_twice_with_retain_graph() -> None:
    def f(x: T, w: T) -> T:
        return (nn.functional.dropout(x, 0.5, training=True) * w).tanh().sum()

    x, w = torch.randn(10, requires_grad=True), torch.randn(10, requires_grad=True)
    torch.manual_seed(3)
    want = f(x, w)
    torch.autograd.backward(want, retain_graph=True)
    torch.autograd.backward(want)
    want_grads = (x.grad.clone(), w.grad.clone())  # type: ignore[union-attr]
    x.grad, w.grad = None, None
    torch.manual_seed(3)
    got = subclassaot.compile(f, backend="eager")(x, w)
    torch.autograd.backward(got, retain_graph=True)
    torch.autograd.backward(got)
    torch.testing.assert_close((x.grad, w.grad), want_grads)


def test_double_backward_eager_backend() -> None:
    def f(x: T) -> T:
        return (x.sin() * x).sum()

    x = torch.randn(5, requires_grad=True)
    (g,) = torch.autograd.grad(subclassaot.compile(f, backend="eager")(x), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    (want_g,) = torch.autograd.grad(f(x), x, create_graph=True)
    (want_gg,) = torch.autograd.grad(want_g.sum(), x)
    torch.testing.assert_close((g, gg), (want_g, want_gg))


class _BuildTwo(torch.autograd.Function):
    """Plain tensors in, a TwoTensor of them out (its gradient's members are theirs)."""

    @staticmethod
    def forward(ctx: object, x: T, y: T) -> T:
        return TwoTensor(x.clone(), y.clone())  # type: ignore[no-untyped-call]  # untyped in torch

    @staticmethod
    def backward(ctx: object, g: Any) -> tuple[T, T]:
        return g.a, g.b


class _Members(torch.autograd.Function):
    """A TwoTensor in, its members out as plain tensors (their gradients rebuild a TwoTensor one)."""

    @staticmethod
    def forward(ctx: object, t: Any) -> tuple[T, T]:
        return t.a.clone(), t.b.clone()

    @staticmethod
    def backward(ctx: object, ga: T, gb: T) -> T:
        return TwoTensor(ga, gb)  # type: ignore[no-untyped-call]  # untyped in torch


def _members_product_times_x(x: T, y: T) -> T:
    two: T = _BuildTwo.apply(x.sin(), y)  # type: ignore[no-untyped-call]  # untyped in torch
    a, b = _Members.apply(two.cos() * two)  # type: ignore[no-untyped-call]  # untyped in torch
    return a * b * x  # type: ignore[no-any-return]


def _members_of_saved_chain(x: T, y: T) -> T:
    two: T = _BuildTwo.apply(x, y)  # type: ignore[no-untyped-call]  # untyped in torch
    a, b = _Members.apply(two.sin().exp())  # type: ignore[no-untyped-call]  # untyped in torch
    return a * b  # type: ignore[no-any-return]


def _members_of_sum_of_constant_times_x(x: T, y: T) -> T:
    c = torch.arange(4.0, dtype=x.dtype)
    two: T = TwoTensor(c, c + 1)  # type: ignore[no-untyped-call]  # untyped in torch
    a, b = _Members.apply((two * x * y).exp().sum())  # type: ignore[no-untyped-call]  # untyped in torch
    return a + b  # type: ignore[no-any-return]


@pytest.mark.parametrize("fn", [_members_product_times_x, _members_of_saved_chain, _members_of_sum_of_constant_times_x])
def test_double_backward_through_a_subclass_the_program_builds_is_refused(fn: Callable[[T, T], T]) -> None:
    # Plain inputs and outputs, a TwoTensor built inside: the rerun of the dense joint graph differentiates its
    # members where eager's second derivative goes through the wrapper's (and the Functions' rebuilt gradients,
    # which hold no history); it gave other second derivatives (the first) or some where eager raises (the others)
    x, y = (torch.randn(4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    out = subclassaot.compile(fn, backend="eager")(x, y)
    with pytest.raises(subclassaot.errors.UnsupportedError, match="the program builds a tensor subclass"):
        torch.autograd.grad(out.sum(), (x, y), create_graph=True)


def test_double_backward_through_a_built_subclass_without_double_backward_is_eager_s() -> None:
    x, y = (torch.randn(4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    want = torch.autograd.grad(_members_product_times_x(x, y).sum(), (x, y))
    got = torch.autograd.grad(subclassaot.compile(_members_product_times_x, backend="eager")(x, y).sum(), (x, y))
    torch.testing.assert_close(got, want)


# ---------------------------------------------------------------------------------------------------------------
# Tangents of another type than the output's (Note [Tangent Retrace])


def test_pair_tangent_for_plain_output(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        return (x * 2.0, y * 3.0)  # the oracle's loss is a PairTensor: x * 2 gets a PairTensor tangent

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True), PairTensor.from_tensor(torch.randn(3), requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def _assert_same(got: T | None, want: T | None) -> None:
    """Type, ctx and inner values of two gradients (assert_close cannot compare every subclass itself)."""
    assert type(got) is type(want)
    if got is None or want is None:
        return
    if not is_traceable_subclass(got):
        torch.testing.assert_close(got, want)
        return
    (g_node, g_leaves), (w_node, w_leaves) = flatten_subclass(got, "got"), flatten_subclass(want, "want")
    assert g_node.ctx == w_node.ctx
    torch.testing.assert_close(g_leaves, w_leaves)


def _grads_with_tangent(fn: Callable[..., object], args: list[T], tangent: T) -> list[T | None]:
    out = fn(*args)
    assert isinstance(out, torch.Tensor)
    torch.autograd.backward(out, grad_tensors=tangent)
    return [a.grad for a in args]


def test_plain_tangent_for_pair_output_is_retraced_once(caplog: pytest.LogCaptureFixture) -> None:
    def f(p: T, w: T) -> T:
        return (p * w).sin()

    def make() -> list[T]:
        torch.manual_seed(0)
        return [PairTensor.from_tensor(torch.randn(4), requires_grad=True), torch.randn(4, requires_grad=True)]

    compiled = subclassaot.compile(f, backend="eager")
    with caplog.at_level("INFO", logger="subclassaot.runtime.autograd_function"):
        for scale in (1.0, 2.0):
            tangent = torch.full((4,), scale)
            got, want = _grads_with_tangent(compiled, make(), tangent), _grads_with_tangent(f, make(), tangent)
            for g, w in zip(got, want, strict=True):
                _assert_same(g, w)
    assert sum("retracing the backward" in r.message for r in caplog.records) == 1


class Gained(WrapperTensor):
    """One inner tensor and a gain (ctx) that multiplications apply: a tangent's ctx changes the gradient."""

    inner_names: ClassVar[tuple[str, ...]] = ("a",)
    ctx_names: ClassVar[tuple[str, ...]] = ("gain",)
    apply_to_inner_by_default: ClassVar[bool] = True
    a: T
    gain: float

    @implements(torch.ops.aten.mul.Tensor)
    def _mul(func: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, y = args
        g = x if isinstance(x, Gained) else y
        unwrap = [t.a if isinstance(t, Gained) else t for t in (x, y)]
        return Gained(unwrap[0] * unwrap[1] * g.gain, g.gain)


def test_tangent_with_other_ctx_is_retraced() -> None:
    def f(p: T, w: T) -> T:
        return p * w

    def make() -> list[T]:
        torch.manual_seed(0)
        return [Gained(torch.randn(4), 1.0, requires_grad=True), torch.randn(4, requires_grad=True)]

    tangent = Gained(torch.ones(4), 3.0)
    got = _grads_with_tangent(subclassaot.compile(f, backend="eager"), make(), tangent)
    want = _grads_with_tangent(f, make(), tangent)
    for g, w in zip(got, want, strict=True):
        _assert_same(g, w)


class _Twice(torch.autograd.Function):
    """Saves nothing (a custom Function keeps a program on the joint graph: Note [Training Without A Function])."""

    @staticmethod
    def forward(ctx: object, x: T) -> T:
        return x * 2

    @staticmethod
    def backward(ctx: object, g: T) -> T:
        return g * 2


def _dropout_after_a_function(x: T) -> object:
    doubled: T = _Twice.apply(x)  # type: ignore[no-untyped-call]  # untyped in torch
    return (nn.functional.dropout(doubled, 0.5, training=True).sum(),)


def test_double_backward_of_random_program_is_refused_clearly() -> None:
    x = torch.randn(5, requires_grad=True)
    y = subclassaot.compile(_dropout_after_a_function, backend="eager")(x)[0]  # type: ignore[index]
    with pytest.raises(subclassaot.errors.UnsupportedError, match="double backward.*random"):
        torch.autograd.grad(y, x, create_graph=True)


def test_double_backward_of_random_program_without_a_function_is_eager_s() -> None:
    # Note [Training Without A Function]: the draws happened once, in the forward, as in eager
    x = torch.randn(5, requires_grad=True)
    compiled = subclassaot.compile(dropout_sum, backend="eager")
    grads = []
    for fn in (dropout_sum, compiled):
        torch.manual_seed(3)
        out = fn(x)
        assert isinstance(out, tuple) and isinstance(out[0], T)
        (g,) = torch.autograd.grad(out[0], x, create_graph=True)
        grads.append(g.detach())
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)
    assert compiled.entries[0].autograd_backward


def test_double_backward_after_input_written_is_refused_clearly() -> None:
    def f(x: T) -> T:
        z: T = _Twice.apply(x)  # type: ignore[no-untyped-call]  # untyped in torch
        return z.exp().sum()  # saves exp(z), not x: autograd's own version check does not see the write

    x = torch.randn(3, requires_grad=True)
    y = subclassaot.compile(f, backend="eager")(x)
    with torch.no_grad():
        x.add_(1.0)
    with pytest.raises(subclassaot.errors.UnsupportedError, match="modified in place after the forward"):
        torch.autograd.grad(y, x, create_graph=True)


def test_double_backward_after_input_written_runs_as_eager_without_a_function() -> None:
    # Note [Training Without A Function]: autograd is the backward, so the double backward is eager's own
    def f(x: T) -> T:
        return x.exp().sum()

    results = []
    for fn in (f, subclassaot.compile(f, backend="eager")):
        x = torch.randn(3, requires_grad=True, generator=torch.Generator().manual_seed(0))
        y = fn(x)
        with torch.no_grad():
            x.add_(1.0)
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
        results.append((type(y.grad_fn).__name__, g, gg))
    (eager_fn, eager_g, eager_gg), (ours_fn, ours_g, ours_gg) = results
    assert ours_fn == eager_fn == "SumBackward0"
    torch.testing.assert_close(ours_g, eager_g)
    torch.testing.assert_close(ours_gg, eager_gg)


def test_unused_subclass_gradient_saves_nothing() -> None:
    # The output is a view of the input whose gradient eager leaves None: the backward's zeros for it are made from
    # sizes, so the forward saves nothing (eager saves nothing either).
    def f(x: T) -> T:
        return x.view(-1)

    x = PairTensor.from_tensor(torch.randn(2, 3), requires_grad=True).clone()
    compiled = subclassaot.compile(f, backend="eager")
    compiled(x)
    packed: list[T] = []

    def pack(t: T) -> T:
        packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        compiled(x)
    assert packed == []


def _sin_of_written(x: T) -> T:
    y = x * 1
    z = y.sin()  # saves y for the backward
    y.add_(1)  # which then fails, as eager's does (Note [Backward Errors Are Deferred])
    return z


def _doubled_in_place_sin(x: T) -> T:
    y = x * 2
    # (a custom Function: trained through the joint graph, not natively: Note [Training Without A Function])
    out: T = SinFunction.apply(y)  # type: ignore[no-untyped-call]  # untyped in torch
    return out


def test_inference_graph_traced_only_where_the_joint_trace_fails() -> None:
    # Note [Training Through A Joint Graph]
    static = subclassaot.compile(_doubled_in_place_sin, backend="eager")
    static(torch.randn(3, requires_grad=True))
    dynamic = subclassaot.compile(_doubled_in_place_sin, backend="eager", dynamic=True)
    dynamic(torch.randn(3, requires_grad=True))
    failing = subclassaot.compile(_sin_of_written, backend="eager")
    x = torch.randn(3, requires_grad=True)
    out = failing(x)
    assert torch.equal(out, _sin_of_written(x))
    ((fine,), (symbolic,), (deferred,)) = static.entries, dynamic.entries, failing.entries
    assert fine.forward is not None and fine.traced.graph is None
    assert symbolic.forward is not None and symbolic.traced.graph is not None  # its ShapeEnv guards are the entry's
    assert deferred.forward is None and deferred.traced.graph is not None  # the forward the entry runs
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.backward(out.sum())
