"""PyTorch-corpus follow-ups (session 13, "pairset"): PairTensor programs the pipeline refused, now parity tests.

set_() of a PairTensor onto a plain tensor: eager's wrapper then shares the plain tensor's storage with its own inner
tensors (Note [Wrappers set_() To A Plain Tensor]); set_() back to the size it had, and set_() under dynamic shapes
(Note [Subclass Inputs Mutated In Training]); an inner tensor of an input
that requires grad written directly (Note [Subclass Inputs Mutated In Training]); set_() under no_grad
onto another input, then a write with grad (refused: Note [Writes With Grad After .data =]).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
    twice,
)

T = torch.Tensor
HIDDEN_SET_WRITE = (
    r"set_\(\) it under no_grad to another input's storage and then wrote it with grad enabled.*"
    r"Note \[Writes With Grad After \.data =\]"
)
Make = Callable[[], tuple[object, ...]]


def _pair_makers(*shape: int) -> list[tuple[Make, bool]]:
    """(maker, may run with grad): a PairTensor without grad, a non-leaf one, a leaf one (set_ under no_grad only)."""
    return [
        (lambda: (pair(*shape),), True),
        (lambda: (pair_nonleaf(*shape),), True),
        (lambda: (pair(*shape, requires_grad=True),), False),
    ]


def _check_all(fn: Callable[..., object], makers: list[tuple[Make, bool]], compile_fn: CompileFn | None) -> None:
    for make, with_grad in makers:
        check_no_grad(fn, make, compile_fn)
        if with_grad:
            check_with_grad(fn, make, compile_fn)
            with torch.enable_grad():
                assert_matches_eager(fn, make, compile_fn=compile_fn, compile_kwargs={"dynamic": True})


def test_pair_set_to_plain_intermediate(compile_fn: CompileFn | None) -> None:
    # PyTorch test_input_mutation_set__input_mutation on a PairTensor (corpus pair_input_mutation_set__input_mutation):
    # the compiled wrapper kept a storage of its own where eager's shares the arange's with its inner tensors
    def f(a: T) -> object:
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        with torch.no_grad():
            set_to(a, b)
        return a * b

    def written_after(a: T) -> object:  # a write through the wrapper writes the shared storage once per inner tensor
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        with torch.no_grad():
            set_to(a, b)
            a.mul_(2)
        return a + 1

    def strided(a: T) -> object:  # a non-contiguous view as the source
        b = torch.arange(18, dtype=a.dtype).reshape(3, 6)[:, ::2]
        with torch.no_grad():
            set_to(a, b)
        return a + b

    for fn in (f, written_after, strided):
        _check_all(fn, _pair_makers(3, 3), compile_fn)


def test_pair_set_to_plain_returned_or_resized(compile_fn: CompileFn | None) -> None:
    # the plain source returned too (the wrapper shares the output's storage), and a source of another shape (the
    # wrapper takes it): parity without grad and on an input that does not require grad; on a non-leaf that requires
    # grad they stay refused, as for a plain input (returned: the output would need the set_() tensor's history) and
    # by Note [Subclass Inputs Mutated In Training] (a read with grad after a set_() to another size)
    def returned(a: T) -> object:
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        with torch.no_grad():
            set_to(a, b)
        return b, a

    def other_shape(a: T) -> object:
        b = torch.arange(12, dtype=a.dtype)
        with torch.no_grad():
            set_to(a, b)
        return a.sum()

    for fn, match in ((returned, "shares storage with args"), (other_shape, "args.0.: a tensor subclass input")):
        for make, _ in _pair_makers(3, 3):
            check_no_grad(fn, make, compile_fn)
        check_with_grad(fn, lambda: (pair(3, 3),), compile_fn)
        refused_with_grad(fn, lambda: (pair_nonleaf(3, 3),), compile_fn, match)


def test_pair_set_to_plain_and_back(compile_fn: CompileFn | None) -> None:
    # PyTorch test_input_mutation_set__nop on a PairTensor (corpus pair_input_mutation_set__nop)
    def f(a: T) -> object:
        b = torch.arange(9, dtype=a.dtype)
        a_old = torch.ops.aten.alias.default(a)
        with torch.no_grad():
            set_to(a, b)
            set_to(a, a_old)
        return a + b.reshape(3, 3)

    def view_between(a: T) -> object:  # a view taken while a had the other size, read after the set_() back
        b = torch.arange(9, dtype=a.dtype)
        a_old = torch.ops.aten.alias.default(a)
        with torch.no_grad():
            set_to(a, b)
        v = a.view(9)
        with torch.no_grad():
            set_to(a, a_old)
        return v * 2, a + 1

    def view_after(a: T) -> object:  # Note [Subclass Inputs Mutated In Training]: a view taken after the set_() back
        b = torch.arange(9, dtype=a.dtype)
        a_old = torch.ops.aten.alias.default(a)
        with torch.no_grad():
            set_to(a, b)
            set_to(a, a_old)
        return a.view(9) * 2

    for fn in (f, view_after):
        _check_all(fn, _pair_makers(3, 3), compile_fn)
    for make, _ in _pair_makers(3, 3):
        check_no_grad(view_between, make, compile_fn)
    check_with_grad(view_between, lambda: (pair(3, 3),), compile_fn)
    refused_with_grad(view_between, lambda: (pair_nonleaf(3, 3),), compile_fn, "args.0.: a tensor subclass input")


def test_pair_set_to_plain_input(compile_fn: CompileFn | None) -> None:
    # a plain input as the source: the wrapper ends on the plain input's storage
    def f(a: T, x: T) -> object:
        with torch.no_grad():
            set_to(a, x)
        return a + 1

    def source_written(a: T, x: T) -> object:  # a later write of the source reaches both inner tensors
        with torch.no_grad():
            set_to(a, x)
            x.add_(1)
        return a * 2

    for fn in (f, source_written):
        check_no_grad(fn, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
        check_with_grad(fn, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
        check_with_grad(fn, lambda: (pair_nonleaf(3, 3), torch.randn(3, 3)), compile_fn)


def test_pair_intermediate_set_to_plain(compile_fn: CompileFn | None) -> None:
    # a PairTensor made by the program set_() onto a plain tensor and returned: its wrapper shares the plain storage
    def f(a: T, x: T) -> object:
        w = a * 2
        set_to(w, x)
        return w

    def intermediate_source(a: T) -> object:
        w = a * 2
        b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
        set_to(w, b)
        return w, b

    check_no_grad(f, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
    check_with_grad(f, lambda: (pair(3, 3), torch.randn(3, 3)), compile_fn)
    check_no_grad(intermediate_source, lambda: (pair(3, 3),), compile_fn)
    check_with_grad(intermediate_source, lambda: (pair(3, 3),), compile_fn)


def _pair_and_leaf() -> list[tuple[Make, bool]]:
    return [
        (lambda: (pair(2, 3), leaf(2, 3)), True),
        (lambda: (pair_nonleaf(2, 3), leaf(2, 3)), True),
        (lambda: (pair(2, 3, requires_grad=True), leaf(2, 3)), True),
    ]


def test_pair_inner_tensor_written_directly(compile_fn: CompileFn | None) -> None:
    # PyTorch test_subclass_inner_mutated on a PairTensor that requires grad (corpus pair_inner_mutated_train): the
    # pipeline refused writing some inner tensors but not others; eager records nothing on the wrapper
    def f(x: T, y: T) -> object:
        x.a.add_(1)  # type: ignore[attr-defined]
        return x * 2

    def squared(x: T, y: T) -> object:  # the gradient reads the new values, not the write
        x.a.mul_(x.a)  # type: ignore[attr-defined]
        return x * x

    def both(x: T, y: T) -> object:
        x.a.add_(1)  # type: ignore[attr-defined]
        x.b.mul_(3)  # type: ignore[attr-defined]
        return x.sin()

    def through_view(x: T, y: T) -> object:
        x.a.view(-1)[0].fill_(5)  # type: ignore[attr-defined]
        return x * x, x.b  # type: ignore[attr-defined]

    def grad_value(x: T, y: T) -> object:  # a value that requires grad written into the inner tensor
        x.a.add_(y)  # type: ignore[attr-defined]
        return x * 2

    def other_input(x: T, y: T) -> object:
        x.a.add_(1)  # type: ignore[attr-defined]
        return x * y

    for fn in (f, squared, both, through_view, grad_value, other_input):
        _check_all(fn, _pair_and_leaf(), compile_fn)


def test_pair_inner_tensor_written_below_autograd(compile_fn: CompileFn | None) -> None:
    # corpus pair_inner_mutated_train, variants: the inner tensor written under no_grad (was refused as "some inner
    # tensors but not others"), through `x.data` or `x.detach()`, the input returned or viewed after the write
    def no_grad_one(x: T, y: T) -> object:
        with torch.no_grad():
            x.a.add_(1)  # type: ignore[attr-defined]
        return x * 2

    def no_grad_returned(x: T, y: T) -> object:
        with torch.no_grad():
            x.b.add_(1)  # type: ignore[attr-defined]
        return x, x.view(-1)

    def view_before(x: T, y: T) -> object:  # a view taken before the write, returned
        v = x.view(-1)
        with torch.no_grad():
            x.a.add_(1)  # type: ignore[attr-defined]
        return v

    def through_data(x: T, y: T) -> object:
        x.data.mul_(2)
        return x * 2

    def through_detach(x: T, y: T) -> object:  # shares x's version counter: the wrapper-level rule
        x.detach().mul_(2)
        return x * 2

    def returned_inner(x: T, y: T) -> object:
        x.a.mul_(2)  # type: ignore[attr-defined]
        return x.a, x.t()  # type: ignore[attr-defined]

    for fn in (no_grad_one, no_grad_returned, view_before, through_data, through_detach, returned_inner):
        _check_all(fn, _pair_and_leaf(), compile_fn)
    # a view of a PairTensor as the input, and one passed twice
    check_with_grad(no_grad_one, lambda: (pair_nonleaf(2, 3).view(-1), leaf(6)), compile_fn)
    check_with_grad(no_grad_one, lambda: (pair(2, 3, requires_grad=True)[0], leaf(3)), compile_fn)
    check_with_grad(returned_inner, twice(lambda: pair_nonleaf(3, 3)), compile_fn)


def test_pair_set_under_no_grad_then_written_stays_refused(compile_fn: CompileFn | None) -> None:
    # PyTorch test_set__not_allowed on a PairTensor (corpus pair_set__not_allowed_train): refused by the rule for plain
    # inputs, which now names it (it was the generic "only data writes" refusal)
    def f(a: T, b: T) -> object:
        with torch.no_grad():
            set_to(a, b)
        a.mul_(2)
        return a + b

    refused_with_grad(f, lambda: (pair_nonleaf(3, 3), pair_nonleaf(3, 3)), compile_fn, HIDDEN_SET_WRITE)
    check_no_grad(f, lambda: (pair_nonleaf(3, 3), pair_nonleaf(3, 3)), compile_fn)
    check_with_grad(f, lambda: (pair(3, 3), pair(3, 3)), compile_fn)
