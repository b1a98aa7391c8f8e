"""Gradient types (PairTensor vs Tensor) and gradient presence (None vs a tensor) of inputs and outputs, and
requires_grad of outputs (Note [Input Updates], Note [Aliased Inputs In Training]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import assert_refused, nonleaf, pair, pair_nonleaf

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: gradient types (PairTensor vs Tensor) and gradient presence (None vs a tensor).
#
# - A plain input that is its own base in eager, passed twice or with a view of it, written with a subclass operand:
#   eager's gradient is the subclass one (Note [Aliased Inputs In Training]; seed 10000 #1788, 11000 #6100).
# - A view of an input set_() onto itself under no_grad: eager regenerates its grad_fn (AsStridedBackward0), whose
#   gradient of an empty view is plain (seed 9000 #4529).
# - A leaf set_() onto itself under no_grad gets a new gradient accumulator, which a backward that raises in an older
#   node still reaches (Note [Gradient Accumulators Of Leaves]; seed 10000 #2934).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


def _leaf_and_nonleaf(*shape: int) -> tuple[T, T]:
    with torch.enable_grad():
        leaf = torch.randn(shape, requires_grad=True)
        return leaf, leaf.clone()


def test_one_object_passed_twice_written_with_pair(compile_fn: CompileFn | None) -> None:
    # seed 10000 #1788: leaf 0 behind args[0].grad was a plain Tensor where eager's is a PairTensor
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        x0.mul_(x1)
        return (x2,)

    def make_inputs() -> tuple[T, T, T]:
        b0 = nonleaf(1, 4)
        return (b0, pair(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_input_and_its_view_written_with_pair(compile_fn: CompileFn | None) -> None:
    # seed 11000 #6100: x1 is x2.t() (a view of x2), x2 written with a PairTensor operand
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        t1 = x0.add(-1.0)
        with torch.no_grad():
            x2.mul_(t1)
        x2.mul_(x0)
        return (x1,)

    def make_inputs() -> tuple[T, T, T]:
        b1 = nonleaf(2, 1)
        return (pair(requires_grad=True).t(), b1.contiguous().t(), b1)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_one_object_passed_twice_gradient_type_is_eagers(compile_fn: CompileFn | None) -> None:
    # The leaf's gradient is a PairTensor on both sides (the oracle compares types; this says which one it is).
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        x0.mul_(x1)
        return (x2,)

    run = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f)
    with torch.enable_grad():
        leaf, b0 = _leaf_and_nonleaf(3)
        (out,) = cast(tuple[T], run(b0, pair(), b0))
        torch.autograd.backward(out.sum())
    assert type(leaf.grad) is PairTensor


def test_one_object_passed_twice_read_then_written(compile_fn: CompileFn | None) -> None:
    # A read through the other name before the write: eager's gradient sums both paths.
    def f(x0: T, x1: T, x2: T) -> tuple[T, T]:
        y = x2 * 2
        x0.mul_(x1)
        return (y, x2)

    def make_inputs() -> tuple[T, T, T]:
        b0 = nonleaf(2, 3)
        return (b0, pair(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_one_leaf_passed_twice_written_under_no_grad(compile_fn: CompileFn | None) -> None:
    # A leaf passed twice (no view either): its write under no_grad is hidden from autograd, as in eager.
    def f(x0: T, x1: T, x2: T) -> tuple[T]:
        with torch.no_grad():
            x0.mul_(x1)
        return (x2 * 3,)

    def make_inputs() -> tuple[T, T, T]:
        b0 = torch.randn(4, requires_grad=True)
        return (b0, pair(), b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_empty_view_set_to_itself_under_no_grad(compile_fn: CompileFn | None) -> None:
    # seed 9000 #4529: args[0].grad was a PairTensor (SliceBackward0 of the replayed view) where eager's is plain
    # (the view's grad_fn, regenerated after the set_() bumped its version, is AsStridedBackward0)
    def f(x0: T, x1: T) -> tuple[T, T]:
        t0 = x0[2:2:1]
        with torch.no_grad():
            set_to(t0, t0)
        t1 = x1.sum()
        return (t0, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(2, 2, 1), pair(requires_grad=True)), compile_fn=compile_fn)


def test_view_set_to_itself_under_no_grad_has_eagers_grad_fn(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> tuple[T]:
        t0 = x0[1:3]
        with torch.no_grad():
            set_to(t0, t0)
        return (t0,)

    run = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f)
    with torch.enable_grad():
        (out,) = cast(tuple[T], run(nonleaf(4)))
    assert out.grad_fn is not None and type(out.grad_fn).__name__ == "AsStridedBackward0"
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4),), compile_fn=compile_fn)


def _same_twice(*shape: int) -> Callable[[], tuple[T, T]]:
    def make_inputs() -> tuple[T, T]:
        b0 = nonleaf(*shape)
        return (b0, b0)

    return make_inputs


def test_one_object_passed_twice_unsqueeze_then_transposed_write(compile_fn: CompileFn | None) -> None:
    # seed 8000 #4353 (test_set_under_no_grad.py): refused while the object ran as a view of its synthetic base, whose
    # view function missed unsqueeze_(); as its own base the trace runs it as eager does
    def f(x0: T, x1: T) -> tuple[()]:
        x0.unsqueeze_(-2)
        t0 = x0.transpose(0, 2)
        t0.mul_(t0)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(1, 2), compile_fn=compile_fn)


def test_one_object_passed_twice_t_then_expand(compile_fn: CompileFn | None) -> None:
    # seed 8000 #6029 (test_set_under_no_grad.py), likewise
    def f(x0: T, x1: T) -> tuple[()]:
        x0.t_()
        t0 = x0.expand((4, 1))
        x1.mul_(0.5)
        t0.transpose(0, 1)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, _same_twice(1, 4), compile_fn=compile_fn)


def _sin_then_set_to_itself(x0: T) -> tuple[T, T]:
    t0 = x0.sin()
    with torch.no_grad():
        set_to(x0, x0)
    t1 = t0.clone()
    return (x0, t1)


def test_pair_leaf_set_to_itself_under_no_grad(compile_fn: CompileFn | None) -> None:
    # seed 10000 #2934: eager's backward raises in SinBackward0 (x0 saved, then its version advanced) after the
    # returned x0 gave its new accumulator a gradient; ours had one accumulator, behind the raising Function
    with torch.enable_grad():
        assert_matches_eager(_sin_then_set_to_itself, lambda: (pair(2, requires_grad=True),), compile_fn=compile_fn)


def test_plain_leaf_set_to_itself_under_no_grad(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_matches_eager(
            _sin_then_set_to_itself, lambda: (torch.randn(2, requires_grad=True),), compile_fn=compile_fn
        )


def test_leaf_set_to_itself_then_returned_gets_its_gradient(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> tuple[T, T]:
        t0 = x0.sin()
        with torch.no_grad():
            set_to(x0, x0)
        return (x0, t0)

    run = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f)
    with torch.enable_grad():
        x = torch.randn(3, requires_grad=True)
        out, t0 = cast(tuple[T, T], run(x))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.backward([out.sum(), t0.sum()])
    assert x.grad is not None and torch.equal(x.grad, torch.ones(3))


def test_leaf_view_made_before_a_failing_node(compile_fn: CompileFn | None) -> None:
    # seed 9000 #8833: eager's SinBackward0 (made after t0) raises before t0's ViewBackward0 runs, so args[1].grad
    # stays None; ours regenerated t0 after the call, its node ran first (Note [Backward Errors Are
    # Deferred])
    def f(x0: T, x1: T) -> tuple[T, T]:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        t0 = x1.view(())
        t1 = x0.sin()
        return (t1, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4), torch.randn((), requires_grad=True)), compile_fn=compile_fn)


def test_leaf_view_made_after_a_failing_node(compile_fn: CompileFn | None) -> None:
    # The view made after sin: eager's ViewBackward0 runs first and args[1] gets its gradient before the raise;
    # the view stays replayed after the call
    def f(x0: T, x1: T) -> tuple[T, T]:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        t1 = x0.sin()
        t0 = x1.view(())
        return (t1, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4), torch.randn((), requires_grad=True)), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: a plain input that is a view, written in place with a subclass operand (fuzz seed 3001 #1564).
#
# Eager's CopySlices gives the view's old value a gradient of the type of the base's incoming gradient (plain here),
# where a write to a non-view gives the subclass one (Note [Input Updates]).
# ---------------------------------------------------------------------------------------------------------------------


def plain_view(*shape: int) -> T:
    """A plain non-leaf view: x.clone().transpose(0, 0) of a leaf that requires grad."""
    with torch.enable_grad():
        return torch.randn(shape, requires_grad=True).clone().transpose(0, 0)


def _mul_(x0: T, x1: T) -> tuple[T]:
    x1.mul_(x0)
    return (x1,)


@pytest.mark.parametrize("x0_grad", [False, True], ids=["pair", "pair_grad"])
def test_plain_view_written_with_pair(compile_fn: CompileFn | None, x0_grad: bool) -> None:
    # seed 3001 #1564: leaf 0 behind args[1].grad was a PairTensor where eager's is a plain Tensor
    def make_inputs() -> tuple[T, T]:
        return pair(1, requires_grad=x0_grad), plain_view(2)

    with torch.enable_grad():
        assert_matches_eager(_mul_, make_inputs, compile_fn=compile_fn)


def test_plain_view_written_with_pair_not_returned(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> tuple[T]:
        x1.mul_(x0)
        return (x0 * 2,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1, requires_grad=True), plain_view(2)), compile_fn=compile_fn)


def test_plain_view_read_then_written_with_pair(compile_fn: CompileFn | None) -> None:
    # A read before the write sends a PairTensor gradient along another path: eager's sum is a PairTensor.
    def f(x0: T, x1: T) -> tuple[T, T]:
        y = x1 * x0
        x1.mul_(x0)
        return y, x1

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(1), plain_view(2)), compile_fn=compile_fn)


def test_plain_slice_of_larger_base_written_with_pair(compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[T, T]:
        with torch.enable_grad():
            return pair(1), torch.randn(4, requires_grad=True).clone()[1:3]

    with torch.enable_grad():
        assert_matches_eager(_mul_, make_inputs, compile_fn=compile_fn)


def test_plain_view_written_with_pair_inference(compile_fn: CompileFn | None) -> None:
    with torch.no_grad():
        assert_matches_eager(_mul_, lambda: (pair(1), plain_view(2)), compile_fn=compile_fn)


def _leaf_grad_type(fn: object, view: bool) -> type:
    with torch.enable_grad():
        leaf = torch.randn(2, requires_grad=True)
        x1 = leaf.clone()
        x1 = x1.transpose(0, 0) if view else x1
        (out,) = fn(pair(1), x1)  # type: ignore[operator]  # a compiled or eager callable
        out.sum().backward()
    assert leaf.grad is not None
    return type(leaf.grad)


def test_entry_not_reused_across_view_and_non_view() -> None:
    """An entry compiled for a view input is guarded on it: a non-view non-leaf recompiles, and each call gets
    eager's gradient type (plain for the view, PairTensor for the non-view)."""
    compiled = subclassaot.compile(_mul_)
    for view in (True, False, True):
        assert _leaf_grad_type(compiled, view) is _leaf_grad_type(_mul_, view)
    assert _leaf_grad_type(_mul_, True) is torch.Tensor
    assert _leaf_grad_type(_mul_, False) is PairTensor


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions about gradients and backward: gradient types and presence, requires_grad of outputs, backward
# errors (fuzz seeds 3000 and 5000). Each program passes the oracle or is refused with the rule's text.
# ---------------------------------------------------------------------------------------------------------------------


