"""Input makers and the refusal checks shared by the pipeline's regression tests (tests/pipeline/test_*.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, cast

import pytest
import torch
import torch._dynamo

import subclassaot
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager

__all__ = [
    "ENTRIES",
    "REAL_SUBCLASSES",
    "assert_refused",
    "ci_share",
    "dynamo_compile",
    "nonleaf",
    "pair",
    "pair_nonleaf",
    "real_subclass",
    "twice",
]

T = torch.Tensor
P = TypeVar("P")
M = TypeVar("M")


def ci_share(programs: Sequence[P], makes: Sequence[M]) -> tuple[list[tuple[P, M]], list[tuple[P, M]]]:
    """Split a hand-written sweep, programs x input makers, into CI's share and the rest (for a `slow` sibling test):
    CI pairs program k with maker k, cycling the shorter list, so that each program and each maker runs in CI."""
    kept = {(k % len(programs), k % len(makes)) for k in range(max(len(programs), len(makes)))}
    cases = [((i, j), (f, m)) for i, f in enumerate(programs) for j, m in enumerate(makes)]
    return [c for ij, c in cases if ij in kept], [c for ij, c in cases if ij not in kept]


def pair(*shape: int, requires_grad: bool = False) -> T:
    return PairTensor.from_tensor(torch.randn(shape), requires_grad=requires_grad)


# The subclasses users have, made fresh as users make them: torch's DTensor on a one-rank mesh, torch's jagged
# NestedTensor (every one over the same offsets, so that two combine), torchao's Float8TrainingTensor.
REAL_SUBCLASSES = ("dtensor", "njt", "float8")
_OFFSETS = torch.tensor([0, 2, 5, 7])


def real_subclass(kind: str, *, grad: Literal["leaf", "nonleaf"] | None = None) -> T:
    """A (4, 4) DTensor sharded on dim 0, a (3, j, 4) NJT, or a (4, 4) Float8TrainingTensor: a leaf requiring grad, a
    non-leaf requiring grad (a clone of one), or neither."""
    t: T
    if kind == "dtensor":
        from torch.distributed.tensor import Shard, distribute_tensor

        from tests.subclasses.dtensor_factory import one_rank_mesh

        t = distribute_tensor(torch.randn(4, 4), one_rank_mesh(), [Shard(0)])
    elif kind == "njt":
        t = torch.nested.nested_tensor_from_jagged(torch.randn(7, 4), _OFFSETS).detach().clone()
    elif kind == "float8":
        pytest.importorskip("torchao")
        from torchao.float8.float8_training_tensor import (
            GemmInputRole,
            LinearMMConfig,
            hp_tensor_and_scale_to_float8,
        )

        scale = torch.tensor(2.0)
        t = hp_tensor_and_scale_to_float8(
            torch.randn(4, 4), scale, torch.float8_e4m3fn, LinearMMConfig(), GemmInputRole.INPUT
        )
    else:
        raise ValueError(f"no real subclass {kind!r}: one of {REAL_SUBCLASSES}")
    if grad is not None:
        with torch.enable_grad():
            t = t.requires_grad_() if grad == "leaf" else t.requires_grad_().clone()
    return t


def dynamo_compile(fn: Callable[..., object], *, backend: object = "eager", **_: object) -> Callable[..., object]:
    """The oracle's `compile_fn` for the other entry: torch.compile with our backend (Dynamo reset first)."""
    from subclassaot.tools.dynamo_backend import subclassaot_backend

    torch._dynamo.reset()
    compiled: Callable[..., object] = torch.compile(fn, backend=subclassaot_backend, options={"backend": str(backend)})
    return compiled


# The two entries, by name: subclassaot.compile (the oracle's default) and torch.compile(backend="subclassaot").
ENTRIES: dict[str, CompileFn | None] = {"aot": None, "dynamo": dynamo_compile}


def nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return torch.randn(shape, requires_grad=True).clone()


def pair_nonleaf(*shape: int) -> T:
    with torch.enable_grad():
        return pair(*shape, requires_grad=True).clone()


def assert_refused(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None, match: str
) -> None:
    """The pipeline raises UnsupportedError naming the rule; eager against eager (--identity-compile), the program
    must pass the oracle (it is eager-legal)."""
    if compile_fn is not None:
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        return
    with pytest.raises(UnsupportedError, match=match):
        subclassaot.compile(f)(*make_inputs())


def check_with_grad(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """assert_matches_eager with grad enabled (a training program)."""
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def refused_with_grad(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None, match: str
) -> None:
    """assert_refused with grad enabled."""
    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, match)


def leaf(*shape: int) -> T:
    """A plain leaf that requires grad."""
    return torch.randn(shape, requires_grad=True)


def check_no_grad(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """assert_matches_eager under no_grad (an inference program)."""
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def twice(make: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    """An input maker passing one tensor from `make` as two arguments (an alias group of the same object)."""

    def make_inputs() -> tuple[object, ...]:
        x = make()
        return (x, x)

    return make_inputs


class SinFunction(torch.autograd.Function):
    """A plain custom Function: saves its input, returns a fresh tensor."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        grad: T = g * x.cos()
        return grad


class DirtyScale(torch.autograd.Function):
    """Writes its input in place and returns it (ctx.mark_dirty)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g * 2


class DirtyAddSaved(torch.autograd.Function):
    """Saves its second input, adds it into its first in place, returns the first and a fresh tensor."""

    @staticmethod
    def forward(ctx: Any, x: T, y: T) -> tuple[T, T]:
        ctx.save_for_backward(y)
        x.add_(y)
        ctx.mark_dirty(x)
        return x, y.sin()

    @staticmethod
    def backward(ctx: Any, g: T, g_fresh: T) -> tuple[T, T]:
        (y,) = ctx.saved_tensors
        return g, g + g_fresh * y.cos()


class TransposeSaved(torch.autograd.Function):
    """Saves its input; its backward transposes it in place (a metadata change the input keeps)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]  # FunctionCtx's stubs lack saved_tensors
        x.t_()
        return g * 3


class ViewAsAndRowOfOwnTensor(torch.autograd.Function):
    """Returns a view_as and an unsqueeze of a tensor its forward made (both views of it, of a node with two
    outputs)."""

    @staticmethod
    def forward(ctx: Any, x: T) -> tuple[T, T]:
        y = x * 2
        return y.view_as(y), y.unsqueeze(0)

    @staticmethod
    def backward(ctx: Any, g: T, g_row: T) -> T:
        return (g + g_row.squeeze(0)) * 2


def backward_through(k: int) -> Callable[[object, tuple[object, ...]], None]:
    """An `after_call`: backward through the program's output `k` alone, the graph kept for the oracle's own
    backward through them all (eager's may complete through one output and raise through another)."""

    def after_call(out: object, args: tuple[object, ...]) -> None:
        o = cast(tuple[torch.Tensor, ...], out)[k]
        torch.autograd.backward(o, torch.ones_like(o), retain_graph=True)

    return after_call
