"""Fuzz follow-up (seed 45000 #3453): a leaf read by a view, whose `.data =` then assigns it that view, returned.
Whether the backward raises depends on whether the gradient accumulator made at the leaf's old size is still alive
after the call, and reference cycles (WrapperTensor's `_rewrap`, the runtime's output builder) kept graphs alive
until the next garbage collection: the result depended on when the collector ran (Note [Rewrapping Holds No
Cycle]). The parity checks run with the collector off, so that a cycle would show."""

from __future__ import annotations

import functools
import gc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_with_grad, leaf, nonleaf, pair

T = torch.Tensor

READS: dict[str, Callable[[T], T]] = {
    "select": lambda x: x.select(0, -1),
    "view": lambda x: x.view(16),
    "transpose": lambda x: x.transpose(0, 1),
    "unsqueeze": lambda x: x.unsqueeze(0),
}


@contextmanager
def no_collector() -> Iterator[None]:
    while gc.collect():  # until nothing is left: freeing earlier tests' cycles can run finalizers that free more
        pass
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _with_plain(maker: Callable[[], T]) -> tuple[object, ...]:
    return (torch.randn(4, 4), maker())


def pair_leaf() -> T:
    return pair(4, 4, requires_grad=True)


def test_plain_tensor_written_by_a_subclass_op_is_freed_without_a_collection(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #3453: `x0.data.add_(t0)` with t0 a PairTensor that requires grad: the op's results were held
    # by a cycle through `_rewrap`'s recursive closure, and with them the plain tensor's AddBackward0 graph
    with no_collector():
        x1 = pair_leaf()
        z = torch.zeros(4)
        with torch.enable_grad():
            z.add_(x1.select(0, -1))
        gone = weakref.ref(z)
        del z
        assert gone() is None  # freed by reference counting (no collection runs here)


def test_data_assigned_a_view_read_before_with_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #3453 (shrunk): x0 plain, x1 a PairTensor leaf; eager's backward raised only until a
    # collection freed the cycle holding x1's accumulator of size (4, 4)
    def add(x0: T, x1: T) -> object:
        t0 = x1.select(0, -1)
        x0.data.add_(t0)
        x1.data = t0
        return (x1,)

    def plain_leaf() -> T:
        return leaf(4, 4)

    for maker in (pair_leaf, plain_leaf):
        with no_collector():
            check_with_grad(add, functools.partial(_with_plain, maker), compile_fn)


def test_data_assigned_a_view_variants(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #3453 variants: reads by select/view/transpose/unsqueeze, a plain or PairTensor leaf, with and
    # without the in-place write of the view into another tensor, the view returned too (its graph keeps the old
    # accumulator alive: eager's backward raises where the new size does not reduce to the old one)
    def programs(read: Callable[[T], T]) -> list[Callable[..., object]]:
        def add(x0: T, x1: T) -> object:
            t0 = read(x1)
            x0.data.add_(t0)
            x1.data = t0
            return (x1,)

        def plain(x0: T, x1: T) -> object:
            t0 = read(x1)
            x1.data = t0
            return (x1,)

        def kept(x0: T, x1: T) -> object:
            t0 = read(x1)
            x0.data.add_(t0)
            x1.data = t0
            return (x1, t0)

        def kept_mul(x0: T, x1: T) -> object:
            t0 = read(x1)
            t1 = t0.mul(2)
            x1.data = t0
            return (x1, t1)

        return [add, plain, kept, kept_mul]

    for read in READS.values():
        for maker in (pair_leaf, lambda: leaf(4, 4)):

            def make_inputs(maker: Callable[[], T] = maker, read: Callable[[T], T] = read) -> tuple[object, ...]:
                x1 = maker()
                return (torch.zeros(read(x1.detach()).shape), x1)

            for fn in programs(read):
                with no_collector():
                    check_with_grad(fn, make_inputs, compile_fn)


def test_data_assigned_a_view_of_a_leaf_passed_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #3453 (as generated, shrunk with the `_rewrap` cycle gone): the leaf passed as x0 and x2, a
    # plain non-leaf x1; the runtime's output builder (regenerate.build_outputs) held the compiled Function's outputs
    # in a cycle, and with them its node's edge to the old accumulator: our backward raised where eager's did not
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x2.select(0, -1)
        x1.data.add_(t0)
        x2.data = t0
        return (x2,)

    def views(x0: T, x1: T, x2: T) -> object:
        t0 = x2.select(0, -1)
        t0.view((4, 1, 1))
        x2.transpose(0, 1)
        x1.data.add_(t0)
        with torch.no_grad():
            x2.data = x2
        x2.data = t0
        return (x1, x2, x2)

    for fn in (f, views):
        for maker in (pair_leaf, lambda: leaf(4, 4)):
            for other in (lambda: nonleaf(4, 4), lambda: torch.randn(4, 4)):

                def make_inputs(maker: Callable[[], T] = maker, other: Callable[[], T] = other) -> tuple[object, ...]:
                    x = maker()
                    return (x, other(), x)

                with no_collector():
                    check_with_grad(fn, make_inputs, compile_fn)


def test_a_compiled_call_leaves_no_cycle(compile_fn: CompileFn | None) -> None:
    # fuzz seed 45000 #3453: the runtime's output builder held the compiled Function's outputs in a cycle
    import subclassaot

    def f(x0: T, x1: T) -> object:
        t0 = x1.select(0, -1)
        x1.data = t0
        return (x1, t0.mul(2), t0)

    for maker in (pair_leaf, lambda: leaf(4, 4)):
        compiled = (compile_fn or subclassaot.compile)(f)
        with torch.enable_grad():
            for _ in range(2):  # compiles, and probes fakes (those may leave cycles: no tensor of the caller's)
                compiled(torch.zeros(4), maker())
            with no_collector():
                args = (torch.zeros(4), maker())
                outs = compiled(*args)
                assert isinstance(outs, tuple)
                refs = [weakref.ref(t) for t in (*args, *outs)]
                del args, outs
                assert all(r() is None for r in refs)  # freed by reference counting (no collection runs here)