def check(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Tangent Retrace]


def test_plain_copy_from_written_subclass_sends_plain_grad(compile_fn: CompileFn | None) -> None:
    # seed 3000 #5707 (and seed 5000 #3182, #8156, #9434, #9975): the backward through x1 alone gives x0 a plain
    # gradient in eager; the graph, traced with a tangent for x0's new value too, gave a PairTensor.
    def f(x0: T, x1: T) -> object:
        x1.copy_(x0)
        x0.add_(-1.0)
        return (x1,)

    check(f, lambda: (pair_nonleaf(), torch.randn(1, 2)), compile_fn)


def test_grad_type_through_every_output_stays_subclass(compile_fn: CompileFn | None) -> None:
    # The same program, differentiated through x0's new value as well: eager's gradient is a PairTensor.
    def f(x0: T, x1: T) -> object:
        x1.copy_(x0)
        x0.add_(-1.0)
        return (x1, x0)

    check(f, lambda: (pair_nonleaf(), torch.randn(1, 2)), compile_fn)


def _transposed_and_unsqueezed_then_written(a: T, b: T) -> object:
    a.t_()
    b.unsqueeze_(0)
    a.mul_(2)
    b.mul_(3)
    return a + b


def _written_then_view_returned(a: T, b: T) -> object:
    a.mul_(2)
    b.mul_(3)
    return b.view(b.shape), a + b


