"""Fuzz regressions (issue #9): programs our pipeline crashed on where eager runs, and programs about eager's own
errors on views (a grad_fn that raises, views of multi-output ops written in place). Each is a shrunk fuzz program;
the seed and index are in the test's docstring."""

from __future__ import annotations

import pytest
import torch

import subclassaot
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, pair_nonleaf

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# A leaf that requires grad written only through a tensor set_() or `.data =`-assigned to its storage


def test_leaf_written_through_set_alias_after_no_grad_write(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #7901: the no_grad write advanced the leaf's version; the write under grad went through t0."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        with torch.no_grad():
            x0.copy_(t0)
        set_to(t0, x0)
        t0.fill_(0.5)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((), requires_grad=True), torch.randn(()))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_leaf_written_through_data_alias_after_no_grad_write(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #5074."""

    def f(x0: T, x1: T) -> object:
        x1.data = x0
        with torch.no_grad():
            x0.mul_(3.0)
        x1.add_(-1.0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2,), requires_grad=True), torch.randn((3, 2, 4)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_aliased_leaf_inputs_data_alias_gets_inplace_view_op(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #2360: the same leaf passed twice (a synthetic base); t0.transpose_() under grad is no write to
    the leaf's own autograd history."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.add(0.5)
        x0.data.mul_(0.5)
        t0.data = x0
        t0.transpose_(0, 1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 1), requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_leaf_written_through_itself_still_raises() -> None:
    """The other side of the rule: a write under grad through the leaf itself raises, compiled as in eager."""

    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        x0.mul_(2.0)
        return ()

    def make_inputs() -> tuple[T, T]:
        return (torch.randn(2, requires_grad=True), torch.randn(2))

    with torch.enable_grad():
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            f(*make_inputs())
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            subclassaot.compile(f)(*make_inputs())


# ---------------------------------------------------------------------------------------------------------------
# unbind() views among the inputs and outputs: eager's grad_fn check on a multi-output view


def test_unbind_input_read_while_another_member_writes_is_refused(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #2426 (crashed: a wrapper-level copy_ into x0): x0, an unbind() output, is saved by the write
    through x1, which advances their base's counter; eager's backward raises when it unpacks x0 (Note [No-Grad Views
    Made After The Bump])."""

    def f(x0: T, x1: T) -> object:
        x1.mul_(x0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0.unbind(0)[0], b0.select(0, 1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "is a view made by an op that returns several views")


def test_subclass_member_written_only_through_another_member(compile_fn: CompileFn | None) -> None:
    """x0 shares its base's version counter with x1, written in place, but the program never reads x0: x0 gets no
    wrapper-level copy_ of its own (eager writes nothing through it; a copy_ into an unbind() output raises)."""

    def f(x0: T, x1: T) -> object:
        x1.mul_(2.0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(2)
        return (b0.unbind(0)[0], b0.select(0, 1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unread_unbind_input_after_early_inplace_view_replay(compile_fn: CompileFn | None) -> None:
    """Seed 5000 #550: the returned t0's t_() is replayed on the input before the graph runs, which makes reading
    x1's grad_fn raise; x1 reaches no output, so it goes into the compiled Function detached."""

    def f(x0: T, x1: T) -> object:
        t0 = x0.expand((3, 1))
        t0.t_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(3, 1)
        return (b0, b0.unbind(1)[0])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_unbind_output_of_alias_whose_version_a_no_grad_view_op_advanced(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #9285: eager's returned unbind() view raises when its grad_fn is read (and in backward), because
    an in-place view op on a view of the other alias advanced the shared counter: the aliases stay one base."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.unbind(1)[0]
        t1 = x0.select(2, -2)
        with torch.no_grad():
            t1.unsqueeze_(0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 3), requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Inputs whose elements overlap run as contiguous clones in training


def test_view_of_overlapping_input_that_only_its_strides_allow(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #1090 (crashed with the fake view's ValueError): the view succeeds on eager's zero strides, which
    the training trace now keeps (zero-stride inputs run as an expanded clone, test_fuzz_viewbase.py)."""

    def f(x0: T) -> object:
        t0 = x0.expand((1, -1, 2))
        t0.view((1, 4))
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1, 2)
        return (b0.as_strided((2,), (0,), 0).view((1, -1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_overlapping_plain_input(compile_fn: CompileFn | None) -> None:
    """The plain-tensor form of seed 3000 #1090."""

    def f(x0: T) -> object:
        return x0.expand((1, -1, 2)).view((1, 4)).sum()

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((1, 2), requires_grad=True).clone()
        return (b0.as_strided((2,), (0,), 0).view((1, -1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_early_replays_run_in_program_order(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #9285 (unshrunk): out[1], an unbind() view of x2, was made before out[0]'s no_grad unsqueeze_()
    advanced their base's counter; both outputs are rebuilt before the epilogue, in the program's order, so that
    out[1]'s grad_fn raises as eager's does."""

    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x2.unbind(1)[0]
        t1 = x1.select(2, -2)
        with torch.no_grad():
            t1.unsqueeze_(0)
        return (t1, t0, t1)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 3), requires_grad=True)
        return (b0, b0, b0.as_strided((1, 1), (1, 0), 0))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_output_set_to_input_then_written_with_grad(compile_fn: CompileFn | None) -> None:
    """Seed 3000 #7901 (unshrunk; diverged: out[1] came back a leaf without requires_grad): t0, set_() to x0 under
    no_grad, then filled with grad enabled, has eager's FillBackward history on x0's storage. Refused, then
    supported: the graph computes it, set_() onto x0 after the epilogue (Note [Outputs That An Input Was set_() To])."""

    def f(x0: T, x1: T) -> object:
        t0 = x1.add(3.0)
        with torch.no_grad():
            x0.copy_(t0)
        t1 = t0.add(3.0)
        with torch.no_grad():
            set_to(t0, x0)
        t0.fill_(0.5)
        return (t1, t0)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = torch.randn((), requires_grad=True).clone()
        return (torch.randn((), requires_grad=True), b1)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
