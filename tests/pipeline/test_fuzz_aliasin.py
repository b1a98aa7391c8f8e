"""Fuzz follow-ups (helper aliasin): the same tensor object passed at several positions is one input of the compiled
program (Note [Inputs Passed Twice Are One Input]); its layout changes in training were refused as metadata changes
of aliased inputs (fuzz seed 40000)."""

from __future__ import annotations

import torch

import subclassaot
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _twice(make: T) -> tuple[object, ...]:
    return (make, make)


def test_t_then_write_through_the_other_name(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #483 (shrunk)
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x1.add_(2.0)
        return (x0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: _twice(nonleaf(4, 3)), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _twice(pair_nonleaf(4, 3)), compile_fn=compile_fn)


def test_no_grad_unsqueeze_then_reads(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #3301, #6134 (shrunk): an in-place view op under no_grad, then a use with grad through the other
    def f(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            x1.unsqueeze_(-1)
        x0.copy_(x2.sin())
        return (x2, x2.add(0.5))

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 1), *_twice(nonleaf(3))), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: (pair(3, 1), *_twice(pair_nonleaf(3))), compile_fn=compile_fn)


def test_subclass_leaf_changed_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #1189, #2813 (shrunk): a leaf PairTensor passed twice, its layout changed under no_grad
    def unsqueezed(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.unsqueeze_(-1)
        return (x0,)

    def transposed(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        return (x1,)

    with torch.enable_grad():
        assert_matches_eager(unsqueezed, lambda: _twice(pair(requires_grad=True)), compile_fn=compile_fn)
        assert_matches_eager(unsqueezed, lambda: _twice(pair(3, requires_grad=True)), compile_fn=compile_fn)
        assert_matches_eager(transposed, lambda: _twice(pair(3, 1, requires_grad=True)), compile_fn=compile_fn)
        assert_matches_eager(transposed, lambda: _twice(pair(3, 2, requires_grad=True)), compile_fn=compile_fn)


_RESIZED = "gets another size from an in-place view op under torch.no_grad"


def test_subclass_leaf_resized_under_no_grad_then_read(compile_fn: CompileFn | None) -> None:
    # Note [Subclass Leaves Resized Under no_grad]: the compiled backward raised where eager's ran (a single input
    # diverged the same before; passed twice, the program was refused as an alias-group change)
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
        return (x0.mul(2.0),)

    def unsqueezed(x0: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(0)
        return (x0.sin(),)

    def twice(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        return (x1, x0.mul(2.0))

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(3, 2, requires_grad=True),), compile_fn, _RESIZED)
        assert_refused(twice, lambda: _twice(pair(3, 1, requires_grad=True)), compile_fn, _RESIZED)
        assert_refused(unsqueezed, lambda: (pair(requires_grad=True),), compile_fn, _RESIZED)


def test_grad_then_no_grad_view_ops(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #3362 (shrunk)
    def f(x0: T, x1: T) -> object:
        x0.unsqueeze_(-1)
        with torch.no_grad():
            x0.t_()
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: _twice(pair_nonleaf()), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _twice(pair_nonleaf(2)), compile_fn=compile_fn)


def test_leaf_data_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2195 (shrunk): `.data =` on a leaf passed twice, beside an unrelated input
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.unsqueeze(-2)
        x1.data = t0
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3), *_twice(torch.randn(2, 1, requires_grad=True)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_to_a_view_of_itself(compile_fn: CompileFn | None) -> None:
    # the same object set_() to a view of itself under no_grad, then read through the other name
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1.view(-1))
        return (x1.mul(2.0),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: _twice(nonleaf(3, 2)), compile_fn=compile_fn)


def test_inference_and_tied_names(compile_fn: CompileFn | None) -> None:
    # inference: a t_() through one name is seen through the other; a later call with two distinct tensors
    # recompiles (the guards check the positions hold one object)
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x1.mul_(2.0)
        return (x1.add(1.0), x0)

    with torch.no_grad():
        assert_matches_eager(f, lambda: _twice(torch.randn(2, 3)), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _twice(pair(2, 3)), compile_fn=compile_fn)
    if compile_fn is not None:
        return
    compiled = subclassaot.compile(f, backend="eager")
    x = torch.randn(2, 3)
    compiled(x, x)
    assert x.shape == (3, 2)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    expected_b = b * 2
    compiled(a, b)
    assert a.shape == (3, 2) and torch.equal(b, expected_b)
    assert compiled.compile_count == 2
    assert "is args[0]" in compiled.entries[0].guards.source