@pytest.mark.parametrize("f", [_transposed_and_unsqueezed_then_written, _written_then_view_returned])
@pytest.mark.parametrize("pair_first", [False, True], ids=["plain_then_pair", "pair_then_plain"])
def test_dynamic_backward_through_written_inputs_alone(
    compile_fn: CompileFn | None, f: Callable[..., object], pair_first: bool
) -> None:
    # corpus_pytorch2's aot_dispatch_input_*_train with dynamic=True: the backward through the written inputs alone
    # (no tangent for `a + b`) gives the plain input a plain gradient in eager. The retrace without that tangent read
    # the symbolic sizes in another order than the compiled joint, was taken for another forward, and the compiled
    # backward's PairTensor gradient reached the plain leaf.
    def make() -> tuple[object, ...]:
        plain, subclass = nonleaf(3, 3), pair_nonleaf(3, 3)
        return (subclass, plain) if pair_first else (plain, subclass)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_kwargs={"dynamic": True}, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Input Updates]


def test_write_then_transpose_of_view_input(compile_fn: CompileFn | None) -> None:
    # seed 3000 #1940: the backward raised "invalid gradient at index 0 - got [1, 2] but expected shape compatible
    # with [2, 1]".
    def f(x0: T) -> object:
        x0.add_(-1.0)
        x0.transpose_(0, 1)
        return (x0,)

    check(f, lambda: (nonleaf(2).unsqueeze(-2),), compile_fn)


