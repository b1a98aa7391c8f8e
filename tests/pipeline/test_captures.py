"""Tensors a program reads without being passed them (Note [State The Program Reads]): closure cells,
globals, global modules, module tensor attributes. Each is read on every call, written as eager writes it,
differentiated through, and guarded; a tensor reached any other way is refused by name."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.utils._pytree as pytree

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import assert_matches_eager

T = torch.Tensor

SCALE = torch.randn(3)
COUNTER = torch.zeros(3)
LINEAR = torch.nn.Linear(3, 2)


def times_global(x: T) -> T:
    return x * SCALE


def accumulate_global(x: T) -> T:
    COUNTER.add_(x)
    return COUNTER * 2


def through_global_module(x: T) -> T:
    out: T = LINEAR(x).relu()
    return out


def test_closure_tensor_matches_eager() -> None:
    w = torch.randn(3)

    def f(x: T) -> T:
        return x * w + 1

    assert_matches_eager(f, lambda: (torch.randn(3),))


def test_closure_subclass_tensor_matches_eager() -> None:
    p = PairTensor.from_tensor(torch.randn(3))

    def f(x: T) -> T:
        return x * p

    assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(3)),))


def test_global_tensor_and_nested_function() -> None:
    def f(x: T) -> T:
        def inner(y: T) -> T:
            return y - SCALE

        return inner(x).exp()

    assert_matches_eager(times_global, lambda: (torch.randn(3),))
    assert_matches_eager(f, lambda: (torch.randn(3),))


def test_global_module_forward_and_gradients() -> None:
    assert_matches_eager(through_global_module, lambda: (torch.randn(4, 3),))
    LINEAR.zero_grad()
    with torch.enable_grad():
        x = torch.randn(4, 3, requires_grad=True)
        through_global_module(x).sum().backward()  # type: ignore[no-untyped-call]
        expected = (LINEAR.weight.grad.clone(), x.grad.clone())  # type: ignore[union-attr]
        LINEAR.zero_grad()
        x.grad = None
        subclassaot.compile(through_global_module, backend="eager")(x).sum().backward()  # type: ignore[no-untyped-call]
    assert LINEAR.weight.grad is not None and x.grad is not None
    torch.testing.assert_close((LINEAR.weight.grad, x.grad), expected)


def test_closure_tensor_requiring_grad_gets_its_gradient() -> None:
    c = torch.randn(3, requires_grad=True)

    def f(x: T) -> T:
        return (x * c).sin()

    x = torch.randn(3)
    with torch.enable_grad():
        f(x).sum().backward()  # type: ignore[no-untyped-call]
        expected = c.grad.clone()  # type: ignore[union-attr]
        c.grad = None
        subclassaot.compile(f, backend="eager")(x).sum().backward()  # type: ignore[no-untyped-call]
    torch.testing.assert_close(c.grad, expected)


def test_global_buffer_written_like_eager() -> None:
    x = torch.randn(3)
    COUNTER.zero_()
    start = COUNTER._version
    eager = [accumulate_global(x), accumulate_global(x)]
    after_eager, eager_bumps = COUNTER.clone(), COUNTER._version - start
    COUNTER.zero_()
    start = COUNTER._version
    compiled = subclassaot.compile(accumulate_global, backend="eager")
    ours = [compiled(x), compiled(x)]
    torch.testing.assert_close(ours, eager)
    torch.testing.assert_close(COUNTER, after_eager)
    assert COUNTER._version - start == eager_bumps == 2


def test_rebinding_a_captured_name_is_seen_and_guarded() -> None:
    w = torch.randn(3)

    def f(x: T) -> T:
        return x * w

    compiled = subclassaot.compile(f, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * w)
    w = torch.randn(3)  # same metadata: the same entry reads the new tensor
    torch.testing.assert_close(compiled(x), x * w)
    assert compiled.compile_count == 1
    w = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), x * w)
    assert compiled.compile_count == 2
    assert "closure.w.dim(): expected 1, got 2" in compiled.recompile_reasons[-1]


def test_module_tensor_attribute_is_lifted() -> None:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.scale = torch.tensor(2.0)  # neither parameter nor buffer
            self.calls = torch.zeros(())

        def forward(self, x: T) -> T:
            self.calls.add_(1)
            out: T = self.lin(x) * self.scale
            return out

    module = Scaled()
    compiled = subclassaot.compile(module, backend="eager")
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), module.lin(x) * 2)
    module.scale = torch.tensor(3.0)
    torch.testing.assert_close(compiled(x), module.lin(x) * 3)
    assert module.calls.item() == 2 and compiled.compile_count == 1
    assert set(module.state_dict()) == {"lin.weight", "lin.bias"}


def test_only_calls_given_a_captured_tensor_rebuild_their_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each torch call the program makes passes through the lifting mode: one given a captured tensor (here only
    `stack`, whose list holds w) gets its arguments rebuilt around the tensor's stand-in; every other call keeps the
    arguments the program passed (no rebuild of `cat`'s list, of a slice's index). Matches eager."""
    w = torch.randn(3)

    def f(x: T) -> T:
        y = torch.cat([x, x]) * 2
        return torch.stack([y[:3], w]).sum(0) + x

    rebuilt: list[str] = []
    unflatten = pytree.tree_unflatten

    def noted(leaves: list[object], spec: pytree.TreeSpec) -> object:
        caller = sys._getframe(1)
        if caller.f_code.co_name == "__torch_function__" and caller.f_code.co_filename.endswith("inputs.py"):
            rebuilt.append(getattr(caller.f_locals["func"], "__name__", "?"))
        return unflatten(leaves, spec)

    monkeypatch.setattr(pytree, "tree_unflatten", noted)
    x = torch.randn(3)
    torch.testing.assert_close(subclassaot.compile(f)(x), f(x))
    assert rebuilt and set(rebuilt) == {"stack"}, rebuilt
    monkeypatch.undo()
    assert_matches_eager(f, lambda: (torch.randn(3),))


