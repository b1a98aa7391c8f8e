"""Storage resize_ inside a compiled program (FSDP2's pattern: `untyped_storage().resize_(0)` after use, resize_ to
full and copy_ before the next use): refused with the input's name, never a crash (Note [Storage Swaps By Rebinding]);
the same resize outside the compiled function, between calls, matches eager; reading a storage's size inside the program
stays supported."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.program_helpers import pair

T = torch.Tensor


def free_after_use(x: T, y: T) -> object:
    z = x * y
    x.untyped_storage().resize_(0)
    return z


def alloc_fill_use_free(x: T, src: T) -> object:  # FSDP2: alloc_storage, copy-out, use, free_storage
    x.untyped_storage().resize_(src.numel() * src.element_size())
    x.copy_(src)
    out = x * 2
    x.untyped_storage().resize_(0)
    return out


def alloc_and_fill(x: T, src: T) -> object:
    x.untyped_storage().resize_(src.numel() * src.element_size())
    with torch.no_grad():
        x.copy_(src)
    return x + 1


def free_intermediate(x: T) -> object:
    y = x * 2
    out = y.sum()
    y.untyped_storage().resize_(0)
    return out


def free_view_storage(x: T) -> object:
    v = x[1:]
    out = v + 1
    v.untyped_storage().resize_(0)
    return out


def _two() -> tuple[object, ...]:
    return torch.randn(4), torch.randn(4)


def _freed() -> tuple[object, ...]:
    x = torch.randn(4)
    x.untyped_storage().resize_(0)
    return x, torch.randn(4)


@pytest.mark.parametrize(
    ("f", "make_inputs", "name"),
    [
        (free_after_use, _two, "args\\[0\\]"),
        (alloc_fill_use_free, _freed, "args\\[0\\]"),
        (alloc_and_fill, _freed, "args\\[0\\]"),
        (free_intermediate, lambda: (torch.randn(4),), "a tensor made inside the program"),
        (free_view_storage, lambda: (torch.randn(4),), "args\\[0\\]"),
    ],
    ids=["free_after_use", "alloc_fill_use_free", "alloc_and_fill", "free_intermediate", "free_view_storage"],
)
def test_storage_resize_refused_naming_the_storage(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], name: str, compile_fn: CompileFn | None
) -> None:
    if compile_fn is not None:  # eager against eager: the oracle would read freed inputs; the program is eager-legal
        assert isinstance(f(*make_inputs()), T)
        return
    with pytest.raises(UnsupportedError, match=f"untyped_storage\\(\\).resize_\\(\\) of the storage of {name}"):
        subclassaot.compile(f)(*make_inputs())


def test_storage_resize_of_a_parameter_refused() -> None:
    class Sharded(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(4))

        def forward(self, x: T) -> T:
            out = x * self.weight
            self.weight.untyped_storage().resize_(0)
            return out

    with pytest.raises(UnsupportedError, match="resize_\\(\\) of the storage of .*weight"):
        subclassaot.compile(Sharded())(torch.randn(4))


def test_storage_resize_of_a_subclass_refused() -> None:
    def f(x: T) -> object:
        out = x * 2
        x.untyped_storage().resize_(0)
        return out

    rule = r"cannot change the byte size of a storage .*Note \[Storage Swaps By Rebinding\]"
    with pytest.raises(UnsupportedError, match=rule):
        subclassaot.compile(f)(pair(4))


def test_refusal_leaves_storages_outside_the_program_resizable() -> None:
    with pytest.raises(UnsupportedError):
        subclassaot.compile(free_after_use)(torch.randn(4), torch.randn(4))
    x = torch.randn(4)
    x.untyped_storage().resize_(0)
    assert x.untyped_storage().nbytes() == 0
    x.untyped_storage().resize_(16)
    assert x.untyped_storage().nbytes() == 16


def test_fsdp_resize_between_calls_matches_eager(compile_fn: CompileFn | None) -> None:
    """FSDP2 with torch.compile: the hooks free and re-allocate outside the graph; the compiled program between."""

    def use(x: T, y: T) -> object:
        return x * y + 1

    compiled = assert_matches_eager(use, _two, compile_fn=compile_fn)
    outputs = []
    for run in (use, compiled):
        torch.manual_seed(0)
        x, y = torch.randn(4), torch.randn(4)
        first = run(x, y)
        x.untyped_storage().resize_(0)
        x.untyped_storage().resize_(16)
        with torch.no_grad():
            x.copy_(torch.arange(4.0))
        outputs.append((first, run(x, y), x.untyped_storage().nbytes()))
    (e1, e2, eb), (c1, c2, cb) = outputs
    torch.testing.assert_close(c1, e1)
    torch.testing.assert_close(c2, e2)
    assert cb == eb == 16


def storage_reads(x: T, y: T) -> object:
    return x * x.untyped_storage().nbytes() + y


def test_storage_reads_match_eager(compile_fn: CompileFn | None) -> None:
    assert_matches_eager(storage_reads, _two, compile_fn=compile_fn)


@pytest.mark.parametrize(("f", "make_inputs"), [(free_after_use, _two), (alloc_and_fill, _freed)])
def test_storage_resize_refused_through_dynamo(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]]
) -> None:
    """Dynamo captures the resize as inductor::resize_storage_bytes_ on a graph input: refused too (it had run as a
    functional no-op, leaving the input's storage its old size)."""
    from subclassaot.tools.dynamo_backend import subclassaot_backend

    torch._dynamo.reset()
    try:
        with pytest.raises(UnsupportedError, match="resize_\\(\\) of the storage of"):
            torch.compile(f, backend=subclassaot_backend)(*make_inputs())
    finally:
        torch._dynamo.reset()
