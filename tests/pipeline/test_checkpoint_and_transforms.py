"""Activation checkpointing (torch.utils.checkpoint, reentrant and not) and torch.func transforms (vmap, grad,
jacrev) inside compiled functions: outputs, gradients and random draws equal eager's (Note [Grad Mode And Autograd
Reads]). A checkpointed region with dropout recomputes the same mask in eager's backward; ours traces the
region once, so the mask it saves is the one the forward drew, and the gradients match."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import subclassaot
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor
from tests.oracle import assert_matches_eager

T = torch.Tensor


def _region(x: T, w: T) -> T:
    return torch.nn.functional.dropout(torch.sin(x @ w), 0.3, training=True).relu()


def _inputs() -> tuple[T, T]:
    return torch.randn(4, 5, requires_grad=True), torch.randn(5, 5, requires_grad=True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_region_with_dropout(reentrant: bool) -> None:
    def fn(x: T, w: T) -> T:
        return checkpoint(_region, x, w, use_reentrant=reentrant) * 2  # type: ignore[no-any-return]

    assert_matches_eager(fn, _inputs)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_region_without_grad(reentrant: bool) -> None:
    def fn(x: T, w: T) -> T:
        return checkpoint(_region, x, w, use_reentrant=reentrant)  # type: ignore[no-any-return]

    assert_matches_eager(fn, lambda: (torch.randn(4, 5), torch.randn(5, 5)))


class _CheckpointedBlocks(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(6, 6), nn.LayerNorm(6), nn.Dropout(0.2), nn.GELU()) for _ in range(2)
        )
        self.reentrant = reentrant

    def forward(self, x: T) -> T:
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=self.reentrant)
        return x.sum(-1)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_module_blocks(reentrant: bool) -> None:
    assert_matches_eager(_CheckpointedBlocks(reentrant), lambda: (torch.randn(3, 6, requires_grad=True),))


def test_vmap_over_an_argument() -> None:
    def fn(x: T, w: T) -> T:
        return torch.vmap(lambda row: (row @ w).tanh().sum())(x)  # type: ignore[no-any-return]

    assert_matches_eager(fn, _inputs)


def test_vmap_with_in_dims_and_a_mutated_argument() -> None:
    def fn(x: T, y: T, b: T) -> T:
        b.add_(1)
        return torch.vmap(torch.mul, in_dims=(0, 1))(x, y) + b

    assert_matches_eager(fn, lambda: (torch.randn(3, 4), torch.randn(4, 3), torch.randn(3, 4)))


def test_func_grad() -> None:
    def fn(x: T, w: T) -> T:
        return torch.func.grad(lambda a: (a.sin() @ w).sum())(x)  # type: ignore[no-any-return]

    assert_matches_eager(fn, _inputs)


def test_func_grad_and_value_per_sample() -> None:
    def fn(x: T, w: T) -> tuple[T, T]:
        g, v = torch.vmap(torch.func.grad_and_value(lambda row: (row @ w).pow(2).sum()))(x)
        return g, v

    assert_matches_eager(fn, _inputs)


def test_jacrev() -> None:
    def fn(x: T, w: T) -> T:
        return torch.func.jacrev(lambda a: (a @ w).tanh())(x[0])  # type: ignore[no-any-return]

    assert_matches_eager(fn, _inputs)


def test_autograd_grad_on_the_programs_own_tensors_is_still_refused() -> None:
    import subclassaot
    from subclassaot.errors import UnsupportedError

    def fn(x: T) -> tuple[T, ...]:
        return torch.autograd.grad(x.sin().sum(), x)

    with pytest.raises(UnsupportedError, match=r"calls grad\(\) inside the compiled function"):
        subclassaot.compile(fn)(torch.randn(3, requires_grad=True))


def test_reentrant_region_whose_inputs_need_no_grad_leaves_parameters_without_grad() -> None:
    lin = nn.Linear(4, 4)

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = lin

        def forward(self, x: T) -> T:
            return checkpoint(self.lin, x, use_reentrant=True) + self.lin.bias  # type: ignore[no-any-return]

    assert_matches_eager(M(), lambda: (torch.randn(2, 4),))


def test_checkpoint_without_preserved_rng_state_is_refused() -> None:
    import subclassaot
    from subclassaot.errors import UnsupportedError

    def fn(x: T, w: T) -> T:
        return checkpoint(_region, x, w, use_reentrant=False, preserve_rng_state=False)  # type: ignore[no-any-return]

    with pytest.raises(UnsupportedError, match="preserve_rng_state=False"):
        subclassaot.compile(fn)(*_inputs())


_SCALE = torch.randn(4)
_ROWS = torch.randn(3, 4)


def test_vmapped_function_reads_a_captured_global() -> None:
    def fn(x: T) -> T:
        return torch.vmap(lambda row: row * _SCALE)(x)  # type: ignore[no-any-return]

    assert_matches_eager(fn, lambda: (torch.randn(3, 4),))


def test_captured_global_as_the_transformed_argument_is_refused() -> None:
    import subclassaot
    from subclassaot.errors import UnsupportedError

    def fn(w: T) -> T:
        return torch.vmap(lambda row: row * w)(_ROWS)  # type: ignore[no-any-return]

    with pytest.raises(UnsupportedError, match="straight into a torch.func transform"):
        subclassaot.compile(fn)(torch.randn(4))


def _weighted(x: T, w: T) -> T:
    return x.sin() * w


def _transformed(transform: str, compiled: Callable[[T, T], T], x: T, w: T, through_input: bool) -> object:
    """`compiled` called inside `transform`, over the transformed tensor (`through_input`) or over tensors the
    transform does not wrap (its result then multiplied by the transformed one)."""

    def inner(a: T) -> T:
        return compiled(a, w) if through_input else compiled(x, w) * a

    def total(a: T) -> T:
        return inner(a).sum()

    if transform == "grad":
        return torch.func.grad(total)(x)
    if transform == "vjp":
        return torch.func.vjp(inner, x)[1](torch.ones_like(x))
    if transform == "jacrev":
        return torch.func.jacrev(total)(x)
    if transform == "jvp":
        return torch.func.jvp(inner, (x,), (torch.ones_like(x),))
    if transform == "jacfwd":
        return torch.func.jacfwd(total)(x)
    return torch.vmap(inner)(torch.stack([x, x]))


_TRANSFORM_NAMES = {
    "grad": "torch.func.grad",
    "vjp": "torch.func.grad",
    "jacrev": "torch.func.grad",
    "jvp": "torch.func.jvp",
    "jacfwd": "torch.func.jvp",
    "vmap": "torch.vmap",
}


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_call"])
@pytest.mark.parametrize("through_input", [True, False], ids=["transformed_input", "untransformed_inputs"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("transform", list(_TRANSFORM_NAMES))
def test_compiled_function_called_inside_a_func_transform_is_refused(
    transform: str, kind: str, through_input: bool, warm: bool
) -> None:
    """A compiled function called inside a torch.func transform is refused at that call, naming the transform and
    the fix, for the transformed argument itself or tensors the transform does not wrap (its autograd.Function has
    no setup_context, so torch's own error would be "must override the setup_context staticmethod", or a wrapper's
    missing storage at compile). Eager (the uncompiled function) runs, and the compiled whole still matches it."""
    if kind == "pair":
        x: T = PairTensor(torch.randn(3), torch.randn(3))
        w: T = PairTensor(torch.randn(3), torch.randn(3), requires_grad=True)
    else:
        x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    if kind == "plain" or transform not in ("jvp", "jacfwd"):  # (PairTensor has no forward-mode rule in eager)
        _transformed(transform, _weighted, x, w, through_input)  # eager runs it
    compiled = subclassaot.compile(_weighted)
    if warm:
        compiled(x, w)
    with pytest.raises(UnsupportedError, match=rf"inside {_TRANSFORM_NAMES[transform]}.*compile the whole transformed"):
        _transformed(transform, compiled, x, w, through_input)
    if transform == "grad" and kind == "plain":
        # the fix the message names: the whole transformed function compiled
        assert_matches_eager(
            lambda a, b: _transformed(transform, _weighted, a, b, through_input),
            lambda: (torch.randn(3), torch.randn(3, requires_grad=True)),
        )


def test_wrapper_kept_from_inside_an_ended_transform_is_refused() -> None:
    """A GradTrackingTensor kept from inside torch.func.grad after it returned (a dead wrapper) has no storage for the
    guards and the trace: refused naming the argument, not torch's "Cannot access storage of TensorWrapper"."""
    kept: list[T] = []

    def total(a: T) -> T:
        kept.append(a * 2)
        return a.sum()

    torch.func.grad(total)(torch.randn(3))
    compiled = subclassaot.compile(_weighted)
    with pytest.raises(UnsupportedError, match=r"args\[0\]: a tensor wrapped by a torch.func transform that has ended"):
        compiled(kept[0], torch.randn(3, requires_grad=True))