def test_tensor_reached_through_an_object_is_refused() -> None:
    class Holder:
        def __init__(self) -> None:
            self.t = torch.randn(3)

    holder = Holder()

    def f(x: T) -> T:
        return x * holder.t

    with pytest.raises(subclassaot.UnsupportedError, match=r"shape \(3,\).*not an argument"):
        subclassaot.compile(f, backend="eager")(torch.randn(3))


# A captured tensor reached without an op: returned as it is, or held by a subclass built around it (a constructor is
# no torch function, so the tracing mode never swapped it): the output is the lifted input, as eager's is the tensor.
def returns_global(x: T) -> object:
    return x + 1, SCALE


def pair_around_global(x: T) -> object:
    return PairTensor(x, SCALE)


def nested_pair_around_global(x: T) -> object:
    return PairTensor(PairTensor(x, SCALE), PairTensor(x, x))


class PairAroundAttribute(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = torch.randn(3)  # a tensor attribute, neither parameter nor buffer

    def forward(self, x: T) -> object:
        return PairTensor(x, self.c), self.c


@pytest.mark.parametrize(
    "fn",
    [returns_global, pair_around_global, nested_pair_around_global, PairAroundAttribute()],
    ids=["returned", "pair_around", "nested_pair_around", "module_attribute"],
)
def test_captured_tensor_output_without_an_op_matches_eager(fn: object) -> None:
    assert callable(fn)
    compiled = assert_matches_eager(fn, lambda: (torch.randn(3),))
    out = compiled(torch.randn(3))
    assert isinstance(out, tuple | PairTensor)


def pair_around_global_then_computed(x: T) -> object:
    return PairTensor(x, SCALE) * 2


def test_subclass_built_around_captured_tensor_then_computed_with_is_refused() -> None:
    # Its own ops would read the captured tensor itself inside __torch_dispatch__, past the tracing mode.
    with pytest.raises(subclassaot.UnsupportedError, match="builds a PairTensor around a tensor it captures"):
        subclassaot.compile(pair_around_global_then_computed, backend="eager")(torch.randn(3))