def test_no_grad_transpose_of_leaf_returned_beside_nonleaf_sum(compile_fn: CompileFn | None) -> None:
    # Note [Backward Errors Are Deferred]: the Function took x0 and made its gradient accumulator for the (2, 3)
    # layout; a backward through the returned (3, 2) x0 then raised in MulBackward0.
    def f(x0: T, x1: T) -> object:
        t1 = x1.transpose(0, 0).add(x1)
        with torch.no_grad():
            x0.transpose_(0, 1)
        return (t1, x0)

    check(f, lambda: (torch.randn(2, 3, requires_grad=True), nonleaf(2, 3)), compile_fn)


def test_no_grad_unsqueeze_then_data_write_of_leaf(compile_fn: CompileFn | None) -> None:
    # seed 5000 #671: x0 reached the Function through the new values of its hidden (.data) write only, and its
    # gradient accumulator kept the () layout: args[0].grad had shape () where eager's has (1,).
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.unsqueeze_(-1)
        x0.data.add_(2.0)
        return (x0,)

    check(f, lambda: (torch.randn((), requires_grad=True),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Tangent Retrace]


def test_subclass_gradient_through_user_view_of_leaf(compile_fn: CompileFn | None) -> None:
    # seed 3000 #9854: the gradient of x0 (an expand of the tangent) was rebuilt with x0's contiguous strides, so
    # the user's ViewBackward viewed it as contiguous and the inner view raised "view size is not compatible".
    def f(x0: T) -> object:
        return (x0.sum(2),)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (pair(2, 3, requires_grad=True).view(3, 1, 2),)

    check(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Leaves Laid Out Anew Under no_grad]


def test_no_grad_transpose_beside_grad_view_op_on_view(compile_fn: CompileFn | None) -> None:
    # seed 5000 #3709: eager's backward through x0 raises (its grad_fn expects the (3, 4) layout); ours replayed the
    # t_() with grad, as the unsqueeze_() of a view made the input's change look autograd-visible, and did not.
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
        t0 = x0.transpose(0, 0)
        t0.unsqueeze_(0)
        return (x0,)

    check(f, lambda: (nonleaf(3, 4),), compile_fn)


@pytest.mark.parametrize("write_first", [True, False])
def test_no_grad_transpose_beside_grad_write(compile_fn: CompileFn | None, write_first: bool) -> None:
    def f(x0: T) -> object:
        if write_first:
            x0.mul_(2.0)
        with torch.no_grad():
            x0.t_()
        if not write_first:
            x0.mul_(2.0)
        return (x0,)

    check(f, lambda: (nonleaf(3, 4),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Views That Raise After A Bump]


def test_no_grad_view_made_after_transpose_of_input(compile_fn: CompileFn | None) -> None:
    # seed 5000 #8637 (inference): t1 was replayed before the epilogue, whose t_() then moved x0's version counter,
    # and reading t1.is_leaf raised "A view was created in no_grad mode ...".
    def f(x0: T) -> object:
        t0 = x0.t()
        x0.t_()
        t1 = t0[1:1:1]
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (nonleaf(3, 3),), compile_fn=compile_fn)


def test_no_grad_view_made_before_transpose_of_input(compile_fn: CompileFn | None) -> None:
    # The view made before the t_() keeps the early replay: its is_leaf raises in eager too.
    def f(x0: T) -> object:
        t0 = x0.t()
        x0.t_()
        return (t0[1:2], t0)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (nonleaf(3, 3),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Output Regeneration]


@pytest.mark.parametrize("grad_view", [True, False])
def test_view_of_no_grad_view_after_data_assignment(compile_fn: CompileFn | None, grad_view: bool) -> None:
    # seed 5000 #9438: t1 (a view, with grad on, of a no_grad view of x0) was regenerated by as_strided() with
    # grad on after `t0.data = x0` broke its chain: x0 got a gradient where eager's is None.
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.unsqueeze(-1)
        if grad_view:
            t1 = t0.transpose(1, 1)
        else:
            with torch.no_grad():
                t1 = t0.transpose(1, 1)
        t0.data = x0
        return (t1,)

    check(f, lambda: (torch.randn(2, requires_grad=True),), compile_fn)


def test_no_grad_view_of_intermediate_after_data_assignment(compile_fn: CompileFn | None) -> None:
    # seed 3000 #3430: t2 (a no_grad view of t0) came back with a grad_fn (regenerated with grad on after `t0.data
    # = t1`) and its backward raised "invalid gradient"; eager's is a leaf.
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0[2:2:1]
        with torch.no_grad():
            t2 = t0.view((1, 3, 1))
        t0.data = t1
        return (t2,)

    check(f, lambda: (nonleaf(3, 1),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Outputs Over Another Storage]


@pytest.mark.parametrize("subclass", [False, True])
def test_no_grad_set_of_computed_tensor_to_input_is_refused(compile_fn: CompileFn | None, subclass: bool) -> None:
    # seed 3000 #2746, seed 5000 #1136: eager's output has AddBackward0 (MulBackward0) over x0's storage; ours came
    # back without history. A plain one is now supported (Note [Outputs Over Another Storage]; seed 40000
    # #178); a subclass one is still refused.
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x0)
        with torch.no_grad():
            t0.set_(x0)  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        x = pair_nonleaf(4, 2) if subclass else torch.randn(4, 2, requires_grad=True)
        return (x, x)

    with torch.enable_grad():
        if not subclass:
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
            return
        assert_refused(f, make_inputs, compile_fn, "set_\\(\\) this tensor under no_grad after computing it with grad")


def test_no_grad_set_of_computed_tensor_alone_matches_eager(compile_fn: CompileFn | None) -> None:
    # Set to an intermediate no other output shares: computed by the graph, with its history.
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        with torch.no_grad():
            t0.set_(x0.sin())  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_
        return (t0,)

    check(f, lambda: (nonleaf(3),), compile_fn)


def test_written_detach_of_intermediate_is_refused(compile_fn: CompileFn | None) -> None:
    # seed 3000 #7187: eager's t1 has CopyBackwards over t0's storage; ours came back without history.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = t0.detach()
        t1.copy_(x0)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair_nonleaf(4, 2),), compile_fn, "detach\\(\\) of an intermediate")


