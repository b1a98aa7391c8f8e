"""Fuzz regressions about gradients and backward: gradient types and presence, requires_grad of outputs, backward
errors (fuzz seeds 3000 and 5000). Each program passes the oracle or is refused with the rule's text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def check(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# See Note [Gradient Types Follow The Tangents Given]


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


# ---------------------------------------------------------------------------------------------------------------
# See Note [Original Values After In-Place View Ops]


def test_write_then_transpose_of_view_input(compile_fn: CompileFn | None) -> None:
    # seed 3000 #1940: the backward raised "invalid gradient at index 0 - got [1, 2] but expected shape compatible
    # with [2, 1]".
    def f(x0: T) -> object:
        x0.add_(-1.0)
        x0.transpose_(0, 1)
        return (x0,)

    check(f, lambda: (nonleaf(2).unsqueeze(-2),), compile_fn)


def test_no_grad_transpose_of_leaf_returned_beside_nonleaf_sum(compile_fn: CompileFn | None) -> None:
    # Note [Unreached Inputs Are Detached]: the Function took x0 and made its gradient accumulator for the (2, 3)
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
# See Note [Subclass Gradient Strides]


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
# See Note [Metadata Changes Under no_grad]


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
# See Note [No-Grad Views Made After The Bump]


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
# See Note [Views Between In-Place View Ops]


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
# See Note [Outputs That An Input Was set_() To]


@pytest.mark.parametrize("subclass", [False, True])
def test_no_grad_set_of_computed_tensor_to_input_is_refused(compile_fn: CompileFn | None, subclass: bool) -> None:
    # seed 3000 #2746, seed 5000 #1136: eager's output has AddBackward0 (MulBackward0) over x0's storage; ours came
    # back without history. A plain one is now supported (Note [Outputs That An Input Was set_() To]; seed 40000
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
