"""Activation checkpointing (torch.utils.checkpoint, reentrant and not) and torch.func transforms (vmap, grad,
jacrev) inside compiled functions: outputs, gradients and random draws equal eager's (Note [Grad Mode And Autograd
Reads]). A checkpointed region with dropout recomputes the same mask in eager's backward; ours traces the
region once, so the mask it saves is the one the forward drew, and the gradients match."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

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