def test_grad_view_of_intermediate_before_resizing_data_assignment_is_refused(compile_fn: CompileFn | None) -> None:
    # seed 3000 #3430 unshrunk: t1 was regenerated from t0 as it ends ((0, 1)), whose history has the (3, 1) size:
    # the backward raised "invalid gradient".
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0.transpose(0, 0)
        t2 = t0[2:2:1]
        t0.data = t2
        return (t2, t1)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(3, 1),), compile_fn, "taken before the program assigned its `.data`")


def test_no_grad_view_of_grad_view_made_after_transpose_of_aliased_input(compile_fn: CompileFn | None) -> None:
    # seed 5000 #8637 unshrunk (training): the last step made t2 under no_grad after x1.t_(); its first step had
    # grad on.
    def f(x0: T, x1: T) -> object:
        t0 = x1.t()
        x1.t_()
        with torch.no_grad():
            t2 = t0[1:1:1]
        return (t2, x1.clone())

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(3, 3)
        return (b0, b0.as_strided((2, 2), (3, 1), 0).expand((-1, 2)))

    check(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Gradients over the caller's tangent (Note [Gradient Accumulators Of Leaves]): eager's AccumulateGrad copies a gradient
# the
# caller still holds (a backward that passes it through unchanged) and takes one nobody else holds (a view a backward
# made of it); the oracle holds its tangents and compares which gradients share their memory.


def _through_clone(x: T) -> object:
    return x.clone()


def _through_add(x: T, y: T) -> object:
    return x + y


def _through_view(x: T) -> object:
    return x.view(-1)


def _through_two_outputs(x: T) -> object:
    return x.clone(), x * 2


@pytest.mark.parametrize("maker", [nonleaf, pair_nonleaf, lambda *s: pair(*s, requires_grad=True)])
@pytest.mark.parametrize("f", [_through_clone, _through_add, _through_view, _through_two_outputs])
def test_gradient_passed_through_does_not_share_the_callers_tangent(
    maker: Callable[..., T], f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # issue #27: a PairTensor leaf's compiled `.grad` was a new wrapper around the tangent's own inner tensors
    arity = 2 if f is _through_add else 1
    with torch.enable_grad():
        assert_matches_eager(f, lambda: tuple(maker(2, 3) for _ in range(arity)), compile_fn=compile_fn)


# A plain leaf whose gradient is a subclass output's tangent passed through unchanged (`x.exp() + w`, x a PairTensor):
# the Function returns the tangent itself, so AccumulateGrad copies it as eager's does; the other leaf's gradient is
# a new tensor. Mixed inputs: each side a subclass (PairTensor, torch's TwoTensor) or plain.


def _mixed_add(x: T, w: T) -> object:
    return x.exp() + w


def _mixed_radd(x: T, w: T) -> object:
    return w + x.exp()


def _mixed_sub(x: T, w: T) -> object:
    return w - x.exp()


def _mixed_rsub(x: T, w: T) -> object:
    return x.exp() - w


def _mixed_view(x: T, w: T) -> object:
    return x.exp().view(-1) + w.view(-1)


def _mixed_sum(x: T, w: T) -> object:
    return (x.exp() + w).sum()


def _plain_leaf(*shape: int) -> T:
    return torch.randn(shape, requires_grad=True)


def _pair_leaf(*shape: int) -> T:
    return pair(*shape, requires_grad=True)


def _two_leaf(*shape: int) -> T:
    two: T = TwoTensor(torch.randn(shape), torch.randn(shape))  # type: ignore[no-untyped-call]  # untyped in torch
    return two.requires_grad_()


@pytest.mark.parametrize(
    ("x_maker", "w_maker"),
    [
        (_pair_leaf, _plain_leaf),
        (_plain_leaf, _pair_leaf),
        (_two_leaf, _plain_leaf),
        (_plain_leaf, _two_leaf),
        (_pair_leaf, _two_leaf),
        (_two_leaf, _pair_leaf),
    ],
    ids=["pair-plain", "plain-pair", "two-plain", "plain-two", "pair-two", "two-pair"],
)
@pytest.mark.parametrize("f", [_mixed_add, _mixed_radd, _mixed_sub, _mixed_rsub, _mixed_view, _mixed_sum])
def test_plain_and_subclass_leaves_gradients_do_not_share_the_callers_tangent(
    x_maker: Callable[..., T], w_maker: Callable[..., T], f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # the plain `w`'s compiled `.grad` (a PairTensor, as eager's) was a new wrapper around the tangent's inner tensors,
    # where eager's AccumulateGrad copies the tangent the caller holds
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (x_maker(2, 3), w_maker(2, 3)), compile_fn=compile_fn)
